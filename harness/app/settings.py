"""Every setting checked before anything is written: :func:`load_run_config` reads a composed config as the typed
:class:`~harness.app.run_config.RunConfig` (one mechanism, :mod:`harness.sections`: unknown keys with a did-you-mean,
types and ranges, each message naming the key and the fix), and, for a sweep, every job's config
(:func:`sweep_jobs` expands the sweep as Hydra's basic sweeper does; the CLI validates each job before job 0 runs).
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.app.run_config import RunConfig


def load_run_config(raw: Mapping[str, Any]) -> RunConfig:
    """The one validation of a composed config (resolved to a plain mapping): the typed :class:`RunConfig` every
    command takes; the first problem raised as a :class:`harness.errors.UserError` naming the key and the fix."""
    return RunConfig.from_mapping(raw)


# -- sweeps ------------------------------------------------------------------------------------------------------
def hydra_args(argv: list[str]) -> Any:
    """``argv`` (without the program) parsed by Hydra's own argument parser (overrides, ``-m``, ``--cfg``, ...)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser().parse_args(argv)


def compose_config(overrides: list[str], hydra_config: bool = False) -> Any:
    """The config ``python -m harness <overrides>`` composes (an OmegaConf object), without running anything."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="conf", version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides), return_hydra_config=hydra_config)
    finally:
        GlobalHydra.instance().clear()


def sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """The override list of every job of the sweep ``python -m harness -m <overrides>`` runs, in Hydra's order:
    the sweep parameters of the config (``hydra.sweeper.params``, e.g. an experiment's) then the command line's,
    expanded as :class:`hydra._internal.core_plugins.basic_sweeper.BasicSweeper` does."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    parser = OverridesParser.create()
    parsed = parser.parse_overrides(list(overrides))
    plain = [o.input_line for o in parsed if not o.is_sweep_override() and o.input_line is not None]
    base = compose_config(plain, hydra_config=True)
    params = OmegaConf.select(base, "hydra.sweeper.params") or {}
    container = OmegaConf.to_container(params) if params else {}
    params_conf = [f"{k!s}={v}" for k, v in container.items()] if isinstance(container, dict) else []
    batches = BasicSweeper.split_arguments(parser.parse_overrides(params_conf + list(overrides)), None)
    return [list(job) for batch in batches for job in batch]
