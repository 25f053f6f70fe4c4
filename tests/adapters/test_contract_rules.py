"""The rules of the contract validator (adapters/contracts/validation.py) one at a time: the identity of a contract
(model, repository, the full 40-hex commit: an abbreviated one is refused), the type coercion of each fact, unknown
keys and free-text provenance, the untyped launch facts and the references between sections. Each case edits a
real contract (``evoke``) in memory and checks the error's key and problem."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import types
import typing
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Optional

import pytest
import yaml

from adapters import contracts
from adapters.contracts import ContractSchemaError, launch
from adapters.contracts.launch import ContractViolation
from adapters.contracts.schema import Contract
from adapters.contracts.validation import _SECTIONS, _typed, contract_from_raw, validate

MODEL = "evoke"


@pytest.fixture(scope="module")
def base() -> dict:
    return yaml.safe_load(contracts.contract_path(MODEL).read_text())


def refused(raw: dict, key: str, problem: str) -> ContractSchemaError:
    with pytest.raises(ContractSchemaError) as e:
        contract_from_raw(raw, MODEL)
    assert (e.value.model, e.value.key) == (MODEL, key), str(e.value)
    assert problem in e.value.problem, e.value.problem
    return e.value


def edited(base: dict, edit) -> dict:
    raw = copy.deepcopy(base)
    edit(raw)
    return raw


def test_the_real_contract_is_valid_and_typed(base):
    c = contract_from_raw(copy.deepcopy(base), MODEL)
    assert (c.model, c.repo, c.commit) == (MODEL, base["repo"], base["commit"])
    assert c.sys_path == [str(sp["path"]) for sp in base["entry"]["sys_path"]] and c.flags == {}  # evoke passes no flags
    assert c.env == base["env"] and c.output == base["output"] and c.canvas == base["canvas"]
    assert c.raw["commit"] == base["commit"] and c.literals == (base.get("literals") or {})


@pytest.mark.parametrize("commit", ["", "abc1234", "A" * 40, "g" * 40, "a" * 39, "a" * 41, 1234567])
def test_the_commit_must_be_the_full_40_hex_one(base, commit):
    problem = "required text" if not isinstance(commit, str) or not commit else "the full 40-hex commit"
    refused(edited(base, lambda r: r.update(commit=commit)), "commit", problem)


@pytest.mark.parametrize("key", ["model", "repo", "commit"])
def test_the_identity_keys_are_required_text(base, key):
    refused(edited(base, lambda r: r.pop(key)), key, "required text")
    refused(edited(base, lambda r: r.update({key: ""})), key, "required text")
    refused(edited(base, lambda r: r.update({key: ["x"]})), key, "required text")


def test_the_contract_names_its_own_model_and_only_known_sections(base):
    e = refused(edited(base, lambda r: r.update(model="yume")), "model", "'yume' is not the file's model 'evoke'")
    assert str(e) == "adapters/evoke/contract.yaml: model: 'yume' is not the file's model 'evoke'"
    refused(edited(base, lambda r: r.update(gpus_count=2)), "gpus_count", "unknown section; known: [")
    contract_from_raw(edited(base, lambda r: r.update(gpus_source="README", gpus_note="x")), MODEL)  # provenance
    with pytest.raises(ContractSchemaError) as e:
        validate(["not", "a", "mapping"], MODEL)  # type: ignore[arg-type]
    assert (e.value.key, e.value.problem) == ("<top>", "must be a mapping")


@pytest.mark.parametrize("section", ["environment", "weights", "env_vars", "writer", "checkpoint", "license"])
def test_every_required_section_must_be_there(base, section):
    if section not in base:
        pytest.skip(f"{MODEL} has no {section}")
    refused(edited(base, lambda r: r.pop(section)), section, "required section")


# -- the untyped launch facts ----------------------------------------------------------------------------------------
def test_the_entry_names_its_script_and_every_flag_cites_upstream(base):
    refused(edited(base, lambda r: r.pop("entry")), "entry.script", "required: the script command.sh runs")
    refused(edited(base, lambda r: r["entry"].update(script=3)), "entry.script", "required")
    flag = "--steps"
    flags = {flag: {"type": "int", "source": "generate.py:12"}}
    assert contract_from_raw(edited(base, lambda r: r["entry"].update(flags=flags)), MODEL).flags == flags
    refused(edited(base, lambda r: r["entry"].update(flags={flag: {"type": "int"}})), f"entry.flags.{flag}.source",
            "every flag cites upstream")
    refused(edited(base, lambda r: r["entry"].update(flags={flag: "x"})), f"entry.flags.{flag}.source", "cites")
    contract_from_raw(edited(base, lambda r: r["entry"].update(flags=None)), MODEL)  # no flags at all is allowed


def test_sys_path_items_are_a_path_and_a_source(base):
    refused(edited(base, lambda r: r["entry"]["sys_path"][0].pop("source")), "entry.sys_path", "items are {path, source}")
    refused(edited(base, lambda r: r["entry"]["sys_path"].append(".")), "entry.sys_path", "items are")
    c = contract_from_raw(edited(base, lambda r: r["entry"].update(sys_path=None)), MODEL)
    assert c.sys_path == []


def test_every_variable_cites_upstream_and_output_and_canvas_are_required(base):
    var = next(iter(base["env"]))
    refused(edited(base, lambda r: r["env"][var].pop("source")), f"env.{var}.source", "every variable cites upstream")
    refused(edited(base, lambda r: r["env"].update({var: "1"})), f"env.{var}.source", "cites")
    for section in ("output", "canvas"):
        refused(edited(base, lambda r, s=section: r.pop(s)), f"{section}.source", "required")
        refused(edited(base, lambda r, s=section: r[s].pop("source")), f"{section}.source", "required")
        refused(edited(base, lambda r, s=section: r.update({s: "x"})), f"{section}.source", "required")


# -- references between sections --------------------------------------------------------------------------------------
def test_a_hub_fetch_avoided_by_a_file_or_an_import_names_a_known_key_or_module(base):
    def add(avoided):
        return edited(base, lambda r: r.setdefault("hub_fetches", []).append(
            {"repo": "org/x", "what": "x", "call": "from_pretrained", "avoided_by": avoided, "source": "s",
             "fix": "setup"}))

    i = len(base.get("hub_fetches") or [])
    refused(add({"file": ["no_such_key", "f"]}), f"hub_fetches[{i}].avoided_by.file", "the key must be one of [")
    contract_from_raw(add({"file": ["upstream_dir", "f"]}), MODEL)  # the checkout itself is always a key
    refused(add({"import": "no_such_module"}), f"hub_fetches[{i}].avoided_by.import", "must be in imports")
    module = edited(base, lambda r: r.update(imports=[*(r.get("imports") or []), "extra_mod"]))
    module["hub_fetches"] = add({"import": "extra_mod"})["hub_fetches"]
    contract_from_raw(module, MODEL)


def test_imports_are_module_names_or_probes(base):
    own = list(base["imports"])
    c = contract_from_raw(edited(base, lambda r: r.update(imports=[*own, "a.b", {"module": "c"}])), MODEL)
    assert [m.module for m in c.imports] == [*own, "a.b", "c"]
    refused(edited(base, lambda r: r.update(imports=[*own, {"mod": "c"}])), f"imports[{len(own)}].mod", "unknown key")
    no_fetch = edited(base, lambda r: r.update(imports=None, hub_fetches=[]))
    assert contract_from_raw(no_fetch, MODEL).imports == ()


# -- the type coercion ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Inner:
    n: int


@dataclass(frozen=True)
class Fact:
    name: str
    rate: float = 1.0
    count: int = 0
    on: bool = False
    pair: tuple[int, str] = (0, "")
    many: tuple[Inner, ...] = ()
    table: dict[str, int] = field(default_factory=dict)
    maybe: Optional[int] = None  # noqa: UP045 - typing.Union's spelling, apart from X | None below
    union: int | None = None
    anything: Any = None


def build(**data):
    return _typed(Fact, data, "m", "fact")


def bad(problem_start: str, key: str, **data):
    with pytest.raises(ContractSchemaError) as e:
        build(**data)
    assert e.value.key == key and e.value.problem.startswith(problem_start), (e.value.key, e.value.problem)


def test_each_type_is_checked_never_guessed():
    f = build(name="x", rate=2, count=3, on=True, pair=[1, "a"], many=[{"n": 1}], table={"a": 1}, maybe=None,
              union=4, anything={"free": [1]})
    assert (f.rate, type(f.rate), f.count, f.on, f.pair, f.many, f.table, f.maybe, f.union) == (
        2.0, float, 3, True, (1, "a"), (Inner(1),), {"a": 1}, None, 4)
    assert build(name=3).name == "3" and build(name=2.5).name == "2.5"  # a number in a text fact
    bad("must be text, got bool True", "fact.name", name=True)
    bad("must be text, got list", "fact.name", name=["x"])
    bad("must be a number, got True", "fact.rate", name="x", rate=True)
    bad("must be a number, got '1'", "fact.rate", name="x", rate="1")
    bad("must be an integer, got 1.0", "fact.count", name="x", count=1.0)
    bad("must be an integer, got False", "fact.count", name="x", count=False)
    bad("must be true or false, got 1", "fact.on", name="x", on=1)
    bad("must be a list, got str", "fact.pair", name="x", pair="1a")
    bad("must have 2 items", "fact.pair", name="x", pair=[1])
    bad("must have 2 items", "fact.pair", name="x", pair=[1, "a", 2])
    bad("must be text", "fact.pair[1]", name="x", pair=[1, None])
    bad("must be an integer", "fact.many[1].n", name="x", many=[{"n": 1}, {"n": "2"}])
    bad("must be a mapping with keys ['n'], got int", "fact.many[0]", name="x", many=[3])
    bad("must be a mapping, got list", "fact.table", name="x", table=[1])
    bad("must be an integer", "fact.table.a", name="x", table={"a": "1"})
    bad("must be an integer, got 'x'", "fact.maybe", name="x", maybe="x")
    bad("must be an integer, got 'x'", "fact.union", name="x", union="x")
    bad("required", "fact.name")
    bad("unknown key; allowed: ['anything', 'count', ", "fact.nmae", name="x", nmae="y")
    bad("provenance is text", "fact.rate_source", name="x", rate_source=3)
    assert build(name="x", rate_source="README", count_note="why").name == "x"
    with pytest.raises(ContractSchemaError) as e:
        _typed(Fact, ["x"], "m", "fact")
    assert e.value.problem.startswith("must be a mapping with keys ['name', 'rate',") and e.value.problem.endswith(
        ", got list")
    assert _typed(Optional[Inner], None, "m", "x") is None  # noqa: UP045 - typing.Union's spelling
    assert _typed(Inner | None, {"n": 2}, "m", "x") == Inner(2)


def test_a_typo_is_reported_before_the_missing_key_it_leaves():
    bad("unknown key; allowed: [", "fact.nmae", nmae="x")  # not "fact.name: required"


def test_a_value_yaml_cannot_give_as_plain_data_is_refused():
    """A bare YAML date (``2024-01-01``) is no text, number, flag, list or mapping: refused at its key (pydantic
    validates the facts as JSON data, see adapters/contracts/validation.py)."""
    bad("must be text, a number, true/false, a list or a mapping, got date", "fact.name", name=datetime.date(2024, 1, 1))
    bad("must be text, a number, true/false, a list or a mapping, got set", "fact.many[0].n", name="x", many=[{"n": {1}}])


def _typed_as_declared(obj: Any, tp: Any, where: str) -> None:
    """``obj`` has the type hint ``tp`` all the way down (floats are floats, lists became tuples)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return
    if origin in (typing.Union, types.UnionType):
        if obj is not None:
            _typed_as_declared(obj, next(a for a in args if a is not type(None)), where)
    elif dataclasses.is_dataclass(tp):
        assert type(obj) is tp, where
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            _typed_as_declared(getattr(obj, f.name), hints[f.name], f"{where}.{f.name}")
    elif origin is tuple:
        assert type(obj) is tuple, where
        for i, item in enumerate(obj):
            _typed_as_declared(item, args[0] if args[1:] == (Ellipsis,) else args[i], f"{where}[{i}]")
    elif origin is dict:
        assert type(obj) is dict and all(type(k) is str for k in obj), where
        for k, v in obj.items():
            _typed_as_declared(v, args[1], f"{where}.{k}")
    else:
        assert type(obj) is tp, (where, obj)


