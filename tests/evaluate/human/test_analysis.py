"""Votes joined with the hidden key: the agreement results against a hand computation on a planned study, the
dynamic checklist alignment under the event gate, the raw-vote export, and the report's tables with the paper's
Table 6 and 7 numbers beside ours."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from evaluate.human import analysis
from evaluate.human.design import PlanRequest, plan_study
from evaluate.human.store import VoteStore, study_hash
from tests.support.human_data import make_runs

ARMS3 = ("alpha/fullkv", "beta/fullkv", "gamma/fullkv")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"), arms=ARMS3)


@pytest.fixture(scope="module")
def _studies(runs, tmp_path_factory) -> dict:
    return {}


@pytest.fixture
def planned(runs, _studies, tmp_path_factory, tmp_path):
    """``planned(kinds)``: a fresh copy, in ``tmp_path``, of the study of ``runs`` over ``kinds`` (seed 0), planned
    once per module: planning is tested in test_design.py; here each test votes into a copy of its own."""
    def make(kinds: list[str]) -> Path:
        if tuple(kinds) not in _studies:
            where = tmp_path_factory.mktemp("study") / "s"
            _studies[tuple(kinds)] = Path(plan_study(PlanRequest(runs, kinds, seed=0), where)["dir"])
        return Path(shutil.copytree(_studies[tuple(kinds)], tmp_path / "s"))
    return make


def vote_all(d: Path, fn) -> list[dict]:
    """Every annotator votes on every item with ``fn(annotator, key item) -> payload``."""
    key = json.loads((d / "key.json").read_text())
    store = VoteStore(d / "votes.sqlite", study_hash(d / "study.json"))
    ann = json.loads((d / "annotators.json").read_text())["annotators"]
    cast = []
    for a in ann:
        items = {i["id"]: i for i in key["items"]}
        for iid in a["order"]:
            p = fn(a["id"], items[iid])
            store.record(a["id"], iid, key["kind"], p)
            cast.append({"annotator": a["id"], "item": iid, **p})
    return cast


def test_static_results_equal_a_hand_computation(runs, tmp_path):
    d = Path(plan_study(PlanRequest(runs, ["static"], seed=3), tmp_path / "s")["dir"])
    rng = np.random.default_rng(0)
    cast = vote_all(d, lambda a, it: {"choice": str(rng.choice(["A", "T", "B"], p=[0.5, 0.2, 0.3]))})
    res = analysis.analyse(d)
    key = json.loads((d / "key.json").read_text())
    by = {}
    for c in cast:
        by.setdefault(c["item"], []).append(c["choice"])
    for metric in {it["metric"] for it in key["items"]} | {analysis.ALL}:
        its = [it for it in key["items"] if metric == analysis.ALL or it["metric"] == metric]
        decisive = agree = ties = splits = 0
        human: dict = {}
        auto: dict = {}
        for it in its:
            v = by[it["id"]]
            pref = "A" if it["A"]["value"] > it["B"]["value"] else "B" if it["B"]["value"] > it["A"]["value"] else "T"
            top = max("ATB", key=v.count)
            if v.count(top) >= 2 and top != "T":
                decisive += 1
                agree += top == pref
            elif v.count(top) >= 2:
                ties += 1
            else:
                splits += 1
            for side, other in (("A", "B"), ("B", "A")):
                arm = it[side]["arm"]
                human.setdefault(arm, []).extend(1.0 if x == side else 0.5 if x == "T" else 0.0 for x in v)
                auto.setdefault(arm, []).append(1.0 if pref == side else 0.5 if pref == "T" else 0.0)
        r = res["metrics"][metric]
        assert (r["decisive"], r["agree"], r["majority_ties"], r["splits"]) == (decisive, agree, ties, splits)
        assert r["agreement"] == pytest.approx(agree / decisive) if decisive else np.isnan(r["agreement"])
        for arm in human:
            assert r["win_rates"][arm]["human"] == pytest.approx(np.mean(human[arm]))
            assert r["win_rates"][arm]["auto"] == pytest.approx(np.mean(auto[arm]))
        from scipy.stats import spearmanr

        arms = sorted(human)
        want = spearmanr([np.mean(human[a]) for a in arms], [np.mean(auto[a]) for a in arms]).statistic
        assert r["spearman"] == pytest.approx(want, nan_ok=True)
    assert res["votes"] == len(cast) == 3 * len(key["items"])


def test_dynamic_results_gate_then_majority_by_hand(runs, tmp_path):
    d = Path(plan_study(PlanRequest(runs, ["dynamic"], seed=0), tmp_path / "d")["dir"])
    key = json.loads((d / "key.json").read_text())
    rng = np.random.default_rng(1)

    def fn(a, it):
        if rng.random() < 0.3:
            return {"started": False, "answers": None}
        return {"started": True, "answers": [str(x) for x in rng.choice(["yes", "no"], 8)]}

    cast = vote_all(d, fn)
    res = analysis.analyse(d)
    human, vlm = [], []
    aspects = ["return_progress", "persistence_reset", "final_state", "causal_physical"]
    per_aspect_h = {a: [] for a in aspects}
    per_aspect_v = {a: [] for a in aspects}
    for it in key["items"]:
        votes = [c for c in cast if c["item"] == it["id"]]
        scores = [[0] * 8 if not v["started"] else [int(x == r) for x, r in zip(v["answers"], it["references"])]
                  for v in votes]
        labels = [int(sum(s[q] for s in scores) >= 2) for q in range(8)]  # three annotators: a strict majority
        human.append(np.mean(labels))
        vlm.append(np.mean(it["vlm"]["items"]))
        for k, a in enumerate(aspects):
            per_aspect_h[a].append(np.mean(labels[2 * k: 2 * k + 2]))
            per_aspect_v[a].append(np.mean(it["vlm"]["items"][2 * k: 2 * k + 2]))
    from scipy.stats import pearsonr, spearmanr

    o = res["dimensions"]["overall"]
    assert o["n"] == len(key["items"]) == 12  # 3 arms x 2 dynamic cases x 2 trajectories
    assert o["spearman"] == pytest.approx(spearmanr(human, vlm).statistic)
    assert o["plcc"] == pytest.approx(pearsonr(human, vlm).statistic)
    assert o["spearman_lo"] <= o["spearman"] <= o["spearman_hi"]
    for a in aspects:
        x, y = per_aspect_h[a], per_aspect_v[a]
        got = res["dimensions"][a]["spearman"]
        if np.ptp(x) and np.ptp(y):
            assert got == pytest.approx(spearmanr(x, y).statistic)
        else:
            assert np.isnan(got) and "same" in res["dimensions"][a]["spearman_reason"]
    assert -1 <= res["fleiss_kappa_items"] <= 1 and -1 <= res["fleiss_kappa_gate"] <= 1


def test_export_holds_every_raw_vote(planned, tmp_path):
    d = planned(["environment.visible"])
    cast = vote_all(d, lambda a, it: {"choice": "A" if a == "a1" else "T" if a == "a2" else "B"})
    out = analysis.export_votes(d, unblind=True)
    rows = list(csv.DictReader(open(out["csv"])))
    jl = [json.loads(x) for x in open(out["jsonl"])]
    assert [(r["annotator"], r["item"], r["choice"]) for r in rows] == \
        [(c["annotator"], c["item"], c["choice"]) for c in cast]
    assert [(r["annotator"], r["item"], r["choice"]) for r in jl] == [(r["annotator"], r["item"], r["choice"])
                                                                    for r in rows]
    key = {i["id"]: i for i in json.loads((d / "key.json").read_text())["items"]}
    for r in rows:
        it = key[r["item"]]
        want = {"A": it["A"]["arm"], "B": it["B"]["arm"], "T": "tie"}[r["choice"]]
        assert r["preferred_arm"] == want and r["metric"] == "environment.visible[pixel-thumb16]"
    blind = analysis.export_votes(d, tmp_path / "blind", unblind=False)
    text = Path(blind["csv"]).read_text() + Path(blind["jsonl"]).read_text()
    assert "alpha" not in text and "preferred_arm" not in text


def test_report_tables_put_the_papers_numbers_beside_ours(planned, tmp_path):
    from evaluate.human.report import write_report

    d = planned(["static"])
    vote_all(d, lambda a, it: {"choice": "A" if it["A"]["value"] > it["B"]["value"] else "B"})
    out = write_report(d)
    res = out["results"]
    assert res["metrics"][analysis.ALL]["agreement"] == 1.0  # every annotator sides with the metric
    assert res["metrics"][analysis.ALL]["spearman"] == pytest.approx(1.0)
    md = Path(out["markdown"]).read_text()
    assert "| Table 6 | Human Identity | pairwise agreement [%] | 85.5 |" in md
    assert "| Table 6 | highest of six metrics | pairwise agreement [%] | 92.5 | 100.0 |" in md
    assert "| Table 6 | Environment Visible | Spearman rho | 0.988 | 1.000 | environment.visible[pixel-thumb16] | " \
           "no (paper: dinov2) |" in md
    rows = list(csv.DictReader(open(Path(out["out_dir"]) / "tables" / "human_static.csv")))
    assert [r["metric"] for r in rows] == ["object.geometry[template-ncc]", "environment.visible[pixel-thumb16]",
                                           analysis.ALL]
    assert json.loads(Path(out["json"]).read_text())["kind"] == "static"


def test_the_study_report_includes_a_human_study(runs, planned, tmp_path):
    from evaluate.reporting import build_report
    from evaluate.reporting.cli import merge_run_args

    d = planned(["environment.visible"])
    vote_all(d, lambda a, it: {"choice": "A"})
    out = build_report(runs, tmp_path / "report", strips=False, figures=False, human_studies=[d])
    md = Path(out["markdown"]).read_text()
    assert "### Human evaluation: static memory" in md and "### Human evaluation: ours vs the paper" in md
    assert "human_static" in out["tables"] and "t-human_static" in Path(out["html"]).read_text()
    argv = merge_run_args(["harness", "report", "run=a", "human_study=x,y", "human_study=z"])
    assert argv[-1] == "+human_study=['x','y','z']" and "run=a" in argv


def test_report_ranks_the_arms_from_the_votes_beside_the_metric(planned, tmp_path):
    """Two of three annotators side with the metric, the third against it: every arm wins and loses some votes,
    so the Bradley-Terry strengths are finite; the people's ranking follows the majority, i.e. the metric's."""
    from evaluate.human.ranking import bradley_terry
    from evaluate.human.report import write_report

    d = planned(["environment.visible"])
    first = json.loads((d / "annotators.json").read_text())["annotators"][0]["id"]

    def vote(a, it):
        metric_side = "A" if it["A"]["value"] > it["B"]["value"] else "B"
        return {"choice": metric_side if a != first else {"A": "B", "B": "A"}[metric_side]}

    cast = vote_all(d, vote)
    out = write_report(d, n_boot=200)
    bt = out["results"]["metrics"][analysis.ALL]["bradley_terry"]
    key = {i["id"]: i for i in json.loads((d / "key.json").read_text())["items"]}
    by: dict = {}
    for v in cast:
        by.setdefault(v["item"], []).append(v["choice"])
    direct = bradley_terry([(key[i]["A"]["arm"], key[i]["B"]["arm"], c) for i, c in by.items()])
    assert direct.ok()
    for arm, s in zip(direct.arms, direct.scores):
        x = bt["arms"][arm]
        assert x["score"] == pytest.approx(s, abs=1e-9) and x["lo"] <= x["score"] <= x["hi"]
        assert x["rank_human"] == x["rank_metric"]  # the majority sides with the metric on every pair
    assert bt["spearman"] == pytest.approx(1.0)
    rows = list(csv.DictReader(open(Path(out["out_dir"]) / "tables" / "human_ranking.csv")))
    assert {r["arm"] for r in rows if r["metric"] == analysis.ALL} == set(direct.arms)
    assert "A ranking from people" in Path(out["markdown"]).read_text()


def test_export_carries_values_and_preference_so_agreement_can_be_recomputed(planned, tmp_path):
    """From votes.csv alone (no key.json): the decisive majorities against the metric's side give the report's
    agreement, counted by hand."""
    from evaluate.human.report import write_report

    d = planned(["environment.visible"])
    first = json.loads((d / "annotators.json").read_text())["annotators"][0]["id"]
    vote_all(d, lambda a, it: {"choice": "A" if a == first else "B" if it["A"]["value"] < it["B"]["value"] else "A"})
    rows = list(csv.DictReader(open(analysis.export_votes(d, unblind=True)["csv"])))
    by: dict = {}
    for r in rows:
        v_a, v_b = float(r["value_A"]), float(r["value_B"])
        assert r["higher_is_better"] == "yes"
        assert r["metric_prefers"] == ("A" if v_a > v_b else "B" if v_b > v_a else "T")
        assert r["metric_preferred_arm"] == {"A": r["arm_A"], "B": r["arm_B"], "T": "tie"}[r["metric_prefers"]]
        by.setdefault(r["item"], {"pref": r["metric_prefers"], "votes": []})["votes"].append(r["choice"])
    decisive = agree = 0
    for x in by.values():
        for side in "AB":
            if x["votes"].count(side) * 2 > len(x["votes"]):
                decisive += 1
                agree += side == x["pref"]
    res = write_report(d, n_boot=50)["results"]["metrics"][analysis.ALL]
    assert (res["decisive"], res["agree"]) == (decisive, agree) and decisive > 0


def test_agreement_json_is_strict_json(runs, tmp_path):
    """Two arms: Spearman's rho is undefined (NaN in memory); the file holds null and the reason, never a bare
    NaN that a strict JSON reader refuses."""
    from evaluate.human.report import write_report

    d = Path(plan_study(PlanRequest(runs[:2], ["environment.visible"], seed=0), tmp_path / "s")["dir"])
    vote_all(d, lambda a, it: {"choice": "T"})
    out = write_report(d, n_boot=50)
    assert np.isnan(out["results"]["metrics"][analysis.ALL]["spearman"])

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    data = json.loads(Path(out["json"]).read_text(), parse_constant=refuse)
    m = data["metrics"][analysis.ALL]
    assert m["spearman"] is None and "at least 3" in m["spearman_reason"]


def test_attention_checks_are_reported_left_out_of_the_statistics_and_excludable(runs, tmp_path):
    """checks=4: pairs whose one side is another case's clip. Annotator a1 answers them wrong (the decoy side),
    the others right; every annotator sides with the metric on the real pairs. The report names a1's failures,
    the statistics count real pairs only, and exclude=failed_checks leaves a1's votes out."""
    from evaluate.human.report import write_report
    from harness.app.human import main as human_main

    d = Path(plan_study(PlanRequest(runs, ["environment.visible"], seed=0, checks=4), tmp_path / "s")["dir"])
    key = json.loads((d / "key.json").read_text())
    checks = {i["id"]: i for i in key["items"] if i.get("check")}
    assert len(checks) == 4 and sorted(c["check"]["expected"] for c in checks.values()) == ["A", "A", "B", "B"]
    for c in checks.values():  # the right side is the first view's own case, the other a decoy of another case
        right, wrong = (c["A"], c["B"]) if c["check"]["expected"] == "A" else (c["B"], c["A"])
        assert right["case_id"] == c["task"]["case_id"] != wrong["case_id"] == c["check"]["decoy_case"]
    public = (d / "study.json").read_text()
    assert "check" not in public and "decoy" not in public  # a check looks like any other pair
    first = json.loads((d / "annotators.json").read_text())["annotators"][0]["id"]

    def vote(a, it):
        if it.get("check"):
            right = it["check"]["expected"]
            return {"choice": right if a != first else {"A": "B", "B": "A"}[right]}
        return {"choice": "A" if it["A"]["value"] > it["B"]["value"] else "B"}

    vote_all(d, vote)
    res = write_report(d, n_boot=50)["results"]
    assert res["attention"][first] == {"checks": 4, "passed": 0, "failed": sorted(checks, key=list(
        x["item"] for x in analysis.read_votes(d) if x["annotator"] == first).index)}
    assert all(r["passed"] == 4 and not r["failed"] for a, r in res["attention"].items() if a != first)
    real = len(key["items"]) - 4
    assert res["items"] == real and res["metrics"][analysis.ALL]["pairs"] == real  # checks never counted
    assert res["metrics"][analysis.ALL]["agreement"] == 1.0 and res["excluded"] == []
    ex = write_report(d, n_boot=50, exclude_failed_checks=True)
    assert ex["results"]["excluded"] == [first] and first not in ex["results"]["annotators"]
    assert ex["results"]["votes"] == real * 2  # the two remaining annotators' votes on the real pairs
    md = Path(ex["markdown"]).read_text()
    line = next(x for x in md.splitlines() if x.startswith(f"| {first} |"))
    assert "| 4 | 0 | 4 |" in line and line.rstrip().endswith("| yes |")
    assert human_main(["report", f"study={d}", "exclude=everyone"]) == 2  # a bad value is a user error


