"""HY-WorldPlay's controls: one discrete action label 0..80 per latent, and its PRoPE intrinsics (default K).

Poses in and out: OpenCV camera-to-world 4x4 (+x right / +y down / +z forward), world = camera frame of
frame 0, positive yaw turns right, positive pitch turns up.
"""

from __future__ import annotations

import numpy as np

from adapters.memo import memo
from trajectories.conventions import w2c_from_c2w

#: HY-WorldPlay's own default K, used where it builds poses itself (Tencent-Hunyuan/HY-WorldPlay@da2d0c2
#: hyvideo/generate.py:160-164, pixels of 1920x1080); the harness writes it into every latent of the pose JSON, as
#: the paper's "fixed camera intrinsics" (appendix C). Normalised it is DreamX's K: 0.505 / 0.898.
HY_DEFAULT_K = np.array([[969.6969696969696, 0.0, 960.0], [0.0, 969.6969696969696, 540.0], [0.0, 0.0, 1.0]])


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


# --------------------------------------------------------------------------------------------------------------
# HY-WorldPlay: one discrete label 0..80 per latent (Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/generate.py)
# --------------------------------------------------------------------------------------------------------------

_HY_INDEX = {"0000": 0, "1000": 1, "0100": 2, "0010": 3, "0001": 4, "1010": 5, "1001": 6, "0110": 7, "0101": 8}


def hy_action_label(T_rel: np.ndarray, trans_threshold: float = 1e-4, rot_threshold_deg: float = 0.05) -> int:
    """Label of one latent step ``T_rel = c2w[i-1]^-1 c2w[i]`` (OpenCV): ``trans_index * 9 + rot_index``.

    Translation one-hot [fwd, back, right, left] from the angle of t to +z / +x (< 60 deg / > 120 deg), only when
    ``‖t‖ > trans_threshold`` (1e-4 at inference, 0.01 in the training loader). Rotation one-hot [right, left, up,
    down] from SciPy ``as_euler('xyz', degrees=True)``: y > 0.05 right, y < -0.05 left, x > 0.05 up, x < -0.05 down.
    """
    from scipy.spatial.transform import Rotation

    t = T_rel[:3, 3]
    tb = [0, 0, 0, 0]
    n = float(np.linalg.norm(t))
    if n > trans_threshold:
        u = t / n
        az = np.degrees(np.arccos(np.clip(u[2], -1, 1)))
        ax = np.degrees(np.arccos(np.clip(u[0], -1, 1)))
        tb = [int(az < 60), int(az > 120), int(ax < 60), int(ax > 120)]
    x, y, _ = Rotation.from_matrix(T_rel[:3, :3]).as_euler("xyz", degrees=True)
    rb = [int(y > rot_threshold_deg), int(y < -rot_threshold_deg), int(x > rot_threshold_deg),
          int(x < -rot_threshold_deg)]
    # fwd/back and right/left (up/down) exclude each other, so every one-hot pair is in upstream's table
    return _HY_INDEX["".join(map(str, tb))] * 9 + _HY_INDEX["".join(map(str, rb))]


@memo
def hy_action_labels(latent_c2w: np.ndarray, trans_threshold: float = 1e-4) -> np.ndarray:
    """Labels for every latent (latent 0 -> 0), from consecutive latent poses. (L,) int64."""
    out = np.zeros(len(latent_c2w), dtype=np.int64)
    for i in range(1, len(latent_c2w)):
        out[i] = hy_action_label(w2c_from_c2w(latent_c2w[i - 1]) @ latent_c2w[i], trans_threshold)
    return out
