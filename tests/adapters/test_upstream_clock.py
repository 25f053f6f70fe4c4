"""Every model's compiled controls, replayed row by row on upstream's own clock (issue 43 item 3, issue 41 item 5).

For each of the nine models and every trajectory in ``conf/trajectory/`` (the release presets included, whatever
they are when this runs), the item is compiled as a dry run would, the native files are read back, and upstream's
own generator or loader is replayed over them by an independent reimplementation written from upstream's code at
the pinned commit (each rule cites ``owner/repo@commit path:line``; CI has no network, so nothing is imported from
a checkout). A check fails on any boundary or value upstream's code would not produce; each one is shown to fail on
a control table with a hold boundary shifted by one row.

Held controls (upstream keeps a value for a whole block):

* Matrix-Game 3: ``combine_data`` gives row 0 an action of its own, then holds each action for 12 rows (the last
  block cut at the end), every row of a block equal (SkyworkAI/Matrix-Game@71c3cd7f7413
  Matrix-Game-3/utils/conditions.py:21-32; ``get_data`` calls it over the whole video, utils/utils.py:104, with the
  video's frame count, pipeline/inference_pipeline.py:392-394). Keys: its vocabulary (:41-52, :73-75) plus the
  harness's declared S; a mouse value under 0.02 is dropped by upstream's integrator (utils/utils.py:12, :49-50).
* YUME: one caption per 29-frame stage (stdstu12/YUME@111c3fa fastvideo/sample/sample_5b.py:812-820, :875-876,
  :1083-1092), one movement key and one rotation key per caption as its training captions hold one per clip
  (fastvideo/dataset/t2v_datasets.py:405, :418), read from the poses by upstream's own per-frame decoder
  (decode_camera_controls_from_c2w_sequence.py:11-58; thresholds 1e-4 and 1e-3 rad, :2) and the rotation speed by
  its own measure, the mean angle between consecutive optical axes (t2v_datasets.py:96-114, :161-211).

Pose tables (upstream reads a pose per frame or per latent): the rows upstream's loader reads must be the request's
poses at the frames they condition, with no time warp and nothing left over.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from adapters.base import ItemRequest, build_adapter
from adapters.goldens import MODELS
from harness.cases import load_case_set
from harness.config_groups import group_yaml, list_group
from harness.context import ContextPolicy
from trajectories import TrajectorySpec
from tests.support.standin import mg3_rule
from trajectories.conventions import rot_x, rot_y, se3

TRAJECTORIES = list(list_group("trajectory"))
RELEASE = [t for t in TRAJECTORIES if group_yaml("trajectory", t).get("deg_per_frame") is not None]
#: the pose-table models run the release presets in the fast tier and the harness's own presets in the slow one
POSE_TRAJECTORIES = [pytest.param(t, marks=() if t in RELEASE else pytest.mark.slow) for t in TRAJECTORIES]
#: The return bound every lossy encoder is held to: Matrix-Game 3's dead zone, the smallest turn its mouse can send
#: (15 deg per unit x 0.02, SkyworkAI/Matrix-Game@71c3cd7f7413 Matrix-Game-3/utils/utils.py:10-12).
RETURN_BOUND_DEG = 15.0 * 0.02
CASE = "environment_rocket"


@cache
def _adapter(model: str):
    return build_adapter(group_yaml("model", model))


@cache
def _case():
    return {c.id: c for c in load_case_set("builtin:demo")}[CASE]


_COMPILED: dict[tuple[str, str], tuple[object, Path]] = {}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """``compiled(model, trajectory)`` -> (item path, controls folder), compiled once per module."""

    def get(model: str, trajectory: str):
        key = (model, trajectory)
        if key not in _COMPILED:
            a = _adapter(model)
            K = a.canvas_K(_case())
            path = a.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", trajectory)), K, trajectory)
            item = tmp_path_factory.mktemp(f"{model}-{trajectory}")
            policy = ContextPolicy.from_dict(group_yaml("context", a.config.paper_context))
            a.compile(ItemRequest(case=_case(), path=path, context=policy, seed=a.config.seed, item_dir=item))
            _COMPILED[key] = (path, item / "controls")
        return _COMPILED[key]

    return get


def _angle_deg(Ra: np.ndarray, Rb: np.ndarray) -> np.ndarray:
    """Geodesic angle in degrees between two stacks of rotations (..., 3, 3)."""
    rel = np.einsum("...ji,...jk->...ik", Ra, Rb)
    return np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0)))


def _return_frames(path) -> list[int]:
    """The last frame of each return move: where the camera is back at the start pose."""
    return [s.end - 1 for s in path.segments if s.kind == "move" and s.phase.startswith("R")]


# ==================================================================================================================
# Matrix-Game 3: upstream's condition generator replayed here, its integrator in tests/support/standin/mg3_rule.py
# ==================================================================================================================

#: keyboard one-hots [W, S, A, D] its generator produces: the camera-only actions press nothing, then forward, left,
#: right, forward_left, forward_right (conditions.py:41-52, :64-68, :73-75); S is the harness's declared extra
#: (adapters/matrix_game3/controls.py MG3_CAVEATS).
MG3_GENERATOR_KEYS = {(0, 0, 0, 0), (1, 0, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1), (1, 0, 1, 0), (1, 0, 0, 1)}
MG3_DECLARED_KEYS = {(0, 1, 0, 0)}


def upstream_mg3_blocks(num_frames: int) -> list[tuple[int, int]]:
    """``combine_data``'s blocks (conditions.py:14-32): frame 0 gets ``k[:1]`` alone, then ``rd_frame = 12`` rows
    at a time, the last cut to what is left (``min(rd_frame, num_frames - current_frame)``)."""
    out, current = [], 0
    while current < num_frames:
        if current == 0:
            out.append((0, 1))
            current = 1
        else:
            n = min(12, num_frames - current)
            out.append((current, current + n))
            current += n
    return out


def mg3_row_problems(keyboard: np.ndarray, mouse: np.ndarray) -> list[str]:
    """What upstream's generator would not produce in a (T, 6) keyboard and (T, 2) mouse table, row by row."""
    bad = []
    for a, b in upstream_mg3_blocks(len(keyboard)):
        for name, table in (("keyboard", keyboard), ("mouse", mouse)):
            rows = np.flatnonzero((table[a:b] != table[a]).any(axis=1))
            if len(rows):
                bad.append(f"{name} changes at row {a + int(rows[0])} inside upstream's block [{a}, {b})")
    keys = {tuple(int(x) for x in r) for r in keyboard[:, :4]}
    bad += [f"keys {k} are not in upstream's vocabulary" for k in keys - MG3_GENERATOR_KEYS - MG3_DECLARED_KEYS]
    small = np.flatnonzero(((mouse != 0) & (np.abs(mouse) < np.float32(0.02))).any(axis=1))
    bad += [f"mouse row {int(r)} is under upstream's 0.02 dead zone" for r in small[:3]]
    return bad


