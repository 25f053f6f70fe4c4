"""Every WorldMemBench formula against ground truth we control, with its invariances."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.aggregate import bootstrap_ci, paired_bootstrap, rollout_score
from evaluate.camera import apply_sim3, rpe_rotation, rpe_translation, umeyama_sim3
from evaluate.dynamic import ASPECTS, score_checklist
from evaluate.memory import (
    depth_spearman,
    normalized_silhouette,
    return_frame,
    return_qualification,
    revisit_similarity,
    select_return_frame,
    silhouette_iou,
    silhouette_revisit_score,
    spherical_grid,
    spherical_reconstruction_score,
)
from trajectories import TrajectorySpec, build_path
from trajectories.conventions import intrinsics_from_fov, rot_x, rot_y, rot_z, se3

K = intrinsics_from_fov(60, 160, 96)


def _square():
    return build_path(TrajectorySpec(name="square", kind="square"), 121, 16, K, 96, 160).c2w


def _lrlr():
    return build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), 121, 16, K, 96, 160).c2w


def _noisy(c2w, sigma_deg, sigma_t, seed=0):
    rng = np.random.default_rng(seed)
    out = c2w.copy()
    for i in range(1, len(out)):
        a = np.deg2rad(rng.normal(0, sigma_deg, 3))
        out[i, :3, :3] = out[i, :3, :3] @ rot_x(a[0]) @ rot_y(a[1]) @ rot_z(a[2])
        out[i, :3, 3] += rng.normal(0, sigma_t, 3)
    return out


def test_umeyama_recovers_a_similarity_and_is_reflection_safe(rng):
    src = rng.normal(size=(50, 3))
    R = rot_y(0.7) @ rot_x(-0.3)
    dst = 2.5 * src @ R.T + [1, -2, 3]
    s, Rh, t = umeyama_sim3(src, dst)
    assert s == pytest.approx(2.5) and np.allclose(Rh, R) and np.allclose(t, [1, -2, 3])
    mirrored = src * [1, 1, -1]
    _, Rm, _ = umeyama_sim3(src, mirrored)
    assert np.linalg.det(Rm) == pytest.approx(1.0)


def test_umeyama_is_exact_far_from_the_origin(rng):
    """The cross-covariance uses the centred source only (its columns sum to 0): a target 1e4 units from the origin
    with a spread of 1 is still recovered to 1e-9."""
    src = rng.normal(size=(40, 3))
    R = rot_z(1.1) @ rot_x(0.4)
    offset = np.array([1e4, -2e4, 5e3])
    s, Rh, t = umeyama_sim3(src, 0.8 * src @ R.T + offset)
    assert s == pytest.approx(0.8, abs=1e-9) and np.allclose(Rh, R, atol=1e-9) and np.allclose(t, offset, atol=1e-7)


def test_cosine_to_one_vector_is_the_cosine_matrix_column_and_guards_a_zero_vector(rng):
    from evaluate.memory import cosine_matrix, cosine_to

    rows, ref = rng.normal(size=(5, 7)), rng.normal(size=7)
    got = cosine_to(rows, ref)
    assert got.shape == (5,) and got.dtype == np.float64
    np.testing.assert_allclose(got, cosine_matrix(rows, ref[None])[:, 0], atol=1e-12)
    np.testing.assert_allclose(cosine_to(rows, -2.0 * ref), -got, atol=1e-12)  # scale-free, signed
    assert np.array_equal(cosine_to(rows, np.zeros(7)), np.zeros(5))
    assert np.array_equal(cosine_to(np.zeros((2, 7)), ref), np.zeros(2))


def test_rpe_translation_zero_exact_invariant_to_sim3_and_grows_with_noise(rng):
    tgt = _square()
    assert rpe_translation(tgt, {"e": tgt}) == pytest.approx(0, abs=1e-9)
    est = _noisy(tgt, 0.2, 0.01)
    base = rpe_translation(tgt, {"e": est})
    moved = apply_sim3(est, 3.7, rot_y(1.1) @ rot_x(0.4), np.array([5.0, -1.0, 2.0]))
    assert rpe_translation(tgt, {"e": moved}) == pytest.approx(base, rel=1e-6)
    levels = [rpe_translation(tgt, {"e": _noisy(tgt, 0.0, s)}) for s in (0.001, 0.01, 0.05)]
    assert levels[0] < levels[1] < levels[2]
    both = rpe_translation(tgt, {"a": est, "b": tgt})
    assert both == pytest.approx(base / 2)  # Eq. 2 averages over estimators


def test_rpe_rotation_zero_exact_invariant_to_global_rotation_and_grows_with_noise():
    tgt = _lrlr()
    assert rpe_rotation(tgt, tgt) == pytest.approx(0, abs=1e-12)
    est = _noisy(tgt, 0.5, 0.0)
    base = rpe_rotation(tgt, est)
    G = se3(rot_z(0.3) @ rot_y(-1.2))
    assert rpe_rotation(tgt, G[None] @ est) == pytest.approx(base, rel=1e-9)
    levels = [rpe_rotation(tgt, _noisy(tgt, s, 0)) for s in (0.05, 0.5, 2.0)]
    assert levels[0] < levels[1] < levels[2]
    assert np.isnan(rpe_rotation(_square(), _square()))  # the target never rotates


def test_revisit_similarity():
    ref = np.array([[1.0, 0.0], [0.0, 1.0]])
    rev = np.array([[1.0, 0.0], [-1.0, 0.0], [1.0, 1.0]])
    assert revisit_similarity(ref, rev) == pytest.approx((1 + 0 + np.sqrt(0.5)) / 3)  # negatives clip to 0
    assert revisit_similarity(ref, np.zeros((0, 2))) == 0.0


def test_silhouette_iou_invariant_to_translation_and_scale():
    m = np.zeros((100, 100), bool)
    m[20:40, 30:70] = True
    m[40:60, 30:40] = True  # an L shape
    moved = np.roll(np.roll(m, 25, 0), -20, 1)
    big = np.kron(m[10:70, 20:80], np.ones((2, 2), bool))
    assert silhouette_iou(m, moved) == pytest.approx(1.0)
    assert silhouette_iou(m, big) > 0.97
    other = np.zeros_like(m)
    other[20:60, 30:70] = True
    assert silhouette_iou(m, other) < 0.8
    assert normalized_silhouette(np.zeros((5, 5), bool)).sum() == 0
    assert silhouette_revisit_score([m], [moved, other]) == pytest.approx((1 + silhouette_iou(m, other)) / 2)
    assert silhouette_revisit_score([m], []) == 0.0


def test_depth_spearman_rank_invariance(rng):
    d = rng.uniform(1, 10, (40, 60))
    assert depth_spearman(d, d, stride=1) == pytest.approx(1.0)
    assert depth_spearman(d, 3 * np.log(d) + 7, stride=1) == pytest.approx(1.0)
    assert depth_spearman(d, 1 / d, stride=1) == pytest.approx(-1.0)
    assert abs(depth_spearman(d, rng.uniform(1, 10, d.shape), stride=1)) < 0.1


def test_spherical_score_exact_scale_invariant_and_penalises_missing(rng):
    from harness.scene import Room

    d = Room().depth_map(np.eye(4), K, 96, 160)
    H = spherical_grid(d, K, np.eye(4))
    assert spherical_reconstruction_score(H, H) == pytest.approx(1.0)
    assert spherical_reconstruction_score(H, spherical_grid(3.3 * d, K, np.eye(4))) == pytest.approx(1.0)
    holed = d.copy()
    holed[:, :80] = np.nan
    part = spherical_reconstruction_score(H, spherical_grid(holed, K, np.eye(4)))
    assert 0.3 < part < 0.7
    bumpy = d * (1 + 0.3 * rng.random(d.shape))
    assert spherical_reconstruction_score(H, spherical_grid(bumpy, K, np.eye(4))) < 0.99
    turned = se3(rot_y(np.deg2rad(20)))
    d2 = Room().depth_map(turned, K, 96, 160)
    s = spherical_reconstruction_score(H, spherical_grid(d2, K, turned))
    assert 0.3 < s < 1.0  # same surfaces where the views overlap, new bins elsewhere


def test_select_return_frame():
    c2w = se3(rot_y(np.deg2rad([30, 20, 5, 1, 3, 10])))
    assert select_return_frame([1, 2, 3, 4, 5], c2w, np.eye(4)) == 3


def test_return_frame_by_orientation_takes_a_direct_angle_else_the_chained_estimate():
    c2w = se3(rot_y(np.deg2rad([0, 30, 20, 5, 1, 3, 10])))
    assert return_frame([2, 3, 4, 5], c2w, 0) == (4, pytest.approx(1.0))  # the estimate's closest, its angle
    assert return_frame([2, 3, 4, 5], c2w, 0, direct=(5, 0.25)) == (5, 0.25)  # the direct measure decides
    assert return_frame([2, 3, 4, 5], c2w, 0, direct=(5, None)) == (4, pytest.approx(1.0))  # no angle: not a pick
    assert return_frame([1, 2], c2w, 3) == (2, pytest.approx(15.0))  # against another reference frame


def test_return_frame_by_position_takes_the_nearest_centre_and_the_estimates_angle():
    c2w = se3(rot_y(np.deg2rad([0, 40, 12, 25])), np.array([[0, 0, 0], [3, 0, 0], [0.5, 0, 0], [0.1, 0, 0]]))
    assert return_frame([1, 2, 3], c2w, 0, by_position=True) == (3, pytest.approx(25.0))
    assert return_frame([1, 2, 3], c2w, 0, direct=(2, None), by_position=True) == (2, pytest.approx(12.0))


def test_return_qualification_departure_is_the_largest_rotation_over_its_frames():
    c2w = se3(rot_y(np.deg2rad([0, 50, 80, 2, 60, 7])))
    frames, qual = return_qualification(c2w, [[3], [5]], [[1, 2], []], [None, (5, 0.5)], by_position=False)
    assert frames == [3, 5]
    assert qual[0] == {"departure_deg": pytest.approx(80.0), "return_error_deg": pytest.approx(2.0), "return_frame": 3}
    assert qual[1] == {"departure_deg": 0.0, "return_error_deg": 0.5, "return_frame": 5}  # no departure frames: 0


def _refs():
    return [{"aspect": a, "answer": ans} for a in ASPECTS for ans in ("yes", "no")]


def test_checklist_gate_and_aspects():
    refs = _refs()
    good = [r["answer"] for r in refs]
    s = score_checklist(True, good, refs)
    assert s["overall"] == 1.0 and all(s[a] == 1.0 for a in ASPECTS)
    assert score_checklist(False, good, refs)["overall"] == 0.0  # gate: not started -> all eight 0
    half = list(good)
    half[0] = "no"  # one wrong answer in return_progress
    s = score_checklist(True, half, refs)
    assert s["return_progress"] == 0.5 and s["overall"] == pytest.approx(7 / 8)
    with pytest.raises(ValueError):
        score_checklist(True, good[:7], refs[:7])


def test_rollout_score_counts_every_prescribed_revisit():
    assert rollout_score({"a": [1.0, None, 0.5], "b": [1.0, 1.0, 1.0]}, 3) == pytest.approx((0.5 + 1.0) / 2)
    assert rollout_score({"a": [1.0]}, 3) == pytest.approx(1 / 3)  # missing revisits score 0


def test_bootstrap_and_paired():
    ci = bootstrap_ci([0.5, 0.6, 0.7, 0.8], n_boot=500)
    assert ci["n"] == 4 and ci["mean"] == pytest.approx(0.65)
    p = paired_bootstrap([0.9, 0.8, 0.85], [0.5, 0.4, 0.45], n_boot=500)
    assert p["diff"] == pytest.approx(0.4) and p["lo"] > 0 and p["p_le_0"] == 0.0


def test_protocol_windows_and_sampling():
    from evaluate.protocol import (
        departure_windows,
        judge_frames,
        quality_frames,
        revisit_windows,
        window_frames,
    )

    p = build_path(TrajectorySpec(name="lrlrlr", cycles=("left",) * 3), 551, 16, K, 96, 160)
    assert revisit_windows(p.phases) == [p.phases["R1"], p.phases["R2"], p.phases["R3"]]
    assert len(departure_windows(p.phases)) == 3
    assert quality_frames(493)[:3] == [0, 4, 8] and quality_frames(493)[-1] == 492
    j = judge_frames(493)
    assert j[0] == 0 and j[-1] == 492 and j[1] - j[0] == 8
    assert judge_frames(497)[-1] == 496 and judge_frames(497)[-2] == 488
    a, b = p.phases["R1"]
    w = window_frames((a, b), 4)
    assert w[0] == a and w[-1] == b - 1 and all(a <= f < b for f in w)


@pytest.mark.parametrize("name,spec,phases", [
    ("lrlr", {"cycles": ("left", "left")}, ["R1", "D2", "R2"]),
    ("lrlrlr", {"cycles": ("left",) * 3}, ["R1", "D2", "R2", "D3", "R3"]),
    ("lrud", {"cycles": ("left", "up")}, ["R1"]),
    ("square", {"kind": "square"}, []),
])
def test_departure_sweep_windows_are_the_later_frames_that_look_back_at_the_first_departure(name, spec, phases):
    """Every later phase that looks back at D1's views (>= 30 deg from frame 0, within 5 deg of some D1 frame) is a
    window, in time order, holding exactly those frames; the reference is all of D1. Checked frame by frame with
    scipy's rotation distance, not the project's geodesic helper."""
    from scipy.spatial.transform import Rotation

    from evaluate.protocol import departure_sweep_windows

    p = build_path(TrajectorySpec(name=name, **spec), 289, 16, K, 96, 160)
    ref, windows = departure_sweep_windows(p.c2w, p.phases)
    rot = Rotation.from_matrix(p.c2w[:, :3, :3])
    d1 = list(range(*p.phases["D1"]))

    def looks_back(f: int) -> bool:
        return ((rot[0].inv() * rot[f]).magnitude() >= np.radians(30)
                and (rot[d1].inv() * rot[f]).magnitude().min() <= np.radians(5))

    expected = [[f for f in range(*p.phases[ph]) if looks_back(f)] for ph in phases]
    assert windows == expected and all(expected)
    assert ref == (d1 if phases else [])
    # the windows come in time order whatever the order of the phases' mapping (a release's measured phases)
    backwards = dict(reversed(list(p.phases.items())))
    assert departure_sweep_windows(p.c2w, backwards) == (ref, windows)


# -- rules that rarely fire: reflections, boundaries, validity masks, tolerances ------------------------------------


def _kabsch_sim3(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares ``dst ≈ s R src + t`` over proper rotations, by scipy's Kabsch fit and the closed-form scale
    ``s = Σ <y_c, R x_c> / Σ |x_c|²`` (independent of the project's Umeyama)."""
    from scipy.spatial.transform import Rotation

    ms, md = src.mean(0), dst.mean(0)
    xs, xd = src - ms, dst - md
    rot, _ = Rotation.align_vectors(xd, xs)
    R = rot.as_matrix()
    s = float(np.sum(xd * (xs @ R.T)) / np.sum(xs * xs))
    return s, R, md - s * R @ ms


