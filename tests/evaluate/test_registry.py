"""The metric registry (evaluate/registry.py, evaluate/catalog.py): one spec per metric, owning its compute, and
every reader of a metric's properties asking it."""

from __future__ import annotations

import dataclasses

import pytest

from evaluate import catalog
from evaluate.families import all_families
from evaluate.registry import AGGREGATIONS, Compute, ComputedBy, MetricSpec, Registry, UnknownMetricError
from evaluate.results import Entries


def _compute(*args: object) -> Entries:
    return {}


_COMPUTES = (Compute(_compute),)


def _spec(metric_id: str, compute: tuple[Compute, ...] | ComputedBy = _COMPUTES, **kw: object) -> MetricSpec:
    return MetricSpec(metric_id, metric_id.split(".")[0], True, "encoder", False, "a test metric", compute, **kw)


def _median(values: object, n_boot: int = 0, seed: int = 0) -> dict[str, float]:
    return {}


def test_the_registry_refuses_a_second_spec_of_an_id_and_an_unknown_aggregation():
    reg: Registry[MetricSpec] = Registry()
    reg.register(_spec("x.a"))
    with pytest.raises(ValueError, match="'x.a' is registered twice"):
        reg.register(_spec("x.a"))
    with pytest.raises(ValueError, match=r"unknown aggregation '_median'; one of \['mean'\]"):
        reg.register(_spec("x.b", aggregation=_median))
    assert [s.id for s in reg] == ["x.a"] and len(reg) == 1 and "x.b" not in reg and "x.a" in reg


def test_an_unknown_metric_is_an_error_naming_the_registered_ones():
    """As lm-evaluation-harness's ``Registry.get`` (EleutherAI/lm-evaluation-harness@4e7e0d47
    ``lm_eval/api/registry.py``): never a silent None."""
    reg: Registry[MetricSpec] = Registry()
    reg.register(_spec("x.alpha"), _spec("x.beta"))
    assert reg.get("x.beta").id == "x.beta"
    with pytest.raises(UnknownMetricError) as err:
        reg.get("x.alpah")
    assert str(err.value) == "unknown metric 'x.alpah'. Did you mean 'x.alpha'? Registered: x.alpha, x.beta"
    assert isinstance(err.value, KeyError)  # a mapping-style lookup's callers keep working
    with pytest.raises(KeyError, match="Registered: .*environment.visible"):
        catalog.higher_is_better("environment.visibel[dinov2]")
    assert catalog.spec_of("new.metric[x]") is None  # a newer file's metric: asked with `in` first


def test_a_spec_holds_its_aggregation_function_and_the_report_calls_it(monkeypatch):
    """The spec keeps the function (lm-evaluation-harness's ``register_metric`` keeps the function it looked up by
    name); its name is the one readers and files use. The report's metric cell is the spec's aggregation."""
    from evaluate.aggregate import bootstrap_ci
    from evaluate.reporting.cells import Unit
    from evaluate.reporting.study import Study

    spec = catalog.REGISTRY.get("environment.visible")
    assert spec.aggregation is AGGREGATIONS["mean"] and spec.aggregation_name == "mean"
    values = [0.2, 0.5, 0.9, 0.4]
    assert spec.aggregation(values, n_boot=50, seed=3) == bootstrap_ci(values, n_boot=50, seed=3)

    calls = []

    def recorded(vals: object, n_boot: int = 0, seed: int = 0) -> dict[str, float]:
        calls.append((list(vals), n_boot, seed))
        return {"mean": 7.0, "lo": 6.0, "hi": 8.0, "n": 2}

    study = Study([], {"n": 9, "seed": 4}, str)
    monkeypatch.setattr(study, "value_unit", lambda it, key: Unit(float(it), []))
    monkeypatch.setattr(study, "reason", lambda items, key: "none")
    recording = dataclasses.replace(spec, aggregation=recorded)
    monkeypatch.setattr("evaluate.reporting.study.spec_of", lambda key: recording if key.startswith(spec.id) else None)
    cell = study.metric_cell([1, 3], "environment.visible[dinov2]")
    assert calls == [([1.0, 3.0], 9, 4)] and (cell.mean, cell.lo, cell.hi, cell.n) == (7.0, 6.0, 8.0, 2)
    plain = study.metric_cell([1, 3], "new.metric")  # an unknown metric: the mean
    assert len(calls) == 1 and (plain.mean, plain.n) == (2.0, 2)


