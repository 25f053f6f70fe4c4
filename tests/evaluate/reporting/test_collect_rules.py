"""The rules of the report's smaller modules, one at a time and in this process: what a report reads of a run
(evaluate/reporting/collect.py), revisit qualification (qualification.py), the report command's options and argv
(cli.py), the official release's section of the page (release.py), a run's ``eval/`` folder (run.py) and the videos
the page can play (playable.py). Each test builds the few files it needs; the slow collaborators (the report's
figures, Hydra's composition of a preset, the report builder under the command line) are stubbed."""

from __future__ import annotations

import io
import json
import logging
import math
import os
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from evaluate.config import EvalConfig
from evaluate.reporting import ReportError, release
from evaluate.reporting.cli import REPORT_KEYS, ReportOptions, cmd_report, merge_run_args
from evaluate.reporting.collect import Item, _load_result, items_of, load_items, scored
from evaluate.reporting.playable import PageVideo, browser_plays, page_video, stream_format, transcode_h264
from evaluate.reporting.qualification import departed, qualified, returned, tracked
from evaluate.reporting.run import _REDIRECT, write_files, write_run_outputs
from evaluate.results import ItemResult, MetricEntry
from harness.io import SEAL, seal_digest
from tests.support.clips import encode_streams
from tests.support.report_data import make_run
from trajectories.migration import SUPERSEDED

ENV = "environment.visible[pixel-thumb16]"


def _entry(value: float = 0.5, **details) -> MetricEntry:
    return MetricEntry.computed("environment.visible", "pixel-thumb16", "diagnostic", value, **details)


def _sealed(data: dict) -> dict:
    return {**data, SEAL: seal_digest(data)}


# -- collect: scored and Item ----------------------------------------------------------------------------------------


def test_scored_drops_ground_truth_and_what_the_case_family_does_not_score():
    oracle = MetricEntry.computed("environment.depth", "oracle", "oracle", 1.0)
    psnr = MetricEntry.computed("diagnostic.revisit_psnr", "pixels", "diagnostic", 30.0)
    metrics = {ENV: _entry(), "environment.depth[oracle]": oracle, "diagnostic.revisit_psnr[pixels]": psnr}
    env = ItemResult(item={"model": "m"}, case_family="environment", metrics=dict(metrics))
    dyn = ItemResult(item={"model": "m"}, case_family="dynamic", metrics=dict(metrics))
    assert sorted(scored(env).metrics) == ["diagnostic.revisit_psnr[pixels]", ENV]
    assert sorted(scored(dyn).metrics) == [ENV]  # a static-content metric of a dynamic case goes too


def _result(case: str = "c1", seed: int = 1, **extra) -> ItemResult:
    item = {"model": "m", "context": "fullkv", "seed": str(seed), "trajectory": "lrlr", "case_id": case}
    return ItemResult(item=item, case_family="environment", num_revisits=2, phases={"V": [0, 2]},
                      metrics={ENV: _entry(), "environment.depth[oracle]": MetricEntry.computed(
                          "environment.depth", "oracle", "oracle", 1.0)}, extra=extra)


def test_an_item_reads_its_key_settings_and_latency_from_its_result(tmp_path):
    r = _result(seed=3, settings={"departure_deg": 30.0}, timings_generation={"generate_s": 12.5})
    it = Item("run", tmp_path, tmp_path / "item", scored(r))
    assert it.metrics_path == tmp_path / "item" / "metrics.json"
    assert it.key == ("m", "fullkv", 3, "lrlr", "c1") and isinstance(it.seed, int)
    assert (it.case_family, it.num_revisits, it.phases) == ("environment", 2, {"V": [0, 2]})
    assert it.settings == {"departure_deg": 30.0} and it.latency_s() == 12.5
    assert list(it.metrics) == [ENV] and list(it.computed()) == [ENV]
    assert it.entry(ENV).value == 0.5 and it.entry("nope") is None


def test_an_item_without_settings_or_timings_has_empty_settings_and_a_nan_latency(tmp_path):
    it = Item("run", tmp_path, tmp_path, _result(settings=None))
    assert it.settings == {} and math.isnan(it.latency_s())


def test_items_of_sorts_by_key_drops_empty_results_and_scores_them(tmp_path):
    run = tmp_path / "r"
    pairs = [(run / "b", _result("c2")), (run / "x", ItemResult(item={})), (run / "a", _result("c1"))]
    items = items_of(run, pairs)
    assert [(i.run, i.case_id, i.item_dir) for i in items] == [("r", "c1", run / "a"), ("r", "c2", run / "b")]
    assert all(list(i.metrics) == [ENV] for i in items)  # the oracle entry is gone


# -- collect: load_items -----------------------------------------------------------------------------------------------


