"""DreamX-World runner shim (runs inside the model's environment; targets AMAP-ML/DreamX-World@a1f4c6e, contract
``adapters/dreamx/contract.yaml``).

1. Replaces ``utils.trajectory_processor.generate_trajectory_from_json`` (the built-in action-to-camera generator).
   Its call site (``inference_ar_forcing.py:301``) passes ``trajectory_spec=, num_frames=, return_cam_params=True``
   and unpacks three values ``(plucker, cam_params, per_frame_keys)``, using only ``cam_params`` ((num_frames, 19)
   rows ``[frame, fx, fy, cx, cy, 0, 0, w2c 3x4]``). The replacement returns the harness's rows in that slot.
2. ``--full-kv L``: FullKV over L latents. Upstream's window comes from ``local_attn_size`` (12 in
   ``configs/dreamx-ar/config.json:15`` and the wrapper default, ``utils/wan_wrapper.py:102``); with -1 the cache
   falls back to two literals sized for 21 latents: ``kv_cache_size = 18480`` (``pipeline/pipeline_causal_camera.py:260``)
   and ``max_attention_size = 39600`` (``wan/modules/causal_camera_model_2_2_prope_infinity.py:73, :251``). The shim
   forces ``local_attn_size=-1`` on ``WanDiffusionCameraWrapper`` and rewrites both literals to ``L x 880`` (it stops
   if a literal is not there: another commit).
3. Seeds the global RNGs (noise is drawn with the global ``torch.randn``).

Usage: ``python runner.py --seed S --cameras cameras.txt [--full-kv 126] -- inference_ar_forcing.py <args>``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, marked, patch_attr, patch_source  # noqa: E402

COMMIT = "a1f4c6e5e45600718e5236955f2e0702e53fc275"
TOKENS_PER_LATENT = 880  # 22 x 40 tokens at 704x1280 (pipeline/pipeline_causal_camera.py:36)


def read_rows(path: str) -> list[list[float]]:
    lines = open(path).read().splitlines()[1:]
    return [[float(v) for v in x.split()] for x in lines if x.strip()]


def make_generator(rows: list[list[float]]) -> Callable[..., tuple[None, Any, list[None]]]:
    """The replacement for ``generate_trajectory_from_json``: the 3-tuple its call site unpacks."""

    def generate_trajectory_from_json(trajectory_spec: Any = None, num_frames: Any = None, *args: Any,
                                      return_cam_params: bool = False, **kwargs: Any) -> tuple[None, Any, list[None]]:
        import numpy as np

        if num_frames is not None and int(num_frames) != len(rows):
            raise SystemExit(f"shim: upstream asks for {num_frames} camera rows, the harness compiled {len(rows)} "
                             "(--num_output_frames does not match cameras.txt)")
        cam = np.asarray(rows, dtype=np.float32)
        if not return_cam_params:
            raise SystemExit("shim: generate_trajectory_from_json was called without return_cam_params=True; "
                             f"the call site differs from {COMMIT[:12]}")
        return None, cam, [None] * len(cam)

    return marked(generate_trajectory_from_json)


def full_kv_patches(latents: int) -> list[tuple[str, list[tuple[str, str]]]]:
    """(module, [(old, new)]) literal rewrites for FullKV over ``latents`` latents."""
    n = str(int(latents) * TOKENS_PER_LATENT)
    return [("pipeline.pipeline_causal_camera", [("kv_cache_size = 18480", f"kv_cache_size = {n}")]),
            ("wan.modules.causal_camera_model_2_2_prope_infinity", [("39600", n)])]


def force_full_window(cls: type[Any]) -> type[Any]:
    """Make ``WanDiffusionCameraWrapper(...)`` build its model with ``local_attn_size=-1`` (no sliding window)."""
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["local_attn_size"] = -1
        original(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


def patch(opts: argparse.Namespace) -> None:
    rows = read_rows(opts.cameras)
    if opts.full_kv:
        # the model module first: the pipeline module imports it (through utils.wan_wrapper) when it is executed
        for module, repl in reversed(full_kv_patches(opts.full_kv)):
            patch_source(module, repl, COMMIT)
        import importlib

        force_full_window(importlib.import_module("utils.wan_wrapper").WanDiffusionCameraWrapper)
    patch_attr("utils.trajectory_processor", "generate_trajectory_from_json", lambda original: make_generator(rows))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="dreamx/runner.py", allow_abbrev=False)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--cameras", required=True)
    ap.add_argument("--full-kv", type=int, default=0)
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
