"""The commands that hand the config to one module each: ``report``, ``verify``, ``setup``, ``judge check``,
``release import`` and ``release check``."""

from __future__ import annotations

import sys

from harness.app.run_config import RunConfig


def cmd_report(cfg: RunConfig) -> None:
    """``report run=<a> [run=<b> ...]``: the study report (evaluate/reporting, docs/report.md)."""
    import contextlib

    from evaluate.reporting import default_out_dir
    from evaluate.reporting.cli import cmd_report as build
    from harness.io import confine
    from harness.outputs import RunDir

    names = cfg.report_runs or [cfg.run]
    runs = [RunDir.existing(n, cfg.output_root).path for n in names]
    with contextlib.ExitStack() as stack:  # never beside an evaluation of one of the runs (it rewrites eval/)
        for r in sorted(set(runs)):  # in path order: two reports of overlapping runs cannot deadlock
            stack.enter_context(RunDir(r).lock("eval"))
        roots = [*runs, cfg.report_out if cfg.report_out else default_out_dir(runs)]
        stack.enter_context(confine(*roots))
        build(runs, cfg, cfg.output_root)


def cmd_verify(cfg: RunConfig) -> None:
    """``verify``: the delivery check of the run named by the same overrides (see :mod:`harness.app.verify`)."""
    from harness.app.verify import verify_run

    report = verify_run(cfg)
    print(report.table())
    if not report.ok:
        sys.exit(1)


def cmd_setup(cfg: RunConfig) -> None:
    """``setup model=NAME [print=true]``: see :mod:`harness.app.setup`."""
    from harness.app.setup import run_setup

    run_setup(cfg)


def cmd_judge_check(cfg: RunConfig) -> None:
    """``python -m harness judge check``: ping the configured judge server and print what it serves."""
    from evaluate.judge import check_server

    code = check_server(cfg.evaluate.judge)
    if code:
        sys.exit(code)


def cmd_release_import(cfg: RunConfig) -> None:
    """``release import source=<dir> run=<name>``: the official release as a run, then evaluated
    (:mod:`harness.app.release`)."""
    from harness.app.commands.evaluation import evaluate
    from harness.app.extras import require
    from harness.app.release import release_import

    require("release import (the release's parquet rows)", ("pyarrow",))  # before the run folder is made
    if not release_import(cfg, evaluate):
        sys.exit(1)


def cmd_release_check(cfg: RunConfig) -> None:
    """``release check run=<name>``: each video's measured camera path against its preset."""
    from harness.app.release import release_check

    release_check(cfg)
