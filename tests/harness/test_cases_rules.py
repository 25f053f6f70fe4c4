"""The rules of harness/cases.py, one at a time and in this process: the schema (boxes, masks, events, families,
trajectories), the loaders (records, positions in messages, the parse cache, case sets), the resources a case names
(images, depth maps, masks, polygons) and the ``cases`` config section. Every file is a tiny one under tmp_path."""

from __future__ import annotations

import json
import os

import cv2
import numpy as np
import pytest
from pydantic import ValidationError
from skimage import data as skdata

from harness import cases as cases_mod
from harness import config_groups
from harness.cases import (
    KNOWN_TRAJECTORIES,
    MAX_IMAGE_PIXELS,
    Case,
    CaseError,
    CaseSelection,
    Event,
    Intrinsics,
    ObjectTarget,
    Person,
    _format_error,
    _where,
    check_image_size,
    check_npy,
    check_resources,
    image_size,
    known_trajectories,
    load_case_file,
    load_case_set,
    load_cases_from_config,
    load_rgb,
)
from trajectories.builders import TrajectorySpec

H, W = 20, 30  # the conditioning image of every file-based test
BASE = {"id": "c1", "family": "environment", "image": "img.png", "prompt": "a room"}
ORDER = ("return_progress", "persistence_reset", "final_state", "causal_physical")


def questions(*counts: int) -> list[dict]:
    """``counts[i]`` questions of the i-th aspect."""
    return [{"aspect": a, "question": f"{a} {k}?", "answer": "yes"} for a, n in zip(ORDER, counts) for k in range(n)]


def event(*counts: int) -> dict:
    return {"initial_state": "a", "action": "b", "expected_next_state": "c", "questions": questions(*counts)}


EVENT = event(2, 2, 2, 2)


def write_image(path, height=H, width=W, value=0):
    cv2.imwrite(str(path), np.full((height, width, 3), value, np.uint8))
    return path


@pytest.fixture
def folder(tmp_path):
    """tmp_path with the 30x20 conditioning image ``img.png``."""
    write_image(tmp_path / "img.png")
    return tmp_path


def case_in(folder, **fields) -> Case:
    """A case as the loader makes it from ``folder/c.yaml``."""
    return Case(**{**BASE, **fields, "source": str(folder / "c.yaml")})


def write_cases(path, *records):
    path.write_text("\n".join(json.dumps(r) for r in records) if path.suffix == ".jsonl" else json.dumps(
        records[0] if len(records) == 1 else list(records)))
    return path


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(CaseError) as err:
        fn(*args, **kwargs)
    return str(err.value)


# -- the schema: intrinsics, boxes, masks, events -----------------------------------------------------------------

def test_intrinsics_give_the_pinhole_matrix_and_need_positive_focal_lengths():
    k = Intrinsics(fx=0.5, fy=0.25, cx=3.0, cy=4.0)
    assert k.matrix().tolist() == [[0.5, 0.0, 3.0], [0.0, 0.25, 4.0], [0.0, 0.0, 1.0]]
    assert k.matrix().dtype == np.float64
    for bad in ({"fx": 0.0}, {"fy": 0.0}):
        with pytest.raises(ValidationError):
            Intrinsics(**{"fx": 1.0, "fy": 1.0, "cx": 0.0, "cy": 0.0, **bad})


@pytest.mark.parametrize("box", [[0, 0, 5, 5], [1, 2, 30, 40], [0, 0, 30, 20], [1, 5, 3, 6]])
def test_a_box_with_x1_above_x0_and_y1_above_y0_is_accepted(box):
    assert Person(id="p", box=box).box == box


@pytest.mark.parametrize("box, message", [
    ([0, 0, 5], "box must be [x0, y0, x1, y1] (4 numbers, pixels)"),
    ([0, 0, 5, 5, 5], "box must be [x0, y0, x1, y1] (4 numbers, pixels)"),
    ([0, float("nan"), 5, 5], "box [0.0, nan, 5.0, 5.0] has a non-finite coordinate; give pixels inside the image"),
    ([5, 1, 5, 9], "box [5.0, 1.0, 5.0, 9.0] is empty: need x1 > x0 and y1 > y0"),
    ([1, 5, 3, 5], "box [1.0, 5.0, 3.0, 5.0] is empty: need x1 > x0 and y1 > y0"),
    ([6, 0, 2, 9], "box [6.0, 0.0, 2.0, 9.0] is empty: need x1 > x0 and y1 > y0"),
])
def test_a_box_of_the_wrong_length_non_finite_or_empty_is_refused(box, message):
    with pytest.raises(ValidationError) as err:
        Person(id="p", box=box)
    assert err.value.errors()[0]["msg"] == f"Value error, {message}"


