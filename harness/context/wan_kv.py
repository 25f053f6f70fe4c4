"""The harness KV cache and context policies driving diffusers' ``WanTransformer3DModel`` (lazy diffusers import).

Six of the nine models are Wan-based. This module drives the real Wan attention class through an attention
processor: :class:`WanKVAttnProcessor` replaces the self-attention processor of every block and either

* **cached** mode: attends the chunk's queries to ``[cache.gather(layer, context)] + [the chunk's own keys]``, and on
  the clean refresh pass (t = 0) writes the chunk's post-RoPE keys/values at their absolute latent-frame indices into
  :class:`harness.context.kv_cache.KVCache`; or
* **masked** mode: runs the whole sequence with a frame-level boolean mask and no cache (the reference).

Temporal RoPE positions are absolute latent-frame indices in both modes (a forward hook on the model's ``rope``
substitutes the chunk's positions), so a cached key is rotated exactly as it would be in the full sequence;
``rope: rebase`` re-rotates retrieved keys to sit just before the recent window (:func:`shift_temporal`).
Timesteps are per token (Wan 2.2's ``(batch, seq_len)`` form): history at t = 0, the chunk at its step's t.
Cross-attention, the FFN, norms and the patch embedding are per token in Wan, so self-attention is the only place
frames meet: that is what the cache replaces. The rollout conditions on latent 0 (kept clean) and a fixed text
embedding; Wan T2V has no camera input, so poses only drive the FoV selection.

The processor follows the computation of diffusers' own ``WanAttnProcessor``
(huggingface/diffusers@v0.42.1 src/diffusers/models/transformers/transformer_wan.py): q/k/v projections, RMS
q/k norms across heads, interleaved-pair RoPE, SDPA, output projection. :func:`check_matches_stock_processor`
verifies that on the installed diffusers.

Shapes: latents ``[1, C, L, h, w]``; tokens per latent frame ``S = (h / p_h) * (w / p_w)``; K/V ``[B, N, H, D]``.
Poses follow :mod:`trajectories.conventions` (OpenCV camera-to-world, world = frame 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

import numpy as np

from .kv_cache import AttentionTimer, KVCache
from .policies import ContextPolicy, ContextSelector
from .trace import ChunkTrace

if TYPE_CHECKING:  # torch and diffusers are imported lazily at run time
    import torch
    from diffusers.models.transformers.transformer_wan import WanAttention


class WanRope(Protocol):
    """What this module reads of diffusers' ``WanRotaryPosEmbed``: the head-dim split ``t_dim + h_dim + w_dim = D``
    and the angle tables ``freqs_cos`` / ``freqs_sin`` ``[max_seq_len, D]`` (each pair's angle repeated twice)."""

    t_dim: int
    h_dim: int
    w_dim: int
    freqs_cos: torch.Tensor
    freqs_sin: torch.Tensor

    def register_forward_hook(self, hook: Callable[..., Any]) -> Any: ...


class WanSelfAttention(Protocol):
    """What :class:`WanKV` reads of a block's ``WanAttention``: heads, ``inner_dim = heads * D``, and the processor
    slot (diffusers types ``set_processor`` with its own processor classes only)."""

    heads: int
    inner_dim: int

    def set_processor(self, processor: WanKVAttnProcessor) -> None: ...


class WanBlock(Protocol):
    """One transformer block of ``WanTransformer3DModel``: its self-attention ``attn1``."""

    attn1: WanSelfAttention


class WanConfig(Protocol):
    """The constructor arguments this module reads from ``WanTransformer3DModel.config``."""

    patch_size: tuple[int, int, int]
    in_channels: int
    text_dim: int


class WanModel(Protocol):
    """The parts of diffusers' ``WanTransformer3DModel`` this module drives (to mypy, diffusers' class has ``config:
    dict[str, Any]`` although it is read by attribute, and registered buffers such as the rope's tables are
    ``Tensor | Module``). Called as ``model(x [1, C, F, h, w], timestep [1, F*S] (x1000),
    text [1, n, text_dim], return_dict=False)`` -> ``(velocity [1, C, F, h, w],)``."""

    config: WanConfig
    rope: WanRope
    blocks: Sequence[WanBlock]

    def __call__(self, hidden_states: torch.Tensor, timestep: torch.Tensor, encoder_hidden_states: torch.Tensor,
                 *, return_dict: bool) -> tuple[torch.Tensor, ...]: ...

    def to(self, *args: Any, **kwargs: Any) -> WanModel:
        """``torch.nn.Module.to``: the same model on another device or dtype."""
        ...


@dataclass
class WanKVState:
    """What the processors of one model share during a forward call.

    mode: ``cached`` or ``masked``. cache: the KV cache (cached mode). context: history latent frames to gather.
    frames: absolute latent indices of the tokens in this call (their RoPE positions). write: store this call's K/V
    (the clean refresh pass). token_mask: ``[N, N]`` bool (masked mode). timer: accumulates attention time.
    """

    frame_seqlen: int
    mode: str = "cached"
    cache: Optional[KVCache] = None
    context: list[int] = field(default_factory=list)
    frames: list[int] = field(default_factory=list)
    write: bool = False
    token_mask: Optional[torch.Tensor] = None
    timer: Optional[AttentionTimer] = None
    context_shift: Optional[list[int]] = None  # rope=rebase: temporal position change of each context frame
    rope: Optional[WanRope] = None  # the model's WanRotaryPosEmbed (its tables rotate cached keys)


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on interleaved pairs ``(x[2i], x[2i+1])`` of the last dim; ``cos``/``sin`` hold one angle per pair."""
    import torch

    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2).type_as(x)


class WanKVAttnProcessor:
    """Self-attention processor for one ``WanAttention`` layer (``layer`` indexes the cache)."""

    def __init__(self, state: WanKVState, layer: int):
        self.state, self.layer = state, layer

    def __call__(self, attn: WanAttention, hidden_states: torch.Tensor,
                 encoder_hidden_states: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                 rotary_emb: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        if encoder_hidden_states is not None:
            raise ValueError("WanKVAttnProcessor is for self-attention (attn1) only")
        st = self.state
        q = attn.norm_q(attn.to_q(hidden_states)).unflatten(2, (attn.heads, -1))
        k = attn.norm_k(attn.to_k(hidden_states)).unflatten(2, (attn.heads, -1))
        v = attn.to_v(hidden_states).unflatten(2, (attn.heads, -1))
        if rotary_emb is not None:
            cos, sin = rotary_emb  # [1, N, 1, D] with each pair's angle repeated twice
            q, k = _rotate_pairs(q, cos[..., 0::2], sin[..., 0::2]), _rotate_pairs(k, cos[..., 0::2], sin[..., 0::2])
        t0 = time.perf_counter()  # the timed region includes gathering the context K/V
        if st.mode == "masked":
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               attn_mask=st.token_mask)
        else:
            if st.cache is None or st.rope is None:
                raise ValueError("WanKVState in cached mode needs its cache and the model's rope")
            ck, cv = st.cache.gather(self.layer, st.context)
            if st.context_shift is not None and any(st.context_shift):
                ck = shift_temporal(ck, st.context_shift, st.rope, st.frame_seqlen)
            if st.write:
                st.cache.write(self.layer, st.frames[0], k, v)
            kk, vv = torch.cat([ck, k.to(ck.dtype)], dim=1), torch.cat([cv, v.to(cv.dtype)], dim=1)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2))
        if st.timer is not None:
            if o.is_cuda:
                torch.cuda.synchronize()
            st.timer.add(time.perf_counter() - t0)
        o = o.transpose(1, 2).flatten(2, 3).type_as(q)
        out: torch.Tensor = attn.to_out[1](attn.to_out[0](o))
        return out


def shift_temporal(k: torch.Tensor, shifts: Sequence[int], rope: WanRope, frame_seqlen: int) -> torch.Tensor:
    """Move cached post-RoPE keys ``k`` [B, n*S, H, D] (n frames) by ``shifts[i]`` temporal positions: RoPE angles
    add, so rotating the temporal channels ``[0, t_dim)`` by ``shift x freq`` equals computing them at the new
    position. Angles come from the model's own tables (``cos(-x) = cos x``, ``sin(-x) = -sin x``)."""
    import torch

    td = rope.t_dim
    d = torch.as_tensor(list(shifts), dtype=torch.long, device=rope.freqs_cos.device)
    sign = torch.where(d < 0, -1.0, 1.0).to(rope.freqs_sin.dtype)[:, None]
    cos = rope.freqs_cos[d.abs(), :td][:, 0::2]
    sin = rope.freqs_sin[d.abs(), :td][:, 0::2] * sign
    cos = cos.repeat_interleave(frame_seqlen, 0)[None, :, None]
    sin = sin.repeat_interleave(frame_seqlen, 0)[None, :, None]
    return torch.cat([_rotate_pairs(k[..., :td], cos, sin), k[..., td:]], dim=-1)


def rope_at(rope: WanRope, frames: Sequence[int], pph: int, ppw: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Wan's 3D RoPE ``(cos, sin)`` ``[1, len(frames) * pph * ppw, 1, D]`` with temporal positions ``frames``
    (absolute latent indices) instead of ``0..F-1``; spatial positions as in ``WanRotaryPosEmbed``."""
    import torch

    sizes = [rope.t_dim, rope.h_dim, rope.w_dim]
    f = torch.as_tensor(list(frames), dtype=torch.long, device=rope.freqs_cos.device)
    out = []
    for table in (rope.freqs_cos, rope.freqs_sin):
        t, h, w = torch.split(table, sizes, dim=1)
        n = len(f)
        parts = [t[f].view(n, 1, 1, -1).expand(n, pph, ppw, -1), h[:pph].view(1, pph, 1, -1).expand(n, pph, ppw, -1),
                 w[:ppw].view(1, 1, ppw, -1).expand(n, pph, ppw, -1)]
        out.append(torch.cat(parts, dim=-1).reshape(1, n * pph * ppw, 1, -1))
    return out[0], out[1]


class WanKV:
    """A ``WanTransformer3DModel`` with :class:`WanKVAttnProcessor` on every self-attention layer.

    Args:
        model: the transformer (eval mode). frame_seqlen: tokens per latent frame for the latent grid in use.
    """

    def __init__(self, model: WanModel, latent_hw: tuple[int, int]):
        p_t, p_h, p_w = model.config.patch_size
        if p_t != 1:
            raise ValueError("the KV cache indexes latent frames: use a Wan patch size with p_t = 1")
        self.model = model
        self.pph, self.ppw = latent_hw[0] // p_h, latent_hw[1] // p_w
        if max(self.pph, self.ppw) > self.positions:
            raise ValueError(f"a latent grid of {self.pph}x{self.ppw} patches needs RoPE tables of at least "
                             f"{max(self.pph, self.ppw)} positions; this model's have {self.positions} (tiny_wan: "
                             "rope_positions)")
        self.state = WanKVState(frame_seqlen=self.pph * self.ppw, rope=model.rope)
        for i, blk in enumerate(model.blocks):
            blk.attn1.set_processor(WanKVAttnProcessor(self.state, i))
        # absolute temporal positions for whatever frames the call holds
        model.rope.register_forward_hook(lambda m, inp, out: rope_at(m, self.state.frames, self.pph, self.ppw))

    @property
    def S(self) -> int:
        return self.state.frame_seqlen

    @property
    def positions(self) -> int:
        """Rows of the model's RoPE tables: the most latent frames a rollout may hold (absolute positions)."""
        return int(self.model.rope.freqs_cos.shape[0])

    def _call(self, x: torch.Tensor, t: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """x [1, C, F, h, w]; t [F] per-frame flow time in [0, 1] -> velocity [1, C, F, h, w]."""
        import torch

        tt = (t * 1000.0).repeat_interleave(self.S)[None]  # per token (Wan 2.2 form)
        with torch.no_grad():
            return self.model(x, tt, text, return_dict=False)[0]

    def forward_chunk(self, x: torch.Tensor, t: torch.Tensor, text: torch.Tensor, frames: Sequence[int],
                      cache: KVCache, context: Sequence[int], write: bool = False,
                      timer: Optional[AttentionTimer] = None,
                      context_positions: Optional[dict[int, int]] = None) -> torch.Tensor:
        """The chunk's velocity, attending to the cached ``context`` latents plus itself; ``write`` stores the
        chunk's post-RoPE K/V (the clean refresh pass). ``context_positions`` (rope=rebase) moves cached keys to
        other temporal positions for this call."""
        st = self.state
        st.mode, st.cache, st.context, st.frames, st.write, st.timer = "cached", cache, list(context), list(frames), \
            write, timer
        st.context_shift = None if context_positions is None else [context_positions[f] - f for f in st.context]
        return self._call(x, t, text)

    def forward_masked(self, x: torch.Tensor, t: torch.Tensor, text: torch.Tensor,
                       frame_mask: np.ndarray) -> torch.Tensor:
        """The whole sequence (latents ``0..F-1``) with frame ``i`` attending to frame ``j`` iff
        ``frame_mask[i, j]``; no cache (the reference)."""
        import torch

        st = self.state
        F_ = x.shape[2]
        m = torch.as_tensor(np.asarray(frame_mask), dtype=torch.bool, device=x.device)
        st.mode, st.frames, st.timer = "masked", list(range(F_)), None
        st.token_mask = m.repeat_interleave(self.S, 0).repeat_interleave(self.S, 1)[None, None]
        return self._call(x, t, text)


def tiny_wan(layers: int = 2, heads: int = 2, head_dim: int = 12, channels: int = 4, text_dim: int = 16,
             ffn_dim: int = 32, init_seed: int = 0, dtype: Optional[torch.dtype] = None,
             rope_positions: Optional[int] = None) -> WanModel:
    """diffusers' ``WanTransformer3DModel`` at a tiny configuration with seeded random weights (patch (1, 2, 2)).

    ``rope_positions``: length of the RoPE tables (``rope_max_seq_len``), the most latent frames a rollout may have
    and the most patches along a side; ``None`` keeps Wan's own default (1024). A table's entries do not depend on
    its length, so a longer table changes no output."""
    import torch
    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel

    table = {} if rope_positions is None else {"rope_max_seq_len": int(rope_positions)}
    with torch.random.fork_rng(devices=[]):  # seeded init; the global RNG state is untouched outside
        torch.manual_seed(init_seed)
        m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=heads, attention_head_dim=head_dim,
                                  in_channels=channels, out_channels=channels, text_dim=text_dim, freq_dim=32,
                                  ffn_dim=ffn_dim, num_layers=layers, **table)
    model: WanModel = m.eval() if dtype in (None, torch.float32) else m.eval().to(dtype)
    return model


def attended_frame_mask(selector: ContextSelector) -> np.ndarray:
    """(L, L) bool: latent ``i`` may attend to latent ``j`` iff ``j`` is attended by ``i``'s chunk."""
    L = selector.num_latents
    m = np.zeros((L, L), dtype=bool)
    for k in range(selector.num_chunks):
        sel = selector.select(k)
        for i in sel.current:
            m[i, sel.attended] = True
    return m


def chunk_noise(seed: int, chunk: int, shape: Sequence[int]) -> torch.Tensor:
    """Noise of one chunk from the item seed and the chunk index only (CPU generator: same on every device)."""
    import torch

    g = torch.Generator().manual_seed((int(seed) * 1_000_003 + int(chunk)) % (2**63 - 1))
    return torch.randn(*shape, generator=g)


@dataclass
class WanRollout:
    """Latents ``[1, C, L, h, w]``, the context trace, attention seconds per chunk and (optionally) every step's
    inputs and velocity (``chunk``, ``step``, ``x``, ``t``, ``v``) for equivalence checks."""

    latents: torch.Tensor
    trace: list[ChunkTrace]
    attention_per_chunk: list[float]
    steps: list[dict[str, Any]] = field(default_factory=list)
    cache_peak_frames: int = 0
    cache_bytes: int = 0


def wan_generate(wan: WanKV, first_latent: torch.Tensor, latent_c2w: np.ndarray, K: np.ndarray,
                 image_hw: tuple[int, int], policy: ContextPolicy, seed: int, text: torch.Tensor,
                 steps: Sequence[float] = (1.0, 0.5), capture: bool = False,
                 timer: Optional[AttentionTimer] = None) -> WanRollout:
    """Causal chunked rollout of ``len(latent_c2w)`` latents under ``policy`` through the KV cache.

    Args:
        first_latent: [C, h, w] latent 0 (the conditioning frame, kept clean). latent_c2w: (L, 4, 4) poses (FoV).
        K: (3, 3) pixel intrinsics for ``image_hw`` (H, W). text: [1, n, text_dim] text embedding.
        steps: flow-matching times of the few-step Euler sampler; each chunk ends with a clean refresh (t = 0).
    """
    import torch

    from .kv_cache import RopeMode

    rope_mode = RopeMode(policy.rope)
    model = wan.model
    dev, dtype = first_latent.device, first_latent.dtype
    C, h, w = first_latent.shape
    L = len(latent_c2w)
    if L > wan.positions:  # latent i sits at temporal position i: past the table the index fails deep in torch
        raise ValueError(f"a rollout of {L} latents needs RoPE tables of at least {L} positions; this model's have "
                         f"{wan.positions} (tiny_wan: rope_positions={L})")
    selector = ContextSelector(policy, latent_c2w, K, *image_hw)
    bounded = not policy.needs_full_history
    capacity = L if not bounded else min(L, policy.sink + policy.recent + policy.chunk)
    blk = model.blocks[0].attn1
    cache = KVCache(len(model.blocks), wan.S, blk.heads, blk.inner_dim // blk.heads, capacity,
                    "bounded" if bounded else "full", device=dev, dtype=dtype)
    out = torch.zeros(1, C, L, h, w, device=dev, dtype=dtype)
    timer = timer or AttentionTimer()
    trace: list[ChunkTrace] = []
    log: list[dict[str, Any]] = []
    with torch.no_grad():
        for k in range(selector.num_chunks):
            sel = selector.select(k)
            frames, ctx = list(sel.current), sel.context
            pos = rope_mode.positions(ctx, sel.retrieved, sel.recent) if policy.rope == "rebase" else None
            x = chunk_noise(seed, k, (1, C, len(frames), h, w)).to(dev, dtype)
            fixed = [j for j, f in enumerate(frames) if f == 0]
            for si, tv in enumerate(steps):
                tt = torch.full((len(frames),), float(tv), device=dev, dtype=torch.float32)
                for j in fixed:
                    x[:, :, j], tt[j] = first_latent, 0.0
                v = wan.forward_chunk(x, tt, text, frames, cache, ctx, False, timer, pos)
                if capture:
                    log.append({"chunk": k, "step": si, "x": x.clone(), "t": tt.clone(), "v": v.clone()})
                t_next = steps[si + 1] if si + 1 < len(steps) else 0.0
                x = x + (t_next - tv) * v
            for j in fixed:
                x[:, :, j] = first_latent
            zero = torch.zeros(len(frames), device=dev, dtype=torch.float32)
            wan.forward_chunk(x, zero, text, frames, cache, ctx, True, timer, pos)  # clean refresh: the only write
            out[:, :, frames] = x
            timer.next_chunk()
            if bounded and k + 1 < selector.num_chunks:
                cache.evict(selector.select(k + 1).context)
            trace.append(sel.to_trace())
    return WanRollout(out, trace, timer.per_chunk, log, cache.stats.peak_frames, cache.nbytes())


def check_matches_stock_processor(model: WanModel, latent_hw: tuple[int, int], frames: int = 3, seed: int = 0) -> float:
    """Max |diff| between the model with diffusers' own processors and with :class:`WanKVAttnProcessor` in masked
    mode under an all-true mask (same full bidirectional attention). Restores nothing: use a fresh model."""
    import torch

    g = torch.Generator().manual_seed(seed)
    C = model.config.in_channels
    x = torch.randn(1, C, frames, *latent_hw, generator=g)
    text = torch.randn(1, 5, model.config.text_dim, generator=g)
    t = torch.rand(frames, generator=g)
    with torch.no_grad():
        p_h, p_w = model.config.patch_size[1:]
        S = (latent_hw[0] // p_h) * (latent_hw[1] // p_w)
        stock = model(x, (t * 1000.0).repeat_interleave(S)[None], text, return_dict=False)[0]
        wan = WanKV(model, latent_hw)
        ours = wan.forward_masked(x, t, text, np.ones((frames, frames), dtype=bool))
    return float((stock - ours).abs().max())
