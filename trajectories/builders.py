"""Trajectory builders: LRLR, LRLRLR, LRUD, LR-Hold (rotation in place) and the square translation loop.

Two layouts:

- **Normalised time** (``lrlr``, ``lrlrlr``, ``lrud``, ``square``): a sequence of segments with relative durations
  (weights) on ``tau in [0, 1]``, sampled at ``tau_i = i / (N - 1)`` for a model's native frame count ``N``. Frame 0
  and frame ``N - 1`` hit the first and last poses exactly, and every revisit ends exactly at the start pose; the
  speed scales with ``N``.
- **Frames** (the release presets ``lrlr_sym_0p75dpf``, ``lrud_sym_0p75dpf``, ``lrlrlr_sym_1dpf``,
  ``lr_hold_sym_0p5dpf``, ``translate_square``; ``deg_per_frame`` set for a rotation, ``leg_frames`` for the
  square): every sweep takes ``amplitude / deg_per_frame`` frames and every square leg ``leg_frames`` frames
  whatever ``N`` is, holds are given in frames, and the final hold takes the frames that are left. Frame 0 is the
  initial view; the first move reaches frame 1 after the initial hold. The presets' numbers (480 frames of layout
  after frame 0, LR-Hold's initial hold, the square's legs) are the harness's INFERENCE from the paper's counts
  (trajectories/paper_numbers.yaml, checked by :mod:`trajectories.paper`); docs/trajectories.md ("Release
  presets") gives the numbers each rests on and the one key that changes it.

Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world, +x right / +y down / +z forward,
world = camera frame of frame 0; positive yaw turns the view right, positive pitch turns it up. ``L`` is a yaw to
the left (negative yaw), ``U`` a pitch up (positive pitch). The square loop moves Forward (+z), Right (+x),
Backward (-z), Left (-x) with the orientation fixed.
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Annotated, Any, Callable, ClassVar, Literal, Optional, Union

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field, StrictFloat, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from harness.errors import UserError
from harness.sections import Fix, Section

from .conventions import fov_from_intrinsics, rotmat_from_yaw_pitch, se3
from .path import CameraPath, Segment, TrajectoryError
from .phases import HOLD, VIEW, departure, revisit

#: a departure's direction (L/R/U/D as in the paper)
Direction = Literal["left", "right", "up", "down"]
#: Direction -> (axis, sign of the angle while departing)
DIRECTIONS: dict[str, tuple[str, float]] = {"left": ("yaw", -1.0), "right": ("yaw", 1.0), "up": ("pitch", 1.0),
                                            "down": ("pitch", -1.0)}
#: any number, kept as given (an integer stays an integer: the spec is fingerprinted as given); the rules of
#: :func:`build_path` refuse the impossible ones, for a spec built in code as for one read from a config
_Amount = Union[StrictInt, StrictFloat]
_CONFIG = ConfigDict(extra="forbid")


def _default_if_none(value: Any) -> Any:
    """``timing: null`` / ``hold_frames: null`` in a trajectory file: the defaults."""
    return {} if value is None else value


def _direction_fix(cycles: Any) -> str:
    bad = [c for c in cycles if c not in DIRECTIONS] if isinstance(cycles, (list, tuple)) else []
    return (f"unknown direction {bad[0]!r}; " if bad else "a list of directions; ") + "use left, right, up or down"

#: Qualification rule of the WorldMemBench paper (appendix G.1): a departure must reach at least this angle.
MIN_DEPARTURE_DEG = 30.0


@dataclass(frozen=True, config=_CONFIG)
class Timing(Section):
    """Relative durations (weights on normalised time; they need not sum to 1; ``trajectory.timing``).

    initial_hold: the initial observation ``V``. move: one sweep away or back. away_hold: the pause at the far
    end of a departure. revisit_hold: the pause at the start pose that closes each revisit. final_hold: ``H``.
    """

    section: ClassVar[str] = "trajectory.timing"
    error: ClassVar[type[UserError]] = TrajectoryError
    noun: ClassVar[str] = "field"

    initial_hold: _Amount = 0.08
    move: _Amount = 0.13
    away_hold: _Amount = 0.04
    revisit_hold: _Amount = 0.06
    final_hold: _Amount = 0.10


#: Move profiles of the frame layout. ``constant``: the angle changes by exactly ``deg_per_frame`` (a square leg by
#: ``side / leg_frames``) every frame (the harness's INFERENCE for the release names "sym_<n>dpf", set once for every
#: preset in conf/trajectory/_release.yaml); ``cosine``: a symmetric ease-in/out with the same mean speed (the other
#: reading of "sym"), peaking at pi/2 x the mean.
Profile = Literal["constant", "cosine"]
PROFILES: tuple[str, ...] = Profile.__args__  # type: ignore[attr-defined]  # a Literal's values

#: frames of a hold: a whole number >= 0
_Frames = Annotated[StrictInt, Field(ge=0), Fix("give a whole number of frames >= 0")]


@dataclass(frozen=True, config=_CONFIG)
class HoldFrames(Section):
    """Holds of the frame layout, in frames (``deg_per_frame`` or ``leg_frames`` set; ``trajectory.hold_frames``).
    initial: frames held after frame 0 before the first move (the ``V`` phase is frame 0 plus these). away: at the
    far end of each departure (the square: at each corner of its departure F, R, B). revisit: at the start pose
    after each return. The final hold ``H`` takes every frame left up to the model's count."""

    section: ClassVar[str] = "trajectory.hold_frames"
    error: ClassVar[type[UserError]] = TrajectoryError
    noun: ClassVar[str] = "field"

    initial: _Frames = 0
    away: _Frames = 0
    revisit: _Frames = 0


