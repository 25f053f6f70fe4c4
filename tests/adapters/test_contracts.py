"""Every compiled launch and every shim against upstream's contract (``adapters/<model>/contract.yaml``).

The contracts hold facts read from each upstream repository at the pinned commit (flags, environment variables,
call sites, output semantics, canvas rule). These tests make the class of mistake found in review impossible to
repeat: a flag upstream does not define, an ambiguous abbreviation, a missing required flag, a bad choice, an
exported variable nobody reads, a shim that returns a different arity than its call site unpacks.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from adapters import contracts
from adapters.goldens import MODELS, compile_item
from tests.support import ROOT

SHIM_MODULES = {"hy_worldplay/runner.py": "adapters.hy_worldplay.runner", "matrix_game3/runner.py":
                "adapters.matrix_game3.runner", "matrix_game35/runner.py": "adapters.matrix_game35.runner",
                "yume/runner.py": "adapters.yume.runner", "dreamx/runner.py": "adapters.dreamx.runner",
                "lingbot_v2/fov_runner.py": "adapters.lingbot_v2.fov_runner"}


def _contexts(model: str) -> list[str]:
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml

    return list(build_adapter(group_yaml("model", model)).supported_contexts())


def _cases():
    out = [(m, t, "paper") for m in MODELS for t in ("lrlr", "lrud", "square")]
    out += [(m, "lrlr", c) for m in MODELS for c in _contexts(m)]  # every context a model supports
    return out


# -- contracts as data ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_contract_matches_the_model_config(model):
    """One contract per upstream model, at the commit the model config pins, every fact with a source."""
    from harness.config_groups import group_yaml

    c = contracts.load(model)
    cfg = group_yaml("model", model)
    assert c.commit == cfg["upstream_commit"] and len(c.commit) == 40
    assert c.repo == cfg["upstream_repo"]
    if c.entry.get("kind") == "env":
        assert c.env and all("source" in spec for spec in c.env.values())
    else:
        assert c.flags and all("source" in spec for spec in c.flags.values()), "every flag cites upstream"
    for section in ("output", "canvas"):
        assert getattr(c, section).get("source"), f"{model}: {section} needs a source"
    for site in c.call_sites.values():
        assert site.get("defined_at") or site.get("note") or site.get("modules")
    assert c.checkpoint, f"{model}: the checkpoint files upstream loads"


def test_contract_parser_rejects_what_upstream_rejects():
    """The parser built from the data behaves like upstream's argparse (found defects, reproduced)."""
    sana, hy, lb1 = contracts.load("sana_wm"), contracts.load("hy_worldplay"), contracts.load("lingbot")
    base = ["--image", "i.png", "--prompt", "p.txt", "--output_dir", "o", "--camera", "c.npy"]
    contracts.check_args(sana, base)
    with pytest.raises(contracts.ContractViolation, match="--output"):  # ambiguous: --output_dir / --output_mode
        contracts.check_args(sana, [*base, "--output", "x.mp4"])
    with pytest.raises(contracts.ContractViolation, match="required"):  # --output_dir is required
        contracts.check_args(sana, base[:4] + base[6:])
    with pytest.raises(contracts.ContractViolation, match="one of the arguments"):  # --camera | --action
        contracts.check_args(sana, base[:6])
    hy_args = ["--prompt", "x", "--resolution", "480p", "--action_ckpt", "a", "--model_type", "ar"]
    with pytest.raises(contracts.ContractViolation, match="model_path"):
        contracts.check_args(hy, hy_args)
    with pytest.raises(contracts.ContractViolation, match="invalid choice"):
        contracts.check_args(hy, [*hy_args, "--model_path", "m", "--resolution", "1080p"])
    with pytest.raises(contracts.ContractViolation, match="Boolean|not one of"):
        contracts.check_args(hy, [*hy_args, "--model_path", "m", "--few_step", "maybe"])
    for flag in ("--chunk_size", "--infer_mode"):  # the pinned v1 parser has neither
        with pytest.raises(contracts.ContractViolation, match=flag):
            contracts.check_args(lb1, [flag, "4"])
    with pytest.raises(contracts.ContractViolation, match="never reads"):
        contracts.check_env(contracts.load("evoke"), {"CKPT": "/w"})


