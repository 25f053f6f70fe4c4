"""Departure-revisit memory: the ``departure_revisit`` protocol extension (beyond the paper).

The paper's static-memory revisits all return to the conditioning frame. A context policy that keeps a sink (the
first latents, which hold frame 0) therefore passes them whatever else it forgets: on the reference model FullKV,
Sliding and FoV all score about 1. This family scores memory of content first seen *during a departure*: the
reference set is the first departure's away view and each later departure back to that view is a revisit
(:func:`evaluate.protocol.departure_revisit_windows`; LRLR has one, LRLRLR two, LRUD and the square loop none).

Metric ``departure.visible[<encoder>]``: Eq. 4 with global frame features (the features of the paper's Environment
Visible Memory): per revisit, the mean over its frames of ``clip_[0,1](max over reference frames of cos)``, then
Eq. 1 over the K' prescribed departure revisits. Computed from the frames only (no oracle geometry).

Metric ``departure.return_visible[<encoder>]``: the paper's Environment Visible Memory rule with the reference frame
moved from the conditioning frame to the first departure's settled away frame (the last frame of the reference set):
inside each later departure ``D_k`` that comes back to it (the whole phase, sampled every ``memory_stride``), the frame
whose estimated orientation is closest to the reference frame's (first available of ``return_frame_poses``, as the
return frames are picked), then the clipped cosine of global features between the two, averaged over the revisits.

Metric ``departure.sweep_visible[<encoder>]`` (protocol extension ``departure_sweep``,
:func:`evaluate.protocol.departure_sweep_windows`): Eq. 4 with the same global features, the reference set being
every frame of the first departure ``D1`` and each later phase (``R1``, ``D2``, ``R2``, ...) a revisit window of its
frames that look back at D1's views (at least ``departure_deg`` from frame 0), sampled every ``memory_stride``; then
Eq. 1 over those windows. The reference set is not subsampled: Eq. 4's max needs the nearest view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .. import memory as mem
from ..aggregate import rollout_score
from ..protocol import departure_revisit_windows, departure_sweep_windows
from ..registry import Backbones, Chance, Compute, ComputeFn, MetricSpec
from ..results import Entries
from .base import Family, entry
from .environment import UNRELATED

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..perceive import ItemPerception

#: a protocol extension's windows: ``(c2w, phases, tolerance_deg, tolerance_translation, departure_deg) ->
#: (reference frames, revisit windows)`` (:mod:`evaluate.protocol`)
WindowRule = Callable[..., tuple[list[int], list[list[int]]]]

#: The name under which the protocol extension is recorded in every entry.
PROTOCOL = "departure_revisit"
#: The extension behind ``departure.sweep_visible``.
SWEEP_PROTOCOL = "departure_sweep"


def subsample(frames: list[int], stride: int) -> list[int]:
    """Every ``stride``-th frame of ``frames`` plus its last one (the settled view)."""
    out = list(frames[:: max(1, int(stride))])
    if frames and frames[-1] not in out:
        out.append(frames[-1])
    return out


def _windows(item: EvalItem, settings: EvalConfig,
             rule: WindowRule = departure_revisit_windows) -> tuple[list[int], list[list[int]]]:
    """(reference frames, revisit windows) of a protocol-extension ``rule`` on this item, memoised."""
    key = f"departure:{rule.__name__}"
    if key not in item.memo:
        item.memo[key] = rule(item.c2w, item.phases, settings.revisit_tolerance_deg,
                              settings.revisit_tolerance_translation, settings.departure_deg)
    windows: tuple[list[int], list[list[int]]] = item.memo[key]
    return windows


def _eq4_metric(metric_id: str, target: str, protocol: str, rule: WindowRule, subsample_reference: bool) -> ComputeFn:
    """A metric that scores each revisit window of ``rule`` with Eq. 4 against its reference frames (one batched
    encoder call) and averages them with Eq. 1. Revisits are sampled every ``memory_stride``; the reference too when
    ``subsample_reference``."""

    def compute(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
        ref, revisits = _windows(item, settings, rule)
        ref_idx = subsample(ref, settings.memory_stride) if subsample_reference else list(ref)
        rev_idx = [subsample(w, settings.memory_stride) for w in revisits]
        name = backbones["encoder"]
        feats = perception.encode(name, ref_idx + [f for w in rev_idx for f in w])
        ref_feat, at = feats[: len(ref_idx)], len(ref_idx)
        per = []
        for w in rev_idx:
            per.append(mem.revisit_similarity(ref_feat, feats[at: at + len(w)]))
            at += len(w)
        return entry(metric_id, perception.label(name, "encoder"), perception.kind(name),
                     rollout_score({target: per}, len(per)), per_revisit=per, reference_frames=ref_idx,
                     revisit_frames=rev_idx, protocol=protocol)

    return compute


visible = _eq4_metric("departure.visible", "away_view", PROTOCOL, departure_revisit_windows, True)
sweep_visible = _eq4_metric("departure.sweep_visible", "first_departure", SWEEP_PROTOCOL, departure_sweep_windows,
                            False)


def return_visible(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    from ..protocol import departure_windows, window_frames
    from .environment import NoPoseSource

    ref, revisits = _windows(item, settings)
    ref_frame = ref[-1]
    deps = departure_windows(item.phases)[1:]
    # each revisit window is part of one later departure (departure_revisit_windows takes it from that range)
    wins = [window_frames(next(d for d in deps if w[0] in range(*d)), settings.memory_stride) for w in revisits]
    r = perception.frames_closest_to(tuple(settings.return_frame_poses), ref_frame, wins)
    if r["source"] is None:
        why = "; ".join(f"{k}: {v}" for k, v in r["reasons"].items())
        raise NoPoseSource(f"no pose source of return_frame_poses={list(settings.return_frame_poses)} is available "
                           f"to select the departure return frames ({why})")
    name = backbones["encoder"]
    f = perception.encode(name, [ref_frame] + r["frames"])
    per = np.clip(mem.cosine_to(f[1:], f[0]), 0, 1).tolist()  # each window's return frame vs the reference
    return entry("departure.return_visible", perception.label(name, "encoder"), perception.kind(name),
                 rollout_score({"away_view": per}, len(per)), per_revisit=per, reference_frames=[ref_frame],
                 return_frames=r["frames"], return_pose_estimator=r["label"], pose_source=r["label"],
                 return_angle_deg=r["angles_deg"], protocol=PROTOCOL)


def _applies(item: EvalItem, settings: EvalConfig, rule: WindowRule = departure_revisit_windows) -> bool:
    ref, revisits = _windows(item, settings, rule)
    return bool(ref and revisits)


def _sweep_applies(item: EvalItem, settings: EvalConfig) -> bool:
    return _applies(item, settings, departure_sweep_windows)


SPECS = (
    MetricSpec("departure.visible", "departure", True, "encoder", False,
               "protocol extension departure_revisit: Eq. 4 global features + Eq. 1, reference = first away view",
               (Compute(visible, ("encoder",), _applies),), static=True,
               chance={"pixel-thumb16": Chance(0.07, 0.08, UNRELATED + "; Eq. 4, max over the away view: 0.09 at 193 "
                                               "frames, 0.05 at 289")}),
    MetricSpec("departure.return_visible", "departure", True, "encoder", False,
               "protocol extension departure_revisit: Environment Visible's rule (estimated orientation closest to "
               "the reference frame's, clipped cosine of global features), reference = first away view's last frame",
               (Compute(return_visible, ("encoder",), _applies),), static=True,
               chance={"pixel-thumb16": Chance(0.06, 0.08, UNRELATED + "; the away view vs the return frames: 0.08 at "
                                               "193 frames, 0.04 at 289")}),
    MetricSpec("departure.sweep_visible", "departure", True, "encoder", False,
               "protocol extension departure_sweep: Eq. 4 global features + Eq. 1, reference = every frame of the "
               "first departure, revisits = the later phases' frames that look back at its views",
               (Compute(sweep_visible, ("encoder",), _sweep_applies),), static=True,
               # Eq. 4 takes the max over every frame of D1: more reference frames, a higher max by chance
               chance={"pixel-thumb16": Chance(0.15, 0.04, UNRELATED + "; Eq. 4, max over all of D1: 0.16 at 193 "
                                               "frames, 0.15 at 289")}),
)

FAMILY = Family(
    "departure",
    ("encoders", "memory_stride", "revisit_tolerance_deg", "revisit_tolerance_translation", "departure_deg",
     "return_frame_poses", "pose_estimators"),
    SPECS,
)