@dataclass(frozen=True, config=_CONFIG)
class TrajectorySpec(Section):
    """Parameters of one trajectory (what ``conf/trajectory/<name>.yaml`` holds, the ``trajectory`` section).

    kind: ``rotation`` or ``square``. cycles: for rotations, the departure direction of each away-and-back
    cycle (``left``/``right``/``up``/``down``). yaw_deg / pitch_deg: departure amplitudes. side: square side
    length in scene units (see docs/conventions.md for the scale policy). deg_per_frame: angular speed of every
    sweep of a rotation in degrees per frame; leg_frames: frames of each leg of the square. Either set, the path is
    laid out in frames (``hold_frames``, ``profile``) instead of on normalised time (``timing``). release: the
    trajectory's name in the official WorldMemBench release, when it has one (``lrlr_sym_0p75dpf``, ...).
    variant_of / families: what a release preset stands in for (the trajectory a case lists, and the case families
    it replaces it for; read by the case filter, :meth:`harness.cases.Case.runs_on`); not part of the path.
    The types are checked when a spec is made; the rules that need the model's frame count and field of view when
    the path is built (:func:`build_path`).
    """

    section: ClassVar[str] = "trajectory"
    error: ClassVar[type[UserError]] = TrajectoryError
    noun: ClassVar[str] = "field"
    ignored: ClassVar[tuple[str, ...]] = ("description",)

    name: StrictStr
    kind: Annotated[Literal["rotation", "square"], Fix("use 'rotation' or 'square'")] = "rotation"
    cycles: Annotated[tuple[Direction, ...], Fix(_direction_fix)] = ("left", "left")
    yaw_deg: _Amount = 90.0
    pitch_deg: _Amount = 60.0
    side: _Amount = 1.0
    timing: Annotated[Timing, BeforeValidator(_default_if_none)] = field(default_factory=Timing)
    deg_per_frame: Optional[_Amount] = None
    profile: Annotated[Profile, Fix(f"use one of {list(PROFILES)}")] = "constant"
    hold_frames: Annotated[HoldFrames, BeforeValidator(_default_if_none)] = field(default_factory=HoldFrames)
    release: Optional[StrictStr] = None
    leg_frames: Optional[StrictInt] = None
    variant_of: Optional[StrictStr] = None
    families: Optional[tuple[StrictStr, ...]] = None

    @property
    def frame_layout(self) -> bool:
        """True for the layout in frames (``deg_per_frame`` or ``leg_frames`` set)."""
        return self.deg_per_frame is not None or self.leg_frames is not None

    def to_dict(self) -> dict[str, Any]:
        """The spec as it decides the path (fingerprints, the compile cache's key): ``variant_of`` and
        ``families`` left out."""
        out = asdict(self)
        out["cycles"] = list(self.cycles)
        for key in ("variant_of", "families"):
            out.pop(key)
        # a field at its "not set" value is left out, so a spec keeps the dict (fingerprint, compile-cache key) it had
        # before the field existed: the normalised-time specs their historical dict, the rotation presets theirs
        if not self.frame_layout:
            for key in ("deg_per_frame", "profile", "hold_frames", "release"):
                out.pop(key)
        for key in ("release", "leg_frames", "deg_per_frame"):
            if key in out and out[key] is None:
                out.pop(key)
        return out

    def min_frames(self) -> int:
        """The fewest frames this spec can be laid out in (frame layout: frame 0, the holds and every move, with an
        empty final hold; normalised time: two frames a segment)."""
        if not self.frame_layout:
            return 2 * len(_segments(self))
        return 1 + sum(int(n) for _, _, _, n, _ in _frame_segments(self))


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
        for axis, amp, fov in (("yaw_deg", spec.yaw_deg, hfov), ("pitch_deg", spec.pitch_deg, vfov)):
            used = any(DIRECTIONS[c][0] == axis[:-4] for c in spec.cycles)
            if not used:
                continue
            if not (MIN_DEPARTURE_DEG <= amp < 180.0):
                raise TrajectoryError(
                    f"trajectory.{axis}={amp}: a departure must be >= {MIN_DEPARTURE_DEG} deg (the paper's "
                    "qualification rule) and < 180 deg"
                )
            if axis == "pitch_deg" and amp > 90.0:
                raise TrajectoryError(f"trajectory.pitch_deg={amp}: must be <= 90 deg (the view would flip over)")
            if fov is not None and amp <= fov / 2.0:
                raise TrajectoryError(
                    f"trajectory.{axis}={amp} keeps the initial view's centre in frame (half field of view "
                    f"{fov / 2:.1f} deg); raise it above {fov / 2:.1f} deg"
                )
    elif not (np.isfinite(spec.side) and spec.side > 0):  # the square (``kind`` is one of the two)
        raise TrajectoryError(f"trajectory.side={spec.side}: the square's side must be > 0 scene units")
    if spec.frame_layout:
        _check_frame_layout(spec, num_frames)
        return
    n_seg = len(_segments(spec))
    if num_frames < 2 * n_seg:
        raise TrajectoryError(
            f"num_frames={num_frames} is too short for trajectory {spec.name!r} ({n_seg} segments); give at "
            f"least {2 * n_seg} frames"
        )


