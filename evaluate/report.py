"""Run tables: per-item CSV, and per (model, context, trajectory) aggregates with bootstrap CIs as CSV/JSON/Markdown."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .aggregate import bootstrap_ci
from .dynamic import dynamic_summary
from .catalog import METRICS, higher_is_better


def _key(r: dict) -> tuple[str, str, str]:
    it = r["item"]
    return it["model"], it["context"], it["trajectory"]


def _fmt(ci: dict) -> str:
    if not np.isfinite(ci["mean"]):
        return "n/a"
    return f"{ci['mean']:.3f} [{ci['lo']:.3f}, {ci['hi']:.3f}] (n={ci['n']})"


def summarise(results: list[dict], boot: dict[str, int]) -> tuple[list[dict], dict[str, str]]:
    """Aggregate rows (one per group and computed metric) and the not-computed reasons per metric key."""
    groups: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    reasons: dict[str, str] = {}
    for r in results:
        model, ctx, traj = _key(r)
        for k, m in r["metrics"].items():
            if m["status"] != "computed":
                reasons.setdefault(k, m.get("reason", ""))
                continue
            for g in ((model, ctx, traj), (model, ctx, "all")):
                groups[g][k].append(m["value"])
    rows = []
    for (model, ctx, traj), metrics in sorted(groups.items()):
        for k, vals in sorted(metrics.items()):
            ci = bootstrap_ci(vals, n_boot=int(boot.get("n", 2000)), seed=int(boot.get("seed", 0)))
            rows.append({"model": model, "context": ctx, "trajectory": traj, "metric": k,
                         "higher_is_better": higher_is_better(k), **ci})
    return rows, reasons


def write_tables(out_dir: Path, results: list[dict], ecfg: Any) -> dict[str, str]:
    """``per_item.csv`` and ``summary.{csv,json,md}`` of a run (oracle entries left out; the study report with
    paper-shaped tables is :func:`evaluate.reporting.build_report`)."""
    from harness.io import write_json, write_text

    from .reporting.collect import drop_oracle

    results = [drop_oracle(r) for r in results]

    out_dir.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["model", "context", "seed", "trajectory", "case", "case_family", "metric", "status", "value"])
    for r in results:
        it = r["item"]
        for k, m in sorted(r["metrics"].items()):
            w.writerow([it["model"], it["context"], it["seed"], it["trajectory"], it["case_id"], r["case_family"], k,
                        m["status"], m.get("value", "")])
    write_text(out_dir / "per_item.csv", buf.getvalue())
    rows, reasons = summarise(results, ecfg.bootstrap)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["model", "context", "trajectory", "metric", "higher_is_better", "mean", "lo",
                                        "hi", "n"])
    w.writeheader()
    w.writerows(rows)
    write_text(out_dir / "summary.csv", buf.getvalue())
    write_json(out_dir / "summary.json", {"rows": rows, "not_computed": reasons, "settings": ecfg.__dict__})
    write_text(out_dir / "summary.md", markdown(rows, reasons))
    return {"per_item": str(out_dir / "per_item.csv"), "summary": str(out_dir / "summary.md")}


def markdown(rows: list[dict], reasons: dict[str, str]) -> str:
    lines = ["# Evaluation summary", "",
             "Mean over cases with a 95 % bootstrap interval and the number of cases. `[backbone]` names what "
             "computed each value; `pixel-thumb16`, `template-ncc`, `classical-opencv` and `pixels` are weight-free "
             "diagnostics of this harness; `dlib-resnet` and `brisque` are diagnostics on real pretrained weights shipped "
             "inside packages, not the paper's ArcFace / MUSIQ-SPAQ. Oracle entries (the reference model's own geometry) are left out. The "
             "study report (paper-shaped tables, plots, HTML) is in `report/`.", ""]
    by_mc: dict[tuple, dict] = defaultdict(lambda: defaultdict(dict))
    trajs: dict[tuple, list] = defaultdict(list)
    for r in rows:
        mc = (r["model"], r["context"])
        by_mc[mc][r["metric"]][r["trajectory"]] = r
        if r["trajectory"] not in trajs[mc]:
            trajs[mc].append(r["trajectory"])
    for mc, metrics in sorted(by_mc.items()):
        cols = sorted(t for t in trajs[mc] if t != "all") + ["all"]
        lines += [f"## model={mc[0]} context={mc[1]}", "", "| metric | " + " | ".join(cols) + " |",
                  "| --- |" + " --- |" * len(cols)]
        for k in sorted(metrics):
            arrow = "↑" if higher_is_better(k) else "↓"
            cells = [_fmt(metrics[k][c]) if c in metrics[k] else "" for c in cols]
            lines.append(f"| {k} {arrow} | " + " | ".join(cells) + " |")
        lines.append("")
    if reasons:
        lines += ["## Not computed", "", "| metric [backbone] | reason |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in sorted(reasons.items())]
        lines.append("")
    known = ", ".join(sorted(METRICS))
    lines += [f"Metric ids: {known}.", ""]
    return "\n".join(lines)


def dynamic_rows(results: Sequence[Mapping[str, Any]]) -> list[dict]:
    """One row per (judge, model, context, trajectory) and per (judge, model, context, "all") from per-item
    ``metrics.json`` results; items whose judge column is not computed are counted apart (``not_computed``)."""
    groups: dict[tuple, list] = defaultdict(list)
    missing: dict[tuple, int] = defaultdict(int)
    for r in results:
        it = r.get("item") or {}
        for k, m in (r.get("metrics") or {}).items():
            if m.get("metric") != "dynamic.overall":
                continue
            for traj in (it.get("trajectory"), "all"):
                g = (m.get("backbone"), it.get("model"), it.get("context"), traj)
                if m.get("status") == "computed":
                    groups[g].append({"started": bool(m.get("started")), "overall": float(m["value"])})
                else:
                    missing[g] += 1
    rows = []
    for g in sorted(set(groups) | set(missing), key=lambda x: tuple(str(v) for v in x)):
        s = dynamic_summary(groups.get(g, []))
        rows.append({"judge": g[0], "model": g[1], "context": g[2], "trajectory": g[3], **s,
                     "not_computed": missing.get(g, 0)})
    return rows


def _f(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def write_dynamic_table(out_dir: Path, results: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """``dynamic.{json,md}`` in ``out_dir`` (only when the run has dynamic items). Returns the Markdown path."""
    from harness.io import write_json, write_text

    rows = dynamic_rows(results)
    if not rows:
        return None
    out_dir = Path(out_dir)
    write_json(out_dir / "dynamic.json", {"rows": rows})
    lines = ["# Dynamic memory", "",
             "p_start: fraction of videos whose event the judge saw start in the initial hold; S_cond: mean checklist "
             "score of those; S_gated = p_start x S_cond (the paper's Overall); M: MBench's harmonic mean of "
             "p_start and S_cond. `not computed`: videos without a judge answer (see their metrics.json).", "",
             "| judge | model | context | trajectory | n | started | p_start | S_cond | S_gated | M | not computed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['judge']} | {r['model']} | {r['context']} | {r['trajectory']} | {r['n']} | {r['started']} "
                     f"| {_f(r['p_start'])} | {_f(r['S_cond'])} | {_f(r['S_gated'])} | {_f(r['M_score'])} "
                     f"| {r['not_computed']} |")
    write_text(out_dir / "dynamic.md", "\n".join(lines) + "\n")
    return str(out_dir / "dynamic.md")
