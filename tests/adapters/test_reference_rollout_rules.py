"""The rules of adapters/reference/model.py's rendering and rollout, one at a time and in this process: the seed of an
item (:func:`stable_seed`), the room texture (:class:`Texture`), the render statistics, :meth:`ReferenceRenderer.render`
(hole filling, compositing order, the cheap coarse "does this source help?" test, the warp windows and bands),
:func:`frames_of_latent` and :func:`rollout` (sources of each frame, event hooks, memory, trace, timings).

Canvases are tiny. Where the renderer's internal warp calls are the rule (bands, windows, skipped sources), a
subclass of the real renderer records them and calls the real methods (:class:`Spy`). The expected values are derived
by hand (exact pixel positions of a projection, band boundaries) or with numpy from the documented formula.
"""

from __future__ import annotations

import math
import types
import zlib

import numpy as np
import pytest

from adapters.reference import model
from adapters.reference.model import (
    ReferenceRenderer,
    RenderStats,
    Texture,
    _empty,
    frames_of_latent,
    rollout,
    stable_seed,
)
from harness.context import ContextPolicy, ContextSelector
from harness.scene import Room
from trajectories.conventions import pixel_rays, rot_x, rot_y, rotmat_from_yaw_pitch, se3

H, W = 16, 24
K = np.array([[20.0, 0.0, 12.0], [0.0, 20.0, 8.0], [0.0, 0.0, 1.0]])
#: a larger canvas (90 deg wide) for bands (32 rows) and footprint windows
BH, BW = 40, 48
BK = np.array([[24.0, 0.0, 24.0], [0.0, 24.0, 20.0], [0.0, 0.0, 1.0]])
#: with this base the texture stays >= 55 in every channel (230 - 25 - 45 * sqrt(6) - 40): never the SOURCE colour
BASE = np.full(3, 230.0)
SOURCE = (3, 3, 3)


def rgba(rgb: np.ndarray, alpha: int = 255) -> np.ndarray:
    return np.dstack([rgb, np.full(rgb.shape[:2], alpha, np.uint8)])


def solid(colour, h: int = H, w: int = W, alpha: int = 255) -> np.ndarray:
    img = np.empty((h, w, 4), np.uint8)
    img[..., :3] = colour
    img[..., 3] = alpha
    return img


