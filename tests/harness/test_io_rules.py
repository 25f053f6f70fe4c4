"""The rules of harness/io.py one at a time: confinement with several roots, modes under any umask, process start
times that survive odd process names, temporary files next to their target, the errors that name the file, the
text of JSON and sealed JSON files, links, and how ``run_logged`` logs, scrubs, times out and cleans up."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from harness import io as hio
from harness import secrets as hsecrets


@pytest.fixture
def umask():
    """Set the process umask for the test (``umask(0o022)``); the old one is restored after."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda m: os.umask(m)
    os.umask(old)


def test_confinement_allows_every_root_and_ends_with_its_block(tmp_path):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "outside"
    with hio.confine(a, b):
        hio.write_text(a / "x.txt", "1")
        hio.write_text(b / "y.txt", "2")  # the second root counts as much as the first
        with pytest.raises(hio.ContainmentError):
            hio.write_text(out / "z.txt", "3")
        with hio.confine(out):  # nested: adds a root
            hio.write_text(out / "z.txt", "3")
        with pytest.raises(hio.ContainmentError):
            hio.write_text(out / "w.txt", "4")  # the nested root is gone with its block
    with hio.confine(a), pytest.raises(hio.ContainmentError):
        hio.write_text(b / "late.txt", "5")  # b's root ended with its block
    hio.write_text(out / "free.txt", "6")  # nothing confined any more
    assert [p.name for p in sorted(tmp_path.rglob("*.txt"))] == ["x.txt", "y.txt", "free.txt", "z.txt"]


def test_temporary_and_appended_files_are_confined_too(tmp_path):
    run = tmp_path / "run"
    with hio.confine(run):
        with pytest.raises(hio.ContainmentError):
            hio.temp_path(tmp_path / "elsewhere.json")
        with pytest.raises(hio.ContainmentError):
            hio.append_text(tmp_path / "log.jsonl", "{}\n")
        assert hio.temp_path(run / "ok.json").parent == run
    assert not (tmp_path / "log.jsonl").exists() and not list(tmp_path.glob(".elsewhere*"))


@pytest.mark.parametrize("mask", [0o000, 0o002, 0o022, 0o077])
def test_new_files_get_the_mode_a_plain_open_gives(tmp_path, umask, mask):
    umask(mask)
    assert hio.process_umask() == mask
    assert hio.file_mode() == 0o666 & ~mask and hio.file_mode(executable=True) == 0o777 & ~mask
    hio.write_text(tmp_path / "a.txt", "x")
    tmp = hio.temp_path(tmp_path / "b.txt")
    plain = tmp_path / "c.txt"
    plain.write_text("x")
    for p in (tmp_path / "a.txt", tmp, plain):
        assert p.stat().st_mode & 0o777 == 0o666 & ~mask, p.name


def test_the_umask_is_read_without_changing_it_where_proc_cannot_tell(monkeypatch, umask):
    umask(0o027)
    real = Path.read_text

    def no_proc(self, *a, **kw):
        if str(self).startswith("/proc/"):
            raise OSError(errno.ENOENT, "no /proc here")
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", no_proc)
    assert hio.process_umask() == 0o027
    assert hio.process_umask() == 0o027  # and it is still the umask afterwards
    monkeypatch.undo()
    assert hio.process_umask() == 0o027


