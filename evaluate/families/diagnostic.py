"""Diagnostics of this harness (not paper metrics): pixel PSNR / SSIM of each return frame against frame 0, and the
cross-departure consistency (feature similarity of frames at matching prescribed poses in the first two departures,
which tests memory of content first seen during a departure rather than at the start)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..protocol import matched_departure_pairs
from ..registry import Backbones, Compute, MetricSpec
from ..results import Entries
from .base import Family, entry
from .environment import _returns

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..perceive import ItemPerception


def ssim(a: np.ndarray, b: np.ndarray, data_range: float = 255.0, win: int = 7) -> float:
    """SSIM of two (H, W, 3) images: ``skimage.metrics.structural_similarity(a, b, channel_axis=2,
    data_range=data_range)`` at its defaults (uniform ``win`` x ``win`` window, K1 = 0.01, K2 = 0.03, sample
    covariance, the ``(win - 1) / 2`` border left out, mean over pixels then channels), with OpenCV's box filter
    instead of scipy's: the same value within 1e-14 in a fraction of the time (tests/evaluate/test_perceive_once.py)."""
    return _ssim_to(_ssim_stats(a, win), b, data_range, win)


def _window_mean(z: np.ndarray, win: int, out: np.ndarray | None = None) -> np.ndarray:
    """(H, W, C) float64 mean over each ``win`` x ``win`` window, edges mirrored (``BORDER_REFLECT``). An integer
    image (uint16: 8-bit values and their products) is summed exactly in int32 and scaled once, which is the value
    OpenCV's float64 box filter gives bit for bit (its running sums of integers are exact as well), in a quarter of
    the time."""
    import cv2

    if z.dtype == np.uint16 and win * win * 65535 < 2**31:
        s = cv2.boxFilter(z, cv2.CV_32S, (win, win), normalize=False, borderType=cv2.BORDER_REFLECT)
        return np.multiply(s, 1.0 / (win * win), out=out)
    return cv2.boxFilter(np.asarray(z, np.float64), cv2.CV_64F, (win, win), dst=out, normalize=True,
                         borderType=cv2.BORDER_REFLECT)


def _exact(a: np.ndarray) -> np.ndarray:
    """8-bit images as uint16 (room for the products of two), anything else as float64."""
    return a.astype(np.uint16) if a.dtype == np.uint8 else np.asarray(a, np.float64)


