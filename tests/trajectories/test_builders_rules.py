"""Rules of the trajectory builders (trajectories/builders.py): spec checks and the frame layout, one per test, in process."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from harness.config_groups import group_yaml
from trajectories import TrajectoryError, TrajectorySpec, build_path
from trajectories.conventions import rotmat_from_yaw_pitch, se3
from trajectories.paper import TABLE, Excursion, Layout, load_paper_numbers, measure_layout

K = np.array([[480.0, 0, 416], [0, 480.0, 240], [0, 0, 1]])  # as test_release_presets.py: 832 x 480


def _spec(name: str, **over) -> TrajectorySpec:
    return TrajectorySpec.from_dict({**group_yaml("trajectory", name), **over})


def _build(spec: TrajectorySpec, n: int):
    return build_path(spec, n, 16, K, 480, 832)


def _segments(path) -> list[tuple[str, str, str, int, int]]:
    return [(s.phase, s.label, s.kind, s.start, s.end) for s in path.segments]


# -- normalised time ----------------------------------------------------------------------------------------------

def test_normalised_time_needs_two_frames_for_each_of_its_segments():
    # LRLR: V, 2 x (L, away hold, R, revisit hold), H = 10 segments; the square: V, F, R, B, L, revisit hold, H = 7
    assert TrajectorySpec(name="lrlr", cycles=("left", "left")).min_frames() == 20
    assert TrajectorySpec(name="square", kind="square").min_frames() == 14


# -- the frame layout's checks ------------------------------------------------------------------------------------

# The release's presets lay out 480 frames after frame 0 (INFERENCE, docs/trajectories.md "Release presets"; SANA-WM's
# 481 frames, trajectories/paper_numbers.yaml): 480 frames are one too few. The message names what takes the frames.
@pytest.mark.parametrize("name, what", [("lrlr_sym_0p75dpf", "its sweeps at 0.75 deg per frame"),
                                        ("translate_square", "its legs of 120 frames")])
def test_a_too_short_count_names_what_takes_the_frames(name, what):
    with pytest.raises(TrajectoryError) as err:
        _build(_spec(name), 480)
    assert str(err.value) == (
        f"num_frames=480 is too short for trajectory '{name}': {what} and holds take 481 frames; give the model at "
        f"least 481 frames for it (model.frames_per_trajectory.{name}: 481 or more) or shorten the trajectory's moves")


@pytest.mark.parametrize("dpf,shown", [(float("inf"), "inf"), (float("nan"), "nan"), (0, "0"), (-0.5, "-0.5")])
def test_a_rotation_speed_must_be_a_finite_number_above_zero(dpf, shown):
    with pytest.raises(TrajectoryError) as err:
        _build(_spec("lrlr_sym_0p75dpf", deg_per_frame=dpf), 493)
    assert str(err.value) == f"trajectory.deg_per_frame={shown}: give an angular speed in degrees per frame > 0"


def test_a_square_leg_of_zero_frames_is_refused():
    with pytest.raises(TrajectoryError) as err:
        _build(_spec("translate_square", leg_frames=0), 493)
    assert str(err.value) == "trajectory.leg_frames=0: give a whole number of frames >= 1 for each leg"


def test_a_square_leg_of_one_frame_reaches_each_corner_in_one_frame():
    spec = _spec("translate_square", leg_frames=1, side=2.0)
    assert spec.min_frames() == 5
    path = _build(spec, 5)
    np.testing.assert_allclose(path.c2w[:, :3, 3], [[0, 0, 0], [0, 0, 2], [2, 0, 2], [2, 0, 0], [0, 0, 0]],
                               atol=1e-12)
    assert path.params["units_per_frame"] == 2.0


def test_a_square_given_a_speed_instead_of_legs_counts_no_leg_frames_and_is_refused_naming_the_speed():
    spec = TrajectorySpec(name="sq", kind="square", deg_per_frame=1.0)
    assert spec.min_frames() == 1  # frame 0 only: no legs given (the release checker asks before building)
    with pytest.raises(TrajectoryError) as err:
        _build(spec, 493)
    assert str(err.value).startswith("trajectory.deg_per_frame=1.0: an angular speed applies to rotations only")


# -- the frame layout -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dpf", [90.0, 1000.0])
def test_a_sweep_takes_at_least_one_frame(dpf):
    # 90 / 90 = 1 frame; 90 / 1000 rounds to 0 frames: still 1
    spec = TrajectorySpec(name="lr", cycles=("left",), yaw_deg=90.0, deg_per_frame=dpf)
    assert spec.min_frames() == 3
    path = _build(spec, 3)
    yaw, pitch = path.yaw_pitch_deg()
    np.testing.assert_allclose(yaw, [0.0, -90.0, 0.0], atol=1e-9)
    assert _segments(path) == [("V", "hold", "hold", 0, 1), ("D1", "L", "move", 1, 2), ("R1", "R", "move", 2, 3)]
    assert path.params["achieved_deg_per_frame"] == {"yaw": 90.0}


LRUD_HOLDS = TrajectorySpec(name="lrud_holds", cycles=("left", "up"), yaw_deg=90.0, pitch_deg=60.0,
                            deg_per_frame=30.0, hold_frames={"initial": 1, "away": 2, "revisit": 1})


def test_holds_of_a_rotation_take_their_frames_between_the_sweeps():
    # 1 + initial 1 + (L 3, away 2, R 3, revisit 1) + (U 2, away 2, D 2, revisit 1) = 18; 20 frames: H takes 2
    assert LRUD_HOLDS.min_frames() == 18
    path = _build(LRUD_HOLDS, 20)
    assert _segments(path) == [
        ("V", "hold", "hold", 0, 2),
        ("D1", "L", "move", 2, 5), ("D1", "hold", "hold", 5, 7),
        ("R1", "R", "move", 7, 10), ("R1", "hold", "hold", 10, 11),
        ("D2", "U", "move", 11, 13), ("D2", "hold", "hold", 13, 15), ("R2", "D", "move", 15, 17),
        ("R2", "hold", "hold", 17, 18),
        ("H", "hold", "hold", 18, 20)]
    assert path.phases == {"V": (0, 2), "D1": (2, 7), "R1": (7, 11), "D2": (11, 15), "R2": (15, 18), "H": (18, 20)}


def test_a_rotation_holds_the_far_pose_on_its_own_axis_and_the_start_pose_after_each_return():
    yaw, pitch = _build(LRUD_HOLDS, 20).yaw_pitch_deg()
    np.testing.assert_allclose(yaw, [0, 0, -30, -60, -90, -90, -90, -60, -30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                               atol=1e-9)
    np.testing.assert_allclose(pitch, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30, 60, 60, 60, 30, 0, 0, 0, 0], atol=1e-9)


SQUARE_HOLDS = TrajectorySpec(name="sq_holds", kind="square", side=2.0, leg_frames=2,
                              hold_frames={"initial": 0, "away": 1, "revisit": 1})


def test_the_square_holds_at_its_first_three_corners_and_at_the_start_after_the_return():
    # 1 + (F 2, hold 1) + (R 2, hold 1) + (B 2, hold 1) + L 2 + revisit 1 = 13; 14 frames: H takes 1
    assert SQUARE_HOLDS.min_frames() == 13
    path = _build(SQUARE_HOLDS, 14)
    assert _segments(path) == [
        ("V", "hold", "hold", 0, 1),
        ("D1", "F", "move", 1, 3), ("D1", "hold", "hold", 3, 4),
        ("D1", "R", "move", 4, 6), ("D1", "hold", "hold", 6, 7),
        ("D1", "B", "move", 7, 9), ("D1", "hold", "hold", 9, 10),
        ("R1", "L", "move", 10, 12), ("R1", "hold", "hold", 12, 13),
        ("H", "hold", "hold", 13, 14)]
    assert path.phases == {"V": (0, 1), "D1": (1, 10), "R1": (10, 13), "H": (13, 14)}


def test_the_square_keeps_its_orientation_and_stands_still_at_each_corner_during_a_hold():
    path = _build(SQUARE_HOLDS, 14)
    np.testing.assert_allclose(path.c2w[:, :3, :3], np.broadcast_to(np.eye(3), (14, 3, 3)), atol=1e-12)
    np.testing.assert_allclose(path.c2w[:, :3, 3], [
        [0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 2], [1, 0, 2], [2, 0, 2], [2, 0, 2], [2, 0, 1], [2, 0, 0], [2, 0, 0],
        [1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]], atol=1e-12)


def test_the_speed_a_rotation_achieves_after_rounding_to_whole_frames_is_recorded_per_axis():
    # yaw 90 / 20 = 4.5 -> 4 frames (22.5 deg each); pitch 50 / 20 = 2.5 -> 2 frames (25 deg each)
    spec = TrajectorySpec(name="lrud_rounded", cycles=("left", "up"), yaw_deg=90.0, pitch_deg=50.0,
                          deg_per_frame=20.0)
    assert spec.min_frames() == 13
    assert _build(spec, 13).params["achieved_deg_per_frame"] == {"yaw": 22.5, "pitch": 25.0}


def test_only_the_square_in_frames_records_a_speed_in_scene_units_per_frame():
    assert "units_per_frame" not in _build(TrajectorySpec(name="square", kind="square"), 14).params
    assert _build(SQUARE_HOLDS, 14).params["units_per_frame"] == 1.0  # side 2 / 2 frames a leg


# -- the layout read back from the poses (trajectories/paper.py, what the paper's counts are checked on) -------------

def test_the_layout_of_a_rotation_with_holds_is_read_back_from_its_poses():
    lay = measure_layout(_build(LRUD_HOLDS, 20).c2w)
    assert lay == Layout(frames=20, initial_hold=1, motion=10, settle=16, final_static=4, interior_hold=5,
                         mean_speed=pytest.approx(30.0), rotates=True, translates=False, starts_at_identity=True,
                         excursions=(Excursion(2, 9, "yaw", "left", pytest.approx(90.0), pytest.approx(0.0, abs=1e-9)),
                                     Excursion(11, 16, "pitch", "up", pytest.approx(60.0),
                                               pytest.approx(0.0, abs=1e-9))))


def test_the_layout_of_the_square_with_holds_is_read_back_from_its_poses():
    lay = measure_layout(_build(SQUARE_HOLDS, 14).c2w)
    assert lay == Layout(frames=14, initial_hold=0, motion=8, settle=11, final_static=3, interior_hold=3,
                         mean_speed=pytest.approx(1.0), rotates=False, translates=True, starts_at_identity=True,
                         excursions=(Excursion(1, 11, "translation", "FRBL", pytest.approx(2 * np.sqrt(2)),
                                               pytest.approx(0.0, abs=1e-12)),))


def test_a_path_without_motion_is_all_initial_hold_and_static_tail():
    lay = measure_layout(np.broadcast_to(np.eye(4), (3, 4, 4)))
    assert lay == Layout(frames=3, initial_hold=2, motion=0, settle=0, final_static=3, interior_hold=0,
                         mean_speed=0.0, rotates=False, translates=False, starts_at_identity=True, excursions=())


def test_a_path_that_ends_away_reports_its_last_excursion_unreturned():
    # LRUD_HOLDS cut after its away hold (frames 0-5: yaw 0, 0, -30, -60, -90, -90)
    lay = measure_layout(_build(LRUD_HOLDS, 20).c2w[:6])
    assert lay.excursions == (Excursion(2, 6, "yaw", "left", pytest.approx(90.0), pytest.approx(90.0)),)
    assert (lay.motion, lay.settle, lay.final_static) == (3, 4, 2)


def test_the_layout_of_a_translation_does_not_depend_on_its_scale():
    c2w = _build(SQUARE_HOLDS, 14).c2w.copy()
    c2w[:, :3, 3] *= 1e-10  # a square of side 2e-10: a step is still a move, relative to the path's extent
    lay = measure_layout(c2w)
    assert (lay.initial_hold, lay.motion, lay.settle, lay.final_static, lay.interior_hold) == (0, 8, 11, 3, 3)
    assert lay.translates and lay.excursions[0].direction == "FRBL"


def test_a_translation_step_below_a_billionth_of_the_extent_is_no_move():
    c2w = _build(SQUARE_HOLDS, 14).c2w.copy()
    c2w[3, 0, 3] += 1e-12  # float noise on the hold at the first corner (extent 2)
    lay = measure_layout(c2w)
    assert (lay.motion, lay.interior_hold) == (8, 3)


# -- the paper's table (trajectories/paper_numbers.yaml) ------------------------------------------------------------

def test_a_value_reference_cites_the_quote_of_its_row():
    P = load_paper_numbers()
    row = P.row("c.evoke.static_end")  # Evoke's "21 static pose samples at the end"
    assert P.cite("c.evoke.static_end.static_end") == P.cite("c.evoke.static_end") == f'{row.section}: "{row.quote}"'
    assert row.section == "Appendix C (Evoke)"


def test_each_release_preset_maps_to_its_paper_trajectory_name():
    P = load_paper_numbers()
    assert {p: P.trajectory_of(p) for p in ("lrlr_sym_0p75dpf", "lrlrlr_sym_1dpf", "lrud_sym_0p75dpf",
                                             "lr_hold_sym_0p5dpf", "translate_square", "lrlr")} == {
        "lrlr_sym_0p75dpf": "LRLR", "lrlrlr_sym_1dpf": "LRLRLR", "lrud_sym_0p75dpf": "LRUD",
        "lr_hold_sym_0p5dpf": "LR-Hold", "translate_square": "Translation", "lrlr": None}


def test_yume_item_paths_hold_one_pose_more_than_the_papers_frames():
    # Appendix C: YUME's LRLR produces 493 frames; the harness's YUME path holds one pose more (harness fact)
    P = load_paper_numbers()
    assert P.stated_frames("yume", "LRLR")[0] == 493
    assert P.poses("yume", "LRLR") == 494
    assert P.poses("evoke", "LRLR") == 501


def test_the_paper_table_is_read_from_the_path_given(tmp_path):
    data = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    data["harness_poses_beyond_frames"] = {"yume": 5}
    table = tmp_path / "paper_numbers.yaml"
    table.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_paper_numbers(table).poses("yume", "LRLR") == 498


def test_excursions_to_the_right_and_down_are_read_on_their_axis_and_side():
    spec = TrajectorySpec(name="rd", cycles=("right", "down"), yaw_deg=90.0, pitch_deg=60.0, deg_per_frame=30.0,
                          hold_frames={"away": 1})
    lay = measure_layout(_build(spec, spec.min_frames()).c2w)
    assert lay.excursions == (Excursion(1, 7, "yaw", "right", pytest.approx(90.0), pytest.approx(0.0, abs=1e-9)),
                              Excursion(8, 12, "pitch", "down", pytest.approx(60.0), pytest.approx(0.0, abs=1e-9)))


def test_a_path_that_starts_at_its_far_pose_does_not_start_at_identity():
    assert not measure_layout(_build(LRUD_HOLDS, 20).c2w[4:]).starts_at_identity  # frame 4: yaw -90


def test_a_translation_s_excursion_is_measured_from_its_own_first_position():
    # SQUARE_HOLDS from its first corner (0, 0, 2): legs R, B, L; farthest at (2, 0, 0), ends 2 from the start
    lay = measure_layout(_build(SQUARE_HOLDS, 14).c2w[3:])
    assert lay.excursions == (Excursion(1, 11, "translation", "RBL", pytest.approx(2 * np.sqrt(2)),
                                        pytest.approx(2.0)),)


def test_vertical_legs_are_named_up_for_minus_y_and_down_for_plus_y():
    c2w = np.repeat(np.eye(4)[None], 4, axis=0)
    c2w[1:3, 1, 3] = [-1.0, -2.0]  # up, then back down to the start
    c2w[3, 1, 3] = 0.0
    assert measure_layout(c2w).excursions == (Excursion(1, 3, "translation", "UD", 2.0, 0.0),)


def test_small_excursions_to_the_right_and_down_are_read_on_their_axis_and_side():
    yaw = np.deg2rad([0.0, 20.0, 0.0, 0.0, 0.0])
    pitch = np.deg2rad([0.0, 0.0, 0.0, -20.0, 0.0])
    c2w = se3(rotmat_from_yaw_pitch(yaw, pitch), np.zeros((5, 3)))
    assert measure_layout(c2w).excursions == (
        Excursion(1, 2, "yaw", "right", pytest.approx(20.0), pytest.approx(0.0, abs=1e-9)),
        Excursion(3, 4, "pitch", "down", pytest.approx(20.0), pytest.approx(0.0, abs=1e-9)))


def test_a_frame_layout_holds_nothing_unless_told():
    """``trajectory.hold_frames`` left out: no initial, away or revisit hold (the final hold takes what is left)."""
    from trajectories.builders import HoldFrames

    assert (HoldFrames().initial, HoldFrames().away, HoldFrames().revisit) == (0, 0, 0)
    assert HoldFrames.from_dict({"away": 3}).initial == 0
