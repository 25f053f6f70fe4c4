"""Trust nothing on disk: a finished item is done only while its files match the hashes its meta.json recorded
(video, camera.npz, controls/; ``harness.outputs.item_problems``, used by the rerun, ``verify`` and evaluation),
and every file read back that is broken gives one clear error naming it."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.hostile.conftest import ITEM, SMALL


def _meta(item):
    return json.loads((item / "meta.json").read_text())


def test_meta_records_the_hashes_of_camera_and_controls(run_copy):
    from harness.io import sha256_file

    meta = _meta(run_copy)
    assert meta["camera"]["sha256"] == sha256_file(run_copy / "camera.npz")
    assert meta["video"]["size"] == (run_copy / "video.mp4").stat().st_size
    files = meta["controls"]["sha256"]
    assert files and all(files[n] == sha256_file(run_copy / "controls" / n) for n in files)


#: the redo flow is one for every damage; each damage's own finding is named by
#: tests/harness/test_outputs_rules.py::test_each_damage_of_a_finished_item_is_named (fast): the fast tier runs the
#: flow for a video and a controls damage, the full suite for every kind
SLOW_TIER = pytest.mark.slow


@pytest.mark.parametrize("damage, why", [
    ("truncate_video", "video.mp4 is 1000 bytes"),
    pytest.param("delete_video", "video.mp4 is missing", marks=SLOW_TIER),
    pytest.param("swap_video", "replaced", marks=SLOW_TIER),
    pytest.param("delete_camera", "camera.npz is missing", marks=SLOW_TIER),
    pytest.param("truncate_camera", "camera.npz sha256 differs", marks=SLOW_TIER),
    ("edit_controls", "controls/"),
])
def test_a_damaged_finished_item_is_redone_and_the_rerun_says_why(harness, run_copy, tmp_path, damage, why):
    """Before: "skipped (already done)", exit 0, the damaged file kept. After: redone (same bytes as before), with
    the reason in the log and the summary; then verify passes."""
    video_sha = _meta(run_copy)["video"]["sha256"]
    if damage == "truncate_video":
        os.truncate(run_copy / "video.mp4", 1000)
    elif damage == "delete_video":
        (run_copy / "video.mp4").unlink()
    elif damage == "swap_video":  # another valid video of the same size class
        r = harness("run=other", "seed=7", *SMALL)
        assert r.code == 0, r.err
        shutil.copyfile(tmp_path / "outputs" / "other" / "reference" / "fov" / "seed-7" / "lrlr" / "environment_rocket"
                        / "video.mp4", run_copy / "video.mp4")
    elif damage == "delete_camera":
        (run_copy / "camera.npz").unlink()
    elif damage == "truncate_camera":
        os.truncate(run_copy / "camera.npz", 100)
    elif damage == "edit_controls":
        name = sorted(_meta(run_copy)["controls"]["sha256"])[0]
        with open(run_copy / "controls" / name, "ab") as f:
            f.write(b"x")
    r = harness("verify", "run=h", *SMALL)
    assert r.code == 1 and "FAIL" in r.out and why in r.out, r.out
    r = harness("run=h", *SMALL)
    assert r.code == 0, r.err
    assert "skipped (already done)  0" in r.out and "done                    1" in r.out, r.out
    assert "redoing it" in r.err and why in r.err and why in r.out
    assert _meta(run_copy)["video"]["sha256"] == video_sha  # the same bytes as the first run
    r = harness("verify", "run=h", *SMALL)
    assert r.code == 0 and "1/1 item(s) deliverable" in r.out, r.out


def test_an_intact_item_is_still_skipped(harness, run_copy):
    """The check can pass: nothing changed, nothing redone, nothing rewritten."""
    stamp = (run_copy / "meta.json").stat().st_mtime_ns
    r = harness("run=h", *SMALL)
    assert r.code == 0 and "skipped (already done)  1" in r.out and "redoing" not in r.err
    assert (run_copy / "meta.json").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("key, value", [("video", []), ("camera", "x"), ("video", None), ("controls", 3)])
def test_verify_survives_a_meta_json_of_the_wrong_shape(harness, run_copy, key, value):
    meta = _meta(run_copy)
    meta[key] = value
    (run_copy / "meta.json").write_text(json.dumps(meta))
    r = harness("verify", "run=h", *SMALL)
    assert r.code == 1 and "Traceback" not in r.err, r.err
    assert "FAIL" in r.out


def test_verify_reports_what_a_killed_run_leaves(harness, run_copy):
    """A dead owner's lock and a partial video on an unfinished item are named (before: only "status: running")."""
    from harness.io import temp_tag
    from harness.locks import lock_name

    meta = _meta(run_copy)
    meta["status"] = "running"
    (run_copy / "meta.json").write_text(json.dumps(meta))
    partial = run_copy / f".video.{temp_tag()}.deadbeef.partial.mp4"
    partial.write_bytes(b"\0" * 10)
    lock = run_copy.parents[4] / ".locks" / lock_name(ITEM.as_posix())
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"host": "h", "pid": 1, "pid_start": None, "token": "t", "started": 0}))
    r = harness("verify", "run=h", *SMALL)
    assert r.code == 1
    assert "status: running" in r.out and partial.name in r.out and "(a partial video)" in r.out
    assert str(lock) in r.out and "a lock" in r.out


