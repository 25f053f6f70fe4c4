"""MBench's trigger-conditioned M-score, MemoBench's ORS formula, and the OWLv2 detector behind it (a tiny
random-weight OWLv2 built from transformers' real classes and saved in its real on-disk format)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.dynamic import dynamic_summary, trigger_conditioned
from evaluate.ors import best_valid_confidence, object_reappearance_score, ors_for_item
from evaluate.perception.base import BackboneUnavailable
from tests.support import stored


def test_trigger_conditioned_is_the_harmonic_mean_of_coverage_and_conditional_score():
    tc = trigger_conditioned([1.0, 0.5, 0.9], [True, True, False])
    assert tc["C_trig"] == pytest.approx(2 / 3) and tc["S_rel"] == pytest.approx(0.75)
    assert tc["M"] == pytest.approx(2 * (2 / 3) * 0.75 / (2 / 3 + 0.75))
    assert trigger_conditioned([0.7], [False])["M"] == 0.0  # avoiding the challenge scores nothing
    # beside the gated score: same coverage, a model that never triggers is penalised by both
    s = dynamic_summary([{"started": True, "overall": 1.0}, {"started": False, "overall": 0.0}])
    assert s["S_gated"] == 0.5 and s["M_score"] == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    with pytest.raises(ValueError, match="2 scores for 1"):
        trigger_conditioned([1, 1], [True])


def test_ors_is_detection_rate_times_mean_confidence():
    r = object_reappearance_score([0.9, None, 0.5, None])
    assert r["detection_rate"] == 0.5 and r["mean_confidence"] == pytest.approx(0.7) and r["ors"] == pytest.approx(0.35)
    assert object_reappearance_score([None, None])["ors"] == 0.0
    # MemoBench's area filter: boxes covering < 0.05 % or > 50 % of the image are not valid detections
    hw = (100, 100)
    assert best_valid_confidence([0.9, 0.6], [[0, 0, 100, 80], [10, 10, 30, 30]], hw) == 0.6
    assert best_valid_confidence([0.9], [[0, 0, 0.5, 0.5]], hw) is None


VOCAB_CHARS = "abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def tiny_owl(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from transformers import (
        CLIPTokenizer,
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessor,
        Owlv2Processor,
    )

    vocab = {"!": 0, "<|startoftext|>": 1, "<|endoftext|>": 2}  # OWLv2 masks queries whose first id is 0
    for c in VOCAB_CHARS:
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    tok = CLIPTokenizer(vocab=vocab, merges=[])
    cfg = Owlv2Config(
        text_config={"vocab_size": len(vocab), "hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4,
                     "num_hidden_layers": 2, "max_position_embeddings": 16,
                     "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2},
        vision_config={"hidden_size": 32, "intermediate_size": 37, "num_attention_heads": 4, "num_hidden_layers": 2,
                       "image_size": 32, "patch_size": 8},
        projection_dim=32)
    torch.manual_seed(0)
    model = Owlv2ForObjectDetection(cfg).eval()
    d = tmp_path_factory.mktemp("weights") / "owlv2-tiny"
    model.save_pretrained(d)
    Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok).save_pretrained(d)
    return d


@pytest.mark.slow  # torch + transformers import and a tiny forward pass
def test_owl_detector_loads_a_save_pretrained_folder_and_feeds_ors(tiny_owl):
    from evaluate.perception.owl_detector import OwlDetector

    det = OwlDetector.from_settings(str(tiny_owl.parent), name=tiny_owl.name, threshold=0.0)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, size=(5, 24, 40, 3), dtype=np.uint8)
    out = det.detect(frames, ["cat", "rug"])
    assert len(out) == 5 and all(len(f) == 2 for f in out)
    scores, boxes = out[0][0]
    assert scores.ndim == 1 and boxes.shape == (len(scores), 4) and len(scores) > 0
    assert np.all((scores >= 0) & (scores <= 1)) and np.all(boxes[:, 2] >= boxes[:, 0])
    again = det.detect(frames, ["cat", "rug"])
    np.testing.assert_allclose(again[0][0][0], scores)  # deterministic
    phases = {"V": (0, 8), "D1": (8, 16), "R1": (16, 24), "H": (24, 32)}
    res = ors_for_item(frames, [0, 8, 16, 20, 31], phases, {"cat": "cat"}, det)
    best = [best_valid_confidence(*out[i][0], (24, 40)) for i in (2, 3)]  # the two R1 frames
    assert res["cat"]["frames"] == [16, 20] and res["cat"]["n_R"] == 2
    assert res["cat"]["ors"] == pytest.approx(sum(b for b in best if b is not None) / 2)


def test_owl_detector_fails_offline_with_instructions(tmp_path):
    from evaluate.perception.owl_detector import OwlDetector

    with pytest.raises(BackboneUnavailable, match="huggingface-cli download google/owlv2-base-patch16-ensemble"):
        OwlDetector.from_settings(str(tmp_path))
    with pytest.raises(BackboneUnavailable, match="set evaluate.ors.weights_root"):
        OwlDetector.from_settings(None)


@pytest.mark.slow
def test_ors_entries_for_the_stage(tiny_owl):
    from evaluate.ors import ors_entries
    from evaluate.stage import EvalConfig

    rng = np.random.default_rng(1)
    frames = rng.integers(0, 255, size=(3, 24, 40, 3), dtype=np.uint8)
    phases = {"V": (0, 8), "D1": (8, 16), "R1": (16, 24), "H": (24, 32)}
    missing = stored(ors_entries(frames, [16, 20, 23], phases, {"cat": "cat"}, {}))
    assert missing["object.ors[owlv2-base-patch16-ensemble]"]["status"] == "not_computed"
    assert "weights_root" in missing["object.ors[owlv2-base-patch16-ensemble]"]["reason"]
    cfg = {"weights_root": str(tiny_owl.parent), "name": tiny_owl.name, "threshold": 0.0, "area_range": [0.0, 1.0]}
    e = stored(ors_entries(frames, [16, 20, 23], phases, {"cat": "cat", "rug": "rug"}, cfg))[f"object.ors[{tiny_owl.name}]"]
    assert e["status"] == "computed"
    assert e["value"] == pytest.approx((e["per_target"]["cat"]["ors"] + e["per_target"]["rug"]["ors"]) / 2)
    assert e["per_target"]["cat"]["detection_rate"] == 1.0  # threshold 0 and any area: every frame detects
    with pytest.raises(ValueError, match="evaluate.ors.weigths_root"):
        EvalConfig.from_dict({"ors": {"weigths_root": "/x"}})
