"""The paper's learned backbones with their real libraries and real loading code, on tiny random-weight models built
from the libraries' own classes and saved in the real on-disk formats into a temporary weights root.

Values are meaningless (random weights); what is tested is the plumbing: the files each backbone needs, loading,
shapes / dtypes / conventions, the recipe's invariants, seeded output slices, and clear errors for a missing file,
a wrong shape or a corrupt file, each naming the backbone and the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluate.perception.arcface import ArcFaceEmbedder
from evaluate.perception.da3 import DepthAnything3, c2w_from_da3_extrinsics
from evaluate.perception.dinov2 import Dinov2Encoder
from evaluate.perception.iqa import LaionAesthetic, MusiqSpaq
from evaluate.perception.sam2_tracker import Sam2Tracker
from evaluate.perception.tiny import (
    VIPE_STANDIN,
    tiny_sam2_config,
    write_tiny_weights,
    write_vipe_standin,
)
from evaluate.perception.vipe import VipePoses, VipeRunError
from tests.support import ROOT

BACKBONES = [Dinov2Encoder, ArcFaceEmbedder, Sam2Tracker, DepthAnything3, VipePoses, MusiqSpaq, LaionAesthetic]


def frames_rgb(n=3, h=48, w=64, seed=0) -> np.ndarray:
    return (np.random.RandomState(seed).rand(n, h, w, 3) * 255).astype(np.uint8)


# -- contract ---------------------------------------------------------------------------------------------------


def test_every_backbone_declares_the_agreed_contract():
    names = [b.name for b in BACKBONES]
    assert names == ["dinov2", "arcface", "sam2", "da3", "vipe", "musiq-spaq", "laion"]
    for b in BACKBONES:
        assert b.kind == "paper", b
        assert b.hf_repo is None or b.hf_repo.count("/") == 1, b
        assert isinstance(b.revision, str) and b.revision, b
        if b.hf_repo is not None:  # a Hub pin is a full commit hash
            assert len(b.revision) == 40 and int(b.revision, 16) >= 0, b
        assert b.files and all(isinstance(f, str) and not f.startswith("/") for f in b.files), b
        assert b.library and b.recipe and "\n" not in b.recipe, b
        assert callable(getattr(b, "load")), b


def test_importing_the_backbone_modules_does_not_import_torch():
    code = ("import sys; import evaluate.perception, evaluate.perception.dinov2, evaluate.perception.arcface, "
            "evaluate.perception.sam2_tracker, evaluate.perception.da3, evaluate.perception.vipe, "
            "evaluate.perception.iqa, evaluate.perception.tiny; heavy = [m for m in ('torch', 'transformers', 'insightface', 'pyiqa', "
            "'depth_anything_3', 'onnxruntime') if m in sys.modules]; print(heavy); assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("backbone", BACKBONES, ids=lambda b: b.name)
def test_an_empty_weights_folder_names_the_backbone_and_the_missing_file(tmp_path, backbone):
    with pytest.raises(FileNotFoundError) as e:
        backbone.load(tmp_path, "cpu")
    msg = str(e.value)
    assert repr(backbone.name) in msg and str(tmp_path / backbone.files[0]) in msg
    assert f"weights fetch {backbone.name}" in msg


# -- DINOv2 -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dinov2_dir(tmp_path_factory):
    return write_tiny_weights(tmp_path_factory.mktemp("weights"), ["dinov2"])["dinov2"]


def test_dinov2_loads_a_save_pretrained_folder_and_encodes(dinov2_dir):
    enc = Dinov2Encoder.load(dinov2_dir, "cpu")
    fr = frames_rgb()
    g = enc.encode(fr)
    assert g.shape == (3, 32) and g.dtype == np.float32
    # seeded expected slice (tiny 2-layer model, seed 0)
    np.testing.assert_allclose(g[0, :4], [4.9615168e-04, -4.6229604e-01, 8.4199226e-03, 1.2411035e+00], atol=1e-4)
    assert enc.input_size(48, 64) == (224, 294)  # short side 224, both multiples of 14
    assert enc.settings()["short_side"] == 224 and json.dumps(enc.settings())


def test_dinov2_masked_pooling_is_the_coverage_weighted_token_mean(dinov2_dir):
    enc = Dinov2Encoder.load(dinov2_dir, "cpu")
    fr = frames_rgb(2)
    _, tokens = enc.forward(fr)
    full = np.ones(fr.shape[:3], bool)
    np.testing.assert_allclose(enc.encode(fr, full), tokens.mean(axis=(1, 2)), atol=1e-5)
    empty = np.zeros_like(full)
    assert not enc.encode(fr, empty).any()
    # a mask covering only the left half pools only left-half patches: it differs from the right half's feature
    left, right = full.copy(), full.copy()
    left[:, :, 32:] = False
    right[:, :, :32] = False
    fl, fr_ = enc.encode(fr, left), enc.encode(fr, right)
    gw = tokens.shape[2]
    # patch column j spans [j, j+1) * 64 / gw pixels: its share of the 32-pixel left half
    cover = np.clip(32.0 / (64.0 / gw) - np.arange(gw), 0.0, 1.0)
    expected = np.einsum("w,nhwd->nd", cover, tokens) / (cover.sum() * tokens.shape[1])
    np.testing.assert_allclose(fl, expected, atol=1e-5)
    assert np.abs(fl - fr_).max() > 1e-3


def test_dinov2_corrupt_safetensors_and_wrong_shape_name_the_file(tmp_path, dinov2_dir):
    import shutil

    bad = tmp_path / "dinov2"
    shutil.copytree(dinov2_dir, bad)
    (bad / "model.safetensors").write_bytes(b"<html>404</html>")
    with pytest.raises(ValueError, match=r"'dinov2'.*model\.safetensors"):
        Dinov2Encoder.load(bad, "cpu")
    shutil.copy(dinov2_dir / "model.safetensors", bad / "model.safetensors")
    cfg = json.loads((bad / "config.json").read_text())
    cfg["hidden_size"], cfg["intermediate_size"] = 48, 96  # the weights no longer fit the config
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"'dinov2'.*model\.safetensors"):
        Dinov2Encoder.load(bad, "cpu")


# -- SAM2 -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sam2_dir(tmp_path_factory):
    return write_tiny_weights(tmp_path_factory.mktemp("weights"), ["sam2"])["sam2"]


@pytest.mark.slow
def test_sam2_tracks_from_a_box_or_a_mask_prompt(sam2_dir):
    tr = Sam2Tracker.load(sam2_dir, "cpu")
    fr = frames_rgb(4)
    box = np.zeros((48, 64), bool)
    box[10:30, 20:50] = True
    assert "input_boxes" in tr.prompt_for(box)
    masks, valid = tr.track(fr, box)
    assert masks.shape == (4, 48, 64) and masks.dtype == bool and valid.shape == (4,) and valid.dtype == bool
    # seeded expected slice: the tiny model's mask areas
    assert masks.sum(axis=(1, 2)).tolist() == EXPECTED_SAM2_AREAS
    blob = box.copy()
    blob[10:20, 20:30] = False
    assert "input_masks" in tr.prompt_for(blob)
    m2, _ = tr.track(fr, blob)
    assert m2.shape == (4, 48, 64)
    none_m, none_v = tr.track(fr, np.zeros((48, 64), bool))
    assert not none_m.any() and not none_v.any()


EXPECTED_SAM2_AREAS = [1268, 504, 486, 555]


@pytest.mark.slow
def test_sam2_reprompts_a_lost_track_only_at_revisit_frames(sam2_dir):
    import torch

    tr = Sam2Tracker.load(sam2_dir, "cpu")
    with torch.no_grad():  # the object-presence head now always says "absent": every frame is lost
        tr.model.mask_decoder.pred_obj_score_head.layers[-1].bias.fill_(-50.0)
    calls = []
    original = tr.processor.add_inputs_to_inference_session

    def spy(session, frame_idx, **kw):
        calls.append(frame_idx)
        return original(session, frame_idx=frame_idx, **kw)

    tr.processor.add_inputs_to_inference_session = spy
    box = np.zeros((48, 64), bool)
    box[10:30, 20:50] = True
    masks, valid = tr.track(frames_rgb(5), box, redetect_at=[2, 4])
    assert calls == [0, 2, 4]  # the frame-0 prompt, then a re-prompt at each lost revisit frame only
    assert not valid.any()  # a re-detection the model does not confirm is not an observation


@pytest.mark.slow
def test_sam2_a_confirmed_redetection_at_a_revisit_frame_is_an_observation(sam2_dir):
    tr = Sam2Tracker.load(sam2_dir, "cpu")
    real_model, seen = tr.model, []

    class LoseFrames2And3:  # the first pass over frames 2 and 3 reports the object absent
        config = real_model.config

        def __call__(self, inference_session, frame_idx):
            out = real_model(inference_session=inference_session, frame_idx=frame_idx)
            if frame_idx in (2, 3) and frame_idx not in seen:
                out.object_score_logits = out.object_score_logits.abs().neg() - 10.0
            seen.append(frame_idx)
            return out

    tr.model = LoseFrames2And3()
    box = np.zeros((48, 64), bool)
    box[10:30, 20:50] = True
    _, valid = tr.track(frames_rgb(5), box, redetect_at=[3])
    assert seen == [0, 1, 2, 3, 3, 4]  # frame 3 ran twice: lost, then re-prompted; frame 2 is no revisit frame
    assert valid.tolist() == [True, True, False, True, True]


def test_sam2_corrupt_weights_name_the_file(tmp_path):
    d = tmp_path / "sam2"
    d.mkdir()
    (d / "config.json").write_text(tiny_sam2_config().to_json_string())
    (d / "model.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(ValueError, match=r"'sam2'.*model\.safetensors"):
        Sam2Tracker.load(d, "cpu")


# -- Depth Anything 3 -------------------------------------------------------------------------------------------


def test_da3_extrinsics_become_opencv_c2w_relative_to_frame_0():
    from trajectories.conventions import rot_x, rot_y, se3, w2c_from_c2w

    # a camera path in some arbitrary world: frame 0 is not the identity there
    base = se3(rot_x(0.3) @ rot_y(-0.2), [1.0, -2.0, 0.5])
    rel = np.stack([se3(rot_y(np.radians(a)), [0.1 * i, 0.0, 0.05 * i]) for i, a in enumerate([0, 10, 25, -5])])
    world_c2w = base[None] @ rel
    w2c = w2c_from_c2w(world_c2w)
    got = c2w_from_da3_extrinsics(w2c[:, :3, :].astype(np.float32))  # DA3 hands (N, 3, 4) float32
    np.testing.assert_allclose(got, rel, atol=1e-5)
    assert np.array_equal(got[0], np.eye(4))


def test_da3_import_leaves_no_global_eval_resolver():
    code = ("from omegaconf import OmegaConf; from evaluate.perception.da3 import import_da3; import_da3(); "
            "assert not OmegaConf.has_resolver('eval'); "
            "OmegaConf.register_new_resolver('eval', lambda x: x)")  # our own app could still register one
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def da3_dir(tmp_path_factory):
    return write_tiny_weights(tmp_path_factory.mktemp("weights"), ["da3"])["da3"]


@pytest.mark.slow
def test_da3_loads_the_hub_layout_and_returns_depth_and_anchored_poses(da3_dir):
    m = DepthAnything3.load(da3_dir, "cpu", process_res=56)
    fr = frames_rgb(4)
    pred = m.predict(fr)
    assert pred["depth"].shape == (4, 42, 56) and pred["w2c"].shape == (4, 4, 4)
    d = m.depth(fr, [0, 4, 8, 12])
    assert d.shape == (4, 48, 64) and d.dtype == np.float32 and np.isfinite(d).all()
    pe = m.estimate(fr, [0, 4, 8, 12], np.eye(3), "rotation")
    assert pe.c2w.shape == (4, 4, 4) and np.array_equal(pe.c2w[0], np.eye(4)) and pe.valid.all()
    R = pe.c2w[:, :3, :3]
    np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.tile(np.eye(3), (4, 1, 1)), atol=1e-6)
    assert pe.info["ref_view_strategy"] == "first" and m.settings()["ref_view_strategy"] == "first"


@pytest.mark.slow
def test_da3_wrong_preset_or_corrupt_file_names_the_file(tmp_path, da3_dir):
    import shutil

    d = tmp_path / "da3"
    shutil.copytree(da3_dir, d)
    (d / "config.json").write_text(json.dumps({"model_name": "da3-base"}))  # weights are da3-small
    with pytest.raises(ValueError, match=r"'da3'.*model\.safetensors"):
        DepthAnything3.load(d, "cpu")
    (d / "config.json").write_text(json.dumps({"model_name": "da3-nonexistent"}))
    with pytest.raises(ValueError, match=r"'da3'.*config\.json"):
        DepthAnything3.load(d, "cpu")
    (d / "config.json").write_text(json.dumps({"model_name": "da3-small"}))
    (d / "model.safetensors").write_bytes(b"truncated")
    with pytest.raises(ValueError, match=r"'da3'.*model\.safetensors"):
        DepthAnything3.load(d, "cpu")


# -- ArcFace ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def arcface_dir(tmp_path_factory):
    return write_tiny_weights(tmp_path_factory.mktemp("weights"), ["arcface"])["arcface"]


def test_arcface_detects_aligns_and_embeds_inside_the_target_mask(arcface_dir):
    emb = ArcFaceEmbedder.load(arcface_dir, "cpu", det_size=64)
    assert emb.kind == "paper" and emb.name == "arcface" and json.dumps(emb.settings())
    fr = frames_rgb(3)
    masks = np.ones((3, 48, 64), bool)
    masks[2] = False  # no target in frame 2: its faces are not the target's
    r = emb.embed(fr, masks)
    assert r.valid.tolist() == [True, True, False]
    assert r.embeddings.shape == (3, 16) and r.embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(r.embeddings[:2], axis=1), 1.0, atol=1e-5)
    assert not r.embeddings[2].any() and np.isnan(r.boxes[2]).all()
    cx, cy = (r.boxes[0, 0] + r.boxes[0, 2]) / 2, (r.boxes[0, 1] + r.boxes[0, 3]) / 2
    assert masks[0, int(np.clip(cy, 0, 47)), int(np.clip(cx, 0, 63))]
    # with the target in another region, the face chosen is one whose centre lies in that region
    region = np.zeros_like(masks)
    region[:, :16, :20] = True
    rr = emb.embed(fr, region)
    for i in np.nonzero(rr.valid)[0]:
        x, y = (rr.boxes[i, 0] + rr.boxes[i, 2]) / 2, (rr.boxes[i, 1] + rr.boxes[i, 3]) / 2
        assert x < 20 and y < 16
    assert not np.allclose(rr.boxes[0], r.boxes[0])
    np.testing.assert_allclose(r.embeddings[0, :3], EXPECTED_ARCFACE, atol=1e-4)


EXPECTED_ARCFACE = [-0.26890793, 0.35364935, 0.22252932]  # seeded tiny recogniser


def test_arcface_haar_diagnostic_finds_a_real_face_and_is_labelled(arcface_dir):
    from skimage import data

    emb = ArcFaceEmbedder.load(arcface_dir, "cpu", detector="haar")
    assert (emb.name, emb.kind) == ("arcface-haar", "diagnostic")
    img = data.astronaut()  # 512x512 RGB with one frontal face
    r = emb.embed(img[None], np.ones((1, 512, 512), bool))
    assert r.valid.tolist() == [True] and r.info["alignment"] == "box-crop-112"
    x0, y0, x1, y1 = r.boxes[0]
    assert 150 < (x0 + x1) / 2 < 300 and 50 < (y0 + y1) / 2 < 200  # the astronaut's face


def test_arcface_corrupt_or_wrong_contract_onnx_names_the_file(tmp_path, arcface_dir):
    import shutil

    d = tmp_path / "arcface"
    shutil.copytree(arcface_dir, d)
    (d / "w600k_r50.onnx").write_bytes(b"not an onnx graph")
    with pytest.raises(ValueError, match=r"'arcface'.*w600k_r50\.onnx"):
        ArcFaceEmbedder.load(d, "cpu")
    shutil.copy(arcface_dir / "det_10g.onnx", d / "w600k_r50.onnx")  # a detector where the recogniser belongs
    with pytest.raises(ValueError, match=r"'arcface'.*w600k_r50\.onnx"):
        ArcFaceEmbedder.load(d, "cpu")


# -- MUSIQ-SPAQ and LAION ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def iqa_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    write_tiny_weights(root, ["musiq-spaq", "laion"])
    return root


@pytest.mark.slow
def test_musiq_spaq_scores_frames_with_the_vbench_resize(iqa_root):
    m = MusiqSpaq.load(iqa_root / "musiq-spaq", "cpu")
    s = m.score(frames_rgb(2))
    assert s.shape == (2,) and s.dtype == np.float64 and np.isfinite(s).all()
    np.testing.assert_allclose(s, [-0.00681869, -0.007038], atol=1e-5)
    big = np.zeros((1, 600, 1000, 3), np.uint8)
    big[0, ::2, ::3] = 255
    xb = m.preprocess(big)
    assert tuple(xb.shape) == (1, 3, 307, 512)  # longer side 512, no crop
    np.testing.assert_allclose(xb.numpy() * 255, np.round(xb.numpy() * 255), atol=1e-4)  # resized as uint8
    assert tuple(m.preprocess(frames_rgb(1)).shape) == (1, 3, 48, 64)  # small frames keep their size


def test_laion_builds_from_local_clip_and_scores_frames(iqa_root):
    scorer = LaionAesthetic.load(iqa_root / "laion", "cpu")
    assert scorer.predictor == "laion-v2-mlp" and json.dumps(scorer.settings())
    s = scorer.score(frames_rgb(2))
    assert s.shape == (2,) and np.isfinite(s).all()
    np.testing.assert_allclose(s, [-0.01268430, -0.01270081], atol=1e-5)
    x = scorer.preprocess(frames_rgb(1, 48, 96))
    assert tuple(x.shape) == (1, 3, 224, 224)  # short side 224, centre crop
    # VBench resizes the uint8 frames: de-normalised values are whole multiples of 1/255
    from evaluate.perception.iqa import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

    v = (x[0].numpy() * np.array(OPENAI_CLIP_STD)[:, None, None] + np.array(OPENAI_CLIP_MEAN)[:, None, None]) * 255
    np.testing.assert_allclose(v, np.round(v), atol=1e-3)


def test_iqa_wrong_head_shape_names_the_file(tmp_path):
    import torch
    from pyiqa.archs.laion_aes_arch import MLP

    d = tmp_path / "musiq-spaq"
    d.mkdir()
    torch.save({"head.weight": torch.zeros(10, 384)}, d / "musiq_spaq_ckpt-358bb6af.pth")
    with pytest.raises(ValueError, match=r"'musiq-spaq'.*musiq_spaq_ckpt-358bb6af\.pth"):
        MusiqSpaq.load(d, "cpu")
    (d / "musiq_spaq_ckpt-358bb6af.pth").write_bytes(b"<html>")
    with pytest.raises(ValueError, match=r"'musiq-spaq'.*musiq_spaq_ckpt-358bb6af\.pth"):
        MusiqSpaq.load(d, "cpu")
    del MLP


def test_laion_mlp_of_the_wrong_width_names_the_file(tmp_path, iqa_root):
    import shutil

    import torch
    from pyiqa.archs.laion_aes_arch import MLP

    d = tmp_path / "laion"
    shutil.copytree(iqa_root / "laion", d)
    torch.save(MLP(768).state_dict(), d / "sac+logos+ava1-l14-linearMSE.pth")  # ViT-L/14 width, tiny CLIP is 16
    with pytest.raises(ValueError, match=r"'laion'.*sac\+logos\+ava1-l14-linearMSE\.pth"):
        LaionAesthetic.load(d, "cpu")


# -- ViPE -------------------------------------------------------------------------------------------------------


def _vipe_dir(tmp_path: Path, script: str = VIPE_STANDIN) -> Path:
    write_vipe_standin(tmp_path / "vipe", script, env={"VIPE_STANDIN_SKIP": "2"})
    return tmp_path / "vipe"


def test_vipe_runs_as_a_subprocess_and_returns_poses_in_our_convention(tmp_path):
    from trajectories.conventions import relative_to_first, rot_y, se3

    v = VipePoses.load(_vipe_dir(tmp_path), "cpu")
    assert v.settings()["pipeline"] == "default"
    pe = v.estimate(frames_rgb(4), [0, 4, 8, 12], np.eye(3), "rotation")
    a = np.radians(10.0) * np.arange(4)
    expected = relative_to_first(np.stack([se3(rot_y(x), [5.0, 1.0, -2.0]) for x in a]))
    assert pe.valid.tolist() == [True, True, False, True]
    np.testing.assert_allclose(pe.c2w[[0, 1, 3]], expected[[0, 1, 3]], atol=1e-9)
    np.testing.assert_allclose(pe.c2w[2], pe.c2w[1])  # a frame without a pose keeps the previous one
    assert pe.info["frames_without_pose"] == [8]


def test_vipe_readiness_and_output_contract_errors(tmp_path):
    d = tmp_path / "missing"
    d.mkdir()
    (d / "vipe.json").write_text(json.dumps({"command": ["/nonexistent/envs/vipe/bin/vipe"]}))
    with pytest.raises(FileNotFoundError, match=r"'vipe'.*/nonexistent/envs/vipe/bin/vipe"):
        VipePoses.load(d, "cpu")
    (d / "vipe.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"'vipe'.*vipe\.json"):
        VipePoses.load(d, "cpu")
    broken = VipePoses.load(_vipe_dir(tmp_path, "import sys; sys.exit(3)\n"), "cpu")
    with pytest.raises(VipeRunError, match="exited with 3"):
        broken.estimate(frames_rgb(2), [0, 4], np.eye(3), "rotation")
