"""Latent anchoring and relative-pose rules of the nine models, as pure numpy functions.

Input everywhere: canonical poses, OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward),
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up (see
:mod:`trajectories.conventions`). Each function cites the upstream repository, commit and file the rule is taken
from; launch-level facts live in ``adapters/contracts/<model>.yaml``.
"""

from __future__ import annotations

import numpy as np

from trajectories.conventions import framewise_from_relative, relative_to_first, se3, w2c_from_c2w

# --------------------------------------------------------------------------------------------------------------
# Anchors: which pixel frame's pose a latent carries
# --------------------------------------------------------------------------------------------------------------


def anchors_sana_raymap(num_latents: int) -> np.ndarray:
    """SANA-WM raymap: latent i <-> frame 8i (NVlabs/Sana inference_sana_wm.py ``_pack_camera_conditions``)."""
    return 8 * np.arange(num_latents, dtype=np.int64)


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


# --------------------------------------------------------------------------------------------------------------
# Relative-pose rules
# --------------------------------------------------------------------------------------------------------------


def max_norm_translation(poses: np.ndarray) -> tuple[np.ndarray, float]:
    """Divide every translation by ``max ‖t_i‖`` (only when > 0). Returns (poses, the divisor, 1.0 when none).

    LingBot/Evoke/MG-3 ``compute_relative_poses(..., normalize_trans=True)``: the scale is per clip and arbitrary.
    """
    out = np.array(poses, dtype=np.float64, copy=True)
    m = float(np.linalg.norm(out[:, :3, 3], axis=1).max()) if len(out) else 0.0
    if m > 0:
        out[:, :3, 3] /= m
        return out, m
    return out, 1.0


def lingbot_relative(c2w: np.ndarray, framewise: bool = True, normalize_trans: bool = True) -> np.ndarray:
    """LingBot ``compute_relative_poses``: relative to pose 0, then framewise, then translation max-norm.

    (L,4,4) OpenCV c2w -> (L,4,4). robbyant/lingbot-world-v2@2648877 wan/utils/cam_utils.py.
    """
    rel = relative_to_first(c2w)
    if framewise:
        rel = framewise_from_relative(rel)
    if normalize_trans:
        rel, _ = max_norm_translation(rel)
    return rel


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


def integrate_framewise(framewise: np.ndarray, translation_scale: float = 1.0) -> np.ndarray:
    """Chain framewise motions back into poses relative to the first (``P_0 = I``, ``P_i = P_{i-1} f_i``),
    multiplying translations by ``translation_scale`` first (undoes a known max-norm)."""
    f = np.array(framewise, dtype=np.float64, copy=True)
    f[:, :3, 3] *= translation_scale
    out = np.empty_like(f)
    out[0] = np.eye(4)
    for i in range(1, len(f)):
        out[i] = out[i - 1] @ f[i]
    return out


def interpolate_to_frames(anchor_frames: np.ndarray, anchor_c2w: np.ndarray, num_frames: int) -> np.ndarray:
    """Per-frame poses from poses at (sorted, integer) anchor frames: SLERP/linear between anchors, held at ends."""
    from trajectories.conventions import slerp_rotations

    anchor_frames = np.asarray(anchor_frames)
    out = np.empty((num_frames, 4, 4))
    for i in range(num_frames):
        j = int(np.searchsorted(anchor_frames, i, side="right") - 1)
        if j < 0:
            out[i] = anchor_c2w[0]
            continue
        if j >= len(anchor_frames) - 1 or anchor_frames[j] == i:
            out[i] = anchor_c2w[min(j, len(anchor_frames) - 1)]
            continue
        a, b = anchor_frames[j], anchor_frames[j + 1]
        alpha = (i - a) / (b - a)
        R = slerp_rotations(anchor_c2w[j, :3, :3], anchor_c2w[j + 1, :3, :3], np.array([alpha]))[0]
        t = (1 - alpha) * anchor_c2w[j, :3, 3] + alpha * anchor_c2w[j + 1, :3, 3]
        out[i] = se3(R, t)
    return out
