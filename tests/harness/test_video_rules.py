"""The rules of harness/video.py one at a time, in this process, on tiny frames (16x16, a few frames): the BT.601
colour conversion against hand-computed values, the packed and banded layouts, the padding of a frame's lines, the
writer's checks and error messages, its bounded queue and its failure paths, the x264 settings, the fast RGBA copy,
the frame hash, the probes (header or decode) and the frame selection of ``iter_frames`` / ``read_frames``."""

from __future__ import annotations

import hashlib
import queue
import struct
import threading
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest

from harness import video
from harness.io import ContainmentError, confine
from harness.video import (
    VideoWriter,
    Yuv420pConverter,
    contiguous_copy,
    frames_sha256,
    iter_frames,
    probe_header,
    probe_video,
    read_frames,
    rgb_to_yuv420p,
    rgb_to_yuv420p_planes,
    x264_options,
)
from tests.support.clips import failing_close

ENCODER = "harness-video-encoder"
BLACK, WHITE, RED, GREEN, BLUE = (0, 0, 0), (255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255)
# (R, G, B) -> (Y, U, V), BT.601 limited range, by hand:
#   Y = 16 + (65.481 R + 128.553 G + 24.966 B) / 255, U = 128 + (-37.797 R - 74.203 G + 112 B) / 255,
#   V = 128 + (112 R - 93.786 G - 18.214 B) / 255, each rounded to the nearest integer
PRIMARIES = {BLACK: (16, 128, 128), WHITE: (235, 128, 128), RED: (81, 90, 240),  # 81.481, 90.203
             GREEN: (145, 54, 34),  # 144.553, 53.797, 34.214
             BLUE: (41, 240, 110)}  # 40.966, 109.786


def uniform(h: int, w: int, value) -> np.ndarray:
    return np.full((h, w, 3), value, np.uint8)


