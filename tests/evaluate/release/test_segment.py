"""The layout of a camera path read from the path alone (evaluate/release/segment.py): holds, moves, amplitudes,
speeds and profiles, without any preset's phase windows.

Expected values come from explicit numbers (signals laid out here) or from the preset YAML's own fields, never from
the segmentation itself."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from evaluate.release.segment import (
    Layout,
    Move,
    _fit,
    _fit_axis,
    _runs,
    _shape_and_slope,
    find_cores,
    layout_of,
    path_layout,
    phase_windows,
    shape_fn,
    yaw_pitch_signal,
)
from tests.evaluate.release.footage import RotationLayout, Sweep, lr_sweeps, rotation
from trajectories.conventions import rot_y


def _signal(layout: RotationLayout, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    angles = layout.angles()
    return angles + np.random.default_rng(seed).normal(0, noise, angles.shape)


@pytest.mark.parametrize("profile,hold", [("constant", 7), ("eased", 33), ("eased", 0)])
def test_holds_sweeps_and_profile_from_a_noisy_signal(profile, hold):
    truth = RotationLayout(lr_sweeps(2, 80.0, 0.8, profile), initial_hold=hold, total=460)
    lay = layout_of(_signal(truth, noise=0.05), ("yaw", "pitch"), "rotation", floor=0.05)
    assert lay.profile == profile
    assert lay.initial_hold == hold
    assert lay.sequence() == "left right left right"
    assert [m.kind for m in lay.moves] == ["D", "R", "D", "R"]
    for m, s in zip(lay.moves, truth.sweeps):
        assert abs(m.frames - s.frames) < 1.0 and abs(m.delta - s.degrees) < 0.5
        assert abs(m.speed - 0.8) < 0.01
    assert lay.holds() == [0, 0, 0]
    assert lay.final_hold == 460 - 1 - hold - 4 * 100


def test_holds_between_sweeps_and_an_up_down_cycle():
    sweeps = (Sweep("yaw", -90.0, 120, hold=12), Sweep("yaw", 90.0, 120, hold=5), Sweep("pitch", 60.0, 80),
              Sweep("pitch", -60.0, 80))
    lay = layout_of(_signal(RotationLayout(sweeps, 3, 440)), ("yaw", "pitch"), "rotation", floor=0.05)
    assert lay.sequence() == "left right up down"
    assert lay.holds() == [12, 5, 0]
    assert [round(m.reach) for m in lay.departures()] == [90, 60]
    phases, segs = phase_windows(lay)
    # V: frame 0 + 3 held; D1: 120 moving + 12 held; R1: 120 + 5; D2: 80; R2: 80; H: the rest
    assert phases == {"V": (0, 4), "D1": (4, 136), "R1": (136, 261), "D2": (261, 341), "R2": (341, 421),
                      "H": (421, 440)}
    assert [s[1] for s in segs if s[2] == "move"] == ["L", "R", "U", "D"]


def test_a_still_path_has_no_move():
    lay = layout_of(np.zeros((50, 2)), ("yaw", "pitch"), "rotation", floor=0.05)
    assert lay.moves == () and lay.initial_hold == 49 and lay.profile == "none"
    assert phase_windows(lay)[0] == {"V": (0, 50)}


def test_yaw_and_pitch_signal_follows_the_conventions():
    """The footage renderer's rotation is the harness's ``rot_y(yaw) @ rot_x(pitch)`` (left = negative yaw,
    up = positive pitch), and the signal reads a 90-degree pitch without an Euler singularity."""
    from trajectories.conventions import rotmat_from_yaw_pitch, se3

    for yaw, pitch in ((-30.0, 0.0), (0.0, 90.0), (45.0, 0.0), (0.0, -20.0)):
        assert np.allclose(rotation(yaw, pitch), rotmat_from_yaw_pitch(np.radians(yaw), np.radians(pitch)))
    R = np.stack([rotation(0, 0), rotation(-30, 0), rotation(0, 90)])
    assert np.allclose(yaw_pitch_signal(se3(R)), [[0, 0], [-30, 0], [0, 90]])


@pytest.mark.parametrize("name", ["lrlr_sym_0p75dpf", "lrud_sym_0p75dpf", "lrlrlr_sym_1dpf", "lr_hold_sym_0p5dpf"])
def test_a_presets_exact_path_reads_as_its_yaml_says(name):
    """The preset's expected layout (what ``release check`` compares with) restates the YAML's own numbers: one
    sweep per direction of ``cycles`` and back, each ``yaw_deg``/``pitch_deg`` at ``deg_per_frame``, the
    ``hold_frames`` and ``profile``; the phases equal the builder's."""
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov

    doc = group_yaml("trajectory", name)
    spec = TrajectorySpec.from_dict(doc)
    n = spec.min_frames() + 13
    path = build_path(spec, n, 16.0, intrinsics_from_fov(60, 320, 192), 192, 320, check_fov=False)
    lay = path_layout(path.c2w)
    holds = doc.get("hold_frames") or {}
    assert lay.initial_hold == holds.get("initial", 0)
    assert lay.profile == ("eased" if doc["profile"] == "cosine" else "constant")
    want = []
    for c in doc["cycles"]:
        back = {"left": "right", "right": "left", "up": "down", "down": "up"}[c]
        want += [c, back]
    assert lay.sequence() == " ".join(want)
    for m in lay.departures():
        assert abs(m.reach - doc["yaw_deg" if m.axis == "yaw" else "pitch_deg"]) < 1e-6
    for m in lay.moves:
        assert abs(m.speed - doc["deg_per_frame"]) < 0.005 * doc["deg_per_frame"]
    # the builder's final hold is the 13 frames past the preset's fewest; the hold after the last return reads as
    # part of it (a video cannot tell them apart)
    assert lay.final_hold == 13 + holds.get("revisit", 0)
    phases = phase_windows(lay)[0]
    assert phases["V"] == path.phases["V"] and phases["D1"] == path.phases["D1"]
    if not holds.get("revisit"):
        assert phases == path.phases


