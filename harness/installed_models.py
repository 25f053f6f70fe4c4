"""Models provided by installed packages: the ``worldmem_harness.models`` entry-point group.

A distribution declares one entry point per model, named after the model, whose value is the model's package::

    [project.entry-points."worldmem_harness.models"]
    toy_wm = "toy_world_model"

The package holds what an in-tree ``adapters/<model>/`` folder holds (its adapter, controls, runner shim and
``contract.yaml``) plus its Hydra config as ``conf/model/<model>.yaml``; the harness adds each package's ``conf``
folder to the config search path (``hydra_plugins/worldmem_models``, :func:`harness.config_groups.search_dirs`) and
reads the contract from the package (:func:`adapters.contracts.contract_path`). docs/adapters.md "Adding a model".

The convention is nerfstudio's (nerfstudio-project/nerfstudio@50e0e3c nerfstudio/plugins/registry.py: methods are
discovered with ``importlib.metadata.entry_points(group="nerfstudio.method_configs")``, one entry point per method,
declared under ``[project.entry-points.'nerfstudio.method_configs']``, docs/developer_guides/new_methods.md); here an
entry point names a package rather than a config object, because a model's config is a YAML file Hydra composes.

Loading an entry point imports the model's package (its ``__init__``), never its adapter: keep ``__init__`` light
(no torch), as every ``python -m harness`` command reads the list.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from harness.errors import ConfigError
from harness.outputs import NAME_RULE, PlanError, check_name

#: the entry-point group an installed distribution declares its models in
GROUP = "worldmem_harness.models"
#: a model package's contract file and its Hydra config folder (``<package>/conf/model/<model>.yaml``)
CONTRACT_FILE = "contract.yaml"
CONF_DIR = "conf"


class InstalledModelError(ConfigError):
    """An entry point of :data:`GROUP` that does not give a usable model (it fails to import, names no package, or
    its package lacks ``contract.yaml`` or ``conf/model/<name>.yaml``)."""


@dataclass(frozen=True)
class InstalledModel:
    """One model an installed distribution provides.

    ``name``: the entry point's name (the ``model=`` choice); ``distribution``: ``"<name> <version>"`` of the
    distribution declaring it; ``entry_point``: its ``name = value`` line; ``package_dir``: the folder of the model's
    package (holding ``contract.yaml``); ``conf_dir``: ``<package_dir>/conf`` (a Hydra search-path folder holding
    ``model/<name>.yaml``)."""

    name: str
    distribution: str
    entry_point: str
    package_dir: Path

    @property
    def conf_dir(self) -> Path:
        return self.package_dir / CONF_DIR


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"


def _fail(ep: importlib.metadata.EntryPoint, problem: str) -> InstalledModelError:
    dist = ep.dist.name if ep.dist is not None else "<distribution>"
    return InstalledModelError(
        f"the installed model {ep.name!r} (entry point '{ep.name} = {ep.value}' in group {GROUP!r} of "
        f"{_distribution(ep)}) {problem}. Fix the distribution and reinstall it (pip install --force-reinstall "
        f"{dist}), or uninstall it (pip uninstall {dist}); docs/adapters.md \"Adding a model\".")


def _load(ep: importlib.metadata.EntryPoint) -> InstalledModel:
    """The model of one entry point, checked: its value imports as a package holding ``contract.yaml`` and
    ``conf/model/<name>.yaml``."""
    try:
        obj = ep.load()
    except Exception as exc:  # any import failure of third-party code: reported with the distribution to blame
        raise _fail(ep, f"failed to load: {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, ModuleType) or not getattr(obj, "__path__", None):
        raise _fail(ep, f"names {obj!r}, not a package (the value is the model's package, e.g. 'my_model')")
    package_dir = Path(next(iter(obj.__path__))).resolve()
    model = InstalledModel(ep.name, _distribution(ep), f"{ep.name} = {ep.value}", package_dir)
    for need in (package_dir / CONTRACT_FILE, model.conf_dir / "model" / f"{ep.name}.yaml"):
        if not need.is_file():
            raise _fail(ep, f"has no {need.relative_to(package_dir)} in its package {package_dir}")
    _check_conf(ep, model)
    return model


#: a config file's package directive (Hydra: ``# @package <package>`` in its header comments)
_PACKAGE = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)


def _check_conf(ep: importlib.metadata.EntryPoint, model: InstalledModel) -> None:
    """The package's ``conf`` folder adds exactly the option it declares, ``model=<name>``, and that file configures
    that model only (its ``name``, when set, is the entry point's): Hydra reads every YAML file of the folder (each would be another option of some group, or a
    different config for an in-tree one), a ``# @package`` other than ``model`` would write settings outside
    ``model``, and a defaults entry with an absolute path (``/evaluate: off``, ``override /x: y``) would choose
    options of other groups."""
    import yaml

    declared = model.conf_dir / "model" / f"{model.name}.yaml"
    extra = sorted(p.relative_to(model.package_dir).as_posix() for p in model.conf_dir.rglob("*")
                   if p.suffix in (".yaml", ".yml") and p != declared)
    if extra:
        raise _fail(ep, f"has config files it does not declare in {model.conf_dir}: {', '.join(extra)} (each would "
                        f"be another option that nothing installed names); a model package adds one option, "
                        f"model={model.name} (conf/model/{model.name}.yaml): move the others out of conf/")
    text = declared.read_text(encoding="utf-8", errors="replace")
    head = "\n".join(line for line in text.splitlines()[:20] if line.lstrip().startswith("#"))
    pkg = _PACKAGE.search(head)
    if pkg is not None and pkg[1] not in ("model", "_group_"):
        raise _fail(ep, f"sets '# @package {pkg[1]}' in conf/model/{model.name}.yaml: its settings would land "
                        "outside model (its config may configure its own model only); remove that line")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _fail(ep, f"has a conf/model/{model.name}.yaml that is not YAML ({exc})") from None
    named = data.get("name") if isinstance(data, dict) else None
    if named is not None and named != model.name:
        raise _fail(ep, f"names its model {named!r} in conf/model/{model.name}.yaml (name: {named}), not the "
                        f"{model.name!r} it declares: its runs would be filed, and checked, as another model's; set "
                        f"name: {model.name}")
    defaults = data.get("defaults") if isinstance(data, dict) else None
    other = [d for d in (defaults or []) if isinstance(d, dict) and any(str(k).lstrip().startswith(("/", "override"))
                                                                         for k in d)
             or isinstance(d, str) and d.lstrip().startswith("/")]
    if other:
        raise _fail(ep, f"chooses options of other groups in the defaults of conf/model/{model.name}.yaml: {other} "
                        "(a model's config may use in-tree model bases such as _upstream_base only); remove them")


def _in_tree_models() -> set[str]:
    """The model options of the harness's own ``conf`` package (``conf/model/<name>.yaml``)."""
    import conf

    return {p.stem for p in (Path(conf.__file__).resolve().parent / "model").glob("*.yaml")}


