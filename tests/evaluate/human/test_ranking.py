"""The Bradley-Terry ranking from A/B votes (evaluate/human/ranking.py) against independent computations: the
two-arm closed form by hand, statsmodels' binomial GLM on a fixed vote set, and the cases with no finite estimate."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.human.ranking import bradley_terry, human_ranking

# A fixed vote set over three arms (three annotators a pair), both presentation sides used, with ties and upsets:
# alpha beats beta mostly, beta beats gamma mostly, gamma takes some votes off alpha (so the graph is connected
# both ways and the estimate is finite).
VOTES = [
    ("alpha", "beta", ["A", "A", "T"]), ("beta", "alpha", ["B", "B", "A"]), ("alpha", "beta", ["A", "B", "A"]),
    ("beta", "gamma", ["A", "A", "A"]), ("gamma", "beta", ["B", "T", "A"]), ("beta", "gamma", ["A", "T", "B"]),
    ("alpha", "gamma", ["A", "A", "B"]), ("gamma", "alpha", ["B", "B", "T"]), ("gamma", "alpha", ["A", "B", "B"]),
]


def test_two_arms_match_the_closed_form():
    """With two arms the MLE is theta_a - theta_b = log(W_a / W_b) (W: votes won, ties half): here 6 vs 3."""
    fit = bradley_terry([("x", "y", ["A", "A", "T"]), ("y", "x", ["A", "B", "B"]), ("x", "y", ["B", "T", "A"])])
    assert fit.arms == ["x", "y"] and fit.ok()
    assert list(fit.wins) == [6.0, 3.0]  # x: 2 + 0.5 | 2 | 1 + 0.5; y: 0.5 | 1 | 1 + 0.5
    assert fit.scores[0] - fit.scores[1] == pytest.approx(np.log(6.0 / 3.0), abs=1e-9)
    assert fit.scores.sum() == pytest.approx(0.0, abs=1e-12)


def test_three_arms_match_statsmodels_binomial_glm():
    """The same likelihood fitted by statsmodels: one row per vote, x = e_A - e_B (gamma the reference column),
    y = side A's share; a tie is two rows (A wins, B wins) of weight 1/2 each."""
    sm = pytest.importorskip("statsmodels.api")
    fit = bradley_terry(VOTES)
    arms = fit.arms
    assert arms == ["alpha", "beta", "gamma"] and fit.ok()
    X, y, w = [], [], []
    for a, b, votes in VOTES:
        x = np.zeros(3)
        x[arms.index(a)] += 1.0
        x[arms.index(b)] -= 1.0
        for v in votes:
            rows = [(1.0, 1.0)] if v == "A" else [(0.0, 1.0)] if v == "B" else [(1.0, 0.5), (0.0, 0.5)]
            for yy, ww in rows:
                X.append(x[:2])
                y.append(yy)
                w.append(ww)
    glm = sm.GLM(np.array(y), np.array(X), family=sm.families.Binomial(), var_weights=np.array(w)).fit(tol=1e-12)
    ref = np.r_[glm.params, 0.0]
    np.testing.assert_allclose(fit.scores, ref - ref.mean(), atol=1e-7)
    assert fit.scores[0] > fit.scores[1] > fit.scores[2]  # alpha > beta > gamma


def test_no_finite_estimate_is_nan_with_the_reason():
    fit = bradley_terry([("x", "y", ["A", "A"]), ("y", "z", ["A", "T"]), ("x", "z", ["A"])])
    assert not fit.ok() and np.isnan(fit.scores).all()  # x won every vote: its strength would be +infinity
    assert "x won or lost every vote" in fit.reason


