"""The official release's trajectory presets (docs/trajectories.md, "Release presets").

What is a fact: the five names of rescuerz/WorldMemBench's ``trajectory`` column and the paper's numbers
(trajectories/paper_numbers.yaml; every preset x model is checked against them in test_paper_numbers.py). What is
inferred (and so pinned here only as the harness's reading): "dpf" = degrees per frame at a constant speed, 480
frames of layout after frame 0 (LRLR/LRUD 4 x 90 deg at 0.75, LRLRLR 6 x 80 deg at 1, LR-Hold a 60-frame initial
hold and 2 x 90 deg at 0.5, the square four 120-frame legs), the rest of the model's frames held at the end.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest

from adapters.base import build_adapter
from harness.config_groups import group_yaml, list_group
from trajectories import TrajectoryError, TrajectorySpec, build_path
from trajectories.conventions import geodesic_angle

PRESETS = ["lrlr_sym_0p75dpf", "lrud_sym_0p75dpf", "lrlrlr_sym_1dpf", "lr_hold_sym_0p5dpf", "translate_square"]
K = np.array([[480.0, 0, 416], [0, 480.0, 240], [0, 0, 1]])


def _spec(name: str, **over) -> TrajectorySpec:
    return TrajectorySpec.from_dict({**group_yaml("trajectory", name), **over})


def _step_deg(c2w: np.ndarray) -> np.ndarray:
    """Rotation between consecutive frames, degrees."""
    return np.degrees(geodesic_angle(c2w[:-1, :3, :3], c2w[1:, :3, :3]))


def test_presets_are_group_options_named_as_the_release():
    assert set(PRESETS) <= set(list_group("trajectory"))
    assert "_release" not in list_group("trajectory")  # the shared base is no option
    for name in PRESETS:
        assert _spec(name).release == name


@pytest.mark.parametrize("name,dpf,first,motion,held", [
    ("lrlr_sym_0p75dpf", 0.75, 1, 480, 13),    # 4 x 90 / 0.75 = 480 from frame 1, 13 at rest = 493
    ("lrud_sym_0p75dpf", 0.75, 1, 480, 13),
    ("lrlrlr_sym_1dpf", 1.0, 1, 480, 13),      # 6 x 80 / 1 = 480: LRLRLR at LingBot's 493 too
    ("lr_hold_sym_0p5dpf", 0.5, 61, 360, 73),  # 60 held after frame 0, 2 x 90 / 0.5 = 360, 72 held after the return
])
def test_constant_speed_and_the_papers_counts(name, dpf, first, motion, held):
    path = build_path(_spec(name), 493, 16, K, 480, 832)
    steps = _step_deg(path.c2w)
    moving = steps > 1e-9
    assert moving.sum() == motion
    np.testing.assert_allclose(steps[moving], dpf, atol=1e-9)
    assert np.flatnonzero(moving)[[0, -1]].tolist() == [first - 1, first + motion - 2]  # one block of motion
    assert np.allclose(path.c2w[:first], np.eye(4), atol=1e-12)  # frame 0 and the initial hold at the start pose
    still = path.c2w[first + motion - 1:]
    assert len(still) == held and np.allclose(still, np.eye(4), atol=1e-12)  # ... and the end, counting the arrival


def test_lrlrlr_runs_at_every_paper_count_and_yume_makes_551():
    spec = _spec("lrlrlr_sym_1dpf")
    assert spec.min_frames() == 481  # fits SANA-WM's 481, the shortest count the paper states
    for n in (481, 493, 497, 501, 505, 552):
        path = build_path(spec, n, 16, K, 480, 832)
        assert path.num_revisits == 3 and path.phases["R3"] == (401, 481)
    yaw, _ = build_path(spec, 552, 16, K, 480, 832).yaw_pitch_deg()
    assert yaw.min() == pytest.approx(-80.0) and np.allclose(yaw[480:], 0.0, atol=1e-9)  # YUME: 71 held + canvas
    with pytest.raises(TrajectoryError, match=r"frames_per_trajectory.lrlrlr_sym_1dpf: 481 or more"):
        build_path(spec, 480, 16, K, 480, 832)


def test_phases_follow_the_sweeps():
    path = build_path(_spec("lrlr_sym_0p75dpf"), 493, 16, K, 480, 832)
    assert path.phases == {"V": (0, 1), "D1": (1, 121), "R1": (121, 241), "D2": (241, 361), "R2": (361, 481),
                           "H": (481, 493)}
    yaw, _ = path.yaw_pitch_deg()
    assert yaw[120] == pytest.approx(-90.0) and yaw[240] == pytest.approx(0.0, abs=1e-9)
    # the sweeps fill the count: no final hold, no empty H phase
    assert "H" not in build_path(_spec("lrlr_sym_0p75dpf"), 481, 16, K, 480, 832).phases


def test_lrud_pitches_up_ninety_degrees():
    path = build_path(_spec("lrud_sym_0p75dpf"), 493, 16, K, 480, 832)
    _, pitch = path.yaw_pitch_deg()
    assert pitch[360] == pytest.approx(90.0, abs=1e-6) and pitch[241] == pytest.approx(0.75)


def test_the_other_reading_of_sym_keeps_the_counts_with_a_cosine_ease():
    const = build_path(_spec("lrlr_sym_0p75dpf"), 493, 16, K, 480, 832)
    cos = build_path(_spec("lrlr_sym_0p75dpf", profile="cosine"), 493, 16, K, 480, 832)
    assert cos.phases == const.phases
    steps = _step_deg(cos.c2w)
    assert steps[:120].mean() == pytest.approx(0.75, rel=1e-9)  # same mean speed ...
    assert steps.max() == pytest.approx(0.75 * np.pi / 2, rel=2e-3)  # ... peaking at pi/2 times it
    with pytest.raises(TrajectoryError, match="trajectory.profile='linear'"):
        build_path(_spec("lrlr_sym_0p75dpf", profile="linear"), 493, 16, K, 480, 832)


def test_holds_in_frames_and_rounding_to_whole_frames():
    spec = _spec("lr_hold_sym_0p5dpf", hold_frames={"initial": 8, "away": 4, "revisit": 2})
    path = build_path(spec, 493, 16, K, 480, 832)
    assert path.phases["V"] == (0, 9) and path.phases["D1"] == (9, 193) and path.phases["R1"] == (193, 375)
    odd = build_path(_spec("lrlr_sym_0p75dpf", deg_per_frame=0.8), 493, 16, K, 480, 832)
    assert odd.params["achieved_deg_per_frame"] == {"yaw": pytest.approx(90 / 112)}  # 112.5 frames -> 112


def test_lr_hold_phases_give_the_judge_an_initial_and_a_final_hold():
    path = build_path(_spec("lr_hold_sym_0p5dpf"), 481, 16, K, 480, 832)  # SANA-WM's count, the shortest
    assert path.phases == {"V": (0, 61), "D1": (61, 241), "R1": (241, 421), "H": (421, 481)}
    yaw, _ = path.yaw_pitch_deg()
    assert yaw[240] == pytest.approx(-90.0) and yaw[60] == 0.0 and yaw[61] == pytest.approx(-0.5)


@pytest.mark.parametrize("over,match", [
    ({"hold_frames": {"initial": -1}}, r"trajectory.hold_frames.initial=-1"),
    ({"hold_frames": {"start": 1}}, r"trajectory.hold_frames.start: unknown field"),
    ({"deg_per_frame": 0}, r"trajectory.deg_per_frame=0"),
    ({"pitch_deg": 91.0}, r"trajectory.pitch_deg=91.0: must be <= 90"),
])
def test_bad_preset_fields_are_named(over, match):
    name = "lrud_sym_0p75dpf"
    with pytest.raises(TrajectoryError, match=match):
        build_path(_spec(name, **over), 493, 16, K, 480, 832)


def test_a_speed_on_the_square_and_legs_on_a_rotation_are_refused():
    with pytest.raises(TrajectoryError, match="deg_per_frame=1.0: an angular speed applies to rotations only"):
        build_path(_spec("translate_square", deg_per_frame=1.0), 493, 16, K, 480, 832)
    with pytest.raises(TrajectoryError, match="leg_frames=120: frames per leg apply to the square only"):
        build_path(_spec("lrlr_sym_0p75dpf", leg_frames=120), 493, 16, K, 480, 832)
    with pytest.raises(TrajectoryError, match=r"trajectory.leg_frames=0: give a whole number of frames >= 1"):
        build_path(_spec("translate_square", leg_frames=0), 493, 16, K, 480, 832)


def test_translate_square_moves_four_legs_of_120_frames_at_a_constant_speed():
    path = build_path(_spec("translate_square"), 493, 16, K, 480, 832)
    centres = path.c2w[:, :3, 3]
    steps = np.linalg.norm(np.diff(centres, axis=0), axis=1)
    assert np.allclose(path.c2w[:, :3, :3], np.eye(3), atol=1e-12)  # the orientation never changes
    np.testing.assert_allclose(steps[:480], 1.0 / 120, atol=1e-12)  # side 1 over 120 frames, every frame
    assert np.allclose(centres[480:], 0.0, atol=1e-12) and len(centres[480:]) == 13
    np.testing.assert_allclose(centres[[120, 240, 360]], [[0, 0, 1], [1, 0, 1], [1, 0, 0]], atol=1e-12)  # F, R, B
    assert path.phases == {"V": (0, 1), "D1": (1, 361), "R1": (361, 481), "H": (481, 493)}
    assert path.params["units_per_frame"] == pytest.approx(1.0 / 120)
    eased = build_path(_spec("translate_square", profile="cosine"), 493, 16, K, 480, 832)
    assert eased.phases == path.phases and np.allclose(eased.c2w[[120, 240, 360, 480]], path.c2w[[120, 240, 360, 480]])


def test_our_four_are_unchanged_variants():
    """The harness's normalised-time trajectories keep their dicts (compile-cache keys, fingerprints)."""
    d = _spec("lrlr").to_dict()
    assert "deg_per_frame" not in d and "hold_frames" not in d