def test_a_computed_by_must_name_a_metric_that_computes():
    reg: Registry[MetricSpec] = Registry()
    reg.register(_spec("x.a"), _spec("x.b", ComputedBy("x.a", "written with x.a")))
    reg.check()  # x.a computes: fine
    reg.register(_spec("x.c", ComputedBy("x.b", "x.b computes nothing itself")))
    with pytest.raises(ValueError, match="'x.c' is computed by 'x.b', which computes nothing"):
        reg.check()
    empty: Registry[MetricSpec] = Registry()
    empty.register(_spec("x.d", ()))
    with pytest.raises(ValueError, match="'x.d' has no computation"):
        empty.check()
    stray: Registry[MetricSpec] = Registry()  # computed by a metric nobody registered: the same error, not a crash
    stray.register(_spec("x.e", ComputedBy("x.gone", "a metric that was removed")))
    with pytest.raises(ValueError, match="'x.e' is computed by 'x.gone', which computes nothing"):
        stray.check()


def test_the_catalog_registers_every_family_s_specs_in_order_and_checks_them(monkeypatch):
    """``catalog.REGISTRY`` is built once, at import: the builder itself, run again here."""
    assert [s.id for s in catalog._registry()] == [s.id for fam in all_families() for s in fam.specs]
    broken = dataclasses.replace(all_families()[0], specs=(_spec("x.e", ComputedBy("x.gone", "removed")),))
    monkeypatch.setattr(catalog, "all_families", lambda: (broken,))
    with pytest.raises(ValueError, match="'x.e' is computed by 'x.gone'"):
        catalog._registry()


def test_a_key_names_its_backbone_whatever_the_backbone_s_name_holds():
    for metric, backbone in (("environment.visible", "dinov2"), ("m.x", "a[b]"), ("m.x", "")):
        key = catalog.make_key(metric, backbone)
        assert (catalog.metric_id(key), catalog.backbone_of(key)) == (metric, backbone)


def test_resolution_and_case_scoring_of_known_and_unknown_metrics():
    from evaluate.item import CAMERA_ITEMS

    assert catalog.resolution("camera.rpe_trans[da3]") == catalog.METRICS["camera.rpe_trans"].resolution == 0.005
    assert catalog.resolution("diagnostic.revisit_psnr[pixels]") == 0.5
    assert catalog.resolution("new.metric[x]") == 0.01  # a newer file's metric: the default unit
    # an unknown metric is not known to be a memory or static one: it scores every case
    assert catalog.scores_case("new.metric", CAMERA_ITEMS) and catalog.scores_case("new.metric", "dynamic")
    assert not catalog.scores_case("environment.visible[dinov2]", CAMERA_ITEMS)


def test_every_family_step_is_the_computation_of_a_registered_spec_of_that_family():
    seen = set()
    for fam in all_families():
        assert {s.family for s in fam.specs} == {fam.name}
        for step in fam.metrics:
            spec = catalog.METRICS[step.id]
            assert any(c.function is step.compute for c in spec.computations)
            assert all(catalog.spec_of(i) is not None for i in step.ids)
        seen |= {s.id for s in fam.specs}
    assert seen == set(catalog.METRICS)  # nothing is registered outside a family module


