"""The entry point itself, in-process: exit codes (user error vs bug), logging and verbosity, progress=false, and
the app's own ``--help``."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import harness.__main__ as cli
from conftest import ROOT

SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "cases.include=[environment_rocket]",
         "evaluate=off"]


@pytest.fixture
def harness_main(monkeypatch, tmp_path, capsys):
    """``harness_main(*args)`` runs ``python -m harness <args>`` in this process (in ``tmp_path``) and returns
    ``(exit code, stdout, stderr)``."""
    monkeypatch.chdir(tmp_path)
    for name in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):  # progress=false sets them: restored afterwards
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    # the CLI (and Hydra's job logging) reconfigure these loggers: restored afterwards
    for pkg in ("harness", "evaluate", "adapters", "trajectories", "hydra", None):
        log = logging.getLogger(pkg)
        monkeypatch.setattr(log, "handlers", list(log.handlers))
        monkeypatch.setattr(log, "level", log.level)
        monkeypatch.setattr(log, "propagate", log.propagate)

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["harness", *args])
        monkeypatch.setattr(cli, "_DISPATCHED", False)
        monkeypatch.setattr(cli, "_SECRETS", {})
        capsys.readouterr()
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


# -- exit codes: a user error is one clean line (2); anything else is a bug with its traceback (1) -----------------

def test_user_error_exits_2_with_the_message_and_no_traceback(harness_main, monkeypatch):
    from harness.errors import ConfigError

    def bad_value(cfg):
        raise ConfigError("evaluate.canvas=-1: must be > 0")

    monkeypatch.setitem(cli.HANDLERS, "list", bad_value)
    code, out, err = harness_main("list")
    assert code == 2
    assert "error: evaluate.canvas=-1: must be > 0" in err and "Traceback" not in err


def test_missing_optional_package_is_a_user_error_naming_the_extra(harness_main, monkeypatch):
    from harness.errors import MissingDependencyError

    def needs_torch(cfg):
        raise MissingDependencyError("the tiny causal DiT", "models", "No module named 'torch'")

    monkeypatch.setitem(cli.HANDLERS, "list", needs_torch)
    code, _, err = harness_main("list")
    assert code == 2 and "pip install -e '.[models]'" in err and "Traceback" not in err


@pytest.mark.parametrize("exc", [ValueError("boom: an unexpected value"), ImportError("boom: a broken import"),
                                 KeyError("boom")])
def test_a_bug_prints_its_traceback_and_exits_1(harness_main, monkeypatch, exc):
    def buggy(cfg):
        raise exc

    monkeypatch.setitem(cli.HANDLERS, "list", buggy)
    code, _, err = harness_main("list")
    assert code == 1
    assert "Traceback (most recent call last)" in err and "in buggy" in err and "boom" in err
    assert f"error: unexpected {type(exc).__name__}: " in err and "a bug in the harness" in err


def test_domain_errors_that_subclass_value_error_still_work():
    """Callers that catch ``ValueError`` keep catching the domain classes."""
    from evaluate.backbones import UnknownBackboneError
    from evaluate.external import ManifestError
    from evaluate.judge.settings import JudgeSettingsError
    from evaluate.reporting.collect import ReportError
    from harness.errors import ConfigError

    for cls in (ConfigError, UnknownBackboneError, ManifestError, JudgeSettingsError, ReportError):
        assert issubclass(cls, ValueError) and issubclass(cls, ConfigError)
        assert issubclass(cls, cli._user_errors())
    assert not issubclass(ValueError, cli._user_errors()) and not issubclass(ImportError, cli._user_errors())


def test_adapter_reference_errors(tmp_path, monkeypatch):
    """A module that needs a package that is not installed is a missing dependency (naming the extra); a reference
    to a module or class that does not exist is a config error; a missing module of our own is a bug."""
    from harness.errors import ConfigError, MissingDependencyError
    from harness.registry import load_object

    (tmp_path / "needs_missing_pkg.py").write_text("import surely_not_installed_pkg_xyz\nclass A: pass\n")
    (tmp_path / "broken_own_import.py").write_text("import harness.surely_not_a_module_xyz\nclass A: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependencyError, match=r"surely_not_installed_pkg_xyz.*pip install -e '\.\[models\]'"):
        load_object("needs_missing_pkg:A")
    with pytest.raises(ConfigError, match="no module 'adapters.nope'"):
        load_object("adapters.nope:A")
    with pytest.raises(ConfigError, match="has no 'Nope'"):
        load_object("adapters.reference.adapter:Nope")
    with pytest.raises(ConfigError, match="must look like"):
        load_object("adapters.reference.adapter")
    with pytest.raises(ModuleNotFoundError) as e:
        load_object("broken_own_import:A")
    assert not isinstance(e.value, MissingDependencyError)


def test_bad_run_manifest_and_evaluate_settings_are_config_errors(tmp_path):
    from evaluate.backbones import resolve_device
    from evaluate.external import ManifestError, _entries
    from evaluate.stage import EvalConfig
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match="evaluate.device='gpu'"):
        resolve_device("gpu")
    with pytest.raises(ConfigError, match="evaluate.nope"):
        EvalConfig.from_dict({"nope": 1})
    m = tmp_path / "manifest.json"
    m.write_text("{not json")
    with pytest.raises(ManifestError, match="not JSON"):
        _entries(m)
    m.write_text('{"vids": []}')
    with pytest.raises(ManifestError, match="expected a list"):
        _entries(m)


# -- logging and verbosity ------------------------------------------------------------------------------------------

def _talk(cfg):
    logging.getLogger("harness.somewhere").info("an info line")
    logging.getLogger("evaluate.elsewhere").warning("a warning line")
    logging.getLogger("adapters.x").debug("a debug line")
    print("the result")


@pytest.mark.parametrize("verbosity, shown, hidden", [
    (None, ["an info line", "a warning line"], ["a debug line"]),
    ("warning", ["a warning line"], ["an info line", "a debug line"]),
    ("error", [], ["an info line", "a warning line", "a debug line"]),
    ("debug", ["a debug line", "an info line", "a warning line"], []),
])
def test_verbosity_sets_the_level_of_status_lines_on_stderr(harness_main, monkeypatch, verbosity, shown, hidden):
    monkeypatch.setitem(cli.HANDLERS, "list", _talk)
    code, out, err = harness_main("list", *([f"verbosity={verbosity}"] if verbosity else []))
    assert code == 0, err
    assert out == "the result\n"  # the result stays on stdout, alone
    assert all(s in err for s in shown) and not any(s in err for s in hidden), err
    if "an info line" in shown:
        assert "INFO harness.somewhere: an info line\n" in err  # the short format: level, logger, message


def test_invalid_verbosity_exits_2_naming_the_field_and_the_choices(harness_main):
    code, out, err = harness_main("list", "verbosity=loud")
    assert code == 2 and "Traceback" not in err
    assert "verbosity='loud'" in err and "debug, info, warning, error" in err
    assert not out  # nothing ran


def test_real_status_lines_are_logged_not_printed(harness_main):
    """A dry run of a model whose checkout is missing: the readiness finding is a warning on stderr (shown by
    default); the summary table stays on stdout."""
    args = ["model=lingbot_v2", "dry_run=true", "run=r", *SMALL, "model.num_frames=61", "progress=false"]
    code, out, err = harness_main(*args)
    assert code == 0, err
    assert "WARNING harness.__main__: readiness (error, not enforced in a dry run)" in err
    assert "readiness" not in out and "compiled" in out


# -- progress=false -------------------------------------------------------------------------------------------------

def test_progress_false_shows_no_progress_output(harness_main):
    import os

    code, out, err = harness_main("dry_run=true", "run=p", *SMALL, "progress=false")
    assert code == 0, err
    assert "item/s" not in err and "it/s" not in err and "%|" not in err and "\r" not in err, err
    assert "compiled" in out
    # the libraries' bars (diffusers pipelines, transformers / huggingface_hub loading) are off too
    assert os.environ.get("TQDM_DISABLE") == "1" and os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1"


def test_progress_true_shows_a_bar(harness_main):
    """The twin of the test above: the same run with the default progress=true does draw a bar."""
    code, _, err = harness_main("dry_run=true", "run=p", *SMALL)
    assert code == 0, err
    assert "item/s" in err and "%|" in err, err


def test_debug_preset_turns_progress_off():
    from conftest import compose

    assert compose(["debug=default"])["progress"] is False
    assert compose([])["verbosity"] == "info" and compose([])["progress"] is True


# -- --help ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_the_apps_own(harness_main, flag):
    code, out, err = harness_main(flag)
    assert code == 0, err
    for needle in ("Usage:", "python -m harness -m", "run ", "list ", "validate ", "preview ", "report ",
                   "verify ", "weights ", "judge check", "dry_run=true", "stage=evaluate", "model=", "context=",
                   "trajectories=", "cases=", "seed=", "launcher=", "debug=", "evaluate=", "output_root=", "run=",
                   "progress=false", "verbosity=", "docs/configuration.md", "--hydra-help", "Exit codes"):
        assert needle in out, needle
    assert "model: " in out and "reference" in out  # the config groups and their options
    assert "powered by Hydra" not in out and "== Config ==" not in out  # not Hydra's generic help


def test_hydra_help_is_still_there(harness_main):
    code, out, _ = harness_main("--hydra-help")
    assert code == 0 and "Hydra (" in out and "--multirun" in out


def test_help_in_a_fresh_process_imports_no_torch(tmp_path):
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write('TORCH-IMPORTED' if 'torch' in sys.modules else 'NO-TORCH'))\n"
            "sys.argv = ['harness', '--help']\n"
            "from harness.__main__ import main\n"
            "main()\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert "Common overrides" in r.stdout and r.stderr.endswith("NO-TORCH")
