"""One error path, run-level locks and unique temporary names: SIGINT ends with one line saying how to resume;
an OS error names its file; a lock held from another host is named; evaluations and reports of a run take its
lock; no two writers share a temporary file."""

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

import pytest

from tests.hostile.conftest import ITEM, SMALL

FAST_EVAL = ["evaluate.encoders=[pixel]", "evaluate.trackers=[template]", "evaluate.pose_estimators=[classical]",
             "evaluate.return_frame_poses=[classical]", "evaluate.depth=[]", "evaluate.face=[]", "evaluate.imaging=[]",
             "evaluate.aesthetic=[]", "evaluate.rpe_trans_estimators=[classical]",
             "evaluate.rpe_rot_estimator=classical", "evaluate.validity=false", "evaluate.bootstrap.n=20"]


def _default_sigint() -> None:
    # a shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT: give the child the
    # terminal's default, as a user pressing Ctrl-C has it, however the tests were launched
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _popen(args, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)


@pytest.mark.slow
def test_sigint_ends_with_one_line_that_says_how_to_resume(tmp_path):
    """Before: a 60-line traceback. After: one line, exit 130; the rerun resumes."""
    args = ["run=k", "model.height=96", "model.width=160", "model.num_frames=401", "evaluate=off", "progress=false",
            "cases.include=[environment_rocket,human_astronaut]"]
    p = _popen(args, tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline and not list((tmp_path / "outputs" / "k").glob("*/*/seed-*/*/*/meta.json")):
        time.sleep(0.2)
    time.sleep(0.5)
    assert p.poll() is None, "the run ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and "rerun the same command to resume" in err
    assert len([x for x in err.splitlines() if x.strip()]) <= 3, err
    from tests.support import run_cli

    r = run_cli(args, tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "outputs" / "k").glob("*/*/seed-*/*/*/video.mp4"))) == 2


def test_keyboard_interrupt_in_a_command_is_one_line(harness, monkeypatch):
    import harness.app.cli as cli

    def interrupted(cfg):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.HANDLERS, "list", interrupted)
    r = harness("list")
    assert r.code == 130 and "rerun the same command to resume" in r.err and "Traceback" not in r.err


def test_an_os_error_without_a_file_name_is_named_after_the_file(tmp_path, monkeypatch):
    """A full disk (ENOSPC from write) had an empty file name in the message."""
    from harness.io import write_text

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as e:
        write_text(tmp_path / "meta.json", "{}")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "meta.json")
    assert not list(tmp_path.iterdir())  # the temporary file is gone


