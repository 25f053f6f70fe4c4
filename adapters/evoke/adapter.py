"""Evoke (AlayaLab/Evoke@74d2685).

Native input: a pose ``.npz`` with ``cam_c2w`` [T,4,4] (absolute c2w) and ``intrinsics`` [3,3] (only frame 0's K is
used), and one JSONL row ``{name, image_path, pose_path, prompt_path, pose_fps, pose_source_resolution, seed}``
(``evoke/utils/ev_validation.py``, ``scripts/inference/infer_batch.py``). Poses are written at the model's 24 fps so
the index resampling is the identity. The trajectory ends with 21 static poses (paper appendix C). The launcher's
pose edits are switched off through the variables its driver reads (contract ``adapters/evoke/contract.yaml``):
``CAP_MAX_DEG=0 CAP_MAX_TRANS=0`` (the per-chunk clamp, 10 deg / 3 units by default, would cut a 90-degree turn to
about 39 degrees; with both 0 no ``--cap_mode`` is passed), ``POSE_SMOOTH_WIN=0`` and ``POSE_EXTEND_MODE=clamp``.
Weights: ``TRANSFORMER_PATH`` (``model.checkpoint``, the parent of ``transformer/``), ``BASE_CKPT``
(``model.base_checkpoint``) and ``VIGEO_WEIGHTS`` (``model.vigeo_weights``, the folder of ``vigeo.pt``, without
which upstream exits FATAL); output ``$OUT_ROOT/<row name>/geo_pred.mp4``. The joystick HUD upstream draws into
every i2v frame by default is switched off with its own switch (``JOYSTICK_HUD=off``), the debug mp4s too
(``DUMP_GEO=0 SAVE_SEGMENTS=0``), and the warp's co-visibility subsampling is seeded (``EVOKE_WARP_SEED``). The launcher overwrites
``CUDA_VISIBLE_DEVICES`` with ``$GPU_OFFSET``, so the assigned device goes there. Frames = 36 chunks - 3
(14 chunks = 501). Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.io import atomic_path, write_text


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class EvokeConfig(UpstreamConfig):
    """Evoke settings. launcher_env: variables that neutralise the launcher's pose edits, its HUD and its debug
    videos. base_checkpoint: the Evoke base model folder (``BASE_CKPT``; upstream default ``models/evoke-base`` in the
    checkout). vigeo_weights: the folder holding ``vigeo.pt`` (``VIGEO_WEIGHTS``; upstream default
    ``models/ViGeo1.1`` in the checkout)."""

    script: str = "scripts/inference/infer_post_distill.sh"
    launcher_env: dict[str, str] = field(default_factory=lambda: {
        "CAP_MAX_DEG": "0", "CAP_MAX_TRANS": "0", "POSE_SMOOTH_WIN": "0", "POSE_EXTEND_MODE": "clamp",
        "JOYSTICK_HUD": "off", "DUMP_GEO": "0", "SAVE_SEGMENTS": "0"})
    base_checkpoint: Optional[str] = None
    vigeo_weights: Optional[str] = None

    def chunks(self, N: int) -> int:
        k, r = divmod(N + 3, 36)
        if r:
            raise ModelConfigError(f"Evoke makes 36*chunks - 3 frames; {N} is not one (model.num_frames)")
        return k


class EvokeAdapter(UpstreamAdapter):
    contexts: ClassVar[tuple[str, ...]] = ("native",)
    unsupported_reasons = {"fullkv": "no KV cache (RESTRICT=0); memory is history latents + a warp bank",
                           "sliding": "no KV window upstream", "fov": "no KV window upstream"}
    config_class = EvokeConfig
    config: EvokeConfig

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        c = self.config
        N = req.path.num_frames
        chunks = c.chunks(N)
        d = req.controls_dir
        with atomic_path(d / "pose.npz", suffix=".npz") as tmp:
            np.savez(tmp, cam_c2w=req.path.c2w.astype(np.float64), intrinsics=np.asarray(K, np.float64))
        row = {"name": f"{req.case.id}_{req.path.name}", "image_path": str(d / "image.png"),
               "pose_path": str(d / "pose.npz"), "prompt_path": str(d / "prompt.txt"), "pose_fps": c.fps,
               "pose_source_resolution": [c.height, c.width], "seed": req.seed}
        write_text(d / "cases.jsonl", json.dumps(row) + "\n")
        return NativeControls(files={"pose.npz": str(d / "pose.npz"), "cases.jsonl": str(d / "cases.jsonl")},
                              meta={"chunks": chunks, "launcher_env": c.launcher_env,
                                    "trailing_static_poses": c.trailing_hold_frames})

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        with np.load(controls_dir / "pose.npz") as z:
            return np.array(z["cam_c2w"], dtype=np.float64)

    def checkpoint_paths(self) -> dict[str, Optional[str]]:
        return {**super().checkpoint_paths(), "base_checkpoint": self.config.base_checkpoint,
                "vigeo_weights": self.config.vigeo_weights}

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out_dir = req.item_dir / "upstream_out"
        name = f"{req.case.id}_{req.path.name}"  # the JSONL row's name: upstream writes OUT_ROOT/<name>/geo_pred.mp4
        env = {"MODE": "i2v", "NUM_CHUNKS": str(c.chunks(req.path.num_frames)), "SEED": str(req.seed),
               "JSONL": str(d / "cases.jsonl"), "MAX_CASES": "1", "OUT_ROOT": str(out_dir),
               "TRANSFORMER_PATH": self.ckpt(), "BASE_CKPT": c.base_checkpoint or "<model.base_checkpoint>",
               "HEIGHT": str(c.height), "WIDTH": str(c.width), "FPS": f"{c.fps:g}", "LOCAL_GPUS": "1",
               # the launcher sets CUDA_VISIBLE_DEVICES=$GPU_OFFSET itself (infer_post_distill.sh:205)
               "GPU_OFFSET": self._devices().split(",")[0], "EVOKE_WARP_SEED": str(req.seed),
               "VIGEO_WEIGHTS": c.vigeo_weights or "<model.vigeo_weights>", **c.launcher_env}
        if c.python:
            env["EVOKE_PYTHON_BIN"] = str(Path(c.python).parent)
        return LaunchSpec(script=c.script, args=[], env=env, out_dir=str(out_dir),
                          output=str(out_dir / name / "geo_pred.mp4"), interpreter=["bash"])

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        return {**super().told_upstream(policy), "window": "no KV cache: history latents + a warp bank"}
