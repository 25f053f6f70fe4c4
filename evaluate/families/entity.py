"""Human and object memory (paper section 4.4): Appearance (Eq. 4 with features inside the tracked masks), object
Geometry (Eq. 5 normalised silhouettes) and human Identity (Eq. 4 with face embeddings), each aggregated with Eq. 1
over the K prescribed revisits (a revisit without a valid observation scores 0 and still counts).

Targets: persons by their frame-0 boxes, objects by their frame-0 masks, both mapped to the video canvas. Tracks are
computed once per (tracker, target) on the frames the metrics read (V, the departures every ``memory_stride``-th
frame, each R_k once arrived: :func:`_track_frames`) and shared by every metric of the item.
"""

from __future__ import annotations

import numpy as np

from trajectories.phases import departure

from .. import memory as mem
from ..aggregate import rollout_score
from ..protocol import sample_every
from . import Entries, Family, Metric, entry


def _canvas_mask(ctx, mask_src: np.ndarray) -> np.ndarray:
    from harness.imaging import resize_cover_crop

    return resize_cover_crop(mask_src.astype(np.uint8) * 255, (ctx.height, ctx.width)) > 127


def targets(ctx) -> list[tuple[str, np.ndarray]]:
    """(target id, frame-0 mask on the video canvas) for persons (box masks) or objects (their masks); memoised."""
    if "targets" in ctx.memo:
        return ctx.memo["targets"]
    img = ctx.case.load_image()
    h, w = img.shape[:2]
    out = []
    if ctx.family == "human":
        for p in ctx.case.targets.persons:
            m = np.zeros((h, w), bool)
            x0, y0, x1, y1 = (int(round(v)) for v in p.box)
            m[max(0, y0) : y1, max(0, x0) : x1] = True
            out.append((p.id, _canvas_mask(ctx, m)))
    elif ctx.family == "object":
        for o in ctx.case.targets.objects:
            out.append((o.id, _canvas_mask(ctx, ctx.case.object_mask(o, h, w))))
    ctx.memo["targets"] = out
    return out


def _track_frames(ctx, ecfg) -> list[int]:
    """The frames the entity metrics read, starting at frame 0 (the tracker's template): V's reference frames, each
    revisit's arrived frames, and each departure's frames on the every-``memory_stride``-th grid (the tracking
    evidence: was the target lost while the camera was away). A frame is tracked on its own, so leaving out the
    frames no metric reads (the hold, a revisit before it arrives: half of them on LRLR) changes no value."""
    grid = sample_every(ecfg.memory_stride, 0, ctx.num_frames)  # V's and R_k's own frames never lie in a D_k
    away = set()
    for k in range(ctx.num_revisits):
        d = ctx.phases.get(departure(k + 1))
        if d:
            away |= {f for f in grid if d[0] <= f < d[1]}
    return sorted({0} | set(ctx.ref_idx) | {f for w in ctx.rev_idx_arrived for f in w} | away)


def tracks(ctx, perc, ecfg, tracker: str) -> tuple[str, dict]:
    """(tracker label, {target: {frame: (mask, valid)}})."""
    frames = _track_frames(ctx, ecfg)
    out, label = {}, tracker
    for tid, m0 in targets(ctx):
        label, out[tid] = perc.track(tracker, tid, m0, frames)
    return label, out


def evidence(ctx, trk: dict) -> dict:
    """Per target and revisit: did the tracker lose the target during the departure and find it on return."""
    ev = {}
    for tid, t in trk.items():
        rows = []
        for k in range(ctx.num_revisits):
            d = ctx.phases.get(departure(k + 1))
            dep = any(not t[f][1] for f in t if d and d[0] <= f < d[1])
            ret = any(t[f][1] for f in ctx.rev_idx_arrived[k])
            rows.append({"departed": dep, "returned": ret})
        ev[tid] = rows
    return ev


def _extra(ctx, trk, label) -> dict:
    return {"tracking_evidence": evidence(ctx, trk), "revisit_frames": ctx.rev_idx_arrived,
            "reference_frames": ctx.ref_idx, "mask_source": label}


def geometry(ctx, perc, ecfg, bb) -> Entries:
    label, trk = tracks(ctx, perc, ecfg, bb["tracker"])
    per_t = {}
    for tid, t in trk.items():
        ref = [t[f][0] for f in ctx.ref_idx if t[f][1]]
        per_t[tid] = [mem.silhouette_revisit_score(ref, [t[f][0] for f in w if t[f][1]], ecfg.canvas)
                      for w in ctx.rev_idx_arrived]
    return entry("object.geometry", label, perc.kind(bb["tracker"]), rollout_score(per_t, ctx.num_revisits),
                 per_target=per_t, **_extra(ctx, trk, label))