def noise(h: int = H, w: int = W, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def texture(seed: int = 5) -> Texture:
    return Texture(stable_seed(seed), BASE)


def expected_synth(tex: Texture, c2w: np.ndarray, k: np.ndarray, h: int, w: int, hole: np.ndarray) -> np.ndarray:
    """The texture at the room hits of the ``hole`` pixels' rays (float32 rays, as the renderer's documented grid)."""
    rays = pixel_rays(k, h, w).astype(np.float32)[hole] @ c2w[:3, :3].T.astype(np.float32)
    t = c2w[:3, 3]
    return tex(t + rays * Room().hit(t, rays)[:, None])


class Spy(ReferenceRenderer):
    """The real renderer, recording each warp (kind, rows, columns) and each footprint test."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple] = []

    def _warp_rotation(self, M, src, roi=None):
        self.calls.append(("rotation", roi[0].start, roi[0].stop, roi[1].start, roi[1].stop))
        return super()._warp_rotation(M, src, roi)

    def _warp_rays(self, maps, block, src, roi):
        self.calls.append(("rays", roi[0].start, roi[0].stop, roi[1].start, roi[1].stop))
        return super()._warp_rays(maps, block, src, roi)

    def _footprint_rotation(self, M):
        self.calls.append(("footprint",))
        return super()._footprint_rotation(M)

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


# -- module level: the empty-pixel mask, the seed, the statistics, the class constants ---------------------------------
def test_the_empty_mask_is_one_exactly_where_nothing_was_filled():
    filled = np.array([[0, 255, 1], [0, 0, 255]], np.uint8)
    mask = _empty(filled)
    assert mask.dtype == np.uint8
    assert mask.tolist() == [[1, 0, 0], [1, 1, 0]]


def test_a_seed_keeps_ints_as_they_are_and_hashes_strings_with_crc32():
    seq = stable_seed(3, np.int64(7), "case", 2.5)
    assert list(seq.entropy) == [3, 7, zlib.crc32(b"case"), zlib.crc32(b"2.5")]


def test_equal_seed_parts_give_equal_draws_and_other_parts_other_draws():
    a = np.random.default_rng(stable_seed(1, "x")).random(3)
    assert np.array_equal(a, np.random.default_rng(stable_seed(1, "x")).random(3))
    assert not np.array_equal(a, np.random.default_rng(stable_seed(1, "y")).random(3))


def test_render_stats_start_at_zero_with_an_own_empty_set():
    a, b = RenderStats(), RenderStats()
    assert (a.warps, a.synth_pixels, a.sources_used) == (0, 0, set())
    a.sources_used.add(1)
    assert b.sources_used == set()


def test_translation_maps_are_computed_every_fourth_pixel():
    r = ReferenceRenderer(K, H, W)
    assert ReferenceRenderer.MAP_STEP == 4
    assert r.coarse_hit_points(np.eye(4)).shape == (H // 4, W // 4, 3)


# -- Texture --------------------------------------------------------------------------------------------------------
def test_a_texture_draws_its_waves_base_and_salt_in_the_documented_order():
    tex = Texture(stable_seed(11), np.array([100.0, 50.0, 20.0]))
    rng = np.random.default_rng(stable_seed(11))
    dirs = rng.normal(size=(6, 3))
    freq = rng.uniform(1.0, 6.0, size=(6, 1))
    phase = rng.uniform(0, 2 * np.pi, size=6)
    amp = rng.uniform(-1, 1, size=(6, 3)) * 45.0 / np.sqrt(6)
    base = np.array([100.0, 50.0, 20.0]) + rng.uniform(-25, 25, size=3)
    salt = rng.integers(1, 2**31 - 1, size=3)
    assert tex.k.shape == (6, 3) and tex.k.dtype == np.float32
    np.testing.assert_allclose(tex.k, dirs / np.linalg.norm(dirs, axis=1)[:, None] * freq, rtol=1e-6)
    np.testing.assert_allclose(tex.phase, phase, rtol=1e-6)
    np.testing.assert_allclose(tex.amp, amp, rtol=1e-6)
    np.testing.assert_allclose(tex.base, base, rtol=1e-6)
    assert tex.salt.tolist() == salt.tolist()
    assert (tex.tile_size, tex.tile_amplitude) == (0.25, 40.0)


def test_wave_count_and_amplitude_are_parameters():
    tex = Texture(stable_seed(11), np.zeros(3), waves=2, amplitude=10.0)
    rng = np.random.default_rng(stable_seed(11))
    rng.normal(size=(2, 3)), rng.uniform(1.0, 6.0, size=(2, 1)), rng.uniform(0, 2 * np.pi, size=2)
    assert tex.k.shape == (2, 3)
    np.testing.assert_allclose(tex.amp, rng.uniform(-1, 1, size=(2, 3)) * 10.0 / np.sqrt(2), rtol=1e-6)


def _tile_offsets(points, tile_size, amplitude, salt):
    rows = []
    for p in points:
        i, j, k = (math.floor(c / tile_size) for c in p)
        h = (i * 73856093) ^ (j * 19349663) ^ (k * 83492791)
        rows.append([((h * 2654435761 + int(s)) % 1000003 / 1000003.0 - 0.5) * 2 * amplitude for s in salt])
    return np.array(rows)


POINTS = np.array([[0.1, 0.3, 0.6], [-0.1, 1.3, 3.9], [2.2, -1.7, -0.4], [0.3, 0.1, 0.6], [-3.9, 0.9, 1.1]])


def test_tile_offsets_are_the_integer_hash_of_the_tile_index():
    tex = texture()
    got = tex._tiles(POINTS)
    assert got.shape == (5, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, _tile_offsets(POINTS, 0.25, 40.0, tex.salt), rtol=0, atol=2e-6)


def test_tile_offsets_follow_a_chosen_tile_size_and_amplitude():
    tex = Texture(stable_seed(5), BASE, tile_size=1.0, tile_amplitude=10.0)
    np.testing.assert_allclose(tex._tiles(POINTS), _tile_offsets(POINTS, 1.0, 10.0, tex.salt), rtol=0, atol=2e-6)


def test_points_of_one_tile_share_an_offset_within_the_amplitude():
    tex = texture()
    got = tex._tiles(np.array([[0.26, 0.3, 0.74], [0.49, 0.45, 0.51], [0.51, 0.3, 0.74]]))
    assert np.array_equal(got[0], got[1]) and not np.array_equal(got[0], got[2])
    assert np.abs(tex._tiles(np.random.default_rng(0).uniform(-4, 4, (200, 3)))).max() <= 40.0


def test_a_colour_is_base_plus_waves_plus_tiles():
    tex = texture()
    s = np.sin(POINTS @ tex.k.T.astype(np.float64) + tex.phase)
    want = np.clip(tex.base + s @ tex.amp + _tile_offsets(POINTS, 0.25, 40.0, tex.salt), 0, 255)
    got = tex(POINTS)
    assert got.dtype == np.uint8 and got.shape == (5, 3)
    assert np.abs(got.astype(float) - np.floor(want)).max() <= 1


def test_colours_are_clipped_to_the_uint8_range():
    assert Texture(stable_seed(1), np.full(3, -1000.0))(POINTS).tolist() == [[0, 0, 0]] * 5
    assert Texture(stable_seed(1), np.full(3, 1000.0))(POINTS).tolist() == [[255, 255, 255]] * 5


# -- render: holes --------------------------------------------------------------------------------------------------
def test_with_no_source_every_pixel_is_the_texture_at_its_rays_room_hit():
    r = ReferenceRenderer(K, H, W)
    tex = texture()
    c2w = se3(rot_y(0.3) @ rot_x(-0.2), [0.5, -0.2, 1.0])
    stats = RenderStats()
    out = r.render(c2w, [], tex, stats)
    assert out.shape == (H, W, 4) and out.dtype == np.uint8
    hole = np.ones((H, W), bool)
    assert np.array_equal(out[..., :3].reshape(-1, 3), expected_synth(tex, c2w, K, H, W, hole))
    assert (out[..., 3] == 255).all()
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (0, H * W, set())


def test_only_the_pixels_no_source_covers_are_synthesised():
    r = ReferenceRenderer(K, H, W)
    tex = texture()
    src = solid(SOURCE, alpha=255)
    src[2:6, 5:9, 3] = 0  # a transparent 4x4 patch: nothing covers it
    stats = RenderStats()
    out = r.render(np.eye(4), [(4, np.eye(4), src)], tex, stats)
    hole = np.zeros((H, W), bool)
    hole[2:6, 5:9] = True
    assert np.array_equal(out[hole][:, :3], expected_synth(tex, np.eye(4), K, H, W, hole))
    assert (out[~hole][:, :3] == SOURCE).all() and (out[..., 3] == 255).all()
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (1, 16, {4})


def test_stats_are_optional():
    r = ReferenceRenderer(K, H, W)
    src = rgba(noise())
    src[0, 0, 3] = 0
    with_stats = r.render(np.eye(4), [(1, np.eye(4), src)], texture(), RenderStats())
    assert np.array_equal(r.render(np.eye(4), [(1, np.eye(4), src)], texture(), None), with_stats)


# -- render: compositing and the statistics -------------------------------------------------------------------------
@pytest.mark.parametrize("centre", [(0.0, 0.0, 0.0), (0.5, -0.25, 1.0)])
def test_a_source_at_the_targets_pose_is_copied_exactly_by_the_homography(centre):
    r = Spy(K, H, W)
    img = noise()
    c2w = se3(rot_y(0.2) @ rot_x(0.1), centre)
    stats = RenderStats()
    out = r.render(c2w, [(7, c2w.copy(), rgba(img))], texture(), stats)
    assert np.array_equal(out[..., :3], img) and (out[..., 3] == 255).all()
    assert "rays" not in r.kinds() and "rotation" in r.kinds()
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (1, 0, {7})


def test_the_first_source_wins_and_a_full_frame_stops_the_others():
    r = Spy(K, H, W)
    stats = RenderStats()
    out = r.render(np.eye(4), [(1, np.eye(4), solid((10, 20, 30))), (2, np.eye(4), solid((40, 50, 60)))],
                   texture(), stats)
    assert (out[..., :3] == (10, 20, 30)).all()
    assert r.kinds().count("footprint") == 1  # the second source is not even tested
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (1, 0, {1})


def test_a_later_source_fills_only_what_the_earlier_left_empty():
    r = ReferenceRenderer(K, H, W)
    first = solid((10, 20, 30))
    first[:, 16:, 3] = 0
    stats = RenderStats()
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, np.eye(4), solid((40, 50, 60)))], texture(), stats)
    assert (out[:, :16, :3] == (10, 20, 30)).all() and (out[:, 16:, :3] == (40, 50, 60)).all()
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (2, 0, {1, 2})


def test_a_source_that_adds_no_pixel_counts_as_a_warp_but_not_as_used():
    r = ReferenceRenderer(K, H, W)
    stats = RenderStats()
    r.render(np.eye(4), [(1, np.eye(4), solid((10, 20, 30), alpha=0))], texture(), stats)
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (1, H * W, set())


def test_a_moved_source_is_warped_along_rays_and_its_pixels_land_where_they_project():
    """Sideways move: target pixel u sees the wall point that the source sees at u - fx * dx / Z (affine per wall)."""
    r = Spy(K, H, W)
    tex = texture()
    u = np.arange(W)
    grad = np.zeros((H, W, 3), np.uint8)
    grad[..., 0] = 10 * u[None, :]
    grad[..., 1] = 10 * np.arange(H)[:, None]
    c2w_s = se3(np.eye(3), [0.4, 0.0, 0.0])
    stats = RenderStats()
    out = r.render(np.eye(4), [(3, c2w_s, rgba(grad))], tex, stats)
    assert r.kinds() and set(r.kinds()) == {"rays"}
    rays = pixel_rays(K, H, W)
    hit = rays * Room().hit(np.zeros(3), rays)[..., None]
    qx = K[0, 0] * (hit[..., 0] - 0.4) / hit[..., 2] + K[0, 2] - 0.5
    inside = (qx > 0.3) & (qx < W - 1.3)
    inner = inside.copy()  # the maps are upsampled from block centres: the outer 2 pixels are clamped, not exact
    inner[:2], inner[-2:], inner[:, :2], inner[:, -2:] = False, False, False, False
    assert inner.sum() > H * W // 3
    err = np.abs(out[..., 0].astype(float) - 10 * qx)[inner]  # 10 levels a pixel; inexact at the wall edges
    assert np.median(err) <= 1.0 and err.max() <= 12.0
    assert np.abs(out[..., 1].astype(float) - 10 * np.arange(H)[:, None])[inner].max() <= 1
    outside = (qx < -1.3) | (qx > W + 0.3)
    assert outside.any()
    assert np.array_equal(out[outside][:, :3], expected_synth(tex, np.eye(4), K, H, W, outside))
    assert stats.sources_used == {3} and stats.warps == 1


def _foot_rotation(r, c2w_t):
    M = r.K_cv @ c2w_t[:3, :3] @ r.K_cv_inv  # source at the identity pose: K R_s^T R_t K^-1
    return r._footprint_rotation(M)


def _rotation_coverage(c2w_t, c2w_s, k, h, w):
    """(inside, outside) masks of target pixels whose ray lands in the source image by >= 0.3 px / off it by >= 0.3."""
    k_cv = k.copy()
    k_cv[:2, 2] -= 0.5
    uu, vv = np.meshgrid(np.arange(w, dtype=float), np.arange(h, dtype=float))
    pix = np.stack([uu, vv, np.ones_like(uu)], -1)
    q = pix @ (k_cv @ c2w_s[:3, :3].T @ c2w_t[:3, :3] @ np.linalg.inv(k_cv)).T
    front = q[..., 2] > 1e-6
    qx = np.where(front, q[..., 0] / np.where(front, q[..., 2], 1), -99)
    qy = np.where(front, q[..., 1] / np.where(front, q[..., 2], 1), -99)
    inside = front & (qx > 0.3) & (qx < w - 1.3) & (qy > 0.3) & (qy < h - 1.3)
    outside = ~front | (qx < -0.3) | (qx > w - 0.7) | (qy < -0.3) | (qy > h - 0.7)
    return inside, outside


@pytest.mark.parametrize("yaw,pitch,bounded", [(0.35, 0.0, True), (-0.3, 0.2, True), (1.05, 0.0, False),
                                               (-1.05, 0.1, False), (0.3, -1.0, False)])
def test_a_turned_source_covers_the_pixels_its_homography_maps_inside_it(yaw, pitch, bounded):
    """40x48 canvas, 90 deg wide: beyond ~37 deg the source's view reaches behind the target camera (no footprint box)."""
    r = ReferenceRenderer(BK, BH, BW)
    tex = texture()
    c2w_t = se3(rotmat_from_yaw_pitch(yaw, pitch))
    assert (_foot_rotation(r, c2w_t) is not None) == bounded
    stats = RenderStats()
    out = r.render(c2w_t, [(5, np.eye(4), solid(SOURCE, BH, BW))], tex, stats)
    inside, outside = _rotation_coverage(c2w_t, np.eye(4), BK, BH, BW)
    assert inside.sum() > 100 and outside.sum() > 100
    assert (out[inside][:, :3] == SOURCE).all()
    assert np.array_equal(out[outside][:, :3], expected_synth(tex, c2w_t, BK, BH, BW, outside))
    assert stats.sources_used == {5} and stats.warps == 1


# -- render: the coarse test (which sources are skipped) ------------------------------------------------------------
@pytest.mark.parametrize("yaw,pitch", [(0.2, 0.7), (-0.8, -0.5), (-0.9, -0.3)])
def test_a_strongly_turned_source_that_covers_a_corner_is_warped(yaw, pitch):
    """16x24 canvas: the source lands in one corner of the target, far from the other sides of its footprint box."""
    r = ReferenceRenderer(K, H, W)
    c2w_t = se3(rotmat_from_yaw_pitch(yaw, pitch))
    assert _foot_rotation(r, c2w_t) is not None
    stats = RenderStats()
    out = r.render(c2w_t, [(5, np.eye(4), solid(SOURCE))], texture(), stats)
    inside, _ = _rotation_coverage(c2w_t, np.eye(4), K, H, W)
    assert inside.any() and (out[inside][:, :3] == SOURCE).all()
    assert stats.warps == 1 and stats.sources_used == {5}


def test_a_source_turned_by_the_widest_view_angle_is_skipped_before_any_projection():
    """8x6 canvas with fx = 5: the half diagonal is atan(1) = 45 deg, so two views 90 deg apart cannot overlap."""
    k = np.array([[5.0, 0.0, 3.0], [0.0, 5.0, 4.0], [0.0, 0.0, 1.0]])
    exact_right = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # rot_y(90 deg), exact zeros
    r = Spy(k, 8, 6)
    stats = RenderStats()
    r.render(np.eye(4), [(1, se3(exact_right), solid(SOURCE, 8, 6))], texture(), stats)
    assert r.calls == [] and (stats.warps, stats.synth_pixels) == (0, 48)
    r.render(np.eye(4), [(1, se3(rot_y(np.deg2rad(89))), solid(SOURCE, 8, 6))], texture())
    assert r.kinds() == ["footprint"]  # just inside the angle: it is projected (and lands nowhere)


@pytest.mark.parametrize("yaw,pitch", [(1.15, 0.0), (-1.15, 0.0), (0.0, 0.87), (0.0, -0.87), (0.0, 1.2), (0.0, -1.2)])
def test_a_source_turned_past_the_field_of_view_but_within_the_widest_angle_is_tested_and_not_warped(yaw, pitch):
    """16x24 with fx = 20: 62 deg wide, 43.6 deg high, 71.6 deg corner to corner: 66 deg of yaw or 50 deg of pitch
    leave no overlap, though the coarse test has to run (the axes are closer than the widest angle). At 69 deg of
    pitch the source's view reaches behind the target camera: every still-empty test point is projected."""
    r = Spy(K, H, W)
    stats = RenderStats()
    r.render(se3(rotmat_from_yaw_pitch(yaw, pitch)), [(1, np.eye(4), solid(SOURCE))], texture(), stats)
    assert r.kinds() == ["footprint"]
    assert (stats.warps, stats.synth_pixels, stats.sources_used) == (0, H * W, set())


def test_a_source_looking_exactly_backwards_is_skipped_even_when_rounding_pushes_the_cosine_below_minus_one():
    R_t = rot_y(0.261749948792537) @ rot_x(2.610434542726609)
    R_s = R_t @ np.diag([-1.0, 1.0, -1.0])  # turned 180 deg: forward axis exactly -forward
    assert R_s[:, 2] @ R_t[:, 2] < -1.0
    r = Spy(K, H, W)
    r.render(se3(R_t), [(1, se3(R_s), solid(SOURCE))], texture())
    assert r.calls == []


#: 17 x 25 canvas, fx = fy = 16, OpenCV centre (16, 8): the test-grid pixel (row 8, column 16) looks exactly along +z
#: and hits the front wall at (0, 0, 4), so a source moved by (tx, ty, tz) sees it at x = 16 - 16 tx / (4 - tz),
#: y = 8 - 16 ty / (4 - tz), exactly.
RING_K = np.array([[16.0, 0.0, 16.5], [0.0, 16.0, 8.5], [0.0, 0.0, 1.0]])


@pytest.mark.parametrize("t_source,warped", [
    ((4.0, 0.0, 0.0), True),     # x = 0: on the left edge
    ((4.25, 0.0, 0.0), False),   # x = -1
    ((-2.0, 0.0, 0.0), True),    # x = 24 = w - 1: on the right edge
    ((-2.25, 0.0, 0.0), False),  # x = 25
    ((0.0, 2.0, 0.0), True),     # y = 0
    ((0.0, 2.25, 0.0), False),   # y = -1
    ((0.0, -2.0, 0.0), True),    # y = 16 = h - 1
    ((0.0, -2.25, 0.0), False),  # y = 17
    ((0.0, 0.0, 3.5), True),     # half a unit in front of the wall point: x = 16, y = 8
    ((0.0, 0.0, 4.5), False),    # behind the source
    ((2.0, 1.0, 2.0), True),     # x = 0, y = 0
    ((-1.0, -0.5, 2.0), True),   # x = 24, y = 16
])
def test_a_moved_source_is_warped_when_a_still_empty_test_point_lands_on_its_image(t_source, warped):
    """The first source (at the target's pose) fills every pixel but the one test point (8, 16)."""
    r = ReferenceRenderer(RING_K, 17, 25)
    first = solid((10, 20, 30), 17, 25)
    first[8, 16, 3] = 0
    stats = RenderStats()
    r.render(np.eye(4), [(1, np.eye(4), first), (2, se3(np.eye(3), t_source), solid(SOURCE, 17, 25))],
             texture(), stats)
    assert stats.warps == (2 if warped else 1)


@pytest.mark.parametrize("t_source,warped", [
    ((4.0, 0.0, 0.0), True), ((4.25, 0.0, 0.0), False), ((-2.0, 0.0, 0.0), True), ((-2.25, 0.0, 0.0), False),
    ((0.0, 2.0, 0.0), True), ((0.0, 2.25, 0.0), False), ((0.0, -2.0, 0.0), True), ((0.0, -2.25, 0.0), False),
])
def test_the_same_edges_hold_for_a_target_away_from_the_origin(t_source, warped):
    """Target at (1, 0.5, 1) looking +z: its centre ray hits (1, 0.5, 4); the source is moved relative to it."""
    r = ReferenceRenderer(RING_K, 17, 25)
    first = solid((10, 20, 30), 17, 25)
    first[8, 16, 3] = 0
    c2w_t = se3(np.eye(3), [1.0, 0.5, 1.0])
    c2w_s = se3(np.eye(3), np.array([1.0, 0.5, 1.0]) + np.array(t_source) * 0.75)  # 3 units to the wall, not 4
    stats = RenderStats()
    r.render(c2w_t, [(1, c2w_t.copy(), first), (2, c2w_s, solid(SOURCE, 17, 25))], texture(), stats)
    assert stats.warps == (2 if warped else 1)


def test_a_test_point_exactly_1e4_in_front_of_a_moved_source_counts_as_behind_it():
    """Target turned right by exactly 90 deg: the centre ray hits the side wall at (4, 0, 0); a source at
    (4, 0, -d) looking +z sees that point straight ahead at depth d (x = 16, y = 8) when d > 1e-4."""
    c2w_t = se3(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]))
    warps = []
    for d in (1e-4, 2e-4):
        r = ReferenceRenderer(RING_K, 17, 25)
        first = solid((10, 20, 30), 17, 25)
        first[8, 16, 3] = 0
        stats = RenderStats()
        r.render(c2w_t, [(1, c2w_t.copy(), first), (2, se3(np.eye(3), [4.0, 0.0, -d]), solid(SOURCE, 17, 25))],
                 texture(), stats)
        warps.append(stats.warps)
    assert warps == [1, 2]