def _mg3_tables(controls: Path) -> tuple[np.ndarray, np.ndarray]:
    return np.load(controls / "keyboard_condition.npy"), np.load(controls / "mouse_condition.npy")


@pytest.mark.parametrize("trajectory", TRAJECTORIES)
def test_mg3_rows_are_what_upstreams_generator_makes_and_turn_where_the_path_turns(trajectory, compiled):
    path, controls = compiled("matrix_game3", trajectory)
    kb, ms = _mg3_tables(controls)
    assert len(kb) == len(ms) == path.num_frames == 57 + 40 * (_adapter("matrix_game3").config.iterations(
        path.num_frames) - 1)  # the clips' frames (pipeline/inference_pipeline.py:386-392@20e033e3dde3)
    assert not mg3_row_problems(kb, ms), mg3_row_problems(kb, ms)[:5]
    states = mg3_rule.all_poses(kb, ms)  # upstream's integrator, replayed (tests/support/standin/mg3_rule.py)
    yaw = np.degrees(np.arctan2(-path.c2w[:, 2, 0], path.c2w[:, 0, 0]))  # the request's yaw (+ right), from the x axis
    pitch = np.degrees(np.arcsin(np.clip(-path.c2w[:, 1, 2], -1, 1)))  # + turns up; MG-3's pitch is + down
    edges = [a for a, _ in upstream_mg3_blocks(path.num_frames)]
    ends = {s.end - 1 for s in path.segments}
    assert ends <= set(edges) | {path.num_frames - 1}  # every turn and stop is on one of upstream's block edges
    for f in _return_frames(path):
        assert abs(states[f, 4] - yaw[f]) <= RETURN_BOUND_DEG and abs(-states[f, 3] - pitch[f]) <= RETURN_BOUND_DEG
    if trajectory in RELEASE:  # constant sweeps laid on the blocks: every row carries the path exactly
        np.testing.assert_allclose(states[:, 4], yaw, atol=1e-3)
        np.testing.assert_allclose(-states[:, 3], pitch, atol=1e-3)


