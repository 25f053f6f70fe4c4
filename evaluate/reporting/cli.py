"""``python -m harness report run=<name> [run=<other> ...] [report_out=<dir>] [main_context=fullkv]
[report_strips=false] [report_figures=false] [human_study=<name or dir>[,<other>]]``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: report options given as plain ``key=value`` (rewritten to Hydra's ``+key=value``: they are not in config.yaml)
REPORT_KEYS = ("report_out", "main_context", "report_strips", "report_figures", "human_study")


def merge_run_args(argv: list[str]) -> list[str]:
    """For the report command: several ``run=`` become ``run=<first> +report_runs=[...]`` (Hydra keeps only the
    last of repeated keys), ``human_study=`` (repeated or comma-separated) one list, and the report options get
    Hydra's ``+``. Other commands pass through unchanged."""
    if not (len(argv) > 1 and argv[1] in ("report", "cmd=report")) and "cmd=report" not in argv:
        return argv
    runs = [a.split("=", 1)[1] for a in argv[1:] if a.startswith("run=")]
    studies = [s for a in argv[1:] if a.startswith("human_study=") for s in a.split("=", 1)[1].split(",") if s]
    out = [a for a in argv if not a.startswith(("run=", "human_study="))]
    out = [f"+{a}" if a.split("=", 1)[0] in REPORT_KEYS else a for a in out]
    if runs:
        quoted = ",".join("'" + r.replace("'", "\\'") + "'" for r in runs)
        out += [f"run={runs[0]}", f"+report_runs=[{quoted}]"]
    if studies:  # human_study=a,b or repeated: one list (Hydra would read a comma as a sweep)
        out.append("+human_study=[" + ",".join("'" + x.replace("'", "\\'") + "'" for x in studies) + "]")
    return out


def cmd_report(cfg: dict[str, Any]) -> None:
    """Resolve the runs (names under output_root, or paths), build the report, print where it is."""
    from . import build_report, resolve_run_dir

    names = cfg.get("report_runs") or [cfg["run"]]
    runs = [resolve_run_dir(n, cfg.get("output_root", "outputs")) for n in names]
    studies = []
    if cfg.get("human_study"):
        from evaluate.human.common import resolve_study

        hs = cfg["human_study"]
        studies = [resolve_study(str(s), cfg.get("output_root", "outputs"))
                   for s in (hs if isinstance(hs, (list, tuple)) else str(hs).split(","))]
    out = build_report(runs, cfg.get("report_out"), main_context=str(cfg.get("main_context") or "fullkv"),
                       strips=bool(cfg.get("report_strips", True)), figures=bool(cfg.get("report_figures", True)),
                       human_studies=studies)
    print(f"report of {out['items']} video(s) from {', '.join(str(r) for r in runs)}")
    print(f"  html:     {out['html']}")
    print(f"  tables:   {Path(out['out_dir']) / 'tables'}  (md, csv, tex)  all: {out['markdown']}")
    print(f"  sources:  {out['sources']}")
    sys.stdout.flush()