def test_umeyama_on_a_reflected_cloud_is_the_best_proper_similarity(rng):
    """A mirrored target forces the reflection fix: the rotation stays proper and the scale is the least-squares
    scale *for that rotation* (Umeyama's trace(D S) / var), not trace(D) / var, which is what the scale of an
    improper fit would be."""
    src = rng.normal(size=(40, 3)) * [2.0, 1.5, 1.0]  # distinct spreads, so the fit is unique
    mirror = np.diag([1.0, 1.0, -1.0])
    dst = 1.7 * src @ (rot_y(0.4) @ mirror).T + [0.5, -1.0, 2.0] + rng.normal(0, 0.01, src.shape)
    s, R, t = umeyama_sim3(src, dst)
    s_ref, R_ref, t_ref = _kabsch_sim3(src, dst)
    assert np.linalg.det(R) == pytest.approx(1.0)
    assert np.allclose(R, R_ref, atol=1e-9) and s == pytest.approx(s_ref, rel=1e-9) and np.allclose(t, t_ref)
    _, D, _ = np.linalg.svd((dst - dst.mean(0)).T @ (src - src.mean(0)) / len(src))
    assert abs(D.sum() / np.mean(np.sum((src - src.mean(0)) ** 2, 1)) - s) > 0.1 * s  # the improper scale differs
    s0, R0, t0 = umeyama_sim3(src, dst, with_scale=False)
    assert s0 == 1.0 and np.allclose(t0, dst.mean(0) - R0 @ src.mean(0))
    one = np.ones((5, 3))  # a degenerate source: scale 1, identity, centroid shift
    s1, R1, t1 = umeyama_sim3(one, one + [1.0, 2.0, 3.0])
    assert s1 == 1.0 and np.array_equal(R1, np.eye(3)) and np.allclose(t1, [1, 2, 3])


