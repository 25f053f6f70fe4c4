"""``python -m harness.bench plan``: the time to plan and compile a whole study as a dry run.

Builds a synthetic case set in a temporary folder (``--cases`` cases, 260 by default: one YAML file per case,
the four families in turn, tiny generated PNG images of a few sizes and fields of view, every case on every
trajectory), then runs the nine-model study (``experiment=nine_model_study``: every upstream model in its
paper context on ``lrlr, lrlrlr, lrud, square``) as a dry run into a temporary output root, exactly as a user
would: ``python -m harness -m experiment=nine_model_study dry_run=true cases=folder cases.source=<tmp> ...`` in a
subprocess (Hydra sweep, imports, planning, compiling, manifest). ``--shards n`` starts n such processes at once
(``shard=i/n``, one run directory), e.g. one per core.

Each repeat starts from an empty output root. Prints every repeat, min and median seconds, the items per second,
and the ratio of the median to the 60 s target (issue: 9 models x 260 cases x 4 trajectories in under 60 s on
2 cores) with a verdict line. ``--models`` / ``--cases`` / ``--trajectories`` run it smaller for a quick look;
the target line then scales the target by the fraction of the full study's items.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.contracts import available
from harness import PROJECT_ROOT
from harness.io import write_text

if TYPE_CHECKING:
    import numpy as np

TARGET_S = 60.0
FULL_CASES = 260
UPSTREAM = tuple(available())  # the upstream models: the folders of adapters/ that hold a contract.yaml
TRAJECTORIES = ("lrlr", "lrlrlr", "lrud", "square")
#: (height, width) of the synthetic images and their fields of view: a handful of distinct canvas intrinsics,
#: as a real case set has (each distinct K is its own camera path and native controls)
SIZES = ((48, 64), (45, 80), (64, 64), (60, 48))
HFOVS = (None, 50.0)


def synthetic_image(i: int, height: int, width: int) -> np.ndarray:
    """A small RGB image: a horizontal colour gradient with three flat rectangles (seeded by ``i``)."""
    import numpy as np

    rng = np.random.default_rng(i)
    t = (np.arange(width) / width)[None, :, None]
    img = rng.uniform(0, 255, 3) * (1 - t) + rng.uniform(0, 255, 3) * t
    img = np.repeat(img, height, axis=0)
    for _ in range(3):
        y0, x0 = int(rng.integers(0, height - 8)), int(rng.integers(0, width - 8))
        img[y0:y0 + int(rng.integers(4, height // 2)), x0:x0 + int(rng.integers(4, width // 2))] = rng.uniform(0, 255, 3)
    return img.astype(np.uint8)


_QUESTIONS = [("return_progress", "yes"), ("return_progress", "no"), ("persistence_reset", "no"),
              ("persistence_reset", "yes"), ("final_state", "yes"), ("final_state", "no"),
              ("causal_physical", "yes"), ("causal_physical", "no")]


def write_case_set(folder: Path, n: int) -> Path:
    """``n`` valid cases in ``folder`` (``case_0000.yaml``, ``case_0001.yaml``, ... with their PNGs in
    ``images/``); returns the folder."""
    import cv2
    import yaml

    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    families = ("environment", "object", "human", "dynamic")
    for i in range(n):
        h, w = SIZES[i % len(SIZES)]
        img = synthetic_image(i, h, w)
        name = f"images/case_{i:04d}.png"
        cv2.imwrite(str(folder / name), img[..., ::-1])
        fam = families[i % len(families)]
        case: dict[str, Any] = {"id": f"{fam}_{i:04d}", "family": fam, "image": name,
                      "prompt": f"Synthetic scene {i}: a gradient wall with three coloured blocks ({fam})."}
        hfov = HFOVS[(i // len(SIZES)) % len(HFOVS)]
        if hfov is not None:
            case["hfov_deg"] = hfov
        box = [1, 1, w // 2, h // 2]
        if fam in ("object", "dynamic"):
            case["targets"] = {"objects": [{"id": "block", "name": "coloured block", "box": box,
                                            "polygon": [[1, 1], [w // 2, 1], [w // 2, h // 2], [1, h // 2]]}]}
        elif fam == "human":
            case["targets"] = {"persons": [{"id": "p0", "box": box}]}
        if fam == "dynamic":
            case["event"] = {"initial_state": "The block rests.", "action": "The block slides left.",
                             "expected_next_state": "The block has moved.",
                             "questions": [{"aspect": a, "question": f"Question {k}?", "answer": ans}
                                           for k, (a, ans) in enumerate(_QUESTIONS)]}
        case["trajectories"] = list(TRAJECTORIES)
        write_text(folder / f"case_{i:04d}.yaml", yaml.safe_dump(case, sort_keys=False))
    return folder


def _command(cases_dir: Path, out: Path, models: list[str], trajectories: list[str], shard: str,
             previews: bool) -> list[str]:
    return [sys.executable, "-m", "harness", "-m", "experiment=nine_model_study", "dry_run=true",
            f"model={','.join(models)}", f"trajectory={','.join(trajectories)}", "cases=folder",
            f"cases.source={cases_dir}", f"output_root={out}", "run=bench_plan", "progress=false", "evaluate=off",
            f"shard={shard}", f"previews={'true' if previews else 'false'}"]


def run_once(cases_dir: Path, out: Path, args: argparse.Namespace) -> tuple[float, float, int]:
    """One dry run of the study into ``out`` (fresh); returns (wall seconds, CPU seconds of the processes,
    compiled items)."""
    import resource

    root = PROJECT_ROOT
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(_command(cases_dir, out, args.models, args.trajectories, f"{i}/{args.shards}",
                                       args.previews), cwd=out, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(args.shards)]
    results = [p.communicate() for p in procs]
    dt = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    for p, (so, se) in zip(procs, results):
        if p.returncode != 0:
            raise SystemExit(f"the dry run failed (exit {p.returncode}):\n{se[-3000:]}\n{so[-2000:]}")
    manifest = out / "bench_plan" / "manifest.jsonl"
    n = sum(1 for line in manifest.read_text().splitlines() if line.strip()) if manifest.is_file() else 0
    return dt, cpu, n


def run(args: argparse.Namespace) -> int:
    args.models = args.models or list(UPSTREAM)
    args.trajectories = args.trajectories or list(TRAJECTORIES)
    items = len(args.models) * args.cases * len(args.trajectories)
    full = len(UPSTREAM) * FULL_CASES * len(TRAJECTORIES)
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        cases_dir = write_case_set(Path(tmp) / "cases", args.cases)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        load = "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
        print(f"dry run of {len(args.models)} model(s) x {args.cases} case(s) x {len(args.trajectories)} "
              f"trajectory(ies) = {items} items ({items / full:.3f} of the full study's {full}), "
              f"{len(args.models) * len(args.trajectories)} sweep job(s), {args.shards} process(es), "
              f"previews={'on' if args.previews else 'off'}; {cpus} CPU(s), load average {load}")
        times: list[float] = []
        cpu_s: list[float] = []
        for r in range(args.repeats):
            out = Path(tmp) / f"out{r}"
            out.mkdir()
            dt, cpu, n = run_once(cases_dir, out, args)
            if n != items:
                raise SystemExit(f"expected {items} compiled items in the manifest, found {n}")
            times.append(dt)
            cpu_s.append(cpu)
            print(f"  repeat {r + 1}: {dt:7.2f} s wall, {cpu:7.2f} CPU s  ({dt / n * 1000:.2f} ms per item, "
                  f"{n / dt:.0f} items/s)")
    mn, med = min(times), statistics.median(times)
    cmin, cmed = min(cpu_s), statistics.median(cpu_s)
    target = TARGET_S * items / full
    scaled = " (target scaled to this fraction of the full study)" if items != full else ""
    print(f"seconds: min {mn:.2f}, median {med:.2f} over {len(times)} repeat(s); {med / items * 1000:.2f} ms per item")
    print(f"CPU seconds (all processes): min {cmin:.2f}, median {cmed:.2f}; on {args.shards} dedicated core(s) that is "
          f">= {cmed / args.shards:.2f} s wall (the machine's other load is what separates the two)")
    if items != full:
        print(f"full study estimate: {med / items * full:.1f} s wall for {full} items (median scaled linearly in "
              "items; start-up and per-job costs make this an upper bound for small runs)")
    ok = med <= target
    print(f"target: plan + compile in <= {target:.1f} s{scaled}: median {med:.2f} s = {med / target:.2f}x of the "
          f"target: {'met' if ok else 'MISSED'}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``plan`` on the ``python -m harness.bench`` subcommands."""
    p = sub.add_parser("plan", help="dry-run time of the nine-model study on a synthetic 260-case set")
    p.add_argument("--cases", type=int, default=FULL_CASES, help="synthetic cases (default 260)")
    p.add_argument("--models", nargs="+", default=None,
                   help=f"model names (default the upstream models: {' '.join(UPSTREAM)})")
    p.add_argument("--trajectories", nargs="+", default=None, help="trajectory names (default all four)")
    p.add_argument("--repeats", type=int, default=2, help="dry runs, each into a fresh output root")
    p.add_argument("--shards", type=int, default=1, help="processes started at once (shard=i/n), e.g. one per core")
    p.add_argument("--previews", action="store_true", help="also draw every item's preview.png (previews=true)")
    p.set_defaults(fn=run)