def test_metrics_computed_by_another_name_it_and_the_judge_writes_the_registry_s_dynamic_ids():
    from evaluate.judge import METRICS

    by = {s.id: s.compute.metric for s in catalog.REGISTRY if isinstance(s.compute, ComputedBy)}
    assert by["camera.rpe_trans_strided"] == "camera.rpe_trans" and by["dynamic.started"] == "dynamic.overall"
    assert METRICS == catalog.family_ids("dynamic") and METRICS[0] == "dynamic.overall" and len(METRICS) == 7
    (judge_step,) = [s for f in all_families() if f.name == "dynamic" for s in f.metrics]
    assert judge_step.ids == METRICS  # a judge failure is recorded under every dynamic id


def test_table2_membership_is_the_spec_s_and_the_column_order_lists_exactly_those():
    assert set(catalog.TABLE2_ORDER) == {s.id for s in catalog.REGISTRY if s.table2 is not None}
    assert catalog.table2_key("environment.visible") == "environment.visible[dinov2]"
    assert catalog.is_table2_key("camera.rpe_trans") and not catalog.is_table2_key("camera.rpe_trans[da3]")
    with pytest.raises(KeyError, match="not a column"):
        catalog.table2_key("departure.visible")


def test_chance_levels_and_directions_come_from_the_specs():
    spec = catalog.METRICS["departure.visible"]
    assert catalog.chance_level("departure.visible[pixel-thumb16]") is spec.chance["pixel-thumb16"]
    assert catalog.chance_level("environment.depth[da3]") is catalog.METRICS["environment.depth"].chance["*"]
    assert catalog.chance_level("departure.visible[dinov2]") is None and catalog.chance_level("new.metric") is None
    assert catalog.direction("camera.rpe_rot[da3]") is False and catalog.direction("new.metric") is None
    assert all(s.aggregation_name == "mean" for s in catalog.REGISTRY)


def test_the_paper_numbers_name_registered_metrics_only(tmp_path):
    from evaluate.reporting.paper import PAPER_FILE, load_paper_numbers

    load_paper_numbers()  # the shipped file names registered metrics
    bad = tmp_path / "paper.yaml"
    bad.write_text(PAPER_FILE.read_text().replace("{id: environment.depth,", "{id: environment.depht,"))
    with pytest.raises(ValueError, match="metrics.Environment Depth.id 'environment.depht' is not a registered"):
        load_paper_numbers(bad)


def test_the_specs_say_what_the_paper_and_the_report_rely_on():
    """Directions (the paper's Table 2 arrows: only camera following is lower-is-better), the paper flag, the
    static-content metrics (left out of dynamic cases), the resolutions (the verdict's ties), the Table 2 backbones
    and the chance levels (re-measured by tests/evaluate/test_measurement_validity.py)."""
    specs = catalog.METRICS
    strided = {"camera.rpe_trans_strided", "camera.rpe_rot_strided"}
    diagnostics = {"diagnostic.revisit_psnr", "diagnostic.revisit_ssim", "diagnostic.cross_departure"}
    departures = {"departure.visible", "departure.return_visible", "departure.sweep_visible"}
    assert {i for i, s in specs.items() if not s.higher_is_better} == {"camera.rpe_trans", "camera.rpe_rot"} | strided
    assert {i for i, s in specs.items() if s.static} == diagnostics | departures
    assert {i for i, s in specs.items() if not s.paper} == strided | diagnostics | departures | {"object.ors"}
    assert {i: s.resolution for i, s in specs.items() if s.resolution != 0.01} == {
        "camera.rpe_trans": 0.005, "camera.rpe_rot": 0.005, "diagnostic.revisit_psnr": 0.5}
    judge = catalog.PAPER_JUDGE
    assert {i: s.table2 for i, s in specs.items() if s.table2 is not None} == {
        "quality.imaging": "musiq-spaq", "quality.aesthetic": "laion", "human.identity": "arcface+sam2",
        "human.appearance": "dinov2+sam2", "object.appearance": "dinov2+sam2", "object.geometry": "sam2",
        "environment.visible": "dinov2", "environment.depth": "da3", "environment.reconstruction": "da3",
        "dynamic.overall": judge, "dynamic.return_progress": judge, "dynamic.persistence_reset": judge,
        "dynamic.final_state": judge, "dynamic.causal_physical": judge, "camera.rpe_trans": "", "camera.rpe_rot": ""}
    assert {k: (c.value, c.spread) for k, c in catalog.CHANCE.items()} == {
        ("environment.visible", "pixel-thumb16"): (0.10, 0.11), ("environment.depth", "*"): (0.0, 0.0),
        ("departure.visible", "pixel-thumb16"): (0.07, 0.08), ("departure.return_visible", "pixel-thumb16"): (0.06, 0.08),
        ("departure.sweep_visible", "pixel-thumb16"): (0.15, 0.04), ("dynamic.conditional", "*"): (0.5, 0.0)}


