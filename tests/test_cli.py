"""The command line as a user meets it: runs, dry runs, listing, resume, sweeps and clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli

SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "progress=false"]


def _items(run_dir: Path):
    return sorted(run_dir.glob("*/*/seed-*/*/*/meta.json"))


@pytest.mark.slow
def test_run_writes_a_self_describing_directory(tmp_path):
    r = run_cli(["cases.include=[environment_rocket,human_astronaut]", "run=t", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "outputs" / "t"
    item = run_dir / "reference" / "fov" / "seed-1" / "lrlr" / "environment_rocket"
    for f in ("video.mp4", "camera.npz", "controls/poses.npy", "controls/intrinsics.npy", "context_trace.json",
              "meta.json"):
        assert (item / f).is_file(), f
    meta = json.loads((item / "meta.json").read_text())
    assert meta["status"] == "done" and meta["seed"] == 1 and meta["context"]["name"] == "fov"
    assert meta["video"]["num_frames"] == 65 and meta["camera"]["phases"]["V"][0] == 0
    assert meta["versions"]["numpy"] and "config" in meta
    from harness.video import probe_video

    info = probe_video(item / "video.mp4")
    assert info["num_frames"] == 65 and info["codec"] == "h264" and abs(info["fps"] - 16) < 1e-6
    lines = (run_dir / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["status"] == "done" for x in lines)
    assert "done" in r.stdout and "2" in r.stdout
    assert list((run_dir / ".hydra").glob("*/.hydra/config.yaml"))  # Hydra's resolved config


@pytest.mark.slow
def test_multirun_context_and_seed_sweep_resumes(tmp_path):
    args = ["-m", "context=fullkv,sliding,fov", "seed=1,2", "cases.include=[environment_rocket]", "run=s", *SMALL]
    r = run_cli(args, tmp_path)
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "outputs" / "s"
    metas = _items(run_dir)
    assert len(metas) == 6
    assert {(m.parts[-5], m.parts[-4]) for m in metas} == {(c, f"seed-{s}") for c in ("fullkv", "sliding", "fov")
                                                           for s in (1, 2)}
    stamps = {m: m.stat().st_mtime_ns for m in metas}
    r2 = run_cli(args, tmp_path)
    assert r2.returncode == 0 and r2.stdout.count("skipped (already done)  1") == 6
    assert all(m.stat().st_mtime_ns == t for m, t in stamps.items())  # nothing rewritten
    assert len((run_dir / "manifest.jsonl").read_text().splitlines()) == 6


@pytest.mark.slow
def test_resume_after_a_killed_run(tmp_path):
    args = ["cases.include=[environment_rocket,human_astronaut,object_coffee]", "run=k", "model.height=96",
            "model.width=160", "model.num_frames=401", "progress=false"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    p = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "outputs" / "k"
    deadline = time.time() + 120
    while time.time() < deadline:
        done = [m for m in _items(run_dir) if json.loads(m.read_text()).get("status") == "done"]
        if done:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert done, "first item never finished"
    statuses = {m.parent.name: json.loads(m.read_text())["status"] for m in _items(run_dir)}
    assert list(statuses.values()).count("done") < 3  # it really was interrupted
    r = run_cli(args, tmp_path)
    assert r.returncode == 0, r.stderr
    n_done = list(statuses.values()).count("done")
    assert f"skipped (already done)  {n_done}" in r.stdout
    assert all(json.loads(m.read_text())["status"] == "done" for m in _items(run_dir))
    assert not list(run_dir.rglob("*.partial.mp4")) and not list(run_dir.rglob(".*.tmp*"))


def test_dry_run_compiles_without_generating(tmp_path):
    r = run_cli(["dry_run=true", "previews=true", "trajectory=square", "run=d", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr
    metas = _items(tmp_path / "outputs" / "d")
    assert len(metas) == 4  # dynamic_cat does not list the square
    for m in metas:
        assert json.loads(m.read_text())["status"] == "compiled"
        assert (m.parent / "preview.png").is_file() and (m.parent / "controls" / "poses.npy").is_file()
        assert not (m.parent / "video.mp4").exists()


def test_list_validate_preview(tmp_path):
    r = run_cli(["list"], tmp_path)
    assert r.returncode == 0 and "reference" in r.stdout and "sliding" in r.stdout and "lrud" in r.stdout
    r = run_cli(["validate"], tmp_path)
    assert r.returncode == 0 and "5 case(s) valid" in r.stdout
    r = run_cli(["preview", "trajectory=lrud"], tmp_path)
    assert r.returncode == 0 and (tmp_path / "outputs" / "previews" / "lrud_reference.png").is_file()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["model=refrence"], "Did you mean 'reference'"),
        (["context=slidng"], "Did you mean 'sliding'"),
        (["trajectory=lrld"], "Unknown trajectory"),
        (["trajectory.yaw_deg=10"], "trajectory.yaw_deg"),
        (["cases=folder", "cases.source=/nonexistent"], "cases.source"),
        (["cases.include=[nope]"], "cases.include"),
        (["model.fps=0"], "model.fps"),
        (["context.recent=-2"], "context.recent"),
        (["shard=3/2"], "shard"),
    ],
)
def test_bad_input_clear_error_nonzero_exit(tmp_path, args, needle):
    r = run_cli([*args, "run=e", *SMALL], tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert not _items(tmp_path / "outputs" / "e")  # nothing half-written


def test_malformed_case_folder_and_missing_image(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "a.yaml").write_text("id: a\nfamily: object\nimage: a.png\nprompt: x\n")
    r = run_cli(["cases=folder", f"cases.source={cases}", "validate"], tmp_path)
    assert r.returncode == 2 and "a.yaml" in r.stderr and "persons" not in r.stderr and "objects" in r.stderr
    (cases / "a.yaml").write_text("id: a\nfamily: environment\nimage: missing.png\nprompt: x\n")
    r = run_cli(["cases=folder", f"cases.source={cases}", "validate"], tmp_path)
    assert r.returncode == 2 and "missing.png" in r.stderr


@pytest.mark.slow
def test_shards_split_items_without_collisions(tmp_path):
    base = ["run=sh", "cases.include=[environment_rocket,human_astronaut,object_coffee]", *SMALL]
    for i in range(2):
        assert run_cli([*base, f"shard={i}/2"], tmp_path).returncode == 0
    metas = _items(tmp_path / "outputs" / "sh")
    assert len(metas) == 3
    assert len((tmp_path / "outputs" / "sh" / "manifest.jsonl").read_text().splitlines()) == 3


@pytest.mark.slow
def test_submitit_launcher_runs_jobs_as_separate_processes(tmp_path):
    """The Slurm path's local twin: sweep jobs run as submitit processes into one run directory."""
    r = run_cli(["-m", "launcher=submitit_local", "context=fullkv,sliding", "run=sub",
                 "cases.include=[environment_rocket]", "evaluate=off", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    run_dir = tmp_path / "outputs" / "sub"
    assert {m.parts[-5] for m in _items(run_dir)} == {"fullkv", "sliding"}
    assert len((run_dir / "manifest.jsonl").read_text().splitlines()) == 2


# -- issue 11: secrets, Hydra errors, nothing written on failure, Slurm off a cluster --------------------------------

SECRET = "hf_SECRETVALUE123456"


@pytest.mark.slow
def test_secrets_in_model_env_are_never_written(tmp_path):
    r = run_cli(["-m", "model=sana_wm", "context=fullkv,sliding", "dry_run=true", "run=sec", "evaluate=off",
                 "cases.include=[environment_rocket]", f"+model.env={{HF_TOKEN: {SECRET}, MY_MODE: plain}}",
                 "progress=false"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert SECRET not in r.stdout + r.stderr
    files = [p for p in (tmp_path / "outputs").rglob("*") if p.is_file()]
    assert len(files) > 10
    leaks = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert not leaks, leaks
    cmds = list((tmp_path / "outputs" / "sec").rglob("command.sh"))
    assert len(cmds) == 2
    text = cmds[0].read_text()
    assert 'export HF_TOKEN="${HF_TOKEN' in text and "export MY_MODE=plain" in text
    meta = json.loads(next((tmp_path / "outputs" / "sec").rglob("meta.json")).read_text())
    assert meta["model"]["env"] == {"HF_TOKEN": "<redacted>", "MY_MODE": "plain"}
    saved = list((tmp_path / "outputs" / "sec" / ".hydra").rglob("config.yaml"))
    assert saved and "<redacted>" in saved[0].read_text()


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["+foo=["], "no viable alternative"),    # Hydra's own override parse error
    (["nosuchkey=1"], "nosuchkey"),            # Hydra: key not in the struct config
    (["seed=1.5"], "seed=1.5"),
    (["seed=-1"], "seed=-1"),
    (["run=../../x"], "run="),
    (["model.height=97"], "must be even"),
])
def test_user_errors_exit_2_and_write_nothing(tmp_path, args, needle):
    r = run_cli(["run=e", *SMALL, *args], tmp_path)  # the case's own args last, so they win
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "outputs").exists()  # not even outputs/<run>/.hydra/
    assert not list(tmp_path.parent.glob("x"))


