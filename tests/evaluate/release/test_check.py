"""``release check``'s verdict: a measured layout against the preset's, whatever ``conf/trajectory/*.yaml`` says,
and the preset YAML the videos imply (the one command that settles an inference).

Layouts are laid out from explicit numbers (tests/evaluate/release/footage.py) and, where the preset matters, from
the preset YAML's own fields, never from the numbers the presets happen to hold today. The rules of the check's
and the import's helpers follow (in process, on hand-made layouts and stubbed collaborators)."""

from __future__ import annotations

import contextlib
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from evaluate.release.check import (
    VideoCheck,
    _fmt,
    _notes,
    _spread,
    _stats,
    check_video,
    compare,
    groups,
    implied_yaml,
    preset_path,
    preset_spec,
    stored_measurement,
    table_lines,
    verdict_lines,
)
from evaluate.release.measure import MEASURE_VERSION, Measurement
from evaluate.release.segment import Layout, Move, layout_of, path_layout
from tests.evaluate.release.footage import RotationLayout, lr_sweeps


def _layout(cycles: int, degrees: float, dpf: float, hold: int = 0, total: int = 493,
            profile: str = "constant") -> Layout:
    """The measured layout of a signal laid out from these numbers (cut to ``total`` frames) with estimator-like
    noise."""
    angles = RotationLayout(lr_sweeps(cycles, degrees, dpf, profile), hold, total).angles()[:total]
    noisy = angles + np.random.default_rng(0).normal(0, 0.03, angles.shape)
    return layout_of(noisy, ("yaw", "pitch"), "rotation", floor=0.05)


def _spec_layout(yaw_deg: float, frames: int = 493):
    from trajectories import TrajectorySpec
    from trajectories.conventions import intrinsics_from_fov

    spec = TrajectorySpec(name="six_sweeps", cycles=("left",) * 3, yaw_deg=yaw_deg, deg_per_frame=1.0)
    K = intrinsics_from_fov(60, 320, 192)
    return path_layout(preset_path(spec, frames, 16.0, K, 192, 320).c2w), spec.min_frames()


def test_a_90_degree_lrlrlr_is_flagged_against_an_80_degree_preset_and_the_reverse():
    for video, preset in ((90.0, 80.0), (80.0, 90.0)):
        want, need = _spec_layout(preset)
        got = compare(_layout(3, video, 1.0, total=551 if video == 90 else 493), want, need)
        amps = [p for p in got if "amplitude" in p]
        assert len(amps) == 3 and all(f"preset {preset:g}" in p for p in amps), got
        assert not [p for p in got if "speed" in p], got  # both at 1 degree per frame
        same = compare(_layout(3, preset, 1.0, total=551 if preset == 90 else 493), want if preset == 80 else
                       _spec_layout(preset, 551)[0], need)
        assert same == [], same


def test_an_off_preset_hold_and_profile_are_flagged_with_the_measured_difference():
    want, need = _spec_layout(80.0)
    got = compare(_layout(3, 80.0, 1.0, hold=8, total=501, profile="eased"), want, need)
    assert "profile eased, preset constant" in got
    assert "initial hold 8 frames, preset 0" in got
    # a video too short for the preset: named, with the frames it has and needs
    short = compare(_layout(3, 80.0, 1.0, total=400), _spec_layout(80.0, 481)[0], need)
    assert short[0] == f"400 frames, the preset needs {need}"


@pytest.fixture(scope="module")
def conf_preset():
    """The LRLRLR preset as conf/trajectory says today, and the other reading of it (80 <-> 90 degrees)."""
    spec = preset_spec("lrlrlr_sym_1dpf")
    other = 80.0 if spec.yaw_deg != 80.0 else 90.0
    return spec, other


def _check(layout: Layout, frames: int, spec) -> VideoCheck:
    from trajectories import CameraPath
    from trajectories.conventions import intrinsics_from_fov

    path = CameraPath(spec.name, np.tile(np.eye(4), (frames, 1, 1)), intrinsics_from_fov(60, 160, 96), 16.0, 96,
                      160, {"V": (0, frames)})
    meta = {"item": {"model": "evoke", "trajectory": spec.name}}
    return check_video(f"evoke/release/seed-0/{spec.name}/environment_case_00{frames % 7}", meta, path,
                       Measurement(layout, 60.0, "estimated", 160, 96))


def test_the_check_reads_the_preset_from_conf_and_implies_the_yaml_that_fits(conf_preset):
    """Videos laid out as the preset YAML says follow it; videos of the other amplitude are flagged, and the YAML
    the check implies, built, lays out exactly what the videos measure."""
    from trajectories import TrajectorySpec

    spec, other = conf_preset
    n = spec.min_frames() + 12
    fits = _check(_layout(len(spec.cycles), spec.yaw_deg, spec.deg_per_frame, spec.hold_frames.initial, n), n, spec)
    assert fits.matches, fits.problems
    n = 1 + 12 + int(2 * len(spec.cycles) * other) + 9  # 12 held, the sweeps at 1 degree per frame, 9 held
    off = [_check(_layout(len(spec.cycles), other, 1.0, 12, n), n, spec) for _ in range(2)]
    assert all(not c.matches and any("amplitude" in p for p in c.problems) for c in off)
    g = groups(off)[0]
    assert g["videos"] == 2 and g["matching"] == 0 and g["implied_yaml"]
    import yaml

    doc = yaml.safe_load(g["implied_yaml"])
    assert doc["yaw_deg"] == other and doc["deg_per_frame"] == 1.0 and doc["hold_frames"]["initial"] == 12
    implied = TrajectorySpec.from_dict(doc)
    from trajectories.conventions import intrinsics_from_fov

    built = path_layout(preset_path(implied, n, 16.0, intrinsics_from_fov(60, 160, 96), 96, 160).c2w)
    assert compare(Layout.from_dict(off[0].measured), built, implied.min_frames()) == []
    assert implied_yaml(spec.name, g["measured"], [Layout.from_dict(c.measured) for c in off]) == g["implied_yaml"]