def _shift_one_row(table: np.ndarray, row: int) -> np.ndarray:
    """The table with the change at ``row`` (where a new value starts) made one row later: the boundary delayed,
    everything after it shifted, the last row dropped."""
    out = table.copy()
    out[row] = table[row - 1]
    out[row + 1:] = table[row:-1]
    return out


def test_mg3_check_fails_on_a_boundary_shifted_by_one_row(compiled):
    path, controls = compiled("matrix_game3", "lrlr_sym_0p75dpf" if "lrlr_sym_0p75dpf" in TRAJECTORIES else
                              TRAJECTORIES[0])
    kb, ms = _mg3_tables(controls)
    assert not mg3_row_problems(kb, ms)
    changes = np.flatnonzero((np.diff(ms, axis=0) != 0).any(axis=1)) + 1  # the rows where a new value starts
    assert len(changes)
    for row in changes:  # every hold boundary, delayed by one row, breaks one of upstream's blocks
        probs = mg3_row_problems(kb, _shift_one_row(ms, int(row)))
        assert any("inside upstream's block" in p for p in probs), (row, probs)
    # main's encoding held blocks from row 0 (rows 0-11, 12-23, ...): one row off upstream's, and it is caught
    old = np.zeros_like(ms)
    old[0:12, 1], old[12:24, 1] = 0.05, 0.06
    assert any("changes at row 12" in p for p in mg3_row_problems(np.zeros_like(kb), old))


def test_mg3_checks_see_values_upstream_never_makes():
    T = 25
    kb, ms = np.zeros((T, 6), np.float32), np.zeros((T, 2), np.float32)
    kb[1:13, :4] = (0, 1, 1, 0)  # S+A: back_left is commented out upstream (conditions.py:50)
    ms[13:25, 1] = 0.015  # under the dead zone: upstream's integrator drops it
    probs = mg3_row_problems(kb, ms)
    assert any("(0, 1, 1, 0)" in p for p in probs) and any("dead zone" in p for p in probs)
    assert upstream_mg3_blocks(497)[-1] == (493, 497) and upstream_mg3_blocks(57)[:3] == [(0, 1), (1, 13), (13, 25)]


# ==================================================================================================================
# YUME: one caption per stage, read back by upstream's own decoder and speed measure
# ==================================================================================================================

STAGE = 29  # frames decoded per caption (sample_5b.py:875-876: 8 latents, 1 + 4 x 7 frames; anchor dropped)


def upstream_yume_frame_keys(c2w: np.ndarray) -> list[tuple[str, str]]:
    """``decode_camera_controls_from_c2w_sequence`` (decode_camera_controls_from_c2w_sequence.py:2-58@111c3fa):
    per consecutive pair, W/S then D/A from the relative translation beyond 1e-4, and the tilt then the pan from
    the relative rotation's ``xyz`` Euler angles beyond 1e-3 rad."""
    from scipy.spatial.transform import Rotation

    out = []
    for i in range(len(c2w) - 1):
        rel = np.linalg.inv(c2w[i]) @ c2w[i + 1]
        x, _, z = rel[:3, 3]
        keys = [k for k, on in (("W", z > 1e-4), ("S", z < -1e-4), ("D", x > 1e-4), ("A", x < -1e-4)) if on]
        ex = Rotation.from_matrix(rel[:3, :3]).as_euler("xyz")
        pan = "→" if ex[1] > 1e-3 else "←" if ex[1] < -1e-3 else ""
        tilt = "↑" if ex[0] > 1e-3 else "↓" if ex[0] < -1e-3 else ""
        out.append(("+".join(keys) or "None", (tilt + pan) or "·"))
    return out


