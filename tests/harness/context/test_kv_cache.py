"""Tensor-level KV-context policies on the tiny causal DiT, and the LingBot-World v2 FoV shim."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from adapters.tiny_causal_dit.model import (  # noqa: E402
    TinyCausalDiT,
    TinyDiTConfig,
    TinyVAE,
    context_mask,
    generate,
    rope_rotate,
)
from harness.context import ContextPolicy, ContextSelector  # noqa: E402
from harness.context.kv_cache import KVCache, RopeMode  # noqa: E402
from trajectories import TrajectorySpec, build_path, latent_poses  # noqa: E402
from trajectories.conventions import intrinsics_from_fov, yaw_pitch_from_rotmat  # noqa: E402

H, W = 32, 48
CFG = TinyDiTConfig(dim=32, heads=2, layers=2, steps=(1.0, 0.5))
POLICIES = {
    "fullkv": ContextPolicy(name="fullkv"),
    "sliding": ContextPolicy(name="sliding", sink=4, recent=12),
    "fov": ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2),
}


def _latents(n_frames=161):
    K = intrinsics_from_fov(60, W, H)
    p = build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), n_frames, 16, K, H, W)
    return p, latent_poses(p.c2w), K


@pytest.fixture(scope="module")
def image():
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, size=(H, W, 3), dtype=np.uint8)


@pytest.mark.parametrize("name", list(POLICIES))
def test_cached_rollout_equals_masked_attention_without_cache(name, image):
    _, lat, K = _latents()
    model = TinyCausalDiT(CFG)
    pol = POLICIES[name]
    ro = generate(model, image, lat, K, pol, seed=3, capture=True)
    mask = context_mask(ContextSelector(pol, lat, K, H, W))
    from adapters.tiny_causal_dit.model import camera_maps

    cam = camera_maps(lat, K, H, W, CFG)
    worst = 0.0
    for st in ro.steps:  # every chunk, every step, of the whole rollout
        k = st["chunk"]
        start, end = 4 * k, min(4 * k + 4, len(lat))
        x = torch.cat([ro.latents[:start], st["x"]])
        t = torch.cat([torch.zeros(start), st["t"]])
        v = model.forward_masked(x, t, cam[:end], mask[:end, :end])[start:end]
        worst = max(worst, float((v - st["v"]).abs().max()))
    assert worst <= 1e-5, worst
    if name == "fullkv":
        assert mask[-1, : len(lat) - 4].all()  # the full chunk-causal mask


@pytest.mark.parametrize("name", ["sliding", "fov"])
def test_budgets_sink_no_future_and_trace_matches_the_gathers(name, image, monkeypatch):
    _, lat, K = _latents()
    pol = POLICIES[name]
    seen: list[list[int]] = []
    orig = KVCache.gather

    def spy(self, layer, frames):
        if layer == 0:
            seen.append(list(frames))
        return orig(self, layer, frames)

    monkeypatch.setattr(KVCache, "gather", spy)
    ro = generate(TinyCausalDiT(CFG), image, lat, K, pol, seed=1)
    passes = len(CFG.steps) + 1
    assert len(seen) == passes * len(ro.trace)
    for k, entry in enumerate(ro.trace):
        gathered = seen[k * passes : (k + 1) * passes]
        assert all(g == entry["context"] for g in gathered)  # every step and the refresh use the same selection
        assert all(i < entry["current"][0] for i in entry["context"])  # nothing from the future
        if entry["current"][0] >= 20 and len(entry["current"]) == 4:
            assert len(entry["context"]) + len(entry["current"]) == 20  # 20 latents at steady state
            assert entry["context"][:4] == [0, 1, 2, 3]  # the sink is never evicted
    if name == "sliding":
        assert ro.cache_peak_frames == 20  # memory-bounded
    else:
        assert ro.cache_peak_frames == len(lat)  # FoV keeps the history it may retrieve


def test_fov_retrieval_follows_the_view_sliding_does_not():
    p, lat, K = _latents(493)
    yaw = np.degrees(yaw_pitch_from_rotmat(lat[:, :3, :3])[0])
    fov = ContextSelector(POLICIES["fov"], lat, K, H, W)
    sld = ContextSelector(POLICIES["sliding"], lat, K, H, W)
    v = range(0, p.phases["V"][1] // 4 + 1)
    d2_end = (p.phases["D2"][1] - 1) // 4 // 4  # chunk at the far end of the second left departure
    s = fov.select(d2_end)
    first_cycle = set(range(p.phases["D1"][0] // 4, p.phases["R1"][1] // 4 + 1))
    assert set(s.retrieved) <= first_cycle, (s.retrieved, sorted(first_cycle))  # from the first left departure
    assert (yaw[list(s.retrieved)] < -45).all()  # chunks that looked left, like the current one
    back = (p.phases["R2"][1] - 1) // 4 // 4  # back at the start pose
    s = fov.select(back)
    assert np.abs(yaw[list(s.retrieved)]).max() < 20  # chunks that looked at the initial view
    assert set(s.retrieved) & (set(v) | set(range(p.phases["R1"][0] // 4, p.phases["R1"][1] // 4)))
    for k in (d2_end, back):
        ctx = sld.select(k).context
        assert set(ctx) - set(range(4)) == set(range(4 * k - 12, 4 * k))  # only sink + recent


def test_same_seed_bit_identical_and_rope_rebase(image):
    _, lat, K = _latents()
    model = TinyCausalDiT(CFG)
    a = generate(model, image, lat, K, POLICIES["fov"], seed=7).latents
    b = generate(TinyCausalDiT(CFG), image, lat, K, POLICIES["fov"], seed=7).latents
    c = generate(model, image, lat, K, POLICIES["fov"], seed=8).latents
    assert torch.equal(a, b) and not torch.equal(a, c)
    # RoPE composes: rotating cached keys by delta equals computing them at the rebased position
    x = torch.randn(10, 2, 8, dtype=torch.float32)
    f = model.blocks[0].freq_t[:4]
    pos, delta = torch.arange(10), torch.full((10,), -3)
    assert torch.allclose(rope_rotate(rope_rotate(x, pos, f), delta, f), rope_rotate(x, pos + delta, f), atol=1e-5)
    rb = ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2, rope="rebase")
    r = generate(model, image, lat, K, rb, seed=7).latents
    assert not torch.equal(r, a)  # rebasing moves retrieved keys, so it changes the rollout
    assert RopeMode("rebase").positions([0, 1, 8, 9, 20, 21], [8, 9], [20, 21]) == {0: 0, 1: 1, 8: 18, 9: 19,
                                                                                    20: 20, 21: 21}


def test_kv_cache_gather_contiguous_and_bounded():
    c = KVCache(1, 2, 1, 2, capacity=3, mode="bounded")
    for f in range(3):
        c.write(0, f, torch.full((1, 2, 1, 2), float(f)), torch.full((1, 2, 1, 2), float(f)))
    k, _ = c.gather(0, [0, 1, 2])
    assert k.data_ptr() == c.k[0].data_ptr() and k[0, :, 0, 0].tolist() == [0, 0, 1, 1, 2, 2]
    with pytest.raises(RuntimeError):
        c.write(0, 3, torch.zeros(1, 2, 1, 2), torch.zeros(1, 2, 1, 2))
    c.evict([0, 2])
    c.write(0, 3, torch.full((1, 2, 1, 2), 3.0), torch.full((1, 2, 1, 2), 3.0))
    k, _ = c.gather(0, [0, 3, 2])
    assert k[0, :, 0, 0].tolist() == [0, 0, 3, 3, 2, 2]
    with pytest.raises(KeyError):
        c.gather(0, [1])


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.slow
def test_cli_tiny_dit_deterministic_across_two_processes(tmp_path):
    import subprocess

    from tests.support import run_cli

    base = ["model=tiny_causal_dit", "model.height=32", "model.width=48", "model.num_frames=97", "context=fov",
            "cases.include=[environment_rocket,human_astronaut]", "progress=false"]
    assert run_cli([*base, "run=one"], tmp_path).returncode == 0
    procs = [subprocess.Popen([sys.executable, "-m", "harness", *base, "run=two", f"shard={i}/2"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(2)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    one = sorted((tmp_path / "outputs" / "one").rglob("video.mp4"))
    two = sorted((tmp_path / "outputs" / "two").rglob("video.mp4"))
    assert len(one) == len(two) == 2
    assert [_sha(a) for a in one] == [_sha(b) for b in two]
    trace = json.loads((one[0].parent / "context_trace.json").read_text())
    assert trace["policy"]["name"] == "fov" and len(trace["chunks"]) == 7


def test_vae_frame_layout():
    vae = TinyVAE(8)
    lat = torch.stack([torch.full((3, 2, 2), -1.0), torch.full((3, 2, 2), 1.0)])
    frames = vae.decode(lat, 5)
    assert frames.shape == (5, 16, 16, 3) and frames[0].max() == 0 and frames[4].min() == 255
    assert frames[0, 0, 0, 0] < frames[2, 0, 0, 0] < frames[4, 0, 0, 0]


# -- the LingBot-World v2 FoV shim against a stand-in of upstream's attention path ------------------------------

STANDIN_MODEL_FAST = '''
import torch

def flash_attention(q, k, v, q_lens=None, k_lens=None):
    return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                            v.transpose(1, 2)).transpose(1, 2)

class CausalWanSelfAttention:
    """Upstream's documented layout: kv_cache = {"k", "v": [B, kv_size, heads, head_dim], "global_end_index",
    "local_end_index"}; with FullKV the window is k[:, max(0, local_end - max_attention_size):local_end]."""
    def forward(self, q, k_new, v_new, kv_cache, current_start, max_attention_size=None):
        end = current_start + k_new.shape[1]
        kv_cache["k"][:, current_start:end] = k_new
        kv_cache["v"][:, current_start:end] = v_new
        kv_cache["local_end_index"] = end
        lo = 0 if max_attention_size is None else max(0, end - max_attention_size)
        return flash_attention(q, kv_cache["k"][:, lo:end], kv_cache["v"][:, lo:end])
'''

STANDIN_SP = '''
from wan.modules import model_fast

def flash_attention(q, k, v, q_lens=None, k_lens=None):
    return model_fast.flash_attention(q, k, v)

def sp_attn_forward_causal(q, k, v, kv_cache, current_start):
    end = current_start + k.shape[1]
    kv_cache["k"][:, current_start:end] = k
    kv_cache["v"][:, current_start:end] = v
    return flash_attention(q, kv_cache["k"][:, :end], kv_cache["v"][:, :end])
'''


def test_lingbot_v2_fov_shim_gathers_the_selection_in_both_paths(tmp_path, monkeypatch):
    import argparse
    import importlib

    root = tmp_path / "lingbot"
    for rel, text in {"wan/__init__.py": "", "wan/modules/__init__.py": "", "wan/distributed/__init__.py": "",
                      "wan/modules/model_fast.py": STANDIN_MODEL_FAST,
                      "wan/distributed/sequence_parallel.py": STANDIN_SP}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.syspath_prepend(str(root))
    for m in [m for m in sys.modules if m == "wan" or m.startswith("wan.")]:
        monkeypatch.delitem(sys.modules, m)
    S, chunk, L = 3, 4, 32
    _, lat, K = _latents(4 * (L - 1) + 1)
    sel = ContextSelector(POLICIES["fov"], lat, K, H, W)
    data = {"chunk": chunk, "chunks": [sel.select(k).to_trace() for k in range(sel.num_chunks)]}
    (tmp_path / "sel.json").write_text(json.dumps(data))
    fov_runner = importlib.import_module("adapters.lingbot_v2.fov_runner")
    fov_runner.patch(argparse.Namespace(selection=str(tmp_path / "sel.json"), frame_seqlen=S,
                                        kernels=fov_runner.DEFAULT_KERNELS))
    mf = importlib.import_module("wan.modules.model_fast")
    sp = importlib.import_module("wan.distributed.sequence_parallel")
    assert getattr(mf.flash_attention, "harness_fov", False) and getattr(sp.flash_attention, "harness_fov", False)
    g = torch.Generator().manual_seed(0)
    k_all = torch.randn(1, L * S, 2, 8, generator=g)
    v_all = torch.randn(1, L * S, 2, 8, generator=g)
    ours = KVCache(1, S, 2, 8, L)
    ours.write(0, 0, k_all, v_all)
    for k in (5, 6, 7):  # steady-state chunks
        s = sel.select(k)
        start = 4 * k
        q = torch.randn(1, chunk * S, 2, 8, generator=g)
        cur = slice(start * S, (start + chunk) * S)
        cache = {"k": k_all.clone(), "v": v_all.clone(), "global_end_index": 0, "local_end_index": 0}
        out_single = mf.CausalWanSelfAttention().forward(q, k_all[:, cur], v_all[:, cur], cache, start * S)
        out_sp = sp.sp_attn_forward_causal(q, k_all[:, cur], v_all[:, cur], dict(cache), start * S)
        ck, cv = ours.gather(0, s.attended)
        expected = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), ck.transpose(1, 2), cv.transpose(1, 2)).transpose(1, 2)
        assert torch.allclose(out_single, expected, atol=1e-6) and torch.allclose(out_sp, expected, atol=1e-6)
        full = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k_all[:, : (start + chunk) * S].transpose(1, 2),
            v_all[:, : (start + chunk) * S].transpose(1, 2)).transpose(1, 2)
        assert not torch.allclose(out_single, full, atol=1e-4)  # it really restricted the context
    text = mf.flash_attention(torch.randn(1, 6, 2, 8), torch.randn(1, 5, 2, 8), torch.randn(1, 5, 2, 8))
    assert text.shape == (1, 6, 2, 8)  # non-cache calls (length not a multiple of S) pass through


def test_lingbot_v2_policy_mapping_and_fov_command(tmp_path):
    from adapters.base import ItemRequest, ModelConfigError, build_adapter
    from adapters.lingbot.adapter import lingbot_context_args
    from harness.cases import load_case_set
    from harness.config_groups import group_yaml

    a = build_adapter(group_yaml("model", "lingbot_v2"))
    assert lingbot_context_args(POLICIES["fullkv"], a.config, []) == []
    assert lingbot_context_args(POLICIES["sliding"], a.config, []) == ["--local_attn_size", "20", "--sink_size", "4"]
    with pytest.raises(ModelConfigError, match="sliding_local_attn_size=14"):
        lingbot_context_args(ContextPolicy(name="sliding", sink=4, recent=6), a.config, [])
    case = load_case_set("builtin:demo")[0]
    _, K = a.canvas_image_and_K(case)
    path = a.path_for(TrajectorySpec(name="lrlr", cycles=("left", "left")), K, "lrlr")
    req = ItemRequest(case=case, path=path, context=POLICIES["fov"], seed=1, item_dir=tmp_path)
    controls = a.compile(req)
    assert "fov_runner.py" in controls.command and "--selection" in controls.command
    assert "--frame-seqlen 1508" in controls.command  # upstream canvas 464x832 (adapters/lingbot_v2/contract.yaml)
    sel = json.loads((tmp_path / "controls" / "context_selection.json").read_text())
    assert sel["num_latents"] == 124 and len(sel["chunks"]) == 31
    assert all(len(c["context"]) + 4 == 20 for c in sel["chunks"][5:])


@pytest.mark.gpu
def test_tiny_dit_cuda_bf16_matches_cpu_and_is_deterministic(image):
    """On a GPU: the cached rollout runs in bf16, is bit-identical across two runs, and stays close to float32."""
    _, lat, K = _latents()
    pol = POLICIES["fov"]
    cpu = generate(TinyCausalDiT(CFG), image, lat, K, pol, seed=5).latents
    model = TinyCausalDiT(CFG).to("cuda", torch.bfloat16)
    a = generate(model, image, lat, K, pol, seed=5, device="cuda", dtype=torch.bfloat16).latents.float().cpu()
    b = generate(model, image, lat, K, pol, seed=5, device="cuda", dtype=torch.bfloat16).latents.float().cpu()
    assert torch.equal(a, b)
    f32 = generate(TinyCausalDiT(CFG).to("cuda"), image, lat, K, pol, seed=5, device="cuda").latents.cpu()
    assert (f32 - cpu).abs().max() < 1e-3
    assert (a - f32).abs().max() < 0.25


def _kv(value, frames=1, S=2):
    return torch.full((1, frames * S, 1, 2), float(value)), torch.full((1, frames * S, 1, 2), -float(value))


def test_full_cache_slots_are_frame_indices_and_stats_count_layer_0_only():
    from harness.context.kv_cache import KVCache

    with pytest.raises(ValueError, match="mode"):
        KVCache(1, 2, 1, 2, capacity=2, mode="lru")
    c = KVCache(2, 2, 1, 2, capacity=4)
    assert c.nbytes() == 2 * 2 * 4 * 2 * 1 * 2 * 4  # layers x (k, v) x slots x S x H x D x float32
    c.write(0, 1, *_kv(5, frames=2))  # two frames in one call: 1 and 2
    c.write(1, 1, *_kv(7, frames=2))
    assert c.slot_of == {1: 1, 2: 2} and c.frames == [1, 2] and c.stats.writes == 2 and c.stats.peak_frames == 2
    k, v = c.gather(1, [1, 2])
    assert k[0, :, 0, 0].tolist() == [7.0] * 4 and v[0, :, 0, 0].tolist() == [-7.0] * 4
    assert c.gather(0, [1, 2])[0][0, :, 0, 0].tolist() == [5.0] * 4 and c.stats.gathers == 1
    assert c.stats.contiguous_gathers == 1
    k, _ = c.gather(0, [])
    assert k.shape == (1, 0, 1, 2) and c.stats.gathers == 2
    c.write(0, 0, *_kv(1))
    k, _ = c.gather(0, [2, 0])  # not contiguous: an index_select in the given order
    assert k[0, :, 0, 0].tolist() == [5.0, 5.0, 1.0, 1.0] and c.stats.contiguous_gathers == 1
    assert c.token_index([2, 0]).tolist() == [4, 5, 0, 1]
    with pytest.raises(IndexError, match="capacity"):
        c.write(0, 4, *_kv(0))


def test_bounded_cache_reuses_the_lowest_free_slot_after_eviction():
    from harness.context.kv_cache import KVCache

    c = KVCache(1, 2, 1, 2, capacity=3, mode="bounded")
    for f in (10, 11, 12):
        c.write(0, f, *_kv(f))
    assert c.evict([11]) == [10, 12] and c.stats.evicted == 2 and c._free == [0, 2]
    c.write(0, 13, *_kv(13))
    assert c.slot_of[13] == 0 and c.stats.peak_frames == 3
    c.write(0, 13, *_kv(14))  # rewriting a held frame keeps its slot
    assert c.slot_of[13] == 0 and c.gather(0, [13])[0][0, 0, 0, 0].item() == 14.0
    assert c.evict([11, 13]) == [] and c.stats.evicted == 2


def test_rope_positions_per_mode_and_the_attention_timer():
    from harness.context.kv_cache import AttentionTimer, RopeMode

    ctx = [0, 1, 8, 9, 20, 21]
    assert RopeMode().positions(ctx, [8, 9], [20, 21]) == {f: f for f in ctx}
    assert RopeMode("rebase").positions(ctx, [], [20, 21]) == {f: f for f in ctx}
    assert RopeMode("rebase").positions([0, 1, 8, 9], [9, 8], []) == {0: 0, 1: 1, 8: 8, 9: 9}  # just after the end
    assert RopeMode("rebase").positions([0, 4, 5], [4, 5], []) == {0: 0, 4: 4, 5: 5}
    assert RopeMode("rebase").positions([0, 2, 3, 9], [2, 3], [9]) == {0: 0, 2: 7, 3: 8, 9: 9}
    t = AttentionTimer()
    t.add(0.5)
    t.add(0.25)
    t.next_chunk()
    t.next_chunk()
    assert t.per_chunk == [0.75, 0.0] and t.current == 0.0


def test_cache_dtype_stats_of_layer_0_with_unequal_layers_and_sorted_free_slots():
    """Stats count layer 0's calls only: layer 1 here writes and gathers a different number of frames and times
    than layer 0, so counting any other layer shows. Freed slots are reused lowest first even when they were
    freed in another order; the buffers take the dtype asked for."""
    from harness.context.kv_cache import KVCache

    assert KVCache(1, 2, 1, 2, capacity=1, dtype=torch.float64).k[0].dtype == torch.float64
    fresh = KVCache(1, 2, 1, 2, capacity=1)
    assert fresh.v[0].dtype == torch.float32 and fresh.stats.peak_frames == 0 and fresh.stats.writes == 0
    c = KVCache(2, 2, 1, 2, capacity=4)
    c.write(0, 0, *_kv(1, frames=3))
    c.write(1, 0, *_kv(2, frames=1))
    assert c.stats.writes == 3
    c.gather(0, [0, 1])
    c.gather(0, [2, 0])
    c.gather(1, [1, 2])
    c.gather(1, [0])
    c.gather(1, [0])
    assert c.stats.gathers == 2 and c.stats.contiguous_gathers == 1
    b = KVCache(1, 2, 1, 2, capacity=3, mode="bounded")
    for f in (10, 11, 12):
        b.write(0, f, *_kv(f))
    b.evict([10, 11])  # frees slot 2
    b.evict([11])  # then slot 0
    assert b._free == [0, 2]
    b.write(0, 20, *_kv(20))
    assert b.slot_of[20] == 0
