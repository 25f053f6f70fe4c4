"""MemoBench's object reappearance score (ORS), beside WorldMemBench's entity metrics.

Per target, over the ``n_R`` frames of the revisit phases: a frame counts when the detector finds the target with a
valid box (area within a fraction range of the image), with its highest valid confidence ``p_i``;
``ORS = (n_d / n_R) * mean(p_i) = sum(p_i) / n_R`` (0 when nothing is detected). It says that a recognisable
target is back, not that it is the same instance in the right state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import numpy as np

from .results import Entries, MetricEntry, entries

if TYPE_CHECKING:
    from .perception.owl_detector import OwlDetector

#: MemoBench's valid detection area (fraction of the image), and its fallback range.
ORS_AREA_RANGE = (0.0005, 0.5)


def object_reappearance_score(best_confidences: Sequence[Optional[float]]) -> dict[str, float]:
    """ORS of one target from its per-frame best valid confidence over the revisit frames (None: no valid
    detection in that frame). Returns ``{"n_R", "n_d", "detection_rate", "mean_confidence", "ors"}``."""
    n_r = len(best_confidences)
    det = [float(p) for p in best_confidences if p is not None]
    if n_r == 0:
        return {"n_R": 0, "n_d": 0, "detection_rate": float("nan"), "mean_confidence": float("nan"),
                "ors": float("nan")}
    rate = len(det) / n_r
    mean = float(np.mean(det)) if det else 0.0
    return {"n_R": n_r, "n_d": len(det), "detection_rate": rate, "mean_confidence": mean, "ors": rate * mean}


def best_valid_confidence(scores: Sequence[float], boxes: Sequence[Sequence[float]], image_hw: tuple[int, int],
                          area_range: tuple[float, float] = ORS_AREA_RANGE) -> Optional[float]:
    """Highest score among detections whose box area (x0, y0, x1, y1 in pixels) is within ``area_range`` of the
    image area; None when none is valid."""
    h, w = image_hw
    lo, hi = area_range
    best = None
    for s, b in zip(scores, boxes):
        area = max(0.0, float(b[2]) - float(b[0])) * max(0.0, float(b[3]) - float(b[1])) / float(h * w)
        if lo <= area <= hi and (best is None or s > best):
            best = float(s)
    return best


def ors_for_item(frames: np.ndarray, frame_indices: Sequence[int], phases: Mapping[str, Sequence[int]],
                 targets: Mapping[str, str], detector: Any,
                 area_range: tuple[float, float] = ORS_AREA_RANGE) -> dict[str, dict[str, Any]]:
    """ORS per target over the revisit-phase frames (``R1..RK``) among ``frame_indices``.

    Args:
        frames: (N, H, W, 3) uint8 at ``frame_indices``. targets: target id -> text query (its name).
        detector: ``detect(frames, queries) -> [per frame: [per query: (scores (M,), boxes (M, 4) pixels)]]``.
    """
    from .protocol import revisit_windows

    wins = revisit_windows({k: (v[0], v[1]) for k, v in phases.items()})
    keep = [i for i, t in enumerate(frame_indices) if any(a <= t < b for a, b in wins)]
    ids, queries = list(targets), [targets[k] for k in targets]
    out: dict[str, dict[str, Any]] = {}
    if not keep:
        return {tid: object_reappearance_score([]) for tid in ids}
    dets = detector.detect(frames[keep], queries)
    hw = frames.shape[1:3]
    for j, tid in enumerate(ids):
        best = [best_valid_confidence(dets[i][j][0], dets[i][j][1], hw, area_range) for i in range(len(keep))]
        out[tid] = {**object_reappearance_score(best), "frames": [int(frame_indices[i]) for i in keep]}
    return out


ORS_DEFAULTS = {"detector": "owlv2", "weights_root": None, "name": "owlv2-base-patch16-ensemble", "threshold": 0.1,
                "area_range": list(ORS_AREA_RANGE)}
_DETECTORS: dict[tuple[Optional[str], str, float], OwlDetector] = {}  # (weights root, name, threshold) -> detector


def ors_entries(frames: np.ndarray, frame_indices: Sequence[int], phases: Mapping[str, Sequence[int]],
                targets: Mapping[str, str], settings: Optional[Mapping[str, Any]] = None) -> Entries:
    """``{"object.ors[<detector>]": entry}``: the mean ORS over targets (equal weight) with per-target details, or
    "not computed" with the reason (e.g. no weights configured)."""
    from .perception.base import BackboneUnavailable

    s = {**ORS_DEFAULTS, **(settings or {})}
    label = str(s["name"])
    if s["detector"] != "owlv2":
        return entries(MetricEntry.unavailable("object.ors", s["detector"],
                                               f"evaluate.ors.detector={s['detector']!r}: only owlv2"))
    key = (s["weights_root"], label, float(s["threshold"]))
    try:
        if key not in _DETECTORS:
            from .perception.owl_detector import OwlDetector

            _DETECTORS[key] = OwlDetector.from_settings(s["weights_root"], name=label, threshold=float(s["threshold"]))
        det = _DETECTORS[key]
    except BackboneUnavailable as exc:
        return entries(MetricEntry.unavailable("object.ors", label, str(exc)))
    per = ors_for_item(frames, frame_indices, phases, targets, det, tuple(s["area_range"]))
    vals = [v["ors"] for v in per.values() if np.isfinite(v["ors"])]
    if not vals:
        return entries(MetricEntry.unavailable("object.ors", label, "no revisit-phase frames to score"))
    return entries(MetricEntry.computed("object.ors", label, "detector", float(np.mean(vals)), per_target=per,
                                        settings=s))
