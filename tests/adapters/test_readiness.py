"""Readiness at planning time (commit, import, checkpoint files, GPU count) and the root cause of a failed launch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from adapters.upstream import root_cause


def _adapter(model: str, **over):
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml

    return build_adapter({**group_yaml("model", model), **over})


def _errors(findings):
    return [f for f in findings if f.level == "error"]


def test_unset_checkout_says_how_to_clone(tmp_path):
    (f,) = _adapter("lingbot_v2").readiness(probe=False)
    assert f.key == "model.upstream_dir" and "git clone https://github.com/robbyant/lingbot-world-v2" in f.message
    assert "2648877f763a06cc743bcd919936da4d25f12e7b" in f.message and "local.models.lingbot_v2" in f.message


def test_checkpoint_files_come_from_the_contract(tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "google" / "umt5-xxl").mkdir(parents=True)
    (ckpt / "Wan2.1_VAE.pth").write_bytes(b"0")
    a = _adapter("lingbot_v2", upstream_dir=str(tmp_path), checkpoint=str(ckpt))
    (err,) = _errors(a.readiness(probe=False))
    assert err.key == "model.checkpoint" and "models_t5_umt5-xxl-enc-bf16.pth" in err.message
    assert "transformers" in err.message and "wan/configs/wan_i2v_A14B.py" in err.message
    (ckpt / "models_t5_umt5-xxl-enc-bf16.pth").write_bytes(b"0")
    (ckpt / "transformers").mkdir()
    assert _errors(a.readiness(probe=False)) == []


def test_every_weights_folder_a_model_loads_is_checked(tmp_path):
    """HY needs the base model too; YUME its captioner; Evoke its base checkpoint."""
    w = tmp_path / "w"
    w.mkdir()
    for model, key in (("hy_worldplay", "model_path"), ("yume", "captioner"), ("evoke", "base_checkpoint")):
        over = {"upstream_dir": str(tmp_path), "checkpoint": str(w)}
        if model == "evoke":
            (w / "transformer").mkdir(exist_ok=True)
        keys = [f.key for f in _errors(_adapter(model, **over).readiness(probe=False))]
        assert f"model.{key}" in keys, (model, keys)
        assert _errors(_adapter(model, **over, **{key: str(w)}).readiness(probe=False)) == []


def test_checkout_at_another_commit_warns(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "x").write_text("x")
    subprocess.run([*git, "add", "x"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (tmp_path / "m.safetensors").write_bytes(b"0")
    a = _adapter("matrix_game35", upstream_dir=str(repo), checkpoint=str(tmp_path / "m.safetensors"))
    (w,) = a.readiness(probe=False)
    assert w.level == "warning" and w.key == "model.upstream_commit" and "git -C" in w.message
    assert a.check_ready(probe=False) == [w]  # a warning does not stop the run


def test_gpu_count_includes_the_vae_worker():
    mg3 = _adapter("matrix_game3", devices="0,1,2,3,4,5,6")
    assert mg3.config.ranks == 7 and mg3.config.gpus_per_job == 8
    (err,) = mg3.check_gpu_count(7)
    assert "7 torchrun ranks + 1 VAE-worker GPU" in err.message and "sees 7" in err.message
    assert mg3.check_gpu_count(8) == []
    assert _adapter("lingbot_v2").check_gpu_count(4)[0].key == "model.devices"
    assert _adapter("sana_wm").check_gpu_count(1) == []
    assert "torch is not importable" in _adapter("sana_wm").check_gpu_count(None, "ModuleNotFoundError")[0].message


def test_import_probe_runs_the_models_python_in_the_checkout(tmp_path):
    """The probe imports the contract's packages with the model's Python from the checkout."""
    checkout = tmp_path / "co"
    (checkout / "hyvideo").mkdir(parents=True)
    (checkout / "hyvideo" / "__init__.py").write_text("")
    a = _adapter("hy_worldplay", upstream_dir=str(checkout), python=sys.executable, gpus_per_job=0)
    assert [f for f in a.probe_environment(["hyvideo"]) if "import" in f.message] == []
    (err,) = [f for f in a.probe_environment(["hyvideo", "no_such_pkg_xyz"]) if "import" in f.message]
    assert "`import no_such_pkg_xyz` fails" in err.message and "ModuleNotFoundError" in err.message


def test_not_ready_fails_with_every_problem_listed(tmp_path):
    from adapters.base import ModelConfigError

    a = _adapter("yume", upstream_dir=str(tmp_path), checkpoint=str(tmp_path / "nope"))
    with pytest.raises(ModelConfigError) as e:
        a.check_ready(probe=False)
    assert "model.checkpoint" in str(e.value) and "model.captioner" in str(e.value)


TORCHRUN_LOG = """\
W1130 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process
[rank1]: Traceback (most recent call last):
[rank1]:   File "generate.py", line 120, in <module>
[rank1]:     pipeline = WanI2V(...)
[rank1]: RuntimeError: Error(s) in loading state_dict for WanModel:
[rank1]: \tsize mismatch for blocks.0.self_attn.q.weight
[rank0]: Traceback (most recent call last):
[rank0]:   File "generate.py", line 120, in <module>
[rank0]: RuntimeError: Error(s) in loading state_dict for WanModel:
E1130 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 11) of binary
Traceback (most recent call last):
  File "/envs/x/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
generate.py FAILED
"""


def test_root_cause_is_the_first_ranks_exception_not_torchruns_summary():
    assert root_cause(TORCHRUN_LOG) == "RuntimeError: Error(s) in loading state_dict for WanModel:"
    plain = "loading\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'seed'\n"
    assert root_cause(plain) == "KeyError: 'seed'"
    assert root_cause("Killed\n") is None
    assert root_cause("ERROR: --output must be an .mp4 file path\n") is None
    assert root_cause("shim: '39600' not found in model.py\nSystemExit: shim stopped\n") == "SystemExit: shim stopped"
