"""Perceive once, score many (evaluate/perceive.py), rule by rule in process: the cache key and its file, which
frames a backbone is handed, oracles bound to the item's ground truth, the on-disk cache on and off, non-finite
poses, and the frame closest to a reference. The backbones are tiny classes registered for the test that record
what they are given; the item is a stand-in holding what ItemPerception reads of one."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from evaluate import backbones as bbs
from evaluate import perceive as pc
from evaluate.perception.base import BackboneUnavailable, PoseEstimate
from evaluate.weights_pack import PACK_ENV

MODULE = "tiny_perceive_rules"
T, H, W = 6, 4, 8


class Encoder:
    """Records the frames it is handed; features: each frame's mean."""

    calls: list = []

    def encode(self, frames, masks=None):
        Encoder.calls.append(frames)
        return np.asarray([[float(np.mean(f))] for f in frames])


class ViewEncoder(Encoder):
    frame_views = True

    def encode(self, frames, masks=None):
        Encoder.calls.append(frames)
        return np.zeros((len(frames[1]), 1))  # a view stand-in: ("view", indices)


class Poses:
    """An estimator whose chained estimate is :attr:`c2w` and whose direct angles to a reference are
    :attr:`angles`; counts its estimates."""

    c2w = np.tile(np.eye(4), (T, 1, 1))
    angles = None
    estimates = 0

    def estimate(self, frames, indices, K, mode):
        Poses.estimates += 1
        return PoseEstimate(Poses.c2w.copy(), np.ones(len(indices), bool))


class Angles(Poses):
    refs: list = []

    def angles_to(self, ref, frames, K):
        Angles.refs.append(ref)
        return np.asarray(Poses.angles, np.float64)


class Margined(Poses):
    """An estimator with a direct-fit margin (:attr:`direct_margin_deg`): its direct angle of each frame is
    :attr:`by_frame` (frame -> degrees, ``inf`` where absent); records the frames of each call."""

    frame_views = True  # handed ("view", indices): the frames asked for are known
    direct_margin_deg = 10.0
    by_frame: dict = {}
    asked: list = []

    def angles_to(self, ref, frames, K):
        Margined.asked.append(list(frames[1]))
        return np.asarray([Margined.by_frame.get(f, np.inf) for f in frames[1]], np.float64)


class Parallax(Poses):
    refs: list = []

    def parallax_to(self, ref, frames, K):
        Parallax.refs.append(ref)
        return np.asarray(Poses.angles, np.float64)  # here: each frame's parallax to frame 0


class Depth:
    calls = 0

    def depth(self, frames, indices):
        Depth.calls += 1
        return np.full((len(indices), H, W), 2.0)


class Oracle:
    """Ground truth: binds to the item's own (``ctx.oracle``); counts its bindings."""

    binds = 0

    def bind(self, ctx):
        Oracle.binds += 1
        return types.SimpleNamespace(depth=lambda frames, idx: np.full((len(idx), H, W), float(ctx.oracle)),
                                     name="bound")


@pytest.fixture
def bset(monkeypatch, tmp_path):
    """A backbone set of the classes above under their names (no weights, no pack), counters reset."""
    mod = types.ModuleType(MODULE)
    for c in (Encoder, ViewEncoder, Poses, Angles, Margined, Parallax, Depth, Oracle):
        setattr(mod, c.__name__, c)
    monkeypatch.setitem(sys.modules, MODULE, mod)
    monkeypatch.delenv(PACK_ENV, raising=False)
    for name, cls, kind, roles in (("enc", "Encoder", "diagnostic", ("encoder",)),
                                   ("views", "ViewEncoder", "diagnostic", ("encoder",)),
                                   ("poses", "Poses", "estimator", ("pose",)),
                                   ("angles", "Angles", "estimator", ("pose",)),
                                   ("parallax", "Parallax", "estimator", ("pose",)),
                                   ("margined", "Margined", "estimator", ("pose",)),
                                   ("depth", "Depth", "diagnostic", ("depth",)),
                                   ("truth", "Oracle", "oracle", ("depth", "pose"))):
        monkeypatch.setitem(bbs.BACKBONES, name, bbs.BackboneSpec(name, f"{MODULE}:{cls}", kind, roles, False, name))
    Encoder.calls, Poses.estimates, Poses.angles, Depth.calls, Oracle.binds, Angles.refs = [], 0, None, 0, 0, []
    Poses.c2w = np.tile(np.eye(4), (T, 1, 1))
    Margined.direct_margin_deg, Margined.by_frame, Margined.asked, Parallax.refs = 10.0, {}, [], []
    return bbs.BackboneSet(types.SimpleNamespace(device="cpu"), tmp_path / "weights")


