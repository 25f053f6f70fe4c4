"""Property-based tests of the trajectory builders (docs/trajectories.md): for any feasible direction sequence,
amplitude, timing, frame count and pinhole (square pixels or not), the phases tile the frames, frame 0 is the
start pose exactly, and every revisit ends on the start pose (within 1e-9) after a monotone move back."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trajectories import Timing, TrajectoryError, TrajectorySpec, build_path
from trajectories.conventions import fov_from_intrinsics, geodesic_angle, yaw_pitch_from_rotmat

weights = st.floats(0.01, 1.0)
timings = st.builds(Timing, initial_hold=weights, move=weights, away_hold=st.one_of(st.just(0.0), weights),
                    revisit_hold=weights, final_hold=st.one_of(st.just(0.0), weights))


@st.composite
def pinholes(draw):
    h, w = draw(st.integers(24, 720)), draw(st.integers(24, 1280))
    fx = draw(st.floats(0.2, 2.0)) * w
    fy = fx * draw(st.floats(0.5, 2.0))  # non-square pixels too
    K = np.array([[fx, 0.0, w / 2], [0.0, fy, h / 2], [0.0, 0.0, 1.0]])
    return K, h, w


@st.composite
def rotation_specs(draw):
    cycles = tuple(draw(st.lists(st.sampled_from(["left", "right", "up", "down"]), min_size=1, max_size=3)))
    return TrajectorySpec(name="p", cycles=cycles, yaw_deg=draw(st.floats(30.0, 179.0)),
                          pitch_deg=draw(st.floats(30.0, 89.0)), timing=draw(timings))


def _build(spec, n, cam):
    K, h, w = cam
    try:
        return build_path(spec, n, 16.0, K, h, w)
    except TrajectoryError as exc:
        # infeasible for this field of view or frame count: the builder must say which rule
        assume(False)
        raise AssertionError(exc)  # pragma: no cover


def _tiles(p, n):
    spans = list(p.phases.values())
    assert spans[0][0] == 0 and spans[-1][1] == n and all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    segs = p.segments
    assert segs[0].start == 0 and segs[-1].end == n and all(a.end == b.start for a, b in itertools.pairwise(segs))


@settings(max_examples=60)
@given(spec=rotation_specs(), n=st.integers(40, 600), cam=pinholes())
def test_every_revisit_of_a_rotation_path_ends_on_the_start_pose(spec, n, cam):
    p = _build(spec, n, cam)
    _tiles(p, n)
    assert np.array_equal(p.c2w[0], np.eye(4))
    assert np.abs(p.c2w[:, :3, 3]).max() == 0.0
    wins = p.revisit_windows()
    assert len(wins) == len(spec.cycles) == p.num_revisits
    yaw, pitch = (np.degrees(a) for a in yaw_pitch_from_rotmat(p.c2w[:, :3, :3]))
    for k, (direction, (a, b)) in enumerate(zip(spec.cycles, wins), start=1):
        assert np.abs(p.c2w[b - 1] - np.eye(4)).max() < 1e-9  # back on the start pose
        d0, d1 = p.phases[f"D{k}"]
        axis, amp = (yaw, spec.yaw_deg) if direction in ("left", "right") else (pitch, spec.pitch_deg)
        sign = -1.0 if direction in ("left", "down") else 1.0
        away = sign * axis[d0:d1]
        assert np.all(np.diff(away) >= -1e-9) and np.all(np.diff(sign * axis[a:b]) <= 1e-9)  # monotone
        assert away.max() <= amp + 1e-9
        if spec.timing.away_hold > 0:  # the pause at the far end sits exactly on the amplitude
            assert np.degrees(geodesic_angle(p.c2w[0, :3, :3], p.c2w[d1 - 1, :3, :3])) == pytest.approx(amp, abs=1e-6)
        other = pitch if axis is yaw else yaw
        assert np.abs(other[d0:b]).max() < 1e-9  # one axis per cycle, no roll
    hfov, vfov = fov_from_intrinsics(cam[0], cam[2], cam[1])
    assert p.params["hfov_deg"] == pytest.approx(hfov) and p.params["vfov_deg"] == pytest.approx(vfov)


@settings(max_examples=40)
@given(side=st.floats(0.05, 20.0), timing=timings, n=st.integers(30, 600), cam=pinholes())
def test_the_square_loop_closes_on_the_start_pose_and_keeps_its_orientation(side, timing, n, cam):
    p = _build(TrajectorySpec(name="sq", kind="square", side=side, timing=timing), n, cam)
    _tiles(p, n)
    (_a, b), = p.revisit_windows()
    assert np.abs(p.c2w[b - 1] - np.eye(4)).max() < 1e-9
    assert np.array_equal(p.c2w[:, :3, :3], np.broadcast_to(np.eye(3), p.c2w[:, :3, :3].shape))
    t = p.c2w[:, :3, 3]
    assert t.min() >= -1e-12 and t.max() <= side + 1e-12 and np.abs(t[:, 1]).max() == 0.0
    legs = [s for s in p.segments if s.kind == "move"]
    assert [s.label for s in legs] == list("FRBL")
    assert np.abs(p.c2w[-1] - np.eye(4)).max() < 1e-9


@settings(max_examples=40)
@given(spec=rotation_specs(), cam=pinholes())
def test_a_departure_that_keeps_the_view_centre_in_frame_is_always_refused(spec, cam):
    K, h, w = cam
    hfov, vfov = fov_from_intrinsics(K, w, h)
    used = {("yaw" if c in ("left", "right") else "pitch") for c in spec.cycles}
    too_small = ("yaw" in used and spec.yaw_deg <= hfov / 2) or ("pitch" in used and spec.pitch_deg <= vfov / 2)
    try:
        build_path(spec, 300, 16.0, K, h, w)
        refused = None
    except TrajectoryError as exc:
        refused = str(exc)
    if too_small:
        assert refused is not None and "centre in frame" in refused
    elif refused is not None:
        assert "without frames" in refused or "at least" in refused  # only the frame-count rules remain
