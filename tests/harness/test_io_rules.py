"""The rules of harness/io.py one at a time: confinement with several roots, modes under any umask, process start
times that survive odd process names, temporary files next to their target, and the errors that name the file."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import io as hio


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
    with hio.confine(a):
        with pytest.raises(hio.ContainmentError):
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
