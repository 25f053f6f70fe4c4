"""General video quality (paper section 4.2): Imaging (MUSIQ-SPAQ) and Aesthetic (LAION) quality, each the mean of
per-frame scores (normalised to [0, 1] by the backbone) over every ``quality_stride``-th frame of the video."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..protocol import quality_frames
from ..registry import Backbones, Compute, ComputeFn, MetricSpec
from ..results import Entries
from .base import Family, entry

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..perceive import ItemPerception


def _score(metric: str, role: str) -> ComputeFn:
    """The compute of ``metric``: the mean of the ``role`` scorer's per-frame scores over the strided frames."""
    def compute(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
        frames = quality_frames(item.num_frames, int(settings.quality_stride))
        s = perception.score(backbones[role], role, frames)
        return entry(metric, perception.label(backbones[role], role), perception.kind(backbones[role]),
                     float(np.mean(s)), frames_scored=len(frames), stride=int(settings.quality_stride))
    return compute


SPECS = (
    MetricSpec("quality.imaging", "quality", True, "quality", True, "MUSIQ-SPAQ / 100, every 4th frame",
               (Compute(_score("quality.imaging", "imaging"), ("imaging",)),), table2="musiq-spaq"),
    MetricSpec("quality.aesthetic", "quality", True, "quality", True, "LAION aesthetic / 10, every 4th frame",
               (Compute(_score("quality.aesthetic", "aesthetic"), ("aesthetic",)),), table2="laion"),
)

FAMILY = Family("quality", ("imaging", "aesthetic", "quality_stride"), SPECS)
