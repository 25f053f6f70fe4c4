"""Aggregation (Eq. 1), bootstrap confidence intervals and paired comparisons."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np


def rollout_score(per_target_revisit_scores: Mapping[str, Sequence[Optional[float]]], num_revisits: int) -> float:
    """Eq. 1: per target, the mean over the K **prescribed** revisits (a revisit without a valid observation, given
    as None or missing, scores 0 and still counts), then the mean over targets. NaN when there is no target."""
    if num_revisits <= 0:
        raise ValueError("num_revisits must be >= 1")
    if not per_target_revisit_scores:
        return float("nan")
    vals = []
    for scores in per_target_revisit_scores.values():
        s = [0.0 if v is None or (isinstance(v, float) and np.isnan(v)) else float(v) for v in list(scores)[:num_revisits]]
        vals.append(sum(s) / num_revisits)
    return float(np.mean(vals))


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict[str, float]:
    """Percentile bootstrap over cases: mean and the (1 - alpha) interval. NaN values are dropped."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if len(v) == 0:
        return {"mean": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0}
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    return {"mean": float(v.mean()), "lo": float(np.quantile(means, alpha / 2)),
            "hi": float(np.quantile(means, 1 - alpha / 2)), "n": int(len(v))}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0,
                     alpha: float = 0.05) -> dict[str, float]:
    """Paired comparison over the same cases: mean of ``a - b``, its interval, and the fraction of resamples
    whose mean difference is <= 0 (a one-sided bootstrap p-value for ``a > b``)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired comparison needs the same cases on both sides")
    ok = np.isfinite(a) & np.isfinite(b)
    d = (a - b)[ok]
    if len(d) == 0:
        return {"diff": float("nan"), "lo": float("nan"), "hi": float("nan"), "p_le_0": float("nan"), "n": 0}
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    return {"diff": float(d.mean()), "lo": float(np.quantile(means, alpha / 2)),
            "hi": float(np.quantile(means, 1 - alpha / 2)), "p_le_0": float((means <= 0).mean()), "n": int(len(d))}
