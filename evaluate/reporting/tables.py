"""Paper-shaped tables, each cell a :class:`~evaluate.reporting.cells.Cell`, shaped from a
:class:`~evaluate.reporting.study.Study` and its :class:`~evaluate.reporting.analyses.Analyses` (no table computes
an analysis of its own).

Every table states what its cells average over. The main table holds the paper's Table 2 metrics only, each at the
paper's backbone; every other backbone and metric (estimators, weight-free diagnostics, protocol extensions) is in
the ``variants`` table. A column that is not computed in any row is folded: the rendered table lists it once, with
the reason (and so the fix), instead of a column of n/c. The CSV files keep every column.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np

from ..catalog import direction
from .analyses import Analyses, Comparison, chance_text, tolerances
from .cells import Cell, Unit, count_cell, mean_cell
from .collect import Item
from .study import Study

Value = Union[Cell, str, float, int, None]
#: a table row's key, its values matching :attr:`Table.index` (names, seeds; None: no model, a comparison across models)
RowKey = tuple[Union[str, int, None], ...]


@dataclass
class Column:
    key: str
    label: str
    higher_is_better: Optional[bool] = None  # None: not ranked

    @property
    def arrow(self) -> str:
        return "" if self.higher_is_better is None else (" ↑" if self.higher_is_better else " ↓")


def metric_column(key: str) -> Column:
    """A ``metric[backbone]`` column: its direction, and its chance level in the label where it has one."""
    return Column(key, key + chance_text(key), direction(key))


@dataclass
class Table:
    """``rows``: (row key values matching ``index``, {column key: value}).

    ``mark_best`` ranks Cell columns with a direction (best and second best per column), only where ``separated``
    says so: ``separated(row_key_a, row_key_b, column_key)`` is True when the paired interval of the two rows
    excludes 0 (the verdict's rule, :meth:`~evaluate.reporting.analyses.MetricComparison.separated`); a table
    without it marks nothing, so ties, n=1 and unpaired rows are never emphasised. ``fold``: columns that are
    n/c in every row are rendered as one line each reason (:meth:`folded`). ``collapsed``: a one-line summary that
    replaces the whole table where it is rendered for reading (the full table stays in its own files)."""

    id: str
    title: str
    caption: str
    index: list[str]
    columns: list[Column]
    rows: list[tuple[RowKey, dict[str, Value]]] = field(default_factory=list)
    mark_best: bool = False
    notes: list[str] = field(default_factory=list)
    fold: bool = False
    collapsed: Optional[str] = None
    separated: Callable[[RowKey, RowKey, str], bool] | None = None
    #: rows compete within groups of the same first ``rank_within`` key values (the policy table: 1, each model's
    #: policies); 0: every row with every other
    rank_within: int = 0

    def _all_nc(self, c: Column) -> bool:
        cells = [cells.get(c.key) for _, cells in self.rows]
        return bool(cells) and all(isinstance(v, Cell) and not v.ok() for v in cells)

    @property
    def shown_columns(self) -> list[Column]:
        """The columns rendered as columns (every column unless folded)."""
        if not self.fold:
            return list(self.columns)
        return [c for c in self.columns if not self._all_nc(c)]

    def folded(self) -> list[tuple[str, list[str]]]:
        """(reason, column labels) of the columns not computed in any row, one entry per reason (in column
        order); the reason is the first row's (the key prefix dropped: the line names the columns)."""
        if not self.fold:
            return []
        out: dict[str, list[str]] = {}
        for c in self.columns:
            if self._all_nc(c):
                reason = next((v.reason for _, cells in self.rows if isinstance(v := cells.get(c.key), Cell)
                               and v.reason), "not computed")
                out.setdefault(_without_key(reason, c.key), []).append(c.key)
        return _weights_in_one_line(list(out.items()))

    def ranks(self) -> dict[tuple[int, str], int]:
        """(row number, column key) -> 1 (best) or 2 (second best), for columns with a direction.

        Rows compete within their group (:attr:`rank_within`). The best row is marked only when it is separated
        (:attr:`separated`) from every other row of its group with a value;
        the second only when the best is marked, three or more rows have a value and it is separated from every
        row below it. Equal means, n < 3 and rows without a paired comparison are never separated."""
        out: dict[tuple[int, str], int] = {}
        if not self.mark_best or self.separated is None:
            return out
        groups = sorted({key[:self.rank_within] for key, _ in self.rows})
        for c, group in ((c, g) for c in self.columns for g in groups):
            if c.higher_is_better is None:
                continue
            vals = [(i, key, v.mean) for i, (key, cells) in enumerate(self.rows) if key[:self.rank_within] == group
                    and isinstance(v := cells.get(c.key), Cell) and v.ok() and v.kind == "mean"]
            if len(vals) < 2:
                continue
            order = sorted(vals, key=lambda x: x[2], reverse=bool(c.higher_is_better))

            def apart(x: tuple[int, RowKey, float], rest: list[tuple[int, RowKey, float]], col: str = c.key,
                      separated: Callable[[RowKey, RowKey, str], bool] = self.separated) -> bool:
                return all(x[2] != y[2] and separated(x[1], y[1], col) for y in rest)

            if apart(order[0], order[1:]):
                out[(order[0][0], c.key)] = 1
                if len(order) >= 3 and apart(order[1], order[2:]):
                    out[(order[1][0], c.key)] = 2
        return out

    def footnotes(self) -> dict[str, int]:
        """Reason text -> footnote number of the n/c cells of the shown columns, in order of first appearance."""
        out: dict[str, int] = {}
        for _, cells in self.rows:
            for c in self.shown_columns:
                v = cells.get(c.key)
                if isinstance(v, Cell) and not v.ok() and v.reason:
                    out.setdefault(v.reason, len(out) + 1)
        return out


#: what the latency of a video measures, said wherever it is shown (the policy table, the verdict, the figure)
LATENCY_NOTE = ("Generation time: the wall-clock time of each video's generate call on the machine that ran it "
                "(timings.generate_s of meta.json), everything the model does per video included. It is a cost of "
                "the KV context only for a model that attends over a KV cache on its accelerator (the paper's "
                "Table 3); the built-in reference model renders by re-projecting frames on the CPU, so its time is "
                "its renderer's, not a KV cost, and its speedup says nothing about a real model.")

#: the words of a backbone whose weights are not installed (evaluate/backbones.py); such columns fold into one line
WEIGHTS_MISSING = "weights not found at "


def _weights_in_one_line(folded: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """The folded columns whose only reason is a backbone without weights, as one entry pointing at
    ``weights list`` (one line per backbone told the same thing nine times); every other reason stays as it is."""
    import re

    missing = [(r, cols) for r, cols in folded if WEIGHTS_MISSING in r]
    if len(missing) < 2:
        return folded
    roots = sorted({str(Path(m.group(1)).parent) for r, _ in missing
                    if (m := re.search(re.escape(WEIGHTS_MISSING) + r"(\S+)", r))})
    where = f" under {', '.join(roots)}" if roots else ""
    reason = (f"their backbones' weights are not installed{where}: `python -m harness weights list` shows each "
              "backbone, what is missing and the command that fetches it (nothing is downloaded during a run)")
    out = [x for x in folded if WEIGHTS_MISSING not in x[0]]
    return [(reason, [c for _, cols in missing for c in cols])] + out


def _without_key(reason: str, key: str) -> str:
    return reason[len(key) + 2:] if reason.startswith(key + ": ") else reason


def _rate(c: Cell) -> Cell:
    c.kind = "rate"
    return c


def regime_notes(groups: dict[str, tuple[str, list[Item]]]) -> list[str]:
    """One note per (model, context) row whose launch left the regime upstream trained or documented the checkpoint
    in: the caveats the adapter recorded with its items (``context_ran.trained_regime``, from the model's contract,
    each with upstream's file and line)."""
    out = []
    for model, (ctx, its) in groups.items():
        ran = (it.result.extra.get("context_ran") for it in its)
        caveats = next((r["trained_regime"] for r in ran if isinstance(r, dict) and r.get("trained_regime")), None)
        if caveats:
            out.append(f"{model} ({ctx}), outside upstream's trained or documented regime: " + "; ".join(caveats))
    return out


class Builder:
    """Shapes every table of a report from one study and its analyses."""

    def __init__(self, study: Study, analyses: Optional[Analyses] = None):
        self.study = study
        self.an = analyses or Analyses(study)

    # -- emphasis: the verdict's rule -------------------------------------------------------------------------------
    def _models_separated(self, a: RowKey, b: RowKey, key: str) -> bool:
        """Rows (model, context) of the main-context tables: the models comparison's paired rule."""
        for c in self.an.comparisons:
            if c.kind == "models" and key in c.metrics and a[0] in c.contenders and b[0] in c.contenders:
                return c.metrics[key].separated(a[0], b[0])
        return False

    def _policies_separated(self, a: RowKey, b: RowKey, key: str) -> bool:
        """Rows (model, context) of the policy table: that model's policy comparison's paired rule."""
        if a[0] != b[0]:
            return False
        for c in self.an.comparisons:
            if c.kind == "policies" and c.model == a[0] and key in c.metrics:
                return c.metrics[key].separated(str(a[1]), str(b[1]))  # (model, context): names
        return False

    def _separating_first(self, keys: list[str], kind: str) -> list[str]:
        """``keys`` with the metrics that a comparison of ``kind`` ("models" | "policies") separates first, in the
        verdict's order (most telling first), then the others in their order: the columns that tell the contenders
        apart lead, so they are on the first screen of a wide table."""
        first = [k for k in dict.fromkeys(x.key for x in self.an.verdict.lines if x.comparison.kind == kind)
                 if k in keys]
        return first + [k for k in keys if k not in first]

    # -- per-model tables -------------------------------------------------------------------------------------------
    def _model_table(self, tid: str, title: str, caption: str, groups: dict[str, tuple[str, list[Item]]],
                     keys: list[str], paired: bool = True) -> Table:
        """``paired``: the rows are the models comparison's contenders (main and variants tables), so its paired
        intervals decide the emphasis; per-trajectory tables are not compared pairwise and mark nothing."""
        cols = [metric_column(k) for k in (self._separating_first(keys, "models") if paired else keys)]
        t = Table(tid, title, caption, ["model", "context"], [Column("videos", "videos")] + cols, mark_best=True,
                  fold=True, separated=self._models_separated if paired else None)
        for model, (ctx, its) in groups.items():
            t.rows.append(((model, ctx), {c.key: self.study.metric_cell(its, c.key) for c in cols}
                           | {"videos": len(its)}))
        if paired:  # the main and variants tables: each row's regime caveats beside its numbers
            t.notes += regime_notes(groups)
        return t

    def main_table(self) -> Table:
        s = self.study
        return self._model_table(
            "main", "Main results (paper Table 2)",
            f"The paper's Table 2 metrics, each with the paper's backbone, per model at its main context "
            f"({s.main_context} where run, else its first): mean over its videos (cases x trajectories x seeds "
            "pooled) with a 95 % bootstrap interval over videos and n videos. ↑/↓: higher/lower is better; the best "
            "per metric is marked only where the verdict separates it from every other model (paired 95 % interval "
            "over matched videos excludes 0, n >= 3); ties are never marked. Other backbones and the "
            "harness's own metrics are in the variants table.", s.main_items(), s.table2_keys)

    def variants_table(self) -> Table:
        s = self.study
        return self._model_table(
            "variants", "Estimator and diagnostic variants",
            "Every other metric[backbone] of these runs, per model at its main context: Table 2 metrics computed "
            "with a non-paper estimator (classical-opencv) or a weight-free diagnostic (pixel-thumb16, "
            "template-ncc, pixels), the protocol extensions (departure.*) and the diagnostics. These are not the "
            "paper's numbers. Static-content metrics (diagnostic.*, departure.*) leave dynamic cases out. Chance: "
            "what a video with no memory of the content scores (evaluate/catalog.py).", s.main_items(),
            s.variant_keys)

    def trajectory_tables(self) -> list[Table]:
        """Per trajectory, as the main table; a model not run on it under its main context uses its first context
        (by name) that was, and the row says which."""
        s = self.study
        out = []
        by: dict[tuple[str, str], dict[str, list[Item]]] = defaultdict(lambda: defaultdict(list))
        for it in s.items:
            by[(it.model, it.trajectory)][it.context].append(it)
        for traj in sorted({it.trajectory for it in s.items}):
            groups = {}
            for (model, t), ctxs in sorted(by.items()):
                if t == traj:
                    ctx = s.main_context if s.main_context in ctxs else sorted(ctxs)[0]
                    groups[model] = (ctx, ctxs[ctx])
            out.append(self._model_table(
                f"trajectory_{traj}", f"Per-trajectory results: {traj.upper()} (paper Table 8)",
                f"As the main table and the variants, on trajectory {traj} only (cases x seeds pooled). Context: "
                f"{s.main_context} where the model was run on {traj} with it, else its first context that was.",
                groups, s.table2_keys + [k for k in s.variant_keys if k in s.computed_keys], paired=False))
        return out

    def group_summary(self) -> Table:
        """Rows model x context x trajectory x seed; n per cell."""
        s = self.study
        g: dict[tuple[str, str, str, int], list[Item]] = defaultdict(list)
        for it in s.items:
            g[(it.model, it.context, it.trajectory, it.seed)].append(it)
        cols = [metric_column(k) for k in s.computed_keys]
        t = Table("groups", "Group summary (model x context x trajectory x seed)",
                  "Mean over the cases of each group, 95 % bootstrap interval over cases, n cases per cell. Metrics "
                  "never computed in these runs are left out here (see the main table).",
                  ["model", "context", "trajectory", "seed"], [Column("videos", "videos")] + cols)
        for k, its in sorted(g.items()):
            t.rows.append((k, {c.key: s.metric_cell(its, c.key) for c in cols} | {"videos": len(its)}))
        return t

    def seed_spread(self) -> Table:
        """Per model x context x trajectory and metric: the per-seed means, their mean, SD and range."""
        s = self.study
        g: dict[tuple[str, str, str], dict[int, list[Item]]] = defaultdict(lambda: defaultdict(list))
        for it in s.items:
            g[(it.model, it.context, it.trajectory)][it.seed].append(it)
        cols = [metric_column(k) for k in s.computed_keys]
        t = Table("seed_spread", "Seed-to-seed spread",
                  "Per group: the mean of each seed's mean over cases, ± the SD across seeds, the range "
                  "[lowest, highest seed mean] and the number of seeds (n). One seed: no spread (SD 0).",
                  ["model", "context", "trajectory"], [Column("seeds", "seeds")] + cols)
        for k, seeds in sorted(g.items()):
            row: dict[str, Value] = {"seeds": ", ".join(str(x) for x in sorted(seeds))}
            for c in cols:
                per_seed, units = [], []
                for sd, its in sorted(seeds.items()):
                    us = [u for it in its if (u := s.value_unit(it, c.key)) is not None]
                    if us:
                        per_seed.append(float(np.mean([u.value for u in us])))
                        units += [Unit(u.value, u.terms, f"seed={sd}") for u in us]
                if per_seed:
                    cell = Cell(float(np.mean(per_seed)), float(np.min(per_seed)), float(np.max(per_seed)),
                                len(per_seed), units, kind="spread",
                                sd=float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else 0.0)
                else:
                    cell = Cell(reason=s.reason([i for its in seeds.values() for i in its], c.key), kind="spread")
                row[c.key] = cell
            t.rows.append((k, row))
        return t

    # -- comparisons ------------------------------------------------------------------------------------------------
    def _policy_comparisons(self) -> tuple[list[Comparison], list[str]]:
        """The comparisons of context policies, and the metric keys (in the study's order) any of them has."""
        pols = [c for c in self.an.comparisons if c.kind == "policies"]
        return pols, [k for k in self.study.keys if any(k in c.metrics for c in pols)]

    def context_table(self) -> Table:
        s = self.study
        pols, keys = self._policy_comparisons()
        keys = self._separating_first(keys, "policies")
        n_sep = len({x.key for x in self.an.verdict.lines if x.comparison.kind == "policies"} & set(keys))
        t = Table("context", "Context policies with latency and speedup (paper Table 3)",
                  "Per model run under several KV-context policies, on the matched items (same trajectory, case and "
                  "seed under every policy): mean with a 95 % bootstrap interval over matched videos and n; the "
                  "metrics that separate the policies first (the verdict's order). " + LATENCY_NOTE + " Speedup: "
                  "FullKV mean generation time / the policy's, paired bootstrap over matched videos. Paired "
                  "differences: the next table and the verdict.",
                  ["model", "context"], [Column("videos", "matched videos")]
                  + [metric_column(k) for k in keys[:n_sep]]
                  + [Column("latency_s", "generation time [s]", False), Column("speedup", "speedup vs FullKV", True)]
                  + [metric_column(k) for k in keys[n_sep:]], mark_best=True, fold=True,
                  separated=self._policies_separated, rank_within=1)
        for c in pols:
            for ctx in c.contenders:
                row: dict[str, Value] = {"videos": c.matched_videos, "latency_s": c.latency[ctx],
                                         "speedup": c.speedup.get(ctx) or Cell(
                                             reason="speedup: no FullKV run of this model to compare with")}
                for k in keys:
                    row[k] = c.metrics[k].means[ctx] if k in c.metrics else s.metric_cell(c.items(ctx), k)
                t.rows.append(((c.model, ctx), row))
        if not t.rows:
            t.notes.append("No model was run under two or more context policies on matched items.")
        return t

    def context_paired(self) -> Table:
        pols, keys = self._policy_comparisons()
        keys = self._separating_first(keys, "policies")
        t = Table("context_paired", "Paired policy differences (policy - FullKV, bounded policy - Sliding)",
                  "context - vs per matched item (same trajectory, case, seed), mean with a 95 % bootstrap interval "
                  "over matched items and n (no interval below 3 pairs). For ↓ metrics a negative difference is an "
                  "improvement.", ["model", "context", "vs"], [metric_column(k) for k in keys], fold=True)
        for c in pols:
            for a, b in c.pairs:
                t.rows.append(((c.model, a, b), {k: c.metrics[k].diffs[(a, b)] for k in keys if k in c.metrics}))
        return t

    # -- multi-revisit and cross-axis -------------------------------------------------------------------------------
    def multi_revisit_table(self) -> Table:
        s = self.study
        series = self.an.multi_revisit
        K = max((len(x.per_window) for x in series), default=3)
        cols = [Column("windows", "windows")] + [Column(f"w{k + 1}", f"window {k + 1}") for k in range(K)] + [
            Column("decay", "first - last (all)"), Column("decay_q", "first - last (qualified)")]
        t = Table("multi_revisit", "Multi-revisit decay and the qualified subset (paper Fig. 5, Table 12a)",
                  "Per model, context, trajectory and metric: the mean score in each of the metric's own revisit "
                  "windows (named in 'windows' after the trajectory's phases: R<k> = k-th return, D<k> = k-th "
                  "departure) over videos (95 % bootstrap interval, n videos), the per-video decrease first - last "
                  "window, and the same decrease on the fixed subset of videos whose every window qualifies "
                  f"(environment: departure >= {s.dep:g} deg and return error <= {s.tol:g} deg; entities: every "
                  "target tracked away and back). For ↓ metrics (RPE) a negative decrease is a degradation.",
                  ["model", "context", "trajectory", "metric"], cols)
        for x in series:
            row: dict[str, Value] = {"windows": ", ".join(x.labels)}
            for k in range(K):
                row[f"w{k + 1}"] = mean_cell(x.per_window[k], s.boot) if k < len(x.per_window) else \
                    Cell(reason=f"{x.key} has {len(x.per_window)} windows on {x.trajectory}")
            row["decay"] = mean_cell(x.decay, s.boot)
            row["decay_q"] = mean_cell(x.decay_q, s.boot, "no video with every window qualified")
            t.rows.append((x.group, row))
        return t

    def cross_axis_table(self) -> Table:
        s = self.study
        t = Table("cross_axis", "Cross-axis excess degradation (paper Tables 9, 10, 12b)",
                  "d = R1 - R2 per video; Δ_axis = d_LRUD - d_LRLR per matched (case, seed) pair; means with a 95 % "
                  "bootstrap interval over pairs and n pairs. Qualified: pairs whose both revisits of both "
                  "trajectories qualify (as in the multi-revisit table). Positive Δ_axis: more degradation after "
                  "switching from yaw to pitch.",
                  ["model", "context", "metric"],
                  [Column("d_lrlr", "d_LRLR"), Column("d_lrud", "d_LRUD"), Column("delta", "Δ_axis (all)"),
                   Column("delta_q", "Δ_axis (qualified)")])
        for x in self.an.cross_axis:
            t.rows.append(((x.model, x.context, x.key), {
                "d_lrlr": mean_cell(x.d_lrlr, s.boot), "d_lrud": mean_cell(x.d_lrud, s.boot),
                "delta": mean_cell(x.delta, s.boot), "delta_q": mean_cell(x.delta_q, s.boot, "no qualified pair")}))
        if not t.rows:
            t.notes.append("No model has matched LRLR and LRUD videos of the same case and seed in these runs "
                           "(run trajectories=[lrlr,lrud]).")
        return t

    def coverage_table(self) -> Table:
        """Departure / return coverage of the revisit slots (paper Table 11)."""
        s = self.study
        tols = tolerances(s)
        t = Table("coverage", "Departure and return coverage (paper Table 11)",
                  f"Share of revisit slots (video x prescribed revisit): D = departure >= {s.dep:g} deg, "
                  f"Q<tol> = departure >= {s.dep:g} deg and return error <= tol (environment, from the return-frame "
                  "pose estimate); tracking = every target tracked away and back (entities). n = slots.",
                  ["model", "context", "trajectory"],
                  [Column("D", "D")] + [Column(f"Q{x:g}", f"Q{x:g}") for x in tols] + [Column("tracking", "tracking")])
        for cov in self.an.coverage:
            row: dict[str, Value] = {}
            for c in t.columns:
                us = cov.slots.get(c.key, [])
                row[c.key] = _rate(mean_cell(us, s.boot)) if us else \
                    Cell(reason=f"{c.key}: no {'entity target' if c.key == 'tracking' else 'environment return'} "
                                "slot in this group")
            t.rows.append(((cov.model, cov.context, cov.trajectory), row))
        return t

    def dynamic_table(self) -> Table:
        """Event-gated decomposition (paper Table 5): p_start, S_cond, S_gated = p_start * S_cond."""
        s = self.study
        t = Table("dynamic", "Dynamic memory decomposition (paper Table 5)",
                  "Per model and context over its dynamic-case videos: Started (judge-positive event-start "
                  "decisions), p_start = Started / videos, S_cond = mean gated Overall over started videos, "
                  "S_gated = mean gated Overall over all videos (= p_start x S_cond). Intervals: bootstrap over videos.",
                  ["model", "context", "metric"], [Column("videos", "videos"), Column("started", "Started"),
                                                   Column("p_start", "p_start"), Column("s_cond", "S_cond"),
                                                   Column("s_gated", "S_gated")])
        g: dict[tuple[str, str, str], list[Item]] = defaultdict(list)
        for it in s.items:
            for key, m in it.metrics.items():
                if m.metric == "dynamic.overall":
                    g[(it.model, it.context, key)].append(it)
        for (model, ctx, key), its in sorted(g.items()):
            comp = [it for it in its if it.metrics[key].is_computed and "started" in it.metrics[key].details]
            row: dict[str, Value] = {"videos": len(its)}
            if not comp:
                why = s.reason(its, key)
                if any(it.metrics[key].is_computed for it in its):
                    why = f"{key}: computed without the event-start decision ('started'), so it cannot be decomposed"
                for c in ("started", "p_start", "s_cond", "s_gated"):
                    row[c] = Cell(reason=why)
            else:
                st = [Unit(float(bool(it.metrics[key].get("started"))), [s.term(it, key, "started")]) for it in comp]
                row["started"] = count_cell(sum(u.value for u in st), st)
                row["p_start"] = mean_cell(st, s.boot)
                row["s_cond"] = mean_cell([s.value_unit(it, key) for it in comp if it.metrics[key].get("started")],
                                          s.boot, "no started video")
                row["s_gated"] = mean_cell([s.value_unit(it, key) for it in comp], s.boot)
            t.rows.append(((model, ctx, key), row))
        if not t.rows:
            t.notes.append("No dynamic-family case in these runs.")
        return t

    def all_tables(self) -> list[Table]:
        """In page order: the answer first (main, variants, the policy comparison), then the analyses."""
        return [self.main_table(), self.variants_table(), self.context_table(), self.context_paired(),
                *self.trajectory_tables(), self.multi_revisit_table(), self.cross_axis_table(), self.coverage_table(),
                self.dynamic_table(), self.group_summary(), self.seed_spread()]
