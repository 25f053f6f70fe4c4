"""The rules of the built-in tiny causal DiT (adapters/tiny_causal_dit/model.py and adapter.py), one at a time and in
this process: its defaults and layer shapes, the learned-free VAE's encode and decode (values read off by hand),
RoPE and the timestep embedding against numpy, one block against a numpy re-derivation, the token layout, causality
and the KV cache (a cached chunk equals masked attention; a rebased key equals one cached at its new position), the
rollout's sampler, noise, cache budget, timer and trace, and the adapter's config rules, native controls, build
options and generation. Models are built from the real classes with seeded initialisation at toy sizes."""

from __future__ import annotations

import math
import time

import cv2
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import adapters.tiny_causal_dit.adapter as adapter_module  # noqa: E402
from adapters.base import ItemRequest, ModelConfigError, NativeControls  # noqa: E402
from adapters.tiny_causal_dit.adapter import TinyCausalDiTAdapter, TinyDiTModelConfig  # noqa: E402
from adapters.tiny_causal_dit.model import (  # noqa: E402
    Block,
    Rollout,
    TinyCausalDiT,
    TinyDiTConfig,
    TinyVAE,
    _rope_freqs,
    camera_maps,
    config_dict,
    context_mask,
    generate,
    noise_generator,
    rope_rotate,
    timestep_embedding,
)
from harness.cases import Case  # noqa: E402
from harness.context import ContextPolicy, ContextSelector  # noqa: E402
from harness.context.kv_cache import AttentionTimer, KVCache, RopeMode  # noqa: E402
from trajectories.conventions import intrinsics_from_fov  # noqa: E402
from trajectories.path import CameraPath  # noqa: E402
from trajectories.resample import latent_poses  # noqa: E402

H, W = 16, 32  # canvas: latent grid 2 x 4, patch 2 -> S = 2 tokens per latent frame
h, w, S = 2, 4, 2
K = intrinsics_from_fov(60, W, H)
CFG = TinyDiTConfig(dim=16, heads=2, layers=2, steps=(1.0, 0.5))
FULL = ContextPolicy(name="fullkv", chunk=2)
SLIDING = ContextPolicy(name="sliding", chunk=2, sink=1, recent=2)
FOV_REBASE = ContextPolicy(name="fov", chunk=1, sink=1, recent=1, retrieved_chunks=1, rope="rebase")
ADAPTER = "adapters.tiny_causal_dit.adapter:TinyCausalDiTAdapter"


def yaw(deg: float) -> np.ndarray:
    r = np.radians(deg)
    c2w = np.eye(4)
    c2w[:3, :3] = [[np.cos(r), 0, np.sin(r)], [0, 1, 0], [-np.sin(r), 0, np.cos(r)]]
    return c2w


