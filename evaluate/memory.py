"""Static memory formulas (WorldMemBench section 4.4): Eq. 4 (feature similarity), Eq. 5 (normalised silhouette
IoU), depth Spearman and Eq. 6 (spherical reconstruction score), and the Environment-Visible frame selection.

Poses: OpenCV camera-to-world 4x4 (+x right / +y down / +z forward), world = camera frame of frame 0; depth maps are
z-depth in the camera frame; K in pixels with +0.5 pixel centres.

Pinned choices (recorded in every metric JSON under ``settings``):

* silhouette canvas: 64 x 64; the mask's tight box is resized (nearest) so that its longer side fills the canvas,
  preserving aspect, and centred;
* depth Spearman: every pixel by default, as in the paper (``stride`` > 1 is an explicitly named subsampled
  variant), invalid (non-finite or <= 0) pixels dropped, average ranks for ties; NaN (undefined, never 0) when
  fewer than 3 valid pixels remain or either map is constant over them;
* spherical grid: equal-angle bins of ``bin_deg`` (default 2 deg) in azimuth ``atan2(x, z)`` over [-180, 180) and
  elevation ``atan2(-y, hypot(x, z))`` over [-90, 90], centred on the world origin (the first camera); each bin
  keeps the smallest ``log(range)`` that falls in it (the nearest surface).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

CANVAS = 64
SPHERE_BIN_DEG = 2.0


def _unit(v: np.ndarray) -> np.ndarray:
    """``v`` (..., D) as float64 with each vector along the last axis scaled to length 1 (a zero vector stays 0)."""
    v = np.asarray(v, dtype=np.float64)
    unit: np.ndarray = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    return unit


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarities (Na, Nb) between row vectors."""
    cos: np.ndarray = _unit(a) @ _unit(b).T
    return cos


