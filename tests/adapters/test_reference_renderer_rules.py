"""The rules of the reference renderer's geometry (adapters/reference/model.py, :class:`ReferenceRenderer`), one at a
time and in this process: what the constructor precomputes (OpenCV intrinsics, corner pixels, the widest useful
rotation, the coarse test grid, the ray-map grid and its scale, the grown source rectangle), the homography warp
(interpolation, validity, windows, pixels behind the source camera), the projection of hit points into a source
(:meth:`_coarse_maps`), the coarse block a window reads, the ray-map warp, the two footprint boxes and the room hit
points of the ray-map grid.

Canvases are tiny (16x24 and friends) and intrinsics are chosen with fx != fy and cx != cy so that swapping any two
entries shows. Expected values are worked out by hand in the comments, or derived with numpy from the stated rule.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from adapters.reference.model import ReferenceRenderer
from harness.scene import Room

H, W = 16, 24  # multiples of MAP_STEP (4): coarse grid 4 x 6
K = np.array([[20.0, 0.0, 11.0], [0.0, 18.0, 7.5], [0.0, 0.0, 1.0]])


def intrinsics(h: int, w: int) -> np.ndarray:
    """Off-centre intrinsics for an h x w canvas with fx != fy."""
    return np.array([[w * 0.8, 0.0, w / 2 - 1.0], [0.0, w * 0.7, h / 2 + 0.5], [0.0, 0.0, 1.0]])


def rgba(h: int = H, w: int = W, seed: int = 3) -> np.ndarray:
    """Random opaque RGBA image with even colour values (a half-pixel average is then exact)."""
    img = np.random.default_rng(seed).integers(0, 128, size=(h, w, 4), dtype=np.uint8) * 2
    img[..., 3] = 255
    return img


def ramp(h: int, w: int) -> np.ndarray:
    """Opaque RGBA image whose red is 8 * column and green 8 * row: bilinear sampling at (u, v) reads (8u, 8v)."""
    img = np.zeros((h, w, 4), np.uint8)
    img[..., 0] = 8 * np.arange(w)[None, :]
    img[..., 1] = 8 * np.arange(h)[:, None]
    img[..., 3] = 255
    return img


def upsample(coarse: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Half-pixel-centre bilinear upsampling with edge clamping (the rule of cv2.resize INTER_LINEAR), in numpy."""

    def axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        f = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        i0 = np.floor(f).astype(int)
        frac = f - i0
        frac[i0 < 0], i0[i0 < 0] = 0.0, 0
        frac[i0 >= n_in - 1], i0[i0 >= n_in - 1] = 0.0, n_in - 1
        return i0, np.minimum(i0 + 1, n_in - 1), frac

    r0, r1, fr = axis(coarse.shape[0], out_h)
    c0, c1, fc = axis(coarse.shape[1], out_w)
    rows = coarse[r0] * (1 - fr)[:, None] + coarse[r1] * fr[:, None]
    return rows[:, c0] * (1 - fc)[None, :] + rows[:, c1] * fc[None, :]


def pose(yaw: float = 0.0, pitch: float = 0.0, t: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    cy, sy, cp, sp = math.cos(yaw), math.sin(yaw), math.cos(pitch), math.sin(pitch)
    ry = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cp, -sp], [0.0, sp, cp]])
    c2w = np.eye(4)
    c2w[:3, :3] = ry @ rx
    c2w[:3, 3] = t
    return c2w


def affine_maps(h: int, w: int, ch: int, cw: int) -> tuple[np.ndarray, np.ndarray]:
    """Coarse maps spanning [1.5, w - 2] x [1.5, h - 2] with a small cross term: inside the source everywhere."""
    i, j = np.mgrid[0:ch, 0:cw].astype(np.float64)
    mu = 1.5 + j * (w - 4) / (cw - 1) + 0.5 * i / (ch - 1)
    mv = 1.5 + i * (h - 4) / (ch - 1) + 0.5 * j / (cw - 1)
    return mu.astype(np.float32), mv.astype(np.float32)


