"""The rules of harness/app/argv.py, one at a time and in this process: the command words and group choices of
:func:`precheck_argv`, the Slurm check, the sweep pre-pass and its job validation, the ``--help`` filter, the
overrides' one-line errors (:func:`check_overrides`, :func:`_composable`, :func:`_unknown_key`,
:func:`_composition_error`), the single composition of :func:`composed_once` and the sweep an experiment defines.
Hydra's composition is real where the message depends on the config's keys; elsewhere it is stubbed (it is slow)."""

from __future__ import annotations

import shutil

import pytest
from hydra._internal.hydra import Hydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from harness import config_groups, installed_models
from harness.app import argv, extras, settings
from harness.app.argv import (
    OverrideCheck,
    _composable,
    _composition_error,
    _kept_for,
    _unknown_key,
    _validate_sweep,
    check_overrides,
    check_slurm,
    command_word_rewrites,
    composed_once,
    experiment_sweep,
    hide_internal_options_in_help,
    precheck_argv,
    prepass,
    resolved,
)
from harness.errors import UserError

COMMANDS = ("run", "list", "judge check", "judge run")


class Skipped(UserError):
    """A job with nothing to run (the ``skipped`` class :func:`prepass` takes)."""


def _exit(capsys, call, *args):
    """``call(*args)`` must exit: (its exit code, the stderr it wrote)."""
    with pytest.raises(SystemExit) as info:
        call(*args)
    return info.value.code, capsys.readouterr().err


# -- precheck_argv: command words and group choices ---------------------------------------------------------------

def test_a_command_word_after_the_program_becomes_cmd_and_the_program_name_is_kept():
    assert precheck_argv(["list", "list", "run", "seed=1"], ("list", "run")) == [
        "list", "cmd=list", "cmd=run", "seed=1"]


def test_a_broken_installed_model_is_one_line_before_anything_else(monkeypatch, capsys):
    def broken():
        raise installed_models.InstalledModelError("model package 'x' has no conf/model/x.yaml")

    monkeypatch.setattr(installed_models, "installed_models", broken)
    code, err = _exit(capsys, precheck_argv, ["prog", "seed=1"], ())
    assert code == 2 and err == "error: model package 'x' has no conf/model/x.yaml\n"


def test_the_launchers_are_checked_on_the_arguments_after_the_program(monkeypatch, capsys):
    seen = []

    def missing_extra(args):
        seen.append(list(args))
        raise UserError("launcher=slurm needs the dist extra")

    monkeypatch.setattr(extras, "check_launchers", missing_extra)
    code, err = _exit(capsys, precheck_argv, ["prog", "launcher=x", "run"], ("run",))
    assert code == 2 and err == "error: launcher=slurm needs the dist extra\n"
    assert seen == [["launcher=x", "cmd=run"]]


