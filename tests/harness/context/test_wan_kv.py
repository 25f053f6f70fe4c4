"""The harness KV cache and context policies on diffusers' real WanTransformer3DModel (tiny random-weight config),
proven as the tiny DiT is: a cached causal chunked rollout equals masked full attention at every step."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from harness.context import ContextPolicy, ContextSelector
from harness.context.kv_cache import KVCache
from harness.context.wan_kv import (
    WanKV,
    attended_frame_mask,
    check_matches_stock_processor,
    rope_at,
    tiny_wan,
    wan_generate,
)
from trajectories import TrajectorySpec, build_path, latent_poses
from trajectories.conventions import intrinsics_from_fov

H, W = 32, 48          # pixel canvas of the pose-level FoV test
LATENT_HW = (4, 6)     # latent grid: patch (1, 2, 2) -> 6 tokens per latent frame
POLICIES = {
    "fullkv": ContextPolicy(name="fullkv"),
    "sliding": ContextPolicy(name="sliding", sink=4, recent=12),
    "fov": ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2),
}
# Regression slices (float32, CPU): latents[0, :, -1, 0, :2] of the seeded fov rollout below, and the tiny DiT's
# latents[-1, 0, 0, :4] in tests/harness/context/test_kv_cache.py's configuration (97 frames, fov, seed 7). A change of the model
# code, the cache, the policy selection or the sampler moves them.
WAN_FOV_SLICE = [-0.697853, -0.572297, -0.737420, -0.054866, 0.161206, -0.361995, -1.377252, 2.570525]
TINY_DIT_FOV_SLICE = [0.589804, -0.457780, 0.392097, -1.593621]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """diffusers, or this file's tests are skipped (imported when they run, not at collection: seconds in every
    xdist worker); one intra-op thread: tiny tensors gain nothing from more, and on a loaded machine extra threads
    make every op wait for a core (25x slower here)."""
    pytest.importorskip("diffusers")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _setup(frames=129):
    K = intrinsics_from_fov(60, W, H)
    lat = latent_poses(build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), frames, 16, K, H, W).c2w)
    g = torch.Generator().manual_seed(1)
    first = torch.randn(4, *LATENT_HW, generator=g)
    text = torch.randn(1, 5, 16, generator=g)
    return lat, K, first, text


def test_masked_processor_is_wans_own_attention():
    """Under an all-true mask the harness processor reproduces diffusers' stock WanAttnProcessor exactly, so the
    masked reference below is the real Wan attention plus a mask."""
    assert check_matches_stock_processor(tiny_wan(), LATENT_HW, frames=3) <= 1e-6
    m = tiny_wan(layers=1)  # one layer: the last frame's output depends on the mask only through its own row
    wan = WanKV(m, LATENT_HW)
    x = torch.randn(1, 4, 3, *LATENT_HW)
    t, text = torch.rand(3), torch.randn(1, 5, 16)
    full = wan.forward_masked(x, t, text, np.ones((3, 3), bool))
    causal = wan.forward_masked(x, t, text, np.tril(np.ones((3, 3), bool)))
    assert torch.allclose(full[:, :, 2], causal[:, :, 2], atol=1e-6)  # the last frame sees everything either way
    assert not torch.allclose(full[:, :, 0], causal[:, :, 0], atol=1e-4)  # the mask really restricts
    cos, sin = rope_at(m.rope, [0, 1, 2], 2, 3)
    stock = m.rope(x)
    assert torch.equal(cos, stock[0]) and torch.equal(sin, stock[1])  # absolute positions = stock for 0..F-1
    cos5, _ = rope_at(m.rope, [5], 2, 3)
    assert torch.equal(cos5[0, :6, 0, : m.rope.t_dim], m.rope.freqs_cos[5, : m.rope.t_dim].expand(6, -1))


@pytest.mark.parametrize("name", list(POLICIES))
def test_cached_rollout_equals_masked_full_attention(name):
    lat, K, first, text = _setup()
    pol = POLICIES[name]
    wan = WanKV(tiny_wan(), LATENT_HW)
    ro = wan_generate(wan, first, lat, K, (H, W), pol, seed=3, text=text, capture=True)
    mask = attended_frame_mask(ContextSelector(pol, lat, K, H, W))
    worst = 0.0
    for st in ro.steps:  # every chunk, every step, of the whole rollout
        k = st["chunk"]
        start, end = 4 * k, min(4 * k + 4, len(lat))
        x = torch.cat([ro.latents[:, :, :start], st["x"]], dim=2)
        t = torch.cat([torch.zeros(start), st["t"]])
        v = wan.forward_masked(x, t, text, mask[:end, :end])[:, :, start:end]
        worst = max(worst, float((v - st["v"]).abs().max()))
    assert worst <= 1e-5, worst
    assert len(ro.steps) == 2 * len(ro.trace) == 2 * 9
    if name == "sliding":
        assert ro.cache_peak_frames == 20  # memory-bounded: sink + recent + chunk
    else:
        assert ro.cache_peak_frames == len(lat)
    if name == "fov":
        assert any(e["retrieved"] for e in ro.trace)  # retrieval happened


def test_trace_is_what_the_wan_layers_gathered(monkeypatch):
    lat, K, first, text = _setup(97)
    seen = []
    orig = KVCache.gather

    def spy(self, layer, frames):
        if layer == 1:  # the last layer gathers exactly what the first does
            seen.append(list(frames))
        return orig(self, layer, frames)

    monkeypatch.setattr(KVCache, "gather", spy)
    ro = wan_generate(WanKV(tiny_wan(), LATENT_HW), first, lat, K, (H, W), POLICIES["fov"], seed=1, text=text)
    passes = 3  # 2 denoising steps + the refresh
    assert len(seen) == passes * len(ro.trace)
    for k, entry in enumerate(ro.trace):
        assert all(g == entry["context"] for g in seen[k * passes:(k + 1) * passes])
        assert all(i < entry["current"][0] for i in entry["context"])  # nothing from the future
        if entry["current"][0] >= 20 and len(entry["current"]) == 4:
            assert len(entry["context"]) + 4 == 20 and entry["context"][:4] == [0, 1, 2, 3]  # budget; sink kept
    assert any(e["current"][0] >= 20 and len(e["current"]) == 4 for e in ro.trace)  # a steady-state chunk exists


def test_the_rope_tables_hold_the_rollout_exactly_and_one_latent_more_is_named():
    """A rollout of L latents needs L temporal positions: a table of exactly L gives the default table's latents
    bit for bit (a table's rows do not depend on its length), one latent more is refused by name before any step
    (it failed deep in torch: ``harness.bench context --model wan --frames 4097`` on Wan's 1024 positions)."""
    import inspect

    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel

    lat, K, first, text = _setup(21)
    L = len(lat)
    default = inspect.signature(WanTransformer3DModel.__init__).parameters["rope_max_seq_len"].default
    assert WanKV(tiny_wan(), LATENT_HW).positions == default  # Wan's own table unless asked
    exact = WanKV(tiny_wan(rope_positions=L), LATENT_HW)
    assert exact.positions == L
    a = wan_generate(exact, first, lat, K, (H, W), POLICIES["fullkv"], seed=3, text=text).latents
    b = wan_generate(WanKV(tiny_wan(), LATENT_HW), first, lat, K, (H, W), POLICIES["fullkv"], seed=3, text=text).latents
    assert torch.equal(a, b)
    short = WanKV(tiny_wan(rope_positions=L - 1), LATENT_HW)
    with pytest.raises(ValueError, match=f"a rollout of {L} latents needs RoPE tables of at least {L} positions; "
                                         f"this model's have {L - 1}"):
        wan_generate(short, first, lat, K, (H, W), POLICIES["fullkv"], seed=3, text=text)
    with pytest.raises(ValueError, match="a latent grid of 2x3 patches needs RoPE tables of at least 3 positions; "
                                         "this model's have 2"):
        WanKV(tiny_wan(rope_positions=2), LATENT_HW)
    assert WanKV(tiny_wan(rope_positions=3), LATENT_HW).positions == 3


def test_wan_rollout_regression_slice_and_seed():
    lat, K, first, text = _setup(65)
    wan = WanKV(tiny_wan(), LATENT_HW)
    a = wan_generate(wan, first, lat, K, (H, W), POLICIES["fov"], seed=7, text=text).latents
    b = wan_generate(WanKV(tiny_wan(), LATENT_HW), first, lat, K, (H, W), POLICIES["fov"], seed=7, text=text).latents
    c = wan_generate(wan, first, lat, K, (H, W), POLICIES["fov"], seed=8, text=text).latents
    assert torch.equal(a, b) and not torch.equal(a, c)
    got = a[0, :, -1, 0, :2].flatten().tolist()
    np.testing.assert_allclose(got, WAN_FOV_SLICE, atol=1e-4)


def test_rope_rebase_moves_cached_keys_like_computing_them_there():
    m = tiny_wan()
    k = torch.randn(1, 3 * 6, 2, 12)  # 3 frames of 6 tokens
    cos, sin = rope_at(m.rope, [10, 11, 12], 2, 3)
    from harness.context.wan_kv import _rotate_pairs, shift_temporal

    def at(c, s):
        return _rotate_pairs(k, c[..., 0::2], s[..., 0::2])

    moved = shift_temporal(at(cos, sin), [-3, 2, 0], m.rope, 6)
    cos2, sin2 = rope_at(m.rope, [7, 13, 12], 2, 3)
    assert torch.allclose(moved, at(cos2, sin2), atol=1e-5)
    lat, K, first, text = _setup(97)
    wan = WanKV(m, LATENT_HW)
    rebase = ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2, rope="rebase")
    a = wan_generate(wan, first, lat, K, (H, W), POLICIES["fov"], seed=7, text=text).latents
    r = wan_generate(wan, first, lat, K, (H, W), rebase, seed=7, text=text).latents
    assert not torch.equal(a, r)  # rebasing moves retrieved keys, so it changes the rollout


def test_tiny_dit_regression_slice():
    from adapters.tiny_causal_dit.model import TinyCausalDiT, TinyDiTConfig, generate

    cfg = TinyDiTConfig(dim=32, heads=2, layers=2, steps=(1.0, 0.5))
    K = intrinsics_from_fov(60, W, H)
    lat = latent_poses(build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), 97, 16, K, H, W).c2w)
    image = np.random.default_rng(0).integers(0, 255, size=(H, W, 3), dtype=np.uint8)
    ro = generate(TinyCausalDiT(cfg), image, lat, K, POLICIES["fov"], seed=7)
    got = ro.latents[-1, 0, 0, :4].tolist()
    np.testing.assert_allclose(got, TINY_DIT_FOV_SLICE, atol=1e-4)


