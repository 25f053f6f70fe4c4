"""Ground truth of the built-in reference model as a registered backbone of kind ``oracle``.

The reference model follows its camera path exactly and renders a known room, so its poses and depth are known
without looking at the video. They judge estimators (the validity section of the report) and may be chosen
explicitly as a return-frame pose source; they never score a video.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import PoseEstimate
from .weightfree import OracleDepth, OraclePoses

if TYPE_CHECKING:
    from ..item import EvalItem, OracleGeometry


class ReferenceOracle:
    """Unbound oracle; :meth:`bind` gives the poses and depth of one item (which must have ground truth)."""

    name = "oracle"
    kind = "oracle"

    def bind(self, ctx: EvalItem) -> "BoundOracle":
        if ctx.oracle is None:
            raise ValueError("this item has no ground truth (only the built-in reference model records one)")
        return BoundOracle(ctx.oracle, ctx.intrinsics, ctx.height, ctx.width)


class BoundOracle:
    """``estimate``: the prescribed path at the requested frames. ``depth``: exact z-depth of the room there."""

    name = "oracle"

    def __init__(self, oracle: OracleGeometry, K: np.ndarray, height: int, width: int):
        self._poses = OraclePoses(oracle.c2w)
        self._depth = OracleDepth(oracle.room, oracle.c2w, K, height, width)

    def estimate(self, frames: np.ndarray, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        return self._poses.estimate(frames, indices, K, mode)

    def depth(self, frames: np.ndarray, indices: list[int]) -> np.ndarray:
        return self._depth.depth(frames, indices)
