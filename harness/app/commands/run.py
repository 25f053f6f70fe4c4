"""``run`` (the default command): plan, check, generate, then evaluate (:func:`cmd_run`); ``stage=evaluate`` is its
own command (:func:`cmd_evaluate_only`, chosen by the dispatch table): it evaluates an existing run or videos made
elsewhere. Everything is checked before the first write (:func:`prepare_run`, :func:`check_evaluate_only`)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from harness.app.commands.evaluation import evaluate, in_sweep
from harness.app.run_config import RunConfig
from harness.errors import ConfigError

if TYPE_CHECKING:
    from adapters.base import Adapter
    from harness.app.plan import Plan
    from harness.secrets import RedactedConfig

log = logging.getLogger("harness.app.cli")  # the CLI's status lines keep its logger name (console output)

#: plans the sweep pre-pass validated in this command, by config (:func:`config_key`): the job (in this process,
#: basic launcher) takes its plan from here instead of planning twice. Set for one command by :func:`prepared`.
_PREPARED: ContextVar[Optional[dict[str, Plan]]] = ContextVar("harness_prepared_plans", default=None)


@contextmanager
def prepared(plans: dict[str, Plan]) -> Iterator[None]:
    """Within the block, ``run`` takes a job's plan from ``plans`` (filled by :func:`validate_job`)."""
    token = _PREPARED.set(plans)
    try:
        yield
    finally:
        _PREPARED.reset(token)


class NothingToRun(ConfigError):
    """No case of the case set runs on the chosen trajectories: a user error for one run; in a sweep, that job is
    skipped with a line (a study over trajectories and cases where LR-Hold is for dynamic cases only) unless no job
    of the sweep has anything to run."""


def config_key(cfg: RunConfig) -> str:
    """The identity of a job's config in :data:`_PREPARED`: its typed form (every section's every field; two
    configs that compose alike read alike)."""
    return repr(cfg)


def videos_args(cfg: RunConfig) -> tuple[Path, Path]:
    """``videos`` and its manifest (default ``<videos>/manifest.json``)."""
    folder = Path(str(cfg.videos))
    return folder, Path(str(cfg.videos_manifest or folder / "manifest.json"))


def log_readiness(adapter: Adapter) -> None:
    for finding in adapter.readiness(probe=False):  # shown, not enforced: a dry run needs no weights
        log.warning("readiness (%s, not enforced in a dry run): %s: %s", finding.level, adapter.config.name, finding)


def check_evaluate_only(cfg: RunConfig) -> None:
    """What ``stage=evaluate`` checks before its first write: every entry of the videos made elsewhere (``videos=``);
    an existing run is checked when it is opened."""
    if cfg.videos:
        from evaluate.external import check_import

        check_import(*videos_args(cfg), cfg.cases)


def prepare_run(cfg: RunConfig, report: bool = True) -> Plan:
    """Everything ``run`` checks before its first write (also run for every job of a sweep before job 0 starts):
    the plan (names, cases, trajectories, a compile of each trajectory), readiness, GPUs, and finished items made
    with another config (the settings themselves were checked when the config was read)."""
    from harness.app.plan import plan_from_config
    from harness.app.runner import check_fingerprints, gpu_pool_for

    plan = plan_from_config(cfg)
    adapter, specs = plan.adapter, plan.specs
    if cfg.dry_run:
        if report:
            log_readiness(adapter)
    else:
        check_requires(adapter, cfg)  # a missing extra (torch, the served client): one line naming it
        adapter.check_ready()  # a missing checkout / checkpoint / environment fails here, before anything is written
    if not plan.items:
        raise NothingToRun(
            f"nothing to run: no case in {cfg.cases.source} lists trajectory "
            f"{', '.join(specs)} (check cases.include / cases.families)"
        )
    plan.pool = gpu_pool_for(adapter, cfg, cfg.dry_run)
    if plan.run_dir.is_dir():
        check_fingerprints(plan, cfg.overwrite, cfg.dry_run)
    return plan


def check_requires(adapter: Adapter, cfg: RunConfig) -> None:
    """The optional modules the adapter imports in this process (``Adapter.requires``): a
    :class:`harness.errors.MissingDependencyError` naming the extra when one is missing."""
    from harness.app.extras import require

    served = cfg.served
    what = f"model={adapter.config.name}" + (f" backend={served.name}" if served else "")
    require(what, type(adapter).requires)


