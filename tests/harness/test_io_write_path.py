"""The write path's new helpers, unit by unit (fast: scored by the mutation group ``write-path``): atomic bytes with
a mode, contained copies, streams that never follow a link, the rename of a finished temporary, and sealed JSON."""

from __future__ import annotations

import json
import os
import stat

import pytest

from harness import io


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_write_bytes_is_atomic_contained_and_takes_a_mode(tmp_path):
    p = tmp_path / "new" / "a.bin"
    io.write_bytes(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01" and _mode(p) == io.file_mode()
    io.write_bytes(p, b"x", mode=0o600)
    assert p.read_bytes() == b"x" and _mode(p) == 0o600
    assert [q.name for q in p.parent.iterdir()] == ["a.bin"]  # no temporary left
    with io.confine(tmp_path / "new"), pytest.raises(io.ContainmentError):
        io.write_bytes(tmp_path / "b.bin", b"y")
    assert not (tmp_path / "b.bin").exists()


def test_write_text_scrubs_unless_the_caller_did(tmp_path):
    text = "GET http://u:pw-secret-1@h/x\n"
    io.write_text(tmp_path / "a.txt", text)
    io.write_text(tmp_path / "b.txt", text, scrubbed=True)
    assert "pw-secret-1" not in (tmp_path / "a.txt").read_text() and (tmp_path / "b.txt").read_text() == text


def test_write_text_takes_a_mode(tmp_path):
    io.write_text(tmp_path / "k.json", "{}", mode=0o600)
    io.write_text(tmp_path / "p.json", "{}")
    assert _mode(tmp_path / "k.json") == 0o600 and _mode(tmp_path / "p.json") == io.file_mode()


def test_copy_file_copies_every_byte_into_a_new_folder(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))  # several copy blocks
    out = io.copy_file(src, tmp_path / "d" / "dst.bin")
    assert out == tmp_path / "d" / "dst.bin" and out.read_bytes() == src.read_bytes()
    with io.confine(tmp_path / "d"), pytest.raises(io.ContainmentError):
        io.copy_file(src, tmp_path / "elsewhere.bin")


def test_replace_renames_a_temporary_onto_its_name_when_contained(tmp_path):
    tmp = tmp_path / ".x.tmp"
    tmp.write_text("done")
    assert io.replace(tmp, tmp_path / "x") == tmp_path / "x"
    assert (tmp_path / "x").read_text() == "done" and not tmp.exists()
    tmp.write_text("again")
    with io.confine(tmp_path / "sub"), pytest.raises(io.ContainmentError):
        io.replace(tmp, tmp_path / "x")
    assert tmp.exists() and (tmp_path / "x").read_text() == "done"


def test_open_stream_truncates_appends_and_refuses_links(tmp_path):
    p = tmp_path / "logs" / "a.log"
    with io.open_stream(p) as f:
        f.write("one\n")
    with io.open_stream(p, append=True) as f:
        f.write("two\n")
    assert p.read_text() == "one\ntwo\n"
    with io.open_stream(p) as f:
        f.write("new\n")
    assert p.read_text() == "new\n" and _mode(p) == io.file_mode()
    with io.open_stream(tmp_path / "b.bin", binary=True) as f:
        f.write(b"\x00")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00"
    (tmp_path / "link.log").symlink_to(p)
    for append in (False, True):
        with pytest.raises(io.ContainmentError, match="symlink"):
            io.open_stream(tmp_path / "link.log", append=append)
    assert p.read_text() == "new\n"
    with pytest.raises(IsADirectoryError):  # another error is itself, not a link
        io.open_stream(tmp_path / "logs")
    with io.confine(tmp_path / "logs"), pytest.raises(io.ContainmentError, match="outside the run"):
        io.open_stream(tmp_path / "c.log")


def test_check_contained_keeps_the_last_part_and_resolves_the_folder(tmp_path):
    run = tmp_path / "run"
    (run / "real").mkdir(parents=True)
    (run / "alias").symlink_to(run / "real")
    (run / "out").symlink_to(tmp_path)
    (run / "f").symlink_to(tmp_path / "outside")
    with io.confine(run):
        assert io.check_contained(run / "alias" / "x") == (run / "real" / "x").resolve()
        assert io.check_contained(run / "f") == run.resolve() / "f"  # the link itself, not its target
        for bad in (run / "out" / "x", run / ".."):
            with pytest.raises(io.ContainmentError):
                io.check_contained(bad)
        assert io.check_contained(run) == run.resolve()


def test_a_sealed_file_round_trips_and_any_edit_breaks_the_seal(tmp_path):
    data = {"b": 1, "a": [0.1, float("nan")], io.SEAL: "stale"}
    sealed = io.write_sealed_json(tmp_path / "m.json", data)
    back = json.loads((tmp_path / "m.json").read_text())
    assert back[io.SEAL] == sealed[io.SEAL] != "stale" and io.seal_problem(back) is None
    assert io.seal_digest({"a": 1, "b": 2}) == io.seal_digest({"b": 2, "a": 1})  # key order is not content
    assert io.seal_digest({"a": 1}) != io.seal_digest({"a": 2}) and len(io.seal_digest({})) == 64
    assert io.seal_digest({"a": 1, io.SEAL: "x"}) == io.seal_digest({"a": 1})
    for bad in ([], None, {"a": 1}, {"a": 1, io.SEAL: 5}):
        assert "no content_sha256" in io.seal_problem(bad), bad
    assert "no longer matches" in io.seal_problem({**back, "b": 2})
