"""The rules of evaluate/human/analysis.py stated one at a time on tiny keys and votes built in memory (and, for
the functions that read a study folder, a folder of three small JSON files and a vote store): attention checks,
which items count, the order and fields of the static results, the dynamic labels, matches and correlations, the
bootstrap of a correlation, the organiser's progress and the raw-vote export. Fast, in process: the mutation
runner's rules file for analysis.py (tests/mutation/targets.toml, group ``human``)."""

from __future__ import annotations

import csv
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluate.human import analysis, stats
from evaluate.human import store as store_mod
from evaluate.human.common import StudyError
from evaluate.human.store import VoteStore, study_hash
from harness.cases import ASPECTS

ASPECTS8 = [a for a in ASPECTS for _ in (0, 1)]  # two checklist items per aspect
YES8 = ["yes"] * 8


# ------------------------------------------------------------------------------------------------------ builders
def pair(iid: str, metric: str = "m[x]", a: float = 2.0, b: float = 1.0, arms=("p", "q"), hib: bool = True,
         **extra) -> dict:
    """A static key item: arm ``arms[0]`` shown as A with value ``a``, ``arms[1]`` as B with ``b``."""
    return {"id": iid, "metric": metric, "A": {"arm": arms[0], "value": a}, "B": {"arm": arms[1], "value": b},
            "higher_is_better": hib, "task": {"trajectory": "t1", "case_id": f"c-{iid}"}, **extra}


def sv(ann: str, iid: str, choice: str | None) -> dict:
    return {"annotator": ann, "item": iid, "kind": "static", "choice": choice}


def inst(iid: str, arm: str = "p", vlm_started=True, vlm_items=None, refs=YES8, **extra) -> dict:
    """A dynamic key item; ``vlm_started=None`` leaves the judge out (not judged)."""
    it = {"id": iid, "arm": {"arm": arm, "trajectory": "t1", "case_id": f"c-{iid}"}, "references": list(refs),
          "aspects": list(ASPECTS8), **extra}
    if vlm_started is not None:
        it["vlm"] = {"started": vlm_started, "items": list(vlm_items if vlm_items is not None else [1] * 8)}
    return it


def dv(ann: str, iid: str, started: bool, answers=None) -> dict:
    return {"annotator": ann, "item": iid, "kind": "dynamic", "started": started,
            "answers": (list(answers) if answers is not None else list(YES8)) if started else None}


def static_key(items, counts=None) -> dict:
    return {"kind": "static", "design": {"counts": counts} if counts is not None else {}, "items": items}


def dynamic_key(items, judge="judge-x") -> dict:
    return {"kind": "dynamic", "design": {"counts": {"dynamic": {"judge": judge}}}, "items": items}


def make_study(d: Path, key: dict, orders: dict[str, list[str]]) -> tuple[Path, VoteStore]:
    """A study folder: study.json, key.json, annotators.json and an empty vote store."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "study.json").write_text(json.dumps({"items": [{"id": i["id"]} for i in key["items"]]}))
    (d / "key.json").write_text(json.dumps(key))
    (d / "annotators.json").write_text(json.dumps({"annotators": [{"id": a, "order": o} for a, o in orders.items()]}))
    return d, VoteStore(d / "votes.sqlite", study_hash(d / "study.json"))


@pytest.fixture
def clock(monkeypatch):
    """The store's clock, one second per vote, so that the first and the last vote differ."""
    t = iter(range(10, 60))
    monkeypatch.setattr(store_mod, "_now", lambda: f"2026-01-01T00:00:{next(t):02d}Z")


# ---------------------------------------------------------------------------------------------- attention checks
def test_a_static_check_is_passed_by_its_expected_side_only():
    check = {"expected": "A", "decoy_case": "c9"}
    assert analysis._passed(check, {"choice": "A"}) is True
    assert analysis._passed(check, {"choice": "B"}) is False and analysis._passed(check, {"choice": "T"}) is False
    assert analysis._passed(check, {}) is False


def test_a_still_clip_check_is_passed_by_not_started_only_and_a_missing_gate_fails():
    still = {"started": False, "still": True}
    assert analysis._passed(still, {"started": False}) is True
    assert analysis._passed(still, {"started": True}) is False
    assert analysis._passed(still, {"started": None}) is False  # no answer is not "did not start"
    assert analysis._passed(still, {"choice": "A"}) is False
    moving = {"started": True}
    assert analysis._passed(moving, {"started": True}) is True
    assert analysis._passed(moving, {"started": False}) is False


