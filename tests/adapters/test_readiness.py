"""Readiness at planning time (commit, weights from the contract, run-time hub fetches, checkout writes, the import
probe run as the launch runs, GPU count) and the root cause of a failed launch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adapters import contracts
from adapters.upstream import root_cause

MODELS = contracts.available()  # the upstream models: the folders of adapters/ that hold a contract.yaml


def _adapter(model: str, **over):
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml

    return build_adapter({**group_yaml("model", model), **over})


def _errors(findings):
    return [f for f in findings if f.level == "error"]


def fill_contract_paths(model: str, root: Path, extra: dict | None = None) -> dict[str, str]:
    """Create, under ``root``, every path the contract's checkpoint entries list (a file for a file entry, a folder
    with the listed files for a folder entry; glob patterns get one matching file) and return the config keys."""
    c = contracts.load(model)
    over: dict[str, str] = {}
    for e in c.checkpoint:
        base = root / e.key
        if e.key == "upstream_dir":
            base = root / "checkout"
        if e.kind == "file":
            base = base.with_name(f"{e.key}{e.suffix or '.bin'}")
            base.parent.mkdir(parents=True, exist_ok=True)
            base.write_bytes(b"0")
        else:
            base.mkdir(parents=True, exist_ok=True)
            for f in e.files:
                p = base / f.replace("*", "00000-of-00001")
                p.parent.mkdir(parents=True, exist_ok=True)
                if "." in p.name:
                    p.write_bytes(b"0")
                else:
                    p.mkdir(exist_ok=True)
        over[e.key] = str(base)
    over.setdefault("upstream_dir", str(root / "checkout"))
    Path(over["upstream_dir"]).mkdir(parents=True, exist_ok=True)
    wd = Path(over["upstream_dir"]) / (c.raw.get("subdir") or "")
    wd.mkdir(parents=True, exist_ok=True)
    return {**over, **(extra or {})}


def test_unset_checkout_says_how_to_set_up(tmp_path):
    (f,) = _adapter("lingbot_v2").readiness(probe=False)
    assert f.key == "model.upstream_dir" and "https://github.com/robbyant/lingbot-world-v2" in f.message
    assert "2648877f763a06cc743bcd919936da4d25f12e7b" in f.message and "local.models.lingbot_v2" in f.message
    assert "python -m harness setup model=lingbot_v2" in f.message


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


@pytest.mark.parametrize("model", MODELS)
def test_every_listed_path_is_needed_and_enough(model, tmp_path, monkeypatch):
    """Filling exactly what the contract lists makes readiness pass; taking away any one listed file fails, naming
    the config key (HY's encoders inside --model_path, MG-3.5's Wan/DA3 folders, Evoke's ViGeo, SANA's YAML)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    over = fill_contract_paths(model, tmp_path)
    for h in contracts.load(model).hub_fetches:  # the pre-filled cache of a run-time fetch
        if "offline_cache" in h.avoided_by:
            snap = tmp_path / "hf" / "hub" / f"models--{h.repo.replace('/', '--')}" / "snapshots" / "abc"
            snap.mkdir(parents=True)
            (snap / "config.json").write_text("{}")
    a = _adapter(model, **over)
    assert _errors(a.readiness(probe=False)) == []
    for e in contracts.load(model).checkpoint:
        for f in e.files[:3]:
            victim = next(Path(over[e.key]).glob(f.replace("*", "00000-of-00001")))
            moved = victim.with_name(victim.name + ".away")
            victim.rename(moved)
            keys = [x.key for x in _errors(a.readiness(probe=False))]
            assert f"model.{e.key}" in keys, (model, e.key, f, keys)
            moved.rename(victim)


def test_hy_action_checkpoint_must_be_a_safetensors_file(tmp_path):
    over = fill_contract_paths("hy_worldplay", tmp_path)
    folder = tmp_path / "ar_distilled"
    folder.mkdir()
    (err,) = _errors(_adapter("hy_worldplay", **{**over, "checkpoint": str(folder)}).readiness(probe=False))
    assert err.key == "model.checkpoint" and "must be a file" in err.message and "load_file" in err.message
    pt = tmp_path / "model.pt"
    pt.write_bytes(b"0")
    (err,) = _errors(_adapter("hy_worldplay", **{**over, "checkpoint": str(pt)}).readiness(probe=False))
    assert ".safetensors" in err.message


