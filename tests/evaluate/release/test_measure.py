"""``release check``'s measurement on footage rendered outside the harness's renderer (tests/evaluate/release/
footage.py: a panorama remapped per camera rotation, a box room of textured planes for translation), laid out from
explicit numbers: fields of view of 60-90 degrees, initial holds of 0-40 frames, 80- and 90-degree sweeps, eased
and constant speeds, a square loop. The done-when of issue 41 item 3: per video the initial hold within 2 frames,
the amplitude within 1.5 degrees and the speed within 3 %, whatever the timing offset."""

from __future__ import annotations

import numpy as np
import pytest

import evaluate.perception.weightfree as weightfree
from evaluate.release import measure as ms
from evaluate.release.measure import measure_frames, measured_path
from evaluate.release.segment import Layout, Move
from tests.evaluate.release.footage import RotationLayout, Sweep, lr_sweeps, rotation_video, square, translation_video
from trajectories.conventions import rotmat_from_yaw_pitch

HOLD_FRAMES, AMPLITUDE_DEG, SPEED_REL = 2, 1.5, 0.03


def _assert_recovered(truth: RotationLayout, frames: np.ndarray, hfov: float, m=None) -> None:
    m = m or measure_frames(frames, "rotation")
    lay = m.layout
    assert abs(m.hfov_deg - hfov) < 1.0, (m.hfov_deg, hfov)
    assert abs(lay.initial_hold - truth.initial_hold) <= HOLD_FRAMES, (lay.initial_hold, truth.initial_hold)
    assert len(lay.moves) == len(truth.sweeps), lay.sequence()
    profile = {s.profile for s in truth.sweeps}.pop()
    assert lay.profile == profile
    level = {"yaw": 0.0, "pitch": 0.0}
    for got, want in zip(lay.moves, truth.sweeps):
        level[want.axis] += want.degrees
        speed = abs(want.degrees) / want.frames
        assert abs(got.speed - speed) <= SPEED_REL * speed, (got, want)
        assert got.axis == want.axis and np.sign(got.delta) == np.sign(want.degrees)
        if got.kind == "D":
            assert abs(got.reach - abs(level[want.axis])) <= AMPLITUDE_DEG, (got, want)
    assert all(e < 1.0 for e in lay.return_errors), lay.return_errors


SHORT = RotationLayout((Sweep("yaw", -80.0, 100, "eased"), Sweep("yaw", 80.0, 100, "eased")), 17, 240)


@pytest.fixture(scope="module")
def short():
    """A small eased LR cycle after a 17-frame hold (72-degree field of view), and its measurement."""
    frames, _ = rotation_video(SHORT, hfov_deg=72.0, size=(96, 160), seed=1)
    return frames, measure_frames(frames, "rotation")


def test_an_eased_sweep_after_a_hold_is_recovered(short):
    _assert_recovered(SHORT, short[0], 72.0, short[1])


