"""The validity section (evaluate/validity.py) rule by rule: each estimator judged against the reference model's
own path and depth, unavailable and failing estimators recorded and never raised, the return frames' true errors
(in position on a translating path), depth rank errors, and the table over a run's items. The item and its
perception are stand-ins holding what item_validity reads; the numbers are the camera module's own equations."""

from __future__ import annotations

import types

import numpy as np
import pytest

from evaluate import camera as cam
from evaluate.perception.base import BackboneUnavailable, PoseEstimate
from evaluate.results import ItemResult
from evaluate.validity import item_validity, validity_table
from trajectories.conventions import rot_y, se3

T = 5


def _truth(translate: bool) -> np.ndarray:
    c2w = np.stack([se3(rot_y(np.deg2rad(a))) for a in (0.0, 10.0, 20.0, 3.0, 30.0)])
    if translate:  # away from the origin, an extent under 1 (0.4 along x)
        c2w[:, :3, 3] = [[1.0, 0, 0], [1.1, 0, 0], [1.2, 0, 0], [1.02, 0, 0], [1.4, 0, 0]]
    return c2w


class Perception:
    """What item_validity asks of ItemPerception: poses, kinds, return frames, depth (by name)."""

    def __init__(self, poses: dict, depth: dict, returns):
        self._poses, self._depth, self._returns = poses, depth, returns
        self.depth_calls: list = []

    def poses(self, name):
        v = self._poses[name]
        if isinstance(v, BaseException):
            raise v
        return f"label-{name}", PoseEstimate(v, np.ones(T, bool))

    def kind(self, name):
        return "estimator"

    def return_frames(self, sources):
        if isinstance(self._returns, BaseException):
            raise self._returns
        return self._returns

    def depth(self, name, frames):
        self.depth_calls.append((name, list(frames)))
        v = self._depth[name]
        if isinstance(v, BaseException):
            raise v
        return f"label-{name}", v


def _item(translate: bool = False, oracle: bool = True):
    truth = _truth(translate)
    return types.SimpleNamespace(oracle=types.SimpleNamespace(c2w=truth) if oracle else None, translates=translate)


def _ecfg(poses=("est",), depth=()):
    return types.SimpleNamespace(pose_estimators=list(poses), return_frame_poses=["est"], depth=list(depth))


RETURNS = {"source": "est", "label": "label-est", "frames": [3], "qualification": [{"return_error_deg": 2.5}]}


def _noisy(c2w: np.ndarray) -> np.ndarray:
    out = c2w.copy()
    out[2, :3, :3] = rot_y(np.deg2rad(1.0)) @ out[2, :3, :3]
    out[:, :3, 3] *= 2.0
    return out


# -- item_validity ----------------------------------------------------------------------------------------------


def test_an_item_without_ground_truth_has_no_section():
    assert item_validity(_item(oracle=False), Perception({}, {}, RETURNS), _ecfg()) == {}


def test_a_rotation_items_pose_row_is_rpe_rot_and_the_return_frames_true_error():
    truth = _truth(False)
    est = _noisy(truth)
    v = item_validity(_item(), Perception({"est": est}, {}, RETURNS), _ecfg())
    assert v["truth"] == "oracle (reference model path and room depth)" and v["not_available"] == {}
    assert v["poses"] == {"label-est": {"estimator": "label-est", "kind": "estimator",
                                        "rpe_rot": cam.rpe_rotation(truth, est)}}
    assert v["return_frames"] == {"pose_source": "label-est", "frames": [3], "true_error_deg": pytest.approx([3.0]),
                                  "estimated_error_deg": [2.5]}
    assert v["depth"] == {}


def test_a_translating_item_adds_rpe_trans_and_the_return_frames_position_error():
    truth = _truth(True)
    est = _noisy(truth)
    v = item_validity(_item(True), Perception({"est": est}, {}, RETURNS), _ecfg())
    assert v["poses"]["label-est"]["rpe_trans"] == cam.rpe_translation(truth, {"label-est": est})
    assert v["return_frames"]["true_position_error"] == pytest.approx([0.02 / 0.4])  # from frame 0, per extent


def test_unavailable_and_failing_estimators_are_recorded_and_the_rest_goes_on():
    truth = _truth(False)
    perc = Perception({"gone": BackboneUnavailable("no weights"), "bad": ValueError("nan poses"), "est": truth},
                      {}, RETURNS)
    v = item_validity(_item(), perc, _ecfg(poses=("gone", "bad", "est")))
    assert v["not_available"] == {"gone": "no weights"}
    assert v["poses"]["bad"] == {"status": "failed", "reason": "ValueError: nan poses"}
    assert v["poses"]["label-est"]["rpe_rot"] == pytest.approx(0.0)