def test_rpe_translation_of_a_mirrored_estimate_equals_the_paper_on_a_proper_fit():
    """An estimator whose trajectory is mirrored (a handedness bug) is aligned by the best proper similarity; the
    error is the paper's Eq. 2 with that alignment."""
    tgt = _square()
    est = tgt.copy()
    est[:, 0, 3] *= -1.0  # mirror x of the camera centres
    got = rpe_translation(tgt, {"e": est})
    Q = tgt.copy()
    Q[:, :3, 3] /= np.linalg.norm(np.diff(Q[:, :3, 3], axis=0), axis=1).sum()
    s, R, t = _kabsch_sim3(est[:, :3, 3], Q[:, :3, 3])
    A = apply_sim3(est, s, R, t)
    from trajectories.conventions import w2c_from_c2w

    dQ, dA = w2c_from_c2w(Q[:-1]) @ Q[1:], w2c_from_c2w(A[:-1]) @ A[1:]
    expected = np.linalg.norm((w2c_from_c2w(dQ) @ dA)[:, :3, 3], axis=1).sum()
    assert got == pytest.approx(expected, rel=1e-9) and got > 0.1


@pytest.mark.parametrize("bad", [[0, 1, 3, 4], [4, 3, 2, 1], [0, 0, 1, 2], [2, 1, 2, 3]])
def test_rpe_refuses_frame_indices_that_are_not_consecutive_and_increasing(bad):
    """Eq. 2/3 sum over t -> t + 1; a gap, a repeat or a step backwards is another metric."""
    tgt = _square()[30:34]  # on the first leg: it translates
    with pytest.raises(ValueError, match="adjacent"):
        rpe_translation(tgt, {"e": tgt}, frame_indices=bad)
    with pytest.raises(ValueError, match="adjacent"):
        rpe_rotation(_lrlr()[30:34], _lrlr()[30:34], frame_indices=bad)
    assert rpe_translation(tgt, {"e": tgt}, frame_indices=[7, 8, 9, 10]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="entries"):
        rpe_translation(tgt, {"e": tgt}, frame_indices=[0, 1, 2])


def test_rpe_needs_an_estimate_and_pose_stacks():
    tgt = _square()[30:35]
    with pytest.raises(ValueError, match="at least one estimate"):
        rpe_translation(tgt, {})
    with pytest.raises(ValueError, match=r"\(T, 4, 4\)"):
        rpe_rotation(tgt[:, :3, :3], tgt[:, :3, :3])
    with pytest.raises(ValueError, match="shape"):
        rpe_rotation(tgt, tgt[:-1])
    det: dict = {}
    assert rpe_rotation(_lrlr(), _lrlr(), det) == 0.0
    assert det["steps"] == 120 and det["target_angular_path_rad"] == pytest.approx(np.radians(360), rel=1e-9)


def test_spearman_needs_three_valid_pixels():
    """Fewer than 3 valid pixels: NaN; exactly 3: a rank correlation (with 2 it would always be +-1)."""
    a = np.full((3, 3), np.nan)
    b = np.full((3, 3), np.nan)
    a[0, :2], b[0, :2] = [1.0, 2.0], [2.0, 1.0]
    assert np.isnan(depth_spearman(a, b))
    a[1, 1], b[1, 1] = 3.0, 3.0
    assert depth_spearman(a, b) == pytest.approx(0.5)  # ranks (1,2,3) vs (2,1,3)