# -- every compiled command.sh ------------------------------------------------------------------------------------


@pytest.mark.parametrize("model,trajectory,context", _cases())
def test_command_sh_parses_under_the_contract(model, trajectory, context, tmp_path):
    c = contracts.load(model)
    controls = compile_item(model, trajectory, tmp_path, context=context)
    text = (controls / "command.sh").read_text()
    assert f"@{c.commit[:12]}" in text.splitlines()[1], "command.sh names the pinned commit"
    launch = contracts.split_launch(text, c.entry["script"])
    if c.entry.get("kind") == "env":
        assert launch.args == [] and launch.launcher == ["bash"]
        contracts.check_env(c, launch.env)
        env = launch.env
        # the launcher's per-chunk clamp and smoothing stay off (infer_batch.py:487-490)
        assert float(env["CAP_MAX_DEG"]) == 0 and float(env["CAP_MAX_TRANS"]) == 0
        assert float(env["POSE_SMOOTH_WIN"]) <= 1
        return
    ns = contracts.check_args(c, launch.args)
    assert set(launch.env) <= contracts.HARNESS_ENV | set(c.env), "exports only what upstream reads"
    if launch.shim:  # the shim's own options parse with the shim's parser
        mod = importlib.import_module(SHIM_MODULES[launch.shim.split("/adapters/")[1]])
        mod.build_parser().parse_args(launch.shim_args)
    expected_launcher = c.entry.get("launcher")
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml

    cfg = build_adapter(group_yaml("model", model)).config
    if cfg.launch == "torchrun":
        assert expected_launcher == "torchrun" and f"--nproc_per_node={cfg.ranks}" in launch.launcher
    out = c.output
    value = getattr(ns, out["flag"].lstrip("-").replace("-", "_"))
    if out["kind"] == "directory":
        assert not str(value).endswith(".mp4"), f"{out['flag']} is a folder upstream ({out['source']})"
    else:
        assert str(value).endswith(".mp4")


def test_matrix_game3_launch_layout(tmp_path):
    """8 ranks, Ulysses 8, no async VAE: the writer stays in rank 0, where the shim replaces process_video."""
    c = contracts.load("matrix_game3")
    text = (compile_item("matrix_game3", "lrlr", tmp_path) / "command.sh").read_text()
    launch = contracts.split_launch(text, c.entry["script"])
    ns = contracts.check_args(c, launch.args)
    assert "--nproc_per_node=8" in launch.launcher and ns.ulysses_size == 8 and not ns.use_async_vae
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert ns.num_iterations == 12 and ns.size == "704*1280"
    from adapters.matrix_game3.runner import build_parser

    assert build_parser().parse_args(launch.shim_args).fps == c.writer.fps == 17


def test_an_overlay_left_on_cannot_be_compiled(tmp_path):
    """The contract's overlay rule at compile time: the async VAE moves MG-3's writer into a spawned worker (its key
    boxes and cursor would stay), and Evoke without JOYSTICK_HUD=off keeps its HUD."""
    from adapters.base import ModelConfigError
    from adapters.evoke.adapter import EvokeConfig
    from harness.config_groups import group_yaml

    cfg = group_yaml("model", "matrix_game3")
    cfg["extra_args"] = ["--use_int8", "--use_async_vae", "--async_vae_warmup_iters", "1"]
    cfg.update(gpus_per_job=8, vae_worker_gpus=1)
    with pytest.raises(ModelConfigError, match=r"key_boxes.*--use_async_vae moves the writer into a spawned worker"):
        _compile_cfg(cfg, tmp_path / "a")
    ecfg = group_yaml("model", "evoke")
    env = dict(EvokeConfig.__dataclass_fields__["launcher_env"].default_factory())
    env.pop("JOYSTICK_HUD")
    ecfg["launcher_env"] = env
    with pytest.raises(ModelConfigError, match="joystick_hud.*set JOYSTICK_HUD off"):
        _compile_cfg(ecfg, tmp_path / "b")


