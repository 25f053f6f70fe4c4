"""Report figures (matplotlib, Agg): PNG and SVG.

* One colour (and marker) per contender, a policy or a model, in every panel of every figure of a report
  (:func:`palette`); trajectories are told apart by line style. What each panel drew is written beside the figures
  (``figures/figures.json``: per figure and panel, each series with its colour), so a test or a reader can check
  the mapping without reading pixels.
* Axes of score plots start at the metric's floor, not at the data's minimum, and each panel states the floor: a
  change of 1e-5 on a [0, 1] score then looks like what it is.
* x labels of the decay panels are the metric's own revisit windows (``R1, D2, R2`` for a departure sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from typing import TYPE_CHECKING, Any, Literal, Optional

import numpy as np

from ..catalog import METRICS, chance_level, direction, metric_id
from .analyses import Analyses, RevisitSeries
from .cells import Cell, mean_cell
from .collect import Item
from .study import contender_order
from .tables import Table

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: metric id -> (floor, ceiling or None = from the data, unit text)
RANGES = {"diagnostic.revisit_psnr": (0.0, None, "dB"), "camera.rpe_trans": (0.0, None, ""),
          "camera.rpe_rot": (0.0, None, ""), "environment.depth": (-1.0, 1.0, "Spearman")}
DEFAULT_RANGE = (0.0, 1.0, "")
#: most panels of one figure (a nine-model study would draw hundreds; the tables hold every group)
MAX_PANELS = 24
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
_LINESTYLES: tuple[Literal["-", "--", ":", "-."], ...] = ("-", "--", ":", "-.")
LEGEND_FONT = 9


def metric_range(key: str, values: list[float]) -> tuple[float, float, str]:
    """(floor, top, caption) of a metric's y axis."""
    mid = metric_id(key)
    lo, hi, unit = RANGES.get(mid, DEFAULT_RANGE)
    if mid == "environment.depth" and values and min(values) >= 0:
        lo = 0.0  # Spearman is in [-1, 1]; show from 0 when no value is negative (stated on the axis)
    data_top = max(values) if values else 1.0
    top = hi if hi is not None else max(data_top * 1.15, lo + 1e-3 if data_top <= lo else data_top * 1.15)
    if mid in ("camera.rpe_trans", "camera.rpe_rot"):
        top = max(top, 0.05)
    return lo, top, f"y from {lo:g}{(' ' + unit) if unit else ''} (metric floor)"


def _plt() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: the report's figures only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def subplot_grid(n: int, max_cols: int, cell_w: float, cell_h: float) -> tuple[Figure, list[Axes]]:
    """(figure, axes list of length ``n``) on a grid of at most ``max_cols`` columns, ``cell_w`` x ``cell_h``
    inches per panel; the grid's unused panels are switched off."""
    plt = _plt()
    ncol = min(max_cols, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(cell_w * ncol, cell_h * nrow), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat[:n])


def _save(fig: Figure, out: Path, svg: bool = True) -> list[Path]:
    from harness.io import atomic_path

    paths = []
    for ext in ("png", "svg") if svg else ("png",):
        p = out.with_suffix("." + ext)
        with atomic_path(p, suffix="." + ext) as tmp:
            fig.savefig(tmp, dpi=100, format=ext)
        paths.append(p)
    return paths


class Palette:
    """Colour and marker of each contender of a report: a policy when one model was run under several, a model
    when several models ran under one policy, ``model/policy`` otherwise. Baselines first (FullKV, Sliding)."""

    def __init__(self, items: list[Item]):
        self.models = sorted({it.model for it in items})
        self.policies = contender_order({it.context for it in items})
        names = [self.name(m, p) for m in self.models for p in self.policies
                 if any(it.model == m and it.context == p for it in items)]
        self.names = names if len(self.models) > 1 else contender_order(names)
        self.colours = {n: _COLOURS[i % len(_COLOURS)] for i, n in enumerate(self.names)}
        self.markers = {n: _MARKERS[i % len(_MARKERS)] for i, n in enumerate(self.names)}

    def name(self, model: str, policy: str) -> str:
        if len(self.models) == 1:
            return policy
        if len(self.policies) == 1:
            return model
        return f"{model}/{policy}"

    def offset(self, name: str, width: float = 0.08) -> float:
        """A small x offset per contender, so equal values (FoV on FullKV) stay visible side by side."""
        i, n = self.names.index(name), len(self.names)
        return (i - (n - 1) / 2) * width


def _arrow(key: str) -> str:
    d = direction(key)
    return "" if d is None else ("↑" if d else "↓")


