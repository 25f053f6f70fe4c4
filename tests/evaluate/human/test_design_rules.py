"""A study design's rules at their edges, on small inputs built in memory (no study is planned): the target names a
question uses, the frame windows both clips of a pair show, drawing candidates, where a video's phases come from,
and which video an attention check's decoy may be."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluate.human import design
from evaluate.human.common import StudyError
from evaluate.human.sources import RunItem
from evaluate.results import ItemResult

_PHASES = {"V": [0, 4], "D1": [4, 8], "R1": [8, 12], "D2": [12, 16], "R2": [16, 20], "D3": [20, 24], "H": [24, 26]}


def test_a_question_names_the_objects_else_a_person_else_the_target():
    def targets(t):
        return design._targets({"case": {"targets": t}})

    assert targets({"objects": [{"name": "cat", "id": "o1"}, {"id": "box"}, {"name": "", "id": "lid"}]}) == \
        "cat and box and lid"
    assert targets({"objects": [{"name": "cat"}], "persons": [{"id": "p"}]}) == "cat"
    assert targets({"objects": [], "persons": [{"id": "p"}]}) == "person"
    assert targets({"objects": [{}], "persons": [{"id": "p"}]}) == "target"  # an object without a name or id
    assert targets({"persons": []}) == "target"
    assert design._targets({}) == design._targets({"case": None}) == "target"


def test_clip_windows_are_the_union_of_both_sides_recorded_revisit_frames():
    a = {"revisit_frames": [[9, 10], [17, 18]]}
    b = {"revisit_frames": [[8, 11]]}
    assert design._windows("static.x", [a, b, {}], _PHASES, 2) == [("R1", 8, 12), ("R2", 17, 19)]
    assert design._windows("static.x", [{"revisit_frames": [[], [30]]}], _PHASES, 2) == [("?", 30, 31)]


def test_without_recorded_frames_the_windows_are_the_phases_the_metric_scores():
    assert design._windows("static.x", [{}, {}], _PHASES, 2) == [("R1", 8, 12), ("R2", 16, 20)]
    assert design._windows("static.x", [{}, {}], _PHASES, 3) == [("R1", 8, 12), ("R2", 16, 20)]  # no R3 phase
    assert design._windows("static.x", [{}, {}], _PHASES, 1) == [("R1", 8, 12)]
    assert design._windows("departure.visible", [{}, {}], _PHASES, 2) == [("D2", 12, 16), ("D3", 20, 24)]
    assert design._windows("departure.visible", [{}], {"D1": [4, 8]}, 1) == []


def test_drawing_takes_every_candidate_unless_fewer_are_wanted():
    rng = np.random.default_rng(0)
    assert design._draw(4, None, rng) == [0, 1, 2, 3]
    assert design._draw(4, 4, rng) == [0, 1, 2, 3]
    assert design._draw(4, 9, rng) == [0, 1, 2, 3]
    got = design._draw(4, 3, rng)
    assert len(got) == len(set(got)) == 3 and got == sorted(got) and set(got) <= {0, 1, 2, 3}
    assert design._draw(4, 0, rng) == []


def _item(tmp_path: Path, name: str, arm=("m", "c"), seed=0, trajectory="t", case="c1", phases=None, meta=None):
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    if meta is not None:
        (d / "meta.json").write_text(json.dumps(meta))
    res = ItemResult(item={}, phases=phases or {}, metrics={})
    return RunItem("run", tmp_path, d, arm[0], arm[1], seed, trajectory, case, "static", res)


def test_phases_come_from_metrics_json_else_meta_json(tmp_path):
    it = _item(tmp_path, "a", phases={"V": [0.0, 4], "R1": [4, 9]}, meta={"camera": {"phases": {"V": [0, 1]}}})
    assert design._phases(it) == {"V": [0, 4], "R1": [4, 9]}
    assert all(type(x) is int for v in design._phases(it).values() for x in v)
    it = _item(tmp_path, "b", meta={"camera": {"phases": {"V": [0, 2], "R1": [2, 5]}}})
    assert design._phases(it) == {"V": [0, 2], "R1": [2, 5]}
    for name, meta in (("c", {"camera": {}}), ("d", {"camera": None}), ("e", {})):
        with pytest.raises(StudyError, match=r"no camera phases in metrics\.json or meta\.json; re-evaluate"):
            design._phases(_item(tmp_path, name, meta=meta))


def test_a_checks_decoy_is_the_same_arm_trajectory_and_seed_on_another_case(tmp_path):
    first = _item(tmp_path, "first")
    decoy = _item(tmp_path, "decoy", case="c2")
    others = [_item(tmp_path, "arm", arm=("m2", "c"), case="c2"), _item(tmp_path, "ctx", arm=("m", "c2"), case="c2"),
              _item(tmp_path, "traj", trajectory="t2", case="c2"), _item(tmp_path, "seed", seed=1, case="c2"),
              _item(tmp_path, "same", seed=0)]  # the same case is no decoy
    chosen = [{"metric": "k[b]", "metric_id": "k", "higher_is_better": True, "task": {"case_id": "c1"},
               "_items": (first, first, first)}]
    req = design.PlanRequest(runs=[], metrics=["k[b]"], seed=1, checks=2, secret="s" * 16)
    got = design.design_checks(req, [first, decoy, *others], chosen)
    assert [r["check"] for r in got] == [{"expected": "A", "decoy_case": "c2"}, {"expected": "B", "decoy_case": "c2"}]
    assert got[0]["_items"] == (first, decoy, first) and got[1]["_items"] == (decoy, first, first)
    assert [r["swapped"] for r in got] == [False, True]
    with pytest.raises(StudyError, match="an attention check needs a second case of the same arm, trajectory and seed"):
        design.design_checks(req, [first, *others], chosen)
    assert design.design_checks(req, [first, decoy], chosen, n=0) == []
