"""Matrix-Game 3 runner shim (runs inside the model's environment; targets SkyworkAI/Matrix-Game@20e033e3,
Matrix-Game-3/utils/utils.py, contract ``adapters/contracts/matrix_game3.yaml``).

Upstream's ``get_data(num_frames, height, width, pil_image, device=, dtype=, key_strength=1.0)`` builds random
benchmark actions; its call site (``pipeline/inference_pipeline.py::generate``) unpacks four values:
``current_image, extrinsics_all, keyboard_condition_all, mouse_condition_all``. The replacement keeps upstream's
image preprocessing (it calls the original for the image), swaps in the harness's compiled keyboard (T,6) and
mouse (T,2), and integrates the extrinsics with upstream's own ``compute_all_poses_from_actions`` and
``get_extrinsics``, exactly as the original does, so actions and the Plücker branch agree by construction.
It also seeds the global RNGs.

Usage: ``python runner.py --seed S --keyboard K.npy --mouse M.npy -- generate.py <args>``.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, patch_attr  # noqa: E402


def make_get_data(original, keyboard, mouse):
    """The replacement for ``utils.utils.get_data`` (same signature, same four return values)."""

    def get_data(num_frames, height, width, pil_image, device=None, dtype=None, key_strength=1.0):
        import numpy as np

        upstream = sys.modules[original.__module__]
        if len(keyboard) < num_frames or len(mouse) < num_frames:
            raise SystemExit(f"shim: the compiled actions have {len(keyboard)} frames, upstream asks for {num_frames} "
                             "(num_iterations does not match the compiled trajectory)")
        image = original(num_frames, height, width, pil_image, device=device, dtype=dtype,
                         key_strength=key_strength)[0]
        kb = np.asarray(keyboard[:num_frames], dtype=np.float32) * key_strength
        ms = np.asarray(mouse[:num_frames], dtype=np.float32)
        poses = upstream.compute_all_poses_from_actions(kb, ms, first_pose=np.zeros(5))
        rotations = np.concatenate([np.zeros((len(poses), 1)), poses[:, 3:5]], axis=1).tolist()
        extrinsics = upstream.get_extrinsics(rotations, poses[:, :3].tolist())
        import torch

        kb_t = torch.from_numpy(kb).to(device, dtype).unsqueeze(0)
        ms_t = torch.from_numpy(ms).to(device, dtype).unsqueeze(0)
        return image, extrinsics, kb_t, ms_t

    get_data.harness_shim = True
    return get_data


def patch(opts):
    import numpy as np

    kb, ms = np.load(opts.keyboard), np.load(opts.mouse)
    patch_attr("utils.utils", "get_data", lambda original: make_get_data(original, kb, ms))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="matrix_game3/runner.py", allow_abbrev=False)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--keyboard", required=True)
    ap.add_argument("--mouse", required=True)
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
