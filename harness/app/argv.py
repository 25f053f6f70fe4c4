"""The command line before Hydra composes it: command words become ``cmd=<name>``, group choices are checked with
a did-you-mean, secrets given on the command line are learned, and a sweep's jobs are all validated before job 0
starts (:func:`prepass`). Nothing here writes a file."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional

from harness.app.console import bug, fail, register_secrets
from harness.errors import UserError

log = logging.getLogger("harness.app.cli")  # the CLI's status lines keep its logger name (console output)

CHECKED_GROUPS = ("model", "context", "trajectory", "cases", "launcher", "experiment", "debug", "evaluate",
                  "backend")


def precheck_argv(argv: list[str], commands: tuple[str, ...]) -> list[str]:
    """Rewrite a leading command word (one of ``commands``) into ``cmd=...`` and check group choices with a
    did-you-mean."""
    from pathlib import Path

    from harness.app.extras import check_launchers
    from harness.app.settings import hydra_args
    from harness.config_groups import UnknownChoiceError, check_choice
    from harness.installed_models import InstalledModelError, installed_models

    try:
        installed_models()  # a broken installed model: named here, before Hydra's search path hook meets it
    except InstalledModelError as exc:
        fail(str(exc))
    out = [a if (i == 0 or a not in commands) else f"cmd={a}" for i, a in enumerate(argv)]
    try:
        check_launchers(out[1:])  # launcher=slurm without the `dist` extra: named before Hydra looks it up
    except UserError as exc:
        fail(str(exc))
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
            for choice in _named_options(arg, val):
                try:
                    check_choice(key, choice, extra)
                except UnknownChoiceError as exc:
                    fail(str(exc))
    return out


def _named_options(arg: str, val: str) -> list[str]:
    """The options a group override ``arg`` (value ``val``) names: ``a`` or each of ``a,b``, each of a
    ``choice(a,b)`` sweep; none for the other sweep functions (``glob``, ``range``: Hydra expands them against the
    real options) or a value Hydra cannot parse (it reports its own syntax error)."""
    if "(" not in val:
        return val.split(",")
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep
    from hydra.errors import HydraException

    try:
        override = OverridesParser.create().parse_override(arg)
    except HydraException:
        return []
    return [str(v) for v in override.sweep_string_iterator()] if isinstance(override.value(), ChoiceSweep) else []


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


def _composable(overrides: list[str], commands: tuple[str, ...] = ()) -> dict[str, str]:
    """``overrides`` as one job would take them -> the override as given: a sweep (``context=fov,sliding``,
    ``seed=range(1,3)``) by its first value; a glob of group options (its options were checked already) left out.
    :class:`UserError` naming an override Hydra's grammar cannot parse (a bare word: a did-you-mean against
    ``commands``)."""
    import difflib

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    out = {}
    for text in overrides:
        if "=" not in text and not text.startswith("~") and commands:
            pairs = [c for c in commands if c.split(" ")[0] == text and " " in c]
            close = pairs or difflib.get_close_matches(text, commands, n=1, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise UserError(f"{text}: neither a command nor key=value.{hint} Commands: {', '.join(commands)} "
                            "(`python -m harness --help`)")
        try:
            (o,) = parser.parse_overrides([text])
        except OverrideParseException as exc:
            why = str(exc).splitlines()[0] if str(exc) else "not an override"
            raise UserError(f"{text}: cannot read this override ({why}); write key=value, quoting a value with "
                            "spaces or brackets: 'key=[a,b]' (Hydra's override grammar)") from None
        if not o.is_sweep_override():
            out[text] = text
        elif o.value_type is not None and o.value_type.name != "GLOB_CHOICE_SWEEP":
            out[f"{o.get_key_element()}={next(iter(o.sweep_string_iterator()))}"] = text
    return out


def _unknown_key(key: str, text: str, others: list[str], extra: list[str]) -> str:
    """One line for an override of a key the config does not have: the place, a did-you-mean against the keys
    there (composed without the bad override), and those keys when they are few."""
    import difflib

    from harness.app.settings import compose_config

    try:
        node: Any = compose_config([*others, *extra], hydra_config=key.startswith("hydra."))
    except Exception:  # another override fails too: say what is known
        return f"{text}: the config has no setting {key!r} (docs/configuration.md lists them)"
    parts, where = key.split("."), list[str]()
    for part in parts[:-1]:
        if not hasattr(node, "keys") or part not in node:
            break
        node, where = node[part], [*where, part]
    missing = parts[len(where)]
    known = sorted(str(k) for k in node.keys()) if hasattr(node, "keys") else []
    close = difflib.get_close_matches(missing, known, n=1, cutoff=0.6)
    place = f"{'.'.join(where)!r} has no setting" if where else "the config has no setting"
    hint = f" Did you mean {'.'.join([*where, close[0]])!r}?" if close else ""
    listing = f" Its settings: {', '.join(known)}." if where and 0 < len(known) <= 40 else (
        " `python -m harness --help` and docs/configuration.md list them." if not where else "")
    return f"{text}: {place} {missing!r}.{hint}{listing}"


@dataclass
class OverrideCheck:
    """What :func:`check_overrides` learnt of a command line: ``overrides`` (each as composed -> as given) and
    ``extra`` (``--config-dir``'s search path) for the one-line errors; ``composed``: the config with its ``hydra``
    node where it was composed up front, or ``deferred``: a plain run of the primary config (no sweep, no ``--cfg``),
    whose one composition is Hydra's own, checked where Hydra first makes it (:func:`composed_once`)."""

    overrides: dict[str, str]
    extra: list[str]
    composed: Any = None
    deferred: bool = False


def check_overrides(argv: list[str], commands: tuple[str, ...] = ()) -> Optional[OverrideCheck]:
    """Check the command line's overrides so that one Hydra would refuse gets one line (exit 2) instead of Hydra's
    error: a key the config does not have (``modle=reference``, ``evaluate.devcie=cpu``) with a did-you-mean against
    the keys at that place (not Hydra's ``+modle=reference``, which adds a key nothing reads), an override its
    grammar cannot parse, a ``+`` on a key that exists, a ``~`` on one that does not, a word that is no command (a
    did-you-mean against ``commands``). The grammar and the words are checked here; the composition (a sweep by each
    override's first value) here too for a sweep, ``--cfg`` / ``--info`` or another primary config, and for a plain
    run where Hydra composes it (:func:`composed_once`). None: nothing to check (``--help``, an argument Hydra's
    parser refuses)."""
    from pathlib import Path

    from harness.app.settings import compose_config, hydra_args

    try:
        args = hydra_args(argv)
    except SystemExit:
        return None  # argparse's own usage error: Hydra prints it
    if args.help or args.hydra_help:
        return None
    extra = [f"hydra.searchpath=[file://{Path(args.config_dir).resolve()}]"] if args.config_dir else []
    with _in_one_line({}, extra):
        overrides = _composable(list(args.overrides), commands)
    other_config = bool(args.config_name or args.config_path)
    if (list(overrides) == list(args.overrides) and not other_config
            and not (args.multirun or args.cfg or args.info or args.shell_completion)):
        return OverrideCheck(overrides, extra, deferred=True)
    with _in_one_line(overrides, extra):
        composed = compose_config([*overrides, *extra], hydra_config=True)
    # another primary config (--config-name / --config-path): Hydra reads its mode itself
    return OverrideCheck(overrides, extra, None if other_config else composed)


@contextmanager
def _in_one_line(overrides: dict[str, str], extra: list[str]) -> Iterator[None]:
    """A user error or Hydra's composition error inside the block: one line and exit 2 (:func:`fail`), in our words
    where we know them (``overrides``: as composed -> as given, for :func:`_composition_error`)."""
    try:
        yield
    except UserError as exc:
        fail(str(exc))
    except Exception as exc:  # Hydra's own composition error
        fail(_composition_error(exc, overrides, extra))


@contextmanager
def composed_once(check: Optional[OverrideCheck]) -> Iterator[None]:
    """Within the block, a command composes its config once where Hydra would compose it twice.

    Hydra's ``_run_hydra`` (facebookresearch/hydra ``hydra/_internal/utils.py``) first composes the whole config only
    to read ``hydra.mode`` (``Hydra.get_mode``, ``hydra/_internal/hydra.py``), then ``Hydra.run`` composes it again
    for the job; each costs about 0.09 s, most of a short command. ``check.deferred`` (a plain run): ``get_mode``
    makes the job's own composition (``compose_config`` with ``Hydra.run``'s arguments), with the one-line errors of
    :func:`check_overrides`, and ``Hydra.run``'s call takes that config (once, for those arguments only).
    ``check.composed``: ``get_mode`` reads the mode from it (a sweep's first values; a swept group option sets
    ``hydra.mode`` differently in none of the options here). Otherwise Hydra's own way.
    ``tests/harness/app/test_cli.py::test_one_command_composes_the_config_once_and_hydra_still_reads_its_mode``
    notices if Hydra's calls change."""
    if check is None or (check.composed is None and not check.deferred):
        yield
        return
    from hydra._internal.hydra import Hydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    get_mode, compose = Hydra.get_mode, Hydra.compose_config
    kept: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def composed_mode(self: Hydra, config_name: Any, overrides: Any) -> Any:
        if not check.deferred:
            return OmegaConf.select(check.composed, "hydra.mode")
        with _in_one_line(check.overrides, check.extra):
            cfg = compose(self, config_name=config_name, overrides=overrides, run_mode=RunMode.RUN,
                          with_log_configuration=True)
        kept[(config_name, tuple(overrides))] = cfg
        return cfg.hydra.mode

    def compose_kept(self: Hydra, config_name: Any, overrides: Any, run_mode: Any,
                     with_log_configuration: bool = False, from_shell: bool = True,
                     validate_sweep_overrides: bool = True) -> Any:
        if run_mode == RunMode.RUN and with_log_configuration and from_shell and validate_sweep_overrides:
            cfg = _kept_for(kept, config_name, list(overrides))
            if cfg is not None:  # Hydra.run's own call, made once already (logging configured by it)
                return cfg
        return compose(self, config_name, overrides, run_mode, with_log_configuration, from_shell,
                       validate_sweep_overrides)

    Hydra.get_mode = composed_mode  # type: ignore[method-assign]  # Hydra offers no hook
    Hydra.compose_config = compose_kept  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode, Hydra.compose_config = get_mode, compose  # type: ignore[method-assign]


def _kept_for(kept: dict[tuple[Any, tuple[str, ...]], Any], config_name: Any, overrides: list[str]) -> Any:
    """The config ``get_mode`` composed for ``Hydra.run``'s call (None: none). Where the config sets no mode, Hydra
    adds ``hydra.mode=RUN`` to the run's overrides (``_run_app``): the composition it would make differs from the
    kept one in ``hydra.mode`` and ``hydra.overrides.hydra`` only, which are set here as that override sets them."""
    from hydra.types import RunMode
    from omegaconf import open_dict

    cfg = kept.pop((config_name, tuple(overrides)), None)
    if cfg is not None or overrides[-1:] != ["hydra.mode=RUN"]:
        return cfg
    cfg = kept.pop((config_name, tuple(overrides[:-1])), None)
    if cfg is None or cfg.hydra.mode is not None:
        return None
    with open_dict(cfg.hydra):
        cfg.hydra.mode = RunMode.RUN
        cfg.hydra.overrides.hydra.append("hydra.mode=RUN")
    return cfg


def _composition_error(exc: BaseException, overrides: dict[str, str], extra: list[str]) -> str:
    """One line for Hydra's composition error ``exc`` (``overrides``: composed form -> as given)."""
    import re

    msg = f"{exc}\n{exc.__cause__ or ''}"
    m = re.search(r"Could not override '([^']+)'", msg)
    bad = next((o for o in overrides if m and o.lstrip("+~").split("=", 1)[0] == m.group(1)), None)
    if m and bad is not None and re.search(r"not in struct|Key '[^']+' not in", msg):
        return _unknown_key(m.group(1), overrides[bad], [o for o in overrides if o != bad], extra)
    m = re.search(r"Could not append to config. An item is already at '([^']+)'", msg)
    if m:
        return f"+{m.group(1)}=...: {m.group(1)!r} exists already: set it without the '+' ({m.group(1)}=...)"
    first = next((x.strip() for x in str(exc).splitlines() if x.strip()), type(exc).__name__)
    return f"{first} (in: {' '.join(overrides.values())})"


def experiment_sweep(argv: list[str]) -> dict[str, str]:
    """The sweep a chosen experiment defines (``hydra.sweeper.params`` of ``conf/experiment/<name>.yaml``), minus
    the keys the command line sets itself; empty for a sweep (``-m``), ``--cfg`` / ``--info`` / ``--help``, or a
    command other than ``run``."""
    import yaml

    from harness.app.settings import hydra_args
    from harness.config_groups import option_file

    try:
        args = hydra_args(argv)
    except SystemExit:
        return {}
    if args.multirun or args.cfg or args.info or args.help or args.hydra_help:
        return {}
    pairs = [o.lstrip("+~").split("=", 1) for o in args.overrides if "=" in o]
    given = {p[0]: p[1] for p in pairs}
    if given.get("cmd", "run") != "run" or not given.get("experiment"):
        return {}
    try:
        text = option_file("experiment", given["experiment"]).read_text()
        params = ((yaml.safe_load(text) or {}).get("hydra") or {}).get("sweeper", {}).get("params") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in params.items() if str(k) not in given}