def _put(run: Path, case: str, *, traj: str = "lrlr", status: str = "done", evaluated: bool = True,
         meta_trajectory=None, sha: str | None = None, recorded: str | None = None, value: float = 0.5) -> dict:
    """An item folder of ``run`` (``meta.json``, a sealed ``metrics.json`` unless not ``evaluated``) and its row."""
    item = {"model": "m", "context": "fullkv", "seed": 1, "trajectory": traj, "case_id": case}
    rel = f"m/fullkv/seed-1/{traj}/{case}"
    d = run / rel
    d.mkdir(parents=True, exist_ok=True)
    (d / "meta.json").write_text(json.dumps({"item": item, "status": status, "trajectory": meta_trajectory}))
    if evaluated:
        res = {"schema_version": 1, "item": item, "case_family": "environment", "video_sha256": sha,
               "num_revisits": 1, "phases": {}, "metrics": {ENV: _entry(value).to_dict()}}
        (d / "metrics.json").write_text(json.dumps(_sealed(res)))
    return {**item, "key": rel, "dir": rel, "status": status, "video_sha256": recorded}


def _manifest(run: Path, rows: list[dict]) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_load_items_counts_each_skipped_kind_once(tmp_path, caplog):
    old_spec = SUPERSEDED[0][0]  # lrlrlr_sym_1dpf's replaced layout
    a = _manifest(tmp_path / "a", [
        _put(tmp_path / "a", "kept"), _put(tmp_path / "a", "failed", status="failed"),
        _put(tmp_path / "a", "unscored", evaluated=False),
        _put(tmp_path / "a", "old", traj="lrlrlr_sym_1dpf", meta_trajectory=old_spec),
        _put(tmp_path / "a", "new", traj="lrlrlr_sym_1dpf", meta_trajectory={**old_spec, "deg_per_frame": 2.0})])
    b = _manifest(tmp_path / "b", [_put(tmp_path / "b", "kept", value=0.9), _put(tmp_path / "b", "more")])
    with caplog.at_level(logging.WARNING, logger="evaluate.reporting.collect"):
        items, skipped = load_items([a, b])
    assert skipped == {"not_done": 1, "not_evaluated": 1, "duplicate": 1, "superseded": 1}
    assert [(i.run, i.trajectory, i.case_id) for i in items] == [
        ("a", "lrlr", "kept"), ("a", "lrlrlr_sym_1dpf", "new"), ("b", "lrlr", "more")]
    assert items[0].entry(ENV).value == 0.5  # the first run that has an item wins
    assert [r.getMessage().split(": ")[1] for r in caplog.records] == ["left out of the report"]


def test_the_same_run_given_twice_counts_no_duplicate(tmp_path):
    a = _manifest(tmp_path / "a", [_put(tmp_path / "a", "c1"), _put(tmp_path / "a", "c2")])
    items, skipped = load_items([a, a])
    assert [i.case_id for i in items] == ["c1", "c2"] and skipped["duplicate"] == 0


def test_rows_without_a_folder_are_told_apart_by_their_key(tmp_path):
    rows = [{**_put(tmp_path / "a", c, status="failed", evaluated=False), "dir": ""} for c in ("c1", "c2")]
    items, skipped = load_items([_manifest(tmp_path / "a", rows)])
    assert items == [] and skipped["not_done"] == 2


def test_results_of_another_video_are_refused_naming_five_and_the_count_of_the_rest(tmp_path):
    run = tmp_path / "a"
    rows = [_put(run, f"c{i}", sha="a" * 64, recorded="b" * 64) for i in range(6)]
    rows.append(_put(run, "ok", sha="c" * 64, recorded="c" * 64))
    _manifest(run, rows)
    problem = ("its metrics.json was computed on video sha256 aaaaaaaaaaaa..., but the item's video is now "
               "bbbbbbbbbbbb... (regenerated or replaced after it was evaluated)")
    named = "; ".join(f"{run}/m/fullkv/seed-1/lrlr/c{i}/metrics.json: {problem}" for i in range(5))
    with pytest.raises(ReportError) as exc:
        load_items([run])
    assert str(exc.value) == (f"6 evaluated item(s) no longer match their video: {named}; and 1 more. Evaluate "
                              f"again (python -m harness stage=evaluate run={run}: it recomputes them), then make "
                              "the report")


def test_a_result_of_the_video_the_manifest_records_is_read(tmp_path):
    run = _manifest(tmp_path / "a", [_put(tmp_path / "a", "c1", sha="c" * 64, recorded="c" * 64)])
    items, _ = load_items([run])
    assert [i.case_id for i in items] == ["c1"]


# -- collect: _load_result -------------------------------------------------------------------------------------------

_ITEM = {"model": "m", "context": "fullkv", "seed": 1, "trajectory": "lrlr", "case_id": "c1"}
_GOOD = {"item": _ITEM, "metrics": {ENV: {"metric": "environment.visible", "status": "computed"}}}


def _fix(run: Path) -> str:
    return f"rerun python -m harness stage=evaluate run={run} (it rewrites a metrics.json it cannot read)"


def test_a_sealed_evaluation_result_is_read_back(tmp_path):
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps(_sealed(_GOOD)))
    assert _load_result(p, tmp_path) == _sealed(_GOOD)