def test_a_hole_between_filled_test_points_takes_the_texture_though_a_later_source_covers_it():
    """Coverage is judged on the coarse test grid (every 8th row and column): once every test pixel is filled, no
    later source is warped (render's docstring), so a pixel off the grid left empty takes the texture."""
    r = ReferenceRenderer(K, H, W)
    first = solid((10, 20, 30))
    first[3, 3, 3] = 0
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, np.eye(4), solid((40, 50, 60)))], texture())
    textured = r.render(np.eye(4), [], texture())
    assert tuple(out[3, 3, :3]) == tuple(textured[3, 3, :3]) != (40, 50, 60)
    assert tuple(out[3, 4, :3]) == (10, 20, 30)
    first[0, 0, 3] = 0  # a test pixel left empty: the second source is warped and covers both holes
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, np.eye(4), solid((40, 50, 60)))], texture())
    assert tuple(out[3, 3, :3]) == tuple(out[0, 0, :3]) == (40, 50, 60)


def test_a_same_pose_source_covers_an_empty_corner_test_pixel():
    """The identity homography maps the corner test pixel a rounding error (about -2e-15 px) outside the image; it
    is still in, so the second source is warped and covers it."""
    first = solid((10, 20, 30))
    first[0, 0, 3] = 0
    stats = RenderStats()
    out = ReferenceRenderer(K, H, W).render(
        np.eye(4), [(1, np.eye(4), first), (2, np.eye(4), solid((40, 50, 60)))], texture(), stats)
    assert tuple(out[0, 0, :3]) == (40, 50, 60) and stats.synth_pixels == 0 and stats.sources_used == {1, 2}