@pytest.mark.parametrize("model", contracts.available(contracts.ADAPTERS_DIR))
def test_every_in_tree_contract_is_built_with_its_declared_types(model):
    c = contract_from_raw(yaml.safe_load(contracts.contract_path(model).read_text()), model)
    hints = typing.get_type_hints(Contract)
    for section in (*_SECTIONS, "imports"):
        _typed_as_declared(getattr(c, section), hints[section], section)


# -- launch: command.sh, flags and variables ------------------------------------------------------------------------------


def test_command_sh_is_its_exports_and_one_launch_line():
    text = ("#!/usr/bin/env bash\nset -euo pipefail\ncd /co\n# a comment\n\nexport A='x y'\nexport B=\n"
            "export C=\"${C:?set C}\"\npython gen.py \\\n  --n 3 'a b'\n")
    env, argv = launch.parse_command_sh(text)
    assert env == {"A": "x y", "B": "", "C": "${C:?set C}"} and argv == ["python", "gen.py", "--n", "3", "a b"]
    with pytest.raises(ContractViolation, match="one launch line; found 2"):
        launch.parse_command_sh("a\nb\n")
    with pytest.raises(ContractViolation, match="found 0"):
        launch.parse_command_sh("export A=1\n")


def test_a_launch_splits_around_the_entry_script_and_its_shim():
    p = launch.split_launch("torchrun --nproc 2 /h/adapters/x/shim.py --seed 1 -- gen.py --n 3\n", "gen.py")
    assert (p.launcher, p.shim, p.shim_args, p.script, p.args) == (["torchrun", "--nproc", "2"],
                                                                   "/h/adapters/x/shim.py", ["--seed", "1"],
                                                                   "gen.py", ["--n", "3"])
    plain = launch.split_launch("export A=1\npython gen.py --n 3\n", "gen.py")
    assert (plain.env, plain.launcher, plain.shim, plain.shim_args, plain.args) == ({"A": "1"}, ["python"], None, [],
                                                                                    ["--n", "3"])
    with pytest.raises(ContractViolation, match="does not run upstream's entry script 'gen.py'"):
        launch.split_launch("python other.py\n", "gen.py")
    with pytest.raises(ContractViolation, match="has '--' but no harness shim before it"):
        launch.split_launch("python /h/lib/shim.py -- gen.py\n", "gen.py")


