"""Trajectory library: conventions, builders, phases, resampling, (de)serialisation, preview."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from trajectories import (
    Timing,
    TrajectoryError,
    TrajectorySpec,
    build_path,
    first_of_group_anchors,
    latent_anchor_frames,
    latent_poses,
    latents_for_frames,
    load_path,
    resample_c2w,
)
from trajectories.conventions import (
    fov_from_intrinsics,
    geodesic_angle,
    intrinsics_for_resize_crop,
    intrinsics_from_fov,
    rot_x,
    rot_y,
    rotmat_from_yaw_pitch,
    se3,
    slerp_rotations,
    w2c_from_c2w,
    yaw_pitch_from_rotmat,
)

NATIVE_COUNTS = (481, 493, 497, 501, 505, 551)
SPECS = {
    "lrlr": TrajectorySpec(name="lrlr", cycles=("left", "left")),
    "lrlrlr": TrajectorySpec(name="lrlrlr", cycles=("left", "left", "left")),
    "lrud": TrajectorySpec(name="lrud", cycles=("left", "up")),
    "square": TrajectorySpec(name="square", kind="square", side=1.0),
}


def _build(name, n=493, K=None):
    K = intrinsics_from_fov(60.0, 832, 480) if K is None else K
    return build_path(SPECS[name], n, 16.0, K, 480, 832)


def test_positive_yaw_turns_right_and_positive_pitch_turns_up():
    fwd = np.array([0.0, 0.0, 1.0])
    assert (rot_y(np.deg2rad(10)) @ fwd)[0] > 0  # +x is right
    assert (rot_x(np.deg2rad(10)) @ fwd)[1] < 0  # -y is up
    yaw, pitch = yaw_pitch_from_rotmat(rotmat_from_yaw_pitch(np.deg2rad(30), np.deg2rad(-20)))
    assert np.rad2deg(yaw) == pytest.approx(30) and np.rad2deg(pitch) == pytest.approx(-20)


def test_se3_inverse_and_geodesic(rng):
    R = rot_y(0.3) @ rot_x(-0.2)
    T = se3(R, rng.normal(size=3))
    assert np.allclose(w2c_from_c2w(T) @ T, np.eye(4), atol=1e-12)
    assert np.rad2deg(geodesic_angle(np.eye(3), rot_y(np.deg2rad(37)))) == pytest.approx(37)
    mid = slerp_rotations(np.eye(3), rot_y(np.deg2rad(40)), np.array([0.0, 0.5, 1.0]))
    assert np.rad2deg(geodesic_angle(np.eye(3), mid[1])) == pytest.approx(20)
    assert np.array_equal(mid[2], rot_y(np.deg2rad(40)))


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("n", NATIVE_COUNTS)
def test_phases_tile_frames_and_revisits_return(name, n):
    p = _build(name, n)
    spans = list(p.phases.values())
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert sum(b - a for a, b in spans) == n
    assert next(iter(p.phases)) == "V" and list(p.phases)[-1] == "H"
    for a, b in p.revisit_windows():
        assert np.abs(p.c2w[b - 1] - np.eye(4)).max() < 1e-9  # each revisit ends on the start pose
    assert np.array_equal(p.c2w[0], np.eye(4))
    assert np.abs(p.c2w[-1] - np.eye(4)).max() < 1e-9


@pytest.mark.parametrize("name", ["lrlr", "lrlrlr", "lrud"])
def test_rotation_monotone_with_documented_sign_and_no_translation(name):
    p = _build(name)
    yaw, pitch = p.yaw_pitch_deg()
    assert np.abs(p.c2w[:, :3, 3]).max() == 0.0
    for k, direction in enumerate(SPECS[name].cycles, start=1):
        d0, d1 = p.phases[f"D{k}"]
        r0, r1 = p.phases[f"R{k}"]
        ang = yaw if direction in ("left", "right") else pitch
        sign = {"left": -1, "right": 1, "up": 1, "down": -1}[direction]
        dep, ret = sign * ang[d0:d1], sign * ang[r0:r1]
        assert np.all(np.diff(dep) >= -1e-9) and dep[-1] > 30  # moving away, past the 30 deg rule
        assert np.all(np.diff(ret) <= 1e-9) and abs(ret[-1]) < 1e-9  # coming back to the start


def test_lrud_second_cycle_is_pitch_up():
    p = _build("lrud")
    yaw, pitch = p.yaw_pitch_deg()
    a, b = p.phases["D2"]
    assert pitch[a:b].max() == pytest.approx(60.0) and np.abs(yaw[a:b]).max() < 1e-9


def test_square_closes_keeps_orientation_and_has_legs():
    p = _build("square")
    assert np.abs(p.c2w[:, :3, :3] - np.eye(3)).max() == 0.0
    legs = [s for s in p.segments if s.kind == "move"]
    assert [s.label for s in legs] == ["F", "R", "B", "L"]
    t = p.c2w[:, :3, 3]
    ends = [t[s.end - 1] for s in legs]
    assert np.allclose(ends[0], [0, 0, 1], atol=0.02) and np.allclose(ends[1], [1, 0, 1], atol=0.02)
    assert np.allclose(ends[2], [1, 0, 0], atol=0.02) and np.allclose(ends[3], [0, 0, 0], atol=0.02)
    assert np.array_equal(t[legs[3].end], [0, 0, 0])  # the revisit hold sits exactly on the start
    assert np.abs(t[:, 1]).max() == 0.0  # no vertical motion


#: The message of each feasibility rule, so a test knows which rule fired (two rules name the same field).
QUALIFICATION = "the paper's qualification rule"
CENTRE_IN_FRAME = "keeps the initial view's centre in frame"


@pytest.mark.parametrize(
    "given, field, rule",
    [
        ({"yaw_deg": 10.0}, "yaw_deg", QUALIFICATION),  # below 30 deg (and in frame)
        ({"yaw_deg": 29.9}, "yaw_deg", QUALIFICATION),
        ({"yaw_deg": 180.0}, "yaw_deg", QUALIFICATION),  # < 180 deg
        ({"cycles": ["up"], "pitch_deg": 95.0}, "pitch_deg", "view would flip over"),
        ({"cycles": ["up"], "pitch_deg": 90.5}, "pitch_deg", "view would flip over"),
        ({"cycles": ["sideways"]}, "cycles", "unknown direction"),
        ({"cycles": []}, "cycles", "empty"),
        ({"kind": "square", "side": 0.0}, "side", "must be > 0"),
        ({"kind": "square", "side": float("nan")}, "side", "must be > 0"),
        ({"kind": "spiral"}, "kind", "use 'rotation' or 'square'"),
    ],
)
def test_impossible_parameters_name_the_field_and_the_rule(given, field, rule):
    """A word the spec's types refuse when it is read (kind, a direction), a rule when the path is built."""
    with pytest.raises(TrajectoryError, match=field) as exc:
        build_path(TrajectorySpec.from_dict({"name": "x", **given}), 493, 16, intrinsics_from_fov(60, 832, 480), 480,
                   832)
    assert rule in str(exc.value)


