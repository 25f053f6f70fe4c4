"""The rules of the Matrix-Game 3 and 3.5, DreamX-World and YUME adapters, one at a time and in this process: the
frame counts each upstream accepts, the input files as upstream reads them (``camera.npz`` and the caption JSON,
the keyboard / mouse arrays, CameraCtrl rows and the items JSON, the caption lines and the JPEG), how each file
decodes back to a path, and the launch command (script, arguments, the shim's options, environment, output).

Each adapter is built from the model's own config (``conf/model/<name>.yaml``) with a small canvas (32 x 48) and
the one field a rule reads changed; paths are a few hand-made poses whose files can be read off by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from adapters.base import ItemRequest, ModelConfigError, build_adapter
from adapters.dreamx.adapter import DreamXAdapter, DreamXConfig, camera_rows, cameras_text, parse_camera_rows
from adapters.matrix_game3.adapter import MatrixGame3Adapter, MG3Config
from adapters.matrix_game3.controls import MG3_CAVEATS, MG3Params, mg3_decode, mg3_encode, mg3_extrinsics
from adapters.matrix_game35.adapter import MatrixGame35Adapter, MG35Config, caption_starts
from adapters.yume.adapter import YumeAdapter, YumeConfig
from adapters.yume.controls import YumeParams, yume_captions, yume_decode, yume_parse_caption
from harness.cases import Case
from harness.config_groups import group_yaml
from harness.context import ContextPolicy
from tests.support.adapter_fixtures import two_tone_case
from trajectories.conventions import rot_y, se3
from trajectories.path import CameraPath

H, W = 32, 48
NATIVE = ContextPolicy.from_dict({"name": "native"})
FULLKV = ContextPolicy.from_dict({"name": "fullkv", "chunk": 4})
#: intrinsics with four different entries, so a swapped index shows
K = np.array([[40.0, 0.0, 23.5], [0.0, 41.0, 15.5], [0.0, 0.0, 1.0]])
ADAPTERS = Path(__file__).resolve().parents[2] / "adapters"


_BUILT: dict[str, object] = {}


def adapter(model: str, **over):
    """The model's adapter from its own config, on a 32 x 48 canvas, with ``over`` replacing fields (built once per
    module and settings: the rules only read it)."""
    key = json.dumps([model, over], sort_keys=True)
    if key not in _BUILT:
        _BUILT[key] = build_adapter({**group_yaml("model", model), "height": H, "width": W, **over})
    return _BUILT[key]


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Case:
    return two_tone_case(tmp_path_factory.mktemp("case"), "a red kettle")


def still(frames: int) -> np.ndarray:
    return np.tile(np.eye(4), (frames, 1, 1))


def request(case: Case, item_dir: Path, c2w: np.ndarray, context=NATIVE, seed: int = 7, params=None) -> ItemRequest:
    path = CameraPath(name="p", c2w=c2w, K=K, fps=16.0, height=H, width=W, phases={"V": (0, len(c2w))},
                      params=dict(params or {}))
    item_dir.mkdir(parents=True, exist_ok=True)
    (item_dir / "controls").mkdir(exist_ok=True)
    return ItemRequest(case=case, path=path, context=context, seed=seed, item_dir=item_dir)


def shim(module: str) -> str:
    return str(ADAPTERS / module / "runner.py")


# -- every adapter: the shim and the canvas -------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [MatrixGame35Adapter, MatrixGame3Adapter, DreamXAdapter, YumeAdapter])
def test_every_launch_runs_through_the_shim_and_write_native_never_reads_the_canvas_array(cls):
    assert cls.always_shimmed is True
    assert cls.uses_canvas_image is False


# -- Matrix-Game 3.5: config ----------------------------------------------------------------------------------------
def test_mg35_defaults_are_the_released_six_block_config_and_pipeline_seed_42():
    c = MG35Config(name="m", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=505)
    assert (c.num_blocks, c.pipeline_seed, c.config_file) == (6, 42, "configs/infer_distilled_6blocks.yaml")


def test_mg35_the_tokenizer_is_the_given_folder_first():
    c = MG35Config(name="m", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=505, wan_dir="/w",
                   tokenizer_dir="/tok")
    assert c.tokenizer() == "/tok"


def test_mg35_the_tokenizer_defaults_to_umt5_inside_the_wan_folder():
    c = MG35Config(name="m", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=505, wan_dir="/w")
    assert c.tokenizer() == "/w/google/umt5-xxl"


def test_mg35_without_wan_folder_or_tokenizer_there_is_no_tokenizer():
    c = MG35Config(name="m", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=505)
    assert c.tokenizer() is None


# -- Matrix-Game 3.5: caption starts and block counts -----------------------------------------------------------------
@pytest.mark.parametrize("blocks, starts", [(1, [0]), (2, [0, 85]), (3, [0, 85, 169]), (7, [0, 85, 169, 253, 337, 421, 505])])
def test_mg35_captions_start_at_0_then_at_1_plus_84k(blocks, starts):
    assert caption_starts(blocks) == starts


@pytest.mark.parametrize("frames, blocks", [(85, 1), (169, 2), (505, 6), (589, 7)])
def test_mg35_one_plus_84_per_block_frames_give_that_many_blocks(frames, blocks):
    assert adapter("matrix_game35").blocks_for(frames) == blocks


@pytest.mark.parametrize("frames", [1, 84, 86, 504, 506])
def test_mg35_a_frame_count_off_the_84_grid_or_without_a_block_is_refused(frames):
    msg = (r"^Matrix-Game 3\.5 makes 1 \+ 84 \* blocks frames \(505 with the released 6 blocks\); "
           rf"{frames} is not one \(model\.num_frames / model\.frames_per_trajectory\)$")
    with pytest.raises(ModelConfigError, match=msg):
        adapter("matrix_game35").blocks_for(frames)


# -- Matrix-Game 3.5: write_native ----------------------------------------------------------------------------------
def mg35_path(frames: int = 85) -> np.ndarray:
    """Frame i turned by i mrad about y and moved to (0.01 i, -0.02 i, 0.03 i)."""
    return np.stack([se3(rot_y(1e-3 * i), [0.01 * i, -0.02 * i, 0.03 * i]) for i in range(frames)])


@pytest.fixture(scope="module")
def mg35_written(case, tmp_path_factory):
    a = adapter("matrix_game35", translation_scale={"units": "metres", "per_scene_unit": 2.0})
    c2w = mg35_path()
    req = request(case, tmp_path_factory.mktemp("mg35"), c2w, seed=11)
    return a, req, c2w, a.write_native(req, None, K)


def test_mg35_camera_npz_holds_the_c2w_with_translation_times_metres_per_scene_unit(mg35_written):
    _, req, c2w, _ = mg35_written
    with np.load(req.controls_dir / "camera.npz") as z:
        ext = z["extrinsics_c2w"]
        assert sorted(z.files) == ["extrinsics_c2w", "intrinsics"]
    assert ext.shape == (85, 4, 4)
    assert np.array_equal(ext[:, :3, :3], c2w[:, :3, :3])
    assert np.allclose(ext[:, :3, 3], 2.0 * c2w[:, :3, 3])
    assert np.array_equal(ext[:, 3], np.tile([0.0, 0.0, 0.0, 1.0], (85, 1)))
    assert ext[10, 0, 3] == pytest.approx(0.2) and ext[10, 2, 3] == pytest.approx(0.6)


def test_mg35_camera_npz_intrinsics_are_fx_fy_cx_cy_on_every_frame(mg35_written):
    _, req, _, _ = mg35_written
    with np.load(req.controls_dir / "camera.npz") as z:
        kv = z["intrinsics"]
    assert kv.shape == (85, 4)
    assert np.array_equal(kv, np.tile([40.0, 41.0, 23.5, 15.5], (85, 1)))


def test_mg35_caption_json_gives_the_prompt_as_the_dynamic_text_of_each_block_start(case, tmp_path):
    a = adapter("matrix_game35")
    req = request(case, tmp_path, still(253))
    a.write_native(req, None, K)
    text = {"start": "", "dynamic": "a red kettle"}
    assert json.loads((req.controls_dir / "caption.json").read_text()) == {
        "detailed": {"0": text, "85": text, "169": text}}


def test_mg35_write_native_names_both_files_and_records_blocks_and_both_seeds(mg35_written):
    _, req, _, controls = mg35_written
    d = req.controls_dir
    assert controls.files == {"camera.npz": str(d / "camera.npz"), "caption.json": str(d / "caption.json")}
    assert controls.meta == {"blocks": 1, "seeds": {"validation_seed": 11, "pipeline_seed": 42}}


def test_mg35_write_native_refuses_a_path_off_the_84_grid(case, tmp_path):
    with pytest.raises(ModelConfigError, match="86 is not one"):
        adapter("matrix_game35").write_native(request(case, tmp_path, still(86)), None, K)
    assert not (tmp_path / "controls" / "camera.npz").exists()


# -- Matrix-Game 3.5: decode ----------------------------------------------------------------------------------------
def test_mg35_decode_reads_camera_npz_and_divides_translation_by_metres_per_scene_unit(mg35_written):
    a, req, c2w, _ = mg35_written
    back = a.decode(req.controls_dir, req)
    assert back.dtype == np.float64
    assert np.allclose(back, c2w)


def test_mg35_decode_of_a_hand_written_npz_halves_only_the_translation(case, tmp_path):
    a = adapter("matrix_game35", translation_scale={"units": "metres", "per_scene_unit": 2.0})
    ext = np.tile(np.eye(4), (2, 1, 1))
    ext[1, :3, 3] = [2.0, 4.0, 6.0]
    np.savez(tmp_path / "camera.npz", extrinsics_c2w=ext.astype(np.float32), intrinsics=np.zeros((2, 4)))
    want = np.tile(np.eye(4), (2, 1, 1))
    want[1, :3, 3] = [1.0, 2.0, 3.0]
    assert np.array_equal(a.decode(tmp_path, request(case, tmp_path / "item", still(2))), want)


# -- Matrix-Game 3.5: launch ----------------------------------------------------------------------------------------
def test_mg35_launch_without_folders_names_each_setting_to_fill_in(case, tmp_path):
    a = adapter("matrix_game35", checkpoint=None)
    req = request(case, tmp_path, still(505), seed=3)
    spec = a.launch(req, None)
    d, out = req.controls_dir, tmp_path / "upstream_out" / "video.mp4"
    assert spec.script == "infer_distilled.py"
    assert spec.args == ["--config", str(d / "infer_config.yaml"), "--checkpoint", "<model.checkpoint>", "--image",
                         str(d / "image.png"), "--camera", str(d / "camera.npz"), "--caption", str(d / "caption.json"),
                         "--output", str(out), "--wan-dir", "<model.wan_dir>", "--tokenizer-dir",
                         "<model.tokenizer_dir>", "--da3-dir", "<model.da3_dir>"]
    assert spec.output == str(out)
    assert spec.wrapper == shim("matrix_game35")
    assert spec.wrapper_args == ["--seed", "3", "--config-in", "configs/infer_distilled_6blocks.yaml",
                                 "--config-out", str(d / "infer_config.yaml")]
    assert spec.env == {"DIFFSYNTH_SKIP_DOWNLOAD": "true"}


def test_mg35_launch_passes_the_given_folders_and_the_tokenizer_inside_wan(case, tmp_path):
    a = adapter("matrix_game35", checkpoint="/ck.safetensors", wan_dir="/wan", da3_dir="/da3")
    spec = a.launch(request(case, tmp_path, still(505)), None)
    assert spec.args[3] == "/ck.safetensors"
    assert spec.args[-6:] == ["--wan-dir", "/wan", "--tokenizer-dir", "/wan/google/umt5-xxl", "--da3-dir", "/da3"]


def test_mg35_launch_of_a_longer_path_has_the_shim_set_the_block_count(case, tmp_path):
    spec = adapter("matrix_game35").launch(request(case, tmp_path, still(589)), None)
    assert spec.wrapper_args[-2:] == ["--num-blocks", "7"]
    assert len(spec.wrapper_args) == 8


def test_mg35_launch_of_fewer_blocks_than_the_config_also_sets_the_block_count(case, tmp_path):
    spec = adapter("matrix_game35").launch(request(case, tmp_path, still(85)), None)
    assert spec.wrapper_args[-2:] == ["--num-blocks", "1"]


def test_mg35_checkpoint_paths_add_wan_tokenizer_and_depth_folders(case):
    a = adapter("matrix_game35", checkpoint="/ck", upstream_dir="/up", wan_dir="/wan", da3_dir="/da3")
    assert a.checkpoint_paths() == {"checkpoint": "/ck", "upstream_dir": "/up", "wan_dir": "/wan",
                                    "tokenizer_dir": "/wan/google/umt5-xxl", "da3_dir": "/da3"}


# -- Matrix-Game 3: iterations ----------------------------------------------------------------------------------------
def mg3_config(**over) -> MG3Config:
    return MG3Config(**{"name": "m", "adapter": "x", "seed": 1, "height": H, "width": W, "fps": 17, "num_frames": 497,
                        **over})


@pytest.mark.parametrize("frames, iterations", [(57, 1), (97, 2), (497, 12)])
def test_mg3_57_plus_40_per_further_iteration_frames_give_the_iteration_count(frames, iterations):
    assert mg3_config().iterations(frames) == iterations


@pytest.mark.parametrize("frames", [17, 56, 58, 96, 98])
def test_mg3_a_frame_count_off_the_iteration_grid_is_refused(frames):
    with pytest.raises(ModelConfigError, match=rf"^Matrix-Game 3 makes 57 \+ 40\*\(iterations-1\) frames; {frames} is "
                                               r"not one \(model\.num_frames\)$"):
        mg3_config().iterations(frames)


def test_mg3_params_carry_metres_per_scene_unit_and_the_pitch_choice():
    p = mg3_config(translation_scale={"units": "metres", "per_scene_unit": 7.0}, mouse_pitch="label").params()
    assert p == MG3Params(metres_per_unit=7.0, mouse_pitch="label")


def test_mg3_control_clock_is_row_0_then_12_row_blocks_and_the_last_pose():
    clock = adapter("matrix_game3").control_clock(57)
    assert clock.edges == (0, 1, 13, 25, 37, 49, 56)
    assert clock.rule == "Matrix-Game 3 holds each action for 12 rows after row 0 (utils/conditions.py:21-32)"


# -- Matrix-Game 3: write_native ------------------------------------------------------------------------------------
def mg3_walk() -> np.ndarray:
    """57 poses (one iteration): a W step (12.35 cm) per frame over poses 0..13, still over 13..37, W again from 37
    to the end; with 1 m per scene unit upstream's key step is exact."""
    z = np.zeros(57)
    for t in range(1, 57):
        z[t] = z[t - 1] + (0.1235 if t <= 13 or t >= 38 else 0.0)
    c2w = still(57)
    c2w[:, 2, 3] = z
    return c2w


