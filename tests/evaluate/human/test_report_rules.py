"""The human-study report's rules at their edges, on small result dicts built in memory: whether our backbone is the
paper's, the Bradley-Terry ranking rows (order, n/c reasons, intervals, n), correlation cells, the dynamic
agreement rows, our counterpart of each paper number (dynamic counts, tasks and votes per metric, the lowest and
highest of the paper's six metrics only), strict JSON of numpy floats, and a report keeping every vote by default."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluate.human import report
from evaluate.human.analysis import ALL
from harness.cases import ASPECTS

_BY_ID = {"human.appearance": {"name": "Human Appearance", "backbone": "dinov2+sam2"},
          "human.identity": {"name": "Human Identity", "backbone": "arcface"}}


def test_our_backbone_is_the_papers_only_with_as_many_parts_each_a_match():
    assert report._backbone_is_paper("human.identity[arcface]", _BY_ID) == "yes"
    assert report._backbone_is_paper("human.appearance[dinov2_vitb14+sam2]", _BY_ID) == "yes"
    assert report._backbone_is_paper("human.identity[arcface+x]", _BY_ID) == "no (paper: arcface)"
    assert report._backbone_is_paper("human.appearance[dinov2]", _BY_ID) == "no (paper: dinov2+sam2)"
    assert report._backbone_is_paper("human.identity[other]", _BY_ID) == "no (paper: arcface)"
    assert report._backbone_is_paper("human.identity", _BY_ID) == ""
    assert report._backbone_is_paper("camera.rpe[x]", _BY_ID) == ""


def _bt_arm(score, lo, hi, votes, rank):
    return {"score": score, "lo": lo, "hi": hi, "votes": votes, "rank_human": rank, "auto_win_rate": 0.5,
            "rank_metric": rank}


def test_ranking_rows_follow_the_human_rank_with_intervals_and_reasons():
    bt = {"spearman": None, "spearman_reason": None, "reason": "arm z won every vote",
          "arms": {"a": _bt_arm(0.1, None, None, 0, 2), "b": _bt_arm(None, None, None, 4, None),
                   "z": _bt_arm(0.5, 0.2, 0.9, 5, 1)}}
    t = report.ranking_table({"metrics": {"m[x]": {"bradley_terry": bt}, "skip": {"bradley_terry": None}}})
    assert [k for k, _ in t.rows] == [("m[x]", "z"), ("m[x]", "a"), ("m[x]", "b")]  # unranked last
    z, a, b = (cells for _, cells in t.rows)
    assert (z["score"].mean, z["score"].lo, z["score"].hi, z["score"].n) == (0.5, 0.2, 0.9, 5)
    assert a["score"].mean == 0.1 and math.isnan(a["score"].lo) and math.isnan(a["score"].hi)
    assert a["score"].n == 1  # an arm without votes still has its one estimate
    assert b["score"].reason == "arm z won every vote" and b["rank_human"] is None
    assert z["rho"].reason == "undefined"
    bt.update(reason=None, spearman_reason="fewer than 3 arms")
    t = report.ranking_table({"metrics": {"m[x]": {"bradley_terry": bt}}})
    assert t.rows[2][1]["score"].reason == "no estimate" and t.rows[0][1]["rho"].reason == "fewer than 3 arms"


def test_a_correlation_cell_has_its_interval_or_its_reason():
    c = report._corr_cell({"plcc": 0.5, "plcc_lo": 0.1, "plcc_hi": 0.8, "n": 7}, "plcc")
    assert (c.mean, c.lo, c.hi, c.n, c.reason) == (0.5, 0.1, 0.8, 7, None)
    c = report._corr_cell({"plcc": 0.5, "n": 3}, "plcc")
    assert c.mean == 0.5 and math.isnan(c.lo) and math.isnan(c.hi) and c.n == 3
    assert report._corr_cell({"plcc": None, "plcc_reason": "constant"}, "plcc").reason == "constant"
    assert report._corr_cell({"plcc": float("nan")}, "plcc").reason == "undefined"
    assert report._corr_cell({"spearman": None}, "spearman").reason == "undefined"


def _dynamic_res(**over):
    dim = {"n": 4, "human_mean": 0.5, "vlm_mean": 0.4, "spearman": 0.6, "plcc": float("nan"), "plcc_reason": "x"}
    res = {"kind": "dynamic", "items": 5, "instances_voted": 4, "instances_judged": 4, "votes": 9,
           "annotators": ["a1", "a2"], "judge": "qwen", "dimensions": {d: dict(dim) for d in ["overall", *ASPECTS]},
           "fleiss_kappa_gate": 0.1, "fleiss_kappa_items": 0.2, "gate_agreement": 0.3, "item_agreement": 0.4,
           "tied_labels": 3, "complete": 2}
    res.update(over)
    return res


def test_the_dynamic_agreement_table_counts_undecided_labels_and_full_instances():
    t, a, _ = report.dynamic_tables(_dynamic_res(), paper={"numbers": []})
    assert {k[0]: c["value"] for k, c in a.rows} == {
        "Fleiss kappa, event gate": 0.1, "Fleiss kappa, items": 0.2, "judge gate = human majority": 0.3,
        "judge item = human label": 0.4, "undecided item labels": 3, "fully voted instances": 2}
    overall = t.rows[0][1]
    assert overall["spearman"].mean == 0.6 and overall["plcc"].reason == "x"


def test_our_dynamic_study_counts_beside_the_papers():
    res = _dynamic_res()
    assert report._ours(res, {"measure": "instances"}, {}) == ("4", None)
    assert report._ours(res, {"measure": "items"}, {}) == ("32", None)
    assert report._ours(res, {"measure": "judgements"}, {}) == ("72", None)
    assert report._ours(res, {"measure": "other"}, {}) == ("", None)
    assert report._ours(res, {"measure": "rho", "dimension": "Overall"}, {}) == ("0.600", "dynamic.overall")


def _static_metric(mid, pairs, votes, agreement):
    return {"metric_id": mid, "pairs": pairs, "agreement": agreement,
            "win_rates": {"m/a": {"votes": votes}, "m/b": {"votes": votes}}}


def test_tasks_and_votes_per_metric_are_exact_when_every_metric_has_the_same():
    same = {"kind": "static", "votes": 12, "metrics": {"human.identity[a]": _static_metric("human.identity", 4, 6, 0.5),
                                                       "camera.x[b]": _static_metric("camera.x", 4, 6, 0.9),
                                                       ALL: _static_metric(ALL, 8, 12, 0.6)}}
    assert report._ours(same, {"measure": "tasks"}, {}) == ("4 (pairs per metric)", None)
    assert report._ours(same, {"measure": "judgements_per_metric"}, {}) == ("6", None)
    assert report._ours(same, {"measure": "pairs"}, {}) == ("8", None)
    assert report._ours(same, {"measure": "judgements"}, {}) == ("12", None)
    same["metrics"]["camera.x[b]"] = _static_metric("camera.x", 6, 10, 0.9)
    assert report._ours(same, {"measure": "tasks"}, {}) == ("5.0 pairs per metric on average (4 to 6)", None)
    assert report._ours(same, {"measure": "judgements_per_metric"}, {}) == (
        "8.0 votes per metric on average (6 to 10)", None)


def test_the_lowest_and_highest_agreement_are_over_the_papers_six_metrics_only():
    res = {"kind": "static", "metrics": {"human.identity[a]": _static_metric("human.identity", 4, 6, 0.8),
                                         "human.appearance[b]": _static_metric("human.appearance", 4, 6, 0.7),
                                         "object.geometry[c]": _static_metric("object.geometry", 4, 6, float("nan")),
                                         "camera.x[b]": _static_metric("camera.x", 4, 6, 0.95),
                                         ALL: _static_metric(ALL, 8, 12, 0.99)}}
    assert report._ours(res, {"measure": "agreement_pct", "metric": "max"}, {}) == ("80.0", "human.identity[a]")
    assert report._ours(res, {"measure": "agreement_pct", "metric": "min"}, {}) == ("70.0", "human.appearance[b]")


def test_the_paper_table_names_our_backbone_only_for_a_metric_of_this_study():
    paper = {"metrics": {"Human Identity": {"id": "human.identity", "backbone": "arcface"}},
             "numbers": [{"table": "Table 7", "row": "study", "column": "instances", "value": 50,
                          "human": {"measure": "instances"}},
                         {"table": "Table 7", "row": "Overall", "column": "rho", "value": 0.7,
                          "human": {"measure": "rho", "dimension": "Overall"}}]}
    t = report.paper_table(_dynamic_res(), paper=paper)
    assert [c for _, c in t.rows] == [
        {"paper": "50", "ours": "4", "metric": "", "backbone": ""},
        {"paper": "0.7", "ours": "0.600", "metric": "dynamic.overall", "backbone": ""}]


def test_a_report_keeps_every_vote_unless_asked(monkeypatch, tmp_path):
    seen = {}

    def analyse(study_dir, **kw):
        seen.update(kw)
        raise RuntimeError("stop")

    monkeypatch.setattr(report, "analyse", analyse)
    with pytest.raises(RuntimeError, match="stop"):
        report.write_report(tmp_path)
    assert seen == {"n_boot": 2000, "exclude_failed_checks": False}



def test_a_plain_number_is_rounded_or_not_computed():
    assert [report._f(v) for v in (None, float("nan"), float("inf"), 0.12345)] == ["n/c", "n/c", "n/c", "0.123"]
    assert report._f(1.25, 1) == "1.2"


def test_a_paper_number_is_the_one_of_that_measure_and_that_metric_or_dimension():
    entries = [{"value": 85.5, "human": {"measure": "agreement_pct", "metric": "Human Identity"}},
               {"value": 0.952, "human": {"measure": "rho", "metric": "Human Appearance"}},
               {"value": 0.929, "human": {"measure": "rho", "metric": "Human Identity"}},
               {"value": 0.732, "human": {"measure": "rho", "dimension": "Overall"}}]
    assert report._paper_value(entries, "rho", "Human Identity") == "0.929"
    assert report._paper_value(entries, "rho", "Overall") == "0.732"
    assert report._paper_value(entries, "agreement_pct", "Human Identity") == "85.5"
    assert report._paper_value(entries, "plcc", "Overall") == ""
    assert report._paper_value(entries, "rho", "Object Geometry") == ""


def test_a_statistic_cell_is_a_float_or_not_computed_with_its_reason():
    from evaluate.reporting.cells import Cell

    for v in (None, float("nan"), float("inf"), -float("inf"), np.float64("nan")):
        cell = report._num(v, "no vote")
        assert isinstance(cell, Cell) and cell.reason == "no vote"
    assert report._num(np.float64(0.5)) == 0.5 and type(report._num(np.float64(0.5))) is float


def test_the_attention_table_notes_only_when_no_check_was_answered():
    empty = report.attention_table({"kind": "static"})
    assert [r for r in empty.rows] == [] and any("No attention check was planned" in n for n in empty.notes)
    one = report.attention_table({"kind": "static", "attention": {"ann-1": {"checks": 2, "passed": 1,
                                                                          "failed": ["c-2"]}},
                                  "excluded": ["ann-1"]})
    assert one.rows == [(("ann-1",), {"checks": 2, "passed": 1, "failed": 1, "failed_items": "c-2",
                                      "excluded": "yes"})]
    assert not any("No attention check was planned" in n for n in one.notes)


def test_every_table_is_written_as_markdown_csv_and_latex(monkeypatch, tmp_path):
    from evaluate.reporting.tables import Column, Table

    t = Table("human_x", "A table", "what it says", ["arm"], [Column("v", "value")])
    t.rows.append((("a",), {"v": 1.0}))
    monkeypatch.setattr(report, "analyse", lambda study_dir, **kw: {"kind": "static"})
    monkeypatch.setattr(report, "study_tables", lambda study_dir, res=None, suffix="": [t])
    out = report.write_report(tmp_path / "study", out_dir=tmp_path / "out")
    assert out["tables"] == ["human_x"]
    for ext in ("md", "csv", "tex"):
        assert (tmp_path / "out" / "tables" / f"human_x.{ext}").read_text().strip()


def test_a_backbone_with_brackets_and_each_part_must_match():
    # the backbone is everything inside the outer brackets; every part of it must be the paper's
    assert report._backbone_is_paper("human.appearance[dinov2[vitb14]+sam2]", _BY_ID) == "yes"
    assert report._backbone_is_paper("human.appearance[dinov2+other]", _BY_ID) == "no (paper: dinov2+sam2)"
    assert report._backbone_is_paper("human.appearance[other+sam2]", _BY_ID) == "no (paper: dinov2+sam2)"


def test_unranked_arms_come_last_however_many_arms_are_ranked():
    bt = {"spearman": 0.5, "spearman_reason": None, "reason": None,
          "arms": {"a": _bt_arm(None, None, None, 3, None), "b": _bt_arm(0.2, 0.1, 0.3, 3, 100),
                   "c": _bt_arm(0.3, 0.1, 0.4, 3, 99)}}
    t = report.ranking_table({"metrics": {"m[x]": {"bradley_terry": bt}}})
    assert [k[1] for k, _ in t.rows] == ["c", "b", "a"]


def _static_row(mid, spearman, reason, agreement=0.75):
    return {"metric_id": mid, "pairs": 4, "complete": 4, "decisive": 4, "agree": 3, "agreement": agreement,
            "lo": 0.5, "hi": 1.0, "majority_ties": 0, "splits": 0, "metric_ties": 1, "spearman": spearman,
            "spearman_reason": reason, "fleiss_kappa": 0.4, "bradley_terry": None,
            "win_rates": {"m/b": {"human": 0.25, "auto": 0.5, "votes": 6, "pairs": 4},
                          "m/a": {"human": None, "auto": 0.5, "votes": 0, "pairs": 4}}}


def _static_res():
    return {"kind": "static", "items": 8, "votes": 12, "annotators": ["x", "y"], "bootstrap": {"n": 10, "seed": 1},
            "metrics": {"human.identity[arcface]": _static_row("human.identity", None, "fewer than 3 arms"),
                        "camera.x[b]": _static_row("camera.x", None, None, float("nan")),
                        ALL: _static_row(ALL, 0.5, None)}}


def test_the_static_table_gives_reasons_backbones_and_every_arms_win_rates():
    paper = {"metrics": {"Human Identity": {"id": "human.identity", "backbone": "arcface"}},
             "numbers": [{"table": "Table 6", "row": "Human Identity", "column": "rho", "value": 0.9,
                          "human": {"measure": "rho", "metric": "Human Identity"}}]}
    t, w, *_ = report.static_tables(_static_res(), paper=paper)
    rows = dict(t.rows)
    identity, camera, every = rows[("human.identity[arcface]",)], rows[("camera.x[b]",)], rows[(ALL,)]
    assert identity["spearman"].reason == "fewer than 3 arms" and camera["spearman"].reason == "undefined"
    assert every["spearman"] == 0.5
    assert (identity["backbone"], camera["backbone"], every["backbone"]) == ("yes", "", "")
    assert (identity["paper_rho"], camera["paper_rho"]) == ("0.9", "")
    assert [k for k, _ in w.rows] == [(k[0], arm) for k, _ in t.rows for arm in ("m/a", "m/b")]
    first = dict(w.rows)[("human.identity[arcface]", "m/b")]
    assert first == {"human": 0.25, "auto": 0.5, "votes": 6, "pairs": 4}
    assert dict(w.rows)[("human.identity[arcface]", "m/a")]["human"].reason == "no vote"


def test_the_paper_table_matches_our_metrics_by_id_only():
    paper = {"metrics": {"Human Identity": {"id": "human.identity", "backbone": "arcface"}},
             "numbers": [{"table": "Table 6", "row": "Human Identity", "column": "agreement", "value": 85.5,
                          "human": {"measure": "agreement_pct", "metric": "Human Identity"}},
                         {"table": "Table 6", "row": "Camera", "column": "agreement", "value": 70,
                          "human": {"measure": "agreement_pct", "metric": "Camera"}},
                         {"table": "Table 7", "row": "study", "column": "instances", "value": 50,
                          "human": {"measure": "instances"}}]}
    t = report.paper_table(_static_res(), paper=paper)
    assert [c for _, c in t.rows] == [
        {"paper": "85.5", "ours": "75.0", "metric": "human.identity[arcface]", "backbone": "yes"},
        {"paper": "70", "ours": "", "metric": "", "backbone": ""}]


def test_one_metrics_agreement_is_a_percentage_or_not_computed():
    res = _static_res()
    name_to_key = {"Human Identity": "human.identity[arcface]", "Camera": "camera.x[b]"}
    assert report._ours(res, {"measure": "agreement_pct", "metric": "Human Identity"}, name_to_key) == (
        "75.0", "human.identity[arcface]")
    assert report._ours(res, {"measure": "agreement_pct", "metric": "Camera"}, name_to_key) == ("n/c", "camera.x[b]")


def test_the_lowest_and_highest_aspect_correlation_of_a_dynamic_study():
    res = _dynamic_res()
    for d, v in zip(ASPECTS, (0.2, float("nan"), 0.9, 0.5)):
        res["dimensions"][d]["spearman"] = v
    assert report._ours(res, {"measure": "rho", "dimension": "min"}, {}) == ("0.200", "dynamic.return_progress")
    assert report._ours(res, {"measure": "rho", "dimension": "max"}, {}) == ("0.900", "dynamic.final_state")
    for d in ASPECTS:
        res["dimensions"][d]["plcc"] = float("nan")
    assert report._ours(res, {"measure": "plcc", "dimension": "min"}, {}) == ("n/c", None)


def test_the_extremes_skip_metrics_without_a_decisive_pair_and_state_only_the_agreement():
    res = {"kind": "static", "metrics": {"object.geometry[c]": _static_metric("object.geometry", 4, 6, float("nan")),
                                         "human.identity[a]": _static_metric("human.identity", 4, 6, 0.8),
                                         "human.appearance[b]": _static_metric("human.appearance", 4, 6, 0.7)}}
    assert report._ours(res, {"measure": "agreement_pct", "metric": "max"}, {}) == ("80.0", "human.identity[a]")
    assert report._ours(res, {"measure": "agreement_pct", "metric": "min"}, {}) == ("70.0", "human.appearance[b]")
    assert report._ours(res, {"measure": "rho", "metric": "min"}, {}) == ("", None)
    only_nan = {"kind": "static", "metrics": {"object.geometry[c]": res["metrics"]["object.geometry[c]"]}}
    assert report._ours(only_nan, {"measure": "agreement_pct", "metric": "min"}, {})[0].startswith("n/c")