def test_an_object_needs_a_mask_or_a_polygon_of_at_least_three_points():
    assert ObjectTarget(id="o", name="cup", box=[0, 0, 5, 5], mask="m.png").polygon is None
    tri = [[0, 0], [4, 0], [0, 4]]
    assert ObjectTarget(id="o", name="cup", box=[0, 0, 5, 5], polygon=tri).mask is None
    with pytest.raises(ValidationError, match="an object needs a mask: give 'mask' \\(PNG path\\) or 'polygon'"):
        ObjectTarget(id="o", name="cup", box=[0, 0, 5, 5])
    with pytest.raises(ValidationError, match=r"polygon needs at least 3 points \[\[x, y\], \.\.\.\]"):
        ObjectTarget(id="o", name="cup", box=[0, 0, 5, 5], polygon=tri[:2])


def test_an_event_has_exactly_two_questions_per_aspect():
    assert len(Event(**EVENT).questions) == 8
    with pytest.raises(ValidationError) as err:
        Event(**event(3, 1, 2, 2))
    assert ("questions: need exactly 8, two per aspect ['return_progress', 'persistence_reset', 'final_state', "
            "'causal_physical']; got {'return_progress': 3, 'persistence_reset': 1, 'final_state': 2, "
            "'causal_physical': 2}") in str(err.value)
    with pytest.raises(ValidationError, match="got {'return_progress': 2, 'persistence_reset': 2, 'final_state': 2, "
                                              "'causal_physical': 1}"):
        Event(**event(2, 2, 2, 1))


def test_a_case_is_frozen_and_refuses_unknown_fields():
    case = Case(**BASE)
    with pytest.raises(ValidationError):
        case.id = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        Case(**BASE, colour="red")


def test_the_field_of_view_lies_strictly_between_1_and_179_degrees():
    assert Case(**BASE, hfov_deg=1.5).hfov_deg == 1.5
    assert Case(**BASE, hfov_deg=178.5).hfov_deg == 178.5
    for bad in (1.0, 179.0, 179.5):
        with pytest.raises(ValidationError, match="hfov_deg"):
            Case(**BASE, hfov_deg=bad)


def test_a_case_id_starts_with_a_letter_or_digit():
    assert Case(**{**BASE, "id": "9a_b.c-d"}).id == "9a_b.c-d"
    with pytest.raises(ValidationError, match="id"):
        Case(**{**BASE, "id": "_c"})


# -- families and trajectories ------------------------------------------------------------------------------------

PERSON = {"persons": [{"id": "p", "box": [0, 0, 5, 5]}]}
OBJECT = {"objects": [{"id": "o", "name": "cup", "box": [0, 0, 5, 5], "polygon": [[0, 0], [4, 0], [0, 4]]}]}


@pytest.mark.parametrize("family, extra", [
    ("environment", {}),
    ("dynamic", {"event": EVENT}),
    ("human", {"targets": PERSON}),
    ("object", {"targets": OBJECT}),
])
def test_each_family_is_accepted_with_what_it_needs(family, extra):
    assert Case(**{**BASE, "family": family, **extra}).family == family


@pytest.mark.parametrize("family, message", [
    ("dynamic", "a dynamic case needs 'event' (initial_state, action, expected_next_state, questions)"),
    ("human", "a human case needs at least one person in targets.persons"),
    ("object", "an object case needs at least one object in targets.objects"),
])
def test_a_family_without_its_annotation_is_refused_unless_marked_unannotated(family, message):
    with pytest.raises(ValidationError) as err:
        Case(**{**BASE, "family": family})
    assert err.value.errors()[0]["msg"] == f"Value error, {message}"
    assert Case(**{**BASE, "family": family, "unannotated": True}).unannotated is True
    assert Case(**{**BASE, "family": family, "unannotated": True}).event is None


def test_an_environment_case_needs_no_event_persons_or_objects():
    case = Case(**BASE)
    assert (case.event, case.targets.persons, case.targets.objects, case.unannotated) == (None, [], [], False)
    assert case.trajectories == list(KNOWN_TRAJECTORIES)


def test_a_case_lists_at_least_one_known_trajectory():
    assert Case(**BASE, trajectories=["lrlr_sym_0p75dpf", "square"]).trajectories == ["lrlr_sym_0p75dpf", "square"]
    with pytest.raises(ValidationError) as err:
        Case(**BASE, trajectories=[])
    assert f"list at least one trajectory of {known_trajectories()}" in str(err.value)
    with pytest.raises(ValidationError) as err:
        Case(**BASE, trajectories=["square", "sqare"])
    assert f"unknown trajectory 'sqare'. Did you mean 'square'? Known: {known_trajectories()}" in str(err.value)