CASES = [  # (sweeps, initial hold, frames, hfov): every preset shape, both profiles, 80 and 90 degrees
    (lr_sweeps(2, 90.0, 0.75), 0, 493, 60.0),
    (lr_sweeps(2, 90.0, 0.75, "eased"), 23, 513, 75.0),
    (lr_sweeps(3, 80.0, 1.0), 8, 493, 90.0),
    (lr_sweeps(3, 90.0, 1.0, "eased"), 40, 600, 60.0),
    (lr_sweeps(2, 90.0, 0.75, axes=("yaw", "pitch")), 5, 493, 70.0),
    (lr_sweeps(1, 90.0, 0.5, "eased"), 30, 493, 65.0),
    (lr_sweeps(3, 80.0, 1.0, "eased"), 13, 551, 82.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("sweeps,hold,total,hfov", CASES)
def test_every_layout_is_recovered_within_the_bounds(sweeps, hold, total, hfov):
    truth = RotationLayout(sweeps, hold, total)
    frames, _ = rotation_video(truth, hfov_deg=hfov, size=(144, 256), seed=hold)
    _assert_recovered(truth, frames, hfov)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["eased", "constant"])
def test_a_square_translation_is_measured(profile):
    """Four legs Forward, Right, Backward, Left with their turn points, the profile, the initial hold, and the
    return to the start (the parallax between frame 0 and the frame after the last leg)."""
    truth = square(90, initial_hold=30, total=420, profile=profile)
    frames, _ = translation_video(truth, hfov_deg=70.0, size=(120, 208), seed=2)
    m = measure_frames(frames, "translation", hfov_deg=70.0)
    lay = m.layout
    assert lay.sequence() == "F R B L" and lay.profile == profile
    assert abs(lay.initial_hold - 30) <= 3
    start = 30.0
    for leg in lay.moves:  # each turn point and each leg's length within 4 frames of the truth
        assert abs(leg.start - start) <= 4 and abs(leg.frames - 90) <= 4, leg
        start += 90
    assert lay.return_errors[0] < 1.0  # percent of the width


def test_a_measured_path_carries_the_measured_phases(short):
    """The camera path an off-preset video is scored on: its phases are the video's own (frame 0 and the 17 held,
    100 frames away, 100 back, the rest held), its poses the measured angles, and it says so."""
    from trajectories.conventions import intrinsics_from_fov

    path = measured_path(short[1].layout, "lr_hold_sym_0p5dpf", 16.0, intrinsics_from_fov(72, 160, 96), 96, 160)
    assert path.params["source"] == "measured" and path.name == "lr_hold_sym_0p5dpf"
    assert path.phases == {"V": (0, 18), "D1": (18, 118), "R1": (118, 218), "H": (218, 240)}
    yaw, _ = path.yaw_pitch_deg()
    assert abs(yaw[117] + 80.0) < 1.5 and abs(yaw[-1]) < 1.0 and yaw[17] == 0.0


# -- rules of the measurement (fast, in process) --------------------------------------------------------------------
# Rules of the release reader's measurement (evaluate/release/measure.py), checked in-process on small synthetic
# inputs whose answers follow by hand: tracked points replaced by known point sets (a pure translation, a known
# rotation, a known camera motion over a random scene), homographies ``K R K^-1`` of a known field of view, fake
# layouts and pose estimators for the wiring of ``_rotation`` / ``_translation`` / ``measure_frames``, and tiny videos
# for ``read_frames``.


W, H = 160, 120


def _K(hfov: float = 70.0, w: int = W, h: int = H) -> np.ndarray:
    return ms.intrinsics(hfov, w, h)


def _Kinv(hfov: float = 70.0) -> np.ndarray:
    Kc = _K(hfov).copy()
    Kc[:2, 2] -= 0.5
    return np.linalg.inv(Kc)


def _grid(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.c_[rng.uniform(30, W - 30, n), rng.uniform(25, H - 25, n)]


def _indexed_frames(n: int, h: int = 4, w: int = 4) -> np.ndarray:
    """Frames whose every pixel holds their index (grey value == index), so a fake tracker can tell them apart."""
    return np.repeat(np.arange(n, dtype=np.uint8)[:, None, None, None], h, 1).repeat(w, 2).repeat(3, 3)


# --- hfov_of / Measurement ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("hfov", [40.0, 60.0, 90.0, 120.0])
def test_hfov_of_inverts_intrinsics(hfov):
    assert ms.hfov_of(_K(hfov, 200, 100), 200) == pytest.approx(hfov, abs=1e-9)


def test_a_measurement_without_optional_fields_reads_as_an_old_unfitted_one():
    lay = Layout("rotation", 5)
    d = {"layout": lay.to_dict(), "hfov_deg": 70, "hfov_source": "given", "width": 32, "height": 24}
    m = ms.Measurement.from_dict(d)
    assert (m.invalid_steps, m.seconds, m.notes) == (0, 0.0, [])
    assert m.version != ms.MEASURE_VERSION  # no version: stored by an older measurement, measured again


def test_a_measurement_stores_its_seconds_to_the_millisecond():
    m = ms.Measurement(Layout("rotation", 5), 70.0, "given", 32, 24, seconds=1.23456)
    assert m.to_dict()["seconds"] == 1.235
    assert ms.Measurement.from_dict(m.to_dict()).seconds == 1.235


# --- tracked --------------------------------------------------------------------------------------------------

def test_a_blank_frame_tracks_no_point():
    g = np.zeros((64, 64), np.uint8)
    a, b = ms.tracked(g, g, 100)
    assert a.shape == (0, 2) and b.shape == (0, 2)


def test_tracked_points_keep_clear_of_the_border():
    rng = np.random.default_rng(3)
    g = (rng.random((60, 80)) * 255).astype(np.uint8)
    import cv2

    g = cv2.GaussianBlur(g, (3, 3), 0)
    a, b = ms.tracked(g, g, 400)
    assert len(a) > 20
    for p in (a, b):
        assert p.min() >= ms.BORDER_PX
        assert np.all(p[:, 0] < 80 - ms.BORDER_PX) and np.all(p[:, 1] < 60 - ms.BORDER_PX)
    assert np.abs(b - a).max() < 0.05  # the same picture: nothing moved


def test_tracked_keeps_points_exactly_at_the_border_distance_and_drops_those_beyond():
    g = np.zeros((64, 80), np.uint8)
    g[8:20, 8:20] = 255  # corners at 8 and 19: kept (8 px from the top-left border)
    g[30:38, 30:38] = 120  # corners 7 px apart: all four are separate corners
    g[40:57, 50:73] = 200  # corners at x = 72 = 80 - 8 and y = 56 = 64 - 8: left out
    a, b = ms.tracked(g, g, 100)
    assert np.array_equal(a, b)
    want = {(8.0, 8.0), (8.0, 19.0), (19.0, 8.0), (19.0, 19.0), (30.0, 30.0), (30.0, 37.0), (37.0, 30.0),
            (37.0, 37.0), (50.0, 40.0)}
    assert set(map(tuple, a.tolist())) == want and len(a) == len(want)


# --- _homographies -------------------------------------------------------------------------------------------

def _fake_tracker(monkeypatch, plan):
    """Replace ``tracked``; ``plan(i, j)`` gives the points for frames i -> j. Returns the calls made."""
    calls = []

    def fake(g0, g1, corners):
        i, j = int(g0[0, 0]), int(g1[0, 0])
        calls.append((i, j, corners))
        return plan(i, j)

    monkeypatch.setattr(ms, "tracked", fake)
    return calls


def _moving(n: int, shift=(5.0, 3.0)):
    a = _grid(n)
    return a, a + np.asarray(shift)


def test_homographies_sample_pairs_step_apart_evenly_from_frame_0(monkeypatch):
    calls = _fake_tracker(monkeypatch, lambda i, j: (np.zeros((0, 2)), np.zeros((0, 2))))
    assert ms._homographies(_indexed_frames(30), 4, 2) == []
    # (30 - 4) // (2 * 2) = 6 frames between samples
    assert [(i, j) for i, j, _ in calls] == [(0, 4), (6, 10), (12, 16), (18, 22), (24, 28)]


def test_homographies_sample_every_frame_when_few(monkeypatch):
    calls = _fake_tracker(monkeypatch, lambda i, j: (np.zeros((0, 2)), np.zeros((0, 2))))
    ms._homographies(_indexed_frames(10), 4, 5)  # (10 - 4) // 10 = 0: every frame
    assert [(i, j) for i, j, _ in calls] == [(i, i + 4) for i in range(6)]


def test_homographies_stop_at_the_pairs_asked_for(monkeypatch):
    _fake_tracker(monkeypatch, lambda i, j: _moving(30))
    Hs = ms._homographies(_indexed_frames(20), 1, 2)
    assert len(Hs) == 2
    np.testing.assert_allclose(Hs[0] / Hs[0][2, 2], [[1, 0, 5], [0, 1, 3], [0, 0, 1]], atol=1e-6)


def test_homographies_need_twenty_tracked_points(monkeypatch):
    _fake_tracker(monkeypatch, lambda i, j: _moving(20 if i == 0 else 19))
    assert len(ms._homographies(_indexed_frames(6), 1, 10)) == 1  # 20 points: kept; 19: left out


def test_homographies_skip_a_pair_of_few_points_without_fitting(monkeypatch):
    _fake_tracker(monkeypatch, lambda i, j: _moving(3))  # too few even to fit a homography
    assert ms._homographies(_indexed_frames(6), 1, 10) == []


def test_homographies_skip_still_pairs_by_the_median_motion(monkeypatch):
    def plan(i, j):
        a = _grid(31, seed=i)
        if i == 0:  # exactly 2 px: moves
            return a, a + [2.0, 0.0]
        if i == 1:  # still points far from the origin
            return a, a.copy()
        if i == 2:  # 21 of 31 move 1 px, 10 move 40 px: the median (1 px) says still, the mean would not
            b = a.copy()
            b[:21, 0] += 1.0
            b[21:, 0] += 40.0
            return a, b
        if i == 3:  # 2.5 px: moves
            return a, a + [2.5, 0.0]
        return np.zeros((0, 2)), np.zeros((0, 2))

    _fake_tracker(monkeypatch, plan)
    Hs = ms._homographies(_indexed_frames(8), 1, 10)
    assert len(Hs) == 2
    assert [round(float(h[0, 2] / h[2, 2]), 3) for h in Hs] == [2.0, 2.5]


def test_homographies_need_twenty_inliers(monkeypatch):
    def plan(i, j):
        a = _grid(22, seed=i)
        b = a + [5.0, 3.0]
        rng = np.random.default_rng(i)
        if i == 0:  # 18 on the translation, 4 off it by 2 px (outside the 1.5 px RANSAC threshold)
            b[18:, 1] += 2.0 * np.where(rng.random(4) < 0.5, -1, 1)
        if i == 1:  # 18 on it, 4 far off: never 20 inliers
            b[18:] += rng.uniform(20, 40, (4, 2))
        return a, b

    _fake_tracker(monkeypatch, plan)
    assert ms._homographies(_indexed_frames(3), 1, 10) == []


def test_a_degenerate_pair_fits_no_homography(monkeypatch):
    def plan(i, j):
        a = np.c_[np.linspace(20, 140, 25), np.full(25, 60.0)]  # all on one line
        return a, a + [6.0, 0.0]

    _fake_tracker(monkeypatch, plan)
    assert ms._homographies(_indexed_frames(3), 1, 10) == []


# --- estimate_hfov -------------------------------------------------------------------------------------------

def _rotation_homographies(hfov: float, w: int = 32, h: int = 24, scale: float = 2.7) -> list[np.ndarray]:
    Kc = ms.intrinsics(hfov, w, h)
    Kc[:2, 2] -= 0.5
    out = []
    for yaw, pitch in [(3.0, 1.0), (-2.0, 2.5), (4.0, -1.5), (1.0, 3.0)]:
        R = rotmat_from_yaw_pitch(np.radians(yaw), np.radians(pitch))
        out.append(scale * Kc @ R.T @ np.linalg.inv(Kc))
    return out


@pytest.mark.parametrize("hfov, want", [(47.3, 47.3), (21.45, 21.45), (100.85, 100.85),
                                        (18.5, 19.0),     # below the 20-degree grid: its refinement's low end
                                        (150.5, 149.95)])  # above it: the top of the refinement
def test_estimate_hfov_finds_the_field_of_view_that_makes_homographies_rotations(monkeypatch, hfov, want):
    Hs = _rotation_homographies(hfov)
    monkeypatch.setattr(ms, "_homographies", lambda frames, step, pairs: Hs)
    got = ms.estimate_hfov(np.zeros((10, 24, 32, 3), np.uint8))
    assert got == pytest.approx(want, abs=1e-6)


def test_estimate_hfov_needs_three_moving_pairs(monkeypatch):
    Hs = _rotation_homographies(47.3)
    monkeypatch.setattr(ms, "_homographies", lambda frames, step, pairs: Hs[:2])
    assert ms.estimate_hfov(np.zeros((10, 24, 32, 3), np.uint8)) is None
    monkeypatch.setattr(ms, "_homographies", lambda frames, step, pairs: Hs[:3])
    assert ms.estimate_hfov(np.zeros((10, 24, 32, 3), np.uint8)) == pytest.approx(47.3, abs=1e-6)


# --- _rotation_step ------------------------------------------------------------------------------------------

def _rotated(n: int, yaw_deg: float, hfov: float = 70.0, seed: int = 0):
    """Points and their images under a camera turn: ray_1 = Q ray_0."""
    Kc = np.linalg.inv(_Kinv(hfov))
    Q = rotmat_from_yaw_pitch(np.radians(yaw_deg), np.radians(0.5)).T
    a = _grid(n, seed)
    r = np.c_[a, np.ones(n)] @ np.linalg.inv(Kc).T
    p = (r @ Q.T) @ Kc.T
    return a, p[:, :2] / p[:, 2:], Q


def test_rotation_step_recovers_a_known_turn(monkeypatch):
    a, b, Q = _rotated(40, 2.0)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert ok
    np.testing.assert_allclose(got, Q, atol=1e-9)


def test_rotation_step_needs_twenty_tracked_points(monkeypatch):
    a, b, Q = _rotated(20, 2.0)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert ok and np.allclose(got, Q, atol=1e-9)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a[:19], b[:19]))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert not ok and got.shape == (3, 3) and np.array_equal(got, np.eye(3))


