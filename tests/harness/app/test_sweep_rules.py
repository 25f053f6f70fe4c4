"""The rules of harness/app/sweep.py (the local sweep launcher), one at a time and in this process: each job's
console line and the summary, the counts, how many jobs fit, the jobs as composed, the finished jobs recognised
without a worker, the pool (with an in-process stand-in for the process pool), a worker's job and its exit code,
the sweep's record and the runs evaluated at the end. The worker processes themselves run in the slow tier
(tests/harness/app/test_sweep.py)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import sys
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import cv2
import hydra.core.utils
import pytest
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from omegaconf import OmegaConf

import harness.app.commands.run as run_command
from harness import logs, outputs
from harness.app import console, runner, sweep
from harness.app.commands import evaluation
from harness.app.run_config import RunConfig
from harness.app.settings import compose_config
from harness.app.sweep import Job, Outcome
from harness.errors import CommandExit, UserError

RUN = RunConfig.from_mapping({})
LIST = RunConfig.from_mapping({"cmd": "list"})


def _job(tmp_path: Path, num: int = 3, label: str = "context=fov", cfg: RunConfig = RUN) -> Job:
    return Job(num, [label], label, None, cfg, tmp_path / str(num) / "job.log")


@pytest.fixture
def cores(monkeypatch):
    """The cores this process may use, as a test sets them."""
    def set_cores(n: int) -> None:
        def affinity(pid):
            assert pid == 0  # this process
            return set(range(n))

        monkeypatch.setattr(sweep.os, "sched_getaffinity", affinity, raising=False)

    return set_cores


# -- Outcome.line, _counts, _duration -------------------------------------------------------------------------------

def test_a_job_stopped_by_a_user_error_says_so_with_its_log(tmp_path):
    job = _job(tmp_path)
    assert Outcome(job, 2, 3.0, {"done": 0}, error="error: bad").line(2, 5) == (
        f"job 2 of 5 stopped (a user error) in 3 s: context=fov: 0 items done -- error: bad (log: {job.log})")


def test_another_exit_code_is_named_and_no_error_line_means_no_dash(tmp_path):
    job = _job(tmp_path)
    assert Outcome(job, 130, 1.0).line(1, 1) == (
        f"job 1 of 1 exit 130 in 1 s: context=fov: 0 items done (log: {job.log})")
    assert Outcome(job, 1, 1.0, {"failed": 2}).line(1, 1) == (
        f"job 1 of 1 FAILED in 1 s: context=fov: 2 items failed (log: {job.log})")


def test_a_finished_job_of_several_items_says_how_many(tmp_path):
    assert Outcome(_job(tmp_path), 0, 5.0, already_done=3).line(2, 3) == (
        "job 2 of 3 already done: context=fov: 3 items finished before, nothing to do")


def test_a_successful_job_has_no_error_line(tmp_path):
    assert Outcome(_job(tmp_path), 0, 2.0, {"done": 1}, error="ignored").line(1, 1) == (
        "job 1 of 1 done in 2 s: context=fov: 1 item done")


def test_one_warning_is_shown_without_a_count(tmp_path):
    assert Outcome(_job(tmp_path), 0, 1.0, {"done": 2}, warnings=["WARNING x: slow"]).line(1, 1) == (
        "job 1 of 1 done in 1 s: context=fov: 2 items done -- WARNING x: slow")


def test_the_first_warning_is_shown_and_the_others_counted(tmp_path):
    job = _job(tmp_path)
    line = Outcome(job, 0, 1.0, {"done": 1}, warnings=["WARNING a", "WARNING b", "WARNING c"]).line(1, 1)
    assert line.endswith(f"1 item done -- WARNING a (+2 more in {job.log})")


@pytest.mark.parametrize("n, shown", [(200, "w" * 200), (201, "w" * 197 + "...")])
def test_a_warning_longer_than_200_characters_is_cut_to_200(tmp_path, n, shown):
    line = Outcome(_job(tmp_path), 0, 1.0, {"done": 1}, warnings=["w" * n]).line(1, 1)
    assert line.endswith(f"1 item done -- {shown}")


def test_only_the_first_warning_is_cut_and_shown(tmp_path):
    job = _job(tmp_path)
    line = Outcome(job, 0, 1.0, {"done": 1}, warnings=["w" * 201, "WARNING short"]).line(1, 1)
    assert line.endswith(f"1 item done -- {'w' * 197}... (+1 more in {job.log})")


@pytest.mark.parametrize("notes, text", [
    ({}, "0 items done"),
    ({"done": None, "failed": 0}, "0 items done"),
    ({"failed": 1}, "1 item failed"),
    ({"skipped": 2, "compiled": 1}, "2 items already done, 1 compiled (dry run)"),
    ({"done": 1, "skipped": 2, "failed": 3, "compiled": 4},
     "1 item done, 2 already done, 3 failed, 4 compiled (dry run)"),
])
def test_the_counts_name_each_nonzero_count_in_order(notes, text):
    assert sweep._counts(notes) == text


@pytest.mark.parametrize("seconds, text", [(0.4, "0 s"), (119.4, "119 s"), (120.0, "2.0 min"), (120.5, "2.0 min"),
                                           (3600.0, "60.0 min")])
def test_a_duration_is_in_seconds_under_two_minutes_then_in_minutes(seconds, text):
    assert sweep._duration(seconds) == text


# -- _cores, fit, worker_count, _label ------------------------------------------------------------------------------

def test_the_cores_are_those_this_process_may_use(cores):
    cores(6)
    assert sweep._cores() == 6


@pytest.mark.parametrize("count, want", [(8, 8), (None, 1)])
def test_without_affinity_the_cores_are_the_cpu_count_or_one(monkeypatch, count, want):
    monkeypatch.delattr(sweep.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(sweep.os, "cpu_count", lambda: count)
    assert sweep._cores() == want


def _model(gpus: int) -> dict:
    from harness.config_groups import group_yaml

    return {**group_yaml("model", "reference"), "gpus_per_job": gpus}


def test_only_a_real_run_of_a_gpu_model_is_limited_by_its_gpus(cores):
    cores(5)
    assert sweep.fit(RunConfig.from_mapping({"model": _model(2), "devices": "0,1,2"})) == 1  # 3 GPUs // 2
    assert sweep.fit(RunConfig.from_mapping({"model": _model(2), "devices": "0,1,2,3", "cmd": "verify"})) == 5
    assert sweep.fit(RunConfig.from_mapping({"devices": "0,1"})) == 5  # no model: no GPUs


def test_a_one_job_label_is_all_its_overrides_and_identical_jobs_keep_theirs():
    assert sweep._label([["run=a"], ["run=a"]], [["run=a"], ["run=a"]]) == ["run=a", "run=a"]
    three = [["a=1", "b=1"], ["a=2", "b=1"], ["a=3", "b=1"]]
    assert sweep._label(three, three) == ["a=1", "a=2", "a=3"]


# -- _jobs ----------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_config():
    """The composed config with its ``hydra`` node (once for the module: read-only)."""
    return compose_config(["cmd=list"], hydra_config=True)


def _launcher(base, tmp_path: Path, n_jobs="auto"):
    def load_sweep_config(config, overrides):  # Hydra's loader, for the plain keys of these tests
        assert config is launcher.config
        return OmegaConf.merge(base, OmegaConf.from_dotlist([o for o in overrides if not o.startswith("+")]))

    launcher = SimpleNamespace(
        config=OmegaConf.merge(base, {"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}}),
        hydra_context=SimpleNamespace(config_loader=SimpleNamespace(load_sweep_config=load_sweep_config)),
        task_function="TASK", params={"n_jobs": n_jobs})
    return launcher


def test_each_job_is_numbered_from_the_first_index_and_validated(base_config, tmp_path):
    launcher = _launcher(base_config, tmp_path)
    overrides = [["run=${cmd}-a", "seed=1"], ["run=${cmd}-b", "seed=1"]]
    jobs = sweep._jobs(launcher, overrides, 5, tmp_path)
    assert [(j.num, j.label, j.overrides, j.log) for j in jobs] == [
        (5, "run=${cmd}-a", overrides[0], tmp_path / "5" / "job.log"),
        (6, "run=${cmd}-b", overrides[1], tmp_path / "6" / "job.log")]
    assert [(j.sweep_config.hydra.job.num, j.sweep_config.hydra.job.id) for j in jobs] == [(5, "5"), (6, "6")]
    assert [j.cfg.run for j in jobs] == ["list-a", "list-b"]  # interpolations resolved
    assert all(isinstance(j.cfg, RunConfig) and j.cfg.cmd == "list" for j in jobs)


def test_a_swept_secret_is_shown_redacted(base_config, tmp_path):
    token = "hf_" + "S9sweepRulesSecretValue0123456789"
    jobs = sweep._jobs(_launcher(base_config, tmp_path), [["run=a", f"+model.env.HF_TOKEN={token}"]], 0, tmp_path)
    assert token not in " ".join(jobs[0].overrides) and token not in jobs[0].label


# -- finished_items -------------------------------------------------------------------------------------------------

class Plans:
    """Stand-ins for the plan the pre-pass made, the fingerprints and each item's ``meta.json`` and problems."""

    def __init__(self, monkeypatch, tmp_path, n=2):
        self.run_dir = tmp_path / "run"
        self.items = [SimpleNamespace(rel_dir=f"i{k}", key=f"k{k}") for k in range(n)]
        self.plan = SimpleNamespace(run_dir=self.run_dir, items=self.items)
        self.metas = {self.run_dir / f"i{k}": {"status": "done", "fingerprint": f"fp{k}"} for k in range(n)}
        self.problems: dict[Path, list[str]] = {}
        self.fingerprint_calls = 0
        monkeypatch.setattr(run_command, "planned", lambda cfg: self.plan)
        monkeypatch.setattr(runner, "fingerprints", self._prints)
        monkeypatch.setattr(outputs, "item_meta", lambda d: self.metas.get(d))
        monkeypatch.setattr(outputs, "item_problems", lambda d, m: self.problems.get(d, []))

    def _prints(self, plan):
        assert plan is self.plan
        self.fingerprint_calls += 1
        return {f"k{k}": (f"fp{k}", "other") for k in range(len(self.items))}