def _legend(fig: Figure, pal: Palette, names: list[str], extra: Sequence[Artist] = ()) -> None:
    from matplotlib.lines import Line2D

    handles: list[Artist] = [Line2D([0], [0], color=pal.colours[n], marker=pal.markers[n], linestyle="-", label=n) for n in names]
    handles += extra
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 6), fontsize=LEGEND_FONT,
               frameon=False, bbox_to_anchor=(0.5, 1.0))


def decay_curves(an: Analyses, pal: Palette, out: Path, first: Optional[list[str]] = None
                 ) -> tuple[list[Path], list[dict[str, Any]]]:
    """One panel per (metric, trajectory): the mean score in each of the metric's windows per contender, with
    95 % bootstrap bars. ``first``: metric keys drawn first (the verdict's). Returns the paths and, per panel,
    what it drew (``metric, trajectory, windows, series: [{name, colour, marker}]``)."""
    from matplotlib.lines import Line2D

    series = an.multi_revisit
    if not series:
        return [], []
    boot = an.study.boot
    first = first or []
    panels_keys = sorted({(x.key, x.trajectory) for x in series},
                         key=lambda kt: (kt[0] not in first, first.index(kt[0]) if kt[0] in first else 0,
                                         metric_id(kt[0]) not in METRICS, kt[0], kt[1]))[:MAX_PANELS]
    trajs = sorted({t for _, t in panels_keys})
    style = {t: _LINESTYLES[i % len(_LINESTYLES)] for i, t in enumerate(trajs)}
    fig, axes = subplot_grid(len(panels_keys), 3, 4.4, 3.2)
    panels, drawn = [], []
    for ax, (key, traj) in zip(axes, panels_keys):
        mine: list[RevisitSeries] = [x for x in series if x.key == key and x.trajectory == traj]
        labels = max((x.labels for x in mine), key=len)
        allv: list[float] = []
        panel_series: list[dict[str, str]] = []
        info: dict[str, Any] = {"metric": key, "trajectory": traj, "windows": labels, "series": panel_series}
        for x in mine:
            name = pal.name(x.model, x.context)
            cells = [mean_cell(u, boot) for u in x.per_window]
            ok = [i for i, c in enumerate(cells) if c.ok()]
            xs = np.array([i + 1 + pal.offset(name) for i in ok])
            m = np.array([cells[i].mean for i in ok])
            lo = np.array([cells[i].lo if np.isfinite(cells[i].lo) else cells[i].mean for i in ok])
            hi = np.array([cells[i].hi if np.isfinite(cells[i].hi) else cells[i].mean for i in ok])
            allv += list(hi)
            ax.errorbar(xs, m, yerr=[m - lo, hi - m], color=pal.colours[name], marker=pal.markers[name],
                        linestyle=style[traj], markersize=5, capsize=3, linewidth=1.4, label=name)
            panel_series.append({"name": name, "colour": pal.colours[name], "marker": pal.markers[name]})
            drawn.append(name)
        lo_, top, cap = metric_range(key, allv)
        ax.set_ylim(lo_, top + 0.02 * (top - lo_))  # a margin so markers at the ceiling stay visible
        ch = chance_level(key)
        if ch is not None and lo_ <= ch.value <= top:
            ax.axhline(ch.value, color="#999999", linestyle=":", linewidth=1)
            ax.text(0.02, ch.value, f" chance {ch.value:.2f}", transform=ax.get_yaxis_transform(), fontsize=7,
                    color="#666666", va="bottom")
        ax.set_title(f"{key} {_arrow(key)} — {traj}", fontsize=8)
        ax.set_xlabel("revisit window", fontsize=8)
        ax.set_ylabel(cap, fontsize=7)
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlim(0.5, len(labels) + 0.5)
        ax.grid(alpha=0.3)
        panels.append(info)
    names = [n for n in pal.names if n in drawn]
    extra = [Line2D([0], [0], color="#444444", linestyle=style[t], label=t) for t in trajs] if len(trajs) > 1 else []
    _legend(fig, pal, names, extra)
    rows = -(-len(panels_keys) // 3)
    fig.suptitle("Per-window scores (mean over videos, 95 % bootstrap interval)", fontsize=10,
                 y=1 - 0.45 / (3.2 * rows))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.8 / (3.2 * rows)))
    paths = _save(fig, out)
    _plt().close(fig)
    return paths, panels


def _bounded_score_columns(t: Table) -> list[str]:
    """Columns of higher-is-better scores in [0, 1] (for profiles): no PSNR, no RPE, no counts."""
    out = []
    for c in t.columns:
        mid = metric_id(c.key)
        if mid in METRICS and METRICS[mid].higher_is_better and mid not in RANGES:
            if any(isinstance(v := cells.get(c.key), Cell) and v.ok() for _, cells in t.rows):
                out.append(c.key)
    return out