def test_a_source_one_nanometre_away_is_a_moved_source():
    r = Spy(K, H, W)
    r.render(np.eye(4), [(1, se3(np.eye(3), [1e-9, 0.0, 0.0]), solid(SOURCE))], texture())
    assert r.kinds() == ["rays"]
    r.calls.clear()
    r.render(np.eye(4), [(1, se3(np.eye(3), [5e-10, 0.0, 0.0]), solid(SOURCE))], texture())
    assert r.kinds() == ["footprint", "rotation"]


def test_a_source_half_a_unit_away_is_warped_along_rays_not_by_a_homography():
    r = Spy(K, H, W)
    r.render(np.eye(4), [(1, se3(np.eye(3), [0.5, 0.0, 0.0]), solid(SOURCE))], texture())
    assert set(r.kinds()) == {"rays"}


# -- render / _warp_bands: windows and bands ------------------------------------------------------------------------
def test_warps_run_on_bands_of_32_rows_each_cropped_to_its_empty_pixels():
    r = Spy(BK, BH, BW)
    first = solid((10, 20, 30), BH, BW)
    first[5:20, 10:20, 3] = 0   # patch A
    first[38:40, 30:40, 3] = 0  # patch B, in the second band of the empty box [5, 40)
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, np.eye(4), solid((40, 50, 60), BH, BW))], texture())
    warps = [c[1:] for c in r.calls if c[0] == "rotation"]
    assert warps == [(0, 32, 0, 48), (32, 40, 0, 48), (5, 20, 10, 20), (38, 40, 30, 40)]
    assert (out[5:20, 10:20, :3] == (40, 50, 60)).all() and (out[38:40, 30:40, :3] == (40, 50, 60)).all()
    assert (out[20:38, :, :3] == (10, 20, 30)).all()


