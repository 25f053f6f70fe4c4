"""The rules of the contract validator (adapters/contracts/validation.py) one at a time: the identity of a contract
(model, repository, the full 40-hex commit: an abbreviated one is refused), the type coercion of each fact, unknown
keys and free-text provenance, the untyped launch facts and the references between sections. Each case edits a
real contract (``evoke``) in memory and checks the error's key and problem. Then the schema's defaults and cross-field
checks (a minimal section that leaves a field out), the launch checks (adapters/contracts/launch.py), the loader and
the argparse extractor (adapters/contracts/extract.py), each rule at the input where it flips."""

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


def test_an_installed_model_is_listed_and_read_from_its_package_unless_the_name_is_in_tree(tmp_path, monkeypatch):
    from adapters.contracts import loader
    from harness.installed_models import InstalledModel

    def installed(name):
        return InstalledModel(name=name, distribution="toy 1.0", entry_point=f"{name} = toy_pkg",
                              package_dir=tmp_path / name)

    monkeypatch.setattr(loader, "installed_models", lambda: {"toy_installed_wm": installed("toy_installed_wm"),
                                                              "evoke": installed("evoke")})
    assert "toy_installed_wm" in loader.available() and "evoke" in loader.available()
    assert "toy_installed_wm" not in loader.available(loader.ADAPTERS_DIR)  # a folder lists its own models only
    assert loader.contract_path("toy_installed_wm") == tmp_path / "toy_installed_wm" / "contract.yaml"
    assert loader.contract_path("evoke") == loader.ADAPTERS_DIR / "evoke" / "contract.yaml"  # the in-tree file wins
    missing = "no_such_model_xyz"
    assert loader.contract_path(missing) == loader.ADAPTERS_DIR / missing / "contract.yaml"  # no package either


# -- the schema's defaults and cross-field checks -----------------------------------------------------------------------
def section(tp, data):
    return _typed(tp, data, MODEL, "s")


def section_refused(tp, data, key: str, problem: str) -> None:
    with pytest.raises(ContractSchemaError) as e:
        section(tp, data)
    assert (e.value.key, problem in e.value.problem) == (key, True), (e.value.key, e.value.problem)


def _environment(*steps, **more):
    return {"python": "3.10", "torch": {"source": "s"}, "steps": list(steps), **more}


def test_a_minimal_environment_takes_the_defaults_and_installs_torch_once():
    from adapters.contracts.schema import Environment

    env = section(Environment, _environment({"source": "s", "torch": True},
                                            {"source": "s", "editable": "pkg"},
                                            editable=[{"path": "pkg", "source": "s"}]))
    torch_step, editable_step = env.steps
    assert (torch_step.no_deps, torch_step.optional, torch_step.cwd, editable_step.action) == (False, False, ".",
                                                                                               "editable")
    assert env.editable[0].no_deps is False
    section_refused(Environment, _environment({"source": "s", "torch": True}, {"source": "t", "torch": True}),
                    "s.steps", "torch is installed by at most one step")


_WEIGHT = {"name": "w", "repo": "org/w", "source": "s", "key": "checkpoint"}


def test_a_weight_is_required_by_default_and_a_file_weight_has_neither_into_nor_prefix():
    from adapters.contracts.schema import Weight

    w = section(Weight, {**_WEIGHT, "files": ["*.pt"]})
    assert (w.required, w.hf_cache, w.hub, w.into, w.prefix) == (True, False, "huggingface", "", "")
    assert section(Weight, {**_WEIGHT, "file": "m.pt"}).file == "m.pt"
    for where in ("into", "prefix"):
        section_refused(Weight, {**_WEIGHT, "file": "m.pt", where: "sub"}, "s", "a file weight has neither into nor")
        assert getattr(section(Weight, {**_WEIGHT, "files": ["*.pt"], where: "sub"}), where) == "sub"
    section_refused(Weight, {**_WEIGHT, "files": ["*.pt"], "into": "a", "prefix": "b"}, "s", "exclusive")


