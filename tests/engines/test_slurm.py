"""The study through a real Slurm cluster (tests/engines/slurm_up.sh), end to end: ``python -m harness -m
launcher=slurm ...`` with the harness's own launcher config, on small runs of the built-in reference model.

A sweep lands every item once; a cancelled job and a job killed mid-item are completed by rerunning the same
command, with nothing lost and nothing done twice; a job over its time limit is reported with the reason; the
summary names each Slurm job id and its state, which ``sacct`` confirms; ``slurm.gres`` follows the model's
``gpus_per_job`` and sbatch's refusal is a clear error. Skipped, with the reason, where no cluster answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

#: what a user of this one-node, 2-CPU test cluster sets (the defaults ask for 8 CPUs and 64 GB)
CLUSTER = ["slurm.cpus_per_task=1", "slurm.mem_gb=1", "slurm.time=10", "hydra.launcher.max_poll_s=1"]
SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "progress=false", "evaluate=off"]


def sweep_args(*args: str) -> list[str]:
    return ["-m", "launcher=slurm", *CLUSTER, *SMALL, *args]


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def finish(p: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"the sweep did not finish within {timeout}s:\n{err[-3000:]}")
    return p.returncode, out, err


def summaries(run_dir: Path) -> list[dict]:
    """The sweep summaries of a run, oldest first."""
    return [json.loads(p.read_text()) for p in sorted((run_dir / "slurm").glob("*.json"))]


def wait_for(pred, timeout: float, what: str, poll: float = 0.2):
    end = time.time() + timeout
    while time.time() < end:
        got = pred()
        if got:
            return got
        time.sleep(poll)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def submitted_ids(run_dir: Path, n: int) -> list[str] | None:
    """The Slurm ids of a running sweep, from the summary written at submission."""
    try:
        s = summaries(run_dir)
    except (ValueError, FileNotFoundError):  # being rewritten
        return None
    if s and len(s[-1]["jobs"]) == n and all(j["slurm_id"] for j in s[-1]["jobs"]):
        return [j["slurm_id"] for j in s[-1]["jobs"]]
    return None


def sacct_states(ids: list[str]) -> dict[str, str]:
    """What accounting says, read independently of the harness."""
    arrays = ",".join(sorted({i.split("_")[0] for i in ids}))
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", arrays, "-o", "JobID,State"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line)


def metas(run_dir: Path) -> dict[str, dict]:
    return {str(p.parent.relative_to(run_dir)): json.loads(p.read_text())
            for p in sorted(run_dir.glob("*/*/seed-*/*/*/meta.json"))}


def manifest_keys(run_dir: Path) -> list[str]:
    return [json.loads(x)["dir"] for x in (run_dir / "manifest.jsonl").read_text().splitlines()]


def test_a_sweep_lands_every_item_once_and_names_its_jobs(tmp_path):
    args = sweep_args("context=fullkv,sliding", "seed=1,2", "cases.include=[environment_rocket,human_astronaut]",
                      "run=s")
    t0 = time.time()
    r = run_cli(args, tmp_path, timeout=600)
    print(f"Slurm sweep, 4 jobs x 2 items: {time.time() - t0:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    run_dir = tmp_path / "outputs" / "s"
    items = metas(run_dir)
    assert len(items) == 8 and all(m["status"] == "done" for m in items.values())
    keys = manifest_keys(run_dir)
    assert sorted(keys) == sorted(items) and len(set(keys)) == 8  # every item once in the manifest
    (summary,) = summaries(run_dir)
    jobs = summary["jobs"]
    assert summary["finished"] and len(jobs) == 4
    assert all(j["state"] == "COMPLETED" and j["exit_code"] == "0:0" and j["items"]["done"] == 2 for j in jobs)
    ids = [j["slurm_id"] for j in jobs]
    assert len(set(ids)) == 4 and all(i.split("_")[0] == ids[0].split("_")[0] for i in ids)  # one array
    assert sacct_states(ids) == {i: "COMPLETED" for i in ids}  # accounting agrees with the summary
    # each item was made by exactly one job, and meta.json says which; each job made the two items of its overrides
    by_job: dict[str, set] = {}
    for key, m in items.items():
        by_job.setdefault(m["owner"]["slurm_job"], set()).add((m["item"]["context"], m["item"]["seed"]))
    assert set(by_job) == set(ids) and all(len(v) == 1 for v in by_job.values())
    for j in jobs:
        ctx = next(o.split("=")[1] for o in j["shown"] if o.startswith("context="))
        seed = int(next(o.split("=")[1] for o in j["shown"] if o.startswith("seed=")))
        assert by_job[j["slurm_id"]] == {(ctx, seed)}
    # printed: one line per job with its id and state; the Markdown copy beside the JSON
    for i in ids:
        assert any(i in line and "COMPLETED" in line for line in r.stdout.splitlines()), r.stdout
    assert (run_dir / "slurm" / f"{summary['sweep']}.md").read_text().count("| COMPLETED |") == 4


def test_a_cancelled_job_is_reported_and_the_same_command_completes_only_what_is_missing(tmp_path):
    # one job at a time, so that the last one is still pending when it is cancelled
    args = sweep_args("context=fullkv,sliding,fov", "cases.include=[environment_rocket]", "model.num_frames=401",
                      "slurm.array_parallelism=1", "run=c")
    run_dir = tmp_path / "outputs" / "c"
    p = start(args, tmp_path)
    ids = wait_for(lambda: submitted_ids(run_dir, 3), 60, "the sweep's job ids")
    subprocess.run(["scancel", ids[2]], check=True, timeout=30)
    rc, out, err = finish(p)
    assert rc == 1, out + err[-3000:]
    jobs = summaries(run_dir)[-1]["jobs"]
    assert [j["state"] for j in jobs[:2]] == ["COMPLETED", "COMPLETED"]
    cancelled = jobs[2]
    # a pending array task cancelled leaves no record in Slurm 22.05 (UNKNOWN, never started); a running one is
    # "CANCELLED by <uid>"
    assert cancelled["state"].startswith("CANCELLED") or (
        cancelled["state"] == "UNKNOWN" and "never started" in cancelled["reason"]), cancelled
    assert "cancel" in cancelled["reason"] and ids[2] in out and "rerun the same command" in out
    before = metas(run_dir)
    done_before = {k for k, m in before.items() if m["status"] == "done"}
    assert {k.split("/")[1] for k in done_before} == {"fullkv", "sliding"}
    stamps = {k: (run_dir / k / "video.mp4").stat().st_mtime_ns for k in done_before}

    r = run_cli(args, tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    second = summaries(run_dir)[-1]
    assert [j["state"] for j in second["jobs"]] == ["COMPLETED"] * 3
    assert [j["items"].get("skipped", 0) for j in second["jobs"]] == [1, 1, 0]
    assert [j["items"].get("done", 0) for j in second["jobs"]] == [0, 0, 1]
    after = metas(run_dir)
    assert len(after) == 3 and all(m["status"] == "done" for m in after.values())
    assert {k: (run_dir / k / "video.mp4").stat().st_mtime_ns for k in done_before} == stamps  # not redone
    assert sorted(manifest_keys(run_dir)) == sorted(after)


def test_a_job_killed_mid_item_resumes_with_nothing_lost_and_nothing_twice(tmp_path):
    cases = "cases.include=[environment_rocket,human_astronaut,object_coffee]"
    args = sweep_args(cases, "model.num_frames=1601", "run=k")
    run_dir = tmp_path / "outputs" / "k"
    p = start(args, tmp_path)
    (job,) = wait_for(lambda: submitted_ids(run_dir, 1), 60, "the job id")

    def mid_item():
        m = metas(run_dir)
        return [k for k, v in m.items() if v["status"] == "done"] and [k for k, v in m.items() if v["status"] != "done"]

    wait_for(mid_item, 300, "the second item to be under way", poll=0.05)
    subprocess.run(["scancel", job], check=True, timeout=30)
    rc, out, err = finish(p)
    assert rc == 1
    (j,) = summaries(run_dir)[-1]["jobs"]
    assert j["state"].startswith("CANCELLED") and "cancelled" in j["reason"], j
    killed = metas(run_dir)
    done = {k for k, v in killed.items() if v["status"] == "done"}
    cut = [k for k, v in killed.items() if v["status"] != "done"]
    assert 1 <= len(done) < 3 and len(cut) == 1, killed  # really mid-run: one item cut short
    locks = list((run_dir / ".locks").glob("*.lock"))
    assert len(locks) == 1  # the cut item's lock, left by a dead process
    # as on a multi-node cluster: the dead job's lock names another node; Slurm says that job is over, so the rerun
    # takes the lock over instead of waiting for it
    lock = json.loads(locks[0].read_text())
    assert lock["slurm_job"] == job
    locks[0].write_text(json.dumps({**lock, "host": "another-node"}))
    stamps = {k: (run_dir / k / "video.mp4").stat().st_mtime_ns for k in done}

    r = run_cli(args, tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    (j2,) = summaries(run_dir)[-1]["jobs"]
    assert j2["state"] == "COMPLETED" and j2["items"] == {"done": 3 - len(done), "skipped": len(done),
                                                           "elsewhere": 0, "failed": 0}
    log_out = Path(j2["stdout"]).read_text()
    assert "took over stale lock" in log_out
    after = metas(run_dir)
    assert len(after) == 3 and all(v["status"] == "done" for v in after.values())
    assert {k: (run_dir / k / "video.mp4").stat().st_mtime_ns for k in done} == stamps
    assert sorted(manifest_keys(run_dir)) == sorted(after)
    assert not list(run_dir.rglob("*.partial.mp4")) and not list(run_dir.rglob(".*.tmp*"))
    assert not list((run_dir / ".locks").glob("*.lock"))
    # nothing lost: the resumed item is the video a plain local run makes of it
    key = cut[0]
    case = key.split("/")[-1]
    ref = run_cli([*SMALL, f"cases.include=[{case}]", "model.num_frames=1601", "run=ref"], tmp_path, timeout=300)
    assert ref.returncode == 0, ref.stderr[-2000:]
    ref_meta = json.loads((tmp_path / "outputs" / "ref" / key / "meta.json").read_text())
    assert after[key]["video"]["frames_sha256"] == ref_meta["video"]["frames_sha256"]
    assert after[key]["video"]["num_frames"] == 1601


def test_a_job_over_its_time_limit_is_reported_with_the_reason(tmp_path):
    # four items of ~30 s each on one CPU against a one-minute limit (Slurm enforces it within about 30 s after)
    args = sweep_args("cases.include=[environment_rocket,human_astronaut]", "trajectories=[lrlr,lrud]",
                      "model.num_frames=4001", "slurm.time=1", "run=t")
    r = run_cli(args, tmp_path, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    run_dir = tmp_path / "outputs" / "t"
    (j,) = summaries(run_dir)[-1]["jobs"]
    assert j["state"] == "TIMEOUT" and j["timelimit"] == "00:01:00", j
    assert "time limit (00:01:00)" in j["reason"] and "slurm.time" in j["reason"]
    assert sacct_states([j["slurm_id"]]) == {j["slurm_id"]: "TIMEOUT"}
    line = next(x for x in r.stdout.splitlines() if x.split()[1:2] == [j["slurm_id"]])  # the job's row
    assert "TIMEOUT" in line and "time limit" in line
    statuses = [m["status"] for m in metas(run_dir).values()]
    assert statuses.count("done") < 4 and "failed" not in statuses  # cut by the limit, no item blamed for it
    err = Path(j["stderr"]).read_text()
    assert "near its time limit" in err and "UncompletedJobError" not in err


def test_gres_follows_the_models_gpus_and_sbatch_refusals_name_the_setting(tmp_path):
    # lingbot_v2 needs 8 GPUs a job: slurm.gres=auto asks for gpu:8, which this GPU-less cluster refuses at once
    base = ["-m", "launcher=slurm", *CLUSTER, "model=lingbot_v2", "dry_run=true", "cases.include=[environment_rocket]",
            "progress=false", "evaluate=off", "run=g"]
    r = run_cli(base, tmp_path, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "sbatch refused the sweep" in r.stderr and "gres" in r.stderr.lower() and "slurm.gres" in r.stderr
    assert "Traceback" not in r.stderr
    script = next((tmp_path / "outputs" / "g").rglob("*.sh")).read_text()
    assert "#SBATCH --gres=gpu:8" in script
    # without the GPU request the same dry run goes through Slurm (a dry run needs no GPU)
    r = run_cli([*base, "slurm.gres=null"], tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert summaries(tmp_path / "outputs" / "g")[-1]["jobs"][0]["state"] == "COMPLETED"
    assert [m["status"] for m in metas(tmp_path / "outputs" / "g").values()] == ["compiled"]


def test_no_controller_is_a_clear_error(tmp_path):
    # sbatch is here but its controller is not (a config pointing at a port nobody listens on)
    conf = tmp_path / "slurm.conf"
    text = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
    conf.write_text(text + "\nSlurmctldPort=6999\nMessageTimeout=2\n")
    r = run_cli(sweep_args("context=fullkv,sliding", "cases.include=[environment_rocket]", "run=n"), tmp_path,
                timeout=120, env={"SLURM_CONF": str(conf)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "sbatch refused the sweep" in r.stderr and "Unable to contact slurm controller" in r.stderr
    assert "Traceback" not in r.stderr


def test_without_accounting_states_come_from_squeue_and_a_cancelled_job_does_not_hang(tmp_path):
    # the same cluster seen by a client whose config has no accounting: sacct fails, as without slurmdbd
    conf = tmp_path / "slurm.conf"
    text = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
    conf.write_text("\n".join(x for x in text.splitlines() if not x.startswith("AccountingStorage"))
                    + "\nAccountingStorageType=accounting_storage/none\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SLURM_CONF": str(conf)}
    assert subprocess.run(["sacct", "-n", "-X"], env=env, capture_output=True, timeout=30).returncode != 0
    args = sweep_args("context=fullkv,sliding", "cases.include=[environment_rocket]", "model.num_frames=401",
                      "slurm.array_parallelism=1", "run=na")
    run_dir = tmp_path / "outputs" / "na"
    p = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    ids = wait_for(lambda: submitted_ids(run_dir, 2), 60, "the sweep's job ids")
    subprocess.run(["scancel", ids[1]], check=True, timeout=30)
    t0 = time.time()
    rc, out, err = finish(p, timeout=300)
    print(f"without accounting: the sweep ended {time.time() - t0:.1f} s after the scancel")
    assert rc == 1, out + err[-3000:]
    assert "sacct failed" in err and "accounting storage is disabled" in err
    done, cancelled = summaries(run_dir)[-1]["jobs"]
    assert done["state"] == "COMPLETED" and done["source"] == "squeue" and done["items"]["done"] == 1
    assert cancelled["state"] in ("UNKNOWN", "CANCELLED"), cancelled  # squeue's word, or gone: never waited on
    assert time.time() - t0 < 120


def test_resources_no_node_has_are_refused_at_submission_with_the_settings_to_change(tmp_path):
    # the defaults (8 CPUs, 64 GB a job) on this 2-CPU node: sbatch refuses at once (EnforcePartLimits), no hang
    r = run_cli(["-m", "launcher=slurm", "hydra.launcher.max_poll_s=1", *SMALL, "context=fullkv,sliding",
                 "cases.include=[environment_rocket]", "run=big"], tmp_path, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "sbatch refused the sweep" in r.stderr and "slurm.mem_gb" in r.stderr and "Traceback" not in r.stderr
    assert not list((tmp_path / "outputs" / "big").glob("*/*/seed-*"))  # nothing ran
