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
