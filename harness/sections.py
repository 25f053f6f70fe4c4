"""The one validation mechanism of the configuration: each section is a pydantic model, and one translation turns
pydantic's first problem into the project's message.

A section (``model``, ``context``, ``trajectory``, ``evaluate``, ``backend``, ...; the run's whole configuration,
:class:`harness.app.run_config.RunConfig`, is one too) is a pydantic dataclass or ``BaseModel`` that also derives
from :class:`Section`. It declares its keys, their types (literal types for words, strict types for numbers and
flags) and their bounds, and forbids unknown keys (``extra="forbid"``). Its own rules are pydantic validators; a
rule that knows its whole message raises the section's error (a :class:`harness.errors.UserError`), one that only
knows what is wrong with a value raises :class:`Invalid` and the translation adds where the value sits.

:meth:`Section.from_dict` validates a mapping (``None``: no settings, every default) and, on failure, raises the
first problem (:func:`problem`) as the section's error class with the message the user reads:

* an unknown key: ``<section>.<key>: unknown setting; did you mean '<close>'? allowed: [...]``
  (:func:`unknown_key_message`; ``field`` for the records ``model``, ``context`` and ``trajectory``);
* a bad value: ``<section>.<key>=<value>: <fix>``, the fix declared on the field (:class:`Fix`, which may name the
  field's bounds), or the section's own :attr:`Section.fix` when the section itself is not a mapping.

Problems are reported in a fixed order: unknown keys first, then each section's :attr:`Section.order` (the
declaration order unless the section names another), level by level. This module is in the bottom layer: it
imports nothing of the project but :mod:`harness.errors`, so every layer's sections derive from it.

This is the pattern of Hydra's structured configs (a typed schema checked when the config is built; see
facebookresearch/hydra ``website/docs/tutorials/structured_config``), with pydantic as the schema.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, ClassVar, Optional, TypeVar, Union

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, Field, StrictInt, Tag, TypeAdapter, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from harness.errors import ConfigError, UserError

S = TypeVar("S", bound="Section")

#: a finite number; an integer stays an integer (settings are recorded, and fingerprinted, as given)
Number = Union[StrictInt, Annotated[float, Field(strict=True, allow_inf_nan=False)]]

#: pydantic's error types for a key the section does not declare (``BaseModel``; pydantic dataclass)
_UNKNOWN = frozenset({"extra_forbidden", "unexpected_keyword_argument"})
#: pydantic's error types for a required key that is not given
_MISSING = frozenset({"missing", "missing_argument", "missing_keyword_only_argument",
                      "missing_positional_only_argument"})
#: pydantic's error types for a section that is not a mapping
_NOT_A_MAPPING = frozenset({"model_type", "dataclass_type", "dataclass_exact_type", "model_attributes_type",
                            "dict_type", "mapping_type"})


class Invalid(ValueError):
    """Raised by a section's validator: what is wrong with the value and the fix (``must be > 0``); the translation
    prefixes the key and the value (``<section>.<key>=<value>: ``), which the validator may not know."""


@dataclasses.dataclass(frozen=True)
class Fix:
    """The fix a field's message gives (field metadata: ``Annotated[int, Field(ge=1), Fix("must be >= 1")]``).

    text: the fix, or a function of the given value that returns it; ``{bounds}`` is replaced by the field's
    declared bounds (``>= 1``, ``> 0 and <= 90``). whole: ``text`` is the whole message (``{path}`` the key);
    otherwise the message is ``<path>=<value!r>: <text>``.
    """

    text: str | Callable[[Any], str]
    whole: bool = False

    def message(self, path: str, value: Any, metadata: Iterable[Any] = ()) -> str:
        text = self.text(value) if callable(self.text) else self.text
        text = text.replace("{bounds}", bounds(metadata)).replace("{path}", path)
        return text if self.whole else f"{path}={value!r}: {text}"


def bounds(metadata: Iterable[Any]) -> str:
    """``">= 1"``, ``"> 0 and <= 90"``: the bounds among a field's metadata (``annotated_types`` constraints)."""
    lo, hi = "", ""
    for m in metadata:
        if isinstance(m, Ge):
            lo = f">= {m.ge:g}"
        elif isinstance(m, Gt):
            lo = f"> {m.gt:g}"
        elif isinstance(m, Le):
            hi = f"<= {m.le:g}"
        elif isinstance(m, Lt):
            hi = f"< {m.lt:g}"
    return " and ".join(x for x in (lo, hi) if x)


