"""Conformance of a video that comes back from upstream: what the contract says upstream writes, checked on the file.

Five checks, each a :class:`Check` with the measured value, what was expected and a message naming the fix:

- ``fps``: the file's rate against the contract's ``writer.fps`` (within ``fps_tolerance``);
- ``frames``: the frame count against the poses under the alignment rule (``writer.first_pose``: a dropped anchor
  means upstream writes one frame fewer than there are poses, and its frame i shows pose i + 1);
- ``resolution``: the frame size against the canvas rule (:meth:`adapters.upstream.UpstreamAdapter.output_hw`);
- ``first_frame``: upstream's first frame against the conditioning canvas (zero-mean normalised cross-correlation
  at a low resolution, so a VAE reconstruction, a colour correction or generation noise still match, while another
  image, black warm-up frames or an off-by-N start do not);
- ``overlay``: a textured region that stays the same while the camera moves (a HUD, key boxes, a watermark): real
  pixels move when the camera turns, drawn ones do not.

The video is decoded once; ``on_frame`` receives every frame in order (the adapter hands them to the item's
writer in the same pass). Poses are OpenCV camera-to-world (:mod:`trajectories.conventions`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CHECKS = ("fps", "frames", "resolution", "first_frame", "overlay")


@dataclass
class Check:
    """One conformance result. ``ok`` None: not checked (with the reason in ``message``)."""

    name: str
    ok: bool | None
    value: Any
    expected: Any
    message: str = ""


@dataclass
class ConformanceSpec:
    """What the file must be. ``poses``: the (M, 4, 4) poses upstream's frames show, in order (already shifted by
    the alignment rule); ``canvas``: the (H, W, 3) conditioning canvas, or None to skip the first-frame check."""

    fps: float
    frames: int
    height: int
    width: int
    poses: np.ndarray | None = None
    canvas: np.ndarray | None = None
    fps_tolerance: float = 0.05
    first_frame_min_ncc: float = 0.6
    overlay_max_change: float = 8.0  # grey levels a drawn pixel may flicker by (codec noise)
    overlay_min_edge: float = 60.0  # Sobel magnitude of an edge (a flat area has none)
    overlay_min_edge_pixels: int = 24  # unmoving edge pixels that make a 32x32 block suspicious
    overlay_min_blocks: int = 2  # suspicious blocks that make an overlay
    overlay_min_moving: int = 8  # camera-moving frame pairs needed to judge
    moving_deg: float = 0.05  # a pair "moves" when the camera turns more than this (or translates)


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.ok is False]

    def by_name(self) -> dict[str, Check]:
        return {c.name: c for c in self.checks}

    def to_dict(self) -> dict[str, Any]:
        return {c.name: {k: _plain(v) for k, v in asdict(c).items() if k != "name"} for c in self.checks}


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _grey_small(frame: np.ndarray, width: int = 96) -> np.ndarray:
    import cv2

    h, w = frame.shape[:2]
    g = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32)
    return cv2.resize(g, (width, max(1, round(width * h / w))), interpolation=cv2.INTER_AREA)


def ncc(a: np.ndarray, b: np.ndarray) -> float:
    """Zero-mean normalised cross-correlation of two RGB images (resized to a common low resolution first)."""
    import cv2

    ga = _grey_small(a)
    gb = cv2.resize(_grey_small(b), (ga.shape[1], ga.shape[0]), interpolation=cv2.INTER_AREA)
    ga, gb = ga - ga.mean(), gb - gb.mean()
    den = float(np.sqrt((ga * ga).sum() * (gb * gb).sum()))
    return float((ga * gb).sum() / den) if den > 0 else 0.0


def moving_pairs(poses: np.ndarray, deg: float) -> np.ndarray:
    """(M-1,) bool: whether the camera moves between pose t and t+1 (rotation above ``deg`` or any translation
    above 1e-6 of the path's extent)."""
    R = poses[:, :3, :3]
    rel = np.einsum("tji,tjk->tik", R[:-1], R[1:])
    ang = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=1, axis2=2) - 1) / 2, -1.0, 1.0)))
    t = poses[:, :3, 3]
    extent = max(float(np.ptp(t, axis=0).max()), 1e-12)
    step = np.linalg.norm(np.diff(t, axis=0), axis=1)
    moving: np.ndarray = (ang > deg) | (step > 1e-6 * extent)
    return moving