@pytest.fixture(scope="module")
def r() -> ReferenceRenderer:
    return ReferenceRenderer(K, H, W)


# ---------------------------------------------------------------------------------------------------------- __init__


def test_opencv_intrinsics_move_the_principal_point_half_a_pixel_toward_the_origin(r):
    expected = np.array([[20.0, 0.0, 10.5], [0.0, 18.0, 7.0], [0.0, 0.0, 1.0]])
    assert np.array_equal(r.K_cv, expected)
    assert np.allclose(r.K_cv_inv @ expected, np.eye(3))
    assert np.array_equal(r.K, K)  # the harness intrinsics stay as given


def test_corner_pixels_are_the_four_integer_corners_in_reading_order(r):
    assert r._corner_u.tolist() == [0.0, 23.0, 0.0, 23.0]
    assert r._corner_v.tolist() == [0.0, 0.0, 15.0, 15.0]


def test_widest_useful_rotation_is_twice_the_half_diagonal_angle_of_the_shorter_focal_length(r):
    # half diagonal = hypot(24, 16) / 2 = 14.4222 px; over min(fx, fy) = 18: atan(0.801234) = 0.675493 rad
    assert r._max_axis_angle == pytest.approx(1.350985, abs=1e-6)


def test_the_alpha_plane_is_opaque_everywhere(r):
    assert r._ones.dtype == np.uint8 and r._ones.shape == (H, W) and (r._ones == 255).all()


@pytest.mark.parametrize("h,w,cy,cx", [(16, 24, [0, 8, 15], [0, 8, 16, 23]), (17, 9, [0, 8, 16], [0, 8])])
def test_the_test_grid_is_every_eighth_pixel_plus_the_last_row_and_column(h, w, cy, cx):
    r = ReferenceRenderer(intrinsics(h, w), h, w)
    assert r._cy.tolist() == cy and r._cx.tolist() == cx
    gy, gx = np.meshgrid(cy, cx, indexing="ij")
    assert np.array_equal(r._coarse_px, np.stack([gx, gy, np.ones_like(gx)], -1).astype(np.float64))
    assert np.array_equal(r._test_rays, r.rays_cam[np.ix_(cy, cx)])


