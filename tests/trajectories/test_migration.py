"""Migration to the paper-count presets (docs/trajectories.md, "Migration").

An item made with a replaced preset layout (trajectories.migration) is recognised from its meta.json: a rerun redoes
it (no refusal, no skip), the evaluation and the report never score it. An item of a trajectory whose layout did not
change stays done although the model configs lost their per-preset frame overrides (its fingerprint hashed them).
"""

from __future__ import annotations

import json

import pytest

from harness.config_groups import group_yaml
from tests.support import compose
from trajectories import Timing, TrajectorySpec
from trajectories.migration import SUPERSEDED, SUPERSEDED_NAMES, superseded_item, superseded_layout

TINY = ["model.height=48", "model.width=80", "progress=false", "cases.include=[environment_rocket]"]


def _recorded(spec: TrajectorySpec) -> dict:
    """A spec as an item's meta.json holds it (through JSON)."""
    return json.loads(json.dumps(spec.to_dict()))


def _preset(name: str, **over) -> TrajectorySpec:
    return TrajectorySpec.from_dict({**group_yaml("trajectory", name), **over})


def test_the_replaced_layouts_are_recognised_and_nothing_else():
    assert SUPERSEDED_NAMES == {"lrlrlr_sym_1dpf", "lr_hold_sym_0p5dpf", "translate_square"}
    # the old layouts, rebuilt with today's code from the old parameters, are the dicts listed ...
    old = [_preset("lrlrlr_sym_1dpf", yaw_deg=90.0), _preset("lrlrlr_sym_1dpf", yaw_deg=90.0, profile="cosine"),
           _preset("lr_hold_sym_0p5dpf", hold_frames={"initial": 0, "away": 0, "revisit": 0}),
           TrajectorySpec(name="translate_square", kind="square", side=1.0, timing=Timing(move=0.16))]
    for spec in old:
        why = superseded_layout(_recorded(spec))
        assert why and why.startswith(f"made with the superseded {spec.name} layout"), spec.name
    assert len(SUPERSEDED) == 5
    # ... and today's presets, the unchanged ones, a user's own variant and junk are not
    for name in ("lrlrlr_sym_1dpf", "lr_hold_sym_0p5dpf", "translate_square", "lrlr_sym_0p75dpf",
                 "lrud_sym_0p75dpf", "lrlr", "square"):
        assert superseded_layout(_recorded(_preset(name))) is None, name
    assert superseded_layout(_recorded(_preset("lrlrlr_sym_1dpf", yaw_deg=85.0))) is None
    for junk in (None, "lrlrlr_sym_1dpf", [], {"name": "lrlrlr_sym_1dpf"}, {"x": {1, 2}}):
        assert superseded_layout(junk) is None
    assert superseded_item({"trajectory": _recorded(old[0])}) and superseded_item(None) is None


def test_the_evaluation_refuses_an_item_of_a_replaced_layout(tmp_path):
    from harness.outputs import item_problems

    meta = {"status": "compiled", "trajectory": _recorded(_preset("lr_hold_sym_0p5dpf", hold_frames={"initial": 0}))}
    problems = item_problems(tmp_path, meta)
    assert any("superseded lr_hold_sym_0p5dpf layout without an initial hold" in p and "rerun" in p for p in problems)
    meta["trajectory"] = _recorded(_preset("lr_hold_sym_0p5dpf"))
    assert not any("superseded" in p for p in item_problems(tmp_path, meta))


def _run(tmp_path, *extra, **kw):
    from harness.app.runner import plan_from_config, run_items

    cfg = compose([f"output_root={tmp_path / 'o'}", "run=r", *TINY, *extra])
    plan = plan_from_config(cfg)
    return plan, run_items(plan, progress=False, **kw)


def _meta(plan) -> tuple[dict, object]:
    path = plan.run_dir / plan.items[0].rel_dir / "meta.json"
    return json.loads(path.read_text()), path


