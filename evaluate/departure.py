"""Departure-revisit memory: the ``departure_revisit`` protocol extension (beyond the paper).

The paper's static-memory revisits all return to the conditioning frame. A context policy that keeps a sink (the
first latents, which hold frame 0) therefore passes them whatever else it forgets: on the reference model FullKV,
Sliding and FoV all score about 1. This family scores memory of content first seen *during a departure*: the
reference set is the first departure's away view and each later departure back to that view is a revisit
(:func:`evaluate.protocol.departure_revisit_windows`; LRLR has one, LRLRLR two, LRUD and the square loop none).

Metric ``departure.visible[<encoder>]``: Eq. 4 with global frame features (the features of the paper's Environment
Visible Memory) — per revisit, the mean over its frames of ``clip_[0,1](max over reference frames of cos)`` — then
Eq. 1 over the K' prescribed departure revisits. Computed from the frames only (no oracle geometry).
"""

from __future__ import annotations

import numpy as np

from . import memory as mem
from .aggregate import rollout_score
from .protocol import departure_revisit_windows

#: The name under which the protocol extension is recorded in every entry.
PROTOCOL = "departure_revisit"


def subsample(frames: list[int], stride: int) -> list[int]:
    """Every ``stride``-th frame of ``frames`` plus its last one (the settled view)."""
    out = list(frames[:: max(1, int(stride))])
    if frames and frames[-1] not in out:
        out.append(frames[-1])
    return out


def _ensure_decoded(ctx, frames: list[int]) -> None:
    """Decode the frames the item context has not decoded yet (the away views lie off the memory sampling grid)."""
    missing = sorted(f for f in set(frames) if f not in ctx.pos)
    if not missing:
        return
    from harness.video import read_frames

    got, extra = read_frames(ctx.video, indices=missing)
    if list(got) != missing:
        raise ValueError(f"{ctx.video}: could not decode frames {sorted(set(missing) - set(got))[:5]}")
    for f, fr in zip(got, extra):
        ctx.pos[f] = len(ctx.frames)
        ctx.frames = np.concatenate([ctx.frames, fr[None]])


def family_departure(ctx) -> dict:
    """``departure.visible[<encoder>]`` for every configured encoder (see the module docstring)."""
    from .stage import _each, _entry, _missing

    out: dict = {}
    e = ctx.ecfg
    ref, revisits = departure_revisit_windows(ctx.path.c2w, ctx.path.phases, e.revisit_tolerance_deg,
                                              e.revisit_tolerance_translation, e.departure_deg)
    if not ref or not revisits:
        k, v = _missing("departure.visible", "-", "the trajectory has no later departure back to the first "
                        "departure's away view (LRLR and LRLRLR have; LRUD and the square loop do not)")
        out[k] = v
        return out
    ref_idx = subsample(ref, e.memory_stride)
    rev_idx = [subsample(w, e.memory_stride) for w in revisits]
    _ensure_decoded(ctx, ref_idx + [f for w in rev_idx for f in w])
    for _, enc in _each(out, ctx.encoder, e.encoders, ("departure.visible",)):
        ref_feat = enc.encode(ctx.frames_at(ref_idx))
        per = [mem.revisit_similarity(ref_feat, enc.encode(ctx.frames_at(w))) for w in rev_idx]
        k, v = _entry("departure.visible", enc.name, enc.kind, rollout_score({"away_view": per}, len(per)),
                      per_revisit=per, reference_frames=ref_idx, revisit_frames=rev_idx, protocol=PROTOCOL)
        out[k] = v
    return out