def upstream_yume_view_speed(c2w: np.ndarray) -> float:
    """``avg_rot_angle`` of ``calculate_metrics_in_range`` over the stage's pairs (t2v_datasets.py:96-114,
    :195-211): the mean angle in degrees between consecutive optical axes (the rotation's third column)."""
    z = c2w[:, :3, 2]
    cos = np.sum(z[:-1] * z[1:], axis=1) / (np.linalg.norm(z[:-1], axis=1) * np.linalg.norm(z[1:], axis=1))
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).mean())


def _yume_lines(controls: Path) -> list[str]:
    return [x for x in (controls / "caption.txt").read_text().splitlines() if x.strip()]


def yume_stage_problems(lines: list[str], c2w: np.ndarray) -> list[str]:
    """What a caption table says that upstream's own decoder and measure do not read from the stage it conditions:
    stage ``s`` covers poses ``29 s .. 29 s + 29`` (the anchor is dropped; the shim hands line ``s`` to stage ``s``)."""
    from adapters.yume.controls import yume_parse_caption, yume_parse_speeds

    bad = []
    if len(c2w) != STAGE * len(lines) + 1:
        return [f"{len(lines)} captions make {STAGE * len(lines)} frames, the path has {len(c2w) - 1} after the image"]
    for s, line in enumerate(lines):
        stage = c2w[STAGE * s:STAGE * (s + 1) + 1]
        move, rot = yume_parse_caption(line)
        frames = upstream_yume_frame_keys(stage)
        steps = _angle_deg(stage[:-1, :3, :3], stage[1:, :3, :3])
        # one key per caption: every pair upstream labels as turning turns that way, and none stands still
        turns = {r for _, r in frames if r != "·"}
        if rot == "·" and turns or rot != "·" and (turns - {rot} or (steps < 1e-9).any()):
            bad.append(f"stage {s}: caption turns {rot!r}, upstream reads {sorted({r for _, r in frames})}")
        moves = {m for m, _ in frames if m != "None"}
        if move == "None" and moves or move != "None" and moves - {move}:
            bad.append(f"stage {s}: caption moves {move!r}, upstream reads {sorted({m for m, _ in frames})}")
        want = float(np.clip(upstream_yume_view_speed(stage), 0.1, 10)) if rot != "·" else 0.0
        got = yume_parse_speeds(line)[1]
        if abs(got - want) > 1e-8 * max(want, 1.0):  # written to 9 digits (adapters/yume/controls.py yume_number)
            bad.append(f"stage {s}: caption turns at {got}, upstream measures {want}")
    return bad


@pytest.mark.parametrize("trajectory", TRAJECTORIES)
def test_yume_captions_are_what_upstream_reads_from_each_stage(trajectory, compiled):
    path, controls = compiled("yume", trajectory)
    lines = _yume_lines(controls)
    assert not yume_stage_problems(lines, path.c2w), yume_stage_problems(lines, path.c2w)[:5]
    ends = {s.end - 1 for s in path.segments}
    assert all(e % STAGE == 0 for e in ends)  # every turn and stop is on a stage edge


@pytest.mark.parametrize("trajectory", TRAJECTORIES)
def test_yume_returns_land_within_the_bound_on_the_harness_decoder(trajectory, compiled):
    """Issue 41 item 5: decoded back by the harness's decoder of its captions, every return is within the bound the
    other models hold; on the release presets the whole decoded path is the item's path."""
    from adapters.yume.controls import yume_decode

    path, controls = compiled("yume", trajectory)
    back = yume_decode(_yume_lines(controls), _adapter("yume").config.params())
    err = _angle_deg(back[:, :3, :3], path.c2w[:, :3, :3])
    for f in _return_frames(path):
        assert _angle_deg(back[f, :3, :3], np.eye(3)) <= RETURN_BOUND_DEG, (f, err[f])
    if trajectory in RELEASE:
        assert err.max() < 1e-5


