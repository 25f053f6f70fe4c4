"""Four statistics of the human study pinned on small, hand-made vote sets: the judge-gate agreement, Fleiss'
kappa of the checklist items and of the static A/T/B votes over all annotators (against the hand formula and
statsmodels), and the dynamic bootstrap interval (against an independent resampling loop)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.human import analysis

ASPECTS8 = ["return_progress"] * 2 + ["persistence_reset"] * 2 + ["final_state"] * 2 + ["causal_physical"] * 2
YES8 = ["yes"] * 8


def _dyn_item(i: int, vlm_started: bool, vlm_items: list[int]) -> dict:
    return {"id": f"d{i}", "references": YES8, "aspects": ASPECTS8, "arm": {"arm": f"m{i % 2}/fullkv"},
            "vlm": {"started": vlm_started, "items": vlm_items}}


def _answers(n_yes: int) -> list[str]:
    """The first ``n_yes`` answers match the all-yes reference (gated 1), the rest do not (gated 0)."""
    return ["yes"] * n_yes + ["no"] * (8 - n_yes)


# Four instances, three annotators. Gate (started?) per annotator: d0 yes/yes/yes, d1 yes/yes/no, d2 no/no/no,
# d3 yes/no/no; the human majority gate is then 1, 1, 0, 0. The judge's gate: 1, 0, 0, 1 -> agrees on d0 and d2.
GATES = {"d0": (True, True, True), "d1": (True, True, False), "d2": (False, False, False), "d3": (True, False, False)}
N_YES = {"d0": (8, 6, 4), "d1": (7, 5, 8), "d2": (8, 8, 8), "d3": (2, 8, 8)}  # answers of those who started
VLM = {"d0": (True, [1] * 6 + [0] * 2), "d1": (False, [0] * 8), "d2": (False, [0] * 8), "d3": (True, [1] * 8)}


def _dynamic():
    key = {"items": [_dyn_item(i, *VLM[f"d{i}"]) for i in range(4)], "design": {"counts": {}}}
    votes = [{"item": d, "annotator": f"a{k}", "started": GATES[d][k], "answers": _answers(N_YES[d][k])}
             for d in GATES for k in range(3)]
    return key, votes


def _gated(d: str, k: int) -> list[int]:
    return [int(q < N_YES[d][k]) for q in range(8)] if GATES[d][k] else [0] * 8


def _fleiss_by_hand(counts: list[list[int]]) -> float:
    """Fleiss (1971), every subject rated by the same number of raters n: P_i = (sum_j c_ij^2 - n) / (n (n - 1)),
    p_j = column share, kappa = (mean P_i - sum p_j^2) / (1 - sum p_j^2)."""
    c = np.asarray(counts, dtype=float)
    n = c.sum(axis=1)[0]
    p_i = ((c ** 2).sum(axis=1) - n) / (n * (n - 1))
    p_j = c.sum(axis=0) / c.sum()
    return float((p_i.mean() - (p_j ** 2).sum()) / (1 - (p_j ** 2).sum()))


def test_gate_agreement_and_gate_kappa_by_hand():
    key, votes = _dynamic()
    res = analysis.dynamic_results(key, votes, ["a0", "a1", "a2"], n_boot=0)
    assert res["gate_agreement"] == pytest.approx(2 / 4)  # d0 (1 = 1) and d2 (0 = 0); d1 and d3 differ
    # gate ratings (yes, no) per instance: (3,0), (2,1), (0,3), (1,2): P_i = 1, 1/3, 1, 1/3 -> 2/3; p_e = 1/2
    assert res["fleiss_kappa_gate"] == pytest.approx((2 / 3 - 1 / 2) / (1 - 1 / 2))  # = 1/3


def test_item_kappa_over_all_annotators_matches_hand_formula_and_statsmodels():
    ir = pytest.importorskip("statsmodels.stats.inter_rater")
    key, votes = _dynamic()
    res = analysis.dynamic_results(key, votes, ["a0", "a1", "a2"], n_boot=0)
    counts = []  # one subject per (instance, question): how many of the three annotators scored 1 and 0
    for d in GATES:
        for q in range(8):
            ones = sum(_gated(d, k)[q] for k in range(3))
            counts.append([ones, 3 - ones])
    assert res["fleiss_kappa_items"] == pytest.approx(_fleiss_by_hand(counts))
    assert res["fleiss_kappa_items"] == pytest.approx(ir.fleiss_kappa(np.array(counts), method="fleiss"))
    # item agreement: the human majority label of each question against the judge's gated item
    match = n = 0
    for d in GATES:
        for q in range(8):
            label = int(sum(_gated(d, k)[q] for k in range(3)) >= 2)
            n += 1
            match += label == VLM[d][1][q]
    assert res["item_agreement"] == pytest.approx(match / n)


def test_static_kappa_over_all_annotators():
    ir = pytest.importorskip("statsmodels.stats.inter_rater")
    arms = ("x/fullkv", "y/fullkv")
    choices = [("A", "A", "A"), ("A", "B", "T"), ("B", "B", "A"), ("T", "T", "B"), ("A", "A", "B")]
    key = {"items": [{"id": f"p{i}", "metric": "environment.visible[pixel-thumb16]", "higher_is_better": True,
                      "A": {"arm": arms[i % 2], "value": 0.9}, "B": {"arm": arms[1 - i % 2], "value": 0.1}}
                     for i in range(len(choices))], "design": {"counts": {}}}
    votes = [{"item": f"p{i}", "annotator": f"a{k}", "choice": c} for i, cs in enumerate(choices)
             for k, c in enumerate(cs)]
    res = analysis.static_results(key, votes, ["a0", "a1", "a2"], n_boot=20)
    counts = [[cs.count("A"), cs.count("T"), cs.count("B")] for cs in choices]
    # by hand: P_i = 1, 0, 1/3, 1/3, 1/3 -> 0.4 = 90/225; A/T/B = (7, 3, 5) of 15 -> p_e = (49 + 9 + 25) / 225;
    # kappa = (90 - 83) / (225 - 83) = 7 / 142
    assert _fleiss_by_hand(counts) == pytest.approx(7 / 142)
    for m in ("environment.visible[pixel-thumb16]", analysis.ALL):
        assert res["metrics"][m]["fleiss_kappa"] == pytest.approx(_fleiss_by_hand(counts))
        assert res["metrics"][m]["fleiss_kappa"] == pytest.approx(ir.fleiss_kappa(np.array(counts)))


def test_dynamic_bootstrap_matches_an_independent_resampling():
    """Percentile 95 % interval of Spearman's rho over instances: resample instance indices with the study's seed
    (numpy's default_rng), drop resamples where rho is undefined, take the 2.5 / 97.5 % quantiles."""
    from scipy.stats import spearmanr

    key, votes = _dynamic()
    extra = [(4, 5, 3), (6, 2, 7), (3, 3, 8), (8, 1, 5)]  # four more started instances, so rho varies by resample
    for j, ny in enumerate(extra, start=4):
        key["items"].append(_dyn_item(j, True, [1] * (2 + j) + [0] * (6 - j)))
        votes += [{"item": f"d{j}", "annotator": f"a{k}", "started": True, "answers": _answers(ny[k])}
                  for k in range(3)]
    n_boot, seed = 300, 5
    res = analysis.dynamic_results(key, votes, ["a0", "a1", "a2"], n_boot=n_boot, boot_seed=seed)
    o = res["dimensions"]["overall"]
    human = np.array([r["human"]["overall"] for r in res["instances"]])
    vlm = np.array([r["vlm"]["overall"] for r in res["instances"]])
    assert len(human) == 8 and o["n"] == 8
    rng = np.random.default_rng(seed)
    vals, dropped = [], 0
    for _ in range(n_boot):
        i = rng.integers(0, len(human), len(human))
        x, y = human[i], vlm[i]
        if len(set(x)) < 2 or len(set(y)) < 2:
            dropped += 1
            continue
        vals.append(spearmanr(x, y).statistic)
    assert o["spearman_lo"] == pytest.approx(np.quantile(vals, 0.025))
    assert o["spearman_hi"] == pytest.approx(np.quantile(vals, 0.975))
    assert o["boot_dropped"] >= dropped and o["spearman_lo"] < o["spearman"] < o["spearman_hi"]
