"""The rules of the ``run`` command (``harness/app/commands/run.py``), one at a time and in this process: the plan and
what is checked before the first write (readiness, extras, GPUs, fingerprints), the sweep pre-pass's plans, the
generation (the runner's ``run_items`` is a stand-in returning a chosen summary), the evaluation once the run is
complete (the evaluation stage is a stand-in recording what it was asked), the exit codes, the job's notes, the
saved config (Hydra's config object is a stand-in) and ``stage=evaluate``. The plans are the real ones of the
weight-free reference model, made under ``tmp_path``."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.core.hydra_config import HydraConfig

import harness.io
from harness.app import plan as plan_module
from harness.app import runner
from harness.app.commands import run
from harness.app.run_config import RunConfig
from harness.app.runner import RunSummary
from harness.dist import Rank
from harness.errors import ConfigError
from harness.secrets import RedactedConfig
from tests.support.clocks import StepClock
from tests.support.run_configs import run_config

SECRET = "sk-abcdefghijklmnopqrstuvwx1234"


@pytest.fixture(scope="module")
def base_cfg(tmp_path_factory) -> RunConfig:
    """``run model=reference`` as the command line composes it (one trajectory: lrlr; the demo case set); planned
    once here, so that the tests' plans find the adapter and the case set imported."""
    cfg = run_config("model=reference", "output_root=outputs")
    plan_module.plan_from_config(cfg.replace(output_root=str(tmp_path_factory.mktemp("warm"))))
    return cfg


@pytest.fixture
def cfg_for(base_cfg, tmp_path):
    """The composed config with its run under ``tmp_path`` and top-level ``changes``."""
    def make(**changes) -> RunConfig:
        return base_cfg.replace(output_root=str(tmp_path), **changes)

    return make


class _Finding:
    def __init__(self, level: str, text: str) -> None:
        self.level, self.text = level, text

    def __str__(self) -> str:
        return self.text


@pytest.fixture
def lines():
    """The status lines of the command's logger ("harness.app.cli"), as ``(level name, message)``."""
    seen: list[tuple[str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelname, record.getMessage()))

    logger, handler = logging.getLogger("harness.app.cli"), Keep(logging.DEBUG)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield seen
    logger.removeHandler(handler)
    logger.setLevel(old)


@pytest.fixture
def checks(monkeypatch):
    """Stand-ins for what ``prepare_run`` calls beyond the plan: the extras check, the GPU pool, the fingerprints;
    every plan made gets a readiness and a ``check_ready`` that record their calls."""
    state = SimpleNamespace(required=[], pools=[], fingerprints=[], ready=[], readiness=[], plans=[], pool="POOL",
                            findings=[_Finding("warning", "no checkpoint yet")], empty=False)
    real = plan_module.plan_from_config

    def plan_from_config(cfg, *a, **kw):
        plan = real(cfg, *a, **kw)
        if state.empty:
            plan = dataclasses.replace(plan, items=[])
        plan.adapter.check_ready = lambda: state.ready.append(plan.adapter)

        def readiness(probe=True):
            state.readiness.append(probe)
            return list(state.findings)

        plan.adapter.readiness = readiness
        state.plans.append(plan)
        return plan

    def gpu_pool_for(adapter, cfg, dry_run=False):
        state.pools.append((adapter, cfg, dry_run))
        return state.pool

    monkeypatch.setattr(plan_module, "plan_from_config", plan_from_config)
    monkeypatch.setattr("harness.app.extras.require", lambda what, mods: state.required.append((what, tuple(mods))))
    monkeypatch.setattr(runner, "gpu_pool_for", gpu_pool_for)
    monkeypatch.setattr(runner, "check_fingerprints", lambda *a: state.fingerprints.append(a))
    monkeypatch.setattr(run, "in_sweep", lambda: False)
    return state


def _readiness_line(name: str = "reference") -> tuple[str, str]:
    return ("WARNING", f"readiness (warning, not enforced in a dry run): {name}: no checkpoint yet")


# -- prepared, config_key, planned -----------------------------------------------------------------------------------


