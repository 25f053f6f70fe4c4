"""The analyses of a study, computed once (:class:`Analyses`) and read by everything that shows them: the report's
tables and figures, its verdict, the run's ``analyses.{md,json}`` and the console summary.

* multi-revisit decay (paper Fig. 5, Table 12a): per model, context, trajectory and metric the score in each of the
  metric's own revisit windows (their labels from the item's phases: ``R1, R2`` for a return metric,
  ``R1, D2, R2`` for a departure sweep) and the decrease first - last window, on all videos and on the fixed
  qualified subset;
* cross-axis excess degradation (Tables 9, 10, 12b): Δ_axis = d_LRUD - d_LRLR, d = R1 - R2, per matched (case,
  seed) pair of one model and context;
* departure / return coverage (Table 11) per model, context and trajectory;
* comparisons on matched videos (Table 3, appendix H, and across models): per contender (a policy of one model, or
  a model at its main context) each metric's mean, the paired difference of every pair of contenders (policy -
  FullKV, bounded policy - Sliding, model - model), latency and speedup vs FullKV;
* the verdict: per metric whose paired interval separates two contenders, who is best, by how much, at what speed.

Every number is a :class:`~evaluate.reporting.cells.Cell` over units that trace back to ``metrics.json``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

from trajectories.phases import phase_at

from ..catalog import chance_level, direction, is_table2_key, resolution
from ..results import MetricEntry
from .cells import Cell, Term, Unit, has_interval, mean_cell, plural, ratio_cell
from .collect import Item
from .qualification import departed, qualified, returned, tracked
from .study import MatchKey, Study

# -- windows ------------------------------------------------------------------------------------------------------


def window_labels(it: Item, m: MetricEntry) -> list[str]:
    """The labels of an entry's revisit windows, from the frames it recorded and the item's phases: the phase of
    each window's first frame (``revisit_frames``) or of each return frame (``return_frames``); ``R<k>`` where
    nothing is recorded."""
    pr = m.per_revisit or []
    frames = m.get("revisit_frames")
    if frames is not None:
        firsts = [w[0] if w else None for w in frames]
    else:
        firsts = list(m.get("return_frames") or [])
    labels = [phase_at(it.phases, int(f)) if f is not None else None for f in firsts]
    if len(labels) != len(pr):
        labels = [None] * len(pr)
    return [lab or f"R{k + 1}" for k, lab in enumerate(labels)]


# -- multi-revisit --------------------------------------------------------------------------------------------------


@dataclass
class RevisitSeries:
    """One (model, context, trajectory, metric): units of the score per window, of first - last window (all videos
    and the fixed subset whose every window qualifies)."""

    model: str
    context: str
    trajectory: str
    key: str
    labels: list[str]
    per_window: list[list[Unit]]
    decay: list[Unit]
    decay_q: list[Unit]

    @property
    def group(self) -> tuple[str, str, str, str]:
        return self.model, self.context, self.trajectory, self.key


def revisit_units(study: Study, its: list[Item], key: str) -> tuple[list[str], list[list[Unit]], list[Unit],
                                                                      list[Unit]]:
    """(window labels, units per window, units of first - last window, the same on the qualified subset) of
    ``key`` over ``its`` (videos with at least two windows)."""
    labels: list[str] = []
    per_w: list[list[Unit]] = []
    dec, dec_q = [], []
    for it in its:
        m = it.entry(key)
        if m is None or not m.per_revisit or len(m.per_revisit) < 2:
            continue
        pr = m.per_revisit
        if len(pr) > len(labels):
            labels = window_labels(it, m)
            per_w += [[] for _ in range(len(pr) - len(per_w))]
        for k, v in enumerate(pr):
            per_w[k].append(Unit(float(v), [study.term(it, key, f"per_revisit[{k}]")]))
        last = len(pr) - 1
        u = Unit(float(pr[0] - pr[last]), [study.term(it, key, "per_revisit[0]"),
                                           study.term(it, key, f"per_revisit[{last}]", -1.0)])
        dec.append(u)
        if all(qualified(m, k, study.dep, study.tol) for k in range(len(pr))):
            dec_q.append(u)
    return labels, per_w, dec, dec_q


def multi_revisit(study: Study) -> list[RevisitSeries]:
    g: dict[tuple[str, str, str], list[Item]] = defaultdict(list)
    for it in study.items:
        g[(it.model, it.context, it.trajectory)].append(it)
    out = []
    for (model, ctx, traj), its in sorted(g.items()):
        for key in study.computed_keys:
            labels, per_w, dec, dec_q = revisit_units(study, its, key)
            if dec:
                out.append(RevisitSeries(model, ctx, traj, key, labels, per_w, dec, dec_q))
    return out


# -- cross-axis -----------------------------------------------------------------------------------------------------


@dataclass
class CrossAxis:
    """Units per matched (case, seed) pair of one model, context and metric: d_LRLR, d_LRUD, Δ_axis and Δ_axis on
    the pairs whose both revisits of both trajectories qualify."""

    model: str
    context: str
    key: str
    pairs: list[tuple[str, int]]
    qualified_pairs: list[tuple[str, int]]
    d_lrlr: list[Unit]
    d_lrud: list[Unit]
    delta: list[Unit]
    delta_q: list[Unit]


def cross_axis_units(study: Study, its: list[Item], key: str, model: str = "", context: str = "") -> CrossAxis:
    per: dict[str, dict[tuple[str, int], Item]] = defaultdict(dict)
    for it in its:
        if it.trajectory in ("lrlr", "lrud"):
            per[it.trajectory][(it.case_id, it.seed)] = it
    out = CrossAxis(model, context, key, [], [], [], [], [], [])
    for ck in sorted(set(per["lrlr"]) & set(per["lrud"])):
        parts: dict[str, tuple[Item, MetricEntry, list[float]]] = {}
        for traj in ("lrlr", "lrud"):
            it = per[traj][ck]
            m = it.entry(key)
            if m is None or not m.per_revisit or len(m.per_revisit) < 2:
                break
            parts[traj] = (it, m, m.per_revisit)
        if len(parts) < 2:
            continue
        terms, d = {}, {}
        for traj, (it, m, pr) in parts.items():
            terms[traj] = [study.term(it, key, "per_revisit[0]"), study.term(it, key, "per_revisit[1]", -1.0)]
            d[traj] = Unit(float(pr[0] - pr[1]), terms[traj])
        out.d_lrlr.append(d["lrlr"])
        out.d_lrud.append(d["lrud"])
        flip = [Term(t.file, t.key, t.field, -t.coef) for t in terms["lrlr"]]
        u = Unit(d["lrud"].value - d["lrlr"].value, terms["lrud"] + flip)
        out.pairs.append(ck)
        out.delta.append(u)
        if all(qualified(m, k, study.dep, study.tol) for (_, m, _) in parts.values() for k in (0, 1)):
            out.delta_q.append(u)
            out.qualified_pairs.append(ck)
    return out


def cross_axis(study: Study) -> list[CrossAxis]:
    g: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in study.items:
        g[(it.model, it.context)].append(it)
    out = []
    for (model, ctx), its in sorted(g.items()):
        for key in study.computed_keys:
            r = cross_axis_units(study, its, key, model, ctx)
            if r.delta:
                out.append(r)
    return out


# -- coverage -------------------------------------------------------------------------------------------------------


@dataclass
class Coverage:
    """Revisit slots of one (model, context, trajectory): ``slots[column]`` 0/1 units for D (departed), Q<tol>
    (departed and returned within tol) and tracking; ``pose_sources`` of the return-frame poses."""

    model: str
    context: str
    trajectory: str
    pose_sources: list[str]
    slots: dict[str, list[Unit]]


def tolerances(study: Study) -> list[float]:
    """The return tolerances recorded in the runs' settings, largest first."""
    return sorted({float(x) for it in study.items for x in it.settings.get("return_tolerances_deg", [study.tol])},
                  reverse=True)


