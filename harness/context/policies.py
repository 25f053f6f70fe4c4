"""Pose-level KV-context policies: which latent frames a chunk may attend to.

Every model shares this selection logic; the tensor-level cache (:mod:`harness.context.kv_cache`) and the reference model consume it.
A rollout of ``L`` latent frames is generated in chunks of ``chunk`` latents; chunk ``k`` covers latents
``[k*chunk, (k+1)*chunk)``. A policy returns, for chunk ``k``, the *history* latents (all ``< k*chunk``) the chunk
may see, split into ``sink`` / ``recent`` / ``retrieved`` parts; the chunk always sees its own latents too.

* ``fullkv``: all history.
* ``sliding``: the first ``sink`` latents plus the ``recent`` most recent ones (defaults 4 + 12, + 4 current).
* ``fov``: ``sink`` + ``recent`` + ``retrieved_chunks`` whole historical chunks chosen by field-of-view overlap
  with the current chunk's cameras (defaults 4 + 4 + 2x4, + 4 current). Retrieval looks only at chunks outside
  the sink and the recent window.
* ``native``: the model's built-in memory mode (what the paper's main table uses for most models); the harness
  does not restrict the context, so the selection lists all history as available.

Poses follow :mod:`trajectories.conventions` (OpenCV camera-to-world, world = camera frame of frame 0, positive
yaw turns right, positive pitch turns up); intrinsics in pixels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, field
from typing import Annotated, Any, ClassVar, Literal, Union

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, StrictInt
from pydantic.dataclasses import dataclass

from harness.errors import UserError
from harness.sections import Fix, Section

from .fov import ContextConfigError, FovOverlap, FovScoreConfig
from .trace import ChunkTrace

#: the policies the harness runs (the kinds of :data:`ContextKind`, ``paper`` aside: it names one of them)
PolicyName = Literal["fullkv", "sliding", "fov", "native"]
POLICY_NAMES: tuple[str, ...] = tuple(PolicyName.__args__)  # type: ignore[attr-defined]  # a Literal's values

#: latents: an integer >= 0 (a YAML ``yes`` is Python's ``True``, an int: kept as given)
_Latents = Annotated[Union[StrictInt, StrictBool], Field(ge=0), Fix("must be an integer >= 0")]
_CONFIG = ConfigDict(extra="forbid")


def _default_if_none(value: Any) -> Any:
    """``fov: null`` in a policy file: the estimator's defaults."""
    return {} if value is None else value


@dataclass(frozen=True, config=_CONFIG)
class ContextPolicy(Section):
    """A KV-context policy (what ``conf/context/<name>.yaml`` holds). Budgets are in latent frames.

    The kinds (:class:`FullKV`, :class:`Sliding`, :class:`Fov`, :class:`Native`) fix ``name`` and add their own
    rules; :meth:`from_dict` reads a mapping as the kind its ``name`` says (:data:`ContextKind`). Every kind has
    every field, so each records the same dict (``to_dict``: fingerprints, ``meta.json``).

    Attributes:
        name: ``fullkv``, ``sliding``, ``fov`` or ``native``.
        chunk: latents generated per chunk (the "current" budget), >= 1.
        sink: first latents that are never evicted (sliding, fov).
        recent: most recent history latents kept (sliding, fov).
        retrieved_chunks: whole historical chunks retrieved by FoV overlap (fov: >= 1).
        fov: the overlap estimator's settings (fov).
        rope: how retrieved keys are positioned at tensor level: ``absolute`` (cached at their frame index,
            LingBot style) or ``rebase`` (moved just before the recent window, WorldKV style).
    """

    section: ClassVar[str] = "context"
    error: ClassVar[type[UserError]] = ContextConfigError
    noun: ClassVar[str] = "field"
    fix: ClassVar[str] = "choose a policy: context=fullkv|sliding|fov|native|paper"
    ignored: ClassVar[tuple[str, ...]] = ("description",)

    name: PolicyName
    chunk: Annotated[Union[StrictInt, StrictBool], Field(ge=1), Fix("must be an integer >= 1 (latents per chunk)")] = 4
    sink: _Latents = 0
    recent: _Latents = 0
    retrieved_chunks: _Latents = 0
    fov: Annotated[FovScoreConfig, BeforeValidator(_default_if_none)] = field(default_factory=FovScoreConfig)
    rope: Annotated[Literal["absolute", "rebase"], Fix("use 'absolute' or 'rebase'")] = "absolute"

    @classmethod
    def schema_type(cls) -> Any:
        """A mapping is read as the kind its ``name`` says."""
        return ContextKind if cls is ContextPolicy else cls

    @property
    def budget(self) -> int | None:
        """Steady-state attended latents including the current chunk (None = unbounded, FullKV)."""
        if self.name in ("fullkv", "native"):
            return None
        return self.sink + self.recent + self.retrieved_chunks * self.chunk + self.chunk

    @property
    def needs_full_history(self) -> bool:
        """Whether latents outside sink + recent may be selected again (so a cache must keep them)."""
        return self.name in ("fullkv", "fov", "native")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, config=_CONFIG)
