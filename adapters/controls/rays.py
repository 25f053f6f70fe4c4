"""Camera ray maps: LingBot / Evoke / MG-3 ``[o, d]`` rays folded into channels, and SANA-WM true Plücker.

Poses are OpenCV camera-to-world 4x4 (+x right / +y down / +z forward, world = camera frame of frame 0);
intrinsics are pixel ``K`` (3x3) or ``[fx, fy, cx, cy]``.

Three layouts exist upstream and they are not interchangeable:

* ``[o, d]`` (LingBot, Evoke, MG-3): origin and unit direction, pixel centres ``+0.5``, at *pixel* resolution,
  then folded ``b x b`` into channels with ``channel = b*b*c + b*row + col``.
* Plücker ``[d, o x d]`` (SANA-WM): unit direction and moment, *integer* pixel grid, on the latent grid.
* CameraCtrl ``[o x d, d]`` (DreamX legacy helper): not used by any path here.
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


def unfold(folded: np.ndarray, block: int = 8, channels: int = 6) -> np.ndarray:
    """Inverse of :func:`fold`: (F, C*b*b, h, w) -> (F, h*b, w*b, C)."""
    F, CB, h, w = folded.shape
    x = folded.reshape(F, channels, block, block, h, w)  # f c c1 c2 h w
    return np.ascontiguousarray(x.transpose(0, 4, 2, 5, 3, 1).reshape(F, h * block, w * block, channels))


def plucker_sana(poses: np.ndarray, K_latent: np.ndarray, h: int, w: int) -> np.ndarray:
    """SANA-WM ``compute_raymap(..., use_plucker=True)``: ``[d, o x d]`` on an integer pixel grid.

    Args:
        poses: (F, 4, 4) poses relative to frame 0 (no translation normalisation).
        K_latent: (3, 3) intrinsics already scaled to the ``h`` x ``w`` latent grid.
    Returns:
        (F, h, w, 6) float64. NVlabs/Sana diffusion/utils/cam_utils.py (copy of uncertain provenance).
    """
    d_cam = pixel_rays(K_latent, h, w, 0.0)
    poses = np.asarray(poses, dtype=np.float64)
    d = np.einsum("fij,hwj->fhwi", poses[:, :3, :3], d_cam)
    o = np.broadcast_to(poses[:, None, None, :3, 3], d.shape)
    return np.concatenate([d, np.cross(o, d)], axis=-1)


def sana_latent_K(K: np.ndarray, H: int, W: int, h: int, w: int) -> np.ndarray:
    """SANA-WM intrinsics on the latent grid: ``fx, cx *= w / W``, ``fy, cy *= h / H``."""
    Kl = np.asarray(K, dtype=np.float64).copy()
    Kl[0] *= w / W
    Kl[1] *= h / H
    Kl[2] = [0, 0, 1]
    return Kl


def sana_camera_conditions(rel_c2w: np.ndarray, K: np.ndarray, H: int = 704, W: int = 1280,
                           stride: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """SANA-WM ``_pack_camera_conditions``: ``raymap`` (T_lat, 20) and ``chunk_plucker`` (48, T_lat, h, w).

    ``raymap[i]`` = flattened 4x4 pose of frame 8i + latent-grid ``[fx, fy, cx, cy]`` (the order of these four is
    [inferred]: not visible in the streaming script); ``chunk_plucker[6j + c, i]`` = Plücker channel c of frame j of latent
    i's window ``[max(0, 8i-7), +8)``. Frames F -> ``T_lat = (F - 1)//8 + 1``.
    """
    from .poses import anchors_sana_raymap, sana_chunk_windows

    F = len(rel_c2w)
    T = (F - 1) // 8 + 1
    h, w = H // stride, W // stride
    Kl = sana_latent_K(K, H, W, h, w)
    anchors = anchors_sana_raymap(T)
    raymap = np.concatenate(
        [rel_c2w[anchors].reshape(T, 16), np.tile([Kl[0, 0], Kl[1, 1], Kl[0, 2], Kl[1, 2]], (T, 1))], axis=1
    )
    win = sana_chunk_windows(T, F)
    pl = plucker_sana(rel_c2w[win.reshape(-1)], Kl, h, w).reshape(T, 8, h, w, 6)
    chunk = pl.transpose(1, 4, 0, 2, 3).reshape(48, T, h, w)
    return raymap, chunk
