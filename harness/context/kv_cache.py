"""A KV cache with policy-driven gathering (tensor level; torch imported lazily by the caller).

Per layer, keys and values are stored per latent frame: frame ``f`` owns the token range
``[slot(f) * frame_seqlen, (slot(f) + 1) * frame_seqlen)`` of a preallocated ``[B, slots * S, H, D]`` buffer.
A chunk's attention context is ``gather(layer, frames)``: contiguous slots come back as a view, scattered ones as
one ``index_select``. Two storage modes:

* ``full``: one slot per latent frame of the rollout (FullKV, and FoV, which needs the whole history);
* ``bounded``: ``capacity`` slots recycled; :meth:`evict` frees frames a policy can never select again (Sliding:
  everything outside sink + recent), so memory stays flat.

RoPE is the caller's business, made explicit by :class:`RopeMode`: keys are cached **after** temporal RoPE at their
absolute frame index (LingBot ``causal_rope_apply(..., start_frame)``); ``rebase`` re-rotates retrieved keys so
they sit just before the recent window (WorldKV ``retrieval_rope_correction``), which composes because RoPE
rotations add.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass
class CacheStats:
    writes: int = 0
    gathers: int = 0
    contiguous_gathers: int = 0
    peak_frames: int = 0
    evicted: int = 0


class KVCache:
    """Keys/values of ``num_layers`` layers for up to ``capacity`` latent frames.

    Args:
        num_layers, frame_seqlen (tokens per latent frame S), num_heads H, head_dim D, capacity (frames).
        mode: ``full`` (slot = frame index) or ``bounded`` (slots recycled through :meth:`evict`).
        batch, device, dtype: buffer placement.
    """

    def __init__(self, num_layers: int, frame_seqlen: int, num_heads: int, head_dim: int, capacity: int,
                 mode: str = "full", batch: int = 1, device: Any = "cpu", dtype: Any = None):
        import torch

        if mode not in ("full", "bounded"):
            raise ValueError(f"mode={mode!r}: use 'full' or 'bounded'")
        self.mode, self.S, self.capacity = mode, int(frame_seqlen), int(capacity)
        dtype = dtype or torch.float32
        shape = (batch, self.capacity * self.S, num_heads, head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(num_layers)]
        self.slot_of: dict[int, int] = {}
        self._free = list(range(self.capacity))
        self.stats = CacheStats()

    # -- bookkeeping ----------------------------------------------------------------------------------------------
    @property
    def frames(self) -> list[int]:
        """Latent frames currently held, sorted."""
        return sorted(self.slot_of)

    def _slot_for(self, frame: int) -> int:
        if frame in self.slot_of:
            return self.slot_of[frame]
        if self.mode == "full":
            if frame >= self.capacity:
                raise IndexError(f"frame {frame} beyond the cache capacity {self.capacity}")
            slot = frame
            self._free.remove(slot)
        else:
            if not self._free:
                raise RuntimeError(f"bounded KV cache is full ({self.capacity} frames): evict first")
            slot = self._free.pop(0)
        self.slot_of[frame] = slot
        self.stats.peak_frames = max(self.stats.peak_frames, len(self.slot_of))
        return slot

    def evict(self, keep: Sequence[int]) -> list[int]:
        """Free every held frame not in ``keep`` (bounded mode); returns the evicted frames."""
        keep_set = set(keep)
        gone = [f for f in self.slot_of if f not in keep_set]
        for f in gone:
            self._free.append(self.slot_of.pop(f))
        self._free.sort()
        self.stats.evicted += len(gone)
        return gone

    # -- data -----------------------------------------------------------------------------------------------------
    def write(self, layer: int, first_frame: int, k: Any, v: Any) -> None:
        """Store ``k``/``v`` ``[B, n*S, H, D]`` for latent frames ``first_frame .. first_frame + n - 1``."""
        n = k.shape[1] // self.S
        for j in range(n):
            s = self._slot_for(first_frame + j) * self.S
            self.k[layer][:, s : s + self.S] = k[:, j * self.S : (j + 1) * self.S]
            self.v[layer][:, s : s + self.S] = v[:, j * self.S : (j + 1) * self.S]
        if layer == 0:
            self.stats.writes += n

    def token_index(self, frames: Sequence[int]) -> Any:
        """Buffer token indices of ``frames`` in the given order (LongTensor ``[len(frames) * S]``)."""
        import torch

        slots = torch.tensor([self.slot_of[f] for f in frames], dtype=torch.long)
        return (slots[:, None] * self.S + torch.arange(self.S)[None]).reshape(-1).to(self.k[0].device)

    def gather(self, layer: int, frames: Sequence[int]) -> tuple[Any, Any]:
        """K/V ``[B, len(frames) * S, H, D]`` of ``frames`` in the given order (a view when slots are contiguous)."""
        frames = list(frames)
        missing = [f for f in frames if f not in self.slot_of]
        if missing:
            raise KeyError(f"frames {missing} are not in the cache (evicted or never written)")
        if layer == 0:
            self.stats.gathers += 1
        if not frames:
            return self.k[layer][:, :0], self.v[layer][:, :0]
        slots = [self.slot_of[f] for f in frames]
        if all(b == a + 1 for a, b in zip(slots, slots[1:])):
            if layer == 0:
                self.stats.contiguous_gathers += 1
            s0, s1 = slots[0] * self.S, (slots[-1] + 1) * self.S
            return self.k[layer][:, s0:s1], self.v[layer][:, s0:s1]
        idx = self.token_index(frames)
        return self.k[layer].index_select(1, idx), self.v[layer].index_select(1, idx)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


@dataclass(frozen=True)
class RopeMode:
    """How cached keys are positioned in time: ``absolute`` (each key at its own frame index) or ``rebase``
    (retrieved frames are re-rotated to sit immediately before the recent window, in their original order)."""

    mode: str = "absolute"

    def positions(self, context: Sequence[int], retrieved: Sequence[int], recent: Sequence[int]) -> dict[int, int]:
        """Temporal position of every context frame under this mode."""
        pos = {f: f for f in context}
        if self.mode == "rebase" and retrieved:
            start = (min(recent) if recent else max(context) + 1) - len(retrieved)
            for j, f in enumerate(sorted(retrieved)):
                pos[f] = start + j
        return pos


@dataclass
class AttentionTimer:
    """Accumulates attention wall time per chunk (the benchmark reads it)."""

    per_chunk: list[float] = field(default_factory=list)
    current: float = 0.0

    def add(self, seconds: float) -> None:
        self.current += seconds

    def next_chunk(self) -> None:
        self.per_chunk.append(self.current)
        self.current = 0.0