class Item:
    """What ItemPerception reads of an item (evaluate/item.py's EvalItem): its folder, video hash, frames (and the
    views and subsets it hands out), intrinsics, pose mode and ground truth."""

    def __init__(self, d: Path, oracle=None, K=None):
        self.dir, self.oracle = d, oracle
        self.video_sha = "ab" * 32
        self.frames = np.arange(T * H * W * 3, dtype=np.uint8).reshape(T, H, W, 3)
        self.num_frames, self.width = T, W
        self.intrinsics = np.eye(3) if K is None else np.asarray(K, np.float64)
        self.pose_mode, self.translates = "rotation", False
        #: two revisits: D1 departs over frames 1-2 and R1 returns at 3; D2 departs at 4 and R2 returns at 5
        self.phases = {"V": (0, 1), "D1": (1, 3), "R1": (3, 4), "D2": (4, 5), "R2": (5, 6)}
        self.rev_idx, self.sample_idx, self.num_revisits = [[3], [5]], list(range(T)), 2

    def frames_view(self, idx):
        return ("view", list(idx))

    def frames_at(self, idx):
        return self.frames[list(idx)]


def _files(d: Path) -> list[str]:
    return sorted(p.relative_to(d / pc.CACHE_DIR).as_posix() for p in (d / pc.CACHE_DIR).rglob("*.npz"))


# -- the cache key ----------------------------------------------------------------------------------------------


def test_the_cache_key_ignores_the_order_of_a_mappings_keys():
    assert pc._key({"a": 1, "b": [2, 3]}) == pc._key({"b": [2, 3], "a": 1})
    assert pc._key({"a": 1}) != pc._key({"a": 2})


def test_a_weight_free_backbones_settings_are_its_public_scalars():
    inner = types.SimpleNamespace(size=16, threshold=0.6, name="t", on=True, grid=[1, 2], _threads=4, K=np.eye(3))
    assert pc._settings_of(inner) == {"name": "t", "on": True, "size": 16, "threshold": 0.6}


def test_outputs_are_cached_on_disk_by_default_under_the_ops_name_and_a_20_digit_key(bset, tmp_path):
    ip = pc.ItemPerception(Item(tmp_path), bset)
    ip.encode("enc", [0, 1])
    (f,) = _files(tmp_path)
    assert re.fullmatch(r"enc/encoder-[0-9a-f]{20}\.npz", f)


# -- frames handed to a backbone --------------------------------------------------------------------------------


def test_a_batched_backbone_gets_the_items_own_array_or_the_frames_asked_for(bset, tmp_path):
    item = Item(tmp_path)
    ip = pc.ItemPerception(item, bset)
    ip.encode("enc", list(range(T)))
    ip.encode("enc", [1, 3])
    whole, part = Encoder.calls
    assert whole is item.frames and np.array_equal(part, item.frames[[1, 3]])


def test_a_backbone_reading_one_frame_at_a_time_gets_a_view(bset, tmp_path):
    pc.ItemPerception(Item(tmp_path), bset).encode("views", list(range(T)))
    assert Encoder.calls == [("view", list(range(T)))]


# -- the on-disk cache ------------------------------------------------------------------------------------------


def test_with_the_cache_off_a_file_there_is_neither_read_nor_written(bset, tmp_path):
    item = Item(tmp_path)
    first = pc.ItemPerception(item, bset).encode("enc", [0, 2])
    assert len(Encoder.calls) == 1 and len(_files(tmp_path)) == 1
    path = tmp_path / pc.CACHE_DIR / _files(tmp_path)[0]
    np.savez(path, f=np.full((2, 1), -1.0))  # what a read of the file would give
    again = pc.ItemPerception(item, bset, use_cache=False).encode("enc", [0, 2])
    assert len(Encoder.calls) == 2 and np.array_equal(again, first)
    assert np.array_equal(pc.ItemPerception(item, bset).encode("enc", [0, 2]), np.full((2, 1), -1.0))
    pc.ItemPerception(item, bset, use_cache=False).encode("enc", [4])
    assert len(_files(tmp_path)) == 1


def test_a_depth_is_cached_and_an_oracles_is_not(bset, tmp_path):
    item = Item(tmp_path, oracle=3)
    label, d = pc.ItemPerception(item, bset).depth("depth", [0, 5])
    assert (label, d.shape, d.dtype, Depth.calls) == ("depth", (2, H, W), np.float32, 1)
    pc.ItemPerception(item, bset).depth("depth", [0, 5])
    assert Depth.calls == 1 and _files(tmp_path)[0].startswith("depth/depth-")
    label, d = pc.ItemPerception(item, bset).depth("truth", [1])
    assert label == "bound" and float(d[0, 0, 0]) == 3.0 and len(_files(tmp_path)) == 1