@pytest.mark.parametrize("amp, ok", [(30.0, True), (29.999, False), (179.9, True)])
def test_the_30_degree_qualification_rule_is_inclusive(amp, ok):
    """>= 30 deg qualifies (appendix G.1). The field of view is narrow (40 deg) so only this rule can fire."""
    K = intrinsics_from_fov(40.0, 832, 480)
    spec = TrajectorySpec(name="x", cycles=("right",), yaw_deg=amp)
    if ok:
        assert build_path(spec, 193, 16, K, 480, 832).yaw_pitch_deg()[0].max() == pytest.approx(amp)
    else:
        with pytest.raises(TrajectoryError, match=QUALIFICATION):
            build_path(spec, 193, 16, K, 480, 832)


@pytest.mark.parametrize("axis", ["yaw", "pitch"])
def test_a_departure_must_take_the_view_centre_out_of_frame(axis):
    """Amplitude <= half the field of view keeps frame 0's centre in view: refused with its own message; just above
    it is fine. Horizontal fov 100 deg -> yaw must exceed 50; the vertical fov (69 deg here) -> pitch > 34.5."""
    K = intrinsics_from_fov(100.0, 832, 480)
    hfov, vfov = fov_from_intrinsics(K, 832, 480)
    half = (hfov if axis == "yaw" else vfov) / 2
    cycles = ("left",) if axis == "yaw" else ("up",)
    assert half > 30.0
    low = {"yaw_deg": half, "pitch_deg": half}
    with pytest.raises(TrajectoryError, match=CENTRE_IN_FRAME):
        build_path(TrajectorySpec(name="x", cycles=cycles, **low), 193, 16, K, 480, 832)
    high = {k: v + 0.01 for k, v in low.items()}
    build_path(TrajectorySpec(name="x", cycles=cycles, **high), 193, 16, K, 480, 832)
    # check_fov=False (imported videos) skips only this rule, never the qualification rule
    p = build_path(TrajectorySpec(name="x", cycles=cycles, **low), 193, 16, K, 480, 832, check_fov=False)
    assert p.params["hfov_deg"] is None and p.params["vfov_deg"] is None
    with pytest.raises(TrajectoryError, match=QUALIFICATION):
        build_path(TrajectorySpec(name="x", cycles=cycles, yaw_deg=20.0, pitch_deg=20.0), 193, 16, K, 480, 832,
                   check_fov=False)