@pytest.fixture
def fresh_trajectories():
    known_trajectories.cache_clear()
    yield
    known_trajectories.cache_clear()


def test_the_known_trajectories_are_the_config_group_options(fresh_trajectories):
    assert known_trajectories() == config_groups.list_group("trajectory")
    assert "lrlr_sym_0p75dpf" in known_trajectories()


@pytest.mark.parametrize("found", [[], RuntimeError("no conf")])
def test_without_trajectory_options_the_built_ins_are_known(fresh_trajectories, monkeypatch, found):
    def list_group(group):
        if isinstance(found, Exception):
            raise found
        return found

    monkeypatch.setattr(config_groups, "list_group", list_group)
    assert known_trajectories() == ["lrlr", "lrlrlr", "lrud", "square"]


def spec(variant_of=None, families=None) -> TrajectorySpec:
    return TrajectorySpec(name="preset", variant_of=variant_of, families=families)


def test_a_case_runs_on_a_trajectory_it_lists_by_name():
    case = Case(**BASE, trajectories=["lrlr"])
    assert case.runs_on("lrlr", spec()) is True
    assert case.runs_on("lrlr", spec(variant_of="square", families=("dynamic",))) is True
    assert case.runs_on("square", spec()) is False


def test_a_case_runs_on_a_variant_of_a_listed_trajectory_meant_for_its_family():
    case = Case(**BASE, trajectories=["lrlr"])
    assert case.runs_on("preset", spec(variant_of="lrlr")) is True
    assert case.runs_on("preset", spec(variant_of="lrlr", families=())) is True
    assert case.runs_on("preset", spec(variant_of="lrlr", families=("human", "environment"))) is True
    assert case.runs_on("preset", spec(variant_of="lrlr", families=("dynamic",))) is False
    assert case.runs_on("preset", spec(variant_of="square")) is False
    assert case.runs_on("preset", spec(variant_of="square", families=("environment",))) is False


# -- resolving paths, images, depth, masks, intrinsics ------------------------------------------------------------

def test_paths_resolve_against_the_case_file_folder_unless_absolute_or_a_sample(tmp_path):
    case = case_in(tmp_path)
    assert case._resolve("sub/img.png") == str(tmp_path / "sub" / "img.png")
    assert case._resolve("/abs/img.png") == "/abs/img.png"
    assert case._resolve("skimage://checkerboard") == "skimage://checkerboard"
    assert Case(**BASE)._resolve("sub/img.png") == "sub/img.png"


def test_an_image_is_read_as_rgb_uint8(tmp_path):
    bgr = np.zeros((2, 3, 3), np.uint8)
    bgr[0, 0] = (1, 2, 3)
    cv2.imwrite(str(tmp_path / "x.png"), bgr)
    rgb = load_rgb(str(tmp_path / "x.png"))
    assert rgb.shape == (2, 3, 3) and rgb.dtype == np.uint8
    assert rgb[0, 0].tolist() == [3, 2, 1]
    assert rgb.flags.c_contiguous


def test_a_grey_or_rgba_sample_becomes_three_channels():
    grey = load_rgb("skimage://checkerboard")
    assert grey.shape == (200, 200, 3)
    assert np.array_equal(grey[..., 0], skdata.checkerboard()) and np.array_equal(grey[..., 2], skdata.checkerboard())
    logo = load_rgb("skimage://logo")
    assert logo.shape == (500, 500, 3) and np.array_equal(logo, skdata.logo()[..., :3])


def test_the_motorcycle_samples_are_the_stereo_pair_left_image_and_its_disparity():
    left, _, disparity = skdata.stereo_motorcycle()
    assert np.array_equal(load_rgb("skimage://motorcycle_left"), left)
    case = Case(**{**BASE, "image": "skimage://motorcycle_left"}, depth="skimage://motorcycle_disparity")
    depth = case.load_depth()
    assert depth.dtype == np.float32 and np.array_equal(depth, np.asarray(disparity, np.float32))


def test_an_unreadable_image_is_named(tmp_path):
    missing = str(tmp_path / "none.png")
    assert error_of(load_rgb, missing) == (f"image {missing!r} is missing or unreadable; check the path (relative to "
                                           "the case file)")
    header_only = tmp_path / "h.png"  # a PNG header PIL reads, with no pixels for OpenCV to decode
    img = tmp_path / "full.png"
    write_image(img, 4, 5)
    header_only.write_bytes(img.read_bytes()[:33] + b"\x00\x00\x00\x00IEND\xaeB`\x82")
    assert image_size(str(header_only)) == (5, 4)
    assert "is missing or unreadable" in error_of(load_rgb, str(header_only))


