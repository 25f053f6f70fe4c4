"""Videos the report's page can play: a video a browser cannot decode (MPEG-4 Part 2, HEVC in most browsers,
ProRes, 4:4:4 H.264...) is transcoded once to H.264 yuv420p with :class:`harness.video.VideoWriter` into the
report's folder, and the page plays that copy; where the transcode fails, the page says so beside the player.
Scores always come from the original video; the copy is for looking only.

Which codecs play: H.264, VP8, VP9 and AV1 in 4:2:0 are decoded by Chromium, Firefox and Safari's current
releases (inference from the browsers' documented media support; HEVC plays in some only, so it is transcoded).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: codec names (PyAV / FFmpeg) that browsers decode, in these pixel formats
BROWSER_CODECS = frozenset({"h264", "vp8", "vp9", "av1"})
BROWSER_PIX_FMTS = frozenset({"yuv420p", "yuvj420p"})


@dataclass
class PageVideo:
    """What the page plays for one item: ``src`` (the original or a transcoded copy), the original's ``codec``
    and pixel format, and ``note`` (why a copy is shown, or a warning that nothing playable could be made)."""

    src: Path
    codec: str
    pix_fmt: str
    note: str | None = None

    @property
    def warning(self) -> bool:
        return self.note is not None and self.note.startswith("cannot play")


def stream_format(video: Path) -> tuple[str, str]:
    """(codec name, pixel format) of ``video``'s first video stream, read from the container (nothing decoded)."""
    import av

    with av.open(str(video)) as c:
        s = c.streams.video[0]
        pix = s.codec_context.pix_fmt or (s.format.name if s.format else "")
        return s.codec_context.name, str(pix or "")


def browser_plays(codec: str, pix_fmt: str) -> bool:
    return codec in BROWSER_CODECS and pix_fmt in BROWSER_PIX_FMTS


def transcode_h264(src: Path, dst: Path) -> Path:
    """Decode ``src`` and write every frame to ``dst`` as H.264 yuv420p at ``src``'s frame rate (odd sizes
    cropped by one pixel: yuv420p needs even ones). Atomic: ``dst`` appears only complete."""
    import av

    from harness.video import VideoWriter

    with av.open(str(src)) as c:
        s = c.streams.video[0]
        fps = float(s.average_rate or s.guessed_rate or 16)
        w = VideoWriter(dst, fps=fps)
        try:
            for f in c.decode(s):
                a = f.to_ndarray(format="rgb24")
                w.write(a[: a.shape[0] // 2 * 2, : a.shape[1] // 2 * 2])
            if w.num_frames == 0:
                raise ValueError("no frame decoded")
        except BaseException:
            w.abort()
            raise
        return w.close()


def page_video(video: Path, copy: Path) -> PageVideo:
    """What the page should play for ``video``; ``copy``: where a transcoded copy goes (reused while newer than
    the original)."""
    try:
        codec, pix = stream_format(video)
    except Exception as exc:  # noqa: BLE001 - a damaged container: say so on the page, never fail the report
        return PageVideo(video, "?", "?", f"cannot play: the container cannot be read ({exc})")
    if browser_plays(codec, pix):
        return PageVideo(video, codec, pix)
    if copy.exists() and copy.stat().st_mtime >= video.stat().st_mtime:
        return PageVideo(copy, codec, pix, f"transcoded from {codec} ({pix}) to H.264 for the browser; scores use "
                                           "the original")
    try:
        transcode_h264(video, copy)
    except Exception as exc:  # noqa: BLE001 - reported on the page beside the player
        return PageVideo(video, codec, pix, f"cannot play: {codec} ({pix}) is not a browser codec and transcoding "
                                            f"it failed ({exc}); download the file to view it")
    return PageVideo(copy, codec, pix, f"transcoded from {codec} ({pix}) to H.264 for the browser; scores use the "
                                       "original")