def test_attention_counts_checks_per_annotator_and_ignores_practice_and_real_items():
    key = static_key([pair("r1"), pair("c1", check={"expected": "A"}), pair("c2", check={"expected": "B"}),
                      pair("pc", check={"expected": "A"}, practice=True), pair("pr", practice=True)])
    votes = [sv("a1", "c1", "A"), sv("a1", "c2", "B"), sv("a1", "pc", "B"), sv("a1", "r1", "B"),
             sv("a2", "c1", "B"), sv("a2", "c2", "B"), sv("a2", "pr", "A"),
             sv("a3", "r1", "A"), sv("a3", "pc", "A"), sv("a3", "pr", "A")]
    assert analysis.attention(key, votes) == {
        "a1": {"checks": 2, "passed": 2, "failed": []},
        "a2": {"checks": 2, "passed": 1, "failed": ["c1"]}}  # a3 answered no check: not listed


# -------------------------------------------------------------------------------------------------------- static
def _static_case():
    items = [pair("u1", "m3", 1.0, 2.0, arms=("p", "q")), pair("u2", "m3", 3.0, 1.0, arms=("q", "r")),
             pair("x1", "m1[y]", 2.0, 1.0), pair("x2", "m1[y]", 1.0, 1.0, arms=("q", "r")),
             pair("y1", "m2[x]", 5.0, 1.0, arms=("r", "p")),
             pair("chk", "m2[x]", 1.0, 2.0, check={"expected": "B"}), pair("prc", "m2[x]", 1.0, 2.0, practice=True)]
    votes = [sv("a1", "u1", "B"), sv("a2", "u1", "B"),  # complete, agrees with the metric (B higher)
             sv("a1", "u2", "B"),  # one vote of two: incomplete, disagrees
             sv("a1", "x1", "A"), sv("a2", "x1", "A"), sv("a1", "x2", "T"), sv("a2", "x2", "T"),
             sv("a1", "y1", "A"), sv("a2", "y1", "B"),
             sv("a1", "chk", "A"), sv("a2", "chk", "B"), sv("a1", "prc", "A"), sv("a2", "prc", "A")]
    return items, votes


def test_static_results_order_fields_and_the_items_and_votes_that_count():
    items, votes = _static_case()
    key = static_key(items, counts={"m9": 3, "m2[x]": 1, "m1[y]": 2})  # m9 planned, no pairs; m3 not planned
    res = analysis.static_results(key, votes, ["a1", "a2"], n_boot=20, boot_seed=3)
    assert list(res["metrics"]) == ["m2[x]", "m1[y]", "m3", analysis.ALL]  # planned order, then the rest, then all
    assert (res["kind"], res["votes"], res["items"], res["annotators"]) == ("static", 9, 5, ["a1", "a2"])
    assert res["attention"] == {"a1": {"checks": 1, "passed": 0, "failed": ["chk"]},
                                "a2": {"checks": 1, "passed": 1, "failed": []}}
    m = res["metrics"]
    assert [m[k]["metric_id"] for k in m] == ["m2", "m1", "m3", analysis.ALL]
    assert [m[k]["pairs"] for k in m] == [1, 2, 2, 5]  # the check and the practice pair never count
    assert [m[k]["complete"] for k in m] == [1, 2, 1, 4]  # as many votes as annotators: complete
    assert (m["m3"]["decisive"], m["m3"]["agree"]) == (2, 1)
    assert (m["m1[y]"]["decisive"], m["m1[y]"]["majority_ties"], m["m1[y]"]["agree"]) == (1, 1, 1)
    assert m["m2[x]"]["splits"] == 1 and m[analysis.ALL]["decisive"] == 3
    assert (m[analysis.ALL]["n_boot"], m[analysis.ALL]["boot_seed"]) == (20, 3)
    assert m[analysis.ALL]["win_rates"]["p"] == {"human": pytest.approx(3 / 6), "auto": pytest.approx(1 / 3),
                                                  "votes": 6, "pairs": 3}
    assert m["m3"]["spearman_n"] == 3 and m["m3"]["spearman"] == pytest.approx(
        stats.spearman([0.0, 2 / 3, 1.0], [0.0, 1.0, 0.0]).value)  # arms p, q, r: human and automatic rates
    assert "fleiss_kappa" in m["m3"] and "bradley_terry" in m["m3"] and "spearman_reason" in m["m3"]


