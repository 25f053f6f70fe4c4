"""Sanity tests of the shared control encoders, CPU only, no upstream code."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.controls import poses, rays
from adapters.dreamx.controls import DREAMX_FIXED_K_NORM
from adapters.hy_worldplay import controls as hy_controls
from adapters.hy_worldplay.controls import hy_normalise_K
from adapters.matrix_game3 import controls as mg3_controls
from adapters.yume import controls as yume_controls
from tests.support import upstream_reference as ref
from trajectories.conventions import intrinsics_from_fov, rot_x, rot_y, se3
from trajectories.resample import first_of_group_anchors, latent_anchor_frames

K = intrinsics_from_fov(60.0, 832, 480)


def _forward(n, v=0.1):
    return se3(np.tile(np.eye(3), (n, 1, 1)), np.stack([np.zeros(n), np.zeros(n), v * np.arange(n)], 1))


def test_identity_rays_are_pinhole_and_maxnorm_has_no_nan():
    ident = np.tile(np.eye(4), (3, 1, 1))
    rel = poses.lingbot_relative(ident)
    assert np.isfinite(rel).all() and np.array_equal(rel, ident)
    r = rays.od_rays(rel, K, 48, 80)
    assert np.abs(r[..., :3]).max() == 0.0
    d = r[0, 10, 20, 3:]
    expected = np.array([(20.5 - K[0, 2]) / K[0, 0], (10.5 - K[1, 2]) / K[1, 1], 1.0])
    assert np.allclose(d, expected / np.linalg.norm(expected))


def test_forward_translation_is_unit_z_after_framewise_maxnorm():
    rel = poses.lingbot_relative(_forward(9))
    assert np.allclose(rel[1:, :3, 3], [0, 0, 1]) and np.array_equal(rel[0], np.eye(4))


def test_yaw_right_reads_as_right_everywhere():
    R = se3(rot_y(np.deg2rad(2.0)))
    assert hy_controls.hy_action_label(R) == 1  # HY rotation class "right"
    assert yume_controls.yume_keys(R) == ("None", "→")
    # the centre ray's d_x increases (LingBot [o,d] and SANA Plücker direction channels)
    pair = np.stack([np.eye(4), R])
    od = rays.od_rays(pair, K, 48, 80)
    assert od[1, 24, 40, 3] > od[0, 24, 40, 3]
    pl = ref.plucker_sana(pair, ref.sana_latent_K(K, 480, 832, 15, 26), 15, 26)
    assert pl[1, 7, 13, 0] > pl[0, 7, 13, 0]


def test_anchor_rules():
    assert list(first_of_group_anchors(5)) == [0, 1, 5, 9, 13]  # DreamX
    assert list(latent_anchor_frames(4)) == [0, 4, 8, 12]  # HY-WorldPlay, LingBot
    assert list(ref.anchors_sana_raymap(4)) == [0, 8, 16, 24]
    clips = ref.anchors_mg3(497)
    assert len(clips) == 12 and list(clips[0]) == list(range(0, 57, 4))
    assert list(clips[1]) == [41 + 3 + 4 * j for j in range(14)]  # window [41, 97): start + 3 + 4j
    assert [list(w[:3]) for w in ref.evoke_windows(2)] == [[0, 4, 8], [36, 40, 44]]
    assert list(ref.evoke_windows(1)[0]) == [4 * i for i in range(9)]


def test_mg35_block_slicing_and_captions():
    from adapters.matrix_game35.adapter import caption_starts

    assert ref.mg35_block_frames(0)[0] == 1 and ref.mg35_block_frames(0)[-1] == 84
    assert ref.mg35_block_frames(5)[-1] == 504 and len(ref.mg35_block_frames(5)) == 84
    assert caption_starts(6) == [0, 85, 169, 253, 337, 421]


def test_fold_unfold_round_trip_and_channel_layout(rng):
    x = rng.normal(size=(2, 16, 24, 6))
    f = rays.fold(x, 8)
    assert f.shape == (2, 384, 2, 3)
    assert np.array_equal(ref.unfold(f, 8), x)
    c, r, col = 4, 3, 5  # channel = 64 c + 8 row + col
    assert f[1, 64 * c + 8 * r + col, 1, 2] == x[1, 8 * 1 + r, 8 * 2 + col, c]
    assert rays.fold(rng.normal(size=(1, 32, 32, 6)), 16).shape == (1, 1536, 2, 2)


def test_hy_and_dreamx_intrinsics():
    Kn = hy_normalise_K(ref.HY_DEFAULT_K)
    assert Kn[0, 0] == pytest.approx(969.697 / 1920) and Kn[1, 1] == pytest.approx(969.697 / 1080)
    assert Kn[0, 2] == 0.5 and Kn[1, 2] == 0.5
    assert np.all(ref.zero_principal_point(Kn)[:2, 2] == 0)
    assert np.allclose(DREAMX_FIXED_K_NORM, [Kn[0, 0], Kn[1, 1], 0.5, 0.5])
    P = ref.prope_projections(np.eye(4)[None], Kn)
    assert P.shape == (1, 4, 4) and P[0, 0, 2] == 0.0


@pytest.mark.parametrize(
    "motion, label",
    [
        (se3(np.eye(3), [0, 0, 0.1]), 9),
        (se3(np.eye(3), [0, 0, -0.1]), 18),
        (se3(rot_y(np.deg2rad(2))), 1),
        (se3(rot_y(np.deg2rad(-2))), 2),
        (se3(rot_x(np.deg2rad(2))), 3),
        (se3(rot_x(np.deg2rad(-2))), 4),
        (se3(np.eye(3), [0.1, 0, 0.1]), 45),
        (se3(rot_y(np.deg2rad(2)), [0, 0, 0.1]), 10),
        (np.eye(4), 0),
    ],
)
def test_hy_action_labels(motion, label):
    assert hy_controls.hy_action_label(motion) == label
    assert hy_controls.hy_action_labels(np.stack([np.eye(4), motion]))[0] == 0  # latent 0 -> 0


def test_logd4():
    t = np.array([[np.e - 1, 0, 0], [0, 0, 0]])
    out = ref.logd4_translation(t)
    assert np.linalg.norm(out[0]) == pytest.approx(0.25) and out[0, 1] == 0 and np.array_equal(out[1], [0, 0, 0])


def test_sana_shapes_and_windows():
    c2w = _forward(481, 0.01)
    raymap, chunk = ref.sana_camera_conditions(c2w, intrinsics_from_fov(60, 1280, 704))
    assert raymap.shape == (61, 20) and chunk.shape == (48, 61, 22, 40)
    w = ref.sana_chunk_windows(61, 481)
    assert list(w[0]) == list(range(8)) and list(w[1]) == list(range(1, 9)) and list(w[3]) == list(range(17, 25))
    ident = ref.sana_camera_conditions(np.tile(np.eye(4), (9, 1, 1)), intrinsics_from_fov(60, 1280, 704))[1]
    moments = ident.reshape(8, 6, 2, 22, 40)[:, 3:]
    assert np.abs(moments).max() == 0.0


def test_dreamx_chunk_relative_constant_forward():
    v = 0.1
    lat = _forward(501, v)[first_of_group_anchors(126)]
    rel = ref.dreamx_chunk_relative(lat)
    z = rel[:, 2, 3] / v
    assert np.allclose(z[:3], [0, 1, 5]) and np.allclose(z[3:6], [4, 8, 12]) and np.allclose(z[6:9], [4, 8, 12])
    assert np.allclose(ref.dreamx_integrate(rel), lat)
    assert ref.per_token(ref.prope_projections(lat, hy_normalise_K(ref.HY_DEFAULT_K)), 880).shape == (
        110880, 4, 4)


def test_yume_keys_and_sentences():
    assert yume_controls.yume_keys(se3(np.eye(3), [0, 0, 0.1])) == ("W", "·")
    assert yume_controls.yume_keys(se3(rot_y(np.deg2rad(-5)) @ rot_x(np.deg2rad(5)))) == ("None", "↑←")
    assert yume_controls.yume_keys(se3(rot_y(1e-4), [1e-6, 0, 0])) == ("None", "·")  # snapped
    line = yume_controls.yume_captions(np.tile(np.eye(4), (30, 1, 1)), "A street.")[0]  # the image + one stage
    assert line == ("First-person perspective. The camera's movement direction remains stationary (·). The rotation "
                    "direction of the camera remains stationary (·). Actual distance moved:0 at 100 meters per second."
                    " Angular change rate (turn speed):0. View rotation speed:0.A street.")


def test_mg3_actions():
    from adapters.matrix_game3.adapter import MG3Config

    cfg = MG3Config(name="m", adapter="x", seed=1, height=704, width=1280, fps=16, num_frames=497)
    assert cfg.iterations(497) == 12
    p = mg3_controls.MG3Params()
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    ms[0] = [0.1 * (-1 if p.mouse_pitch == "code" else 1), 0]  # "look up": action 0 moves frame 0 to frame 1
    path = mg3_controls.mg3_decode(kb, ms, p)
    from trajectories.conventions import yaw_pitch_from_rotmat

    assert np.degrees(yaw_pitch_from_rotmat(path[1, :3, :3])[1]) == pytest.approx(1.5)
    kb[0, 0] = 1
    ms[:] = 0
    ext = mg3_controls.mg3_extrinsics(kb, ms, p)
    assert np.allclose(ext[1, :3, 3], [0.1235, 0, 0])  # W at yaw 0 moves 12.35 cm along world +X
    rel = mg3_controls.mg3_decode(kb, ms, p)
    assert np.allclose(rel[1, :3, 3], [0, 0, 0.1235])  # = camera forward in OpenCV
    for combo in ([1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]):
        kb[0, :4] = combo
        assert mg3_controls.mg3_extrinsics(kb, ms, p)[1, 2, 3] == 0.0  # no key changes z


def test_mg3_yaw_right_and_pitch_sign_choice():
    lat = se3(rot_y(np.deg2rad(np.linspace(0, 30, 21))))
    for choice in ("code", "label"):
        p = mg3_controls.MG3Params(mouse_pitch=choice)
        _kb, ms = mg3_controls.mg3_encode(lat, p)
        assert (ms[:-1, 1] > 0).all() and np.abs(ms[:, 0]).max() == 0  # yaw right = positive mouse yaw
    up = se3(rot_x(np.deg2rad(np.linspace(0, 20, 11))))
    code = mg3_controls.mg3_encode(up, mg3_controls.MG3Params(mouse_pitch="code"))[1]
    label = mg3_controls.mg3_encode(up, mg3_controls.MG3Params(mouse_pitch="label"))[1]
    assert (code[:-1, 0] < 0).all() and (label[:-1, 0] > 0).all()
    for choice in ("code", "label"):
        p = mg3_controls.MG3Params(mouse_pitch=choice)
        assert np.allclose(mg3_controls.mg3_decode(*mg3_controls.mg3_encode(up, p), p)[-1], up[-1], atol=1e-3)


def test_lingbot_time_warp_guard():
    from adapters.base import ModelConfigError
    from adapters.lingbot.adapter import LingBotAdapter, LingBotConfig

    a = LingBotAdapter(LingBotConfig(name="l", adapter="x", seed=1, height=480, width=832, fps=16, num_frames=493))
    assert a.latent_count(493) == 124
    with pytest.raises(ModelConfigError, match="time-warps"):
        a.latent_count(497)  # 125 latents truncate to 124: targets linspace(0, 496, 124) are not integers
    assert not np.allclose(np.linspace(0, 496, 124) % 1, 0)


def test_evoke_counts():
    from adapters.evoke.adapter import EvokeConfig

    c = EvokeConfig(name="e", adapter="x", seed=1, height=384, width=640, fps=24, num_frames=501)
    assert c.chunks(501) == 14 and 36 * 14 - 3 == 501


@pytest.mark.parametrize("deg, label", [(0.06, 1), (0.04, 0), (-0.06, 2), (-0.04, 0)])
def test_hy_rotation_threshold_is_005_degrees_per_axis(deg, label):
    """Upstream's rule: y > 0.05 deg right, y < -0.05 left, x > 0.05 up, x < -0.05 down (generate.py)."""
    assert hy_controls.hy_action_label(se3(rot_y(np.deg2rad(deg)))) == label
    up = {1: 3, 2: 4, 0: 0}[label]
    assert hy_controls.hy_action_label(se3(rot_x(np.deg2rad(deg)))) == up