@pytest.mark.parametrize("h,w", [(16, 24), (18, 22)])
def test_the_ray_map_grid_holds_the_rays_through_the_centres_of_4x4_blocks(h, w):
    K_ = intrinsics(h, w)
    r = ReferenceRenderer(K_, h, w)
    ch, cw = -(-h // 4), -(-w // 4)
    assert r._coarse_rays.shape == (ch, cw, 3) and r._coarse_rays.dtype == np.float32
    # coarse cell (i, j) is the 4x4 block whose centre is the fine point (4j + 2, 4i + 2) (pixel centres at +0.5)
    i, j = np.mgrid[0:ch, 0:cw]
    d = np.stack([(4 * j + 2 - K_[0, 2]) / K_[0, 0], (4 * i + 2 - K_[1, 2]) / K_[1, 1], np.ones((ch, cw))], -1)
    assert np.allclose(r._coarse_rays, d / np.linalg.norm(d, axis=-1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize("h,w,scale", [(16, 24, (6 / 24, 4 / 16)), (30, 46, (12 / 46, 8 / 30)), (9, 13, (4 / 13, 3 / 9))])
def test_the_map_scale_is_coarse_over_fine_size_per_axis_x_first(h, w, scale):
    assert ReferenceRenderer(intrinsics(h, w), h, w)._map_scale == scale


@pytest.mark.parametrize("h,w,exact", [(16, 24, True), (18, 24, False), (16, 22, False), (17, 25, False)])
def test_the_map_scale_is_exact_only_when_both_sides_are_multiples_of_map_step(h, w, exact):
    assert ReferenceRenderer(intrinsics(h, w), h, w)._exact_map_scale is exact


def test_the_source_rectangle_is_grown_by_one_pixel_and_homogeneous(r):
    assert r._src_corners.tolist() == [[-1.0, 24.0, -1.0, 24.0], [-1.0, -1.0, 16.0, 16.0], [1.0, 1.0, 1.0, 1.0]]


# ------------------------------------------------------------------------------------------------------ _warp_rotation


def test_the_identity_homography_copies_the_source_and_every_pixel_is_valid(r):
    src = rgba()
    img, valid = r._warp_rotation(np.eye(3), src)
    assert np.array_equal(img, src)
    assert valid.dtype == np.uint8 and valid.shape == (H, W) and (valid == 255).all()


def test_a_half_pixel_shift_averages_neighbours_and_the_half_covered_last_column_is_invalid(r):
    src = rgba()
    shift = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # target x reads source x + 0.5
    img, valid = r._warp_rotation(shift, src)
    mean = (src[:, :-1].astype(int) + src[:, 1:].astype(int)) // 2
    assert np.array_equal(img[:, :-1], mean.astype(np.uint8))
    assert (valid[:, :-1] == 255).all()
    assert img[0, -1, 3] in (127, 128) and (valid[:, -1] == 0).all()  # half its support lies outside


def test_a_whole_pixel_shift_reads_the_right_neighbour(r):
    src = rgba()
    shift = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -2.0], [0.0, 0.0, 1.0]])  # target (x, y) reads source (x+1, y-2)
    img, valid = r._warp_rotation(shift, src)
    assert np.array_equal(img[2:, :-1], src[:-2, 1:])
    assert (valid[2:, :-1] == 255).all() and (valid[:2] == 0).all() and (valid[:, -1] == 0).all()


@pytest.mark.parametrize("roi", [(slice(0, 16), slice(5, 19)), (slice(3, 11), slice(0, 24)), (slice(4, 13), slice(7, 20)),
                                 (slice(0, 16), slice(0, 24))])
def test_a_window_holds_the_values_of_the_whole_frame_warp_there(r, roi):
    # a real rotation homography (yaw and pitch between source and target)
    M = r.K_cv @ pose(0.1, 0.05)[:3, :3].T @ pose(-0.02, 0.0)[:3, :3] @ r.K_cv_inv
    src = rgba(seed=5)
    whole, whole_valid = r._warp_rotation(M, src)
    img, valid = r._warp_rotation(M, src, roi)
    assert img.shape == (roi[0].stop - roi[0].start, roi[1].stop - roi[1].start, 4)
    assert np.abs(img.astype(int) - whole[roi].astype(int)).max() <= 1
    assert np.array_equal(valid, whole_valid[roi])
    assert 0 < (whole_valid == 255).sum() < H * W  # the test is not vacuous: part of the frame is covered


def test_without_a_window_the_whole_frame_is_warped(r):
    M = np.array([[1.0, 0.0, -3.0], [0.0, 1.0, 2.0], [0.0, 0.0, 1.0]])  # target (x, y) reads source (x-3, y+2)
    src = rgba(seed=9)
    img, valid = r._warp_rotation(M, src)
    assert img.shape == (H, W, 4)
    assert np.array_equal(img[:-2, 3:], src[2:, :-3])
    expected = np.zeros((H, W), np.uint8)
    expected[:-2, 3:] = 255
    assert np.array_equal(valid, expected)


def _behind_homography(row: list[float]) -> np.ndarray:
    """Every target pixel reads source pixel (3, 2), but only pixels with ``row`` . (x, y, 1) > 0 see it in front of
    the camera (the third row's sign): a rank-one homography whose rows are multiples of ``row``."""
    row_ = np.asarray(row, float)
    return np.stack([3 * row_, 2 * row_, row_])


def _in_front(row: list[float], rows: slice, cols: slice) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    return np.where(row[0] * x + row[1] * y + row[2] > 1e-6, 255, 0).astype(np.uint8)[rows, cols]


