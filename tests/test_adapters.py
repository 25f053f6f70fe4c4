"""The nine upstream adapters: goldens, decode consistency, dry runs, and generate against stand-in upstreams."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from adapters.goldens import MODELS, TRAJECTORIES, compare, compile_item
from conftest import run_cli

#: Max rotation error (deg) / translation error (scene units) of decode(native) vs request, per model, justified by
#: the format: latent-rate anchors with SLERP in between (< 0.5 deg at LRLRLR speed), MG-3's 0.02 dead zone (0.3 deg) and 12.35 cm
#: key steps, YUME's stage captions (one direction and speed per 29 frames: up to ~12 deg), LingBot's lost translation scale (fitted).
TOL = {
    "hy_worldplay": (0.5, 0.01), "lingbot": (0.5, 0.02), "lingbot_v2": (0.5, 0.02), "dreamx": (0.5, 0.01),
    "matrix_game35": (1e-9, 1e-9), "sana_wm": (1e-9, 1e-9), "evoke": (1e-9, 1e-9), "matrix_game3": (0.35, 0.07),
    "yume": (15.0, 0.2),
}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("trajectory", TRAJECTORIES)
def test_goldens(model, trajectory, tmp_path):
    assert compare(model, trajectory, compile_item(model, trajectory, tmp_path)) == []


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("trajectory", ["lrlr", "lrlrlr", "lrud", "square"])
def test_native_controls_decode_back_to_the_request(model, trajectory, tmp_path):
    from adapters.base import ItemRequest
    from harness.cases import load_case_set
    from harness.context import ContextPolicy
    from harness.registry import build_adapter, group_yaml
    from harness.residuals import pose_residual
    from trajectories import TrajectorySpec

    adapter = build_adapter(group_yaml("model", model))
    case = {c.id: c for c in load_case_set("builtin:demo")}["human_astronaut"]
    _, K = adapter.canvas_image_and_K(case)
    path = adapter.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", trajectory)), K, trajectory)
    pol = ContextPolicy.from_dict(group_yaml("context", adapter.config.paper_context))
    req = ItemRequest(case=case, path=path, context=pol, seed=1, item_dir=tmp_path / "item")
    controls = adapter.compile(req)
    decoded = adapter.decode(req.controls_dir, req)  # re-read from disk
    assert np.allclose(decoded, controls.decoded_c2w)
    res = pose_residual(path.c2w, decoded)
    rot_tol, tr_tol = TOL[model]
    assert res["max_rotation_error_deg"] <= rot_tol, res
    assert res["max_translation_error"] <= tr_tol, res
    # loops close: the decoded path returns to the start pose within the model's quantisation
    assert pose_residual(np.eye(4)[None], decoded[-1:])["max_rotation_error_deg"] <= max(rot_tol, 1e-9)
    assert (req.controls_dir / "command.sh").read_text().startswith("#!/usr/bin/env bash")


def test_all_nine_models_dry_run_every_trajectory(tmp_path):
    models = ",".join(MODELS)
    r = run_cli(["-m", f"model={models}", "trajectory=lrlr,lrlrlr,lrud,square", "context=paper", "dry_run=true",
                 "run=dry", "cases.include=[object_coffee]", "progress=false"], tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    metas = sorted((tmp_path / "outputs" / "dry").glob("*/*/seed-*/*/*/meta.json"))
    assert len(metas) == 9 * 4
    for m in metas:
        meta = json.loads(m.read_text())
        assert meta["status"] == "compiled", meta.get("error")
        assert (m.parent / "preview.png").is_file() and (m.parent / "controls" / "command.sh").is_file()
        assert "achieved_vs_requested" in meta["controls"]
        assert meta["controls"]["translation_scale"]


def test_unsupported_context_fails_at_planning(tmp_path):
    r = run_cli(["model=evoke", "context=sliding", "dry_run=true"], tmp_path)
    assert r.returncode == 2 and "does not support context=sliding" in r.stderr and "no KV window" in r.stderr


def test_missing_checkout_names_the_key(tmp_path):
    r = run_cli(["model=lingbot_v2", "context=fullkv", "cases.include=[environment_rocket]", "run=g",
                 "progress=false"], tmp_path)
    assert r.returncode == 2 and "model.upstream_dir" in r.stderr and "Traceback" not in r.stderr
    assert not list((tmp_path / "outputs" / "g").rglob("meta.json"))  # nothing half-written
    r = run_cli(["model=lingbot_v2", "context=fullkv", "cases.include=[environment_rocket]", "run=g",
                 f"model.upstream_dir={tmp_path}", "progress=false"], tmp_path)
    assert r.returncode == 2 and "model.checkpoint" in r.stderr and "lingbot-world-v2" in r.stderr


# -- generate() against stand-in upstream checkouts ---------------------------------------------------------------

STANDIN = Path(__file__).resolve().parent / "standin" / "fake_upstream.py"


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _fake_checkout(model: str, root: Path) -> str:
    """Create the files the adapter's command and shim expect, all delegating to the stand-in script."""
    runner = f"import runpy, sys; sys.argv[0] = {str(STANDIN)!r}; runpy.run_path({str(STANDIN)!r}, run_name='__main__')\n"
    scripts = {"hy_worldplay": "hyvideo/generate.py", "matrix_game3": "generate.py",
               "matrix_game35": "infer_distilled.py", "sana_wm": "inference_video_scripts/wm/inference_sana_wm_streaming.py",
               "yume": "fastvideo/sample/sample_5b.py", "lingbot": "generate.py", "lingbot_v2": "generate.py",
               "dreamx": "inference_ar_forcing.py"}
    if model == "evoke":
        _write(root / "scripts/inference/infer_post_distill.sh", f"#!/usr/bin/env bash\nexec {sys.executable} {STANDIN}\n")
    else:
        _write(root / scripts[model], runner)
    if model == "hy_worldplay":
        _write(root / "hyvideo/__init__.py", "")
        _write(root / "hyvideo/utils/__init__.py", "")
        _write(root / "hyvideo/utils/retrieval_context.py",
               "def select_aligned_memory_frames(w2c, chunk_start, memory_frames=20, temporal_context_size=12, "
               "pred_latent_size=4, points_local=None):\n    return list(range(chunk_start))\n")
        return "hy"
    if model == "matrix_game3":
        _write(root / "utils/__init__.py", "")
        _write(root / "utils/utils.py", "def get_data(*a, **k):\n    raise RuntimeError('random benchmark actions')\n")
        return "mg3"
    if model == "yume":
        _write(root / "wan23.py", "class Yume:\n    def generate(self, prompt, seed=None):\n        return seed\n")
        return "yume"
    if model == "dreamx":
        _write(root / "utils/__init__.py", "")
        _write(root / "utils/trajectory_processor.py", "def generate_trajectory_from_json(spec):\n    return []\n")
        _write(root / "pipeline/__init__.py", "")
        _write(root / "pipeline/pipeline_causal_camera.py", "KV_CACHE_SIZE = 18480\nMAX_ATTENTION_SIZE = 39600\n")
        return "dreamx"
    if model == "matrix_game35":
        _write(root / "configs/infer_distilled_6blocks.yaml", "seed: 3407\nnum_blocks: 6\n")
        return "mg35"
    return ""