def test_a_prepared_plan_is_found_by_its_config_inside_the_block_and_gone_after_it():
    cfg = RunConfig.from_mapping({"run": "a"})
    other = RunConfig.from_mapping({"run": "b"})
    assert run.planned(cfg) is None
    with run.prepared({run.config_key(cfg): "PLAN"}):
        assert run.planned(cfg) == "PLAN"
        assert run.planned(other) is None
    assert run.planned(cfg) is None


def test_the_prepared_plans_are_forgotten_even_when_the_block_fails():
    cfg = RunConfig.from_mapping({})
    with pytest.raises(RuntimeError), run.prepared({run.config_key(cfg): "PLAN"}):
        raise RuntimeError
    assert run.planned(cfg) is None


def test_two_configs_that_compose_alike_have_one_key_and_a_changed_field_another():
    assert run.config_key(RunConfig.from_mapping({"seed": 3})) == run.config_key(RunConfig.from_mapping({"seed": 3}))
    assert run.config_key(RunConfig.from_mapping({"seed": 3})) != run.config_key(RunConfig.from_mapping({"seed": 4}))


# -- videos_args, check_evaluate_only ---------------------------------------------------------------------------------


def test_the_videos_manifest_defaults_to_manifest_json_in_the_videos_folder():
    assert run.videos_args(RunConfig.from_mapping({"videos": "/v/made"})) == (Path("/v/made"),
                                                                             Path("/v/made/manifest.json"))


def test_a_videos_manifest_that_is_given_is_used_as_given():
    cfg = RunConfig.from_mapping({"videos": "/v/made", "videos_manifest": "/m/list.json"})
    assert run.videos_args(cfg) == (Path("/v/made"), Path("/m/list.json"))


def test_evaluate_only_checks_every_entry_of_videos_made_elsewhere(monkeypatch):
    seen = []
    monkeypatch.setattr("evaluate.external.check_import", lambda *a: seen.append(a))
    cfg = RunConfig.from_mapping({"stage": "evaluate", "videos": "/v"})
    run.check_evaluate_only(cfg)
    assert seen == [(Path("/v"), Path("/v/manifest.json"), cfg.cases)]


def test_evaluate_only_of_an_existing_run_checks_nothing_before_it_opens_it(monkeypatch):
    seen = []
    monkeypatch.setattr("evaluate.external.check_import", lambda *a: seen.append(a))
    run.check_evaluate_only(RunConfig.from_mapping({"stage": "evaluate"}))
    assert seen == []


# -- prepare_run, check_requires, log_readiness -----------------------------------------------------------------------


def test_a_run_checks_its_extras_and_readiness_then_takes_the_gpu_pool(checks, cfg_for, lines):
    cfg = cfg_for()
    plan = run.prepare_run(cfg)
    assert checks.required == [("model=reference", ())]
    assert checks.ready == [plan.adapter]
    assert checks.readiness == [] and lines == []  # readiness is enforced (check_ready), not listed
    assert checks.pools == [(plan.adapter, cfg, False)] and plan.pool == "POOL"
    assert [i.case_id for i in plan.items] == ["dynamic_cat", "environment_motorcycle", "environment_rocket",
                                               "human_astronaut", "object_coffee"]


def test_a_dry_run_lists_readiness_without_probing_and_checks_neither_extras_nor_readiness(checks, cfg_for, lines):
    cfg = cfg_for(dry_run=True)
    plan = run.prepare_run(cfg)
    assert checks.readiness == [False]
    assert lines == [_readiness_line()]
    assert checks.required == [] and checks.ready == []
    assert checks.pools == [(plan.adapter, cfg, True)]


def test_a_dry_run_prepared_without_report_lists_no_readiness(checks, cfg_for, lines):
    run.prepare_run(cfg_for(dry_run=True), report=False)
    assert checks.readiness == [] and lines == []


def test_every_readiness_finding_is_one_line(checks, cfg_for, lines):
    checks.findings = [_Finding("warning", "a"), _Finding("error", "b")]
    run.prepare_run(cfg_for(dry_run=True))
    assert lines == [("WARNING", "readiness (warning, not enforced in a dry run): reference: a"),
                     ("WARNING", "readiness (error, not enforced in a dry run): reference: b")]


