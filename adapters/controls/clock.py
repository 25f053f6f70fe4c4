"""Laying a camera path on a model's own control clock: the frames where upstream lets a held control change.

Two models take controls that upstream holds for whole blocks of frames, so a change of motion between two block
edges is something upstream's own code never produces:

* Matrix-Game 3 holds each action for 12 frames after a first frame of its own (``combine_data``: row 0 alone, then
  blocks ``[1 + 12 k, 13 + 12 k)``; SkyworkAI/Matrix-Game@71c3cd7f7413 Matrix-Game-3/utils/conditions.py:21-32).
* YUME conditions each 29-frame stage on one caption (stdstu12/YUME@111c3fa fastvideo/sample/sample_5b.py:812-820,
  :1083-1092; the harness's stage ``s`` moves the camera from pose ``29 s`` to ``29 (s + 1)``).

:func:`lay_on_grid` moves every segment boundary of a path (a pose where the motion starts, stops or turns) to one of
those edges and re-times the motion in between, so the held controls can carry the path exactly: a sweep keeps its
amplitude and turns at a block edge, at a slightly different speed. The re-timed path is the item's path (the
evaluation's phases follow it) and records what moved in ``params["upstream_clock"]``.

Poses: OpenCV camera-to-world 4x4 float64, world = camera frame of frame 0 (:mod:`trajectories.conventions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trajectories.path import CameraPath, Segment, TrajectoryError
from trajectories.resample import resample_c2w


@dataclass(frozen=True)
class ControlClock:
    """Where upstream lets a model's held controls change. edges: pose indices (sorted); rule: upstream's block rule
    in words, with its source; keep: ``time`` or ``length``, which of the two a boundary keeps (:func:`laid_ends`)."""

    edges: tuple[int, ...]
    rule: str
    keep: str = "time"

    def lay(self, path: CameraPath) -> CameraPath:
        """``path`` laid on this clock (:func:`lay_on_grid`)."""
        return lay_on_grid(path, np.asarray(self.edges, dtype=np.int64), self.rule, self.keep)


def _steps(c2w: np.ndarray) -> np.ndarray:
    """(T-1, 6) motion of each transition ``i -> i + 1`` in the camera frame of pose ``i``: rotation vector, then
    translation."""
    from scipy.spatial.transform import Rotation

    rel = np.linalg.inv(c2w[:-1]) @ c2w[1:]
    out: np.ndarray = np.concatenate([Rotation.from_matrix(rel[:, :3, :3]).as_rotvec(), rel[:, :3, 3]], axis=1)
    return out


def segment_end_poses(path: CameraPath) -> list[int]:
    """The pose each segment ends at, in order; the last is ``num_frames - 1``.

    A segment ``[a, b)`` ends at pose ``b - 1`` or ``b``, read from the poses: the transition ``b - 1 -> b`` belongs
    to it when it continues its motion (a hold: no motion; a move: closer in direction to the step before than to
    the step after). The frame layout reaches a sweep's end on the segment's last frame (``b - 1``); the
    normalised-time layout reaches it on the next segment's first frame (``b``), sometimes with the next one's start.
    """
    steps = _steps(path.c2w)
    norm = np.linalg.norm(steps, axis=1)
    still = norm < 1e-12

    def cos(i: int, j: int) -> float:
        ok = 0 <= j < len(steps) and not still[i] and not still[j]
        return float(steps[i] @ steps[j] / (norm[i] * norm[j])) if ok else 0.0

    out = []
    for s in path.segments[:-1]:
        b = int(s.end)
        ours = bool(still[b - 1]) if s.kind == "hold" else cos(b - 1, b - 2) > max(cos(b - 1, b), 0.0)
        out.append(b if ours else b - 1)
    return out + [path.num_frames - 1]


def _snap(want: float, edges: np.ndarray, lo: int, hi: int) -> int:
    """The edge in ``[lo, hi]`` nearest to ``want`` (the earlier one on a tie); ``-1`` when there is none."""
    ok = edges[(edges >= lo) & (edges <= hi)]
    if not len(ok):
        return -1
    return int(ok[np.argmin(np.abs(ok - want))])


def laid_ends(path: CameraPath, edges: np.ndarray, keep: str = "time") -> list[int]:
    """Where each segment ends once laid on ``edges`` (sorted pose indices; 0 and ``num_frames - 1`` are added).

    ``keep="time"``: each boundary goes to the edge nearest to it (the shift stays under one block, the segments'
    lengths change by up to a block). ``keep="length"``: a move ends at the edge nearest to where it would end if it
    kept its own length, counted from where the previous segment was laid (equal sweeps stay equal, the shift adds
    up over consecutive moves), and a hold ends at the edge nearest to its own end (the shift never passes a hold).
    Either way a move keeps at least one block, a hold may shrink to none where the blocks leave no room, and the
    last segment ends at the last pose. Raises :class:`TrajectoryError` when the moves need more blocks than there
    are.
    """
    if keep not in ("time", "length"):
        raise ValueError(f"keep={keep!r}: use 'time' or 'length'")
    T = path.num_frames
    edges = np.unique(np.r_[np.asarray(edges, dtype=np.int64), 0, T - 1])
    ends = segment_end_poses(path)
    moves = [seg.kind == "move" and e > (ends[j - 1] if j else 0) for j, (seg, e) in enumerate(zip(path.segments, ends))]
    out: list[int] = []
    src_prev = dst_prev = 0
    for j, (seg, e) in enumerate(zip(path.segments, ends)):
        if j == len(ends) - 1:
            g = T - 1
        else:
            # every later move needs an edge of its own, and so does the last segment when it has frames
            later = sum(moves[j + 1:-1]) + int(ends[-1] > ends[-2])
            hi = int(edges[len(edges) - 1 - later]) if later < len(edges) else -1
            want = dst_prev + (e - src_prev) if keep == "length" and moves[j] else e
            g = _snap(want, edges, dst_prev + int(moves[j]), hi)
        if g < 0 or g < dst_prev or (moves[j] and g == dst_prev):
            raise TrajectoryError(f"trajectory {path.name!r}: its {sum(moves)} moves do not fit on the model's control "
                                  f"blocks in {T} frames; give the model more frames (model.frames_per_trajectory."
                                  f"{path.name}) or use fewer moves")
        out.append(g)
        src_prev, dst_prev = e, g
    return out


def _source_positions(ends: list[int], laid: list[int], T: int) -> np.ndarray:
    """For each laid pose, the (fractional) pose of the original path it shows: linear inside each segment."""
    tau = np.zeros(T)
    src_prev = dst_prev = 0
    for e, g in zip(ends, laid):
        f = np.arange(dst_prev, g + 1)
        tau[f] = src_prev + (f - dst_prev) * ((e - src_prev) / (g - dst_prev) if g > dst_prev else 0.0)
        src_prev, dst_prev = e, g
    return tau


def lay_on_grid(path: CameraPath, edges: np.ndarray, rule: str, keep: str = "time") -> CameraPath:
    """``path`` with every segment boundary on one of ``edges`` (pose indices), re-timed between them (SLERP and
    linear, so a constant-speed sweep stays constant-speed); unchanged when every boundary is on an edge already.

    ``params["upstream_clock"]`` records ``rule`` (upstream's block rule, in words), the segment ends before and
    after, the largest shift in frames and each turn's degrees per frame once laid. ``keep``: see :func:`laid_ends`.
    """
    ends = segment_end_poses(path)
    laid = laid_ends(path, edges, keep)
    if laid == ends:
        return path
    T = path.num_frames
    c2w = resample_c2w(path.c2w, _source_positions(ends, laid, T))
    c2w[0] = np.eye(4)
    segments: list[Segment] = []
    phases: dict[str, tuple[int, int]] = {}
    start = 0
    for s, g in zip(path.segments, laid):
        if g + 1 <= start:  # a hold the blocks left no room for
            continue
        seg = Segment(s.phase, s.label, s.kind, start, g + 1)
        segments.append(seg)
        lo, hi = phases.get(s.phase, (seg.start, seg.end))
        phases[s.phase] = (min(lo, seg.start), max(hi, seg.end))
        start = g + 1
    params = dict(path.params)
    params["upstream_clock"] = {**_record(path, ends, laid, rule), "keep": keep}
    return CameraPath(path.name, c2w, path.K, path.fps, path.height, path.width, phases, tuple(segments), params)


def _record(path: CameraPath, ends: list[int], laid: list[int], rule: str) -> dict[str, Any]:
    speeds = []
    src_prev = dst_prev = 0
    for s, e, g in zip(path.segments, ends, laid):
        rel = path.c2w[src_prev, :3, :3].T @ path.c2w[e, :3, :3]
        angle = float(np.degrees(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0))))
        if s.kind == "move" and angle > 1e-9 and g > dst_prev:  # a turn: its speed once laid
            speeds.append(angle / (g - dst_prev))
        src_prev, dst_prev = e, g
    return {"rule": rule, "segment_ends": ends, "laid_ends": laid,
            "max_shift_frames": int(max(abs(a - b) for a, b in zip(ends, laid))),
            "laid_deg_per_frame": speeds}
