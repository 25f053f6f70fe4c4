"""The rules of :mod:`adapters.conformance`, one at a time, at the inputs where each rule flips.

The overlay detector is driven from its state: :class:`_Scene` sets the accumulator's per-pixel largest change
and Sobel gradients block by block, so a test says exactly how many still edge pixels of which orientation a
block holds; how :meth:`_OverlayAccumulator.add` builds that state from frames is stated separately. The spec's
overlay thresholds are left at their defaults (60, 8, 24, 2, 8) so that each default is pinned at its boundary.
The checks of :func:`check_video` that need a file use tiny videos written in ``tmp_path``.
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.conformance import ConformanceSpec, _grey_small, _OverlayAccumulator, check_video, moving_pairs, ncc
from harness.video import VideoWriter
from trajectories.conventions import rot_x, rot_y, rot_z, se3

B = _OverlayAccumulator.BLOCK


def _spec(**over) -> ConformanceSpec:
    return ConformanceSpec(**{"fps": 16.0, "frames": 9, "height": 64, "width": 64, **over})


# -- the low-resolution grey image and the correlation of the first frame ---------------------------------------


@pytest.mark.parametrize("hw, small", [((48, 192), (24, 96)), ((96, 96), (96, 96)), ((300, 100), (288, 96)),
                                       ((1, 200), (1, 96))])
def test_the_grey_image_is_96_wide_and_keeps_the_aspect_at_least_one_row(hw, small):
    g = _grey_small(np.zeros((*hw, 3), np.uint8))
    assert g.shape == small and g.dtype == np.float32


def test_a_flat_image_correlates_with_nothing():
    """Zero variance: the correlation is 0, not NaN and not a match."""
    flat = np.full((64, 64, 3), 90, np.uint8)
    assert ncc(flat, flat) == 0.0
    assert ncc(flat, np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)) == 0.0


def test_a_faint_image_still_correlates_with_itself():
    """One grey level of contrast (variance product below 1) is still an image."""
    faint = np.zeros((96, 96, 3), np.uint8)
    faint[5, 5] = 1
    assert ncc(faint, faint) == pytest.approx(1.0)
    assert ncc(faint, 1 - faint) == pytest.approx(-1.0)


# -- which pose pairs move -----------------------------------------------------------------------------------


def _at(R: np.ndarray, t=(0.0, 0.0, 0.0)) -> np.ndarray:
    return se3(R, np.asarray(t, np.float64))


def test_a_pair_moves_when_it_turns_more_than_deg():
    I3 = np.eye(3)
    poses = np.stack([_at(I3), _at(I3), _at(rot_y(np.radians(1.0))), _at(rot_y(np.radians(1.04)))])
    assert moving_pairs(poses, 0.05).tolist() == [False, True, False]
    assert moving_pairs(poses[:2], 0.0).tolist() == [False]  # no turn at all is not more than 0 degrees


def test_turning_in_place_away_from_the_origin_moves():
    """The angle comes from the rotations alone: the camera's position does not enter it."""
    poses = np.stack([_at(np.eye(3), (0, 0, 5)), _at(rot_y(np.radians(1.0)), (0, 0, 5))])
    assert moving_pairs(poses, 0.05).tolist() == [True]


def test_a_half_turn_moves_even_when_rounding_puts_its_cosine_below_minus_one():
    """For this orientation the product of the rotations gives a cosine of -1 - 2e-16: clipped to a half turn."""
    R = rot_x(2.0) @ rot_y(4.0)
    assert moving_pairs(np.stack([_at(R), _at(R @ rot_z(np.pi))]), 0.05).tolist() == [True]


def test_a_repeated_orientation_is_no_turn_even_when_rounding_puts_its_cosine_above_one():
    """For this orientation R^T R gives a cosine of 1 + 2e-16: clipped to an angle of 0 (not NaN), so a threshold
    below zero counts the pair like every other."""
    R = rot_x(0.27) @ rot_y(0.54)
    poses = np.stack([_at(R), _at(R)])
    assert moving_pairs(poses, -1.0).tolist() == [True] and moving_pairs(poses, 0.0).tolist() == [False]


@pytest.mark.parametrize("zs, x, moving", [
    ((0.0, 1.0), 0.0, [True]),  # a translation without a turn moves
    ((0.0, 1.0, 1.0 + 5e-7, 1.0 + 5e-7 + 5e-6), 10.0, [True, False, True]),  # extent 1 (of z, not of the position)
    ((0.0, 1e6, 1e6 - 1.0), 0.0, [True, False]),  # a step of exactly a millionth of the extent does not move
    ((0.0, 0.01, 0.01 + 1e-7), 0.0, [True, True]),  # a small path: the threshold scales down with it
    ((2.0, 2.0, 2.0), 0.0, [False, False]),  # no extent at all: standing still
])
def test_a_step_moves_when_it_is_more_than_a_millionth_of_the_paths_extent(zs, x, moving):
    poses = np.stack([_at(np.eye(3), (x, 0.0, z)) for z in zs])
    assert moving_pairs(poses, 0.05).tolist() == moving