def test_spearman_drops_zero_and_negative_depth_in_either_map():
    """z-depth <= 0 is no observation. Here the dropped pixels are the far ones of the other map, so counted as
    depth 0 they would reverse the order there and pull the correlation down."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    d0 = rng.uniform(1, 10, (12, 16))
    dr = d0 * 1.5 + rng.normal(0, 0.5, d0.shape)
    far = d0 > 8.0
    d0z, drz = d0.copy(), dr.copy()
    d0z[far] = 0.0
    drz[far] = np.where(rng.random(far.sum()) < 0.5, 0.0, -1.0)
    ok = ~far
    expected = spearmanr(d0[ok], dr[ok]).statistic
    assert depth_spearman(d0, drz) == pytest.approx(expected)
    assert depth_spearman(d0z, dr) == pytest.approx(expected)
    assert depth_spearman(d0z, drz) == pytest.approx(expected)
    assert abs(spearmanr(d0z.ravel(), dr.ravel()).statistic - expected) > 0.1  # the fixture tells them apart
    assert abs(spearmanr(d0.ravel(), drz.ravel()).statistic - expected) > 0.1


def test_spearman_valid_mask_restricts_the_pixels():
    """``valid`` keeps only the pixels it marks, on top of the finite > 0 rule (AND, not OR)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(4)
    d0 = rng.uniform(1, 10, (10, 12))
    dr = d0.copy()
    valid = np.zeros_like(d0, bool)
    valid[:, :6] = True
    dr[:, 6:] = 11 - d0[:, 6:]  # the unmarked half is anti-correlated
    assert depth_spearman(d0, dr, valid=valid) == pytest.approx(1.0)
    assert depth_spearman(d0, dr) == pytest.approx(spearmanr(d0.ravel(), dr.ravel()).statistic)
    dr2 = dr.copy()
    dr2[0, 0] = np.nan  # a marked pixel that is not finite stays out
    assert depth_spearman(d0, dr2, valid=valid) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="valid mask"):
        depth_spearman(d0, dr, valid=valid[:, :-1])
    sub = depth_spearman(d0, dr, valid=valid, stride=2)  # the mask is subsampled with the maps
    assert sub == pytest.approx(1.0)
    for bad in (0, 1.5, -2):
        with pytest.raises(ValueError, match="stride"):
            depth_spearman(d0, dr, stride=bad)


def test_frames_near_measures_translation_relative_to_the_trajectory_extent():
    """``tolerance_translation`` is a fraction of the largest per-axis range of the camera centres: on a square
    of side 4 a camera 0.15 units away is within 5 % (0.0375), one 0.25 units away is not."""
    from evaluate.protocol import frames_near

    c2w = build_path(TrajectorySpec(name="square", kind="square", side=4.0), 121, 16, K, 96, 160).c2w
    probe = np.stack([se3(np.eye(3), [0.15, 0, 0]), se3(np.eye(3), [0.25, 0, 0]),
                      se3(rot_y(np.radians(4.0)), [0, 0, 0]), se3(rot_y(np.radians(6.0)), [0, 0, 0])])
    poses = np.concatenate([c2w, probe])
    n = len(c2w)
    near = frames_near(poses, [n, n + 1, n + 2, n + 3], np.eye(4), 5.0, 0.05)
    assert near == [n, n + 2]
    assert frames_near(poses, [n + 3, n], np.eye(4)[None], 5.0, 0.05) == [n]  # order kept, (1, 4, 4) poses
    assert frames_near(poses, [], np.eye(4), 5.0, 0.05) == []
    from trajectories.conventions import geodesic_angle

    exact = float(np.degrees(geodesic_angle(np.eye(3), poses[n + 2, :3, :3])))
    assert frames_near(poses, [n + 2], np.eye(4), exact, 0.05) == [n + 2]  # the tolerances are inclusive
    assert frames_near(poses, [n + 2], np.eye(4), exact - 1e-9, 0.05) == []
    rel = 0.15 / 4.0
    assert frames_near(poses, [n], np.eye(4), 5.0, rel) == [n] and frames_near(poses, [n], np.eye(4), 5.0, rel * 0.99) == []
    two = np.stack([se3(np.eye(3), [0.9, 0, 0]), se3(np.eye(3), [0.0, 0, 0])])  # near one of several poses
    assert frames_near(poses, [n, n + 1], two, 5.0, 0.05) == [n]


def test_matched_departure_pairs_need_orientations_within_one_degree():
    """Frames of D1 pair with the D2 frame of closest prescribed orientation, only when that is under 1 deg: here
    D2 turns 10 deg less far than D1, so the end of D1's sweep has no partner."""
    from scipy.spatial.transform import Rotation

    from evaluate.protocol import matched_departure_pairs

    yaw1 = np.linspace(0, -90, 31)
    yaw2 = np.linspace(0, -80, 31)
    yaws = np.concatenate([np.zeros(5), yaw1, np.zeros(5), yaw2, np.zeros(5)])
    c2w = se3(rot_y(np.radians(yaws)))
    phases = {"V": (0, 5), "D1": (5, 36), "R1": (36, 41), "D2": (41, 72), "R2": (72, 77)}
    pairs = matched_departure_pairs(c2w, phases, stride=2)
    rot = Rotation.from_matrix(c2w[:, :3, :3])
    expected = []
    for i in range(5, 36, 2):
        d = (rot[i].inv() * rot[41:72]).magnitude()
        if np.degrees(d.min()) < 1.0:
            expected.append((i, 41 + int(np.argmin(d))))
    assert pairs == expected
    assert 3 < len(pairs) < 16  # some frames pair, the far end does not
    assert matched_departure_pairs(c2w, {"V": (0, 5), "D1": (5, 36)}) == []


def test_departure_revisit_windows_need_a_far_enough_first_departure():
    from evaluate.protocol import departure_revisit_windows, departure_sweep_windows

    small = build_path(TrajectorySpec(name="x", cycles=("left", "left"), yaw_deg=40.0), 121, 16, K, 96, 160)
    assert departure_revisit_windows(small.c2w, small.phases, min_departure_deg=40.0)[1]  # reaches 40 exactly
    assert departure_revisit_windows(small.c2w, small.phases, min_departure_deg=40.5) == ([], [])
    assert departure_sweep_windows(small.c2w, small.phases, min_departure_deg=40.5) == ([], [])
    ref, rev = departure_revisit_windows(small.c2w, small.phases)
    a, b = small.phases["D1"]
    assert ref and ref[-1] == b - 1 and all(a <= f < b for f in ref)  # the away hold, up to D1's last frame
    a2, b2 = small.phases["D2"]
    assert len(rev) == 1 and rev[0][-1] == b2 - 1 and all(a2 <= f < b2 for f in rev[0])
    one = build_path(TrajectorySpec(name="x", cycles=("left",)), 121, 16, K, 96, 160)
    assert departure_revisit_windows(one.c2w, one.phases) == ([], [])


# -- aggregation, dynamic scores and alignment: the branches that rarely fire ---------------------------------------


def _percentile_bootstrap(v, n_boot, seed, alpha):
    """The percentile bootstrap written out: resample with replacement n_boot times (numpy's default_rng(seed)
    index draws), the alpha/2 and 1 - alpha/2 quantiles of the resampled means."""
    idx = np.random.default_rng(seed).integers(0, len(v), size=(n_boot, len(v)))
    means = np.array([v[row].mean() for row in idx])
    return means, np.quantile(means, alpha / 2), np.quantile(means, 1 - alpha / 2)


