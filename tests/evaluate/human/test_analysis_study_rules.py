"""A study's analysis rules at their edges, on small keys and votes built in memory: what passes an attention
check, who answered which checks (practice never counts), a correlation interval needs three instances, CSV cells,
and the blind export columns."""

from __future__ import annotations

import math

import numpy as np

from evaluate.human import analysis, stats


def test_a_check_is_passed_by_its_expected_side_or_a_does_not_start_gate():
    assert analysis._passed({"expected": "A"}, {"choice": "A"})
    assert not analysis._passed({"expected": "A"}, {"choice": "T"})
    assert analysis._passed({"started": False}, {"started": 0})
    assert not analysis._passed({"started": False}, {"started": 1})
    assert not analysis._passed({"started": False}, {"started": None})  # no gate answered is no pass
    assert analysis._passed({"started": True, "still": True}, {"started": True})


def test_attention_counts_each_annotators_checks_and_names_the_failed():
    key = {"items": [{"id": "p1", "check": {"expected": "A"}}, {"id": "p2", "check": {"expected": "B"}},
                     {"id": "p3", "check": {"expected": "A"}, "practice": True}, {"id": "p4"}]}
    votes = [{"annotator": "a1", "item": "p1", "choice": "A"}, {"annotator": "a1", "item": "p2", "choice": "A"},
             {"annotator": "a1", "item": "p3", "choice": "B"}, {"annotator": "a1", "item": "p4", "choice": "B"},
             {"annotator": "a2", "item": "p4", "choice": "A"}, {"annotator": "a3", "item": "p2", "choice": "B"}]
    assert analysis.attention(key, votes) == {"a1": {"checks": 2, "passed": 1, "failed": ["p2"]},
                                              "a3": {"checks": 1, "passed": 1, "failed": []}}


def test_a_correlation_interval_needs_three_instances():
    x = np.array([1.0, 2.0])
    lo, hi, dropped = analysis._corr_ci(x, x, stats.spearman_rows, 50, 0)
    assert math.isnan(lo) and math.isnan(hi) and dropped == 0
    x3 = np.array([1.0, 2.0, 3.0])
    lo, hi, dropped = analysis._corr_ci(x3, x3, stats.spearman_rows, 50, 0)
    assert lo == hi == 1.0 and 0 < dropped < 50  # constant resamples (one value drawn thrice) are dropped
    lo, hi, dropped = analysis._corr_ci(np.ones(3), x3, stats.spearman_rows, 20, 0)
    assert math.isnan(lo) and math.isnan(hi) and dropped == 20


def test_csv_cells_are_empty_yes_no_or_joined():
    assert [analysis._csv_cell(v) for v in (None, True, False, [1, "a"], [], 0, 0.5, "x")] == \
        ["", "yes", "no", "1;a", "", "0", "0.5", "x"]


def _pair(pid, **extra):
    return {"id": pid, "metric": "k[b]", "higher_is_better": True, "A": {"arm": "x", "value": 1.0},
            "B": {"arm": "y", "value": 0.5}, "task": {"trajectory": "t", "case_id": "c"}, **extra}


def test_static_statistics_leave_out_checks_and_practice_and_count_fully_voted_pairs():
    key = {"design": {"counts": {"k[b]": {}}},
           "items": [_pair("p1"), _pair("p2"), _pair("p3", practice=True), _pair("p4", check={"expected": "A"})]}
    votes = [{"annotator": "a1", "item": "p1", "choice": "A"}, {"annotator": "a2", "item": "p1", "choice": "A"},
             {"annotator": "a1", "item": "p2", "choice": "B"},
             {"annotator": "a1", "item": "p3", "choice": "B"}, {"annotator": "a2", "item": "p4", "choice": "A"}]
    res = analysis.static_results(key, votes, ["a1", "a2"], n_boot=10)
    assert res["items"] == 2 and res["votes"] == 3 and list(res["metrics"]) == ["k[b]", analysis.ALL]
    m = res["metrics"]["k[b]"]
    assert m["pairs"] == 2 and m["complete"] == 1 and m["metric_id"] == "k"
    assert res["metrics"][analysis.ALL]["metric_id"] == analysis.ALL
    assert res["attention"] == {"a2": {"checks": 1, "passed": 1, "failed": []}}


