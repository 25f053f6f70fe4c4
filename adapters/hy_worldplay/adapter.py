"""HY-WorldPlay (Tencent-Hunyuan/HY-WorldPlay@da2d0c2).

Native input: a pose JSON keyed ``"0", "1", ...`` with **one entry per latent**, each
``{"extrinsic": 4x4 c2w, "K": 3x3 pixel K}`` (``assets/pose/test_forward_32_latents.json``). K is upstream's own
default (generate.py:160-164, 89.4 x 58.2 deg once normalised), following the paper's "fixed camera intrinsics"
(appendix C); the case's field-of-view error is recorded in the residual. Upstream asserts
``len == (video_length - 1)//4 + 1`` and derives the PRoPE matrices and a discrete action label per latent from it.
Latent i carries frame 4i (training loader). Poses are recentred on frame 0 (upstream does not recentre at
inference, and ``viewmats`` are bf16 in the transformer). Translation reaches the model in raw units (retrieval
radius 8 units), scaled here by ``translation_scale.per_scene_unit``.

``runner.py`` seeds the global RNG (upstream's FoV point sampler draws from unseeded ``torch.rand``) and, for
harness policies other than ``native``, replaces ``select_aligned_memory_frames`` with the harness selection.
Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.controls.poses import interpolate_to_frames
from adapters.hy_worldplay.controls import HY_DEFAULT_K, hy_action_labels, hy_normalise_K
from adapters.memo import memo
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.context import fov_selection as _fov_selection
from harness.io import json_text, write_text
from trajectories.path import CameraPath
from trajectories.resample import latent_anchor_frames, latents_for_frames


@memo
def selection_json(policy: ContextPolicy, path: CameraPath, chunk: int) -> str:
    """``context_selection.json`` (:func:`harness.context.fov_selection`) as written, once per path and policy."""
    return json_text(_fov_selection(policy, path, chunk))


@memo
def pose_json(poses: np.ndarray, K: np.ndarray) -> str:
    """``pose.json``: ``{latent: {extrinsic, K}}`` as written, once per latent poses and K."""
    return json_text({str(i): {"extrinsic": poses[i].tolist(), "K": K.tolist()} for i in range(len(poses))})


@memo
def pose_json_extrinsics(text: str) -> np.ndarray:
    """The (L, 4, 4) ``extrinsic`` entries of a ``pose.json`` text, in latent order."""
    data = json.loads(text)
    return np.array([data[str(i)]["extrinsic"] for i in range(len(data))], dtype=np.float64)


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class HYConfig(UpstreamConfig):
    """HY-WorldPlay settings. model_path: the HunyuanVideo-1.5 base model folder (upstream's required
    ``--model_path``); ``checkpoint`` is the action checkpoint (``--action_ckpt``). resolution / model_type: upstream
    choices (480p|720p, bi|ar)."""

    resolution: str = "480p"
    model_type: str = "ar"
    model_path: Optional[str] = None


class HYWorldPlayAdapter(UpstreamAdapter):
    #: native: upstream's own FoV retrieval; the others replace ``select_aligned_memory_frames`` (runner.py)
    contexts: ClassVar[tuple[str, ...]] = ("native", "fov", "sliding", "fullkv")
    unsupported_reasons = {}
    config_class = HYConfig
    config: HYConfig
    always_shimmed = True

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        N = req.path.num_frames
        if (N - 1) % 4:
            raise ModelConfigError(f"HY-WorldPlay needs (N-1) % 4 == 0; got N={N}")
        lat = latents_for_frames(N)
        if lat % self.config.chunk_latents:
            raise ModelConfigError(f"HY-WorldPlay AR needs the latent count ({lat}) to be a multiple of 4")
        poses = req.path.c2w[latent_anchor_frames(lat)].copy()
        poses[:, :3, 3] *= self.scene_scale()
        d = req.controls_dir
        write_text(d / "pose.json", pose_json(poses, HY_DEFAULT_K))  # fixed K (paper appendix C)
        labels = hy_action_labels(poses)
        meta = {"num_latents": lat, "latent_anchor_rule": "latent i -> frame 4i",
                "action_labels": labels.tolist(), "K_normalised": hy_normalise_K(HY_DEFAULT_K).tolist()}
        if req.context.name != "native":
            write_text(d / "context_selection.json", selection_json(req.context, req.path, self.config.chunk_latents))
        return NativeControls(files={"pose.json": str(d / "pose.json")}, meta=meta)

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        poses = pose_json_extrinsics((controls_dir / "pose.json").read_text())
        poses[:, :3, 3] /= self.scene_scale()
        return interpolate_to_frames(latent_anchor_frames(len(poses)), poses, req.path.num_frames)

    def checkpoint_paths(self) -> dict[str, Optional[str]]:
        return {**super().checkpoint_paths(), "model_path": self.config.model_path}

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        # upstream treats --output_path as a folder: it creates it and writes gen.mp4 inside (generate.py:774-777)
        out_dir = req.item_dir / "upstream_out"
        args = ["--pose", str(d / "pose.json"), "--video_length", str(req.path.num_frames), "--seed", str(req.seed),
                "--resolution", c.resolution, "--width", str(c.width), "--height", str(c.height), "--model_type",
                c.model_type, "--few_step", "true", "--num_inference_steps", str(c.sampling_steps), "--rewrite",
                "false", "--sr", "false", "--transformer_resident_ar_rollout", "true", "--model_path",
                c.model_path or "<model.model_path>", "--action_ckpt", self.ckpt(),
                "--image_path", str(d / "image.png"), "--prompt", req.case.prompt, "--output_path", str(out_dir)]
        shim_args = ["--seed", str(req.seed)]
        if req.context.name != "native":
            shim_args += ["--selection", str(d / "context_selection.json")]
        return LaunchSpec(script="hyvideo/generate.py", args=args, output=str(out_dir / "gen.mp4"), out_dir=str(out_dir),
                          wrapper=self.shim_path(__file__), wrapper_args=shim_args)

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        if policy.name == "native":
            return {**super().told_upstream(policy), "window": "upstream's own FoV retrieval "
                    "(select_aligned_memory_frames)"}
        from adapters.base import policy_budget

        return {"shim": "runner.py replaces select_aligned_memory_frames with controls/context_selection.json",
                **policy_budget(policy)}