@pytest.mark.parametrize("trajectory", RELEASE)
def test_yume_lays_each_release_sweep_on_whole_stages_at_one_speed(trajectory, compiled):
    """Each sweep takes the whole number of stages nearest its own length, all sweeps of an amplitude alike, at the
    amplitude's exact speed; the path records the laid layout against the preset's."""
    path, _ = compiled("yume", trajectory)
    spec = TrajectorySpec.from_dict(group_yaml("trajectory", trajectory))
    moves = [s for s in path.segments if s.kind == "move"]
    for s in moves:
        amp = spec.yaw_deg if s.label in "LR" else spec.pitch_deg
        n = s.end - s.start
        assert n % STAGE == 0 and n == STAGE * max(1, round(amp / spec.deg_per_frame / STAGE))
        turned = _angle_deg(path.c2w[s.start - 1, :3, :3], path.c2w[s.end - 1, :3, :3])
        assert turned == pytest.approx(amp, abs=1e-9)
    clock = path.params["upstream_clock"]
    assert clock["laid_ends"] == [s.end - 1 for s in path.segments] and clock["max_shift_frames"] >= 0


def test_yume_check_fails_on_a_boundary_shifted_by_one_stage_and_on_mains_captions(compiled):
    from adapters.yume import controls as yc

    name = "lrlr_sym_0p75dpf" if "lrlr_sym_0p75dpf" in TRAJECTORIES else RELEASE[0]
    path, controls = compiled("yume", name)
    lines = _yume_lines(controls)
    assert not yume_stage_problems(lines, path.c2w)
    changes = [s for s in range(1, len(lines)) if lines[s] != lines[s - 1]]
    assert changes
    for s in changes:  # the caption change delayed by one stage: that stage is read as the other motion
        shifted = lines[:s] + [lines[s - 1]] + lines[s:-1]
        assert yume_stage_problems(shifted, path.c2w), s
    # main laid the preset's 120-frame sweeps across 29-frame stages and rounded 0.75 to 0.7: a stage that turns
    # both ways under one caption, and a speed upstream's measure does not give
    spec = TrajectorySpec.from_dict(group_yaml("trajectory", name))
    a = _adapter("yume")
    nominal = a._build_path(spec, a.canvas_K(_case()), name)
    assert any("upstream reads" in p for p in yume_stage_problems(yc.yume_captions(nominal.c2w, ""), nominal.c2w))
    rounded = [x.replace("0.775862069", "0.8") for x in lines]
    assert any("upstream measures" in p for p in yume_stage_problems(rounded, path.c2w))


def test_yume_replay_reads_pan_and_tilt_as_upstreams_decoder():
    """The replay's own conventions: +yaw pans right, +pitch tilts up, W is +z, D is +x (the decoder's :24-50)."""
    turn = se3(np.stack([np.eye(3), rot_y(np.radians(1.0)) @ rot_x(np.radians(1.0))]), np.array([[0, 0, 0],
                                                                                                [0.01, 0, 0.01]]))
    assert upstream_yume_frame_keys(turn) == [("W+D", "↑→")]
    assert upstream_yume_view_speed(se3(np.stack([rot_y(np.radians(a)) for a in (0.0, 2.0, 3.0)]))) == \
        pytest.approx(1.5)


# ==================================================================================================================
# Pose tables: the rows upstream's loader reads are the request's poses at the frames they condition
# ==================================================================================================================


def _sana_rows(controls: Path, path) -> tuple[np.ndarray, np.ndarray]:
    """NVlabs/Sana@af849ea1 inference_video_scripts/wm/inference_sana_wm.py ``prepare_camera`` /
    ``_pack_camera_conditions``: every row is read (raymap at ``8 i``, chunk Plücker over ``[8 i - 7, 8 i]``), and
    ``(F - 1) // 8 + 1`` latents need ``F = 8 k + 1`` rows for the last chunk to end on the last row."""
    cam = np.load(controls / "camera.npy")
    assert (len(cam) - 1) % 8 == 0
    return np.arange(len(cam)), cam


def _mg35_rows(controls: Path, path) -> tuple[np.ndarray, np.ndarray]:
    """Riemann-Dynamics/Matrix-Game-3.5@fa6d2b6: block ``k`` of 84 reads poses ``[1 + 84 k, 84 (k + 1)]`` after the
    anchor pose 0 (adapters/matrix_game35/contract.yaml ``writer.frames``: 1 + 84 x blocks)."""
    with np.load(controls / "camera.npz") as z:
        ext = np.array(z["extrinsics_c2w"])
    assert (len(ext) - 1) % 84 == 0
    return np.arange(len(ext)), ext


