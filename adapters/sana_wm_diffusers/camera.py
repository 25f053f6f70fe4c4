"""The adapter boundary between the harness camera and diffusers' ``SanaWMPipeline`` camera inputs.

Harness poses follow :mod:`trajectories.conventions` (OpenCV camera-to-world 4x4 float64, +x right / +y down /
+z forward, world = camera frame of frame 0, K in canvas pixels with +0.5 pixel centres). The pipeline takes
``c2w`` (F, 4, 4) OpenCV camera-to-world poses (it re-expresses them relative to frame 0 itself) and
``intrinsics`` ``[fx, fy, cx, cy]`` in pixels of the image it is given
(huggingface/diffusers@v0.42.1 src/diffusers/pipelines/sana_wm/cam_utils.py ``prepare_camera``). Both sides use
OpenCV axes, so no axis flip is needed; the only conversions are the translation scale and the K layout. Its ray
grid samples integer pixel coordinates (``u = 0..W-1``), which is the same grid the SANA compile uses
(``tests/support/upstream_reference.py::plucker_sana``, ``pixel_rays(..., offset=0.0)``).
"""

from __future__ import annotations

import numpy as np

from trajectories.conventions import relative_to_first


def pipeline_c2w(c2w: np.ndarray, units_per_scene_unit: float = 1.0) -> np.ndarray:
    """(F, 4, 4) harness c2w -> (F, 4, 4) float32 c2w for ``SanaWMPipeline`` (relative to frame 0, translation in
    model units = scene units x ``units_per_scene_unit``)."""
    rel = relative_to_first(np.asarray(c2w, dtype=np.float64))
    rel[:, :3, 3] *= float(units_per_scene_unit)
    return rel.astype(np.float32)


def pipeline_intrinsics(K: np.ndarray) -> np.ndarray:
    """3x3 pixel K -> ``[fx, fy, cx, cy]`` float32 (the layout ``SanaWMPipeline`` takes)."""
    K = np.asarray(K, dtype=np.float64)
    return np.array([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], dtype=np.float32)
