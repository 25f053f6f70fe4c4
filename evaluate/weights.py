"""The weights store: one root for every learned backbone, its folders' offline status, and the pinned download.

Layout: ``<weights_root>/<backbone name>/`` holds the files the backbone's library saves (for DINOv2 under
transformers: a ``save_pretrained`` folder, ``config.json`` + ``model.safetensors``). The root is, in order:
``paths.weights`` (config / ``--root``), the environment variable ``WORLDMEM_WEIGHTS``, or
``$XDG_CACHE_HOME/worldmem/weights`` (default ``~/.cache/worldmem/weights``). A backbone missing there is looked up
in the release's weights pack when there is one (:mod:`evaluate.weights_pack`: ``paths.weights`` laid out like the
pack, or ``$WORLDMEMBENCH_DATASETS_DIR``); our own layout wins when both hold it.

Checksums: a backbone class may pin ``sha256 = {file: hex}``; a download also records the sha256 of every file it
fetched in ``<dir>/.worldmem-weights.json`` (with the repository and revision), and a verification compares the
files with the pinned values, else with that record. Nothing here is called during an evaluation run except the
offline status check; downloads happen only through ``python -m harness weights fetch`` (:mod:`harness.app.weights`).
This module knows nothing of the backbone registry: callers pass each backbone's :class:`WeightsContract`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import BinaryIO, Optional

from harness.errors import MissingDependencyError
from harness.io import sha256_file, write_json

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


def fetch_command(name: str, root: Optional[Path] = None) -> str:
    """The command that downloads backbone ``name``'s pinned weights (into ``root`` when given)."""
    return f"python -m harness weights fetch {name}" + (f" --root {root}" if root is not None else "")


@dataclass(frozen=True)
class WeightsContract:
    """What a learned backbone class declares about its weights (class attributes ``files``, ``hf_repo``,
    ``revision``, ``sha256``, ``library``)."""

    files: tuple[str, ...] = ()
    hf_repo: Optional[str] = None
    revision: Optional[str] = None
    sha256: dict[str, str] = field(default_factory=dict)
    library: Optional[str] = None

    @staticmethod
    def of(cls: type) -> "WeightsContract":
        return WeightsContract(files=tuple(getattr(cls, "files", ()) or ()), hf_repo=getattr(cls, "hf_repo", None),
                               revision=getattr(cls, "revision", None),
                               sha256=dict(getattr(cls, "sha256", {}) or {}), library=getattr(cls, "library", None))


class FolderState(str, Enum):
    PRESENT = "present"
    MISSING = "missing"
    #: the backbone's module is not importable, so its file list is unknown (the folder is reported as is)
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


class Checksum(str, Enum):
    OK = "ok"
    MISMATCH = "mismatch"
    #: nothing to compare with: no pinned sha256 and no download record
    UNPINNED = "unpinned"
    #: a file is empty, truncated or not of its kind (a ``.safetensors`` whose header and size disagree, a
    #: ``config.json`` that is not JSON): checked before any hash, so an unpinned folder is not "present" with it
    CORRUPT = "corrupt"
    #: not hashed (a listing, or files missing)
    UNCHECKED = "-"

    def __str__(self) -> str:
        return self.value


@dataclass
class BackboneStatus:
    """Offline status of one learned backbone's folder.

    ``missing``: the declared files that are absent; ``size``: bytes in the folder; ``sha256``: file -> hex (when
    hashed); ``checksum`` with ``mismatch_file`` naming the first file that differs; ``note``: why the state is
    unknown."""

    name: str
    dir: Path
    state: FolderState
    contract: WeightsContract
    missing: list[str] = field(default_factory=list)
    size: int = 0
    sha256: dict[str, str] = field(default_factory=dict)
    checksum: Checksum = Checksum.UNCHECKED
    mismatch_file: Optional[str] = None
    note: str = ""
    #: where the files come from: "own" (``<root>/<name>/``) or "pack" (the release's weights pack)
    source: str = "own"
    #: with ``source == "pack"``: each file -> its path relative to the pack root (`` -> target`` for a link)
    pack_files: dict[str, str] = field(default_factory=dict)
    #: what the pack says about this backbone (not held, partly held, a cache it holds, also held but ours wins)
    pack_note: str = ""
    #: environment the backbone's runner gets from the pack (e.g. ``HF_HOME`` of a Hugging Face cache it holds)
    pack_env: dict[str, str] = field(default_factory=dict)

    @property
    def checksum_text(self) -> str:
        """``ok``, ``unpinned``, ``-``, ``mismatch:<file>`` or ``corrupt:<file>`` (what a listing prints)."""
        if self.checksum in (Checksum.MISMATCH, Checksum.CORRUPT):
            return f"{self.checksum.value}:{self.mismatch_file}"
        return str(self.checksum.value)