@pytest.mark.parametrize("roi", [None, (slice(2, 14), slice(3, 17))])
def test_target_pixels_looking_behind_the_source_camera_are_invalid(r, roi):
    row = [1.0, 0.5, -9.25]  # x + 0.5 y - 9.25 is never 0 on integer pixels
    _img, valid = r._warp_rotation(_behind_homography(row), rgba(), roi)
    expected = _in_front(row, *(roi or (slice(0, H), slice(0, W))))
    assert 0 < expected.sum() < expected.size * 255
    assert np.array_equal(valid, expected)


@pytest.mark.parametrize("row", [[46.0, 0.0, -1.0], [-1.0, 0.0, 1.0], [0.0, -1.0, 1.0], [0.0, 46.0, -1.0]],
                         ids=["column-0-behind", "all-but-column-0-behind", "all-but-row-0-behind", "row-0-behind"])
def test_one_corner_behind_the_source_camera_is_enough_to_check_every_pixel(r, row):
    # only the corners (0, 0), (23, 0), (0, 15), (23, 15) decide whether the per-pixel check runs
    _img, valid = r._warp_rotation(_behind_homography(row), rgba())
    expected = _in_front(row, slice(0, H), slice(0, W))
    assert 0 < expected.sum() < expected.size * 255
    assert np.array_equal(valid, expected)


def test_a_target_wholly_behind_the_source_camera_is_all_invalid(r):
    _img, valid = r._warp_rotation(-np.eye(3), rgba())  # the same mapping as the identity, but w = -1 everywhere
    assert (valid == 0).all()


def test_a_projective_depth_of_exactly_one_millionth_counts_as_behind(r):
    # w = 1e-6 on every pixel (the threshold itself): the pixel mapping is still the identity, but nothing is in front
    _img, valid = r._warp_rotation(np.diag([1e-6, 1e-6, 1e-6]), rgba())
    assert (valid == 0).all()
    _img, valid = r._warp_rotation(np.diag([2e-6, 2e-6, 2e-6]), rgba())
    assert (valid == 255).all()


# ------------------------------------------------------------------------------------------------------- _coarse_maps


def test_hit_points_project_through_the_source_camera_with_opencv_intrinsics(r):
    c2w_s = pose(0.3, -0.1, (0.4, -0.2, 0.7))
    rng = np.random.default_rng(1)
    cam = np.stack([rng.uniform(-1, 1, (3, 5)), rng.uniform(-1, 1, (3, 5)), rng.uniform(1, 3, (3, 5))], -1)
    Xc = (cam @ c2w_s[:3, :3].T + c2w_s[:3, 3]).astype(np.float32)  # world points seen at ``cam`` by the source
    mu, mv = r._coarse_maps(Xc, c2w_s)
    assert mu.dtype == np.float32 and mv.dtype == np.float32 and mu.shape == mv.shape == (3, 5)
    assert np.allclose(mu, 20.0 * cam[..., 0] / cam[..., 2] + 10.5, atol=1e-3)
    assert np.allclose(mv, 18.0 * cam[..., 1] / cam[..., 2] + 7.0, atol=1e-3)


def test_a_point_on_the_optical_axis_lands_on_the_opencv_principal_point(r):
    mu, mv = r._coarse_maps(np.array([[[0.0, 0.0, 2.0]]], np.float32), np.eye(4))
    assert (mu[0, 0], mv[0, 0]) == (10.5, 7.0)


