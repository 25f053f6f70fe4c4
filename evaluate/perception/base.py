"""Perception interfaces. Frames are (N, H, W, 3) uint8 RGB; masks (N, H, W) bool; K (3, 3) pixels (+0.5 centres);
poses OpenCV camera-to-world 4x4 (world = camera frame of frame 0)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import numpy as np


class BackboneUnavailable(RuntimeError):
    """A backbone cannot be used here; the message says why and how to enable it."""


class FeatureEncoder(Protocol):
    name: str
    kind: str  # "paper" for the paper's backbone, "diagnostic" for weight-free stand-ins

    def encode(self, frames: np.ndarray, masks: Optional[np.ndarray] = None) -> np.ndarray:
        """(N, D) features of whole frames, or of the masked regions when ``masks`` is given."""


class DepthEstimator(Protocol):
    name: str

    def depth(self, frames: np.ndarray, indices: list[int]) -> np.ndarray:
        """(N, H, W) z-depth (any monotone scale) of the frames at ``indices``."""


@dataclass
class PoseEstimate:
    c2w: np.ndarray  # (N, 4, 4) OpenCV c2w at the sampled frames, first = identity
    valid: np.ndarray  # (N,) bool: the step into this frame succeeded
    info: dict[str, Any] = field(default_factory=dict)


class PoseEstimator(Protocol):
    name: str

    def estimate(self, frames: np.ndarray, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        """Poses of the sampled frames; ``mode`` is ``rotation`` or ``general`` (from the trajectory kind)."""


class Tracker(Protocol):
    name: str

    def track(self, frames: np.ndarray, init_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(masks (N, H, W) bool, valid (N,) bool) of the target given its mask in frames[0]."""
