"""The weight-free backbones' rules one at a time (evaluate/perception/weightfree.py): the worker count and the
ordered thread map, the pixel encoder's crop, fill, centring and norm, the template tracker, the ray geometry the
direct fits use, the classical estimator's independence from OpenCV's global random state, and the oracles."""

from __future__ import annotations

import os
import threading
import types

import numpy as np
import pytest

from evaluate.perception import weightfree as wf

# -- worker threads ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cores, want", [(1, 1), (2, 2), (3, 3), (4, 4), (6, 4)])
def test_the_worker_count_is_the_usable_cores_at_most_4(monkeypatch, cores, want):
    asked: list = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: asked.append(pid) or set(range(cores)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert wf.default_threads() == want and asked == [0]  # this process's own cores, not the machine's


@pytest.mark.parametrize("count, want", [(None, 1), (3, 3), (16, 4)])
def test_without_affinity_the_worker_count_is_the_cpu_count(monkeypatch, count, want):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: count)
    assert wf.default_threads() == want


def _where(threads: int, n: int) -> tuple[list, list]:
    seen: list = []

    def fn(x):
        seen.append(threading.current_thread().name)
        return x * x

    return wf.thread_map(fn, list(range(n)), threads), seen


@pytest.mark.parametrize("threads, n, pooled", [(1, 5, False), (0, 5, False), (4, 1, False), (4, 0, False),
                                                (2, 2, True), (4, 5, True)])
def test_the_thread_map_keeps_order_and_uses_a_pool_only_for_two_threads_and_two_items(threads, n, pooled):
    out, seen = _where(threads, n)
    assert out == [x * x for x in range(n)]
    me = threading.current_thread().name
    assert all((name.startswith("weightfree") if pooled else name == me) for name in seen)


# -- the pixel encoder ------------------------------------------------------------------------------------------


def _frame(seed: int = 0, h: int = 24, w: int = 40) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)


def test_a_thumbnail_is_16_by_16_rgb_centred_per_channel_and_of_unit_norm():
    (v,) = wf.PixelEncoder(threads=1).encode(_frame()[None])
    assert v.shape == (768,) and v.dtype == np.float32
    assert np.abs(v.reshape(-1, 3).sum(axis=0)).max() < 1e-4 and np.linalg.norm(v) == pytest.approx(1.0, abs=1e-6)
    assert wf.PixelEncoder(size=4, threads=1).encode(_frame()[None]).shape == (1, 48)


def test_a_faint_region_is_scaled_up_to_unit_norm():
    img = np.full((1, 24, 40, 3), 100, np.uint8)
    img[0, 5, 7, 0] = 101  # one level on one pixel: a thumbnail of norm about 0.19 before scaling
    (v,) = wf.PixelEncoder(threads=1).encode(img)
    assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-6)


def test_a_flat_region_has_no_direction_and_an_empty_mask_gives_zeros():
    enc = wf.PixelEncoder(threads=1)
    flat = np.full((1, 24, 40, 3), 77, np.uint8)
    assert not enc.encode(flat).any()
    none = np.zeros((1, 24, 40), bool)
    got = enc.encode(_frame()[None], none)
    assert got.shape == (1, 768) and not got.any()


def test_a_masked_region_is_its_bounding_box_with_the_rest_filled_by_its_mean_colour():
    import cv2

    img = _frame(1)
    mask = np.zeros((24, 40), bool)
    mask[5:12, 8:20] = True
    mask[12:17, 8:11] = True  # an L: its box (rows 5-16, columns 8-19) holds pixels outside the mask
    x = img.astype(np.float32)
    x[~mask] = x[mask].mean(axis=0)
    t = cv2.resize(x[5:17, 8:20], (16, 16), interpolation=cv2.INTER_AREA)
    t -= t.reshape(-1, 3).mean(axis=0)
    want = t.reshape(-1) / np.linalg.norm(t)
    (got,) = wf.PixelEncoder(threads=1).encode(img[None], mask[None])
    np.testing.assert_allclose(got, want, atol=1e-6)
    other = _frame(2)
    other[mask] = img[mask]  # different pixels outside the mask: the same features
    np.testing.assert_array_equal(wf.PixelEncoder(threads=1).encode(other[None], mask[None])[0], got)


def test_two_masked_pixels_are_a_region():
    img = np.zeros((24, 40, 3), np.uint8)
    img[3, 4], img[3, 5] = (255, 0, 0), (0, 0, 255)
    mask = np.zeros((24, 40), bool)
    mask[3, 4:6] = True
    (v,) = wf.PixelEncoder(threads=1).encode(img[None], mask[None])
    assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("threads", [0, 1])
