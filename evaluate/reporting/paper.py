"""The paper's published numbers (``evaluate/paper_numbers.yaml``) beside ours.

Each published number names its table, row and column, and optionally the quantity of ours it corresponds to. Ours
is computed from the same items as the report's tables; a number without a counterpart in the runs stays in the
comparison with the reason, and nothing is estimated. Where our metric was computed with a different backbone
than the paper's, the row says so: the difference is then not a reproduction check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from .analyses import cross_axis_units, revisit_units
from .cells import Cell, Unit, count_cell, fixed, mean_cell
from .collect import Item
from .tables import Builder, Column, Table

PAPER_FILE = Path(__file__).resolve().parent.parent / "paper_numbers.yaml"


def load_paper_numbers(path: Path = PAPER_FILE) -> dict[str, Any]:
    """The YAML as a dict; checks that every number has table, row, column and a numeric value."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where installed: the same data, faster
    data: dict[str, Any] = yaml.load(Path(path).read_text(), Loader=loader)
    for i, e in enumerate(data["numbers"]):
        for k in ("table", "row", "column", "value"):
            if k not in e:
                raise ValueError(f"{path}: numbers[{i}] lacks {k!r}")
        if not isinstance(e["value"], (int, float)):
            raise ValueError(f"{path}: numbers[{i}].value must be a number, got {e['value']!r}")
    from ..catalog import METRICS  # the metric registry: every named metric must be one of ours

    for name, mdef in (data.get("metrics") or {}).items():
        if mdef.get("id") not in METRICS:
            raise ValueError(f"{path}: metrics.{name}.id {mdef.get('id')!r} is not a registered metric; one of "
                             f"{sorted(METRICS)} (evaluate/catalog.py)")
    return data


def _models_mean(per_model: dict[str, list[Unit]], kind: str = "models_mean") -> Cell:
    """Mean over models of each model's unit mean (the paper averages its models equally); units keep
    ``role = model=<name>`` so the value can be recomputed."""
    means = {m: float(np.mean([u.value for u in us])) for m, us in per_model.items() if us}
    if not means:
        return Cell(reason="no model of these runs has a value")
    units = [Unit(u.value, u.terms, f"model={m}") for m, us in per_model.items() for u in us]
    return Cell(float(np.mean(list(means.values()))), float("nan"), float("nan"), len(units), units, kind=kind)


class Ours:
    """Our counterpart of a published number, per quantity (see the header of paper_numbers.yaml)."""

    def __init__(self, b: Builder):
        self.b = b
        self.s = b.study
        self.main = self.s.main_items()

    def _model_items(self, model: str, trajectory: Optional[str] = None) -> list[Item]:
        if model not in self.main:
            return []
        return [it for it in self.main[model][1] if trajectory is None or it.trajectory == trajectory]

    def _models(self, spec: dict[str, Any]) -> list[str]:
        m = spec.get("model", "*")
        return sorted(self.main) if m == "*" else [m]

    def cell(self, spec: dict[str, Any], key: str | None) -> Cell:
        """Our value of the quantity a ``paper_numbers.yaml`` entry (``spec``) publishes, for metric ``key``."""
        q = spec["quantity"]
        models = self._models(spec)
        if q.startswith("decrease") or q == "per_revisit":
            per: dict[str, tuple[list[str], list[list[Unit]], list[Unit], list[Unit]]] = {}
            for m in models:
                its = self._model_items(m, spec.get("trajectory"))
                if its:
                    per[m] = revisit_units(self.s, its, key or "")
            if q == "per_revisit":
                r = int(spec["revisit"]) - 1
                per_r = {m: (v[1][r] if r < len(v[1]) else []) for m, v in per.items()}
                if not any(per_r.values()):
                    return Cell(reason=f"{key} records no per-revisit values on {spec.get('trajectory')} in these "
                                       "runs")
                return self._agg(per_r, spec)
            return self._sub(q[len("decrease"):], {m: (v[2], v[3]) for m, v in per.items()}, spec)
        if q.startswith("delta_axis"):
            axes = {m: cross_axis_units(self.s, self._model_items(m), key or "") for m in models
                    if self._model_items(m)}
            return self._sub(q[len("delta_axis"):], {m: (v.delta, v.delta_q) for m, v in axes.items()}, spec)
        if q in ("latency", "speedup"):
            t = self.b.context_table()
            for (model, ctx), row in t.rows:
                if model == spec["model"] and ctx == spec["context"]:
                    found = row["latency_s" if q == "latency" else "speedup"]
                    if isinstance(found, Cell):
                        return found
            return Cell(reason=f"{spec['model']} was not run under {spec['context']} and another policy on matched "
                               "items")
        if q.startswith("dyn_"):
            t = self.b.dynamic_table()
            col = {"dyn_started": "started", "dyn_p_start": "p_start", "dyn_s_cond": "s_cond",
                   "dyn_s_gated": "s_gated"}[q]
            for (model, ctx, k), row in t.rows:
                if model == spec["model"] and ctx == (self.main[str(model)][0] if model in self.main else "") \
                        and k == key:
                    found = row[col]
                    if isinstance(found, Cell):
                        return found
            return Cell(reason=f"no dynamic videos of {spec['model']} in these runs")
        raise ValueError(f"paper_numbers.yaml: unknown quantity {q!r}")

    def _agg(self, per_model: dict[str, list[Unit]], spec: dict[str, Any]) -> Cell:
        if spec.get("model", "*") == "*":
            return _models_mean(per_model)
        us = next(iter(per_model.values()), [])
        return mean_cell(us, self.s.boot, f"no value of {spec.get('model')} in these runs")

    def _sub(self, suffix: str, per: dict[str, tuple[list[Unit], list[Unit]]], spec: dict[str, Any]) -> Cell:
        """suffix '' (all cases, every model), '_qm' (all cases, the models with a qualified unit), '_q'
        (qualified), '_q_n' / '_q_m' / '_q_pos' (counts)."""
        if suffix == "":
            return self._agg({m: a for m, (a, _) in per.items()}, spec)
        if not any(a for a, _ in per.values()):
            return Cell(reason="no computed value on this trajectory in these runs")
        qual = {m: q for m, (_, q) in per.items() if q}
        if suffix == "_qm":  # all cases, on the models that have a qualified unit (paper Table 12 "All cases")
            return self._agg({m: a for m, (a, _) in per.items() if m in qual}, spec) if qual else \
                Cell(reason="no model with a qualified unit in these runs")
        if suffix == "_q":
            return self._agg(qual, spec) if qual else Cell(reason="no qualified unit in these runs")
        units = [Unit(u.value, u.terms, f"model={m}") for m, us in qual.items() for u in us]
        if suffix == "_q_n":
            return count_cell(len(units), units)
        if suffix == "_q_m":
            return count_cell(len(qual), units)
        if suffix == "_q_pos":
            pos = [m for m, us in qual.items() if np.mean([u.value for u in us]) > 0]
            return count_cell(len(pos), units)
        raise ValueError(f"unknown suffix {suffix!r}")