class _OverlayAccumulator:
    """Per-pixel largest change over the frame pairs in which the camera moves, and the edges of one frame.

    A drawn overlay (key boxes, a HUD, letters, a logo; opaque or blended) has edges that are in the same place in
    every frame; real edges move when the camera moves, and flat areas (sky, walls) have no edges to count. So a
    32x32 block is suspicious when enough of its edge pixels never change while the camera moves, in both
    orientations: a drawn shape has corners, while a real edge that lies along the motion (a flat sky's horizon
    under a pan) is a straight line of one orientation."""

    BLOCK = 32

    def __init__(self, moving: np.ndarray | None):
        self.moving = moving
        self.prev: np.ndarray | None = None
        self.max_change: np.ndarray | None = None
        self.gx: np.ndarray | None = None
        self.gy: np.ndarray | None = None
        self.pairs = 0

    def add(self, i: int, frame: np.ndarray) -> None:
        if self.moving is None:
            return
        import cv2

        grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY).astype(np.float32)
        if self.prev is not None and i - 1 < len(self.moving) and self.moving[i - 1]:
            d = np.abs(grey - self.prev)
            self.max_change = d if self.max_change is None else np.maximum(self.max_change, d)
            if self.gx is None:
                self.gx, self.gy = np.abs(cv2.Sobel(grey, cv2.CV_32F, 1, 0)), np.abs(cv2.Sobel(grey, cv2.CV_32F, 0, 1))
            self.pairs += 1
        self.prev = grey

    def check(self, spec: ConformanceSpec) -> Check:
        expected = f"< {spec.overlay_min_blocks} blocks with unmoving edges"
        if self.moving is None:
            return Check("overlay", None, None, expected, "no poses given")
        if self.pairs < spec.overlay_min_moving or self.max_change is None:
            return Check("overlay", None, {"moving_pairs": self.pairs}, expected,
                         f"the camera moves in only {self.pairs} frame pairs; not enough to judge")
        assert self.gx is not None and self.gy is not None  # set by the same pair as max_change
        b = self.BLOCK
        H, W = self.max_change.shape
        bh, bw = H // b, W // b
        crop = (slice(0, bh * b), slice(0, bw * b))
        still = (self.max_change <= spec.overlay_max_change)[crop]
        gx, gy = self.gx[crop], self.gy[crop]
        edge = np.hypot(gx, gy) >= spec.overlay_min_edge

        def per_block(mask: np.ndarray) -> np.ndarray:
            counts: np.ndarray = mask.reshape(bh, b, bw, b).sum(axis=(1, 3))
            return counts

        counts = per_block(still & edge)
        vertical, horizontal = per_block(still & edge & (gx >= gy)), per_block(still & edge & (gy > gx))
        shaped = np.minimum(vertical, horizontal) * 4 >= counts  # both orientations: at least a quarter each
        flagged = (counts >= spec.overlay_min_edge_pixels) & shaped
        still_edges = float((still & edge).sum() / max(1, edge.sum()))  # ~1 when nothing moves at all
        n = int(flagged.sum())
        value: dict[str, Any] = {"blocks_with_unmoving_edges": n, "blocks": bh * bw, "moving_pairs": self.pairs,
                                 "unmoving_edge_fraction": round(still_edges, 4)}
        if n >= spec.overlay_min_blocks or still_edges > 0.9:
            ys, xs = np.nonzero(flagged) if n else np.nonzero(np.ones_like(flagged))
            box = [int(xs.min() * b), int(ys.min() * b), int((xs.max() + 1) * b), int((ys.max() + 1) * b)]
            value["box_xyxy"] = box
            if still_edges > 0.9:
                what = "the picture stays still while the camera moves (a frozen video)"
            else:
                what = (f"edges at x {box[0]}-{box[2]}, y {box[1]}-{box[3]} stay in place in all {self.pairs} frame "
                        "pairs where the camera moves: an overlay drawn into the frames")
            return Check("overlay", False, value, expected, f"{what}; turn it off with upstream's switch or capture "
                         "the frames before it is drawn (the contract's writer.overlays)")
        return Check("overlay", True, value, expected)


def check_video(path: str | Path, spec: ConformanceSpec,
                on_frame: Callable[[int, np.ndarray], None] | None = None) -> Report:
    """Decode ``path`` once, hand every frame to ``on_frame`` and check it against ``spec`` (see the module doc)."""
    import av

    report = Report()
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        fps = float(s.average_rate) if s.average_rate else float("nan")
        hw = (int(s.height), int(s.width))
        moving = None
        if spec.poses is not None and len(spec.poses) > 1:
            moving = moving_pairs(np.asarray(spec.poses, np.float64), spec.moving_deg)
        acc = _OverlayAccumulator(moving)
        n = 0
        first_ncc: float | None = None
        for i, f in enumerate(c.decode(s)):
            frame = f.to_ndarray(format="rgb24")
            if i == 0 and spec.canvas is not None:
                first_ncc = ncc(frame, spec.canvas)
            acc.add(i, frame)
            if on_frame is not None:
                on_frame(i, frame)
            n += 1
    ok_fps = bool(abs(fps - spec.fps) <= spec.fps_tolerance * spec.fps)  # False for NaN (a file without a rate)
    report.checks.append(Check("fps", ok_fps, round(fps, 4), spec.fps, "" if ok_fps else
                               f"the file is {fps:.3f} fps, upstream's writer writes {spec.fps:g} (contract writer.fps)"))
    ok_n = n == spec.frames
    report.checks.append(Check("frames", ok_n, n, spec.frames, "" if ok_n else
                               f"{n} frames, the alignment rule expects {spec.frames} (contract writer.frames / "
                               "writer.first_pose)"))
    ok_hw = hw == (spec.height, spec.width)
    report.checks.append(Check("resolution", ok_hw, list(hw), [spec.height, spec.width], "" if ok_hw else
                               f"{hw[0]}x{hw[1]} frames, the canvas rule says {spec.height}x{spec.width}"))
    if first_ncc is None:
        report.checks.append(Check("first_frame", None, None, spec.first_frame_min_ncc,
                                   "no conditioning canvas" if spec.canvas is None else "the file has no frames"))
    else:
        ok = bool(first_ncc >= spec.first_frame_min_ncc)  # a bool (Report.failed: `is False`), numpy threshold too
        report.checks.append(Check("first_frame", ok, round(first_ncc, 4), f">= {spec.first_frame_min_ncc}", "" if ok else
                                   f"the first frame does not match the conditioning image (correlation {first_ncc:.2f}): "
                                   "another image, warm-up frames, or frames out of step with the poses"))
    report.checks.append(acc.check(spec))
    return report