_FETCH = {"repo": "org/x", "what": "x", "call": "from_pretrained", "source": "s"}


def test_a_hub_fetch_is_avoided_one_way_with_a_value_of_its_shape():
    from adapters.contracts.schema import HubFetch

    for avoided in ({}, {"flag": "--vae", "import": "m"}, {"cache": True}):
        section_refused(HubFetch, {**_FETCH, "avoided_by": avoided}, "s.avoided_by", "give one of ['flag', 'file',")
    assert section(HubFetch, {**_FETCH, "avoided_by": {"flag": "--vae"}}).avoided_by == {"flag": "--vae"}
    section_refused(HubFetch, {**_FETCH, "avoided_by": {"flag": "vae"}}, "s.avoided_by.flag", "a flag name")
    assert section(HubFetch, {**_FETCH, "avoided_by": {"file": ["checkpoint", "vae.pt"]}}).when == "always"
    for value in (["checkpoint"], ["checkpoint", "vae.pt", "x"], ["checkpoint", 1], [1, 2], "checkpoint/vae.pt"):
        section_refused(HubFetch, {**_FETCH, "avoided_by": {"file": value}}, "s.avoided_by.file",
                        "[config key, relative path]")


def test_an_overlay_off_by_default_needs_no_switch_and_one_on_by_default_does():
    from adapters.contracts.schema import Overlay

    off = section(Overlay, {"name": "logo", "what": "w", "source": "s", "default": "off"})
    assert (off.switch, off.writer_call) == (None, None)
    section_refused(Overlay, {"name": "logo", "what": "w", "source": "s", "default": "on"}, "s",
                    "an overlay on by default needs a switch or a writer_call")


_WRITER = {"file": "out.mp4", "fps": 16, "frames": "n", "anchor_frame": "kept", "first_pose": 0, "process": "main"}


def test_a_writer_writes_at_a_positive_rate_and_does_not_skip_existing_files_by_default():
    from adapters.contracts.schema import Writer

    w = section(Writer, _WRITER)
    assert (w.skip_if_exists, w.fps, w.overlays, w.spawned_with) == (False, 16.0, (), ())
    assert section(Writer, {**_WRITER, "fps": 0.5}).fps == 0.5  # a slow rate is a rate
    section_refused(Writer, {**_WRITER, "fps": 0}, "s.fps", "must be > 0")
    section_refused(Writer, {**_WRITER, "fps": -1}, "s.fps", "must be > 0")


def test_an_import_probe_needs_no_gpu_unless_it_says_so(base):
    c = contract_from_raw(edited(base, lambda r: r.update(imports=["a.b", {"module": "c"},
                                                                   {"module": "d", "needs_gpu": True}],
                                                          hub_fetches=[])), MODEL)
    assert [(m.module, m.needs_gpu) for m in c.imports] == [("a.b", False), ("c", False), ("d", True)]


def test_a_contracts_repr_leaves_out_the_raw_yaml(base):
    c = contract_from_raw(copy.deepcopy(base), MODEL)
    assert "raw=" not in repr(c) and repr(c).startswith("Contract(model='evoke', repo=")


@pytest.mark.parametrize("section_name", list(_SECTIONS))
def test_every_section_of_the_table_is_required(base, section_name):
    refused(edited(base, lambda r: r.pop(section_name)), section_name, "required section")


# -- validation: the keys of errors deep inside a section ---------------------------------------------------------------
def test_a_top_level_key_that_is_not_text_is_an_unknown_section(base):
    refused(edited(base, lambda r: r.update({1: "x"})), 1, "unknown section")  # type: ignore[arg-type]


@dataclass(frozen=True)
class Nest:
    items: tuple[Inner, ...] = ()
    pair: tuple[int, Inner] = (0, Inner(0))
    by_name: dict[str, Inner] = field(default_factory=dict)
    opt: Inner | None = None