def test_static_results_without_planned_counts_keep_the_key_order_and_default_to_2000_resamples_seed_0():
    items, votes = _static_case()
    res = analysis.static_results(static_key(items), votes[:3], ["a1", "a2"], n_boot=5)
    assert list(res["metrics"]) == ["m3", "m1[y]", "m2[x]", analysis.ALL]
    sig = inspect.signature(analysis.static_results).parameters
    assert (sig["n_boot"].default, sig["boot_seed"].default) == (2000, 0)
    one = static_key([pair("u1", "m3", 1.0, 2.0)])
    r = analysis.static_results(one, [sv("a1", "u1", "B")], ["a1"])  # the defaults, on one pair
    assert (r["metrics"][analysis.ALL]["n_boot"], r["metrics"][analysis.ALL]["boot_seed"]) == (2000, 0)


# ------------------------------------------------------------------------------------------------------- dynamic
def _dynamic_case():
    """Two annotators. i1: both start, a2 says no to item 0 (a tied label) and to item 7 too; the judge starts
    with items [1,0,1,1,1,1,1,0]. i2: a1 starts, a2 does not (a tied gate); judge does not start. i3: neither
    starts, nor does the judge (items all 0); one vote only, a2's is missing. i4: not judged. i5: no votes."""
    no0 = ["no"] + ["yes"] * 6 + ["no"]
    items = [inst("i1", "p", True, [1, 0, 1, 1, 1, 1, 1, 0]), inst("i2", "q", False, [0] * 8),
             inst("i3", "r", False, [0] * 8), inst("i4", "p", None), inst("i5", "q", True),
             inst("chk", "p", True, check={"started": False, "still": True}),
             inst("prc", "q", True, practice=True)]
    votes = [dv("a1", "i1", True), dv("a2", "i1", True, no0),
             dv("a1", "i2", True), dv("a2", "i2", False),
             dv("a1", "i3", False),
             dv("a1", "i4", True), dv("a2", "i4", True),
             dv("a1", "chk", True), dv("a2", "chk", False), dv("a1", "prc", False), dv("a2", "prc", False)]
    return items, votes


def test_dynamic_results_labels_gates_matches_and_counts():
    items, votes = _dynamic_case()
    res = analysis.dynamic_results(dynamic_key(items), votes, ["a1", "a2"], n_boot=10)
    assert (res["kind"], res["votes"], res["items"], res["annotators"]) == ("dynamic", 7, 5, ["a1", "a2"])
    assert (res["instances_voted"], res["instances_judged"], res["complete"]) == (4, 3, 3)
    # i1: items 0 and 7 tied; i2: a1's eight 1s against a2's eight 0s, all tied
    assert res["tied_labels"] == 2 + 8
    # gate: i1 1 vs judge 1 (match), i2 tied (no match), i3 0 vs judge 0 (match): 2 of 3 judged instances
    assert res["gate_agreement"] == pytest.approx(2 / 3)
    # items with a label: i1's six (items 1-6; the judge says 0 on item 1) and i3's eight (0, as the judge)
    assert res["item_agreement"] == pytest.approx(13 / 14)
    assert res["judge"] == "judge-x"
    by = {r["id"]: r for r in res["instances"]}
    assert list(by) == ["i1", "i2", "i3", "i4"]
    assert by["i1"]["human_gate"] == 1 and by["i1"]["vlm_gate"] is True and by["i1"]["votes"] == 2
    assert by["i2"]["human_gate"] is None and by["i2"]["vlm_gate"] is False and by["i2"]["arm"] == "q"
    assert by["i3"]["human_gate"] == 0 and by["i3"]["votes"] == 1
    assert by["i4"]["vlm"] is None and by["i4"]["vlm_gate"] is None and by["i4"]["human"]["overall"] == 1.0
    assert by["i3"]["human"]["overall"] == 0.0 and by["i3"]["vlm"]["overall"] == 0.0 and by["i3"]["vlm_gate"] is False
    assert math.isnan(by["i1"]["human"]["overall"]) and math.isnan(by["i1"]["human"][ASPECTS[0]])
    assert by["i1"]["human"][ASPECTS[1]] == 1.0 and by["i1"]["vlm"]["overall"] == 0.75
    # gate ratings per instance: (yes, yes), (yes, no), (no), (yes, yes): kappa over the three with two ratings
    want = stats.fleiss_kappa(np.array([[2, 0], [1, 1], [2, 0]]))
    assert res["fleiss_kappa_gate"] == pytest.approx(want)
    assert math.isfinite(res["fleiss_kappa_items"])


