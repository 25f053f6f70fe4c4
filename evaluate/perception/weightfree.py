"""Weight-free perception: a diagnostic pixel encoder, a template-matching tracker, a classical (OpenCV) pose
estimator, and the oracle pose / depth of the reference model. Each is deterministic and labelled in every report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import numpy as np

from .base import PoseEstimate

if TYPE_CHECKING:
    import cv2

    from ..config import EvalConfig

X = TypeVar("X")
Y = TypeVar("Y")
#: ``(ref points (M, 2), frame points (M, 2), K^-1, working scale) -> value or None``: a fit on matched ORB points
RayFit = Callable[[np.ndarray, np.ndarray, np.ndarray, float], Optional[float]]


def default_threads() -> int:
    """Worker threads for the weight-free backbones' per-frame loops: the cores this process may use, at most 4.
    OpenCV releases the GIL, so frames (or frame pairs) run in parallel; results never depend on the count."""
    import os

    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, n))


def thread_map(fn: Callable[[X], Y], items: list[X], threads: int) -> list[Y]:
    """``[fn(x) for x in items]`` in order, on ``threads`` threads (each call independent of the others; numpy and
    OpenCV release the GIL in their loops)."""
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="weightfree") as pool:
        return list(pool.map(fn, items))


class PixelEncoder:
    """Diagnostic encoder ``pixel-thumb16``: the (masked) region resized to 16x16 RGB (area), centred per channel,
    L2-normalised. Deterministic and weight-free; NOT the paper's DINOv2 (its metrics carry the ``[pixel]`` tag)."""

    name = "pixel-thumb16"
    frame_views = True  # reads one frame at a time: perceive passes views, not copies
    kind = "diagnostic"

    def __init__(self, size: int = 16, threads: Optional[int] = None):
        self.size = size
        self._threads = default_threads() if threads is None else max(1, int(threads))  # execution only

    def _one(self, img: np.ndarray, mask: Optional[np.ndarray]) -> np.ndarray:
        import cv2

        x = img.astype(np.float32)
        if mask is not None:
            ys, xs = np.nonzero(mask)
            if len(ys) == 0:
                return np.zeros(self.size * self.size * 3, np.float32)
            x = x.copy()
            x[~mask] = x[mask].mean(axis=0)  # outside the mask: the region's mean colour (no edge leaks)
            x = x[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
        t = cv2.resize(x, (self.size, self.size), interpolation=cv2.INTER_AREA)
        t -= t.reshape(-1, 3).mean(axis=0)
        v = t.reshape(-1)
        n = np.linalg.norm(v)
        return v / n if n > 0 else v

    def encode(self, frames: np.ndarray, masks: Optional[np.ndarray] = None) -> np.ndarray:
        return np.stack(thread_map(lambda i: self._one(frames[i], None if masks is None else masks[i]),
                                   list(range(len(frames))), self._threads))


class TemplateTracker:
    """Classical tracker ``template-ncc``: normalised cross-correlation of the target's frame-0 crop; a frame is a
    valid observation when the best match scores >= ``threshold`` with the whole box inside the image, and its mask
    is the frame-0 mask moved to the match."""

    name = "template-ncc"
    frame_views = True  # reads one frame at a time: perceive passes views, not copies

    def __init__(self, threshold: float = 0.6, threads: Optional[int] = None):
        self.threshold = threshold
        self._threads = default_threads() if threads is None else max(1, int(threads))  # execution only

    @classmethod
    def from_settings(cls, ecfg: EvalConfig) -> "TemplateTracker":
        """Built by the backbone registry from ``evaluate.tracker_threshold``."""
        return cls(float(ecfg.tracker_threshold))

    def track(self, frames: np.ndarray, init_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import cv2

        ys, xs = np.nonzero(init_mask)
        N, H, W = frames.shape[:3]
        masks = np.zeros((N, H, W), bool)
        valid = np.zeros(N, bool)
        if len(ys) == 0:
            return masks, valid
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        tmpl = frames[0][y0:y1, x0:x1]
        local = init_mask[y0:y1, x0:x1]

        def best_match(i: int) -> tuple[float, Sequence[int]]:
            return cv2.minMaxLoc(cv2.matchTemplate(frames[i], tmpl, cv2.TM_CCOEFF_NORMED))[1:4:2]

        for i, (best, loc) in enumerate(thread_map(best_match, list(range(N)), self._threads)):  # frames in parallel
            if best >= self.threshold:
                x, y = loc
                masks[i, y : y + (y1 - y0), x : x + (x1 - x0)] = local
                valid[i] = True
        return masks, valid


class ClassicalPoseEstimator:
    """``classical-opencv``: sparse optical flow (Shi-Tomasi corners tracked with pyramidal Lucas-Kanade) between
    consecutive frames + RANSAC, chained.

    Rotation trajectories: homography ``H ∝ K R_rel K^-1`` with known intrinsics, ``R_rel`` orthonormalised by SVD.
    General motion: essential matrix + ``recoverPose`` (unit translation per step; the global scale is left to the
    Sim(3) alignment of Eq. 2). Steps with fewer than ``min_inliers`` inliers keep the previous pose and are reported
    invalid. Deterministic (fixed settings; OpenCV's RANSAC draws from a fixed-seed generator of its own).
    Adjacent frames of a video move little, so tracking beats descriptor matching here in both speed and accuracy
    (on the reference model at 480x832: about 10x lower rotation RPE than ORB matching, at a fraction of its cost);
    :meth:`angles_to`, which compares frames far apart, uses ORB descriptors. ``direct_margin_deg`` is read by
    :mod:`evaluate.perceive`: a return window's frames are fitted with :meth:`angles_to` only within that margin of
    the chained closest (``ItemPerception._direct_angles`` says when the rest is fitted too; None: every frame).

    Speed (docs/evaluation.md, "Performance"): the flow window of rotation steps is 9 px (``flow_window``), of
    general steps 15 px (``flow_window_general``). Lucas-Kanade's cost grows with the window's area; on the five
    default-run videos (rotation, 480x832) the 9-px window halved the estimator's CPU time and moved RPE_rot against
    the true path by -2.6 % to +4.0 % (no step invalid). On the square loop the essential-matrix steps are noisy with
    any window (RPE_trans against the true path 1.3-2.7 with 15 px, 2.1-3.0 with 9), so general motion keeps 15.
    Shi-Tomasi detection is about half of a step's cost, so corners are detected on every ``redetect``-th step of a
    rotation (4) and every ``redetect_general``-th step that may translate (2); a step in between tracks the points
    the previous step tracked into its first frame (it detects afresh when fewer than ``min_inliers`` points are
    left). Against the true path, RPE_rot moved by -0.3 % to +3.6 % from redetect 1 to 2 (five default-run videos)
    and by -5.8 % to +10 % from 2 to 4 (LRLR, LRUD, LRLRLR: 0.0035-0.06 deg, no step invalid); on the square loop
    the essential-matrix steps are too noisy to tell (RPE_trans 1.3-2.7 with 2, 1.6-4.3 with 4), so they keep 2.
    Steps run on ``threads`` threads (OpenCV releases the GIL) in blocks
    that start at a detection, each frame converted to grey once per block, and are chained in order afterwards:
    the same bytes for any thread count.
    """

    name = "classical-opencv"
    frame_views = True  # reads one frame at a time: perceive passes views, not copies

    def __init__(self, features: int = 3000, min_inliers: int = 20, corners: int = 800, flow_window: int = 9,
                 orb_min_side: int = 240, redetect: int = 4, threads: Optional[int] = None,
                 flow_window_general: int = 15, direct_margin_deg: Optional[float] = 10.0,
                 redetect_general: int = 2):
        self.features, self.min_inliers = features, min_inliers
        self.corners, self.flow_window, self.flow_window_general = corners, flow_window, flow_window_general
        self.orb_min_side = orb_min_side
        # read by evaluate.perceive: direct fits only where the chained angle is within this margin of the closest
        if direct_margin_deg is not None and (isinstance(direct_margin_deg, bool)
                                              or not isinstance(direct_margin_deg, (int, float))
                                              or not 0 < direct_margin_deg < float("inf")):
            raise ValueError(f"direct_margin_deg must be a number of degrees > 0, or null to fit the whole window, "
                             f"not {direct_margin_deg!r}")
        self.direct_margin_deg = None if direct_margin_deg is None else float(direct_margin_deg)
        self.redetect, self.redetect_general = max(1, int(redetect)), max(1, int(redetect_general))
        # execution only (not a setting: results are identical for any count), hence private: not in the cache key
        self._threads = default_threads() if threads is None else max(1, int(threads))
        self.angle_fit = "kabsch-on-homography-inliers/fast-threshold-20-over-scale"  # recorded (and in the cache key) with the settings
        self.position_fit = "orb-parallax-median/kabsch-refit-3x-median"  # likewise, for translating returns

    def _step(self, g0: np.ndarray, g1: np.ndarray, Kc: np.ndarray, Kinv: np.ndarray, mode: str,
              p0: Optional[np.ndarray] = None) -> tuple[np.ndarray, bool, int, Optional[np.ndarray]]:
        """(prev -> cur motion 4x4 in the prev camera frame, ok, inliers, the tracked points in ``g1`` (M, 1, 2)
        float32 or None). ``p0``: points of ``g0`` to track (default: Shi-Tomasi corners detected in ``g0``)."""
        import cv2

        T = np.eye(4)
        if p0 is None:
            p0 = cv2.goodFeaturesToTrack(g0, self.corners, 0.01, 7)
        if p0 is None or len(p0) < self.min_inliers:
            return T, False, 0, None
        win = self.flow_window if mode == "rotation" else self.flow_window_general
        # OpenCV's stubs leave out None for nextPts, which its API takes (no initial guess)
        p1, st, _ = cv2.calcOpticalFlowPyrLK(g0, g1, p0, None,  # type: ignore[call-overload]
                                             winSize=(win, win), maxLevel=3)
        good = st.reshape(-1) == 1
        h, w = g1.shape[:2]
        q = p1[good]
        inside = (q[:, 0, 0] >= 0) & (q[:, 0, 1] >= 0) & (q[:, 0, 0] <= w - 1) & (q[:, 0, 1] <= h - 1)
        tracked = q[inside]
        a = p0.reshape(-1, 2)[good].astype(np.float64)
        b = p1.reshape(-1, 2)[good].astype(np.float64)
        if len(a) < self.min_inliers:
            return T, False, 0, tracked
        if np.median(np.linalg.norm(b - a, axis=1)) < 0.25:
            return T, True, len(a), tracked  # a static step
        if mode == "rotation":
            Hm, mask = cv2.findHomography(a, b, cv2.RANSAC, 2.0)
            if Hm is None or int(mask.sum()) < self.min_inliers:
                return T, False, 0, tracked
            M = Kinv @ Hm @ Kc  # ∝ R_cur^T R_prev
            U, _, Vt = np.linalg.svd(M / np.cbrt(np.linalg.det(M)))
            T[:3, :3] = (U @ np.diag([1, 1, np.linalg.det(U @ Vt)]) @ Vt).T
            return T, True, int(mask.sum()), tracked
        E, mask = cv2.findEssentialMat(a, b, Kc, cv2.RANSAC, 0.999, 1.0)
        if E is None or E.shape != (3, 3) or int(mask.sum()) < self.min_inliers:
            return T, False, 0, tracked
        n, R, t, _ = cv2.recoverPose(E, a, b, Kc, mask=mask)
        T = np.linalg.inv(np.block([[R, t.reshape(3, 1)], [np.zeros((1, 3)), np.ones((1, 1))]]))
        return T, True, int(n), tracked

    def _every(self, mode: str) -> int:
        """Corners are detected on every this-many-th step of ``mode``: ``redetect`` (rotation), else
        ``redetect_general``."""
        return self.redetect if mode == "rotation" else self.redetect_general

    def _steps(self, frames: Any, first: int, last: int, Kc: np.ndarray, Kinv: np.ndarray,
               mode: str) -> list[tuple[np.ndarray, bool, int]]:
        """Steps ``first .. last - 1`` (step i: frame i -> i + 1) as ``[(T, ok, inliers)]``. ``first`` is a detection
        step (a multiple of :meth:`_every`); each later step of the group tracks the previous step's points, unless
        fewer than ``min_inliers`` were tracked (then it detects)."""
        import cv2

        every = self._every(mode)
        out = []
        g0 = cv2.cvtColor(frames[first], cv2.COLOR_RGB2GRAY)
        carry = None
        for i in range(first, last):
            g1 = cv2.cvtColor(frames[i + 1], cv2.COLOR_RGB2GRAY)
            reuse = (i % every) != 0 and carry is not None and len(carry) >= self.min_inliers
            T, ok, n, carry = self._step(g0, g1, Kc, Kinv, mode, carry if reuse else None)
            out.append((T, ok, n))
            g0 = g1
        return out

    def estimate(self, frames: Any, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        """Poses of ``frames`` (N, H, W, 3) uint8 RGB, chained over adjacent pairs: (N, 4, 4) OpenCV c2w float64,
        frame 0 = identity, and (N,) valid (False where a step had too few inliers). ``K``: (3, 3) pixels, +0.5
        centres. ``mode``: ``rotation`` (homography) or ``general`` (essential matrix)."""
        Kc = np.asarray(K, np.float64).copy()
        Kc[:2, 2] -= 0.5
        Kinv = np.linalg.inv(Kc)
        N = len(frames)
        c2w = np.tile(np.eye(4), (N, 1, 1))
        valid = np.ones(N, bool)
        inliers = [0] * N
        block = 16 * self._every(mode)  # blocks start at detection steps: any split gives the same steps
        spans = [(a, min(a + block, N - 1)) for a in range(0, max(N - 1, 0), block)]
        steps = [s for part in thread_map(lambda ab: self._steps(frames, ab[0], ab[1], Kc, Kinv, mode), spans,
                                          self._threads) for s in part]
        for i, (T, ok, n) in enumerate(steps, start=1):
            valid[i], inliers[i] = ok, n
            c2w[i] = c2w[i - 1] @ T
        return PoseEstimate(c2w, valid, {"inliers": inliers, "mode": mode})

    def _orb_setup(self, ref: np.ndarray,
                   K: np.ndarray) -> tuple[cv2.ORB, Callable[[np.ndarray], np.ndarray], np.ndarray, float]:
        """ORB at the working size (see :meth:`angles_to`): (detector, to-gray function, K^-1 at the working size on
        OpenCV's integer-centre grid, scale)."""
        import cv2

        s = max(1.0, float(self.orb_min_side) / min(ref.shape[:2]))
        # FAST compares intensities on a 3-px circle: upsampling by s shrinks those differences about s-fold, so the
        # corner threshold (OpenCV's default 20) shrinks with it (else smooth synthesised walls give no corners).
        orb = cv2.ORB.create(self.features, fastThreshold=max(5, int(round(20 / s))))

        def gray(img: np.ndarray) -> np.ndarray:
            g = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
            return g if s == 1.0 else cv2.resize(g, None, fx=s, fy=s, interpolation=cv2.INTER_CUBIC)

        Kc = np.asarray(K, np.float64).copy()
        Kc[:2] *= s  # pixel units at the working size (+0.5 centres), then OpenCV's integer-centre grid
        Kc[:2, 2] -= 0.5
        return orb, gray, np.linalg.inv(Kc), s

    def _orb_fits(self, ref: np.ndarray, frames: np.ndarray, K: np.ndarray, fit: RayFit) -> np.ndarray:
        """(N,) ``fit(ref points (M, 2), frame points (M, 2), K^-1, scale)`` per frame with at least ``min_inliers``
        cross-checked ORB matches to ``ref`` (points at the working size, see :meth:`_orb_setup`), ``inf`` for the
        others and where ``fit`` returns None. Frames are matched and fitted on ``threads`` threads (each frame on
        its own: the same values for any thread count)."""
        orb, gray, Kinv, s = self._orb_setup(ref, K)
        kp0, d0 = orb.detectAndCompute(gray(ref), None)
        out = np.full(len(frames), np.inf)
        if d0 is None:
            return out
        pts0 = np.array([kp.pt for kp in kp0], np.float64)

        def one(i: int) -> Optional[float]:
            # a detector per call: OpenCV's objects are not shared between threads
            import cv2

            o = cv2.ORB.create(orb.getMaxFeatures(), fastThreshold=orb.getFastThreshold())
            kp1, d1 = o.detectAndCompute(gray(frames[i]), None)
            if d1 is None:
                return None
            q, t = hamming_cross_check(d0, d1)
            if len(q) < self.min_inliers:
                return None
            return fit(pts0[q], np.array([kp.pt for kp in kp1], np.float64)[t], Kinv, s)

        for i, v in enumerate(thread_map(one, list(range(len(frames))), self._threads)):
            if v is not None:
                out[i] = v
        return out

    def parallax_to(self, ref: np.ndarray, frames: np.ndarray, K: np.ndarray) -> np.ndarray:
        """Median translation parallax (pixels of the original frame) between ``ref`` and each frame, from a direct
        fit (no chaining, so no drift): ORB matches, the rotation that best maps their rays (Kabsch, refitted on the
        matches within 3x the median residual), then the median angle between each matched ray and its rotated
        counterpart times the focal length. 0 when the camera stands where ``ref`` was taken (whatever it turned);
        it grows with the distance from there. ``inf`` where fewer than ``min_inliers`` matches support it. A
        translating path's return frame is the frame with the smallest parallax to frame 0."""
        focal = float(np.asarray(K)[0, 0])

        def fit(p0: np.ndarray, p1: np.ndarray, Kinv: np.ndarray, _s: float) -> Optional[float]:
            r0, r1 = _unit_rays(p0, Kinv), _unit_rays(p1, Kinv)
            res = _ray_residuals(r0, r1, _kabsch(r0, r1))
            keep = res <= 3 * np.median(res) + 1e-9
            if int(keep.sum()) < self.min_inliers:
                return None
            res = _ray_residuals(r0, r1, _kabsch(r0[keep], r1[keep]))
            return float(np.median(res)) * focal

        return self._orb_fits(ref, frames, K, fit)

    def angles_to(self, ref: np.ndarray, frames: np.ndarray, K: np.ndarray) -> np.ndarray:
        """Rotation angle (degrees) between ``ref`` and each frame from a direct fit (no chaining, so no drift): ORB
        matches, RANSAC homography inliers, then the rotation that best maps their rays (Kabsch); ``inf`` where fewer
        than ``min_inliers`` matches support it (the views do not overlap).

        ORB runs at a working size whose shorter side is at least ``orb_min_side`` pixels (frames are upsampled
        bicubically, ``K`` scaled with them; never downsampled): its 31-pixel border and patch leave too little of a
        small frame (at 96 x 160 most windows had no fit at all, and the return frame fell on a frame 90 deg away)."""
        import cv2

        def fit(p0: np.ndarray, p1: np.ndarray, Kinv: np.ndarray, s: float) -> Optional[float]:
            Hm, mask = cv2.findHomography(p0, p1, cv2.RANSAC, 2.0 * s)  # 2 px of the original frame
            if Hm is None or int(mask.sum()) < self.min_inliers:
                return None
            # The homography only picks the inliers; the rotation is fitted to their rays directly (Kabsch, 3
            # degrees of freedom instead of 8: on 96 x 160 frames its angle is within 0.05 deg where the
            # orthonormalised homography was up to 2 deg off, enough to pick a return frame 3 deg from the view).
            inl = mask.reshape(-1).astype(bool)
            R = _kabsch(_unit_rays(p0[inl], Kinv), _unit_rays(p1[inl], Kinv))
            return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1))))

        return self._orb_fits(ref, frames, K, fit)


