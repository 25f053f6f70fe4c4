"""Property-based tests of the shared control encoders (adapters/controls/): what each encoder writes decodes back to
the requested path, exactly for the lossless ones and within the residual its format allows for the lossy ones.

| encoder | decoder | stated residual |
| --- | --- | --- |
| ``poses.lingbot_relative`` (framewise + max-norm) | ``poses.integrate_framewise`` with the divisor | exact |
| latent anchors ``4i`` (HY-WorldPlay, LingBot) | ``poses.interpolate_to_frames`` | exact at anchors, < 0.5 deg |
| ``mg3_controls.mg3_encode`` (keyboard + mouse) | ``mg3_controls.mg3_decode`` | the 0.02-unit dead zone (0.3 deg per axis) plus a closed tap (0.9 deg), one 12-frame hold of key steps |
| ``yume_controls.yume_captions`` (one caption per 29 frames) | ``yume_controls.yume_decode`` | exact for stage-wise constant motion |
| ``hy_controls.hy_action_label`` (one label per latent) | the label's one-hots | the direction of each motion |
| ``rays.fold`` / ``rays.od_rays`` | unfold / re-projection | exact |
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from adapters.controls import poses, rays
from adapters.hy_worldplay import controls as hy_controls
from adapters.hy_worldplay.controls import hy_normalise_K
from adapters.matrix_game3 import controls as mg3_controls
from adapters.yume import controls as yume_controls
from harness.residuals import pose_residual
from tests.support import upstream_reference as ref
from trajectories import Timing, TrajectorySpec, build_path
from trajectories.conventions import (
    framewise_from_relative,
    relative_to_first,
    rot_x,
    rot_y,
    se3,
    w2c_from_c2w,
    yaw_pitch_from_rotmat,
)
from trajectories.resample import latent_anchor_frames, latents_for_frames

seeds = st.integers(0, 2**32 - 1)
K = np.array([[500.0, 0.0, 416.0], [0.0, 480.0, 240.0], [0.0, 0.0, 1.0]])


def _wander(seed: int, T: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    R = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.03, (T, 3)), axis=0)).as_matrix()
    return se3(R, np.cumsum(rng.normal(0, 0.1, (T, 3)), axis=0) + rng.normal(0, 2, 3))


@settings(max_examples=40)
@given(seed=seeds, T=st.integers(1, 60))
def test_lingbot_relative_poses_integrate_back_to_the_path(seed, T):
    c2w = _wander(seed, T)
    rel = poses.lingbot_relative(c2w)
    _, divisor = poses.max_norm_translation(framewise_from_relative(relative_to_first(c2w)))
    back = poses.integrate_framewise(rel, divisor)
    assert np.allclose(back, relative_to_first(c2w), atol=1e-9)
    assert np.array_equal(rel[0], np.eye(4)) or T == 1
    assert np.linalg.norm(rel[:, :3, 3], axis=1).max() <= 1 + 1e-12  # max-norm: the longest step is 1
    unnormalised = poses.lingbot_relative(c2w, normalize_trans=False)
    assert np.allclose(poses.integrate_framewise(unnormalised), relative_to_first(c2w), atol=1e-9)
    assert np.allclose(poses.lingbot_relative(c2w, framewise=False, normalize_trans=False), relative_to_first(c2w))


@st.composite
def library_paths(draw, frames=st.integers(60, 300)):
    """A trajectory of the library with random amplitudes and timing (rotations, or the square)."""
    n = draw(frames)
    timing = Timing(initial_hold=draw(st.floats(0.02, 0.2)), move=draw(st.floats(0.05, 0.3)),
                    away_hold=draw(st.floats(0.0, 0.1)), revisit_hold=draw(st.floats(0.02, 0.1)),
                    final_hold=draw(st.floats(0.02, 0.2)))
    if draw(st.booleans()):
        spec = TrajectorySpec(name="sq", kind="square", side=draw(st.floats(0.1, 1.5)), timing=timing)
    else:
        spec = TrajectorySpec(name="r", cycles=tuple(draw(st.lists(st.sampled_from(["left", "right", "up", "down"]),
                                                                   min_size=1, max_size=3))),
                              yaw_deg=draw(st.floats(30.0, 120.0)), pitch_deg=draw(st.floats(30.0, 80.0)),
                              timing=timing)
    try:
        return build_path(spec, n, 16.0, K, 480, 832, check_fov=False)
    except Exception:  # noqa: BLE001 - a segment without frames at this count
        assume(False)


@settings(max_examples=40)
@given(path=library_paths(frames=st.integers(15, 80).map(lambda k: 4 * k + 1)))
def test_latent_anchor_poses_interpolate_back_within_the_motion_of_one_latent(path):
    """Latent i carries frame 4i; the per-frame path is recovered by SLERP / linear interpolation between anchors
    (HY-WorldPlay, LingBot). Exact at the anchors; in between, never further than the path moves in the 4 frames
    of one latent (at the native 493 frames that is the 0.5 deg / 0.01 of tests/adapters/test_adapters.py)."""
    from trajectories.conventions import geodesic_angle

    N = path.num_frames
    a = latent_anchor_frames(latents_for_frames(N))
    back = poses.interpolate_to_frames(a, path.c2w[a], N)
    assert np.array_equal(back[a], path.c2w[a])
    r = pose_residual(path.c2w, back)
    rot_step = np.degrees(geodesic_angle(path.c2w[:-1, :3, :3], path.c2w[1:, :3, :3])).max()
    tr_step = np.linalg.norm(np.diff(path.c2w[:, :3, 3], axis=0), axis=1).max()
    assert r["max_rotation_error_deg"] <= 4 * rot_step + 1e-9 and r["max_translation_error"] <= 4 * tr_step + 1e-12


@settings(max_examples=25)
@given(seed=seeds, n=st.integers(2, 40), gaps=st.lists(st.integers(1, 7), min_size=1, max_size=8))
def test_interpolation_holds_the_ends_and_is_exact_at_anchors(seed, n, gaps):
    anchors = np.cumsum([3] + gaps)
    c2w = _wander(seed, len(anchors))
    out = poses.interpolate_to_frames(anchors, c2w, int(anchors[-1]) + 5)
    assert np.array_equal(out[anchors], c2w)
    assert all(np.array_equal(out[i], c2w[0]) for i in range(anchors[0]))  # before the first anchor
    assert all(np.array_equal(out[i], c2w[-1]) for i in range(anchors[-1], len(out)))  # after the last
    for j in range(len(anchors) - 1):  # in between: on the geodesic, linear in translation
        i = int(anchors[j] + anchors[j + 1]) // 2
        alpha = (i - anchors[j]) / (anchors[j + 1] - anchors[j])
        assert np.allclose(out[i, :3, 3], (1 - alpha) * c2w[j, :3, 3] + alpha * c2w[j + 1, :3, 3])


MG3_STEP = 0.1235  # metres per frame of one key (12.35 cm)
_DEAD_MARGIN = mg3_controls._DEAD_MARGIN


@settings(max_examples=30)
@given(path=library_paths(), mpu=st.floats(0.3, 2.0), choice=st.sampled_from(["code", "label"]))
def test_mg3_actions_decode_back_within_the_dead_zone_and_one_key_step(path, mpu, choice):
    p = mg3_controls.MG3Params(metres_per_unit=mpu, mouse_pitch=choice)
    speed = np.linalg.norm(np.diff(path.c2w[:, :3, 3], axis=0), axis=1).max(initial=0.0) * mpu
    assume(speed <= MG3_STEP)  # the model cannot move faster than one key step per frame
    kb, ms = mg3_controls.mg3_encode(path.c2w, p)
    assert kb.shape == (path.num_frames, 6) and ms.shape == (path.num_frames, 2)
    blocks = mg3_controls.mg3_blocks(path.num_frames, p.hold_frames)
    for a, b in blocks:  # upstream's generator holds every row of a block (utils/conditions.py:21-32@71c3cd7f7413)
        assert (kb[a:b] == kb[a]).all() and (ms[a:b] == ms[a]).all()
    back = mg3_controls.mg3_decode(kb, ms, p)
    yaw_a, pitch_a = (np.degrees(x) for x in yaw_pitch_from_rotmat(path.c2w[:, :3, :3]))
    yaw_b, pitch_b = (np.degrees(x) for x in yaw_pitch_from_rotmat(back[:, :3, :3]))
    dead = p.dead_zone * p.deg_per_unit  # 0.3 deg per row
    for a_t, b_t in ((yaw_a, yaw_b), (pitch_a, pitch_b)):
        # a block moves linearly between its edges: off the request by at most how far the request strays inside
        # it, plus a lag under the dead zone over one block (a block too slow to send) and its fold at the move end
        stray = max(np.ptp(a_t[a:min(b, len(a_t) - 1) + 1]) for a, b in blocks)
        assert np.abs(a_t - b_t).max() <= stray + 2 * _DEAD_MARGIN * dead * p.hold_frames + 1e-6
    err = np.linalg.norm(path.c2w[:, :3, 3] - back[:, :3, 3], axis=1).max()
    assert err <= p.hold_frames * MG3_STEP / mpu + 1e-9  # keys are held a whole block (12 frames), as upstream


@st.composite
def yume_stages(draw):
    """Stage-wise constant motion: per 29-frame stage, a yaw rate (deg/frame, a multiple of 0.1), or a step along
    one key (W/S/A/D) at a multiple of 0.1 speed units, or nothing; never both (a caption says one of each)."""
    p = yume_controls.YumeParams()
    n = draw(st.integers(2, 8))
    out = np.empty((n * p.frames_per_stage + 1, 4, 4))  # the image's pose, then 29 per stage
    cur, i, kinds = np.eye(4), 0, []
    for _ in range(n):
        kind = draw(st.sampled_from(["still", "yaw", "W", "S", "A", "D"]))
        rate = draw(st.integers(1, 30)) / 10.0 * (draw(st.sampled_from([-1, 1])) if kind == "yaw" else 1)
        kinds.append(kind)
        for _ in range(p.frames_per_stage):
            out[i] = cur
            i += 1
            if kind == "yaw":
                cur = cur @ se3(rot_y(np.radians(rate)))
            elif kind != "still":
                d = {"W": [0, 0, 1], "S": [0, 0, -1], "A": [-1, 0, 0], "D": [1, 0, 0]}[kind]
                cur = cur @ se3(np.eye(3), rate * p.units_per_speed_unit * np.array(d, float))
    out[i] = cur
    return out, kinds


@settings(max_examples=40)
@given(stages=yume_stages())
def test_yume_captions_decode_back_exactly_for_stagewise_constant_motion(stages):
    c2w, kinds = stages
    lines = yume_controls.yume_captions(c2w, "A street.")
    assert len(lines) == len(kinds) and all(line.endswith("A street.") for line in lines)
    back = yume_controls.yume_decode(lines)
    r = pose_residual(c2w, back)
    assert r["max_rotation_error_deg"] < 1e-6 and r["max_translation_error"] < 1e-9
    for line, kind in zip(lines, kinds):
        move, rot = yume_controls.yume_parse_caption(line)
        assert move == (kind if kind in "WSAD" else "None") and (rot == "·") == (kind != "yaw")


MOTIONS = {  # motion -> (translation one-hot [fwd, back, right, left], rotation one-hot [right, left, up, down])
    "forward": ([1, 0, 0, 0], [0, 0, 0, 0]), "back": ([0, 1, 0, 0], [0, 0, 0, 0]),
    "right": ([0, 0, 1, 0], [0, 0, 0, 0]), "left": ([0, 0, 0, 1], [0, 0, 0, 0]),
    "yaw+": ([0, 0, 0, 0], [1, 0, 0, 0]), "yaw-": ([0, 0, 0, 0], [0, 1, 0, 0]),
    "pitch+": ([0, 0, 0, 0], [0, 0, 1, 0]), "pitch-": ([0, 0, 0, 0], [0, 0, 0, 1]),
}
_INDEX = {"0000": 0, "1000": 1, "0100": 2, "0010": 3, "0001": 4, "1010": 5, "1001": 6, "0110": 7, "0101": 8}


def _hy_motion(name: str, size: float) -> np.ndarray:
    t = {"forward": [0, 0, 1], "back": [0, 0, -1], "right": [1, 0, 0], "left": [-1, 0, 0]}.get(name)
    if t is not None:
        return se3(np.eye(3), size * np.array(t, float))
    R = rot_y(np.radians(size)) if name.startswith("yaw") else rot_x(np.radians(size))
    return se3(R if name.endswith("+") else R.T)


@settings(max_examples=40)
@given(a=st.sampled_from(sorted(MOTIONS)), b=st.sampled_from(sorted(MOTIONS)), size=st.floats(0.06, 5.0))
def test_hy_labels_decode_to_the_direction_of_each_motion(a, b, size):
    """Label = 9 * translation index + rotation index (upstream's tables); a step above the 1e-4 translation and
    0.05 deg rotation thresholds is read back as its direction, one from each group at most."""
    motion = _hy_motion(a, size * (0.01 if a in ("forward", "back", "right", "left") else 1.0))
    if (a in ("forward", "back", "right", "left")) != (b in ("forward", "back", "right", "left")):
        motion = motion @ _hy_motion(b, size * (0.01 if b in ("forward", "back", "right", "left") else 1.0))
        tb = np.maximum(MOTIONS[a][0], MOTIONS[b][0])
        rb = np.maximum(MOTIONS[a][1], MOTIONS[b][1])
    else:
        tb, rb = MOTIONS[a]
    label = hy_controls.hy_action_label(motion)
    assert label == _INDEX["".join(map(str, tb))] * 9 + _INDEX["".join(map(str, rb))]
    assert hy_controls.hy_action_labels(np.stack([np.eye(4), motion]))[1] == label


@settings(max_examples=25)
@given(seed=seeds, F=st.integers(1, 3), hb=st.integers(1, 4), wb=st.integers(1, 4), block=st.sampled_from([2, 4, 8]),
       C=st.integers(1, 6))
def test_fold_is_a_lossless_channel_layout(seed, F, hb, wb, block, C):
    x = np.random.default_rng(seed).normal(size=(F, hb * block, wb * block, C))
    f = rays.fold(x, block)
    assert f.shape == (F, C * block * block, hb, wb) and np.array_equal(ref.unfold(f, block, C), x)


@settings(max_examples=25)
@given(seed=seeds, h=st.integers(2, 30), w=st.integers(2, 30))
def test_od_rays_are_unit_directions_from_the_camera_centre_through_pixel_centres(seed, h, w):
    rng = np.random.default_rng(seed)
    Kp = np.array([[rng.uniform(10, 60), 0, rng.uniform(0, w)], [0, rng.uniform(10, 60), rng.uniform(0, h)], [0, 0, 1]])
    P = _wander(seed, 2)
    r = rays.od_rays(P, Kp, h, w)
    assert r.shape == (2, h, w, 6)
    assert np.allclose(r[..., :3], P[:, None, None, :3, 3])
    d = r[..., 3:]
    assert np.allclose(np.linalg.norm(d, axis=-1), 1.0)
    cam = np.einsum("fji,fhwj->fhwi", P[:, :3, :3], d)  # back to camera axes: R^T d
    uv = np.einsum("ij,fhwj->fhwi", Kp, cam / cam[..., 2:3])[..., :2]
    vv, uu = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
    assert np.allclose(uv[..., 0], uu) and np.allclose(uv[..., 1], vv)


@settings(max_examples=25)
@given(w=st.integers(16, 2000), h=st.integers(16, 2000), fx=st.floats(10, 3000), fy=st.floats(10, 3000))
def test_hy_normalised_intrinsics_of_a_centred_camera_are_focal_over_size(w, h, fx, fy):
    Kn = hy_normalise_K(np.array([[fx, 0, w / 2], [0, fy, h / 2], [0, 0, 1.0]]))
    assert Kn[0, 0] == pytest.approx(fx / w) and Kn[1, 1] == pytest.approx(fy / h)
    assert Kn[0, 2] == Kn[1, 2] == 0.5 and Kn[2, 2] == 1.0 and Kn[0, 1] == Kn[1, 0] == 0.0
    assert np.array_equal(w2c_from_c2w(np.eye(4)), np.eye(4))
