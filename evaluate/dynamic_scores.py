"""Memory scores from the related benchmarks, beside WorldMemBench's gated checklist.

* **Trigger-conditioned score (MBench's M-score).** A memory score counts only on samples where the event that
  tests memory actually happened (the trigger); ``C_trig`` is the fraction of triggered samples, ``S_rel`` the
  mean score over triggered samples only, and ``M = 2 C_trig S_rel / (C_trig + S_rel)`` (harmonic mean), which
  penalises a model that avoids the challenge as much as one that fails it. With the judge's event-start gate as
  the trigger, ``C_trig = p_start`` and ``S_rel = S_cond`` of appendix D, so M sits beside ``S_gated = p_start *
  S_cond``.
* **Object reappearance score (MemoBench's ORS).** Per target, over the ``n_R`` frames of the revisit phases: a
  frame counts when the detector finds the target with a valid box (area within a fraction range of the image),
  with its highest valid confidence ``p_i``; ``ORS = (n_d / n_R) * mean(p_i) = sum(p_i) / n_R`` (0 when nothing is
  detected). It says that a recognisable target is back, not that it is the same instance in the right state.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np


def trigger_conditioned(scores: Sequence[float], triggered: Sequence[bool]) -> dict[str, float]:
    """MBench's trigger-conditioned scoring over samples.

    Args:
        scores: per-sample memory score in [0, 1] (any value where not triggered: ignored).
        triggered: per-sample trigger decision.
    Returns:
        ``{"n", "triggered", "C_trig", "S_rel", "M"}``; ``S_rel`` is NaN and ``M`` 0 when nothing triggered.
    """
    if len(scores) != len(triggered):
        raise ValueError(f"{len(scores)} scores for {len(triggered)} trigger decisions")
    n = len(scores)
    if n == 0:
        return {"n": 0, "triggered": 0, "C_trig": float("nan"), "S_rel": float("nan"), "M": float("nan")}
    trig = [float(s) for s, t in zip(scores, triggered) if t]
    c = len(trig) / n
    s_rel = float(np.mean(trig)) if trig else float("nan")
    m = 0.0 if not trig or (c + s_rel) == 0 else 2 * c * s_rel / (c + s_rel)
    return {"n": n, "triggered": len(trig), "C_trig": c, "S_rel": s_rel, "M": m}


def dynamic_summary(per_item: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Appendix D decomposition plus the M-score from per-item ``{"started": bool, "overall": float}``."""
    from .dynamic import decompose

    rows = list(per_item)
    d = decompose(rows)
    tc = trigger_conditioned([r["overall"] for r in rows], [bool(r["started"]) for r in rows])
    return {**d, "M_score": tc["M"]}


def dynamic_rows(results: Sequence[Mapping[str, Any]]) -> list[dict]:
    """One row per (judge, model, context, trajectory) and per (judge, model, context, "all") from per-item
    ``metrics.json`` results; items whose judge column is not computed are counted apart (``not_computed``)."""
    groups: dict[tuple, list] = defaultdict(list)
    missing: dict[tuple, int] = defaultdict(int)
    for r in results:
        it = r.get("item") or {}
        for k, m in (r.get("metrics") or {}).items():
            if m.get("metric") != "dynamic.overall":
                continue
            for traj in (it.get("trajectory"), "all"):
                g = (m.get("backbone"), it.get("model"), it.get("context"), traj)
                if m.get("status") == "computed":
                    groups[g].append({"started": bool(m.get("started")), "overall": float(m["value"])})
                else:
                    missing[g] += 1
    rows = []
    for g in sorted(set(groups) | set(missing), key=lambda x: tuple(str(v) for v in x)):
        s = dynamic_summary(groups.get(g, []))
        rows.append({"judge": g[0], "model": g[1], "context": g[2], "trajectory": g[3], **s,
                     "not_computed": missing.get(g, 0)})
    return rows