@pytest.fixture(scope="module")
def mg3_written(case, tmp_path_factory):
    a = adapter("matrix_game3", translation_scale={"units": "metres", "per_scene_unit": 1.0})
    req = request(case, tmp_path_factory.mktemp("mg3"), mg3_walk(), params={"upstream_clock": "laid"})
    return a, req, a.write_native(req, None, K)


def test_mg3_the_walk_presses_w_on_rows_0_to_12_and_37_to_56(mg3_written):
    _, req, _ = mg3_written
    kb = np.load(req.controls_dir / "keyboard_condition.npy")
    assert kb.shape == (57, 6)
    want = np.zeros((57, 6), np.float32)
    want[0:13, 0] = want[37:57, 0] = 1
    assert np.array_equal(kb, want)


def test_mg3_write_native_saves_keyboard_mouse_and_upstreams_integrated_extrinsics(mg3_written):
    a, req, controls = mg3_written
    d = req.controls_dir
    kb, ms = mg3_encode(req.path.c2w, a.config.params())
    assert np.array_equal(np.load(d / "keyboard_condition.npy"), kb)
    assert np.array_equal(np.load(d / "mouse_condition.npy"), ms)
    assert np.array_equal(np.load(d / "extrinsics.npy"), mg3_extrinsics(kb, ms, a.config.params()))
    assert controls.files == {n: str(d / n) for n in ("keyboard_condition.npy", "mouse_condition.npy",
                                                      "extrinsics.npy")}


