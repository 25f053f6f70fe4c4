"""One weights root for every learned backbone, and ``python -m harness weights list|fetch|verify``.

Layout: ``<weights_root>/<backbone name>/`` holds the files the backbone's library saves (for DINOv2 under
transformers: a ``save_pretrained`` folder, ``config.json`` + ``model.safetensors``). The root is, in order:
``paths.weights`` (config / ``--root``), the environment variable ``WORLDMEM_WEIGHTS``, or
``$XDG_CACHE_HOME/worldmem/weights`` (default ``~/.cache/worldmem/weights``).

Checksums: a backbone class may pin ``sha256 = {file: hex}``; ``weights fetch`` also records the sha256 of every
file it downloaded in ``<dir>/.worldmem-weights.json`` (with the repository and revision), and ``verify`` compares
the files with the pinned values, else with that record. Nothing here is called during an evaluation run except
the offline status check; downloads happen only through ``weights fetch``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

from harness.io import sha256_file
from harness.errors import ConfigError, MissingDependencyError

RECORD = ".worldmem-weights.json"


def weights_root(configured: Optional[str | Path] = None) -> Path:
    """The weights root: ``configured`` (``paths.weights``), else ``$WORLDMEM_WEIGHTS``, else the user cache."""
    if configured:
        return Path(os.path.expanduser(str(configured)))
    env = os.environ.get("WORLDMEM_WEIGHTS")
    if env:
        return Path(os.path.expanduser(env))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "worldmem" / "weights"


def _class_attrs(spec: Any, cls: Optional[type]) -> dict:
    """The class's weights contract; imported lazily (``list`` tolerates a backbone whose module is absent)."""
    if cls is None:
        from .backbones import import_class
        from .perception.base import BackboneUnavailable

        try:
            cls = import_class(spec)
        except BackboneUnavailable as exc:
            return {"files": (), "import_error": str(exc)}
    return {"files": tuple(getattr(cls, "files", ()) or ()), "hf_repo": getattr(cls, "hf_repo", None),
            "revision": getattr(cls, "revision", None), "sha256": dict(getattr(cls, "sha256", {}) or {}),
            "library": getattr(cls, "library", None)}


def backbone_status(spec: Any, root: Path, hash_files: bool = False, cls: Optional[type] = None) -> dict:
    """Offline status of one learned backbone's folder.

    Returns ``{name, dir, state: present|missing|unknown, missing: [files], size: bytes, revision, hf_repo,
    sha256: {file: hex} (when hashed), checksum: ok|mismatch:<file>|unpinned|-}``. ``unknown``: the backbone's
    module is not importable, so its file list is unknown (the folder is reported as is).
    """
    d = Path(root) / spec.name
    a = _class_attrs(spec, cls)
    files = a["files"]
    out: dict[str, Any] = {"name": spec.name, "dir": str(d), "revision": a.get("revision"),
                           "hf_repo": a.get("hf_repo"), "library": a.get("library")}
    if not files:
        exists = d.is_dir() and any(d.iterdir())
        # without its module the file list is unknown: an absent folder is still "missing", a filled one "unknown";
        # an importable class that declares no files needs none (e.g. a judge served by an endpoint)
        if "import_error" in a:
            state = "unknown" if exists else "missing"
        else:
            state, exists = "present", True
        out.update(state=state, missing=[] if exists else ["(folder)"], size=_size(d), checksum="-",
                   note=f"module {spec.ref.split(':')[0]} not installed" if "import_error" in a else "")
        return out
    missing = [f for f in files if not (d / f).is_file()]
    out.update(state="missing" if missing else "present", missing=missing, size=_size(d))
    if hash_files and not missing:
        out["sha256"] = {f: sha256_file(d / f) for f in files}
        out["checksum"] = _compare(d, a, out["sha256"])
    else:
        out["checksum"] = "-"
    return out


def _size(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) if d.is_dir() else 0


def _compare(d: Path, attrs: dict, got: dict[str, str]) -> str:
    pinned = attrs.get("sha256") or {}
    if not pinned and (d / RECORD).is_file():
        try:
            pinned = json.loads((d / RECORD).read_text()).get("sha256", {})
        except (OSError, json.JSONDecodeError):
            return f"mismatch:{RECORD} (unreadable)"
    if not pinned:
        return "unpinned"
    for f, h in sorted(got.items()):
        if f in pinned and pinned[f] != h:
            return f"mismatch:{f}"
    return "ok"


def _learned() -> list:
    from .backbones import BACKBONES

    return [s for s in BACKBONES.values() if s.learned]


def _select(names: list[str], shipped: bool = False) -> list:
    """The learned backbones named (all by default); with ``shipped`` also those whose weights ship inside
    installed packages (listed and verified, never fetched)."""
    from .backbones import BACKBONES, spec

    if not names or names == ["all"]:
        return _learned() + ([s for s in BACKBONES.values() if s.packaged] if shipped else [])
    out = []
    for n in names:
        s = spec(n)
        if s.packaged and not shipped:
            raise ConfigError(f"backbone {n!r}: its weights ship inside installed packages, nothing to fetch; "
                              "`python -m harness weights list` shows what is missing and the install command")
        if not s.learned and not s.packaged:
            raise ConfigError(f"backbone {n!r} is weight-free: nothing to fetch")
        out.append(s)
    return out


