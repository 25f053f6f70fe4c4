"""Validation of a contract mapping against :mod:`adapters.contracts.schema`: the coercer that builds each section's
dataclass from its YAML (types, required keys, enumerated values, unknown keys) and :func:`contract_from_raw`, which
checks the whole mapping and returns the typed :class:`~adapters.contracts.schema.Contract`.

Every error is a :class:`~adapters.contracts.schema.ContractSchemaError` naming the model and the dotted key
(``writer.overlays[0].switch``) and what is allowed.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Any

from adapters.contracts.schema import (
    CheckpointEntry,
    Contract,
    ContractSchemaError,
    DefaultDiffers,
    Environment,
    EnvVar,
    GpuMemory,
    Gpus,
    HubFetch,
    ImportProbe,
    Intrinsics,
    License,
    SeedFact,
    Weight,
    Writer,
)

_PROVENANCE_SUFFIXES = ("_source", "_note")

#: section -> (type, required). ``env_vars``, ``seeds``, ``defaults_differ`` ... are lists of the given type.
_SECTIONS: dict[str, tuple[Any, bool]] = {
    "environment": (Environment, True), "weights": (tuple[Weight, ...], True), "env_vars": (tuple[EnvVar, ...], True),
    "hub_fetches": (tuple[HubFetch, ...], True), "writer": (Writer, True), "seeds": (tuple[SeedFact, ...], True),
    "intrinsics": (Intrinsics, True), "defaults_differ": (tuple[DefaultDiffers, ...], True), "gpus": (Gpus, True),
    "gpu_memory": (GpuMemory, True), "license": (License, True),
    "checkpoint": (tuple[CheckpointEntry, ...], True),
}
#: top-level keys that hold other facts (validated where they are used: flags by :func:`check_args`, ...)
_OTHER_KEYS = {"model", "repo", "commit", "subdir", "note", "provenance", "entry", "env", "devices", "call_sites",
               "output", "canvas", "imports", "literals", "rules", "captions", "launch_example", "hardcoded", "mode"}


def _is_provenance(key: str) -> bool:
    return isinstance(key, str) and key.endswith(_PROVENANCE_SUFFIXES)


def _coerce(tp: Any, value: Any, model: str, where: str) -> Any:
    """``value`` checked against the type hint ``tp`` (dataclasses, tuples, dicts, Optional, Any, scalars)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or origin is types.UnionType:  # Optional[X] / X | None
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, model, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build(tp, value, model, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ContractSchemaError(model, where, f"must be a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v, model, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ContractSchemaError(model, where, f"must have {len(args)} items")
        return tuple(_coerce(a, v, model, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ContractSchemaError(model, where, f"must be a mapping, got {type(value).__name__}")
        return {str(k): _coerce(args[1], v, model, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ContractSchemaError(model, where, f"must be a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ContractSchemaError(model, where, f"must be an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ContractSchemaError(model, where, f"must be true or false, got {value!r}")
        return value
    if tp is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a number written as a plain scalar in a text fact (``ours: 3``)
        if not isinstance(value, str):
            raise ContractSchemaError(model, where, f"must be text, got {type(value).__name__} {value!r}")
        return value
    raise TypeError(f"schema type {tp!r} is not modelled")  # a bug in this module, not in a contract


def _build(cls: type, data: Any, model: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise ContractSchemaError(model, where, f"must be a mapping with keys {[f.name for f in dataclasses.fields(cls)]}"
                                  f", got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields and not _is_provenance(key):
            raise ContractSchemaError(model, f"{where}.{key}", f"unknown key; allowed: {sorted(fields)} (free text goes "
                                      "under a key ending in _source or _note)")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ContractSchemaError(model, f"{where}.{name}", "required")
            continue
        kwargs[name] = _coerce(hints[name], data[name], model, f"{where}.{name}")
    obj = cls(**kwargs)
    if hasattr(obj, "check"):
        obj.check(model, where)
    for key, value in data.items():
        if _is_provenance(key) and not isinstance(value, str):
            raise ContractSchemaError(model, f"{where}.{key}", "provenance is text")
    return obj


def _check_identity(raw: Any, model: str) -> None:
    """The mapping names its model, repository and full commit, and holds only known sections."""
    if not isinstance(raw, dict):
        raise ContractSchemaError(model, "<top>", "must be a mapping")
    for key in ("model", "repo", "commit"):
        if not isinstance(raw.get(key), str) or not raw.get(key):
            raise ContractSchemaError(model, key, "required text")
    if raw["model"] != model:
        raise ContractSchemaError(model, "model", f"{raw['model']!r} is not the file's model {model!r}")
    if not re.fullmatch(r"[0-9a-f]{40}", raw["commit"]):
        raise ContractSchemaError(model, "commit", "the full 40-hex commit")
    for key in raw:
        if key not in _SECTIONS and key not in _OTHER_KEYS and not _is_provenance(key):
            raise ContractSchemaError(model, key, f"unknown section; known: {sorted({*_SECTIONS, *_OTHER_KEYS})}")


def _check_launch_facts(raw: dict[str, Any], model: str) -> None:
    """The untyped launch facts (checked where they are used) have their shape and cite upstream."""
    entry = raw.get("entry")
    if not isinstance(entry, dict) or not isinstance(entry.get("script"), str):
        raise ContractSchemaError(model, "entry.script", "required: the script command.sh runs")
    for name, spec in (entry.get("flags") or {}).items():
        if not isinstance(spec, dict) or not spec.get("source"):
            raise ContractSchemaError(model, f"entry.flags.{name}.source", "every flag cites upstream")
    for sp in entry.get("sys_path", []) or []:
        if not isinstance(sp, dict) or not {"path", "source"} <= set(sp):
            raise ContractSchemaError(model, "entry.sys_path", "items are {path, source}: folders upstream itself "
                                      "puts on sys.path (relative to the checkout)")
    for name, spec in (raw.get("env") or {}).items():
        if not isinstance(spec, dict) or not spec.get("source"):
            raise ContractSchemaError(model, f"env.{name}.source", "every variable cites upstream")
    for section in ("output", "canvas"):
        if not isinstance(raw.get(section), dict) or not raw[section].get("source"):
            raise ContractSchemaError(model, f"{section}.source", "required")


def _check_references(typed: dict[str, Any], model: str) -> None:
    """Weights and hub fetches name checkpoint keys and imports the contract defines."""
    keys = {c.key for c in typed["checkpoint"]} | {"upstream_dir"}
    for i, w in enumerate(typed["weights"]):
        if w.key is not None and w.key not in keys:
            raise ContractSchemaError(model, f"weights[{i}].key", f"{w.key!r} is not a checkpoint key ({sorted(keys)})")
    for i, h in enumerate(typed["hub_fetches"]):
        if "file" in h.avoided_by and h.avoided_by["file"][0] not in keys:
            raise ContractSchemaError(model, f"hub_fetches[{i}].avoided_by.file", f"the key must be one of {sorted(keys)}")
        if "import" in h.avoided_by and h.avoided_by["import"] not in {m.module for m in typed["imports"]}:
            raise ContractSchemaError(model, f"hub_fetches[{i}].avoided_by.import", "the module must be in imports "
                                      "(the readiness probe imports it)")


def validate(raw: dict[str, Any], model: str) -> dict[str, Any]:
    """The typed sections of a contract mapping (section name -> its dataclass or tuple of them, plus ``imports``);
    raises :class:`ContractSchemaError` naming the model and key."""
    _check_identity(raw, model)
    typed = {}
    for key, (tp, required) in _SECTIONS.items():
        if key not in raw:
            if required:
                raise ContractSchemaError(model, key, "required section")
            continue
        typed[key] = _coerce(tp, raw[key], model, key)
    _check_launch_facts(raw, model)
    typed["imports"] = tuple(ImportProbe(module=item) if isinstance(item, str) else
                             _build(ImportProbe, item, model, f"imports[{i}]")
                             for i, item in enumerate(raw.get("imports") or []))
    _check_references(typed, model)
    return typed


def contract_from_raw(raw: dict[str, Any], model: str) -> Contract:
    """The validated :class:`Contract` of a contract mapping (the parsed ``contract.yaml`` of ``model``)."""
    typed = validate(raw, model)
    entry = raw.get("entry", {})
    return Contract(model=model, repo=raw.get("repo", ""), commit=raw.get("commit", ""), entry=entry,
                    flags=entry.get("flags", {}) or {},
                    sys_path=[str(sp["path"]) for sp in entry.get("sys_path", []) or []],
                    env=raw.get("env", {}) or {}, call_sites=raw.get("call_sites", {}) or {},
                    output=raw.get("output", {}) or {}, canvas=raw.get("canvas", {}) or {},
                    literals=raw.get("literals", {}) or {}, raw=raw, **typed)
