"""The rules of the command line's boundary with the console (harness/app/console.py: exit codes and messages of
``fail``, ``interrupted``, ``bug`` and ``guarded``) and of the small command handlers of harness/app/commands/tools.py
and harness/app/release.py, in this process. The collaborators that do the work (the report builder, ``verify_run``,
``run_setup``, the judge ping, the release importer and check) are stubbed by recorders; the run folders, locks,
confinement, manifests, configs and summaries are the project's own."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
from pathlib import Path

import pytest

import evaluate.judge
import evaluate.release.check as release_check_mod
import evaluate.reporting.cli as reporting_cli
import harness.app.setup as setup_mod
import harness.app.verify as verify_mod
from evaluate.release import importer
from evaluate.release.plan import ImportSummary
from harness import secrets
from harness.app import console, extras, release
from harness.app.commands import evaluation, tools
from harness.app.run_config import RunConfig
from harness.app.verify import CHECKS, ItemCheck, VerifyReport
from harness.errors import ConfigError, UserError
from harness.io import ContainmentError, check_contained
from harness.outputs import PlanError, WorkItem

SECRET = "hunter2-very-secret-value"
BUG_TAIL = (". Unless the traceback above points at your environment (a file, a device, the network), this is a bug "
            "in the harness: please report it with the traceback\n")
ITEM = WorkItem("m", "fullkv", 1, "lrlr", "c1")


@pytest.fixture(autouse=True)
def _no_secrets():
    secrets.clear_registry()
    yield
    secrets.clear_registry()


def _exit_code(call) -> int:
    with pytest.raises(SystemExit) as e:
        call()
    return e.value.code


def _raises(exc: BaseException):
    def body():
        raise exc
    return body


def _held(lock: Path) -> bool:
    """Whether some open file of this process holds the ``flock`` of ``lock``."""
    if not lock.is_file():
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _confined_to(*inside: Path, outside: Path) -> bool:
    """Whether writes are confined so that every path of ``inside`` may be written and ``outside`` may not."""
    for p in inside:
        check_contained(p / "x")
    try:
        check_contained(outside / "x")
    except ContainmentError:
        return True
    return False


def _run(root: Path, name: str, *rows: dict) -> Path:
    """A run folder ``root/name`` with a manifest of ``rows``."""
    run = root / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _row(status: str = "done") -> dict:
    return {**ITEM.to_dict(), "key": ITEM.key, "dir": ITEM.key, "status": status}


def _cfg(root: Path, **over) -> RunConfig:
    return RunConfig.from_mapping({"output_root": str(root), "progress": False, **over})


# -- fail / interrupted / bug -----------------------------------------------------------------------------------------
def test_a_user_error_is_one_line_on_stderr_with_exit_code_2(capsys):
    assert _exit_code(lambda: console.fail("model.name: not a plain name")) == 2
    out = capsys.readouterr()
    assert out.err == "error: model.name: not a plain name\n" and out.out == ""


def test_a_user_error_names_no_registered_secret(capsys):
    console.register_secrets({SECRET: "MY_TOKEN"})
    assert _exit_code(lambda: console.fail(f"bad endpoint {SECRET}")) == 2
    assert capsys.readouterr().err == "error: bad endpoint <redacted:MY_TOKEN>\n"


def test_registered_secrets_are_known_to_the_registry_by_value():
    console.register_secrets({SECRET: "MY_TOKEN"})
    assert secrets.registered()[SECRET] == "MY_TOKEN"


def test_an_interruption_says_how_to_resume_with_exit_code_130(capsys):
    assert _exit_code(console.interrupted) == 130
    assert capsys.readouterr().err == ("\ninterrupted: finished items are kept and nothing half-written counts as "
                                       "done; rerun the same command to resume\n")


def test_a_bug_prints_its_traceback_then_the_line_that_asks_for_a_report_with_exit_code_1(capsys):
    try:
        raise ValueError("boom")
    except ValueError as raised:
        exc = raised
    assert _exit_code(lambda: console.bug(exc)) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("ValueError: boom\nerror: unexpected ValueError: boom" + BUG_TAIL)


def test_a_bug_never_raised_has_no_traceback_but_its_own_line(capsys):
    assert _exit_code(lambda: console.bug(KeyError("k"))) == 1
    assert capsys.readouterr().err == "KeyError: 'k'\nerror: unexpected KeyError: 'k'" + BUG_TAIL


def test_a_bug_names_no_registered_secret_in_its_traceback_or_its_line(capsys):
    console.register_secrets({SECRET: "MY_TOKEN"})
    assert _exit_code(lambda: console.bug(RuntimeError(f"token {SECRET}"))) == 1
    err = capsys.readouterr().err
    assert SECRET not in err
    assert err == ("RuntimeError: token <redacted:MY_TOKEN>\nerror: unexpected RuntimeError: token "
                   "<redacted:MY_TOKEN>" + BUG_TAIL)


# -- guarded ----------------------------------------------------------------------------------------------------------
def test_guarded_returns_what_the_body_returns(capsys):
    assert console.guarded(lambda: 7) == 7
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("exc", [UserError("run=x: no run"), ConfigError("run=x: no run"), PlanError("run=x: no run")])
def test_guarded_turns_a_user_error_into_its_message_and_exit_code_2(capsys, exc):
    assert _exit_code(lambda: console.guarded(_raises(exc))) == 2
    assert capsys.readouterr().err == "error: run=x: no run\n"


def test_guarded_turns_ctrl_c_into_the_resume_line_and_exit_code_130(capsys):
    assert _exit_code(lambda: console.guarded(_raises(KeyboardInterrupt()))) == 130
    assert capsys.readouterr().err == "\n" + console.INTERRUPTED + "\n"


def test_guarded_turns_a_bare_value_error_into_a_bug_with_exit_code_1(capsys):
    assert _exit_code(lambda: console.guarded(_raises(ValueError("boom")))) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("error: unexpected ValueError: boom" + BUG_TAIL)


def test_guarded_lets_an_exit_of_the_body_through_with_its_own_code(capsys):
    assert _exit_code(lambda: console.guarded(_raises(SystemExit(5)))) == 5
    assert capsys.readouterr().err == ""


def test_a_closed_stdout_ends_quietly_with_exit_code_1_and_stdout_sent_to_devnull(monkeypatch, tmp_path, capsys):
    target = tmp_path / "stdout"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT)

    class Stdout:
        def fileno(self) -> int:
            return fd

    monkeypatch.setattr(sys, "stdout", Stdout())
    try:
        assert _exit_code(lambda: console.guarded(_raises(BrokenPipeError(errno.EPIPE, "Broken pipe")))) == 1
        os.write(fd, b"late output")  # what the interpreter flushes at exit goes nowhere
    finally:
        os.close(fd)
    assert target.read_bytes() == b""
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("code", sorted(console.USER_OS_ERRNOS))
def test_an_environment_problem_the_user_fixes_is_a_user_error_naming_the_file(capsys, code):
    num = getattr(errno, code)
    exc = OSError(num, os.strerror(num), "/data/out/run")
    assert _exit_code(lambda: console.guarded(_raises(exc))) == 2
    assert capsys.readouterr().err == (f"error: {os.strerror(num)}: /data/out/run (check output_root / permissions "
                                       "/ free space)\n")


def test_an_environment_problem_without_a_file_says_the_system_did_not_report_one(capsys):
    exc = OSError(errno.ENOSPC, "No space left on device")
    assert _exit_code(lambda: console.guarded(_raises(exc))) == 2
    assert capsys.readouterr().err == ("error: No space left on device: (file not reported by the system) (check "
                                       "output_root / permissions / free space)\n")


# an OSError made by hand may carry any errno: an empty list is no code (and cannot be looked up as one)
@pytest.mark.parametrize("exc", [OSError(errno.ENOENT, "No such file or directory", "/x"), OSError("no errno"),
                                 OSError([], "an errno that is not a code")])
def test_any_other_os_error_is_a_bug_with_its_traceback_and_exit_code_1(capsys, exc):
    assert _exit_code(lambda: console.guarded(_raises(exc))) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and f"error: unexpected {type(exc).__name__}: {exc}" + BUG_TAIL in err


# -- tools: report ----------------------------------------------------------------------------------------------------
@pytest.fixture
def built(monkeypatch):
    """The report builder stubbed: each call records its arguments, the eval locks held and the confinement."""
    calls: list[dict] = []

    def build(runs, cfg, output_root):
        calls.append({"runs": list(runs), "cfg": cfg, "output_root": output_root,
                      "locked": [_held(Path(r) / ".eval.lock") for r in runs]})
        calls[-1]["confined"] = _confined_to(*runs, outside=Path(output_root) / "elsewhere")

    monkeypatch.setattr(reporting_cli, "cmd_report", build)
    return calls


def test_a_report_of_one_run_builds_it_under_its_eval_lock_confined_to_the_run(tmp_path, built):
    run = _run(tmp_path, "a", _row())
    cfg = _cfg(tmp_path, run="a")
    tools.cmd_report(cfg)
    (call,) = built
    assert call["runs"] == [run] and call["cfg"] is cfg and call["output_root"] == str(tmp_path)
    assert call["locked"] == [True] and call["confined"]
    assert not _held(run / ".eval.lock")  # released afterwards


def test_a_report_of_several_runs_keeps_their_order_and_locks_and_confines_each(tmp_path, monkeypatch):
    a, b = _run(tmp_path, "a", _row()), _run(tmp_path, "b", _row())
    seen = {}

    def build(runs, cfg, output_root):
        seen["locked"] = [_held(r / ".eval.lock") for r in runs]
        seen["confined"] = _confined_to(a, b, tmp_path / "reports" / "b+a", outside=tmp_path / "elsewhere")

    monkeypatch.setattr(reporting_cli, "cmd_report", build)
    tools.cmd_report(_cfg(tmp_path, run="b", report_runs=["b", "a"]))
    assert seen == {"locked": [True, True], "confined": True}
    built_runs = []
    monkeypatch.setattr(reporting_cli, "cmd_report", lambda runs, cfg, root: built_runs.append(runs))
    tools.cmd_report(_cfg(tmp_path, run="b", report_runs=["b", "a"]))
    assert built_runs == [[b, a]]


def test_a_report_with_its_own_folder_may_write_there_and_not_beside_the_run(tmp_path, monkeypatch):
    a = _run(tmp_path, "a", _row())
    out = tmp_path / "my-report"
    seen = {}

    def build(runs, cfg, output_root):
        check_contained(out / "index.html")
        seen["default"] = _confined_to(a, outside=tmp_path / "reports")

    monkeypatch.setattr(reporting_cli, "cmd_report", build)
    tools.cmd_report(_cfg(tmp_path, run="a", report_out=str(out)))
    assert seen == {"default": True}


def test_a_report_of_a_run_that_does_not_exist_names_it_and_builds_nothing(tmp_path, built):
    with pytest.raises(PlanError, match="run=nowhere: no run at"):
        tools.cmd_report(_cfg(tmp_path, run="nowhere"))
    assert built == []


# -- tools: verify, setup, judge check --------------------------------------------------------------------------------
def _verify_stub(monkeypatch, report: VerifyReport) -> list:
    calls = []
    monkeypatch.setattr(verify_mod, "verify_run", lambda cfg: calls.append(cfg) or report)
    return calls


def test_verify_prints_the_table_and_returns_when_every_item_passes(tmp_path, monkeypatch, capsys):
    report = VerifyReport(tmp_path, items=[ItemCheck(ITEM.key, {c: True for c in CHECKS})])
    calls = _verify_stub(monkeypatch, report)
    cfg = _cfg(tmp_path)
    assert tools.cmd_verify(cfg) is None
    assert calls == [cfg] and capsys.readouterr().out == report.table() + "\n"


def test_verify_prints_the_table_and_exits_1_when_an_item_fails(tmp_path, monkeypatch, capsys):
    report = VerifyReport(tmp_path, items=[ItemCheck(ITEM.key, {c: False for c in CHECKS})])
    _verify_stub(monkeypatch, report)
    assert _exit_code(lambda: tools.cmd_verify(_cfg(tmp_path))) == 1
    assert capsys.readouterr().out == report.table() + "\n"


def test_setup_hands_the_config_to_run_setup(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(setup_mod, "run_setup", calls.append)
    cfg = _cfg(tmp_path)
    assert tools.cmd_setup(cfg) is None and calls == [cfg]


def test_judge_check_returns_when_the_server_is_ready(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(evaluate.judge, "check_server", lambda settings: calls.append(settings) or 0)
    cfg = _cfg(tmp_path)
    assert tools.cmd_judge_check(cfg) is None and calls == [cfg.evaluate.judge]


@pytest.mark.parametrize("code", [1, 2])
def test_judge_check_exits_with_the_code_of_the_ping(tmp_path, monkeypatch, code):
    monkeypatch.setattr(evaluate.judge, "check_server", lambda settings: code)
    assert _exit_code(lambda: tools.cmd_judge_check(_cfg(tmp_path))) == code


# -- tools: release import / check ------------------------------------------------------------------------------------
@pytest.fixture
def release_calls(monkeypatch):
    """``require`` and the release commands stubbed; ``ok``: what the import returns."""
    calls: list = []
    state = {"ok": True}
    monkeypatch.setattr(extras, "require", lambda what, modules: calls.append(("require", what, modules)))
    monkeypatch.setattr(release, "release_import",
                        lambda cfg, evaluate: calls.append(("import", cfg, evaluate)) or state["ok"])
    monkeypatch.setattr(release, "release_check", lambda cfg: calls.append(("check", cfg)))
    return calls, state


def test_release_import_asks_for_pyarrow_first_then_imports_with_the_evaluation(tmp_path, release_calls):
    calls, _ = release_calls
    cfg = _cfg(tmp_path)
    assert tools.cmd_release_import(cfg) is None
    assert calls == [("require", "release import (the release's parquet rows)", ("pyarrow",)),
                     ("import", cfg, evaluation.evaluate)]


def test_release_import_exits_1_when_its_evaluation_failed(tmp_path, release_calls):
    calls, state = release_calls
    state["ok"] = False
    assert _exit_code(lambda: tools.cmd_release_import(_cfg(tmp_path))) == 1
    assert [c[0] for c in calls] == ["require", "import"]


def test_release_check_hands_the_config_to_the_check(tmp_path, release_calls):
    calls, _ = release_calls
    cfg = _cfg(tmp_path)
    assert tools.cmd_release_check(cfg) is None and calls == [("check", cfg)]


# -- release.release_import -------------------------------------------------------------------------------------------
@pytest.fixture
def imported(monkeypatch, tmp_path):
    """The importer stubbed: it writes ``rows`` as the run's manifest (and ``check.md`` when asked) and records
    its arguments, the eval lock and the confinement; ``evals`` records the evaluations, which return ``result``."""
    state = {"rows": [_row()], "check_md": False, "calls": [], "evals": [], "result": True}

    def import_release(opts, run_path, progress=True):
        state["calls"].append({"source": opts.source, "measure": opts.measure, "run": run_path,
                               "progress": progress, "locked": _held(run_path / ".eval.lock"),
                               "confined": _confined_to(run_path, outside=tmp_path / "elsewhere")})
        _run(run_path.parent, run_path.name, *state["rows"])
        if state["check_md"]:
            (run_path / "release").mkdir(exist_ok=True)
            (run_path / "release" / "check.md").write_text("| video |\n")
        return ImportSummary(rows=1, rows_in_release=1, videos=1, imported=1, kept_rows=1)

    def evaluate(path, cfg):
        state["evals"].append((path, cfg))
        return state["result"]

    monkeypatch.setattr(importer, "import_release", import_release)
    state["evaluate"] = evaluate
    return state


def _import_cfg(root: Path, **release_settings) -> RunConfig:
    return _cfg(root / "outputs", run="rel", source=str(root / "src"), release=release_settings)


def test_an_import_prints_its_summary_and_the_command_that_measures_the_layouts(tmp_path, imported, capsys):
    cfg = _import_cfg(tmp_path, evaluate=False, measure=False)
    assert release.release_import(cfg, imported["evaluate"]) is True
    run = (tmp_path / "outputs" / "rel").resolve()
    (call,) = imported["calls"]
    assert call == {"source": tmp_path / "src", "measure": False, "run": run, "progress": False, "locked": True,
                    "confined": True}
    summary = ImportSummary(rows=1, rows_in_release=1, videos=1, imported=1, kept_rows=1)
    assert capsys.readouterr().out == ("\n".join(summary.lines()) + "\n"
                                       f"run: {run}  (cases: {run / 'release' / 'cases'}; measure the layouts with "
                                       "`python -m harness release check run=rel`)\n")
    assert imported["evals"] == [] and not _held(run / ".eval.lock")


def test_an_import_that_measured_names_its_check_file(tmp_path, imported, capsys):
    imported["check_md"] = True
    assert release.release_import(_import_cfg(tmp_path, evaluate=False), imported["evaluate"]) is True
    run = (tmp_path / "outputs" / "rel").resolve()
    assert capsys.readouterr().out.endswith(
        f"run: {run}  (cases: {run / 'release' / 'cases'}; each video's measured layout against its preset: "
        f"{run / 'release' / 'check.md'})\n")


def test_a_check_file_left_from_before_is_not_named_when_this_import_did_not_measure(tmp_path, imported, capsys):
    imported["check_md"] = True
    release.release_import(_import_cfg(tmp_path, evaluate=False, measure=False), imported["evaluate"])
    assert capsys.readouterr().out.endswith("measure the layouts with `python -m harness release check run=rel`)\n")


@pytest.mark.parametrize("result", [True, False])
def test_an_import_with_a_finished_item_is_evaluated_and_returns_the_evaluations_verdict(tmp_path, imported, result):
    imported["result"] = result
    cfg = _import_cfg(tmp_path)
    assert release.release_import(cfg, imported["evaluate"]) is result
    assert imported["evals"] == [((tmp_path / "outputs" / "rel").resolve(), cfg)]


def test_an_import_without_a_finished_item_is_not_evaluated_and_is_no_failure(tmp_path, imported):
    imported["rows"] = [_row("failed")]
    imported["result"] = False
    assert release.release_import(_import_cfg(tmp_path), imported["evaluate"]) is True
    assert imported["evals"] == []


def test_an_import_asked_not_to_evaluate_is_not_evaluated_and_is_no_failure(tmp_path, imported):
    imported["result"] = False
    assert release.release_import(_import_cfg(tmp_path, evaluate=False), imported["evaluate"]) is True
    assert imported["evals"] == []


def test_an_import_without_a_source_is_refused_before_anything_is_written(tmp_path, imported):
    cfg = _cfg(tmp_path / "outputs", run="rel")
    with pytest.raises(ConfigError, match="release import: give the release's folder: source=<dir>"):
        release.release_import(cfg, imported["evaluate"])
    assert imported["calls"] == [] and not (tmp_path / "outputs").exists()


def test_an_import_into_a_run_name_that_leaves_output_root_is_refused_before_anything_is_written(tmp_path, imported):
    cfg = _cfg(tmp_path / "outputs", run="../escape", source=str(tmp_path / "src"))
    with pytest.raises(PlanError):
        release.release_import(cfg, imported["evaluate"])
    assert imported["calls"] == [] and not (tmp_path / "escape").exists()


# -- release.release_check --------------------------------------------------------------------------------------------
def test_a_release_check_measures_under_the_eval_lock_then_prints_the_table_and_where_it_wrote(
        tmp_path, monkeypatch, capsys):
    run = _run(tmp_path, "rel", _row())
    seen = []

    def check_run(path, progress=True):
        seen.append((path, progress, _held(path / ".eval.lock"), _confined_to(path, outside=tmp_path / "x")))
        return {"rows": 2}

    monkeypatch.setattr(release_check_mod, "check_run", check_run)
    monkeypatch.setattr(release_check_mod, "table_lines", lambda result: [f"| rows | {result['rows']} |", "| - |"])
    release.release_check(_cfg(tmp_path, run="rel"))
    assert seen == [(run, False, True, True)]
    assert capsys.readouterr().out == f"| rows | 2 |\n| - |\nwritten: {run / 'release' / 'check.md'} and check.json\n"
    assert not _held(run / ".eval.lock")


def test_a_release_check_of_a_run_that_does_not_exist_names_it(tmp_path):
    with pytest.raises(PlanError, match="run=nowhere: no run at"):
        release.release_check(_cfg(tmp_path, run="nowhere"))
