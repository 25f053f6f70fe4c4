"""The reference model's procedural walk-off event: its layer and the ground-truth answers it implies."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.reference.events import WalkOffEvent, ground_truth

PHASES = {"V": (0, 40), "D1": (40, 80), "R1": (80, 120), "D2": (120, 160), "R2": (160, 200), "H": (200, 233)}


def test_layer_is_the_image_at_rest_and_the_empty_plate_when_gone():
    rng = np.random.default_rng(0)
    canvas = rng.integers(0, 255, size=(40, 64, 3), dtype=np.uint8)
    mask = np.zeros((40, 64), bool)
    mask[10:30, 30:50] = True
    ev = WalkOffEvent(canvas, mask, PHASES, start_frame=20, duration=60)
    _, rest = ev._layer(0.0)
    band = (slice(10, 30), slice(0, 50))
    np.testing.assert_array_equal(rest[band][..., :3], canvas[band])  # frame 0 is unchanged
    assert (rest[..., 3][band] == 255).all() and rest[..., 3].sum() == 255 * 20 * 50
    _, gone = ev._layer(1.0)
    np.testing.assert_array_equal(gone[band][..., :3], ev.plate[band])  # the spot is empty
    assert ev.leave_progress == pytest.approx(20 / 50)


def _trace(progress):
    return {"progress": list(progress), "visible": [1.0] * len(progress), "duration_frames": 60,
            "leave_progress": 0.4}


def test_ground_truth_for_remembering_forgetting_and_never_starting(demo_cases):
    qs = demo_cases["dynamic_cat"].event.questions
    refs = [q.answer for q in qs]
    frames = list(range(0, 233, 8)) + [232]
    t = np.arange(233)
    walk = np.clip((t - 20) / 60.0, 0, 1)
    kept = ground_truth(_trace(walk), PHASES, frames, qs)
    assert kept["started"] and kept["answers"] == refs
    reset = np.where(t < 80, walk, 0.0)  # forgotten at the first return, never restarted
    lost = ground_truth(_trace(reset), PHASES, frames, qs)
    assert lost["started"]
    assert [a == r for a, r in zip(lost["answers"], refs)] == [False, False, False, True, False, False, False, True]
    never = ground_truth(_trace(np.zeros(233)), PHASES, frames, qs)
    assert never["started"] is False
    qs_other = [{"question": "Is it raining?"}] * 8
    assert ground_truth(_trace(walk), PHASES, frames, qs_other) is None