def test_a_slurm_launcher_right_after_the_program_is_checked_for_a_cluster(monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    monkeypatch.setattr(extras, "check_launchers", lambda args: None)  # as with the dist extra installed
    code, err = _exit(capsys, precheck_argv, ["prog", "launcher=slurm"], ())
    assert code == 2 and "sbatch and srun are not on PATH" in err


@pytest.mark.parametrize("arg", ["model=nope", "+model=nope", "model=reference,nope", "model=choice(reference,nope)",
                                 "model=choice(nope)"])
def test_an_unknown_group_choice_fails_with_the_options(capsys, arg):
    code, err = _exit(capsys, precheck_argv, ["prog", arg], ())
    assert code == 2 and err.startswith("error: Unknown model 'nope'.") and "Available: " in err


@pytest.mark.parametrize("arg", ["model=", "model=null", "seed=nope", "run=a=b", "model=glob(*)",
                                 "model=choice(reference,yume))", "context=range(1)", "-m", "--cfg", "x"])
def test_what_is_no_group_choice_passes_unchecked(arg):
    assert precheck_argv(["prog", arg], ()) == ["prog", arg]


@pytest.mark.parametrize("arg", ["model=choice(reference,yume)", "context=glob([fov,sliding])"])
def test_a_choice_or_glob_sweep_of_known_options_passes(arg):
    assert precheck_argv(["prog", arg], ()) == ["prog", arg]


def test_every_choice_of_a_swept_group_is_checked():
    assert precheck_argv(["prog", "model=reference,reference", "context=fov,sliding"], ()) == [
        "prog", "model=reference,reference", "context=fov,sliding"]


@pytest.mark.parametrize("flag", [["--config-dir={d}"], ["-cd", "{d}"]])
def test_a_config_dir_adds_its_options_to_the_choices(tmp_path, capsys, flag):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.yaml").write_text("name: mine\n")
    args = [f.format(d=tmp_path) for f in flag]
    assert precheck_argv(["prog", *args, "model=mine"], ()) == ["prog", *args, "model=mine"]
    code, _ = _exit(capsys, precheck_argv, ["prog", "model=mine"], ())
    assert code == 2


def test_a_config_dir_flag_argparse_refuses_is_left_to_hydra(capsys):
    assert precheck_argv(["prog", "model=reference", "--config-dir"], ()) == [
        "prog", "model=reference", "--config-dir"]


# -- check_slurm ----------------------------------------------------------------------------------------------------

def _which(present):
    return lambda tool: f"/usr/bin/{tool}" if tool in present else None


def test_slurm_off_a_cluster_names_both_missing_tools(monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", _which(()))
    code, err = _exit(capsys, check_slurm, ["seed=1", "launcher=slurm"])
    assert code == 2 and err == (
        "error: launcher=slurm needs a Slurm cluster, but sbatch and srun are not on PATH here. Run on a Slurm login "
        "node, or test the same sweep locally with launcher=submitit_local (or launcher=basic).\n")


def test_slurm_with_one_tool_missing_names_that_one(monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", _which(("sbatch",)))
    code, err = _exit(capsys, check_slurm, ["+launcher=basic,slurm"])
    assert code == 2 and "but srun is not on PATH here." in err


@pytest.mark.parametrize("args", [["launcher=basic"], ["run=slurm"], ["launcher=slurm=x"], ["+launcher=slurmish"]])
def test_no_slurm_launcher_needs_no_cluster(monkeypatch, args):
    monkeypatch.setattr(shutil, "which", _which(()))
    assert check_slurm(args) is None


def test_slurm_on_a_cluster_passes(monkeypatch):
    monkeypatch.setattr(shutil, "which", _which(("sbatch", "srun")))
    assert check_slurm(["launcher=slurm"]) is None


# -- resolved -------------------------------------------------------------------------------------------------------

def test_a_resolved_config_has_its_interpolations_resolved():
    assert resolved(OmegaConf.create({"a": 2, "b": "${a}", "c": {"d": "x-${a}"}})) == {"a": 2, "b": 2,
                                                                                       "c": {"d": "x-2"}}


# -- prepass (Hydra's composition stubbed: each job's config holds its context and the secret it was given) ----------

TOKEN = "hf_" + "s9PrepassSecret1234567890abcdef"


@pytest.fixture
def secrets_seen(monkeypatch):
    seen: list[dict] = []
    monkeypatch.setattr(argv, "register_secrets", lambda values: seen.append(dict(values)))
    return seen


@pytest.fixture
def composer(monkeypatch):
    """``sweep_jobs`` (the first swept override expanded) and ``compose_config`` stubbed; returns their calls."""
    calls: dict[str, list] = {"sweep": [], "compose": []}

    def sweep_jobs(overrides):
        calls["sweep"].append(list(overrides))
        swept = [o for o in overrides if "," in o]
        plain = [o for o in overrides if o not in swept]
        if not swept:
            return [plain]
        key, values = swept[0].split("=", 1)
        return [[f"{key}={v}", *plain] for v in values.split(",")]

    def compose_config(overrides, hydra_config=False):
        calls["compose"].append(list(overrides))
        given = dict(o.lstrip("+").split("=", 1) for o in overrides)
        if given.get("context") == "nope":
            raise RuntimeError("In 'config': Could not find 'context/nope'")
        cfg = {"context": {"name": given.get("context", "fov")}, "model": {"env": {"HF_TOKEN": TOKEN}}}
        return OmegaConf.create({**cfg, **({"x": given["x"]} if "x" in given else {})})

    monkeypatch.setattr(settings, "sweep_jobs", sweep_jobs)
    monkeypatch.setattr(settings, "compose_config", compose_config)
    return calls


def test_a_plain_run_is_not_composed_by_the_prepass(secrets_seen, composer):
    calls = []
    assert prepass(["model=reference"], calls.append, Skipped) is None
    assert calls == [] and secrets_seen == [] and composer == {"sweep": [], "compose": []}


def test_an_argparse_error_is_left_to_hydra(secrets_seen, composer):
    calls = []
    assert prepass(["-m", "--config-dir"], calls.append, Skipped) is None
    assert calls == [] and secrets_seen == [] and composer == {"sweep": [], "compose": []}


def test_a_sweep_validates_every_job_and_learns_its_secrets(secrets_seen, composer):
    calls = []
    prepass(["-m", "context=fov,sliding", "seed=1"], calls.append, Skipped)
    assert [c["context"]["name"] for c in calls] == ["fov", "sliding"]
    assert composer == {"sweep": [["context=fov,sliding", "seed=1"]],
                        "compose": [["context=fov", "seed=1"], ["context=sliding", "seed=1"]]}
    assert secrets_seen == [{TOKEN: "HF_TOKEN"}] * 2


@pytest.mark.parametrize("flags", [["--cfg", "job"], ["--info", "all"], ["-m", "--cfg", "job"],
                                   ["-m", "--info", "all"]])
def test_cfg_and_info_learn_the_secrets_but_validate_nothing(secrets_seen, composer, flags):
    calls = []
    prepass([*flags, "seed=1"], calls.append, Skipped)
    assert calls == [] and secrets_seen == [{TOKEN: "HF_TOKEN"}] and composer["compose"] == [["seed=1"]]
    assert composer["sweep"] == ([["seed=1"]] if "-m" in flags else [])


def test_secrets_are_read_before_interpolations_resolve(secrets_seen, composer):
    calls = []
    assert prepass(["--cfg", "job", "+x=${oc.env:S9_ARGV_NO_SUCH_VARIABLE}"], calls.append, Skipped) is None
    assert secrets_seen == [{TOKEN: "HF_TOKEN"}]


def test_a_composition_error_is_left_to_hydra(secrets_seen, composer):
    calls = []
    assert prepass(["-m", "context=nope,fov"], calls.append, Skipped) is None
    assert calls == [] and secrets_seen == []


def test_a_sweep_composes_with_the_config_dir_of_the_command_line(tmp_path, secrets_seen, composer):
    calls = []
    prepass(["-m", "--config-dir", str(tmp_path), "context=myfov,fov"], calls.append, Skipped)
    path = f"hydra.searchpath=[file://{tmp_path.resolve()}]"
    assert composer["sweep"] == [["context=myfov,fov", path]]
    assert composer["compose"] == [["context=myfov", path], ["context=fov", path]]
    assert [c["context"]["name"] for c in calls] == ["myfov", "fov"]


# -- _validate_sweep ------------------------------------------------------------------------------------------------

JOBS = [["context=fov", "seed=1"], ["context=sliding", "seed=1"]]


def _configs(*names):
    return [OmegaConf.create({"context": n, "label": "c-${context}"}) for n in names]


def test_each_job_is_validated_with_its_resolved_config(capsys):
    seen = []
    _validate_sweep(JOBS, _configs("fov", "sliding"), seen.append, Skipped)
    assert seen == [{"context": "fov", "label": "c-fov"}, {"context": "sliding", "label": "c-sliding"}]
    assert capsys.readouterr().err == ""


def test_a_job_whose_config_cannot_resolve_stops_the_sweep(capsys):
    configs = [_configs("fov")[0], OmegaConf.create({"x": "${oc.env:S9_ARGV_NO_SUCH_VARIABLE}"})]
    code, err = _exit(capsys, _validate_sweep, JOBS, configs, lambda cfg: None, Skipped)
    assert code == 2 and err.startswith("error: sweep job #1 (context=sliding seed=1): config: ")
    assert err.endswith(" (no job was started)\n") and "S9_ARGV_NO_SUCH_VARIABLE" in err


def test_a_skipped_job_is_a_note_and_the_others_run(capsys):
    def validate(cfg):
        if cfg["context"] == "sliding":
            raise Skipped("nothing to run")

    _validate_sweep(JOBS, _configs("fov", "sliding"), validate, Skipped)
    assert capsys.readouterr().err == (
        "note: sweep job #1 (context=sliding seed=1): nothing to run; that job is skipped\n")


def test_a_sweep_whose_every_job_is_skipped_fails_with_the_first(capsys):
    def validate(cfg):
        raise Skipped(f"nothing in {cfg['context']}")

    code, err = _exit(capsys, _validate_sweep, JOBS, _configs("fov", "sliding"), validate, Skipped)
    assert code == 2 and err == ("error: sweep job #0 (context=fov seed=1): nothing in fov (and every other job of "
                                 "the sweep: no job was started)\n")


def test_a_user_error_in_any_job_stops_the_sweep(capsys):
    def validate(cfg):
        if cfg["context"] == "sliding":
            raise UserError("context.chunk=0: must be >= 1")

    code, err = _exit(capsys, _validate_sweep, JOBS, _configs("fov", "sliding"), validate, Skipped)
    assert code == 2 and err == ("error: sweep job #1 (context=sliding seed=1): context.chunk=0: must be >= 1 "
                                 "(no job was started)\n")


def test_a_bug_while_validating_is_exit_1_with_its_traceback(capsys):
    def validate(cfg):
        raise KeyError("boom")

    code, err = _exit(capsys, _validate_sweep, JOBS, _configs("fov", "sliding"), validate, Skipped)
    assert code == 1 and "Traceback" in err and "error: unexpected KeyError: 'boom'" in err


def test_a_sweep_of_no_job_validates_nothing(capsys):
    assert _validate_sweep([], [], lambda cfg: None, Skipped) is None
    assert capsys.readouterr().err == ""


# -- hide_internal_options_in_help ----------------------------------------------------------------------------------

@pytest.fixture
def help_listing(monkeypatch):
    """Hydra's listing stubbed with a fixed text (compact: one line per group; else one option per line)."""
    def listing(self, predicate, compact=True):
        if compact:
            return "Config groups\nmodel: _upstream_base, reference, yume\ncontext: fov, _x"
        return "model:\n  _upstream_base\n  reference\ncontext:\n  fov"

    monkeypatch.setattr(Hydra, "format_config_groups", listing)
    hide_internal_options_in_help()
    return lambda compact: Hydra.format_config_groups(None, lambda x: True, compact)


def test_the_compact_help_listing_leaves_out_internal_options(help_listing):
    assert help_listing(True) == "Config groups\nmodel: reference, yume\ncontext: fov"


def test_the_long_help_listing_leaves_out_internal_options(help_listing):
    assert help_listing(False) == "model:\n  reference\ncontext:\n  fov"


def test_the_help_listing_is_wrapped_once(help_listing):
    wrapped = Hydra.format_config_groups
    hide_internal_options_in_help()
    assert Hydra.format_config_groups is wrapped and wrapped._hides_internal is True
    assert help_listing(True) == "Config groups\nmodel: reference, yume\ncontext: fov"


# -- command_word_rewrites ------------------------------------------------------------------------------------------

WORDS = {("judge", "check"): "judge_check"}


def test_two_command_words_become_one_cmd():
    assert command_word_rewrites(["prog", "judge", "check"], WORDS) == ["prog", "cmd=judge_check"]
    assert command_word_rewrites(["prog", "judge", "check", "a=1", "b=2"], WORDS) == [
        "prog", "cmd=judge_check", "a=1", "b=2"]


@pytest.mark.parametrize("args", [["prog", "judge"], ["prog"], ["prog", "judge", "run"], ["prog", "x", "judge"]])
def test_other_words_are_left_as_they_are(args):
    out = command_word_rewrites(args, WORDS)
    assert out == args and out is not args


# -- _composable ----------------------------------------------------------------------------------------------------

def _user_error(call, *args):
    with pytest.raises(UserError) as info:
        call(*args)
    return str(info.value)


def test_a_sweep_is_composed_by_its_first_value_and_a_glob_is_left_out():
    assert _composable(["context=fov,sliding", "seed=range(1,3)", "model=glob(*)", "x=1", "~y",
                        "model=choice(a,b)"], COMMANDS) == {
        "context=fov": "context=fov,sliding", "seed=1": "seed=range(1,3)", "x=1": "x=1", "~y": "~y",
        "model=a": "model=choice(a,b)"}


def test_a_bare_word_near_a_command_gets_a_did_you_mean():
    assert _user_error(_composable, ["runn"], COMMANDS) == (
        "runn: neither a command nor key=value. Did you mean 'run'? Commands: run, list, judge check, judge run "
        "(`python -m harness --help`)")


def test_the_first_word_of_two_word_commands_names_them_all():
    assert _user_error(_composable, ["judge"], ("run", "weights", "judge check", "judge run")).startswith(
        "judge: neither a command nor key=value. Did you mean 'judge check' or 'judge run'? ")
    assert _user_error(_composable, ["weights"], ("weights", "weights list")).startswith(
        "weights: neither a command nor key=value. Did you mean 'weights list'? ")


def test_only_the_closest_command_is_offered():
    assert "Did you mean 'run'? " in _user_error(_composable, ["runn"], ("run", "rung", "list"))


def test_a_bare_word_far_from_every_command_gets_the_list_only():
    assert _user_error(_composable, ["xyzzy"], ("run", "list")) == (
        "xyzzy: neither a command nor key=value. Commands: run, list (`python -m harness --help`)")


def test_without_commands_a_bare_word_is_a_grammar_error():
    assert _user_error(_composable, ["xyzzy"], ()).startswith("xyzzy: cannot read this override (")


def test_an_override_the_grammar_cannot_read_names_hydras_first_line():
    assert _user_error(_composable, ["a=[b"], ()) == (
        "a=[b: cannot read this override (no viable alternative at input '[b'); write key=value, quoting a value "
        "with spaces or brackets: 'key=[a,b]' (Hydra's override grammar)")


# -- _unknown_key (the real composition) ----------------------------------------------------------------------------

def test_an_unknown_top_level_key_gets_a_did_you_mean_and_the_docs():
    assert _unknown_key("modle", "modle=reference", [], []) == (
        "modle=reference: the config has no setting 'modle'. Did you mean 'model'? `python -m harness --help` and "
        "docs/configuration.md list them.")


def test_an_unknown_key_far_from_every_key_gets_no_did_you_mean():
    assert _unknown_key("a.b.c", "a.b.c=1", [], []) == (
        "a.b.c=1: the config has no setting 'a'. `python -m harness --help` and docs/configuration.md list them.")


def test_an_unknown_key_in_a_section_lists_the_sections_keys():
    msg = _unknown_key("evaluate.devcie", "evaluate.devcie=cpu", [], [])
    assert msg.startswith("evaluate.devcie=cpu: 'evaluate' has no setting 'devcie'. Did you mean 'evaluate.device'? "
                          "Its settings: aesthetic, backbone_options, bootstrap, canvas, ")
    assert msg.endswith(", trackers, validity.")


def test_a_key_below_a_value_has_no_listing():
    assert _unknown_key("model.height.x", "model.height.x=1", [], []) == (
        "model.height.x=1: 'model.height' has no setting 'x'.")
    assert _unknown_key("model.height.x.y", "model.height.x.y=1", [], []) == (
        "model.height.x.y=1: 'model.height' has no setting 'x'.")


def test_a_section_of_one_key_lists_it():
    assert _unknown_key("s9.b", "s9.b=1", ["+s9={a: 1}"], []) == "s9.b=1: 's9' has no setting 'b'. Its settings: a."


@pytest.mark.parametrize("n, listed", [(40, True), (41, False)])
def test_a_section_of_up_to_40_keys_is_listed(n, listed):
    others = [f"+s9.k{i:02d}={i}" for i in range(n)]
    msg = _unknown_key("s9.zzz", "s9.zzz=1", others, [])
    assert msg.startswith("s9.zzz=1: 's9' has no setting 'zzz'.")
    assert (" Its settings: k00, k01," in msg) is listed and msg.endswith(f"k{n - 1:02d}." if listed else "'zzz'.")


def test_hydras_own_keys_are_looked_up_in_the_hydra_node():
    assert _unknown_key("hydra.jobb", "hydra.jobb=x", [], []).startswith(
        "hydra.jobb=x: 'hydra' has no setting 'jobb'. Did you mean 'hydra.job'? Its settings: ")


def test_when_another_override_fails_too_the_key_is_named_plainly():
    assert _unknown_key("modle", "modle=x", ["context=nope"], []) == (
        "modle=x: the config has no setting 'modle' (docs/configuration.md lists them)")


# -- check_overrides ------------------------------------------------------------------------------------------------

@pytest.fixture
def composed(monkeypatch):
    """``compose_config`` stubbed: it records its arguments and returns a marker."""
    calls = []

    def compose(overrides, hydra_config=False):
        calls.append((list(overrides), hydra_config))
        return "COMPOSED"

    monkeypatch.setattr(settings, "compose_config", compose)
    return calls


@pytest.mark.parametrize("args", [["--help"], ["--hydra-help"], ["--config-dir"]])
def test_help_and_argparse_errors_are_not_checked(composed, args):
    assert check_overrides(args, COMMANDS) is None and composed == []


def test_a_plain_run_is_deferred_to_hydras_own_composition(composed):
    assert check_overrides(["seed=1", "context=fov"], COMMANDS) == OverrideCheck(
        {"seed=1": "seed=1", "context=fov": "context=fov"}, [], None, True)
    assert composed == []


@pytest.mark.parametrize("args", [["-m", "seed=1"], ["--cfg", "job", "seed=1"], ["--info", "all", "seed=1"],
                                  ["--shell-completion", "seed=1"], ["seed=1,2"]])
def test_a_sweep_cfg_info_or_completion_is_composed_up_front(composed, args):
    check = check_overrides(args, COMMANDS)
    assert check == OverrideCheck({"seed=1": args[-1]}, [], "COMPOSED", False)
    assert composed == [(["seed=1"], True)]


@pytest.mark.parametrize("flag", [["--config-name", "config"], ["--config-path", "conf"]])
def test_another_primary_config_is_composed_but_hydra_reads_its_mode(composed, flag):
    assert check_overrides([*flag, "seed=1"], COMMANDS) == OverrideCheck({"seed=1": "seed=1"}, [], None, False)
    assert composed == [(["seed=1"], True)]


def test_a_config_dir_becomes_a_search_path(composed, tmp_path):
    check = check_overrides(["-m", "--config-dir", str(tmp_path), "seed=1"], COMMANDS)
    extra = f"hydra.searchpath=[file://{tmp_path.resolve()}]"
    assert check == OverrideCheck({"seed=1": "seed=1"}, [extra], "COMPOSED", False)
    assert composed == [(["seed=1", extra], True)]


def test_a_word_that_is_no_command_is_one_line(composed, capsys):
    code, err = _exit(capsys, check_overrides, ["runn"], COMMANDS)
    assert code == 2 and err.startswith("error: runn: neither a command nor key=value. Did you mean 'run'?")


def test_a_composition_error_is_one_line_naming_the_overrides(capsys):
    code, err = _exit(capsys, check_overrides, ["-m", "context=nope,fov"], COMMANDS)
    assert code == 2 and err == "error: In 'config': Could not find 'context/nope' (in: context=nope,fov)\n"


# -- _composition_error ---------------------------------------------------------------------------------------------

STRUCT = "Could not override 'modle'.\nTo append to your config use +modle=reference\nKey 'modle' is not in struct"


def test_an_override_of_an_unknown_key_gets_the_unknown_key_line():
    overrides = {"seed=1": "seed=1", "modle=reference": "modle=reference"}
    assert _composition_error(Exception(STRUCT), overrides, []) == (
        "modle=reference: the config has no setting 'modle'. Did you mean 'model'? `python -m harness --help` and "
        "docs/configuration.md list them.")


def test_the_unknown_key_line_quotes_the_override_as_given():
    overrides = {"+modle=a": "+modle=a,b"}
    assert _composition_error(Exception(STRUCT), overrides, []).startswith("+modle=a,b: the config has no setting")


def test_an_unknown_key_no_override_names_is_hydras_first_line():
    exc = Exception("Could not override 'other'.\nKey 'other' is not in struct")
    assert _composition_error(exc, {"seed=1": "seed=1"}, []) == "Could not override 'other'. (in: seed=1)"


def test_an_override_hydra_cannot_convert_is_hydras_first_line():
    exc = Exception("Could not override 'seed'.\nValue 'x' could not be converted to Integer")
    assert _composition_error(exc, {"seed=x": "seed=x"}, []) == "Could not override 'seed'. (in: seed=x)"


def test_the_cause_of_hydras_error_is_read_too():
    exc = Exception("Could not override 'modle'.")
    exc.__cause__ = KeyError("Key 'modle' not in 'config'")
    assert _composition_error(exc, {"modle=x": "modle=x"}, []).startswith(
        "modle=x: the config has no setting 'modle'. Did you mean 'model'?")


def test_a_plus_on_an_existing_key_says_to_drop_the_plus():
    exc = Exception("Could not append to config. An item is already at 'seed'.")
    assert _composition_error(exc, {"+seed=1": "+seed=1"}, []) == (
        "+seed=...: 'seed' exists already: set it without the '+' (seed=...)")


def test_another_error_is_its_first_nonempty_line_or_its_type():
    assert _composition_error(Exception("\n  In 'config': bad  \nmore"), {"a=1": "a=1", "b=2": "b=2,3"}, []) == (
        "In 'config': bad (in: a=1 b=2,3)")
    assert _composition_error(ValueError(""), {}, []) == "ValueError (in: )"


# -- composed_once and _kept_for ------------------------------------------------------------------------------------

def _mode_cfg(mode=None):
    return OmegaConf.create({"hydra": {"mode": mode, "overrides": {"hydra": []}}, "seed": 1})


@pytest.fixture
def hydra_compose(monkeypatch):
    """Hydra's own ``compose_config`` stubbed: it records each call and returns a new config without a mode."""
    calls = []

    def compose(self, config_name, overrides, run_mode, with_log_configuration=False, from_shell=True,
                validate_sweep_overrides=True):
        calls.append((config_name, list(overrides), run_mode, with_log_configuration, from_shell,
                      validate_sweep_overrides))
        return _mode_cfg()

    monkeypatch.setattr(Hydra, "compose_config", compose)
    return calls


@pytest.mark.parametrize("check", [None, OverrideCheck({}, [], None, False)])
def test_without_a_composition_hydra_keeps_its_own_way(hydra_compose, check):
    get_mode, compose = Hydra.get_mode, Hydra.compose_config
    with composed_once(check):
        assert Hydra.get_mode is get_mode and Hydra.compose_config is compose


def test_a_composed_config_gives_hydra_its_mode_without_composing(hydra_compose):
    get_mode, compose = Hydra.get_mode, Hydra.compose_config
    check = OverrideCheck({}, [], OmegaConf.create({"hydra": {"mode": "MULTIRUN"}}), False)
    with composed_once(check):
        assert Hydra.get_mode(None, "config", ["seed=1"]) == "MULTIRUN"
    assert hydra_compose == [] and Hydra.get_mode is get_mode and Hydra.compose_config is compose


def test_a_deferred_run_composes_once_for_the_mode_and_the_job(hydra_compose):
    with composed_once(OverrideCheck({"seed=1": "seed=1"}, [], deferred=True)):
        assert Hydra.get_mode(None, "config", ["seed=1"]) is None
        cfg = Hydra.compose_config(None, "config", ["seed=1"], RunMode.RUN, with_log_configuration=True)
        assert cfg.seed == 1
        assert len(hydra_compose) == 1  # the run's call took the kept config
        Hydra.compose_config(None, "config", ["seed=1"], RunMode.RUN, with_log_configuration=True)
    assert hydra_compose == [("config", ["seed=1"], RunMode.RUN, True, True, True)] * 2  # kept once only


def test_the_kept_config_gets_the_run_mode_hydra_adds(hydra_compose):
    with composed_once(OverrideCheck({}, [], deferred=True)):
        Hydra.get_mode(None, "config", ["seed=1"])
        cfg = Hydra.compose_config(None, "config", ["seed=1", "hydra.mode=RUN"], RunMode.RUN, True)
    assert len(hydra_compose) == 1 and cfg.hydra.mode == RunMode.RUN
    assert list(cfg.hydra.overrides.hydra) == ["hydra.mode=RUN"]


@pytest.mark.parametrize("args, kwargs", [
    ((RunMode.RUN,), {}),
    ((RunMode.MULTIRUN, True), {}),
    ((RunMode.RUN, True), {"from_shell": False}),
    ((RunMode.RUN, True), {"validate_sweep_overrides": False}),
])
def test_other_compositions_are_hydras_own(hydra_compose, args, kwargs):
    with composed_once(OverrideCheck({}, [], deferred=True)):
        Hydra.get_mode(None, "config", ["seed=1"])
        Hydra.compose_config(None, "config", ["seed=1"], *args, **kwargs)
    full = (*args, *((False,) if len(args) == 1 else ()))
    assert hydra_compose[1] == ("config", ["seed=1"], *full, kwargs.get("from_shell", True),
                                kwargs.get("validate_sweep_overrides", True))


def test_a_deferred_composition_error_is_one_line(monkeypatch, capsys):
    def compose(self, config_name, overrides, run_mode, with_log_configuration=False, from_shell=True,
                validate_sweep_overrides=True):
        raise UserError("context.chunk=0: must be >= 1")

    monkeypatch.setattr(Hydra, "compose_config", compose)
    with composed_once(OverrideCheck({}, [], deferred=True)):
        code, err = _exit(capsys, Hydra.get_mode, None, "config", ["seed=1"])
    assert code == 2 and err == "error: context.chunk=0: must be >= 1\n"


def test_a_kept_config_is_taken_once():
    cfg = _mode_cfg()
    kept = {("config", ("seed=1",)): cfg}
    assert _kept_for(kept, "config", ["seed=1"]) is cfg and kept == {}
    assert _kept_for(kept, "config", ["seed=1"]) is None


def test_a_config_kept_with_the_run_mode_given_is_taken_as_it_is():
    cfg = _mode_cfg("RUN")
    kept = {("config", ("seed=1", "hydra.mode=RUN")): cfg, ("config", ("seed=1",)): _mode_cfg()}
    assert _kept_for(kept, "config", ["seed=1", "hydra.mode=RUN"]) is cfg and list(cfg.hydra.overrides.hydra) == []


def test_overrides_without_the_run_mode_never_take_a_shorter_kept_config():
    kept = {("config", ()): _mode_cfg()}
    assert _kept_for(kept, "config", ["seed=2"]) is None and len(kept) == 1


def test_a_run_mode_added_by_hydra_finds_the_config_kept_without_it():
    kept = {("config", ("seed=1",)): _mode_cfg()}
    cfg = _kept_for(kept, "config", ["seed=1", "hydra.mode=RUN"])
    assert cfg.hydra.mode == RunMode.RUN and list(cfg.hydra.overrides.hydra) == ["hydra.mode=RUN"] and kept == {}


def test_a_kept_config_that_sets_its_mode_is_not_taken_for_an_added_run_mode():
    kept = {("config", ("seed=1",)): _mode_cfg("MULTIRUN")}
    assert _kept_for(kept, "config", ["seed=1", "hydra.mode=RUN"]) is None


@pytest.mark.parametrize("overrides", [["seed=2"], ["seed=2", "hydra.mode=RUN"], ["hydra.mode=RUN", "seed=1"]])
def test_other_overrides_find_no_kept_config(overrides):
    assert _kept_for({("config", ("seed=1",)): _mode_cfg()}, "config", overrides) is None


# -- experiment_sweep -----------------------------------------------------------------------------------------------

@pytest.fixture
def experiment(monkeypatch, tmp_path):
    """``experiment=<name>`` reads ``tmp_path/<name>.yaml`` (the text given)."""
    def write(name, text):
        (tmp_path / f"{name}.yaml").write_text(text)

    monkeypatch.setattr(config_groups, "option_file", lambda group, name: tmp_path / f"{name}.yaml")
    return write


SWEEP_YAML = "hydra:\n  sweeper:\n    params:\n      context: fov,sliding\n      seed: 1,2\n"


@pytest.mark.parametrize("flag", [["--info", "all"], ["--help"], ["--hydra-help"]])
def test_help_and_info_run_no_experiment_sweep(experiment, flag):
    experiment("e", SWEEP_YAML)
    assert experiment_sweep([*flag, "experiment=e"]) == {}


def test_an_experiment_sweep_is_its_params_as_text_minus_the_keys_given(experiment):
    experiment("e", SWEEP_YAML)
    assert experiment_sweep(["experiment=e"]) == {"context": "fov,sliding", "seed": "1,2"}
    assert experiment_sweep(["bare", "+seed=3", "experiment=e", "cmd=run"]) == {"context": "fov,sliding"}


def test_an_experiment_name_is_the_whole_value(experiment):
    experiment("e", SWEEP_YAML)
    assert experiment_sweep(["experiment=e=x"]) == {}


@pytest.mark.parametrize("text", ["", "hydra:\n", "hydra: {sweeper: {}}\n", "hydra: {sweeper: {params: null}}\n",
                                  "seed: 1\n", "[1, 2]\n", "hydra: {sweeper: {params: {a: [b\n"])
def test_an_experiment_without_a_sweep_runs_as_one_job(experiment, text):
    experiment("e", text)
    assert experiment_sweep(["experiment=e"]) == {}


def test_an_empty_experiment_choice_runs_no_sweep(experiment):
    assert experiment_sweep(["experiment="]) == {}
