"""The evaluation stage as the console shows it: evaluate a run, print where its tables and report are, its
verdict and a short table of the computed metrics."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from harness.app.run_config import RunConfig

if TYPE_CHECKING:
    from evaluate.results import ItemResult

log = logging.getLogger("harness.app.cli")  # the CLI's status lines keep its logger name (console output)


def in_sweep() -> bool:
    """This process is one job of a Hydra sweep (``-m``)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return str(HydraConfig.get().mode).endswith("MULTIRUN")
    except Exception:  # noqa: BLE001 - not under Hydra (API use)
        return False


def no_comparison_hint(cfg: RunConfig) -> str:
    """The console's hint when a run has nothing to compare, fitted to the command that ran: a sweep job is
    already running several (its siblings add theirs to the same run), external videos come from a manifest."""
    from evaluate.reporting.verdict import NO_COMPARISON_HINT

    run = cfg.run or "<name>"
    if cfg.videos:
        return ("To compare, put videos of a second model or context policy of the same cases in the folder "
                "(manifest.json names each video's model and context) and evaluate again.")
    if in_sweep():
        return (f"The sweep's other jobs add their policies or models to this run: the last job's verdict, or "
                f"`python -m harness report run={run}` once all are done, compares them.")
    return NO_COMPARISON_HINT


def evaluate(run_dir: Path, cfg: RunConfig, table: bool = True, timings: Optional[dict[str, float]] = None,
             only: Optional[list[Path]] = None) -> bool:
    """Evaluate ``run_dir``; False when an item or metric failed (the failures are listed; the rest is tabled).
    Prints where the tables and the report are, the verdict and (``table``) a short table of the metrics.
    ``timings`` (when given) gets ``strips_cpu_s`` (the CPU seconds of the strips drawn while scoring: report work)
    and, for the whole run, ``evaluation_s`` (wall seconds, the study report left out), ``report_s`` and ``cpu_s``
    (this process's CPU seconds, report included).

    ``only``: score just these item folders (each item's ``metrics.json``), without the run's tables and report:
    a job of a local sweep does this for its own items, and the sweep tables the run once at its end
    (:mod:`harness.app.sweep`)."""
    from evaluate.stage import evaluate_run
    from evaluate.weights import weights_root
    from harness.io import remove_dead_temps

    if only is None:  # the whole run
        remove_dead_temps(run_dir)  # e.g. a metrics file of an evaluation that was killed
    t0, cpu = time.perf_counter(), time.process_time()
    out = evaluate_run(run_dir, cfg.evaluate, force=cfg.overwrite, progress=cfg.progress,
                       weights_root=weights_root(cfg.weights_dir), only=only, tables=only is None)
    if timings is not None:
        timings["strips_cpu_s"] = out["timings"]["strips_cpu_s"]
    if only is not None:
        print(f"evaluated {out['evaluated']} video(s) of this job (the sweep writes the run's tables and report at "
              "its end)")
    else:
        if timings is not None:
            report_s = float(out.get("report_s") or 0.0)
            timings.update(evaluation_s=time.perf_counter() - t0 - report_s, report_s=report_s,
                           cpu_s=time.process_time() - cpu)
        _print_outcome(out, cfg, table)
    _log_failed(out["failed"])
    return not out["failed"]


def _print_outcome(out: dict[str, Any], cfg: RunConfig, table: bool) -> None:
    """Where a run's tables and report are, its verdict and (``table``) a short table of its metrics."""
    from evaluate.reporting.verdict import NO_COMPARISON_HINT

    print(f"evaluated {out['evaluated']} video(s): {out['tables']['summary']}  {out['analyses']['analyses']}  "
          f"{out['validity']}")
    if out.get("report"):
        print(f"report: {out['report']}")
    if out.get("verdict"):  # the report's own verdict (evaluate.reporting.verdict), the same words as its page
        hint = no_comparison_hint(cfg)
        print("verdict:\n  " + "\n  ".join(x.replace(NO_COMPARISON_HINT, hint) for x in out["verdict"]))
    if table:
        print(short_table(out["results"]))


def _log_failed(failed: list[tuple[Any, str]]) -> None:
    for item, reason in failed:
        key = "/".join(str((item or {}).get(k, "?")) for k in ("model", "context", "seed", "trajectory", "case_id"))
        log.error("FAILED %s: %s", key, reason)


def short_table(results: list[ItemResult]) -> str:
    """The computed metrics of this run (:class:`evaluate.results.ItemResult`), grouped by model / context /
    trajectory / seed (never averaged across them): per group and metric, the mean over that group's cases with n.
    Read as every table reads results (:func:`evaluate.reporting.collect.scored`): ground truth (oracle) never
    scores, and a static-content metric leaves dynamic cases out."""
    import numpy as np

    from evaluate.reporting.collect import scored

    groups: dict[tuple[str, ...], dict[str, list[Any]]] = {}
    for r in map(scored, results):
        g = tuple(str(r.item.get(k, "?")) for k in ("model", "context", "trajectory", "seed"))
        for k, m in r.computed().items():
            groups.setdefault(g, {}).setdefault(k, []).append(m.value)
    if not groups:
        return "(no metric could be computed with the available backbones; see summary.md)"
    w = max(len(k) for vals in groups.values() for k in vals)
    lines = ["mean over the cases of each model / context / trajectory / seed (n = cases):"]
    for (model, context, trajectory, seed), vals in sorted(groups.items()):
        lines.append(f"{model} / {context} / {trajectory} / seed {seed}")
        lines += [f"  {k:<{w}}  {np.mean(v):8.4f}  (n={len(v)})" for k, v in sorted(vals.items())]
    return "\n".join(lines)