def test_points_behind_or_at_most_a_tenth_of_a_millimetre_in_front_get_minus_ten_thousand(r):
    c2w_s = pose(0.0, 0.0, (0.5, 0.25, 0.0))
    cam_z = np.array([-1.0, 0.0, 1e-4, 2e-4, 1.0])
    Xc = np.stack([np.full(5, 0.5 + 0.25), np.full(5, 0.25 - 0.5), cam_z], -1)[None]  # float64: z exactly 1e-4
    mu, mv = r._coarse_maps(Xc, c2w_s)
    assert mu[0, :3].tolist() == [-1e4, -1e4, -1e4] and mv[0, :3].tolist() == [-1e4, -1e4, -1e4]
    # camera point (0.25, -0.5, z): u = 20 * 0.25 / z + 10.5, v = 18 * -0.5 / z + 7
    assert mu[0, 3:] == pytest.approx([20 * 0.25 / 2e-4 + 10.5, 15.5])
    assert mv[0, 3:] == pytest.approx([-9 / 2e-4 + 7.0, -2.0])


# ------------------------------------------------------------------------------------------------------ _coarse_block


def test_a_canvas_off_the_map_step_reads_the_whole_coarse_grid():
    r = ReferenceRenderer(intrinsics(22, 18), 22, 18)  # coarse grid 6 x 5
    assert r._coarse_block(4, 8, 6, 9) == (slice(0, 6), slice(0, 5))


def test_the_whole_canvas_reads_the_whole_coarse_grid(r):
    assert r._coarse_block(0, 0, W, H) == (slice(0, 4), slice(0, 6))


def test_a_one_pixel_window_reads_its_cell_its_neighbour_and_one_cell_of_margin(r):
    # x = 9: (9.5) / 4 - 0.5 = 1.875 -> cells 1 and 2, margin -> [0, 4); y = 6: 1.125 -> cells 1, 2 -> [0, 4) clipped
    assert r._coarse_block(9, 6, 10, 7) == (slice(0, 4), slice(0, 4))
    # x = 21: 4.875 -> cells 4, 5 -> [3, 6); y = 2: 0.125 -> cells 0, 1 -> [0, 3)
    assert r._coarse_block(21, 2, 22, 3) == (slice(0, 3), slice(3, 6))


def _block_from_the_rule(a: int, b: int, n: int) -> slice:
    """Cells read by fine pixels [a, b): pixel x reads floor((x + .5) / 4 - .5) and the next, plus a cell each side."""
    first = math.floor((a + 0.5) / 4 - 0.5) - 1
    last = math.floor((b - 1 + 0.5) / 4 - 0.5) + 1 + 1
    return slice(max(0, first), min(n, last + 1))


def test_every_column_window_reads_the_cells_the_rule_names():
    r = ReferenceRenderer(intrinsics(16, 40), 16, 40)  # coarse grid 4 x 10
    for x0, x1 in itertools.combinations(range(41), 2):
        assert r._coarse_block(x0, 5, x1, 6)[1] == _block_from_the_rule(x0, x1, 10), (x0, x1)


def test_every_row_window_reads_the_cells_the_rule_names():
    r = ReferenceRenderer(intrinsics(40, 16), 40, 16)  # coarse grid 10 x 4
    for y0, y1 in itertools.combinations(range(41), 2):
        assert r._coarse_block(5, y0, 6, y1)[0] == _block_from_the_rule(y0, y1, 10), (y0, y1)


# -------------------------------------------------------------------------------------------------------- _warp_rays


def test_constant_maps_show_one_source_pixel_everywhere(r):
    src = rgba(seed=11)
    mu, mv = np.full((4, 6), 3.0, np.float32), np.full((4, 6), 2.0, np.float32)  # column 3, row 2
    img, valid = r._warp_rays((mu, mv), (slice(0, 4), slice(0, 6)), src, (slice(0, H), slice(0, W)))
    assert img.shape == (H, W, 4) and (img == src[2, 3]).all()
    assert valid.dtype == np.uint8 and (valid == 255).all()


