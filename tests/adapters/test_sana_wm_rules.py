"""The rules of the SANA-WM adapters, one at a time and in this process: the camera boundary of the diffusers backend
(adapters/sana_wm_diffusers/camera.py), the tiny random-weight build of the real classes (tiny.py), the diffusers
adapter (adapter.py: its config rules, where its weights come from, its context and device rules, what ``compile``
writes, how the pipeline is built and called, the harness-driven chunk rollout) and the upstream SANA-WM launch
(adapters/sana_wm/adapter.py: the native files, the 24k+1 rule, the argv, what upstream is told).

The learned parts are the tiny build (seeded, 64x64 canvas, 17 frames = 3 latents, two sampling steps), built once
per module. Where a rule is about the adapter's own handling of the pipeline's output (the uint8 conversion, the
kwargs it passes, the frame-count check, the timings) the slow collaborator is a recorder standing in for the
pipeline. The rollout is checked against the pipeline's own ``__call__`` (one chunk covering the clip is exactly one
pipeline call) and, chunk by chunk, through a hook on the DiT's inputs.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

import adapters.sana_wm_diffusers.adapter as sana_diffusers
import adapters.sana_wm_diffusers.tiny as sana_tiny
from adapters.base import Finding, ItemRequest, ModelConfigError, UnsupportedContextError, build_adapter
from adapters.sana_wm.adapter import UPSTREAM_BLOCK_LATENTS, UPSTREAM_CACHED_BLOCKS, SanaWMAdapter
from adapters.sana_wm_diffusers.adapter import (
    DEFAULT_REPO,
    SanaWMDiffusersConfig,
    chunk_generator,
    resolve_weights,
)
from adapters.sana_wm_diffusers.camera import pipeline_c2w, pipeline_intrinsics
from adapters.sana_wm_diffusers.tiny import TinySanaArch, build_tiny_pipeline, byte_vocab
from harness.cases import Case
from harness.config_groups import group_yaml
from harness.context import ContextPolicy, ContextSelector
from tests.support.adapter_fixtures import one_thread  # noqa: F401 - the module's autouse fixture
from trajectories.path import CameraPath

H = W = 64  # the smallest canvas the tiny VAE decodes (2x2 latents)
N = 17  # 8k+1 frames: 3 latents
SEED = 5
NATIVE = ContextPolicy.from_dict({"name": "native"})
ONE_CHUNK = ContextPolicy.from_dict({"name": "fullkv", "chunk": 4})  # 3 latents: one chunk covers the clip
SLIDING = ContextPolicy.from_dict({"name": "sliding", "chunk": 1, "recent": 1})  # chunk 2 sees latent 1 only
FOV = ContextPolicy.from_dict({"name": "fov", "chunk": 1, "retrieved_chunks": 1})
REENCODING_CAVEAT = "bidirectional model: the selected history is re-encoded with every chunk in sequence order (no KV cache, " \
         "compacted temporal positions)"


# -- shared inputs ------------------------------------------------------------------------------------------------

def moving_c2w(n: int = N) -> np.ndarray:
    """A camera that turns (yaw 0.05 rad per frame) and moves (+x 0.03, +z 0.02 per frame): every pose differs."""
    c2w = np.tile(np.eye(4), (n, 1, 1))
    a = 0.05 * np.arange(n)
    c2w[:, 0, 0], c2w[:, 0, 2], c2w[:, 2, 0], c2w[:, 2, 2] = np.cos(a), np.sin(a), -np.sin(a), np.cos(a)
    c2w[:, 0, 3], c2w[:, 2, 3] = 0.03 * np.arange(n), 0.02 * np.arange(n)
    return c2w


def camera_path(K: np.ndarray, n: int = N, h: int = H, w: int = W) -> CameraPath:
    return CameraPath("t", moving_c2w(n), np.array(K, dtype=np.float64), 16.0, h, w, {"V": (0, n)})


def tiny_cfg(**over) -> dict:
    return {**group_yaml("model", "sana_wm_tiny"), "height": H, "width": W, "num_frames": N,
            "frames_per_trajectory": {}, **over}


def request(adapter, case, item_dir: Path, context=NATIVE, seed=SEED, n: int = N) -> ItemRequest:
    _, K = adapter.canvas_image_and_K(case)
    return ItemRequest(case=case, path=camera_path(K, n, adapter.config.height, adapter.config.width),
                       context=context, seed=seed, item_dir=item_dir)


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Case:
    d = tmp_path_factory.mktemp("case")
    cv2.imwrite(str(d / "img.png"), np.random.default_rng(0).integers(0, 256, (40, 48, 3), dtype=np.uint8))
    return Case(id="c1", family="environment", image=str(d / "img.png"), prompt="a red house by the sea")


@pytest.fixture(scope="module")
def tiny():
    """The tiny adapter with its pipeline built (float32, CPU, guidance 2 = classifier-free guidance on)."""
    a = build_adapter(tiny_cfg())
    pipe, _ = a.build()
    pipe.encode_prompt = memo_prompts(pipe.encode_prompt)
    return a


def memo_prompts(encode):
    """``encode_prompt`` remembered per arguments: the chi-prompt prefix makes each encoding a ~1000-token Gemma
    pass, the slowest part of a tiny run; every test that sends the same prompt gets the same tensors anyway."""
    seen: dict = {}

    def cached(prompt, negative_prompt="", **kw):
        key = (prompt, negative_prompt, *((k, str(v) if k == "device" else tuple(v) if isinstance(v, list) else v)
                                         for k, v in sorted(kw.items())))
        if key not in seen:
            seen[key] = encode(prompt, negative_prompt, **kw)
        return seen[key]
    return cached


def run(adapter, req):
    """compile + generate; the frames the sink received, stacked, and the GeneratedVideo."""
    out: list = []
    gen = adapter.generate(req, adapter.compile(req), out.append)
    return np.stack(out), gen


class Part:
    """A sub-model of :class:`FakePipe`: records ``.to(...)`` in the pipe's call list."""

    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    def to(self, *args, **kwargs):
        self.calls.append((f"{self.name}.to", args, kwargs))
        return self


