"""Agreement statistics of a human study (WorldMemBench appendix F, Tables 6 and 7). Pure functions of votes.

Static memory (blinded A/B pairs; each vote ``"A"``, ``"T"`` (tie) or ``"B"``, naming the side shown):

* :func:`majority`: the human majority of one pair. *Decisive* when more than half of its votes name one side;
  a *majority tie* when more than half say Tie; a *split* otherwise (with three annotators: the three-way
  A / Tie / B split of the paper).
* :func:`pairwise_agreement`: the share of decisive pairs whose majority side is the side the metric prefers.
  Majority ties and splits are not in the denominator and are counted separately (the paper's Human Identity:
  65 of 76 decisive pairs = 85.5 %, one majority tie and seven three-way splits). A metric that scores both sides
  equally prefers neither, so it never agrees with a decisive majority (counted as ``metric_ties``).
  95 % percentile bootstrap interval over the decisive pairs.
* :func:`win_rates`: per arm (a model, or a model under a context policy), the human win rate over *all raw
  votes* (Win / Tie / Loss = 1 / 0.5 / 0) and the automatic win rate over the same pairs (the metric's
  preference, once per pair); :func:`spearman` of the two across arms is the paper's model-level rho.

Dynamic memory (event-gated eight-question checklist):

* :func:`gated_items`: one annotator's eight 0/1 scores of an instance: 0 everywhere when they saw no event start
  (the judge's gate), else 1 where their answer matches the frozen reference answer.
* :func:`majority_label`: the per-item majority of the annotators (the human reference label); None on an exact
  tie (possible only with an even number of votes).
* :func:`spearman` and :func:`plcc` of the per-instance human and judge satisfaction fractions, overall and per
  aspect (mean of its two items).

Inter-annotator agreement: :func:`fleiss_kappa` over a subjects x categories count matrix.

Undefined values are NaN with a reason, never a number that reads as a result (a rank correlation of fewer than 3
points or of a constant vector, an agreement with no decisive pair).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CHOICES = ("A", "T", "B")  # the three answers of a static pair: side A wins, tie, side B wins
SCORE = {"A": 1.0, "T": 0.5, "B": 0.0}  # side A's score for a vote (Win / Tie / Loss = 1 / 0.5 / 0)
#: a 1-D run of values: a sequence of floats or a float array
Values = Sequence[float] | np.ndarray
DECISIVE, MAJORITY_TIE, SPLIT, NO_VOTES = "decisive", "majority_tie", "split", "no_votes"


def _check_choice(v: str | None) -> str:
    if v not in CHOICES:
        raise ValueError(f"vote {v!r} is not one of {CHOICES} (A wins, tie, B wins)")
    return v


@dataclass(frozen=True)
class Majority:
    """``label``: the majority answer ("A", "T", "B") or None; ``kind``: decisive | majority_tie | split |
    no_votes."""

    label: str | None
    kind: str


def majority(votes: Sequence[str]) -> Majority:
    """The strict majority (more than half of the votes) of one pair's votes."""
    votes = [_check_choice(v) for v in votes]
    if not votes:
        return Majority(None, NO_VOTES)
    for c in CHOICES:
        if 2 * votes.count(c) > len(votes):
            return Majority(c, MAJORITY_TIE if c == "T" else DECISIVE)
    return Majority(None, SPLIT)


def metric_preference(value_a: float, value_b: float, higher_is_better: bool = True) -> str | None:
    """The side the metric prefers: "A", "B", or "T" when both sides score the same; None when either value is
    missing or not finite (the pair cannot be compared)."""
    if value_a is None or value_b is None or not (np.isfinite(value_a) and np.isfinite(value_b)):
        return None
    if value_a == value_b:
        return "T"
    return "A" if (value_a > value_b) == higher_is_better else "B"