def validate_job(cfg: RunConfig) -> None:
    """What a job checks before it writes anything (run for every job of a sweep before job 0 starts); a ``run``
    job's plan is kept for the job (:func:`prepared`)."""
    if cfg.cmd != "run":
        return
    if cfg.stage == "evaluate":
        check_evaluate_only(cfg)
        return
    plan = prepare_run(cfg, report=False)
    plans = _PREPARED.get()
    if plans is not None:
        plans[config_key(cfg)] = plan


def planned(cfg: RunConfig) -> Optional[Plan]:
    """The plan the sweep pre-pass made for ``cfg`` in this command (None: none was made)."""
    return (_PREPARED.get() or {}).get(config_key(cfg))


def _plan_for(cfg: RunConfig) -> Optional[Plan]:
    """The job's plan: the sweep pre-pass's, or planned now (None: a sweep job with nothing to run, skipped)."""
    plans = _PREPARED.get()
    plan = plans.pop(config_key(cfg), None) if plans is not None else None  # validated by the sweep's pre-pass
    if plan is not None:
        if cfg.dry_run:
            log_readiness(plan.adapter)
        return plan
    try:
        return prepare_run(cfg)
    except NothingToRun as exc:
        if not in_sweep():
            raise
        log.warning("this sweep job is skipped: %s", exc)
        return None


def cmd_run(cfg: RunConfig) -> None:
    """``run``: generate the plan's items (this shard, this rank), then evaluate the run when it is complete
    (``stage=evaluate`` goes to :func:`cmd_evaluate_only` instead: :func:`harness.app.cli.handler_for`)."""
    from harness.app.runner import run_items
    from harness.dist import bind_local_device, current_rank
    from harness.io import confine

    plan = _plan_for(cfg)
    if plan is None:
        return None
    run_dir = plan.run_dir
    rank = current_rank()
    bind_local_device(rank)

    def start() -> None:  # the fingerprints hold: the first writes of this run
        if rank.is_main:
            from harness.io import remove_dead_temps

            save_config(plan.recorded, run_dir)
            # then what a process killed mid-write left (its pid is gone; this process's own temporaries are never
            # taken). A dry run skips this walk over the whole run (a study's sweep jobs share one run: it grew
            # quadratic); each item folder it compiles is swept under the item's lock
            # (harness.outputs.remove_stale_temps), the manifest's temporaries when it is written.
            if not cfg.dry_run:
                remove_dead_temps(run_dir)

    cpu = time.process_time()  # this process's CPU seconds, all its threads (a sweep's job has its own process)
    with confine(run_dir):  # every write of the run lands in its run directory (harness.io refuses others)
        summary = run_items(plan, dry_run=cfg.dry_run, overwrite=cfg.overwrite, progress=cfg.progress,
                            rank=rank, previews=cfg.previews, on_start=start)
    print(summary.table())
    _note(summary, generation_s=summary.seconds, generation_cpu_s=time.process_time() - cpu)
    evaluated_ok = True
    if cfg.stage == "all" and not cfg.dry_run and cfg.evaluate_enabled and rank.is_main:
        t0, cpu = time.perf_counter(), time.process_time()
        timings: dict[str, float] = {}
        evaluated_ok = _evaluate_when_complete(plan, cfg, produced=bool(summary.done or summary.skipped),
                                               timings=timings)
        strips = timings.get("strips_cpu_s", 0.0)  # report work done while scoring: counted as report
        _note(summary, evaluation_s=time.perf_counter() - t0, evaluation_cpu_s=time.process_time() - cpu - strips,
              strips_cpu_s=strips)
    if not (summary.ok and evaluated_ok):
        sys.exit(1)


#: what the job of this worker process did (:func:`note_job`), read by the local sweep's worker when the job ends
_JOB_NOTES: dict[str, Any] = {}
#: True in a worker of a local sweep (harness/app/sweep.py sets it): a job scores its own items and leaves the run's
#: tables to the sweep
_REPORT_AT_END: list[bool] = []


def reports_at_end() -> bool:
    """This process runs a job of a local sweep, whose run's tables, report and verdict the sweep writes once."""
    return bool(_REPORT_AT_END)


def note_job(**fields: Any) -> None:
    """Record what this job did (item counts, phase seconds) for the sweep's line about it."""
    _JOB_NOTES.update(fields)


def start_sweep_worker() -> None:
    """This process is a worker of a local sweep from now on (:func:`reports_at_end`)."""
    _REPORT_AT_END[:] = [True]


