"""The human-study statistics against hand-computed examples: the paper's Human Identity case (65 of 76 decisive
pairs, one majority tie, seven three-way splits), majorities, win rates, Spearman's rho and PLCC, Fleiss' kappa
(the textbook example and unequal raters), and the event gate of the dynamic checklist."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.human import stats


def test_majority_kinds():
    assert stats.majority(["A", "A", "B"]) == stats.Majority("A", "decisive")
    assert stats.majority(["B", "T", "B"]) == stats.Majority("B", "decisive")
    assert stats.majority(["T", "T", "A"]) == stats.Majority("T", "majority_tie")
    assert stats.majority(["A", "T", "B"]) == stats.Majority(None, "split")
    assert stats.majority(["A", "B"]) == stats.Majority(None, "split")  # two annotators who disagree
    assert stats.majority([]) == stats.Majority(None, "no_votes")
    with pytest.raises(ValueError, match="not one of"):
        stats.majority(["A", "maybe"])


def test_the_papers_human_identity_case():
    """65 agreements among 76 decisive pairs (85.5 %); one majority tie and seven three-way splits are left out of
    the denominator and counted apart: 84 pairs in all."""
    agree = [(["A", "A", "T"], "A")] * 40 + [(["B", "B", "B"], "B")] * 25           # 65 agree
    disagree = [(["A", "A", "B"], "B")] * 6 + [(["B", "B", "T"], "A")] * 5          # 11 disagree
    ties = [(["T", "T", "A"], "A")]                                                 # 1 majority tie
    splits = [(["A", "T", "B"], "B")] * 7                                           # 7 three-way splits
    r = stats.pairwise_agreement(agree + disagree + ties + splits)
    assert (r["pairs"], r["decisive"], r["agree"], r["majority_ties"], r["splits"]) == (84, 76, 65, 1, 7)
    assert round(100 * r["agreement"], 1) == 85.5
    assert r["agreement"] == pytest.approx(65 / 76)
    assert r["lo"] < r["agreement"] < r["hi"] and 0.7 < r["lo"] and r["hi"] < 0.95
    # the interval is the percentile bootstrap of the decisive pairs' hits, by hand
    hits = np.array([1] * 65 + [0] * 11, dtype=float)
    rng = np.random.default_rng(0)
    means = hits[rng.integers(0, 76, size=(2000, 76))].mean(axis=1)
    assert (r["lo"], r["hi"]) == (np.quantile(means, 0.025), np.quantile(means, 0.975))


def test_a_metric_tie_never_agrees_and_is_counted():
    r = stats.pairwise_agreement([(["A", "A", "A"], "T"), (["B", "B", "A"], "B"), (["T", "T", "T"], "T")])
    assert (r["decisive"], r["agree"], r["metric_ties"], r["majority_ties"]) == (2, 1, 1, 1)
    assert np.isnan(stats.pairwise_agreement([(["T", "T", "B"], "A")])["agreement"])
    with pytest.raises(ValueError):
        stats.pairwise_agreement([(["A"], None)])


def test_metric_preference_follows_the_direction():
    assert stats.metric_preference(0.9, 0.5) == "A"
    assert stats.metric_preference(0.9, 0.5, higher_is_better=False) == "B"
    assert stats.metric_preference(0.5, 0.5) == "T"
    assert stats.metric_preference(float("nan"), 0.5) is None


def test_win_rates_from_raw_votes_by_hand():
    """x vs y shown as A/B: votes A, T, B -> x scores 1, 0.5, 0; the pair shown the other way round swaps them."""
    pairs = [("x", "y", ["A", "T", "B"], "A"),
             ("y", "x", ["A", "A", "B"], "B"),
             ("x", "z", ["A", "A", "A"], "T")]
    w = stats.win_rates(pairs)
    assert w["x"]["human"] == pytest.approx((1 + 0.5 + 0 + 0 + 0 + 1 + 1 + 1 + 1) / 9)
    assert w["y"]["human"] == pytest.approx((0 + 0.5 + 1 + 1 + 1 + 0) / 6)
    assert w["z"]["human"] == pytest.approx(0.0)
    assert w["x"]["auto"] == pytest.approx((1 + 1 + 0.5) / 3) and w["y"]["auto"] == 0 and w["z"]["auto"] == 0.5
    assert (w["x"]["votes"], w["x"]["pairs"]) == (9, 3)


def _ranks(v):
    """Average ranks (1-based), by hand."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def _pearson(a, b):
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return num / (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5


def test_spearman_and_plcc_by_hand():
    x = [0.9, 0.1, 0.4, 0.4, 0.7, 0.2]
    y = [0.8, 0.3, 0.5, 0.2, 0.9, 0.1]
    assert stats.spearman(x, y).value == pytest.approx(_pearson(_ranks(x), _ranks(y)))
    assert stats.plcc(x, y).value == pytest.approx(_pearson(x, y))
    # 6 points with d = rank differences, no ties in y: rho = 1 - 6 sum d^2 / (n (n^2 - 1)) for untied x too
    x2 = [1, 2, 3, 4, 5]
    y2 = [2, 1, 4, 3, 5]
    assert stats.spearman(x2, y2).value == pytest.approx(1 - 6 * 4 / (5 * 24))


def test_undefined_correlations_say_why():
    c = stats.spearman([0.1, 0.2], [0.3, 0.4])
    assert np.isnan(c.value) and "at least 3" in c.reason
    c = stats.plcc([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])
    assert np.isnan(c.value) and "human" in c.reason and "same" in c.reason
    c = stats.spearman([0.1, float("nan"), 0.3, 0.4], [0.3, 0.4, 0.1, 0.9])  # NaN pairs dropped
    assert c.n == 3 and c.ok()


def test_fleiss_kappa_textbook_example():
    """Fleiss (1971) as tabulated on Wikipedia: 10 subjects, 14 raters, 5 categories -> kappa = 0.210."""
    counts = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                       [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    k = stats.fleiss_kappa(counts)
    assert round(k, 3) == 0.210
    # by hand: P_bar = 0.378, P_e = 0.213
    n = 14
    p_i = ((counts ** 2).sum(1) - n) / (n * (n - 1))
    p_j = counts.sum(0) / counts.sum()
    assert k == pytest.approx((p_i.mean() - (p_j ** 2).sum()) / (1 - (p_j ** 2).sum()))


def test_fleiss_kappa_agrees_with_statsmodels_when_installed():
    irr = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(3)
    counts = np.array([np.bincount(rng.integers(0, 3, 3), minlength=3) for _ in range(40)])
    assert stats.fleiss_kappa(counts) == pytest.approx(irr.fleiss_kappa(counts, method="fleiss"))


def test_fleiss_kappa_perfect_chance_and_unequal_raters():
    assert stats.fleiss_kappa(np.array([[3, 0, 0], [0, 3, 0], [0, 0, 3]])) == pytest.approx(1.0)
    assert np.isnan(stats.fleiss_kappa(np.array([[3, 0], [3, 0]])))  # one category only: undefined
    # a subject with one rating is left out; one with two raters counts with its own n
    c = np.array([[2, 1], [0, 2], [1, 0]])
    p_i = np.array([(4 + 1 - 3) / 6, (4 - 2) / 2])
    p_j = np.array([2, 3]) / 5
    assert stats.fleiss_kappa(c) == pytest.approx((p_i.mean() - (p_j ** 2).sum()) / (1 - (p_j ** 2).sum()))
    assert stats.count_matrix([["A", "A", "T"], ["B"]], stats.CHOICES).tolist() == [[2, 1, 0], [0, 0, 1]]


def test_the_event_gate_zeroes_every_item():
    refs = ["yes", "no"] * 4
    assert stats.gated_items(False, ["yes"] * 8, refs) == [0] * 8
    assert stats.gated_items(False, None, refs) == [0] * 8
    assert stats.gated_items(True, ["yes"] * 8, refs) == [1, 0] * 4
    with pytest.raises(ValueError):
        stats.gated_items(True, None, refs)
    assert stats.majority_label([1, 1, 0]) == 1 and stats.majority_label([0, 1, 0]) == 0
    assert stats.majority_label([0, 1]) is None and stats.majority_label([]) is None
    a = stats.aspect_scores([1, 0, 1, 1, 0, 0, None, 1], ["x", "x", "y", "y", "z", "z", "w", "w"])
    assert (a["x"], a["y"], a["z"]) == (0.5, 1.0, 0.0) and np.isnan(a["w"]) and np.isnan(a["overall"])


def test_the_batch_correlations_equal_scipys_row_by_row_and_mark_constant_rows():
    """``spearman_rows`` / ``plcc_rows`` (a bootstrap's resamples at once) equal scipy's ``spearmanr`` / ``pearsonr``
    on each row, ties included; a row where either side is constant is NaN (undefined), like ``spearman``."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    from evaluate.human import stats

    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, (200, 9)).astype(np.float64)  # small integers: many ties
    b = a * 0.5 + rng.normal(0, 1, (200, 9))
    a[7] = 2.0  # a constant row on one side
    b[11] = -1.0  # and on the other
    rho, r = stats.spearman_rows(a, b), stats.plcc_rows(a, b)
    for i in range(len(a)):
        if i in (7, 11):
            assert np.isnan(rho[i]) and np.isnan(r[i])
            assert not stats.spearman(a[i], b[i]).ok() and not stats.plcc(a[i], b[i]).ok()
            continue
        assert rho[i] == pytest.approx(spearmanr(a[i], b[i]).statistic, abs=1e-12)
        assert r[i] == pytest.approx(pearsonr(a[i], b[i]).statistic, abs=1e-12)
