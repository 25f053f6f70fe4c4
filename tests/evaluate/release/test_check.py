"""``release check``'s verdict: a measured layout against the preset's, whatever ``conf/trajectory/*.yaml`` says,
and the preset YAML the videos imply (the one command that settles an inference).

Layouts are laid out from explicit numbers (tests/evaluate/release/footage.py) and, where the preset matters, from
the preset YAML's own fields, never from the numbers the presets happen to hold today."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.release.check import VideoCheck, check_video, compare, groups, implied_yaml, preset_path, preset_spec
from evaluate.release.measure import Measurement
from evaluate.release.segment import Layout, layout_of, path_layout
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
