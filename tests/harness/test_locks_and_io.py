"""Item locks owned by two processes, garbage locks, reused pids, temporary files from two hosts, and atomic writes
that fail half-way (harness/locks.py, harness/io.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import io as hio
from harness.locks import ItemLocks, LockOwner, file_lock, lock_name
from tests.support import ROOT


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from harness.locks import ItemLocks
locks = ItemLocks({run!r})
print(locks.try_acquire({key!r}), locks.owner.token, flush=True)
sys.stdin.readline()  # hold until told
locks.release_all()
print("released", flush=True)
"""


@pytest.fixture
def other_process(tmp_path):
    """A second process that takes the lock of item ``k`` in ``tmp_path`` and holds it until stdin is closed."""
    procs = []

    def start(key="k"):
        p = subprocess.Popen([sys.executable, "-c", HOLD.format(root=str(ROOT), run=str(tmp_path), key=key)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        got, token = p.stdout.readline().split()
        procs.append(p)
        return p, got == "True", token

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_lock_held_by_another_live_process_is_honoured_and_never_released_by_us(tmp_path, other_process):
    proc, got, token = other_process()
    assert got
    mine = ItemLocks(tmp_path)
    assert not mine.try_acquire("k")
    assert mine.holder("k").pid == proc.pid and mine.holder("k").token == token
    # This process wrongly believes it holds "k" (say, its lock was taken over while it hung): releasing it must
    # not delete the other process's lock, whose token is not ours.
    mine.held.add("k")
    mine.release("k")
    assert "k" not in mine.held
    owner = json.loads(mine.path("k").read_text())
    assert owner["token"] == token and owner["pid"] == proc.pid
    assert not ItemLocks(tmp_path).try_acquire("k")  # still held by the other process
    proc.stdin.close()
    assert proc.stdout.readline().strip() == "released" and proc.wait() == 0
    assert not mine.path("k").exists()  # the owner's own release removes it
    assert mine.try_acquire("k") and mine.taken_over == []  # free again: a fresh lock, not a take-over


def test_a_dead_owners_lock_is_taken_over_once(tmp_path, other_process):
    proc, _got, _ = other_process()
    proc.kill()
    proc.wait()
    a, b = ItemLocks(tmp_path), ItemLocks(tmp_path)
    assert a.holder("k") is None  # stale: nobody holds it
    assert a.try_acquire("k") and a.taken_over == ["k"]
    assert not b.try_acquire("k")  # the new owner is alive (this process)
    assert json.loads(a.path("k").read_text())["token"] == a.owner.token
    assert a.try_acquire("k")  # already held: still True, no second take-over
    assert a.taken_over == ["k"]


def test_release_only_removes_our_own_lock(tmp_path):
    a, b = ItemLocks(tmp_path), ItemLocks(tmp_path)
    assert a.owner.token != b.owner.token
    assert a.try_acquire("x") and b.try_acquire("y")
    a.release("y")  # not ours: nothing happens
    assert b.path("y").exists()
    a.release_all()
    assert not a.path("x").exists() and b.path("y").exists() and a.held == set()
    assert a.holder("y").token == b.owner.token and b.holder("y") is None  # our own lock has no other holder


def _garbage(locks: ItemLocks, key: str, age_s: float, text: str = "{not json") -> None:
    locks.dir.mkdir(parents=True, exist_ok=True)
    p = locks.path(key)
    p.write_text(text)
    t = time.time() - age_s
    os.utime(p, (t, t))


@pytest.mark.parametrize("age, taken", [(0.0, False), (9.0, False), (11.0, True), (3600.0, True)])
def test_an_unreadable_lock_is_honoured_for_10_seconds_then_taken_over(tmp_path, age, taken):
    """A lock file that is not (yet) valid JSON may belong to a process between its create and its write: it is
    treated as held while it is younger than 10 s, as dead garbage after that."""
    locks = ItemLocks(tmp_path)
    _garbage(locks, "g", age)
    assert locks.try_acquire("g") is taken
    assert (locks.taken_over == ["g"]) is taken
    if not taken:
        assert locks.holder("g").host == "?" and locks.path("g").read_text() == "{not json"
    else:
        assert json.loads(locks.path("g").read_text())["token"] == locks.owner.token


def test_an_empty_lock_file_is_an_owner_between_create_and_write(tmp_path):
    locks = ItemLocks(tmp_path)
    _garbage(locks, "e", 0.0, text="")
    assert not locks.try_acquire("e") and locks.holder("e").host == "?"
    _garbage(locks, "w", 0.0, text='["a list"]')  # valid JSON of the wrong shape is garbage too
    assert locks.read_owner("w").host == "?"
    assert locks.read_owner("absent") is None


def _plant(locks: ItemLocks, key: str, **owner) -> None:
    locks.dir.mkdir(parents=True, exist_ok=True)
    o = {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": None, "token": "t", "started": time.time(),
         **owner}
    locks.path(key).write_text(json.dumps(o))


def test_a_reused_pid_is_not_the_lock_owner(tmp_path):
    """The pid is alive but started at another time than the lock records: another process got the pid."""
    locks = ItemLocks(tmp_path)
    start = hio._pid_start(os.getppid())
    _plant(locks, "same", pid=os.getppid(), pid_start=start)
    _plant(locks, "reused", pid=os.getppid(), pid_start=start + 1)
    _plant(locks, "unknown-start", pid=os.getppid(), pid_start=None)
    _plant(locks, "remote", host="another-node", pid=_dead_pid())
    assert not locks.try_acquire("same") and not locks.try_acquire("unknown-start")
    assert locks.try_acquire("reused") and locks.taken_over == ["reused"]
    assert not locks.try_acquire("remote")  # another host's pid cannot be checked: honoured
    assert LockOwner("another-node", 1, None, "t", 0.0).alive()
    assert not LockOwner(socket.gethostname(), _dead_pid(), None, "t", 0.0).alive()


def test_two_processes_racing_for_one_stale_lock_get_it_once(tmp_path):
    """Four processes race for one stale lock; each stays alive until all four have tried, so the winner's lock is
    live (never legitimately stale) for the latecomers however the machine schedules them: no timing assumed. The
    shared start time only makes a real race likely."""
    locks = ItemLocks(tmp_path)
    _plant(locks, "stale", pid=_dead_pid())
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from harness.locks import ItemLocks; "
            "t = float(sys.argv[1]); time.sleep(max(0.0, t - time.time())); "
            f"print(ItemLocks({str(tmp_path)!r}).try_acquire('stale'), flush=True); sys.stdin.readline()")
    at = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", code, str(at)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(4)]
    try:
        outs = [p.stdout.readline().strip() for p in procs]  # every answer is in while every process still lives
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=60)
    assert sorted(outs) == ["False", "False", "False", "True"]


