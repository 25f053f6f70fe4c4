"""kill -9 at random points, during generation and during evaluation, then rerun: nothing is lost, duplicated,
undecodable or left behind, and the bytes equal those of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.support import ROOT

ARGS = ["model.height=96", "model.width=160", "model.num_frames=257", "progress=false", "trajectories=[lrlr,lrud]"]
N_ITEMS = 10
MIN_KILLS = 10
GEN_KILLS = 7


def _start(run: str, cwd: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "harness", f"run={run}", *ARGS], cwd=cwd, env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def _leftovers(run_dir: Path) -> list[str]:
    """Temporary files and item locks: anything a finished run must not leave."""
    from harness.outputs import CONTROL_FILES

    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and (
        (p.name.startswith(".") and p.name not in CONTROL_FILES) or (p.parent.name == ".locks" and p.suffix == ".lock")))


@pytest.mark.slow
def test_kill_minus_nine_at_random_points(tmp_path):
    from harness.video import probe_video

    t0 = time.monotonic()
    ref = _start("ref", tmp_path, tmp_path / "ref.log")
    assert ref.wait(timeout=600) == 0, (tmp_path / "ref.log").read_text()[-3000:]
    uninterrupted_s = time.monotonic() - t0

    rng = np.random.default_rng(20261130)
    run_dir = tmp_path / "outputs" / "faulty"
    kills = {"generation": 0, "evaluation": 0}
    attempts = 0
    t_faulty = time.monotonic()

    def done_items() -> int:
        return sum(1 for m in run_dir.glob("*/*/seed-*/*/*/meta.json") if '"status": "done"' in m.read_text())

    def evaluated_items() -> int:
        return sum(1 for _ in run_dir.glob("*/*/seed-*/*/*/metrics.json"))

    # Kill points follow progress, not the clock (the machine may be loaded): a random delay after this attempt
    # finished one more item (generation) or evaluated one more video (evaluation). Every attempt makes progress,
    # so the test is bounded: at most N_ITEMS generation kills plus N_ITEMS evaluation kills.
    while True:
        attempts += 1
        log = tmp_path / f"faulty{attempts}.log"
        want = "generation" if kills["generation"] < GEN_KILLS and done_items() < N_ITEMS - 1 else (
            "evaluation" if sum(kills.values()) < MIN_KILLS or not kills["evaluation"] else None)
        p = _start("faulty", tmp_path, log)
        if want is None:
            assert p.wait(timeout=900) == 0, log.read_text()[-3000:]
            break
        counter = done_items if want == "generation" else evaluated_items
        base, deadline = counter(), time.monotonic() + 600
        while p.poll() is None and counter() <= base and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.5))
        if p.poll() is not None:
            assert p.returncode == 0, log.read_text()[-3000:]
            if want == "evaluation":  # finished before the kill point: evaluate again from scratch to kill it
                import shutil

                shutil.rmtree(run_dir / "eval", ignore_errors=True)
                for m in run_dir.rglob("metrics.json"):
                    m.unlink()
            continue
        # generation prints its summary table ("wall time [s]") before evaluating
        phase = "evaluation" if "wall time [s]" in log.read_text() else "generation"
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        kills[phase] += 1
    faulty_s = time.monotonic() - t_faulty
    total = sum(kills.values())
    print(f"kill test: {total} kills ({kills['generation']} during generation, {kills['evaluation']} during "
          f"evaluation) in {attempts} attempts; uninterrupted run {uninterrupted_s:.1f} s, faulty runs "
          f"{faulty_s:.1f} s")
    assert total >= MIN_KILLS and kills["generation"] >= 1 and kills["evaluation"] >= 1

    ref_dir = tmp_path / "outputs" / "ref"
    metas = sorted(run_dir.glob("*/*/seed-*/*/*/meta.json"))
    keys = [m.parent.relative_to(run_dir).as_posix() for m in metas]
    rows = [json.loads(x) for x in (run_dir / "manifest.jsonl").read_text().splitlines()]
    lost = N_ITEMS - sum(json.loads(m.read_text())["status"] == "done" for m in metas)
    duplicates = (len(rows) - len({r["key"] for r in rows})) + (len(keys) - len(set(keys)))
    undecodable = 0
    differing = []
    for k in keys:
        try:
            assert probe_video(run_dir / k / "video.mp4")["num_frames"] == 257
        except Exception:
            undecodable += 1
        for f in ("video.mp4", "camera.npz", "controls/poses.npy", "context_trace.json"):
            if (run_dir / k / f).read_bytes() != (ref_dir / k / f).read_bytes():
                differing.append(f"{k}/{f}")
    left = _leftovers(run_dir)
    print(f"lost {lost}, duplicates {duplicates}, undecodable {undecodable}, leftovers {len(left)}, "
          f"differing files {len(differing)}")
    assert len(keys) == N_ITEMS and len(rows) == N_ITEMS
    assert (lost, duplicates, undecodable) == (0, 0, 0)
    assert not left, left
    assert not differing, differing
    assert all((run_dir / k / "metrics.json").is_file() for k in keys) and (run_dir / "eval" / "summary.md").is_file()
