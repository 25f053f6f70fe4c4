"""The canonical camera path value and its (de)serialisation.

A :class:`CameraPath` is what every adapter compiles and what evaluation reads revisit windows from.
Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world 4x4 float64 poses, +x right / +y down /
+z forward, world = camera frame of frame 0, positive yaw turns right, positive pitch turns up, K in pixels.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from harness.errors import ConfigError

from .conventions import CONVENTION_TAG, yaw_pitch_from_rotmat
from .phases import PhaseKind, count, numbered


class TrajectoryError(ConfigError):
    """Impossible or inconsistent trajectory parameters, or an unreadable camera file (the message names the field
    or the file, and the fix)."""


@dataclass(frozen=True)
class Segment:
    """One piece of a trajectory in frame indices ``[start, end)``.

    ``kind`` is ``hold`` or ``move``; ``phase`` is the phase label it belongs to (``V``, ``D1``, ``R1``, ..., ``H``);
    ``label`` is a finer name (``L``/``R``/``U``/``D`` for rotations, ``F``/``R``/``B``/``L`` legs for the square).
    """

    phase: str
    label: str
    kind: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "label": self.label, "kind": self.kind, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class CameraPath:
    """A camera trajectory sampled at a model's native frame count.

    Attributes:
        name: trajectory name (``lrlr``, ``lrlrlr``, ``lrud``, ``square``, ...).
        c2w: (T, 4, 4) float64 camera-to-world poses, OpenCV axes, ``c2w[0] = I``.
        K: (3, 3) float64 pinhole intrinsics in pixels for ``height`` x ``width`` (+0.5 pixel centres).
        fps: frames per second of the video this path drives.
        height, width: canvas size in pixels.
        phases: ordered mapping phase label -> (start, end) half-open frame range; the ranges tile ``[0, T)``.
            Labels: ``V`` initial observation, ``D1..Dk`` departures, ``R1..Rk`` revisits, ``H`` final hold.
        segments: finer pieces (holds and moves, square legs) in frame indices.
        params: the builder parameters (amplitudes, timing weights, side length, ...), JSON-serialisable.
    """

    name: str
    c2w: np.ndarray
    K: np.ndarray
    fps: float
    height: int
    width: int
    phases: dict[str, tuple[int, int]]
    segments: tuple[Segment, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.c2w.shape[0])

    @property
    def num_revisits(self) -> int:
        """Number of prescribed revisits (phases ``R1..Rk``)."""
        return count(self.phases, PhaseKind.RETURN)

    def revisit_windows(self) -> list[tuple[int, int]]:
        """Frame ranges of ``R1..Rk`` in order."""
        return numbered(self.phases, PhaseKind.RETURN)

    def yaw_pitch_deg(self) -> tuple[np.ndarray, np.ndarray]:
        yaw, pitch = yaw_pitch_from_rotmat(self.c2w[:, :3, :3])
        return np.rad2deg(yaw), np.rad2deg(pitch)

    def meta(self) -> dict[str, Any]:
        """JSON-serialisable description (everything but the arrays)."""
        return {
            "name": self.name,
            "convention": CONVENTION_TAG,
            "fps": float(self.fps),
            "height": int(self.height),
            "width": int(self.width),
            "num_frames": self.num_frames,
            "phases": {k: [int(a), int(b)] for k, (a, b) in self.phases.items()},
            "segments": [s.to_dict() for s in self.segments],
            "params": self.params,
        }

    def spec_hash(self) -> str:
        """Short content hash of poses, intrinsics and metadata (stable across processes and machines)."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(np.round(self.c2w, 12)).tobytes())
        h.update(np.ascontiguousarray(np.round(self.K, 9)).tobytes())
        h.update(json.dumps(self.meta(), sort_keys=True).encode())
        return h.hexdigest()[:16]

    def save(self, path: str | Path) -> None:
        """Write ``.npz`` with ``c2w``, ``K``, ``fps``, ``hw`` and ``meta_json`` (phases, segments, params).

        Written to a temporary name and renamed, so a reader never sees half a file.
        """
        path = Path(path)
        with atomic_target(path) as tmp:
            self.save_to(tmp)

    def save_to(self, file: Any) -> None:
        """The ``.npz`` of :meth:`save` written to ``file`` (a path or a binary file object), not atomically."""
        np.savez(
            file,
            c2w=self.c2w.astype(np.float64),
            K=self.K.astype(np.float64),
            fps=np.float64(self.fps),
            hw=np.array([self.height, self.width], dtype=np.int64),
            meta_json=np.array(json.dumps(self.meta(), sort_keys=True)),
        )


def atomic_target(path: Path) -> AbstractContextManager[Path]:
    """A unique temporary file next to ``path``, renamed onto it on success (removed on error). The name follows
    :func:`harness.io.atomic_path`'s convention, ``.<name>.<host>-<pid>.<random><suffix>``, so two writers never
    share one and a dead writer's leftover is found (this layer cannot import :mod:`harness.io`)."""
    import contextlib
    import os
    import socket

    @contextlib.contextmanager
    def _ctx() -> Iterator[Path]:
        path.parent.mkdir(parents=True, exist_ok=True)
        host = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]
        tmp = path.with_name(f".{path.name}.{host}-{os.getpid()}.{os.urandom(4).hex()}{path.suffix}")
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()

    return _ctx()


def load_path(path: str | Path) -> CameraPath:
    """Read a :class:`CameraPath` written by :meth:`CameraPath.save` (no pickle). A missing, truncated or foreign
    file is a :class:`~trajectories.TrajectoryError` naming it."""

    try:
        return _load_path(Path(path))
    except FileNotFoundError:
        raise TrajectoryError(f"{path}: camera file missing; rerun the item (or re-import the video)") from None
    except Exception as exc:  # BadZipFile, a missing array, a pickled array, malformed meta_json
        raise TrajectoryError(f"{path}: not a readable camera file ({type(exc).__name__}: {exc}); it is truncated "
                              "or was replaced: rerun the item (or re-import the video)") from None


def _load_path(path: Path) -> CameraPath:
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta_json"]))
        hw = z["hw"]
        return CameraPath(
            name=meta["name"],
            c2w=np.array(z["c2w"], dtype=np.float64),
            K=np.array(z["K"], dtype=np.float64),
            fps=float(z["fps"]),
            height=int(hw[0]),
            width=int(hw[1]),
            phases={k: (int(a), int(b)) for k, (a, b) in meta["phases"].items()},
            segments=tuple(Segment(**s) for s in meta.get("segments", [])),
            params=meta.get("params", {}),
        )
