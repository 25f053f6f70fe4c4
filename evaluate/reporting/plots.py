"""Report figures (matplotlib, Agg): PNG and SVG for the charts, PNG for the frame strips (raster content).

Axes of score plots start at the metric's floor, not at the data's minimum, and each panel states the floor: a
change of 1e-5 on a [0, 1] score then looks like what it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from evaluate.catalog import METRICS

from .cells import Cell
from .collect import Item
from .tables import Builder, Table

#: metric id -> (floor, ceiling or None = from the data, unit text)
RANGES = {"diagnostic.revisit_psnr": (0.0, None, "dB"), "camera.rpe_trans": (0.0, None, ""),
          "camera.rpe_rot": (0.0, None, ""), "environment.depth": (-1.0, 1.0, "Spearman")}
DEFAULT_RANGE = (0.0, 1.0, "")


def metric_range(key: str, values: list[float]) -> tuple[float, float, str]:
    """(floor, top, caption) of a metric's y axis."""
    mid = key.split("[")[0]
    lo, hi, unit = RANGES.get(mid, DEFAULT_RANGE)
    if mid == "environment.depth" and values and min(values) >= 0:
        lo = 0.0  # Spearman is in [-1, 1]; show from 0 when no value is negative (stated on the axis)
    data_top = max(values) if values else 1.0
    top = hi if hi is not None else max(data_top * 1.15, lo + 1e-3 if data_top <= lo else data_top * 1.15)
    if mid in ("camera.rpe_trans", "camera.rpe_rot"):
        top = max(top, 0.05)
    return lo, top, f"y from {lo:g}{(' ' + unit) if unit else ''} (metric floor)"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def subplot_grid(n: int, max_cols: int, cell_w: float, cell_h: float):
    """(figure, axes list of length ``n``) on a grid of at most ``max_cols`` columns, ``cell_w`` x ``cell_h``
    inches per panel; the grid's unused panels are switched off."""
    plt = _plt()
    ncol = min(max_cols, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(cell_w * ncol, cell_h * nrow), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat[:n])


def _save(fig, out: Path, svg: bool = True) -> list[Path]:
    from harness.io import atomic_path

    paths = []
    for ext in ("png", "svg") if svg else ("png",):
        p = out.with_suffix("." + ext)
        with atomic_path(p, suffix="." + ext) as tmp:
            fig.savefig(tmp, dpi=100, format=ext)
        paths.append(p)
    return paths


def decay_curves(b: Builder, out: Path) -> list[Path]:
    """One panel per metric key: mean score at R1..RK per (model, context, trajectory), 95 % bootstrap bars."""
    groups = b.multi_revisit_groups()
    if not groups:
        return []
    from .cells import mean_cell

    keys = sorted({g[3] for g in groups}, key=lambda k: (k.split("[")[0] not in METRICS, k))
    fig, axes = subplot_grid(len(keys), 3, 4.6, 3.4)
    for ax, key in zip(axes, keys):
        allv = []
        for (model, ctx, traj, k), (per_k, _, _, K) in groups.items():
            if k != key:
                continue
            cells = [mean_cell(u, b.boot) for u in per_k[:K]]
            xs = [i + 1 for i, c in enumerate(cells) if c.ok()]
            m = np.array([c.mean for c in cells if c.ok()])
            lo = np.array([c.lo for c in cells if c.ok()])
            hi = np.array([c.hi for c in cells if c.ok()])
            allv += list(hi)
            ax.errorbar(xs, m, yerr=[m - lo, hi - m], marker="o", capsize=3, label=f"{model}/{ctx}/{traj}")
        lo_, top, cap = metric_range(key, allv)
        ax.set_ylim(lo_, top + 0.02 * (top - lo_))  # a margin so markers at the ceiling stay visible
        arrow = "↑" if METRICS.get(key.split("[")[0]) and METRICS[key.split("[")[0]].higher_is_better else "↓"
        ax.set_title(f"{key} {arrow}", fontsize=8)
        ax.set_xlabel("revisit")
        ax.set_ylabel(cap, fontsize=7)
        ax.set_xticks(range(1, max(g[3] for g in groups.values()) + 1))
        ax.set_xticklabels([f"R{k}" for k in range(1, max(g[3] for g in groups.values()) + 1)])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=5)
    fig.suptitle("Per-revisit scores (mean over videos, 95 % bootstrap interval)", fontsize=9)
    fig.tight_layout()
    paths = _save(fig, out)
    _plt().close(fig)
    return paths


def _bounded_score_columns(t: Table) -> list[str]:
    """Columns of higher-is-better scores in [0, 1] (for profiles): no PSNR, no RPE, no counts."""
    out = []
    for c in t.columns:
        mid = c.key.split("[")[0]
        if mid in METRICS and METRICS[mid].higher_is_better and mid not in RANGES:
            if any(isinstance(v := cells.get(c.key), Cell) and v.ok() for _, cells in t.rows):
                out.append(c.key)
    return out