def test_no_return_frame_source_gives_no_return_frames_and_no_depth():
    for returns in ({"source": None}, RuntimeError("boom")):
        perc = Perception({"est": _truth(False)}, {"d": np.ones((2, 4, 4))}, returns)
        v = item_validity(_item(), perc, _ecfg(depth=("d",)))
        assert "return_frames" not in v and v["depth"] == {} and perc.depth_calls == []


def _swapped(d: np.ndarray) -> np.ndarray:
    """``d`` with the second frame's odd pixels (odd row, odd column) in reverse order: every other pixel agrees."""
    out = d.copy()
    odd = out[1, 1::2, 1::2]
    out[1, 1::2, 1::2] = odd.reshape(-1)[::-1].reshape(odd.shape)
    return out


def test_depth_is_ranked_against_the_true_depth_at_frame_0_and_the_return_frames():
    ramp = np.arange(16, dtype=np.float64).reshape(4, 4)
    true_d = np.stack([ramp, ramp])
    perc = Perception({"est": _truth(False)}, {"oracle": true_d, "same": true_d * 3.0, "flipped": 100.0 - true_d,
                                               "partial": _swapped(true_d),
                                               "gone": BackboneUnavailable("no da3"), "bad": OSError("disk")},
                      RETURNS)
    v = item_validity(_item(), perc, _ecfg(depth=("same", "flipped", "partial", "gone", "bad")))
    assert v["depth"]["label-same"] == {"frames": [0, 3], "rank_error": pytest.approx(0.0),
                                       "spearman": pytest.approx([1.0, 1.0])}
    assert v["depth"]["label-flipped"]["rank_error"] == pytest.approx(2.0)
    rho = v["depth"]["label-partial"]["spearman"]  # every pixel counts, and the mean over the frames
    assert rho[0] == pytest.approx(1.0) and rho[1] < 0.9
    assert v["depth"]["label-partial"]["rank_error"] == pytest.approx(1 - (1.0 + rho[1]) / 2)
    assert v["depth"]["bad"] == {"status": "failed", "reason": "OSError: disk"}
    assert v["not_available"] == {"gone": "no da3"}
    assert [c for c in perc.depth_calls if c[0] == "oracle"] == [("oracle", [0, 3])]  # the truth rendered once


def test_the_true_depth_is_not_rendered_when_no_estimator_is_judged():
    perc = Perception({"est": _truth(False)}, {"gone": BackboneUnavailable("x")}, RETURNS)
    item_validity(_item(), perc, _ecfg(depth=("gone",)))
    assert perc.depth_calls == [("gone", [0, 3])]


# -- validity_table ---------------------------------------------------------------------------------------------


def _result(model, validity) -> ItemResult:
    return ItemResult(item={"model": model} if model else {}, extra={"validity": validity})


def test_the_table_has_one_row_per_model_estimator_and_quantity():
    a = {"poses": {"classical": {"rpe_rot": 0.1, "rpe_trans": 0.4}, "nan-est": {"rpe_rot": float("nan")},
                   "none-est": {"rpe_rot": None}},
         "return_frames": {"pose_source": "classical", "true_error_deg": [1.0, 3.0], "true_position_error": [0.2]},
         "depth": {"da3": {"rank_error": 0.05}, "failed": {"status": "failed"}}}
    b = {"poses": {"classical": {"rpe_rot": 0.3}}, "return_frames": {"pose_source": "classical",
                                                                     "true_error_deg": [2.0]}}
    rows, md = validity_table([_result("ref", a), _result("ref", b), _result(None, {})])
    got = [(r["model"], r["what"], r["estimator"], r["quantity"], round(r["mean"], 6), round(r["max"], 6), r["n"])
           for r in rows]
    assert got == [("ref", "depth", "da3", "rank error (1 - Spearman)", 0.05, 0.05, 1),
                   ("ref", "pose", "classical", "rpe_rot", 0.2, 0.3, 2),
                   ("ref", "pose", "classical", "rpe_trans", 0.4, 0.4, 1),
                   ("ref", "return frame", "classical", "true error [deg]", 2.0, 3.0, 3),
                   ("ref", "return frame", "classical", "true position error [/ extent]", 0.2, 0.2, 1)]
    assert "| ref | pose | classical | rpe_rot | 0.2000 | 0.3000 | 2 |" in md.splitlines()
    assert md.startswith("# Validity: estimators against ground truth (reference model)\n\n")
    assert "| model | what | estimator | quantity | mean | max | n |" in md and md.endswith("\n")


def test_a_run_without_ground_truth_says_so():
    rows, md = validity_table([_result("upstream", {})])
    assert rows == [] and md.endswith("(no item of this run has ground truth: validity needs the built-in "
                                      "reference model)\n")
    assert "| model |" not in md
