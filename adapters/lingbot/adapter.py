"""LingBot-World (v1 and v2 share this adapter; v2 adds the FoV shim in ``adapters/lingbot_v2``).

Native input (``--action_path <dir>``, robbyant/lingbot-world-v2@2648877 wan/image2video.py, wan/utils/cam_utils.py):
``poses.npy`` (N,4,4) OpenCV c2w and ``intrinsics.npy`` (N,4) ``[fx, fy, cx, cy]`` in pixels of 480x832 (only frame 0's
K is used). Upstream resamples to latent rate at ``linspace(0, N-1, n_lat)`` (= 4i when N = 4k+1 and n_lat is a
multiple of the chunk), makes poses relative to frame 0, framewise, and max-normalises translation per clip, then
builds ``[o, d]`` rays folded 8x8 into 384 channels.

Canvas: upstream derives the generated frame from the image with ``lat = round(sqrt(max_area * h / w) // 8 // 2 * 2)``
(``wan/image2video.py``); for a 480x832 image floating point gives ``sqrt = 479.99999999999994``, so upstream
generates **464x832** (58 x 104 latents, 1508 tokens per latent frame), resizing the image (bicubic, no crop) and
scaling the 480x832-pixel intrinsics by (832/832, 464/480). :func:`wan_canvas` models the rule; the harness keeps
its 480x832 canvas and resizes upstream's frames back (the vertical squash is a pure resize, so K480 holds again).

v1 (Robbyant/lingbot-world@6ca87d4) is bidirectional at the pinned commit: no ``--chunk_size``, ``--infer_mode``
or KV-window flags (``model.causal: false``); v2 is causal (``--infer_mode causal_fast --chunk_size 4``).

Poses here follow :mod:`trajectories.conventions` (OpenCV c2w, world = frame 0, +yaw right, +pitch up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.controls.poses import integrate_framewise, interpolate_to_frames, lingbot_relative
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.io import save_npy
from trajectories.resample import latent_anchor_frames, latents_for_frames


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class LingBotConfig(UpstreamConfig):
    """LingBot settings. task/size: upstream's ``--task`` and ``--size``. intrinsics_hw: the resolution
    ``intrinsics.npy`` is expressed in (480x832 upstream). sliding_local_attn_size / sliding_sink_size: the
    upstream knobs that realise the harness's sliding policy (4 sink + 16 rolling = 4 sink + 12 recent + 4
    current). infer_mode: ``--infer_mode`` (None = upstream default, causal_fast on v2)."""

    task: str = "i2v-A14B"
    size: str = "480*832"
    intrinsics_hw: tuple[int, int] = (480, 832)
    sliding_local_attn_size: int = 20
    sliding_sink_size: int = 4
    infer_mode: str | None = None
    causal: bool = True
    max_area: Optional[int] = None  # None: upstream's MAX_AREA_CONFIGS[size], i.e. the product of ``size``
    vae_stride_hw: int = 8
    patch_hw: int = 2


def wan_canvas(height: int, width: int, max_area: int, stride: int = 8, patch: int = 2) -> tuple[int, int]:
    """The frame size Wan-based ``image2video`` generates for a ``height x width`` image (pixels).

    ``lat_h = round(sqrt(max_area * h / w) // stride // patch * patch)``, ``lat_w`` alike with ``w / h``; frame =
    ``stride * lat``. Float rounding is part of the rule: 480x832 with max_area 480*832 gives 464x832.
    """
    ar = height / width
    lat_h = round(np.sqrt(max_area * ar) // stride // patch * patch)
    lat_w = round(np.sqrt(max_area / ar) // stride // patch * patch)
    return int(lat_h * stride), int(lat_w * stride)


def lingbot_context_args(policy: ContextPolicy, cfg: LingBotConfig, native: list[str]) -> list[str]:
    """Upstream knobs for a context policy (v2 generate.py:163-173: ``--local_attn_size``, ``--sink_size``).

    native -> ``native``, the flags of upstream's documented launch (the contract's ``policies.native``: v2's
    run_fast.sh passes ``--local_attn_size 18 --sink_size 6``); fullkv -> nothing (``local_attn_size = -1`` default,
    ``max_attention_size = None``); sliding -> ``--local_attn_size 20 --sink_size 4`` (the cache holds 4 sink + 16
    rolling latents: after the current chunk is written that is 12 recent + 4 current). The budgets must match the
    harness policy, else it is an error.
    """
    if policy.name == "native":
        return list(native)
    if policy.name == "fullkv":
        return []
    if policy.name == "sliding":
        expected = policy.sink + policy.recent + policy.chunk
        if expected != cfg.sliding_local_attn_size or policy.sink != cfg.sliding_sink_size:
            raise ModelConfigError(
                f"context=sliding with sink={policy.sink}, recent={policy.recent}, chunk={policy.chunk} needs "
                f"model.sliding_local_attn_size={expected} and model.sliding_sink_size={policy.sink}"
            )
        return ["--local_attn_size", str(cfg.sliding_local_attn_size), "--sink_size", str(cfg.sliding_sink_size)]
    raise ModelConfigError(f"context={policy.name} has no upstream knob in LingBot (use the v2 FoV shim)")


class LingBotAdapter(UpstreamAdapter):
    config_class = LingBotConfig
    config: LingBotConfig
    #: a causal build: upstream's own --local_attn_size / --sink_size (:func:`lingbot_context_args`)
    contexts: ClassVar[tuple[str, ...]] = ("native", "fullkv", "sliding")
    unsupported_reasons = {
        "fullkv": "the pinned v1 generate.py is bidirectional (no KV cache); use model=lingbot_v2",
        "sliding": "the pinned v1 generate.py has no --local_attn_size / --sink_size; use model=lingbot_v2",
        "fov": "the FoV gather shim targets v2's causal cache; use model=lingbot_v2"}

    # context=native is upstream's documented launch and the identities are the contract's (policies): v2 passes
    # run_fast.sh's 18 / 6; a causal build of v1 has no documented window, so its native equals fullkv (declared there)

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        if not self.config.causal:
            return {"passed": "nothing: the pinned generate.py is bidirectional", "window": "the whole clip"}
        native = self.native_args()
        if policy.name == "native" and native:
            flags = dict(zip(native[::2], native[1::2]))
            size, sink = int(flags["--local_attn_size"]), int(flags["--sink_size"])
            return {"--local_attn_size": size, "--sink_size": sink, "passed": "upstream's documented launch",
                    "window": f"{sink} sink + {size - sink} rolling latents (upstream's own)"}
        if policy.name in ("native", "fullkv"):
            return {"--local_attn_size": -1, "--sink_size": 0, "passed": "nothing (generate.py defaults)",
                    "window": "every earlier latent"}
        if policy.name == "sliding":
            return {"--local_attn_size": self.config.sliding_local_attn_size,
                    "--sink_size": self.config.sliding_sink_size,
                    "window": f"{policy.sink} sink + {policy.recent} recent + {policy.chunk} current latents"}
        return super().told_upstream(policy)

    def supported_contexts(self) -> tuple[str, ...]:
        return self.contexts if self.config.causal else ("native",)  # bidirectional: the clip attends to itself

    def latent_count(self, N: int) -> int:
        """Latents upstream uses; refuses counts that upstream would time-warp: v2 truncates the latent count to a
        multiple of the chunk and resamples poses at ``linspace(0, N-1, n_lat)`` (wan/image2video.py:498-499, :562-571)."""
        chunk = self.config.chunk_latents
        if (N - 1) % 4:
            raise ModelConfigError(f"LingBot needs 4k+1 frames; got {N} (set model.num_frames)")
        lat = latents_for_frames(N)
        if lat % chunk:
            raise ModelConfigError(
                f"LingBot truncates {lat} latents to a multiple of chunk {chunk}, which time-warps the trajectory "
                f"(non-integer targets linspace(0, {N - 1}, {lat - lat % chunk})); use N = 4k+1 with (k+1) % {chunk} == 0"
            )
        return lat

    def output_hw(self) -> tuple[int, int]:
        c = self.config
        area = c.max_area or int(np.prod([int(x) for x in c.size.split("*")]))
        return wan_canvas(c.height, c.width, area, c.vae_stride_hw, c.patch_hw)

    def frame_seqlen(self) -> int:
        """Tokens per latent frame at upstream's canvas (1508 at 464x832)."""
        h, w = self.output_hw()
        step = self.config.vae_stride_hw * self.config.patch_hw
        return (h // step) * (w // step)

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        d = req.controls_dir
        N = req.path.num_frames
        lat = self.latent_count(N)
        h0, w0 = self.config.intrinsics_hw
        sx, sy = w0 / self.config.width, h0 / self.config.height
        kvec = np.array([K[0, 0] * sx, K[1, 1] * sy, K[0, 2] * sx, K[1, 2] * sy])
        save_npy(d / "poses.npy", req.path.c2w.astype(np.float64))
        save_npy(d / "intrinsics.npy", np.tile(kvec, (N, 1)))
        oh, ow = self.output_hw()
        k_up = kvec * np.array([ow / w0, oh / h0, ow / w0, oh / h0])  # upstream's get_Ks_transformed
        return NativeControls(
            files={"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy")},
            meta={"num_latents": lat, "latent_anchor_rule": "linspace(0, N-1, n_lat) = 4i",
                  "upstream_canvas": {"height": oh, "width": ow, "K_fx_fy_cx_cy": k_up.tolist(),
                                      "frame_seqlen": self.frame_seqlen(),
                                      "rule": "lat = round(sqrt(max_area*h/w)//8//2*2); frames resized back to the "
                                              "harness canvas"}},
        )

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        """What the model is conditioned on, integrated back: latent-rate framewise poses (max-norm), chained,
        with the global translation scale fitted to the request (upstream discards it), held between anchors."""
        poses = np.load(controls_dir / "poses.npy")
        N = len(poses)
        # latent_count refuses the counts upstream would time-warp, so its linspace(0, N-1, n_lat) targets are 4i
        anchors = latent_anchor_frames(self.latent_count(N))
        latent = poses[anchors]
        rel = lingbot_relative(latent)  # what the ray maps are built from
        chained = integrate_framewise(rel)
        req_lat = req.path.c2w[anchors]
        a, b = chained[:, :3, 3].ravel(), req_lat[:, :3, 3].ravel()
        scale = float(a @ b / (a @ a)) if a @ a > 0 else 1.0
        chained[:, :3, 3] *= scale
        return interpolate_to_frames(anchors, chained, N)

    def context_args(self, req: ItemRequest) -> tuple[list[str], str | None, list[str]]:
        """(upstream arguments, shim script or None, shim arguments) for the item's context policy."""
        if not self.config.causal:
            return [], None, []  # bidirectional: the whole clip attends to itself (context=native)
        return lingbot_context_args(req.context, self.config, self.native_args()), None, []

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c = self.config
        d = req.controls_dir
        out = req.item_dir / "upstream_out" / "video.mp4"
        args = ["--task", c.task, "--size", c.size, "--ckpt_dir", self.ckpt(), "--image", str(d / "image.png"),
                "--action_path", str(d), "--frame_num", str(req.path.num_frames), "--base_seed", str(req.seed),
                "--prompt", req.case.prompt, "--save_file", str(out)]
        if c.causal:  # v2's causal generate.py; the pinned v1 parser has neither flag
            args += ["--chunk_size", str(c.chunk_latents)]
            if c.infer_mode:
                args += ["--infer_mode", c.infer_mode]
        else:
            args += ["--sample_steps", str(c.sampling_steps)]
        if c.ranks > 1:
            args += ["--dit_fsdp", "--t5_fsdp", "--ulysses_size", str(c.ranks)]
        contract = self.contract()
        for w in (contract.writer.checkout_writes if contract else ()):  # v2 creates --save_dir in the checkout
            if w.redirect_flag:
                args += [w.redirect_flag, str(out.parent)]
        ctx_args, wrapper, wrapper_args = self.context_args(req)
        return LaunchSpec(script="generate.py", args=args + ctx_args, output=str(out), wrapper=wrapper,
                          wrapper_args=wrapper_args)