@pytest.mark.parametrize("data", [
    {"item": list(_ITEM), "metrics": {}},  # the names, but not a mapping
    {"item": {k: v for k, v in _ITEM.items() if k != "case_id"}, "metrics": {}},
    {"item": {}, "metrics": {}},
    {"item": _ITEM, "metrics": []},
    {"item": _ITEM, "metrics": {"a": 1}},
    {"item": _ITEM, "metrics": {"a": {}, "b": [1]}},
], ids=["item-list", "item-without-case", "item-empty", "metrics-list", "entry-number", "one-entry-a-list"])
def test_a_result_of_the_wrong_shape_is_a_report_error_naming_what_it_needs(tmp_path, data):
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps(_sealed(data)))  # sealed: only its shape is wrong
    with pytest.raises(ReportError) as exc:
        _load_result(p, tmp_path)
    assert str(exc.value) == (f"{p}: not an evaluation result (it needs 'item' with model, context, seed, "
                              f"trajectory, case_id and 'metrics' as a mapping of entries); {_fix(tmp_path)}")


def test_an_unsealed_result_is_a_report_error(tmp_path):
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps(_GOOD))
    with pytest.raises(ReportError) as exc:
        _load_result(p, tmp_path)
    assert str(exc.value) == f"{p}: no {SEAL} (written by an older version, or edited); {_fix(tmp_path)}"


# -- qualification ---------------------------------------------------------------------------------------------------

_QUAL = _entry(qualification=[{"departure_deg": 30.0, "return_error_deg": 5.0},
                              {"departure_deg": 29.9, "return_error_deg": 1.0}])


def test_departed_means_at_least_the_departure_at_that_revisit():
    assert departed(_QUAL, 0, 30.0) is True  # exactly on the threshold
    assert departed(_QUAL, 1, 30.0) is False
    assert departed(_QUAL, 1, 29.9) is True
    assert departed(_QUAL, 2, 0.0) is False  # no such revisit
    assert departed(_entry(), 0, 0.0) is False  # nothing recorded


def test_returned_means_departed_and_back_within_the_tolerance():
    assert returned(_QUAL, 0, 30.0, 5.0) is True  # exactly on the tolerance
    assert returned(_QUAL, 0, 30.0, 4.9) is False
    assert returned(_QUAL, 1, 30.0, 5.0) is False  # back, but it never departed far enough
    assert returned(_QUAL, 2, 0.0, 90.0) is False
    assert returned(_entry(), 0, 0.0, 90.0) is False


def _ev(*targets: list[tuple[bool, bool]]) -> MetricEntry:
    return _entry(tracking_evidence={f"t{i}": [{"departed": d, "returned": r} for d, r in t]
                                     for i, t in enumerate(targets)})


def test_tracked_needs_every_target_away_and_back_at_that_revisit():
    ev = _ev([(True, True), (True, False)], [(True, True)])
    assert tracked(ev, 0) is True
    assert tracked(ev, 1) is False  # t0 never came back; t1 has no second revisit and is not asked
    assert tracked(_ev([(True, True)], [(True, True), (True, True)]), 1) is True  # only t1 is asked
    assert tracked(_ev([(True, True)], [(True, False)]), 0) is False  # one target of two
    assert tracked(_ev([(False, True)]), 0) is False  # never lost
    assert tracked(_ev([(True, False)]), 0) is False  # never found again
    assert tracked(_ev([(False, False)], [(True, True)]), 0) is False
    assert tracked(_entry(), 0) is False  # no evidence at all
    assert tracked(_entry(tracking_evidence={}), 0) is False


def test_a_revisit_qualifies_by_its_pose_or_by_its_tracking():
    assert qualified(_QUAL, 0, 30.0, 5.0) is True  # pose only
    assert qualified(_ev([(True, True)]), 0, 30.0, 5.0) is True  # tracking only
    assert qualified(_QUAL, 1, 30.0, 5.0) is False


# -- cli: options and argv -------------------------------------------------------------------------------------------


def test_report_options_default_to_drawing_everything_and_are_frozen():
    o = ReportOptions()
    assert (o.report_runs, o.report_out, o.main_context, o.human_study) == (None, None, None, None)
    assert o.report_strips is True and o.report_figures is True and o.studies() == []
    with pytest.raises(ValidationError):
        o.report_out = "elsewhere"


def test_human_studies_are_a_list_or_a_comma_separated_value():
    assert ReportOptions(human_study="a,b").studies() == ["a", "b"]
    assert ReportOptions(human_study=["a,b", "c"]).studies() == ["a,b", "c"]


def test_every_option_but_the_runs_is_given_as_key_value():
    assert REPORT_KEYS == ("report_out", "main_context", "report_strips", "report_figures", "human_study")