def test_mg3_key_statistics_count_pressed_rows_but_the_last_and_average_the_runs(mg3_written):
    """Rows 0..55 (the last row moves past the path): 13 + 19 = 32 of 56 pressed, in runs of 13 and 19 rows."""
    _, _, controls = mg3_written
    assert controls.meta["keys_pressed_fraction"] == pytest.approx(32 / 56)
    assert controls.meta["key_run_mean_frames"] == pytest.approx(16.0)


def test_mg3_write_native_records_iterations_pitch_rule_hold_caveats_and_the_clock(mg3_written):
    _, _, controls = mg3_written
    m = controls.meta
    assert (m["iterations"], m["mouse_pitch"], m["action_rule"], m["hold_frames"], m["upstream_clock"]) == (
        1, "code", "action i moves frame i to i+1", 12, "laid")
    assert m["caveats"] == ["translation quantised to 12.35 cm key steps, horizontal only",
                            "mouse pitch sign is a recorded choice (model.mouse_pitch)", *MG3_CAVEATS]


def test_mg3_a_still_path_presses_nothing_and_has_no_runs(case, tmp_path):
    controls = adapter("matrix_game3").write_native(request(case, tmp_path, still(57)), None, K)
    assert controls.meta["keys_pressed_fraction"] == 0.0
    assert controls.meta["key_run_mean_frames"] == 0.0
    assert controls.meta["upstream_clock"] is None