def _evoke_rows(controls: Path, path) -> tuple[np.ndarray, np.ndarray]:
    """AlayaLab/Evoke@74d2685: poses resampled from ``pose_fps`` to the model's 24 fps (identity when equal), chunk
    ``k`` reads ``[36 k, 36 k + 33)`` (adapters/evoke/contract.yaml ``writer.anchor_note``), 36 x chunks - 3 frames."""
    row = json.loads((controls / "cases.jsonl").read_text().splitlines()[0])
    assert float(row["pose_fps"]) == _adapter("evoke").config.fps  # no resampling: row i is frame i
    with np.load(controls / "pose.npz") as z:
        cam = np.array(z["cam_c2w"])
    assert (len(cam) + 3) % 36 == 0
    return np.arange(len(cam)), cam


def _dreamx_rows(controls: Path, path) -> tuple[np.ndarray, np.ndarray]:
    """AMAP-ML/DreamX-World@a1f4c6e inference_ar_forcing.py:91-94: ``1 + (F - 1) // 4`` latents read rows
    ``[0] + [1 + 4 i]`` (the first frame of each later latent), w2c 3x4 from column 7 of a CameraCtrl row."""
    from trajectories.conventions import c2w_from_w2c

    lines = (controls / "cameras.txt").read_text().splitlines()[1:]
    rows = np.array([[float(v) for v in x.split()] for x in lines if x.strip()])
    assert (rows[:, 0] == np.arange(len(rows))).all()
    w2c = np.tile(np.eye(4), (len(rows), 1, 1))
    w2c[:, :3, :4] = rows[:, 7:19].reshape(-1, 3, 4)
    n_lat = 1 + (len(rows) - 1) // 4
    read = np.array([0] + [1 + 4 * i for i in range(n_lat - 1)])
    return read, np.stack([c2w_from_w2c(m) for m in w2c])