def test_several_runs_and_studies_become_hydra_lists_and_options_get_a_plus():
    argv = ["harness", "report", "run=a", "run=it's", "report_out=/x", "human_study=s1,s2", "human_study=s3",
            "human_study=", "main_context=fov", "report_strips=false", "stage=x"]
    assert merge_run_args(argv) == [
        "harness", "report", "+report_out=/x", "+main_context=fov", "+report_strips=false", "stage=x", "run=a",
        "+report_runs=['a','it\\'s']", "+human_study=['s1','s2','s3']"]


def test_a_value_may_hold_an_equals_sign():
    assert merge_run_args(["h", "report", "run=a=b", "human_study=x=y", "report_out=o=p"]) == [
        "h", "report", "+report_out=o=p", "run=a=b", "+report_runs=['a=b']", "+human_study=['x=y']"]


def test_cmd_report_anywhere_makes_it_the_report_command():
    assert merge_run_args(["h", "run=a", "cmd=report"]) == ["h", "cmd=report", "run=a", "+report_runs=['a']"]
    assert merge_run_args(["h", "human_study=s", "cmd=report"]) == ["h", "cmd=report", "+human_study=['s']"]
    assert merge_run_args(["h", "cmd=report", "run=a"]) == ["h", "cmd=report", "run=a", "+report_runs=['a']"]


@pytest.mark.parametrize("argv", [["harness"], ["harness", "generate", "run=a", "human_study=x", "report_out=y"],
                                  ["harness", "human", "report", "run=a"]])
def test_other_commands_pass_through_unchanged(argv):
    assert merge_run_args(list(argv)) == argv


def test_a_report_without_runs_or_studies_adds_no_list():
    assert merge_run_args(["h", "report", "main_context=fov"]) == ["h", "report", "+main_context=fov"]


# -- cli: cmd_report -------------------------------------------------------------------------------------------------


class _Stdout(io.StringIO):
    flushes = 0

    def flush(self):
        self.flushes += 1
        super().flush()


@pytest.fixture
def built(monkeypatch):
    """The report builder stubbed (it is tested on its own): the calls it got."""
    calls = []

    def build(runs, out, **kw):
        calls.append((runs, out, kw))
        return {"items": 3, "html": "/r/index.html", "out_dir": "/r", "markdown": "/r/report.md",
                "sources": "/r/sources.json"}

    monkeypatch.setattr("evaluate.reporting.build_report", build)
    return calls


def test_cmd_report_builds_with_the_options_and_prints_where_it_is(built, monkeypatch):
    calls, out = built, _Stdout()
    monkeypatch.setattr(sys, "stdout", out)  # in the test: pytest's capture sets its own between setup and call
    runs = [Path("/runs/a"), Path("/runs/b")]
    cmd_report(runs, ReportOptions(report_out="/o", report_strips=False), "outputs")
    assert calls == [(runs, "/o", {"main_context": "fullkv", "strips": False, "figures": True,
                                   "human_studies": []})]
    assert out.getvalue() == ("report of 3 video(s) from /runs/a, /runs/b\n  html:     /r/index.html\n"
                              "  tables:   /r/tables  (md, csv, tex)  all: /r/report.md\n"
                              "  sources:  /r/sources.json\n")
    assert out.flushes >= 1


def test_cmd_report_resolves_human_studies_by_name_or_folder(built, tmp_path):
    calls = built
    (tmp_path / "outputs" / "studies" / "s1").mkdir(parents=True)
    (tmp_path / "outputs" / "studies" / "s1" / "study.json").write_text("{}")
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "study.json").write_text("{}")
    opts = ReportOptions(main_context="fov", report_figures=False, human_study=f"s1,{tmp_path / 'f'}")
    cmd_report([tmp_path], opts, str(tmp_path / "outputs"))
    assert calls[0][2] == {"main_context": "fov", "strips": True, "figures": False,
                           "human_studies": [(tmp_path / "outputs" / "studies" / "s1").resolve(),
                                             (tmp_path / "f").resolve()]}


# -- release ---------------------------------------------------------------------------------------------------------

_DESCRIPTIONS = {"lrlr_sym_0p75dpf": "LRLR <inferred>", "lrud_sym_0p75dpf": "LRUD"}


@pytest.fixture
def presets(monkeypatch):
    """The presets' descriptions without Hydra's composition (a second per first call): an unknown one raises, as
    the real lookup does."""
    def group_yaml(group, name):
        assert group == "trajectory"
        if name not in _DESCRIPTIONS:
            raise KeyError(name)
        return {"description": _DESCRIPTIONS[name]}

    monkeypatch.setattr("harness.config_groups.group_yaml", group_yaml)


def _stats(median, lo=None, hi=None):
    return {"median": median, "min": median if lo is None else lo, "max": median if hi is None else hi}


_MEASURED = {"sequence": "L R", "profile": "constant", "initial_hold": _stats(60, 58, 62),
             "amplitude": _stats(90.04), "speed": None, "final_hold": _stats(0, 0, 1e-9)}
_PRESET = {"sequence": "", "profile": "cosine", "initial_hold": _stats(60), "amplitude": _stats(90),
           "speed": _stats(0.75), "final_hold": _stats(0)}