class FullKV(ContextPolicy):
    """Every chunk attends to the whole history."""

    name: Literal["fullkv"] = "fullkv"


@dataclass(frozen=True, config=_CONFIG)
class Sliding(ContextPolicy):
    """The first ``sink`` latents plus the ``recent`` most recent ones."""

    name: Literal["sliding"] = "sliding"


@dataclass(frozen=True, config=_CONFIG)
class Fov(ContextPolicy):
    """``sink`` + ``recent`` + ``retrieved_chunks`` (>= 1) whole chunks chosen by field-of-view overlap."""

    name: Literal["fov"] = "fov"
    retrieved_chunks: Annotated[Union[StrictInt, StrictBool], Field(ge=1, validate_default=True),
                                Fix("must be >= 1 for the fov policy")] = 0


@dataclass(frozen=True, config=_CONFIG)
class Native(ContextPolicy):
    """The model's built-in memory mode; the harness does not restrict the context."""

    name: Literal["native"] = "native"


@dataclass(frozen=True, config=_CONFIG)
class Paper(ContextPolicy):
    """``context=paper``: the policy of the paper's main table for the chosen model (its ``paper_context``); the run
    configuration replaces it by that policy (``conf/context/<paper_context>.yaml``; :class:`harness.app.run_config.
    RunConfig`), so no item runs it."""

    name: Literal["paper"] = "paper"  # type: ignore[assignment]  # a pointer to one of the four names


#: a ``context`` section: one of the kinds, by its ``name``
ContextKind = Annotated[Union[FullKV, Sliding, Fov, Native, Paper], Field(discriminator="name")]



@dataclasses.dataclass(frozen=True)
class Selection:
    """The context of one chunk: history latents by part, the current latents and the retrieval scores."""

    chunk_index: int
    current: tuple[int, ...]
    sink: tuple[int, ...] = ()
    recent: tuple[int, ...] = ()
    retrieved: tuple[int, ...] = ()
    history: tuple[int, ...] = ()  # fullkv: every earlier latent
    scores: dict[int, float] = field(default_factory=dict)  # candidate chunk index -> FoV overlap

    @property
    def context(self) -> list[int]:
        """Sorted history latents this chunk may attend to (excludes the current chunk)."""
        return sorted(set(self.sink) | set(self.recent) | set(self.retrieved) | set(self.history))

    @property
    def attended(self) -> list[int]:
        """Everything the chunk attends to: context + its own latents, sorted."""
        return sorted(set(self.context) | set(self.current))

    def to_trace(self) -> ChunkTrace:
        """The chunk's record in ``context_trace.json`` (:class:`harness.context.trace.ChunkTrace`)."""
        return {
            "chunk": self.chunk_index,
            "current": list(self.current),
            "context": self.context,
            "sink": list(self.sink),
            "recent": list(self.recent),
            "retrieved": list(self.retrieved),
            "scores": {str(k): round(v, 6) for k, v in sorted(self.scores.items())},
        }