def _compile_cfg(cfg: dict, item_dir: Path):
    from adapters.base import ItemRequest, build_adapter
    from harness.cases import load_case_set
    from harness.context import ContextPolicy
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec

    adapter = build_adapter(cfg)
    case = load_case_set("builtin:demo")[0]
    K = adapter.canvas_K(case)
    path = adapter.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")), K, "lrlr")
    pol = ContextPolicy.from_dict(group_yaml("context", adapter.config.paper_context))
    return adapter.compile(ItemRequest(case=case, path=path, context=pol, seed=1, item_dir=item_dir))


def test_a_run_time_download_not_avoided_cannot_be_compiled(tmp_path, monkeypatch):
    """SANA fetches Pi3X from the hub when --intrinsics is missing: dropping the flag fails the compile."""
    from adapters.base import ModelConfigError
    from adapters.sana_wm.adapter import SanaWMAdapter
    from harness.config_groups import group_yaml

    original = SanaWMAdapter.launch

    def without_intrinsics(self, req, controls):
        spec = original(self, req, controls)
        i = spec.args.index("--intrinsics")
        del spec.args[i:i + 2]
        return spec

    monkeypatch.setattr(SanaWMAdapter, "launch", without_intrinsics)
    with pytest.raises(ModelConfigError, match="yyfz233/Pi3X.*must pass --intrinsics"):
        _compile_cfg(group_yaml("model", "sana_wm"), tmp_path)


def test_sana_prompt_is_a_file(tmp_path):
    c = contracts.load("sana_wm")
    controls = compile_item("sana_wm", "lrlr", tmp_path)
    ns = contracts.check_args(c, contracts.split_launch((controls / "command.sh").read_text(), c.entry["script"]).args)
    assert Path(ns.prompt).is_file() and Path(ns.prompt).read_text().strip()  # upstream read_text()s it


# -- shims, called exactly as upstream's call sites call them ------------------------------------------------------


def test_hy_selector_shim_as_called_by_the_pipeline():
    from adapters.hy_worldplay.runner import make_selector

    site = contracts.load("hy_worldplay").call_sites["select_aligned_memory_frames"]
    select = make_selector({0: [], 4: [0, 1, 2, 3], 8: [0, 1, 2, 3, 4, 5, 6, 7]})
    w2c = np.tile(np.eye(4), (12, 1, 1))
    out = select(w2c, 8, **{k: v for k, v in site["keywords"].items() if k in ("memory_frames",
                                                                                "temporal_context_size",
                                                                                "pred_latent_size")},
                 points_local=None, device="cpu")
    assert isinstance(out, list) and all(isinstance(i, int) for i in out) and out == list(range(8))


def test_mg3_get_data_shim_returns_what_the_call_site_unpacks(monkeypatch):
    torch = pytest.importorskip("torch")
    from PIL import Image
    from tests.support.standin import mg3_rule

    from adapters.matrix_game3.runner import make_get_data

    site = contracts.load("matrix_game3").call_sites["get_data"]
    fake = types.ModuleType("utils.utils")
    fake.compute_all_poses_from_actions = lambda kb, ms, first_pose=None, return_last_pose=False: \
        mg3_rule.all_poses(kb, ms, first_pose)
    fake.get_extrinsics = lambda rotations, positions: np.array([np.eye(4)] * len(positions))

    def original(num_frames, height, width, pil_image, device=None, dtype=None):  # the pin's signature
        return torch.zeros(1, 3, 1, height, width), None, None, None

    original.__module__ = "utils.utils"
    fake.get_data = original
    monkeypatch.setitem(sys.modules, "utils.utils", fake)
    T = 497
    kb = np.zeros((T, 6), np.float32)
    kb[:, 0] = 1
    ms = np.zeros((T, 2), np.float32)
    get_data = make_get_data(original, kb, ms)
    result = get_data(T, 704, 1280, Image.new("RGB", (1280, 704)), device="cpu", dtype=torch.bfloat16)
    assert len(result) == site["returns"]["arity"] == 4
    current_image, extrinsics_all, keyboard_condition_all, mouse_condition_all = result
    assert tuple(current_image.shape) == (1, 3, 1, 704, 1280)
    assert tuple(keyboard_condition_all.shape) == (1, T, 6) and keyboard_condition_all.dtype == torch.bfloat16
    assert tuple(mouse_condition_all.shape) == (1, T, 2) and len(extrinsics_all) == T
    with pytest.raises(SystemExit, match="num_iterations"):
        get_data(T + 40, 704, 1280, None, device="cpu", dtype=torch.float32)


