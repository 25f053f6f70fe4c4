"""A tiny Wan-like causal video DiT with a real KV cache: the mechanics of the nine-model set on any machine.

Pieces: a learned-free video "VAE" (temporal stride 4, spatial stride 8: latent 0 = frame 0, latent i = frames
4i-3..4i), patch embedding (1, 2, 2), per-frame timestep adaLN modulation, self-attention over latent frames with
3D-split RoPE (temporal half of each head by frame index, spatial half by token position), LingBot-style camera
conditioning from ``[o, d]`` ray maps folded 8x8 into 384 channels (``x = (1 + scale) x + shift`` after
self-attention), and a few-step flow-matching sampler generating 4 latents per chunk. Weights are random with a
seeded initialisation: the point is the code path, not the pictures.

Chunk ``k`` attends to the context latents its :class:`harness.context.ContextPolicy` selects (gathered from the
:class:`harness.context.kv_cache.KVCache`) plus its own latents; the same selection serves every denoising step and
the clean cache-refresh pass (t = 0), which is the only pass that writes the cache (keys after RoPE, at their
absolute frame index), as in Self-Forcing / LingBot-World v2.

Poses follow :mod:`trajectories.conventions` (OpenCV camera-to-world, world = frame 0, +yaw right, +pitch up).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.context import ContextPolicy, ContextSelector
from harness.context.kv_cache import AttentionTimer, KVCache, RopeMode
from harness.context.trace import ChunkTrace


@dataclass(frozen=True)
class TinyDiTConfig:
    """Architecture and sampler. Shapes: latent ``[F, C, h, w]`` with ``h = H / 8``; tokens per latent frame
    ``S = (h / patch) * (w / patch)``; head_dim = dim / heads (even, split half temporal / half spatial RoPE)."""

    channels: int = 3
    spatial_stride: int = 8
    patch: int = 2
    dim: int = 64
    heads: int = 4
    layers: int = 2
    mlp_ratio: float = 2.0
    ray_block: int = 8
    steps: tuple[float, ...] = (1.0, 0.75, 0.5, 0.25)
    init_seed: int = 0
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


class TinyVAE:
    """Learned-free video autoencoder: area-downsample anchor frames by 8 (to [-1, 1]); decode by bilinear
    upsampling and linear interpolation between consecutive latents inside each 4-frame group."""

    def __init__(self, stride: int = 8):
        self.stride = stride

    def encode_image(self, img: np.ndarray) -> torch.Tensor:
        """(H, W, 3) uint8 -> (3, H/8, W/8) float32 in [-1, 1]."""
        x = torch.from_numpy(img).permute(2, 0, 1).float()[None] / 127.5 - 1.0
        return F.avg_pool2d(x, self.stride)[0]

    def decode(self, latents: torch.Tensor, num_frames: int) -> np.ndarray:
        """(L, 3, h, w) -> (num_frames, H, W, 3) uint8; frame 4i = latent i, frames between interpolate."""
        lat = latents.float()
        up = F.interpolate(lat, scale_factor=self.stride, mode="bilinear", align_corners=False)
        out = []
        for t in range(num_frames):
            i = -(-t // 4)  # the latent whose group holds frame t
            a = (4 * i - t) / 4.0  # 0 at the anchor, 0.75 at the group's first frame
            prev = up[max(i - 1, 0)]
            img = (1 - a) * up[min(i, len(up) - 1)] + a * prev
            out.append(((img.clamp(-1, 1) + 1) * 127.5).round().byte().permute(1, 2, 0).numpy())
        return np.stack(out)


def _rope_freqs(n: int, theta: float) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, n, 2, dtype=torch.float64) / n))


def rope_rotate(x: torch.Tensor, pos: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of the last dim of ``x`` [..., N, H, d] by ``pos`` [N] * ``freqs`` [d/2] (float64 angles)."""
    ang = pos.to(torch.float64)[:, None] * freqs[None]  # [N, d/2]
    cos, sin = ang.cos().to(x.dtype)[:, None, :], ang.sin().to(x.dtype)[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2)


