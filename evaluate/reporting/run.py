"""A run's ``eval/`` folder, written once its videos are evaluated (the end of :func:`evaluate.stage.evaluate_run`).

From the results the evaluation just produced (no ``metrics.json`` is read back) it builds one
:class:`~evaluate.reporting.analyses.Analyses`, and everything reads that: the study report of the run
(``eval/report/``, its page is the run's page), the run tables (``summary.*``, ``per_item.csv``, ``dynamic.*``),
``analyses.{md,json}``, ``validity.{md,json}`` and the verdict the console prints. ``eval/index.html`` only
redirects to ``report/index.html``, so an old link or bookmark still opens the run's page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..results import ItemResult

_REDIRECT = ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>WorldMem run</title>"
             "<meta http-equiv='refresh' content='0; url=report/index.html'></head><body><p>The run's page is the "
             "study report: <a href='report/index.html'>report/index.html</a>.</p></body></html>\n")


def write_run_outputs(run_dir: Path, results: Sequence[tuple[Path, ItemResult]], ecfg: Any) -> dict[str, Any]:
    """Write ``run_dir/eval/`` from ``(item folder, result)`` pairs. Returns ``{tables: {per_item, summary,
    dynamic}, analyses, validity, html, report, verdict: [lines], report_s}`` (paths as strings; ``report_s``:
    seconds spent on the study report, its strips and figures).

    The run tables and ``validity.*`` are built, then written together, before the study report (a report that
    fails still leaves them); ``analyses.*`` and ``index.html`` after it."""
    import time

    from ..validity import validity_table
    from . import ReportError, build_report
    from .collect import items_of
    from .run_tables import analyses_files, dynamic_files, table_files
    from .verdict import verdict_lines

    run_dir = Path(run_dir)
    ev = run_dir / "eval"
    items = items_of(run_dir, results)
    done = [r for _, r in results]
    vrows, vmd = validity_table(done)
    files = {**table_files(items, ecfg), **dynamic_files(items),
             "validity.json": {"rows": vrows, "items": [{"item": r.item, "validity": r.validity}
                                                        for r in done if r.validity]},
             "validity.md": vmd}
    write_files(ev, files)
    tables = {"per_item": str(ev / "per_item.csv"), "summary": str(ev / "summary.md"),
              "dynamic": str(ev / "dynamic.md") if "dynamic.md" in files else None}
    out: dict[str, Any] = {"tables": tables, "validity": str(ev / "validity.md"), "report": None, "verdict": [],
                           "analyses": {"analyses": str(ev / "analyses.md")}, "html": None, "report_s": 0.0}
    t0 = time.perf_counter()
    try:
        rep = build_report([run_dir], ev / "report", items=items)
    except ReportError:  # nothing evaluated (every item failed before scoring): the run tables say why
        write_files(ev, {"analyses.md": "# Analyses\n\nNo evaluated video.\n"})
        return out
    out["report_s"] = time.perf_counter() - t0
    an = rep["analyses"]
    write_files(ev, {**analyses_files(an, ecfg), "index.html": _REDIRECT})
    out.update(html=str(ev / "index.html"), report=rep["html"], verdict=verdict_lines(an))
    return out


def write_files(folder: Path, files: dict[str, Any]) -> None:
    """Each file of ``files`` (name -> its text, or for a ``.json`` name its data, written as strict JSON) in
    ``folder``, atomically and scrubbed (:mod:`harness.io`)."""
    from harness.io import write_json, write_text

    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if name.endswith(".json"):
            write_json(folder / name, content)
        else:
            write_text(folder / name, content)
