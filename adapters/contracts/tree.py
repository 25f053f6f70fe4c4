"""Upstream's file tree at the pinned commit, and the paths a contract and its setup script name in it.

``adapters/<model>/upstream_tree.json`` is generated, never written by hand::

    python -m adapters.contracts.tree <git dir or checkout> --model <model> [--commit <sha> --note <why>]

It lists every file of ``git ls-tree -r -l <commit>`` with its size in bytes and its line count (``null`` for a
binary file, or for a blob the snapshot lacks: large files and Git LFS content), and records, for every weight file
name the contract names (:func:`weight_names`), where upstream's own text names it at that commit (``names``: up to
three ``path:line``; an empty list: searched, not named; the contract must then say ``hub_confirmed``). The commit is
the contract's pin; ``--commit`` lists another one only with ``--note`` saying why (``listed_commit`` then differs
from ``commit``: a pin that no reachable snapshot holds; see docs/real-models.md).

:func:`named_paths` is what the contract and the printed setup script name inside the checkout (the entry script,
requirements files, scripts a recipe step runs, editable folders, files setup checks in place, ``sys.path``
folders), :func:`citations` the ``path:line`` references of the sections that must be proven against the tree
(``policies``, ``trained_regime``, ``day_one``), and :func:`problems` every one of them that the listing does not
hold, so a path renamed upstream fails ``tests/adapters/test_upstream_tree.py`` with its name.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from adapters.contracts.loader import ADAPTERS_DIR, load
from adapters.contracts.schema import Contract, file_name

TREE_FILE = "upstream_tree.json"
MAX_NAME_HITS = 3
_BINARY_PROBE = 8000  # bytes: a NUL among the first of them makes a blob binary (git's own heuristic)
#: a cited upstream line: ``owner/repo@<hex> path:line[-line]`` (the repository and commit optional)
CITATION = re.compile(r"(?:(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{7,40})\s+)?"
                      r"(?P<path>[\w./+-]+\.[A-Za-z0-9]+):(?P<start>\d+)(?:-(?P<end>\d+))?")
#: file names a recipe step's shell command hands to bash / python / pip -r as a file of the checkout
_RUN_FILE = re.compile(r"\.(sh|py|txt|toml|cfg|yaml|yml|json)$")


class TreeError(RuntimeError):
    """The source is not a git checkout or git directory, or lacks the commit (the message says what to pass)."""


@dataclass(frozen=True)
class TreeListing:
    """One model's listing. ``files``: path -> (size in bytes, lines), None where unknown. ``names``: weight file
    name -> where upstream's text names it (``path:line``). ``listed_commit`` differs from ``commit`` only for a
    substitute (``note`` says why)."""

    model: str
    repo: str
    commit: str
    listed_commit: str
    source: str
    files: Mapping[str, tuple[Optional[int], Optional[int]]]
    names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str = ""

    @property
    def exact(self) -> bool:
        return self.listed_commit == self.commit

    def has_file(self, path: str) -> bool:
        return _norm(path) in self.files

    def has_dir(self, path: str) -> bool:
        p = _norm(path)
        return p in ("", ".") or any(f.startswith(p + "/") for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "repo": self.repo, "commit": self.commit, "listed_commit": self.listed_commit,
                "source": self.source, "note": self.note, "names": {k: list(v) for k, v in sorted(self.names.items())},
                "files": {k: list(v) for k, v in sorted(self.files.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TreeListing":
        return cls(model=data["model"], repo=data["repo"], commit=data["commit"], listed_commit=data["listed_commit"],
                   source=data["source"], note=data.get("note", ""),
                   files={k: (v[0], v[1]) for k, v in data["files"].items()},
                   names={k: tuple(v) for k, v in data.get("names", {}).items()})


def _norm(path: str) -> str:
    parts = [p for p in Path(path).as_posix().split("/") if p not in ("", ".")]
    return "/".join(parts)


def listing_text(listing: TreeListing) -> str:
    """The file's text: one JSON object, one file per line (a refresh diffs line by line)."""
    import json

    data = listing.to_json()
    files = data.pop("files")
    head = json.dumps(data, indent=1, ensure_ascii=False)[:-2]
    rows = ",\n".join(f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(v)}" for k, v in files.items())
    return head + ',\n "files": {\n' + rows + "\n }\n}\n"


def listing_path(model: str, directory: Optional[Path] = None) -> Path:
    return Path(directory or ADAPTERS_DIR) / model / TREE_FILE


def load_listing(model: str, directory: Optional[Path] = None) -> TreeListing:
    """The committed listing of ``model``; :class:`FileNotFoundError` names the command that makes it."""
    import json

    path = listing_path(model, directory)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: python -m adapters.contracts.tree <checkout of the pin> "
                                f"--model {model}")
    return TreeListing.from_json(json.loads(path.read_text()))


