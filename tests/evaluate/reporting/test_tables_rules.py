"""The rules of the report's cells, tables and a run's own tables, one at a time, in this process, on small inputs
built in memory with the real classes: when a cell has a value, how a mean / ratio / count cell is made, how a
provenance term is read back, how each kind of cell prints (md digits, percentages, ratios, spreads, signed zeros),
which columns fold and why, which row is marked best, the footnotes, each table the builder shapes (rows, columns,
reasons), and the files of a run (per_item.csv, summary.{csv,json,md}, dynamic.{json,md}, analyses.{json,md})."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluate.aggregate import bootstrap_ci
from evaluate.catalog import METRICS, spec_of
from evaluate.config import EvalConfig
from evaluate.registry import UnknownMetricError
from evaluate.reporting import run_tables as rt
from evaluate.reporting.analyses import Analyses, Comparison, MetricComparison
from evaluate.reporting.cells import (
    MIN_UNITS_FOR_INTERVAL,
    Cell,
    Term,
    Unit,
    count_cell,
    fixed,
    fmt,
    fmt_parts,
    has_interval,
    mean_cell,
    ratio_cell,
    resolve,
    unit_value,
)
from evaluate.reporting.collect import Item, scored
from evaluate.reporting.study import Study
from evaluate.reporting.tables import (
    WEIGHTS_MISSING,
    Builder,
    Column,
    Table,
    metric_column,
    regime_notes,
)
from evaluate.results import ItemResult, MetricEntry, Status

NAN = float("nan")
BOOT = {"n": 20, "seed": 0}
ENV = "environment.visible[pixel-thumb16]"
RPE = "camera.rpe_rot[classical-opencv]"
DYN = "dynamic.overall[Qwen/Qwen3.8-27B]"
SWEEP = "departure.sweep_visible[pixel-thumb16]"
RUN = Path("/runs/r")
PHASES = {"lrlr": {"V": [0, 2], "D1": [2, 4], "R1": [4, 6], "D2": [6, 8], "R2": [8, 10]},
          "lrud": {"V": [0, 2], "D1": [2, 4], "R1": [4, 6], "D2": [6, 8], "R2": [8, 10]},
          "lrlrlr": {"V": [0, 2], "D1": [2, 3], "R1": [3, 5], "D2": [5, 6], "R2": [6, 8], "D3": [8, 9],
                     "R3": [9, 11]}}


# -- building blocks --------------------------------------------------------------------------------------------------


def env(value: float, pr: list[float] | None = None, qual: list[tuple[float, float]] | None = None,
        **details) -> MetricEntry:
    """An environment.visible[pixel-thumb16] entry; ``qual``: (departure, return error) per revisit, degrees."""
    if pr is not None:
        details["per_revisit"] = pr
    if qual is not None:
        details["qualification"] = [{"departure_deg": d, "return_error_deg": e} for d, e in qual]
    return MetricEntry.computed("environment.visible", "pixel-thumb16", "diagnostic", value, **details)


def rpe(value: float) -> MetricEntry:
    return MetricEntry.computed("camera.rpe_rot", "classical-opencv", "estimator", value)


def dyn(value: float | None, started: bool | None = None, status: Status = Status.COMPUTED) -> MetricEntry:
    details = {} if started is None else {"started": started}
    return MetricEntry("dynamic.overall", "Qwen/Qwen3.8-27B", status, value, None,
                       None if status is Status.COMPUTED else "no judge answer", details=details)


def nc(metric: str, backbone: str, reason: str | None, status: Status = Status.NOT_COMPUTED) -> MetricEntry:
    return MetricEntry(metric, backbone, status, None, None, reason)


def item(model: str = "m", ctx: str = "fullkv", traj: str = "lrlr", case: str = "env_0", seed: int = 1,
         metrics: dict[str, MetricEntry] | None = None, family: str = "environment", **extra) -> Item:
    res = ItemResult(item={"model": model, "context": ctx, "seed": seed, "trajectory": traj, "case_id": case},
                     case_family=family, num_revisits=len([k for k in PHASES[traj] if k[0] == "R"]),
                     phases=PHASES[traj], metrics=dict(metrics or {}), extra=extra)
    return Item("r", RUN, RUN / model / ctx / f"seed-{seed}" / traj / case, scored(res))


def rel(p: Path) -> str:
    return str(p.relative_to(RUN))


def study(items: list[Item], **kw) -> Study:
    return Study(items, BOOT, rel, **kw)


def mc(mean: float, lo: float | None = None, hi: float | None = None, n: int = 5, **kw) -> Cell:
    return Cell(mean, mean - 0.1 if lo is None else lo, mean + 0.1 if hi is None else hi, n, **kw)


# -- cells: Cell.ok, provenance, Term ---------------------------------------------------------------------------------


def test_a_count_of_zero_is_a_value_and_a_count_with_a_reason_is_not():
    assert Cell(0.0, kind="count").ok()  # n=0, no reason: zero things counted
    assert not Cell(2.0, n=2, kind="count", reason="x").ok()
    assert not Cell(NAN, n=2, kind="count").ok()


def test_a_mean_needs_one_unit_and_a_finite_value():
    assert Cell(0.5, n=1).ok()
    assert not Cell(0.5, n=0).ok()
    assert not Cell(NAN, n=1).ok()
    assert not Cell(0.5).ok() and Cell().n == 0  # a cell made without units has n=0


def test_provenance_is_the_cell_as_json_with_its_files_interned_or_not():
    c = Cell(0.5, 0.4, 0.6, 1, [Unit(0.5, [Term("a/metrics.json", ENV, "value"), Term("b/metrics.json", None,
                                                                                   "timings_generation.generate_s", -1.0)],
                                     "policy")], kind="ratio")
    p = c.provenance()
    assert p == {"kind": "ratio", "mean": 0.5, "lo": 0.4, "hi": 0.6, "n": 1, "sd": p["sd"], "reason": None,
                 "units": [{"value": 0.5, "role": "policy", "terms": [
                     {"file": "a/metrics.json", "key": ENV, "field": "value", "coef": 1.0},
                     {"file": "b/metrics.json", "key": None, "field": "timings_generation.generate_s", "coef": -1.0}]}]}
    assert math.isnan(p["sd"])
    files: list[str] = []
    p = c.provenance(lambda f: files.index(f) if f in files else files.append(f) or len(files) - 1)
    assert [t["file"] for t in p["units"][0]["terms"]] == [0, 1] and files == ["a/metrics.json", "b/metrics.json"]


def test_a_term_counts_once_by_default():
    assert Term("f", "k", "value").coef == 1.0


# -- cells: mean_cell, ratio_cell, count_cell -------------------------------------------------------------------------


def test_a_mean_cell_averages_the_finite_values_only():
    a, b = Unit(1.0, []), Unit(3.0, [])
    c = mean_cell([None, Unit(None, []), Unit(NAN, []), a, Unit(float("inf"), []), b], BOOT)
    assert (c.mean, c.n, c.units, c.kind, c.reason) == (2.0, 2, [a, b], "mean", None)


def test_a_mean_cell_without_a_value_says_why():
    c = mean_cell([None, Unit(NAN, [])], BOOT)
    assert c.reason == "no computed value" and c.n == 0 and not c.ok()
    assert mean_cell([], BOOT, "nothing here").reason == "nothing here"


def test_a_mean_cell_bootstraps_2000_resamples_with_seed_0_by_default():
    vals = [0.1, 0.5, 0.2, 0.9, 0.4]
    c = mean_cell([Unit(v, []) for v in vals], {})
    want = bootstrap_ci(vals, n_boot=2000, seed=0)
    assert (c.mean, c.lo, c.hi, c.n) == (want["mean"], want["lo"], want["hi"], 5)
    other = bootstrap_ci(vals, n_boot=2000, seed=1)
    assert (other["lo"], other["hi"]) != (c.lo, c.hi)


def test_a_mean_cell_calls_its_aggregation():
    calls = []

    def agg(values, n_boot=0, seed=0):
        calls.append((list(values), n_boot, seed))
        return {"mean": 7.0, "lo": 6.0, "hi": 8.0, "n": 2}

    c = mean_cell([Unit(1.0, []), Unit(2.0, [])], {"n": 9, "seed": 4}, aggregation=agg)
    assert calls == [([1.0, 2.0], 9, 4)] and (c.mean, c.lo, c.hi, c.n) == (7.0, 6.0, 8.0, 2)


def _latency_sides() -> tuple[list[Unit], list[Unit]]:
    # policy (num) and reference (den) latency per matched video: only the first two pairs are usable (a NaN, a
    # zero policy time, a NaN reference, an infinite policy time)
    a = [1.0, 5.0, NAN, 0.0, 5.0, float("inf")]
    b = [4.0, 8.0, 6.0, 3.0, NAN, 1.0]
    return ([Unit(x, [Term(f"p{i}", None, "t")]) for i, x in enumerate(a)],
            [Unit(x, [Term(f"r{i}", None, "t")]) for i, x in enumerate(b)])


def test_a_ratio_cell_is_the_reference_mean_over_the_policy_mean_on_usable_pairs():
    num, den = _latency_sides()
    c = ratio_cell(num, den, {"n": 2000, "seed": 0})
    assert (c.mean, c.n, c.kind) == (2.0, 2, "ratio")  # (4 + 8) / (1 + 5)
    # resamples: both pairs first (4/1), both second (8/5) or one of each (12/6): the 2.5 % and 97.5 % points
    assert c.lo == pytest.approx(1.6) and c.hi == pytest.approx(4.0)
    assert [(u.value, u.role, u.terms[0].file) for u in c.units] == [
        (1.0, "policy", "p0"), (5.0, "policy", "p1"), (4.0, "reference", "r0"), (8.0, "reference", "r1")]


def test_a_ratio_cell_bootstraps_2000_resamples_with_seed_0_by_default():
    num = [Unit(x, []) for x in (1.0, 2.0, 3.0, 4.0, 1.3, 2.7, 3.1, 0.9)]
    den = [Unit(x, []) for x in (2.0, 2.5, 7.0, 4.0, 5.1, 1.7, 6.3, 2.2)]
    c = ratio_cell(num, den, {})
    a, b = np.array([u.value for u in num]), np.array([u.value for u in den])
    idx = np.random.default_rng(0).integers(0, 8, size=(2000, 8))  # paired: the same videos on both sides
    r = b[idx].mean(axis=1) / a[idx].mean(axis=1)
    assert (c.lo, c.hi) == (np.quantile(r, 0.025), np.quantile(r, 0.975))
    assert (c.lo, c.hi) != tuple(getattr(ratio_cell(num, den, {"n": 2000, "seed": 1}), k) for k in ("lo", "hi"))
    assert (c.lo, c.hi) != tuple(getattr(ratio_cell(num, den, {"n": 2001, "seed": 0}), k) for k in ("lo", "hi"))


def test_a_ratio_cell_without_a_usable_pair_says_why():
    c = ratio_cell([Unit(0.0, []), Unit(NAN, [])], [Unit(1.0, []), Unit(2.0, [])], BOOT)
    assert (c.reason, c.kind, c.n) == ("no matched latency", "ratio", 0)


def test_a_count_cell_has_no_interval_and_counts_its_units():
    us = [Unit(1.0, []), Unit(0.0, [])]
    c = count_cell(1, us)
    assert (c.mean, c.n, c.units, c.kind) == (1.0, 2, us, "count") and math.isnan(c.lo) and math.isnan(c.hi)
    assert count_cell(0.5, us, "rate").kind == "rate"


# -- cells: resolve, unit_value ---------------------------------------------------------------------------------------


def _result() -> ItemResult:
    m = env(0.25, [0.3, 0.2], [(90.0, 2.0), (40.0, 45.0), (20.0, 1.0)], started=True,
            tracking_evidence={"cat": [{"departed": True, "returned": True}, {"departed": True, "returned": False}]})
    return ItemResult(item={"model": "m"}, metrics={ENV: m, "x": nc("x", "", "gone"), "d": dyn(0.5)},
                      extra={"timings_generation": {"generate_s": 7.5}})


@pytest.mark.parametrize("key, fld, want", [
    (None, "timings_generation.generate_s", 7.5), (ENV, "value", 0.25), (ENV, "started", 1.0), ("d", "started", 0.0),
    (ENV, "per_revisit[0]", 0.3), (ENV, "per_revisit[1]", 0.2),
    (ENV, "departed[0]@30", 1.0), (ENV, "departed[1]@30", 1.0), (ENV, "departed[1]@40", 1.0),
    (ENV, "departed[1]@41", 0.0), (ENV, "departed[2]@30", 0.0), (ENV, "departed[5]@30", 0.0),
    (ENV, "returned[0]@30,5", 1.0), (ENV, "returned[1]@30,50", 1.0), (ENV, "returned[1]@30,44.5", 0.0),
    (ENV, "returned[2]@30,5", 0.0), (ENV, "tracked[0]", 1.0), (ENV, "tracked[1]", 0.0),
])
def test_resolve_reads_each_field_of_a_metrics_entry(key, fld, want):
    assert resolve(_result(), key, fld) == want


@pytest.mark.parametrize("key, fld, err", [
    ("x", "value", TypeError), ("d", "per_revisit[0]", KeyError), (ENV, "bogus", KeyError),
    (ENV, "per_revisit[x]", KeyError),
])
def test_resolve_refuses_a_field_it_cannot_read(key, fld, err):
    with pytest.raises(err):
        resolve(_result(), key, fld)


def test_a_unit_is_recomputed_from_the_files_it_names(tmp_path):
    a = ItemResult(item={"model": "m"}, metrics={ENV: env(0.7, [0.9, 0.5])})
    b = ItemResult(item={"model": "m"}, metrics={ENV: env(0.2, [0.2, 0.2])})
    for name, r in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(r.to_dict()))
    unit = {"terms": [{"file": 0, "key": ENV, "field": "per_revisit[0]", "coef": 1.0},
                      {"file": 0, "key": ENV, "field": "per_revisit[1]", "coef": -1.0},
                      {"file": "b/metrics.json", "key": ENV, "field": "value", "coef": 2.0}]}
    assert unit_value(tmp_path, unit, ["a/metrics.json"]) == pytest.approx(0.9 - 0.5 + 0.4)
    assert unit_value(tmp_path, {"terms": [{"file": "a/metrics.json", "key": ENV, "field": "value", "coef": 3.0}]}) \
        == pytest.approx(2.1)
    assert unit_value(tmp_path, {"terms": []}) == 0.0


# -- cells: has_interval, fixed, fmt_parts, fmt -----------------------------------------------------------------------


def test_an_interval_needs_three_units_and_finite_bounds():
    assert MIN_UNITS_FOR_INTERVAL == 3
    assert has_interval(Cell(0.5, 0.4, 0.6, 3))
    assert not has_interval(Cell(0.5, 0.4, 0.6, 2))
    assert not has_interval(Cell(0.5, NAN, 0.6, 5))
    assert not has_interval(Cell(0.5, 0.4, NAN, 5))


@pytest.mark.parametrize("args, kw, want", [
    ((0.5,), {}, "0.500"), ((0.0,), {}, "0.000"), ((-0.5,), {}, "-0.500"), ((-0.0001,), {}, "0.000"),
    ((0.25, 1), {"percent": True}, "25.0%"), ((0.5, 2), {"signed": True}, "+0.50"), ((-12.0, 0), {}, "-12"),
])
def test_fixed_prints_digits_sign_and_percent(args, kw, want):
    assert fixed(*args, **kw) == want


@pytest.mark.parametrize("cell, parts", [
    (Cell(0.5, 0.4, 0.6, 3), ("0.500", "[0.400, 0.600] n=3")),
    (Cell(0.5, 0.4, 0.6, 2), ("0.500", "(n=2)")),
    (Cell(reason="x"), ("n/c", "")),
    (Cell(2.6, n=4, kind="count"), ("3", "(n=4)")),
    (Cell(0.0, kind="count"), ("0", "(n=0)")),
    (Cell(0.25, 0.125, 0.5, 4, kind="rate"), ("25.0%", "[12.5%, 50.0%] n=4")),
    (Cell(0.5, 0.4, 0.6, 2, kind="rate"), ("50.0%", "(n=2)")),
    (Cell(1.5, 1.25, 1.75, 3, kind="ratio"), ("1.50x", "[1.25, 1.75] n=3")),
    (Cell(1.5, 1.25, 1.75, 2, kind="ratio"), ("1.50x", "(n=2)")),
    (Cell(0.5, 0.5, 0.5, 1, kind="spread", sd=0.0), ("0.500", "(n=1)")),
    (Cell(0.5, 0.4, 0.6, 2, kind="spread", sd=0.1), ("0.500 ± 0.100", "[0.400, 0.600] n=2")),
    (Cell(0.5, 0.4, 0.6, 6, [Unit(1, [], "a"), Unit(1, [], "a"), Unit(0, [], "b")], kind="models_mean"),
     ("0.500", "(2 models, n=6)")),
    (Cell(0.5, 0.4, 0.6, 1, [Unit(1, [], "a")], kind="models_mean"), ("0.500", "(1 model, n=1)")),
])
def test_each_kind_of_cell_prints_its_value_and_the_rest(cell, parts):
    assert fmt_parts(cell) == parts
    assert fmt(cell) == " ".join(p for p in parts if p)


def test_digits_and_sign_reach_the_value_and_the_interval():
    c = Cell(0.5, 0.25, 0.75, 3)
    assert fmt_parts(c, 1, True) == ("+0.5", "[0.2, 0.8] n=3")
    assert fmt(c, 2, signed=True) == "+0.50 [0.25, 0.75] n=3"
    assert fmt(Cell(0.25, 0.125, 0.5, 4, kind="rate"), signed=True) == "+25.0% [12.5%, 50.0%] n=4"


# -- run tables: _fmt, summarise ---------------------------------------------------------------------------------------


def test_a_summary_value_prints_its_interval_from_three_cases():
    assert rt._fmt({"mean": NAN, "lo": NAN, "hi": NAN, "n": 0}) == "n/a"
    assert rt._fmt({"mean": 0.5, "lo": 0.4, "hi": 0.6, "n": 2}) == "0.500 (n=2)"
    assert rt._fmt({"mean": 0.5, "lo": 0.4, "hi": 0.6, "n": 3}) == "0.500 [0.400, 0.600] (n=3)"


def _run_items() -> list[Item]:
    return [
        item(traj="lrlr", case="env_0", metrics={ENV: env(0.25), RPE: rpe(1.0), "quality.imaging[musiq-spaq]": nc(
            "quality.imaging", "musiq-spaq", "weights missing")}),
        item(traj="lrlr", case="env_1", metrics={ENV: env(0.75), RPE: MetricEntry("camera.rpe_rot", "classical-opencv",
                                                                                  Status.COMPUTED, None)}),
        item(traj="lrud", case="env_0", metrics={ENV: env(0.5), RPE: MetricEntry(
            "camera.rpe_rot", "classical-opencv", Status.FAILED, 0.9, reason="diverged"),
            "quality.imaging[musiq-spaq]": nc("quality.imaging", "musiq-spaq", "second reason"),
            "quality.aesthetic[laion]": nc("quality.aesthetic", "laion", None)}),
        item(model="n", ctx="fov", traj="lrlr", metrics={ENV: env(0.125)}),
    ]


def test_summarise_groups_values_per_trajectory_and_all_and_keeps_the_first_reason():
    rows, reasons = rt.summarise(_run_items(), BOOT)
    got = [(r["model"], r["context"], r["trajectory"], r["metric"], r["mean"], r["n"], r["higher_is_better"])
           for r in rows]
    assert got == [("m", "fullkv", "all", RPE, 1.0, 1, False), ("m", "fullkv", "all", ENV, 0.5, 3, True),
                   ("m", "fullkv", "lrlr", RPE, 1.0, 1, False), ("m", "fullkv", "lrlr", ENV, 0.5, 2, True),
                   ("m", "fullkv", "lrud", ENV, 0.5, 1, True),
                   ("n", "fov", "all", ENV, 0.125, 1, True), ("n", "fov", "lrlr", ENV, 0.125, 1, True)]
    assert reasons == {"quality.imaging[musiq-spaq]": "weights missing", RPE: "", "quality.aesthetic[laion]": ""}
    assert set(rows[1]) == {"model", "context", "trajectory", "metric", "higher_is_better", "mean", "lo", "hi", "n"}


def test_summarise_bootstraps_2000_resamples_with_seed_0_by_default():
    vals = [0.1, 0.5, 0.2, 0.9, 0.33, 0.71, 0.05, 0.62]
    its = [item(case=f"env_{i}", metrics={ENV: env(v)}) for i, v in enumerate(vals)]
    rows, _ = rt.summarise(its, {})
    want = bootstrap_ci(vals, n_boot=2000, seed=0)
    assert (rows[0]["lo"], rows[0]["hi"]) == (want["lo"], want["hi"])
    for other in (bootstrap_ci(vals, n_boot=2001, seed=0), bootstrap_ci(vals, n_boot=2000, seed=1)):
        assert (other["lo"], other["hi"]) != (want["lo"], want["hi"])


def test_summarise_combines_by_the_metrics_own_aggregation(monkeypatch):
    calls = []

    def agg(values, n_boot=0, seed=0):
        calls.append(list(values))
        return {"mean": 9.0, "lo": 8.0, "hi": 10.0, "n": 7}

    spec = dataclasses.replace(spec_of(ENV), aggregation=agg)
    monkeypatch.setattr(rt, "spec_of", lambda key: spec if key == ENV else None)
    rows, _ = rt.summarise([item(metrics={ENV: env(0.25), RPE: rpe(2.0)})], BOOT)
    assert calls == [[0.25], [0.25]] and [r["mean"] for r in rows if r["metric"] == ENV] == [9.0, 9.0]
    assert [r["mean"] for r in rows if r["metric"] == RPE] == [2.0, 2.0]  # no spec: the mean


def test_summarise_refuses_a_metric_the_catalog_does_not_know():
    with pytest.raises(UnknownMetricError):
        rt.summarise([item(metrics={"new.metric[x]": MetricEntry.computed("new.metric", "x", "diagnostic", 1.0)})],
                     BOOT)


# -- run tables: table_files, context_ran, describe_ran, markdown -------------------------------------------------------


def test_table_files_write_every_entry_and_the_summary():
    its = _run_items()
    ecfg = EvalConfig(bootstrap=BOOT)
    files = rt.table_files(its, ecfg)
    per_item = list(csv.reader(io.StringIO(files["per_item.csv"])))
    assert per_item[0] == ["model", "context", "seed", "trajectory", "case", "case_family", "metric", "status", "value"]
    assert per_item[1:4] == [["m", "fullkv", "1", "lrlr", "env_0", "environment", RPE, "computed", "1.0"],
                             ["m", "fullkv", "1", "lrlr", "env_0", "environment", ENV, "computed", "0.25"],
                             ["m", "fullkv", "1", "lrlr", "env_0", "environment", "quality.imaging[musiq-spaq]",
                              "not_computed", ""]]
    assert len(per_item) == 1 + 3 + 2 + 4 + 1
    summary = list(csv.DictReader(io.StringIO(files["summary.csv"])))
    rows, reasons = rt.summarise(its, BOOT)
    assert [(r["model"], r["trajectory"], r["metric"], r["n"]) for r in summary] == [
        (r["model"], r["trajectory"], r["metric"], str(r["n"])) for r in rows]
    assert files["summary.csv"].splitlines()[0] == "model,context,trajectory,metric,higher_is_better,mean,lo,hi,n"
    js = files["summary.json"]
    assert js["rows"] == rows and js["reasons"] == reasons and js["settings"]["bootstrap"] == BOOT
    assert js["context_ran"] == [] and files["summary.md"] == rt.markdown(rows, reasons, {})


def test_table_files_record_what_each_label_ran():
    told = {"told": {"kv_frames": 8}}
    its = [item(model="b", metrics={ENV: env(0.5)}, context_ran=told), item(model="a", metrics={ENV: env(0.5)},
                                                                            context_ran={"told": {"window": 2}})]
    js = rt.table_files(its, EvalConfig(bootstrap=BOOT))["summary.json"]
    assert js["context_ran"] == [{"model": "a", "context": "fullkv", "ran": {"told": {"window": 2}}},
                                 {"model": "b", "context": "fullkv", "ran": told}]


def test_context_ran_keeps_the_first_record_that_told_the_model_something():
    first, second = {"told": {"kv_frames": 8}}, {"told": {"kv_frames": 9}}
    its = [item(), item(case="a", context_ran="fullkv"), item(case="b", context_ran={"told": {}}),
           item(case="c", context_ran=first), item(case="d", context_ran=second),
           item(ctx="fov", context_ran={"policy": "fov"})]
    assert rt.context_ran(its) == {("m", "fullkv"): first}


def test_describe_ran_names_the_knobs_the_shared_launch_and_the_regime():
    assert rt.describe_ran({"told": {"kv_frames": 8, "window": 4}}) == "kv_frames 8; window 4"
    rec = {"told": {"kv_frames": 8}, "same_launch_as": {"policy": "fullkv", "why": "no cap below 8"},
           "trained_regime": ["trained at 33 frames (a.py:1)", "window 4 (b.py:2)"]}
    assert rt.describe_ran(rec) == ("kv_frames 8. The same launch as context=fullkv: no cap below 8. Outside "
                                    "upstream's trained or documented regime: trained at 33 frames (a.py:1); window 4 "
                                    "(b.py:2)")


def _intro_end(lines: list[str]) -> int:
    return lines.index("## model=m context=fullkv") if "## model=m context=fullkv" in lines else 4


def test_the_summary_markdown_is_one_table_per_model_and_context():
    def row(model, traj, metric, mean, n):
        return {"model": model, "context": "fullkv", "trajectory": traj, "metric": metric, "mean": mean, "lo": 0.0,
                "hi": 1.0, "n": n}

    rows = [row("m", "lrud", ENV, 0.5, 3), row("m", "all", ENV, 0.5, 5), row("m", "lrlr", ENV, 0.25, 2),
            row("m", "lrlr", RPE, 1.0, 1), row("m", "all", RPE, 1.0, 1), row("n", "lrlr", ENV, NAN, 0),
            row("n", "all", ENV, NAN, 0)]
    ran = {("m", "fullkv"): {"told": {"kv_frames": 8}}, ("x", "fullkv"): {"told": {"w": 1}}}
    md = rt.markdown(rows, {"b[x]": "why b", "a[x]": "why a"}, ran)
    lines = md.split("\n")
    assert lines[0] == "# Evaluation summary" and lines[1] == ""
    assert lines[_intro_end(lines) - 1] == ""
    assert lines[_intro_end(lines):] == [
        "## model=m context=fullkv", "", "What ran: kv_frames 8.", "",
        "| metric | lrlr | lrud | all |", "| --- | --- | --- | --- |",
        f"| {RPE} ↓ | 1.000 (n=1) |  | 1.000 (n=1) |",
        f"| {ENV} ↑ | 0.250 (n=2) | 0.500 [0.000, 1.000] (n=3) | 0.500 [0.000, 1.000] (n=5) |", "",
        "## model=n context=fullkv", "", "| metric | lrlr | all |", "| --- | --- | --- |",
        f"| {ENV} ↑ | n/a | n/a |", "",
        "## Not computed", "", "| metric [backbone] | reason |", "| --- | --- |", "| a[x] | why a |", "| b[x] | why b |",
        "", f"Metric ids: {', '.join(sorted(METRICS))}.", ""]


def test_the_summary_markdown_without_reasons_or_launch_records():
    rows = [{"model": "m", "context": "fullkv", "trajectory": "all", "metric": ENV, "mean": 0.5, "lo": 0.0, "hi": 1.0,
             "n": 1}]
    for md in (rt.markdown(rows, {}), rt.markdown(rows, {}, {})):
        lines = md.split("\n")
        assert lines[_intro_end(lines):] == [
            "## model=m context=fullkv", "", "| metric | all |", "| --- | --- |", f"| {ENV} ↑ | 0.500 (n=1) |", "",
            f"Metric ids: {', '.join(sorted(METRICS))}.", ""]
        assert "Not computed" not in md and "What ran" not in md


# -- run tables: dynamic rows and files ------------------------------------------------------------------------------


def _dynamic_items() -> list[Item]:
    return [item(case="d0", family="dynamic", metrics={DYN: dyn(0.5, True), ENV: env(0.3)}),
            item(case="d1", family="dynamic", metrics={DYN: dyn(0.0, False)}),
            item(case="d2", family="dynamic", metrics={DYN: dyn(None, status=Status.FAILED)}),
            item(case="d3", family="dynamic", metrics={DYN: MetricEntry("dynamic.overall", "Qwen/Qwen3.8-27B",
                                                                        Status.FAILED, 0.9, details={"started": True})}),
            item(case="d4", traj="lrud", family="dynamic", metrics={DYN: dyn(None, status=Status.NOT_COMPUTED)}),
            item(case="d5", ctx="fov", family="dynamic", metrics={DYN: MetricEntry(
                "dynamic.overall", "Qwen/Qwen3.8-27B", Status.COMPUTED, None)})]


def test_dynamic_rows_count_videos_without_an_answer_apart():
    rows = rt.dynamic_rows(_dynamic_items()[:5])
    got = [(r["judge"], r["model"], r["context"], r["trajectory"], r["n"], r["started"], r["p_start"],
            r["without_answer"]) for r in rows]
    q = "Qwen/Qwen3.8-27B"
    assert got[0] == (q, "m", "fullkv", "all", 2, 1, 0.5, 3)
    assert got[1] == (q, "m", "fullkv", "lrlr", 2, 1, 0.5, 2)
    assert got[2][:6] == (q, "m", "fullkv", "lrud", 0, 0) and math.isnan(got[2][6]) and got[2][7] == 1
    assert len(rows) == 3 and rows[0]["S_cond"] == 0.5 and rows[0]["S_gated"] == 0.25 and rows[0]["M_score"] == 0.5
    only = rt.dynamic_rows(_dynamic_items()[:2])
    assert [r["without_answer"] for r in only] == [0, 0]


def test_a_computed_judge_entry_without_a_value_has_no_answer():
    (r,) = [r for r in rt.dynamic_rows(_dynamic_items()[5:]) if r["trajectory"] == "lrlr"]
    assert (r["context"], r["n"], r["without_answer"]) == ("fov", 0, 1)


@pytest.mark.parametrize("x, want", [(None, "n/a"), (NAN, "n/a"), (0.5, "0.500"), (-0.0001, "0.000")])
def test_a_dynamic_number_prints_na_when_it_is_not_one(x, want):
    assert rt._f(x) == want


def test_dynamic_files_are_none_without_a_dynamic_item_else_a_table():
    assert rt.dynamic_files([item(metrics={ENV: env(0.5)})]) == {}
    files = rt.dynamic_files(_dynamic_items()[:5])
    assert json.dumps(files["dynamic.json"]) == json.dumps({"rows": rt.dynamic_rows(_dynamic_items()[:5])})
    lines = files["dynamic.md"].split("\n")
    assert lines[0] == "# Dynamic memory" and files["dynamic.md"].endswith("|\n")
    assert lines[-4:] == ["| Qwen/Qwen3.8-27B | m | fullkv | all | 2 | 1 | 0.500 | 0.500 | 0.250 | 0.500 | 3 |",
                          "| Qwen/Qwen3.8-27B | m | fullkv | lrlr | 2 | 1 | 0.500 | 0.500 | 0.250 | 0.500 | 2 |",
                          "| Qwen/Qwen3.8-27B | m | fullkv | lrud | 0 | 0 | n/a | n/a | n/a | n/a | 1 |", ""]


# -- a small study: three models, their policies, three trajectories --------------------------------------------------
#
# alpha: fullkv and fov (fov 0.05 above fullkv on every video), lrlr / lrud, and lrlrlr under fullkv only; beta: fullkv
# (0.2 below alpha, but 0.9 on the dynamic case, where alpha's seed 1 starts the event and scores 0.75); gamma: fov and sliding (sliding 0.35 below fov), no fullkv, no qualification details. Cases env_0
# (every revisit qualifies; drops 0.1 on lrlr, 0.2 on lrud) env_1 (only the first qualifies; drops 1.2 times as much)
# and d0 (dynamic); seeds 1 and 2.

BASE = {"alpha": 0.8, "beta": 0.6, "gamma": 0.5}
OFFSET = {"fullkv": 0.0, "fov": 0.05, "sliding": -0.3}
DROP = {"lrlr": [0.0, 0.1], "lrud": [0.0, 0.2], "lrlrlr": [0.0, 0.05, 0.1]}
LAYOUT = {("alpha", "fullkv"): ("lrlr", "lrud", "lrlrlr"), ("alpha", "fov"): ("lrlr", "lrud"),
          ("beta", "fullkv"): ("lrlr", "lrud"), ("gamma", "fov"): ("lrlr", "lrud"),
          ("gamma", "sliding"): ("lrlr", "lrud")}
REGIME = {"told": {"kv_frames": 8}, "trained_regime": ["trained at 33 frames (a.py:1)"]}


def per_revisit(model: str, ctx: str, traj: str, case: int, seed: int) -> list[float]:
    b = BASE[model] + OFFSET[ctx] + 0.01 * case + 0.001 * seed
    return [b - d * (1 + 0.2 * case) for d in DROP[traj]]


def world_items() -> list[Item]:
    out = []
    for (model, ctx), trajs in LAYOUT.items():
        for traj in trajs:
            for seed in (1, 2):
                extra = {"settings": {"return_tolerances_deg": [30.0, 15.0]},
                         "timings_generation": {"generate_s": 10.0 - OFFSET[ctx] * 10 + seed}}
                if (model, ctx) == ("alpha", "fullkv"):
                    extra["context_ran"] = REGIME
                for c in (0, 1):
                    pr = per_revisit(model, ctx, traj, c, seed)
                    qual = None if model == "gamma" else [(90.0, 2.0 if k == 0 or c == 0 else 40.0)
                                                         for k in range(len(pr))]
                    details = {"pose_source": "da3"} if model == "alpha" else {}
                    metrics = {ENV: env(float(np.mean(pr)), pr, qual, **details)}
                    if model == "alpha":
                        metrics[RPE] = rpe(0.1 + 0.01 * c)
                    out.append(item(model, ctx, traj, f"env_{c}", seed, metrics, **extra))
                if model == "alpha":
                    d = dyn(0.75 if seed == 1 else 0.0, seed == 1)
                elif model == "beta":
                    d = dyn(0.9)  # no event-start decision recorded
                else:
                    d = nc("dynamic.overall", "Qwen/Qwen3.8-27B", "no judge server")
                out.append(item(model, ctx, traj, "d0", seed, {DYN: d}, family="dynamic", **extra))
    return out


@pytest.fixture(scope="module")
def world():
    s = study(world_items())
    an = Analyses(s)
    return s, an, Builder(s, an)


@pytest.fixture(scope="module")
def tables(world):
    return {t.id: t for t in world[2].all_tables()}


def rows_of(t: Table) -> dict:
    return {k: cells for k, cells in t.rows}


# -- tables: columns and the Table defaults ---------------------------------------------------------------------------


def test_a_column_arrow_says_which_way_is_better():
    assert [Column("k", "k", d).arrow for d in (None, True, False)] == ["", " ↑", " ↓"]


def test_a_metric_column_carries_its_direction_and_chance_level():
    c = metric_column(ENV)
    assert (c.key, c.label, c.higher_is_better) == (ENV, f"{ENV} (chance ≈ 0.10)", True)
    assert (metric_column(RPE).label, metric_column(RPE).higher_is_better) == (RPE, False)
    assert metric_column("new.metric[x]").higher_is_better is None


def test_a_table_marks_nothing_folds_nothing_and_ranks_every_row_together_by_default():
    cols = [Column("a", "a", True)]
    rows = [(("g", "x"), {"a": mc(0.9)}), (("h", "y"), {"a": mc(0.1)}), (("g", "z"), {"a": Cell(reason="r")})]
    t = Table("t", "t", "", ["m", "c"], cols, rows, separated=lambda a, b, k: True)
    assert (t.mark_best, t.fold, t.rank_within) == (False, False, 0)
    assert t.ranks() == {} and t.shown_columns == cols and t.folded() == []
    t.mark_best = True
    assert t.ranks() == {(0, "a"): 1}  # x and y compete although their first keys differ


# -- tables: folding and footnotes ------------------------------------------------------------------------------------


def _fold_table(**kw) -> Table:
    cols = [Column(k, k, True) for k in ("a", "b", "c", "d", "e")]
    rows = [(("x",), {"a": Cell(), "b": mc(0.5), "c": 3, "e": Cell(reason="e: nothing")}),
            (("y",), {"a": Cell(reason="a: why a"), "b": Cell(reason="b: why b"), "c": 4, "d": Cell(reason="r"),
                      "e": Cell(reason="e: other")})]
    return Table("t", "t", "", ["m"], cols, rows, **kw)


def test_a_column_not_computed_in_any_row_folds_into_one_line_per_reason():
    t = _fold_table(fold=True)
    assert [c.key for c in t.shown_columns] == ["b", "c", "d"]  # d is missing in a row: not n/c everywhere
    assert t.folded() == [("why a", ["a"]), ("nothing", ["e"])]  # the first row with a reason, key prefix dropped
    assert [c.key for c in _fold_table().shown_columns] == ["a", "b", "c", "d", "e"] and _fold_table().folded() == []


def test_a_folded_column_without_any_reason_is_not_computed_and_reasons_group_columns():
    cols = [Column(k, k) for k in ("p", "q", "r")]
    t = Table("t", "t", "", ["m"], cols, [(("x",), {"p": Cell(), "q": Cell(reason="same"), "r": Cell(reason="r: same")})],
              fold=True)
    assert t.folded() == [("not computed", ["p"]), ("same", ["q", "r"])] and t.shown_columns == []
    assert Table("t", "t", "", ["m"], cols, fold=True).shown_columns == cols  # no rows: nothing is n/c
    assert Table("t", "t", "", ["m"], cols, fold=True).folded() == []


def test_a_reason_keeps_its_prefix_unless_it_is_the_columns_key():
    cols = [Column("ab", "ab"), Column("b", "b")]
    t = Table("t", "t", "", ["m"], cols, [(("x",), {"ab": Cell(reason="a: x"), "b": Cell(reason="b:x")})], fold=True)
    assert t.folded() == [("a: x", ["ab"]), ("b:x", ["b"])]


def _weights(key: str, root: str) -> Cell:
    return Cell(reason=f"{key}: backbone 'x' (y): {WEIGHTS_MISSING}{root}/w.pt (missing w.pt); fetch them")


def test_columns_without_weights_fold_into_one_line_naming_their_roots():
    cols = [Column(k, k) for k in ("a", "b", "c", "d")]
    row = {"a": _weights("a", "/w/one"), "b": Cell(reason="b: other"), "c": _weights("c", "/w/two"),
           "d": _weights("d", "/w/one")}
    (first, why), second = Table("t", "t", "", ["m"], cols, [(("x",), row)], fold=True).folded()
    assert why == ["a", "d", "c"] and second == ("other", ["b"])  # a and d: the same words
    assert first == ("their backbones' weights are not installed under /w/one, /w/two: `python -m harness weights "
                     "list` shows each backbone, what is missing and the command that fetches it (nothing is "
                     "downloaded during a run)")
    one = Table("t", "t", "", ["m"], cols[:2], [(("x",), row)], fold=True).folded()
    assert one == [(f"backbone 'x' (y): {WEIGHTS_MISSING}/w/one/w.pt (missing w.pt); fetch them", ["a"]),
                   ("other", ["b"])]
    bare = {k: Cell(reason=f"{k}: backbone {k}: {WEIGHTS_MISSING}") for k in ("a", "b")}
    (line, keys), = Table("t", "t", "", ["m"], cols[:2], [(("x",), bare)], fold=True).folded()
    assert keys == ["a", "b"] and line.startswith("their backbones' weights are not installed: `python")


def test_footnotes_number_the_reasons_of_shown_n_c_cells_in_order():
    cols = [Column(k, k) for k in ("a", "b", "c")]
    rows = [(("x",), {"a": Cell(reason="one"), "b": mc(0.5, reason="a note on a value"), "c": 5}),
            (("y",), {"a": Cell(reason="two"), "b": Cell(), "c": Cell(reason="one")}),
            (("z",), {"a": Cell(reason="three"), "b": Cell(reason="two")})]
    assert Table("t", "t", "", ["m"], cols, rows).footnotes() == {"one": 1, "two": 2, "three": 3}
    folded = [(("x",), {"a": Cell(reason="gone"), "b": Cell(reason="b1")}), (("y",), {"a": Cell(), "b": mc(0.5)})]
    assert Table("t", "t", "", ["m"], cols[:2], folded, fold=True).footnotes() == {"b1": 1}


# -- tables: ranks ----------------------------------------------------------------------------------------------------


def _ranked(cells: list, sep=lambda a, b, k: True, direction: bool | None = True, **kw) -> dict:
    t = Table("t", "t", "", ["m", "c"], [Column("a", "a", direction)],
              [((f"r{i}", "x"), {"a": c}) for i, c in enumerate(cells)], mark_best=True, separated=sep, **kw)
    return t.ranks()


def test_the_best_of_two_separated_rows_is_marked_and_nothing_second():
    assert _ranked([mc(0.2), mc(0.9)]) == {(1, "a"): 1}
    assert _ranked([mc(0.2), mc(0.9)], direction=False) == {(0, "a"): 1}
    assert _ranked([mc(0.2), mc(0.9)], direction=None) == {}


def test_rows_rank_only_on_mean_cells_with_a_value():
    assert _ranked([mc(0.9), Cell(reason="x")]) == {}
    assert _ranked([mc(0.9), mc(0.5, kind="ratio")]) == {}
    assert _ranked([mc(0.9), 7]) == {}
    assert _ranked([mc(0.9)]) == {}


def test_equal_means_or_no_separation_mark_nothing():
    assert _ranked([mc(0.5), mc(0.5)]) == {}
    assert _ranked([mc(0.5), mc(0.9)], sep=lambda a, b, k: False) == {}
    assert _ranked([mc(0.9), mc(0.5), mc(0.1)], sep=lambda a, b, k: {a[0], b[0]} != {"r0", "r2"}) == {}


def test_the_best_must_be_separated_from_every_row_and_the_second_from_every_row_below():
    top = lambda a, b, k: {a[0], b[0]} != {"r1", "r2"}
    assert _ranked([mc(0.9), mc(0.5), mc(0.1)], sep=top) == {(0, "a"): 1}
    assert _ranked([mc(0.9), mc(0.5), mc(0.1)]) == {(0, "a"): 1, (1, "a"): 2}
    assert _ranked([mc(0.5), mc(0.1), mc(0.9)], direction=False) == {(1, "a"): 1, (0, "a"): 2}
    not_top = lambda a, b, k: {a[0], b[0]} != {"r0", "r1"}
    assert _ranked([mc(0.9), mc(0.5), mc(0.1)], sep=not_top) == {}
    second = lambda a, b, k: {a[0], b[0]} != {"r1", "r2"}
    assert _ranked([mc(0.9), mc(0.5), mc(0.3), mc(0.1)], sep=second) == {(0, "a"): 1}
    assert _ranked([mc(0.9), mc(0.5), mc(0.3), mc(0.1)]) == {(0, "a"): 1, (1, "a"): 2}


def test_rows_compete_within_their_group():
    sep = lambda a, b, k: True
    cols = [Column("a", "a", True)]
    rows = [(("m1", "x"), {"a": mc(0.9)}), (("m2", "x"), {"a": mc(0.1)}), (("m1", "y"), {"a": mc(0.2)}),
            (("m2", "y"), {"a": mc(0.3)})]
    t = Table("t", "t", "", ["m", "c"], cols, rows, mark_best=True, separated=sep, rank_within=1)
    assert t.ranks() == {(0, "a"): 1, (3, "a"): 1}
    t.rank_within = 0
    assert t.ranks() == {(0, "a"): 1, (3, "a"): 2}
    assert Table("t", "t", "", ["m"], cols, rows, separated=sep).ranks() == {}  # mark_best off


# -- tables: regime notes ---------------------------------------------------------------------------------------------


def test_regime_notes_name_each_row_launched_outside_the_trained_regime():
    groups = {"a": ("fullkv", [item(), item(case="x", context_ran={"told": {}}), item(case="y", context_ran="s"),
                               item(case="z", context_ran={"trained_regime": ["one (a.py:1)", "two (b.py:2)"]}),
                               item(case="w", context_ran={"trained_regime": ["later"]})]),
              "b": ("fov", [item(model="b", context_ran={"told": {"x": 1}})])}
    assert regime_notes(groups) == [("a (fullkv), outside upstream's trained or documented regime: one (a.py:1); "
                                     "two (b.py:2)")]


# -- the builder: separations and column order ------------------------------------------------------------------------


def test_a_builder_uses_the_analyses_it_is_given_or_its_own(world):
    s, an, b = world
    assert b.an is an and b.study is s
    own = Builder(s)
    assert isinstance(own.an, Analyses) and own.an.study is s


RET = "departure.return_visible[pixel-thumb16]"
PSNR = "diagnostic.revisit_psnr[pixels]"


def _hand_analyses(s: Study) -> Analyses:
    """Comparisons written by hand: alpha's policies separate RET and RPE (fullkv vs fov), beta's nothing; the models
    separate ENV and SWEEP (SWEEP in no table's keys) but not RPE."""
    sep, tie = Cell(0.1, 0.05, 0.15, 5), Cell(0.1, -0.05, 0.2, 5)

    def comp(kind, model, names, metrics):
        pairs = [(names[1], names[0])]
        return Comparison(kind, model, names, {n: {} for n in names}, pairs,
                          {k: MetricComparison(k, {n: mc(0.5 + 0.1 * i) for i, n in enumerate(names)},
                                               {pairs[0]: d}) for k, d in metrics.items()})

    an = Analyses(s)
    an.comparisons = [comp("policies", "delta", ["alpha", "beta"], {ENV: tie}),  # contexts named like models
                      comp("models", None, ["alpha", "beta"], {ENV: sep, SWEEP: sep, RPE: tie}),
                      comp("policies", "beta", ["fullkv", "fov"], {RET: tie, RPE: tie}),
                      comp("policies", "alpha", ["fullkv", "fov"], {RET: sep, RPE: sep})]
    return an


def test_models_are_separated_by_the_models_comparison_only(world):
    b = Builder(world[0], _hand_analyses(world[0]))
    a, z = ("alpha", "fullkv"), ("beta", "fullkv")
    assert b._models_separated(a, z, ENV) is True
    assert b._models_separated(z, a, ENV) is True
    assert b._models_separated(a, z, RPE) is False  # the policies separate RPE, the models do not
    assert b._models_separated(a, z, RET) is False  # not a models metric
    assert b._models_separated(a, ("gamma", "fov"), ENV) is False  # gamma is no contender
    assert b._models_separated(("gamma", "fov"), a, ENV) is False


def test_policies_are_separated_by_that_models_policy_comparison_only(world):
    b = Builder(world[0], _hand_analyses(world[0]))
    assert b._policies_separated(("alpha", "fullkv"), ("alpha", "fov"), RET) is True
    assert b._policies_separated(("alpha", "fov"), ("alpha", "fullkv"), RET) is True
    assert b._policies_separated(("beta", "fullkv"), ("beta", "fov"), RET) is False
    assert b._policies_separated(("alpha", "fullkv"), ("beta", "fov"), RET) is False
    assert b._policies_separated(("alpha", "fullkv"), ("alpha", "fov"), ENV) is False
    assert b._policies_separated(("gamma", "fullkv"), ("gamma", "fov"), RET) is False


def test_the_metrics_that_separate_lead_in_the_verdicts_order(world):
    b = Builder(world[0], _hand_analyses(world[0]))
    keys = [PSNR, RPE, ENV, RET]
    assert b._separating_first(keys, "models") == [ENV, PSNR, RPE, RET]
    assert b._separating_first(keys, "policies") == [RPE, RET, PSNR, ENV]  # RPE: 20 resolutions, RET: 10
    assert b._separating_first([PSNR], "models") == [PSNR]


# -- the builder: per-model tables ------------------------------------------------------------------------------------


def test_the_main_table_is_each_model_at_its_main_context_with_the_paper_columns(world, tables):
    s, _, b = world
    t = tables["main"]
    assert [k for k, _ in t.rows] == [("alpha", "fullkv"), ("beta", "fullkv"), ("gamma", "fov")]  # gamma: no fullkv
    assert [c.key for c in t.columns] == ["videos", DYN] + [k for k in s.table2_keys if k != DYN]  # DYN separates
    assert (t.mark_best, t.fold, t.separated) == (True, True, b._models_separated)
    r = rows_of(t)
    assert [r[k]["videos"] for k in r] == [18, 12, 12]
    assert r[("alpha", "fullkv")][DYN].mean == pytest.approx(0.375) and r[("alpha", "fullkv")][DYN].n == 6
    assert r[("gamma", "fov")][DYN].reason == f"{DYN}: not computed: no judge server"
    assert t.notes == ["alpha (fullkv), outside upstream's trained or documented regime: trained at 33 frames (a.py:1)"]
    assert t.ranks() == {(1, DYN): 1}  # beta 0.9 on every dynamic video


def test_the_variants_table_leads_with_what_separates_the_models_and_marks_the_best(tables):
    t = tables["variants"]
    assert [c.key for c in t.columns] == ["videos", ENV, RPE]
    r = rows_of(t)
    want = np.mean([np.mean(per_revisit("alpha", "fullkv", tr, c, sd)) for tr in ("lrlr", "lrud", "lrlrlr")
                    for c in (0, 1) for sd in (1, 2)])
    assert r[("alpha", "fullkv")][ENV].mean == pytest.approx(want) and r[("alpha", "fullkv")][ENV].n == 12
    assert r[("beta", "fullkv")][RPE].reason.startswith(f"{RPE}: no video of this group has this metric")
    assert t.ranks() == {(0, ENV): 1, (1, ENV): 2}
    assert len(t.notes) == 1


def test_a_trajectory_table_falls_back_to_a_models_first_context_and_marks_nothing(world, tables):
    s = world[0]
    assert [k for k in tables if k.startswith("trajectory_")] == ["trajectory_lrlr", "trajectory_lrlrlr",
                                                                   "trajectory_lrud"]
    t = tables["trajectory_lrud"]
    assert [k for k, _ in t.rows] == [("alpha", "fullkv"), ("beta", "fullkv"), ("gamma", "fov")]
    assert [c.key for c in t.columns] == ["videos"] + s.table2_keys + [ENV, RPE]
    assert t.separated is None and t.ranks() == {} and t.notes == [] and (t.mark_best, t.fold) == (True, True)
    r = rows_of(t)
    assert r[("gamma", "fov")][ENV].mean == pytest.approx(np.mean([np.mean(per_revisit("gamma", "fov", "lrud", c, sd))
                                                                   for c in (0, 1) for sd in (1, 2)]))
    assert [k for k, _ in tables["trajectory_lrlrlr"].rows] == [("alpha", "fullkv")]
    assert rows_of(tables["trajectory_lrlrlr"])[("alpha", "fullkv")]["videos"] == 6


def test_a_trajectory_table_leaves_out_the_variants_no_video_computed():
    its = [item(metrics={ENV: env(0.5), RPE: nc("camera.rpe_rot", "classical-opencv", "no poses")}),
           item(ctx="sliding", metrics={ENV: env(0.25)}), item(ctx="fov", metrics={ENV: env(0.75)})]
    (t,) = Builder(study(its, main_context="none")).trajectory_tables()
    assert [c.key for c in t.columns][-1] == ENV and RPE not in [c.key for c in t.columns]
    assert [k for k, _ in t.rows] == [("m", "fov")] and rows_of(t)[("m", "fov")][ENV].mean == 0.75


def test_the_group_summary_has_one_row_per_model_context_trajectory_and_seed(world, tables):
    t = tables["groups"]
    assert [c.key for c in t.columns] == ["videos"] + world[0].computed_keys
    assert len(t.rows) == 11 * 2 and t.rows[0][0] == ("alpha", "fov", "lrlr", 1)
    r = rows_of(t)[("beta", "fullkv", "lrud", 2)]
    assert r["videos"] == 3 and r[ENV].n == 2
    assert r[ENV].mean == pytest.approx(np.mean([np.mean(per_revisit("beta", "fullkv", "lrud", c, 2)) for c in (0, 1)]))
    assert r[RPE].reason.startswith(f"{RPE}: no video of this group")


def test_the_seed_spread_is_the_mean_sd_and_range_of_the_seed_means(tables):
    t = tables["seed_spread"]
    assert t.columns[0].key == "seeds" and len(t.rows) == 11
    r = rows_of(t)[("alpha", "fullkv", "lrlr")]
    assert r["seeds"] == "1, 2"
    d = r[DYN]  # seed 1 started (0.75), seed 2 did not (0.0)
    assert (d.mean, d.lo, d.hi, d.n, d.kind) == (0.375, 0.0, 0.75, 2, "spread")
    assert d.sd == pytest.approx(np.std([0.75, 0.0], ddof=1))
    assert [(u.value, u.role) for u in d.units] == [(0.75, "seed=1"), (0.0, "seed=2")]
    e = r[ENV]
    per_seed = [np.mean([np.mean(per_revisit("alpha", "fullkv", "lrlr", c, sd)) for c in (0, 1)]) for sd in (1, 2)]
    assert e.mean == pytest.approx(np.mean(per_seed)) and (e.lo, e.hi) == pytest.approx((min(per_seed), max(per_seed)))
    none = rows_of(t)[("beta", "fullkv", "lrlr")][RPE]
    assert none.kind == "spread" and none.reason.startswith(f"{RPE}: no video of this group") and none.n == 0


def test_one_seed_has_no_spread():
    its = [item(metrics={ENV: env(0.25)}), item(case="env_1", metrics={ENV: env(0.75)})]
    (t,) = [Builder(study(its)).seed_spread()]
    c = t.rows[0][1][ENV]
    assert (c.mean, c.lo, c.hi, c.n, c.sd, t.rows[0][1]["seeds"]) == (0.5, 0.5, 0.5, 1, 0.0, "1")


# -- the builder: the policy comparison --------------------------------------------------------------------------------


def test_the_policy_table_puts_what_separates_first_then_latency_and_speedup(tables):
    t = tables["context"]
    assert [c.key for c in t.columns] == ["videos", ENV, "latency_s", "speedup", DYN, RPE]
    assert [c.higher_is_better for c in t.columns][2:4] == [False, True]
    assert (t.mark_best, t.fold, t.rank_within) == (True, True, 1)
    assert [k for k, _ in t.rows] == [("alpha", "fullkv"), ("alpha", "fov"), ("gamma", "sliding"), ("gamma", "fov")]
    r = rows_of(t)
    assert r[("alpha", "fov")]["videos"] == 12 and r[("alpha", "fov")]["latency_s"].mean == pytest.approx(11.0)
    assert r[("alpha", "fov")]["speedup"].mean == pytest.approx(11.5 / 11.0)
    assert r[("gamma", "fov")]["speedup"].reason == "speedup: no FullKV run of this model to compare with"
    assert r[("gamma", "fov")][RPE].reason.startswith(f"{RPE}: no video of this group")  # not in gamma's comparison
    assert r[("alpha", "fov")][ENV].n == 8 and r[("alpha", "fov")][RPE].mean == pytest.approx(0.105)
    assert t.ranks() == {(1, ENV): 1, (3, ENV): 1} and t.notes == []


def test_the_paired_policy_table_has_one_row_per_pair(tables):
    t = tables["context_paired"]
    assert [c.key for c in t.columns] == [ENV, DYN, RPE] and t.fold
    assert [k for k, _ in t.rows] == [("alpha", "fov", "fullkv"), ("gamma", "fov", "sliding")]
    r = rows_of(t)
    assert r[("alpha", "fov", "fullkv")][ENV].mean == pytest.approx(0.05)
    assert list(r[("gamma", "fov", "sliding")]) == [ENV] and r[("gamma", "fov", "sliding")][ENV].mean == \
        pytest.approx(0.35)


def test_without_policies_the_comparison_tables_say_so():
    b = Builder(study([item(metrics={ENV: env(0.5, [0.6, 0.4])})]))
    t = b.context_table()
    assert t.rows == [] and t.notes == ["No model was run under two or more context policies on matched items."]
    assert b.context_paired().rows == []
    x = b.cross_axis_table()
    assert x.rows == [] and x.notes == [("No model has matched LRLR and LRUD videos of the same case and seed in these "
                                        "runs (run trajectories=[lrlr,lrud]).")]
    d = b.dynamic_table()
    assert d.rows == [] and d.notes == ["No dynamic-family case in these runs."]


# -- the builder: multi-revisit, cross-axis, coverage, dynamic -------------------------------------------------------


def test_the_multi_revisit_table_has_a_column_per_window_of_the_longest_series(tables):
    t = tables["multi_revisit"]
    assert [c.key for c in t.columns] == ["windows", "w1", "w2", "w3", "decay", "decay_q"]
    r = rows_of(t)
    three = r[("alpha", "fullkv", "lrlrlr", ENV)]
    assert three["windows"] == "R1, R2, R3" and three["w3"].n == 4
    two = r[("alpha", "fullkv", "lrlr", ENV)]
    assert two["windows"] == "R1, R2" and two["w3"].reason == f"{ENV} has 2 windows on lrlr"
    assert two["decay"].mean == pytest.approx(np.mean([0.1, 0.12])) and two["decay"].n == 4
    assert two["decay_q"].n == 2 and two["decay_q"].mean == pytest.approx(0.1)
    assert r[("gamma", "fov", "lrlr", ENV)]["decay_q"].reason == "no video with every window qualified"
    assert len(t.rows) == 11


def test_without_a_revisit_series_the_multi_revisit_table_has_three_windows():
    t = Builder(study([item(metrics={RPE: rpe(0.5)})])).multi_revisit_table()
    assert [c.key for c in t.columns] == ["windows", "w1", "w2", "w3", "decay", "decay_q"] and t.rows == []


def test_the_cross_axis_table_pairs_lrlr_and_lrud(tables):
    t = tables["cross_axis"]
    assert [k for k, _ in t.rows][:2] == [("alpha", "fov", ENV), ("alpha", "fullkv", ENV)] and len(t.rows) == 5
    r = rows_of(t)[("alpha", "fullkv", ENV)]
    assert r["d_lrlr"].mean == pytest.approx(0.11) and r["d_lrud"].mean == pytest.approx(0.22)
    assert r["delta"].mean == pytest.approx(0.11) and r["delta_q"].n == 2 and r["delta_q"].mean == pytest.approx(0.1)
    assert rows_of(t)[("gamma", "fov", ENV)]["delta_q"].reason == "no qualified pair"
    assert t.notes == []


def test_the_coverage_table_has_a_rate_per_tolerance_and_says_which_slots_are_missing(tables):
    t = tables["coverage"]
    assert [c.key for c in t.columns] == ["D", "Q30", "Q15", "tracking"]
    r = rows_of(t)
    a = r[("alpha", "fullkv", "lrlrlr")]
    assert (a["D"].mean, a["D"].n, a["D"].kind) == (1.0, 12, "rate")
    assert a["Q30"].mean == pytest.approx(8 / 12) and a["Q15"].kind == "rate"
    assert a["tracking"].reason == "tracking: no entity target slot in this group"
    assert r[("gamma", "fov", "lrlr")]["D"].reason == "D: no environment return slot in this group"
    assert r[("gamma", "fov", "lrlr")]["Q15"].reason == "Q15: no environment return slot in this group"
    assert len(t.rows) == 11


def test_the_dynamic_table_decomposes_started_videos_and_says_why_it_cannot(tables):
    t = tables["dynamic"]
    r = rows_of(t)
    a = r[("alpha", "fullkv", DYN)]
    assert a["videos"] == 6 and (a["started"].mean, a["started"].n, a["started"].kind) == (3.0, 6, "count")
    assert a["p_start"].mean == 0.5 and a["s_cond"].mean == 0.75 and a["s_cond"].n == 3
    assert a["s_gated"].mean == pytest.approx(0.375) and a["s_gated"].n == 6
    b = r[("beta", "fullkv", DYN)]
    why = f"{DYN}: computed without the event-start decision ('started'), so it cannot be decomposed"
    assert b["videos"] == 4 and all(b[c].reason == why for c in ("started", "p_start", "s_cond", "s_gated"))
    g = r[("gamma", "sliding", DYN)]
    assert all(g[c].reason == f"{DYN}: not computed: no judge server" for c in ("started", "p_start", "s_cond",
                                                                                 "s_gated"))
    assert len(t.rows) == 5 and t.notes == []


def test_a_dynamic_group_decomposes_its_computed_entries_only():
    its = [item(case="d0", family="dynamic", metrics={DYN: dyn(0.5, True), ENV: env(0.5)}),
           item(case="d1", family="dynamic", metrics={DYN: MetricEntry("dynamic.overall", "Qwen/Qwen3.8-27B",
                                                                       Status.FAILED, None, details={"started": False})}),
           item(case="d2", family="dynamic", metrics={DYN: dyn(0.25)}),
           item(ctx="fov", case="d0", family="dynamic", metrics={DYN: dyn(0.25)}),
           item(ctx="fov", case="d1", family="dynamic", metrics={DYN: nc("dynamic.overall", "Qwen/Qwen3.8-27B", "x")}),
           item(ctx="sliding", case="d0", family="dynamic", metrics={DYN: dyn(0.0, False)})]
    t = Builder(study(its)).dynamic_table()
    r = rows_of(t)
    a = r[("m", "fullkv", DYN)]
    assert a["videos"] == 3 and (a["started"].mean, a["started"].n) == (1.0, 1) and a["s_gated"].n == 1
    assert r[("m", "fov", DYN)]["p_start"].reason.endswith("computed without the event-start decision ('started'), "
                                                           "so it cannot be decomposed")
    s = r[("m", "sliding", DYN)]
    assert (s["started"].mean, s["started"].n) == (0.0, 1) and s["s_cond"].reason == "no started video"


def test_all_tables_come_in_page_order(tables):
    assert list(tables) == ["main", "variants", "context", "context_paired", "trajectory_lrlr", "trajectory_lrlrlr",
                            "trajectory_lrud", "multi_revisit", "cross_axis", "coverage", "dynamic", "groups",
                            "seed_spread"]


# -- run tables: analyses.{json,md} ----------------------------------------------------------------------------------


def test_the_analyses_json_holds_the_comparisons_with_their_paired_differences(world):
    an = world[1]
    j = rt.analyses_json(an, [15.0])
    pol = j["context_policies"]
    assert [(c["kind"], c["model"], c["policies"], c["matched_items"]) for c in pol] == [
        ("policies", "alpha", ["fullkv", "fov"], 12), ("policies", "gamma", ["sliding", "fov"], 12)]
    env_row = pol[0]["metrics"][ENV]
    assert set(env_row) == {"fullkv", "fov", "paired_vs_fullkv", "paired"}
    assert env_row["paired_vs_fullkv"]["fov"]["diff"] == pytest.approx(0.05) and env_row["fov"]["n"] == 8
    assert env_row["paired"][0]["a"] == "fov" and env_row["paired"][0]["b"] == "fullkv"
    assert set(pol[1]["metrics"][ENV]) == {"sliding", "fov", "paired_vs_sliding", "paired"}
    assert pol[0]["speedup_vs_fullkv"]["fov"] == pytest.approx(11.5 / 11.0) and "speedup_vs_fullkv" not in pol[1]
    assert pol[0]["latency_s"]["fov"]["mean"] == pytest.approx(11.0)
    models = j["model_comparison"]
    assert models["kind"] == "models" and models["policies"] == ["alpha", "beta", "gamma"]
    assert models["metrics"][ENV]["paired"][0] == {"a": "beta", "b": "alpha", **{
        k: pytest.approx(v) for k, v in {"diff": -0.2, "lo": -0.2, "hi": -0.2}.items()}, "n": 8}
    assert [v["metric"] for v in j["verdict"]] == [ENV, ENV, DYN, ENV]  # the paper's metrics first


def test_the_analyses_json_holds_decay_cross_axis_coverage_and_sensitivity(world):
    j = rt.analyses_json(world[1], [15.0, 5.0])
    mr = {(x["model"], x["context"], x["trajectory"]): x for x in j["multi_revisit"]}
    a = mr[("alpha", "fullkv", "lrlr")]
    assert a["windows"] == ["R1", "R2"] and a["qualified_n"] == 2
    assert a["decay_R1_minus_RK"]["mean"] == pytest.approx(0.11) and a["qualified_decay"]["n"] == 2
    assert a["per_revisit_mean"] == pytest.approx([np.mean([per_revisit("alpha", "fullkv", "lrlr", c, sd)[k]
                                                             for c in (0, 1) for sd in (1, 2)]) for k in (0, 1)])
    assert mr[("gamma", "fov", "lrlr")]["qualified_decay"] is None
    ca = {(x["model"], x["context"]): x for x in j["cross_axis"]}
    assert ca[("alpha", "fullkv")]["d_lrlr"] == pytest.approx(0.11) and ca[("alpha", "fullkv")]["d_lrud"] == \
        pytest.approx(0.22)
    assert ca[("alpha", "fullkv")]["cases"] == ["env_0", "env_1"] and ca[("alpha", "fullkv")]["qualified_cases"] == \
        ["env_0"]
    assert ca[("alpha", "fullkv")]["qualified_delta_axis"]["n"] == 2 and ca[("gamma", "fov")]["qualified_delta_axis"] \
        is None
    cov = {(x["model"], x["context"], x["trajectory"]): x for x in j["qualification"]}
    assert cov[("alpha", "fullkv", "lrlrlr")] == {"model": "alpha", "context": "fullkv", "trajectory": "lrlrlr",
                                                  "pose_source": "da3", "departure": {"rate": 1.0, "n": 12},
                                                  "Q30": {"rate": pytest.approx(8 / 12), "n": 12},
                                                  "Q15": {"rate": pytest.approx(8 / 12), "n": 12}}
    assert cov[("gamma", "fov", "lrlr")] == {"model": "gamma", "context": "fov", "trajectory": "lrlr",
                                             "pose_source": "-"}
    assert len(j["qualification"]) == 11
    assert list(j["tolerance_sensitivity"]) == ["15", "5"]
    strict = j["tolerance_sensitivity"]["5"]["multi_revisit"]
    assert {(x["model"], x["context"], x["trajectory"]): x["qualified_n"] for x in strict}[("alpha", "fullkv",
                                                                                            "lrlr")] == 2
    assert j["sources"] == world[1].sources


def test_the_analyses_files_use_every_tolerance_but_the_first():
    an = Analyses(study([item(metrics={ENV: env(0.5, [0.6, 0.4], [(90.0, 2.0), (90.0, 20.0)])})]))
    files = rt.analyses_files(an, EvalConfig(bootstrap=BOOT))
    assert list(files["analyses.json"]["tolerance_sensitivity"]) == ["15", "5"]
    assert files["analyses.md"] == rt.analyses_markdown(an)


def test_the_analyses_markdown_has_a_section_per_analysis(world):
    an = world[1]
    md = rt.analyses_markdown(an)
    lines = md.split("\n")
    assert lines[:3] == ["# Analyses", "", "## Verdict"]
    c = an.comparisons[0]
    m = c.metrics[ENV]
    i = lines.index("## Comparison: context policies of alpha (12 matched items; paired differences)")
    assert lines[i + 1:i + 9] == [
        "", "| metric | fullkv | fov | fov - fullkv |", "| --- | --- | --- | --- |",
        f"| {ENV} | {fmt(m.means['fullkv'])} | {fmt(m.means['fov'])} | {fmt(m.diffs[('fov', 'fullkv')])} |",
        *(f"| {k} | {fmt(c.metrics[k].means['fullkv'])} | {fmt(c.metrics[k].means['fov'])} | "
          f"{fmt(c.metrics[k].diffs[('fov', 'fullkv')])} |" for k in (DYN, RPE)),
        f"| generation time [s] | {fmt(c.latency['fullkv'])} | {fmt(c.latency['fov'])} |",
        f"| speedup vs FullKV | {fmt(c.speedup['fullkv'])} | {fmt(c.speedup['fov'])} |"]
    assert lines[i + 9] == ""
    g = lines.index("## Comparison: context policies of gamma (12 matched items; paired differences)")
    assert lines[g + 5].startswith("| generation time [s] |") and lines[g + 6] == ""
    assert lines[lines.index("## Comparison: models (12 matched items; paired differences)") + 2] == \
        "| metric | alpha | beta | gamma | beta - alpha | gamma - alpha | gamma - beta |"
    s = lines.index("## Sources (pose / depth / mask source of every metric used below; ground truth never scores)")
    assert lines[s + 5:s + 10] == ["| --- | --- | --- | --- |", f"| {RPE} | - | - | - |", f"| {DYN} | - | - | - |",
                                  f"| {ENV} | da3 | - | - |", ""]
    mr = lines.index("## Multi-revisit decay (first - last window; qualified = every window pose-qualified or "
                     "tracking-supported)")
    x = next(x for x in an.multi_revisit if x.group == ("alpha", "fullkv", "lrlrlr", ENV))
    assert (f"| alpha | fullkv | lrlrlr | {ENV} | R1 {fixed(mean_cell(x.per_window[0], BOOT).mean)}, "
            f"R2 {fixed(mean_cell(x.per_window[1], BOOT).mean)}, R3 {fixed(mean_cell(x.per_window[2], BOOT).mean)} | "
            f"{fmt(mean_cell(x.decay, BOOT))} | 2 | {fmt(mean_cell(x.decay_q, BOOT))} |") in lines
    gamma = next(x for x in lines if x.startswith(f"| gamma | fov | lrlr | {ENV} | R1 0.556, R2 "))
    assert gamma.endswith(" | 0 | n/a |")
    assert lines[mr + 15] == "" and lines[mr + 14].startswith("| gamma | sliding | lrud |")
    ca = lines.index("## Cross-axis excess degradation Δ_axis = d_LRUD - d_LRLR (d = R1 - R2, matched case and seed)")
    assert lines[ca + 4].startswith(f"| alpha | fov | {ENV} | 0.110 [") and lines[ca + 4].endswith(" | 2 | 0.100 (n=2) |")
    assert lines[ca + 7].startswith(f"| gamma | fov | {ENV} |") and lines[ca + 7].endswith(" | 0 | n/a |")
    assert lines[ca + 9] == ""
    cov = lines.index("## Departure / return coverage (appendix G.1)")
    assert lines[cov + 2] == "- alpha / fov / lrlr (poses: da3): departure: 100% of 8, Q30: 75% of 8, Q15: 75% of 8"
    assert lines[cov + 9] == "- gamma / fov / lrlr (poses: -): no revisit slot"
    assert lines[cov + 12] == "- gamma / sliding / lrud (poses: -): no revisit slot" and lines[cov + 13:] == [""]


def test_the_analyses_markdown_of_one_video_has_no_comparison_and_no_revisit_series():
    md = rt.analyses_markdown(Analyses(study([item(metrics={RPE: rpe(0.5)})])))
    assert md.endswith("## Departure / return coverage (appendix G.1)\n\n- m / fullkv / lrlr (poses: -): no revisit "
                       "slot\n")
    assert f"| {RPE} | - | - | - |" in md
    for head in ("## Comparison", "## Multi-revisit", "## Cross-axis"):
        assert head not in md
    empty = rt.analyses_markdown(Analyses(study([])))
    assert "## Sources" not in empty and "## Departure" not in empty