def test_mg3_write_native_refuses_a_frame_count_off_the_grid(case, tmp_path):
    with pytest.raises(ModelConfigError, match="58 is not one"):
        adapter("matrix_game3").write_native(request(case, tmp_path, still(58)), None, K)


def test_mg3_decode_integrates_the_saved_keyboard_and_mouse(mg3_written):
    a, req, _ = mg3_written
    d = req.controls_dir
    back = a.decode(d, req)
    assert np.array_equal(back, mg3_decode(np.load(d / "keyboard_condition.npy"), np.load(d / "mouse_condition.npy"),
                                           a.config.params()))
    assert np.allclose(back, mg3_walk(), atol=1e-5)


# -- Matrix-Game 3: launch ------------------------------------------------------------------------------------------
def test_mg3_launch_runs_generate_on_eight_ulysses_ranks_with_the_shim_writing_at_17_fps(case, tmp_path):
    a = adapter("matrix_game3", checkpoint="/mg3")
    req = request(case, tmp_path, still(497), seed=5)
    spec = a.launch(req, None)
    d, out_dir = req.controls_dir, tmp_path / "upstream_out"
    assert spec.script == "generate.py"
    assert spec.args == ["--size", "704*1280", "--ckpt_dir", "/mg3", "--num_iterations", "12",
                         "--num_inference_steps", "3", "--seed", "5", "--image", str(d / "image.png"), "--prompt",
                         "a red kettle", "--output_dir", str(out_dir), "--save_name", "video", "--use_int8",
                         "--fa_version", "3", "--vae_type", "mg_lightvae", "--lightvae_pruning_rate", "0.5",
                         "--ulysses_size", "8"]
    assert (spec.out_dir, spec.output) == (str(out_dir), str(out_dir / "video.mp4"))
    assert spec.wrapper == shim("matrix_game3")
    assert spec.wrapper_args == ["--seed", "5", "--keyboard", str(d / "keyboard_condition.npy"), "--mouse",
                                 str(d / "mouse_condition.npy"), "--fps", "17"]
    from adapters.matrix_game3.runner import REPLACES

    assert spec.replaces == REPLACES