# -- how frames become the overlay detector's state -----------------------------------------------------------


def _grey(values: np.ndarray) -> np.ndarray:
    return np.repeat(np.asarray(values, np.uint8)[..., None], 3, axis=2)


def test_only_frame_pairs_where_the_camera_moves_are_accumulated():
    acc = _OverlayAccumulator(np.array([False, True, False]))
    for i, v in enumerate([0, 0, 10, 30]):
        acc.add(i, _grey(np.full((32, 32), v)))
    assert acc.pairs == 1 and acc.max_change is not None and np.all(acc.max_change == 10)


def test_frames_beyond_the_poses_are_not_accumulated():
    acc = _OverlayAccumulator(np.array([True, True]))
    for i, v in enumerate([0, 10, 30, 100, 200]):
        acc.add(i, _grey(np.full((32, 32), v)))
    assert acc.pairs == 2 and acc.max_change is not None and np.all(acc.max_change == 20)


def test_the_edges_are_the_first_gradients_of_the_first_moving_frame():
    """A grey ramp 2x + 3y: the 3x3 Sobel gives 8 times each slope inside the frame; later frames do not count."""
    y, x = np.mgrid[0:32, 0:32]
    acc = _OverlayAccumulator(np.array([True, True]))
    for i, frame in enumerate([np.zeros((32, 32)), 2 * x + 3 * y, 3 * x + 2 * y]):
        acc.add(i, _grey(frame))
    assert acc.gx is not None and acc.gy is not None and acc.pairs == 2
    assert np.all(acc.gx[1:-1, 1:-1] == 16) and np.all(acc.gy[1:-1, 1:-1] == 24)


def test_without_poses_nothing_is_accumulated_or_judged():
    acc = _OverlayAccumulator(None)
    acc.add(0, _grey(np.zeros((32, 32))))
    acc.add(1, _grey(np.full((32, 32), 50)))
    check = acc.check(_spec())
    assert acc.prev is None and (check.ok, check.value, check.message) == (None, None, "no poses given")


# -- the overlay rules ----------------------------------------------------------------------------------------


class _Scene:
    """The accumulator's state, ``by`` x ``bx`` blocks of 32x32 pixels. Unset pixels are moving (changed by 255)
    and, with ``textured``, edges in both directions (Sobel 200 each way), else flat."""

    def __init__(self, by: int, bx: int, textured: bool = True):
        self.change = np.full((by * B, bx * B), 255.0, np.float32)
        self.gx = np.full(self.change.shape, 200.0 if textured else 0.0, np.float32)
        self.gy = self.gx.copy()
        self.used = np.zeros((by, bx), int)  # pixels set so far in each block

    def put(self, block: tuple[int, int], n: int, gx: float, gy: float, change: float = 0.0) -> _Scene:
        """Set the next ``n`` pixels of ``block`` (row, column), in raster order."""
        r, c = block
        k = np.arange(self.used[r, c], self.used[r, c] + n)
        self.used[r, c] += n
        ys, xs = r * B + k // B, c * B + k % B
        self.change[ys, xs], self.gx[ys, xs], self.gy[ys, xs] = change, gx, gy
        return self

    def shape(self, block: tuple[int, int], vertical: int, horizontal: int, **kw: float) -> _Scene:
        """Still edges of a drawn shape: ``vertical`` with a horizontal gradient, ``horizontal`` with a vertical one."""
        return self.put(block, vertical, 100.0, 0.0, **kw).put(block, horizontal, 0.0, 100.0, **kw)

    def check(self, pairs: int = 8, **spec: object):
        acc = _OverlayAccumulator(np.ones(pairs + 1, bool))
        acc.max_change, acc.gx, acc.gy, acc.pairs = self.change, self.gx, self.gy, pairs
        return acc.check(_spec(height=self.change.shape[0], width=self.change.shape[1], **spec))


@pytest.mark.parametrize("pairs, judged", [(7, False), (8, True)])
def test_eight_moving_pairs_are_needed_to_judge(pairs, judged):
    check = _Scene(2, 2).shape((0, 0), 12, 12).shape((1, 1), 12, 12).check(pairs=pairs)
    if judged:
        assert check.ok is False and check.value["moving_pairs"] == 8
    else:
        assert check.ok is None and check.value == {"moving_pairs": 7}
        assert check.message == "the camera moves in only 7 frame pairs; not enough to judge"