def test_a_plan_without_items_is_nothing_to_run_naming_the_case_set_and_the_trajectories(checks, cfg_for):
    checks.empty = True
    with pytest.raises(run.NothingToRun) as info:
        run.prepare_run(cfg_for())
    assert str(info.value) == ("nothing to run: no case in builtin:demo lists trajectory lrlr "
                               "(check cases.include / cases.families)")
    assert isinstance(info.value, ConfigError)
    assert checks.pools == []


def test_the_fingerprints_are_checked_only_when_the_run_folder_exists(checks, cfg_for, tmp_path):
    cfg = cfg_for(overwrite=True)
    run.prepare_run(cfg)
    assert checks.fingerprints == []
    (tmp_path / "default").mkdir()
    plan = run.prepare_run(cfg)
    assert checks.fingerprints == [(plan, True, False)]
    dry = run.prepare_run(cfg_for(dry_run=True))
    assert checks.fingerprints[-1] == (dry, False, True)


class _ServedAdapter:
    requires = ("openai", "httpx")
    config = SimpleNamespace(name="lingbot")


def test_the_extras_check_names_the_model_and_the_served_backend(monkeypatch):
    seen = []
    monkeypatch.setattr("harness.app.extras.require", lambda what, mods: seen.append((what, mods)))
    run.check_requires(_ServedAdapter(), SimpleNamespace(served=SimpleNamespace(name="vllm")))
    run.check_requires(_ServedAdapter(), SimpleNamespace(served=None))
    assert seen == [("model=lingbot backend=vllm", ("openai", "httpx")), ("model=lingbot", ("openai", "httpx"))]


# -- validate_job -----------------------------------------------------------------------------------------------------


def test_a_job_of_another_command_is_not_planned(checks):
    run.validate_job(RunConfig.from_mapping({"cmd": "list"}))
    assert checks.plans == []


def test_an_evaluate_only_job_checks_its_videos_and_is_not_planned(checks, monkeypatch):
    seen = []
    monkeypatch.setattr("evaluate.external.check_import", lambda *a: seen.append(a[0]))
    run.validate_job(RunConfig.from_mapping({"stage": "evaluate", "videos": "/v"}))
    assert seen == [Path("/v")] and checks.plans == []


def test_a_run_job_is_planned_quietly_and_kept_for_the_job(checks, cfg_for, lines):
    cfg = cfg_for(dry_run=True)
    plans: dict = {}
    with run.prepared(plans):
        run.validate_job(cfg)
    assert plans == {run.config_key(cfg): checks.plans[0]}
    assert lines == []  # the job itself lists readiness


def test_a_run_job_validated_outside_a_sweep_is_planned_and_kept_nowhere(checks, cfg_for):
    run.validate_job(cfg_for())
    assert len(checks.plans) == 1 and run.planned(cfg_for()) is None


# -- _plan_for -------------------------------------------------------------------------------------------------------


def test_a_job_takes_the_pre_pass_plan_once_and_a_dry_run_lists_its_readiness(checks, cfg_for, lines):
    cfg = cfg_for(dry_run=True)
    plans: dict = {}
    with run.prepared(plans):
        run.validate_job(cfg)
        plan = plans[run.config_key(cfg)]
        assert run._plan_for(cfg) is plan
        assert plans == {}
    assert len(checks.plans) == 1
    assert lines == [_readiness_line()]


def test_a_job_that_takes_a_pre_pass_plan_for_a_real_run_lists_no_readiness(checks, cfg_for, lines):
    cfg = cfg_for()
    with run.prepared({run.config_key(cfg): "PLAN"}):
        assert run._plan_for(cfg) == "PLAN"
    assert lines == [] and checks.plans == []


def test_a_job_without_a_pre_pass_plan_is_planned_now(checks, cfg_for):
    with run.prepared({}):
        plan = run._plan_for(cfg_for())
    assert checks.plans == [plan]


def test_nothing_to_run_skips_a_sweep_job_with_a_line(checks, cfg_for, lines, monkeypatch):
    checks.empty = True
    monkeypatch.setattr(run, "in_sweep", lambda: True)
    assert run._plan_for(cfg_for()) is None
    assert lines == [("WARNING", ("this sweep job is skipped: nothing to run: no case in builtin:demo lists "
                                  "trajectory lrlr (check cases.include / cases.families)"))]


def test_nothing_to_run_outside_a_sweep_is_the_error(checks, cfg_for):
    checks.empty = True
    with pytest.raises(run.NothingToRun):
        run._plan_for(cfg_for())