class ContextSelector:
    """Applies a :class:`ContextPolicy` to a rollout's latent poses.

    Args:
        policy: the policy.
        latent_c2w: (L, 4, 4) camera-to-world pose of every latent frame (OpenCV, world = frame 0).
        K: (3, 3) intrinsics in pixels for ``height`` x ``width`` (the FoV test uses the real field of view).
    """

    def __init__(self, policy: ContextPolicy, latent_c2w: np.ndarray, K: np.ndarray, height: int, width: int):
        self.policy = policy
        self.latent_c2w = np.asarray(latent_c2w, dtype=np.float64)
        self.num_latents = int(self.latent_c2w.shape[0])
        self._fov = (
            FovOverlap(K, height, width, policy.fov) if policy.name == "fov" else None
        )

    @property
    def num_chunks(self) -> int:
        return -(-self.num_latents // self.policy.chunk)

    def chunk_latents(self, k: int) -> tuple[int, ...]:
        c = self.policy.chunk
        return tuple(range(k * c, min((k + 1) * c, self.num_latents)))

    def select(self, k: int) -> Selection:
        """Context of chunk ``k``: never a latent ``>= k * chunk`` (nothing from the future)."""
        p = self.policy
        current = self.chunk_latents(k)
        start = current[0]
        if p.name in ("fullkv", "native"):
            return Selection(k, current, history=tuple(range(start)))
        sink = tuple(range(min(p.sink, start)))
        recent = tuple(range(max(len(sink), start - p.recent), start))
        if p.name == "sliding":
            return Selection(k, current, sink=sink, recent=recent)
        # fov: whole chunks strictly between the sink and the recent window are candidates
        lo, hi = len(sink), recent[0] if recent else start
        cands = [j for j in range(self.num_chunks) if j * p.chunk >= lo and (j + 1) * p.chunk <= hi]
        if not cands:  # no whole chunk fits between the sink and the recent window: nothing to retrieve (a partial
            # gap, possible only when sink or recent is not a multiple of the chunk, would break the budget)
            return Selection(k, current, sink=sink, recent=recent)
        assert self._fov is not None
        cur_poses = self.latent_c2w[list(current)]
        cand_latents = [list(self.chunk_latents(j)) for j in cands]
        mat = self._fov.overlap_matrix(cur_poses, self.latent_c2w[[i for c in cand_latents for i in c]])
        scores, col = {}, 0
        for j, lats in zip(cands, cand_latents):  # chunk score: mean over (query latent, chunk latent) pairs
            scores[j] = float(mat[:, col : col + len(lats)].mean())
            col += len(lats)
        # Highest overlap first; ties go to the more recent chunk (deterministic).
        best = sorted(cands, key=lambda j: (-scores[j], -j))[: p.retrieved_chunks]
        retrieved = tuple(i for j in sorted(best) for i in self.chunk_latents(j))
        # Latents between the sink and the recent window that do not fill a whole chunk are not retrievable.
        return Selection(k, current, sink=sink, recent=recent, retrieved=retrieved, scores=scores)

    def trace(self) -> list[ChunkTrace]:
        """The context trace of the whole rollout: one entry per chunk."""
        return [self.select(k).to_trace() for k in range(self.num_chunks)]


def fov_selection(policy: ContextPolicy, path: Any, chunk: int, stride: int = 4) -> dict[str, Any]:
    """The per-chunk selection of ``policy`` on the latents an upstream model conditions on, as the JSON document
    its shim reads (``controls/context_selection.json``: HY-WorldPlay, LingBot-World v2's FoV gather).

    Args:
        policy: the harness policy (any of them; the name stems from FoV being the reason shims need it).
        path: a :class:`trajectories.CameraPath` at the model's frame count: ``c2w`` (N, 4, 4) OpenCV c2w,
            ``K`` (3, 3) canvas pixels, ``height`` / ``width``.
        chunk: latents per chunk of the model (recorded; the policy's own ``chunk`` drives the selection).
        stride: temporal VAE stride; latent i carries frame ``stride * i``
            (:func:`trajectories.resample.latent_anchor_frames`).

    The latent count must be a multiple of ``chunk``: upstreams that truncate it time-warp the trajectory, and the
    adapters refuse such frame counts before they get here.
    """
    from trajectories.resample import latent_poses

    latent_c2w = latent_poses(path.c2w, stride)
    lat = len(latent_c2w)
    if lat % chunk:
        raise ContextConfigError(f"{lat} latents are not a multiple of the {chunk}-latent chunk; the model would "
                                 "truncate (time-warp) the trajectory")
    sel = ContextSelector(policy, latent_c2w, path.K, path.height, path.width)
    return {"policy": policy.to_dict(), "num_latents": lat, "chunk": chunk,
            "chunks": [sel.select(k).to_trace() for k in range(sel.num_chunks)]}