def _check_frame_layout(spec: TrajectorySpec, num_frames: int) -> None:
    if spec.kind == "rotation":
        _check_speed(spec)
    else:
        _check_legs(spec)
    need = spec.min_frames()
    if num_frames < need:
        moves = (f"sweeps at {spec.deg_per_frame:g} deg per frame" if spec.kind == "rotation"
                 else f"legs of {spec.leg_frames} frames")
        raise TrajectoryError(
            f"num_frames={num_frames} is too short for trajectory {spec.name!r}: its {moves} and holds take {need} "
            f"frames; give the model at least {need} frames for it (model.frames_per_trajectory.{spec.name}: {need} "
            f"or more) or shorten the trajectory's moves"
        )


def _check_speed(spec: TrajectorySpec) -> None:
    """A rotation's frame layout: an angular speed, no square legs."""
    dpf = spec.deg_per_frame
    if spec.leg_frames is not None:
        raise TrajectoryError(f"trajectory.leg_frames={spec.leg_frames}: frames per leg apply to the square only; "
                              f"give the rotation {spec.name!r} a speed (trajectory.deg_per_frame) instead")
    if isinstance(dpf, bool) or not isinstance(dpf, (int, float)) or not np.isfinite(dpf) or dpf <= 0:
        raise TrajectoryError(f"trajectory.deg_per_frame={dpf!r}: give an angular speed in degrees per frame > 0")


def _check_legs(spec: TrajectorySpec) -> None:
    """The square's frame layout: whole frames per leg, no angular speed."""
    n = spec.leg_frames
    if spec.deg_per_frame is not None:
        raise TrajectoryError(f"trajectory.deg_per_frame={spec.deg_per_frame}: an angular speed applies to rotations "
                              f"only; remove it from {spec.name!r} (kind {spec.kind!r}; its legs take "
                              "trajectory.leg_frames frames each) or use kind: rotation")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TrajectoryError(f"trajectory.leg_frames={n!r}: give a whole number of frames >= 1 for each leg")


# A pose function of normalised time s (n,) in [0, 1] -> (yaw (n,), pitch (n,) radians, translation (n, 3)).
_Motion = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
# A segment on normalised time: (phase, label, kind, weight, pose function).
_Seg = tuple[str, str, str, float, _Motion]


