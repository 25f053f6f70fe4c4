"""evaluate/protocol.py on hand-built paths: the pose-closeness rule (rotation and translation, the extent it is
relative to), cross-departure pairs and the two departure extensions with their default tolerances. Each path is
built so that the rule under test, and only it, decides the answer."""

from __future__ import annotations

import numpy as np

from evaluate.protocol import departure_revisit_windows, departure_sweep_windows, frames_near, matched_departure_pairs
from trajectories.conventions import rot_y, se3


def _pose(yaw_deg: float = 0.0, t=(0.0, 0.0, 0.0)) -> np.ndarray:
    return se3(rot_y(np.radians(yaw_deg)), np.asarray(t, float))


# -- frames_near ------------------------------------------------------------------------------------------------------

def test_translation_closeness_is_relative_to_the_largest_per_axis_range_of_the_centres():
    """Centres (0,0,0) and (2,2,2): each axis ranges over 2, so the extent is 2 (a frame's own spread across its
    x, y, z is 0). 0.08 off is 0.04 of the extent: near at tolerance 0.05, far at 0.03."""
    c2w = np.stack([_pose(), _pose(t=(2, 2, 2))])
    target = _pose(t=(2.08, 2, 2))
    assert frames_near(c2w, [0, 1], target, 1.0, 0.05) == [1]
    assert frames_near(c2w, [0, 1], target, 1.0, 0.03) == []
    # the distance is the difference of the centres, not their sum: a frame is near a pose at its own centre
    assert frames_near(c2w, [1, 0], c2w[1], 1.0, 0.01) == [1]
    assert frames_near(c2w, [0, 1], np.stack([_pose(t=(0.05, 0, 0)), target]), 1.0, 0.05) == [0, 1]  # any pose


def test_on_a_path_that_does_not_translate_any_centre_offset_is_far():
    """The extent of a rotation-only path is 0 (floored at 1e-9): a pose 1 mm away is a billion extents away."""
    c2w = np.stack([_pose(a) for a in (0, 10, 20)])
    assert frames_near(c2w, [0, 1, 2], _pose(10), 1.0, 0.05) == [1]
    assert frames_near(c2w, [0, 1, 2], _pose(10, (1e-3, 0, 0)), 1.0, 0.05) == []
    assert frames_near(c2w, [], _pose(10), 1.0, 0.05) == []


# -- cross-departure pairs ----------------------------------------------------------------------------------------------

def _two_departures(d2_offset_deg: float = 0.0, d2_shift=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, dict]:
    """V = [0, 2) at 0 deg; D1 = [2, 12) sweeping 0..45 deg in 5-deg steps; R1 = [12, 14) back at 0; D2 = [14, 24)
    the same sweep turned by ``d2_offset_deg`` and moved by ``d2_shift``; R2 = [24, 26). A far-away frame (the
    last) sets the extent to 10 on x."""
    yaws = [0, 0] + [5 * i for i in range(10)] + [0, 0] + [5 * i + d2_offset_deg for i in range(10)] + [0, 0]
    c2w = np.stack([_pose(y) for y in yaws] + [_pose(t=(10, 0, 0))])
    c2w[14:24, :3, 3] += np.asarray(d2_shift, float)
    phases = {"V": (0, 2), "D1": (2, 12), "R1": (12, 14), "D2": (14, 24), "R2": (24, 27)}
    return c2w, phases


def test_matched_pairs_take_every_4th_frame_of_d1_and_need_less_than_1_degree():
    c2w, phases = _two_departures()
    assert matched_departure_pairs(c2w, phases) == [(2, 14), (6, 18), (10, 22), (11, 23)]  # stride 4 + last frame
    c2w, phases = _two_departures(d2_offset_deg=1.0)  # every D2 frame exactly 1 deg from its D1 twin
    assert matched_departure_pairs(c2w, phases) == []
    c2w, phases = _two_departures(d2_offset_deg=0.9)
    assert len(matched_departure_pairs(c2w, phases)) == 4


# -- the departure extensions --------------------------------------------------------------------------------------------

def test_departure_revisit_uses_5_percent_of_the_extent_by_default():
    """D2 repeats D1's sweep 1.0 to the side (0.1 of the extent 10): with the default 5 % it does not return to
    the away view; at 0.2 of the extent (or the same place) it does."""
    ref, revisits = departure_revisit_windows(*_two_departures())
    assert ref == [11] and revisits == [[23]]  # the away view: 45 deg, held by D1's last frame only
    ref, revisits = departure_revisit_windows(*_two_departures(d2_shift=(1.0, 0, 0)))
    assert ref == [11] and revisits == []
    c2w, phases = _two_departures(d2_shift=(1.0, 0, 0))
    assert departure_revisit_windows(c2w, phases, tolerance_translation=0.2)[1] == [[23]]


def test_a_departure_of_exactly_the_minimum_rotation_counts():
    c2w, phases = _two_departures()
    c2w[2:12] = np.stack([_pose(0)] * 9 + [_pose(1.0)])  # D1 turns exactly 1 deg (geodesic: 1.0 exactly)
    c2w[14:24] = c2w[2:12]
    ref, revisits = departure_revisit_windows(c2w, phases, tolerance_deg=0.5, min_departure_deg=1.0)
    assert ref == [11] and revisits == [[23]]
    assert departure_revisit_windows(c2w, phases, tolerance_deg=0.5, min_departure_deg=1.01) == ([], [])


def test_departure_sweep_uses_5_degrees_and_5_percent_of_the_extent_by_default():
    """D2 sweeps D1's views turned by 5.5 deg: D1's frames are 5 deg apart, so of D2's frames beyond 30 deg (30.5 ..
    50.5) only the last, 5.5 deg past D1's farthest (45), is farther than 5 deg from every D1 frame. Moved 0.06 of
    the extent it sees nothing again; 0.04 is within the default 5 %."""
    ref, revisits = departure_sweep_windows(*_two_departures(d2_offset_deg=5.5))
    assert ref == list(range(2, 12))
    assert revisits == [[19, 20, 21, 22]]
    ref, revisits = departure_sweep_windows(*_two_departures(d2_shift=(0.6, 0, 0)))  # 0.06 of the extent
    assert revisits == []
    ref, revisits = departure_sweep_windows(*_two_departures(d2_shift=(0.4, 0, 0)))  # 0.04
    assert revisits == [[21, 22, 23]]  # 35 .. 45 deg (30 itself computes as 29.999999999999993)