class FakePipe:
    """Stands in for ``SanaWMPipeline`` where the rule is the adapter's own: records every call, in order, and
    returns the chosen float ``frames`` from ``__call__``."""

    def __init__(self, frames=None):
        self.frames = frames
        self.calls: list = []
        self.vae, self.transformer = Part("vae", self.calls), Part("transformer", self.calls)

    def __call__(self, **kwargs):
        self.calls.append(("__call__", kwargs))
        return SimpleNamespace(frames=self.frames)

    def to(self, *args, **kwargs):
        self.calls.append(("to", args, kwargs))
        return self

    def enable_model_cpu_offload(self, *args, **kwargs):
        self.calls.append(("enable_model_cpu_offload", args, kwargs))

    def set_progress_bar_config(self, *args, **kwargs):
        self.calls.append(("set_progress_bar_config", args, kwargs))


def with_fake_pipe(cfg: dict, frames) -> tuple:
    import torch

    a = build_adapter(cfg)
    fake = FakePipe(frames)
    a._pipe = (fake, torch.device("cpu"))
    return a, fake


# -- camera.py: the pipeline's camera inputs --------------------------------------------------------------------

def test_pipeline_c2w_is_relative_to_frame_0_with_the_translation_scaled_and_float32():
    c2w = moving_c2w(3)
    start = np.eye(4)
    start[:3, 3] = [1.0, 2.0, 3.0]
    world = start @ c2w  # the same camera motion seen from a world where frame 0 sits at (1, 2, 3)
    out = pipeline_c2w(world, 2.5)
    assert out.dtype == np.float32 and out.shape == (3, 4, 4)
    want = c2w.copy()
    want[:, :3, 3] *= 2.5  # translations only: rotations and the last row keep their values
    np.testing.assert_allclose(out, want, atol=1e-6)
    np.testing.assert_array_equal(out[:, 3], np.tile([0.0, 0.0, 0.0, 1.0], (3, 1)))


def test_pipeline_c2w_keeps_scene_units_by_default():
    np.testing.assert_allclose(pipeline_c2w(moving_c2w(3)), moving_c2w(3), atol=1e-6)


def test_pipeline_intrinsics_reads_fx_fy_cx_cy_from_their_places_in_K():
    K = np.array([[100.0, 7.0, 30.0], [3.0, 90.0, 20.0], [11.0, 13.0, 1.0]])
    out = pipeline_intrinsics(K)
    assert out.dtype == np.float32
    assert out.tolist() == [100.0, 90.0, 30.0, 20.0]


# -- tiny.py: the sizes, the vocabulary, the build ---------------------------------------------------------------

def test_tiny_arch_defaults_are_the_documented_sizes():
    assert TinySanaArch().to_dict() == {"hidden": 64, "heads": 2, "layers": 2, "softmax_every_n": 2,
                                        "linear_head_dim": 32, "latent_channels": 8, "vae_channels": 8,
                                        "text_dim": 32, "init_seed": 0}


def test_tiny_arch_refuses_an_unknown_size_naming_the_field():
    with pytest.raises(ModelConfigError, match=r"model\.tiny\.width"):
        TinySanaArch.from_dict({"width": 3})


def test_byte_vocab_is_gemmas_five_specials_then_the_256_byte_tokens_in_order():
    v = byte_vocab()
    assert len(v) == 261
    assert list(v.items())[:5] == [("<pad>", 0), ("<eos>", 1), ("<bos>", 2), ("<unk>", 3), ("<mask>", 4)]
    assert (v["<0x00>"], v["<0x41>"], v["<0xFF>"]) == (5, 70, 260)


def test_the_tiny_build_is_the_real_classes_at_the_arch_sizes(tiny):
    pipe, _ = tiny.build()
    assert type(pipe).__name__ == "SanaWMPipeline"
    assert (type(pipe.tokenizer).__name__, type(pipe.text_encoder).__name__, type(pipe.scheduler).__name__) == (
        "GemmaTokenizer", "Gemma2ForCausalLM", "FlowMatchEulerDiscreteScheduler")
    te = pipe.text_encoder.config
    assert (te.vocab_size, te.hidden_size, te.intermediate_size, te.num_hidden_layers, te.num_attention_heads,
            te.num_key_value_heads, te.pad_token_id, te.eos_token_id, te.bos_token_id) == (261, 32, 64, 1, 2, 1, 0, 1, 2)
    assert te.head_dim == 16 and type(te.head_dim) is int
    assert pipe.tokenizer.convert_tokens_to_ids(["<pad>", "<0x41>"]) == [0, 70]
    tr = pipe.transformer.config
    assert (tr.in_channels, tr.num_layers, tr.hidden_size, tr.num_attention_heads, tr.softmax_every_n,
            tr.linear_head_dim, tr.caption_channels, tr.chunk_plucker_post_attn_blocks, tr.mlp_ratio) == (
        8, 2, 64, 2, 2, 32, 32, 2, 2.0)


