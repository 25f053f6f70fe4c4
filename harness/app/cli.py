"""``python -m harness``: the Hydra entry point.

Commands (``cmd=<name>`` or the first word): ``run`` (default: plan, compile, generate, evaluate),
``list`` (models, contexts, trajectories, case sets), ``validate`` (check a case set), ``preview`` (draw the chosen
trajectory to PNG), ``verify`` (the delivery check of a run), ``setup`` (checkout, environment, weights and readiness
of an upstream model; ``print=true`` prints the script). ``dry_run=true`` plans and compiles native controls
without generating. A new command is one entry in :data:`HANDLERS` (and its word in :data:`COMMANDS`).

Exit codes: 0 ok; 1 some item (or check) failed, or a bug (printed with its traceback); 2 a user error (bad
override, config, case, manifest, path, missing optional package), printed without a traceback and with nothing
written. A user error is any :class:`harness.errors.UserError` (every domain error of the project subclasses it); a
bare ``ValueError`` is a bug.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from harness.errors import ConfigError, UserError

log = logging.getLogger(__name__)

COMMANDS = ("run", "list", "validate", "preview", "report", "verify", "setup")
_CHECKED_GROUPS = ("model", "context", "trajectory", "cases", "launcher", "experiment", "debug", "evaluate",
                   "backend")


# errno values of environment problems a user fixes (a read-only or full disk, a path too long, no permission)
_USER_OS_ERRNOS = {"EACCES", "EPERM", "EROFS", "ENAMETOOLONG", "ENOSPC", "EDQUOT"}


def _fail(msg: str) -> None:
    from harness.secrets import redact

    print(f"error: {redact(msg, _SECRETS)}", file=sys.stderr)
    sys.exit(2)


INTERRUPTED = ("interrupted: finished items are kept and nothing half-written counts as done; rerun the same "
               "command to resume")


def _interrupted() -> None:
    """SIGINT (Ctrl-C): one line saying how to resume, exit code 130 (128 + SIGINT), no traceback."""
    print(f"\n{INTERRUPTED}", file=sys.stderr)
    sys.exit(130)


_SECRETS: dict[str, str] = {}  # secret values of the current config, scrubbed from every message
_DISPATCHED = False  # set once Hydra hands us a config: a SystemExit(1) before that is Hydra's own usage error


def _precheck_argv(argv: list[str]) -> list[str]:
    """Rewrite a leading command word into ``cmd=...`` and check group choices with a did-you-mean."""
    from pathlib import Path

    from harness.app.settings import hydra_args
    from harness.config_groups import UnknownChoiceError, check_choice
    from harness.installed_models import InstalledModelError, installed_models

    try:
        installed_models()  # a broken installed model: named here, before Hydra's search path hook meets it
    except InstalledModelError as exc:
        _fail(str(exc))
    out = [a if (i == 0 or a not in COMMANDS) else f"cmd={a}" for i, a in enumerate(argv)]
    _check_slurm(out[1:])
    config_dir = None  # a --config-dir adds options (an out-of-tree model's model/<name>.yaml, docs/adapters.md)
    if any(a.startswith(("--config-dir", "-cd")) for a in out[1:]):
        try:
            config_dir = hydra_args(out[1:]).config_dir
        except SystemExit:
            pass  # argparse's own usage error: Hydra prints it
    extra = [Path(config_dir).resolve()] if config_dir else []
    for arg in out[1:]:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, val = arg.split("=", 1)
        key = key.lstrip("+~")
        if key in _CHECKED_GROUPS and val and val != "null":
            for choice in val.split(","):
                if choice.startswith(("glob(", "range(", "choice(")):
                    continue
                try:
                    check_choice(key, choice, extra)
                except UnknownChoiceError as exc:
                    _fail(str(exc))
    return out


def _check_slurm(args: list[str]) -> None:
    """``launcher=slurm`` off a cluster: say so instead of submitit's 'Could not detect "srun"' traceback."""
    import shutil

    for arg in args:
        if arg.lstrip("+~").startswith("launcher=") and "slurm" in arg.split("=", 1)[1].split(","):
            missing = [t for t in ("sbatch", "srun") if shutil.which(t) is None]
            if missing:
                _fail(f"launcher=slurm needs a Slurm cluster, but {' and '.join(missing)} "
                      f"{'is' if len(missing) == 1 else 'are'} not on PATH here. Run on a Slurm login node, or test "
                      "the same sweep locally with launcher=submitit_local (or launcher=basic).")


