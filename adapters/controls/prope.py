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


