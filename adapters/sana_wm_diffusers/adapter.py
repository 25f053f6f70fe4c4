"""SANA-WM in the harness process through diffusers' ``SanaWMPipeline`` (``model=sana_wm_diffusers``, and the tiny
random-weight build ``model=sana_wm_tiny`` that runs anywhere).

The pipeline (huggingface/diffusers@v0.42.1 src/diffusers/pipelines/sana_wm/) is SANA-WM's *bidirectional*
release: one call samples every latent of the clip at once, with the first latent pinned clean through per-token
timesteps. Context policies map onto it as follows:

* ``native``: one pipeline call over the whole clip (every frame sees every other, future included).
* ``fullkv`` / ``sliding`` / ``fov``: an autoregressive rollout driven by the harness: chunk k is sampled with the
  same per-token-timestep mechanism, as ``[selected history latents (clean, t = 0)] + [the chunk's latents]``,
  where the history is exactly what :class:`harness.context.ContextSelector` selects. The model is bidirectional,
  so there is no KV cache to reuse: the selected history is re-encoded with each chunk and its temporal positions
  are compacted (sequence order), a caveat recorded in every item's meta.

Camera inputs are converted at the adapter boundary (:mod:`.camera`); poses follow :mod:`trajectories.conventions`.
Devices come from accelerate (``PartialState``: ``cuda:<local rank>`` under a distributed launcher, else the CPU);
noise comes from seeded ``torch.Generator``s derived from the item's seed; frames go to the sink one by one.
"""

from __future__ import annotations

import time
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Optional

import numpy as np
import pydantic.dataclasses
from pydantic import Field, StrictInt

from adapters.base import (
    CONFIG,
    Adapter,
    Finding,
    FrameSink,
    GeneratedVideo,
    ItemRequest,
    ModelConfig,
    ModelConfigError,
    NativeControls,
)
from harness.context.trace import ChunkTrace
from harness.io import save_npy
from harness.sections import Fix

from .camera import pipeline_c2w, pipeline_intrinsics

if TYPE_CHECKING:
    import torch
    from diffusers.pipelines.sana_wm.pipeline_sana_wm import SanaWMPipeline

    from harness.context import ContextPolicy

DEFAULT_REPO = "Efficient-Large-Model/SANA-WM_bidirectional-diffusers"


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class SanaWMDiffusersConfig(ModelConfig):
    """Settings of the diffusers backend.

    Attributes:
        weights: a Hugging Face repo id (read from the local HF cache) or a local folder holding
            ``model_index.json``; ignored when ``tiny`` is set.
        revision: repo revision for ``weights`` (None = the cached default).
        allow_download: let ``from_pretrained`` download missing weights (off: runs never touch the network).
        tiny: sizes of a random-weight build of the real classes (:class:`.tiny.TinySanaArch`); empty = load weights.
        device: ``auto`` (accelerate's device for this process), ``cpu`` or ``cuda[:i]``.
        dtype: ``float32`` / ``bfloat16`` / ``float16`` for the DiT and text encoder (the VAE stays float32).
        cpu_offload: accelerate's model CPU offload (one sub-model on the GPU at a time).
        num_inference_steps, guidance_scale, negative_prompt, max_sequence_length: sampler settings.
        cpu_threads: intra-op threads on CPU (a fixed count keeps results bit-identical across machines).
    """

    weights: str = DEFAULT_REPO
    revision: Optional[str] = None
    allow_download: bool = False
    tiny: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    dtype: Annotated[Literal["float32", "bfloat16", "float16"], Fix("use float32, bfloat16 or float16")] = "bfloat16"
    cpu_offload: bool = False
    num_inference_steps: Annotated[StrictInt, Field(ge=1), Fix("must be >= 1")] = 60
    guidance_scale: float = 5.0
    negative_prompt: str = ""
    max_sequence_length: int = 300
    cpu_threads: Optional[int] = None

    def validate(self) -> None:
        super().validate()
        if self.height % 32 or self.width % 32:
            raise ModelConfigError(f"model.height/width ({self.height}x{self.width}) must be multiples of 32 "
                                   "(the LTX-2 VAE's spatial stride)")
        if (self.num_frames - 1) % 8:
            raise ModelConfigError(f"model.num_frames={self.num_frames}: SANA-WM's VAE needs 8k+1 frames "
                                   f"(e.g. {(self.num_frames - 1) // 8 * 8 + 1})")
        for k, v in self.frames_per_trajectory.items():
            if (int(v) - 1) % 8:
                raise ModelConfigError(f"model.frames_per_trajectory.{k}={v}: needs 8k+1 frames")
        if self.tiny:
            from .tiny import TinySanaArch

            TinySanaArch.from_dict(dict(self.tiny))