def folder_status(name: str, root: Path, contract: Optional[WeightsContract], hash_files: bool = False,
                  import_error: Optional[str] = None, folder: Optional[Path] = None) -> BackboneStatus:
    """The status of ``<root>/<name>/`` (or of ``folder``, e.g. a folder of the release's weights pack) against
    ``contract`` (None with ``import_error``: the class could not be imported, so only the folder's presence is
    known)."""
    d = Path(folder) if folder is not None else Path(root) / name
    c = contract or WeightsContract()
    if not c.files:
        exists = d.is_dir() and any(d.iterdir())
        # without its module the file list is unknown: an absent folder is still "missing", a filled one "unknown";
        # an importable class that declares no files needs none (e.g. a judge served by an endpoint)
        if import_error is not None:
            state = FolderState.UNKNOWN if exists else FolderState.MISSING
        else:
            state, exists = FolderState.PRESENT, True
        return BackboneStatus(name, d, state, c, missing=[] if exists else ["(folder)"], size=_size(d),
                              note=import_error or "")
    missing = [f for f in c.files if not (d / f).is_file()]
    st = BackboneStatus(name, d, FolderState.MISSING if missing else FolderState.PRESENT, c, missing=missing,
                        size=_size(d))
    if hash_files and not missing:
        for f in c.files:
            why = file_problem(d / f)
            if why:
                st.checksum, st.mismatch_file, st.note = Checksum.CORRUPT, f, f"{f}: {why}"
                return st
        st.sha256 = {f: sha256_file(d / f) for f in c.files}
        st.checksum, st.mismatch_file = _compare(d, c, st.sha256)
    return st


def file_problem(path: Path) -> Optional[str]:
    """Why a weights file cannot be what its name says (None when it can): empty; a ``.safetensors`` whose header
    does not parse or whose tensors need more bytes than the file has (truncated); a ``.json`` that is not JSON; a
    ``.bin`` / ``.pt`` / ``.pth`` / ``.ckpt`` that is neither a ``torch.save`` zip archive holding ``data.pkl`` nor a
    pickle that parses to its end (:func:`_checkpoint_problem`); an ``.onnx`` whose protobuf fields run past its end or
    that lacks a graph (:func:`_onnx_problem`). Reads headers (a legacy pickle's opcodes, the protobuf's top-level
    keys) only."""
    import struct

    size = path.stat().st_size
    if size == 0:
        return "empty file (an interrupted download?)"
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"truncated: {size} bytes, shorter than a safetensors header"
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, 100 << 20):
                return f"truncated or not safetensors: the header claims {n} bytes, the file has {size}"
            try:
                header = json.loads(f.read(n))
            except (ValueError, UnicodeDecodeError):
                return "not safetensors: its header is not JSON"
        ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__" and isinstance(t, dict)
                and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2]
        need = 8 + n + max(ends, default=0)
        if need > size:
            return f"truncated: its tensors need {need} bytes, the file has {size}"
        return None
    if suffix == ".json":
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return f"not JSON ({exc})"
        return None
    if suffix in (".bin", ".pt", ".pth", ".ckpt"):
        return _checkpoint_problem(path)
    if suffix == ".onnx":
        return _onnx_problem(path, size)
    return None


#: the fields of ONNX's ``ModelProto`` (onnx/onnx.proto) a model file must hold: ``ir_version`` (1, a varint) and
#: ``graph`` (7, length-delimited)
_ONNX_IR_VERSION, _ONNX_GRAPH = 1, 7


def _varint(f: BinaryIO) -> Optional[int]:
    """A protobuf varint read from ``f`` (None when the file ends inside it or it runs past 10 bytes)."""
    out = 0
    for shift in range(0, 70, 7):
        b = f.read(1)
        if not b:
            return None
        out |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return out
    return None