@pytest.mark.parametrize("dist, label", [(2e-4, 9), (5e-5, 0), (-2e-4, 18)])
def test_hy_translation_threshold_is_1e4(dist, label):
    assert hy_controls.hy_action_label(se3(np.eye(3), [0, 0, dist])) == label
    assert hy_controls.hy_action_labels(np.stack([np.eye(4), se3(np.eye(3), [0, 0, dist])]), 1e-3)[1] == 0  # loader's


def test_hy_translation_directions_use_60_and_120_degree_cones():
    assert hy_controls.hy_action_label(se3(np.eye(3), [np.sin(np.radians(59)), 0, np.cos(np.radians(59))])) == 5 * 9  # fwd+right
    assert hy_controls.hy_action_label(se3(np.eye(3), [np.sin(np.radians(61)), 0, np.cos(np.radians(61))])) == 3 * 9  # right
    assert hy_controls.hy_action_label(se3(np.eye(3), [0, 0.1, 0])) == 0  # straight down: HY has no key for it


def test_yume_speed_of_every_stage_is_per_frame_of_its_29_steps():
    """Stage s moves from pose 29 s to pose 29 (s+1), the final stage too (29 k + 1 poses): a camera moving at a
    constant 1.5 speed units per frame reads 1.5 in every line and decodes back to itself."""
    p = yume_controls.YumeParams()
    step = 1.5 * p.units_per_speed_unit  # speed value 1.5
    T = 2 * p.frames_per_stage + 1
    c2w = se3(np.tile(np.eye(3), (T, 1, 1)), np.stack([np.zeros(T), np.zeros(T), step * np.arange(T)], 1))
    lines = yume_controls.yume_captions(c2w, "")
    assert [yume_controls.yume_parse_speeds(x)[0] for x in lines] == [1.5, 1.5]
    assert np.allclose(yume_controls.yume_decode(lines), c2w)
    with pytest.raises(ValueError, match="29 k \\+ 1 poses"):
        yume_controls.yume_captions(c2w[:-1], "")
