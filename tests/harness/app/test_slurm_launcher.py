"""The Slurm launcher's parts that need no cluster: the plain settings and their errors, the resources a job asks
for, reading sacct/squeue (with stand-in commands on PATH: no accounting, a job that vanished, accounting that lags),
the reasons in the summary, and a lock held by a Slurm job on another node. The real cluster: tests/engines/."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from harness.app import slurm
from harness.app.slurm import (JobState, StateReader, SweepJob, executor_parameters, expand_ids, explain, gres_for,
                               parse_sacct, parse_squeue, time_minutes)


@pytest.mark.parametrize("value, minutes", [(90, 90), ("90", 90), ("0:30", 1), ("1:30", 2), ("12:00:00", 720),
                                            ("1-00:00:00", 1440), ("2-3", 3060), ("1-2:30", 1590)])
def test_slurm_time_formats(value, minutes):
    assert time_minutes(value) == minutes


@pytest.mark.parametrize("value", ["1h", "", "0", "0:00", "-5", True, "1:2:3:4"])
def test_a_bad_time_names_the_setting_and_the_formats(value):
    with pytest.raises(slurm.SlurmSettingError, match=r"slurm\.time="):
        time_minutes(value)


def test_gres_follows_the_models_gpus():
    assert gres_for("auto", 8) == "gpu:8" and gres_for("auto", 1, "a100") == "gpu:a100:1"
    assert gres_for("auto", 0) is None and gres_for("auto", None) is None  # a CPU model asks for no GPU
    assert gres_for("gpu:h100:2", 8) == "gpu:h100:2"  # given explicitly: passed as is
    assert gres_for(None, 8) is None and gres_for("null", 8) is None and gres_for("none", 8) is None
    with pytest.raises(slurm.SlurmSettingError, match="gpus_per_job"):
        gres_for("auto", "many")


def test_executor_parameters_map_the_plain_settings_to_submitit():
    launcher = {"_target_": "x", "submitit_folder": "f", "timeout_min": 60, "time": "2:00:00", "cpus_per_task": 4,
                "mem_gb": 16, "partition": "gpu", "account": "proj", "qos": None, "gres": "auto", "gpu_type": "a100",
                "array_parallelism": 8, "max_num_timeout": 0, "poll_s": 2.0, "max_poll_s": 15.0, "nodes": 1,
                "gpus_per_node": None, "setup": None, "additional_parameters": {}}
    p = executor_parameters(launcher, {"gpus_per_job": 2})
    assert p["timeout_min"] == 120 and p["cpus_per_task"] == 4 and p["mem_gb"] == 16 and p["nodes"] == 1
    assert p["slurm_partition"] == "gpu" and p["slurm_account"] == "proj" and p["slurm_gres"] == "gpu:a100:2"
    assert p["slurm_array_parallelism"] == 8 and p["slurm_additional_parameters"] == {}
    assert not {"slurm_qos", "slurm_setup", "slurm_time", "slurm_gpu_type", "slurm_poll_s", "_target_",
                "submitit_folder", "slurm_max_num_timeout"} & set(p)
    cpu = executor_parameters({**launcher, "gpu_type": None}, {"gpus_per_job": 0})
    assert "slurm_gres" not in cpu
    for bad, field in (({"array_parallelism": 0}, "slurm.array_parallelism"), ({"mem_gb": 0}, "slurm.mem_gb")):
        with pytest.raises(slurm.SlurmSettingError, match=field):
            executor_parameters({**launcher, **bad}, {})


def test_job_ids_and_states_are_read_from_sacct_and_squeue():
    assert expand_ids("57_[2-4,7%2]") == ["57_2", "57_3", "57_4", "57_7"] and expand_ids("57_3") == ["57_3"]
    acct = parse_sacct("57_0|COMPLETED|0:0|00:00:04|00:10:00|None\n57_0.batch|COMPLETED|0:0|00:00:04||\n"
                       "57_1|CANCELLED by 0|0:15|00:00:02|00:10:00|None\n57_[2-3%1]|PENDING|0:0|00:00:00|00:10:00|"
                       "JobArrayTaskLimit\n")
    assert set(acct) == {"57_0", "57_1", "57_2", "57_3"}  # steps (57_0.batch) are not jobs
    assert acct["57_1"].word == "CANCELLED" and acct["57_1"].finished and not acct["57_2"].finished
    q = parse_squeue("57_4|RUNNING|0:07|10:00|None\n")
    assert q["57_4"].state == "RUNNING" and q["57_4"].source == "squeue"


def _fake_bin(tmp_path: Path, sacct: str, squeue: str) -> str:
    """A PATH whose sacct/squeue are shell stand-ins (their scripts given)."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for name, body in (("sacct", sacct), ("squeue", squeue)):
        p = d / name
        p.write_text("#!/bin/sh\n" + body + "\n")
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(d)