def bt601(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unrounded Y, U, V planes in float64 (chroma: the mean of each 2x2 block)."""
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112 * b) / 255
    v = 128 + (112 * r - 93.786 * g - 18.214 * b) / 255
    h, w = y.shape
    return y, *(c.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3)) for c in (u, v))


def convert(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Yuv420pConverter's planes of ``rgb``."""
    h, w = rgb.shape[:2]
    y, u, v = np.zeros((h, w), np.uint8), np.zeros((h // 2, w // 2), np.uint8), np.zeros((h // 2, w // 2), np.uint8)
    Yuv420pConverter(h, w)(rgb, y, u, v)
    return y, u, v


def encoder_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == ENCODER}


def write_video(path, frames, fps=16.0):
    w = VideoWriter(path, fps=fps)
    for f in frames:
        w(f)
    return w.close()


def encode_raw(path, sizes, fmt=None, frames=3):
    """A video of ``frames`` grey frames per stream, one libx264 stream per (H, W) of ``sizes``, muxed by PyAV."""
    with av.open(str(path), "w", format=fmt) as c:
        streams = []
        for h, w in sizes:
            s = c.add_stream("libx264", rate=16)
            s.pix_fmt, s.height, s.width = "yuv420p", h, w
            streams.append(s)
        for i in range(frames):
            for s in streams:
                vf = av.VideoFrame.from_ndarray(uniform(s.height, s.width, 60 * i), format="rgb24")
                vf = vf.reformat(format="yuv420p")
                vf.pts = i
                for p in s.encode(vf):
                    c.mux(p)
        for s in streams:
            for p in s.encode():
                c.mux(p)
    return path


SIX = [uniform(16, 16, 40 * i) for i in range(6)]  # frame i is grey 40 * i


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """A 6-frame 16x16 MP4 at 16 fps written by VideoWriter; frame i is grey 40 * i."""
    return write_video(tmp_path_factory.mktemp("six") / "six.mp4", SIX)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("files")
    mp4 = write_video(d / "one.mp4", SIX[:1])
    data = bytearray(write_video(d / "three.mp4", SIX[:3]).read_bytes())
    at = data.find(b"mdat")
    size = struct.unpack(">I", data[at - 4:at])[0]
    data[at + 4:at - 4 + size] = bytes(size - 8)  # the coded frames zeroed, the container intact
    (d / "zeroed.mp4").write_bytes(data)
    return {"one": mp4, "zeroed": d / "zeroed.mp4", "ts": encode_raw(d / "v.ts", [(16, 16)], "mpegts"),
            "two": encode_raw(d / "two.mp4", [(16, 16), (16, 32)])}


# --- rgb_to_yuv420p_planes and Yuv420pConverter: the colour conversion -------------------------------------------


@pytest.mark.parametrize("to_planes", [rgb_to_yuv420p_planes, convert], ids=["planes", "converter"])
@pytest.mark.parametrize("colour", list(PRIMARIES), ids=["black", "white", "red", "green", "blue"])
def test_primary_colours_have_their_bt601_limited_range_values(to_planes, colour):
    y, u, v = to_planes(uniform(4, 4, colour))
    assert (y.shape, u.shape, v.shape) == ((4, 4), (2, 2), (2, 2))
    assert all(p.dtype == np.uint8 for p in (y, u, v))
    want = PRIMARIES[colour]
    assert [np.unique(y).tolist(), np.unique(u).tolist(), np.unique(v).tolist()] == [[x] for x in want]


@pytest.mark.parametrize("to_planes", [rgb_to_yuv420p_planes, convert], ids=["planes", "converter"])
def test_chroma_is_the_mean_of_each_2x2_block(to_planes):
    """Block (0, 0) holds red, green / blue, black: U = (90.203 + 53.797 + 240 + 128) / 4 = 128 and
    V = (240 + 34.214 + 109.786 + 128) / 4 = 128; the other blocks are uniform red, green and blue."""
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[0, 0], rgb[0, 1], rgb[1, 0] = RED, GREEN, BLUE
    rgb[:2, 2:], rgb[2:, :2], rgb[2:, 2:] = RED, GREEN, BLUE
    y, u, v = to_planes(rgb)
    assert y.tolist() == [[81, 145, 81, 81], [41, 16, 81, 81], [145, 145, 41, 41], [145, 145, 41, 41]]
    assert u.tolist() == [[128, 90], [54, 240]]
    assert v.tolist() == [[128, 240], [34, 110]]


@pytest.mark.parametrize("to_planes", [rgb_to_yuv420p_planes, convert], ids=["planes", "converter"])
@pytest.mark.parametrize("hw", [(8, 12), (100, 6)])  # 100 rows: bands of 48, 48 and 4
def test_every_sample_is_the_bt601_value_rounded(to_planes, hw):
    rgb = np.random.default_rng(hw[0]).integers(0, 256, (*hw, 3), dtype=np.uint8)
    for got, want in zip(to_planes(rgb), bt601(rgb)):
        clear = np.abs(want - np.floor(want) - 0.5) > 1e-3  # float32 may round a near tie either way
        assert clear.mean() > 0.9
        np.testing.assert_array_equal(got[clear], np.rint(want[clear]))
        assert np.abs(got.astype(float) - want).max() <= 0.501


def test_the_packed_layout_is_y_then_u_then_v_rows():
    """(H, W) -> (3H/2, W): the H/2 x W/2 chroma planes are laid out as H/4 rows of W each."""
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[:2, :2], rgb[:2, 2:], rgb[2:, :2], rgb[2:, 2:] = RED, GREEN, BLUE, WHITE
    assert rgb_to_yuv420p(rgb).tolist() == [[81, 81, 145, 145], [81, 81, 145, 145], [41, 41, 235, 235],
                                            [41, 41, 235, 235], [90, 54, 240, 128], [240, 34, 110, 128]]


@pytest.mark.parametrize("hw, size", [((3, 4), "4x3"), ((4, 5), "5x4")])
def test_the_converter_refuses_an_odd_size_naming_it(hw, size):
    with pytest.raises(ValueError, match=f"^yuv420p needs even sizes; got {size}$"):
        Yuv420pConverter(*hw)


def test_a_converter_frame_pads_each_line_with_its_last_sample():
    rgb = np.random.default_rng(1).integers(0, 256, (4, 6, 3), dtype=np.uint8)
    frame = Yuv420pConverter(4, 6).frame(rgb)
    assert (frame.width, frame.height, frame.format.name) == (6, 4, "yuv420p")
    for plane, want in zip(frame.planes, rgb_to_yuv420p_planes(rgb)):
        h, w = want.shape
        buf = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)[:h]
        assert plane.line_size > w  # there is padding to check
        np.testing.assert_array_equal(buf[:, :w], want)
        np.testing.assert_array_equal(buf[:, w:], np.repeat(want[:, -1:], plane.line_size - w, axis=1))


# --- x264_options --------------------------------------------------------------------------------------------------


def test_x264_runs_one_thread_without_mbtree_and_tags_bt601():
    params = "mbtree=0:colormatrix=smpte170m:colorprim=smpte170m:transfer=smpte170m"
    assert x264_options() == {"crf": "18", "preset": "veryfast", "threads": "1", "x264-params": params}
    assert x264_options(23, "slow") == {"crf": "23", "preset": "slow", "threads": "1", "x264-params": params}


# --- contiguous_copy -----------------------------------------------------------------------------------------------


@pytest.fixture
def cvt_calls(monkeypatch):
    """Records each cv2.cvtColor call (the real conversion still runs)."""
    calls, real = [], cv2.cvtColor

    def spy(src, code, *a, **k):
        calls.append((src.shape, code))
        return real(src, code, *a, **k)

    monkeypatch.setattr(cv2, "cvtColor", spy)
    return calls


def _rgba(h=4, w=6):
    return np.random.default_rng(h * w).integers(0, 256, (h, w, 4), dtype=np.uint8)


def test_the_rgb_view_of_an_rgba_buffer_is_copied_by_opencv(cvt_calls):
    rgba = _rgba()
    out = contiguous_copy(rgba[..., :3])
    assert cvt_calls == [((4, 6, 4), cv2.COLOR_RGBA2RGB)]
    assert out.flags.c_contiguous and out.dtype == np.uint8
    np.testing.assert_array_equal(out, rgba[..., :3])


@pytest.mark.parametrize("name", ["contiguous", "1x1 view", "fortran frame", "over a bytearray", "rows",
                                  "channels 1-3", "transposed", "fortran rgba", "float"])
def test_any_other_frame_is_copied_by_numpy_with_its_own_values(cvt_calls, name):
    """Only a non-contiguous view starting at the RGBA buffer's first byte, with its shape and strides, takes the
    OpenCV path: a contiguous frame (the RGB of a single RGBA pixel is one), a Fortran-ordered frame of its own,
    a strided frame over memory that is not an array, a subset of rows, the channels G, B, A, a transposed view, a
    Fortran-ordered buffer or floats do not."""
    rgba = _rgba(6, 6)
    buffer = bytearray(rgba.tobytes())
    frame = {"contiguous": rgba[..., :3].copy(), "1x1 view": rgba[:1, :1].copy()[..., :3],
             "fortran frame": np.asfortranarray(rgba[..., :3]),
             "over a bytearray": np.ndarray((6, 6, 3), np.uint8, buffer=buffer, strides=(24, 4, 1)),
             "rows": rgba[:2, :, :3],
             "channels 1-3": rgba[..., 1:],
             "transposed": rgba.transpose(1, 0, 2)[..., :3], "fortran rgba": np.asfortranarray(rgba)[..., :3],
             "float": rgba.astype(np.float32)[..., :3]}[name]
    out = contiguous_copy(frame)
    assert cvt_calls == []
    assert out.dtype == np.uint8 and out.flags.c_contiguous and out.shape == frame.shape
    np.testing.assert_array_equal(out, frame.astype(np.uint8))


def test_a_contiguous_frame_is_copied_not_shared():
    frame = _rgba()[..., :3].copy()
    out = contiguous_copy(frame)
    assert not np.shares_memory(out, frame)
    frame[...] = 0
    assert out.any()


# --- frames_sha256 -------------------------------------------------------------------------------------------------


def test_the_frames_hash_is_the_sha256_of_the_concatenated_c_order_bytes():
    a, b = _rgba()[..., :3], _rgba(2, 2)[..., :3]
    assert frames_sha256([]) == hashlib.sha256(b"").hexdigest()
    assert frames_sha256([a, b]) == hashlib.sha256(a.tobytes() + b.tobytes()).hexdigest()
    assert frames_sha256([np.asfortranarray(a), b]) == frames_sha256([a.copy(), b])


# --- VideoWriter ---------------------------------------------------------------------------------------------------


def test_the_writer_makes_missing_folders_and_publishes_the_file_only_on_close(tmp_path):
    path = tmp_path / "a" / "b" / "v.mp4"
    w = VideoWriter(path, fps=16)
    assert path.parent.is_dir() and not path.exists()
    assert w.encode_cpu_s == 0.0 and w.num_frames == 0
    for f in SIX[:3]:
        w(f)
    assert w.num_frames == 3
    assert w.close() == path
    assert [p.name for p in path.parent.iterdir()] == ["v.mp4"]
    assert probe_video(path) == {"num_frames": 3, "fps": 16.0, "width": 16, "height": 16, "codec": "h264"}


def test_a_writer_in_an_existing_folder_writes_there(tmp_path):
    write_video(tmp_path / "v.mp4", SIX[:1])
    assert [p.name for p in tmp_path.iterdir()] == ["v.mp4"]


def test_a_writer_outside_the_confined_run_is_refused_before_anything_starts(tmp_path):
    before = encoder_threads()
    with confine(tmp_path / "run"), pytest.raises(ContainmentError, match="outside the run directory"):
        VideoWriter(tmp_path / "elsewhere" / "v.mp4", fps=16)
    assert encoder_threads() == before and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fps, rate", [(16.0, Fraction(16)), (30000 / 1001, Fraction(30000, 1001)),
                                       (1003 / 1002, Fraction(1002, 1001))])  # the closest with a denominator <= 1001
