"""``python -m harness.bench release``: the official release's scale (about 21.8k rows) on a generated miniature.

1. **Import**: a miniature release in the documented layout (:mod:`evaluate.release.miniature`) of ``--rows``
   rows (1,200 by default: the nine model ids, every preset, camera rows on their environment videos; the videos are
   hard links of two small files, so the disk holds two videos), imported by ``python -m harness release import`` in
   a child process. Prints the per-video import cost over the first and the last tenth of the videos (it must stay
   flat: nothing grows with what was imported before) and the child's peak memory, for ``--rows`` and for a quarter
   of it (flat as rows grow).
2. **Evaluation** (``--eval-videos``, 0 skips it): the evaluation stage on the first videos of that run, per-video
   cost over the first and the last tenth (from the order and times at which ``metrics.json`` files were written).
3. **Report**: ``--report-items`` synthetic item results (21,800 by default: the release's size; ``metrics.json``
   copies of one real result with seeded values, spread over nine models, five presets and the cases) and the time
   and peak memory of ``python -m harness report`` on them without strips (target: under 2 minutes and 2 GB).

Times are wall-clock seconds on this machine; the ratios (last / first tenth, peak at N / peak at N/4) are what to
compare across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness import PROJECT_ROOT

REPORT_TARGET_S = 120.0
REPORT_TARGET_GB = 2.0
RELEASE_ROWS = 21_800
MODEL_IDS = ("dreamx-world", "evoke", "lingbot-v2", "hy-worldplay", "matrix-game-3", "matrix-game-3.5", "sana-wm",
             "yume", "lingbot-world")
PRESETS = ("lrlr_sym_0p75dpf", "lrud_sym_0p75dpf", "lrlrlr_sym_1dpf", "lr_hold_sym_0p5dpf", "translate_square")


#: runs ``python -m harness`` and prints its own peak resident memory (KB) when it ends, however it ends
_MEASURED = ("import resource, runpy, sys\n"
             "sys.argv = ['harness', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('harness', run_name='__main__', alter_sys=True)\n"
             "finally:\n    print('BENCH_MAXRSS_KB=%d' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
             "file=sys.stderr)\n")


def _child(args: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall seconds, peak resident memory of the child in GB, the process) of ``python -m harness <args>``."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(PROJECT_ROOT)}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _MEASURED, *args], cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"python -m harness {' '.join(args)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    kb = [int(x.split("=", 1)[1]) for x in p.stderr.splitlines() if x.startswith("BENCH_MAXRSS_KB=")]
    return wall, (kb[-1] if kb else float("nan")) / 1024 ** 2, p


def _videos(d: Path) -> dict[str, Path]:
    from harness.video import VideoWriter

    rng = np.random.default_rng(0)
    out = {}
    for preset in PRESETS:
        n = 541 if preset == "lrlrlr_sym_1dpf" else 493
        tex = rng.integers(0, 255, (48, 80 + n, 3), dtype=np.uint8)
        w = VideoWriter(d / f"{preset}.mp4", fps=16)
        for i in range(n):
            w.write(np.ascontiguousarray(tex[:, i:i + 80]))
        out[preset] = w.close()
    return out


def _release(root: Path, videos: dict[str, Path], rows: int, models: tuple[str, ...] = MODEL_IDS) -> int:
    from evaluate.release.miniature import miniature

    per_case = len(models) * (len(PRESETS) + 3)  # + the camera rows of the three environment presets
    cases = max(1, -(-rows // per_case))
    written = miniature(root, videos, models=models, cases=cases, shards=4)
    return len(written)


def _tenths(xs: list[float]) -> tuple[float, float]:
    """Median cost over the first and over the last tenth (medians: the first video also pays lazy imports)."""
    k = max(1, len(xs) // 10)
    return float(np.median(xs[:k])), float(np.median(xs[-k:]))


def _import(work: Path, videos: dict[str, Path], rows: int, tag: str,
            models: tuple[str, ...] = MODEL_IDS) -> tuple[dict[str, Any], Path]:
    src = work / f"release-{tag}"
    n = _release(src, videos, rows, models)
    # the import's bookkeeping at scale (rows, items, links, manifest); the layout measurement's own cost per video
    # is measured on real-size footage (docs/release.md, "Scale")
    wall, peak, _ = _child(["release", "import", f"source={src}", f"run=rel-{tag}", "release.evaluate=false",
                            "release.measure=false", "progress=false", f"output_root={work / 'out'}"], work)
    run = work / "out" / f"rel-{tag}"
    summary = json.loads((run / "release" / "import.json").read_text())
    return {"rows": n, "videos": summary["videos"], "wall": wall, "peak_gb": peak}, run


def _per_video_import(run: Path) -> list[float]:
    """Per-video import cost from the order and modification times of the items' meta.json (written last)."""
    times = sorted(p.stat().st_mtime for p in run.rglob("meta.json"))
    return list(np.diff(times)) if len(times) > 1 else []


