"""Adapter of the built-in tiny causal DiT (in-process; torch imported only when generating).

Native controls are LingBot-style: ``poses.npy`` (T,4,4) OpenCV c2w and ``intrinsics.npy`` (T,4) in canvas pixels;
the model resamples them to latent rate (frames 4i), builds ``[o, d]`` ray maps and runs the context policy through
its KV cache. Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import pydantic.dataclasses

from adapters.base import (CONFIG, Adapter, FrameSink, GeneratedVideo, ItemRequest, ModelConfig, ModelConfigError,
                           NativeControls)
from harness.io import save_npy
from harness.sections import Fix

if TYPE_CHECKING:
    import torch

    from .model import TinyCausalDiT


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class TinyDiTModelConfig(ModelConfig):
    """Model settings: ``arch`` (see :class:`adapters.tiny_causal_dit.model.TinyDiTConfig`), ``device``
    (``cpu``/``cuda``), ``dtype`` (``float32``/``bfloat16``), ``deterministic`` (torch deterministic algorithms),
    ``cpu_threads`` (intra-op threads on CPU: a fixed count keeps float reductions, hence videos, bit-identical
    whatever the machine's core count or its other load)."""

    arch: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    dtype: Annotated[Literal["float32", "bfloat16", "float16"], Fix("use float32, bfloat16 or float16")] = "float32"
    deterministic: bool = True
    cpu_threads: int = 1

    def validate(self) -> None:
        super().validate()
        if self.height % 16 or self.width % 16:
            raise ModelConfigError(f"model.height/width ({self.height}x{self.width}) must be multiples of 16 "
                                   "(stride 8 VAE x patch 2)")
        if (self.num_frames - 1) % 4:
            raise ModelConfigError(f"model.num_frames={self.num_frames}: needs 4k+1 frames (latent stride 4)")


class TinyCausalDiTAdapter(Adapter):
    config_class = TinyDiTModelConfig
    requires = ("torch",)
    config: TinyDiTModelConfig

    def compile(self, req: ItemRequest) -> NativeControls:
        d = req.controls_dir
        K = req.path.K
        save_npy(d / "poses.npy", req.path.c2w)
        save_npy(d / "intrinsics.npy", np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (req.path.num_frames, 1)))
        return NativeControls(files={"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy")},
                              meta={"latent_anchor_rule": "latent i -> frame 4i",
                                    "translation_scale": self.config.translation_scale.to_dict()})

    def build(self) -> tuple[TinyCausalDiT, torch.dtype]:
        """The model on its device (random weights, seeded init: nothing to download)."""
        import torch

        from .model import TinyCausalDiT, TinyDiTConfig

        arch = dict(self.config.arch)
        if "steps" in arch:
            arch["steps"] = tuple(arch["steps"])
        if self.config.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        if self.config.device == "cpu":
            torch.set_num_threads(self.config.cpu_threads)
        dtype: torch.dtype = getattr(torch, self.config.dtype)
        return TinyCausalDiT(TinyDiTConfig(**arch)).to(self.config.device, dtype), dtype

    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        from trajectories.resample import latent_poses

        from .model import TinyVAE, config_dict, generate

        model, dtype = self.build()
        image, K = self.canvas_image_and_K(req.case)
        N = req.path.num_frames
        latent_c2w = latent_poses(req.path.c2w)
        lat = len(latent_c2w)
        ro = generate(model, image, latent_c2w, K, req.context, req.seed, device=self.config.device, dtype=dtype)
        frames = TinyVAE(model.cfg.spatial_stride).decode(ro.latents.cpu(), N)
        for f in frames:
            sink(f)
        return GeneratedVideo(num_frames=N, fps=req.path.fps, context_trace=ro.trace,
                              timings={**ro.timings, "attention_s": float(sum(ro.attention_per_chunk))},
                              meta={"arch": config_dict(model.cfg), "cache_peak_frames": ro.cache_peak_frames,
                                    "cache_bytes": ro.cache_bytes, "device": self.config.device,
                                    "dtype": self.config.dtype, "num_latents": lat})
