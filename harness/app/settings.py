"""Every setting checked before anything is written: the top-level keys against their types and ranges, unknown
keys (a ``+overwite=true`` typo adds a key Hydra does not know) with a did-you-mean, and, for a sweep, every job's
config (:func:`sweep_jobs` expands the sweep as Hydra's basic sweeper does; the CLI validates each job before job 0
runs).

The typed sections check themselves: ``model`` (:class:`adapters.base.ModelConfig`), ``context``
(:class:`harness.context.ContextPolicy`), ``trajectory`` (:class:`trajectories.TrajectorySpec`), ``evaluate``
(:class:`evaluate.stage.EvalConfig`). This module covers the rest: the keys of ``conf/config.yaml``, ``cases``,
``paths`` and ``local``.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any, Callable

from harness.app.run_config import RunConfig
from harness.errors import ConfigError

#: keys a config may hold besides those of conf/config.yaml: the sections of the groups that have a package, and
#: the report command's options (added by ``evaluate.reporting.cli.merge_run_args`` as ``+key``)
SECTIONS = ("model", "context", "trajectory", "cases", "evaluate", "local", "backend")
REPORT_KEYS = ("report_runs", "report_out", "main_context", "report_strips", "report_figures", "human_study")
CASE_KEYS = ("name", "source", "include", "families", "description")
#: keys of ``conf/backend/*.yaml`` (the served backend, docs/served.md); ``backend.models.<m>`` is checked by
#: :class:`adapters.served.config.ServedModel` at planning
BACKEND_KEYS = ("name", "engine", "route", "token_env", "connect_timeout_s", "chunk_timeout_s", "item_timeout_s",
                "max_unknown_messages", "action_root", "output_format", "num_inference_steps", "engine_version",
                "models", "description")
FAMILIES = ("human", "object", "environment", "dynamic")
STAGES = ("generate", "evaluate", "all")
RELEASE_KEYS = ("models", "overlay", "hfov_deg", "limit", "evaluate", "max_rows", "measure", "workers")


@functools.lru_cache(maxsize=1)
def top_level_keys() -> list[str]:
    """The keys of ``conf/config.yaml`` (without ``defaults`` and ``hydra``), the group sections, the report keys,
    and the top-level keys that group files in the global package add (``launcher=slurm`` adds ``slurm``)."""
    import yaml

    import conf

    root = Path(conf.__file__).parent
    keys = set(yaml.safe_load((root / "config.yaml").read_text()))
    for group_file in root.glob("*/*.yaml"):
        text = group_file.read_text()
        if "@package _global_" in text:
            keys |= set(yaml.safe_load(text) or {})
    return sorted((keys - {"defaults", "hydra"}) | set(SECTIONS) | set(REPORT_KEYS))


def _unknown(where: str, key: str, allowed: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"{where}{key}: unknown setting (a '+{where}{key}=...' override adds a key nothing "
                       f"reads).{hint} Known: {', '.join(allowed)}")


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _check(key: str, value: Any, ok: Callable[[Any], bool], want: str) -> None:
    if not ok(value):
        raise ConfigError(f"{key}={value!r}: {want}")


def _mapping(cfg: dict[str, Any], name: str, keys: tuple[str, ...], want: str) -> dict[str, Any] | None:
    """The section ``name`` of ``cfg`` (None when absent), refused unless a mapping of known ``keys``."""
    section = cfg.get(name)
    if section is None:
        return None
    _check(name, section, lambda v: isinstance(v, dict), want)
    for k in section:
        if k not in keys:
            raise _unknown(f"{name}.", str(k), list(keys))
    return dict(section)


def load_run_config(raw: dict[str, Any]) -> RunConfig:
    """The one validation of a composed config (resolved to a plain mapping): :func:`check_settings` (unknown keys,
    types and ranges, messages naming the key and the fix), then the typed :class:`RunConfig` every command takes.
    Group sections with their own typed config are checked by it where they are used (planning)."""
    check_settings(raw)
    return RunConfig.from_mapping(raw)


def check_settings(cfg: dict[str, Any]) -> None:
    """Refuse unknown top-level keys and values of the wrong type or range (:class:`ConfigError` naming the key,
    with a did-you-mean and the fix). Group sections are checked by their own typed configs at planning."""
    from harness.logs import check_verbosity

    from harness.app.plan import parse_shard
    from harness.outputs import check_seed

    allowed = top_level_keys()
    for k in cfg:
        if k not in allowed:
            raise _unknown("", str(k), allowed)
    for k in ("dry_run", "previews", "overwrite", "progress"):
        if k in cfg:
            _check(k, cfg[k], _is_bool, "use true or false")
    if "stage" in cfg:
        _check("stage", cfg["stage"], lambda v: v in STAGES, f"use one of {', '.join(STAGES)}")
    if "verbosity" in cfg:
        check_verbosity(cfg["verbosity"])
    if cfg.get("seed") is not None:
        check_seed(cfg["seed"])
    if "shard" in cfg:
        parse_shard(cfg["shard"])
    for k in ("output_root",):
        if k in cfg:
            _check(k, cfg[k], lambda v: isinstance(v, str) and bool(v.strip()), "give a folder path")
    for k in ("videos", "videos_manifest", "gpu_lock_dir", "report_out"):
        if cfg.get(k) is not None:
            _check(k, cfg[k], lambda v: isinstance(v, str) and bool(v.strip()), "give a path (or null)")
    if cfg.get("trajectories") is not None:
        _check("trajectories", cfg["trajectories"],
               lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v),
               "give a list of trajectory names, e.g. trajectories=[lrlr,lrud] (or null)")
    paths = cfg.get("paths")
    if paths is not None:
        _check("paths", paths, lambda v: isinstance(v, dict), "a mapping, e.g. paths.weights=/data/weights")
        for k in paths:
            if k != "weights":
                raise _unknown("paths.", str(k), ["weights"])
        if paths.get("weights") is not None:
            _check("paths.weights", paths["weights"], lambda v: isinstance(v, str) and bool(v.strip()),
                   "give a folder path (or null)")
    cases = _mapping(cfg, "cases", CASE_KEYS, "choose a case set: cases=demo or cases=folder")
    if cases is not None:
        for k in ("include", "families"):
            if cases.get(k) is not None:
                _check(f"cases.{k}", cases[k], lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                       "give a list, e.g. cases.include=[environment_rocket] (or null)")
        bad = [f for f in cases.get("families") or [] if f not in FAMILIES]
        if bad:
            raise ConfigError(f"cases.families: unknown family {bad[0]!r}; use {', '.join(FAMILIES)}")
    check_backend(cfg)
    local = cfg.get("local")
    if local is not None:
        _check("local", local, lambda v: isinstance(v, dict), "conf/local/default.yaml must hold a mapping")
    release = _mapping(cfg, "release", RELEASE_KEYS, "a mapping, e.g. release.limit=100")
    if release is not None:
        for key in ("evaluate", "measure"):
            if key in release:
                _check(f"release.{key}", release[key], _is_bool, "use true or false")
    if cfg.get("source") is not None:
        _check("source", cfg["source"], lambda v: isinstance(v, str) and bool(v.strip()), "give a folder (or null)")


def check_backend(cfg: dict[str, Any]) -> None:
    """``backend`` holds only known keys, ``endpoint`` is a WebSocket address exactly when a served backend is
    chosen, and ``backend.token_env`` names a variable (never holds a token)."""
    backend = cfg.get("backend")
    endpoint = cfg.get("endpoint")
    if backend is None:
        if endpoint is not None:
            raise ConfigError("endpoint: set, but no backend is chosen; add backend=sglang or backend=vllm_omni")
        return
    _check("backend", backend, lambda v: isinstance(v, dict), "choose a backend: backend=upstream|sglang|vllm_omni")
    for k in backend:
        if k not in BACKEND_KEYS:
            raise _unknown("backend.", str(k), list(BACKEND_KEYS))
    name = backend.get("name", "upstream")
    if name == "upstream":
        if endpoint is not None:
            raise ConfigError(f"endpoint={endpoint!r}: backend=upstream runs the model's own adapter; choose "
                              "backend=sglang or backend=vllm_omni to use a served model (or drop endpoint)")
        return
    _check("endpoint", endpoint, lambda v: isinstance(v, str) and v.startswith(("ws://", "wss://")),
           f"backend={name} needs the server's WebSocket address, e.g. endpoint=ws://127.0.0.1:30000")
    tok = backend.get("token_env")
    if tok is not None:
        _check("backend.token_env", tok, lambda v: isinstance(v, str) and v.replace("_", "").isalnum(),
               "give the NAME of an environment variable (e.g. WORLDMEM_ENDPOINT_TOKEN), never the token itself")
    for k in ("connect_timeout_s", "chunk_timeout_s", "item_timeout_s"):
        if k in backend:
            _check(f"backend.{k}", backend[k], lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                   and v > 0, "a number of seconds > 0")


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
