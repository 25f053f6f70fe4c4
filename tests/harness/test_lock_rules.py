"""The rules of harness/locks.py one at a time: which Slurm job a lock names, how squeue's answer is read and cached,
the boundary of the garbage-lock age, the look-again before a take-over, and what a ``file_lock`` leaves behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import locks
from harness.locks import ItemLocks, LockOwner, file_lock
from tests.support import ROOT

SLURM_VARS = ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_JOB_ID")


@pytest.fixture
def no_slurm(monkeypatch):
    for k in SLURM_VARS:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


@pytest.mark.parametrize("env, job", [
    ({"SLURM_ARRAY_JOB_ID": "118", "SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_ID": "120"}, "118_2"),
    ({"SLURM_ARRAY_JOB_ID": "118", "SLURM_JOB_ID": "120"}, "120"),  # an array id without a task: the job itself
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_JOB_ID": "120"}, "120"),
    ({"SLURM_ARRAY_TASK_ID": "2"}, None),
    ({"SLURM_JOB_ID": ""}, None),  # set but empty (a cleared variable): not in Slurm
    ({}, None),
])
def test_the_lock_names_the_array_task_only_when_both_ids_are_set(no_slurm, env, job):
    for k, v in env.items():
        no_slurm.setenv(k, v)
    assert locks.current_slurm_job() == job


def _squeue(tmp_path: Path, script: str, calls: Path) -> str:
    """A PATH holding only a ``squeue`` that logs its arguments to ``calls`` and then runs ``script``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "squeue"
    exe.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n{script}\n')
    exe.chmod(0o755)
    return str(bin_dir)


@pytest.fixture
def squeue(tmp_path, monkeypatch):
    """Install a fake ``squeue`` (``squeue(script)``); returns the list of argument lines it was called with."""
    calls = tmp_path / "calls.txt"
    locks._SLURM_CACHE.clear()

    def install(script: str) -> None:  # the cache is kept: a test of it swaps the script under it
        monkeypatch.setenv("PATH", _squeue(tmp_path, script, calls))

    def seen() -> list[str]:
        return calls.read_text().splitlines() if calls.exists() else []

    install.seen = seen
    yield install
    locks._SLURM_CACHE.clear()


@pytest.mark.parametrize("script, alive", [
    ("echo RUNNING", True),
    ("echo PENDING", True),
    ("echo COMPLETED", False),  # squeue shows finished jobs for a while: over
    ("printf 'FAILED\\n'", False),
    ("exit 0", False),  # not listed any more
    ("echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1", False),  # forgotten: over
    ("echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1", True),  # cannot tell
    ("echo RUNNING; exit 1", True),  # a failed call is not read as an answer, whatever it printed
])
def test_squeue_decides_whether_a_job_still_runs(squeue, script, alive):
    squeue(script)
    assert locks.slurm_job_alive("77_1") is alive
    assert squeue.seen() == ["-h -j 77_1 -o %T"]


def test_a_job_squeue_lists_as_done_with_an_active_word_in_stderr_is_over(squeue):
    squeue("echo COMPLETED; echo RUNNING >&2")  # only stdout is squeue's answer
    assert locks.slurm_job_alive("5") is False


def test_without_squeue_or_when_it_hangs_the_lock_is_honoured(tmp_path, monkeypatch):
    locks._SLURM_CACHE.clear()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert locks.slurm_job_alive("5") is True
    locks._SLURM_CACHE.clear()

    bounds = []

    def hang(*_a, **kw):
        bounds.append(kw.get("timeout"))
        raise subprocess.TimeoutExpired("squeue", kw.get("timeout"))

    monkeypatch.setattr(locks.subprocess, "run", hang)
    assert locks.slurm_job_alive("6") is True
    assert bounds == [20]  # a squeue that hangs is given up after 20 s (the documented bound), not later
    locks._SLURM_CACHE.clear()


