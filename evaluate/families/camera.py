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

import numpy as np

from .. import camera as formulas
from ..perception.base import BackboneUnavailable
from ..results import Status
from . import Entries, Family, Metric, entry, missing

NOT_TRANSLATING = ("not applicable: the target path does not translate (rotation-only trajectory); Eq. 2 normalises "
                   "the target to unit path length, which is undefined for a zero-length path")


def _ids(ecfg) -> tuple[str, str]:
    s = "" if int(ecfg.rpe_stride) == 1 else "_strided"
    return f"camera.rpe_trans{s}", f"camera.rpe_rot{s}"


def _frames(ctx, ecfg) -> list[int]:
    return list(range(0, ctx.num_frames, int(ecfg.rpe_stride)))


def _info(ctx, ecfg, pe) -> dict:
    fr = _frames(ctx, ecfg)
    failed = [f for f in fr[1:] if not pe.valid[f]] if int(ecfg.rpe_stride) == 1 else \
        [f for f in range(1, ctx.num_frames) if not pe.valid[f]]
    return {"stride": int(ecfg.rpe_stride), "steps": len(fr) - 1, "valid_steps": len(fr) - 1 - len(failed),
            "failed_steps_at_frames": failed[:50]}


def per_estimator(ctx, perc, ecfg, bb) -> Entries:
    trans_id, rot_id = _ids(ecfg)
    name = bb["pose"]
    label, pe = perc.poses(name)
    kind = perc.kind(name)
    fr = _frames(ctx, ecfg)
    target, est = ctx.c2w[fr], pe.c2w[fr]
    info = {**_info(ctx, ecfg, pe), "pose_source": label}
    out: Entries = {}
    if ctx.translates:
        det: dict = {}
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


def paper_trans(ctx, perc, ecfg, bb) -> Entries:
    """Eq. 2: the mean over the configured estimators (each Sim(3)-aligned to the unit-length target)."""
    trans_id, _ = _ids(ecfg)
    names = list(ecfg.rpe_trans_estimators)
    tag = "+".join(names)
    if not ctx.translates:
        return missing(trans_id, "", NOT_TRANSLATING, status=Status.NOT_APPLICABLE)
    ests, reasons = {}, []
    for n in names:
        try:
            label, pe = perc.poses(n)
        except BackboneUnavailable as exc:
            reasons.append(str(exc))
            continue
        ests[label] = pe.c2w[_frames(ctx, ecfg)]
    if reasons:
        return missing(trans_id, "", f"Eq. 2 averages {tag}; not available: " + " | ".join(reasons))
    det: dict = {}
    v = formulas.rpe_translation(ctx.c2w[_frames(ctx, ecfg)], ests, det)
    per = {k: d["rpe_trans"] for k, d in det.items() if isinstance(d, dict)}
    return entry(trans_id, "", "paper", v, estimators=names, per_estimator=per, stride=int(ecfg.rpe_stride))


def paper_rot(ctx, perc, ecfg, bb) -> Entries:
    """Eq. 3 with the configured rotation estimator (paper: DA3)."""
    _, rot_id = _ids(ecfg)
    name = ecfg.rpe_rot_estimator
    try:
        label, pe = perc.poses(name)
    except BackboneUnavailable as exc:
        return missing(rot_id, "", f"Eq. 3 uses {name}: {exc}")
    fr = _frames(ctx, ecfg)
    v = formulas.rpe_rotation(ctx.c2w[fr], pe.c2w[fr])
    if not np.isfinite(v):
        return missing(rot_id, "", "not applicable: the target does not rotate (Eq. 3 is undefined)",
                       status=Status.NOT_APPLICABLE)
    return entry(rot_id, "", "paper", v, estimator=name, pose_source=label, stride=int(ecfg.rpe_stride))


FAMILY = Family(
    "camera",
    ("pose_estimators", "rpe_trans_estimators", "rpe_rot_estimator", "rpe_stride"),
    (Metric("camera.rpe_trans", (), paper_trans), Metric("camera.rpe_rot", (), paper_rot),
     Metric("camera.rpe", ("pose",), per_estimator, reports=("camera.rpe_trans", "camera.rpe_rot"))),
)