def test_yume_captioner_only_with_prompt_refinement(tmp_path):
    over = fill_contract_paths("yume", tmp_path)
    over.pop("captioner")
    assert _errors(_adapter("yume", **over).readiness(probe=False)) == []  # the paper's setting: no InternVL
    keys = [f.key for f in _errors(_adapter("yume", **over, prompt_refinement=True).readiness(probe=False))]
    assert keys == ["model.captioner"]


def test_sana_text_encoder_fetched_at_run_time_must_be_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    a = _adapter("sana_wm", **fill_contract_paths("sana_wm", tmp_path))
    (err,) = _errors(a.readiness(probe=False))
    assert "Efficient-Large-Model/gemma-2-2b-it" in err.message and str(tmp_path / "hf" / "hub") in err.message
    assert "python -m harness setup model=sana_wm" in err.message
    snap = tmp_path / "hf" / "hub" / "models--Efficient-Large-Model--gemma-2-2b-it" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert _errors(a.readiness(probe=False)) == []
    assert a.command_argv(__import__("adapters.upstream", fromlist=["LaunchSpec"]).LaunchSpec("-", []))[1][
        "HF_HUB_OFFLINE"] == "1"  # the launch reads the cache, never the hub


def test_hub_fallback_on_a_missing_local_copy_is_named(tmp_path):
    over = fill_contract_paths("hy_worldplay", tmp_path)
    import shutil

    shutil.rmtree(Path(over["model_path"]) / "text_encoder" / "byt5-small")
    msgs = [f.message for f in _errors(_adapter("hy_worldplay", **over).readiness(probe=False))]
    assert any("text_encoder/byt5-small" in m for m in msgs)


def test_checkout_that_upstream_writes_into_must_be_writable(tmp_path, monkeypatch):
    over = fill_contract_paths("matrix_game35", tmp_path)
    a = _adapter("matrix_game35", **over)
    assert _errors(a.readiness(probe=False)) == []
    monkeypatch.setattr("adapters.upstream.os.access", lambda path, mode: False)
    (err,) = _errors(a.readiness(probe=False))
    assert ".cache/infer_runs" in err.message and "not writable" in err.message