# -- oracles ----------------------------------------------------------------------------------------------------


def test_an_oracle_binds_once_to_the_items_ground_truth(bset, tmp_path):
    ip = pc.ItemPerception(Item(tmp_path, oracle=7), bset)
    first = ip.backbone("truth", "depth")
    assert ip.backbone("truth", "depth") is first and Oracle.binds == 1


def test_an_oracle_without_ground_truth_is_unavailable(bset, tmp_path):
    with pytest.raises(BackboneUnavailable, match="'truth' is ground truth that exists only for the built-in"):
        pc.ItemPerception(Item(tmp_path), bset).backbone("truth", "depth")
    assert Oracle.binds == 0


# -- poses ------------------------------------------------------------------------------------------------------


def test_intrinsics_that_agree_to_six_decimals_share_the_cached_poses(bset, tmp_path):
    K = np.eye(3)
    K[0, 0] = 100.0000004
    pc.ItemPerception(Item(tmp_path, K=K), bset).poses("poses")
    K[0, 0] = 100.0000001
    pc.ItemPerception(Item(tmp_path, K=K), bset).poses("poses")
    assert Poses.estimates == 1
    K[0, 0] = 100.000001
    pc.ItemPerception(Item(tmp_path, K=K), bset).poses("poses")
    assert Poses.estimates == 2


def test_a_pose_with_any_non_finite_entry_fails_naming_its_frames(bset, tmp_path):
    Poses.c2w[1, 0, 3] = np.nan  # one entry of frame 1
    Poses.c2w[4] = np.inf
    with pytest.raises(pc.PerceptionFailed, match=r"^pose estimator 'poses' returned non-finite poses at frames "
                                                 r"\[1, 4\]$"):
        pc.ItemPerception(Item(tmp_path), bset).poses("poses")


# -- the frame closest to a reference ---------------------------------------------------------------------------


def test_no_available_source_gives_no_frame_per_window(bset, tmp_path):
    out = pc.ItemPerception(Item(tmp_path), bset).frames_closest_to(("truth",), 0, [[1, 2], [3], [4, 5]])
    assert out["source"] is None and out["frames"] == [None, None, None] and out["angles_deg"] == []
    assert "ground truth" in out["reasons"]["truth"]


def test_the_closest_frame_is_measured_by_orientation_against_the_reference(bset, tmp_path):
    Poses.angles = [4.0, 1.5, 9.0]  # the direct angles of frames 2, 3, 4 to frame 1
    out = pc.ItemPerception(Item(tmp_path), bset).frames_closest_to(("angles",), 1, [[2, 3, 4]])
    assert (out["source"], out["frames"], out["angles_deg"]) == ("angles", [3], [1.5])


def test_a_direct_angle_is_cached_under_its_reference_frame(bset, tmp_path):
    Poses.angles = [4.0, 1.5, 9.0]
    pc.ItemPerception(Item(tmp_path), bset).frames_closest_to(("angles",), 1, [[2, 3, 4]])
    assert [f.split("-")[0] for f in _files(tmp_path)] == ["angles/angles_to_1", "angles/poses"]


# -- return frames ----------------------------------------------------------------------------------------------


def _yaw(deg) -> np.ndarray:
    from trajectories.conventions import rot_y, se3

    return np.stack([se3(rot_y(np.deg2rad(a))) for a in deg])


def test_each_revisit_is_qualified_by_its_own_departure_frames(bset, tmp_path):
    """Revisit k's departure angle is the largest over the frames of phase Dk alone, its first frame included."""
    Poses.c2w = _yaw([0.0, 30.0, 20.0, 2.0, 50.0, 1.0])
    ip = pc.ItemPerception(Item(tmp_path), bset)
    out = ip.return_frames(("truth", "poses"))
    assert (out["source"], out["label"], out["frames"]) == ("poses", "poses", [3, 5])
    got = [(round(q["departure_deg"], 6), round(q["return_error_deg"], 6), q["return_frame"])
           for q in out["qualification"]]
    assert got == [(30.0, 2.0, 3), (50.0, 1.0, 5)]
    assert set(out["reasons"]) == {"truth"} and ip.return_frames(("truth", "poses")) is out


