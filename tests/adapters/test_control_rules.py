"""The rules of the lossy control encoders (adapters/controls/) one at a time: Matrix-Game 3's dead zone, error
diffusion and end-of-move fold, its integrator's yaw wrap, average yaw and diagonal steps; YUME's keys, speed
values and stage bounds; the relative-pose helpers' edge cases; PRoPE's normalised K of an off-centre camera."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.controls import poses, prope, rays
from adapters.dreamx.controls import DREAMX_FIXED_K_NORM
from adapters.hy_worldplay import controls as hy_controls
from adapters.hy_worldplay.controls import HY_DEFAULT_K, hy_normalise_K
from adapters.matrix_game3 import controls as mg3_controls
from adapters.yume import controls as yume_controls
from trajectories.conventions import rot_x, rot_y, se3, yaw_pitch_from_rotmat

P = mg3_controls.MG3Params()
P1 = mg3_controls.MG3Params(hold_frames=1)  # one-row blocks: the encoder's per-frame rules, one at a time
DZ = P.dead_zone


# -- Matrix-Game 3 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("v, out", [(0.02, 0.02), (-0.02, -0.02), (0.0199, 0.0), (-0.0199, 0.0), (0.5, 0.5),
                                    (0.0, 0.0)])
def test_the_dead_zone_drops_values_below_it_and_keeps_it_exactly(v, out):
    assert mg3_controls._dead(v, P) == out


def test_pitch_sign_choice_is_checked():
    assert mg3_controls.MG3Params(mouse_pitch="code").pitch_sign() == 1.0
    assert mg3_controls.MG3Params(mouse_pitch="label").pitch_sign() == -1.0
    with pytest.raises(Exception, match="mouse_pitch='up'"):
        mg3_controls.MG3Params(mouse_pitch="up").pitch_sign()


def test_key_moves_are_one_step_straight_and_one_diagonal_step_per_axis():
    tab, moves = mg3_controls._key_moves(P)
    got = {tuple(int(x) for x in k): tuple(np.round(m, 6)) for k, m in zip(tab, moves)}
    s, d = P.step_cm / 100, P.diag_cm / 100
    # S+A and S+D are not in upstream's generator (back_left / back_right commented out, conditions.py:50-51)
    assert got == {(0, 0, 0, 0): (0, 0), (1, 0, 0, 0): (s, 0), (0, 1, 0, 0): (-s, 0), (0, 0, 1, 0): (0, -s),
                   (0, 0, 0, 1): (0, s), (1, 0, 1, 0): (d, -d), (1, 0, 0, 1): (d, d)}


def _integrate(m: np.ndarray) -> np.ndarray:
    """The orientation upstream reaches per frame from one mouse axis (dead zone applied, float32 as given)."""
    state = np.zeros(len(m))
    for t in range(1, len(m)):
        state[t] = state[t - 1] + P.deg_per_unit * mg3_controls._dead(float(np.float32(m[t - 1])), P)
    return state


def _ramp(*segments) -> np.ndarray:
    """Targets in degrees: (frames, end value) per segment, linear from the previous value."""
    out, cur = [0.0], 0.0
    for n, end in segments:
        out += list(np.linspace(cur, end, n + 1)[1:])
        cur = end
    return np.array(out)


@pytest.mark.parametrize("target", [
    _ramp((4, 0.0), (20, 30.0), (6, 30.0), (20, 0.0), (5, 0.0)),  # away and back: LRLR-like
    _ramp((3, 0.0), (7, -13.7), (3, -13.7), (9, 21.1), (4, 21.1)),  # a turn through zero, odd amounts
    _ramp((2, 0.0), (40, 5.0), (4, 5.0)),  # slow: most steps are under the dead zone on their own
    _ramp((5, 0.0), (3, 0.29), (5, 0.29)),  # the whole move is under the dead zone: nothing is emitted
    _ramp((1, 0.0), (1, 7.0), (1, 7.0), (1, 0.1), (3, 0.1)),  # one-frame moves
])
def test_mg3_error_diffusion_lands_on_the_target_at_the_end_of_every_move(target):
    m = mg3_controls._mg3_axis(target, P1)
    state = _integrate(m)
    nz = m[m != 0]
    assert (np.abs(nz) >= DZ * mg3_controls._DEAD_MARGIN - 1e-12).all()  # every value clears the dead zone, with margin
    assert m[-1] == 0.0
    moving = np.r_[False, np.abs(np.diff(target)) > 1e-9]
    ends = [t for t in range(1, len(target)) if moving[t] and (t == len(target) - 1 or not moving[t + 1])]
    for t in ends:
        total = abs(target[t] - target[t - int(np.argmin(moving[t::-1]))])
        if total >= DZ * P.deg_per_unit:
            assert state[t] == pytest.approx(target[t], abs=1e-4), t  # exactly on the target, not 0.3 deg short
    assert np.abs(state - target).max() <= DZ * P.deg_per_unit + 1e-6  # and never further than the dead zone


def test_mg3_a_move_under_the_dead_zone_emits_nothing_and_a_step_above_it_emits_its_lag():
    assert not mg3_controls._mg3_axis(_ramp((5, 0.0), (3, 0.29), (5, 0.29)), P1).any()
    one = mg3_controls._mg3_axis(np.array([0.0, 0.0, 1.5, 1.5]), P1)
    assert one[1] == pytest.approx(0.1) and one[0] == 0 and one[2] == 0  # row t-1 moves frame t-1 to t
    sub = np.array([0.0, 0.2, 0.4, 0.6, 0.6])  # 0.2 deg per frame: each lag alone is under 0.3 deg
    m = mg3_controls._mg3_axis(sub, P1)
    # frame 1's lag is dropped, frame 2 emits the 0.4 deg lag, frame 3's 0.2 deg is folded into it at the move's end
    assert m[0] == 0.0 and m[1] == pytest.approx(0.6 / 15) and m[2] == 0.0 and _integrate(m)[3] == pytest.approx(0.6)


def test_mg3_the_remainder_goes_to_the_last_value_of_its_sign():
    """A move whose last step is tiny: the remainder is folded into the move's last emitted value of the same sign
    (here two frames back), never into a value of the other sign, and never left as a sub-dead-zone value."""
    target = np.array([0.0, 0.0, 6.0, 6.1, 6.1, 6.1])
    m = mg3_controls._mg3_axis(target, P1)
    assert m[1] == pytest.approx(6.1 / 15) and m[2] == 0.0  # the 0.1 deg of frame 3 joined frame 2's value
    assert _integrate(m)[3] == pytest.approx(6.1)
    back = np.array([0.0, 0.0, 6.0, 5.9, 5.9])  # the remainder has the other sign and is under the dead zone:
    mb = mg3_controls._mg3_axis(back, P1)  # no value to fold it into without changing that value's sign, so it is dropped
    assert mb[1] == pytest.approx(0.4) and not mb[2:].any() and _integrate(mb)[3] == pytest.approx(6.0)


def test_mg3_a_remainder_goes_to_the_latest_value_of_its_sign_even_a_whole_unit():
    target = np.array([0.0, 0.0, 6.0, 12.0, 12.1, 12.1])  # two emitted values of the sign, then 0.1 deg left
    m = mg3_controls._mg3_axis(target, P1)
    assert m[1] == pytest.approx(0.4) and m[2] == pytest.approx(6.1 / 15) and m[3] == 0.0  # the latest one
    unit = mg3_controls._mg3_axis(np.array([0.0, 0.0, 15.0, 15.1, 15.1]), P1)  # a value of exactly 1.0 takes it too
    assert unit[1] == pytest.approx(15.1 / 15) and _integrate(unit)[3] == pytest.approx(15.1)


def test_mg3_a_lag_just_under_the_margin_is_not_emitted():
    """Emitted values clear the dead zone with a margin (0.02 x 1.0005): a lag of 0.02 units exactly is kept back
    (float32 rounding could put it under upstream's 0.02), one over the margin is sent."""
    under = mg3_controls._mg3_axis(np.array([0.0, 0.02 * 15, 0.02 * 15]), P1)
    assert not under.any()
    over = mg3_controls._mg3_axis(np.array([0.0, 0.02 * 1.001 * 15, 0.02 * 1.001 * 15]), P1)
    assert over[0] == pytest.approx(0.02 * 1.001)


def test_mg3_states_wrap_the_yaw_at_180_and_move_along_the_average_yaw():
    T = 15
    kb, ms = np.zeros((T, 6), np.float32), np.zeros((T, 2), np.float32)
    ms[:13, 1] = 1.0  # 15 deg per frame to the right
    st = mg3_controls.mg3_states(kb, ms, P)
    assert st[12, 4] == 180.0 and st[13, 4] == -165.0  # 180 itself is kept; past it wraps to -180..180
    ms[:, 1] = -ms[:, 1]
    assert mg3_controls.mg3_states(kb, ms, P)[12, 4] == -180.0 and mg3_controls.mg3_states(kb, ms, P)[13, 4] == 165.0
    kb2, ms2 = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb2[0, 0], ms2[0, 1] = 1, 2.0  # W while turning 30 deg: the step follows the average yaw, 15 deg
    x, y, z, pitch, yaw = mg3_controls.mg3_states(kb2, ms2, P)[1]
    assert (x, y, yaw) == pytest.approx((12.35 * np.cos(np.radians(15)), 12.35 * np.sin(np.radians(15)), 30.0))
    assert z == 0.0 and pitch == 0.0


@pytest.mark.parametrize("keys4, xy", [((1, 0, 0, 1), (8.73, 8.73)), ((0, 1, 1, 0), (-8.73, -8.73)),
                                       ((0, 0, 0, 1), (0.0, 12.35)), ((0, 1, 0, 0), (-12.35, 0.0)),
                                       ((1, 1, 0, 0), (0.0, 0.0)), ((0.4, 0, 0, 0), (0.0, 0.0))])
def test_mg3_states_diagonals_move_8_73_per_axis_and_keys_need_more_than_half(keys4, xy):
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb[0, :4] = keys4
    assert tuple(mg3_controls.mg3_states(kb, ms, P)[1, :2]) == pytest.approx(xy)


def test_mg3_states_pitch_follows_the_sign_choice_and_the_dead_zone():
    kb, ms = np.zeros((3, 6), np.float32), np.zeros((3, 2), np.float32)
    ms[0, 0], ms[1, 0] = 0.1, 0.019  # the second is under the dead zone
    assert mg3_controls.mg3_states(kb, ms, P)[1:, 3] == pytest.approx([1.5, 1.5])
    assert mg3_controls.mg3_states(kb, ms, mg3_controls.MG3Params(mouse_pitch="label"))[1:, 3] == pytest.approx([-1.5, -1.5])


def test_mg3_extrinsics_turn_about_world_z_and_read_centimetres():
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    ms[0] = [0.0, 6.0]  # 90 deg to the right
    kb[0, 0] = 1
    ext = mg3_controls.mg3_extrinsics(kb, ms, P)
    # camera +z (forward) starts along world +X and ends along world +Y after 90 deg of yaw
    assert np.allclose(ext[0, :3, 2], [1, 0, 0]) and np.allclose(ext[1, :3, 2], [0, 1, 0], atol=1e-12)
    assert np.allclose(ext[1, :3, 3], [0.1235 * np.cos(np.pi / 4), 0.1235 * np.sin(np.pi / 4), 0])
    ms[0] = [1.0, 0.0]  # 15 deg of MG pitch (positive = down in the code)
    kb[:] = 0
    down = mg3_controls.mg3_extrinsics(kb, ms, P)[1]
    assert down[2, 2] == pytest.approx(-np.sin(np.radians(15)))  # the optical axis tilts towards world -Z


def test_mg3_decode_divides_by_the_translation_scale():
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb[0, 0] = 1
    assert mg3_controls.mg3_decode(kb, ms, mg3_controls.MG3Params(metres_per_unit=2.0))[1, 2, 3] == pytest.approx(0.1235 / 2)


def test_mg3_encode_picks_the_key_that_lands_closest_along_the_current_yaw():
    """After a 90 deg right turn, moving along the original +x (the camera's new forward) is W, not D (a hold of
    one frame, so each action is its own block)."""
    P = mg3_controls.MG3Params(hold_frames=1)
    T = 12
    yaw = np.r_[np.linspace(0, 90, 7), np.full(T - 7, 90.0)]
    pos = np.zeros((T, 3))
    for t in range(7, T):
        pos[t] = pos[t - 1] + [0.1235, 0, 0]
    c2w = se3(np.stack([rot_y(np.radians(a)) for a in yaw]), pos)
    kb, ms = mg3_controls.mg3_encode(c2w, P)
    assert (kb[6:T - 1, 0] == 1).all() and not kb[6:T - 1, 1:4].any() and not kb[:6].any()
    back = mg3_controls.mg3_decode(kb, ms, P)
    assert np.allclose(back[-1, :3, 3], c2w[-1, :3, 3], atol=1e-6)
    assert np.degrees(yaw_pitch_from_rotmat(back[-1, :3, :3])[0]) == pytest.approx(90.0, abs=1e-4)


# -- YUME ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t, move", [([0, 0, 0.01], "W"), ([0, 0, -0.01], "S"), ([0.01, 0, 0], "D"),
                                     ([-0.01, 0, 0], "A"), ([0.01, 0, 0.01], "W+D"), ([-0.01, 0, -0.01], "S+A"),
                                     ([0.0009, 0, -0.0009], "None"), ([0, 0.5, 0], "None")])
