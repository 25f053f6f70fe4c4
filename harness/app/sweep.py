"""A sweep on this machine (``launcher=local``, the default of ``-m``): its jobs run in parallel worker processes,
as many at once as the machine's cores take, and the console shows one line per job and one summary.

What happens (docs/scaling.md, "A sweep on one machine"):

1. Before any worker starts (the CLI validated every job already): each job whose items are all finished, with
   the same config and files that still match their ``meta.json``, is recognised here from its plan and reported
   at once (``already done``), without a process.
2. The other jobs run ``hydra.launcher.n_jobs`` at a time (``auto``: as many as fit, one per core this process may
   use, and for GPU jobs one per ``model.gpus_per_job`` GPUs of ``devices``) in worker processes (``spawn``), each
   through Hydra's own ``run_job``, exactly as the basic launcher runs it; a job's own
   console output goes to ``<sweep dir>/<job>/job.log``. Each job generates its items and scores them
   (``metrics.json``, :func:`harness.app.commands.evaluation.evaluate` with ``only``), but leaves the run's tables to the
   sweep. When a job ends the console gets one line: ``job k of N`` (k in finishing order), what it did, and an
   estimate of the time left for the jobs still running or waiting.
3. After the last job, each run of the sweep is evaluated once (every item's metrics are reused): its tables,
   report and verdict, printed once.

An item's bytes depend only on the item (its seed and identity), never on the process or the order, so the videos
and metrics are those of a serial sweep (``launcher=basic``, tested). The exit code is the worst of the jobs' (1: an
item or metric failed; 2: a user error a job found; 130: interrupted).
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from harness.app.run_config import RunConfig

if TYPE_CHECKING:
    from harness.app.plan import Plan

log = logging.getLogger("harness.app.cli")  # the CLI's status lines keep its logger name (console output)

# What a job tells the sweep (its notes, whether it leaves the report to the sweep) lives with the job's command,
# harness/app/commands/run.py, which this launcher imports: the job never imports its launcher.


@dataclass
class Job:
    """One job of the sweep as the launcher sees it: its number, overrides, the label that tells it from the other
    jobs (the overrides that vary), its composed config (with ``hydra``) and its validated run config."""

    num: int
    overrides: list[str]
    label: str
    sweep_config: Any
    cfg: RunConfig
    log: Path


@dataclass
class Outcome:
    """How a job ended: exit code, seconds, what it noted (:func:`harness.app.commands.run.note_job`), and the
    first error line of its log."""

    job: Job
    code: int
    seconds: float
    notes: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    warnings: list[str] = field(default_factory=list)  # the WARNING lines of its log
    already_done: int = 0  # items of a job recognised as finished before any worker started

    def line(self, k: int, n: int) -> str:
        """``job k of N ...``: the job's one console line."""
        head = f"job {k} of {n}"
        if self.already_done:
            n_items = f"{self.already_done} item{'' if self.already_done == 1 else 's'}"
            return f"{head} already done: {self.job.label}: {n_items} finished before, nothing to do"
        counts = _counts(self.notes)
        took = f"in {_duration(self.seconds)}"
        if self.code == 0:
            return f"{head} done {took}: {self.job.label}: {counts}{self._warned()}"
        what = "FAILED" if self.code == 1 else ("stopped (a user error)" if self.code == 2 else f"exit {self.code}")
        why = f" -- {self.error}" if self.error else ""
        return f"{head} {what} {took}: {self.job.label}: {counts}{why} (log: {self.job.log})"

    def _warned(self) -> str:
        """`` -- warning: <the first>`` (and how many more are in the job's log), or nothing."""
        if not self.warnings:
            return ""
        first = self.warnings[0] if len(self.warnings[0]) <= 200 else self.warnings[0][:197] + "..."
        more = f" (+{len(self.warnings) - 1} more in {self.job.log})" if len(self.warnings) > 1 else ""
        return f" -- {first}{more}"


