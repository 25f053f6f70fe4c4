"""LingBot-World v2 FoV shim (runs inside the model's environment).

Targets robbyant/lingbot-world-v2@2648877f763a06cc743bcd919936da4d25f12e7b: ``wan/modules/model_fast.py``
(``CausalWanSelfAttention.forward``) and ``wan/distributed/sequence_parallel.py`` (``sp_attn_forward_causal``).

Run with upstream's FullKV settings (``local_attn_size = -1``, ``max_attention_size = None``): the cache then keeps
every latent frame at token range ``[f * S, (f + 1) * S)`` (S = ``frame_seqlen`` = 1508: upstream generates 464x832
from a 480x832 image, wan/image2video.py:224-233), keys stored
after temporal RoPE at their absolute frame index, and both attention paths hand their kernel the contiguous slice
``k[:, 0:local_end]`` = all history + the current chunk. This shim wraps that kernel in both modules and replaces
the slice with a gather of the harness selection for the current chunk: ``sink | retrieved | recent | current``
(``context_selection.json``, computed by ``harness.context`` from the same latent poses). The kernel learns the chunk
from the key length (``local_end = (chunk_start + chunk) * S``), so every denoising step and the t = 0 cache-refresh
pass of a chunk use the same selection, as upstream's own window does. Calls whose key length is not a multiple of
S (cross-attention to text / image tokens) pass through untouched. Retrieved keys keep their absolute RoPE time.

Usage: ``python fov_runner.py --selection context_selection.json --frame-seqlen 1508 -- generate.py <args>``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, marked, patch_attr  # noqa: E402

DEFAULT_KERNELS = "wan.modules.model_fast:flash_attention,wan.distributed.sequence_parallel:flash_attention"


def make_gather(original: Callable[..., Any], table: dict[int, list[int]], frame_seqlen: int,
                chunk: int) -> Callable[..., Any]:
    """Wrap an attention kernel ``f(q, k, v, *args, **kwargs)`` with [B, L, N, D] tensors."""
    import torch

    def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        S = frame_seqlen
        n_tok = k.shape[1]
        if n_tok % S or q.shape[1] % S:
            return original(q, k, v, *args, **kwargs)
        n_frames = n_tok // S
        start = n_frames - q.shape[1] // S  # the current chunk is the last q-length frames of the slice
        if start not in table:
            return original(q, k, v, *args, **kwargs)
        frames = list(table[start]) + list(range(start, n_frames))
        idx = (torch.tensor(frames, dtype=torch.long)[:, None] * S + torch.arange(S)[None]).reshape(-1).to(k.device)
        kwargs = dict(kwargs)
        if kwargs.get("k_lens") is not None:
            kwargs["k_lens"] = torch.full_like(kwargs["k_lens"], len(frames) * S)
        return original(q, k.index_select(1, idx), v.index_select(1, idx), *args, **kwargs)

    return marked(kernel, "harness_fov")


def patch(opts: argparse.Namespace) -> None:
    import json

    data = json.load(open(opts.selection))
    chunk = int(data["chunk"])
    table = {int(c["current"][0]): [int(i) for i in c["context"]] for c in data["chunks"]}
    for ref in opts.kernels.split(","):
        module, attr = ref.split(":")
        patch_attr(module, attr, lambda original: make_gather(original, table, opts.frame_seqlen, chunk))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lingbot_v2/fov_runner.py", allow_abbrev=False)
    ap.add_argument("--selection", required=True)
    ap.add_argument("--frame-seqlen", type=int, required=True)
    ap.add_argument("--kernels", default=DEFAULT_KERNELS)
    ap.add_argument("--seed", type=int)
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