# -- the item result record (evaluate/results.py), one rule at a time ----------------------------------------------


def test_ground_truth_is_told_by_its_key_its_kind_or_its_backbone_each_alone():
    from evaluate.results import BackboneKind, MetricEntry, Status

    by_kind = MetricEntry("m", "da3", Status.COMPUTED, 1.0, BackboneKind.ORACLE)
    by_backbone = MetricEntry("m", "oracle", Status.COMPUTED, 1.0, BackboneKind.PAPER)  # its key says it too
    assert by_kind.is_oracle and by_backbone.is_oracle
    assert not MetricEntry("m", "da3", Status.COMPUTED, 1.0, BackboneKind.ESTIMATOR).is_oracle
    # the key alone, then the backbone alone (a key with no backbone part cannot say it)
    assert MetricEntry("m[oracle]", "", Status.COMPUTED, 1.0, BackboneKind.ESTIMATOR).is_oracle
    assert not MetricEntry("m[oracle]x", "", Status.COMPUTED, 1.0, BackboneKind.ESTIMATOR).is_oracle


def test_per_revisit_is_the_mean_over_targets_of_each_revisit_and_a_source_is_none_when_empty():
    from evaluate.results import BackboneKind, MetricEntry, Status

    e = MetricEntry("m", "b", Status.COMPUTED, 0.5, BackboneKind.ESTIMATOR,
                    details={"per_target": {"t1": [0.2, 1.0], "t2": [0.6, 0.0]}, "pose_source": "da3",
                             "depth_source": ""})
    assert e.per_revisit == pytest.approx([0.4, 0.5])
    assert e.source("pose") == "da3" and e.source("depth") is None and e.source("mask") is None


def test_a_metric_entry_round_trips_and_reads_an_empty_backbone_as_empty():
    from evaluate.results import BackboneKind, MetricEntry, Status

    e = MetricEntry("m", "b", Status.COMPUTED, 0.5, BackboneKind.ESTIMATOR, family="camera", settings_hash="h")
    d = e.to_dict()
    assert d["family"] == "camera" and d["settings_hash"] == "h" and MetricEntry.from_dict(d) == e
    bare = MetricEntry("m", "b", Status.COMPUTED, 0.5, BackboneKind.ESTIMATOR)
    assert "family" not in bare.to_dict() and "settings_hash" not in bare.to_dict()
    for stored in (None, ""):
        back = MetricEntry.from_dict({"metric": "m", "backbone": stored, "status": "computed", "value": 1.0})
        assert back.backbone == "" and back.key == "m"


def test_computed_and_value_leave_out_ground_truth_and_what_was_not_computed():
    from evaluate.results import BackboneKind, ItemResult, MetricEntry, Status

    est = MetricEntry("m", "da3", Status.COMPUTED, 0.5, BackboneKind.ESTIMATOR)
    gt = MetricEntry("m", "oracle", Status.COMPUTED, 0.9, BackboneKind.ORACLE)
    off = MetricEntry.unavailable("n", "da3", "no weights")
    nan_slot = MetricEntry("v", "da3", Status.COMPUTED, None, BackboneKind.ESTIMATOR)
    partial = MetricEntry("p", "da3", Status.FAILED, 0.3, BackboneKind.ESTIMATOR)  # a failed entry's stray value
    r = ItemResult(item={"case": "c"}, metrics={e.key: e for e in (est, gt, off, nan_slot, partial)})
    assert set(r.computed()) == {"m[da3]", "v[da3]"}
    assert set(r.computed(include_oracle=True)) == {"m[da3]", "m[oracle]", "v[da3]"}
    assert r.value("m[da3]") == 0.5 and r.value("m[oracle]") == 0.9
    for absent in ("n[da3]", "v[da3]", "p[da3]", "missing"):
        assert r.value(absent) != r.value(absent)  # NaN: not computed, no value, or no entry


