"""PRoPE inputs (HY-WorldPlay, DreamX-World, Matrix-Game 3.5): w2c view matrices and normalised intrinsics.

Poses in: OpenCV camera-to-world 4x4 (+x right / +y down / +z forward, world = camera frame of frame 0).
Per camera ``P = lift(K̃) · w2c`` where ``K̃`` has focal lengths normalised by the image size and its principal
point set to 0, and ``lift`` embeds the 3x3 in a 4x4 homogeneous matrix (Tencent-Hunyuan/HY-WorldPlay@da2d0c2
hyvideo/prope/camera_rope.py; AMAP-ML/DreamX-World@a1f4c6e inference_ar_forcing.py::cam_params_to_prope_dict).
"""

from __future__ import annotations

import numpy as np

from trajectories.conventions import w2c_from_c2w

#: HY-WorldPlay's default K for 1920x1080 and DreamX's fixed normalised K (AMAP-ML/DreamX-World@a1f4c6e
#: inference_ar_forcing.py:121-122: 969.697 / (960 * 2), 969.697 / (540 * 2), principal point 0.5, 0.5).
HY_DEFAULT_K = np.array([[969.697, 0.0, 960.0], [0.0, 969.697, 540.0], [0.0, 0.0, 1.0]])
DREAMX_FIXED_K_NORM = np.array([969.697 / 1920, 969.697 / 1080, 0.5, 0.5])


def hy_normalise_K(K: np.ndarray) -> np.ndarray:
    """HY-WorldPlay: ``fx / (2 cx)``, ``fy / (2 cy)``, ``cx = cy = 0.5`` (equals fx/W, fy/H for a centred K).

    Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/generate.py. Returns (3, 3).
    """
    K = np.asarray(K, dtype=np.float64)
    out = np.eye(3)
    out[0, 0] = K[0, 0] / (2 * K[0, 2])
    out[1, 1] = K[1, 1] / (2 * K[1, 2])
    out[0, 2] = out[1, 2] = 0.5
    return out


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


def mg35_prope_inputs(c2w_frames: np.ndarray, K_pixels: np.ndarray, H: int = 704, W: int = 1280,
                      trans_scale: str = "logd4") -> dict[str, np.ndarray]:
    """Matrix-Game 3.5 PRoPE inputs for a block: four sub-frame cameras per latent.

    Args:
        c2w_frames: (4*T, 4, 4) per-frame poses of the block's latents (4 per latent).
        K_pixels: (3, 3) intrinsics at ``H`` x ``W`` (principal point assumed centred, as upstream assumes).
    Returns:
        ``viewmats`` (T, 4, 4, 4) w2c after ``logd4`` translation compression, ``ks_norm`` (4,)
        ``[fx/W, fy/H, 0, 0]`` and ``P`` (T, 4, 4, 4). Riemann-Dynamics/Matrix-Game-3.5@fa6d2b6
        diffsynth/pipelines/wan_video.py, diffsynth/models/prope_attention.py.
    """
    from .poses import logd4_translation

    c2w_frames = np.asarray(c2w_frames, dtype=np.float64)
    if len(c2w_frames) % 4:
        raise ValueError("MG-3.5 needs four poses per latent")
    w2c = w2c_from_c2w(c2w_frames)
    if trans_scale == "logd4":
        w2c[:, :3, 3] = logd4_translation(w2c[:, :3, 3])
    K = np.asarray(K_pixels, dtype=np.float64)
    ks = np.array([K[0, 0] / W, K[1, 1] / H, K[0, 2] / W - 0.5, K[1, 2] / H - 0.5])
    Kn = np.array([[ks[0], 0, 0], [0, ks[1], 0], [0, 0, 1.0]])
    P = lift(Kn)[None] @ w2c
    T = len(c2w_frames) // 4
    return {"viewmats": w2c.reshape(T, 4, 4, 4), "ks_norm": ks, "P": P.reshape(T, 4, 4, 4)}