def _instance(iid, vlm_started, **extra):
    vlm = None if vlm_started is None else {"started": vlm_started, "items": [1 if vlm_started else 0] * 8}
    return {"id": iid, "arm": {"arm": "m/c"}, "references": ["yes"] * 8,
            "aspects": ["return_progress", "persistence_reset", "final_state", "causal_physical"] * 2,
            "vlm": vlm, **extra}


def _dyn_vote(ann, item, started):
    return {"annotator": ann, "item": item, "started": started, "answers": ["yes"] * 8 if started else None}


def test_dynamic_statistics_match_the_judges_gate_with_the_human_majority():
    key = {"design": {"counts": {"dynamic": {"judge": "j"}}},
           "items": [_instance("d1", True), _instance("d2", False), _instance("d3", True), _instance("d4", None),
                     _instance("d7", False),
                     _instance("d5", True, practice=True), _instance("d6", True, check={"started": False})]}
    votes = [_dyn_vote("a1", "d1", True), _dyn_vote("a2", "d1", True),  # majority started: the judge agrees
             _dyn_vote("a1", "d2", True), _dyn_vote("a2", "d2", False),  # a tie: no majority, no match
             _dyn_vote("a1", "d3", False), _dyn_vote("a2", "d3", False),  # majority not started: the judge differs
             _dyn_vote("a1", "d7", False), _dyn_vote("a2", "d7", False),  # both agree with the judge
             _dyn_vote("a1", "d4", False), _dyn_vote("a1", "d5", True), _dyn_vote("a1", "d6", True)]
    res = analysis.dynamic_results(key, votes, ["a1", "a2"], n_boot=5)
    assert res["items"] == 5 and res["votes"] == 9 and res["instances_voted"] == 5 and res["instances_judged"] == 4
    assert res["gate_agreement"] == 2 / 4 and res["complete"] == 4 and res["judge"] == "j"
    assert [(r["id"], r["human_gate"], r["vlm_gate"]) for r in res["instances"]] == [
        ("d1", 1, True), ("d2", None, False), ("d3", 0, True), ("d4", 0, None), ("d7", 0, False)]
    assert res["tied_labels"] == 8  # d2: every item split one to one
    assert res["item_agreement"] == 16 / 24  # d1 and d7 match on all eight, d3 on none, d2 undecided
    overall = res["dimensions"]["overall"]  # judged: human 1, undefined (d2), 0, 0; judge 1, 0, 1, 0
    assert overall["human_mean"] == 1 / 3 and overall["vlm_mean"] == 0.5 and overall["n"] == 3


def _progress_study(tmp_path, monkeypatch, votes):
    import json

    key = {"kind": "static", "design": {}, "items": [_pair("p1"), _pair("p2", practice=True), _pair("p3", check={"expected": "B"}),
                                       {**_pair("p4"), "B": {"arm": "y", "value": 1.0}}]}
    (tmp_path / "annotators.json").write_text(json.dumps({"annotators": [{"id": "a1", "order": ["p1", "p2", "p3",
                                                                                                 "p4"]}]}))
    monkeypatch.setattr(analysis, "ANNOTATORS_FILE", "annotators.json")
    monkeypatch.setattr(analysis, "load", lambda study_dir: ({}, key, votes, ["a1"]))


