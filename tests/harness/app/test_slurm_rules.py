"""The Slurm launcher's rules, each at the input that sits on it: time limits and their rounding, the integer
settings and their bounds, what submitit is handed (and what never reaches sbatch), the commands that ask the
cluster (and their 30 s bound), how sacct / squeue answers are merged over time, the reasons and tables of the
summary, a whole sweep through ``launch`` with a stand-in submitit, and the time-limit signal inside a job.

No cluster is needed: sacct / squeue are shell stand-ins on PATH, submitit's executor a recording stand-in
(the real cluster: tests/engines/test_slurm.py)."""

from __future__ import annotations

import json
import logging
import pickle
import signal
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from harness.app import slurm
from harness.app.slurm import (
    TERMINAL,
    JobState,
    SlurmSettingError,
    StateReader,
    Summary,
    SweepJob,
    executor_parameters,
    expand_ids,
    explain,
    gres_for,
    item_counts,
    last_error,
    parse_sacct,
    parse_squeue,
    summary_md,
    summary_table,
    time_minutes,
    varying,
)
from harness.errors import CommandExit

# -- time limits -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, minutes", [
    ("1", 1), (61, 61), (" 90 ", 90),               # minutes
    ("0:1", 1), ("0:59", 1), ("1:00", 1), ("1:01", 2), ("3:30", 4), ("2:0", 2),  # M:S, rounded up
    ("0:00:01", 1), ("0:01:00", 1), ("0:01:01", 2), ("1:00:00", 60), ("2:3:4", 124),  # H:M:S
    ("1-0", 1440), ("0-1", 60), ("1-0:1", 1441), ("0-0:1", 1), ("1-0:0:1", 1441), ("0-0:0:30", 1),  # D-...
    ("2-1:2:3", 2943),
])
def test_every_slurm_time_format_in_minutes_rounded_up(value, minutes):
    assert time_minutes(value) == minutes


@pytest.mark.parametrize("value", ["0", "0:0", "0:00:00", "0-0", "0-0:0:0"])
def test_a_zero_time_limit_is_refused_as_under_a_minute(value):
    with pytest.raises(SlurmSettingError, match="at least one minute"):
        time_minutes(value)


def test_a_time_error_names_the_field_it_was_given():
    with pytest.raises(SlurmSettingError, match=r"^hydra\.launcher\.time='soon': give a Slurm time limit"):
        time_minutes("soon", "hydra.launcher.time")
    with pytest.raises(SlurmSettingError, match=r"^slurm\.time=False"):
        time_minutes(False)


# -- gres ----------------------------------------------------------------------------------------------------------------


def test_gres_words_and_counts():
    assert gres_for("", 4) is None and gres_for("NONE", 4) is None and gres_for("Null", 4) is None
    assert gres_for("Auto", 4) == "Auto"  # only the lower-case word is ours; anything else goes to Slurm as given
    assert gres_for("auto", "2") == "gpu:2" and gres_for("auto", 1) == "gpu:1"
    assert gres_for("auto", -1) is None and gres_for("auto", 2, "") == "gpu:2"
    assert gres_for("auto", 3, "h100") == "gpu:h100:3"
    with pytest.raises(SlurmSettingError, match=r"^model\.gpus_per_job=\[1\]: expected a GPU count"):
        gres_for("auto", [1])


# -- what submitit gets --------------------------------------------------------------------------------------------------

BASE = {"time": "10", "array_parallelism": 2, "gres": None, "cpus_per_task": 4, "mem_gb": 8}


def test_integer_settings_accept_whole_numbers_only_and_at_least_one():
    assert executor_parameters({**BASE, "array_parallelism": " 8 "}, {})["slurm_array_parallelism"] == " 8 "
    for k in ("array_parallelism", "cpus_per_task", "mem_gb"):
        assert executor_parameters({**BASE, k: 1}, {})  # 1 is the least a setting may be
        assert executor_parameters({**BASE, k: "1"}, {})
        with pytest.raises(SlurmSettingError, match=rf"^slurm\.{k}=0: must be >= 1"):
            executor_parameters({**BASE, k: 0}, {})
        with pytest.raises(SlurmSettingError, match=rf"^slurm\.{k}='-1': must be a whole number \(e\.g\. "
                                                    rf"slurm\.{k}=8\)"):
            executor_parameters({**BASE, k: "-1"}, {})
        with pytest.raises(SlurmSettingError, match=rf"^slurm\.{k}=2\.0: must be a whole number"):
            executor_parameters({**BASE, k: 2.0}, {})
    with pytest.raises(SlurmSettingError, match=r"^slurm\.array_parallelism=None: must be >= 1"):
        executor_parameters({**BASE, "array_parallelism": None}, {})


def test_null_resources_are_left_to_the_cluster():
    p = executor_parameters({**BASE, "cpus_per_task": None, "mem_gb": None, "time": None, "partition": None,
                             "name": None}, None)  # type: ignore[arg-type]
    # submitit's own (generic) keys are passed even when null; the sbatch ones are left out
    assert p == {"cpus_per_task": None, "mem_gb": None, "name": None, "slurm_array_parallelism": 2}
    assert "timeout_min" not in executor_parameters({**BASE, "time": None}, {})


