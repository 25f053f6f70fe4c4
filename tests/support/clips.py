"""Small videos written with PyAV for tests that need a container's own shape: several video streams, a pixel
format, irregular timestamps, no frame at all."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np


def encode_streams(path: Path, streams: list[tuple[str, str, int, int]], frames: int = 3, pts: list[int] | None = None,
            rate: int = 8) -> Path:
    """A container with one video stream per (codec, pixel format, height, width), frames of a known grey."""
    import av

    with av.open(str(path), "w") as c:
        ss = []
        for codec, pix, h, w in streams:
            s = c.add_stream(codec, rate=rate)
            s.width, s.height, s.pix_fmt = w, h, pix
            ss.append((s, h, w))
        if frames == 0:
            c.start_encoding()
        for i in range(frames):
            for s, h, w in ss:
                f = av.VideoFrame.from_ndarray(np.full((h, w, 3), 30 + 60 * i, np.uint8), format="rgb24")
                if pts:
                    f.pts, f.time_base = pts[i], Fraction(1, rate)
                for p in s.encode(f):
                    c.mux(p)
        for s, _, _ in ss:
            for p in s.encode():
                c.mux(p)
    return path


def failing_close(monkeypatch) -> list[bool]:
    """``av.open`` hands out its containers wrapped so that ``close()`` closes the real one, then raises
    ``OSError("simulated disk full")`` (a disk that fills as the file ends). Returns the list that gets one True per
    close."""
    import av

    closed: list[bool] = []
    real_open = av.open

    class Closing:
        def __init__(self, c):
            self.c = c

        def __getattr__(self, name):
            return getattr(self.c, name)

        def close(self):
            self.c.close()
            closed.append(True)
            raise OSError("simulated disk full")

    monkeypatch.setattr(av, "open", lambda *a, **k: Closing(real_open(*a, **k)))
    return closed
