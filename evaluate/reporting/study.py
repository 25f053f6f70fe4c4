"""The evaluated videos of a report and the small operations every table and analysis is built from: a metric's
units (one per video, each traceable to its ``metrics.json``), a cell over units, why a group has no value, the
columns (the paper's Table 2 apart from the variants), and the groupings (each model at its main context, the
policies of a model on matched videos, the models on matched videos).

Units are videos unless an analysis says otherwise. Columns are ``metric[backbone]`` keys: two backbones are
never merged into one number.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..aggregate import mean
from ..catalog import TABLE2_ORDER, is_table2_key, metric_id, spec_of, table2_key
from .cells import Boot, Cell, Term, Unit, mean_cell
from .collect import Item

#: contenders that other policies are compared against, in this order (FullKV keeps all history; Sliding is the
#: recent-only window of the same budget as FoV)
BASELINES = ("fullkv", "sliding")

MatchKey = tuple[str, str, int]  # (trajectory, case_id, seed): the same video under another policy or model


def metric_order(key: str) -> tuple[int, str, str]:
    """Sort key of metric keys: the paper's Table 2 order, then the rest by id."""
    mid = metric_id(key)
    return (TABLE2_ORDER.index(mid) if mid in TABLE2_ORDER else len(TABLE2_ORDER), mid, key)


def contender_order(names: Iterable[str]) -> list[str]:
    """Baselines first (FullKV, Sliding), then by name."""
    return sorted(names, key=lambda c: (BASELINES.index(c) if c in BASELINES else len(BASELINES), c))


