"""``python -m harness report run=<name> [run=<other> ...] [report_out=<dir>] [main_context=fullkv]
[report_strips=false] [report_figures=false] [human_study=<name or dir>[,<other>]]``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from harness.sections import Fix, Section

_PATH = Fix("give a path (or null)")


class ReportOptions(Section, BaseModel):
    """The report command's options (top-level keys of its configuration; docs/report.md).

    report_runs: the runs of ``run=A run=B ...`` (:func:`merge_run_args`; None: ``run`` alone). report_out: the
    report's folder (None: beside the first run). main_context: the policy of the main comparison (None: fullkv).
    report_strips / report_figures: draw the strips and the figures. human_study: human studies to add (names
    under ``output_root`` or folders).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    report_runs: Annotated[Optional[list[StrictStr]], Field(min_length=1), Fix("give run names")] = None
    report_out: Annotated[Optional[StrictStr], Field(pattern=r"\S"), _PATH] = None
    main_context: Optional[StrictStr] = None
    report_strips: Annotated[StrictBool, Fix("use true or false")] = True
    report_figures: Annotated[StrictBool, Fix("use true or false")] = True
    human_study: Annotated[Optional[Union[list[StrictStr], StrictStr]], Fix("give study names or folders")] = None

    def studies(self) -> list[str]:
        """``human_study`` as a list (a comma-separated value split)."""
        hs = self.human_study
        return [str(s) for s in (hs if isinstance(hs, list) else str(hs).split(","))] if hs else []


#: the options given as plain ``key=value`` on the command line (rewritten to Hydra's ``+key=value``: they are not in
#: config.yaml): every field of :class:`ReportOptions` but ``report_runs``, which is made from the ``run=`` arguments
REPORT_KEYS: tuple[str, ...] = tuple(k for k in ReportOptions.model_fields if k != "report_runs")


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


def cmd_report(runs: list[Path], options: ReportOptions, output_root: str) -> None:
    """Build the report of ``runs`` (resolved run folders) with ``options``, print where it is. Human studies are
    names under ``output_root`` or folders."""
    from . import build_report

    studies = []
    if options.human_study:
        from evaluate.human.common import resolve_study

        studies = [resolve_study(s, output_root) for s in options.studies()]
    out = build_report(runs, options.report_out, main_context=options.main_context or "fullkv",
                       strips=options.report_strips, figures=options.report_figures, human_studies=studies)
    print(f"report of {out['items']} video(s) from {', '.join(str(r) for r in runs)}")
    print(f"  html:     {out['html']}")
    print(f"  tables:   {Path(out['out_dir']) / 'tables'}  (md, csv, tex)  all: {out['markdown']}")
    print(f"  sources:  {out['sources']}")
    sys.stdout.flush()