def _cmd_list(cfg: dict[str, Any]) -> None:
    from harness.config_groups import group_description, list_group

    for group in ("model", "backend", "context", "trajectory", "cases", "launcher", "experiment"):
        print(f"{group}:")
        for name in list_group(group):
            print(f"  {name:<18}{group_description(group, name)}".rstrip())


def _cmd_validate(cfg: dict[str, Any]) -> None:
    from harness.app.plan import load_cases_from_config

    cases = load_cases_from_config(cfg["cases"])
    for c in cases:
        img = c.load_image()
        c.load_depth()
        for obj in c.targets.objects:
            c.object_mask(obj, img.shape[0], img.shape[1])
        print(f"ok  {c.id:<28} {c.family:<12} {img.shape[1]}x{img.shape[0]}  trajectories={','.join(c.trajectories)}")
    print(f"{len(cases)} case(s) valid in {cfg['cases']['source']}")


def _cmd_preview(cfg: dict[str, Any]) -> None:
    from pathlib import Path

    from adapters.base import build_adapter
    from trajectories import TrajectorySpec
    from trajectories.conventions import intrinsics_from_fov
    from trajectories.preview import preview_path

    from harness.config_groups import model_config_with_local

    from harness.io import check_contained, confine
    from harness.outputs import check_name

    # the names become a file name: the one name rule, before anything is built or written
    check_name("model.name", (cfg.get("model") or {}).get("name"))
    check_name("trajectory.name", (cfg.get("trajectory") or {}).get("name"))
    adapter = build_adapter(model_config_with_local(cfg))
    mc = adapter.config
    spec = TrajectorySpec.from_dict(cfg["trajectory"])
    K = intrinsics_from_fov(mc.default_hfov_deg, mc.width, mc.height)
    path = adapter.path_for(spec, K)
    folder = Path(cfg["output_root"]) / "previews"
    out = folder / f"{check_name('trajectory.name', spec.name)}_{check_name('model.name', mc.name)}.png"
    folder.mkdir(parents=True, exist_ok=True)
    with confine(folder):  # the trajectories layer writes these: checked here, above it
        for p in (out, out.with_suffix(".npz")):
            check_contained(p)
        preview_path(path, out)
        path.save(out.with_suffix(".npz"))
    print(f"wrote {out} and {out.with_suffix('.npz')}")
    print("phases:", ", ".join(f"{k}=[{a},{b})" for k, (a, b) in path.phases.items()))


def _eval_config(cfg: dict[str, Any]):
    """The evaluation settings, validated (a bad ``evaluate.*`` value fails before anything is generated)."""
    from evaluate.stage import EvalConfig

    return EvalConfig.from_dict({k: v for k, v in (cfg.get("evaluate") or {}).items()})


