"""LingBot-World v2 (robbyant/lingbot-world-v2@2648877): causal-fast Self-Forcing KV cache.

FullKV and Sliding map onto upstream's own knobs (``local_attn_size``, ``sink_size``; see
:func:`adapters.lingbot.adapter.lingbot_context_args`). FoV runs upstream through ``fov_runner.py``, a shim that
replaces the contiguous cache slice with a gather of the selected latent frames in both the single-GPU and the
sequence-parallel attention, with the per-chunk selection the harness computed (``controls/context_selection.json``).
Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from adapters.base import ItemRequest
from adapters.lingbot.adapter import LingBotAdapter, lingbot_context_args
from adapters.memo import memo
from harness.context import ContextPolicy
from harness.context import fov_selection as _fov_selection
from harness.io import json_text, write_text
from trajectories.path import CameraPath


@memo
def selection_json(policy: ContextPolicy, path: CameraPath, chunk: int) -> str:
    """``context_selection.json`` (:func:`harness.context.fov_selection`) as written, once per path and policy."""
    return json_text(_fov_selection(policy, path, chunk))


class LingBotV2Adapter(LingBotAdapter):
    contexts: ClassVar[tuple[str, ...]] = ("fullkv", "sliding", "fov", "native")
    unsupported_reasons = {}

    def context_args(self, req: ItemRequest) -> tuple[list[str], str | None, list[str]]:
        if req.context.name != "fov":
            return lingbot_context_args(req.context, self.config, self.native_args()), None, []
        sel_file = req.controls_dir / "context_selection.json"
        write_text(sel_file, selection_json(req.context, req.path, self.config.chunk_latents))
        # tokens per latent at upstream's canvas: 464x832 -> 58 x 104 latents / (2 x 2) patches = 1508
        S = self.frame_seqlen()
        return [], self.shim_path(__file__, "fov_runner.py"), ["--selection", str(sel_file), "--frame-seqlen", str(S)]

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        if policy.name != "fov":
            return super().told_upstream(policy)
        from adapters.base import policy_budget

        return {"shim": "fov_runner.py gathers controls/context_selection.json per chunk", **policy_budget(policy)}
