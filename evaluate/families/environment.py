"""Environment memory (paper section 4.4): Visible (global features of the return frame vs frame 0), Depth
(Spearman of depth at corresponding pixels) and Reconstruction (Eq. 6 spherical score).

The return frame of each revisit comes from the first available pose source of ``evaluate.return_frame_poses``
(estimated poses by default, as the paper does with DA3); every entry names its pose and depth source.
"""

from __future__ import annotations

import numpy as np

from .. import memory as mem
from ..perception.base import BackboneUnavailable
from . import Entries, Family, Metric, entry


class NoPoseSource(BackboneUnavailable):
    """No configured return-frame pose source is available (-> "not computed" with the reasons)."""


def _returns(ctx, perc, ecfg) -> dict:
    r = perc.return_frames(tuple(ecfg.return_frame_poses))
    if r["source"] is None:
        why = "; ".join(f"{k}: {v}" for k, v in r["reasons"].items())
        raise NoPoseSource(f"no pose source of return_frame_poses={list(ecfg.return_frame_poses)} is available "
                           f"to select return frames ({why})")
    return r


def _common(r: dict) -> dict:
    return {"return_frames": r["frames"], "return_pose_estimator": r["label"], "pose_source": r["label"],
            "qualification": r["qualification"], "reference_frames": [0]}


def visible(ctx, perc, ecfg, bb) -> Entries:
    r = _returns(ctx, perc, ecfg)
    name = bb["encoder"]
    f = perc.encode(name, [0] + r["frames"])
    per = [float(np.clip(mem.cosine_matrix(f[i + 1 : i + 2], f[:1])[0, 0], 0, 1)) for i in range(ctx.num_revisits)]
    return entry("environment.visible", perc.label(name, "encoder"), perc.kind(name), float(np.mean(per)),
                 per_revisit=per, **_common(r))


def _depths(ctx, perc, ecfg, name, r):
    return perc.depth(name, [0] + r["frames"])


def depth_rank(ctx, perc, ecfg, bb) -> Entries:
    r = _returns(ctx, perc, ecfg)
    label, d = _depths(ctx, perc, ecfg, bb["depth"], r)
    sp = [mem.depth_spearman(d[0], d[i + 1], stride=int(ecfg.depth_stride)) for i in range(ctx.num_revisits)]
    return entry("environment.depth", label, perc.kind(bb["depth"]), float(np.mean(sp)), per_revisit=sp,
                 depth_source=label, **_common(r))


def reconstruction(ctx, perc, ecfg, bb) -> Entries:
    r = _returns(ctx, perc, ecfg)
    label, d = _depths(ctx, perc, ecfg, bb["depth"], r)
    _, pe = perc.poses(r["source"])
    ret = r["frames"]
    Hgrid = mem.spherical_grid(d[0], ctx.intrinsics, pe.c2w[0], ecfg.sphere_bin_deg)
    rec = [mem.spherical_reconstruction_score(
        Hgrid, mem.spherical_grid(d[i + 1], ctx.intrinsics, pe.c2w[ret[i]], ecfg.sphere_bin_deg))
        for i in range(ctx.num_revisits)]
    return entry("environment.reconstruction", label, perc.kind(bb["depth"]), float(np.mean(rec)),
                 per_revisit=rec, depth_source=label, **_common(r))


def _is_env(ctx, ecfg) -> bool:
    return ctx.family == "environment"


FAMILY = Family(
    "environment",
    ("encoders", "depth", "return_frame_poses", "pose_estimators", "memory_stride", "sphere_bin_deg", "depth_stride"),
    (Metric("environment.visible", ("encoder",), visible, _is_env),
     Metric("environment.depth", ("depth",), depth_rank, _is_env),
     Metric("environment.reconstruction", ("depth",), reconstruction, _is_env)),
)
