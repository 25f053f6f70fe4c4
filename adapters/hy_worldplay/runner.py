"""HY-WorldPlay runner shim (runs inside the model's environment; targets HY-WorldPlay@da2d0c2).

1. Seeds the global RNGs: ``hyvideo/utils/retrieval_context.py`` draws its FoV points with unseeded ``torch.rand``.
2. With ``--selection``, replaces ``select_aligned_memory_frames(w2c, chunk_start, ...)`` so each chunk re-encodes
   exactly the latents the harness policy selected (the native rule is kept when the option is absent).

Usage: ``python runner.py --seed S [--selection context_selection.json] -- hyvideo/generate.py <args>``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import load_selection, main_with, marked, patch_attr  # noqa: E402


def patch(opts: argparse.Namespace) -> None:
    if not opts.selection:
        return
    table = load_selection(opts.selection)

    patch_attr("hyvideo.utils.retrieval_context", "select_aligned_memory_frames", lambda original: make_selector(table))


def make_selector(table: dict[int, list[int]]) -> Callable[..., list[int]]:
    """The replacement for ``select_aligned_memory_frames(w2c_list, current_frame_idx, memory_frames=,
    temporal_context_size=, pred_latent_size=, points_local=, device=)`` (called once per chunk with the chunk's
    first latent, worldplay_video_pipeline.py:1125): the harness selection as a list of int latent indices."""

    def select_aligned_memory_frames(w2c_list: Any, current_frame_idx: Any, *args: Any, **kwargs: Any) -> list[int]:
        key = int(current_frame_idx)
        if key not in table:
            raise SystemExit(f"shim: no harness selection for the chunk starting at latent {key}")
        return [int(i) for i in table[key]]

    return marked(select_aligned_memory_frames)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hy_worldplay/runner.py", allow_abbrev=False)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--selection")
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