def test_verify_of_a_run_that_does_not_exist_is_a_user_error(harness, tmp_path):
    r = harness("verify", "run=missing", *SMALL)
    assert r.code == 2 and "no run at" in r.err and "run='missing'" in r.err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("damage, why", [
    ("video", "video.mp4 sha256 differs from meta.json"),
    ("camera", "camera.npz sha256 differs from meta.json"),
])
def test_a_swapped_file_is_not_evaluated(harness, run_copy, damage, why):
    """Before: a swapped video was scored without a warning; a truncated camera.npz failed with ``BadZipFile`` and
    no path. After: that item fails with the reason naming the file; exit 1."""
    if damage == "video":
        with open(run_copy / "video.mp4", "r+b") as f:
            f.seek(2000)
            f.write(b"\x00\x01\x02\x03")
    else:
        os.truncate(run_copy / "camera.npz", 200)
    r = harness("stage=evaluate", "run=h", "evaluate.encoders=[pixel]", "evaluate.trackers=[template]",
                "evaluate.pose_estimators=[classical]", "evaluate.return_frame_poses=[classical]",
                "evaluate.depth=[]", "evaluate.face=[]", "evaluate.imaging=[]", "evaluate.aesthetic=[]",
                "evaluate.rpe_trans_estimators=[classical]", "evaluate.rpe_rot_estimator=classical", "progress=false")
    assert r.code == 1, r.err
    assert why in r.err and "not evaluated" in r.err and "Traceback" not in r.err
    res = json.loads((run_copy / "metrics.json").read_text())
    assert res["status"] == "failed" and why in res["reason"]


def test_an_unreadable_camera_file_is_named(tmp_path):
    """Before: ``BadZipFile`` with no path. After: the error names the file and the fix."""
    from trajectories import TrajectoryError, load_path

    p = tmp_path / "camera.npz"
    p.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(TrajectoryError, match=r"camera.npz: not a readable camera file .*rerun the item"):
        load_path(p)
    with pytest.raises(TrajectoryError, match="camera file missing"):
        load_path(tmp_path / "nope.npz")


@pytest.mark.parametrize("content, needle", [
    ('{"item": {"model"', "not JSON"),
    ("", "not JSON"),
    ("[]", "expected a JSON dict"),
    ('{"item": 1, "metrics": {}}', "not an evaluation result"),
    (b"\xff\xfe\x00", "not UTF-8"),
])
def test_report_on_a_broken_metrics_json_names_the_file(harness, run_copy, content, needle):
    (run_copy / "metrics.json").write_bytes(content.encode() if isinstance(content, str) else content)
    r = harness("report", "run=h")
    assert r.code == 2, r.err
    assert "metrics.json" in r.err and needle in r.err and "stage=evaluate" in r.err and "Traceback" not in r.err


