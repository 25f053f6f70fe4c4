"""A run's own tables in ``<run>/eval/``: ``per_item.csv``, ``summary.{csv,json,md}`` (per model, context and
trajectory, mean with a 95 % bootstrap interval over cases), ``dynamic.{json,md}`` (p_start, S_cond, S_gated,
M-score) and ``analyses.{json,md}`` (the verdict, multi-revisit decay, cross-axis Δ_axis, coverage, the policy
comparison), all from :func:`~evaluate.reporting.collect.scored` items; the analyses are the report's own
(:class:`~evaluate.reporting.analyses.Analyses`), rendered here as files, not computed again.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from ..aggregate import mean
from ..catalog import METRICS, higher_is_better, spec_of
from ..dynamic import dynamic_summary
from .analyses import Analyses, Comparison
from .cells import MIN_UNITS_FOR_INTERVAL, Cell, fixed, fmt, mean_cell, plural
from .collect import Item
from .verdict import line_data, verdict_markdown

if TYPE_CHECKING:
    from ..config import EvalConfig


def _group(it: Item) -> tuple[str, str, str]:
    return it.model, it.context, it.trajectory


def _fmt(ci: dict[str, Any]) -> str:
    if not np.isfinite(ci["mean"]):
        return "n/a"
    if ci["n"] < MIN_UNITS_FOR_INTERVAL:  # an interval over one or two cases reads as certainty
        return f"{fixed(ci['mean'])} (n={ci['n']})"
    return f"{fixed(ci['mean'])} [{fixed(ci['lo'])}, {fixed(ci['hi'])}] (n={ci['n']})"


def summarise(items: list[Item], boot: dict[str, int]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Aggregate rows (one per group and computed metric: its values combined by the metric's aggregation) and the
    not-computed reasons per metric key."""
    groups: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    reasons: dict[str, str] = {}
    for it in items:
        model, ctx, traj = _group(it)
        for k, m in it.metrics.items():
            if not m.is_computed or m.value is None:
                reasons.setdefault(k, m.reason or "")
                continue
            for g in ((model, ctx, traj), (model, ctx, "all")):
                groups[g][k].append(float(m.value))
    rows: list[dict[str, Any]] = []
    for (model, ctx, traj), metrics in sorted(groups.items()):
        for k, vals in sorted(metrics.items()):
            spec = spec_of(k)
            aggregation = spec.aggregation if spec is not None else mean
            ci = aggregation(vals, n_boot=int(boot.get("n", 2000)), seed=int(boot.get("seed", 0)))
            rows.append({"model": model, "context": ctx, "trajectory": traj, "metric": k,
                         "higher_is_better": higher_is_better(k), **ci})
    return rows, reasons