def test_dynamic_results_correlations_count_instances_where_both_sides_are_finite():
    """i1's human aspect 0 is NaN (a tied label) and i2's judge aspect 0 is NaN (an undefined judge item): n
    leaves out both; the means skip NaN."""
    items = [inst("i1", "p", True, [1] * 8), inst("i2", "q", True, [None, 1, 0, 0, 0, 0, 0, 0]),
             inst("i3", "r", True, [0, 0, 1, 1, 0, 0, 0, 0]), inst("i4", "p", True, [1, 1, 0, 1, 0, 0, 0, 0])]
    votes = [dv("a1", "i1", True), dv("a2", "i1", True, ["no"] + ["yes"] * 7),
             dv("a1", "i2", True), dv("a2", "i2", True),
             dv("a1", "i3", False), dv("a2", "i3", False),
             dv("a1", "i4", True, ["yes"] * 4 + ["no"] * 4), dv("a2", "i4", True, ["yes"] * 4 + ["no"] * 4)]
    res = analysis.dynamic_results(dynamic_key(items), votes, ["a1", "a2"], n_boot=30, boot_seed=2)
    d0 = res["dimensions"][ASPECTS[0]]
    assert d0["n"] == 2 and math.isnan(d0["spearman_lo"]) and d0["boot_dropped"] == 0
    assert d0["human_mean"] == pytest.approx((1 + 0 + 1) / 3) and d0["vlm_mean"] == pytest.approx((1 + 0 + 1) / 3)
    ov = res["dimensions"]["overall"]
    assert ov["n"] == 2  # i1's human and i2's judge overall are NaN too
    d1 = res["dimensions"][ASPECTS[1]]  # items 2 and 3: human 1, 1, 0, 1; judge 1, 0, 1, 0.5
    assert d1["n"] == 4 and d1["human_mean"] == pytest.approx(0.75) and d1["vlm_mean"] == pytest.approx(5 / 8)
    assert d1["spearman"] == pytest.approx(stats.spearman([1, 1, 0, 1], [1, 0, 1, .5]).value)
    assert d1["plcc"] == pytest.approx(stats.plcc([1, 1, 0, 1], [1, 0, 1, .5]).value)
    lo, hi, drop = analysis._corr_ci(np.array([1., 1, 0, 1]), np.array([1, 0, 1, .5]), stats.spearman_rows, 30, 2)
    assert (d1["spearman_lo"], d1["spearman_hi"], d1["boot_dropped"]) == (lo, hi, drop) and drop > 0
    assert set(d1) == {"n", "spearman", "spearman_reason", "spearman_lo", "spearman_hi", "plcc", "plcc_reason",
                       "plcc_lo", "plcc_hi", "boot_dropped", "human_mean", "vlm_mean"}


def test_dynamic_results_without_judged_instances_are_nan_and_default_to_2000_resamples_seed_0():
    res = analysis.dynamic_results(dynamic_key([inst("i1", vlm_started=None)]), [dv("a1", "i1", True)], ["a1"])
    assert res["instances_judged"] == 0 and math.isnan(res["gate_agreement"]) and math.isnan(res["item_agreement"])
    assert math.isnan(res["dimensions"]["overall"]["human_mean"]) and res["dimensions"]["overall"]["n"] == 0
    sig = inspect.signature(analysis.dynamic_results).parameters
    assert (sig["n_boot"].default, sig["boot_seed"].default) == (2000, 0)


@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # the first aspect of the one instance: a tied label
def test_item_kappa_counts_both_labels():
    """Per checklist item the annotators' gated scores (0 or 1): one item where both say 1, one where they split."""
    items = [inst("i1", "p", True)]
    votes = [dv("a1", "i1", True), dv("a2", "i1", True, ["no"] + ["yes"] * 7)]
    res = analysis.dynamic_results(dynamic_key(items), votes, ["a1", "a2"], n_boot=2)
    want = stats.fleiss_kappa(np.array([[1, 1]] + [[0, 2]] * 7))
    assert res["fleiss_kappa_items"] == pytest.approx(want)


