"""The rules of the lossy control encoders (adapters/controls/) one at a time: Matrix-Game 3's dead zone, error
diffusion and end-of-move fold, its integrator's yaw wrap, average yaw and diagonal steps; YUME's keys, speed
values and stage bounds; the relative-pose helpers' edge cases; PRoPE's normalised K of an off-centre camera."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.controls import keys, poses, prope, rays
from trajectories.conventions import rot_x, rot_y, se3, yaw_pitch_from_rotmat

P = keys.MG3Params()
DZ = P.dead_zone


# -- Matrix-Game 3 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("v, out", [(0.02, 0.02), (-0.02, -0.02), (0.0199, 0.0), (-0.0199, 0.0), (0.5, 0.5),
                                    (0.0, 0.0)])
def test_the_dead_zone_drops_values_below_it_and_keeps_it_exactly(v, out):
    assert keys._dead(v, P) == out


def test_pitch_sign_choice_is_checked():
    assert keys.MG3Params(mouse_pitch="code").pitch_sign() == 1.0
    assert keys.MG3Params(mouse_pitch="label").pitch_sign() == -1.0
    with pytest.raises(Exception, match="mouse_pitch='up'"):
        keys.MG3Params(mouse_pitch="up").pitch_sign()


def test_key_moves_are_one_step_straight_and_one_diagonal_step_per_axis():
    tab, moves = keys._key_moves(P)
    got = {tuple(int(x) for x in k): tuple(np.round(m, 6)) for k, m in zip(tab, moves)}
    s, d = P.step_cm / 100, P.diag_cm / 100
    assert got == {(0, 0, 0, 0): (0, 0), (1, 0, 0, 0): (s, 0), (0, 1, 0, 0): (-s, 0), (0, 0, 1, 0): (0, -s),
                   (0, 0, 0, 1): (0, s), (1, 0, 1, 0): (d, -d), (1, 0, 0, 1): (d, d), (0, 1, 1, 0): (-d, -d),
                   (0, 1, 0, 1): (-d, d)}


def _integrate(m: np.ndarray) -> np.ndarray:
    """The orientation upstream reaches per frame from one mouse axis (dead zone applied, float32 as given)."""
    state = np.zeros(len(m))
    for t in range(1, len(m)):
        state[t] = state[t - 1] + P.deg_per_unit * keys._dead(float(np.float32(m[t - 1])), P)
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
    m = keys._mg3_axis(target, P)
    state = _integrate(m)
    nz = m[m != 0]
    assert (np.abs(nz) >= DZ * keys._DEAD_MARGIN - 1e-12).all()  # every value clears the dead zone, with margin
    assert m[-1] == 0.0
    moving = np.r_[False, np.abs(np.diff(target)) > 1e-9]
    ends = [t for t in range(1, len(target)) if moving[t] and (t == len(target) - 1 or not moving[t + 1])]
    for t in ends:
        total = abs(target[t] - target[t - int(np.argmin(moving[t::-1]))])
        if total >= DZ * P.deg_per_unit:
            assert state[t] == pytest.approx(target[t], abs=1e-4), t  # exactly on the target, not 0.3 deg short
    assert np.abs(state - target).max() <= DZ * P.deg_per_unit + 1e-6  # and never further than the dead zone


def test_mg3_a_move_under_the_dead_zone_emits_nothing_and_a_step_above_it_emits_its_lag():
    assert not keys._mg3_axis(_ramp((5, 0.0), (3, 0.29), (5, 0.29)), P).any()
    one = keys._mg3_axis(np.array([0.0, 0.0, 1.5, 1.5]), P)
    assert one[1] == pytest.approx(0.1) and one[0] == 0 and one[2] == 0  # row t-1 moves frame t-1 to t
    sub = np.array([0.0, 0.2, 0.4, 0.6, 0.6])  # 0.2 deg per frame: each lag alone is under 0.3 deg
    m = keys._mg3_axis(sub, P)
    # frame 1's lag is dropped, frame 2 emits the 0.4 deg lag, frame 3's 0.2 deg is folded into it at the move's end
    assert m[0] == 0.0 and m[1] == pytest.approx(0.6 / 15) and m[2] == 0.0 and _integrate(m)[3] == pytest.approx(0.6)


def test_mg3_the_remainder_goes_to_the_last_value_of_its_sign():
    """A move whose last step is tiny: the remainder is folded into the move's last emitted value of the same sign
    (here two frames back), never into a value of the other sign, and never left as a sub-dead-zone value."""
    target = np.array([0.0, 0.0, 6.0, 6.1, 6.1, 6.1])
    m = keys._mg3_axis(target, P)
    assert m[1] == pytest.approx(6.1 / 15) and m[2] == 0.0  # the 0.1 deg of frame 3 joined frame 2's value
    assert _integrate(m)[3] == pytest.approx(6.1)
    back = np.array([0.0, 0.0, 6.0, 5.9, 5.9])  # the remainder has the other sign and is under the dead zone:
    mb = keys._mg3_axis(back, P)  # no value to fold it into without changing that value's sign, so it is dropped
    assert mb[1] == pytest.approx(0.4) and not mb[2:].any() and _integrate(mb)[3] == pytest.approx(6.0)


def test_mg3_a_remainder_with_no_value_of_its_sign_is_emitted_on_the_last_step_when_it_clears_the_dead_zone():
    target = np.array([0.0, 0.0, 0.25, 0.5, 0.5])  # 0.25 deg steps: the first is dropped, the second folds in
    m = keys._mg3_axis(target, P)
    assert m[0] == 0 and m[1] == 0 and m[2] == pytest.approx(0.5 / 15) and _integrate(m)[3] == pytest.approx(0.5)


def test_mg3_states_wrap_the_yaw_at_180_and_move_along_the_average_yaw():
    T = 15
    kb, ms = np.zeros((T, 6), np.float32), np.zeros((T, 2), np.float32)
    ms[:13, 1] = 1.0  # 15 deg per frame to the right
    st = keys.mg3_states(kb, ms, P)
    assert st[12, 4] == 180.0 and st[13, 4] == -165.0  # 180 itself is kept; past it wraps to -180..180
    ms[:, 1] = -ms[:, 1]
    assert keys.mg3_states(kb, ms, P)[12, 4] == -180.0 and keys.mg3_states(kb, ms, P)[13, 4] == 165.0
    kb2, ms2 = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb2[0, 0], ms2[0, 1] = 1, 2.0  # W while turning 30 deg: the step follows the average yaw, 15 deg
    x, y, z, pitch, yaw = keys.mg3_states(kb2, ms2, P)[1]
    assert (x, y, yaw) == pytest.approx((12.35 * np.cos(np.radians(15)), 12.35 * np.sin(np.radians(15)), 30.0))
    assert z == 0.0 and pitch == 0.0


@pytest.mark.parametrize("keys4, xy", [((1, 0, 0, 1), (8.73, 8.73)), ((0, 1, 1, 0), (-8.73, -8.73)),
                                       ((0, 0, 0, 1), (0.0, 12.35)), ((0, 1, 0, 0), (-12.35, 0.0)),
                                       ((1, 1, 0, 0), (0.0, 0.0)), ((0.4, 0, 0, 0), (0.0, 0.0))])
def test_mg3_states_diagonals_move_8_73_per_axis_and_keys_need_more_than_half(keys4, xy):
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb[0, :4] = keys4
    assert tuple(keys.mg3_states(kb, ms, P)[1, :2]) == pytest.approx(xy)


def test_mg3_states_pitch_follows_the_sign_choice_and_the_dead_zone():
    kb, ms = np.zeros((3, 6), np.float32), np.zeros((3, 2), np.float32)
    ms[0, 0], ms[1, 0] = 0.1, 0.019  # the second is under the dead zone
    assert keys.mg3_states(kb, ms, P)[1:, 3] == pytest.approx([1.5, 1.5])
    assert keys.mg3_states(kb, ms, keys.MG3Params(mouse_pitch="label"))[1:, 3] == pytest.approx([-1.5, -1.5])


def test_mg3_extrinsics_turn_about_world_z_and_read_centimetres():
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    ms[0] = [0.0, 6.0]  # 90 deg to the right
    kb[0, 0] = 1
    ext = keys.mg3_extrinsics(kb, ms, P)
    # camera +z (forward) starts along world +X and ends along world +Y after 90 deg of yaw
    assert np.allclose(ext[0, :3, 2], [1, 0, 0]) and np.allclose(ext[1, :3, 2], [0, 1, 0], atol=1e-12)
    assert np.allclose(ext[1, :3, 3], [0.1235 * np.cos(np.pi / 4), 0.1235 * np.sin(np.pi / 4), 0])
    ms[0] = [1.0, 0.0]  # 15 deg of MG pitch (positive = down in the code)
    kb[:] = 0
    down = keys.mg3_extrinsics(kb, ms, P)[1]
    assert down[2, 2] == pytest.approx(-np.sin(np.radians(15)))  # the optical axis tilts towards world -Z


def test_mg3_decode_divides_by_the_translation_scale():
    kb, ms = np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32)
    kb[0, 0] = 1
    assert keys.mg3_decode(kb, ms, keys.MG3Params(metres_per_unit=2.0))[1, 2, 3] == pytest.approx(0.1235 / 2)


def test_mg3_encode_picks_the_key_that_lands_closest_along_the_current_yaw():
    """After a 90 deg right turn, moving along the original +x (the camera's new forward) is W, not D."""
    T = 12
    yaw = np.r_[np.linspace(0, 90, 7), np.full(T - 7, 90.0)]
    pos = np.zeros((T, 3))
    for t in range(7, T):
        pos[t] = pos[t - 1] + [0.1235, 0, 0]
    c2w = se3(np.stack([rot_y(np.radians(a)) for a in yaw]), pos)
    kb, ms = keys.mg3_encode(c2w, P)
    assert (kb[6:T - 1, 0] == 1).all() and not kb[6:T - 1, 1:4].any() and not kb[:6].any()
    back = keys.mg3_decode(kb, ms, P)
    assert np.allclose(back[-1, :3, 3], c2w[-1, :3, 3], atol=1e-6)
    assert np.degrees(yaw_pitch_from_rotmat(back[-1, :3, :3])[0]) == pytest.approx(90.0, abs=1e-4)


# -- YUME ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t, move", [([0, 0, 0.01], "W"), ([0, 0, -0.01], "S"), ([0.01, 0, 0], "D"),
                                     ([-0.01, 0, 0], "A"), ([0.01, 0, 0.01], "W+D"), ([-0.01, 0, -0.01], "S+A"),
                                     ([0.0009, 0, -0.0009], "None"), ([0, 0.5, 0], "None")])
