"""The rules of the LingBot-World (v1, v2), HY-WorldPlay and Evoke adapters, one at a time and in this process: the
input files each upstream reads (names, shapes, JSON fields), the launch each is given (argv, environment, shim),
what each tells upstream per context policy, and how the native files decode back to a camera path.

Adapters are built from the models' own YAML (``group_yaml``) with the one setting a rule reads changed; camera
paths are small hand-built ones (13 frames = 4 latents = one chunk of 4) whose native values can be checked by hand.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from adapters.base import ItemRequest, ModelConfigError, build_adapter
from adapters.evoke.adapter import EvokeAdapter
from adapters.hy_worldplay.adapter import HYWorldPlayAdapter
from adapters.hy_worldplay.controls import HY_DEFAULT_K
from adapters.lingbot.adapter import lingbot_context_args, wan_canvas
from adapters.lingbot_v2.adapter import LingBotV2Adapter
from harness.cases import Case
from harness.config_groups import group_yaml
from harness.context import ContextPolicy
from trajectories.path import CameraPath

SEED = 7
NATIVE = ContextPolicy.from_dict({"name": "native", "chunk": 4})
FULLKV = ContextPolicy.from_dict({"name": "fullkv", "chunk": 4})
SLIDING = ContextPolicy.from_dict({"name": "sliding", "chunk": 4, "sink": 4, "recent": 12})
FOV = ContextPolicy.from_dict({"name": "fov", "chunk": 4, "sink": 4, "recent": 4, "retrieved_chunks": 2,
                               "fov": {"num_points": 16}})
#: LingBot's intrinsics.npy resolution is 480x832: at the model's 480x832 canvas K is written as it is
K480 = np.array([[500.0, 0.0, 416.0], [0.0, 480.0, 240.0], [0.0, 0.0, 1.0]])


def adapter(model: str, **over):
    return build_adapter({**group_yaml("model", model), **over})


@pytest.fixture(scope="module")
def v1():
    return adapter("lingbot")


@pytest.fixture(scope="module")
def v2():
    return adapter("lingbot_v2")


@pytest.fixture(scope="module")
def hy():
    return adapter("hy_worldplay")


@pytest.fixture(scope="module")
def evoke():
    return adapter("evoke")


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Case:
    d = tmp_path_factory.mktemp("case")
    img = np.zeros((30, 52, 3), np.uint8)
    img[:, 26:] = 200
    cv2.imwrite(str(d / "img.png"), img)
    return Case(id="c1", family="environment", image=str(d / "img.png"), prompt="a room")


def forward(n: int, step: float = 0.1) -> np.ndarray:
    """``n`` poses moving forward (+z) by ``step`` per frame, no rotation."""
    c2w = np.tile(np.eye(4), (n, 1, 1))
    c2w[:, 2, 3] = step * np.arange(n)
    return c2w


def request(a, case: Case, item_dir: Path, c2w: np.ndarray, context=NATIVE, K=K480) -> ItemRequest:
    c = a.config
    path = CameraPath(name="fwd", c2w=c2w, K=K, fps=c.fps, height=c.height, width=c.width,
                      phases={"V": (0, len(c2w))})
    return ItemRequest(case=case, path=path, context=context, seed=SEED, item_dir=item_dir)


def written(a, req: ItemRequest, K=K480):
    req.controls_dir.mkdir(parents=True, exist_ok=True)
    return a.write_native(req, None, K)


# ==================================================================================================================
# wan_canvas: the frame size upstream's image2video generates
# ==================================================================================================================


def test_a_480x832_image_is_generated_at_464x832_because_the_square_root_falls_just_below_480():
    root = math.sqrt(480 * 832 * (480 / 832))  # upstream multiplies by the aspect ratio h / w first
    assert root < 480 and math.floor(root / 8) == 59  # 59 latents rows, rounded down to the even 58
    assert wan_canvas(480, 832, 480 * 832) == (8 * 58, 832)


def test_an_odd_latent_count_is_rounded_down_to_the_patch_on_both_sides():
    # sqrt(72 * 72) = 72 -> 9 latents -> 8 (a multiple of the 2x2 patch) -> 64 pixels
    assert wan_canvas(64, 64, 72 * 72) == (64, 64)


def test_the_canvas_follows_the_given_stride_and_patch():
    # sqrt(96 * 96) = 96 -> 96 // 4 = 24 latents -> 24 // 5 * 5 = 20 -> 80 pixels
    assert wan_canvas(96, 96, 96 * 96, stride=4, patch=5) == (80, 80)


def test_a_wide_area_keeps_the_image_aspect_on_the_latent_grid():
    # h / w = 1 / 2, area 128 * 256: sqrt(32768 / 2) = 128 -> 16 -> 128; sqrt(32768 * 2) = 256 -> 32 -> 256
    assert wan_canvas(100, 200, 128 * 256) == (128, 256)


# ==================================================================================================================
# LingBotAdapter.output_hw / frame_seqlen
# ==================================================================================================================


def test_lingbot_generates_464x832_with_1508_tokens_per_latent_at_its_default_size(v2):
    assert v2.output_hw() == (464, 832)
    seqlen = v2.frame_seqlen()
    assert seqlen == (464 // 16) * (832 // 16) == 1508 and type(seqlen) is int


def test_a_set_max_area_replaces_the_product_of_size():
    a = adapter("lingbot_v2", height=128, width=192, max_area=128 * 192)
    assert a.output_hw() == (128, 192)  # the rule's fixed point at this size (480*832 would give a larger canvas)
    assert a.frame_seqlen() == 8 * 12


def test_the_area_comes_from_size_when_max_area_is_unset():
    a = adapter("lingbot_v2", height=128, width=192, size="128*192")
    assert a.output_hw() == (128, 192)


# ==================================================================================================================
# lingbot_context_args
# ==================================================================================================================


def test_native_passes_upstreams_documented_flags_as_a_copy(v2):
    native = ["--local_attn_size", "18", "--sink_size", "6"]
    out = lingbot_context_args(NATIVE, v2.config, native)
    assert out == native and out is not native


def test_fullkv_passes_no_window_flag(v2):
    assert lingbot_context_args(FULLKV, v2.config, ["--local_attn_size", "18"]) == []


def test_sliding_4_12_4_is_upstreams_window_of_20_with_4_sink(v2):
    assert lingbot_context_args(SLIDING, v2.config, []) == ["--local_attn_size", "20", "--sink_size", "4"]


def test_a_sliding_budget_that_does_not_add_up_to_the_window_is_refused_with_the_needed_settings(v2):
    pol = ContextPolicy.from_dict({"name": "sliding", "chunk": 4, "sink": 4, "recent": 8})
    with pytest.raises(ModelConfigError) as e:
        lingbot_context_args(pol, v2.config, [])
    assert str(e.value) == ("context=sliding with sink=4, recent=8, chunk=4 needs model.sliding_local_attn_size=16 "
                            "and model.sliding_sink_size=4")


def test_a_sliding_window_of_the_right_size_with_another_sink_is_refused(v2):
    pol = ContextPolicy.from_dict({"name": "sliding", "chunk": 4, "sink": 6, "recent": 10})  # 6 + 10 + 4 = 20
    with pytest.raises(ModelConfigError, match="model.sliding_local_attn_size=20 and model.sliding_sink_size=6"):
        lingbot_context_args(pol, v2.config, [])


def test_the_sliding_settings_of_the_model_config_are_what_upstream_gets():
    a = adapter("lingbot_v2", sliding_local_attn_size=24, sliding_sink_size=2)
    pol = ContextPolicy.from_dict({"name": "sliding", "chunk": 4, "sink": 2, "recent": 18})
    assert lingbot_context_args(pol, a.config, []) == ["--local_attn_size", "24", "--sink_size", "2"]


def test_fov_has_no_upstream_knob_in_lingbot(v2):
    with pytest.raises(ModelConfigError) as e:
        lingbot_context_args(FOV, v2.config, [])
    assert str(e.value) == "context=fov has no upstream knob in LingBot (use the v2 FoV shim)"


# ==================================================================================================================
# LingBotAdapter.told_upstream / supported_contexts / context_args
# ==================================================================================================================


def test_the_bidirectional_v1_is_told_nothing_and_attends_to_the_whole_clip(v1):
    assert v1.told_upstream(NATIVE) == {"passed": "nothing: the pinned generate.py is bidirectional",
                                        "window": "the whole clip"}


def test_v2_native_is_told_run_fast_sh_window_of_6_sink_and_12_rolling(v2):
    assert v2.told_upstream(NATIVE) == {"--local_attn_size": 18, "--sink_size": 6,
                                        "passed": "upstream's documented launch",
                                        "window": "6 sink + 12 rolling latents (upstream's own)"}


def test_fullkv_is_told_the_parser_defaults_even_where_native_has_a_window(v2):
    assert v2.told_upstream(FULLKV) == {"--local_attn_size": -1, "--sink_size": 0,
                                        "passed": "nothing (generate.py defaults)", "window": "every earlier latent"}


def test_a_causal_v1_native_without_documented_flags_is_told_the_parser_defaults():
    a = adapter("lingbot", causal=True)
    assert a.told_upstream(NATIVE) == {"--local_attn_size": -1, "--sink_size": 0,
                                       "passed": "nothing (generate.py defaults)", "window": "every earlier latent"}


def test_sliding_is_told_the_window_flags_and_the_harness_budget(v2):
    assert v2.told_upstream(SLIDING) == {"--local_attn_size": 20, "--sink_size": 4,
                                         "window": "4 sink + 12 recent + 4 current latents"}


def test_a_causal_v1_has_no_record_for_fov():
    with pytest.raises(ModelConfigError, match="declares context=fov"):
        adapter("lingbot", causal=True).told_upstream(FOV)


def test_the_bidirectional_v1_supports_only_native_and_a_causal_build_every_knob(v1):
    assert v1.supported_contexts() == ("native",)
    assert adapter("lingbot", causal=True).supported_contexts() == ("native", "fullkv", "sliding")


def test_the_bidirectional_v1_passes_no_window_flag_whatever_the_policy(v1, case, tmp_path):
    assert v1.context_args(request(v1, case, tmp_path, forward(13), SLIDING)) == ([], None, [])


def test_a_causal_v1_passes_the_sliding_window(case, tmp_path):
    a = adapter("lingbot", causal=True)
    assert a.context_args(request(a, case, tmp_path, forward(13), SLIDING)) == (
        ["--local_attn_size", "20", "--sink_size", "4"], None, [])


# ==================================================================================================================
# LingBotAdapter.latent_count
# ==================================================================================================================


def test_13_frames_are_4_latents_one_chunk(v2):
    assert v2.latent_count(13) == 4


def test_a_frame_count_that_is_not_4k_plus_1_is_refused_naming_it(v2):
    with pytest.raises(ModelConfigError) as e:
        v2.latent_count(15)
    assert str(e.value) == "LingBot needs 4k+1 frames; got 15 (set model.num_frames)"


def test_a_latent_count_off_the_chunk_is_refused_with_upstreams_targets(v2):
    with pytest.raises(ModelConfigError) as e:
        v2.latent_count(9)  # 3 latents, truncated to 0 by a chunk of 4
    assert str(e.value) == ("LingBot truncates 3 latents to a multiple of chunk 4, which time-warps the trajectory "
                            "(non-integer targets linspace(0, 8, 0)); use N = 4k+1 with (k+1) % 4 == 0")


# ==================================================================================================================
# LingBotAdapter.write_native
# ==================================================================================================================


def test_poses_are_written_as_the_requested_float64_c2w(v2, case, tmp_path):
    req = request(v2, case, tmp_path, forward(13).astype(np.float32))
    ctl = written(v2, req)
    poses = np.load(req.controls_dir / "poses.npy")
    assert poses.dtype == np.float64 and np.array_equal(poses, forward(13).astype(np.float32))
    assert ctl.files == {"poses.npy": str(req.controls_dir / "poses.npy"),
                         "intrinsics.npy": str(req.controls_dir / "intrinsics.npy")}


def test_intrinsics_are_one_fx_fy_cx_cy_row_per_frame_in_480x832_pixels(case, tmp_path):
    a = adapter("lingbot_v2", height=240, width=208)  # 832 / 208 = 4 across, 480 / 240 = 2 down
    req = request(a, case, tmp_path, forward(13))
    K = np.array([[100.0, 0.0, 104.0], [0.0, 90.0, 120.0], [0.0, 0.0, 1.0]])
    written(a, req, K)
    ks = np.load(req.controls_dir / "intrinsics.npy")
    assert ks.shape == (13, 4)
    assert np.allclose(ks, [[400.0, 180.0, 416.0, 240.0]] * 13)


def test_the_meta_records_the_latents_and_upstreams_464x832_canvas_with_its_scaled_K(v2, case, tmp_path):
    ctl = written(v2, request(v2, case, tmp_path, forward(13)))
    canvas = ctl.meta["upstream_canvas"]
    assert ctl.meta["num_latents"] == 4 and ctl.meta["latent_anchor_rule"] == "linspace(0, N-1, n_lat) = 4i"
    assert (canvas["height"], canvas["width"], canvas["frame_seqlen"]) == (464, 832, 1508)
    # the vertical squash 480 -> 464 scales fy and cy by 464 / 480; x stays
    assert np.allclose(canvas["K_fx_fy_cx_cy"], [500.0, 464.0, 416.0, 232.0])
    assert canvas["rule"].startswith("lat = round(sqrt(max_area*h/w)//8//2*2)")


def test_a_frame_count_upstream_would_time_warp_writes_nothing(v2, case, tmp_path):
    req = request(v2, case, tmp_path, forward(9))
    with pytest.raises(ModelConfigError, match="time-warps"):
        written(v2, req)
    assert not (req.controls_dir / "poses.npy").exists()


# ==================================================================================================================
# LingBotAdapter.decode
# ==================================================================================================================


def test_a_straight_uniform_path_decodes_to_itself_with_its_scale_fitted(v2, case, tmp_path):
    req = request(v2, case, tmp_path, forward(13))
    written(v2, req)
    assert np.allclose(v2.decode(req.controls_dir, req), forward(13), atol=1e-12)


def test_the_scale_is_fitted_to_the_request_not_to_what_is_on_disk(v2, case, tmp_path):
    req = request(v2, case, tmp_path, forward(13, 0.1))
    written(v2, req)  # the written path is max-normalised inside upstream; its scale does not reach the model
    half = request(v2, case, tmp_path, forward(13, 0.05))
    assert np.allclose(v2.decode(req.controls_dir, half), forward(13, 0.05), atol=1e-12)


def test_a_single_unit_step_is_still_scaled_to_the_request(v2, case, tmp_path):
    c2w = np.tile(np.eye(4), (13, 1, 1))
    c2w[8:, 2, 3] = 0.125 * np.arange(5)  # held to frame 8, then 0.5 forward by frame 12: max-norm gives 1 unit
    req = request(v2, case, tmp_path, c2w)
    written(v2, req)
    out = v2.decode(req.controls_dir, req)
    assert np.allclose(out, c2w, atol=1e-12) and out[12, 2, 3] == pytest.approx(0.5)


def test_a_camera_that_stands_still_decodes_to_the_identity_without_a_scale_to_fit(v2, case, tmp_path):
    req = request(v2, case, tmp_path, np.tile(np.eye(4), (13, 1, 1)))
    written(v2, req)
    out = v2.decode(req.controls_dir, req)  # no translation anywhere: nothing to fit, no 0 / 0
    assert np.all(np.isfinite(out)) and np.array_equal(out, np.tile(np.eye(4), (13, 1, 1)))


# ==================================================================================================================
# LingBotAdapter.launch (v1, a causal v1, v2)
# ==================================================================================================================


def _head(req: ItemRequest, frames: int = 13) -> list[str]:
    d = req.controls_dir
    return ["--task", "i2v-A14B", "--size", "480*832", "--ckpt_dir", "<model.checkpoint>", "--image",
            str(d / "image.png"), "--action_path", str(d), "--frame_num", str(frames), "--base_seed", str(SEED),
            "--prompt", "a room", "--save_file", str(req.item_dir / "upstream_out" / "video.mp4")]


def test_v1_launches_the_bidirectional_generate_py_with_70_steps_on_8_ranks(v1, case, tmp_path):
    req = request(v1, case, tmp_path / "item", forward(13))
    spec = v1.launch(req, written(v1, req))
    assert spec.script == "generate.py" and spec.output == str(tmp_path / "item" / "upstream_out" / "video.mp4")
    assert spec.args == _head(req) + ["--sample_steps", "70", "--dit_fsdp", "--t5_fsdp", "--ulysses_size", "8"]
    assert spec.wrapper is None and spec.wrapper_args == []


def test_v2_launches_causal_fast_chunks_redirects_save_dir_and_passes_the_native_window(v2, case, tmp_path):
    req = request(v2, case, tmp_path / "item", forward(13))
    spec = v2.launch(req, written(v2, req))
    out_dir = str(tmp_path / "item" / "upstream_out")
    assert spec.args == _head(req) + ["--chunk_size", "4", "--infer_mode", "causal_fast", "--dit_fsdp", "--t5_fsdp",
                                      "--ulysses_size", "8", "--save_dir", out_dir,
                                      "--local_attn_size", "18", "--sink_size", "6"]
    assert spec.wrapper is None


def test_a_causal_build_on_two_gpus_passes_the_chunk_and_ulysses_2_without_an_infer_mode(case, tmp_path):
    a = adapter("lingbot", causal=True, gpus_per_job=2)
    req = request(a, case, tmp_path, forward(13), FULLKV)
    assert a.launch(req, written(a, req)).args == _head(req) + ["--chunk_size", "4", "--dit_fsdp", "--t5_fsdp",
                                                                 "--ulysses_size", "2"]


def test_one_gpu_runs_without_sequence_parallel_flags(case, tmp_path):
    a = adapter("lingbot", gpus_per_job=1)
    req = request(a, case, tmp_path, forward(13))
    assert a.launch(req, written(a, req)).args == _head(req) + ["--sample_steps", "70"]


# ==================================================================================================================
# LingBotV2Adapter: the FoV shim
# ==================================================================================================================


def test_v2_fov_runs_the_gather_shim_with_the_selection_file_and_1508_tokens_per_latent(v2, case, tmp_path):
    req = request(v2, case, tmp_path, forward(13), FOV)
    sel = req.controls_dir / "context_selection.json"
    spec = v2.launch(req, written(v2, req))
    assert spec.args == _head(req) + ["--chunk_size", "4", "--infer_mode", "causal_fast", "--dit_fsdp", "--t5_fsdp",
                                      "--ulysses_size", "8", "--save_dir", str(tmp_path / "upstream_out")]
    assert spec.wrapper == str(Path(inspect.getfile(LingBotV2Adapter)).resolve().parent / "fov_runner.py")
    assert spec.wrapper_args == ["--selection", str(sel), "--frame-seqlen", "1508"]
    doc = json.loads(sel.read_text())
    assert doc["policy"]["name"] == "fov" and doc["num_latents"] == 4 and doc["chunk"] == 4


def test_v2_other_policies_write_no_selection_and_use_upstreams_own_flags(v2, case, tmp_path):
    req = request(v2, case, tmp_path, forward(13), SLIDING)
    assert v2.context_args(req) == (["--local_attn_size", "20", "--sink_size", "4"], None, [])
    assert not (req.controls_dir / "context_selection.json").exists()


def test_v2_fov_is_told_the_shim_and_the_harness_budget(v2):
    assert v2.told_upstream(FOV) == {"shim": "fov_runner.py gathers controls/context_selection.json per chunk",
                                     "unit": "latent", "sink": 4, "recent": 4, "retrieved": "2 x 4", "current": 4}


def test_v2_supports_every_policy_and_refuses_none(v2):
    assert set(v2.supported_contexts()) == {"native", "fullkv", "sliding", "fov"}
    assert LingBotV2Adapter.unsupported_reasons == {}


# ==================================================================================================================
# The canvas image is never decoded for these adapters
# ==================================================================================================================


@pytest.mark.parametrize("model, frames", [("lingbot", 13), ("hy_worldplay", 13), ("evoke", 33)])
def test_compile_hands_write_native_no_canvas_array(model, frames, case, tmp_path, monkeypatch):
    a = adapter(model)
    seen = []
    original = a.write_native

    def spy(req, image, K):
        seen.append(image)
        return original(req, image, K)

    monkeypatch.setattr(a, "write_native", spy)
    a.compile(request(a, case, tmp_path, forward(frames), K=a.canvas_K(case)))
    assert seen == [None]


# ==================================================================================================================
# HY-WorldPlay
# ==================================================================================================================


def test_hy_refuses_a_frame_count_that_is_not_4k_plus_1(hy, case, tmp_path):
    with pytest.raises(ModelConfigError) as e:
        written(hy, request(hy, case, tmp_path, forward(14)))
    assert str(e.value) == "HY-WorldPlay needs (N-1) % 4 == 0; got N=14"


def test_hy_refuses_a_latent_count_off_the_ar_chunk(hy, case, tmp_path):
    with pytest.raises(ModelConfigError) as e:
        written(hy, request(hy, case, tmp_path, forward(9)))
    assert str(e.value) == "HY-WorldPlay AR needs the latent count (3) to be a multiple of 4"


def test_hy_pose_json_has_one_entry_per_latent_at_frame_4i_in_model_units_with_the_fixed_K(case, tmp_path):
    y = group_yaml("model", "hy_worldplay")
    a = adapter("hy_worldplay", translation_scale={**y["translation_scale"], "per_scene_unit": 2.5})
    req = request(a, case, tmp_path, forward(13))  # 0.4 scene units per latent = 1.0 model units
    ctl = written(a, req)
    assert ctl.files == {"pose.json": str(req.controls_dir / "pose.json")}
    doc = json.loads((req.controls_dir / "pose.json").read_text())
    assert list(doc) == ["0", "1", "2", "3"]
    for i in range(4):
        ext = np.eye(4)
        ext[2, 3] = 1.0 * i
        assert np.allclose(doc[str(i)]["extrinsic"], ext) and doc[str(i)]["K"] == HY_DEFAULT_K.tolist()
    assert not (req.controls_dir / "context_selection.json").exists()  # native: upstream's own retrieval


def test_hy_meta_records_latents_forward_action_labels_and_the_normalised_K(hy, case, tmp_path):
    meta = written(hy, request(hy, case, tmp_path, forward(13))).meta
    assert meta["num_latents"] == 4 and meta["latent_anchor_rule"] == "latent i -> frame 4i"
    assert meta["action_labels"] == [0, 9, 9, 9]  # latent 0 has no motion; then forward every latent
    fx = 969.6969696969696
    assert np.allclose(meta["K_normalised"], [[fx / 1920, 0, 0.5], [0, fx / 1080, 0.5], [0, 0, 1]])


def test_hy_decode_divides_the_model_units_back_to_scene_units(case, tmp_path):
    y = group_yaml("model", "hy_worldplay")
    a = adapter("hy_worldplay", translation_scale={**y["translation_scale"], "per_scene_unit": 2.5})
    req = request(a, case, tmp_path, forward(13))
    written(a, req)
    assert np.allclose(a.decode(req.controls_dir, req), forward(13), atol=1e-12)


def test_hy_writes_the_harness_selection_for_every_policy_but_native(hy, case, tmp_path):
    req = request(hy, case, tmp_path, forward(13), FULLKV)
    written(hy, req)
    doc = json.loads((req.controls_dir / "context_selection.json").read_text())
    assert doc["policy"]["name"] == "fullkv" and doc["num_latents"] == 4 and len(doc["chunks"]) == 1


def _hy_args(req: ItemRequest, model_path: str) -> list[str]:
    d = req.controls_dir
    return ["--pose", str(d / "pose.json"), "--video_length", "13", "--seed", str(SEED), "--resolution", "480p",
            "--width", "832", "--height", "480", "--model_type", "ar", "--few_step", "true",
            "--num_inference_steps", "4", "--rewrite", "false", "--sr", "false",
            "--transformer_resident_ar_rollout", "true", "--model_path", model_path, "--action_ckpt",
            "<model.checkpoint>", "--image_path", str(d / "image.png"), "--prompt", "a room",
            "--output_path", str(req.item_dir / "upstream_out")]


def test_hy_native_launch_runs_generate_py_through_the_seeding_shim(hy, case, tmp_path):
    req = request(hy, case, tmp_path, forward(13))
    spec = hy.launch(req, written(hy, req))
    assert spec.script == "hyvideo/generate.py" and spec.args == _hy_args(req, "<model.model_path>")
    assert spec.out_dir == str(tmp_path / "upstream_out") and spec.output == str(tmp_path / "upstream_out" / "gen.mp4")
    assert spec.wrapper == str(Path(inspect.getfile(HYWorldPlayAdapter)).resolve().parent / "runner.py")
    assert spec.wrapper_args == ["--seed", str(SEED)]
    assert HYWorldPlayAdapter.always_shimmed is True  # the readiness probe imports as the shimmed launch does


def test_hy_other_policies_hand_the_shim_the_selection_and_the_model_path_is_passed(case, tmp_path):
    a = adapter("hy_worldplay", model_path="/w/hunyuan")
    req = request(a, case, tmp_path, forward(13), FOV)
    spec = a.launch(req, written(a, req))
    assert spec.args == _hy_args(req, "/w/hunyuan")
    assert spec.wrapper_args == ["--seed", str(SEED), "--selection", str(req.controls_dir / "context_selection.json")]
    assert a.checkpoint_paths() == {"checkpoint": None, "upstream_dir": None, "model_path": "/w/hunyuan"}


def test_hy_native_is_told_upstreams_own_retrieval_and_the_others_the_shim_budget(hy):
    assert hy.told_upstream(NATIVE) == {"passed": "nothing: upstream's own memory at its defaults",
                                        "window": "upstream's own FoV retrieval (select_aligned_memory_frames)"}
    assert hy.told_upstream(SLIDING) == {
        "shim": "runner.py replaces select_aligned_memory_frames with controls/context_selection.json",
        "unit": "latent", "sink": 4, "recent": 12, "current": 4}


# ==================================================================================================================
# Evoke
# ==================================================================================================================


def test_evoke_makes_36_frames_per_chunk_less_3(evoke):
    assert evoke.config.chunks(33) == 1 and evoke.config.chunks(69) == 2
    with pytest.raises(ModelConfigError) as e:
        evoke.config.chunks(34)
    assert str(e.value) == "Evoke makes 36*chunks - 3 frames; 34 is not one (model.num_frames)"


def test_evoke_writes_the_pose_npz_with_absolute_c2w_and_K(evoke, case, tmp_path):
    req = request(evoke, case, tmp_path, forward(33).astype(np.float32))
    K = np.array([[300, 0, 320], [0, 310, 192], [0, 0, 1]])
    ctl = written(evoke, req, K)
    with np.load(req.controls_dir / "pose.npz") as z:
        assert sorted(z.files) == ["cam_c2w", "intrinsics"]
        assert z["cam_c2w"].dtype == np.float64 and np.array_equal(z["cam_c2w"], forward(33).astype(np.float32))
        assert z["intrinsics"].dtype == np.float64 and np.array_equal(z["intrinsics"], K)
    assert ctl.files == {"pose.npz": str(req.controls_dir / "pose.npz"),
                         "cases.jsonl": str(req.controls_dir / "cases.jsonl")}
    assert np.array_equal(evoke.decode(req.controls_dir, req), forward(33).astype(np.float32))


def test_evoke_writes_one_jsonl_row_naming_the_case_and_path(evoke, case, tmp_path):
    req = request(evoke, case, tmp_path, forward(33))
    ctl = written(evoke, req)
    d = req.controls_dir
    text = (d / "cases.jsonl").read_text()
    assert text.endswith("}\n") and text.count("\n") == 1
    assert json.loads(text) == {"name": "c1_fwd", "image_path": str(d / "image.png"), "pose_path": str(d / "pose.npz"),
                                "prompt_path": str(d / "prompt.txt"), "pose_fps": 24, "pose_source_resolution": [384, 640],
                                "seed": SEED}
    assert ctl.meta == {"chunks": 1, "launcher_env": {
        "CAP_MAX_DEG": "0", "CAP_MAX_TRANS": "0", "POSE_SMOOTH_WIN": "0", "POSE_EXTEND_MODE": "clamp",
        "JOYSTICK_HUD": "off", "DUMP_GEO": "0", "SAVE_SEGMENTS": "0"}, "trailing_static_poses": 21}


def test_evoke_launches_its_shell_driver_with_placeholders_for_unset_weights(evoke, case, tmp_path):
    req = request(evoke, case, tmp_path, forward(33))
    spec = evoke.launch(req, written(evoke, req))
    out = tmp_path / "upstream_out"
    assert (spec.script, spec.args, spec.interpreter) == ("scripts/inference/infer_post_distill.sh", [], ["bash"])
    assert spec.out_dir == str(out) and spec.output == str(out / "c1_fwd" / "geo_pred.mp4")
    assert spec.env == {"MODE": "i2v", "NUM_CHUNKS": "1", "SEED": str(SEED),
                        "JSONL": str(req.controls_dir / "cases.jsonl"), "MAX_CASES": "1", "OUT_ROOT": str(out),
                        "TRANSFORMER_PATH": "<model.checkpoint>", "BASE_CKPT": "<model.base_checkpoint>",
                        "HEIGHT": "384", "WIDTH": "640", "FPS": "24", "LOCAL_GPUS": "1", "GPU_OFFSET": "0",
                        "EVOKE_WARP_SEED": str(SEED), "VIGEO_WEIGHTS": "<model.vigeo_weights>",
                        "CAP_MAX_DEG": "0", "CAP_MAX_TRANS": "0", "POSE_SMOOTH_WIN": "0", "POSE_EXTEND_MODE": "clamp",
                        "JOYSTICK_HUD": "off", "DUMP_GEO": "0", "SAVE_SEGMENTS": "0"}


def test_evoke_gets_the_set_weights_the_first_device_and_the_pythons_folder(case, tmp_path):
    a = adapter("evoke", checkpoint="/w/stage3", base_checkpoint="/w/base", vigeo_weights="/w/vigeo",
                devices="3,4", python="/opt/evoke/bin/python")
    req = request(a, case, tmp_path, forward(33))
    env = a.launch(req, written(a, req)).env
    assert (env["TRANSFORMER_PATH"], env["BASE_CKPT"], env["VIGEO_WEIGHTS"]) == ("/w/stage3", "/w/base", "/w/vigeo")
    assert env["GPU_OFFSET"] == "3" and env["EVOKE_PYTHON_BIN"] == "/opt/evoke/bin"
    assert a.checkpoint_paths() == {"checkpoint": "/w/stage3", "upstream_dir": None, "base_checkpoint": "/w/base",
                                    "vigeo_weights": "/w/vigeo"}


def test_evoke_is_told_it_has_no_kv_cache(evoke):
    assert evoke.told_upstream(NATIVE) == {"passed": "nothing: upstream's own memory at its defaults",
                                           "window": "no KV cache: history latents + a warp bank"}
    assert EvokeAdapter.contexts == ("native",)