def _onnx_problem(path: Path, size: int) -> Optional[str]:
    """An ONNX model is a protobuf ``ModelProto``: its top-level fields are walked (keys and lengths read, the
    payloads skipped), so a file cut short (a field that needs more bytes than the file has), one that is not
    protobuf (an unknown wire type) or one without ``ir_version`` and ``graph`` is refused. Reads a few bytes per
    field, never the graph."""
    seen: set[int] = set()
    with open(path, "rb") as f:
        while f.tell() < size:
            at = f.tell()
            key = _varint(f)
            if key is None:
                return f"truncated: it ends inside a field's key ({size} bytes)"
            field, wire = key >> 3, key & 7
            if field == 0 or wire not in (0, 1, 2, 5):
                return f"not an ONNX model: the bytes at offset {at} are no protobuf field (wire type {wire})"
            if wire == 0 and _varint(f) is None:
                return f"truncated: it ends inside field {field}"
            if wire in (1, 5):
                f.seek(8 if wire == 1 else 4, os.SEEK_CUR)
            if wire == 2:
                n = _varint(f)
                if n is None or f.tell() + n > size:
                    return (f"truncated: field {field} needs {'?' if n is None else f.tell() + n} bytes, the file "
                            f"has {size}")
                f.seek(n, os.SEEK_CUR)
            if f.tell() > size:
                return f"truncated: field {field} runs past the end of the file ({size} bytes)"
            seen.add(field)
    missing = [name for name, num in (("ir_version", _ONNX_IR_VERSION), ("graph", _ONNX_GRAPH)) if num not in seen]
    return f"not an ONNX model: no {' and no '.join(missing)}" if missing else None


def _checkpoint_problem(path: Path) -> str | None:
    """A PyTorch checkpoint is a zip archive holding ``<name>/data.pkl`` (``torch.save``'s format since 1.6) or a
    legacy stream of pickles; the first pickle of the latter must parse to its STOP opcode within the file
    (:mod:`pickletools`: read, never executed). A few stray bytes starting like a pickle are refused."""
    import pickletools
    import zipfile

    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            return f"a damaged zip archive ({exc})"
        if not any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return "a zip archive without data.pkl: not a torch.save checkpoint"
        return None
    with open(path, "rb") as f:
        if f.read(1) != b"\x80":
            return "neither a zip archive nor a pickle (truncated?)"
        f.seek(0)
        try:
            for op, _, _ in pickletools.genops(f):
                if op.name == "STOP":
                    return None
        except Exception as exc:  # noqa: BLE001 - genops raises ValueError / struct errors on a cut stream
            return f"a pickle cut short or damaged ({type(exc).__name__}: truncated?)"
    return "a pickle without its end (truncated?)"


def _size(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) if d.is_dir() else 0


def _compare(d: Path, c: WeightsContract, got: dict[str, str]) -> tuple[Checksum, Optional[str]]:
    pinned = c.sha256
    if not pinned and (d / RECORD).is_file():
        try:
            pinned = json.loads((d / RECORD).read_text()).get("sha256", {})
        except (OSError, json.JSONDecodeError):
            return Checksum.MISMATCH, f"{RECORD} (unreadable)"
    if not pinned:
        return Checksum.UNPINNED, None
    for f, h in sorted(got.items()):
        if f in pinned and pinned[f] != h:
            return Checksum.MISMATCH, f
    return Checksum.OK, None


def download(name: str, contract: WeightsContract, root: Path, recipe: Optional[str] = None) -> Path:
    """Download one backbone's pinned files with ``huggingface_hub`` into ``<root>/<name>/`` (resumable: the hub
    client keeps partial downloads), then record and check their sha256. Raises ``RuntimeError`` with the reason."""
    d = Path(root) / name
    if not contract.hf_repo or not contract.revision:
        raise RuntimeError(f"backbone {name!r} has no pinned hf_repo/revision; install its weights by hand into "
                           f"{d} (see {recipe or 'docs/evaluation.md'})")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise MissingDependencyError("weights fetch", "eval", str(exc)) from exc
    d.mkdir(parents=True, exist_ok=True)
    try:
        snapshot_download(repo_id=contract.hf_repo, revision=contract.revision, local_dir=str(d),
                          allow_patterns=list(contract.files) or None)
    except Exception as exc:  # offline, unknown revision, auth: say which and how to continue
        raise RuntimeError(f"fetching {name!r} ({contract.hf_repo}@{contract.revision}) failed: "
                           f"{type(exc).__name__}: {exc}. Re-run on a machine with internet access (the download "
                           f"resumes), or copy the folder to {d}") from exc
    st = folder_status(name, root, contract, hash_files=True)
    if st.state is not FolderState.PRESENT:
        raise RuntimeError(f"{name}: downloaded, but {', '.join(st.missing)} is missing in {d}")
    for f, h in st.sha256.items():
        if f in contract.sha256 and contract.sha256[f] != h:
            raise RuntimeError(f"{name}: checksum mismatch for {d / f} (expected {contract.sha256[f]}, got {h})")
    write_json(d / RECORD, {"hf_repo": contract.hf_repo, "revision": contract.revision, "sha256": st.sha256})
    return d