def test_yume_movement_keys_read_forward_and_right_above_the_snap(t, move):
    assert keys.yume_keys(se3(np.eye(3), t)) == (move, "·")


@pytest.mark.parametrize("yaw, pitch, rot", [(5, 0, "→"), (-5, 0, "←"), (0, 5, "↑"), (0, -5, "↓"), (5, 5, "↑→"),
                                             (-5, -5, "↓←"), (0.4, -0.4, "·"), (0.6, 0, "→")])
def test_yume_rotation_keys_read_pan_and_tilt_above_half_a_degree(yaw, pitch, rot):
    R = rot_y(np.radians(yaw)) @ rot_x(np.radians(pitch))
    assert keys.yume_keys(se3(R)) == ("None", rot)


def test_yume_stage_bounds_need_29k_plus_1_poses():
    assert keys.yume_stage_bounds(59) == [(0, 29), (29, 58)]
    assert len(keys.yume_stage_bounds(494)) == 17
    for bad in (29, 1, 58, 60):
        with pytest.raises(ValueError, match="29 k \\+ 1"):
            keys.yume_stage_bounds(bad)


def test_yume_speed_numbers_are_rounded_to_a_tenth_and_clipped_to_the_range():
    assert keys._num(3.0) == "3" and keys._num(0.1) == "0.1" and keys._num(10.0) == "10"
    p = keys.YumeParams()
    n = p.frames_per_stage

    def line(step, yaw_deg):
        T = n + 1
        c2w = se3(np.stack([rot_y(np.radians(yaw_deg * i)) for i in range(T)]),
                  np.stack([np.zeros(T), np.zeros(T), step * np.arange(T)], 1))
        return keys.yume_parse_speeds(keys.yume_captions(c2w, "")[0])

    assert line(50 * p.units_per_speed_unit, 0) == (10.0, 0.0)  # 50 clipped to 10
    assert line(0.04 * p.units_per_speed_unit + 1e-3 / n, 0)[0] == 0.1  # under 0.1 but moving: clipped up to 0.1
    assert line(2.26 * p.units_per_speed_unit, 0) == (2.3, 0.0)
    assert line(0, 2.0) == (0.0, 2.0) and line(0, 13.0) == (0.0, 10.0) and line(0, -1.44) == (0.0, 1.4)