def _backbone_matches(ours: str, paper: str) -> bool:
    a, b = ours.split("+"), paper.split("+")
    return len(a) == len(b) and all(x.startswith(y) for x, y in zip(a, b))


def comparison_table(b: Builder, data: Optional[dict[str, Any]] = None) -> Table:
    """One row per published number and our metric key: paper value, ours, ours - paper, and whether our backbone
    is the paper's."""
    data = data or load_paper_numbers()
    ours = Ours(b)
    t = Table("paper", "Ours vs paper",
              f"Every number the paper's text states ({data['source']}), with its table, row and column. Ours: the "
              "same quantity from these runs (models averaged equally where the paper averages its nine models; "
              "counts without an interval). ours - paper only where both exist; 'same backbone' says whether ours "
              "used the paper's backbone (otherwise the difference is not a reproduction check). A missing number "
              "stays missing.",
              ["paper table", "row", "column"],
              [Column("paper", "paper"), Column("ours", "ours"), Column("diff", "ours - paper"),
               Column("metric", "our metric"), Column("same_backbone", "same backbone")])
    metrics = data.get("metrics", {})
    computed_keys = b.study.computed_keys
    all_keys = b.study.keys
    for e in data["numbers"]:
        key_row = (e["table"], e["row"], e["column"])
        paper_val = f"{e['value']:g}" + (f" of {e['of']}" if "of" in e else "")
        spec = e.get("ours")
        if not spec:
            t.rows.append((key_row, {"paper": paper_val, "ours": Cell(reason="no counterpart quantity in the harness "
                                                                      "(not measured by this evaluation)")}))
            continue
        mdef = metrics.get(spec.get("metric", "Dynamic Overall") if spec["quantity"].startswith("dyn_")
                           else spec.get("metric", ""), None)
        keys: list[str | None] = [None]
        if mdef:
            keys = list([k for k in computed_keys if k.split("[")[0] == mdef["id"]] or
                        [k for k in all_keys if k.split("[")[0] == mdef["id"]][:1] or
                        [f"{mdef['id']}[{mdef['backbone']}]"])
        for key in keys:
            if key and key not in computed_keys and spec["quantity"] not in ("latency", "speedup"):
                cell = Cell(reason=b.study.reason(b.study.items, key))
            else:
                cell = ours.cell(spec, key)
            row: dict[str, Any] = {"paper": paper_val, "ours": cell, "metric": key or ""}
            if isinstance(cell, Cell) and cell.ok():
                d = cell.mean - float(e["value"])
                row["diff"] = fixed(d, 0 if cell.kind == "count" else 3, signed=True)
            if key and mdef:
                # an estimator-combined key (e.g. Eq. 2's camera.rpe_trans) names no backbone: its estimators are
                # the paper's when that combination is reported at all (the stage requires all of them)
                bb = key.split("[", 1)[1].rstrip("]") if "[" in key else mdef["backbone"]
                row["same_backbone"] = "yes" if _backbone_matches(bb, mdef["backbone"]) else \
                    f"no (paper: {mdef['backbone']})"
            t.rows.append((key_row, row))
    comparable = sum(1 for _, row in t.rows if row.get("same_backbone") == "yes"
                     and isinstance(o := row.get("ours"), Cell) and o.ok())
    if not comparable:  # a wall of n/c and non-reproduction rows says nothing: one line instead
        counterparts = sum(1 for _, row in t.rows if isinstance(o := row.get("ours"), Cell) and o.ok())
        t.collapsed = (f"Nothing comparable with the paper in these runs: of its {len(data['numbers'])} published "
                       f"numbers, {counterparts} have a counterpart here, none computed with the paper's backbone.")
    return t