def test_lock_names_are_flat_readable_and_distinct():
    assert lock_name("m/ctx/seed-1/lrlr/case").startswith("m__ctx__seed-1__lrlr__case-")
    assert lock_name("a/b") != lock_name("a__b")  # the hash tells apart keys that flatten alike
    long = lock_name("x" * 300)
    assert long.endswith(".lock") and len(long) == 120 + 1 + 10 + len(".lock")
    assert lock_name("x" * 300) != lock_name("x" * 301)


def test_file_lock_excludes_other_processes_until_the_block_ends(tmp_path):
    path = tmp_path / "sub" / "f.lock"
    probe = ("import fcntl, sys, os; fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')\n")

    def state():
        return subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True,
                              check=False).stdout.strip()

    with file_lock(path):
        assert state() == "held"
    assert state() == "free"


# -- harness.io ------------------------------------------------------------------------------------------------------

def test_pid_alive_checks_the_start_time_when_given():
    me = os.getpid()
    start = hio._pid_start(me)
    assert isinstance(start, int)
    assert hio.pid_alive(me) and hio.pid_alive(me, start)
    assert not hio.pid_alive(me, start + 1)  # same pid, another start: a reused pid
    dead = _dead_pid()
    assert not hio.pid_alive(dead) and hio._pid_start(dead) is None
    assert hio.pid_alive(1)  # exists (owned by someone else on most machines)


