"""Relative-pose rules and anchor interpolation used by the adapters, as pure numpy functions.

Input everywhere: canonical poses, OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward),
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up (see
:mod:`trajectories.conventions`). Each function cites the upstream repository, commit and file the rule is taken
from; launch-level facts live in ``adapters/<model>/contract.yaml``. Latent-anchor rules live in
:mod:`trajectories.resample`; re-implementations of upstream encodings that no adapter calls (used by tests as
independent references) live in ``tests/support/upstream_reference.py``.
"""

from __future__ import annotations

import numpy as np

from adapters.memo import memo
from trajectories.conventions import framewise_from_relative, relative_to_first, se3

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


@memo
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