def prepare_run(cfg: dict[str, Any], report: bool = True):
    """Everything ``run`` checks before its first write (also run for every job of a sweep before job 0 starts):
    the plan (names, cases, trajectories, a compile of each trajectory), readiness, evaluation settings, GPUs, and
    finished items made with another config. Returns the :class:`~harness.app.plan.Plan` (None for
    ``stage=evaluate``, whose inputs are checked here too)."""
    from harness.app.runner import check_fingerprints, gpu_pool_for, plan_from_config

    stage = cfg.get("stage", "all")
    if stage == "evaluate":
        _eval_config(cfg)
        if cfg.get("videos"):
            from evaluate.external import check_import

            check_import(*_videos_args(cfg), cfg)
        return None
    plan = plan_from_config(cfg)
    adapter, specs = plan.adapter, plan.specs
    dry = bool(cfg.get("dry_run"))
    if not dry:
        adapter.check_ready()  # a missing checkout / checkpoint / environment fails here, before anything is written
    elif report:
        _log_readiness(adapter)
    if not plan.items:
        raise NothingToRun(
            f"nothing to run: no case in {cfg['cases']['source']} lists trajectory "
            f"{', '.join(specs)} (check cases.include / cases.families)"
        )
    if stage == "all" and not dry and (cfg.get("evaluate") or {}).get("enabled", True):
        _eval_config(cfg)
    gpu_pool_for(adapter, cfg, dry)
    if plan.run_dir.is_dir():
        check_fingerprints(plan, bool(cfg.get("overwrite")), dry)
    return plan


def _log_readiness(adapter: Any) -> None:
    for finding in adapter.readiness(probe=False):  # shown, not enforced: a dry run needs no weights
        log.warning("readiness (%s, not enforced in a dry run): %s: %s", finding.level, adapter.config.name, finding)


def _videos_args(cfg: dict[str, Any]):
    from pathlib import Path

    folder = Path(str(cfg["videos"]))
    return folder, Path(str(cfg.get("videos_manifest") or folder / "manifest.json"))


class NothingToRun(ConfigError):
    """No case of the case set runs on the chosen trajectories: a user error for one run; in a sweep, that job is
    skipped with a line (a study over trajectories and cases where LR-Hold is for dynamic cases only) unless no job
    of the sweep has anything to run."""


def _in_sweep() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # not under Hydra (a direct call)
        return False


def _cmd_run(cfg: dict[str, Any]) -> None:
    from harness.dist import bind_local_device, current_rank
    from harness.io import confine
    from harness.app.runner import gpu_pool_for, run_complete, run_items

    if cfg.get("stage") == "evaluate":
        return _cmd_evaluate_only(cfg)
    stage = cfg.get("stage", "all")
    plan = _PLANS.pop(_config_key(cfg), None)  # validated by the sweep's pre-pass in this process
    if plan is None:
        try:
            plan = prepare_run(cfg)
        except NothingToRun as exc:
            if not _in_sweep():
                raise
            log.warning("this sweep job is skipped: %s", exc)
            return
    elif cfg.get("dry_run"):
        _log_readiness(plan.adapter)
    adapter, run_dir = plan.adapter, plan.run_dir
    overwrite = bool(cfg.get("overwrite"))
    pool = gpu_pool_for(adapter, cfg, bool(cfg.get("dry_run")))
    rank = current_rank()
    bind_local_device(rank)

    def start() -> None:  # the fingerprints hold: the first writes of this run
        if rank.is_main:
            from harness.io import remove_dead_temps

            # left by a process killed mid-write (its pid is gone). A dry run skips this walk over the whole run
            # (a study's sweep jobs share one run: it grew quadratic); each item folder it compiles is swept under
            # the item's lock (harness.outputs.remove_stale_temps), the manifest's temporaries when it is written.
            if run_dir.is_dir() and not cfg.get("dry_run"):
                remove_dead_temps(run_dir)
            _save_config(cfg, run_dir)

    with confine(run_dir):  # every write of the run lands in its run directory (harness.io refuses others)
        summary = run_items(plan, cfg, dry_run=bool(cfg.get("dry_run")), overwrite=overwrite,
                            progress=bool(cfg.get("progress", True)), pool=pool, rank=rank,
                            previews=bool(cfg.get("previews")), on_start=start)
    print(summary.table())
    evaluated_ok = True
    if stage == "all" and not cfg.get("dry_run") and cfg["evaluate"].get("enabled", True) and rank.is_main:
        missing = run_complete(run_dir, plan.all_items)
        if not (summary.done or summary.skipped):  # say what happened instead of reporting absent metrics
            log.warning("no video was produced: every item failed (causes above, full logs in each item's "
                        "upstream.log / meta.json); evaluation skipped")
        elif missing:
            log.info("evaluation deferred: %d item(s) of this run are not finished yet (other shards); the shard "
                     "that finishes last evaluates, or run stage=evaluate afterwards", len(missing))
        else:
            with plan.run.lock("eval"), confine(run_dir):  # two finishing shards never evaluate at once
                evaluated_ok = _evaluate(run_dir, cfg)
    if not (summary.ok and evaluated_ok):
        sys.exit(1)