def _counts(notes: dict[str, Any]) -> str:
    """``5 items done, 1 failed`` from a job's notes."""
    parts = [(int(notes.get(k) or 0), w) for k, w in (("done", "done"), ("skipped", "already done"),
                                                      ("failed", "failed"), ("compiled", "compiled (dry run)"))]
    shown = [(c, w) for c, w in parts if c] or [(0, "done")]
    first = f"{shown[0][0]} item{'' if shown[0][0] == 1 else 's'} {shown[0][1]}"
    return ", ".join([first, *(f"{c} {w}" for c, w in shown[1:])])


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def fit(cfg: RunConfig) -> int:
    """How many jobs like ``cfg``'s fit this machine at once: one per core, and for a model whose jobs take GPUs
    (``model.gpus_per_job``, a real run) as many as its GPU sets among the ``devices`` (at least one)."""
    from harness.gpu_pool import parse_devices

    gpus = cfg.model.gpus_per_job if cfg.model is not None else 0
    if gpus <= 0 or cfg.dry_run or cfg.cmd != "run":
        return _cores()
    return max(1, len(parse_devices(cfg.devices)) // gpus)


def worker_count(setting: Any, jobs: int, fits: int | None = None) -> int:
    """Jobs at once: ``auto`` = as many as fit (``fits``; default: the cores this process may use), else the given
    count; never more than ``jobs``. :class:`harness.errors.ConfigError` for anything else."""
    from harness.errors import ConfigError

    if setting in (None, "auto"):
        n = _cores() if fits is None else fits
    elif isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        n = setting
    else:
        raise ConfigError(f"hydra.launcher.n_jobs={setting!r}: use auto or a number of jobs >= 1")
    return max(1, min(n, jobs))


def _label(overrides: Sequence[Sequence[str]], shown: Sequence[Sequence[str]]) -> list[str]:
    """Per job, the overrides that differ between the jobs (all of them when there is one job), as ``shown``
    (redacted): which ones vary is read from the real values, so two swept secrets still make two labels."""
    common = set(overrides[0]).intersection(*map(set, overrides[1:])) if len(overrides) > 1 else set()
    return [" ".join(s for o, s in zip(ov, sv) if o not in common) or " ".join(sv) or "(defaults)"
            for ov, sv in zip(overrides, shown)]


def _jobs(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, sweep_dir: Path) -> list[Job]:
    """Each job's composed config, as Hydra's basic launcher composes it, and its validated run config."""
    from omegaconf import OmegaConf, open_dict

    from harness.app.settings import load_run_config

    jobs = []
    from harness.secrets import redact_overrides

    # Why redacted: a label and the recorded overrides are printed and written; a swept value may be a secret.
    shown = [redact_overrides(ov) for ov in job_overrides]
    for i, (ov, label) in enumerate(zip(job_overrides, _label(job_overrides, shown))):
        num = initial_job_idx + i
        sc = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(ov))
        with open_dict(sc):
            sc.hydra.job.id = num
            sc.hydra.job.num = num
        raw = OmegaConf.to_container(sc, resolve=True)
        assert isinstance(raw, dict)  # a composed config is a mapping
        raw.pop("hydra", None)
        cfg = load_run_config({str(k): v for k, v in raw.items()})
        jobs.append(Job(num, shown[i], label, sc, cfg, sweep_dir / str(num) / "job.log"))
    return jobs