def test_context_benchmark_runs_on_the_wan_path(capsys):
    """Smoke test of ``python -m harness.bench context --model wan`` at a toy size (the numbers are not checked:
    speed is measured by the benchmark, never by tests)."""
    import argparse

    from harness.app.benchmarks.context import run

    args = argparse.Namespace(frames=97, device="cpu", repeats=2, model="wan", lengths=[], threads=None, size=32,
                              dim=24, heads=2, layers=1, dtype="float32")
    assert run(args) == 0
    out = capsys.readouterr().out
    assert "min / median over repeats" in out
    assert out.count("of bound; per-chunk slope") == 2  # sliding and fov verdicts


# -- edges the mutation run found unpinned --------------------------------------------------------------------------

def test_rollout_defaults_timer_capacity_and_the_clean_first_latent():
    """No capture by default; a timer passed in is the one filled (small per-chunk durations, not clock
    readings); a bounded policy's cache holds sink + recent + chunk frames only; the conditioning latent is
    denoised at t = 0 in every step; frame 0 of the output is the conditioning latent."""
    from harness.context.kv_cache import AttentionTimer

    lat, K, first, text = _setup(33)
    wan = WanKV(tiny_wan(), LATENT_HW)
    sliding = ContextPolicy(name="sliding", sink=1, recent=2)
    timer = AttentionTimer()
    ro = wan_generate(wan, first, lat, K, (H, W), sliding, seed=1, text=text, timer=timer)
    assert ro.steps == [] and len(timer.per_chunk) == len(ro.trace) == 3
    assert ro.attention_per_chunk is timer.per_chunk and all(0 < s < 60 for s in timer.per_chunk)
    per_frame = 2 * 2 * wan.S * 2 * 12 * 4  # layers x (k, v) x tokens x heads x head_dim x float32
    assert ro.cache_bytes == (1 + 2 + 4) * per_frame  # capacity sink + recent + chunk, not all 9 latents
    cap = wan_generate(wan, first, lat, K, (H, W), sliding, seed=1, text=text, capture=True)
    assert [float(s["t"][0]) for s in cap.steps if s["chunk"] == 0] == [0.0, 0.0]
    assert torch.equal(cap.latents[0, :, 0], first)