def _save_config(cfg: dict[str, Any], run_dir) -> None:
    """The resolved config and the overrides of this call, secrets redacted, under ``<run>/.hydra/<time>/.hydra/``
    (Hydra's own copy is off: it would be written before validation, and with secrets in it)."""
    import time

    import yaml

    from harness.io import write_text
    from harness.secrets import redact

    overrides: list[str] = []
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
        overrides = list(hc.overrides.task)
        job = f"-{hc.job.num}" if hc.mode is not None and str(hc.mode).endswith("MULTIRUN") else ""
        _redact_multirun_yaml(hc)
    except Exception:  # not under Hydra (API use): nothing to add
        job = ""
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 10**6:06d}{job}"
    d = run_dir / ".hydra" / stamp / ".hydra"
    write_text(d / "config.yaml", yaml.safe_dump(redact(cfg, _SECRETS), sort_keys=False))
    write_text(d / "overrides.yaml", yaml.safe_dump(redact(overrides, _SECRETS)))


def _redact_multirun_yaml(hc: Any) -> None:
    """Hydra's launcher saves ``multirun.yaml`` (with the overrides) before any job runs: scrub secrets there."""
    from pathlib import Path

    from harness.io import write_text
    from harness.secrets import scrub

    p = Path(str(hc.sweep.dir)) / "multirun.yaml"
    if p.is_file():
        text = p.read_text()
        clean = scrub(text, _SECRETS)  # known values and anything shaped like a credential
        if clean != text:
            write_text(p, clean, scrubbed=True)


