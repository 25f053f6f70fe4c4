"""SANA-WM through diffusers' SanaWMPipeline: the camera packing against our SANA compile, and the tiny build of the
real classes end to end (in-process, CPU, no download)."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.base import (
    ItemRequest,
    ModelConfigError,
    build_adapter,
)
from adapters.sana_wm_diffusers.camera import pipeline_c2w, pipeline_intrinsics
from harness.cases import load_case_set
from harness.config_groups import group_yaml
from harness.context import ContextPolicy, ContextSelector
from tests.support.adapter_fixtures import one_thread  # noqa: F401 - the module's autouse fixture
from tests.support.upstream_reference import sana_camera_conditions
from trajectories import TrajectorySpec
from trajectories.conventions import relative_to_first

SPECS = {"lrlr": TrajectorySpec(name="lrlr", cycles=("left", "left")),
         "lrud": TrajectorySpec(name="lrud", cycles=("left", "up")),
         "square": TrajectorySpec(name="square", kind="square")}


def prepare_camera(*args, **kwargs):
    """diffusers' own ``prepare_camera`` (imported when a test calls it: importing diffusers costs seconds, which
    every xdist worker would pay at collection)."""
    from diffusers.pipelines.sana_wm.cam_utils import prepare_camera as theirs

    return theirs(*args, **kwargs)


@pytest.fixture(scope="module")
def case():
    return {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]


def _request(adapter, case, traj, tmp_path, context=ContextPolicy(name="native"), seed=42):
    _, K = adapter.canvas_image_and_K(case)
    path = adapter.path_for(SPECS[traj], K, traj)
    return ItemRequest(case=case, path=path, context=context, seed=seed, item_dir=tmp_path / f"{traj}-{seed}")


# -- diffusers' own camera preparation vs our SANA compile ------------------------------------------------------

@pytest.mark.parametrize("traj", ["lrud", "square"])
def test_diffusers_prepare_camera_equals_our_sana_compile(traj, case, tmp_path):
    """An independent check of the SANA-WM compile (adapters/sana_wm + tests/support/upstream_reference.py): the camera.npy /
    intrinsics.npy it writes, packed by diffusers' ``prepare_camera``, give the raymap and chunk Plücker tensors our
    ``sana_camera_conditions`` computes (float32 vs float64)."""
    sana = build_adapter({**group_yaml("model", "sana_wm"), "upstream_dir": None})
    req = _request(sana, case, traj, tmp_path)
    ctl = sana.compile(req)
    cam, K = np.load(ctl.files["camera.npy"]), np.load(ctl.files["intrinsics.npy"])
    assert cam.shape == (481, 4, 4) and K.shape == (3, 3)
    H, W = sana.config.height, sana.config.width
    ours_raymap, ours_chunk = sana_camera_conditions(relative_to_first(cam), K, H, W)
    theirs = prepare_camera(cam.astype(np.float32), np.tile(pipeline_intrinsics(K), (len(cam), 1)),
                            target_size=(H, W), vae_stride=(8, 32, 32))
    assert theirs["raymap"].shape == ours_raymap.shape == (61, 20)
    assert theirs["chunk_plucker"].shape == ours_chunk.shape == (48, 61, 22, 40)
    np.testing.assert_allclose(theirs["raymap"].numpy(), ours_raymap, atol=1e-5)
    np.testing.assert_allclose(theirs["chunk_plucker"].numpy(), ours_chunk, atol=2e-5)
    moved = np.abs(ours_raymap[:, [3, 7, 11]]).max() if traj == "square" else np.abs(ours_raymap[:, 0] - 1).max()
    assert moved > 0.1  # the square really translates, LRUD really rotates
    # the [fx, fy, cx, cy] order our compile marks as inferred is the one diffusers packs
    np.testing.assert_allclose(ours_raymap[0, 16:], [K[0, 0] * 40 / W, K[1, 1] * 22 / H, K[0, 2] * 40 / W,
                                                     K[1, 2] * 22 / H])
    # and the diffusers backend hands the pipeline the same camera as the SANA compile writes for upstream
    diff = build_adapter(group_yaml("model", "sana_wm_diffusers"))
    np.testing.assert_allclose(pipeline_c2w(req.path.c2w, diff.scene_scale()), cam, atol=1e-6)


def test_a_half_pixel_shift_would_be_caught(case, tmp_path):
    """The comparison above is sensitive to the pixel-grid convention: sampling +0.5 pixel centres (the harness
    convention) instead of SANA's integer grid moves the Plücker maps well beyond the tolerance."""
    K = np.array([[40.0, 0, 20], [0, 40.0, 11], [0, 0, 1]])
    c2w = np.tile(np.eye(4), (9, 1, 1))
    c2w[:, 0, 3] = np.linspace(0, 1, 9)
    a = prepare_camera(c2w.astype(np.float32), np.tile(pipeline_intrinsics(K * 32), (9, 1)),
                       target_size=(704, 1280), vae_stride=(8, 32, 32))["chunk_plucker"].numpy()
    K_shift = K * 32
    K_shift[:2, 2] -= 0.5 * 32  # what +0.5 centres at latent resolution amount to
    b = sana_camera_conditions(c2w, K_shift)[1]
    assert np.abs(a - b).max() > 1e-2


