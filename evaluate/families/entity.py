"""Human and object memory (paper section 4.4): Appearance (Eq. 4 with features inside the tracked masks), object
Geometry (Eq. 5 normalised silhouettes) and human Identity (Eq. 4 with face embeddings), each aggregated with Eq. 1
over the K prescribed revisits (a revisit without a valid observation scores 0 and still counts).

Targets: persons by their frame-0 boxes, objects by their frame-0 masks, both mapped to the video canvas. Tracks are
computed once per (tracker, target) on the frames the metrics read (V, the departures every ``memory_stride``-th
frame, each R_k once arrived: :func:`_track_frames`) and shared by every metric of the item.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from trajectories.phases import departure

from .. import memory as mem
from ..aggregate import rollout_score
from ..protocol import sample_every
from ..registry import AppliesFn, Backbones, Compute, MetricSpec
from ..results import Entries
from .base import Family, entry

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..perceive import ItemPerception

#: target id -> {frame: (mask (H, W) bool on the video canvas, whether the tracker found the target there)}
Tracks = dict[str, dict[int, tuple[np.ndarray, bool]]]


def _canvas_mask(item: EvalItem, mask_src: np.ndarray) -> np.ndarray:
    from harness.imaging import resize_cover_crop

    return resize_cover_crop(mask_src.astype(np.uint8) * 255, (item.height, item.width)) > 127


def targets(item: EvalItem) -> list[tuple[str, np.ndarray]]:
    """(target id, frame-0 mask on the video canvas) for persons (box masks) or objects (their masks); memoised."""
    if "targets" in item.memo:
        memo: list[tuple[str, np.ndarray]] = item.memo["targets"]
        return memo
    img = item.case.load_image()
    h, w = img.shape[:2]
    out = []
    if item.family == "human":
        for p in item.case.targets.persons:
            m = np.zeros((h, w), bool)
            x0, y0, x1, y1 = (int(round(v)) for v in p.box)  # noqa: RUF046 - numpy floats round to floats
            m[max(0, y0) : y1, max(0, x0) : x1] = True
            out.append((p.id, _canvas_mask(item, m)))
    elif item.family == "object":
        for o in item.case.targets.objects:
            out.append((o.id, _canvas_mask(item, item.case.object_mask(o, h, w))))
    item.memo["targets"] = out
    return out


def _track_frames(item: EvalItem, settings: EvalConfig) -> list[int]:
    """The frames the entity metrics read, starting at frame 0 (the tracker's template): V's reference frames, each
    revisit's arrived frames, and each departure's frames on the every-``memory_stride``-th grid (the tracking
    evidence: was the target lost while the camera was away). A frame is tracked on its own, so leaving out the
    frames no metric reads (the hold, a revisit before it arrives: half of them on LRLR) changes no value."""
    grid = sample_every(settings.memory_stride, 0, item.num_frames)  # V's and R_k's own frames never lie in a D_k
    away = set()
    for k in range(item.num_revisits):
        d = item.phases.get(departure(k + 1))
        if d:
            away |= {f for f in grid if d[0] <= f < d[1]}
    return sorted({0} | set(item.ref_idx) | {f for w in item.rev_idx_arrived for f in w} | away)


def tracks(item: EvalItem, perception: ItemPerception, settings: EvalConfig, tracker: str) -> tuple[str, Tracks]:
    """(tracker label, {target: {frame: (mask, valid)}})."""
    frames = _track_frames(item, settings)
    out, label = {}, tracker
    for tid, m0 in targets(item):
        label, out[tid] = perception.track(tracker, tid, m0, frames)
    return label, out


def evidence(item: EvalItem, track: Tracks) -> dict[str, list[dict[str, bool]]]:
    """Per target and revisit: did the tracker lose the target during the departure and find it on return."""
    ev = {}
    for tid, t in track.items():
        rows = []
        for k in range(item.num_revisits):
            d = item.phases.get(departure(k + 1))
            dep = any(not t[f][1] for f in t if d and d[0] <= f < d[1])
            ret = any(t[f][1] for f in item.rev_idx_arrived[k])
            rows.append({"departed": dep, "returned": ret})
        ev[tid] = rows
    return ev


def _extra(item: EvalItem, track: Tracks, label: str) -> dict[str, Any]:
    return {"tracking_evidence": evidence(item, track), "revisit_frames": item.rev_idx_arrived,
            "reference_frames": item.ref_idx, "mask_source": label}


def geometry(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    label, track = tracks(item, perception, settings, backbones["tracker"])
    per_t = {}
    for tid, t in track.items():
        ref = [t[f][0] for f in item.ref_idx if t[f][1]]
        per_t[tid] = [mem.silhouette_revisit_score(ref, [t[f][0] for f in w if t[f][1]], settings.canvas)
                      for w in item.rev_idx_arrived]
    return entry("object.geometry", label, perception.kind(backbones["tracker"]),
                 rollout_score(per_t, item.num_revisits), per_target=per_t, **_extra(item, track, label))


def _eq4(item: EvalItem, perception: ItemPerception, track: Tracks, name: str, role: str,
         detections: dict[str, Any] | None = None) -> dict[str, list[float]]:
    """Per target, per revisit: Eq. 4 with one batched encoder call per target (reference + every revisit). For the
    face role, ``detections`` (a dict) receives per target how many of the tracked frames had a face:
    ``{"reference": [found, frames], "revisits": [[found, frames], ...]}``."""
    per_t = {}
    for tid, t in track.items():
        rf = [f for f in item.ref_idx if t[f][1]]
        wins = [[f for f in w if t[f][1]] for w in item.rev_idx_arrived]
        allf = rf + [f for w in wins for f in w]
        if not rf or not allf:
            per_t[tid] = [0.0] * item.num_revisits
            continue
        masks = np.stack([t[f][0] for f in allf])
        if role == "face":
            feat, ok = perception.encode(name, allf, masks, role="face")
        else:
            feat, ok = perception.encode(name, allf, masks), np.ones(len(allf), bool)
        ref_feat = feat[: len(rf)][ok[: len(rf)]]
        if detections is not None:
            j = np.cumsum([0, len(rf)] + [len(w) for w in wins])
            detections[tid] = {"reference": [int(ok[: len(rf)].sum()), len(rf)],
                               "revisits": [[int(ok[a:b].sum()), int(b - a)] for a, b in itertools.pairwise(j[1:])]}
        scores, i = [], len(rf)
        for w in wins:
            f_w, ok_w = feat[i : i + len(w)], ok[i : i + len(w)]
            i += len(w)
            scores.append(mem.revisit_similarity(ref_feat, f_w[ok_w]) if len(ref_feat) and ok_w.any() else 0.0)
        per_t[tid] = scores
    return per_t


def appearance(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    tl, track = tracks(item, perception, settings, backbones["tracker"])
    per_t = _eq4(item, perception, track, backbones["encoder"], "encoder")
    el = perception.label(backbones["encoder"], "encoder")
    return entry(f"{item.family}.appearance", f"{el}+{tl}", perception.kind(backbones["encoder"]),
                 rollout_score(per_t, item.num_revisits), per_target=per_t, **_extra(item, track, tl))


def identity(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    tl, track = tracks(item, perception, settings, backbones["tracker"])
    det: dict[str, Any] = {}
    per_t = _eq4(item, perception, track, backbones["face"], "face", det)
    fl = perception.label(backbones["face"], "face")
    # the face detector's hit rate on the frames the tracker validated (reference + revisits): a score from a
    # detector that never fires reads as forgetting, one that fires on anything as memory
    found = sum(d["reference"][0] + sum(r[0] for r in d["revisits"]) for d in det.values())
    seen = sum(d["reference"][1] + sum(r[1] for r in d["revisits"]) for d in det.values())
    return entry("human.identity", f"{fl}+{tl}", perception.kind(backbones["face"]),
                 rollout_score(per_t, item.num_revisits), per_target=per_t, face_detection=det,
                 face_detection_rate=found / seen if seen else None, **_extra(item, track, tl))


def ors(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    """MemoBench's object reappearance score over the revisit-phase frames, with the open-vocabulary detector of
    ``evaluate.ors`` (:func:`evaluate.ors.ors_entries`; "not computed" with the reason without weights)."""
    from ..ors import ors_entries

    rev = sorted({f for w in item.rev_idx for f in w})
    return ors_entries(item.frames_at(rev), rev, item.phases, {o.id: o.name for o in item.case.targets.objects},
                       settings.ors)


def _has(family: str) -> AppliesFn:
    return lambda item, settings: item.family == family and bool(targets(item))


_ENTITY = ("encoders", "trackers", "memory_stride", "tracker_threshold", "revisit_tolerance_deg",
           "revisit_tolerance_translation")
HUMAN_SPECS = (
    MetricSpec("human.appearance", "human", True, "encoder", True, "Eq. 4 with features in person masks, Eq. 1",
               (Compute(appearance, ("encoder", "tracker"), _has("human")),), table2="dinov2+sam2"),
    MetricSpec("human.identity", "human", True, "face", True, "Eq. 4 with ArcFace face embeddings, Eq. 1",
               (Compute(identity, ("face", "tracker"), _has("human")),), table2="arcface+sam2"),
)
OBJECT_SPECS = (
    MetricSpec("object.geometry", "object", True, "tracker", True, "Eq. 5 normalised silhouette IoU, Eq. 1",
               (Compute(geometry, ("tracker",), _has("object")),), table2="sam2"),
    MetricSpec("object.appearance", "object", True, "encoder", True, "Eq. 4 with features in object masks, Eq. 1",
               (Compute(appearance, ("encoder", "tracker"), _has("object")),), table2="dinov2+sam2"),
    MetricSpec("object.ors", "object", True, "detector", False,
               "MemoBench object reappearance score: detection rate x mean confidence over revisit frames",
               (Compute(ors, (), _has("object")),)),
)

HUMAN = Family("human", _ENTITY + ("face",), HUMAN_SPECS)
OBJECT = Family("object", _ENTITY + ("canvas", "ors"), OBJECT_SPECS)