def _sweep_frames(spec: TrajectorySpec, amplitude_deg: float) -> int:
    """Frames one sweep of ``amplitude_deg`` takes at ``spec.deg_per_frame`` (rounded to whole frames; the speed
    achieved is recorded in the path's params)."""
    assert spec.deg_per_frame is not None  # only the frame layout sweeps at a speed
    return max(1, int(round(amplitude_deg / float(spec.deg_per_frame))))


def _frame_segments(spec: TrajectorySpec) -> list[_Seg]:
    """The frame layout's segments after frame 0, each with its length in frames (final hold excluded): the
    initial hold, then per rotation cycle the sweep away, the away hold, the sweep back and the revisit hold (the
    square: legs F, R, B with the away hold at each corner, leg L, the revisit hold)."""
    h = spec.hold_frames
    shape = _ease if spec.profile == "cosine" else _linear
    zero = np.zeros(3)
    segs: list[_Seg] = [(VIEW, "hold", "hold", h.initial, _const(0.0, 0.0, zero))]
    if spec.kind == "square":
        corners = _square_corners(spec.side)
        for leg, (p0, p1) in zip("FRBL", zip(corners[:-1], corners[1:])):
            phase = revisit(1) if leg == "L" else departure(1)
            segs.append((phase, leg, "move", int(spec.leg_frames or 0), _trans_move(p0, p1, shape)))
            if leg != "L":
                segs.append((phase, "hold", "hold", h.away, _const(0.0, 0.0, p1)))
        segs.append((revisit(1), "hold", "hold", h.revisit, _const(0.0, 0.0, zero)))
        return segs
    for k, direction in enumerate(spec.cycles, start=1):
        axis, sign = DIRECTIONS[direction]
        amp_deg = spec.yaw_deg if axis == "yaw" else spec.pitch_deg
        amp = np.deg2rad(amp_deg) * sign
        away = (amp, 0.0) if axis == "yaw" else (0.0, amp)
        out_lbl = _LABELS[direction]
        n = _sweep_frames(spec, amp_deg)
        segs.append((departure(k), out_lbl, "move", n, _rot_move(axis, 0.0, amp, shape)))
        segs.append((departure(k), "hold", "hold", h.away, _const(away[0], away[1], zero)))
        segs.append((revisit(k), _BACK[out_lbl], "move", n, _rot_move(axis, amp, 0.0, shape)))
        segs.append((revisit(k), "hold", "hold", h.revisit, _const(0.0, 0.0, zero)))
    return segs


def _square_corners(side: float) -> list[np.ndarray]:
    """Start and corners of the square loop: Forward (+z), Right (+x), Backward (-z), Left (-x), back to start."""
    s = float(side)
    return [np.array(c, dtype=np.float64) for c in ([0, 0, 0], [0, 0, s], [s, 0, s], [s, 0, 0], [0, 0, 0])]


_LABELS = {"left": "L", "right": "R", "up": "U", "down": "D"}
_BACK = {"L": "R", "R": "L", "U": "D", "D": "U"}


def _ease(s: np.ndarray) -> np.ndarray:
    """Cosine ease-in/out on [0, 1]: strictly increasing inside, zero velocity at both ends (no jerk)."""
    return 0.5 - 0.5 * np.cos(np.pi * s)


def _linear(s: np.ndarray) -> np.ndarray:
    """Constant speed on [0, 1]."""
    return s


