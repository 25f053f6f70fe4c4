"""A ranking from people: the Bradley-Terry model fitted to a static study's A/B votes, with bootstrap intervals.

Beyond the paper (which reports agreement, not a ranking): public model arenas rank models from pairwise human
votes with the Bradley-Terry model (inference from their published method descriptions; no code is taken from
them). Each arm ``i`` (a model, or a model under a context policy) gets a strength ``theta_i`` on the log-odds
scale, and ``P(i preferred over j) = 1 / (1 + exp(-(theta_i - theta_j)))``.

* Data: every raw vote of a pair (not the majority): a vote for a side is a win of its arm, a tie half a win of
  each (the Win / Tie / Loss = 1 / 0.5 / 0 scoring of :func:`evaluate.human.stats.win_rates`).
* Fit: maximum likelihood by Newton's method on the log-likelihood, with ``sum(theta) = 0`` (the scores are
  relative: only differences mean anything). The estimate exists only when every arm both wins and loses against
  the others through some chain of votes (the comparison graph with an edge ``i -> j`` where ``i`` took some of
  a vote against ``j`` is strongly connected; Zermelo 1929, Ford 1957); otherwise the scores are NaN with the
  reason, never a huge number that reads as a result.
* Interval: 95 % percentile bootstrap over the pairs (a pair keeps all its votes); resamples without a finite
  estimate are dropped and counted.
* Beside it, the metric's own ranking of the same arms (its automatic win rate over the same pairs) and their
  agreement: Spearman's rho across the arms.

Checked against statsmodels' binomial GLM on a fixed vote set and against the two-arm closed form
``theta_a - theta_b = log(W_a / W_b)`` (tests/evaluate/human/test_ranking.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .stats import SCORE, _check_choice, spearman

#: Newton iterations and the tolerance on the largest score change
MAX_ITER, TOL = 100, 1e-10
#: strengths closer than this are one strength: arms that the votes cannot tell apart (symmetric records) come out
#: of Newton's method a few ulps apart, and a rank or a rank correlation must not read that noise as an order
TIE_TOL = 1e-8


@dataclass
class BTFit:
    """``arms`` (sorted) and their ``scores`` (log-odds strengths, mean 0; NaN with ``reason`` when the maximum
    likelihood estimate does not exist), ``wins`` (votes won, ties counting half) and ``votes`` per arm."""

    arms: list[Hashable]
    scores: np.ndarray
    wins: np.ndarray
    votes: np.ndarray
    reason: str = ""

    def ok(self) -> bool:
        return bool(len(self.arms) >= 2 and np.isfinite(self.scores).all())


def _per_pair(pairs: Sequence[tuple[Hashable, Hashable, Sequence[str]]]
              ) -> tuple[list[Hashable], np.ndarray, np.ndarray]:
    """(arms, Wp, Np) with one (K, K) matrix per pair: ``Wp[p, i, j]`` = votes ``i`` took against ``j`` in pair
    ``p`` (ties half), ``Np[p, i, j]`` = votes between them; a bootstrap resample sums its pairs' matrices."""
    arms = sorted({a for a, b, _ in pairs} | {b for a, b, _ in pairs}, key=str)
    ix = {a: k for k, a in enumerate(arms)}
    K = len(arms)
    Wp, Np = np.zeros((len(pairs), K, K)), np.zeros((len(pairs), K, K))
    for p, (a, b, votes) in enumerate(pairs):
        if a == b:
            raise ValueError(f"a pair compares {a!r} with itself")
        i, j = ix[a], ix[b]
        share = sum(SCORE[_check_choice(v)] for v in votes)  # side A's share of the votes
        Wp[p, i, j], Wp[p, j, i] = share, len(votes) - share
        Np[p, i, j] = Np[p, j, i] = len(votes)
    return arms, Wp, Np


def _strongly_connected(W: np.ndarray) -> bool:
    """Every arm reaches every other along edges ``i -> j`` where ``i`` took some of a vote against ``j``."""
    K = len(W)
    adj = W > 0
    for graph in (adj, adj.T):  # reach everyone from arm 0, and be reached by everyone
        seen, stack = {0}, [0]
        while stack:
            u = stack.pop()
            for v in np.flatnonzero(graph[u]):
                if v not in seen:
                    seen.add(int(v))
                    stack.append(int(v))
        if len(seen) < K:
            return False
    return True


def _fit(W: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Newton's method on the Bradley-Terry log-likelihood, ``theta[0]`` fixed at 0 during the fit, then centred."""
    K = len(W)
    theta = np.zeros(K)
    wins = W.sum(axis=1)
    for _ in range(MAX_ITER):
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))  # P(i beats j)
        grad = wins - (N * p).sum(axis=1)
        h = N * p * (1.0 - p)
        hess = np.diag(h.sum(axis=1)) - h  # the negative Hessian (a graph Laplacian)
        step = np.linalg.solve(hess[1:, 1:], grad[1:])
        theta[1:] += step
        if np.abs(step).max() < TOL:
            break
    centred: np.ndarray = theta - theta.mean()
    return centred


def bradley_terry(pairs: Sequence[tuple[Hashable, Hashable, Sequence[str]]]) -> BTFit:
    """Fit the Bradley-Terry model to ``pairs``: (arm shown as A, arm shown as B, the pair's votes "A"/"T"/"B")."""
    arms, Wp, Np = _per_pair(pairs)
    return _fit_counts(arms, Wp.sum(axis=0), Np.sum(axis=0))