def test_status_shows_each_annotators_progress_checks_and_agreement(runs, tmp_path, capsys):
    from evaluate.human.store import VoteStore, study_hash
    from harness.app.human import main as human_main

    d = Path(plan_study(PlanRequest(runs, ["environment.visible"], seed=0, checks=2), tmp_path / "s")["dir"])
    key = {i["id"]: i for i in json.loads((d / "key.json").read_text())["items"]}
    ann = json.loads((d / "annotators.json").read_text())["annotators"]
    store = VoteStore(d / "votes.sqlite", study_hash(d / "study.json"))
    a1 = ann[0]
    real = [i for i in a1["order"] if not key[i].get("check")][:3]
    chk = [i for i in a1["order"] if key[i].get("check")][:1]
    for i in real[:2]:  # two votes with the metric, one against it (metric side: the higher value)
        it = key[i]
        store.record(a1["id"], i, "static", {"choice": "A" if it["A"]["value"] > it["B"]["value"] else "B"})
    it = key[real[2]]
    store.record(a1["id"], real[2], "static", {"choice": "B" if it["A"]["value"] > it["B"]["value"] else "A"})
    store.record(a1["id"], chk[0], "static", {"choice": key[chk[0]]["check"]["expected"]})
    rows = {r["annotator"]: r for r in analysis.progress(d)}
    r = rows[a1["id"]]
    assert (r["done"], r["total"], r["checks"], r["checks_passed"]) == (4, len(key), 1, 1)
    assert r["agree_with_metric"] == pytest.approx(2 / 3) and r["decisive_votes"] == 3
    assert rows[ann[1]["id"]]["done"] == 0 and rows[ann[1]["id"]]["agree_with_metric"] is None
    assert human_main(["status", f"study={d}"]) == 0
    out = capsys.readouterr().out
    assert f"4 of {3 * len(key)} answers in" in out and "67 % of 3" in out and "1/1" in out


