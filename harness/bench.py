"""Benchmarks (printed ratios and rates, never timed tests).

``python -m harness.bench reference``: frames per second of the reference world model at 480x832 on one CPU core
(generation only, and generation + H.264 encoding), per context policy and trajectory.
``python -m harness.bench context``: the tensor-level KV-context benchmark on the tiny causal DiT and on diffusers'
WanTransformer3DModel through the harness KV cache (needs torch; ``--model wan`` needs diffusers).
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
    args = ap.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
