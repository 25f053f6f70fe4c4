"""The context trace's record of one chunk: what a rollout attended to, written to ``context_trace.json``.

``context_trace.json`` holds ``{"policy": <the policy's settings>, <what a served model reports>, "chunks": [one
:class:`ChunkTrace` per chunk]}`` (``harness/app/runner.py``). Latent indices count the rollout's latent frames from
0 (latent ``l`` is decoded into the video frames of :func:`trajectories.resample.latent_poses`' anchors).
"""

from __future__ import annotations

from typing import Required, TypedDict


class ChunkTrace(TypedDict, total=False):
    """One chunk of a rollout (``chunks[k]`` of ``context_trace.json``).

    The policy's selection (:meth:`harness.context.Selection.to_trace`), every key present when the harness
    selected the chunk's context: ``chunk`` the chunk index; ``current`` the chunk's own latents; ``context`` the
    sorted history latents it may attend to, the union of ``sink`` (the first latents kept), ``recent`` (the
    sliding window) and ``retrieved`` (FoV-selected chunks' latents); ``scores`` candidate chunk index (a string,
    as JSON keys are) -> its FoV overlap, rounded to 6 decimals.

    What a model adds of its own run: ``note`` (why the chunk has no context, e.g. a bidirectional model that sees
    the whole clip at once); the reference model's ``sources_used`` (latents whose frames it warped), ``warps`` (how
    many warps it made) and ``synth_fraction`` (the share of the chunk's pixels it synthesised, in [0, 1]); a served
    model's ``served`` (what the server streamed and reported for the chunk:
    :meth:`adapters.served.engines.ChunkRecord.to_dict`, None when it sent nothing for it). A served chunk beyond
    the policy's holds ``chunk`` and ``served`` only.
    """

    chunk: Required[int]
    current: list[int]
    context: list[int]
    sink: list[int]
    recent: list[int]
    retrieved: list[int]
    scores: dict[str, float]
    note: str
    sources_used: list[int]
    warps: int
    synth_fraction: float
    served: dict[str, object] | None
