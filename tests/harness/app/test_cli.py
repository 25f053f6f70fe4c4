"""The command line as a user meets it: runs, dry runs, listing, resume, sweeps and clear errors.

The entry point itself, in-process: exit codes (user error vs bug), logging and verbosity, progress=false, and
the app's own ``--help``.

The console summary never averages across models, contexts, trajectories or seeds, and never shows ground truth."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness.app.cli as cli
from harness.app.commands.evaluation import short_table as _short_table
from tests.support import ROOT, run_cli
from tests.support.cli import in_process_cli

SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "progress=false"]


def _items(run_dir: Path):
    return sorted(run_dir.glob("*/*/seed-*/*/*/meta.json"))


@pytest.mark.slow
def test_run_writes_a_self_describing_directory(tmp_path):
    r = run_cli(["cases.include=[environment_rocket,human_astronaut]", "run=t", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "outputs" / "t"
    item = run_dir / "reference" / "fov" / "seed-1" / "lrlr" / "environment_rocket"
    for f in ("video.mp4", "camera.npz", "controls/poses.npy", "controls/intrinsics.npy", "context_trace.json",
              "meta.json"):
        assert (item / f).is_file(), f
    meta = json.loads((item / "meta.json").read_text())
    assert meta["status"] == "done" and meta["seed"] == 1 and meta["context"]["name"] == "fov"
    assert meta["video"]["num_frames"] == 65 and meta["camera"]["phases"]["V"][0] == 0
    assert meta["versions"]["numpy"] and "config" in meta
    from harness.video import probe_video

    info = probe_video(item / "video.mp4")
    assert info["num_frames"] == 65 and info["codec"] == "h264" and abs(info["fps"] - 16) < 1e-6
    lines = (run_dir / "manifest.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["status"] == "done" for x in lines)
    assert "done" in r.stdout and "2" in r.stdout
    assert list((run_dir / ".hydra").glob("*/.hydra/config.yaml"))  # Hydra's resolved config
    # the console says where the run's page is and gives its verdict (one policy: nothing to compare)
    assert f"report: {run_dir / 'eval' / 'report' / 'index.html'}" in r.stdout
    assert "verdict:\n  Nothing to compare: reference under fov (2 videos)" in r.stdout


@pytest.mark.slow
def test_multirun_context_and_seed_sweep_resumes(tmp_path):
    args = ["-m", "context=fullkv,sliding,fov", "seed=1,2", "cases.include=[environment_rocket]", "run=s", *SMALL]
    r = run_cli(args, tmp_path)
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "outputs" / "s"
    metas = _items(run_dir)
    assert len(metas) == 6
    assert {(m.parts[-5], m.parts[-4]) for m in metas} == {(c, f"seed-{s}") for c in ("fullkv", "sliding", "fov")
                                                           for s in (1, 2)}
    stamps = {m: m.stat().st_mtime_ns for m in metas}
    r2 = run_cli(args, tmp_path)
    # each finished job is recognised without a worker: one line each, then the run's verdict once
    jobs = [x for x in r2.stdout.splitlines() if x.startswith("job ")]
    assert r2.returncode == 0 and len(jobs) == 6, r2.stdout
    assert all(f"job {k} of 6 already done" in x for k, x in enumerate(jobs, 1)) and r2.stdout.count("verdict:") == 1
    assert all(m.stat().st_mtime_ns == t for m, t in stamps.items())  # nothing rewritten
    assert len((run_dir / "manifest.jsonl").read_text().splitlines()) == 6


@pytest.mark.slow
def test_resume_after_a_killed_run(tmp_path):
    args = ["cases.include=[environment_rocket,human_astronaut,object_coffee]", "run=k", "model.height=96",
            "model.width=160", "model.num_frames=401", "progress=false"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    p = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "outputs" / "k"
    deadline = time.time() + 120
    while time.time() < deadline:
        done = [m for m in _items(run_dir) if json.loads(m.read_text()).get("status") == "done"]
        if done:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert done, "first item never finished"
    statuses = {m.parent.name: json.loads(m.read_text())["status"] for m in _items(run_dir)}
    assert list(statuses.values()).count("done") < 3  # it really was interrupted
    r = run_cli(args, tmp_path)
    assert r.returncode == 0, r.stderr
    n_done = list(statuses.values()).count("done")
    assert f"skipped (already done)  {n_done}" in r.stdout
    assert all(json.loads(m.read_text())["status"] == "done" for m in _items(run_dir))
    assert not list(run_dir.rglob("*.partial.mp4")) and not list(run_dir.rglob(".*.tmp*"))


@pytest.mark.slow
def test_dry_run_compiles_without_generating(tmp_path):
    r = run_cli(["dry_run=true", "previews=true", "trajectory=square", "run=d", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr
    metas = _items(tmp_path / "outputs" / "d")
    assert len(metas) == 4  # dynamic_cat does not list the square
    for m in metas:
        assert json.loads(m.read_text())["status"] == "compiled"
        assert (m.parent / "preview.png").is_file() and (m.parent / "controls" / "poses.npy").is_file()
        assert not (m.parent / "video.mp4").exists()


@pytest.mark.slow
def test_list_validate_preview(tmp_path):
    r = run_cli(["list"], tmp_path)
    assert r.returncode == 0 and "reference" in r.stdout and "sliding" in r.stdout and "lrud" in r.stdout
    r = run_cli(["validate"], tmp_path)
    assert r.returncode == 0 and "5 case(s) valid" in r.stdout
    r = run_cli(["preview", "trajectory=lrud"], tmp_path)
    assert r.returncode == 0 and (tmp_path / "outputs" / "previews" / "lrud_reference.png").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, needle",
    [
        (["model=refrence"], "Did you mean 'reference'"),
        (["context=slidng"], "Did you mean 'sliding'"),
        (["trajectory=lrld"], "Unknown trajectory"),
        (["trajectory.yaw_deg=10"], "trajectory.yaw_deg"),
        (["cases=folder", "cases.source=/nonexistent"], "cases.source"),
        (["cases.include=[nope]"], "cases.include"),
        (["model.fps=0"], "model.fps"),
        (["context.recent=-2"], "context.recent"),
        (["shard=3/2"], "shard"),
    ],
)
def test_bad_input_clear_error_nonzero_exit(tmp_path, args, needle):
    r = run_cli([*args, "run=e", *SMALL], tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert not _items(tmp_path / "outputs" / "e")  # nothing half-written


@pytest.mark.slow
def test_malformed_case_folder_and_missing_image(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "a.yaml").write_text("id: a\nfamily: object\nimage: a.png\nprompt: x\n")
    r = run_cli(["cases=folder", f"cases.source={cases}", "validate"], tmp_path)
    assert r.returncode == 2 and "a.yaml" in r.stderr and "persons" not in r.stderr and "objects" in r.stderr
    (cases / "a.yaml").write_text("id: a\nfamily: environment\nimage: missing.png\nprompt: x\n")
    r = run_cli(["cases=folder", f"cases.source={cases}", "validate"], tmp_path)
    assert r.returncode == 2 and "missing.png" in r.stderr


@pytest.mark.slow
def test_shards_split_items_without_collisions(tmp_path):
    base = ["run=sh", "cases.include=[environment_rocket,human_astronaut,object_coffee]", *SMALL]
    for i in range(2):
        assert run_cli([*base, f"shard={i}/2"], tmp_path).returncode == 0
    metas = _items(tmp_path / "outputs" / "sh")
    assert len(metas) == 3
    assert len((tmp_path / "outputs" / "sh" / "manifest.jsonl").read_text().splitlines()) == 3


@pytest.mark.slow
def test_submitit_launcher_runs_jobs_as_separate_processes(tmp_path):
    """The Slurm path's local twin: sweep jobs run as submitit processes into one run directory."""
    r = run_cli(["-m", "launcher=submitit_local", "context=fullkv,sliding", "run=sub",
                 "cases.include=[environment_rocket]", "evaluate=off", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    run_dir = tmp_path / "outputs" / "sub"
    assert {m.parts[-5] for m in _items(run_dir)} == {"fullkv", "sliding"}
    assert len((run_dir / "manifest.jsonl").read_text().splitlines()) == 2


# -- issue 11: secrets, Hydra errors, nothing written on failure, Slurm off a cluster --------------------------------

SECRET = "hf_SECRETVALUE123456"


@pytest.mark.slow
def test_secrets_in_model_env_are_never_written(tmp_path):
    r = run_cli(["-m", "model=sana_wm", "context=fullkv,native", "dry_run=true", "run=sec", "evaluate=off",
                 "cases.include=[environment_rocket]", f"+model.env={{HF_TOKEN: {SECRET}, MY_MODE: plain}}",
                 "+model.env_plain=[MY_MODE]", "progress=false"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert SECRET not in r.stdout + r.stderr
    files = [p for p in (tmp_path / "outputs").rglob("*") if p.is_file()]
    assert len(files) > 10
    leaks = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert not leaks, leaks
    cmds = list((tmp_path / "outputs" / "sec").rglob("command.sh"))
    assert len(cmds) == 2
    text = cmds[0].read_text()
    assert 'export HF_TOKEN="${HF_TOKEN' in text and "export MY_MODE=plain" in text
    meta = json.loads(next((tmp_path / "outputs" / "sec").rglob("meta.json")).read_text())
    assert meta["model"]["env"] == {"HF_TOKEN": "<redacted>", "MY_MODE": "plain"}
    saved = list((tmp_path / "outputs" / "sec" / ".hydra").rglob("config.yaml"))
    assert saved and "<redacted>" in saved[0].read_text()


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["+foo=["], "no viable alternative"),    # Hydra's own override parse error
    (["nosuchkey=1"], "nosuchkey"),            # Hydra: key not in the struct config
    (["seed=1.5"], "seed=1.5"),
    (["seed=-1"], "seed=-1"),
    (["run=../../x"], "run="),
    (["model.height=97"], "must be even"),
])
def test_user_errors_exit_2_and_write_nothing(tmp_path, args, needle):
    r = run_cli(["run=e", *SMALL, *args], tmp_path)  # the case's own args last, so they win
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "outputs").exists()  # not even outputs/<run>/.hydra/
    assert not list(tmp_path.parent.glob("x"))