def test_a_one_pixel_wide_or_high_hole_is_still_warped():
    r = Spy(BK, BH, BW)
    first = solid((10, 20, 30), BH, BW)
    first[8, 16, 3] = 0  # a pixel of the coarse test grid (every 8th row and column)
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, np.eye(4), solid((40, 50, 60), BH, BW))], texture())
    assert [c[1:] for c in r.calls if c[0] == "rotation"][2:] == [(8, 9, 16, 17)]
    assert tuple(out[8, 16, :3]) == (40, 50, 60)


@pytest.mark.parametrize("yaw,pitch", [(-0.25, 0.2), (0.25, -0.2)])
def test_a_rotation_warp_is_cut_to_the_sources_footprint_box(yaw, pitch):
    r = Spy(BK, BH, BW)
    c2w_t = se3(rotmat_from_yaw_pitch(yaw, pitch))
    foot = _foot_rotation(r, c2w_t)
    assert foot is not None and (foot[0] > 0) == (yaw < 0) and (foot[2] < BW) == (yaw > 0)
    out = r.render(c2w_t, [(1, np.eye(4), solid(SOURCE, BH, BW))], texture())
    x0, y0, x1, y1 = max(0, foot[0]), max(0, foot[1]), min(BW, foot[2]), min(BH, foot[3])
    bands = [(by, min(by + 32, y1), x0, x1) for by in range(y0, y1, 32)]
    assert [c[1:] for c in r.calls if c[0] == "rotation"] == bands
    inside, _ = _rotation_coverage(c2w_t, np.eye(4), BK, BH, BW)
    assert (out[inside][:, :3] == SOURCE).all()


