"""Camera conventions: the one place that defines them.

CONVENTIONS (restated, in short, in every public docstring that takes a pose):

* A pose is a **camera-to-world** (``c2w``) 4x4 ``float64`` matrix ``[[R, t], [0, 1]]``: ``R`` maps camera
  axes to world axes, ``t`` is the camera centre in world coordinates.
* Camera axes are **OpenCV**: +x right, +y down, +z forward (the viewing direction).
* The world frame is the camera frame of frame 0, so a trajectory starts at the identity.
* **Yaw** is a rotation about the camera's +y (down) axis: ``R = rot_y(yaw)``. **Positive yaw turns the view to
  the right** (forward +z moves towards +x).
* **Pitch** is a rotation about the camera's +x axis: ``R = rot_x(pitch)``. **Positive pitch turns the view up**
  (forward +z moves towards -y, and -y is up).
* A view at (yaw, pitch) is ``R = rot_y(yaw) @ rot_x(pitch)`` (yaw about the world vertical, then pitch about the
  camera's own x axis), so a pure pitch never introduces roll.
* Angles are in **degrees** in configs and reports, radians inside maths helpers unless a name ends in ``_deg``.
* Intrinsics ``K`` are 3x3 pinhole matrices in **pixels**; pixel ``(u, v)`` has its integer coordinates at pixel
  *centres* minus 0.5, i.e. the centre of the top-left pixel is ``(0.5, 0.5)`` (``+0.5`` centres). Models that use
  integer pixel grids say so in their adapters.
* Conversions are named ``target_from_source`` (``w2c_from_c2w``, ``yaw_pitch_from_rotmat``).

No axis flip appears anywhere else in the code base: adapters that need another convention convert at their
boundary with the helpers here.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

CONVENTION_TAG = "opencv-c2w-world=frame0-yaw+right-pitch+up"


def rot_x(angle: float | Array) -> Array:
    """Rotation about +x by ``angle`` radians. Scalar -> (3,3); array (N,) -> (N,3,3).

    With OpenCV axes a positive angle turns the forward axis towards -y, i.e. the view pitches **up**.
    """
    a = np.asarray(angle, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    m = np.stack([np.stack([o, z, z], -1), np.stack([z, c, -s], -1), np.stack([z, s, c], -1)], -2)
    return m


def rot_y(angle: float | Array) -> Array:
    """Rotation about +y by ``angle`` radians. Scalar -> (3,3); array (N,) -> (N,3,3).

    With OpenCV axes a positive angle turns the forward axis towards +x, i.e. the view yaws **right**.
    """
    a = np.asarray(angle, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([np.stack([c, z, s], -1), np.stack([z, o, z], -1), np.stack([-s, z, c], -1)], -2)


def rot_z(angle: float | Array) -> Array:
    """Rotation about +z (the viewing axis) by ``angle`` radians (roll). Scalar -> (3,3); (N,) -> (N,3,3)."""
    a = np.asarray(angle, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([np.stack([c, -s, z], -1), np.stack([s, c, z], -1), np.stack([z, z, o], -1)], -2)


def rotmat_from_yaw_pitch(yaw: float | Array, pitch: float | Array) -> Array:
    """Camera-to-world rotation for a view at ``yaw`` and ``pitch`` (radians).

    Conventions: OpenCV axes, positive yaw = right, positive pitch = up, ``R = rot_y(yaw) @ rot_x(pitch)``.
    """
    return rot_y(yaw) @ rot_x(pitch)


def yaw_pitch_from_rotmat(R: Array) -> tuple[Array, Array]:
    """Inverse of :func:`rotmat_from_yaw_pitch` for roll-free rotations. R: (...,3,3) -> (yaw, pitch) radians.

    Read off the forward axis ``f = R[:, 2]``: ``yaw = atan2(f_x, f_z)``, ``pitch = atan2(-f_y, hypot(f_x, f_z))``.
    """
    f = np.asarray(R)[..., :, 2]
    yaw = np.arctan2(f[..., 0], f[..., 2])
    pitch = np.arctan2(-f[..., 1], np.hypot(f[..., 0], f[..., 2]))
    return yaw, pitch


def se3(R: Array, t: Array | None = None) -> Array:
    """Build 4x4 pose(s) from rotation(s) (...,3,3) and translation(s) (...,3). Returns float64 (...,4,4)."""
    R = np.asarray(R, dtype=np.float64)
    out = np.zeros(R.shape[:-2] + (4, 4), dtype=np.float64)
    out[..., :3, :3] = R
    if t is not None:
        out[..., :3, 3] = np.asarray(t, dtype=np.float64)
    out[..., 3, 3] = 1.0
    return out


def w2c_from_c2w(c2w: Array) -> Array:
    """World-to-camera from camera-to-world (OpenCV axes), exact rigid inverse. (...,4,4) -> (...,4,4)."""
    c2w = np.asarray(c2w, dtype=np.float64)
    R = c2w[..., :3, :3]
    t = c2w[..., :3, 3]
    Rt = np.swapaxes(R, -1, -2)
    return se3(Rt, -np.einsum("...ij,...j->...i", Rt, t))


c2w_from_w2c = w2c_from_c2w  # the rigid inverse is its own inverse


def relative_to_first(c2w: Array) -> Array:
    """Re-express poses in the camera frame of pose 0: ``rel_i = c2w_0^-1 c2w_i`` (so ``rel_0 = I``)."""
    c2w = np.asarray(c2w, dtype=np.float64)
    return w2c_from_c2w(c2w[0])[None] @ c2w


def framewise_from_relative(rel: Array) -> Array:
    """Framewise motion ``f_0 = I``, ``f_i = rel_{i-1}^-1 rel_i`` (each pose is the motion since the previous)."""
    rel = np.asarray(rel, dtype=np.float64)
    out = np.empty_like(rel)
    out[0] = np.eye(4)
    out[1:] = w2c_from_c2w(rel[:-1]) @ rel[1:]
    return out


def geodesic_angle(R_a: Array, R_b: Array | None = None) -> Array:
    """SO(3) geodesic angle in radians between rotations (or of ``R_a`` itself when ``R_b`` is None).

    Uses the numerically stable ``atan2(|skew|, trace-1)`` form. Shapes broadcast over leading axes.
    """
    R = np.asarray(R_a, dtype=np.float64)
    if R_b is not None:
        R = np.swapaxes(R, -1, -2) @ np.asarray(R_b, dtype=np.float64)
    tr = np.trace(R, axis1=-2, axis2=-1)
    w = np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    angle: Array = np.arctan2(np.linalg.norm(w, axis=-1), tr - 1.0)
    return angle


def slerp_rotations(R0: Array, R1: Array, alpha: Array) -> Array:
    """Spherical interpolation between rotations ``R0`` and ``R1`` (3,3) at fractions ``alpha`` (N,) -> (N,3,3).

    Takes the shorter arc; ``alpha = 0`` returns ``R0`` and ``alpha = 1`` returns ``R1`` exactly.
    """
    alpha = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    delta = np.swapaxes(R0, -1, -2) @ R1
    angle = float(geodesic_angle(delta))
    if angle < 1e-12:
        same: Array = np.broadcast_to(R0, alpha.shape + (3, 3)).copy()
        return same
    from scipy.spatial.transform import Rotation

    rotvec = Rotation.from_matrix(delta).as_rotvec()
    steps = Rotation.from_rotvec(alpha[:, None] * rotvec[None]).as_matrix()
    out: Array = R0[None] @ steps
    out[alpha == 1.0] = R1
    out[alpha == 0.0] = R0
    return out


def intrinsics_from_fov(hfov_deg: float, width: int, height: int) -> Array:
    """Pinhole K (pixels, +0.5 centres) with horizontal field of view ``hfov_deg``, square pixels, centred."""
    fx = 0.5 * width / np.tan(np.deg2rad(hfov_deg) / 2.0)
    return np.array([[fx, 0.0, width / 2.0], [0.0, fx, height / 2.0], [0.0, 0.0, 1.0]])


def fov_from_intrinsics(K: Array, width: int, height: int) -> tuple[float, float]:
    """(horizontal, vertical) field of view in degrees of a centred pinhole ``K`` at ``width`` x ``height``."""
    K = np.asarray(K, dtype=np.float64)
    return (
        float(np.rad2deg(2 * np.arctan(0.5 * width / K[0, 0]))),
        float(np.rad2deg(2 * np.arctan(0.5 * height / K[1, 1]))),
    )


def intrinsics_for_resize_crop(K: Array, src_hw: tuple[int, int], dst_hw: tuple[int, int]) -> Array:
    """K after the image is resized to *cover* ``dst_hw`` (aspect preserved) and centre-cropped to it.

    ``src_hw`` and ``dst_hw`` are (height, width). The scale is ``max(H_d/H_s, W_d/W_s)``; the crop shifts the
    principal point. This is the transform every adapter applies to the conditioning image.
    """
    K = np.asarray(K, dtype=np.float64).copy()
    (hs, ws), (hd, wd) = src_hw, dst_hw
    s = max(hd / hs, wd / ws)
    K[:2] *= s
    K[0, 2] -= (ws * s - wd) / 2.0
    K[1, 2] -= (hs * s - hd) / 2.0
    return K


def pixel_rays(K: Array, height: int, width: int, offset: float = 0.5) -> Array:
    """Unit ray directions in the camera frame for every pixel, shape (H, W, 3), float64.

    ``offset=0.5`` samples pixel centres (the harness convention); ``offset=0.0`` samples the integer grid.
    """
    K = np.asarray(K, dtype=np.float64)
    u = np.arange(width, dtype=np.float64) + offset
    v = np.arange(height, dtype=np.float64) + offset
    uu, vv = np.meshgrid(u, v)
    d = np.stack([(uu - K[0, 2]) / K[0, 0], (vv - K[1, 2]) / K[1, 1], np.ones_like(uu)], -1)
    rays: Array = d / np.linalg.norm(d, axis=-1, keepdims=True)
    return rays
