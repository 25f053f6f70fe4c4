"""The rules of harness/sections.py (the typed sections of the configuration and the one-line errors that name the
key and the fix), one at a time and in this process: each test validates a mapping against a few small sections
declared here the way the project's sections are (pydantic dataclasses and a ``BaseModel``, ``extra="forbid"``)."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal, get_args

import pytest
from annotated_types import Ge, Gt, Le, Lt
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictInt,
    StrictStr,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError, UserError
from harness.sections import (
    Fix,
    Invalid,
    Number,
    Section,
    _mapping_value,
    _member,
    _section_of,
    _strip,
    bounds,
    unknown_key_message,
)

_CFG = ConfigDict(extra="forbid")


class InnerError(ConfigError):
    """The error class of :class:`Inner` (a section raises its own class)."""


class KindError(ConfigError):
    """The error class of the kinds."""


@dataclass(frozen=True, config=_CFG)
class Inner(Section):
    section: ClassVar[str] = "outer.inner"
    error: ClassVar[type[UserError]] = InnerError
    fix: ClassVar[str] = "give the inner settings"
    moved: ClassVar[dict[str, str]] = {"old": "renamed to 'n'"}

    n: Annotated[int, Field(strict=True, ge=1), Fix("must be an integer {bounds}")] = 1
    rate: Annotated[Number, Gt(0), Le(90)] = 1.0
    tags: tuple[StrictStr, ...] = ()

    @model_validator(mode="after")
    def _not_seven_twice(self) -> Inner:
        if self.n == 7 and self.rate == 7:
            raise ValueError("seven twice")
        return self


@dataclass(frozen=True, config=_CFG)
class KindA(Section):
    section: ClassVar[str] = "kind"
    error: ClassVar[type[UserError]] = KindError
    noun: ClassVar[str] = "field"

    name: Literal["a"] = "a"
    size: StrictInt = 0


@dataclass(frozen=True, config=_CFG)
class KindB(Section):
    section: ClassVar[str] = "kind"
    error: ClassVar[type[UserError]] = KindError

    name: Literal["b"] = "b"
    depth: StrictInt = 0


class Deeper(BaseModel):
    model_config = _CFG
    k: int = 0


class Plain(BaseModel):
    """A pydantic model that is no section (its problems are reported at the field holding it)."""

    model_config = _CFG
    deep: Deeper | None = None


def _kind_tag(value: Any) -> str:
    return "one" if isinstance(value, Mapping) and value.get("name", "a") == "a" else "two"


#: a union whose members carry a ``Tag`` (the tag is no class name and no ``name``)
Tagged = Annotated[Annotated[KindA, Tag("one")] | Annotated[KindB, Tag("two")], Discriminator(_kind_tag)]


def _count(value: Any) -> Any:
    """``conv: 3`` means ``{n: 3}``; ``conv: {count: 3}`` too."""
    if isinstance(value, int):
        return {"n": value}
    return {"n": value["count"]} if isinstance(value, dict) and "count" in value else value


def _odd(value: Any) -> Any:
    if isinstance(value, int) and value % 2 == 0:
        raise Invalid("must be odd")
    return value


@dataclass(frozen=True, config=_CFG)
class Outer(Section):
    section: ClassVar[str] = "outer"
    ignored: ClassVar[tuple[str, ...]] = ("description",)
    required: ClassVar[str] = "name the run"
    order: ClassVar[tuple[str, ...]] = ("zeta", "alpha", "nowhere")

    run: StrictStr
    alpha: Annotated[int, Field(strict=True, ge=0), Fix(lambda v: f"got {type(v).__name__}, need {{bounds}}")] = 0
    zeta: Annotated[int, Field(strict=True), Fix("{path} is wrong", whole=True)] = 0
    beta: StrictInt = 0
    odd: StrictInt = 1
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None
    inners: dict[str, Inner] = field(default_factory=dict)
    counts: dict[str, StrictInt] = field(default_factory=dict)
    kind: KindA | KindB = field(default_factory=KindA)
    picked: Annotated[KindA | KindB, Field(discriminator="name")] = field(default_factory=KindA)
    tagged: Tagged = field(default_factory=KindA)
    plain: Plain = field(default_factory=Plain)
    printed: StrictStr = Field("", alias="print")
    conv: Annotated[Inner, BeforeValidator(_count)] = field(default_factory=Inner)

    @field_validator("odd")
    @classmethod
    def _odd_only(cls, v: int) -> int:
        return _odd(v)

    @field_validator("beta")
    @classmethod
    def _beta_rule(cls, v: int) -> int:
        if v < 0:
            raise ConfigError(f"outer.beta: a rule's own message ({v})")
        return v


class Record(Section, BaseModel):
    """A ``BaseModel`` section."""

    model_config = _CFG
    noun: ClassVar[str] = "field"

    x: StrictInt = 0
    y: StrictInt = 0
    w: Number = 0


def typing_args_of(tp: Any) -> Any:
    """The union inside ``Annotated[Union[...], ...]``."""
    return get_args(tp)[0]


def _error(cls: type[Section], data: Any, error: type[UserError] = ConfigError) -> str:
    with pytest.raises(error) as err:
        cls.from_dict(data)
    return str(err.value)


# -- Number ---------------------------------------------------------------------------------------------------------
def test_a_number_keeps_an_integer_an_integer_and_a_float_a_float():
    one, half = Inner.from_dict({"rate": 2}), Inner.from_dict({"rate": 0.5})
    assert type(one.rate) is int and one.rate == 2 and type(half.rate) is float and half.rate == 0.5


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_number_without_bounds_is_still_finite(value):
    assert _error(Record, {"w": value}).startswith(f"w={value!r}: ")


@pytest.mark.parametrize("value", [math.inf, math.nan, "2.5", True])
def test_a_number_is_finite_and_never_a_string_or_a_flag(value):
    assert _error(Inner, {"rate": value}, InnerError).startswith(f"outer.inner.rate={value!r}: ")


# -- Fix and bounds -------------------------------------------------------------------------------------------------
def test_a_fix_is_prefixed_with_the_key_and_the_value_unless_it_is_the_whole_message():
    assert Fix("must be odd").message("a.b", 4) == "a.b=4: must be odd"
    assert Fix("{path}: off", whole=True).message("a.b", 4) == "a.b: off"
    assert Fix(lambda v: f"not {v * 2}").message("k", 3) == "k=3: not 6"
    assert Fix("must be {bounds}").message("k", "x", [Ge(1), Lt(2)]) == "k='x': must be >= 1 and < 2"


@pytest.mark.parametrize("metadata, text", [
    ([], ""), ([Ge(1)], ">= 1"), ([Gt(0)], "> 0"), ([Le(90)], "<= 90"), ([Lt(0.5)], "< 0.5"),
    ([Gt(0), Le(90)], "> 0 and <= 90"), ([Le(2), Ge(1.5)], ">= 1.5 and <= 2"), (["other", Ge(0)], ">= 0"),
])
def test_bounds_name_the_lower_then_the_upper_bound(metadata, text):
    assert bounds(metadata) == text


# -- unknown_key_message --------------------------------------------------------------------------------------------
def test_an_unknown_key_names_the_first_sorted_key_a_close_allowed_key_and_every_allowed_key():
    assert unknown_key_message("ctx", ["zzz", "chunc"], ["sink", "chunk"]) == \
        "ctx.chunc: unknown field; did you mean 'chunk'? allowed: ['chunk', 'sink']"


def test_an_unknown_key_without_a_close_one_or_a_section_gives_no_hint_and_no_prefix():
    assert unknown_key_message("", ["qqq"], ["b", "a"], what="the judge", noun="setting") == \
        "qqq: unknown setting of the judge; allowed: ['a', 'b']"


# -- from_dict ------------------------------------------------------------------------------------------------------
def test_none_gives_every_default_and_an_instance_is_returned_as_it_is():
    inner = Inner.from_dict(None)
    assert type(inner) is Inner and (inner.n, inner.rate, inner.tags) == (1, 1.0, ())
    assert Inner.from_dict(inner) is inner
    assert type(Inner.from_dict({})) is Inner and Record.from_dict({"x": 2}).x == 2


def test_an_ignored_key_is_dropped_and_the_others_are_kept():
    out = Outer.from_dict({"run": "r", "description": "a line", "alpha": 3})
    assert (out.run, out.alpha) == ("r", 3)
    assert _error(Inner, {"description": "x"}, InnerError).startswith("outer.inner.description: unknown setting")


def test_a_dataclass_section_takes_a_dict_and_no_other_mapping():
    assert _error(Inner, MappingProxyType({"n": 2}), InnerError) == \
        "outer.inner=mappingproxy({'n': 2}): give the inner settings"


def test_a_section_that_is_not_a_mapping_gives_its_own_fix():
    assert _error(Outer, ["run"]) == "outer=['run']: give a mapping of its settings"
    assert _error(Inner, 3, InnerError) == "outer.inner=3: give the inner settings"
    assert _error(Record, 3) == "config=3: give a mapping of its settings"
    assert _error(Outer, {"run": "r", "inner": 5}) == "outer.inner=5: give the inner settings"


# -- the translation: unknown keys ----------------------------------------------------------------------------------
def test_an_unknown_key_is_reported_before_any_bad_value():
    assert _error(Outer, {"run": "r", "alpha": -1, "zeta": "z", "zzz": 1, "aaa_bad": 1}) == \
        "outer.aaa_bad: unknown setting; allowed: " \
        "['alpha', 'beta', 'conv', 'counts', 'inner', 'inners', 'kind', 'maybe', 'odd', 'picked', 'plain', 'print', " \
        "'run', 'tagged', 'zeta']"


def test_an_unknown_key_is_named_with_a_suggestion_by_its_own_section():
    msg = _error(Outer, {"run": "r", "inner": {"nn": 2, "zz": 1}}, InnerError)
    assert msg == "outer.inner.nn: unknown setting; did you mean 'n'? allowed: ['n', 'rate', 'tags']"


def test_the_first_unknown_key_is_reported_even_when_a_bad_value_sorts_before_it():
    msg = _error(Outer, {"run": "r", "inner": {"a": 0, "zz": 1, "n": 0}}, InnerError)
    assert msg.startswith("outer.inner.a: unknown setting;")
    msg = _error(Outer, {"run": "r", "alpha": "x", "zz": 1})
    assert msg.startswith("outer.zz: unknown setting;")


def test_a_moved_key_says_what_to_do_instead():
    assert _error(Outer, {"run": "r", "inner": {"old": 2}}, InnerError) == "outer.inner.old: renamed to 'n'"
    assert _error(Inner, {"old": 2}, InnerError) == "outer.inner.old: renamed to 'n'"


def test_a_moved_key_is_told_only_when_it_is_the_first_unknown_key():
    assert _error(Inner, {"old": 2, "zz": 1}, InnerError) == "outer.inner.old: renamed to 'n'"
    assert _error(Inner, {"aaa": 2, "old": 1}, InnerError).startswith("outer.inner.aaa: unknown setting; ")


def test_the_unknown_keys_named_are_those_of_the_first_unknown_keys_level():
    assert _error(Outer, {"run": "r", "zz": 1, "inner": {"aa": 1}}).startswith("outer.zz: unknown setting; ")
    msg = _error(Outer, {"run": "r", "inner": {"tags": ["a", 2], "zz": 1}}, InnerError)
    assert msg.startswith("outer.inner.zz: unknown setting; ")


def test_an_unknown_key_of_a_section_with_no_dotted_key_is_named_alone():
    assert _error(Record, {"z": 1}) == "z: unknown field; allowed: ['w', 'x', 'y']"


def test_an_unknown_key_inside_a_mapping_of_sections_names_the_entry():
    msg = _error(Outer, {"run": "r", "inners": {"first": {"n": 2}, "second": {"rat": 1}}}, InnerError)
    assert msg == "outer.inners.second.rat: unknown setting; did you mean 'rate'? allowed: ['n', 'rate', 'tags']"


def test_an_unknown_key_of_a_union_member_is_named_by_that_member():
    msg = _error(Outer, {"run": "r", "picked": {"name": "a", "sise": 1}}, KindError)
    assert msg == "outer.picked.sise: unknown field; did you mean 'size'? allowed: ['name', 'size']"
    msg = _error(Outer, {"run": "r", "tagged": {"name": "b", "dept": 1}}, KindError)
    assert msg == "outer.tagged.dept: unknown setting; did you mean 'depth'? allowed: ['depth', 'name']"


def test_an_unknown_key_deeper_than_a_section_reaches_is_a_bad_value_of_the_field():
    msg = _error(Outer, {"run": "r", "plain": {"deep": {"q": 1}}})
    assert msg == "outer.plain={'deep': {'q': 1}}: Extra inputs are not permitted"


# -- the translation: missing keys, kinds, values -------------------------------------------------------------------
def test_a_missing_required_key_names_the_fix_of_its_section():
    assert _error(Outer, {}) == "outer.run: required; name the run"


def test_a_kinds_unknown_name_lists_the_kinds():
    assert _error(Outer, {"run": "r", "picked": {"name": "c"}}) == "outer.picked.name='c': use one of ['a', 'b']"


def test_a_bad_value_is_reported_with_the_fix_its_field_declares():
    assert _error(Outer, {"run": "r", "alpha": -1}) == "outer.alpha=-1: got int, need >= 0"
    assert _error(Outer, {"run": "r", "zeta": "z"}) == "outer.zeta is wrong"
    assert _error(Outer, {"run": "r", "inner": {"n": 0}}, InnerError) == "outer.inner.n=0: must be an integer >= 1"


def test_a_bad_value_without_a_fix_gives_pydantics_message():
    assert _error(Outer, {"run": 3}) == "outer.run=3: Input should be a valid string"
    assert _error(Record, {"y": "s"}) == "y='s': Input should be a valid integer"


def test_a_validators_invalid_is_prefixed_with_the_key_and_the_value():
    assert _error(Outer, {"run": "r", "odd": 4}) == "outer.odd=4: must be odd"


def test_a_rule_that_writes_its_own_message_is_raised_as_it_is():
    assert _error(Outer, {"run": "r", "beta": -2}) == "outer.beta: a rule's own message (-2)"


def test_problems_are_reported_in_the_sections_order_then_as_declared():
    assert _error(Outer, {"run": "r", "alpha": -1, "zeta": "z"}) == "outer.zeta is wrong"
    assert _error(Outer, {"run": "r", "alpha": -1, "beta": "b"}).startswith("outer.alpha=-1: ")
    assert _error(Outer, {"run": 3, "beta": "b"}).startswith("outer.run=3: ")


def test_a_bad_list_item_names_the_field_and_the_list_given():
    msg = _error(Outer, {"run": "r", "inner": {"tags": ["a", 2]}}, InnerError)
    assert msg.startswith("outer.inner.tags=['a', 2]: ")


def test_a_bad_value_in_a_mapping_of_values_names_the_mapping():
    assert _error(Outer, {"run": "r", "counts": {"a": 1, "b": "x"}}).startswith("outer.counts={'a': 1, 'b': 'x'}: ")


def test_a_bad_value_of_an_optional_section_is_named_by_that_section():
    assert _error(Outer, {"run": "r", "maybe": {"n": 0}}, InnerError) == "outer.maybe.n=0: must be an integer >= 1"
    assert Outer.from_dict({"run": "r", "maybe": None}).maybe is None


def test_a_bad_value_of_a_union_member_is_named_by_that_member():
    msg = _error(Outer, {"run": "r", "picked": {"name": "b", "depth": "x"}}, KindError)
    assert msg == "outer.picked.depth='x': Input should be a valid integer"
    msg = _error(Outer, {"run": "r", "tagged": {"size": "x"}}, KindError)
    assert msg == "outer.tagged.size='x': Input should be a valid integer"


def test_a_sections_own_rule_on_several_fields_names_the_section_and_pydantics_message():
    assert _error(Inner, {"n": 7, "rate": 7}, InnerError) == \
        "outer.inner={'n': 7, 'rate': 7}: Value error, seven twice"
    assert _error(Outer, {"run": "r", "inner": {"n": 7, "rate": 7}}) == \
        "outer.inner={'n': 7, 'rate': 7}: Value error, seven twice"


def test_a_field_holding_a_model_that_is_no_section_gives_pydantics_message():
    assert _error(Outer, {"run": "r", "plain": 3}) == \
        "outer.plain=3: Input should be a valid dictionary or instance of Plain"


def test_the_value_named_is_the_one_given_or_pydantics_input_when_a_validator_reshaped_it():
    assert _error(Outer, {"run": "r", "conv": {"n": 0}}, InnerError) == "outer.conv.n=0: must be an integer >= 1"
    assert _error(Outer, {"run": "r", "conv": 0}, InnerError) == "outer.conv.n=0: must be an integer >= 1"
    assert _error(Outer, {"run": "r", "conv": {"count": -1}}, InnerError) == \
        "outer.conv.n=-1: must be an integer >= 1"


def test_a_bad_entry_of_a_mapping_of_sections_comes_before_an_unknown_key_inside_another_entry():
    assert _error(Outer, {"run": "r", "inners": {"a": {"zz": 1}, "b": 5}}) == \
        "outer.inners.b=5: Input should be a dictionary or an instance of Inner"


def test_a_union_member_is_found_by_its_class_name_its_name_or_its_tag():
    assert _member(KindA | KindB, "KindB") is KindB and _member(KindA | KindB, "b") is KindB
    assert _member(typing_args_of(Tagged), "two") is KindB and _member(KindA | KindB, "c") is None
    assert _member(KindA | int, "int") is None


def test_an_aliased_key_is_named_by_its_alias():
    assert Outer.from_dict({"run": "r", "print": "p"}).printed == "p"
    assert _error(Outer, {"run": "r", "print": 1}) == "outer.print=1: Input should be a valid string"


# -- the type helpers -----------------------------------------------------------------------------------------------
def test_strip_removes_annotated_and_optional_only():
    assert _strip(Annotated[Annotated[int, "m"] | None, "n"]) is int
    assert _strip(Inner | None) is Inner and _strip(int | None) is int
    assert _strip(int | str | None) == int | str | None


def test_a_section_of_a_type_is_the_class_or_the_first_member_of_a_union_of_sections():
    assert _section_of(Inner | None) is Inner and _section_of(KindA | KindB) is KindA
    assert _section_of(KindA | int) is None and _section_of(int) is None and _section_of(3) is None
    assert _section_of(Tagged) is KindA


def test_the_value_type_of_a_mapping():
    assert _mapping_value(dict[str, Inner]) is Inner and _mapping_value(Mapping[str, int]) is int
    assert _mapping_value(OrderedDict[str, Inner]) is Inner
    assert _mapping_value(list[Inner]) is None and _mapping_value(Inner) is None and _mapping_value(int) is None
