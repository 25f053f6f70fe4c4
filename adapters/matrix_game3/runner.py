"""Matrix-Game 3 runner shim (runs inside the model's environment; targets SkyworkAI/Matrix-Game@20e033e3,
folder Matrix-Game-3/, contract ``adapters/matrix_game3/contract.yaml``).

1. ``utils.utils.get_data(num_frames, height, width, pil_image, device=None, dtype=None)`` builds random
   benchmark actions (the pin's signature has no ``key_strength``: utils/utils.py:95@71c3cd7f7413; its call site,
   pipeline/inference_pipeline.py:394@20e033e3, passes none). Its call site unpacks four values:
   ``current_image, extrinsics_all, keyboard_condition_all, mouse_condition_all``. The replacement keeps upstream's
   image preprocessing (it calls the original for the image, with exactly the arguments the original accepts),
   swaps in the harness's compiled keyboard (T,6) and mouse (T,2), and integrates the extrinsics with upstream's
   own ``compute_all_poses_from_actions`` and ``get_extrinsics``, so actions and the Plücker branch agree.
2. ``utils.visualize.process_video(input_video, output_video, config, mouse_icon_path, mouse_scale=,
   default_frame_res=)`` draws six key boxes and a mouse cursor into every frame and writes the mp4
   (visualize.py:146-167@71c3cd7f7413, called by rank 0 at inference_pipeline.py:733-740@20e033e3). The
   replacement writes the same frames with upstream's own encoder (``diffusers.utils.export_to_video``, float
   frames in [0, 1]) at ``--fps`` (the contract's ``writer.fps``, 17), with nothing drawn. That reaches the serial
   path only: with ``--use_async_vae`` a spawned worker writes (the harness launch does not pass it).
3. Seeds the global RNGs.

Usage: ``python runner.py --seed S --keyboard K.npy --mouse M.npy --fps 17 -- generate.py <args>``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from typing import Any, Callable, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, marked, patch_attr  # noqa: E402

#: The upstream functions this shim replaces (``module.function``): the contract's overlay rule reads it.
REPLACES = ("utils.utils.get_data", "utils.visualize.process_video")


def make_get_data(original: Callable[..., Any], keyboard: Sequence[Any], mouse: Sequence[Any]) -> Callable[..., Any]:
    """The replacement for ``utils.utils.get_data`` (same signature, same four return values)."""
    accepts = set(inspect.signature(original).parameters)

    def get_data(num_frames: int, height: int, width: int, pil_image: Any, device: Any = None, dtype: Any = None,
                 **kwargs: Any) -> tuple[Any, Any, Any, Any]:
        import numpy as np

        upstream = sys.modules[original.__module__]
        if len(keyboard) < num_frames or len(mouse) < num_frames:
            raise SystemExit(f"shim: the compiled actions have {len(keyboard)} frames, upstream asks for {num_frames} "
                             "(num_iterations does not match the compiled trajectory)")
        extra = {k: v for k, v in kwargs.items() if k in accepts}  # only what the pinned original accepts
        image = original(num_frames, height, width, pil_image, device=device, dtype=dtype, **extra)[0]
        kb = np.asarray(keyboard[:num_frames], dtype=np.float32) * float(kwargs.get("key_strength", 1.0))
        ms = np.asarray(mouse[:num_frames], dtype=np.float32)
        poses = upstream.compute_all_poses_from_actions(kb, ms, first_pose=np.zeros(5))
        rotations = np.concatenate([np.zeros((len(poses), 1)), poses[:, 3:5]], axis=1).tolist()
        extrinsics = upstream.get_extrinsics(rotations, poses[:, :3].tolist())
        import torch

        kb_t = torch.from_numpy(kb).to(device, dtype).unsqueeze(0)
        ms_t = torch.from_numpy(ms).to(device, dtype).unsqueeze(0)
        return image, extrinsics, kb_t, ms_t

    return marked(get_data)


def _diffusers_writer() -> Callable[..., Any]:
    """Upstream's ``export_to_video``, from the upstream environment's diffusers (its version, not the harness's)."""
    from diffusers.utils import export_to_video  # type: ignore[attr-defined]  # re-exported there without __all__

    return export_to_video


def make_process_video(fps: float, export: Callable[..., Any] | None = None) -> Callable[..., None]:
    """The replacement for ``utils.visualize.process_video``: write ``input_video`` ((T, H, W, 3) uint8) to
    ``output_video`` as it is, at ``fps``. ``export``: the writer (default: upstream's ``export_to_video``)."""

    def process_video(input_video: Any, output_video: str, config: Any = None, mouse_icon_path: Any = None,
                      mouse_scale: float = 1.0, default_frame_res: Any = None, **kwargs: Any) -> None:
        import numpy as np

        write = export if export is not None else _diffusers_writer()
        frames = [np.asarray(f, dtype=np.float32) / 255.0 for f in input_video]
        write(frames, output_video, fps=fps)

    return marked(process_video)


def patch(opts: argparse.Namespace) -> None:
    import numpy as np

    kb, ms = np.load(opts.keyboard), np.load(opts.mouse)
    patch_attr("utils.utils", "get_data", lambda original: make_get_data(original, kb, ms))
    patch_attr("utils.visualize", "process_video", lambda original: make_process_video(opts.fps))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="matrix_game3/runner.py", allow_abbrev=False)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--keyboard", required=True)
    ap.add_argument("--mouse", required=True)
    ap.add_argument("--fps", type=float, required=True)
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