@pytest.mark.slow
def test_check_measures_a_run_the_harness_made(tmp_path):
    """``release check`` on a run the harness generated (no import, nothing measured before): the reference
    model follows its camera path exactly, so the video follows the preset, at the field of view of its camera.
    A static case: in the reference model's dynamic cases the event's object fills most of the view and moves
    with it, which the check reads as less rotation (docs/release.md, "What the check cannot see")."""
    from evaluate.release.check import check_run
    from tests.support import run_cli
    from trajectories import load_path

    r = run_cli(["model=reference", "trajectory=lrlr_sym_0p75dpf", "cases.include=[environment_rocket]",
                 "model.height=192", "model.width=320", "stage=generate", "run=ref", "progress=false"], tmp_path,
                timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "outputs" / "ref"
    result = check_run(run, progress=False)
    assert len(result["videos"]) == 1 and not result["skipped"]
    v = result["videos"][0]
    assert v["matches"], v["problems"]
    path = load_path(run / v["key"] / "camera.npz")
    true = np.degrees(2 * np.arctan(path.width / 2 / path.K[0, 0]))
    assert v["hfov_source"] == "estimated" and abs(v["hfov_deg"] - true) < 1.0, (v["hfov_deg"], true)
    assert (run / "release" / "check.md").is_file()


def test_a_dynamic_cases_flags_come_with_the_note_that_a_moving_object_biases_them():
    """A dynamic case's video that differs from its preset is noted as possibly biased by its event (a moving
    object filling the view reads as less turn); a static case's is not, nor a dynamic video that follows."""
    from trajectories import TrajectorySpec
    from trajectories.conventions import intrinsics_from_fov

    spec = preset_spec("lrlr_sym_0p75dpf")
    K = intrinsics_from_fov(60, 320, 192)
    path = preset_path(spec, 493, 16.0, K, 192, 320)
    off = Measurement(_layout(2, 70.0, 0.75), 60.0, "estimated", 320, 192)
    follows = Measurement(path_layout(path.c2w), 60.0, "estimated", 320, 192)
    assert isinstance(spec, TrajectorySpec)
    for family, measurement, noted in (("dynamic", off, True), ("environment", off, False),
                                       ("dynamic", follows, False)):
        meta = {"item": {"model": "yume", "trajectory": spec.name}, "case": {"family": family}}
        c = check_video("k", meta, path, measurement)
        assert bool(c.problems) == (measurement is off)
        assert any("a dynamic case" in n for n in c.notes) == noted, (family, c.notes)


# -- rules of the check and the import (fast, in process) -----------------------------------------------------------
# Rules of the release check (compare, notes, verdict, stats, stored measurements, implied YAML, preset cut) and of
# the import's pure helpers (failure kinds, the resume test): fast in-process tests on hand-made layouts.


def mv(start: float, frames: float, delta: float, kind: str = "D", direction: str = "left", axis: str = "yaw",
       reach: float | None = None) -> Move:
    return Move(axis, start, frames, delta, kind, direction, abs(delta) if reach is None else reach)


def rot(moves, frames: int = 100, profile: str = "constant", errors=()) -> Layout:
    return Layout("rotation", frames, tuple(moves), profile if moves else "none", {}, tuple(errors))


def tra(moves, frames: int = 300, profile: str = "constant") -> Layout:
    return Layout("translation", frames, tuple(moves), profile, {}, ())


# -- compare ---------------------------------------------------------------------------------------------------

def test_a_video_exactly_as_long_as_the_preset_needs_is_not_short():
    lay = rot([mv(0, 10, 10)], frames=20)
    assert compare(lay, lay, 20) == []
    assert compare(lay, lay, 21)[0] == "20 frames, the preset needs 21"


def test_without_a_minimum_even_a_zero_frame_layout_is_not_called_short():
    lay = Layout("rotation", 0)
    assert compare(lay, lay) == []


def test_an_amplitude_off_by_exactly_the_tolerance_passes_and_past_it_is_flagged():
    want = rot([mv(0, 10, 30.0, reach=30.0)], frames=20)
    at = rot([mv(0, 10, 30.0, reach=33.0)], frames=20)
    past = rot([mv(0, 10, 30.0, reach=33.5)], frames=20)
    assert compare(at, want) == []
    assert compare(past, want) == ["D1 amplitude 33.5 deg, preset 30"]


def test_a_speed_off_by_exactly_five_percent_passes_and_past_it_is_flagged():
    want = rot([mv(0, 1, 10.0)], frames=20)
    assert compare(rot([mv(0, 1, 10.5, reach=10.0)], frames=20), want) == []
    assert compare(rot([mv(0, 1, 10.0 * 0.95, reach=10.0)], frames=20), want) == []
    assert compare(rot([mv(0, 1, 10.6, reach=10.0)], frames=20), want) == ["D1 speed 10.600 deg/frame, preset 10"]


def test_the_speed_tolerance_is_relative_to_the_presets_speed():
    # preset 2 deg/frame: 5 % is 0.1, so 2.05 follows it (a tolerance of 0.05 / 2 would flag it)
    want = rot([mv(0, 20, 40.0)], frames=30)
    got = rot([mv(0, 20, 41.0, reach=40.0)], frames=30)
    assert compare(got, want) == []


def test_translation_legs_within_five_percent_pass_and_longer_ones_are_flagged():
    want = tra([mv(0, 100, 1.0, "D", "F", "z")], frames=200)
    ok = tra([mv(0, 104, 1.0, "D", "F", "z")], frames=204)
    assert compare(ok, want) == []
    edge = tra([mv(0, 105, 1.0, "D", "F", "z")], frames=205)
    assert compare(edge, want) == []
    far = tra([mv(0, 106, 1.0, "D", "F", "z")], frames=206)
    assert compare(far, want) == ["D1 leg 106 frames, preset 100"]


def test_a_short_translation_leg_uses_the_hold_tolerance_as_its_floor():
    # 20 frames: 5 % is 1 frame, the floor 3 frames decides
    want = tra([mv(0, 20, 1.0, "D", "F", "z")], frames=40)
    assert compare(tra([mv(0, 23, 1.0, "D", "F", "z")], frames=43), want) == []
    assert compare(tra([mv(0, 17, 1.0, "D", "F", "z")], frames=37), want) == []
    assert compare(tra([mv(0, 24, 1.0, "D", "F", "z")], frames=44), want) == ["D1 leg 24 frames, preset 20"]


def test_the_final_hold_is_compared_unless_the_video_is_short():
    want = rot([mv(0, 10, 10)], frames=20)  # final hold 9
    longer = rot([mv(0, 10, 10)], frames=24)  # final hold 13
    assert compare(longer, want) == ["final hold 13 frames, preset 9"]
    assert compare(longer, want, 30) == ["24 frames, the preset needs 30"]


def test_a_hold_off_by_exactly_three_frames_passes_and_four_is_flagged():
    want = rot([mv(0, 10, 10)], frames=20)
    assert compare(rot([mv(0, 10, 10)], frames=23), want) == []
    assert compare(rot([mv(3, 10, 10)], frames=23), want) == []
    assert compare(rot([mv(4, 10, 10)], frames=24), want) == ["initial hold 4 frames, preset 0"]


# -- notes -----------------------------------------------------------------------------------------------------

def _m(lay: Layout, invalid: int = 0, notes=()) -> Measurement:
    return Measurement(lay, 60.0, "estimated", 160, 96, invalid, 0.0, MEASURE_VERSION, list(notes))


def test_rotation_returns_further_than_three_degrees_are_noted_by_their_number():
    lay = rot([mv(0, 10, 10), mv(10, 10, -10, "R", "right", reach=0.0)], errors=(3.0, 3.5))
    assert _notes(_m(lay)) == ["R2 returns 3.5 deg from the start"]


def test_translation_returns_are_noted_past_two_percent_of_the_width():
    lay = Layout("translation", 50, (mv(0, 10, 1, "D", "F", "z"),), "constant", {}, (2.0, 2.5))
    assert _notes(_m(lay)) == ["R2 returns 2.5 % of the width (parallax) from the start"]


def test_an_unmeasurable_return_error_is_never_noted():
    lay = rot([mv(0, 10, 10)], errors=(float("nan"), float("inf"), 1.0))
    assert _notes(_m(lay)) == []


def test_steps_the_estimator_could_not_fit_and_the_measurements_notes_are_listed():
    lay = rot([mv(0, 10, 10)])
    assert _notes(_m(lay, 0, ["n"])) == ["n"]
    assert _notes(_m(lay, 2, ["n"])) == ["2 frame pair(s) the estimator could not fit (held still)", "n"]


# -- stored measurement ----------------------------------------------------------------------------------------

def _meta(version: int = MEASURE_VERSION, sha: str = "abc", video_sha: str = "abc") -> dict:
    rec = {**_m(rot([mv(0, 10, 10)])).to_dict(), "video_sha256": sha}
    rec["version"] = version
    return {"release": {"measurement": rec}, "video": {"sha256": video_sha}}


def test_a_stored_measurement_of_this_version_and_video_is_reused():
    got = stored_measurement(_meta())
    assert got is not None and got.layout.sequence() == "left" and got.hfov_deg == 60.0


def test_a_stored_measurement_of_another_version_or_video_is_not_reused():
    assert stored_measurement(_meta(version=MEASURE_VERSION + 1)) is None
    assert stored_measurement(_meta(video_sha="other")) is None
    assert stored_measurement({"release": {"measurement": ["not", "a", "dict"]}}) is None


def test_a_meta_without_release_or_video_has_no_stored_measurement():
    assert stored_measurement({}) is None
    assert stored_measurement({"release": None}) is None
    meta = _meta(sha=None)  # type: ignore[arg-type]
    del meta["video"]
    assert stored_measurement(meta) is not None  # no video record and no sha: they agree (None == None)


def test_a_broken_stored_measurement_is_not_reused():
    meta = _meta()
    del meta["release"]["measurement"]["layout"]
    assert stored_measurement(meta) is None


# -- spread, stats, fmt ----------------------------------------------------------------------------------------

def test_a_spread_is_the_median_and_range_of_the_finite_values():
    assert _spread([0.0, 1.0, 5.0, float("nan")]) == {"median": 1.0, "min": 0.0, "max": 5.0}
    assert _spread([float("nan")]) is None


def test_a_groups_sequence_and_profile_are_the_most_common():
    a = rot([mv(0, 10, 10), mv(10, 10, -10, "R", "right", reach=0.0)], profile="eased")
    b = rot([mv(0, 10, 10)], profile="constant")
    s = _stats([a, a, b])
    assert s["sequence"] == "left right" and s["profile"] == "eased"
    assert _stats([]) ["sequence"] == "" and _stats([])["profile"] == "none"


def test_fmt_shows_a_range_unless_min_and_max_agree():
    assert _fmt(None, "g") == "n/a"
    assert _fmt({"median": 0.0, "min": 0.0, "max": 0.0}, "g") == "0"
    assert _fmt({"median": 0.0, "min": 0.0, "max": 1e-9}, "g") == "0 [0-1e-09]"
    assert _fmt({"median": 0.0, "min": -1.0, "max": 1.0}, "g") == "0 [-1-1]"
    assert _fmt({"median": 0.0, "min": 0.0, "max": 0.5}, "g") == "0 [0-0.5]"


# -- verdict and table -----------------------------------------------------------------------------------------

def _v(traj: str, key: str, problems: list[str]) -> dict:
    return {"trajectory": traj, "key": key, "problems": problems, "matches": not problems}


def test_the_verdict_says_per_preset_whether_all_videos_follow_it():
    res = {"videos": [_v("b", "k1", []), _v("b", "k2", [])], "skipped": []}
    lines = verdict_lines(res)
    assert len(lines) == 1 and lines[0].startswith("b: all 2 video(s) follow the preset")


def test_the_verdict_names_the_first_differing_video_its_first_six_problems_and_the_most_common():
    ps = [f"p{i}" for i in range(7)]
    res = {"videos": [_v("a", "k0", []), _v("a", "k1", ps), _v("a", "k2", ["p6", "x"]), _v("c", "k3", ["q"])],
           "skipped": ["s1"]}
    lines = verdict_lines(res)
    assert lines[0] == ("a: 2 of 3 video(s) differ from the preset, e.g. k1: p0; p1; p2; p3; p4; p5 "
                        "(most common: p6)")
    assert lines[1] == "c: 1 of 1 video(s) differ from the preset, e.g. k3: q"
    assert lines[2] == "skipped s1"


def test_a_check_without_videos_says_so():
    assert verdict_lines({"videos": [], "skipped": []}) == ["no video to check"]
    assert verdict_lines({"videos": [], "skipped": ["x"]}) == ["skipped x"]


def _group(implied: str | None) -> dict:
    st = _stats([rot([mv(0, 10, 10)])])
    return {"trajectory": "t", "model": "m", "videos": 1, "matching": 0, "measured": st, "preset": st,
            "hfov": None, "implied_yaml": implied}


def test_the_table_has_a_row_per_group_and_the_implied_yaml_of_a_group_that_differs():
    lines = table_lines({"groups": [_group("a: 1\n")], "videos": [], "skipped": []})
    assert lines[1] == "|" + " --- |" * 12 and lines[0].count("|") == 13
    assert lines[2].startswith("| t | m | 1 | 0 | left (left) |")
    assert "```yaml" in lines and "a: 1" in lines
    lines = table_lines({"groups": [_group(None)], "videos": [], "skipped": []})
    assert "```yaml" not in lines


# -- implied yaml ----------------------------------------------------------------------------------------------

def test_an_implied_rotation_yaml_takes_the_medians_of_reach_speed_and_the_holds_by_kind():
    # departures reach 80, 80, 90 (median 80, mean 83.3); holds after D: 4, 4, 10; after R: 7, 7, 1
    lays = []
    for reach, away, back in ((80.0, 4, 7), (80.0, 4, 7), (90.0, 10, 1)):
        d1 = mv(5, 40, reach)
        r1 = mv(45 + away, 40, -reach, "R", "right", reach=0.0)
        d2 = mv(r1.end + back, 40, reach)
        r2 = mv(d2.end + away, 40, -reach, "R", "right", reach=0.0)
        lays.append(rot([d1, r1, d2, r2], frames=int(r2.end) + 10))
    st = _stats(lays)
    doc = yaml.safe_load(implied_yaml("lrlr_sym_0p75dpf", st, lays))
    assert doc["yaw_deg"] == 80.0
    assert doc["hold_frames"] == {"initial": 5, "away": 4, "revisit": 7}
    assert doc["cycles"] == ["left", "left"]
    assert doc["profile"] == "constant"
    # 8 moves at 2.0 deg/frame, 4 at 2.25: the median 2.0 (the mean would round to 2.085)
    assert doc["deg_per_frame"] == 2.0


def test_an_implied_rotation_without_holds_between_moves_sets_them_to_zero():
    lays = [rot([mv(3, 40, 90.0)], frames=50)]
    doc = yaml.safe_load(implied_yaml("lrlr_sym_0p75dpf", _stats(lays), lays))
    assert doc["hold_frames"] == {"initial": 3, "away": 0, "revisit": 0}


def test_an_implied_translation_yaml_gives_timing_weights_over_the_videos_length():
    moves = [Move("z", 10 + 100 * i, 100, 1.0, "D", d, 1.0) for i, d in enumerate("FRBL")]
    lays = [tra(moves, frames=431)]  # 430 frames after frame 0: 10 initial, 4 x 100, 20 final
    doc = yaml.safe_load(implied_yaml("translate_square", _stats(lays), lays))
    t = doc["timing"]
    assert t["initial_hold"] == round(10 / 430, 4)
    assert t["move"] == round(100 / 430, 4)
    assert t["final_hold"] == round(20 / 430, 4)


def test_an_implied_translation_of_two_frames_divides_by_one_frame():
    lays = [tra([Move("z", 0, 1, 1.0, "D", "F", 1.0)], frames=2)]
    t = yaml.safe_load(implied_yaml("translate_square", _stats(lays), lays))["timing"]
    assert t == {**t, "initial_hold": 0.0, "move": 1.0, "final_hold": 0.0}


def test_an_implied_yaml_without_moves_says_there_is_nothing_to_imply():
    lays = [rot([], frames=50)]
    assert implied_yaml("lrlr_sym_0p75dpf", _stats(lays), lays).startswith("# no video moves")


# -- importer helpers ------------------------------------------------------------------------------------------

def _exc(module: str) -> Exception:
    cls = type("Boom", (Exception,), {"__module__": module})
    return cls("x")


def test_a_decoders_error_or_an_unreadable_value_is_an_undecodable_video():
    from evaluate.release.importer import _failure_kind

    assert _failure_kind(ValueError("x")) == "undecodable video"
    assert _failure_kind(EOFError("x")) == "undecodable video"
    assert _failure_kind(_exc("av.error")) == "undecodable video"
    assert _failure_kind(_exc("av")) == "undecodable video"
    assert _failure_kind(_exc("harness.av")) == "import failed"
    assert _failure_kind(RuntimeError("x")) == "import failed"


# -- importer: the resume test (_unchanged) --------------------------------------------------------------------

ROWS = [{"item_id": "i1", "category": "environment", "case_id": "c1", "where": "a:1"}]


def _item_folder(tmp_path, *, camera: bool = True, same_file: bool = True):
    from evaluate.release.importer import _stamp

    src = tmp_path / "src.mp4"
    src.write_bytes(b"video")
    d = tmp_path / "item"
    d.mkdir()
    if same_file:
        os.link(src, d / "video.mp4")
    else:
        (d / "video.mp4").write_bytes(b"video")
    if camera:
        (d / "camera.npz").write_bytes(b"npz")
    return src, d, _stamp(src)


def _stored_check() -> dict:
    from evaluate.release.check import VideoCheck

    return VideoCheck("k", "m", "t", 10, {}, {}, 60.0, "given", 5, ["p"], ["n"]).to_dict()


def _rel(stamp, **over):
    from evaluate.release.importer import IMPORT_VERSION, _preset_hash

    rel = {"version": IMPORT_VERSION, "video": stamp, "rows": [dict(r) for r in ROWS],
           "preset_hash": _preset_hash({"a": 1}), "measured": False, "check": _stored_check()}
    rel.update(over)
    return rel


def _unchanged_with(monkeypatch, d, stamp, rec, rows=ROWS, measure=False):
    import harness.record
    from evaluate.release.importer import _unchanged

    monkeypatch.setattr(harness.record, "read_record", lambda _d: rec)
    return _unchanged(d, SimpleNamespace(rows=rows), stamp, {"a": 1}, measure)


def test_an_item_imported_from_the_same_file_rows_preset_and_settings_is_unchanged(tmp_path, monkeypatch):
    _, d, stamp = _item_folder(tmp_path)
    got = _unchanged_with(monkeypatch, d, stamp, SimpleNamespace(status="done", release=_rel(stamp)))
    assert got is not None and got.key == "k" and got.problems == ["p"] and got.preset_min_frames == 5


def test_stored_rows_that_are_missing_match_a_video_without_rows(tmp_path, monkeypatch):
    _, d, stamp = _item_folder(tmp_path)
    rec = SimpleNamespace(status="done", release=_rel(stamp, rows=None))
    assert _unchanged_with(monkeypatch, d, stamp, rec, rows=[]) is not None


@pytest.mark.parametrize("change", ["record", "no release", "status", "version", "video", "rows", "preset",
                                    "measured", "check"])
def test_an_item_that_differs_in_any_recorded_fact_is_imported_again(tmp_path, monkeypatch, change):
    _, d, stamp = _item_folder(tmp_path)
    rel = _rel(stamp)
    status = "done"
    if change == "version":
        rel["version"] = -1
    elif change == "video":
        rel["video"] = {**stamp, "size": stamp["size"] + 1}
    elif change == "rows":
        rel["rows"] = [{**ROWS[0], "case_id": "c2"}]
    elif change == "preset":
        rel["preset_hash"] = "0" * 16
    elif change == "measured":
        rel["measured"] = True
    elif change == "check":
        rel["check"] = {}
    elif change == "status":
        status = "failed"
    rec = None if change == "record" else SimpleNamespace(status=status, release=None if change == "no release"
                                                          else rel)
    assert _unchanged_with(monkeypatch, d, stamp, rec) is None


@pytest.mark.parametrize("what", ["another file", "no camera", "no video"])
def test_an_item_whose_files_are_not_in_place_is_imported_again(tmp_path, monkeypatch, what):
    _, d, stamp = _item_folder(tmp_path, camera=what != "no camera", same_file=what != "another file")
    if what == "no video":
        (d / "video.mp4").unlink()
    rec = SimpleNamespace(status="done", release=_rel(stamp))
    assert _unchanged_with(monkeypatch, d, stamp, rec) is None


# -- importer: small helpers -----------------------------------------------------------------------------------

def test_the_preset_hash_is_sixteen_hex_digits_independent_of_key_order():
    from evaluate.release.importer import _preset_hash

    h = _preset_hash({"a": 1, "b": [2, 3]})
    assert len(h) == 16 and int(h, 16) >= 0
    assert _preset_hash({"b": [2, 3], "a": 1}) == h != _preset_hash({"a": 2, "b": [2, 3]})


def test_an_item_folder_loses_its_meta_json_first_and_then_everything(tmp_path, monkeypatch):
    from evaluate.release import importer

    d = tmp_path / "item"
    d.mkdir()
    (d / "meta.json").write_text("{}")
    (d / "video.mp4").write_bytes(b"v")

    def broken(_p):
        raise OSError("disk")

    monkeypatch.setattr(importer.shutil, "rmtree", broken)
    with pytest.raises(OSError):
        importer._remove_item(d)
    assert not (d / "meta.json").exists() and (d / "video.mp4").exists()
    monkeypatch.undo()
    importer._remove_item(d)
    assert not d.exists()


def test_an_item_folder_without_meta_json_or_absent_is_removed_quietly(tmp_path):
    from evaluate.release.importer import _remove_item

    d = tmp_path / "item"
    d.mkdir()
    (d / "video.mp4").write_bytes(b"v")
    _remove_item(d)
    assert not d.exists()
    _remove_item(d)  # absent: nothing to do
    assert not d.exists()


def test_an_item_folder_that_is_a_symbolic_link_even_a_dangling_one_is_refused(tmp_path):
    from harness.errors import ConfigError

    from evaluate.release.importer import _remove_item

    d = tmp_path / "item"
    d.symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError):
        _remove_item(d)
    assert d.is_symlink()


