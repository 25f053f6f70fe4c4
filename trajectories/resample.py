"""Resampling a per-frame camera path to latent rate (or any anchor list).

Adapters never re-implement this: the latent-anchor rules live here (:func:`latent_anchor_frames`,
:func:`first_of_group_anchors`) and fractional positions go through :func:`resample_c2w`.
Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world, world = camera frame of frame 0,
positive yaw turns right, positive pitch turns up.
"""

from __future__ import annotations

import numpy as np

from .conventions import se3, slerp_rotations


def latent_anchor_frames(num_latents: int, stride: int = 4) -> np.ndarray:
    """The pixel frame whose pose latent ``i`` carries: ``stride * i`` (int64, (L,)).

    The one place this rule lives. A causal video VAE with temporal stride ``stride`` encodes frame 0 alone and
    then groups of ``stride`` frames; latent ``i`` is anchored on the last frame of its group, ``stride * i``
    (HY-WorldPlay's pose JSON, LingBot-World's ``linspace(0, N - 1, n_lat)`` when ``N = stride * (n_lat - 1) + 1``,
    the tiny DiT, the reference model; SANA-WM's raymap with ``stride = 8``).
    """
    return stride * np.arange(num_latents, dtype=np.int64)


def latent_poses(c2w: np.ndarray, stride: int = 4) -> np.ndarray:
    """(N, 4, 4) per-frame poses -> (``latents_for_frames(N, stride)``, 4, 4) poses at :func:`latent_anchor_frames`."""
    c2w = np.asarray(c2w)
    anchored: np.ndarray = c2w[latent_anchor_frames(latents_for_frames(len(c2w), stride), stride)]
    return anchored


def first_of_group_anchors(num_latents: int, stride: int = 4) -> np.ndarray:
    """Latent 0 -> frame 0, latent ``j >= 1`` -> frame ``stride * j - (stride - 1)`` (int64; DreamX: 0, 1, 5, 9, ...).

    AMAP-ML/DreamX-World@a1f4c6e ``cam_params_to_prope_dict``: ``aligned_indices = [0] + [1 + 4i]``.
    """
    a = stride * np.arange(num_latents, dtype=np.int64) - (stride - 1)
    a[0] = 0
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