_GROUP = {"trajectory": "lrlr_sym_0p75dpf", "model": "m<1>", "matching": 1, "videos": 2, "measured": _MEASURED,
          "preset": _PRESET}
_HEAD = ("<p class='cap'>Each video's layout measured from its frames alone (medians, [range] over the videos), the "
         "preset's in brackets (<code>release check</code>; release/check.md has the YAML the videos imply).</p>"
         "<table><tr><th>preset</th><th>model</th><th>follow</th><th>moves</th><th>initial hold</th>"
         "<th>amplitude deg</th><th>speed /frame</th><th>final hold</th><th>profile</th></tr>")
_ROW = ("<tr><td>lrlr_sym_0p75dpf</td><td>m&lt;1&gt;</td><td>1/2</td><td>L R (none)</td><td>60 [58-62] (60)</td>"
        "<td>90.0 (90.0)</td><td>n/a (0.750)</td><td>0 [0-1e-09] (0)</td><td>constant (cosine)</td></tr>")


@pytest.mark.parametrize("stats, fmt, want", [
    ({"x": _stats(2.0)}, "g", "2"),
    ({"x": _stats(0.0, -1.0, 1.0)}, "g", "0 [-1-1]"),
    ({"x": _stats(0.0, 0.0, 1e-9)}, "g", "0 [0-1e-09]"),  # a range of exactly 1e-9 is shown
    ({"x": _stats(0.0, 0.0, 1e-10)}, "g", "0"),
    ({"x": _stats(1.25, 1.0, 1.5)}, ".1f", "1.2 [1.0-1.5]"),
    ({"x": None}, "g", "n/a"),
    ({}, "g", "n/a"),
])
def test_a_layout_cell_is_the_median_and_its_range_when_there_is_one(stats, fmt, want):
    assert release._cell(stats, "x", fmt) == want


def test_the_layout_table_has_a_row_per_preset_and_model_measured_next_to_the_preset():
    assert release._layouts({"groups": [_GROUP]}) == _HEAD + _ROW + "</table>"
    assert release._layouts({"groups": None}) == _HEAD + "</table>"
    assert release._layouts({}) == _HEAD + "</table>"


def test_a_presets_inference_says_what_the_check_measured(presets):
    other = {**_GROUP, "trajectory": "lrud_sym_0p75dpf", "matching": 5, "videos": 7}
    assert release._inference("lrlr_sym_0p75dpf", [_GROUP, other, {**_GROUP, "matching": 0, "videos": 1}]) == (
        "<li><b>lrlr_sym_0p75dpf</b>: inference: LRLR &lt;inferred&gt;; the check measured 3 video(s): 1 follow "
        "it.</li>")
    assert release._inference("lrud_sym_0p75dpf", [_GROUP]) == (
        "<li><b>lrud_sym_0p75dpf</b>: inference: LRUD; not measured yet (python -m harness release check).</li>")
    assert release._inference("gone<", []) == (
        "<li><b>gone&lt;</b>: inference: (the preset is no longer configured); not measured yet (python -m harness "
        "release check).</li>")


def _items(run: Path, scored_cases: tuple[str, ...], unscored: tuple[str, ...] = ()) -> None:
    for case in scored_cases + unscored:
        d = run / "m" / "fullkv" / "seed-1" / "lrlr" / case
        d.mkdir(parents=True)
        (d / "meta.json").write_text("{}")
        if case in scored_cases:
            (d / "metrics.json").write_text("{}")


_IMPORT = {"source": "hf://org/<rel>", "rows": 10, "rows_in_release": 12, "videos": 3, "kept_rows": 8,
           "camera_rows": 2, "camera_items": 1, "duplicate_rows": 1, "skipped_rows": 4, "not_read": 2, "flagged": 1}
_TAIL = ("video(s) do not follow their preset and are scored on their measured layout. Metrics whose annotations "
         "the release does not ship (person boxes, object masks, dynamic events) are n/c unless an overlay case set "
         "gives them (docs/release.md).</p>")


def test_the_import_counts_are_stated_exactly(tmp_path):
    _items(tmp_path, ("c1", "c2"), ("c3",))
    assert release._counts(tmp_path, _IMPORT) == (
        "<p class='cap'>Imported from <code>hf://org/&lt;rel&gt;</code>: 10 row(s) read of 12 -> 3 video(s) "
        "imported as items, 2 scored; 8 row(s) on them, of which 2 camera-following row(s) (1 video(s) scored for "
        "camera following only, never for memory); 1 duplicate row(s); 4 row(s) skipped; 2 not read (release.limit "
        "/ max_rows). 1 " + _TAIL)


def test_missing_import_counts_are_zero_and_the_release_size_is_the_rows_read(tmp_path):
    assert release._counts(tmp_path, {"rows": 4, "not_read": 0}) == (
        "<p class='cap'>Imported from <code>?</code>: 4 row(s) read of 4 -> 0 video(s) imported as items, 0 scored; "
        "0 row(s) on them, of which 0 camera-following row(s) (0 video(s) scored for camera following only, never "
        "for memory); 0 duplicate row(s); 0 row(s) skipped. 0 " + _TAIL)