def test_paper_rows_tasks_and_judgements_per_metric_are_not_floored(planned, tmp_path):
    """The two metrics have different pair counts here: 'tasks' (the paper's pairs per metric) and 'judgements per
    metric' give the mean and the range, not a floored quotient of the totals."""
    from evaluate.human.report import write_report

    d = planned(["static"])
    vote_all(d, lambda a, it: {"choice": "T"})
    out = write_report(d, n_boot=50)
    res = out["results"]
    per = {k: r["pairs"] for k, r in res["metrics"].items() if k != analysis.ALL}
    assert len(set(per.values())) == 2  # object.geometry and environment.visible differ
    rows = {r["column"]: r["ours"] for r in csv.DictReader(open(Path(out["out_dir"]) / "tables" / "human_paper.csv"))
            if r["row"] == "study"}
    mean = sum(per.values()) / 2
    assert rows["tasks"] == f"{mean:.1f} pairs per metric on average ({min(per.values())} to {max(per.values())})"
    assert rows["judgements per metric"] == (f"{3 * mean:.1f} votes per metric on average "
                                             f"({3 * min(per.values())} to {3 * max(per.values())})")


def test_human_tables_write_tidy_numeric_csv(planned, tmp_path):
    """Numbers as numbers: the agreement and its interval in their own columns, statistics as plain numbers, no
    empty interval columns beside plain values."""
    from evaluate.human.report import write_report

    d = planned(["environment.visible"])
    vote_all(d, lambda a, it: {"choice": "A" if it["A"]["value"] > it["B"]["value"] else "B"})
    out = write_report(d, n_boot=50)
    with open(Path(out["out_dir"]) / "tables" / "human_static.csv") as f:
        head = next(csv.reader(f))
        f.seek(0)
        rows = list(csv.DictReader(f))
    assert {"agreement", "agreement:lo", "agreement:hi", "agreement:n"} <= set(head)
    assert "pairs:lo" not in head and "decisive:n" not in head  # plain counts: one column each
    r = next(x for x in rows if x["metric"] == analysis.ALL)
    assert float(r["agreement"]) == 1.0 and float(r["agreement:lo"]) <= 1.0 and int(r["agreement:n"]) > 0
    assert float(r["spearman"]) == pytest.approx(1.0) and int(r["pairs"]) > 0
    assert len(head) < 30