def test_an_encoder_of_one_thread_or_fewer_runs_on_the_callers_thread(monkeypatch, threads):
    import cv2

    seen: list = []
    real = cv2.resize
    monkeypatch.setattr(cv2, "resize", lambda *a, **k: seen.append(threading.current_thread().name) or real(*a, **k))
    wf.PixelEncoder(threads=threads).encode(np.stack([_frame(i) for i in range(3)]))
    assert seen == [threading.current_thread().name] * 3


_THREAD_MAP = wf.thread_map


def _threads_used(monkeypatch, call) -> list:
    """The thread counts ``call`` hands to the module's thread map (which then runs on the caller's thread)."""
    used: list = []
    monkeypatch.setattr(wf, "thread_map", lambda fn, items, threads: used.append(threads) or _THREAD_MAP(fn, items, 1))
    call()
    return used


@pytest.mark.parametrize("given, want", [(None, 3), (0, 1), (1, 1), (2, 2), (7, 7)])
def test_each_backbone_runs_on_the_threads_it_was_given_at_least_one(monkeypatch, given, want):
    monkeypatch.setattr(wf, "default_threads", lambda: 3)
    frames = np.stack([_frame(i, 32, 48) for i in range(2)])
    init = np.zeros((32, 48), bool)
    init[4:10, 4:12] = True
    calls = [lambda: wf.PixelEncoder(threads=given).encode(frames),
             lambda: wf.TemplateTracker(threads=given).track(frames, init),
             lambda: wf.ClassicalPoseEstimator(threads=given).estimate(frames, [0, 1], K, "rotation"),
             lambda: wf.ClassicalPoseEstimator(threads=given).angles_to(frames[0], frames, K)]
    for call in calls:
        assert _threads_used(monkeypatch, call) == [want]


# -- the template tracker ---------------------------------------------------------------------------------------


def test_the_tracker_threshold_comes_from_the_evaluation_settings():
    assert wf.TemplateTracker.from_settings(types.SimpleNamespace(tracker_threshold="0.75")).threshold == 0.75
    assert wf.TemplateTracker().threshold == 0.6


def test_a_target_is_followed_where_it_moves_and_lost_where_it_is_gone():
    rng = np.random.default_rng(3)
    bg = rng.integers(0, 256, (40, 64, 3), np.uint8)
    patch = rng.integers(0, 256, (8, 10, 3), np.uint8)
    frames = np.stack([bg.copy() for _ in range(3)])
    frames[0, 5:13, 6:16] = patch
    frames[1, 20:28, 40:50] = patch  # moved 15 down and 34 right
    init = np.zeros((40, 64), bool)
    init[5:13, 6:16] = True
    init[5, 6] = False  # a mask that is not its whole box moves as it is
    masks, valid = wf.TemplateTracker(threshold=0.9, threads=1).track(frames, init)
    assert valid.tolist() == [True, True, False]
    want = np.zeros((40, 64), bool)
    want[20:28, 40:50] = init[5:13, 6:16]
    assert np.array_equal(masks[0], init) and np.array_equal(masks[1], want) and not masks[2].any()


def test_the_template_is_the_masks_box_and_a_score_on_the_threshold_is_an_observation():
    import cv2

    rng = np.random.default_rng(4)
    frames = rng.integers(0, 256, (2, 40, 64, 3), np.uint8)
    patch = rng.integers(0, 256, (8, 10, 3), np.uint8)
    frames[0, 5:13, 6:16] = patch
    frames[1, 32:40, 54:64] = patch  # in the bottom-right corner: a box one pixel larger would not fit there
    frames[1, 33, 60] = 255 - frames[1, 33, 60]  # one pixel differs: a score just under 1
    init = np.zeros((40, 64), bool)
    init[5:13, 6:16] = True
    best = cv2.minMaxLoc(cv2.matchTemplate(frames[1], patch, cv2.TM_CCOEFF_NORMED))[1]
    masks, valid = wf.TemplateTracker(threshold=best, threads=1).track(frames, init)
    assert 0.9 < best < 1.0 and valid.tolist() == [True, True]
    assert np.array_equal(np.argwhere(masks[1])[[0, -1]], [[32, 54], [39, 63]])