def cosine_to(rows: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Cosine similarity (N,) float64 of each of ``rows`` (N, D) with the one vector ``ref`` (D,)."""
    cos: np.ndarray = _unit(rows) @ _unit(ref)
    return cos


def revisit_similarity(ref_features: np.ndarray, revisit_features: np.ndarray) -> float:
    """Eq. 4 for one revisit: mean over revisit frames of ``clip_[0,1](max over reference frames of cos)``.

    ref_features: (R, D) features of the initial-observation set V (R >= 1). revisit_features: (T, D) features of
    the valid observations in the revisit window. An empty revisit scores 0 (and still counts in Eq. 1), as the
    paper prescribes. Raises ValueError for an empty reference set, mismatched dimensions or non-finite features.
    """
    ref = np.asarray(ref_features, dtype=np.float64)
    rev = np.asarray(revisit_features, dtype=np.float64)
    if rev.size == 0 or len(rev) == 0:
        return 0.0
    if ref.ndim != 2 or len(ref) == 0:
        raise ValueError(f"revisit_similarity: the reference set V is empty (shape {ref.shape}); a target without a "
                         "valid reference observation cannot be scored")
    if rev.ndim != 2 or rev.shape[1] != ref.shape[1]:
        raise ValueError(f"revisit_similarity: feature shapes {ref.shape} and {rev.shape} do not match")
    if not (np.isfinite(ref).all() and np.isfinite(rev).all()):
        raise ValueError("revisit_similarity: non-finite features (the encoder failed on some frame)")
    sims = cosine_matrix(rev, ref).max(axis=1)
    return float(np.clip(sims, 0.0, 1.0).mean())


def normalized_silhouette(mask: np.ndarray, canvas: int = CANVAS) -> np.ndarray:
    """C(·) of Eq. 5: crop to the tight box, resize keeping the aspect ratio (longer side = canvas), centre.

    Returns a (canvas, canvas) bool array; an empty mask gives an empty canvas.
    """
    import cv2

    m = np.asarray(mask).astype(bool)
    out = np.zeros((canvas, canvas), bool)
    ys, xs = np.nonzero(m)
    if len(ys) == 0:
        return out
    crop = m[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1].astype(np.uint8)
    h, w = crop.shape
    s = canvas / max(h, w)
    nh, nw = max(1, int(round(h * s))), max(1, int(round(w * s)))
    r = cv2.resize(crop, (nw, nh), interpolation=cv2.INTER_NEAREST).astype(bool)
    y0, x0 = (canvas - nh) // 2, (canvas - nw) // 2
    out[y0 : y0 + nh, x0 : x0 + nw] = r
    return out


def silhouette_iou(a: np.ndarray, b: np.ndarray, canvas: int = CANVAS) -> float:
    """IoU of the normalised silhouettes of masks ``a`` and ``b`` (0 when both are empty)."""
    na, nb = normalized_silhouette(a, canvas), normalized_silhouette(b, canvas)
    union = int((na | nb).sum())
    return float((na & nb).sum() / union) if union else 0.0


def silhouette_revisit_score(ref_masks: Sequence[np.ndarray] | np.ndarray,
                             revisit_masks: Sequence[np.ndarray] | np.ndarray, canvas: int = CANVAS) -> float:
    """Eq. 5 for one revisit: mean over revisit masks of the max IoU over reference masks; 0 if none."""
    if len(revisit_masks) == 0 or len(ref_masks) == 0:
        return 0.0
    refs = [normalized_silhouette(m, canvas) for m in ref_masks]
    vals = []
    for m in revisit_masks:
        n = normalized_silhouette(m, canvas)
        best = 0.0
        for r in refs:
            u = int((n | r).sum())
            best = max(best, float((n & r).sum() / u) if u else 0.0)
        vals.append(best)
    return float(np.mean(vals))


def _rank(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    ranks: np.ndarray = rankdata(x, method="average")
    return ranks


def depth_spearman(ref_depth: np.ndarray, revisit_depth: np.ndarray, valid: np.ndarray | None = None,
                   stride: int = 1) -> float:
    """Spearman rank correlation ρ_S(d_0, d_r) of Eq. 6 between depth at corresponding pixels (same image locations).

    Args:
        ref_depth, revisit_depth: (H, W) depth maps of the same size (any monotone scale; relative depth is fine).
        valid: optional (H, W) bool mask of pixels to use.
        stride: 1 = every pixel (the paper). A larger value keeps every ``stride``-th row and column: a subsampled
            variant that must be reported under its own name.
    Returns:
        ρ in [-1, 1], or NaN when undefined: fewer than 3 valid pixels (an empty map) or a constant map. Pixels that
        are non-finite (NaN/inf) or <= 0 in either map are invalid and dropped.
    Raises:
        ValueError: different shapes, or ``stride < 1``.
    """
    a = np.asarray(ref_depth, dtype=np.float64)
    b = np.asarray(revisit_depth, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"depth_spearman: need two (H, W) maps of the same size, got {a.shape} and {b.shape}")
    if int(stride) != stride or stride < 1:
        raise ValueError(f"depth_spearman: stride={stride!r} must be an integer >= 1 (1 = every pixel)")
    a, b = a[::stride, ::stride], b[::stride, ::stride]
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    if valid is not None:
        v = np.asarray(valid, bool)
        if v.shape != np.asarray(ref_depth).shape:
            raise ValueError(f"depth_spearman: valid mask shape {v.shape} != depth shape {np.shape(ref_depth)}")
        ok &= v[::stride, ::stride]
    if ok.sum() < 3:
        return float("nan")
    ra, rb = _rank(a[ok]), _rank(b[ok])
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def spherical_grid(depth: np.ndarray, K: np.ndarray, c2w: np.ndarray, bins: float = SPHERE_BIN_DEG) -> np.ndarray:
    """Eq. 6's field: back-project ``depth`` (H, W) with ``K`` and ``c2w``, bin world points by direction from the
    origin, keep the nearest ``log(range)`` per bin. ``bins`` is the bin size in degrees (equal-angle azimuth x
    elevation, see the module docstring). Returns (180/bins, 360/bins) float64, NaN where empty."""
    bin_deg = float(bins)
    from trajectories.conventions import pixel_rays

    depth = np.asarray(depth, dtype=np.float64)
    H, W = depth.shape
    d = pixel_rays(K, H, W)
    pts_cam = d / d[..., 2:3] * depth[..., None]  # z-depth -> camera point
    ok = np.isfinite(depth) & (depth > 0)
    p = pts_cam[ok] @ np.asarray(c2w)[:3, :3].T + np.asarray(c2w)[:3, 3]
    r = np.linalg.norm(p, axis=1)
    keep = r > 1e-9
    p, r = p[keep], r[keep]
    az = np.degrees(np.arctan2(p[:, 0], p[:, 2]))
    el = np.degrees(np.arctan2(-p[:, 1], np.hypot(p[:, 0], p[:, 2])))
    n_az, n_el = int(round(360 / bin_deg)), int(round(180 / bin_deg))
    ia = np.clip(((az + 180.0) / bin_deg).astype(int), 0, n_az - 1)
    ie = np.clip(((el + 90.0) / bin_deg).astype(int), 0, n_el - 1)
    grid = np.full(n_el * n_az, np.inf)
    np.minimum.at(grid, ie * n_az + ia, np.log(r))
    grid[np.isinf(grid)] = np.nan
    return grid.reshape(n_el, n_az)


def spherical_reconstruction_score(H: np.ndarray, G: np.ndarray) -> float:
    """Eq. 6 for one revisit: ``|C|/|U| · mean_{b in C} exp(-|H_b - (G_b + δ)|)`` with ``δ = median_C (H - G)``
    (global scale removed in log space). Empty bins are NaN.

    Returns 0 when the grids share no bin but one of them has some (``|C|/|U| = 0``: nothing of the reference is
    reconstructed), and NaN when both grids are empty (``|U| = 0``: undefined). Raises ValueError when the grids
    differ in shape."""
    h, g = np.asarray(H, dtype=np.float64), np.asarray(G, dtype=np.float64)
    if h.shape != g.shape:
        raise ValueError(f"spherical_reconstruction_score: grids of shapes {h.shape} and {g.shape}")
    oh, og = np.isfinite(h), np.isfinite(g)
    C, U = oh & og, oh | og
    if not U.any():
        return float("nan")
    if not C.any():
        return 0.0
    delta = float(np.median(h[C] - g[C]))
    return float(C.sum() / U.sum() * np.exp(-np.abs(h[C] - (g[C] + delta))).mean())


def select_return_frame(window: list[int] | np.ndarray, estimated_c2w: np.ndarray, reference_c2w: np.ndarray) -> int:
    """Environment Visible: inside a rotational return window, the frame whose estimated orientation is closest
    (geodesic angle) to the conditioning frame's. ``estimated_c2w`` is indexed by frame."""
    from trajectories.conventions import geodesic_angle

    window = list(window)
    if not window:
        raise ValueError("empty return window")
    ang = geodesic_angle(np.asarray(reference_c2w)[None, :3, :3], np.asarray(estimated_c2w)[window, :3, :3])
    return int(window[int(np.argmin(ang))])


def rotation_angle_deg(c2w: np.ndarray, a: int, b: int) -> float:
    """The geodesic angle in degrees between the rotations of frames ``a`` and ``b`` of ``c2w`` (T, 4, 4)."""
    from trajectories.conventions import geodesic_angle

    return float(np.degrees(geodesic_angle(c2w[a][:3, :3], c2w[b][:3, :3])))


def closest_by_position(window: Sequence[int], c2w: np.ndarray) -> int:
    """The frame of ``window`` whose camera centre in ``c2w`` (T, 4, 4) is closest to frame 0's (a translation loop
    returns in position); the first such frame on a tie."""
    return int(min(window, key=lambda f: float(np.linalg.norm(c2w[f][:3, 3] - c2w[0][:3, 3]))))


#: a return frame measured directly against the reference frame by the pose estimator (``angles_to`` /
#: ``parallax_to``, no chaining): ``(frame, angle in degrees)``, the angle None for a position measure; None where
#: the estimator has no direct measure or no frame of the window fits
DirectPick = Optional[tuple[int, Optional[float]]]


def return_frame(window: Sequence[int], c2w: np.ndarray, ref: int, direct: DirectPick = None,
                 by_position: bool = False) -> tuple[int, float]:
    """The return frame of ``window`` and its return error in degrees against frame ``ref``. By orientation (a
    rotation trajectory): the direct pick with its measured angle, else the frame whose orientation in the chained
    estimate ``c2w`` (T, 4, 4) is closest (:func:`select_return_frame`) with the estimate's angle. By position (a
    translation loop, ``ref`` 0): the direct pick, else :func:`closest_by_position`; the error is the estimate's
    angle either way."""
    if by_position:
        j = direct[0] if direct is not None else closest_by_position(window, c2w)
        return j, rotation_angle_deg(c2w, ref, j)
    if direct is not None and direct[1] is not None:
        return direct[0], direct[1]
    j = select_return_frame(list(window), c2w, c2w[ref])
    return j, rotation_angle_deg(c2w, ref, j)


def return_qualification(c2w: np.ndarray, windows: Sequence[Sequence[int]], departures: Sequence[Sequence[int]],
                         direct: Sequence[DirectPick], by_position: bool) -> tuple[list[int], list[dict[str, Any]]]:
    """Per prescribed revisit (appendix G.1): its return frame (:func:`return_frame` against frame 0) and
    ``{departure_deg, return_error_deg, return_frame}``, where the departure angle is the largest rotation from
    frame 0 over that revisit's departure frames ``departures[k]`` (0 when it has none) in ``c2w`` (T, 4, 4)."""
    frames, qual = [], []
    for w, dep_frames, pick in zip(windows, departures, direct):
        dep = max((rotation_angle_deg(c2w, 0, f) for f in dep_frames), default=0.0)
        j, err = return_frame(w, c2w, 0, pick, by_position)
        frames.append(j)
        qual.append({"departure_deg": dep, "return_error_deg": err, "return_frame": j})
    return frames, qual