def coverage(study: Study) -> list[Coverage]:
    tols = tolerances(study)
    g: dict[tuple[str, str, str], list[Item]] = defaultdict(list)
    for it in study.items:
        g[(it.model, it.context, it.trajectory)].append(it)
    out = []
    for (model, ctx, traj), its in sorted(g.items()):
        acc: dict[str, list[Unit]] = defaultdict(list)
        sources: set[str] = set()
        for it in its:
            comp = it.computed()
            # one environment entry and one entity entry per video: the slots are the video's revisits
            env = next(((k, m) for k, m in sorted(comp.items()) if m.get("qualification")), None)
            if env:
                key, m = env
                sources.add(m.source("pose") or str(m.get("return_pose_estimator") or "?"))
                for r in range(len(m.get("qualification"))):
                    acc["D"].append(Unit(float(departed(m, r, study.dep)),
                                         [study.term(it, key, f"departed[{r}]@{study.dep:g}")]))
                    for x in tols:
                        acc[f"Q{x:g}"].append(Unit(float(returned(m, r, study.dep, x)),
                                                   [study.term(it, key, f"returned[{r}]@{study.dep:g},{x:g}")]))
            ent = next(((k, m) for k, m in sorted(comp.items()) if m.get("tracking_evidence")), None)
            if ent:
                key, m = ent
                for r in range(it.num_revisits):
                    acc["tracking"].append(Unit(float(tracked(m, r)), [study.term(it, key, f"tracked[{r}]")]))
        out.append(Coverage(model, ctx, traj, sorted(sources), dict(acc)))
    return out


