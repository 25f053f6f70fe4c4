"""Rules of the launch contracts (adapters/contracts/launch.py), extract.py and validation.py, one per test, in process."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import yaml

from adapters import contracts
from adapters.contracts import extract, launch
from adapters.contracts.validation import contract_from_raw


def _launch(args=(), shim_args=(), env=None) -> launch.ParsedLaunch:
    return launch.ParsedLaunch(env or {}, ["python"], None, list(shim_args), "gen.py", list(args))


def _native_contract(knobs, args=None, absent=()):
    native = SimpleNamespace(source="o/r@abc123 run.sh:3", args=args or {}, knobs=knobs, absent=tuple(absent))
    return SimpleNamespace(model="m", policies=SimpleNamespace(native=native))


# -- _knob_value: what a launch gives a memory knob ----------------------------------------------------------------


def test_a_knob_without_a_leading_dash_is_read_from_the_exported_environment():
    got = _launch(args=["STREAM_LONG", "9"], env={"STREAM_LONG": "1"})
    assert launch._knob_value(got, "STREAM_LONG") == "1"
    assert launch._knob_value(_launch(args=["STREAM_LONG", "9"]), "STREAM_LONG") is None


def test_a_flag_knob_is_the_word_after_it_in_the_upstream_arguments_or_else_the_shim_options():
    assert launch._knob_value(_launch(args=["--x", "--k", "7"]), "--k") == "7"
    assert launch._knob_value(_launch(shim_args=["--k", "3"]), "--k") == "3"
    assert launch._knob_value(_launch(args=["--k", "abc"], shim_args=["--k", "3"]), "--k") == "abc"
    assert launch._knob_value(_launch(args=["--x", "1"], shim_args=["--y"]), "--k") is None


def test_a_flag_knob_at_the_end_of_its_arguments_is_a_switch_with_the_empty_value():
    assert launch._knob_value(_launch(args=["a", "--k"]), "--k") == ""
    assert launch._knob_value(_launch(args=["--k"]), "--k") == ""


def test_a_flag_knob_followed_by_another_flag_is_a_switch_but_a_negative_number_is_its_value():
    assert launch._knob_value(_launch(args=["--k", "--other"]), "--k") == ""
    assert launch._knob_value(_launch(args=["--k", "-1"]), "--k") == "-1"
    assert launch._knob_value(_launch(args=["--k", "-0.5"]), "--k") == "-0.5"


def test_a_number_is_whatever_float_reads():
    assert [launch._number(s) for s in ("-1", "1.5", "1e3", "abc", "", "./1")] == [
        True, True, True, False, False, False]


# -- _same: equal as upstream would read them ----------------------------------------------------------------------


def test_an_unset_value_equals_only_another_unset_value():
    assert launch._same(None, None) is True
    assert launch._same(None, "x") is False
    assert launch._same("x", None) is False


def test_numbers_compare_by_value_and_everything_else_as_a_normalised_path():
    assert launch._same("18", "18.0") is True
    assert launch._same("-1", "18") is False
    assert launch._same("./configs/dreamx-ar/", "configs/dreamx-ar") is True
    assert launch._same("x", "y") is False
    # a number against a path-like text: compared as paths, never passed to float
    assert launch._same("1", "./1") is True
    assert launch._same("./1", "1") is True


# -- native_violations: the compiled native launch against upstream's documented one -------------------------------


def test_a_contract_without_policies_has_no_native_launch_to_check_against():
    c = SimpleNamespace(model="m", policies=None)
    assert launch.native_violations(c, _launch()) == [
        "m: the contract has no policies.native (upstream's documented launch)"]


def test_a_knob_the_launch_leaves_unset_takes_upstreams_default():
    c = _native_contract({"--local_attn_size": "-1", "--max_attention_size": None})
    assert launch.native_violations(c, _launch()) == []


def test_a_knob_with_another_value_than_the_documented_launch_is_named_with_both_values():
    # lingbot_v2's contract: run_fast.sh:20-21 passes --local_attn_size 18 over the parser default -1
    c = _native_contract({"--local_attn_size": "-1", "--sink_size": "0"}, args={"--local_attn_size": "18"})
    assert launch.native_violations(c, _launch(args=["--local_attn_size", "18.0", "--sink_size", "0"])) == []
    assert launch.native_violations(c, _launch(args=["--sink_size", "6"])) == [
        "--local_attn_size: the native launch gives '-1', upstream's documented launch '18' (o/r@abc123 run.sh:3)",
        "--sink_size: the native launch gives '6', upstream's documented launch '0' (o/r@abc123 run.sh:3)"]


def test_a_shim_switch_that_replaces_upstreams_memory_is_refused_in_either_argument_list():
    # dreamx's contract: --full-kv is the harness shim's FullKV switch, absent from the native launch
    c = _native_contract({}, absent=["--full-kv"])
    msg = "--full-kv: the native launch passes it; it replaces upstream's own memory (o/r@abc123 run.sh:3)"
    assert launch.native_violations(c, _launch(args=["--full-kv"])) == [msg]
    assert launch.native_violations(c, _launch(shim_args=["--full-kv"])) == [msg]
    assert launch.native_violations(c, _launch(args=["--other"], shim_args=["--x"])) == []


def test_knob_violations_come_before_shim_switch_violations():
    c = _native_contract({"WINDOW": "0"}, absent=["--full-kv"])
    assert launch.native_violations(c, _launch(shim_args=["--full-kv"], env={"WINDOW": "4"})) == [
        "WINDOW: the native launch gives '4', upstream's documented launch '0' (o/r@abc123 run.sh:3)",
        "--full-kv: the native launch passes it; it replaces upstream's own memory (o/r@abc123 run.sh:3)"]


# -- extract.main: the maintenance tool's command line --------------------------------------------------------------


def test_the_extractor_reads_the_first_path_it_is_given(tmp_path, capsys):
    first, second = tmp_path / "gen.py", tmp_path / "other.py"
    first.write_text("import argparse\np = argparse.ArgumentParser(allow_abbrev=False)\n"
                     "p.add_argument('-n', '--num', type=int, required=True)\n")
    second.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--other')\n")
    extract.main([str(first), str(second)])
    assert yaml.safe_load(capsys.readouterr().out) == {
        "parser": {"line": 2, "allow_abbrev": False},
        "flags": {"--num": {"line": 3, "aliases": ["-n"], "type": "int", "required": True}}}


# -- validation: names only the hub confirms -----------------------------------------------------------------------


def test_a_hub_confirmed_name_may_be_one_of_the_checkpoint_entrys_own_files():
    # evoke's checkpoint entry names transformer/ inside the folder; no weight under 'checkpoint' names it
    raw = copy.deepcopy(yaml.safe_load(contracts.contract_path("evoke").read_text()))
    raw["checkpoint"][0]["hub_confirmed"] = ["transformer"]
    assert contract_from_raw(raw, "evoke").checkpoint[0].hub_confirmed == ("transformer",)