def test_yume_generate_shim_gives_stage_s_the_controls_of_stage_s():
    from adapters.yume.runner import make_generate

    seen = []

    def original(self, input_prompt, img=None, seed=-1, **kwargs):
        seen.append((input_prompt, seed))
        return None, None, None, None, img

    lines = [f"line {s}." for s in range(5)]
    gen = make_generate(original, lines, seed=43)
    captions = [x + " RESPONSE" for x in lines]  # sample_5b.py:817 appends the captioner's response
    gen(None, captions[0], frame_num=33, max_area=1, latent_frame_zero=8, img=None)  # stage 0 (:901)
    for step_sample in range(len(captions) - 1):  # after stage s, stage s+1 is prepared with caption[s] (:1088)
        out = gen(None, captions[step_sample], frame_num=33, max_area=1, latent_frame_zero=8, img="x")
        assert len(out) == contracts.load("yume").call_sites["Yume.generate"]["returns"]["arity"]
    assert [p for p, _ in seen] == captions and [s for _, s in seen] == [43, 44, 45, 46, 47]


def test_yume_upstream_stage_rule_alone_would_lag():
    """The fact the shim corrects, written as the recorded rule: stage s >= 1 gets line s-1."""
    rule = contracts.load("yume").raw["captions"]["stage_rule"]
    assert "line s-1" in rule
    stages = 17
    upstream_lines = [0] + [s - 1 for s in range(1, stages)]
    assert upstream_lines[:3] == [0, 0, 1] and stages - 1 not in upstream_lines


def test_dreamx_trajectory_shim_returns_the_three_values_unpacked():
    from adapters.dreamx.runner import make_generator

    site = contracts.load("dreamx").call_sites["generate_trajectory_from_json"]
    rows = [[float(i), 0.5, 0.9, 0.5, 0.5, 0, 0, *np.eye(4)[:3].ravel()] for i in range(501)]
    gen = make_generator(rows)
    result = gen(trajectory_spec=[], num_frames=(126 - 1) * 4 + 1, return_cam_params=True)
    assert len(result) == site["returns"]["arity"] == 3
    _, cam_params_np, _ = result
    assert cam_params_np.shape == (501, 19) and len(cam_params_np[0].tolist()) == 19
    with pytest.raises(SystemExit, match="cameras.txt"):
        gen(trajectory_spec=[], num_frames=97, return_cam_params=True)


def test_dreamx_full_kv_literals_are_where_the_contract_says(tmp_path, monkeypatch):
    """The FullKV patch rewrites the literals in the modules the contract names (not the pipeline alone)."""
    from adapters.dreamx.runner import full_kv_patches
    from adapters.shim import patch_source

    lits = contracts.load("dreamx").literals
    patches = dict(full_kv_patches(126))
    assert set(patches) == {lits["kv_cache_size"]["module"], lits["max_attention_size"]["module"]}
    assert patches[lits["max_attention_size"]["module"]][0][0] == lits["max_attention_size"]["text"]
    assert patches[lits["kv_cache_size"]["module"]][0][0] == lits["kv_cache_size"]["text"]
    pkg = tmp_path / "dxpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text("max_attention_size = 39600 if -1 == -1 else 12 * 880\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    patch_source("dxpkg.model", [("39600", str(126 * 880))], "a1f4c6e")
    assert sys.modules["dxpkg.model"].max_attention_size == 126 * 880
    with pytest.raises(SystemExit, match="not found"):
        patch_source("dxpkg.model", [("18480", "1")], "a1f4c6e")