def test_yume_movement_keys_read_forward_and_right_above_the_snap(t, move):
    assert yume_controls.yume_keys(se3(np.eye(3), t)) == (move, "·")


@pytest.mark.parametrize("yaw, pitch, rot", [(5, 0, "→"), (-5, 0, "←"), (0, 5, "↑"), (0, -5, "↓"), (5, 5, "↑→"),
                                             (-5, -5, "↓←"), (0.4, -0.4, "·"), (0.6, 0, "→")])
def test_yume_rotation_keys_read_pan_and_tilt_above_half_a_degree(yaw, pitch, rot):
    R = rot_y(np.radians(yaw)) @ rot_x(np.radians(pitch))
    assert yume_controls.yume_keys(se3(R)) == ("None", rot)


def test_yume_stage_bounds_need_29k_plus_1_poses():
    assert yume_controls.yume_stage_bounds(59) == [(0, 29), (29, 58)]
    assert len(yume_controls.yume_stage_bounds(494)) == 17
    for bad in (29, 1, 58, 60):
        with pytest.raises(ValueError, match="29 k \\+ 1"):
            yume_controls.yume_stage_bounds(bad)


def test_yume_speed_numbers_are_exact_and_clipped_to_the_range():
    """Speeds are written as upstream's training captions print theirs (str of the float, t2v_datasets.py:430-432
    @111c3fa): to 9 significant digits, whole numbers without a decimal, as caption_re.txt."""
    assert yume_controls.yume_number(3.0) == "3" and yume_controls.yume_number(10.0) == "10"
    assert yume_controls.yume_number(90 / 116) == "0.775862069" and yume_controls.yume_number(0.75) == "0.75"
    assert yume_controls.yume_number(2.9599999999999813) == "2.96"  # the arccos noise of a 2.96 deg/frame turn
    p = yume_controls.YumeParams()
    n = p.frames_per_stage

    def line(step, yaw_deg):
        T = n + 1
        c2w = se3(np.stack([rot_y(np.radians(yaw_deg * i)) for i in range(T)]),
                  np.stack([np.zeros(T), np.zeros(T), step * np.arange(T)], 1))
        return yume_controls.yume_parse_speeds(yume_controls.yume_captions(c2w, "")[0])

    assert line(50 * p.units_per_speed_unit, 0) == (10.0, 0.0)  # 50 clipped to 10
    assert line(0.04 * p.units_per_speed_unit + 1e-3 / n, 0)[0] == 0.1  # under 0.1 but moving: clipped up to 0.1
    assert line(2.26 * p.units_per_speed_unit, 0)[0] == 2.26  # not rounded to 2.3
    assert line(0, 2.0)[1] == 2.0 and line(0, 13.0) == (0.0, 10.0) and line(0, -1.44)[1] == 1.44