def test_the_tiny_vae_has_three_spatiotemporal_stages_strides_32_and_8(tiny):
    pipe, _ = tiny.build()
    v = pipe.vae.config
    assert (pipe.vae_spatial_compression_ratio, pipe.vae_temporal_compression_ratio) == (32, 8)
    got = {k: tuple(v[k]) if isinstance(v[k], (list, tuple)) else v[k] for k in (
        "latent_channels", "block_out_channels", "down_block_types", "downsample_type", "layers_per_block",
        "spatio_temporal_scaling", "decoder_block_out_channels", "decoder_layers_per_block",
        "decoder_spatio_temporal_scaling", "decoder_inject_noise", "upsample_type", "upsample_residual",
        "upsample_factor")}
    assert got == {"latent_channels": 8, "block_out_channels": (8, 8, 8),
                   "down_block_types": ("LTX2VideoDownBlock3D",) * 3, "downsample_type": ("spatiotemporal",) * 3,
                   "layers_per_block": (1, 1, 1, 1), "spatio_temporal_scaling": (True, True, True),
                   "decoder_block_out_channels": (8, 16, 32), "decoder_layers_per_block": (1, 1, 1, 1),
                   "decoder_spatio_temporal_scaling": (True, True, True), "decoder_inject_noise": (False,) * 4,
                   "upsample_type": ("spatiotemporal",) * 3, "upsample_residual": (True,) * 3,
                   "upsample_factor": (2, 2, 2)}


def test_every_tiny_module_is_in_eval_mode_and_the_plucker_embedder_is_not_zero(tiny):
    pipe, _ = tiny.build()
    assert not pipe.text_encoder.training and not pipe.vae.training and not pipe.transformer.training
    std = float(pipe.transformer.plucker_embedder.proj.weight.detach().std())
    assert 0.01 < std < 0.03  # normal(0, 0.02), not the release's zeros


def test_the_tiny_build_is_seeded_by_init_seed_and_leaves_the_global_rng_alone(tiny):
    import torch

    state = torch.random.get_rng_state()
    again = build_tiny_pipeline(TinySanaArch())
    assert torch.equal(torch.random.get_rng_state(), state)
    pipe, _ = tiny.build()
    for name in ("transformer", "vae", "text_encoder"):
        a, b = getattr(pipe, name).state_dict(), getattr(again, name).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    other = build_tiny_pipeline(TinySanaArch(init_seed=1))
    assert not torch.equal(other.transformer.plucker_embedder.proj.weight, again.transformer.plucker_embedder.proj.weight)


def _exec_fresh(module, monkeypatch, blocked: tuple[str, ...]):
    """Execute a fresh copy of ``module`` (same loader) while the ``blocked`` modules cannot be imported."""
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)
    spec = module.__spec__
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    return fresh


def test_the_adapter_modules_import_without_torch_or_diffusers(monkeypatch):
    """readiness names the missing extra, so importing the adapter must not need it."""
    fresh = _exec_fresh(sana_diffusers, monkeypatch, ("torch", "diffusers", "diffusers.pipelines.sana_wm.pipeline_sana_wm"))
    assert fresh.DEFAULT_REPO == DEFAULT_REPO
    fresh_tiny = _exec_fresh(sana_tiny, monkeypatch, ("torch", "diffusers", "diffusers.pipelines.sana_wm.pipeline_sana_wm"))
    assert fresh_tiny.byte_vocab() == byte_vocab()


# -- adapter.py: the config --------------------------------------------------------------------------------------

def test_the_diffusers_config_defaults_are_the_release_settings():
    cfg = {k: v for k, v in group_yaml("model", "sana_wm_diffusers").items() if k not in (
        "weights", "revision", "allow_download", "device", "dtype", "cpu_offload", "num_inference_steps",
        "guidance_scale", "max_sequence_length")}
    c = SanaWMDiffusersConfig.from_dict(cfg)
    assert (c.weights, c.revision, c.allow_download, c.tiny, c.device, c.dtype, c.cpu_offload) == (
        "Efficient-Large-Model/SANA-WM_bidirectional-diffusers", None, False, {}, "auto", "bfloat16", False)
    assert (c.num_inference_steps, c.guidance_scale, c.negative_prompt, c.max_sequence_length, c.cpu_threads) == (
        60, 5.0, "", 300, None)


def test_a_canvas_of_multiples_of_32_is_accepted():
    assert build_adapter(tiny_cfg(height=64, width=96)).config.width == 96


@pytest.mark.parametrize("h, w", [(48, 64), (64, 48)])
def test_a_side_that_is_not_a_multiple_of_32_is_refused(h, w):
    with pytest.raises(ModelConfigError) as err:
        build_adapter(tiny_cfg(height=h, width=w))
    assert f"model.height/width ({h}x{w}) must be multiples of 32 (the LTX-2 VAE's spatial stride)" in str(err.value)


def test_a_frame_count_that_is_not_8k_plus_1_is_refused_with_the_nearest_count_below():
    assert build_adapter(tiny_cfg(num_frames=9)).config.num_frames == 9
    with pytest.raises(ModelConfigError) as err:
        build_adapter(tiny_cfg(num_frames=16))
    assert "model.num_frames=16: SANA-WM's VAE needs 8k+1 frames (e.g. 9)" in str(err.value)


def test_each_per_trajectory_frame_count_must_be_8k_plus_1():
    assert build_adapter(tiny_cfg(frames_per_trajectory={"lrlr": 25})).config.frames_for("lrlr") == 25
    with pytest.raises(ModelConfigError) as err:
        build_adapter(tiny_cfg(frames_per_trajectory={"lrlr": 25, "lrud": 24}))
    assert "model.frames_per_trajectory.lrud=24: needs 8k+1 frames" in str(err.value)


def test_the_tiny_sizes_are_checked_with_the_config_and_an_empty_tiny_needs_none():
    with pytest.raises(ModelConfigError, match=r"model\.tiny\.depth"):
        build_adapter(tiny_cfg(tiny={"depth": 3}))
    assert build_adapter(tiny_cfg(tiny={})).config.tiny == {}


# -- adapter.py: resolve_weights -----------------------------------------------------------------------------------

def _weights_dir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model_index.json").write_text("{}")
    return root