def test_squeue_answers_are_cached_for_ten_seconds_per_job(squeue, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(locks.time, "monotonic", lambda: clock[0])
    squeue("echo RUNNING")
    assert locks.slurm_job_alive("9") is True
    squeue("echo COMPLETED")  # the job ends
    clock[0] = 1009.5
    assert locks.slurm_job_alive("9") is True  # cached: the job's new state is not asked yet
    assert locks.slurm_job_alive("10") is False  # another job is asked (at 1009.5)
    clock[0] = 1010.0  # exactly 10 s after the first answer: too old
    assert locks.slurm_job_alive("9") is False
    assert squeue.seen() == ["-h -j 9 -o %T", "-h -j 10 -o %T", "-h -j 9 -o %T"]
    clock[0] = 1015.0
    assert locks.slurm_job_alive("9", max_age_s=1.0) is False and len(squeue.seen()) == 4
    clock[0] = 1015.5
    assert locks.slurm_job_alive("9", max_age_s=10.0) is False and len(squeue.seen()) == 4
    clock[0] = 1024.5  # 9.5 s after the last answer: the default age (10 s) still serves it
    assert locks.slurm_job_alive("9") is False and len(squeue.seen()) == 4
    clock[0] = 1025.5
    assert locks.slurm_job_alive("9") is False and len(squeue.seen()) == 5


def test_a_cached_answer_is_the_answer_not_the_time(squeue, monkeypatch):
    monkeypatch.setattr(locks.time, "monotonic", lambda: 50.0)
    locks._SLURM_CACHE["3"] = (45.0, False)  # asked 5 s ago: over
    assert locks.slurm_job_alive("3") is False and squeue.seen() == []
    locks._SLURM_CACHE["4"] = (45.0, True)
    assert locks.slurm_job_alive("4") is True


def test_an_owner_describes_its_process_and_its_slurm_job():
    t = time.mktime((2026, 12, 1, 9, 5, 7, 0, 0, -1))
    plain = LockOwner("node-3", 41, None, "t", t)
    assert plain.describe() == "pid 41 on node-3 since 09:05:07"
    job = LockOwner("node-3", 41, None, "t", t, slurm_job="7_2")
    assert job.describe() == "pid 41 on node-3 (Slurm job 7_2) since 09:05:07"


@pytest.mark.parametrize("age, taken", [(10.0, True), (10.5, True), (9.99, False)])
def test_an_unwritten_lock_is_young_below_ten_seconds_and_garbage_from_ten(tmp_path, monkeypatch, age, taken):
    locks_ = ItemLocks(tmp_path)
    locks_.dir.mkdir()
    p = locks_.path("k")
    p.write_text("")
    mtime = p.stat().st_mtime
    monkeypatch.setattr(locks.time, "time", lambda: mtime + age)
    assert locks_.try_acquire("k") is taken
    assert p.read_text() == (json.dumps(locks_.owner.__dict__) if taken else "")


def test_a_garbage_lock_is_taken_over_even_where_every_possible_pid_is_alive(tmp_path, monkeypatch):
    """A garbage lock (unparsable, 10 s old) names a placeholder owner whose pid no Linux process can have (above
    pid_max's largest value, 2**22): on a host where pid_max is 2**22 and the highest pid runs, it is still dead."""
    locks_ = ItemLocks(tmp_path)
    locks_.dir.mkdir()
    p = locks_.path("k")
    p.write_text("{not json")
    mtime = p.stat().st_mtime
    monkeypatch.setattr(locks.time, "time", lambda: mtime + 60)
    monkeypatch.setattr(locks, "pid_alive", lambda pid, start=None: 0 < pid < 2**22)  # every real pid is alive
    assert locks_.holder("k") is None
    assert locks_.try_acquire("k") is True and locks_.taken_over == ["k"]


def test_an_unwritten_young_lock_is_held_by_a_placeholder_that_names_no_process(tmp_path):
    """A lock being written (empty, under 10 s old) is honoured; the wait message names its owner as pid -1 on
    host '?' (no real process or host), the way the run's log line shows it."""
    locks_ = ItemLocks(tmp_path)
    locks_.dir.mkdir()
    locks_.path("k").write_text("")
    owner = locks_.holder("k")
    assert owner is not None and (owner.host, owner.pid, owner.pid_start, owner.token) == ("?", -1, None, "")
    assert owner.describe().startswith("pid -1 on ? since ")


def test_a_lock_in_a_run_folder_that_does_not_exist_yet(tmp_path):
    run = tmp_path / "a" / "b" / "run"
    locks_ = ItemLocks(run)
    assert locks_.try_acquire("item") and locks_.path("item").is_file()


def test_the_takeover_looks_again_and_leaves_a_lock_someone_else_took_meanwhile(tmp_path, monkeypatch):
    """Between the first look (a dead owner) and the take-over, another process may have taken the lock over
    already: its lock (another token) is not deleted, and the item stays theirs."""
    mine = ItemLocks(tmp_path)
    dead = LockOwner(socket.gethostname(), 2**22 + 7, None, "dead-token", 0.0)
    theirs = LockOwner("other-node", 5, None, "their-token", time.time())
    mine.dir.mkdir()
    mine.path("k").write_text(json.dumps(theirs.__dict__))
    looks = iter([dead, theirs])
    monkeypatch.setattr(mine, "read_owner", lambda key: next(looks))
    assert mine.try_acquire("k") is False
    assert json.loads(mine.path("k").read_text())["token"] == "their-token" and mine.taken_over == []


def test_the_takeover_of_a_lock_released_meanwhile_creates_it_afresh(tmp_path, monkeypatch):
    mine = ItemLocks(tmp_path)
    mine.dir.mkdir()
    mine.path("k").write_text("{}")  # a lock exists at the first try ...
    dead = LockOwner(socket.gethostname(), 2**22 + 7, None, "dead-token", 0.0)
    looks = iter([dead, None])

    def look(key):
        owner = next(looks)
        if owner is None:
            mine.path(key).unlink()  # ... and is gone (released) by the second look
        return owner

    monkeypatch.setattr(mine, "read_owner", look)
    assert mine.try_acquire("k") is True and mine.taken_over == ["k"]
    assert json.loads(mine.path("k").read_text())["token"] == mine.owner.token


def test_holder_of_a_free_key_is_none_and_release_of_a_vanished_lock_is_quiet(tmp_path):
    locks_ = ItemLocks(tmp_path)
    assert locks_.holder("free") is None
    assert locks_.try_acquire("k") and locks_.holder("k") is None  # our own lock: nobody else holds it
    locks_.path("k").unlink()  # removed by hand (or by a cleanup) while we hold it
    locks_.release("k")
    assert "k" not in locks_.held and not locks_.path("k").exists()


def test_a_takeover_leaves_the_guard_file_as_it_was(tmp_path):
    """The take-over guard ``.locks/.takeover`` is only locked, never rewritten: it is opened for appending, not
    truncated, so taking over a stale lock (and clearing one) leaves its bytes and its modification time alone."""
    mine = ItemLocks(tmp_path)
    mine.dir.mkdir()
    guard = mine.dir / ".takeover"
    guard.write_text("kept\n")
    os.utime(guard, (1_000_000, 1_000_000))
    stale = LockOwner(socket.gethostname(), 2**22 + 7, None, "dead-token", 0.0)
    mine.path("k").write_text(json.dumps(stale.__dict__))
    mine.path("done").write_text(json.dumps(stale.__dict__))
    assert mine.try_acquire("k") is True and mine.taken_over == ["k"]
    assert mine.clear_stale("done") is True
    assert guard.read_text() == "kept\n" and guard.stat().st_mtime == 1_000_000


TAKEOVER_HOLDER = """
import fcntl, sys
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("holding", flush=True)
sys.stdin.readline()
"""


def test_a_takeover_waits_for_the_takeover_guard_of_another_process(tmp_path):
    """Take-overs on one host are serialised: while another process holds ``.locks/.takeover``, taking a stale
    lock waits; it goes on once that process lets go."""
    mine = ItemLocks(tmp_path)
    mine.dir.mkdir()
    stale = LockOwner(socket.gethostname(), 2**22 + 7, None, "dead-token", 0.0)
    mine.path("k").write_text(json.dumps(stale.__dict__))
    holder = subprocess.Popen([sys.executable, "-c", TAKEOVER_HOLDER, str(mine.dir / ".takeover")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        result = []
        t = threading.Thread(target=lambda: result.append(mine.try_acquire("k")))
        t.start()
        t.join(0.8)
        assert t.is_alive() and result == []  # waiting for the guard
        holder.stdin.close()
        t.join(10)
        assert result == [True] and mine.taken_over == ["k"]
    finally:
        holder.kill()
        holder.wait()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts file descriptors in /proc")
def test_file_lock_makes_its_folder_and_leaves_no_descriptor_open(tmp_path):
    path = tmp_path / "new" / "deeper" / ".lock"
    before = _open_fds()
    for _ in range(3):
        with file_lock(path):
            assert path.is_file()
    assert _open_fds() == before
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
             "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, cwd=ROOT,
                         check=False)
    assert out.stdout.strip() == "free"  # released after the block


def test_clear_stale_removes_only_a_dead_owners_lock(tmp_path, monkeypatch):
    """A process killed after finishing an item and before releasing it leaves a lock nobody takes over (the item
    is done): ``clear_stale`` removes it. A live owner's, another host's, an unwritten young one and our own stay;
    a lock taken over between the two looks stays too."""
    mine = ItemLocks(tmp_path)
    mine.dir.mkdir()
    dead = LockOwner(socket.gethostname(), 2**22 + 7, None, "dead-token", 0.0)
    alive = LockOwner(socket.gethostname(), os.getpid(), None, "live-token", time.time())
    other = LockOwner("other-node", 5, None, "their-token", time.time())
    for key, owner in (("dead", dead), ("alive", alive), ("other", other)):
        mine.path(key).write_text(json.dumps(owner.__dict__))
    mine.path("young").write_text("")  # created, not yet written: an owner between open and write
    assert mine.clear_stale("free") is False
    assert mine.clear_stale("dead") is True and not mine.path("dead").exists()
    for key in ("alive", "other", "young"):
        assert mine.clear_stale(key) is False and mine.path(key).exists(), key
    assert mine.try_acquire("own") and mine.clear_stale("own") is False and mine.path("own").exists()

    mine.path("raced").write_text(json.dumps(dead.__dict__))
    theirs = LockOwner(socket.gethostname(), os.getpid(), None, "new-token", time.time())
    looks = iter([dead, theirs])
    monkeypatch.setattr(mine, "read_owner", lambda key: next(looks))
    assert mine.clear_stale("raced") is False and mine.path("raced").exists()
    gone = iter([dead, None])
    monkeypatch.setattr(mine, "read_owner", lambda key: next(gone))
    assert mine.clear_stale("raced") is False  # released meanwhile: nothing to remove


def test_a_rerun_removes_the_lock_a_killed_owner_left_on_a_finished_item(monkeypatch, tmp_path, capsys):
    """Killed between writing the item's meta.json ("done") and releasing its lock, a run leaves the lock behind;
    the next run skips the item as done and removes that lock (tests/harness/test_kill_faults.py hit this window)."""
    from tests.support.cli import in_process_cli

    run = in_process_cli(monkeypatch, tmp_path, capsys)
    args = ("run=t", "evaluate=off", "progress=false", "model.height=48", "model.width=80", "model.num_frames=33",
            "trajectories=[lrlr]", "cases.include=[environment_rocket]")
    assert run(*args).code == 0
    run_dir = tmp_path / "outputs" / "t"
    (row,) = [json.loads(x) for x in (run_dir / "manifest.jsonl").read_text().splitlines()]
    locks_ = ItemLocks(run_dir)
    dead = LockOwner(socket.gethostname(), 2**22 + 7, None, "dead-token", 0.0)
    locks_.dir.mkdir(exist_ok=True)
    locks_.path(row["key"]).write_text(json.dumps(dead.__dict__))
    again = run(*args)
    assert again.code == 0 and "skipped (already done)" in again.text
    assert not locks_.path(row["key"]).exists()


def test_a_lock_file_this_user_cannot_write_is_refused_not_locked_read_only():
    """On NFS (a cluster's shared run folder) ``flock`` is emulated with fcntl locks, and an exclusive one needs a
    descriptor open for writing (flock(2)). The lock file is opened read-write on every filesystem, so a lock file
    this user cannot write fails here as it would there, instead of locking on a local disk only. Run as another
    user (nobody) where the tests run as root, whom file modes do not stop."""
    import tempfile

    from harness.locks import file_lock

    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        folder.chmod(0o755)  # reachable by any user
        path = folder / "item.lock"
        with file_lock(path):  # this user takes and releases it: the file exists
            pass
        path.chmod(0o444)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by its exit status only
            code = 3
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                try:
                    with file_lock(path):
                        code = 0  # locked through a read-only descriptor
                except PermissionError:
                    code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 1
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