# -- comparisons on matched videos ----------------------------------------------------------------------------------


@dataclass
class MetricComparison:
    """One metric across the contenders of a :class:`Comparison`."""

    key: str
    means: dict[str, Cell]
    diffs: dict[tuple[str, str], Cell]  # (a, b): paired a - b over the matched videos that have it on both sides

    def diff(self, a: str, b: str) -> Cell:
        """Paired ``a - b`` (the stored pair or its negation: the same resamples, so the interval flips exactly)."""
        if (a, b) in self.diffs:
            return self.diffs[(a, b)]
        c = self.diffs[(b, a)]
        return Cell(-c.mean, -c.hi, -c.lo, c.n, [Unit(-u.value, [Term(t.file, t.key, t.field, -t.coef)
                                                                    for t in u.terms]) for u in c.units],
                    c.reason, c.kind)

    @property
    def higher_is_better(self) -> Optional[bool]:
        return direction(self.key)

    def ranking(self) -> list[str]:
        """Contenders with a value, best first (by the metric's direction)."""
        have = [c for c, cell in self.means.items() if cell.ok()]
        sign = -1.0 if self.higher_is_better is not False else 1.0
        return sorted(have, key=lambda c: (sign * self.means[c].mean, c))

    def separated(self, a: str, b: str) -> bool:
        """``a`` and ``b`` differ: the paired interval of ``a - b`` excludes 0 (with enough pairs to be an
        interval) and the difference reaches the metric's resolution (:func:`evaluate.catalog.resolution`)."""
        d = self.diff(a, b)
        return d.ok() and has_interval(d) and (d.lo > 0 or d.hi < 0) and abs(d.mean) >= resolution(self.key)

    def relation(self, a: str, b: str) -> str:
        """Between ranked neighbours: ``≫`` separated by ten resolutions or more, ``>`` separated, ``≈`` not."""
        if not self.separated(a, b):
            return "≈"
        return "≫" if abs(self.diff(a, b).mean) >= 10 * resolution(self.key) else ">"

    @property
    def separates(self) -> bool:
        return self.higher_is_better is not None and any(self.separated(a, b) for a, b in self.diffs)

    def strength(self) -> float:
        """How much it separates, in the metric's resolutions (unit-free across metrics): the largest |paired
        difference| of a separated pair / :func:`evaluate.catalog.resolution`."""
        diffs = [abs(self.diffs[p].mean) for p in self.diffs if self.separated(*p)]
        return max(diffs, default=0.0) / resolution(self.key)


@dataclass
class Comparison:
    """Contenders on matched videos (same trajectory, case and seed under each).

    ``kind``: ``policies`` (the context policies of ``model``) or ``models`` (each model at its main context).
    ``pairs``: (a, b) for every pair, the later contender minus the earlier (baselines first: X - FullKV,
    X - Sliding). ``latency``: generation time per video [s]; ``speedup``: FullKV's mean latency / the contender's
    (policies with FullKV only)."""

    kind: str
    model: Optional[str]
    contenders: list[str]
    matched: dict[str, dict[MatchKey, Item]]
    pairs: list[tuple[str, str]]
    metrics: dict[str, MetricComparison] = field(default_factory=dict)
    latency: dict[str, Cell] = field(default_factory=dict)
    speedup: dict[str, Cell] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return f"context policies of {self.model}" if self.kind == "policies" else "models"

    @property
    def matched_videos(self) -> int:
        return len(next(iter(self.matched.values()), {}))

    @property
    def header(self) -> str:
        """``context policies of reference (10 matched videos, 2 of them dynamic: not in the static metrics)``."""
        dyn = sum(1 for it in next(iter(self.matched.values()), {}).values() if it.case_family == "dynamic")
        extra = (f", {dyn} of them {'a dynamic case' if dyn == 1 else 'dynamic cases'}, left out of the "
                 "static-content metrics") if dyn else ""
        return f"{self.title} ({plural(self.matched_videos, 'matched video')}{extra})"

    def items(self, contender: str) -> list[Item]:
        return list(self.matched[contender].values())


