"""Benchmarks (printed ratios and rates, never timed tests).

``python -m harness.bench reference``: frames per second of the reference world model at 480x832 on one CPU core
(generation only, and generation + H.264 encoding with the encoder thread overlapped on a second core, or on the
same core with ``--encoder-core same``), per context policy and trajectory, min and median over ``--repeats``, with
one verdict line per target (>= 60 frames/s of generation; end to end keeps >= 0.5 of it).
``python -m harness.bench release``: the official release's scale (import and evaluation cost per video at the start
and the end of a 1,200-row miniature, peak memory as rows grow, the report of 21,800 item results;
:mod:`harness.app.benchmarks.release`).
``python -m harness.bench context``: the tensor-level KV-context benchmark on the tiny causal DiT and on diffusers'
WanTransformer3DModel through the harness KV cache (needs torch; ``--model wan`` needs diffusers).
``python -m harness.bench eval``: total evaluation time of a run against the time of the backbone forwards alone
(target: total <= 1.10x backbone time at the default settings, min and median over repeats, without the feature
cache); then the README's default run (``python -m harness``: generation, then evaluation, each timed on the wall
clock as a user runs it) with its evaluation / generation ratio (target <= 1.0), min / median / max over
``--default-repeats``.
``python -m harness.bench first_look``: the README's first command from an empty folder, its wall and CPU time and
the generation / evaluation / report split over repeats (:mod:`harness.app.benchmarks.first_look`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, Optional

from harness import PROJECT_ROOT
from harness.config_groups import conf_dir
from harness.outputs import RunDir

if TYPE_CHECKING:
    from harness.video import VideoWriter

log = logging.getLogger(__name__)


def _single_core() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import cv2

    cv2.setNumThreads(1)
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass


REFERENCE_TARGET_FPS = 60.0  # generation on one core, every trajectory and policy
ENCODE_KEEP_TARGET = 0.5     # H.264 encoding must not halve the end-to-end rate
EVAL_OVERHEAD_TARGET = 1.10  # evaluation total / backbone-forward time
DEFAULT_RUN_TARGET = 1.0     # the default run spends no longer evaluating than generating


def _spread(xs: list[float]) -> tuple[float, float]:
    """(min, median) of repeated measurements."""
    import statistics

    return min(xs), statistics.median(xs)


def _summary(xs: list[float]) -> str:
    """``min a / median b / max c`` of repeated ratios (3 decimals)."""
    mn, med = _spread(xs)
    return f"min {mn:.3f} / median {med:.3f} / max {max(xs):.3f}"


def _loadavg() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _writer_on_core(writer_cls: type[VideoWriter], path: str, core: int | None) -> VideoWriter:
    """A VideoWriter whose encoder thread runs on ``core`` (None: the caller's cores). A new thread inherits its
    creator's CPU affinity, so the caller moves to ``core`` while the writer starts its thread, then moves back."""
    if core is None or not hasattr(os, "sched_setaffinity"):
        return writer_cls(path, 16)
    mine = os.sched_getaffinity(0)  # pid 0 = this thread on Linux
    os.sched_setaffinity(0, {core})
    try:
        return writer_cls(path, 16)
    finally:
        os.sched_setaffinity(0, mine)


def _encoder_core(choice: str, allowed: list[int]) -> int:
    """The CPU for the encoder thread: ``auto`` = the second allowed core (overlap, as in a real run) or the
    generation core when only one is allowed; ``same`` = the generation core; else a CPU number."""
    if choice == "same" or (choice == "auto" and len(allowed) < 2):
        return allowed[0]
    return allowed[1] if choice == "auto" else int(choice)


def _keeps(kind: str, r: dict[str, list[float]]) -> list[float]:
    """Per-repeat end-to-end / generation-only rate ratios (each repeat's two runs were adjacent in time).

    ``wall``: measured wall-clock rates (the encoder where ``--encoder-core`` put it). ``overlap``: dedicated cores,
    from CPU seconds: generation-only CPU time over the slower of the two pipelined threads (the generating thread,
    which also copies and hashes each frame, and the encoder thread; the bounded queue lets each run at its own
    rate). ``one_core``: both on one core, from CPU seconds: generation-only CPU time over the whole process's."""
    if kind == "wall":
        return [g / e for g, e in zip(r["gen_wall_s"], r["e2e_wall_s"])]
    if kind == "overlap":
        return [g / max(p, e) for g, p, e in zip(r["gen_cpu_s"], r["e2e_gen_cpu_s"], r["e2e_enc_cpu_s"])]
    return [g / p for g, p in zip(r["gen_cpu_s"], r["e2e_cpu_s"])]


def bench_reference(args: argparse.Namespace) -> int:
    """Frames/s of the reference model per (trajectory, policy), repeated; prints min/median and one verdict line
    per target. ``wall`` rates are what a user sees; ``cpu`` rates divide by the CPU seconds actually spent
    (the generating thread), i.e. what a dedicated core would give on a machine shared with other work.
    ``--clock`` picks which one the verdicts use.

    Encoding: generation runs on one core; the encoder thread (RGB -> YUV, x264, muxing) runs on
    ``--encoder-core`` (default: a second core, overlapping generation as in a real run). Every run reports the
    end-to-end / generation-only ratio three ways (see :func:`_keeps`): measured on the wall clock, overlapped on
    dedicated cores (CPU seconds), and both sharing one core (CPU seconds)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    _single_core()
    import yaml

    from harness.cases import load_case_set
    from harness.context import ContextPolicy
    from harness.imaging import resize_cover_crop
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov

    if args.encode:  # import PyAV here, not on the first encoder thread's CPU clock
        __import__("av")

    conf = str(conf_dir())

    def load(group: str, name: str) -> dict[str, Any]:
        with open(os.path.join(conf, group, f"{name}.yaml")) as f:
            return dict(yaml.safe_load(f))

    h, w = args.height, args.width
    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    img = resize_cover_crop(case.load_image(), (h, w))
    K = intrinsics_from_fov(60, w, h)
    policies = {p: ContextPolicy.from_dict(load("context", p)) for p in args.contexts}
    paths = {t: build_path(TrajectorySpec.from_dict(load("trajectory", t)), args.frames, 16, K, h, w)
             for t in args.trajectories}
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    gen_core = cores[0] if isinstance(cores, list) else None
    enc_core = _encoder_core(args.encoder_core, allowed) if args.encode else None
    overlapped = enc_core is not None and enc_core != gen_core
    print(f"reference model, {w}x{h}, {args.frames} frames, generation pinned to core(s) {cores}, {args.repeats} "
          f"repeats, os.cpu_count()={os.cpu_count()}, load average {_loadavg()} (1/5/15 min)")
    if args.encode:
        print(f"H.264 encoder thread on core {enc_core} "
              + ("(its own core: encoding overlaps generation, as in a real run)" if overlapped else
                 "(the generation core: strictly one core, encoding adds to generation)"))
    runs = _measure_reference(args, img, K, case.id, paths, policies, enc_core)
    _print_reference_tables(args, runs)
    missed = _reference_verdicts(args, runs, enc_core, overlapped)
    print(f"load average at the end {_loadavg()}; {missed} target(s) missed")
    return 0


Samples = dict[str, list[float]]  # seconds per repeat, by measurement


def _measure_reference(args: argparse.Namespace, img: Any, K: Any, case_id: str, paths: dict[str, Any],
                       policies: dict[str, Any], enc_core: Optional[int]) -> dict[tuple[str, str], Samples]:
    """(trajectory, policy) -> seconds per repeat: generation alone, and with the H.264 writer (``--encode``)."""
    from adapters.reference.model import rollout
    from harness.video import VideoWriter

    fields = ("gen_wall_s", "gen_cpu_s", "e2e_wall_s", "e2e_cpu_s", "e2e_gen_cpu_s", "e2e_enc_cpu_s")
    runs: dict[tuple[str, str], dict[str, list[float]]] = {}
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits every point alike
        for tname, path in paths.items():
            for pname, pol in policies.items():
                r = runs.setdefault((tname, pname), {k: [] for k in fields})
                n = [0]

                def count(_f: Any, n: list[int] = n) -> None:
                    n[0] += 1

                w0, c0 = time.perf_counter(), time.thread_time()
                rollout(img, path.c2w, K, pol, (1, case_id, tname), count)
                r["gen_cpu_s"].append(time.thread_time() - c0)
                r["gen_wall_s"].append(time.perf_counter() - w0)
                if args.encode:
                    with tempfile.TemporaryDirectory() as d:
                        w0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
                        wr = _writer_on_core(VideoWriter, os.path.join(d, "v.mp4"), enc_core)
                        rollout(img, path.c2w, K, pol, (1, case_id, tname), wr)
                        wr.close()
                        r["e2e_wall_s"].append(time.perf_counter() - w0)
                        r["e2e_cpu_s"].append(time.process_time() - p0)  # both threads
                        r["e2e_gen_cpu_s"].append(time.thread_time() - c0)  # generation + copy/hash/queue
                        r["e2e_enc_cpu_s"].append(wr.encode_cpu_s)

    return runs


def _rates(args: argparse.Namespace, r: dict[str, list[float]], key: str) -> list[float]:
    """Frames/s from the seconds of ``key``."""
    return [args.frames / max(x, 1e-9) for x in r[f"{key}_s"]]


def _print_reference_tables(args: argparse.Namespace, runs: dict[tuple[str, str], dict[str, list[float]]]) -> None:
    """The rates table and, with ``--encode``, the encoder's costs and keep ratios."""
    print(f"\n{'trajectory/context':<18} {'gen wall':>15} {'gen cpu':>15} {'gen+H.264 wall':>15} "
          f"{'gen+H.264 cpu':>15}   (frames/s, min / median; gen+H.264 cpu: CPU seconds of both threads)")
    for (tname, pname), r in runs.items():
        cells = []
        for k in ("gen_wall", "gen_cpu", "e2e_wall", "e2e_cpu"):
            cells.append("{:6.1f} / {:6.1f}".format(*_spread(_rates(args, r, k))) if r[f"{k}_s"] else f"{'-':>15}")
        print(f"{tname + '/' + pname:<18} " + " ".join(f"{c:>15}" for c in cells))
    if args.encode:
        print(f"\n{'trajectory/context':<18} {'gen':>6} {'+write':>6} {'encoder':>7}   "
              f"{'keeps: wall':>13} {'overlap cpu':>13} {'one core cpu':>13}")
        for (tname, pname), r in runs.items():
            ms = {k: 1e3 * _spread(r[k])[1] / args.frames for k in ("gen_cpu_s", "e2e_gen_cpu_s", "e2e_enc_cpu_s")}
            ks = ["{:.2f} / {:.2f}".format(*_spread(_keeps(k, r))) for k in ("wall", "overlap", "one_core")]
            print(f"{tname + '/' + pname:<18} {ms['gen_cpu_s']:6.2f} {ms['e2e_gen_cpu_s'] - ms['gen_cpu_s']:6.2f} "
                  f"{ms['e2e_enc_cpu_s']:7.2f}   " + " ".join(f"{c:>13}" for c in ks))
        print("(gen, +write, encoder: CPU ms per frame, median: generation alone; what writing frames adds to the "
              "generating thread; the encoder thread. keeps: end-to-end / generation-only rate, min / median over "
              "repeats: measured on the wall clock; from CPU seconds with the encoder overlapped on its own core; "
              "from CPU seconds with both on one core)")


def _reference_verdicts(args: argparse.Namespace, runs: dict[tuple[str, str], dict[str, list[float]]],
                        enc_core: Optional[int], overlapped: bool) -> int:
    """One verdict line per target; the number of targets missed."""
    clock = args.clock
    print(f"\ntargets (verdicts on the {clock} clock, median over repeats):")
    missed = 0
    for (tname, pname), r in runs.items():
        mn, med = _spread(_rates(args, r, f"gen_{clock}"))
        ok = med >= args.target
        missed += not ok
        print(f"{tname}/{pname}: {med:.1f} fps (min {mn:.1f}, median {med:.1f}) = {med / args.target:.2f}x of "
              f"{args.target:g} target: {'met' if ok else 'MISSED'}")
    if args.encode:
        # The target ratio: measured on the wall clock, or from CPU seconds for the setup --encoder-core chose.
        kind = "wall" if clock == "wall" else ("overlap" if overlapped else "one_core")
        how = {"wall": f"wall clock, encoder thread on core {enc_core}"
                       + (" (overlapped; only as good as that core is idle)" if overlapped else " (shared core)"),
               "overlap": "CPU seconds, generation and encoder on dedicated cores (overlapped)",
               "one_core": "CPU seconds, generation and encoder sharing one core"}[kind]
        print(f"encoding ({how}; floor {ENCODE_KEEP_TARGET:g}):")
        for (tname, pname), r in runs.items():
            mn, med = _spread(_keeps(kind, r))
            ok = med >= ENCODE_KEEP_TARGET
            missed += not ok
            print(f"{tname}/{pname} with H.264: keeps {med:.2f} of the generation rate (min {mn:.2f}, median "
                  f"{med:.2f}) = {med / ENCODE_KEEP_TARGET:.2f}x of the {ENCODE_KEEP_TARGET:g} floor: "
                  f"{'met' if ok else 'MISSED'}")
        if overlapped:  # informational: what one core for both gives (not the target: "overlap it")
            ones = [_spread(_keeps("one_core", r))[1] for r in runs.values()]
            below = sum(x < ENCODE_KEEP_TARGET for x in ones)
            print(f"for information, generation and encoder sharing one core (CPU seconds) would keep "
                  f"{min(ones):.2f}-{max(ones):.2f} (medians); {below} of {len(ones)} point(s) below "
                  f"{ENCODE_KEEP_TARGET:g} (not counted: the target allows overlapping the encoder)")
    return missed


def bench_eval(args: argparse.Namespace) -> int:
    """Evaluate a run ``--repeats`` times from scratch (no metrics reuse, no feature cache) and print total vs
    backbone-forward time. Without ``--run``, a small reference-model run is generated first (3 cases, LRLR). Then
    the default run (:func:`bench_default_run`, unless ``--default-repeats 0``). Exit 1 when a target is missed."""
    import subprocess
    from pathlib import Path

    from evaluate.stage import EvalConfig, evaluate_run
    from harness.config_groups import group_yaml

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run else None
        if run is None:
            cmd = [sys.executable, "-m", "harness", "run=bench", "evaluate=off", "progress=false",
                   f"model.num_frames={args.frames}", f"model.height={args.height}", f"model.width={args.width}",
                   "cases.include=[environment_rocket,object_coffee,human_astronaut]"]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT),
                                                                os.environ.get("PYTHONPATH", "")])}
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env, check=False)
            if r.returncode != 0:
                log.error("generating the benchmark run failed (exit %d):\n%s", r.returncode, r.stderr[-2000:])
                return 1
            run = Path(tmp) / "outputs" / "bench"
        cfg = dict(group_yaml("evaluate", "default"))
        cfg.pop("description", None)
        cfg["device"] = args.device
        ecfg = EvalConfig.from_dict(cfg)
        n = len(RunDir(run).rows())
        print(f"evaluation of {run} ({n} videos), default settings, device={args.device}, weights root "
              f"{args.weights or '(default)'}; {args.repeats} repeats, no reuse, no feature cache")
        print(f"{'repeat':>6} {'total [s]':>10} {'backbones [s]':>14} {'weights load [s]':>17} {'tables [s]':>11} "
              f"{'ratio':>7}")
        ratios = []
        for i in range(args.repeats):
            # the strips are the report's work, which this ratio leaves out: the report draws them, untimed
            out = evaluate_run(run, ecfg, force=True, weights_root=Path(args.weights) if args.weights else None,
                               use_cache=False, strips_ahead=False)
            t = out["timings"]
            ratio = t["total_s"] / max(t["backbone_s"], 1e-9)
            ratios.append(ratio)
            print(f"{i + 1:>6} {t['total_s']:10.2f} {t['backbone_s']:14.2f} {t['load_s']:17.2f} {t['tables_s']:11.2f} "
                  f"{ratio:7.3f}")
        met = max(_spread(ratios)) <= EVAL_OVERHEAD_TARGET  # the min and the median both
        print(f"total / backbone time over {len(ratios)} repeats: {_summary(ratios)} (target: min and median <= "
              f"{EVAL_OVERHEAD_TARGET:.2f}x): {'met' if met else 'MISSED'}")
    missed = int(not met)
    if args.default_repeats > 0:
        missed += not bench_default_run(args.default_repeats)
    return 1 if missed else 0


