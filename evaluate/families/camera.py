"""Camera following (paper section 4.3): Eq. 2 and Eq. 3 over adjacent frames t = 0..T-2 of the whole video.

* ``camera.rpe_trans[<estimator>]`` / ``camera.rpe_rot[<estimator>]``: one value per configured pose estimator;
* ``camera.rpe_trans``: Eq. 2, the mean over ``evaluate.rpe_trans_estimators`` (paper: DA3 and ViPE), computed only
  when every one of them is available (otherwise "not computed", naming the missing ones);
* ``camera.rpe_rot``: Eq. 3 with ``evaluate.rpe_rot_estimator`` (paper: DA3 only).

A rotation-only target has no path length to normalise (Eq. 2's unit-length target is undefined), so translation
RPE is "not applicable" there, with the reason. ``evaluate.rpe_stride`` > 1 is a named, non-paper variant: its
values are reported as ``camera.rpe_trans_strided`` / ``camera.rpe_rot_strided`` with the stride recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import camera as formulas
from ..perception.base import BackboneUnavailable, PoseEstimate
from ..registry import Backbones, Compute, ComputedBy, MetricSpec
from ..results import Entries, Status
from .base import Family, entry, missing

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..perceive import ItemPerception

NOT_TRANSLATING = ("not applicable: the target path does not translate (rotation-only trajectory); Eq. 2 normalises "
                   "the target to unit path length, which is undefined for a zero-length path")


def _ids(settings: EvalConfig) -> tuple[str, str]:
    s = "" if int(settings.rpe_stride) == 1 else "_strided"
    return f"camera.rpe_trans{s}", f"camera.rpe_rot{s}"


def _frames(item: EvalItem, settings: EvalConfig) -> list[int]:
    return list(range(0, item.num_frames, int(settings.rpe_stride)))


def _info(item: EvalItem, settings: EvalConfig, estimate: PoseEstimate) -> dict[str, Any]:
    fr = _frames(item, settings)
    failed = [f for f in fr[1:] if not estimate.valid[f]] if int(settings.rpe_stride) == 1 else \
        [f for f in range(1, item.num_frames) if not estimate.valid[f]]
    return {"stride": int(settings.rpe_stride), "steps": len(fr) - 1, "valid_steps": len(fr) - 1 - len(failed),
            "failed_steps_at_frames": failed[:50]}


def per_estimator(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    """Eq. 2 and Eq. 3 with one pose estimator (``backbones["pose"]``): ``camera.rpe_trans[<estimator>]`` and
    ``camera.rpe_rot[<estimator>]``."""
    trans_id, rot_id = _ids(settings)
    name = backbones["pose"]
    label, pe = perception.poses(name)
    kind = perception.kind(name)
    fr = _frames(item, settings)
    target, est = item.c2w[fr], pe.c2w[fr]
    info = {**_info(item, settings, pe), "pose_source": label}
    out: Entries = {}
    if item.translates:
        det: dict[str, Any] = {}
        rt = formulas.rpe_translation(target, {label: est}, det)
        out.update(entry(trans_id, label, kind, rt, alignment=det.get(label, {}).get("alignment"), **info))
    else:
        out.update(missing(trans_id, label, NOT_TRANSLATING, status=Status.NOT_APPLICABLE))
    rr = formulas.rpe_rotation(target, est)
    if np.isfinite(rr):
        out.update(entry(rot_id, label, kind, rr, **info))
    else:
        out.update(missing(rot_id, label, "not applicable: the target does not rotate (Eq. 3 is undefined)",
                           status=Status.NOT_APPLICABLE))
    return out


def paper_trans(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    """Eq. 2: the mean over the configured estimators (each Sim(3)-aligned to the unit-length target)."""
    trans_id, _ = _ids(settings)
    names = list(settings.rpe_trans_estimators)
    tag = "+".join(names)
    if not item.translates:
        return missing(trans_id, "", NOT_TRANSLATING, status=Status.NOT_APPLICABLE)
    ests, reasons = {}, []
    for n in names:
        try:
            label, pe = perception.poses(n)
        except BackboneUnavailable as exc:
            reasons.append(str(exc))
            continue
        ests[label] = pe.c2w[_frames(item, settings)]
    if reasons:
        return missing(trans_id, "", f"Eq. 2 averages {tag}; not available: " + " | ".join(reasons))
    det: dict[str, Any] = {}
    v = formulas.rpe_translation(item.c2w[_frames(item, settings)], ests, det)
    per = {k: d["rpe_trans"] for k, d in det.items() if isinstance(d, dict)}
    return entry(trans_id, "", "paper", v, estimators=names, per_estimator=per, stride=int(settings.rpe_stride))


def paper_rot(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    """Eq. 3 with the configured rotation estimator (paper: DA3)."""
    _, rot_id = _ids(settings)
    name = settings.rpe_rot_estimator
    try:
        label, pe = perception.poses(name)
    except BackboneUnavailable as exc:
        return missing(rot_id, "", f"Eq. 3 uses {name}: {exc}")
    fr = _frames(item, settings)
    v = formulas.rpe_rotation(item.c2w[fr], pe.c2w[fr])
    if not np.isfinite(v):
        return missing(rot_id, "", "not applicable: the target does not rotate (Eq. 3 is undefined)",
                       status=Status.NOT_APPLICABLE)
    return entry(rot_id, "", "paper", v, estimator=name, pose_source=label, stride=int(settings.rpe_stride))


_STRIDED = ("written by the camera computations instead of the paper id when evaluate.rpe_stride > 1 (the stride is "
            "recorded)")

SPECS = (
    MetricSpec("camera.rpe_trans", "camera", False, "pose", True,
               "Eq. 2, adjacent frames, Sim(3)-aligned, unit-length target; [e] per estimator, bare = mean over "
               "rpe_trans_estimators", (Compute(paper_trans),), table2="", resolution=0.005),
    MetricSpec("camera.rpe_rot", "camera", False, "pose", True,
               "Eq. 3, adjacent frames, accumulated angle error / target angle; bare = rpe_rot_estimator",
               # the per-estimator computation writes both metrics' [<estimator>] keys, after the two bare ones
               (Compute(paper_rot), Compute(per_estimator, ("pose",), reports=("camera.rpe_trans", "camera.rpe_rot"))),
               table2="", resolution=0.005),
    MetricSpec("camera.rpe_trans_strided", "camera", False, "pose", False,
               "Eq. 2 on every rpe_stride-th frame (a named non-paper variant)",
               ComputedBy("camera.rpe_trans", _STRIDED)),
    MetricSpec("camera.rpe_rot_strided", "camera", False, "pose", False,
               "Eq. 3 on every rpe_stride-th frame (a named non-paper variant)",
               ComputedBy("camera.rpe_rot", _STRIDED)),
)

FAMILY = Family("camera", ("pose_estimators", "rpe_trans_estimators", "rpe_rot_estimator", "rpe_stride"), SPECS)
