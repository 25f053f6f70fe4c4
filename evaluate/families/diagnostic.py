"""Diagnostics of this harness (not paper metrics): pixel PSNR / SSIM of each return frame against frame 0, and the
cross-departure consistency (feature similarity of frames at matching prescribed poses in the first two departures,
which tests memory of content first seen during a departure rather than at the start)."""

from __future__ import annotations

import numpy as np

from ..protocol import matched_departure_pairs
from . import Entries, Family, Metric, entry
from .environment import _returns


def _pixels(ctx, perc, ecfg) -> dict:
    if "revisit_pixels" not in ctx.memo:
        from skimage.metrics import structural_similarity

        from harness.imaging import psnr

        r = _returns(ctx, perc, ecfg)
        f0 = ctx.frames_at([0])[0]
        rf = ctx.frames_at(r["frames"])
        ctx.memo["revisit_pixels"] = (r, [min(psnr(f0, x), 100.0) for x in rf],
                                      [float(structural_similarity(f0, x, channel_axis=2, data_range=255)) for x in rf])
    return ctx.memo["revisit_pixels"]


def revisit_psnr(ctx, perc, ecfg, bb) -> Entries:
    r, ps, _ = _pixels(ctx, perc, ecfg)
    return entry("diagnostic.revisit_psnr", "pixels", "diagnostic", float(np.mean(ps)), per_revisit=ps,
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"])


def revisit_ssim(ctx, perc, ecfg, bb) -> Entries:
    r, _, ss = _pixels(ctx, perc, ecfg)
    return entry("diagnostic.revisit_ssim", "pixels", "diagnostic", float(np.mean(ss)), per_revisit=ss,
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"])


def _pairs(ctx, ecfg):
    return matched_departure_pairs(ctx.c2w, ctx.phases, ecfg.memory_stride)


def cross_departure(ctx, perc, ecfg, bb) -> Entries:
    pairs = _pairs(ctx, ecfg)
    name = bb["encoder"]
    feats = perc.encode(name, [a for a, _ in pairs] + [b for _, b in pairs])
    fa, fb = feats[: len(pairs)], feats[len(pairs):]
    sims = np.clip(np.sum(fa * fb, axis=1) / np.maximum(
        np.linalg.norm(fa, axis=1) * np.linalg.norm(fb, axis=1), 1e-12), 0, 1)
    return entry("diagnostic.cross_departure", perc.label(name, "encoder"), perc.kind(name), float(sims.mean()),
                 pairs=pairs)


FAMILY = Family(
    "diagnostic",
    ("encoders", "return_frame_poses", "pose_estimators", "memory_stride"),
    (Metric("diagnostic.revisit_psnr", (), revisit_psnr, lambda ctx, ecfg: ctx.num_revisits > 0),
     Metric("diagnostic.revisit_ssim", (), revisit_ssim, lambda ctx, ecfg: ctx.num_revisits > 0),
     Metric("diagnostic.cross_departure", ("encoder",), cross_departure, lambda ctx, ecfg: bool(_pairs(ctx, ecfg)))),
)