def unknown_key_message(section: str, unknown: Iterable[str], allowed: Iterable[str], what: str = "",
                        noun: str = "field") -> str:
    """``"<section>.<key>: unknown <noun>[ of <what>];[ did you mean '<x>'?] allowed: [...]"`` for the first
    (sorted) of the ``unknown`` keys; the suggestion only when one of ``allowed`` is close."""
    names = sorted(allowed)
    key = sorted(str(k) for k in unknown)[0]
    close = difflib.get_close_matches(key, names, n=1)
    hint = f" did you mean {close[0]!r}?" if close else ""
    of = f" of {what}" if what else ""
    where = f"{section}.{key}" if section else key
    return f"{where}: unknown {noun}{of};{hint} allowed: {names}"


class Section:
    """The base of every configuration section (a mixin of a pydantic dataclass or ``BaseModel``).

    section: the section's dotted key (``context``, ``evaluate.judge``; ``""`` for the whole config). error: the
    class its problems are raised as. noun: what an unknown key is called (``setting``; ``field`` for records).
    fix: the message's fix when the section is not a mapping. required: the fix when a required key is missing.
    order: the keys in the order their problems are reported (default: as declared). ignored: keys read by no one
    here, dropped before validation (``description``: a line for listings). moved: keys that are no longer here,
    with what to do instead (a renamed key, one the code declares).
    """

    section: ClassVar[str] = ""
    error: ClassVar[type[UserError]] = ConfigError
    noun: ClassVar[str] = "setting"
    fix: ClassVar[str] = "give a mapping of its settings"
    required: ClassVar[str] = "set it"
    order: ClassVar[tuple[str, ...]] = ()
    ignored: ClassVar[tuple[str, ...]] = ()
    moved: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        if cls.ignored and isinstance(data, Mapping):
            return {k: v for k, v in data.items() if k not in cls.ignored}
        return data

    @classmethod
    def from_dict(cls: type[S], data: Any) -> S:
        """The section of a resolved mapping (``None``: every default; an instance: itself), validated; the first
        problem raised as :attr:`error` naming the key and the fix (:func:`problem`)."""
        if isinstance(data, cls):
            return data
        try:
            out: S = _validator(cls).validate_python({} if data is None else data)
        except ValidationError as exc:
            raise problem(cls, cls.section, exc, data) from None
        return out

    @classmethod
    def schema_type(cls) -> Any:
        """The type a mapping is validated as: the class itself (a union of kinds names its union here)."""
        return cls


_VALIDATORS: dict[type, TypeAdapter[Any]] = {}


def _validator(cls: type[Section]) -> TypeAdapter[Any]:
    """The validator of ``cls``'s sections (built once: pydantic compiles a schema)."""
    if cls not in _VALIDATORS:
        _VALIDATORS[cls] = TypeAdapter(cls.schema_type())
    return _VALIDATORS[cls]


# -- the translation ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Place:
    """Where an error's location leads: the dotted keys, the section that owns the field the error is about
    (``owner``, ``field``; no field: the section itself), the section the walk ended in (``inside``: where an
    unknown key was given), the rank of each step (:attr:`Section.order`; -1 for an unknown key) and how many
    location parts were read."""

    keys: list[str]
    owner: type[Section]
    field: Optional[FieldInfo]
    inside: type[Section]
    ranks: list[int]
    consumed: int


def problem(root: type[Section], prefix: str, exc: ValidationError, data: Any) -> UserError:
    """The first of ``exc``'s problems (unknown keys first, then :attr:`Section.order` level by level) as the
    owning section's error, with the message the user reads (module docstring). ``root`` was validated from
    ``data`` at the dotted key ``prefix``."""
    errors = exc.errors()
    places = [_locate(root, e["loc"]) for e in errors]
    i = min(range(len(errors)), key=lambda k: places[k].ranks)
    err, place = errors[i], places[i]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, UserError):  # a rule that wrote its own message
        return cause
    path = ".".join(x for x in (prefix, *place.keys) if x)
    if _unknown_key(err, place):
        same = [str(e["loc"][-1]) for e, p in zip(errors, places) if _unknown_key(e, p) and p.keys == place.keys]
        inside, first = place.inside, sorted(same)[0]
        if first in inside.moved:
            return inside.error(f"{path + '.' if path else ''}{first}: {inside.moved[first]}")
        return inside.error(unknown_key_message(path, same, _names(inside), noun=inside.noun))
    if err["type"] in _MISSING:
        return place.owner.error(f"{path}: required; {place.owner.required}")
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):  # a kind's name (``context.name=lru``)
        ctx = err.get("ctx") or {}
        key = str(ctx.get("discriminator", "name")).strip("'")
        return place.inside.error(f"{path}.{key}={ctx.get('tag')!r}: use one of "
                                  f"{[t.strip(chr(39)) for t in str(ctx.get('expected_tags', '')).split(', ')]}")
    value = _value_at(data, place.keys, err)
    return place.owner.error(_value_message(place, err, path, value, cause))