def test_the_frame_rate_is_stored_as_a_fraction_with_a_denominator_up_to_1001(tmp_path, fps, rate):
    path = write_video(tmp_path / "v.mp4", SIX[:2], fps=fps)
    with av.open(str(path)) as c:
        assert c.streams.video[0].average_rate == rate


@pytest.mark.parametrize("shape, dtype, got", [((4, 4, 3), np.float32, "(4, 4, 3) float32"),
                                               ((4, 4), np.uint8, "(4, 4) uint8"),
                                               ((4, 4, 4), np.uint8, "(4, 4, 4) uint8"),
                                               ((2, 2, 3, 3), np.uint8, "(2, 2, 3, 3) uint8")])
def test_a_frame_that_is_not_hw3_uint8_is_refused_naming_its_shape_and_type(tmp_path, shape, dtype, got):
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    try:
        with pytest.raises(ValueError) as e:
            w(np.zeros(shape, dtype))
        assert str(e.value) == f"frames must be (H, W, 3) uint8 RGB; got {got}"
        assert w.num_frames == 0
    finally:
        w.abort()


@pytest.mark.parametrize("hw, size", [((15, 16), "16x15"), ((16, 15), "15x16"), ((15, 15), "15x15")])
def test_an_odd_first_frame_is_refused_naming_its_size(tmp_path, hw, size):
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    try:
        with pytest.raises(ValueError) as e:
            w(uniform(*hw, 0))
        assert str(e.value) == f"H.264 yuv420p needs even sizes; got {size}"
    finally:
        w.abort()