def _eval(work: Path, videos: dict[str, Path], count: int) -> dict[str, Any]:
    """Import a miniature of about ``count`` videos and evaluate it (a child process, as a user runs it)."""
    rows = max(1, count * (len(PRESETS) + 3) // len(PRESETS))
    models = MODEL_IDS[:max(1, min(len(MODEL_IDS), count // len(PRESETS)))]  # a few videos: a few models
    _, run = _import(work, videos, rows, "eval", models)
    wall, peak, _ = _child(["stage=evaluate", f"run={run.name}", "progress=false", f"output_root={work / 'out'}"],
                           work)
    times = sorted(p.stat().st_mtime for p in run.rglob("metrics.json"))
    return {"videos": len(times), "wall": wall, "peak_gb": peak, "steps": list(np.diff(times)), "run": run}


def _report_run(work: Path, template: dict[str, Any], n: int) -> Path:
    """``n`` synthetic evaluated items (manifest rows + sealed metrics.json, as the evaluation writes them) in a run
    folder."""
    from harness.io import write_sealed_json, write_text

    rng = np.random.default_rng(1)
    run = work / "out" / "rel-report"
    lines = []
    models = [m for m in ("dreamx", "evoke", "lingbot_v2", "hy_worldplay", "matrix_game3", "matrix_game35", "sana_wm",
                          "yume", "lingbot")]
    cases = max(1, n // (len(models) * len(PRESETS)))
    k = 0
    for model in models:
        for preset in PRESETS:
            for c in range(cases):
                if k >= n:
                    break
                k += 1
                fam = "dynamic" if preset == "lr_hold_sym_0p5dpf" else "environment"
                case = f"{'dynamic_memory' if fam == 'dynamic' else 'environment'}_case_{c:03d}"
                item = {"model": model, "context": "release", "seed": 0, "trajectory": preset, "case_id": case}
                key = f"{model}/release/seed-0/{preset}/{case}"
                res = json.loads(json.dumps(template))
                res["item"] = item
                res["case_family"] = fam
                for m in res["metrics"].values():
                    if isinstance(m.get("value"), (int, float)):
                        m["value"] = float(m["value"]) * float(rng.uniform(0.8, 1.2))
                write_sealed_json(run / key / "metrics.json", res)
                lines.append(json.dumps({**item, "key": key, "status": "done", "dir": key}))
    write_text(run / "manifest.jsonl", "\n".join(lines) + "\n")
    return run


def run(args: argparse.Namespace) -> int:
    from harness.logs import setup_logging

    setup_logging()
    with tempfile.TemporaryDirectory(prefix="worldmem-bench-release-") as tmp:
        work = Path(tmp)
        videos = _videos(work)
        small, _ = _import(work, videos, max(1, args.rows // 4), "quarter")
        big, run_dir = _import(work, videos, args.rows, "full")
        per = _per_video_import(run_dir)
        first, last = _tenths(per) if per else (float("nan"), float("nan"))
        print(f"release import: {big['rows']} rows -> {big['videos']} videos in {big['wall']:.1f} s "
              f"({big['wall'] / max(big['videos'], 1) * 1000:.1f} ms/video with process start)")
        print(f"  per-video cost, first tenth {first * 1000:.1f} ms, last tenth {last * 1000:.1f} ms: "
              f"last/first {last / first:.2f} (flat = about 1)")
        print(f"  peak memory: {small['peak_gb'] * 1024:.0f} MB at {small['rows']} rows, "
              f"{big['peak_gb'] * 1024:.0f} MB at {big['rows']} rows: ratio {big['peak_gb'] / small['peak_gb']:.2f} "
              f"for {big['rows'] / small['rows']:.1f}x the rows")
        template = None
        if args.eval_videos:
            ev = _eval(work, videos, args.eval_videos)
            f, l2 = _tenths(ev["steps"]) if ev["steps"] else (float("nan"), float("nan"))
            print(f"evaluation: {ev['videos']} videos in {ev['wall']:.1f} s; per-video cost first tenth {f:.2f} s, "
                  f"last tenth {l2:.2f} s: last/first {l2 / f:.2f}; peak {ev['peak_gb'] * 1024:.0f} MB")
            found = sorted(ev["run"].rglob("metrics.json"))
            template = json.loads(found[0].read_text()) if found else None
        if args.report_items:
            if template is None:
                ev = _eval(work, videos, 1)
                template = json.loads(next(ev["run"].rglob("metrics.json")).read_text())
            rep = _report_run(work, template, args.report_items)
            times = []
            for _ in range(args.repeats):
                wall, peak, p = _child(["report", f"run={rep}", "report_strips=false",
                                        f"report_out={work / 'report'}", f"output_root={work / 'out'}"], work)
                times.append(wall)
            med = float(np.median(times))
            print(f"report of {args.report_items} item results: min {min(times):.1f} / median {med:.1f} / max "
                  f"{max(times):.1f} s (target < {REPORT_TARGET_S:.0f} s: {'met' if med < REPORT_TARGET_S else 'NOT met'})"
                  f"; peak memory {peak:.2f} GB (target < {REPORT_TARGET_GB:g} GB: "
                  f"{'met' if peak < REPORT_TARGET_GB else 'NOT met'})")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``release`` on the ``python -m harness.bench`` subcommands."""
    p = sub.add_parser("release", help="release import / evaluation / report at the release's scale")
    p.add_argument("--rows", type=int, default=1200, help="rows of the generated miniature (default 1200)")
    p.add_argument("--eval-videos", type=int, default=100, help="videos evaluated (0: skip the evaluation)")
    p.add_argument("--report-items", type=int, default=RELEASE_ROWS,
                   help=f"synthetic item results in the report (default {RELEASE_ROWS}; 0: skip)")
    p.add_argument("--repeats", type=int, default=1, help="report builds, reported as min / median / max")
    p.set_defaults(fn=run)