def test_without_accounting_a_vanished_job_is_unknown_at_once_not_waited_on(tmp_path, monkeypatch):
    # sacct fails as it does without slurmdbd; squeue no longer lists the cancelled job
    monkeypatch.setenv("PATH", _fake_bin(tmp_path, "echo 'sacct: error: Slurm accounting storage is disabled' >&2; "
                                                   "exit 1", "exit 0"))
    reader = StateReader(grace_s=0.0)
    st = reader.read(["12_0"])["12_0"]
    assert st.finished and st.word == "UNKNOWN"
    assert "accounting storage is disabled" in st.reason and "neither squeue nor sacct" in st.reason


def test_accounting_that_lags_the_controller_is_waited_for_briefly(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_bin(tmp_path, "exit 0", "echo '12_0|COMPLETED|0:03|10:00|None'"))
    reader = StateReader(grace_s=60.0)
    st = reader.read(["12_0"])["12_0"]
    assert st.word == "COMPLETING" and not st.finished  # squeue says done, sacct (working) has no record yet
    reader.grace_s = 0.0
    assert reader.read(["12_0"])["12_0"].state == "COMPLETED"  # after the grace period: squeue's word


def test_reasons_say_what_happened_and_what_to_do(tmp_path):
    err = tmp_path / "j.err"
    err.write_text("INFO something\nerror: model=x is not a model; use one of reference, ...\n")
    j = SweepJob(0, ["context=fov"], "7_0", stderr=str(err), stdout=str(tmp_path / "none.out"))
    j.state = JobState("TIMEOUT", "0:0", "00:01:20", "00:01:00")
    assert "time limit (00:01:00)" in explain(j) and "slurm.time" in explain(j)
    j.state = JobState("CANCELLED by 0", "0:15", "00:00:03")
    assert explain(j) == "cancelled (by 0) after 00:00:03"
    j.state = JobState("FAILED", "2:0", "00:00:01")
    assert "a user error" in explain(j) and "error: model=x is not a model" in explain(j)
    j.state = JobState("UNKNOWN", "", "", "", "no longer known to Slurm")
    assert "never started (no log)" in explain(j)
    j.state = JobState("COMPLETED", "0:0")
    assert explain(j) == ""


def test_a_lock_held_by_a_slurm_job_on_another_node_is_stale_once_the_job_is_over(tmp_path, monkeypatch):
    from harness import locks

    owner = locks.LockOwner("node-17", 4242, None, "t", 0.0, slurm_job="99_3")
    states = {"RUNNING": True, "COMPLETING": True, "": False}
    for state, alive in states.items():
        monkeypatch.setenv("PATH", _fake_bin(tmp_path, "exit 0", f"echo '{state}'" if state else "exit 0"))
        locks._SLURM_CACHE.clear()
        assert owner.alive() is alive, state
    monkeypatch.setenv("PATH", _fake_bin(tmp_path, "exit 0", "echo 'slurm_load_jobs error: Invalid job id "
                                                             "specified' >&2; exit 1"))
    locks._SLURM_CACHE.clear()
    assert owner.alive() is False  # the controller forgot it: over
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    locks._SLURM_CACHE.clear()
    assert owner.alive() is True  # squeue cannot tell: honour the lock
    assert locks.LockOwner("node-17", 4242, None, "t", 0.0).alive() is True  # no Slurm job: honoured as before
    me = locks.LockOwner(socket.gethostname(), os.getpid(), None, "t", 0.0, slurm_job="99_3")
    assert me.alive() is True  # this host: the pid decides


def test_inside_a_slurm_job_the_lock_names_it(monkeypatch):
    from harness import locks

    for k in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_ID"):
        monkeypatch.delenv(k, raising=False)
    assert locks.current_slurm_job() is None
    monkeypatch.setenv("SLURM_JOB_ID", "120")
    assert locks.current_slurm_job() == "120"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "118")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    assert locks.current_slurm_job() == "118_2" and locks.LockOwner.me().slurm_job == "118_2"


def test_the_launcher_config_composes_with_plain_settings():
    from tests.support import compose

    cfg = compose(["launcher=slurm", "slurm.partition=gpu", "slurm.account=proj", "slurm.array_parallelism=4",
                   "slurm.time=30", "model=lingbot_v2"])
    assert cfg["slurm"]["partition"] == "gpu" and cfg["slurm"]["gres"] == "auto"
    assert "model" in cfg and cfg["model"]["gpus_per_job"] == 8