def test_the_vertical_field_of_view_comes_from_fy():
    """Non-square pixels: fy != fx. The vertical fov (and so the pitch rule) uses fy and the height."""
    K = np.array([[400.0, 0.0, 416.0], [0.0, 200.0, 240.0], [0.0, 0.0, 1.0]])
    hfov, vfov = fov_from_intrinsics(K, 832, 480)
    assert hfov == pytest.approx(np.degrees(2 * np.arctan(416 / 400)))
    assert vfov == pytest.approx(np.degrees(2 * np.arctan(240 / 200)))  # 100.4 deg; from fx it would be 61.9
    # pitch 55 deg is above half the fx-based value (31 deg) but below half the true vertical fov (50.2 deg)
    with pytest.raises(TrajectoryError, match=CENTRE_IN_FRAME):
        build_path(TrajectorySpec(name="x", cycles=("up",), pitch_deg=45.0), 193, 16, K, 480, 832)
    p = build_path(TrajectorySpec(name="x", cycles=("up",), pitch_deg=55.0), 193, 16, K, 480, 832)
    assert p.params["vfov_deg"] == pytest.approx(vfov) and p.params["hfov_deg"] == pytest.approx(hfov)
    # the yaw rule on the same K uses fx: half of 92.2 deg is 46.1
    with pytest.raises(TrajectoryError, match=CENTRE_IN_FRAME):
        build_path(TrajectorySpec(name="x", cycles=("left",), yaw_deg=46.0), 193, 16, K, 480, 832)
    build_path(TrajectorySpec(name="x", cycles=("left",), yaw_deg=46.2), 193, 16, K, 480, 832)


def test_only_the_axes_a_trajectory_uses_are_checked():
    """LRLR never pitches: an impossible pitch amplitude does not matter to it (and vice versa)."""
    K = intrinsics_from_fov(60, 832, 480)
    build_path(TrajectorySpec(name="x", cycles=("left", "left"), pitch_deg=5.0), 193, 16, K, 480, 832)
    build_path(TrajectorySpec(name="x", cycles=("up",), yaw_deg=5.0), 193, 16, K, 480, 832)


EQUAL = Timing(initial_hold=1.0, move=1.0, away_hold=1.0, revisit_hold=1.0, final_hold=1.0)


def test_minimum_frames_is_two_per_segment():
    """LRLR has 10 segments: 20 frames is the least it accepts (equal weights give every segment 2 frames); 19 is
    refused by the frame-count rule, naming the minimum."""
    spec = TrajectorySpec(name="x", cycles=("left", "left"), timing=EQUAL)
    p = build_path(spec, 20, 16, intrinsics_from_fov(60, 832, 480), 480, 832, check_fov=False)
    assert [s.end - s.start for s in p.segments] == [2] * 10
    with pytest.raises(TrajectoryError, match="at least 20 frames"):
        build_path(spec, 19, 16, intrinsics_from_fov(60, 832, 480), 480, 832, check_fov=False)