def _in_sweep() -> bool:
    """This process is one job of a Hydra sweep (``-m``)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return str(HydraConfig.get().mode).endswith("MULTIRUN")
    except Exception:  # noqa: BLE001 - not under Hydra (API use)
        return False


def _no_comparison_hint(cfg: dict[str, Any]) -> str:
    """The console's hint when a run has nothing to compare, fitted to the command that ran: a sweep job is
    already running several (its siblings add theirs to the same run), external videos come from a manifest."""
    from evaluate.reporting.verdict import NO_COMPARISON_HINT

    run = cfg.get("run") or "<name>"
    if cfg.get("videos"):
        return ("To compare, put videos of a second model or context policy of the same cases in the folder "
                "(manifest.json names each video's model and context) and evaluate again.")
    if _in_sweep():
        return (f"The sweep's other jobs add their policies or models to this run: the last job's verdict, or "
                f"`python -m harness report run={run}` once all are done, compares them.")
    return NO_COMPARISON_HINT


def _evaluate(run_dir, cfg: dict[str, Any]) -> bool:
    """Evaluate ``run_dir``; False when an item or metric failed (the failures are listed; the rest is tabled)."""
    from evaluate.reporting.verdict import NO_COMPARISON_HINT
    from evaluate.stage import evaluate_run
    from evaluate.weights import weights_root

    from harness.io import remove_dead_temps

    remove_dead_temps(run_dir)  # e.g. a metrics file of an evaluation that was killed

    ecfg = _eval_config(cfg)
    root = weights_root((cfg.get("paths") or {}).get("weights"))
    out = evaluate_run(run_dir, ecfg, force=bool(cfg.get("overwrite")), progress=bool(cfg.get("progress", True)),
                       weights_root=root)
    print(f"evaluated {out['evaluated']} video(s): {out['tables']['summary']}  {out['analyses']['analyses']}  "
          f"{out['validity']}")
    if out.get("report"):
        print(f"report: {out['report']}")
    if out.get("verdict"):  # the report's own verdict (evaluate.reporting.verdict), the same words as its page
        hint = _no_comparison_hint(cfg)
        print("verdict:\n  " + "\n  ".join(x.replace(NO_COMPARISON_HINT, hint) for x in out["verdict"]))
    print(_short_table(out["results"]))
    for item, reason in out["failed"]:
        key = "/".join(str((item or {}).get(k, "?")) for k in ("model", "context", "seed", "trajectory", "case_id"))
        log.error("FAILED %s: %s", key, reason)
    return not out["failed"]


def _short_table(results: list) -> str:
    """The computed metrics of this run (:class:`evaluate.results.ItemResult`), grouped by model / context /
    trajectory / seed (never averaged across them): per group and metric, the mean over that group's cases with n.
    Read as every table reads results (:func:`evaluate.reporting.collect.scored`): ground truth (oracle) never
    scores, and a static-content metric leaves dynamic cases out."""
    import numpy as np

    from evaluate.reporting.collect import scored

    groups: dict[tuple, dict[str, list]] = {}
    for r in map(scored, results):
        g = tuple(str(r.item.get(k, "?")) for k in ("model", "context", "trajectory", "seed"))
        for k, m in r.computed().items():
            groups.setdefault(g, {}).setdefault(k, []).append(m.value)
    if not groups:
        return "(no metric could be computed with the available backbones; see summary.md)"
    w = max(len(k) for vals in groups.values() for k in vals)
    lines = ["mean over the cases of each model / context / trajectory / seed (n = cases):"]
    for (model, context, trajectory, seed), vals in sorted(groups.items()):
        lines.append(f"{model} / {context} / {trajectory} / seed {seed}")
        lines += [f"  {k:<{w}}  {np.mean(v):8.4f}  (n={len(v)})" for k, v in sorted(vals.items())]
    return "\n".join(lines)


def _cmd_evaluate_only(cfg: dict[str, Any]) -> None:
    """``stage=evaluate``: evaluate an existing run (``run=<name>`` or a path) or videos made elsewhere."""
    from harness.io import confine
    from harness.outputs import RunDir

    _eval_config(cfg)  # before anything is imported or written
    if cfg.get("videos"):
        from evaluate.external import check_import, import_videos

        run = RunDir.for_name(cfg["output_root"], cfg["run"])  # the run-name rule: nothing outside output_root
        planned = check_import(*_videos_args(cfg), cfg)  # every entry, before anything (even the lock) is written
        with run.lock("eval"), confine(run.path):
            import_videos(*_videos_args(cfg), cfg, planned=planned)
            ok = _evaluate(run.path, cfg)
    else:
        run = RunDir.existing(cfg["run"], cfg["output_root"])
        with run.lock("eval"), confine(run.path):  # one evaluation of a run at a time
            ok = _evaluate(run.path, cfg)
    if not ok:
        sys.exit(1)  # the run is evaluated and tabled; some item or metric failed (listed above)


def _cmd_report(cfg: dict[str, Any]) -> None:
    """``report run=<a> [run=<b> ...]``: the study report (evaluate/reporting, docs/report.md)."""
    import contextlib

    from evaluate.reporting.cli import cmd_report

    from harness.io import confine
    from harness.outputs import RunDir

    from evaluate.reporting import default_out_dir

    names = cfg.get("report_runs") or [cfg["run"]]
    runs = [RunDir.existing(n, cfg.get("output_root", "outputs")).path for n in names]
    with contextlib.ExitStack() as stack:  # never beside an evaluation of one of the runs (it rewrites eval/)
        for r in sorted(set(runs)):  # in path order: two reports of overlapping runs cannot deadlock
            stack.enter_context(RunDir(r).lock("eval"))
        roots = [*runs, cfg["report_out"] if cfg.get("report_out") else default_out_dir(runs)]
        stack.enter_context(confine(*roots))
        cmd_report(cfg)


def _cmd_verify(cfg: dict[str, Any]) -> None:
    """``verify``: the delivery check of the run named by the same overrides (see :mod:`harness.app.verify`)."""
    from harness.app.verify import verify_run

    report = verify_run(cfg)
    print(report.table())
    if not report.ok:
        sys.exit(1)


def _cmd_setup(cfg: dict[str, Any]) -> None:
    """``setup model=NAME [print=true]``: see :mod:`harness.app.setup`."""
    from harness.app.setup import run_setup

    run_setup(cfg)


def _cmd_judge_check(cfg: dict[str, Any]) -> None:
    """``python -m harness judge check``: ping the configured judge server and print what it serves."""
    from evaluate.judge import check_server

    code = check_server((cfg.get("evaluate") or {}).get("judge"))
    if code:
        sys.exit(code)


def _cmd_release_import(cfg: dict[str, Any]) -> None:
    """``release import source=<dir> run=<name>``: the official release as a run, then evaluated
    (:mod:`harness.app.release`)."""
    from harness.app.release import release_import

    if not release_import(cfg, _evaluate):
        sys.exit(1)


def _cmd_release_check(cfg: dict[str, Any]) -> None:
    """``release check run=<name>``: each video's measured camera path against its preset."""
    from harness.app.release import release_check

    release_check(cfg)


