"""The dispatch table's rules (``harness/app/cli.py``), one at a time in this process. Hydra's ``main`` is a stand-in
where a test needs only what the command line hands it (``sys.argv``) and how its exit codes are read; everything
before it (the checks of the command line) runs for real."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from harness.app import argv as argv_mod
from harness.app import cli, console, settings
from harness.app.commands import run
from harness.errors import CommandExit, UserError

# -- the table -------------------------------------------------------------------------------------------------------


def test_the_config_commands_are_every_hydra_command_in_table_order():
    assert cli.config_commands() == ["run", "list", "validate", "preview", "verify", "report", "judge_check", "setup",
                                     "release_import", "release_check"]


def test_an_argv_command_runs_its_modules_function_with_the_words_after_it(monkeypatch):
    seen = []
    monkeypatch.setattr("harness.app.weights.main", lambda words: seen.append(words) or 7)
    assert cli.HANDLERS["weights"](["list", "--json"]) == 7 and seen == [["list", "--json"]]


# -- dispatch --------------------------------------------------------------------------------------------------------


@pytest.fixture
def calls(monkeypatch):
    """What dispatch's body did, in order: the validated config is a stand-in whose fields the body reads."""
    seen: list = []
    cfg = SimpleNamespace(cmd="list", stage="all", verbosity="debug", progress=False)

    def load(raw):
        seen.append(("load", raw.get("cmd")))
        return cfg

    monkeypatch.setattr(settings, "load_run_config", load)
    monkeypatch.setattr("harness.logs.setup_logging", lambda level: seen.append(("logging", level)))
    monkeypatch.setattr("harness.secrets.install_log_filter", lambda: seen.append(("filter",)))
    monkeypatch.setattr("harness.logs.apply_progress", lambda on: seen.append(("progress", on)))
    monkeypatch.setattr(console, "register_secrets", lambda values: seen.append(("secrets", values)))
    for name in ("list", "run"):
        monkeypatch.setitem(cli.HANDLERS, name, lambda c, n=name: seen.append((n, c is cfg)))
    monkeypatch.setitem(cli.STAGE_HANDLERS, "evaluate", lambda c: seen.append(("evaluate-only", c is cfg)))
    return SimpleNamespace(seen=seen, cfg=cfg)


def test_dispatch_learns_the_secrets_then_validates_sets_up_logging_and_runs_the_handler(calls):
    token = "hf_" + "DispatchSecretValue0123456789ab"
    cli.dispatch(OmegaConf.create({"cmd": "list", "model": {"env": {"HF_TOKEN": token}}}))
    assert calls.seen == [("secrets", {token: "HF_TOKEN"}), ("load", "list"), ("logging", "debug"), ("filter",),
                          ("progress", False), ("list", True)]


def test_a_run_goes_to_its_stages_handler_and_any_other_command_keeps_its_own(calls):
    calls.cfg.cmd, calls.cfg.stage = "run", "evaluate"
    cli.dispatch(OmegaConf.create({"cmd": "run"}))
    calls.cfg.stage = "all"
    cli.dispatch(OmegaConf.create({"cmd": "run"}))
    calls.cfg.cmd, calls.cfg.stage = "list", "evaluate"
    cli.dispatch(OmegaConf.create({"cmd": "list"}))
    assert [c for c in calls.seen if c[0] in ("evaluate-only", "run", "list")] == [
        ("evaluate-only", True), ("run", True), ("list", True)]


def test_a_config_without_cmd_runs(calls):
    calls.cfg.cmd = "run"
    cli.dispatch(OmegaConf.create({"seed": 1}))
    assert ("run", True) in calls.seen and ("load", None) in calls.seen  # the raw config itself has no cmd


