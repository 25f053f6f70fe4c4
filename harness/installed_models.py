"""Model packages: every model is a package holding its Hydra config as ``conf/model/<model>.yaml``.

Two kinds, one route. An **in-tree** model is a folder of the harness's ``adapters`` package, ``adapters/<model>/``;
an **installed** model is a package an installed distribution declares in the ``worldmem_harness.models``
entry-point group, one entry point per model, named after the model, whose value is the model's package::

    [project.entry-points."worldmem_harness.models"]
    toy_wm = "toy_world_model"

Either package holds what a model is (its adapter, controls, runner shim, ``contract.yaml`` for an upstream model)
plus ``conf/model/<model>.yaml``. From there both kinds are the same: :func:`model_packages` lists them as
:class:`ModelPackage` records, each checked by :func:`_check_conf` (its ``conf`` folder adds exactly the option it
declares, ``model=<model>``); the harness adds each package's ``conf`` folder to the config search path
(``hydra_plugins/worldmem_models``, :func:`harness.config_groups.search_dirs`), so ``model=<model>``, ``python -m
harness list`` and :func:`harness.config_groups.group_yaml` find an in-tree and an installed model alike; the contract
is read from the package (:func:`adapters.contracts.contract_path`). Shared bases that are not models
(``_upstream_base``) stay in the ``conf`` package's ``model`` group. docs/adapters.md "Adding a model".

The entry-point convention is nerfstudio's (nerfstudio-project/nerfstudio@50e0e3c nerfstudio/plugins/registry.py:
methods are discovered with ``importlib.metadata.entry_points(group="nerfstudio.method_configs")``, one entry point
per method, declared under ``[project.entry-points.'nerfstudio.method_configs']``, docs/developer_guides/
new_methods.md); here an entry point names a package rather than a config object, because a model's config is a YAML
file Hydra composes. In-tree models need no entry point: the folders of ``adapters/`` are found from the source tree
(nothing is imported), so a checkout run with ``PYTHONPATH`` and a stale editable install list the same models.

Loading an entry point imports the model's package (its ``__init__``), never its adapter: keep ``__init__`` light
(no torch), as every ``python -m harness`` command reads the list.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
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
#: the package whose folders are the in-tree models, and the ``distribution`` of their records
IN_TREE_PACKAGE = "adapters"
IN_TREE = "worldmem-harness (in-tree)"


class InstalledModelError(ConfigError):
    """A model package that does not give a usable model: an entry point of :data:`GROUP` that fails to import or
    names no package, or a package (installed or in-tree) that lacks ``conf/model/<name>.yaml`` (an installed one:
    ``contract.yaml``) or whose ``conf`` folder adds more than its model."""


@dataclass(frozen=True)
class ModelPackage:
    """One model: the package that holds it.

    ``name``: the ``model=`` choice (an entry point's name, an in-tree folder's name); ``distribution``:
    ``"<name> <version>"`` of the distribution declaring it, or :data:`IN_TREE`; ``entry_point``: its ``name =
    value`` line (``""`` in-tree); ``package_dir``: the folder of the model's package (holding ``contract.yaml`` for
    an upstream model); ``conf_dir``: ``<package_dir>/conf`` (a Hydra search-path folder holding
    ``model/<name>.yaml``)."""

    name: str
    distribution: str
    entry_point: str
    package_dir: Path

    @property
    def conf_dir(self) -> Path:
        return self.package_dir / CONF_DIR

    @property
    def config_file(self) -> Path:
        """``<package_dir>/conf/model/<name>.yaml``: the model's Hydra config."""
        return self.conf_dir / "model" / f"{self.name}.yaml"

    @property
    def in_tree(self) -> bool:
        return self.distribution == IN_TREE


#: the name the installed kind had before in-tree models were packages too (kept for callers)
InstalledModel = ModelPackage


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"