@pytest.fixture
def plans(monkeypatch, tmp_path):
    return Plans(monkeypatch, tmp_path)


def test_a_job_whose_every_item_is_finished_counts_them_with_one_fingerprinting(plans):
    assert sweep.finished_items(RUN) == 2 and plans.fingerprint_calls == 1


@pytest.mark.parametrize("changes", [{"cmd": "verify"}, {"stage": "evaluate"}, {"dry_run": True},
                                     {"overwrite": True}])
def test_a_job_that_is_no_plain_run_is_never_recognised_as_done(plans, changes):
    assert sweep.finished_items(RunConfig.from_mapping(changes)) == 0


def test_a_job_of_another_stage_is_recognised(plans):
    assert sweep.finished_items(RunConfig.from_mapping({"stage": "generate"})) == 2


def test_a_job_without_a_plan_or_items_is_not_done(plans):
    plans.plan = None
    assert sweep.finished_items(RUN) == 0
    plans.plan = SimpleNamespace(run_dir=plans.run_dir, items=[])
    assert sweep.finished_items(RUN) == 0


@pytest.mark.parametrize("meta", [None, {}, {"status": "failed", "fingerprint": "fp1"}, {"fingerprint": "fp1"},
                                  {"status": "done", "fingerprint": "other"},
                                  {"status": "done", "fingerprint": "fp0"}])