def installed_models() -> dict[str, InstalledModel]:
    """The models of every installed distribution's :data:`GROUP` entry points, by name (sorted). Raises
    :class:`InstalledModelError` (naming the distribution and the fix) for an entry point that fails to load or
    lacks a piece, and when a model takes the name of an in-tree model or of another distribution's.

    Read once per ``sys.path`` (a scan of the installed distributions takes milliseconds and config lookups ask
    often); a distribution installed while the process runs is seen by the next process."""
    return dict(_scan(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _scan(path: tuple[str, ...]) -> dict[str, InstalledModel]:
    """:func:`installed_models` for the import path ``path`` (the cache key; the scan reads ``sys.path``)."""
    found: dict[str, InstalledModel] = {}
    in_tree = _in_tree_models()
    for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        try:
            check_name("model", ep.name)  # the rule of every name that becomes a path
        except PlanError:
            raise _fail(ep, f"has a name that is not a plain name ({NAME_RULE}): the name is the model= choice, a "
                            "config file's name and a folder of every run; rename the entry point") from None
        if ep.name in in_tree:
            raise _fail(ep, f"has the name of the in-tree model conf/model/{ep.name}.yaml; rename the entry point "
                            "(and its conf/model/<name>.yaml)")
        model = _load(ep)
        other = found.get(ep.name)
        if other is not None and other.package_dir != model.package_dir:
            raise _fail(ep, f"has the same name as the model of {other.distribution} ({other.entry_point}); "
                            "rename one entry point")
        found[ep.name] = model
    return found