#: 9 latents looking ahead, away (latents 2-4) and ahead again: FoV chunk 5 retrieves latent 1, rebased to 3
LAT = np.stack([yaw(d) for d in (0, 0, 90, 90, 90, 0, 0, 0, 0)])
LAT[:, 0, 3] = np.arange(9) * 0.01
IMAGE = np.random.default_rng(0).integers(0, 256, size=(H, W, 3), dtype=np.uint8)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: tiny tensors gain nothing from more, and on a loaded machine extra threads wait."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def loud(m: torch.nn.Module, seed: int = 0, std: float = 0.3) -> torch.nn.Module:
    """The real module with larger seeded weights (the 0.02 init makes attention nearly uniform, so context would
    move the output by less than float noise)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return m


@pytest.fixture(scope="module")
def model() -> TinyCausalDiT:
    return loud(TinyCausalDiT(CFG))


@pytest.fixture(scope="module")
def cam() -> torch.Tensor:
    return randn(3, 6 * 8 * 8, h, w, seed=5)


@pytest.fixture
def torch_globals(monkeypatch):
    """build() sets torch's deterministic mode (recorded here instead: its first call imports torch._dynamo, seconds)
    and its thread count (put back after the test). Yields the recorded calls."""
    calls: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *a, **k: calls.append((a, k)))
    threads = torch.get_num_threads()
    yield calls
    torch.set_num_threads(threads)


# ==================================================================================================================
# configuration defaults
# ==================================================================================================================


def test_the_default_architecture_is_the_documented_one():
    cfg = TinyDiTConfig()
    assert config_dict(cfg) == {"channels": 3, "spatial_stride": 8, "patch": 2, "dim": 64, "heads": 4, "layers": 2,
                                "mlp_ratio": 2.0, "ray_block": 8, "steps": [1.0, 0.75, 0.5, 0.25], "init_seed": 0,
                                "rope_theta": 10000.0}
    assert cfg.steps == (1.0, 0.75, 0.5, 0.25)  # the config keeps a tuple, the record a list


def test_the_head_dim_is_the_integer_share_of_the_width():
    assert TinyDiTConfig().head_dim == 16
    odd = TinyDiTConfig(dim=18, heads=4).head_dim
    assert odd == 4 and isinstance(odd, int)


def test_a_rollout_record_starts_with_no_steps_and_an_empty_cache_record():
    ro = Rollout(torch.zeros(1), [], {}, [])
    assert ro.steps == [] and ro.cache_peak_frames == 0 and ro.cache_bytes == 0


# ==================================================================================================================
# TinyVAE
# ==================================================================================================================


def test_the_vae_strides_by_eight_unless_told():
    assert TinyVAE().stride == 8 and TinyVAE(4).stride == 4


def test_encoding_maps_bytes_to_minus_one_one_and_averages_each_8x8_block():
    img = np.random.default_rng(1).integers(0, 256, size=(16, 8, 3), dtype=np.uint8)
    got = TinyVAE().encode_image(img)
    assert got.shape == (3, 2, 1) and got.dtype == torch.float32
    expected = (img.astype(np.float64) / 127.5 - 1.0).reshape(2, 8, 1, 8, 3).mean(axis=(1, 3)).transpose(2, 0, 1)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
    assert torch.equal(TinyVAE().encode_image(np.zeros((8, 8, 3), np.uint8)), -torch.ones(3, 1, 1))


def test_decoding_interpolates_inside_each_four_frame_group_and_holds_the_last_latent():
    c = [0.5, -0.25, 0.625]  # latent values (dyadic: every frame's value is exact, none on a rounding tie)
    lat = torch.tensor(c, dtype=torch.float32)[:, None, None, None].expand(3, 3, 1, 2).contiguous()
    frames = TinyVAE().decode(lat, 11)
    assert frames.shape == (11, 8, 16, 3) and frames.dtype == np.uint8
    values = [c[0]]
    for i in (1, 2):  # frame 4i - j (j = 3..0): weight j / 4 on the previous latent
        values += [(1 - j / 4) * c[i] + j / 4 * c[i - 1] for j in (3, 2, 1, 0)]
    values += [c[2], c[2]]  # frames 9 and 10: past the last latent, which holds
    expected = np.round((np.array(values) + 1) * 127.5).astype(np.uint8)
    assert [int(f[3, 5, 1]) for f in frames] == expected.tolist()
    assert all((f == f[0, 0, 0]).all() for f in frames)  # a constant latent decodes to a constant frame


def test_decoding_upsamples_bilinearly_with_half_pixel_centres():
    lat = torch.tensor([-1.0, 1.0])[None, None, None, :].expand(1, 3, 1, 2).contiguous()
    (frame,) = TinyVAE().decode(lat, 1)
    x = np.arange(16)
    src = np.clip((x + 0.5) / 8 - 0.5, 0, 1)  # pixel centre x + 0.5 at latent scale, edge-clamped
    expected = np.round(255 * src).astype(np.uint8)
    assert frame[0, :, 0].tolist() == expected.tolist() and (frame == frame[:1]).all()


def test_decoding_clamps_values_outside_minus_one_one():
    lat = torch.tensor([3.0, -2.0])[:, None, None, None].expand(2, 3, 1, 1).contiguous()
    frames = TinyVAE().decode(lat, 5)
    assert int(frames[0].min()) == 255 and int(frames[4].max()) == 0


# ==================================================================================================================
# RoPE and the timestep embedding
# ==================================================================================================================


def test_rope_frequencies_fall_geometrically_from_one():
    got = _rope_freqs(4, 100.0)
    assert got.dtype == torch.float64 and got.tolist() == pytest.approx([1.0, 0.1], abs=1e-15)
    assert _rope_freqs(6, 64.0).tolist() == pytest.approx([1.0, 0.25, 1 / 16], abs=1e-15)


def test_rope_rotates_each_pair_by_position_times_frequency():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])[None].expand(2, 2, 4)  # [N=2, H=2, d=4]
    out = rope_rotate(x, torch.tensor([0, 1]), torch.tensor([math.pi / 2, math.pi], dtype=torch.float64))
    assert out.shape == (2, 2, 4)
    assert torch.allclose(out[0], x[0], atol=1e-6)  # position 0: no rotation
    # position 1: pair (1, 2) by 90 degrees -> (-2, 1); pair (3, 4) by 180 degrees -> (-3, -4)
    assert torch.allclose(out[1], torch.tensor([[-2.0, 1.0, -3.0, -4.0], [-6.0, 5.0, -7.0, -8.0]]), atol=1e-6)


def test_the_timestep_embedding_is_cosines_then_sines_of_1000_t_at_geometric_frequencies():
    t = torch.tensor([0.0, 0.25, 1.0])
    got = timestep_embedding(t, 8)
    f = 10000.0 ** (-np.arange(4) / 4)  # 1, 0.1, 0.01, 0.001
    a = 1000.0 * t.numpy()[:, None].astype(np.float64) * f[None]
    np.testing.assert_allclose(got.numpy(), np.concatenate([np.cos(a), np.sin(a)], axis=1), atol=1e-4)
    assert timestep_embedding(t, 5).shape == (3, 4)  # an odd width drops its last channel


# ==================================================================================================================
# Block
# ==================================================================================================================


def test_a_block_has_adaln_camera_and_mlp_layers_of_the_documented_widths():
    blk = Block(TinyDiTConfig(dim=8, heads=2, mlp_ratio=1.5))
    shapes = {k: tuple(v.shape) for k, v in blk.state_dict().items()}
    assert shapes == {"qkv.weight": (24, 8), "qkv.bias": (24,), "proj.weight": (8, 8), "proj.bias": (8,),
                      "mlp.0.weight": (12, 8), "mlp.0.bias": (12,), "mlp.2.weight": (8, 12), "mlp.2.bias": (8,),
                      "ada.weight": (48, 8), "ada.bias": (48,), "cam.weight": (16, 8), "cam.bias": (16,)}
    assert blk.norm1.weight is None and blk.norm2.weight is None  # no affine: adaLN modulates
    assert blk.norm1.eps == 1e-6 and blk.norm2.eps == 1e-6
    assert isinstance(blk.mlp[1], torch.nn.GELU) and blk.mlp[1].approximate == "tanh"


def test_a_head_splits_into_a_time_half_and_a_space_half_the_larger_when_odd():
    blk = Block(TinyDiTConfig(dim=10, heads=2, rope_theta=64.0))  # head_dim 5: time 2 channels, space 3
    assert blk.freq_t.tolist() == pytest.approx([1.0])
    assert blk.freq_s.tolist() == pytest.approx([1.0, 64.0 ** (-2 / 3)])
    even = Block(TinyDiTConfig(dim=16, heads=2))
    assert torch.equal(even.freq_t, _rope_freqs(4, 10000.0)) and torch.equal(even.freq_s, _rope_freqs(4, 10000.0))


def _np_layer_norm(x):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)


def _np_rope(x, pos, theta):
    """Pairs (x[2i], x[2i+1]) as complex numbers turned by pos * theta^(-2i/n)."""
    n = x.shape[-1]
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * pos[:, None, None] * theta ** (-np.arange(0, n, 2) / n))
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def _np_block(blk: Block, x, temb, cam, tpos, spos):
    P = {k: v.numpy() for k, v in blk.state_dict().items()}
    lin = lambda a, name: a @ P[name + ".weight"].T + P[name + ".bias"]  # noqa: E731
    heads, hd, theta = blk.cfg.heads, blk.cfg.head_dim, blk.cfg.rope_theta
    sh1, sc1, g1, sh2, sc2, g2 = np.split(lin(temb, "ada"), 6, axis=-1)
    hh = _np_layer_norm(x) * (1 + sc1) + sh1
    N = x.shape[0]
    q, k, v = (m.reshape(N, heads, hd) for m in np.split(lin(hh, "qkv"), 3, axis=-1))
    half = hd // 2
    q, k = ([np.concatenate([_np_rope(m[..., :half], tpos, theta), _np_rope(m[..., half:], spos, theta)], -1)
             for m in (q, k)])
    s = np.einsum("nhd,mhd->hnm", q, k) / np.sqrt(hd)
    p = np.exp(s - s.max(-1, keepdims=True))
    a = np.einsum("hnm,mhd->nhd", p / p.sum(-1, keepdims=True), v).reshape(N, -1)
    x = x + g1 * lin(a, "proj")
    cs, ch = np.split(lin(cam, "cam"), 2, axis=-1)
    x = (1 + cs) * x + ch
    m = _np_layer_norm(x) * (1 + sc2) + sh2
    m = lin(m, "mlp.0")
    m = 0.5 * m * (1 + np.tanh(np.sqrt(2 / np.pi) * (m + 0.044715 * m**3)))
    return x + g2 * lin(m, "mlp.2")


def test_a_block_equals_its_numpy_derivation():
    blk = Block(TinyDiTConfig(dim=16, heads=2, rope_theta=100.0)).double()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in blk.parameters():  # large random weights: every term of the block moves the output
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    x, temb, cam = (randn(1, 6, 16, seed=s, dtype=torch.float64) for s in (10, 11, 12))
    tpos, spos = torch.tensor([0, 0, 1, 1, 3, 3]), torch.tensor([0, 1, 0, 1, 0, 1])

    def attend(q, k, v):  # plain softmax attention over [B, N, H, hd]
        s = torch.einsum("bnhd,bmhd->bhnm", q, k) / math.sqrt(q.shape[-1])
        return torch.einsum("bhnm,bmhd->bnhd", s.softmax(-1), v)

    with torch.no_grad():
        got = blk(x, temb, cam, tpos, spos, attend)[0].numpy()
    expected = _np_block(blk, x[0].numpy(), temb[0].numpy(), cam[0].numpy(), tpos.numpy(), spos.numpy())
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


# ==================================================================================================================
# TinyCausalDiT: construction and token layout
# ==================================================================================================================


def test_the_model_has_the_documented_input_and_output_widths():
    m = TinyCausalDiT(TinyDiTConfig())
    assert (m.patch_embed.in_features, m.patch_embed.out_features) == (12, 64)  # 3 channels x 2 x 2
    assert m.cam_embed.in_features == 1536  # 6 ray channels x 8 x 8 folded x 2 x 2 patch
    assert m.t_mlp[0].in_features == 256 and isinstance(m.t_mlp[1], torch.nn.SiLU)
    assert m.head.out_features == 12 and len(m.blocks) == 2
    assert m.norm_out.weight is None and m.norm_out.eps == 1e-6
    assert m.training is False  # built in eval mode


def test_initialisation_is_seeded_small_normal_with_zero_biases_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = TinyCausalDiT(TinyDiTConfig())
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(456)
    b = TinyCausalDiT(TinyDiTConfig())
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    c = TinyCausalDiT(TinyDiTConfig(init_seed=1))
    assert not torch.equal(a.cam_embed.weight, c.cam_embed.weight)
    linears = [m for m in a.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 2 + 2 + 1 + 2 * 6  # patch, camera, 2 timestep, head; per block qkv proj 2 mlp ada cam
    assert all(not lin.bias.any() for lin in linears)
    assert 0.019 < float(a.cam_embed.weight.detach().std()) < 0.021


def test_tokens_are_frame_major_then_row_major_patches_channel_major_inside():
    m = TinyCausalDiT(TinyDiTConfig(dim=8, heads=2, layers=1))
    x = torch.arange(2 * 3 * 2 * 4, dtype=torch.float32).reshape(2, 3, 2, 4)  # F=2, C=3, h=2, w=4
    tok = m.tokens(x)
    expected = [[float(x[f, c, i, 2 * col + j]) for c in range(3) for i in range(2) for j in range(2)]
                for f in range(2) for col in range(2)]
    assert tok.shape == (1, 4, 12) and tok[0].tolist() == expected
    assert torch.equal(m.untokens(tok, 2, 2, 4), x)


def test_a_frame_has_one_token_per_whole_patch():
    m = TinyCausalDiT(TinyDiTConfig(dim=8, heads=2, layers=1))
    assert m.frame_seqlen(2, 4) == 2 and m.frame_seqlen(5, 7) == 6  # 2 x 3 whole patches


# ==================================================================================================================
# TinyCausalDiT: the KV cache, masks and causality
# ==================================================================================================================


def _cache(capacity=5) -> KVCache:
    return KVCache(CFG.layers, S, CFG.heads, CFG.head_dim, capacity, "full")


def test_a_cached_chunk_equals_masked_attention_over_the_same_frames(model, cam):
    x = randn(3, 3, h, w, seed=1)
    cache = _cache()
    v0 = model.forward_chunk(x[:1], torch.zeros(1), cam[:1], [0], cache, [], write=True)
    t = torch.tensor([0.5, 0.75])
    v12 = model.forward_chunk(x[1:], t, cam[1:], [1, 2], cache, [0])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1], [1, 1, 1]])
    ref = model.forward_masked(x, torch.tensor([0.0, 0.5, 0.75]), cam, mask)
    assert v12.shape == (2, 3, h, w)
    assert torch.allclose(ref[:1], v0, atol=1e-5) and torch.allclose(ref[1:], v12, atol=1e-5)
    alone = model.forward_chunk(x[1:], t, cam[1:], [1, 2], cache, [])
    assert not torch.allclose(alone, v12, atol=1e-4)  # the context really is attended


def test_only_the_refresh_pass_writes_the_cache_at_the_chunks_absolute_frames(model, cam):
    x = randn(2, 3, h, w, seed=2)
    cache = _cache()
    model.forward_chunk(x, torch.ones(2), cam[:2], [2, 3], cache, [])
    assert cache.frames == [] and cache.stats.writes == 0
    model.forward_chunk(x, torch.zeros(2), cam[:2], [2, 3], cache, [], write=True)
    assert cache.frames == [2, 3] and cache.stats.writes == 2


def test_the_masked_pass_is_causal_under_a_causal_mask(model, cam):
    x = randn(3, 3, h, w, seed=3)
    y = x.clone()
    y[2] += 1.0
    t = torch.tensor([0.0, 0.5, 0.5])
    causal = torch.tril(torch.ones(3, 3))
    a, b = model.forward_masked(x, t, cam, causal), model.forward_masked(y, t, cam, causal)
    assert torch.equal(a[:2], b[:2]) and not torch.allclose(a[2], b[2], atol=1e-4)
    full = torch.ones(3, 3)
    assert not torch.allclose(model.forward_masked(x, t, cam, full)[0], model.forward_masked(y, t, cam, full)[0],
                              atol=1e-6)  # without the mask the future leaks back


def _written(model, cam, x, at: list[int]) -> KVCache:
    """A cache holding x[i] written alone (no context) at frame at[i]."""
    cache = _cache(capacity=6)
    for i, f in enumerate(at):
        model.forward_chunk(x[i : i + 1], torch.zeros(1), cam[i : i + 1], [f], cache, [], write=True)
    return cache


def test_a_rebased_context_key_attends_as_if_cached_at_its_new_position(model, cam):
    x, q = randn(2, 3, h, w, seed=4), randn(1, 3, h, w, seed=6)
    t = torch.tensor([0.5])
    moved = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 1]), [1], False, {1: 2})
    there = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 2]), [2])
    assert torch.allclose(moved, there, atol=1e-5)
    kept = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 1]), [1])
    assert not torch.allclose(kept, there, atol=1e-4)
    # one frame moved, one kept: only the moved one is re-rotated
    both = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 1]), [0, 1], False, {0: 0, 1: 3})
    ref = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 3]), [0, 3])
    assert torch.allclose(both, ref, atol=1e-5)
    same = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 1]), [0, 1], False, {0: 0, 1: 1})
    absolute = model.forward_chunk(q, t, cam[2:], [4], _written(model, cam, x, [0, 1]), [0, 1])
    assert torch.equal(same, absolute)  # positions that do not move change nothing


class CountingTimer(AttentionTimer):
    calls = 0

    def add(self, seconds: float) -> None:
        self.calls += 1
        super().add(seconds)


def test_the_timer_gets_one_attention_duration_per_layer(model, cam):
    x = randn(1, 3, h, w, seed=7)
    timer = CountingTimer()
    t0 = time.perf_counter()
    model.forward_chunk(x, torch.zeros(1), cam[:1], [0], _cache(), [], timer=timer)
    wall = time.perf_counter() - t0
    assert timer.calls == CFG.layers and 0 < timer.current <= wall


def test_the_timer_waits_for_cuda_kernels_before_it_reads_the_clock(model, cam, monkeypatch):
    """On a GPU the attention call returns before its kernels finish: each layer synchronises first, so the time it
    records covers the kernels (a fake clock that a synchronise moves by 5 s, and attention outputs that say they
    are on CUDA). On a CPU nothing is synchronised."""
    from adapters.tiny_causal_dit import model as model_module
    from tests.support.clocks import fake_cuda_attention

    synced, claim_cuda = fake_cuda_attention(monkeypatch, model_module.time)
    x = randn(1, 3, h, w, seed=7)
    for on_cuda, per_layer in ((False, 0.0), (True, 5.0)):
        claim_cuda(on_cuda)
        timer = CountingTimer()
        model.forward_chunk(x, torch.zeros(1), cam[:1], [0], _cache(), [], timer=timer)
        assert timer.calls == CFG.layers and timer.current == per_layer * CFG.layers
        assert len(synced) == CFG.layers * on_cuda


# ==================================================================================================================
# generate: the rollout
# ==================================================================================================================


def _rollout(policy, capture=True, timer=None):
    """A rollout of the 9 latents on a fresh model whose forward_chunk records every call."""
    m = loud(TinyCausalDiT(CFG))
    calls = []
    real = m.forward_chunk

    def spy(x, t, cam, frames, cache, context, write=False, context_positions=None, timer=None):
        calls.append({"x": x.clone(), "t": t.clone(), "cam": cam, "frames": list(frames), "context": list(context),
                      "write": write, "positions": context_positions})
        return real(x, t, cam, frames, cache, context, write, context_positions, timer)

    m.forward_chunk = spy
    t0 = time.perf_counter()
    ro = generate(m, IMAGE, LAT, K, policy, seed=3, capture=capture, timer=timer)
    return ro, calls, time.perf_counter() - t0


@pytest.fixture(scope="module")
def runs():
    return {p.name: _rollout(p) for p in (FULL, SLIDING, FOV_REBASE)}


def test_each_chunk_runs_every_sampler_step_then_one_clean_refresh_that_writes(runs):
    ro, calls, _ = runs["fullkv"]
    sel = ContextSelector(FULL, LAT, K, H, W)
    assert sel.num_chunks == 5 and len(calls) == 5 * 3
    for k in range(5):
        chunk = calls[3 * k : 3 * k + 3]
        assert [c["write"] for c in chunk] == [False, False, True]
        assert all(c["frames"] == list(sel.chunk_latents(k)) and c["context"] == sel.select(k).context
                   for c in chunk)
        assert all(c["positions"] is None for c in chunk)  # absolute RoPE: keys stay where they were cached
    assert [c["t"].tolist() for c in calls[3:6]] == [[1.0, 1.0], [0.5, 0.5], [0.0, 0.0]]
    assert [c["t"].tolist() for c in calls[12:15]] == [[1.0], [0.5], [0.0]]  # the last chunk holds one latent


def test_the_conditioning_latent_is_given_clean_at_every_pass(runs):
    ro, calls, _ = runs["fullkv"]
    cond = TinyVAE().encode_image(IMAGE)
    assert [c["t"].tolist() for c in calls[:3]] == [[0.0, 1.0], [0.0, 0.5], [0.0, 0.0]]
    assert all(torch.equal(c["x"][0], cond) for c in calls[:3])
    assert torch.equal(ro.latents[0], cond) and not torch.equal(calls[0]["x"][1], cond)


def test_each_chunk_starts_from_its_own_seeded_noise_and_takes_euler_steps_to_t_zero(runs):
    ro, calls, _ = runs["fullkv"]
    steps = ro.steps
    assert len(steps) == 5 * 2 and [(s["chunk"], s["step"]) for s in steps[:3]] == [(0, 0), (0, 1), (1, 0)]
    for k in range(5):
        frames = calls[3 * k]["frames"]
        noise = torch.randn(len(frames), 3, h, w, generator=noise_generator(3, k))
        lo = 1 if k == 0 else 0  # latent 0 is the conditioning image
        assert torch.equal(calls[3 * k]["x"][lo:], noise[lo:])
        s0, s1 = steps[2 * k], steps[2 * k + 1]
        assert torch.equal(s0["x"], calls[3 * k]["x"]) and torch.equal(s1["t"], calls[3 * k + 1]["t"])
        assert torch.allclose(s1["x"][lo:], (s0["x"] + (0.5 - 1.0) * s0["v"])[lo:], atol=1e-6)
        final = s1["x"] + (0.0 - 0.5) * s1["v"]
        assert torch.allclose(calls[3 * k + 2]["x"][lo:], final[lo:], atol=1e-6)
        assert torch.equal(ro.latents[frames], calls[3 * k + 2]["x"])


def test_the_sampler_walks_every_step_of_the_schedule_in_order_then_to_t_zero():
    cfg = TinyDiTConfig(dim=16, heads=2, layers=1, steps=(1.0, 0.75, 0.5))
    ro = generate(loud(TinyCausalDiT(cfg)), IMAGE, LAT[:2], K, FULL, seed=1, capture=True)
    assert [float(s["t"][1]) for s in ro.steps] == [1.0, 0.75, 0.5]
    for s, nxt, dt in zip(ro.steps, ro.steps[1:], (-0.25, -0.25)):
        assert torch.allclose(nxt["x"][1], s["x"][1] + dt * s["v"][1], atol=1e-6)
    last = ro.steps[-1]
    assert torch.allclose(ro.latents[1], last["x"][1] - 0.5 * last["v"][1], atol=1e-6)


def test_the_camera_condition_of_each_pass_is_the_chunks_ray_maps(runs):
    _, calls, _ = runs["fullkv"]
    maps = camera_maps(LAT, K, H, W, CFG)
    assert all(torch.equal(c["cam"], maps[c["frames"]]) for c in calls)


def test_the_trace_timer_and_timings_cover_every_chunk(runs):
    ro, _, wall = runs["fullkv"]
    assert ro.trace == ContextSelector(FULL, LAT, K, H, W).trace()
    assert len(ro.attention_per_chunk) == 5 and all(s > 0 for s in ro.attention_per_chunk)
    assert list(ro.timings) == ["generate_s"] and 0 < ro.timings["generate_s"] <= wall


def test_a_timer_handed_in_receives_the_per_chunk_attention_times():
    timer = AttentionTimer()
    ro, _, _ = _rollout(SLIDING, capture=False, timer=timer)
    assert ro.attention_per_chunk is timer.per_chunk and len(timer.per_chunk) == 5
    assert ro.steps == []  # nothing captured unless asked


def test_full_history_policies_keep_every_latent_sliding_keeps_sink_recent_and_chunk(runs):
    per_frame = CFG.layers * 2 * S * CFG.heads * CFG.head_dim * 4  # layers x (K, V) x tokens x heads x dim x fp32
    assert (runs["fullkv"][0].cache_peak_frames, runs["fullkv"][0].cache_bytes) == (9, 9 * per_frame)
    assert (runs["fov"][0].cache_peak_frames, runs["fov"][0].cache_bytes) == (9, 9 * per_frame)
    assert (runs["sliding"][0].cache_peak_frames, runs["sliding"][0].cache_bytes) == (5, 5 * per_frame)  # 1+2+2


def test_the_policy_changes_a_latent_only_once_its_context_differs(runs):
    full, sliding = runs["fullkv"][0].latents, runs["sliding"][0].latents
    assert torch.equal(full[:4], sliding[:4])  # chunks 0 and 1: the same context [] and [0, 1]
    assert not torch.allclose(full[4:6], sliding[4:6], atol=1e-6)  # chunk 2: [0, 1, 2, 3] vs [0, 2, 3]


def test_rebase_hands_each_pass_the_rebased_positions_and_changes_the_rollout(runs):
    ro, calls, _ = runs["fov"]
    sel = ContextSelector(FOV_REBASE, LAT, K, H, W)
    for k in range(sel.num_chunks):
        s = sel.select(k)
        expected = RopeMode("rebase").positions(s.context, s.retrieved, s.recent)
        assert all(c["positions"] == expected for c in calls[3 * k : 3 * k + 3])
    assert calls[15]["positions"] == {0: 0, 1: 3, 4: 4}  # chunk 5 retrieves latent 1, moved before latent 4
    absolute = _rollout(ContextPolicy(name="fov", chunk=1, sink=1, recent=1, retrieved_chunks=1), capture=False)[0]
    assert torch.equal(absolute.latents[:5], ro.latents[:5])  # nothing moves before chunk 5
    assert not torch.allclose(absolute.latents[5], ro.latents[5], atol=1e-6)


# ==================================================================================================================
# noise_generator and context_mask
# ==================================================================================================================


def test_chunk_noise_is_seeded_by_seed_times_1000003_plus_chunk_modulo_2_63_minus_1():
    assert noise_generator(2, 5).initial_seed() == 2_000_011
    big = 2**62 + 7
    assert noise_generator(big, 3).initial_seed() == (big * 1_000_003 + 3) % (2**63 - 1)


def test_the_context_mask_lets_each_latent_see_its_chunks_context_and_its_own_chunk():
    pol = ContextPolicy(name="sliding", chunk=2, sink=1, recent=1)
    got = context_mask(ContextSelector(pol, LAT[:6], K, H, W))
    expected = np.zeros((6, 6), bool)
    expected[0:2, [0, 1]] = True  # chunk 0: itself
    expected[2:4, [0, 1, 2, 3]] = True  # chunk 1: sink 0, recent 1, itself
    expected[4:6, [0, 3, 4, 5]] = True  # chunk 2: sink 0, recent 3, itself
    assert got.dtype == torch.bool and got.numpy().tolist() == expected.tolist()


# ==================================================================================================================
# the adapter: config rules
# ==================================================================================================================


def _config(**changes) -> TinyDiTModelConfig:
    base = dict(name="tiny_causal_dit", adapter=ADAPTER, seed=0, height=H, width=W, fps=16, num_frames=9)
    return TinyDiTModelConfig.from_dict({**base, **changes})


def test_the_adapter_module_imports_no_torch():
    assert "torch" not in vars(adapter_module) and "TinyCausalDiT" not in vars(adapter_module)


def test_the_model_settings_default_to_a_deterministic_single_thread_float32_cpu_run():
    c = _config()
    assert (c.arch, c.device, c.dtype, c.deterministic, c.cpu_threads) == ({}, "cpu", "float32", True, 1)


@pytest.mark.parametrize("height, width", [(48, 40), (40, 48), (40, 40)])
def test_a_canvas_side_off_the_16_grid_is_refused_naming_both_sides(height, width):
    with pytest.raises(ModelConfigError, match=rf"model.height/width \({height}x{width}\) must be multiples of 16"):
        _config(height=height, width=width)


def test_canvas_sides_on_the_16_grid_and_4k_plus_1_frame_counts_are_accepted():
    for height, width, frames in [(16, 32, 1), (32, 48, 33), (96, 160, 493)]:
        c = _config(height=height, width=width, num_frames=frames)
        assert (c.height, c.width, c.num_frames) == (height, width, frames)


@pytest.mark.parametrize("frames", [2, 4, 34, 35])
def test_a_frame_count_not_4k_plus_1_is_refused_naming_the_field(frames):
    with pytest.raises(ModelConfigError, match=rf"model.num_frames={frames}: needs 4k\+1 frames"):
        _config(num_frames=frames)


# ==================================================================================================================
# the adapter: compile, build, generate
# ==================================================================================================================


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Case:
    d = tmp_path_factory.mktemp("case")
    cv2.imwrite(str(d / "img.png"), cv2.cvtColor(IMAGE, cv2.COLOR_RGB2BGR))
    return Case(id="c1", family="environment", image=str(d / "img.png"), prompt="a room")


def _request(case, tmp_path, frames=9, Kp=None, context=FULL) -> ItemRequest:
    c2w = np.tile(np.eye(4), (frames, 1, 1))
    c2w[:, 0, 3] = np.arange(frames) * 0.05
    Kp = K if Kp is None else Kp
    path = CameraPath(name="p", c2w=c2w, K=Kp, fps=16.0, height=H, width=W, phases={"V": (0, frames)})
    return ItemRequest(case=case, path=path, context=context, seed=3, item_dir=tmp_path / "item")


def test_compile_writes_the_path_and_per_frame_fx_fy_cx_cy(case, tmp_path):
    Kp = np.array([[30.0, 0.0, 12.0], [0.0, 31.0, 8.0], [0.0, 0.0, 1.0]])
    req = _request(case, tmp_path, frames=5, Kp=Kp)
    a = TinyCausalDiTAdapter(_config(num_frames=5))
    controls = a.compile(req)
    d = tmp_path / "item" / "controls"
    assert controls.files == {"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy")}
    assert np.array_equal(np.load(d / "poses.npy"), req.path.c2w)
    assert np.load(d / "intrinsics.npy").tolist() == [[30.0, 31.0, 12.0, 8.0]] * 5
    assert controls.command is None and controls.meta == {
        "latent_anchor_rule": "latent i -> frame 4i", "translation_scale": a.config.translation_scale.to_dict()}


def test_build_makes_the_seeded_model_with_the_arch_steps_as_a_tuple(torch_globals):
    model, dtype = TinyCausalDiTAdapter(_config(arch={"dim": 16, "heads": 2, "steps": [1.0, 0.5]})).build()
    assert model.cfg == TinyDiTConfig(dim=16, heads=2, steps=(1.0, 0.5)) and dtype == torch.float32
    default, _ = TinyCausalDiTAdapter(_config(arch={"dim": 16, "heads": 2})).build()
    assert default.cfg.steps == (1.0, 0.75, 0.5, 0.25)
    half, dtype = TinyCausalDiTAdapter(_config(arch={"dim": 16, "heads": 2}, dtype="float16")).build()
    assert dtype == torch.float16 and next(half.parameters()).dtype == torch.float16


def test_build_turns_on_deterministic_algorithms_with_warnings_and_fixes_cpu_threads(torch_globals):
    torch.set_num_threads(2)
    TinyCausalDiTAdapter(_config(arch={"dim": 16, "heads": 2}, cpu_threads=3)).build()
    assert torch_globals == [((True,), {"warn_only": True})] and torch.get_num_threads() == 3


def test_build_leaves_determinism_off_when_asked_and_threads_alone_off_the_cpu(torch_globals):
    torch.set_num_threads(2)
    TinyCausalDiTAdapter(_config(arch={"dim": 16, "heads": 2}, deterministic=False, device="meta")).build()
    assert torch_globals == [] and torch.get_num_threads() == 2


def test_generate_hands_every_decoded_frame_to_the_sink_and_records_the_run(case, tmp_path, torch_globals):
    a = TinyCausalDiTAdapter(_config(arch={"dim": 16, "heads": 2, "layers": 1, "steps": [1.0]}))
    req = _request(case, tmp_path)
    got: list[np.ndarray] = []
    video = a.generate(req, NativeControls(), got.append)
    model, _ = a.build()
    canvas, Kc = a.canvas_image_and_K(case)
    ro = generate(model, canvas, latent_poses(req.path.c2w), Kc, FULL, 3)
    assert ro.steps == []  # nothing captured unless asked
    expected = TinyVAE().decode(ro.latents, 9)
    assert len(got) == 9 and all(np.array_equal(g, e) for g, e in zip(got, expected))
    assert (video.num_frames, video.fps, video.context_trace) == (9, 16.0, ro.trace)
    assert sorted(video.timings) == ["attention_s", "generate_s"] and video.timings["attention_s"] > 0
    per_frame = 1 * 2 * S * 2 * 8 * 4  # one layer, K and V, S tokens, 2 heads of 8, fp32
    assert video.meta == {"arch": config_dict(model.cfg), "cache_peak_frames": 3, "cache_bytes": 3 * per_frame,
                          "device": "cpu", "dtype": "float32", "num_latents": 3}
