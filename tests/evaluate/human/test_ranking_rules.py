"""The Bradley-Terry ranking's rules: the seeded bootstrap equals fitting each resample of the pairs afresh (and
counts the resamples without a finite estimate), ranks share the better place on ties and leave NaN out, the
reasons when no estimate exists, the metric's win rate skips pairs it could not compare, and the JSON form."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.human.ranking import bradley_terry, human_ranking
from tests.evaluate.human.test_ranking import VOTES


def _pairs(votes=VOTES):
    return [(a, b, v, "A" if a < b else "B") for a, b, v in votes]


@pytest.mark.parametrize("seed", [0, 3])
def test_the_bootstrap_refits_each_resample_of_the_pairs(seed):
    pairs = _pairs()[:4] + _pairs()[6:7]  # few pairs: some resamples leave an arm unbeaten and are dropped
    r = human_ranking(pairs, n_boot=40, seed=seed)
    rng = np.random.default_rng(seed)
    draws, dropped = [], 0
    for _ in range(40):
        idx = rng.integers(0, len(pairs), len(pairs))
        f = bradley_terry([pairs[i][:3] for i in idx])
        if f.ok() and f.arms == r.arms:
            draws.append(f.scores)
        else:
            dropped += 1
    assert r.dropped == dropped and 0 < dropped < 40 and r.n_boot == 40
    q = np.quantile(np.array(draws), [0.025, 0.975], axis=0)
    for k, a in enumerate(r.arms):
        assert r.lo[a] == pytest.approx(q[0, k], abs=1e-7) and r.hi[a] == pytest.approx(q[1, k], abs=1e-7)


def test_no_bootstrap_without_resamples_or_without_an_estimate():
    r = human_ranking(_pairs(), n_boot=0)
    assert all(np.isnan(r.lo[a]) and np.isnan(r.hi[a]) for a in r.arms) and r.dropped == 0
    bad = human_ranking([("x", "y", ["A", "A"], "A"), ("y", "x", ["B"], "B")], n_boot=50)
    assert bad.dropped == 0 and np.isnan(bad.lo["x"]) and "x, y won or lost every vote" in bad.reason
    assert bad.as_dict()["arms"]["x"] == {"score": None, "lo": None, "hi": None, "rank_human": None,
                                          "rank_metric": 1, "auto_win_rate": 1.0, "votes": 3}


def test_ranks_share_the_better_place_and_leave_out_what_the_metric_never_compared():
    votes = [("a", "b", ["A", "B"], None), ("b", "c", ["A", "B"], "T"), ("c", "a", ["A", "B"], "A"),
             ("a", "c", ["T"], None)]
    r = human_ranking(votes, n_boot=0)
    assert r.rank_human == {"a": 1, "b": 1, "c": 1}  # every arm equally strong
    assert r.auto["b"] == 0.5 and r.auto["c"] == 0.75 and r.auto["a"] == 0.0  # the None pairs are skipped
    assert r.rank_metric == {"c": 1, "b": 2, "a": 3}
    assert r.votes == {"a": 5, "b": 4, "c": 5}
    none = human_ranking([("a", "b", ["A", "B"], None), ("b", "c", ["A", "B"], "T"), ("c", "a", ["T"], "T")],
                         n_boot=0)
    assert not np.isnan(none.auto["a"]) and none.rank_metric == {"a": 1, "b": 1, "c": 1}
    only = human_ranking([("a", "b", ["A", "B"], None), ("b", "c", ["A", "B"], "T"), ("c", "a", ["A", "B"], None)],
                         n_boot=0)
    assert set(only.rank_metric) == {"b", "c"} and np.isnan(only.auto["a"])
    assert only.as_dict()["arms"]["a"]["rank_metric"] is None and only.as_dict()["arms"]["a"]["auto_win_rate"] is None


def test_reasons_without_a_finite_estimate():
    assert bradley_terry([]).reason == "fewer than 2 arms" and not bradley_terry([]).ok()
    split = bradley_terry([("a", "b", ["A", "B"]), ("c", "d", ["T"])])
    assert split.reason == ("no finite Bradley-Terry estimate: the arms split into groups that never beat one "
                            "another (more votes or arms that meet)")
    assert np.isnan(split.scores).all() and list(split.wins) == [1.0, 1.0, 0.5, 0.5]
    lost = bradley_terry([("a", "b", ["A", "T"]), ("b", "c", ["A"]), ("c", "a", ["B", "B"])])
    assert lost.reason.startswith("no finite Bradley-Terry estimate: ") and ": c won or lost every vote" in lost.reason
    chain = bradley_terry([("a", "b", ["A"]), ("b", "c", ["A"])])  # a beats b beats c: c is never reached back
    assert "a, c won or lost every vote" in chain.reason
    with pytest.raises(ValueError, match=r"^a pair compares 'a' with itself$"):
        bradley_terry([("a", "a", ["A"])])


def test_rho_and_the_json_form():
    r = human_ranking(_pairs(), n_boot=20, seed=2)
    d = r.as_dict()
    assert set(d) == {"arms", "spearman", "spearman_reason", "reason", "n_boot", "dropped_resamples"}
    assert d["n_boot"] == 20 and d["dropped_resamples"] == r.dropped and d["reason"] == ""
    a = d["arms"]["beta"]
    assert a["score"] == r.score["beta"] and a["lo"] == r.lo["beta"] and a["hi"] == r.hi["beta"]
    assert a["rank_human"] == 2 and a["rank_metric"] == 2 and a["auto_win_rate"] == 0.5 and a["votes"] == 18
    two = human_ranking([("x", "y", ["A", "B", "A"], "A"), ("y", "x", ["A"], "B")], n_boot=0)
    assert np.isnan(two.rho) and "needs at least 3 arms (models or policies), has 2" in two.rho_reason


def _score_equations(pairs, scores) -> float:
    """The largest residual of the maximum-likelihood equations: every arm's votes won (ties half) equal the
    votes it is expected to win, sum_j N_ij / (1 + exp(theta_j - theta_i))."""
    arms = sorted({a for a, _, _ in pairs} | {b for _, b, _ in pairs})
    ix = {a: k for k, a in enumerate(arms)}
    won, expected = np.zeros(len(arms)), np.zeros(len(arms))
    share = {"A": 1.0, "T": 0.5, "B": 0.0}
    for a, b, votes in pairs:
        i, j = ix[a], ix[b]
        for v in votes:
            won[i] += share[v]
            won[j] += 1 - share[v]
        p = 1 / (1 + np.exp(scores[j] - scores[i]))
        expected[i] += len(votes) * p
        expected[j] += len(votes) * (1 - p)
    return float(np.abs(won - expected).max())


def test_the_fit_solves_the_likelihood_equations():
    # a vote set on which stopping at the smallest Newton step (not the largest) leaves the fit 0.39 off
    pairs = [("0", "1", ["B", "A", "T"]), ("0", "2", ["B", "B", "T"]), ("0", "3", ["B"]), ("1", "2", ["B", "T", "B"]),
             ("1", "3", ["B"]), ("2", "3", ["B", "B", "A"])]
    fit = bradley_terry(pairs)
    assert fit.ok() and _score_equations(pairs, fit.scores) < 1e-9
    assert _score_equations(VOTES, bradley_terry(VOTES).scores) < 1e-9


def test_a_lopsided_pair_converges_to_the_closed_form():
    fit = bradley_terry([("x", "y", ["A"] * 199 + ["B"])])
    assert fit.scores[0] - fit.scores[1] == pytest.approx(np.log(199.0), abs=1e-12)


def test_a_cycle_of_wins_is_strongly_connected():
    """a beats b beats c beats d beats a: every arm reaches every other only through the others."""
    fit = bradley_terry([("a", "b", ["A"]), ("b", "c", ["A"]), ("c", "d", ["A"]), ("d", "a", ["A"])])
    assert fit.ok() and fit.reason == "" and np.allclose(fit.scores, 0.0)


def test_one_resample_is_a_bootstrap_and_the_defaults_are_2000_and_seed_0():
    pairs = _pairs()
    one = human_ranking(pairs, n_boot=1, seed=5)
    rng = np.random.default_rng(5)
    idx = rng.integers(0, len(pairs), len(pairs))
    f = bradley_terry([pairs[i][:3] for i in idx])
    assert one.dropped == 0 and f.ok()
    for k, a in enumerate(one.arms):
        assert one.lo[a] == pytest.approx(f.scores[k], abs=1e-7) and one.hi[a] == pytest.approx(f.scores[k], abs=1e-7)
    d = human_ranking(pairs)
    assert d.n_boot == 2000 and d.lo == human_ranking(pairs, 2000, 0).lo