# -- cmd_run ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def job(monkeypatch, checks, cfg_for):
    """``cmd_run`` with its collaborators standing in: the generation returns ``state.summary`` (and calls
    ``on_start``), the evaluation returns ``state.evaluated``; ``state.go(**changes)`` runs the command on a plan
    the pre-pass made."""
    state = SimpleNamespace(summary=None, rank=Rank(), evaluated=True, missing=[], runs=[], bound=[], saved=[],
                            removed=[], evaluations=[], complete=[], strips_cpu_s=0.0)

    def run_items(plan, **kw):
        state.runs.append((plan, kw))
        kw["on_start"]()
        return state.summary

    def evaluate(run_dir, cfg, **kw):
        state.evaluations.append((run_dir, cfg, {k: dict(v) if isinstance(v, dict) else v for k, v in kw.items()}))
        if kw.get("timings") is not None:
            kw["timings"]["strips_cpu_s"] = state.strips_cpu_s
        return state.evaluated

    def run_complete(run_dir, items):
        state.complete.append((run_dir, items))
        return state.missing

    def go(**changes):
        cfg = cfg_for(**changes)
        with run.prepared({}):
            run.validate_job(cfg)
            state.plan = run.planned(cfg)
            state.summary = state.summary or RunSummary(state.plan.run_dir, done=["a"], seconds=1.5)
            run.cmd_run(cfg)
        return cfg

    monkeypatch.setattr(runner, "run_items", run_items)
    monkeypatch.setattr(runner, "run_complete", run_complete)
    monkeypatch.setattr("harness.dist.current_rank", lambda: state.rank)
    monkeypatch.setattr("harness.dist.bind_local_device", state.bound.append)
    monkeypatch.setattr("harness.io.remove_dead_temps", state.removed.append)
    monkeypatch.setattr(run, "save_config", lambda recorded, run_dir: state.saved.append((recorded, run_dir)))
    monkeypatch.setattr(run, "evaluate", evaluate)
    monkeypatch.setattr(run, "time", StepClock())
    monkeypatch.setattr(run, "_JOB_NOTES", {})
    monkeypatch.setattr(run, "_REPORT_AT_END", [])
    state.go = go
    return state


def test_a_run_generates_with_its_settings_saves_its_config_first_and_evaluates_the_complete_run(job, capsys):
    cfg = job.go(overwrite=True, progress=False, previews=True)
    plan = job.plan
    (_, kw), = job.runs
    on_start = kw.pop("on_start")
    assert kw == {"dry_run": False, "overwrite": True, "progress": False, "rank": Rank(), "previews": True}
    assert callable(on_start)
    assert job.bound == [Rank()]
    assert job.saved == [(plan.recorded, plan.run_dir)] and job.removed == [plan.run_dir]
    assert job.complete == [(plan.run_dir, plan.all_items)]
    assert job.evaluations == [(plan.run_dir, cfg, {"timings": {}})]
    assert capsys.readouterr().out == job.summary.table() + "\n"


def test_a_run_notes_its_counts_and_the_seconds_of_each_phase(job):
    job.summary = RunSummary(Path("/r"), done=["a", "b"], skipped=["c"], elsewhere=["d", "e"], seconds=1.5)
    job.go()
    assert run.take_job_notes() == {"done": 2, "skipped": 3, "failed": 0, "compiled": 0, "generation_s": 1.5,
                                    "generation_cpu_s": 2.0, "evaluation_s": 5.0, "evaluation_cpu_s": 2.0,
                                    "strips_cpu_s": 0.0}


def test_the_strips_drawn_while_scoring_count_as_report_work_not_evaluation(job):
    """The strips a job draws ahead are report work (harness.app.benchmarks.first_look): their CPU seconds are noted
    apart and left out of the evaluation's."""
    job.strips_cpu_s = 0.5
    job.go()
    notes = run.take_job_notes()
    assert (notes["evaluation_cpu_s"], notes["strips_cpu_s"]) == (1.5, 0.5)