def test_stale_items_are_only_imported_ones_with_a_release_record(tmp_path, monkeypatch):
    import harness.record
    from evaluate.release.importer import _remove_stale
    from evaluate.release.plan import ImportSummary

    recs = {"a": SimpleNamespace(release={"v": 1}, supplied=True), "b": SimpleNamespace(release=None, supplied=True),
            "c": SimpleNamespace(release={"v": 1}, supplied=False), "d": None,
            "e": SimpleNamespace(release={"v": 1}, supplied=True)}
    for k in recs:
        (tmp_path / k).mkdir()
    monkeypatch.setattr(harness.record, "read_record", lambda p: recs[p.name])
    run = SimpleNamespace(path=tmp_path, item_keys=lambda: sorted(recs), item_dir=lambda k: tmp_path / k)
    s = ImportSummary()
    _remove_stale(run, {"e"}, s)
    assert s.removed == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["b", "c", "d", "e"]


def test_the_import_summary_is_read_back_only_when_it_is_a_json_object(tmp_path):
    from evaluate.release.importer import RELEASE_DIR, load_summary

    assert load_summary(tmp_path) is None
    p = tmp_path / RELEASE_DIR / "import.json"
    p.parent.mkdir()
    p.write_text('{"videos": 3}')
    assert load_summary(tmp_path) == {"videos": 3}
    p.write_text("[1, 2]")
    assert load_summary(tmp_path) is None
    p.write_text("{not json")
    assert load_summary(tmp_path) is None