@pytest.mark.parametrize("gpus, ulysses", [(1, None), (2, "2")])
def test_mg3_ulysses_size_is_passed_only_for_more_than_one_rank(case, tmp_path, gpus, ulysses):
    args = adapter("matrix_game3", gpus_per_job=gpus).launch(request(case, tmp_path, still(57)), None).args
    assert (args[args.index("--ulysses_size") + 1] if "--ulysses_size" in args else None) == ulysses


ASYNC = ("--use_async_vae",)


@pytest.mark.parametrize("over", [{"gpus_per_job": 8}, {"gpus_per_job": 2}])
def test_mg3_the_async_vae_on_several_gpus_needs_a_vae_worker_gpu(case, tmp_path, over):
    a = adapter("matrix_game3", extra_args=ASYNC, **over)
    with pytest.raises(ModelConfigError, match=r"^model\.extra_args has --use_async_vae: upstream puts the VAE worker "
                                               r"on GPU index world_size, so set model\.vae_worker_gpus: 1"):
        a.launch(request(case, tmp_path, still(57)), None)


@pytest.mark.parametrize("over, ulysses", [({"gpus_per_job": 8, "vae_worker_gpus": 1}, "7"),
                                           ({"gpus_per_job": 1}, None),
                                           ({"gpus_per_job": 8, "extra_args": ()}, "8")])
def test_mg3_the_async_vae_is_accepted_with_a_worker_gpu_or_one_gpu_and_nothing_is_checked_without_it(
        case, tmp_path, over, ulysses):
    a = adapter("matrix_game3", **{"extra_args": ASYNC, **over})
    args = a.launch(request(case, tmp_path, still(57)), None).args
    assert (args[args.index("--ulysses_size") + 1] if "--ulysses_size" in args else None) == ulysses


# -- DreamX: config and latent counts ---------------------------------------------------------------------------------
def test_dreamx_defaults_are_three_latents_per_chunk_and_full_colour_correction():
    c = DreamXConfig(name="d", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=501)
    assert (c.latents_per_chunk, c.color_correction_strength) == (3, 1.0)


@pytest.mark.parametrize("frames, latents", [(9, 3), (21, 6), (501, 126)])
def test_dreamx_1_plus_4_per_latent_frames_in_whole_chunks_of_3_give_the_latent_count(frames, latents):
    assert adapter("dreamx").num_latents(frames) == latents


@pytest.mark.parametrize("frames", [1, 5, 8, 10, 12, 13, 17])
def test_dreamx_frames_off_the_4_grid_or_a_partial_chunk_are_refused(frames):
    with pytest.raises(ModelConfigError, match=rf"^DreamX needs \(N-1\)%4 == 0 and a latent count divisible by 3; "
                                               rf"N={frames}$"):
        adapter("dreamx").num_latents(frames)