def test_a_full_disk_is_a_user_error_naming_the_file(harness, tmp_path, monkeypatch):
    real = Path.write_text

    def full(self, *a, **k):
        if self.name.startswith(".meta.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    r = harness("run=f", *SMALL)
    assert r.code == 2 and "No space left on device:" in r.err and "meta.json" in r.err, r.err
    assert "Traceback" not in r.err


def test_a_lock_held_from_another_host_is_named(tmp_path, caplog):
    """Before: the run waited forever without naming the lock file."""
    from harness.app.runner import _announce_wait
    from harness.locks import ItemLocks
    from harness.outputs import WorkItem

    item = WorkItem("reference", "fov", 1, "lrlr", "environment_rocket")
    locks = ItemLocks(tmp_path)
    locks.dir.mkdir()
    locks.path(item.key).write_text(json.dumps({"host": "far-away-host", "pid": 42, "pid_start": None,
                                                "token": "t", "started": time.time()}))
    with caplog.at_level("INFO"):
        _announce_wait(locks, [item])
    text = caplog.text
    assert str(locks.path(item.key)) in text and "far-away-host" in text
    assert "delete the lock file" in text


@pytest.mark.slow
def test_a_run_waiting_on_another_hosts_lock_says_which_file(tmp_path):
    from harness.locks import ItemLocks

    locks = ItemLocks(tmp_path / "outputs" / "w")
    locks.dir.mkdir(parents=True)
    lock = locks.path(ITEM.as_posix())
    lock.write_text(json.dumps({"host": "far-away-host", "pid": 42, "pid_start": None, "token": "t",
                                "started": time.time()}))
    p = _popen(["run=w", *SMALL], tmp_path)
    try:
        seen = ""
        deadline = time.time() + 120
        while time.time() < deadline and "delete the lock file" not in seen:
            line = p.stderr.readline()
            if not line:
                break
            seen += line
        assert str(lock) in seen and "far-away-host" in seen, seen
    finally:
        p.kill()
        p.communicate()


def test_the_run_lock_says_who_waits_and_where(tmp_path, caplog):
    from harness.outputs import RunDir

    run = RunDir(tmp_path)
    got = threading.Event()
    with run.lock("eval"):
        def second():
            with run.lock("eval"):
                got.set()

        with caplog.at_level("INFO"):
            t = threading.Thread(target=second)
            t.start()
            time.sleep(0.3)
            assert not got.is_set()  # one holder at a time
    t.join(5)
    assert got.is_set() and str(tmp_path / ".eval.lock") in caplog.text


@pytest.mark.slow
def test_an_evaluation_waits_for_the_runs_lock(run_copy):
    """Two ``stage=evaluate`` on one run raced (fixed temp names, no run lock); now the second waits."""
    from harness.outputs import RunDir

    root = run_copy.parents[6]
    run = RunDir(run_copy.parents[4])
    with run.lock("eval"):
        p = _popen(["stage=evaluate", "run=h", *FAST_EVAL, "progress=false"], root)
        time.sleep(8)
        assert p.poll() is None and not (run.path / "eval").exists()
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "waiting: another process holds the eval lock" in err and (run.path / "eval" / "summary.md").is_file()


@pytest.mark.slow
def test_two_evaluations_of_one_run_both_finish(run_copy):
    root = run_copy.parents[6]
    ps = [_popen(["stage=evaluate", "run=h", *FAST_EVAL, "progress=false"], root) for _ in range(2)]
    results = [p.communicate(timeout=600) for p in ps]
    assert [p.returncode for p in ps] == [0, 0], [r[1][-2000:] for r in results]
    assert not [p for p in run_copy.parents[4].rglob(".*") if p.is_file() and ".tmp." in p.name]


def test_figures_drawn_at_once_never_share_a_temporary_file(tmp_path):
    """``<stem>.tmp.png`` was a fixed name: two writers renamed each other's file (and a .svg got PNG bytes)."""
    from harness.config_groups import group_yaml
    from harness.io import temp_owner
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov
    from trajectories.path import atomic_target
    from trajectories.preview import preview_path

    path = build_path(TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")), 65, 16.0,
                      intrinsics_from_fov(60, 160, 96), 96, 160)
    errors: list[BaseException] = []

    def draw(ext):
        try:
            for _ in range(2):  # two writers of each name, twice each
                preview_path(path, tmp_path / f"fig{ext}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=draw, args=(ext,)) for ext in (".png", ".png", ".svg", ".svg")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "fig.svg").read_bytes()[:500]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png", "fig.svg"]
    with atomic_target(tmp_path / "camera.npz") as tmp:  # the same naming convention as harness.io
        assert temp_owner(tmp.name) is not None and tmp.suffix == ".npz"
        path.save_to(tmp)


# -- issue 33 ----------------------------------------------------------------------------------------------------------
def test_verify_reports_a_truncated_meta_json_as_a_parse_error(harness, run_copy):
    """A truncated ``meta.json`` was reported as "status: missing"."""
    text = (run_copy / "meta.json").read_text()
    (run_copy / "meta.json").write_text(text[: len(text) // 2])
    r = harness("verify", "run=h", *SMALL)
    assert r.code == 1 and "meta.json" in r.out and "not JSON" in r.out and "truncated" in r.out, r.out
    assert "status: missing" not in r.out
    (run_copy / "meta.json").unlink()
    assert "status: missing" in harness("verify", "run=h", *SMALL).out  # a missing one is still "missing"


def test_the_wait_line_never_shows_an_empty_lock_list(tmp_path, caplog):
    """"waiting for 2 item(s) held by another process (?); lock file(s): " with an empty list, when the locks went
    between the try and the look."""
    import logging

    from harness.app.runner import _announce_wait
    from harness.locks import ItemLocks
    from harness.outputs import WorkItem

    items = [WorkItem("m", "fov", 1, "lrlr", c) for c in ("a", "b")]
    with caplog.at_level(logging.INFO, logger="harness"):
        _announce_wait(ItemLocks(tmp_path), items)
    text = caplog.text
    assert "waiting for 2 item(s)" in text and "lock file(s): " not in text and "(?)" not in text, text
