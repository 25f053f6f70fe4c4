"""Measure a video's camera layout from its frames alone, and lay a camera path out of the measurement.

Rotation videos: the field of view that makes the frame-to-frame homographies rotations (:func:`estimate_hfov`),
then the harness's weight-free estimator (sparse optical flow + homography per frame pair,
:class:`evaluate.perception.weightfree.ClassicalPoseEstimator`) for the camera's yaw and pitch per frame, read by
:func:`evaluate.release.segment.layout_of`; each return's error is measured directly against frame 0 (ORB matches
and a fitted rotation, no drift from chaining). Translation videos: per frame pair the direction of motion (essential
matrix) times the median optical flow (pixels), summed: a signal per camera axis whose legs, turn points and speed
profile the same segmentation reads (its units are flow pixels, not scene units: a monocular video has no scale);
the return to the start is the parallax between frame 0 and the frame after the last leg (pixels of the analysed
frame, as a percentage of its width).

:func:`measured_path` turns a measurement into the camera path an imported video is scored on when it does not
follow its preset (``camera.npz`` labelled ``params.source = "measured"``; docs/release.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .segment import Layout, Move, layout_of, phase_windows, shape_fn, yaw_pitch_signal

#: Frames are measured at this width (intrinsics scaled with them).
ANALYSIS_WIDTH = 416
#: Bumped when the measurement changes: a stored measurement of another version is measured again.
MEASURE_VERSION = 1
#: Tracked points this close to the frame's border are left out: the flow window (15 px) is cut there and its flow
#: reads short, which reads as a narrower field of view and smaller turns (on 160-px-wide footage: 1.2 deg of
#: field of view, 1.4 % of every angle).
BORDER_PX = 8
#: Below these speeds a frame pair is still: degrees per frame (rotation), flow pixels per frame (translation).
ROTATION_FLOOR_DEG = 0.05
TRANSLATION_FLOOR_PX = 0.05


@dataclass
class Measurement:
    """What one video's frames say about its camera.

    Attributes:
        layout: the measured layout (:class:`evaluate.release.segment.Layout`).
        hfov_deg: the horizontal field of view used (degrees); hfov_source: ``estimated`` (from the video's own
            homographies) or ``given`` (a case's or ``release.hfov_deg``, when the video cannot tell: a
            translation, or too little motion).
        width, height: the analysed frame size (pixels). invalid_steps: frame pairs the estimator could not fit.
        seconds: the measurement's wall time. version: :data:`MEASURE_VERSION`.
    """

    layout: Layout
    hfov_deg: float
    hfov_source: str
    width: int
    height: int
    invalid_steps: int = 0
    seconds: float = 0.0
    version: int = MEASURE_VERSION
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.layout.to_dict(), "hfov_deg": self.hfov_deg, "hfov_source": self.hfov_source,
                "width": self.width, "height": self.height, "invalid_steps": self.invalid_steps,
                "seconds": round(self.seconds, 3), "version": self.version, "notes": list(self.notes)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Measurement:
        return Measurement(Layout.from_dict(d["layout"]), float(d["hfov_deg"]), str(d["hfov_source"]),
                           int(d["width"]), int(d["height"]), int(d.get("invalid_steps", 0)),
                           float(d.get("seconds", 0.0)), int(d.get("version", 0)), list(d.get("notes", [])))


def intrinsics(hfov_deg: float, width: int, height: int) -> np.ndarray:
    """(3, 3) intrinsics of a ``width`` x ``height`` frame with ``hfov_deg`` (principal point at the centre)."""
    from trajectories.conventions import intrinsics_from_fov

    return np.asarray(intrinsics_from_fov(hfov_deg, width, height), np.float64)


def hfov_of(K: np.ndarray, width: int) -> float:
    """The horizontal field of view (degrees) of intrinsics ``K`` for a frame ``width`` pixels wide."""
    return float(np.degrees(2 * np.arctan((width / 2.0) / float(K[0, 0]))))


def read_frames(video: Path, width: int = ANALYSIS_WIDTH, limit: int | None = None) -> np.ndarray:
    """The frames of ``video`` (at most ``limit``) at ``width`` pixels wide (never upscaled; aspect kept, even
    height): (T, H, W, 3) uint8 RGB. ValueError when nothing decodes."""
    import av

    frames: list[np.ndarray] = []
    with av.open(str(video)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        w = min(width, int(s.width))
        h = max(2, int(round(s.height * w / s.width / 2)) * 2)
        for f in c.decode(s):
            if limit is not None and len(frames) >= limit:
                break
            frames.append(f.to_ndarray(format="rgb24", width=w, height=h))
    if not frames:
        raise ValueError(f"{video}: no frame decoded")
    return np.stack(frames)


def tracked(g0: np.ndarray, g1: np.ndarray, corners: int) -> tuple[np.ndarray, np.ndarray]:
    """Shi-Tomasi corners of grey frame ``g0`` tracked into ``g1`` (pyramidal Lucas-Kanade): ``(a, b)`` (N, 2)
    float64 pixel positions, points within :data:`BORDER_PX` of a border in either frame left out."""
    import cv2

    p0 = cv2.goodFeaturesToTrack(g0, corners, 0.01, 7)
    if p0 is None:
        return np.zeros((0, 2)), np.zeros((0, 2))
    p1, st, _ = cv2.calcOpticalFlowPyrLK(g0, g1, p0, None, winSize=(15, 15), maxLevel=3)  # type: ignore[call-overload]
    good = st.reshape(-1) == 1
    a, b = p0.reshape(-1, 2)[good].astype(np.float64), p1.reshape(-1, 2)[good].astype(np.float64)
    h, w = g0.shape[:2]
    inside = np.all((np.minimum(a, b) >= BORDER_PX) & (np.maximum(a, b)[:, ::-1] < np.array([h, w]) - BORDER_PX),
                    axis=1)
    return a[inside], b[inside]


def _homographies(frames: np.ndarray, step: int, pairs: int) -> list[np.ndarray]:
    """Homographies between frames ``step`` apart where the image moved by more than 2 px (at most ``pairs``)."""
    import cv2

    out: list[np.ndarray] = []
    for i in range(0, len(frames) - step, max(1, (len(frames) - step) // (pairs * 2) or 1)):
        a, b = tracked(cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY), cv2.cvtColor(frames[i + step], cv2.COLOR_RGB2GRAY),
                       400)
        if len(a) < 20 or np.median(np.linalg.norm(b - a, axis=1)) < 2.0:
            continue
        H, mask = cv2.findHomography(a, b, cv2.RANSAC, 1.5)
        if H is not None and int(mask.sum()) >= 20:
            out.append(H)
        if len(out) >= pairs:
            break
    return out


def estimate_hfov(frames: np.ndarray, step: int = 4, pairs: int = 40) -> Optional[float]:
    """The horizontal field of view (degrees) that makes the video's frame-to-frame homographies rotations.

    For a camera that only rotates, ``H = K R K^-1``: with the right focal length ``K^-1 H K`` is a rotation (its
    singular values are equal), with a wrong one it is not. Homographies between frames ``step`` apart (up to
    ``pairs``) are scored for 20..150 degrees (principal point at the centre); the best is refined on a finer grid.
    None when too few frame pairs move (a still video)."""
    h, w = frames.shape[1:3]
    Hs = _homographies(frames, step, pairs)
    if len(Hs) < 3:
        return None

    def cost(hfov_deg: np.ndarray) -> np.ndarray:
        out = np.zeros(len(hfov_deg))
        for j, hf in enumerate(hfov_deg):
            Kc = intrinsics(float(hf), w, h)
            Kc[:2, 2] -= 0.5
            Ki = np.linalg.inv(Kc)
            for H in Hs:
                M = Ki @ H @ Kc
                sv = np.linalg.svd(M / np.cbrt(np.linalg.det(M)), compute_uv=False)
                out[j] += float(((sv - 1.0) ** 2).sum())
        return out

    grid = np.arange(20.0, 150.0, 1.0)
    best = float(grid[int(np.argmin(cost(grid)))])
    fine = np.arange(best - 1.0, best + 1.0, 0.05)
    return float(fine[int(np.argmin(cost(fine)))])


def _rotation_step(g0: np.ndarray, g1: np.ndarray, Kinv: np.ndarray) -> tuple[np.ndarray, bool]:
    """The camera's rotation from grey frame ``g0`` to ``g1`` (3, 3): ``Q`` with ``ray_1 = Q ray_0`` (Kabsch on
    the unit rays of the tracked corners that a RANSAC homography keeps: 3 degrees of freedom, unbiased where an
    orthonormalised 8-parameter homography reads small turns about 1 % too large), and whether it was fitted."""
    import cv2

    from evaluate.perception.weightfree import _kabsch, _unit_rays

    a, b = tracked(g0, g1, 500)
    if len(a) < 20:
        return np.eye(3), False
    if float(np.median(np.linalg.norm(b - a, axis=1))) < 0.02:
        return np.eye(3), True  # the same picture
    _, mask = cv2.findHomography(a, b, cv2.RANSAC, 1.0)
    keep = mask.reshape(-1).astype(bool) if mask is not None else np.zeros(len(a), bool)
    if int(keep.sum()) < 20:
        return np.eye(3), False
    return _kabsch(_unit_rays(a[keep], Kinv), _unit_rays(b[keep], Kinv)), True


def _pair_steps(frames: np.ndarray, K: np.ndarray, step: Any) -> list[Any]:
    """``step(grey_i, grey_i+1, K^-1)`` for every adjacent frame pair, on the weight-free backbones' threads (OpenCV
    releases the GIL; the same results for any thread count). ``K``: +0.5-centred pixels, shifted to OpenCV's grid.
    No seed is needed: OpenCV's RANSAC draws from its own fixed-seed generator, not the global one."""
    import cv2

    from evaluate.perception.weightfree import default_threads, thread_map

    Kc = np.asarray(K, np.float64).copy()
    Kc[:2, 2] -= 0.5
    Kinv = np.linalg.inv(Kc)
    grey = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    return thread_map(lambda i: step(grey[i], grey[i + 1], Kinv), list(range(len(frames) - 1)), default_threads())