def test_yume_rotation_speed_is_the_mean_angle_between_optical_axes():
    c2w = se3(np.stack([rot_y(np.radians(a)) for a in (0.0, 1.0, 4.0, 4.0)]))
    assert yume_controls.yume_rotation_speed(c2w) == pytest.approx((1.0 + 3.0 + 0.0) / 3)
    assert yume_controls.yume_rotation_speed(c2w[:1]) == 0.0


def test_yume_decode_splits_diagonal_speeds_over_both_axes():
    p = yume_controls.YumeParams()
    base = "First-person perspective. {m} {r} Actual distance moved:2 at 100 meters per second. Angular change rate " \
           "(turn speed):1. View rotation speed:1."
    line = base.format(m=yume_controls.YUME_MOVE["W+D"], r=yume_controls.YUME_ROT["↑→"])
    out = yume_controls.yume_decode([line])
    assert out.shape == (p.frames_per_stage + 1, 4, 4) and np.array_equal(out[0], np.eye(4))
    first = out[1]
    step = 2 * p.units_per_speed_unit / np.sqrt(2)
    assert np.allclose(first[:3, 3], [step, 0, step])  # the step is taken in the frame-0 camera, both axes
    yaw, pitch = (np.degrees(x) for x in yaw_pitch_from_rotmat(first[:3, :3]))
    assert yaw == pytest.approx(1 / np.sqrt(2)) and pitch == pytest.approx(1 / np.sqrt(2))
    last_yaw, last_pitch = (np.degrees(x) for x in yaw_pitch_from_rotmat(out[-1, :3, :3]))
    assert last_yaw == pytest.approx(29 / np.sqrt(2)) and last_pitch == pytest.approx(29 / np.sqrt(2))
    back = yume_controls.yume_decode([base.format(m=yume_controls.YUME_MOVE["S+A"], r=yume_controls.YUME_ROT["↓←"])])[1]
    assert np.allclose(back[:3, 3], [-step, 0, -step])
    assert np.degrees(yaw_pitch_from_rotmat(back[:3, :3])[0]) == pytest.approx(-1 / np.sqrt(2))