def test_a_segment_without_frames_is_named():
    spec = TrajectorySpec(name="x", cycles=("left", "left"),
                          timing=Timing(initial_hold=1.0, move=1.0, away_hold=0.001, revisit_hold=1.0, final_hold=1.0))
    with pytest.raises(TrajectoryError, match="D1/hold"):
        build_path(spec, 40, 16, intrinsics_from_fov(60, 832, 480), 480, 832)


@pytest.mark.parametrize("bad", [{"move": 0.0}, {"away_hold": -0.1}, {"final_hold": float("inf")},
                                 {"initial_hold": float("nan")}])
def test_timing_weights_must_be_finite_non_negative_and_moves_positive(bad):
    spec = TrajectorySpec(name="x", timing=Timing(**bad))
    with pytest.raises(TrajectoryError, match=f"timing.{next(iter(bad))}|timing.move"):
        build_path(spec, 193, 16, intrinsics_from_fov(60, 832, 480), 480, 832)


def test_zero_weight_segments_are_left_out():
    """A hold of weight 0 has no segment (and so needs no frames): H disappears from the phases."""
    spec = TrajectorySpec(name="x", cycles=("left",), timing=Timing(final_hold=0.0, away_hold=0.0))
    p = build_path(spec, 97, 16, intrinsics_from_fov(60, 832, 480), 480, 832)
    assert list(p.phases) == ["V", "D1", "R1"] and [s.label for s in p.segments] == ["hold", "L", "R", "hold"]
    assert p.phases["R1"][1] == 97 and np.abs(p.c2w[-1] - np.eye(4)).max() < 1e-9


def test_too_few_frames_is_an_error():
    with pytest.raises(TrajectoryError, match="num_frames"):
        _build("lrlr", n=9)


def test_unknown_spec_field_fails():
    with pytest.raises(TrajectoryError, match="yaw_degs"):
        TrajectorySpec.from_dict({"name": "x", "yaw_degs": 3})


def test_latent_resampling_matches_linspace_anchors():
    p = _build("lrlr", 493)
    n_lat = latents_for_frames(493)
    assert n_lat == 124
    a = np.linspace(0, 492, n_lat)  # LingBot's upstream targets: 4i exactly when N = 4k+1
    assert np.array_equal(a, latent_anchor_frames(n_lat)) and latent_anchor_frames(3, 8).tolist() == [0, 8, 16]
    lat = resample_c2w(p.c2w, a)
    assert np.array_equal(lat, p.c2w[::4]) and np.array_equal(latent_poses(p.c2w), lat)
    assert len(latent_poses(p.c2w[:492])) == 123  # a partial last group has no latent of its own
    # fractional anchors interpolate: halfway between frames 100 and 101
    mid = resample_c2w(p.c2w, np.array([100.5]))[0]
    ang = geodesic_angle(p.c2w[100, :3, :3], mid[:3, :3])
    full = geodesic_angle(p.c2w[100, :3, :3], p.c2w[101, :3, :3])
    assert ang == pytest.approx(full / 2, rel=1e-6)
    assert list(first_of_group_anchors(4)) == [0, 1, 5, 9]


def test_save_load_roundtrip(tmp_path):
    p = _build("lrud", 505)
    p.save(tmp_path / "camera.npz")
    q = load_path(tmp_path / "camera.npz")
    assert np.array_equal(p.c2w, q.c2w) and np.array_equal(p.K, q.K)
    assert q.phases == p.phases and q.fps == p.fps and q.segments == p.segments
    assert q.spec_hash() == p.spec_hash()


def test_preview_png(tmp_path):
    from trajectories.preview import preview_path

    p = _build("square")
    out = preview_path(p, tmp_path / "p.png", overlays=[("shifted", p.c2w)])
    assert out.stat().st_size > 10_000