def rotation_c2w(frames: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, int]:
    """Camera-to-world rotations (T, 3, 3) of ``frames`` chained from frame 0 (identity), and the number of frame
    pairs that could not be fitted (held still). ``K``: (3, 3) intrinsics in pixels with +0.5 centres."""
    steps = _pair_steps(frames, K, _rotation_step)
    R = np.tile(np.eye(3), (len(frames), 1, 1))
    for i, (Q, _) in enumerate(steps, start=1):
        R[i] = R[i - 1] @ Q.T  # ray_{i} = R_i^T X = Q R_{i-1}^T X
    return R, sum(not ok for _, ok in steps)


def _rotation(frames: np.ndarray, K: np.ndarray) -> tuple[Layout, int]:
    """The rotation layout of ``frames`` with intrinsics ``K``, each return's error measured against frame 0."""
    from evaluate.perception.weightfree import ClassicalPoseEstimator
    from trajectories.conventions import geodesic_angle, se3

    R, invalid = rotation_c2w(frames, K)
    lay = layout_of(yaw_pitch_signal(se3(R)), ("yaw", "pitch"), "rotation", ROTATION_FLOOR_DEG)
    ends = [min(int(round(m.end)), len(frames) - 1) for m in lay.returns()]
    direct = ClassicalPoseEstimator().angles_to(frames[0], frames[ends], K) if ends else np.zeros(0)
    chained = np.degrees(geodesic_angle(R[ends])) if ends else np.zeros(0)
    errors = tuple(float(d if np.isfinite(d) else c) for d, c in zip(direct, chained))
    return Layout(lay.kind, lay.frames, lay.moves, lay.profile, lay.residuals, errors), invalid


