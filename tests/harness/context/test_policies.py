"""Pose-level context policies: exact budgets, never the future, FoV prefers views that looked the same way."""

from __future__ import annotations

import numpy as np
import pytest

from harness.context import (
    ContextConfigError,
    ContextPolicy,
    ContextSelector,
    FovOverlap,
)
from trajectories import TrajectorySpec, build_path, latent_poses
from trajectories.conventions import rot_y, se3

SLIDING = ContextPolicy(name="sliding", sink=4, recent=12)
FOV = ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2)
FULL = ContextPolicy(name="fullkv")


def _lrlr_latents(K):
    p = build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), 493, 16, K, 480, 832)
    return p, latent_poses(p.c2w)


@pytest.mark.parametrize("policy", [SLIDING, FOV, FULL])
def test_budgets_and_no_future(policy, K832):
    _, lat = _lrlr_latents(K832)
    sel = ContextSelector(policy, lat, K832, 480, 832)
    assert sel.num_chunks == 31
    for k in range(sel.num_chunks):
        s = sel.select(k)
        start = k * 4
        assert list(s.current) == list(range(start, start + 4))
        assert all(i < start for i in s.context)  # nothing from the future
        assert len(set(s.context)) == len(s.context)
        if policy.name == "fullkv":
            assert s.context == list(range(start))
        elif start >= 20:  # steady state: exactly 20 latents attended
            assert len(s.attended) == 20
            assert list(s.sink) == [0, 1, 2, 3]  # the sink is never evicted
            assert list(s.recent) == list(range(start - policy.recent, start))
        else:
            assert s.context == list(range(start))


def test_fov_retrieves_whole_chunks_outside_sink_and_recent(K832):
    _, lat = _lrlr_latents(K832)
    sel = ContextSelector(FOV, lat, K832, 480, 832)
    for k in range(6, sel.num_chunks):
        s = sel.select(k)
        r = list(s.retrieved)
        assert len(r) == 8 and all(i % 4 == (r[0] % 4) for i in r[::4])
        assert set(r).isdisjoint(s.sink) and set(r).isdisjoint(s.recent)
        assert all(r[i] + 1 == r[i + 1] for i in (0, 1, 2, 4, 5, 6))  # two whole chunks