HANDLERS = {"run": _cmd_run, "list": _cmd_list, "validate": _cmd_validate, "preview": _cmd_preview,
            "verify": _cmd_verify, "report": _cmd_report, "judge_check": _cmd_judge_check, "setup": _cmd_setup,
            "release_import": _cmd_release_import, "release_check": _cmd_release_check}


def _dispatch(cfg_omega: Any) -> None:
    global _DISPATCHED
    from omegaconf import OmegaConf

    from harness.secrets import secret_values

    _DISPATCHED = True
    try:
        cfg = OmegaConf.to_container(cfg_omega, resolve=True)
    except Exception as exc:  # an interpolation that cannot resolve
        _fail(f"config: {exc}")
    assert isinstance(cfg, dict)
    _register_secrets(secret_values(cfg))
    cmd = cfg.get("cmd", "run")
    if cmd not in HANDLERS:
        _fail(f"cmd={cmd!r}: use one of {', '.join(HANDLERS)}")
    try:
        from harness.app.settings import check_settings
        from harness.logs import apply_progress, setup_logging

        from harness.secrets import install_log_filter

        check_settings(cfg)
        setup_logging(cfg.get("verbosity", "info"))
        install_log_filter()  # library records (httpx, ...) through the root handlers Hydra set up: scrubbed too
        apply_progress(bool(cfg.get("progress", True)))
        HANDLERS[cmd](cfg)
    except UserError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _interrupted()
    except BrokenPipeError:  # the reader of stdout went away (`... | head`): nothing left to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:
        import errno

        if errno.errorcode.get(exc.errno or -1) in _USER_OS_ERRNOS:
            _fail(f"{exc.strerror}: {exc.filename or '(file not reported by the system)'} (check output_root / "
                  "permissions / free space)")
        _bug(exc)
    except Exception as exc:  # anything else is a bug in the harness: shown with its traceback
        _bug(exc)


def _bug(exc: BaseException) -> None:
    """An unexpected error: its traceback (secrets redacted) and exit code 1."""
    import traceback

    from harness.secrets import redact

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    print(redact(text, _SECRETS), file=sys.stderr, end="")
    print(redact(f"error: unexpected {type(exc).__name__}: {exc}. Unless the traceback above points at your "
                 "environment (a file, a device, the network), this is a bug in the harness: please report it with "
                 "the traceback", _SECRETS), file=sys.stderr)
    sys.exit(1)


