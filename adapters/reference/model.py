"""The reference world model: a weight-free, deterministic, autoregressive renderer with explicit memory.

It generates chunk by chunk. Every new frame is rendered by re-projecting **only** the frames the context policy
admits (the anchor frame of each admitted latent, plus the frames of the current chunk generated so far) and
synthesises what none of them covers from a texture seeded by ``(seed, case, trajectory, chunk)``. So what the
policy lets it see, it remembers; what it forgets, it re-invents differently.

Geometry: the scene is a world-fixed box "room" around the start camera (a depth prior with known depth
everywhere). For pure rotation (all cameras share a centre) the re-projection is an exact homography
``K R_s^T R_t K^-1``; otherwise target rays are cast against the room and the hit points projected into each
source. Sources are composited oldest first, so the oldest admitted observation of a surface wins.

Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world 4x4, +x right / +y down / +z forward,
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up; K in pixels with +0.5 pixel
centres (converted here to OpenCV's integer-centre pixel grid for ``cv2`` calls).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.context import ContextPolicy, ContextSelector
from harness.scene import Room
from trajectories.resample import latents_for_frames

_DEFAULT_ROOM = Room()  # the reference room (frozen: one instance serves every default)


def _empty(filled: np.ndarray) -> np.ndarray:
    """uint8 mask (1 where ``filled`` is 0) for ``cv2.boundingRect``. numpy, not ``cv2.compare(a, 0)``: OpenCV reads a
    1x1 array as a scalar and refuses that comparison."""
    mask: np.ndarray = np.equal(filled, 0).view(np.uint8)
    return mask


def stable_seed(*parts: object) -> np.random.SeedSequence:
    """Seed sequence from the item's identity (never from rank, order or time): ints as-is, strings via CRC32."""
    ints = [int(p) if isinstance(p, (int, np.integer)) else zlib.crc32(str(p).encode()) for p in parts]
    return np.random.SeedSequence(ints)