def test_practice_pairs_come_first_are_marked_and_never_counted(runs, tmp_path):
    d = Path(plan_study(PlanRequest(runs, ["environment.visible"], seed=0, practice=2, checks=1), tmp_path / "s")
             ["dir"])
    key = json.loads((d / "key.json").read_text())
    practice = sorted(i["id"] for i in key["items"] if i.get("practice"))
    public = {i["id"]: i for i in json.loads((d / "study.json").read_text())["items"]}
    assert len(practice) == 2 and all(public[i].get("practice") for i in practice)
    assert sum(1 for i in public.values() if i.get("practice")) == 2  # only they are marked on the page
    for a in json.loads((d / "annotators.json").read_text())["annotators"]:
        assert a["order"][:2] == practice and sorted(a["order"]) == sorted(public)  # first, then the rest
    # practice answered against the right side, everything else with the metric (and the check right)
    vote_all(d, lambda a, it: {"choice": ({"A": "B", "B": "A"}[it["check"]["expected"]] if it.get("practice") else
                                          it["check"]["expected"] if it.get("check") else
                                          "A" if it["A"]["value"] > it["B"]["value"] else "B")})
    res = analysis.analyse(d, n_boot=50)
    real = len(key["items"]) - 3
    assert res["items"] == real and res["metrics"][analysis.ALL]["agreement"] == 1.0
    assert all(r == {"checks": 1, "passed": 1, "failed": []} for r in res["attention"].values())  # not practice
    from evaluate.human.design import add_annotators

    add_annotators(d, ["late"])
    late = next(a for a in json.loads((d / "annotators.json").read_text())["annotators"] if a["id"] == "late")
    assert late["order"][:2] == practice


