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


# -- interfaces added with the backbone registry (evaluate/backbones.py) -------------------------------------------


class FaceEmbedder(Protocol):
    name: str

    def embed(self, frames: np.ndarray, masks: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
        """(features (N, D), valid (N,) bool): the face inside each frame (inside ``masks[i]`` when given, e.g. the
        tracked person); ``valid`` is False where no face is found (that frame is not an observation)."""


class QualityScorer(Protocol):
    name: str

    def score(self, frames: np.ndarray) -> np.ndarray:
        """(N,) per-frame quality normalised to [0, 1] (MUSIQ-SPAQ / 100, LAION aesthetic / 10)."""


class Judge(Protocol):
    name: str

    def judge(self, frames: np.ndarray, indices: list[int], case: Any) -> dict[str, Any]:
        """``{"started": bool, "answers": [8 x "yes"|"no"], ...}`` for a dynamic case from its sampled frames."""


class LearnedBackbone(Protocol):
    """The weights contract of a learned backbone (see evaluate/backbones.py and evaluate/weights.py)."""

    name: str
    kind: str
    hf_repo: Optional[str]
    revision: Optional[str]
    files: tuple[str, ...]
    library: str
    recipe: str

    @classmethod
    def load(cls, weights_dir: Any, device: str) -> Any:
        """Load from ``<weights_root>/<name>/``; ``FileNotFoundError`` naming a missing file, ``ValueError`` naming a
        corrupt one."""