def bootstrap_share(hits: Sequence[bool], n_boot: int = 2000, seed: int = 0, alpha: float = 0.05
                    ) -> tuple[float, float]:
    """Percentile bootstrap interval of the share of true values (resampling the units with replacement); NaN
    bounds without units."""
    h = np.asarray(hits, dtype=np.float64)
    if len(h) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = h[rng.integers(0, len(h), size=(n_boot, len(h)))].mean(axis=1)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def pairwise_agreement(pairs: Sequence[tuple[Sequence[str], str | None]], n_boot: int = 2000, seed: int = 0
                       ) -> dict[str, Any]:
    """Agreement of a metric with the decisive human majority.

    Args:
        pairs: per pair, (its votes, the metric's preference "A" / "T" / "B"). A pair whose metric preference is
            None is refused (plan only pairs the metric scores on both sides).
    Returns:
        ``pairs``, ``decisive``, ``agree``, ``agreement`` (agree / decisive; NaN without decisive pairs),
        ``lo`` / ``hi`` (95 % bootstrap interval over the decisive pairs), ``majority_ties``, ``splits``,
        ``no_votes``, ``metric_ties`` (decisive pairs the metric scored equal).
    """
    out: dict[str, Any] = {"pairs": len(pairs), "decisive": 0, "agree": 0, "majority_ties": 0, "splits": 0, "no_votes": 0,
           "metric_ties": 0}
    hits = []
    for votes, pref in pairs:
        if pref not in CHOICES:
            raise ValueError(f"metric preference {pref!r} is not one of {CHOICES}")
        m = majority(votes)
        if m.kind == DECISIVE:
            hit = m.label == pref
            hits.append(hit)
            out["decisive"] += 1
            out["agree"] += int(hit)
            out["metric_ties"] += int(pref == "T")
        elif m.kind == MAJORITY_TIE:
            out["majority_ties"] += 1
        elif m.kind == SPLIT:
            out["splits"] += 1
        else:
            out["no_votes"] += 1
    out["agreement"] = out["agree"] / out["decisive"] if out["decisive"] else float("nan")
    out["lo"], out["hi"] = bootstrap_share(hits, n_boot, seed)
    out["n_boot"], out["boot_seed"] = n_boot, seed
    return out


def win_rates(pairs: Sequence[tuple[str, str, Sequence[str], str | None]]) -> dict[str, dict[str, Any]]:
    """Per arm: human win rate over every raw vote of its pairs and automatic win rate over the pairs.

    Args:
        pairs: (arm shown as A, arm shown as B, the pair's votes, the metric's preference).
    Returns:
        ``{arm: {"human", "auto", "votes", "pairs"}}``; ``human`` is NaN for an arm without votes.
    """
    acc: dict[str, dict[str, list[float]]] = {}
    for arm_a, arm_b, votes, pref in pairs:
        if arm_a == arm_b:
            raise ValueError(f"a pair compares {arm_a!r} with itself")
        auto_a = SCORE[_check_choice(pref)]
        human_a = [SCORE[_check_choice(v)] for v in votes]  # side A's score of each vote
        for arm, flip in ((arm_a, False), (arm_b, True)):
            r = acc.setdefault(arm, {"h": [], "a": []})
            r["a"].append(1.0 - auto_a if flip else auto_a)
            r["h"] += [1.0 - x if flip else x for x in human_a]
    return {arm: {"human": float(np.mean(r["h"])) if r["h"] else float("nan"), "auto": float(np.mean(r["a"])),
                  "votes": len(r["h"]), "pairs": len(r["a"])} for arm, r in acc.items()}


@dataclass(frozen=True)
class Correlation:
    """A correlation coefficient with the number of points; ``value`` NaN and ``reason`` set when undefined."""

    value: float
    n: int
    reason: str = ""

    def ok(self) -> bool:
        return bool(np.isfinite(self.value))


def _xy(x: Values, y: Values, what: str, unit: str = "points"
        ) -> tuple[np.ndarray, np.ndarray, str]:
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"{what}: x and y must be 1-D of the same length, got {a.shape} and {b.shape}")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if len(a) < 3:
        return a, b, f"{what} needs at least 3 {unit}, has {len(a)}"
    if np.all(a == a[0]) or np.all(b == b[0]):
        side = "human" if np.all(a == a[0]) else "automatic"
        return a, b, f"{what} is undefined: every {side} value is the same ({(a if side == 'human' else b)[0]:g})"
    return a, b, ""


def spearman(x: Values, y: Values, unit: str = "points") -> Correlation:
    """Spearman's rho (average ranks for ties, scipy) over the points where both are finite; ``unit`` names the
    points in the reason of an undefined value (e.g. "arms")."""
    from scipy.stats import spearmanr

    a, b, why = _xy(x, y, "Spearman's rho", unit)
    if why:
        return Correlation(float("nan"), len(a), why)
    return Correlation(float(spearmanr(a, b).statistic), len(a))


