"""Ground truth of the built-in reference model as a registered backbone of kind ``oracle``.

The reference model follows its camera path exactly and renders a known room, so its poses and depth are known
without looking at the video. They judge estimators (the validity section of the report) and may be chosen
explicitly as a return-frame pose source; they never score a video.
"""

from __future__ import annotations

from typing import Any

from .weightfree import OracleDepth, OraclePoses


class ReferenceOracle:
    """Unbound oracle; :meth:`bind` gives the poses and depth of one item (which must have ground truth)."""

    name = "oracle"
    kind = "oracle"

    def bind(self, ctx: Any) -> "BoundOracle":
        if ctx.oracle is None:
            raise ValueError("this item has no ground truth (only the built-in reference model records one)")
        return BoundOracle(ctx)


class BoundOracle:
    """``estimate``: the prescribed path at the requested frames. ``depth``: exact z-depth of the room there."""

    name = "oracle"

    def __init__(self, ctx: Any):
        self._poses = OraclePoses(ctx.oracle.c2w)
        self._depth = OracleDepth(ctx.oracle.room, ctx.oracle.c2w, ctx.intrinsics, ctx.height, ctx.width)

    def estimate(self, frames, indices, K, mode):
        return self._poses.estimate(frames, indices, K, mode)

    def depth(self, frames, indices):
        return self._depth.depth(frames, indices)
