"""Validity: each estimator judged against ground truth on the built-in reference model.

Oracle geometry (the reference model's exact path and room depth) never scores a video; it tells how far each
estimator is from the truth, which is what bounds every metric that uses that estimator:

* poses: RPE_trans (Eq. 2, when the path translates) and RPE_rot (Eq. 3) of each estimator against the true path,
  over adjacent frames;
* return frames: the true orientation error (degrees) of the return frame each pose source selected, and on a
  translating path its camera-centre error relative to the path's extent;
* depth: rank error = 1 - Spearman(true depth, estimated depth) over frame 0 and the return frames (all pixels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import camera as cam
from . import memory as mem
from .perception.base import BackboneUnavailable
from .results import ItemResult

if TYPE_CHECKING:
    from .config import EvalConfig
    from .item import EvalItem
    from .perceive import ItemPerception

# Bump when what the validity section computes changes: it is recomputed on re-runs (3: parallax return frames).
VALIDITY_VERSION = 3


def item_validity(ctx: EvalItem, perc: ItemPerception, ecfg: EvalConfig) -> dict[str, Any]:
    """``{"poses": {label: {...}}, "return_frames": {...}, "depth": {label: {...}}}`` for an item with ground truth;
    estimators that are unavailable are listed with the reason; failures are recorded, never raised."""
    if ctx.oracle is None:
        return {}
    from trajectories.conventions import geodesic_angle

    truth = ctx.oracle.c2w
    out: dict[str, Any] = {"truth": "oracle (reference model path and room depth)", "poses": {}, "depth": {},
                           "not_available": {}}
    for name in ecfg.pose_estimators:
        try:
            label, pe = perc.poses(name)
        except BackboneUnavailable as exc:
            out["not_available"][name] = str(exc)
            continue
        except Exception as exc:  # recorded, the rest goes on
            out["poses"][name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
            continue
        row = {"estimator": label, "kind": perc.kind(name),
               "rpe_rot": cam.rpe_rotation(truth, pe.c2w)}
        if ctx.translates:
            row["rpe_trans"] = cam.rpe_translation(truth, {label: pe.c2w})
        out["poses"][label] = row
    try:
        r = perc.return_frames(tuple(ecfg.return_frame_poses))
    except Exception as exc:
        r = {"source": None, "reasons": {"error": str(exc)}}
    if r.get("source") is not None:
        err = [float(np.degrees(geodesic_angle(truth[0, :3, :3], truth[j, :3, :3]))) for j in r["frames"]]
        out["return_frames"] = {"pose_source": r["label"], "frames": r["frames"], "true_error_deg": err,
                                "estimated_error_deg": [q["return_error_deg"] for q in r["qualification"]]}
        if ctx.translates:  # a translation loop returns in position: the camera-centre error, relative to the extent
            extent = max(float(np.ptp(truth[:, :3, 3], axis=0).max()), 1e-12)
            out["return_frames"]["true_position_error"] = [
                float(np.linalg.norm(truth[j, :3, 3] - truth[0, :3, 3]) / extent) for j in r["frames"]]
        frames = [0] + list(r["frames"])
        true_d = None  # rendered only when some depth estimator is there to be judged against it
        for name in ecfg.depth:
            try:
                label, d = perc.depth(name, frames)
            except BackboneUnavailable as exc:
                out["not_available"][name] = str(exc)
                continue
            except Exception as exc:
                out["depth"][name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
                continue
            if true_d is None:
                _, true_d = perc.depth("oracle", frames)
            rho = [mem.depth_spearman(true_d[i], d[i], stride=1) for i in range(len(frames))]
            out["depth"][label] = {"frames": frames, "rank_error": float(1 - np.nanmean(rho)), "spearman": rho}
    return out


def validity_table(results: Sequence[ItemResult]) -> tuple[list[dict[str, Any]], str]:
    """Rows (model, estimator, quantity, mean, max, n) over the items' validity sections and a Markdown section."""
    acc: dict[tuple[str, str, str, str], list[float]] = {}
    for r in results:
        v = r.validity
        model = str(r.item.get("model", "?"))
        for label, row in (v.get("poses") or {}).items():
            for q in ("rpe_trans", "rpe_rot"):
                if q in row and row[q] is not None and np.isfinite(row[q]):
                    acc.setdefault((model, "pose", label, q), []).append(float(row[q]))
        rf = v.get("return_frames")
        if rf:
            acc.setdefault((model, "return frame", rf["pose_source"], "true error [deg]"), []).extend(
                rf["true_error_deg"])
            if "true_position_error" in rf:
                acc.setdefault((model, "return frame", rf["pose_source"], "true position error [/ extent]"),
                               []).extend(rf["true_position_error"])
        for label, row in (v.get("depth") or {}).items():
            if "rank_error" in row:
                acc.setdefault((model, "depth", label, "rank error (1 - Spearman)"), []).append(row["rank_error"])
    rows = [{"model": k[0], "what": k[1], "estimator": k[2], "quantity": k[3], "mean": float(np.mean(v)),
             "max": float(np.max(v)), "n": len(v)} for k, v in sorted(acc.items())]
    lines = ["# Validity: estimators against ground truth (reference model)", "",
             "Ground truth is the reference model's own path and room depth. It never scores a video; these rows say "
             "how far each estimator used by the metric tables is from the truth.", ""]
    if rows:
        lines += ["| model | what | estimator | quantity | mean | max | n |", "| --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['model']} | {r['what']} | {r['estimator']} | {r['quantity']} | {r['mean']:.4f} | "
                  f"{r['max']:.4f} | {r['n']} |" for r in rows]
    else:
        lines.append("(no item of this run has ground truth: validity needs the built-in reference model)")
    return rows, "\n".join(lines) + "\n"