@pytest.mark.parametrize("h,w", [(16, 24), (18, 22)])
def test_the_maps_are_upsampled_bilinearly_to_the_canvas_and_sampled_bilinearly(h, w):
    r = ReferenceRenderer(intrinsics(h, w), h, w)
    ch, cw = r._coarse_rays.shape[:2]
    mu, mv = affine_maps(h, w, ch, cw)
    img, valid = r._warp_rays((mu, mv), (slice(0, ch), slice(0, cw)), ramp(h, w), (slice(0, h), slice(0, w)))
    assert (valid == 255).all()
    assert np.abs(img[..., 0] - 8 * upsample(mu.astype(np.float64), h, w)).max() <= 1
    assert np.abs(img[..., 1] - 8 * upsample(mv.astype(np.float64), h, w)).max() <= 1


@pytest.mark.parametrize("h,w,roi", [
    (16, 24, (slice(5, 11), slice(9, 17))), (16, 24, (slice(0, 7), slice(13, 22))), (16, 24, (slice(9, 16), slice(0, 6))),
    (32, 24, (slice(17, 27), slice(5, 14))), (32, 24, (slice(21, 32), slice(12, 24))),
    (18, 22, (slice(5, 11), slice(9, 17))), (18, 22, (slice(9, 18), slice(0, 6)))])
def test_a_window_through_its_coarse_block_holds_the_values_of_the_whole_frame_warp(h, w, roi):
    r = ReferenceRenderer(intrinsics(h, w), h, w)
    ch, cw = r._coarse_rays.shape[:2]
    mu, mv = affine_maps(h, w, ch, cw)
    mu, mv = mu + 0.05 * mv ** 2 / h, mv - 0.03 * mu ** 2 / w  # curved, so an offset in the grid shows
    src = rgba(h, w, seed=13)
    whole, whole_valid = r._warp_rays((mu, mv), (slice(0, ch), slice(0, cw)), src, (slice(0, h), slice(0, w)))
    blk = r._coarse_block(roi[1].start, roi[0].start, roi[1].stop, roi[0].stop)
    img, valid = r._warp_rays((mu[blk], mv[blk]), blk, src, roi)
    assert np.array_equal(img, whole[roi])
    assert np.array_equal(valid, whole_valid[roi])


def test_pixels_mapped_outside_the_source_are_empty_and_invalid(r):
    mu = np.full((4, 6), -5.0, np.float32)
    mv = np.full((4, 6), 4.0, np.float32)
    img, valid = r._warp_rays((mu, mv), (slice(0, 4), slice(0, 6)), rgba(), (slice(0, H), slice(0, W)))
    assert (img == 0).all() and (valid == 0).all()


def test_a_map_value_on_the_last_source_column_is_valid_and_half_a_pixel_beyond_is_not(r):
    src = rgba()
    mv = np.full((4, 6), 5.0, np.float32)
    img, valid = r._warp_rays((np.full((4, 6), 23.0, np.float32), mv), (slice(0, 4), slice(0, 6)), src,
                              (slice(0, H), slice(0, W)))
    assert (valid == 255).all() and (img == src[5, 23]).all()
    img, valid = r._warp_rays((np.full((4, 6), 23.5, np.float32), mv), (slice(0, 4), slice(0, 6)), src,
                              (slice(0, H), slice(0, W)))
    assert (valid == 0).all()


# ------------------------------------------------------------------------------------------------- _footprint_rotation


def test_the_identity_footprint_is_the_grown_source_rectangle_with_its_margins(r):
    # corners at x in {-1, 24}, y in {-1, 16}: (floor(-1) - 1, floor(-1) - 1, ceil(24) + 2, ceil(16) + 2)
    assert r._footprint_rotation(np.eye(3)) == (-2, -2, 26, 18)


def test_a_shifted_footprint_floors_its_start_and_ceils_its_end_whatever_the_homography_scale(r):
    # target (x, y) reads source (x + 3.25, y - 1.5): source corners land at x in {-4.25, 20.75}, y in {0.5, 17.5}
    M = np.array([[1.0, 0.0, 3.25], [0.0, 1.0, -1.5], [0.0, 0.0, 1.0]])
    assert r._footprint_rotation(M) == (-6, -1, 23, 20)
    assert r._footprint_rotation(2 * M) == (-6, -1, 23, 20)  # a homography is defined up to scale
    assert r._footprint_rotation(0.25 * M) == (-6, -1, 23, 20)


