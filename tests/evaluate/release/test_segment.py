"""The layout of a camera path read from the path alone (evaluate/release/segment.py): holds, moves, amplitudes,
speeds and profiles, without any preset's phase windows.

Expected values come from explicit numbers (signals laid out here) or from the preset YAML's own fields, never from
the segmentation itself."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.release.segment import Layout, layout_of, path_layout, phase_windows, yaw_pitch_signal
from tests.evaluate.release.footage import RotationLayout, Sweep, lr_sweeps, rotation


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
