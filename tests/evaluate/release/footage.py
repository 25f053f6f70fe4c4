"""Footage rendered outside the harness's own renderer, for testing ``release check`` and the import's measured
layout: a panorama remapped through each camera rotation (:func:`rotation_video`), and a box room of textured
planes seen through a translating camera (:func:`translation_video`). Both use only numpy and ``cv2.remap``; the
camera paths are laid out here from explicit numbers (holds, sweeps, speeds, profiles), never from the harness's
trajectory builder, so a test that recovers them checks the measurement against an independent truth.

Conventions (the harness's, docs/conventions.md): OpenCV camera axes (+x right, +y down, +z forward), world =
the camera of frame 0, positive yaw turns the view right, positive pitch turns it up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def texture(height: int, width: int, seed: int, wrap: bool = True) -> np.ndarray:
    """A seeded multi-scale texture (H, W, 3) uint8: blurred noise at three scales plus random discs, rich in
    corners at every scale. ``wrap``: blurred with wrap-around borders (a panorama's seam stays invisible)."""
    import cv2

    rng = np.random.default_rng(seed)
    img = np.zeros((height, width, 3), np.float32)
    for scale, weight in ((3, 0.5), (11, 0.3), (41, 0.2)):
        noise = rng.random((height, width, 3)).astype(np.float32)
        pad = int(scale) + 1  # blurred with its own wrapped-around border: no seam
        padded = np.pad(noise, ((pad, pad), (pad, pad), (0, 0)), mode="wrap" if wrap else "reflect")
        img += weight * cv2.GaussianBlur(padded, (0, 0), scale / 3.0)[pad:-pad, pad:-pad]
    img = (img - img.min()) / max(float(np.ptp(img)), 1e-6)
    out = (img * 255).astype(np.uint8)
    for _ in range(height * width // 900):
        c = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        cv2.circle(out, c, int(rng.integers(2, 9)), tuple(int(v) for v in rng.integers(0, 256, 3)), -1)
    return cv2.GaussianBlur(out, (0, 0), 0.8)


def intrinsics(hfov_deg: float, width: int, height: int) -> np.ndarray:
    """(3, 3) pinhole intrinsics with square pixels and the principal point at the image centre (+0.5 centres)."""
    f = (width / 2.0) / np.tan(np.radians(hfov_deg) / 2.0)
    return np.array([[f, 0, width / 2.0], [0, f, height / 2.0], [0, 0, 1.0]])


def _rays(K: np.ndarray, height: int, width: int) -> np.ndarray:
    u, v = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    pix = np.stack([u, v, np.ones_like(u)], -1)
    return pix @ np.linalg.inv(K).T  # (H, W, 3), z = 1


def rotation(yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """Camera-to-world rotation of a view at ``yaw_deg`` (right positive) and ``pitch_deg`` (up positive)."""
    y, p = np.radians(yaw_deg), np.radians(pitch_deg)
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rx = np.array([[1, 0, 0], [0, np.cos(p), -np.sin(p)], [0, np.sin(p), np.cos(p)]])
    return ry @ rx


@dataclass(frozen=True)
class Sweep:
    """One turn: ``axis`` yaw or pitch, by ``degrees`` (signed: left and down negative), over ``frames`` frames
    with ``profile`` constant (linear) or eased (cosine), then ``hold`` frames still."""

    axis: str
    degrees: float
    frames: int
    profile: str = "constant"
    hold: int = 0


@dataclass(frozen=True)
class RotationLayout:
    """A rotation video's layout: ``initial_hold`` frames still after frame 0, the sweeps in order, then still
    frames up to ``total`` frames."""

    sweeps: tuple[Sweep, ...]
    initial_hold: int = 0
    total: int = 0

    def angles(self) -> np.ndarray:
        """(total, 2) yaw and pitch in degrees per frame (frame 0 at (0, 0)); a sweep of n frames reaches k / n of
        its turn on its k-th frame (shape applied), as a model that follows "n frames per sweep" would."""
        yaw_pitch = [np.zeros(2)]
        cur = np.zeros(2)
        yaw_pitch += [cur.copy()] * self.initial_hold
        for s in self.sweeps:
            ax = 0 if s.axis == "yaw" else 1
            k = np.arange(1, s.frames + 1) / s.frames
            shape = k if s.profile == "constant" else 0.5 - 0.5 * np.cos(np.pi * k)
            for f in shape:
                p = cur.copy()
                p[ax] += s.degrees * f
                yaw_pitch.append(p)
            cur[ax] += s.degrees
            yaw_pitch += [cur.copy()] * s.hold
        n = max(self.total, len(yaw_pitch))
        yaw_pitch += [cur.copy()] * (n - len(yaw_pitch))
        return np.array(yaw_pitch[:n])


def lr_sweeps(cycles: int, degrees: float, deg_per_frame: float, profile: str = "constant",
              axes: tuple[str, ...] = ()) -> tuple[Sweep, ...]:
    """``cycles`` away-and-back turns of ``degrees`` at a mean ``deg_per_frame``: left-right on yaw, or
    up-down on pitch where ``axes`` names pitch for that cycle."""
    n = int(round(degrees / deg_per_frame))
    out: list[Sweep] = []
    for c in range(cycles):
        axis = axes[c] if c < len(axes) else "yaw"
        sign = -1.0 if axis == "yaw" else 1.0  # left, or up
        out += [Sweep(axis, sign * degrees, n, profile), Sweep(axis, -sign * degrees, n, profile)]
    return tuple(out)


def render_panorama(pano: np.ndarray, K: np.ndarray, height: int, width: int,
                    yaw_pitch_deg: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) uint8 views of an equirectangular ``pano`` (rows: latitude +90 .. -90 deg, columns:
    longitude -180 .. 180 deg, forward at the centre) for each (yaw, pitch) in degrees."""
    import cv2

    rays = _rays(K, height, width)
    ph, pw = pano.shape[:2]
    out = np.empty((len(yaw_pitch_deg), height, width, 3), np.uint8)
    for i, (yaw, pitch) in enumerate(yaw_pitch_deg):
        d = rays @ rotation(yaw, pitch).T
        lon = np.arctan2(d[..., 0], d[..., 2])
        lat = np.arctan2(-d[..., 1], np.hypot(d[..., 0], d[..., 2]))
        mx = ((lon / (2 * np.pi) + 0.5) * pw - 0.5).astype(np.float32)
        my = ((0.5 - lat / np.pi) * ph - 0.5).astype(np.float32)
        out[i] = cv2.remap(pano, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_WRAP)
    return out


def rotation_video(layout: RotationLayout, hfov_deg: float = 60.0, size: tuple[int, int] = (144, 256),
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(frames (T, H, W, 3) uint8, yaw/pitch (T, 2) degrees) of ``layout`` seen in a seeded panorama."""
    h, w = size
    pw = 1024 if w * 360.0 / hfov_deg <= 1024 else 2048  # about 1-2 panorama texels per rendered pixel
    pano = texture(pw // 2, pw, seed)
    angles = layout.angles()
    return render_panorama(pano, intrinsics(hfov_deg, w, h), h, w, angles), angles


@dataclass(frozen=True)
class Leg:
    """One straight move of ``distance`` scene units along ``direction`` (F, B, R, L: +z, -z, +x, -x of the
    camera of frame 0) over ``frames`` frames (``profile`` constant or eased), then ``hold`` frames still."""

    direction: str
    frames: int
    distance: float = 1.0
    profile: str = "eased"
    hold: int = 0


_AXES = {"F": np.array([0, 0, 1.0]), "B": np.array([0, 0, -1.0]), "R": np.array([1.0, 0, 0]),
         "L": np.array([-1.0, 0, 0])}


@dataclass(frozen=True)
class TranslationLayout:
    """A translation video's layout: ``initial_hold`` frames still after frame 0, the legs, then still frames up
    to ``total``."""

    legs: tuple[Leg, ...]
    initial_hold: int = 0
    total: int = 0

    def positions(self) -> np.ndarray:
        """(total, 3) camera centres per frame, the orientation fixed."""
        pts = [np.zeros(3)] * (1 + self.initial_hold)
        cur = np.zeros(3)
        for leg in self.legs:
            k = np.arange(1, leg.frames + 1) / leg.frames
            shape = k if leg.profile == "constant" else 0.5 - 0.5 * np.cos(np.pi * k)
            pts += [cur + _AXES[leg.direction] * leg.distance * f for f in shape]
            cur = cur + _AXES[leg.direction] * leg.distance
            pts += [cur.copy()] * leg.hold
        n = max(self.total, len(pts))
        pts += [cur.copy()] * (n - len(pts))
        return np.array(pts[:n])


@dataclass(frozen=True)
class Room:
    """An axis-aligned box of textured planes around the start: walls at x = +-``half_width``, z = ``front`` and
    z = -``back``, floor at y = ``floor`` (y down), ceiling at y = -``ceiling``."""

    half_width: float = 4.0
    front: float = 6.0
    back: float = 4.0
    floor: float = 1.6
    ceiling: float = 2.4
    textures: list[np.ndarray] = field(default_factory=list)


def render_room(room: Room, K: np.ndarray, height: int, width: int, centres: np.ndarray, seed: int = 0) -> np.ndarray:
    """(T, H, W, 3) uint8 views of ``room`` from each camera centre (T, 3), looking along +z (no rotation):
    each pixel's ray meets the nearest plane, whose texture (one seeded texture per plane, 2 texels per
    centimetre-scale unit) is sampled with ``cv2.remap``."""
    import cv2

    # (normal axis, plane coordinate, the two in-plane axes)
    planes = [(0, room.half_width, 2, 1), (0, -room.half_width, 2, 1), (2, room.front, 0, 1),
              (2, -room.back, 0, 1), (1, room.floor, 0, 2), (1, -room.ceiling, 0, 2)]
    tex = [texture(512, 512, seed + 17 * j, wrap=True) for j in range(len(planes))]
    per_unit = 64.0  # texels per scene unit
    rays = _rays(K, height, width).reshape(-1, 3)
    out = np.empty((len(centres), height, width, 3), np.uint8)
    for i, c in enumerate(centres):
        best = np.full(len(rays), np.inf)
        which = np.full(len(rays), -1)
        for j, (ax, coord, _, _) in enumerate(planes):
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (coord - c[ax]) / rays[:, ax]
            hit = (t > 0) & (t < best)
            best[hit], which[hit] = t[hit], j
        img = np.zeros((len(rays), 3), np.uint8)
        for j, (_, _, a, b) in enumerate(planes):
            sel = which == j
            if not sel.any():
                continue
            p = c[None] + rays * np.where(sel, best, 0.0)[:, None]
            mx = np.mod(p[:, a] * per_unit, 512).astype(np.float32).reshape(height, width)
            my = np.mod(p[:, b] * per_unit, 512).astype(np.float32).reshape(height, width)
            view = cv2.remap(tex[j], mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_WRAP).reshape(-1, 3)
            img[sel] = view[sel]
        out[i] = img.reshape(height, width, 3)
    return out


def square(side_frames: int, hold: int = 0, initial_hold: int = 0, total: int = 0, distance: float = 1.2,
           profile: str = "eased") -> TranslationLayout:
    """Forward, Right, Backward, Left (the paper's square loop), each ``side_frames`` frames."""
    legs = tuple(Leg(d, side_frames, distance, profile, hold if d == "L" else 0) for d in "FRBL")
    return TranslationLayout(legs, initial_hold, total)


def translation_video(layout: TranslationLayout, hfov_deg: float = 70.0, size: tuple[int, int] = (144, 256),
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(frames (T, H, W, 3) uint8, centres (T, 3)) of ``layout`` in a seeded box room."""
    h, w = size
    centres = layout.positions()
    return render_room(Room(), intrinsics(hfov_deg, w, h), h, w, centres, seed), centres


def write_video(path: Path, frames: np.ndarray, fps: float = 16.0) -> Path:
    """``frames`` as an H.264 file (the harness's writer: what a model's video looks like to the check)."""
    from harness.video import VideoWriter

    w = VideoWriter(path, fps=fps)
    for f in frames:
        w(f)
    w.close()
    return path
