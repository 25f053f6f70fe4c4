"""DreamX-World runner shim (runs inside the model's environment; targets DreamX-World@a1f4c6e).

1. Replaces ``utils.trajectory_processor.generate_trajectory_from_json`` (the built-in action-to-camera generator)
   with the harness's per-frame CameraCtrl rows ``[frame, fx, fy, cx, cy, 0, 0, w2c 3x4]`` [inferred interface].
2. ``--full-kv L``: FullKV over L latents. The causal pipeline hard-codes ``kv_cache_size = 18480`` (21 latents x
   880 tokens) and ``max_attention_size = 39600``; both literals are replaced in
   ``pipeline/pipeline_causal_camera.py`` (the shim stops if they are not there: another commit).
3. Seeds the global RNGs (noise is drawn with the global ``torch.randn``).

Usage: ``python runner.py --seed S --cameras cameras.txt [--full-kv 126] -- inference_ar_forcing.py <args>``.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, patch_attr, patch_source  # noqa: E402

TOKENS_PER_LATENT = 880  # 22 x 40 tokens at 704x1280


def read_rows(path):
    lines = open(path).read().splitlines()[1:]
    return [[float(v) for v in x.split()] for x in lines if x.strip()]


def patch(opts):
    rows = read_rows(opts.cameras)
    if opts.full_kv:
        n = int(opts.full_kv) * TOKENS_PER_LATENT
        patch_source("pipeline.pipeline_causal_camera", [("18480", str(n)), ("39600", str(n))], "a1f4c6e")
    patch_attr("utils.trajectory_processor", "generate_trajectory_from_json", lambda original: (lambda *a, **k: rows))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--cameras", required=True)
    ap.add_argument("--full-kv", type=int, default=0)
    main_with(ap, patch)