def test_resize_crop_intrinsics_match_image_transform():
    from harness.imaging import resize_cover_crop

    img = np.zeros((400, 600, 3), np.uint8)
    img[200, 300] = 255  # the principal point pixel of a centred K
    K = intrinsics_from_fov(60, 600, 400)
    K2 = intrinsics_for_resize_crop(K, (400, 600), (480, 832))
    out = resize_cover_crop(img, (480, 832))
    assert out.shape == (480, 832, 3)
    assert K2[0, 2] == pytest.approx(416.0) and K2[1, 2] == pytest.approx(240.0)
    assert K2[0, 0] == pytest.approx(K[0, 0] * 832 / 600)


# -- conventions, written out ----------------------------------------------------------------------------------------


def test_pixel_rays_go_through_pixel_centres_with_the_actual_intrinsics():
    K = np.array([[120.0, 0.0, 37.3], [0.0, 80.0, 21.9], [0.0, 0.0, 1.0]])  # non-square pixels, off-centre
    from trajectories.conventions import pixel_rays

    for offset in (0.5, 0.0):
        d = pixel_rays(K, 5, 7, offset)
        assert d.shape == (5, 7, 3) and np.allclose(np.linalg.norm(d, axis=-1), 1.0)
        for v, u in ((0, 0), (4, 6), (2, 3)):
            ray = np.array([(u + offset - 37.3) / 120.0, (v + offset - 21.9) / 80.0, 1.0])
            assert np.allclose(d[v, u], ray / np.linalg.norm(ray))


def test_rot_z_rolls_and_geodesic_angle_measures_every_axis():
    from scipy.spatial.transform import Rotation

    from trajectories.conventions import rot_z

    for a in (0.3, -1.2, 2.9):
        assert np.allclose(rot_z(a), Rotation.from_euler("z", a).as_matrix())
        for f in (rot_x, rot_y, rot_z):
            assert geodesic_angle(np.eye(3), f(a)) == pytest.approx(abs(a))
    assert rot_z(np.array([0.1, 0.2])).shape == (2, 3, 3)
    R = Rotation.from_rotvec([0.4, -2.0, 1.1]).as_matrix()
    assert geodesic_angle(R) == pytest.approx(np.linalg.norm([0.4, -2.0, 1.1]))


def test_relative_and_framewise_poses():
    from trajectories.conventions import framewise_from_relative, relative_to_first

    rng = np.random.default_rng(2)
    P = se3(np.stack([rot_y(a) @ rot_x(b) for a, b in rng.normal(0, 0.5, (5, 2))]), rng.normal(0, 1, (5, 3)))
    rel = relative_to_first(P)
    assert np.allclose(rel[0], np.eye(4)) and np.allclose(P[0] @ rel, P)
    f = framewise_from_relative(rel)
    assert np.array_equal(f[0], np.eye(4))
    for i in range(1, 5):
        assert np.allclose(f[i], np.linalg.inv(rel[i - 1]) @ rel[i])


def test_slerp_of_equal_rotations_and_fov_intrinsics():
    R = rot_y(0.4)
    same = slerp_rotations(R, R, np.array([0.0, 0.3, 1.0]))
    assert same.shape == (3, 3, 3) and all(np.array_equal(x, R) for x in same)
    K = intrinsics_from_fov(90.0, 200, 100)
    assert np.allclose(K, [[100.0, 0.0, 100.0], [0.0, 100.0, 50.0], [0.0, 0.0, 1.0]])


def test_resize_crop_intrinsics_follow_a_point_through_the_image_transform():
    """Project a 3D point with K on the source, apply the cover-resize (scale s) and centre crop to the pixel:
    K' must project it to the same pixel, for an off-centre K and a crop along either axis."""
    K = np.array([[300.0, 0.0, 210.0], [0.0, 280.0, 130.0], [0.0, 0.0, 1.0]])
    p = np.array([0.3, -0.2, 2.0])
    for src, dst in (((300, 600), (480, 832)), ((600, 300), (480, 832)), ((400, 400), (100, 300))):
        (hs, ws), (hd, wd) = src, dst
        s = max(hd / hs, wd / ws)
        u, v, _ = K @ p / p[2]
        expected = (u * s - (ws * s - wd) / 2.0, v * s - (hs * s - hd) / 2.0)
        u2, v2, _ = intrinsics_for_resize_crop(K, src, dst) @ p / p[2]
        assert (u2, v2) == pytest.approx(expected)