def _eq4(ctx, perc, trk, name, role, detections=None):
    """Per target, per revisit: Eq. 4 with one batched encoder call per target (reference + every revisit). For the
    face role, ``detections`` (a dict) receives per target how many of the tracked frames had a face:
    ``{"reference": [found, frames], "revisits": [[found, frames], ...]}``."""
    per_t = {}
    for tid, t in trk.items():
        rf = [f for f in ctx.ref_idx if t[f][1]]
        wins = [[f for f in w if t[f][1]] for w in ctx.rev_idx_arrived]
        allf = rf + [f for w in wins for f in w]
        if not rf or not allf:
            per_t[tid] = [0.0] * ctx.num_revisits
            continue
        masks = np.stack([t[f][0] for f in allf])
        if role == "face":
            feat, ok = perc.encode(name, allf, masks, role="face")
        else:
            feat, ok = perc.encode(name, allf, masks), np.ones(len(allf), bool)
        ref_feat = feat[: len(rf)][ok[: len(rf)]]
        if detections is not None:
            j = np.cumsum([0, len(rf)] + [len(w) for w in wins])
            detections[tid] = {"reference": [int(ok[: len(rf)].sum()), len(rf)],
                               "revisits": [[int(ok[a:b].sum()), int(b - a)] for a, b in zip(j[1:-1], j[2:])]}
        scores, i = [], len(rf)
        for w in wins:
            f_w, ok_w = feat[i : i + len(w)], ok[i : i + len(w)]
            i += len(w)
            scores.append(mem.revisit_similarity(ref_feat, f_w[ok_w]) if len(ref_feat) and ok_w.any() else 0.0)
        per_t[tid] = scores
    return per_t


def appearance(ctx, perc, ecfg, bb) -> Entries:
    tl, trk = tracks(ctx, perc, ecfg, bb["tracker"])
    per_t = _eq4(ctx, perc, trk, bb["encoder"], "encoder")
    el = perc.label(bb["encoder"], "encoder")
    return entry(f"{ctx.family}.appearance", f"{el}+{tl}", perc.kind(bb["encoder"]),
                 rollout_score(per_t, ctx.num_revisits), per_target=per_t, **_extra(ctx, trk, tl))


def identity(ctx, perc, ecfg, bb) -> Entries:
    tl, trk = tracks(ctx, perc, ecfg, bb["tracker"])
    det: dict = {}
    per_t = _eq4(ctx, perc, trk, bb["face"], "face", det)
    fl = perc.label(bb["face"], "face")
    # the face detector's hit rate on the frames the tracker validated (reference + revisits): a score from a
    # detector that never fires reads as forgetting, one that fires on anything as memory
    found = sum(d["reference"][0] + sum(r[0] for r in d["revisits"]) for d in det.values())
    seen = sum(d["reference"][1] + sum(r[1] for r in d["revisits"]) for d in det.values())
    return entry("human.identity", f"{fl}+{tl}", perc.kind(bb["face"]), rollout_score(per_t, ctx.num_revisits),
                 per_target=per_t, face_detection=det, face_detection_rate=found / seen if seen else None,
                 **_extra(ctx, trk, tl))


def ors(ctx, perc, ecfg, bb) -> Entries:
    """MemoBench's object reappearance score over the revisit-phase frames, with the open-vocabulary detector of
    ``evaluate.ors`` (:func:`evaluate.ors.ors_entries`; "not computed" with the reason without weights)."""
    from ..ors import ors_entries

    rev = sorted({f for w in ctx.rev_idx for f in w})
    return ors_entries(ctx.frames_at(rev), rev, ctx.phases, {o.id: o.name for o in ctx.case.targets.objects},
                       ecfg.ors)


def _has(family):
    return lambda ctx, ecfg: ctx.family == family and bool(targets(ctx))


_ENTITY = ("encoders", "trackers", "memory_stride", "tracker_threshold", "revisit_tolerance_deg",
           "revisit_tolerance_translation")
HUMAN = Family("human", _ENTITY + ("face",),
               (Metric("human.appearance", ("encoder", "tracker"), appearance, _has("human")),
                Metric("human.identity", ("face", "tracker"), identity, _has("human"))))
OBJECT = Family("object", _ENTITY + ("canvas", "ors"),
                (Metric("object.geometry", ("tracker",), geometry, _has("object")),
                 Metric("object.appearance", ("encoder", "tracker"), appearance, _has("object")),
                 Metric("object.ors", (), ors, _has("object"))))