def test_yume_parse_reads_both_speed_values():
    line = ("x Actual distance moved:0.7 at 100 meters per second. Angular change rate (turn speed):3. View rotation "
            "speed:3.5.")
    assert yume_controls.yume_parse_speeds(line) == (0.7, 3.5)


# -- HY-WorldPlay labels, poses, PRoPE, rays -----------------------------------------------------------------------


def test_hy_labels_come_from_consecutive_latents_not_from_the_first():
    lat = se3(np.stack([rot_y(np.radians(a)) for a in (0, 1, 2, 2, 2)]))
    assert list(hy_controls.hy_action_labels(lat)) == [0, 1, 1, 0, 0]  # the holds read as still, not as "right of 0"


def test_max_norm_of_no_motion_or_no_poses_divides_by_one():
    still = np.tile(np.eye(4), (3, 1, 1))
    out, m = poses.max_norm_translation(still)
    assert m == 1.0 and np.array_equal(out, still)
    out, m = poses.max_norm_translation(np.zeros((0, 4, 4)))
    assert m == 1.0 and out.shape == (0, 4, 4)
    moved = se3(np.tile(np.eye(3), (2, 1, 1)), [[0, 0, 0], [0, 3, 4]])
    out, m = poses.max_norm_translation(moved)
    assert m == 5.0 and np.allclose(out[1, :3, 3], [0, 0.6, 0.8]) and moved[1, 2, 3] == 4  # input untouched


def test_integrate_framewise_chains_and_scales():
    f = se3(np.stack([np.eye(3), rot_y(np.pi / 2), np.eye(3)]), [[9, 9, 9], [0, 0, 1], [0, 0, 1]])
    out = poses.integrate_framewise(f, 2.0)
    assert np.array_equal(out[0], np.eye(4))  # the first framewise pose is not read
    assert np.allclose(out[1, :3, 3], [0, 0, 2]) and np.allclose(out[2, :3, 3], [2, 0, 2])


def test_interpolation_before_between_and_after_anchors():
    a = se3(np.stack([np.eye(3), rot_y(np.radians(40))]), [[0, 0, 0], [0, 0, 4]])
    out = poses.interpolate_to_frames(np.array([2, 6]), a, 9)
    assert all(np.array_equal(out[i], a[0]) for i in (0, 1, 2)) and all(np.array_equal(out[i], a[1]) for i in (6, 7, 8))
    assert np.allclose(out[3, :3, 3], [0, 0, 1]) and np.allclose(out[5, :3, 3], [0, 0, 3])
    assert np.degrees(yaw_pitch_from_rotmat(out[3, :3, :3])[0]) == pytest.approx(10.0)


def test_prope_normalises_an_off_centre_camera_by_its_principal_point():
    K = np.array([[500.0, 0, 400.0], [0, 600.0, 250.0], [0, 0, 1]])
    n = hy_normalise_K(K)
    assert n[0, 0] == pytest.approx(500 / 800) and n[1, 1] == pytest.approx(600 / 500)
    assert n[0, 2] == n[1, 2] == 0.5 and n[2, 2] == 1.0 and n[0, 1] == 0.0
    h, v = prope.fov_of_normalised(0.5, 0.25)
    assert h == pytest.approx(90.0) and v == pytest.approx(2 * np.degrees(np.arctan(2.0)))
    assert prope.fov_of_normalised(*DREAMX_FIXED_K_NORM[:2]) == pytest.approx(
        prope.fov_of_normalised(HY_DEFAULT_K[0, 0] / 1920, HY_DEFAULT_K[1, 1] / 1080))


def test_od_rays_go_through_pixel_centres_and_fold_refuses_a_ragged_map():
    K = np.array([[2.0, 0, 2.0], [0, 2.0, 1.0], [0, 0, 1]])
    r = rays.od_rays(se3(np.eye(3)[None], [[1.0, 2.0, 3.0]]), K, 2, 4)
    assert r.shape == (1, 2, 4, 6) and np.allclose(r[0, :, :, :3], [1, 2, 3])
    d = np.array([0.5 - 2.0, 0.5 - 1.0, 2.0])  # pixel (0, 0)'s centre is (0.5, 0.5)
    assert np.allclose(r[0, 0, 0, 3:], d / np.linalg.norm(d))
    with pytest.raises(ValueError, match="not divisible by the fold block 8"):
        rays.fold(np.zeros((1, 12, 16, 6)), 8)
    assert rays.fold(np.zeros((1, 16, 24, 6)), 8).shape == (1, 384, 2, 3)