def test_a_rotation_warp_beside_the_empty_pixels_warps_nothing():
    """Only the left columns are empty; the source's footprint (target turned left) lies right of them."""
    r = Spy(BK, BH, BW)
    c2w_t = se3(rot_y(-0.6))
    foot = _foot_rotation(r, c2w_t)
    assert foot[0] > 8
    first = solid((10, 20, 30), BH, BW)
    first[:, :6, 3] = 0
    stats = RenderStats()
    r.render(c2w_t, [(1, c2w_t.copy(), first), (2, np.eye(4), solid(SOURCE, BH, BW))], texture(), stats)
    assert [c for c in r.calls if c[0] == "rotation"] == [("rotation", 0, 32, 0, 48), ("rotation", 32, 40, 0, 48)]
    assert stats.sources_used == {1} and stats.synth_pixels == BH * 6


def test_a_ray_warp_is_cut_to_the_footprint_of_its_maps():
    """Target 1.5 from the front wall, source 0.8 from it: the source sees a middle part of the target's view, so its
    footprint lies inside on every side."""
    r = Spy(BK, BH, BW)
    c2w_t, c2w_s = se3(np.eye(3), [0.0, 0.0, 2.5]), se3(np.eye(3), [0.0, 0.0, 3.2])
    block = r._coarse_block(0, 0, BW, BH)
    foot = r._footprint_maps(r._coarse_maps(r.coarse_hit_points(c2w_t)[block], c2w_s), block)
    assert 0 < foot[0] and 0 < foot[1] and foot[2] < BW and foot[3] < BH
    r.render(c2w_t, [(1, c2w_s, solid(SOURCE, BH, BW))], texture())
    x0, y0, x1, y1 = foot
    assert r.calls == [("rays", by, min(by + 32, y1), x0, x1) for by in range(y0, y1, 32)]


def test_a_ray_warp_of_a_later_source_reads_the_coarse_block_of_its_band():
    """Two moved sources: the second fills the still-empty bottom right through a coarse block that does not start
    at the grid's origin; its pixels are the ones its rays project to (sideways move, affine per wall)."""
    r = Spy(BK, BH, BW)
    first = solid((10, 20, 30), BH, BW)
    first[21:, 25:, 3] = 0
    grad = np.zeros((BH, BW, 3), np.uint8)
    grad[..., 0] = 5 * np.arange(BW)[None, :]
    grad[..., 1] = 5 * np.arange(BH)[:, None]
    c2w_s = se3(np.eye(3), [-0.2, 0.0, 0.0])
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, c2w_s, rgba(grad))], texture())
    assert (out[:21, :, :3] == (10, 20, 30)).all()
    rays = pixel_rays(BK, BH, BW)
    hit = rays * Room().hit(np.zeros(3), rays)[..., None]
    qx = BK[0, 0] * (hit[..., 0] + 0.2) / hit[..., 2] + BK[0, 2] - 0.5
    region = np.zeros((BH, BW), bool)
    region[21:, 25:] = True
    region &= qx < BW - 1.3
    err = np.abs(out[..., 0].astype(float) - 5 * qx)[region]  # 5 levels a pixel; inexact only at wall edges
    assert region.sum() > 300 and np.median(err) <= 1.0 and err.max() <= 6.0
    assert np.median(np.abs(out[..., 1].astype(float) - 5 * np.arange(BH)[:, None])[region]) <= 1.0