def _release_files(run: Path, imp=None, chk=None) -> Path:
    (run / "release").mkdir(parents=True, exist_ok=True)
    for name, data in (("import.json", imp), ("check.json", chk)):
        if data is not None:
            (run / "release" / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return run


def test_a_run_without_a_release_import_or_check_adds_nothing(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    broken = _release_files(tmp_path / "broken", imp="[1, 2]", chk="{not json")
    assert release.release_html([plain, broken]) == ""
    assert release.release_html([]) == ""


def test_the_release_section_of_an_imported_and_checked_run(tmp_path, presets):
    run = tmp_path / "run<1>"
    _items(run, ("c1",))
    problems = {"unknown model": {"x<y": {"rows": 2}, "z": {"rows": "3"}}, "bad path": {"p": {}}}
    _release_files(run, imp={**_IMPORT, "problems": problems, "trajectories": ["lrud_sym_0p75dpf"]},
                   chk={"groups": [_GROUP], "videos": [], "skipped": ["odd <file>"]})
    counts = release._counts(run, {**_IMPORT, "problems": problems})
    assert release.release_html([run]) == (
        "<section id='release'><h2>The official release</h2><h3>run&lt;1&gt;</h3>" + counts
        + "<ul><li>bad path: 1 distinct, 0 row(s); e.g. p</li><li>unknown model: 2 distinct, 5 row(s); e.g. "
        "x&lt;y</li></ul><p class='cap'>What each preset's tables rest on:</p><ul>"
        "<li><b>lrlr_sym_0p75dpf</b>: inference: LRLR &lt;inferred&gt;; the check measured 2 video(s): 1 follow "
        "it.</li><li><b>lrud_sym_0p75dpf</b>: inference: LRUD; not measured yet (python -m harness release "
        "check).</li></ul>" + _HEAD + _ROW + "</table><ul><li>skipped odd &lt;file&gt;</li></ul></section>")


def test_an_import_alone_states_its_counts_and_presets(tmp_path, presets):
    run = _release_files(tmp_path / "a", imp={**_IMPORT, "trajectories": ["lrud_sym_0p75dpf"]})
    assert release.release_html([run]) == (
        "<section id='release'><h2>The official release</h2><h3>a</h3>" + release._counts(run, _IMPORT)
        + "<p class='cap'>What each preset's tables rest on:</p><ul><li><b>lrud_sym_0p75dpf</b>: inference: LRUD; "
        "not measured yet (python -m harness release check).</li></ul></section>")


def test_a_check_alone_shows_its_layouts_and_verdict_and_runs_follow_in_order(tmp_path, presets):
    a = _release_files(tmp_path / "a", chk={"groups": [_GROUP], "videos": []})
    b = _release_files(tmp_path / "b", chk={"videos": []})
    assert release.release_html([tmp_path / "none", a, b]) == (
        "<section id='release'><h2>The official release</h2><h3>a</h3><p class='cap'>What each preset's tables "
        "rest on:</p><ul><li><b>lrlr_sym_0p75dpf</b>: inference: LRLR &lt;inferred&gt;; the check measured 2 "
        "video(s): 1 follow it.</li></ul>" + _HEAD + _ROW + "</table><ul><li>no video to check</li></ul>"
        "<h3>b</h3>" + _HEAD + "</table><ul><li>no video to check</li></ul></section>")


# -- run: a run's eval/ folder ---------------------------------------------------------------------------------------

_ECFG = EvalConfig(bootstrap={"n": 50, "seed": 0})


@pytest.fixture(scope="module")
def run_outputs(tmp_path_factory):
    """One evaluated run (an environment and a dynamic video) written by write_run_outputs, the figures stubbed:
    (run folder, what it returned, the perf_counter before and after)."""
    run = make_run(tmp_path_factory.mktemp("eval"), models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",),
                   cases=1, seeds=(1,), videos=False)
    pairs = [(p.parent, ItemResult.from_dict(json.loads(p.read_text())))
             for p in sorted(run.glob("*/*/*/*/*/metrics.json"))]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("evaluate.reporting.build._draw_figures", lambda *a: ({}, {}))
        t0 = time.perf_counter()
        out = write_run_outputs(run, pairs, _ECFG)
        t1 = time.perf_counter()
    return run, out, t0, t1


def test_the_eval_folder_holds_the_tables_validity_analyses_and_the_redirect(run_outputs):
    run = run_outputs[0]
    ev = run / "eval"
    assert sorted(p.name for p in ev.iterdir()) == [
        "analyses.json", "analyses.md", "dynamic.json", "dynamic.md", "index.html", "per_item.csv", "report",
        "summary.csv", "summary.json", "summary.md", "validity.json", "validity.md"]
    assert (ev / "index.html").read_text() == _REDIRECT
    assert json.loads((ev / "validity.json").read_text())["items"] == []
    assert isinstance(json.loads((ev / "analyses.json").read_text()), dict)
    assert (ev / "report" / "index.html").is_file()


def test_write_run_outputs_returns_where_each_file_is_and_the_verdict(run_outputs):
    run, out, t0, t1 = run_outputs
    ev = run / "eval"
    assert {k: v for k, v in out.items() if k not in ("verdict", "report_s")} == {
        "tables": {"per_item": str(ev / "per_item.csv"), "summary": str(ev / "summary.md"),
                   "dynamic": str(ev / "dynamic.md")},
        "validity": str(ev / "validity.md"), "analyses": {"analyses": str(ev / "analyses.md")},
        "html": str(ev / "index.html"), "report": str(ev / "report" / "index.html")}
    assert out["verdict"] and all(line in (ev / "analyses.md").read_text() for line in out["verdict"])
    assert 0.0 < out["report_s"] <= t1 - t0


def test_a_run_without_an_evaluated_video_keeps_its_tables_and_says_so(tmp_path):
    run = tmp_path / "run"  # not even a folder yet: nothing was evaluated
    out = write_run_outputs(run, [], _ECFG)
    ev = run / "eval"
    assert out == {"tables": {"per_item": str(ev / "per_item.csv"), "summary": str(ev / "summary.md"),
                              "dynamic": None},
                   "validity": str(ev / "validity.md"), "report": None, "verdict": [],
                   "analyses": {"analyses": str(ev / "analyses.md")}, "html": None, "report_s": 0.0}
    assert (ev / "analyses.md").read_text() == "# Analyses\n\nNo evaluated video.\n"
    assert sorted(p.name for p in ev.iterdir()) == ["analyses.md", "per_item.csv", "summary.csv", "summary.json",
                                                    "summary.md", "validity.json", "validity.md"]


def test_write_files_writes_json_data_as_json_and_text_as_text_into_any_folder(tmp_path):
    folder = tmp_path / "a" / "b"
    write_files(folder, {"x.json": {"k": [1, 2]}, "y.md": "# text\n"})
    assert json.loads((folder / "x.json").read_text()) == {"k": [1, 2]}
    assert (folder / "y.md").read_text() == "# text\n"
    write_files(folder, {"z.txt": "again"})  # into a folder that exists
    assert sorted(p.name for p in folder.iterdir()) == ["x.json", "y.md", "z.txt"]


def test_write_files_makes_the_folder_even_without_a_file(tmp_path):
    write_files(tmp_path / "a" / "eval", {})
    assert (tmp_path / "a" / "eval").is_dir()


# -- playable --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    """Small source videos (read only: a test copies one it changes)."""
    from PIL import Image

    d = tmp_path_factory.mktemp("clips")
    gif = d / "one.gif"
    Image.fromarray(np.full((16, 16, 3), 100, np.uint8)).save(gif)  # no average rate; FFmpeg guesses 100
    return {"h264": encode_streams(d / "h264.mp4", [("libx264", "yuv420p", 16, 16)]),
            "h264_444": encode_streams(d / "h264_444.mkv", [("libx264", "yuv444p", 16, 16)]),
            "odd": encode_streams(d / "odd.mp4", [("mpeg4", "yuv420p", 35, 33)]),
            "two": encode_streams(d / "two.mkv", [("mpeg4", "yuv420p", 35, 33), ("libx264", "yuv444p", 20, 24)]),
            "irregular": encode_streams(d / "irregular.mp4", [("mpeg4", "yuv420p", 16, 16)], 4, pts=[0, 1, 2, 20]),
            "empty": encode_streams(d / "empty.avi", [("rawvideo", "bgr24", 16, 16)], 0),
            "no_pix": encode_streams(d / "no_pix.avi", [("mpeg4", "yuv420p", 16, 16)], 0), "gif": gif}


def _decoded(video: Path) -> tuple[Fraction, list[np.ndarray]]:
    import av

    with av.open(str(video)) as c:
        s = c.streams.video[0]
        return s.average_rate, [f.to_ndarray(format="rgb24") for f in c.decode(s)]


@pytest.mark.parametrize("codec, pix, plays", [
    ("h264", "yuv420p", True), ("vp8", "yuv420p", True), ("vp9", "yuvj420p", True), ("av1", "yuv420p", True),
    ("h264", "yuv444p", False), ("hevc", "yuv420p", False), ("mpeg4", "yuv444p", False)])
def test_the_browser_plays_four_codecs_in_4_2_0_only(codec, pix, plays):
    assert browser_plays(codec, pix) is plays


def test_a_page_video_warns_only_when_it_cannot_play():
    assert PageVideo(Path("v.mp4"), "h264", "yuv420p").warning is False
    assert PageVideo(Path("v.mp4"), "mpeg4", "yuv420p", "transcoded from mpeg4").warning is False
    assert PageVideo(Path("v.mp4"), "?", "?", "cannot play: the container cannot be read").warning is True


def test_the_stream_format_is_the_first_video_streams_codec_and_pixels(clips):
    assert stream_format(clips["h264"]) == ("h264", "yuv420p")
    assert stream_format(clips["two"]) == ("mpeg4", "yuv420p")
    assert stream_format(clips["no_pix"]) == ("mpeg4", "")  # a stream whose pixel format was never seen


def test_a_video_the_browser_plays_is_shown_as_it_is(clips, tmp_path):
    copy = tmp_path / "videos" / "copy.mp4"
    assert page_video(clips["h264"], copy) == PageVideo(clips["h264"], "h264", "yuv420p")
    assert not copy.parent.exists()


def test_an_odd_sized_video_is_played_from_an_even_h264_copy_at_its_rate(clips, tmp_path):
    copy = tmp_path / "videos" / "copy.mp4"
    assert page_video(clips["odd"], copy) == PageVideo(copy, "mpeg4", "yuv420p", (
        "transcoded from mpeg4 (yuv420p) to H.264 for the browser; scores use the original"))
    assert stream_format(copy) == ("h264", "yuv420p")
    rate, frames = _decoded(copy)
    assert rate == 8 and [f.shape for f in frames] == [(34, 32, 3)] * 3  # one row and one column cropped
    assert [round(float(f.mean()) / 10) for f in frames] == [3, 9, 15]


def test_h264_in_4_4_4_is_transcoded_too(clips, tmp_path):
    copy = tmp_path / "copy.mp4"
    assert page_video(clips["h264_444"], copy).src == copy and stream_format(copy) == ("h264", "yuv420p")


def test_the_copy_is_made_of_the_first_video_stream(clips, tmp_path):
    out = tmp_path / "copy.mp4"
    assert transcode_h264(clips["two"], out) == out
    assert [f.shape for f in _decoded(out)[1]] == [(34, 32, 3)] * 3


def test_the_copy_keeps_the_average_rate_else_the_guessed_one(clips, tmp_path):
    transcode_h264(clips["irregular"], tmp_path / "a.mp4")
    assert _decoded(tmp_path / "a.mp4")[0] == Fraction(32, 21)  # 4 frames over 21/8 s, not the nominal 8
    transcode_h264(clips["gif"], tmp_path / "b.mp4")
    assert _decoded(tmp_path / "b.mp4")[0] == 100


class _RatelessContainer:
    """``av.open``'s container whose first video stream states neither an average nor a guessed rate. No container
    FFmpeg writes gives such a stream (about 20 codecs and containers tried), so the copy's fallback is reached only
    through this stand-in; decoding is the real container's."""

    def __init__(self, container):
        self._container = container
        self._real = container.streams.video[0]
        self.streams = type("Streams", (), {"video": [type("Stream", (), {"average_rate": None, "guessed_rate": None})()]})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._container.close()

    def decode(self, stream):
        return self._container.decode(self._real)


def test_a_stream_that_states_no_rate_is_copied_at_16_fps(clips, tmp_path, monkeypatch):
    import av

    real_open = av.open
    def open_for_reading_rateless(path, mode="r", **options):  # the copy's writer opens its output as it is
        container = real_open(path, mode, **options)
        return _RatelessContainer(container) if mode == "r" else container

    monkeypatch.setattr(av, "open", open_for_reading_rateless)
    out = transcode_h264(clips["odd"], tmp_path / "copy.mp4")
    monkeypatch.undo()
    rate, frames = _decoded(out)
    assert rate == 16 and len(frames) == 3


def test_a_copy_as_new_as_the_original_is_reused_and_an_older_one_redone(clips, tmp_path):
    video = tmp_path / "odd.mp4"
    video.write_bytes(clips["odd"].read_bytes())
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(b"made before")
    t = video.stat().st_mtime_ns
    os.utime(copy, ns=(t, t))  # exactly as new
    pv = page_video(video, copy)
    assert pv.src == copy and pv.note.startswith("transcoded from mpeg4") and copy.read_bytes() == b"made before"
    os.utime(copy, ns=(t - 10**9, t - 10**9))
    assert page_video(video, copy).src == copy and stream_format(copy) == ("h264", "yuv420p")


def _encoders() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "harness-video-encoder"}


def test_a_video_that_cannot_be_transcoded_says_why_and_leaves_nothing(clips, tmp_path):
    copy = tmp_path / "videos" / "copy.mp4"
    before = _encoders()
    assert page_video(clips["empty"], copy) == PageVideo(clips["empty"], "rawvideo", "bgr24", (
        "cannot play: rawvideo (bgr24) is not a browser codec and transcoding it failed (no frame decoded); "
        "download the file to view it"))
    assert list(copy.parent.iterdir()) == [] and not _encoders() - before  # the writer was aborted


def test_a_container_that_cannot_be_read_is_flagged(tmp_path):
    bad = tmp_path / "video.mp4"
    bad.write_bytes(b"not a video")
    pv = page_video(bad, tmp_path / "copy.mp4")
    assert (pv.src, pv.codec, pv.pix_fmt, pv.warning) == (bad, "?", "?", True)
    assert pv.note.startswith("cannot play: the container cannot be read (")