@pytest.mark.parametrize("t, trans_index", [([0, 0, 1], 1), ([0, 0, -1], 2), ([1, 0, 0], 3), ([-1, 0, 0], 4),
                                            ([1, 0, 1], 5), ([-1, 0, 1], 6), ([1, 0, -1], 7), ([-1, 0, -1], 8)])
def test_hy_translation_combinations_use_upstreams_index(t, trans_index):
    """Upstream's one-hot -> index table (generate.py): fwd 1, back 2, right 3, left 4, fwd+right 5, fwd+left 6,
    back+right 7, back+left 8; the label is 9 * translation index + rotation index."""
    step = 0.01 * np.array(t, float) / np.linalg.norm(t)
    assert hy_controls.hy_action_label(se3(np.eye(3), step)) == 9 * trans_index


@pytest.mark.parametrize("yaw, pitch, rot_index", [(1, 0, 1), (-1, 0, 2), (0, 1, 3), (0, -1, 4), (1, 1, 5),
                                                   (1, -1, 6), (-1, 1, 7), (-1, -1, 8)])
def test_hy_rotation_combinations_use_upstreams_index(yaw, pitch, rot_index):
    """Rotation one-hot [right, left, up, down] -> right 1, left 2, up 3, down 4, right+up 5, right+down 6,
    left+up 7, left+down 8 (SciPy 'xyz' Euler angles: y is the pan, x the tilt)."""
    R = rot_y(np.radians(yaw)) @ rot_x(np.radians(pitch))
    assert hy_controls.hy_action_label(se3(R)) == rot_index


# -- boundaries and the cases the tests above leave out -----------------------------------------------------------


def test_hy_thresholds_are_strict_where_a_float_can_sit_on_them():
    assert hy_controls.hy_action_label(se3(np.eye(3), [0, 0, 1e-4])) == 0  # exactly 1e-4: not a move (> 1e-4)
    x005 = 0.0008726646259971647  # rot_x of this angle reads exactly 0.05 deg in SciPy's 'xyz' angles
    assert hy_controls.hy_action_label(se3(rot_x(x005))) == 0 and hy_controls.hy_action_label(se3(rot_x(-x005))) == 0
    assert hy_controls.hy_action_label(se3(rot_x(np.nextafter(x005, 1)))) == 3  # up, one ulp above


@pytest.mark.parametrize("deg, fwd", [(60.5, False), (59.5, True), (120.5, True), (119.5, False)])
def test_hy_cones_end_at_60_and_120_degrees(deg, fwd):
    """Forward within 60 deg of +z, back beyond 120; right / left likewise about +x (a step in the x-z plane)."""
    a = np.radians(deg)
    label = hy_controls.hy_action_label(se3(np.eye(3), 0.01 * np.array([np.sin(a), 0, np.cos(a)])))
    trans = label // 9
    assert (trans in (1, 5, 6)) is (fwd and deg < 90)
    assert (trans in (2, 7, 8)) is (fwd and deg > 90)
    side = hy_controls.hy_action_label(se3(np.eye(3), 0.01 * np.array([np.cos(a), 0, np.sin(a)]))) // 9
    assert (side in (3, 5, 7)) is (fwd and deg < 90) and (side in (4, 6, 8)) is (fwd and deg > 90)


def test_mg3_states_wrap_just_past_180_either_way():
    kb, ms = np.zeros((3, 6), np.float32), np.zeros((3, 2), np.float32)
    ms[0, 1], ms[1, 1] = 12.0, 0.0334  # 180 deg, then half a degree more
    st = mg3_controls.mg3_states(kb, ms, P)
    assert st[1, 4] == 180.0 and st[2, 4] == pytest.approx(-179.499, abs=1e-3)
    ms[0, 1], ms[1, 1] = -12.0, -0.0334
    assert mg3_controls.mg3_states(kb, ms, P)[2, 4] == pytest.approx(179.499, abs=1e-3)


def test_mg3_states_strafe_along_the_average_yaw():
    """At yaw psi upstream's forward is (cos psi, sin psi) and its right (-sin psi, cos psi) in world X-Y."""
    kb, ms = np.zeros((3, 6), np.float32), np.zeros((3, 2), np.float32)
    ms[0, 1] = 2.0  # turn 30 deg first
    kb[1, 3] = 1  # then D
    x, y = mg3_controls.mg3_states(kb, ms, P)[2, :2]
    psi = np.radians(30)
    assert (x, y) == pytest.approx((-12.35 * np.sin(psi), 12.35 * np.cos(psi)))
    kb[1] = [0, 0, 1, 0, 0, 0]  # A
    x, y = mg3_controls.mg3_states(kb, ms, P)[2, :2]
    assert (x, y) == pytest.approx((12.35 * np.sin(psi), -12.35 * np.cos(psi)))


def test_mg3_a_key_at_exactly_half_is_not_pressed():
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb[0, 0] = 0.5
    assert mg3_controls.mg3_states(kb, ms, P)[1, 0] == 0.0


def test_mg3_decode_keeps_the_homogeneous_row():
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb[0, 0] = 1
    rel = mg3_controls.mg3_decode(kb, ms, mg3_controls.MG3Params(metres_per_unit=2.0))
    assert np.array_equal(rel[:, 3], np.tile([0.0, 0, 0, 1], (2, 1)))


def _greedy_ok(c2w: np.ndarray, p: mg3_controls.MG3Params) -> None:
    """Each keyboard row is the combination that brings the integrated position (mg3_states, upstream's integrator)
    closest to the requested one, given the rows before it (an independent check of the encoder's greedy rule)."""
    kb, ms = mg3_controls.mg3_encode(c2w, p)
    R_init = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    want = (c2w[:, :3, 3] * p.metres_per_unit) @ R_init.T * 100  # OpenCV (right, down, fwd) -> MG world cm
    combos, _ = mg3_controls._key_moves(p)
    for t in range(1, len(c2w)):
        errs = []
        for k in combos:
            trial = kb.copy()
            trial[t - 1, :4] = k
            trial[t:] = 0
            errs.append(np.linalg.norm(mg3_controls.mg3_states(trial, ms, p)[t, :2] - want[t, :2]))
        assert errs[[tuple(k) for k in combos.tolist()].index(tuple(kb[t - 1, :4].tolist()))] <= min(errs) + 1e-9, t