def test_a_frame_of_another_size_is_refused_naming_both_sizes(tmp_path):
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    try:
        w(uniform(16, 16, 0))
        w(uniform(16, 16, 9))  # the same size again is fine
        with pytest.raises(ValueError) as e:
            w(uniform(16, 18, 0))
        assert str(e.value) == "frame 2 is 18x16, the video is 16x16"
        assert w.num_frames == 2
    finally:
        w.abort()


def test_the_encoder_is_a_named_daemon_thread_that_ends_with_close(tmp_path):
    before = encoder_threads()
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    (new,) = encoder_threads() - before
    assert new.daemon and new.is_alive()
    w(SIX[0])
    w.close()
    assert not new.is_alive()


def test_abort_stops_the_encoder_and_leaves_no_file(tmp_path):
    before = encoder_threads()
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    for f in SIX[:3]:
        w(f)
    w.abort()
    assert encoder_threads() == before and list(tmp_path.iterdir()) == []
    w.abort()  # twice is harmless
    assert list(tmp_path.iterdir()) == []


def _stall_then_fail(monkeypatch):
    """The encoder takes the first frame, then waits in the conversion until released, then fails."""
    started, release = threading.Event(), threading.Event()

    def frame(self, rgb):
        started.set()
        release.wait(30)
        raise OSError("simulated encoder failure")

    monkeypatch.setattr(video.Yuv420pConverter, "frame", frame)
    return started, release


