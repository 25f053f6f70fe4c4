"""Sweeps on Slurm: submit one array task per sweep job, wait on the cluster's own job states, write a summary.

``python -m harness -m launcher=slurm ...`` uses Hydra's submitit launcher with this module's ``launch`` in place
of its wait (the launcher class Hydra loads is ``hydra_plugins.worldmem_slurm.WorldMemSlurmLauncher``; Hydra only
loads launchers from ``hydra_plugins``, so that module is a thin hook and the logic is here):

* **Resources per job.** The plain settings ``slurm.*`` (``conf/launcher/slurm.yaml``: partition, account, qos,
  time, gres, cpus, memory, array parallelism) are read from each job's own config, so a sweep over models with
  different ``model.gpus_per_job`` submits one array per resource set; ``slurm.gres=auto`` asks for
  ``gpu[:<slurm.gpu_type>]:<model.gpus_per_job>`` (nothing for CPU models).
* **Waiting without hangs.** Job states come from ``sacct`` (one call per poll for all arrays); where accounting
  is missing, from ``squeue --states=all``, and a job neither knows is finished with state ``UNKNOWN``. Submitit's
  own wait is never used: it reads UNKNOWN without accounting and then blocks on a cancelled job for minutes.
* **Summary.** ``<run>/slurm/<sweep>.{json,md}`` (``<sweep>`` is the sweep folder's name) is written at submission
  (every job ``PENDING``, so the job ids are known at once) and rewritten as states change; the final table is
  printed: per job its Slurm id, state, exit code, elapsed time, items done / skipped / failed (from its log) and,
  for a job that did not complete, the reason (time limit, cancelled, the ``error:`` line of its log).
* **Exit code** 0 when every job completed, 1 otherwise (rerunning the same command does only the missing items:
  finished items are skipped by their fingerprints, a killed item's lock and temporaries are taken over); 2 when
  ``sbatch`` refuses the submission or a ``slurm.*`` setting is wrong (the message names it).
* **Time limits.** Submitit signals a job ``signal_delay_s`` before its limit and, with no requeue allowed
  (``max_num_timeout: 0``), raises inside whatever item is running: here that signal only logs a warning, the
  item runs on until the limit, and the summary reports ``TIMEOUT``.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from harness.app.slurm_settings import SlurmSettingError, check_resources, count, gres_for, time_minutes
from harness.errors import CommandExit, UserError

log = logging.getLogger(__name__)

#: Slurm's terminal job states (sacct / squeue spelling); anything else is still queued or running.
TERMINAL = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "TIMEOUT", "REVOKED", "UNKNOWN"}
#: keys of a sweep override that can change a job's resources (the others share one composed config)
_RESOURCE_KEYS = re.compile(r"^[+~]*(model|slurm|hydra\.launcher|experiment|debug|local)([.=@]|$)")
_QUERY_TIMEOUT_S = 30  # a Slurm command retries MessageTimeout while a daemon is down: bound each call


#: submitit's generic resource names (AutoExecutor takes them unprefixed); the other launcher keys get ``slurm_``
_GENERIC = {"timeout_min", "cpus_per_task", "gpus_per_node", "tasks_per_node", "mem_gb", "nodes", "name",
            "stderr_to_stdout"}
#: launcher keys that are ours or submitit's executor arguments, not sbatch parameters
_NOT_SBATCH = {"_target_", "submitit_folder", "max_num_timeout", "time", "gpu_type", "poll_s", "max_poll_s"}


def executor_parameters(launcher_cfg: dict[str, Any], model_cfg: dict[str, Any]) -> dict[str, Any]:
    """``hydra.launcher`` of one job (resolved) -> submitit ``AutoExecutor.update_parameters`` keywords."""
    p = dict(launcher_cfg)
    if p.get("time") is not None:
        p["timeout_min"] = time_minutes(p["time"])
    p["gres"] = gres_for(p.get("gres"), (model_cfg or {}).get("gpus_per_job"), p.get("gpu_type"))
    check_resources(p)
    out = {}
    for k, v in p.items():
        if k in _NOT_SBATCH or (v is None and k not in _GENERIC):
            continue
        out[k if k in _GENERIC else f"slurm_{k}"] = v
    return out


# -- job states --------------------------------------------------------------------------------------------------------

@dataclass
class JobState:
    """What the cluster says about one job (array task). ``state`` is Slurm's word (``CANCELLED by 0`` keeps its
    uid); ``exit_code`` ``code:signal``; ``elapsed`` / ``timelimit`` as Slurm prints them; ``source`` the command
    that said so (sacct / squeue / none)."""

    state: str = "PENDING"
    exit_code: str = ""
    elapsed: str = ""
    timelimit: str = ""
    reason: str = ""
    source: str = ""

    @property
    def word(self) -> str:
        return self.state.split()[0].rstrip("+") if self.state else "UNKNOWN"

    @property
    def finished(self) -> bool:
        return self.word in TERMINAL


def expand_ids(job_id: str) -> list[str]:
    """``57_[2-4,7%2]`` -> ``['57_2', '57_3', '57_4', '57_7']``; ``57_3`` and ``57`` stay as they are."""
    m = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", job_id)
    if not m:
        return [job_id]
    out = []
    for part in m.group(2).split(","):
        a, _, b = part.partition("-")
        out += [f"{m.group(1)}_{i}" for i in range(int(a), int(b or a) + 1)]
    return out


def parse_sacct(text: str) -> dict[str, JobState]:
    """``sacct -X -n -P -o JobID,State,ExitCode,Elapsed,Timelimit,Reason`` output -> job id -> state."""
    out = {}
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < 6 or not f[0] or "." in f[0]:
            continue
        for jid in expand_ids(f[0]):
            out[jid] = JobState(f[1], f[2], f[3], f[4], f[5], "sacct")
    return out


def parse_squeue(text: str) -> dict[str, JobState]:
    """``squeue -h -r -t all -o %i|%T|%M|%l|%r`` output -> job id -> state (no exit codes there)."""
    out = {}
    for line in text.splitlines():
        f = line.strip().split("|")
        if len(f) >= 5 and f[0]:
            out[f[0]] = JobState(f[1], "", f[2], f[3], f[4], "squeue")
    return out


def _run(cmd: list[str]) -> tuple[int, str, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=_QUERY_TIMEOUT_S)
        return p.returncode, p.stdout, p.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, "", f"{type(exc).__name__}: {exc}"


class StateReader:
    """Job states of some Slurm jobs from ``sacct`` (accounting) and ``squeue --states=all`` (the controller), one
    call each per poll. Never waits on a job Slurm no longer knows:

    * sacct's terminal state wins (it has the exit code); while a job runs, squeue's state is the fresher;
    * accounting lags the controller by a moment: a job squeue calls finished that sacct (working) does not list yet
      is reported ``COMPLETING`` for up to ``grace_s`` seconds, then with squeue's state;
    * a job neither lists for ``grace_s`` seconds (a pending array task cancelled before it started leaves no
      accounting record, the controller purges finished jobs after ``MinJobAge``) is finished with state
      ``UNKNOWN`` and the reason;
    * without accounting (sacct fails, e.g. no slurmdbd) states come from squeue alone, said once in the log.
    """

    def __init__(self, grace_s: float = 10.0) -> None:
        self.sacct_error: Optional[str] = None
        self.grace_s = grace_s
        self._waiting: dict[tuple[str, str], float] = {}  # (job, what) -> since when: "accounting" or "missing"

    def _within_grace(self, job: str, what: str) -> bool:
        since = self._waiting.setdefault((job, what), time.monotonic())
        return time.monotonic() - since < self.grace_s

    def read(self, job_ids: Sequence[str]) -> dict[str, JobState]:
        arrays = ",".join(sorted({j.split("_")[0] for j in job_ids}))
        rc, out, err = _run(["sacct", "-X", "-n", "-P", "-j", arrays,
                             "-o", "JobID,State,ExitCode,Elapsed,Timelimit,Reason"])
        acct: dict[str, JobState] = parse_sacct(out) if rc == 0 else {}
        if rc != 0 and self.sacct_error is None:
            log.warning("sacct failed (%s): job states come from squeue alone, without exit codes (set up Slurm "
                        "accounting, slurmdbd, to have them)", err or rc)
        self.sacct_error = None if rc == 0 else (err or f"sacct exit {rc}")
        rc_q, out_q, err_q = _run(["squeue", "-h", "-r", "-t", "all", "-j", arrays, "-o", "%i|%T|%M|%l|%r"])
        queue = parse_squeue(out_q) if rc_q == 0 else {}
        states = {}
        for j in job_ids:
            a, q = acct.get(j), queue.get(j)
            if a is not None or q is not None:
                self._waiting.pop((j, "missing"), None)
            if a is not None and (a.finished or q is None):
                st = a
            elif q is not None:
                st = q
                if q.finished and not self.sacct_error and self._within_grace(j, "accounting"):
                    st = JobState("COMPLETING", "", q.elapsed, q.timelimit, "waiting for accounting", "squeue")
            elif self._within_grace(j, "missing"):
                st = JobState("PENDING", "", "", "", "not listed yet", "none")
            else:
                why = "; ".join(x for x in (f"sacct: {self.sacct_error}" if self.sacct_error else "",
                                            f"squeue: {err_q}" if rc_q else "") if x)
                st = JobState("UNKNOWN", "", "", "", "no longer known to Slurm (in neither squeue nor sacct)"
                              + (f"; {why}" if why else ""), "none")
            states[j] = st
        return states


# -- the summary -------------------------------------------------------------------------------------------------------

@dataclass
class SweepJob:
    """One sweep job: its Hydra job number and overrides, its Slurm id, logs and what the cluster says."""

    num: int
    overrides: list[str]
    slurm_id: str = ""
    stdout: str = ""
    stderr: str = ""
    result: str = ""
    state: JobState = field(default_factory=JobState)
    items: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    shown: list[str] = field(default_factory=list)  # the overrides that differ between the sweep's jobs

    def row(self) -> dict[str, Any]:
        return {**asdict(self), "state": self.state.state, "exit_code": self.state.exit_code,
                "elapsed": self.state.elapsed, "timelimit": self.state.timelimit, "source": self.state.source}


_COUNTS = {"done": "done", "skipped (already done)": "skipped", "done elsewhere": "elsewhere", "failed": "failed"}


def item_counts(stdout_log: str) -> dict[str, int]:
    """Items done / skipped / done elsewhere / failed, from the run table a job printed (harness.app.runner)."""
    try:
        text = Path(stdout_log).read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, int] = {}
    for label, key in _COUNTS.items():
        m = re.findall(rf"^\s+{re.escape(label)}\s+(\d+)\s*$", text, flags=re.M)
        if m:
            out[key] = int(m[-1])
    return out


def last_error(stderr_log: str) -> str:
    """The harness's last ``error: ...`` line of a job's stderr log (else its last line), for the summary."""
    try:
        lines = [x.strip() for x in Path(stderr_log).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    errors = [x for x in lines if x.startswith("error:") or "FAILED" in x]
    pick = errors[-1] if errors else (lines[-1] if lines else "")
    return pick[:300]


def explain(job: SweepJob) -> str:
    """Why a job did not complete, and what to do (empty for a completed job)."""
    s, word = job.state, job.state.word
    if word == "COMPLETED":
        return ""
    if word == "TIMEOUT":
        return (f"hit its time limit ({s.timelimit or '?'}) after {s.elapsed or '?'}: items it finished are kept, "
                "the one in progress is redone by the next run (raise slurm.time if one item needs longer)")
    if word == "CANCELLED":
        who = s.state[len("CANCELLED"):].strip()
        return f"cancelled ({who or 'scancel'}) after {s.elapsed or '0'}" + (
            " before it started" if s.elapsed in ("", "00:00:00", "0:00") else "")
    if word == "OUT_OF_MEMORY":
        return "ran out of memory: raise slurm.mem_gb"
    if word in ("NODE_FAIL", "BOOT_FAIL"):
        return f"{word}: the node failed; rerun the same command"
    if word == "PREEMPTED":
        return "preempted by a higher-priority job; rerun the same command"
    if word == "UNKNOWN":
        started = Path(job.stdout).exists() if job.stdout else False
        return (s.reason or "state unknown") + ("; it had started (see its log)" if started else
                                                 "; it never started (no log): Slurm keeps no record of a pending "
                                                 "array task cancelled with scancel")
    err = last_error(job.stderr)
    code = s.exit_code.split(":")[0] if s.exit_code else ""
    what = {"1": "an item failed or the harness hit a bug", "2": "a user error (bad setting or input)"}.get(code, "")
    return "; ".join(x for x in (f"exit {s.exit_code}" if s.exit_code else "", what, err) if x)


def varying(jobs: Sequence[SweepJob]) -> None:
    """Keep in each job's ``shown`` only the overrides that differ between the jobs (what the sweep sweeps)."""
    common = set.intersection(*(set(j.overrides) for j in jobs)) if len(jobs) > 1 else set()
    for j in jobs:
        j.shown = [o for o in j.overrides if o not in common]