def test_mg35_config_shim(tmp_path):
    from adapters.matrix_game35.runner import build_parser, patch

    src = tmp_path / "in.yaml"
    src.write_text("seed: 3407\nnum_blocks: 6\n")
    out = tmp_path / "out.yaml"
    patch(build_parser().parse_args(["--seed", "7", "--config-in", str(src), "--config-out", str(out)]))
    assert yaml.safe_load(out.read_text()) == {"seed": 7, "num_blocks": 6}


# -- Matrix-Game 3: integration step for step ----------------------------------------------------------------------


@pytest.mark.parametrize("trajectory", ["lrlr", "lrud", "square"])
def test_mg3_integration_matches_upstream_step_for_step(trajectory, tmp_path):
    """The harness's integrator (``mg3_states``) against an independent implementation of the recorded rule
    (action i moves frame i to i+1), frame by frame, on the compiled actions."""
    from tests.support.standin import mg3_rule

    from adapters.matrix_game3.controls import MG3Params, mg3_states

    controls = compile_item("matrix_game3", trajectory, tmp_path)
    kb = np.load(controls / "keyboard_condition.npy")
    ms = np.load(controls / "mouse_condition.npy")
    ours = mg3_states(kb, ms, MG3Params())
    rule = mg3_rule.all_poses(kb, ms, np.zeros(5))
    assert ours.shape == rule.shape == (len(kb), 5)
    wrap = lambda a: (a + 180.0) % 360.0 - 180.0  # noqa: E731
    assert np.allclose(ours[:, :3], rule[:, :3], atol=1e-6)
    assert np.allclose(ours[:, 3], rule[:, 3], atol=1e-6) and np.allclose(wrap(ours[:, 4]), rule[:, 4], atol=1e-6)
    assert not kb[-1].any() and not ms[-1].any(), "the last action moves nothing upstream"


def test_mg3_square_keys_are_held_not_pulsed(tmp_path):
    controls = compile_item("matrix_game3", "square", tmp_path)
    meta_kb = np.load(controls / "keyboard_condition.npy")[:-1, :4].sum(1) > 0
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, meta_kb.astype(int), 0])))[::2]
    assert meta_kb.mean() > 0.4 and runs.mean() > 2.5  # was 6 % of frames in runs of 1 (isolated 12 cm jumps)


# -- LingBot canvas ------------------------------------------------------------------------------------------------


def test_lingbot_canvas_rule_is_464x832():
    from adapters.base import build_adapter
    from adapters.lingbot.adapter import wan_canvas
    from harness.config_groups import group_yaml

    assert np.sqrt(480 * 832 * (480 / 832)) < 480  # aspect ratio first, as upstream: 479.99999999999994
    assert wan_canvas(480, 832, 480 * 832) == (464, 832)
    assert wan_canvas(464, 832, 480 * 832) == (464, 832)  # a fixed point
    for model in ("lingbot", "lingbot_v2"):
        a = build_adapter(group_yaml("model", model))
        assert a.output_hw() == (464, 832) and a.frame_seqlen() == 1508