def table_files(items: list[Item], ecfg: EvalConfig) -> dict[str, Any]:
    """``per_item.csv`` and ``summary.{csv,json,md}`` of a run by file name: texts, and for a ``.json`` file its
    data (serialised by the writer, :func:`evaluate.reporting.run.write_files`); nothing is written."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["model", "context", "seed", "trajectory", "case", "case_family", "metric", "status", "value"])
    for it in items:
        for k, m in sorted(it.metrics.items()):
            w.writerow([it.model, it.context, it.seed, it.trajectory, it.case_id, it.case_family, k, m.status.value,
                        "" if m.value is None else m.value])
    files: dict[str, Any] = {"per_item.csv": buf.getvalue()}
    rows, reasons = summarise(items, ecfg.bootstrap)
    buf = io.StringIO()
    dw = csv.DictWriter(buf, fieldnames=["model", "context", "trajectory", "metric", "higher_is_better", "mean", "lo",
                                         "hi", "n"])
    dw.writeheader()
    dw.writerows(rows)
    files["summary.csv"] = buf.getvalue()
    # "reasons": per metric key that is not computed, not applicable or failed somewhere, the first reason recorded
    ran = context_ran(items)
    files["summary.json"] = {"rows": rows, "reasons": reasons, "settings": dataclasses.asdict(ecfg),
                             "context_ran": [{"model": m, "context": c, "ran": r} for (m, c), r in sorted(ran.items())]}
    files["summary.md"] = markdown(rows, reasons, ran)
    return files


def context_ran(items: list[Item]) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, context label) -> what the model was told (``meta.json`` ``controls.context``, recorded by the
    adapter at compile time), for the items that recorded it."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for it in items:
        rec = it.result.extra.get("context_ran")
        if isinstance(rec, dict) and rec.get("told"):
            out.setdefault((it.model, it.context), rec)
    return out


def describe_ran(rec: dict[str, Any]) -> str:
    """One line: the knobs the model was told, the declared identity with another label's launch, and where the
    launch left the regime upstream trained or documented the checkpoint in (the contract's ``trained_regime``)."""
    told = "; ".join(f"{k} {v}" for k, v in rec["told"].items())
    same = rec.get("same_launch_as")
    if same:
        told += f". The same launch as context={same['policy']}: {same['why']}"
    if rec.get("trained_regime"):
        told += ". Outside upstream's trained or documented regime: " + "; ".join(rec["trained_regime"])
    return told


def markdown(rows: list[dict[str, Any]], reasons: dict[str, str],
             ran: dict[tuple[str, str], dict[str, Any]] | None = None) -> str:
    lines = ["# Evaluation summary", "",
             "Mean over cases with a 95 % bootstrap interval (none below 3 cases) and the number of cases. "
             "`[backbone]` names what computed each value; `pixel-thumb16`, `template-ncc`, `classical-opencv` and "
             "`pixels` are weight-free diagnostics of this harness; `dlib-resnet` and `brisque` are diagnostics on "
             "real pretrained weights shipped inside packages, not the paper's ArcFace / MUSIQ-SPAQ. Oracle entries "
             "(the reference model's own geometry) are left out, and dynamic cases from the static-content metrics "
             "(diagnostic.*, departure.*). The study report (the verdict, paper-shaped tables, plots, HTML) is in "
             "`report/`.", ""]
    by_mc: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    trajs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in rows:
        mc = (r["model"], r["context"])
        by_mc[mc][r["metric"]][r["trajectory"]] = r
        if r["trajectory"] not in trajs[mc]:
            trajs[mc].append(r["trajectory"])
    for mc, metrics in sorted(by_mc.items()):
        cols = sorted(t for t in trajs[mc] if t != "all") + ["all"]
        lines += [f"## model={mc[0]} context={mc[1]}", ""]
        if ran and mc in ran:  # the label is a claim: say what the launch told the model
            lines += [f"What ran: {describe_ran(ran[mc])}.", ""]
        lines += ["| metric | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
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


def dynamic_rows(items: list[Item]) -> list[dict[str, Any]]:
    """One row per (judge, model, context, trajectory) and per (judge, model, context, "all"); videos whose judge
    column has no value (no server, a failed request) are counted apart (``without_answer``)."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    missing: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for it in items:
        for m in it.metrics.values():
            if m.metric != "dynamic.overall":
                continue
            for traj in (it.trajectory, "all"):
                g = (m.backbone, it.model, it.context, traj)
                if m.is_computed and m.value is not None:
                    groups[g].append({"started": bool(m.get("started")), "overall": float(m.value)})
                else:
                    missing[g] += 1
    rows = []
    for g in sorted(set(groups) | set(missing), key=lambda x: tuple(str(v) for v in x)):
        s = dynamic_summary(groups.get(g, []))
        rows.append({"judge": g[0], "model": g[1], "context": g[2], "trajectory": g[3], **s,
                     "without_answer": missing.get(g, 0)})
    return rows


def _f(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else fixed(x)


def dynamic_files(items: list[Item]) -> dict[str, Any]:
    """``dynamic.{json,md}`` by file name (the JSON file's data, the Markdown text); none when the run has no
    dynamic item."""
    rows = dynamic_rows(items)
    if not rows:
        return {}
    lines = ["# Dynamic memory", "",
             "p_start: fraction of videos whose event the judge saw start in the initial hold; S_cond: mean checklist "
             "score of those; S_gated = p_start x S_cond (the paper's Overall); M: MBench's harmonic mean of "
             "p_start and S_cond. `without answer`: videos without a judge answer (see their metrics.json).", "",
             "| judge | model | context | trajectory | n | started | p_start | S_cond | S_gated | M | without answer |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['judge']} | {r['model']} | {r['context']} | {r['trajectory']} | {r['n']} | {r['started']} "
                     f"| {_f(r['p_start'])} | {_f(r['S_cond'])} | {_f(r['S_gated'])} | {_f(r['M_score'])} "
                     f"| {r['without_answer']} |")
    return {"dynamic.json": {"rows": rows}, "dynamic.md": "\n".join(lines) + "\n"}


# -- analyses.{json,md}: the report's analyses as files --------------------------------------------------------------


def _ci(c: Cell, name: str = "mean") -> dict[str, float]:
    return {name: float(c.mean), "lo": float(c.lo), "hi": float(c.hi), "n": int(c.n)}


def _comparison_json(c: Comparison) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for key, m in c.metrics.items():
        row: dict[str, Any] = {p: _ci(m.means[p]) for p in c.contenders}
        for base in ("fullkv", "sliding"):  # the pairs the paper and the issue read: X - FullKV, FoV - Sliding
            got = {a: _ci(m.diffs[(a, b)], "diff") for a, b in c.pairs if b == base}
            if got:
                row[f"paired_vs_{base}"] = got
        row["paired"] = [{"a": a, "b": b, **_ci(m.diffs[(a, b)], "diff")} for a, b in c.pairs]
        metrics[key] = row
    out = {"kind": c.kind, "model": c.model, "matched_items": c.matched_videos, "policies": list(c.contenders),
           "latency_s": {p: _ci(x) for p, x in c.latency.items()}, "metrics": metrics}
    if c.speedup:
        out["speedup_vs_fullkv"] = {p: float(x.mean) for p, x in c.speedup.items()}
    return out


def analyses_json(an: Analyses, tolerances: list[float]) -> dict[str, Any]:
    """The analyses as JSON: the same numbers as the report's tables (cells: mean, lo, hi, n)."""
    boot = an.study.boot

    def mr(a: Analyses) -> list[dict[str, Any]]:
        return [{"model": x.model, "context": x.context, "trajectory": x.trajectory, "metric": x.key,
                 "windows": x.labels, "per_revisit_mean": [float(mean_cell(u, boot).mean) for u in x.per_window],
                 "decay_R1_minus_RK": _ci(mean_cell(x.decay, boot)), "qualified_n": len(x.decay_q),
                 "qualified_decay": _ci(mean_cell(x.decay_q, boot)) if x.decay_q else None}
                for x in a.multi_revisit]

    def ca(a: Analyses) -> list[dict[str, Any]]:
        return [{"model": x.model, "context": x.context, "metric": x.key, "pairs": [list(p) for p in x.pairs],
                 "cases": sorted({c for c, _ in x.pairs}), "d_lrlr": float(np.mean([u.value for u in x.d_lrlr])),
                 "d_lrud": float(np.mean([u.value for u in x.d_lrud])),
                 "delta_axis": _ci(mean_cell(x.delta, boot), "diff"),
                 "qualified_cases": sorted({c for c, _ in x.qualified_pairs}),
                 "qualified_delta_axis": _ci(mean_cell(x.delta_q, boot), "diff") if x.delta_q else None}
                for x in a.cross_axis]

    cov = []
    for x in an.coverage:
        row: dict[str, Any] = {"model": x.model, "context": x.context, "trajectory": x.trajectory,
                               "pose_source": ", ".join(x.pose_sources) or "-"}
        for k, us in x.slots.items():
            row["departure" if k == "D" else k] = {"rate": float(np.mean([u.value for u in us])), "n": len(us)}
        cov.append(row)
    return {"verdict": [line_data(x) for x in an.verdict.lines],
            "multi_revisit": mr(an), "cross_axis": ca(an), "qualification": cov,
            "tolerance_sensitivity": {f"{t:g}": {"multi_revisit": mr(an.at_tolerance(t)),
                                                 "cross_axis": ca(an.at_tolerance(t))} for t in tolerances},
            "context_policies": [_comparison_json(c) for c in an.comparisons if c.kind == "policies"],
            "model_comparison": next((_comparison_json(c) for c in an.comparisons if c.kind == "models"), None),
            "sources": an.sources}


def analyses_markdown(an: Analyses) -> str:
    """The analyses in Markdown, the verdict first (the report's tables hold the same numbers with provenance)."""
    s = an.study
    L = ["# Analyses", "", verdict_markdown(an)]
    if an.sources:
        L += ["## Sources (pose / depth / mask source of every metric used below; ground truth never scores)", "",
              "'-': none (frames only; windows come from the prescribed path).", "",
              "| metric | poses | depth | masks |", "| --- | --- | --- | --- |"]
        for k, d in an.sources.items():
            L.append(f"| {k} | {', '.join(d.get('pose', [])) or '-'} | {', '.join(d.get('depth', [])) or '-'} | "
                     f"{', '.join(d.get('mask', [])) or '-'} |")
        L.append("")
    for c in an.comparisons:
        pols = c.contenders
        L += [f"## Comparison: {c.title} ({plural(c.matched_videos, 'matched item')}; paired differences)", "",
              "| metric | " + " | ".join(pols) + "".join(f" | {a} - {b}" for a, b in c.pairs) + " |",
              "| --- |" + " --- |" * (len(pols) + len(c.pairs))]
        for key, m in c.metrics.items():
            L.append(f"| {key} | " + " | ".join(fmt(m.means[p]) for p in pols)
                     + "".join(f" | {fmt(m.diffs[p])}" for p in c.pairs) + " |")
        L.append("| generation time [s] | " + " | ".join(fmt(c.latency[p]) for p in pols) + " |")
        if c.speedup:
            L.append("| speedup vs FullKV | " + " | ".join(fmt(c.speedup[p]) for p in pols) + " |")
        L.append("")
    if an.multi_revisit:
        L += ["## Multi-revisit decay (first - last window; qualified = every window pose-qualified or "
              "tracking-supported)", "",
              "| model | context | trajectory | metric | per window | first - last | qualified n | qualified |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for x in an.multi_revisit:
            pr = ", ".join(f"{lab} {fixed(mean_cell(u, s.boot).mean)}" for lab, u in zip(x.labels, x.per_window))
            L.append(f"| {x.model} | {x.context} | {x.trajectory} | {x.key} | {pr} | {fmt(mean_cell(x.decay, s.boot))} "
                     f"| {len(x.decay_q)} | {fmt(mean_cell(x.decay_q, s.boot)) if x.decay_q else 'n/a'} |")
        L.append("")
    if an.cross_axis:
        L += ["## Cross-axis excess degradation Δ_axis = d_LRUD - d_LRLR (d = R1 - R2, matched case and seed)", "",
              "| model | context | metric | d_LRLR | d_LRUD | Δ_axis | qualified n | qualified Δ_axis |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for ca in an.cross_axis:
            L.append(f"| {ca.model} | {ca.context} | {ca.key} | {fmt(mean_cell(ca.d_lrlr, s.boot))} | "
                     f"{fmt(mean_cell(ca.d_lrud, s.boot))} | {fmt(mean_cell(ca.delta, s.boot))} | {len(ca.delta_q)} | "
                     f"{fmt(mean_cell(ca.delta_q, s.boot)) if ca.delta_q else 'n/a'} |")
        L.append("")
    if an.coverage:
        L += ["## Departure / return coverage (appendix G.1)", ""]
        for cov in an.coverage:
            rest = ", ".join(f"{'departure' if k == 'D' else k}: {np.mean([u.value for u in us]):.0%} of {len(us)}"
                             for k, us in cov.slots.items())
            L.append(f"- {cov.model} / {cov.context} / {cov.trajectory} (poses: {', '.join(cov.pose_sources) or '-'}): "
                     f"{rest or 'no revisit slot'}")
        L.append("")
    return "\n".join(L)


def analyses_files(an: Analyses, ecfg: Any) -> dict[str, Any]:
    """``analyses.{json,md}`` of a run by file name (the JSON file's data, the Markdown text)."""
    return {"analyses.json": analyses_json(an, [float(t) for t in ecfg.return_tolerances_deg[1:]]),
            "analyses.md": analyses_markdown(an)}