@pytest.mark.slow
def test_slurm_launcher_off_a_cluster_says_so(tmp_path):
    nobin = tmp_path / "bin"  # a PATH without sbatch/srun, also on a machine that has a cluster (CI has one)
    nobin.mkdir()
    r = run_cli(["-m", "launcher=slurm", "context=fullkv,sliding", "run=sl", *SMALL], tmp_path,
                env={"PATH": str(nobin)})
    assert r.returncode == 2
    assert "launcher=slurm needs a Slurm cluster" in r.stderr and "launcher=submitit_local" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_verify_reports_every_planned_item(tmp_path):
    base = ["run=v", "cases.include=[environment_rocket,human_astronaut]", *SMALL]
    assert run_cli([*base, "evaluate=off"], tmp_path).returncode == 0
    r = run_cli(["verify", *base], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2/2 item(s) deliverable" in r.stdout
    item = tmp_path / "outputs" / "v" / "reference" / "fov" / "seed-1" / "lrlr" / "human_astronaut"
    with open(item / "video.mp4", "r+b") as f:  # truncate: undecodable, wrong hash
        f.truncate(1000)
    (item / ".meta.json.abc.json").write_text("{")
    r = run_cli(["verify", *base], tmp_path)
    assert r.returncode == 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("reference/fov/seed-1/lrlr/human_astronaut"))
    assert "FAIL" in row and "1/2 item(s) deliverable; 1 FAILED" in r.stdout
    assert "temporary files left: .meta.json.abc.json" in r.stdout
    r = run_cli(["verify", *base, "model.num_frames=97"], tmp_path)  # another config: fingerprints differ
    assert r.returncode == 1 and "different config" in r.stdout