def test_a_stalled_encoder_queues_32_frames(tmp_path, monkeypatch):
    started, release = _stall_then_fail(monkeypatch)
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    try:
        w(SIX[0])
        assert started.wait(30)
        for _ in range(31):
            w(SIX[1])
        assert not w._queue.full()
        w(SIX[1])
        assert w._queue.full() and w.num_frames == 33
    finally:
        release.set()
        w.abort()


def test_frames_queued_when_the_encoder_fails_are_drained_and_not_hashed(tmp_path, monkeypatch):
    started, release = _stall_then_fail(monkeypatch)
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    w(SIX[0])
    assert started.wait(30)
    for _ in range(32):  # a full queue: close() can hand over its end marker only once the thread drains it
        w(SIX[1])
    release.set()
    with pytest.raises(RuntimeError, match="^video encoder failed: simulated encoder failure$"):
        w.close()
    assert w.frames_sha256 == frames_sha256(SIX[:1])  # every queued frame was taken; only the first was hashed
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="simulated encoder failure"):
        w(SIX[2])


def test_reading_the_hash_waits_for_the_encoder_to_take_every_frame_written(tmp_path, monkeypatch):
    """The encoder holds frame 0 in its conversion until someone waits on the queue; frame 1 is still queued then, so
    a hash read without waiting would cover frame 0 alone."""
    release, real_frame = threading.Event(), video.Yuv420pConverter.frame

    class Queue(queue.Queue):
        def join(self):
            release.set()
            super().join()

    def frame(self, rgb):
        release.wait(30)
        return real_frame(self, rgb)

    monkeypatch.setattr(queue, "Queue", Queue)
    monkeypatch.setattr(video.Yuv420pConverter, "frame", frame)
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    try:
        w(SIX[0])
        w(SIX[1])
        assert w.frames_sha256 == frames_sha256(SIX[:2])
    finally:
        release.set()
        w.close()


def test_the_first_error_is_reported_and_the_container_still_closed(tmp_path, monkeypatch):
    closed = failing_close(monkeypatch)

    def frame(self, rgb):
        raise OSError("simulated encoder failure")

    monkeypatch.setattr(video.Yuv420pConverter, "frame", frame)
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    w(SIX[0])
    with pytest.raises(RuntimeError, match="^video encoder failed: simulated encoder failure$"):
        w.close()
    assert closed == [True] and list(tmp_path.iterdir()) == []


def test_a_failure_to_open_the_output_is_reported_and_leaves_no_file(tmp_path, monkeypatch):
    def refuse(*a, **k):
        raise OSError("simulated open failure")

    monkeypatch.setattr(av, "open", refuse)
    w = VideoWriter(tmp_path / "v.mp4", fps=16)
    with pytest.raises(RuntimeError, match="^video encoder failed: simulated open failure$"):
        w.close()
    assert list(tmp_path.iterdir()) == [] and w.encode_cpu_s >= 0


