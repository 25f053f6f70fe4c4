"""The reference scene: the world-fixed box room the built-in reference model renders.

It sits below both of its users: the reference model (``adapters.reference.model``) renders its walls, and the
evaluation's oracle (``evaluate.perception.weightfree.OracleDepth``) reads its exact depth to judge depth
estimators. Geometry only (numpy); conventions as in :mod:`trajectories.conventions` (OpenCV camera-to-world,
+x right, +y down, +z forward, world = camera frame of frame 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Room:
    """Axis-aligned box around the world origin, in scene units: x in [-x, x], y in [-up, down] (+y is down),
    z in [-back, front]. The start camera sits at the origin looking along +z."""

    x: float = 4.0
    up: float = 2.0
    down: float = 1.0
    front: float = 4.0
    back: float = 4.0

    def lo_hi(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([-self.x, -self.up, -self.back]), np.array([self.x, self.down, self.front])

    def hit(self, origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
        """Distance along unit ``dirs`` (..., 3) from ``origin`` (inside the box) to the box wall."""
        lo, hi = self.lo_hi()
        # One division per axis toward the wall the ray heads for (same values as dividing both walls);
        # axis-parallel rays never reach that axis's walls.
        num = np.where(dirs > 0, hi - origin, lo - origin)
        t = np.divide(num, dirs, out=np.full(num.shape, np.inf), where=dirs != 0)
        dist: np.ndarray = np.minimum(np.minimum(t[..., 0], t[..., 1]), t[..., 2])
        return dist

    def depth_map(self, c2w: np.ndarray, K: np.ndarray, height: int, width: int) -> np.ndarray:
        """Oracle z-depth (H, W) float32 of the room seen from ``c2w`` (used by evaluation on this model)."""
        from trajectories.conventions import pixel_rays

        d_cam = pixel_rays(K, height, width)
        dist = self.hit(c2w[:3, 3], d_cam @ c2w[:3, :3].T)
        return (dist * d_cam[..., 2]).astype(np.float32)