def test_a_case_image_error_names_the_case_file_and_field(tmp_path):
    case = case_in(tmp_path, image="none.png")
    assert error_of(case.load_image) == (f"{tmp_path / 'c.yaml'}: image: image {str(tmp_path / 'none.png')!r} is "
                                         "missing or unreadable; check the path (relative to the case file)")


def test_image_size_reads_width_then_height_and_names_a_file_that_is_no_image(tmp_path):
    assert image_size(str(write_image(tmp_path / "x.png", 4, 7))) == (7, 4)
    (tmp_path / "x.txt").write_text("hello")
    msg = error_of(image_size, str(tmp_path / "x.txt"))
    assert msg.startswith(f"image {str(tmp_path / 'x.txt')!r} cannot be read (") and msg.endswith(
        "); give a PNG/JPEG file")


def test_the_image_size_limit_is_64_mebipixels_inclusive():
    assert MAX_IMAGE_PIXELS == 8192 * 8192
    check_image_size("x.png", 8192, 8192)
    assert error_of(check_image_size, "x.png", 8192, 8193) == (
        "image 'x.png' is 8192x8193 (67 MP), over the 64 MP limit; downscale it (conditioning images are resized "
        "to the model canvas anyway)")


def test_a_case_without_depth_has_none():
    assert Case(**BASE).load_depth() is None


def test_depth_is_read_as_float32_from_a_npy_or_a_sample(tmp_path):
    np.save(tmp_path / "d.npy", np.array([[1, 2], [3, 4]], np.int16))
    depth = case_in(tmp_path, depth="d.npy").load_depth()
    assert depth.dtype == np.float32 and depth.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    sample = case_in(tmp_path, depth="skimage://checkerboard").load_depth()
    assert sample.dtype == np.float32 and np.array_equal(sample, skdata.checkerboard().astype(np.float32))


def test_disparity_is_inverted_and_invalid_disparity_becomes_zero(tmp_path):
    disp = np.array([[2.0, 0.0, -1.0], [np.nan, np.inf, 0.5]], np.float32)
    np.save(tmp_path / "d.npy", disp)
    depth = case_in(tmp_path, depth="d.npy", depth_kind="disparity").load_depth()
    assert depth.dtype == np.float32 and depth.tolist() == [[0.5, 0.0, 0.0], [0.0, 0.0, 2.0]]
    assert case_in(tmp_path, depth="d.npy").load_depth()[0].tolist() == [2.0, 0.0, -1.0]


def test_a_depth_file_is_checked_before_it_is_loaded(tmp_path):
    np.save(tmp_path / "d3.npy", np.zeros((2, 2, 2), np.float32))
    src = tmp_path / "c.yaml"
    assert error_of(case_in(tmp_path, depth="d3.npy").load_depth) == (
        f"{src}: depth: {tmp_path / 'd3.npy'} has shape (2, 2, 2); a depth map is (H, W), the image's height and width")
    np.save(tmp_path / "short.npy", np.zeros((50, 50), np.float32))
    (tmp_path / "short.npy").write_bytes((tmp_path / "short.npy").read_bytes()[:200])  # header intact, data cut
    msg = error_of(case_in(tmp_path, depth="short.npy").load_depth)
    assert msg.startswith(f"{src}: depth: 'short.npy' cannot be read (") and msg.endswith(
        "); give a float (H, W) .npy saved with numpy.save")


def test_check_npy_reads_the_shape_of_version_1_and_2_files(tmp_path):
    for version in ((1, 0), (2, 0)):
        path = tmp_path / f"v{version[0]}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, np.zeros((3, 4), np.float32), version=version)
        assert check_npy(str(path), "here") == (3, 4)
    np.save(tmp_path / "i.npy", np.zeros((2, 5), np.uint8))
    assert check_npy(str(tmp_path / "i.npy"), "here") == (2, 5)


@pytest.mark.parametrize("array, holds", [
    (np.array([["a", "b"]]), "<U1"),
    (np.zeros((2, 2), bool), "bool"),
    (np.zeros((2, 2), np.complex64), "complex64"),
    (np.array([[None, 1]], dtype=object), "object"),
])
def test_check_npy_refuses_values_that_are_not_numbers(tmp_path, array, holds):
    path = tmp_path / "x.npy"
    np.save(path, array, allow_pickle=True)
    assert error_of(check_npy, str(path), "w") == (f"w: {path} holds {holds} values (pickled objects are never "
                                                   "loaded); save a float (H, W) array with numpy.save")