def test_checkout_at_another_commit_warns(tmp_path):
    repo = tmp_path / "checkout"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "x").write_text("x")
    subprocess.run([*git, "add", "x"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    a = _adapter("matrix_game35", **fill_contract_paths("matrix_game35", tmp_path))
    (w,) = a.readiness(probe=False)
    assert w.level == "warning" and w.key == "model.upstream_commit" and "git -C" in w.message
    assert a.check_ready(probe=False) == [w]  # a warning does not stop the run


def test_gpu_count_includes_a_vae_worker():
    mg3 = _adapter("matrix_game3")
    assert mg3.config.ranks == 8 and mg3.config.vae_worker_gpus == 0  # no async VAE (see the contract)
    assert mg3.check_gpu_count(7)[0].key == "model.devices" and mg3.check_gpu_count(8) == []
    worker = _adapter("matrix_game3", vae_worker_gpus=1, devices="0,1,2,3,4,5,6")
    (err,) = worker.check_gpu_count(7)
    assert "7 torchrun ranks + 1 VAE-worker GPU" in err.message and "sees 7" in err.message
    assert _adapter("lingbot_v2").check_gpu_count(4)[0].key == "model.devices"
    assert _adapter("yume").check_gpu_count(1) == []  # one rank: --sp_size is a no-op at the pin
    assert "torch is not importable" in _adapter("sana_wm").check_gpu_count(None, "ModuleNotFoundError")[0].message


# -- the import probe runs as the launch runs ------------------------------------------------------------------


def _launch_imports(checkout: Path, script: str, module: str) -> bool:
    """Run ``python <script>`` from the checkout the way a launch without a shim does; True when it imports."""
    p = checkout / script
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"import {module}\n")
    return subprocess.run([sys.executable, str(p)], cwd=checkout, capture_output=True).returncode == 0


def _import_errors(findings):
    return [f for f in findings if "import" in f.message]


@pytest.mark.slow
def test_probe_finds_what_a_launch_without_shim_cannot_import(tmp_path, monkeypatch):
    """SANA runs its script as a file with no shim: ``diffusion`` at the checkout root is importable only through the
    editable install. The probe says so, as the launch would fail; it used to put the checkout on PYTHONPATH."""
    monkeypatch.delenv("PYTHONPATH", raising=False)  # both the launch and the probe inherit it
    co = tmp_path / "co"
    (co / "diffusion").mkdir(parents=True)
    (co / "diffusion" / "__init__.py").write_text("")
    script = contracts.load("sana_wm").entry["script"]
    assert not _launch_imports(co, script, "diffusion")  # the real launch fails
    a = _adapter("sana_wm", upstream_dir=str(co), python=sys.executable, gpus_per_job=0)
    (err,) = _import_errors(a.probe_environment(["diffusion"]))
    assert "`import diffusion` fails" in err.message and "ModuleNotFoundError" in err.message
    site = tmp_path / "site"  # an installed package (what `pip install -e .` provides) reaches both
    (site / "diffusion").mkdir(parents=True)
    (site / "diffusion" / "__init__.py").write_text("")
    a = _adapter("sana_wm", upstream_dir=str(co), python=sys.executable, gpus_per_job=0,
                 env={"PYTHONPATH": str(site)})
    assert _import_errors(a.probe_environment(["diffusion"])) == []


@pytest.mark.slow
def test_probe_follows_the_shim_and_upstreams_own_sys_path(tmp_path):
    co = tmp_path / "co"
    (co / "hyvideo").mkdir(parents=True)
    (co / "hyvideo" / "__init__.py").write_text("")
    a = _adapter("hy_worldplay", upstream_dir=str(co), python=sys.executable, gpus_per_job=0)
    assert a.always_shimmed and _import_errors(a.probe_environment(["hyvideo"])) == []  # the shim adds the cwd
    (err,) = _import_errors(a.probe_environment(["hyvideo", "no_such_pkg_xyz"]))
    assert "`import no_such_pkg_xyz` fails" in err.message
    (co / "evoke").mkdir()
    (co / "evoke" / "__init__.py").write_text("")
    ev = _adapter("evoke", upstream_dir=str(co), python=sys.executable, gpus_per_job=0)
    # infer_single.py (the Python that imports evoke) inserts the repo root itself (contract entry.sys_path)
    assert _import_errors(ev.probe_environment(["evoke"])) == []
    assert str(co.resolve()) in ev.probe_sys_path(contracts.load("evoke").entry["python_script"], False)[0]


def test_probe_skips_imports_that_need_a_gpu_where_none_is_visible(tmp_path):
    from adapters.contracts import ImportProbe

    co = tmp_path / "co"
    (co / "needs_cuda").mkdir(parents=True)
    (co / "needs_cuda" / "__init__.py").write_text("raise RuntimeError('no CUDA device')\n")
    a = _adapter("dreamx", upstream_dir=str(co), python=sys.executable, gpus_per_job=0)
    found = a.probe_environment([ImportProbe(module="needs_cuda", needs_gpu=True)])
    try:
        import torch

        gpus = torch.cuda.device_count()
    except ImportError:
        gpus = 0
    if gpus == 0:
        assert [f.level for f in found] == ["warning"] and "needs a visible GPU" in found[0].message
    else:
        assert _import_errors(found)


def test_not_ready_fails_with_every_problem_listed(tmp_path):
    from adapters.base import ModelConfigError

    a = _adapter("evoke", upstream_dir=str(tmp_path), checkpoint=str(tmp_path / "nope"))
    with pytest.raises(ModelConfigError) as e:
        a.check_ready(probe=False)
    for key in ("model.checkpoint", "model.base_checkpoint", "model.vigeo_weights"):
        assert key in str(e.value)


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
