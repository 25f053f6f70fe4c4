"""A video the browser cannot play (MPEG-4 Part 2) reaches the page as an H.264 copy; an unreadable one is flagged."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evaluate.reporting import build_report
from evaluate.reporting.playable import page_video, stream_format
from tests.support.report_data import frame_colour, make_run


def _mpeg4(path: Path, frames: int = 12) -> None:
    """MPEG-4 Part 2 (FFmpeg's native ``mpeg4`` encoder), what some cameras and old tools write."""
    import av

    with av.open(str(path), "w") as c:
        s = c.add_stream("mpeg4", rate=8)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        for i in range(frames):
            img = np.broadcast_to(np.array(frame_colour(i), np.uint8), (48, 64, 3)).copy()
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def test_an_mpeg4_video_is_played_from_an_h264_copy(tmp_path):
    from harness.video import read_frames

    run = make_run(tmp_path, models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",), cases=1, seeds=(1,))
    odd = run / "evoke/fullkv/seed-1/lrlr/env_0/video.mp4"
    _mpeg4(odd)
    assert stream_format(odd)[0] == "mpeg4"
    out = Path(build_report([run], strips=False, figures=False)["out_dir"])
    page = (out / "index.html").read_text()
    copies = list((out / "videos").glob("*.mp4"))
    assert len(copies) == 1 and stream_format(copies[0]) == ("h264", "yuv420p")  # only the MPEG-4 one
    assert f"src='videos/{copies[0].name}'" in page and "transcoded from mpeg4" in page
    assert "src='../../evoke/fullkv/seed-1/lrlr/dynamic_0/video.mp4'" in page  # H.264 already: the original
    _, orig = read_frames(odd)
    _, copy = read_frames(copies[0])
    assert copy.shape == orig.shape and np.abs(copy.astype(int) - orig.astype(int)).mean() < 4  # the same frames
    # the second report reuses the copy (newer than the original) instead of transcoding again
    mtime = copies[0].stat().st_mtime_ns
    build_report([run], strips=False, figures=False)
    assert copies[0].stat().st_mtime_ns == mtime


def test_an_unreadable_video_is_flagged_not_fatal(tmp_path):
    bad = tmp_path / "video.mp4"
    bad.write_bytes(b"not a video")
    pv = page_video(bad, tmp_path / "copy.mp4")
    assert pv.warning and pv.src == bad and "cannot play" in pv.note and not (tmp_path / "copy.mp4").exists()