def test_cases_listing_a_trajectory_run_its_release_variant():
    from harness.cases import load_case_set

    cases = {c.id: c for c in load_case_set("builtin:demo")}
    rocket, cat = cases["environment_rocket"], cases["dynamic_cat"]

    def runs(case, name: str, **over) -> bool:
        return case.runs_on(name, _spec(name, **over))

    assert runs(rocket, "lrlr_sym_0p75dpf") and runs(rocket, "translate_square")
    assert not runs(rocket, "lr_hold_sym_0p5dpf")  # LR-Hold is the dynamic cases' trajectory ...
    assert runs(cat, "lr_hold_sym_0p5dpf") and not runs(cat, "lrlr_sym_0p75dpf")  # ... instead of LRLR
    assert runs(cat, "lrlr")  # listed by name: the harness's own variant still runs
    # the spec the run uses decides (a command-line override too): no families, every family
    assert runs(cat, "lrlr_sym_0p75dpf", families=[]) and not runs(rocket, "lrlr_sym_0p75dpf", variant_of="lr_hold")


@cache
def _adapter(model: str):
    return build_adapter(group_yaml("model", model))


@pytest.mark.parametrize("model,preset", list(itertools.product(list_group("model"), PRESETS)))
def test_every_model_compiles_every_preset(model, preset, tmp_path):
    """Dry-run compile of every (model, preset) under the model's paper policy: native files are written, and the
    path keeps the preset's speed at the model's frame count for it."""
    from adapters.base import ItemRequest
    from harness.app.runner import resolve_context
    from harness.cases import load_case_set

    a = _adapter(model)
    policy = resolve_context(group_yaml("context", a.config.paper_context), a)
    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    _, K_canvas = a.canvas_image_and_K(case)
    spec = _spec(preset)
    path = a.path_for(spec, K_canvas, preset)
    assert path.num_frames == a.config.frames_for(preset) >= spec.min_frames()
    if spec.deg_per_frame is not None:
        moving = _step_deg(path.c2w) > 1e-9
        clock = path.params.get("upstream_clock")  # MG-3 and YUME: sweeps laid on upstream's blocks (docs/controls.md)
        for step in _step_deg(path.c2w)[moving]:
            assert min(abs(step - v) for v in (clock["laid_deg_per_frame"] if clock else [spec.deg_per_frame])) < 1e-9
    controls = a.compile(ItemRequest(case=case, path=path, context=policy, seed=a.config.seed,
                                     item_dir=tmp_path / "item"))
    assert controls.files and all((tmp_path / "item" / "controls" / n).exists() for n in controls.files)


@pytest.mark.slow
def test_a_sweep_job_whose_trajectory_no_selected_case_runs_is_skipped(tmp_path):
    """The nine-model study sweeps the five presets; with static cases only, its LR-Hold jobs have nothing to run:
    they are skipped with a line (the sweep goes on), and only a sweep where no job has anything is refused."""
    from tests.support import run_cli

    args = ["cases.include=[environment_rocket]", "dry_run=true", "progress=false", "run=s"]
    r = run_cli(["-m", "trajectory=lrlr_sym_0p75dpf,lr_hold_sym_0p5dpf", *args], tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "lr_hold_sym_0p5dpf" in r.stderr and "that job is skipped" in r.stderr
    metas = list((tmp_path / "outputs" / "s").rglob("meta.json"))
    assert [m.parent.parent.name for m in metas] == ["lrlr_sym_0p75dpf"]
    r = run_cli(["-m", "trajectory=lr_hold_sym_0p5dpf", *args, "run=t"], tmp_path, timeout=600)
    assert r.returncode == 2 and "nothing to run" in r.stderr and "no job was started" in r.stderr
    assert not (tmp_path / "outputs" / "t").exists()