def _unknown_key(err: ErrorDetails, place: _Place) -> bool:
    """Whether ``err`` is about a key its section does not have: its type says so, and the walk stopped at it."""
    return err["type"] in _UNKNOWN and place.consumed == len(err["loc"]) - 1


def _value_message(place: _Place, err: ErrorDetails, path: str, value: Any, cause: Any) -> str:
    """``<path>=<value!r>: <fix>`` (or the field's whole message) for a value error at ``place``; a whole config
    that is no mapping (API use) is named ``config``."""
    path = path or "config"
    if isinstance(cause, Invalid):
        return f"{path}={value!r}: {cause}"
    field = place.field
    fix = next((m for m in field.metadata if isinstance(m, Fix)), None) if field is not None else None
    if fix is not None and field is not None:
        return fix.message(path, value, field.metadata)
    sub = _section_of(field.annotation) if field is not None else place.owner
    if sub is not None and err["type"] in _NOT_A_MAPPING:
        return f"{path}={value!r}: {sub.fix}"
    return f"{path}={value!r}: {err['msg']}"


def _value_at(data: Any, keys: list[str], err: ErrorDetails) -> Any:
    """The value the user gave at ``keys`` in ``data`` (pydantic's input when it cannot be found)."""
    node = data
    for k in keys:
        if not isinstance(node, Mapping) or k not in node:
            return err.get("input")
        node = node[k]
    return node


def _locate(root: type[Section], loc: tuple[int | str, ...]) -> _Place:
    """Follow ``loc`` through the sections' fields (a union's tag picks its member; a mapping of sections is
    entered by key), as far as it leads to a section's field."""
    place = _Place([], root, None, root, [], 0)
    tp: Any = root.schema_type()
    for n, part in enumerate(loc):
        tp = _strip(tp)
        sec = _section_of(tp)
        if sec is not None and not isinstance(tp, type):  # a union of sections: its tag names the member
            member = _member(tp, part)
            if member is None:
                break
            tp, place.consumed = member, n + 1
            continue
        if sec is not None:
            place.inside = sec
            fields = _fields(sec)
            if part not in fields:
                place.ranks.append(-1)  # an unknown key: reported first at its level
                break
            place.owner, place.field = sec, fields[str(part)]
            place.keys.append(str(part))
            place.ranks.append(_order(sec).index(str(part)))
            tp, place.consumed = place.field.annotation, n + 1
            continue
        value = _mapping_value(tp)
        if value is None or _section_of(value) is None:
            break  # a value, a list or a mapping of values: the field itself is the place
        place.keys.append(str(part))
        tp, place.consumed = value, n + 1
    return place


def _strip(tp: Any) -> Any:
    """``tp`` without ``Annotated`` and ``Optional``."""
    while True:
        if typing.get_origin(tp) is Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if typing.get_origin(tp) in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp


def _section_of(tp: Any) -> Optional[type[Section]]:
    """The section class ``tp`` is (or the base of the sections a union of them holds); None for a value."""
    tp = _strip(tp)
    if isinstance(tp, type) and issubclass(tp, Section):
        return tp
    if typing.get_origin(tp) in (Union, types.UnionType):
        members = [_section_of(a) for a in typing.get_args(tp)]
        if members and all(m is not None for m in members):
            return members[0]
    return None


def _member(tp: Any, tag: int | str) -> Any:
    """The member of a union of sections that pydantic's location part ``tag`` names (a discriminator's value, the
    member's ``Tag``, or its class name)."""
    for m in typing.get_args(tp):
        cls = _section_of(m)
        if cls is None:
            continue
        tags = [t.tag for t in typing.get_args(m)[1:] if isinstance(t, Tag)] if typing.get_origin(m) is Annotated else []
        if tag == cls.__name__ or tag in _tags(cls) or tag in tags:
            return cls
    return None


def _tags(cls: type[Section]) -> tuple[Any, ...]:
    """The literal values of ``cls``'s ``name`` field (the discriminator of a union of kinds)."""
    f = _fields(cls).get("name")
    ann = _strip(f.annotation) if f is not None else None
    return typing.get_args(ann) if typing.get_origin(ann) is typing.Literal else ()


def _mapping_value(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return typing.get_args(tp)[1]
    return None


def _fields(cls: type[Section]) -> dict[str, FieldInfo]:
    """A section's fields by key (an alias, e.g. ``print``, under its alias)."""
    raw: dict[str, FieldInfo] = (cls.model_fields if issubclass(cls, BaseModel)
                                 else getattr(cls, "__pydantic_fields__", {}))
    return {(f.alias or name): f for name, f in raw.items()}


def _names(cls: type[Section]) -> list[str]:
    return list(_fields(cls))


def _order(cls: type[Section]) -> list[str]:
    declared = _names(cls)
    return [*(k for k in cls.order if k in declared), *(k for k in declared if k not in cls.order)]