def finished_items(cfg: RunConfig) -> int:
    """The number of items of ``cfg``'s job when every one is finished with this config and its files still match
    (the job would skip them all), else 0. Uses the plan the CLI's pre-pass made (:func:`harness.app.commands.run.
    planned`)."""
    from harness.app.commands.run import planned
    from harness.app.runner import fingerprints
    from harness.outputs import item_meta, item_problems

    if cfg.cmd != "run" or cfg.stage == "evaluate" or cfg.dry_run or cfg.overwrite:
        return 0
    plan: Optional[Plan] = planned(cfg)
    if plan is None or not plan.items:
        return 0
    prints = None
    for item in plan.items:
        d = plan.run_dir / item.rel_dir
        m = item_meta(d)
        if not m or m.get("status") != "done":
            return 0
        prints = prints or fingerprints(plan)
        if m.get("fingerprint") != prints[item.key][0] or item_problems(d, m):
            return 0
    return len(plan.items)


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    """Hydra ``Launcher.launch`` of ``launcher=local`` (see the module docstring): every job, then each run's
    evaluation; raises :class:`harness.errors.CommandExit` with the worst exit code when a job did not succeed."""
    from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals

    from harness.app.console import fail, interrupted
    from harness.errors import CommandExit, UserError

    from harness.app.commands.run import redact_multirun_yaml

    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    redact_multirun_yaml(sweep_dir)  # Hydra's sweeper saved it with the overrides; a job may never start to do it
    t0 = time.perf_counter()
    try:
        jobs = _jobs(launcher, job_overrides, initial_job_idx, sweep_dir)
        if jobs:
            from harness.logs import setup_logging

            setup_logging(jobs[0].cfg.verbosity)
        outcomes, workers = _run_jobs(launcher, jobs, sweep_dir)
        code = max((o.code for o in outcomes), default=0)
        print(_summary(outcomes, time.perf_counter() - t0), flush=True)
        ok, runs = _evaluate_runs(jobs)
        code = code if ok else max(code, 1)
        _write_record(sweep_dir, outcomes, workers, runs, time.perf_counter() - t0)
    except KeyboardInterrupt:
        interrupted()
    except UserError as exc:
        fail(str(exc))
    if code:
        raise CommandExit(code)
    rets = []
    for j in jobs:
        r = JobReturn(overrides=j.overrides, cfg=None, hydra_cfg=None, working_dir=os.getcwd())
        r.status, r.return_value = JobStatus.COMPLETED, None
        rets.append(r)
    return rets


def _summary(outcomes: list[Outcome], seconds: float) -> str:
    ok = sum(o.code == 0 for o in outcomes)
    total: dict[str, int] = {}
    for o in outcomes:
        for k in ("done", "skipped", "failed"):
            total[k] = total.get(k, 0) + int(o.notes.get(k, 0) or 0)
        total["skipped"] += o.already_done
    return (f"sweep finished in {_duration(seconds)}: {ok} of {len(outcomes)} job(s) succeeded; items: "
            f"{total.get('done', 0)} done, {total.get('skipped', 0)} already done, {total.get('failed', 0)} failed")


def _write_record(sweep_dir: Path, outcomes: list[Outcome], workers: int, runs: list[dict[str, Any]],
                  seconds: float) -> None:
    """``<sweep dir>/sweep.json``: each job's outcome and phase seconds, each run's final evaluation and report
    seconds, the wall time (what ``python -m harness.bench first_look`` reads)."""
    from harness.io import write_json

    jobs = [{"num": o.job.num, "overrides": o.job.overrides, "label": o.job.label, "code": o.code,
             "seconds": round(o.seconds, 3), "already_done": o.already_done, "log": str(o.job.log),
             **{k: v for k, v in o.notes.items()}} for o in outcomes]
    write_json(sweep_dir / "sweep.json", {"workers": workers, "wall_s": round(seconds, 3), "jobs": jobs,
                                          "runs": runs})


def _run_jobs(launcher: Any, jobs: list[Job], sweep_dir: Path) -> tuple[list[Outcome], int]:
    """Report the finished jobs at once, run the others in worker processes, one line per job as it ends.
    Returns the outcomes and the number of worker processes (0: none was needed)."""
    n = len(jobs)
    outcomes: list[Outcome] = []
    todo = []
    for j in jobs:
        done = finished_items(j.cfg)
        if done:
            outcomes.append(Outcome(j, 0, 0.0, already_done=done))
            print(outcomes[-1].line(len(outcomes), n), flush=True)
        else:
            todo.append(j)
    if not todo:
        return outcomes, 0
    workers = worker_count(launcher.params.get("n_jobs", "auto"), len(todo), min(fit(j.cfg) for j in todo))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    print(f"sweep: {len(todo)} job{'' if len(todo) == 1 else 's'} to run, {workers} at a time on this machine; "
          f"each job's output: {sweep_dir}/<job>/job.log", flush=True)
    return outcomes + _pool(launcher, todo, workers, len(outcomes), n), workers


