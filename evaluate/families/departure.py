"""Departure-revisit memory: the ``departure_revisit`` protocol extension (beyond the paper).

The paper's static-memory revisits all return to the conditioning frame. A context policy that keeps a sink (the
first latents, which hold frame 0) therefore passes them whatever else it forgets: on the reference model FullKV,
Sliding and FoV all score about 1. This family scores memory of content first seen *during a departure*: the
reference set is the first departure's away view and each later departure back to that view is a revisit
(:func:`evaluate.protocol.departure_revisit_windows`; LRLR has one, LRLRLR two, LRUD and the square loop none).

Metric ``departure.visible[<encoder>]``: Eq. 4 with global frame features (the features of the paper's Environment
Visible Memory): per revisit, the mean over its frames of ``clip_[0,1](max over reference frames of cos)``, then
Eq. 1 over the K' prescribed departure revisits. Computed from the frames only (no oracle geometry).

Metric ``departure.return_visible[<encoder>]``: the paper's Environment Visible Memory rule with the reference frame
moved from the conditioning frame to the first departure's settled away frame (the last frame of the reference set):
inside each later departure ``D_k`` that comes back to it (the whole phase, sampled every ``memory_stride``), the frame
whose estimated orientation is closest to the reference frame's (first available of ``return_frame_poses``, as the
return frames are picked), then the clipped cosine of global features between the two, averaged over the revisits.

Metric ``departure.sweep_visible[<encoder>]`` (protocol extension ``departure_sweep``,
:func:`evaluate.protocol.departure_sweep_windows`): Eq. 4 with the same global features, the reference set being
every frame of the first departure ``D1`` and each later phase (``R1``, ``D2``, ``R2``, ...) a revisit window of its
frames that look back at D1's views (at least ``departure_deg`` from frame 0), sampled every ``memory_stride``; then
Eq. 1 over those windows. The reference set is not subsampled: Eq. 4's max needs the nearest view.
"""

from __future__ import annotations

import numpy as np

from .. import memory as mem
from ..aggregate import rollout_score
from ..protocol import departure_revisit_windows, departure_sweep_windows
from . import Entries, Family, Metric, entry

#: The name under which the protocol extension is recorded in every entry.
PROTOCOL = "departure_revisit"
#: The extension behind ``departure.sweep_visible``.
SWEEP_PROTOCOL = "departure_sweep"


def subsample(frames: list[int], stride: int) -> list[int]:
    """Every ``stride``-th frame of ``frames`` plus its last one (the settled view)."""
    out = list(frames[:: max(1, int(stride))])
    if frames and frames[-1] not in out:
        out.append(frames[-1])
    return out


def _windows(ctx, ecfg, rule=departure_revisit_windows) -> tuple[list[int], list[list[int]]]:
    """(reference frames, revisit windows) of a protocol-extension ``rule`` on this item, memoised."""
    key = f"departure:{rule.__name__}"
    if key not in ctx.memo:
        ctx.memo[key] = rule(ctx.c2w, ctx.phases, ecfg.revisit_tolerance_deg, ecfg.revisit_tolerance_translation,
                             ecfg.departure_deg)
    return ctx.memo[key]


def _eq4_metric(metric_id: str, target: str, protocol: str, rule, subsample_reference: bool):
    """A metric that scores each revisit window of ``rule`` with Eq. 4 against its reference frames (one batched
    encoder call) and averages them with Eq. 1. Revisits are sampled every ``memory_stride``; the reference too when
    ``subsample_reference``."""

    def compute(ctx, perc, ecfg, bb) -> Entries:
        ref, revisits = _windows(ctx, ecfg, rule)
        ref_idx = subsample(ref, ecfg.memory_stride) if subsample_reference else list(ref)
        rev_idx = [subsample(w, ecfg.memory_stride) for w in revisits]
        name = bb["encoder"]
        feats = perc.encode(name, ref_idx + [f for w in rev_idx for f in w])
        ref_feat, at = feats[: len(ref_idx)], len(ref_idx)
        per = []
        for w in rev_idx:
            per.append(mem.revisit_similarity(ref_feat, feats[at: at + len(w)]))
            at += len(w)
        return entry(metric_id, perc.label(name, "encoder"), perc.kind(name),
                     rollout_score({target: per}, len(per)), per_revisit=per, reference_frames=ref_idx,
                     revisit_frames=rev_idx, protocol=protocol)

    return compute


visible = _eq4_metric("departure.visible", "away_view", PROTOCOL, departure_revisit_windows, True)
sweep_visible = _eq4_metric("departure.sweep_visible", "first_departure", SWEEP_PROTOCOL, departure_sweep_windows,
                            False)


def return_visible(ctx, perc, ecfg, bb) -> Entries:
    from ..protocol import departure_windows, window_frames
    from .environment import NoPoseSource

    ref, revisits = _windows(ctx, ecfg)
    ref_frame = ref[-1]
    deps = departure_windows(ctx.phases)[1:]
    wins = [window_frames(next(d for d in deps if d[0] <= w[0] < d[1]), ecfg.memory_stride) for w in revisits]
    r = perc.frames_closest_to(tuple(ecfg.return_frame_poses), ref_frame, wins)
    if r["source"] is None:
        why = "; ".join(f"{k}: {v}" for k, v in r["reasons"].items())
        raise NoPoseSource(f"no pose source of return_frame_poses={list(ecfg.return_frame_poses)} is available "
                           f"to select the departure return frames ({why})")
    name = bb["encoder"]
    f = perc.encode(name, [ref_frame] + r["frames"])
    per = [float(np.clip(mem.cosine_matrix(f[i + 1: i + 2], f[:1])[0, 0], 0, 1)) for i in range(len(wins))]
    return entry("departure.return_visible", perc.label(name, "encoder"), perc.kind(name),
                 rollout_score({"away_view": per}, len(per)), per_revisit=per, reference_frames=[ref_frame],
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"],
                 return_angle_deg=r["angles_deg"], protocol=PROTOCOL)


def _applies(ctx, ecfg, rule=departure_revisit_windows) -> bool:
    ref, revisits = _windows(ctx, ecfg, rule)
    return bool(ref and revisits)


def _sweep_applies(ctx, ecfg) -> bool:
    return _applies(ctx, ecfg, departure_sweep_windows)


FAMILY = Family(
    "departure",
    ("encoders", "memory_stride", "revisit_tolerance_deg", "revisit_tolerance_translation", "departure_deg",
     "return_frame_poses", "pose_estimators"),
    (Metric("departure.visible", ("encoder",), visible, _applies),
     Metric("departure.return_visible", ("encoder",), return_visible, _applies),
     Metric("departure.sweep_visible", ("encoder",), sweep_visible, _sweep_applies)),
)