def _compare(study: Study, kind: str, model: Optional[str], contenders: list[str],
             matched: dict[str, dict[MatchKey, Item]]) -> Comparison:
    pairs = [(contenders[j], contenders[i]) for i in range(len(contenders)) for j in range(i + 1, len(contenders))]
    c = Comparison(kind, model, contenders, matched, pairs)
    present = {k for per in matched.values() for it in per.values() for k in it.computed()}
    for key in [k for k in study.keys if k in present]:
        c.metrics[key] = MetricComparison(key, {p: study.metric_cell(c.items(p), key) for p in contenders},
                                          {(a, b): mean_cell(study.paired_units(matched[a], matched[b], key),
                                                             study.boot, f"{key}: no video with it under both")
                                           for a, b in pairs})
    for p in contenders:
        lat = [Unit(it.latency_s(), [study.term(it, None, "timings_generation.generate_s")]) for it in c.items(p)]
        c.latency[p] = mean_cell(lat, study.boot, "no timing recorded")
    if kind == "policies" and "fullkv" in matched:
        ref = [Unit(it.latency_s(), [study.term(it, None, "timings_generation.generate_s")])
               for it in c.items("fullkv")]
        for p in contenders:
            lat = [Unit(it.latency_s(), [study.term(it, None, "timings_generation.generate_s")]) for it in c.items(p)]
            c.speedup[p] = ratio_cell(lat, ref, study.boot)
    return c


def comparisons(study: Study) -> list[Comparison]:
    """The policies of every model run under several (matched videos), then the models (if several)."""
    out = [_compare(study, "policies", model, ctxs, per) for model, (ctxs, per) in study.matched_contexts().items()]
    mm = study.matched_models()
    if mm is not None:
        out.append(_compare(study, "models", None, *mm))
    return out


# -- the verdict ----------------------------------------------------------------------------------------------------


@dataclass
class VerdictLine:
    """A metric that separates contenders: the ranking, the relation between neighbours
    (:meth:`MetricComparison.relation`), and the paired differences of every pair."""

    comparison: Comparison
    metric: MetricComparison

    @property
    def key(self) -> str:
        return self.metric.key

    @property
    def ranking(self) -> list[str]:
        return self.metric.ranking()

    @property
    def best(self) -> str:
        return self.ranking[0]

    def relations(self) -> list[str]:
        r = self.ranking
        return [self.metric.relation(r[i], r[i + 1]) for i in range(len(r) - 1)]


@dataclass
class Verdict:
    """What the study says: per comparison, the metrics that separate its contenders (paper metrics first, then
    by how clearly), and those that do not."""

    comparisons: list[Comparison]
    lines: list[VerdictLine]
    quiet: dict[int, list[str]]  # comparison index -> metrics computed on both sides that do not separate

    @property
    def metrics(self) -> list[str]:
        """The separating metrics, most telling first (what the latency-vs-memory figure plots)."""
        out: list[str] = []
        for line in self.lines:
            if line.key not in out:
                out.append(line.key)
        return out


def verdict(comps: list[Comparison]) -> Verdict:
    lines, quiet = [], {}
    for i, c in enumerate(comps):
        sep = [m for m in c.metrics.values() if m.separates]
        sep.sort(key=lambda m: (not is_table2_key(m.key), -m.strength(), m.key))
        lines += [VerdictLine(c, m) for m in sep]
        quiet[i] = [k for k, m in c.metrics.items() if not m.separates and len(m.ranking()) >= 2]
    return Verdict(comps, lines, quiet)


def chance_text(key: str) -> str:
    """`` (chance ≈ 0.10)`` for a metric with a chance level, else empty."""
    ch = chance_level(key)
    return f" (chance ≈ {ch.value:.2f})" if ch else ""


# -- sources --------------------------------------------------------------------------------------------------------


def sources(study: Study) -> dict[str, dict[str, list[str]]]:
    """Per computed metric key: the pose, depth and mask sources its values used (empty lists: frames only)."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for it in study.items:
        for key, m in it.computed().items():
            used = out[key]  # created here, so a metric that used no estimator is listed too
            for what in ("pose", "depth", "mask"):
                src = m.source(what)
                if src:
                    used[what].add(src)
    return {k: {s: sorted(v) for s, v in d.items()} for k, d in sorted(out.items())}


class Analyses:
    """Every analysis of a :class:`Study`, each computed on first use and then shared."""

    def __init__(self, study: Study):
        self.study = study

    @cached_property
    def multi_revisit(self) -> list[RevisitSeries]:
        return multi_revisit(self.study)

    @cached_property
    def cross_axis(self) -> list[CrossAxis]:
        return cross_axis(self.study)

    @cached_property
    def coverage(self) -> list[Coverage]:
        return coverage(self.study)

    @cached_property
    def comparisons(self) -> list[Comparison]:
        return comparisons(self.study)

    @cached_property
    def verdict(self) -> Verdict:
        return verdict(self.comparisons)

    @cached_property
    def sources(self) -> dict[str, dict[str, list[str]]]:
        return sources(self.study)

    def at_tolerance(self, tolerance_deg: float) -> "Analyses":
        """The same analyses with another return tolerance (qualified subsets change, nothing else)."""
        return Analyses(self.study.with_tolerance(tolerance_deg))