def test_submitit_keys_are_generic_or_slurm_prefixed():
    generic = {"timeout_min": 5, "gpus_per_node": 1, "tasks_per_node": 1, "nodes": 2, "name": "n",
               "stderr_to_stdout": True}
    p = executor_parameters({**BASE, **generic, "time": None, "constraint": "a100", "exclude": "n1"}, {})
    assert p == {**generic, "cpus_per_task": 4, "mem_gb": 8, "slurm_array_parallelism": 2,
                 "slurm_constraint": "a100", "slurm_exclude": "n1"}
    # the launcher's own keys never reach sbatch
    ours = {"_target_": "x", "submitit_folder": "f", "max_num_timeout": 0, "gpu_type": "a100", "poll_s": 1,
            "max_poll_s": 2}
    assert set(executor_parameters({**BASE, **ours}, {})) == {"timeout_min", "cpus_per_task", "mem_gb",
                                                                "slurm_array_parallelism"}
    assert executor_parameters({**BASE, "time": "1:00:00"}, {})["timeout_min"] == 60  # slurm.time wins


def test_the_launchers_reading_refuses_what_slurm_cannot_take():
    executor_parameters(BASE, {})
    assert executor_parameters({**BASE, "gres": "auto"}, {"gpus_per_job": 2})["slurm_gres"] == "gpu:2"
    with pytest.raises(SlurmSettingError, match=r"slurm\.mem_gb="):
        executor_parameters({**BASE, "mem_gb": "lots"}, {})
    with pytest.raises(SlurmSettingError, match="gpus_per_job"):
        executor_parameters({**BASE, "gres": "auto"}, {"gpus_per_job": "x"})


# -- job ids and states --------------------------------------------------------------------------------------------------


def test_job_state_words():
    assert JobState("").word == "UNKNOWN" and JobState("CANCELLED+").word == "CANCELLED"
    assert JobState("CANCELLED by 1000").word == "CANCELLED"
    for word in TERMINAL:
        assert JobState(word).finished, word
    for word in ("PENDING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED"):
        assert not JobState(word).finished, word
    assert JobState().state == "PENDING" and not JobState().finished


def test_array_ids_expand():
    assert expand_ids("57_[5]") == ["57_5"] and expand_ids("57_[0-1,3]") == ["57_0", "57_1", "57_3"]
    assert expand_ids("57_[2-2%4]") == ["57_2"] and expand_ids("57") == ["57"] and expand_ids("x_[1-2]") == ["x_[1-2]"]


def test_sacct_and_squeue_lines_map_to_fields():
    acct = parse_sacct("7_1|FAILED|2:0|00:01:02|00:10:00|NonZeroExitCode\n|RUNNING|0:0|a|b|c\n7_2|RUNNING|0:0|x|y\n")
    assert acct == {"7_1": JobState("FAILED", "2:0", "00:01:02", "00:10:00", "NonZeroExitCode", "sacct")}
    q = parse_squeue("  7_3|RUNNING|1:02|10:00|None  \n|PENDING|0:00|10:00|None\n7_4|RUNNING|0:01|10:00\n")
    assert q == {"7_3": JobState("RUNNING", "", "1:02", "10:00", "None", "squeue")}


# -- asking the cluster --------------------------------------------------------------------------------------------------


def _bin(tmp_path: Path, **scripts: str) -> str:
    """A PATH holding only shell stand-ins (name -> script body); every call appends its arguments to calls.txt."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for name, body in scripts.items():
        p = d / name
        p.write_text(f"#!/bin/sh\necho \"{name} $*\" >> {tmp_path / 'calls.txt'}\n{body}\n")
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(d)


def test_one_sacct_and_one_squeue_call_per_poll_for_all_arrays(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _bin(tmp_path, sacct="exit 0", squeue="exit 0"))
    StateReader(grace_s=60).read(["12_0", "12_1", "9_0"])
    assert (tmp_path / "calls.txt").read_text().splitlines() == [
        "sacct -X -n -P -j 12,9 -o JobID,State,ExitCode,Elapsed,Timelimit,Reason",
        "squeue -h -r -t all -j 12,9 -o %i|%T|%M|%l|%r"]


def test_every_query_of_the_cluster_is_bounded_by_30_seconds(monkeypatch):
    seen = []

    def fake_run(cmd, **kw):
        seen.append((cmd[0], kw))
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(subprocess, "run", fake_run)
    reader = StateReader(grace_s=0.0)
    st = reader.read(["5_0"])["5_0"]
    assert [c for c, _ in seen] == ["sacct", "squeue"]
    assert all(kw["timeout"] == 30 and kw["capture_output"] and kw["text"] for _, kw in seen)
    assert reader.sacct_error.startswith("TimeoutExpired: ") and "30 seconds" in reader.sacct_error
    assert st.word == "UNKNOWN" and "squeue: TimeoutExpired" in st.reason and "sacct: TimeoutExpired" in st.reason


def test_a_missing_sacct_is_read_as_no_accounting(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _bin(tmp_path, squeue="echo '3_0|RUNNING|0:05|10:00|None'"))
    reader = StateReader(grace_s=0.0)
    st = reader.read(["3_0"])["3_0"]
    assert st == JobState("RUNNING", "", "0:05", "10:00", "None", "squeue")
    assert reader.sacct_error.startswith("FileNotFoundError: ")


class _Clock:
    """A stand-in for the launcher's ``time`` module: monotonic() returns ``now``; sleep() advances it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


