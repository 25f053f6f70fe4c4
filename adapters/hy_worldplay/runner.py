"""HY-WorldPlay runner shim (runs inside the model's environment; targets HY-WorldPlay@da2d0c2).

1. Seeds the global RNGs: ``hyvideo/utils/retrieval_context.py`` draws its FoV points with unseeded ``torch.rand``.
2. With ``--selection``, replaces ``select_aligned_memory_frames(w2c, chunk_start, ...)`` so each chunk re-encodes
   exactly the latents the harness policy selected (the native rule is kept when the option is absent).

Usage: ``python runner.py --seed S [--selection context_selection.json] -- hyvideo/generate.py <args>``.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import load_selection, main_with, patch_attr  # noqa: E402


def patch(opts):
    if not opts.selection:
        return
    table = load_selection(opts.selection)

    def make(original):
        def select_aligned_memory_frames(w2c, chunk_start, *args, **kwargs):
            return list(table[int(chunk_start)])

        return select_aligned_memory_frames

    patch_attr("hyvideo.utils.retrieval_context", "select_aligned_memory_frames", make)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--selection")
    main_with(ap, patch)