def plcc(x: Values, y: Values, unit: str = "points") -> Correlation:
    """Pearson's linear correlation coefficient (PLCC, scipy) over the points where both are finite."""
    from scipy.stats import pearsonr

    a, b, why = _xy(x, y, "PLCC", unit)
    if why:
        return Correlation(float("nan"), len(a), why)
    return Correlation(float(pearsonr(a, b).statistic), len(a))


def plcc_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair: ``a``, ``b`` (B, n) finite float64 -> (B,) float64, NaN where a row of either
    is constant (undefined, as in :func:`plcc`). The batch form of :func:`plcc` for a bootstrap's B resamples at
    once (equal to it within float rounding: one numpy pass instead of B scipy calls)."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    constant = (a == a[:, :1]).all(axis=1) | (b == b[:, :1]).all(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.einsum("ij,ij->i", a, b) / np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair (average ranks for ties, as scipy's ``spearmanr``): :func:`plcc_rows` of
    the rows' ranks; (B, n) -> (B,), NaN where a row is constant."""
    from scipy.stats import rankdata

    return plcc_rows(rankdata(a, axis=1), rankdata(b, axis=1))


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of a (subjects, categories) matrix of rating counts.

    Subjects may have different numbers of raters (the usual extension: each subject's agreement is computed over
    its own raters, category shares over all ratings); subjects with fewer than two ratings are left out. NaN when
    no subject has two ratings or every rating falls in one category (chance agreement 1: kappa is undefined).
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 2 or (c < 0).any():
        raise ValueError(f"counts must be a (subjects, categories) matrix of non-negative counts, got shape {c.shape}")
    n = c.sum(axis=1)
    c, n = c[n >= 2], n[n >= 2]
    if len(c) == 0:
        return float("nan")
    p_i = ((c * c).sum(axis=1) - n) / (n * (n - 1))
    p_j = c.sum(axis=0) / n.sum()
    p_e = float((p_j ** 2).sum())
    if np.isclose(p_e, 1.0):
        return float("nan")
    return float((p_i.mean() - p_e) / (1 - p_e))


def count_matrix(ratings: Sequence[Sequence[Hashable]], categories: Sequence[Hashable]) -> np.ndarray:
    """(subjects, categories) counts of each subject's ratings."""
    index = {c: i for i, c in enumerate(categories)}
    out = np.zeros((len(ratings), len(categories)), dtype=np.int64)
    for s, rs in enumerate(ratings):
        for r in rs:
            if r not in index:
                raise ValueError(f"rating {r!r} is not one of the categories {list(categories)}")
            out[s, index[r]] += 1
    return out


def _yes(a: object, what: str) -> bool:
    s = str(a).strip().lower()
    if s not in ("yes", "no"):
        raise ValueError(f"{what} = {a!r} is not yes/no")
    return s == "yes"


def gated_items(started: bool, answers: Sequence[str] | None, references: Sequence[str]) -> list[int]:
    """One annotator's eight gated scores: all 0 when ``started`` is false (the answers are not read), else 1 where
    the answer (yes/no) equals the reference answer."""
    if len(references) != 8:
        raise ValueError(f"need 8 reference answers, got {len(references)}")
    if not started:
        return [0] * 8
    if answers is None or len(answers) != 8:
        raise ValueError(f"a started instance needs 8 answers, got {None if answers is None else len(answers)}")
    return [int(_yes(a, f"answer {i + 1}") == _yes(r, f"reference {i + 1}"))
            for i, (a, r) in enumerate(zip(answers, references))]


def majority_label(values: Sequence[int]) -> int | None:
    """The majority of 0/1 values: 1 when more than half are 1, 0 when more than half are 0, None on a tie or
    without values."""
    ones = int(sum(values))
    if 2 * ones > len(values):
        return 1
    if 2 * (len(values) - ones) > len(values):
        return 0
    return None


def aspect_scores(items: Sequence[float | None], aspects: Sequence[str]) -> dict[str, float]:
    """Per aspect, the mean of its items (NaN when one of them is undefined), plus ``overall`` (mean of all)."""
    v = np.asarray([np.nan if x is None else x for x in items], dtype=np.float64)
    out = {a: float(v[[i for i, b in enumerate(aspects) if b == a]].mean()) for a in dict.fromkeys(aspects)}
    out["overall"] = float(v.mean())
    return out

