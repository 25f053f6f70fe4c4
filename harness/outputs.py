"""Outputs and provenance: the run-directory layout, typed manifest rows, item status, versions.

Layout: ``<run>/<model>/<context>/seed-<s>/<trajectory>/<case>/`` per item (``WorkItem.rel_dir``), holding
``meta.json`` (written last); ``<run>/manifest.jsonl`` (one :class:`ManifestRow` per item, sorted by key, updated
under a file lock as items finish); ``<run>/.locks/`` (item locks, see :mod:`harness.locks`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import platform
import re
import subprocess
import sys
import typing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Optional, Sequence

from pydantic import BeforeValidator

from . import PROJECT_ROOT
from .io import read_json, write_text
from .locks import file_lock
from .secrets import scrub
from .errors import ConfigError, UserError
from .sections import Invalid

SEED_MAX = 2**32  # seeds are integers in [0, 2^32): what every upstream RNG (numpy, torch) accepts
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.,=+-]*$")
NAME_RULE = "letters, digits and _ . , = + - (starting with a letter or digit, no '..')"


class PlanError(ConfigError):
    """A top-level setting (``run``, ``seed``, ``output_root``, ...) is invalid; the message names it and the fix."""


def _name_fix(value: Any) -> Optional[str]:
    """What is wrong with ``value`` as a plain name (None: nothing)."""
    if not isinstance(value, str) or not _NAME.fullmatch(value) or ".." in value:  # lengths: check_writable
        return f"not a plain name; use {NAME_RULE}: it becomes a folder of the run directory"
    return None


def check_name(field_name: str, value: Any, fix: str = "") -> str:
    """The one rule for every configured string that becomes a path segment of a run (``model.name``,
    ``context.name``, the trajectory, a case id, each part of ``run``, an imported video's ``model`` / ``context``):
    a plain name, so no output can leave the run directory. :class:`PlanError` naming ``field_name`` otherwise."""
    problem = _name_fix(value)
    if problem:
        raise PlanError(f"{field_name}={value!r}: {problem}" + (f"; {fix}" if fix else ""))
    return str(value)


def _seed_fix(value: Any) -> Optional[str]:
    """What is wrong with ``value`` as a seed (None: nothing): an integer in [0, 2^32), never coerced."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "must be an integer in [0, 2^32) (e.g. 0)"
    if not 0 <= value < SEED_MAX:
        return f"must be in [0, 2^32 - 1 = {SEED_MAX - 1}]"
    return None


def _as_config(rule: Any) -> Any:
    """A rule of this module as a config field's validator: the fix raised as :class:`harness.sections.Invalid`,
    to which the configuration adds the key and the value."""
    def check(value: Any) -> Any:
        problem = rule(value)
        if problem:
            raise Invalid(problem)
        return value
    return BeforeValidator(check)


#: a seed in a configuration (``seed``, ``model.seed``): :func:`check_seed`'s rule
Seed = Annotated[int, _as_config(_seed_fix)]
#: a plain name in a configuration (``model.name``): :func:`check_name`'s rule
PlainName = Annotated[str, _as_config(_name_fix)]


def check_seed(value: Any, field_name: str = "seed") -> int:
    """An integer in [0, 2^32); floats, booleans and strings are refused, never coerced (the one seed rule; in a
    configuration it is the type :data:`Seed`)."""
    problem = _seed_fix(value)
    if problem:
        raise PlanError(f"{field_name}={value!r}: {problem}")
    return int(value)


def check_run_name(run: Any) -> str:
    """``run`` is one or more plain name parts (``study/v2``, each :func:`check_name`), no ``..`` and no absolute
    path, so every output stays under ``output_root``."""
    s = str(run) if isinstance(run, (str, int)) and not isinstance(run, bool) else ""
    parts = s.split("/") if s else []
    try:
        if not parts:
            raise PlanError("")
        for p in parts:
            check_name("run", p)
    except PlanError:
        raise PlanError(f"run={run!r}: use a plain name such as run=study_v2 ({NAME_RULE}; "
                        "'/' between parts; no '..' and no absolute path)") from None
    return s


def run_dir_for(output_root: Any, run: Any) -> Path:
    """``<output_root>/<run>`` resolved; refuses a run name that would leave ``output_root``."""
    root = Path(str(output_root)).expanduser().resolve()
    d = (root / check_run_name(run)).resolve()
    if not d.is_relative_to(root):
        raise PlanError(f"run={run!r} resolves to {d}, outside output_root={root}")
    return d


NAME_MAX, PATH_MAX = 255, 4096
_LONGEST_FILE = ".context_trace.json.xxxxxxxx.json"  # the longest name written in an item folder (a temp file)


def check_writable(run_dir: Path, items: Sequence["WorkItem"]) -> None:
    """Refuse up front (nothing written) a run directory that cannot be created or whose item paths are too long."""
    import os

    longest = max((run_dir / i.rel_dir / "controls" / _LONGEST_FILE for i in items), key=lambda p: len(str(p)),
                  default=run_dir / _LONGEST_FILE)
    part = max(longest.parts, key=len)
    if len(part.encode()) > NAME_MAX or len(str(longest).encode()) >= PATH_MAX:
        raise PlanError(f"output path too long ({len(str(longest))} characters, longest part {len(part)}): "
                        f"{longest}; use a shorter output_root, run name or case id")
    probe = run_dir
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise PlanError(f"output_root: cannot write under {probe} (read-only or no permission); "
                        "set output_root=<a writable folder>")


@dataclass(frozen=True, order=True)
class WorkItem:
    """One rollout: ``model`` under ``context`` with ``seed`` on ``trajectory`` for ``case_id``."""

    model: str
    context: str
    seed: int
    trajectory: str
    case_id: str

    def __post_init__(self) -> None:
        # every segment of rel_dir passes the one name rule: an item folder can never leave its run directory
        for f, v in (("model.name", self.model), ("context.name", self.context), ("trajectory", self.trajectory),
                     ("case id", self.case_id)):
            check_name(f, v)
        check_seed(self.seed)

    # built once per item (cached in the instance's __dict__, which the frozen fields leave alone): a dry-run item
    # takes milliseconds and the runner asks for its folder a dozen times
    @functools.cached_property
    def rel_dir(self) -> Path:
        """``<model>/<context>/seed-<seed>/<trajectory>/<case>``, relative to the run directory."""
        return Path(self.model) / self.context / f"seed-{self.seed}" / self.trajectory / self.case_id

    @functools.cached_property
    def key(self) -> str:
        """``rel_dir`` as a POSIX string: the item's name in logs, locks, fingerprints and the manifest."""
        return str(self.rel_dir.as_posix())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SCHEMA_VERSION = 2
#: an item's state: at work (a generated item), compiled (a dry run's: controls only), done, failed
Status = Literal["running", "compiled", "done", "failed"]
#: the states an item ends in (derived: every state but ``running``)
FINISHED = tuple(s for s in typing.get_args(Status) if s != "running")


@dataclass
class ManifestRow:
    """One line of ``manifest.jsonl``: where an item's files are and what they hold; derived from the item's record
    (:meth:`harness.record.ItemRecord.manifest_row`), which ``meta.json`` keeps under ``manifest``.

    ``dir`` is the item folder relative to the run directory (== ``key``); ``video``/``camera`` are file names in
    it. ``num_frames``/``fps``/``phases`` describe the camera path; ``fingerprint`` the config that made it.
    """

    model: str
    context: str
    seed: int
    trajectory: str
    case_id: str
    key: str
    status: Status
    dir: str
    video: Optional[str] = None
    video_sha256: Optional[str] = None
    frames_sha256: Optional[str] = None
    camera: str = "camera.npz"
    spec_hash: Optional[str] = None
    num_frames: Optional[int] = None
    fps: Optional[float] = None
    phases: Optional[dict[str, Any]] = None
    timings: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    fingerprint: Optional[str] = None
    schema_version: int = SCHEMA_VERSION
    #: keys of the stored row this version does not know (e.g. ``external`` of imported videos), kept as read
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {**{k: v for k, v in d.items() if k != "extra"}, **self.extra}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ManifestRow":
        """A row read back from ``manifest.jsonl`` (unknown keys of later writers are ignored)."""
        known = {f.name for f in dataclasses.fields(ManifestRow)}
        row = ManifestRow(**{k: v for k, v in d.items() if k in known})
        row.extra = {k: v for k, v in d.items() if k not in known}
        return row

    @property
    def item(self) -> "WorkItem":
        return WorkItem(self.model, self.context, int(self.seed), self.trajectory, self.case_id)

    @property
    def done(self) -> bool:
        return self.status == "done"


def _section(meta: Any, key: str) -> dict[str, Any]:
    """``meta[key]`` when it is a mapping, else ``{}`` (a hand-edited or foreign ``meta.json``)."""
    v = meta.get(key) if isinstance(meta, dict) else None
    return v if isinstance(v, dict) else {}


# -- integrity: a finished item is done only while its files match what meta.json recorded ------------------------
def controls_hashes(controls_dir: Path) -> dict[str, str]:
    """sha256 of every file in ``controls/`` (relative posix name -> hex; hidden temporaries left out)."""
    from .io import sha256_file

    d = Path(controls_dir)
    if not d.is_dir():
        return {}
    return {p.relative_to(d).as_posix(): sha256_file(p) for p in sorted(d.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def item_problems(item_dir: Path, meta: Any, video_read: Optional[tuple[int, str]] = None) -> list[str]:
    """Why a finished item's files no longer match its ``meta.json`` (empty when they do): the types of its
    sections, ``video.mp4`` (present, size, sha256), ``camera.npz`` (sha256, or readable when no hash was recorded)
    and every recorded file of ``controls/``; and an item made with a trajectory layout the harness replaced
    (:mod:`trajectories.migration`). Each problem names the file and what differs.

    ``video_read``: (size in bytes, sha256 hex) of the video's bytes when the caller has read them already (the
    evaluation checks the very bytes it decodes, hashed once), instead of reading the file again."""
    from .io import sha256_file

    d = Path(item_dir)
    if not isinstance(meta, dict):
        return ["meta.json: not a JSON object"]
    out: list[str] = []
    from trajectories.migration import superseded_item

    stale = superseded_item(meta)
    if stale:  # its poses and video are consistent, but of a layout the harness replaced: never scored, redone
        out.append(f"{stale}: rerun the run's command to redo it (docs/trajectories.md, \"Migration\")")
    for key in ("video", "camera", "controls"):
        if key in meta and not isinstance(meta[key], dict):
            out.append(f"meta.json: '{key}' is a {type(meta[key]).__name__}, expected a mapping (edited by hand?)")
    video, cam, controls = _section(meta, "video"), _section(meta, "camera"), _section(meta, "controls")
    if meta.get("status") == "done":
        vp = d / str(video.get("file") or "video.mp4")
        want = video.get("sha256")
        if not isinstance(want, str):
            out.append("meta.json: video.sha256 is missing")
        elif video_read is None and not vp.is_file():
            out.append(f"{vp.name} is missing")
        else:
            size = vp.stat().st_size if video_read is None else video_read[0]
            if isinstance(video.get("size"), int) and size != video["size"]:
                out.append(f"{vp.name} is {size} bytes, meta.json recorded {video['size']} (truncated or replaced)")
            elif (sha256_file(vp) if video_read is None else video_read[1]) != want:
                out.append(f"{vp.name} sha256 differs from meta.json (replaced or edited after it was written)")
    cp = d / "camera.npz"
    if not cp.is_file():
        out.append("camera.npz is missing")
    elif isinstance(cam.get("sha256"), str):
        if sha256_file(cp) != cam["sha256"]:
            out.append("camera.npz sha256 differs from meta.json (truncated, replaced or edited)")
    else:  # written before hashes were recorded: at least it must read
        from trajectories import TrajectoryError, load_path

        try:
            load_path(cp)
        except TrajectoryError as exc:
            out.append(str(exc))
    hashes = controls.get("sha256")
    if isinstance(hashes, dict):
        for name, h in sorted(hashes.items()):
            p = d / "controls" / str(name)
            if not p.is_file():
                out.append(f"controls/{name} is missing")
            elif sha256_file(p) != h:
                out.append(f"controls/{name} sha256 differs from meta.json")
    return out


def item_meta(item_dir: Path) -> Optional[dict[str, Any]]:
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, OSError):
        m = read_json(item_dir / "meta.json")
        if isinstance(m, dict):
            return m
    return None


def item_status(item_dir: Path) -> Optional[str]:
    m = item_meta(item_dir)
    return m.get("status") if m else None


CONTROL_FILES = frozenset({".lock", ".takeover", ".manifest.lock", ".eval.lock"})


def remove_stale_temps(folder: Path, recursive_into: tuple[str, ...] = ("controls",)) -> list[Path]:
    """Delete temporary files (hidden names: atomic-write temps, ``.video.*.partial.mp4``) in ``folder`` and its
    ``controls/`` whose writer is gone (or unknown: names without a ``<host>-<pid>`` tag). Call while holding the
    folder's item lock."""
    from .io import host_tag, pid_alive, temp_owner

    gone, me = [], host_tag()
    for d in (folder, *(folder / sub for sub in recursive_into)):
        if not d.is_dir():
            continue
        for p in d.iterdir():
            owner = temp_owner(p.name)
            if owner and (owner[0] != me or pid_alive(owner[1])):
                continue  # a live writer's (e.g. an evaluation running meanwhile), or another host's: keep
            if p.name.startswith(".") and p.name not in CONTROL_FILES and p.is_file():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    gone.append(p)
    return gone


MANIFEST = "manifest.jsonl"
_ITEM_META = "*/*/seed-*/*/*/meta.json"  # WorkItem.rel_dir's five levels


@dataclass(frozen=True)
class RunDir:
    """One run directory, and the only code that knows its layout.

    ``<run>/manifest.jsonl`` (one :class:`ManifestRow` per item, sorted by key, rewritten under a file lock),
    ``<run>/<model>/<context>/seed-<s>/<trajectory>/<case>/`` per item, ``<run>/.locks/`` (item locks),
    ``<run>/eval/`` (evaluation outputs), ``<run>/.eval.lock`` (one evaluation at a time).
    """

    path: Path

    # -- finding a run ---------------------------------------------------------------------------------------------
    @staticmethod
    def for_name(output_root: Any, run: Any) -> "RunDir":
        """``<output_root>/<run>`` resolved; refuses a run name that would leave ``output_root``."""
        return RunDir(run_dir_for(output_root, run))

    @staticmethod
    def existing(name_or_path: Any, output_root: Any = "outputs") -> "RunDir":
        """A finished-or-running run given by path or by name under ``output_root``; it must hold a manifest.
        :class:`PlanError` names both places looked at otherwise."""
        cand = Path(str(name_or_path))
        looked = [cand]
        if (cand / MANIFEST).is_file():
            return RunDir(cand.resolve())
        with contextlib.suppress(PlanError):
            by_name = RunDir.for_name(output_root, name_or_path)
            looked.append(by_name.path)
            if by_name.manifest.is_file():
                return by_name
        raise PlanError(f"run={name_or_path}: no run at {' or '.join(str(p) for p in looked)} (no {MANIFEST}); "
                        "generate it first, or give run=<name under output_root or the path of a run made by the "
                        "harness>")

    # -- layout ----------------------------------------------------------------------------------------------------
    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    @property
    def eval_dir(self) -> Path:
        return self.path / "eval"

    @property
    def name(self) -> str:
        return self.path.name

    def item_dir(self, item: "WorkItem | str") -> Path:
        """The folder of an item (a :class:`WorkItem`, or its key / a manifest ``dir``); a relative path that
        would leave the run is a :class:`PlanError`."""
        rel = item.rel_dir if isinstance(item, WorkItem) else Path(str(item))
        target = (self.path / rel).resolve()
        if not str(rel) or rel.is_absolute() or ".." in rel.parts or not target.is_relative_to(self.path.resolve()):
            raise PlanError(f"{self.manifest}: dir={str(rel)!r} escapes the run directory {self.path}; an item dir "
                            "must be a relative path inside the run (fix or rebuild the manifest)")
        return self.path / rel

    def lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        """A file lock of the run (``eval`` -> ``<run>/.eval.lock``: evaluations and reports of the run), held by
        one process at a time; a process that has to wait says so, naming the lock file."""
        return file_lock(self.path / f".{name}.lock", waiting=f"another process holds the {name} lock of {self.path}")

    # -- the manifest ----------------------------------------------------------------------------------------------
    def rows(self) -> list[ManifestRow]:
        """Every row of the manifest in file order; a line that is not a JSON object is a
        :class:`harness.io.JsonLinesError` naming ``<file>:<line>``; a row that escapes the run, that disagrees
        with its own folder (``key`` and ``dir`` must both be the item its names make: a row pointing at another
        item's folder would count that item twice) or that repeats a key is a :class:`PlanError`."""
        from .io import read_jsonl

        out: list[ManifestRow] = []
        seen: set[str] = set()
        for rec in read_jsonl(self.manifest):
            row = ManifestRow.from_dict(rec)
            if row.done:
                self.item_dir(row.dir)  # containment, before anything is read from it
            self._check_row(row, seen)
            out.append(row)
        return out

    def _check_row(self, row: ManifestRow, seen: set[str]) -> None:
        fix = (f"a row describes its own item folder (edited by hand?); delete {self.manifest} and rerun the run's "
               "command: it rebuilds the manifest from every item's meta.json")
        try:
            own = row.item.key
        except (UserError, TypeError, ValueError) as exc:
            raise PlanError(f"{self.manifest}: row {row.key!r}: {exc}; {fix}") from None
        if row.key != own or (row.dir or row.key) != own:
            raise PlanError(f"{self.manifest}: row {row.key!r}: key={row.key!r} and dir={row.dir!r} disagree with "
                            f"the item its names make ({own}); {fix}")
        if own in seen:
            raise PlanError(f"{self.manifest}: two rows for {own}; {fix}")
        seen.add(own)

    def done_rows(self) -> list[ManifestRow]:
        """The rows of finished items (the later line of an item wins)."""
        by_dir: dict[str, ManifestRow] = {}
        for r in self.rows():
            by_dir[r.dir or r.key] = r
        return [r for r in by_dir.values() if r.done]

    def update_manifest(self, rows: Iterable[dict[str, Any]]) -> Path:
        """Insert or replace the given rows (by ``key``), under the manifest lock. Unreadable lines are dropped
        (they are rebuilt from ``meta.json`` by :meth:`rebuild_manifest`)."""
        with file_lock(self.path / ".manifest.lock"):
            existing: dict[str, str] = {}
            with contextlib.suppress(FileNotFoundError):
                for line in self.manifest.read_text().splitlines():
                    with contextlib.suppress(json.JSONDecodeError, KeyError, TypeError):
                        existing[json.loads(line)["key"]] = line
            for r in rows:
                existing[r["key"]] = scrub(json.dumps(r, sort_keys=True))
            self._write_manifest(existing)
        return self.manifest

    def item_keys(self) -> list[str]:
        """The keys of every item folder that holds a ``meta.json`` (sorted), planned or not."""
        if not self.path.is_dir():
            return []
        return [p.parent.relative_to(self.path).as_posix() for p in sorted(self.path.glob(_ITEM_META))]

    def rebuild_manifest(self) -> Path:
        """Rewrite the manifest from every item's ``meta.json`` (one line each, sorted by item key)."""
        with file_lock(self.path / ".manifest.lock"):
            rows: dict[str, str] = {}
            for meta_path in sorted(self.path.glob(_ITEM_META)):
                m = item_meta(meta_path.parent)
                row = _section(m, "manifest")
                if row:  # read from a meta.json, which was scrubbed when written
                    rows[str(row.get("key", meta_path.parent))] = json.dumps(row, sort_keys=True)
            self._write_manifest(rows)
        return self.manifest

    def _write_manifest(self, rows: dict[str, str]) -> None:
        for p in self.path.glob(f".{MANIFEST}.*"):  # under the manifest lock: left by a writer that died
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        lines = [rows[k] for k in sorted(rows)]  # every line scrubbed when it entered (or read back from disk)
        write_text(self.manifest, "\n".join(lines) + ("\n" if lines else ""), scrubbed=True)

    def problems(self) -> list[str]:
        """Run-level leftovers: item locks (a process is on them, or died), partial videos and temporary files of
        any writer (each named)."""
        out = []
        locks = self.path / ".locks"
        if locks.is_dir():
            out += [f"lock left: {p} (a process is working on that item, or died; a rerun takes a dead one over)"
                    for p in sorted(locks.glob("*.lock"))]
        for p in sorted(self.path.rglob(".*")):
            if p.is_file() and p.name not in CONTROL_FILES and ".locks" not in p.parts and ".hydra" not in p.parts:
                kind = "partial video" if p.name.endswith(".partial.mp4") else "temporary file"
                out.append(f"{kind} left: {p} (a writer was killed; a rerun removes it)")
        return out


def versions() -> dict[str, Any]:
    import numpy

    out: dict[str, Any] = {"python": platform.python_version(), "numpy": numpy.__version__,
                           "platform": platform.platform()}
    for mod in ("cv2", "av", "scipy", "hydra", "omegaconf"):
        with contextlib.suppress(Exception):
            out[mod] = __import__(mod).__version__
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].__version__
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        out["worldmem-harness"] = version("worldmem-harness")
    return out


def git_state() -> dict[str, Any]:
    root = PROJECT_ROOT
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=5)
        if sha.returncode == 0:
            return {"sha": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"sha": None, "dirty": None}