def _fail(ep: importlib.metadata.EntryPoint, problem: str) -> InstalledModelError:
    dist = ep.dist.name if ep.dist is not None else "<distribution>"
    return InstalledModelError(
        f"the installed model {ep.name!r} (entry point '{ep.name} = {ep.value}' in group {GROUP!r} of "
        f"{_distribution(ep)}) {problem}. Fix the distribution and reinstall it (pip install --force-reinstall "
        f"{dist}), or uninstall it (pip uninstall {dist}); docs/adapters.md \"Adding a model\".")


def _refuse(model: ModelPackage, problem: str, ep: importlib.metadata.EntryPoint | None = None) -> InstalledModelError:
    """The error of a model package: an installed one names its entry point and distribution (:func:`_fail`), an
    in-tree one its folder."""
    if ep is not None:
        return _fail(ep, problem)
    return InstalledModelError(f"the in-tree model {model.name!r} ({model.package_dir}) {problem}; fix that folder "
                               "(docs/adapters.md \"Adding a model\")")


def _load(ep: importlib.metadata.EntryPoint) -> ModelPackage:
    """The model of one entry point, checked: its value imports as a package holding ``contract.yaml`` and
    ``conf/model/<name>.yaml``."""
    try:
        obj = ep.load()
    except Exception as exc:  # any import failure of third-party code: reported with the distribution to blame
        raise _fail(ep, f"failed to load: {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, ModuleType) or not getattr(obj, "__path__", None):
        raise _fail(ep, f"names {obj!r}, not a package (the value is the model's package, e.g. 'my_model')")
    package_dir = Path(next(iter(obj.__path__))).resolve()
    model = ModelPackage(ep.name, _distribution(ep), f"{ep.name} = {ep.value}", package_dir)
    for need in (package_dir / CONTRACT_FILE, model.config_file):
        if not need.is_file():
            raise _fail(ep, f"has no {need.relative_to(package_dir)} in its package {package_dir}")
    _check_conf(model, ep)
    return model


#: a config file's package directive (Hydra: ``# @package <package>`` in its header comments)
_PACKAGE = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)


def _check_conf(model: ModelPackage, ep: importlib.metadata.EntryPoint | None = None) -> None:
    """The package's ``conf`` folder adds exactly the option it declares, ``model=<name>``, and that file configures
    that model only (its ``name``, when set, is the package's): Hydra reads every YAML file of the folder (each would
    be another option of some group, or a different config for another model), a ``# @package`` other than
    ``model`` would write settings outside ``model``, and a defaults entry with an absolute path (``/evaluate:
    off``, ``override /x: y``) would choose options of other groups. ``ep``: the entry point of an installed model
    (named in the error)."""
    import yaml

    def fail(problem: str) -> InstalledModelError:
        return _refuse(model, problem, ep)

    declared, file = model.config_file, f"conf/model/{model.name}.yaml"
    extra = sorted(p.relative_to(model.package_dir).as_posix() for p in model.conf_dir.rglob("*")
                   if p.suffix in (".yaml", ".yml") and p != declared)
    if extra:
        raise fail(f"has config files it does not declare in {model.conf_dir}: {', '.join(extra)} (each would be "
                   f"another option that no model package names); a model package adds one option, "
                   f"model={model.name} ({file}): move the others out of conf/")
    text = declared.read_text(encoding="utf-8", errors="replace")
    head = "\n".join(line for line in text.splitlines()[:20] if line.lstrip().startswith("#"))
    pkg = _PACKAGE.search(head)
    if pkg is not None and pkg[1] not in ("model", "_group_"):
        raise fail(f"sets '# @package {pkg[1]}' in {file}: its settings would land outside model (its config may "
                   "configure its own model only); remove that line")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise fail(f"has a {file} that is not YAML ({exc})") from None
    named = data.get("name") if isinstance(data, dict) else None
    if named is not None and named != model.name:
        raise fail(f"names its model {named!r} in {file} (name: {named}), not the {model.name!r} it declares: its "
                   f"runs would be filed, and checked, as another model's; set name: {model.name}")
    defaults = data.get("defaults") if isinstance(data, dict) else None
    other = [d for d in (defaults or []) if isinstance(d, dict) and any(str(k).lstrip().startswith(("/", "override"))
                                                                         for k in d)
             or isinstance(d, str) and d.lstrip().startswith("/")]
    if other:
        raise fail(f"chooses options of other groups in the defaults of {file}: {other} (a model's config may use "
                   "the model group's shared bases such as _upstream_base only); remove them")