def test_check_npy_names_a_missing_file_and_one_that_is_no_npy(tmp_path):
    assert error_of(check_npy, str(tmp_path / "no.npy"), "w") == (
        f"w: {tmp_path / 'no.npy'} not found; fix the path (relative to the case file)")
    (tmp_path / "x.npy").write_text("not numpy")
    msg = error_of(check_npy, str(tmp_path / "x.npy"), "w")
    assert msg.startswith(f"w: {tmp_path / 'x.npy'} is not a .npy file (") and msg.endswith(
        "); save the depth map with numpy.save")


def test_a_mask_png_is_white_above_127(tmp_path):
    cv2.imwrite(str(tmp_path / "m.png"), np.array([[0, 127], [128, 255]], np.uint8))
    case = case_in(tmp_path)
    obj = ObjectTarget(id="o", name="cup", box=[0, 0, 2, 2], mask="m.png")
    assert case.object_mask(obj, 2, 2).tolist() == [[False, False], [True, True]]


def test_a_mask_that_cannot_be_read_or_has_another_size_is_named(tmp_path):
    cv2.imwrite(str(tmp_path / "m.png"), np.zeros((2, 3), np.uint8))
    case = case_in(tmp_path)
    src = tmp_path / "c.yaml"
    obj = ObjectTarget(id="o", name="cup", box=[0, 0, 2, 2], mask="m.png")
    assert error_of(case.object_mask, obj, 3, 2) == (
        f"{src}: targets.objects[o].mask: 'm.png' is 3x2, the image is 2x3; give a mask of the image's size")
    gone = ObjectTarget(id="o", name="cup", box=[0, 0, 2, 2], mask="gone.png")
    assert error_of(case.object_mask, gone, 2, 3) == (
        f"{src}: targets.objects[o].mask: cannot read 'gone.png'; give a PNG of the image's size (white = object)")


def test_a_polygon_mask_is_filled_with_its_edges():
    obj = ObjectTarget(id="o", name="cup", box=[0, 0, 5, 4], polygon=[[1, 1], [3.4, 1], [3.4, 2.6], [1, 2.6]])
    mask = Case(**BASE).object_mask(obj, 4, 5)
    assert mask.dtype == bool
    assert mask.astype(int).tolist() == [[0, 0, 0, 0, 0], [0, 1, 1, 1, 0], [0, 1, 1, 1, 0], [0, 1, 1, 1, 0]]


def test_intrinsics_come_from_the_case_then_its_fov_then_the_default():
    k = {"fx": 10.0, "fy": 11.0, "cx": 1.0, "cy": 2.0}
    assert Case(**BASE, intrinsics=k, hfov_deg=90).intrinsics_matrix(20, 30, 60.0)[0].tolist() == [10.0, 0.0, 1.0]
    fov = Case(**BASE, hfov_deg=90).intrinsics_matrix(20, 30, 60.0)
    assert fov[0, 0] == pytest.approx(15.0) and fov[1, 1] == pytest.approx(15.0) and fov[:2, 2].tolist() == [15, 10]
    default = Case(**BASE).intrinsics_matrix(20, 30, 90.0)
    assert default[0, 0] == pytest.approx(15.0)


# -- case files: records, positions, messages, the parse cache ----------------------------------------------------

def test_where_names_a_list_entry_or_a_line():
    assert (_where(None), _where(2), _where("line 3")) == ("", "[2] ", "line 3: ")


def test_every_validation_problem_is_one_line_naming_file_position_and_field():
    try:
        Case(**{**BASE, "prompt": None, "imagee": "x"})
    except ValidationError as err:
        text = _format_error("f.yaml", err, 1)
    assert text.splitlines() == [
        "f.yaml: [1] prompt: Input should be a valid string",
        "f.yaml: [1] imagee: unknown field; remove it or fix its spelling (see docs/cases.md for the schema)",
    ]
    try:
        Case(**{k: v for k, v in BASE.items() if k != "prompt"})
    except ValidationError as err:
        assert _format_error("f.yaml", err, None) == "f.yaml: prompt: required field is missing; add it (see docs/cases.md)"


def test_a_whole_case_problem_is_placed_on_the_case(tmp_path):
    path = write_cases(tmp_path / "c.json", {**BASE, "family": "dynamic"})
    assert error_of(load_case_file, path) == (
        f"{path}: <case>: Value error, a dynamic case needs 'event' (initial_state, action, expected_next_state, "
        "questions)")