def test_fov_prefers_chunks_that_looked_the_same_way(K832):
    # History: 3 chunks looking at yaw 0, 3 at -90, 3 at +90; query looks at -85.
    yaws = [0] * 12 + [-90] * 12 + [90] * 12 + [0] * 4 + [-85] * 4
    lat = se3(rot_y(np.deg2rad(np.array(yaws, float))))
    pol = ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2)
    s = ContextSelector(pol, lat, K832, 480, 832).select(len(yaws) // 4 - 1)
    # two of the three chunks that looked left; equal scores go to the more recent chunks
    assert set(s.retrieved) == set(range(16, 24))
    assert min(s.scores[3], s.scores[4], s.scores[5]) > max(s.scores[6], s.scores[7], s.scores[8])


def test_fov_overlap_estimator_is_seeded_and_bounded(K832):
    a = FovOverlap(K832, 480, 832)
    b = FovOverlap(K832, 480, 832)
    q, h = np.eye(4), se3(rot_y(np.deg2rad(20)))
    assert a.pair(q, h) == b.pair(q, h)
    assert a.pair(q, q) == 1.0
    assert a.pair(q, se3(rot_y(np.pi))) == 0.0
    assert 0.0 < a.pair(q, h) < 1.0
    # a wider field of view overlaps more at the same rotation
    from trajectories.conventions import intrinsics_from_fov

    wide = FovOverlap(intrinsics_from_fov(100, 832, 480), 480, 832)
    assert wide.pair(q, h) > a.pair(q, h)
    # the batched matrix used by the selector equals the pairwise definition
    qs, hs = np.stack([q, h]), np.stack([h, q, se3(rot_y(np.deg2rad(-50)))])
    mat = a.overlap_matrix(qs, hs)
    assert np.allclose(mat, [[a.pair(x, y) for y in hs] for x in qs])


def test_bad_policy_config_names_the_field():
    with pytest.raises(ContextConfigError, match="recnt"):
        ContextPolicy.from_dict({"name": "sliding", "recnt": 3})
    with pytest.raises(ContextConfigError, match="name"):
        ContextPolicy.from_dict({"name": "lru"})
    with pytest.raises(ContextConfigError, match="sink"):
        ContextPolicy.from_dict({"name": "sliding", "sink": -1})


@pytest.mark.parametrize("frames", [289, 493])
@pytest.mark.parametrize("cycles", [("left", "left"), ("left", "left", "left")], ids=["lrlr", "lrlrlr"])
def test_departure_revisits_test_memory_beyond_the_sink(frames, cycles, K832):
    """The departure-revisit cases (evaluate.protocol.departure_revisit_windows) need latents no sink holds: the
    observers of the first departure's away view. Every chunk that generates a revisit of that view attends to all of
    them under FullKV, to some of them under FoV (retrieved by field-of-view overlap; one observer at the revisited
    pose re-projects the whole view on the reference model) and to none under Sliding (its 12-latent window has
    moved on): the order FullKV >= FoV > Sliding that the context study measures from the frames."""
    from evaluate.protocol import departure_revisit_windows

    p = build_path(TrajectorySpec(name="x", cycles=cycles), frames, 16, K832, 480, 832)
    lat = latent_poses(p.c2w)
    ref, revisits = departure_revisit_windows(p.c2w, p.phases)
    assert ref and len(revisits) == len(cycles) - 1
    observers = {i for i in range(len(lat)) if min(4 * i, frames - 1) in ref}  # latents anchored on the away view
    assert observers and min(observers) >= 4  # beyond the sink
    sel = {pol.name: ContextSelector(pol, lat, K832, 480, 832) for pol in (FULL, FOV, SLIDING)}
    for w in revisits:
        for k in sorted({-(-t // 4) // 4 for t in w}):  # frame t -> latent ceil(t / 4) -> chunk latent // 4
            ctx = {name: observers & set(s.select(k).context) for name, s in sel.items()}
            assert ctx["fullkv"] == observers, (k, ctx)
            assert ctx["fov"] and set(sel["fov"].select(k).retrieved) & observers, (k, ctx)
            assert not ctx["sliding"], (k, ctx)
            assert observers.isdisjoint(sel["sliding"].select(k).sink)


def test_context_analysis_pairs_the_bounded_policies_against_sliding(tmp_path):
    """The run's analyses: paired differences vs FullKV and, with Sliding in the run, FoV vs Sliding (same items)."""
    from evaluate.reporting.analyses import Analyses
    from evaluate.reporting.collect import items_of
    from evaluate.reporting.run_tables import analyses_markdown
    from evaluate.reporting.study import Study
    from evaluate.results import ItemResult

    rng = np.random.default_rng(0)
    base = {"fullkv": 0.99, "fov": 0.98, "sliding": 0.1}
    results = []
    for case in range(8):
        for pol, v in base.items():
            results.append((tmp_path / pol / f"c{case}", ItemResult.from_dict({
                "item": {"model": "m", "context": pol, "trajectory": "lrlr", "case_id": f"c{case}", "seed": 1},
                "timings_generation": {"generate_s": 1.0},
                "metrics": {"x": {"metric": "x", "status": "computed", "value": v + rng.normal(0, 0.01)}}})))
    items = items_of(tmp_path, results)
    an = Analyses(Study(items, {"n": 500, "seed": 0}, str))
    (c,) = an.comparisons
    assert c.pairs == [("sliding", "fullkv"), ("fov", "fullkv"), ("fov", "sliding")]
    d = c.metrics["x"].diffs[("fov", "sliding")]
    value = {p: [r.value("x") for _, r in results if r.item["context"] == p] for p in base}
    assert d.lo > 0.8 and d.mean == pytest.approx(np.mean(value["fov"]) - np.mean(value["sliding"]))
    md = analyses_markdown(an)
    assert "| sliding - fullkv | fov - fullkv | fov - sliding |" in md


# -- the overlap estimator against its definition -------------------------------------------------------------------

def _visible(points: np.ndarray, c2w: np.ndarray, K: np.ndarray, h: int, w: int, radius: float, near: float):
    """The module docstring's visibility, written out: in front (z > near), within ``radius`` of the camera centre
    and projecting inside the ``w`` x ``h`` image with the actual ``K`` (principal point included)."""
    pc = (points - c2w[:3, 3]) @ c2w[:3, :3]
    z = pc[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = K[0, 0] * pc[:, 0] / z + K[0, 2]
        v = K[1, 1] * pc[:, 1] / z + K[1, 2]
    return (z > near) & (np.linalg.norm(pc, axis=1) < radius) & (u >= 0) & (u < w) & (v >= 0) & (v < h)


def _overlap(est: FovOverlap, q: np.ndarray, hist: np.ndarray, K: np.ndarray, h: int, w: int,
             hist_radius: float | None = None) -> float:
    pts = est._local @ q[:3, :3].T + q[:3, 3]
    cfg = est.cfg
    vq = _visible(pts, q, K, h, w, cfg.radius, cfg.near)
    vh = _visible(pts, hist, K, h, w, cfg.radius if hist_radius is None else hist_radius, cfg.near)
    return float((vq & vh).sum() / vq.sum()) if vq.any() else 0.0


def test_overlap_matches_its_definition_for_cameras_that_also_move():
    """Translated history cameras (a camera 6 units behind sees points beyond its radius), non-square pixels and an
    off-centre principal point: the batched matrix and the pairwise form both equal the definition."""
    from harness.context import FovScoreConfig
    from trajectories.conventions import rot_x

    K = np.array([[300.0, 0.0, 250.0], [0.0, 420.0, 60.0], [0.0, 0.0, 1.0]])  # fy != fx, cy far above the centre
    h, w = 300, 400
    est = FovOverlap(K, h, w, FovScoreConfig(num_points=2048, radius=4.0, near=0.05, seed=3))
    qs = np.stack([np.eye(4), se3(rot_x(np.radians(15)), [0.5, 0.0, 0.3])])
    hist = np.stack([se3(np.eye(3), [0.0, 0.0, -6.0]),  # behind: only its radius keeps it from seeing everything
                     se3(np.eye(3), [0.0, 0.0, -1.5]), se3(rot_x(np.radians(20))), se3(rot_x(np.radians(-20))),
                     se3(rot_y(np.radians(30)), [1.0, 0.2, 0.0]), se3(np.eye(3), [0.0, 0.0, 9.0])])
    expected = np.array([[_overlap(est, q, x, K, h, w) for x in hist] for q in qs])
    assert np.allclose(est.overlap_matrix(qs, hist), expected)
    assert np.allclose([[est.pair(q, x) for x in hist] for q in qs], expected)
    # the far camera's own radius is what hides the query's points from it
    assert expected[0, 0] < 0.05 < _overlap(est, qs[0], hist[0], K, h, w, hist_radius=np.inf) - 0.1
    assert est.overlap_matrix(qs, hist[:0]).shape == (2, 0)


def test_overlap_points_are_uniform_in_the_ball():
    """Uniform in volume: |p|^3 / r^3 is uniform on [0, 1] (a radius drawn uniformly would crowd the centre), and
    directions are isotropic."""
    from scipy.stats import kstest

    from harness.context import FovScoreConfig

    est = FovOverlap(np.eye(3), 10, 10, FovScoreConfig(num_points=4096, radius=8.0, seed=0))
    r = np.linalg.norm(est._local, axis=1)
    assert r.max() <= 8.0
    assert kstest((r / 8.0) ** 3, "uniform").pvalue > 0.01
    assert np.abs(est._local.mean(axis=0)).max() < 0.25  # no preferred direction (sd of the mean ~0.07)
    assert np.mean(r < 4.0) == pytest.approx(1 / 8, abs=0.02)
    other = FovOverlap(np.eye(3), 10, 10, FovScoreConfig(num_points=4096, radius=8.0, seed=1))
    assert not np.array_equal(other._local, est._local)  # the seed decides the points


def test_overlap_of_a_camera_that_sees_nothing_is_zero():
    from harness.context import FovScoreConfig

    K = np.array([[100.0, 0.0, -500.0], [0.0, 100.0, -500.0], [0.0, 0.0, 1.0]])  # the image is off the frustum
    est = FovOverlap(K, 10, 10, FovScoreConfig(num_points=64))
    assert est.pair(np.eye(4), np.eye(4)) == 0.0
    assert est.overlap_matrix(np.eye(4)[None], np.eye(4)[None]).tolist() == [[0.0]]


def test_fov_score_config_limits():
    from harness.context import FovScoreConfig

    assert FovScoreConfig.from_dict({"num_points": 16, "radius": 0.1, "near": 0.01}).num_points == 16
    for bad in ({"num_points": 15}, {"radius": 0.0}, {"near": 0.0}, {"radius": -1.0}):
        with pytest.raises(ContextConfigError, match="num_points >= 16, radius > 0 and near > 0"):
            FovScoreConfig.from_dict(bad)
    with pytest.raises(ContextConfigError, match="context.fov.radiuss"):
        FovScoreConfig.from_dict({"radiuss": 1.0})
    assert FovScoreConfig().to_dict() == {"num_points": 4096, "radius": 8.0, "near": 0.05, "seed": 0}


def test_fov_never_retrieves_a_partial_chunk_or_exceeds_its_budget():
    """Regression (found by the property test): with a sink and recent window that are not multiples of the chunk,
    the gap between them can hold latents but no whole chunk; those latents used to be admitted all at once (4 here,
    over a retrieval budget of one 3-latent chunk). They are not retrievable, as the module says."""
    lat = se3(rot_y(np.radians(np.arange(12) * 10.0)))
    pol = ContextPolicy(name="fov", chunk=3, sink=1, recent=1, retrieved_chunks=1)
    sel = ContextSelector(pol, lat, np.array([[50.0, 0, 32], [0, 50.0, 24], [0, 0, 1]]), 48, 64)
    s = sel.select(2)  # latents 6..8; history 0..5: sink [0], recent [5], gap 1..4 holds no aligned chunk
    assert s.context == [0, 5] and s.retrieved == () and s.scores == {}
    s = sel.select(3)  # history 0..8: gap 1..7 holds chunk 1 (latents 3..5), the only candidate
    assert s.retrieved == (3, 4, 5) and len(s.context) <= pol.sink + pol.recent + pol.chunk


def test_visibility_boundaries_are_those_of_the_definition():
    """In front means z > near; within the radius means |p - c| < radius; inside the image means 0 <= u < width and
    0 <= v < height (pixel edges at 0 and width, +0.5 centres). Points exactly on each boundary, both for the
    single-camera test and for the batched matrix (whose points are set here to the same ones)."""
    from harness.context import FovScoreConfig

    K = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    est = FovOverlap(K, 2, 2, FovScoreConfig(num_points=16, radius=8.0, near=0.25))
    pts = np.array([
        [0.5, 0.5, 1.0],   # inside: visible
        [0.0, 0.5, 1.0],   # u = 0: visible
        [0.5, 0.0, 1.0],   # v = 0: visible
        [2.0, 0.5, 1.0],   # u = width: not
        [0.5, 2.0, 1.0],   # v = height: not
        [0.0, 0.0, 0.25],  # z = near: not
        [0.0, 0.0, 8.0],   # |p| = radius: not
        [0.1, 0.1, 0.5],   # inside
        [-0.1, 0.5, 1.0],  # left of the image
        [0.5, 0.5, -1.0],  # behind
    ])
    expected = [True, True, True, False, False, False, False, True, False, False]
    assert est.visible(np.eye(4), pts).tolist() == expected
    est._local = pts  # the batched path, on the same points
    h = se3(np.eye(3), [0.0, 0.0, 0.0])
    assert est.overlap_matrix(np.eye(4)[None], h[None]).tolist() == [[1.0]]
    shifted = se3(np.eye(3), [0.0, 0.0, -0.5])  # from 0.5 behind: the point at z = 0.25 becomes visible (0.75)
    want = (np.array(expected) & _visible(pts, shifted, K, 2, 2, 8.0, 0.25)).sum() / sum(expected)
    assert est.overlap_matrix(np.eye(4)[None], shifted[None])[0, 0] == pytest.approx(want)
    assert est.pair(np.eye(4), shifted) == pytest.approx(want)


def test_one_history_camera_is_scored_too(K832):
    est = FovOverlap(K832, 480, 832)
    h = se3(rot_y(np.deg2rad(20)))
    one = est.overlap_matrix(np.eye(4)[None], h[None])[0, 0]
    assert one == pytest.approx(est.pair(np.eye(4), h)) and one > 0.3


@pytest.mark.parametrize("bad, field", [({"sink": 1.5}, "sink"), ({"recent": -1}, "recent"), ({"chunk": 0}, "chunk"),
                                        ({"retrieved_chunks": True}, None), ({"rope": "shift"}, "rope"),
                                        ({"name": "fov", "retrieved_chunks": 0}, "retrieved_chunks")])
def test_policy_validation(bad, field):
    cfg = {"name": "sliding", **bad}
    if field is None:  # bool is an int: accepted as 1 (it is what YAML gives for "yes")
        assert ContextPolicy.from_dict(cfg).retrieved_chunks is True
        return
    with pytest.raises(ContextConfigError, match=f"context.{field}"):
        ContextPolicy.from_dict(cfg)


def test_policy_edge_values_that_are_allowed():
    ok = [{"name": "sliding", "sink": 0, "recent": 0, "chunk": 1}, {"name": "fov", "retrieved_chunks": 1},
          {"name": "sliding", "retrieved_chunks": 0}, {"name": "fullkv", "rope": "rebase", "description": "x"},
          {"name": "fov", "retrieved_chunks": 2, "fov": None}, {"name": "native"}]
    pols = [ContextPolicy.from_dict(d) for d in ok]
    assert pols[3].rope == "rebase" and pols[4].fov == ContextPolicy(name="fov").fov
    assert ContextPolicy.from_dict({"name": "fov", "retrieved_chunks": 1, "fov": {"num_points": 64}}).fov.num_points == 64
    assert [p.needs_full_history for p in pols] == [False, True, False, True, True, True]
    assert [p.budget for p in pols] == [1, 0 + 0 + 4 + 4, 4, None, 0 + 0 + 8 + 4, None]


def test_trace_scores_keep_six_decimals():
    from harness.context.policies import Selection

    t = Selection(3, (12, 13), sink=(0,), recent=(11,), retrieved=(4, 5), scores={2: 0.12345678, 1: 0.5}).to_trace()
    assert t == {"chunk": 3, "current": [12, 13], "context": [0, 4, 5, 11], "sink": [0], "recent": [11],
                 "retrieved": [4, 5], "scores": {"1": 0.5, "2": 0.123457}}


def test_fov_selection_anchors_latents_every_4_frames_and_refuses_a_partial_chunk(K832):
    from types import SimpleNamespace

    from harness.context.policies import fov_selection

    path = build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), 125, 16, K832, 480, 832)
    doc = fov_selection(FOV, path, 4)
    assert doc["num_latents"] == 32  # latent i carries frame 4i: frames 0, 4, ..., 124
    sel = ContextSelector(FOV, path.c2w[::4], K832, 480, 832)
    assert doc["chunks"] == [sel.select(k).to_trace() for k in range(sel.num_chunks)]
    assert doc["policy"] == FOV.to_dict() and doc["chunk"] == 4
    p = SimpleNamespace(c2w=path.c2w[:121], K=K832, height=480, width=832)  # 31 latents: not a multiple of 4
    with pytest.raises(ContextConfigError, match="31 latents are not a multiple of the 4-latent chunk"):
        fov_selection(FOV, p, 4)


def test_a_history_camera_sees_a_point_only_strictly_inside_its_boundaries():
    """The batched matrix applies the definition's strict bounds to the history cameras too: a point the query
    sees, lying exactly on a history camera's right edge (u = width), bottom edge (v = height), near plane
    (z = near) or radius, is not seen by it; moved 0.1 inside, it is."""
    from harness.context import FovScoreConfig

    est = FovOverlap(np.eye(3), 2, 2, FovScoreConfig(num_points=16, radius=8.0, near=0.25))
    q = np.eye(4)[None]
    est._local = np.array([[0.5, 0.5, 1.0]])  # seen by the query (u = v = 0.5, z = 1)
    on = [se3(np.eye(3), t) for t in ([-1.5, 0, 0], [0, -1.5, 0])]  # u = 2, v = 2
    inside = [se3(np.eye(3), t) for t in ([-1.4, 0, 0], [0, -1.4, 0])]
    assert est.overlap_matrix(q, np.stack(on)).tolist() == [[0.0, 0.0]]
    assert est.overlap_matrix(q, np.stack(inside)).tolist() == [[1.0, 1.0]]
    est._local = np.array([[0.1, 0.1, 1.0]])  # at z = 0.25 from the history camera: u = v = 0.4, inside the image
    near = np.stack([se3(np.eye(3), [0, 0, 0.75]), se3(np.eye(3), [0, 0, 0.7])])  # z = near, z = 0.3
    assert est.overlap_matrix(q, near).tolist() == [[0.0, 1.0]]
    est._local = np.array([[0.0, 0.0, 1.0]])
    far = np.stack([se3(np.eye(3), [0, 0, -7.0]), se3(np.eye(3), [0, 0, -6.9])])  # |p - c| = 8 = radius, 7.9
    assert est.overlap_matrix(q, far).tolist() == [[0.0, 1.0]]


# -- exact messages the mutation run found unpinned ------------------------------------------------------------------

@pytest.mark.parametrize("bad", [{"num_points": 15}, {"radius": 0.0}, {"near": -0.5}])
def test_an_out_of_range_fov_estimator_setting_gets_the_one_limits_message_without_its_key_or_value(bad):
    from harness.context import FovScoreConfig

    with pytest.raises(ContextConfigError) as e:
        FovScoreConfig.from_dict(bad)
    assert str(e.value) == "context.fov: need num_points >= 16, radius > 0 and near > 0"


def test_a_fov_policy_that_does_not_name_retrieved_chunks_is_refused_with_the_fields_fix():
    with pytest.raises(ContextConfigError) as e:
        ContextPolicy.from_dict({"name": "fov", "sink": 4, "recent": 4})
    assert str(e.value) == "context.retrieved_chunks=0: must be >= 1 for the fov policy"