class Block(nn.Module):
    freq_t: torch.Tensor  # RoPE frequencies of the time half of a head (a buffer, registered in __init__)
    freq_s: torch.Tensor  # and of the space half

    def __init__(self, cfg: TinyDiTConfig):
        super().__init__()
        d = cfg.dim
        self.cfg = cfg
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, int(d * cfg.mlp_ratio)), nn.GELU(approximate="tanh"),
                                 nn.Linear(int(d * cfg.mlp_ratio), d))
        self.ada = nn.Linear(d, 6 * d)
        self.cam = nn.Linear(d, 2 * d)
        half = cfg.head_dim // 2
        self.register_buffer("freq_t", _rope_freqs(half, cfg.rope_theta), persistent=False)
        self.register_buffer("freq_s", _rope_freqs(cfg.head_dim - half, cfg.rope_theta), persistent=False)

    def rope(self, x: torch.Tensor, tpos: torch.Tensor, spos: torch.Tensor) -> torch.Tensor:
        half = self.cfg.head_dim // 2
        return torch.cat([rope_rotate(x[..., :half], tpos, self.freq_t),
                          rope_rotate(x[..., half:], spos, self.freq_s)], dim=-1)

    def forward(self, x: torch.Tensor, temb: torch.Tensor, cam: torch.Tensor, tpos: torch.Tensor, spos: torch.Tensor,
                attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """x [B, N, d]; temb [B, N, d] per-token timestep embedding; cam [B, N, d]; tpos/spos [N] RoPE positions;
        ``attend(q, k, v)`` with [B, N, H, hd] tensors (k, v post-RoPE) returns [B, N, H, hd]."""
        B, N, d = x.shape
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(temb).chunk(6, dim=-1)
        h = self.norm1(x) * (1 + sc1) + sh1
        q, k, v = self.qkv(h).view(B, N, 3, self.cfg.heads, self.cfg.head_dim).unbind(2)
        q, k = self.rope(q, tpos, spos), self.rope(k, tpos, spos)
        a = attend(q, k, v).reshape(B, N, d)
        x = x + g1 * self.proj(a)
        cs, ch = self.cam(cam).chunk(2, dim=-1)
        x = (1 + cs) * x + ch
        out: torch.Tensor = x + g2 * self.mlp(self.norm2(x) * (1 + sc2) + sh2)
        return out


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    f = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half).to(t.device)
    a = 1000.0 * t.float()[:, None] * f[None]
    return torch.cat([a.cos(), a.sin()], dim=-1)