class Study:
    """The items of a report with its settings.

    Args:
        items: the :func:`~evaluate.reporting.collect.scored` items. boot: ``{"n", "seed"}`` of every bootstrap.
        rel: a ``metrics.json`` path -> the path recorded in provenance (relative to the report folder).
        main_context: the policy of each model's main-table row (the paper's Table 2 uses FullKV).
        departure_deg / tolerance_deg: the qualification thresholds (appendix G.1), degrees.
    """

    def __init__(self, items: list[Item], boot: Boot, rel: Callable[[Path], str], main_context: str = "fullkv",
                 departure_deg: float = 30.0, tolerance_deg: float = 30.0):
        self.items = items
        self.boot = boot
        self.rel = rel
        self.main_context = main_context
        self.dep = float(departure_deg)
        self.tol = float(tolerance_deg)
        self.keys = sorted({k for it in items for k in it.metrics}, key=metric_order)
        computed = {k for it in items for k in it.computed()}  # once per item, not once per item and key
        self.computed_keys = [k for k in self.keys if k in computed]

    def with_tolerance(self, tolerance_deg: float) -> "Study":
        """The same items qualified with another return tolerance (the sensitivity analysis)."""
        return Study(self.items, self.boot, self.rel, self.main_context, self.dep, tolerance_deg)

    # -- columns --------------------------------------------------------------------------------------------------
    @property
    def table2_keys(self) -> list[str]:
        """Every Table 2 metric at the paper's backbone, in the paper's order, whether or not a video has it."""
        return [table2_key(m) for m in TABLE2_ORDER]

    @property
    def variant_keys(self) -> list[str]:
        """Every other key of these runs: Table 2 metrics with an estimator or diagnostic backbone, the
        protocol extensions and the diagnostics."""
        return [k for k in self.keys if not is_table2_key(k)]

    # -- units and cells ------------------------------------------------------------------------------------------
    def term(self, it: Item, key: Optional[str], fld: str, coef: float = 1.0) -> Term:
        return Term(self.rel(it.metrics_path), key, fld, coef)

    def value_unit(self, it: Item, key: str) -> Optional[Unit]:
        m = it.entry(key)
        if m is None or not m.is_computed or m.value is None:
            return None
        return Unit(float(m.value), [self.term(it, key, "value")])

    def reason(self, items: list[Item], key: str) -> str:
        """Why a group has no value for ``key``: the recorded reason, or that no video of the group has it."""
        for it in items:
            m = it.entry(key)
            if m is not None and not m.is_computed:
                status, why = m.status.value.replace("_", " "), m.reason or "no reason recorded"
                return f"{key}: {why}" if why.startswith(status) else f"{key}: {status}: {why}"
        fams = sorted({it.case_family for it in items})
        return f"{key}: no video of this group has this metric (case families here: {', '.join(fams) or 'none'})"

    def metric_cell(self, items: list[Item], key: str) -> Cell:
        """``key``'s units over ``items`` combined by its metric's aggregation (the mean for an unknown metric)."""
        units = [u for it in items if (u := self.value_unit(it, key)) is not None]
        spec = spec_of(key)
        return mean_cell(units, self.boot, self.reason(items, key), spec.aggregation if spec is not None else mean)

    def paired_units(self, a: dict[MatchKey, Item], b: dict[MatchKey, Item], key: str) -> list[Unit]:
        """``a - b`` per matched video that has ``key`` on both sides (two terms: +a, -b)."""
        out = []
        for k in sorted(set(a) & set(b)):
            ua, ub = self.value_unit(a[k], key), self.value_unit(b[k], key)
            if ua and ub:
                out.append(Unit(ua.value - ub.value, [ua.terms[0], Term(ub.terms[0].file, key, "value", -1.0)]))
        return out

    # -- groupings ------------------------------------------------------------------------------------------------
    def main_items(self) -> dict[str, tuple[str, list[Item]]]:
        """Per model: (the context of its main-table row, its items). ``main_context`` where run, else the model's
        first context by name."""
        by: dict[str, dict[str, list[Item]]] = defaultdict(lambda: defaultdict(list))
        for it in self.items:
            by[it.model][it.context].append(it)
        out = {}
        for model, ctxs in sorted(by.items()):
            ctx = self.main_context if self.main_context in ctxs else sorted(ctxs)[0]
            out[model] = (ctx, ctxs[ctx])
        return out

    def matched_contexts(self) -> dict[str, tuple[list[str], dict[str, dict[MatchKey, Item]]]]:
        """Per model run under >= 2 contexts: its contexts (baselines first) and, per context, its items on the
        matched keys (trajectory, case, seed) present under every context."""
        by: dict[str, dict[str, dict[MatchKey, Item]]] = defaultdict(lambda: defaultdict(dict))
        for it in self.items:
            by[it.model][it.context][(it.trajectory, it.case_id, it.seed)] = it
        out = {}
        for model, ctxs in sorted(by.items()):
            if len(ctxs) < 2:
                continue
            common = set.intersection(*[set(v) for v in ctxs.values()])
            if common:
                order = contender_order(ctxs)
                out[model] = (order, {c: {k: ctxs[c][k] for k in sorted(common)} for c in order})
        return out

    def matched_models(self) -> Optional[tuple[list[str], dict[str, dict[MatchKey, Item]]]]:
        """With >= 2 models: the models and, per model, its main-context items on the keys every model has (case,
        trajectory and seed; case and trajectory alone when each model ran at one seed of its own)."""
        main = self.main_items()
        if len(main) < 2:
            return None
        per = {m: {(it.trajectory, it.case_id, it.seed): it for it in its} for m, (_, its) in main.items()}
        common = set.intersection(*[set(v) for v in per.values()])
        if not common and all(len({it.seed for it in its}) == 1 for _, its in main.values()):
            # each model at its own frozen seed (the paper's nine-model study, an imported release): the same case
            # and trajectory are the matched videos; the key's seed is then -1, "each model's own"
            per = {m: {(it.trajectory, it.case_id, -1): it for it in its} for m, (_, its) in main.items()}
            common = set.intersection(*[set(v) for v in per.values()])
        if not common:
            return None
        return sorted(per), {m: {k: v[k] for k in sorted(common)} for m, v in per.items()}