def _temp_name(target: str, host: str, pid: int) -> str:
    return f".{target}.{host}-{pid}.0abcdef.json"


def test_remove_dead_temps_only_removes_dead_writers_of_this_host(tmp_path):
    me, dead = hio.host_tag(), _dead_pid()
    other = "0" * 6 if me != "0" * 6 else "1" * 6
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    files = {
        "dead-here": sub / _temp_name("meta.json", me, dead),
        "dead-elsewhere": tmp_path / _temp_name("meta.json", other, dead),  # its pid means nothing here
        "alive-here": tmp_path / _temp_name("x.json", me, os.getpid()),
        "plain": tmp_path / "meta.json",
        "not-ours": tmp_path / ".hidden.json",
    }
    for p in files.values():
        p.write_text("{}")
    gone = hio.remove_dead_temps(tmp_path)
    assert gone == [files["dead-here"]]
    assert [k for k, p in files.items() if not p.exists()] == ["dead-here"]
    assert hio.remove_dead_temps(tmp_path) == []


def test_temp_names_carry_host_and_pid():
    with hio.atomic_path(Path("/tmp") / f"worldmem-test-{os.getpid()}.json") as tmp:
        assert hio.temp_owner(tmp.name) == (hio.host_tag(), os.getpid())
        assert tmp.name.startswith(f".worldmem-test-{os.getpid()}.json.") and tmp.suffix == ".json"
        tmp.write_text("1")
    Path(f"/tmp/worldmem-test-{os.getpid()}.json").unlink()
    assert hio.temp_owner("meta.json") is None and hio.temp_owner(".meta.json.zz-12.1.json") is None
    assert hio.temp_tag() == f"{hio.host_tag()}-{os.getpid()}" and len(hio.host_tag()) == 6


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "meta.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="boom"), hio.atomic_path(target) as tmp:
        tmp.write_text("half a fi")
        raise RuntimeError("boom")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["meta.json"]
    new = tmp_path / "new" / "deeper" / "x.txt"  # a folder that does not exist yet
    with pytest.raises(RuntimeError), hio.atomic_path(new) as tmp:
        raise RuntimeError("before writing")
    assert not new.exists() and os.listdir(new.parent) == []
    hio.write_text(new, "done")
    assert new.read_text() == "done" and os.listdir(new.parent) == ["x.txt"]


def test_atomic_writes_follow_the_umask_and_the_suffix(tmp_path):
    old = os.umask(0o027)
    try:
        assert hio.process_umask() == 0o027
        assert hio.file_mode() == 0o640 and hio.file_mode(executable=True) == 0o750
        hio.write_json(tmp_path / "a.json", {"x": 1})
        hio.save_npy(tmp_path / "a.npy", np.arange(3))
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.arange(3))  # np.save kept the name (.npy suffix)
    assert sorted(os.listdir(tmp_path)) == ["a.json", "a.npy"]


def test_json_text_knows_numpy_paths_and_sets():
    data = {"i": np.int64(3), "f": np.float32(0.5), "a": np.arange(2), "p": Path("x/y"), "s": (1, 2), "z": {3}}
    assert json.loads(hio.json_text(data)) == {"i": 3, "f": 0.5, "a": [0, 1], "p": "x/y", "s": [1, 2], "z": [3]}
    assert hio.json_text({"a": 1}) == '{\n  "a": 1\n}\n'
    with pytest.raises(TypeError, match="complex"):
        hio.json_text({"c": 1j})


def test_read_jsonl_names_the_bad_line(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"a": 1}\n\n   \n{"b": 2}\n')
    assert hio.read_jsonl(p) == [{"a": 1}, {"b": 2}]
    p.write_text('{"a": 1}\n{"b": \n')
    with pytest.raises(hio.JsonLinesError, match=r"m.jsonl:2: not valid JSON"):
        hio.read_jsonl(p)
    p.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(hio.JsonLinesError, match=r"m.jsonl:2: expected a JSON object, got list"):
        hio.read_jsonl(p)
    hio.write_json(tmp_path / "r.json", [1])
    assert hio.read_json(tmp_path / "r.json") == [1]