def test_mg3_encode_is_greedy_against_upstreams_integrator_while_turning():
    """With a hold of one frame every action is its own block, so each row is the per-frame best."""
    P = mg3_controls.MG3Params(hold_frames=1)
    T = 16
    yaw = np.radians(np.r_[0.0, np.cumsum(np.full(T - 1, 9.0))])  # 9 deg per frame to the right
    pos = np.zeros((T, 3))
    for t in range(1, T):  # forward, then along the camera's right, at about one key step per frame
        d = np.array([np.sin(yaw[t]), 0, np.cos(yaw[t])]) if t < 8 else np.array([np.cos(yaw[t]), 0, -np.sin(yaw[t])])
        pos[t] = pos[t - 1] + 0.12 * d
    c2w = se3(np.stack([rot_y(a) for a in yaw]), pos)
    _greedy_ok(c2w, P)
    kb, _ = mg3_controls.mg3_encode(c2w, P)
    assert kb[0, 0] == 1  # the first action already moves (row 0 carries frame 0 -> 1)
    assert (kb[8:T - 1, 3] == 1).all()  # D while moving along the camera's right


def test_yume_keys_are_strict_at_their_snaps():
    th = yume_controls.YumeParams().translation_snap
    for t in ([0, 0, th], [0, 0, -th], [th, 0, 0], [-th, 0, 0]):
        assert yume_controls.yume_keys(se3(np.eye(3), t)) == ("None", "·")
    tilt = 0.008726646259971648  # rot_x of this angle reads exactly 0.5 deg (in radians) in SciPy's 'xyz' angles
    assert yume_controls.yume_keys(se3(rot_x(tilt))) == ("None", "·") and yume_controls.yume_keys(se3(rot_x(-tilt))) == ("None", "·")
    assert yume_controls.yume_keys(se3(rot_x(np.nextafter(tilt, 1))))[1] == "↑"


def test_yume_keys_with_no_snap_read_no_rotation_as_no_key():
    """With ``rotation_snap_deg: 0`` (every rotation keyed) a stage that does not turn gets no rotation key: its
    pan and tilt are exactly 0, which is neither above 0 nor below -0."""
    no_snap = yume_controls.YumeParams(rotation_snap_deg=0.0)
    assert yume_controls.yume_keys(np.eye(4), no_snap) == ("None", "·")
    assert yume_controls.yume_keys(se3(rot_y(1e-9)), no_snap)[1] == "→"  # the least turn is keyed
    assert yume_controls.yume_keys(se3(rot_y(-1e-9)), no_snap)[1] == "←"


def test_yume_rotation_speed_of_two_poses_and_of_an_uneven_stage():
    c2w = se3(np.stack([rot_y(np.radians(a)) for a in (0.0, 2.0)]))
    assert yume_controls.yume_rotation_speed(c2w) == pytest.approx(2.0)
    p = yume_controls.YumeParams()
    n = p.frames_per_stage
    angles = np.r_[np.zeros(1), np.cumsum(np.r_[np.full(n - 2, 1.0), [4.0, 4.0]])]  # faster over the last two steps
    line = yume_controls.yume_captions(se3(np.stack([rot_y(np.radians(a)) for a in angles])), "")[0]
    want = (n - 2 + 8.0) / n  # the mean over all 29 steps of the stage, its last two included
    assert yume_controls.yume_parse_speeds(line)[1] == pytest.approx(want, rel=1e-8)


def test_yume_distance_reads_back_as_written():
    p = yume_controls.YumeParams()
    T = p.frames_per_stage + 1
    c2w = se3(np.tile(np.eye(3), (T, 1, 1)), np.stack([np.zeros(T), np.zeros(T), 2.96 * p.units_per_speed_unit *
                                                         np.arange(T)], 1))
    line = yume_controls.yume_captions(c2w, "")[0]
    assert "Actual distance moved:2.96" in line and " at 100 meters per second." in line
    assert yume_controls.yume_parse_speeds(line)[0] == pytest.approx(2.96, abs=1e-12)


def test_yume_speed_calibration_applies_both_ways():
    p = yume_controls.YumeParams(deg_per_speed_unit=2.0)
    n = p.frames_per_stage
    c2w = se3(np.stack([rot_y(np.radians(3.0 * i)) for i in range(n + 1)]))  # 3 deg per frame
    line = yume_controls.yume_captions(c2w, "", p)[0]
    assert yume_controls.yume_parse_speeds(line)[1] == pytest.approx(1.5, abs=1e-12)  # 3 deg / 2 deg per unit
    back = yume_controls.yume_decode([line], p)
    assert np.degrees(yaw_pitch_from_rotmat(back[-1, :3, :3])[0]) == pytest.approx(3.0 * n)


def test_yume_decode_of_a_tilt_alone_does_not_pan():
    line = ("First-person perspective. " + yume_controls.YUME_MOVE["None"] + " " + yume_controls.YUME_ROT["↑"] +
            " Actual distance moved:0 at 100 meters per second. Angular change rate (turn speed):1. View rotation "
            "speed:1.")
    out = yume_controls.yume_decode([line])
    yaw, pitch = (np.degrees(x) for x in yaw_pitch_from_rotmat(out[-1, :3, :3]))
    assert yaw == pytest.approx(0.0, abs=1e-9) and pitch == pytest.approx(29.0)


