"""Diagnostics of this harness (not paper metrics): pixel PSNR / SSIM of each return frame against frame 0, and the
cross-departure consistency (feature similarity of frames at matching prescribed poses in the first two departures,
which tests memory of content first seen during a departure rather than at the start)."""

from __future__ import annotations

import numpy as np

from ..protocol import matched_departure_pairs
from . import Entries, Family, Metric, entry
from .environment import _returns


def ssim(a: np.ndarray, b: np.ndarray, data_range: float = 255.0, win: int = 7) -> float:
    """SSIM of two (H, W, 3) images: ``skimage.metrics.structural_similarity(a, b, channel_axis=2,
    data_range=data_range)`` at its defaults (uniform ``win`` x ``win`` window, K1 = 0.01, K2 = 0.03, sample
    covariance, the ``(win - 1) / 2`` border left out, mean over pixels then channels), with OpenCV's box filter in
    float64 instead of scipy's: the same value within 1e-14 in a third of the time (tests/evaluate/test_formulas.py)."""
    return _ssim_to(_ssim_stats(a, win), b, data_range, win)


def _box(z: np.ndarray, win: int) -> np.ndarray:
    import cv2

    return cv2.boxFilter(z, cv2.CV_64F, (win, win), normalize=True, borderType=cv2.BORDER_REFLECT)


def _ssim_stats(a: np.ndarray, win: int = 7) -> tuple:
    """(image, local mean, local variance x (n-1)/n) of ``a`` in float64: the reference side of :func:`ssim`, computed
    once for every frame it is compared with."""
    x = np.asarray(a, np.float64)
    ux = _box(x, win)
    return x, ux, _box(x * x, win) - ux * ux


def _ssim_to(ref: tuple, b: np.ndarray, data_range: float = 255.0, win: int = 7) -> float:
    x, ux, vx = ref
    y = np.asarray(b, np.float64)
    uy = _box(y, win)
    n = win * win
    cov = n / (n - 1)
    vy, vxy = _box(y * y, win) - uy * uy, _box(x * y, win) - ux * uy
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * (cov * vxy) + c2)) / ((ux * ux + uy * uy + c1) * ((cov * vx) + (cov * vy) + c2))
    p = (win - 1) // 2
    return float(s[p:-p, p:-p].reshape(-1, x.shape[2]).mean(axis=0).mean())


def _pixels(ctx, perc, ecfg) -> dict:
    if "revisit_pixels" not in ctx.memo:
        from harness.imaging import psnr

        r = _returns(ctx, perc, ecfg)
        f0 = ctx.frames[0]
        rf = ctx.frames_view(r["frames"])
        ref = _ssim_stats(f0)
        ctx.memo["revisit_pixels"] = (r, [min(psnr(f0, x), 100.0) for x in rf], [_ssim_to(ref, x) for x in rf])
    return ctx.memo["revisit_pixels"]


def revisit_psnr(ctx, perc, ecfg, bb) -> Entries:
    r, ps, _ = _pixels(ctx, perc, ecfg)
    return entry("diagnostic.revisit_psnr", "pixels", "diagnostic", float(np.mean(ps)), per_revisit=ps,
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"])


def revisit_ssim(ctx, perc, ecfg, bb) -> Entries:
    r, _, ss = _pixels(ctx, perc, ecfg)
    return entry("diagnostic.revisit_ssim", "pixels", "diagnostic", float(np.mean(ss)), per_revisit=ss,
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"])


def _pairs(ctx, ecfg):
    return matched_departure_pairs(ctx.c2w, ctx.phases, ecfg.memory_stride)


def cross_departure(ctx, perc, ecfg, bb) -> Entries:
    pairs = _pairs(ctx, ecfg)
    name = bb["encoder"]
    feats = perc.encode(name, [a for a, _ in pairs] + [b for _, b in pairs])
    fa, fb = feats[: len(pairs)], feats[len(pairs):]
    sims = np.clip(np.sum(fa * fb, axis=1) / np.maximum(
        np.linalg.norm(fa, axis=1) * np.linalg.norm(fb, axis=1), 1e-12), 0, 1)
    return entry("diagnostic.cross_departure", perc.label(name, "encoder"), perc.kind(name), float(sims.mean()),
                 pairs=pairs)


FAMILY = Family(
    "diagnostic",
    ("encoders", "return_frame_poses", "pose_estimators", "memory_stride"),
    (Metric("diagnostic.revisit_psnr", (), revisit_psnr, lambda ctx, ecfg: ctx.num_revisits > 0),
     Metric("diagnostic.revisit_ssim", (), revisit_ssim, lambda ctx, ecfg: ctx.num_revisits > 0),
     Metric("diagnostic.cross_departure", ("encoder",), cross_departure, lambda ctx, ecfg: bool(_pairs(ctx, ecfg)))),
)
