"""Every number the paper states about the protocol (trajectories/paper_numbers.yaml), as tests.

The table: every row quotes the paper (verbatim: checked against the paper's text when WORLDMEMBENCH_PAPER_TEXT
names it), every number it holds is written in its quote, and the numbers agree with each other. The harness: every
release preset compiled for every model fits every stated number (trajectories.paper.paper_violations), whatever
the preset's comments say; the readings the paper leaves open are pinned as inferences; the model configs hold the
stated seeds, steps, chunk and stage sizes. The checker rejects the layouts the paper's numbers rule out: the
6 x 90-degree LRLRLR and an LR-Hold without an initial hold.
"""

from __future__ import annotations

import itertools
import os
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from harness.config_groups import group_yaml, list_group
from trajectories import TrajectoryError, TrajectorySpec, build_path
from trajectories.conventions import rotmat_from_yaw_pitch, se3
from trajectories.paper import (TRAJECTORIES, Layout, load_paper_numbers, measure_layout, paper_violations,
                                preset_speed)

P = load_paper_numbers()
PAPER_MODELS = ("hy_worldplay", "matrix_game3", "matrix_game35", "sana_wm", "yume", "lingbot", "lingbot_v2",
                "evoke", "dreamx")
K = np.array([[480.0, 0, 416], [0, 480.0, 240], [0, 0, 1]])
_WORDS = {1: ("one",), 2: ("two", "twice"), 3: ("three",), 4: ("four", "fourth"), 6: ("six",), 7: ("seven",),
          8: ("eight",), 9: ("nine",)}


def v(ref: str) -> float:
    return P.value(ref)


# -- the table ----------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.environ.get("WORLDMEMBENCH_PAPER_TEXT"),
                    reason="set WORLDMEMBENCH_PAPER_TEXT to the paper's text (arXiv 2610.19063v1) to check the quotes")
def test_every_quote_is_the_papers_own_sentence():
    text = Path(os.environ["WORLDMEMBENCH_PAPER_TEXT"]).read_text(encoding="utf-8")
    missing = [r.id for r in P.rows if r.quote not in text]
    assert not missing, f"quotes not found verbatim in the paper: {missing}"