def test_integrate_framewise_leaves_its_input_alone():
    f = se3(np.tile(np.eye(3), (2, 1, 1)), [[0, 0, 0], [0, 0, 1.0]])
    poses.integrate_framewise(f, 3.0)
    assert f[1, 2, 3] == 1.0


def test_fold_defaults_to_lingbots_8_and_checks_both_sides():
    assert rays.fold(np.zeros((1, 16, 24, 6))).shape == (1, 384, 2, 3)
    with pytest.raises(ValueError, match="16x20"):
        rays.fold(np.zeros((1, 16, 20, 6)), 8)  # the height divides, the width does not


def test_yume_speed_unit_is_the_recorded_0_0032_scene_units_per_frame():
    """The harness's translation calibration (:class:`YumeParams`, a recorded choice): 0.0032 scene units per
    frame read as speed 1, so 0.0064 per frame is printed as 2."""
    p = yume_controls.YumeParams()
    T = p.frames_per_stage + 1
    c2w = se3(np.tile(np.eye(3), (T, 1, 1)), np.stack([np.zeros(T), np.zeros(T), 0.0064 * np.arange(T)], 1))
    assert yume_controls.yume_parse_speeds(yume_controls.yume_captions(c2w, "")[0])[0] == 2.0


def test_yume_a_half_turn_between_two_frames_reads_180_degrees():
    """Consecutive optical axes exactly opposite: the cosine rounds just below -1 and is clipped (not NaN)."""
    R = rot_y(np.radians(1)) @ rot_x(np.radians(2))
    c2w = se3(np.stack([R, R @ rot_y(np.pi)]))
    z = c2w[:, :3, 2]
    assert np.einsum("ij,ij->i", z[:-1], z[1:])[0] / np.prod(np.linalg.norm(z, axis=1)) < -1.0  # rounds below -1
    assert yume_controls.yume_rotation_speed(c2w) == 180.0


def test_yume_turn_speeds_are_not_rounded():
    n = yume_controls.YumeParams().frames_per_stage
    c2w = se3(np.stack([rot_y(np.radians(2.96 * i)) for i in range(n + 1)]))
    line = yume_controls.yume_captions(c2w, "")[0]
    assert "View rotation speed:2.96" in line and "View rotation speed:3." not in line


def test_mg3_keys_change_only_at_upstreams_block_edges_and_land_on_the_target():
    """Upstream's generator gives row 0 its own action, then holds each for 12 rows (utils/conditions.py:21-32
    @71c3cd7f7413): a path that moves forward 24 key steps from pose 13 and 12 steps right from pose 37 gets W for
    rows 13..36 and D for 37..48, nothing else, and the integrated position lands on the request; the request's
    1-frame wiggle at frame 5 (a tenth of a step) is not sent."""
    T = 61
    pos = np.zeros((T, 3))
    for t in range(1, T):
        step = [0.0, 0.0, 0.1235] if 13 < t <= 37 else [0.1235, 0.0, 0.0] if 37 < t <= 49 else [0.0, 0.0, 0.0]
        pos[t] = pos[t - 1] + step
    pos[5, 2] += 0.012
    kb, _ = mg3_controls.mg3_encode(se3(np.tile(np.eye(3), (T, 1, 1)), pos), P)
    assert not kb[:13].any() and (kb[13:37, 0] == 1).all() and not kb[13:37, 1:4].any()
    assert (kb[37:49, 3] == 1).all() and not kb[37:49, :3].any() and not kb[49:].any()
    back = mg3_controls.mg3_decode(kb, np.zeros((T, 2), np.float32), P)
    assert np.allclose(back[-1, :3, 3], pos[-1], atol=1e-6)


def test_mg3_a_turn_off_the_block_edges_is_held_per_block_and_lands_at_the_next_edge():
    """A yaw ramp of 1.5 deg per frame from pose 5 to pose 29 (both off upstream's edges 1, 13, 25, 37) is sent as
    one value per block; each block lands on the request at its edge, and the turn is complete at edge 37."""
    T = 49
    target = np.clip(1.5 * (np.arange(T) - 5), 0.0, 36.0)
    m = mg3_controls._mg3_axis(target, P)
    for a, b in mg3_controls.mg3_blocks(T, 12):
        assert np.all(m[a:b] == m[a])
    state = _integrate(m)
    for edge in (1, 13, 25, 37):
        assert state[edge] == pytest.approx(target[edge], abs=1e-5)  # float32 values, as upstream is given them
    assert m[1] == pytest.approx((target[13] - 0.0) / 12 / 15)


# -- laying a path on a model's control clock (adapters/controls/clock.py) ------------------------------------------


def _yaw_path(yaws, segs):
    """A CameraPath turning through ``yaws`` (degrees per frame index) with ``segs`` = (phase, kind, start, end)."""
    from trajectories.path import CameraPath, Segment

    c2w = se3(np.stack([rot_y(np.radians(y)) for y in yaws]))
    segments = tuple(Segment(ph, "L" if kind == "move" else "hold", kind, a, b) for ph, kind, a, b in segs)
    phases: dict = {}
    for s in segments:
        lo, hi = phases.get(s.phase, (s.start, s.end))
        phases[s.phase] = (min(lo, s.start), max(hi, s.end))
    return CameraPath("t", c2w, np.eye(3), 16.0, 8, 8, phases, segments, {})