def test_a_case_image_gives_its_height_then_width_to_the_cases_intrinsics():
    from evaluate.release.importer import _case_intrinsics

    seen = []

    class Case:
        def load_image(self):
            return np.zeros((10, 20, 3), np.uint8)

        def intrinsics_matrix(self, h, w, hfov):
            seen.append((h, w, hfov))
            return np.array([[10.0, 0, 10], [0, 10.0, 5], [0, 0, 1]])

    K = _case_intrinsics(Case(), {"height": 10, "width": 20}, 55.0)
    assert seen == [(10, 20, 55.0)] and np.allclose(K, [[10.0, 0, 10], [0, 10.0, 5], [0, 0, 1]])


def test_an_unmeasured_video_as_long_as_the_preset_needs_has_no_problem():
    from evaluate.release.importer import _check_or_unmeasured

    p = SimpleNamespace(model="m", preset="t", case_key="c")
    spec = SimpleNamespace(min_frames=lambda: 5)
    assert _check_or_unmeasured(p, None, None, spec, {"num_frames": 5}).problems == []
    short = _check_or_unmeasured(p, None, None, spec, {"num_frames": 4})
    assert short.problems[0].startswith("4 frames, the preset needs 5") and short.hfov_source == "not measured"


# -- importer: the per-import context --------------------------------------------------------------------------