def test_bootstrap_defaults_are_2000_resamples_seed_0_and_a_95_percent_interval():
    v = np.array([0.2, 0.9, 0.4, 0.75, 0.1, 0.6, 0.33])
    _, lo, hi = _percentile_bootstrap(v, 2000, 0, 0.05)
    ci = bootstrap_ci(list(v) + [None, float("nan"), float("inf")])  # what cannot be computed is dropped
    assert ci == {"mean": pytest.approx(v.mean()), "lo": pytest.approx(lo), "hi": pytest.approx(hi), "n": 7}
    assert bootstrap_ci([None, float("nan")]) == {"mean": pytest.approx(np.nan, nan_ok=True),
                                                   "lo": pytest.approx(np.nan, nan_ok=True),
                                                   "hi": pytest.approx(np.nan, nan_ok=True), "n": 0}
    one = bootstrap_ci([0.4])
    assert one["n"] == 1 and one["lo"] == one["hi"] == one["mean"] == 0.4


def test_paired_bootstrap_drops_incomplete_pairs_and_counts_ties_as_not_greater():
    a = np.array([0.9, 0.5, 0.7, np.nan, 0.6, 0.8])
    b = np.array([0.6, 0.6, 0.4, 0.5, np.nan, 0.5])
    d = (a - b)[[0, 1, 2, 5]]
    means, lo, hi = _percentile_bootstrap(d, 2000, 0, 0.05)
    p = paired_bootstrap(a, b)
    assert p["n"] == 4 and p["diff"] == pytest.approx(d.mean()) and d.max() > d.mean()
    assert p["lo"] == pytest.approx(lo) and p["hi"] == pytest.approx(hi)
    assert p["p_le_0"] == pytest.approx(np.mean(means <= 0)) and 0 < p["p_le_0"] < 1
    tie = paired_bootstrap([0.5, 0.5], [0.5, 0.5])
    assert tie["diff"] == 0.0 and tie["p_le_0"] == 1.0  # no difference is "not greater"
    none = paired_bootstrap([np.nan], [0.1])
    assert none["n"] == 0 and np.isnan(none["diff"]) and np.isnan(none["p_le_0"])
    with pytest.raises(ValueError, match="same cases"):
        paired_bootstrap([0.1, 0.2], [0.1])


def test_rollout_score_rejects_no_revisits_and_any_infinite_score():
    with pytest.raises(ValueError, match="num_revisits"):
        rollout_score({"a": []}, 0)
    with pytest.raises(ValueError, match="infinite"):
        rollout_score({"a": [0.5, float("-inf"), 0.2]}, 3)  # one infinite score among finite ones
    assert np.isnan(rollout_score({}, 2))


def test_checklist_reads_boolean_answers_and_needs_eight_of_each():
    refs = _refs()
    answers = [r["answer"] == "yes" for r in refs]  # True / False, as some judges reply
    assert score_checklist(True, answers, refs)["overall"] == 1.0
    assert score_checklist(True, [np.bool_(a) for a in answers], refs)["overall"] == 1.0
    flipped = [not a for a in answers]
    assert score_checklist(True, flipped, refs)["overall"] == 0.0
    assert score_checklist(False, answers, refs)["items"] == [0] * 8
    for ans, rf in ((answers, refs[:7]), (answers[:7], refs), (answers + [True], refs)):
        with pytest.raises(ValueError, match="need 8 answers"):
            score_checklist(True, ans, rf)
    three = [dict(r, aspect="final_state") if i == 0 else r for i, r in enumerate(refs)]
    with pytest.raises(ValueError, match="exactly two"):
        score_checklist(True, answers, three)
    assert score_checklist(True, ["Y", "n", "FALSE", "true", " yes ", "No", "n", "N"], refs)["items"] == \
        [1, 1, 0, 0, 1, 1, 0, 1]


def test_decomposition_and_m_score_edge_cases():
    from evaluate.dynamic import decompose, dynamic_summary, trigger_conditioned

    empty = decompose([])
    assert empty["n"] == 0 and empty["started"] == 0 and np.isnan(empty["S_gated"])
    never = decompose([{"started": False, "overall": 0.0}] * 3)
    assert never["p_start"] == 0.0 and np.isnan(never["S_cond"]) and never["S_gated"] == 0.0
    t = trigger_conditioned([], [])
    assert t["n"] == 0 and t["triggered"] == 0 and np.isnan(t["M"])
    # C_trig = S_rel = 0.5: the harmonic mean is 0.5 (C + S = 1, C - S = 0: neither may be read as "no score")
    t = trigger_conditioned([0.5, 0.9], [True, False])
    assert t["C_trig"] == 0.5 and t["S_rel"] == 0.5 and t["M"] == pytest.approx(0.5)
    t = trigger_conditioned([0.0, 0.3], [True, False])
    assert t["M"] == 0.0 and t["S_rel"] == 0.0
    t = trigger_conditioned([1.0, 0.2, 0.6], [True, True, False])
    assert t["M"] == pytest.approx(2 * (2 / 3) * 0.6 / (2 / 3 + 0.6))
    assert np.isnan(trigger_conditioned([0.3], [False])["S_rel"]) and trigger_conditioned([0.3], [False])["M"] == 0.0
    with pytest.raises(ValueError, match="trigger decisions"):
        trigger_conditioned([0.1], [])
    s = dynamic_summary([{"started": True, "overall": 0.5}, {"started": False, "overall": 0.0}])
    assert s["S_gated"] == pytest.approx(0.25) and s["M_score"] == pytest.approx(0.5)


def test_apply_sim3_moves_centres_and_leaves_its_input_alone():
    P = se3(np.stack([rot_y(0.2), rot_x(-0.4)]), np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]]))
    before = P.copy()
    R, t = rot_z(0.7), np.array([0.5, -2.0, 4.0])
    out = apply_sim3(P, 2.0, R, t)
    assert np.array_equal(P, before)  # a copy, not an in-place edit
    assert np.allclose(out[:, :3, 3], 2.0 * P[:, :3, 3] @ R.T + t)
    assert np.allclose(out[:, :3, :3], R @ P[:, :3, :3])


def test_alignment_is_sim3_for_any_translating_target_and_se3_for_a_still_one():
    from evaluate.camera import align_to_target

    diag = se3(np.tile(np.eye(3), (6, 1, 1)), np.outer(np.arange(6), [1.0, 1.0, 1.0]))  # along (1, 1, 1)
    est = diag.copy()
    est[:, :3, 3] *= 3.0
    aligned, info = align_to_target(diag, est)
    assert info == {"alignment": "sim3", "scale": pytest.approx(1 / 3)} and np.allclose(aligned, diag)
    assert rpe_translation(diag, {"e": est}) == pytest.approx(0.0, abs=1e-12)
    still = se3(np.stack([rot_y(a) for a in np.linspace(0, 1, 5)]))
    _, info = align_to_target(still, est[:5])
    assert info["alignment"] == "se3" and info["scale"] == 1.0