def test_rotation_step_reads_a_still_pair_as_the_same_picture(monkeypatch):
    a = _grid(31)
    b = a + np.random.default_rng(1).normal(0, 0.005, a.shape)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert ok and np.array_equal(got, np.eye(3))


def test_rotation_step_still_by_the_median_not_the_mean(monkeypatch):
    a = _grid(31)
    b = a.copy()
    b[16:, 0] += 1.0  # 15 of 31 move: median 0, mean 0.48 px
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert ok and np.array_equal(got, np.eye(3))


def test_rotation_step_at_the_still_threshold_fits(monkeypatch):
    y = np.linspace(20, 100, 25)
    a = np.c_[np.zeros(25), y]
    b = np.c_[np.full(25, 0.02), y]  # exactly 0.02 px (not still), on one line: nothing to fit
    assert float(np.median(np.linalg.norm(b - a, axis=1))) == 0.02
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert not ok and np.array_equal(got, np.eye(3))


def test_rotation_step_needs_twenty_homography_inliers(monkeypatch):
    a, b, Q = _rotated(24, 2.0)
    b = b.copy()
    b[20:, 1] += np.array([1.5, -1.5, 1.5, -1.5])  # 4 off by 1.5 px: outliers at the 1-px threshold
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert ok and np.allclose(got, Q, atol=1e-9)  # 20 inliers, the outliers left out of the fit
    b2 = b.copy()
    b2[19, 0] += 1.5
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b2))
    got, ok = ms._rotation_step(None, None, _Kinv())
    assert not ok and got.shape == (3, 3) and np.array_equal(got, np.eye(3))