def test_lingbot_v2_fov_shim_gets_1508_and_K_rescale(tmp_path):
    from adapters.base import ItemRequest, build_adapter
    from adapters.lingbot_v2.fov_runner import build_parser
    from harness.cases import load_case_set
    from harness.context import ContextPolicy
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec

    c = contracts.load("lingbot_v2")
    adapter = build_adapter(group_yaml("model", "lingbot_v2"))
    case = load_case_set("builtin:demo")[0]
    _, K = adapter.canvas_image_and_K(case)
    path = adapter.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")), K, "lrlr")
    req = ItemRequest(case=case, path=path, context=ContextPolicy.from_dict(group_yaml("context", "fov")), seed=1,
                      item_dir=tmp_path / "item")
    controls = adapter.compile(req)
    launch = contracts.split_launch(controls.command, c.entry["script"])
    assert build_parser().parse_args(launch.shim_args).frame_seqlen == 1508
    kin = np.load(req.controls_dir / "intrinsics.npy")[0]  # in pixels of 480x832, as upstream reads it
    canvas = controls.meta["upstream_canvas"]
    assert (canvas["height"], canvas["width"], canvas["frame_seqlen"]) == (464, 832, 1508)
    # get_Ks_transformed: scale by (w / 832, h / 480) to the generated 464x832 frame
    assert np.allclose(canvas["K_fx_fy_cx_cy"], kin * [1.0, 464 / 480, 1.0, 464 / 480])


# -- small ones ----------------------------------------------------------------------------------------------------


def test_model_yaml_has_no_stray_keys_from_flow_mappings():
    """``{a: x, y}`` in YAML flow style splits at the comma into a stray key ``y`` with a null value."""
    from harness.installed_models import in_tree_models

    for f in sorted(m.config_file for m in in_tree_models().values()):
        d = yaml.safe_load(f.read_text())
        for key in ("translation_scale",):
            for k, v in (d.get(key) or {}).items():
                assert v is not None, f"{f.name}: {key}.{k} is a stray key (quote the value or use block style)"


def test_upstream_commit_must_be_a_full_hash():
    from adapters.base import ModelConfigError
    from adapters.sana_wm.adapter import SanaConfig

    base = dict(name="s", adapter="x", seed=1, height=704, width=1280, fps=16, num_frames=481)
    with pytest.raises(ModelConfigError, match="upstream_commit"):
        SanaConfig.from_dict({**base, "upstream_commit": "inference_sana_wm_streaming.py@af849ea1"})
    SanaConfig.from_dict({**base, "upstream_commit": "af849ea1c4d256231e209b9ff7bbc739496b63fe"})


def test_extractor_reads_argparse_definitions_without_running_them():
    from adapters.contracts.extract import extract_flags

    src = ("import argparse\nraise SystemExit('never executed')\n"
           "def build():\n    p = argparse.ArgumentParser(allow_abbrev=False)\n"
           "    p.add_argument('--size', type=str, choices=['a', 'b'], required=True)\n"
           "    p.add_argument('-n', '--num', type=int, nargs='+')\n"
           "    p.add_argument('--flag', action='store_true')\n    return p\n")
    flags, parser = extract_flags(src)
    assert parser == {"line": 4, "allow_abbrev": False}
    by = {f["name"]: f for f in flags}
    assert by["--size"] == {"name": "--size", "line": 5, "type": "str", "choices": ["a", "b"], "required": True}
    assert by["--num"]["aliases"] == ["-n"] and by["--num"]["nargs"] == "+" and by["--flag"]["action"] == "store_true"


# -- the per-model fixes, against the recorded upstream rules ------------------------------------------------------