# -- builders: the ease, the spec parser, the last segment -----------------------------------------------------------


def _ease_expected(spec, n):
    """Every frame's yaw written out from the docs: tau_i = i / (n-1); segment bounds = cumulative weights; a move
    follows the cosine ease 0.5 - 0.5 cos(pi s) of its own progress s."""
    t = spec.timing
    segs = [("hold", t.initial_hold, 0.0, 0.0)]
    amp = -spec.yaw_deg  # left
    for _ in spec.cycles:
        segs += [("move", t.move, 0.0, amp), ("hold", t.away_hold, amp, amp), ("move", t.move, amp, 0.0),
                 ("hold", t.revisit_hold, 0.0, 0.0)]
    segs += [("hold", t.final_hold, 0.0, 0.0)]
    segs = [x for x in segs if x[1] > 0]
    b = np.concatenate([[0.0], np.cumsum([x[1] for x in segs])]) / sum(x[1] for x in segs)
    out = []
    for i in range(n):
        tau = i / (n - 1)
        j = min(int(np.searchsorted(b, tau, side="right")) - 1, len(segs) - 1)
        s = (tau - b[j]) / (b[j + 1] - b[j])
        _, _, a0, a1 = segs[j]
        out.append(a0 + (a1 - a0) * (0.5 - 0.5 * np.cos(np.pi * s)))
    return np.array(out)


@pytest.mark.parametrize("timing", [Timing(), Timing(initial_hold=0.0, final_hold=0.0, revisit_hold=0.0),
                                    Timing(away_hold=0.0, move=0.3)])
def test_moves_follow_the_cosine_ease_on_normalised_time(timing):
    spec = TrajectorySpec(name="x", cycles=("left", "left"), timing=timing)
    p = build_path(spec, 97, 16, intrinsics_from_fov(60, 832, 480), 480, 832)
    yaw, _ = p.yaw_pitch_deg()
    assert np.allclose(yaw, _ease_expected(spec, 97), atol=1e-9)
    assert np.abs(p.c2w[-1] - np.eye(4)).max() < 1e-9  # even when the last segment is a move


def test_spec_from_dict_drops_the_description_and_takes_no_timing():
    spec = TrajectorySpec.from_dict({"name": "x", "description": "a comment", "timing": None, "cycles": ["up"]})
    assert spec.timing == Timing() and spec.cycles == ("up",)
    assert TrajectorySpec.from_dict(spec.to_dict()) == spec and spec.to_dict()["cycles"] == ["up"]
    with pytest.raises(TrajectoryError, match="trajectory.timing.hold: unknown field"):
        TrajectorySpec.from_dict({"name": "x", "timing": {"hold": 1.0}})


def test_an_infinite_square_is_refused():
    with pytest.raises(TrajectoryError, match="side"):
        build_path(TrajectorySpec(name="x", kind="square", side=float("inf")), 97, 16,
                   intrinsics_from_fov(60, 832, 480), 480, 832)


def test_unknown_field_messages_name_the_first_key_and_suggest_only_close_ones():
    from harness.sections import unknown_key_message as unknown_field_message

    msg = unknown_field_message("trajectory", {"zzz", "yaw_degs"}, ["yaw_deg", "name"])
    assert msg.startswith("trajectory.yaw_degs: unknown field; did you mean 'yaw_deg'?")
    assert "allowed: ['name', 'yaw_deg']" in msg
    far = unknown_field_message("s", {"qqqq"}, ["name"], what="the model")
    assert far == "s.qqqq: unknown field of the model; allowed: ['name']"


