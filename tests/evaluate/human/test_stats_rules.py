"""The human-study statistics at their edges: a majority needs more than half (exactly half is not one), the
metric's preference for missing / infinite values, the seeded percentile bootstrap against an independent
resampling (and its alpha), exact refusals, the correlations against scipy and their reasons when undefined,
Fleiss' kappa against statsmodels (and its refusals), the gate's answers (case and spaces), the per-item
majority at a tie, and aspect means."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from evaluate.human import stats


def test_exactly_half_is_not_a_majority():
    assert stats.majority(["A", "A", "B", "B"]) == stats.Majority(None, "split")
    assert stats.majority(["T", "T", "A", "B"]) == stats.Majority(None, "split")
    assert stats.majority(["A", "A", "A", "B"]) == stats.Majority("A", "decisive")
    assert stats.majority(["B"]) == stats.Majority("B", "decisive")
    assert stats.majority(["T"]) == stats.Majority("T", "majority_tie")
    with pytest.raises(ValueError, match=r"^vote 'a' is not one of \('A', 'T', 'B'\) \(A wins, tie, B wins\)$"):
        stats.majority(["a"])


def test_metric_preference_needs_two_finite_values():
    assert stats.metric_preference(None, 0.5) is None and stats.metric_preference(0.5, None) is None  # type: ignore[arg-type]
    assert stats.metric_preference(float("inf"), 0.5) is None and stats.metric_preference(0.5, float("-inf")) is None
    assert stats.metric_preference(0.5, float("nan")) is None
    assert stats.metric_preference(0.1, 0.5) == "B" and stats.metric_preference(0.1, 0.5, False) == "A"
    assert stats.metric_preference(0.5, 0.5, False) == "T"


def _independent_bootstrap(hits: list[bool], n_boot: int, seed: int, alpha: float) -> tuple[float, float]:
    h = np.asarray(hits, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(h), size=(n_boot, len(h)))
    means = np.array([h[row].sum() / len(h) for row in idx])
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_bootstrap_share_is_the_seeded_percentile_interval(alpha):
    hits = [True] * 7 + [False] * 4
    got = stats.bootstrap_share(hits, 500, 11, alpha)
    assert got == pytest.approx(_independent_bootstrap(hits, 500, 11, alpha), abs=1e-15)
    assert all(np.isnan(stats.bootstrap_share([], 500, 11, alpha)))
    assert stats.bootstrap_share([True], 50, 0, alpha) == (1.0, 1.0)


def test_pairwise_agreement_counts_every_kind_and_the_interval_uses_its_arguments():
    pairs = [(["A", "A", "B"], "A"), (["B", "B", "A"], "A"), (["A", "T", "B"], "B"), ([], "A"),
             (["T", "T", "A"], "T"), (["B", "B", "B"], "B"), (["A", "A", "A"], "T")]
    r = stats.pairwise_agreement(pairs, n_boot=300, seed=4)
    assert {k: r[k] for k in ("pairs", "decisive", "agree", "majority_ties", "splits", "no_votes", "metric_ties")} == {
        "pairs": 7, "decisive": 4, "agree": 2, "majority_ties": 1, "splits": 1, "no_votes": 1, "metric_ties": 1}
    assert r["agreement"] == 0.5 and (r["n_boot"], r["boot_seed"]) == (300, 4)
    assert (r["lo"], r["hi"]) == stats.bootstrap_share([True, False, True, False], 300, 4)
    with pytest.raises(ValueError, match=r"^metric preference 'X' is not one of"):
        stats.pairwise_agreement([(["A"], "X")])
    empty = stats.pairwise_agreement([])
    assert empty["pairs"] == 0 and np.isnan(empty["agreement"]) and np.isnan(empty["lo"])


def test_win_rates_refuse_a_self_pair_and_bad_votes():
    with pytest.raises(ValueError, match=r"^a pair compares 'x' with itself$"):
        stats.win_rates([("x", "x", ["A"], "A")])
    with pytest.raises(ValueError, match="not one of"):
        stats.win_rates([("x", "y", ["A"], None)])
    with pytest.raises(ValueError, match="not one of"):
        stats.win_rates([("x", "y", ["Q"], "A")])
    with pytest.raises(ValueError, match="not one of"):
        stats.win_rates([("x", "y", ["Q"], "A")][::-1] + [("y", "x", ["Q"], "A")])
    w = stats.win_rates([("x", "y", [], "B")])
    assert np.isnan(w["x"]["human"]) and w["x"]["auto"] == 0.0 and w["y"]["auto"] == 1.0
    assert (w["x"]["votes"], w["x"]["pairs"]) == (0, 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correlations_equal_scipy_over_the_finite_points(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, 12).astype(float)  # ties on purpose
    y = x + rng.normal(0, 1.5, 12)
    x[3], y[7] = np.nan, np.inf
    keep = np.isfinite(x) & np.isfinite(y)
    rho, r = stats.spearman(x, y), stats.plcc(list(x), list(y))
    assert rho.value == pytest.approx(spearmanr(x[keep], y[keep]).statistic, abs=1e-12) and rho.n == 10
    assert r.value == pytest.approx(pearsonr(x[keep], y[keep]).statistic, abs=1e-12) and r.n == 10
    assert rho.reason == "" and r.reason == "" and rho.ok() and r.ok()


def test_undefined_correlations_name_the_side_and_the_unit():
    c = stats.spearman([1, 2, 3], [0.5, 0.5, 0.5], "arms")
    assert np.isnan(c.value) and c.n == 3 and not c.ok()
    assert c.reason == "Spearman's rho is undefined: every automatic value is the same (0.5)"
    c = stats.plcc([2, 2, 2], [1, 2, 3])
    assert c.reason == "PLCC is undefined: every human value is the same (2)"
    c = stats.spearman([1, 2, 3, np.nan], [1, np.nan, 2, 3], "arms")
    assert c.reason == "Spearman's rho needs at least 3 arms, has 2" and c.n == 2
    c = stats.plcc([1, 2], [2, 1])
    assert c.reason == "PLCC needs at least 3 points, has 2"
    assert stats.spearman([1, 2, 3], [3, 2, 1]).value == pytest.approx(-1.0)
    for bad in (([1, 2, 3], [1, 2]), ([[1, 2, 3]], [[1, 2, 3]])):
        with pytest.raises(ValueError, match=r"x and y must be 1-D of the same length"):
            stats.spearman(*bad)
        with pytest.raises(ValueError, match=r"^PLCC: x and y"):
            stats.plcc(*bad)


def test_fleiss_kappa_equals_statsmodels_and_refuses_what_is_not_counts():
    irr = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(9)
    for raters, cats in ((2, 2), (3, 3), (5, 4)):
        counts = np.array([np.bincount(rng.integers(0, cats, raters), minlength=cats) for _ in range(25)])
        assert stats.fleiss_kappa(counts) == pytest.approx(irr.fleiss_kappa(counts, method="fleiss"), abs=1e-12)
    with pytest.raises(ValueError, match=r"non-negative counts, got shape \(2, 2\)"):
        stats.fleiss_kappa(np.array([[2, -1], [1, 1]]))
    with pytest.raises(ValueError, match=r"got shape \(3,\)"):
        stats.fleiss_kappa(np.array([1, 2, 3]))
    assert np.isnan(stats.fleiss_kappa(np.array([[1, 0], [0, 1]])))  # no subject has two ratings
    assert stats.fleiss_kappa(np.array([[2, 0], [0, 2], [1, 1]])) == pytest.approx(1 / 3)  # p_e 0.5, P 2/3
    assert stats.fleiss_kappa(np.array([[0, 2], [1, 1]])) == pytest.approx(
        ((1 + 0) / 2 - (0.25 ** 2 + 0.75 ** 2)) / (1 - (0.25 ** 2 + 0.75 ** 2)))


def test_count_matrix_refuses_an_unknown_rating():
    assert stats.count_matrix([], ["y", "n"]).shape == (0, 2)
    assert stats.count_matrix([["n", "n", "y"]], ["y", "n"]).tolist() == [[1, 2]]
    with pytest.raises(ValueError, match=r"^rating 'm' is not one of the categories \['y', 'n'\]$"):
        stats.count_matrix([["y", "m"]], ["y", "n"])


def test_the_gate_reads_yes_and_no_in_any_case_and_refuses_anything_else():
    refs = ["yes", "no", "Yes", " NO ", "yes", "no", "yes", "no"]
    assert stats.gated_items(True, [" YES", "no", "yes", "no", "no", "yes", "yes", "No"], refs) == [1, 1, 1, 1, 0, 0,
                                                                                                    1, 1]
    with pytest.raises(ValueError, match=r"^need 8 reference answers, got 7$"):
        stats.gated_items(True, ["yes"] * 8, refs[:7])
    with pytest.raises(ValueError, match=r"^need 8 reference answers, got 7$"):
        stats.gated_items(False, None, refs[:7])
    with pytest.raises(ValueError, match=r"^a started instance needs 8 answers, got 9$"):
        stats.gated_items(True, ["yes"] * 9, refs)
    with pytest.raises(ValueError, match=r"^a started instance needs 8 answers, got None$"):
        stats.gated_items(True, None, refs)
    with pytest.raises(ValueError, match=r"^answer 3 = 'maybe' is not yes/no$"):
        stats.gated_items(True, ["yes", "no", "maybe"] + ["yes"] * 5, refs)
    with pytest.raises(ValueError, match=r"^reference 1 = 'y' is not yes/no$"):
        stats.gated_items(True, ["yes"] * 8, ["y"] + refs[1:])


def test_majority_label_and_aspects():
    assert stats.majority_label([1, 0, 1, 0]) is None and stats.majority_label([1, 1, 0, 0, 0]) == 0
    assert stats.majority_label([1]) == 1 and stats.majority_label([0]) == 0
    assert stats.majority_label([1, 1, 1, 0]) == 1
    a = stats.aspect_scores([1, 0, 0.5, 1], ["p", "q", "p", "q"])
    assert a == {"p": 0.75, "q": 0.5, "overall": 0.625} and list(a) == ["p", "q", "overall"]


def test_the_bootstrap_defaults_and_both_tails():
    hits = [True] * 130 + [False] * 70  # fine-grained shares: every quantile moves with alpha
    assert stats.bootstrap_share(hits) == stats.bootstrap_share(hits, 2000, 0, 0.05)
    lo, hi = stats.bootstrap_share(hits, 400, 1, 0.3)
    assert (lo, hi) == pytest.approx(_independent_bootstrap(hits, 400, 1, 0.3), abs=1e-15)
    assert stats.pairwise_agreement([(["A"], "A")])["n_boot"] == 2000
    assert stats.pairwise_agreement([(["A"], "A")])["boot_seed"] == 0


def test_fleiss_kappa_of_one_subject_and_of_near_total_agreement():
    assert stats.fleiss_kappa(np.array([[2, 1]])) == pytest.approx(-0.5)  # P = 1/3, p_e = 5/9
    # one category holds all but one of four billion ratings: chance agreement is 1 within 1e-9, kappa undefined
    assert np.isnan(stats.fleiss_kappa(np.array([[2e9, 1.0], [2e9, 0.0]])))


def test_the_default_bootstrap_draws_2000_resamples():
    hits = [bool(x) for x in [0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0]]
    assert stats.bootstrap_share(hits) == stats.bootstrap_share(hits, 2000, 0) != stats.bootstrap_share(hits, 2001, 0)