def _argv_secrets(argv: list[str]) -> dict[str, str]:
    """Secret values given on the command line (``+model.env={HF_TOKEN: x}``, ``model.env.HF_TOKEN=x``)."""
    import re

    from harness.secrets import PLAIN_KEY, env_is_secret

    plain = [n for arg in argv if arg.lstrip("+~").split("=", 1)[0].endswith(f".{PLAIN_KEY}")
             for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", arg.split("=", 1)[-1])]
    found: dict[str, str] = {}
    for arg in argv:
        if "=" not in arg:
            continue
        key, val = arg.split("=", 1)
        key = key.lstrip("+~")
        parts = key.split(".")
        if "env" in parts[:-1] and env_is_secret(parts[-1], plain) and val:
            found[val.strip("'\"")] = parts[-1]
        elif parts[-1] == "env":
            for name, v in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([^,}]+)", val):
                if env_is_secret(name, plain) and v.strip():
                    found[v.strip().strip("'\"")] = name
    return found


def _register_secrets(values: dict[str, str]) -> None:
    """Known secret values: scrubbed from every message, stream, log line and file of this process."""
    from harness.secrets import register

    _SECRETS.update(values)
    register(values)


#: plans the sweep pre-pass validated, by config: the job (in this process, basic launcher) takes its plan from here
#: instead of planning twice
_PLANS: dict[str, Any] = {}


def _config_key(cfg: dict[str, Any]) -> str:
    import json

    return json.dumps(cfg, sort_keys=True, default=str)


def _validate_job(cfg: dict[str, Any]) -> None:
    """What a job checks before it writes anything (run for every job of a sweep before job 0 starts)."""
    from harness.app.settings import check_settings

    check_settings(cfg)
    if isinstance(cfg.get("slurm"), dict):  # launcher=slurm: its settings before Hydra writes the sweep folder
        from harness.app.slurm import check_settings as check_slurm

        check_slurm(cfg["slurm"], cfg.get("model") or {})
    if cfg.get("cmd", "run") == "run":
        plan = prepare_run(cfg, report=False)
        if plan is not None:
            _PLANS[_config_key(cfg)] = plan


def _prepass(argv: list[str]) -> None:
    """Before Hydra runs anything: for a sweep (``-m``), compose and validate every job's config, so a bad job
    fails before job 0 writes; for ``--cfg`` / ``--info`` (Hydra prints the config itself), learn the config's
    secrets first. Hydra's own errors (a bad override) are left to Hydra, which reports them."""
    from omegaconf import OmegaConf

    from harness.secrets import secret_values

    from harness.app.settings import compose_config, hydra_args, sweep_jobs

    try:
        args = hydra_args(argv)
    except SystemExit:
        return  # argparse's own usage error: Hydra prints it
    if not (args.multirun or args.cfg or args.info):
        return
    from pathlib import Path

    # --config-dir adds a search path (e.g. a folder with local/default.yaml): compose what Hydra will compose
    extra = [f"hydra.searchpath=[file://{Path(args.config_dir).resolve()}]"] if args.config_dir else []
    try:
        jobs = sweep_jobs([*args.overrides, *extra]) if args.multirun else [[*args.overrides, *extra]]
        configs = [compose_config(job) for job in jobs]
    except Exception:  # Hydra's own composition error: Hydra reports it when it runs
        return
    for c in configs:
        _register_secrets(secret_values(OmegaConf.to_container(c, resolve=False)))
    if not args.multirun or args.cfg or args.info:
        return
    empty: list[str] = []
    for i, (job, c) in enumerate(zip(jobs, configs)):
        where = f"sweep job #{i} ({' '.join(job)})"
        try:
            cfg = OmegaConf.to_container(c, resolve=True)
        except Exception as exc:  # an interpolation that cannot resolve, a missing mandatory value
            _fail(f"{where}: config: {exc} (no job was started)")
        try:
            _validate_job(cfg)  # type: ignore[arg-type]
        except NothingToRun as exc:  # skipped in the sweep, unless every job is
            empty.append(f"{where}: {exc}")
        except UserError as exc:
            _fail(f"{where}: {exc} (no job was started)")
        except Exception as exc:  # a bug while validating: its traceback, as in a job
            _bug(exc)
    if empty and len(empty) == len(jobs):
        _fail(f"{empty[0]} (and every other job of the sweep: no job was started)")
    for line in empty:
        print(f"note: {line}; that job is skipped", file=sys.stderr)
    log.debug("validated the %d job(s) of the sweep", len(jobs))