_CAT = 'while IFS= read -r line; do echo "$line"; done'  # shell builtins only: PATH holds the stand-ins alone


def _answers(tmp_path: Path, monkeypatch, sacct: str = "", squeue: str = "", sacct_rc: int = 0,
             squeue_rc: int = 0) -> None:
    """sacct / squeue stand-ins printing the contents of files the test rewrites between polls."""
    (tmp_path / "sacct.out").write_text(sacct)
    (tmp_path / "squeue.out").write_text(squeue)
    monkeypatch.setenv("PATH", _bin(
        tmp_path, sacct=f"{_CAT} < {tmp_path / 'sacct.out'}; echo 'sacct: no db' >&2; exit {sacct_rc}",
        squeue=f"{_CAT} < {tmp_path / 'squeue.out'}; echo 'squeue: down' >&2; exit {squeue_rc}"))


def test_the_grace_period_is_strict_and_counted_from_the_first_miss(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(slurm, "time", clock)
    _answers(tmp_path, monkeypatch)
    reader = StateReader(grace_s=10.0)
    assert reader.read(["4_0"])["4_0"] == JobState("PENDING", "", "", "", "not listed yet", "none")
    clock.now += 9.5
    assert reader.read(["4_0"])["4_0"].word == "PENDING"
    clock.now += 0.5  # exactly grace_s after the first miss: over
    st = reader.read(["4_0"])["4_0"]
    assert st.word == "UNKNOWN" and st.finished and st.source == "none"
    assert st.reason == "no longer known to Slurm (in neither squeue nor sacct)"  # both commands worked: no detail


def test_a_job_listed_again_starts_a_new_grace_period(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(slurm, "time", clock)
    _answers(tmp_path, monkeypatch)
    reader = StateReader(grace_s=10.0)
    reader.read(["4_0"])
    clock.now += 6
    (tmp_path / "squeue.out").write_text("4_0|PENDING|0:00|10:00|Priority\n")
    assert reader.read(["4_0"])["4_0"].reason == "Priority"
    (tmp_path / "squeue.out").write_text("")
    clock.now += 6  # 12 s after the first miss, 6 s after it was seen: still within grace
    assert reader.read(["4_0"])["4_0"].reason == "not listed yet"


def test_accounting_lag_is_waited_for_only_while_accounting_works(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(slurm, "time", clock)
    _answers(tmp_path, monkeypatch, squeue="4_0|COMPLETED|0:09|10:00|None\n")
    reader = StateReader(grace_s=10.0)
    st = reader.read(["4_0"])["4_0"]
    assert st == JobState("COMPLETING", "", "0:09", "10:00", "waiting for accounting", "squeue")
    clock.now += 10
    assert reader.read(["4_0"])["4_0"] == JobState("COMPLETED", "", "0:09", "10:00", "None", "squeue")
    _answers(tmp_path, monkeypatch, squeue="5_0|COMPLETED|0:09|10:00|None\n", sacct_rc=1)
    assert reader.read(["5_0"])["5_0"].state == "COMPLETED"  # no accounting: nothing to wait for


def test_sacct_and_squeue_merged(tmp_path, monkeypatch):
    _answers(tmp_path, monkeypatch,
             sacct="1_0|COMPLETED|0:0|00:00:09|00:10:00|None\n1_1|RUNNING|0:0|00:00:09|00:10:00|None\n"
                   "1_2|PENDING|0:0|00:00:00|00:10:00|Priority\n",
             squeue="1_0|RUNNING|0:10|10:00|None\n1_1|RUNNING|0:11|10:00|None\n")
    st = StateReader(grace_s=60).read(["1_0", "1_1", "1_2"])
    assert st["1_0"].source == "sacct" and st["1_0"].state == "COMPLETED"  # sacct's terminal state wins
    assert st["1_1"].source == "squeue" and st["1_1"].elapsed == "0:11"  # while running, squeue is fresher
    assert st["1_2"].source == "sacct" and st["1_2"].reason == "Priority"  # squeue no longer lists it


def test_a_failing_sacct_is_said_once_and_forgotten_when_it_works(tmp_path, monkeypatch, caplog):
    _answers(tmp_path, monkeypatch, sacct_rc=3, squeue_rc=1)
    reader = StateReader(grace_s=0.0)
    with caplog.at_level(logging.WARNING, logger="harness.app.slurm"):
        st = reader.read(["2_0"])["2_0"]
        reader.read(["2_0"])
    assert sum("sacct failed (sacct: no db)" in r.getMessage() for r in caplog.records) == 1
    assert reader.sacct_error == "sacct: no db"
    assert st.reason == ("no longer known to Slurm (in neither squeue nor sacct); sacct: sacct: no db; "
                         "squeue: squeue: down")
    _answers(tmp_path, monkeypatch)
    reader.read(["2_0"])
    assert reader.sacct_error is None


def test_a_silent_failing_sacct_is_named_by_its_exit_code(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PATH", _bin(tmp_path, sacct="exit 4", squeue="exit 0"))
    reader = StateReader(grace_s=0.0)
    with caplog.at_level(logging.WARNING, logger="harness.app.slurm"):
        st = reader.read(["2_0"])["2_0"]
    assert reader.sacct_error == "sacct exit 4" and "sacct failed (4)" in caplog.text
    assert st.reason.endswith("; sacct: sacct exit 4")


# -- the summary ---------------------------------------------------------------------------------------------------------


def test_item_counts_take_the_last_table_a_job_printed(tmp_path):
    log_ = tmp_path / "j.out"
    log_.write_text("  done   3\n  skipped (already done)  2\nfailed 9\n  done elsewhere 4 \n  done 5\n"
                    "  failed   1\n")
    assert item_counts(str(log_)) == {"done": 5, "skipped": 2, "elsewhere": 4, "failed": 1}
    assert item_counts(str(tmp_path / "missing.out")) == {}
    log_.write_text("nothing\n")
    assert item_counts(str(log_)) == {}


def test_last_error_prefers_the_last_error_line(tmp_path):
    err = tmp_path / "j.err"
    err.write_text("error: first\nstep FAILED here\n\n  trailing  \n")
    assert last_error(str(err)) == "step FAILED here"
    err.write_text("error: first\nerror: second\nlast\n")
    assert last_error(str(err)) == "error: second"
    err.write_text("one\n  two  \n\n")
    assert last_error(str(err)) == "two"
    err.write_text("error: " + "x" * 400)
    assert last_error(str(err)) == ("error: " + "x" * 400)[:300]
    err.write_text("")
    assert last_error(str(err)) == ""
    assert last_error(str(tmp_path / "missing.err")) == ""


def _job(tmp_path: Path, state: JobState, stdout: str = "", stderr: str = "") -> SweepJob:
    j = SweepJob(3, ["context=fov"], "8_3", stdout=stdout, stderr=stderr or str(tmp_path / "none.err"))
    j.state = state
    return j


def test_explain_every_ending(tmp_path):
    assert explain(_job(tmp_path, JobState("TIMEOUT", "0:0", "", ""))) == (
        "hit its time limit (?) after ?: items it finished are kept, the one in progress is redone by the next run "
        "(raise slurm.time if one item needs longer)")
    for elapsed, tail in (("", " before it started"), ("00:00:00", " before it started"),
                          ("0:00", " before it started"), ("00:00:01", "")):
        assert explain(_job(tmp_path, JobState("CANCELLED", "0:0", elapsed))) == (
            f"cancelled (scancel) after {elapsed or '0'}{tail}")
    assert explain(_job(tmp_path, JobState("OUT_OF_MEMORY"))) == "ran out of memory: raise slurm.mem_gb"
    assert explain(_job(tmp_path, JobState("NODE_FAIL"))) == "NODE_FAIL: the node failed; rerun the same command"
    assert explain(_job(tmp_path, JobState("BOOT_FAIL"))) == "BOOT_FAIL: the node failed; rerun the same command"
    assert explain(_job(tmp_path, JobState("PREEMPTED"))) == ("preempted by a higher-priority job; rerun the same "
                                                             "command")
    out = tmp_path / "j.out"
    out.write_text("started\n")
    assert explain(_job(tmp_path, JobState("UNKNOWN"), stdout=str(out))) == ("state unknown; it had started (see "
                                                                            "its log)")
    assert explain(_job(tmp_path, JobState("UNKNOWN", reason="gone"), stdout=str(tmp_path / "no.out"))).startswith(
        "gone; it never started (no log)")
    assert explain(_job(tmp_path, JobState("UNKNOWN", reason="gone"))).startswith("gone; it never started")
    err = tmp_path / "j.err"
    err.write_text("error: bad input\n")
    assert explain(_job(tmp_path, JobState("FAILED", "1:0"), stderr=str(err))) == (
        "exit 1:0; an item failed or the harness hit a bug; error: bad input")
    assert explain(_job(tmp_path, JobState("FAILED", "9:0"), stderr=str(err))) == "exit 9:0; error: bad input"
    assert explain(_job(tmp_path, JobState("FAILED", ""), stderr=str(err))) == "error: bad input"
    assert explain(_job(tmp_path, JobState("COMPLETED+", "0:0"))) == ""


def test_varying_keeps_what_the_sweep_sweeps():
    jobs = [SweepJob(0, ["run=a", "context=fov", "seed=1"]), SweepJob(1, ["run=a", "context=full", "seed=1"])]
    varying(jobs)
    assert [j.shown for j in jobs] == [["context=fov"], ["context=full"]]
    one = [SweepJob(0, ["run=a", "context=fov"])]
    varying(one)
    assert one[0].shown == ["run=a", "context=fov"]


def _finished_jobs() -> list[SweepJob]:
    a = SweepJob(0, ["context=fov"], "8_0", state=JobState("COMPLETED", "0:0", "00:01:00", "00:10:00", "", "sacct"),
                 items={"done": 2, "skipped": 1}, shown=["context=fov"])
    b = SweepJob(1, ["context=full"], "9_1", state=JobState("FAILED", "1:0", "00:00:05"),
                 reason="exit 1:0", shown=["context=full"])
    return [a, b]


def test_summary_tables_exactly():
    jobs = _finished_jobs()
    assert summary_md(jobs, "# H") == (
        "# H\n\n| job | Slurm id | state | exit | elapsed | items done / skipped / failed | overrides | reason |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
        "| 0 | 8_0 | COMPLETED | 0:0 | 00:01:00 | 2 / 1 / 0 | context=fov |  |\n"
        "| 1 | 9_1 | FAILED | 1:0 | 00:00:05 |  | context=full | exit 1:0 |\n")
    jobs[1].state = JobState("PENDING")
    assert summary_table(jobs).splitlines() == [
        "job  slurm id  state      exit  elapsed   items d/s/f  overrides / reason",
        "0    8_0       COMPLETED  0:0   00:01:00  2/1/0        context=fov",
        "1    9_1       PENDING    -     -         -            context=full  -- exit 1:0"]


def test_summary_header_and_files(tmp_path):
    jobs = _finished_jobs()
    s = Summary(tmp_path, "sw1", "python -m harness -m launcher=slurm")
    assert s.header(jobs, done=False) == "# Slurm sweep sw1 (array 8, 9): running: 1/2 job(s) completed"
    assert s.header(jobs, done=True) == ("# Slurm sweep sw1 (array 8, 9): finished: 1/2 job(s) completed; rerun the "
                                         "same command to do only the missing items")
    jobs[1].state = JobState("COMPLETED")
    jobs[1].slurm_id = "8_1"
    assert s.header(jobs, done=True) == "# Slurm sweep sw1 (array 8): finished: 2/2 job(s) completed"
    s.write(jobs, done=True)
    data = json.loads((tmp_path / "slurm" / "sw1.json").read_text())
    assert data["sweep"] == "sw1" and data["finished"] is True and data["command"].endswith("launcher=slurm")
    row = data["jobs"][0]
    assert row["state"] == "COMPLETED" and row["exit_code"] == "0:0" and row["elapsed"] == "00:01:00"
    assert row["timelimit"] == "00:10:00" and row["source"] == "sacct" and row["items"] == {"done": 2, "skipped": 1}
    assert (tmp_path / "slurm" / "sw1.md").read_text().startswith("# Slurm sweep sw1 (array 8): finished: 2/2")


# -- a whole sweep through launch(), with a stand-in submitit -------------------------------------------------------


class _Handle:
    def __init__(self, folder: Path, job_id: str) -> None:
        self.job_id = job_id
        self.paths = SimpleNamespace(stdout=folder / f"{job_id}.out", stderr=folder / f"{job_id}.err",
                                     result_pickle=folder / f"{job_id}_result.pkl",
                                     submission_file=folder / f"{job_id}.sh")


class _Executor:
    """Records what the launcher hands submitit; ``map_array`` numbers arrays 100, 101, ... (or raises ``refuse``)."""

    made: ClassVar[list[_Executor]] = []
    refuse: ClassVar[list[str]] = []

    def __init__(self, cluster: str, folder: str, slurm_max_num_timeout: int) -> None:
        self.cluster, self.folder, self.max_num_timeout = cluster, Path(folder), slurm_max_num_timeout
        self.params: dict[str, Any] = {}
        self.args: tuple = ()
        _Executor.made.append(self)

    def update_parameters(self, **kw: Any) -> None:
        self.params.update(kw)

    def map_array(self, fn: Any, *args: Any) -> list[_Handle]:
        if len(_Executor.made) - 1 < len(_Executor.refuse) and _Executor.refuse[len(_Executor.made) - 1]:
            raise RuntimeError(_Executor.refuse[len(_Executor.made) - 1])
        self.args = args
        array = 100 + len(_Executor.made) - 1
        return [_Handle(self.folder, f"{array}_{i}") for i in range(len(args[0]))]


def _launcher(tmp_path: Path, models: dict[str, int], lcfg: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None) -> SimpleNamespace:
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "multirun" / "sweep7")}},
                            "output_root": str(tmp_path / "outputs"), "run": "r1"})
    launcher_cfg = {"submitit_folder": str(tmp_path / "subm"), "time": "0:30", "array_parallelism": 4,
                    "gres": "auto", "cpus_per_task": 2, "mem_gb": 4, "partition": "${part}", "max_num_timeout": 0,
                    **(lcfg or {})}
    loads: list[list[str]] = []

    def load_sweep_config(_cfg: Any, overrides: list[str]) -> Any:
        loads.append(overrides)
        model = next((o.split("=", 1)[1] for o in overrides if o.startswith("model=")), "m0")
        return OmegaConf.create({"hydra": {"launcher": launcher_cfg}, "model": {"gpus_per_job": "${ngpu}"},
                                 "ngpu": models[model], "part": "gpu"})  # interpolations, resolved for submitit

    return SimpleNamespace(config=cfg, params={"poll_s": 0.5, "max_poll_s": 1.0, **(params or {})},
                           hydra_context=SimpleNamespace(config_loader=SimpleNamespace(
                               load_sweep_config=load_sweep_config)), loads=loads)


