"""General video quality (paper section 4.2): Imaging (MUSIQ-SPAQ) and Aesthetic (LAION) quality, each the mean of
per-frame scores (normalised to [0, 1] by the backbone) over every ``quality_stride``-th frame of the video."""

from __future__ import annotations

import numpy as np

from ..protocol import quality_frames
from . import Entries, Family, Metric, entry


def _score(metric: str, role: str):
    def compute(ctx, perc, ecfg, bb) -> Entries:
        frames = quality_frames(ctx.num_frames, int(ecfg.quality_stride))
        s = perc.score(bb[role], role, frames)
        return entry(metric, perc.label(bb[role], role), perc.kind(bb[role]), float(np.mean(s)),
                     frames_scored=len(frames), stride=int(ecfg.quality_stride))
    return compute


FAMILY = Family(
    "quality",
    ("imaging", "aesthetic", "quality_stride"),
    (Metric("quality.imaging", ("imaging",), _score("quality.imaging", "imaging")),
     Metric("quality.aesthetic", ("aesthetic",), _score("quality.aesthetic", "aesthetic"))),
)