def summary_md(jobs: Sequence[SweepJob], header: str) -> str:
    lines = [header, "",
             "| job | Slurm id | state | exit | elapsed | items done / skipped / failed | overrides | reason |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for j in jobs:
        c = j.items
        counts = f"{c.get('done', 0)} / {c.get('skipped', 0)} / {c.get('failed', 0)}" if c else ""
        lines.append(f"| {j.num} | {j.slurm_id} | {j.state.state} | {j.state.exit_code} | {j.state.elapsed} | "
                     f"{counts} | {' '.join(j.shown)} | {j.reason} |")
    return "\n".join(lines) + "\n"


def summary_table(jobs: Sequence[SweepJob]) -> str:
    """The console form: one line per job."""
    rows = [("job", "slurm id", "state", "exit", "elapsed", "items d/s/f", "overrides / reason")]
    for j in jobs:
        c = j.items
        counts = f"{c.get('done', 0)}/{c.get('skipped', 0)}/{c.get('failed', 0)}" if c else "-"
        tail = " ".join(j.shown) + (f"  -- {j.reason}" if j.reason else "")
        rows.append((str(j.num), j.slurm_id, j.state.state, j.state.exit_code or "-", j.state.elapsed or "-",
                     counts, tail))
    w = [max(len(r[i]) for r in rows) for i in range(6)]
    return "\n".join("  ".join(r[i].ljust(w[i]) for i in range(6)) + "  " + r[6] for r in rows)


class Summary:
    """``<run>/slurm/<name>.{json,md}``, rewritten (atomically) whenever a state changes."""

    def __init__(self, run_dir: Path, name: str, cluster_cmd: str):
        self.dir, self.name, self.cluster_cmd = Path(run_dir) / "slurm", name, cluster_cmd
        self.json = self.dir / f"{name}.json"
        self.md = self.dir / f"{name}.md"

    def header(self, jobs: Sequence[SweepJob], done: bool) -> str:
        n_ok = sum(j.state.word == "COMPLETED" for j in jobs)
        arrays = sorted({j.slurm_id.split("_")[0] for j in jobs if j.slurm_id})
        status = ("finished" if done else "running") + f": {n_ok}/{len(jobs)} job(s) completed"
        tail = "" if not done or n_ok == len(jobs) else (
            "; rerun the same command to do only the missing items")
        return f"# Slurm sweep {self.name} (array {', '.join(arrays)}): {status}{tail}"

    def write(self, jobs: Sequence[SweepJob], done: bool) -> None:
        from harness.io import write_json, write_text

        write_json(self.json, {"sweep": self.name, "finished": done, "command": self.cluster_cmd,
                               "jobs": [j.row() for j in jobs]})
        write_text(self.md, summary_md(jobs, self.header(jobs, done)))


# -- launching -----------------------------------------------------------------------------------------------------

def _fail(msg: str, code: int = 2) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise CommandExit(code)


def _group_key(overrides: Sequence[str]) -> tuple[str, ...]:
    return tuple(o for o in overrides if _RESOURCE_KEYS.match(o))


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    """Hydra ``Launcher.launch`` for Slurm: submit, wait on the cluster's states, summarise, exit 1 when any job did
    not complete. ``launcher`` is the submitit launcher (its ``config``, ``hydra_context``, ``params``)."""
    try:
        return _launch(launcher, job_overrides, initial_job_idx)
    except UserError as exc:
        _fail(str(exc))
    raise AssertionError("unreachable")


def _launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    from harness.outputs import run_dir_for

    cfg = launcher.config
    sweep_dir = Path(str(cfg.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    run_dir = run_dir_for(cfg.output_root, cfg.run)
    summary = Summary(run_dir, sweep_dir.name, " ".join(sys.argv))
    poll = float(launcher.params.get("poll_s") or 2.0)
    max_poll = float(launcher.params.get("max_poll_s") or 15.0)

    # one composed config per resource-relevant subset of overrides (a model sweep: one per model)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, ov in enumerate(job_overrides):
        groups.setdefault(_group_key(ov), []).append(i)
    jobs: list[SweepJob] = [SweepJob(initial_job_idx + i, list(ov)) for i, ov in enumerate(job_overrides)]
    varying(jobs)
    for idxs in groups.values():
        _submit_group(launcher, job_overrides, initial_job_idx, idxs, jobs)
    summary.write(jobs, done=False)
    arrays = sorted({j.slurm_id.split("_")[0] for j in jobs})
    log.info("waiting for the sweep (squeue -j %s to watch, scancel %s to stop it); summary: %s",
             ",".join(arrays), " ".join(arrays), summary.md)
    _wait(jobs, summary, arrays, poll, max_poll)
    return _finish(jobs, summary, sweep_dir)


def _submit_group(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, idxs: list[int],
                  jobs: list[SweepJob]) -> None:
    """Submit the jobs ``idxs`` (one resource group) as one Slurm array; their ids and log paths go to ``jobs``."""
    import submitit
    from hydra.core.singleton import Singleton
    from omegaconf import OmegaConf

    # the group's first job stands for all of it (they differ only in overrides that leave resources alone)
    job_cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(job_overrides[idxs[0]]))
    lcfg = _mapping(OmegaConf.to_container(job_cfg.hydra.launcher, resolve=True))
    mcfg = _mapping(OmegaConf.to_container(job_cfg.model, resolve=True)) if "model" in job_cfg else {}
    params = executor_parameters(lcfg, mcfg)
    executor = submitit.AutoExecutor(cluster="slurm", folder=lcfg["submitit_folder"],
                                     slurm_max_num_timeout=int(lcfg.get("max_num_timeout") or 0))
    executor.update_parameters(**params)
    args = [(list(job_overrides[i]), "hydra.sweep.dir", initial_job_idx + i, f"job_id_for_{initial_job_idx + i}",
             Singleton.get_state()) for i in idxs]
    try:
        submitted = executor.map_array(launcher, *zip(*args))
    except Exception as exc:  # noqa: BLE001 - sbatch's own words are the useful part
        msg = str(exc).strip().splitlines()
        earlier = sorted({j.slurm_id.split("_")[0] for j in jobs if j.slurm_id})
        raise SlurmSettingError(
            "sbatch refused the sweep: " + " ".join(m.strip() for m in msg[-4:] if m.strip())[:600]
            + ". Check slurm.partition / slurm.account / slurm.gres / slurm.time / slurm.cpus_per_task / "
              "slurm.mem_gb (docs/scaling.md)"
            + (f"; array(s) {', '.join(earlier)} of this sweep were submitted before and keep running "
               f"(scancel {' '.join(earlier)} to stop them)" if earlier else "")
        ) from None
    for i, h in zip(idxs, submitted):
        jobs[i].slurm_id = str(h.job_id)
        jobs[i].stdout, jobs[i].stderr = str(h.paths.stdout), str(h.paths.stderr)
        jobs[i].result = str(h.paths.result_pickle)
    log.info("submitted %d job(s) as Slurm array %s (%s), at most %s at once; sbatch script: %s",
             len(idxs), str(submitted[0].job_id).split("_")[0], _resources(params),
             params.get("slurm_array_parallelism", "?"), submitted[0].paths.submission_file)


def _mapping(value: Any) -> dict[str, Any]:
    """A resolved config node that must be a mapping (``hydra.launcher``, ``model``)."""
    if not isinstance(value, dict):
        raise SlurmSettingError(f"expected a mapping in the launcher's config, got {type(value).__name__}")
    return {str(k): v for k, v in value.items()}


def _wait(jobs: list[SweepJob], summary: Summary, arrays: list[str], poll: float, max_poll: float) -> None:
    """Poll the cluster's states until every job finished (the summary rewritten on each change); Ctrl-C leaves
    the jobs running and exits 130."""
    reader = StateReader()
    ids = [j.slurm_id for j in jobs]
    try:
        while True:
            states = reader.read(ids)
            changed = False
            for j in jobs:
                st = states[j.slurm_id]
                if (st.state, st.exit_code, st.elapsed) != (j.state.state, j.state.exit_code, j.state.elapsed):
                    j.state, changed = st, True
            if changed:
                summary.write(jobs, done=False)
            if all(j.state.finished for j in jobs):
                break
            time.sleep(poll)
            poll = min(max_poll, poll * 1.5)
    except KeyboardInterrupt:
        print(f"interrupted: the jobs keep running on the cluster (scancel {' '.join(arrays)} stops them); "
              f"summary so far: {summary.md}", file=sys.stderr)
        raise CommandExit(130) from None


def _finish(jobs: list[SweepJob], summary: Summary, sweep_dir: Path) -> list[Any]:
    """Explain each job, print the summary; the completed jobs' Hydra returns (exit 1 unless all completed)."""
    returns = []
    for j in jobs:
        j.items = item_counts(j.stdout)
        j.reason = explain(j)
        if j.state.word == "COMPLETED":
            ret = _job_return(j)
            if ret is not None:
                returns.append(ret)
    summary.write(jobs, done=True)
    print(summary.header(jobs, done=True).lstrip("# "))
    print(summary_table(jobs))
    print(f"summary: {summary.md}  (job logs: {sweep_dir / '.submitit'})")
    if not all(j.state.word == "COMPLETED" for j in jobs):
        raise CommandExit(1)
    return returns


def _resources(params: dict[str, Any]) -> str:
    keys = ("slurm_partition", "slurm_account", "slurm_qos", "timeout_min", "cpus_per_task", "mem_gb", "slurm_gres")
    return ", ".join(f"{k.removeprefix('slurm_')}={params[k]}" for k in keys if params.get(k) is not None)


def _job_return(job: SweepJob) -> Any:
    """The Hydra ``JobReturn`` a completed job pickled (None when it cannot be read: the summary still stands)."""
    try:
        from submitit.core.utils import pickle_load

        kind, value = pickle_load(job.result)
        return value if kind == "success" else None
    except Exception:  # noqa: BLE001 - a missing or foreign pickle only loses Hydra's return value
        return None


# -- inside a job ------------------------------------------------------------------------------------------------------

def quiet_time_limit_signal(max_num_timeout: int) -> None:
    """In a job: with no requeue allowed, submitit's time-limit signal would raise inside the running item (which the
    runner would record as a failed item); log it instead and let Slurm stop the job at its limit."""
    if max_num_timeout > 0:
        return  # the user asked submitit to checkpoint and requeue: keep its handler
    import os
    import signal

    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    sig = getattr(signal, f"SIG{name}", None)
    if sig is None:
        return

    def warn(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
        log.warning("Slurm: this job is near its time limit; the item in progress runs on until Slurm stops the job "
                    "(finished items are kept; the next run of the same command does the rest)")

    signal.signal(sig, warn)