def test_euler_steps_follow_the_schedule_of_any_length():
    """x_{i+1} = x_i + (t_{i+1} - t_i) v_i with t after the last step 0: three steps (1.0, 0.6, 0.3), where the
    next time is not the previous one."""
    lat, K, first, text = _setup(21)
    wan = WanKV(tiny_wan(), LATENT_HW)
    steps = (1.0, 0.6, 0.3)
    ro = wan_generate(wan, first, lat, K, (H, W), POLICIES["fullkv"], seed=2, text=text, steps=steps, capture=True)
    for chunk in range(len(ro.trace)):
        log = [s for s in ro.steps if s["chunk"] == chunk]
        assert [round(float(s["t"][-1]), 6) for s in log] == list(steps)
        for i in range(len(steps) - 1):
            want = log[i]["x"] + (steps[i + 1] - steps[i]) * log[i]["v"]
            assert torch.allclose(log[i + 1]["x"][:, :, 1:], want[:, :, 1:], atol=1e-6)


def test_forward_chunk_writes_only_when_asked_and_rebases_by_the_position_difference():
    """The default pass attends without storing; ``context_positions`` moves each cached key by its position
    minus its frame (a key at frame 1 shown at position 5 is rotated by +4, as if computed at 5)."""
    from harness.context.wan_kv import shift_temporal

    m = tiny_wan(layers=1)
    wan = WanKV(m, LATENT_HW)
    cache = KVCache(1, wan.S, 2, 12, capacity=8)
    x, text = torch.randn(1, 4, 2, *LATENT_HW), torch.randn(1, 5, 16)
    t = torch.zeros(2)
    wan.forward_chunk(x, t, text, [0, 1], cache, [])
    assert cache.frames == []
    wan.forward_chunk(x, t, text, [0, 1], cache, [], True)
    assert cache.frames == [0, 1]
    seen = []
    orig = shift_temporal

    def spy(k, shifts, rope, S):
        seen.append(list(shifts))
        return orig(k, shifts, rope, S)

    import harness.context.wan_kv as wk

    wk.shift_temporal, prev = spy, wk.shift_temporal
    try:
        wan.forward_chunk(x[:, :, :1], t[:1], text, [6], cache, [0, 1], context_positions={0: 0, 1: 5})
    finally:
        wk.shift_temporal = prev
    assert seen == [[0, 4]]


