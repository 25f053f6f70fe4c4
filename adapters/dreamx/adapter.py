"""DreamX-World AR (AMAP-ML/DreamX-World@a1f4c6e, ``inference_ar_forcing.py``).

Native input: an items JSON ``[{image_path, caption, action_seq, action_speed_list}]`` whose action lists normally
drive a built-in trajectory generator. A custom trajectory bypasses it (``runner.py``) with CameraCtrl rows, 19
floats each: ``[frame_idx, fx, fy, cx, cy, 0, 0, w2c (3x4 row-major)]``, one per pixel frame, which upstream's
``cam_params_to_prope_dict`` turns into chunk-relative PRoPE ``viewmats`` at latent anchors 0, 1, 5, 9, ...
(latent j -> frame 4j-3). Intrinsics are ignored upstream (fixed K 0.505 / 0.898 / 0.5 / 0.5,
``inference_ar_forcing.py:121-122``): the case's field-of-view error is part of the achieved-vs-requested residual. ``--num_output_frames`` counts latents (126 -> 501 frames). No translation
normalisation: raw units. Context: native is upstream's window (``local_attn_size 12``, ``sink_size 3``: 3 sink +
6 recent + 3 current latents, not the harness's sliding budget, so ``sliding`` is refused); FullKV patches the
hard-coded cache sizes (``runner.py --full-kv``). Every frame is Lab colour-corrected by upstream's post-processing;
the strength is passed explicitly (``model.color_correction_strength``, 1.0 as upstream's launcher; the parser's
default is 0.3). Upstream loads the generator with ``strict=False`` and only prints the missing keys: the
contract's ``writer.log_failures`` turns a non-empty list into a failed item. Poses follow
:mod:`trajectories.conventions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.controls.poses import interpolate_to_frames
from adapters.dreamx.controls import DREAMX_FIXED_K_NORM
from adapters.memo import memo
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.io import write_json, write_text
from trajectories.conventions import c2w_from_w2c, w2c_from_c2w
from trajectories.resample import first_of_group_anchors


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class DreamXConfig(UpstreamConfig):
    """DreamX settings: upstream config paths and the base model folder (relative to the checkout)."""

    config_path: str = "configs/dreamx-ar/causal_camera_forcing_5b.yaml"
    model_name: str = "./Wan2.2-TI2V-5B"
    transformer_path: str = "./configs/dreamx-ar/"
    latents_per_chunk: int = 3
    color_correction_strength: float = 1.0


def camera_rows(c2w: np.ndarray, units: float) -> list[list[float]]:
    """CameraCtrl rows ``[frame, fx, fy, cx, cy, 0, 0, w2c 3x4]`` with DreamX's fixed normalised K."""
    rows = []
    for i, T in enumerate(c2w):
        T = T.copy()
        T[:3, 3] *= units
        w2c = w2c_from_c2w(T)[:3].reshape(-1)
        rows.append([float(i), *DREAMX_FIXED_K_NORM.tolist(), 0.0, 0.0, *w2c.tolist()])
    return rows


@memo
def cameras_text(c2w: np.ndarray, units: float) -> str:
    """``cameras.txt``: a header line, then one :func:`camera_rows` row per frame (``%.10g``)."""
    rows = camera_rows(c2w, units)
    return "harness://camera-path\n" + "\n".join(" ".join(f"{v:.10g}" for v in r) for r in rows) + "\n"


@memo
def parse_camera_rows(text: str) -> np.ndarray:
    """The (T, 19) rows of a ``cameras.txt`` (its header line skipped)."""
    lines = text.splitlines()[1:]
    return np.array([[float(v) for v in x.split()] for x in lines if x.strip()])


class DreamXAdapter(UpstreamAdapter):
    # fullkv: the shim's --full-kv; native: upstream's 12 / 3 window
    contexts: ClassVar[tuple[str, ...]] = ("fullkv", "native")
    unsupported_reasons = {"fov": "a retrieval policy must select the same frames in both KV caches; not implemented",
                           "sliding": "upstream's window (local_attn_size 12, sink 3: 3 sink + 6 recent + 3 current "
                                      "latents) is not the harness's 4 + 12 + 4 budget; use context=native for it"}
    config_class = DreamXConfig
    config: DreamXConfig
    always_shimmed = True

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def num_latents(self, N: int) -> int:
        lat, r = divmod(N - 1, 4)
        lat += 1
        if r or lat % self.config.latents_per_chunk:
            raise ModelConfigError(f"DreamX needs (N-1)%4 == 0 and a latent count divisible by 3; N={N}")
        return lat

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        lat = self.num_latents(req.path.num_frames)
        d = req.controls_dir
        write_text(d / "cameras.txt", cameras_text(req.path.c2w, self.scene_scale()))
        items = [{"image_path": str(d / "image.png"), "caption": req.case.prompt, "action_seq": [],
                  "action_speed_list": []}]
        write_json(d / "items.json", items)
        return NativeControls(files={"cameras.txt": str(d / "cameras.txt"), "items.json": str(d / "items.json")},
                              meta={"num_latents": lat, "latent_anchor_rule": "0, then 4j-3"})

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        rows = parse_camera_rows((controls_dir / "cameras.txt").read_text())
        w2c = np.tile(np.eye(4), (len(rows), 1, 1))
        w2c[:, :3] = rows[:, 7:19].reshape(-1, 3, 4)
        c2w = c2w_from_w2c(w2c)
        c2w[:, :3, 3] /= self.scene_scale()
        anchors = first_of_group_anchors(self.num_latents(len(rows)))
        return interpolate_to_frames(anchors, c2w[anchors], len(rows))

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out_dir = req.item_dir / "upstream_out"
        args = ["--config_path", c.config_path, "--model_name", c.model_name, "--transformer_path",
                c.transformer_path, "--base_checkpoint_path", self.ckpt(), "--data_path", str(d / "items.json"),
                "--output_folder", str(out_dir), "--num_output_frames", str(self.num_latents(req.path.num_frames)),
                "--fps", f"{c.fps:g}", "--seed", str(req.seed), "--chunk_relative", "--color_correction_strength",
                f"{c.color_correction_strength:g}"]
        shim = ["--seed", str(req.seed), "--cameras", str(d / "cameras.txt")]
        if req.context.name == "fullkv":
            shim += ["--full-kv", str(self.num_latents(req.path.num_frames))]
        # <task_id>_<image parent>_<image stem>.mp4 with task_id = the item index (inference_ar_forcing.py:278-282)
        out = out_dir / f"0_{d.name}_image.mp4"
        return LaunchSpec(script="inference_ar_forcing.py", args=args, out_dir=str(out_dir), output=str(out),
                          wrapper=self.shim_path(__file__), wrapper_args=shim)

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        if policy.name == "fullkv":
            return {"local_attn_size": -1, "shim": "runner.py --full-kv: cache literals resized to 126 x 880",
                    "window": "every earlier latent"}
        return {"local_attn_size": 12, "sink_size": 3, "passed": "nothing: configs/dreamx-ar/config.json:15-16",
                "window": "3 sink + 6 recent + 3 current latents (upstream's own)"}