def test_human_ranking_beside_the_metric_with_bootstrap_intervals():
    # the metric prefers alpha over beta and beta over gamma on every pair: its ranking alpha, beta, gamma
    pairs = [(a, b, v, "A" if a < b else "B") for a, b, v in VOTES]
    r = human_ranking(pairs, n_boot=300, seed=1)
    assert r.rank_human == {"alpha": 1, "beta": 2, "gamma": 3} == r.rank_metric
    assert r.auto == {"alpha": 1.0, "beta": 0.5, "gamma": 0.0}
    assert r.rho == pytest.approx(1.0)
    for a in r.arms:
        assert r.lo[a] <= r.score[a] <= r.hi[a]
    assert r.lo["alpha"] < r.hi["alpha"] and r.dropped < 300
    again = human_ranking(pairs, n_boot=300, seed=1)
    assert again.lo == r.lo and again.hi == r.hi  # seeded: the same interval every time
    d = r.as_dict()
    assert d["arms"]["alpha"]["rank_human"] == 1 and d["spearman"] == pytest.approx(1.0)
    # a metric that ranks the arms the other way round: rho = -1
    flipped = human_ranking([(a, b, v, "B" if a < b else "A") for a, b, v in VOTES], n_boot=0)
    assert flipped.rho == pytest.approx(-1.0) and flipped.rank_metric["gamma"] == 1


# x and y have the same record (each takes 2 of 3 votes off z, and they split their own pair), so their strengths
# are equal; Newton's method returns them a few ulps apart, which must not read as an order (issue 46: tied
# strengths got ranks 1 and 2, and rho -0.5 where it is 0.0)
SYMMETRIC = [("x", "z", ["A", "A", "B"]), ("y", "z", ["A", "A", "B"]), ("x", "y", ["A", "B"]),
             ("z", "x", ["B", "A", "B"]), ("z", "y", ["B", "B", "A"])]


def test_tied_strengths_share_a_rank():
    from scipy.stats import rankdata

    fit = bradley_terry(SYMMETRIC)
    assert fit.ok() and fit.scores[0] == pytest.approx(fit.scores[1], abs=1e-9) and fit.scores[1] > fit.scores[2]
    r = human_ranking([(a, b, v, "T") for a, b, v in SYMMETRIC], n_boot=0)
    # the exact tie structure (x = y > z) ranked as scipy ranks it: the better rank shared, the next one skipped
    assert r.rank_human == dict(zip("xyz", rankdata([-1.0, -1.0, 0.0], method="min").astype(int).tolist()))
    assert r.rank_human == {"x": 1, "y": 1, "z": 3}


@pytest.mark.parametrize("prefs", [["A", "B", "A", "A", "B"], ["A", "A", "B", "B", "B"], ["B", "B", "A", "A", "B"]])
def test_rho_respects_tied_strengths(prefs):
    """rho is scipy's Spearman (average ranks for ties) of the exact tie structure x = y > z against the metric's
    win rates, computed here from the preferences by hand; the first set of preferences gives 0.0 (the old code
    read the rounding noise as an order and said -0.5)."""
    from scipy.stats import spearmanr

    pairs = [(a, b, v, p) for (a, b, v), p in zip(SYMMETRIC, prefs)]
    auto: dict = {}
    for a, b, _, p in pairs:
        s = {"A": 1.0, "T": 0.5, "B": 0.0}[p]
        auto.setdefault(a, []).append(s)
        auto.setdefault(b, []).append(1.0 - s)
    want = spearmanr([1.0, 1.0, 0.0], [np.mean(auto[a]) for a in "xyz"]).statistic
    r = human_ranking(pairs, n_boot=0)
    assert r.rho == pytest.approx(want, abs=1e-12)
    if prefs == ["A", "B", "A", "A", "B"]:
        assert r.rho == 0.0 and r.rank_metric == {"x": 1, "z": 2, "y": 3}


def test_tied_snaps_only_what_noise_split():
    from evaluate.human.ranking import TIE_TOL, tied

    got = tied({"a": 1.0, "b": 1.0 + 1e-13, "c": 0.5, "d": 0.5 + 10 * TIE_TOL, "e": float("nan")})
    assert got["a"] == got["b"] == 1.0 and got["c"] == 0.5 and got["d"] == 0.5 + 10 * TIE_TOL
    assert np.isnan(got["e"])