def test_a_square_reads_as_four_legs_that_come_back():
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov

    spec = TrajectorySpec.from_dict(group_yaml("trajectory", "translate_square"))
    path = build_path(spec, 493, 16.0, intrinsics_from_fov(60, 320, 192), 192, 320, check_fov=False)
    lay = path_layout(path.c2w)
    assert lay.kind == "translation" and lay.sequence() == "F R B L"
    assert lay.return_errors[0] < 1e-9
    assert abs(sum(m.frames for m in lay.moves) - 4 * lay.moves[0].frames) < 1e-3


def test_a_layout_round_trips_through_its_dict():
    truth = RotationLayout(lr_sweeps(1, 90.0, 0.5, "eased"), initial_hold=20, total=400)
    lay = layout_of(_signal(truth), ("yaw", "pitch"), "rotation", floor=0.05)
    assert Layout.from_dict(lay.to_dict()) == lay


def test_overlapping_measured_moves_give_phases_that_tile_the_video_in_time_order():
    """Two axes' fits can overlap (a diagonal sweep, a pitch that starts before the yaw return ends): the phases
    still tile [0, T) in time order, each starting where the one before it ends, as a built path's do (the
    memory metrics find a revisit's departure by its range)."""
    from evaluate.release.segment import Move

    moves = (Move("yaw", 9.0, 40.0, -90.0, "D", "left", 90.0),      # frames 10..50
             Move("yaw", 49.0, 40.0, 90.0, "R", "right", 0.0),      # 50..90
             Move("pitch", 79.0, 30.0, 60.0, "D", "up", 60.0),      # 80..110: starts inside the return
             Move("pitch", 84.0, 10.0, -10.0, "R", "down", 50.0),   # 85..95: inside the departure before it
             Move("pitch", 119.0, 30.0, -50.0, "R", "down", 0.0))   # 120..150
    phases, segs = phase_windows(Layout("rotation", 170, moves, "constant"))
    spans = list(phases.values())
    assert spans[0][0] == 0 and spans[-1][1] == 170
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), phases
    assert all(a <= b for a, b in spans), phases
    assert phases == {"V": (0, 10), "D1": (10, 50), "R1": (50, 90), "D2": (90, 110), "R2": (110, 150),
                      "H": (150, 170)}


# -- rules of the segmentation (fast, in process) -------------------------------------------------------------------
# Rules of the path segmentation (evaluate/release/segment.py) on small hand-made signals: the move shapes, the step
# labelling and bridging of :func:`find_cores`, the per-axis fits and their RMS, the layout's filtering of tiny moves,
# :func:`path_layout`'s rotation/translation split and return error, and :func:`phase_windows`' labels and segments.
# Every expected value is worked out from the signal laid out in the test (a ramp of ``n`` frames starting after frame
# ``s`` reaches ``k / n`` of its change at frame ``s + k``).


def _ramp(T: int, moves: list[tuple[float, float, float]], profile: str = "constant", y0: float = 0.0) -> np.ndarray:
    """One axis: ``y0 + sum delta * shape((t - start) / frames)`` over ``moves`` = [(start, frames, delta)]."""
    t = np.arange(T, dtype=np.float64)
    f = shape_fn(profile)
    return y0 + sum((d * f((t - s) / n) for s, n, d in moves), np.zeros(T))


def _steps(*runs: tuple[float, int]) -> np.ndarray:
    """A (T, 1) signal built from per-step velocities: ``runs`` = [(velocity, steps)], starting at 0."""
    v = np.concatenate([np.full(k, float(x)) for x, k in runs])
    return np.concatenate([[0.0], np.cumsum(v)])[:, None]


