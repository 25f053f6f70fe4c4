"""Camera conventions, trajectory builders, phases, latent-rate resampling and (de)serialisation.

Conventions: OpenCV camera-to-world 4x4 float64 (+x right, +y down, +z forward), world = camera frame of frame 0,
positive yaw turns the view right, positive pitch turns it up. See :mod:`trajectories.conventions`.
"""

from .builders import Timing, TrajectorySpec, build_path
from .path import CameraPath, Segment, TrajectoryError, load_path
from .resample import (
    first_of_group_anchors,
    latent_anchor_frames,
    latent_poses,
    latents_for_frames,
    resample_c2w,
)

__all__ = [
    "CameraPath",
    "Segment",
    "Timing",
    "TrajectoryError",
    "TrajectorySpec",
    "build_path",
    "first_of_group_anchors",
    "latent_anchor_frames",
    "latent_poses",
    "latents_for_frames",
    "load_path",
    "resample_c2w",
]