def test_no_moving_pair_is_not_judged_even_when_no_pair_is_required():
    check = _OverlayAccumulator(np.zeros(3, bool)).check(_spec(overlay_min_moving=0))
    assert check.ok is None and check.value == {"moving_pairs": 0}


@pytest.mark.parametrize("blocks, ok", [(1, True), (2, False)])
def test_two_suspicious_blocks_make_an_overlay(blocks, ok):
    scene = _Scene(2, 2)
    for k in range(blocks):
        scene.shape((k, k), 12, 12)
    check = scene.check()
    assert check.ok is ok and check.value["blocks_with_unmoving_edges"] == blocks
    assert check.expected == "< 2 blocks with unmoving edges" and (check.message == "") is ok


@pytest.mark.parametrize("vertical, horizontal, flagged", [(12, 12, True), (12, 11, False)])
def test_a_block_is_suspicious_from_24_still_edge_pixels(vertical, horizontal, flagged):
    check = _Scene(2, 2).shape((0, 0), vertical, horizontal).shape((1, 1), vertical, horizontal).check()
    assert check.value["blocks_with_unmoving_edges"] == (2 if flagged else 0) and check.ok is not flagged


@pytest.mark.parametrize("magnitude, edge", [(60.0, True), (59.99, False)])
def test_an_edge_has_a_sobel_magnitude_of_at_least_60(magnitude, edge):
    scene = _Scene(2, 2)
    for b in ((0, 0), (1, 1)):
        scene.put(b, 12, magnitude, 0.0).put(b, 12, 0.0, magnitude)
    assert scene.check().ok is not edge


@pytest.mark.parametrize("change, still", [(8.0, True), (9.0, False)])
def test_a_still_pixel_changes_by_at_most_8_grey_levels(change, still):
    check = _Scene(2, 2).shape((0, 0), 12, 12, change=change).shape((1, 1), 12, 12, change=change).check()
    assert check.ok is not still and check.value["blocks_with_unmoving_edges"] == (2 if still else 0)


@pytest.mark.parametrize("vertical, horizontal, flagged", [
    (18, 6, True), (6, 18, True),  # a quarter of each orientation: a drawn shape
    (20, 5, False), (24, 0, False),  # less than a quarter of one: a real edge along the motion
])
def test_a_suspicious_block_has_at_least_a_quarter_of_each_orientation(vertical, horizontal, flagged):
    check = _Scene(2, 2).shape((0, 0), vertical, horizontal).shape((1, 1), vertical, horizontal).check()
    assert check.value["blocks_with_unmoving_edges"] == (2 if flagged else 0)


@pytest.mark.parametrize("ties, horizontal, flagged", [(18, 6, True), (20, 4, False)])
def test_an_edge_as_steep_both_ways_counts_as_vertical(ties, horizontal, flagged):
    """gx == gy is a vertical edge (and not a horizontal one): 18 ties + 6 horizontal is shaped, 20 + 4 is not."""
    scene = _Scene(2, 2)
    for b in ((0, 0), (1, 1)):
        scene.put(b, ties, 100.0, 100.0).put(b, horizontal, 0.0, 100.0)
    assert scene.check().value["blocks_with_unmoving_edges"] == (2 if flagged else 0)


def test_only_still_edges_count_towards_the_horizontal_quarter():
    """Vertical still edges beside moving horizontal edges and still flat pixels with a faint vertical gradient:
    neither kind is a still horizontal edge, so the blocks are one-orientation lines, not shapes."""
    scene = _Scene(2, 2)
    for b in ((0, 0), (1, 1)):
        scene.shape(b, 24, 0).put(b, 24, 0.0, 100.0, change=255.0).put(b, 24, 0.0, 1.0)
    check = scene.check()
    assert check.ok is True and check.value["blocks_with_unmoving_edges"] == 0


def test_the_value_reports_blocks_pairs_and_the_unmoving_edge_fraction():
    """3x2 blocks; edges: 5 still, 10 moving, so 1/3 of them are still (to 4 places); still flat pixels don't count."""
    scene = _Scene(3, 2, textured=False).put((0, 0), 5, 100.0, 0.0).put((1, 1), 10, 100.0, 0.0, change=255.0)
    scene.put((2, 0), 50, 0.0, 0.0)
    check = scene.check(pairs=9)
    assert check.ok is True and check.message == "" and check.value == {
        "blocks_with_unmoving_edges": 0, "blocks": 6, "moving_pairs": 9, "unmoving_edge_fraction": 0.3333}