@pytest.mark.parametrize("model", MODELS)
def test_generate_with_a_standin_upstream(model, tmp_path, monkeypatch):
    from harness.registry import group_yaml
    from harness.runner import plan_from_config, run_items

    checkout = tmp_path / "checkout"
    probe = _fake_checkout(model, checkout)
    ckpt = tmp_path / "weights.safetensors"
    ckpt.write_bytes(b"0")
    mcfg = group_yaml("model", model)
    overrides = {"upstream_dir": str(checkout), "checkpoint": str(ckpt), "python": sys.executable,
                 "launch": "python", "height": 48, "width": 64, "devices": "3,4"}
    mcfg.update(overrides)
    from harness.registry import build_adapter

    adapter = build_adapter(mcfg)
    frames = adapter.config.expected_output_frames or adapter.config.frames_for("lrlr")
    record = tmp_path / "record.json"
    monkeypatch.setenv("FAKE_RECORD", str(record))
    monkeypatch.setenv("FAKE_FRAMES", str(frames))
    monkeypatch.setenv("FAKE_FPS", str(int(adapter.config.fps)))
    monkeypatch.setenv("FAKE_PROBE", probe)
    cfg = {"model": mcfg, "context": {"name": "paper"}, "trajectory": group_yaml("trajectory", "lrlr"),
           "cases": {"source": "builtin:demo", "include": ["environment_rocket"]}, "output_root": str(tmp_path / "o"),
           "run": "g", "seed": None}
    adapter, policy, specs, cases, items, run_dir = plan_from_config(cfg)
    summary = run_items(adapter, policy, specs, cases, items, run_dir, cfg, progress=False)
    assert summary.done and not summary.failed, summary.table()
    item = run_dir / items[0].rel_dir
    meta = json.loads((item / "meta.json").read_text())
    assert meta["generation"]["achieved_frames"] == frames and (item / "upstream_video.mp4").is_file()
    seen = json.loads(record.read_text())
    assert seen["cuda"] == "3,4" and seen["cwd"] == str(checkout)
    argv = " ".join(seen["argv"])
    assert str(adapter.config.seed) in argv or seen["env"].get("SEED") == str(adapter.config.seed)
    if probe == "hy":
        assert seen["selection_8"] == list(range(8))  # the native rule (paper context) is kept
    if probe == "mg3":
        assert seen["get_data"] == {"keyboard_condition": [497, 6], "mouse_condition": [497, 2],
                                    "extrinsics_all": [497, 4, 4]}
    if probe == "yume":
        assert seen["yume_seed"] == 43
    if probe == "dreamx":
        assert seen["rows"] == 501 and seen["kv_cache_size"] == 126 * 880  # FullKV patch applied
    if probe == "mg35":
        assert seen["config_seed"] == 3407
    if model == "evoke":
        assert seen["env"]["CAP_MODE"] == "none" and seen["env"]["NUM_CHUNKS"] == "14"


