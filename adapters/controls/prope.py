"""PRoPE intrinsics shared by HY-WorldPlay and DreamX-World: the field of view of a K normalised by the image size.

Upstream builds per camera ``P = lift(K̃) · w2c`` (Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/prope/camera_rope.py;
AMAP-ML/DreamX-World@a1f4c6e inference_ar_forcing.py::cam_params_to_prope_dict); the full projection is
re-implemented as a test reference in ``tests/support/upstream_reference.py``. Each model's own K lives in its
folder: ``adapters.dreamx.controls.DREAMX_FIXED_K_NORM``, ``adapters.hy_worldplay.controls.HY_DEFAULT_K`` and
``hy_normalise_K``.
"""

from __future__ import annotations

import numpy as np


def fov_of_normalised(fx_norm: float, fy_norm: float) -> tuple[float, float]:
    """(horizontal, vertical) field of view in degrees of a K normalised by the image size."""
    return float(np.degrees(2 * np.arctan(0.5 / fx_norm))), float(np.degrees(2 * np.arctan(0.5 / fy_norm)))