@pytest.fixture
def stand_in_submitit(monkeypatch):
    import submitit

    _Executor.made, _Executor.refuse = [], []
    monkeypatch.setattr(submitit, "AutoExecutor", _Executor)
    clock = _Clock()
    monkeypatch.setattr(slurm, "time", clock)
    return clock


def _sacct_says(tmp_path: Path, monkeypatch, lines: str) -> None:
    """sacct answers ``lines``; its first call also copies the sweep's summary as it stands (``first.json``)."""
    (tmp_path / "sacct.out").write_text(lines)
    (tmp_path / "squeue.out").write_text("")
    summary, first = tmp_path / "outputs" / "r1" / "slurm" / "sweep7.json", tmp_path / "first.json"
    monkeypatch.setenv("PATH", _bin(
        tmp_path, sacct=f"[ -e {first} ] || {_CAT} < {summary} > {first}; {_CAT} < {tmp_path / 'sacct.out'}",
        squeue=f"{_CAT} < {tmp_path / 'squeue.out'}"))


def test_a_sweep_submits_one_array_per_resource_set_and_waits(tmp_path, monkeypatch, stand_in_submitit, capsys):
    clock = stand_in_submitit
    launcher = _launcher(tmp_path, {"a": 2, "b": 0})
    overrides = [["model=a", "context=fov"], ["model=b", "context=fov"], ["model=a", "context=full"]]
    # first poll: all running; the second: done (the sleeps between polls grow 1.5 times up to max_poll_s)
    _sacct_says(tmp_path, monkeypatch, "100_0|RUNNING|0:0|00:00:01|00:01:00|None\n"
                                       "100_1|RUNNING|0:0|00:00:01|00:01:00|None\n"
                                       "101_0|RUNNING|0:0|00:00:01|00:01:00|None\n")
    done = ("100_0|COMPLETED|0:0|00:00:09|00:01:00|None\n100_1|COMPLETED|0:0|00:00:09|00:01:00|None\n"
            "101_0|COMPLETED|0:0|00:00:09|00:01:00|None\n")
    polls = {"n": 0}
    real_sleep = clock.sleep

    def sleep(s: float) -> None:
        real_sleep(s)
        polls["n"] += 1
        if polls["n"] == 3:
            (tmp_path / "sacct.out").write_text(done)

    clock.sleep = sleep
    ex_a = tmp_path / "subm"
    ex_a.mkdir()
    (ex_a / "100_0.out").write_text("  done 2\n  failed 0\n")
    with (ex_a / "100_0_result.pkl").open("wb") as f:
        pickle.dump(("success", "ret-0"), f)
    with (ex_a / "101_0_result.pkl").open("wb") as f:
        pickle.dump(("error", "boom"), f)
    returns = slurm.launch(launcher, overrides, 5)
    assert returns == ["ret-0"]  # 100_1 left no result, 101_0 pickled an error: the summary still stands
    assert clock.slept == [0.5, 0.75, 1.0]
    a, b = _Executor.made
    assert launcher.loads == [["model=a", "context=fov"], ["model=b", "context=fov"]]  # one config per model
    assert (a.cluster, a.folder, a.max_num_timeout) == ("slurm", tmp_path / "subm", 0)
    assert a.params == {"timeout_min": 1, "cpus_per_task": 2, "mem_gb": 4, "slurm_partition": "gpu",
                        "slurm_gres": "gpu:2", "slurm_array_parallelism": 4}
    assert "slurm_gres" not in b.params  # model b needs no GPU
    fn_overrides, sweep_keys, nums, names, _state = a.args
    assert fn_overrides == (["model=a", "context=fov"], ["model=a", "context=full"])
    assert sweep_keys == ("hydra.sweep.dir", "hydra.sweep.dir") and nums == (5, 7)
    assert names == ("job_id_for_5", "job_id_for_7")
    first = json.loads((tmp_path / "first.json").read_text())  # written at submission, before the first poll
    assert first["finished"] is False and [(j["slurm_id"], j["state"]) for j in first["jobs"]] == [
        ("100_0", "PENDING"), ("101_0", "PENDING"), ("100_1", "PENDING")]
    assert (tmp_path / "multirun" / "sweep7").is_dir()  # the sweep folder (and its parents) made before submitting
    data = json.loads((tmp_path / "outputs" / "r1" / "slurm" / "sweep7.json").read_text())
    assert [(j["num"], j["slurm_id"], j["state"]) for j in data["jobs"]] == [
        (5, "100_0", "COMPLETED"), (6, "101_0", "COMPLETED"), (7, "100_1", "COMPLETED")]
    assert data["finished"] is True and data["jobs"][0]["items"] == {"done": 2, "failed": 0}
    assert [j["shown"] for j in data["jobs"]] == [["model=a", "context=fov"], ["model=b", "context=fov"],
                                                 ["model=a", "context=full"]]
    out = capsys.readouterr().out
    assert out.startswith("Slurm sweep sweep7 (array 100, 101): finished: 3/3 job(s) completed\n")
    assert f"summary: {tmp_path / 'outputs' / 'r1' / 'slurm' / 'sweep7.md'}" in out


