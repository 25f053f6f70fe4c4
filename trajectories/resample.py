"""Resampling a per-frame camera path to latent rate (or any anchor list).

Adapters never re-implement this: they pick an anchor rule and call :func:`resample_c2w`.
Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world, world = camera frame of frame 0,
positive yaw turns right, positive pitch turns up.
"""

from __future__ import annotations

import numpy as np

from .conventions import se3, slerp_rotations


def linspace_anchors(num_frames: int, num_latents: int) -> np.ndarray:
    """LingBot-style targets ``linspace(0, N - 1, n_latents)`` (float64; integer ``4i`` when ``N = 4(n-1)+1``)."""
    return np.linspace(0.0, num_frames - 1, num_latents)


def stride_anchors(num_latents: int, stride: int = 4, first: int = 0) -> np.ndarray:
    """Latent ``i`` -> frame ``first + stride * i`` (HY-WorldPlay / LingBot: ``4i``; SANA raymap: ``8i``)."""
    return first + stride * np.arange(num_latents, dtype=np.float64)


def first_of_group_anchors(num_latents: int, stride: int = 4) -> np.ndarray:
    """Latent 0 -> frame 0, latent ``j >= 1`` -> frame ``stride * j - (stride - 1)`` (DreamX: 0, 1, 5, 9, ...)."""
    a = stride * np.arange(num_latents, dtype=np.float64) - (stride - 1)
    a[0] = 0.0
    return a


def latents_for_frames(num_frames: int, stride: int = 4) -> int:
    """Number of latent frames of a causal video VAE with temporal stride ``stride``: ``(N - 1) // stride + 1``."""
    return (num_frames - 1) // stride + 1


def resample_c2w(c2w: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Poses at fractional frame positions: SLERP on rotations, linear on translations.

    Args:
        c2w: (T, 4, 4) float64 camera-to-world poses (OpenCV axes, world = frame 0).
        anchors: (L,) frame positions in ``[0, T - 1]``; integer positions return the input pose exactly.

    Returns:
        (L, 4, 4) float64 poses.
    """
    c2w = np.asarray(c2w, dtype=np.float64)
    anchors = np.asarray(anchors, dtype=np.float64)
    T = c2w.shape[0]
    if anchors.size and (anchors.min() < 0 or anchors.max() > T - 1 + 1e-9):
        raise ValueError(f"anchors must lie in [0, {T - 1}]; got [{anchors.min()}, {anchors.max()}]")
    out = np.empty((len(anchors), 4, 4))
    for j, a in enumerate(anchors):
        i0 = int(np.floor(a))
        i0 = min(i0, T - 1)
        frac = a - i0
        if frac < 1e-12 or i0 == T - 1:
            out[j] = c2w[i0]
            continue
        i1 = i0 + 1
        R = slerp_rotations(c2w[i0, :3, :3], c2w[i1, :3, :3], np.array([frac]))[0]
        t = (1 - frac) * c2w[i0, :3, 3] + frac * c2w[i1, :3, 3]
        out[j] = se3(R, t)
    return out
