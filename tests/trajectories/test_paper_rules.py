"""Rules of the paper-number checks (trajectories/paper.py) and the layout migration (trajectories/migration.py),
one per test, in process."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from trajectories import migration
from trajectories.conventions import rotmat_from_yaw_pitch, se3
from trajectories.paper import (
    Excursion,
    Layout,
    PaperNumbers,
    check_path,
    load_paper_numbers,
    measure_layout,
    paper_violations,
)

# A stand-in table (not the paper's): Evoke runs 14 frames and keeps 4 static at the end, so motion ends on frame 10.
TABLE = {
    "paper": {"id": "stand-in"},
    "presets": {"LRLR": "lrlr_x_1dpf", "LRLRLR": "lrlrlr_x_1dpf", "LRUD": "lrud_x_1dpf", "LR-Hold": "hold_x_0p5dpf",
                "Translation": "loop"},
    "harness_poses_beyond_frames": {"m2": 1},
    "rows": [
        {"id": "c.all", "section": "C", "quote": "one count for all"},
        {"id": "c.evoke.static_end", "section": "C.2", "quote": "keeps 4 static", "model": "evoke",
         "values": {"static_end": 4}},
        {"id": "c.evoke", "section": "C.1", "quote": "Evoke runs 14", "model": "evoke", "frames": {"all": 14}},
        {"id": "c.m2", "section": "H", "quote": "m2 runs 12", "model": "m2", "frames": {"all": 16, "LRLR": 12}},
        {"id": "trajectory.rotation", "section": "3.3", "quote": "rotate in place"},
        {"id": "trajectory.translation", "section": "3.3b", "quote": "one square loop", "values": {"revisits": 1}},
        {"id": "trajectory.lrlr_lrlrlr", "section": "3.3c", "quote": "LRLR twice",
         "values": {"lrlr_revisits": 2, "lrlrlr_revisits": 3}},
        {"id": "trajectory.lrud", "section": "3.3d", "quote": "LRUD two", "values": {"revisits": 2}},
        {"id": "trajectory.lr_hold", "section": "3.3e", "quote": "LR-Hold one", "values": {"revisits": 1}},
        {"id": "g1.pose", "section": "G.1", "quote": "at least 30 degrees", "values": {"departure_deg": 30}},
        {"id": "dynamic.judge_frames", "section": "D.1", "quote": "every 2 frames", "values": {"stride": 2}},
        {"id": "dynamic.gate", "section": "D.2", "quote": "during the initial hold"},
        {"id": "dynamic.judge_phases", "section": "D.3", "quote": "final stationary hold"},
    ],
}
S = PaperNumbers.model_validate(TABLE)
WHY = ("Evoke's 14-frame trajectory \"keeps 4 static pose samples at the end\" (C.2), so the last move ends on "
       "frame 10 on every model")


def _yaw(deg: float) -> np.ndarray:
    return rotmat_from_yaw_pitch(np.deg2rad(deg), 0.0)


def _pitch(deg: float) -> np.ndarray:
    return rotmat_from_yaw_pitch(0.0, np.deg2rad(deg))


def _rounded(layout: Layout) -> dict:
    d = dataclasses.asdict(layout)
    d["mean_speed"] = round(d["mean_speed"], 9)
    d["excursions"] = [(e["start"], e["end"], e["axis"], e["direction"], round(e["peak"], 9),
                        round(e["return_error"], 9)) for e in d["excursions"]]
    return d


def _good(**over) -> Layout:
    """An LRLR layout for Evoke in the stand-in table that contradicts nothing."""
    exc = tuple(Excursion(s, s + 4, "yaw", "left", 30.0, 0.0) for s in (1, 6))
    base = Layout(frames=14, initial_hold=0, motion=10, settle=10, final_static=4, interior_hold=0, mean_speed=1.0,
                  rotates=True, translates=False, starts_at_identity=True, excursions=exc)
    return dataclasses.replace(base, **over)


def test_a_rotation_path_measures_to_this_exact_layout_with_each_departures_side_and_return():
    tie = np.array([[0.5, 0.5, 2 ** -0.5], [0.5, 0.5, -(2 ** -0.5)], [-(2 ** -0.5), 2 ** -0.5, 0.0]])  # yaw = pitch
    half = np.diag([-1.0, 1.0, -1.0])  # a half turn: no axis-angle side, read as left
    I3 = np.eye(3)
    rots = [I3, I3, I3, _yaw(-15), _yaw(-30), I3, _yaw(20), I3, _pitch(10), _pitch(30), I3, _pitch(-30), I3, tie,
            I3, I3, half, I3, _yaw(-10), _yaw(-20)]
    m = measure_layout(se3(np.stack(rots)))
    total = 15 + 15 + 30 + 20 + 20 + 10 + 20 + 30 + 30 + 30 + 90 + 90 + 180 + 180 + 10 + 10
    assert _rounded(m) == {
        "frames": 20, "initial_hold": 2, "motion": 16, "settle": 19, "final_static": 1, "interior_hold": 1,
        "mean_speed": round(total / 16, 9), "rotates": True, "translates": False, "starts_at_identity": True,
        "excursions": [(3, 5, "yaw", "left", 30.0, 0.0), (6, 7, "yaw", "right", 20.0, 0.0),
                       (8, 10, "pitch", "up", 30.0, 0.0), (11, 12, "pitch", "down", 30.0, 0.0),
                       (13, 14, "yaw", "right", 90.0, 0.0), (16, 17, "yaw", "left", 180.0, 0.0),
                       (18, 20, "yaw", "left", 20.0, 20.0)]}


def test_a_translation_path_measures_its_legs_in_order_from_a_start_that_is_not_the_origin():
    centres = [(1, 0, 0), (1, 0, 1), (1, 0, 1), (2, 0, 1), (2, 0, 0), (1, 0, 0), (1, -1, 0), (1, 0, 0), (1, 0, 0)]
    m = measure_layout(se3(np.broadcast_to(np.eye(3), (9, 3, 3)), np.array(centres, dtype=float)))
    assert _rounded(m) == {
        "frames": 9, "initial_hold": 0, "motion": 6, "settle": 7, "final_static": 2, "interior_hold": 1,
        "mean_speed": 1.0, "rotates": False, "translates": True, "starts_at_identity": False,
        "excursions": [(1, 5, "translation", "FRBL", round(2 ** 0.5, 9), 0.0), (6, 7, "translation", "UD", 1.0, 0.0)]}


def test_a_path_that_never_moves_more_than_the_tolerances_is_all_initial_hold():
    tiny = np.eye(3)
    tiny[0, 2], tiny[2, 0] = 1.7453292519943295e-09, -1.7453292519943295e-09  # exactly 1e-7 degrees: no rotation
    m = measure_layout(se3(np.stack([np.eye(3), tiny, tiny])))
    assert _rounded(m) == {"frames": 3, "initial_hold": 2, "motion": 0, "settle": 0, "final_static": 3,
                           "interior_hold": 0, "mean_speed": 0.0, "rotates": False, "translates": False,
                           "starts_at_identity": True, "excursions": []}


def test_a_translation_step_counts_as_motion_only_above_a_billionth_of_the_paths_extent():
    def read(centres, rots=None):
        c = np.array(centres, dtype=float)
        m = measure_layout(se3(np.broadcast_to(np.eye(3), (len(c), 3, 3)) if rots is None else rots, c))
        return m.initial_hold, m.motion, m.settle, m.translates, [(e.start, e.end) for e in m.excursions]

    e = 1e-9
    assert read([(0, 0, 0), (e, 0, 0), (e, 0, 0), (1, 0, 0)]) == (2, 1, 3, True, [(3, 4)])  # exactly 1e-9 of 1
    assert read([(0, 0, 0), (0, 0, 10), (1e-9, 0, 10), (1e-9, 0, 0)]) == (0, 2, 3, True, [(1, 3)])  # 1e-9 of 10
    assert read([(0, 0, 0), (1, 1, 1), (1 + 1e-10, 1 + 1e-10, 1 + 1e-10)]) == (0, 1, 1, True, [(1, 3)])
    assert read([(0, 0, 0), (0, 0, 1e-3), (0, 1e-11, 1e-3)]) == (0, 2, 2, True, [(1, 3)])  # 1e-11 of 1e-3 moves
    rots = np.stack([np.eye(3), _yaw(-30), _yaw(-30), np.eye(3)])
    assert read([(0, 0, 0), (0, 0, 0), (1e-6, 0, 0), (1e-6, 0, 0)], rots)[3] is True  # a micro-drift translates


def test_an_lrlr_layout_contradicting_every_rule_gets_exactly_these_violations():
    assert paper_violations("LRLR", _good(), "evoke", 1.0, S) == []
    bad = _good(frames=13, settle=11, mean_speed=1.5, translates=True, starts_at_identity=False, excursions=(
        Excursion(1, 4, "yaw", "right", 20.0, 0.5), Excursion(5, 8, "yaw", "left", 30.0, 1e-6),
        Excursion(9, 11, "pitch", "up", 29.9999, 0.0)))
    assert paper_violations("LRLR", bad, "evoke", 1.0, S) == [
        'frames: 13, but the paper states 14 for evoke on LRLR (C.1: "Evoke runs 14"; C: "one count for all")',
        f"end of motion: frame 11, not 10: {WHY} (exactly 10 for LRLR: read as the only static samples, which "
        "SANA-WM's 481 frames, ending on frame 480, agree with)",
        "speed: the moving frames turn 1.5 deg per frame on average; the release's name states 1",
        'revisits: the path leaves and comes back to the start pose 3 time(s); the paper states 2 for LRLR '
        '(3.3c: "LRLR twice")',
        'cycle 1: right (yaw); LRLR has left (3.3: "rotate in place")',
        "cycle 1: ends 0.5 from the start pose; a revisit returns to it",
        'cycle 1: departs 20 deg; a departure qualifies from 30 deg (G.1: "at least 30 degrees")',
        'cycle 3: up (pitch); LRLR has left (3.3: "rotate in place")',
        'cycle 3: departs 30 deg; a departure qualifies from 30 deg (G.1: "at least 30 degrees")',
        'position: the rotation moves the camera; 3.3: "rotate in place"',
        "frame 0: its pose is not the identity (world = camera frame of frame 0)"]


def test_the_speed_tolerance_is_a_millionth_of_the_stated_speed_or_of_one_degree():
    def flagged(mean: float, speed: float) -> bool:
        return any(m.startswith("speed:") for m in paper_violations("LRLR", _good(mean_speed=mean), "evoke", speed, S))

    assert [flagged(2.000001, 2.0), flagged(1.0000015, 1.0), flagged(1e-6, 0.0), flagged(1.5e-6, 0.0)] == \
        [False, True, False, True]


def test_the_count_is_the_stated_one_plus_the_harness_offset_and_a_model_without_one_must_outlast_the_motion():
    assert (S.poses("m2", "LRLR"), S.poses("m2", "LRUD"), S.poses("evoke", "LRUD"), S.poses("x", "LRLR")) == \
        (13, 17, 14, None)
    assert paper_violations("LRLR", _good(), "m2", 1.0, S) == [
        'frames: 14, but the paper states 12 (+1 pose of the harness\'s item path) for m2 on LRLR (H: "m2 runs 12"; '
        'C: "one count for all")']
    assert paper_violations("LRLR", _good(frames=13), "m2", None, S) == []
    assert paper_violations("LRLR", _good(frames=10), "x", None, S) == [
        "frames: 10; every stated count runs past the last move's frame 10 (SANA-WM's 481 the shortest)"]
    assert paper_violations("LRLR", _good(frames=11), "x", None, S) == []


def test_lr_hold_needs_two_strides_of_initial_hold_and_a_final_hold_and_may_end_its_motion_early():
    one = (Excursion(5, 9, "yaw", "left", 30.0, 0.0),)
    ok = _good(initial_hold=4, settle=8, final_static=2, excursions=one)
    assert paper_violations("LR-Hold", ok, "evoke", None, S) == []
    bad = dataclasses.replace(ok, initial_hold=3, settle=11, final_static=1)
    assert paper_violations("LR-Hold", bad, "evoke", None, S) == [
        f"end of motion: frame 11, after frame 10: {WHY}",
        'initial hold: 3 frame(s) after frame 0; the judge decides whether the event starts during it (D.2: "during '
        'the initial hold") from frames sampled every 2 (D.1: "every 2 frames"): it needs >= 4 frames, so that frames '
        "0, 2 and 4 show the start",
        'final hold: none after the return (frame 11 of 14); the judge is given a final stationary hold (D.3: "final '
        'stationary hold")']


def test_the_square_loop_must_not_rotate_and_must_go_forward_right_back_left():
    loop = _good(rotates=True, translates=True, excursions=(Excursion(1, 10, "translation", "FR", 0.1, 0.0),))
    assert paper_violations("Translation", loop, "evoke", None, S) == [
        'cycle 1: FR (translation); Translation has FRBL (3.3b: "one square loop")',
        'orientation: the square loop rotates; 3.3b: "one square loop"']


def test_check_path_checks_a_release_presets_path_against_the_table_it_is_given_and_nothing_else():
    yaw = [0, -10, -20, -31, -15, 0, -10, -20, -31, -15, 0, 0, 0, 0]
    c2w = se3(np.stack([_yaw(y) for y in yaw]))
    assert check_path("lrlr_x_1dpf", c2w, "evoke", S) == [
        "speed: the moving frames turn 12.4 deg per frame on average; the release's name states 1"]
    assert check_path("lrlr_x_12dpf", c2w, "evoke", S) == []  # no release preset of this table
    assert check_path("lrlr_x_12dpf", c2w, "evoke") == []  # nor of the paper's


def test_a_table_is_loaded_from_the_path_given_and_its_rows_are_frozen(tmp_path):
    path = tmp_path / "numbers.yaml"
    path.write_text(yaml.safe_dump(TABLE), encoding="utf-8")
    table = load_paper_numbers(path)
    assert table.motion_end() == 10 and table.cite("trajectory.lrud.revisits") == '3.3d: "LRUD two"'
    with pytest.raises(ValidationError):
        table.rows[0].quote = "changed"
    with pytest.raises(ValidationError):
        table.presets = {}


def test_the_old_rotation_presets_recorded_90_degree_sweeps_without_holds():
    assert migration._rotation("r", ["left"], 0.5, "cosine") == {
        "cycles": ["left"], "deg_per_frame": 0.5, "hold_frames": {"away": 0, "initial": 0, "revisit": 0},
        "kind": "rotation", "name": "r", "pitch_deg": 90.0, "profile": "cosine", "release": "r", "side": 1.0,
        "timing": {"away_hold": 0.04, "final_hold": 0.1, "initial_hold": 0.08, "move": 0.13, "revisit_hold": 0.06},
        "yaw_deg": 90.0}