def test_a_deferred_evaluation_drew_no_strips(job):
    """Items of other shards not finished: nothing was scored, so no strips were drawn and the evaluation phase's CPU
    seconds are all its own."""
    job.missing = ["other-shard-item"]
    job.go()
    notes = run.take_job_notes()
    assert job.evaluations == [] and (notes["evaluation_cpu_s"], notes["strips_cpu_s"]) == (2.0, 0.0)


def test_a_dry_run_keeps_the_leftover_temporaries_and_is_not_evaluated(job):
    job.summary = RunSummary(Path("/r"), compiled=["a"])
    job.go(dry_run=True)
    assert job.saved == [(job.plan.recorded, job.plan.run_dir)] and job.removed == []
    assert job.runs[0][1]["dry_run"] is True
    assert job.evaluations == []
    assert run.take_job_notes() == {"done": 0, "skipped": 0, "failed": 0, "compiled": 1, "generation_s": 0.0,
                                    "generation_cpu_s": 2.0}


def test_a_rank_other_than_the_first_generates_but_neither_saves_the_config_nor_evaluates(job):
    job.rank = Rank(1, 2, 1)
    job.go()
    assert job.bound == [Rank(1, 2, 1)] and job.runs[0][1]["rank"] == Rank(1, 2, 1)
    assert job.saved == [] and job.removed == [] and job.evaluations == []


@pytest.mark.parametrize("changes", [{"stage": "generate"}, {"evaluate": {"enabled": False}}])
def test_a_run_that_only_generates_is_not_evaluated(job, changes):
    job.go(**changes)
    assert len(job.runs) == 1 and job.evaluations == []
    assert "evaluation_s" not in run.take_job_notes()


@pytest.mark.parametrize("done, skipped", [(["a"], []), ([], ["a"])])
def test_a_run_with_a_video_made_now_or_before_is_evaluated(job, done, skipped):
    job.summary = RunSummary(Path("/r"), done=done, skipped=skipped)
    job.go()
    assert len(job.evaluations) == 1


def test_a_run_that_produced_no_video_is_not_evaluated_and_says_so(job, lines):
    job.summary = RunSummary(Path("/r"), elsewhere=["a"])
    job.go()
    assert job.evaluations == []
    assert lines == [("WARNING", ("no video was produced: every item failed (causes above, full logs in each "
                                  "item's upstream.log / meta.json); evaluation skipped"))]


def test_a_failed_item_exits_with_1_after_the_evaluation(job):
    job.summary = RunSummary(Path("/r"), done=["a"], failed=["b"])
    with pytest.raises(SystemExit) as info:
        job.go()
    assert info.value.code == 1 and len(job.evaluations) == 1


def test_a_failed_evaluation_exits_with_1(job):
    job.evaluated = False
    with pytest.raises(SystemExit) as info:
        job.go()
    assert info.value.code == 1


def test_a_skipped_sweep_job_generates_nothing(job, checks, cfg_for, monkeypatch):
    checks.empty = True
    monkeypatch.setattr(run, "in_sweep", lambda: True)
    assert run.cmd_run(cfg_for()) is None
    assert job.runs == [] and job.bound == []


# -- _evaluate_when_complete ------------------------------------------------------------------------------------------


@pytest.fixture
def finished(job, checks, cfg_for):
    """A plan made for real, its run folder made, and the stand-ins of ``job``."""
    cfg = cfg_for()
    job.plan = run.prepare_run(cfg)
    job.plan.run_dir.mkdir()
    job.cfg = cfg
    return job


def test_a_complete_run_is_evaluated_whole_inside_its_folder(finished, monkeypatch):
    confined = []
    monkeypatch.setattr(run, "evaluate", lambda d, c, **kw: confined.append((d, c, kw, list(harness.io._CONFINED)))
                        or True)
    assert run._evaluate_when_complete(finished.plan, finished.cfg, produced=True) is True
    (d, c, kw, roots), = confined
    assert (d, c, kw) == (finished.plan.run_dir, finished.cfg, {"timings": None})
    assert finished.plan.run_dir.resolve() in roots


def test_the_evaluation_of_a_complete_run_says_what_it_found(finished):
    finished.evaluated = False
    assert run._evaluate_when_complete(finished.plan, finished.cfg, produced=True) is False