def test_translation_rpe_applies_from_the_minimum_path_length_and_rotation_rpe_to_any_turn():
    from evaluate.camera import MIN_PATH_LENGTH, TRANSLATION_ONLY_REASON, translation_rpe_not_applicable

    P = np.stack([np.eye(4)] * 2)
    P[1, 0, 3] = MIN_PATH_LENGTH
    assert translation_rpe_not_applicable(P) is None  # exactly the minimum counts as translating
    P[1, 0, 3] = MIN_PATH_LENGTH / 2
    assert translation_rpe_not_applicable(P) is not None
    turn = se3(np.stack([np.eye(3), np.eye(3), np.eye(3), rot_y(0.01)]))
    d: dict = {}
    assert np.isfinite(rpe_rotation(turn, turn, d)) and "not_applicable" not in d  # only the last step turns
    still = se3(np.tile(np.eye(3), (4, 1, 1)))
    d = {}
    assert np.isnan(rpe_rotation(still, turn, d)) and d["not_applicable"] == TRANSLATION_ONLY_REASON
    for bad in (np.zeros((3, 4, 3)), np.zeros((4, 4)), np.zeros((3, 4, 4, 1))):
        with pytest.raises(ValueError, match=r"\(T, 4, 4\)"):
            rpe_rotation(bad, bad)


def test_eq4_edge_inputs():
    assert revisit_similarity(np.array([[2.0]]), np.array([[3.0]])) == 1.0  # one frame, one dimension
    small = 1e-3 * np.array([[1.0, 0.0], [0.6, 0.8]])  # features far below unit length: still cosines
    assert revisit_similarity(small[:1], small[1:]) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="reference set"):
        revisit_similarity(np.ones(3), np.ones((1, 3)))  # a 1-D reference is not a set of frames
    with pytest.raises(ValueError, match="do not match"):
        revisit_similarity(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="do not match"):
        revisit_similarity(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="non-finite"):
        revisit_similarity(np.array([[1.0, np.nan]]), np.ones((1, 2)))  # the reference side is checked too


def test_silhouettes_keep_thin_shapes_centred_and_union_both_masks():
    line = np.zeros((10, 200), bool)
    line[5, 20:120] = True  # 1 x 100: the short side would round to 1 pixel of the 64 canvas
    c = normalized_silhouette(line)
    ys, xs = np.nonzero(c)
    assert (ys.min(), ys.max(), xs.min(), xs.max()) == (31, 31, 0, 63)  # one row, centred
    tall = np.zeros((80, 80), bool)
    tall[10:50, 30:50] = True  # 40 x 20 -> 64 x 32, centred in columns 16..47
    ys, xs = np.nonzero(normalized_silhouette(tall))
    assert (ys.min(), ys.max(), xs.min(), xs.max()) == (0, 63, 16, 47)
    a = np.zeros((20, 20), bool)
    b = np.zeros((20, 20), bool)
    a[0:10, 0:10] = True
    a[10:20, 0:5] = True  # an L
    b[0:10, 5:10] = True
    b[10:20, 0:10] = True  # the L turned over: same box, each has pixels the other lacks
    na, nb = normalized_silhouette(a), normalized_silhouette(b)
    assert (na & ~nb).any() and (nb & ~na).any()
    assert silhouette_iou(a, b) == pytest.approx((na & nb).sum() / (na | nb).sum())
    assert silhouette_iou(a, b) < min(na.sum(), nb.sum()) / max(na.sum(), nb.sum())
    empty = np.zeros((5, 5), bool)
    assert silhouette_iou(empty, empty) == 0.0 and silhouette_revisit_score([empty], [empty]) == 0.0
    assert silhouette_revisit_score([], [a]) == 0.0


def test_spearman_shape_checks_constant_maps_and_small_depths():
    with pytest.raises(ValueError, match="same size"):
        depth_spearman(np.ones((2, 2, 2)), np.ones((2, 2, 2)))
    d = np.random.default_rng(0).uniform(0.01, 0.9, (6, 7))  # relative depth below 1 is still depth
    assert depth_spearman(d, d**2) == pytest.approx(1.0)
    assert np.isnan(depth_spearman(np.full_like(d, 0.5), d))  # constant reference
    # ranks with an std of exactly 1 (two ties of two): a correlation of 0, not undefined
    assert depth_spearman(np.array([[1.0, 1.0, 2.0, 2.0]]), np.array([[1.0, 2.0, 1.0, 2.0]])) == pytest.approx(0.0)