def test_a_list_file_holds_several_cases_and_names_the_bad_entry(tmp_path):
    path = write_cases(tmp_path / "c.json", BASE, {**BASE, "id": "c2"})
    loaded = load_case_file(path)
    assert [c.id for c in loaded] == ["c1", "c2"] and {c.source for c in loaded} == {str(path)}
    bad = write_cases(tmp_path / "bad.json", BASE, {**BASE, "family": "robot"})
    assert error_of(load_case_file, bad).startswith(f"{bad}: [1] family: Input should be")
    scalars = write_cases(tmp_path / "s.json", BASE, 5)
    assert error_of(load_case_file, scalars) == f"{scalars}: [1] a case must be a mapping"
    scalar = tmp_path / "one.yaml"
    scalar.write_text("just text\n")
    assert error_of(load_case_file, scalar) == f"{scalar}: a case must be a mapping"


def test_yaml_and_yml_files_are_read_as_yaml_and_json_files_as_json(tmp_path):
    (tmp_path / "c.yml").write_text("id: c1\nfamily: environment\nimage: img.png\nprompt: a room\n")
    assert load_case_file(tmp_path / "c.yml")[0].prompt == "a room"
    (tmp_path / "c.json").write_text('{"id": "c1" "x"}')
    assert error_of(load_case_file, tmp_path / "c.json") == (
        f"{tmp_path / 'c.json'}: cannot parse (Expecting ',' delimiter: line 1 column 13 (char 12)); fix the syntax")


def test_jsonl_lines_are_cases_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(BASE) + "\n   \n" + json.dumps({**BASE, "id": "c2"}) + "\n")
    assert [c.id for c in load_case_file(path)] == ["c1", "c2"]
    path.write_text(json.dumps(BASE) + "\n" + json.dumps([1]) + "\n")
    assert error_of(load_case_file, path) == f"{path}: line 2: a case must be a mapping"


def test_a_case_file_that_is_not_utf8_or_cannot_be_read_is_named(tmp_path):
    (tmp_path / "c.yaml").write_bytes(b"id: \xff\n")
    assert error_of(load_case_file, tmp_path / "c.yaml") == (
        f"{tmp_path / 'c.yaml'}: not UTF-8 text (byte 4); save the case file as UTF-8")
    assert error_of(load_case_file, tmp_path / "gone.yaml") == (
        f"{tmp_path / 'gone.yaml'}: cannot be read (No such file or directory); check the file and its permissions")
    assert error_of(load_case_file, tmp_path) == (
        f"{tmp_path}: cannot be read (Is a directory); check the file and its permissions")


