"""The rules of the study's analyses, its verdict in words, the paper comparison and the study's groupings
(evaluate/reporting/analyses.py, verdict.py, paper.py, study.py), one at a time and in this process: every input is
a handful of :class:`~evaluate.reporting.collect.Item` built in memory (no files, no report), or cells written by
hand where a rule reads cells only, so each expected number and string can be checked by hand. Values are sums of
powers of two (exact in binary) and every per-video difference is constant where an interval is printed, so the
bootstrap interval is the difference itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from evaluate.catalog import TABLE2_ORDER, spec_of, table2_key
from evaluate.reporting import paper
from evaluate.reporting.analyses import (
    Analyses,
    Comparison,
    MetricComparison,
    Verdict,
    VerdictLine,
    chance_text,
    comparisons,
    coverage,
    cross_axis,
    cross_axis_units,
    multi_revisit,
    revisit_units,
    sources,
    tolerances,
    verdict,
    window_labels,
)
from evaluate.reporting.cells import Cell, Term, Unit
from evaluate.reporting.collect import Item
from evaluate.reporting.paper import Ours, _backbone_matches, _models_mean, comparison_table, load_paper_numbers
from evaluate.reporting.study import Study, contender_order, metric_order
from evaluate.reporting.tables import Builder
from evaluate.reporting.verdict import (
    NO_COMPARISON_HINT,
    answer,
    chain,
    headline,
    latency_text,
    line_data,
    verdict_lines,
    verdict_markdown,
)
from evaluate.results import ItemResult, MetricEntry, Status

BOOT = {"n": 40, "seed": 0}
VIS = "environment.visible[pixel-thumb16]"  # a variant: higher is better, resolution 0.01, chance 0.10
DEP = "departure.return_visible[pixel-thumb16]"  # a variant: higher is better, resolution 0.01, chance 0.06
RPE = "camera.rpe_rot[classical-opencv]"  # a variant: lower is better, resolution 0.005, no chance level
T2 = "environment.visible[dinov2]"  # a Table 2 key, no chance level
DEPTH = "environment.depth[da3]"  # a Table 2 key with a chance level (0.00)
DYN = "dynamic.overall[Qwen/Qwen3.8-27B]"  # a Table 2 key
UNKNOWN = "novel.metric[x]"  # a metric this catalog does not know: no direction
PHASES = {"A": [0, 8], "B": [8, 16]}
GOOD = {"departure_deg": 40.0, "return_error_deg": 10.0}  # departed and came back within 30 degrees
AWAY = {"departure_deg": 40.0, "return_error_deg": 40.0}  # departed, did not come back within 30 degrees
STAY = {"departure_deg": 10.0, "return_error_deg": 0.0}  # never departed


# -- building blocks --------------------------------------------------------------------------------------------


def entry(key: str, value: float | None = 0.5, **details) -> MetricEntry:
    """A computed entry of ``key`` (``metric[backbone]`` or a bare metric id)."""
    metric, _, bb = key.partition("[")
    return MetricEntry(metric, bb.rstrip("]"), Status.COMPUTED, value, details=details)


def missing(key: str, reason: str | None = "backbone 'x' is not available", status=Status.NOT_COMPUTED,
            value: float | None = None, **details) -> MetricEntry:
    metric, _, bb = key.partition("[")
    return MetricEntry(metric, bb.rstrip("]"), status, value, reason=reason, details=details)


def make_item(*entries: MetricEntry, model="m", ctx="fullkv", traj="lrlr", case="c0", seed=1, family="environment",
              phases=None, revisits=2, settings=None, latency=None) -> Item:
    extra = {}
    if settings is not None:
        extra["settings"] = settings
    if latency is not None:
        extra["timings_generation"] = {"generate_s": latency}
    res = ItemResult(item={"model": model, "context": ctx, "seed": seed, "trajectory": traj, "case_id": case},
                     case_family=family, num_revisits=revisits, phases=dict(phases or {}),
                     metrics={e.key: e for e in entries}, extra=extra)
    return Item("run", Path("run"), Path(model, ctx, f"seed-{seed}", traj, case), res)


def study_of(*items: Item, **kw) -> Study:
    return Study(list(items), BOOT, str, **kw)


def fpath(it: Item) -> str:
    """The file every provenance term of ``it`` names (``rel`` is ``str``)."""
    return str(it.metrics_path)


def values(units: list[Unit]) -> list[float]:
    return [u.value for u in units]


def cell(mean: float, lo: float, hi: float, n: int = 3, **kw) -> Cell:
    return Cell(mean, lo, hi, n, **kw)


def flat(mean: float, n: int = 3, kind: str = "mean") -> Cell:
    """A cell whose interval is its mean (every unit the same value)."""
    return Cell(mean, mean, mean, n, kind=kind)


def metric(key: str, means: dict[str, Cell | float], diffs: dict[tuple[str, str], Cell]) -> MetricComparison:
    return MetricComparison(key, {k: (v if isinstance(v, Cell) else flat(v)) for k, v in means.items()}, diffs)


def comparison(kind: str, contenders: list[str], pairs: list[tuple[str, str]], metrics: list[MetricComparison],
               model: str | None = "m", videos: int = 2, dynamic: int = 0, latency=None, speedup=None) -> Comparison:
    """A comparison written by hand: ``videos`` matched videos per contender, the last ``dynamic`` of a dynamic
    case."""
    matched = {c: {("lrlr", f"c{i}", 1): make_item(model=c, case=f"c{i}",
                                                    family="dynamic" if i >= videos - dynamic else "environment")
                   for i in range(videos)} for c in contenders}
    return Comparison(kind, model, contenders, matched, pairs, {m.key: m for m in metrics}, dict(latency or {}),
                      dict(speedup or {}))


def analyses_with(study: Study, comps: list[Comparison]) -> Analyses:
    """The analyses of ``study`` with hand-written comparisons (the verdict is computed from them as usual)."""
    an = Analyses(study)
    an.comparisons = comps  # a cached_property: the instance attribute is what every reader gets
    return an


# -- window labels ----------------------------------------------------------------------------------------------


def test_a_window_is_named_after_the_phase_of_its_first_frame():
    m = entry(VIS, per_revisit=[0.5, 0.25, 0.125], revisit_frames=[[7, 9], [], [9, 10]])
    assert window_labels(make_item(m, phases=PHASES), m) == ["A", "R2", "B"]  # an empty window: its rank


def test_without_windows_the_return_frames_name_the_revisits():
    m = entry(VIS, per_revisit=[0.5, 0.25], return_frames=[3, 12])
    assert window_labels(make_item(m, phases=PHASES), m) == ["A", "B"]
    m = entry(VIS, per_revisit=[0.5, 0.25], return_frames=[3, 20])  # frame 20 lies outside every phase
    assert window_labels(make_item(m, phases=PHASES), m) == ["A", "R2"]


def test_windows_are_ranks_when_no_frame_is_recorded_or_the_frames_do_not_match_the_values():
    m = entry(VIS, per_revisit=[0.5, 0.25])
    assert window_labels(make_item(m, phases=PHASES), m) == ["R1", "R2"]
    m = entry(VIS, per_revisit=[0.5, 0.25], return_frames=[3])
    assert window_labels(make_item(m, phases=PHASES), m) == ["R1", "R2"]
    m = entry(VIS, return_frames=[3, 12])  # no per-revisit values: no window
    assert window_labels(make_item(m, phases=PHASES), m) == []


# -- multi-revisit ----------------------------------------------------------------------------------------------


def test_revisit_units_hold_each_window_and_the_first_minus_last_decay():
    two = make_item(entry(VIS, per_revisit=[0.75, 0.5], qualification=[GOOD, AWAY]), case="c1")
    three = make_item(entry(VIS, per_revisit=[1.0, 0.75, 0.25], qualification=[GOOD, GOOD, GOOD]), case="c2")
    one = make_item(entry(VIS, per_revisit=[0.5], qualification=[GOOD]), case="c3")
    absent = make_item(entry(DEP), case="c4")
    flat_entry = make_item(entry(VIS, 0.5), case="c5")  # a value without per-revisit values
    s = study_of(two, three, one, absent, flat_entry)
    labels, per_w, dec, dec_q = revisit_units(s, [two, three, one, absent, flat_entry], VIS)
    assert labels == ["R1", "R2", "R3"]
    assert [values(w) for w in per_w] == [[0.75, 1.0], [0.5, 0.75], [0.25]]
    assert per_w[2][0].terms == [Term(fpath(three), VIS, "per_revisit[2]", 1.0)]
    assert values(dec) == [0.25, 0.75]
    assert dec[0].terms == [Term(fpath(two), VIS, "per_revisit[0]", 1.0), Term(fpath(two), VIS, "per_revisit[1]", -1.0)]
    assert dec[1].terms == [Term(fpath(three), VIS, "per_revisit[0]", 1.0),
                            Term(fpath(three), VIS, "per_revisit[2]", -1.0)]
    assert dec_q == [dec[1]]  # the two-window video does not come back within 30 degrees at its second revisit


def test_the_qualified_subset_follows_the_return_tolerance():
    two = make_item(entry(VIS, per_revisit=[0.75, 0.5], qualification=[GOOD, AWAY]))
    assert values(revisit_units(study_of(two), [two], VIS)[3]) == []
    assert values(revisit_units(study_of(two, tolerance_deg=40), [two], VIS)[3]) == [0.25]  # 40 deg: back in time
    assert values(revisit_units(study_of(two, departure_deg=45), [two], VIS)[3]) == []  # 40 deg is not away


def test_the_window_labels_are_those_of_the_first_video_with_the_most_windows():
    named = make_item(entry(VIS, per_revisit=[0.75, 0.5], return_frames=[3, 12]), phases=PHASES, case="c1")
    bare = make_item(entry(VIS, per_revisit=[0.5, 0.25]), phases=PHASES, case="c2")
    assert revisit_units(study_of(named, bare), [named, bare], VIS)[0] == ["A", "B"]
    assert revisit_units(study_of(named, bare), [bare, named], VIS)[0] == ["R1", "R2"]


def test_multi_revisit_has_one_series_per_group_and_metric_with_a_decay():
    its = [make_item(entry(VIS, per_revisit=[1.0, 0.5]), entry(DEP, per_revisit=[0.5, 0.5]), case="c0"),
           make_item(entry(VIS, per_revisit=[0.75, 0.5]), entry(DEP, 0.5), case="c1"),
           make_item(entry(VIS, per_revisit=[0.5, 0.5]), ctx="fov"),
           make_item(entry(VIS, per_revisit=[0.5]), model="a", traj="lrud")]  # one window: no decay, no series
    out = multi_revisit(study_of(*its))
    assert [r.group for r in out] == [("m", "fov", "lrlr", VIS), ("m", "fullkv", "lrlr", VIS),
                                      ("m", "fullkv", "lrlr", DEP)]
    r = out[1]
    assert (r.model, r.context, r.trajectory, r.key, r.labels) == ("m", "fullkv", "lrlr", VIS, ["R1", "R2"])
    assert values(r.decay) == [0.5, 0.25] and [values(w) for w in r.per_window] == [[1.0, 0.75], [0.5, 0.5]]
    assert r.decay_q == []  # no qualification recorded
    assert values(out[2].decay) == [0.0]


# -- cross-axis -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def axis_items() -> dict[str, Item]:
    def pair(case: str, lrlr: list[MetricEntry], lrud: list[MetricEntry]) -> dict[str, Item]:
        return {f"{case}/lrlr": make_item(*lrlr, traj="lrlr", case=case),
                f"{case}/lrud": make_item(*lrud, traj="lrud", case=case)}

    out: dict[str, Item] = {}
    out.update(pair("c0", [entry(VIS, per_revisit=[1.0, 0.75], qualification=[GOOD, GOOD])],
                    [entry(VIS, per_revisit=[0.75, 0.25], qualification=[GOOD, GOOD])]))
    out.update(pair("c1", [entry(VIS, per_revisit=[0.5, 0.5], qualification=[GOOD, GOOD])],
                    [entry(VIS, per_revisit=[1.0, 0.25], qualification=[STAY, GOOD])]))  # revisit 1 never left
    out.update(pair("c4", [entry(VIS, per_revisit=[0.5])], [entry(VIS, per_revisit=[0.5, 0.25])]))
    out.update(pair("c5", [entry(VIS, per_revisit=[0.5, 0.25])], [entry(VIS, 0.5)]))
    out.update(pair("c6", [entry(DEP)], [entry(VIS, per_revisit=[0.5, 0.25])]))
    out["c2/lrlr"] = make_item(entry(VIS, per_revisit=[0.5, 0.25]), traj="lrlr", case="c2")  # no LRUD partner
    out["c3/lrud"] = make_item(entry(VIS, per_revisit=[0.5, 0.25]), traj="lrud", case="c3")  # no LRLR partner
    out["c0/lrlrlr"] = make_item(entry(VIS, per_revisit=[1.0, 0.0]), traj="lrlrlr", case="c0")  # not an axis
    return out


def test_cross_axis_pairs_lrlr_and_lrud_of_the_same_case_and_seed(axis_items):
    its = list(axis_items.values())
    r = cross_axis_units(study_of(*its), its, VIS, "m", "fullkv")
    assert (r.model, r.context, r.key) == ("m", "fullkv", VIS)
    assert r.pairs == [("c0", 1), ("c1", 1)] and r.qualified_pairs == [("c0", 1)]
    assert values(r.d_lrlr) == [0.25, 0.0] and values(r.d_lrud) == [0.5, 0.75]
    assert values(r.delta) == [0.25, 0.75] and r.delta_q == [r.delta[0]]
    lrlr, lrud = fpath(axis_items["c0/lrlr"]), fpath(axis_items["c0/lrud"])
    assert r.d_lrlr[0].terms == [Term(lrlr, VIS, "per_revisit[0]", 1.0), Term(lrlr, VIS, "per_revisit[1]", -1.0)]
    assert r.delta[0].terms == [Term(lrud, VIS, "per_revisit[0]", 1.0), Term(lrud, VIS, "per_revisit[1]", -1.0),
                                Term(lrlr, VIS, "per_revisit[0]", -1.0), Term(lrlr, VIS, "per_revisit[1]", 1.0)]


def test_cross_axis_lists_the_groups_and_metrics_with_a_pair(axis_items):
    its = list(axis_items.values()) + [make_item(entry(VIS, per_revisit=[0.5, 0.25]), model="b", traj="lrlr")]
    out = cross_axis(study_of(*its))
    assert [(r.model, r.context, r.key) for r in out] == [("m", "fullkv", VIS)]  # DEP and model b have no pair


# -- coverage ---------------------------------------------------------------------------------------------------


def test_tolerances_are_the_recorded_ones_largest_first():
    its = [make_item(settings={"return_tolerances_deg": [10, 30]}), make_item(case="c1"),
           make_item(case="c2", settings={"return_tolerances_deg": [45]})]
    assert tolerances(study_of(*its)) == [45.0, 30.0, 10.0]  # c1 records none: the study's tolerance
    assert tolerances(study_of(make_item(), tolerance_deg=20)) == [20.0]


def test_coverage_counts_departed_returned_and_tracked_revisits():
    track = {"t1": [{"departed": True, "returned": True}, {"departed": True, "returned": False}]}
    first = make_item(entry(VIS, qualification=[GOOD, {"departure_deg": 20.0, "return_error_deg": 5.0}],
                            pose_source="da3"),
                      entry("object.appearance[x]", tracking_evidence=track),
                      settings={"return_tolerances_deg": [30, 10]})
    edge = make_item(entry(VIS, qualification=[{"departure_deg": 30.0, "return_error_deg": 30.0}],
                           return_pose_estimator="vggt"), case="c1")
    far = make_item(entry(VIS, qualification=[{"departure_deg": 50.0, "return_error_deg": 50.0}]), case="c2")
    bare = make_item(entry(VIS), traj="lrud")
    out = coverage(study_of(first, edge, far, bare))
    assert [(c.model, c.context, c.trajectory) for c in out] == [("m", "fullkv", "lrlr"), ("m", "fullkv", "lrud")]
    c = out[0]
    assert c.pose_sources == ["?", "da3", "vggt"]
    assert {k: values(v) for k, v in c.slots.items()} == {
        "D": [1.0, 0.0, 1.0, 1.0], "Q30": [1.0, 0.0, 1.0, 0.0], "Q10": [1.0, 0.0, 0.0, 0.0], "tracking": [1.0, 0.0]}
    assert c.slots["D"][1].terms == [Term(fpath(first), VIS, "departed[1]@30", 1.0)]
    assert c.slots["Q10"][0].terms == [Term(fpath(first), VIS, "returned[0]@30,10", 1.0)]
    assert c.slots["tracking"][1].terms == [Term(fpath(first), "object.appearance[x]", "tracked[1]", 1.0)]
    assert (out[1].pose_sources, out[1].slots) == ([], {})


# -- one metric across contenders -------------------------------------------------------------------------------


def test_the_reversed_difference_is_the_stored_one_negated_interval_and_terms_included():
    stored = Cell(0.25, 0.125, 0.5, 4, [Unit(0.25, [Term("a", VIS, "value", 1.0), Term("b", VIS, "value", -1.0)])])
    mc = MetricComparison(VIS, {}, {("a", "b"): stored})
    assert mc.diff("a", "b") is stored
    back = mc.diff("b", "a")
    assert (back.mean, back.lo, back.hi, back.n, back.reason, back.kind) == (-0.25, -0.5, -0.125, 4, None, "mean")
    assert back.units == [Unit(-0.25, [Term("a", VIS, "value", -1.0), Term("b", VIS, "value", 1.0)])]


def test_the_ranking_follows_the_metric_direction_ties_by_name_without_missing_values():
    means = {"x": flat(0.5), "y": flat(0.75), "z": flat(0.5), "w": Cell(reason="not run")}
    assert metric(VIS, means, {}).ranking() == ["y", "x", "z"]
    assert metric(RPE, means, {}).ranking() == ["x", "z", "y"]  # lower is better
    assert metric(UNKNOWN, means, {}).ranking() == ["y", "x", "z"]  # no direction: highest first
    assert metric(VIS, means, {}).higher_is_better is True and metric(UNKNOWN, means, {}).higher_is_better is None


def test_the_ranking_tells_apart_the_largest_finite_means():
    # finite means: the sort key must not overflow into a tie broken by name
    assert metric(VIS, {"a": flat(1.0e308), "b": flat(1.5e308)}, {}).ranking() == ["b", "a"]
    assert metric(RPE, {"a": flat(1.5e308), "b": flat(1.0e308)}, {}).ranking() == ["b", "a"]


@pytest.mark.parametrize("d, want", [
    (cell(0.5, 0.25, 0.75), True),
    (cell(-0.5, -0.75, -0.25), True),
    (cell(0.5, 0.0, 0.75), False),  # the interval touches 0
    (cell(-0.5, -0.75, 0.0), False),
    (cell(0.25, -0.25, 0.75), False),  # the interval holds 0
    (cell(1.5, 1.25, 1.75), True),
    (cell(0.01, 0.005, 0.015), True),  # exactly one resolution
    (cell(0.005, 0.001, 0.009), False),  # below the resolution: a tie
    (cell(0.5, 0.25, 0.75, n=2), False),  # two pairs: no interval
    (cell(0.5, 0.25, 0.75, kind="count", reason="no value"), False),  # a cell with a reason has no value
])
def test_two_contenders_are_separated_only_by_an_interval_clear_of_zero_and_a_resolution(d, want):
    assert metric(VIS, {}, {("a", "b"): d}).separated("a", "b") is want


def test_neighbours_relate_by_ten_resolutions_one_resolution_or_a_tie():
    mc = metric(VIS, {}, {("a", "b"): cell(0.1, 0.05, 0.15), ("a", "c"): cell(0.09, 0.05, 0.125),
                          ("b", "c"): cell(0.005, 0.001, 0.009)})
    assert [mc.relation("a", "b"), mc.relation("b", "a"), mc.relation("a", "c"), mc.relation("b", "c")] == \
        ["≫", "≫", ">", "≈"]


def test_a_metric_separates_when_one_pair_does_and_it_has_a_direction():
    sep, tie = cell(0.5, 0.25, 0.75), cell(0.25, -0.25, 0.75)
    assert metric(VIS, {}, {("a", "b"): sep, ("a", "c"): tie}).separates is True
    assert metric(VIS, {}, {("a", "b"): tie}).separates is False
    assert metric(UNKNOWN, {}, {("a", "b"): sep}).separates is False


def test_strength_is_the_largest_separated_difference_in_resolutions():
    mc = metric(VIS, {}, {("a", "b"): cell(0.25, 0.125, 0.375), ("a", "c"): cell(-0.5, -0.75, -0.25),
                          ("b", "c"): cell(0.75, -0.25, 1.0)})  # the largest difference is not separated
    assert mc.strength() == pytest.approx(50.0)
    assert metric(VIS, {}, {("a", "b"): cell(0.75, -0.25, 1.0)}).strength() == 0.0


# -- comparisons ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, videos, dynamic, want", [
    ("policies", 2, 0, "context policies of m (2 matched videos)"),
    ("models", 1, 0, "models (1 matched video)"),
    ("policies", 3, 1, ("context policies of m (3 matched videos, 1 of them a dynamic case, left out of the "
                       "static-content metrics)")),
    ("models", 3, 2, "models (3 matched videos, 2 of them dynamic cases, left out of the static-content metrics)"),
])
def test_a_comparison_header_counts_its_matched_and_dynamic_videos(kind, videos, dynamic, want):
    c = comparison(kind, ["a", "b"], [("b", "a")], [], videos=videos, dynamic=dynamic)
    assert c.header == want and c.matched_videos == videos
    assert [it.case_id for it in c.items("b")] == [f"c{i}" for i in range(videos)]


def test_a_comparison_without_matched_videos_has_none():
    c = Comparison("models", None, [], {}, [])
    assert c.matched_videos == 0 and c.header == "models (0 matched videos)"


@pytest.fixture(scope="module")
def policy_study() -> Study:
    """Model m under FullKV, Sliding and FoV on c0..c3 (c9 under FullKV only); model a under FullKV on c0, c1.
    Sliding is 0.25 below FullKV on every video, FoV 0.0625; generation takes 4, 2 and 1 s."""
    its = []
    for ctx, off, lat in (("fullkv", 0.0, 4.0), ("sliding", -0.25, 2.0), ("fov", -0.0625, 1.0)):
        for i in range(4):
            its.append(make_item(entry(VIS, 0.5 + 0.125 * i + off), entry(RPE, 0.25), missing(T2), ctx=ctx,
                                 case=f"c{i}", latency=lat))
    its.append(make_item(entry(VIS, 0.0), case="c9", latency=8.0))
    its += [make_item(entry(VIS, 0.125 * i), model="a", case=f"c{i}", latency=3.0) for i in range(2)]
    return study_of(*its)


def test_policies_are_compared_on_matched_videos_baselines_first(policy_study):
    comps = comparisons(policy_study)
    assert [(c.kind, c.model) for c in comps] == [("policies", "m"), ("models", None)]
    c = comps[0]
    assert c.contenders == ["fullkv", "sliding", "fov"] and c.title == "context policies of m"
    assert c.pairs == [("sliding", "fullkv"), ("fov", "fullkv"), ("fov", "sliding")]
    assert list(c.metrics) == [VIS, RPE]  # T2 is computed nowhere
    vis = c.metrics[VIS]
    assert (vis.means["fullkv"].mean, vis.means["fullkv"].n) == (0.6875, 4)  # c9 is not matched
    d = vis.diffs[("sliding", "fullkv")]
    assert (d.mean, d.lo, d.hi, d.n) == (-0.25, -0.25, -0.25, 4)
    assert d.units[0].terms == [Term(fpath(c.matched["sliding"][("lrlr", "c0", 1)]), VIS, "value", 1.0),
                                Term(fpath(c.matched["fullkv"][("lrlr", "c0", 1)]), VIS, "value", -1.0)]
    assert vis.diffs[("fov", "sliding")].mean == 0.1875
    assert {p: x.mean for p, x in c.latency.items()} == {"fullkv": 4.0, "sliding": 2.0, "fov": 1.0}
    assert c.latency["fov"].units[0].terms == [Term(fpath(c.items("fov")[0]), None, "timings_generation.generate_s")]
    assert {p: (x.mean, x.kind) for p, x in c.speedup.items()} == {"fullkv": (1.0, "ratio"), "sliding": (2.0, "ratio"),
                                                                   "fov": (4.0, "ratio")}


def test_models_are_compared_at_their_main_context_without_a_speedup(policy_study):
    c = comparisons(policy_study)[1]
    assert (c.contenders, c.pairs, c.title, c.matched_videos) == (["a", "m"], [("m", "a")], "models", 2)
    assert c.metrics[VIS].diffs[("m", "a")].mean == 0.5  # (0.5 - 0) and (0.625 - 0.125)
    assert c.latency["a"].mean == 3.0 and c.speedup == {}


def test_a_speedup_needs_policies_with_fullkv():
    no_fullkv = [make_item(entry(VIS), ctx=ctx, case=f"c{i}", latency=1.0) for ctx in ("sliding", "fov")
                 for i in range(2)]
    (c,) = comparisons(study_of(*no_fullkv))
    assert c.contenders == ["sliding", "fov"] and c.speedup == {} and c.latency["fov"].mean == 1.0
    named = [make_item(entry(VIS), model=m, latency=1.0) for m in ("fullkv", "zeta")]  # a model named fullkv
    (c,) = comparisons(study_of(*named))
    assert c.kind == "models" and c.speedup == {}


def test_one_model_under_one_policy_compares_nothing():
    assert comparisons(study_of(make_item(entry(VIS)), make_item(entry(VIS), case="c1"))) == []


# -- the verdict ------------------------------------------------------------------------------------------------


def _sep(d: float) -> Cell:
    return cell(d, d - d / 4, d + d / 4) if d > 0 else cell(d, d + d / 4, d - d / 4)


def test_the_verdict_puts_paper_metrics_first_then_the_clearest_and_lists_the_quiet_ones():
    metrics = [metric(VIS, {"a": 0.5, "b": 1.0}, {("b", "a"): _sep(0.5)}),
               metric(RPE, {"a": 0.5, "b": 0.45}, {("b", "a"): _sep(-0.05)}),
               metric(DEP, {"a": 0.5, "b": 1.0}, {("b", "a"): _sep(0.5)}),
               metric(T2, {"a": 0.5, "b": 0.52}, {("b", "a"): _sep(0.02)}),
               metric(UNKNOWN, {"a": 0.5, "b": 1.0}, {("b", "a"): _sep(0.5)}),  # no direction: never separates
               metric("environment.depth[x]", {"a": 0.5, "b": 0.5}, {("b", "a"): cell(0.0, -0.1, 0.1)}),
               metric("object.appearance[x]", {"a": 0.5, "b": Cell(reason="n/c")}, {("b", "a"): Cell(reason="x")})]
    first = comparison("policies", ["a", "b"], [("b", "a")], metrics)
    second = comparison("models", ["a", "b"], [("b", "a")], [metric(VIS, {"a": 0.5, "b": 1.0}, {("b", "a"): _sep(0.5)}),
                                                           metric(DEP, {"a": 0.5, "b": 0.5}, {("b", "a"): flat(0.0)})])
    v = verdict([first, second])
    assert [(x.comparison is first, x.key) for x in v.lines] == [(True, T2), (True, DEP), (True, VIS), (True, RPE),
                                                                (False, VIS)]
    assert v.quiet == {0: [UNKNOWN, "environment.depth[x]"], 1: [DEP]}
    assert v.metrics == [T2, DEP, VIS, RPE]
    assert v.comparisons == [first, second]


def test_a_verdict_line_ranks_and_relates_its_contenders():
    mc = metric(VIS, {"a": 0.5, "b": 0.75, "c": 0.52}, {("b", "a"): _sep(0.25), ("c", "a"): cell(0.02, -0.1, 0.1),
                                                        ("c", "b"): _sep(-0.23)})
    line = VerdictLine(comparison("policies", ["a", "b", "c"], [("b", "a"), ("c", "a"), ("c", "b")], [mc]), mc)
    assert (line.key, line.ranking, line.best) == (VIS, ["b", "c", "a"], "b")
    assert line.relations() == ["≫", "≈"]


def test_a_verdict_of_nothing_is_empty():
    v = verdict([])
    assert (v.lines, v.quiet, v.metrics) == ([], {}, [])
    assert Verdict([], [], {}).metrics == []


@pytest.mark.parametrize("key, want", [(DEPTH, " (chance ≈ 0.00)"), (VIS, " (chance ≈ 0.10)"), (T2, ""),
                                       (UNKNOWN, "")])
def test_chance_text_names_the_metrics_chance_level(key, want):
    assert chance_text(key) == want


# -- sources and the cached analyses ----------------------------------------------------------------------------


def test_sources_lists_each_computed_metric_with_the_estimators_it_used():
    its = [make_item(entry(VIS, pose_source="da3", depth_source="da3-depth"), entry(DEP)),
           make_item(entry(VIS, pose_source="vggt", mask_source="sam2"), missing(T2, pose_source="x"), case="c1")]
    out = sources(study_of(*its))
    assert list(out) == [DEP, VIS]
    assert out == {DEP: {}, VIS: {"pose": ["da3", "vggt"], "depth": ["da3-depth"], "mask": ["sam2"]}}


def test_analyses_are_computed_once_and_follow_another_tolerance():
    it = make_item(entry(VIS, per_revisit=[0.75, 0.5], qualification=[GOOD, AWAY]))
    an = Analyses(study_of(it))
    assert an.multi_revisit is an.multi_revisit and an.verdict is an.verdict
    assert an.cross_axis == [] and an.comparisons == [] and an.sources == {VIS: {}}
    assert [values(c.slots["Q30"]) for c in an.coverage] == [[1.0, 0.0]]
    wide = an.at_tolerance(45.0)
    assert (wide.study.tol, wide.study.dep, an.study.tol) == (45.0, 30.0, 30.0)
    assert values(an.multi_revisit[0].decay_q) == [] and values(wide.multi_revisit[0].decay_q) == [0.25]


# -- the study: columns, units, reasons -------------------------------------------------------------------------


def test_metric_keys_follow_the_papers_table_then_the_id():
    keys = [UNKNOWN, VIS, "aaa.zzz", "camera.rpe_rot", "quality.imaging[x]", T2]
    assert sorted(keys, key=metric_order) == ["quality.imaging[x]", T2, VIS, "camera.rpe_rot", "aaa.zzz", UNKNOWN]
    assert metric_order(VIS) == (TABLE2_ORDER.index("environment.visible"), "environment.visible", VIS)
    assert metric_order(UNKNOWN) == (len(TABLE2_ORDER), "novel.metric", UNKNOWN)


def test_contenders_put_the_baselines_first():
    assert contender_order(["fov", "sliding", "a", "fullkv", "zz"]) == ["fullkv", "sliding", "a", "fov", "zz"]


def test_a_study_holds_its_keys_computed_keys_and_thresholds():
    its = [make_item(entry(VIS), missing(T2)), make_item(entry(RPE), case="c1")]
    s = Study(its, BOOT, str)
    assert (s.dep, s.tol, s.main_context) == (30.0, 30.0, "fullkv")
    assert s.keys == [T2, VIS, RPE] and s.computed_keys == [VIS, RPE] and s.variant_keys == [VIS, RPE]
    assert s.table2_keys == [table2_key(m) for m in TABLE2_ORDER] and s.table2_keys[6] == T2
    t = Study(its, BOOT, str, main_context="fov", departure_deg=20, tolerance_deg=10).with_tolerance(15)
    assert (t.items, t.boot, t.rel, t.main_context, t.dep, t.tol) == (its, BOOT, str, "fov", 20.0, 15.0)


def test_a_unit_is_the_value_of_a_computed_entry_traced_to_its_file():
    it = make_item(entry(VIS, 0.75), missing(T2, value=0.5), entry(RPE, None))
    s = study_of(it)
    assert s.value_unit(it, VIS) == Unit(0.75, [Term(fpath(it), VIS, "value", 1.0)])
    assert s.term(it, VIS, "x") == Term(fpath(it), VIS, "x", 1.0)
    assert s.value_unit(it, T2) is None  # not computed, even with a number beside it
    assert s.value_unit(it, RPE) is None and s.value_unit(it, DEP) is None


def test_the_reason_of_a_missing_value_is_the_recorded_one_or_the_families_seen():
    ok = make_item(entry(VIS))
    s = study_of(ok)
    said = make_item(missing(VIS, "backbone 'x' is not available"), case="c1")
    assert s.reason([ok, said], VIS) == f"{VIS}: not computed: backbone 'x' is not available"
    repeats = make_item(missing(VIS, "not computed here", Status.FAILED), case="c2")
    assert s.reason([repeats], VIS) == f"{VIS}: failed: not computed here"
    plain = make_item(missing(VIS, "not applicable here", Status.NOT_APPLICABLE), case="c3")
    assert s.reason([plain], VIS) == f"{VIS}: not applicable here"  # the reason already names the status
    assert s.reason([make_item(missing(VIS, None))], VIS) == f"{VIS}: not computed: no reason recorded"
    assert s.reason([ok, make_item(family="dynamic", case="c4")], DEP) == \
        f"{DEP}: no video of this group has this metric (case families here: dynamic, environment)"
    assert s.reason([], DEP) == f"{DEP}: no video of this group has this metric (case families here: none)"


def test_a_metric_cell_is_the_mean_of_the_units_or_says_why_not():
    its = [make_item(entry(VIS, 0.25), entry(UNKNOWN, 0.5)), make_item(entry(VIS, 0.75), case="c1"),
           make_item(case="c2")]
    s = study_of(*its)
    c = s.metric_cell(its, VIS)
    assert (c.mean, c.n, values(c.units)) == (0.5, 2, [0.25, 0.75])
    assert s.metric_cell(its, UNKNOWN).mean == 0.5  # an unknown metric: the mean
    assert s.metric_cell(its, DEP).reason == s.reason(its, DEP)


def test_paired_units_are_a_minus_b_on_the_videos_with_the_metric_on_both_sides():
    def one(v: float | None, case: str, ctx: str) -> Item:
        return make_item(*([entry(VIS, v)] if v is not None else []), ctx=ctx, case=case)

    a = {k: one(v, k, "fov") for k, v in (("k1", 0.75), ("k0", 0.5), ("k2", 0.5), ("k3", None), ("k5", 0.5))}
    b = {k: one(v, k, "fullkv") for k, v in (("k0", 0.25), ("k1", 0.5), ("k2", None), ("k3", 0.5), ("k4", 0.5))}
    out = study_of(*a.values(), *b.values()).paired_units(a, b, VIS)
    assert values(out) == [0.25, 0.25]
    assert out[1].terms == [Term(fpath(a["k1"]), VIS, "value", 1.0), Term(fpath(b["k1"]), VIS, "value", -1.0)]


# -- the study: groupings ---------------------------------------------------------------------------------------


def test_each_model_has_a_main_context_the_chosen_one_where_run_else_the_first_by_name():
    its = [make_item(model="m", ctx="sliding"), make_item(model="m", ctx="fov"),
           make_item(model="n", ctx="fullkv"), make_item(model="n", ctx="sliding", case="c1")]
    main = study_of(*its).main_items()
    assert {m: (ctx, [it.case_id for it in v]) for m, (ctx, v) in main.items()} == {"m": ("fov", ["c0"]),
                                                                                      "n": ("fullkv", ["c0"])}
    assert study_of(*its, main_context="sliding").main_items()["n"][0] == "sliding"


def test_policies_are_matched_on_the_videos_run_under_every_policy():
    its = [make_item(model="m", ctx="fullkv", case="c0"), make_item(model="m", ctx="fullkv", case="c1"),
           make_item(model="m", ctx="fov", case="c0"), make_item(model="m", ctx="sliding", case="c0"),
           make_item(model="m", ctx="sliding", case="c2"),
           make_item(model="n", ctx="fullkv"),  # one policy
           make_item(model="p", ctx="fullkv", case="c0"), make_item(model="p", ctx="fov", case="c1"),  # no common
           make_item(model="q", ctx="fov", case="c3"), make_item(model="q", ctx="fullkv", case="c3")]
    out = study_of(*its).matched_contexts()
    assert list(out) == ["m", "q"]
    order, per = out["m"]
    assert order == ["fullkv", "sliding", "fov"] and list(per) == order
    assert all(list(v) == [("lrlr", "c0", 1)] for v in per.values())
    assert per["fov"][("lrlr", "c0", 1)].context == "fov"
    assert out["q"][0] == ["fullkv", "fov"]


def test_models_are_matched_on_shared_seeds_or_else_each_at_its_own_seed():
    assert study_of(make_item(model="a"), make_item(model="a", case="c1")).matched_models() is None
    shared = [make_item(model=m, case=c) for m in ("b", "a") for c in ("c0", "c1")] + [make_item(model="a", case="c2")]
    models, per = study_of(*shared).matched_models()
    assert models == ["a", "b"] and list(per["a"]) == [("lrlr", "c0", 1), ("lrlr", "c1", 1)]
    own = [make_item(model="a", seed=44, case="c0"), make_item(model="b", seed=1, case="c0"),
           make_item(model="b", seed=1, case="c1")]
    models, per = study_of(*own).matched_models()
    assert list(per["a"]) == list(per["b"]) == [("lrlr", "c0", -1)] and per["a"][("lrlr", "c0", -1)].seed == 44
    several = [make_item(model="a", seed=1), make_item(model="a", seed=2), make_item(model="b", seed=3)]
    assert study_of(*several).matched_models() is None  # a model at two seeds: no own-seed matching
    apart = [make_item(model="a", seed=1, case="c0"), make_item(model="b", seed=2, case="c1")]
    assert study_of(*apart).matched_models() is None


# -- the verdict in words ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worded():
    """A policy comparison (FoV separates on the paper's Environment Visible, FullKV and FoV tie above Sliding on
    Return Visible, an unknown metric separates nothing) and a models comparison where nothing separates."""
    t2 = metric(T2, {"fullkv": 0.5, "sliding": 0.5, "fov": cell(0.75, 0.7, 0.8)},
                {("sliding", "fullkv"): cell(0.0, -0.01, 0.01), ("fov", "fullkv"): _sep(0.25),
                 ("fov", "sliding"): cell(0.25, 0.2, 0.3)})
    dep = metric(DEP, {"fullkv": 0.9, "sliding": 0.5, "fov": 0.895},
                 {("sliding", "fullkv"): cell(-0.4, -0.45, -0.35), ("fov", "fullkv"): cell(-0.005, -0.006, -0.004),
                  ("fov", "sliding"): cell(0.395, 0.35, 0.44)})
    unk = metric(UNKNOWN, {"fullkv": 0.5, "sliding": 0.25, "fov": Cell(reason="n/c")},
                 {("sliding", "fullkv"): _sep(-0.25)})
    lat = {"fullkv": cell(4.0, 3.5, 4.5), "sliding": cell(2.0, 1.5, 2.5), "fov": cell(1.0, 0.75, 1.25)}
    sp = {"fullkv": flat(1.0, kind="ratio"), "sliding": cell(2.0, 1.5, 2.5, kind="ratio"),
          "fov": cell(4.0, 3.5, 4.5, kind="ratio")}
    pol = comparison("policies", ["fullkv", "sliding", "fov"], [("sliding", "fullkv"), ("fov", "fullkv"),
                                                                ("fov", "sliding")],
                     [dep, t2, unk], videos=3, dynamic=1, latency=lat, speedup=sp)
    mod = comparison("models", ["a", "b"], [("b", "a")],
                     [metric(VIS, {"a": 0.5, "b": 0.5}, {("b", "a"): cell(0.0, -0.1, 0.1)})], model=None)
    an = analyses_with(study_of(make_item()), [pol, mod])
    return an, pol, mod


def test_a_verdict_line_as_data(worded):
    an = worded[0]
    t2, dep = an.verdict.lines
    assert line_data(t2) == {
        "comparison": "context policies of m", "metric": T2, "direction": "higher", "paper_metric": True,
        "chance": None,
        "ranking": [{"name": "fov", "mean": 0.75, "text": "0.750 [0.700, 0.800] n=3"},
                    {"name": "fullkv", "mean": 0.5, "text": "0.500 [0.500, 0.500] n=3"},
                    {"name": "sliding", "mean": 0.5, "text": "0.500 [0.500, 0.500] n=3"}],
        "relations": ["≫", "≈"], "best": "fov", "best_speedup": "4.00x [3.50, 4.50] n=3",
        "diffs": [{"a": "sliding", "b": "fullkv", "text": "0.000 [-0.010, 0.010] n=3", "separated": False},
                  {"a": "fov", "b": "fullkv", "text": "+0.250 [0.188, 0.312] n=3", "separated": True},
                  {"a": "fov", "b": "sliding", "text": "+0.250 [0.200, 0.300] n=3", "separated": True}]}
    d = line_data(dep)
    assert (d["chance"], d["best"], d["best_speedup"], d["paper_metric"]) == ("chance ≈ 0.06", "fullkv", None, False)


def test_a_verdict_line_has_no_speedup_where_none_was_measured():
    rpe = metric(RPE, {"a": 0.5, "b": 0.25}, {("b", "a"): _sep(-0.25)})
    models = comparison("models", ["a", "b"], [("b", "a")], [rpe], model=None)
    d = line_data(VerdictLine(models, rpe))
    assert (d["direction"], d["best"], d["best_speedup"]) == ("lower", "b", None)
    pol = comparison("policies", ["a", "b"], [("b", "a")], [rpe], speedup={"b": Cell(reason="no matched latency")})
    assert line_data(VerdictLine(pol, rpe))["best_speedup"] is None


def test_a_chain_names_each_contender_with_its_relation_to_the_next(worded):
    an, _, _ = worded
    assert [chain(x) for x in an.verdict.lines] == ["fov 0.750 ≫ fullkv 0.500 ≈ sliding 0.500",
                                                    "fullkv 0.900 ≈ fov 0.895 ≫ sliding 0.500"]


def test_the_latency_line_skips_contenders_without_a_time_and_fullkvs_own_speedup(worded):
    _, pol, mod = worded
    assert latency_text(pol) == (
        "generation time per video (wall clock of the generate call; a KV-context cost only for a model that "
        "attends over a KV cache, not for the CPU reference renderer): fullkv 4.00 s; sliding 2.00 s, "
        "2.00x [1.50, 2.50] n=3 vs FullKV; fov 1.00 s, 4.00x [3.50, 4.50] n=3 vs FullKV")
    assert latency_text(mod) == ""
    odd = comparison("policies", ["x", "y", "z"], [], [], latency={"x": Cell(reason="no timing recorded"),
                                                                    "y": cell(2.0, 1.5, 2.5)},
                     speedup={"y": Cell(reason="no matched latency", kind="ratio")})
    assert latency_text(odd).endswith("renderer): y 2.00 s")


def test_the_verdict_lines_of_two_comparisons(worded):
    an, _, _ = worded
    assert verdict_lines(an) == [
        ("context policies of m (3 matched videos, 1 of them a dynamic case, left out of the static-content "
        "metrics):"),
        ("- answer: FoV keeps more of the world than FullKV and Sliding on environment.visible[dinov2] ↑: "
        "fov 0.750, fullkv 0.500, sliding 0.500; paired fov − fullkv +0.250 [0.188, 0.312] n=3 (95 % bootstrap "
        "interval over matched videos)."),
        ("- environment.visible[dinov2] ↑: fov 0.750 ≫ fullkv 0.500 ≈ sliding 0.500; best fov (speedup 4.00x "
        "[3.50, 4.50] n=3); sliding - fullkv 0.000 [-0.010, 0.010] n=3; fov - fullkv +0.250 [0.188, 0.312] n=3; "
        "fov - sliding +0.250 [0.200, 0.300] n=3"),
        ("- departure.return_visible[pixel-thumb16] ↑ (chance ≈ 0.06) [variant]: fullkv 0.900 ≈ fov 0.895 ≫ "
        "sliding 0.500; best fullkv (the FullKV baseline); sliding - fullkv -0.400 [-0.450, -0.350] n=3; "
        "fov - fullkv -0.005 [-0.006, -0.004] n=3; fov - sliding +0.395 [0.350, 0.440] n=3"),
        "- not separating: novel.metric[x]",
        ("- generation time per video (wall clock of the generate call; a KV-context cost only for a model that "
        "attends over a KV cache, not for the CPU reference renderer): fullkv 4.00 s; sliding 2.00 s, "
        "2.00x [1.50, 2.50] n=3 vs FullKV; fov 1.00 s, 4.00x [3.50, 4.50] n=3 vs FullKV"),
        "models (2 matched videos):",
        "- no metric separates them (every paired 95 % interval includes 0, or fewer than 3 pairs)",
        "- not separating: environment.visible[pixel-thumb16]"]
    assert verdict_markdown(an) == "\n".join(["## Verdict", "", *verdict_lines(an), ""])


def test_a_model_named_fullkv_is_not_the_fullkv_baseline():
    vis = metric(VIS, {"fullkv": 1.0, "b": 0.5}, {("fullkv", "b"): _sep(0.5)})
    models = comparison("models", ["b", "fullkv"], [("fullkv", "b")], [vis], model=None)
    lines = verdict_lines(analyses_with(study_of(make_item()), [models]))
    assert lines[2].startswith(f"- {VIS} ↑ (chance ≈ 0.10) [variant]: fullkv 1.000 ≫ b 0.500; best fullkv; ")


@pytest.mark.parametrize("n", [8, 9])
def test_the_verdict_shows_eight_lines_per_comparison_and_names_the_rest(n):
    keys = [f"environment.visible[b{i}]" for i in range(n)]  # the later, the weaker
    mets = [metric(k, {"a": 0.5, "b": 1.0}, {("b", "a"): _sep(0.5 - 0.01 * i)}) for i, k in enumerate(keys)]
    lines = verdict_lines(analyses_with(study_of(make_item()), [comparison("models", ["a", "b"], [("b", "a")], mets)]))
    assert [x.split(" ")[1] for x in lines if x.startswith("- environment")] == keys[:8]
    assert [x for x in lines if x.startswith("- also")] == [f"- also separating: {k}" for k in keys[8:]]


def test_the_answer_names_who_keeps_more_of_the_world_on_the_first_memory_metric():
    rpe = metric(RPE, {"fullkv": 0.5, "sliding": 1.0, "fov": 0.5}, {("sliding", "fullkv"): _sep(0.5)})
    image = metric("quality.imaging[x]", {"fullkv": 0.5, "sliding": 0.75, "fov": 0.5},
                   {("sliding", "fullkv"): _sep(0.5)})  # higher is better, but not a memory metric
    dep = metric(DEP, {"fullkv": 0.9, "sliding": 0.5, "fov": 0.895},
                 {("sliding", "fullkv"): cell(-0.4, -0.45, -0.35), ("fov", "fullkv"): cell(-0.005, -0.006, -0.004),
                  ("fov", "sliding"): cell(0.395, 0.35, 0.44)})
    pol = comparison("policies", ["fullkv", "sliding", "fov"], [("sliding", "fullkv"), ("fov", "fullkv"),
                                                                ("fov", "sliding")], [rpe, image, dep])
    vis = metric(VIS, {"a": 0.5, "b": 0.75}, {("b", "a"): cell(0.25, 0.2, 0.3, 4)})
    mod = comparison("models", ["a", "b"], [("b", "a")], [vis], model=None)
    an = analyses_with(study_of(make_item()), [mod, pol])
    # RPE (camera) and the imaging quality separate more clearly than DEP
    assert [x.key for x in an.verdict.lines] == [VIS, RPE, "quality.imaging[x]", DEP]
    assert answer(an, pol) == (
        "FullKV and FoV keep more of the world than Sliding on departure.return_visible[pixel-thumb16] ↑: "
        "fullkv 0.900, fov 0.895, sliding 0.500; paired fullkv − sliding +0.400 [0.350, 0.450] n=3 (95 % bootstrap "
        "interval over matched videos).")
    assert answer(an, mod) == ("b keeps more of the world than a on environment.visible[pixel-thumb16] ↑: b 0.750, "
                               "a 0.500; paired b − a +0.250 [0.200, 0.300] n=4 (95 % bootstrap interval over "
                               "matched videos).")


def test_the_answer_names_every_contender_the_best_is_separated_from():
    vis = metric(VIS, {"fullkv": 0.5, "sliding": 0.25, "fov": 0.875, "x": 0.125},
                 {("sliding", "fullkv"): _sep(-0.25), ("fov", "fullkv"): _sep(0.375), ("fov", "sliding"): _sep(0.625),
                  ("x", "fullkv"): _sep(-0.375), ("x", "sliding"): _sep(-0.125),
                  ("x", "fov"): cell(-0.75, -1.0, -0.5, n=2)})  # two pairs only: not separated from FoV
    pol = comparison("policies", ["fullkv", "sliding", "fov", "x"], list(vis.diffs), [vis])
    assert answer(analyses_with(study_of(make_item()), [pol]), pol) == (
        "FoV keeps more of the world than FullKV and Sliding on environment.visible[pixel-thumb16] ↑: fov 0.875, "
        "fullkv 0.500, sliding 0.250, x 0.125; paired fov − fullkv +0.375 [0.281, 0.469] n=3 (95 % bootstrap "
        "interval over matched videos).")


def test_there_is_no_answer_without_a_separating_memory_metric():
    rpe = metric(RPE, {"a": 0.5, "b": 1.0}, {("b", "a"): _sep(0.5)})
    pol = comparison("policies", ["a", "b"], [("b", "a")], [rpe])
    assert answer(analyses_with(study_of(make_item()), [pol]), pol) is None


def test_without_a_comparison_the_verdict_says_so_and_gives_the_paper_metrics():
    its = [make_item(entry(T2, 0.5), entry(DEPTH, 0.25), entry(VIS, 0.5), case=f"c{i}") for i in range(3)]
    its.append(make_item(entry(VIS, 0.5), model="n", ctx="fov", case="c9"))  # no video in common with m
    an = Analyses(study_of(*its))
    assert headline(an) == [(f"m / fullkv, paper metrics: {T2} ↑ 0.500 [0.500, 0.500] n=3; {DEPTH} ↑ 0.250 "
                            "[0.250, 0.250] n=3 (chance ≈ 0.00)")]  # n has no paper metric: no line
    assert verdict_lines(an) == [
        ("Nothing to compare: m, n under fov, fullkv (4 videos), no other policy or model on the same videos. "
        f"{NO_COMPARISON_HINT}"), f"- {headline(an)[0]}"]


def test_without_a_paper_metric_the_headline_gives_the_memory_variants():
    its = [make_item(entry(VIS, 0.5), entry(DEP, 0.25), entry(RPE, 0.5), entry("quality.imaging[x]", 0.5),
                     entry(UNKNOWN, 0.5))]
    an = Analyses(study_of(*its))
    assert headline(an) == [("m / fullkv, variants (no paper metric computed: see the main table): "
                            f"{VIS} ↑ 0.500 (n=1) (chance ≈ 0.10); {DEP} ↑ 0.250 (n=1) (chance ≈ 0.06)")]
    assert verdict_lines(an)[0].startswith("Nothing to compare: m under fullkv (1 video), no other")


def test_a_memory_metric_where_lower_is_better_is_neither_the_answer_nor_in_the_headline(monkeypatch):
    # none is registered today; a family added later could have one: "keeps more of the world" reads higher only
    real = spec_of
    monkeypatch.setattr("evaluate.reporting.verdict.spec_of", lambda k: dataclasses.replace(
        real(k), higher_is_better=False) if k == VIS else real(k))
    vis = metric(VIS, {"a": 0.5, "b": 0.75}, {("b", "a"): cell(0.25, 0.2, 0.3, 4)})
    mod = comparison("models", ["a", "b"], [("b", "a")], [vis], model=None)
    assert answer(analyses_with(study_of(make_item()), [mod]), mod) is None
    (line,) = headline(Analyses(study_of(make_item(entry(VIS, 0.5), entry(DEP, 0.25)))))
    assert VIS not in line and DEP in line


def test_the_headline_stops_at_six_metrics():
    its = [make_item(*[entry(f"environment.visible[b{i}]", 0.5) for i in range(7)])]
    (line,) = headline(Analyses(study_of(*its)))
    assert line.count("↑") == 6 and "[b5]" in line and "[b6]" not in line


# -- the paper's numbers ----------------------------------------------------------------------------------------


def test_the_paper_numbers_file_names_every_number_and_registered_metrics():
    data = load_paper_numbers()
    assert paper.PAPER_FILE.name == "paper_numbers.yaml" and paper.PAPER_FILE.parent.name == "evaluate"
    assert data["metrics"]["Environment Visible"] == {"id": "environment.visible", "backbone": "dinov2"}
    assert all({"table", "row", "column", "value"} <= set(e) for e in data["numbers"])


@pytest.mark.parametrize("doc, error", [
    ({"numbers": [{"table": "T", "row": "r", "value": 1}]}, "numbers[0] lacks 'column'"),
    ({"numbers": [{"table": "T", "row": "r", "column": "c", "value": "1"}]}, "numbers[0].value must be a number"),
    ({"numbers": [], "metrics": {"X": {"id": "no.such", "backbone": "b"}}}, ("metrics.X.id 'no.such' is not a "
                                                                           "registered metric")),
])
def test_a_paper_numbers_file_with_a_gap_is_refused(tmp_path, doc, error):
    p = tmp_path / "paper.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        load_paper_numbers(p)


def test_a_paper_numbers_file_without_metrics_is_read(tmp_path):
    p = tmp_path / "paper.yaml"
    doc = {"source": "s", "numbers": [{"table": "T", "row": "r", "column": "c", "value": 1.5}],
           "metrics": {"V": {"id": "environment.visible", "backbone": "dinov2"}}}
    p.write_text(yaml.safe_dump(doc))
    assert load_paper_numbers(p) == doc
    del doc["metrics"]
    p.write_text(yaml.safe_dump(doc))
    assert load_paper_numbers(p) == doc


def test_the_models_mean_weighs_every_model_equally():
    c = _models_mean({"a": [Unit(1.0, []), Unit(2.0, []), Unit(3.0, [])], "b": [Unit(4.0, [])], "c": []})
    assert (c.mean, c.n, c.kind) == (3.0, 4, "models_mean")  # (2 + 4) / 2, not 10 / 4
    assert [u.role for u in c.units] == ["model=a"] * 3 + ["model=b"]
    assert _models_mean({"a": []}).reason == "no model of these runs has a value"


@pytest.mark.parametrize("ours, paper_bb, want", [
    ("dinov2_vitb14+sam2", "dinov2+sam2", True), ("dinov2", "dinov2+sam2", False),
    ("dinov2+sam2+x", "dinov2+sam2", False), ("x+sam2", "dinov2+sam2", False), ("sam2", "dinov2", False),
])
def test_a_backbone_matches_the_papers_part_by_part(ours, paper_bb, want):
    assert _backbone_matches(ours, paper_bb) is want


@pytest.fixture(scope="module")
def paper_builder() -> Builder:
    """Models a, b, c (and d, without the metric) at FullKV; model a also under FoV (generation 4 s vs 1 s).

    Decrease R1 - R3 of Environment Visible on LRLRLR: a 0.5 (qualified) and 0.25; b -0.25 and 0.25 (both
    qualified); c 0.5 (not). Δ_axis: a 0.25 (qualified), b 0.5 (not). Dynamic Overall of a at FullKV: started
    0.5 and not started 0 (another backbone: 1.0, started); under FoV: started 1.0 twice."""
    q3 = [GOOD] * 3
    its = []
    for ctx, lat in (("fullkv", 4.0), ("fov", 1.0)):
        its += [make_item(entry(VIS, per_revisit=[1.0, 0.75, 0.5], qualification=q3), model="a", ctx=ctx,
                          traj="lrlrlr", case="c0", latency=lat),
                make_item(entry(VIS, per_revisit=[0.75, 0.75, 0.5]), model="a", ctx=ctx, traj="lrlrlr", case="c1",
                          latency=lat),
                make_item(entry(VIS, per_revisit=[1.0, 0.75], qualification=q3[:2]), model="a", ctx=ctx,
                          case="c0", latency=lat),
                make_item(entry(VIS, per_revisit=[1.0, 0.5], qualification=q3[:2]), model="a", ctx=ctx, traj="lrud",
                          case="c0", latency=lat)]
    its += [make_item(entry(DYN, 0.5, started=True), entry("dynamic.overall[other]", 1.0, started=True), model="a",
                      case="dynamic_0", family="dynamic", latency=4.0),
            make_item(entry(DYN, 0.0, started=False), entry("dynamic.overall[other]", 1.0, started=True), model="a",
                      case="dynamic_1", family="dynamic", latency=4.0),
            make_item(entry(DYN, 1.0, started=True), model="a", ctx="fov", case="dynamic_0", family="dynamic",
                      latency=1.0),
            make_item(entry(DYN, 1.0, started=True), model="a", ctx="fov", case="dynamic_1", family="dynamic",
                      latency=1.0)]
    its += [make_item(entry(VIS, per_revisit=[0.5, 0.5, 0.75], qualification=q3), model="b", traj="lrlrlr"),
            make_item(entry(VIS, per_revisit=[0.75, 0.5, 0.5], qualification=q3), model="b", traj="lrlrlr",
                      case="c1"),
            make_item(entry(VIS, per_revisit=[0.5, 0.5]), model="b"),
            make_item(entry(VIS, per_revisit=[0.75, 0.25]), model="b", traj="lrud"),
            make_item(entry(VIS, per_revisit=[0.5, 0.25, 0.0]), model="c", traj="lrlrlr"),
            make_item(entry(DEP, 0.5), missing(DEPTH), missing("environment.depth[x]"), entry("camera.rpe_rot", 0.25),
                      model="d", traj="lrlrlr")]
    return Builder(study_of(*its))


def _ours(b: Builder, quantity: str, key: str | None = VIS, **spec) -> Cell:
    return Ours(b).cell({"quantity": quantity, "model": "*", "trajectory": "lrlrlr", **spec}, key)


@pytest.mark.parametrize("quantity, want, n, kind", [
    ("decrease", (0.375 + 0.0 + 0.5) / 3, 5, "models_mean"), ("decrease_qm", (0.375 + 0.0) / 2, 4, "models_mean"),
    ("decrease_q", (0.5 + 0.0) / 2, 3, "models_mean"), ("decrease_q_n", 3, 3, "count"),
    ("decrease_q_m", 2, 3, "count"), ("decrease_q_pos", 1, 3, "count"),  # b's qualified mean is 0: not positive
])
def test_our_decrease_averages_models_equally_on_all_or_qualified_videos(paper_builder, quantity, want, n, kind):
    c = _ours(paper_builder, quantity)
    assert (c.mean, c.n, c.kind) == (pytest.approx(want), n, kind)


def test_our_counterpart_of_one_model_is_that_models_mean(paper_builder):
    c = _ours(paper_builder, "decrease", model="a")
    assert (c.mean, c.n, c.kind) == (0.375, 2, "mean")
    assert _ours(paper_builder, "decrease", model="zz").reason == "no value of zz in these runs"


@pytest.mark.parametrize("revisit, want", [(1, (0.875 + 0.625 + 0.5) / 3), (2, (0.75 + 0.5 + 0.25) / 3),
                                           (3, (0.5 + 0.625 + 0.0) / 3)])
def test_our_per_revisit_score_is_the_models_mean_of_that_window(paper_builder, revisit, want):
    assert _ours(paper_builder, "per_revisit", revisit=revisit).mean == pytest.approx(want)


def test_a_revisit_beyond_the_last_window_has_no_value(paper_builder):
    assert _ours(paper_builder, "per_revisit", revisit=4).reason == \
        f"{VIS} records no per-revisit values on lrlrlr in these runs"


def test_our_cross_axis_excess_uses_every_trajectory_of_the_models(paper_builder):
    assert _ours(paper_builder, "delta_axis").mean == pytest.approx((0.25 + 0.5) / 2)
    q = _ours(paper_builder, "delta_axis_q")
    assert (q.mean, q.n) == (0.25, 1)
    assert _ours(paper_builder, "delta_axis_qm").mean == 0.25
    assert _ours(paper_builder, "delta_axis_q", model="b").reason == "no qualified unit in these runs"
    assert _ours(paper_builder, "delta_axis_qm", model="b").reason == "no model with a qualified unit in these runs"


def test_without_values_on_the_trajectory_our_counterpart_says_so(paper_builder):
    assert _ours(paper_builder, "decrease_q", trajectory="none").reason == \
        "no computed value on this trajectory in these runs"
    assert _ours(paper_builder, "decrease", trajectory="none").reason == "no model of these runs has a value"
    assert _ours(paper_builder, "decrease", key=None).reason == "no model of these runs has a value"


def test_an_unknown_quantity_or_suffix_is_an_error(paper_builder):
    with pytest.raises(ValueError, match="unknown quantity 'speed'"):
        _ours(paper_builder, "speed")
    with pytest.raises(ValueError, match="unknown suffix '_zz'"):
        _ours(paper_builder, "decrease_zz")


def test_our_latency_and_speedup_are_the_policy_tables(paper_builder):
    assert _ours(paper_builder, "latency", model="a", context="fov").mean == 1.0
    assert _ours(paper_builder, "latency", model="a", context="fullkv").mean == 4.0
    sp = _ours(paper_builder, "speedup", model="a", context="fov")
    assert (sp.mean, sp.kind) == (4.0, "ratio")
    assert _ours(paper_builder, "latency", model="b", context="fov").reason == \
        "b was not run under fov and another policy on matched items"


@pytest.mark.parametrize("quantity, want", [("dyn_started", 1.0), ("dyn_p_start", 0.5), ("dyn_s_cond", 0.5),
                                            ("dyn_s_gated", 0.25)])
def test_our_dynamic_decomposition_is_the_main_contexts(paper_builder, quantity, want):
    assert _ours(paper_builder, quantity, key=DYN, model="a").mean == want


def test_our_dynamic_decomposition_reads_the_asked_backbone_and_model(paper_builder):
    assert _ours(paper_builder, "dyn_p_start", key="dynamic.overall[other]", model="a").mean == 1.0
    assert _ours(paper_builder, "dyn_p_start", key=DYN, model="b").reason == "no dynamic videos of b in these runs"


PAPER_DATA = {
    "source": "the paper",
    "metrics": {"Vis": {"id": "environment.visible", "backbone": "pixel-thumb16"},
                "Vis paper": {"id": "environment.visible", "backbone": "dinov2"},
                "Depth": {"id": "environment.depth", "backbone": "x"},
                "Geometry": {"id": "object.geometry", "backbone": "x[y"},
                "RPE": {"id": "camera.rpe_rot", "backbone": "da3"},
                "Dynamic Overall": {"id": "dynamic.overall", "backbone": "Qwen/Qwen3.8-27B"}},
    "numbers": [
        {"table": "T1", "row": "r", "column": "plain", "value": 3},
        {"table": "T1", "row": "r", "column": "N", "value": 2, "of": 9,
         "ours": {"quantity": "decrease_q_n", "metric": "Vis", "trajectory": "lrlrlr"}},
        {"table": "T1", "row": "r", "column": "all", "value": 0.25,
         "ours": {"quantity": "decrease", "metric": "Vis paper", "trajectory": "lrlrlr"}},
        {"table": "T1", "row": "r", "column": "nometric", "value": 1,
         "ours": {"quantity": "decrease", "trajectory": "lrlrlr"}},
        {"table": "T1", "row": "r", "column": "depth", "value": 0.5,
         "ours": {"quantity": "decrease", "metric": "Depth", "trajectory": "lrlrlr"}},
        {"table": "T1", "row": "r", "column": "geometry", "value": 0.5,
         "ours": {"quantity": "decrease", "metric": "Geometry", "trajectory": "lrlrlr"}},
        {"table": "T1", "row": "r", "column": "rpe", "value": 0.5,
         "ours": {"quantity": "decrease", "metric": "RPE", "trajectory": "lrlrlr"}},
        {"table": "T3", "row": "FoV", "column": "latency", "value": 322.2,
         "ours": {"quantity": "latency", "model": "a", "context": "fov"}},
        {"table": "T3", "row": "FoV", "column": "speedup", "value": 3.5,
         "ours": {"quantity": "speedup", "model": "a", "context": "fov", "metric": "Depth"}},
        {"table": "T5", "row": "a", "column": "p_start", "value": 0.25,
         "ours": {"quantity": "dyn_p_start", "model": "a"}},
    ]}


@pytest.fixture(scope="module")
def paper_table(paper_builder) -> dict:
    rows: dict = {}
    for k, row in comparison_table(paper_builder, PAPER_DATA).rows:
        rows.setdefault(k, []).append(row)
    return rows


def test_the_paper_table_keeps_a_number_without_a_counterpart_with_the_reason(paper_table):
    (plain,) = paper_table[("T1", "r", "plain")]
    assert set(plain) == {"paper", "ours"} and plain["paper"] == "3"
    assert plain["ours"].reason == "no counterpart quantity in the harness (not measured by this evaluation)"


def test_the_paper_table_gives_ours_and_the_signed_difference(paper_table):
    (n,) = paper_table[("T1", "r", "N")]
    assert (n["paper"], n["ours"].mean, n["diff"], n["metric"], n["same_backbone"]) == ("2 of 9", 3, "+1", VIS, "yes")
    (a,) = paper_table[("T1", "r", "all")]
    assert (a["paper"], a["diff"], a["metric"], a["same_backbone"]) == ("0.25", "+0.042", VIS, "no (paper: dinov2)")
    (lat,) = paper_table[("T3", "FoV", "latency")]
    assert (lat["ours"].mean, lat["diff"], lat["metric"]) == (1.0, "-321.200", "") and "same_backbone" not in lat
    (sp,) = paper_table[("T3", "FoV", "speedup")]  # a latency quantity is ours whatever the metric named beside it
    assert (sp["ours"].mean, sp["diff"], sp["metric"], sp["same_backbone"]) == (4.0, "+0.500", DEPTH,
                                                                                "no (paper: x)")


def test_the_paper_table_names_the_key_it_would_use_and_why_it_has_no_value(paper_table, paper_builder):
    (none,) = paper_table[("T1", "r", "nometric")]  # no metric named: our quantity without a key
    assert (none["metric"], none["ours"].reason) == ("", "no model of these runs has a value")
    (d,) = paper_table[("T1", "r", "depth")]  # computed nowhere: the first key of the metric in these runs
    assert (d["metric"], d["ours"].reason, d["same_backbone"]) == (
        DEPTH, paper_builder.study.reason(paper_builder.study.items, DEPTH), "no (paper: x)")
    assert "diff" not in d
    (g,) = paper_table[("T1", "r", "geometry")]  # no key at all: the paper's backbone
    assert (g["metric"], g["same_backbone"]) == ("object.geometry[x[y]", "yes")
    assert g["ours"].reason.startswith("object.geometry[x[y]: no video of this group has this metric")
    (r,) = paper_table[("T1", "r", "rpe")]  # a bare key is the paper's combination
    assert (r["metric"], r["same_backbone"]) == ("camera.rpe_rot", "yes") and not r["ours"].ok()
    assert "diff" not in r


def test_the_paper_table_has_a_row_per_key_of_the_dynamic_metric(paper_table):
    assert [(row["metric"], row["ours"].mean, row["diff"], row["same_backbone"])
            for row in paper_table[("T5", "a", "p_start")]] == [
        (DYN, 0.5, "+0.250", "yes"), ("dynamic.overall[other]", 1.0, "+0.750", "no (paper: Qwen/Qwen3.8-27B)")]


def test_the_paper_table_collapses_to_one_line_when_nothing_is_comparable(paper_builder):
    t = comparison_table(paper_builder, PAPER_DATA)
    assert t.collapsed is None  # Environment Visible at pixel-thumb16 is the paper's backbone here, with a value
    data = dict(PAPER_DATA, numbers=[e for e in PAPER_DATA["numbers"] if e["column"] not in ("N", "p_start")])
    t = comparison_table(paper_builder, data)
    assert (t.id, t.index) == ("paper", ["paper table", "row", "column"]) and "(the paper)" in t.caption
    # the geometry and RPE rows have the paper's backbone but no value; 'all', latency and speedup have a value
    assert t.collapsed == ("Nothing comparable with the paper in these runs: of its 8 published numbers, 3 have a "
                           "counterpart here, none computed with the paper's backbone.")


def test_the_paper_table_reads_the_papers_file_by_default():
    t = comparison_table(Builder(study_of(make_item(entry(VIS)))))
    assert len(t.rows) >= len(load_paper_numbers()["numbers"]) and t.collapsed.startswith("Nothing comparable")