SMALL_NO_EVAL = ["model.height=96", "model.width=160", "model.num_frames=65", "cases.include=[environment_rocket]",
         "evaluate=off"]


@pytest.fixture
def harness_main(monkeypatch, tmp_path, capsys):
    """``harness_main(*args)`` runs ``python -m harness <args>`` in this process (in ``tmp_path``) and returns
    ``(exit code, stdout, stderr)``."""
    run = in_process_cli(monkeypatch, tmp_path, capsys)

    def result(*args: str) -> tuple[int, str, str]:
        r = run(*args)
        return r.code, r.out, r.err

    return result


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


def test_every_domain_error_is_a_user_error():
    """The command line catches one class: every domain error of every layer subclasses :class:`UserError`."""
    from adapters.base import ModelConfigError, UnsupportedContextError
    from harness.app.runner import FingerprintMismatch
    from harness.cases import CaseError
    from harness.config_groups import UnknownChoiceError
    from harness.context import ContextConfigError
    from harness.errors import MissingDependencyError, UserError
    from harness.gpu_pool import DeviceConfigError
    from harness.io import JsonLinesError
    from harness.outputs import PlanError
    from trajectories import TrajectoryError

    classes = (CaseError, ModelConfigError, UnsupportedContextError, ContextConfigError, UnknownChoiceError,
               TrajectoryError, PlanError, FingerprintMismatch, DeviceConfigError, JsonLinesError,
               MissingDependencyError)
    assert [c.__name__ for c in classes if not issubclass(c, UserError)] == []