def test_generate_reports_failures_and_timeouts(tmp_path, monkeypatch):
    from harness.registry import group_yaml
    from harness.runner import plan_from_config, run_items

    checkout = tmp_path / "checkout"
    _fake_checkout("sana_wm", checkout)
    ckpt = tmp_path / "w"
    ckpt.write_bytes(b"0")
    mcfg = {**group_yaml("model", "sana_wm"), "upstream_dir": str(checkout), "checkpoint": str(ckpt),
            "python": sys.executable, "height": 48, "width": 64}
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "r.json"))
    monkeypatch.setenv("FAKE_FRAMES", "100")  # wrong count
    monkeypatch.setenv("FAKE_FPS", "16")
    cfg = {"model": mcfg, "context": {"name": "fullkv"}, "trajectory": group_yaml("trajectory", "lrlr"),
           "cases": {"source": "builtin:demo", "include": ["environment_rocket"]}, "output_root": str(tmp_path / "o"),
           "run": "f"}
    out = run_items(*plan_from_config(cfg), cfg, progress=False)
    assert out.failed
    meta = json.loads(next((tmp_path / "o" / "f").rglob("meta.json")).read_text())
    assert "100 frames, expected 480" in meta["error"]
    monkeypatch.setenv("FAKE_FAIL", "1")
    cfg["run"] = "f2"
    out = run_items(*plan_from_config(cfg), cfg, progress=False)
    meta = json.loads(next((tmp_path / "o" / "f2").rglob("meta.json")).read_text())
    assert out.failed and "exited with 3" in meta["error"] and "simulated failure" in meta["error"]
    monkeypatch.delenv("FAKE_FAIL")
    cfg["run"], cfg["model"] = "f3", {**mcfg, "timeout_s": 0.01}
    out = run_items(*plan_from_config(cfg), cfg, progress=False)
    meta = json.loads(next((tmp_path / "o" / "f3").rglob("meta.json")).read_text())
    assert out.failed and "timed out" in meta["error"]
