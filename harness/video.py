"""Video IO with PyAV: H.264 (yuv420p) MP4 that every player reads, written atomically.

OpenCV wheels cannot write H.264 (``VideoWriter.isOpened()`` just returns False), hence PyAV's bundled FFmpeg.
"""

from __future__ import annotations

import hashlib
import uuid
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

if TYPE_CHECKING:  # PyAV is imported lazily at run time
    import av


class VideoWriter:
    """Write (H, W, 3) uint8 RGB frames to an H.264 MP4. The file appears at ``path`` only on :meth:`close`.

    Encoding (RGB -> YUV, x264, muxing) runs on a dedicated thread fed by a bounded queue (32 frames), so it
    overlaps with generation when a second core is free; the caller's thread only copies each frame (the
    encoder thread also hashes it, see :attr:`frames_sha256`).
    An error on the encoder thread is raised by the next :meth:`write` or by :meth:`close`, and no file is left.

    Bit-exact output: the bitstream is a pure function of the frames. x264's macroblock-tree rate control
    (``mbtree``) reads uninitialised lookahead memory at some frame sizes (e.g. 160x96, 176x144): the same frames
    gave different bytes depending on what the heap held before (reproduce with ``MALLOC_PERTURB_=17`` vs ``170``).
    It is therefore off; x264 runs single-threaded, and RGB -> YUV is done in numpy (BT.601, tagged), so neither
    the core count nor swscale's SIMD path changes a byte.

    Args:
        path: destination ``.mp4``. fps: frame rate (a rational close to it is used). crf: x264 quality
        (lower = better; 18 is visually lossless). preset: x264 speed preset.
    """

    def __init__(self, path: str | Path, fps: float, crf: int = 18, preset: str = "veryfast"):
        import queue
        import threading

        from .io import check_contained, temp_tag

        self.path = Path(path)
        check_contained(self.path)  # while a command runs: inside its run directory (harness.io.confine)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # unique per writer: two processes writing the same item never share a temporary file

        self._tmp = self.path.with_name(f".{self.path.stem}.{temp_tag()}.{uuid.uuid4().hex[:8]}.partial.mp4")
        self.fps, self.crf, self.preset = fps, crf, preset
        self.num_frames = 0
        self._frames_hash = hashlib.sha256()
        self._shape: tuple[int, int] | None = None
        self._queue: queue.Queue[np.ndarray | None] = queue.Queue(maxsize=32)  # frames, then None
        self._error: BaseException | None = None
        self.encode_cpu_s = 0.0  # CPU seconds the encoder thread spent (conversion, x264, muxing), set when it ends
        self._thread = threading.Thread(target=self._encode_loop, name="harness-video-encoder", daemon=True)
        self._thread.start()

    def _encode_loop(self) -> None:
        import time

        import av

        container = None
        done = False  # the end-of-stream sentinel was taken from the queue
        try:
            rate = Fraction(self.fps).limit_denominator(1001)
            container = av.open(str(self._tmp), mode="w")
            stream = container.add_stream("libx264", rate=rate)
            stream.pix_fmt = "yuv420p"
            stream.options = dict(x264_options(self.crf, self.preset))  # PyAV: dict[str, object]
            convert = None
            i = 0
            while True:
                item = self._queue.get()
                if item is not None:
                    self._frames_hash.update(item.data)  # the C-order bytes, without another copy
                self._queue.task_done()  # after hashing: frames_sha256 waits for it
                if item is None:
                    done = True
                    break
                if convert is None:
                    stream.height, stream.width = item.shape[:2]
                    convert = Yuv420pConverter(*item.shape[:2])
                vf = convert.frame(item)
                vf.pts = i
                for packet in stream.encode(vf):
                    container.mux(packet)
                i += 1
            for packet in stream.encode():
                container.mux(packet)
            c, container = container, None
            c.close()
        except BaseException as exc:  # reported by write/close on the caller's thread
            self._error = exc
        finally:
            if container is not None:
                try:
                    container.close()
                except BaseException as exc:
                    self._error = self._error or exc
            self.encode_cpu_s = time.thread_time()  # this thread's CPU seconds (benchmarks)
            while not done:  # after a failure: drain so the producer never blocks on a full queue
                done = self._queue.get() is None
                self._queue.task_done()

    def write(self, frame: np.ndarray) -> None:
        if self._error is not None:
            raise RuntimeError(f"video encoder failed: {self._error}") from self._error
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frames must be (H, W, 3) uint8 RGB; got {frame.shape} {frame.dtype}")
        h, w = frame.shape[:2]
        if self._shape is None:
            if h % 2 or w % 2:
                raise ValueError(f"H.264 yuv420p needs even sizes; got {w}x{h}")
            self._shape = (h, w)
        elif (h, w) != self._shape:
            raise ValueError(f"frame {self.num_frames} is {w}x{h}, the video is {self._shape[1]}x{self._shape[0]}")
        # the caller may reuse its buffer; hashing happens on the encoder thread (off the generating thread)
        self._queue.put(contiguous_copy(frame))
        self.num_frames += 1

    __call__ = write

    @property
    def frames_sha256(self) -> str:
        """sha256 of the raw RGB frames written so far (uint8, (H, W, 3) C-order, concatenated): a codec-free
        fingerprint of the content, equal to :func:`frames_sha256` of the decoded frames only for lossless codecs.
        The encoder thread hashes the frames; this waits until it has taken every frame written so far."""
        self._queue.join()
        return self._frames_hash.hexdigest()

    def close(self) -> Path:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            if self._tmp.exists():
                self._tmp.unlink()
            raise RuntimeError(f"video encoder failed: {self._error}") from self._error
        from .io import replace

        replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._tmp.exists():
            self._tmp.unlink()


