"""A sweep on one machine (``launcher=local``, harness/app/sweep.py): its jobs run in parallel worker processes and
make the same bytes and metrics as a serial sweep; the console gets one line per job ("job k of N", an estimate)
and the verdict once; finished jobs are recognised without a worker; ``experiment=first_look`` without ``-m`` runs
its sweep; the benchmark's split reads the sweep's record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.app import sweep
from harness.app.argv import experiment_sweep
from harness.app.benchmarks.first_look import split
from harness.errors import ConfigError
from tests.support import run_cli

SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "cases.include=[environment_rocket]",
         "progress=false"]


# -- the parts, in process -----------------------------------------------------------------------------------------

def test_worker_count_takes_the_usable_cores_and_never_more_than_the_jobs(monkeypatch):
    monkeypatch.setattr(sweep.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert sweep.worker_count("auto", 10) == 3 and sweep.worker_count(None, 2) == 2
    assert sweep.worker_count(5, 4) == 4 and sweep.worker_count(1, 4) == 1
    assert sweep.worker_count("auto", 10, fits=2) == 2 and sweep.worker_count(4, 10, fits=2) == 4  # as asked
    for bad in (0, -1, "many", 2.5, True):
        with pytest.raises(ConfigError, match="hydra.launcher.n_jobs"):
            sweep.worker_count(bad, 3)


def test_gpu_jobs_fit_one_per_gpu_set_of_the_devices(monkeypatch):
    from harness.app.run_config import RunConfig
    from harness.config_groups import group_yaml

    def model(gpus: int) -> dict[str, object]:
        return {**group_yaml("model", "reference"), "gpus_per_job": gpus}

    monkeypatch.setattr(sweep.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    cpu = RunConfig.from_mapping({"model": model(0)})
    eight = RunConfig.from_mapping({"model": model(8), "devices": list(range(8))})
    one = RunConfig.from_mapping({"model": model(1), "devices": "0,1,2,3"})
    assert sweep.fit(cpu) == 16 and sweep.fit(eight) == 1 and sweep.fit(one) == 4
    assert sweep.fit(RunConfig.from_mapping({"model": model(8), "devices": [0, 1]})) == 1  # at least one
    assert sweep.fit(RunConfig.from_mapping({"model": model(8), "dry_run": True})) == 16  # no GPU used


def test_the_estimate_counts_the_rounds_left_and_the_time_the_running_jobs_have_had():
    assert sweep._estimate([], 3, 2, 0.0) is None and sweep._estimate([10.0], 0, 2, 0.0) is None
    # two jobs left on two workers, running for 4 s of a 10 s mean: one round, 6 s left
    assert sweep._estimate([10.0], 2, 2, 4.0) == pytest.approx(6.0)
    # five left on two workers: three rounds of the 20 s mean, less the 5 s the running ones have had
    assert sweep._estimate([10.0, 30.0], 5, 2, 5.0) == pytest.approx(55.0)
    assert sweep._estimate([10.0], 1, 1, 25.0) == 0.0  # running longer than the mean: never negative


def test_a_job_is_labelled_by_the_overrides_that_tell_it_from_the_others():
    ov = [["context=fov", "run=a"], ["context=sliding", "run=a"]]
    assert sweep._label(ov, ov) == ["context=fov", "context=sliding"]
    assert sweep._label([["run=a"]], [["run=a"]]) == ["run=a"] and sweep._label([[]], [[]]) == ["(defaults)"]
    # which overrides vary is read from the real values; what is shown is the redacted form
    pins = [["+model.env.PIN=1", "run=a"], ["+model.env.PIN=2", "run=a"]]
    shown = [["+model.env.PIN=<redacted>", "run=a"]] * 2
    assert sweep._label(pins, shown) == ["+model.env.PIN=<redacted>"] * 2


def _job(tmp_path: Path) -> sweep.Job:
    return sweep.Job(3, ["context=fov"], "context=fov", None, None, tmp_path / "3" / "job.log")  # type: ignore[arg-type]


def test_one_line_per_job_says_what_it_did_in_words(tmp_path):
    job = _job(tmp_path)
    assert sweep.Outcome(job, 0, 41.2, {"done": 5}).line(1, 2) == "job 1 of 2 done in 41 s: context=fov: 5 items done"
    assert sweep.Outcome(job, 0, 200.0, {"done": 1, "skipped": 2}).line(2, 2) == (
        "job 2 of 2 done in 3.3 min: context=fov: 1 item done, 2 already done")
    assert sweep.Outcome(job, 0, 0.0, already_done=1).line(1, 4) == (
        "job 1 of 4 already done: context=fov: 1 item finished before, nothing to do")
    failed = sweep.Outcome(job, 1, 9.0, {"done": 4, "failed": 1}, error="  FAILED: x: boom").line(3, 3)
    assert failed.startswith("job 3 of 3 FAILED in 9 s: context=fov: 4 items done, 1 failed -- ")
    assert "boom" in failed and str(job.log) in failed
    warned = sweep.Outcome(job, 0, 1.0, {"compiled": 1}, warnings=["WARNING a: one", "WARNING a: two"]).line(1, 1)
    assert warned.endswith("1 item compiled (dry run) -- WARNING a: one (+1 more in " + str(job.log) + ")")


def test_a_jobs_error_line_is_found_in_its_log(tmp_path):
    lines = ["run directory: x", "  FAILED: ref/fov/seed-1/lrlr/c: RuntimeError: boom", "error: later"]
    assert sweep._first_error(lines) == "error: later"
    assert sweep._first_error(lines[:2]) == "FAILED: ref/fov/seed-1/lrlr/c: RuntimeError: boom"
    assert sweep._first_error([]) == "" and sweep._log_lines(tmp_path / "absent.log") == []


@pytest.mark.parametrize("args, want", [
    (["experiment=first_look"], {"context": "fov,sliding"}),
    (["experiment=first_look", "dry_run=true"], {"context": "fov,sliding"}),
    (["-m", "experiment=first_look"], {}),            # a sweep already
    (["experiment=first_look", "context=fov"], {}),   # one job, as asked
    (["experiment=first_look", "cmd=verify"], {}),    # another command reads the run
    (["experiment=first_look", "--cfg", "job"], {}),
    (["context=fov"], {}),
])
def test_an_experiment_without_m_is_run_as_its_sweep(args, want):
    assert experiment_sweep(args) == want


def test_the_benchmark_split_sums_job_seconds_from_the_sweep_record():
    record = {"jobs": [{"generation_s": 30.0, "evaluation_s": 10.0, "generation_cpu_s": 40.0, "evaluation_cpu_s": 8.0,
                        "strips_cpu_s": 1.5},
                       {"generation_s": 20.0, "evaluation_s": 12.5, "generation_cpu_s": 24.0, "evaluation_cpu_s": 8.0,
                        "strips_cpu_s": 1.0},
                       {"already_done": 5}],
              "runs": [{"evaluation_s": 2.5, "report_s": 4.0, "cpu_s": 6.0}]}
    assert split(record) == {"generation_s": 50.0, "evaluation_s": 25.0, "report_s": 4.0, "generation_cpu_s": 64.0,
                             "evaluation_cpu_s": 16.0, "strips_cpu_s": 2.5, "ratio": 0.5, "ratio_cpu": 0.25}
    assert split({"jobs": [], "runs": []})["ratio"] == float("inf") == split({})["ratio_cpu"]


# -- end to end ----------------------------------------------------------------------------------------------------

def _item_files(run: Path) -> dict[str, dict]:
    """Per item: the sha256 of its video and camera and its controls' hashes (from meta.json), and every metric's
    status and value (metrics.json): what must not depend on how the sweep ran."""
    out = {}
    for meta_path in sorted(run.rglob("meta.json")):
        meta = json.loads(meta_path.read_text())
        metrics = json.loads((meta_path.parent / "metrics.json").read_text())["metrics"]
        out[str(meta_path.parent.relative_to(run))] = {
            "video": meta["video"]["sha256"], "camera": meta["camera"]["sha256"],
            "controls": meta["controls"]["sha256"], "fingerprint": meta["fingerprint"],
            "metrics": {k: (m["status"], m.get("value")) for k, m in metrics.items()}}
    return out


@pytest.mark.slow
def test_a_parallel_sweep_makes_the_bytes_and_metrics_of_a_serial_one(tmp_path):
    sweep_args = ["-m", "context=fullkv,sliding,fov", *SMALL]
    serial = run_cli([*sweep_args, "launcher=basic", "run=serial"], tmp_path, timeout=900)
    assert serial.returncode == 0, serial.stderr[-3000:]
    par = run_cli([*sweep_args, "run=par", "hydra.launcher.n_jobs=2"], tmp_path, timeout=900)
    assert par.returncode == 0, par.stderr[-3000:]
    a, b = _item_files(tmp_path / "outputs" / "serial"), _item_files(tmp_path / "outputs" / "par")
    assert len(a) == 3 and a == b
    # the jobs ran in worker processes (two at a time), not in the command's own process
    pids = {json.loads(p.read_text())["owner"]["pid"] for p in (tmp_path / "outputs" / "par").rglob("meta.json")}
    record = json.loads(next((tmp_path / "outputs" / "par").rglob("sweep.json")).read_text())
    assert record["workers"] == 2 and len(pids) == 2 and [j["code"] for j in record["jobs"]] == [0, 0, 0]
    # the console: one line per job, one summary, the verdict once; each job's own output in its log
    jobs = [x for x in par.stdout.splitlines() if x.startswith("job ")]
    assert [x.split(":")[0].split(" done")[0] for x in jobs] == ["job 1 of 3", "job 2 of 3", "job 3 of 3"]
    assert all("1 item done" in x for x in jobs) and "left for the other" in jobs[0]
    assert par.stdout.count("verdict:") == 1 and "run directory:" not in par.stdout
    assert "INFO hydra" not in par.stderr and "Launching" not in par.stderr
    assert all("run directory:" in (tmp_path / j["log"]).read_text() for j in record["jobs"])
    # a rerun: every job is recognised as done without a worker, and nothing is rewritten; a credential on its
    # command line reaches no file, though no job ran to scrub the sweep's multirun.yaml
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
    again = run_cli([*sweep_args, "run=par", f"+human_study={token}"], tmp_path, timeout=900)
    assert again.returncode == 0 and again.stdout.count(" already done: ") == 3 and "sweep: " not in again.stdout
    assert _item_files(tmp_path / "outputs" / "par") == b
    assert not [f for f in (tmp_path / "outputs").rglob("*") if f.is_file() and token.encode() in f.read_bytes()]


@pytest.mark.slow
def test_first_look_without_m_runs_its_sweep(tmp_path):
    r = run_cli(["experiment=first_look", "dry_run=true", *SMALL], tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "experiment sweeps context=fov,sliding: running it as a sweep (-m)" in r.stderr
    assert [x.split(" done")[0] for x in r.stdout.splitlines() if x.startswith("job ")] == ["job 1 of 2", "job 2 of 2"]
    contexts = {p.parts[-5] for p in (tmp_path / "outputs" / "first_look").rglob("meta.json")}
    assert contexts == {"fov", "sliding"}


@pytest.mark.slow
def test_ctrl_c_stops_the_sweep_keeps_what_is_finished_and_starts_no_waiting_job(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["-m", "context=fullkv,sliding,fov", "hydra.launcher.n_jobs=1", "run=c", "model.height=96",
            "model.width=160", "model.num_frames=401", "cases.include=[environment_rocket,object_coffee]",
            "progress=false"]
    # a shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT: the child gets the
    # terminal's default, as a user pressing Ctrl-C has it, however the tests were launched
    p = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    run = tmp_path / "outputs" / "c"
    deadline = time.time() + 300
    while time.time() < deadline and not list(run.rglob("meta.json")):  # the first job is making its first item
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)  # to the sweep's process alone: it interrupts its running job itself
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, (out, err)
    assert "interrupted: finished items are kept" in err and "Traceback" not in err, err
    started = {m.parts[-5] for m in run.rglob("meta.json")}
    assert started == {"fullkv"}  # the waiting jobs never started
    # the same command resumes: what the interrupted job left half-written is swept, every item ends done
    again = run_cli(args, tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    metas = [json.loads(m.read_text()) for m in run.rglob("meta.json")]
    assert len(metas) == 6 and {m["status"] for m in metas} == {"done"} and not list(run.rglob("*.partial.mp4"))
