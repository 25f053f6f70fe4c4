"""``python -m harness weights list|fetch|verify [names] [--root DIR]``: the weights of the learned backbones.

``list`` is offline (present / missing, size, pinned revision, and for the release's weights pack which file of the
pack each backbone uses); ``verify`` also hashes each backbone's files against the pinned sha256 (or the record a
download wrote); ``fetch`` downloads the pinned revisions (resumable, checksummed). The pack is ``paths.weights``
laid out like it, or ``$WORLDMEMBENCH_DATASETS_DIR``; nothing is ever downloaded into it.
The store itself is :mod:`evaluate.weights`; the backbone registry is :mod:`evaluate.backbones`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evaluate.backbones import BACKBONES, BackboneSpec, import_class, spec, status
from evaluate.weights import Checksum, FolderState, WeightsContract, download, fetch_command, weights_root
from evaluate.weights_pack import HOW_TO_GET, PackLinkError, WeightsPack, discover
from harness.app.extras import require
from harness.errors import ConfigError, UserError


def _select(names: list[str], shipped: bool = False) -> list[BackboneSpec]:
    """The learned backbones named (all by default); with ``shipped`` also those whose weights ship inside
    installed packages (listed and verified, never fetched)."""
    if not names or names == ["all"]:
        return [s for s in BACKBONES.values() if s.learned or (shipped and s.packaged)]
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


def shipped_status(s: BackboneSpec, hash_files: bool = False) -> dict[str, Any]:
    """Offline status of a backbone whose weights ship inside installed packages (nothing is imported but its
    light module): state, the files found and where, what is missing with the install commands."""
    from evaluate.perception.packaged import sha256_cached
    from evaluate.perception.packaged import status as packaged_status

    cls = import_class(s)
    shipped_files = getattr(cls, "shipped_files")  # a shipped backbone's classmethod (evaluate/perception)
    st = packaged_status(s.name, shipped_files(), getattr(cls, "shipped_extra", lambda: []))
    st["checksum"] = "-"
    if hash_files and st["state"] == "present":
        pins = {f.label: f.sha256 for f in shipped_files()}
        differs = [k for k, p in st["files"].items() if pins.get(k) and sha256_cached(Path(p)) != pins[k]]
        st["checksum"] = f"differs:{differs[0]} (another package version)" if differs else "ok"
    return st


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_list(root: Path, names: list[str], verify: bool) -> int:
    """Print name, repository@revision, present/missing, size and checksum state, and where each backbone's files
    are (our folder, or their paths inside the release's weights pack); non-zero when verify fails, 2 when the pack
    has a link out of its root where a backbone would read."""
    selected = _select(names, shipped=True)
    pack_root, why = discover(root)
    pack = WeightsPack(pack_root, found_by=why) if pack_root is not None else None
    rows: list[Any] = []  # a status, or (name, PackLinkError) for a backbone the pack's links refuse, in registry order
    for s in selected:
        if not s.learned:
            continue
        try:
            rows.append(status(s, root, hash_files=verify, pack=pack))
        except PackLinkError as exc:
            rows.append((s.name, exc))
    refused = [r for r in rows if isinstance(r, tuple)]
    print(f"weights root: {root}")
    if pack is not None:
        print(f"weights pack: {pack.root} (from {pack.found_by}; our folders win where both hold a backbone)")
    elif why:
        print(f"weights pack: none ({why})")
    print(f"{'backbone':<12} {'repository@revision':<48} {'state':<8} {'size':>10}  sha256")
    bad = 0
    for r in rows:
        if isinstance(r, tuple):
            print(f"{r[0]:<12} {'-':<48} {'refused':<8}  (a link out of the weights pack, or one it cannot follow: "
                  "see the error below)")
            print(f"error: {r[0]}: {r[1]}", file=sys.stderr)
            continue
        rev = f"{r.contract.hf_repo or '-'}@{(r.contract.revision or '-')[:12]}"
        print(f"{r.name:<12} {rev:<48} {r.state.value:<8} {_human(r.size):>10}  {r.checksum_text}"
              + (f"  missing: {', '.join(r.missing)}" if r.state is FolderState.MISSING and r.missing else "")
              + (f"  ({r.note})" if r.note else ""))
        if r.source == "pack":
            for where in r.pack_files.values():
                print(f"    from the pack: {where}")
        if pack is not None and r.pack_note:
            print(f"    pack: {r.pack_note}")
        if verify and r.state is FolderState.PRESENT and r.checksum is Checksum.CORRUPT:
            print(f"error: {r.name}: {r.dir}/{r.note}; re-fetch with: {fetch_command(r.name, root)}",
                  file=sys.stderr)
            bad += 1
        if verify and r.state is FolderState.PRESENT and r.checksum is Checksum.MISMATCH:
            print(f"error: {r.name}: checksum mismatch in {r.dir}/{r.mismatch_file}: re-fetch with: "
                  f"{fetch_command(r.name, root)}", file=sys.stderr)
            bad += 1
        if verify and r.state is FolderState.MISSING:
            bad += 1
    if pack is None and any(r.state is FolderState.MISSING for r in rows if not isinstance(r, tuple)):
        print(f"missing weights: `python -m harness weights fetch <name>`, {HOW_TO_GET}")
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
    if refused:
        return 2
    return 1 if bad else 0


def fetch(s: BackboneSpec, root: Path) -> Path:
    """Download backbone ``s``'s pinned weights into ``<root>/<name>/`` (:func:`evaluate.weights.download`)."""
    cls = import_class(s)
    return download(s.name, WeightsContract.of(cls), root, getattr(cls, "recipe", None))


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
        if args.action in ("list", "verify"):
            return cmd_list(root, args.names, verify=args.action == "verify")
        require("weights fetch", ("huggingface_hub",))  # one line naming the extra, before any folder is made
        failed = 0
        for s in _select(args.names):
            try:
                d = fetch(s, root)
                print(f"ok  {s.name:<12} {d}")
            except Exception as exc:  # report each backbone, go on with the others
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
        return 1 if failed else 0
    except UserError as exc:  # an unknown or weight-free backbone name (a ConfigError), a missing extra
        print(f"error: {exc}", file=sys.stderr)
        return 2
