"""Trajectory builders: LRLR, LRLRLR, LRUD (rotation in place) and the square translation loop.

A trajectory is defined on normalised time ``tau in [0, 1]`` as a sequence of segments with relative durations
(weights), then sampled at ``tau_i = i / (N - 1)`` for a model's native frame count ``N``. Frame 0 and frame
``N - 1`` therefore hit the first and last poses exactly, and every revisit ends exactly at the start pose.

Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world, +x right / +y down / +z forward,
world = camera frame of frame 0; positive yaw turns the view right, positive pitch turns it up. ``L`` is a yaw to
the left (negative yaw), ``U`` a pitch up (positive pitch). The square loop moves Forward (+z), Right (+x),
Backward (-z), Left (-x) with the orientation fixed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from .conventions import fov_from_intrinsics, rotmat_from_yaw_pitch, se3
from .fields import check_fields
from .path import CameraPath, Segment, TrajectoryError
from .phases import HOLD, VIEW, departure, revisit

#: Direction name -> (axis, sign of the angle while departing). L/R/U/D as in the paper.
DIRECTIONS = {"left": ("yaw", -1.0), "right": ("yaw", 1.0), "up": ("pitch", 1.0), "down": ("pitch", -1.0)}

#: Qualification rule of the WorldMemBench paper (appendix G.1): a departure must reach at least this angle.
MIN_DEPARTURE_DEG = 30.0


@dataclass(frozen=True)
class Timing:
    """Relative durations (weights on normalised time; they need not sum to 1).

    initial_hold: the initial observation ``V``. move: one sweep away or back. away_hold: the pause at the far
    end of a departure. revisit_hold: the pause at the start pose that closes each revisit. final_hold: ``H``.
    """

    initial_hold: float = 0.08
    move: float = 0.13
    away_hold: float = 0.04
    revisit_hold: float = 0.06
    final_hold: float = 0.10


@dataclass(frozen=True)
class TrajectorySpec:
    """Parameters of one trajectory (what ``conf/trajectory/<name>.yaml`` holds).

    kind: ``rotation`` or ``square``. cycles: for rotations, the departure direction of each away-and-back
    cycle (``left``/``right``/``up``/``down``). yaw_deg / pitch_deg: departure amplitudes. side: square side
    length in scene units (see docs/conventions.md for the scale policy).
    """

    name: str
    kind: str = "rotation"
    cycles: tuple[str, ...] = ("left", "left")
    yaw_deg: float = 90.0
    pitch_deg: float = 60.0
    side: float = 1.0
    timing: Timing = field(default_factory=Timing)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "TrajectorySpec":
        d = dict(d)
        check_fields("trajectory", d, {"name", "kind", "cycles", "yaw_deg", "pitch_deg", "side", "timing",
                                       "description"}, TrajectoryError)
        d.pop("description", None)
        timing = d.pop("timing", None) or {}
        bad = set(timing) - set(Timing.__dataclass_fields__)
        if bad:
            raise TrajectoryError(
                f"trajectory.timing: unknown field(s) {sorted(bad)}; allowed: {sorted(Timing.__dataclass_fields__)}"
            )
        if "cycles" in d:
            d["cycles"] = tuple(d["cycles"])
        return TrajectorySpec(timing=Timing(**timing), **d)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cycles"] = list(self.cycles)
        return out


def _check(spec: TrajectorySpec, num_frames: int, hfov: float | None, vfov: float | None) -> None:
    t = spec.timing
    for name, v in asdict(t).items():
        if not np.isfinite(v) or v < 0:
            raise TrajectoryError(f"trajectory.timing.{name}={v}: must be a finite number >= 0")
    if t.move <= 0:
        raise TrajectoryError("trajectory.timing.move must be > 0 (a departure needs time to happen)")
    if spec.kind == "rotation":
        if not spec.cycles:
            raise TrajectoryError("trajectory.cycles is empty: give at least one of left/right/up/down")
        for c in spec.cycles:
            if c not in DIRECTIONS:
                raise TrajectoryError(f"trajectory.cycles: unknown direction {c!r}; use left, right, up or down")
        for axis, amp, fov in (("yaw_deg", spec.yaw_deg, hfov), ("pitch_deg", spec.pitch_deg, vfov)):
            used = any(DIRECTIONS[c][0] == axis[:-4] for c in spec.cycles)
            if not used:
                continue
            if not (MIN_DEPARTURE_DEG <= amp < 180.0):
                raise TrajectoryError(
                    f"trajectory.{axis}={amp}: a departure must be >= {MIN_DEPARTURE_DEG} deg (the paper's "
                    "qualification rule) and < 180 deg"
                )
            if axis == "pitch_deg" and amp >= 90.0:
                raise TrajectoryError(f"trajectory.pitch_deg={amp}: must be < 90 deg (the view would flip over)")
            if fov is not None and amp <= fov / 2.0:
                raise TrajectoryError(
                    f"trajectory.{axis}={amp} keeps the initial view's centre in frame (half field of view "
                    f"{fov / 2:.1f} deg); raise it above {fov / 2:.1f} deg"
                )
    elif spec.kind == "square":
        if not (np.isfinite(spec.side) and spec.side > 0):
            raise TrajectoryError(f"trajectory.side={spec.side}: the square's side must be > 0 scene units")
    else:
        raise TrajectoryError(f"trajectory.kind={spec.kind!r}: use 'rotation' or 'square'")
    n_seg = len(_segments(spec))
    if num_frames < 2 * n_seg:
        raise TrajectoryError(
            f"num_frames={num_frames} is too short for trajectory {spec.name!r} ({n_seg} segments); give at "
            f"least {2 * n_seg} frames"
        )


# A segment on normalised time: (phase, label, kind, weight, pose function of s in [0, 1] -> (yaw, pitch, t)).
_Seg = tuple[str, str, str, float, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]]


def _ease(s: np.ndarray) -> np.ndarray:
    """Cosine ease-in/out on [0, 1]: strictly increasing inside, zero velocity at both ends (no jerk)."""
    return 0.5 - 0.5 * np.cos(np.pi * s)


def _const(yaw: float, pitch: float, t: np.ndarray) -> Callable:
    def f(s: np.ndarray):
        n = len(s)
        return np.full(n, yaw), np.full(n, pitch), np.broadcast_to(t, (n, 3)).copy()

    return f


def _rot_move(axis: str, a0: float, a1: float) -> Callable:
    def f(s: np.ndarray):
        ang = a0 + (a1 - a0) * _ease(s)
        z = np.zeros_like(s)
        yaw, pitch = (ang, z) if axis == "yaw" else (z, ang)
        return yaw, pitch, np.zeros((len(s), 3))

    return f


def _trans_move(p0: np.ndarray, p1: np.ndarray) -> Callable:
    def f(s: np.ndarray):
        e = _ease(s)[:, None]
        z = np.zeros_like(s)
        return z, z, p0[None] + (p1 - p0)[None] * e

    return f


def _segments(spec: TrajectorySpec) -> list[_Seg]:
    t = spec.timing
    zero = np.zeros(3)
    segs: list[_Seg] = [(VIEW, "hold", "hold", t.initial_hold, _const(0.0, 0.0, zero))]
    if spec.kind == "rotation":
        for k, direction in enumerate(spec.cycles, start=1):
            axis, sign = DIRECTIONS[direction]
            amp = np.deg2rad(spec.yaw_deg if axis == "yaw" else spec.pitch_deg) * sign
            away = (amp, 0.0) if axis == "yaw" else (0.0, amp)
            out_lbl = {"left": "L", "right": "R", "up": "U", "down": "D"}[direction]
            back_lbl = {"L": "R", "R": "L", "U": "D", "D": "U"}[out_lbl]
            segs.append((departure(k), out_lbl, "move", t.move, _rot_move(axis, 0.0, amp)))
            segs.append((departure(k), "hold", "hold", t.away_hold, _const(*away, zero)))
            segs.append((revisit(k), back_lbl, "move", t.move, _rot_move(axis, amp, 0.0)))
            segs.append((revisit(k), "hold", "hold", t.revisit_hold, _const(0.0, 0.0, zero)))
    else:
        s = spec.side
        corners = [np.zeros(3), np.array([0, 0, s]), np.array([s, 0, s]), np.array([s, 0, 0]), np.zeros(3)]
        for leg, (p0, p1) in zip("FRBL", zip(corners[:-1], corners[1:])):
            phase = revisit(1) if leg == "L" else departure(1)
            segs.append((phase, leg, "move", t.move, _trans_move(np.asarray(p0, float), np.asarray(p1, float))))
        segs.append((revisit(1), "hold", "hold", t.revisit_hold, _const(0.0, 0.0, zero)))
    segs.append((HOLD, "hold", "hold", t.final_hold, _const(0.0, 0.0, zero)))
    return [sg for sg in segs if sg[3] > 0]


def build_path(
    spec: TrajectorySpec,
    num_frames: int,
    fps: float,
    K: np.ndarray,
    height: int,
    width: int,
    check_fov: bool = True,
) -> CameraPath:
    """Sample ``spec`` at ``num_frames`` frames.

    Args:
        spec: trajectory parameters.
        num_frames: the model's native frame count ``N`` (e.g. 493, 497, 501, 505, 481, 551).
        fps: frame rate recorded in the path.
        K: (3, 3) intrinsics in pixels for ``height`` x ``width``; used to check that departures leave the view.
        check_fov: when True, a rotation amplitude that keeps the initial view's centre in frame is an error.

    Returns:
        A :class:`CameraPath` whose poses follow the module conventions (OpenCV c2w, world = frame 0).

    Raises:
        TrajectoryError: impossible parameters (the message names the field and the fix).
    """
    K = np.asarray(K, dtype=np.float64)
    hfov, vfov = fov_from_intrinsics(K, width, height) if check_fov else (None, None)
    _check(spec, num_frames, hfov, vfov)
    segs = _segments(spec)
    w = np.array([s[3] for s in segs], dtype=np.float64)
    bounds = np.concatenate([[0.0], np.cumsum(w) / w.sum()])
    bounds[-1] = 1.0
    tau = np.arange(num_frames, dtype=np.float64) / (num_frames - 1)
    # Segment of each frame: half-open [b_j, b_{j+1}); the last frame belongs to the last segment.
    seg_idx = np.clip(np.searchsorted(bounds, tau, side="right") - 1, 0, len(segs) - 1)
    yaw = np.zeros(num_frames)
    pitch = np.zeros(num_frames)
    trans = np.zeros((num_frames, 3))
    for j, (_, _, _, _, fn) in enumerate(segs):
        m = seg_idx == j
        if not m.any():
            continue
        s = (tau[m] - bounds[j]) / (bounds[j + 1] - bounds[j])
        y, p, tr = fn(np.clip(s, 0.0, 1.0))
        yaw[m], pitch[m], trans[m] = y, p, tr
    c2w = se3(rotmat_from_yaw_pitch(yaw, pitch), trans)
    c2w[0] = np.eye(4)  # exact, whatever the float path

    segments: list[Segment] = []
    phases: dict[str, tuple[int, int]] = {}
    for j, (phase, label, kind, _, _) in enumerate(segs):
        idx = np.nonzero(seg_idx == j)[0]
        if len(idx) == 0:
            raise TrajectoryError(
                f"num_frames={num_frames} leaves segment {phase}/{label} of {spec.name!r} without frames; raise "
                "the frame count or that segment's timing weight"
            )
        a, b = int(idx[0]), int(idx[-1]) + 1
        segments.append(Segment(phase, label, kind, a, b))
        lo, hi = phases.get(phase, (a, b))
        phases[phase] = (min(lo, a), max(hi, b))
    params = spec.to_dict()
    params.update({"num_frames": num_frames, "hfov_deg": hfov, "vfov_deg": vfov})
    return CameraPath(
        name=spec.name,
        c2w=c2w,
        K=K,
        fps=float(fps),
        height=int(height),
        width=int(width),
        phases=phases,
        segments=tuple(segments),
        params=params,
    )
