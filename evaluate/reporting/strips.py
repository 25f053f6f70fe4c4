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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .analyses import window_labels
from .collect import Item
from .study import metric_order

#: rows of one strip (one per distinct set of frames; metrics that share frames share a row)
MAX_ROWS = 4


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

    def as_dict(self) -> dict:
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


def strip_rows(it: Item) -> list[StripRow]:
    """The rows of ``it``'s strip, in metric order (see the module doc for the frames of each row)."""
    rot = None
    rows: dict[tuple, StripRow] = {}
    for key, m in sorted(it.computed().items(), key=lambda kv: metric_order(kv[0])):
        pr = m.per_revisit
        if not pr:
            continue
        rf, windows = m.get("return_frames"), m.get("revisit_frames")
        if rf and len(rf) == len(pr) and all(isinstance(f, int) for f in rf):
            frames = [int(f) for f in rf]
            refs = [int(x) for x in (m.get("reference_frames") or [0])]
            ref = refs[-1]  # return metrics record one reference frame (0, or the away view's last frame)
        elif windows and len(windows) == len(pr) and all(windows):
            frames = [int(w[len(w) // 2]) for w in windows]
            refs = [int(x) for x in (m.get("reference_frames") or [0])]
            if rot is None:
                rot = _orientations(it)
            ref = _closest(refs, frames[0], rot)
        else:
            continue
        sig = (ref, tuple(frames))
        if sig not in rows:
            rows[sig] = StripRow(ref, frames, window_labels(it, m))
        rows[sig].scores[key] = [float(x) for x in pr]
    return list(rows.values())


def strip_frames(it: Item, max_rows: int = MAX_ROWS) -> Optional[tuple[list[int], np.ndarray]]:
    """(frame indices, (N, H, W, 3) uint8 frames) that ``it``'s strip shows, read from its video; None when no
    metric records its frames."""
    rows = strip_rows(it)[:max_rows]
    if not rows:
        return None
    from harness.video import read_frames

    idx, frames = read_frames(it.item_dir / "video.mp4",
                              indices=sorted({f for r in rows for f in [r.reference, *r.frames]}))
    return list(idx), frames


def frame_strip(it: Item, out_png: Path, max_rows: int = MAX_ROWS, max_metrics: int = 3,
                frames: Any = None) -> Optional[tuple[Path, list]]:
    """Draw ``it``'s strip (at most ``max_rows`` rows, ``max_metrics`` scores a row) to ``out_png``. Returns the
    path and the rows drawn (:meth:`StripRow.as_dict`), None when no metric records its frames. ``frames``: a
    future of :func:`strip_frames` (the caller reads the next video while this one is drawn); read here if None."""
    rows = strip_rows(it)[:max_rows]
    if not rows:
        return None
    from .plots import _plt, _save

    idx, frames = frames.result() if frames is not None else strip_frames(it, max_rows)
    pos = {int(f): i for i, f in enumerate(idx)}
    ncol = 1 + max(len(r.frames) for r in rows)
    plt = _plt()
    fig, axes = plt.subplots(len(rows), ncol, figsize=(2.4 * ncol, 2.4 * len(rows) + 0.5), squeeze=False)
    for r, row in enumerate(rows):
        ax = axes[r][0]
        if row.reference in pos:
            ax.imshow(frames[pos[row.reference]])
        names = sorted(row.scores, key=metric_order)
        shown = [short_name(k) for k in names[:max_metrics]] + (["..."] if len(names) > max_metrics else [])
        ax.set_title("\n".join([f"reference: frame {row.reference}"] + shown), fontsize=6)
        for k, f in enumerate(row.frames):
            ax = axes[r][k + 1]
            if f in pos:
                ax.imshow(frames[pos[f]])
            lines = [f"{row.labels[k]}: frame {f}"] + [f"{short_name(key)} {row.scores[key][k]:.3f}"
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