def test_mg3_get_data_shim_calls_the_pinned_original_without_key_strength(monkeypatch):
    """At the pin ``get_data`` has no ``key_strength``: passing it raises TypeError there. The shim passes only what
    the original accepts (and still honours a later upstream that has it)."""
    torch = pytest.importorskip("torch")
    from tests.support.standin import mg3_rule

    from adapters.matrix_game3.runner import make_get_data

    assert contracts.load("matrix_game3").call_sites["get_data"]["original_accepts_key_strength"] is False
    fake = types.ModuleType("utils.utils")
    fake.compute_all_poses_from_actions = lambda kb, ms, first_pose=None, return_last_pose=False: \
        mg3_rule.all_poses(kb, ms, first_pose)
    fake.get_extrinsics = lambda rotations, positions: np.array([np.eye(4)] * len(positions))
    calls = []

    def pinned(num_frames, height, width, pil_image, device=None, dtype=None):
        calls.append("pinned")
        return torch.zeros(1, 3, 1, height, width), None, None, None

    pinned.__module__ = "utils.utils"
    monkeypatch.setitem(sys.modules, "utils.utils", fake)
    kb, ms = np.zeros((97, 6), np.float32), np.zeros((97, 2), np.float32)
    get_data = make_get_data(pinned, kb, ms)
    get_data(97, 8, 16, None, device="cpu", dtype=torch.float32)  # the pin's call site (inference_pipeline.py:394)
    with pytest.raises(TypeError):
        pinned(97, 8, 16, None, device="cpu", dtype=torch.float32, key_strength=1.0)  # what the old shim did

    def later(num_frames, height, width, pil_image, device=None, dtype=None, key_strength=1.0):
        calls.append(key_strength)
        return torch.zeros(1, 3, 1, height, width), None, None, None

    later.__module__ = "utils.utils"
    make_get_data(later, kb, ms)(97, 8, 16, None, device="cpu", dtype=torch.float32, key_strength=0.5)
    assert calls == ["pinned", 0.5]


def test_mg3_process_video_shim_writes_the_raw_frames_at_the_contract_fps(tmp_path):
    """Upstream's process_video draws key boxes and a cursor; the replacement writes exactly the frames it gets, at
    the writer's fps, with the call site's arguments (inference_pipeline.py:733-740)."""
    from adapters.matrix_game3.runner import REPLACES, make_process_video

    site = contracts.load("matrix_game3").call_sites["process_video"]
    assert f"{site['module']}.process_video" in REPLACES
    got = {}

    def export(frames, path, fps):
        got.update(frames=np.stack(frames), path=path, fps=fps)

    video = np.random.default_rng(0).integers(0, 256, (5, 8, 16, 3), dtype=np.uint8)
    pv = make_process_video(contracts.load("matrix_game3").writer.fps, export=export)
    pv(video, str(tmp_path / "video.mp4"), (np.zeros((5, 6)), np.zeros((5, 2))), "assets/images/mouse.png",
       mouse_scale=0.2, default_frame_res=(8, 16))
    assert got["fps"] == 17 and got["path"].endswith("video.mp4")
    assert np.array_equal(np.round(got["frames"] * 255).astype(np.uint8), video)  # nothing drawn


@pytest.mark.parametrize("trajectory", ["lrlr", "lrlrlr", "lrud"])
def test_mg3_returns_reach_the_start_orientation(trajectory):
    """Upstream drops a sub-threshold mouse value for good (|v| < 0.02 per frame and axis, nothing accumulates), so
    an encoder that leaves the remainder of a move in the dead zone ends a return up to 0.3 deg short. Integrated
    with upstream's own rule (the stand-in, float32 comparison), every frame whose requested pose is the start is
    back within 0.2 deg (the revisit tolerance); every emitted value clears the dead zone in float32."""
    from tests.support.standin import mg3_rule

    from adapters.base import build_adapter
    from adapters.matrix_game3.controls import mg3_encode
    from harness.cases import load_case_set
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec
    from trajectories.conventions import yaw_pitch_from_rotmat

    a = build_adapter(group_yaml("model", "matrix_game3"))
    K = a.canvas_K(load_case_set("builtin:demo")[0])
    path = a.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", trajectory)), K, trajectory)
    kb, ms = mg3_encode(path.c2w, a.config.params())
    nz = ms[ms != 0]
    assert (np.abs(nz) >= np.float32(0.02)).all()
    states = mg3_rule.all_poses(kb, ms, np.zeros(5))
    yaw, pitch = yaw_pitch_from_rotmat(path.c2w[:, :3, :3])
    at_start = np.hypot(np.degrees(yaw), np.degrees(pitch)) < 1e-9
    assert at_start[path.phases["R1"][0]:].any()
    err = np.hypot(states[:, 4], states[:, 3])[at_start]
    assert err.max() < 0.2 and err.max() < 1e-4, err.max()