def test_temporal_shift_on_a_wider_rope():
    """Head size 24 (8 temporal channels, 4 pairs): the shift still equals computing the keys at the new
    positions, which holds only if exactly one angle per pair is taken from the tables."""
    from harness.context.wan_kv import _rotate_pairs, shift_temporal

    m = tiny_wan(heads=1, head_dim=24)
    assert m.rope.t_dim == 8
    k = torch.randn(1, 2 * 6, 1, 24)
    cos, sin = rope_at(m.rope, [10, 11], 2, 3)
    moved = shift_temporal(_rotate_pairs(k, cos[..., 0::2], sin[..., 0::2]), [-3, 2], m.rope, 6)
    cos2, sin2 = rope_at(m.rope, [7, 13], 2, 3)
    assert torch.allclose(moved, _rotate_pairs(k, cos2[..., 0::2], sin2[..., 0::2]), atol=1e-5)


def test_tiny_wan_dtype_and_chunk_noise_of_large_seeds():
    """tiny_wan casts to the dtype asked for; chunk noise folds seed * 1_000_003 + chunk into [0, 2^63 - 1), so a
    seed beyond 2^63 still gives the documented stream."""
    from harness.context.wan_kv import chunk_noise

    assert next(tiny_wan(layers=1, dtype=torch.float64).parameters()).dtype == torch.float64
    seed = 2**62 + 12345
    want = torch.randn(5, generator=torch.Generator().manual_seed((seed * 1_000_003 + 3) % (2**63 - 1)))
    assert torch.equal(chunk_noise(seed, 3, (5,)), want)
    assert not torch.equal(chunk_noise(seed, 4, (5,)), want)