# --- move shapes and their slopes -----------------------------------------------------------------------------------

def test_the_constant_shape_is_the_clipped_normalised_time():
    f = shape_fn("constant")
    assert np.allclose(f(np.array([-0.5, 0.0, 0.25, 0.75, 1.0, 1.5])), [0.0, 0.0, 0.25, 0.75, 1.0, 1.0])


def test_the_eased_shape_is_a_half_cosine_clipped_to_the_move():
    f = shape_fn("eased")
    s = np.array([-1.0, 0.0, 0.25, 0.5, 0.75, 1.0, 2.0])
    want = [0.0, 0.0, 0.5 - 0.5 * math.sqrt(0.5), 0.5, 0.5 + 0.5 * math.sqrt(0.5), 1.0, 1.0]
    assert np.allclose(f(s), want)


@pytest.mark.parametrize("profile", ["constant", "eased"])
def test_shape_and_slope_agree_with_the_shape_and_its_derivative(profile):
    u = np.array([-0.5, 0.25, 0.5, 0.75, 1.5])
    f, df = _shape_and_slope(profile, u)
    assert np.allclose(f, shape_fn(profile)(u))
    h = 1e-6
    numeric = (shape_fn(profile)(u + h) - shape_fn(profile)(u - h)) / (2 * h)
    assert np.allclose(df, numeric, atol=1e-5)


def test_the_eased_slope_peaks_at_half_pi_mid_move():
    f, df = _shape_and_slope("eased", np.array([0.0, 0.5, 1.0]))
    assert np.allclose(f, [0.0, 0.5, 1.0])
    assert np.allclose(df, [0.0, math.pi / 2, 0.0])


def test_the_constant_slope_is_zero_on_the_held_frames_at_either_end_of_the_move():
    """``start`` is the last frame still at the level before the move and ``start + frames`` the first at the new
    level: both kinks count as outside the move (slope 0), only frames strictly inside it move."""
    _, df = _shape_and_slope("constant", np.array([0.0, 0.5, 1.0]))
    assert list(df) == [0.0, 1.0, 0.0]


# --- Move and Layout --------------------------------------------------------------------------------------------------

def test_a_moves_speed_is_its_change_over_its_frames_even_below_one_frame():
    assert Move("yaw", 3.0, 0.5, -2.0, "D", "left", 2.0).speed == pytest.approx(4.0)
    assert Move("yaw", 3.0, 1.0, -2.0, "D", "left", 2.0).speed == pytest.approx(2.0)


def test_a_move_of_no_frames_has_no_speed():
    assert math.isnan(Move("yaw", 3.0, 0.0, -2.0, "D", "left", 2.0).speed)


def test_a_still_layout_holds_nothing_after_its_last_move():
    lay = Layout("rotation", 40)
    assert lay.final_hold == 0 and lay.initial_hold == 39


def test_holds_before_between_and_after_the_moves_and_their_kinds():
    moves = (Move("yaw", 4.0, 10.0, -10.0, "D", "left", 10.0), Move("yaw", 19.0, 10.0, 10.0, "R", "right", 0.0),
             Move("pitch", 36.0, 5.0, 5.0, "D", "up", 5.0))
    lay = Layout("rotation", 50, moves, "constant")
    assert lay.initial_hold == 4 and lay.holds() == [5, 7] and lay.final_hold == 50 - 1 - 41
    assert lay.departures() == [moves[0], moves[2]] and lay.returns() == [moves[1]]
    d = lay.to_dict()
    d["residuals"] = {"constant": 1.5, "eased": 2}
    assert Layout.from_dict(d).residuals == {"constant": 1.5, "eased": 2.0}


def test_a_layout_dict_without_residuals_reads_as_none_measured():
    lay = Layout.from_dict({"kind": "rotation", "frames": 12})
    assert lay == Layout("rotation", 12)
    assert Layout.from_dict({"kind": "rotation", "frames": 12, "residuals": None}).residuals == {}


# --- runs and cores ---------------------------------------------------------------------------------------------------

def test_runs_list_each_stretch_of_equal_non_zero_labels():
    assert _runs(np.array([1, 1, 0, -2, -2, -2, 0, 0])) == [(1, 0, 2), (-2, 3, 6)]
    assert _runs(np.array([1, 1, 1, 0])) == [(1, 0, 3)]
    assert _runs(np.array([3])) == [(3, 0, 1)]


def test_a_core_is_found_in_a_three_frame_signal():
    """Three frames make two steps: enough for a move when a single step counts."""
    sig = np.array([[0.0], [1.0], [2.0]])
    assert find_cores(sig, floor=0.1, shortest=1) == [(0, 1, 0, 2)]
    assert find_cores(sig[:2], floor=0.1, shortest=1) == []