# --- translation_direction -----------------------------------------------------------------------------------

def _moved(t, n: int = 60, hfov: float = 70.0, seed: int = 0, xmin: float = -0.6):
    """Pixels of a random scene before and after the camera moves by ``t`` (same orientation)."""
    rng = np.random.default_rng(seed)
    Kc = np.linalg.inv(_Kinv(hfov))
    Z = rng.uniform(4, 10, n)
    X = np.c_[rng.uniform(xmin, 0.6, n) * Z, rng.uniform(-0.4, 0.4, n) * Z, Z]
    pa = X @ Kc.T
    pb = (X - np.asarray(t)) @ Kc.T
    return pa[:, :2] / pa[:, 2:], pb[:, :2] / pb[:, 2:]


@pytest.mark.parametrize("t", [(0.0, 0.0, 0.3), (0.0, 0.0, -0.3), (0.3, 0.0, 0.0), (-0.3, 0.0, 0.0),
                               (0.1, -0.2, 0.25), (0.0, 0.3, 0.0), (-0.2, 0.1, -0.3)])
def test_translation_direction_is_the_cameras_unit_motion(t):
    a, b = _moved(t)
    got = ms.translation_direction(a, b, _Kinv())
    np.testing.assert_allclose(got, np.asarray(t) / np.linalg.norm(t), atol=1e-6)


