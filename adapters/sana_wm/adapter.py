"""SANA-WM (NVlabs/Sana@af849ea1, inference_video_scripts/wm/; contract in adapters/sana_wm/contract.yaml).

Native input: ``--camera`` ``.npy`` (F,4,4) OpenCV c2w and ``--intrinsics`` ``.npy`` (3,3) (always passed:
missing intrinsics are silently estimated with Pi3X). Upstream makes poses relative to frame 0 (no translation
normalisation: raw units reach the model) and builds a ``raymap`` (T_lat,20) at frames 8i and a chunk Plücker
``[d, o x d]`` (48, T_lat, 22, 40) over frames ``[8i-7, 8i]`` on an integer grid. 481 frames -> 61 latents; the
streaming pipeline drops the anchor frame (480 written, frame i = pose i + 1: W:1986, :2031 in the contract), and
the harness puts the conditioning canvas in front (``writer.first_pose``). The inference YAML comes from the
checkout (``--config``: it is not in the weights bundle), the refiner is seeded like stage 1 (``--refiner_seed``),
and the stage-1 text encoder (gemma-2-2b-it) is read from the Hugging Face cache with ``HF_HUB_OFFLINE=1`` (the
contract's ``hub_fetches``). Context: FullKV = ``--num_cached_blocks -1``; native = upstream's default
``--num_cached_blocks 2`` (S:212: 2 blocks of 3 latents) with the sink token; ``sliding`` is refused: upstream's
units are 3-latent blocks and one on/off sink token, which cannot express the harness's 4 sink + 12 recent +
4 current latents. The linear-attention layers always summarise all history (a caveat recorded with every run). Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.io import save_npy


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class SanaConfig(UpstreamConfig):
    """SANA-WM settings. script: the streaming entry point. config_file: the inference YAML in the checkout
    (``--config``). output_name: upstream's ``--name`` (the video is ``<name>_streaming.mp4``)."""

    script: str = "inference_video_scripts/wm/inference_sana_wm_streaming.py"
    config_file: str = "configs/sana_wm/sana_wm_streaming_1600m_720p.yaml"
    denoising_step_list: str = "1000,960,889,727,0"
    output_name: str = "video"


#: upstream's stage-1 window: ``--num_cached_blocks`` default 2 (inference_sana_wm_streaming.py:212@af849ea1), in
#: blocks of ``--num_frame_per_block`` 3 latents (:196), plus the sink token (``--no_sink_token`` unset, :210)
UPSTREAM_CACHED_BLOCKS = 2
UPSTREAM_BLOCK_LATENTS = 3


class SanaWMAdapter(UpstreamAdapter):
    # --num_cached_blocks: upstream's 2, or -1 (all past blocks)
    contexts: ClassVar[tuple[str, ...]] = ("native", "fullkv")
    unsupported_reasons = {
        "fov": "would need a custom block selection in the softmax layers",
        "sliding": "upstream's stage-1 window counts blocks of 3 latents (--num_cached_blocks, --num_frame_per_block "
                   "3, inference_sana_wm_streaming.py:196, :212@af849ea1) behind one on/off sink token (:210), so "
                   "no setting gives the harness's 4 sink + 12 recent + 4 current latents; upstream's own window "
                   "(2 blocks = 6 latents + the sink token) runs as context=native"}
    config_class = SanaConfig
    config: SanaConfig

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        N = req.path.num_frames
        if (N - 1) % 24:
            raise ModelConfigError(f"SANA-WM streaming snaps frames to 24k+1; {N} is not (model.num_frames)")
        cam = req.path.c2w.copy()
        cam[:, :3, 3] *= self.scene_scale()
        d = req.controls_dir
        save_npy(d / "camera.npy", cam)
        save_npy(d / "intrinsics.npy", np.asarray(K, dtype=np.float64))
        caveats = ["linear-attention layers summarise all history whatever the context policy"]
        return NativeControls(files={"camera.npy": str(d / "camera.npy"), "intrinsics.npy": str(d / "intrinsics.npy")},
                              meta={"num_latents": (N - 1) // 8 + 1, "caveats": caveats})

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        cam: np.ndarray = np.load(controls_dir / "camera.npy")
        cam[:, :3, 3] /= self.scene_scale()
        return cam

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out_dir = req.item_dir / "upstream_out"
        blocks = {"fullkv": "-1", "native": str(UPSTREAM_CACHED_BLOCKS)}
        args = ["--camera", str(d / "camera.npy"), "--intrinsics", str(d / "intrinsics.npy"), "--image",
                str(d / "image.png"), "--prompt", str(d / "prompt.txt"), "--num_frames", str(req.path.num_frames),
                "--seed", str(req.seed), "--refiner_seed", str(req.seed), "--denoising_step_list",
                c.denoising_step_list, "--num_cached_blocks", blocks[req.context.name], "--fps", f"{c.fps:g}",
                "--config", c.config_file, "--streaming_root", self.ckpt(), "--output_dir", str(out_dir), "--name",
                c.output_name]
        return LaunchSpec(script=c.script, args=args, output=str(out_dir / f"{c.output_name}_streaming.mp4"),
                          out_dir=str(out_dir))

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        if policy.name == "fullkv":
            return {"--num_cached_blocks": -1, "sink_token": True, "window": "every past block"}
        return {"--num_cached_blocks": UPSTREAM_CACHED_BLOCKS, "sink_token": True,
                "window": f"{UPSTREAM_CACHED_BLOCKS} blocks x {UPSTREAM_BLOCK_LATENTS} latents + the sink token "
                          "+ the current block (upstream's default)"}
