"""Revisit strips: per video, each metric's own reference frame beside the frame it scored in each revisit window.

Metrics record the frames they used in ``metrics.json``, and each metric has its own: Environment Visible and the
pixel diagnostics pick a return frame in each ``R_k`` and compare it with frame 0; ``departure.return_visible``
compares the first departure's settled away view with a frame of each later departure; ``departure.visible`` /
``departure.sweep_visible`` and the entity metrics score windows of frames against a reference set. One strip row
per distinct set of frames (metrics that share their frames share a row), titled with those metrics' scores.

Frames of a row: the recorded ``return_frames`` where there are some; else, per recorded ``revisit_frames``
window, its middle frame. The reference: frame 0 for return metrics; else the recorded reference frame whose
prescribed orientation (``camera.npz``) is closest to the row's first revisit frame (without the file: the last
reference frame, the settled view).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Self, TypedDict

import numpy as np

from ..results import ItemResult, MetricEntry, Status
from .analyses import window_labels
from .cells import fixed
from .collect import Item
from .study import metric_order

#: rows of one strip (one per distinct set of frames; metrics that share frames share a row)
MAX_ROWS = 4
#: (frame indices, (N, H, W, 3) uint8 RGB frames at those indices) of one video
Frames = tuple[list[int], np.ndarray]


class StripRowRecord(TypedDict):
    """A drawn row as the page's script reads it (``data-strip``): :meth:`StripRow.as_dict`."""

    reference: int
    frames: list[int]
    labels: list[str]
    metrics: list[str]


#: a drawn strip: its PNG and its rows
Strip = tuple[Path, list[StripRowRecord]]


def strips_dir(report_dir: Path) -> Path:
    """The folder of a report's strips."""
    return Path(report_dir) / "strips"


def strip_path(folder: Path, it: Item) -> Path:
    """``it``'s strip in ``folder``: one flat name per (run, item)."""
    return Path(folder) / ("__".join([it.run, it.model, it.context, f"seed-{it.seed}", it.trajectory, it.case_id])
                           + ".png")


_SHORT = {"environment": "env", "departure": "dep", "diagnostic": "diag"}


def short_name(key: str) -> str:
    """``environment.visible[pixel-thumb16]`` -> ``env.visible`` (strip titles are small)."""
    fam, _, rest = key.split("[")[0].partition(".")
    return f"{_SHORT.get(fam, fam)}.{rest}"


@dataclass
class StripRow:
    """One row: ``reference`` frame, one ``frames[k]`` per window labelled ``labels[k]``, and per metric key its
    per-window scores."""

    reference: int
    frames: list[int]
    labels: list[str]
    scores: dict[str, list[float]] = field(default_factory=dict)

    def as_dict(self) -> StripRowRecord:
        return {"reference": self.reference, "frames": self.frames, "labels": self.labels,
                "metrics": sorted(self.scores, key=metric_order)}


def _orientations(it: Item) -> Optional[np.ndarray]:
    """(N, 3, 3) prescribed camera-to-world rotations of the item, None without ``camera.npz``."""
    p = it.item_dir / "camera.npz"
    if not p.exists():
        return None
    from trajectories import load_path

    return np.asarray(load_path(p).c2w)[:, :3, :3]


def _closest(refs: list[int], to: int, rot: Optional[np.ndarray]) -> int:
    if rot is None or not refs or max(refs + [to]) >= len(rot):
        return int(refs[-1])
    from trajectories.conventions import geodesic_angle

    return int(min(refs, key=lambda r: (float(geodesic_angle(rot[r], rot[to])), r)))


