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