def in_tree_dir() -> Path:
    """The folder of the harness's ``adapters`` package, found without importing it (this module sits below the
    adapters layer)."""
    spec = importlib.util.find_spec(IN_TREE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InstalledModelError(f"the harness's {IN_TREE_PACKAGE!r} package is not importable; reinstall the "
                                  "harness (pip install -e .)")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


@functools.lru_cache(maxsize=4)
def _in_tree(root: Path) -> dict[str, ModelPackage]:
    """The in-tree models under ``root``: every folder holding a ``conf`` folder is a model package named after the
    folder, checked like an installed one (:func:`_check_conf`)."""
    found: dict[str, ModelPackage] = {}
    for d in sorted(root.iterdir()):
        if not (d / CONF_DIR).is_dir() or d.name.startswith(("_", ".")):
            continue
        model = ModelPackage(d.name, IN_TREE, "", d)
        try:
            check_name("model", d.name)
        except PlanError:
            raise _refuse(model, f"is not a plain name ({NAME_RULE}): rename the folder") from None
        if not model.config_file.is_file():
            raise _refuse(model, f"has a conf folder without conf/model/{d.name}.yaml (a model folder's config is "
                                 "named after the folder)")
        _check_conf(model)
        found[d.name] = model
    return found


def in_tree_models() -> dict[str, ModelPackage]:
    """The harness's own models: the folders of ``adapters/`` that hold ``conf/model/<folder>.yaml``, by name."""
    return dict(_in_tree(in_tree_dir()))


def model_packages() -> dict[str, ModelPackage]:
    """Every model, in-tree and installed (:func:`installed_models`), by name (sorted): the one list the config
    search path, ``python -m harness list`` and the config readers follow."""
    return dict(sorted({**in_tree_models(), **installed_models()}.items()))


def installed_models() -> dict[str, ModelPackage]:
    """The models of every installed distribution's :data:`GROUP` entry points, by name (sorted). Raises
    :class:`InstalledModelError` (naming the distribution and the fix) for an entry point that fails to load or
    lacks a piece, and when a model takes the name of an in-tree model or of another distribution's.

    Read once per ``sys.path`` (a scan of the installed distributions takes milliseconds and config lookups ask
    often); a distribution installed while the process runs is seen by the next process."""
    return dict(_scan(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _scan(path: tuple[str, ...]) -> dict[str, ModelPackage]:
    """:func:`installed_models` for the import path ``path`` (the cache key; the scan reads ``sys.path``)."""
    found: dict[str, ModelPackage] = {}
    in_tree = in_tree_models()
    for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        try:
            check_name("model", ep.name)  # the rule of every name that becomes a path
        except PlanError:
            raise _fail(ep, f"has a name that is not a plain name ({NAME_RULE}): the name is the model= choice, a "
                            "config file's name and a folder of every run; rename the entry point") from None
        if ep.name in in_tree:
            raise _fail(ep, f"has the name of the in-tree model {in_tree[ep.name].config_file}; rename the entry "
                            "point (and its conf/model/<name>.yaml)")
        model = _load(ep)
        other = found.get(ep.name)
        if other is not None and other.package_dir != model.package_dir:
            raise _fail(ep, f"has the same name as the model of {other.distribution} ({other.entry_point}); "
                            "rename one entry point")
        found[ep.name] = model
    return found
