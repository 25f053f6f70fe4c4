"""Matrix-Game 3.5 (Riemann-Dynamics/Matrix-Game-3.5@fa6d2b6).

Native input: ``camera.npz`` with ``extrinsics_c2w`` (N,4,4) and ``intrinsics`` (N,4) ``[fx, fy, cx, cy]`` in
pixels of the anchor image (``infer.py::load_camera``), and a caption JSON
``{"detailed": {"<start>": {"start": "", "dynamic": text}}}`` keyed by block start frames 0, 85, 169, 253, 337, 421.
Block k consumes poses ``[1 + 84k, 84(k+1)]``; translation is metric and compressed by ``logd4`` inside the model,
so the scale policy (``translation_scale.per_scene_unit``, metres per scene unit) matters. The rollout seed lives in the upstream config
(``seed: 3407``); ``runner.py`` writes a copy of that config with the harness seed. Upstream resolves three more
folders before anything runs and exits when one is missing (``infer.py:57-84``): Wan2.2-TI2V-5B, its umt5
tokenizer and Depth-Anything-3; the launch passes them (``--wan-dir``, ``--tokenizer-dir``, ``--da3-dir``) and
exports ``DIFFSYNTH_SKIP_DOWNLOAD=true`` (any other value downloads from ModelScope). Poses follow
:mod:`trajectories.conventions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.io import atomic_path, write_json


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class MG35Config(UpstreamConfig):
    """Matrix-Game 3.5 settings. num_blocks: 84 poses each (6 -> 505 frames). config_file: upstream config.
    pipeline_seed: the fixed pipeline seed (42) recorded beside the rollout seed. wan_dir: the Wan2.2-TI2V-5B folder
    (``--wan-dir``); tokenizer_dir: the umt5-xxl tokenizer (``--tokenizer-dir``, default ``<wan_dir>/google/umt5-xxl``);
    da3_dir: the Depth-Anything-3 folder (``--da3-dir``)."""

    num_blocks: int = 6
    config_file: str = "configs/infer_distilled_6blocks.yaml"
    pipeline_seed: int = 42
    wan_dir: Optional[str] = None
    tokenizer_dir: Optional[str] = None
    da3_dir: Optional[str] = None

    def tokenizer(self) -> Optional[str]:
        if self.tokenizer_dir:
            return self.tokenizer_dir
        return str(Path(self.wan_dir) / "google" / "umt5-xxl") if self.wan_dir else None


def caption_starts(num_blocks: int) -> list[int]:
    """Start frame of each block's caption: 0, then 1 + 84k (85, 169, 253, 337, 421 for six blocks)."""
    return [0] + [1 + 84 * k for k in range(1, num_blocks)]


class MatrixGame35Adapter(UpstreamAdapter):
    # the model's own memory: a KV window of context chunks + pose retrieval + mosaic
    contexts: ClassVar[tuple[str, ...]] = ("native",)
    unsupported_reasons = {"fullkv": "no upstream switch for a FullKV rollout",
                           "sliding": "upstream's context counts chunks of 3 latents (chunk_size 3, context_chunks 7, "
                                      "configs/infer_distilled_6blocks.yaml:13-14@fa6d2b6) chosen by pose "
                                      "(dynamic_context, :19-20) beside a projected mosaic memory; no setting gives "
                                      "the harness's 4 sink + 12 recent + 4 current latents, and the launch used to "
                                      "be the native one; run context=native",
                           "fov": "no FoV switch; the model has its own pose-proximity and projection-IoU retrieval"}
    config_class = MG35Config
    config: MG35Config
    always_shimmed = True

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def blocks_for(self, N: int) -> int:
        """Blocks of 84 poses for ``N`` frames (``1 + 84 * blocks``): the released config's six for 505 frames (every
        release preset), more for a longer count set by ``model.frames_per_trajectory`` (the runner shim patches
        ``num_blocks``)."""
        blocks, r = divmod(N - 1, 84)
        if r or blocks < 1:
            raise ModelConfigError(f"Matrix-Game 3.5 makes 1 + 84 * blocks frames ({1 + 84 * self.config.num_blocks} "
                                   f"with the released {self.config.num_blocks} blocks); {N} is not one "
                                   "(model.num_frames / model.frames_per_trajectory)")
        return blocks

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        c = self.config
        N = req.path.num_frames
        blocks = self.blocks_for(N)
        ext = req.path.c2w.copy()
        ext[:, :3, 3] *= self.scene_scale()
        kv = np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (N, 1))
        d = req.controls_dir
        with atomic_path(d / "camera.npz", suffix=".npz") as tmp:
            np.savez(tmp, extrinsics_c2w=ext, intrinsics=kv)
        caption = {"detailed": {str(s): {"start": "", "dynamic": req.case.prompt} for s in caption_starts(blocks)}}
        write_json(d / "caption.json", caption)
        return NativeControls(files={"camera.npz": str(d / "camera.npz"), "caption.json": str(d / "caption.json")},
                              meta={"blocks": blocks, "seeds": {"validation_seed": req.seed,
                                                                       "pipeline_seed": c.pipeline_seed}})

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        with np.load(controls_dir / "camera.npz") as z:
            ext = np.array(z["extrinsics_c2w"], dtype=np.float64)
        ext[:, :3, 3] /= self.scene_scale()
        return ext

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out = req.item_dir / "upstream_out" / "video.mp4"
        patched = d / "infer_config.yaml"
        args = ["--config", str(patched), "--checkpoint", self.ckpt(), "--image", str(d / "image.png"), "--camera",
                str(d / "camera.npz"), "--caption", str(d / "caption.json"), "--output", str(out),
                "--wan-dir", c.wan_dir or "<model.wan_dir>", "--tokenizer-dir", c.tokenizer() or "<model.tokenizer_dir>",
                "--da3-dir", c.da3_dir or "<model.da3_dir>"]
        shim = ["--seed", str(req.seed), "--config-in", c.config_file, "--config-out", str(patched)]
        blocks = self.blocks_for(req.path.num_frames)
        if blocks != c.num_blocks:  # a longer preset: the shim sets the config's block count
            shim += ["--num-blocks", str(blocks)]
        # only 'true' keeps diffsynth off ModelScope (diffsynth/core/loader/config.py:50-60)
        return LaunchSpec(script="infer_distilled.py", args=args, output=str(out), wrapper=self.shim_path(__file__),
                          wrapper_args=shim, env={"DIFFSYNTH_SKIP_DOWNLOAD": "true"})

    def checkpoint_paths(self) -> dict[str, Optional[str]]:
        c = self.config
        return {**super().checkpoint_paths(), "wan_dir": c.wan_dir, "tokenizer_dir": c.tokenizer(), "da3_dir": c.da3_dir}

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        return {**super().told_upstream(policy), "config": self.config.config_file,
                "window": "chunk_size 3 latents, context_chunks 7 (dynamic, pose-near oldest), memory_mode "
                          "c0_plus_generated + projection-IoU mosaic (configs/infer_distilled_6blocks.yaml:11-20)"}