HOW = ("Download them with `huggingface-cli download Efficient-Large-Model/SANA-WM_bidirectional-diffusers` (or `hf "
       "download ...`; add `--local-dir DIR` and set model.weights=DIR), or set model.allow_download=true to fetch "
       "them on first use.")


def _cfg(**over) -> SanaWMDiffusersConfig:
    return SanaWMDiffusersConfig.from_dict({**group_yaml("model", "sana_wm_diffusers"), **over})


def test_a_local_folder_with_model_index_json_is_used_as_it_is(tmp_path):
    d = _weights_dir(tmp_path / "w")
    assert resolve_weights(_cfg(weights=str(d))) == str(d)


def test_a_relative_folder_is_read_as_a_folder_even_without_a_dot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _weights_dir(tmp_path / "w")
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: pytest.fail("no hub lookup"))
    assert resolve_weights(_cfg(weights="w")) == "w"


def test_a_folder_without_model_index_json_is_refused_with_how_to_get_the_weights(tmp_path):
    with pytest.raises(ModelConfigError) as err:
        resolve_weights(_cfg(weights=str(tmp_path)))
    assert str(err.value) == (f"model.weights={str(tmp_path)!r}: no diffusers pipeline there (model_index.json "
                              "missing). " + HOW)


@pytest.mark.parametrize("weights", ["/no/such/sana", "./no-such-sana", "~/no-such-sana-here"])
def test_a_path_that_does_not_exist_is_a_missing_folder_not_a_repo_id(weights, monkeypatch):
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: pytest.fail("no hub lookup"))
    with pytest.raises(ModelConfigError, match=r"no diffusers pipeline there \(model_index\.json missing\)"):
        resolve_weights(_cfg(weights=weights))


def test_a_repo_id_is_read_from_the_cache_only_unless_downloads_are_allowed(tmp_path, monkeypatch):
    snap = _weights_dir(tmp_path / "snap")
    seen = []

    def snapshot_download(repo, revision=None, local_files_only=None):
        seen.append((repo, revision, local_files_only))
        return str(snap)

    monkeypatch.setattr("huggingface_hub.snapshot_download", snapshot_download)
    assert resolve_weights(_cfg(revision="abc")) == str(snap)
    assert resolve_weights(_cfg(allow_download=True)) == str(snap)
    assert seen == [(DEFAULT_REPO, "abc", True), (DEFAULT_REPO, None, False)]


def test_a_repo_missing_from_the_cache_names_the_exception_and_how_to_get_it(monkeypatch):
    class LocalEntryNotFoundError(Exception):
        pass

    def snapshot_download(*a, **k):
        raise LocalEntryNotFoundError("offline")

    monkeypatch.setattr("huggingface_hub.snapshot_download", snapshot_download)
    with pytest.raises(ModelConfigError) as err:
        resolve_weights(_cfg())
    assert str(err.value) == (f"model.weights={DEFAULT_REPO!r}: SANA-WM diffusers weights not found in the local "
                              "Hugging Face cache (LocalEntryNotFoundError). " + HOW)


def test_a_cached_snapshot_without_model_index_json_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: str(tmp_path))
    with pytest.raises(ModelConfigError) as err:
        resolve_weights(_cfg())
    assert str(err.value) == (f"model.weights={DEFAULT_REPO!r}: the cached snapshot {tmp_path} has no "
                              "model_index.json. " + HOW)


# -- adapter.py: chunk_generator -----------------------------------------------------------------------------------

def test_a_chunks_noise_seed_is_seed_times_1000003_plus_the_chunk():
    assert chunk_generator(2, 3).initial_seed() == 2_000_009
    assert chunk_generator(0, 0).initial_seed() == 0
    assert chunk_generator(7, 0).device.type == "cpu"


def test_a_huge_chunk_seed_wraps_modulo_2_to_the_63_minus_1():
    seed = 2**62 + 12345
    assert chunk_generator(seed, 4).initial_seed() == (seed * 1_000_003 + 4) % (2**63 - 1)


# -- adapter.py: context, readiness, device ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["fullkv", "sliding", "fov"])
def test_a_rollout_policy_with_rebased_rope_is_refused(name, tiny):
    pol = ContextPolicy.from_dict({"name": name, "rope": "rebase", **({"retrieved_chunks": 1} if name == "fov" else {})})
    with pytest.raises(UnsupportedContextError) as err:
        tiny.check_context(pol)
    assert str(err.value) == ("model=sana_wm_tiny context.rope='rebase': the rollout re-encodes history in sequence "
                              "order; use rope=absolute")
    tiny.check_context(ContextPolicy.from_dict({"name": name, **({"retrieved_chunks": 1} if name == "fov" else {})}))


def test_native_runs_whatever_its_rope_setting(tiny):
    tiny.check_context(ContextPolicy.from_dict({"name": "native", "rope": "rebase"}))


def test_a_policy_the_adapter_does_not_run_is_refused_by_the_base_rule(tiny):
    with pytest.raises(UnsupportedContextError, match="does not support context=paper"):
        tiny.check_context(ContextPolicy.from_dict({"name": "paper"}))


def test_the_tiny_build_needs_no_weights(monkeypatch):
    monkeypatch.setattr("huggingface_hub.snapshot_download", lambda *a, **k: pytest.fail("no weights lookup"))
    assert build_adapter(tiny_cfg()).readiness() == []


def test_missing_weights_are_one_error_finding_on_model_weights(monkeypatch):
    def snapshot_download(*a, **k):
        raise OSError("offline")

    monkeypatch.setattr("huggingface_hub.snapshot_download", snapshot_download)
    a = build_adapter(group_yaml("model", "sana_wm_diffusers"))
    assert a.readiness() == [Finding("error", "model.weights", f"model.weights={DEFAULT_REPO!r}: SANA-WM diffusers "
                                     "weights not found in the local Hugging Face cache (OSError). " + HOW)]


