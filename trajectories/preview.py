"""Draw a camera path to PNG: top view plus yaw / pitch / translation against frame, phases shaded.

Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world, +x right / +y down / +z forward,
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up. The top view plots world x
(right) against world z (forward), so a left yaw's heading arrows turn towards -x (left on the page).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .path import CameraPath

if TYPE_CHECKING:  # matplotlib is imported lazily at run time
    from matplotlib.figure import Figure

_PHASE_COLOURS = {"V": "#cfe8ff", "H": "#e6e6e6"}


def _phase_colour(name: str) -> str:
    if name in _PHASE_COLOURS:
        return _PHASE_COLOURS[name]
    return "#ffe0cc" if name.startswith("D") else "#d6f5d6"


#: heading arrows drawn in the top view (evenly spaced frames of the requested path)
TOP_VIEW_ARROWS = 24


def heading_xz(c2w: np.ndarray) -> np.ndarray:
    """(T, 2) unit heading in the top view: the camera's forward axis (c2w's third column, +z in the camera frame)
    projected onto the world's x (right) / z (forward) plane. A left yaw (negative, ``rot_y(-θ)``) sweeps it from
    +z towards -x; a pure pitch keeps its direction (zero vectors where the camera looks straight up or down)."""
    f = np.asarray(c2w, dtype=np.float64)[:, :3, 2][:, [0, 2]]
    n = np.linalg.norm(f, axis=1, keepdims=True)
    heading: np.ndarray = np.divide(f, n, out=np.zeros_like(f), where=n > 1e-9)
    return heading


def draw_path(path: CameraPath, overlays: Sequence[tuple[str, np.ndarray]] = (), title: str | None = None) -> Figure:
    """The preview figure (matplotlib ``Figure``, Agg): a top view (world x right, world z up the page, equal
    axes) with the camera's positions and, at :data:`TOP_VIEW_ARROWS` evenly spaced frames of the requested path,
    its heading as arrows of one length in data units (so their drawn angle is the heading's angle: a left turn
    points left), coloured from dark (first frame) to light (last); then yaw, pitch and |translation| against
    frame with the phases shaded. ``overlays``: (label, c2w (T, 4, 4)) decoded from native controls, dashed.
    The top view's heading arrows are the axes' only ``Quiver`` (what the tests read back)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .conventions import yaw_pitch_from_rotmat

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), gridspec_kw={"width_ratios": [1, 1.4]})
    top, (ax_yaw, ax_pitch, ax_t) = axes[0, 0], (axes[0, 1], axes[1, 0], axes[1, 1])
    series = [("requested", np.asarray(path.c2w))] + [(lbl, np.asarray(c)) for lbl, c in overlays]
    for ax in (ax_yaw, ax_pitch, ax_t):
        for name, (a, b) in path.phases.items():
            ax.axvspan(a, b, color=_phase_colour(name), alpha=0.6, lw=0)
            ax.text((a + b) / 2, 1.0, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=9)
    for label, c2w in series:
        t = c2w[:, :3, 3]
        yaw, pitch = yaw_pitch_from_rotmat(c2w[:, :3, :3])
        x = np.linspace(0, path.num_frames - 1, len(c2w))
        style = "-" if label == "requested" else "--"
        top.plot(t[:, 0], t[:, 2], style, label=label)
        ax_yaw.plot(x, np.rad2deg(yaw), style, label=label)
        ax_pitch.plot(x, np.rad2deg(pitch), style, label=label)
        ax_t.plot(x, np.linalg.norm(t, axis=1), style, label=label)
    c2w = np.asarray(path.c2w)
    pos = c2w[:, [0, 2], 3]
    span = float(np.ptp(pos, axis=0).max()) if len(pos) else 0.0
    length = 0.25 * span if span > 1e-9 else 1.0  # arrows in data units; a rotation in place gets unit arrows
    idx = np.unique(np.linspace(0, len(c2w) - 1, TOP_VIEW_ARROWS).round().astype(int))
    h = heading_xz(c2w[idx]) * length
    top.quiver(pos[idx, 0], pos[idx, 1], h[:, 0], h[:, 1], idx, cmap="viridis", angles="xy", scale_units="xy",
               scale=1.0, width=0.006, alpha=0.85)
    pad = 1.15 * length
    top.set_xlim(pos[:, 0].min() - pad, pos[:, 0].max() + pad)
    top.set_ylim(pos[:, 1].min() - pad, pos[:, 1].max() + pad)
    top.set_aspect("equal", adjustable="box")
    top.set_title("top view: heading arrows, dark = early", fontsize=10)
    top.set_xlabel("world x (+ = right)")
    top.set_ylabel("world z (+ = forward at frame 0)")
    ax_yaw.set_ylabel("yaw [deg] (+ = right)")
    ax_pitch.set_ylabel("pitch [deg] (+ = up)")
    ax_t.set_ylabel("|translation| [scene units]")
    for ax in (ax_yaw, ax_pitch, ax_t):
        ax.set_xlabel("frame")
    ax_yaw.legend(fontsize=8)
    fig.suptitle(title or f"{path.name}: {path.num_frames} frames @ {path.fps:g} fps, {path.width}x{path.height}")
    fig.tight_layout()
    return fig


def preview_path(
    path: CameraPath,
    out_png: str | Path,
    overlays: Sequence[tuple[str, np.ndarray]] = (),
    title: str | None = None,
    also: Sequence[str] = (),
) -> Path:
    """Plot ``path`` (and optional ``overlays``: (label, c2w (T,4,4)) decoded from native controls) to PNG
    (:func:`draw_path`, 880 x 560 px); ``also``: more suffixes (``".svg"``) the same figure is written to beside
    it, drawn once."""
    import matplotlib.pyplot as plt

    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig = draw_path(path, overlays, title)
    from .path import atomic_target

    # a unique temporary name with the output's own suffix (savefig picks the format from it): two processes
    # drawing the same figure never share a file, and a .svg is an SVG
    for out in [out_png] + [out_png.with_suffix(ext) for ext in also]:
        with atomic_target(out) as tmp:
            fig.savefig(tmp, dpi=80, format=(out.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return out_png