@pytest.mark.parametrize(("data", "key"), [
    ({"items": [{"n": 1}, {"n": 2, "x": 3}]}, "nest.items[1].x"),  # the 2nd item of a tuple of any length
    ({"pair": [1, {"n": 2, "x": 3}]}, "nest.pair[1].x"),  # the 2nd place of a fixed tuple
    ({"by_name": {"a": {"n": 2, "x": 3}}}, "nest.by_name.a.x"),  # a mapping's value
    ({"opt": {"n": 2, "x": 3}}, "nest.opt.x"),  # an Optional dataclass
])
def test_an_unknown_key_deep_in_a_section_lists_the_keys_of_its_own_dataclass(data, key):
    with pytest.raises(ContractSchemaError) as e:
        _typed(Nest, data, "m", "nest")
    assert (e.value.key, e.value.problem.split(" (")[0]) == (key, "unknown key; allowed: ['n']")


def test_a_mapping_key_that_looks_like_provenance_is_still_a_fact():
    bad("must be an integer, got 'x'", "fact.table.a_source", name="x", table={"a_source": "x"})
    bad("must be text, got bool True", "fact.name", name=True, rate_source="README")


def test_a_sys_path_item_is_a_mapping_not_a_list_of_its_keys(base):
    refused(edited(base, lambda r: r["entry"]["sys_path"].append(["path", "source"])), "entry.sys_path", "items are")


def test_null_flags_read_as_no_flags_and_literals_are_kept(base):
    assert contract_from_raw(edited(base, lambda r: r["entry"].update(flags=None)), MODEL).flags == {}
    literals = {"fps": {"value": 16, "source": "gen.py:3"}}
    assert contract_from_raw(edited(base, lambda r: r.update(literals=literals)), MODEL).literals == literals


# -- launch: boundaries of the overlay, parser and command.sh rules ----------------------------------------------------
def test_an_empty_switch_name_or_writer_call_names_nothing():
    env_only = _writer_contract(_overlay(flag="", env="HUD"))  # flag "" is no flag: the variable decides
    assert launch.overlay_violations(env_only, ["--prompt", "", "--n", "1"], {"HUD": "0"}, set()) == []
    flag_only = _writer_contract(_overlay(flag="--hud", env=""))  # env "" is no variable: the flag decides
    assert launch.overlay_violations(flag_only, [], {"": "0"}, set()) == [
        "hud (a HUD) stays in every frame: set --hud 0 (gen.py:9)"]
    no_call = _writer_contract(_overlay(flag="--hud", writer_call=""))
    assert launch.overlay_violations(no_call, [], {}, {""}) == [
        "hud (a HUD) stays in every frame: set --hud 0 (gen.py:9)"]


def test_the_switch_value_is_the_argument_after_the_flag_wherever_it_stands():
    c = _writer_contract(_overlay(flag="--hud"))
    assert launch.overlay_violations(c, ["--x", "1", "--hud", "0"], {}, set()) == []
    assert launch.overlay_violations(c, ["--x", "0", "--hud", "1"], {}, set()) == [
        "hud (a HUD) stays in every frame: set --hud 0 (gen.py:9)"]


def test_a_spawned_writer_is_named_only_for_an_overlay_a_shim_would_replace():
    c = _writer_contract(_overlay(flag="--hud"), spawned=["--workers"])
    assert launch.overlay_violations(c, ["--workers", "2"], {}, set()) == [
        "hud (a HUD) stays in every frame: set --hud 0 (gen.py:9)"]


def test_the_parser_has_no_help_flag_upstream_did_not_record():
    with pytest.raises(ContractViolation, match="unrecognized arguments: -h"):
        launch.build_parser({}, "gen.py").parse_args(["-h"])


