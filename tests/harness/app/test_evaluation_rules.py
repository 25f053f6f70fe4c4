"""The evaluation stage as the console shows it (``harness/app/commands/evaluation.py``), one rule at a time in this
process: the scoring itself (``evaluate.stage.evaluate_run``) is a stand-in that records what it was asked."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from evaluate.reporting.verdict import NO_COMPARISON_HINT
from evaluate.results import ItemResult
from harness.app.commands import evaluation
from tests.support.clocks import StepClock


def _cfg(**kw) -> SimpleNamespace:
    """The fields of a RunConfig the stage reads."""
    base = {"evaluate": "ECFG", "overwrite": False, "progress": False, "weights_dir": "/w", "run": "r1",
            "videos": None}
    return SimpleNamespace(**{**base, **kw})


def _out(**kw) -> dict:
    base = {"evaluated": 2, "failed": [], "results": [], "tables": {"summary": "S.md"},
            "analyses": {"analyses": "A.md"}, "validity": "V.md", "timings": {"strips_cpu_s": 0.0}}
    return {**base, **kw}


@pytest.fixture
def stage(monkeypatch):
    state = SimpleNamespace(calls=[], out=_out(), removed=[])

    def evaluate_run(run_dir, ecfg, **kw):
        state.calls.append((run_dir, ecfg, kw))
        return state.out

    monkeypatch.setattr("evaluate.stage.evaluate_run", evaluate_run)
    monkeypatch.setattr("evaluate.weights.weights_root", lambda d: f"root({d})")
    monkeypatch.setattr("harness.io.remove_dead_temps", state.removed.append)
    monkeypatch.setattr(evaluation, "time", StepClock())
    monkeypatch.setattr(evaluation, "in_sweep", lambda: False)
    return state


# -- evaluate --------------------------------------------------------------------------------------------------------


def test_a_whole_run_is_cleaned_scored_with_its_settings_and_tabled(stage, capsys):
    assert evaluation.evaluate(Path("/runs/r1"), _cfg(overwrite=True, progress=True), table=False) is True
    assert stage.removed == [Path("/runs/r1")]
    assert stage.calls == [(Path("/runs/r1"), "ECFG", {"force": True, "progress": True, "weights_root": "root(/w)",
                                                       "only": None, "tables": True})]
    assert capsys.readouterr().out == "evaluated 2 video(s): S.md  A.md  V.md\n"


def test_a_sweep_jobs_items_are_scored_without_tables_and_without_cleaning_the_run(stage, capsys):
    stage.out = _out(timings={"strips_cpu_s": 0.5})
    timings: dict = {}
    only = [Path("/runs/r1/a")]
    assert evaluation.evaluate(Path("/runs/r1"), _cfg(), timings=timings, only=only) is True
    assert stage.removed == [] and stage.calls[0][2]["only"] == only and stage.calls[0][2]["tables"] is False
    assert capsys.readouterr().out == ("evaluated 2 video(s) of this job (the sweep writes the run's tables and report "
                                       "at its end)\n")
    assert timings == {"strips_cpu_s": 0.5}  # the rest of a job's timings are the sweep's


def test_the_timings_leave_the_study_report_out_of_the_evaluation(stage):
    stage.out = _out(report_s=1.5)
    timings: dict = {}
    evaluation.evaluate(Path("/r"), _cfg(), table=False, timings=timings)
    # wall: read 105 before, 110 after; CPU: 12 before, 14 after
    assert timings == {"evaluation_s": 110.0 - 105.0 - 1.5, "report_s": 1.5, "cpu_s": 14.0 - 12.0,
                       "strips_cpu_s": 0.0}  # no strip was drawn ahead


def test_a_run_without_a_report_time_has_zero_report_seconds(stage):
    stage.out = _out(report_s=None)
    timings: dict = {}
    evaluation.evaluate(Path("/r"), _cfg(), table=False, timings=timings)
    assert timings["report_s"] == 0.0 and timings["evaluation_s"] == 5.0


def test_failed_items_are_logged_by_key_and_fail_the_stage(stage, caplog):
    stage.out = _out(failed=[({"model": "m", "context": "fov", "seed": 1, "trajectory": "lrlr", "case_id": "c"},
                              "decoded 24 frames"), ({"model": "m"}, "no video"), (None, "unreadable")])
    with caplog.at_level(logging.ERROR, logger="harness.app.cli"):
        assert evaluation.evaluate(Path("/r"), _cfg(), table=False) is False
    assert [r.getMessage() for r in caplog.records if r.name == "harness.app.cli"] == [
        "FAILED m/fov/1/lrlr/c: decoded 24 frames", "FAILED m/?/?/?/?: no video", "FAILED ?/?/?/?/?: unreadable"]


def test_the_outcome_names_the_report_and_the_verdict_with_the_hint_for_this_command(stage, capsys):
    stage.out = _out(report="/r/report.html", verdict=["FoV keeps more.", f"Nothing to compare. {NO_COMPARISON_HINT}"])
    evaluation.evaluate(Path("/r"), _cfg(videos="/clips"), table=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "report: /r/report.html"
    assert lines[2:] == ["verdict:", "  FoV keeps more.",
                         "  Nothing to compare. " + evaluation.no_comparison_hint(_cfg(videos="/clips"))]
    assert NO_COMPARISON_HINT not in "\n".join(lines)


def test_an_empty_report_and_verdict_print_nothing_and_the_table_follows_by_default(stage, capsys):
    stage.out = _out(report="", verdict=[])
    evaluation.evaluate(Path("/r"), _cfg())
    assert capsys.readouterr().out == ("evaluated 2 video(s): S.md  A.md  V.md\n"
                                       "(no metric could be computed with the available backbones; see summary.md)\n")


# -- the hint --------------------------------------------------------------------------------------------------------


def test_the_hint_of_a_plain_run_is_the_reports_own(monkeypatch):
    monkeypatch.setattr(evaluation, "in_sweep", lambda: False)
    assert evaluation.no_comparison_hint(_cfg()) == NO_COMPARISON_HINT


def test_the_hint_of_a_sweep_job_names_the_run_or_a_placeholder(monkeypatch):
    monkeypatch.setattr(evaluation, "in_sweep", lambda: True)
    assert "`python -m harness report run=r1`" in evaluation.no_comparison_hint(_cfg())
    assert "`python -m harness report run=<name>`" in evaluation.no_comparison_hint(_cfg(run=""))
    assert evaluation.no_comparison_hint(_cfg(run="")).startswith("The sweep's other jobs add")


def test_the_hint_for_external_videos_asks_for_a_second_model_in_the_folder(monkeypatch):
    monkeypatch.setattr(evaluation, "in_sweep", lambda: True)  # the folder wins over the sweep
    assert evaluation.no_comparison_hint(_cfg(videos="/clips")).startswith(
        "To compare, put videos of a second model or context policy")


def test_outside_hydra_this_is_no_sweep_and_under_a_multirun_it_is(monkeypatch):
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    assert evaluation.in_sweep() is False  # no Hydra config in this process
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(mode=RunMode.MULTIRUN)))
    assert evaluation.in_sweep() is True
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(mode=RunMode.RUN)))
    assert evaluation.in_sweep() is False


# -- the short table -------------------------------------------------------------------------------------------------


def _res(values: dict[str, float], family: str = "environment") -> ItemResult:
    return ItemResult.from_dict({
        "item": {"model": "m", "context": "fov", "trajectory": "lrlr", "seed": 0}, "case_family": family,
        "metrics": {k: {"metric": k, "backbone": "", "status": "computed", "value": v, "backbone_kind": "diagnostic"}
                    for k, v in values.items()}})


def test_the_short_table_aligns_every_metric_to_the_longest_name():
    text = evaluation.short_table([_res({"environment.visible": 0.5, "camera.rpe_trans": 0.25})])
    assert text.splitlines() == [
        "mean over the cases of each model / context / trajectory / seed (n = cases):",
        "m / fov / lrlr / seed 0",
        f"  {'camera.rpe_trans':<19}    0.2500  (n=1)",
        "  environment.visible    0.5000  (n=1)"]
