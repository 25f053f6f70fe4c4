"""Property-based tests of the KV-context policies (harness/context/policies.py): for any rollout length, chunk
size, sink, recent window, retrieval budget and camera path, a chunk's context is a set of earlier latents of the
size the policy promises (docs/context.md)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.context import ContextPolicy, ContextSelector, FovScoreConfig
from trajectories.conventions import intrinsics_from_fov, rot_x, rot_y, se3

K = intrinsics_from_fov(70.0, 64, 48)


@st.composite
def rollouts(draw, name):
    chunk = draw(st.integers(1, 5))
    num = draw(st.integers(1, 60))
    pol = ContextPolicy(name=name, chunk=chunk, sink=draw(st.integers(0, 9)), recent=draw(st.integers(0, 13)),
                        retrieved_chunks=draw(st.integers(1, 3)) if name == "fov" else 0,
                        fov=FovScoreConfig(num_points=64, seed=draw(st.integers(0, 3))))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    yaw = np.cumsum(rng.normal(0, 25, num))
    pitch = np.clip(np.cumsum(rng.normal(0, 5, num)), -60, 60)
    pos = np.cumsum(rng.normal(0, 0.2, (num, 3)), axis=0)
    lat = se3(rot_y(np.radians(yaw)) @ rot_x(np.radians(pitch)), pos)
    return pol, lat


def _check_common(sel: ContextSelector, k: int):
    s = sel.select(k)
    c = sel.policy.chunk
    start = k * c
    assert list(s.current) == list(range(start, min(start + c, sel.num_latents)))
    ctx = s.context
    assert ctx == sorted(set(ctx)) and all(0 <= i < start for i in ctx)  # earlier latents only, no repeats
    assert s.attended == sorted(set(ctx) | set(s.current))
    return s, start


@settings(max_examples=40)
@given(rollouts("fullkv"))
def test_fullkv_attends_to_the_whole_history(case):
    pol, lat = case
    sel = ContextSelector(pol, lat, K, 48, 64)
    for k in range(sel.num_chunks):
        s, start = _check_common(sel, k)
        assert s.context == list(range(start))
    assert pol.budget is None


@settings(max_examples=60)
@given(rollouts("sliding"))
def test_sliding_keeps_the_sink_and_the_recent_window_exactly(case):
    pol, lat = case
    sel = ContextSelector(pol, lat, K, 48, 64)
    assert sel.num_chunks == -(-len(lat) // pol.chunk)
    for k in range(sel.num_chunks):
        s, start = _check_common(sel, k)
        sink = list(range(min(pol.sink, start)))
        assert list(s.sink) == sink
        assert list(s.recent) == list(range(max(len(sink), start - pol.recent), start))
        assert len(s.context) == min(start, pol.sink + pol.recent)  # the promised size, reached as soon as possible
        assert s.retrieved == ()
        assert len(s.context) + pol.chunk <= pol.budget


@settings(max_examples=60)
@given(rollouts("fov"))
def test_fov_adds_at_most_its_retrieval_budget_of_whole_chunks_between_sink_and_recent(case):
    pol, lat = case
    sel = ContextSelector(pol, lat, K, 48, 64)
    c = pol.chunk
    for k in range(sel.num_chunks):
        s, start = _check_common(sel, k)
        sink = list(range(min(pol.sink, start)))
        assert list(s.sink) == sink
        assert list(s.recent) == list(range(max(len(sink), start - pol.recent), start))
        lo, hi = len(sink), (s.recent[0] if s.recent else start)
        r = list(s.retrieved)
        assert set(r).isdisjoint(s.sink) and set(r).isdisjoint(s.recent) and all(lo <= i < hi for i in r)
        assert len(s.context) <= pol.sink + pol.recent + pol.retrieved_chunks * c  # the promised budget
        assert len(s.context) + c <= pol.budget
        whole = [j for j in range(sel.num_chunks) if j * c >= lo and (j + 1) * c <= hi]  # candidate chunks
        if whole:
            assert len(r) == c * min(pol.retrieved_chunks, len(whole))
            chunks = sorted({i // c for i in r})
            assert chunks and all(set(range(j * c, (j + 1) * c)) <= set(r) for j in chunks)  # whole chunks only
            assert set(s.scores) == set(whole) and all(0.0 <= v <= 1.0 for v in s.scores.values())
            # the retrieved chunks are the best-scoring ones (ties to the more recent chunk)
            best = sorted(whole, key=lambda j: (-s.scores[j], -j))[: pol.retrieved_chunks]
            assert chunks == sorted(best)


@settings(max_examples=30)
@given(rollouts("fov"))
def test_a_selection_depends_only_on_the_poses_up_to_its_chunk(case):
    """Causality: changing the poses of later latents never changes an earlier chunk's selection."""
    pol, lat = case
    sel = ContextSelector(pol, lat, K, 48, 64)
    later = lat.copy()
    k = sel.num_chunks // 2
    cut = min((k + 1) * pol.chunk, len(lat))
    later[cut:] = se3(rot_y(np.full(len(lat) - cut, 2.0)))
    other = ContextSelector(pol, later, K, 48, 64)
    for j in range(k + 1):
        assert sel.select(j).to_trace() == other.select(j).to_trace()