def translation_direction(a: np.ndarray, b: np.ndarray, Kinv: np.ndarray) -> np.ndarray | None:
    """The unit direction in which the camera moved between two frames whose orientation is the same (the paper's
    translation "preserves the initial viewing direction"), from tracked points ``a`` -> ``b`` (N, 2) pixels.

    With no rotation the epipolar constraint is ``t . (x_a x x_b) = 0`` for the rays ``x``: ``t`` is the null
    vector of the stacked cross products (SVD, refitted once without the worst fifth). Its sign makes the image
    flow point away from the focus of expansion as the camera advances: for a camera moving by ``t`` a point at
    normalised ``(x, y)`` moves by ``((x t_z - t_x), (y t_z - t_y)) / Z`` with ``Z > 0``."""
    ra = np.c_[a, np.ones(len(a))] @ Kinv.T
    rb = np.c_[b, np.ones(len(b))] @ Kinv.T
    rows = np.cross(ra, rb)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    keep = np.ones(len(rows), bool)
    t = np.zeros(3)
    for _ in range(2):
        if int(keep.sum()) < 8:
            return None
        kept = rows[keep]
        # the null vector from the 3x3 scatter matrix (an SVD of the N x 3 rows wakes BLAS's thread pool: 50x
        # slower on a busy machine)
        t = np.linalg.eigh(np.einsum("ni,nj->ij", kept, kept))[1][:, 0]
        res = np.abs(rows @ t)
        keep = res <= np.quantile(res, 0.8)
    pa, pb = ra[:, :2] / ra[:, 2:], rb[:, :2] / rb[:, 2:]
    expected = pa * t[2] - t[None, :2]
    return -t if float(np.sum((pb - pa) * expected)) < 0 else t


