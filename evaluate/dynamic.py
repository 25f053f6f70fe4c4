"""Dynamic memory (WorldMemBench section 4.5, appendix D): the event-gated eight-question checklist.

Each case has eight binary questions with frozen reference answers, two per aspect (return progress,
persistence/reset, final state, causal/physical consistency). A judge decides whether the event visibly starts in
the initial hold (the gate) and answers the eight questions. Not started -> all eight scores are 0; otherwise an
answer scores 1 when it matches its reference. Aspect score = mean of its two gated scores; Overall = mean of all
eight. Across videos: ``p_start`` (fraction started), ``S_cond`` (mean Overall over started videos) and
``S_gated = p_start * S_cond`` (the reported Overall).

Beside it, MBench's trigger-conditioned score (M-score): a memory score counts only on samples where the event that
tests memory actually happened (the trigger); ``C_trig`` is the fraction of triggered samples, ``S_rel`` the mean
score over triggered samples only, and ``M = 2 C_trig S_rel / (C_trig + S_rel)`` (harmonic mean), which penalises a
model that avoids the challenge as much as one that fails it. With the judge's event-start gate as the trigger,
``C_trig = p_start`` and ``S_rel = S_cond``, so M sits beside ``S_gated``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from harness.cases import ASPECTS  # the case schema owns the four aspects


def _norm(a: Any, what: str) -> str:
    """``yes`` / ``no`` from a judge answer or reference; anything else (None, NaN, free text) is a ValueError so
    that an unparsed answer is never silently scored as wrong (or right)."""
    if isinstance(a, (bool, np.bool_)):
        return "yes" if a else "no"
    s = str(a).strip().lower() if isinstance(a, str) else None
    if s in ("yes", "y", "true"):
        return "yes"
    if s in ("no", "n", "false"):
        return "no"
    raise ValueError(f"{what} = {a!r} is not a yes/no answer; parse the judge's reply into yes/no first (an "
                     "unanswered question must be re-asked or the video recorded as not judged)")


def score_checklist(started: bool, answers: Sequence[Any], references: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Gated checklist scores of one video.

    Args:
        started: the judge's event-start decision. answers: the judge's 8 answers (yes/no strings or bools) in
            question order. references: 8 mappings ``{"aspect": ..., "answer": "yes"|"no"}`` (the case's frozen
            questions).
    Returns:
        ``{"started", "items" (8 x 0/1), <aspect>: mean of its two items, "overall": mean of the eight}``.
    Raises:
        ValueError: not 8 answers/references, an aspect without exactly two questions, or an answer that is not
        yes/no (None, NaN, free text). When the event did not start, the answers are not read (all eight score 0).
    """
    if len(references) != 8 or len(answers) != 8:
        raise ValueError(f"need 8 answers and 8 references, got {len(answers)} and {len(references)}")
    refs = [_norm(r["answer"], f"reference answer {i}") for i, r in enumerate(references)]
    if not started:
        items = [0] * 8
    else:
        items = [int(_norm(a, f"answer {i}") == r) for i, (a, r) in enumerate(zip(answers, refs))]
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
    rows = list(per_item)
    d = decompose(rows)
    tc = trigger_conditioned([r["overall"] for r in rows], [bool(r["started"]) for r in rows])
    return {**d, "M_score": tc["M"]}