def test_cores_name_the_axis_and_sign_of_each_move():
    # axis 1 moves down (negative) over steps 5..15, axis 0 moves up over steps 20..30
    v = np.zeros((40, 2))
    v[5:15, 1] = -2.0
    v[20:30, 0] = 1.0
    sig = np.concatenate([np.zeros((1, 2)), np.cumsum(v, axis=0)])
    assert find_cores(sig, floor=0.01) == [(1, -1, 5, 15), (0, 1, 20, 30)]


def test_a_step_exactly_at_the_floor_does_not_move():
    """A step moves when its speed *exceeds* the threshold: steps at exactly the floor are held."""
    sig = _steps((0.0, 4), (1.0, 6), (0.0, 4), (0.5, 6), (0.0, 4))
    assert find_cores(sig, floor=0.5) == [(0, 1, 4, 10)]
    assert find_cores(sig, floor=0.25) == [(0, 1, 4, 10), (0, 1, 14, 20)]


def test_held_steps_label_without_a_numeric_warning():
    sig = _steps((0.0, 5), (-1.0, 6), (0.0, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert find_cores(sig, floor=0.1) == [(0, -1, 5, 11)]


def test_runs_split_by_at_most_bridge_held_steps_are_one_move():
    # a gap of 3 held steps survives the 5-step median filter; 3 <= bridge (3) joins the runs
    sig = _steps((0.0, 4), (1.0, 5), (0.0, 3), (1.0, 5), (0.0, 4))
    assert find_cores(sig, floor=0.1) == [(0, 1, 4, 17)]
    assert find_cores(sig, floor=0.1, bridge=2) == [(0, 1, 4, 9), (0, 1, 12, 17)]


def test_runs_split_by_more_than_bridge_held_steps_stay_apart():
    sig = _steps((0.0, 4), (1.0, 5), (0.0, 4), (1.0, 5), (0.0, 4))
    assert find_cores(sig, floor=0.1) == [(0, 1, 4, 9), (0, 1, 13, 18)]
    assert find_cores(sig, floor=0.1, bridge=4) == [(0, 1, 4, 18)]


def test_only_the_latest_move_is_extended_by_a_bridged_run():
    # up (4..9), down (9..14), 3 held, down again (17..22): the down runs join, the up run stays as it is
    sig = _steps((0.0, 4), (1.0, 5), (-1.0, 5), (0.0, 3), (-1.0, 5), (0.0, 4))
    assert find_cores(sig, floor=0.1) == [(0, 1, 4, 9), (0, -1, 9, 22)]


def test_runs_of_opposite_sign_are_never_joined():
    sig = _steps((0.0, 4), (1.0, 5), (0.0, 3), (-1.0, 5), (0.0, 4))
    assert find_cores(sig, floor=0.1) == [(0, 1, 4, 9), (0, -1, 12, 17)]


def test_a_run_of_exactly_shortest_steps_is_a_move():
    sig = _steps((0.0, 4), (1.0, 3), (0.0, 6))
    assert find_cores(sig, floor=0.1) == [(0, 1, 4, 7)]
    assert find_cores(sig, floor=0.1, shortest=4) == []


def test_a_two_step_run_at_the_end_is_noise():
    # the median filter's nearest-mode edge keeps the last two steps' run; it is shorter than 3 steps
    sig = _steps((0.0, 4), (1.0, 6), (0.0, 6), (1.0, 2))
    assert find_cores(sig, floor=0.1) == [(0, 1, 4, 10)]
    assert find_cores(sig, floor=0.1, shortest=2) == [(0, 1, 4, 10), (0, 1, 16, 18)]


# --- fits ------------------------------------------------------------------------------------------------------------

def _model(T: int, y0: float, p: np.ndarray, profile: str) -> np.ndarray:
    return _ramp(T, [tuple(p[3 * j: 3 * j + 3]) for j in range(len(p) // 3)], profile, y0)


@pytest.mark.parametrize("profile", ["constant", "eased"])
def test_an_exact_ramp_is_fitted_exactly_from_its_core(profile):
    T, s, n, d = 60, 12.0, 30.0, -45.0
    y = _ramp(T, [(s, n, d)], profile, y0=5.0)
    cores = [(a, b) for _, _, a, b in find_cores(y[:, None], floor=0.01)]
    p, rms = _fit_axis(y, cores, profile)
    assert np.allclose(p, [s, n, d], atol=1e-3)
    assert rms < 1e-3


def test_the_fit_rms_is_the_root_mean_square_of_its_residual():
    """An eased move fitted with the constant profile cannot be exact: the RMS it reports is that of the fitted
    model's residual."""
    T = 50
    y = _ramp(T, [(10.0, 30.0, 40.0)], "eased", y0=2.0)
    p, rms = _fit_axis(y, [(13, 37)], "constant")
    r = _model(T, 2.0, p, "constant") - y
    assert rms > 0.1
    assert rms == pytest.approx(float(np.sqrt(np.mean(r ** 2))), rel=1e-6)


def test_a_few_wrong_frames_do_not_pull_the_fit():
    """The soft-L1 loss (its scale 1 % of the signal's range): five frames inside a 10-unit move that the estimator
    put 3 units too high leave the move's start and length within a tenth of a frame."""
    T, s, n, d = 60, 10.0, 30.0, 10.0
    y = _ramp(T, [(s, n, d)], "constant")
    y[[20, 22, 26, 30, 34]] += 3.0
    p, _ = _fit_axis(y, [(10, 40)], "constant")
    assert np.allclose(p, [s, n, d], atol=0.1)


@pytest.fixture
def least_squares_calls(monkeypatch):
    """Each call of scipy's least_squares (the fit imports it at call time): its arguments, then the real fit."""
    import scipy.optimize

    real, calls = scipy.optimize.least_squares, []

    def spy(fun, x0, **kw):
        calls.append((fun, np.array(x0, np.float64), kw))
        return real(fun, x0, **kw)

    monkeypatch.setattr(scipy.optimize, "least_squares", spy)
    return calls


@pytest.mark.parametrize("profile", ["constant", "eased"])
def test_the_residual_is_the_model_minus_the_signal_from_its_level_at_frame_zero(profile, least_squares_calls):
    """Three moves on one axis, the first under way from frame 1: the residual at the true parameters is 0, and
    with no change at all it is the signal's distance from its frame 0."""
    T = 60
    truth = [(0.0, 10.0, 6.0), (25.0, 12.0, -9.0), (45.0, 8.0, 4.0)]
    y = _ramp(T, truth, profile, y0=2.0)
    _fit_axis(y, [(0, 9), (26, 36), (46, 52)], profile)
    fun, _, _ = least_squares_calls[0]
    assert y[1] != y[0]
    assert np.allclose(fun(np.array(truth).ravel()), 0.0, atol=1e-12)
    assert np.allclose(fun(np.array([[0.0, 10.0, 0.0], [25.0, 12.0, 0.0], [45.0, 8.0, 0.0]]).ravel()), 2.0 - y)


@pytest.mark.parametrize("profile", ["constant", "eased"])
def test_the_analytic_jacobian_is_the_residuals_derivative(profile, least_squares_calls):
    T = 50
    y = _ramp(T, [(3.0, 10.0, 6.0), (25.0, 12.0, -9.0)], profile, y0=2.0)
    _fit_axis(y, [(3, 13), (25, 37)], profile)
    fun, _, kw = least_squares_calls[0]
    p = np.array([3.3, 9.6, 5.0, 24.6, 12.7, -8.0])  # no frame on a kink
    h = 1e-6
    numeric = np.stack([(fun(p + h * e) - fun(p - h * e)) / (2 * h) for e in np.eye(len(p))], axis=1)
    assert np.allclose(kw["jac"](p), numeric, atol=1e-5)


@pytest.mark.parametrize("profile,s,n", [("constant", 12.0, 40.0), ("eased", 12.0, 50.0)])
def test_the_fit_starts_from_what_the_core_says_of_the_move(profile, s, n, least_squares_calls):
    """A constant move's core is the move itself; an eased move's core is where its speed exceeds 0.3 of its peak,
    about its middle 80 % (from 10 % to 90 % of its frames): the first guess undoes that and starts within a frame
    of the true start and length."""
    T = 80
    y = _ramp(T, [(s, n, 30.0)], profile)
    cores = find_cores(y[:, None], floor=0.01)
    assert len(cores) == 1
    _fit_axis(y, [cores[0][2:]], profile)
    x0 = least_squares_calls[0][1]
    assert abs(x0[0] - s) < 1.0 and abs(x0[1] - n) < 1.0
    assert abs(x0[2] - 30.0) < 3.0


@pytest.mark.parametrize("s,n", [(0.0, 20.0), (5.0, 20.0), (30.0, 19.0)])
def test_a_constant_moves_first_guess_of_its_change_is_the_whole_change(s, n, least_squares_calls):
    """The change across a constant move's core, with a margin past either end, is the move's whole change, also
    for a move under way at frame 0 or one ending on the last frame."""
    T = 50
    y = _ramp(T, [(s, n, 30.0)])
    cores = find_cores(y[:, None], floor=0.01)
    _fit_axis(y, [cores[0][2:]], "constant")
    x0 = least_squares_calls[0][1]
    assert x0[2] == pytest.approx(30.0)


def test_a_first_guess_of_change_is_not_touched_by_moves_two_frames_either_side(least_squares_calls):
    # up 10 (frames 2..12), held 2, down 30 (14..34), held 2, up 10 (36..46)
    y = _ramp(50, [(2.0, 10.0, 10.0), (14.0, 20.0, -30.0), (36.0, 10.0, 10.0)])
    cores = find_cores(y[:, None], floor=0.01)
    assert [c[2:] for c in cores] == [(2, 12), (14, 34), (36, 46)]
    _fit_axis(y, [c[2:] for c in cores], "constant")
    x0 = least_squares_calls[0][1]
    assert x0[[2, 5, 8]] == pytest.approx([10.0, -30.0, 10.0])


def test_a_move_longer_than_twice_the_video_is_cut_at_twice_its_length():
    """Frames are bounded by twice the path's length: an eased move of 2.5 T starting after frame 0, of which the
    video shows the first 40 %, is fitted with 2 T frames, and not exactly."""
    T = 20
    y = _ramp(T, [(0.0, 50.0, 100.0)], "eased")
    cores = find_cores(y[:, None], floor=0.001)
    p, rms = _fit_axis(y, [c[2:] for c in cores], "eased")
    assert p[1] == pytest.approx(2 * T, abs=1e-3)
    assert rms > 0.05


def test_the_joint_rms_counts_unfitted_axes_by_their_change_from_frame_zero():
    """RMS over all axes and frames: a fitted axis adds its fit's mean square, an axis without a move its squared
    distance from its own frame 0 (here 5.0, then 4.5 / 5.5 alternating)."""
    T = 40
    ax0 = _ramp(T, [(8.0, 20.0, 30.0)], "eased", y0=1.0)
    ax1 = 5.0 + np.where(np.arange(T) % 2 == 0, 0.5, -0.5)
    ax1[0] = 5.0
    sig = np.stack([ax0, ax1], axis=1)
    found, rms = _fit(sig, [(0, 1, 10, 27)], "constant")
    p, rms0 = _fit_axis(ax0, [(10, 27)], "constant")
    assert rms0 > 0.1
    assert found == [(0, float(p[0]), float(p[1]), float(p[2]))]
    sq1 = 0.25 * (T - 1)
    assert rms == pytest.approx(math.sqrt((rms0 ** 2 * T + sq1) / (2 * T)), rel=1e-6)


def test_an_exact_fit_on_still_axes_has_no_rms():
    T = 30
    sig = np.stack([_ramp(T, [(5.0, 10.0, 10.0)]), np.full(T, 3.0), np.full(T, -2.0)], axis=1)
    found, rms = _fit(sig, [(0, 1, 5, 15)], "constant")
    assert rms < 1e-6
    assert np.allclose(found, [(0, 5.0, 10.0, 10.0)], atol=1e-4)


def test_fitted_moves_of_all_axes_come_in_time_order():
    T = 60
    sig = np.stack([_ramp(T, [(30.0, 10.0, 10.0)]), _ramp(T, [(5.0, 10.0, -10.0)])], axis=1)
    found, _ = _fit(sig, find_cores(sig, floor=0.01), "constant")
    assert [m[0] for m in found] == [1, 0]
    assert np.allclose([m[1] for m in found], [5.0, 30.0], atol=1e-3)


# --- layout -----------------------------------------------------------------------------------------------------------

def test_a_move_under_two_percent_of_the_largest_change_is_dropped():
    # yaw: a 100-degree move at 1 deg/frame; pitch: 1.5 degrees in 3 frames (fast enough to be a core)
    T = 150
    sig = np.stack([_ramp(T, [(10.0, 100.0, 100.0)]), _ramp(T, [(130.0, 3.0, 1.5)])], axis=1)
    assert len(find_cores(sig, floor=0.05)) == 2
    lay = layout_of(sig, ("yaw", "pitch"), "rotation", floor=0.05)
    assert lay.sequence() == "right"
    sig[:, 1] *= 2.0  # 3 degrees: above 2 %
    assert layout_of(sig, ("yaw", "pitch"), "rotation", floor=0.05).sequence() == "right up"


def test_a_sweep_and_its_way_back_are_a_departure_and_a_return_with_their_reach():
    T = 80
    sig = np.stack([_ramp(T, [(5.0, 20.0, -30.0), (35.0, 20.0, 30.0)]), np.zeros(T)], axis=1)
    lay = layout_of(sig, ("yaw", "pitch"), "rotation", floor=0.05)
    assert [(m.kind, m.direction) for m in lay.moves] == [("D", "left"), ("R", "right")]
    assert [m.reach for m in lay.moves] == pytest.approx([30.0, 0.0], abs=1e-3)


# --- exact paths ------------------------------------------------------------------------------------------------------

def _c2w(positions: np.ndarray, rotations: np.ndarray | None = None) -> np.ndarray:
    T = len(positions)
    c2w = np.tile(np.eye(4), (T, 1, 1))
    c2w[:, :3, 3] = positions
    if rotations is not None:
        c2w[:, :3, :3] = rotations
    return c2w


def test_yaw_and_pitch_are_relative_to_the_first_pose():
    from tests.evaluate.release.footage import rotation

    R = np.stack([rotation(30.0, 0.0), rotation(50.0, 0.0), rotation(10.0, 0.0)])
    assert np.allclose(yaw_pitch_signal(_c2w(np.zeros((3, 3)), R)), [[0, 0], [20, 0], [-20, 0]], atol=1e-9)


def test_a_turn_away_from_the_origin_is_a_rotation():
    T = 100  # a slow turn: 0.5 degrees a frame
    yaws = _ramp(T, [(5.0, 80.0, -40.0)])
    c2w = _c2w(np.tile([10.0, -2.0, 3.0], (T, 1)), rot_y(np.radians(yaws)))
    lay = path_layout(c2w)
    assert lay.kind == "rotation" and lay.sequence() in ("left", "right")
    assert lay.moves[0].reach == pytest.approx(40.0, abs=1e-3)


def test_a_path_whose_positions_stray_by_one_nanometre_is_a_translation():
    T = 20
    pos = np.zeros((T, 3))
    pos[10:, 0] = 1e-9
    assert path_layout(_c2w(pos)).kind == "translation"


def test_a_translations_return_error_is_its_distance_from_the_start_after_the_last_leg():
    # +x 10 over 20 frames from frame 0, held 5, back over 20 frames, held 15
    T = 60
    x = _ramp(T, [(0.0, 20.0, 10.0), (25.0, 20.0, -10.0)])
    pos = np.stack([x, np.zeros(T), np.zeros(T)], axis=1)
    lay = path_layout(_c2w(pos))
    assert lay.sequence() == "R L"
    assert lay.return_errors == pytest.approx((0.0,), abs=1e-3)


def test_a_last_leg_cut_off_by_the_video_end_is_measured_at_the_last_frame():
    """An eased back leg that would end at frame T, one after the last: its return error is the last frame's
    distance from the start, 10 * (1 - shape(19 / 20))."""
    T = 50
    x = _ramp(T, [(4.0, 20.0, 10.0), (30.0, 20.0, -10.0)], "eased")  # the second leg ends at frame 50 == T
    pos = np.stack([x, np.zeros(T), np.zeros(T)], axis=1)
    lay = path_layout(_c2w(pos))
    assert lay.sequence() == "R L" and lay.profile == "eased"
    assert round(lay.moves[-1].end) == T
    want = 10.0 * (0.5 + 0.5 * math.cos(0.95 * math.pi))
    assert lay.return_errors == pytest.approx((want,), abs=1e-3)


# --- phases -----------------------------------------------------------------------------------------------------------

def _m(start: float, frames: float, kind: str = "D", axis: str = "yaw", direction: str = "left") -> Move:
    return Move(axis, start, frames, 10.0, kind, direction, 10.0)


def test_phases_and_segments_with_holds_between_and_after_the_moves():
    # V: 0..5; left 5..15 hold 15..20 (D1); right 20..30 hold 30..32 (R1); H 32..40
    lay = Layout("rotation", 40, (_m(4.0, 10.0), _m(19.0, 10.0, "R", direction="right")))
    phases, segs = phase_windows(lay)
    assert phases == {"V": (0, 5), "D1": (5, 20), "R1": (20, 30), "H": (30, 40)}
    assert segs == [("V", "hold", "hold", 0, 5), ("D1", "L", "move", 5, 15), ("D1", "hold", "hold", 15, 20),
                    ("R1", "R", "move", 20, 30), ("H", "hold", "hold", 30, 40)]


def test_a_hold_after_each_of_three_moves_belongs_to_the_move_before_it():
    lay = Layout("rotation", 50, (_m(4.0, 10.0), _m(19.0, 10.0, "R", direction="right"), _m(34.0, 5.0)))
    phases, segs = phase_windows(lay)
    assert phases == {"V": (0, 5), "D1": (5, 20), "R1": (20, 35), "D2": (35, 40), "H": (40, 50)}
    assert [s for s in segs if s[2] == "hold"] == [("V", "hold", "hold", 0, 5), ("D1", "hold", "hold", 15, 20),
                                                   ("R1", "hold", "hold", 30, 35), ("H", "hold", "hold", 40, 50)]


def test_consecutive_departures_are_one_phase():
    lay = Layout("rotation", 60, (_m(4.0, 10.0), _m(14.0, 10.0, axis="pitch", direction="up"),
                                  _m(24.0, 10.0, "R", axis="pitch", direction="down"),
                                  _m(34.0, 10.0, "R", direction="right")))
    phases, segs = phase_windows(lay)
    assert phases == {"V": (0, 5), "D1": (5, 25), "R1": (25, 45), "H": (45, 60)}
    assert [s[1] for s in segs if s[2] == "move"] == ["L", "U", "D", "R"]


def test_a_return_before_any_departure_opens_the_first_cycle():
    lay = Layout("rotation", 30, (_m(4.0, 10.0, "R", direction="right"), _m(14.0, 10.0)))
    phases, _ = phase_windows(lay)
    assert phases == {"V": (0, 5), "R1": (5, 15), "D2": (15, 25), "H": (25, 30)}


def test_a_translations_legs_are_its_departure_and_its_last_leg_the_return():
    legs = tuple(Move(ax, s, 10.0, 1.0, "D", d, 1.0) for ax, s, d in
                 (("z", 4.0, "F"), ("x", 14.0, "R"), ("z", 24.0, "B"), ("x", 34.0, "L")))
    phases, segs = phase_windows(Layout("translation", 50, legs))
    assert phases == {"V": (0, 5), "D1": (5, 35), "R1": (35, 45), "H": (45, 50)}
    assert [(s[0], s[1]) for s in segs if s[2] == "move"] == [("D1", "F"), ("D1", "R"), ("D1", "B"), ("R1", "L")]


def test_a_still_translation_is_all_view():
    assert phase_windows(Layout("translation", 12)) == ({"V": (0, 12)}, [("V", "hold", "hold", 0, 12)])


def test_a_move_measured_before_frame_zero_covers_no_frame():
    lay = Layout("rotation", 20, (_m(-4.0, 2.0), _m(4.0, 10.0, "R", direction="right")))
    phases, segs = phase_windows(lay)
    assert [s for s in segs if s[2] == "move"] == [("R1", "R", "move", 5, 15)]
    assert phases["V"] == (0, 1)


def test_a_move_shorter_than_a_whole_frame_gives_no_segment():
    # start 10, end 10.5: both round to frame 10, so the move's frames are (11, 11)
    lay = Layout("rotation", 20, (_m(10.0, 0.5),))
    phases, segs = phase_windows(lay)
    assert segs == [("V", "hold", "hold", 0, 11), ("H", "hold", "hold", 11, 20)]
    assert phases == {"V": (0, 11), "D1": (11, 11), "H": (11, 20)}


def test_a_return_that_starts_inside_the_departure_begins_where_the_departure_ends():
    # left 5..25, right measured from 20..30: R1 starts at 25, where D1 ends
    lay = Layout("rotation", 40, (_m(4.0, 20.0), _m(19.0, 10.0, "R", direction="right")))
    phases, _ = phase_windows(lay)
    assert phases == {"V": (0, 5), "D1": (5, 25), "R1": (25, 30), "H": (30, 40)}


# -- layout_of on fitted moves given exactly ------------------------------------------------------------------------

def _layout_of_fitted(monkeypatch, found):
    """layout_of with the cores and every profile's fit replaced by ``found`` [(axis, start, frames, delta)]."""
    import evaluate.release.segment as seg

    monkeypatch.setattr(seg, "find_cores", lambda signal, floor: [(0, 0, 1, 2)])
    monkeypatch.setattr(seg, "_fit", lambda signal, cores, profile: (found, 0.0))
    return layout_of(np.zeros((40, 2)), ("yaw", "pitch"), "rotation", 0.1)


def test_a_move_of_exactly_two_percent_of_the_largest_is_kept(monkeypatch):
    lay = _layout_of_fitted(monkeypatch, [(0, 0.0, 10.0, 50.0), (1, 20.0, 10.0, 1.0), (1, 30.0, 5.0, -0.5)])
    assert [(m.axis, m.delta) for m in lay.moves] == [("yaw", 50.0), ("pitch", 1.0)]  # 0.5 is under 2 % of 50


def test_a_move_that_ends_as_far_from_the_start_on_the_other_side_is_a_return(monkeypatch):
    lay = _layout_of_fitted(monkeypatch, [(0, 0.0, 10.0, 10.0), (0, 20.0, 10.0, -20.0), (0, 30.0, 5.0, 30.0)])
    assert [(m.kind, m.reach) for m in lay.moves] == [("D", 10.0), ("R", 10.0), ("D", 20.0)]


def test_a_vertical_leg_is_up_when_it_moves_to_negative_y_and_down_to_positive_y(monkeypatch):
    import evaluate.release.segment as seg

    monkeypatch.setattr(seg, "find_cores", lambda signal, floor: [(1, 0, 1, 2)])
    monkeypatch.setattr(seg, "_fit", lambda signal, cores, profile: ([(1, 0.0, 10.0, -1.0), (1, 20.0, 10.0, 1.0)],
                                                                      0.0))
    lay = layout_of(np.zeros((40, 3)), ("x", "y", "z"), "translation", 0.1)
    assert [(m.axis, m.direction, m.kind) for m in lay.moves] == [("y", "U", "D"), ("y", "D", "R")]  # OpenCV: y down