def test_the_members_of_a_one_of_required_group_are_required_as_a_group_only():
    flags = {"--image": {"required": True}, "--video": {"required": True}, "--steps": {"required": True}}
    c = _launch_contract(flags, one_of_required=[["--image", "--video"]])
    assert launch.check_args(c, ["--video", "b", "--steps", "3"]).video == "b"
    with pytest.raises(ContractViolation, match="required: --steps"):
        launch.check_args(c, ["--video", "b"])


def test_a_flag_with_its_value_after_an_equals_sign_is_checked_by_its_name():
    c = _launch_contract({"--n": {"type": "int"}, "--s": {}})
    ns = launch.check_args(c, ["--n=3", "--s=a=b"])
    assert (ns.n, ns.s) == (3, "a=b")
    with pytest.raises(ContractViolation, match="flag --nope is not defined"):
        launch.check_args(c, ["--nope=3"])


def test_an_export_takes_the_first_word_of_its_value():
    assert launch.parse_command_sh("export A=1 B=2\npython gen.py\n")[0] == {"A": "1"}


def test_the_shim_is_the_first_python_file_under_adapters_before_the_separator():
    p = launch.split_launch("python -X pycache_prefix=/h/adapters/cache /h/adapters/x/shim.py -- gen.py --n 3\n",
                            "gen.py")
    assert (p.launcher, p.shim, p.shim_args, p.args) == (["python", "-X", "pycache_prefix=/h/adapters/cache"],
                                                         "/h/adapters/x/shim.py", [], ["--n", "3"])


# -- the extractor (adapters/contracts/extract.py) ---------------------------------------------------------------------
UPSTREAM = '''\
import argparse
MODES = ["a", "b"]
p = argparse.ArgumentParser(allow_abbrev=False)
if True:
    p.add_argument("--steps", "-s", type=int, required=True)
p.add_argument("video")
p.add_argument(FLAG)
p.add_argument("input", "-i")
p.add_argument("--size", 512)
p.add_argument("--mode", choices=MODES, nargs="+")
p.add_argument("--hud", action=HudAction)
p.add_argument("--fast", action="store_true", const=None)
'''


def test_the_extractor_reads_each_flag_of_an_upstream_parser_in_line_order():
    from adapters.contracts.extract import extract_flags

    flags, parser = extract_flags(UPSTREAM)
    assert parser == {"line": 3, "allow_abbrev": False}
    assert flags == [  # positionals, names that are no text literal and non-text literals are left out
        {"name": "--steps", "line": 5, "aliases": ["-s"], "type": "int", "required": True},
        {"name": "--size", "line": 9},
        {"name": "--mode", "line": 10, "choices": None, "nargs": "+"},  # choices from a variable: not a literal
        {"name": "--hud", "line": 11, "action": "HudAction"},  # an action class is named as written
        {"name": "--fast", "line": 12, "action": "store_true", "const": None}]


def test_the_extractor_prints_the_flags_of_the_script_it_is_given(tmp_path, capsys):
    from adapters.contracts import extract

    script = tmp_path / "gen.py"
    script.write_text(UPSTREAM)
    extract.main([str(script)])
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["parser"] == {"line": 3, "allow_abbrev": False} and list(out["flags"]) == [
        "--steps", "--size", "--mode", "--hud", "--fast"]
    assert out["flags"]["--steps"] == {"line": 5, "aliases": ["-s"], "type": "int", "required": True}
    with pytest.raises(SystemExit, match="usage: python -m adapters.contracts.extract"):
        extract.main([])


def test_the_extractor_runs_as_a_module(tmp_path, capsys, monkeypatch):
    import runpy
    import warnings

    script = tmp_path / "gen.py"
    script.write_text(UPSTREAM)
    monkeypatch.setattr("sys.argv", ["extract.py", str(script)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the module may be imported already
        runpy.run_module("adapters.contracts.extract", run_name="__main__")
    assert list(yaml.safe_load(capsys.readouterr().out)["flags"]) == ["--steps", "--size", "--mode", "--hud", "--fast"]