def test_an_unchanged_case_file_is_not_parsed_again_and_a_changed_one_is(tmp_path):
    path = write_cases(tmp_path / "c.json", {**BASE, "prompt": "aaaa"})
    first = load_case_file(path)
    st = path.stat()
    path.write_text(path.read_text().replace("aaaa", "bbbb"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = load_case_file(path)
    assert again[0].prompt == "aaaa" and again == first and again is not first
    again.clear()
    assert len(load_case_file(path)) == 1
    path.write_text(path.read_text().replace("bbbb", "ccccc"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert load_case_file(path)[0].prompt == "ccccc"


# -- case sets --------------------------------------------------------------------------------------------------

def test_a_folder_set_reads_case_files_only_and_sorts_the_cases_by_id(folder):
    write_cases(folder / "a.yaml", {**BASE, "id": "zeta"})
    write_cases(folder / "b.yml", {**BASE, "id": "alpha"})
    write_cases(folder / "c.jsonl", {**BASE, "id": "mid"})
    (folder / "notes.txt").write_text("not a case")
    loaded = load_case_set(folder)
    assert [c.id for c in loaded] == ["alpha", "mid", "zeta"]
    assert loaded[0].source == str(folder / "b.yml")


def test_one_case_file_is_a_set(folder):
    path = write_cases(folder / "one.json", BASE)
    assert [c.id for c in load_case_set(path)] == ["c1"]


def test_a_set_that_is_missing_empty_or_not_built_in_is_named(tmp_path):
    assert error_of(load_case_set, tmp_path / "none") == (
        f"cases.source={str(tmp_path / 'none')!r} does not exist; give a folder of case files or one file")
    (tmp_path / "readme.md").write_text("x")
    assert error_of(load_case_set, tmp_path) == (
        f"cases.source={str(tmp_path)!r} holds no .yaml/.yml/.json/.jsonl case files")
    for name in ("builtin:other", "builtin:demo:x"):
        assert error_of(load_case_set, name) == f"cases.source={name!r}: the only built-in case set is 'builtin:demo'"


def test_the_built_in_demo_set_is_the_demo_folder():
    assert [c.id for c in load_case_set("builtin:demo")] == [c.id for c in load_case_set(cases_mod.DEMO_DIR)]
    assert cases_mod.DEMO_DIR.parts[-2:] == ("data", "demo_cases")


def test_a_duplicate_id_names_both_files(folder):
    write_cases(folder / "a.yaml", BASE)
    write_cases(folder / "b.yaml", BASE)
    assert error_of(load_case_set, folder) == (f"{folder / 'b.yaml'}: id: 'c1' is also used in {folder / 'a.yaml'}; "
                                               "case ids must be unique")


def test_a_set_checks_the_resources_of_its_cases(folder):
    write_cases(folder / "a.yaml", {**BASE, "depth": "gone.npy"})
    assert error_of(load_case_set, folder).startswith(f"{folder / 'a.yaml'}: depth: 'gone.npy' not found")


# -- check_resources: images, depth, boxes, masks, polygons ---------------------------------------------------------

def test_a_case_with_its_files_in_place_passes(folder):
    np.save(folder / "d.npy", np.ones((H, W), np.float32))
    cv2.imwrite(str(folder / "m.png"), np.zeros((H, W), np.uint8))
    objects = [{"id": "o", "name": "cup", "box": [0, 0, W, H], "mask": "m.png"},
               {"id": "q", "name": "pot", "box": [0.5, 0.5, 2, 2], "polygon": [[0, 0], [W, 0], [W, H], [0.5, 0.5]]}]
    case = case_in(folder, family="object", depth="d.npy", targets={"objects": objects,
                                                                    "persons": [{"id": "p", "box": [0, 0, W, H]}]})
    assert check_resources(case) is None


def test_a_missing_or_unreadable_case_image_is_named(folder):
    src = folder / "c.yaml"
    assert error_of(check_resources, case_in(folder, image="gone.png")) == (
        f"{src}: image: 'gone.png' not found (resolved to {folder / 'gone.png'}); fix the path")
    (folder / "bad.png").write_text("not an image")
    msg = error_of(check_resources, case_in(folder, image="bad.png"))
    assert msg.startswith(f"{src}: image: image {str(folder / 'bad.png')!r} cannot be read (")


def test_a_sample_image_is_sized_by_loading_it(folder):
    ok = case_in(folder, family="human", image="skimage://checkerboard", targets={"persons": [{"id": "p",
                                                                                         "box": [0, 0, 200, 200]}]})
    assert check_resources(ok) is None
    bad = case_in(folder, family="human", image="skimage://checkerboard", targets={"persons": [{"id": "p",
                                                                                          "box": [0, 0, 201, 5]}]})
    assert "is not inside the 200x200 image" in error_of(check_resources, bad)


def test_a_depth_map_must_exist_and_have_the_image_size(folder):
    src = folder / "c.yaml"
    np.save(folder / "d.npy", np.ones((3, 4), np.float32))
    assert error_of(check_resources, case_in(folder, depth="d.npy")) == (
        f"{src}: depth: 'd.npy' is 4x3, the image is 30x20; give the depth map of this image at its size (H, W)")
    assert error_of(check_resources, case_in(folder, depth="gone.npy")) == (
        f"{src}: depth: 'gone.npy' not found (resolved to {folder / 'gone.npy'}); fix the path")
    np.save(folder / "d3.npy", np.ones((H, W, 1), np.float32))
    assert f"{src}: depth: {folder / 'd3.npy'} has shape (20, 30, 1)" in error_of(check_resources,
                                                                                  case_in(folder, depth="d3.npy"))


def test_a_sample_depth_map_is_not_looked_for_on_disk(folder):
    assert check_resources(case_in(folder, depth="skimage://checkerboard")) is None


@pytest.mark.parametrize("box", [[-1, 0, 5, 5], [0, -0.5, 5, 5], [0, 0, 30.5, 5], [0, 0, 5, 20.5]])
def test_each_edge_of_a_box_must_lie_inside_the_image(folder, box):
    case = case_in(folder, family="human", targets={"persons": [{"id": "p", "box": box}]})
    assert error_of(check_resources, case) == (
        f"{folder / 'c.yaml'}: targets.persons[p].box: {[float(x) for x in box]} is not inside the 30x20 image; boxes "
        "are [x0, y0, x1, y1] pixels with 0 <= x0 < x1 <= width, 0 <= y0 < y1 <= height")


def test_an_object_box_must_lie_inside_the_image_too(folder):
    objects = [{"id": "o", "name": "cup", "box": [0, 0, 31, 5], "polygon": [[0, 0], [1, 0], [0, 1]]}]
    assert "targets.objects[o].box: [0.0, 0.0, 31.0, 5.0] is not inside" in error_of(
        check_resources, case_in(folder, family="object", targets={"objects": objects}))


def test_a_mask_must_be_an_image_of_the_image_size(folder):
    src = folder / "c.yaml"

    def obj_case(mask):
        return case_in(folder, family="object", targets={"objects": [{"id": "o", "name": "cup", "box": [0, 0, 5, 5],
                                                                       "mask": mask}]})

    cv2.imwrite(str(folder / "small.png"), np.zeros((H, W - 1), np.uint8))
    assert error_of(check_resources, obj_case("small.png")) == (
        f"{src}: targets.objects[o].mask: 'small.png' is 29x20, the image is 30x20; give a mask of the image's size "
        "(white = object)")
    (folder / "bad.png").write_text("no image")
    assert error_of(check_resources, obj_case("bad.png")).startswith(
        f"{src}: targets.objects[o].mask: image {str(folder / 'bad.png')!r} cannot be read (")


@pytest.mark.parametrize("polygon", [
    [[0, 0, 0], [1, 1, 1], [2, 2, 2]],  # not [x, y]
    [[0, 0], [1, float("nan")], [2, 2]],
    [[0, 0], [1, 1], [-0.5, 2]],
    [[0, 0], [1, 1], [2, -1]],
    [[0, 0], [30.5, 1], [2, 2]],
    [[0, 0], [1, 20.5], [2, 2]],
])
def test_a_polygon_needs_finite_xy_points_inside_the_image(folder, polygon):
    case = case_in(folder, family="object", targets={"objects": [{"id": "o", "name": "cup", "box": [0, 0, 5, 5],
                                                                   "polygon": polygon}]})
    assert error_of(check_resources, case) == (f"{folder / 'c.yaml'}: targets.objects[o].polygon: points must be "
                                               "finite [x, y] pixels inside the 30x20 image")


def test_a_ragged_polygon_is_named_like_any_other_bad_polygon(folder):
    write_cases(folder / "c.yaml", {**BASE, "family": "object", "targets": {"objects": [
        {"id": "o", "name": "cup", "box": [0, 0, 5, 5], "polygon": [[1, 2], [3, 4], [5]]}]}})
    with pytest.raises(CaseError, match=r"targets\.objects\[o\]\.polygon"):
        load_case_set(folder)


# -- the cases section and its filters ----------------------------------------------------------------------------

@pytest.fixture
def mixed(folder):
    write_cases(folder / "set.json", {**BASE, "id": "env_b"}, {**BASE, "id": "env_a"},
                {**BASE, "id": "dyn", "family": "dynamic", "event": EVENT})
    return str(folder / "set.json")


def test_the_cases_section_keeps_every_case_without_filters(mixed):
    assert [c.id for c in load_cases_from_config({"source": mixed})] == ["dyn", "env_a", "env_b"]
    assert [c.id for c in load_cases_from_config({"source": mixed, "include": [], "families": []})] == [
        "dyn", "env_a", "env_b"]


def test_include_keeps_the_listed_ids_in_set_order(mixed):
    assert [c.id for c in load_cases_from_config({"source": mixed, "include": ["env_b", "dyn"]})] == ["dyn", "env_b"]
    assert error_of(load_cases_from_config, {"source": mixed, "include": ["env_b", "nope"]}) == (
        "cases.include: unknown case id(s) ['nope']; known: ['dyn', 'env_a', 'env_b']")


def test_families_keep_the_cases_of_those_families(mixed):
    sel = CaseSelection(source=mixed, families=["dynamic"])
    assert [c.id for c in load_cases_from_config(sel)] == ["dyn"]
    both = {"source": mixed, "include": ["env_a", "dyn"], "families": ["environment"]}
    assert [c.id for c in load_cases_from_config(both)] == ["env_a"]


@pytest.mark.parametrize("value, message", [
    (["human", "robot"], "cases.families: unknown family 'robot'; use human, object, environment, dynamic"),
    ("human", "cases.families='human': give a list of families (or null): human, object, environment, dynamic"),
])
def test_a_bad_families_value_is_named(value, message):
    assert error_of(CaseSelection.from_dict, {"families": value}) == message


def test_the_cases_section_is_frozen_and_defaults_to_the_demo_set():
    sel = CaseSelection.from_dict(None)
    assert (sel.source, sel.include, sel.families) == ("builtin:demo", None, None)
    with pytest.raises(ValidationError):
        sel.source = "x"  # type: ignore[misc]
