"""Video IO with PyAV: H.264 (yuv420p) MP4 that every player reads, written atomically.

OpenCV wheels cannot write H.264 (``VideoWriter.isOpened()`` just returns False), hence PyAV's bundled FFmpeg.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import numpy as np


class VideoWriter:
    """Write (H, W, 3) uint8 RGB frames to an H.264 MP4. The file appears at ``path`` only on :meth:`close`.

    Args:
        path: destination ``.mp4``. fps: frame rate (a rational close to it is used). crf: x264 quality
        (lower = better; 18 is visually lossless). preset: x264 speed preset.
    """

    def __init__(self, path: str | Path, fps: float, crf: int = 18, preset: str = "veryfast"):
        import av

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.stem}.partial.mp4")
        self._container = av.open(str(self._tmp), mode="w")
        self._stream = self._container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        self._stream.pix_fmt = "yuv420p"
        # Single-threaded x264 for bit-identical output regardless of the machine's core count.
        self._stream.options = {"crf": str(crf), "preset": preset, "threads": "1"}
        self._stream.thread_count = 1
        self.num_frames = 0
        self._opened = False

    def write(self, frame: np.ndarray) -> None:
        import av

        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frames must be (H, W, 3) uint8 RGB; got {frame.shape} {frame.dtype}")
        if not self._opened:
            h, w = frame.shape[:2]
            if h % 2 or w % 2:
                raise ValueError(f"H.264 yuv420p needs even sizes; got {w}x{h}")
            self._stream.height, self._stream.width = h, w
            self._opened = True
        vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        for packet in self._stream.encode(vf):
            self._container.mux(packet)
        self.num_frames += 1

    __call__ = write

    def close(self) -> Path:
        for packet in self._stream.encode():
            self._container.mux(packet)
        self._container.close()
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        try:
            self._container.close()
        finally:
            if self._tmp.exists():
                self._tmp.unlink()


def probe_video(path: str | Path) -> dict:
    """Decode ``path`` fully and return ``{num_frames, fps, width, height, codec}`` (fps as stored)."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        n = sum(1 for _ in c.decode(s))
        fps = float(s.average_rate) if s.average_rate else float("nan")
        return {"num_frames": n, "fps": fps, "width": s.width, "height": s.height, "codec": s.codec_context.name}


def iter_frames(path: str | Path, stride: int = 1, indices: list[int] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(index, frame)`` as (H, W, 3) uint8 RGB for every ``stride``-th frame (or the given indices)."""
    import av

    wanted = set(indices) if indices is not None else None
    with av.open(str(path)) as c:
        for i, f in enumerate(c.decode(video=0)):
            if (wanted is None and i % stride == 0) or (wanted is not None and i in wanted):
                yield i, f.to_ndarray(format="rgb24")


def read_frames(path: str | Path, stride: int = 1, indices: list[int] | None = None) -> tuple[list[int], np.ndarray]:
    """All selected frames as (N, H, W, 3) uint8 with their indices."""
    idx, frames = [], []
    for i, f in iter_frames(path, stride, indices):
        idx.append(i)
        frames.append(f)
    return idx, np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)