def resolve_weights(cfg: SanaWMDiffusersConfig) -> str:
    """The local folder ``from_pretrained`` loads: ``model.weights`` itself, or its snapshot in the HF cache.

    Never downloads unless ``model.allow_download``; raises :class:`ModelConfigError` naming how to get them.
    """
    w = str(cfg.weights)
    how = (f"Download them with `huggingface-cli download {DEFAULT_REPO}` (or `hf download ...`; add `--local-dir "
           f"DIR` and set model.weights=DIR), or set model.allow_download=true to fetch them on first use.")
    p = Path(w).expanduser()
    if p.exists() or w.startswith((".", "/", "~")):
        if not (p / "model_index.json").is_file():
            raise ModelConfigError(f"model.weights={w!r}: no diffusers pipeline there (model_index.json missing). "
                                   + how)
        return str(p)
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(w, revision=cfg.revision, local_files_only=not cfg.allow_download)
    except Exception as exc:  # offline / not cached / unknown repo: all mean "no weights here"
        raise ModelConfigError(f"model.weights={w!r}: SANA-WM diffusers weights not found in the local Hugging "
                               f"Face cache ({type(exc).__name__}). " + how) from None
    if not (Path(local) / "model_index.json").is_file():
        raise ModelConfigError(f"model.weights={w!r}: the cached snapshot {local} has no model_index.json. " + how)
    return local


def chunk_generator(seed: int, chunk: int) -> torch.Generator:
    """Noise RNG of one chunk (CPU generator: identical noise on every device), from the item seed and the chunk
    index only."""
    import torch

    return torch.Generator(device="cpu").manual_seed((int(seed) * 1_000_003 + int(chunk)) % (2**63 - 1))


