"""``python -m harness.bench first_look``: the README's first command, timed as a user waits for it.

Each repeat runs ``python -m harness -m experiment=first_look progress=false`` (plus ``--set`` overrides) from an
empty folder in a subprocess, process start included, and reads the sweep's record (``<sweep dir>/sweep.json``,
:mod:`harness.app.sweep`). ``--default`` times the default run instead (``python -m harness``: the reference model,
FoV, LRLR, the five demo cases at the model's native 480 x 832, 493 frames), launched as a sweep of its one job
(``python -m harness -m progress=false``: the same config, items and metrics, and the sweep's record gives its
split); only the ratio target applies to it. Printed per repeat: the wall time, the CPU seconds of the whole command (its worker
processes included: what the machine's cores had to do, whatever else ran on them), the load average before and
after, and the split:

* generation: the seconds each job spent generating its items (:func:`harness.app.runner.run_items`), summed over
  the jobs;
* evaluation: the seconds each job spent scoring its items, plus the run's final pass (metrics reused, tables);
* report: the study report (its page, figures and strips) of that final pass; the strips a job draws while it
  scores (:class:`evaluate.reporting.strips.StripsAhead`, on a thread of its own) are report work too: their CPU
  seconds are printed apart (``strips cpu``) and left out of the job's evaluation CPU seconds;

all three in job-seconds (the jobs run several at a time, so they add up to more than the wall time), and the
evaluation / generation ratio twice: from those wall seconds, and from the CPU seconds each job's process spent in
the two phases (all its threads). On an idle machine the two agree; on a shared one the wall split depends on what
else ran at the time, the CPU split does not, so the ratio's verdict reads the CPU split. Then min / median / max
over the repeats and one verdict line per target: the wall time's median under :data:`TARGET_S`, the CPU ratio's
median at most :data:`RATIO_TARGET`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import PROJECT_ROOT

TARGET_S = 60.0  # the first command ends with its verdict within a minute on an idle 2-core machine
RATIO_TARGET = 0.5  # evaluation takes at most half the time of generation


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r.get(key) or 0.0) for r in rows)


def split(record: dict[str, Any]) -> dict[str, float]:
    """``{generation_s, evaluation_s, report_s, generation_cpu_s, evaluation_cpu_s, strips_cpu_s, ratio,
    ratio_cpu}`` of a sweep's record (job-seconds, see the module
    docstring); ``ratio``: evaluation / generation from wall seconds, ``ratio_cpu`` from the jobs' CPU seconds
    (``inf`` when nothing was generated)."""
    jobs, runs = record.get("jobs", []), record.get("runs", [])
    gen, ev = _sum(jobs, "generation_s"), _sum(jobs, "evaluation_s") + _sum(runs, "evaluation_s")
    gen_cpu, ev_cpu = _sum(jobs, "generation_cpu_s"), _sum(jobs, "evaluation_cpu_s")
    return {"generation_s": gen, "evaluation_s": ev, "report_s": _sum(runs, "report_s"),
            "generation_cpu_s": gen_cpu, "evaluation_cpu_s": ev_cpu, "strips_cpu_s": _sum(jobs, "strips_cpu_s"),
            "ratio": ev / gen if gen > 0 else float("inf"),
            "ratio_cpu": ev_cpu / gen_cpu if gen_cpu > 0 else float("inf")}


def _loadavg() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _spread(xs: list[float], fmt: str = "{:.1f}") -> str:
    return " / ".join(fmt.format(v) for v in (min(xs), statistics.median(xs), max(xs)))


def command(extra: list[str], default_run: bool = False) -> list[str]:
    """The command line timed: the first command, or (``default_run``) the default run as a sweep of its one job."""
    what = [] if default_run else ["experiment=first_look"]
    return [sys.executable, "-m", "harness", "-m", *what, "progress=false", *extra]


def one_run(extra: list[str], default_run: bool = False) -> dict[str, Any]:
    """The first command (``default_run``: the default run) once, from an empty folder: wall and CPU seconds, load
    before and after, and the split of its sweep record. Raises ``RuntimeError`` with the tail of its output when it
    fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = command(extra, default_run)
    with tempfile.TemporaryDirectory(prefix="bench-first-look-") as tmp:
        load0, c0 = _loadavg(), resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env, check=False)
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[2:])} failed (exit {r.returncode}):\n{(r.stderr + r.stdout)[-2000:]}")
        records = sorted(Path(tmp).glob("outputs/*/.hydra/multirun-*/sweep.json"))
        if not records:
            raise RuntimeError(f"no sweep record (sweep.json) under {tmp}/outputs: was the sweep run by launcher=local?")
        record = json.loads(records[-1].read_text())
    cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "load": f"{load0} -> {_loadavg()}", "workers": record.get("workers"),
            **split(record)}