def test_domain_errors_that_subclass_value_error_still_work():
    """Callers that catch ``ValueError`` keep catching the domain classes."""
    from evaluate.backbones import UnknownBackboneError
    from evaluate.external import ManifestError
    from evaluate.judge.settings import JudgeSettingsError
    from evaluate.reporting.collect import ReportError
    from harness.errors import ConfigError, UserError

    for cls in (ConfigError, UnknownBackboneError, ManifestError, JudgeSettingsError, ReportError):
        assert issubclass(cls, ValueError) and issubclass(cls, ConfigError)
        assert issubclass(cls, UserError)
    assert not issubclass(ValueError, UserError) and not issubclass(ImportError, UserError)


def test_adapter_reference_errors(tmp_path, monkeypatch):
    """A module that needs a package that is not installed is a missing dependency (naming the extra); a reference
    to a module or class that does not exist is a config error; a missing module of our own is a bug."""
    from harness.config_groups import load_object
    from harness.errors import ConfigError, MissingDependencyError

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


def _libraries_talk(cfg):
    logging.getLogger("httpx").info("HTTP Request: GET http://x")
    # huggingface_hub gives its logger a stderr handler of its own: the root logger's level does not reach it
    logging.getLogger("huggingface_hub").addHandler(logging.StreamHandler())
    logging.getLogger("huggingface_hub.file_download").warning("a library warning")
    logging.getLogger("some.library").error("a library error")


@pytest.mark.parametrize("verbosity, shown, hidden", [
    (None, ["a library error"], ["HTTP Request", "a library warning"]),
    ("warning", ["a library error"], ["HTTP Request", "a library warning"]),
    ("debug", ["HTTP Request", "a library warning", "a library error"], []),
])
def test_other_libraries_log_lines_reach_the_console_only_when_asked(harness_main, monkeypatch, verbosity, shown,
                                                                      hidden):
    monkeypatch.setitem(cli.HANDLERS, "list", _libraries_talk)
    code, _, err = harness_main("list", *([f"verbosity={verbosity}"] if verbosity else []))
    assert code == 0, err
    assert all(s in err for s in shown) and not any(s in err for s in hidden), err


def test_invalid_verbosity_exits_2_naming_the_field_and_the_choices(harness_main):
    code, out, err = harness_main("list", "verbosity=loud")
    assert code == 2 and "Traceback" not in err
    assert "verbosity='loud'" in err and "debug, info, warning, error" in err
    assert not out  # nothing ran


def test_real_status_lines_are_logged_not_printed(harness_main):
    """A dry run of a model whose checkout is missing: the readiness finding is a warning on stderr (shown by
    default); the summary table stays on stdout."""
    args = ["model=lingbot_v2", "dry_run=true", "run=r", *SMALL_NO_EVAL, "model.num_frames=61", "progress=false"]
    code, out, err = harness_main(*args)
    assert code == 0, err
    assert "WARNING harness.app.cli: readiness (error, not enforced in a dry run)" in err
    assert "readiness" not in out and "compiled" in out


# -- progress=false -------------------------------------------------------------------------------------------------

def test_progress_false_shows_no_progress_output(harness_main):
    import os

    code, out, err = harness_main("dry_run=true", "run=p", *SMALL_NO_EVAL, "progress=false")
    assert code == 0, err
    assert "item/s" not in err and "it/s" not in err and "%|" not in err and "\r" not in err, err
    assert "compiled" in out
    # the libraries' bars (diffusers pipelines, transformers / huggingface_hub loading) are off too
    assert os.environ.get("TQDM_DISABLE") == "1" and os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1"


def test_progress_true_shows_a_bar(harness_main):
    """The twin of the test above: the same run with the default progress=true does draw a bar."""
    code, _, err = harness_main("dry_run=true", "run=p", *SMALL_NO_EVAL)
    assert code == 0, err
    assert "item/s" in err and "%|" in err, err


def test_debug_preset_turns_progress_off():
    from tests.support import compose

    assert compose(["debug=default"])["progress"] is False
    assert compose([])["verbosity"] == "info" and compose([])["progress"] is True


