"""Evoke (AlayaLab/Evoke@74d2685).

Native input: a pose ``.npz`` with ``cam_c2w`` [T,4,4] (absolute c2w) and ``intrinsics`` [3,3] (only frame 0's K is
used), and one JSONL row ``{name, image_path, pose_path, prompt_path, pose_fps, pose_source_resolution, seed}``
(``evoke/utils/ev_validation.py``, ``scripts/inference/infer_batch.py``). Poses are written at the model's 24 fps so
the index resampling is the identity. The trajectory ends with 21 static poses (paper appendix C). The launcher's
pose edits (smoothing, per-chunk capping, relative-replay tail) are switched off through its environment
variables so the model sees the canonical path bit for bit [the off values are inferred]. Frames = 36 chunks - 3
(14 chunks = 501). Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from adapters.base import ItemRequest, ModelConfigError, NativeControls
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.io import atomic_path, write_text


@dataclass(frozen=True, kw_only=True)
class EvokeConfig(UpstreamConfig):
    """Evoke settings. launcher_env: variables that neutralise the launcher's pose edits."""

    script: str = "scripts/inference/infer_post_distill.sh"
    launcher_env: dict[str, str] = field(default_factory=lambda: {"POSE_SMOOTH_WIN": "0", "CAP_MODE": "none",
                                                                  "POSE_EXTEND_MODE": "clamp"})

    def chunks(self, N: int) -> int:
        k, r = divmod(N + 3, 36)
        if r:
            raise ModelConfigError(f"Evoke makes 36*chunks - 3 frames; {N} is not one (model.num_frames)")
        return k


class EvokeAdapter(UpstreamAdapter):
    config_class = EvokeConfig
    config: EvokeConfig

    def write_native(self, req: ItemRequest, image: np.ndarray, K: np.ndarray) -> NativeControls:
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

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out_dir = req.item_dir / "upstream_out"
        env = {"MODE": "i2v", "NUM_CHUNKS": str(c.chunks(req.path.num_frames)), "SEED": str(req.seed),
               "JSONL": str(d / "cases.jsonl"), "OUTPUT_DIR": str(out_dir), "CKPT": self.ckpt(), **c.launcher_env}
        return LaunchSpec(script=c.script, args=[], env=env, out_dir=str(out_dir), interpreter=["bash"])