def _ctx(tmp_path, *, workers: int = 1, measure: bool = True, optics=()):
    from evaluate.release.importer import _Context
    from evaluate.release.plan import ImportSummary

    opts = SimpleNamespace(workers=workers, measure=measure, hfov_deg=60.0, source=tmp_path)
    run = SimpleNamespace(item_dir=lambda item: tmp_path / "items" / str(item))
    ctx = _Context(opts, run, ImportSummary(), set(optics))
    ctx.item = lambda p: p.case_key
    return ctx


class _Pool:
    made: list = []

    def __init__(self, n, mp_context=None):
        self.n, self.submitted = n, []
        _Pool.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def submit(self, fn, *args):
        fut = SimpleNamespace(args=args, cancelled=False)
        fut.cancel = lambda: setattr(fut, "cancelled", True)
        self.submitted.append(fut)
        return fut


def _plans(tmp_path, n: int = 2):
    out = []
    for i in range(n):
        f = tmp_path / f"v{i}.mp4"
        f.write_bytes(b"v" * (i + 1))
        out.append(SimpleNamespace(file=f, preset="lrlr_sym_0p75dpf", case_key=f"c{i}"))
    return out


def _patch_pool(monkeypatch, unchanged=lambda *a: None):
    import concurrent.futures

    from evaluate.release import importer

    _Pool.made = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _Pool)
    monkeypatch.setattr(importer, "_unchanged", unchanged)


@pytest.mark.parametrize("workers, measure", [(1, True), (0, True), (2, False)])
def test_one_worker_or_no_measuring_needs_no_pool(tmp_path, monkeypatch, workers, measure):
    _patch_pool(monkeypatch)
    ctx = _ctx(tmp_path, workers=workers, measure=measure)
    with ctx.measuring(_plans(tmp_path), {"c0": None, "c1": None}):
        pass
    assert _Pool.made == [] and ctx.measured == {}


def test_with_two_workers_each_changed_video_is_measured_once_and_unfinished_work_cancelled(tmp_path, monkeypatch):
    calls = []

    def unchanged(d, p, stamp, preset, measure):
        calls.append(measure)
        return object() if p.case_key == "c2" else None

    _patch_pool(monkeypatch, unchanged)
    plans = _plans(tmp_path, 3)
    plans.append(SimpleNamespace(**{**vars(plans[0]), "case_key": "c3"}))  # the same file under another name
    ctx = _ctx(tmp_path, workers=2)
    ctx._measure_key = lambda p, case: ((p.file.name,), "rotation", None)
    ctx.measured[("done",)] = "a finished measurement"  # no cancel: left alone
    with ctx.measuring(plans, {p.case_key: None for p in plans}):
        (pool,) = _Pool.made
        assert pool.n == 2
        assert [f.args[0].name for f in pool.submitted] == ["v0.mp4", "v1.mp4"]
        assert not any(f.cancelled for f in pool.submitted)
    assert all(f.cancelled for f in pool.submitted)
    assert calls and all(m is True for m in calls)


def test_a_video_whose_measurement_key_fails_is_left_to_its_import(tmp_path, monkeypatch):
    _patch_pool(monkeypatch)
    ctx = _ctx(tmp_path, workers=2)

    def key(p, case):
        if p.case_key == "c0":
            raise OSError("gone")
        return ((p.case_key,), "rotation", None)

    ctx._measure_key = key
    with ctx.measuring(_plans(tmp_path), {"c0": None, "c1": None}):
        assert [f.args[0].name for f in _Pool.made[0].submitted] == ["v1.mp4"]


def test_a_workers_measurement_is_waited_for_and_one_made_before_is_reused(tmp_path, monkeypatch):
    import evaluate.release.measure as measure

    made = []
    monkeypatch.setattr(measure, "measure_video", lambda *a: made.append(a) or "fresh")
    ctx = _ctx(tmp_path)
    ctx._measure_key = lambda p, case: ((p.case_key,), "rotation", None)
    ctx.measured[("a",)] = SimpleNamespace(result=lambda: "from a worker")
    ctx.measured[("b",)] = "made before"
    p = SimpleNamespace(case_key="a", file=tmp_path / "a.mp4")
    assert ctx._measure(p, None) == "from a worker" and ctx.measured[("a",)] == "from a worker"
    assert ctx._measure(SimpleNamespace(case_key="b", file=p.file), None) == "made before"
    assert made == []
    assert ctx._measure(SimpleNamespace(case_key="c", file=p.file), None) == "fresh" and len(made) == 1


def test_a_models_seed_is_its_configs_or_zero(tmp_path, monkeypatch):
    import harness.config_groups

    from evaluate.release.importer import _Context

    seeds = {"a": {"seed": 42}, "b": {"seed": None}, "c": {}}
    monkeypatch.setattr(harness.config_groups, "group_yaml", lambda group, name: seeds[name])
    ctx = _Context(SimpleNamespace(), None, None, set())
    got = {m: ctx.item(SimpleNamespace(model=m, preset="lrlr_sym_0p75dpf", case_key="environment_case_000")).seed
           for m in seeds}
    assert got == {"a": 42, "b": 0, "c": 0}


def _plan(tmp_path, **kw):
    from evaluate.release.plan import VideoPlan

    p = VideoPlan("rel/v.mp4", tmp_path / "v.mp4", "id", "m", "mid", "lrlr_sym_0p75dpf", "c0", "environment",
                  rows=[dict(ROWS[0])], duplicates=2)
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def _patch_import(monkeypatch, unchanged):
    from evaluate.release import importer

    removed = []
    monkeypatch.setattr(importer, "_stamp", lambda f: {"ino": 1})
    monkeypatch.setattr(importer, "_preset", lambda name: {"name": name})
    monkeypatch.setattr(importer, "_unchanged", lambda *a: unchanged)
    monkeypatch.setattr(importer, "_remove_item", lambda d: removed.append(d))
    return removed


def test_an_unchanged_video_is_counted_with_its_rows_and_preset(tmp_path, monkeypatch):
    removed = _patch_import(monkeypatch, SimpleNamespace(problems=["x"]))
    ctx = _ctx(tmp_path)
    ctx._write = lambda *a: pytest.fail("an unchanged video is not written")
    p = _plan(tmp_path, category="camera_rotation")
    p.rows.append({"item_id": "i2", "category": "camera_rotation", "case_id": "c40", "where": "a:2"})
    assert p.scored_as == "camera"
    got = ctx.import_video(p, None)
    s = ctx.summary
    assert got.problems == ["x"] and removed == []
    assert (s.unchanged, s.imported, s.kept_rows, s.duplicate_rows, s.flagged) == (1, 0, 2, 2, 1)
    assert (s.camera_rows, s.camera_items) == (1, 1)
    assert s.presets == {"lrlr_sym_0p75dpf"}


def test_a_changed_video_is_written_into_a_cleared_folder(tmp_path, monkeypatch):
    removed = _patch_import(monkeypatch, None)
    ctx = _ctx(tmp_path)
    ctx._write = lambda p, case, d, stamp, preset: SimpleNamespace(problems=[])
    got = ctx.import_video(_plan(tmp_path), None)
    assert got.problems == [] and removed == [tmp_path / "items" / "c0"]
    s = ctx.summary
    assert (s.imported, s.flagged, s.kept_rows, s.duplicate_rows) == (1, 0, 1, 2) and s.presets == {"lrlr_sym_0p75dpf"}