def profile_bars(main: Table, pal: Palette, out: Path) -> tuple[list[Path], list[dict[str, Any]]]:
    """Grouped bars: per model, its [0, 1] higher-is-better Table 2 scores with 95 % bootstrap bars (axis 0..1)."""
    cols = _bounded_score_columns(main)
    if not cols or not main.rows:
        return [], []
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cols) * max(1, len(main.rows)) ** 0.5 + 2), 3.8))
    w = 0.8 / len(main.rows)
    info: dict[str, list[dict[str, str]]] = {"series": []}
    for j, ((model, ctx), cells) in enumerate(main.rows):
        name = pal.name(str(model), str(ctx))  # the main table's rows: (model, context)
        xs: list[float] = []
        ms: list[float] = []
        err: list[list[float]] = [[], []]
        for i, c in enumerate(cols):
            v = cells.get(c)
            if isinstance(v, Cell) and v.ok():
                xs.append(i + j * w)
                ms.append(v.mean)
                err[0].append(v.mean - v.lo if np.isfinite(v.lo) else 0.0)
                err[1].append(v.hi - v.mean if np.isfinite(v.hi) else 0.0)
        ax.bar(xs, ms, width=w, yerr=err, capsize=2, color=pal.colours[name], label=name)
        info["series"].append({"name": name, "colour": pal.colours[name]})
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(cols))])
    ax.set_xticklabels(cols, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (y from 0, the metric floor)", fontsize=8)
    ax.set_title("Model profile: higher-is-better [0, 1] metrics of the main table", fontsize=9)
    ax.legend(fontsize=LEGEND_FONT)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    paths = _save(fig, out)
    plt.close(fig)
    return paths, [info]


def latency_vs_memory(an: Analyses, pal: Palette, out: Path,
                      max_panels: int = 4) -> tuple[list[Path], list[dict[str, Any]]]:
    """Per policy comparison: one panel per metric that separates its policies (the verdict's, most telling
    first; without one, its first metrics, and the title says so): each policy's mean latency (x, from 0) against
    its mean score (y, from the metric's floor), 95 % bootstrap bars both ways."""
    comps = [c for c in an.comparisons if c.kind == "policies" and any(x.ok() for x in c.latency.values())]
    if not comps:
        return [], []
    sep = an.verdict.metrics
    todo = []
    for c in comps:
        keys = [k for k in sep if k in c.metrics and c.metrics[k].separates][:max_panels]
        none = not keys
        if none:
            keys = [k for k in c.metrics if direction(k) is not None][:max_panels]
        todo += [(c, k, none) for k in keys]
    if not todo:
        return [], []
    fig, axes = subplot_grid(len(todo), 4, 3.6, 3.2)
    panels, drawn = [], []
    for ax, (c, key, none) in zip(axes, todo):
        lat_series: list[dict[str, str]] = []
        info = {"metric": key, "model": c.model, "separates": not none, "series": lat_series}
        allv, xmax = [], 0.0
        for p in c.contenders:
            lat, m = c.latency[p], c.metrics[key].means[p]
            if not (lat.ok() and m.ok()):
                continue
            name = pal.name(c.model or "", p)
            xerr = [[lat.mean - lat.lo], [lat.hi - lat.mean]] if np.isfinite(lat.lo) else None
            yerr = [[m.mean - m.lo], [m.hi - m.mean]] if np.isfinite(m.lo) else None
            ax.errorbar([lat.mean], [m.mean], xerr=xerr, yerr=yerr, color=pal.colours[name],
                        marker=pal.markers[name], markersize=7, capsize=3, linestyle="none")
            allv.append(m.hi if np.isfinite(m.hi) else m.mean)
            xmax = max(xmax, lat.hi if np.isfinite(lat.hi) else lat.mean)
            lat_series.append({"name": name, "colour": pal.colours[name], "marker": pal.markers[name]})
            drawn.append(name)
        lo_, top, cap = metric_range(key, allv)
        ax.set_ylim(lo_, top + 0.02 * (top - lo_))
        ax.set_xlim(0, max(xmax, 1e-6) * 1.25)
        ax.set_xlabel("generation time per video [s] (wall clock; x from 0)", fontsize=8)
        ax.set_ylabel(f"{_arrow(key)} {cap}", fontsize=7)
        ax.set_title(f"{key}{' (does not separate)' if none else ''}\n{c.title}", fontsize=8)
        ax.grid(alpha=0.3)
        panels.append(info)
    _legend(fig, pal, [n for n in pal.names if n in drawn])
    rows = -(-len(todo) // 4)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / (3.2 * rows)))
    paths = _save(fig, out)
    _plt().close(fig)
    return paths, panels


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
        png = preview_path(path, stem.with_suffix(".png"), title=f"{it.trajectory} as run by {it.model}",
                           also=(".svg",))
        out[f"{it.trajectory} ({it.model})"] = [png, png.with_suffix(".svg")]
    return out