# -- --help ---------------------------------------------------------------------------------------------------------

def test_help_is_the_apps_own(harness_main):
    code, out, err = harness_main("-h")  # (--help: the next test)
    assert code == 0, err
    for needle in ("Usage:", "python -m harness -m", "run ", "list ", "validate ", "preview ", "report ",
                   "verify ", "weights ", "judge check", "human ", "dry_run=true", "stage=evaluate", "model=", "context=",
                   "trajectories=", "cases=", "seed=", "launcher=", "debug=", "evaluate=", "output_root=", "run=",
                   "progress=false", "verbosity=", "docs/configuration.md", "--hydra-help", "Exit codes"):
        assert needle in out, needle
    assert "model: " in out and "reference" in out  # the config groups and their options
    assert "powered by Hydra" not in out and "== Config ==" not in out  # not Hydra's generic help


def test_help_lists_no_internal_option(harness_main):
    code, out, err = harness_main("--help")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("model: "))
    assert "lingbot_v2" in line and "reference" in line  # the models are listed ...
    assert "_upstream_base" not in out and ", _" not in line  # ... but not the base the model files extend


def test_hydra_help_is_still_there(harness_main):
    code, out, _ = harness_main("--hydra-help")
    assert code == 0 and "Hydra (" in out and "--multirun" in out


@pytest.mark.slow
def test_help_in_a_fresh_process_imports_no_torch(tmp_path):
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write('TORCH-IMPORTED' if 'torch' in sys.modules else 'NO-TORCH'))\n"
            "sys.argv = ['harness', '--help']\n"
            "from harness.app.cli import main\n"
            "main()\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert "Common overrides" in r.stdout and r.stderr.endswith("NO-TORCH")


def _res(model, context, trajectory, seed, value, kind="diagnostic"):
    from evaluate.results import ItemResult

    return ItemResult.from_dict({
        "item": {"model": model, "context": context, "trajectory": trajectory, "seed": seed},
        "metrics": {"environment.visible[pixel-thumb16]": {"metric": "environment.visible",
                                                           "backbone": "pixel-thumb16", "status": "computed",
                                                           "value": value, "backbone_kind": kind},
                    "environment.depth[oracle]": {"metric": "environment.depth", "backbone": "oracle",
                                                  "status": "computed", "value": 1.0, "backbone_kind": "oracle"}}})


def test_groups_are_kept_apart_and_oracles_left_out():
    text = _short_table([_res("reference", "fov", "lrlr", 1, 0.2), _res("reference", "fov", "lrlr", 1, 0.4),
                         _res("tiny_causal_dit", "fov", "lrlr", 1, 0.9), _res("reference", "fov", "lrlr", 2, 0.7)])
    blocks = text.split("\n")
    assert "reference / fov / lrlr / seed 1" in blocks and "reference / fov / lrlr / seed 2" in blocks
    i = blocks.index("reference / fov / lrlr / seed 1")
    assert "0.3000  (n=2)" in blocks[i + 1]  # the mean of its two cases only
    j = blocks.index("tiny_causal_dit / fov / lrlr / seed 1")
    assert "0.9000  (n=1)" in blocks[j + 1]
    assert "oracle" not in text


def test_the_no_comparison_hint_fits_the_command(monkeypatch):
    """A single run suggests a sweep; a sweep job (already one) and external videos (no -m to run) do not."""
    from evaluate.reporting.verdict import NO_COMPARISON_HINT

    from harness.app.commands import evaluation
    from harness.app.commands.evaluation import no_comparison_hint
    from harness.app.run_config import RunConfig

    monkeypatch.setattr(evaluation, "in_sweep", lambda: False)
    assert no_comparison_hint(RunConfig.from_mapping({"run": "default"})) == NO_COMPARISON_HINT
    ext = no_comparison_hint(RunConfig.from_mapping({"run": "ext", "videos": "/my/videos"}))
    assert "-m context" not in ext and "manifest.json" in ext
    monkeypatch.setattr(evaluation, "in_sweep", lambda: True)
    job = no_comparison_hint(RunConfig.from_mapping({"run": "study"}))
    assert "-m context" not in job and "report run=study" in job


