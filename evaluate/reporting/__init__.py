"""The study report: the verdict, paper-shaped tables (Markdown, CSV, LaTeX), figures, the paper's numbers beside
ours, and a static HTML page, built from the ``metrics.json`` files of one or more runs. A run's own page
(``<run>/eval/report/index.html``, the end of every evaluation) is the report of that one run.

``build_report(run_dirs, out_dir)`` (:mod:`evaluate.reporting.build`) is the entry point (``python -m harness report run=<a> [run=<b> ...]``);
:func:`evaluate.reporting.run.write_run_outputs` writes a run's ``eval/`` folder (its tables and this report) from
the results the evaluation just produced. Every cell's provenance (the metrics.json entries and fields it was
computed from) is written to ``sources.json``.

Modules: ``collect`` (items, the oracle/case filter), ``study`` (units, cells, groupings), ``analyses`` (every
analysis, computed once), ``tables`` (shapes tables), ``verdict`` (the verdict in words), ``render`` (Markdown,
CSV, LaTeX), ``plots`` / ``strips`` (figures), ``page`` (HTML), ``paper`` (published numbers), ``run_tables`` (the
run's summary / per-item / dynamic / analyses files), ``run`` (a run's ``eval/`` folder), ``cli``, ``browser``.
"""

from .build import build_report, default_out_dir, draw_strips, page_videos, settings_of
from .collect import Item, ReportError, load_items, resolve_run_dir

__all__ = ["Item", "ReportError", "build_report", "default_out_dir", "draw_strips", "load_items", "page_videos",
           "resolve_run_dir", "settings_of"]