def test_a_run_with_unfinished_items_defers_its_evaluation_with_a_line(finished, lines):
    finished.missing = finished.plan.all_items[:2]
    assert run._evaluate_when_complete(finished.plan, finished.cfg, produced=True) is True
    assert finished.evaluations == []
    assert lines == [("INFO", ("evaluation deferred: 2 item(s) of this run are not finished yet (other shards); "
                               "the shard that finishes last evaluates, or run stage=evaluate afterwards"))]


def test_no_video_produced_is_not_a_failed_evaluation(finished):
    assert run._evaluate_when_complete(finished.plan, finished.cfg, produced=False) is True
    assert finished.evaluations == []


def test_a_local_sweeps_job_scores_only_its_own_items_even_before_the_run_is_complete(finished):
    run.start_sweep_worker()
    finished.missing = finished.plan.all_items[:1]
    finished.evaluated = False
    assert run._evaluate_when_complete(finished.plan, finished.cfg, produced=True) is False
    (d, c, kw), = finished.evaluations
    assert (d, c) == (finished.plan.run_dir, finished.cfg)
    assert kw == {"only": [finished.plan.run_dir / i.rel_dir for i in finished.plan.items], "timings": None}
    assert kw["only"][0] == finished.plan.run_dir / "reference" / "fov" / "seed-1" / "lrlr" / "dynamic_cat"


# -- the job's notes --------------------------------------------------------------------------------------------------


def test_a_worker_of_a_local_sweep_reports_at_the_end(monkeypatch):
    monkeypatch.setattr(run, "_REPORT_AT_END", [])
    assert run.reports_at_end() is False
    run.start_sweep_worker()
    assert run.reports_at_end() is True


def test_the_notes_are_kept_until_taken_with_clear(monkeypatch):
    monkeypatch.setattr(run, "_JOB_NOTES", {})
    run.note_job(done=1)
    run.note_job(failed=2)
    notes = run.take_job_notes()
    assert notes == {"done": 1, "failed": 2}
    notes["done"] = 9  # a copy
    assert run.take_job_notes(clear=True) == {"done": 1, "failed": 2}
    assert run.take_job_notes() == {}


# -- save_config, redact_multirun_yaml --------------------------------------------------------------------------------


@pytest.fixture
def stamp(monkeypatch):
    """A fixed wall clock: 2026-12-06 08:26:00 and 1234567890123 ns."""
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20261206-082600" if fmt == "%Y%m%d-%H%M%S" else "?")
    monkeypatch.setattr(time, "time_ns", lambda: 1_234_567_890_123)


def _hydra(monkeypatch, mode, sweep_dir: Path, task=(), num=3):
    hc = SimpleNamespace(overrides=SimpleNamespace(task=list(task)), job=SimpleNamespace(num=num), mode=mode,
                         sweep=SimpleNamespace(dir=str(sweep_dir)))
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hc))


def _no_hydra(monkeypatch):
    def get():
        raise ValueError("HydraConfig was not set")

    monkeypatch.setattr(HydraConfig, "get", staticmethod(get))


def test_outside_hydra_the_config_is_saved_in_order_with_no_overrides(tmp_path, stamp, monkeypatch):
    _no_hydra(monkeypatch)
    run.save_config(RedactedConfig.of({"b": 1, "a": {"api_key": SECRET}}), tmp_path)
    where = tmp_path / ".hydra" / "20261206-082600-890123" / ".hydra"
    assert sorted(p.name for p in where.iterdir()) == ["config.yaml", "overrides.yaml"]
    assert (where / "config.yaml").read_text() == "b: 1\na:\n  api_key: <redacted>\n"
    assert (where / "overrides.yaml").read_text() == "[]\n"


def test_a_sweep_jobs_config_is_saved_under_its_job_number_with_its_overrides_redacted(tmp_path, stamp, monkeypatch):
    _hydra(monkeypatch, "RunMode.MULTIRUN", tmp_path / "sweep", task=["b=1", f"a.api_key={SECRET}"])
    run.save_config(RedactedConfig.of({"b": 1, "a": {"api_key": SECRET}}), tmp_path / "run")
    where = tmp_path / "run" / ".hydra" / "20261206-082600-890123-3" / ".hydra"
    assert (where / "overrides.yaml").read_text() == "- b=1\n- a.api_key=<redacted>\n"