# -- the tiny random-weight build, end to end ---------------------------------------------------------------------

def _tiny(**over):
    return build_adapter({**group_yaml("model", "sana_wm_tiny"), **over})


def _frames(adapter, req):
    out = []
    ctl = adapter.compile(req)
    gen = adapter.generate(req, ctl, out.append)
    return np.stack(out), gen


@pytest.fixture(scope="module")
def tiny():
    """One tiny adapter with its pipeline built (the diffusers/transformers imports are paid here once)."""
    a = _tiny()
    a.build()
    return a


def test_tiny_native_runs_the_pipeline_deterministically(case, tmp_path, tiny):
    a = tiny
    assert type(a.build()[0]).__name__ == "SanaWMPipeline"
    f1, gen = _frames(a, _request(a, case, "lrlr", tmp_path))
    assert f1.shape == (49, 64, 96, 3) and f1.dtype == np.uint8 and gen.num_frames == 49
    assert f1.std() > 1.0  # not a constant image
    f2, _ = _frames(_tiny(), _request(a, case, "lrlr", tmp_path))  # a fresh build: seeded init + seeded noise
    assert np.array_equal(f1, f2)
    f3, _ = _frames(a, _request(a, case, "lrlr", tmp_path, seed=43))
    assert not np.array_equal(f1, f3)
    f4, _ = _frames(a, _request(a, case, "lrud", tmp_path))  # the camera reaches the model
    assert not np.array_equal(f1, f4)


def test_tiny_rollout_attends_exactly_the_policy_selection(case, tmp_path, tiny):
    a = tiny
    pipe, _ = a.build()
    seen = []
    hook = pipe.transformer.register_forward_pre_hook(lambda m, args: seen.append(int(args[0].shape[2])))
    try:
        outs = {}
        for pol in (ContextPolicy(name="fullkv"), ContextPolicy(name="sliding", sink=1, recent=1)):
            seen.clear()
            req = _request(a, case, "lrlr", tmp_path, context=pol)
            frames, gen = _frames(a, req)
            sel = ContextSelector(pol, req.path.c2w[::8], req.path.K, 64, 96)
            want = [len(sel.select(k).attended) for k in range(sel.num_chunks)]
            steps = a.config.num_inference_steps
            assert seen == [n for n in want for _ in range(steps)]  # every step of chunk k sees context + chunk
            assert [e["context"] for e in gen.context_trace] == [sel.select(k).context for k in range(sel.num_chunks)]
            outs[pol.name] = frames
    finally:
        hook.remove()
    assert seen == [4, 4, 5, 5]  # sliding, 7 latents: chunk 0 = latents 0-3; chunk 1 = sink 0 + recent 3 + 4-6
    # chunk 0 is the same under both policies; chunk 1 saw a different history (the VAE decoder is causal)
    assert np.array_equal(outs["fullkv"][:25], outs["sliding"][:25])
    assert not np.array_equal(outs["fullkv"][25:], outs["sliding"][25:])


def test_tiny_saved_in_the_diffusers_format_loads_through_the_weights_path(case, tmp_path, tiny):
    """The real loading path (``from_pretrained`` on a local folder) on the tiny pipeline saved with
    ``save_pretrained``: same video as the in-process build."""
    a = tiny
    a.build()[0].save_pretrained(tmp_path / "weights")
    b = _tiny(tiny={}, weights=str(tmp_path / "weights"), dtype="float32")
    b.check_ready()
    assert b.build()[0] is not a.build()[0]
    fa, _ = _frames(a, _request(a, case, "lrlr", tmp_path))
    fb, _ = _frames(b, _request(b, case, "lrlr", tmp_path))
    assert np.array_equal(fa, fb)


def test_missing_weights_fail_with_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    a = build_adapter(group_yaml("model", "sana_wm_diffusers"))
    with pytest.raises(ModelConfigError, match="huggingface-cli download Efficient-Large-Model/SANA-WM_bidirectional"):
        a.check_ready()
    b = build_adapter({**group_yaml("model", "sana_wm_diffusers"), "weights": str(tmp_path)})
    with pytest.raises(ModelConfigError, match="model_index.json missing"):
        b.check_ready()


def test_config_rejects_frame_counts_the_vae_cannot_make():
    with pytest.raises(ModelConfigError, match="8k\\+1"):
        _tiny(num_frames=48)
    with pytest.raises(ModelConfigError, match="multiples of 32"):
        _tiny(height=60)
    with pytest.raises(ModelConfigError, match="model.tiny.depth"):
        _tiny(tiny={"depth": 3})


@pytest.mark.slow
def test_cli_sana_wm_tiny_debug_produces_a_video(tmp_path):
    from tests.support import run_cli

    r = run_cli(["model=sana_wm_tiny", "debug=default", "stage=generate"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    videos = list((tmp_path / "outputs" / "debug").rglob("video.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0
