"""A stand-in checkout built from a model's committed upstream listing (``adapters/<model>/upstream_tree.json``):
every path of upstream's tree at the pin, each file holding one comment line (a placeholder, never upstream's text),
so a script that names a path upstream does not have fails as it would on the real checkout."""

from __future__ import annotations

from pathlib import Path

from adapters.contracts.tree import load_listing

#: text of every placeholder file: a comment in shell, Python, YAML and requirements syntax alike
PLACEHOLDER = "# stand-in for {path} ({size} bytes at {commit})\n"


def fake_checkout(model: str, dest: Path, only: tuple[str, ...] = ()) -> Path:
    """Write the tree of ``model``'s listing under ``dest`` (``only``: just the files under these prefixes)."""
    listing = load_listing(model)
    for path, (size, _) in listing.files.items():
        if only and not path.startswith(only):
            continue
        f = dest / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(PLACEHOLDER.format(path=path, size=size, commit=listing.listed_commit[:12]))
    return dest
