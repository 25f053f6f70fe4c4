"""PRoPE intrinsics of HY-WorldPlay and DreamX-World: the normalised K the adapters record or fix.

Upstream builds per camera ``P = lift(K̃) · w2c`` (Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/prope/camera_rope.py;
AMAP-ML/DreamX-World@a1f4c6e inference_ar_forcing.py::cam_params_to_prope_dict); the full projection is
re-implemented as a test reference in ``tests/support/upstream_reference.py``.
"""

from __future__ import annotations

import numpy as np

#: DreamX's fixed normalised K (AMAP-ML/DreamX-World@a1f4c6e inference_ar_forcing.py:121-122:
#: 969.697 / (960 * 2), 969.697 / (540 * 2), principal point 0.5, 0.5).
DREAMX_FIXED_K_NORM = np.array([969.697 / 1920, 969.697 / 1080, 0.5, 0.5])

#: HY-WorldPlay's own default K, used where it builds poses itself (Tencent-Hunyuan/HY-WorldPlay@da2d0c2
#: hyvideo/generate.py:160-164, pixels of 1920x1080); the harness writes it into every latent of the pose JSON, as
#: the paper's "fixed camera intrinsics" (appendix C). Normalised it is DreamX's K: 0.505 / 0.898.
HY_DEFAULT_K = np.array([[969.6969696969696, 0.0, 960.0], [0.0, 969.6969696969696, 540.0], [0.0, 0.0, 1.0]])


def fov_of_normalised(fx_norm: float, fy_norm: float) -> tuple[float, float]:
    """(horizontal, vertical) field of view in degrees of a K normalised by the image size."""
    return float(np.degrees(2 * np.arctan(0.5 / fx_norm))), float(np.degrees(2 * np.arctan(0.5 / fy_norm)))


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