@pytest.mark.parametrize("t", [(0.3, 0.0, 0.015), (-0.3, 0.0, -0.015)])
def test_translation_direction_of_a_sideways_move_seen_on_one_side(t):
    a, b = _moved(t, xmin=0.3)  # all points right of the centre
    got = ms.translation_direction(a, b, _Kinv())
    np.testing.assert_allclose(got, np.asarray(t) / np.linalg.norm(t), atol=1e-6)


def test_translation_direction_leaves_out_the_worst_fifth():
    t = np.array([0.1, 0.05, 0.3])
    a, b = _moved(t, n=100, seed=2)
    rng = np.random.default_rng(5)
    b = b.copy()
    b[:8] += rng.uniform(-15, 15, (8, 2))  # 8 % wild matches
    got = ms.translation_direction(a, b, _Kinv())
    np.testing.assert_allclose(got, t / np.linalg.norm(t), atol=1e-6)


def test_translation_direction_needs_eight_points():
    a, b = _moved((0.0, 0.0, 0.3), n=10)
    assert ms.translation_direction(a, b, _Kinv()) is not None  # 10, then the best 8
    assert ms.translation_direction(a[:9], b[:9], _Kinv()) is None  # 9, then the best 7
    assert ms.translation_direction(a[:7], b[:7], _Kinv()) is None


# --- _translation_step ---------------------------------------------------------------------------------------

def test_translation_step_is_the_direction_times_the_median_flow(monkeypatch):
    t = np.array([0.1, 0.0, 0.3])
    a, b = _moved(t, n=40)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    d, ok = ms._translation_step(None, None, _Kinv())
    flow = float(np.median(np.linalg.norm(b - a, axis=1)))
    assert ok and flow > 0.5
    np.testing.assert_allclose(d, t / np.linalg.norm(t) * flow, atol=1e-6)


def test_translation_step_needs_twenty_points(monkeypatch):
    a, b = _moved((0.0, 0.0, 0.3), n=20)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    d, ok = ms._translation_step(None, None, _Kinv())
    assert ok and d[2] > 0
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a[:19], b[:19]))
    d, ok = ms._translation_step(None, None, _Kinv())
    assert not ok and d.shape == (3,) and np.array_equal(d, np.zeros(3))


def test_translation_step_still_by_the_median_flow(monkeypatch):
    a = _grid(31)
    b = a.copy()
    b[16:, 0] += 1.0  # median 0, mean 0.48 px
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    d, ok = ms._translation_step(None, None, _Kinv())
    assert ok and d.shape == (3,) and np.array_equal(d, np.zeros(3))
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, a.copy()))
    d, ok = ms._translation_step(None, None, _Kinv())
    assert ok and np.array_equal(d, np.zeros(3))


def test_translation_step_at_the_floor_fits(monkeypatch):
    y = np.linspace(20, 100, 25)
    a, b = np.c_[np.zeros(25), y], np.c_[np.full(25, 0.05), y]
    assert float(np.median(np.linalg.norm(b - a, axis=1))) == ms.TRANSLATION_FLOOR_PX
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    monkeypatch.setattr(ms, "translation_direction", lambda a, b, Kinv: np.array([1.0, 0.0, 0.0]))
    d, ok = ms._translation_step(None, None, _Kinv())
    assert ok and d == pytest.approx([0.05, 0.0, 0.0])


def test_translation_step_without_a_direction_is_not_fitted(monkeypatch):
    a, b = _moved((0.0, 0.0, 0.3), n=30)
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, c: (a, b))
    monkeypatch.setattr(ms, "translation_direction", lambda a, b, Kinv: None)
    d, ok = ms._translation_step(None, None, _Kinv())
    assert not ok and d.shape == (3,) and np.array_equal(d, np.zeros(3))


# --- _translation / _rotation wiring --------------------------------------------------------------------------

class _FakeEstimator:
    calls: list = []
    value: list = []

    def parallax_to(self, ref, frames, K):
        _FakeEstimator.calls.append((int(ref[0, 0, 0]), [int(f[0, 0, 0]) for f in frames]))
        return np.array(_FakeEstimator.value[:len(frames)], np.float64)

    angles_to = parallax_to


