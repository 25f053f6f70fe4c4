"""The study report: paper-shaped tables (Markdown, CSV, LaTeX), figures, the paper's numbers beside ours, and a
static HTML page, built from the ``metrics.json`` files of one or more runs.

``build_report(run_dirs, out_dir)`` is the entry point (``python -m harness report run=<a> [run=<b> ...]``, and
the end of every evaluation). Every cell's provenance (the metrics.json entries and fields it was computed from)
is written to ``sources.json``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence

from .collect import Item, ReportError, drop_oracle, is_oracle, load_items, resolve_run_dir  # noqa: F401


def default_out_dir(run_dirs: Sequence[Path]) -> Path:
    """``<run>/eval/report`` for one run; ``<output_root>/reports/<a>+<b>`` for several."""
    run_dirs = [Path(r) for r in run_dirs]
    if len(run_dirs) == 1:
        return run_dirs[0] / "eval" / "report"
    return run_dirs[0].parent / "reports" / "+".join(r.name for r in run_dirs)


def _settings(items: list[Item]) -> dict[str, Any]:
    s = next((it.result.get("settings") for it in items if it.result.get("settings")), None) or {}
    return {"bootstrap": s.get("bootstrap", {"n": 2000, "seed": 0}), "departure_deg": s.get("departure_deg", 30.0),
            "tolerance_deg": (s.get("return_tolerances_deg") or [30.0])[0]}


def build_report(run_dirs: Sequence[Path | str], out_dir: Optional[Path | str] = None, *,
                 boot: Optional[dict] = None, main_context: str = "fullkv", strips: bool = True,
                 figures: bool = True, paper_numbers: Optional[Path] = None,
                 human_studies: Sequence[Path | str] = ()) -> dict[str, Any]:
    """Build the report of ``run_dirs`` into ``out_dir`` (default :func:`default_out_dir`).

    ``strips`` / ``figures``: draw the per-item revisit strips / the charts and trajectory previews (both on by
    default; off gives the tables and the page only, fast). ``human_studies``: study folders whose agreement
    tables (docs/human-study.md) are added after the others. Returns ``{"out_dir", "html", "markdown", "sources",
    "tables": {id: {md, csv, tex}}, "figures", "items"}``.
    Raises :class:`ReportError` when no run has an evaluated item."""
    from harness.io import write_json, write_text

    from . import plots, render
    from .paper import comparison_table, load_paper_numbers
    from .page import write_page
    from .tables import Builder

    runs = [Path(r).resolve() for r in run_dirs]
    for r in runs:
        if not (r / "manifest.jsonl").exists():
            raise ReportError(f"{r}: no manifest.jsonl (not a run directory made by the harness)")
    out = Path(out_dir).resolve() if out_dir else default_out_dir(runs).resolve()
    items, skipped = load_items(runs)
    if not items:
        raise ReportError(f"no evaluated item in {', '.join(str(r) for r in runs)}: evaluate first "
                          "(python -m harness stage=evaluate run=<name>)")
    s = _settings(items)

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, out)).as_posix()

    b = Builder(items, boot or s["bootstrap"], rel, main_context, s["departure_deg"], s["tolerance_deg"])
    tables = b.all_tables()
    tables.insert(1, comparison_table(b, load_paper_numbers(paper_numbers) if paper_numbers else None))
    if human_studies:
        from evaluate.human.report import study_tables

        for i, sd in enumerate(human_studies):
            tables += study_tables(Path(sd), "" if len(human_studies) == 1 else f"_{i + 1}")
    tdir = out / "tables"
    files: dict[str, dict[str, str]] = {}
    sources: dict[str, Any] = {}
    paths_index: dict[str, int] = {}

    def intern(path: str) -> int:
        return paths_index.setdefault(path, len(paths_index))

    for t in tables:
        paths = {"md": tdir / f"{t.id}.md", "csv": tdir / f"{t.id}.csv", "tex": tdir / f"{t.id}.tex"}
        write_text(paths["md"], render.markdown(t))
        write_text(paths["csv"], render.to_csv(t))
        write_text(paths["tex"], render.latex(t))
        files[t.id] = {k: rel(p) for k, p in paths.items()}
        sources[t.id] = {"title": t.title, "index": t.index, "rows": [
            {"key": list(key), "cells": {c: v.provenance(intern) for c, v in cells.items()
                                         if hasattr(v, "provenance")}} for key, cells in t.rows]}
    md = "\n".join(["# Study report", "", f"Runs: {', '.join(r.name for r in runs)}; {len(items)} evaluated "
                    f"videos. Oracle entries excluded. Provenance of every cell: sources.json.", ""] +
                   [render.markdown(t) for t in tables])
    write_text(out / "report.md", md)
    write_text(out / "tables.tex", "\n".join(render.latex(t) for t in tables))
    write_json(out / "sources.json", {"runs": [str(r) for r in runs], "base": ".", "files": list(paths_index),
                                      "tables": sources})
    fdir = out / "figures"
    by_id = {t.id: t for t in tables}
    figs: dict[str, list[Path]] = {}
    previews: dict[str, list[Path]] = {}
    if figures:
        figs = {"Per-revisit decay": plots.decay_curves(b, fdir / "decay"),
                "Model profile": plots.profile_bars(by_id["main"], fdir / "profile"),
                "Latency vs memory per context policy": plots.latency_vs_memory(by_id["context"],
                                                                                fdir / "latency_vs_memory")}
        previews = plots.trajectory_previews(items, fdir)
    strip_paths: dict[tuple, Optional[Path]] = {}
    if strips:
        for it in items:
            p = out / "strips" / ("__".join([it.run, it.model, it.context, f"seed-{it.seed}", it.trajectory,
                                             it.case_id]) + ".png")
            if not (it.item_dir / "video.mp4").exists():
                strip_paths[(it.run,) + it.key] = None
                continue
            fresh = p.exists() and p.stat().st_mtime >= max(it.metrics_path.stat().st_mtime,
                                                            (it.item_dir / "video.mp4").stat().st_mtime)
            strip_paths[(it.run,) + it.key] = p if fresh else plots.frame_strip(it, p)
    html = write_page(out, items, tables, figs, previews, strip_paths, runs, skipped,
                      {k: {"md": v["md"], "csv": v["csv"], "tex": v["tex"]} for k, v in files.items()})
    return {"out_dir": str(out), "html": str(html), "markdown": str(out / "report.md"),
            "sources": str(out / "sources.json"), "tables": files, "items": len(items),
            "figures": {k: [str(p) for p in v] for k, v in figs.items()}}