def _ssim_stats(a: np.ndarray, win: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image, local mean, local variance x (n-1)/n) of ``a``: the reference side of :func:`ssim`, computed once for
    every frame it is compared with (the image as :func:`_exact` keeps it, the statistics in float64)."""
    x = _exact(a)
    ux = _window_mean(x, win)
    return x, ux, _window_mean(x * x, win) - ux * ux


def _ssim_to(ref: tuple[np.ndarray, np.ndarray, np.ndarray], b: np.ndarray, data_range: float = 255.0,
             win: int = 7) -> float:
    """:func:`ssim` of the image behind ``ref`` (:func:`_ssim_stats`) and ``b``: the textbook expression

        ((2 ux uy + c1) (2 cov vxy + c2)) / ((ux^2 + uy^2 + c1) (cov vx + cov vy + c2))

    evaluated operation by operation in its own order (the same value to the last bit), into four buffers instead of
    fifteen fresh temporaries: on 480 x 832 frames the page faults of those allocations cost a third of the time."""
    x, ux, vx = ref
    y = _exact(b)  # against a float image, numpy's promotion takes the products to float64: the same values
    uy, t1, t2, t3 = (np.empty(ux.shape, np.float64) for _ in range(4))
    n = win * win
    cov = n / (n - 1)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    _window_mean(y, win, uy)
    _window_mean(y * y, win, t2)
    np.multiply(uy, uy, out=t1)  # t1 = uy^2, kept for the denominator
    t2 -= t1  # t2 = vy
    vxy = _window_mean(x * y, win)
    np.multiply(ux, uy, out=t3)
    vxy -= t3
    np.multiply(ux, 2, out=t3)
    t3 *= uy
    t3 += c1  # t3 = 2 ux uy + c1
    vxy *= cov
    vxy *= 2
    vxy += c2  # vxy = 2 cov vxy + c2
    t3 *= vxy  # t3 = the numerator
    den = vxy
    np.multiply(ux, ux, out=den)
    den += t1
    den += c1  # ux^2 + uy^2 + c1
    np.multiply(vx, cov, out=uy)
    t2 *= cov
    uy += t2
    uy += c2  # uy = cov vx + cov vy + c2
    den *= uy
    t3 /= den
    p = (win - 1) // 2
    return float(t3[p:-p, p:-p].reshape(-1, ux.shape[2]).mean(axis=0).mean())


def _pixels(item: EvalItem, perception: ItemPerception,
            settings: EvalConfig) -> tuple[dict[str, Any], list[float], list[float]]:
    """(return frames, PSNR and SSIM of each return frame against frame 0), memoised for the two metrics."""
    if "revisit_pixels" not in item.memo:
        from harness.imaging import psnr

        from ..perception.weightfree import default_threads, thread_map

        r = _returns(item, perception, settings)
        f0 = item.frames[0]
        rf = item.frames_view(r["frames"])
        ref = _ssim_stats(f0)
        # one return frame per thread (OpenCV and numpy release the GIL): the same values, in the same order
        scores = thread_map(lambda x: (min(psnr(f0, x), 100.0), _ssim_to(ref, x)), list(rf), default_threads())
        item.memo["revisit_pixels"] = (r, [p for p, _ in scores], [q for _, q in scores])
    memo: tuple[dict[str, Any], list[float], list[float]] = item.memo["revisit_pixels"]
    return memo


def revisit_psnr(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    r, ps, _ = _pixels(item, perception, settings)
    return entry("diagnostic.revisit_psnr", "pixels", "diagnostic", float(np.mean(ps)), per_revisit=ps,
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"])


def revisit_ssim(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    r, _, ss = _pixels(item, perception, settings)
    return entry("diagnostic.revisit_ssim", "pixels", "diagnostic", float(np.mean(ss)), per_revisit=ss,
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"])


def _pairs(item: EvalItem, settings: EvalConfig) -> list[tuple[int, int]]:
    return matched_departure_pairs(item.c2w, item.phases, settings.memory_stride)


def cross_departure(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    pairs = _pairs(item, settings)
    name = backbones["encoder"]
    feats = perception.encode(name, [a for a, _ in pairs] + [b for _, b in pairs])
    fa, fb = feats[: len(pairs)], feats[len(pairs):]
    sims = np.clip(np.sum(fa * fb, axis=1) / np.maximum(
        np.linalg.norm(fa, axis=1) * np.linalg.norm(fb, axis=1), 1e-12), 0, 1)
    return entry("diagnostic.cross_departure", perception.label(name, "encoder"), perception.kind(name),
                 float(sims.mean()), pairs=pairs)


def _has_revisits(item: EvalItem, settings: EvalConfig) -> bool:
    return item.num_revisits > 0


def _has_pairs(item: EvalItem, settings: EvalConfig) -> bool:
    return bool(_pairs(item, settings))


SPECS = (
    MetricSpec("diagnostic.revisit_psnr", "diagnostic", True, "pixels", False, "PSNR return frame vs frame 0",
               (Compute(revisit_psnr, (), _has_revisits),), static=True, resolution=0.5),
    MetricSpec("diagnostic.revisit_ssim", "diagnostic", True, "pixels", False, "SSIM return frame vs frame 0",
               (Compute(revisit_ssim, (), _has_revisits),), static=True),
    MetricSpec("diagnostic.cross_departure", "diagnostic", True, "encoder", False,
               "similarity of frames at matching poses across the first two departures",
               (Compute(cross_departure, ("encoder",), _has_pairs),), static=True),
)

FAMILY = Family("diagnostic", ("encoders", "return_frame_poses", "pose_estimators", "memory_stride"), SPECS)