def contiguous_copy(frame: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of (H, W, 3) uint8 ``frame``, the same bytes as ``np.array(frame, order="C")``.

    A renderer that draws RGBA hands over the view ``rgba[..., :3]`` (the reference model does): numpy copies that
    3-of-4-byte stride pixel by pixel (about 2.5 ms a 480x832 frame on the generating thread), OpenCV's RGBA -> RGB
    conversion copies the same bytes in bulk (about 0.2 ms)."""
    base = frame.base
    if (not frame.flags.c_contiguous and isinstance(base, np.ndarray) and base.dtype == np.uint8
            and base.ndim == 3 and base.shape == (*frame.shape[:2], 4) and base.flags.c_contiguous
            and frame.strides == base.strides and frame.ctypes.data == base.ctypes.data):
        import cv2

        out: np.ndarray = cv2.cvtColor(base, cv2.COLOR_RGBA2RGB)
        return out
    return np.array(frame, dtype=np.uint8, order="C", copy=True)


def x264_options(crf: int = 18, preset: str = "veryfast") -> dict[str, str]:
    """x264 settings whose bitstream depends only on the frames (see :class:`VideoWriter`): one thread, no
    macroblock tree, BT.601 tags matching :func:`rgb_to_yuv420p_planes`."""
    return {"crf": str(crf), "preset": preset, "threads": "1",
            "x264-params": "mbtree=0:colormatrix=smpte170m:colorprim=smpte170m:transfer=smpte170m"}


def rgb_to_yuv420p_planes(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(H, W, 3) uint8 RGB (H, W even) -> Y (H, W), U (H/2, W/2), V (H/2, W/2) uint8; BT.601 limited range,
    2x2 box chroma."""
    # Speed: contiguous float32 planes and an explicit 2x2 sum instead of a strided multi-axis mean; the same
    # float32 operations in the same order, so the bytes are identical to the straightforward version.
    h, w = rgb.shape[:2]
    r, g, b = (rgb[..., i].astype(np.float32) for i in range(3))
    y = 16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0
    cb = 128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0
    cr = 128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0

    def sub(c: np.ndarray) -> np.ndarray:  # == c.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3)), bit for bit
        mean: np.ndarray = ((c[0::2, 0::2] + c[0::2, 1::2]) + (c[1::2, 0::2] + c[1::2, 1::2])) / np.float32(4)
        return mean

    yq, uq, vq = (np.clip(np.rint(p), 0, 255).astype(np.uint8) for p in (y, sub(cb), sub(cr)))
    return yq, uq, vq


def rgb_to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB, H divisible by 4 -> (3H/2, W) uint8 planar YUV 4:2:0 (FFmpeg's packed layout)."""
    y, u, v = rgb_to_yuv420p_planes(rgb)
    h, w = rgb.shape[:2]
    return np.concatenate([y, u.reshape(h // 4, w), v.reshape(h // 4, w)], axis=0)


class Yuv420pConverter:
    """:func:`rgb_to_yuv420p_planes` for frames of one size, written straight into ``av.VideoFrame`` planes.

    The same float32 operations in the same order as :func:`rgb_to_yuv420p_planes` (so the same bytes; tested
    on all 2^24 colours and on random frames), but on bands of ``ROWS`` rows with preallocated buffers: the
    temporaries stay in cache and no memory is allocated per frame. 3.2 instead of 5.3 ms per 480x832 frame
    (6.5 ms on the encoder thread, where the per-frame temporaries also page-faulted). ``np.clip`` is left out:
    every value is already in [16, 240] (BT.601 limited range of uint8 input).
    """

    ROWS = 48

    def __init__(self, height: int, width: int):
        if height % 2 or width % 2:
            raise ValueError(f"yuv420p needs even sizes; got {width}x{height}")
        self.h, self.w = int(height), int(width)
        n = min(self.ROWS, self.h)
        self._rgb = np.empty((3, n, self.w), np.float32)
        self._acc = np.empty((n, self.w), np.float32)
        self._tmp = np.empty((n, self.w), np.float32)
        self._q = np.empty((2, n // 2, self.w // 2), np.float32)

    def __call__(self, rgb: np.ndarray, y: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
        """Convert (H, W, 3) uint8 RGB into the uint8 planes ``y`` (H, W), ``u`` and ``v`` (H/2, W/2)."""
        f32 = np.float32
        acc, tmp = self._acc, self._tmp
        for a in range(0, self.h, self.ROWS):
            b_ = min(a + self.ROWS, self.h)
            n = b_ - a
            r, g, b = self._rgb[0, :n], self._rgb[1, :n], self._rgb[2, :n]
            for i, c in enumerate((r, g, b)):
                np.copyto(c, rgb[a:b_, :, i], casting="unsafe")
            p, t = acc[:n], tmp[:n]
            # y = 16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0
            np.multiply(r, f32(65.481), out=p)
            np.multiply(g, f32(128.553), out=t)
            p += t
            np.multiply(b, f32(24.966), out=t)
            p += t
            p /= f32(255.0)
            p += f32(16.0)
            np.rint(p, out=p)
            np.copyto(y[a:b_], p, casting="unsafe")
            # cb = 128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0
            # cr = 128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0
            for out, (k0, k1, k2), last in ((u, (-37.797, 74.203, 112.0), np.add),
                                            (v, (112.0, 93.786, 18.214), np.subtract)):
                np.multiply(r, f32(k0), out=p)
                np.multiply(g, f32(k1), out=t)
                p -= t
                np.multiply(b, f32(k2), out=t)
                last(p, t, out=p)
                p /= f32(255.0)
                p += f32(128.0)
                # 2x2 box: ((c00 + c01) + (c10 + c11)) / 4, as in rgb_to_yuv420p_planes
                q0, q1 = self._q[0, : n // 2], self._q[1, : n // 2]
                np.add(p[0::2, 0::2], p[0::2, 1::2], out=q0)
                np.add(p[1::2, 0::2], p[1::2, 1::2], out=q1)
                q0 += q1
                q0 /= f32(4)
                np.rint(q0, out=q0)
                np.copyto(out[a // 2: b_ // 2], q0, casting="unsafe")

    def frame(self, rgb: np.ndarray) -> av.VideoFrame:
        """An ``av.VideoFrame`` (yuv420p) of ``rgb``; line padding repeats the last column, never garbage."""
        import av

        frame = av.VideoFrame(self.w, self.h, "yuv420p")
        views = []
        for plane, (ph, pw) in zip(frame.planes, ((self.h, self.w), (self.h // 2, self.w // 2),
                                                  (self.h // 2, self.w // 2))):
            buf = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)  # the plane's memory
            views.append((buf, ph, pw))
        self(rgb, *(buf[:ph, :pw] for buf, ph, pw in views))
        for buf, ph, pw in views:
            buf[:ph, pw:] = buf[:ph, pw - 1: pw]
        return frame


def frames_sha256(frames: Iterable[np.ndarray]) -> str:
    """sha256 over (H, W, 3) uint8 RGB frames, concatenated in C order (what :attr:`VideoWriter.frames_sha256`
    records for the frames it was given)."""
    h = hashlib.sha256()
    for f in frames:
        h.update(np.ascontiguousarray(f, dtype=np.uint8).tobytes())
    return h.hexdigest()


def probe_video(path: str | Path) -> dict[str, Any]:
    """Decode ``path`` fully and return ``{num_frames, fps, width, height, codec}`` (fps as stored)."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        n = sum(1 for _ in c.decode(s))
        fps = float(s.average_rate) if s.average_rate else float("nan")
        return {"num_frames": n, "fps": fps, "width": s.width, "height": s.height, "codec": s.codec_context.name}


def probe_header(path: str | Path) -> dict[str, Any]:
    """``{num_frames, fps, width, height, codec}`` from the container's header (no decode) when it records the frame
    count (MP4 does), else by decoding (:func:`probe_video`). The first frame is decoded either way, so a file
    that is not a video, or whose codec cannot be read, raises here."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        n = int(s.frames or 0)
        next(c.decode(s))
        fps = float(s.average_rate) if s.average_rate else float("nan")
        info = {"num_frames": n, "fps": fps, "width": s.width, "height": s.height, "codec": s.codec_context.name}
    return info if n > 0 else probe_video(path)


def iter_frames(path: str | Path, stride: int = 1, indices: list[int] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(index, frame)`` as (H, W, 3) uint8 RGB for every ``stride``-th frame (or the given indices)."""
    import av

    wanted = set(indices) if indices is not None else None
    last = max(wanted, default=-1) if wanted is not None else None
    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(video=0)):
            if last is not None and i > last:
                break  # nothing wanted after this: the rest is not decoded
            if (wanted is None and i % stride == 0) or (wanted is not None and i in wanted):
                yield i, f.to_ndarray(format="rgb24")


def read_frames(path: str | Path, stride: int = 1, indices: list[int] | None = None) -> tuple[list[int], np.ndarray]:
    """All selected frames as (N, H, W, 3) uint8 with their indices."""
    idx, frames = [], []
    for i, f in iter_frames(path, stride, indices):
        idx.append(i)
        frames.append(f)
    return idx, np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)
