"""Camera following (WorldMemBench section 4.3): Sim(3)/Umeyama alignment and the two relative pose errors.

Poses are OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward), world = camera frame of frame 0,
positive yaw turns right, positive pitch turns up (see :mod:`trajectories.conventions`). Estimates from tools that
output world-to-camera (DA3, COLMAP) must be inverted before they reach these functions.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from trajectories.conventions import geodesic_angle, w2c_from_c2w


def umeyama_sim3(src: np.ndarray, dst: np.ndarray, with_scale: bool = True) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity with ``dst ≈ s · R · src + t`` (Umeyama 1991), reflection-safe.

    Args:
        src, dst: (N, 3) corresponding points (camera centres). with_scale: False fixes ``s = 1`` (SE(3)).
    Returns:
        (s, R (3,3), t (3,)). With a degenerate ``src`` (zero variance) the scale is 1 and R the identity.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs = src - mu_s
    var_s = float((xs**2).sum() / len(src))
    if var_s < 1e-18:
        return 1.0, np.eye(3), mu_d - mu_s
    # the cross-covariance of the centred points: xs's columns sum to 0, so centring dst as well adds nothing
    cov = dst.T @ xs / len(src)
    U, D, Vt = np.linalg.svd(cov)
    S = np.eye(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        S[2, 2] = -1.0  # the reflection fix
    R = U @ S @ Vt
    s = float(np.trace(np.diag(D) @ S) / var_s) if with_scale else 1.0
    t = mu_d - s * R @ mu_s
    return s, R, t


def apply_sim3(c2w: np.ndarray, s: float, R: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Apply a similarity to poses: orientations ``R · R_i``, centres ``s · R · p_i + t``."""
    out = np.array(c2w, dtype=np.float64, copy=True)
    out[:, :3, :3] = R[None] @ out[:, :3, :3]
    out[:, :3, 3] = s * out[:, :3, 3] @ R.T + t
    return out


def path_length(c2w: np.ndarray) -> float:
    """Length of the camera-centre polyline."""
    return float(np.linalg.norm(np.diff(np.asarray(c2w)[:, :3, 3], axis=0), axis=1).sum())


