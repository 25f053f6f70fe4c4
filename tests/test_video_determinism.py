"""Bit-exact video: the same frames give the same H.264 bytes in any process, whatever the heap held before."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

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