def _const(yaw: float, pitch: float, t: np.ndarray) -> _Motion:
    def f(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(s)
        return np.full(n, yaw), np.full(n, pitch), np.broadcast_to(t, (n, 3)).copy()

    return f


def _rot_move(axis: str, a0: float, a1: float, shape: Callable[[np.ndarray], np.ndarray] = _ease) -> _Motion:
    def f(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ang = a0 + (a1 - a0) * shape(s)
        z = np.zeros_like(s)
        yaw, pitch = (ang, z) if axis == "yaw" else (z, ang)
        return yaw, pitch, np.zeros((len(s), 3))

    return f


def _trans_move(p0: np.ndarray, p1: np.ndarray, shape: Callable[[np.ndarray], np.ndarray] = _ease) -> _Motion:
    def f(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        e = shape(s)[:, None]
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
            away_yaw, away_pitch = (amp, 0.0) if axis == "yaw" else (0.0, amp)
            out_lbl = _LABELS[direction]
            back_lbl = _BACK[out_lbl]
            segs.append((departure(k), out_lbl, "move", t.move, _rot_move(axis, 0.0, amp)))
            segs.append((departure(k), "hold", "hold", t.away_hold, _const(away_yaw, away_pitch, zero)))
            segs.append((revisit(k), back_lbl, "move", t.move, _rot_move(axis, amp, 0.0)))
            segs.append((revisit(k), "hold", "hold", t.revisit_hold, _const(0.0, 0.0, zero)))
    else:
        corners = _square_corners(spec.side)
        for leg, (p0, p1) in zip("FRBL", zip(corners[:-1], corners[1:])):
            phase = revisit(1) if leg == "L" else departure(1)
            segs.append((phase, leg, "move", t.move, _trans_move(p0, p1)))
        segs.append((revisit(1), "hold", "hold", t.revisit_hold, _const(0.0, 0.0, zero)))
    segs.append((HOLD, "hold", "hold", t.final_hold, _const(0.0, 0.0, zero)))
    return [sg for sg in segs if sg[3] > 0]


def _time_layout(spec: TrajectorySpec, num_frames: int) -> tuple[list[_Seg], np.ndarray, np.ndarray]:
    """Segments on normalised time: (segments, segment index of each frame, position s in [0, 1] inside it)."""
    segs = _segments(spec)
    w = np.array([s[3] for s in segs], dtype=np.float64)
    bounds = np.concatenate([[0.0], np.cumsum(w) / w.sum()])
    bounds[-1] = 1.0
    tau = np.arange(num_frames, dtype=np.float64) / (num_frames - 1)
    # Segment of each frame: half-open [b_j, b_{j+1}); the last frame belongs to the last segment.
    seg_idx = np.clip(np.searchsorted(bounds, tau, side="right") - 1, 0, len(segs) - 1)
    s_of = (tau - bounds[seg_idx]) / (bounds[seg_idx + 1] - bounds[seg_idx])
    return segs, seg_idx, s_of


def _frame_layout(spec: TrajectorySpec, num_frames: int) -> tuple[list[_Seg], np.ndarray, np.ndarray]:
    """Segments in whole frames (same return as :func:`_time_layout`). Frame 0 opens ``V``; a segment of ``n``
    frames covers the next ``n`` frames, a move reaching position ``k / n`` on its k-th frame (so every frame of a
    constant sweep turns by exactly the sweep's speed); the final hold takes the rest (possibly none)."""
    segs = _frame_segments(spec)
    segs.append((HOLD, "hold", "hold", num_frames - spec.min_frames(), _const(0.0, 0.0, np.zeros(3))))
    seg_idx = np.zeros(num_frames, dtype=np.int64)
    s_of = np.zeros(num_frames)
    start = 1  # frame 0 belongs to V (segment 0) at s = 0
    for j, (_, _, _, n, _) in enumerate(segs):
        n = int(n)
        seg_idx[start:start + n] = j
        s_of[start:start + n] = np.arange(1, n + 1) / max(n, 1)
        start += n
    return segs, seg_idx, s_of


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
    segs, seg_idx, s_of = _frame_layout(spec, num_frames) if spec.frame_layout else _time_layout(spec, num_frames)
    yaw = np.zeros(num_frames)
    pitch = np.zeros(num_frames)
    trans = np.zeros((num_frames, 3))
    for j, (_, _, _, _, fn) in enumerate(segs):
        m = seg_idx == j
        if not m.any():
            continue
        y, p, tr = fn(np.clip(s_of[m], 0.0, 1.0))
        yaw[m], pitch[m], trans[m] = y, p, tr
    c2w = se3(rotmat_from_yaw_pitch(yaw, pitch), trans)
    c2w[0] = np.eye(4)  # exact, whatever the float path

    segments: list[Segment] = []
    phases: dict[str, tuple[int, int]] = {}
    for j, (phase, label, kind, _, _) in enumerate(segs):
        idx = np.nonzero(seg_idx == j)[0]
        if len(idx) == 0:
            if spec.frame_layout:  # a hold of 0 frames (the final hold when the sweeps fill the model's count)
                continue
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
    if spec.frame_layout and spec.kind == "square":  # the mean speed of every leg, scene units per frame
        params["units_per_frame"] = float(spec.side) / int(spec.leg_frames or 1)
    elif spec.frame_layout:  # what the rounding to whole frames achieved, per axis (== deg_per_frame when exact)
        params["achieved_deg_per_frame"] = {
            axis: (spec.yaw_deg if axis == "yaw" else spec.pitch_deg) / _sweep_frames(
                spec, spec.yaw_deg if axis == "yaw" else spec.pitch_deg)
            for axis in sorted({DIRECTIONS[c][0] for c in spec.cycles})}
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