def shipped_status(s: Any, hash_files: bool = False) -> dict:
    """Offline status of a backbone whose weights ship inside installed packages (nothing is imported but its
    light module): state, the files found and where, what is missing with the install commands."""
    from .backbones import import_class
    from .perception.packaged import sha256_cached, status

    cls = import_class(s)
    st = status(s.name, cls.shipped_files(), getattr(cls, "shipped_extra", lambda: []))
    st["checksum"] = "-"
    if hash_files and st["state"] == "present":
        pins = {f.label: f.sha256 for f in cls.shipped_files()}
        differs = [k for k, p in st["files"].items() if pins.get(k) and sha256_cached(Path(p)) != pins[k]]
        st["checksum"] = f"differs:{differs[0]} (another package version)" if differs else "ok"
    return st


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_list(root: Path, names: list[str], verify: bool) -> int:
    """Print name, repository@revision, present/missing, size and checksum state; non-zero when verify fails."""
    selected = _select(names, shipped=True)
    rows = [backbone_status(s, root, hash_files=verify) for s in selected if s.learned]
    print(f"weights root: {root}")
    print(f"{'backbone':<12} {'repository@revision':<48} {'state':<8} {'size':>10}  sha256")
    bad = 0
    for r in rows:
        rev = f"{r.get('hf_repo') or '-'}@{(r.get('revision') or '-')[:12]}"
        print(f"{r['name']:<12} {rev:<48} {r['state']:<8} {_human(r['size']):>10}  {r['checksum']}"
              + (f"  missing: {', '.join(r['missing'])}" if r["state"] == "missing" and r["missing"] else "")
              + (f"  ({r['note']})" if r.get("note") else ""))
        if verify and r["state"] == "present" and r["checksum"].startswith("mismatch"):
            print(f"error: {r['name']}: checksum mismatch in {r['dir']}/{r['checksum'].split(':', 1)[1]}: "
                  f"re-fetch with: python -m harness weights fetch {r['name']} --root {root}", file=sys.stderr)
            bad += 1
        if verify and r["state"] == "missing":
            bad += 1
    shipped = [shipped_status(s, hash_files=verify) for s in selected if s.packaged]
    if shipped:
        print("shipped inside installed packages (real weights, diagnostic backbones; nothing to fetch):")
    for r in shipped:
        where = ", ".join(sorted({str(Path(p).parent) for p in r["files"].values()})) or "-"
        print(f"{r['name']:<12} {where:<48} {r['state']:<8} {_human(r['size']):>10}  {r['checksum']}"
              + (f"  missing: {', '.join(r['missing'])}; install with: {' && '.join(r['install'])}"
                 if r["state"] == "missing" else ""))
        if verify and r["state"] == "missing":
            bad += 1
    return 1 if bad else 0


def fetch(s: Any, root: Path) -> Path:
    """Download one backbone's pinned files with ``huggingface_hub`` into ``<root>/<name>/`` (resumable: the hub
    client keeps partial downloads), then record and check their sha256. Raises ``RuntimeError`` with the reason."""
    from .backbones import import_class

    cls = import_class(s)
    a = _class_attrs(s, cls)
    if not a.get("hf_repo") or not a.get("revision"):
        raise RuntimeError(f"backbone {s.name!r} has no pinned hf_repo/revision; install its weights by hand into "
                           f"{root / s.name} (see {getattr(cls, 'recipe', 'docs/evaluation.md')})")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise MissingDependencyError("weights fetch", "eval", str(exc)) from exc
    d = root / s.name
    d.mkdir(parents=True, exist_ok=True)
    try:
        snapshot_download(repo_id=a["hf_repo"], revision=a["revision"], local_dir=str(d),
                          allow_patterns=list(a["files"]) or None)
    except Exception as exc:  # offline, unknown revision, auth: say which and how to continue
        raise RuntimeError(f"fetching {s.name!r} ({a['hf_repo']}@{a['revision']}) failed: {type(exc).__name__}: "
                           f"{exc}. Re-run on a machine with internet access (the download resumes), or copy the "
                           f"folder to {d}") from exc
    st = backbone_status(s, root, hash_files=True, cls=cls)
    if st["state"] != "present":
        raise RuntimeError(f"{s.name}: downloaded, but {', '.join(st['missing'])} is missing in {d}")
    pinned = a.get("sha256") or {}
    for f, h in st["sha256"].items():
        if f in pinned and pinned[f] != h:
            raise RuntimeError(f"{s.name}: checksum mismatch for {d / f} (expected {pinned[f]}, got {h})")
    from harness.io import write_json

    write_json(d / RECORD, {"hf_repo": a["hf_repo"], "revision": a["revision"], "sha256": st["sha256"]})
    return d


def main(argv: list[str]) -> int:
    """``python -m harness weights list|fetch|verify [names] [--root DIR]`` (exit 2 on user errors)."""
    ap = argparse.ArgumentParser(prog="python -m harness weights", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("list", "fetch", "verify"))
    ap.add_argument("names", nargs="*", help="backbone names (default: all learned backbones)")
    ap.add_argument("--root", default=None, help="weights root (default: $WORLDMEM_WEIGHTS or the user cache)")
    rest = []
    root_arg = None
    for a in argv:  # also accept the Hydra spelling paths.weights=DIR
        if a.startswith("paths.weights="):
            root_arg = a.split("=", 1)[1]
        else:
            rest.append(a)
    args = ap.parse_args(rest)
    root = weights_root(args.root or root_arg)
    try:
        if args.action == "list":
            return cmd_list(root, args.names, verify=False)
        if args.action == "verify":
            return cmd_list(root, args.names, verify=True)
        failed = 0
        for s in _select(args.names):
            try:
                d = fetch(s, root)
                print(f"ok  {s.name:<12} {d}")
            except Exception as exc:  # report each backbone, go on with the others
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
        return 1 if failed else 0
    except ConfigError as exc:  # an unknown or weight-free backbone name (UnknownBackboneError is one)
        print(f"error: {exc}", file=sys.stderr)
        return 2