def test_clock_reads_where_a_segment_ends_in_both_layouts():
    from adapters.controls.clock import segment_end_poses

    # frame layout: a move [1, 4) reaches its end on its own last frame
    frame = _yaw_path([0, 1, 2, 3, 3, 3], [("V", "hold", 0, 1), ("D1", "move", 1, 4), ("H", "hold", 4, 6)])
    assert segment_end_poses(frame) == [0, 3, 5]
    # normalised time: the hold's last pose is the next segment's first, and a move completes on the next one's first
    time = _yaw_path([0, 0, 0, 1.5, 3, 3], [("V", "hold", 0, 2), ("D1", "move", 2, 4), ("H", "hold", 4, 6)])
    assert segment_end_poses(time) == [2, 4, 5]
    # a sweep followed by the way back: the turn is where the direction reverses
    turn = _yaw_path([0, 1, 2, 1, 0, 0], [("V", "hold", 0, 1), ("D1", "move", 1, 3), ("R1", "move", 3, 5),
                                          ("H", "hold", 5, 6)])
    assert segment_end_poses(turn) == [0, 2, 4, 5]


def _sweeps(n: int, total: int):
    """Out n frames at 1 deg/frame, back n frames, then held to ``total`` poses (frame layout)."""
    yaws = list(range(n + 1)) + list(range(n - 1, -1, -1)) + [0] * (total - 2 * n - 1)
    return _yaw_path(yaws, [("V", "hold", 0, 1), ("D1", "move", 1, n + 1), ("R1", "move", n + 1, 2 * n + 1),
                            ("H", "hold", 2 * n + 1, total)])


def test_clock_time_takes_the_nearest_edge_and_length_keeps_the_sweep():
    from adapters.controls.clock import laid_ends

    path = _sweeps(11, 26)  # turns at 11 and 22 on edges every 4 poses
    edges = np.arange(0, 26, 4)
    assert laid_ends(path, edges, "time") == [0, 12, 20, 25]  # 22 is 2 from 20 and from 24: the earlier
    assert laid_ends(path, edges, "length") == [0, 12, 24, 25]  # the way back keeps 11 frames: 12 + 11 -> 24
    with pytest.raises(ValueError, match="keep='speed'"):
        laid_ends(path, edges, "speed")


def test_clock_lets_a_hold_vanish_but_never_a_move():
    from adapters.controls.clock import laid_ends, lay_on_grid
    from trajectories.path import TrajectoryError

    yaws = [0, 1, 2, 3, 3, 2, 1, 0, 0, 0, 0]  # out, a one-frame hold, back
    path = _yaw_path(yaws, [("V", "hold", 0, 1), ("D1", "move", 1, 4), ("D1", "hold", 4, 5), ("R1", "move", 5, 8),
                            ("H", "hold", 8, 11)])
    laid = laid_ends(path, np.array([0, 4, 8, 10]), "time")
    assert laid == [0, 4, 4, 8, 10]  # the hold at the far end had no block of its own
    out = lay_on_grid(path, np.array([0, 4, 8, 10]), "every 4")
    assert [s.kind for s in out.segments] == ["hold", "move", "move", "hold"] and out.phases["D1"] == (1, 5)
    with pytest.raises(TrajectoryError, match="2 moves do not fit"):
        laid_ends(path, np.array([0, 10]), "time")  # one block for two moves


def test_clock_laying_retimes_a_sweep_at_one_speed_and_records_it():
    from adapters.controls.clock import lay_on_grid
    from trajectories.conventions import yaw_pitch_from_rotmat

    path = _sweeps(11, 26)
    assert lay_on_grid(path, np.arange(0, 26, 1), "every pose") is path  # already on the clock: untouched
    out = lay_on_grid(path, np.arange(0, 26, 4), "every 4", keep="length")
    yaw = np.degrees(yaw_pitch_from_rotmat(out.c2w[:, :3, :3])[0])
    np.testing.assert_allclose(np.diff(yaw[:13]), 11 / 12, atol=1e-9)  # 11 deg over 12 frames, evenly
    np.testing.assert_allclose(np.diff(yaw[12:25]), -11 / 12, atol=1e-9)
    assert yaw[24] == pytest.approx(0.0, abs=1e-9) and (yaw[24:] == yaw[24]).all()
    rec = out.params["upstream_clock"]
    assert rec["segment_ends"] == [0, 11, 22, 25] and rec["laid_ends"] == [0, 12, 24, 25]
    assert rec["max_shift_frames"] == 2 and rec["laid_deg_per_frame"] == pytest.approx([11 / 12, 11 / 12])
    assert rec["keep"] == "length" and rec["rule"] == "every 4"
    assert [(s.start, s.end) for s in out.segments] == [(0, 1), (1, 13), (13, 25), (25, 26)]


def test_mg3_a_lag_exactly_on_the_dead_zone_is_sent():
    """The encoder sends a value that reaches its dead zone (with margin) exactly: ``>=``, as upstream keeps a value
    at its threshold. Row 0 is its own block: a target of exactly the threshold after one pose (1 degree per unit)."""
    p = mg3_controls.MG3Params(deg_per_unit=1.0)
    dz = p.dead_zone * mg3_controls._DEAD_MARGIN
    target = np.full(14, dz)
    target[0] = 0.0
    assert mg3_controls._mg3_axis(target, p)[0] == dz


def test_yume_stages_of_two_frames():
    """``frames_per_stage`` is a setting: with 2 frames a stage, 9 poses are 4 stages (0-2, 2-4, 4-6, 6-8)."""
    p = yume_controls.YumeParams(frames_per_stage=2)
    assert yume_controls.yume_stage_bounds(9, p) == [(0, 2), (2, 4), (4, 6), (6, 8)]


def test_yume_rotation_speed_is_the_angle_between_axes_of_any_length():
    """The angle between consecutive optical axes does not depend on their lengths (YUME normalises them)."""
    c2w = np.stack([np.eye(4)] * 2)
    c2w[0, :3, 2] = [0.0, 0.0, 2.0]
    c2w[1, :3, 2] = 3.0 * np.array([np.sin(np.pi / 3), 0.0, np.cos(np.pi / 3)])
    assert yume_controls.yume_rotation_speed(c2w) == pytest.approx(60.0, abs=1e-9)
