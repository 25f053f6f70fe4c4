"""Draw a camera path to PNG: top view plus yaw / pitch / translation against frame, phases shaded.

Conventions (see :mod:`trajectories.conventions`): OpenCV camera-to-world, +x right / +y down / +z forward,
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up. The top view plots world x
(right) against world z (forward).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .path import CameraPath

_PHASE_COLOURS = {"V": "#cfe8ff", "H": "#e6e6e6"}


def _phase_colour(name: str) -> str:
    if name in _PHASE_COLOURS:
        return _PHASE_COLOURS[name]
    return "#ffe0cc" if name.startswith("D") else "#d6f5d6"


def preview_path(
    path: CameraPath,
    out_png: str | Path,
    overlays: Sequence[tuple[str, np.ndarray]] = (),
    title: str | None = None,
    also: Sequence[str] = (),
) -> Path:
    """Plot ``path`` (and optional ``overlays``: (label, c2w (T,4,4)) decoded from native controls) to PNG; ``also``:
    more suffixes (``".svg"``) the same figure is written to beside it, drawn once."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .conventions import yaw_pitch_from_rotmat

    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    series = [("requested", path.c2w)] + list(overlays)
    for ax in axes[1:]:
        for name, (a, b) in path.phases.items():
            ax.axvspan(a, b, color=_phase_colour(name), alpha=0.6, lw=0)
            ax.text((a + b) / 2, 1.0, name, transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8)
    for label, c2w in series:
        c2w = np.asarray(c2w)
        t = c2w[:, :3, 3]
        yaw, pitch = yaw_pitch_from_rotmat(c2w[:, :3, :3])
        x = np.linspace(0, path.num_frames - 1, len(c2w))
        style = "-" if label == "requested" else "--"
        axes[0].plot(t[:, 0], t[:, 2], style, label=label)
        step = max(1, len(c2w) // 24)
        f = c2w[::step, :3, 2]
        axes[0].quiver(t[::step, 0], t[::step, 2], f[:, 0], f[:, 2], angles="xy", scale=12, width=0.004, alpha=0.5)
        axes[1].plot(x, np.rad2deg(yaw), style, label=label)
        axes[2].plot(x, np.rad2deg(pitch), style, label=label)
        axes[3].plot(x, np.linalg.norm(t, axis=1), style, label=label)
    axes[0].set_title("top view (x right, z forward)")
    axes[0].set_xlabel("world x")
    axes[0].set_ylabel("world z")
    axes[0].axis("equal")
    axes[1].set_ylabel("yaw [deg] (+ = right)")
    axes[2].set_ylabel("pitch [deg] (+ = up)")
    axes[3].set_ylabel("|translation| [scene units]")
    for ax in axes[1:]:
        ax.set_xlabel("frame")
    axes[1].legend(fontsize=7)
    fig.suptitle(title or f"{path.name}: {path.num_frames} frames @ {path.fps:g} fps, {path.width}x{path.height}")
    fig.tight_layout()
    from .path import atomic_target

    # a unique temporary name with the output's own suffix (savefig picks the format from it): two processes
    # drawing the same figure never share a file, and a .svg is an SVG
    for out in [out_png] + [out_png.with_suffix(ext) for ext in also]:
        with atomic_target(out) as tmp, np.errstate(divide="ignore", invalid="ignore"):  # quiver's 0/0 autoscale
            fig.savefig(tmp, dpi=80, format=(out.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return out_png