def _translation_step(g0: np.ndarray, g1: np.ndarray, Kinv: np.ndarray) -> tuple[np.ndarray, bool]:
    """(displacement (3,): the direction of the camera's motion times the median flow in pixels, fitted)."""
    a, b = tracked(g0, g1, 600)
    if len(a) < 20:
        return np.zeros(3), False
    flow = float(np.median(np.linalg.norm(b - a, axis=1)))
    if flow < TRANSLATION_FLOOR_PX:
        return np.zeros(3), True
    t = translation_direction(a, b, Kinv)
    return (np.zeros(3), False) if t is None else (t * flow, True)


def _translation(frames: np.ndarray, K: np.ndarray) -> tuple[Layout, int]:
    """The translation layout of ``frames``; the return error is the parallax between frame 0 and the frame after
    the last leg, in percent of the frame width."""
    from evaluate.perception.weightfree import ClassicalPoseEstimator

    steps = _pair_steps(frames, K, _translation_step)
    disp = np.array([d for d, _ in steps]).reshape(-1, 3)
    signal = np.vstack([np.zeros((1, 3)), np.cumsum(disp, axis=0)])
    lay = layout_of(signal, ("x", "y", "z"), "translation", TRANSLATION_FLOOR_PX)
    errors: tuple[float, ...] = ()
    if lay.moves:
        end = min(int(round(lay.moves[-1].end)), len(frames) - 1)
        px = ClassicalPoseEstimator().parallax_to(frames[0], frames[[end]], K)[0]
        errors = (float(100.0 * px / frames.shape[2]) if np.isfinite(px) else float("nan"),)
    invalid = sum(not ok for _, ok in steps)
    return Layout(lay.kind, lay.frames, lay.moves, lay.profile, lay.residuals, errors), invalid