RENAME_AND_WAIT = """
import ctypes, sys
ctypes.CDLL(None).prctl(15, b"odd) name (x", 0, 0, 0)  # PR_SET_NAME: a ')' inside the process name
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")
def test_the_start_time_of_a_process_with_brackets_in_its_name(tmp_path):
    """``/proc/<pid>/stat`` puts the name in brackets; a name with ``)`` in it must not shift the fields."""
    p = subprocess.Popen([sys.executable, "-c", RENAME_AND_WAIT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        stat = Path(f"/proc/{p.pid}/stat").read_text()
        assert "odd) name (" in stat
        fields = stat[stat.rindex(")") + 2:].split()
        assert hio._pid_start(p.pid) == int(fields[19]) and hio.pid_alive(p.pid, int(fields[19]))
        ticks = os.sysconf("SC_CLK_TCK")
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        assert 0 <= uptime * ticks - hio._pid_start(p.pid) < 120 * ticks  # started in the last two minutes
    finally:
        p.kill()
        p.wait()


def test_where_the_start_time_cannot_be_read_the_pid_decides(monkeypatch):
    monkeypatch.setattr(hio, "_pid_start", lambda pid: None)
    assert hio.pid_alive(os.getpid(), 12345) is True  # cannot compare: a live pid is trusted


def test_temporary_names_give_up_after_exactly_100_tries(tmp_path, monkeypatch):
    tries = []

    def same(n):
        tries.append(n)
        return b"\0" * n

    monkeypatch.setattr(hio.os, "urandom", same)
    monkeypatch.setattr(hio, "_TEMP_COUNTER", iter([7] * 300))
    hio._create_temp(tmp_path, ".y.", ".tmp")
    tries.clear()
    with pytest.raises(FileExistsError, match="no free temporary name"):
        hio._create_temp(tmp_path, ".y.", ".tmp")
    assert len(tries) == 100


def test_temp_paths_sit_next_to_their_target_with_its_suffix_or_the_given_one(tmp_path):
    deep = tmp_path / "new" / "deeper" / "frames.npy"  # the folders do not exist yet
    t1 = hio.temp_path(deep)
    assert t1.parent == deep.parent and t1.suffix == ".npy" and t1.name.startswith(".frames.npy.")
    assert t1.is_file() and t1.stat().st_size == 0 and hio.temp_owner(t1.name) == (hio.host_tag(), os.getpid())
    t2 = hio.temp_path(tmp_path / "video.mp4", suffix=".part")
    assert t2.suffix == ".part" and t2.parent == tmp_path
    assert hio.temp_path(tmp_path / "README").name.startswith(f".README.{hio.temp_tag()}.")
    with hio.atomic_path(tmp_path / "x.dat", suffix=".npy") as tmp:
        assert tmp.suffix == ".npy"
        tmp.write_bytes(b"1")
    assert (tmp_path / "x.dat").read_bytes() == b"1"


@pytest.mark.parametrize("make", [hio.temp_path, lambda p: hio.atomic_path(p).__enter__()])
def test_a_folder_made_by_someone_else_between_two_looks_is_fine(tmp_path, monkeypatch, make):
    """The first try finds no folder; before ``mkdir`` another process makes it (and the parents)."""
    real = hio._create_temp
    calls = []

    def racing(folder, prefix, suffix):
        calls.append(folder)
        if len(calls) == 1:
            Path(folder).mkdir(parents=True)  # the other process
            raise FileNotFoundError(folder)
        return real(folder, prefix, suffix)

    monkeypatch.setattr(hio, "_create_temp", racing)
    target = tmp_path / "a" / "b" / "meta.json"
    assert Path(make(target)).parent == target.parent and len(calls) == 2


def test_a_write_error_without_a_file_name_is_raised_naming_the_target(tmp_path):
    target = tmp_path / "big.json"
    with pytest.raises(OSError) as full, hio.atomic_path(target):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert full.value.errno == errno.ENOSPC and full.value.filename == str(target)
    assert str(target) in str(full.value)
    other = tmp_path / "other.bin"
    with pytest.raises(OSError) as named, hio.atomic_path(target):
        raise OSError(errno.EACCES, "Permission denied", str(other))
    assert named.value.filename == str(other)  # an error that names its file keeps it
    with pytest.raises(OSError) as plain, hio.atomic_path(target):
        raise OSError("plain")
    assert plain.value.errno is None and str(plain.value) == "plain"
    assert os.listdir(tmp_path) == []


def test_json_text_keeps_the_order_of_the_keys():
    assert list(json.loads(hio.json_text({"b": 1, "a": 2, "c": 3}))) == ["b", "a", "c"]


def test_append_text_makes_the_folder_appends_and_scrubs(tmp_path):
    from harness import secrets

    log = tmp_path / "new" / "deeper" / "log.jsonl"
    hio.append_text(log, '{"a": 1}\n')
    hio.append_text(log, '{"url": "https://me:hunter2@example.org"}\n')
    text = log.read_text()
    assert text.startswith('{"a": 1}\n') and text.count("\n") == 2
    assert "hunter2" not in text and secrets.REDACTED in text


def test_load_json_names_what_the_file_should_hold_only_when_told(tmp_path):
    with pytest.raises(hio.BadFileError) as told:
        hio.load_json(tmp_path / "meta.json", "rerun the item", what="the item's record")
    assert str(told.value) == f"{tmp_path / 'meta.json'} (the item's record): missing; rerun the item"
    with pytest.raises(hio.BadFileError) as bare:
        hio.load_json(tmp_path / "meta.json", "rerun the item")
    assert str(bare.value) == f"{tmp_path / 'meta.json'}: missing; rerun the item"


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_pid_alive_only_asks_and_sends_the_process_nothing():
    """``pid_alive`` probes with signal 0 (existence and permission only): the process it asks about receives
    nothing. Asked about this very process, a handler for the next signal number (SIGHUP) never runs."""
    got: list[int] = []
    old = signal.signal(signal.SIGHUP, lambda signum, frame: got.append(signum))
    try:
        assert hio.pid_alive(os.getpid()) is True
        time.sleep(0.05)  # a signal this process sent itself has run its handler by the end of this call
    finally:
        signal.signal(signal.SIGHUP, old)
    assert got == []


def test_write_json_indents_by_default(tmp_path):
    hio.write_json(tmp_path / "a.json", {"a": [1, 2]})
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ]\n}\n'
    hio.write_json(tmp_path / "b.json", {"a": [1, 2]}, compact=True)
    assert (tmp_path / "b.json").read_text() == '{"a":[1,2]}\n'


def test_a_resealed_mapping_gets_a_fresh_seal_as_its_last_key(tmp_path):
    """A mapping read back from a sealed file (it carries its old seal) is sealed afresh: the old seal is dropped
    first, so the new one is the last key of the file and of the mapping returned, wherever the old one stood."""
    sealed = hio.write_sealed_json(tmp_path / "m.json", {hio.SEAL: "stale", "a": 1, "b": [2]})
    assert list(sealed) == ["a", "b", hio.SEAL] and sealed[hio.SEAL] == hio.seal_digest({"a": 1, "b": [2]})
    on_disk = json.loads((tmp_path / "m.json").read_text())
    assert list(on_disk) == ["a", "b", hio.SEAL] and on_disk == sealed and hio.seal_problem(on_disk) is None


def test_a_sealed_file_is_scrubbed_once_and_holds_what_was_sealed(tmp_path):
    """The text is scrubbed before the seal is computed and written as it is. Scrubbing is idempotent for what the
    shapes find, but not where a registered secret's value is a word of the redaction itself (a password
    ``redacted``): a second pass would then change the file, which would no longer match its seal nor the mapping
    returned."""
    hsecrets.register({"redacted": "ODD_PASSWORD"})
    try:
        header = "Authorization: Token abc123xyz"
        assert hsecrets.scrub(hsecrets.scrub(header)) != hsecrets.scrub(header)  # the case this rule is about
        sealed = hio.write_sealed_json(tmp_path / "m.json", {"header": header})
        assert sealed["header"] == f"Authorization: Token {hsecrets.REDACTED}"
        on_disk = json.loads((tmp_path / "m.json").read_text())
        assert on_disk == sealed and hio.seal_problem(on_disk) is None
    finally:
        hsecrets.clear_registry()


def test_link_file_hard_links_within_one_file_system(tmp_path):
    src = tmp_path / "videos" / "a.mp4"
    src.parent.mkdir()
    src.write_bytes(b"frames")
    out = tmp_path / "release" / "a.mp4"
    out.parent.mkdir()
    out.symlink_to(tmp_path / "elsewhere")  # a link already there is replaced, never followed
    assert hio.link_file(src, out) == "hardlink"
    assert not out.is_symlink() and out.samefile(src) and src.stat().st_nlink == 2
    assert sorted(os.listdir(out.parent)) == ["a.mp4"]  # no temporary name left behind
    assert not (tmp_path / "elsewhere").exists()


def test_link_file_falls_back_to_a_symlink_to_the_absolute_source(tmp_path, monkeypatch):
    """Where a hard link fails (another file system: ``EXDEV``), ``path`` is a symbolic link to ``src``'s absolute,
    resolved path (a relative ``src`` would point elsewhere once read from ``path``'s folder)."""
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.mp4").write_bytes(b"frames")
    monkeypatch.chdir(tmp_path)

    def cross_device(src, dst, *a, **kw):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    out = tmp_path / "release" / "a.mp4"
    assert hio.link_file(Path("videos/../videos/a.mp4"), out) == "symlink"
    assert out.is_symlink() and os.readlink(out) == str(tmp_path.resolve() / "videos" / "a.mp4")
    assert out.read_bytes() == b"frames" and sorted(os.listdir(out.parent)) == ["a.mp4"]


def test_link_file_of_a_missing_source_fails_and_links_nothing(tmp_path):
    out = tmp_path / "release" / "a.mp4"
    with pytest.raises(FileNotFoundError):
        hio.link_file(tmp_path / "missing.mp4", out)
    assert not out.is_symlink() and not out.exists()
    assert not (out.parent.exists() and os.listdir(out.parent))  # no dangling link, no temporary name


def _child(code: str) -> list[str]:
    """A tiny Python child (``-S``: no site packages to import, so it starts in a few tens of milliseconds)."""
    return [sys.executable, "-S", "-c", code]


class _Recorded(subprocess.Popen):
    """``subprocess.Popen`` that keeps every process it starts (``made``), so a test can look at the one
    ``run_logged`` started: its pid, its exit status, its pipe."""

    made: ClassVar[list[subprocess.Popen]] = []

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        type(self).made.append(self)


@pytest.fixture
def popen(monkeypatch):
    """Install a fresh subclass of :class:`_Recorded` as ``subprocess.Popen`` (``run_logged`` looks it up per call);
    a test subclasses it further to step in at ``wait`` / ``kill``."""

    def install(cls=None):
        cls = cls or type("Recorded", (_Recorded,), {})
        cls.made = []
        monkeypatch.setattr(subprocess, "Popen", cls)
        return cls

    return install


def _gone(pid: int) -> bool:
    """Whether no process (not even an unreaped zombie) has ``pid`` any more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_run_logged_removes_the_values_given_and_the_secret_named_variables_of_env(tmp_path):
    """What ``values`` names and the value of every secret-named variable of ``env`` is redacted from the log by
    its name; a value under MIN_VALUE_LEN characters (it would hit ordinary text) and a setting's value stay."""
    env = {**os.environ, "STUDY_API_TOKEN": "q" * hsecrets.MIN_VALUE_LEN,
           "SHORT_API_TOKEN": "z" * (hsecrets.MIN_VALUE_LEN - 1), "MODEL_VARIANT": "zebra-striped-42"}
    code = ("import os, sys; e = os.environ; "
            "print(e['STUDY_API_TOKEN'], e['SHORT_API_TOKEN'], e['MODEL_VARIANT'], 'pass-phrase-77'); sys.exit(3)")
    log = tmp_path / "upstream.log"
    assert hio.run_logged(_child(code), log, env=env, values={"pass-phrase-77": "STUDY_KEY"}) == 3
    short = "z" * (hsecrets.MIN_VALUE_LEN - 1)
    assert log.read_text() == f"<redacted:STUDY_API_TOKEN> {short} zebra-striped-42 <redacted:STUDY_KEY>\n"


FLUSH_CHILD = """
import sys, time
from pathlib import Path
log = Path(sys.argv[1])
print("first", flush=True)
end = time.monotonic() + 5
while "first" not in log.read_text() and time.monotonic() < end:
    time.sleep(0.01)
print("seen" if "first" in log.read_text() else "not in the log yet")
"""


def test_run_logged_writes_each_line_to_the_log_as_it_comes(tmp_path):
    """A line the child printed is in the log file while the child still runs (a crash or a hang leaves its last
    words on disk): the child waits until it reads its own first line back from the log."""
    log = tmp_path / "upstream.log"
    assert hio.run_logged(_child(FLUSH_CHILD) + [str(log)], log) == 0
    assert log.read_text() == "first\nseen\n"


def test_run_logged_copies_the_output_in_a_daemon_thread(tmp_path, monkeypatch, popen):
    """The thread that copies the child's output is a daemon: should a grandchild keep the pipe open after the
    child is gone, that thread never keeps the harness from exiting. The pipe is closed once the child is done."""
    seen = []
    real = hsecrets.scrub

    def recording(text, values=None):
        seen.append((text, threading.current_thread().name, threading.current_thread().daemon))
        return real(text, values)

    monkeypatch.setattr(hsecrets, "scrub", recording)
    made = popen()
    assert hio.run_logged(_child("print('a'); print('b')"), tmp_path / "upstream.log") == 0
    assert seen == [("a\n", "upstream-log", True), ("b\n", "upstream-log", True)]
    (proc,) = made.made
    assert proc.stdout.closed


def test_run_logged_kills_and_reaps_a_child_past_its_timeout(tmp_path, popen):
    """Past ``timeout`` seconds (counted from the start) the child is killed and reaped, then
    ``subprocess.TimeoutExpired`` is raised: the child never gets to its next line, no zombie is left."""
    made = popen()
    log = tmp_path / "upstream.log"
    with pytest.raises(subprocess.TimeoutExpired):
        hio.run_logged(_child("import time; time.sleep(0.6); print('late')"), log, timeout=0.1)
    (proc,) = made.made
    assert proc.returncode == -signal.SIGKILL and _gone(proc.pid)  # killed (not its own exit 0) and reaped
    assert "late" not in log.read_text()


def test_after_a_timeout_the_log_holds_what_the_child_printed(tmp_path, monkeypatch, popen):
    """On a timeout, ``run_logged`` waits for the thread that copies the output to finish before raising: a line
    the child printed is in the log even when that thread is still writing it as the child is killed. (The wait
    for the child's first line before the timed wait starts, and the hold-up, are this test's.)"""
    printed, killed = threading.Event(), threading.Event()
    real = hsecrets.scrub

    def slow(text, values=None):
        if text == "first\n":
            printed.set()
            killed.wait(5)
            time.sleep(0.2)  # still writing this line when the child is killed and reaped
        return real(text, values)

    class Gated(_Recorded):
        def wait(self, timeout=None):
            if timeout is not None:
                printed.wait(5)  # the timed wait starts once the child printed: no race with its start-up
            return super().wait(timeout)

        def kill(self):
            super().kill()
            killed.set()

    monkeypatch.setattr(hsecrets, "scrub", slow)
    made = popen(Gated)
    log = tmp_path / "upstream.log"
    with pytest.raises(subprocess.TimeoutExpired):
        hio.run_logged(_child("import time; print('first', flush=True); time.sleep(3)"), log, timeout=0.1)
    assert log.read_text() == "first\n"
    (proc,) = made.made
    assert proc.returncode == -signal.SIGKILL and _gone(proc.pid)


def test_run_logged_waits_for_the_last_line_before_it_returns(tmp_path, monkeypatch, popen):
    """A child that printed and exited: ``run_logged`` returns only once its last line is in the log, even when
    the thread that copies the output is still writing it after the child was reaped."""
    reaped = threading.Event()
    real = hsecrets.scrub

    def slow(text, values=None):
        if text == "last\n":
            reaped.wait(5)
            time.sleep(0.2)  # still writing this line when the child is already reaped
        return real(text, values)

    class Watched(_Recorded):
        def wait(self, timeout=None):
            code = super().wait(timeout)
            reaped.set()
            return code

    monkeypatch.setattr(hsecrets, "scrub", slow)
    made = popen(Watched)
    log = tmp_path / "upstream.log"
    assert hio.run_logged(_child("print('first'); print('last')"), log) == 0
    assert log.read_text() == "first\nlast\n"
    (proc,) = made.made
    assert proc.stdout.closed


LEFT_OVER = """
import subprocess, sys
# a process the child starts and leaves behind, holding the child's stdout: it prints once the test says so
code = ("import os, sys, time; end = time.monotonic() + 30\\n"
        "while not os.path.exists(sys.argv[1]) and time.monotonic() < end: time.sleep(0.01)\\n"
        "print('late line', flush=True)")
subprocess.Popen([sys.executable, "-S", "-c", code, sys.argv[1]])
print("child's line", flush=True)
{tail}
"""


def _copiers(before=frozenset()):
    return {t for t in threading.enumerate() if t.name == "upstream-log"} - set(before)


def _left_over_ends(flag, before):
    """Let the left-over process print its late line, then wait until ``run_logged``'s copying thread has seen the
    pipe end (the left-over process has exited: its late line went through that thread, or nowhere)."""
    flag.write_text("")
    end = time.monotonic() + 30
    while _copiers(before) and time.monotonic() < end:
        time.sleep(0.01)
    assert not _copiers(before)


@pytest.mark.parametrize("tail, timeout", [("sys.exit(4)", None), ("import time; time.sleep(30)", 0.5)],
                         ids=["exits", "times_out"])
def test_a_process_left_holding_the_output_delays_run_logged_by_the_drain_only(tmp_path, monkeypatch, tail, timeout):
    """A process the child started and left behind holds the pipe open: ``run_logged`` returned only when that
    process ended (forever, for a server). Now it waits LOG_DRAIN_S after the child ended, then returns (or raises
    the timeout); the log says why it stops, and the left-over process's late line never reaches it."""
    monkeypatch.setattr(hio, "LOG_DRAIN_S", 0.2)
    flag, log = tmp_path / "flag", tmp_path / "upstream.log"
    argv = _child(LEFT_OVER.format(tail=tail)) + [str(flag)]
    before = _copiers()
    note = ("[harness] the process ended, but a process it started still held its output 0.2 s later; "
            "the log stops here\n")
    try:
        if timeout is None:
            assert hio.run_logged(argv, log) == 4
        else:
            with pytest.raises(subprocess.TimeoutExpired):
                hio.run_logged(argv, log, timeout=timeout)
        assert log.read_text() == "child's line\n" + note
        assert len(_copiers(before)) == 1  # still blocked on the pipe the left-over process holds
    finally:
        _left_over_ends(flag, before)
    assert log.read_text() == "child's line\n" + note


class _Interrupt(BaseException):
    """Stands for a ``KeyboardInterrupt`` (any ``BaseException``) that arrives while ``run_logged`` waits."""


def test_an_interrupted_run_logged_kills_and_reaps_its_child(tmp_path, popen):
    """Interrupted while it waits (Ctrl-C, a ``SystemExit`` from a signal handler), ``run_logged`` kills the child
    and reaps it before the interruption goes on: the child never outlives the harness, no zombie is left."""

    class Interrupted(_Recorded):
        waits = 0

        def wait(self, timeout=None):
            type(self).waits += 1
            if type(self).waits == 1:
                raise _Interrupt()
            return super().wait(timeout)

    made = popen(Interrupted)
    log = tmp_path / "upstream.log"
    with pytest.raises(_Interrupt):
        hio.run_logged(_child("import time; time.sleep(2); print('late')"), log)
    (proc,) = made.made
    assert proc.returncode == -signal.SIGKILL and _gone(proc.pid)
    assert "late" not in log.read_text()


# -- strict JSON: numpy floats, both layouts, the seal ----------------------------------------------------------------
def test_a_numpy_float32_is_a_float_when_finite_and_none_when_not():
    import numpy as np

    from harness.io import strict_json

    got = strict_json({"a": np.float32(0.5), "b": np.float32("nan"), "c": [np.float32("inf")]})
    assert got == {"a": 0.5, "b": None, "c": [None]} and type(got["a"]) is float


def test_a_nan_is_written_as_null_in_the_compact_and_the_indented_layout():
    from harness.io import json_text

    data = {"x": float("nan"), "y": 1.5}
    assert json_text(data, compact=True) == '{"x":null,"y":1.5}\n'
    assert json_text(data) == '{\n  "x": null,\n  "y": 1.5\n}\n'


def test_the_seal_of_data_holding_a_nan_is_the_digest_of_its_canonical_text():
    import hashlib

    from harness.io import SEAL, seal_digest

    want = hashlib.sha256(b'{"a":NaN,"b":[1,2]}').hexdigest()
    assert seal_digest({"b": [1, 2], "a": float("nan"), SEAL: "ignored"}) == want
