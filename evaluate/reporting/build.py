"""Building the study report of one or more runs (:func:`build_report`): tables, figures, strips, the page and
``sources.json``; :func:`default_out_dir` is where it goes."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cells import Cell
from .collect import Item, PageKey, ReportError, load_items

if TYPE_CHECKING:
    from .analyses import Analyses
    from .playable import PageVideo
    from .plots import Palette
    from .strips import Strip
    from .study import Study
    from .tables import Table


def default_out_dir(run_dirs: Sequence[Path]) -> Path:
    """``<run>/eval/report`` for one run; ``<output_root>/reports/<a>+<b>`` for several."""
    run_dirs = [Path(r) for r in run_dirs]
    if len(run_dirs) == 1:
        return run_dirs[0] / "eval" / "report"
    return run_dirs[0].parent / "reports" / "+".join(r.name for r in run_dirs)


def settings_of(items: list[Item]) -> dict[str, Any]:
    """The bootstrap, departure threshold and return tolerance the evaluation recorded (defaults otherwise)."""
    s = next((it.settings for it in items if it.settings), None) or {}
    return {"bootstrap": s.get("bootstrap", {"n": 2000, "seed": 0}), "departure_deg": s.get("departure_deg", 30.0),
            "tolerance_deg": (s.get("return_tolerances_deg") or [30.0])[0]}


def build_report(run_dirs: Sequence[Path | str], out_dir: Path | str | None = None, *,
                 boot: dict[str, int] | None = None, main_context: str = "fullkv", strips: bool = True,
                 figures: bool = True, paper_numbers: Path | None = None,
                 human_studies: Sequence[Path | str] = (), items: list[Item] | None = None) -> dict[str, Any]:
    """Build the report of ``run_dirs`` into ``out_dir`` (default :func:`default_out_dir`).

    ``strips`` / ``figures``: draw the per-item revisit strips / the charts and trajectory previews (both on by
    default; off gives the tables and the page only, fast). ``human_studies``: study folders whose agreement
    tables (docs/human-study.md) are added after the others. ``items``: the runs' items when the caller has them
    already (the evaluation stage); otherwise they are read from the manifests. Returns ``{"out_dir", "html",
    "markdown", "sources", "tables": {id: {md, csv, tex}}, "figures", "items", "analyses", "tables_built"}``
    (``analyses``: the :class:`~evaluate.reporting.analyses.Analyses` every table and figure was built from).
    Raises :class:`ReportError` when no run has an evaluated item."""
    from .analyses import Analyses
    from .page import write_page
    from .plots import Palette
    from .study import Study

    runs = [Path(r).resolve() for r in run_dirs]
    for r in runs:
        if not (r / "manifest.jsonl").exists():
            raise ReportError(f"{r}: no manifest.jsonl (not a run directory made by the harness)")
    out = Path(out_dir).resolve() if out_dir else default_out_dir(runs).resolve()
    skipped: dict[str, int] = {}
    if items is None:
        items, skipped = load_items(runs)
    if not items:
        raise ReportError(f"no evaluated item in {', '.join(str(r) for r in runs)}: evaluate first "
                          "(python -m harness stage=evaluate run=<name>)")
    s = settings_of(items)

    @functools.cache  # every cell's provenance names its metrics.json: one relpath per file
    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, out)).as_posix()

    study = Study(items, boot or s["bootstrap"], rel, main_context, s["departure_deg"], s["tolerance_deg"])
    an = Analyses(study)
    tables = _all_tables(study, an, paper_numbers, human_studies)
    files = _write_tables(out, runs, items, an, tables, rel)
    pal = Palette(items)
    figs, previews = _draw_figures(out / "figures", an, items, tables, pal) if figures else ({}, {})
    strip_out: dict[PageKey, Strip | None] = {}
    if strips:
        from .strips import strips_dir

        strip_out = draw_strips(items, strips_dir(out))
    html = write_page(out, an, tables, figs, previews, strip_out, runs, skipped,
                      {k: {"md": v["md"], "csv": v["csv"], "tex": v["tex"]} for k, v in files.items()}, pal,
                      videos=page_videos(items, out / "videos"))
    return {"out_dir": str(out), "html": str(html), "markdown": str(out / "report.md"),
            "sources": str(out / "sources.json"), "tables": files, "items": len(items),
            "figures": {k: [str(p) for p in v] for k, v in figs.items()}, "analyses": an, "tables_built": tables}


def _all_tables(study: Study, an: Analyses, paper_numbers: Path | None,
                human_studies: Sequence[Path | str]) -> list[Table]:
    """The report's tables in page order: the study's, the paper comparison, then each human study's."""
    from .paper import comparison_table, load_paper_numbers
    from .tables import Builder

    b = Builder(study, an)
    tables = b.all_tables()
    tables.append(comparison_table(b, load_paper_numbers(paper_numbers) if paper_numbers else None))
    if human_studies:
        from evaluate.human.report import study_tables

        for i, sd in enumerate(human_studies):
            tables += study_tables(Path(sd), "" if len(human_studies) == 1 else f"_{i + 1}")
    return tables