def measure_frames(frames: np.ndarray, kind: str, hfov_deg: float | None = None,
                   fallback_hfov_deg: float = 60.0) -> Measurement:
    """Measure ``frames`` (T, H, W, 3) uint8 RGB of a ``rotation`` or ``translation`` video. ``hfov_deg``: a known
    field of view (a case's); otherwise a rotation's is estimated from its frames, and ``fallback_hfov_deg`` is
    used where it cannot be (a translation, too little motion)."""
    t0 = time.perf_counter()
    h, w = frames.shape[1:3]
    notes: list[str] = []
    source = "given"
    if hfov_deg is None and kind == "rotation":
        hfov_deg = estimate_hfov(frames)
        source = "estimated"
        if hfov_deg is None:
            notes.append(f"field of view not measurable (too little motion): {fallback_hfov_deg:g} deg assumed")
    if hfov_deg is None:
        hfov_deg, source = fallback_hfov_deg, "given"
    K = intrinsics(hfov_deg, w, h)
    lay, invalid = (_rotation if kind == "rotation" else _translation)(frames, K)
    return Measurement(lay, float(hfov_deg), source, w, h, invalid, time.perf_counter() - t0, notes=notes)


def measure_video(video: Path, kind: str, hfov_deg: float | None = None, fallback_hfov_deg: float = 60.0,
                  width: int = ANALYSIS_WIDTH) -> Measurement:
    """:func:`measure_frames` of ``video`` decoded at ``width`` pixels wide."""
    return measure_frames(read_frames(video, width), kind, hfov_deg, fallback_hfov_deg)


def _rounded(layout: Layout) -> Layout:
    """The layout in whole frames: each move starts and lasts a whole number of frames (at least one)."""
    moves = tuple(Move(m.axis, float(round(m.start)), float(max(1, round(m.frames))), m.delta, m.kind, m.direction,
                       m.reach) for m in layout.moves)
    return Layout(layout.kind, layout.frames, moves, layout.profile, layout.residuals, layout.return_errors)


_UNIT = {"x": np.array([1.0, 0, 0]), "y": np.array([0, 1.0, 0]), "z": np.array([0, 0, 1.0])}


def measured_path(layout: Layout, name: str, fps: float, K: np.ndarray, height: int, width: int,
                  kind: str = "rotation") -> Any:
    """A :class:`trajectories.CameraPath` laid out from ``layout`` (in whole frames): rotations turn by each move's
    measured angle, translations move one scene unit per leg (a monocular video has no scale; Eq. 2 normalises the
    target path anyway) along its measured direction, both with the measured profile. Its phases are the layout's
    (:func:`evaluate.release.segment.phase_windows`); ``params.source`` says ``measured``."""
    from trajectories import CameraPath, Segment
    from trajectories.conventions import rotmat_from_yaw_pitch, se3

    lay = _rounded(layout)
    t = np.arange(lay.frames, dtype=np.float64)
    f = shape_fn("eased" if lay.profile == "eased" else "constant")
    yaw, pitch, pos = np.zeros(lay.frames), np.zeros(lay.frames), np.zeros((lay.frames, 3))
    for m in lay.moves:
        s = f((t - m.start) / m.frames)
        if m.axis == "yaw":
            yaw += np.radians(m.delta) * s
        elif m.axis == "pitch":
            pitch += np.radians(m.delta) * s
        else:
            pos += np.sign(m.delta) * _UNIT[m.axis][None] * s[:, None]
    c2w = se3(rotmat_from_yaw_pitch(yaw, pitch), pos)
    c2w[0] = np.eye(4)
    phases, segs = phase_windows(lay)
    params = {"source": "measured", "kind": kind, "preset": name, "profile": lay.profile,
              "cycles": [m.direction for m in lay.departures()], "num_frames": lay.frames,
              "hfov_deg": hfov_of(K, width), "measured": layout.to_dict()}
    return CameraPath(name, c2w, np.asarray(K, np.float64), float(fps), int(height), int(width), phases,
                      tuple(Segment(*s) for s in segs), params)
