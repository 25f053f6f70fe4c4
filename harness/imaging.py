"""Small image helpers shared by adapters and evaluation."""

from __future__ import annotations

import numpy as np


def resize_cover_crop(img: np.ndarray, dst_hw: tuple[int, int]) -> np.ndarray:
    """Resize ``img`` (H, W, C) to cover ``dst_hw`` = (height, width) keeping its aspect, then centre-crop.

    The matching intrinsics transform is :func:`trajectories.conventions.intrinsics_for_resize_crop`.
    """
    import cv2

    hs, ws = img.shape[:2]
    hd, wd = dst_hw
    s = max(hd / hs, wd / ws)
    nh, nw = max(hd, int(round(hs * s))), max(wd, int(round(ws * s)))
    interp = cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR
    r = cv2.resize(img, (nw, nh), interpolation=interp)
    # Crop offsets from the exact (unrounded) scaled size so they agree with the intrinsics transform.
    y0 = int(round((hs * s - hd) / 2.0))
    x0 = int(round((ws * s - wd) / 2.0))
    y0, x0 = min(max(y0, 0), nh - hd), min(max(x0, 0), nw - wd)
    return np.ascontiguousarray(r[y0 : y0 + hd, x0 : x0 + wd])


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    """Peak signal-to-noise ratio in dB between two images of the same shape (inf when identical)."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(peak**2 / mse)