def test_weights_in_a_local_folder_are_ready(tmp_path):
    a = build_adapter({**group_yaml("model", "sana_wm_diffusers"), "weights": str(_weights_dir(tmp_path / "w"))})
    assert a.readiness() == []


def test_without_diffusers_readiness_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)
    assert build_adapter(tiny_cfg()).readiness() == [
        Finding("error", "model.adapter", 'model=sana_wm_tiny needs diffusers: pip install -e ".[models]"')]


def test_a_named_device_is_used_as_it_is():
    import torch

    assert build_adapter(tiny_cfg(device="cuda:1")).device() == torch.device("cuda:1")
    assert build_adapter(tiny_cfg(device="cpu")).device() == torch.device("cpu")


def test_auto_is_accelerates_device_for_this_process():
    from accelerate import PartialState

    assert build_adapter(tiny_cfg(device="auto")).device() == PartialState().device


# -- adapter.py: compile -------------------------------------------------------------------------------------------

def test_compile_writes_the_pipelines_camera_and_intrinsics_in_model_units(tmp_path, case):
    a = build_adapter(tiny_cfg(translation_scale={"units": "scene", "per_scene_unit": 2.0}))
    req = request(a, case, tmp_path)
    ctl = a.compile(req)
    d = tmp_path / "controls"
    assert ctl.files == {"camera.npy": str(d / "camera.npy"), "intrinsics.npy": str(d / "intrinsics.npy")}
    cam = np.load(d / "camera.npy")
    want = moving_c2w()
    want[:, :3, 3] *= 2.0
    assert cam.dtype == np.float32
    np.testing.assert_allclose(cam, want, atol=1e-6)
    K = req.path.K
    np.testing.assert_array_equal(np.load(d / "intrinsics.npy"), np.float32([K[0, 0], K[1, 1], K[0, 2], K[1, 2]]))
    # decoded back in scene units (the achieved side of the residual), float64
    assert ctl.decoded_c2w.dtype == np.float64
    np.testing.assert_allclose(ctl.decoded_c2w, moving_c2w(), atol=1e-6)


def test_compile_meta_counts_latents_and_records_the_scale(tmp_path, case):
    a = build_adapter(tiny_cfg())
    ctl = a.compile(request(a, case, tmp_path))
    assert json.dumps(ctl.meta) == json.dumps({
        "num_latents": 3, "latent_anchor_rule": "latent i -> frame 8i", "caveats": [],
        "translation_scale": {"units": "scene", "per_scene_unit": 1.0, "expects": "", "recoverable": True}})
    assert a.compile(request(a, case, tmp_path / "b", n=25)).meta["num_latents"] == 4


@pytest.mark.parametrize("policy", [ONE_CHUNK, SLIDING, FOV])
def test_a_rollout_policy_records_the_re_encoding_caveat(policy, tmp_path, case):
    a = build_adapter(tiny_cfg())
    assert a.compile(request(a, case, tmp_path, context=policy)).meta["caveats"] == [REENCODING_CAVEAT]


# -- adapter.py: build ---------------------------------------------------------------------------------------------

def test_the_pipeline_is_built_once_with_its_progress_bar_off(tiny):
    first = tiny.build()
    assert tiny.build() is first
    assert first[0]._progress_bar_config == {"disable": True}


def test_a_tiny_build_in_bfloat16_casts_the_dit_only_and_sets_the_cpu_threads():
    import torch

    torch.set_num_threads(2)
    try:
        pipe, device = build_adapter(tiny_cfg(dtype="bfloat16", cpu_threads=1)).build()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(1)
    assert device == torch.device("cpu")
    assert (pipe.transformer.dtype, pipe.vae.dtype, pipe.text_encoder.dtype) == (
        torch.bfloat16, torch.float32, torch.float32)


def test_without_cpu_threads_the_thread_count_is_left_alone(monkeypatch):
    import torch

    fake = FakePipe()
    monkeypatch.setattr(sana_tiny, "build_tiny_pipeline", lambda arch: fake)
    torch.set_num_threads(2)
    try:
        build_adapter(tiny_cfg(cpu_threads=None)).build()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("offload, device, placed", [
    (False, "cpu", "to"), (True, "cpu", "to"), (False, "cuda:0", "to"), (True, "cuda:0", "enable_model_cpu_offload")])
def test_model_cpu_offload_applies_on_an_accelerator_only(offload, device, placed, monkeypatch):
    import torch

    fake, archs = FakePipe(), []
    monkeypatch.setattr(sana_tiny, "build_tiny_pipeline", lambda arch: archs.append(arch) or fake)
    a = build_adapter(tiny_cfg(cpu_offload=offload, device=device, tiny={"hidden": 32}))
    assert a.build() == (fake, torch.device(device))
    assert archs == [TinySanaArch(hidden=32)]
    dev = torch.device(device)
    kw = {"device": dev} if placed != "to" else {}
    args = (dev,) if placed == "to" else ()
    assert fake.calls == [(placed, args, kw), ("set_progress_bar_config", (), {"disable": True})]


def test_weights_load_through_from_pretrained_in_the_dtype_with_the_vae_in_float32(tmp_path, monkeypatch):
    import torch
    from diffusers.pipelines.sana_wm.pipeline_sana_wm import SanaWMPipeline

    fake, loads = FakePipe(), []
    monkeypatch.setattr(SanaWMPipeline, "from_pretrained", classmethod(
        lambda cls, path, **kw: loads.append((path, kw)) or fake))
    d = _weights_dir(tmp_path / "w")
    a = build_adapter({**group_yaml("model", "sana_wm_diffusers"), "weights": str(d), "dtype": "float16",
                       "device": "cpu"})
    a.build()
    assert loads == [(str(d), {"dtype": torch.float16})]
    assert fake.calls == [("vae.to", (torch.float32,), {}), ("to", (torch.device("cpu"),), {}),
                          ("set_progress_bar_config", (), {"disable": True})]


