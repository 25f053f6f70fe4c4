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


# -- issue 11: positions, boxes, masks, trajectories, image size ---------------------------------------------------

def test_jsonl_errors_name_the_real_line(tmp_path):
    _img(tmp_path)
    bad = {**GOOD, "id": "c2", "family": "nope"}
    (tmp_path / "set.jsonl").write_text(json.dumps(GOOD) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(CaseError, match=r"set\.jsonl: line 3: family"):
        load_case_set(tmp_path / "set.jsonl")
    (tmp_path / "set.jsonl").write_text(json.dumps(GOOD) + "\n{garbage\n")
    with pytest.raises(CaseError, match=r"set\.jsonl: line 2: cannot parse"):
        load_case_set(tmp_path / "set.jsonl")


@pytest.mark.parametrize("box, needle", [
    ([0, 0, 31, 10], "not inside the 30x20 image"),
    ([-1, 0, 10, 10], "not inside"),
    ([0, 0, 10, float("inf")], "non-finite"),
])
def test_boxes_must_lie_inside_the_image(tmp_path, box, needle):
    _img(tmp_path)
    case = {**GOOD, "family": "human", "targets": {"persons": [{"id": "p", "box": box}]}}
    (tmp_path / "c.json").write_text(json.dumps(case))
    with pytest.raises(CaseError, match=needle):
        load_case_set(tmp_path / "c.json")


def test_missing_mask_fails_when_loading_the_set(tmp_path):
    _img(tmp_path)
    case = {**GOOD, "family": "object", "targets": {"objects": [{"id": "o", "name": "cup", "box": [0, 0, 5, 5],
                                                                  "mask": "nope.png"}]}}
    _write(tmp_path, "c.yaml", case)
    with pytest.raises(CaseError, match=r"targets\.objects\[o\]\.mask: 'nope.png' not found"):
        load_case_set(tmp_path)


def test_unknown_trajectory_name_is_refused(tmp_path):
    _img(tmp_path)
    _write(tmp_path, "c.yaml", {**GOOD, "trajectories": ["lrlr", "lrdu"]})
    with pytest.raises(CaseError, match=r"unknown trajectory 'lrdu'.*Did you mean 'lrud'"):
        load_case_set(tmp_path)


def _png_header(path, width, height):
    """A PNG that only has a header (IHDR) claiming ``width`` x ``height``: cheap to write, huge to decode."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def test_image_size_is_limited_from_the_header(tmp_path):
    _png_header(tmp_path / "img.png", 100000, 100000)
    _write(tmp_path, "c.yaml", GOOD)
    with pytest.raises(CaseError, match=r"100000x100000 .* over the 64 MP limit"):
        load_case_set(tmp_path)
    from harness.cases import load_rgb

    with pytest.raises(CaseError, match="over the 64 MP limit"):
        load_rgb(str(tmp_path / "img.png"))


def test_a_scikit_image_sample_is_a_fresh_array_each_time_and_an_unknown_one_is_named():
    """Samples are decoded once per process; a caller that writes to its image never changes the next one's."""
    from harness.cases import load_rgb

    first = load_rgb("skimage://rocket")
    keep = first.copy()
    first[:] = 0
    again = load_rgb("skimage://rocket")
    assert again.shape == keep.shape and again.dtype == np.uint8 and np.array_equal(again, keep) and again.any()
    with pytest.raises(CaseError, match=r"image 'skimage://no_such_sample': scikit-image has no sample"):
        load_rgb("skimage://no_such_sample")