def _dinov2_folder(root):
    d = root / "dinov2"
    d.mkdir(parents=True)
    header = json.dumps({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (d / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    (d / "config.json").write_text('{"model_type": "dinov2"}')
    return d


@pytest.mark.parametrize("damage, needle", [
    ("truncate", "truncated"), ("empty", "empty file"), ("config", "config.json: not JSON"),
])
def test_weights_verify_refuses_truncated_or_malformed_files(harness, tmp_path, damage, needle):
    from evaluate.backbones import spec, status

    root = tmp_path / "w"
    d = _dinov2_folder(root)
    if status(spec("dinov2"), root).state.value == "unknown":
        pytest.skip("transformers is not installed: dinov2's file list is unknown")
    r = harness("weights", "verify", "dinov2", "--root", str(root))
    assert r.code == 0 and "unpinned" in r.out, r.out + r.err  # the intact folder passes (the check can pass)
    if damage == "truncate":
        os.truncate(d / "model.safetensors", (d / "model.safetensors").stat().st_size - 4)
    elif damage == "empty":
        (d / "model.safetensors").write_bytes(b"")
    else:
        (d / "config.json").write_text("{not json")
    r = harness("weights", "verify", "dinov2", "--root", str(root))
    assert r.code == 1 and needle in r.err and "weights fetch dinov2" in r.err, r.out + r.err
    assert "corrupt:" in r.out


# -- issue 33: trust nothing on disk, for every artefact ------------------------------------------------------------
CHEAP_EVAL = ["evaluate.encoders=[pixel]", "evaluate.trackers=[template]", "evaluate.pose_estimators=[classical]",
              "evaluate.return_frame_poses=[classical]", "evaluate.depth=[]", "evaluate.face=[]", "evaluate.imaging=[]",
              "evaluate.aesthetic=[]", "evaluate.rpe_trans_estimators=[classical]",
              "evaluate.rpe_rot_estimator=classical", "progress=false"]


def _pointing_row(run_copy):
    """The manifest with a second row: another item's names, pointing at this item's folder."""
    manifest = run_copy.parents[4] / "manifest.jsonl"
    row = json.loads(manifest.read_text().splitlines()[0])
    other = {**row, "case_id": "other_case", "key": row["key"].rsplit("/", 1)[0] + "/other_case"}
    manifest.write_text(manifest.read_text() + json.dumps(other) + "\n")
    return manifest


def test_a_manifest_row_pointing_at_another_items_folder_is_refused(harness, run_copy):
    """A hand-edited row whose ``dir`` is another item's folder double-counted that item; ``verify`` said ok."""
    manifest = _pointing_row(run_copy)
    r = harness("verify", "run=h", *SMALL)
    assert r.code == 1 and "disagree with the item its names make" in r.out and "PROBLEM" in r.out, r.out
    r = harness("stage=evaluate", "run=h", *CHEAP_EVAL)
    assert r.code == 2 and "manifest.jsonl" in r.err and "other_case" in r.err and "Traceback" not in r.err, r.err
    assert not (run_copy / "metrics.json").exists()  # nothing evaluated
    manifest.unlink()  # the fix the message names: a rerun rebuilds it from every item's meta.json
    assert harness("run=h", *SMALL).code == 0
    assert len(manifest.read_text().splitlines()) == 1


@pytest.mark.parametrize("edit", ["key", "dir", "duplicate", "seed"])
def test_manifest_rows_must_agree_with_their_folders(tmp_path, edit):
    from harness.errors import UserError
    from harness.outputs import RunDir

    key = "m/fov/seed-1/lrlr/c"
    row = {"model": "m", "context": "fov", "seed": 1, "trajectory": "lrlr", "case_id": "c", "key": key, "dir": key,
           "status": "done"}
    run = RunDir(tmp_path)
    rows = {"key": [{**row, "key": "m/fov/seed-1/lrlr/d"}], "dir": [{**row, "dir": "m/fov/seed-2/lrlr/c"}],
            "duplicate": [row, row], "seed": [{**row, "seed": "one"}]}[edit]
    run.manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match="manifest.jsonl"):
        run.rows()
    run.manifest.write_text(json.dumps(row) + "\n")
    assert [r.key for r in run.rows()] == [key]  # the check can pass


def test_an_edited_metrics_json_is_recomputed_and_never_reported(harness, run_copy):
    """An edited ``metrics.json`` was reused silently by the next evaluation and the report."""
    r = harness("stage=evaluate", "run=h", *CHEAP_EVAL)
    assert r.code == 0, r.err
    good = json.loads((run_copy / "metrics.json").read_text())
    assert good["content_sha256"]
    key = next(k for k, m in good["metrics"].items() if m.get("value") is not None)
    edited = json.loads(json.dumps(good))
    edited["metrics"][key]["value"] = 123456.0
    (run_copy / "metrics.json").write_text(json.dumps(edited))
    r = harness("report", "run=h")
    assert r.code == 2 and "metrics.json" in r.err and "no longer matches" in r.err and "Traceback" not in r.err
    r = harness("stage=evaluate", "run=h", *CHEAP_EVAL)
    assert r.code == 0 and "recomputing" in r.err, r.err
    again = json.loads((run_copy / "metrics.json").read_text())
    assert again["metrics"][key]["value"] == good["metrics"][key]["value"] and "reused" not in again
    assert harness("report", "run=h").code == 0


def test_the_seal_of_a_json_file_finds_any_edit(tmp_path):
    from harness.io import SEAL, seal_problem, write_sealed_json

    d = write_sealed_json(tmp_path / "m.json", {"a": 1.5, "b": [1, float("nan")], "url": "http://u:pw-x@h/"})
    back = json.loads((tmp_path / "m.json").read_text())
    assert back == json.loads(json.dumps(d)) and seal_problem(back) is None and "pw-x" not in json.dumps(back)
    assert "no longer matches" in seal_problem({**back, "a": 1.6})
    assert "no longer matches" in seal_problem({**back, "extra": 1})
    assert "no content_sha256" in seal_problem({k: v for k, v in back.items() if k != SEAL})


def test_weights_verify_refuses_an_implausible_checkpoint(tmp_path):
    """A 10-byte ``.pth`` passed ``weights verify`` ("present unpinned"): only its first byte was looked at."""
    import pickle

    from evaluate.weights import file_problem

    cases = {"ten.pth": b"\x80\x02" + b"\x00" * 8, "cut.pth": pickle.dumps({"w": list(range(100))})[:40],
             "text.pt": b"hello world", "zip.bin": None}
    import zipfile

    with zipfile.ZipFile(tmp_path / "zip.bin", "w") as z:
        z.writestr("readme.txt", "not a checkpoint")
    for name, data in cases.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
        assert file_problem(tmp_path / name), name
    # the check can pass: a whole pickle, and torch.save's both formats when torch is here
    (tmp_path / "ok.ckpt").write_bytes(pickle.dumps({"w": list(range(100))}))
    assert file_problem(tmp_path / "ok.ckpt") is None
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.zeros(3)}, tmp_path / "new.pth")
    torch.save({"w": torch.zeros(3)}, tmp_path / "old.pth", _use_new_zipfile_serialization=False)
    assert file_problem(tmp_path / "new.pth") is None and file_problem(tmp_path / "old.pth") is None
    data = (tmp_path / "new.pth").read_bytes()
    (tmp_path / "new.pth").write_bytes(data[: len(data) // 2])
    assert file_problem(tmp_path / "new.pth")


# -- issue 44: evaluation and report trust -----------------------------------------------------------------------------
def test_an_item_folder_or_meta_json_that_is_gone_fails_that_item_by_name_and_the_rest_is_scored(harness, tmp_path):
    """Before: a run with one item folder deleted (or its meta.json) crashed at the report ("invalid literal for
    int() with base 10: '?'": the failed result named no item) and wrote no report; the missing folder was made again
    for a lone metrics.json. After: the other items are scored and reported, the missing ones fail with their names
    from the manifest and the reason, exit code 1, and nothing is written where the folder was."""
    cases = ("environment_rocket", "environment_motorcycle", "object_coffee")
    small = [a for a in SMALL if not a.startswith("cases.include")]
    assert harness("run=m", *small, f"cases.include=[{','.join(cases)}]").code == 0
    lrlr = tmp_path / "outputs" / "m" / ITEM.parent
    shutil.rmtree(lrlr / "environment_motorcycle")
    (lrlr / "object_coffee" / "meta.json").unlink()
    r = harness("stage=evaluate", "run=m", *CHEAP_EVAL)
    assert r.code == 1 and "Traceback" not in r.err, r.err
    assert "FAILED reference/fov/1/lrlr/environment_motorcycle: its folder" in r.err and "is missing" in r.err
    assert "FAILED reference/fov/1/lrlr/object_coffee: meta.json is missing" in r.err, r.err
    assert not (lrlr / "environment_motorcycle").exists()  # no folder made again for a lone metrics.json
    assert json.loads((lrlr / "environment_rocket" / "metrics.json").read_text())["status"] == "done"
    failed = json.loads((lrlr / "object_coffee" / "metrics.json").read_text())
    assert failed["status"] == "failed" and failed["item"]["case_id"] == "object_coffee" and failed["item"]["seed"] == 1
    report = (tmp_path / "outputs" / "m" / "eval" / "report" / "index.html")
    assert report.is_file() and "environment_motorcycle" in (tmp_path / "outputs/m/eval/summary.md").read_text()


@pytest.mark.slow  # two evaluations, a regeneration and two reports (about 7 s); the fast tier: the test below
def test_the_report_refuses_metrics_of_a_video_the_item_no_longer_holds(harness, run_copy):
    """Before: an item regenerated after its evaluation (here: another width, ``evaluate=off``) kept its old
    metrics.json, and ``python -m harness report`` tabled those numbers for the new video without a word. After: the
    report refuses, naming the file, both hashes and the command that recomputes it; after that, it reports."""
    assert harness("stage=evaluate", "run=h", *CHEAP_EVAL).code == 0
    old = json.loads((run_copy / "metrics.json").read_text())["video_sha256"]
    wider = [a if not a.startswith("model.width=") else "model.width=176" for a in SMALL]
    assert harness("run=h", *wider, "overwrite=true").code == 0
    new = _meta(run_copy)["video"]["sha256"]
    assert new != old
    r = harness("report", "run=h")
    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert "metrics.json: its metrics.json was computed on video sha256 " + old[:12] in r.err
    assert f"the item's video is now {new[:12]}" in r.err and "stage=evaluate run=" in r.err
    assert harness("stage=evaluate", "run=h", *CHEAP_EVAL).code == 0  # recomputed: the report is made again
    assert json.loads((run_copy / "metrics.json").read_text())["video_sha256"] == new
    assert harness("report", "run=h").code == 0


def test_a_results_video_problem_at_its_boundaries():
    from evaluate.results import ITEM_FAILED, ItemResult

    done, failed = ItemResult(item={}, video_sha256="a" * 64), ItemResult(item={}, status=ITEM_FAILED)
    assert done.video_problem("a" * 64) is None and done.video_problem(None) is None  # nothing recorded: no check
    assert "computed on video sha256 aaaaaaaaaaaa..." in (done.video_problem("b" * 64) or "")
    assert failed.video_problem("b" * 64) is None  # failed before its video was read: nothing of it is tabled
    assert "records no video sha256" in (ItemResult(item={}).video_problem("b" * 64) or "")


def _evaluated_run(root, recorded_sha: str) -> dict:
    """A run of one evaluated item (manifest row recording ``recorded_sha``, a sealed metrics.json of video a...a)."""
    from evaluate.results import ItemResult
    from harness.io import write_sealed_json

    key = "m/fov/seed-1/lrlr/c"
    item = {"model": "m", "context": "fov", "seed": 1, "trajectory": "lrlr", "case_id": "c"}
    row = {**item, "key": key, "dir": key, "status": "done", "video_sha256": recorded_sha}
    (root / "manifest.jsonl").write_text(json.dumps(row) + "\n")
    write_sealed_json(root / key / "metrics.json", ItemResult(item=item, video_sha256="a" * 64).to_dict())
    return row


@pytest.mark.parametrize("reader", ["report", "human study"])
def test_no_reader_of_results_takes_metrics_of_another_video(tmp_path, reader):
    """The report's and the study's readers of metrics.json: one computed on another video than the manifest
    records is refused, naming the file and the command that recomputes it."""
    from evaluate.human.sources import load_items as study_items
    from evaluate.reporting.collect import load_items as report_items
    from harness.errors import ConfigError

    load = report_items if reader == "report" else study_items
    _evaluated_run(tmp_path, "b" * 64)
    with pytest.raises(ConfigError, match=r"metrics.json: its metrics.json was computed on video sha256 aaaa") as e:
        load([tmp_path])
    assert "stage=evaluate" in str(e.value)
    _evaluated_run(tmp_path, "a" * 64)  # the check can pass
    items = load([tmp_path])
    assert [i.case_id for i in (items[0] if reader == "report" else items)] == ["c"]