def test_camera_path_counts_hashes_and_saves(tmp_path):
    import dataclasses

    p = _build("lrlr", 97)
    assert p.num_frames == 97 and p.num_revisits == 2
    h = p.spec_hash()
    assert len(h) == 16 and h == _build("lrlr", 97).spec_hash()
    c2w = p.c2w.copy()
    c2w[10, 0, 3] += 3e-13  # float noise below 1e-12: the same path
    assert dataclasses.replace(p, c2w=c2w).spec_hash() == h
    c2w[10, 0, 3] += 1e-9
    assert dataclasses.replace(p, c2w=c2w).spec_hash() != h
    K = p.K.copy()
    K[0, 0] += 3e-10
    assert dataclasses.replace(p, K=K).spec_hash() == h
    K[0, 0] += 1e-6
    assert dataclasses.replace(p, K=K).spec_hash() != h
    assert dataclasses.replace(p, fps=24.0).spec_hash() != h  # the metadata counts too
    deep = tmp_path / "a" / "b" / "camera.npz"
    p.save(deep)  # creates its folder
    q = load_path(deep)
    assert q.spec_hash() == h and sorted(x.name for x in deep.parent.iterdir()) == ["camera.npz"]
    shuffled = dataclasses.replace(p, params=dict(reversed(list(p.params.items()))))
    shuffled.save(tmp_path / "s.npz")
    assert (tmp_path / "s.npz").read_bytes() == deep.read_bytes()  # keys sorted: the same bytes