def test_yume_verbatim_prompt_stands_in_for_the_captioner():
    """Paper appendix C: no prompt refinement, the content prompt verbatim on every stage. The shim points the
    hard-coded captioner path at a stand-in whose chat() answers with the prompt; other paths load as before."""
    from adapters.yume.runner import CAPTIONER_LITERAL, VERBATIM, build_parser, patch_captioner

    class Auto:
        @classmethod
        def from_pretrained(cls, path, **kw):
            return ("real", path)

    fake = types.SimpleNamespace(AutoModel=type("AutoModel", (Auto,), {}), AutoTokenizer=type("AutoTokenizer", (Auto,), {}))
    patch_captioner("A red kettle on a counter.", transformers=fake)
    # sample_5b.py:1289-1295 then :804
    model = fake.AutoModel.from_pretrained(VERBATIM, torch_dtype=None, low_cpu_mem_usage=True, use_flash_attn=True,
                                           trust_remote_code=True).eval().to("cuda")
    tok = fake.AutoTokenizer.from_pretrained(VERBATIM, trust_remote_code=True, use_fast=False)
    assert model.chat(tok, None, "<image>\nWe want ...", dict(max_new_tokens=1024, do_sample=True)) == \
        "A red kettle on a counter."
    assert fake.AutoModel.from_pretrained("/other") == ("real", "/other")
    assert "InternVL3-2B-Instruct" in CAPTIONER_LITERAL
    with pytest.raises(SystemExit):  # one source of the answer, never both
        build_parser().parse_args(["--seed", "1", "--captions", "c", "--captioner", "x", "--verbatim-prompt", "p"])


def test_yume_launch_is_one_rank_without_sp_size(tmp_path):
    c = contracts.load("yume")
    text = (compile_item("yume", "lrlr", tmp_path) / "command.sh").read_text()
    launch = contracts.split_launch(text, c.entry["script"])
    assert "--nproc_per_node=1" in launch.launcher and "--sp_size" not in launch.args
    from adapters.yume.runner import build_parser

    opts = build_parser().parse_args(launch.shim_args)
    assert opts.verbatim_prompt.endswith("prompt.txt") and opts.captioner is None
    lines = (tmp_path / "yume" / "lrlr" / "controls" / "caption.txt").read_text().splitlines()
    assert len(lines) == 17  # 494 poses = the image + 17 stages of 29


def test_dreamx_log_failure_is_a_missing_key_list():
    (lf,) = contracts.load("dreamx").writer.log_failures
    assert re.search(lf.pattern, "Base checkpoint loaded\nmissing: ['model.blocks.0.q.weight']\n", re.M)
    assert not re.search(lf.pattern, "Base checkpoint loaded\nmissing: []\nunexpected: []\n", re.M)


def test_dreamx_passes_upstreams_colour_correction_and_refuses_a_fake_sliding(tmp_path):
    from adapters.base import UnsupportedContextError, build_adapter
    from harness.context import ContextPolicy
    from harness.config_groups import group_yaml

    c = contracts.load("dreamx")
    ns = contracts.check_args(c, contracts.split_launch(
        (compile_item("dreamx", "lrlr", tmp_path) / "command.sh").read_text(), c.entry["script"]).args)
    assert ns.color_correction_strength == float(c.writer.postprocess[0].ours) == 1.0
    with pytest.raises(UnsupportedContextError, match="4 \\+ 12 \\+ 4"):
        build_adapter(group_yaml("model", "dreamx")).check_context(
            ContextPolicy.from_dict(group_yaml("context", "sliding")))


def test_lingbot_v2_save_dir_stays_out_of_the_checkout(tmp_path):
    c = contracts.load("lingbot_v2")
    ns = contracts.check_args(c, contracts.split_launch(
        (compile_item("lingbot_v2", "lrlr", tmp_path) / "command.sh").read_text(), c.entry["script"]).args)
    assert ns.save_dir == str(tmp_path / "lingbot_v2" / "lrlr" / "upstream_out")