def _timed(cmd: list[str], cwd: str) -> float:
    """Wall-clock seconds of ``cmd`` (a ``python -m harness`` command run from ``cwd`` with this checkout on the
    path); raises ``RuntimeError`` with its stderr's tail when it fails."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0


def bench_default_run(repeats: int) -> bool:
    """The README's default run (``python -m harness``: five demo cases, 493 frames at 480 x 832, the default
    evaluation) from scratch ``repeats`` times in fresh folders: its generation and its evaluation as two commands
    (``stage=generate``, then ``stage=evaluate``), each on the wall clock, process start included, as a user waits
    for them. Prints each repeat and the evaluation / generation ratio (min / median / max); True when the median
    is within :data:`DEFAULT_RUN_TARGET`."""
    import statistics

    base = [sys.executable, "-m", "harness", "progress=false"]
    print(f"\ndefault run (python -m harness), {repeats} repeats, os.cpu_count()={os.cpu_count()}, load average "
          f"{_loadavg()}")
    print(f"{'repeat':>6} {'generation [s]':>15} {'evaluation [s]':>15} {'eval / gen':>11}")
    gens, evals = [], []
    for i in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                gens.append(_timed([*base, "stage=generate"], tmp))
                evals.append(_timed([*base, "stage=evaluate"], tmp))
            except RuntimeError as exc:
                log.error("%s", exc)
                return False
        print(f"{i + 1:>6} {gens[-1]:15.1f} {evals[-1]:15.1f} {evals[-1] / gens[-1]:11.3f}")
    ratios = [e / g for e, g in zip(evals, gens)]
    met = statistics.median(ratios) <= DEFAULT_RUN_TARGET
    print(f"generation [s]: min {min(gens):.1f} / median {statistics.median(gens):.1f} / max {max(gens):.1f}; "
          f"evaluation [s]: min {min(evals):.1f} / median {statistics.median(evals):.1f} / max {max(evals):.1f}")
    print(f"default run, evaluation / generation: {_summary(ratios)} (target: median <= {DEFAULT_RUN_TARGET:.2f}): "
          f"{'met' if met else 'MISSED'}; load average at the end {_loadavg()}")
    return met


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("reference", help="reference world model frames/s on one core")
    r.add_argument("--height", type=int, default=480)
    r.add_argument("--width", type=int, default=832)
    r.add_argument("--frames", type=int, default=493)
    r.add_argument("--repeats", type=int, default=3, help="rollouts per point, reported as min and median")
    r.add_argument("--trajectories", nargs="+", default=["lrlr", "lrlrlr", "lrud", "square"],
                   help="conf/trajectory names")
    r.add_argument("--contexts", nargs="+", default=["fullkv", "sliding", "fov"], help="conf/context names")
    r.add_argument("--no-encode", dest="encode", action="store_false", help="generation only (skip H.264)")
    r.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="rate the verdicts use: wall clock, or CPU seconds spent (a dedicated core's rate when the "
                        "machine is shared)")
    r.add_argument("--target", type=float, default=REFERENCE_TARGET_FPS, help="generation frames/s target")
    r.add_argument("--encoder-core", default="auto",
                   help="CPU for the H.264 encoder thread: 'auto' (default) = a second allowed core, overlapping "
                        "generation as in a real run (the generation core when only one is allowed); 'same' = the "
                        "generation core (strictly one core); or a CPU number")
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
    c.set_defaults(fn=lambda a: __import__("harness.app.benchmarks.context", fromlist=["run"]).run(a))
    e = sub.add_parser("eval", help="evaluation time vs backbone-forward time")
    e.add_argument("--run", default=None, help="an existing run directory (default: generate a small one)")
    e.add_argument("--weights", default=None, help="weights root (default: $WORLDMEM_WEIGHTS or the user cache)")
    e.add_argument("--device", default="auto")
    e.add_argument("--repeats", type=int, default=3)
    e.add_argument("--frames", type=int, default=193)
    e.add_argument("--height", type=int, default=480)
    e.add_argument("--width", type=int, default=832)
    e.add_argument("--default-repeats", type=int, default=3,
                   help="then time the default run (python -m harness) this many times (0: skip it)")
    e.set_defaults(fn=bench_eval)
    __import__("harness.app.benchmarks.plan", fromlist=["add_parser"]).add_parser(sub)  # `plan`: study dry-run time
    __import__("harness.app.benchmarks.release", fromlist=["add_parser"]).add_parser(sub)  # `release`: its scale
    # `first_look`: the README's first command, its wall time and its split
    __import__("harness.app.benchmarks.first_look", fromlist=["add_parser"]).add_parser(sub)
    args = ap.parse_args(argv)
    from harness.logs import setup_logging

    setup_logging()  # the tables are the result (stdout); diagnostics are log lines on stderr
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
