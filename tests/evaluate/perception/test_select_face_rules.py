"""The face role's selection rule (evaluate/perception/base.py ``select_target_face``), one rule at a time: the
highest-scoring detection whose box centre, clipped to the frame, lies inside the target's mask; -1 when none."""

from __future__ import annotations

import numpy as np

from evaluate.perception.base import select_target_face

H, W = 6, 10


def _mask(*pixels: tuple[int, int]) -> np.ndarray:
    m = np.zeros((H, W), bool)
    for y, x in pixels:
        m[y, x] = True
    return m


def _det(*boxes: tuple[float, float, float, float, float]) -> np.ndarray:
    return np.asarray(boxes, np.float64).reshape(-1, 5)


def test_the_centre_is_the_middle_of_the_box_in_x_and_in_y():
    det = _det((2, 1, 6, 5, 0.9))  # centre (x 4, y 3)
    assert select_target_face(det, _mask((3, 4))) == 0
    for y, x in ((3, 2), (3, 6), (1, 4), (5, 4), (2, 4), (4, 4)):  # a corner or a neighbour of the centre is not it
        assert select_target_face(det, _mask((y, x))) == -1, (y, x)


def test_a_centre_beyond_the_frame_is_clipped_to_its_last_pixel():
    det = _det((W - 2, H - 2, W + 6, H + 6, 0.9))  # centre (W + 2, H + 2)
    assert select_target_face(det, _mask((H - 1, W - 1))) == 0
    assert select_target_face(det, _mask((H - 1, W - 2), (H - 2, W - 1), (H - 2, W - 2))) == -1


def test_a_centre_before_the_frame_is_clipped_to_its_first_pixel():
    det = _det((-6, -6, 2, 2, 0.9))  # centre (-2, -2)
    assert select_target_face(det, _mask((0, 0))) == 0
    assert select_target_face(det, _mask((0, 1), (1, 0), (1, 1))) == -1


def test_the_highest_score_inside_the_mask_wins_and_none_inside_is_minus_one():
    det = _det((0, 0, 2, 2, 0.99), (4, 2, 6, 4, 0.5), (6, 2, 8, 4, 0.7))  # centres (1, 1), (5, 3), (7, 3)
    assert select_target_face(det, _mask((3, 5), (3, 7))) == 2
    assert select_target_face(det, _mask((3, 5))) == 1
    assert select_target_face(det, _mask((5, 9))) == -1
    assert select_target_face(_det(), _mask((0, 0))) == -1
