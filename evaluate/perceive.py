"""Perceive once, score many: each backbone runs at most once per (video, backbone, perception settings), in one
batched call per request, and its outputs are cached on disk, so a changed *scoring* setting (canvas, bins,
tolerances, aggregation) never re-runs a backbone.

Cache: ``<item>/.eval-cache/<backbone>/<op>-<key>.npz`` where ``key`` hashes the video sha256, the backbone's
provenance (class, weights sha256, its own settings) and the request (frames, mask). A re-encoded video has another
sha256, so stale features are never reused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Optional, overload

import numpy as np

from trajectories.phases import departure

from .backbones import BackboneSet, TimedBackbone, spec
from .item import EvalItem
from .perception.base import BackboneUnavailable, PoseEstimate

if TYPE_CHECKING:
    from .memory import DirectPick

CACHE_DIR = ".eval-cache"
#: a backbone's outputs for one request, by name (what the cache's ``.npz`` holds)
Outputs = dict[str, np.ndarray]



class PerceptionFailed(RuntimeError):
    """A backbone ran but its output is unusable for this item (e.g. non-finite poses); the reason is reported."""


def _key(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _settings_of(inner: object) -> dict[str, int | float | str | bool]:
    """A weight-free backbone's own scalar settings (thresholds, sizes): part of its cache key. Private attributes
    are execution knobs that never change a result (e.g. thread counts), so they are left out."""
    return {k: v for k, v in sorted(vars(inner).items())
            if isinstance(v, (int, float, str, bool)) and not k.startswith("_")}


class ItemPerception:
    """The perception outputs of one item, memoised in memory and on disk.

    Args:
        ctx: the item. backbones: the run's loaded backbones. use_cache: read/write the on-disk cache.
    """

    def __init__(self, ctx: EvalItem, backbones: BackboneSet, use_cache: bool = True):
        self.ctx, self.backbones, self.use_cache = ctx, backbones, use_cache
        self._memo: dict[str, Any] = {}
        self.sources: dict[str, str] = {}

    # -- backbones -------------------------------------------------------------------------------------------------
    def backbone(self, name: str, role: str) -> Any:
        """The backbone bound to this item. Oracles bind to the item's ground truth and exist only where the item
        has one (the reference model)."""
        bb = self.backbones.get(name, role)
        if bb.spec.kind == "oracle":
            if self.ctx.oracle is None:
                raise BackboneUnavailable(f"{name!r} is ground truth that exists only for the built-in reference "
                                          "model")
            mk = f"bind:{name}"
            if mk not in self._memo:
                self._memo[mk] = bb.inner.bind(self.ctx)
            return self._memo[mk]
        return bb

    def _frames(self, bb: Any, idx: Sequence[int]) -> Any:
        """Frames ``idx`` for backbone ``bb``: a view when it reads frames one at a time (``frame_views``), else the
        (N, H, W, 3) uint8 array a batched backbone needs."""
        idx = list(idx)
        if getattr(bb, "frame_views", False):
            return self.ctx.frames_view(idx)
        return self.ctx.frames if idx == list(range(self.ctx.num_frames)) else self.ctx.frames_at(idx)

    def label(self, name: str, role: str) -> str:
        return str(getattr(self.backbone(name, role), "name", name))

    def kind(self, name: str) -> str:
        return spec(name).kind

    def _cached(self, bb: TimedBackbone, op: str, request: Any, compute: Callable[[], Outputs]) -> Outputs:
        """``compute()``'s outputs for ``request`` to backbone ``bb`` (a loaded one, not an oracle), from memory or
        the item's on-disk cache when this video, backbone (provenance, settings) and request were seen before."""
        name = bb.spec.name
        prov = bb.provenance
        key = _key([self.ctx.video_sha, prov, _settings_of(bb.inner), op, request])
        mk = f"{name}:{op}:{key}"
        if mk in self._memo:
            hit: Outputs = self._memo[mk]
            return hit
        path = self.ctx.dir / CACHE_DIR / name / f"{op}-{key}.npz"
        if self.use_cache:
            try:  # a missing file is the usual miss
                with np.load(path) as z:
                    out = {k: z[k] for k in z.files}
                self._memo[mk] = out
                return out
            except (OSError, ValueError):
                pass  # no file yet, or a damaged one: computed (again)
        out = compute()
        if self.use_cache:
            from harness.io import atomic_path

            with atomic_path(path, suffix=".npz") as tmp:
                np.savez(str(tmp), **out)  # type: ignore[arg-type]  # to mypy a key could be allow_pickle (bool)
        self._memo[mk] = out
        return out

    # -- perception requests ---------------------------------------------------------------------------------------
    def poses(self, name: str) -> tuple[str, PoseEstimate]:
        """(label, estimate over every frame 0..T-1). Raises :class:`PerceptionFailed` on non-finite poses."""
        ctx = self.ctx
        est = self.backbone(name, "pose")
        if self.kind(name) == "oracle":
            pe = est.estimate(ctx.frames, list(range(ctx.num_frames)), ctx.intrinsics, ctx.pose_mode)
        else:
            def run() -> Outputs:  # a frame_views estimator starts on the first frames while the rest decode
                pe = est.estimate(self._frames(est, range(ctx.num_frames)), list(range(ctx.num_frames)),
                                  ctx.intrinsics, ctx.pose_mode)
                return {"c2w": np.asarray(pe.c2w, np.float64), "valid": np.asarray(pe.valid, bool)}

            z = self._cached(est, "poses", {"mode": ctx.pose_mode, "K": ctx.intrinsics.round(6).tolist()}, run)
            pe = PoseEstimate(z["c2w"], z["valid"], {})
        bad = [int(i) for i in np.flatnonzero(~np.isfinite(pe.c2w).all(axis=(1, 2)))]
        if bad:
            raise PerceptionFailed(f"pose estimator {name!r} returned non-finite poses at frames {bad[:10]}"
                                   f"{' ...' if len(bad) > 10 else ''}")
        if pe.c2w.shape != (ctx.num_frames, 4, 4):
            raise PerceptionFailed(f"pose estimator {name!r} returned {pe.c2w.shape}, expected ({ctx.num_frames}, 4, 4)")
        return str(getattr(est, "name", name)), pe

    def depth(self, name: str, frames: list[int]) -> tuple[str, np.ndarray]:
        """(label, (N, H, W) float z-depth at ``frames``), one batched call."""
        dep = self.backbone(name, "depth")
        if self.kind(name) == "oracle":
            d = dep.depth(self._frames(dep, frames), list(frames))
        else:
            d = self._cached(dep, "depth", {"frames": list(frames)}, lambda: {
                "d": np.asarray(dep.depth(self._frames(dep, frames), list(frames)), np.float32)})["d"]
        return str(getattr(dep, "name", name)), np.asarray(d)

    def track(self, name: str, target: str, init_mask: np.ndarray,
              frames: list[int]) -> tuple[str, dict[int, tuple[np.ndarray, bool]]]:
        """(label, {frame: (mask (H, W) bool, valid bool)}) for the target given its frame-0 mask; ``frames`` must
        start at frame 0."""
        ctx = self.ctx
        tr = self.backbone(name, "tracker")
        mkey = hashlib.sha256(np.packbits(init_mask).tobytes()).hexdigest()[:16]

        def run() -> Outputs:
            masks, valid = tr.track(self._frames(tr, frames), init_mask)
            return {"masks": np.packbits(np.asarray(masks, bool), axis=-1), "valid": np.asarray(valid, bool)}

        z = self._cached(tr, "track", {"target": target, "mask": mkey, "frames": list(frames)}, run)
        masks = np.unpackbits(z["masks"], axis=-1, count=ctx.width).view(bool)  # 0/1 bytes: a view, not a copy
        return str(getattr(tr, "name", name)), {f: (masks[i], bool(z["valid"][i])) for i, f in enumerate(frames)}

    @overload
    def encode(self, name: str, frames: list[int], masks: np.ndarray | None = None,
               role: Literal["encoder"] = "encoder") -> np.ndarray: ...

    @overload
    def encode(self, name: str, frames: list[int], masks: np.ndarray | None,
               role: Literal["face"]) -> tuple[np.ndarray, np.ndarray]: ...

    def encode(self, name: str, frames: list[int], masks: Optional[np.ndarray] = None,
               role: str = "encoder") -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """(N, D) features of ``frames`` (inside ``masks`` when given), one batched call; for the face role
        ((N, D) embeddings, (N,) bool: a face was found)."""
        enc = self.backbone(name, role)
        mkey = hashlib.sha256(np.packbits(masks).tobytes()).hexdigest()[:16] if masks is not None else None
        if role == "face":
            def run() -> Outputs:
                faces = enc.embed(self._frames(enc, frames), masks)  # a FaceEmbedding (evaluate/perception/base.py)
                return {"f": np.asarray(faces.embeddings, np.float32), "valid": np.asarray(faces.valid, bool)}
        else:
            def run() -> Outputs:
                return {"f": np.asarray(enc.encode(self._frames(enc, frames), masks))}
        z = self._cached(enc, role, {"frames": list(frames), "masks": mkey}, run)
        return (z["f"], z["valid"]) if role == "face" else z["f"]

    def score(self, name: str, role: str, frames: list[int]) -> np.ndarray:
        """(N,) per-frame quality in [0, 1] (imaging / aesthetic), one batched call."""
        q = self.backbone(name, role)
        return self._cached(q, role, {"frames": list(frames)},
                            lambda: {"s": np.asarray(q.score(self._frames(q, frames)), np.float64)})["s"]

    # -- shared protocol decisions ---------------------------------------------------------------------------------
    def frames_closest_to(self, pose_sources: tuple[str, ...], ref: int, windows: list[list[int]]) -> dict[str, Any]:
        """Per window: the frame whose estimated orientation is closest to frame ``ref``'s (Environment Visible's
        rule with another reference frame), from the first *available* source of ``pose_sources``, as
        :meth:`return_frames` does for frame 0: an estimator with a direct angle (``angles_to``) measures it against
        ``ref`` (the chained estimate where no frame of the window fits), else the chained estimate. Returns
        ``{source, label, frames, angles_deg, reasons}`` (source None when no source is available)."""
        from . import memory as mem

        reasons: dict[str, str] = {}
        for name, label, pe in self._available_poses(pose_sources, reasons):
            picks = [mem.return_frame(w, pe.c2w, int(ref), self._direct_pick(name, int(ref), w, False))
                     for w in windows]
            return {"source": name, "label": label, "frames": [j for j, _ in picks],
                    "angles_deg": [e for _, e in picks], "reasons": reasons}
        return {"source": None, "label": None, "frames": [None] * len(windows), "angles_deg": [], "reasons": reasons}

    def _available_poses(self, pose_sources: tuple[str, ...],
                         reasons: dict[str, str]) -> Iterator[tuple[str, str, PoseEstimate]]:
        """Yield ``(name, label, PoseEstimate)`` for each source of ``pose_sources`` whose backbone is available, in
        order; an unavailable one is recorded in ``reasons`` (name -> why) and skipped."""
        for name in pose_sources:
            try:
                label, pe = self.poses(name)
            except BackboneUnavailable as exc:
                reasons[name] = str(exc)
                continue
            yield name, label, pe

    def _direct_pick(self, name: str, ref: int, window: list[int], by_position: bool) -> DirectPick:
        """The frame of ``window`` the estimator measures directly against frame ``ref`` (no chaining), as
        :data:`evaluate.memory.DirectPick`: by orientation (``angles_to``: the frame with the smallest angle, and
        that angle in degrees), by position (``parallax_to``, against frame 0: the frame with the least translation
        parallax, no angle). None where the estimator has no such measure or no frame of the window fits.

        By orientation, an estimator with a ``direct_margin_deg`` (not None) measures only the frames whose chained
        angle to ``ref`` is within that margin of the window's smallest chained angle (:meth:`_direct_angles`)."""
        q = self.backbone(name, "pose")
        direct = getattr(q, "parallax_to" if by_position else "angles_to", None)
        if direct is None or not window:
            return None
        if by_position:
            m = self._direct_values(q, direct, "parallax_to_0", "p", 0, window)
        else:
            m = self._direct_angles(name, q, direct, int(ref), window)
        if not np.isfinite(m).any():
            return None
        j = int(window[int(np.argmin(m))])
        return (j, None) if by_position else (j, float(np.min(m)))

    def _direct_values(self, q: Any, direct: Callable[..., Any], op: str, key: str, ref: int,
                       frames: list[int]) -> np.ndarray:
        """(len(frames),) float64: ``direct(frame ref, frames, K)``, cached per (op, frames)."""
        ctx = self.ctx
        view = self._frames(q, frames)
        return np.asarray(self._cached(q, op, {"frames": list(frames)}, lambda: {key: np.asarray(
            direct(ctx.frames[ref], view, ctx.intrinsics), np.float64)})[key], np.float64)

    def _direct_angles(self, name: str, q: Any, direct: Callable[..., Any], ref: int, window: list[int]) -> np.ndarray:
        """(len(window),) direct angles (degrees) of ``window``'s frames to frame ``ref``; ``inf`` where a frame does
        not fit or was not measured.

        Why a margin: a direct fit costs an ORB match and a RANSAC per frame, and the frames of a return window that
        still look far away (most of the sweep back) cost the most (few inliers: RANSAC runs all its iterations) and
        are never the closest. With ``direct_margin_deg = M`` only the frames whose chained angle is within ``M`` of
        the window's smallest chained angle are measured. A frame left out has a chained angle at least ``M`` above
        the chained-closest frame's, so it cannot be closer unless the chained estimate is off from the direct one by
        more than ``M / 2`` on it or on that frame. That is checked on the measured frames (and assumed of the frames
        left out, whose chained estimate drifts from theirs only over the window's few seconds). The rest of the
        window is measured too where that check fails, where no measured frame fits (a chained estimate gone astray:
        the frames the direct fit would rescue it with may be among those left out), or where ``M`` is None."""
        op = f"angles_to_{ref}"
        margin = getattr(q, "direct_margin_deg", None)
        if margin is None:
            return self._direct_values(q, direct, op, "a", ref, window)
        from trajectories.conventions import geodesic_angle

        _, pe = self.poses(name)
        chained = np.degrees(geodesic_angle(pe.c2w[ref][None, :3, :3], pe.c2w[list(window), :3, :3]))
        near = chained <= chained.min() + float(margin)
        out = np.full(len(window), np.inf)
        out[near] = self._direct_values(q, direct, op, "a", ref, [f for f, n in zip(window, near) if n])
        fits = np.isfinite(out)
        if not near.all() and (not fits.any() or np.abs(out[fits] - chained[fits]).max() > float(margin) / 2):
            out[~near] = self._direct_values(q, direct, op, "a", ref, [f for f, n in zip(window, near) if not n])
        return out

    def return_frames(self, pose_sources: tuple[str, ...]) -> dict[str, Any]:
        """Per prescribed revisit: the frame whose estimated orientation (a translating path: camera centre) is
        closest to frame 0's, with the departure angle and the return error of the estimate (appendix G.1), from
        the first *available* source of ``pose_sources``. A source that is available but fails is an error, not a
        reason to fall back. Returns ``{source, label, frames, qualification}`` (source None when none is available,
        with ``reasons``)."""
        mk = f"return_frames:{pose_sources}"
        if mk in self._memo:
            memo: dict[str, Any] = self._memo[mk]
            return memo
        from . import memory as mem

        ctx = self.ctx
        reasons: dict[str, str] = {}
        out: dict[str, Any] = {"source": None, "label": None, "frames": [None] * ctx.num_revisits, "qualification": []}
        for name, label, pe in self._available_poses(pose_sources, reasons):
            phases = [ctx.phases.get(departure(k + 1)) for k in range(len(ctx.rev_idx))]
            departures = [[f for f in ctx.sample_idx if d and d[0] <= f < d[1]] for d in phases]
            direct = [self._direct_pick(name, 0, w, ctx.translates) for w in ctx.rev_idx]
            frames, qual = mem.return_qualification(pe.c2w, ctx.rev_idx, departures, direct, ctx.translates)
            out = {"source": name, "label": label, "frames": frames, "qualification": qual}
            break
        out["reasons"] = reasons
        self._memo[mk] = out
        return out