def test_an_item_stays_done_when_only_another_trajectorys_frame_override_went(tmp_path):
    """A model config lost ``frames_per_trajectory.lrlrlr_sym_1dpf`` (the presets now run at the paper's
    counts): its items of other trajectories were made with today's inputs and are skipped, not refused; an
    override of the item's own trajectory still refuses (its frames changed)."""
    from harness.app.runner import (FingerprintMismatch, check_fingerprints, fingerprints, item_is_current,
                                    plan_from_config)

    small = ["trajectory=lrlr", "model.num_frames=65"]
    plan, s = _run(tmp_path, *small, "+model.frames_per_trajectory.lrlrlr_sym_1dpf=541")
    assert len(s.done) == 1
    again = plan_from_config(compose([f"output_root={tmp_path / 'o'}", "run=r", *TINY, *small]))
    meta, _ = _meta(again)
    assert meta["fingerprint"] != fingerprints(again)[again.items[0].key][0]  # the model part hashed the override
    assert item_is_current(again, again.items[0], meta)
    check_fingerprints(again, overwrite=False)  # no refusal ...
    _, s = _run(tmp_path, *small)
    assert s.skipped and not s.done  # ... and nothing redone
    own = plan_from_config(compose([f"output_root={tmp_path / 'o'}", "run=r", *TINY, *small,
                                    "+model.frames_per_trajectory.lrlr=69"]))
    with pytest.raises(FingerprintMismatch, match="changed: model"):
        check_fingerprints(own, overwrite=False)


@pytest.mark.slow
def test_an_item_of_a_replaced_layout_is_redone_and_never_scored(tmp_path):
    """An LRLRLR item whose meta.json records the old 6 x 90-degree layout (as the harness before wrote it): the
    report leaves it out, a rerun neither refuses nor skips it but redoes it with today's layout. A layout that is
    not a replaced one (the user's own) is still refused, as any changed config."""
    from evaluate.reporting.collect import load_items
    from harness.app.runner import FingerprintMismatch, check_fingerprints, fingerprints, plan_from_config
    from harness.io import write_sealed_json

    plan, s = _run(tmp_path, "trajectory=lrlrlr_sym_1dpf")
    assert len(s.done) == 1
    meta, path = _meta(plan)
    key = plan.items[0].key
    old = _recorded(_preset("lrlrlr_sym_1dpf", yaw_deg=90.0))
    meta.update(trajectory=old, fingerprint="0" * 32)  # what the old harness recorded (its spec, its fingerprint)
    path.write_text(json.dumps(meta))
    write_sealed_json(path.parent / "metrics.json", {"item": meta["item"], "metrics": {},
                                                     "video_sha256": meta["video"]["sha256"]})
    items, skipped = load_items([plan.run_dir])
    assert not items and skipped["superseded"] == 1  # its old scores never reach a table

    again = plan_from_config(compose([f"output_root={tmp_path / 'o'}", "run=r", *TINY, "trajectory=lrlrlr_sym_1dpf"]))
    check_fingerprints(again, overwrite=False)  # recognised: no refusal
    _, s = _run(tmp_path, "trajectory=lrlrlr_sym_1dpf")
    assert s.done == [key] and "superseded lrlrlr_sym_1dpf layout of 6 x 90 deg" in s.redone[key]
    meta, path = _meta(again)
    assert meta["trajectory"]["yaw_deg"] == 80.0 and meta["fingerprint"] == fingerprints(again)[key][0]
    assert superseded_item(meta) is None

    meta.update(trajectory=_recorded(_preset("lrlrlr_sym_1dpf", yaw_deg=85.0)), fingerprint="1" * 32)
    path.write_text(json.dumps(meta))
    with pytest.raises(FingerprintMismatch):  # a layout of the user's: refused, never silently redone
        check_fingerprints(plan_from_config(compose([f"output_root={tmp_path / 'o'}", "run=r", *TINY,
                                                     "trajectory=lrlrlr_sym_1dpf"])), overwrite=False)