def test_an_empty_first_mask_is_never_observed():
    masks, valid = wf.TemplateTracker(threads=1).track(np.zeros((2, 20, 30, 3), np.uint8), np.zeros((20, 30), bool))
    assert masks.shape == (2, 20, 30) and not masks.any() and valid.tolist() == [False, False]


# -- ray geometry -----------------------------------------------------------------------------------------------


K = np.array([[100.0, 0.0, 50.0], [0.0, 100.0, 40.0], [0.0, 0.0, 1.0]])


def _rot(axis: np.ndarray, deg: float) -> np.ndarray:
    import cv2

    return cv2.Rodrigues(np.asarray(axis, np.float64) / np.linalg.norm(axis) * np.deg2rad(deg))[0]


def test_unit_rays_point_through_their_pixels():
    rays = wf._unit_rays(np.array([[50.0, 40.0], [150.0, 40.0], [50.0, -60.0]]), np.linalg.inv(K))
    np.testing.assert_allclose(rays, [[0, 0, 1], [np.sqrt(0.5), 0, np.sqrt(0.5)], [0, -np.sqrt(0.5), np.sqrt(0.5)]],
                               atol=1e-12)


def test_kabsch_recovers_a_rotation_and_never_a_reflection():
    r0 = wf._unit_rays(np.random.default_rng(0).uniform(0, 100, (12, 2)), np.linalg.inv(K))
    R = _rot([0.2, 1.0, -0.3], 7.0)
    np.testing.assert_allclose(wf._kabsch(r0, r0 @ R.T), R, atol=1e-12)
    planar = np.c_[np.random.default_rng(1).normal(size=(6, 2)), np.zeros(6)]  # rays in one plane: a mirror fits too
    mirrored = planar * [1, 1, -1]
    got = wf._kabsch(planar, mirrored)
    assert np.linalg.det(got) == pytest.approx(1.0)


def test_a_ray_residual_is_the_angle_left_after_the_rotation():
    r0 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    r1 = r0 @ _rot([0, 1, 0], 10.0).T
    np.testing.assert_allclose(wf._ray_residuals(r0, r1, np.eye(3)), np.deg2rad([10.0, 10.0]), atol=1e-12)
    np.testing.assert_allclose(wf._ray_residuals(r0, r1, _rot([0, 1, 0], 10.0)), [0.0, 0.0], atol=1e-7)
    assert wf._ray_residuals(r0, -r0, np.eye(3)).tolist() == [np.pi, np.pi]  # opposite rays: clipped, not NaN
    rng = np.random.default_rng(0)
    for _ in range(100):  # a unit ray whose float dot product with itself rounds above 1
        v = rng.normal(size=3)
        v /= np.linalg.norm(v)
        if np.sum(v * v) > 1.0:
            break
    assert np.sum(v * v) > 1.0
    assert wf._ray_residuals(v[None], v[None], np.eye(3)).tolist() == [0.0]
    assert wf._ray_residuals(v[None], -v[None], np.eye(3)).tolist() == [np.pi]  # rounded past -1: still pi