def test_a_departure_ends_where_its_return_begins_and_a_missing_one_departs_nowhere(bset, tmp_path):
    Poses.c2w = _yaw([0.0, 30.0, 20.0, 2.0, 50.0, 60.0])  # R2's first frame is the furthest of all
    item = Item(tmp_path)
    out = pc.ItemPerception(item, bset).return_frames(("poses",))
    assert [round(q["departure_deg"], 6) for q in out["qualification"]] == [30.0, 50.0]
    del item.phases["D2"]
    out = pc.ItemPerception(item, bset).return_frames(("poses",))
    assert [round(q["departure_deg"], 6) for q in out["qualification"]] == [30.0, 0.0]


def test_a_direct_return_frame_is_measured_against_frame_0(bset, tmp_path):
    Poses.angles = [3.0]
    item = Item(tmp_path)
    out = pc.ItemPerception(item, bset).return_frames(("angles",))
    assert out["frames"] == [3, 5] and [q["return_error_deg"] for q in out["qualification"]] == [3.0, 3.0]
    assert len(Angles.refs) == 2 and all(r is item.frames[0] or np.array_equal(r, item.frames[0])
                                         for r in Angles.refs)
    assert sorted(f.split("-")[0] for f in _files(tmp_path)) == ["angles/angles_to_0"] * 2 + ["angles/poses"]


def test_a_translating_items_return_frame_is_the_least_parallax(bset, tmp_path):
    Poses.c2w = _yaw([0.0, 30.0, 20.0, 2.0, 50.0, 1.0])
    Poses.angles = [0.5, 0.25]  # the parallax of each window's two frames: the second is closer to frame 0
    item = Item(tmp_path)
    item.translates, item.rev_idx = True, [[2, 3], [4, 5]]  # the chained estimate has no translation at all
    out = pc.ItemPerception(item, bset).return_frames(("parallax",))
    assert out["frames"] == [3, 5] and [round(q["return_error_deg"], 6) for q in out["qualification"]] == [2.0, 1.0]
    assert len(Parallax.refs) == 2 and all(np.array_equal(r, item.frames[0]) for r in Parallax.refs)
    assert sorted(f.split("-")[0] for f in _files(tmp_path)) == ["parallax/parallax_to_0"] * 2 + ["parallax/poses"]


# -- a direct fit within a margin of the chained estimate ------------------------------------------------------


def _closest(tmp_path, bset, window=(1, 2, 3, 4, 5)):
    return pc.ItemPerception(Item(tmp_path), bset).frames_closest_to(("margined",), 0, [list(window)])


def test_only_the_frames_within_the_margin_of_the_chained_closest_are_fitted_directly(bset, tmp_path):
    """Chained angles 40, 25, 9.5, 0, 10.5: the frames within 10 deg of the smallest (0 at frame 4) are 3 and 4."""
    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Margined.by_frame = {1: 39.0, 2: 24.0, 3: 9.0, 4: 0.5, 5: 10.0}
    out = _closest(tmp_path, bset)
    assert Margined.asked == [[3, 4]] and (out["frames"], out["angles_deg"]) == ([4], [0.5])


def test_without_a_margin_the_whole_window_is_fitted(bset, tmp_path):
    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Margined.direct_margin_deg, Margined.by_frame = None, {1: 39.0, 2: 24.0, 3: 9.0, 4: 0.5, 5: 10.0}
    assert _closest(tmp_path, bset)["frames"] == [4] and Margined.asked == [[1, 2, 3, 4, 5]]


def test_a_chained_estimate_off_by_more_than_half_the_margin_has_the_rest_fitted_too(bset, tmp_path):
    """Frame 4's direct angle is 5.5 deg from its chained one (more than 10 / 2): the frames left out are fitted,
    and one of them is the closest."""
    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Margined.by_frame = {1: 39.0, 2: 0.2, 3: 9.0, 4: 5.5, 5: 10.0}
    out = _closest(tmp_path, bset)
    assert Margined.asked == [[3, 4], [1, 2, 5]] and (out["frames"], out["angles_deg"]) == ([2], [0.2])


def test_at_half_the_margin_the_chained_estimate_is_trusted(bset, tmp_path):
    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Margined.by_frame = {3: 9.0, 4: 5.0}  # off by exactly 10 / 2
    assert _closest(tmp_path, bset)["frames"] == [4] and Margined.asked == [[3, 4]]


def test_where_no_frame_within_the_margin_fits_the_rest_is_fitted(bset, tmp_path):
    """A chained estimate gone astray (a dynamic scene): the frame that truly returns lies outside the margin and
    only the direct fit finds it, as on LRUD's dynamic_cat."""
    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Margined.by_frame = {2: 0.1}
    out = _closest(tmp_path, bset)
    assert Margined.asked == [[3, 4], [1, 2, 5]] and (out["frames"], out["angles_deg"]) == ([2], [0.1])