def test_progress_agreement_counts_real_decisive_pairs_only(tmp_path, monkeypatch):
    votes = [{"annotator": "a1", "item": "p1", "choice": "A", "created_utc": "2026-01-01T00:00:02"},
             {"annotator": "a1", "item": "p2", "choice": "B", "created_utc": "2026-01-01T00:00:03"},
             {"annotator": "a1", "item": "p3", "choice": "A", "created_utc": "2026-01-01T00:00:01"},
             {"annotator": "a1", "item": "p4", "choice": "B", "created_utc": "2026-01-01T00:00:00",
              "corrections": [{"choice": "A"}]}]
    _progress_study(tmp_path, monkeypatch, votes)
    assert analysis.progress(tmp_path) == [{
        "annotator": "a1", "done": 4, "total": 4, "last_vote_utc": "2026-01-01T00:00:03", "corrected": 1,
        "checks": 1, "checks_passed": 0, "failed_items": ["p3"], "median_s": None, "fast_votes": 0,
        "timed_votes": 0, "too_fast": False, "revoked_utc": None, "agree_with_metric": 1.0, "decisive_votes": 1}]


def test_the_blind_export_holds_only_what_was_clicked(tmp_path, monkeypatch):
    votes = [{"id": 1, "annotator": "a1", "item": "p1", "kind": "static", "choice": "A", "started": None,
              "answers": None, "client_id": "c", "elapsed_ms": 5, "created_utc": "t"}]
    _progress_study(tmp_path, monkeypatch, votes)
    analysis.export_votes(tmp_path, tmp_path / "out")  # blind by default
    header, row = (tmp_path / "out" / "votes.csv").read_text().splitlines()
    assert header.split(",") == ["vote_id", "annotator", "item", "kind", "role", "check_passed", "choice", "started",
                                 "answers", "client_id", "elapsed_ms", "created_utc", "corrected", "first_choice",
                                 "first_started", "first_answers"]
    assert row == "1,a1,p1,static,real,,A,,,c,5,t,no,,,"


def test_by_default_every_vote_is_kept_and_the_export_blind(tmp_path, monkeypatch):
    """The default export names no arm and its files are readable like any result; ``unblind=True`` adds the arms
    and writes ``votes-unblinded.*`` at mode 0600, like key.json (issue 44: exports that unblind)."""
    import json
    import stat
    from pathlib import Path

    votes = [{"id": 1, "annotator": "a1", "item": "p3", "kind": "static", "choice": "A", "started": None,
              "answers": None, "client_id": "c", "elapsed_ms": 5, "created_utc": "t"},
             {"id": 2, "annotator": "a1", "item": "p1", "kind": "static", "choice": "A", "started": None,
              "answers": None, "client_id": "c", "elapsed_ms": 5, "created_utc": "t"}]
    _progress_study(tmp_path, monkeypatch, votes)  # a1 failed the check p3
    res = analysis.analyse(tmp_path, n_boot=5)
    assert res["excluded"] == [] and res["votes"] == 1 and res["annotators"] == ["a1"]
    out = analysis.export_votes(tmp_path, tmp_path / "out")
    text = Path(out["csv"]).read_text() + Path(out["jsonl"]).read_text()
    assert "arm" not in text.split("\n")[0] and '"x"' not in text and ",x," not in text
    row = json.loads((tmp_path / "out" / "votes.jsonl").read_text().splitlines()[0])
    assert list(row)[:3] == ["vote_id", "annotator", "item"]  # the export's own column order, not sorted
    assert (row["role"], row["check_passed"]) == ("check", False)
    un = analysis.export_votes(tmp_path, tmp_path / "out", unblind=True)
    assert Path(un["csv"]).name == "votes-unblinded.csv" and Path(un["jsonl"]).name == "votes-unblinded.jsonl"
    assert "metric_preferred_arm" in Path(un["csv"]).read_text().splitlines()[0]
    for f in (un["csv"], un["jsonl"]):
        assert stat.S_IMODE(Path(f).stat().st_mode) == 0o600, f  # the arms: the owner's only


def test_a_key_without_counts_keeps_the_metrics_in_item_order():
    key = {"design": {"counts": None}, "items": [_pair("p1", metric="z[b]"), _pair("p2")]}
    assert list(analysis.static_results(key, [], ["a1"], n_boot=5)["metrics"]) == ["z[b]", "k[b]", analysis.ALL]