def _f(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def write_dynamic_table(out_dir: Path, results: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """``dynamic.{json,md}`` in ``out_dir`` (only when the run has dynamic items). Returns the Markdown path."""
    from harness.io import write_json, write_text

    rows = dynamic_rows(results)
    if not rows:
        return None
    out_dir = Path(out_dir)
    write_json(out_dir / "dynamic.json", {"rows": rows})
    lines = ["# Dynamic memory", "",
             "p_start: fraction of videos whose event the judge saw start in the initial hold; S_cond: mean checklist "
             "score of those; S_gated = p_start x S_cond (the paper's Overall); M: MBench's harmonic mean of "
             "p_start and S_cond. `not computed`: videos without a judge answer (see their metrics.json).", "",
             "| judge | model | context | trajectory | n | started | p_start | S_cond | S_gated | M | not computed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['judge']} | {r['model']} | {r['context']} | {r['trajectory']} | {r['n']} | {r['started']} "
                     f"| {_f(r['p_start'])} | {_f(r['S_cond'])} | {_f(r['S_gated'])} | {_f(r['M_score'])} "
                     f"| {r['not_computed']} |")
    write_text(out_dir / "dynamic.md", "\n".join(lines) + "\n")
    return str(out_dir / "dynamic.md")


# -- ORS ------------------------------------------------------------------------------------------------------------

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
                 area_range: tuple[float, float] = ORS_AREA_RANGE) -> dict[str, dict]:
    """ORS per target over the revisit-phase frames (``R1..RK``) among ``frame_indices``.

    Args:
        frames: (N, H, W, 3) uint8 at ``frame_indices``. targets: target id -> text query (its name).
        detector: ``detect(frames, queries) -> [per frame: [per query: (scores (M,), boxes (M, 4) pixels)]]``.
    """
    from .protocol import revisit_windows

    wins = revisit_windows({k: tuple(v) for k, v in phases.items()})
    keep = [i for i, t in enumerate(frame_indices) if any(a <= t < b for a, b in wins)]
    ids, queries = list(targets), [targets[k] for k in targets]
    out: dict[str, dict] = {}
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
_DETECTORS: dict[tuple, Any] = {}


def ors_entries(frames: np.ndarray, frame_indices: Sequence[int], phases: Mapping[str, Sequence[int]],
                targets: Mapping[str, str], settings: Optional[Mapping[str, Any]] = None) -> dict[str, dict]:
    """``{"object.ors[<detector>]": entry}`` in ``metrics.json`` form: the mean ORS over targets (equal weight)
    with per-target details, or "not computed" with the reason (e.g. no weights configured)."""
    from .perception.base import BackboneUnavailable

    s = {**ORS_DEFAULTS, **(settings or {})}
    label = str(s["name"])
    if s["detector"] != "owlv2":
        return {f"object.ors[{s['detector']}]": {"metric": "object.ors", "backbone": s["detector"],
                                                 "status": "not_computed",
                                                 "reason": f"evaluate.ors.detector={s['detector']!r}: only owlv2"}}
    key = (s["weights_root"], label, float(s["threshold"]))
    try:
        if key not in _DETECTORS:
            from .perception.owl_detector import OwlDetector

            _DETECTORS[key] = OwlDetector.from_settings(s["weights_root"], name=label, threshold=float(s["threshold"]))
        det = _DETECTORS[key]
    except BackboneUnavailable as exc:
        return {f"object.ors[{label}]": {"metric": "object.ors", "backbone": label, "status": "not_computed",
                                         "reason": str(exc)}}
    per = ors_for_item(frames, frame_indices, phases, targets, det, tuple(s["area_range"]))
    vals = [v["ors"] for v in per.values() if np.isfinite(v["ors"])]
    if not vals:
        return {f"object.ors[{label}]": {"metric": "object.ors", "backbone": label, "status": "not_computed",
                                         "reason": "no revisit-phase frames to score"}}
    return {f"object.ors[{label}]": {"metric": "object.ors", "backbone": label, "backbone_kind": "detector",
                                     "status": "computed", "value": float(np.mean(vals)), "per_target": per,
                                     "settings": s}}