def test_a_ray_warp_of_a_tall_narrow_hole_reads_the_coarse_rows_of_its_whole_height():
    """The still-empty pixels are the left 12 columns of rows [8, 40): taller than wide."""
    r = Spy(BK, BH, BW)
    first = solid((10, 20, 30), BH, BW)
    first[8:, :12, 3] = 0
    grad = np.zeros((BH, BW, 3), np.uint8)
    grad[..., 0] = 5 * np.arange(BW)[None, :]
    grad[..., 1] = 5 * np.arange(BH)[:, None]
    out = r.render(np.eye(4), [(1, np.eye(4), first), (2, se3(np.eye(3), [0.2, 0.0, 0.0]), rgba(grad))], texture())
    assert [c[1:] for c in r.calls if c[0] == "rays"] == [(8, 40, 0, 12)]
    rays = pixel_rays(BK, BH, BW)
    hit = rays * Room().hit(np.zeros(3), rays)[..., None]
    qx = BK[0, 0] * (hit[..., 0] - 0.2) / hit[..., 2] + BK[0, 2] - 0.5
    region = np.zeros((BH, BW), bool)
    region[8:38, 2:12] = True
    region &= qx > 0.3
    err = np.abs(out[..., 0].astype(float) - 5 * qx)[region]
    assert region.sum() > 150 and np.median(err) <= 1.0 and err.max() <= 6.0
    assert np.median(np.abs(out[..., 1].astype(float) - 5 * np.arange(BH)[:, None])[region]) <= 1.0


def test_an_empty_window_warps_nothing():
    r = Spy(BK, BH, BW)
    out = np.zeros((BH, BW, 4), np.uint8)
    filled = np.zeros((BH, BW), np.uint8)
    M = np.eye(3)
    for window in [(5, 5, 0, 10), (5, 5, 10, 0), (5, 5, -3, 10), (5, 5, 10, -3), (2, 5, -5, 10), (5, 2, 10, -5)]:
        assert r._warp_bands(out, filled, window, solid(SOURCE, BH, BW), M, None) is False
    assert r.calls == [] and not filled.any()


def test_warp_bands_fill_exactly_the_window_and_say_so():
    r = Spy(BK, BH, BW)
    out = np.zeros((BH, BW, 4), np.uint8)
    filled = np.zeros((BH, BW), np.uint8)
    assert r._warp_bands(out, filled, (3, 4, 1, 1), solid(SOURCE, BH, BW), np.eye(3), None) is True
    assert np.argwhere(filled).tolist() == [[4, 3]] and filled[4, 3] == 255
    assert tuple(out[4, 3]) == (*SOURCE, 255) and out.sum() == sum(SOURCE) + 255
    assert r._warp_bands(out, filled, (3, 4, 1, 1), solid((9, 9, 9), BH, BW), np.eye(3), None) is False
    assert r.calls == [("rotation", 4, 5, 3, 4)]  # the second call finds no empty pixel: no warp


# -- frames_of_latent -----------------------------------------------------------------------------------------------
def test_the_last_latent_stops_at_the_last_frame():
    assert list(frames_of_latent(2, 4, 6)) == [5]
    assert list(frames_of_latent(2, 4, 7)) == [5, 6]
    assert list(frames_of_latent(2, 4, 9)) == [5, 6, 7, 8]


def test_latent_frames_follow_the_stride():
    assert list(frames_of_latent(0, 1, 5)) == [0]
    assert list(frames_of_latent(3, 1, 5)) == [3]
    assert list(frames_of_latent(2, 2, 9)) == [3, 4]
    assert list(frames_of_latent(1, 3, 9)) == [1, 2, 3]


# -- rollout --------------------------------------------------------------------------------------------------------
def poses(yaws) -> np.ndarray:
    return se3(rot_y(np.asarray(yaws, float)))


def run(c2w, policy, stride=None, event=None, seed_parts=(1, "case", "traj"), image=None):
    frames: list[np.ndarray] = []
    kwargs = {} if stride is None else {"stride": stride}
    out = rollout(noise() if image is None else image, c2w, K, policy, seed_parts, frames.append, event=event,
                  **kwargs)
    return frames, out


@pytest.fixture
def source_log(monkeypatch):
    """Records the source ids of every render call of the real renderer."""
    log: list[list] = []
    real = ReferenceRenderer.render

    def render(self, c2w_t, sources, tex, stats=None):
        sources = list(sources)
        log.append([sid for sid, _, _ in sources])
        return real(self, c2w_t, sources, tex, stats)

    monkeypatch.setattr(ReferenceRenderer, "render", render)
    return log


def test_each_frame_is_rendered_from_the_context_then_the_chunks_latents_then_the_previous_frame(source_log):
    frames, out = run(poses(np.linspace(0, 0.16, 9)), ContextPolicy(name="fullkv", chunk=2))
    assert source_log == [[0, "frame0"], [0, "frame1"], [0, "frame2"], [0, "frame3"],
                          [0, 1], [0, 1, "frame5"], [0, 1, "frame6"], [0, 1, "frame7"]]
    assert len(frames) == 9 and all(f.shape == (H, W, 3) for f in frames)
    assert np.array_equal(frames[0], noise())


def test_the_rollouts_record_counts_latents_anchors_and_warps():
    frames, out = run(poses(np.linspace(0, 0.16, 9)), ContextPolicy(name="fullkv", chunk=2))
    assert out["num_latents"] == 3 and out["latent_anchor_frames"] == [0, 4, 8]
    assert [e["current"] for e in out["context_trace"]] == [[0, 1], [2]]
    assert [e["context"] for e in out["context_trace"]] == [[], [0, 1]]
    # latent 0's anchor covers all but the right edge; the "frameN" sources that fill it are never listed
    assert [e["sources_used"] for e in out["context_trace"]] == [[0], [0]]
    assert out["warps"] == sum(e["warps"] for e in out["context_trace"]) > 0
    assert len(out["chunk_seconds"]) == 2


def test_the_anchors_of_a_stride_two_rollout():
    _, out = run(poses(np.zeros(6)), ContextPolicy(name="fullkv", chunk=1), stride=2)
    assert out["num_latents"] == 3 and out["latent_anchor_frames"] == [0, 2, 4]