def _row_frames(m: MetricEntry) -> Optional[tuple[list[int], list[int], bool]]:
    """(frames shown per window, candidate reference frames, whether they are return frames) of one metric entry,
    None when it records no frames per revisit (see the module doc)."""
    pr = m.per_revisit
    if not pr:
        return None
    rf, windows = m.get("return_frames"), m.get("revisit_frames")
    refs = [int(x) for x in (m.get("reference_frames") or [0])]
    if rf and len(rf) == len(pr) and all(isinstance(f, int) for f in rf):
        return [int(f) for f in rf], refs, True
    if windows and len(windows) == len(pr) and all(windows):
        return [int(w[len(w) // 2]) for w in windows], refs, False
    return None


def strip_rows(it: Item) -> list[StripRow]:
    """The rows of ``it``'s strip, in metric order (see the module doc for the frames of each row)."""
    rot = None
    rows: dict[tuple[int, tuple[int, ...]], StripRow] = {}
    for key, m in sorted(it.computed().items(), key=lambda kv: metric_order(kv[0])):
        got = _row_frames(m)
        if got is None:
            continue
        frames, refs, returns = got
        if returns:
            ref = refs[-1]  # return metrics record one reference frame (0, or the away view's last frame)
        else:
            if rot is None:
                rot = _orientations(it)
            ref = _closest(refs, frames[0], rot)
        pr = m.per_revisit or []
        sig = (ref, tuple(frames))
        if sig not in rows:
            rows[sig] = StripRow(ref, frames, window_labels(it, m))
        rows[sig].scores[key] = [float(x) for x in pr]
    return list(rows.values())


def strip_frame_candidates(entries: Iterable[MetricEntry]) -> list[int]:
    """Every frame a strip could show for these metric entries (:class:`evaluate.results.MetricEntry`): the
    frames and reference candidates of each computed entry that records frames per revisit. A superset of what
    :func:`strip_rows` picks, so the evaluation can keep just these frames of a video it has decoded."""
    out: set[int] = set()
    for m in entries:
        got = _row_frames(m) if m.status is Status.COMPUTED else None
        if got is not None:
            out.update(got[0])
            out.update(got[1])
    return sorted(out)


def strip_frames(it: Item, max_rows: int = MAX_ROWS,
                 kept: Optional[tuple[list[int], np.ndarray]] = None) -> Optional[tuple[list[int], np.ndarray]]:
    """(frame indices, (N, H, W, 3) uint8 frames) that ``it``'s strip shows; None when no metric records its frames.
    Taken from ``kept`` ((indices, frames) the evaluation kept of the decoded video) when it holds them all, else
    read from the video (the same frames: the evaluation decodes as :func:`harness.video.read_frames` does)."""
    rows = strip_rows(it)[:max_rows]
    if not rows:
        return None
    want = sorted({f for r in rows for f in [r.reference, *r.frames]})
    if kept is not None:
        pos = {int(f): i for i, f in enumerate(kept[0])}
        if all(f in pos for f in want):
            return want, kept[1][[pos[f] for f in want]]
    from harness.video import read_frames

    idx, frames = read_frames(it.item_dir / "video.mp4", indices=want)
    return list(idx), frames


def frame_strip(it: Item, out_png: Path, max_rows: int = MAX_ROWS, max_metrics: int = 3,
                frames: Frames | Future[Optional[Frames]] | None = None) -> Optional[Strip]:
    """Draw ``it``'s strip (at most ``max_rows`` rows, ``max_metrics`` scores a row) to ``out_png``. Returns the
    path and the rows drawn (:meth:`StripRow.as_dict`), None when no metric records its frames. ``frames``: what
    :func:`strip_frames` returns, or a future of it (the caller reads the next video while this one is drawn);
    read here if None."""
    rows = strip_rows(it)[:max_rows]
    if not rows:
        return None
    from .plots import _plt, _save

    got = frames.result() if isinstance(frames, Future) else frames
    if frames is None:
        got = strip_frames(it, max_rows)
    if got is None:  # no frame recorded (then there is no row either)
        return None
    idx, images = got
    pos = {int(f): i for i, f in enumerate(idx)}
    ncol = 1 + max(len(r.frames) for r in rows)
    plt = _plt()
    fig, axes = plt.subplots(len(rows), ncol, figsize=(2.4 * ncol, 2.4 * len(rows) + 0.5), squeeze=False)
    for r, row in enumerate(rows):
        ax = axes[r][0]
        if row.reference in pos:
            ax.imshow(images[pos[row.reference]])
        names = sorted(row.scores, key=metric_order)
        shown = [short_name(k) for k in names[:max_metrics]] + (["..."] if len(names) > max_metrics else [])
        ax.set_title("\n".join([f"reference: frame {row.reference}"] + shown), fontsize=6)
        for k, f in enumerate(row.frames):
            ax = axes[r][k + 1]
            if f in pos:
                ax.imshow(images[pos[f]])
            lines = [f"{row.labels[k]}: frame {f}"] + [f"{short_name(key)} {fixed(row.scores[key][k])}"
                                                       for key in names[:max_metrics]]
            ax.set_title("\n".join(lines), fontsize=6)
        for ax in axes[r][len(row.frames) + 1:]:
            ax.set_visible(False)
    for ax in axes.flat:
        ax.axis("off")
    fig.suptitle(f"{it.model}/{it.context}/seed-{it.seed}/{it.trajectory}/{it.case_id}: each metric's reference "
                 "and scored frames", fontsize=7)
    fig.tight_layout()
    p = _save(fig, out_png, svg=False)[0]
    plt.close(fig)
    return p, [r.as_dict() for r in rows]


class StripsAhead:
    """Draws a run's strips while the run is evaluated: each item's strip as soon as its ``metrics.json`` is
    written, on one background thread, from the frames the evaluation kept of the video it had decoded anyway
    (:func:`strip_frame_candidates`), into the folder the run's report reads, which then finds them fresh
    (:func:`evaluate.reporting.build.draw_strips`). So the drawing overlaps the scoring of the next videos instead of
    following the last one, and no video is decoded a second time for its strip; the PNGs are the ones the report
    would draw. At most ``max_waiting`` items wait with their frames (then :meth:`submit` waits); a strip that
    fails here is only logged: the report draws it again."""

    def __init__(self, run_dir: Path, folder: Path, max_waiting: int = 2):
        from concurrent.futures import ThreadPoolExecutor

        self.run_dir, self.folder, self.max_waiting = Path(run_dir), Path(folder), max(1, int(max_waiting))
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strips-ahead")
        self._waiting: list[Future[None]] = []
        self.drawn: list[Path] = []
        # CPU seconds of the drawing thread: report work done during the evaluation, which a job's phase split
        # counts as report, not evaluation (harness.app.benchmarks.first_look); read after close()
        self.cpu_s = 0.0

    def _draw(self, item_dir: Path, result: ItemResult, kept: Frames) -> None:
        import logging
        import time

        from .collect import items_of

        t0 = time.thread_time()
        try:
            for it in items_of(self.run_dir, [(item_dir, result)]):
                got = frame_strip(it, strip_path(self.folder, it), frames=strip_frames(it, kept=kept))
                if got is not None:
                    self.drawn.append(got[0])
        except Exception as exc:  # noqa: BLE001 - the report draws it again
            logging.getLogger(__name__).warning("strip of %s not drawn ahead (%s); the report draws it", item_dir,
                                                exc)
        finally:
            self.cpu_s += time.thread_time() - t0  # one drawing thread: no other writer

    def submit(self, item_dir: Path, result: Optional[ItemResult], kept: Optional[Frames]) -> None:
        """Draw the strip of the finished item ``item_dir`` (``result``: its :class:`evaluate.results.ItemResult`,
        already written) from ``kept`` = (frame indices, (N, H, W, 3) uint8 frames); nothing without frames."""
        if kept is None or result is None:
            return
        self._waiting = [f for f in self._waiting if not f.done()]
        while len(self._waiting) >= self.max_waiting:
            self._waiting.pop(0).result()
        self._waiting.append(self._pool.submit(self._draw, Path(item_dir), result, kept))

    def close(self) -> None:
        """Wait for every strip submitted."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
