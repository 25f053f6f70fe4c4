"""Safe shared run directories and config fingerprints: item locks with stale take-over, identical commands
started together, shards that evaluate once, a manifest that grows as items finish, refusals of changed configs,
file modes from the umask, contained run names."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.support import ROOT, compose, run_cli

SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "progress=false"]


def _cfg(tmp_path, *extra):
    return compose(["cases.include=[environment_rocket,human_astronaut]", f"output_root={tmp_path / 'o'}", "run=r",
                    *SMALL, *extra])


def _run(cfg, **kw):
    from harness.app.runner import plan_from_config, run_items

    plan = plan_from_config(cfg)
    return plan, run_items(plan, progress=False, **kw)


# -- locks ------------------------------------------------------------------------------------------------------------

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_lock_is_taken_over_and_live_locks_are_honoured(tmp_path):
    from harness.locks import ItemLocks, LockOwner, lock_name

    locks = ItemLocks(tmp_path)
    (tmp_path / ".locks").mkdir()
    host = socket.gethostname()

    def plant(key, **owner):
        o = {"host": host, "pid": os.getppid(), "pid_start": None, "token": "t", "started": time.time(), **owner}
        (tmp_path / ".locks" / lock_name(key)).write_text(json.dumps(o))

    plant("dead", pid=_dead_pid())
    plant("alive")  # our parent process: alive
    plant("remote", host="another-node", pid=1)
    assert locks.try_acquire("dead") and locks.taken_over == ["dead"]
    assert not locks.try_acquire("alive") and not locks.try_acquire("remote")
    assert locks.holder("remote").host == "another-node"
    assert locks.try_acquire("fresh") and not ItemLocks(tmp_path).try_acquire("fresh")  # a second process loses
    locks.release_all()
    assert sorted(p.name for p in (tmp_path / ".locks").iterdir() if not p.name.startswith(".")) == sorted(
        [lock_name("alive"), lock_name("remote")])
    assert LockOwner.me().alive()


# -- fingerprints -----------------------------------------------------------------------------------------------------

def test_a_changed_config_is_never_skipped_as_done(tmp_path):
    from harness.app.runner import (
        FingerprintMismatch,
        check_fingerprints,
        fingerprints,
        plan_from_config,
    )

    plan, s = _run(_cfg(tmp_path))
    assert len(s.done) == 2
    again = plan_from_config(_cfg(tmp_path))
    check_fingerprints(again, overwrite=False)  # same config: fine, and skipped
    assert len(_run(_cfg(tmp_path))[1].skipped) == 2
    for change in (["model.num_frames=97"], ["trajectory.yaw_deg=120"], ["seed=7"], ["context=sliding"]):
        changed = plan_from_config(_cfg(tmp_path, *change))
        if not any((changed.run_dir / i.rel_dir / "meta.json").exists() for i in changed.items):
            continue  # a seed/context change is a different item folder: nothing to refuse
        with pytest.raises(FingerprintMismatch, match=r"run=<new>.*overwrite=true"):
            check_fingerprints(changed, overwrite=False)
    _, s = _run(_cfg(tmp_path, "model.num_frames=97"), overwrite=True)
    assert len(s.done) == 2
    meta = json.loads((plan.run_dir / plan.items[0].rel_dir / "meta.json").read_text())
    assert meta["video"]["num_frames"] == 97 and meta["fingerprint"] == meta["manifest"]["fingerprint"]
    assert set(meta["fingerprint_parts"]) >= {"model", "trajectory", "case", "seed", "context", "adapter_code"}


@pytest.mark.parametrize("seed", [1.5, -1, True, 1e30, 2**32, "3"])
def test_seed_must_be_an_integer_in_range(tmp_path, seed):
    from harness.app.plan import PlanError, plan_from_config

    cfg = _cfg(tmp_path)
    cfg["seed"] = seed
    with pytest.raises(PlanError, match="seed="):
        plan_from_config(cfg)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("run", ["../../x", "/abs", "a/../../b", "", "a//b", "..", "x y"])
def test_run_names_stay_under_the_output_root(tmp_path, run):
    from harness.app.plan import PlanError, run_dir_for

    with pytest.raises(PlanError, match="run="):
        run_dir_for(tmp_path, run)


def test_run_name_paths_and_writability(tmp_path):
    from harness.app.plan import PlanError, plan_from_config, run_dir_for

    assert run_dir_for(tmp_path, "study/v2") == (tmp_path / "study" / "v2").resolve()
    cfg = _cfg(tmp_path)
    cfg["run"] = "x" * 256
    with pytest.raises(PlanError, match="too long"):
        plan_from_config(cfg)
    (tmp_path / "file").write_text("")
    cfg = _cfg(tmp_path)
    cfg["output_root"] = str(tmp_path / "file" / "o")
    with pytest.raises(PlanError, match="output_root: cannot write"):
        plan_from_config(cfg)


def test_odd_model_size_fails_at_planning(tmp_path):
    from adapters.base import ModelConfigError
    from harness.app.plan import plan_from_config

    with pytest.raises(ModelConfigError, match="must be even"):
        plan_from_config(_cfg(tmp_path, "model.height=97"))


# -- manifest and modes -----------------------------------------------------------------------------------------------

def test_manifest_grows_as_items_finish(tmp_path):
    from harness.app.runner import plan_from_config, run_items

    cfg = _cfg(tmp_path)
    plan = plan_from_config(cfg)
    seen = []
    original = plan.adapter.generate

    def spy(req, controls, sink):
        m = plan.run_dir / "manifest.jsonl"
        seen.append(len(m.read_text().splitlines()) if m.exists() else 0)
        return original(req, controls, sink)

    plan.adapter.generate = spy
    run_items(plan, progress=False)
    assert seen == [0, 1]  # the first item was in the manifest before the second one started


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664)])
def test_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        plan, _ = _run(_cfg(tmp_path))
    finally:
        os.umask(old)
    item = plan.run_dir / plan.items[0].rel_dir
    for f in (item / "meta.json", item / "video.mp4", item / "camera.npz", plan.run_dir / "manifest.jsonl",
              item / "controls" / "poses.npy"):
        assert f.stat().st_mode & 0o777 == mode, f


def test_evaluating_a_missing_run_is_a_clear_error(tmp_path):
    from harness.app.commands.run import cmd_evaluate_only as _cmd_evaluate_only
    from harness.errors import ConfigError

    cfg = compose([f"output_root={tmp_path}", "run=nope", "stage=evaluate"])
    with pytest.raises(ConfigError, match="no run at"):
        _cmd_evaluate_only(cfg)


# -- processes --------------------------------------------------------------------------------------------------------

def _popen(args, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _count(stdout: str, label: str) -> int:
    for line in stdout.splitlines():
        if line.strip().startswith(label + "  "):
            return int(line.split()[-1])
    raise AssertionError(f"{label!r} not in {stdout}")


@pytest.mark.slow
def test_two_identical_commands_do_every_item_exactly_once(tmp_path):
    args = ["run=twice", "evaluate=off", "model.height=96", "model.width=160", "model.num_frames=257",
            "progress=false", "trajectories=[lrlr,lrud]"]
    procs = [_popen(args, tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    done = [_count(o, "done") for o, _ in outs]
    elsewhere = [_count(o, "done elsewhere") + _count(o, "skipped (already done)") for o, _ in outs]
    run_dir = tmp_path / "outputs" / "twice"
    metas = [json.loads(m.read_text()) for m in run_dir.glob("*/*/seed-*/*/*/meta.json")]
    assert len(metas) == 10 and all(m["status"] == "done" for m in metas)
    assert sum(done) == 10, (done, outs)  # every item generated exactly once across both processes
    assert all(d > 0 for d in done), "the two processes did not share the work"
    assert [d + e for d, e in zip(done, elsewhere)] == [10, 10]  # each saw every item finished, once
    from harness.video import probe_video

    for m in metas:
        assert probe_video(run_dir / m["manifest"]["dir"] / "video.mp4")["num_frames"] == 257
    assert len((run_dir / "manifest.jsonl").read_text().splitlines()) == 10
    assert not [p for p in run_dir.rglob(".*") if p.is_file() and p.name not in (".manifest.lock", ".takeover")]


@pytest.mark.slow
def test_shards_evaluate_only_when_the_run_is_complete(tmp_path):
    base = ["run=sh", "cases.include=[environment_rocket,human_astronaut]", *SMALL]
    r0 = run_cli([*base, "shard=0/2"], tmp_path)
    assert r0.returncode == 0, r0.stderr
    assert "evaluation deferred: 1 item(s)" in r0.stderr  # a status line (logging, stderr)
    assert not (tmp_path / "outputs" / "sh" / "eval").exists()
    r1 = run_cli([*base, "shard=1/2"], tmp_path)
    assert r1.returncode == 0, r1.stderr
    assert "evaluated 2 video(s)" in r1.stdout and (tmp_path / "outputs" / "sh" / "eval").is_dir()


def test_a_garbage_manifest_line_is_reported_with_file_and_line(tmp_path):
    from harness.app.verify import _manifest_rows
    from harness.io import JsonLinesError, read_jsonl
    from harness.outputs import RunDir

    p = tmp_path / "manifest.jsonl"
    p.write_text('{"key": "a"}\n\n{"key": "b"\n')
    with pytest.raises(JsonLinesError, match=r"manifest\.jsonl:3: not valid JSON"):
        read_jsonl(p)
    with pytest.raises(JsonLinesError, match=r"manifest\.jsonl:3: not valid JSON"):
        RunDir(tmp_path).rows()
    problems: list[str] = []
    assert _manifest_rows(RunDir(tmp_path), problems) == {} and "manifest.jsonl:3" in problems[0]