def _pool(launcher: Any, todo: list[Job], workers: int, already: int, n: int) -> list[Outcome]:
    """Run ``todo`` on ``workers`` processes; print each job's line as it ends (``already`` jobs were reported).
    On Ctrl-C: no waiting job starts, the running ones are interrupted (they keep what they finished), and the
    :class:`KeyboardInterrupt` goes on once they have ended."""
    import multiprocessing
    import signal
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    from hydra.core.singleton import Singleton

    threads = max(1, _cores() // workers)
    # Hydra's singletons (config store, job runtime, ...) as the worker needs them; OmegaConf's resolvers are
    # registered again there (setup_globals): they are closures, which pickle cannot send
    state = Singleton.get_state()["instances"]
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: no lock or thread copied by fork
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(threads, list(sys.argv)))
    outcomes: list[Outcome] = []
    started: dict[Future[dict[str, Any]], tuple[Job, float]] = {}
    waiting = list(todo)

    def submit() -> Future[dict[str, Any]]:  # a job goes to a worker only when one is free: none waits queued
        j = waiting.pop(0)
        fut = pool.submit(_run_job, launcher.hydra_context, launcher.task_function, j.sweep_config, str(j.log), state)
        started[fut] = (j, time.perf_counter())
        return fut

    try:
        pending = {submit() for _ in range(min(workers, len(waiting)))}
        durations: list[float] = []
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=lambda f: started[f][0].num):
                job, t = started[fut]
                o = _outcome(job, fut, time.perf_counter() - t)
                outcomes.append(o)
                durations.append(o.seconds)
                if waiting:
                    pending.add(submit())
                now = time.perf_counter()
                left = _estimate(durations, len(pending) + len(waiting), workers,
                                 max((now - started[f][1] for f in pending), default=0.0))
                print(o.line(already + len(outcomes), n) + (f"; about {_duration(left)} left for the other "
                      f"{len(pending) + len(waiting)}" if left is not None else ""), flush=True)
    except KeyboardInterrupt:
        waiting.clear()  # the jobs still waiting never start
        for proc in list(getattr(pool, "_processes", {}).values()):  # a Ctrl-C sent to this process alone
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGINT)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return outcomes


def _estimate(durations: list[float], remaining: int, workers: int, running_for: float) -> Optional[float]:
    """Seconds until the ``remaining`` jobs (running or waiting) end, from the mean duration of the jobs that ended:
    they run ``workers`` at a time, and the longest-running of them has run ``running_for`` seconds (rough)."""
    if not durations or not remaining:
        return None
    mean = sum(durations) / len(durations)
    return max(0.0, mean * math.ceil(remaining / workers) - min(mean, running_for))


def _outcome(job: Job, fut: Any, seconds: float) -> Outcome:
    """The job's outcome from its future (a worker that died is exit 1 with the reason)."""
    try:
        res = fut.result()
    except BaseException as exc:  # noqa: BLE001 - a worker killed (out of memory, a signal): that job failed
        return Outcome(job, 1, seconds, error=f"its worker process ended: {type(exc).__name__}: {exc}")
    code = int(res.get("code", 1))
    lines = _log_lines(job.log)
    warnings = [x.strip() for x in lines if x.startswith("WARNING ")]
    return Outcome(job, code, float(res.get("seconds", seconds)), dict(res.get("notes") or {}),
                   _first_error(lines) if code else "", warnings)


def _log_lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _first_error(lines: list[str]) -> str:
    """The first ``error:`` (or ``FAILED``) line of a job's log, shortened."""
    for prefix in ("error:", "  FAILED:", "ERROR "):
        hit = next((x.strip() for x in lines if x.startswith(prefix)), None)
        if hit:
            return hit if len(hit) <= 300 else hit[:297] + "..."
    return lines[-1].strip()[:300] if lines else ""