def test_a_video_that_fails_leaves_nothing_and_is_one_named_problem(tmp_path, monkeypatch):
    removed = _patch_import(monkeypatch, None)
    ctx = _ctx(tmp_path)

    def fail(*a):
        raise ValueError("bad frames")

    ctx._write = fail
    assert ctx.import_video(_plan(tmp_path), None) is None
    assert removed == [tmp_path / "items" / "c0"] * 2
    assert ctx.summary.imported == 0
    ((subject, problem),) = ctx.summary.problems["undecodable video"].items()
    assert subject == "rel/v.mp4: ValueError: bad frames" and problem.rows == 3


class _Stop(Exception):
    pass


def _patch_write(monkeypatch, info, kind="rotation", problems=()):
    import harness.video

    import evaluate.release.check as check
    import evaluate.release.measure as measure
    from evaluate.release import importer

    seen: dict = {}
    monkeypatch.setattr(harness.video, "probe_header", lambda f: info)
    spec = SimpleNamespace(kind=kind, min_frames=lambda: 2)
    monkeypatch.setattr(check, "preset_spec", lambda name: spec)
    monkeypatch.setattr(importer, "_case_intrinsics", lambda case, info, hfov: "K_case")
    monkeypatch.setattr(measure, "intrinsics", lambda hfov, w, h: f"K_measured_{hfov:g}")

    def preset_path(spec, n, fps, K, h, w):
        seen["K"] = K
        return "preset path"

    monkeypatch.setattr(check, "preset_path", preset_path)
    monkeypatch.setattr(importer, "_check_or_unmeasured",
                        lambda p, path, m, spec, info: SimpleNamespace(problems=list(problems)))

    def measured_path(layout, name, fps, K, h, w, kind):
        seen["measured kind"] = kind
        return "measured path"

    monkeypatch.setattr(measure, "measured_path", measured_path)
    return seen


@pytest.mark.parametrize("w, h, n, ok", [(8192, 10, 2, True), (10, 8192, 100_000, True), (8193, 10, 2, False),
                                         (10, 8193, 2, False), (10, 10, 1, False), (10, 10, 100_001, False)])
def test_a_video_past_the_size_or_frame_bounds_is_refused_before_anything_is_measured(tmp_path, monkeypatch, w, h,
                                                                                       n, ok):
    import evaluate.release.check as check

    _patch_write(monkeypatch, {"width": w, "height": h, "num_frames": n, "fps": 16.0})

    def stop(name):
        raise _Stop

    monkeypatch.setattr(check, "preset_spec", stop)
    ctx = _ctx(tmp_path)
    with pytest.raises(_Stop if ok else ValueError):
        ctx._write(_plan(tmp_path), None, tmp_path / "d", {}, {})


def _write_once(tmp_path, monkeypatch, *, kind="rotation", problems=(), optics=(), measure=True):
    info = {"width": 64, "height": 48, "num_frames": 20, "fps": 16.0}
    seen = _patch_write(monkeypatch, info, kind, problems)
    ctx = _ctx(tmp_path, measure=measure, optics=optics)
    ctx._measure = lambda p, case: SimpleNamespace(hfov_deg=70.0, layout="layout")
    ctx._files = lambda p, case, d, stamp, preset, info, path, m, check: seen.update(path=path, m=m)
    ctx._write(_plan(tmp_path), None, tmp_path / "d", {}, {})
    return seen


def test_a_measured_video_is_laid_out_at_its_measured_field_of_view_unless_its_case_gives_one(tmp_path, monkeypatch):
    assert _write_once(tmp_path, monkeypatch)["K"] == "K_measured_70"
    assert _write_once(tmp_path, monkeypatch, optics=("c0",))["K"] == "K_case"
    unmeasured = _write_once(tmp_path, monkeypatch, measure=False)
    assert unmeasured["K"] == "K_case" and unmeasured["m"] is None


def test_a_video_that_follows_its_preset_gets_the_presets_path(tmp_path, monkeypatch):
    assert _write_once(tmp_path, monkeypatch)["path"] == "preset path"
    assert _write_once(tmp_path, monkeypatch, problems=["x"], measure=False)["path"] == "preset path"


def test_a_video_that_differs_gets_its_measured_layout_of_the_presets_kind(tmp_path, monkeypatch):
    got = _write_once(tmp_path, monkeypatch, problems=["x"])
    assert got["path"] == "measured path" and got["measured kind"] == "rotation"
    square = _write_once(tmp_path, monkeypatch, kind="square", problems=["x"])
    assert square["measured kind"] == "square"


def test_another_sequence_of_moves_is_one_problem_after_the_length():
    want = rot([mv(0, 10, 10), mv(10, 10, -10, "R", "right", reach=0.0)], frames=30)
    got = rot([mv(0, 10, 10)], frames=10)
    assert compare(got, want, 30) == ["10 frames, the preset needs 30", "moves left, preset left right"]
    assert compare(rot([], frames=30), want) == ["moves none, preset left right"]


def test_another_speed_profile_is_flagged():
    want = rot([mv(0, 10, 10)], frames=20, profile="constant")
    assert compare(rot([mv(0, 10, 10)], frames=20, profile="eased"), want) == ["profile eased, preset constant"]


def test_only_departures_are_held_to_the_presets_amplitude():
    # a return's reach is its distance from the start after it: its error is a note, not an amplitude
    want = rot([mv(0, 10, 10), mv(10, 10, -10, "R", "right", reach=0.0)], frames=30)
    got = rot([mv(0, 10, 10), mv(10, 10, -10, "R", "right", reach=5.0)], frames=30)
    assert compare(got, want) == []


# -- preset path, check_video, _measure_item, check_run, groups ------------------------------------------------

def _K(hfov: float = 60.0):
    from trajectories.conventions import intrinsics_from_fov

    return np.asarray(intrinsics_from_fov(hfov, 160, 96), np.float64)


def test_a_video_at_least_as_long_as_the_preset_gets_the_whole_preset():
    from evaluate.release.check import preset_path, preset_spec

    spec = preset_spec("lrlr_sym_0p75dpf")  # 481 frames: V (0, 1), then four 120-frame sweeps
    need = spec.min_frames()
    full = preset_path(spec, need, 16.0, _K(), 96, 160)
    assert len(full.c2w) == need and "cut_from" not in full.params
    assert full.params["hfov_deg"] == pytest.approx(60.0)
    longer = preset_path(spec, need + 20, 16.0, _K(), 96, 160)
    assert len(longer.c2w) == need + 20 and "cut_from" not in longer.params


def test_a_shorter_video_gets_the_preset_cut_at_its_length():
    from evaluate.release.check import preset_path, preset_spec

    spec = preset_spec("lrlr_sym_0p75dpf")
    cut = preset_path(spec, 121, 16.0, _K(), 96, 160)  # ends where R1 starts
    assert len(cut.c2w) == 121 and cut.params["num_frames"] == 121 and cut.params["cut_from"] == spec.min_frames()
    assert cut.phases == {"V": (0, 1), "D1": (1, 121)}
    assert [(s.phase, s.start, s.end) for s in cut.segments] == [("V", 0, 1), ("D1", 1, 121)]
    mid = preset_path(spec, 100, 16.0, _K(), 96, 160)
    assert mid.phases == {"V": (0, 1), "D1": (1, 100)}
    assert [(s.phase, s.start, s.end) for s in mid.segments] == [("V", 0, 1), ("D1", 1, 100)]


def test_an_imported_videos_field_of_view_is_never_held_against_its_preset():
    from trajectories import TrajectorySpec

    from evaluate.release.check import preset_path

    # a 30 deg sweep keeps a 70 deg view's centre in frame: a generated run would refuse it, an import takes it
    spec = TrajectorySpec(name="narrow", cycles=("left",), yaw_deg=30.0, deg_per_frame=1.0)
    path = preset_path(spec, spec.min_frames(), 16.0, _K(70.0), 96, 160)
    assert len(path.c2w) == spec.min_frames() and path.params["hfov_deg"] == pytest.approx(70.0)