def run(args: argparse.Namespace) -> int:
    """Time the first command ``--repeats`` times; exit 1 when a target is missed."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(" ".join(["python", *command(list(args.set), args.default)[1:]]) +
          f": {args.repeats} repeat(s) from empty folders, {cores} core(s) usable (os.cpu_count()={os.cpu_count()}), "
          f"load average {_loadavg()} (1/5/15 min)")
    print(f"{'repeat':>6} {'wall [s]':>9} {'cpu [s]':>8} {'gen [job-s]':>12} {'eval [job-s]':>13} "
          f"{'report [s]':>11} {'eval/gen':>9} {'cpu: gen':>9} {'eval':>6} {'strips':>7} {'eval/gen':>9}  "
          "load (1/5/15 min, before -> after)")
    runs = []
    for i in range(args.repeats):
        try:
            r = one_run(list(args.set), args.default)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        runs.append(r)
        print(f"{i + 1:>6} {r['wall_s']:9.1f} {r['cpu_s']:8.1f} {r['generation_s']:12.1f} {r['evaluation_s']:13.1f} "
              f"{r['report_s']:11.1f} {r['ratio']:9.3f} {r['generation_cpu_s']:9.1f} {r['evaluation_cpu_s']:6.1f} "
              f"{r['strips_cpu_s']:7.1f} {r['ratio_cpu']:9.3f}  {r['load']}")
    walls, ratios = [r["wall_s"] for r in runs], [r["ratio_cpu"] for r in runs]
    print(f"wall [s] min / median / max: {_spread(walls)}; cpu [s]: {_spread([r['cpu_s'] for r in runs])}; "
          f"eval/gen: {_spread([r['ratio'] for r in runs], '{:.3f}')} (wall), {_spread(ratios, '{:.3f}')} (cpu)")
    what = "default run" if args.default else "first command"
    wall_ok = args.default or statistics.median(walls) < TARGET_S  # the minute is the first command's target
    ratio_ok = statistics.median(ratios) <= RATIO_TARGET
    if not args.default:
        print(f"first command, wall time: median {statistics.median(walls):.1f} s = "
              f"{statistics.median(walls) / TARGET_S:.2f}x of the {TARGET_S:.0f} s target: "
              f"{'met' if wall_ok else 'MISSED'} (the target is for an idle 2-core machine: read it with the load above)")
    print(f"{what}, evaluation / generation (CPU seconds of the jobs): median {statistics.median(ratios):.3f} "
          f"(target <= {RATIO_TARGET}): {'met' if ratio_ok else 'MISSED'}; load average at the end {_loadavg()}")
    return 0 if wall_ok and ratio_ok else 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``first_look`` on the ``python -m harness.bench`` subcommands."""
    p = sub.add_parser("first_look", help="the README's first command: wall time, CPU time and the "
                                          "generation / evaluation / report split over repeats")
    p.add_argument("--repeats", type=int, default=3, help="runs, each from an empty folder")
    p.add_argument("--default", action="store_true",
                   help="time the default run (python -m harness: 480 x 832, one job) instead of the first command")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="extra overrides, e.g. hydra.launcher.n_jobs=1 (serial jobs) or model.height=480")
    p.set_defaults(fn=run)
