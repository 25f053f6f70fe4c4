"""``python -m harness``: the command line, one dispatch table.

Commands (the first word(s), or ``cmd=<name>``): ``run`` (default: plan, compile, generate, evaluate), ``list``
(models, contexts, trajectories, case sets), ``validate`` (check a case set), ``preview`` (draw the chosen
trajectory to PNG), ``report``, ``verify`` (the delivery check of a run), ``setup`` (checkout, environment, weights
and readiness of an upstream model; ``print=true`` prints the script), ``judge check``, ``release import|check``;
and ``weights`` and ``human``, which take their own arguments (argparse) instead of Hydra overrides.
``dry_run=true`` plans and compiles native controls without generating.

:data:`HANDLERS` maps each command's name to its handler. A handler of a config command takes the validated
:class:`~harness.app.run_config.RunConfig` (composed by Hydra, checked once by
:func:`harness.app.settings.load_run_config`); an :class:`ArgvCommand` takes the words after its name. A new command
is one entry there (and its handler's module under :mod:`harness.app.commands`); :data:`WORDS` lists the commands
typed as two words. Exit codes and messages: :mod:`harness.app.console`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from harness.app.commands import info, run, tools
from harness.app.run_config import RunConfig

log = logging.getLogger("harness.app.cli")  # the CLI's status lines (console output)


@dataclass(frozen=True)
class ArgvCommand:
    """A command with its own argument parser: ``module:function`` takes ``argv`` (after the command word) and
    returns the exit code; imported only when the command runs."""

    target: str

    def __call__(self, argv: list[str]) -> int:
        import importlib

        module, func = self.target.split(":")
        main: Callable[[list[str]], int] = getattr(importlib.import_module(module), func)
        return main(argv)


Handler = Union[Callable[[RunConfig], None], ArgvCommand]

#: command name -> handler (the one dispatch table; never changed at run time)
HANDLERS: dict[str, Handler] = {
    "run": run.cmd_run, "list": info.cmd_list, "validate": info.cmd_validate, "preview": info.cmd_preview,
    "verify": tools.cmd_verify, "report": tools.cmd_report, "judge_check": tools.cmd_judge_check,
    "setup": tools.cmd_setup, "release_import": tools.cmd_release_import, "release_check": tools.cmd_release_check,
    # plain argparse: no Hydra run directory for a listing; plan / serve / report a human study (docs/human-study.md)
    "weights": ArgvCommand("harness.app.weights:main"), "human": ArgvCommand("harness.app.human:main"),
}
#: ``run`` with one of these stages is another command: ``stage=evaluate`` generates nothing and evaluates an existing
#: run or videos made elsewhere (:func:`handler_for`)
STAGE_HANDLERS: dict[str, Callable[[RunConfig], None]] = {"evaluate": run.cmd_evaluate_only}
#: commands typed as two words: ``python -m harness judge check [overrides]``, ``release import|check``
WORDS = {("judge", "check"): "judge_check", ("release", "import"): "release_import",
         ("release", "check"): "release_check"}
#: the first words that name a config command (``python -m harness list`` = ``cmd=list``)
COMMANDS = ("run", "list", "validate", "preview", "report", "verify", "setup")


def config_commands() -> list[str]:
    return [name for name, h in HANDLERS.items() if not isinstance(h, ArgvCommand)]


def handler_for(cfg: RunConfig, handler: Callable[[RunConfig], None]) -> Callable[[RunConfig], None]:
    """The handler of the validated ``cfg``: its command's, or for ``run`` its stage's (:data:`STAGE_HANDLERS`)."""
    return STAGE_HANDLERS.get(cfg.stage, handler) if cfg.cmd == "run" else handler


def _one_line(exc: Exception) -> str:
    """An OmegaConf error as one line: its key, then the first line of its message (the rest repeats the key and
    names OmegaConf's internal types)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    key = getattr(exc, "full_key", None)
    return f"{key}: {first}" if key else first


def dispatch(cfg_omega: Any) -> None:
    """Hydra's task function: resolve the composed config, validate it once, run its command's handler."""
    from harness.app.argv import resolved
    from harness.app.console import fail, guarded, register_secrets
    from harness.secrets import secret_values

    try:
        raw = resolved(cfg_omega)
    except Exception as exc:  # an interpolation that cannot resolve
        fail(f"config: {_one_line(exc)}")
    register_secrets(secret_values(raw))
    cmd = raw.get("cmd", "run")
    handler = HANDLERS.get(cmd)
    if handler is None or isinstance(handler, ArgvCommand):
        fail(f"cmd={cmd!r}: use one of {', '.join(config_commands())}")
    command: Callable[[RunConfig], None] = handler

    def body() -> None:
        from harness.app.settings import load_run_config
        from harness.logs import apply_progress, setup_logging
        from harness.secrets import install_log_filter

        cfg = load_run_config(raw)
        setup_logging(cfg.verbosity)
        install_log_filter()  # library records (httpx, ...) through the root handlers Hydra set up: scrubbed too
        apply_progress(cfg.progress)
        handler_for(cfg, command)(cfg)

    guarded(body)


#: set once Hydra has handed a composed config to :func:`task` (a SystemExit(1) before that is Hydra's usage error)
_DISPATCHED: list[bool] = []


def task(cfg_omega: Any) -> None:
    """Hydra's task function (module level, so that a launcher can send it to a worker process)."""
    _DISPATCHED.append(True)
    dispatch(cfg_omega)


def _validate_job(raw: dict[str, Any]) -> None:
    from harness.app.settings import load_run_config

    run.validate_job(load_run_config(raw))


def _run_hydra(argv: list[str]) -> None:
    """``argv`` (config commands): checked, then composed and run by Hydra (:func:`dispatch`)."""
    import hydra

    from evaluate.reporting.cli import merge_run_args
    from harness.app.argv import (argv_secrets, check_overrides, experiment_sweep, hide_internal_options_in_help,
                                  composed_once, precheck_argv, prepass)
    from harness.app.console import register_secrets
    from harness.errors import CommandExit

    sys.argv = precheck_argv(merge_run_args(argv), COMMANDS)
    sweep = experiment_sweep(sys.argv[1:])
    if sweep:  # `experiment=first_look` without -m: the experiment is its sweep, so run it (docs/configuration.md)
        log.info("experiment sweeps %s: running it as a sweep (-m); set %s to run one job",
                 " ".join(f"{k}={v}" for k, v in sweep.items()), " ".join(f"{k}=<value>" for k in sweep))
        sys.argv = [sys.argv[0], "-m", *sys.argv[1:]]
    words = (*COMMANDS, *(n for n, h in HANDLERS.items() if isinstance(h, ArgvCommand)), *(" ".join(w) for w in WORDS))
    check = check_overrides(sys.argv[1:], words)
    register_secrets(argv_secrets(sys.argv))
    _DISPATCHED.clear()

    with run.prepared({}):
        prepass(sys.argv[1:], _validate_job, run.NothingToRun)
        if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
            hide_internal_options_in_help()
        try:
            with composed_once(check):
                hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")(task)()
        except SystemExit as exc:
            if exc.code == 1 and not _DISPATCHED and not isinstance(exc, CommandExit):
                sys.exit(2)  # Hydra's own override / composition error: a user error like ours
            raise


def main() -> None:
    from harness.app.argv import command_word_rewrites
    from harness.app.console import interrupted
    from harness.logs import setup_logging
    from harness.secrets import ScrubbedStream

    # every console line of this process is scrubbed of secrets: values learned from the config, argv and the
    # environment, and anything shaped like a credential (harness.secrets.scrub)
    out, err = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, ScrubbedStream):
        sys.stdout = ScrubbedStream(sys.stdout)
    if not isinstance(sys.stderr, ScrubbedStream):
        sys.stderr = ScrubbedStream(sys.stderr)
    try:
        setup_logging()  # the default level until the config (and its verbosity) is known
        handler = HANDLERS.get(sys.argv[1]) if len(sys.argv) > 1 else None
        if isinstance(handler, ArgvCommand):
            sys.exit(handler(sys.argv[2:]))
        _run_hydra(command_word_rewrites(sys.argv, WORDS))
    except KeyboardInterrupt:
        interrupted()
    finally:
        sys.stdout, sys.stderr = out, err