def _camera(name: str = "lrlr_sym_0p75dpf"):
    return SimpleNamespace(name=name, K=_K(), fps=16.0, height=96, width=160)


def test_a_video_check_reads_its_preset_from_the_item_else_from_the_camera_path(monkeypatch):
    import evaluate.release.check as check

    lay = rot([mv(0, 10, 10)], frames=481)
    asked = []
    monkeypatch.setattr(check, "preset_path", lambda spec, n, fps, K, h, w: asked.append((spec.name, n)) or
                        SimpleNamespace(c2w=None))
    monkeypatch.setattr(check, "path_layout", lambda c2w: lay)
    m = _m(lay)
    c = check.check_video("k", {"item": {"model": "evoke", "trajectory": "lrlr_sym_0p75dpf"}}, _camera("other"), m)
    assert (c.trajectory, c.model, c.matches, c.preset_min_frames) == ("lrlr_sym_0p75dpf", "evoke", True, 481)
    c = check.check_video("k", {}, _camera(), m)
    assert (c.trajectory, c.model, c.matches) == ("lrlr_sym_0p75dpf", "?", True)
    assert asked == [("lrlr_sym_0p75dpf", 481)] * 2
    longer = rot([mv(0, 10, 10)], frames=500)
    monkeypatch.setattr(check, "path_layout", lambda c2w: longer)
    assert check.check_video("k", {}, _camera(), _m(longer)).matches and asked[-1] == ("lrlr_sym_0p75dpf", 500)


@pytest.mark.parametrize("case, differs, noted", [({"family": "dynamic"}, True, True),
                                                  ({"family": "dynamic"}, False, False),
                                                  ({"family": "environment"}, True, False), (None, True, False)])
def test_a_dynamic_cases_differences_carry_the_note_that_a_moving_object_biases_them(monkeypatch, case, differs,
                                                                                        noted):
    import evaluate.release.check as check

    want = rot([mv(0, 10, 10)], frames=481)
    got = rot([mv(0, 10, 10)], frames=481, profile="eased") if differs else want
    monkeypatch.setattr(check, "preset_path", lambda *a: SimpleNamespace(c2w=None))
    monkeypatch.setattr(check, "path_layout", lambda c2w: want)
    c = check.check_video("k", {"case": case}, _camera(), _m(got))
    assert c.matches is not differs
    assert any(n.startswith("a dynamic case:") for n in c.notes) is noted


@pytest.mark.parametrize("meta, preset, given", [({"item": {"trajectory": "lrlr_sym_0p75dpf"}}, "other", False),
                                                 ({}, "lrlr_sym_0p75dpf", False),
                                                 ({"item": {"trajectory": "translate_square"}}, "x", True)])
def test_a_video_is_measured_as_its_presets_kind_with_a_given_field_of_view_only_for_a_translation(
        tmp_path, monkeypatch, meta, preset, given):
    import evaluate.release.check as check
    from evaluate.release.measure import hfov_of

    calls = []
    monkeypatch.setattr(check, "measure_video", lambda *a: calls.append(a) or "m")
    assert check._measure_item(tmp_path, meta, _camera(preset), 77) == "m"
    hfov = hfov_of(_K(), 160)
    kind = "translation" if given else "rotation"
    assert calls == [(tmp_path / "video.mp4", kind, hfov if given else None, hfov, 77)]


def _vc(key: str, traj: str = "t", model: str = "m", problems=(), expected_frames: int = 20, min_frames: int = 20):
    from evaluate.release.check import VideoCheck

    lay = rot([mv(0, 10, 10)], frames=20)
    want = rot([mv(0, 10, 10)], frames=expected_frames)
    return VideoCheck(key, model, traj, 20, lay.to_dict(), want.to_dict(), 60.0, "estimated", min_frames,
                      list(problems))


def test_groups_count_problems_by_their_first_two_words_and_read_the_preset_from_the_first_video(monkeypatch):
    import evaluate.release.check as check

    monkeypatch.setattr(check, "implied_yaml", lambda traj, measured, lays: f"implied {traj} {len(lays)}")
    gs = check.groups([_vc("a", problems=["D1 amplitude 80.0 deg, preset 90", "final hold 4 frames, preset 0"],
                           expected_frames=20, min_frames=20),
                       _vc("b", problems=["D1 amplitude 81.0 deg, preset 90"], expected_frames=40, min_frames=40),
                       _vc("c", expected_frames=40, min_frames=40)])
    (g,) = gs
    assert g["problems"] == {"D1 amplitude": 2, "final hold": 1}
    assert (g["videos"], g["matching"], g["implied_yaml"]) == (3, 1, "implied t 3")
    assert g["preset"]["frames"]["median"] == 20.0 and g["preset_min_frames"] == 20


def test_a_group_whose_videos_all_follow_the_preset_implies_no_yaml():
    from evaluate.release.check import groups

    gs = groups([_vc("a", traj="u"), _vc("b", traj="t"), _vc("c", traj="t", model="z")])
    assert [(g["trajectory"], g["model"], g["videos"], g["implied_yaml"]) for g in gs] == [
        ("t", "m", 1, None), ("t", "z", 1, None), ("u", "m", 1, None)]


def test_an_implied_yaml_keeps_the_presets_key_order():
    from harness.config_groups import group_yaml

    lays = [rot([mv(3, 40, 90.0)], frames=50)]
    text = implied_yaml("lrlr_sym_0p75dpf", _stats(lays), lays)
    keys = list(group_yaml("trajectory", "lrlr_sym_0p75dpf"))
    assert keys != sorted(keys)
    assert [k for k in yaml.safe_load(text) if k in keys] == keys


def _patch_run(monkeypatch, tmp_path, metas):
    import harness.io
    import harness.outputs
    import trajectories

    import evaluate.release.check as check

    rows = [SimpleNamespace(key=k, item=k) for k in metas]
    run = SimpleNamespace(path=tmp_path, done_rows=lambda: rows, item_dir=lambda item: tmp_path / item)
    monkeypatch.setattr(harness.outputs, "RunDir", lambda p: run)

    def read_json(p):
        meta = metas[p.parent.name]
        if isinstance(meta, Exception):
            raise meta
        return meta

    monkeypatch.setattr(harness.io, "read_json", read_json)
    monkeypatch.setattr(trajectories, "load_path", lambda p: "path")
    monkeypatch.setattr(check, "implied_yaml", lambda traj, measured, lays: "implied: yes\n")
    measured = []
    monkeypatch.setattr(check, "_measure_item", lambda d, meta, path, width: measured.append(d.name) or "new")
    monkeypatch.setattr(check, "check_video", lambda key, meta, path, m: _vc(key, problems=[] if m == "new"
                                                                             else ["stored"]))
    return measured


def test_a_run_check_reuses_stored_measurements_measures_the_rest_and_names_what_it_skips(tmp_path, monkeypatch,
                                                                                       capsys):
    import evaluate.release.check as check

    stored = _meta()
    measured = _patch_run(monkeypatch, tmp_path, {"a": stored, "b": {}, "c": ValueError("bad\x1b")})
    res = check.check_run(tmp_path, progress=False, width=64)
    assert measured == ["b"]
    assert [v["key"] for v in res["videos"]] == ["a", "b"] and res["videos"][0]["problems"] == ["stored"]
    assert res["skipped"] == ["c: ValueError: bad\\x1b"]
    assert json.loads((tmp_path / "release" / "check.json").read_text())["skipped"] == res["skipped"]
    md = (tmp_path / "release" / "check.md").read_text()
    assert md.endswith("\n") and "skipped c: ValueError: bad\\x1b" in md
    assert "release check" not in capsys.readouterr().err


def test_a_run_check_shows_its_progress_by_default(tmp_path, monkeypatch, capsys):
    import evaluate.release.check as check

    _patch_run(monkeypatch, tmp_path, {"a": {}})
    check.check_run(tmp_path)
    assert "release check" in capsys.readouterr().err