class TinyCausalDiT(nn.Module):
    """The DiT. :meth:`forward_chunk` runs one chunk against the KV cache; :meth:`forward_masked` runs a whole
    sequence with a frame-level mask and no cache (the reference the cache must equal)."""

    def __init__(self, cfg: TinyDiTConfig):
        super().__init__()
        self.cfg = cfg
        p, C, d = cfg.patch, cfg.channels, cfg.dim
        cam_ch = 6 * cfg.ray_block**2 * p * p
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.init_seed)  # seeded initialisation, global RNG state untouched outside
            self.patch_embed = nn.Linear(C * p * p, d)
            self.cam_embed = nn.Linear(cam_ch, d)
            self.t_mlp = nn.Sequential(nn.Linear(256, d), nn.SiLU(), nn.Linear(d, d))
            self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
            self.norm_out = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
            self.head = nn.Linear(d, C * p * p)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
                    nn.init.zeros_(m.bias)
        self.eval()

    # -- token layout -------------------------------------------------------------------------------------------
    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """(F, C, h, w) -> (1, F*S, C*p*p), frame-major then row-major patches."""
        p = self.cfg.patch
        Fr, C, h, w = x.shape
        t = x.reshape(Fr, C, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(Fr * (h // p) * (w // p), -1)
        return t[None]

    def untokens(self, t: torch.Tensor, Fr: int, h: int, w: int) -> torch.Tensor:
        p, C = self.cfg.patch, self.cfg.channels
        return t[0].reshape(Fr, h // p, w // p, C, p, p).permute(0, 3, 1, 4, 2, 5).reshape(Fr, C, h, w)

    def frame_seqlen(self, h: int, w: int) -> int:
        return (h // self.cfg.patch) * (w // self.cfg.patch)

    def _embed(self, x: torch.Tensor, t: torch.Tensor, cam: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        Fr, _, h, w = x.shape
        S = self.frame_seqlen(h, w)
        tok = self.patch_embed(self.tokens(x))
        temb = self.t_mlp(timestep_embedding(t, 256)).repeat_interleave(S, dim=0)[None]
        ctok = self.cam_embed(self.tokens(cam))
        return tok, temb, ctok, S

    def _positions(self, frame_ids: Sequence[int] | torch.Tensor, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        f = torch.as_tensor(list(frame_ids), dtype=torch.long)
        return f.repeat_interleave(S), torch.arange(S).repeat(len(f))

    # -- with the cache -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def forward_chunk(self, x: torch.Tensor, t: torch.Tensor, cam: torch.Tensor, frames: Sequence[int],
                      cache: KVCache, context: Sequence[int], write: bool = False,
                      context_positions: Optional[dict[int, int]] = None,
                      timer: Optional[AttentionTimer] = None) -> torch.Tensor:
        """Velocity for the chunk ``x`` (F, C, h, w) at per-frame times ``t`` (F,), attending to the cached
        ``context`` frames (post-RoPE keys, re-rotated when ``context_positions`` moves them) plus itself.
        ``write=True`` (the clean refresh pass) stores this chunk's post-RoPE K/V at its absolute frame indices."""
        Fr, _, h, w = x.shape
        tok, temb, ctok, S = self._embed(x, t, cam)
        tpos, spos = self._positions(frames, S)
        ctx = list(context)
        for li, blk in enumerate(self.blocks):
            assert isinstance(blk, Block)

            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, li: int = li, blk: Block = blk
                       ) -> torch.Tensor:
                t0 = time.perf_counter()  # the timed region includes gathering the context K/V
                ck, cv = cache.gather(li, ctx)
                if context_positions is not None and ctx:
                    delta = torch.tensor([context_positions[f] - f for f in ctx]).repeat_interleave(S)
                    if bool((delta != 0).any()):
                        half = self.cfg.head_dim // 2
                        ck = torch.cat([rope_rotate(ck[..., :half], delta, blk.freq_t), ck[..., half:]], dim=-1)
                if write:
                    cache.write(li, frames[0], k, v)
                kk, vv = torch.cat([ck, k], dim=1), torch.cat([cv, v], dim=1)
                o = F.scaled_dot_product_attention(q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2))
                if timer is not None:
                    if o.is_cuda:
                        torch.cuda.synchronize()
                    timer.add(time.perf_counter() - t0)
                return o.transpose(1, 2)

            tok = blk(tok, temb, ctok, tpos, spos, attend)
        out = self.head(self.norm_out(tok))
        return self.untokens(out, Fr, h, w)

    # -- without a cache (the reference) ------------------------------------------------------------------------
    @torch.no_grad()
    def forward_masked(self, x: torch.Tensor, t: torch.Tensor, cam: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
        """Whole sequence (F, C, h, w) at times (F,), frame ``i`` attending to frames ``j`` with
        ``frame_mask[i, j]``; frame indices are absolute (0..F-1)."""
        Fr, _, h, w = x.shape
        tok, temb, ctok, S = self._embed(x, t, cam)
        tpos, spos = self._positions(range(Fr), S)
        token_mask = frame_mask.bool().repeat_interleave(S, 0).repeat_interleave(S, 1)

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               attn_mask=token_mask[None, None])
            return o.transpose(1, 2)

        for blk in self.blocks:
            tok = blk(tok, temb, ctok, tpos, spos, attend)
        return self.untokens(self.head(self.norm_out(tok)), Fr, h, w)


def camera_maps(latent_c2w: np.ndarray, K: np.ndarray, H: int, W: int, cfg: TinyDiTConfig) -> torch.Tensor:
    """LingBot-style camera condition: relative + framewise + max-norm poses, ``[o, d]`` rays at pixel resolution,
    folded 8x8 into 384 channels at the latent grid -> (L, 384, H/8, W/8) float32."""
    from adapters.controls.poses import lingbot_relative
    from adapters.controls.rays import fold, od_rays

    rel = lingbot_relative(latent_c2w)
    return torch.from_numpy(fold(od_rays(rel, K, H, W), cfg.ray_block).astype(np.float32))


@dataclass
class Rollout:
    """Result of :func:`generate`: latents (L, C, h, w), the context trace, and the captured step inputs."""

    latents: torch.Tensor
    trace: list[ChunkTrace]
    timings: dict[str, float]
    attention_per_chunk: list[float]
    steps: list[dict[str, Any]] = field(default_factory=list)
    cache_peak_frames: int = 0
    cache_bytes: int = 0


def noise_generator(seed: int, chunk: int, device: Any = "cpu") -> torch.Generator:
    """Noise RNG of one chunk, from the item's seed and the chunk index only (never rank, order or time)."""
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 1_000_003 + int(chunk)) % (2**63 - 1))
    return g


@torch.no_grad()
def generate(model: TinyCausalDiT, image: np.ndarray, latent_c2w: np.ndarray, K: np.ndarray,
             policy: ContextPolicy, seed: int, device: Any = "cpu", dtype: Any = torch.float32,
             capture: bool = False, timer: Optional[AttentionTimer] = None) -> Rollout:
    """Chunk-by-chunk rollout of ``len(latent_c2w)`` latents conditioned on ``image`` (latent 0).

    Args:
        image: (H, W, 3) uint8 conditioning frame at the model canvas. latent_c2w: (L, 4, 4) latent poses.
        K: (3, 3) canvas intrinsics. policy: the context policy (its ``chunk`` is the latents per chunk).
        capture: keep every step's (chunk, step, x, t, v) for equivalence tests.
    """
    cfg = model.cfg
    H, W = image.shape[:2]
    h, w = H // cfg.spatial_stride, W // cfg.spatial_stride
    L = len(latent_c2w)
    vae = TinyVAE(cfg.spatial_stride)
    cond = vae.encode_image(image).to(device, dtype)
    cam = camera_maps(latent_c2w, K, H, W, cfg).to(device, dtype)
    selector = ContextSelector(policy, latent_c2w, K, H, W)
    S = model.frame_seqlen(h, w)
    bounded = not policy.needs_full_history
    capacity = L if not bounded else min(L, policy.sink + policy.recent + policy.chunk)
    cache = KVCache(cfg.layers, S, cfg.heads, cfg.head_dim, capacity, "bounded" if bounded else "full",
                    device=device, dtype=dtype)
    rope = RopeMode(policy.rope)
    out = torch.zeros(L, cfg.channels, h, w, device=device, dtype=dtype)
    trace, steps_log = [], []
    timer = timer or AttentionTimer()
    t_start = time.perf_counter()
    for k in range(selector.num_chunks):
        sel = selector.select(k)
        frames = list(sel.current)
        ctx = sel.context
        pos = rope.positions(ctx, sel.retrieved, sel.recent) if policy.rope == "rebase" else None
        g = noise_generator(seed, k, device)
        x = torch.randn(len(frames), cfg.channels, h, w, generator=g, device=device, dtype=torch.float32).to(dtype)
        fixed = [j for j, f in enumerate(frames) if f == 0]  # the conditioning latent is given, clean
        for si, tv in enumerate(cfg.steps):
            tt = torch.full((len(frames),), tv, device=device, dtype=dtype)
            for j in fixed:
                x[j], tt[j] = cond, 0.0
            v = model.forward_chunk(x, tt, cam[frames], frames, cache, ctx, False, pos, timer)
            if capture:
                steps_log.append({"chunk": k, "step": si, "x": x.clone(), "t": tt.clone(), "v": v.clone()})
            t_next = cfg.steps[si + 1] if si + 1 < len(cfg.steps) else 0.0
            x = x + (t_next - tv) * v
        for j in fixed:
            x[j] = cond
        zero = torch.zeros(len(frames), device=device, dtype=dtype)
        model.forward_chunk(x, zero, cam[frames], frames, cache, ctx, True, pos, timer)  # clean refresh: writes
        out[frames] = x
        timer.next_chunk()
        if bounded and k + 1 < selector.num_chunks:
            cache.evict(selector.select(k + 1).context)
        trace.append(sel.to_trace())
    elapsed = time.perf_counter() - t_start
    return Rollout(out, trace, {"generate_s": elapsed}, timer.per_chunk, steps_log, cache.stats.peak_frames,
                   cache.nbytes())


def context_mask(selector: ContextSelector) -> torch.Tensor:
    """Frame-level mask (L, L): frame i may attend to frame j iff j is attended by i's chunk."""
    L = selector.num_latents
    m = torch.zeros(L, L, dtype=torch.bool)
    for k in range(selector.num_chunks):
        sel = selector.select(k)
        for i in sel.current:
            m[i, sel.attended] = True
    return m


def config_dict(cfg: TinyDiTConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["steps"] = list(cfg.steps)
    return d
