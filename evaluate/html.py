"""A static HTML page for a run (``eval/index.html``): the summary tables, the multi-revisit decay plot and every
video with its case, phases and headline metrics. Relative links only, so the run folder can be copied anywhere."""

from __future__ import annotations

import html
from pathlib import Path


def decay_plot(out_png: Path, multi_revisit: list[dict]) -> Path | None:
    """Per (model, context, trajectory, metric): the mean score at R1..RK (computed metrics only), on an axis that
    starts at the metric's floor (see :func:`evaluate.reporting.plots.metric_range`). Oracle entries are skipped."""
    from .reporting.plots import metric_range, subplot_grid

    rows = [e for e in multi_revisit if len(e["per_revisit_mean"]) >= 2 and not e["metric"].endswith("[oracle]")]
    if not rows:
        return None
    metrics = sorted({e["metric"] for e in rows})
    fig, axes = subplot_grid(len(metrics), 4, 4.0, 3.2)
    for ax, m in zip(axes, metrics):
        for e in rows:
            if e["metric"] == m:
                ks = range(1, len(e["per_revisit_mean"]) + 1)
                ax.plot(ks, e["per_revisit_mean"], marker="o", label=f"{e['model']}/{e['context']}/{e['trajectory']}")
        lo, top, cap = metric_range(m, [x for e in rows if e["metric"] == m for x in e["per_revisit_mean"]])
        ax.set_ylim(lo, top)
        ax.set_ylabel(cap, fontsize=7)
        ax.set_title(m, fontsize=8)
        ax.set_xlabel("revisit")
        ax.set_xticks(list(range(1, max(len(e["per_revisit_mean"]) for e in rows) + 1)))
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out_png, dpi=80)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out_png


def write_index(out_dir: Path, results: list[dict], summary_md: str, plot: Path | None) -> Path:
    """``eval/index.html``: the run's videos with phases and computed (non-oracle) metrics; links to the study
    report in ``eval/report/``."""
    from harness.io import write_text
    from harness.outputs import WorkItem

    from .reporting.collect import drop_oracle

    results = [drop_oracle(r) for r in results]

    parts = ["<!doctype html><meta charset='utf-8'><title>WorldMem run</title>",
             "<style>body{font-family:sans-serif;max-width:1400px;margin:auto} video{width:416px} "
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px} table{border-collapse:collapse}</style>",
             "<h1>Run report</h1><p>Tables: <a href='summary.md'>summary.md</a>, <a href='analyses.md'>analyses.md"
             "</a>, <a href='summary.csv'>summary.csv</a>, <a href='per_item.csv'>per_item.csv</a>. Study report "
             "(paper-shaped tables, plots, side-by-side videos): <a href='report/index.html'>report/index.html</a></p>"]
    if plot is not None:
        parts.append(f"<h2>Multi-revisit decay</h2><img src='{plot.name}'>")
    parts.append("<h2>Videos</h2><table><tr><th>item</th><th>video</th><th>phases</th><th>metrics</th></tr>")
    for r in results:
        it = r["item"]
        rel = "../" + WorkItem(it["model"], it["context"], int(it["seed"]), it["trajectory"], it["case_id"]).key
        phases = ", ".join(f"{k} {a}-{b}" for k, (a, b) in r["phases"].items())
        mets = "<br>".join(f"{html.escape(k)}: {m['value']:.3f}" for k, m in sorted(r["metrics"].items())
                           if m["status"] == "computed")
        parts.append(f"<tr><td>{html.escape(rel[3:])}</td><td><video controls preload='none' "
                     f"src='{rel}/video.mp4'></video></td><td>{html.escape(phases)}</td><td>{mets}</td></tr>")
    parts.append("</table>")
    out = out_dir / "index.html"
    write_text(out, "\n".join(parts))
    return out