def test_an_interpolation_that_cannot_resolve_is_one_line_and_exit_2(calls, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.dispatch(OmegaConf.create({"cmd": "list", "path": "${nowhere.at_all}"}))
    assert exc.value.code == 2 and calls.seen == []
    assert capsys.readouterr().err == "error: config: path: Interpolation key 'nowhere.at_all' not found\n"


def test_an_error_without_a_key_or_a_message_is_still_one_line():
    class Bare(Exception):
        pass

    assert cli._one_line(Bare()) == "Bare"
    assert cli._one_line(ValueError("first\n  second")) == "first"


@pytest.mark.parametrize("cmd", ["weights", "human", "frobnicate"])
def test_a_command_hydra_does_not_run_is_refused_with_the_ones_it_does(calls, capsys, cmd):
    with pytest.raises(SystemExit) as exc:
        cli.dispatch(OmegaConf.create({"cmd": cmd}))
    assert exc.value.code == 2 and [c[0] for c in calls.seen] == ["secrets"]
    assert capsys.readouterr().err == (f"error: cmd={cmd!r}: use one of run, list, validate, preview, verify, report, "
                                       "judge_check, setup, release_import, release_check\n")


def test_a_user_error_of_the_handler_is_one_line_and_exit_2(calls, capsys, monkeypatch):
    def refuse(cfg):
        raise UserError("model.num_frames: must be positive (set it to 1 or more)")

    monkeypatch.setitem(cli.HANDLERS, "list", refuse)
    with pytest.raises(SystemExit) as exc:
        cli.dispatch(OmegaConf.create({"cmd": "list"}))
    assert exc.value.code == 2
    assert capsys.readouterr().err == "error: model.num_frames: must be positive (set it to 1 or more)\n"


def test_the_task_function_marks_the_config_as_handed_over_then_dispatches(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "_DISPATCHED", [])
    monkeypatch.setattr(cli, "dispatch", lambda c: seen.append((c, list(cli._DISPATCHED))))
    cli.task("composed")
    assert seen == [("composed", [True])] and cli._DISPATCHED == [True]


def test_each_sweep_job_is_validated_as_its_command_will_take_it(monkeypatch):
    seen = []
    monkeypatch.setattr(settings, "load_run_config", lambda raw: ("validated", raw["seed"]))
    monkeypatch.setattr(run, "validate_job", seen.append)
    cli._validate_job({"seed": 3})
    assert seen == [("validated", 3)]


# -- _run_hydra and main ---------------------------------------------------------------------------------------------


@pytest.fixture
def hydra_main(monkeypatch):
    """hydra.main stand-in: records ``sys.argv`` when Hydra would parse it, then does ``then(task)``."""
    import hydra

    state = SimpleNamespace(argv=None, then=lambda task: None, prepass=[])
    monkeypatch.setattr(sys, "argv", list(sys.argv))

    def main(version_base, config_path, config_name):
        assert (version_base, config_path, config_name) == ("1.3", "pkg://conf", "config")

        def decorate(task):
            def runner():
                state.argv = list(sys.argv)
                state.then(task)
            return runner
        return decorate

    monkeypatch.setattr(hydra, "main", main)
    monkeypatch.setattr(argv_mod, "prepass", lambda argv, validate, skipped: state.prepass.append(
        (argv, validate is cli._validate_job, skipped is run.NothingToRun)))
    return state


def test_a_command_word_becomes_cmd_and_the_program_name_is_kept(hydra_main):
    cli._run_hydra(["harness", "list", "verbosity=debug"])
    assert hydra_main.argv == ["harness", "cmd=list", "verbosity=debug"]
    assert hydra_main.prepass == [(["cmd=list", "verbosity=debug"], True, True)]


def test_an_experiment_that_sweeps_runs_as_its_sweep_and_says_how_to_run_one_job(hydra_main, caplog):
    with caplog.at_level(logging.INFO, logger="harness.app.cli"):
        cli._run_hydra(["harness", "experiment=first_look"])
    assert hydra_main.argv == ["harness", "-m", "experiment=first_look"]
    assert [r.getMessage() for r in caplog.records if r.name == "harness.app.cli"] == [
        "experiment sweeps context=fov,sliding: running it as a sweep (-m); set context=<value> to run one job"]


def test_the_secrets_of_the_command_line_are_learned_before_hydra_runs(hydra_main, monkeypatch):
    learned = []
    monkeypatch.setattr(console, "register_secrets", learned.append)
    token = "hf_" + "CommandLineSecretValue0123456"
    cli._run_hydra(["harness", f"model.env.HF_TOKEN={token}", "dry_run=true"])
    assert learned == [{token: "HF_TOKEN"}] and hydra_main.argv is not None


def _exit_code(hydra_main, then, raises: type[SystemExit] = SystemExit) -> int:
    """The exit code of ``harness list`` when Hydra's run does ``then(task)``."""
    hydra_main.then = then
    with pytest.raises(raises) as exc:
        cli._run_hydra(["harness", "list"])
    return exc.value.code


def _raising(exc: SystemExit, after_job: bool = False):
    def then(task):
        if after_job:
            task("composed")
        raise exc
    return then


def test_hydras_exit_1_before_any_job_is_a_usage_error_exit_2(hydra_main):
    assert _exit_code(hydra_main, _raising(SystemExit(1))) == 2


def test_an_exit_1_after_a_job_started_or_a_commands_own_exit_1_stays_1(hydra_main, monkeypatch):
    monkeypatch.setattr(cli, "dispatch", lambda c: None)
    assert _exit_code(hydra_main, _raising(SystemExit(1), after_job=True)) == 1
    assert _exit_code(hydra_main, _raising(CommandExit(1)), raises=CommandExit) == 1


def test_another_exit_code_of_hydra_is_passed_on(hydra_main):
    assert _exit_code(hydra_main, _raising(SystemExit(3))) == 3


def test_a_second_run_in_one_process_forgets_that_the_first_dispatched(hydra_main, monkeypatch):
    monkeypatch.setattr(cli, "dispatch", lambda c: None)
    hydra_main.then = lambda task: task("composed")
    cli._run_hydra(["harness", "list"])
    assert _exit_code(hydra_main, _raising(SystemExit(1))) == 2


def test_main_runs_an_argv_command_with_the_words_after_it_and_exits_with_its_code(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "argv", ["harness", "weights", "list"])
    monkeypatch.setattr("harness.app.weights.main", lambda words: seen.append(words) or 4)
    monkeypatch.setattr("harness.logs.setup_logging", lambda *a: seen.append("logging"))
    monkeypatch.setattr(cli, "_run_hydra", lambda argv: seen.append("hydra"))
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 4 and seen == ["logging", ["list"]]


def test_main_hands_two_word_commands_to_hydra_as_cmd_and_scrubs_both_streams_meanwhile(monkeypatch):
    seen = []
    out, err = sys.stdout, sys.stderr
    monkeypatch.setattr(sys, "argv", ["harness", "judge", "check", "x=1"])
    monkeypatch.setattr("harness.logs.setup_logging", lambda *a: None)
    scrubbed = sys.modules["harness.secrets"].ScrubbedStream  # the class main reads (a test may reimport the module)
    monkeypatch.setattr(cli, "_run_hydra", lambda argv: seen.append(
        (argv, isinstance(sys.stdout, scrubbed), isinstance(sys.stderr, scrubbed))))
    cli.main()
    assert seen == [(["harness", "cmd=judge_check", "x=1"], True, True)]
    assert (sys.stdout, sys.stderr) == (out, err)  # put back


def test_main_with_no_words_runs_the_default_command(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "argv", ["harness"])
    monkeypatch.setattr("harness.logs.setup_logging", lambda *a: None)
    monkeypatch.setattr(cli, "_run_hydra", seen.append)
    cli.main()
    assert seen == [["harness"]]


def test_ctrl_c_in_main_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(sys, "argv", ["harness", "list"])
    monkeypatch.setattr("harness.logs.setup_logging", lambda *a: None)
    monkeypatch.setattr(cli, "_run_hydra", interrupted)
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 130 and capsys.readouterr().err == f"\n{console.INTERRUPTED}\n"


def test_a_sweeps_misspelled_key_is_refused_before_hydra_runs(hydra_main, capsys):
    """A sweep's overrides are composed by the check itself (a plain run's are checked when Hydra composes)."""
    with pytest.raises(SystemExit) as exc:
        cli._run_hydra(["harness", "-m", "modle=reference"])
    assert exc.value.code == 2 and hydra_main.argv is None
    err = capsys.readouterr().err
    assert err.startswith("error: modle") and err.count("\n") == 1


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_hides_the_internal_options_and_only_help_does(hydra_main, monkeypatch, flag):
    hidden = []
    monkeypatch.setattr(argv_mod, "hide_internal_options_in_help", lambda: hidden.append(True))
    cli._run_hydra(["harness", "list"])
    assert hidden == []
    cli._run_hydra(["harness", flag])
    assert hidden == [True] and hydra_main.argv[-1] == flag


def test_main_runs_an_argv_command_given_no_further_words(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "argv", ["harness", "weights"])
    monkeypatch.setattr("harness.app.weights.main", lambda words: seen.append(words) or 0)
    monkeypatch.setattr("harness.logs.setup_logging", lambda *a: None)
    monkeypatch.setattr(cli, "_run_hydra", lambda argv: seen.append("hydra"))
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 0 and seen == [[]]
