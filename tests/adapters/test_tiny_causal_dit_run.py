"""The built-in tiny causal DiT run in this process (adapters/tiny_causal_dit/adapter.py): its native controls are the
item's camera path and intrinsics, it generates the requested frames under the context policy, records its
architecture and KV-cache figures, and refuses a canvas or a frame count its VAE and latent stride cannot make."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.cli import in_process_cli

pytest.importorskip("torch")

TINY = ("model=tiny_causal_dit", "model.height=32", "model.width=48", "cases.include=[environment_rocket]",
        "evaluate=off", "progress=false")


@pytest.fixture
def harness(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def test_a_tiny_run_writes_the_path_as_controls_and_generates_every_frame(harness, tmp_path):
    from harness.video import probe_video

    r = harness(*TINY, "model.num_frames=33", "run=t")
    assert r.code == 0, r.err
    (item,) = {p.parent for p in (tmp_path / "outputs" / "t").rglob("meta.json")}
    camera = np.load(item / "camera.npz")
    poses = np.load(item / "controls" / "poses.npy")
    intr = np.load(item / "controls" / "intrinsics.npy")
    K = camera["K"]
    assert np.array_equal(poses, camera["c2w"]) and poses.shape == (33, 4, 4)  # the path itself, per frame
    assert intr.shape == (33, 4) and np.allclose(intr, [K[0, 0], K[1, 1], K[0, 2], K[1, 2]])
    video = probe_video(item / "video.mp4")
    assert video["num_frames"] == 33 and (video["height"], video["width"]) == (32, 48)
    meta = json.loads((item / "meta.json").read_text())
    gen = meta["generation"]
    assert gen["num_latents"] == 9 and gen["device"] == "cpu" and gen["dtype"] == "float32"  # (33 - 1) / 4 + 1
    assert gen["arch"]["spatial_stride"] == 8 and gen["arch"]["patch"] == 2
    assert 0 < gen["cache_peak_frames"] <= 9 and gen["cache_bytes"] > 0
    assert meta["controls"]["latent_anchor_rule"] == "latent i -> frame 4i"
    assert sorted(meta["controls"]["files"]) == ["intrinsics.npy", "poses.npy"]
    trace = json.loads((item / "context_trace.json").read_text())
    chunks = trace["chunks"]
    assert [c["chunk"] for c in chunks] == list(range(len(chunks)))
    assert sorted(lat for c in chunks for lat in c["current"]) == list(range(9))  # every latent generated once
    for c in chunks:
        assert set(c["context"]) == set(c["sink"]) | set(c["recent"]) | set(c["retrieved"])
        assert max(c["context"], default=-1) < min(c["current"])  # causal: only earlier latents


def test_a_canvas_or_frame_count_the_model_cannot_make_is_refused_naming_the_field(harness, tmp_path):
    r = harness(*TINY[:1], "model.height=30", "model.width=48", *TINY[3:], "model.num_frames=33", "run=a")
    assert r.code == 2 and "model.height/width (30x48) must be multiples of 16" in r.err
    r = harness(*TINY, "model.num_frames=34", "run=b")
    assert r.code == 2 and "model.num_frames=34: needs 4k+1 frames" in r.err
    assert not (tmp_path / "outputs" / "a").exists() and not (tmp_path / "outputs" / "b").exists()
