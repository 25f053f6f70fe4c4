"""Weight-free perception: a diagnostic pixel encoder, a template-matching tracker, a classical (OpenCV) pose
estimator, and the oracle pose / depth of the reference model. Each is deterministic and labelled in every report.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .base import PoseEstimate


class PixelEncoder:
    """Diagnostic encoder ``pixel-thumb16``: the (masked) region resized to 16x16 RGB (area), centred per channel,
    L2-normalised. Deterministic and weight-free; NOT the paper's DINOv2 (its metrics carry the ``[pixel]`` tag)."""

    name = "pixel-thumb16"
    kind = "diagnostic"

    def __init__(self, size: int = 16):
        self.size = size

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
        return np.stack([self._one(f, None if masks is None else masks[i]) for i, f in enumerate(frames)])


class TemplateTracker:
    """Classical tracker ``template-ncc``: normalised cross-correlation of the target's frame-0 crop; a frame is a
    valid observation when the best match scores >= ``threshold`` with the whole box inside the image, and its mask
    is the frame-0 mask moved to the match."""

    name = "template-ncc"

    def __init__(self, threshold: float = 0.6):
        self.threshold = threshold

    @classmethod
    def from_settings(cls, ecfg) -> "TemplateTracker":
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
        scores = np.zeros(N)
        for i, f in enumerate(frames):
            res = cv2.matchTemplate(f, tmpl, cv2.TM_CCOEFF_NORMED)
            _, best, _, loc = cv2.minMaxLoc(res)
            scores[i] = best
            if best >= self.threshold:
                x, y = loc
                masks[i, y : y + (y1 - y0), x : x + (x1 - x0)] = local
                valid[i] = True
        return masks, valid


class ClassicalPoseEstimator:
    """``classical-opencv``: ORB features + RANSAC between consecutive sampled frames, chained.

    Rotation trajectories: homography ``H ∝ K R_rel K^-1`` with known intrinsics, ``R_rel`` orthonormalised by SVD.
    General motion: essential matrix + ``recoverPose`` (unit translation per step; the global scale is left to the
    Sim(3) alignment of Eq. 2). Steps with fewer than ``min_inliers`` inliers keep the previous pose and are reported
    invalid. Deterministic (fixed ORB settings, seeded RANSAC through OpenCV's RNG).
    """

    name = "classical-opencv"

    def __init__(self, features: int = 3000, min_inliers: int = 20):
        self.features, self.min_inliers = features, min_inliers

    def estimate(self, frames: np.ndarray, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        import cv2

        cv2.setRNGSeed(0)
        orb = cv2.ORB_create(self.features)
        bf = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
        Kc = np.asarray(K, np.float64).copy()
        Kc[0, 2] -= 0.5
        Kc[1, 2] -= 0.5
        Kinv = np.linalg.inv(Kc)
        N = len(frames)
        c2w = np.tile(np.eye(4), (N, 1, 1))
        valid = np.ones(N, bool)
        feats = [orb.detectAndCompute(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), None) for f in frames]
        inliers = [0] * N
        for i in range(1, N):
            (kp0, d0), (kp1, d1) = feats[i - 1], feats[i]
            T = np.eye(4)
            ok = False
            if d0 is not None and d1 is not None and len(kp0) >= 8 and len(kp1) >= 8:
                m = bf.match(d0, d1)
                p0 = np.float64([kp0[x.queryIdx].pt for x in m])
                p1 = np.float64([kp1[x.trainIdx].pt for x in m])
                if len(m) >= self.min_inliers:
                    if np.median(np.linalg.norm(p1 - p0, axis=1)) < 0.25:
                        ok, inliers[i] = True, len(m)  # a static step
                    elif mode == "rotation":
                        Hm, mask = cv2.findHomography(p0, p1, cv2.RANSAC, 2.0)
                        if Hm is not None and int(mask.sum()) >= self.min_inliers:
                            M = Kinv @ Hm @ Kc  # ∝ R_cur^T R_prev
                            U, _, Vt = np.linalg.svd(M / np.cbrt(np.linalg.det(M)))
                            Rrel = U @ np.diag([1, 1, np.linalg.det(U @ Vt)]) @ Vt
                            T[:3, :3] = Rrel.T  # prev -> cur motion in the prev camera frame
                            ok, inliers[i] = True, int(mask.sum())
                    else:
                        E, mask = cv2.findEssentialMat(p0, p1, Kc, cv2.RANSAC, 0.999, 1.0)
                        if E is not None and E.shape == (3, 3) and int(mask.sum()) >= self.min_inliers:
                            n, R, t, _ = cv2.recoverPose(E, p0, p1, Kc, mask=mask)
                            T = np.linalg.inv(np.block([[R, t.reshape(3, 1)], [np.zeros((1, 3)), np.ones((1, 1))]]))
                            ok, inliers[i] = True, int(n)
            valid[i] = ok
            c2w[i] = c2w[i - 1] @ T
        return PoseEstimate(c2w, valid, {"inliers": inliers, "mode": mode})


    def angles_to(self, ref: np.ndarray, frames: np.ndarray, K: np.ndarray) -> np.ndarray:
        """Rotation angle (degrees) between ``ref`` and each frame from a direct homography fit (no chaining, so no
        drift); ``inf`` where fewer than ``min_inliers`` matches support it (the views do not overlap)."""
        import cv2

        cv2.setRNGSeed(0)
        orb = cv2.ORB_create(self.features)
        bf = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
        Kc = np.asarray(K, np.float64).copy()
        Kc[:2, 2] -= 0.5
        Kinv = np.linalg.inv(Kc)
        kp0, d0 = orb.detectAndCompute(cv2.cvtColor(ref, cv2.COLOR_RGB2GRAY), None)
        out = np.full(len(frames), np.inf)
        for i, f in enumerate(frames):
            kp1, d1 = orb.detectAndCompute(cv2.cvtColor(f, cv2.COLOR_RGB2GRAY), None)
            if d0 is None or d1 is None:
                continue
            m = bf.match(d0, d1)
            if len(m) < self.min_inliers:
                continue
            p0 = np.float64([kp0[x.queryIdx].pt for x in m])
            p1 = np.float64([kp1[x.trainIdx].pt for x in m])
            Hm, mask = cv2.findHomography(p0, p1, cv2.RANSAC, 2.0)
            if Hm is None or int(mask.sum()) < self.min_inliers:
                continue
            M = Kinv @ Hm @ Kc
            U, _, Vt = np.linalg.svd(M / np.cbrt(np.linalg.det(M)))
            R = U @ np.diag([1, 1, np.linalg.det(U @ Vt)]) @ Vt
            out[i] = np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1)))
        return out


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

    def __init__(self, room: dict, c2w: np.ndarray, K: np.ndarray, height: int, width: int):
        from adapters.reference.model import Room

        self.room = Room(**{k: float(v) for k, v in room.items()})
        self.c2w, self.K, self.h, self.w = np.asarray(c2w), np.asarray(K), height, width

    def depth(self, frames: np.ndarray, indices: list[int]) -> np.ndarray:
        return np.stack([self.room.depth_map(self.c2w[i], self.K, self.h, self.w) for i in indices])
