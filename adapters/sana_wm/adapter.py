"""SANA-WM (NVlabs/Sana, inference_video_scripts/wm/; per-file commits in native-controls.md §1).

Native input: ``--camera`` ``.npy`` (F,4,4) OpenCV c2w and ``--intrinsics`` ``.npy`` (3,3) (always passed:
missing intrinsics are silently estimated with Pi3X). Upstream makes poses relative to frame 0 (no translation
normalisation: raw units reach the model) and builds a ``raymap`` (T_lat,20) at frames 8i and a chunk Plücker
``[d, o x d]`` (48, T_lat, 22, 40) over frames ``[8i-7, 8i]`` on an integer grid. 481 frames -> 61 latents; the
streaming pipeline drops the anchor frame (480 written) [inferred]. Context: FullKV = ``--num_cached_blocks -1``,
Sliding = a positive ``--num_cached_blocks`` with the sink token; the linear-attention layers always summarise all
history (a caveat recorded with every run). Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adapters.base import ItemRequest, ModelConfigError, NativeControls
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.io import save_npy


@dataclass(frozen=True, kw_only=True)
class SanaConfig(UpstreamConfig):
    """SANA-WM settings. script: the streaming entry point. sliding_cached_blocks: ``--num_cached_blocks`` used for
    the sliding policy. image_arg / prompt_arg / output_arg / frames_arg: flag names [inferred]."""

    script: str = "inference_video_scripts/wm/inference_sana_wm_streaming.py"
    denoising_step_list: str = "1000,960,889,727,0"
    sliding_cached_blocks: int = 2
    image_arg: str = "--image"
    prompt_arg: str = "--prompt"
    output_arg: str = "--output"
    frames_arg: str = "--num_frames"


class SanaWMAdapter(UpstreamAdapter):
    config_class = SanaConfig
    config: SanaConfig

    def write_native(self, req: ItemRequest, image: np.ndarray, K: np.ndarray) -> NativeControls:
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
        cam = np.load(controls_dir / "camera.npy")
        cam[:, :3, 3] /= self.scene_scale()
        return cam

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out = req.item_dir / "upstream_out" / "video.mp4"
        blocks = {"fullkv": "-1", "sliding": str(c.sliding_cached_blocks), "native": str(c.sliding_cached_blocks)}
        args = ["--camera", str(d / "camera.npy"), "--intrinsics", str(d / "intrinsics.npy"), c.image_arg,
                str(d / "image.png"), c.prompt_arg, req.case.prompt, c.frames_arg, str(req.path.num_frames), "--seed",
                str(req.seed), "--denoising_step_list", c.denoising_step_list, "--num_cached_blocks",
                blocks[req.context.name], "--fps", f"{c.fps:g}", c.output_arg, str(out)]
        return LaunchSpec(script=c.script, args=args, output=str(out))
