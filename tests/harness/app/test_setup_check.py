"""The GPU day-one check (``setup.steps=[check]``, harness/app/setup_check.py) on this CPU machine: it runs every step
up to the first GPU step and stops there, naming what passed and what did not run (issue 43).

The model is LingBot-World v2 with its real contract: the checkout is upstream's tree at the pin built from the
committed listing (placeholders), the weights are small files recorded in ``.harness-weights.json`` as setup's weights
step records them, the model's Python is this one with a stand-in ``flash_attn`` on its path and, in the fast tests,
a stand-in CPU-only ``torch`` (importing the real one twice costs seconds); the slow test runs the command with this
machine's real CPU torch.
"""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from adapters import contracts
from harness.app.setup_check import CHECK_STEPS, CheckStopped, verify_record
from tests.support import compose, run_cli
from tests.support.upstream_tree import fake_checkout

REPO = "robbyant/lingbot-world-v2-14b-causal-fast"


#: a CPU-only torch as the probes see it (version, no CUDA build, no device)
CPU_TORCH = """__version__ = "2.6.0+cpu"
class version:
    cuda = None
class cuda:
    is_available = staticmethod(lambda: False)
    device_count = staticmethod(lambda: 0)
"""


def _node(tmp_path, stand_in_torch: bool) -> dict:
    co = fake_checkout("lingbot_v2", tmp_path / "lingbot-world-v2")
    stubs = tmp_path / "stubs" / "flash_attn"
    stubs.mkdir(parents=True)
    (stubs / "__init__.py").write_text("")
    if stand_in_torch:
        (stubs.parent / "torch").mkdir()
        (stubs.parent / "torch" / "__init__.py").write_text(CPU_TORCH)
    ck = tmp_path / "weights" / "checkpoint"
    files = {"models_t5_umt5-xxl-enc-bf16.pth": b"t5" * 300, "Wan2.1_VAE.pth": b"vae" * 100,
             "google/umt5-xxl/tokenizer.json": b"{}", "transformers/diffusion_pytorch_model.safetensors": b"d" * 999}
    for rel, data in files.items():
        (ck / rel).parent.mkdir(parents=True, exist_ok=True)
        (ck / rel).write_bytes(data)
    record = {f"{REPO}@{'c' * 40}/{rel}": hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    (ck / ".harness-weights.json").write_text(json.dumps({"files": record}))
    over = [f"+local.models.lingbot_v2.upstream_dir={co}", f"+local.models.lingbot_v2.checkpoint={ck}",
            f"+local.models.lingbot_v2.python={sys.executable}",
            f"+local.models.lingbot_v2.env={{PYTHONPATH: '{stubs.parent}'}}"]
    return {"over": over, "ck": ck, "root": tmp_path / "root", "files": files, "flash_attn": stubs}


@pytest.fixture
def node(tmp_path):
    return _node(tmp_path, stand_in_torch=True)


def _cfg(node, *extra: str) -> dict:
    return compose(["cmd=setup", "model=lingbot_v2", f"setup.root={node['root']}", "setup.steps=[check]", *node["over"],
                    *extra])


def test_on_cpu_it_runs_up_to_the_first_gpu_step_and_says_where_it_stopped(node):
    from harness.app.setup import run_setup

    logs: list[str] = []
    with pytest.raises(CheckStopped) as e:
        run_setup(_cfg(node), log=logs.append)
    msg = str(e.value)
    assert msg.startswith("lingbot_v2: the day-one check stopped at step 4/5 (cuda, the first GPU step): ")
    assert "sees no CUDA device" in msg and "Passed: files, weights, imports; not run: tiny." in msg
    assert [x.split(":")[0] for x in logs] == [f"check {i}/5 {s}{' (GPU)' if s in ('cuda', 'tiny') else ''}"
                                              for i, s in enumerate(CHECK_STEPS[:4], start=1)]
    assert "4 files, 0.00 GB, sizes and hashes as the hub gave them" in logs[1]
    report = json.loads((node["root"] / "day_one" / "lingbot_v2" / "check.json").read_text())
    assert report["stopped_at"] == "cuda" and [s["ok"] for s in report["steps"]] == [True, True, True, False]


def test_a_damaged_weight_stops_it_at_the_weights_naming_the_file(node):
    from harness.app.setup import run_setup

    vae = node["ck"] / "Wan2.1_VAE.pth"
    vae.write_bytes(b"x" * vae.stat().st_size)  # the same size, other bytes: only the hash sees it
    with pytest.raises(CheckStopped, match=r"step 2/5 \(weights\): .*Wan2.1_VAE.pth: sha256 .*recorded .*"
                                           r"Passed: files; not run: imports, cuda, tiny"):
        run_setup(_cfg(node), log=lambda m: None)


def test_a_missing_import_stops_it_before_cuda(node):
    from harness.app.setup import run_setup

    node["flash_attn"].rename(node["flash_attn"].with_name("not_flash_attn"))  # gone from the model's environment
    with pytest.raises(CheckStopped, match=r"step 3/5 \(imports\): .*`import flash_attn` fails.*not run: cuda, tiny"):
        run_setup(_cfg(node), log=lambda m: None)


@pytest.mark.slow  # the model's Python imports this machine's real torch twice (about 10 s)
def test_the_command_on_this_cpu_exits_2_at_cuda_with_the_sentence_and_no_traceback(tmp_path):
    node = _node(tmp_path, stand_in_torch=False)
    r = run_cli(["setup", "model=lingbot_v2", f"setup.root={node['root']}", "setup.steps=[check]", *node["over"]],
                tmp_path)
    assert r.returncode == 2 and "stopped at step 4/5 (cuda, the first GPU step)" in r.stderr
    assert "sees no CUDA device (torch " in r.stderr and "Traceback" not in r.stderr
    assert "check 3/5 imports: ok" in r.stdout + r.stderr


def test_a_record_entry_is_checked_by_its_kind(tmp_path):
    """sha256 (LFS), git blob id (small files) and size (no checksum from the hub) each re-checked; a missing file
    is named."""
    from harness.app.setup import git_blob_sha1

    (tmp_path / "a.bin").write_bytes(b"abc")
    (tmp_path / "b.json").write_bytes(b"{}")
    (tmp_path / "c.txt").write_bytes(b"12345")
    rec = {"o/r@c/a.bin": hashlib.sha256(b"abc").hexdigest(), "o/r@c/b.json": git_blob_sha1(tmp_path / "b.json"),
           "o/r@c/c.txt": "5", "o/r@c/d/gone.bin": "7"}
    (tmp_path / ".harness-weights.json").write_text(json.dumps({"files": rec}))
    n, size, problems, recorded = verify_record(tmp_path)
    assert (n, size, recorded) == (3, 10, True) and problems == [f"{tmp_path / 'd' / 'gone.bin'} is missing"]
    (tmp_path / "c.txt").write_bytes(b"1234")
    assert any("c.txt: size 4, recorded 5" in p for p in verify_record(tmp_path)[2])
    assert verify_record(tmp_path / "nowhere") == (0, 0, [], False)


#: a torch that sees two 80 GB GPUs and runs the probe's kernel (the CUDA branch of the probe, here on a CPU)
GPU_TORCH = """__version__ = "2.6.0+cu124"
class version:
    cuda = "12.4"
class _Props:
    name, total_memory, major, minor = "Stand-in H100", 80 * 2**30, 9, 0
class cuda:
    is_available = staticmethod(lambda: True)
    device_count = staticmethod(lambda: 2)
    get_device_properties = staticmethod(lambda i: _Props())
class _T:
    def sum(self):
        return self
    def item(self):
        return 4.0
def ones(n, device=None):
    return _T()
"""


def test_the_cuda_step_reads_the_devices_and_wants_the_gpus_of_one_job(tmp_path):
    from adapters.base import build_adapter
    from harness.app.setup import make_plan
    from harness.app.setup_check import step_cuda

    node = _node(tmp_path, stand_in_torch=True)
    (node["flash_attn"].parent / "torch" / "__init__.py").write_text(GPU_TORCH)
    plan = make_plan(_cfg(node))
    adapter = build_adapter({**plan.config, **plan.paths, "python": plan.python})
    r = step_cuda(plan, adapter)  # lingbot_v2: 8 GPUs per job
    assert r.ok is False and r.detail.startswith("2 GPU(s) visible") and "8 needed per job" in r.detail
    r = step_cuda(plan, build_adapter({**plan.config, **plan.paths, "python": plan.python, "gpus_per_job": 2}))
    assert r.ok is True and r.detail == "torch 2.6.0+cu124 (CUDA 12.4), 2 GPU(s): Stand-in H100 80.0 GB, " \
                                        "Stand-in H100 80.0 GB"


@pytest.mark.parametrize("model", contracts.available(contracts.ADAPTERS_DIR))
def test_the_tiny_run_is_an_item_the_adapter_compiles(model, tmp_path):
    """The day-one generation (the contract's day_one.tiny_frames) passes every rule the adapter holds for upstream's
    frame counts, on CPU: only its launch needs the GPU."""
    from adapters.base import build_adapter
    from harness.app.setup_check import tiny_request
    from harness.config_groups import group_yaml

    n = contracts.load(model).day_one.tiny_frames
    adapter = build_adapter({**group_yaml("model", model), "num_frames": n, "frames_per_trajectory": {}})
    req = tiny_request(adapter, n, tmp_path / "tiny")
    adapter.compile(req)
    assert req.path.num_frames == n and (tmp_path / "tiny" / "controls" / "command.sh").is_file()
