"""DreamX-World's controls: the fixed normalised K of its PRoPE cameras (the poses are CameraCtrl rows, ``adapter.py``).

Upstream builds per camera ``P = lift(K̃) · w2c`` (AMAP-ML/DreamX-World@a1f4c6e
inference_ar_forcing.py::cam_params_to_prope_dict) with a K of its own, whatever the rows say.
"""

from __future__ import annotations

import numpy as np

#: DreamX's fixed normalised K (AMAP-ML/DreamX-World@a1f4c6e inference_ar_forcing.py:121-122:
#: 969.697 / (960 * 2), 969.697 / (540 * 2), principal point 0.5, 0.5).
DREAMX_FIXED_K_NORM = np.array([969.697 / 1920, 969.697 / 1080, 0.5, 0.5])