def take_job_notes(clear: bool = False) -> dict[str, Any]:
    """A copy of what the job noted (:func:`note_job`); ``clear``: forget it (a new job starts)."""
    notes = dict(_JOB_NOTES)
    if clear:
        _JOB_NOTES.clear()
    return notes


def _note(summary: Any, **seconds: float) -> None:
    """What this job did, for the line a local sweep prints about it (:func:`note_job`)."""
    note_job(done=len(summary.done), skipped=len(summary.skipped) + len(summary.elsewhere),
             failed=len(summary.failed), compiled=len(summary.compiled), **seconds)


def _evaluate_when_complete(plan: Plan, cfg: RunConfig, produced: bool,
                            timings: Optional[dict[str, float]] = None) -> bool:
    """Evaluate the run once every shard's items are finished (False: an item or metric failed). A job of a local
    sweep scores only its own items: the sweep writes the run's tables, report and verdict once, at its end.
    ``timings``: filled as :func:`harness.app.commands.evaluation.evaluate` fills it."""
    from harness.app.runner import run_complete
    from harness.io import confine

    missing = run_complete(plan.run_dir, plan.all_items)
    if not produced:  # say what happened instead of reporting absent metrics
        log.warning("no video was produced: every item failed (causes above, full logs in each item's "
                    "upstream.log / meta.json); evaluation skipped")
    elif reports_at_end():
        return evaluate(plan.run_dir, cfg, only=[plan.run_dir / i.rel_dir for i in plan.items], timings=timings)
    elif missing:
        log.info("evaluation deferred: %d item(s) of this run are not finished yet (other shards); the shard "
                 "that finishes last evaluates, or run stage=evaluate afterwards", len(missing))
    else:
        with plan.run.lock("eval"), confine(plan.run_dir):  # two finishing shards never evaluate at once
            return evaluate(plan.run_dir, cfg, timings=timings)
    return True


def save_config(recorded: RedactedConfig, run_dir: Path) -> None:
    """The resolved config (as the run records it: secrets redacted, :attr:`Plan.recorded`) and the overrides of
    this call, redacted alike, under ``<run>/.hydra/<time>/.hydra/`` (Hydra's own copy is off: it would be written
    before validation, and with secrets in it)."""
    import time

    import yaml

    from harness.io import write_text

    overrides: list[str] = []
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
        overrides = list(hc.overrides.task)
        job = f"-{hc.job.num}" if hc.mode is not None and str(hc.mode).endswith("MULTIRUN") else ""
        redact_multirun_yaml(Path(str(hc.sweep.dir)))
    except Exception:  # not under Hydra (API use): nothing to add
        job = ""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 10**6:06d}{job}"
    texts = {"config.yaml": yaml.safe_dump(recorded.config, sort_keys=False),
             "overrides.yaml": yaml.safe_dump(recorded.args(overrides))}
    for name, text in texts.items():  # redacted above, scrubbed again as every file is (harness.io.write_text)
        write_text(run_dir / ".hydra" / stamp / ".hydra" / name, text)


def redact_multirun_yaml(sweep_dir: Path) -> None:
    """Hydra's launcher saves ``multirun.yaml`` (with the overrides) before any job runs: scrub secrets there."""
    from harness.io import write_text
    from harness.secrets import scrub

    p = sweep_dir / "multirun.yaml"
    if p.is_file():
        text = p.read_text()
        clean = scrub(text)  # known values and anything shaped like a credential
        if clean != text:
            write_text(p, clean, scrubbed=True)


def cmd_evaluate_only(cfg: RunConfig | dict[str, Any]) -> None:
    """``stage=evaluate``: evaluate an existing run (``run=<name>`` or a path) or videos made elsewhere."""
    from harness.io import confine
    from harness.outputs import RunDir

    cfg = RunConfig.coerce(cfg)
    if cfg.videos:
        from evaluate.external import check_import, import_videos

        run = RunDir.for_name(cfg.output_root, cfg.run)  # the run-name rule: nothing outside output_root
        planned = check_import(*videos_args(cfg), cfg.cases)  # every entry, before anything (even the lock) is written
        with run.lock("eval"), confine(run.path):
            import_videos(*videos_args(cfg), run, planned)
            ok = evaluate(run.path, cfg)
    else:
        run = RunDir.existing(cfg.run, cfg.output_root)
        with run.lock("eval"), confine(run.path):  # one evaluation of a run at a time
            ok = evaluate(run.path, cfg)
    if not ok:
        sys.exit(1)  # the run is evaluated and tabled; some item or metric failed (listed above)
