"""Lookup and listing. The config groups *are* the registry; this module only reads them.

The groups live under ``conf/``, except the models': each model package holds its own ``conf/model/<name>.yaml``
(in-tree ``adapters/<name>/``, or an installed package: :mod:`harness.installed_models`), and its ``conf`` folder is
on the search path (:func:`search_dirs`). Model adapters are referenced from their YAML as ``adapter:
"module:Class"`` and imported lazily, so ``python -m harness --help`` and config composition never import torch or
model code. An out-of-tree adapter is just a YAML file (in a Hydra search-path folder) that points at an importable
class.
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import yaml

from harness.errors import ConfigError, MissingDependencyError

_OWN_PACKAGES = ("harness", "adapters", "evaluate", "trajectories", "conf")

GROUPS = ("model", "context", "trajectory", "cases", "evaluate", "launcher", "experiment", "debug")


class UnknownChoiceError(ConfigError):
    """An unknown name for a config group, with a did-you-mean suggestion."""


def conf_dir() -> Path:
    import conf

    return Path(conf.__file__).resolve().parent


def search_dirs() -> list[Path]:
    """The folders configs are read from, in Hydra's order: inside a running app, its config search path (the
    ``conf`` package plus ``--config-dir`` / ``hydra.searchpath`` folders, e.g. an out-of-tree model's
    ``model/<name>.yaml``); elsewhere the ``conf`` package alone. Both end with the ``conf`` folders of the model
    packages, in-tree and installed (:func:`harness.installed_models.model_packages`)."""
    from hydra.core.hydra_config import HydraConfig

    from harness.installed_models import model_packages

    models = [m.conf_dir for m in model_packages().values()]
    if not HydraConfig.initialized():
        return [conf_dir(), *models]
    dirs = []
    for src in HydraConfig.get().runtime.config_sources:
        if src.schema == "file":
            dirs.append(Path(src.path))
        elif src.schema == "pkg":
            spec = importlib.util.find_spec(src.path)
            if spec is not None and spec.submodule_search_locations:
                dirs.append(Path(next(iter(spec.submodule_search_locations))))
    # a model package's conf folder is on Hydra's path already (hydra_plugins/worldmem_models)
    return [*(dirs or [conf_dir()]), *(d for d in models if d not in dirs)]


def option_file(group: str, name: str) -> Path:
    """The YAML file of option ``name`` of ``group``: the first search-path folder (:func:`search_dirs`) holding
    ``<group>/<name>.yaml`` (the ``conf`` package's path when none does)."""
    for d in search_dirs():
        if (d / group / f"{name}.yaml").is_file():
            return d / group / f"{name}.yaml"
    return conf_dir() / group / f"{name}.yaml"


def list_group(group: str, extra_dirs: Sequence[Path] = ()) -> list[str]:
    """Names of the options of a config group (the YAML file stems in every search-path folder and in
    ``extra_dirs``: a ``--config-dir`` seen before Hydra runs), sorted; for ``model``, every model package's
    ``conf/model/<name>.yaml``. Files starting with ``_`` are shared bases that options include through their
    ``defaults:`` (``conf/model/_upstream_base.yaml``), not options."""
    return sorted({p.stem for d in (*search_dirs(), *extra_dirs) for p in (d / group).glob("*.yaml")
                   if not p.stem.startswith("_")})


#: groups whose options are values of their own package (``model: {...}``); the others (``launcher``,
#: ``experiment``, ``debug``) configure other packages through their ``defaults:`` and are read as written
VALUE_GROUPS = ("model", "context", "trajectory", "cases", "evaluate")


def group_yaml(group: str, name: str) -> dict[str, Any]:
    """The config of option ``name`` of ``group`` as Hydra composes it (its ``defaults:`` merged by Hydra itself,
    e.g. ``conf/model/_upstream_base.yaml`` under every upstream model); raises :class:`UnknownChoiceError` if
    absent. Options of the groups that configure other packages (``launcher``, ``experiment``, ``debug``) are
    returned as written. A fresh copy on every call (callers may change it)."""
    check_choice(group, name)
    if group not in VALUE_GROUPS:
        return yaml.safe_load(option_file(group, name).read_text()) or {}
    return copy.deepcopy(_composed(group, name))


def group_description(group: str, name: str) -> str:
    """The ``description:`` line of an option, read from its file (listing composes nothing)."""
    data = yaml.safe_load(option_file(group, name).read_text()) or {}
    desc = data.get("description") if isinstance(data, dict) else None
    return str(desc or "")


@functools.lru_cache(maxsize=256)
def _composed(group: str, name: str) -> dict[str, Any]:
    """``compose(config_name="<group>/<name>")[group]`` through Hydra's compose API: inside a running app with its
    search path (Hydra is initialised), elsewhere from the ``conf`` package."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    if GlobalHydra.instance().is_initialized():
        cfg = compose(config_name=f"{group}/{name}")
    else:
        with initialize_config_module(config_module="conf", version_base="1.3"):
            cfg = compose(config_name=f"{group}/{name}")
    container = OmegaConf.to_container(cfg, resolve=False)
    node = container.get(group) if isinstance(container, dict) else None
    return dict(node) if isinstance(node, dict) else {}


def did_you_mean(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def check_choice(group: str, name: str, extra_dirs: Sequence[Path] = ()) -> None:
    options = list_group(group, extra_dirs)
    if name not in options:
        raise UnknownChoiceError(
            f"Unknown {group} {name!r}.{did_you_mean(name, options)} Available: {', '.join(options) or '(none)'}"
        )


def load_object(ref: str) -> Any:
    """Import ``"package.module:Attr"`` lazily; a clear error names the reference when it fails."""
    if ":" not in ref:
        raise ConfigError(f"adapter reference {ref!r} must look like 'package.module:ClassName'")
    mod_name, attr = ref.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in _OWN_PACKAGES and not mod_name.startswith(exc.name):
            raise  # one of our own modules is missing: a bug, shown with its traceback
        if exc.name and mod_name.startswith(exc.name):
            raise ConfigError(f"adapter reference {ref!r}: no module {mod_name!r}") from exc
        raise MissingDependencyError(f"adapter module {mod_name!r}", "models", str(exc)) from exc
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ConfigError(f"module {mod_name!r} has no {attr!r} (from adapter reference {ref!r})") from None


def model_config_with_local(model_cfg: Mapping[str, Any], local: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The ``model`` config with this machine's settings for that model merged in.

    ``local`` is ``conf/local/default.yaml`` (git-ignored, package ``local``): one block per model, e.g.
    ``models: {lingbot_v2: {upstream_dir: ..., checkpoint: ..., python: ...}}``; only the block of the selected
    model is merged, so one model's paths never reach another (and ``model=reference`` stays untouched). An unknown
    model name in the local file is an error naming ``local.models.<name>``; unknown fields fail in the model's
    own config validation, named ``model.<field>``.
    """
    model = dict(model_cfg)
    blocks = ((local or {}).get("models") or {})
    if not isinstance(blocks, dict):
        raise ConfigError("local.models: must map model names to settings (see docs/real-models.md)")
    options = list_group("model")
    for name in blocks:
        if name not in options:
            raise UnknownChoiceError(f"local.models.{name}: no such model.{did_you_mean(name, options)} "
                                     f"Available: {', '.join(options)}")
    block = blocks.get(model.get("name")) or {}
    if not isinstance(block, dict):
        raise ConfigError(f"local.models.{model.get('name')}: must be a mapping of model fields")
    model.update(block)
    return model