def test_the_stock_processor_check_reports_the_largest_difference(monkeypatch):
    """The check returns the max |stock - ours|: one output element off by 0.5 reads 0.5."""
    orig = WanKV.forward_masked

    def off(self, x, t, text, mask):
        out = orig(self, x, t, text, mask).clone()
        out.view(-1)[7] += 0.5
        return out

    monkeypatch.setattr(WanKV, "forward_masked", off)
    assert abs(check_matches_stock_processor(tiny_wan(layers=1), LATENT_HW) - 0.5) < 1e-4


def test_the_attention_timer_waits_for_cuda_kernels_before_it_reads_the_clock(monkeypatch):
    """On a GPU the attention call returns before its kernels finish: the timer synchronises first, so the time it
    records covers the kernels (here a fake clock that a synchronise moves by 5 s, and an output that says it is
    on CUDA). On a CPU nothing is synchronised."""
    from harness.context import wan_kv
    from harness.context.kv_cache import AttentionTimer
    from tests.support.clocks import fake_cuda_attention

    synced, claim_cuda = fake_cuda_attention(monkeypatch, wan_kv.time)
    attn = tiny_wan(layers=1).blocks[0].attn1
    x = torch.randn(1, 6, attn.to_q.in_features)
    for on_cuda, expected in ((False, 0.0), (True, 5.0)):
        claim_cuda(on_cuda)
        timer = AttentionTimer()
        state = wan_kv.WanKVState(frame_seqlen=6, mode="masked", token_mask=torch.ones(6, 6, dtype=torch.bool), timer=timer)
        wan_kv.WanKVAttnProcessor(state, 0)(attn, x)
        assert timer.current == expected and len(synced) == int(on_cuda)


# -- cached mode's preconditions and the lazy heavy imports ----------------------------------------------------------

@pytest.mark.parametrize("missing", ["cache", "rope", "both"])
def test_a_cached_mode_attention_call_without_its_cache_or_the_models_rope_is_refused(missing):
    """Cached mode needs both the KV cache and the model's rope: lacking either (or both) raises the one message,
    before anything is gathered."""
    from harness.context import wan_kv

    m = tiny_wan(layers=1)
    attn = m.blocks[0].attn1
    cache = KVCache(1, 6, 2, 12, capacity=8)
    state = wan_kv.WanKVState(frame_seqlen=6, mode="cached", frames=[0],
                              cache=None if missing in ("cache", "both") else cache,
                              rope=None if missing in ("rope", "both") else m.rope)
    with pytest.raises(ValueError) as e:
        wan_kv.WanKVAttnProcessor(state, 0)(attn, torch.randn(1, 6, attn.to_q.in_features))
    assert str(e.value) == "WanKVState in cached mode needs its cache and the model's rope"


def test_importing_the_wan_module_imports_neither_torch_nor_diffusers(monkeypatch):
    """torch and diffusers are imported lazily, at run time: with both made unimportable (``None`` in
    ``sys.modules``), a fresh import of ``harness.context.wan_kv`` still succeeds and defines its entry points."""
    import importlib
    import sys

    import harness.context

    before = sys.modules["harness.context.wan_kv"]
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "diffusers", None)
    monkeypatch.delitem(sys.modules, "harness.context.wan_kv")
    monkeypatch.setattr(harness.context, "wan_kv", before)  # the package attribute the import rebinds
    fresh = importlib.import_module("harness.context.wan_kv")
    assert fresh is not before and callable(fresh.WanKV) and callable(fresh.wan_generate)