def test_the_footprint_holds_every_target_pixel_that_reads_inside_the_source(r):
    M = r.K_cv @ pose(0.2, -0.1)[:3, :3].T @ pose(0.0, 0.05)[:3, :3] @ r.K_cv_inv
    x0, y0, x1, y1 = r._footprint_rotation(M)
    y, x = np.mgrid[-40:60, -40:70]
    q = np.stack([x, y, np.ones_like(x)], -1).astype(float) @ M.T
    u, v = q[..., 0] / q[..., 2], q[..., 1] / q[..., 2]
    inside = (u > -1) & (u < W) & (v > -1) & (v < H)
    assert inside.any()
    assert x[inside].min() >= x0 and x[inside].max() < x1 and y[inside].min() >= y0 and y[inside].max() < y1
    # and it is tight up to its margins (a rounded pixel and one more before, two and an exclusive end after)
    assert x[inside].min() - x0 <= 2 and x1 - x[inside].max() <= 4
    assert y[inside].min() - y0 <= 2 and y1 - y[inside].max() <= 4


def test_a_source_seen_behind_the_target_camera_has_no_footprint(r):
    assert r._footprint_rotation(-np.eye(3)) is None


def test_a_source_partly_behind_the_target_camera_has_no_footprint(r):
    N = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.5]])  # target w = u + 0.5: -0.5 at u = -1 only
    assert r._footprint_rotation(np.linalg.inv(N)) is None


def test_a_projective_depth_of_exactly_a_billionth_counts_as_behind(r):
    assert r._footprint_rotation(np.diag([1.0, 1.0, 1e9])) is None  # every corner has w = 1 / 1e9
    assert r._footprint_rotation(np.diag([1.0, 1.0, 5e8])) is not None


# --------------------------------------------------------------------------------------------------- _footprint_maps


def test_maps_wholly_inside_the_source_give_the_whole_canvas(r):
    maps = (np.full((4, 6), 5.0, np.float32), np.full((4, 6), 5.0, np.float32))
    assert r._footprint_maps(maps, (slice(0, 4), slice(0, 6))) == (0, 0, W, H)


@pytest.mark.parametrize("which", ["left", "right", "above", "below"])
def test_maps_wholly_beside_the_source_give_an_empty_box(r, which):
    mu, mv = np.full((4, 6), 5.0, np.float32), np.full((4, 6), 5.0, np.float32)
    {"left": mu, "right": mu, "above": mv, "below": mv}[which][:] = {"left": -1.5, "right": W + 0.5, "above": -1.5,
                                                                     "below": H + 0.5}[which]
    assert r._footprint_maps((mu, mv), (slice(0, 4), slice(0, 6))) == (0, 0, 0, 0)


def test_the_box_of_a_coarse_block_starts_five_pixels_before_and_ends_eight_after_its_good_cells():
    """32 x 48 canvas (coarse grid 8 x 12, scale 1/4), block rows [2, 6) x columns [3, 9). A good coarse column c
    bounds the box at floor((c - .5) * 4 - .5) - 2 = 4c - 5 and ceil((c + 1.5) * 4 - .5) + 2 = 4c + 8."""
    r = ReferenceRenderer(intrinsics(32, 48), 32, 48)
    # columns 3..8: mu >= -1 from column 4 (exactly -1 there), mu <= 48 up to column 7 (exactly 48 there)
    mu = np.tile(np.array([-1.5, -1.0, 10.0, 20.0, 48.0, 48.5], np.float32), (4, 1))
    # rows 2..5: mv >= -1 from row 3 (exactly -1), mv <= 32 up to row 4 (exactly 32)
    mv = np.tile(np.array([[-1.5], [-1.0], [32.0], [32.5]], np.float32), (1, 6))
    # x0 = 4 * 4 - 5, x1 = 4 * 7 + 8; y0 = 4 * 3 - 5, y1 = 4 * 4 + 8
    assert r._footprint_maps((mu, mv), (slice(2, 6), slice(3, 9))) == (11, 7, 36, 24)