def test_matplotlib_font_cache_notice_stays_off_the_console(restore_env):
    """'generated new fontManager' is an INFO record of matplotlib.font_manager: hidden at the default verbosity,
    shown with verbosity=debug."""
    import logging

    from harness.logs import OWN_HANDLERS, setup_logging

    restore_env(*OWN_HANDLERS.values())  # setup_logging sets the libraries' verbosity variables

    try:
        setup_logging("info")
        assert not logging.getLogger("matplotlib.font_manager").isEnabledFor(logging.INFO)
        assert logging.getLogger("matplotlib.font_manager").isEnabledFor(logging.WARNING)
        setup_logging("debug")
        assert logging.getLogger("matplotlib.font_manager").isEnabledFor(logging.INFO)
    finally:
        setup_logging("info")


def test_stage_evaluate_is_its_own_command_and_other_commands_keep_theirs():
    """``run`` with ``stage=evaluate`` goes to the evaluation command (it plans and generates nothing); every other
    stage to ``run``; a command other than ``run`` keeps its handler whatever the stage."""
    from harness.app.commands import info, run
    from harness.app.run_config import RunConfig

    def handler(**raw):
        cfg = RunConfig.from_mapping(raw)
        return cli.handler_for(cfg, cli.HANDLERS[cfg.cmd])

    assert handler(cmd="run", stage="evaluate") is run.cmd_evaluate_only
    assert handler(cmd="run", stage="all") is run.cmd_run
    assert handler(cmd="run", stage="generate") is run.cmd_run
    assert handler(cmd="list", stage="evaluate") is info.cmd_list


def test_one_command_composes_the_config_once_and_hydra_still_reads_its_mode(harness_main, monkeypatch):
    """A plain command composes the whole config once (``argv.composed_once``: Hydra's mode read and the job's
    config are one composition, checked with our one-line errors), not three times (our check, Hydra's
    ``get_mode``, the job); ``hydra.mode=MULTIRUN`` still makes a sweep without ``-m``; a misspelled key is still one
    line with its did-you-mean; Hydra's own methods are back after each command."""
    from hydra._internal.hydra import Hydra

    from hydra._internal import config_loader_impl

    original_get_mode = Hydra.get_mode
    original_load = config_loader_impl.ConfigLoaderImpl.load_configuration
    calls: list[str] = []

    def counting(self, *args, **kwargs):
        calls.append("compose")
        return original_load(self, *args, **kwargs)

    monkeypatch.setattr(config_loader_impl.ConfigLoaderImpl, "load_configuration", counting)
    original_compose = Hydra.compose_config
    code, out, err = harness_main("list")
    assert code == 0, err
    assert len(calls) == 1, calls
    assert Hydra.get_mode is original_get_mode and Hydra.compose_config is original_compose
    code, out, err = harness_main("list", "hydra.mode=MULTIRUN", "hydra.sweep.dir=sweep")
    assert code == 0, err
    assert Path("sweep/multirun.yaml").is_file()  # Hydra ran it as a sweep: the mode came through
    assert Hydra.get_mode is original_get_mode and Hydra.compose_config is original_compose
    code, out, err = harness_main("list", "modle=reference")
    assert code == 2 and "did you mean 'model'" in err.lower() and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert Hydra.get_mode is original_get_mode and Hydra.compose_config is original_compose


@pytest.mark.parametrize("overrides", [[], ["model=lingbot_v2", "context=fov", "+model.env.X=1"],
                                       ["hydra.verbose=true", "run=x"]])
def test_the_one_composition_is_the_config_hydra_would_compose_for_the_job(overrides):
    """``argv.composed_once``: the config ``Hydra.run`` gets (mode read, then ``hydra.mode=RUN`` added as Hydra's
    ``_run_app`` adds it) equals, hydra node included, the one Hydra composes itself for that call."""
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from harness.app.argv import OverrideCheck, composed_once

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="conf", version_base="1.3"):
            h = GlobalHydra.instance().hydra
            job = [*overrides, "hydra.mode=RUN"]
            own = h.compose_config("config", job, run_mode=RunMode.RUN, with_log_configuration=False)
            with composed_once(OverrideCheck({o: o for o in overrides}, [], deferred=True)):
                assert h.get_mode("config", list(overrides)) is None
                once = h.compose_config("config", job, run_mode=RunMode.RUN, with_log_configuration=True)
                again = h.compose_config("config", job, run_mode=RunMode.RUN, with_log_configuration=True)
            assert OmegaConf.to_container(once, resolve=False) == OmegaConf.to_container(own, resolve=False)
            assert once is not again  # kept for one call only
    finally:
        GlobalHydra.instance().clear()