def test_yume_rotation_speed_is_the_mean_angle_between_optical_axes():
    c2w = se3(np.stack([rot_y(np.radians(a)) for a in (0.0, 1.0, 4.0, 4.0)]))
    assert keys.yume_rotation_speed(c2w) == pytest.approx((1.0 + 3.0 + 0.0) / 3)
    assert keys.yume_rotation_speed(c2w[:1]) == 0.0


def test_yume_decode_splits_diagonal_speeds_over_both_axes():
    p = keys.YumeParams()
    base = "First-person perspective. {m} {r} Actual distance moved:2 at 100 meters per second. Angular change rate " \
           "(turn speed):1. View rotation speed:1."
    line = base.format(m=keys.YUME_MOVE["W+D"], r=keys.YUME_ROT["↑→"])
    out = keys.yume_decode([line])
    assert out.shape == (p.frames_per_stage + 1, 4, 4) and np.array_equal(out[0], np.eye(4))
    first = out[1]
    step = 2 * p.units_per_speed_unit / np.sqrt(2)
    assert np.allclose(first[:3, 3], [step, 0, step])  # the step is taken in the frame-0 camera, both axes
    yaw, pitch = (np.degrees(x) for x in yaw_pitch_from_rotmat(first[:3, :3]))
    assert yaw == pytest.approx(1 / np.sqrt(2)) and pitch == pytest.approx(1 / np.sqrt(2))
    last_yaw, last_pitch = (np.degrees(x) for x in yaw_pitch_from_rotmat(out[-1, :3, :3]))
    assert last_yaw == pytest.approx(29 / np.sqrt(2)) and last_pitch == pytest.approx(29 / np.sqrt(2))
    back = keys.yume_decode([base.format(m=keys.YUME_MOVE["S+A"], r=keys.YUME_ROT["↓←"])])[1]
    assert np.allclose(back[:3, 3], [-step, 0, -step])
    assert np.degrees(yaw_pitch_from_rotmat(back[:3, :3])[0]) == pytest.approx(-1 / np.sqrt(2))