# -- adapter.py: generate (native) with a recorded pipeline ------------------------------------------------------

def test_native_generate_hands_the_pipeline_the_compiled_files_and_the_config(tmp_path, case):
    frames = np.zeros((N, 2, 2, 3))
    a, fake = with_fake_pipe(tiny_cfg(negative_prompt="blurry", num_inference_steps=3, guidance_scale=4.5,
                                      max_sequence_length=12, fps=15.6), frames)
    req = request(a, case, tmp_path, seed=123)
    ctl = a.compile(req)
    a.generate(req, ctl, lambda f: None)
    [(name, kw)] = fake.calls
    image = kw.pop("image")
    np.testing.assert_array_equal(np.asarray(image), a.canvas_image_and_K(case)[0])
    gen = kw.pop("generator")
    assert gen.initial_seed() == 123 and gen.device.type == "cpu"
    np.testing.assert_array_equal(kw.pop("c2w"), np.load(ctl.files["camera.npy"]))
    np.testing.assert_array_equal(kw.pop("intrinsics"), np.load(ctl.files["intrinsics.npy"]))
    assert kw == {"prompt": "a red house by the sea", "height": H, "width": W, "num_frames": N, "fps": 16,
                  "num_inference_steps": 3, "guidance_scale": 4.5, "negative_prompt": "blurry",
                  "max_sequence_length": 12, "output_type": "np"}


def test_an_empty_prompt_reaches_the_pipeline_empty(tmp_path, case):
    a, fake = with_fake_pipe(tiny_cfg(), np.zeros((N, 2, 2, 3)))
    quiet = case.model_copy(update={"prompt": ""})
    req = request(a, quiet, tmp_path)
    a.generate(req, a.compile(req), lambda f: None)
    assert fake.calls[0][1]["prompt"] == ""


def test_frames_reach_the_sink_rounded_to_uint8_and_clipped(tmp_path, case):
    values = np.array([-0.1, 0.0, 0.001, 0.002, 0.5, 0.6, 0.999, 1.0, 1.2])
    frames = np.tile(values[None, None, :, None], (N, 1, 1, 3))  # (N, 1, 9, 3)
    a, _ = with_fake_pipe(tiny_cfg(), frames)
    req = request(a, case, tmp_path)
    got: list = []
    a.generate(req, a.compile(req), got.append)
    assert len(got) == N and all(f.dtype == np.uint8 and f.shape == (1, 9, 3) for f in got)
    # x 255, rounded half to even (127.5 -> 128, 153.0 -> 153, 254.7 -> 255), then clipped to [0, 255]
    assert got[0][0, :, 0].tolist() == [0, 0, 0, 1, 128, 153, 255, 255, 255]


def test_a_pipeline_that_returns_another_frame_count_is_an_error(tmp_path, case):
    a, _ = with_fake_pipe(tiny_cfg(), np.zeros((N - 1, 2, 2, 3)))
    req = request(a, case, tmp_path)
    with pytest.raises(RuntimeError) as err:
        a.generate(req, a.compile(req), lambda f: None)
    assert str(err.value) == "SanaWMPipeline returned 16 frames for 17 requested"


class FakeClock:
    def __init__(self, *ticks):
        self.ticks = list(ticks)

    def perf_counter(self):
        return self.ticks.pop(0)


def test_native_generate_records_its_trace_timings_and_meta(tmp_path, case, monkeypatch):
    a, _ = with_fake_pipe(tiny_cfg(), np.zeros((N, 2, 2, 3)))
    req = request(a, case, tmp_path)
    ctl = a.compile(req)
    monkeypatch.setattr(sana_diffusers, "time", FakeClock(10.0, 10.25, 11.0, 13.5))
    gen = a.generate(req, ctl, lambda f: None)
    assert (gen.num_frames, gen.fps) == (N, 16.0)
    assert gen.context_trace == [{"chunk": 0, "current": [0, 1, 2], "context": [], "sink": [], "recent": [],
                                  "retrieved": [], "scores": {},
                                  "note": "bidirectional: every latent sees the whole clip"}]
    assert gen.timings == {"load_s": 0.25, "generate_s": 2.5}
    assert json.dumps(gen.meta) == json.dumps({
        "backend": "diffusers.SanaWMPipeline", "device": "cpu", "dtype": "float32", "tiny": TinySanaArch().to_dict(),
        "weights": None, "num_inference_steps": 2, "guidance_scale": 2.0, "num_latents": 3})


def test_the_meta_of_a_weights_run_names_the_weights(tmp_path, case):
    a, _ = with_fake_pipe({**group_yaml("model", "sana_wm_diffusers"), "height": H, "width": W, "num_frames": 25},
                          np.zeros((25, 2, 2, 3)))
    req = request(a, case, tmp_path, n=25)
    gen = a.generate(req, a.compile(req), lambda f: None)
    assert (gen.meta["weights"], gen.meta["tiny"], gen.meta["dtype"], gen.meta["num_latents"]) == (
        DEFAULT_REPO, {}, "bfloat16", 4)
    assert json.dumps(gen.meta["num_latents"]) == "4"
    assert gen.context_trace[0]["current"] == [0, 1, 2, 3]


# -- adapter.py: the chunk rollout on the tiny pipeline -------------------------------------------------------------