def test_a_sweep_with_a_failed_job_exits_1_with_its_reason(tmp_path, monkeypatch, stand_in_submitit, capsys):
    launcher = _launcher(tmp_path, {"m0": 1}, lcfg={"max_num_timeout": 2}, params={"poll_s": None})
    _sacct_says(tmp_path, monkeypatch, "100_0|COMPLETED|0:0|00:00:09|00:01:00|None\n"
                                       "100_1|OUT_OF_MEMORY|0:125|00:00:09|00:01:00|None\n")
    with pytest.raises(CommandExit) as exc:
        slurm.launch(launcher, [["context=fov"], ["context=full"]], 0)
    assert exc.value.code == 1
    assert _Executor.made[0].max_num_timeout == 2 and len(_Executor.made) == 1  # no resource key: one array
    md = (tmp_path / "outputs" / "r1" / "slurm" / "sweep7.md").read_text()
    assert "| 1 | 100_1 | OUT_OF_MEMORY | 0:125 |" in md and "ran out of memory: raise slurm.mem_gb" in md
    assert "finished: 1/2 job(s) completed; rerun the same command" in capsys.readouterr().out


def test_an_sbatch_refusal_is_one_error_naming_the_settings_and_earlier_arrays(tmp_path, monkeypatch,
                                                                              stand_in_submitit, capsys):
    launcher = _launcher(tmp_path, {"a": 1, "b": 1}, lcfg={"gres": "gpu:x:1"})
    _Executor.refuse = ["", ("submission failed\n  \nsbatch: error: Invalid account\nsbatch: error: Batch job "
                             "submission failed: Invalid account or account/partition combination specified\n")]
    with pytest.raises(CommandExit) as exc:
        slurm.launch(launcher, [["model=a"], ["model=b"]], 0)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: sbatch refused the sweep: submission failed sbatch: error: Invalid account "
                          "sbatch: error: Batch job submission failed: Invalid account")
    assert "Check slurm.partition / slurm.account" in err
    assert err.rstrip().endswith("; array(s) 100 of this sweep were submitted before and keep running (scancel 100 "
                                 "to stop them)")
    assert len(err.strip().splitlines()) == 1