def _write_tables(out: Path, runs: list[Path], items: list[Item], an: Analyses, tables: list[Table],
                  rel: Callable[[Path], str]) -> dict[str, dict[str, str]]:
    """Each table as Markdown, CSV and LaTeX under ``out/tables``, ``report.md`` (the verdict and every table),
    ``tables.tex`` and ``sources.json`` (every cell's provenance). Returns table id -> {md, csv, tex} paths
    relative to ``out``."""
    from harness.io import write_json, write_text

    from . import render
    from .verdict import verdict_markdown

    tdir = out / "tables"
    files: dict[str, dict[str, str]] = {}
    sources: dict[str, Any] = {}
    paths_index: dict[str, int] = {}

    def intern(path: str) -> int:
        return paths_index.setdefault(path, len(paths_index))

    for t in tables:
        paths = {"md": tdir / f"{t.id}.md", "csv": tdir / f"{t.id}.csv", "tex": tdir / f"{t.id}.tex"}
        write_text(paths["md"], render.markdown(t, full=True))
        write_text(paths["csv"], render.to_csv(t))
        write_text(paths["tex"], render.latex(t))
        files[t.id] = {k: rel(p) for k, p in paths.items()}
        sources[t.id] = {"title": t.title, "index": t.index, "rows": [
            {"key": list(key), "cells": {c: v.provenance(intern) for c, v in cells.items()
                                         if isinstance(v, Cell)}} for key, cells in t.rows]}
    md = "\n".join(["# Study report", "", (f"Runs: {', '.join(r.name for r in runs)}; {len(items)} evaluated "
                                            f"videos. Oracle entries excluded, and dynamic cases from the "
                                            "static-content metrics. Provenance of every cell: sources.json."),
                    "", verdict_markdown(an)] +
                   [render.markdown(t) for t in tables])
    write_text(out / "report.md", md)
    write_text(out / "tables.tex", "\n".join(render.latex(t) for t in tables))
    # compact: a study of thousands of videos has millions of provenance terms (indenting is Python's slow encoder)
    write_json(out / "sources.json", {"runs": [str(r) for r in runs], "base": ".", "files": list(paths_index),
                                      "tables": sources}, compact=True)
    return files


def _draw_figures(fdir: Path, an: Analyses, items: list[Item], tables: list[Table],
                  pal: Palette) -> tuple[dict[str, list[Path]], dict[str, list[Path]]]:
    """The charts (decay, latency vs memory, the model profile) and ``figures.json`` (colours, markers, what each
    panel drew) in ``fdir``, and the trajectory previews. Returns (figure title -> paths, trajectory -> paths)."""
    from harness.io import write_json

    from . import plots

    by_id = {t.id: t for t in tables}
    figs: dict[str, list[Path]] = {}
    drawn: dict[str, list[dict[str, Any]]] = {}
    for name, fid, (fig_paths, panels) in (
            ("Per-window decay", "decay", plots.decay_curves(an, pal, fdir / "decay", an.verdict.metrics)),
            ("Latency vs memory on the metrics that separate the policies", "latency_vs_memory",
             plots.latency_vs_memory(an, pal, fdir / "latency_vs_memory")),
            ("Model profile", "profile", plots.profile_bars(by_id["main"], pal, fdir / "profile"))):
        figs[name] = fig_paths
        drawn[fid] = panels
    write_json(fdir / "figures.json", {"colours": pal.colours, "markers": pal.markers, "figures": drawn})
    return figs, plots.trajectory_previews(items, fdir)


def page_videos(items: list[Item], folder: Path) -> dict[PageKey, PageVideo]:
    """(run, *item key) -> :class:`~evaluate.reporting.playable.PageVideo` for every item with a video: the
    original where a browser plays it, else an H.264 copy in ``folder`` (or a warning)."""
    from .playable import page_video
    from .strips import strip_path

    out: dict[PageKey, PageVideo] = {}
    for it in items:
        video = it.item_dir / "video.mp4"
        if video.exists():
            out[(it.run,) + it.key] = page_video(video, strip_path(folder, it).with_suffix(".mp4"))
    return out


def draw_strips(items: list[Item], folder: Path) -> dict[PageKey, Strip | None]:
    """Each video's revisit strip (:mod:`evaluate.reporting.strips`), reused while newer than the video and its
    metrics. Returns (run, *item key) -> (png, rows) or None (no video, or no metric recorded its frames)."""
    from concurrent.futures import ThreadPoolExecutor

    from .strips import MAX_ROWS, frame_strip, strip_frames, strip_path, strip_rows

    out: dict[PageKey, Strip | None] = {}
    todo: list[tuple[Item, Path]] = []
    for it in items:
        p = strip_path(folder, it)
        video = it.item_dir / "video.mp4"
        if not video.exists():
            out[(it.run,) + it.key] = None
            continue
        fresh = p.exists() and p.stat().st_mtime >= max(it.metrics_path.stat().st_mtime, video.stat().st_mtime)
        if fresh:
            rows = [r.as_dict() for r in strip_rows(it)[:MAX_ROWS]]
            out[(it.run,) + it.key] = (p, rows) if rows else None
        else:
            todo.append((it, p))
    # the next video's frames are read (PyAV releases the GIL) while this one's strip is drawn
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="strip-frames") as pool:
        nxt = pool.submit(strip_frames, todo[0][0]) if todo else None
        for i, (it, p) in enumerate(todo):
            cur, nxt = nxt, (pool.submit(strip_frames, todo[i + 1][0]) if i + 1 < len(todo) else None)
            out[(it.run,) + it.key] = frame_strip(it, p, frames=cur)
    return out