def test_load_path_refuses_pickles(tmp_path):
    """An object array is refused even where its content would convert (a c2w of Python floats): the camera file
    is read with allow_pickle=False, and the error says so (the folder's name holds no hint of it)."""
    from trajectories import TrajectoryError

    d = tmp_path / "x"
    d.mkdir()
    np.savez(d / "evil.npz", c2w=np.zeros((2, 4, 4)), K=np.eye(3), fps=np.float64(16), hw=np.array([4, 4]),
             meta_json=np.array([{"name": "x"}], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle=False"):
        load_path(d / "evil.npz")
    meta = {"name": "x", "phases": {"V": [0, 2]}}
    np.savez(d / "floats.npz", c2w=np.tile(np.eye(4), (2, 1, 1)).astype(object), K=np.eye(3), fps=np.float64(16),
             hw=np.array([4, 4]), meta_json=np.array(json.dumps(meta)))
    with pytest.raises(TrajectoryError, match="allow_pickle=False"):
        load_path(d / "floats.npz")


def test_the_camera_file_temp_follows_the_harness_temp_name_rule(tmp_path):
    """The temporary file of a camera save carries this host's 6-digit tag and pid as harness.io names them (so a
    dead writer's leftover is found), and is removed when the write fails."""
    import os

    from harness import io as hio
    from trajectories.path import atomic_target

    target = tmp_path / "camera.npz"
    with atomic_target(target) as tmp:
        assert hio.temp_owner(tmp.name) == (hio.host_tag(), os.getpid())
        tmp.write_bytes(b"x")
    assert target.read_bytes() == b"x" and os.listdir(tmp_path) == ["camera.npz"]
    with pytest.raises(RuntimeError), atomic_target(tmp_path / "other.npz") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed mid-write")
    assert os.listdir(tmp_path) == ["camera.npz"]


def test_phase_labels_without_a_number_have_index_0():
    from trajectories.phases import Phase, PhaseKind

    assert Phase.parse("V") == Phase(PhaseKind.VIEW, 0) and Phase.parse("H").index == 0
    assert Phase.parse("R12").index == 12 and str(Phase.parse("D3")) == "D3"


def test_resample_interpolates_fractional_anchors_and_refuses_out_of_range_ones():
    from scipy.spatial.transform import Rotation, Slerp

    rng = np.random.default_rng(4)
    P = se3(Rotation.from_rotvec(rng.normal(0, 0.4, (6, 3))).as_matrix(), rng.normal(0, 1, (6, 3)))
    a = np.array([0.0, 0.25, 2.5, 4.999999999999, 5.0])
    out = resample_c2w(P, a)
    slerp = Slerp(np.arange(6), Rotation.from_matrix(P[:, :3, :3]))
    assert np.allclose(out[:, :3, :3], slerp(np.minimum(a, 5.0)).as_matrix())
    i0 = np.floor(a).astype(int).clip(0, 4)
    f = a - i0
    lin = (1 - f)[:, None] * P[i0, :3, 3] + f[:, None] * P[np.minimum(i0 + 1, 5), :3, 3]
    assert np.allclose(out[:, :3, 3], lin)
    assert np.array_equal(out[0], P[0]) and np.array_equal(out[-1], P[5])  # integer anchors: the poses exactly
    assert resample_c2w(P, np.array([])).shape == (0, 4, 4)
    assert np.allclose(resample_c2w(P, np.array([5.0 + 1e-10]))[0], P[5])  # within rounding of the end
    for bad in ([-0.1], [5.01], [1.0, 7.0]):
        with pytest.raises(ValueError, match="anchors must lie"):
            resample_c2w(P, np.array(bad))


def test_the_defaults_are_the_ones_docs_trajectories_md_explains():
    """The defaults table of docs/trajectories.md is the record (the timing weights decide every path and golden)."""
    import re

    from tests.support import ROOT

    doc = (ROOT / "docs" / "trajectories.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| timing |"))
    w = dict(re.findall(r"(V|move|away hold|revisit hold|H) (\d\.\d+)", row))
    assert Timing() == Timing(initial_hold=float(w["V"]), move=float(w["move"]), away_hold=float(w["away hold"]),
                              revisit_hold=float(w["revisit hold"]), final_hold=float(w["H"]))
    for name in ("yaw_deg", "pitch_deg", "side"):
        value = float(re.search(rf"^\| `{name}` \| ([\d.]+)", doc, re.MULTILINE).group(1))
        assert getattr(TrajectorySpec(name="x"), name) == value
    assert TrajectorySpec(name="x").cycles == ("left", "left") and TrajectorySpec(name="x").kind == "rotation"


# -- edges the mutation run found unpinned --------------------------------------------------------------------------

def test_resize_crop_keeps_the_homogeneous_row_and_pixel_rays_sample_centres_by_default():
    from trajectories.conventions import pixel_rays

    K = intrinsics_from_fov(60.0, 64, 48)
    K2 = intrinsics_for_resize_crop(K, (48, 64), (96, 96))
    assert K2[2].tolist() == [0.0, 0.0, 1.0]
    rays = pixel_rays(K, 48, 64)
    d = np.array([(0.5 - K[0, 2]) / K[0, 0], (0.5 - K[1, 2]) / K[1, 1], 1.0])
    assert np.allclose(rays[0, 0], d / np.linalg.norm(d))


def test_slerp_interpolates_from_an_angle_of_1e_12():
    """Below 1e-12 rad R0 is returned as it is; at 1e-12 the rotation is interpolated."""
    R1 = rot_y(1e-12)
    assert float(geodesic_angle(R1)) == 1e-12
    half = slerp_rotations(np.eye(3), R1, [0.5])[0]
    assert not np.array_equal(half, np.eye(3)) and np.allclose(half, rot_y(0.5e-12), atol=1e-20)
    assert np.array_equal(slerp_rotations(np.eye(3), rot_y(0.9e-12), [0.5])[0], np.eye(3))


def test_resample_range_check_and_snapping_to_input_frames():
    """Anchors must lie in [0, T - 1] (with 1e-9 of slack at the end, which snaps to the last pose exactly); an
    anchor within 1e-12 above an integer position is that pose exactly, from 1e-12 on it is interpolated."""
    from trajectories.resample import resample_c2w

    c2w = se3(np.stack([rot_y(np.radians(10.0 * i)) for i in range(5)]), np.outer(np.arange(5), [1.0, 0, 0]))
    with pytest.raises(ValueError, match=r"anchors must lie in \[0, 4\]"):
        resample_c2w(c2w, [-0.5, 2.0])  # the smallest is checked against 0, whatever the largest
    end = resample_c2w(c2w, [4 + 1e-9, 3 + 1e-13])
    assert np.array_equal(end[0], c2w[4]) and np.array_equal(end[1], c2w[3])
    step = resample_c2w(c2w, [1e-12])[0]
    assert not np.array_equal(step, c2w[0]) and np.allclose(step, c2w[0])


def test_a_phase_made_without_a_number_is_the_parsed_label():
    from trajectories.phases import Phase, PhaseKind

    assert Phase(PhaseKind.VIEW) == Phase.parse("V") and Phase(PhaseKind.HOLD).index == 0