def _fit_counts(arms: list[Hashable], W: np.ndarray, N: np.ndarray) -> BTFit:
    wins, votes = W.sum(axis=1), N.sum(axis=1)
    if len(arms) < 2:
        return BTFit(arms, np.full(len(arms), np.nan), wins, votes, "fewer than 2 arms")
    if not _strongly_connected(W):
        never = [str(a) for a, w, n in zip(arms, wins, votes) if w == 0 or w == n]
        why = (f"{', '.join(never)} won or lost every vote" if never else
               "the arms split into groups that never beat one another")
        return BTFit(arms, np.full(len(arms), np.nan), wins, votes,
                     f"no finite Bradley-Terry estimate: {why} (more votes or arms that meet)")
    return BTFit(arms, _fit(W, N), wins, votes)


@dataclass
class HumanRanking:
    """The human Bradley-Terry ranking of one metric's pairs beside the metric's own ranking.

    ``score[arm]``, ``lo[arm]``, ``hi[arm]``: the strength and its 95 % bootstrap interval; ``rank_human`` (1 = the
    strongest) and ``rank_metric`` (by the metric's automatic win rate ``auto``, 1 = the highest; values within
    :data:`TIE_TOL` are tied and share the better rank); ``rho``: Spearman's rho of the scores and the automatic win
    rates across the arms, tied values at their average rank (NaN with ``rho_reason`` below 3 arms or for a constant
    vector); ``dropped``: resamples without a finite estimate."""

    arms: list[Hashable]
    score: dict[Hashable, float]
    lo: dict[Hashable, float]
    hi: dict[Hashable, float]
    auto: dict[Hashable, float]
    rank_human: dict[Hashable, int]
    rank_metric: dict[Hashable, int]
    rho: float
    rho_reason: str
    reason: str = ""
    n_boot: int = 0
    dropped: int = 0
    votes: dict[Hashable, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (arm names as strings, NaN as None)."""
        def num(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return {"arms": {str(a): {"score": num(self.score[a]), "lo": num(self.lo[a]), "hi": num(self.hi[a]),
                                  "rank_human": self.rank_human.get(a), "rank_metric": self.rank_metric.get(a),
                                  "auto_win_rate": num(self.auto[a]), "votes": self.votes.get(a, 0)}
                         for a in self.arms},
                "spearman": num(self.rho), "spearman_reason": self.rho_reason, "reason": self.reason,
                "n_boot": self.n_boot, "dropped_resamples": self.dropped}


def tied(values: dict[Hashable, float], tol: float = TIE_TOL) -> dict[Hashable, float]:
    """``values`` with every run of values within ``tol`` of its neighbour (in sorted order) replaced by the run's
    lowest value: ties that floating-point noise split are ties again. NaN stays NaN."""
    out = dict(values)
    start = prev = float("nan")
    for v, _, a in sorted((v, str(a), a) for a, v in values.items() if np.isfinite(v)):
        if not v - prev <= tol:  # the first value (prev NaN) starts a run too
            start = v
        out[a] = start
        prev = v
    return out


def _ranks(values: dict[Hashable, float]) -> dict[Hashable, int]:
    """1 = the largest; values within :data:`TIE_TOL` are tied and share the better rank (1, 1, 3: scipy's
    ``rankdata(method="min")`` of the negated values); NaN values are left out."""
    have = {a: v for a, v in tied(values).items() if np.isfinite(v)}
    return {a: 1 + sum(1 for w in have.values() if w > v) for a, v in have.items()}


def human_ranking(pairs: Sequence[tuple[Hashable, Hashable, Sequence[str], str | None]], n_boot: int = 2000,
                  seed: int = 0) -> HumanRanking:
    """``pairs``: (arm A, arm B, the pair's votes, the metric's preference "A"/"T"/"B"), as for
    :func:`evaluate.human.stats.win_rates`. Bootstrap: ``n_boot`` resamples of the pairs with ``seed``."""
    fit = bradley_terry([(a, b, v) for a, b, v, _ in pairs])
    arms = fit.arms
    auto_acc: dict[Hashable, list[float]] = {a: [] for a in arms}
    for a, b, _, pref in pairs:
        if pref is None:  # the metric could not compare this pair
            continue
        s = SCORE[_check_choice(pref)]
        auto_acc[a].append(s)
        auto_acc[b].append(1.0 - s)
    auto = {a: float(np.mean(x)) if x else float("nan") for a, x in auto_acc.items()}
    score = {a: float(s) for a, s in zip(arms, fit.scores)}
    lo = dict.fromkeys(arms, float("nan"))
    hi = dict.fromkeys(arms, float("nan"))
    dropped = 0
    if fit.ok() and n_boot > 0:
        _, Wp, Np = _per_pair([(a, b, v) for a, b, v, _ in pairs])
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(n_boot):
            k = np.bincount(rng.integers(0, len(pairs), len(pairs)), minlength=len(pairs)).astype(np.float64)
            f = _fit_counts(arms, np.tensordot(k, Wp, 1), np.tensordot(k, Np, 1))
            if f.ok():  # an arm missing from the resample has no votes: not strongly connected, dropped
                draws.append(f.scores)
            else:
                dropped += 1
        if draws:
            q = np.quantile(np.array(draws), [0.025, 0.975], axis=0)
            lo = {a: float(q[0, k]) for k, a in enumerate(arms)}
            hi = {a: float(q[1, k]) for k, a in enumerate(arms)}
    # on the tie-snapped values: tied strengths get their average rank (scipy), not an order made of rounding noise
    ts, ta = tied(score), tied(auto)
    rho = spearman([ts[a] for a in arms], [ta[a] for a in arms], "arms (models or policies)")
    return HumanRanking(arms, score, lo, hi, auto, _ranks(score), _ranks(auto), rho.value, rho.reason,
                        fit.reason, n_boot, dropped, {a: int(n) for a, n in zip(arms, fit.votes)})