# --------------------------------------------------------------------------------------------------- bootstrap
def _dropped(n: int, n_boot: int, seed: int) -> int:
    """How many resamples (indices drawn with numpy's default_rng(seed)) of n points are one point repeated."""
    rng = np.random.default_rng(seed)
    return sum(len(set(rng.integers(0, n, n).tolist())) == 1 for _ in range(n_boot))


def test_corr_ci_needs_three_points_and_counts_the_constant_resamples_it_drops():
    two = analysis._corr_ci(np.array([1.0, 2.0]), np.array([1.0, 2.0]), stats.spearman_rows, 50, 0)
    assert math.isnan(two[0]) and math.isnan(two[1]) and two[2] == 0
    x = np.array([1.0, 2.0, 3.0])
    lo, hi, dropped = analysis._corr_ci(x, x, stats.spearman_rows, 60, 4)  # every defined resample has rho 1
    assert (lo, hi) == (1.0, 1.0) and dropped == _dropped(3, 60, 4) > 0


def test_corr_ci_percentiles_are_2_5_and_97_5():
    x, y = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([2.0, 1.0, 4.0, 3.0, 5.0])
    lo, hi, _ = analysis._corr_ci(x, y, stats.plcc_rows, 40, 1)
    rng = np.random.default_rng(1)
    vals = []
    for _ in range(40):
        i = rng.integers(0, 5, 5)
        c = stats.plcc(x[i], y[i])
        if c.ok():
            vals.append(c.value)
    # the batch correlation equals scipy's within float rounding (stats.plcc_rows)
    assert (lo, hi) == pytest.approx((float(np.quantile(vals, 0.025)), float(np.quantile(vals, 0.975))), abs=1e-12)
    assert lo < hi


def test_corr_ci_of_a_constant_side_drops_every_resample():
    lo, hi, dropped = analysis._corr_ci(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0]), stats.plcc_rows, 7, 0)
    assert math.isnan(lo) and math.isnan(hi) and dropped == 7


# --------------------------------------------------------------------------------------------- study folders
def test_load_refuses_an_incomplete_folder_and_drops_votes_on_unknown_items(tmp_path):
    d, st = make_study(tmp_path / "s", static_key([pair("r1")]), {"a1": ["r1"]})
    st.record("a1", "r1", "static", {"choice": "A"})
    st.record("a1", "ghost", "static", {"choice": "B"})
    study, key, votes, ann = analysis.load(d)
    assert [v["item"] for v in votes] == ["r1"] and ann == ["a1"] and key["items"][0]["id"] == "r1"
    assert study == {"items": [{"id": "r1"}]}
    (d / "annotators.json").unlink()
    with pytest.raises(StudyError, match="annotators.json is missing"):
        analysis.load(d)


def test_analyse_excludes_annotators_who_failed_a_check_only_when_asked(tmp_path):
    key = static_key([pair("r1"), pair("r2", a=1.0, b=3.0), pair("c1", check={"expected": "A"})])
    orders = {"a1": ["r1", "r2", "c1"], "a2": ["r1", "r2", "c1"]}
    d, st = make_study(tmp_path / "s", key, orders)
    for a, c in (("a1", "B"), ("a2", "A")):
        st.record(a, "c1", "static", {"choice": c})  # a1 fails the check
        st.record(a, "r1", "static", {"choice": "A"})
        st.record(a, "r2", "static", {"choice": "B"})
    res = analysis.analyse(d, n_boot=10, boot_seed=1)
    assert res["excluded"] == [] and res["annotators"] == ["a1", "a2"] and res["votes"] == 4
    assert res["bootstrap"] == {"n": 10, "seed": 1, "interval": "percentile 95 %"}
    ex = analysis.analyse(d, n_boot=10, exclude_failed_checks=True)
    assert ex["excluded"] == ["a1"] and ex["annotators"] == ["a2"] and ex["votes"] == 2
    assert ex["attention"]["a1"] == {"checks": 1, "passed": 0, "failed": ["c1"]}  # still reported
    assert ex["metrics"][analysis.ALL]["complete"] == 2  # one annotator left: every pair complete
    sig = inspect.signature(analysis.analyse).parameters
    assert (sig["n_boot"].default, sig["boot_seed"].default, sig["exclude_failed_checks"].default) == (2000, 0, False)


def test_analyse_reads_a_dynamic_study_as_dynamic(tmp_path):
    d, st = make_study(tmp_path / "d", dynamic_key([inst("i1")]), {"a1": ["i1"]})
    st.record("a1", "i1", "dynamic", {"started": True, "answers": YES8})
    res = analysis.analyse(d, n_boot=5)
    assert res["kind"] == "dynamic" and res["instances_voted"] == 1 and res["excluded"] == []