# --- probe_video and probe_header ----------------------------------------------------------------------------------


@pytest.fixture
def opens(monkeypatch):
    """Counts av.open calls (the real open still runs)."""
    calls, real = [], av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    return calls


def test_frame_i_is_shown_at_i_over_the_frame_rate(six):
    with av.open(str(six)) as c:
        assert [f.time for f in c.decode(video=0)] == [i / 16 for i in range(6)]


def test_probe_video_decodes_every_frame(six):
    assert probe_video(six) == {"num_frames": 6, "fps": 16.0, "width": 16, "height": 16, "codec": "h264"}


def test_probe_header_reads_an_mp4_s_frame_count_without_a_second_open(six, files, opens):
    assert probe_header(six) == {"num_frames": 6, "fps": 16.0, "width": 16, "height": 16, "codec": "h264"}
    assert probe_header(files["one"])["num_frames"] == 1
    assert opens == [str(six), str(files["one"])]


def test_probe_header_decodes_a_container_without_a_frame_count(files, opens):
    assert probe_header(files["ts"]) == {"num_frames": 3, "fps": 16.0, "width": 16, "height": 16, "codec": "h264"}
    assert len(opens) == 2


@pytest.mark.parametrize("probe", [probe_video, probe_header])
def test_the_probes_describe_the_first_video_stream(files, probe):
    info = probe(files["two"])
    assert (info["width"], info["height"], info["num_frames"]) == (16, 16, 3)


def test_probe_header_raises_on_frames_that_cannot_be_decoded(files):
    with av.open(str(files["zeroed"])) as c:
        assert c.streams.video[0].frames == 3  # the header alone looks fine
    with pytest.raises(av.error.InvalidDataError):
        probe_header(files["zeroed"])


# --- iter_frames and read_frames -----------------------------------------------------------------------------------


def _indices(path, **kw) -> list[int]:
    return [i for i, _ in iter_frames(path, **kw)]


@pytest.mark.parametrize("kw, want", [({}, [0, 1, 2, 3, 4, 5]), ({"stride": 2}, [0, 2, 4]),
                                      ({"stride": 4}, [0, 4]), ({"indices": [4, 1]}, [1, 4]),
                                      ({"indices": [0]}, [0]), ({"indices": [2, 9]}, [2]), ({"indices": []}, []),
                                      ({"stride": 2, "indices": [1, 3]}, [1, 3])])
def test_frames_are_selected_by_stride_or_by_index_in_decoding_order(six, kw, want):
    assert _indices(six, **kw) == want


def test_decoding_stops_after_the_last_wanted_index(six, monkeypatch):
    decoded = []
    real = av.container.InputContainer.decode

    def decode(self, *a, **k):
        for f in real(self, *a, **k):
            decoded.append(f)
            yield f

    monkeypatch.setattr(av.container.InputContainer, "decode", decode)
    assert _indices(six, indices=[1, 2]) == [1, 2]
    assert len(decoded) == 4  # frame 3 is decoded to see that it is past the last index, frame 4 never


def test_read_frames_stacks_the_selected_rgb_frames_with_their_indices(six):
    idx, frames = read_frames(six)
    assert idx == [0, 1, 2, 3, 4, 5] and frames.shape == (6, 16, 16, 3) and frames.dtype == np.uint8
    assert np.abs(frames.astype(int) - np.stack(SIX).astype(int)).max() <= 3
    idx, frames = read_frames(six, stride=3)
    assert idx == [0, 3] and np.abs(frames.mean(axis=(1, 2, 3)) - [0, 120]).max() <= 3
    idx, frames = read_frames(six, indices=[5])
    assert idx == [5] and abs(frames.mean() - 200) <= 3


def test_read_frames_of_nothing_is_an_empty_stack(six):
    idx, frames = read_frames(six, indices=[])
    assert idx == [] and frames.shape == (0, 0, 0, 3) and frames.dtype == np.uint8