def test_one_unfinished_or_changed_item_makes_the_job_run(plans, meta):
    plans.metas[plans.run_dir / "i1"] = meta
    assert sweep.finished_items(RUN) == 0


def test_an_item_whose_files_no_longer_match_makes_the_job_run(plans):
    plans.problems[plans.run_dir / "i0"] = ["video.mp4: sha256 differs"]
    assert sweep.finished_items(RUN) == 0


# -- _summary and _write_record -------------------------------------------------------------------------------------

def test_the_summary_adds_up_the_jobs(tmp_path):
    job = _job(tmp_path)
    outcomes = [Outcome(job, 0, 1.0, {"done": 2, "skipped": 1}), Outcome(job, 1, 1.0, {"done": 1, "failed": None}),
                Outcome(job, 0, 0.0, already_done=3), Outcome(job, 2, 1.0, {"failed": 2})]
    assert sweep._summary(outcomes, 130.0) == (
        "sweep finished in 2.2 min: 2 of 4 job(s) succeeded; items: 3 done, 4 already done, 2 failed")
    assert sweep._summary([], 1.0) == (
        "sweep finished in 1 s: 0 of 0 job(s) succeeded; items: 0 done, 0 already done, 0 failed")


def test_the_sweep_record_has_each_job_and_run(tmp_path):
    job = _job(tmp_path, 4, "context=fov")
    outcomes = [Outcome(job, 0, 1.23456, {"done": 1, "generation_s": 2.5}), Outcome(job, 0, 0.0, already_done=2)]
    sweep._write_record(tmp_path, outcomes, 3, [{"run": "r", "evaluation_s": 1.0}], 9.87654)
    record = json.loads((tmp_path / "sweep.json").read_text())
    assert record == {"workers": 3, "wall_s": 9.877, "runs": [{"run": "r", "evaluation_s": 1.0}], "jobs": [
        {"num": 4, "overrides": ["context=fov"], "label": "context=fov", "code": 0, "seconds": 1.235,
         "already_done": 0, "log": str(job.log), "done": 1, "generation_s": 2.5},
        {"num": 4, "overrides": ["context=fov"], "label": "context=fov", "code": 0, "seconds": 0.0,
         "already_done": 2, "log": str(job.log)}]}


# -- _estimate, _outcome, _first_error ------------------------------------------------------------------------------

def test_the_estimate_is_the_mean_times_the_rounds_less_the_time_run():
    assert sweep._estimate([4.0, 8.0], 3, 2, 1.0) == pytest.approx(11.0)  # mean 6, 2 rounds, 1 s run
    assert sweep._estimate([4.0, 8.0], 4, 1, 10.0) == pytest.approx(18.0)  # 4 rounds of 6, at most a mean run


def _done(value=None, exc=None) -> Future:
    fut: Future = Future()
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)
    return fut


def test_a_worker_that_died_is_a_failed_job_with_the_reason(tmp_path):
    from concurrent.futures.process import BrokenProcessPool

    o = sweep._outcome(_job(tmp_path), _done(exc=BrokenProcessPool("killed")), 4.0)
    assert (o.code, o.seconds, o.error, o.notes) == (1, 4.0, "its worker process ended: BrokenProcessPool: killed", {})


def test_a_jobs_outcome_reads_its_result_and_its_log(tmp_path):
    job = _job(tmp_path)
    job.log.parent.mkdir(parents=True)
    job.log.write_text("WARNING a: one\n  WARNING indented\nerror: bad thing\nWARNING b: two\n")
    o = sweep._outcome(job, _done({"code": 2, "seconds": 7.5, "notes": {"done": 1}}), 9.0)
    assert (o.code, o.seconds, o.notes, o.error, o.warnings) == (
        2, 7.5, {"done": 1}, "error: bad thing", ["WARNING a: one", "WARNING b: two"])