def _hide_internal_options_in_help() -> None:
    """``--help`` lists each config group's options (Hydra's ``$APP_CONFIG_GROUPS``); leave out the internal
    ones whose names start with ``_`` (``model/_upstream_base``: a base other model files extend, not a model), as
    ``list`` does. Hydra builds that listing in ``Hydra.format_config_groups`` (facebookresearch/hydra,
    ``hydra/_internal/hydra.py``); this wraps it for this process only, and
    ``tests/harness/app/test_cli.py::test_help_lists_no_internal_option`` notices if Hydra's format changes."""
    from hydra._internal.hydra import Hydra

    original = Hydra.format_config_groups
    if getattr(original, "_hides_internal", False):
        return

    def format_config_groups(self, predicate, compact: bool = True) -> str:  # type: ignore[no-untyped-def]
        text = original(self, predicate, compact)
        if not compact:
            return "\n".join(x for x in text.split("\n") if not x.strip().startswith("_"))
        lines = []
        for line in text.split("\n"):
            group, sep, opts = line.partition(": ")
            if sep:
                line = group + sep + ", ".join(o for o in opts.split(", ") if not o.startswith("_"))
            lines.append(line)
        return "\n".join(lines)

    format_config_groups._hides_internal = True  # type: ignore[attr-defined]
    Hydra.format_config_groups = format_config_groups  # type: ignore[method-assign]


def main() -> None:
    import hydra

    from harness.logs import setup_logging
    from harness.secrets import ScrubbedStream

    # every console line of this process is scrubbed of secrets: values learned from the config, argv and the
    # environment, and anything shaped like a credential (harness.secrets.scrub)
    out, err = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, ScrubbedStream):
        sys.stdout = ScrubbedStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, ScrubbedStream):
        sys.stderr = ScrubbedStream(sys.stderr)  # type: ignore[assignment]
    try:
        setup_logging()  # the default level until the config (and its verbosity) is known
        if len(sys.argv) > 1 and sys.argv[1] == "weights":  # plain argparse: no Hydra run directory for a listing
            from harness.app.weights import main as weights_main

            sys.exit(weights_main(sys.argv[2:]))
        if len(sys.argv) > 1 and sys.argv[1] == "human":  # plan / serve / report a human study (docs/human-study.md)
            from harness.app.human import main as human_main

            sys.exit(human_main(sys.argv[2:]))
        if sys.argv[1:3] == ["judge", "check"]:  # `python -m harness judge check [overrides]`
            sys.argv[1:3] = ["cmd=judge_check"]
        if len(sys.argv) > 2 and sys.argv[1] == "release" and sys.argv[2] in ("import", "check"):
            sys.argv[1:3] = [f"cmd=release_{sys.argv[2]}"]  # `python -m harness release import|check [overrides]`
        from evaluate.reporting.cli import merge_run_args

        sys.argv = _precheck_argv(merge_run_args(sys.argv))
        _register_secrets(_argv_secrets(sys.argv))
        _prepass(sys.argv[1:])
        if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
            _hide_internal_options_in_help()
        try:
            hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")(_dispatch)()
        except SystemExit as exc:
            from harness.errors import CommandExit

            if exc.code == 1 and not _DISPATCHED and not isinstance(exc, CommandExit):
                sys.exit(2)  # Hydra's own override / composition error: a user error like ours
            raise
    except KeyboardInterrupt:
        _interrupted()
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":
    main()
