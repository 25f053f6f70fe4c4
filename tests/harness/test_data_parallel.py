"""Data-parallel in-process models: ``torchrun --nproc_per_node 2 -m harness`` on CPU (gloo-class processes)
writes the same video bytes as one process; rank 0 alone writes the manifest and evaluates."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT

ARGS = ["model=tiny_causal_dit", "model.num_frames=33", "progress=false", "context=sliding"]


def _harness(prefix, args, cwd):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([*prefix, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_ranks_split_the_plan_deterministically():
    from harness.dist import Rank, split

    items = list(range(11))
    parts = [split(items, Rank(r, 3)) for r in range(3)]
    assert parts == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    assert sorted(sum(parts, [])) == items


def test_rank_comes_from_the_launcher_environment(monkeypatch):
    from harness.dist import current_rank

    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    r = current_rank()
    assert (r.rank, r.world, r.local_rank, r.is_main) == (2, 4, 0, False)
    monkeypatch.setenv("RANK", "9")  # inconsistent: fall back to a single process rather than skip items
    assert current_rank().world == 1


@pytest.mark.slow
def test_torchrun_two_cpu_processes_write_the_same_bytes_as_one(tmp_path):
    one = _harness([sys.executable, "-m", "harness"], [*ARGS, "run=one", "evaluate=off"], tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _harness([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                    "-m", "harness"], [*ARGS, "run=two"], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = tmp_path / "outputs" / "one", tmp_path / "outputs" / "two"
    va = sorted(p.relative_to(a) for p in a.rglob("video.mp4"))
    assert len(va) == 5 and va == sorted(p.relative_to(b) for p in b.rglob("video.mp4"))
    for rel in va:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
        ma, mb = (json.loads((d / rel.parent / "meta.json").read_text()) for d in (a, b))
        assert ma["video"]["frames_sha256"] == mb["video"]["frames_sha256"]
    owners = [json.loads(m.read_text())["owner"] for m in b.rglob("meta.json")]
    assert {o["world"] for o in owners} == {2} and {o["rank"] for o in owners} <= {0, 1}
    tables = [line for line in two.stdout.splitlines() if line.strip().startswith("done  ")]
    assert len(tables) == 2 and sum(int(t.split()[-1]) for t in tables) == 5  # two ranks, each item done once
    assert two.stdout.count("evaluated ") == 1 and (b / "eval").is_dir()  # rank 0 alone evaluates
    assert len((b / "manifest.jsonl").read_text().splitlines()) == 5