def test_a_rollout_whose_one_chunk_covers_the_clip_is_the_pipelines_own_call(tiny, tmp_path, case):
    """Chunk 0's noise comes from seed * 1000003 + 0: the native call at that seed is the same sampling."""
    rolled, gen = run(tiny, request(tiny, case, tmp_path / "r", context=ONE_CHUNK, seed=SEED))
    native, _ = run(tiny, request(tiny, case, tmp_path / "n", seed=SEED * 1_000_003))
    assert rolled.shape == (N, H, W, 3) and rolled.std() > 1.0
    np.testing.assert_array_equal(rolled, native)
    sel = ContextSelector(ONE_CHUNK, moving_c2w()[::8], tiny.canvas_image_and_K(case)[1], H, W)
    assert gen.context_trace == [sel.select(0).to_trace()]


class DitInputs:
    """Records what the DiT is given at every sampling step (a forward pre-hook) and the latents the rollout decodes."""

    def __init__(self, pipe, monkeypatch):
        self.calls: list[dict] = []
        self.decoded = None
        self.handle = pipe.transformer.register_forward_pre_hook(self.hook, with_kwargs=True)
        real = pipe._decode_latents

        def decode(latents):
            self.decoded = latents.clone()
            return real(latents)
        monkeypatch.setattr(pipe, "_decode_latents", decode)

    def hook(self, module, args, kwargs):
        self.calls.append({"x": args[0].clone(), "t": args[1].clone(), "text": args[2].shape[0],
                           "cam": kwargs["camera_conditions"].clone(), "plucker": kwargs["chunk_plucker"].clone()})

    def close(self):
        self.handle.remove()


@pytest.fixture
def dit_inputs(tiny, monkeypatch):
    rec = DitInputs(tiny.build()[0], monkeypatch)
    yield rec
    rec.close()


def _reference_camera(ctl, K):
    """raymap (L, 20) and chunk Plücker (48, L, h, w) from diffusers' own prepare_camera on the compiled files."""
    from diffusers.pipelines.sana_wm.cam_utils import prepare_camera

    cam = prepare_camera(np.load(ctl.files["camera.npy"]), np.tile(pipeline_intrinsics(K), (N, 1)),
                         target_size=(H, W), vae_stride=(8, 32, 32))
    return cam["raymap"].numpy(), cam["chunk_plucker"].numpy()


def test_each_chunk_sees_its_selected_history_clean_at_timestep_zero(tiny, tmp_path, case, dit_inputs):
    import torch
    from diffusers.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler

    req = request(tiny, case, tmp_path, context=SLIDING, seed=SEED)
    ctl = tiny.compile(req)
    gen = tiny.generate(req, ctl, lambda f: None)
    sched = FlowMatchEulerDiscreteScheduler()
    sched.set_timesteps(2)
    steps = [float(t) for t in sched.timesteps]
    sel = ContextSelector(SLIDING, moving_c2w()[::8], req.path.K, H, W)
    chunks = [sel.select(k) for k in range(sel.num_chunks)]
    assert [(c.context, list(c.current)) for c in chunks] == [([], [0]), ([0], [1]), ([1], [2])]
    assert gen.context_trace == [c.to_trace() for c in chunks]
    raymap, plucker = _reference_camera(ctl, req.path.K)
    out = dit_inputs.decoded  # (1, C, 3, 2, 2): what the rollout decoded
    assert out.shape == (1, 8, 3, 2, 2)
    assert len(dit_inputs.calls) == 3 * 2
    for k, chunk in enumerate(chunks):
        ctx, cur = chunk.context, list(chunk.current)
        idx, n = ctx + cur, len(ctx)
        noise = torch.randn((1, 8, len(cur), 2, 2), generator=torch.Generator().manual_seed(SEED * 1_000_003 + k))
        for s, t in enumerate(steps):
            call = dit_inputs.calls[2 * k + s]
            x = call["x"]
            assert x.shape == (2, 8, len(idx), 2, 2) and call["text"] == 2  # classifier-free guidance: 2 rows
            assert torch.equal(x[0], x[1])
            # the history, clean and never updated: the latents the earlier chunks produced
            assert torch.equal(x[:1, :, :n], out[:, :, ctx])
            if 0 in cur:  # the conditioning latent, pinned: what the clip decodes at latent 0
                assert torch.equal(x[:1, :, n + cur.index(0)], out[:, :, 0])
            elif s == 0:  # the chunk starts from its own seeded noise
                assert torch.equal(x[:1, :, n:], noise)
            want_t = [0.0] * n + [0.0 if i == 0 else t for i in cur]
            assert call["t"].shape == (2, 1, len(idx))
            assert call["t"][:, 0].tolist() == [want_t, want_t]
            np.testing.assert_allclose(call["cam"].numpy(), np.stack([raymap[idx]] * 2), atol=1e-5)
            np.testing.assert_allclose(call["plucker"].numpy(), np.stack([plucker[:, idx]] * 2), atol=1e-5)


def test_without_guidance_above_1_the_rollout_runs_one_unguided_batch(tiny, tmp_path, case, dit_inputs):
    a = build_adapter(tiny_cfg(guidance_scale=1.0))
    a._pipe = tiny.build()
    rolled, _ = run(a, request(a, case, tmp_path / "r", context=ONE_CHUNK, seed=SEED))
    assert [c["x"].shape[0] for c in dit_inputs.calls] == [1, 1]
    assert [c["text"] for c in dit_inputs.calls] == [1, 1]
    native, _ = run(a, request(a, case, tmp_path / "n", seed=SEED * 1_000_003))
    np.testing.assert_array_equal(rolled, native)


