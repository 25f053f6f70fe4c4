"""The rules of five small harness modules, one at a time and in this process: the cover-crop resize and PSNR
(harness/imaging.py), the reference room's ray hits and depth (harness/scene.py), pose residuals
(harness/residuals.py), logging setup and the progress switches (harness/logs.py), and the item record's typed
reading, sealing and shared text (harness/record.py). Every expected value is small enough to check by hand."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import time
import types

import numpy as np
import pytest

from harness import logs, record
from harness.errors import ConfigError
from harness.imaging import psnr, resize_cover_crop
from harness.io import json_text, sha256_file
from harness.logs import OWN_HANDLERS, PACKAGES, apply_progress, check_verbosity, setup_logging
from harness.outputs import ManifestRow, WorkItem
from harness.record import META_FILE, ItemRecord, RecordError, SharedText, write_record
from harness.residuals import pose_residual
from harness.scene import Room

ITEM = WorkItem("m", "fullkv", 1, "lrlr", "c1")
SQ2 = math.sqrt(2.0)


# -- harness/imaging.py: resize_cover_crop ----------------------------------------------------------------------------
def _grid(h: int, w: int) -> np.ndarray:
    """(h, w, 3) float32 image whose pixel (y, x) holds 10 * y + x in channel 0 (and 100 more in each next
    channel): a crop is read off its values."""
    g = (10 * np.arange(h)[:, None] + np.arange(w)[None, :]).astype(np.float32)
    return np.stack([g, g + 100, g + 200], -1)


def test_a_wide_image_at_its_own_height_loses_equal_columns_on_both_sides():
    img = _grid(2, 6)
    out = resize_cover_crop(img, (2, 2))
    assert out.shape == (2, 2, 3)
    assert out[..., 0].tolist() == [[2.0, 3.0], [12.0, 13.0]]  # columns 2 and 3 of 0..5
    assert out[..., 2].tolist() == [[202.0, 203.0], [212.0, 213.0]]


def test_a_tall_image_at_its_own_width_loses_equal_rows_on_both_sides():
    out = resize_cover_crop(_grid(6, 2), (2, 2))
    assert out[..., 0].tolist() == [[20.0, 21.0], [30.0, 31.0]]  # rows 2 and 3 of 0..5


def test_an_odd_leftover_row_or_column_is_cut_from_the_bottom_or_right():
    """One row too many: the offset rounds 0.5 half to even, to 0, so the top row stays and the bottom one goes."""
    assert resize_cover_crop(_grid(3, 2), (2, 2))[..., 0].tolist() == [[0.0, 1.0], [10.0, 11.0]]
    assert resize_cover_crop(_grid(2, 3), (2, 2))[..., 0].tolist() == [[0.0, 1.0], [10.0, 11.0]]


def test_an_image_of_the_target_size_comes_back_unchanged_and_contiguous():
    img = _grid(3, 4)
    out = resize_cover_crop(img, (3, 4))
    assert np.array_equal(out, img) and out.flags["C_CONTIGUOUS"]


def test_a_wide_image_is_halved_to_cover_then_cropped_in_the_middle():
    """(4, 8) -> (2, 2): scale max(2/4, 2/8) = 1/2 gives (2, 4) by 2x2 block means, then columns 1..2 of 0..3."""
    out = resize_cover_crop(_grid(4, 8), (2, 2))
    # the block of rows 0-1, columns 2-3 averages (2 + 3 + 12 + 13) / 4 = 7.5
    assert out[..., 0].tolist() == [[7.5, 9.5], [27.5, 29.5]]


def test_a_tall_image_is_halved_to_cover_then_cropped_in_the_middle():
    out = resize_cover_crop(_grid(8, 4), (2, 2))
    assert out[..., 0].tolist() == [[25.5, 27.5], [45.5, 47.5]]  # rows 1..2 of the (4, 2) block means


def test_a_downscale_averages_the_area_and_does_not_sample_the_centre():
    """(3, 3) -> (1, 1) with a bright centre: the area mean is 9 / 9 = 1 (bilinear sampling would give 9)."""
    img = np.zeros((3, 3, 3), np.float32)
    img[1, 1] = 9.0
    assert resize_cover_crop(img, (1, 1)).tolist() == [[[1.0, 1.0, 1.0]]]


def test_an_upscale_below_two_interpolates_linearly():
    """(3, 3) -> (4, 4), scale 4/3: output column 2 samples source x = 2.5 * 3/4 - 0.5 = 1.375, 0.375 of the way
    from 0 to 120 = 45 (area interpolation would give 40)."""
    img = np.zeros((3, 3, 3), np.float32)
    img[:, 2] = 120.0
    out = resize_cover_crop(img, (4, 4))
    assert out.shape == (4, 4, 3)
    assert out[..., 0].tolist() == [[0.0, 0.0, 45.0, 120.0]] * 4


# -- harness/imaging.py: psnr ---------------------------------------------------------------------------------------
def test_identical_images_have_infinite_psnr():
    a = np.full((2, 2), 7, np.uint8)
    assert psnr(a, a.copy()) == float("inf")


def test_psnr_is_ten_log_of_peak_squared_over_the_mean_squared_error():
    """One of four uint8 pixels off by 10 (from 10 to 20: no wrap-around): MSE 100 / 4 = 25, so
    10 * log10(255^2 / 25) = 10 * log10(2601)."""
    a = np.full((2, 2), 10, np.uint8)
    b = a.copy()
    b[0, 0] = 20
    assert psnr(a, b) == pytest.approx(10 * math.log10(2601.0), abs=1e-12)
    assert psnr(b, a) == pytest.approx(34.1514, abs=1e-4)


def test_an_error_of_exactly_one_is_finite():
    """MSE exactly 1 (one pixel of four off by 2): 10 * log10(255^2) = 48.13 dB, not the identical-image infinity."""
    a = np.zeros((2, 2), np.uint8)
    b = a.copy()
    b[1, 1] = 2
    assert psnr(a, b) == pytest.approx(20 * math.log10(255.0), abs=1e-12)


def test_psnr_takes_the_peak_it_is_given():
    a, b = np.zeros(4), np.array([0.1, 0.0, 0.0, 0.0])  # MSE 0.01 / 4 = 0.0025
    assert psnr(a, b, peak=1.0) == pytest.approx(10 * math.log10(400.0), abs=1e-9)


# -- harness/scene.py -----------------------------------------------------------------------------------------------
def test_the_default_room_spans_eight_by_three_by_eight_around_the_start_camera():
    lo, hi = Room().lo_hi()
    assert lo.tolist() == [-4.0, -2.0, -4.0] and hi.tolist() == [4.0, 1.0, 4.0]


def test_each_wall_bounds_its_own_side_of_a_room():
    lo, hi = Room(x=1.0, up=2.0, down=3.0, front=4.0, back=5.0).lo_hi()
    assert lo.tolist() == [-1.0, -2.0, -5.0] and hi.tolist() == [1.0, 3.0, 4.0]


AXES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], np.float64)


def test_an_axis_ray_from_the_origin_runs_to_the_wall_it_faces():
    room = Room(x=1.0, up=2.0, down=3.0, front=4.0, back=5.0)
    assert room.hit(np.zeros(3), AXES).tolist() == [1.0, 1.0, 3.0, 2.0, 4.0, 5.0]  # +y is down


def test_an_axis_ray_from_an_off_centre_origin_measures_from_that_origin():
    room = Room(x=1.0, up=2.0, down=3.0, front=4.0, back=5.0)
    origin = np.array([0.5, -1.0, 2.0])
    assert room.hit(origin, AXES).tolist() == [0.5, 1.5, 4.0, 1.0, 2.0, 7.0]


def test_a_diagonal_ray_stops_at_the_nearest_wall():
    room = Room(x=1.0, up=2.0, down=3.0, front=4.0, back=5.0)
    d = np.array([[1.0, 0.0, 1.0], [-1.0, 0.0, 1.0], [0.0, 1.0, -1.0], [1.0, -1.0, 0.0]]) / SQ2
    got = room.hit(np.zeros(3), d)
    # x wall at 1 (t = sqrt2) before z at 4; -x likewise; +y (down 3, t = 3 sqrt2) before -z (back 5); x before up
    assert got == pytest.approx([SQ2, SQ2, 3 * SQ2, SQ2], abs=1e-12)


def test_a_diagonal_ray_in_all_three_axes_meets_whichever_wall_comes_first():
    room = Room(x=3.0, up=2.0, down=1.0, front=4.0, back=4.0)
    d = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, 1.0]]) / math.sqrt(3.0)
    assert room.hit(np.zeros(3), d) == pytest.approx([math.sqrt(3.0), 2 * math.sqrt(3.0)], abs=1e-12)


def _k_three_by_one() -> np.ndarray:
    """fx = fy = 1, principal point at the middle pixel of a 1 x 3 image: rays (-1, 0, 1), (0, 0, 1), (1, 0, 1)."""
    return np.array([[1.0, 0.0, 1.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])


def test_the_depth_map_is_z_depth_not_ray_length():
    room = Room(x=1.0, up=2.0, down=3.0, front=4.0, back=5.0)
    d = room.depth_map(np.eye(4), _k_three_by_one(), 1, 3)
    assert d.dtype == np.float32 and d.shape == (1, 3)
    # side rays hit x = +-1 after sqrt2 along the ray: z-depth 1; the middle ray meets the front wall at 4
    assert d[0].tolist() == pytest.approx([1.0, 4.0, 1.0], abs=1e-6)


def test_the_depth_map_is_seen_from_the_camera_position_and_turn():
    room = Room(x=1.0, up=2.0, down=3.0, front=4.0, back=5.0)
    moved = np.eye(4)
    moved[:3, 3] = [0.0, 0.0, 1.0]
    assert room.depth_map(moved, _k_three_by_one(), 1, 3)[0].tolist() == pytest.approx([1.0, 3.0, 1.0], abs=1e-6)
    turned = np.eye(4)  # yaw 90 degrees: the camera's +z looks along the world's +x
    turned[:3, :3] = [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]
    turned[:3, 3] = [0.0, 0.0, 0.5]
    # middle ray: x wall at 1; left ray world (1, 0, 1): x at sqrt2 (front 3.5 further); right (1, 0, -1): x first
    assert room.depth_map(turned, _k_three_by_one(), 1, 3)[0].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)


# -- harness/residuals.py -------------------------------------------------------------------------------------------
def _pose(yaw_deg: float, t) -> np.ndarray:
    """c2w turned by ``yaw_deg`` about the z axis, at position ``t``."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    p = np.eye(4)
    p[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    p[:3, 3] = t
    return p


def test_residuals_are_the_max_and_mean_over_frames():
    req = np.stack([_pose(0, [0, 0, 0]), _pose(0, [1, 1, 1]), _pose(30, [2, 0, 0])])
    ach = np.stack([_pose(0, [0, 0, 0]), _pose(90, [4, 5, 1]), _pose(30, [2, 0, 1])])
    r = pose_residual(req, ach)
    assert list(r) == ["max_rotation_error_deg", "mean_rotation_error_deg", "max_translation_error",
                       "mean_translation_error"]
    assert r["max_rotation_error_deg"] == pytest.approx(90.0, abs=1e-9)
    assert r["mean_rotation_error_deg"] == pytest.approx(30.0, abs=1e-9)  # (0 + 90 + 0) / 3
    assert r["max_translation_error"] == pytest.approx(5.0, abs=1e-12)  # |(3, 4, 0)|
    assert r["mean_translation_error"] == pytest.approx(2.0, abs=1e-12)  # (0 + 5 + 1) / 3
    assert all(type(v) is float for v in r.values())


def test_residuals_compare_the_rotation_block_and_position_only():
    """The homogeneous row (0 0 0 1) is never compared: garbage there changes nothing."""
    req = np.stack([_pose(0, [0, 0, 0]), _pose(10, [1, 2, 3])])
    ach = req.copy()
    ach[:, 3, :] = [7.0, -3.0, 2.0, 9.0]
    r = pose_residual(req, ach)
    assert r == {"max_rotation_error_deg": pytest.approx(0.0, abs=1e-6), "mean_rotation_error_deg":
                 pytest.approx(0.0, abs=1e-6), "max_translation_error": 0.0, "mean_translation_error": 0.0}


def test_paths_of_different_lengths_are_refused_naming_both_shapes():
    with pytest.raises(ValueError, match=re.escape("paths differ in shape: (2, 4, 4) vs (3, 4, 4)")):
        pose_residual(np.stack([np.eye(4)] * 2), np.stack([np.eye(4)] * 3))


# -- harness/logs.py: check_verbosity -------------------------------------------------------------------------------
@pytest.mark.parametrize("value, level", [("debug", logging.DEBUG), ("INFO", logging.INFO),
                                          ("Warning", logging.WARNING), ("error", logging.ERROR)])
def test_a_verbosity_is_a_logging_level_whatever_its_case(value, level):
    assert check_verbosity(value) == level


@pytest.mark.parametrize("value", [None, "verbose", "", 10])
def test_another_verbosity_is_refused_naming_the_field_and_the_choices(value):
    with pytest.raises(ConfigError) as exc:
        check_verbosity(value)
    assert str(exc.value) == f"verbosity={value!r}: use one of debug, info, warning, error"


# -- harness/logs.py: setup_logging ---------------------------------------------------------------------------------
@pytest.fixture
def logging_state(monkeypatch, restore_env):
    """Loggers setup_logging touches beyond those the autouse fixture puts back, its variables and its memory of
    what it set: all as they were after the test; the variables start absent."""
    restore_env(*OWN_HANDLERS.values())
    for var in OWN_HANDLERS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(logs, "_SET_BY_US", {})
    names = ["matplotlib", *OWN_HANDLERS]
    levels = {n: logging.getLogger(n).level for n in names}
    yield
    for n, level in levels.items():
        logging.getLogger(n).setLevel(level)


def _own(pkg: str) -> list[logging.Handler]:
    return [h for h in logging.getLogger(pkg).handlers if isinstance(h, logs._StderrHandler)]


def test_each_project_package_gets_one_stderr_handler_at_the_level_and_stops_propagating(logging_state):
    setup_logging("warning")
    setup_logging("warning")  # a second call replaces the handler, never adds one
    for pkg in PACKAGES:
        log = logging.getLogger(pkg)
        assert len(_own(pkg)) == 1 and log.level == logging.WARNING and log.propagate is False


def test_a_status_line_is_level_name_message_on_stderr_without_secrets(logging_state, capsys):
    setup_logging("info")
    secret = "hf_" + "Q" * 34
    logging.getLogger("harness.demo").info("token %s used", secret)
    logging.getLogger("harness.demo").debug("not shown at info")
    err = capsys.readouterr().err
    assert err.startswith("INFO harness.demo: token ") and err.endswith(" used\n")
    assert secret not in err and err.count("\n") == 1


@pytest.mark.parametrize("verbosity, libraries, matplotlib", [
    ("debug", logging.DEBUG, logging.DEBUG),  # everything when asked for
    ("info", logging.ERROR, logging.WARNING),
    ("warning", logging.ERROR, logging.WARNING),
    ("error", logging.ERROR, logging.ERROR)])
def test_libraries_speak_from_error_up_and_matplotlib_from_warning_up_unless_debug(logging_state, verbosity,
                                                                                   libraries, matplotlib):
    setup_logging(verbosity)
    assert logging.getLogger().level == libraries
    assert logging.getLogger("matplotlib").level == matplotlib
    name = logging.getLevelName(libraries).lower()
    for lib, var in OWN_HANDLERS.items():
        assert logging.getLogger(lib).level == libraries
        assert os.environ[var] == name


def test_a_library_verbosity_the_user_set_is_left_alone_and_one_the_harness_set_follows(logging_state,
                                                                                         monkeypatch):
    monkeypatch.setenv("HF_HUB_VERBOSITY", "info")
    logging.getLogger("huggingface_hub").setLevel(logging.INFO)
    setup_logging("warning")
    assert os.environ["HF_HUB_VERBOSITY"] == "info"
    assert logging.getLogger("huggingface_hub").level == logging.INFO
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "error"
    setup_logging("debug")  # the harness's own earlier value is the harness's to change
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "debug" == os.environ["DIFFUSERS_VERBOSITY"]
    assert os.environ["HF_HUB_VERBOSITY"] == "info"


# -- harness/logs.py: apply_progress --------------------------------------------------------------------------------
PROGRESS_VARS = ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")
PROGRESS_MODULES = {"huggingface_hub.utils": "disable_progress_bars", "transformers.utils.logging":
                    "disable_progress_bar", "diffusers.utils.logging": "disable_progress_bar"}


@pytest.fixture
def no_progress_switches(monkeypatch, restore_env):
    restore_env(*PROGRESS_VARS)
    for var in PROGRESS_VARS:
        monkeypatch.delenv(var, raising=False)


def _stand_ins(monkeypatch) -> list[str]:
    calls: list[str] = []
    for mod, fn in PROGRESS_MODULES.items():
        monkeypatch.setitem(sys.modules, mod, types.SimpleNamespace(**{fn: lambda mod=mod: calls.append(mod)}))
    return calls


def test_progress_on_changes_nothing(no_progress_switches, monkeypatch):
    calls = _stand_ins(monkeypatch)
    apply_progress(True)
    assert calls == [] and not any(v in os.environ for v in PROGRESS_VARS)


def test_progress_off_sets_both_variables_and_turns_off_each_loaded_library(no_progress_switches, monkeypatch):
    calls = _stand_ins(monkeypatch)
    apply_progress(False)
    assert [os.environ[v] for v in PROGRESS_VARS] == ["1", "1"]
    assert calls == list(PROGRESS_MODULES)


def test_progress_off_skips_libraries_not_loaded(no_progress_switches, monkeypatch):
    for mod in PROGRESS_MODULES:
        monkeypatch.delitem(sys.modules, mod, raising=False)
    apply_progress(False)
    assert os.environ["TQDM_DISABLE"] == "1"


def test_progress_off_skips_a_library_without_the_switch(no_progress_switches, monkeypatch):
    for mod in PROGRESS_MODULES:
        monkeypatch.setitem(sys.modules, mod, types.SimpleNamespace())
    apply_progress(False)
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"


# -- harness/record.py: reading -------------------------------------------------------------------------------------
def _record(**kw) -> ItemRecord:
    base = {"status": "done", "item": ITEM, "case": {"id": "c1"}, "model": {"name": "m"}, "seed": 1}
    return ItemRecord(**{**base, **kw})


def test_the_json_kind_of_each_field_is_read_from_its_annotation():
    record._json_kinds.cache_clear()  # computed afresh from the annotations
    kinds = record._json_kinds()
    assert list(kinds) == list(record._FIELD_NAMES) and "extra" not in kinds
    assert kinds["schema_version"] == (int,) and kinds["seed"] == (int,)
    assert kinds["status"] == (str,) and kinds["fingerprint"] == (str,)
    assert kinds["item"] == (dict,) and kinds["manifest"] == (dict,)
    assert kinds["argv"] == (list,) and kinds["case"] == (dict,) and kinds["controls"] == (dict,)
    assert kinds["finished_unix"] == (int, float)


def test_an_absent_field_stored_as_null_reads_as_absent():
    data = {**_record().to_dict(), "fingerprint": None, "video": None, "finished_unix": None}
    rec = ItemRecord.from_dict(data)
    assert rec.fingerprint is None and rec.video is None and rec.extra == {}
    assert list(rec.to_dict()) == ["status", "item", "case", "model", "seed"]


@pytest.mark.parametrize("key", ["status", "item", "case", "model", "seed"])
def test_each_identity_field_is_required_by_name(key):
    data = {k: v for k, v in _record().to_dict().items() if k != key}
    with pytest.raises(RecordError) as exc:
        ItemRecord.from_dict(data)
    assert str(exc.value) == f"meta.json: '{key}' is missing (not an item record)"


def test_the_first_missing_identity_field_is_the_one_named():
    with pytest.raises(RecordError, match="'status' is missing"):
        ItemRecord.from_dict({"seed": 1})


@pytest.mark.parametrize("key, bad, message", [
    ("seed", True, "meta.json: 'seed' is a bool, expected int"),
    ("finished_unix", False, "meta.json: 'finished_unix' is a bool, expected int or float"),
    ("case", [1], "meta.json: 'case' is a list, expected dict"),
    ("fingerprint", 3, "meta.json: 'fingerprint' is a int, expected str"),
    ("schema_version", 2.0, "meta.json: 'schema_version' is a float, expected int")])
def test_a_field_of_the_wrong_json_type_is_refused_with_its_kind(key, bad, message):
    with pytest.raises(RecordError) as exc:
        ItemRecord.from_dict({**_record().to_dict(), key: bad})
    assert str(exc.value) == message


def test_an_item_with_an_unknown_key_or_a_bad_manifest_is_no_work_item():
    data = _record().to_dict()
    with pytest.raises(RecordError, match="'item' or 'manifest' is not a work item's"):
        ItemRecord.from_dict({**data, "item": {**data["item"], "colour": "red"}})
    with pytest.raises(RecordError, match="'item' or 'manifest' is not a work item's"):
        ItemRecord.from_dict({**data, "manifest": {"model": "m"}})


def test_a_stored_manifest_row_reads_back_as_a_row():
    rec = _record(camera={"spec_hash": "s", "num_frames": 2, "fps": 4.0})
    back = ItemRecord.from_dict({**rec.to_dict(), "manifest": rec.manifest_row().to_dict()})
    assert isinstance(back.manifest, ManifestRow) and back.manifest == rec.manifest_row()


def test_the_file_form_lists_known_fields_in_order_then_unknown_keys():
    rec = _record(finished="t", error="e", extra={"zz": 1, "aa": 2})
    d = rec.to_dict()
    assert list(d) == ["status", "item", "case", "model", "seed", "error", "finished", "zz", "aa"]
    assert d["item"] == ITEM.to_dict() and d["case"] is rec.case


# -- harness/record.py: the manifest row and sealing ----------------------------------------------------------------
def test_the_row_takes_the_video_hashes_from_the_video_facts():
    rec = _record(video={"sha256": "v", "frames_sha256": "f"}, timings={"total_s": 2.0}, fingerprint="fp")
    row = rec.manifest_row()
    assert (row.video_sha256, row.frames_sha256, row.timings, row.fingerprint) == ("v", "f", {"total_s": 2.0}, "fp")
    assert row.spec_hash is None and row.num_frames is None and not rec.supplied


def test_a_row_without_video_or_camera_facts_has_none_of_them():
    row = _record(status="running").manifest_row()
    assert (row.video, row.video_sha256, row.frames_sha256, row.spec_hash, row.fps) == (None,) * 5
    assert row.status == "running" and row.extra == {}


def test_sealing_hashes_the_controls_and_stamps_the_finish(tmp_path):
    (tmp_path / "controls").mkdir()
    (tmp_path / "controls" / "a.json").write_text("{}")
    rec = _record(controls={"files": ["a.json"]}, camera={"spec_hash": "s", "num_frames": 1, "fps": 1.0})
    before = time.time()
    rec.seal(tmp_path)
    assert rec.controls == {"files": ["a.json"], "sha256": {"a.json": sha256_file(tmp_path / "controls" / "a.json")}}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", rec.finished or "")
    assert rec.finished_unix is not None and before <= rec.finished_unix <= time.time()
    assert rec.manifest == rec.manifest_row() and rec.manifest.spec_hash == "s"


def test_sealing_a_failed_item_leaves_its_controls_unhashed(tmp_path):
    (tmp_path / "controls").mkdir()
    (tmp_path / "controls" / "a.json").write_text("{}")
    rec = _record(status="failed", error="boom", controls={"files": []})
    rec.seal(tmp_path)
    assert rec.controls == {"files": []} and rec.manifest is not None and rec.manifest.error == "boom"


def test_sealing_an_item_without_controls_leaves_them_absent(tmp_path):
    rec = _record(status="done")
    rec.seal(tmp_path)
    assert rec.controls is None and rec.finished is not None


# -- harness/record.py: shared text and writing ---------------------------------------------------------------------
def test_a_records_own_value_is_serialised_afresh_on_every_write(tmp_path):
    """Only the shared values are cached: the record's own mapping, changed in place, is written as it is now."""
    config = {"k": 1}
    shared = SharedText(config, {"other": 2})
    rec = _record(config=config, case={"id": "c1"})
    shared.text(rec)
    rec.case["id"] = "c2"
    assert json.loads(shared.text(rec))["case"] == {"id": "c2"}


def test_a_shared_value_is_serialised_once_per_run():
    """The run's shared values do not change during a run: their text is made on first use and spliced after."""
    config = {"k": 1}
    shared = SharedText({"first": 0}, config)
    rec = _record(config=config)
    first = shared.text(rec)
    config["k"] = 2
    assert shared.text(rec) == first and json.loads(first)["config"] == {"k": 1}


def test_a_secret_registered_after_a_shared_value_was_serialised_is_scrubbed_from_its_next_text(tmp_path):
    """The cached text was scrubbed of the values registered then; a value registered later (a model's environment
    read mid-run) makes it again, so no record written after carries the secret."""
    from harness import secrets

    config = {"endpoint": "https://example.org/v1", "note": "late-secret-value-0123"}
    shared = SharedText(config)
    rec = _record(config=config)
    try:
        assert "late-secret-value-0123" in shared.text(rec)
        secrets.register({"late-secret-value-0123": "LATE_TOKEN"})
        write_record(tmp_path, rec, shared)
        assert "late-secret-value-0123" not in (tmp_path / META_FILE).read_text()
        assert json.loads((tmp_path / META_FILE).read_text())["config"]["endpoint"] == "https://example.org/v1"
    finally:
        secrets.clear_registry()


def test_a_shared_value_is_spliced_where_its_field_goes(tmp_path):
    versions, config = {"python": "3.11"}, {"a": [1, 2]}
    rec = _record(versions=versions, config=config, argv=["x"])
    text = SharedText(versions, config).text(rec)
    assert text == json_text(rec.to_dict())
    write_record(tmp_path, rec, SharedText(versions, config))
    assert (tmp_path / META_FILE).read_text() == text
