"""Where contracts live and how they are loaded: ``adapters/<model>/contract.yaml``, one file in each upstream model's
own folder, beside its adapter, controls and runner shim.

The folders that hold a ``contract.yaml`` *are* the list of upstream models (:func:`available`); nothing lists them
by hand. A model from outside this repository is either a package an installed distribution declares in the
``worldmem_harness.models`` entry-point group (:mod:`harness.installed_models`; listed by :func:`available`) or a
top-level package named after the model, importable on ``sys.path``; either holds its ``contract.yaml`` beside its
adapter (:func:`contract_path`; docs/adapters.md "Adding a model").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from adapters.contracts.schema import Contract
from adapters.contracts.validation import contract_from_raw
from harness.installed_models import installed_models

#: the folder of the model packages (``adapters/``): ``<ADAPTERS_DIR>/<model>/contract.yaml``
ADAPTERS_DIR = Path(__file__).resolve().parent.parent
CONTRACT_FILE = "contract.yaml"


def available(directory: Path | None = None) -> list[str]:
    """The upstream models: names of the folders of ``directory`` (default ``adapters/``) that hold a contract; without
    ``directory``, also the models of installed distributions (:func:`harness.installed_models.installed_models`,
    which refuses one named like an in-tree model)."""
    in_tree = sorted(p.parent.name for p in Path(directory or ADAPTERS_DIR).glob(f"*/{CONTRACT_FILE}"))
    if directory is not None:
        return in_tree
    return sorted([*in_tree, *installed_models()])


def _package_dir(model: str) -> Path | None:
    """The folder of the top-level package ``model`` when one is importable (nothing is imported), else None."""
    if not model.isidentifier():
        return None
    try:
        spec = importlib.util.find_spec(model)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def contract_path(model: str, directory: Path | None = None) -> Path:
    """``<directory>/<model>/contract.yaml`` (default directory ``adapters/``); without ``directory``, a model that
    has no folder there may be an installed model (its package's ``contract.yaml``) or a top-level package of that
    name holding ``contract.yaml`` (an out-of-tree model).
    Returns the in-tree path when neither exists (the caller reports it)."""
    path = Path(directory or ADAPTERS_DIR) / model / CONTRACT_FILE
    if directory is None and not path.is_file():
        installed = installed_models().get(model)
        if installed is not None:
            return installed.package_dir / CONTRACT_FILE
        pkg = _package_dir(model)
        if pkg is not None and (pkg / CONTRACT_FILE).is_file():
            return pkg / CONTRACT_FILE
    return path


def load(model: str, directory: Path | None = None) -> Contract:
    """The validated contract of ``model`` (:func:`contract_path`). Raises :class:`FileNotFoundError` when there is
    none and :class:`~adapters.contracts.schema.ContractSchemaError` (naming the model and key) when a section
    breaks the schema. Cached by path and modification time."""
    path = contract_path(model, directory)
    if not path.is_file():
        raise FileNotFoundError(f"no upstream contract for model {model!r} ({path}); available: {available(directory)}")
    key = (str(path), path.stat().st_mtime_ns)
    hit = _LOADED.get(key)
    if hit is None:
        raw = yaml.safe_load(path.read_text()) or {}
        hit = _LOADED[key] = contract_from_raw(raw, model)
    return hit


_LOADED: dict[tuple[str, int], Contract] = {}