def _written(number: float, quote: str) -> bool:
    """``number`` appears in ``quote`` as a numeral (``1,512`` too) or, for a small integer, as a word."""
    numerals = re.findall(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", quote)
    if any(float(n.replace(",", "")) == number for n in numerals):
        return True
    words = _WORDS.get(int(number), ()) if float(number).is_integer() else ()
    return any(re.search(rf"\b{w}\b", quote, re.IGNORECASE) for w in words)


def test_every_number_is_written_in_its_quote_or_its_reading_says_how():
    assert len({r.id for r in P.rows}) == len(P.rows), "row ids must be unique"
    for r in P.rows:
        assert r.section and r.quote, r.id
        for name, x in {**r.values, **{f"frames[{k}]": n for k, n in r.frames.items()}}.items():
            assert _written(x, r.quote) or r.reading, f"{r.id}.{name} = {x}: not in its quote and no reading given"


def test_the_table_names_real_presets_models_and_trajectories():
    assert set(P.presets) == set(TRAJECTORIES)
    assert set(P.presets.values()) <= set(list_group("trajectory"))
    models = {r.model for r in P.rows if r.model}
    assert models <= set(PAPER_MODELS) and set(PAPER_MODELS) <= set(list_group("model"))
    for r in P.rows:
        assert set(r.frames) <= {"all", *TRAJECTORIES}, r.id
    assert {preset_speed(p) for p in P.presets.values()} == {0.75, 1.0, 0.5, None}
    assert preset_speed("lrlr_sym_0p75dpf") == 0.75 and preset_speed("lrlrlr_sym_1dpf") == 1.0


def test_the_papers_numbers_agree_with_each_other():
    """Each identity is computed here from other rows, never copied from a result."""
    assert v("cases.families.human") + v("cases.families.object") + v("cases.families.environment") == \
        v("cases.static.static")
    assert v("cases.static.static") + v("cases.families.dynamic") == v("cases.families.total") == 260
    assert v("cases.camera_following.camera_following") <= v("cases.static.static")
    # the context study: every static case on the three rotation trajectories, every dynamic case on LR-Hold
    rotations = 3  # LRLR, LRLRLR, LRUD (appendix G's "three formal Rotation trajectories")
    for fam in ("human", "object", "environment"):
        assert v(f"h.videos.{fam}") == rotations * v(f"cases.families.{fam}")
    assert v("h.videos.dynamic") == v("cases.families.dynamic")
    assert sum(v(f"h.videos.{f}") for f in ("human", "object", "environment", "dynamic")) == v("h.videos.total")
    assert v("h.latency.videos") == v("h.videos.total")
    # 490 Environment revisit slots: 70 cases x (2 + 3 + 2) revisits of LRLR, LRLRLR, LRUD
    revisits = v("trajectory.lrlr_lrlrlr.lrlr_revisits") + v("trajectory.lrlr_lrlrlr.lrlrlr_revisits") + \
        v("trajectory.lrud.revisits")
    assert v("cases.families.environment") * revisits == v("g1.slots.slots") == v("h.slots.slots")
    assert v("c.yume.frames.lrlrlr_revisits") == v("trajectory.lrlr_lrlrlr.lrlrlr_revisits")
    # context budgets
    assert v("h.sliding.sink") + v("h.sliding.recent") + v("h.sliding.current") == v("h.sliding.budget")
    assert sum(v(f"h.fov.{k}") for k in ("sink", "recent", "retrieved", "current")) == v("h.fov.budget") == \
        v("h.sliding.budget")
    assert v("h.fov_chunks.chunks") * v("c.lingbot.frames.chunk_latents") == v("h.fov.retrieved")
    for policy in ("fov", "sliding"):  # "Speedup is the ratio of FullKV's mean latency to the policy's"
        assert round(v("h.latency.fullkv_s") / v(f"h.latency.{policy}_s"), 2) == v(f"h.latency.{policy}_speedup")
    # the event gate: S_gated = p_start x S_cond
    hy, lb = "dynamic.gated_example_hy", "dynamic.gated_example_lingbot"
    p_hy = v(f"{hy}.started") / v("cases.families.dynamic")
    assert round(100 * p_hy, 1) == v(f"{hy}.start_rate_percent")
    assert round(p_hy * v(f"{hy}.conditional"), 3) == v(f"{hy}.gated")
    assert round(v(f"{lb}.started") / v(f"{lb}.cases") * v(f"{lb}.conditional"), 3) == v(f"{lb}.gated")
    assert v("dynamic.questions.aspects") * v("dynamic.questions.per_aspect") == v("dynamic.questions.questions")
    # the human study
    assert v("f.static_pairs.pairs") * v("f.static_pairs.annotators") == v("f.static_pairs.judgements")
    assert v("f.static_pairs.judgements") / v("f.static_metrics.metrics") == v("f.static_pairs.per_metric")
    assert v("f.static_pairs.pairs") / v("f.static_metrics.metrics") == v("f.tasks.tasks")
    ex = "f.identity_example"
    assert v(f"{ex}.decisive") + v(f"{ex}.ties") + v(f"{ex}.splits") == v("f.tasks.tasks")
    assert v(f"{ex}.ties") + v(f"{ex}.splits") == v(f"{ex}.remaining")
    assert round(100 * v(f"{ex}.agreements") / v(f"{ex}.decisive"), 1) == v(f"{ex}.percent")
    assert v("f.dynamic_items.instances") * v("dynamic.questions.questions") == v("f.dynamic_items.items")
    assert v("f.dynamic_items.items") * v("f.dynamic_judgements.annotators") == v("f.dynamic_judgements.judgements")
    assert v("c.matrix_game3.gpus.diffusion_gpus") + v("c.matrix_game3.gpus.decode_gpus") == v("c.gpus.gpus")


def test_the_stated_frame_counts_agree_with_their_own_arithmetic():
    mg3 = "c.matrix_game3.frames"
    assert v(f"{mg3}.first_segment") + v(f"{mg3}.per_iteration") * (v(f"{mg3}.iterations") - 1) == \
        P.stated_frames("matrix_game3", "LRLR")[0]
    assert v("c.matrix_game35.blocks.blocks") * v("c.matrix_game35.blocks.poses_per_block") + 1 == \
        P.stated_frames("matrix_game35", "LRLR")[0]
    stride = v("c.hy_worldplay.anchor.latent_stride")  # one latent every four pixel frames (the Wan VAE)
    assert stride * (v("c.dreamx.frames.latents") - 1) + 1 == P.stated_frames("dreamx", "LRLR")[0]
    lingbot = P.stated_frames("lingbot", "LRLR")[0]
    latents = (lingbot - 1) / stride + 1
    assert latents % v("c.lingbot.frames.chunk_latents") == 0  # 493 frames = 124 latents = 31 chunks of 4
    stage = v("c.yume.stages.frames_per_stage")
    for t in ("LRLR", "LRUD", "LRLRLR"):
        assert P.stated_frames("yume", t)[0] % stage == 0  # 17 and 19 caption stages
    assert P.stated_frames("yume", "LRLRLR")[0] == 551 and P.stated_frames("yume", "LR-Hold") is None
    # Evoke's static tail and SANA-WM's count put the last move on the same frame: 501 - 21 = 481 - 1 = 480
    assert P.motion_end() == P.stated_frames("sana_wm", "LRLR")[0] - 1 == 480
    # LingBot World v2's 493 frames hold for all 660 videos, LRLRLR included
    assert P.stated_frames("lingbot_v2", "LRLRLR") == P.stated_frames("lingbot_v2", "LR-Hold")
    assert P.stated_frames("lingbot_v2", "LRLRLR")[0] == 493
    assert P.stated_frames("hy_worldplay", "LRLR") is None  # only in Table 4, an image


# -- the harness against the table ----------------------------------------------------------------------------------

@cache
def _adapter(model: str):
    from adapters.base import build_adapter

    return build_adapter(group_yaml("model", model))


@cache
def _canvas_K(model: str) -> np.ndarray:
    from harness.cases import load_case_set

    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    return _adapter(model).canvas_image_and_K(case)[1]


def _spec(name: str, **over) -> TrajectorySpec:
    return TrajectorySpec.from_dict({**group_yaml("trajectory", name), **over})


def _requested(model: str, preset: str):
    """The path the harness asks ``model`` for: the preset laid at the model's count on its canvas, before the
    model's own control clock (adapters/controls/clock.py) re-times it."""
    return _adapter(model)._build_path(_spec(preset), _canvas_K(model), preset)


def _compiled(model: str, preset: str):
    return _adapter(model).path_for(_spec(preset), _canvas_K(model), preset)


def _compiled_layout(model: str, preset: str) -> Layout:
    return measure_layout(_compiled(model, preset).c2w)


#: what laying a path on upstream's block clock may change (docs/controls.md): where each move starts and ends
#: (so the last move's frame and the mean speed), never the count, the amplitudes, the returns or frame 0
_CLOCK_MAY_MOVE = ("end of motion:", "speed:")


@pytest.mark.parametrize("model,trajectory", list(itertools.product(list_group("model"), TRAJECTORIES)))
def test_every_preset_compiled_for_every_model_fits_every_stated_number(model, trajectory):
    """The model's own path (its adapter, its config, its canvas), measured from the poses: the count, the end of
    the motion, the speed, the revisits, LR-Hold's holds. A model whose upstream holds controls for whole blocks
    (Matrix-Game 3, YUME) gets the requested path laid on those blocks: the requested path fits every number, and
    the laid one keeps every number but where each move starts and ends, each boundary moved by at most half a
    block (the deviation docs/controls.md lists with its cost)."""
    preset = P.presets[trajectory]
    requested = _requested(model, preset)
    assert paper_violations(trajectory, measure_layout(requested.c2w), model, preset_speed(preset)) == []
    compiled = _compiled(model, preset)
    layout = measure_layout(compiled.c2w)
    found = paper_violations(trajectory, layout, model, preset_speed(preset))
    clock = compiled.params.get("upstream_clock")
    if clock is None:
        assert found == []
    else:
        assert [m for m in found if not m.startswith(_CLOCK_MAY_MOVE)] == []
        edges = np.asarray(_adapter(model).control_clock(compiled.num_frames).edges)
        half_block = int(np.ceil(np.diff(edges).max() / 2))
        ends, laid = np.asarray(clock["segment_ends"]), np.asarray(clock["laid_ends"])
        # keep=time: every boundary to its nearest edge; keep=length: every segment but the final hold (the rest of
        # the frames) to its nearest whole number of blocks (equal sweeps stay equal, so the shifts add up)
        moved = laid - ends if clock["keep"] == "time" else (np.diff(laid, prepend=0) - np.diff(ends, prepend=0))[:-1]
        assert 0 < np.abs(moved).max() <= half_block
    stated = P.stated_frames(model, trajectory)
    if stated is not None:
        assert layout.frames == stated[0] + P.harness_poses_beyond_frames.get(model, 0)


@pytest.mark.parametrize("model", list_group("model"))
def test_every_model_runs_the_presets_at_its_own_count_without_overrides(model):
    """No per-model override of a preset unless the paper states one (YUME's LRLRLR) or the model is no paper
    model whose own default is shorter than the layout (the SANA-WM built-ins run SANA-WM's 481)."""
    cfg = _adapter(model).config
    overridden = {p for p in P.presets.values() if p in cfg.frames_per_trajectory}
    if model == "yume":
        assert overridden == {"lrlrlr_sym_1dpf"} and cfg.frames_for("lrlrlr_sym_1dpf") == 551 + 1
    elif model in PAPER_MODELS:
        assert not overridden, f"{model}: {sorted(overridden)} override the paper's count"
    elif overridden:
        assert cfg.num_frames <= P.motion_end() and {cfg.frames_for(p) for p in overridden} == {481}


def test_the_inferred_readings_the_paper_leaves_open():
    """INFERENCE, pinned (docs/trajectories.md, "Release presets"): the static presets and the square move on
    every one of the 480 frames after frame 0 (no holds), LRLRLR in 80-degree sweeps, LR-Hold holds 60 frames
    first, the square's legs take 120 frames each."""
    for trajectory in ("LRLR", "LRLRLR", "LRUD", "Translation"):
        layout = _compiled_layout("lingbot_v2", P.presets[trajectory])
        assert (layout.initial_hold, layout.motion, layout.interior_hold) == (0, 480, 0), trajectory
    peaks = {t: [round(e.peak, 9) for e in _compiled_layout("sana_wm", P.presets[t]).excursions]
             for t in ("LRLR", "LRLRLR", "LRUD", "LR-Hold")}
    assert peaks == {"LRLR": [90, 90], "LRLRLR": [80, 80, 80], "LRUD": [90, 90], "LR-Hold": [90]}
    hold = _compiled_layout("sana_wm", "lr_hold_sym_0p5dpf")
    assert (hold.initial_hold, hold.motion, hold.final_static) == (60, 360, 61)  # 60 held after the return
    square = _compiled_layout("evoke", "translate_square")
    assert square.mean_speed == pytest.approx(1.0 / 120) and square.final_static == 21


def test_the_model_configs_hold_the_papers_settings():
    """Seeds, sampling steps, frame counts, chunk, stage and block sizes of appendix C, as each model's config
    (conf/model/<model>.yaml through its adapter's config class) has them."""
    seeds = {r.model: r.values["seed"] for r in P.rows if r.model and "seed" in r.values}
    steps = {r.model: r.values["steps"] for r in P.rows if r.model and "steps" in r.values}
    assert set(seeds) == set(PAPER_MODELS)
    for model, seed in seeds.items():
        assert _adapter(model).config.seed == seed, model
    for model, n in steps.items():
        assert _adapter(model).config.sampling_steps == n, model
    for model in ("lingbot", "lingbot_v2"):
        assert _adapter(model).config.chunk_latents == v("c.lingbot.frames.chunk_latents")
    assert _adapter("yume").config.frames_per_stage == v("c.yume.stages.frames_per_stage")
    assert _adapter("hy_worldplay").config.latent_stride == v("c.hy_worldplay.anchor.latent_stride")
    mg3 = _adapter("matrix_game3").config
    assert (mg3.first_clip_frames, mg3.frames_per_iteration) == (v("c.matrix_game3.frames.first_segment"),
                                                                 v("c.matrix_game3.frames.per_iteration"))
    assert mg3.iterations(mg3.num_frames) == v("c.matrix_game3.frames.iterations")
    assert _adapter("matrix_game35").config.num_blocks == v("c.matrix_game35.blocks.blocks")
    assert _adapter("evoke").config.trailing_hold_frames == v("c.evoke.static_end.static_end")


# -- what the stated numbers rule out ---------------------------------------------------------------------------

def _old_lrlrlr() -> TrajectorySpec:
    """LRLRLR as the harness laid it out before: 6 x 90 degrees at 1 degree per frame (540 frames of motion)."""
    return _spec("lrlrlr_sym_1dpf", yaw_deg=90.0)


def test_a_ninety_degree_lrlrlr_contradicts_the_stated_counts():
    spec = _old_lrlrlr()
    assert spec.min_frames() == 541
    for model in ("lingbot_v2", "lingbot", "sana_wm", "matrix_game3", "matrix_game35", "evoke", "dreamx"):
        n = P.poses(model, "LRLRLR")
        with pytest.raises(TrajectoryError, match="too short"):  # cannot be laid out at the paper's count
            build_path(spec, n, 16, K, 480, 832)
    # at the counts the harness used to run it (541 LingBot, 551 + 1 YUME), each stated number rejects it
    lingbot = paper_violations("LRLRLR", measure_layout(build_path(spec, 541, 16, K, 480, 832).c2w), "lingbot_v2", 1.0)
    assert any(m.startswith("frames: 541, but the paper states 493") for m in lingbot)
    assert any(m.startswith("end of motion: frame 540, not 480") for m in lingbot)
    yume = paper_violations("LRLRLR", measure_layout(build_path(spec, 552, 16, K, 480, 832).c2w), "yume", 1.0)
    assert yume and all(m.startswith("end of motion: frame 540") for m in yume)  # the count alone fits YUME


def test_an_lr_hold_without_an_initial_hold_is_rejected():
    layout = measure_layout(build_path(_spec("lr_hold_sym_0p5dpf", hold_frames={"initial": 0}),
                                       493, 16, K, 480, 832).c2w)
    out = paper_violations("LR-Hold", layout, "lingbot_v2", 0.5)
    assert len(out) == 1 and out[0].startswith("initial hold: 0 frame(s) after frame 0")
    short = measure_layout(build_path(_spec("lr_hold_sym_0p5dpf", hold_frames={"initial": 15}),
                                      493, 16, K, 480, 832).c2w)
    assert paper_violations("LR-Hold", short, "lingbot_v2", 0.5)  # frames 0 and 8 only: one stride of evidence
    # all 120 frames at rest up front leave SANA-WM's 481-frame video no final stationary hold for the judge
    late = measure_layout(build_path(_spec("lr_hold_sym_0p5dpf", hold_frames={"initial": 120}),
                                     481, 16, K, 480, 832).c2w)
    assert [m.split(":")[0] for m in paper_violations("LR-Hold", late, "sana_wm", 0.5)] == ["final hold"]


@pytest.mark.parametrize("over,trajectory,model,first_word", [
    ({"pitch_deg": 60.0}, "LRUD", "lingbot", "end of motion"),                 # 60-deg pitch: 400 frames of motion
    ({"hold_frames": {"initial": 8}}, "LRLR", "sana_wm", "frames"),            # a hold on top of 480: 489 > 481
    ({"cycles": ["left", "right"]}, "LRLR", "lingbot", "cycle 2"),             # R first on the second cycle
    ({"deg_per_frame": 0.8}, "LRLR", "lingbot", "end of motion"),             # the wrong speed for the name
])
def test_other_layouts_that_contradict_a_stated_number(over, trajectory, model, first_word):
    spec = _spec(P.presets[trajectory], **over)
    n = max(P.poses(model, trajectory), spec.min_frames())
    out = paper_violations(trajectory, measure_layout(build_path(spec, n, 16, K, 480, 832).c2w), model,
                           preset_speed(P.presets[trajectory]))
    assert out and out[0].startswith(first_word), out


def test_the_other_reading_of_sym_fits_every_number_too():
    """A symmetric ease (``profile: cosine``) keeps every count, hold and mean speed: the paper cannot tell the
    two apart, which is why it is an inference and ``release check`` measures it."""
    for trajectory in TRAJECTORIES:
        preset = P.presets[trajectory]
        path = build_path(_spec(preset, profile="cosine"), 493, 16, K, 480, 832)
        assert paper_violations(trajectory, measure_layout(path.c2w), "lingbot_v2", preset_speed(preset)) == []


def test_the_old_square_on_normalised_time_contradicts_evokes_static_end():
    old = TrajectorySpec(name="translate_square", kind="square", side=1.0)
    out = paper_violations("Translation", measure_layout(build_path(old, 501, 16, K, 480, 832).c2w), "evoke")
    assert [m.split(":")[0] for m in out] == ["end of motion"]


# -- the measurement itself, on poses made here (not by the builder) ------------------------------------------------

def test_measure_layout_reads_holds_moves_and_cycles_from_poses_alone():
    yaw = np.concatenate([np.zeros(6), -3.0 * np.arange(1, 11), np.full(2, -30.0), -30 + 3.0 * np.arange(1, 11),
                          np.zeros(4)])
    pitch = np.zeros_like(yaw)
    pitch[-3:-1] = [5.0, 10.0]  # a pitch-up excursion at the end, then back
    pitch[-1] = 0.0
    c2w = se3(rotmat_from_yaw_pitch(np.deg2rad(yaw), np.deg2rad(pitch)), np.zeros((len(yaw), 3)))
    m = measure_layout(c2w)
    assert (m.frames, m.initial_hold, m.settle) == (len(yaw), 5, len(yaw) - 1)
    assert m.motion == 10 + 10 + 3 and m.interior_hold == 2 + 1
    assert [(e.axis, e.direction, round(e.peak, 9)) for e in m.excursions] == [("yaw", "left", 30.0),
                                                                              ("pitch", "up", 10.0)]
    assert m.starts_at_identity and m.rotates and not m.translates
    square = np.zeros((13, 4, 4))
    square[:] = np.eye(4)
    pts = [[0, 0, 0], [0, 0, 1], [0, 0, 2], [1, 0, 2], [2, 0, 2], [2, 0, 1], [2, 0, 0], [1, 0, 0], [0, 0, 0]]
    square[:9, :3, 3] = pts
    t = measure_layout(square)
    assert [(e.axis, e.direction) for e in t.excursions] == [("translation", "FRBL")]
    assert (t.motion, t.settle, t.final_static, t.mean_speed) == (8, 8, 5, 1.0)