def test_the_byte_table_counts_bits_as_numpy_does(monkeypatch):
    x = np.random.default_rng(0).integers(0, 2 ** 63, (3, 5), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    want = np.array([[bin(int(v)).count("1") for v in row] for row in x], np.uint8)
    out = np.empty((3, 5), np.uint8)
    wf._popcount(x, out)
    assert np.array_equal(out, want)
    monkeypatch.delattr(np, "bitwise_count")  # numpy < 2
    out[...] = 0
    wf._popcount(x, out)
    assert np.array_equal(out, want)


# -- the classical estimator ------------------------------------------------------------------------------------


def _textured(h: int = 96, w: int = 160, seed: int = 5) -> np.ndarray:
    """A grey frame of blurred noise: corners everywhere, edges included."""
    import cv2

    g = np.random.default_rng(seed).integers(0, 256, (h + 40, w + 40), np.uint8)
    return cv2.GaussianBlur(g, (0, 0), 1.5)


def _step(g0, g1, est=None, mode="rotation", p0=None):
    Kc = K.copy()
    Kc[:2, 2] -= 0.5
    return (est or wf.ClassicalPoseEstimator(threads=1))._step(g0, g1, Kc, np.linalg.inv(Kc), mode, p0)


@pytest.mark.parametrize("dx, dy", [(6, 0), (-6, 0), (0, 6), (0, -6)])
def test_a_step_hands_on_only_the_points_tracked_inside_the_frame(dx, dy):
    big = _textured()
    g0 = np.ascontiguousarray(big[20:116, 20:180])
    g1 = np.ascontiguousarray(big[20 - dy:116 - dy, 20 - dx:180 - dx])  # the view moved by (dx, dy) pixels
    T, ok, n, tracked = _step(g0, g1)
    assert ok and n >= 20 and tracked is not None and tracked.shape[1:] == (1, 2)
    x, y = tracked[:, 0, 0], tracked[:, 0, 1]
    assert (x >= 0).all() and (y >= 0).all() and (x <= 159).all() and (y <= 95).all()
    import cv2

    p0 = cv2.goodFeaturesToTrack(g0, 800, 0.01, 7)
    edge = {(6, 0): p0[:, 0, 0] > 159 - 6, (-6, 0): p0[:, 0, 0] < 6, (0, 6): p0[:, 0, 1] > 95 - 6,
            (0, -6): p0[:, 0, 1] < 6}[(dx, dy)]
    assert len(tracked) <= len(p0) - int(edge.sum()) + 2  # the points that left the frame are not handed on


def test_a_frame_with_too_few_corners_is_a_failed_step_with_nothing_to_hand_on():
    flat = np.full((96, 160), 128, np.uint8)
    T, ok, n, tracked = _step(flat, flat)
    assert (np.array_equal(T, np.eye(4)), ok, n, tracked) == (True, False, 0, None)
    few = flat.copy()
    for i in range(5):
        few[20 + 10 * i: 24 + 10 * i, 30 + 20 * i: 34 + 20 * i] = 255  # 5 squares: about 20 corners
    import cv2

    corners = len(cv2.goodFeaturesToTrack(few, 800, 0.01, 7))
    at = wf.ClassicalPoseEstimator(min_inliers=corners, threads=1)
    over = wf.ClassicalPoseEstimator(min_inliers=corners + 1, threads=1)
    assert _step(few, few, over)[1:] == (False, 0, None)
    assert _step(few, few, at)[1:3] == (True, corners)  # exactly enough corners: tracked (a static step)


def test_a_step_whose_points_cannot_be_followed_fails():
    g0 = np.ascontiguousarray(_textured()[20:116, 20:180])
    import cv2

    corners = len(cv2.goodFeaturesToTrack(g0, 800, 0.01, 7))
    flat = np.full_like(g0, 128)  # nothing to follow them into: most are lost
    followed = int(cv2.calcOpticalFlowPyrLK(g0, flat, cv2.goodFeaturesToTrack(g0, 800, 0.01, 7), None,
                                            winSize=(15, 15), maxLevel=3)[1].sum())
    assert followed < corners
    est = wf.ClassicalPoseEstimator(min_inliers=followed + 1, threads=1)  # enough corners, too few followed
    T, ok, n, tracked = _step(g0, flat, est)
    assert (np.array_equal(T, np.eye(4)), ok, n) == (True, False, 0) and len(tracked) <= followed


def test_a_failed_step_is_an_invalid_frame_of_the_chained_estimate():
    frames = np.full((3, 96, 160, 3), 128, np.uint8)
    pe = wf.ClassicalPoseEstimator(threads=1).estimate(frames, [0, 1, 2], K, "rotation")
    assert pe.valid.tolist() == [True, False, False] and pe.info["inliers"] == [0, 0, 0]
    assert np.array_equal(pe.c2w, np.tile(np.eye(4), (3, 1, 1)))


def test_the_classical_estimators_recipe_is_recorded_with_its_defaults():
    """Its settings are part of the cache key and of metrics.json (evaluate/perceive.py): a default that changes
    changes every pose it estimates, so the recipe is stated here (docs/evaluation.md, "Performance")."""
    from evaluate.perceive import _settings_of

    assert _settings_of(wf.ClassicalPoseEstimator()) == {
        "features": 3000, "min_inliers": 20, "corners": 800, "flow_window": 9, "flow_window_general": 15,
        "orb_min_side": 240, "redetect": 4, "redetect_general": 2, "direct_margin_deg": 10.0,
        "angle_fit": "kabsch-on-homography-inliers/fast-threshold-20-over-scale",
        "position_fit": "orb-parallax-median/kabsch-refit-3x-median"}
    assert wf.ClassicalPoseEstimator(redetect=0).redetect == 1 and wf.ClassicalPoseEstimator(redetect=3.0).redetect == 3
    assert wf.ClassicalPoseEstimator(redetect_general=0).redetect_general == 1
    assert wf.ClassicalPoseEstimator(redetect_general=3.0).redetect_general == 3


def test_the_classical_estimates_do_not_read_opencvs_global_random_state():
    """RANSAC (homography, essential matrix) draws from a fixed-seed generator of its own, and ORB draws nothing:
    the global seed changes no pose, angle or parallax."""
    import cv2

    from tests.evaluate.test_perceive_once import _rendered

    fr, K = _rendered("rotation", n=6)
    idx = list(range(len(fr)))
    runs = []
    for seed in (0, 12345):
        cv2.setRNGSeed(seed)
        est = wf.ClassicalPoseEstimator(threads=1)
        runs.append((est.estimate(fr, idx, K, "rotation").c2w, est.estimate(fr, idx, K, "general").c2w,
                     est.angles_to(fr[0], fr[[0, 5]], K), est.parallax_to(fr[0], fr[[0, 5]], K)))
    for a, b in zip(*runs):
        assert np.array_equal(a, b)


# -- oracles ----------------------------------------------------------------------------------------------------


def test_oracle_poses_are_the_paths_own_at_the_indices():
    c2w = np.stack([np.eye(4) * (i + 1) for i in range(5)])
    pe = wf.OraclePoses(c2w).estimate(np.zeros((2, 4, 4, 3), np.uint8), [4, 1], np.eye(3), "rotation")
    assert np.array_equal(pe.c2w, c2w[[4, 1]]) and pe.valid.tolist() == [True, True]
    assert pe.info == {"source": "camera.npz"}


def test_oracle_depth_is_the_rooms_depth_at_each_pose():
    from harness.scene import Room

    room = {"x": 3, "up": 2, "down": 1, "front": 4, "back": 5}
    c2w = np.stack([np.eye(4), np.eye(4)])
    c2w[1, :3, 3] = [0.5, 0.0, 1.0]
    d = wf.OracleDepth(room, c2w, K, 80, 100).depth(np.zeros((1, 80, 100, 3), np.uint8), [1])
    want = Room(x=3.0, up=2.0, down=1.0, front=4.0, back=5.0).depth_map(c2w[1], K, 80, 100)
    assert d.shape == (1, 80, 100) and np.array_equal(d[0], want)


@pytest.mark.parametrize("mode, window", [("rotation", 9), ("general", 15)])
def test_the_flow_window_of_a_step_is_the_one_of_its_motion(monkeypatch, mode, window):
    """Rotation steps track with ``flow_window`` (9 px), steps that may translate with ``flow_window_general``
    (15 px): the essential-matrix fit of a small baseline is the noisier one (docs/evaluation.md, "Performance")."""
    import cv2

    seen = []
    real = cv2.calcOpticalFlowPyrLK

    def spy(*args, **kwargs):
        seen.append((kwargs["winSize"], kwargs["maxLevel"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(cv2, "calcOpticalFlowPyrLK", spy)
    from tests.evaluate.test_perceive_once import _rendered

    fr, K_ = _rendered(mode, n=3)
    wf.ClassicalPoseEstimator(threads=1).estimate(fr, [0, 1, 2], K_, mode)
    assert seen == [((window, window), 3)] * 2
    seen.clear()
    wf.ClassicalPoseEstimator(flow_window=5, flow_window_general=7, threads=1).estimate(fr, [0, 1, 2], K_, mode)
    assert seen == [((5, 5) if mode == "rotation" else (7, 7), 3)] * 2


@pytest.mark.parametrize("mode, every", [("rotation", 4), ("general", 2)])
@pytest.mark.parametrize("threads", [1, 3])
def test_corners_are_detected_on_every_4th_rotation_step_and_every_2nd_general_one(monkeypatch, mode, every, threads):
    """``redetect`` (4) for rotation steps, ``redetect_general`` (2) for steps that may translate: a step in between
    tracks the points the previous step handed on, whatever the thread count (docs/evaluation.md, "Performance")."""
    detected = []
    lock = threading.Lock()

    def step(self, g0, g1, Kc, Kinv, m, p0=None):
        if p0 is None:
            with lock:
                detected.append(int(g0[0, 0]))  # each frame's grey value is its index
        return np.eye(4), True, 30, np.zeros((30, 1, 2), np.float32)

    monkeypatch.setattr(wf.ClassicalPoseEstimator, "_step", step)
    frames = np.repeat(np.arange(150, dtype=np.uint8)[:, None, None, None], 3, axis=3) * np.ones((1, 2, 2, 3), np.uint8)
    wf.ClassicalPoseEstimator(threads=threads).estimate(frames, list(range(150)), np.eye(3), mode)
    assert sorted(detected) == list(range(0, 149, every))