def test_progress_counts_decisive_votes_on_real_pairs_only(tmp_path, clock):
    items = [pair("r1"), pair("r2"), pair("r3"), pair("r4", a=1.0, b=3.0),
             pair("tie", a=2.0, b=2.0),  # the metric ties: left out
             pair("nan", a=float("nan"), b=1.0),  # the metric cannot compare: left out
             pair("c1", check={"expected": "B"}), pair("p1", practice=True), pair("p2", practice=True)]
    order = [i["id"] for i in items]
    d, st = make_study(tmp_path / "s", static_key(items), {"a1": order, "a2": order[:4], "a3": []})
    for iid, c in (("r1", "A"), ("r2", "A"), ("r3", "B"), ("r4", "T"), ("tie", "A"), ("nan", "A"),
                   ("c1", "A"), ("p1", "B"), ("p2", "B")):
        st.record("a1", iid, "static", {"choice": c})
    st.correct("a1", "p2", "static", {"choice": "A"})
    st.record("a2", "c1", "static", {"choice": "B"})
    rows = {r["annotator"]: r for r in analysis.progress(d)}
    assert list(rows) == ["a1", "a2", "a3"]
    untimed = {"median_s": None, "fast_votes": 0, "timed_votes": 0, "too_fast": False, "revoked_utc": None}
    assert rows["a1"] == {"annotator": "a1", "done": 9, "total": 9, "last_vote_utc": "2026-01-01T00:00:18Z",
                          "corrected": 1, "checks": 1, "checks_passed": 0, "failed_items": ["c1"], **untimed,
                          "agree_with_metric": pytest.approx(2 / 3), "decisive_votes": 3}
    assert rows["a2"] == {"annotator": "a2", "done": 1, "total": 4, "last_vote_utc": "2026-01-01T00:00:20Z",
                          "corrected": 0, "checks": 1, "checks_passed": 1, "failed_items": [], **untimed,
                          "agree_with_metric": None, "decisive_votes": 0}
    assert rows["a3"] == {"annotator": "a3", "done": 0, "total": 0, "last_vote_utc": None, "corrected": 0,
                          "checks": 0, "checks_passed": 0, "failed_items": [], **untimed, "agree_with_metric": None,
                          "decisive_votes": 0}


def test_progress_of_a_dynamic_study_has_no_agreement(tmp_path):
    d, st = make_study(tmp_path / "d", dynamic_key([inst("i1")]), {"a1": ["i1"]})
    st.record("a1", "i1", "dynamic", {"started": False})
    (r,) = analysis.progress(d)
    assert (r["done"], r["agree_with_metric"], r["decisive_votes"]) == (1, None, 0)


# ------------------------------------------------------------------------------------------------------- export
def test_export_rows_static_unblinded_and_blind():
    key = static_key([pair("r1", a=1.0, b=3.0, arms=("p", "q")), pair("r2", a=1.0, b=1.0, arms=("q", "r"))])
    votes = [{**sv("a1", "r1", "A"), "id": 1, "started": None, "answers": None, "client_id": "k",
              "elapsed_ms": 5, "created_utc": "t", "corrections": 1, "first_choice": "B", "first_started": None,
              "first_answers": None},
             {**sv("a1", "r2", "T"), "id": 2, "started": None, "answers": None, "client_id": None,
              "elapsed_ms": None, "created_utc": "u"}]
    rows = analysis.export_rows(key, votes, unblind=True)
    assert rows[0] == {"vote_id": 1, "annotator": "a1", "item": "r1", "kind": "static", "role": "real",
                       "check_passed": None, "choice": "A",
                       "started": None, "answers": None, "client_id": "k", "elapsed_ms": 5, "created_utc": "t",
                       "corrected": True, "first_choice": "B", "first_started": None, "first_answers": None,
                       "metric": "m[x]", "trajectory": "t1", "case_id": "c-r1", "arm_A": "p", "arm_B": "q",
                       "preferred_arm": "p", "value_A": 1.0, "value_B": 3.0, "higher_is_better": True,
                       "metric_prefers": "B", "metric_preferred_arm": "q"}
    assert list(rows[0]) == [c for c in analysis.EXPORT_COLUMNS if c not in ("arm", "gated_items")]
    assert (rows[1]["corrected"], rows[1]["preferred_arm"], rows[1]["metric_prefers"],
            rows[1]["metric_preferred_arm"]) == (False, "tie", "T", "tie")
    blind = analysis.export_rows(key, votes, unblind=False)
    assert list(blind[0]) == analysis.EXPORT_COLUMNS[:analysis.BLIND_COLUMNS] and len(blind) == 2


