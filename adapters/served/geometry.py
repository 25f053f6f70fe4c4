"""Chunk geometry of a served model, as the engine's own code makes it: how many chunks a session runs, how many
frames each chunk streams, and which clip lengths the engine can honour exactly.

Two rules, each the engine's code restated (the numbers they take come from the engine's configuration for the
model, recorded in ``backend.models.<model>.geometry`` with the file that states each; tests/adapters/served/
test_sglang_engine.py checks them against the engine's own classes and functions):

* ``causal_wan`` (LingBot-World v2 on SGLang and on vLLM-Omni): ``c`` latents a chunk, a Wan VAE of temporal
  stride ``s``. The clip has ``L = (N - 1) / s + 1`` latents, ``L / c`` chunks; the causal decode gives
  ``1 + s (c - 1)`` frames in chunk 0 and ``s c`` after (sglang 0.5.23 ``runtime/pipelines_core/stages/realtime/
  vae.py::_decode_wan_with_persistent_cache``: the first latent of the session decodes to one frame; vllm-omni 0.30.0
  ``diffusion/models/lingbot_world/pipeline.py::_chunk_media_frame_count``). ``N`` must be ``s k + 1`` and ``L`` a
  multiple of ``c`` (vllm-omni ``_parse_request`` refuses anything else; SGLang would cut the last chunk).
* ``sana_wm`` (SANA-WM on SGLang): ``c`` latents a chunk, LTX-2 temporal stride ``s`` (8). The stage-1 grid is
  ``floor(L / c)`` chunks with the remainder put into chunk 0 (``sana_wm/self_forcing.py::
  create_autoregressive_segments``); with the LTX-2 refiner on (SGLang's default when the checkpoint ships
  ``refiner/``), each tick streams the latents the refiner has completed on its own grid (first latent, then
  blocks of ``block`` latents: ``sana_wm/realtime_chain.py::SanaWMRealtimeLatentPrepStage`` plans enough stage-1
  chunks for one more refiner block, ``SanaWMChunkedRefinerChainStage`` refines complete blocks only), and the
  causal decode gives ``1 + s (n - 1)`` frames for the first ``n`` latents and ``s n`` after
  (``SanaWMCausalDecodeChainStage``; the LTX-2 frame count per latent is an inference from the stride, labelled in
  docs/served.md). A tick that streams no frame ends the session (``sana_wm_realtime_adapter.py::
  on_chunk_complete``). Past the horizon the server keeps generating, so ``max_chunks`` must be exactly the grid's.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import ConfigDict, Field, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError, UserError
from harness.sections import Fix, Invalid, Section

Rule = Literal["causal_wan", "sana_wm"]
RULES: tuple[str, ...] = Rule.__args__  # type: ignore[attr-defined]  # a Literal's values
#: the longest clip the refusal searches for a nearest honourable count (frames)
_SEARCH_FRAMES = 20_000


class GeometryError(ConfigError):
    """A clip length the engine cannot honour exactly (exit code 2; names the nearest counts it can)."""


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
    """What one session streams: ``latents`` latents in ``len(chunk_frames)`` chunks (``max_chunks``), chunk ``k``
    bringing ``chunk_frames[k]`` frames, ``sum(chunk_frames) == num_frames``."""

    num_frames: int
    latents: int
    chunk_frames: tuple[int, ...]

    @property
    def max_chunks(self) -> int:
        return len(self.chunk_frames)

    def to_dict(self) -> dict[str, Any]:
        return {"num_frames": self.num_frames, "latents": self.latents, "max_chunks": self.max_chunks,
                "chunk_frames": list(self.chunk_frames)}


_LATENTS = Fix("must be a positive integer")


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Geometry(Section):
    """The engine's chunk geometry for one model (``backend.models.<model>.geometry``).

    rule: ``causal_wan`` or ``sana_wm`` (module docstring). latent_stride: pixel frames per latent (the VAE's
    temporal compression). chunk_latents: latents per chunk (the engine's ``num_frames_per_block`` /
    ``num_frame_per_block``). refiner_sink / refiner_block: SANA-WM's refiner grid (latents), null when the server
    runs without the refiner. source: where each number is stated in the engine (recorded with the item).
    """

    section: ClassVar[str] = "backend.models.<model>.geometry"
    error: ClassVar[type[UserError]] = ConfigError

    rule: Annotated[Rule, Fix(f"use one of {list(RULES)}")]
    latent_stride: Annotated[StrictInt, Field(ge=1), _LATENTS]
    chunk_latents: Annotated[StrictInt, Field(ge=1), _LATENTS]
    refiner_sink: Annotated[Optional[StrictInt], Field(ge=0), Fix("must be an integer >= 0")] = None
    refiner_block: Annotated[Optional[StrictInt], Field(ge=1), _LATENTS] = None
    source: StrictStr = ""

    def __post_init__(self) -> None:
        if (self.refiner_sink is None) != (self.refiner_block is None):
            raise Invalid("refiner_sink and refiner_block go together (both null: no refiner)")

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "latent_stride": self.latent_stride, "chunk_latents": self.chunk_latents,
                "refiner_sink": self.refiner_sink, "refiner_block": self.refiner_block, "source": self.source}

    # -- the engine's rules ----------------------------------------------------------------------------------------
    def streamed(self, num_frames: int) -> ChunkPlan | None:
        """The chunks the engine streams for an ``num_frames`` clip, or None when it cannot honour it exactly."""
        s = self.latent_stride
        if num_frames < 1 or (num_frames - 1) % s:
            return None
        latents = (num_frames - 1) // s + 1
        frames = (self._causal_wan(latents) if self.rule == "causal_wan" else self._sana_wm(latents))
        if frames is None or sum(frames) != num_frames:
            return None
        return ChunkPlan(num_frames, latents, tuple(frames))

    def plan(self, num_frames: int, where: str = "model.num_frames") -> ChunkPlan:
        """:meth:`streamed`, or a :class:`GeometryError` naming the nearest counts the engine honours."""
        got = self.streamed(num_frames)
        if got is not None:
            return got
        below, above = self.nearest(num_frames)
        near = " or ".join(f"{where}={n}" for n in (below, above) if n is not None)
        raise GeometryError(f"{where}={num_frames}: the engine cannot stream exactly {num_frames} frames with "
                            f"{self.chunk_latents}-latent chunks of {self.latent_stride} frames per latent "
                            f"({self.rule} rule, {self.source or 'backend.models.<model>.geometry'}); nearest it can: "
                            f"{near or 'none'}")

    def nearest(self, num_frames: int) -> tuple[int | None, int | None]:
        """The closest honourable clip lengths below and above ``num_frames`` (None where there is none)."""
        below = next((n for n in range(num_frames - 1, 0, -1) if self.streamed(n)), None)
        above = next((n for n in range(num_frames + 1, max(num_frames, 1) + _SEARCH_FRAMES) if self.streamed(n)),
                     None)
        return below, above

    def _causal_wan(self, latents: int) -> list[int] | None:
        s, c = self.latent_stride, self.chunk_latents
        if latents % c:
            return None
        return [1 + s * (c - 1)] + [s * c] * (latents // c - 1)

    def _sana_wm(self, latents: int) -> list[int] | None:
        s, c = self.latent_stride, self.chunk_latents
        if latents < c:
            return None
        segments = sana_segments(latents, c)
        ticks = len(segments) - 1
        if self.refiner_block is None:
            streamed = segments[1:]
        else:
            streamed = _refined_frontiers(segments, c, ticks, self.refiner_sink or 0, self.refiner_block)
        frames, decoded = [], 0
        for end in streamed:
            new = end - decoded
            if new <= 0:  # an empty tick ends the session (on_chunk_complete)
                return None
            frames.append(1 + s * (new - 1) if decoded == 0 else s * new)
            decoded = end
        return frames if decoded == latents else None


def sana_segments(latents: int, chunk: int) -> list[int]:
    """SANA-WM's stage-1 chunk boundaries (latent indices): ``floor(latents / chunk)`` chunks, the remainder in
    chunk 0 (sglang 0.5.23 ``sana_wm/self_forcing.py::create_autoregressive_segments``)."""
    rem, n = latents % chunk, latents // chunk
    out = [0]
    for i in range(n):
        out.append(out[-1] + chunk + (rem if i == 0 else 0))
    return out


def _refined_frontiers(segments: list[int], chunk: int, ticks: int, sink: int, block: int) -> list[int]:
    """Per tick, how many latents the refiner has completed (``realtime_chain.py``: the latent-prep plan adds
    stage-1 chunks until the next refiner block is covered; the refiner keeps complete blocks only)."""

    def next_len(idx: int) -> int:  # past the grid: uniform chunks (the server generates past the horizon)
        return segments[idx + 1] - segments[idx] if idx + 1 < len(segments) else chunk

    stage1, idx, refined, out = 0, 0, 1, []
    for _ in range(ticks):
        if idx > 0:
            target = sink + max(0, stage1 - sink) // block * block + block
            while stage1 < target:
                stage1, idx = stage1 + next_len(idx), idx + 1
        else:
            stage1, idx = stage1 + next_len(idx), idx + 1
        while refined + block <= stage1:
            refined += block
        out.append(refined)
    return out