def profile_bars(main: Table, out: Path) -> list[Path]:
    """Grouped bars: per model, its [0, 1] higher-is-better scores with 95 % bootstrap bars (axis 0..1)."""
    cols = _bounded_score_columns(main)
    if not cols or not main.rows:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cols) * max(1, len(main.rows)) ** 0.5 + 2), 3.8))
    w = 0.8 / len(main.rows)
    for j, (key, cells) in enumerate(main.rows):
        xs, ms, err = [], [], [[], []]
        for i, c in enumerate(cols):
            v = cells.get(c)
            if isinstance(v, Cell) and v.ok():
                xs.append(i + j * w)
                ms.append(v.mean)
                err[0].append(v.mean - v.lo)
                err[1].append(v.hi - v.mean)
        ax.bar(xs, ms, width=w, yerr=err, capsize=2, label=" / ".join(map(str, key)))
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(cols))])
    ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (y from 0, the metric floor)", fontsize=8)
    ax.set_title("Model profile: higher-is-better [0, 1] metrics of the main table", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    paths = _save(fig, out)
    plt.close(fig)
    return paths


def latency_vs_memory(ctx: Table, out: Path) -> list[Path]:
    """Per model and policy: mean latency (x, from 0) vs the memory score = mean of the policy's [0, 1]
    higher-is-better memory metrics (human/object/environment/dynamic) on the matched items (y, 0..1)."""
    cols = [c for c in _bounded_score_columns(ctx) if c.split(".")[0] in ("human", "object", "environment",
                                                                          "dynamic")]
    pts = []
    for (model, policy), cells in ctx.rows:
        lat = cells.get("latency_s")
        vals = [cells[c].mean for c in cols if isinstance(cells.get(c), Cell) and cells[c].ok()]
        if isinstance(lat, Cell) and lat.ok() and vals:
            pts.append((model, policy, lat, float(np.mean(vals)), len(vals)))
    if not pts:
        return []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for model, policy, lat, score, k in pts:
        ax.errorbar([lat.mean], [score], xerr=[[lat.mean - lat.lo], [lat.hi - lat.mean]], marker="o", capsize=3)
        ax.annotate(f"{model}/{policy}", (lat.mean, score), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlim(0, max(p[2].hi for p in pts) * 1.2)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("latency per video [s] (x from 0; 95 % bootstrap bar)")
    ax.set_ylabel("memory score (y from 0)", fontsize=8)
    ax.set_title("Latency vs memory per context policy", fontsize=9)
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.01, "memory score = mean over the policy's matched videos of: " + ", ".join(cols), fontsize=5,
             wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    paths = _save(fig, out)
    plt.close(fig)
    return paths


def trajectory_previews(items: list[Item], out_dir: Path) -> dict[str, list[Path]]:
    """The prescribed path of each trajectory (first item that has it; camera.npz), via trajectories.preview."""
    from trajectories import TrajectoryError, load_path
    from trajectories.preview import preview_path

    out: dict[str, list[Path]] = {}
    seen = set()
    for it in items:
        key = (it.model, it.trajectory)
        if key in seen or not (it.item_dir / "camera.npz").exists():
            continue
        try:
            path = load_path(it.item_dir / "camera.npz")
        except TrajectoryError:  # a damaged item (failed by the evaluation, which names it): the next one
            continue
        seen.add(key)
        stem = out_dir / f"trajectory_{it.trajectory}_{it.model}"
        out[f"{it.trajectory} ({it.model})"] = [preview_path(path, stem.with_suffix(ext), title=f"{it.trajectory} "
                                                             f"as run by {it.model}") for ext in (".png", ".svg")]
    return out


def return_frames(it: Item) -> Optional[tuple[str, list[int]]]:
    """(how they were chosen, the chosen return frame per revisit) from the first computed entry that records
    them (metrics.json ``return_frames`` and ``return_pose_estimator``)."""
    for key, m in sorted(it.computed().items()):
        rf = m.get("return_frames")
        if rf and all(isinstance(f, int) for f in rf):
            return f"closest {m.get('return_pose_estimator', '?')} pose to frame 0, recorded in {key}", list(rf)
    return None


def frame_strip(it: Item, out_png: Path, max_metrics: int = 4) -> Optional[Path]:
    """Frame 0 beside the chosen return frame of every revisit, each titled with its per-revisit scores."""
    got = return_frames(it)
    if got is None:
        return None
    from harness.video import read_frames

    src, rf = got
    idx, frames = read_frames(it.item_dir / "video.mp4", indices=sorted({0, *rf}))
    pos = {f: i for i, f in enumerate(idx)}
    from .collect import per_revisit
    from .tables import metric_order

    per = []
    for key, m in sorted(it.computed().items(), key=lambda kv: metric_order(kv[0])):
        pr = per_revisit(m)
        if pr and len(pr) == len(rf):
            per.append((key, pr))
    per = per[:max_metrics]
    plt = _plt()
    n = 1 + len(rf)
    fig, axes = plt.subplots(1, n, figsize=(2.6 * n, 2.3 + 0.22 * len(per)), squeeze=False)
    axes = axes[0]
    axes[0].imshow(frames[pos[0]])
    axes[0].set_title("frame 0 (reference)", fontsize=7)
    for k, f in enumerate(rf):
        ax = axes[k + 1]
        if f in pos:
            ax.imshow(frames[pos[f]])
        lines = [f"R{k + 1}: frame {f}"] + [f"{key.split('[')[0].split('.')[-1]}[{key.split('[')[1]} "
                                             f"{pr[k]:.3f}" for key, pr in per]
        ax.set_title("\n".join(lines), fontsize=6)
    for ax in axes:
        ax.axis("off")
    fig.suptitle(f"{it.model}/{it.context}/seed-{it.seed}/{it.trajectory}/{it.case_id}\nreturn frames: {src}",
                 fontsize=7)
    fig.tight_layout()
    p = _save(fig, out_png, svg=False)[0]
    plt.close(fig)
    return p