def test_the_box_follows_each_axis_scale_on_a_canvas_off_the_map_step():
    """14 x 46 canvas: coarse grid 4 x 12, scale 12/46 across and 4/14 down. Good columns 5..6 and rows 1..2:
    x0 = floor(4.5 * 46/12 - .5) - 2 = floor(16.75) - 2 = 14, x1 = ceil(7.5 * 46/12 - .5) + 2 = ceil(28.25) + 2 = 31,
    y0 = floor(0.5 * 14/4 - .5) - 2 = floor(1.25) - 2 = -1 -> 0, y1 = ceil(3.5 * 14/4 - .5) + 2 = ceil(11.75) + 2 = 14."""
    r = ReferenceRenderer(intrinsics(14, 46), 14, 46)
    mu = np.tile(np.array([-9, -9, -9, -9, -9, 5, 40, 99, 99, 99, 99, 99], np.float32), (4, 1))
    mv = np.tile(np.array([[-9], [3], [12], [99]], np.float32), (1, 12))
    assert r._footprint_maps((mu, mv), (slice(0, 4), slice(0, 12))) == (14, 0, 31, 14)
    # good columns 9..10 and rows 2..2: x0 = floor(8.5 * 46/12 - .5) - 2 = floor(32.08) - 2 = 30, x1 = ceil(11.5 * 46/12 - .5) + 2 = 46
    # -> 46; y0 = floor(1.5 * 3.5 - .5) - 2 = 2, y1 = ceil(3.5 * 3.5 - .5) + 2 = 14
    mu = np.tile(np.array([-9] * 9 + [5, 40, 99], np.float32), (4, 1))
    mv = np.tile(np.array([[-9], [-9], [12], [99]], np.float32), (1, 12))
    assert r._footprint_maps((mu, mv), (slice(0, 4), slice(0, 12))) == (30, 2, 46, 14)


# ------------------------------------------------------------------------------------------------- coarse_hit_points


def _walls_hit(origin: np.ndarray, dirs: np.ndarray, room: Room) -> np.ndarray:
    """Nearest wall hit along each unit direction, by brute force over the six walls."""
    lo, hi = room.lo_hi()
    best = np.full(dirs.shape[:-1], np.inf)
    for axis, wall in itertools.product(range(3), (lo, hi)):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (wall[axis] - origin[axis]) / dirs[..., axis]
        best = np.where((t > 0) & (t < best), t, best)
    return origin + dirs * best[..., None]


@pytest.mark.parametrize("c2w", [np.eye(4), pose(0.7, -0.3, (1.0, -0.5, 2.0))], ids=["start", "moved"])
def test_coarse_hit_points_are_where_the_ray_map_grid_meets_the_room(r, c2w):
    hits = r.coarse_hit_points(c2w)
    assert hits.shape == (4, 6, 3) and hits.dtype == np.float32
    expected = _walls_hit(c2w[:3, 3], r._coarse_rays.astype(np.float64) @ c2w[:3, :3].T, r.room)
    assert np.allclose(hits, expected, atol=1e-4)


def test_from_the_start_camera_the_central_rays_hit_the_front_wall_four_units_ahead(r):
    hits = r.coarse_hit_points(np.eye(4))
    assert np.allclose(hits[1:3, 2:4, 2], 4.0)


def test_coarse_hit_points_use_the_renderers_room():
    room = Room(x=2.0, up=1.0, down=0.5, front=1.5, back=3.0)
    r = ReferenceRenderer(K, H, W, room)
    hits = r.coarse_hit_points(np.eye(4))
    assert np.allclose(hits, _walls_hit(np.zeros(3), r._coarse_rays.astype(np.float64), room), atol=1e-4)