def _launch_contract(flags, env=None, **entry):
    return SimpleNamespace(model="m", commit="c" * 40, entry={"script": "gen.py", **entry}, flags=flags,
                           env=env or {})


def test_flags_are_parsed_with_their_recorded_types_choices_and_actions():
    flags = {"--n": {"type": "int", "choices": ["1", "2"]}, "--s": {"type": "float"}, "--p": {"type": "Path"},
             "--on": {"type": "bool_text"}, "--yes": {"type": "bool_text", "accepts": ["Y", "n"]},
             "--fast": {"action": "store_true"}, "--slow": {"action": "store_false"},
             "--many": {"nargs": "+"}, "--opt": {"nargs": "?", "const": "c"}, "--req": {"required": True,
                                                                                      "aliases": ["-r"]}}
    c = _launch_contract(flags)
    ns = launch.check_args(c, ["--n", "2", "--s", "1.5", "--p", "x", "--on", "YES", "--yes", "y", "--fast",
                               "--slow", "--many", "a", "b", "--opt", "-r", "q"])
    assert (ns.n, ns.s, ns.p, ns.on, ns.yes, ns.fast, ns.slow, ns.many, ns.opt, ns.req) == (
        2, 1.5, "x", True, True, True, False, ["a", "b"], "c", "q")
    ns = launch.check_args(c, ["--req", "q", "--on", "0", "--yes", "N"])
    assert (ns.on, ns.yes, ns.fast, ns.slow, ns.n) == (False, False, False, True, None)
    for args, text in ((["--n", "3", "--req", "q"], "invalid choice"), (["--s", "x", "--req", "q"], "invalid float"),
                       (["--on", "maybe", "--req", "q"], "'maybe' is not one of"), ([], "required: --req"),
                       (["--nope", "1"], "flag --nope is not defined by gen.py at cccccccccccc (exact names only")):
        with pytest.raises(ContractViolation, match=text.replace("(", r"\(")):
            launch.check_args(c, args)
    with pytest.raises(ValueError, match="contract type 'list' is not modelled"):
        launch.check_args(_launch_contract({"--x": {"type": "list"}}), [])


