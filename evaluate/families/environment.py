"""Environment memory (paper section 4.4): Visible (global features of the return frame vs frame 0), Depth
(Spearman of depth at corresponding pixels) and Reconstruction (Eq. 6 spherical score).

The return frame of each revisit comes from the first available pose source of ``evaluate.return_frame_poses``
(estimated poses by default, as the paper does with DA3); every entry names its pose and depth source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import memory as mem
from ..perception.base import BackboneUnavailable
from ..registry import Backbones, Chance, Compute, MetricSpec
from ..results import Entries
from .base import Family, entry

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..perceive import ItemPerception


class NoPoseSource(BackboneUnavailable):
    """No configured return-frame pose source is available (-> "not computed" with the reasons)."""


def _returns(item: EvalItem, perception: ItemPerception, settings: EvalConfig) -> dict[str, Any]:
    """The return frame of each revisit from the first available pose source of ``return_frame_poses``
    (:meth:`evaluate.perceive.ItemPerception.return_frames`); raises :class:`NoPoseSource` when none is."""
    r = perception.return_frames(tuple(settings.return_frame_poses))
    if r["source"] is None:
        why = "; ".join(f"{k}: {v}" for k, v in r["reasons"].items())
        raise NoPoseSource(f"no pose source of return_frame_poses={list(settings.return_frame_poses)} is available "
                           f"to select return frames ({why})")
    return r


def _common(r: dict[str, Any]) -> dict[str, Any]:
    return {"return_frames": r["frames"], "return_pose_estimator": r["label"], "pose_source": r["label"],
            "qualification": r["qualification"], "reference_frames": [0]}


def visible(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    r = _returns(item, perception, settings)
    name = backbones["encoder"]
    f = perception.encode(name, [0] + r["frames"])
    # one return frame per revisit window, each against frame 0
    per = np.clip(mem.cosine_to(f[1:], f[0]), 0, 1).tolist()
    return entry("environment.visible", perception.label(name, "encoder"), perception.kind(name), float(np.mean(per)),
                 per_revisit=per, **_common(r))


def _depths(perception: ItemPerception, depth_backbone: str, returns: dict[str, Any]) -> tuple[str, np.ndarray]:
    """(depth label, (1 + K, H, W) depth of frame 0 and of each return frame)."""
    return perception.depth(depth_backbone, [0] + returns["frames"])


def depth_rank(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    r = _returns(item, perception, settings)
    label, d = _depths(perception, backbones["depth"], r)
    sp = [mem.depth_spearman(d[0], d[i + 1], stride=int(settings.depth_stride)) for i in range(item.num_revisits)]
    return entry("environment.depth", label, perception.kind(backbones["depth"]), float(np.mean(sp)), per_revisit=sp,
                 depth_source=label, **_common(r))


def reconstruction(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    r = _returns(item, perception, settings)
    label, d = _depths(perception, backbones["depth"], r)
    _, pe = perception.poses(r["source"])
    ret = r["frames"]
    Hgrid = mem.spherical_grid(d[0], item.intrinsics, pe.c2w[0], settings.sphere_bin_deg)
    rec = [mem.spherical_reconstruction_score(
        Hgrid, mem.spherical_grid(d[i + 1], item.intrinsics, pe.c2w[ret[i]], settings.sphere_bin_deg))
        for i in range(item.num_revisits)]
    return entry("environment.reconstruction", label, perception.kind(backbones["depth"]), float(np.mean(rec)),
                 per_revisit=rec, depth_source=label, **_common(r))


def _is_env(item: EvalItem, settings: EvalConfig) -> bool:
    return item.family == "environment"


#: how the thumbnail chance levels were measured (tests/evaluate/test_measurement_validity.py re-measures them)
UNRELATED = ("measured: the reference set of one demo case against the revisit frames of another (a != b), on the "
             "five demo cases' reference-model FullKV videos at 96x160, LRLR and LRLRLR, 193 and 289 frames "
             "(tests/evaluate/test_measurement_validity.py re-measures it)")

SPECS = (
    MetricSpec("environment.visible", "environment", True, "encoder", True, "global features of the return frame",
               (Compute(visible, ("encoder",), _is_env),), table2="dinov2",
               # centred 16x16 thumbnails: unrelated photos are nearly orthogonal, the clip at 0 keeps the positive half
               chance={"pixel-thumb16": Chance(0.10, 0.11, UNRELATED + "; frame 0 vs the return frames: 0.10 at both "
                                               "lengths")}),
    MetricSpec("environment.depth", "environment", True, "depth", True, "Spearman of depth at the return frame",
               (Compute(depth_rank, ("depth",), _is_env),), table2="da3",
               chance={"*": Chance(0.0, 0.0, "derived: Spearman of independent depth maps")}),
    MetricSpec("environment.reconstruction", "environment", True, "depth", True, "Eq. 6 spherical score",
               (Compute(reconstruction, ("depth",), _is_env),), table2="da3"),
)

FAMILY = Family(
    "environment",
    ("encoders", "depth", "return_frame_poses", "pose_estimators", "memory_stride", "sphere_bin_deg", "depth_stride"),
    SPECS,
)
