"""The command line before Hydra composes it: command words become ``cmd=<name>``, group choices are checked with
a did-you-mean, secrets given on the command line are learned, and a sweep's jobs are all validated before job 0
starts (:func:`prepass`). Nothing here writes a file."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from harness.app.console import bug, fail, register_secrets
from harness.errors import UserError

log = logging.getLogger("harness.app.cli")  # the CLI's status lines keep its logger name (console output)

CHECKED_GROUPS = ("model", "context", "trajectory", "cases", "launcher", "experiment", "debug", "evaluate",
                  "backend")


def precheck_argv(argv: list[str], commands: tuple[str, ...]) -> list[str]:
    """Rewrite a leading command word (one of ``commands``) into ``cmd=...`` and check group choices with a
    did-you-mean."""
    from pathlib import Path

    from harness.app.settings import hydra_args
    from harness.config_groups import UnknownChoiceError, check_choice
    from harness.installed_models import InstalledModelError, installed_models

    try:
        installed_models()  # a broken installed model: named here, before Hydra's search path hook meets it
    except InstalledModelError as exc:
        fail(str(exc))
    out = [a if (i == 0 or a not in commands) else f"cmd={a}" for i, a in enumerate(argv)]
    check_slurm(out[1:])
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
        if key in CHECKED_GROUPS and val and val != "null":
            for choice in val.split(","):
                if choice.startswith(("glob(", "range(", "choice(")):
                    continue
                try:
                    check_choice(key, choice, extra)
                except UnknownChoiceError as exc:
                    fail(str(exc))
    return out


def check_slurm(args: list[str]) -> None:
    """``launcher=slurm`` off a cluster: say so instead of submitit's 'Could not detect "srun"' traceback."""
    import shutil

    for arg in args:
        if arg.lstrip("+~").startswith("launcher=") and "slurm" in arg.split("=", 1)[1].split(","):
            missing = [t for t in ("sbatch", "srun") if shutil.which(t) is None]
            if missing:
                fail(f"launcher=slurm needs a Slurm cluster, but {' and '.join(missing)} "
                     f"{'is' if len(missing) == 1 else 'are'} not on PATH here. Run on a Slurm login node, or test "
                     "the same sweep locally with launcher=submitit_local (or launcher=basic).")


def argv_secrets(argv: list[str]) -> dict[str, str]:
    """Secret values given on the command line (``+model.env={HF_TOKEN: x}``, ``model.env.HF_TOKEN=x``, a URL's
    password): :func:`harness.secrets.override_secrets`."""
    from harness.secrets import override_secrets

    return override_secrets(argv)


def resolved(c: Any) -> dict[str, Any]:
    """A composed (OmegaConf) config as a plain mapping, interpolations resolved."""
    from omegaconf import OmegaConf

    out = OmegaConf.to_container(c, resolve=True)
    assert isinstance(out, dict)  # the root of a composed config is a mapping
    return {str(k): v for k, v in out.items()}


def prepass(argv: list[str], validate_job: Callable[[dict[str, Any]], None],
            skipped: type[UserError]) -> None:
    """Before Hydra runs anything: for a sweep (``-m``), compose every job's config and ``validate_job`` it, so a
    bad job fails before job 0 writes (a job raising ``skipped`` is skipped with a note, unless every job is); for
    ``--cfg`` / ``--info`` (Hydra prints the config itself), learn the config's secrets first. Hydra's own errors (a
    bad override) are left to Hydra, which reports them."""
    from omegaconf import OmegaConf

    from harness.app.settings import compose_config, hydra_args, sweep_jobs
    from harness.secrets import secret_values

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
        register_secrets(secret_values(OmegaConf.to_container(c, resolve=False)))
    if not args.multirun or args.cfg or args.info:
        return
    _validate_sweep(jobs, configs, validate_job, skipped)


def _validate_sweep(jobs: list[list[str]], configs: list[Any], validate_job: Callable[[dict[str, Any]], None],
                    skipped: type[UserError]) -> None:
    """Every job of a sweep validated (see :func:`prepass`); a note for each skipped job."""
    empty: list[str] = []
    for i, (job, c) in enumerate(zip(jobs, configs)):
        where = f"sweep job #{i} ({' '.join(job)})"
        try:
            cfg = resolved(c)
        except Exception as exc:  # an interpolation that cannot resolve, a missing mandatory value
            fail(f"{where}: config: {exc} (no job was started)")
        try:
            validate_job(cfg)
        except skipped as exc:  # skipped in the sweep, unless every job is
            empty.append(f"{where}: {exc}")
        except UserError as exc:
            fail(f"{where}: {exc} (no job was started)")
        except Exception as exc:  # a bug while validating: its traceback, as in a job
            bug(exc)
    if empty and len(empty) == len(jobs):
        fail(f"{empty[0]} (and every other job of the sweep: no job was started)")
    for line in empty:
        print(f"note: {line}; that job is skipped", file=sys.stderr)
    log.debug("validated the %d job(s) of the sweep", len(jobs))


def hide_internal_options_in_help() -> None:
    """``--help`` lists each config group's options (Hydra's ``$APP_CONFIG_GROUPS``); leave out the internal
    ones whose names start with ``_`` (``model/_upstream_base``: a base other model files extend, not a model), as
    ``list`` does. Hydra builds that listing in ``Hydra.format_config_groups`` (facebookresearch/hydra,
    ``hydra/_internal/hydra.py``); this wraps it for this process only, and
    ``tests/harness/app/test_cli.py::test_help_lists_no_internal_option`` notices if Hydra's format changes."""
    from hydra._internal.hydra import Hydra

    original = Hydra.format_config_groups
    if getattr(original, "_hides_internal", False):
        return

    def format_config_groups(self: Hydra, predicate: Callable[[Any], bool], compact: bool = True) -> str:
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

    format_config_groups._hides_internal = True  # type: ignore[attr-defined]  # a marker: wrapped once per process
    Hydra.format_config_groups = format_config_groups  # type: ignore[method-assign]  # Hydra offers no hook


def command_word_rewrites(argv: list[str], words: Mapping[tuple[str, str], str]) -> list[str]:
    """``judge check`` / ``release import`` (two words) -> ``cmd=<name>`` (from the dispatch table's ``words``)."""
    name = words.get((argv[1], argv[2])) if len(argv) > 2 else None
    return [argv[0], f"cmd={name}", *argv[3:]] if name else list(argv)