def test_a_one_channel_latent_runs_the_rollout(tiny, tmp_path, case):
    """The per-token timesteps are read from channel 0, the one channel every latent has."""
    a = build_adapter(tiny_cfg(num_frames=9, num_inference_steps=1, tiny={"latent_channels": 1}))
    pipe, _ = a.build()
    # the text encoder is built first from the same init_seed: the fixture's remembered encodings are this one's
    pipe.encode_prompt = tiny.build()[0].encode_prompt
    frames, gen = run(a, request(a, case, tmp_path, context=ONE_CHUNK, n=9))
    assert frames.shape == (9, H, W, 3) and gen.meta["num_latents"] == 2


def test_fov_selects_history_on_the_poses_of_the_latent_anchor_frames(tiny, tmp_path, case):
    req = request(tiny, case, tmp_path, context=FOV, seed=SEED)
    gen = tiny.generate(req, tiny.compile(req), lambda f: None)
    sel = ContextSelector(FOV, moving_c2w()[[0, 8, 16]], req.path.K, H, W)
    want = [sel.select(k).to_trace() for k in range(sel.num_chunks)]
    assert want[2]["scores"]  # chunk 2 scored its candidates on the poses of frames 0, 8, 16
    assert gen.context_trace == want


# -- sana_wm/adapter.py: the upstream launch -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def upstream():
    return build_adapter({**group_yaml("model", "sana_wm"), "upstream_dir": None, "height": 64, "width": 64,
                          "translation_scale": {"units": "scene", "per_scene_unit": 2.0}})


def _upstream_req(adapter, tmp_path, n=25, context=NATIVE, seed=42):
    K = np.array([[50.0, 0.0, 32.0], [0.0, 50.0, 32.0], [0.0, 0.0, 1.0]])
    case = Case(id="c1", family="environment", image="unused.png", prompt="p")
    return ItemRequest(case=case, path=camera_path(K, n), context=context, seed=seed, item_dir=tmp_path / "item"), K


def test_the_streaming_script_snaps_to_24k_plus_1_so_other_counts_are_refused(upstream, tmp_path):
    req, K = _upstream_req(upstream, tmp_path, n=17)
    with pytest.raises(ModelConfigError) as err:
        upstream.write_native(req, None, K)
    assert str(err.value) == "SANA-WM streaming snaps frames to 24k+1; 17 is not (model.num_frames)"


def test_write_native_writes_c2w_in_model_units_and_k_as_float64(upstream, tmp_path):
    req, K = _upstream_req(upstream, tmp_path)
    ctl = upstream.write_native(req, None, K)
    d = req.controls_dir
    assert ctl.files == {"camera.npy": str(d / "camera.npy"), "intrinsics.npy": str(d / "intrinsics.npy")}
    cam = np.load(d / "camera.npy")
    want = moving_c2w(25)
    want[:, :3, 3] *= 2.0
    np.testing.assert_allclose(cam, want, atol=1e-12)
    k = np.load(d / "intrinsics.npy")
    assert k.dtype == np.float64 and k.tolist() == K.tolist()
    assert json.dumps(ctl.meta) == json.dumps({"num_latents": 4, "caveats": [
        "linear-attention layers summarise all history whatever the context policy"]})
    assert upstream.write_native(_upstream_req(upstream, tmp_path / "b", n=49)[0], None, K).meta["num_latents"] == 7
    np.testing.assert_allclose(upstream.decode(d, req), moving_c2w(25), atol=1e-12)


def test_the_upstream_compile_never_reads_the_canvas_image():
    assert SanaWMAdapter.uses_canvas_image is False


@pytest.mark.parametrize("policy, blocks", [(NATIVE, "2"), (ContextPolicy.from_dict({"name": "fullkv"}), "-1")])
def test_the_launch_passes_the_files_seeds_window_and_checkpoint(policy, blocks, upstream, tmp_path):
    req, _ = _upstream_req(upstream, tmp_path, context=policy, seed=7)
    spec = upstream.launch(req, None)
    d, out = req.controls_dir, req.item_dir / "upstream_out"
    assert spec.script == "inference_video_scripts/wm/inference_sana_wm_streaming.py"
    assert spec.args == ["--camera", str(d / "camera.npy"), "--intrinsics", str(d / "intrinsics.npy"),
                         "--image", str(d / "image.png"), "--prompt", str(d / "prompt.txt"), "--num_frames", "25",
                         "--seed", "7", "--refiner_seed", "7", "--denoising_step_list", "1000,960,889,727,0",
                         "--num_cached_blocks", blocks, "--fps", "16",
                         "--config", "configs/sana_wm/sana_wm_streaming_1600m_720p.yaml",
                         "--streaming_root", "<model.checkpoint>", "--output_dir", str(out), "--name", "video"]
    assert (spec.output, spec.out_dir) == (str(out / "video_streaming.mp4"), str(out))


def test_the_launch_names_the_output_after_output_name(tmp_path):
    a = build_adapter({**group_yaml("model", "sana_wm"), "upstream_dir": None, "output_name": "clip",
                       "checkpoint": "/ckpt"})
    req, _ = _upstream_req(a, tmp_path)
    spec = a.launch(req, None)
    assert spec.output == str(req.item_dir / "upstream_out" / "clip_streaming.mp4")
    assert spec.args[-6:] == ["--streaming_root", "/ckpt", "--output_dir", str(req.item_dir / "upstream_out"),
                              "--name", "clip"]


def test_upstream_is_told_its_window_in_blocks_of_3_latents(upstream):
    assert (UPSTREAM_CACHED_BLOCKS, UPSTREAM_BLOCK_LATENTS) == (2, 3)
    assert upstream.told_upstream(NATIVE) == {
        "--num_cached_blocks": 2, "sink_token": True,
        "window": "2 blocks x 3 latents + the sink token + the current block (upstream's default)"}
    assert upstream.told_upstream(ContextPolicy.from_dict({"name": "fullkv"})) == {
        "--num_cached_blocks": -1, "sink_token": True, "window": "every past block"}
