"""Benchmarks (printed ratios and rates, never timed tests).

``python -m harness.bench reference``: frames per second of the reference world model at 480x832 on one CPU core
(generation only, and generation + H.264 encoding), per context policy and trajectory.
``python -m harness.bench context``: the tensor-level KV-context benchmark on the tiny causal DiT and on diffusers'
WanTransformer3DModel through the harness KV cache (needs torch; ``--model wan`` needs diffusers).
``python -m harness.bench eval``: total evaluation time of a run against the time of the backbone forwards alone
(target: total <= 1.10x backbone time at the default settings), over repeats without the feature cache.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def _single_core() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import cv2

    cv2.setNumThreads(1)
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass


def bench_reference(args: argparse.Namespace) -> int:
    _single_core()
    from adapters.reference.model import rollout
    from harness.cases import load_case_set
    from harness.context import ContextPolicy
    from harness.imaging import resize_cover_crop
    from harness.video import VideoWriter
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov

    h, w = args.height, args.width
    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    img = resize_cover_crop(case.load_image(), (h, w))
    K = intrinsics_from_fov(60, w, h)
    policies = {"fullkv": ContextPolicy(name="fullkv"), "sliding": ContextPolicy(name="sliding", sink=4, recent=12),
                "fov": ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2)}
    specs = {"lrlr": TrajectorySpec(name="lrlr", cycles=("left", "left")),
             "square": TrajectorySpec(name="square", kind="square")}
    print(f"reference model, {w}x{h}, {args.frames} frames, 1 CPU core (target >= 25 frames/s)")
    print(f"{'trajectory':<10} {'context':<8} {'gen fps':>8} {'gen+enc fps':>12}")
    worst = float("inf")
    for tname, spec in specs.items():
        path = build_path(spec, args.frames, 16, K, h, w)
        for pname, pol in policies.items():
            n = [0]

            def count(_f, n=n):
                n[0] += 1

            t0 = time.perf_counter()
            rollout(img, path.c2w, K, pol, (1, case.id, tname), count)
            gen = args.frames / (time.perf_counter() - t0)
            with tempfile.TemporaryDirectory() as d:
                wr = VideoWriter(os.path.join(d, "v.mp4"), 16)
                t0 = time.perf_counter()
                rollout(img, path.c2w, K, pol, (1, case.id, tname), wr)
                wr.close()
                enc = args.frames / (time.perf_counter() - t0)
            worst = min(worst, gen)
            print(f"{tname:<10} {pname:<8} {gen:8.1f} {enc:12.1f}")
    print(f"slowest generation rate: {worst:.1f} frames/s = {worst / 25:.2f}x the 25 frames/s target")
    return 0


def bench_eval(args: argparse.Namespace) -> int:
    """Evaluate a run ``--repeats`` times from scratch (no metrics reuse, no feature cache) and print total vs
    backbone-forward time. Without ``--run``, a small reference-model run is generated first (3 cases, LRLR)."""
    import statistics
    import subprocess
    from pathlib import Path

    from evaluate.stage import EvalConfig, evaluate_run
    from harness.registry import group_yaml

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run else None
        if run is None:
            cmd = [sys.executable, "-m", "harness", "run=bench", "evaluate=off", "progress=false",
                   f"model.num_frames={args.frames}", f"model.height={args.height}", f"model.width={args.width}",
                   "cases.include=[environment_rocket,object_coffee,human_astronaut]"]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                                os.environ.get("PYTHONPATH", "")])}
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            run = Path(tmp) / "outputs" / "bench"
        cfg = dict(group_yaml("evaluate", "default"))
        cfg.pop("description", None)
        cfg["device"] = args.device
        ecfg = EvalConfig.from_dict(cfg)
        n = sum(1 for x in (run / "manifest.jsonl").read_text().splitlines() if x.strip())
        print(f"evaluation of {run} ({n} videos), default settings, device={args.device}, weights root "
              f"{args.weights or '(default)'}; {args.repeats} repeats, no reuse, no feature cache")
        print(f"{'repeat':>6} {'total [s]':>10} {'backbones [s]':>14} {'weights load [s]':>17} {'tables [s]':>11} "
              f"{'ratio':>7}")
        ratios = []
        for i in range(args.repeats):
            out = evaluate_run(run, ecfg, force=True, weights_root=Path(args.weights) if args.weights else None,
                               use_cache=False)
            t = out["timings"]
            ratio = t["total_s"] / max(t["backbone_s"], 1e-9)
            ratios.append(ratio)
            print(f"{i + 1:>6} {t['total_s']:10.2f} {t['backbone_s']:14.2f} {t['load_s']:17.2f} {t['tables_s']:11.2f} "
                  f"{ratio:7.3f}")
        spread = (max(ratios) - min(ratios)) / 2 if len(ratios) > 1 else 0.0
        print(f"total / backbone time: median {statistics.median(ratios):.3f}x (+-{spread:.3f} over {len(ratios)} "
              "repeats; target <= 1.10x)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("reference", help="reference world model frames/s on one core")
    r.add_argument("--height", type=int, default=480)
    r.add_argument("--width", type=int, default=832)
    r.add_argument("--frames", type=int, default=493)
    r.set_defaults(fn=bench_reference)
    c = sub.add_parser("context", help="KV-context policy cost on the tiny causal DiT and diffusers' Wan (needs torch)")
    c.add_argument("--frames", type=int, default=493)
    c.add_argument("--device", default="cpu")
    c.add_argument("--repeats", type=int, default=3, help="rollouts per point, reported as min and median")
    c.add_argument("--model", choices=["tiny", "wan", "both"], default="both",
                   help="tiny causal DiT, diffusers' WanTransformer3DModel, or both")
    c.add_argument("--lengths", type=int, nargs="*", default=None,
                   help="rollout lengths in frames besides --frames (default 97 193 289 385; none given: only --frames)")
    c.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    c.set_defaults(fn=lambda a: __import__("harness.benchmarks.context", fromlist=["run"]).run(a))
    e = sub.add_parser("eval", help="evaluation time vs backbone-forward time")
    e.add_argument("--run", default=None, help="an existing run directory (default: generate a small one)")
    e.add_argument("--weights", default=None, help="weights root (default: $WORLDMEM_WEIGHTS or the user cache)")
    e.add_argument("--device", default="auto")
    e.add_argument("--repeats", type=int, default=3)
    e.add_argument("--frames", type=int, default=193)
    e.add_argument("--height", type=int, default=480)
    e.add_argument("--width", type=int, default=832)
    e.set_defaults(fn=bench_eval)
    args = ap.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