def test_export_rows_dynamic_gives_the_arm_and_the_gated_items():
    key = dynamic_key([inst("i1", refs=["yes"] * 4 + ["no"] * 4), inst("i2")])
    votes = [{**dv("a1", "i1", True), "id": 7, "client_id": None, "elapsed_ms": 1, "created_utc": "t",
              "choice": None},
             {**dv("a1", "i2", False), "id": 8, "client_id": None, "elapsed_ms": 1, "created_utc": "t",
              "choice": None}]
    rows = analysis.export_rows(key, votes, unblind=True)
    assert {k: rows[0][k] for k in ("metric", "trajectory", "case_id", "arm", "gated_items")} == {
        "metric": "dynamic", "trajectory": "t1", "case_id": "c-i1", "arm": "p", "gated_items": [1] * 4 + [0] * 4}
    assert rows[1]["gated_items"] == [0] * 8 and "arm_A" not in rows[0]


def test_csv_cells():
    assert analysis._csv_cell(None) == "" and analysis._csv_cell(0) == "0" and analysis._csv_cell("") == ""
    assert analysis._csv_cell(True) == "yes" and analysis._csv_cell(False) == "no"
    assert analysis._csv_cell(["yes", "no"]) == "yes;no" and analysis._csv_cell([]) == ""
    assert analysis._csv_cell(1.5) == "1.5" and analysis._csv_cell("A") == "A"


def test_export_votes_writes_csv_and_jsonl_under_exports_or_the_given_folder(tmp_path):
    key = static_key([pair("r1", a=1.0, b=3.0), pair("r2")])
    d, st = make_study(tmp_path / "s", key, {"a1": ["r1", "r2"]})
    st.record("a1", "r1", "static", {"choice": "B"}, client_id="c", elapsed_ms=9)
    st.record("a1", "r2", "static", {"choice": "A"})
    out = analysis.export_votes(d, unblind=True)
    assert out == {"csv": str(d / "exports" / "votes-unblinded.csv"),
                   "jsonl": str(d / "exports" / "votes-unblinded.jsonl"), "votes": "2", "unblinded": "true"}
    with open(out["csv"]) as f:
        rows = list(csv.reader(f))
    assert rows[0] == analysis.EXPORT_COLUMNS and len(rows) == 3
    r = dict(zip(rows[0], rows[1]))
    assert (r["choice"], r["started"], r["corrected"], r["higher_is_better"], r["arm_B"], r["arm"]) == \
        ("B", "", "no", "yes", "q", "")
    lines = Path(out["jsonl"]).read_text().splitlines()
    assert len(lines) == 2 and list(json.loads(lines[0])) == list(analysis.export_rows(key, st.votes(), True)[0])
    assert list(json.loads(lines[0]))[:2] == ["vote_id", "annotator"]  # the columns' order, not sorted
    blind = analysis.export_votes(d, tmp_path / "blind", unblind=False)
    assert blind["csv"] == str(tmp_path / "blind" / "votes.csv")
    head = Path(blind["csv"]).read_text().splitlines()[0].split(",")
    assert head == ["vote_id", "annotator", "item", "kind", "role", "check_passed", "choice", "started", "answers",
                    "client_id", "elapsed_ms", "created_utc", "corrected", "first_choice", "first_started",
                    "first_answers"]
    assert "metric" not in json.loads(Path(blind["jsonl"]).read_text().splitlines()[0])


def test_export_votes_of_a_dynamic_study_joins_lists_and_writes_yes_no(tmp_path):
    d, st = make_study(tmp_path / "d", dynamic_key([inst("i1")]), {"a1": ["i1"]})
    st.record("a1", "i1", "dynamic", {"started": True, "answers": ["yes", "no"] * 4})
    out = analysis.export_votes(d, unblind=True)
    with open(out["csv"]) as f:
        r = next(csv.DictReader(f))
    assert (r["started"], r["answers"], r["gated_items"], r["arm"], r["arm_A"]) == \
        ("yes", "yes;no;yes;no;yes;no;yes;no", "1;0;1;0;1;0;1;0", "p", "")