def test_yume_parse_reads_both_speed_values():
    line = ("x Actual distance moved:0.7 at 100 meters per second. Angular change rate (turn speed):3. View rotation "
            "speed:3.5.")
    assert keys.yume_parse_speeds(line) == (0.7, 3.5)


# -- HY-WorldPlay labels, poses, PRoPE, rays -----------------------------------------------------------------------


def test_hy_labels_come_from_consecutive_latents_not_from_the_first():
    lat = se3(np.stack([rot_y(np.radians(a)) for a in (0, 1, 2, 2, 2)]))
    assert list(keys.hy_action_labels(lat)) == [0, 1, 1, 0, 0]  # the holds read as still, not as "right of 0"


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
    n = prope.hy_normalise_K(K)
    assert n[0, 0] == pytest.approx(500 / 800) and n[1, 1] == pytest.approx(600 / 500)
    assert n[0, 2] == n[1, 2] == 0.5 and n[2, 2] == 1.0 and n[0, 1] == 0.0
    h, v = prope.fov_of_normalised(0.5, 0.25)
    assert h == pytest.approx(90.0) and v == pytest.approx(2 * np.degrees(np.arctan(2.0)))
    assert prope.fov_of_normalised(*prope.DREAMX_FIXED_K_NORM[:2]) == pytest.approx(
        prope.fov_of_normalised(prope.HY_DEFAULT_K[0, 0] / 1920, prope.HY_DEFAULT_K[1, 1] / 1080))


def test_od_rays_go_through_pixel_centres_and_fold_refuses_a_ragged_map():
    K = np.array([[2.0, 0, 2.0], [0, 2.0, 1.0], [0, 0, 1]])
    r = rays.od_rays(se3(np.eye(3)[None], [[1.0, 2.0, 3.0]]), K, 2, 4)
    assert r.shape == (1, 2, 4, 6) and np.allclose(r[0, :, :, :3], [1, 2, 3])
    d = np.array([0.5 - 2.0, 0.5 - 1.0, 2.0])  # pixel (0, 0)'s centre is (0.5, 0.5)
    assert np.allclose(r[0, 0, 0, 3:], d / np.linalg.norm(d))
    with pytest.raises(ValueError, match="not divisible by the fold block 8"):
        rays.fold(np.zeros((1, 12, 16, 6)), 8)
    assert rays.fold(np.zeros((1, 16, 24, 6)), 8).shape == (1, 384, 2, 3)