def all_listings() -> dict[str, TreeListing]:
    """model -> its committed listing, for every in-tree model that has one (citations may name another model's
    repository: LingBot v1's causal build cites v2)."""
    from adapters.contracts.loader import available

    return {m: load_listing(m) for m in available(ADAPTERS_DIR) if listing_path(m).is_file()}


# -- reading a tree ------------------------------------------------------------------------------------------------


def _git(source: Path) -> list[str]:
    """The git command line for ``source``: a checkout (``-C``) or a git directory (``--git-dir``)."""
    if (source / ".git").exists():
        return ["git", "-C", str(source)]
    if (source / "objects").is_dir() and (source / "HEAD").exists():
        return ["git", f"--git-dir={source}"]
    raise TreeError(f"{source} is neither a git checkout nor a git directory")


def _entries(git: list[str], commit: str) -> Iterator[tuple[str, str, Optional[int]]]:
    """(path, blob sha, size) of every file at ``commit``; size None where the object is absent."""
    r = subprocess.run([*git, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if r.returncode != 0:
        raise TreeError(f"commit {commit} is not in {' '.join(git[1:])}: fetch it (git fetch origin {commit}), or "
                        "list another commit with --commit <sha> --note '<why the pin is not reachable>'")
    out = subprocess.run([*git, "ls-tree", "-r", "-l", "-z", commit], capture_output=True, check=True).stdout
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, _, path = rec.partition(b"\t")
        _mode, kind, sha, size = meta.split()
        if kind != b"blob":  # a submodule: a commit of another repository, no content here
            continue
        yield path.decode("utf-8", "surrogateescape"), sha.decode(), int(size) if size.isdigit() else None


def _blobs(git: list[str], shas: list[str]) -> Iterator[Optional[bytes]]:
    """The content of each blob in order (None where the snapshot lacks it): one ``git cat-file --batch``."""
    proc = subprocess.Popen([*git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for sha in shas:
            proc.stdin.write(sha.encode() + b"\n")
            proc.stdin.flush()
            head = proc.stdout.readline().split()
            if len(head) < 3 or head[1] != b"blob":
                yield None
                continue
            data = proc.stdout.read(int(head[2]))
            proc.stdout.read(1)  # the newline after the content
            yield data
    finally:
        proc.stdin.close()
        proc.wait()


def _lines(data: bytes) -> Optional[int]:
    if b"\0" in data[:_BINARY_PROBE]:
        return None
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _name_pattern(name: str) -> re.Pattern[str]:
    """``name`` as upstream's text names a file: right after a quote, a slash or a backtick (a string literal or a
    path), never as a bare word (``import transformers`` does not name a ``transformers/`` folder)."""
    return re.compile(r"(?<=[\"'/`])" + re.escape(name) + r"(?![\w.-])")


def read_tree(source: Path, commit: str, names: tuple[str, ...] = (), names_under: str = ""
              ) -> tuple[dict[str, tuple[Optional[int], Optional[int]]], dict[str, tuple[str, ...]]]:
    """(path -> (size, lines), name -> ``path:line`` hits) of ``commit`` in the git checkout or directory
    ``source``; names are searched in the files under ``names_under`` only (the model's folder of a repository
    that holds several)."""
    git = _git(source)
    entries = list(_entries(git, commit))
    files: dict[str, tuple[Optional[int], Optional[int]]] = {}
    patterns = {n: _name_pattern(n) for n in names}
    hits: dict[str, list[str]] = {n: [] for n in names}
    for (path, _, size), data in zip(entries, _blobs(git, [sha for _, sha, _ in entries])):
        lines = _lines(data) if data is not None else None
        files[path] = (size if size is not None else (len(data) if data is not None else None), lines)
        if lines is None or data is None or not patterns or not path.startswith(names_under):
            continue
        for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            for n, pat in patterns.items():
                if len(hits[n]) < MAX_NAME_HITS and pat.search(line):
                    hits[n].append(f"{path}:{i}")
    return files, {n: tuple(h) for n, h in hits.items()}


def weight_names(contract: Contract) -> tuple[str, ...]:
    """The file and folder names the contract says upstream loads (the last part of every literal path of the
    checkpoint entries and weights; glob patterns left out), sorted."""
    out: set[str] = set()
    for e in contract.checkpoint:
        out.update(file_name(f) for f in e.files)
    for w in contract.weights:
        if w.hub == "checkout":
            continue  # files of the checkout are proven by the tree itself
        out.update(file_name(f) for f in (*w.files, *([w.file] if w.file else [])))
    return tuple(sorted(n for n in out if n))


def build_listing(model: str, source: Path, commit: Optional[str] = None, note: str = "",
                  source_name: str = "") -> TreeListing:
    """The listing of ``model`` read from ``source`` at ``commit`` (default: the contract's pin). Listing another
    commit needs ``note`` (why the pin cannot be listed)."""
    c = load(model)
    at = commit or c.commit
    if at != c.commit and not note:
        raise TreeError(f"--commit {at[:12]} is not the pin {c.commit[:12]} of {model}: say why with --note")
    sub = _norm(str(c.raw.get("subdir") or ""))
    files, names = read_tree(source, at, weight_names(c), sub + "/" if sub else "")
    full = subprocess.run([*_git(source), "rev-parse", f"{at}^{{commit}}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return TreeListing(model=model, repo=c.repo, commit=c.commit, listed_commit=full,
                       source=source_name or f"git ls-tree -r -l of {c.repo}", files=files, names=names, note=note)


# -- what the contract names ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamedPath:
    """A path of the checkout (relative to the repository root) that the contract or its setup script names:
    ``kind`` file | dir | any (either) | installable (a folder ``pip install -e`` takes: it holds pyproject.toml or
    setup.py); ``why`` the contract key that names it."""

    path: str
    kind: str
    why: str


def _in_subdir(contract: Contract, path: str) -> str:
    sub = str(contract.raw.get("subdir") or "")
    return _norm(f"{sub}/{path}" if sub else path)


def _step_paths(contract: Contract) -> Iterator[NamedPath]:
    for i, st in enumerate(contract.environment.steps):
        where = f"environment.steps[{i}]"
        cwd = _norm(st.cwd)
        if cwd:
            yield NamedPath(cwd, "dir", f"{where}.cwd")
        if st.requirements:
            yield NamedPath(_norm(f"{cwd}/{st.requirements}"), "file", f"{where}.requirements")
        if st.editable:
            yield NamedPath(_norm(f"{cwd}/{st.editable}"), "installable", f"{where}.editable")
        if st.run:
            for tok in shlex.split(st.run, comments=True):
                if _RUN_FILE.search(tok) and not tok.startswith(("-", "/", "$")) and "=" not in tok:
                    yield NamedPath(_norm(f"{cwd}/{tok}"), "file", f"{where}.run")


def _downloaded_into_checkout(contract: Contract) -> tuple[str, ...]:
    """Folders of the checkout that setup fills from a hub (a weight with ``key: upstream_dir``)."""
    return tuple(_norm(w.into or w.prefix) for w in contract.weights
                 if w.key == "upstream_dir" and w.hub != "checkout" and (w.into or w.prefix))


def named_paths(contract: Contract) -> list[NamedPath]:
    """Every path of the checkout the contract and its printed setup script name (see the module docstring)."""
    out = [NamedPath(_in_subdir(contract, str(contract.entry["script"])), "file", "entry.script")]
    out += [NamedPath(_in_subdir(contract, p), "dir", "entry.sys_path") for p in contract.sys_path]
    out += list(_step_paths(contract))
    out += [NamedPath(_norm(e.path), "installable", "environment.editable") for e in contract.environment.editable]
    hub_filled = _downloaded_into_checkout(contract)
    for e in contract.checkpoint:
        if e.key != "upstream_dir":
            continue
        for f in e.files:
            if not any(_norm(f).startswith(h + "/") or _norm(f) == h for h in hub_filled):
                out.append(NamedPath(_norm(f), "any", f"checkpoint[{e.key}].files"))
    for w in contract.weights:
        if w.hub == "checkout":
            out += [NamedPath(_norm(f"{w.into}/{f}"), "any", f"weights[{w.name}].files") for f in w.files]
    return list(dict.fromkeys(out))  # once each, in the order named


def _cited(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "source" or str(k).endswith("_source"):
                yield f"{where}.{k}", str(v)
            else:
                yield from _cited(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _cited(v, f"{where}[{i}]")


#: contract sections whose every ``source`` must cite a line of upstream's tree at the pin
PROVEN_SECTIONS = ("policies", "trained_regime", "day_one")


def citations(contract: Contract) -> list[tuple[str, re.Match[str]]]:
    """(contract key, match) of every ``path:line`` cited by the :data:`PROVEN_SECTIONS` (a source without one is
    reported by :func:`problems`)."""
    out: list[tuple[str, re.Match[str]]] = []
    for section in PROVEN_SECTIONS:
        for key, text in _cited(contract.raw.get(section) or {}, section):
            out += [(key, m) for m in CITATION.finditer(text)]
    return out


def _resolve(listing: TreeListing, contract: Contract, path: str) -> Optional[str]:
    for candidate in (_in_subdir(contract, path), _norm(path)):
        if listing.has_file(candidate):
            return candidate
    return None


def _citation_problem(listings: Mapping[str, TreeListing], contract: Contract, key: str,
                      m: re.Match[str]) -> Optional[str]:
    listing = next((x for x in listings.values() if x.repo.lower() == (m["repo"] or contract.repo).lower()), None)
    if listing is None:
        return f"{key}: {m.group(0)} cites {m['repo']}, a repository no listing holds"
    if m["commit"] and not (listing.commit.startswith(m["commit"]) or listing.listed_commit.startswith(m["commit"])):
        return f"{key}: {m.group(0)} cites commit {m['commit']}, not the pin {listing.commit[:12]} of {listing.repo}"
    path = _resolve(listing, load(listing.model), m["path"])
    if path is None:
        return f"{key}: {m['path']} is not in {listing.repo}@{listing.listed_commit[:12]}"
    lines = listing.files[path][1]
    last = int(m["end"] or m["start"])
    if lines is not None and not 1 <= int(m["start"]) <= last <= lines:
        return f"{key}: {m['path']}:{m['start']}{'-' + m['end'] if m['end'] else ''} is past its {lines} lines"
    return None


def _holds(listing: TreeListing, p: NamedPath) -> bool:
    if p.kind == "installable":
        return any(listing.has_file(f"{p.path}/{f}") for f in ("pyproject.toml", "setup.py"))
    if p.kind in ("file", "dir"):
        return listing.has_file(p.path) if p.kind == "file" else listing.has_dir(p.path)
    return listing.has_file(p.path) or listing.has_dir(p.path)


def problems(contract: Contract, listing: TreeListing, listings: Optional[Mapping[str, TreeListing]] = None
             ) -> list[str]:
    """What the contract names that ``listing`` does not hold: named paths, cited lines (``listings``: every
    model's, for a citation of another model's repository), weight names neither named upstream nor
    ``hub_confirmed``. Empty when everything is there."""
    out = []
    for p in named_paths(contract):
        if not _holds(listing, p):
            what = (f"{p.path or '.'} holds neither pyproject.toml nor setup.py" if p.kind == "installable" else
                    f"{p.path} is not")
            out.append(f"{p.why}: {what} in {contract.repo}@{listing.listed_commit[:12]}")
    every = dict(listings or {}) | {contract.model: listing}
    for section in PROVEN_SECTIONS:
        for key, text in _cited(contract.raw.get(section) or {}, section):
            if not CITATION.search(text):
                out.append(f"{key}: {text!r} cites no upstream path:line")
    out += [x for key, m in citations(contract) if (x := _citation_problem(every, contract, key, m))]
    out += _name_problems(contract, listing)
    return out


def hub_confirmed(contract: Contract) -> set[str]:
    """Weight names that only the hub can confirm (``checkpoint[].hub_confirmed``)."""
    return {n for e in contract.checkpoint for n in e.hub_confirmed}


def _name_problems(contract: Contract, listing: TreeListing) -> list[str]:
    out = []
    hub_only = hub_confirmed(contract)
    for n in weight_names(contract):
        if n not in listing.names:
            out.append(f"weight name {n!r} was not searched when the listing was made: regenerate it "
                       f"(python -m adapters.contracts.tree <checkout> --model {contract.model})")
        elif not listing.names[n] and n not in hub_only:
            out.append(f"weight name {n!r}: upstream's text does not name it at {listing.listed_commit[:12]}; "
                       "list it under the checkpoint entry's hub_confirmed (setup then checks it after download)")
        elif listing.names[n] and n in hub_only:
            out.append(f"weight name {n!r} is hub_confirmed, but upstream names it ({listing.names[n][0]})")
    return out


# -- command line --------------------------------------------------------------------------------------------------


def main(argv: Optional[list[str]] = None) -> int:
    from harness.io import write_text

    ap = argparse.ArgumentParser(prog="python -m adapters.contracts.tree",
                                 description="Write adapters/<model>/upstream_tree.json from a git checkout or git "
                                             "directory of the model's upstream repository.")
    ap.add_argument("source", type=Path, help="a git checkout or a bare git directory holding the commit")
    ap.add_argument("--model", required=True, help="the model whose contract names the repository and the pin")
    ap.add_argument("--commit", help="list this commit instead of the pin (needs --note)")
    ap.add_argument("--note", default="", help="why the listing is not of the pin")
    ap.add_argument("--source-name", default="", help="where the tree was read (recorded)")
    ap.add_argument("--out", type=Path, help="write here instead of adapters/<model>/upstream_tree.json")
    args = ap.parse_args(argv)
    try:
        listing = build_listing(args.model, args.source, args.commit, args.note, args.source_name)
    except (TreeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or listing_path(args.model)
    write_text(out, listing_text(listing))
    print(f"{out}: {len(listing.files)} files of {listing.repo}@{listing.listed_commit[:12]}, {len(listing.names)} "
          f"weight names searched; what the contract names that is not there: "
          f"{problems(load(args.model), listing, all_listings()) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