class Texture:
    """A seeded colour field over world points: base colour + random 3D plane waves + random tiles.

    The tiles (``tile_size`` scene units, each a seeded colour offset) give the synthesised surfaces corners and
    edges like real scenes have, so feature-based pose estimators can track the camera through them.
    """

    def __init__(self, seq: np.random.SeedSequence, base_rgb: np.ndarray, waves: int = 6, amplitude: float = 45.0,
                 tile_size: float = 0.25, tile_amplitude: float = 40.0):
        rng = np.random.default_rng(seq)
        dirs = rng.normal(size=(waves, 3))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        freq = rng.uniform(1.0, 6.0, size=(waves, 1))
        self.k = (dirs * freq).astype(np.float32)
        self.phase = rng.uniform(0, 2 * np.pi, size=waves).astype(np.float32)
        self.amp = (rng.uniform(-1, 1, size=(waves, 3)) * amplitude / np.sqrt(waves)).astype(np.float32)
        self.base = (np.asarray(base_rgb, np.float32) + rng.uniform(-25, 25, size=3)).astype(np.float32)
        self.tile_size, self.tile_amplitude = tile_size, tile_amplitude
        self.salt = rng.integers(1, 2**31 - 1, size=3, dtype=np.int64)

    def _tiles(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) seeded colour offsets in [-amp, amp], constant per tile (integer hash of the tile index)."""
        idx = np.floor(points / self.tile_size).astype(np.int64)
        h = idx[:, 0] * 73856093 ^ idx[:, 1] * 19349663 ^ idx[:, 2] * 83492791
        out = np.empty((len(points), 3), np.float32)
        for c in range(3):
            v = (h * 2654435761 + self.salt[c]) % 1000003
            out[:, c] = (v / 1000003.0 - 0.5) * 2 * self.tile_amplitude
        return out

    def __call__(self, points: np.ndarray) -> np.ndarray:
        s = np.sin(points.astype(np.float32) @ self.k.T + self.phase)
        rgb: np.ndarray = np.clip(self.base + s @ self.amp + self._tiles(points), 0, 255).astype(np.uint8)
        return rgb


@dataclass
class RenderStats:
    warps: int = 0
    synth_pixels: int = 0
    sources_used: set[object] = field(default_factory=set)


class ReferenceRenderer:
    """Renders one view from admitted source views (see the module docstring).

    ``MAP_STEP``: translation warps compute their remap maps every ``MAP_STEP`` pixels and upsample them.
    ``BAND_ROWS``: warps run on bands of this many rows, each cropped to its still-empty pixels (speed only).

    Args:
        K: (3, 3) intrinsics in pixels (+0.5 centres) for ``height`` x ``width``.
        room: the world-fixed box.
    """

    MAP_STEP = 4
    BAND_ROWS = 32

    def __init__(self, K: np.ndarray, height: int, width: int, room: Room = _DEFAULT_ROOM):
        from trajectories.conventions import pixel_rays

        self.K = np.asarray(K, np.float64)
        self.h, self.w = int(height), int(width)
        self.room = room
        self.K_cv = self.K.copy()
        self.K_cv[0, 2] -= 0.5
        self.K_cv[1, 2] -= 0.5
        self.K_cv_inv = np.linalg.inv(self.K_cv)
        self.rays_cam = pixel_rays(self.K, self.h, self.w).astype(np.float32)  # (H, W, 3)
        self._u = np.arange(self.w, dtype=np.float32)
        self._corner_u = np.array([0.0, self.w - 1.0, 0.0, self.w - 1.0])
        self._corner_v = np.array([0.0, 0.0, self.h - 1.0, self.h - 1.0])
        self._v = np.arange(self.h, dtype=np.float32)
        half_diag = np.arctan(np.hypot(self.w, self.h) / 2 / min(self.K[0, 0], self.K[1, 1]))
        self._max_axis_angle = 2 * half_diag  # beyond this two views cannot overlap (same centre)
        self._ones = np.full((self.h, self.w), 255, np.uint8)
        # Coarse grid (every 8th pixel, plus the last row/column) for the cheap "does it help?" test.
        self._cy = np.unique(np.r_[np.arange(0, self.h, 8), self.h - 1])
        self._cx = np.unique(np.r_[np.arange(0, self.w, 8), self.w - 1])
        gx, gy = np.meshgrid(self._cx.astype(np.float64), self._cy.astype(np.float64))
        self._coarse_px = np.stack([gx, gy, np.ones_like(gx)], -1)
        self._coarse_ix = np.ix_(self._cy, self._cx)
        self._test_rays = self.rays_cam[self._coarse_ix]
        # Ray-map grid for translation warps: block centres of MAP_STEP x MAP_STEP pixel blocks, laid out the way
        # cv2.resize (INTER_LINEAR) expects, so upsampling the maps reproduces a smooth mapping exactly.
        Kc = self.K.copy()
        Kc[:2] /= self.MAP_STEP
        self._coarse_rays = pixel_rays(Kc, -(-self.h // self.MAP_STEP), -(-self.w // self.MAP_STEP)).astype(np.float32)
        self._map_scale = (self._coarse_rays.shape[1] / self.w, self._coarse_rays.shape[0] / self.h)  # cv2.resize's
        self._exact_map_scale = self.h % self.MAP_STEP == 0 and self.w % self.MAP_STEP == 0
        # Source rectangle grown by a pixel (bilinear support), homogeneous (3, 4), for footprint boxes.
        self._src_corners = np.array([[-1.0, self.w, -1.0, self.w], [-1.0, -1.0, self.h, self.h], [1.0, 1.0, 1.0, 1.0]])

    def _warp_rotation(self, M: np.ndarray, src: np.ndarray,
                       roi: tuple[slice, slice] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Warp RGBA ``src`` with the target->source homography ``M``. Returns (RGBA, uint8 valid mask).
        ``roi`` (rows, cols) restricts the output to that window (the homography is shifted to its corner)."""
        import cv2

        rows, cols = roi if roi is not None else (slice(0, self.h), slice(0, self.w))
        y0, x0 = rows.start, cols.start
        Ms = M @ np.array([[1.0, 0.0, x0], [0.0, 1.0, y0], [0.0, 0.0, 1.0]]) if (x0 or y0) else M
        size = (cols.stop - x0, rows.stop - y0)
        flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
        img = cv2.warpPerspective(src, Ms, size, flags=flags, borderMode=cv2.BORDER_CONSTANT)
        valid = cv2.threshold(img[..., 3], 254, 255, cv2.THRESH_BINARY)[1]  # fully inside the source (bilinear support)
        corners = M[2, 0] * self._corner_u + M[2, 1] * self._corner_v + M[2, 2]
        if (corners <= 1e-6).any():  # part of the target looks behind the source camera
            front = (M[2, 0] * self._u[None, cols] + M[2, 1] * self._v[rows, None] + M[2, 2]) > 1e-6
            valid = cv2.bitwise_and(valid, front.astype(np.uint8) * 255)
        return img, valid

    def _coarse_maps(self, Xc: np.ndarray, c2w_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Source pixel coordinates (u, v) float32 of the coarse-grid hit points ``Xc`` (-1e4 behind the source)."""
        R, t = c2w_s[:3, :3].astype(np.float32), c2w_s[:3, 3].astype(np.float32)
        p = ((Xc - t).reshape(-1, 3) @ R).reshape(Xc.shape)  # one GEMM: same values as the stacked matmul
        z = p[..., 2]
        front = z > 1e-4
        zs = np.where(front, z, 1.0)
        mu = np.where(front, self.K_cv[0, 0] * p[..., 0] / zs + self.K_cv[0, 2], -1e4).astype(np.float32)
        mv = np.where(front, self.K_cv[1, 1] * p[..., 1] / zs + self.K_cv[1, 2], -1e4).astype(np.float32)
        return mu, mv

    def _coarse_block(self, x0: int, y0: int, x1: int, y1: int) -> tuple[slice, slice]:
        """Rows and columns of the coarse map grid that upsampling reads for fine pixels [x0, x1) x [y0, y1)
        (a fine pixel x reads cells floor((x + .5) / MAP_STEP - .5) and the next one; one cell of margin).
        Upsampling such a block gives exactly the whole-grid values there (checked bit for bit) when the canvas
        is a multiple of ``MAP_STEP``; otherwise cv2.resize's scale is not exact and the whole grid is used."""
        if not self._exact_map_scale:
            return slice(0, self._coarse_rays.shape[0]), slice(0, self._coarse_rays.shape[1])
        s = self.MAP_STEP
        ch, cw = self._coarse_rays.shape[:2]
        return (slice(max(0, (2 * y0 + 1 - s) // (2 * s) - 1), min(ch, (2 * y1 - 1 - s) // (2 * s) + 3)),
                slice(max(0, (2 * x0 + 1 - s) // (2 * s) - 1), min(cw, (2 * x1 - 1 - s) // (2 * s) + 3)))

    def _warp_rays(self, maps: tuple[np.ndarray, np.ndarray], block: tuple[slice, slice], src: np.ndarray,
                   roi: tuple[slice, slice]) -> tuple[np.ndarray, np.ndarray]:
        """Backward-warp RGBA ``src`` through the coarse ``maps`` of the grid ``block`` (:meth:`_coarse_maps`,
        every ``MAP_STEP`` pixels), upsampled bilinearly (exact away from the room's corners), on the window
        ``roi`` (rows, cols) of the target; ``block`` must cover it (:meth:`_coarse_block`). Remap is per pixel,
        so the window holds the same values as a whole-frame warp."""
        import cv2

        if self._exact_map_scale:
            s = self.MAP_STEP
            size = ((block[1].stop - block[1].start) * s, (block[0].stop - block[0].start) * s)
            oy, ox = block[0].start * s, block[1].start * s
        else:
            size, oy, ox = (self.w, self.h), 0, 0
        win = (slice(roi[0].start - oy, roi[0].stop - oy), slice(roi[1].start - ox, roi[1].stop - ox))
        mu = cv2.resize(maps[0], size, interpolation=cv2.INTER_LINEAR)[win]
        mv = cv2.resize(maps[1], size, interpolation=cv2.INTER_LINEAR)[win]
        img = cv2.remap(src, mu, mv, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
        return img, cv2.threshold(img[..., 3], 254, 255, cv2.THRESH_BINARY)[1]

    def _footprint_rotation(self, M: np.ndarray) -> tuple[int, int, int, int] | None:
        """Pixel box (x0, y0, x1, y1), end exclusive, holding every target pixel that the homography ``M`` maps
        inside the source image (+1 px margin), or None when the source's view reaches behind the target camera
        (unbounded footprint). The footprint is the convex image of the source rectangle's corners."""
        c = np.linalg.solve(M, self._src_corners)
        if (c[2] <= 1e-9).any():
            return None
        x, y = c[0] / c[2], c[1] / c[2]
        return (int(np.floor(x.min())) - 1, int(np.floor(y.min())) - 1,
                int(np.ceil(x.max())) + 2, int(np.ceil(y.max())) + 2)

    def _footprint_maps(self, maps: tuple[np.ndarray, np.ndarray], block: tuple[slice, slice]) -> tuple[int, int, int, int]:
        """Pixel box (x0, y0, x1, y1), end exclusive, holding every target pixel whose upsampled map can land
        inside the source. An upsampled value is a convex combination of its 2x2 coarse neighbours, so it can
        only be >= -1 if some neighbour is, etc.: intersect the boxes of the four one-sided conditions. ``maps``
        cover the coarse grid ``block``."""
        mu, mv = maps
        by, bx = block[0].start, block[1].start
        x0, y0, x1, y1 = 0, 0, self.w, self.h
        for mask in (mu >= -1, mu <= self.w, mv >= -1, mv <= self.h):
            rows, cols = np.flatnonzero(mask.any(axis=1)) + by, np.flatnonzero(mask.any(axis=0)) + bx
            if not len(rows):
                return 0, 0, 0, 0
            # fine pixel x reads coarse cells floor((x + .5) * scale - .5) and the next one
            x0 = max(x0, int(np.floor((cols[0] - 0.5) / self._map_scale[0] - 0.5)) - 2)
            x1 = min(x1, int(np.ceil((cols[-1] + 1.5) / self._map_scale[0] - 0.5)) + 2)
            y0 = max(y0, int(np.floor((rows[0] - 0.5) / self._map_scale[1] - 0.5)) - 2)
            y1 = min(y1, int(np.ceil((rows[-1] + 1.5) / self._map_scale[1] - 0.5)) + 2)
        return x0, y0, x1, y1

    def coarse_hit_points(self, c2w: np.ndarray) -> np.ndarray:
        """Room hit points (h/MAP_STEP, w/MAP_STEP, 3) float32 of ``c2w``'s rays on the coarse map grid."""
        R, t = c2w[:3, :3], c2w[:3, 3]
        d = self._coarse_rays @ R.T.astype(np.float32)
        hits: np.ndarray = (t + d * self.room.hit(t, d)[..., None]).astype(np.float32)
        return hits

    def render(
        self,
        c2w_t: np.ndarray,
        sources: Iterable[tuple[object, np.ndarray, np.ndarray]],
        texture: Texture,
        stats: RenderStats | None = None,
    ) -> np.ndarray:
        """Render view ``c2w_t`` from ``sources`` = iterable of (id, c2w, RGBA image), composited in the given
        order (first wins); pixels no source covers come from ``texture``. Returns (H, W, 4) uint8, alpha 255.

        Whether a source can still help is judged on the coarse test grid (every 8th row and column, plus the
        last): once every test pixel is filled no later source is warped, and a source none of whose test points
        land in it is skipped. So a hole smaller than the grid's spacing (at most 7 x 7 pixels between filled test
        pixels) takes the texture even where a later source would cover it: the price of skipping most sources."""
        import cv2

        out = np.zeros((self.h, self.w, 4), np.uint8)
        filled = np.zeros((self.h, self.w), np.uint8)
        hits: tuple[np.ndarray, np.ndarray] | None = None  # the target's hit points: coarse map grid, test grid
        for sid, c2w_s, img in sources:
            # Cheap coarse test first: does this source see any still-empty pixel? (skips most sources)
            todo = filled.take(self._cy, 0).take(self._cx, 1) == 0  # == filled[self._coarse_ix], faster
            if not todo.any():
                break
            same_centre = np.linalg.norm(c2w_s[:3, 3] - c2w_t[:3, 3]) < 1e-9
            if same_centre:
                f_s, f_t = c2w_s[:3, 2], c2w_t[:3, 2]
                if np.arccos(np.clip(f_s @ f_t, -1, 1)) >= self._max_axis_angle:
                    continue  # the two viewing cones cannot intersect
                M = self.K_cv @ c2w_s[:3, :3].T @ c2w_t[:3, :3] @ self.K_cv_inv
                foot = self._footprint_rotation(M)
                if foot is None:
                    q = self._coarse_px[todo] @ M.T
                else:  # test points outside the footprint box cannot land in the source: test only the others
                    gy = slice(*np.searchsorted(self._cy, [foot[1], foot[3]]))
                    gx = slice(*np.searchsorted(self._cx, [foot[0], foot[2]]))
                    q = self._coarse_px[gy, gx][todo[gy, gx]] @ M.T
                ok = q[:, 2] > 1e-6
                qx, qy = q[ok, 0] / q[ok, 2], q[ok, 1] / q[ok, 2]
            else:
                if hits is None:
                    hits = (self.coarse_hit_points(c2w_t), self._test_points(c2w_t))
                Xc, test_pts = hits
                p = (test_pts[todo] - c2w_s[:3, 3]) @ c2w_s[:3, :3]
                ok = p[:, 2] > 1e-4
                qx = self.K_cv[0, 0] * p[ok, 0] / p[ok, 2] + self.K_cv[0, 2]
                qy = self.K_cv[1, 1] * p[ok, 1] / p[ok, 2] + self.K_cv[1, 2]
            # within 1e-6 px: a test point on the border mapped by a same-pose source lands a rounding error out
            eps = 1e-6
            if not np.any((qx >= -eps) & (qx <= self.w - 1 + eps) & (qy >= -eps) & (qy <= self.h - 1 + eps)):
                continue
            # Only pixels that are still empty and that the source can cover can change (every op below is per
            # pixel, so a window gives the same values there as the whole frame).
            x, y, bw, bh = cv2.boundingRect(_empty(filled))
            if not same_centre:
                block = self._coarse_block(x, y, x + bw, y + bh)
                maps = self._coarse_maps(Xc[block], c2w_s)
                foot = self._footprint_maps(maps, block)
            if foot is not None:
                x, y, x1, y1 = max(x, foot[0]), max(y, foot[1]), min(x + bw, foot[2]), min(y + bh, foot[3])
                bw, bh = x1 - x, y1 - y
            if stats is not None:
                stats.warps += 1  # counted whether or not it adds pixels (the trace reports it)
            added = self._warp_bands(out, filled, (x, y, bw, bh), img, M if same_centre else None,
                                     None if same_centre else (block, maps))
            if added and stats is not None:
                stats.sources_used.add(sid)
        self._fill_holes(out, filled, c2w_t, texture, stats)
        out[..., 3] = 255
        return out

    def _warp_bands(
        self,
        out: np.ndarray,
        filled: np.ndarray,
        window: tuple[int, int, int, int],
        img: np.ndarray,
        M: np.ndarray | None,
        rays: tuple[tuple[slice, slice], tuple[np.ndarray, np.ndarray]] | None,
    ) -> bool:
        """Warp source ``img`` into the still-empty pixels of ``window`` = (x, y, w, h) of ``out`` (updating
        ``filled``): by the homography ``M`` for a source at the target's centre, else by the coarse ray ``maps``
        of ``block`` (``rays`` = (block, maps)). True when it added a pixel."""
        import cv2

        x, y, bw, bh = window
        added = False
        # Empty pixels left between earlier sources often form thin slanted strips: warp band by band, each
        # band only over its empty pixels' box.
        # (an empty window, e.g. a footprint beside the empty pixels' box, has nothing to warp)
        for by in range(y, y + (bh if bw > 0 and bh > 0 else 0), self.BAND_ROWS):
            by1 = min(by + self.BAND_ROWS, y + bh)
            ex, ey, ew, eh = cv2.boundingRect(_empty(filled[by:by1, x:x + bw]))
            if ew == 0:
                continue
            roi = (slice(by + ey, by + ey + eh), slice(x + ex, x + ex + ew))
            if rays is None:
                assert M is not None
                warped, valid = self._warp_rotation(M, img, roi)
            else:
                block, maps = rays
                blk = self._coarse_block(roi[1].start, roi[0].start, roi[1].stop, roi[0].stop)
                rel = tuple(slice(b.start - a.start, b.stop - a.start) for a, b in zip(block, blk))
                warped, valid = self._warp_rays((maps[0][rel], maps[1][rel]), blk, img, roi)
            filled_roi = filled[roi]
            new = cv2.bitwise_and(valid, cv2.bitwise_not(filled_roi))
            if cv2.countNonZero(new) == 0:
                continue
            cv2.copyTo(warped, new, out[roi])  # writes through the view
            cv2.bitwise_or(filled_roi, new, dst=filled_roi)
            added = True
        return added

    def _fill_holes(
        self, out: np.ndarray, filled: np.ndarray, c2w_t: np.ndarray, texture: Texture, stats: RenderStats | None
    ) -> None:
        """Pixels of ``out`` no source covered (``filled == 0``) take the room ``texture`` at their ray's hit."""
        hole = filled == 0
        if hole.any():
            R, t = c2w_t[:3, :3], c2w_t[:3, 3]
            d = self.rays_cam[hole] @ R.T.astype(np.float32)
            pts = t + d * self.room.hit(t, d)[:, None]
            out[hole, :3] = texture(pts)
            if stats is not None:
                stats.synth_pixels += int(hole.sum())

    def _test_points(self, c2w: np.ndarray) -> np.ndarray:
        """Room hit points on the coarse *test* grid (the ``_cy`` x ``_cx`` pixels)."""
        R, t = c2w[:3, :3], c2w[:3, 3]
        d = self._test_rays @ R.T.astype(np.float32)
        hits: np.ndarray = t + d * self.room.hit(t, d)[..., None]
        return hits


def frames_of_latent(i: int, stride: int, num_frames: int) -> range:
    """Pixel frames encoded by latent ``i`` of a causal VAE: latent 0 -> frame 0, latent i -> 4i-3 .. 4i."""
    if i == 0:
        return range(1)
    return range(stride * i - (stride - 1), min(stride * i, num_frames - 1) + 1)


def rollout(
    image: np.ndarray,
    c2w: np.ndarray,
    K: np.ndarray,
    policy: ContextPolicy,
    seed_parts: tuple[Any, ...],
    sink: Callable[[np.ndarray], None],
    stride: int = 4,
    room: Room = _DEFAULT_ROOM,
    event: Any = None,
) -> dict[str, Any]:
    """Generate a whole rollout and hand frames to ``sink``; returns the context trace and timings.

    Args:
        image: (H, W, 3) uint8 conditioning frame at the canvas size (frame 0 of the video).
        c2w: (T, 4, 4) per-frame poses (OpenCV c2w, world = frame 0). K: (3, 3) canvas intrinsics.
        policy: the KV-context policy (chunk size in latents). seed_parts: the item's seed identity.
        event: optional procedural dynamic event (:mod:`adapters.reference.events`) drawn into the frames; its
            state follows the admitted context (hooks: ``begin_chunk``, ``draw``, ``end_latent``).
    """
    h, w = image.shape[:2]
    T = c2w.shape[0]
    n_lat = latents_for_frames(T, stride)
    anchors = [min(stride * i, T - 1) for i in range(n_lat)]
    latent_c2w = c2w[anchors]
    selector = ContextSelector(policy, latent_c2w, K, h, w)
    renderer = ReferenceRenderer(K, h, w, room)
    base_rgb = image.reshape(-1, 3).mean(axis=0)
    image_rgba = np.dstack([image, np.full((h, w), 255, np.uint8)])
    memory: dict[int, np.ndarray] = {}
    trace, chunk_times = [], []
    total_stats = RenderStats()
    t_start = time.perf_counter()
    for k in range(selector.num_chunks):
        t0 = time.perf_counter()
        sel = selector.select(k)
        if event is not None:
            event.begin_chunk(sel.context)
        texture = Texture(stable_seed(*seed_parts, "chunk", k), base_rgb)
        stats = RenderStats()
        ctx = [(lat, latent_c2w[lat], memory[lat]) for lat in sel.context]
        done_current: list[tuple[object, np.ndarray, np.ndarray]] = []
        prev: tuple[object, np.ndarray, np.ndarray] | None = None
        for lat in sel.current:
            for t in frames_of_latent(lat, stride, T):
                if t == 0:
                    frame = image_rgba
                else:
                    srcs = ctx + done_current + ([prev] if prev is not None else [])
                    frame = renderer.render(c2w[t], srcs, texture, stats)
                if event is not None:
                    frame = event.draw(t, c2w[t], frame, renderer)
                sink(frame[..., :3])
                prev = (f"frame{t}", c2w[t], frame)
            memory[lat] = frame  # the latent's anchor (its last frame)
            if event is not None:
                event.end_latent(lat, t)
            done_current.append((lat, latent_c2w[lat], frame))
        if not policy.needs_full_history:  # memory-bounded: drop what sliding can never select again
            keep = set(selector.select(k + 1).context) if k + 1 < selector.num_chunks else set()
            for lat in [m for m in memory if m not in keep]:
                del memory[lat]
        entry = sel.to_trace()
        entry["sources_used"] = sorted(int(s) for s in stats.sources_used if isinstance(s, (int, np.integer)))
        entry["warps"] = stats.warps
        entry["synth_fraction"] = round(stats.synth_pixels / float(h * w * max(1, sum(len(frames_of_latent(l, stride, T)) for l in sel.current))), 6)
        trace.append(entry)
        chunk_times.append(time.perf_counter() - t0)
        total_stats.warps += stats.warps
    elapsed = time.perf_counter() - t_start
    return {
        "context_trace": trace,
        "timings": {"generate_s": elapsed, "fps": T / elapsed if elapsed > 0 else float("inf")},
        "chunk_seconds": chunk_times,
        "num_latents": n_lat,
        "latent_anchor_frames": anchors,
        "warps": total_stats.warps,
    }
