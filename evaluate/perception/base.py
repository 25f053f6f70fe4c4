"""Perception interfaces. Frames are (N, H, W, 3) uint8 RGB; masks (N, H, W) bool; K (3, 3) pixels (+0.5 centres);
poses OpenCV camera-to-world 4x4 (world = camera frame of frame 0)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol, Sequence

import numpy as np

if TYPE_CHECKING:
    from harness.cases import Case


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


# -- learned backbones (added with the paper's perception stack) ---------------------------------------------------


@dataclass
class FaceEmbedding:
    """Face embeddings of one target over frames.

    ``embeddings``: (N, D) float32, L2-normalised where ``valid`` (zeros elsewhere); ``valid``: (N,) bool, a face was
    detected inside the target's mask; ``boxes``: (N, 4) float32 face boxes ``x0, y0, x1, y1`` in pixels (NaN where
    invalid); ``info``: detector / alignment labels and per-frame detector scores."""

    embeddings: np.ndarray
    valid: np.ndarray
    boxes: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


def select_target_face(det: np.ndarray, mask: np.ndarray) -> int:
    """The face role's selection rule, shared by every face embedder: the index of the highest-scoring detection of
    ``det`` ((M, >= 5) float: ``x0, y0, x1, y1, score`` in pixels) whose box centre (clipped to the frame) lies inside
    the target's ``mask`` ((H, W) bool); -1 when none does (a face outside the target is not its observation)."""
    H, W = mask.shape
    for j in np.argsort(-det[:, 4]) if len(det) else []:
        cx = int(np.clip((det[j, 0] + det[j, 2]) / 2, 0, W - 1))
        cy = int(np.clip((det[j, 1] + det[j, 3]) / 2, 0, H - 1))
        if mask[cy, cx]:
            return int(j)
    return -1


class FaceEmbedder(Protocol):
    name: str
    kind: str

    def embed(self, frames: np.ndarray, masks: np.ndarray) -> FaceEmbedding:
        """Embed the face of the target whose (N, H, W) bool ``masks`` are given in (N, H, W, 3) uint8 RGB frames."""


class QualityScorer(Protocol):
    name: str
    kind: str

    def score(self, frames: np.ndarray) -> np.ndarray:
        """(N,) float64 per-frame quality in [0, 1] (the paper's normalisation) of (N, H, W, 3) uint8 RGB frames."""


class RedetectingTracker(Tracker, Protocol):
    """A tracker that can re-acquire a lost target at given frames (the paper re-detects at revisits)."""

    def track(self, frames: np.ndarray, init_mask: np.ndarray,
              redetect_at: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`Tracker.track`; where the track is lost at a position in ``redetect_at`` (indices into
        ``frames``), re-prompt from the frame-0 prompt and keep the result only if the model sees the object."""


class PaperBackbone(Protocol):
    """Contract of every learned backbone class (``evaluate/perception/<module>.py``).

    Class attributes: ``name`` (the registry / weights-folder name), ``kind = "paper"``, ``hf_repo`` and
    ``revision`` (the pinned upstream source, or None where it is not on the Hugging Face Hub), ``files`` (required
    files relative to ``<weights_root>/<name>/``), ``library`` (the package that runs it) and ``recipe`` (one line).
    ``load(weights_dir, device)`` raises FileNotFoundError (missing file) or ValueError (corrupt / wrong shape),
    naming the backbone and the file. Optional: ``known_sha256`` ({file: digest} published upstream),
    ``source_url(s)`` (where a file comes from when not from ``hf_repo``). Instances have ``settings()``: the recipe
    values that change their outputs (for the caller's cache key and ``metrics.json``)."""

    name: str
    kind: str
    hf_repo: Optional[str]
    revision: Optional[str]
    files: tuple[str, ...]
    library: str
    recipe: str


class Judge(Protocol):
    name: str

    def judge(self, frames: np.ndarray, indices: list[int], case: Case) -> dict[str, Any]:
        """``{"started": bool, "answers": [8 x "yes"|"no"], ...}`` for a dynamic case from its sampled frames."""