class SanaWMDiffusersAdapter(Adapter):
    config_class = SanaWMDiffusersConfig
    config: SanaWMDiffusersConfig
    #: native: one pipeline call; the others: the harness-driven chunk rollout (see the module docstring)
    contexts: ClassVar[tuple[str, ...]] = ("native", "fullkv", "sliding", "fov")
    unsupported_reasons = {}
    requires = ("torch", "diffusers")
    _pipe: tuple[SanaWMPipeline, torch.device]  # set by build(): the pipeline and its device, once per adapter

    # -- planning -----------------------------------------------------------------------------------------------
    def check_context(self, policy: ContextPolicy) -> None:
        super().check_context(policy)
        from adapters.base import UnsupportedContextError

        if policy.name != "native" and policy.rope != "absolute":
            raise UnsupportedContextError(f"model={self.config.name} context.rope={policy.rope!r}: the rollout "
                                          "re-encodes history in sequence order; use rope=absolute")

    def readiness(self, probe: bool = True) -> list[Finding]:
        """Missing diffusers or weights, found at planning time (the tiny build needs no weights)."""
        try:
            import diffusers  # noqa: F401
        except ImportError:
            return [Finding("error", "model.adapter", f"model={self.config.name} needs diffusers: "
                            "pip install -e \".[models]\"")]
        if not self.config.tiny:
            try:
                resolve_weights(self.config)
            except ModelConfigError as exc:
                return [Finding("error", "model.weights", str(exc))]
        return []

    def compile(self, req: ItemRequest) -> NativeControls:
        """``camera.npy`` (F,4,4) float32 c2w and ``intrinsics.npy`` ``[fx, fy, cx, cy]``: exactly what the pipeline
        is handed (canvas pixels; the canvas image is already at the pipeline's size, so its resize-and-crop is
        the identity)."""
        d = req.controls_dir
        cam = pipeline_c2w(req.path.c2w, self.scene_scale())
        save_npy(d / "camera.npy", cam)
        save_npy(d / "intrinsics.npy", pipeline_intrinsics(req.path.K))
        back = np.load(d / "camera.npy").astype(np.float64)
        back[:, :3, 3] /= self.scene_scale()
        caveats = []
        if req.context.name != "native":
            caveats.append("bidirectional model: the selected history is re-encoded with every chunk in sequence "
                           "order (no KV cache, compacted temporal positions)")
        return NativeControls(files={"camera.npy": str(d / "camera.npy"), "intrinsics.npy": str(d / "intrinsics.npy")},
                              decoded_c2w=back,
                              meta={"num_latents": (req.path.num_frames - 1) // 8 + 1, "latent_anchor_rule":
                                    "latent i -> frame 8i", "caveats": caveats,
                                    "translation_scale": self.config.translation_scale.to_dict()})

    # -- generation -----------------------------------------------------------------------------------------------
    def device(self) -> torch.device:
        """Where the pipeline runs: accelerate's device for this process unless ``model.device`` names one."""
        import torch

        if self.config.device != "auto":
            return torch.device(self.config.device)
        from accelerate import PartialState

        device: torch.device = PartialState().device
        return device

    def build(self) -> tuple[SanaWMPipeline, torch.device]:
        """The pipeline, placed on its device (tiny: built in-process; otherwise loaded from local weights).
        Built once per adapter: every item of a job reuses it."""
        import torch

        if getattr(self, "_pipe", None) is not None:
            return self._pipe
        c = self.config
        if c.cpu_threads:
            torch.set_num_threads(int(c.cpu_threads))
        device = self.device()
        if c.tiny:
            from .tiny import TinySanaArch, build_tiny_pipeline

            pipe = build_tiny_pipeline(TinySanaArch.from_dict(dict(c.tiny)))
            if c.dtype != "float32":
                pipe.transformer.to(getattr(torch, c.dtype))
        else:
            # the defining module, not diffusers' lazy top level (a type checker sees dummy stand-ins there)
            from diffusers.pipelines.sana_wm.pipeline_sana_wm import SanaWMPipeline

            pipe = SanaWMPipeline.from_pretrained(resolve_weights(c), dtype=getattr(torch, c.dtype))
            pipe.vae.to(torch.float32)
        if c.cpu_offload and device.type != "cpu":
            pipe.enable_model_cpu_offload(device=device)  # accelerate hooks move each sub-model in turn
        else:
            pipe.to(device)
        # diffusers' DiffusionPipeline.set_progress_bar_config(**kwargs) carries no annotation
        pipe.set_progress_bar_config(disable=True)  # type: ignore[no-untyped-call]
        self._pipe = (pipe, device)
        return self._pipe

    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        import torch
        from PIL import Image

        c = self.config
        t0 = time.perf_counter()
        pipe, device = self.build()
        t_load = time.perf_counter() - t0
        image, K = self.canvas_image_and_K(req.case)
        c2w = np.load(controls.files["camera.npy"])
        intr = np.load(controls.files["intrinsics.npy"])
        N = req.path.num_frames
        t1 = time.perf_counter()
        if req.context.name == "native":
            out = pipe(image=Image.fromarray(np.ascontiguousarray(image)), prompt=req.case.prompt, c2w=c2w,
                       intrinsics=intr, height=c.height, width=c.width, num_frames=N, fps=int(round(c.fps)),
                       num_inference_steps=c.num_inference_steps, guidance_scale=c.guidance_scale,
                       negative_prompt=c.negative_prompt, max_sequence_length=c.max_sequence_length,
                       generator=torch.Generator(device="cpu").manual_seed(int(req.seed)), output_type="np")
            frames = out.frames
            L = (N - 1) // 8 + 1
            trace: list[ChunkTrace] = [{"chunk": 0, "current": list(range(L)), "context": [], "sink": [],
                                        "recent": [], "retrieved": [], "scores": {},
                                        "note": "bidirectional: every latent sees the whole clip"}]
        else:
            with torch.no_grad():
                latents, trace = self._rollout(pipe, device, image, K, c2w, intr, req)
                decoded = pipe._decode_latents(latents)
                frames = pipe.video_processor.postprocess_video(decoded, output_type="np")[0]
        t_gen = time.perf_counter() - t1
        frames = np.asarray(frames)
        if len(frames) != N:
            raise RuntimeError(f"SanaWMPipeline returned {len(frames)} frames for {N} requested")
        for f in frames:  # float [0, 1] (diffusers' convention) -> uint8 RGB, one frame at a time
            sink(np.clip(np.round(f * 255.0), 0, 255).astype(np.uint8))
        return GeneratedVideo(num_frames=N, fps=req.path.fps, context_trace=trace,
                              timings={"load_s": t_load, "generate_s": t_gen},
                              meta={"backend": "diffusers.SanaWMPipeline", "device": str(device), "dtype": c.dtype,
                                    "tiny": dict(c.tiny), "weights": None if c.tiny else str(c.weights),
                                    "num_inference_steps": c.num_inference_steps,
                                    "guidance_scale": c.guidance_scale, "num_latents": (N - 1) // 8 + 1})

    def _rollout(self, pipe: SanaWMPipeline, device: torch.device, image: np.ndarray, K: np.ndarray, c2w: np.ndarray,
                 intr: np.ndarray, req: ItemRequest) -> tuple[torch.Tensor, list[ChunkTrace]]:
        """Chunk-by-chunk sampling under the item's context policy, with the pipeline's own components and its
        per-token-timestep conditioning. Returns the latents (1, C, L, h, w) and the context trace."""
        import torch
        from diffusers.pipelines.sana_wm.pipeline_sana_wm import DEFAULT_CHI_PROMPT, retrieve_timesteps
        from diffusers.utils.torch_utils import randn_tensor
        from PIL import Image

        from harness.context import ContextSelector

        c, H, W, N = self.config, self.config.height, self.config.width, req.path.num_frames
        c2w, intr = pipe.prepare_camera_trajectory(c2w, None, intr, N)
        pixels, intr = pipe.image_processor.preprocess_with_intrinsics(
            Image.fromarray(np.ascontiguousarray(image)), intr, H, W)
        dtype = pipe.transformer.dtype
        do_cfg = c.guidance_scale > 1.0
        cond, cond_mask, neg, neg_mask = pipe.encode_prompt(
            req.case.prompt, c.negative_prompt, device=device, max_sequence_length=c.max_sequence_length,
            chi_prompt=DEFAULT_CHI_PROMPT)
        first = pipe._encode_first_frame(pixels, device, dtype)  # (1, C, 1, h, w)
        cam = pipe._build_camera_kwargs(c2w, intr, (H, W), device=device, dtype=dtype, do_cfg=do_cfg)
        st, ss = pipe.vae_temporal_compression_ratio, pipe.vae_spatial_compression_ratio
        L, h, w = (N - 1) // st + 1, H // ss, W // ss
        latent_c2w = req.path.c2w[np.minimum(st * np.arange(L), N - 1)]
        selector = ContextSelector(req.context, latent_c2w, K, H, W)
        out = torch.zeros(1, first.shape[1], L, h, w, device=device, dtype=dtype)
        out[:, :, :1] = first
        text = torch.cat([neg, cond]) if do_cfg else cond
        text_mask = torch.cat([neg_mask, cond_mask]) if do_cfg else cond_mask
        img_hw = torch.tensor([[H, W]], dtype=torch.float, device=device)
        trace: list[ChunkTrace] = []
        for k in range(selector.num_chunks):
            sel = selector.select(k)
            cur, ctx = list(sel.current), sel.context
            idx = ctx + cur
            n = len(ctx)
            noise = randn_tensor((1, out.shape[1], len(cur), h, w), generator=chunk_generator(req.seed, k),
                                 device=device, dtype=dtype)
            lat = torch.cat([out[:, :, ctx], noise], dim=2)
            keep = torch.zeros_like(lat)
            keep[:, :, :n] = 1.0  # history: clean, timestep 0, never updated
            if 0 in cur:  # the conditioning latent, pinned exactly as the pipeline pins it
                lat[:, :, n + cur.index(0)] = first[:, :, 0]
                keep[:, :, n + cur.index(0)] = 1.0
            kwargs = {"data_info": {"img_hw": img_hw}, "mask": text_mask,
                      "camera_conditions": cam["camera_conditions"][:, idx],
                      "chunk_plucker": cam["chunk_plucker"][:, :, idx]}
            timesteps, _ = retrieve_timesteps(pipe.scheduler, c.num_inference_steps, device, None)
            for t in timesteps:
                keep_in = torch.cat([keep] * 2) if do_cfg else keep
                ts = torch.min(t.expand(keep_in.shape).float(), (1.0 - keep_in) * 1000.0)
                pred = pipe.transformer(torch.cat([lat] * 2) if do_cfg else lat, ts[:, :1, :, 0, 0], text,
                                        return_dict=False, **kwargs)[0]
                if do_cfg:
                    uncond, cond_pred = pred.chunk(2)
                    pred = uncond + c.guidance_scale * (cond_pred - uncond)
                    ts = ts.chunk(2)[0]
                B, C, Fr, hh, ww = lat.shape
                den = pipe.scheduler.step(-pred.reshape(B, C, -1).transpose(1, 2), t,
                                          lat.reshape(B, C, -1).transpose(1, 2),
                                          per_token_timesteps=ts.reshape(B, C, -1)[:, 0], return_dict=False)[0]
                den = den.transpose(1, 2).reshape(B, C, Fr, hh, ww)
                lat = torch.where(t / 1000.0 - 1e-6 < (1.0 - keep), den, lat).to(dtype)
            out[:, :, cur] = lat[:, :, n:]
            trace.append(sel.to_trace())
        return out, trace
