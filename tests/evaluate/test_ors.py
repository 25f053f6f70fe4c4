"""MemoBench's ORS (evaluate/ors.py) with a scripted detector: which frames are scored, which boxes count, which
confidence a frame keeps, and how the stage entry averages targets. No weights: the detector is a stand-in whose
answers are set per frame and query, so every rule is checked on inputs that tell it apart."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluate import ors
from evaluate.ors import best_valid_confidence, object_reappearance_score, ors_entries, ors_for_item
from tests.support import stored

PHASES = {"V": (0, 8), "D1": (8, 16), "R1": (16, 24), "D2": (24, 32), "R2": (32, 40), "H": (40, 48)}


class ScriptedDetector:
    """``detect(frames, queries)``: frame f (filled with the value f) answers query q with ``script(f, q)`` (a list
    of (score, box)); it records the frame values it was asked about."""

    def __init__(self, script):
        self.script, self.calls = script, []

    def detect(self, frames, queries):
        vals = [int(f[0, 0, 0]) for f in frames]
        self.calls.append(vals)
        out = []
        for v in vals:
            per = []
            for q in queries:
                dets = self.script(v, q)
                per.append((np.array([s for s, _ in dets], float).reshape(-1),
                            np.array([b for _, b in dets], float).reshape(-1, 4)))
            out.append(per)
        return out


def _frames(indices, h=20, w=50):
    return np.stack([np.full((h, w, 3), t, np.uint8) for t in indices])


# -- the formula ------------------------------------------------------------------------------------------------------

def test_no_revisit_frame_is_nan_and_no_detection_is_zero():
    empty = object_reappearance_score([])
    assert (empty["n_R"], empty["n_d"]) == (0, 0)
    assert all(math.isnan(empty[k]) for k in ("detection_rate", "mean_confidence", "ors"))
    one = object_reappearance_score([0.4])  # one frame is enough to score
    assert one == {"n_R": 1, "n_d": 1, "detection_rate": 1.0, "mean_confidence": 0.4, "ors": 0.4}
    none = object_reappearance_score([None, None, None])
    assert none == {"n_R": 3, "n_d": 0, "detection_rate": 0.0, "mean_confidence": 0.0, "ors": 0.0}


# -- the area filter and the best confidence ------------------------------------------------------------------------

def test_the_area_is_width_times_height_over_the_image():
    """A 20 x 40 px box (x0=10, y0=20, x1=30, y1=60) on a 100 x 200 image covers 800 / 20000 = 0.04: inside a range
    tight around 0.04; any other pairing of the coordinates (x1 - y0, y1 - x0, x1 + x0, ...) lands outside."""
    box = [10, 20, 30, 60]
    assert best_valid_confidence([0.7], [box], (100, 200), (0.039, 0.041)) == 0.7
    assert best_valid_confidence([0.7], [box], (200, 100), (0.039, 0.041)) == 0.7  # h * w either way
    assert best_valid_confidence([0.7], [[10, 20, 30, 61]], (100, 200), (0.039, 0.041)) == 0.7  # 820: 0.041
    assert best_valid_confidence([0.7], [[10, 20, 30, 62]], (100, 200), (0.039, 0.041)) is None  # 840: 0.042


def test_an_inverted_or_sub_pixel_box_has_no_area():
    """Corners in the wrong order give a negative side, clamped to 0 (two negative sides would multiply to a
    positive area); a side of 0.1 px stays 0.1 px (not rounded up to a pixel)."""
    hw = (100, 100)
    assert best_valid_confidence([0.9], [[30, 30, 10, 10]], hw, (0.0, 1.0)) == 0.9  # area 0 is inside [0, 1]
    assert best_valid_confidence([0.9], [[30, 30, 10, 10]], hw, (1e-6, 1.0)) is None
    assert best_valid_confidence([0.9], [[30, 10, 10, 40]], hw, (1e-6, 1.0)) is None  # one side inverted
    assert best_valid_confidence([0.9], [[10, 30, 40, 10]], hw, (1e-6, 1.0)) is None
    # 0.1 x 10 px = 1e-4 of the image: below the default 5e-4 (1 x 10 px would be 1e-3, valid)
    assert best_valid_confidence([0.9], [[0, 0, 0.1, 10]], hw) is None
    assert best_valid_confidence([0.9], [[0, 0, 10, 0.1]], hw) is None
    assert best_valid_confidence([0.9], [[0, 0, 1, 10]], hw) == 0.9


def test_the_area_range_is_closed_at_both_ends():
    hw = (100, 100)
    assert best_valid_confidence([0.5], [[0, 0, 5, 10]], hw, (0.005, 0.5)) == 0.5  # exactly the minimum
    assert best_valid_confidence([0.5], [[0, 0, 50, 100]], hw, (0.005, 0.5)) == 0.5  # exactly the maximum
    assert best_valid_confidence([0.5], [[0, 0, 4, 10]], hw, (0.005, 0.5)) is None
    assert best_valid_confidence([0.5], [[0, 0, 51, 100]], hw, (0.005, 0.5)) is None


def test_the_best_valid_score_wins_in_any_order():
    hw = (100, 100)
    ok, huge = [0, 0, 10, 10], [0, 0, 100, 100]
    assert best_valid_confidence([0.3, 0.8, 0.5], [ok, ok, ok], hw) == 0.8  # neither the first nor the last
    assert best_valid_confidence([0.8, 0.3], [ok, ok], hw) == 0.8
    assert best_valid_confidence([0.95, 0.2], [huge, ok], hw) == 0.2  # the higher score's box is not valid
    assert best_valid_confidence([], [], hw) is None


# -- one item ----------------------------------------------------------------------------------------------------------

def test_only_frames_of_the_revisit_phases_are_scored_half_open():
    """R1 = [16, 24) and R2 = [32, 40): 16, 23, 32 and 39 count; 15, 24 (D2's first frame), 31 and 40 do not. The
    detector sees the kept frames only; each target keeps its own best valid detection per frame."""
    idx = [0, 15, 16, 23, 24, 31, 32, 39, 40]
    det = ScriptedDetector(lambda t, q: [(t / 100, [0, 0, 10, 4])] if q == "cat" else
                           ([(0.9, [0, 0, 10, 4])] if t == 16 else []))
    res = ors_for_item(_frames(idx), idx, PHASES, {"c": "cat", "r": "rug"}, det)
    assert det.calls == [[16, 23, 32, 39]]
    assert res["c"]["frames"] == [16, 23, 32, 39] and res["c"]["n_R"] == 4 and res["c"]["n_d"] == 4
    assert res["c"]["ors"] == pytest.approx((16 + 23 + 32 + 39) / 100 / 4)
    assert res["r"]["n_d"] == 1 and res["r"]["ors"] == pytest.approx(0.9 / 4)
    assert list(res) == ["c", "r"]


def test_the_image_size_of_the_area_filter_is_the_frames_height_and_width():
    """Frames of 20 x 50 px (1000 px): a 10 x 5 px box is 5 % of them, inside (0.049, 0.051); the other shapes of
    the array (frames, channels) would give another fraction."""
    det = ScriptedDetector(lambda t, q: [(0.6, [0, 0, 10, 5])])
    res = ors_for_item(_frames([16]), [16], PHASES, {"c": "cat"}, det, (0.049, 0.051))
    assert res["c"]["mean_confidence"] == 0.6
    res = ors_for_item(_frames([16], h=20, w=60), [16], PHASES, {"c": "cat"}, det, (0.049, 0.051))
    assert res["c"]["n_d"] == 0


def test_no_revisit_frame_asks_the_detector_nothing():
    det = ScriptedDetector(lambda t, q: [(1.0, [0, 0, 10, 4])])
    res = ors_for_item(_frames([0, 8, 40]), [0, 8, 40], PHASES, {"c": "cat", "r": "rug"}, det)
    assert det.calls == [] and set(res) == {"c", "r"} and all(r["n_R"] == 0 for r in res.values())
    assert math.isnan(res["c"]["ors"])


# -- the stage entry ----------------------------------------------------------------------------------------------------

@pytest.fixture
def cached_detector(monkeypatch):
    """A scripted detector in the loaded-detector cache under the default settings' key (nothing is loaded)."""
    det = ScriptedDetector(lambda t, q: [({"cat": 0.8, "rug": 0.2}[q], [0, 0, 10, 4])])
    monkeypatch.setattr(ors, "_DETECTORS", {(None, "owlv2-base-patch16-ensemble", 0.1): det})
    return det


def test_the_entry_is_the_mean_over_targets_with_the_default_settings(cached_detector):
    e = stored(ors_entries(_frames([16, 20]), [16, 20], PHASES, {"c": "cat", "r": "rug"}))  # settings None
    (key,) = e
    assert key == "object.ors[owlv2-base-patch16-ensemble]" and e[key]["status"] == "computed"
    assert e[key]["value"] == pytest.approx(0.5)  # (0.8 + 0.2) / 2, not the best target
    assert e[key]["per_target"]["c"]["ors"] == pytest.approx(0.8)
    assert e[key]["settings"]["area_range"] == list(ors.ORS_AREA_RANGE) and cached_detector.calls == [[16, 20]]
    same = stored(ors_entries(_frames([16, 20]), [16, 20], PHASES, {"c": "cat", "r": "rug"}, {"threshold": 0.1}))
    assert same == e


def test_settings_choose_the_detector_and_its_area_range(cached_detector):
    e = stored(ors_entries(_frames([16]), [16], PHASES, {"c": "cat"}, {"detector": "yolo"}))
    (entry,) = e.values()
    assert entry["status"] == "not_computed" and "only owlv2" in entry["reason"]
    e = stored(ors_entries(_frames([16]), [16], PHASES, {"c": "cat"}, {"area_range": [0.5, 1.0]}))
    (entry,) = e.values()
    assert entry["value"] == 0.0  # the 40 px box is below the configured range: no valid detection


def test_no_revisit_frame_is_not_computed_with_the_reason(cached_detector):
    e = stored(ors_entries(_frames([0, 8]), [0, 8], PHASES, {"c": "cat"}))
    (entry,) = e.values()
    assert entry["status"] == "not_computed" and entry["reason"] == "no revisit-phase frames to score"
