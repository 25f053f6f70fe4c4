"""The GPU pool: disjoint device sets, full utilisation, layouts with an extra device, isolated crashes, other
processes' GPUs respected; and the runner driving stand-in upstream jobs eight at a time."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.app.run_config import RunConfig
from harness.gpu_pool import DeviceConfigError, GPUPool, current_devices, parse_devices
from tests.support import STANDIN

EIGHT = [str(i) for i in range(8)]


def _max_overlap(intervals):
    """Largest number of [start, end) intervals alive at one instant."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def _assert_disjoint_when_overlapping(records):
    for i, a in enumerate(records):
        for b in records[i + 1:]:
            if a["start"] < b["end"] and b["start"] < a["end"]:
                assert not set(a["devs"]) & set(b["devs"]), (a, b)


def _run_jobs(pool, n_jobs, k, hold=0.15, crash=()):
    records, lock = [], threading.Lock()

    def job(i):
        with pool.job(k) as devs:
            assert list(current_devices()) == devs
            t0 = time.monotonic()
            time.sleep(hold)
            with lock:
                records.append({"i": i, "devs": devs, "start": t0, "end": time.monotonic()})
            if i in crash:
                raise RuntimeError("job crashed")
        return devs

    results = []
    with ThreadPoolExecutor(max_workers=n_jobs) as tp:
        futs = [tp.submit(job, i) for i in range(n_jobs)]
        for f in futs:
            try:
                results.append(f.result())
            except RuntimeError:
                results.append(None)
    return records, results


def test_one_gpu_jobs_run_eight_at_a_time_on_disjoint_gpus(tmp_path):
    pool = GPUPool(EIGHT, lock_dir=tmp_path)
    records, _ = _run_jobs(pool, 16, 1, hold=0.3)
    _assert_disjoint_when_overlapping(records)
    assert _max_overlap([(r["start"], r["end"]) for r in records]) == 8
    assert pool.peak_in_use == 8 and {d for r in records for d in r["devs"]} == set(EIGHT)


def test_layout_with_an_extra_device(tmp_path):
    """gpus_per_job=2 plus one extra device (an async VAE decoder): three GPUs per job, two jobs fit in eight."""
    pool = GPUPool(EIGHT, lock_dir=tmp_path)
    records, _ = _run_jobs(pool, 6, 3, hold=0.3)
    _assert_disjoint_when_overlapping(records)
    assert all(len(r["devs"]) == 3 for r in records)
    assert _max_overlap([(r["start"], r["end"]) for r in records]) == 2 == pool.capacity(3)


def test_a_crashed_job_frees_its_gpus_and_the_others_go_on(tmp_path):
    pool = GPUPool(EIGHT[:2], lock_dir=tmp_path)
    records, results = _run_jobs(pool, 6, 1, hold=0.05, crash={0, 3})
    assert len(records) == 6 and sum(r is None for r in results) == 2
    assert pool.acquire(2, timeout=1) == EIGHT[:2]  # nothing leaked