def test_abbreviations_and_one_of_required_groups_follow_upstreams_parser():
    flags = {"--image": {}, "--video": {}, "--steps": {"type": "int"}}
    c = _launch_contract(flags, allow_abbrev=False, one_of_required=[["--image", "--video"]])
    assert launch.check_args(c, ["--image", "a"]).image == "a"
    with pytest.raises(ContractViolation, match="one of the arguments --image --video is required"):
        launch.check_args(c, ["--steps", "3"])
    with pytest.raises(ContractViolation, match="not allowed with argument"):
        launch.check_args(c, ["--image", "a", "--video", "b"])
    parser = launch.build_parser(flags, "gen.py", allow_abbrev=False)
    with pytest.raises(ContractViolation, match="unrecognized arguments: --ste 3"):
        parser.parse_args(["--ste", "3"])
    assert launch.build_parser(flags, "gen.py").parse_args(["--ste", "3"]).steps == 3  # upstream's default


def test_exported_variables_must_be_read_upstream_set_when_required_and_of_their_type():
    env = {"MODE": {"choices": [1, 2], "source": "s1"}, "N": {"type": "int"}, "X": {"type": "float"},
           "NEED": {"required": True, "source": "s2"}}
    c = _launch_contract({}, env)
    launch.check_env(c, {"MODE": "1", "N": "3", "X": "0.5", "NEED": "y", "CUDA_VISIBLE_DEVICES": "0"})
    for bad, text in (({"NEED": "y", "OTHER": "1"}, "exports OTHER, which upstream never reads"),
                      ({"NEED": "y", "MODE": "3"}, "MODE='3' is not one of [1, 2] (s1)"),
                      ({"NEED": "y", "N": "1.5"}, "N='1.5' is not a int"),
                      ({"NEED": "y", "X": "x"}, "X='x' is not a float"), ({}, "NEED must be exported (s2)")):
        with pytest.raises(ContractViolation) as e:
            launch.check_env(c, bad)
        assert str(e.value) == f"m: {text}" or str(e.value).startswith(f"m: {text}")