def test_a_bad_setting_in_a_launch_exits_2_before_submitting(tmp_path, stand_in_submitit, capsys):
    launcher = _launcher(tmp_path, {"m0": 1}, lcfg={"time": "12h"})
    with pytest.raises(CommandExit) as exc:
        slurm.launch(launcher, [["context=fov"]], 0)
    assert exc.value.code == 2 and not _Executor.made
    assert capsys.readouterr().err.startswith("error: slurm.time='12h': give a Slurm time limit")


def test_an_interrupted_wait_leaves_the_jobs_running(tmp_path, monkeypatch, stand_in_submitit, capsys):
    clock = stand_in_submitit
    launcher = _launcher(tmp_path, {"m0": 1})
    _sacct_says(tmp_path, monkeypatch, "100_0|RUNNING|0:0|00:00:01|00:01:00|None\n")

    def interrupt(s: float) -> None:
        raise KeyboardInterrupt

    clock.sleep = interrupt
    with pytest.raises(CommandExit) as exc:
        slurm.launch(launcher, [["context=fov"]], 0)
    assert exc.value.code == 130
    assert "interrupted: the jobs keep running on the cluster (scancel 100 stops them)" in capsys.readouterr().err
    data = json.loads((tmp_path / "outputs" / "r1" / "slurm" / "sweep7.json").read_text())
    assert data["finished"] is False and data["jobs"][0]["state"] == "RUNNING"