@pytest.fixture
def fake_estimator(monkeypatch):
    _FakeEstimator.calls = []
    monkeypatch.setattr(weightfree, "ClassicalPoseEstimator", _FakeEstimator)
    return _FakeEstimator


def _move(axis, start, frames, delta, kind="D"):
    return Move(axis, start, frames, delta, kind, "F", abs(delta))


def test_translation_sums_steps_into_a_signal_from_zero(monkeypatch, fake_estimator):
    steps = [(np.array([1.0, 0.0, 0.5]), True), (np.zeros(3), False), (np.array([0.0, 2.0, 0.0]), True),
             (np.zeros(3), False)]
    monkeypatch.setattr(ms, "_pair_steps", lambda frames, K, step: steps)
    seen = {}

    def fake_layout(signal, axes, kind, floor):
        seen["signal"] = np.asarray(signal)
        return Layout(kind, len(signal))

    monkeypatch.setattr(ms, "layout_of", fake_layout)
    lay, invalid = ms._translation(_indexed_frames(5), _K())
    np.testing.assert_array_equal(seen["signal"], [[0, 0, 0], [1, 0, 0.5], [1, 0, 0.5], [1, 2, 0.5], [1, 2, 0.5]])
    assert invalid == 2
    assert lay.moves == () and lay.return_errors == () and fake_estimator.calls == []


@pytest.mark.parametrize("last_end, frame", [(9.6, 10), (30.0, 19)])
def test_translation_return_error_is_frame_0s_parallax_to_after_the_last_leg(monkeypatch, fake_estimator,
                                                                             last_end, frame):
    monkeypatch.setattr(ms, "_pair_steps", lambda frames, K, step: [(np.zeros(3), True)] * (len(frames) - 1))
    moves = (_move("z", 1.0, 4.0, 2.0), _move("z", last_end - 3.0, 3.0, -2.0, "R"))
    monkeypatch.setattr(ms, "layout_of", lambda s, axes, kind, floor: Layout(kind, len(s), moves, "constant"))
    fake_estimator.value = [8.0]
    frames = _indexed_frames(20, 4, 32)
    lay, invalid = ms._translation(frames, _K())
    assert fake_estimator.calls == [(0, [frame])]
    assert lay.return_errors == (25.0,)  # 8 px of a 32-px-wide frame
    assert lay.moves == moves and invalid == 0


def test_translation_return_error_unmeasurable_is_nan(monkeypatch, fake_estimator):
    monkeypatch.setattr(ms, "_pair_steps", lambda frames, K, step: [(np.zeros(3), True)] * (len(frames) - 1))
    moves = (_move("x", 1.0, 4.0, 2.0),)
    monkeypatch.setattr(ms, "layout_of", lambda s, axes, kind, floor: Layout(kind, len(s), moves, "constant"))
    fake_estimator.value = [np.inf]
    lay, _ = ms._translation(_indexed_frames(8), _K())
    assert len(lay.return_errors) == 1 and np.isnan(lay.return_errors[0])


def test_rotation_errors_are_direct_with_the_chained_angle_where_unmeasurable(monkeypatch, fake_estimator):
    T = 12
    R = np.stack([rotmat_from_yaw_pitch(np.radians(float(i)), 0.0) for i in range(T)])  # frame i: i degrees
    monkeypatch.setattr(ms, "rotation_c2w", lambda frames, K: (R, 3))
    moves = (_move("yaw", 0.0, 3.0, 10.0), _move("yaw", 3.0, 3.6, -10.0, "R"), _move("yaw", 7.0, 2.0, 5.0),
             _move("yaw", 9.0, 8.0, -5.0, "R"))
    seen = {}

    def fake_layout(signal, axes, kind, floor):
        seen["signal"] = np.asarray(signal)
        return Layout(kind, len(signal), moves, "eased", {"eased": 0.1})

    monkeypatch.setattr(ms, "layout_of", fake_layout)
    fake_estimator.value = [1.5, np.inf]
    lay, invalid = ms._rotation(_indexed_frames(T), _K())
    assert fake_estimator.calls == [(0, [7, 11])]  # returns end at 6.6 -> 7 and 17 -> the last frame
    assert lay.return_errors == pytest.approx((1.5, 11.0))
    assert invalid == 3 and lay.moves == moves and lay.profile == "eased"
    assert seen["signal"][:, 0] == pytest.approx(np.arange(T, dtype=float))


def test_rotation_without_returns_has_no_errors(monkeypatch, fake_estimator):
    R = np.tile(np.eye(3), (6, 1, 1))
    monkeypatch.setattr(ms, "rotation_c2w", lambda frames, K: (R, 0))
    moves = (_move("yaw", 0.0, 3.0, 10.0),)
    monkeypatch.setattr(ms, "layout_of", lambda s, axes, kind, floor: Layout(kind, len(s), moves, "constant"))
    lay, _ = ms._rotation(_indexed_frames(6), _K())
    assert lay.return_errors == () and fake_estimator.calls == []