def test_a_result_without_a_code_failed_and_one_without_seconds_took_the_measured_time(tmp_path):
    o = sweep._outcome(_job(tmp_path), _done({"notes": None}), 3.0)
    assert (o.code, o.seconds, o.notes) == (1, 3.0, {})


def test_a_successful_jobs_outcome_reads_no_error_line(tmp_path):
    job = _job(tmp_path)
    job.log.parent.mkdir(parents=True)
    job.log.write_text("error: shown only for a failure\n")
    assert sweep._outcome(job, _done({"code": 0, "seconds": 1.0}), 1.0).error == ""


@pytest.mark.parametrize("n, want", [(300, "error: " + "x" * 293), (301, "error: " + "x" * 290 + "...")])
def test_an_error_line_longer_than_300_characters_is_cut_to_300(n, want):
    assert sweep._first_error(["error: " + "x" * (n - 7)]) == want


def test_without_an_error_line_the_last_line_is_shown_cut_to_300():
    assert sweep._first_error(["first", "  last line  "]) == "last line"
    assert sweep._first_error(["first", "y" * 301]) == "y" * 300
    assert sweep._first_error(["ERROR harness: boom", "other"]) == "ERROR harness: boom"


# -- _on_sigint -----------------------------------------------------------------------------------------------------

def test_a_ctrl_c_interrupts_a_running_job_once(monkeypatch):
    monkeypatch.setattr(sweep, "_RUNNING", [True])
    with pytest.raises(KeyboardInterrupt):
        sweep._on_sigint(signal.SIGINT, None)
    assert sweep._RUNNING == [False]
    assert sweep._on_sigint(signal.SIGINT, None) is None  # the second Ctrl-C: the job's cleanup goes on


def test_a_ctrl_c_leaves_an_idle_worker_alone(monkeypatch):
    monkeypatch.setattr(sweep, "_RUNNING", [])
    assert sweep._on_sigint(signal.SIGINT, None) is None


# -- _init_worker ---------------------------------------------------------------------------------------------------