def test_resource_keys_split_a_sweep():
    key = slurm._group_key
    for o in ("model=a", "+model=a", "~slurm.time", "slurm.time=5", "hydra.launcher.mem_gb=3", "experiment=x",
              "debug=true", "local=mine", "model@x=y", "model.gpus_per_job=2"):
        assert key([o, "context=fov"]) == (o,), o
    for o in ("models=a", "context=fov", "run=model", "seed=1", "hydra.run.dir=x"):
        assert key([o]) == (), o


# -- inside a job ----------------------------------------------------------------------------------------------------


@pytest.fixture
def usr_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_the_time_limit_signal_only_warns_without_requeue(monkeypatch, usr_handlers, caplog):
    monkeypatch.delenv("SUBMITIT_PREEMPT_SIGNAL", raising=False)
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    slurm.quiet_time_limit_signal(0)
    handler = signal.getsignal(signal.SIGUSR2)
    assert callable(handler)
    with caplog.at_level(logging.WARNING, logger="harness.app.slurm"):
        handler(signal.SIGUSR2, None)  # a warning, no exception: the item runs on
    assert "near its time limit" in caplog.text
    monkeypatch.setenv("SUBMITIT_PREEMPT_SIGNAL", "USR1")
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    slurm.quiet_time_limit_signal(0)
    assert callable(signal.getsignal(signal.SIGUSR1))


def test_with_requeue_or_an_unknown_signal_the_handler_is_left_alone(monkeypatch, usr_handlers):
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    monkeypatch.delenv("SUBMITIT_PREEMPT_SIGNAL", raising=False)
    slurm.quiet_time_limit_signal(1)
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
    monkeypatch.setenv("SUBMITIT_PREEMPT_SIGNAL", "NOPE")
    slurm.quiet_time_limit_signal(0)
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL


