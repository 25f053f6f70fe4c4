"""Camera following (WorldMemBench section 4.3): Sim(3)/Umeyama alignment and the two relative pose errors.

Poses are OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward), world = camera frame of frame 0,
positive yaw turns right, positive pitch turns up (see :mod:`trajectories.conventions`). Estimates from tools that
output world-to-camera (DA3, COLMAP) must be inverted before they reach these functions.
"""

from __future__ import annotations

from typing import Mapping

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
    xs, xd = src - mu_s, dst - mu_d
    var_s = float((xs**2).sum() / len(src))
    if var_s < 1e-18:
        return 1.0, np.eye(3), mu_d - mu_s
    cov = xd.T @ xs / len(src)
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


def align_to_target(target: np.ndarray, estimate: np.ndarray) -> tuple[np.ndarray, dict]:
    """Sim(3)-align an estimate to the target on camera centres; SE(3) when the target centres are degenerate
    (pure rotation: the scale is unobservable and a Sim(3) fit would collapse the estimate to a point)."""
    degenerate = np.ptp(target[:, :3, 3], axis=0).max() < 1e-12
    s, R, t = umeyama_sim3(estimate[:, :3, 3], target[:, :3, 3], with_scale=not degenerate)
    return apply_sim3(estimate, s, R, t), {"alignment": "se3" if degenerate else "sim3", "scale": s}


def _relative(c2w: np.ndarray) -> np.ndarray:
    return w2c_from_c2w(c2w[:-1]) @ c2w[1:]


def rpe_translation(target_c2w: np.ndarray, estimates: Mapping[str, np.ndarray], details: dict | None = None) -> float:
    """Eq. 2: translation RPE, averaged over the estimators given.

    The target path is normalised to unit length (when it has one); each estimator's trajectory is aligned to
    the normalised target independently with Sim(3) (SE(3) for a pure rotation target); the error sums
    ``‖trans((ΔQ_t)^-1 ΔQ̂_t)‖`` over adjacent frames ``t = 0..T-2``.

    Args:
        target_c2w: (T,4,4) prescribed poses. estimates: estimator name -> (T,4,4) estimated c2w.
        details: optional dict filled with per-estimator values and the alignment used.
    """
    if not estimates:
        raise ValueError("rpe_translation needs at least one estimate")
    target = np.array(target_c2w, dtype=np.float64, copy=True)
    L = path_length(target)
    if L > 0:
        target[:, :3, 3] /= L
    dQ = _relative(target)
    vals = {}
    for name, est in estimates.items():
        est = np.asarray(est, dtype=np.float64)
        if est.shape != target.shape:
            raise ValueError(f"estimate {name!r} has shape {est.shape}, target {target.shape}")
        aligned, info = align_to_target(target, est)
        E = w2c_from_c2w(dQ) @ _relative(aligned)
        vals[name] = float(np.linalg.norm(E[:, :3, 3], axis=1).sum())
        if details is not None:
            details[name] = {"rpe_trans": vals[name], **info}
    if details is not None:
        details["target_path_length"] = L
    return float(np.mean(list(vals.values())))


def rpe_rotation(target_c2w: np.ndarray, estimate_c2w: np.ndarray) -> float:
    """Eq. 3: ``Σ θ((ΔR_t)^T ΔR̂_t) / Σ θ(ΔR_t)`` with geodesic angles, no alignment (relative rotations are
    invariant to a global rotation). NaN when the target does not rotate (the ratio is undefined)."""
    R = np.asarray(target_c2w, dtype=np.float64)[:, :3, :3]
    Rh = np.asarray(estimate_c2w, dtype=np.float64)[:, :3, :3]
    dR = np.swapaxes(R[:-1], -1, -2) @ R[1:]
    dRh = np.swapaxes(Rh[:-1], -1, -2) @ Rh[1:]
    denom = float(geodesic_angle(dR).sum())
    if denom <= 0:
        return float("nan")
    return float(geodesic_angle(dR, dRh).sum() / denom)
