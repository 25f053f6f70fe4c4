"""Case schema, loaders and the demo set."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from harness.cases import CaseError, load_case_file, load_case_set


def test_demo_set_covers_every_family(demo_cases):
    fams = {c.family for c in demo_cases.values()}
    assert {"human", "object", "environment", "dynamic"} <= fams
    for c in demo_cases.values():
        img = c.load_image()
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    cat = demo_cases["dynamic_cat"]
    assert len(cat.event.questions) == 8
    depth = demo_cases["environment_motorcycle"].load_depth()
    assert depth.shape == demo_cases["environment_motorcycle"].load_image().shape[:2]
    cup = demo_cases["object_coffee"]
    m = cup.object_mask(cup.targets.objects[0], 400, 600)
    assert 0.05 < m.mean() < 0.5


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


GOOD = {"id": "c1", "family": "environment", "image": "img.png", "prompt": "a room"}


def _img(tmp_path):
    import cv2

    cv2.imwrite(str(tmp_path / "img.png"), np.zeros((20, 30, 3), np.uint8))


def test_relative_image_paths_resolve_against_the_case_file(tmp_path):
    _img(tmp_path)
    _write(tmp_path, "c1.yaml", GOOD)
    (case,) = load_case_set(tmp_path)
    assert case.load_image().shape == (20, 30, 3)


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"family": "robot"}, "family"),
        ({"imagee": "x"}, "imagee"),
        ({"hfov_deg": 500}, "hfov_deg"),
        ({"family": "human"}, "persons"),
        ({"family": "dynamic"}, "event"),
        ({"targets": {"objects": [{"id": "o", "name": "cup", "box": [0, 0, 5, 5]}]}}, "mask"),
        ({"targets": {"persons": [{"id": "p", "box": [5, 5, 1, 1]}]}}, "box"),
    ],
)
def test_malformed_case_names_file_and_field(tmp_path, patch, field):
    _img(tmp_path)
    bad = {**GOOD, **patch}
    p = _write(tmp_path, "bad.yaml", bad)
    with pytest.raises(CaseError) as err:
        load_case_file(p)
    assert str(p) in str(err.value) and field in str(err.value)


def test_event_needs_two_questions_per_aspect(tmp_path):
    q = [{"aspect": "final_state", "question": "?", "answer": "yes"}] * 8
    bad = {**GOOD, "family": "dynamic", "event": {"initial_state": "a", "action": "b",
                                                   "expected_next_state": "c", "questions": q}}
    with pytest.raises(CaseError, match="two per aspect"):
        load_case_file(_write(tmp_path, "e.yaml", bad))


def test_missing_image_and_duplicate_ids(tmp_path):
    _write(tmp_path, "a.yaml", GOOD)
    with pytest.raises(CaseError, match="not found"):
        load_case_set(tmp_path)
    _img(tmp_path)
    _write(tmp_path, "b.yaml", GOOD)
    with pytest.raises(CaseError, match="unique"):
        load_case_set(tmp_path)


def test_jsonl_case_set(tmp_path):
    _img(tmp_path)
    rows = [{**GOOD, "id": f"c{i}"} for i in range(3)]
    (tmp_path / "set.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert [c.id for c in load_case_set(tmp_path / "set.jsonl")] == ["c0", "c1", "c2"]


def test_unparseable_file(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("id: [unclosed")
    with pytest.raises(CaseError, match="cannot parse"):
        load_case_file(p)