def test_default_polling_backs_off_to_15_seconds_and_waits_for_every_job(tmp_path, monkeypatch, stand_in_submitit):
    clock = stand_in_submitit
    launcher = _launcher(tmp_path, {"m0": 1}, lcfg={"max_num_timeout": None},
                         params={"poll_s": None, "max_poll_s": None})
    (tmp_path / "multirun" / "sweep7").mkdir(parents=True)  # a sweep folder that exists already is fine
    _sacct_says(tmp_path, monkeypatch, "100_0|COMPLETED|0:0|00:00:01|00:01:00|None\n"
                                       "100_1|RUNNING|0:0|00:00:01|00:01:00|None\n")
    writes = []
    real_write = slurm.Summary.write
    monkeypatch.setattr(slurm.Summary, "write", lambda self, jobs, done: (writes.append(done),
                                                                          real_write(self, jobs, done)))
    real_sleep = clock.sleep

    def sleep(s: float) -> None:
        real_sleep(s)
        if len(clock.slept) == 7:  # job 1 finishes after 7 polls; job 0 finished at once
            (tmp_path / "sacct.out").write_text("100_0|COMPLETED|0:0|00:00:01|00:01:00|None\n"
                                                "100_1|COMPLETED|0:0|00:00:02|00:01:00|None\n")

    clock.sleep = sleep
    assert slurm.launch(launcher, [["context=fov"], ["context=full"]], 0) == []
    assert clock.slept == [2.0, 3.0, 4.5, 6.75, 10.125, 15.0, 15.0]
    assert _Executor.made[0].max_num_timeout == 0
    # written at submission, when the states first came in, when job 1 finished and at the end: never for a poll
    # that changed nothing
    assert writes == [False, False, False, True]


def test_a_job_seen_only_by_accounting_restarts_its_grace_period(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(slurm, "time", clock)
    _answers(tmp_path, monkeypatch)
    reader = StateReader()  # the default grace: 10 s
    reader.read(["4_0"])
    clock.now += 6
    (tmp_path / "sacct.out").write_text("4_0|PENDING|0:0|00:00:00|00:10:00|Priority\n")
    assert reader.read(["4_0"])["4_0"].source == "sacct"
    (tmp_path / "sacct.out").write_text("")
    clock.now += 6
    assert reader.read(["4_0"])["4_0"].reason == "not listed yet"
    clock.now += 9.9
    assert reader.read(["4_0"])["4_0"].word == "PENDING"
    clock.now += 0.1
    assert reader.read(["4_0"])["4_0"].word == "UNKNOWN"


def test_sacct_is_said_to_fail_for_any_nonzero_exit_and_never_when_it_works(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="harness.app.slurm"):
        _answers(tmp_path, monkeypatch)
        StateReader(grace_s=0.0).read(["2_0"])
        assert "sacct failed" not in caplog.text
        _answers(tmp_path, monkeypatch, sacct_rc=1)
        reader = StateReader(grace_s=0.0)
        reader.read(["2_0"])
    assert "sacct failed (sacct: no db)" in caplog.text and reader.sacct_error == "sacct: no db"


def test_a_boolean_is_not_a_count():
    for k in ("array_parallelism", "cpus_per_task", "mem_gb"):
        with pytest.raises(SlurmSettingError, match=rf"^slurm\.{k}=True: must be a whole number"):
            executor_parameters({**BASE, k: True}, {})


# -- the slurm section's defaults, immutability and its own check ------------------------------------------------------
def test_a_sweep_job_asks_for_half_a_day_8_cpus_and_64_gb_64_at_a_time_by_default():
    from harness.app.slurm_settings import SlurmSettings

    s = SlurmSettings.from_dict({})
    assert (s.time, s.array_parallelism, s.gres, s.cpus_per_task, s.mem_gb) == ("12:00:00", 64, "auto", 8, 64)
    assert (s.partition, s.account, s.qos, s.gpu_type, s.constraint) == (None,) * 5


def test_the_slurm_section_cannot_be_changed_once_read():
    from pydantic import ValidationError

    from harness.app.slurm_settings import SlurmSettings

    s = SlurmSettings.from_dict({"partition": "gpu"})
    with pytest.raises(ValidationError, match="frozen"):
        s.partition = "cpu"
    assert s.partition == "gpu"


def test_a_time_limit_slurm_cannot_read_is_refused_by_the_check_and_by_the_section():
    from harness.app.slurm_settings import SlurmSettingError, SlurmSettings, check_resources

    fix = "slurm.time='bogus': give a Slurm time limit: minutes (90), H:MM:SS (12:00:00) or D-HH:MM:SS (1-00:00:00)"
    with pytest.raises(SlurmSettingError) as direct:
        check_resources({"time": "bogus", "array_parallelism": 1})
    with pytest.raises(SlurmSettingError) as section:
        SlurmSettings.from_dict({"time": "bogus"})
    assert str(direct.value) == str(section.value) == fix
    check_resources({"time": None, "array_parallelism": 1})  # no limit given: the cluster's