# -- DreamX: camera rows --------------------------------------------------------------------------------------------
def test_dreamx_a_camera_row_is_frame_fixed_k_two_zeros_and_the_w2c_row_major():
    c2w = np.stack([np.eye(4), se3(np.eye(3), [1.0, 2.0, 3.0])])
    k = [969.697 / 1920, 969.697 / 1080, 0.5, 0.5]
    assert camera_rows(c2w, 1.0) == [
        [0.0, *k, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        [1.0, *k, 0.0, 0.0, 1.0, 0.0, 0.0, -1.0, 0.0, 1.0, 0.0, -2.0, 0.0, 0.0, 1.0, -3.0]]


def test_dreamx_camera_rows_scale_the_translation_before_inverting():
    c2w = np.stack([se3(rot_y(0.3), [1.0, -2.0, 0.5])])
    w2c = np.linalg.inv(np.array([[np.cos(0.3), 0, np.sin(0.3), 2.5], [0, 1, 0, -5.0], [-np.sin(0.3), 0, np.cos(0.3),
                                                                                       1.25], [0, 0, 0, 1]]))
    (row,) = camera_rows(c2w, 2.5)
    assert len(row) == 19
    assert np.allclose(row[7:], w2c[:3].reshape(-1))
    assert np.array_equal(c2w[0, :3, 3], [1.0, -2.0, 0.5])  # the caller's poses are left as they were


def test_dreamx_cameras_text_is_a_header_then_one_g10_row_per_frame():
    c2w = np.stack([np.eye(4), se3(np.eye(3), [0.125, 0.0, 1.0 / 3.0])])
    k = "0.5050505208 0.8978675926 0.5 0.5"
    assert cameras_text(c2w, 1.0) == ("harness://camera-path\n"
                                      f"0 {k} 0 0 1 0 0 -0 0 1 0 -0 0 0 1 -0\n"  # -R^T t of t = 0
                                      f"1 {k} 0 0 1 0 0 -0.125 0 1 0 -0 0 0 1 -0.3333333333\n")


def test_dreamx_parsing_skips_the_header_and_blank_lines():
    rows = parse_camera_rows("header 9 9\n1 2 3\n\n  \n4 5 6\n")
    assert np.array_equal(rows, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


# -- DreamX: write_native and decode ----------------------------------------------------------------------------------
def dreamx_path() -> np.ndarray:
    """9 poses (3 latents): moving along x by 0.1 and turning 0.01 rad about y per frame."""
    return np.stack([se3(rot_y(0.01 * i), [0.1 * i, 0.0, 0.0]) for i in range(9)])


@pytest.fixture(scope="module")
def dreamx_written(case, tmp_path_factory):
    a = adapter("dreamx", translation_scale={"units": "scene", "per_scene_unit": 2.0})
    req = request(case, tmp_path_factory.mktemp("dreamx"), dreamx_path())
    return a, req, a.write_native(req, None, K)


def test_dreamx_write_native_writes_the_camera_rows_in_model_units(dreamx_written):
    _, req, _ = dreamx_written
    assert (req.controls_dir / "cameras.txt").read_text() == cameras_text(dreamx_path(), 2.0)


def test_dreamx_items_json_is_one_item_with_the_image_and_prompt_and_no_actions(dreamx_written):
    _, req, _ = dreamx_written
    d = req.controls_dir
    assert json.loads((d / "items.json").read_text()) == [
        {"image_path": str(d / "image.png"), "caption": "a red kettle", "action_seq": [], "action_speed_list": []}]


def test_dreamx_write_native_names_both_files_and_records_latents_and_anchor_rule(dreamx_written):
    _, req, controls = dreamx_written
    d = req.controls_dir
    assert controls.files == {"cameras.txt": str(d / "cameras.txt"), "items.json": str(d / "items.json")}
    assert controls.meta == {"num_latents": 3, "latent_anchor_rule": "0, then 4j-3"}


def test_dreamx_write_native_refuses_a_partial_chunk(case, tmp_path):
    with pytest.raises(ModelConfigError, match="N=13"):
        adapter("dreamx").write_native(request(case, tmp_path, still(13)), None, K)


def test_dreamx_decode_keeps_the_poses_at_latent_anchors_0_1_5_and_interpolates_between(dreamx_written):
    a, req, _ = dreamx_written
    back = a.decode(req.controls_dir, req)
    want = dreamx_path()
    assert back.shape == (9, 4, 4)
    assert np.allclose(back[[0, 1, 5]], want[[0, 1, 5]])
    assert np.allclose(back[3], want[3])  # halfway between anchors 1 and 5 on a constant-speed path
    assert np.allclose(back[8], want[5])  # held after the last anchor


def test_dreamx_decode_of_hand_written_rows_halves_only_the_translation(case, tmp_path):
    a = adapter("dreamx", translation_scale={"units": "scene", "per_scene_unit": 2.0})
    row = "1 0 0 0 0 0 0 1 0 0 -2 0 1 0 -4 0 0 1 -6"
    (tmp_path / "cameras.txt").write_text("h\n" + "\n".join([row] * 9) + "\n")
    want = np.tile(se3(np.eye(3), [1.0, 2.0, 3.0]), (9, 1, 1))
    assert np.allclose(a.decode(tmp_path, request(case, tmp_path / "item", still(9))), want, atol=1e-12)


def test_dreamx_decode_reads_the_w2c_from_columns_7_to_18_only(case, tmp_path):
    a = adapter("dreamx")
    row = "1 0 0 0 0 0 0 1 0 0 -2 0 1 0 -4 0 0 1 -6 99"
    (tmp_path / "cameras.txt").write_text("h\n" + "\n".join([row] * 9) + "\n")
    want = np.tile(se3(np.eye(3), [2.0, 4.0, 6.0]), (9, 1, 1))
    assert np.allclose(a.decode(tmp_path, request(case, tmp_path / "item", still(9))), want, atol=1e-12)


# -- DreamX: launch and context -------------------------------------------------------------------------------------
def test_dreamx_launch_passes_latents_fps_seed_and_colour_correction(case, tmp_path):
    a = adapter("dreamx", checkpoint="/dx.safetensors", color_correction_strength=0.5)
    req = request(case, tmp_path / "item7", still(501), seed=9)
    spec = a.launch(req, None)
    d, out_dir = req.controls_dir, tmp_path / "item7" / "upstream_out"
    assert spec.script == "inference_ar_forcing.py"
    assert spec.args == ["--config_path", "configs/dreamx-ar/causal_camera_forcing_5b.yaml", "--model_name",
                         "./Wan2.2-TI2V-5B", "--transformer_path", "./configs/dreamx-ar/", "--base_checkpoint_path",
                         "/dx.safetensors", "--data_path", str(d / "items.json"), "--output_folder", str(out_dir),
                         "--num_output_frames", "126", "--fps", "16", "--seed", "9", "--chunk_relative",
                         "--color_correction_strength", "0.5"]
    assert (spec.out_dir, spec.output) == (str(out_dir), str(out_dir / "0_controls_image.mp4"))
    assert spec.wrapper == shim("dreamx")
    assert spec.wrapper_args == ["--seed", "9", "--cameras", str(d / "cameras.txt")]


def test_dreamx_fullkv_launch_has_the_shim_resize_the_cache_to_every_latent(case, tmp_path):
    req = request(case, tmp_path, still(501), context=FULLKV, seed=9)
    spec = adapter("dreamx").launch(req, None)
    assert spec.wrapper_args == ["--seed", "9", "--cameras", str(req.controls_dir / "cameras.txt"), "--full-kv", "126"]
    assert spec.args[-1] == "1"


def test_dreamx_tells_upstream_nothing_for_native_and_an_unbounded_window_for_fullkv():
    a = adapter("dreamx")
    assert a.told_upstream(NATIVE) == {"local_attn_size": 12, "sink_size": 3,
                                       "passed": "nothing: configs/dreamx-ar/config.json:15-16",
                                       "window": "3 sink + 6 recent + 3 current latents (upstream's own)"}
    assert a.told_upstream(FULLKV) == {"local_attn_size": -1,
                                       "shim": "runner.py --full-kv: cache literals resized to 126 x 880",
                                       "window": "every earlier latent"}


# -- YUME: config and clock -----------------------------------------------------------------------------------------
def test_yume_defaults_are_29_frame_stages_the_snap_thresholds_and_the_speed_calibration():
    c = YumeConfig(name="y", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=494)
    assert c.params() == YumeParams(frames_per_stage=29, rotation_snap_deg=0.5, translation_snap=1e-3,
                                    deg_per_speed_unit=1.0, units_per_speed_unit=0.0032)
    assert (c.prompt_refinement, c.captioner, c.script, c.generate_target) == (
        False, None, "fastvideo/sample/sample_5b.py", "wan23.Yume.generate")


def test_yume_params_carry_each_field_to_its_own_place():
    c = YumeConfig(name="y", adapter="x", seed=1, height=H, width=W, fps=16, num_frames=41, frames_per_stage=8,
                   rotation_snap_deg=2.0, translation_snap=3.0, deg_per_speed_unit=4.0, units_per_speed_unit=5.0)
    assert c.params() == YumeParams(8, 2.0, 3.0, 4.0, 5.0)


def test_yume_control_clock_is_every_29th_pose_keeping_segment_lengths():
    clock = adapter("yume").control_clock(88)
    assert clock.edges == (0, 29, 58, 87)
    assert clock.keep == "length"
    assert clock.rule == "YUME conditions each 29-frame stage on one caption (sample_5b.py:812-820, :1083-1092)"


# -- YUME: write_native and decode ------------------------------------------------------------------------------------
def yume_path() -> np.ndarray:
    """59 poses (two stages): still over stage 1, then a 1-degree-per-frame turn about y over stage 2."""
    return np.stack([se3(rot_y(np.radians(max(0, i - 29)))) for i in range(59)])


@pytest.fixture(scope="module")
def yume_written(case, tmp_path_factory):
    a = adapter("yume")
    c2w = yume_path()
    req = request(case, tmp_path_factory.mktemp("yume"), c2w, params={"upstream_clock": "laid"})
    return a, req, c2w, a.write_native(req, None, K)


def test_yume_caption_txt_is_one_camera_line_per_stage_without_the_scene_prompt(yume_written):
    a, req, c2w, _ = yume_written
    lines = yume_captions(c2w, "", a.config.params())
    assert len(lines) == 2
    assert (req.controls_dir / "caption.txt").read_text() == lines[0] + "\n" + lines[1] + "\n"
    assert "a red kettle" not in (req.controls_dir / "caption.txt").read_text()


def test_yume_the_canvas_is_written_as_a_quality_95_jpeg_in_jpg(yume_written, case):
    a, req, _, _ = yume_written
    canvas = a.canvas_image_and_K(case)[0]
    ok, want = cv2.imencode(".jpg", np.ascontiguousarray(canvas[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 95])
    assert ok and (req.controls_dir / "jpg" / "image.jpg").read_bytes() == want.tobytes()


def test_yume_write_native_names_its_files_and_records_stages_keys_and_clock(yume_written):
    _, req, _, controls = yume_written
    d = req.controls_dir
    assert controls.files == {"caption.txt": str(d / "caption.txt"), "jpg/image.jpg": str(d / "jpg/image.jpg")}
    assert controls.meta == {"stages": 2, "stage_keys": [("None", "·"), ("None", "→")], "upstream_clock": "laid"}


def test_yume_write_native_can_run_again_in_the_same_folder(yume_written):
    a, req, _, _ = yume_written
    assert a.write_native(req, None, K).meta["stages"] == 2


@pytest.mark.parametrize("frames", [29, 31, 58])
def test_yume_a_path_that_is_not_29k_plus_1_poses_is_refused(case, tmp_path, frames):
    msg = (r"^YUME makes 29 frames per caption stage after the image \(29 k \+ 1 poses\); "
           rf"{frames} is not one \(model\.num_frames or model\.frames_per_trajectory\)$")
    with pytest.raises(ModelConfigError, match=msg):
        adapter("yume").write_native(request(case, tmp_path, still(frames)), None, K)


def test_yume_one_stage_is_30_poses(case, tmp_path):
    controls = adapter("yume").write_native(request(case, tmp_path, still(30)), None, K)
    assert controls.meta["stages"] == 1
    assert controls.meta["stage_keys"] == [yume_parse_caption(yume_captions(still(30), "")[0])]


def test_yume_decode_reads_the_non_blank_caption_lines(case, tmp_path, yume_written):
    a, _, c2w, _ = yume_written
    lines = yume_captions(c2w, "", a.config.params())
    (tmp_path / "caption.txt").write_text("\n" + lines[0] + "\n\n" + lines[1] + "\n  \n")
    back = a.decode(tmp_path, request(case, tmp_path / "item", c2w))
    assert np.array_equal(back, yume_decode(lines, a.config.params()))
    assert np.allclose(back, c2w, atol=1e-9)


# -- YUME: launch ---------------------------------------------------------------------------------------------------
def test_yume_launch_gives_the_prompt_once_and_the_shim_the_verbatim_prompt(case, tmp_path):
    a = adapter("yume", checkpoint="/yume")
    req = request(case, tmp_path, still(494), seed=43)
    spec = a.launch(req, None)
    d, out_dir = req.controls_dir, tmp_path / "upstream_out"
    assert spec.script == "fastvideo/sample/sample_5b.py"
    assert spec.args == ["--seed", "43", "--caption_path", str(d / "caption.txt"), "--num_euler_timesteps", "4",
                         "--jpg_dir", str(d / "jpg"), "--prompt", "a red kettle", "--video_output_dir", str(out_dir)]
    assert spec.wrapper == shim("yume")
    assert spec.wrapper_args == ["--seed", "43", "--captions", str(d / "caption.txt"), "--generate",
                                 "wan23.Yume.generate", "--checkpoint", "/yume", "--verbatim-prompt",
                                 str(d / "prompt.txt")]
    assert spec.out_dir == str(out_dir)
    assert spec.output_glob == "*_0_16.mp4"  # 17 stages: rank 0's stage 16


def test_yume_the_video_is_rank_0s_last_stage(case, tmp_path):
    assert adapter("yume").launch(request(case, tmp_path, still(30)), None).output_glob == "*_0_0.mp4"
    assert adapter("yume").launch(request(case, tmp_path, still(552)), None).output_glob == "*_0_18.mp4"


@pytest.mark.parametrize("captioner, given", [(None, "<model.captioner>"), ("/internvl", "/internvl")])
def test_yume_prompt_refinement_hands_the_shim_the_captioner_instead(case, tmp_path, captioner, given):
    a = adapter("yume", prompt_refinement=True, captioner=captioner)
    spec = a.launch(request(case, tmp_path, still(494)), None)
    assert spec.wrapper_args[-2:] == ["--captioner", given]
    assert "--verbatim-prompt" not in spec.wrapper_args
