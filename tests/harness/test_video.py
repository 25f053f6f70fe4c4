"""The queue-fed VideoWriter: same bytes as encoding directly on the caller's thread, the fast colour conversion
equals the plain numpy one, and an encoder failure surfaces on the caller's thread with no file left behind.

Bit-exact video: the same frames give the same H.264 bytes in any process, whatever the heap held before."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from tests.support import ROOT
from tests.support.clips import failing_close


def _frames(n: int, h: int, w: int) -> list[np.ndarray]:
    yy, xx = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        f = np.stack([(xx * 3 + i * 7) % 256, (yy * 2 + i * 5) % 256, (xx + yy + 9 * i) % 256], -1)
        f = f + rng.integers(-20, 20, f.shape)  # some texture, so x264 has real work
        out.append(np.clip(f, 0, 255).astype(np.uint8))
    return out


def _direct_encode(path, frames, fps: float) -> None:
    """The reference path: plain rgb_to_yuv420p_planes, encoded synchronously on this thread."""
    import av

    from harness.video import rgb_to_yuv420p_planes, x264_options

    h, w = frames[0].shape[:2]
    with av.open(str(path), mode="w") as c:
        s = c.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        s.pix_fmt = "yuv420p"
        s.options = x264_options()
        s.height, s.width = h, w
        for i, rgb in enumerate(frames):
            vf = av.VideoFrame(w, h, "yuv420p")
            for plane, data in zip(vf.planes, rgb_to_yuv420p_planes(rgb)):
                buf = np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)
                buf[: data.shape[0], : data.shape[1]] = data
                buf[: data.shape[0], data.shape[1]:] = data[:, -1:]
            vf.pts = i
            for p in s.encode(vf):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


@pytest.mark.parametrize("hw", [(96, 160), (186, 330)])  # 186: bands of 48 rows do not divide it
def test_queue_fed_writer_writes_the_bytes_of_the_direct_path(tmp_path, hw):
    from harness.video import VideoWriter

    frames = _frames(20, *hw)
    w = VideoWriter(tmp_path / "queued.mp4", fps=16)
    for f in frames:
        w(f)
    w.close()
    _direct_encode(tmp_path / "direct.mp4", frames, 16)
    assert (tmp_path / "queued.mp4").read_bytes() == (tmp_path / "direct.mp4").read_bytes()
    assert w.encode_cpu_s > 0


@pytest.mark.parametrize("hw", [(2, 2), (48, 64), (50, 64), (186, 330), (480, 832)])
def test_banded_conversion_equals_plain_numpy(hw):
    from harness.video import Yuv420pConverter, rgb_to_yuv420p_planes

    h, w = hw
    rng = np.random.default_rng(h * w)
    conv = Yuv420pConverter(h, w)
    for rgb in [rng.integers(0, 256, (h, w, 3), dtype=np.uint8), np.zeros((h, w, 3), np.uint8),
                np.full((h, w, 3), 255, np.uint8)]:
        y, u, v = np.empty((h, w), np.uint8), np.empty((h // 2, w // 2), np.uint8), np.empty((h // 2, w // 2), np.uint8)
        conv(rgb, y, u, v)
        for got, want in zip((y, u, v), rgb_to_yuv420p_planes(rgb)):
            np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_banded_conversion_equals_plain_numpy_on_every_colour():
    """All 2^24 colours, each as a uniform 2x2 block (so the chroma of every colour is checked too)."""
    from harness.video import Yuv420pConverter, rgb_to_yuv420p_planes

    conv = Yuv420pConverter(2048, 2048)
    y, u, v = np.empty((2048, 2048), np.uint8), np.empty((1024, 1024), np.uint8), np.empty((1024, 1024), np.uint8)
    allc = np.arange(2**24, dtype=np.uint32)
    for k in range(16):
        c = allc[k << 20:(k + 1) << 20]
        rgb = np.stack([(c >> 16) & 255, (c >> 8) & 255, c & 255], -1).astype(np.uint8).reshape(1024, 1024, 3)
        rgb = np.repeat(np.repeat(rgb, 2, 0), 2, 1)
        conv(rgb, y, u, v)
        for got, want in zip((y, u, v), rgb_to_yuv420p_planes(rgb)):
            assert np.array_equal(got, want), k


def _fail_on_third_frame(monkeypatch):
    from harness import video

    real, calls = video.Yuv420pConverter.frame, [0]

    def frame(self, rgb):
        calls[0] += 1
        if calls[0] == 3:
            raise OSError("simulated encoder failure")
        return real(self, rgb)

    monkeypatch.setattr(video.Yuv420pConverter, "frame", frame)


def test_encoder_thread_error_reaches_the_caller_and_leaves_no_file(tmp_path, monkeypatch):
    from harness.video import VideoWriter

    _fail_on_third_frame(monkeypatch)
    w = VideoWriter(tmp_path / "v.mp4", fps=8)
    with pytest.raises(RuntimeError, match="simulated encoder failure"):
        for f in _frames(60, 48, 64):  # more than the queue holds: the producer must never block
            w(f)
        w.close()
    with pytest.raises(RuntimeError, match="simulated encoder failure"):
        w.close()  # also after write() raised first
    assert list(tmp_path.iterdir()) == []


def test_failure_after_the_last_frame_is_reported_not_hung(tmp_path, monkeypatch):
    """An error while flushing/closing the container (after the end-of-stream sentinel was taken) used to escape
    the thread: close() then published a broken file, or waited forever to drain the queue."""
    from harness.video import VideoWriter

    failing_close(monkeypatch)
    w = VideoWriter(tmp_path / "v.mp4", fps=8)
    for f in _frames(5, 48, 64):
        w(f)
    with pytest.raises(RuntimeError, match="simulated disk full"):
        w.close()
    assert list(tmp_path.iterdir()) == []


def test_abort_after_an_encoder_error_leaves_no_file(tmp_path, monkeypatch):
    from harness.video import VideoWriter

    _fail_on_third_frame(monkeypatch)
    w = VideoWriter(tmp_path / "v.mp4", fps=8)
    try:
        for f in _frames(10, 48, 64):
            w(f)
    except RuntimeError:
        pass
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_frames_hash_before_close_covers_the_frames_written_so_far(tmp_path):
    """The encoder thread hashes the frames; reading the hash waits for it to take every frame written."""
    from harness.video import VideoWriter, frames_sha256

    frames = _frames(6, 48, 64)
    w = VideoWriter(tmp_path / "v.mp4", fps=8)
    for f in frames[:3]:
        w(f)
    assert w.frames_sha256 == frames_sha256(frames[:3])
    for f in frames[3:]:
        w(f)
    w.close()
    assert w.frames_sha256 == frames_sha256(frames)



_ENCODE = """
import hashlib, sys
import numpy as np
from harness.video import VideoWriter
h, w = 144, 176   # a size at which x264's mbtree read uninitialised memory
yy, xx = np.mgrid[0:h, 0:w]
frames = [np.stack([(xx * 3 + i * 7) % 256, (yy * 2 + i * 5) % 256, ((xx + yy) // 2 + 40 * np.sin(i / 3)) % 256],
                   -1).astype(np.uint8) for i in range(24)]
out = sys.argv[1]
w_ = VideoWriter(out, fps=16)
for f in frames:
    w_(f)
w_.close()
print(hashlib.sha256(open(out, "rb").read()).hexdigest(), w_.frames_sha256)
"""


@pytest.mark.slow
def test_same_frames_same_bytes_in_three_processes(tmp_path):
    """Three processes with different heap garbage (glibc MALLOC_PERTURB_) must write identical files."""
    results = set()
    for i, perturb in enumerate(("0", "17", "170")):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_PERTURB_": perturb}
        r = subprocess.run([sys.executable, "-c", _ENCODE, str(tmp_path / f"v{i}.mp4")], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        results.add(r.stdout.strip())
    assert len(results) == 1, results
    bytes_ = {hashlib.sha256((tmp_path / f"v{i}.mp4").read_bytes()).hexdigest() for i in range(3)}
    assert len(bytes_) == 1


def test_frames_hash_matches_the_frames_given(tmp_path):
    from harness.video import VideoWriter, frames_sha256

    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(5)]
    w = VideoWriter(tmp_path / "v.mp4", fps=10)
    for f in frames:
        w(np.asfortranarray(f))  # layout must not change the hash
    w.close()
    assert w.frames_sha256 == frames_sha256(frames)
    assert w.frames_sha256 != frames_sha256(frames[:4])


def test_any_even_size_encodes(tmp_path):
    """Heights that are not multiples of 4 (e.g. 186) used to fail in the YUV packing."""
    from harness.video import VideoWriter, probe_video, read_frames

    frame = np.full((186, 330, 3), 120, np.uint8)
    w = VideoWriter(tmp_path / "v.mp4", fps=8)
    for _ in range(3):
        w(frame)
    w.close()
    info = probe_video(tmp_path / "v.mp4")
    assert (info["width"], info["height"], info["num_frames"]) == (330, 186, 3)
    _, dec = read_frames(tmp_path / "v.mp4")
    assert np.abs(dec.astype(int) - 120).max() <= 2


def test_writer_temp_names_are_unique_per_writer(tmp_path):
    from harness.video import VideoWriter

    a, b = VideoWriter(tmp_path / "video.mp4", fps=8), VideoWriter(tmp_path / "video.mp4", fps=8)
    try:
        assert a._tmp != b._tmp and str(os.getpid()) in a._tmp.name
    finally:
        a.abort()
        b.abort()


def test_an_rgba_views_frames_are_written_as_the_same_bytes(tmp_path):
    """The reference model hands the writer ``rgba[..., :3]`` views: copied in bulk (OpenCV), the frame hash and the
    video are those of the same frames given as contiguous RGB, and a later change to the RGBA buffer (a renderer
    reusing it) changes nothing written."""
    from harness.video import VideoWriter, contiguous_copy

    frames = _frames(8, 96, 160)
    rgba = [np.dstack([f, np.full(f.shape[:2], 255, np.uint8)]) for f in frames]
    view = rgba[0][..., :3]
    copy = contiguous_copy(view)
    assert copy.flags.c_contiguous and np.array_equal(copy, frames[0]) and not np.shares_memory(copy, rgba[0])
    odd = rgba[1][::2, :, :3]  # another layout: copied by numpy, the same values
    assert np.array_equal(contiguous_copy(odd), frames[1][::2])
    a, b = VideoWriter(tmp_path / "a.mp4", fps=16), VideoWriter(tmp_path / "b.mp4", fps=16)
    for f, x in zip(frames, rgba):
        a(f)
        b(x[..., :3])
        x[...] = 0  # the caller reuses its buffer at once
    assert a.frames_sha256 == b.frames_sha256
    a.close()
    b.close()
    assert (tmp_path / "a.mp4").read_bytes() == (tmp_path / "b.mp4").read_bytes()