def hamming_cross_check(d0: np.ndarray, d1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cross-checked nearest neighbours of binary descriptors ``d0`` (N0, B) and ``d1`` (N1, B) uint8 (ORB: B = 32)
    in Hamming distance: the pairs ``(q[k], t[k])`` where ``d1[t]`` is the nearest to ``d0[q]`` and ``d0[q]`` the
    nearest to ``d1[t]``, the lower index winning a tie, ordered by ``q`` (intp arrays).

    The same pairs in the same order as OpenCV's ``BFMatcher(NORM_HAMMING, crossCheck=True).match(d0, d1)``
    (tests/evaluate/perception/test_hamming_matching.py), which measures every distance twice, once per direction:
    here each is measured once, 64 bits at a time, on blocks of ``d0``'s rows, and both directions are read off the
    same block (about 3x faster on 3000-feature frames)."""
    d0, d1 = np.ascontiguousarray(d0, np.uint8), np.ascontiguousarray(d1, np.uint8)
    n0, n1 = len(d0), len(d1)
    if n0 == 0 or n1 == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    pad = -d0.shape[1] % 8  # zero bytes differ nowhere: the distances stay the same
    a = np.pad(d0, ((0, 0), (0, pad))).view(np.uint64)
    bt = np.ascontiguousarray(np.pad(d1, ((0, 0), (0, pad))).view(np.uint64).T)  # (words, N1)
    bits = max(1, (n0 - 1).bit_length())
    key_t = np.uint32 if bits + (8 * a.shape[1] * 8).bit_length() <= 32 else np.uint64
    # the column minimum of (distance << bits | row) is the nearest row of each column, the lowest row on a tie
    col = np.full(n1, np.iinfo(key_t).max, key_t)
    fwd = np.empty(n0, np.intp)
    rows = max(1, min(n0, (1 << 18) // n1))  # a block's temporaries stay within a few MB
    x = np.empty((rows, n1), np.uint64)
    c = np.empty((rows, n1), np.uint8)
    dist = np.empty((rows, n1), np.uint16)
    key = np.empty((rows, n1), key_t)
    for s in range(0, n0, rows):
        e = min(s + rows, n0)
        m = e - s
        for k in range(a.shape[1]):
            np.bitwise_xor(a[s:e, k, None], bt[k], out=x[:m])
            _popcount(x[:m], c[:m])
            if k == 0:
                dist[:m] = c[:m]
            else:
                dist[:m] += c[:m]
        fwd[s:e] = dist[:m].argmin(axis=1)  # the first minimum: the lowest column on a tie
        np.left_shift(dist[:m], bits, out=key[:m], dtype=key_t)
        key[:m] |= np.arange(s, e, dtype=key_t)[:, None]
        np.minimum(col, key[:m].min(axis=0), out=col)
    back = (col & np.asarray((1 << bits) - 1, key_t)).astype(np.intp)
    q = np.flatnonzero(back[fwd] == np.arange(n0))
    return q, fwd[q]


_BYTE_BITS = np.array([v.bit_count() for v in range(256)], np.uint8)


def _popcount(x: np.ndarray, out: np.ndarray) -> None:
    """``out`` (uint8) = the number of set bits of each element of ``x`` (uint64, C-contiguous rows)."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        np.bitwise_count(x, out=out)
    else:  # a byte table: the same counts
        out[...] = _BYTE_BITS[x.view(np.uint8)].reshape(*x.shape, 8).sum(axis=-1, dtype=np.uint8)


def _unit_rays(points: np.ndarray, Kinv: np.ndarray) -> np.ndarray:
    """(N, 3) unit camera rays of (N, 2) pixel points (``Kinv`` on the same pixel grid)."""
    p = np.asarray(points, np.float64).reshape(-1, 2)
    r = np.c_[p, np.ones(len(p))] @ Kinv.T
    rays: np.ndarray = r / np.linalg.norm(r, axis=1, keepdims=True)
    return rays


def _kabsch(r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
    """The rotation R minimising sum |r1 - R r0|^2 over matched unit rays (N, 3), reflection-safe."""
    U, _, Vt = np.linalg.svd(r1.T @ r0)
    R: np.ndarray = U @ np.diag([1, 1, np.linalg.det(U @ Vt)]) @ Vt
    return R


def _ray_residuals(r0: np.ndarray, r1: np.ndarray, R: np.ndarray) -> np.ndarray:
    """(N,) angle in radians between each ray of ``r1`` and the matching ray of ``r0`` rotated by ``R``."""
    angles: np.ndarray = np.arccos(np.clip(np.sum(r1 * (r0 @ R.T), axis=1), -1.0, 1.0))
    return angles


class OraclePoses:
    """The generation side's own camera path: only for the built-in reference model, which follows it exactly by
    construction (labelled ``oracle`` everywhere; never used for an upstream model)."""

    name = "oracle"

    def __init__(self, c2w: np.ndarray):
        self.c2w = np.asarray(c2w, np.float64)

    def estimate(self, frames: np.ndarray, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        return PoseEstimate(self.c2w[indices], np.ones(len(indices), bool), {"source": "camera.npz"})


class OracleDepth:
    """Exact z-depth of the reference model's room at the requested poses (``oracle``, reference model only)."""

    name = "oracle"

    def __init__(self, room: dict[str, float], c2w: np.ndarray, K: np.ndarray, height: int, width: int):
        from harness.scene import Room

        self.room = Room(**{k: float(v) for k, v in room.items()})
        self.c2w, self.K, self.h, self.w = np.asarray(c2w), np.asarray(K), height, width

    def depth(self, frames: np.ndarray, indices: list[int]) -> np.ndarray:
        return np.stack([self.room.depth_map(self.c2w[i], self.K, self.h, self.w) for i in indices])