def test_a_worker_learns_the_command_line_and_sets_its_threads(monkeypatch, restore_env):
    seen: dict = {}
    restore_env("OMP_NUM_THREADS", "TQDM_DISABLE")  # the worker sets both in this process
    monkeypatch.setattr(signal, "signal", lambda sig, handler: seen.setdefault("signal", (sig, handler)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(console, "register_secrets", lambda values: seen.setdefault("secrets", values))
    monkeypatch.setattr(cv2, "setNumThreads", lambda n: seen.setdefault("cv2", n))
    monkeypatch.setattr(run_command, "start_sweep_worker", lambda: seen.setdefault("worker", True))
    token = "hf_" + "S9workerSecretValue0123456789abc"
    argv = ["harness", "-m", f"model.env.HF_TOKEN={token}"]
    sweep._init_worker(3, argv)
    assert seen["signal"] == (signal.SIGINT, sweep._on_sigint) and seen["cv2"] == 3 and seen["worker"] is True
    assert token in seen["secrets"] and sys.argv == argv
    assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ["TQDM_DISABLE"] == "1"


def test_a_worker_keeps_an_omp_setting_it_was_given(monkeypatch):
    monkeypatch.setattr(signal, "signal", lambda sig, handler: None)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(cv2, "setNumThreads", lambda n: None)
    monkeypatch.setattr(run_command, "start_sweep_worker", lambda: None)
    monkeypatch.setenv("TQDM_DISABLE", "0")
    sweep._init_worker(2, ["harness"])
    assert os.environ["OMP_NUM_THREADS"] == "7" and os.environ["TQDM_DISABLE"] == "1"


# -- _run_job -------------------------------------------------------------------------------------------------------

@pytest.fixture
def job_run(monkeypatch, base_config, tmp_path):
    """``_run_job`` with Hydra's ``run_job`` replaced by ``body(config)``; returns (its result, the log text, what the
    body saw)."""
    from omegaconf import open_dict

    seen: dict = {}
    monkeypatch.setattr(logs, "setup_logging", lambda *a: seen.setdefault("logging", a))
    monkeypatch.setattr(Singleton, "_instances", Singleton._instances)  # the worker replaces Hydra's singletons
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # no job's config yet: the worker sets it
    config = base_config.copy()
    with open_dict(config):
        config.hydra.job.num = 7
        config.hydra.job.id = 7
    log = tmp_path / "job.log"
    log.write_text("before\n")

    def run(body):
        def run_job(hydra_context, task_function, config, job_dir_key, job_subdir_key):
            seen.update(context=hydra_context, task=task_function, keys=(job_dir_key, job_subdir_key),
                        running=list(sweep._RUNNING), num=HydraConfig.get().job.num)
            body(config)
            return SimpleNamespace(return_value="ok")

        monkeypatch.setattr(hydra.core.utils, "run_job", run_job)
        out, err = sys.stdout, sys.stderr
        res = sweep._run_job("CTX", "TASK", config, str(log), Singleton.get_state()["instances"])
        assert sys.stdout is out and sys.stderr is err and sweep._RUNNING == []
        return res, log.read_text(), seen

    run.log = log
    return run


def test_a_worker_runs_the_job_as_hydra_does_its_output_in_the_log(job_run):
    run_command.note_job(stale=1)

    def body(config):
        print("hello from the job")
        run_command.note_job(done=2)

    res, log, seen = job_run(body)
    assert res["code"] == 0 and res["notes"] == {"done": 2} and 0 <= res["seconds"] < 60
    assert log == "before\nhello from the job\n"
    assert seen["context"] == "CTX" and seen["task"] == "TASK" and seen["running"] == [True] and seen["num"] == 7
    assert seen["keys"] == ("hydra.sweep.dir", "hydra.sweep.subdir") and seen["logging"] == ()


def test_the_jobs_log_is_written_line_by_line(job_run):
    seen = []
    job_run(lambda config: (print("first line"), seen.append(job_run.log.read_text())))
    assert seen == ["before\nfirst line\n"]


@pytest.mark.parametrize("exc, code", [(SystemExit(2), 2), (SystemExit(None), 0), (SystemExit("bye"), 1),
                                       (SystemExit(0), 0)])
def test_a_jobs_exit_is_its_code(job_run, exc, code):
    def body(config):
        raise exc

    assert job_run(body)[0]["code"] == code


@pytest.mark.parametrize("exc, code", [(ValueError("boom"), 1), (KeyboardInterrupt(), 130)])
def test_a_jobs_error_is_its_traceback_in_the_log(job_run, exc, code):
    def body(config):
        raise exc

    res, log, _ = job_run(body)
    assert res["code"] == code and "Traceback (most recent call last)" in log


def test_a_worker_registers_omegaconfs_resolvers_again(job_run):
    OmegaConf.clear_resolver("now")
    job_run(lambda config: None)
    assert OmegaConf.has_resolver("now")


# -- _pool (a stand-in process pool in this process) ----------------------------------------------------------------

class FakePool:
    """:class:`ProcessPoolExecutor` in this process: a submitted job runs at once, in order."""

    made: ClassVar[list[FakePool]] = []

    def __init__(self, max_workers, mp_context, initializer, initargs):
        self.max_workers, self.initializer, self.initargs = max_workers, initializer, initargs
        self.submitted: list[str] = []
        self.shutdowns: list[dict] = []
        self._processes = {}
        self.interrupt_at: int | None = None
        FakePool.made.append(self)

    def submit(self, fn, *args):
        if self.interrupt_at is not None and len(self.submitted) == self.interrupt_at:
            raise KeyboardInterrupt
        self.submitted.append(Path(args[3]).parent.name)
        fut: Future = Future()
        fut.set_result(fn(*args))
        return fut

    def shutdown(self, **kwargs):
        self.shutdowns.append(kwargs)


@pytest.fixture
def pool(monkeypatch, cores):
    """``_pool`` with :class:`FakePool`; each job's result is ``results[num]`` (default: done in 10 s)."""
    FakePool.made = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", FakePool)
    results: dict[int, dict] = {}

    def run_job(hydra_context, task_function, sweep_config, log_path, state):
        return results.get(int(Path(log_path).parent.name), {"code": 0, "seconds": 10.0, "notes": {"done": 1}})

    monkeypatch.setattr(sweep, "_run_job", run_job)
    cores(8)
    return results


LAUNCHER = SimpleNamespace(hydra_context="CTX", task_function="TASK")


def test_the_pool_runs_every_job_and_prints_a_line_as_each_ends(pool, tmp_path, capsys):
    jobs = [_job(tmp_path, k, f"seed={k}") for k in (0, 1, 2)]
    outcomes = sweep._pool(LAUNCHER, jobs, 2, 1, 4)
    assert [(o.job.num, o.code) for o in outcomes] == [(0, 0), (1, 0), (2, 0)]
    p = FakePool.made[0]
    assert p.max_workers == 2 and p.initializer is sweep._init_worker and p.initargs == (4, list(sys.argv))
    assert p.submitted == ["0", "1", "2"] and p.shutdowns == [{"wait": True}]
    assert capsys.readouterr().out.splitlines() == [
        "job 2 of 4 done in 10 s: seed=0: 1 item done; about 10 s left for the other 1",
        "job 3 of 4 done in 10 s: seed=1: 1 item done; about 10 s left for the other 1",
        "job 4 of 4 done in 10 s: seed=2: 1 item done"]


def test_one_worker_counts_the_running_and_the_waiting_jobs(pool, tmp_path, capsys):
    pool[1] = {"code": 1, "seconds": 30.0, "notes": {"failed": 1}}
    jobs = [_job(tmp_path, k, f"seed={k}") for k in (0, 1, 2)]
    outcomes = sweep._pool(LAUNCHER, jobs, 1, 0, 3)
    assert [o.code for o in outcomes] == [0, 1, 0] and FakePool.made[0].initargs[0] == 8
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "job 1 of 3 done in 10 s: seed=0: 1 item done; about 20 s left for the other 2"
    assert out[1].startswith("job 2 of 3 FAILED in 30 s: seed=1: 1 item failed") and out[1].endswith(
        "; about 20 s left for the other 1")


def test_jobs_that_end_together_are_reported_by_number(pool, tmp_path, capsys):
    jobs = [_job(tmp_path, 5, "seed=5"), _job(tmp_path, 2, "seed=2")]
    outcomes = sweep._pool(LAUNCHER, jobs, 2, 0, 2)
    assert [o.job.num for o in outcomes] == [2, 5]


def test_a_job_without_seconds_took_the_time_measured(pool, tmp_path, capsys):
    pool[0] = {"code": 0, "notes": {"done": 1}}
    outcomes = sweep._pool(LAUNCHER, [_job(tmp_path, 0, "seed=0")], 1, 0, 1)
    assert 0 <= outcomes[0].seconds < 60


def test_threads_per_worker_are_the_cores_shared_and_at_least_one(pool, tmp_path, cores):
    cores(8)
    sweep._pool(LAUNCHER, [_job(tmp_path, k) for k in range(3)], 3, 0, 3)
    cores(2)
    sweep._pool(LAUNCHER, [_job(tmp_path, k) for k in range(3)], 3, 0, 3)
    cores(2)
    sweep._pool(LAUNCHER, [_job(tmp_path, k) for k in range(2)], 2, 0, 2)
    assert [p.initargs[0] for p in FakePool.made] == [2, 1, 1]


class LazyPool(FakePool):
    """A pool whose jobs end one at a time, in the order they were submitted, when the sweep waits."""

    def submit(self, fn, *args):
        self.submitted.append(Path(args[3]).parent.name)
        fut: Future = Future()
        fut.job = (fn, args)  # type: ignore[attr-defined]
        return fut


def test_the_estimate_counts_the_longest_running_job(pool, tmp_path, monkeypatch, capsys):
    """A stand-in clock: each wait lasts 4 s and ends the oldest job; a job's seconds are the time measured."""
    clock = [0.0]
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", LazyPool)
    monkeypatch.setattr(sweep, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def wait(fs, return_when):
        clock[0] += 4.0
        fut = min(fs, key=lambda f: int(Path(f.job[1][3]).parent.name))
        fut.set_result(fut.job[0](*fut.job[1]))
        return {fut}, set(fs) - {fut}

    monkeypatch.setattr(concurrent.futures, "wait", wait)
    for k in range(3):
        pool[k] = {"code": 0, "notes": {"done": 1}}
    outcomes = sweep._pool(LAUNCHER, [_job(tmp_path, k, f"seed={k}") for k in range(3)], 2, 0, 3)
    assert [o.seconds for o in outcomes] == [4.0, 8.0, 8.0]
    # job 0 ends at 4 s (mean 4): jobs 1 (run 4 s) and 2 (just started) are one round on 2 workers, 4 - 4 = 0 s;
    # job 1 ends at 8 s (mean 6): job 2 has run 4 s, 6 - 4 = 2 s
    assert capsys.readouterr().out.splitlines() == [
        "job 1 of 3 done in 4 s: seed=0: 1 item done; about 0 s left for the other 2",
        "job 2 of 3 done in 8 s: seed=1: 1 item done; about 2 s left for the other 1",
        "job 3 of 3 done in 8 s: seed=2: 1 item done"]


def test_ctrl_c_starts_no_waiting_job_and_interrupts_the_running_ones(pool, tmp_path, monkeypatch, capsys):
    killed = []
    monkeypatch.setattr(sweep.os, "kill", lambda pid, sig: killed.append((pid, sig)))

    class Proc:
        def __init__(self, pid, alive):
            self.pid, self.alive = pid, alive

        def is_alive(self):
            return self.alive

    real_init = FakePool.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.interrupt_at = 1
        self._processes = {1: Proc(11, True), 2: Proc(12, False)}

    monkeypatch.setattr(FakePool, "__init__", init)
    with pytest.raises(KeyboardInterrupt):
        sweep._pool(LAUNCHER, [_job(tmp_path, k) for k in range(3)], 2, 0, 3)
    p = FakePool.made[0]
    assert killed == [(11, signal.SIGINT)] and p.submitted == ["0"]
    assert p.shutdowns == [{"wait": True, "cancel_futures": True}]


# -- _run_jobs ------------------------------------------------------------------------------------------------------

@pytest.fixture
def pooled(monkeypatch):
    """``_pool`` replaced: it records its arguments and reports each job done."""
    calls = []

    def fake_pool(launcher, todo, workers, already, n):
        calls.append(([j.num for j in todo], workers, already, n))
        return [Outcome(j, 0, 1.0, {"done": 1}) for j in todo]

    monkeypatch.setattr(sweep, "_pool", fake_pool)
    return calls


def test_finished_jobs_are_reported_at_once_and_the_others_pooled(plans, pooled, tmp_path, capsys, cores):
    cores(4)
    done_job = _job(tmp_path, 0, "seed=0")
    todo = [_job(tmp_path, k, f"seed={k}", cfg=LIST) for k in (1, 2)]
    launcher = SimpleNamespace(params={"n_jobs": "auto"})
    outcomes, workers = sweep._run_jobs(launcher, [done_job, *todo], tmp_path / "multirun" / "sweep")
    assert workers == 2 and pooled == [([1, 2], 2, 1, 3)] and (tmp_path / "multirun" / "sweep").is_dir()
    assert [(o.job.num, o.code, o.seconds, o.already_done) for o in outcomes] == [(0, 0, 0.0, 2), (1, 0, 1.0, 0),
                                                                                  (2, 0, 1.0, 0)]
    assert capsys.readouterr().out.splitlines() == [
        "job 1 of 3 already done: seed=0: 2 items finished before, nothing to do",
        f"sweep: 2 jobs to run, 2 at a time on this machine; each job's output: {tmp_path / 'multirun' / 'sweep'}/<job>"
        + "/job.log"]


def test_a_sweep_of_finished_jobs_needs_no_worker(plans, pooled, tmp_path, capsys):
    outcomes, workers = sweep._run_jobs(SimpleNamespace(params={}), [_job(tmp_path, 0)], tmp_path / "sweep")
    assert workers == 0 and pooled == [] and len(outcomes) == 1 and not (tmp_path / "sweep").exists()


def test_the_workers_are_as_many_as_the_smallest_fit(pooled, tmp_path, capsys, cores):
    cores(8)
    gpu = RunConfig.from_mapping({"model": _model(1), "devices": "0,1,2"})
    jobs = [_job(tmp_path, 0, cfg=LIST), _job(tmp_path, 1, cfg=gpu), _job(tmp_path, 2, cfg=LIST),
            _job(tmp_path, 3, cfg=LIST)]
    monkeypatch_free = sweep._run_jobs(SimpleNamespace(params={}), jobs, tmp_path / "s")
    assert monkeypatch_free[1] == 3 and "sweep: 4 jobs to run, 3 at a time" in capsys.readouterr().out


def test_one_job_to_run_is_said_in_the_singular(pooled, tmp_path, capsys):
    (tmp_path / "s").mkdir()  # a sweep folder that exists already
    sweep._run_jobs(SimpleNamespace(params={"n_jobs": 1}), [_job(tmp_path, 0, cfg=LIST)], tmp_path / "s")
    assert "sweep: 1 job to run, 1 at a time on this machine" in capsys.readouterr().out


# -- _evaluate_runs -------------------------------------------------------------------------------------------------

class FakeRun:
    """:class:`RunDir` for :func:`_evaluate_runs`: a manifest that exists or not, and its finished rows."""

    state: ClassVar[dict[Path, tuple[bool, list]]] = {}

    def __init__(self, path):
        self.path = Path(path)
        exists, rows = FakeRun.state.get(self.path, (True, ["row"]))
        self.manifest = SimpleNamespace(exists=lambda: exists)
        self._rows = rows

    def done_rows(self):
        return self._rows

    def lock(self, name):
        import contextlib

        assert name == "eval"
        return contextlib.nullcontext()


@pytest.fixture
def evaluated(monkeypatch):
    calls = []
    verdicts: dict[Path, bool] = {}

    def evaluate(run_dir, cfg, table=True, timings=None, only=None):
        calls.append((run_dir, cfg.progress, table))
        timings.update(evaluation_s=1.23456, report_s=2.0)
        return verdicts.get(run_dir, True)

    FakeRun.state = {}
    monkeypatch.setattr(evaluation, "evaluate", evaluate)
    monkeypatch.setattr(outputs, "RunDir", FakeRun)
    return calls, verdicts


def _run_cfg(tmp_path, run="r", **changes):
    return RunConfig.from_mapping({"output_root": str(tmp_path), "run": run, **changes})


def test_each_run_of_the_sweep_is_evaluated_once_quietly(evaluated, tmp_path):
    calls, _ = evaluated
    jobs = [_job(tmp_path, 0, cfg=_run_cfg(tmp_path, "a")), _job(tmp_path, 1, cfg=_run_cfg(tmp_path, "a")),
            _job(tmp_path, 2, cfg=_run_cfg(tmp_path, "b"))]
    ok, record = sweep._evaluate_runs(jobs)
    root = tmp_path.resolve()
    assert ok is True and calls == [(root / "a", False, False), (root / "b", False, False)]
    assert record == [{"run": str(root / "a"), "evaluation_s": 1.235, "report_s": 2.0},
                      {"run": str(root / "b"), "evaluation_s": 1.235, "report_s": 2.0}]


@pytest.mark.parametrize("changes", [{"cmd": "verify"}, {"stage": "generate"}, {"dry_run": True},
                                     {"evaluate": {"enabled": False}}])
def test_a_job_that_does_not_evaluate_leaves_its_run_alone(evaluated, tmp_path, changes):
    calls, _ = evaluated
    assert sweep._evaluate_runs([_job(tmp_path, 0, cfg=_run_cfg(tmp_path, **changes))]) == (True, [])
    assert calls == []


def test_a_failed_run_makes_the_sweep_fail_and_the_others_are_still_evaluated(evaluated, tmp_path):
    calls, verdicts = evaluated
    verdicts[tmp_path.resolve() / "a"] = False
    jobs = [_job(tmp_path, 0, cfg=_run_cfg(tmp_path, "a")), _job(tmp_path, 1, cfg=_run_cfg(tmp_path, "b"))]
    ok, record = sweep._evaluate_runs(jobs)
    assert ok is False and len(calls) == 2 and len(record) == 2
    verdicts[tmp_path.resolve() / "a"], verdicts[tmp_path.resolve() / "b"] = True, False
    assert sweep._evaluate_runs(jobs)[0] is False


@pytest.mark.parametrize("state", [(False, ["row"]), (True, []), (False, [])])
def test_a_run_with_nothing_finished_is_not_evaluated(evaluated, tmp_path, caplog, state):
    calls, _ = evaluated
    FakeRun.state = {tmp_path.resolve() / "a": state}
    assert sweep._evaluate_runs([_job(tmp_path, 0, cfg=_run_cfg(tmp_path, "a"))]) == (True, [])
    assert calls == [] and "no finished video to evaluate" in caplog.text


# -- launch ---------------------------------------------------------------------------------------------------------

@pytest.fixture
def launched(monkeypatch, base_config, tmp_path, pooled):
    """``launch`` with Hydra's logging setup recorded and the pool replaced (``pooled``)."""
    seen: list = []
    monkeypatch.setattr(hydra.core.utils, "setup_globals", lambda: seen.append("globals"))
    monkeypatch.setattr(hydra.core.utils, "configure_log", lambda cfg, verbose: seen.append(("log", verbose)))
    monkeypatch.setattr(logs, "setup_logging", lambda verbosity=None: seen.append(("verbosity", verbosity)))
    return _launcher(base_config, tmp_path), seen


def test_a_sweep_that_succeeds_returns_each_jobs_return(launched, pooled, tmp_path, capsys):
    launcher, seen = launched
    rets = sweep.launch(launcher, [["run=a", "verbosity=warning"], ["run=b", "verbosity=info"]], 0)
    assert [(r.overrides, r.status.name) for r in rets] == [(["run=a", "verbosity=warning"], "COMPLETED"),
                                                            (["run=b", "verbosity=info"], "COMPLETED")]
    assert seen == ["globals", ("log", False), ("verbosity", "warning")] and pooled[0][0] == [0, 1]
    record = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert [j["num"] for j in record["jobs"]] == [0, 1] and record["runs"] == [] and record["workers"] >= 1
    assert 0 <= record["wall_s"] < 60
    summary = [x for x in capsys.readouterr().out.splitlines() if x.startswith("sweep finished in ")]
    assert len(summary) == 1 and summary[0].endswith(
        " s: 2 of 2 job(s) succeeded; items: 2 done, 0 already done, 0 failed")


def test_a_sweep_exits_with_its_worst_code(launched, monkeypatch, tmp_path, capsys):
    launcher, _ = launched

    def fake_pool(launcher, todo, workers, already, n):
        return [Outcome(j, code, 1.0) for j, code in zip(todo, (2, 1, 0))]

    monkeypatch.setattr(sweep, "_pool", fake_pool)
    with pytest.raises(CommandExit) as info:
        sweep.launch(launcher, [["run=a"], ["run=b"], ["run=c"]], 0)
    assert info.value.code == 2 and (tmp_path / "sweep" / "sweep.json").is_file()


def test_a_failed_evaluation_makes_a_successful_sweep_exit_1(launched, monkeypatch, tmp_path, capsys):
    launcher, _ = launched
    monkeypatch.setattr(sweep, "_evaluate_runs", lambda jobs: (False, []))
    with pytest.raises(CommandExit) as info:
        sweep.launch(launcher, [["run=a"]], 0)
    assert info.value.code == 1


def test_a_failed_evaluation_keeps_a_worse_code(launched, monkeypatch, tmp_path, capsys):
    launcher, _ = launched
    monkeypatch.setattr(sweep, "_evaluate_runs", lambda jobs: (False, []))
    monkeypatch.setattr(sweep, "_pool", lambda launcher, todo, w, a, n: [Outcome(j, 2, 1.0) for j in todo])
    with pytest.raises(CommandExit) as info:
        sweep.launch(launcher, [["run=a"]], 0)
    assert info.value.code == 2


def test_a_user_error_of_the_sweep_is_one_line(launched, monkeypatch, capsys):
    launcher, _ = launched

    def bad_pool(*args):
        raise UserError("hydra.launcher.n_jobs=0: use auto")

    monkeypatch.setattr(sweep, "_pool", bad_pool)
    with pytest.raises(SystemExit) as info:
        sweep.launch(launcher, [["run=a"]], 0)
    assert info.value.code == 2 and "error: hydra.launcher.n_jobs=0: use auto" in capsys.readouterr().err


def test_ctrl_c_during_the_sweep_is_exit_130(launched, monkeypatch, capsys):
    launcher, _ = launched

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "_pool", interrupted)
    with pytest.raises(SystemExit) as info:
        sweep.launch(launcher, [["run=a"]], 0)
    assert info.value.code == 130


def test_the_sweeps_multirun_yaml_is_scrubbed_before_any_job(launched, monkeypatch, tmp_path, capsys):
    launcher, _ = launched
    token = "hf_" + "S9multirunSecretValue0123456789ab"
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "multirun.yaml").write_text(f"token: {token}\n")
    sweep.launch(launcher, [["run=a"]], 0)
    assert token not in (tmp_path / "sweep" / "multirun.yaml").read_text()


def test_a_sweep_of_no_job_sets_up_no_logging(launched, tmp_path, capsys):
    launcher, seen = launched
    assert sweep.launch(launcher, [], 0) == [] and ("verbosity", "info") not in seen