def test_gpus_held_by_another_process_are_not_handed_out(tmp_path):
    pool = GPUPool(EIGHT[:3], lock_dir=tmp_path)
    fd = os.open(tmp_path / "gpu-1.lock", os.O_CREAT | os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a second harness on this node holds GPU 1 (own open file: like a process)
    try:
        assert pool.acquire(2, timeout=1) == ["0", "2"]
        with pytest.raises(TimeoutError):
            pool.acquire(1, timeout=0.3)
    finally:
        os.close(fd)
    assert pool.acquire(1, timeout=1) == ["1"]  # freed by the kernel when the holder closed / died


def test_device_settings(monkeypatch):
    assert parse_devices([0, 1, 2]) == ["0", "1", "2"] and parse_devices("3,5") == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert parse_devices("auto") == ["4", "6"]
    for bad in ([0, 0], ["x"], 1.5):
        with pytest.raises(DeviceConfigError):
            parse_devices(bad)
    with pytest.raises(DeviceConfigError, match="needs 9 GPU"):
        GPUPool(EIGHT).acquire(9)


# -- the runner with stand-in upstream jobs --------------------------------------------------------------------------

POOL_UPSTREAM = STANDIN / "pool_upstream.py"


@pytest.mark.slow
def test_runner_runs_one_gpu_upstream_jobs_eight_at_a_time(tmp_path, monkeypatch):
    from harness.config_groups import group_yaml
    from harness.app.runner import plan_from_config, run_items

    checkout = tmp_path / "checkout"
    script = checkout / "inference_video_scripts/wm/inference_sana_wm_streaming.py"
    script.parent.mkdir(parents=True)
    script.write_text(POOL_UPSTREAM.read_text())
    ckpt = tmp_path / "w.safetensors"
    ckpt.write_bytes(b"0")
    rec = tmp_path / "records"
    rec.mkdir()
    mcfg = {**group_yaml("model", "sana_wm"), "upstream_dir": str(checkout), "checkpoint": str(ckpt),
            "python": sys.executable, "launch": "python", "height": 48, "width": 64, "num_frames": 49}
    for k, v in {"FAKE_RECORD_DIR": str(rec), "FAKE_FRAMES": "48", "FAKE_FPS": "16", "FAKE_SLEEP": "3",
                 "FAKE_CRASH_ON": "/object_coffee/"}.items():
        monkeypatch.setenv(k, v)
    cfg = {"model": mcfg, "context": {"name": "fullkv"}, "trajectory": group_yaml("trajectory", "lrlr"),
           "trajectories": ["lrlr", "lrud"], "cases": {"source": "builtin:demo"}, "output_root": str(tmp_path / "o"),
           "run": "pool", "seed": None, "devices": EIGHT, "gpu_lock_dir": str(tmp_path / "gpulocks")}
    cfg = RunConfig.from_mapping(cfg)
    plan = plan_from_config(cfg)
    assert len(plan.items) == 10
    summary = run_items(plan, progress=False)
    records = [json.loads(p.read_text()) for p in rec.glob("*.json")]
    assert len(records) == 10
    for r in records:
        r["devs"] = r["cuda"].split(",")
    assert all(len(r["devs"]) == 1 for r in records)
    _assert_disjoint_when_overlapping(records)
    concurrency = _max_overlap([(r["start"], r["end"]) for r in records])
    print(f"measured concurrency of 1-GPU stand-in jobs on 8 GPUs: {concurrency}")
    assert concurrency == 8 and summary.max_concurrent == 8
    # the crash is isolated: the two object_coffee items failed, the eight others are done
    assert sorted(k.split("/")[-1] for k in summary.failed) == ["object_coffee", "object_coffee"]
    assert len(summary.done) == 8
    metas = [json.loads((plan.run_dir / i.rel_dir / "meta.json").read_text()) for i in plan.items]
    assert all(m["owner"]["devices"] and len(m["owner"]["devices"]) == 1 for m in metas)


def test_a_job_bigger_than_the_pool_is_refused_up_front(tmp_path):
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml
    from harness.app.runner import gpu_pool_for, job_gpus

    mg3 = build_adapter(group_yaml("model", "matrix_game3"))  # 7 ranks + 1 async-VAE GPU = 8
    assert job_gpus(mg3) == 8 and job_gpus(mg3, dry_run=True) == 0
    big = build_adapter({**group_yaml("model", "matrix_game3"), "gpus_per_job": 9})
    with pytest.raises(DeviceConfigError, match="needs 9 GPU"):
        gpu_pool_for(big, RunConfig.from_mapping({"devices": EIGHT, "gpu_lock_dir": str(tmp_path)}))
    assert gpu_pool_for(mg3, RunConfig.from_mapping({"devices": EIGHT}), dry_run=True) is None
    ref = build_adapter(group_yaml("model", "reference"))
    assert gpu_pool_for(ref, RunConfig.from_mapping({"devices": EIGHT})) is None  # in-process CPU model: no pool