def _overlay(name="hud", default="on", flag=None, env=None, off="0", writer_call=None):
    switch = SimpleNamespace(flag=flag, env=env, off=off) if (flag or env) else None
    return SimpleNamespace(name=name, default=default, switch=switch, writer_call=writer_call, what="a HUD",
                           source="gen.py:9")


def _writer_contract(*overlays, spawned=()):
    return SimpleNamespace(writer=SimpleNamespace(overlays=overlays, spawned_with=list(spawned)), hub_fetches=[])


def test_an_overlay_on_by_default_is_switched_off_or_shimmed_in_the_writing_process():
    flag = _writer_contract(_overlay(flag="--hud"))
    assert launch.overlay_violations(flag, ["--hud", "0"], {}, set()) == []
    assert launch.overlay_violations(flag, ["--hud", "1"], {}, set()) == [
        "hud (a HUD) stays in every frame: set --hud 0 (gen.py:9)"]
    assert launch.overlay_violations(flag, ["--hud"], {}, set()) == [
        "hud (a HUD) stays in every frame: set --hud 0 (gen.py:9)"]  # the flag without its value
    env = _writer_contract(_overlay(env="HUD"))
    assert launch.overlay_violations(env, [], {"HUD": "0"}, set()) == []
    assert launch.overlay_violations(env, [], {}, set()) == ["hud (a HUD) stays in every frame: set HUD 0 (gen.py:9)"]
    shim = _writer_contract(_overlay(writer_call="draw"), spawned=["--workers"])
    assert launch.overlay_violations(shim, [], {}, {"draw"}) == []
    assert launch.overlay_violations(shim, [], {}, set()) == [
        "hud (a HUD) stays in every frame: replace draw with a shim in the process that writes (gen.py:9)"]
    assert launch.overlay_violations(shim, ["--workers", "2"], {}, {"draw"}) == [
        ("hud (a HUD) stays in every frame (--workers moves the writer into a spawned worker): replace draw with a "
         "shim in the process that writes (gen.py:9)")]