def test_sha256_file_reads_every_block(tmp_path):
    import hashlib

    data = os.urandom((1 << 20) + 123)  # more than one 1 MiB block
    (tmp_path / "b").write_bytes(data)
    assert hio.sha256_file(tmp_path / "b") == hashlib.sha256(data).hexdigest()


def test_temporary_names_are_unique_and_give_up_after_100_collisions(tmp_path, monkeypatch):
    names = {hio._create_temp(tmp_path, ".x.", ".tmp") for _ in range(50)}
    assert len(names) == 50 and all(Path(n).exists() for n in names)
    monkeypatch.setattr(hio.os, "urandom", lambda n: b"\0" * n)
    monkeypatch.setattr(hio, "_TEMP_COUNTER", iter([7] * 200))
    hio._create_temp(tmp_path, ".y.", ".tmp")
    with pytest.raises(FileExistsError, match="no free temporary name"):
        hio._create_temp(tmp_path, ".y.", ".tmp")


# -- atomic writes, as a property ------------------------------------------------------------------------------------

contents = st.one_of(st.text(max_size=2000), st.binary(max_size=5000).map(lambda b: b.hex()))


@settings(max_examples=40)
@given(old=st.one_of(st.none(), contents), new=contents, fail_at=st.sampled_from(["before", "half", "after", "never"]),
       chunks=st.integers(1, 5))
def test_an_atomic_write_never_leaves_a_partial_file(tmp_path_factory, old, new, fail_at, chunks):
    """Whatever the block does before it fails (nothing, half the text, all of it), the target holds either its old
    content (or stays absent) or, on success, the whole new content; no temporary file is left beside it."""
    folder = tmp_path_factory.mktemp("atomic")
    target = folder / "out.txt"
    if old is not None:
        target.write_text(old)
    parts = [new[i * len(new) // chunks:(i + 1) * len(new) // chunks] for i in range(chunks)]
    try:
        with hio.atomic_path(target) as tmp:
            with open(tmp, "w") as f:
                for i, part in enumerate(parts):
                    if fail_at == "before" or (fail_at == "half" and i == chunks // 2):
                        raise KeyboardInterrupt  # not an Exception: the cleanup must still run
                    f.write(part)
                    f.flush()
            if fail_at == "after":
                raise OSError("disk full at close")
    except (KeyboardInterrupt, OSError):
        assert fail_at != "never"
    if fail_at == "never":
        assert target.read_text() == new
    elif old is None:
        assert not target.exists()
    else:
        assert target.read_text() == old
    assert [p.name for p in folder.iterdir()] == (["out.txt"] if target.exists() else [])


def test_a_reader_never_sees_half_a_file_while_it_is_rewritten(tmp_path):
    import threading

    target = tmp_path / "m.json"
    versions = [json.dumps({"v": i, "pad": "x" * (20000 + 997 * i)}) for i in range(40)]
    hio.write_text(target, versions[0])
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            seen.add(target.read_text())

    t = threading.Thread(target=read)
    t.start()
    try:
        for v in versions[1:]:
            hio.write_text(target, v)
    finally:
        stop.set()
        t.join()
    assert seen and seen <= set(versions)  # only whole versions were ever read


def test_a_writer_killed_mid_write_leaves_the_old_file_and_a_removable_temp(tmp_path):
    target = tmp_path / "meta.json"
    target.write_text("old")
    code = (f"import sys, os, time; sys.path.insert(0, {str(ROOT)!r}); from harness.io import atomic_path\n"
            f"with atomic_path({str(target)!r}) as tmp:\n"
            "    tmp.write_text('half'); print('writing', flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    p.kill()
    p.wait()
    temps = [q for q in tmp_path.iterdir() if q.name != "meta.json"]
    assert target.read_text() == "old" and len(temps) == 1 and hio.temp_owner(temps[0].name)[1] == p.pid
    assert hio.remove_dead_temps(tmp_path) == temps and [q.name for q in tmp_path.iterdir()] == ["meta.json"]