def test_a_picture_whose_edges_all_stay_still_is_frozen_without_any_suspicious_block():
    """A single edge pixel that never moves is all the edges there are: a frozen video; the box is the frame."""
    check = _Scene(2, 3, textured=False).put((1, 2), 1, 100.0, 0.0).check()
    assert check.ok is False and check.value["blocks_with_unmoving_edges"] == 0
    assert check.value["unmoving_edge_fraction"] == 1.0 and check.value["box_xyxy"] == [0, 0, 3 * B, 2 * B]
    assert check.message.startswith("the picture stays still while the camera moves (a frozen video); turn it off")


def test_nine_tenths_of_the_edges_still_is_not_frozen():
    check = _Scene(2, 2, textured=False).put((0, 0), 9, 100.0, 0.0).put((1, 1), 1, 100.0, 0.0, change=255.0).check()
    assert check.ok is True and check.value["unmoving_edge_fraction"] == 0.9


def test_an_overlay_with_nine_tenths_of_the_edges_still_is_reported_as_an_overlay():
    """Two shaped blocks of 27 still edges (54) and 6 moving edges: 0.9, not above it, so the message names the
    overlay's place rather than a frozen picture."""
    scene = _Scene(2, 2, textured=False).shape((0, 0), 20, 7).shape((1, 1), 20, 7).put((0, 1), 6, 100.0, 0.0,
                                                                                            change=255.0)
    check = scene.check()
    assert check.ok is False and check.value["unmoving_edge_fraction"] == 0.9
    assert "an overlay drawn into the frames" in check.message and "frozen" not in check.message


def test_the_box_spans_the_suspicious_blocks():
    check = _Scene(3, 4).shape((1, 1), 12, 12).shape((2, 2), 12, 12).check()
    assert check.ok is False and check.value["box_xyxy"] == [B, B, 3 * B, 3 * B]
    assert check.message.startswith(f"edges at x {B}-{3 * B}, y {B}-{3 * B} stay in place in all 8 frame pairs")
    assert check.message.endswith("(the contract's writer.overlays)")


# -- check_video on files -------------------------------------------------------------------------------------


def _frames(n: int, h: int = 64, w: int = 64, seed: int = 0) -> list[np.ndarray]:
    import cv2

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 8, w // 8 + n, 3), dtype=np.uint8)
    world = cv2.resize(small, (w + 8 * n, h), interpolation=cv2.INTER_CUBIC)
    return [np.ascontiguousarray(world[:, 8 * i: 8 * i + w]) for i in range(n)]


def _write(path, frames, fps: float = 16.0):
    w = VideoWriter(path, fps)
    for f in frames:
        w(f)
    return w.close()


def _write_av(path, streams, rate=16):
    """A file with one stream per (height, width, frames) in ``streams``, written with PyAV (MPEG-4 part 2)."""
    import av

    with av.open(str(path), "w") as c:
        out = []
        for h, w, n in streams:
            s = c.add_stream("mpeg4", rate=rate)
            s.width, s.height, s.pix_fmt = w, h, "yuv420p"
            out.append((s, _frames(n, h, w)))
        for s, frames in out:
            for i, f in enumerate(frames):
                vf = av.VideoFrame.from_ndarray(f, format="rgb24")
                vf.pts = i
                for p in s.encode(vf):
                    c.mux(p)
            for p in s.encode():
                c.mux(p)
    return path


def test_a_conforming_file_has_ok_checks_without_messages(tmp_path):
    frames = _frames(3)
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec(frames=3, canvas=frames[0]))
    checks = report.by_name()
    assert [(c.name, c.ok, c.message) for c in report.checks[:4]] == [
        ("fps", True, ""), ("frames", True, ""), ("resolution", True, ""), ("first_frame", True, "")]
    assert checks["first_frame"].expected == ">= 0.6" and checks["first_frame"].value > 0.9


def test_a_wrong_frame_count_and_size_say_what_was_found(tmp_path):
    frames = _frames(3)
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec(frames=4, height=48, width=80))
    checks = report.by_name()
    assert checks["frames"].ok is False and checks["frames"].message == (
        "3 frames, the alignment rule expects 4 (contract writer.frames / writer.first_pose)")
    assert checks["resolution"].ok is False and checks["resolution"].value == [64, 64]
    assert checks["resolution"].expected == [48, 80]
    assert checks["resolution"].message == "64x64 frames, the canvas rule says 48x80"


