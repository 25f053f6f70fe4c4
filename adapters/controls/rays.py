"""Camera ray maps: LingBot / Evoke / MG-3 ``[o, d]`` rays folded into channels (the tiny DiT's conditioning).

Poses are OpenCV camera-to-world 4x4 (+x right / +y down / +z forward, world = camera frame of frame 0);
intrinsics are pixel ``K`` (3x3) or ``[fx, fy, cx, cy]``.

Two layouts exist upstream and they are not interchangeable:

* ``[o, d]`` (LingBot, Evoke, MG-3): origin and unit direction, pixel centres ``+0.5``, at *pixel* resolution,
  then folded ``b x b`` into channels with ``channel = b*b*c + b*row + col``.
* Plücker ``[d, o x d]`` (SANA-WM): unit direction and moment, *integer* pixel grid, on the latent grid.

The SANA-WM Plücker encoding is re-implemented as a test reference in ``tests/support/upstream_reference.py``.
"""

from __future__ import annotations

import numpy as np

from trajectories.conventions import pixel_rays


def od_rays(poses: np.ndarray, K: np.ndarray, h: int, w: int) -> np.ndarray:
    """LingBot ``get_plucker_embeddings``: ``[o_x, o_y, o_z, d_x, d_y, d_z]`` per pixel.

    Args:
        poses: (F, 4, 4) camera poses (already relative/framewise as the model expects).
        K: (3, 3) pixel intrinsics for ``h`` x ``w``; pixel centres at +0.5.
    Returns:
        (F, h, w, 6) float64; ``d = R · normalise(K^-1 [u, v, 1])``, ``o = t``.
        robbyant/lingbot-world-v2@2648877 wan/utils/cam_utils.py.
    """
    d_cam = pixel_rays(K, h, w, 0.5)
    poses = np.asarray(poses, dtype=np.float64)
    d = np.einsum("fij,hwj->fhwi", poses[:, :3, :3], d_cam)
    o = np.broadcast_to(poses[:, None, None, :3, 3], d.shape)
    return np.concatenate([o, d], axis=-1)


def fold(rays: np.ndarray, block: int = 8) -> np.ndarray:
    """``'f (h c1) (w c2) c -> f (c c1 c2) h w'``: (F, H, W, C) -> (F, C*b*b, H/b, W/b).

    Channel index = ``b*b*c + b*row + col`` with (row, col) inside the ``b x b`` block (LingBot: b = 8 -> 384
    channels; MG-3: b = 16 -> 1536 [inferred from LingBot's pattern]).
    """
    F, H, W, C = rays.shape
    if H % block or W % block:
        raise ValueError(f"ray map {H}x{W} is not divisible by the fold block {block}")
    x = rays.reshape(F, H // block, block, W // block, block, C)  # f h c1 w c2 c
    return np.ascontiguousarray(x.transpose(0, 5, 2, 4, 1, 3).reshape(F, C * block * block, H // block, W // block))


