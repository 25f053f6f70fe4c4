"""Paper-shaped tables built from evaluated items, each cell a :class:`~evaluate.reporting.cells.Cell`.

Every table states what its cells average over. Units are videos unless a table says otherwise (cross-axis: a
(case, seed) pair of an LRLR and an LRUD video; paired policy differences: a matched item under two policies).
Columns are ``metric[backbone]`` keys: a harness never merges two backbones into one number.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

import numpy as np

from evaluate.catalog import METRICS

from .cells import Cell, Term, Unit, count_cell, mean_cell, ratio_cell
from .collect import Item, per_revisit

#: the paper's column order (Table 2), then this harness's diagnostics
PAPER_ORDER = ["quality.imaging", "quality.aesthetic", "human.identity", "human.appearance", "object.appearance",
               "object.geometry", "environment.visible", "environment.depth", "environment.reconstruction",
               "dynamic.overall", "camera.rpe_trans", "camera.rpe_rot"]

Value = Union[Cell, str, float, int, None]


@dataclass
class Column:
    key: str
    label: str
    higher_is_better: Optional[bool] = None  # None: not ranked

    @property
    def arrow(self) -> str:
        return "" if self.higher_is_better is None else (" ↑" if self.higher_is_better else " ↓")


@dataclass
class Table:
    """``rows``: (row key values matching ``index``, {column key: value}). ``mark_best`` ranks Cell columns with a
    direction: best and second best per column (bold / underlined in LaTeX, bold / italic in Markdown)."""

    id: str
    title: str
    caption: str
    index: list[str]
    columns: list[Column]
    rows: list[tuple[tuple, dict[str, Value]]] = field(default_factory=list)
    mark_best: bool = False
    notes: list[str] = field(default_factory=list)

    def ranks(self) -> dict[tuple[int, str], int]:
        """(row number, column key) -> 1 (best) or 2 (second best), for columns with a direction."""
        out: dict[tuple[int, str], int] = {}
        if not self.mark_best:
            return out
        for c in self.columns:
            if c.higher_is_better is None:
                continue
            vals = [(i, v.mean) for i, (_, cells) in enumerate(self.rows)
                    if isinstance(v := cells.get(c.key), Cell) and v.ok() and v.kind == "mean"]
            if len(vals) < 2:
                continue
            distinct = sorted({round(m, 12) for _, m in vals}, reverse=c.higher_is_better)
            if len(distinct) < 2:
                continue  # all equal: nothing to mark
            for i, m in vals:
                r = distinct.index(round(m, 12)) + 1
                if r <= 2:
                    out[(i, c.key)] = r
        return out

    def footnotes(self) -> dict[str, int]:
        """Reason text -> footnote number, in order of first appearance."""
        out: dict[str, int] = {}
        for _, cells in self.rows:
            for c in self.columns:
                v = cells.get(c.key)
                if isinstance(v, Cell) and not v.ok() and v.reason:
                    out.setdefault(v.reason, len(out) + 1)
        return out


def metric_order(key: str) -> tuple:
    mid = key.split("[")[0]
    return (PAPER_ORDER.index(mid) if mid in PAPER_ORDER else len(PAPER_ORDER), mid, key)


def metric_columns(items: Iterable[Item], computed_only: bool = False) -> list[Column]:
    keys = {k for it in items for k, m in it.metrics.items() if not computed_only or m.get("status") == "computed"}
    return [Column(k, k, METRICS[k.split("[")[0]].higher_is_better if k.split("[")[0] in METRICS else None)
            for k in sorted(keys, key=metric_order)]


def _rate(c: Cell) -> Cell:
    c.kind = "rate"
    return c


class Builder:
    """Builds every table of a report from ``items``; ``rel(path)`` makes a metrics.json path relative to the
    report folder (the provenance records it)."""

    def __init__(self, items: list[Item], boot: dict, rel: Callable[[Path], str], main_context: str = "fullkv",
                 departure_deg: float = 30.0, tolerance_deg: float = 30.0):
        self.items = items
        self.boot = boot
        self.rel = rel
        self.main_context = main_context
        self.dep = departure_deg
        self.tol = tolerance_deg
        self.columns = metric_columns(items)

    # -- helpers --------------------------------------------------------------------------------------------------
    def term(self, it: Item, key: Optional[str], fld: str, coef: float = 1.0) -> Term:
        return Term(self.rel(it.metrics_path), key, fld, coef)

    def value_unit(self, it: Item, key: str) -> Optional[Unit]:
        m = it.metrics.get(key)
        if m is None or m.get("status") != "computed":
            return None
        return Unit(float(m["value"]), [self.term(it, key, "value")])

    def reason(self, items: list[Item], key: str) -> str:
        """Why a group has no value for ``key``: the recorded not-computed reason, or that no item has it."""
        for it in items:
            m = it.metrics.get(key)
            if m is not None and m.get("status") != "computed":
                return f"{key}: not computed: {m.get('reason', 'no reason recorded')}"
        fams = sorted({it.result.get("case_family", "?") for it in items})
        return f"{key}: no video of this group has this metric (case families here: {', '.join(fams) or 'none'})"

    def metric_cell(self, items: list[Item], key: str) -> Cell:
        units = [u for it in items if (u := self.value_unit(it, key)) is not None]
        return mean_cell(units, self.boot, self.reason(items, key))

    def main_items(self) -> dict[str, tuple[str, list[Item]]]:
        """Per model: (the context of its main-table row, its items). FullKV (``main_context``) where run, else the
        model's first context by name."""
        by: dict[str, dict[str, list[Item]]] = defaultdict(lambda: defaultdict(list))
        for it in self.items:
            by[it.model][it.context].append(it)
        out = {}
        for model, ctxs in sorted(by.items()):
            ctx = self.main_context if self.main_context in ctxs else sorted(ctxs)[0]
            out[model] = (ctx, ctxs[ctx])
        return out

    def _model_table(self, tid: str, title: str, caption: str, groups: dict[str, tuple[str, list[Item]]]) -> Table:
        t = Table(tid, title, caption, ["model", "context"], list(self.columns), mark_best=True)
        for model, (ctx, its) in groups.items():
            t.rows.append(((model, ctx), {c.key: self.metric_cell(its, c.key) for c in self.columns}
                           | {"videos": len(its)}))
        t.columns = [Column("videos", "videos")] + t.columns
        return t

    # -- tables ---------------------------------------------------------------------------------------------------
    def main_table(self) -> Table:
        return self._model_table(
            "main", "Main results (model x metric; paper Table 2)",
            f"Per model at its main context ({self.main_context} where run, else its first): mean over its videos "
            "(cases x trajectories x seeds pooled) with a 95 % bootstrap interval over videos and n videos. "
            "↑/↓: higher/lower is better. Best and second best per metric are marked where two or more models have "
            "a value.", self.main_items())

    def trajectory_tables(self) -> list[Table]:
        """Per trajectory, as the main table; a model not run on it under its main context uses its first context
        (by name) that was, and the row says which."""
        out = []
        by: dict[tuple, dict[str, list[Item]]] = defaultdict(lambda: defaultdict(list))
        for it in self.items:
            by[(it.model, it.trajectory)][it.context].append(it)
        for traj in sorted({it.trajectory for it in self.items}):
            groups = {}
            for (model, t), ctxs in sorted(by.items()):
                if t == traj:
                    ctx = self.main_context if self.main_context in ctxs else sorted(ctxs)[0]
                    groups[model] = (ctx, ctxs[ctx])
            out.append(self._model_table(
                f"trajectory_{traj}", f"Per-trajectory results: {traj.upper()} (paper Table 8)",
                f"As the main table, on trajectory {traj} only (cases x seeds pooled). Context: "
                f"{self.main_context} where the model was run on {traj} with it, else its first context that was.",
                groups))
        return out

    def group_summary(self) -> Table:
        """Rows model x context x trajectory x seed; n per cell."""
        g: dict[tuple, list[Item]] = defaultdict(list)
        for it in self.items:
            g[(it.model, it.context, it.trajectory, it.seed)].append(it)
        cols = [c for c in self.columns if any(it.metrics.get(c.key, {}).get("status") == "computed"
                                               for it in self.items)]
        t = Table("groups", "Group summary (model x context x trajectory x seed)",
                  "Mean over the cases of each group, 95 % bootstrap interval over cases, n cases per cell. Metrics "
                  "never computed in these runs are left out here (see the main table's footnotes).",
                  ["model", "context", "trajectory", "seed"], [Column("videos", "videos")] + cols)
        for k, its in sorted(g.items()):
            t.rows.append((k, {c.key: self.metric_cell(its, c.key) for c in cols} | {"videos": len(its)}))
        return t

    def seed_spread(self) -> Table:
        """Per model x context x trajectory and metric: the per-seed means, their mean, SD and range."""
        g: dict[tuple, dict[int, list[Item]]] = defaultdict(lambda: defaultdict(list))
        for it in self.items:
            g[(it.model, it.context, it.trajectory)][it.seed].append(it)
        cols = [c for c in self.columns if any(it.metrics.get(c.key, {}).get("status") == "computed"
                                               for it in self.items)]
        t = Table("seed_spread", "Seed-to-seed spread",
                  "Per group: the mean of each seed's mean over cases, ± the SD across seeds, the range "
                  "[lowest, highest seed mean] and the number of seeds (n). One seed: no spread (SD 0).",
                  ["model", "context", "trajectory"], [Column("seeds", "seeds")] + cols)
        for k, seeds in sorted(g.items()):
            row: dict[str, Value] = {"seeds": ", ".join(str(s) for s in sorted(seeds))}
            for c in cols:
                per_seed, units = [], []
                for s, its in sorted(seeds.items()):
                    us = [u for it in its if (u := self.value_unit(it, c.key)) is not None]
                    if us:
                        per_seed.append(float(np.mean([u.value for u in us])))
                        units += [Unit(u.value, u.terms, f"seed={s}") for u in us]
                if per_seed:
                    cell = Cell(float(np.mean(per_seed)), float(np.min(per_seed)), float(np.max(per_seed)),
                                len(per_seed), units, kind="spread",
                                sd=float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else 0.0)
                else:
                    cell = Cell(reason=self.reason([i for its in seeds.values() for i in its], c.key), kind="spread")
                row[c.key] = cell
            t.rows.append((k, row))
        return t

    def matched_contexts(self) -> dict[str, tuple[list[str], dict[str, dict[tuple, Item]]]]:
        """Per model run under >= 2 contexts: the contexts and, per context, its items on the matched keys
        (trajectory, case, seed) present under every context."""
        by: dict[str, dict[str, dict[tuple, Item]]] = defaultdict(lambda: defaultdict(dict))
        for it in self.items:
            by[it.model][it.context][(it.trajectory, it.case_id, it.seed)] = it
        out = {}
        for model, ctxs in sorted(by.items()):
            if len(ctxs) < 2:
                continue
            common = set.intersection(*[set(v) for v in ctxs.values()])
            if common:
                order = sorted(ctxs, key=lambda c: (c != "fullkv", c))
                out[model] = (order, {c: {k: ctxs[c][k] for k in sorted(common)} for c in order})
        return out

    def context_table(self) -> Table:
        t = Table("context", "Context policies with latency and speedup (paper Table 3)",
                  "Per model run under several KV-context policies, on the matched items (same trajectory, case and "
                  "seed under every policy): mean with a 95 % bootstrap interval over matched videos and n. Latency: "
                  "generation time per video [s] (generate_s in meta.json timings). Speedup: FullKV mean latency / "
                  "the policy's mean latency, paired bootstrap over matched videos.",
                  ["model", "context"], [Column("videos", "matched videos"), Column("latency_s", "latency [s]", False),
                                         Column("speedup", "speedup vs FullKV", True)] + list(self.columns),
                  mark_best=True)
        matched = self.matched_contexts()
        present = {k for _, per in matched.values() for its in per.values() for it in its.values() for k in it.metrics}
        t.columns = t.columns[:3] + [c for c in t.columns[3:] if c.key in present]  # metrics of the matched items
        for model, (ctxs, per) in matched.items():
            for ctx in ctxs:
                its = list(per[ctx].values())
                lat = [Unit(it.latency_s(), [self.term(it, None, "timings_generation.generate_s")]) for it in its]
                row: dict[str, Value] = {"videos": len(its), "latency_s": mean_cell(lat, self.boot, "no timing")}
                if "fullkv" in per:
                    ref = [Unit(it.latency_s(), [self.term(it, None, "timings_generation.generate_s")])
                           for it in per["fullkv"].values()]
                    row["speedup"] = ratio_cell(lat, ref, self.boot)
                else:
                    row["speedup"] = Cell(reason="speedup: no FullKV run of this model to compare with")
                for c in self.columns:
                    row[c.key] = self.metric_cell(its, c.key)
                t.rows.append(((model, ctx), row))
        if not t.rows:
            t.notes.append("No model was run under two or more context policies on matched items.")
        return t

    def context_paired(self) -> Table:
        cols = [c for c in self.columns if any(it.metrics.get(c.key, {}).get("status") == "computed"
                                               for it in self.items)]
        t = Table("context_paired", "Paired policy differences vs FullKV",
                  "policy - FullKV per matched item (same trajectory, case, seed), mean with a 95 % bootstrap "
                  "interval over matched items and n. For ↓ metrics a negative difference is an improvement.",
                  ["model", "context"], cols)
        for model, (ctxs, per) in self.matched_contexts().items():
            if "fullkv" not in per:
                continue
            for ctx in ctxs:
                if ctx == "fullkv":
                    continue
                row: dict[str, Value] = {}
                for c in cols:
                    units = []
                    for k, it in per[ctx].items():
                        a, b = self.value_unit(it, c.key), self.value_unit(per["fullkv"][k], c.key)
                        if a and b:
                            units.append(Unit(a.value - b.value, [a.terms[0], Term(b.terms[0].file, c.key, "value",
                                                                                   -1.0)]))
                    row[c.key] = mean_cell(units, self.boot, self.reason(list(per[ctx].values()), c.key))
                t.rows.append(((model, ctx), row))
        return t

    # -- multi-revisit and cross-axis -------------------------------------------------------------------------------
    def qualified(self, m: dict, k: int) -> bool:
        from evaluate.analyses import _qualified, _tracked

        return _qualified(m, k, self.dep, self.tol) or _tracked(m, k)

    def revisit_units(self, its: list[Item], key: str) -> tuple[list[list[Unit]], list[Unit], list[Unit], int]:
        """Per revisit k: units of the score at R_k; units of R1 - RK (all, and the fixed qualified subset whose
        every revisit qualifies); K."""
        K = max((it.num_revisits for it in its), default=0)
        per_k: list[list[Unit]] = [[] for _ in range(K)]
        dec, dec_q = [], []
        for it in its:
            m = it.metrics.get(key)
            pr = per_revisit(m) if m else None
            if not pr or len(pr) < 2:
                continue
            for k, v in enumerate(pr[:K]):
                per_k[k].append(Unit(float(v), [self.term(it, key, f"per_revisit[{k}]")]))
            last = len(pr) - 1
            u = Unit(float(pr[0] - pr[last]), [self.term(it, key, "per_revisit[0]"),
                                               self.term(it, key, f"per_revisit[{last}]", -1.0)])
            dec.append(u)
            if all(self.qualified(m, k) for k in range(len(pr))):
                dec_q.append(u)
        return per_k, dec, dec_q, K

    def multi_revisit_groups(self) -> dict[tuple, tuple[list[list[Unit]], list[Unit], list[Unit], int]]:
        g: dict[tuple, list[Item]] = defaultdict(list)
        for it in self.items:
            if it.num_revisits >= 2:
                g[(it.model, it.context, it.trajectory)].append(it)
        out = {}
        for (model, ctx, traj), its in sorted(g.items()):
            for c in self.columns:
                r = self.revisit_units(its, c.key)
                if r[1]:
                    out[(model, ctx, traj, c.key)] = r
        return out

    def multi_revisit_table(self) -> Table:
        groups = self.multi_revisit_groups()
        K = max((g[3] for g in groups.values()), default=3)
        cols = [Column(f"R{k + 1}", f"R{k + 1}") for k in range(K)] + [
            Column("decay", "R1 - RK (all)"), Column("decay_q", "R1 - RK (qualified)")]
        t = Table("multi_revisit", "Multi-revisit decay and the qualified subset (paper Fig. 5, Table 12a)",
                  "Per model, context, trajectory and metric: the mean score at each revisit R1..RK over videos "
                  "(95 % bootstrap interval, n videos), the per-video decrease R1 - RK, and the same decrease on the "
                  f"fixed subset of videos whose every revisit qualifies (environment: departure >= {self.dep:g} deg "
                  f"and return error <= {self.tol:g} deg; entities: every target tracked away and back). For ↓ "
                  "metrics (RPE) a negative decrease is a degradation.",
                  ["model", "context", "trajectory", "metric"], cols)
        for (model, ctx, traj, key), (per_k, dec, dec_q, Kg) in groups.items():
            row: dict[str, Value] = {}
            for k in range(K):
                row[f"R{k + 1}"] = mean_cell(per_k[k], self.boot) if k < Kg else \
                    Cell(reason=f"trajectory {traj} has {Kg} revisits")
            row["decay"] = mean_cell(dec, self.boot)
            row["decay_q"] = mean_cell(dec_q, self.boot, "no video with every revisit qualified")
            t.rows.append(((model, ctx, traj, key), row))
        return t

    def cross_axis_units(self, its: list[Item], key: str) -> tuple[list[Unit], list[Unit], list[Unit], list[Unit]]:
        """Units per matched (case, seed): d_LRLR, d_LRUD, Δ_axis = d_LRUD - d_LRLR, and Δ_axis on the pairs whose
        both revisits of both trajectories qualify."""
        per: dict[str, dict[tuple, Item]] = defaultdict(dict)
        for it in its:
            if it.trajectory in ("lrlr", "lrud"):
                per[it.trajectory][(it.case_id, it.seed)] = it
        d = {"lrlr": [], "lrud": []}
        delta, delta_q = [], []
        for ck in sorted(set(per["lrlr"]) & set(per["lrud"])):
            parts = {}
            for traj in ("lrlr", "lrud"):
                it = per[traj][ck]
                m = it.metrics.get(key)
                pr = per_revisit(m) if m else None
                if not pr or len(pr) < 2:
                    break
                parts[traj] = (it, m, pr)
            if len(parts) < 2:
                continue
            terms = {}
            for traj, (it, m, pr) in parts.items():
                terms[traj] = [self.term(it, key, "per_revisit[0]"), self.term(it, key, "per_revisit[1]", -1.0)]
                d[traj].append(Unit(float(pr[0] - pr[1]), terms[traj]))
            flip = [Term(t.file, t.key, t.field, -t.coef) for t in terms["lrlr"]]
            u = Unit(d["lrud"][-1].value - d["lrlr"][-1].value, terms["lrud"] + flip)
            delta.append(u)
            if all(self.qualified(m, k) for (_, m, _) in parts.values() for k in (0, 1)):
                delta_q.append(u)
        return d["lrlr"], d["lrud"], delta, delta_q

    def cross_axis_groups(self) -> dict[tuple, tuple[list[Unit], list[Unit], list[Unit], list[Unit]]]:
        g: dict[tuple, list[Item]] = defaultdict(list)
        for it in self.items:
            g[(it.model, it.context)].append(it)
        out = {}
        for (model, ctx), its in sorted(g.items()):
            for c in self.columns:
                r = self.cross_axis_units(its, c.key)
                if r[2]:
                    out[(model, ctx, c.key)] = r
        return out

    def cross_axis_table(self) -> Table:
        t = Table("cross_axis", "Cross-axis excess degradation (paper Tables 9, 10, 12b)",
                  "d = R1 - R2 per video; Δ_axis = d_LRUD - d_LRLR per matched (case, seed) pair; means with a 95 % "
                  "bootstrap interval over pairs and n pairs. Qualified: pairs whose both revisits of both "
                  "trajectories qualify (as in the multi-revisit table). Positive Δ_axis: more degradation after "
                  "switching from yaw to pitch.",
                  ["model", "context", "metric"],
                  [Column("d_lrlr", "d_LRLR"), Column("d_lrud", "d_LRUD"), Column("delta", "Δ_axis (all)"),
                   Column("delta_q", "Δ_axis (qualified)")])
        for (model, ctx, key), (a, b, dl, dq) in self.cross_axis_groups().items():
            t.rows.append(((model, ctx, key), {"d_lrlr": mean_cell(a, self.boot), "d_lrud": mean_cell(b, self.boot),
                                               "delta": mean_cell(dl, self.boot),
                                               "delta_q": mean_cell(dq, self.boot, "no qualified pair")}))
        if not t.rows:
            t.notes.append("No model has matched LRLR and LRUD videos of the same case and seed in these runs "
                           "(run trajectories=[lrlr,lrud]).")
        return t

    def coverage_table(self) -> Table:
        """Departure / return coverage of the revisit slots (paper Table 11)."""
        from evaluate.analyses import _tracked

        t = Table("coverage", "Departure and return coverage (paper Table 11)",
                  f"Share of revisit slots (video x prescribed revisit): D = departure >= {self.dep:g} deg, "
                  f"Q<tol> = departure >= {self.dep:g} deg and return error <= tol (environment, from the return-frame "
                  "pose estimate); tracking = every target tracked away and back (entities). n = slots.",
                  ["model", "context", "trajectory"], [])
        tols = sorted({float(x) for it in self.items for x in it.result.get("settings", {}).get(
            "return_tolerances_deg", [self.tol])}, reverse=True)
        t.columns = [Column("D", "D")] + [Column(f"Q{int(x)}", f"Q{int(x)}") for x in tols] + [
            Column("tracking", "tracking")]
        g: dict[tuple, list[Item]] = defaultdict(list)
        for it in self.items:
            g[(it.model, it.context, it.trajectory)].append(it)
        for k, its in sorted(g.items()):
            acc: dict[str, list[Unit]] = defaultdict(list)
            for it in its:
                env = next(((key, m) for key, m in it.computed().items() if m.get("qualification")), None)
                if env:
                    key, m = env
                    for r, q in enumerate(m["qualification"]):
                        acc["D"].append(Unit(float(q["departure_deg"] >= self.dep),
                                             [self.term(it, key, f"departed[{r}]@{self.dep:g}")]))
                        for x in tols:
                            ok = q["departure_deg"] >= self.dep and q["return_error_deg"] <= x
                            acc[f"Q{int(x)}"].append(Unit(float(ok), [self.term(it, key,
                                                                                f"returned[{r}]@{self.dep:g},{x:g}")]))
                ent = next(((key, m) for key, m in it.computed().items() if m.get("tracking_evidence")), None)
                if ent:
                    key, m = ent
                    for r in range(it.num_revisits):
                        acc["tracking"].append(Unit(float(_tracked(m, r)), [self.term(it, key, f"tracked[{r}]")]))
            row: dict[str, Value] = {}
            for c in t.columns:
                us = acc.get(c.key, [])
                row[c.key] = _rate(mean_cell(us, self.boot)) if us else \
                    Cell(reason=f"{c.key}: no {'entity target' if c.key == 'tracking' else 'environment return'} "
                                "slot in this group")
            t.rows.append((k, row))
        return t

    def dynamic_table(self) -> Table:
        """Event-gated decomposition (paper Table 5): p_start, S_cond, S_gated = p_start * S_cond."""
        t = Table("dynamic", "Dynamic memory decomposition (paper Table 5)",
                  "Per model and context over its dynamic-case videos: Started (judge-positive event-start "
                  "decisions), p_start = Started / videos, S_cond = mean gated Overall over started videos, "
                  "S_gated = mean gated Overall over all videos (= p_start x S_cond). Intervals: bootstrap over videos.",
                  ["model", "context", "metric"], [Column("videos", "videos"), Column("started", "Started"),
                                                   Column("p_start", "p_start"), Column("s_cond", "S_cond"),
                                                   Column("s_gated", "S_gated")])
        g: dict[tuple, list[Item]] = defaultdict(list)
        for it in self.items:
            for key, m in it.metrics.items():
                if key.startswith("dynamic.overall"):
                    g[(it.model, it.context, key)].append(it)
        for (model, ctx, key), its in sorted(g.items()):
            comp = [it for it in its if it.metrics[key].get("status") == "computed" and "started" in it.metrics[key]]
            row: dict[str, Value] = {"videos": len(its)}
            if not comp:
                why = self.reason(its, key)
                if any(it.metrics[key].get("status") == "computed" for it in its):
                    why = f"{key}: computed without the event-start decision ('started'), so it cannot be decomposed"
                for c in ("started", "p_start", "s_cond", "s_gated"):
                    row[c] = Cell(reason=why)
            else:
                st = [Unit(float(bool(it.metrics[key]["started"])), [self.term(it, key, "started")]) for it in comp]
                row["started"] = count_cell(sum(u.value for u in st), st)
                row["p_start"] = mean_cell(st, self.boot)
                row["s_cond"] = mean_cell([self.value_unit(it, key) for it in comp if it.metrics[key]["started"]],
                                          self.boot, "no started video")
                row["s_gated"] = mean_cell([self.value_unit(it, key) for it in comp], self.boot)
            t.rows.append(((model, ctx, key), row))
        if not t.rows:
            t.notes.append("No dynamic-family case in these runs.")
        return t

    def all_tables(self) -> list[Table]:
        return [self.main_table(), self.context_table(), self.context_paired(), *self.trajectory_tables(),
                self.multi_revisit_table(), self.cross_axis_table(), self.coverage_table(), self.dynamic_table(),
                self.group_summary(), self.seed_spread()]