def test_dynamic_practice_and_still_clip_checks_are_reported_left_out_and_excludable(runs, tmp_path):
    """A dynamic study with practice=2 checks=3: practice instances come first (marked on the page, drawn from
    instances not in the study), checks are an instance's first frame held still (the right answer: the event does
    not start) and look like any instance. Annotator a1 says the event starts in every check; the report names
    a1's failures, the statistics count the real instances only, exclude=failed_checks leaves a1 out."""
    from evaluate.human.report import write_report
    from harness.video import iter_frames

    d = Path(plan_study(PlanRequest(runs, ["dynamic"], seed=0, instances=4, practice=2, checks=3), tmp_path / "d")
             ["dir"])
    key = json.loads((d / "key.json").read_text())
    items = {i["id"]: i for i in key["items"]}
    checks = [i for i, it in items.items() if it.get("check")]
    practice = sorted(i for i, it in items.items() if it.get("practice"))
    real = [i for i, it in items.items() if not it.get("check") and not it.get("practice")]
    assert (len(real), len(practice), len(checks)) == (4, 2, 3)
    assert all(items[c]["check"] == {"started": False, "still": True} for c in checks)
    def arm(i):
        return items[i]["arm"]["arm"], items[i]["arm"]["trajectory"], items[i]["arm"]["case_id"]

    assert not {arm(i) for i in practice} & {arm(i) for i in real}  # practice: instances not in the study
    assert {arm(i) for i in checks} <= {arm(i) for i in real}
    public = {i["id"]: i for i in json.loads((d / "study.json").read_text())["items"]}
    text = (d / "study.json").read_text()
    assert "check" not in text and "still" not in text  # a check looks like any instance
    assert {i for i, p in public.items() if p.get("practice")} == set(practice)
    assert public[checks[0]].keys() == public[real[0]].keys()
    for a in json.loads((d / "annotators.json").read_text())["annotators"]:
        assert a["order"][:2] == practice
    # a check's clip is one frame held still; a real instance's clip moves
    still = [f for _, f in iter_frames(d / "media" / public[checks[0]]["clip"])]
    moving = [f for _, f in iter_frames(d / "media" / public[real[0]]["clip"])]
    assert len(still) == len(moving) == public[checks[0]]["frames"]
    def change(frames):  # the largest mean absolute difference of a frame from the first one
        return max(float(np.abs(f.astype(int) - frames[0].astype(int)).mean()) for f in frames)

    assert change(still) < 3 and change(moving) > 20  # the still one: codec noise only
    first = "a1"

    def vote(a, it):
        if it.get("check"):
            return {"started": a == first, "answers": ["yes"] * 8 if a == first else None}
        if it.get("practice"):  # practice answers are never counted: all wrong here
            return {"started": True, "answers": ["no" if r == "yes" else "yes" for r in it["references"]]}
        return {"started": True, "answers": list(it["references"])}  # every real item right

    vote_all(d, vote)
    res = write_report(d, n_boot=50)
    r = res["results"]
    assert r["items"] == 4 and r["instances_voted"] == 4 and r["votes"] == 4 * 3
    assert r["attention"][first]["checks"] == 3 and r["attention"][first]["passed"] == 0
    assert sorted(r["attention"][first]["failed"]) == sorted(checks)
    assert all(x == {"checks": 3, "passed": 3, "failed": []} for a, x in r["attention"].items() if a != first)
    assert all(inst["human"]["overall"] == 1.0 for inst in r["instances"])  # practice and checks left out
    assert "human_attention" in res["tables"] and "still" in Path(res["markdown"]).read_text()
    ex = analysis.analyse(d, n_boot=50, exclude_failed_checks=True)
    assert ex["excluded"] == [first] and first not in ex["annotators"] and ex["votes"] == 4 * 2
    rows = {x["annotator"]: x for x in analysis.progress(d)}
    assert (rows[first]["checks"], rows[first]["checks_passed"]) == (3, 0)
    assert (rows["a2"]["checks"], rows["a2"]["checks_passed"], rows["a2"]["done"]) == (3, 3, 9)