@pytest.mark.slow
def test_slurm_launcher_off_a_cluster_says_so(tmp_path):
    r = run_cli(["-m", "launcher=slurm", "context=fullkv,sliding", "run=sl", *SMALL], tmp_path,
                env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert "launcher=slurm needs a Slurm cluster" in r.stderr and "launcher=submitit_local" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_verify_reports_every_planned_item(tmp_path):
    base = ["run=v", "cases.include=[environment_rocket,human_astronaut]", *SMALL]
    assert run_cli([*base, "evaluate=off"], tmp_path).returncode == 0
    r = run_cli(["verify", *base], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2/2 item(s) deliverable" in r.stdout
    item = tmp_path / "outputs" / "v" / "reference" / "fov" / "seed-1" / "lrlr" / "human_astronaut"
    with open(item / "video.mp4", "r+b") as f:  # truncate: undecodable, wrong hash
        f.truncate(1000)
    (item / ".meta.json.abc.json").write_text("{")
    r = run_cli(["verify", *base], tmp_path)
    assert r.returncode == 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("reference/fov/seed-1/lrlr/human_astronaut"))
    assert "FAIL" in row and "1/2 item(s) deliverable; 1 FAILED" in r.stdout
    assert "temporary files left: .meta.json.abc.json" in r.stdout
    r = run_cli(["verify", *base, "model.num_frames=97"], tmp_path)  # another config: fingerprints differ
    assert r.returncode == 1 and "different config" in r.stdout