@pytest.mark.parametrize("mode", ["RunMode.RUN", None])
def test_a_single_run_under_hydra_has_no_job_number(tmp_path, stamp, monkeypatch, mode):
    _hydra(monkeypatch, mode, tmp_path / "sweep", task=["b=1"])
    run.save_config(RedactedConfig.of({"b": 1}), tmp_path / "run")
    where = tmp_path / "run" / ".hydra" / "20261206-082600-890123" / ".hydra"
    assert (where / "overrides.yaml").read_text() == "- b=1\n"


def test_the_stamps_fraction_keeps_its_leading_zeros(tmp_path, stamp, monkeypatch):
    _no_hydra(monkeypatch)
    monkeypatch.setattr(time, "time_ns", lambda: 5_000_000_042)
    run.save_config(RedactedConfig.of({}), tmp_path)
    assert [p.name for p in (tmp_path / ".hydra").iterdir()] == ["20261206-082600-000042"]


def test_saving_the_config_scrubs_the_sweeps_multirun_yaml(tmp_path, stamp, monkeypatch):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(f"task:\n- a.api_key={SECRET}\n")
    _hydra(monkeypatch, "RunMode.MULTIRUN", sweep)
    run.save_config(RedactedConfig.of({}), tmp_path / "run")
    assert (sweep / "multirun.yaml").read_text() == "task:\n- a.api_key=<redacted>\n"


def test_a_multirun_yaml_without_secrets_is_left_alone(tmp_path, monkeypatch):
    writes = []
    monkeypatch.setattr(harness.io, "write_text", lambda *a, **kw: writes.append(a))
    (tmp_path / "multirun.yaml").write_text("task:\n- seed=3\n")
    run.redact_multirun_yaml(tmp_path)
    assert writes == [] and (tmp_path / "multirun.yaml").read_text() == "task:\n- seed=3\n"


def test_a_sweep_folder_without_multirun_yaml_is_not_an_error(tmp_path):
    run.redact_multirun_yaml(tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()


# -- cmd_evaluate_only ------------------------------------------------------------------------------------------------


@pytest.fixture
def external(monkeypatch):
    state = SimpleNamespace(calls=[], ok=True)

    def check_import(folder, manifest, cases):
        state.calls.append(("check", folder, manifest, cases))
        return ["PLANNED"]

    def import_videos(folder, manifest, rundir, planned):
        state.calls.append(("import", folder, manifest, rundir.path, planned))

    def evaluate(run_dir, cfg, **kw):
        state.calls.append(("evaluate", run_dir, cfg.run, list(harness.io._CONFINED)))
        return state.ok

    monkeypatch.setattr("evaluate.external.check_import", check_import)
    monkeypatch.setattr("evaluate.external.import_videos", import_videos)
    monkeypatch.setattr(run, "evaluate", evaluate)
    return state


def test_videos_made_elsewhere_are_checked_imported_into_the_named_run_and_evaluated(external, tmp_path):
    run.cmd_evaluate_only({"stage": "evaluate", "videos": "/v", "run": "ext", "output_root": str(tmp_path)})
    run_dir = tmp_path.resolve() / "ext"
    check, imported, evaluated = external.calls
    assert check[:3] == ("check", Path("/v"), Path("/v/manifest.json"))
    assert imported == ("import", Path("/v"), Path("/v/manifest.json"), run_dir, ["PLANNED"])
    assert evaluated[:3] == ("evaluate", run_dir, "ext") and run_dir in evaluated[3]


def test_an_existing_run_is_evaluated_in_place(external, tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "manifest.jsonl").write_text("")
    run.cmd_evaluate_only(RunConfig.from_mapping({"stage": "evaluate", "run": "r1", "output_root": str(tmp_path)}))
    (what, run_dir, name, roots), = external.calls
    assert (what, name) == ("evaluate", "r1") and run_dir.resolve() == (tmp_path / "r1").resolve()
    assert run_dir.resolve() in roots


@pytest.mark.parametrize("videos", [None, "/v"])
def test_a_failed_evaluation_only_exits_with_1(external, tmp_path, videos):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "manifest.jsonl").write_text("")
    external.ok = False
    with pytest.raises(SystemExit) as info:
        run.cmd_evaluate_only({"stage": "evaluate", "run": "r1", "output_root": str(tmp_path), "videos": videos})
    assert info.value.code == 1