def _field_grid(depth, K, c2w, bin_deg):
    """Eq. 6's field written out pixel by pixel (the +0.5-centre rays, equal-angle bins, the nearest log-range,
    the last bin closed at +180 / +90 deg) as a (180/bin, 360/bin) grid, NaN where empty."""
    n_el, n_az = round(180 / bin_deg), round(360 / bin_deg)
    g = np.full((n_el, n_az), np.nan)
    Kinv = np.linalg.inv(K)
    for v in range(depth.shape[0]):
        for u in range(depth.shape[1]):
            z = depth[v, u]
            if not (np.isfinite(z) and z > 0):
                continue
            ray = Kinv @ np.array([u + 0.5, v + 0.5, 1.0])
            p = c2w[:3, :3] @ (ray / ray[2] * z) + c2w[:3, 3]
            r = np.linalg.norm(p)
            if r <= 1e-9:
                continue
            az = np.degrees(np.arctan2(p[0], p[2]))
            el = np.degrees(np.arctan2(-p[1], np.hypot(p[0], p[2])))
            i, j = min(int((el + 90) // bin_deg), n_el - 1), min(int((az + 180) // bin_deg), n_az - 1)
            g[i, j] = np.fmin(g[i, j], np.log(r))
    return g


@pytest.mark.parametrize("bin_deg", [1.0, 2.0, 3.0])
def test_spherical_grid_bins_every_pixel_as_eq6_describes(bin_deg):
    """Cameras looking straight up, straight down and backwards (so the first and last azimuth and elevation bins
    fill), one of them translated, depths below 1 and invalid pixels; up and down are not mirror images here."""
    K = np.array([[6.0, 0.0, 4.5], [0.0, 5.0, 3.5], [0.0, 0.0, 1.0]])  # pixel (4, 3) looks along the axis
    up = np.array([[1.0, 0, 0, 0], [0, 0, -1.0, 0], [0, 1.0, 0, 0], [0, 0, 0, 1.0]])  # forward = world -y (up)
    down = np.array([[1.0, 0, 0, 0], [0, 0, 1.0, 0], [0, -1.0, 0, 0], [0, 0, 0, 1.0]])
    back = np.diag([-1.0, 1.0, -1.0, 1.0])
    moved = se3(rot_y(0.3) @ rot_x(0.2), [0.3, -0.2, 0.5])
    rng = np.random.default_rng(int(bin_deg))
    for c2w in (up, down, back, moved):
        d = rng.uniform(0.2, 3.0, (7, 8))
        d[0, 0], d[1, 2], d[2, 3] = 0.0, np.nan, -1.0
        got = spherical_grid(d, K, c2w, bin_deg)
        exp = _field_grid(d, K, c2w, bin_deg)
        assert got.shape == exp.shape == (round(180 / bin_deg), round(360 / bin_deg))
        assert np.array_equal(np.isnan(got), np.isnan(exp)) and np.allclose(got[~np.isnan(got)], exp[~np.isnan(exp)])
    top = spherical_grid(np.ones((7, 8)), K, up, bin_deg)
    assert np.isfinite(top[-1]).any() and not np.isfinite(top[: len(top) // 2]).any()  # looking up: upper rows
    assert np.isfinite(spherical_grid(np.ones((7, 8)), K, down, bin_deg)[0]).any()  # straight down: the first row


def test_window_frames_always_end_on_the_settled_last_frame():
    from evaluate.protocol import sample_every, window_frames

    assert window_frames((10, 19), 4) == [10, 14, 18]  # 18 = b - 1 is on the grid: not repeated
    assert window_frames((10, 20), 4) == [10, 14, 18, 19]
    assert window_frames((10, 11), 4) == [10] and window_frames((10, 10), 4) == []
    assert sample_every(3, 2, 9) == [2, 5, 8]


def _yaw_path(yaws, phases):
    return se3(rot_y(np.radians(np.asarray(yaws, float)))), phases


def test_departure_revisit_defaults_are_5_degrees_5_percent_and_30_degrees():
    """Defaults as documented (evaluation.md): a D2 frame 5.5 deg from the away view is not a revisit of it, one
    4.5 deg away is; a first departure of 29 deg has no away view, one of 30.5 has."""
    from evaluate.protocol import departure_revisit_windows

    def path(d1_far, d2):
        yaws = [0.0] * 3 + list(np.linspace(0, -d1_far, 6)) + [0.0] * 3 + list(d2) + [0.0] * 3
        return _yaw_path(yaws, {"V": (0, 3), "D1": (3, 9), "R1": (9, 12), "D2": (12, 12 + len(d2)),
                                "R2": (12 + len(d2), 15 + len(d2))})

    c2w, ph = path(30.5, [-10.0, -25.0, -26.0, -30.5 + 4.5, -20.0])
    ref, rev = departure_revisit_windows(c2w, ph)
    assert ref == [8] and rev == [[14, 15]]  # -26 deg twice: 4.5 deg from the away view; -25: 5.5
    c2w, ph = path(30.5, [-10.0, -25.0, -30.5 + 5.5, -20.0])
    assert departure_revisit_windows(c2w, ph) == ([8], [])
    c2w, ph = path(29.0, [-10.0, -29.0, -20.0])
    assert departure_revisit_windows(c2w, ph) == ([], [])


def test_the_away_view_is_measured_from_frame_0_and_needs_two_departures():
    """A one-frame V: frame 1 already turns, so measuring from it (not frame 0) would find another far pose."""
    from evaluate.protocol import departure_revisit_windows, departure_sweep_windows

    yaws = [0.0, -10.0, -40.0, -40.0, -20.0, 0.0, -20.0, -40.0, -20.0, 0.0]
    c2w, ph = _yaw_path(yaws, {"V": (0, 1), "D1": (1, 4), "R1": (4, 6), "D2": (6, 9), "R2": (9, 10)})
    assert departure_revisit_windows(c2w, ph) == ([2, 3], [[7]])
    ref, sweep = departure_sweep_windows(c2w, ph)
    assert ref == [1, 2, 3] and sweep == [[7]]  # only D2's frame at 40 deg is >= 30 deg from frame 0
    only = {k: v for k, v in ph.items() if k in ("V", "D1", "R1")}
    assert departure_revisit_windows(c2w, only) == ([], [])
    assert departure_sweep_windows(c2w, only) == ([1, 2, 3], [])
    assert departure_sweep_windows(c2w, {"V": (0, 10)}) == ([], [])


def test_sweep_frames_count_from_exactly_the_minimum_departure():
    from evaluate.protocol import departure_sweep_windows
    from trajectories.conventions import geodesic_angle

    yaws = [0.0, -20.0, -35.0, -20.0, 0.0, -20.0, -35.0, -20.0]
    c2w, ph = _yaw_path(yaws, {"V": (0, 1), "D1": (1, 4), "R1": (4, 5), "D2": (5, 8)})
    at = float(np.degrees(geodesic_angle(np.eye(3), c2w[6, :3, :3])))
    assert departure_sweep_windows(c2w, ph, min_departure_deg=at)[1] == [[6]]
    assert departure_sweep_windows(c2w, ph, min_departure_deg=at + 1e-9) == ([], [])


# -- edges the mutation run found unpinned --------------------------------------------------------------------------

def test_a_revisit_with_no_feature_values_is_empty_and_cosines_that_round_above_1_are_clipped():
    """Eq. 4: a revisit of size 0 (no frame, or frames with 0-dimensional features) scores 0 like an empty one;
    a cosine of a vector with itself can round to 1 + 4e-16, and the clip keeps the score at exactly 1."""
    from evaluate.memory import cosine_matrix

    assert revisit_similarity(np.ones((1, 3)), np.zeros((2, 0))) == 0.0
    assert revisit_similarity(np.ones((1, 3)), np.zeros((0, 3))) == 0.0
    rng = np.random.default_rng(0)
    v = next(x for x in rng.normal(size=(5000, 7)) if cosine_matrix(x[None], x[None])[0, 0] > 1.0)
    assert revisit_similarity(v[None], v[None]) == 1.0


@pytest.mark.parametrize("shape", [(200, 1), (1, 200)])
def test_a_line_thinner_than_a_canvas_pixel_keeps_one_pixel(shape):
    """1 x 200 px scales by 64/200: its short side rounds to 0 and is kept at 1 canvas pixel (not 2)."""
    out = normalized_silhouette(np.ones(shape, bool))
    assert out.sum() == 64 and min(np.count_nonzero(out.any(axis=0)), np.count_nonzero(out.any(axis=1))) == 1


def test_spearman_drops_infinite_depth_in_either_map():
    """+inf passes ``> 0`` but is not a depth: the pixel is dropped whichever map holds it (ranked, it would be
    the largest)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    a, b = rng.uniform(1, 5, (6, 6)), rng.uniform(1, 5, (6, 6))
    a[0, 0], b[1, 1] = np.inf, np.inf
    keep = np.ones((6, 6), bool)
    keep[0, 0] = keep[1, 1] = False
    assert depth_spearman(a, b) == pytest.approx(spearmanr(a[keep], b[keep])[0])
    assert depth_spearman(a, b) == pytest.approx(depth_spearman(a, b, valid=keep))


@pytest.mark.parametrize("which", ["ref", "revisit"])
def test_spearman_of_one_constant_map_is_nan_without_a_warning(which):
    """Undefined when either map is constant: NaN, decided before the correlation (which would warn)."""
    import warnings

    flat, ramp = np.full((4, 4), 2.0), np.arange(1.0, 17.0).reshape(4, 4)
    a, b = (flat, ramp) if which == "ref" else (ramp, flat)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(depth_spearman(a, b))


def test_spherical_grid_drops_points_at_the_origin_and_bins_the_first_azimuth():
    """A point at range 1e-9 or less has no direction and is dropped (2e-9 is kept); a point at azimuth -179 deg
    lands in the first azimuth bin (index 0 of [-180, -178)), at elevation 0 in row 45."""
    K1 = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])  # 1 x 1 image: its centre ray is +z
    assert np.isnan(spherical_grid(np.array([[1e-9]]), K1, np.eye(4))).all()
    kept = spherical_grid(np.array([[2e-9]]), K1, np.eye(4))
    assert np.isfinite(kept).sum() == 1 and np.nanmin(kept) == pytest.approx(np.log(2e-9))
    back = spherical_grid(np.array([[3.0]]), K1, se3(rot_y(np.radians(-179.0))))
    assert np.argwhere(np.isfinite(back)).tolist() == [[45, 0]] and back[45, 0] == pytest.approx(np.log(3.0))


def test_bootstrap_defaults_and_the_paired_interval_are_the_percentiles_of_2000_resampled_means():
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 1.0, 12), rng.normal(0.5, 1.0, 12)
    assert bootstrap_ci(list(a)) == bootstrap_ci(list(a), n_boot=2000, seed=0, alpha=0.05)
    assert bootstrap_ci(list(a)) != bootstrap_ci(list(a), n_boot=2001)
    d = a - b
    means = d[np.random.default_rng(0).integers(0, 12, size=(2000, 12))].mean(axis=1)
    p = paired_bootstrap(a, b)
    assert p["lo"] == np.quantile(means, 0.025) and p["hi"] == np.quantile(means, 0.975)
    assert p["p_le_0"] == (means <= 0).mean() and p["n"] == 12
    q = paired_bootstrap(a, b, alpha=0.2)
    assert q["lo"] == np.quantile(means, 0.1) and q["hi"] == np.quantile(means, 0.9)


def test_m_score_is_zero_when_coverage_plus_score_is_zero():
    """The harmonic mean's denominator C_trig + S_rel is 0 only with a negative score (outside [0, 1]): M = 0
    rather than a division by zero."""
    from evaluate.dynamic import trigger_conditioned

    tc = trigger_conditioned([-0.5, 1.0], [True, False])
    assert tc["C_trig"] == 0.5 and tc["S_rel"] == -0.5 and tc["M"] == 0.0


def test_alignment_thresholds_are_strict():
    """Degenerate means below the threshold: Umeyama still fits a source whose variance is exactly 1e-18 (centres
    1e-9 either side of their mean; scale 5 recovered), and falls back to scale 1 and no rotation just below it;
    align_to_target fits Sim(3) to a target whose centres span exactly 1e-12, SE(3) below."""
    from evaluate.camera import align_to_target

    src = np.array([[1e-9, 0.0, 0.0], [-1e-9, 0.0, 0.0]])
    assert float((src**2).sum() / 2) == 1e-18
    s, R, t = umeyama_sim3(src, 5 * src + 1.0)
    assert s == pytest.approx(5.0, rel=1e-6) and np.allclose(R, np.eye(3))
    s, R, t = umeyama_sim3(0.99 * src, 5 * src + 1.0)
    assert s == 1.0 and np.array_equal(R, np.eye(3)) and np.allclose(t, 1.0)
    target = se3(np.tile(np.eye(3), (3, 1, 1)), np.array([[0.0, 0, 0], [1e-12, 0, 0], [0.5e-12, 0, 0]]))
    est = se3(np.tile(np.eye(3), (3, 1, 1)), np.array([[0.0, 0, 0], [2.0, 0, 0], [1.0, 0, 0]]))
    assert align_to_target(target, est)[1]["alignment"] == "sim3"
    target[1, 0, 3] = 0.9e-12
    assert align_to_target(target, est)[1]["alignment"] == "se3"


# -- the benchmark mean, return frames by position, arrived frames and ORS's lazy import -----------------------------

def test_the_benchmark_mean_is_the_bootstrap_of_2000_resamples_with_seed_0():
    """Every metric's aggregation is the mean with a 95 % percentile bootstrap interval; its defaults are 2000
    resamples and seed 0, so a rerun reproduces the interval exactly (another count or seed gives another one)."""
    from evaluate.aggregate import mean

    v = list(np.random.default_rng(5).normal(1.0, 1.0, 12))
    got = mean(v)
    assert got == bootstrap_ci(v, n_boot=2000, seed=0, alpha=0.05)
    assert got != bootstrap_ci(v, n_boot=2001, seed=0) and got != bootstrap_ci(v, n_boot=2000, seed=1)


def test_a_translation_loop_returns_at_the_window_frame_whose_centre_is_nearest_frame_0s():
    """Frame 0's centre is at x = 2 and the last frame's at x = -2: window frame 1 (x = 1.5) is 0.5 from frame 0,
    frame 2 (x = -1.5) is 3.5 away, so frame 1 is the return frame (measured from frame 0, not from the last frame,
    and by the difference of the centres)."""
    from evaluate.memory import closest_by_position

    c2w = se3(np.tile(np.eye(3), (4, 1, 1)), np.array([[2.0, 0, 0], [1.5, 0, 0], [-1.5, 0, 0], [-2.0, 0, 0]]))
    assert closest_by_position([1, 2], c2w) == 1
    assert closest_by_position([2, 1], c2w) == 1


def test_arrived_frames_are_the_frames_whose_prescribed_pose_is_back_at_frame_0():
    """Frames 1 and 3 (the last) face 90 deg away, frame 2 is 2 deg from frame 0: within 5 deg of frame 0 are
    frames 0 and 2, whatever frames 1 and 3 are near."""
    from evaluate.protocol import arrived_frames

    c2w = se3(rot_y(np.radians([0.0, 90.0, 2.0, 90.0])))
    assert arrived_frames(c2w, [0, 1, 2, 3], 5.0, 0.05) == [0, 2]
    assert arrived_frames(c2w, [3, 2, 1], 5.0, 0.05) == [2]


def test_importing_the_ors_module_does_not_import_the_owl_detector(monkeypatch):
    """The detector backbone is loaded only when ORS is computed: with ``evaluate.perception.owl_detector`` made
    unimportable (``None`` in ``sys.modules``), a fresh import of ``evaluate.ors`` still succeeds and its score
    works (MemoBench's ORS: 2 detections of 0.8 and 0.4 over 4 revisit frames = 0.3)."""
    import importlib
    import sys

    import evaluate.ors

    before = sys.modules["evaluate.ors"]
    monkeypatch.setitem(sys.modules, "evaluate.perception.owl_detector", None)
    monkeypatch.delitem(sys.modules, "evaluate.ors")
    monkeypatch.setattr(evaluate, "ors", before)  # the package attribute the import rebinds
    fresh = importlib.import_module("evaluate.ors")
    assert fresh is not before
    assert fresh.object_reappearance_score([0.8, None, 0.4, None])["ors"] == pytest.approx(0.3)