def align_to_target(target: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Sim(3)-align an estimate to the target on camera centres; SE(3) when the target centres are degenerate
    (pure rotation: the scale is unobservable and a Sim(3) fit would collapse the estimate to a point)."""
    degenerate = np.ptp(target[:, :3, 3], axis=0).max() < 1e-12
    s, R, t = umeyama_sim3(estimate[:, :3, 3], target[:, :3, 3], with_scale=not degenerate)
    return apply_sim3(estimate, s, R, t), {"alignment": "se3" if degenerate else "sim3", "scale": s}


def _relative(c2w: np.ndarray) -> np.ndarray:
    """Adjacent motions ``Q_t^-1 Q_{t+1}`` for t = 0..T-2 (rows are consecutive frames)."""
    motions: np.ndarray = w2c_from_c2w(c2w[:-1]) @ c2w[1:]
    return motions


#: Why translation RPE is not reported for a target that never translates (see ``docs/evaluation.md``).
ROTATION_ONLY_REASON = (
    "not applicable: the target path does not translate (rotation-only trajectory). Eq. 2 normalises the target "
    "path to unit length, which is undefined at length 0, and an estimate's translation then has no scale to be "
    "compared with; any number would be in the estimator's own units"
)
#: Why rotation RPE is not reported for a target that never rotates.
TRANSLATION_ONLY_REASON = "not applicable: the target never rotates, so Eq. 3's denominator is 0"
#: Target paths shorter than this (scene units) count as not translating.
MIN_PATH_LENGTH = 1e-9


def _poses(name: str, c2w: np.ndarray, frame_indices: Optional[Sequence[int] | np.ndarray] = None) -> np.ndarray:
    """Validate a (T, 4, 4) pose stack for Eq. 2/3: T >= 2, finite, and (when ``frame_indices`` is given) the
    rows are adjacent frames. Raises ValueError naming ``name`` and the fix."""
    a = np.asarray(c2w, dtype=np.float64)
    if a.ndim != 3 or a.shape[1:] != (4, 4):
        raise ValueError(f"{name}: expected (T, 4, 4) camera-to-world poses, got shape {a.shape}")
    if len(a) < 2:
        raise ValueError(f"{name}: relative pose error needs at least 2 frames (T = {len(a)}); Eq. 2/3 sum over the "
                         "adjacent pairs t = 0..T-2, and a single frame has none")
    bad = np.flatnonzero(~np.isfinite(a).all(axis=(1, 2)))
    if len(bad):
        raise ValueError(f"{name}: non-finite poses at rows {bad[:10].tolist()}; drop those frames from every pose "
                         "stack (or let the estimator mark them invalid) before computing RPE")
    if frame_indices is not None:
        f = np.asarray(frame_indices, dtype=np.int64)
        if f.shape != (len(a),):
            raise ValueError(f"{name}: frame_indices has {f.size} entries for {len(a)} poses")
        gaps = np.flatnonzero(np.diff(f) != 1)
        if len(gaps):
            raise ValueError(f"{name}: Eq. 2/3 sum over adjacent frames t, t+1, but frame_indices jump from "
                             f"{int(f[gaps[0]])} to {int(f[gaps[0] + 1])}; pass every frame (a subsampled RPE is a "
                             "different metric and must be reported under its own name)")
    return a


def translation_rpe_not_applicable(target_c2w: np.ndarray) -> str | None:
    """The reason translation RPE (Eq. 2) is undefined for this target, or None when it is defined."""
    return ROTATION_ONLY_REASON if path_length(target_c2w) < MIN_PATH_LENGTH else None


def rpe_translation(target_c2w: np.ndarray, estimates: Mapping[str, np.ndarray],
                    details: dict[str, Any] | None = None, *,
                    frame_indices: Optional[Sequence[int] | np.ndarray] = None) -> float:
    """Eq. 2: translation RPE over adjacent frames, averaged over the estimators given.

    The target path is normalised to unit length; each estimator's trajectory is aligned to the normalised target
    independently with Sim(3) (Umeyama on camera centres); the error sums ``‖trans((ΔQ_t)^-1 ΔQ̂_t)‖`` over
    ``t = 0..T-2`` with ``ΔQ_t = Q_t^-1 Q_{t+1}`` (a sum, not a mean, as in the paper), then averages over the
    estimators (the paper's 1/2 over DA3 and ViPE).

    Args:
        target_c2w: (T,4,4) prescribed poses of consecutive frames, T >= 2.
        estimates: estimator name -> (T,4,4) estimated c2w of the same frames.
        details: optional dict filled with per-estimator values, the alignment, the number of steps and, when the
            metric does not apply, ``not_applicable`` (the reason).
        frame_indices: optional (T,) video frame numbers of the rows; if given they must be adjacent (Eq. 2 is
            defined on adjacent frames), else ValueError.
    Returns:
        The error (dimensionless; lower is better), or NaN when the target does not translate
        (:data:`ROTATION_ONLY_REASON`: a rotation-only target has no unit-length path to normalise).
    Raises:
        ValueError: no estimate, T < 2, shapes differ, non-finite poses, or non-adjacent ``frame_indices``.
    """
    if not estimates:
        raise ValueError("rpe_translation needs at least one estimate")
    target = _poses("target", target_c2w, frame_indices).copy()
    ests = {name: _poses(f"estimate {name!r}", est) for name, est in estimates.items()}
    for name, est in ests.items():
        if est.shape != target.shape:
            raise ValueError(f"estimate {name!r} has shape {est.shape}, target {target.shape}")
    L = path_length(target)
    if details is not None:
        details["target_path_length"] = L
        details["steps"] = len(target) - 1
    reason = translation_rpe_not_applicable(target)
    if reason:
        if details is not None:
            details["not_applicable"] = reason
        return float("nan")
    target[:, :3, 3] /= L
    dQ = _relative(target)
    vals = {}
    for name, est in ests.items():
        aligned, info = align_to_target(target, est)
        E = w2c_from_c2w(dQ) @ _relative(aligned)
        vals[name] = float(np.linalg.norm(E[:, :3, 3], axis=1).sum())
        if details is not None:
            details[name] = {"rpe_trans": vals[name], **info}
    return float(np.mean(list(vals.values())))


def rpe_rotation(target_c2w: np.ndarray, estimate_c2w: np.ndarray, details: dict[str, Any] | None = None, *,
                 frame_indices: Optional[Sequence[int] | np.ndarray] = None) -> float:
    """Eq. 3: ``Σ_t θ((ΔR_t)^T ΔR̂_t) / Σ_t θ(ΔR_t)`` over adjacent frames ``t = 0..T-2`` with geodesic angles and no
    alignment (relative rotations are invariant to a global rotation).

    Returns NaN when the target never rotates (:data:`TRANSLATION_ONLY_REASON`, also put in
    ``details["not_applicable"]``). Raises ValueError for T < 2, mismatched shapes, non-finite poses or
    non-adjacent ``frame_indices``.
    """
    tgt = _poses("target", target_c2w, frame_indices)
    est = _poses("estimate", estimate_c2w)
    if est.shape != tgt.shape:
        raise ValueError(f"estimate has shape {est.shape}, target {tgt.shape}")
    R, Rh = tgt[:, :3, :3], est[:, :3, :3]
    dR = np.swapaxes(R[:-1], -1, -2) @ R[1:]
    dRh = np.swapaxes(Rh[:-1], -1, -2) @ Rh[1:]
    denom = float(geodesic_angle(dR).sum())
    if details is not None:
        details["steps"] = len(tgt) - 1
        details["target_angular_path_rad"] = denom
    if denom <= 0:
        if details is not None:
            details["not_applicable"] = TRANSLATION_ONLY_REASON
        return float("nan")
    return float(geodesic_angle(dR, dRh).sum() / denom)