def test_an_item_result_reads_missing_or_null_fields_as_their_defaults():
    from evaluate.results import ItemResult

    r = ItemResult.from_dict({"item": None, "num_revisits": None, "metrics": None, "schema_version": None,
                              "family_hashes": None, "validity": None})
    assert r.item == {} and r.num_revisits == 0 and r.metrics == {} and r.schema_version == 0
    assert r.family_hashes == {} and r.validity == {}
    bare = ItemResult.from_dict({})
    assert bare.num_revisits == 0 and bare.schema_version == 0 and bare.family_hashes == {} and bare.validity == {}
    made = ItemResult(item={})  # one made in memory reads as one read from a file that left the fields out
    assert (made.num_revisits, made.schema_version) == (bare.num_revisits, bare.schema_version) == (0, 0)
    full = ItemResult.from_dict({"schema_version": 4, "num_revisits": 2, "validity": {"ok": True},
                                 "family_hashes": {"camera": "h"}})
    assert full.schema_version == 4 and full.num_revisits == 2 and full.validity == {"ok": True}
    assert full.family_hashes == {"camera": "h"}


# -- a whole item that could not be evaluated (evaluate.stage._failed_result) ----------------------------------------
PAPER_CAMERA_QUALITY = ["camera.rpe_rot", "camera.rpe_trans", "quality.aesthetic", "quality.imaging"]


def test_a_failed_item_reports_every_paper_metric_of_its_family_failed_with_the_reason(tmp_path):
    """The paper's metrics of the camera, quality and the case's own family (the object family's ORS, a protocol
    extension, and the strided RPE diagnostics are not the paper's), each failed with the reason."""
    from evaluate.results import Status
    from evaluate.stage import _failed_result

    meta = {"case": {"family": "object"}, "item": {"model": "m", "case_id": "c"}, "timings": {"total_s": 3.0},
            "controls": {"context": "fov"}}
    r = _failed_result(tmp_path / "c", meta, "the video is gone", item={"model": "other"})
    assert sorted(m.metric for m in r.metrics.values()) == sorted(PAPER_CAMERA_QUALITY +
                                                                   ["object.appearance", "object.geometry"])
    assert {m.status for m in r.metrics.values()} == {Status.FAILED}
    assert {m.reason for m in r.metrics.values()} == {"the video is gone"}
    assert r.failed and r.reason == "the video is gone" and r.case_family == "object"
    assert r.num_revisits == 0 and r.phases == {}  # nothing was read of the video: no revisit is claimed
    assert r.item == {"model": "m", "case_id": "c"}  # the item's own record first
    assert r.extra["timings_generation"] == {"total_s": 3.0} and r.extra["context_ran"] == "fov"


def test_a_failed_item_without_a_readable_meta_json_is_named_from_the_manifest_or_its_folder(tmp_path):
    from evaluate.stage import _failed_result

    named = _failed_result(tmp_path / "c", None, "unreadable", item={"model": "from-manifest"})
    assert named.item == {"model": "from-manifest"} and named.case_family == "?"
    assert sorted(m.metric for m in named.metrics.values()) == PAPER_CAMERA_QUALITY
    bare = _failed_result(tmp_path / "case_9", {"case": None, "controls": None, "item": None}, "unreadable")
    assert bare.item == {"model": "?", "context": "?", "seed": "?", "trajectory": "?", "case_id": "case_9"}
    assert bare.extra["context_ran"] is None and bare.extra["timings_generation"] == {}