class Recorder:
    """A stand-in dynamic event: records its hooks and stamps the frame number into pixel (0, 0)."""

    def __init__(self):
        self.log: list[tuple] = []

    def begin_chunk(self, context):
        self.log.append(("begin", list(context)))

    def draw(self, t, c2w, frame, renderer):
        assert isinstance(renderer, ReferenceRenderer)
        self.log.append(("draw", t))
        frame = frame.copy()
        frame[0, t, :3] = (250, t, 250)
        return frame

    def end_latent(self, lat, t):
        self.log.append(("end", lat, t))


def test_an_event_is_told_each_chunks_context_draws_every_frame_and_hears_each_latent_end(source_log):
    ev = Recorder()
    frames, _ = run(poses(np.zeros(9)), ContextPolicy(name="fullkv", chunk=2), event=ev)
    assert ev.log == [("begin", []), ("draw", 0), ("end", 0, 0), ("draw", 1), ("draw", 2), ("draw", 3), ("draw", 4),
                      ("end", 1, 4), ("begin", [0, 1]), ("draw", 5), ("draw", 6), ("draw", 7), ("draw", 8),
                      ("end", 2, 8)]
    assert [tuple(f[0, t]) for t, f in enumerate(frames)] == [(250, t, 250) for t in range(9)]  # drawn, then sunk


def test_the_drawn_frame_is_what_later_frames_reproject():
    """All poses equal: every frame copies its first source whole, so its stamps are that source's plus its own."""
    ev = Recorder()
    frames, _ = run(poses(np.zeros(9)), ContextPolicy(name="fullkv", chunk=2), event=ev)
    stamped = [sorted(np.flatnonzero(f[0, :, 0] == 250).tolist()) for f in frames]
    assert stamped[4] == [0, 4] and stamped[5] == [0, 5]  # latent 0's anchor as drawn (frame 0)
    assert np.array_equal(frames[5][1:], frames[0][1:])


def test_the_first_frame_is_the_conditioning_image_and_the_others_are_rendered():
    img = noise(seed=9)
    frames, _ = run(poses([0.0, np.pi, np.pi]), ContextPolicy(name="fullkv", chunk=1), stride=1, image=img)
    assert np.array_equal(frames[0], img) and not np.array_equal(frames[1], img)


def test_a_fully_synthesised_frame_uses_the_chunks_texture_over_the_images_mean_colour():
    img = noise(seed=9)
    img[..., 0] //= 2
    frames, _ = run(poses([0.0, np.pi]), ContextPolicy(name="fullkv", chunk=1), stride=1, image=img,
                    seed_parts=(4, "c", "t"))
    tex = Texture(stable_seed(4, "c", "t", "chunk", 1), img.reshape(-1, 3).mean(axis=0))
    want = ReferenceRenderer(K, H, W).render(poses([np.pi])[0], [], tex)
    assert np.array_equal(frames[1], want[..., :3])


def test_synth_fraction_is_synthesised_pixels_over_all_pixels_of_the_chunks_frames():
    """Frame 1 turns around (nothing to reproject: all synthesised), frames 2-4 copy the frame before."""
    _, out = run(poses([0.0, np.pi, np.pi, np.pi, np.pi]), ContextPolicy(name="fullkv", chunk=1))
    assert [e["synth_fraction"] for e in out["context_trace"]] == [0.0, 0.25]


def test_synth_fraction_of_a_one_frame_chunk_is_rounded_to_six_places():
    c2w = poses([0.0, 0.5])
    _, out = run(c2w, ContextPolicy(name="fullkv", chunk=1), stride=1)
    stats = RenderStats()
    ReferenceRenderer(K, H, W).render(c2w[1], [(0, c2w[0], rgba(noise()))], texture(), stats)
    frac = stats.synth_pixels / (H * W)
    assert 0 < frac < 1 and round(frac, 6) != round(frac, 7)
    assert out["context_trace"][1]["synth_fraction"] == round(frac, 6)


def test_a_sliding_window_rollout_keeps_what_the_next_chunk_reads():
    frames, out = run(poses(np.linspace(0, 0.3, 17)), ContextPolicy(name="sliding", chunk=1, sink=1, recent=1))
    assert len(frames) == 17
    assert [e["context"] for e in out["context_trace"]] == [[], [0], [0, 1], [0, 2], [0, 3]]


def test_an_fov_rollout_keeps_a_latent_that_a_later_chunk_retrieves_again():
    """Latents at yaw 0, 40, 80, 40, 0 deg: chunk 3 retrieves latent 1, chunk 4 latent 0 (skipped by chunk 3)."""
    yaws = np.deg2rad(np.repeat([0, 40, 80, 40, 0], [1, 4, 4, 4, 4]))
    pol = ContextPolicy(name="fov", chunk=1, sink=0, recent=1, retrieved_chunks=1)
    sel = ContextSelector(pol, poses(yaws)[[0, 4, 8, 12, 16]], K, H, W)
    assert sel.select(3).context == [1, 2] and 0 in sel.select(4).context
    frames, out = run(poses(yaws), pol)
    assert len(frames) == 17 and out["context_trace"][4]["context"] == sel.select(4).context


def test_timings_come_from_the_clock(monkeypatch):
    ticks = iter(np.arange(10.0, 20.0, 0.125))
    monkeypatch.setattr(model, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    _, out = run(poses(np.zeros(9)), ContextPolicy(name="fullkv", chunk=2))
    assert out["chunk_seconds"] == [0.125, 0.125]
    assert out["timings"] == {"generate_s": 0.625, "fps": 9 / 0.625}


def test_a_rollout_that_took_no_time_has_infinite_fps(monkeypatch):
    monkeypatch.setattr(model, "time", types.SimpleNamespace(perf_counter=lambda: 5.0))
    _, out = run(poses(np.zeros(5)), ContextPolicy(name="fullkv"))
    assert out["timings"] == {"generate_s": 0.0, "fps": float("inf")}