def test_a_window_all_within_the_margin_is_fitted_once_even_without_a_fit(bset, tmp_path):
    Poses.c2w = _yaw([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    out = _closest(tmp_path, bset)
    assert Margined.asked == [[1, 2, 3, 4, 5]] and out["frames"] == [1]  # no fit: the chained closest


def test_the_margin_includes_a_frame_exactly_at_it(bset, tmp_path):
    from trajectories.conventions import geodesic_angle

    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Margined.direct_margin_deg = float(np.degrees(geodesic_angle(Poses.c2w[0, :3, :3], Poses.c2w[5, :3, :3])))
    Margined.by_frame = {4: 0.5}
    _closest(tmp_path, bset)
    assert Margined.asked == [[3, 4, 5]]


def test_the_chained_angle_is_the_rotations_alone(bset, tmp_path):
    """Camera centres far from the reference's change no chained angle, so no frame the margin keeps."""
    Poses.c2w = _yaw([0.0, 40.0, 25.0, 9.5, 0.0, 10.5])
    Poses.c2w[:, :3, 3] = [[0, 0, 0], [0, 0, 0], [0, 0, 0], [40.0, -3.0, 7.0], [0, 0, 0], [9.0, 9.0, 9.0]]
    Margined.by_frame = {4: 0.5}
    assert _closest(tmp_path, bset)["frames"] == [4] and Margined.asked == [[3, 4]]


@pytest.mark.parametrize("by", ["angles", "parallax"])
def test_an_empty_window_has_no_direct_pick_and_fits_nothing(bset, tmp_path, by):
    ip = pc.ItemPerception(Item(tmp_path), bset)
    Margined.by_frame = {1: 0.0}
    name = "margined" if by == "angles" else "parallax"
    assert ip._direct_pick(name, 0, [], by == "parallax") is None
    assert Margined.asked == [] and Parallax.refs == [] and _files(tmp_path) == []


def test_the_pick_within_the_margin_equals_the_whole_windows_when_the_chained_estimate_holds(bset, tmp_path):
    """Random windows whose direct angles differ from the chained ones by at most 5 deg (half the margin): the same
    frame and angle as fitting every frame."""
    rng = np.random.default_rng(3)
    for trial in range(40):
        yaw = np.r_[0.0, rng.uniform(0, 90, T - 1)]
        Poses.c2w = _yaw(yaw)
        Margined.by_frame = {f: abs(yaw[f]) + rng.uniform(-5, 5) for f in range(1, T)}
        Margined.by_frame = {f: max(v, 0.0) for f, v in Margined.by_frame.items() if rng.random() < 0.8}
        Margined.direct_margin_deg = 10.0
        got = pc.ItemPerception(Item(tmp_path / f"m{trial}"), bset, use_cache=False).frames_closest_to(
            ("margined",), 0, [[1, 2, 3, 4, 5]])
        Margined.direct_margin_deg = None
        whole = pc.ItemPerception(Item(tmp_path / f"w{trial}"), bset, use_cache=False).frames_closest_to(
            ("margined",), 0, [[1, 2, 3, 4, 5]])
        assert (got["frames"], got["angles_deg"]) == (whole["frames"], whole["angles_deg"]), (trial, yaw)


# -- the weight-free backbones read views -----------------------------------------------------------------------


def test_the_weight_free_backbones_are_handed_views_not_copies(tmp_path, monkeypatch):
    """They read one frame at a time (``frame_views``): perceive hands them views of the decoded video, never the
    (N, H, W, 3) copy a batched backbone gets."""
    from evaluate.config import EvalConfig
    from evaluate.item import FrameView

    monkeypatch.delenv(PACK_ENV, raising=False)
    rng = np.random.default_rng(0)
    item = Item(tmp_path)
    item.frames = rng.integers(0, 256, (T, 32, 48, 3), np.uint8)
    item.width = 48
    asked: list = []

    def frames_view(idx):
        asked.append(list(idx))
        return FrameView(item.frames, list(idx))

    item.frames_view = frames_view
    ip = pc.ItemPerception(item, bbs.BackboneSet(EvalConfig(), tmp_path / "weights"), use_cache=False)
    init = np.zeros((32, 48), bool)
    init[4:12, 4:16] = True
    ip.track("template", "t", init, [0, 2])
    ip.encode("pixel", [1, 3])
    ip.poses("classical")
    assert asked == [[0, 2], [1, 3], list(range(T))]
