"""Achieved-vs-requested trajectory residuals (for lossy native control formats)."""

from __future__ import annotations

import numpy as np

from trajectories.conventions import geodesic_angle


def pose_residual(requested_c2w: np.ndarray, achieved_c2w: np.ndarray) -> dict[str, float]:
    """Per-frame differences between two (T,4,4) OpenCV c2w paths of equal length (world = frame 0).

    Returns max/mean rotation error in degrees (geodesic) and max/mean translation error in scene units.
    """
    a, b = np.asarray(requested_c2w, np.float64), np.asarray(achieved_c2w, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paths differ in shape: {a.shape} vs {b.shape}")
    rot = np.rad2deg(geodesic_angle(a[:, :3, :3], b[:, :3, :3]))
    tr = np.linalg.norm(a[:, :3, 3] - b[:, :3, 3], axis=1)
    return {
        "max_rotation_error_deg": float(rot.max()),
        "mean_rotation_error_deg": float(rot.mean()),
        "max_translation_error": float(tr.max()),
        "mean_translation_error": float(tr.mean()),
    }
