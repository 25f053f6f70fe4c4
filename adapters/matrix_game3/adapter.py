"""Matrix-Game 3 (SkyworkAI/Matrix-Game@20e033e3, folder Matrix-Game-3/; contract in adapters/matrix_game3/contract.yaml).

Native input: per-frame keyboard ``(T, 6)`` ``[W, S, A, D, 0, 0]`` and mouse ``(T, 2)`` ``[pitch, yaw]`` in 15 deg per
unit (dead zone 0.02); upstream applies action ``i`` to move frame ``i`` to ``i + 1``. Upstream's ``get_data()``
builds random benchmark actions, so ``runner.py`` replaces it and returns the 4 values its call site unpacks,
with the extrinsics integrated by upstream's own ``compute_all_poses_from_actions``. Translation is quantised to
key presses (12.35 units per frame, horizontal only): the achieved path is decoded from the actions and the
residual recorded. Keys and mouse are held on upstream's own blocks (row 0, then 12 rows each, as its condition
generator holds them) and the item's path is laid on those blocks (:meth:`MatrixGame3Adapter.control_clock`,
docs/controls.md). Frames: 57 + 40 (iterations - 1) = 497 for 12 iterations.

Launch: 8 torchrun ranks (``--ulysses_size 8``), without ``--use_async_vae``. Upstream's ``process_video`` draws
key boxes and a cursor into every frame; the shim replaces it with a plain writer at the contract's fps (17), and
that only reaches rank 0: with ``--use_async_vae`` a spawned worker would write (the paper's 7 + 1 layout; the
contract's ``defaults_differ`` says why the harness does not follow it). Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.controls.clock import ControlClock
from adapters.matrix_game3.controls import MG3_CAVEATS, MG3Params, mg3_clock, mg3_decode, mg3_encode, mg3_extrinsics
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from harness.context import ContextPolicy
from harness.io import save_npy


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class MG3Config(UpstreamConfig):
    """Matrix-Game 3 settings. mouse_pitch: ``code`` or ``label`` (see :class:`adapters.matrix_game3.controls.MG3Params`).
    size / vae_type / extra_args: upstream flags (int8 weights, FA3, light VAE, async VAE on the last GPU)."""

    size: str = "704*1280"
    mouse_pitch: str = "code"
    first_clip_frames: int = 57
    frames_per_iteration: int = 40
    extra_args: tuple[str, ...] = ("--use_int8", "--fa_version", "3", "--vae_type", "mg_lightvae",
                                   "--lightvae_pruning_rate", "0.5")

    def params(self) -> MG3Params:
        return MG3Params(metres_per_unit=self.translation_scale.per_scene_unit,
                         mouse_pitch=self.mouse_pitch)

    def iterations(self, N: int) -> int:
        k, r = divmod(N - self.first_clip_frames, self.frames_per_iteration)
        if N < self.first_clip_frames or r:
            raise ModelConfigError(f"Matrix-Game 3 makes 57 + 40*(iterations-1) frames; {N} is not one (model.num_frames)")
        return k + 1


class MatrixGame3Adapter(UpstreamAdapter):
    # the model's own memory: 4 overlap latents + 5 memory latents it retrieves itself
    contexts: ClassVar[tuple[str, ...]] = ("native",)
    unsupported_reasons = {"fullkv": "no KV cache; each clip sees 4 overlap + 5 memory latents, a longer context "
                                     "than the model was built for",
                           "sliding": "only the memory-slot selection could change; not implemented",
                           "fov": "the model retrieves its own 5 memory latents by its own camera rule; nothing "
                                  "passes the harness's FoV budget (4 sink + 4 recent + 2 x 4 retrieved latents) and "
                                  "the launch was the native one; run context=native"}
    config_class = MG3Config
    config: MG3Config
    always_shimmed = True

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def control_clock(self, num_frames: int) -> ControlClock:
        """Upstream's condition blocks: row 0 alone, then 12 rows each (utils/conditions.py:21-32@71c3cd7f7413).
        Boundaries go to the nearest block edge (``time``): a shift of at most 6 frames."""
        hold = self.config.params().hold_frames
        return ControlClock(tuple(mg3_clock(num_frames, hold).tolist()),
                           f"Matrix-Game 3 holds each action for {hold} rows after row 0 (utils/conditions.py:21-32)")

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        c = self.config
        iters = c.iterations(req.path.num_frames)
        keyboard, mouse = mg3_encode(req.path.c2w, c.params())
        ext = mg3_extrinsics(keyboard, mouse, c.params())
        d = req.controls_dir
        save_npy(d / "keyboard_condition.npy", keyboard)
        save_npy(d / "mouse_condition.npy", mouse)
        save_npy(d / "extrinsics.npy", ext)
        pressed = keyboard[:-1, :4].sum(1) > 0
        runs = np.diff(np.flatnonzero(np.diff(np.r_[0, pressed.astype(int), 0])))[::2]
        return NativeControls(
            files={n: str(d / n) for n in ("keyboard_condition.npy", "mouse_condition.npy", "extrinsics.npy")},
            meta={"iterations": iters, "mouse_pitch": c.mouse_pitch, "action_rule": "action i moves frame i to i+1",
                  "keys_pressed_fraction": float(pressed.mean()),
                  "key_run_mean_frames": float(runs.mean()) if len(runs) else 0.0,
                  "hold_frames": c.params().hold_frames,
                  "caveats": ["translation quantised to 12.35 cm key steps, horizontal only",
                              "mouse pitch sign is a recorded choice (model.mouse_pitch)", *MG3_CAVEATS],
                  "upstream_clock": req.path.params.get("upstream_clock")},
        )

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        kb = np.load(controls_dir / "keyboard_condition.npy")
        ms = np.load(controls_dir / "mouse_condition.npy")
        return mg3_decode(kb, ms, self.config.params())

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out_dir = req.item_dir / "upstream_out"
        args = ["--size", c.size, "--ckpt_dir", self.ckpt(), "--num_iterations",
                str(c.iterations(req.path.num_frames)), "--num_inference_steps", str(c.sampling_steps), "--seed",
                str(req.seed), "--image", str(d / "image.png"), "--prompt", req.case.prompt, "--output_dir",
                str(out_dir), "--save_name", "video", *c.extra_args]
        if c.ranks > 1:  # sequence parallel over the ranks; upstream asserts ulysses_size == world size
            args += ["--ulysses_size", str(c.ranks)]
        if "--use_async_vae" in c.extra_args and c.gpus_per_job > 1 and c.vae_worker_gpus != 1:
            raise ModelConfigError("model.extra_args has --use_async_vae: upstream puts the VAE worker on GPU index "
                                   "world_size, so set model.vae_worker_gpus: 1 (gpus_per_job counts it)")
        from adapters.matrix_game3.runner import REPLACES

        # the shim writes the raw frames itself, at the rate upstream's writer uses (contract writer.fps)
        contract = self.contract()
        assert contract is not None  # adapters/matrix_game3/contract.yaml
        shim = ["--seed", str(req.seed), "--keyboard", str(d / "keyboard_condition.npy"), "--mouse",
                str(d / "mouse_condition.npy"), "--fps", f"{contract.writer.fps:g}"]
        return LaunchSpec(script="generate.py", args=args, out_dir=str(out_dir), output=str(out_dir / "video.mp4"),
                          wrapper=self.shim_path(__file__), wrapper_args=shim, replaces=REPLACES)

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        return {**super().told_upstream(policy),
                "window": "each clip: 4 overlap latents + 5 memory latents retrieved by upstream"}