@pytest.mark.parametrize("fps, ok", [(21, True), (19, True), (21.25, False), (18.75, False)])
def test_five_percent_of_20_fps_is_one_frame_per_second_either_way_inclusive(tmp_path, fps, ok):
    check = check_video(_write(tmp_path / "v.mp4", _frames(2), fps=fps), _spec(fps=20.0, frames=2)).by_name()["fps"]
    assert check.ok is ok and check.value == fps and check.expected == 20.0 and (check.message == "") is ok


def test_the_fps_value_is_rounded_to_four_places(tmp_path):
    check = check_video(_write(tmp_path / "v.mp4", _frames(2), fps=50 / 3), _spec(fps=15.0, frames=2)).by_name()["fps"]
    assert check.value == 16.6667 != round(50 / 3, 5) and check.ok is False  # 16.66667 at five places
    assert check.message == "the file is 16.667 fps, upstream's writer writes 15 (contract writer.fps)"


def test_a_file_without_a_frame_rate_fails_fps(tmp_path):
    """NUT files written by PyAV state no average rate: the rate is NaN, which no tolerance accepts."""
    check = check_video(_write_av(tmp_path / "v.nut", [(48, 64, 2)]), _spec(frames=2, fps_tolerance=1e9))
    fps = check.by_name()["fps"]
    assert fps.ok is False and np.isnan(fps.value) and fps.message.startswith("the file is nan fps")
    assert check.by_name()["frames"].value == 2


def test_the_first_video_stream_is_the_one_checked(tmp_path):
    path = _write_av(tmp_path / "v.mkv", [(48, 64, 3), (32, 32, 5)])
    report = check_video(path, _spec(frames=3, height=48, width=64))
    assert report.failed == [] and report.by_name()["resolution"].value == [48, 64]


def test_a_file_whose_video_stream_has_no_frame_has_no_first_frame_to_compare(tmp_path):
    """The AVI's first stream is empty (its second one has the frames): 0 frames; the canvas is not compared."""
    path = _write_av(tmp_path / "v.avi", [(48, 64, 0), (48, 64, 2)])
    report = check_video(path, _spec(frames=2, height=48, width=64, canvas=_frames(1, 48, 64)[0]))
    checks = report.by_name()
    assert checks["frames"].value == 0 and checks["frames"].ok is False
    first = checks["first_frame"]
    assert (first.ok, first.value, first.expected, first.message) == (None, None, 0.6, "the file has no frames")


def test_without_a_canvas_the_first_frame_is_not_compared(tmp_path):
    report = check_video(_write(tmp_path / "v.mp4", _frames(2)), _spec(frames=2))
    first = report.by_name()["first_frame"]
    assert [c.name for c in report.checks] == ["fps", "frames", "resolution", "first_frame", "overlay"]
    assert (first.ok, first.value, first.expected, first.message) == (None, None, 0.6, "no conditioning canvas")


def test_the_first_frame_passes_at_exactly_the_minimum_correlation(tmp_path):
    frames = _frames(2)
    canvas = _frames(1, seed=1)[0] // 2 + frames[0] // 2  # half another image: a correlation well inside (0, 1)
    path = _write(tmp_path / "v.mp4", frames)
    decoded: list[np.ndarray] = []
    check_video(path, _spec(frames=2), lambda i, f: decoded.append(f))
    v = ncc(decoded[0], canvas)
    at = check_video(path, _spec(frames=2, canvas=canvas, first_frame_min_ncc=v)).by_name()["first_frame"]
    assert at.ok is True and at.message == "" and at.value == round(v, 4) != round(v, 5)
    above = check_video(path, _spec(frames=2, canvas=canvas, first_frame_min_ncc=np.nextafter(v, 2.0)))
    first = above.by_name()["first_frame"]  # a numpy threshold still gives a bool: Report.failed lists it
    assert first.ok is False and above.failed == [first] and first.message.startswith(f"the first frame does not match the conditioning image "
                                                          f"(correlation {v:.2f})")


@pytest.mark.parametrize("n_poses, value, message", [
    (None, None, "no poses given"),
    (1, None, "no poses given"),  # one pose: no pair
    (2, {"moving_pairs": 1}, "the camera moves in only 1 frame pairs; not enough to judge"),
])
def test_the_overlay_needs_two_poses(tmp_path, n_poses, value, message):
    poses = None if n_poses is None else np.stack([_at(rot_y(np.radians(3.0 * i))) for i in range(n_poses)])
    check = check_video(_write(tmp_path / "v.mp4", _frames(3)), _spec(frames=3, poses=poses)).by_name()["overlay"]
    assert (check.ok, check.value, check.message) == (None, value, message)
