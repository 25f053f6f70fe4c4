"""Rules of the control clock (adapters/controls/clock.py), one per test, in process."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from adapters.controls.clock import _snap, laid_ends, lay_on_grid, segment_end_poses
from trajectories.conventions import rot_y, rotmat_from_yaw_pitch, se3
from trajectories.path import CameraPath, Segment, TrajectoryError

X, Y = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
BLOCKS_12 = np.array([0, 12, 24])  # a 25-pose path on 12-frame blocks


def _path(rot: list[np.ndarray], pos: np.ndarray, segs: list[tuple[str, str, int]]) -> CameraPath:
    """A path from per-pose rotations and positions; ``segs``: (phase, kind, end), each starting where the last ended."""
    c2w = np.stack([se3(R, np.asarray(p, dtype=np.float64)) for R, p in zip(rot, pos)])
    segments, phases, start = [], {}, 0
    for phase, kind, end in segs:
        segments.append(Segment(phase, kind[0].upper(), kind, start, end))
        lo, _ = phases.get(phase, (start, end))
        phases[phase] = (lo, end)
        start = end
    return CameraPath("t", c2w, np.eye(3), 16.0, 8, 8, phases, tuple(segments), {})


def _moving(pos: np.ndarray, segs: list[tuple[str, str, int]]) -> CameraPath:
    """A translation-only path (every rotation the identity): its steps are exactly the position differences."""
    return _path([np.eye(3)] * len(pos), np.asarray(pos, dtype=np.float64), segs)


def _walk(steps: list[np.ndarray]) -> np.ndarray:
    """Positions from pose 0 at the origin through each step in turn."""
    return np.concatenate([np.zeros((1, 3)), np.cumsum(np.asarray(steps, dtype=np.float64), axis=0)])


def _turning(deg: np.ndarray, segs: list[tuple[str, str, int]]) -> CameraPath:
    """A yaw-only path standing still: pose ``i`` turned ``deg[i]`` degrees."""
    return _path([rot_y(np.radians(d)) for d in deg], np.zeros((len(deg), 3)), segs)


def test_a_step_of_exactly_1e_12_is_motion_so_the_hold_before_it_ends_a_pose_earlier():
    path = _moving(_walk([0 * X, 0 * X, 1e-12 * X, X, X]), [("V", "hold", 3), ("D1", "move", 6)])
    assert segment_end_poses(path) == [2, 5]


def test_a_move_whose_last_frame_is_the_one_before_the_final_pose_ends_on_that_pose():
    path = _moving(_walk([X] * 19), [("D1", "move", 19), ("H", "hold", 20)])
    assert segment_end_poses(path) == [19, 19]


def test_a_two_frame_first_move_keeps_the_step_that_continues_it():
    path = _moving(_walk([X, X, Y, Y, Y]), [("D1", "move", 2), ("D2", "move", 6)])
    assert segment_end_poses(path) == [2, 5]


def test_a_boundary_step_goes_by_direction_not_by_size():
    # the step before it is tiny and in its own direction; the step after is large and 25.8 degrees off: direction wins
    path = _moving(_walk([0.01 * X, X, 5 * np.array([0.9, np.sqrt(1 - 0.81), 0.0]), X]),
                   [("D1", "move", 2), ("D2", "move", 5)])
    assert segment_end_poses(path) == [2, 4]


def test_snap_takes_the_nearest_edge_inside_the_window_the_earlier_on_a_tie_and_minus_one_when_empty():
    edges = np.array([0, 12, 24, 36])
    assert _snap(33.0, edges, 0, 24) == 24
    assert _snap(5.0, edges, 13, 36) == 24
    assert _snap(30.0, edges, 0, 36) == 24
    assert _snap(5.0, edges, 13, 20) == -1


def test_laid_ends_adds_pose_0_to_the_edges():
    path = _moving(_walk([X] * 24), [("V", "hold", 1), ("D1", "move", 25)])
    assert segment_end_poses(path) == [0, 24]
    assert laid_ends(path, np.array([12])) == [0, 24]


def test_a_move_ending_on_the_last_pose_is_laid_there_when_it_is_an_edge():
    path = _moving(_walk([X] * 19), [("D1", "move", 19), ("H", "hold", 20)])
    assert laid_ends(path, np.array([0, 12])) == [19, 19]


def test_a_move_that_adds_no_pose_takes_no_block_of_its_own():
    # the one-frame move [5, 6) hands its only step to the move after it: its end is the hold's end, pose 5
    path = _moving(_walk([0 * X] * 5 + [X] * 19), [("V", "hold", 5), ("D1", "move", 6), ("D2", "move", 25)])
    assert segment_end_poses(path) == [5, 5, 24]
    assert laid_ends(path, BLOCKS_12) == [0, 0, 24]


def test_a_short_first_move_still_gets_a_whole_block():
    path = _moving(_walk([X] * 3 + [0 * X] * 21), [("D1", "move", 3), ("H", "hold", 25)])
    assert segment_end_poses(path) == [3, 24]
    assert laid_ends(path, BLOCKS_12) == [12, 24]


def test_a_first_move_ending_on_pose_1_is_a_move():
    path = _moving(_walk([X] + [Y] * 23), [("D1", "move", 2), ("D2", "move", 25)])
    assert segment_end_poses(path) == [1, 24]
    assert laid_ends(path, BLOCKS_12) == [12, 24]


def test_each_later_move_keeps_an_edge_of_its_own():
    path = _moving(_walk([X] * 20 + [Y] * 10 + [0 * X] * 6),
                   [("D1", "move", 20), ("D2", "move", 30), ("H", "hold", 37)])
    assert segment_end_poses(path) == [20, 30, 36]
    assert laid_ends(path, np.array([0, 12, 24, 36])) == [12, 24, 36]


def test_a_final_hold_with_frames_keeps_the_last_block():
    path = _moving(_walk([X] * 20 + [0 * X] * 4), [("D1", "move", 20), ("H", "hold", 25)])
    assert segment_end_poses(path) == [20, 24]
    assert laid_ends(path, BLOCKS_12) == [12, 24]


def test_keep_length_lays_the_last_move_from_where_the_previous_one_was_laid_and_it_still_ends_on_the_last_pose():
    path = _moving(_walk([X] * 10 + [Y] * 14), [("D1", "move", 10), ("D2", "move", 25)])
    edges = np.arange(0, 25, 4)
    assert laid_ends(path, edges, keep="length") == [8, 24]  # 10 is as near 8 as 12: the earlier edge


def test_one_move_fits_on_one_block_after_a_leading_hold():
    """A final hold that adds no pose needs no block, whichever segment is being laid (it was counted against the
    segments before the last move: a leading hold made this path raise)."""
    path = _moving(_walk([0 * X] * 5 + [X] * 19), [("V", "hold", 5), ("D1", "move", 24), ("H", "hold", 25)])
    assert segment_end_poses(path) == [5, 24, 24]
    assert laid_ends(path, np.array([0, 24])) == [0, 24, 24]  # without the hold it is laid: [24, 24]


def test_without_a_leading_hold_one_move_fits_on_one_block():
    path = _moving(_walk([X] * 24), [("D1", "move", 24), ("H", "hold", 25)])
    assert laid_ends(path, np.array([0, 24])) == [24, 24]


def test_an_edge_past_the_last_pose_that_would_end_the_path_early_raises():
    path = _moving(_walk([X] * 8 + [Y] * 16), [("D1", "move", 8), ("D2", "move", 24), ("H", "hold", 25)])
    assert segment_end_poses(path) == [8, 24, 24]
    with pytest.raises(TrajectoryError, match=r"^trajectory 't': its 2 moves do not fit on the model's control blocks "
                                              r"in 25 frames; give the model more frames \(model\.frames_per_traj"):
        laid_ends(path, np.array([0, 12, 30]), keep="length")  # D2 keeps 16 frames from 12: 28, nearer 30 than 24


def test_a_last_move_left_no_frames_by_an_edge_past_the_last_pose_raises():
    path = _moving(_walk([X] * 20 + [Y] * 4), [("D1", "move", 20), ("D2", "move", 25)])
    with pytest.raises(TrajectoryError, match="its 2 moves do not fit"):
        laid_ends(path, np.array([0, 24, 30]))


def test_a_sweep_laid_on_the_grid_keeps_its_amplitude_at_a_new_constant_speed_and_records_what_moved():
    path = _moving(_walk([X] * 10 + [0 * X] * 14), [("D1", "move", 10), ("H", "hold", 25)])
    laid = lay_on_grid(path, BLOCKS_12, "rule")
    f = np.arange(25)
    np.testing.assert_allclose(laid.c2w[:, 0, 3], np.minimum(f, 12) * 10 / 12, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(laid.c2w[:, :3, :3], np.broadcast_to(np.eye(3), (25, 3, 3)))
    np.testing.assert_array_equal(laid.c2w[0], np.eye(4))
    assert laid.segments == (Segment("D1", "M", "move", 0, 13), Segment("H", "H", "hold", 13, 25))
    assert laid.phases == {"D1": (0, 13), "H": (13, 25)}
    assert laid.params["upstream_clock"] == {"rule": "rule", "segment_ends": [10, 24], "laid_ends": [12, 24],
                                             "max_shift_frames": 2, "laid_deg_per_frame": [], "keep": "time"}


def test_a_phase_of_several_segments_spans_all_of_them_once_laid():
    pos = _walk([0 * X] * 3 + [X] * 7 + [0 * X] * 14)
    path = _moving(pos, [("V", "hold", 3), ("D1", "move", 10), ("D1", "hold", 16), ("H", "hold", 25)])
    assert segment_end_poses(path) == [3, 10, 16, 24]
    laid = lay_on_grid(path, np.arange(0, 25, 4), "rule")
    assert laid.params["upstream_clock"]["laid_ends"] == [4, 8, 16, 24]
    assert laid.phases == {"V": (0, 5), "D1": (5, 17), "H": (17, 25)}


def test_a_small_turn_is_recorded_at_its_laid_speed():
    path = _turning(np.r_[np.arange(11) * 0.05, np.full(14, 0.5)], [("D1", "move", 10), ("H", "hold", 25)])
    laid = lay_on_grid(path, BLOCKS_12, "rule")
    assert laid.params["upstream_clock"]["laid_ends"] == [12, 24]
    assert laid.params["upstream_clock"]["laid_deg_per_frame"] == [pytest.approx(0.5 / 12, rel=1e-6)]


def test_a_half_turn_is_recorded_even_where_rounding_puts_its_cosine_below_minus_one():
    # 37.1 deg then a further 180: rot_y(37.1 deg).T @ rot_y(217.1 deg) has trace - 1 = -2.0000000000000004
    deg = np.r_[np.linspace(0, 37.1, 5), np.full(3, 37.1), np.linspace(37.1, 37.1 + 180, 13)[1:], np.full(5, 217.1)]
    path = _turning(deg, [("D1", "move", 5), ("V", "hold", 8), ("D2", "move", 20), ("H", "hold", 25)])
    assert segment_end_poses(path) == [4, 7, 19, 24]
    rec = lay_on_grid(path, np.arange(0, 25, 4), "rule").params["upstream_clock"]
    assert rec["laid_ends"] == [4, 8, 20, 24]
    assert rec["laid_deg_per_frame"] == [pytest.approx(37.1 / 4), 180.0 / 12]


def test_a_hold_that_drifts_is_not_recorded_as_a_turn():
    deg = np.r_[np.arange(10.0), np.full(15, 9.0)]
    path = _path([rot_y(np.radians(d)) for d in deg], _walk([0 * X] * 9 + [X] * 15),
                 [("V", "hold", 10), ("D1", "move", 25)])
    assert segment_end_poses(path) == [9, 24]
    rec = lay_on_grid(path, BLOCKS_12, "rule").params["upstream_clock"]
    assert rec["laid_ends"] == [12, 24]
    assert rec["laid_deg_per_frame"] == []


def test_a_hold_whose_rotation_rounds_to_a_cosine_above_one_lays_without_a_warning():
    # rotmat_from_yaw_pitch(8 deg, 12 deg): R.T @ R has trace 3.000000000000001
    R = rotmat_from_yaw_pitch(np.radians(8.0), np.radians(12.0))
    rot = [rotmat_from_yaw_pitch(np.radians(8.0 * k / 6), np.radians(12.0 * k / 6)) for k in range(6)] + [R] * 19
    path = _path(rot, np.zeros((25, 3)), [("D1", "move", 6), ("H", "hold", 25)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = lay_on_grid(path, BLOCKS_12, "rule").params["upstream_clock"]
    assert rec["laid_ends"] == [12, 24]
    assert len(rec["laid_deg_per_frame"]) == 1


def test_a_move_laid_onto_no_frames_is_not_a_turn_even_where_rounding_gives_its_pose_an_angle():
    # rotmat_from_yaw_pitch(3 deg, 3 deg): R.T @ R has trace 2.9999999999999996, an angle of 1.2e-6 deg
    R = rotmat_from_yaw_pitch(np.radians(3.0), np.radians(3.0))
    rot = [rotmat_from_yaw_pitch(np.radians(k / 2), np.radians(k / 2)) for k in range(6)] + [R] * 19
    path = _path(rot, _walk([0 * X] * 11 + [X] * 13), [("D1", "move", 6), ("V", "hold", 11), ("D2", "move", 12),
                                                     ("D3", "move", 25)])
    assert segment_end_poses(path) == [6, 11, 11, 24]
    rec = lay_on_grid(path, BLOCKS_12, "rule").params["upstream_clock"]
    assert rec["laid_ends"] == [12, 12, 12, 24]
    assert rec["laid_deg_per_frame"][0] == pytest.approx(np.degrees(np.arccos((np.trace(R) - 1) / 2)) / 12)
