"""Dynamic memory (WorldMemBench section 4.5, appendix D): the event-gated eight-question checklist.

Each case has eight binary questions with frozen reference answers, two per aspect (return progress,
persistence/reset, final state, causal/physical consistency). A judge decides whether the event visibly starts in
the initial hold (the gate) and answers the eight questions. Not started -> all eight scores are 0; otherwise an
answer scores 1 when it matches its reference. Aspect score = mean of its two gated scores; Overall = mean of all
eight. Across videos: ``p_start`` (fraction started), ``S_cond`` (mean Overall over started videos) and
``S_gated = p_start * S_cond`` (the reported Overall).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from harness.cases import ASPECTS  # the case schema owns the four aspects


def _norm(a: Any) -> str:
    s = str(a).strip().lower()
    if s in ("yes", "y", "true", "1"):
        return "yes"
    if s in ("no", "n", "false", "0"):
        return "no"
    return s


def score_checklist(started: bool, answers: Sequence[Any], references: Sequence[Mapping[str, Any]]) -> dict:
    """Gated checklist scores of one video.

    Args:
        started: the judge's event-start decision. answers: the judge's 8 answers (yes/no) in question order.
        references: 8 mappings ``{"aspect": ..., "answer": "yes"|"no"}`` (the case's frozen questions).
    Returns:
        ``{"started", "items" (8 x 0/1), <aspect>: mean of its two items, "overall": mean of the eight}``.
    """
    if len(references) != 8 or len(answers) != 8:
        raise ValueError(f"need 8 answers and 8 references, got {len(answers)} and {len(references)}")
    items = [0] * 8 if not started else [int(_norm(a) == _norm(r["answer"])) for a, r in zip(answers, references)]
    out: dict[str, Any] = {"started": bool(started), "items": items}
    for aspect in ASPECTS:
        idx = [i for i, r in enumerate(references) if r["aspect"] == aspect]
        if len(idx) != 2:
            raise ValueError(f"aspect {aspect!r} needs exactly two questions, has {len(idx)}")
        out[aspect] = float(np.mean([items[i] for i in idx]))
    out["overall"] = float(np.mean(items))
    return out


def decompose(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Across videos: ``p_start``, ``S_cond`` (mean Overall of started videos; NaN if none) and
    ``S_gated = p_start * S_cond`` (equal to the mean gated Overall)."""
    n = len(results)
    if n == 0:
        return {"n": 0, "started": 0, "p_start": float("nan"), "S_cond": float("nan"), "S_gated": float("nan")}
    started = [r for r in results if r["started"]]
    p = len(started) / n
    cond = float(np.mean([r["overall"] for r in started])) if started else float("nan")
    gated = p * cond if started else 0.0
    return {"n": n, "started": len(started), "p_start": p, "S_cond": cond, "S_gated": gated}