def test_an_overlay_off_by_default_must_not_be_switched_on():
    c = _writer_contract(_overlay(default="off", flag="--hud", off="false"), _overlay("logo", default="off", env="L"))
    assert launch.overlay_violations(c, [], {}, set()) == []
    assert launch.overlay_violations(c, ["--hud", "false"], {"L": "0"}, set()) == []  # their off values
    assert launch.overlay_violations(c, ["--hud", "false"], {"L": "1"}, set()) == ["logo: L=1 turns it on (gen.py:9)"]
    assert launch.overlay_violations(c, ["--hud", "true"], {}, set()) == ["hud: --hud=true turns it on (gen.py:9)"]


def test_a_run_time_download_must_be_avoided_by_the_launchs_flag():
    h = SimpleNamespace(repo="org/x", what="a VAE", source="gen.py:3", avoided_by={"flag": "--vae"})
    other = SimpleNamespace(repo="org/y", what="y", source="s", avoided_by={"offline_cache": True})
    c = SimpleNamespace(hub_fetches=[h, other])
    assert launch.hub_fetch_violations(c, ["--vae", "p"]) == []
    assert launch.hub_fetch_violations(c, []) == [
        "org/x (a VAE) is fetched at run time (gen.py:3): the launch must pass --vae"]


# -- the loader ------------------------------------------------------------------------------------------------------------
def test_available_models_are_the_folders_holding_a_contract(tmp_path):
    from adapters.contracts import loader

    assert "evoke" in loader.available() and loader.available() == loader.available(loader.ADAPTERS_DIR)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "contract.yaml").write_text("")
    (tmp_path / "b").mkdir()
    assert loader.available(tmp_path) == ["a"]


def test_an_out_of_tree_model_is_a_package_holding_its_contract(tmp_path, monkeypatch):
    from adapters.contracts import loader

    pkg = tmp_path / "toy_rules_wm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert loader._package_dir("toy_rules_wm") == pkg
    assert loader._package_dir("not-a-name") is None and loader._package_dir("json.decoder") is None
    assert loader._package_dir("no_such_package_xyz") is None and loader._package_dir("shlex") is None  # a module
    in_tree = loader.ADAPTERS_DIR / "toy_rules_wm" / "contract.yaml"
    assert loader.contract_path("toy_rules_wm") == in_tree  # a package without a contract: the in-tree path
    (pkg / "contract.yaml").write_text("")
    assert loader.contract_path("toy_rules_wm") == pkg / "contract.yaml"
    assert loader.contract_path("toy_rules_wm", tmp_path / "dir") == tmp_path / "dir" / "toy_rules_wm" / "contract.yaml"
    assert loader.contract_path("evoke") == loader.ADAPTERS_DIR / "evoke" / "contract.yaml"
    with pytest.raises(ContractSchemaError) as e:
        contracts.load("toy_rules_wm")  # an empty contract file is an empty mapping
    assert (e.value.key, e.value.problem) == ("model", "required text")


def test_empty_launch_sections_read_as_empty_mappings(base):
    raw = edited(base, lambda r: r.update(env=None, call_sites=None, literals=None))
    c = contract_from_raw(raw, MODEL)
    assert (c.env, c.call_sites, c.literals) == ({}, {}, {})
    assert contract_from_raw(edited(base, lambda r: r.update(call_sites={"gen": "x.py:1"})), MODEL).call_sites == {
        "gen": "x.py:1"}
