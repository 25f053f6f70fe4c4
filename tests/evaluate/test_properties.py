"""Property-based tests of the evaluation formulas: the invariances the paper's definitions promise (section 4),
checked on generated inputs rather than on a few hand-picked ones.

* RPE_trans (Eq. 2) is invariant to any Sim(3) of an estimate (it is aligned) and of the target (normalised to unit
  length, relative motions); RPE_rot (Eq. 3) to any global rotation of either.
* Depth Spearman is invariant to strictly increasing transforms of either depth map (relative depth of any scale),
  and flips sign under a decreasing one.
* Eq. 4 is invariant to positive scaling of features and to the order of the reference set; Eq. 1 to the order of
  targets; the spherical score (Eq. 6) to a global depth scale.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from evaluate.aggregate import rollout_score
from evaluate.camera import apply_sim3, rpe_rotation, rpe_translation
from evaluate.memory import depth_spearman, revisit_similarity, spherical_grid, spherical_reconstruction_score
from trajectories.conventions import intrinsics_from_fov, se3

seeds = st.integers(0, 2**32 - 1)
rotations = st.builds(lambda q: Rotation.from_quat(q).as_matrix() if np.linalg.norm(q) > 1e-3 else np.eye(3),
                      st.lists(st.floats(-1, 1), min_size=4, max_size=4))
scales = st.floats(0.01, 100.0)
shifts = st.lists(st.floats(-50, 50), min_size=3, max_size=3).map(np.array)


def _path(seed: int, T: int, translate: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    R = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.05, (T, 3)), axis=0)).as_matrix()
    t = np.cumsum(rng.normal(0, 0.3, (T, 3)), axis=0) if translate else np.zeros((T, 3))
    return se3(R, t)


def _noisy(Q: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    R = Q[:, :3, :3] @ Rotation.from_rotvec(rng.normal(0, 0.02, (len(Q), 3))).as_matrix()
    return se3(R, Q[:, :3, 3] + rng.normal(0, 0.05, (len(Q), 3)))


@settings(max_examples=40)
@given(seed=seeds, T=st.integers(3, 40), s=scales, R=rotations, t=shifts)
def test_rpe_translation_is_invariant_to_a_similarity_of_the_estimate(seed, T, s, R, t):
    Q = _path(seed, T)
    E = _noisy(Q, seed)
    base = rpe_translation(Q, {"e": E})
    assert base >= 0
    assert rpe_translation(Q, {"e": apply_sim3(E, s, R, t)}) == pytest.approx(base, rel=1e-6, abs=1e-9)


@settings(max_examples=40)
@given(seed=seeds, T=st.integers(3, 40), s=scales, R=rotations, t=shifts)
def test_rpe_translation_is_invariant_to_a_similarity_of_the_target(seed, T, s, R, t):
    Q = _path(seed, T)
    E = _noisy(Q, seed)
    assert rpe_translation(apply_sim3(Q, s, R, t), {"e": E}) == pytest.approx(rpe_translation(Q, {"e": E}),
                                                                               rel=1e-6, abs=1e-9)


@settings(max_examples=25)
@given(seed=seeds, T=st.integers(3, 30), s=scales, R=rotations, t=shifts)
def test_rpe_translation_of_an_exact_estimate_in_another_frame_is_zero(seed, T, s, R, t):
    Q = _path(seed, T)
    assert rpe_translation(Q, {"e": apply_sim3(Q, s, R, t)}) == pytest.approx(0.0, abs=1e-7)
    assert np.isnan(rpe_translation(_path(seed, T, translate=False), {"e": Q}))  # rotation-only target


@settings(max_examples=40)
@given(seed=seeds, T=st.integers(2, 40), R=rotations, G=rotations, t=shifts)
def test_rpe_rotation_is_invariant_to_a_global_rotation_of_either_path(seed, T, R, G, t):
    Q = _path(seed, T)
    E = _noisy(Q, seed)
    base = rpe_rotation(Q, E)
    assert base >= 0
    assert rpe_rotation(Q, apply_sim3(E, 1.0, R, t)) == pytest.approx(base, rel=1e-6, abs=1e-9)
    assert rpe_rotation(apply_sim3(Q, 1.0, G, t), E) == pytest.approx(base, rel=1e-6, abs=1e-9)


#: strictly increasing maps of (0, inf) into (0, inf): depth <= 0 is no observation, so a transform that makes some
#: depth <= 0 (np.log of a depth below 1) changes which pixels count
INCREASING = {
    "affine": lambda d: 3.7 * d + 0.2,
    "log1p": np.log1p,
    "exp": lambda d: np.exp(d / 10.0),
    "cube": lambda d: d**3,
    "disparity_of_disparity": lambda d: 1.0 / (1.0 / d + 1.0),
}


@settings(max_examples=40)
@given(seed=seeds, h=st.integers(2, 12), w=st.integers(2, 12), name=st.sampled_from(sorted(INCREASING)),
       which=st.sampled_from(["ref", "rev", "both"]), holes=st.floats(0, 0.5))
def test_spearman_is_invariant_to_increasing_transforms_of_depth(seed, h, w, name, which, holes):
    rng = np.random.default_rng(seed)
    d0 = rng.uniform(0.1, 30, (h, w)).round(1)  # ties included
    dr = np.abs(d0 + rng.normal(0, 5, d0.shape)).round(1) + 0.1
    dr[rng.random(dr.shape) < holes] = np.nan  # invalid pixels stay invalid under the transform
    base = depth_spearman(d0, dr)
    f = INCREASING[name]
    a, b = (f(d0) if which in ("ref", "both") else d0), (f(dr) if which in ("rev", "both") else dr)
    got = depth_spearman(a, b)
    if np.isnan(base):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(base, abs=1e-9) and -1 - 1e-12 <= got <= 1 + 1e-12
        assert depth_spearman(d0, 1.0 / dr) == pytest.approx(-base, abs=1e-9)  # decreasing: the order reverses


@settings(max_examples=40)
@given(seed=seeds, n_ref=st.integers(1, 6), n_rev=st.integers(0, 6), dim=st.integers(1, 8),
       scale=st.floats(1e-3, 1e3))
def test_eq4_ignores_feature_scale_and_reference_order_and_stays_in_0_1(seed, n_ref, n_rev, dim, scale):
    rng = np.random.default_rng(seed)
    ref, rev = rng.normal(size=(n_ref, dim)), rng.normal(size=(n_rev, dim))
    assume(np.linalg.norm(ref, axis=1).min() > 1e-6 and (n_rev == 0 or np.linalg.norm(rev, axis=1).min() > 1e-6))
    s = revisit_similarity(ref, rev)
    assert 0.0 <= s <= 1.0
    assert revisit_similarity(scale * ref[::-1], rev * scale) == pytest.approx(s, abs=1e-12)
    expected = np.mean([max(0.0, min(1.0, max(r @ v / np.linalg.norm(r) / np.linalg.norm(v) for r in ref)))
                        for v in rev]) if n_rev else 0.0
    assert s == pytest.approx(expected, abs=1e-12)


@settings(max_examples=40)
@given(scores=st.dictionaries(st.text(min_size=1, max_size=3),
                              st.lists(st.one_of(st.none(), st.floats(0, 1)), max_size=4), min_size=1, max_size=5),
       extra=st.integers(0, 3))
def test_eq1_is_the_mean_over_targets_of_the_sum_over_k_prescribed_revisits(scores, extra):
    K = max(len(v) for v in scores.values()) + extra
    assume(K >= 1)
    expected = np.mean([sum(0.0 if x is None else x for x in v) / K for v in scores.values()])
    assert rollout_score(scores, K) == pytest.approx(expected, abs=1e-12)
    assert rollout_score(dict(reversed(list(scores.items()))), K) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=15)
@given(seed=seeds, scale=st.floats(0.01, 100.0), yaw=st.floats(-60, 60))
def test_the_spherical_score_ignores_a_global_depth_scale(seed, scale, yaw):
    from harness.scene import Room

    K = intrinsics_from_fov(70, 32, 24)
    P = se3(Rotation.from_euler("y", yaw, degrees=True).as_matrix())
    room = Room()
    d0 = room.depth_map(np.eye(4), K, 24, 32).astype(np.float64)
    d1 = room.depth_map(P, K, 24, 32).astype(np.float64)
    d1 *= 1 + 0.2 * np.random.default_rng(seed).random(d1.shape)
    H = spherical_grid(d0, K, np.eye(4))
    base = spherical_reconstruction_score(H, spherical_grid(d1, K, P))
    assert 0.0 <= base <= 1.0
    assert spherical_reconstruction_score(H, spherical_grid(scale * d1, K, P)) == pytest.approx(base, abs=1e-9)