def _lingbot_rows(controls: Path, path, chunk: int | None) -> tuple[np.ndarray, np.ndarray]:
    """robbyant/lingbot-world-v2@2648877 wan/image2video.py:478-482, :563-571 (v1: Robbyant/lingbot-world@6ca87d4
    wan/image2video.py:264-267, :342-348): ``frame_num = ((F - 1) // 4) * 4 + 1`` rows, ``(len - 1) // 4 + 1``
    latents (v2: truncated to a multiple of the chunk), poses at ``linspace(0, len - 1, latents)`` by SLERP."""
    poses = np.load(controls / "poses.npy")
    frame_num = min(((path.num_frames - 1) // 4) * 4 + 1, ((len(poses) - 1) // 4) * 4 + 1)
    poses = poses[:frame_num]
    lat = (len(poses) - 1) // 4 + 1
    if chunk:
        lat -= lat % chunk
    tgt = np.linspace(0, len(poses) - 1, lat)
    assert np.allclose(tgt, np.round(tgt), atol=1e-9), "a non-integer target: upstream would time-warp the path"
    return np.round(tgt).astype(int), poses


def _hy_rows(controls: Path, path) -> tuple[np.ndarray, np.ndarray]:
    """Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/generate.py:702, :743, :203-214: one entry per latent,
    ``(video_length - 1) // 4 + 1`` of them (asserted); latent ``i`` ends at frame ``4 i`` (the pose string's
    first command takes ``1 + 4 n`` frames, every later one ``4 n``, :323-399)."""
    data = json.loads((controls / "pose.json").read_text())
    assert len(data) == (path.num_frames - 1) // 4 + 1
    return 4 * np.arange(len(data)), np.array([data[str(i)]["extrinsic"] for i in range(len(data))])


POSE_MODELS = {
    "sana_wm": _sana_rows, "matrix_game35": _mg35_rows, "evoke": _evoke_rows, "dreamx": _dreamx_rows,
    "lingbot": lambda c, p: _lingbot_rows(c, p, None), "lingbot_v2": lambda c, p: _lingbot_rows(c, p, 4),
    "hy_worldplay": _hy_rows}


def pose_row_problems(model: str, read: np.ndarray, table: np.ndarray, path) -> list[str]:
    """Rows upstream reads that are not the request's pose at the frame they stand for (translation in the model's
    units), and tables whose length is not the item's frame count where upstream reads rows per frame."""
    a = _adapter(model)
    bad = []
    per_frame = model not in ("hy_worldplay",)
    if per_frame and len(table) != path.num_frames:
        bad.append(f"{len(table)} rows for {path.num_frames} frames")
        return bad
    want = path.c2w[read].copy()
    want[:, :3, 3] *= a.scene_scale()
    got = table[np.arange(len(read))] if not per_frame else table[read]
    rot = _angle_deg(got[:, :3, :3], want[:, :3, :3])
    off = np.abs(got[:, :3, :3] - want[:, :3, :3]).max(axis=(1, 2))  # arccos is blind under ~1e-6 deg: compare entries
    trans = np.linalg.norm(got[:, :3, 3] - want[:, :3, 3], axis=1)
    for i in np.flatnonzero((off > 1e-9) | (trans > 1e-9 * max(1.0, a.scene_scale())))[:3]:
        bad.append(f"row read for frame {int(read[i])} is {rot[i]:.4f} deg / {trans[i]:.2e} off the request")
    return bad


@pytest.mark.parametrize("model", sorted(POSE_MODELS))
@pytest.mark.parametrize("trajectory", POSE_TRAJECTORIES)
def test_pose_rows_upstream_reads_are_the_requested_poses(model, trajectory, compiled):
    path, controls = compiled(model, trajectory)
    read, table = POSE_MODELS[model](controls, path)
    assert read.max() <= path.num_frames - 1
    assert not pose_row_problems(model, read, table, path), pose_row_problems(model, read, table, path)


@pytest.mark.parametrize("model", sorted(POSE_MODELS))
def test_pose_check_fails_on_a_hold_boundary_shifted_by_one_row(model, compiled):
    """Every model's table, with the first move delayed by one row (a hold boundary shifted, the rest after it):
    the rows upstream reads no longer carry the request."""
    name = "lrlr_sym_0p75dpf" if "lrlr_sym_0p75dpf" in TRAJECTORIES else RELEASE[0]
    path, controls = compiled(model, name)
    read, table = POSE_MODELS[model](controls, path)
    assert not pose_row_problems(model, read, table, path)
    if model == "hy_worldplay":  # one row per latent: the per-latent table shifted by one latent row
        shifted = np.concatenate([table[:1], table[:-1]])
    else:
        moving = np.flatnonzero(_angle_deg(table[:-1, :3, :3], table[1:, :3, :3]) > 1e-9)
        shifted = _shift_one_row(table, int(moving[0]) + 1)  # the first row that moves
    assert pose_row_problems(model, read, shifted, path)
    if model != "hy_worldplay":  # a row short (or long) of the frames: the loader's clock is not the item's
        assert pose_row_problems(model, read, table[:-1], path)


def test_every_model_is_replayed():
    """No model of the nine escapes a replay: the held-control models above, the pose-table models here."""
    assert set(MODELS) == set(POSE_MODELS) | {"matrix_game3", "yume"}


def test_the_report_measures_a_laid_model_and_a_lossless_one(tmp_path, capsys):
    """``python -m adapters.controls.report`` (docs/controls.md's table): YUME's laid sweeps move its turns and
    decode back exactly; Matrix-Game 3.5's per-frame table costs nothing; an unknown name is a usage error."""
    from adapters.controls import report

    name = "lrlr_sym_0p75dpf" if "lrlr_sym_0p75dpf" in TRAJECTORIES else RELEASE[0]
    yume = report.measure("yume", name, tmp_path)
    path, _ = _COMPILED.get(("yume", name)) or (None, None)
    assert yume["shift_frames"] > 0 and yume["decoded_return_deg"] < 1e-5 and yume["item_vs_preset_deg"] > 0
    assert path is None or yume["shift_frames"] == path.params["upstream_clock"]["max_shift_frames"]
    flat = report.measure("matrix_game35", name, tmp_path)
    assert flat["shift_frames"] == 0 and flat["decoded_max_deg"] == 0 and flat["item_vs_preset_deg"] == 0
    text = report.table([yume, flat])
    assert text.count("\n") == 3 and f"| yume | {name} | {yume['frames']} | {yume['shift_frames']} |" in text
    assert report.main(["--models", "nope"]) == 2 and "unknown model or trajectory: nope" in capsys.readouterr().err
