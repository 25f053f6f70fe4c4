"""Validation of a contract mapping against :mod:`adapters.contracts.schema`: pydantic (the project's config
validation, as :class:`harness.app.run_config.RunConfig`) builds each section's dataclass from its YAML (strict types,
required keys, unknown keys refused), each section's ``check`` its invariants, and :func:`contract_from_raw` checks the
whole mapping and returns the typed :class:`~adapters.contracts.schema.Contract`.

Every error is a :class:`~adapters.contracts.schema.ContractSchemaError` naming the model and the dotted key
(``writer.overlays[0].switch``) and what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from adapters.contracts.schema import (
    CheckpointEntry,
    Contract,
    ContractSchemaError,
    DayOne,
    DefaultDiffers,
    Environment,
    EnvVar,
    GpuMemory,
    Gpus,
    HubFetch,
    ImportProbe,
    Intrinsics,
    License,
    Policies,
    RegimeCaveat,
    SeedFact,
    Weight,
    Writer,
    file_name,
)

_PROVENANCE_SUFFIXES = ("_source", "_note")

#: section -> (type, required). ``env_vars``, ``seeds``, ``defaults_differ`` ... are lists of the given type.
_SECTIONS: dict[str, tuple[Any, bool]] = {
    "environment": (Environment, True), "weights": (tuple[Weight, ...], True), "env_vars": (tuple[EnvVar, ...], True),
    "hub_fetches": (tuple[HubFetch, ...], True), "writer": (Writer, True), "seeds": (tuple[SeedFact, ...], True),
    "intrinsics": (Intrinsics, True), "defaults_differ": (tuple[DefaultDiffers, ...], True), "gpus": (Gpus, True),
    "gpu_memory": (GpuMemory, True), "license": (License, True),
    "checkpoint": (tuple[CheckpointEntry, ...], True),
    "policies": (Policies, True), "trained_regime": (tuple[RegimeCaveat, ...], True), "day_one": (DayOne, True),
}
#: top-level keys that hold other facts (validated where they are used: flags by :func:`check_args`, ...)
_OTHER_KEYS = {"model", "repo", "commit", "subdir", "note", "provenance", "entry", "env", "devices", "call_sites",
               "output", "canvas", "imports", "literals", "rules", "captions", "launch_example", "hardcoded", "mode"}


def _is_provenance(key: str) -> bool:
    return isinstance(key, str) and key.endswith(_PROVENANCE_SUFFIXES)


def _type_at(tp: Any, loc: tuple[int | str, ...]) -> Any:
    """The type hint reached from ``tp`` along a pydantic error location (fields, list items, mapping values)."""
    for part in loc:
        tp = _unwrap_optional(tp)
        if dataclasses.is_dataclass(tp):  # a type hint: a dataclass is a class here, never an instance
            tp = typing.get_type_hints(tp)[str(part)]
        elif typing.get_origin(tp) is tuple:
            args = typing.get_args(tp)
            tp = args[0] if args[1:] == (Ellipsis,) else args[int(part)]
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
    return _unwrap_optional(tp)


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(tp) if a is not type(None))
    return tp


def _problem(tp: Any, err: ErrorDetails) -> tuple[tuple[int | str, ...], str]:
    """(location, problem) of a pydantic error in the words of this module (what the fact must be)."""
    loc, value, kind = err["loc"], err["input"], err["type"]
    got = f"got {type(value).__name__}"
    if kind == "unexpected_keyword_argument":
        allowed = sorted(f.name for f in dataclasses.fields(_type_at(tp, loc[:-1])))
        return loc, f"unknown key; allowed: {allowed} (free text goes under a key ending in _source or _note)"
    if kind == "missing" and isinstance(loc[-1], int):  # a fixed-length tuple given too few items
        return loc[:-1], f"must have {len(typing.get_args(_type_at(tp, loc[:-1])))} items"
    messages = {"missing": "required", "string_type": f"must be text, {got} {value!r}",
                "float_type": f"must be a number, got {value!r}", "int_type": f"must be an integer, got {value!r}",
                "bool_type": f"must be true or false, got {value!r}", "tuple_type": f"must be a list, {got}",
                "too_long": f"must have {err.get('ctx', {}).get('max_length')} items",
                "dict_type": f"must be a mapping, {got}"}
    if kind == "dataclass_type":
        keys = [f.name for f in dataclasses.fields(_type_at(tp, loc))]
        return loc, f"must be a mapping with keys {keys}, {got}"
    return loc, messages.get(kind, err["msg"])


def _where(where: str, loc: tuple[int | str, ...]) -> str:
    return where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


@functools.cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    """pydantic's validator of ``tp`` (wrapped in a 1-tuple: a dataclass cannot take a config of its own here).
    Unknown keys are refused (``extra="forbid"``); validated as strict JSON, so no scalar is coerced (``"1"`` is not a
    number, ``1`` is not true) while YAML lists fill tuples and integers fill floats, as the schema intends."""
    return TypeAdapter(tuple[tp], config=ConfigDict(extra="forbid"))


def _plain(value: Any, model: str, where: str) -> Any:
    """``value`` as JSON data for pydantic (mapping keys as text: YAML's ``1:`` is the key ``"1"``); a YAML date,
    binary or set is no contract fact and is refused at its key."""
    if isinstance(value, dict):
        return {str(k): _plain(v, model, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, model, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (str, int, float)):  # bool is an int
        return value
    raise ContractSchemaError(model, where, "must be text, a number, true/false, a list or a mapping, got "
                              f"{type(value).__name__} {value!r}")


def _typed(tp: Any, value: Any, model: str, where: str) -> Any:
    """``value`` (YAML data) validated by pydantic as the type hint ``tp`` (schema dataclasses, tuples, dicts, Optional,
    Any, scalars), then each dataclass's own ``check``. Two YAML habits are accepted: a number in a text fact
    (``ours: 3`` is ``"3"``) and free-text provenance beside a fact (a key ending in ``_source`` or ``_note``, which must
    be text); every other error becomes a :class:`ContractSchemaError` at the dotted key."""
    data: Any = [_plain(value, model, where)]
    while True:
        try:
            (obj,) = _adapter(tp).validate_json(json.dumps(data), strict=True)
            break
        except ValidationError as exc:
            errors = sorted(exc.errors(), key=lambda e: e["type"] != "unexpected_keyword_argument")  # typos first
            patched = False
            for err in errors:
                loc, value_ = err["loc"], err["input"]
                parent: Any = functools.reduce(lambda d, k: d[k], loc[:-1], data)
                if err["type"] == "string_type" and isinstance(value_, (int, float)) and not isinstance(value_, bool):
                    parent[loc[-1]], patched = str(value_), True  # a number written as a plain scalar in a text fact
                elif err["type"] == "unexpected_keyword_argument" and _is_provenance(str(loc[-1])):
                    if not isinstance(value_, str):
                        raise ContractSchemaError(model, _where(where, loc[1:]), "provenance is text") from None
                    del parent[loc[-1]]
                    patched = True
            if not patched:
                loc, problem = _problem(tuple[tp], errors[0])
                raise ContractSchemaError(model, _where(where, loc[1:]), problem) from None
    _check(obj, model, where)
    return obj


def _check(obj: Any, model: str, where: str) -> None:
    """Each dataclass's ``check`` (the invariants across its fields), innermost first, in field order. ``obj`` is
    pydantic's output (instances and tuples of them, never a class)."""
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            _check(getattr(obj, f.name), model, f"{where}.{f.name}")
        if hasattr(obj, "check"):
            obj.check(model, where)
    elif isinstance(obj, tuple):
        for i, item in enumerate(obj):
            _check(item, model, f"{where}[{i}]")


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
    for i, e in enumerate(typed["checkpoint"]):
        names = {file_name(p) for p in e.files} | {
            file_name(p) for w in typed["weights"] if w.key == e.key for p in (*w.files, *([w.file] if w.file else []))}
        for n in e.hub_confirmed:
            if n not in names:
                raise ContractSchemaError(model, f"checkpoint[{i}].hub_confirmed", f"{n!r} is no file name of this "
                                          f"entry or of a weight under {e.key!r} ({sorted(x for x in names if x)})")
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
        typed[key] = _typed(tp, raw[key], model, key)
    _check_launch_facts(raw, model)
    typed["imports"] = tuple(ImportProbe(module=item) if isinstance(item, str) else
                             _typed(ImportProbe, item, model, f"imports[{i}]")
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
                    output=raw["output"], canvas=raw["canvas"],  # mappings: _check_launch_facts
                    literals=raw.get("literals", {}) or {}, raw=raw, **typed)