def test_a_slow_turn_of_a_fifth_of_a_degree_a_frame_is_a_move(monkeypatch, fake_estimator):
    # the floor of what counts as turning is 0.05 degrees a frame: the release's slowest presets turn 0.5
    Q = rotmat_from_yaw_pitch(np.radians(0.2), 0.0).T
    steps = [(np.eye(3), True)] * 5 + [(Q, True)] * 30 + [(np.eye(3), True)] * 5
    monkeypatch.setattr(ms, "_pair_steps", lambda frames, K, step: steps)
    lay, _ = ms._rotation(_indexed_frames(41), _K())
    assert [(m.axis, m.direction) for m in lay.moves] == [("yaw", "right")]
    assert lay.moves[0].delta == pytest.approx(6.0, abs=0.05)


def test_rotation_c2w_chains_steps_and_counts_unfitted(monkeypatch):
    Q = rotmat_from_yaw_pitch(np.radians(2.0), 0.0).T
    monkeypatch.setattr(ms, "_pair_steps", lambda frames, K, step: [(Q, True), (np.eye(3), False), (Q, True)])
    R, invalid = ms.rotation_c2w(_indexed_frames(4), _K())
    assert invalid == 1
    np.testing.assert_allclose(R[3], rotmat_from_yaw_pitch(np.radians(4.0), 0.0), atol=1e-12)


def test_a_rotation_step_is_the_same_whatever_opencvs_global_random_state(monkeypatch):
    import cv2

    rng = np.random.default_rng(3)
    a = _grid(200)
    H = _K() @ np.array([[0.995, 0.0, 0.1], [0.0, 1.0, 0.0], [-0.1, 0.0, 0.995]]) @ np.linalg.inv(_K())
    b = cv2.perspectiveTransform(a[None], H)[0] + rng.normal(0, 0.4, a.shape)
    b[:50] = _grid(50, seed=9)  # a quarter of outliers: RANSAC's draws matter
    monkeypatch.setattr(ms, "tracked", lambda g0, g1, n: (a, b))
    steps = []
    for seed in (1, 2):
        cv2.setRNGSeed(seed)  # a caller's state: the step must not depend on it
        steps.append(ms._rotation_step(None, None, _Kinv()))
    assert steps[0][1] and steps[1][1] and np.array_equal(steps[0][0], steps[1][0])


def test_pair_steps_runs_every_adjacent_pair_with_the_opencv_grid_intrinsics():
    K = _K()
    seen = []
    out = ms._pair_steps(_indexed_frames(5), K, lambda g0, g1, Kinv: seen.append(Kinv) or (int(g0[0, 0]),
                                                                                            int(g1[0, 0])))
    assert sorted(out) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    np.testing.assert_allclose(seen[0], _Kinv(), atol=1e-12)


# --- measure_frames / measure_video --------------------------------------------------------------------------

@pytest.fixture
def fakes(monkeypatch):
    seen = {"estimate": 0}

    def estimate(frames):
        seen["estimate"] += 1
        return seen.get("estimated")

    def layout(kind):
        def run(frames, K):
            seen[kind] = K
            return Layout(kind, len(frames)), 2
        return run

    monkeypatch.setattr(ms, "estimate_hfov", estimate)
    monkeypatch.setattr(ms, "_rotation", layout("rotation"))
    monkeypatch.setattr(ms, "_translation", layout("translation"))
    return seen


FR = np.zeros((3, 24, 32, 3), np.uint8)


def test_a_given_field_of_view_is_used_as_is(fakes):
    m = ms.measure_frames(FR, "rotation", hfov_deg=55.0)
    assert (m.hfov_deg, m.hfov_source, fakes["estimate"]) == (55.0, "given", 0)
    np.testing.assert_allclose(fakes["rotation"], ms.intrinsics(55.0, 32, 24))
    assert (m.width, m.height, m.invalid_steps, m.notes) == (32, 24, 2, [])
    assert 0.0 <= m.seconds < 5.0


def test_a_rotations_field_of_view_is_estimated(fakes):
    fakes["estimated"] = 81.0
    m = ms.measure_frames(FR, "rotation")
    assert (m.hfov_deg, m.hfov_source, fakes["estimate"], m.notes) == (81.0, "estimated", 1, [])
    np.testing.assert_allclose(fakes["rotation"], ms.intrinsics(81.0, 32, 24))


def test_an_unmeasurable_field_of_view_falls_back_with_a_note(fakes):
    m = ms.measure_frames(FR, "rotation", fallback_hfov_deg=66.0)
    assert (m.hfov_deg, m.hfov_source) == (66.0, "given")
    assert len(m.notes) == 1 and "66 deg assumed" in m.notes[0]


def test_a_translation_takes_the_fallback_without_estimating(fakes):
    m = ms.measure_frames(FR, "translation")
    assert (m.hfov_deg, m.hfov_source, fakes["estimate"], m.notes) == (60.0, "given", 0, [])
    np.testing.assert_allclose(fakes["translation"], ms.intrinsics(60.0, 32, 24))
    assert m.layout.kind == "translation"