# -- import_release (its collaborators stubbed) ----------------------------------------------------------------

def _patch_release(monkeypatch, tmp_path):
    import harness.outputs

    import evaluate.release.cases as cases
    import evaluate.release.check as check
    from evaluate.release import importer

    seen: dict = {"written": []}
    overlay = {"a": SimpleNamespace(intrinsics=[1], hfov_deg=None), "b": SimpleNamespace(intrinsics=None, hfov_deg=70),
               "c": SimpleNamespace(intrinsics=None, hfov_deg=None)}
    monkeypatch.setattr(importer, "_overlay", lambda opts: overlay)
    plans = {k: SimpleNamespace(case_key=k) for k in ("p1", "p2", "p3")}
    monkeypatch.setattr(importer, "plan_release", lambda opts, summary: plans)
    run = SimpleNamespace(path=tmp_path, rebuild_manifest=lambda: seen.setdefault("manifest", True))
    monkeypatch.setattr(harness.outputs, "RunDir", lambda p: run)
    monkeypatch.setattr(cases, "write_cases", lambda opts, plans, where, summary, overlay: {k: k for k in plans})
    monkeypatch.setattr(check, "write_check", lambda path, result: seen["written"].append(result))
    monkeypatch.setattr(importer, "_remove_stale", lambda run, done, summary: seen.setdefault("done", done))

    class Ctx:
        def __init__(self, opts, run, summary, optics):
            seen["optics"] = optics
            self.summary = summary

        @contextlib.contextmanager
        def measuring(self, order, cases):
            seen["order"] = [p.case_key for p in order]
            yield

        def item(self, p):
            return SimpleNamespace(key=f"key-{p.case_key}")

        def import_video(self, p, case):
            if p.case_key == "p1":
                self.summary.imported += 1
                return _vc("p1")
            if p.case_key == "p2":
                self.summary.unchanged += 1
                c = _vc("p2")
                c.measured = {}
                return c
            return None

    monkeypatch.setattr(importer, "_Context", Ctx)
    return seen


def test_an_import_counts_every_video_and_checks_the_measured_ones(tmp_path, monkeypatch, capsys):
    from evaluate.release.importer import import_release

    seen = _patch_release(monkeypatch, tmp_path)
    s = import_release(SimpleNamespace(source=tmp_path, measure=True), tmp_path)
    assert seen["optics"] == {"a", "b"} and seen["order"] == ["p1", "p2", "p3"]
    assert s.videos == 2 and len(s.seconds) == 3 and all(0 <= t < 60 for t in s.seconds)
    assert seen["done"] == {"key-p1", "key-p2"} and seen["manifest"]
    (written,) = seen["written"]
    assert [v["key"] for v in written["videos"]] == ["p1"]
    saved = json.loads((tmp_path / "release" / "import.json").read_text())
    assert saved["measured"] is True and saved["videos"] == 2
    assert "release import" in capsys.readouterr().err
    import_release(SimpleNamespace(source=tmp_path, measure=True), tmp_path, progress=False)
    assert "release import" not in capsys.readouterr().err


def test_an_implied_yaml_without_a_measurable_speed_sets_it_to_zero():
    lays = [rot([mv(3, 0, 90.0)], frames=50)]  # a zero-frame move has no speed
    assert yaml.safe_load(implied_yaml("lrlr_sym_0p75dpf", _stats(lays), lays))["deg_per_frame"] == 0.0


def test_an_implied_rotation_with_a_hold_after_its_departure_only_sets_away_and_no_revisit():
    lays = [rot([mv(3, 40, 90.0), mv(48, 40, -90.0, "R", "right", reach=0.0)], frames=100)]
    doc = yaml.safe_load(implied_yaml("lrlr_sym_0p75dpf", _stats(lays), lays))
    assert doc["hold_frames"] == {"initial": 3, "away": 5, "revisit": 0}


def test_an_implied_translation_keeps_the_timing_keys_it_cannot_measure():
    moves = [Move("z", 10 + 100 * i, 100, 1.0, "D", d, 1.0) for i, d in enumerate("FRBL")]
    lays = [tra(moves, frames=431)]
    t = yaml.safe_load(implied_yaml("square", _stats(lays), lays))["timing"]
    assert t["revisit_hold"] == 0.06 and t["move"] == round(100 / 430, 4)


def test_a_check_made_without_a_preset_minimum_records_none():
    from evaluate.release.check import VideoCheck

    c = VideoCheck("k", "m", "t", 10, {}, {}, 60.0, "given")
    assert c.to_dict()["preset_min_frames"] == 0 and c.matches and c.to_dict()["matches"] is True
    c.problems.append("x")
    assert not c.matches


@pytest.mark.parametrize("camera_rows, measured", [(0, False), (1, True)])
def test_an_items_record_says_whether_camera_rows_follow_it_and_what_was_measured(tmp_path, monkeypatch,
                                                                                  camera_rows, measured):
    import harness.io
    import harness.record

    made: dict = {}
    monkeypatch.setattr(harness.io, "link_file", lambda src, dst: "hard")
    monkeypatch.setattr(harness.io, "sha256_file", lambda f: "sha")
    monkeypatch.setattr(harness.record.ItemRecord, "made_elsewhere", staticmethod(lambda item, d, **kw: kw))
    monkeypatch.setattr(harness.record, "write_record", lambda d, rec: made.update(rec, d=d))
    ctx = _ctx(tmp_path)
    p = _plan(tmp_path)
    if camera_rows:
        p.rows.append({"item_id": "i2", "category": "camera_rotation", "case_id": "c40", "where": "a:2"})
    assert p.camera_rows == camera_rows
    saved = []
    path = SimpleNamespace(save=saved.append, params={"source": "measured"} if measured else {})
    m = SimpleNamespace(to_dict=lambda: {"layout": "L"}) if measured else None
    d = tmp_path / "a" / "item"
    ctx._files(p, SimpleNamespace(model_dump=lambda: {"id": "c0"}), d, {"size": 5}, {"x": 1},
               {"width": 4}, path, m, SimpleNamespace(to_dict=lambda: {"key": "k"}))
    rel = made["release"]
    assert d.is_dir() and saved == [d / "camera.npz"] and made["d"] == d
    assert rel["camera_following"] is (camera_rows > 0) and rel["measured"] is measured
    assert rel["camera"] == ("measured layout" if measured else "preset")
    assert rel["measurement"] == ({"layout": "L", "video_sha256": "sha"} if measured else None)
    assert made["video"] == {"sha256": "sha", "size": 5, "width": 4}


def test_without_an_overlay_no_case_is_overlaid():
    from evaluate.release.importer import _overlay

    assert _overlay(SimpleNamespace(overlay=None)) == {}


@pytest.mark.parametrize("kind, optics", [("rotation", False), ("square", True)])
def test_a_measurement_is_keyed_by_file_kind_and_the_field_of_view_its_case_gives(tmp_path, monkeypatch, kind,
                                                                                  optics):
    import harness.video

    import evaluate.release.check as check
    import evaluate.release.measure as measure
    from evaluate.release import importer

    monkeypatch.setattr(check, "preset_spec", lambda name: SimpleNamespace(kind=kind))
    monkeypatch.setattr(harness.video, "probe_header", lambda f: {"width": 64})
    monkeypatch.setattr(importer, "_case_intrinsics", lambda case, info, hfov: "K")
    monkeypatch.setattr(measure, "hfov_of", lambda K, w: 50.0)
    f = tmp_path / "v.mp4"
    f.write_bytes(b"v")
    ctx = _ctx(tmp_path, optics=("c0",) if optics else ())
    key, got_kind, given = ctx._measure_key(SimpleNamespace(file=f, preset="x", case_key="c0"), None)
    assert got_kind == ("rotation" if kind == "rotation" else "translation")
    assert given == (50.0 if optics else None) and key[-2:] == (got_kind, given)
