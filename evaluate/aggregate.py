"""Aggregation (Eq. 1), bootstrap confidence intervals and paired comparisons."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np


def rollout_score(per_target_revisit_scores: Mapping[str, Sequence[Optional[float]]], num_revisits: int) -> float:
    """Eq. 1: per target u, ``S_u = (1/K) Σ_k s_{u,k}`` over the K **prescribed** revisits, then the mean over targets.

    A revisit without a valid observation is given as ``None`` (or left out at the end of the list): it scores 0
    and still counts in K, as the paper prescribes. A NaN score (of any float type: Python, ``np.float32``,
    ``np.float64``) means the score could not be computed, which is not the same as "no observation": it makes
    that target's ``S_u`` and the rollout score NaN instead of being read as 0.

    Returns NaN when there is no target. Raises ValueError when ``num_revisits < 1``, when a target has more scores
    than K (a score for a revisit that was not prescribed), or for an infinite score.
    """
    if num_revisits <= 0:
        raise ValueError("num_revisits must be >= 1")
    if not per_target_revisit_scores:
        return float("nan")
    vals = []
    for target, scores in per_target_revisit_scores.items():
        scores = list(scores)
        if len(scores) > num_revisits:
            raise ValueError(f"target {target!r} has {len(scores)} revisit scores but K = {num_revisits} revisits are "
                             "prescribed; pass one score per prescribed revisit (None when it has no observation)")
        s = [0.0 if v is None else float(v) for v in scores]
        if any(np.isinf(x) for x in s):
            raise ValueError(f"target {target!r} has an infinite revisit score: {scores}")
        vals.append(sum(s) / num_revisits)  # NaN propagates
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


def mean(values: Sequence[float], n_boot: int = 2000, seed: int = 0) -> dict[str, float]:
    """The aggregation of every metric of the benchmark (:attr:`evaluate.registry.MetricSpec.aggregation`): the
    mean over the videos of the finite values, with a 95 % percentile bootstrap interval over them
    (:func:`bootstrap_ci`). Returns ``{"mean", "lo", "hi", "n"}``."""
    return bootstrap_ci(values, n_boot=n_boot, seed=seed)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0,
                     alpha: float = 0.05) -> dict[str, float]:
    """Paired comparison over the same cases: mean of ``a - b``, its interval, and the fraction of resamples
    whose mean difference is <= 0 (a one-sided bootstrap p-value for ``a > b``)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError("paired comparison needs the same cases on both sides")
    ok = np.isfinite(x) & np.isfinite(y)
    d = (x - y)[ok]
    if len(d) == 0:
        return {"diff": float("nan"), "lo": float("nan"), "hi": float("nan"), "p_le_0": float("nan"), "n": 0}
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    return {"diff": float(d.mean()), "lo": float(np.quantile(means, alpha / 2)),
            "hi": float(np.quantile(means, 1 - alpha / 2)), "p_le_0": float((means <= 0).mean()), "n": int(len(d))}