def test_measure_video_falls_back_like_measure_frames(monkeypatch, fakes, tmp_path):
    monkeypatch.setattr(ms, "read_frames", lambda video, width: FR)
    m = ms.measure_video(tmp_path / "v.mp4", "translation")
    assert m.hfov_deg == 60.0


# --- read_frames ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def video(tmp_path_factory):
    from tests.evaluate.release.footage import write_video

    rng = np.random.default_rng(0)
    frames = (rng.random((5, 48, 64, 3)) * 255).astype(np.uint8)
    return write_video(tmp_path_factory.mktemp("v") / "v.mp4", frames)


def test_read_frames_scales_to_the_width_keeping_the_aspect(video):
    assert ms.read_frames(video, 32).shape == (5, 24, 32, 3)
    assert ms.read_frames(video, 30).shape == (5, 22, 30, 3)  # 22.5 rows: an even 22


def test_read_frames_never_upscales(video):
    assert ms.read_frames(video, 128).shape == (5, 48, 64, 3)


def test_read_frames_keeps_at_least_two_rows(video):
    assert ms.read_frames(video, 2).shape[1] == 2


def test_read_frames_stops_at_the_limit(video):
    assert len(ms.read_frames(video, 32, limit=3)) == 3


def test_read_frames_reads_the_first_video_stream(tmp_path):
    from tests.support.clips import encode_streams

    path = encode_streams(tmp_path / "two.mkv", [("mpeg4", "yuv420p", 48, 64), ("mpeg4", "yuv420p", 32, 32)])
    assert ms.read_frames(path, 64).shape == (3, 48, 64, 3)


# --- measured_path -------------------------------------------------------------------------------------------

def _path(moves, frames=20, profile="constant", kind="rotation", hfov=65.0):
    lay = Layout(kind, frames, tuple(moves), profile)
    return ms.measured_path(lay, "p", 16.0, _K(hfov, 64, 48), 48, 64, kind)


def _yaw_of(c2w):
    R = c2w[:3, :3]
    return float(np.degrees(np.arctan2(R[0, 2], R[2, 2])))


@pytest.mark.parametrize("profile, quarter", [("constant", 0.25), ("eased", 0.5 - 0.5 * np.cos(np.pi / 4))])
def test_measured_path_turns_by_the_measured_angle_with_the_profile(profile, quarter):
    p = _path([Move("yaw", 2.0, 8.0, 40.0, "D", "right", 40.0)], profile=profile)
    assert _yaw_of(p.c2w[4]) == pytest.approx(40.0 * quarter)
    assert _yaw_of(p.c2w[-1]) == pytest.approx(40.0) and _yaw_of(p.c2w[2]) == pytest.approx(0.0)
    assert p.params["source"] == "measured" and p.params["hfov_deg"] == pytest.approx(65.0)


def test_measured_path_pitches_by_the_measured_angle():
    p = _path([Move("pitch", 2.0, 8.0, 20.0, "D", "up", 20.0)])
    np.testing.assert_allclose(p.c2w[-1][:3, :3], rotmat_from_yaw_pitch(0.0, np.radians(20.0)), atol=1e-12)
    np.testing.assert_allclose(p.c2w[6][:3, :3], rotmat_from_yaw_pitch(0.0, np.radians(10.0)), atol=1e-12)


def test_measured_path_moves_one_unit_per_leg_along_its_sign():
    p = _path([Move("x", 1.0, 4.0, 3.7, "D", "R", 3.7), Move("z", 6.0, 4.0, -0.2, "D", "B", 0.2)],
              kind="translation")
    np.testing.assert_allclose(p.c2w[-1][:3, 3], [1.0, 0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(p.c2w[3][:3, 3], [0.5, 0.0, 0.0], atol=1e-12)
    p = _path([Move("y", 1.0, 4.0, -2.5, "D", "D", 2.5)], kind="translation")  # a vertical leg: along y only
    np.testing.assert_allclose(p.c2w[-1][:3, 3], [0.0, -1.0, 0.0], atol=1e-12)


def test_measured_path_starts_at_the_identity():
    p = _path([Move("yaw", -1.4, 10.0, 30.0, "D", "right", 30.0)])  # starts a frame before frame 0
    np.testing.assert_array_equal(p.c2w[0], np.eye(4))
    assert _yaw_of(p.c2w[1]) == pytest.approx(6.0)  # 2 of 10 frames in
    assert _yaw_of(p.c2w[-1]) == pytest.approx(30.0)


def test_measured_path_gives_a_move_at_least_one_frame():
    p = _path([Move("yaw", 3.0, 0.3, 10.0, "D", "right", 10.0)])
    assert _yaw_of(p.c2w[3]) == pytest.approx(0.0) and _yaw_of(p.c2w[4]) == pytest.approx(10.0)
