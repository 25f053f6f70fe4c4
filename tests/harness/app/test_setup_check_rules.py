"""The rules of the GPU day-one check (harness/app/setup_check.py) one at a time, in this process: which readiness
findings stop a step, how each kind of ``.harness-weights.json`` entry is checked again and what a mismatch says, the
weights step's sum and its "not checked" case, the imports and CUDA steps' verdicts and sentences, the tiny run, and
how ``run_check`` numbers, logs, stops, writes ``check.json`` and times its steps.

The model is LingBot-World v2 with its real contract and config. What would start the model's Python (the readiness
probe, the CUDA probe, upstream's generation) is a stand-in: ``Upstream`` answers the adapter's questions with given
findings, ``subprocess.run`` returns a given probe output, the tiny run's ``generate`` writes one frame or raises, and
a stand-in clock makes every measured duration exact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from adapters import contracts
from adapters.base import Finding
from adapters.contracts.schema import Weight
from harness.app import setup_check
from harness.app.setup import RECORD, SetupError, SetupPlan, WeightJob, git_blob_sha1, sha256
from harness.app.setup_check import (
    CheckStopped,
    StepResult,
    run_check,
    step_cuda,
    step_files,
    step_imports,
    step_tiny,
    step_weights,
    tiny_request,
    verify_record,
)
from harness.config_groups import group_yaml
from tests.support.clocks import StepClock

MODEL = "lingbot_v2"
CONTRACT = contracts.load(MODEL)
PYTHON = "/env/bin/python"


PATHS = {"upstream_dir": "/co/lingbot", "checkpoint": "/w/ck"}


def make_plan(tmp_path: Path, jobs: list[WeightJob] = (), model: str = MODEL, paths=PATHS) -> SetupPlan:
    return SetupPlan(model=model, contract=CONTRACT, config=group_yaml("model", model), root=tmp_path,
                     checkout=Path("/co/lingbot"), clone_url="", env_dir=None, python=PYTHON, python_bin="",
                     paths=dict(paths), jobs=list(jobs), forks={},
                     optional_steps=False, hf_cache=Path("/hf/hub"))


class Upstream:
    """The adapter as the steps see it: its config's GPUs per job, its contract, its launch environment, and the
    findings its readiness check and its import probe give (the real ones start the model's Python)."""

    def __init__(self, contract=CONTRACT, readiness=(), probe=(), gpus_per_job=1, env=None):
        self.config = SimpleNamespace(gpus_per_job=gpus_per_job)
        self._contract, self._readiness, self._probe = contract, list(readiness), list(probe)
        self._env = dict(env or {})
        self.asked: list = []

    def readiness(self, probe=True):
        self.asked.append(("readiness", probe))
        return list(self._readiness)

    def probe_environment(self, imports):
        self.asked.append(("probe_environment", imports))
        return list(self._probe)

    def contract(self):
        return self._contract

    def launch_env(self):
        return dict(self._env)


def contract_with(**changes):
    return dataclasses.replace(CONTRACT, **changes)


def record(folder: Path, files: dict[str, bytes], checks: dict[str, str]) -> None:
    """Write ``files`` under ``folder`` and a ``.harness-weights.json`` with ``checks`` (key -> recorded value)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    (folder / RECORD).write_text(json.dumps({"files": checks}))


# -- StepResult and the findings that stop a step -------------------------------------------------------------------
def test_a_step_result_has_no_seconds_until_measured():
    assert StepResult("files", True, "d").seconds == 0.0


FINDINGS = [Finding("error", "a", "x"), Finding("warning", "b", "y"), Finding("error", "c", "z")]


def test_errors_are_the_error_findings_in_order_written_key_colon_message():
    assert setup_check._errors(FINDINGS) == ["a: x", "c: z"]
    assert setup_check._errors([]) == []
    assert setup_check._errors([Finding("warning", "b", "y")]) == []


def test_errors_can_be_limited_to_some_keys_and_can_skip_keys():
    assert setup_check._errors(FINDINGS, keys={"c", "b"}) == ["c: z"]
    assert setup_check._errors(FINDINGS, keys=set()) == []
    assert setup_check._errors(FINDINGS, skip=frozenset({"a"})) == ["c: z"]
    assert setup_check._errors(FINDINGS, keys={"a", "c"}, skip=frozenset({"c"})) == ["a: x"]


# -- step 1: files ---------------------------------------------------------------------------------------------------
def test_the_files_step_asks_readiness_without_its_subprocess_probe_and_fails_on_its_errors(tmp_path):
    adapter = Upstream(readiness=FINDINGS)
    assert step_files(make_plan(tmp_path), adapter) == StepResult("files", False, "a: x; c: z")
    assert adapter.asked == [("readiness", False)]


def test_the_files_step_passes_on_warnings_naming_the_checkout_and_the_sorted_keys(tmp_path):
    r = step_files(make_plan(tmp_path), Upstream(readiness=[Finding("warning", "b", "y")]))
    assert r == StepResult("files", True, "checkout /co/lingbot and every path the contract lists under checkpoint, "
                                          "upstream_dir")


# -- the record of the weights step ---------------------------------------------------------------------------------
def test_a_record_entry_is_read_by_its_form(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    kind, compute = setup_check._recorded("a" * 64)
    assert (kind, compute) == ("sha256", sha256)
    kind, compute = setup_check._recorded("0" * 40)
    assert (kind, compute) == ("git blob", git_blob_sha1)
    for other in ("3", "A" * 64, "a" * 63, "a" * 41, "g" * 40):  # upper case is no hub checksum: a size
        kind, compute = setup_check._recorded(other)
        assert (kind, compute(p)) == ("size", "3"), other


def test_a_record_key_is_owner_repo_at_commit_then_the_path_in_the_folder(tmp_path):
    files = {"a.bin": b"abc", "d/e/x.bin": b"12", "plain.txt": b"1", "d/y.txt": b"22"}
    record(tmp_path, files, {"o/r@c/a.bin": "3", "o/r@c/d/e/x.bin": "2", "plain.txt": "1", "d/y.txt": "2"})
    assert verify_record(tmp_path) == (4, 8, [], True)


def test_a_record_without_files_checks_nothing_but_exists(tmp_path):
    (tmp_path / RECORD).write_text(json.dumps({"commit": "c"}))
    assert verify_record(tmp_path) == (0, 0, [], True)
    (tmp_path / RECORD).write_text(json.dumps({"files": None}))
    assert verify_record(tmp_path) == (0, 0, [], True)


def test_an_unreadable_record_is_no_record(tmp_path):
    (tmp_path / RECORD).write_text("{not json")
    assert verify_record(tmp_path) == (0, 0, [], False)


def test_a_changed_file_is_named_with_both_checksums_and_still_counted(tmp_path):
    good = hashlib.sha256(b"abc").hexdigest()
    record(tmp_path, {"w.bin": b"abd", "ok.bin": b"abc"}, {"o/r@c/w.bin": good, "o/r@c/ok.bin": good})
    n, size, problems, recorded = verify_record(tmp_path)
    got = hashlib.sha256(b"abd").hexdigest()
    assert (n, size, recorded) == (2, 6, True)
    assert problems == [(f"{tmp_path / 'w.bin'}: sha256 {got[:12]}, recorded {good[:12]} (a changed or truncated "
                         "file: delete it and rerun setup 'setup.steps=[weights]')")]


def test_the_problems_come_in_the_order_of_the_record_keys(tmp_path):
    record(tmp_path, {"b.bin": b"1"}, {"o/r@c/c.bin": "1", "o/r@c/b.bin": "9", "o/r@c/a.bin": "1"})
    assert verify_record(tmp_path)[2] == [f"{tmp_path / 'a.bin'} is missing",
                                          (f"{tmp_path / 'b.bin'}: size 1, recorded 9 (a changed or truncated "
                                           "file: delete it and rerun setup 'setup.steps=[weights]')"),
                                          f"{tmp_path / 'c.bin'} is missing"]


# -- step 2: weights -------------------------------------------------------------------------------------------------
def job(local_dir, hf_cache=False, hub="huggingface", repo="o/r") -> WeightJob:
    return WeightJob(Weight(name="w", repo=repo, source="s", hf_cache=hf_cache, hub=hub), local_dir, [], "main")


def cached(tmp_path: Path, repo: str) -> Path:
    """A Hugging Face cache under ``tmp_path`` that holds one file of ``repo``; returns the cache folder."""
    snap = tmp_path / "hf" / f"models--{repo.replace('/', '--')}" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    return tmp_path / "hf"


def test_a_weight_served_from_the_hub_cache_must_be_in_the_cache(tmp_path):
    hf = cached(tmp_path, "o/there")
    adapter = Upstream(env={"HF_HUB_CACHE": str(hf)})
    plan = make_plan(tmp_path, [job(None, hf_cache=True, repo="o/there"), job(None, hf_cache=True, repo="o/gone")])
    assert step_weights(plan, adapter) == StepResult("weights", False, "o/gone is not in the Hugging Face cache "
                                                                       "/hf/hub")
    plan = make_plan(tmp_path, [job(tmp_path / "nowhere", hf_cache=True, repo="o/there")])
    assert step_weights(plan, adapter) == StepResult("weights", True, "0 files, 0.00 GB, sizes and hashes as the hub "
                                                                      "gave them")


def test_checkout_weights_and_weights_without_a_folder_are_left_to_the_files_step(tmp_path):
    (tmp_path / "co").mkdir()
    plan = make_plan(tmp_path, [job(tmp_path / "co", hub="checkout"), job(None)])
    assert step_weights(plan, Upstream()) == StepResult("weights", True, "0 files, 0.00 GB, sizes and hashes as the "
                                                                         "hub gave them")


def test_the_weights_step_sums_the_files_and_bytes_of_every_record(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, {"x.bin": b"1" * 6_000_000}, {"o/r@c/x.bin": "6000000"})
    record(b, {"y.bin": b"22", "z.bin": b"333"}, {"o/r@c/y.bin": "2", "o/r@c/z.bin": "3"})
    plan = make_plan(tmp_path, [job(a), job(b)])
    assert step_weights(plan, Upstream()) == StepResult("weights", True, "3 files, 0.01 GB, sizes and hashes as the "
                                                                         "hub gave them")


def test_a_bad_file_in_any_folder_fails_the_weights_step_with_every_problem(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    record(a, {}, {"o/r@c/x.bin": "1"})
    record(b, {}, {"o/r@c/y.bin": "1"})
    hf = cached(tmp_path, "o/there")
    plan = make_plan(tmp_path, [job(None, hf_cache=True, repo="o/gone"), job(a), job(b)])
    r = step_weights(plan, Upstream(env={"HF_HUB_CACHE": str(hf)}))
    assert r == StepResult("weights", False, f"o/gone is not in the Hugging Face cache /hf/hub; {a / 'x.bin'} is "
                                             f"missing; {b / 'y.bin'} is missing")


def test_folders_without_a_record_alone_are_not_checked(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    r = step_weights(make_plan(tmp_path, [job(a), job(b)]), Upstream())
    assert r == StepResult("weights", None, f"0 files, 0.00 GB, sizes and hashes as the hub gave them; no {RECORD} in "
                                            f"{a}, {b}: sizes and hashes not checked there (setup's weights step "
                                            "records them against the hub)")


def test_a_folder_without_a_record_beside_a_checked_one_passes_with_the_note(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    record(b, {"y.bin": b"22"}, {"o/r@c/y.bin": "2"})
    r = step_weights(make_plan(tmp_path, [job(a), job(b)]), Upstream())
    assert r == StepResult("weights", True, f"1 files, 0.00 GB, sizes and hashes as the hub gave them; no {RECORD} in "
                                            f"{a}: sizes and hashes not checked there (setup's weights step records "
                                            "them against the hub)")


# -- step 3: imports -------------------------------------------------------------------------------------------------
def test_the_imports_step_probes_the_contracts_modules_and_names_them(tmp_path):
    adapter = Upstream()
    assert step_imports(make_plan(tmp_path), adapter) == StepResult("imports", True, f"wan, flash_attn import in "
                                                                                     f"{PYTHON}")
    assert adapter.asked == [("probe_environment", list(CONTRACT.imports))]


def test_the_imports_step_fails_on_an_error_but_not_on_the_gpu_count(tmp_path):
    probe = [Finding("error", "model.devices", "no GPU visible"), Finding("error", "model.python", "`import wan` fails"),
             Finding("error", "model.upstream_dir", "no checkout")]
    r = step_imports(make_plan(tmp_path), Upstream(probe=probe))
    assert r == StepResult("imports", False, "model.python: `import wan` fails; model.upstream_dir: no checkout")


def test_the_imports_step_passes_with_its_warnings_in_parentheses(tmp_path):
    probe = [Finding("error", "model.devices", "no GPU visible"), Finding("warning", "model.python", "flash_attn: "
                                                                                                     "needs a GPU"),
             Finding("warning", "model.env", "w2")]
    r = step_imports(make_plan(tmp_path), Upstream(probe=probe))
    assert r == StepResult("imports", True, f"wan, flash_attn import in {PYTHON} (model.python: flash_attn: needs a "
                                            "GPU; model.env: w2)")


def test_a_model_without_a_contract_probes_no_module(tmp_path):
    adapter = Upstream(contract=None)
    assert step_imports(make_plan(tmp_path), adapter) == StepResult("imports", True, f"none import in {PYTHON}")
    assert adapter.asked == [("probe_environment", [])]


# -- step 4: cuda ----------------------------------------------------------------------------------------------------
def probe_output(monkeypatch, stdout: str = "", stderr: str = "", raises: BaseException | None = None) -> list:
    """``subprocess.run`` answers the CUDA probe with ``stdout`` / ``stderr`` (or raises); returns the calls."""
    calls: list = []

    def run(argv, **kwargs):
        calls.append((argv, kwargs))
        if raises is not None:
            raise raises
        return SimpleNamespace(stdout=stdout, stderr=stderr, returncode=0)

    monkeypatch.setattr(setup_check.subprocess, "run", run)
    return calls


def cuda_line(available=True, gpus=(), kernel=4.0, torch="2.6.0+cu124", built_for="12.4") -> str:
    out = {"torch": torch, "built_for": built_for, "available": available,
           "gpus": [{"name": n, "gb": gb, "sm": "9.0"} for n, gb in gpus]}
    if kernel is not None:
        out["kernel"] = kernel
    return "HARNESS-CUDA " + json.dumps(out)


def test_the_cuda_probe_runs_the_models_python_with_the_launch_environment(tmp_path, monkeypatch):
    calls = probe_output(monkeypatch, "noise\n" + cuda_line(gpus=[("H100", 79.2)]) + "\nmore\n")
    env = {"CUDA_VISIBLE_DEVICES": "3", "X": "1"}
    r = step_cuda(make_plan(tmp_path), Upstream(env=env))
    assert r == StepResult("cuda", True, "torch 2.6.0+cu124 (CUDA 12.4), 1 GPU(s): H100 79.2 GB")
    assert calls == [([PYTHON, "-c", setup_check._CUDA_PROBE],
                      {"env": env, "capture_output": True, "text": True, "timeout": 300})]


@pytest.mark.parametrize("exc", [FileNotFoundError("no such file"), subprocess.TimeoutExpired("py", 300)])
def test_a_python_that_cannot_run_or_hangs_fails_the_cuda_step(tmp_path, monkeypatch, exc):
    probe_output(monkeypatch, raises=exc)
    assert step_cuda(make_plan(tmp_path), Upstream()) == StepResult("cuda", False, f"cannot run {PYTHON}: {exc}")


def test_a_probe_without_its_line_fails_with_the_tail_of_what_it_printed(tmp_path, monkeypatch):
    probe_output(monkeypatch, stdout="out", stderr="  Traceback\nModuleNotFoundError: No module named 'torch'\n")
    r = step_cuda(make_plan(tmp_path), Upstream())
    assert r == StepResult("cuda", False, f"{PYTHON} could not probe CUDA: Traceback\nModuleNotFoundError: No module "
                                          "named 'torch'")
    probe_output(monkeypatch, stdout=" only stdout \n", stderr="")
    assert step_cuda(make_plan(tmp_path), Upstream()).detail == f"{PYTHON} could not probe CUDA: only stdout"
    probe_output(monkeypatch, stderr="x" * 100 + "y" * 300)
    assert step_cuda(make_plan(tmp_path), Upstream()).detail == f"{PYTHON} could not probe CUDA: " + "y" * 300


def test_a_torch_without_cuda_fails_saying_what_it_was_built_for(tmp_path, monkeypatch):
    probe_output(monkeypatch, cuda_line(available=False, gpus=(), torch="2.6.0+cpu", built_for=None, kernel=None))
    r = step_cuda(make_plan(tmp_path), Upstream())
    assert r == StepResult("cuda", False, f"{PYTHON} sees no CUDA device (torch 2.6.0+cpu, built for CUDA none: a CPU "
                                          "build); run this check on a GPU node")
    probe_output(monkeypatch, cuda_line(available=False, kernel=None))
    assert "(torch 2.6.0+cu124, built for CUDA 12.4); " in step_cuda(make_plan(tmp_path), Upstream()).detail


def test_the_cuda_step_wants_the_gpus_of_one_job_and_at_least_one(tmp_path, monkeypatch):
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    probe_output(monkeypatch, cuda_line(gpus=[]))
    r = step_cuda(make_plan(tmp_path), Upstream(gpus_per_job=0, env=env))
    assert r == StepResult("cuda", False, "0 GPU(s) visible (CUDA_VISIBLE_DEVICES 0,1), 1 needed per job; a kernel "
                                          "gave 4.0")
    probe_output(monkeypatch, cuda_line(gpus=[("A", 80.0)]))
    assert step_cuda(make_plan(tmp_path), Upstream(gpus_per_job=1)).ok is True
    assert step_cuda(make_plan(tmp_path), Upstream(gpus_per_job=2)).detail == (
        "1 GPU(s) visible (CUDA_VISIBLE_DEVICES None), 2 needed per job; a kernel gave 4.0")
    probe_output(monkeypatch, cuda_line(gpus=[("A", 80.0), ("B", 80.0)]))
    assert step_cuda(make_plan(tmp_path), Upstream(gpus_per_job=2)).ok is True


@pytest.mark.parametrize("kernel", [0.0, None])
def test_a_kernel_that_gives_the_wrong_sum_fails_the_cuda_step(tmp_path, monkeypatch, kernel):
    probe_output(monkeypatch, cuda_line(gpus=[("A", 80.0)], kernel=kernel))
    r = step_cuda(make_plan(tmp_path), Upstream())
    assert r == StepResult("cuda", False, f"1 GPU(s) visible (CUDA_VISIBLE_DEVICES None), 1 needed per job; a kernel "
                                          f"gave {kernel}")


def test_gpus_below_the_memory_upstream_states_are_noted_and_one_exactly_on_it_is_not(tmp_path, monkeypatch):
    probe_output(monkeypatch, cuda_line(gpus=[("A", 79.9), ("B", 80.0), ("C", 95.0)]))
    stated = Upstream(contract=contract_with(gpu_memory=dataclasses.replace(CONTRACT.gpu_memory, stated_gb=80.0)))
    r = step_cuda(make_plan(tmp_path), stated)
    assert r == StepResult("cuda", True, "torch 2.6.0+cu124 (CUDA 12.4), 3 GPU(s): A 79.9 GB, B 80.0 GB, C 95.0 GB; "
                                         "below the 80.0 GB upstream states: [{'name': 'A', 'gb': 79.9, 'sm': '9.0'}]")


def test_without_a_stated_memory_or_a_contract_no_gpu_is_noted(tmp_path, monkeypatch):
    probe_output(monkeypatch, cuda_line(gpus=[("A", 8.0)]))
    assert CONTRACT.gpu_memory.stated_gb is None
    expected = StepResult("cuda", True, "torch 2.6.0+cu124 (CUDA 12.4), 1 GPU(s): A 8.0 GB")
    assert step_cuda(make_plan(tmp_path), Upstream()) == expected
    assert step_cuda(make_plan(tmp_path), Upstream(contract=None)) == expected


# -- step 5: tiny ----------------------------------------------------------------------------------------------------
def test_without_a_short_run_the_tiny_step_is_not_run_and_says_why(tmp_path):
    r = step_tiny(make_plan(tmp_path), Upstream(contract=None), tmp_path)
    assert r == StepResult("tiny", None, "not run: upstream allows no short run (the contract has no day_one section)")
    r = step_tiny(make_plan(tmp_path), Upstream(contract=contract_with(day_one=None)), tmp_path)
    assert r.ok is None and r.detail.endswith("(the contract has no day_one section)")
    no_short = contract_with(day_one=dataclasses.replace(CONTRACT.day_one, tiny_frames=None, source="frames fixed"))
    r = step_tiny(make_plan(tmp_path), Upstream(contract=no_short), tmp_path)
    assert r == StepResult("tiny", None, "not run: upstream allows no short run (frames fixed)")


@pytest.fixture
def tiny_run(monkeypatch):
    """The tiny run's adapter is the real one, built from what ``step_tiny`` gives it, with upstream's generation
    replaced by ``generate`` (set by the test); returns what was seen."""
    import adapters.base

    seen = SimpleNamespace(cfg=None, req=None, compiled=None, generate=None)
    real = adapters.base.build_adapter

    def build(cfg):
        seen.cfg = cfg
        a = real(cfg)
        a.compile = lambda req: ("compiled", req)

        def generate(req, compiled, writer):
            seen.req, seen.compiled = req, compiled
            return seen.generate(writer)
        a.generate = generate
        return a

    monkeypatch.setattr(adapters.base, "build_adapter", build)
    monkeypatch.setattr(setup_check, "time", StepClock(2.5))
    return seen


def one_frame(writer):
    writer.write(np.zeros((16, 16, 3), np.uint8))
    return SimpleNamespace(num_frames=1)


def test_the_tiny_run_generates_the_contracts_frame_count_into_a_video(tmp_path, tiny_run):
    tiny_run.generate = one_frame
    plan = make_plan(tmp_path)
    r = step_tiny(plan, Upstream(), tmp_path / "out")
    video = tmp_path / "out" / "tiny" / "video.mp4"
    assert r == StepResult("tiny", True, f"1 frames of 13 in {video} ({CONTRACT.day_one.source})", 2.5)
    assert video.is_file()
    assert tiny_run.cfg == {**plan.config, **plan.paths, "python": PYTHON, "num_frames": 13,
                            "frames_per_trajectory": {}}
    assert tiny_run.req.item_dir == tmp_path / "out" / "tiny" and tiny_run.req.path.num_frames == 13
    assert tiny_run.compiled == ("compiled", tiny_run.req)


def test_a_failed_tiny_run_gives_its_message_and_its_log(tmp_path, tiny_run):
    def fail(writer):
        raise RuntimeError("upstream exited 1")
    tiny_run.generate = fail
    r = step_tiny(make_plan(tmp_path), Upstream(), tmp_path)
    assert r == StepResult("tiny", False, f"13 frames: upstream exited 1 (log: {tmp_path / 'tiny' / 'upstream.log'})",
                           2.5)


def test_a_tiny_run_that_writes_no_frame_fails_at_the_video(tmp_path, tiny_run):
    tiny_run.generate = lambda writer: SimpleNamespace(num_frames=0)
    r = step_tiny(make_plan(tmp_path), Upstream(), tmp_path)
    assert r.ok is False and r.detail.startswith("13 frames: ")


@pytest.fixture(scope="module")
def lingbot():
    from adapters.base import build_adapter

    return build_adapter({**group_yaml("model", MODEL), "num_frames": 5, "frames_per_trajectory": {}})


def test_the_tiny_item_is_a_slow_forward_dolly_of_the_first_demo_case(lingbot, tmp_path):
    from harness.cases import load_case_set
    from harness.context import ContextPolicy

    req = tiny_request(lingbot, 5, tmp_path / "tiny")
    case = load_case_set("builtin:demo")[0]
    assert req.case.id == case.id == "dynamic_cat" and req.item_dir == tmp_path / "tiny"
    expected = np.tile(np.eye(4), (5, 1, 1))
    expected[:, 2, 3] = [0.0, 0.02, 0.04, 0.06, 0.08]
    assert req.path.c2w.shape == (5, 4, 4) and np.allclose(req.path.c2w, expected, atol=1e-12, rtol=0)
    assert req.path.name == "day_one_dolly" and req.path.phases == {"V": (0, 5)}
    assert np.array_equal(req.path.K, lingbot.canvas_K(case))
    c = lingbot.config
    assert (req.path.fps, req.path.height, req.path.width, req.seed) == (16.0, 480, 832, 1) == (
        float(c.fps), c.height, c.width, int(c.seed))
    assert req.context == ContextPolicy.from_dict(group_yaml("context", "fullkv"))


# -- run_check -------------------------------------------------------------------------------------------------------
def steps(monkeypatch, **results: StepResult) -> list[str]:
    """Every step of the check answers its given result (``ok`` by default); returns the steps that ran."""
    ran: list[str] = []

    def stand_in(name):
        def step(*args):
            ran.append(name)
            return dataclasses.replace(results.get(name, StepResult(name, True, f"{name} fine")))
        return step
    for name in setup_check.CHECK_STEPS:
        monkeypatch.setattr(setup_check, f"step_{name}", stand_in(name))
    monkeypatch.setattr(setup_check, "time", StepClock(1.5))
    return ran


def test_a_check_that_passes_logs_every_step_numbered_and_writes_check_json(tmp_path, monkeypatch):
    ran = steps(monkeypatch, weights=StepResult("weights", None, "w not checked"),
                tiny=StepResult("tiny", True, "t", 7.0))
    logs: list[str] = []
    plan = make_plan(tmp_path)
    results = run_check(plan, logs.append, tmp_path / "out")
    out = tmp_path / "out" / "check.json"
    assert ran == ["files", "weights", "imports", "cuda", "tiny"]
    assert logs == ["check 1/5 files: ok: files fine", "check 2/5 weights: not checked: w not checked",
                    "check 3/5 imports: ok: imports fine", "check 4/5 cuda (GPU): ok: cuda fine",
                    "check 5/5 tiny (GPU): ok: t", f"lingbot_v2: day-one check passed ({out})"]
    assert [r.seconds for r in results] == [1.5, 1.5, 1.5, 1.5, 7.0]  # a step's own measure is kept
    assert json.loads(out.read_text()) == {
        "model": MODEL, "repo": CONTRACT.repo, "commit": CONTRACT.commit, "python": PYTHON, "stopped_at": None,
        "steps": [dataclasses.asdict(r) for r in results]}


def test_the_check_goes_to_the_models_day_one_folder_by_default(tmp_path, monkeypatch):
    steps(monkeypatch)
    logs: list[str] = []
    run_check(make_plan(tmp_path), logs.append)
    assert (tmp_path / "day_one" / MODEL / "check.json").is_file()
    assert logs[-1] == f"lingbot_v2: day-one check passed ({tmp_path / 'day_one' / MODEL / 'check.json'})"


def test_the_check_stops_at_the_first_failure_naming_what_passed_and_what_did_not_run(tmp_path, monkeypatch):
    ran = steps(monkeypatch, weights=StepResult("weights", None, "unrecorded"),
                imports=StepResult("imports", False, "no wan"))
    logs: list[str] = []
    with pytest.raises(CheckStopped) as e:
        run_check(make_plan(tmp_path), logs.append, tmp_path)
    assert str(e.value) == ("lingbot_v2: the day-one check stopped at step 3/5 (imports): no wan. Passed: files; "
                            f"not run: cuda, tiny. Details: {tmp_path / 'check.json'}")
    assert ran == ["files", "weights", "imports"]
    assert logs[-1] == "check 3/5 imports: FAILED: no wan"
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["stopped_at"] == "imports" and [s["ok"] for s in report["steps"]] == [True, None, False]


def test_a_failure_at_the_first_step_passed_none_and_one_at_the_last_left_none_unrun(tmp_path, monkeypatch):
    steps(monkeypatch, files=StepResult("files", False, "no checkout"))
    with pytest.raises(CheckStopped, match=r"at step 1/5 \(files\): no checkout\. Passed: none; not run: weights, "
                                           r"imports, cuda, tiny\. "):
        run_check(make_plan(tmp_path), lambda m: None, tmp_path)
    steps(monkeypatch, tiny=StepResult("tiny", False, "oom"))
    with pytest.raises(CheckStopped, match=r"at step 5/5 \(tiny\): oom\. Passed: files, weights, imports, cuda; not "
                                           r"run: none\. "):
        run_check(make_plan(tmp_path), lambda m: None, tmp_path)


def test_a_stop_at_cuda_is_called_the_first_gpu_step(tmp_path, monkeypatch):
    steps(monkeypatch, cuda=StepResult("cuda", False, "no CUDA"))
    with pytest.raises(CheckStopped, match=r"at step 4/5 \(cuda, the first GPU step\): no CUDA\. Passed: files, "
                                           r"weights, imports; not run: tiny\. "):
        run_check(make_plan(tmp_path), lambda m: None, tmp_path)


def test_a_model_of_the_harnesss_own_environment_has_no_day_one_check(tmp_path, monkeypatch):
    import adapters.base

    real = adapters.base.build_adapter  # an in-process model's config has no ``python``: the plan's is dropped
    monkeypatch.setattr(adapters.base, "build_adapter", lambda cfg: real({k: v for k, v in cfg.items() if k != "python"}))
    ran = steps(monkeypatch)
    with pytest.raises(SetupError) as e:
        run_check(make_plan(tmp_path, model="tiny_causal_dit", paths={}), lambda m: None, tmp_path)
    assert str(e.value) == "tiny_causal_dit runs in the harness's own environment: there is no day-one check"
    assert not isinstance(e.value, CheckStopped) and ran == [] and not (tmp_path / "check.json").exists()


def test_the_check_builds_the_adapter_from_the_plans_paths_and_python(tmp_path, monkeypatch):
    import adapters.base

    built: list[dict] = []
    real = adapters.base.build_adapter
    monkeypatch.setattr(adapters.base, "build_adapter", lambda cfg: built.append(cfg) or real(cfg))
    steps(monkeypatch)
    plan = make_plan(tmp_path)
    run_check(plan, lambda m: None, tmp_path)
    assert built == [{**plan.config, **plan.paths, "python": PYTHON}]


def test_the_steps_get_the_plan_the_adapter_and_the_check_folder(tmp_path, monkeypatch):
    from adapters.upstream import UpstreamAdapter

    seen: dict[str, tuple] = {}
    for name in setup_check.CHECK_STEPS:
        monkeypatch.setattr(setup_check, f"step_{name}",
                            lambda *a, _n=name: seen.setdefault(_n, a) and StepResult(_n, True, ""))
    plan = make_plan(tmp_path)
    run_check(plan, lambda m: None, tmp_path / "c")
    assert sorted(seen) == sorted(setup_check.CHECK_STEPS)
    assert all(a[0] is plan and isinstance(a[1], UpstreamAdapter) for a in seen.values())
    assert [len(a) for a in seen.values()] == [2, 2, 2, 2, 3] and seen["tiny"][2] == tmp_path / "c"

