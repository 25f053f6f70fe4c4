"""The ``release`` commands (docs/release.md): import the official WorldMemBench release as a run and evaluate it,
and check the harness's reading of its trajectory names against its videos."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.app.run_config import RunConfig


def release_import(cfg: RunConfig, evaluate: Callable[[Path, RunConfig], bool]) -> bool:
    """Import (resumable), print the summary, then evaluate the run unless ``release.evaluate=false``. False when
    an item or metric failed in the evaluation (rows that could not be imported are listed, not failures)."""
    from evaluate.release.importer import ReleaseOptions, import_release
    from harness.io import confine
    from harness.outputs import RunDir

    opts = ReleaseOptions.of(cfg.source, cfg.release)  # before anything is written
    run = RunDir.for_name(cfg.output_root, cfg.run)  # the run-name rule: nothing lands outside output_root
    with run.lock("eval"), confine(run.path):
        summary = import_release(opts, run.path, progress=cfg.progress)
        print("\n".join(summary.lines()))
        check = run.path / "release" / "check.md"
        print(f"run: {run.path}  (cases: {run.path / 'release' / 'cases'}; "
              + (f"each video's measured layout against its preset: {check})" if check.is_file() and opts.measure
                 else f"measure the layouts with `python -m harness release check run={cfg.run}`)"))
        if not cfg.release.evaluate or not run.done_rows():
            return True
        return evaluate(run.path, cfg)


def release_check(cfg: RunConfig) -> None:
    """Measure every rotation video of ``run`` against its preset and print the table and the verdict."""
    from evaluate.release.check import check_run, table_lines
    from harness.io import confine
    from harness.outputs import RunDir

    run = RunDir.existing(cfg.run, cfg.output_root)
    with run.lock("eval"), confine(run.path):
        result = check_run(run.path, progress=cfg.progress)
    print("\n".join(table_lines(result)))
    print(f"written: {run.path / 'release' / 'check.md'} and check.json")