#: set while this worker runs a job: a Ctrl-C then interrupts the job (once); an idle worker ignores it
_RUNNING: list[bool] = []


def _on_sigint(signum: int, frame: Any) -> None:
    if _RUNNING and _RUNNING[0]:
        _RUNNING[0] = False  # a second Ctrl-C (the terminal's and the sweep's) never cuts the job's cleanup short
        raise KeyboardInterrupt


def _init_worker(threads: int, argv: list[str]) -> None:
    """A worker process: the parent's command line (secrets learned from it), the project's logging, progress bars
    off (nobody watches a job's log live), and ``threads`` threads for the numerical libraries."""
    import signal

    signal.signal(signal.SIGINT, _on_sigint)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    os.environ["TQDM_DISABLE"] = "1"
    sys.argv = argv
    from harness.app.argv import argv_secrets
    from harness.app.console import register_secrets

    register_secrets(argv_secrets(argv))
    try:
        import cv2

        cv2.setNumThreads(threads)
    except ImportError:  # pragma: no cover - OpenCV is a core dependency
        pass
    from harness.app.commands.run import start_sweep_worker

    start_sweep_worker()


def _run_job(hydra_context: Any, task_function: Any, sweep_config: Any, log_path: str,
             singleton_state: Any) -> dict[str, Any]:
    """In a worker: run one job as Hydra's basic launcher does (:func:`hydra.core.utils.run_job`), its console
    output (scrubbed of secrets) into ``log_path``; returns ``{code, seconds, notes}``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals

    from harness.io import open_stream
    from harness.logs import setup_logging
    from harness.secrets import ScrubbedStream

    Singleton._instances = singleton_state  # Singleton.set_state would also replace OmegaConf's resolvers
    setup_globals()
    HydraConfig.instance().set_config(sweep_config)
    from harness.app.commands.run import take_job_notes

    take_job_notes(clear=True)
    _RUNNING[:] = [True]
    t0 = time.perf_counter()
    out, err = sys.stdout, sys.stderr
    with open_stream(log_path, append=True, encoding="utf-8", errors="replace", buffering=1) as f:
        sys.stdout = sys.stderr = ScrubbedStream(f)
        code = 0
        try:
            setup_logging()
            ret = run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_config,
                          job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
            ret.return_value  # noqa: B018 - re-raises what the task raised
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - told in the job's log and as its exit code
            import traceback

            traceback.print_exc()
            code = 130 if isinstance(exc, KeyboardInterrupt) else 1
        finally:
            _RUNNING[:] = []
            sys.stdout, sys.stderr = out, err
    return {"code": code, "seconds": time.perf_counter() - t0, "notes": take_job_notes()}


def _evaluate_runs(jobs: list[Job]) -> tuple[bool, list[dict[str, Any]]]:
    """Each run of the sweep whose jobs generate and evaluate (``stage=all``): its tables, report and verdict, once,
    from the metrics its jobs wrote (reused). Returns (False when an item or metric failed, per run its seconds)."""
    from harness.app.commands.evaluation import evaluate
    from harness.io import confine
    from harness.outputs import RunDir, run_dir_for

    runs: dict[Path, RunConfig] = {}
    for j in jobs:
        c = j.cfg
        if c.cmd == "run" and c.stage == "all" and not c.dry_run and c.evaluate_enabled:
            runs.setdefault(run_dir_for(c.output_root, c.run), c)
    ok, record = True, []
    for run_dir, cfg in runs.items():
        run = RunDir(run_dir)
        if not run.manifest.exists() or not run.done_rows():
            log.warning("%s: no finished video to evaluate (causes in the job lines above)", run_dir)
            continue
        timings: dict[str, float] = {}
        with run.lock("eval"), confine(run_dir):  # every item is scored already: a quiet pass, no progress bar
            ok = evaluate(run_dir, cfg.replace(progress=False), table=False, timings=timings) and ok
        record.append({"run": str(run_dir), **{k: round(v, 3) for k, v in timings.items()}})
    return ok, record
