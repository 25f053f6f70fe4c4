"""Independent re-implementations of upstream camera encodings, used by tests as references (not by the harness).

These follow each upstream's own code (cited per function) for rules no adapter needs to compute, because the
adapter hands upstream the poses and upstream encodes them itself: latent windows and anchors (SANA-WM, MG-3,
MG-3.5, Evoke), DreamX's chunk-relative rule, MG-3.5's ``logd4`` compression, PRoPE projections, SANA-WM's Plücker
raymaps. Tests use them to check the adapters' files against what upstream will derive from them, and diffusers'
SANA-WM camera code against the streaming release.

Input everywhere: canonical poses, OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward), world =
camera frame of frame 0, positive yaw turns right, positive pitch turns up (:mod:`trajectories.conventions`).
"""

from __future__ import annotations

import numpy as np

from trajectories.conventions import pixel_rays, w2c_from_c2w
from trajectories.resample import latent_anchor_frames

# -- anchors and windows ------------------------------------------------------------------------------------------


def anchors_sana_raymap(num_latents: int) -> np.ndarray:
    """SANA-WM raymap: latent i <-> frame 8i (NVlabs/Sana inference_sana_wm.py ``_pack_camera_conditions``)."""
    return latent_anchor_frames(num_latents, stride=8)


def sana_chunk_windows(num_latents: int, num_frames: int) -> np.ndarray:
    """SANA-WM chunk Plücker windows: latent i covers frames ``s..s+7`` with ``s = max(0, 8i - 7)``; the tail is
    padded with the last frame. Returns (L, 8) int64 frame indices."""
    s = np.maximum(0, 8 * np.arange(num_latents) - 7)
    return np.minimum(s[:, None] + np.arange(8)[None], num_frames - 1).astype(np.int64)


def anchors_mg3(num_frames: int, first_clip: int = 57, clip: int = 56, new_per_clip: int = 40) -> list[np.ndarray]:
    """Matrix-Game 3 latent pose targets per clip (SkyworkAI/Matrix-Game Matrix-Game-3/pipeline/inference_pipeline.py).

    First clip: ``linspace(0, 56, 15)`` = frames 4i. Later clip ending at ``end`` (window ``[end-56, end)``):
    ``linspace(start + 3, end - 1, 14)``, the last frame of each 4-frame group. Returns one int array per clip.
    """
    clips = [np.linspace(0, first_clip - 1, (first_clip - 1) // 4 + 1).round().astype(np.int64)]
    end = first_clip
    while end + new_per_clip <= num_frames:
        end += new_per_clip
        start = end - clip
        clips.append(np.linspace(start + 3, end - 1, clip // 4).round().astype(np.int64))
    return clips


def mg35_block_frames(block: int) -> np.ndarray:
    """Matrix-Game 3.5: block k consumes poses ``[1 + 84k, 84(k+1)]`` inclusive (21 latents x 4 frames).

    Riemann-Dynamics/Matrix-Game-3.5@fa6d2b6 diffsynth/core/data/unified_dataset.py (``read_camera_params``).
    """
    return np.arange(1 + 84 * block, 84 * (block + 1) + 1, dtype=np.int64)


def evoke_windows(num_chunks: int) -> list[np.ndarray]:
    """Evoke camera windows: chunk k covers frames ``[36k, 36k + 33)``; its 9 latents sit at ``36k + 4i``.

    AlayaLab/Evoke@74d2685 evoke/modules/camera_control.py. Returns the latent anchor frames per window.
    """
    return [36 * k + 4 * np.arange(9, dtype=np.int64) for k in range(num_chunks)]


def dreamx_chunk_relative(latent_c2w: np.ndarray, chunk: int = 3) -> np.ndarray:
    """DreamX ``--chunk_relative``: latents in chunks of 3, each chunk relative to the previous chunk's last
    latent (chunk 0 relative to latent 0). No translation normalisation. (L,4,4) -> (L,4,4) c2w."""
    out = np.empty_like(np.asarray(latent_c2w, dtype=np.float64))
    for start in range(0, len(latent_c2w), chunk):
        ref = latent_c2w[0] if start == 0 else latent_c2w[start - 1]
        inv = w2c_from_c2w(ref)
        out[start : start + chunk] = inv[None] @ latent_c2w[start : start + chunk]
    return out


def dreamx_integrate(rel: np.ndarray, chunk: int = 3) -> np.ndarray:
    """Inverse of :func:`dreamx_chunk_relative` (exact up to float rounding)."""
    out = np.empty_like(rel)
    ref = np.eye(4)
    for start in range(0, len(rel), chunk):
        if start > 0:
            ref = out[start - 1]
        out[start : start + chunk] = ref[None] @ rel[start : start + chunk]
    return out


def logd4_translation(t: np.ndarray) -> np.ndarray:
    """MG-3.5 ``trans_scale='logd4'`` on translations (...,3): ``t -> t * log1p(‖t‖) / ‖t‖ / 4``; 0 stays 0.

    Riemann-Dynamics/Matrix-Game-3.5@fa6d2b6 diffsynth/pipelines/wan_video.py (WanVideoUnit_PropeCamera). The
    direction is kept and the norm becomes ``ln(1 + ‖t‖) / 4``; at ‖t‖ = 0 the limit is 0.
    """
    t = np.asarray(t, dtype=np.float64)
    n = np.linalg.norm(t, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(n > 0, np.log1p(n) / np.where(n > 0, n, 1.0) / 4.0, 0.0)
    return t * f


# -- PRoPE ---------------------------------------------------------------------------------------------------


#: HY-WorldPlay's default K for 1920x1080 (the same focal length DreamX's fixed normalised K is derived from).
HY_DEFAULT_K = np.array([[969.697, 0.0, 960.0], [0.0, 969.697, 540.0], [0.0, 0.0, 1.0]])


def zero_principal_point(K_norm: np.ndarray) -> np.ndarray:
    """PRoPE zeroes the principal point of the normalised K (``Ks_norm[..., 0, 2] = 0``, hyvideo/prope/camera_rope.py)."""
    out = np.array(K_norm, dtype=np.float64, copy=True)
    out[..., 0, 2] = 0.0
    out[..., 1, 2] = 0.0
    return out


def lift(K3: np.ndarray) -> np.ndarray:
    """Embed (..., 3, 3) intrinsics into (..., 4, 4) homogeneous matrices [inferred: the homogeneous embedding PRoPE needs]."""
    K3 = np.asarray(K3, dtype=np.float64)
    out = np.zeros(K3.shape[:-2] + (4, 4))
    out[..., :3, :3] = K3
    out[..., 3, 3] = 1.0
    return out


def prope_projections(c2w: np.ndarray, K_norm: np.ndarray) -> np.ndarray:
    """``P = lift(K̃ with zeroed principal point) · w2c`` per camera. c2w (N,4,4), K_norm (3,3) or (N,3,3)."""
    viewmats = w2c_from_c2w(np.asarray(c2w, dtype=np.float64))
    Kz = zero_principal_point(np.broadcast_to(K_norm, viewmats.shape[:-2] + (3, 3)))
    return lift(Kz) @ viewmats


def per_token(mats: np.ndarray, tokens_per_latent: int) -> np.ndarray:
    """Repeat per-latent matrices so every token carries its latent's camera: (T,...) -> (T*tokens, ...)."""
    return np.repeat(np.asarray(mats), tokens_per_latent, axis=0)


# -- ray maps ------------------------------------------------------------------------------------------------


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
