"""The rules of harness/outputs.py (names, seeds, run folders, manifest rows, the integrity of a finished item,
leftovers) and of ``verify``'s per-item checks (harness/app/verify.py), one at a time and in this process: each
test builds the few files it needs (a 3-frame video, a camera file, ``meta.json``, a manifest row)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from harness import outputs
from harness.app import verify
from harness.io import JsonLinesError, sha256_file
from harness.outputs import (
    ManifestRow,
    PlanError,
    RunDir,
    WorkItem,
    check_name,
    check_run_name,
    check_seed,
    check_writable,
    item_problems,
    remove_stale_temps,
    run_dir_for,
)
from harness.record import ItemRecord

ITEM = WorkItem("m", "fullkv", 1, "lrlr", "c1")
FPS, FRAMES = 16.0, 3


def three_frame_video(folder: Path) -> bytes:
    """The bytes of a ``FRAMES``-frame video at ``FPS`` (what :func:`make_item` records), written in ``folder``."""
    from harness.video import VideoWriter

    path = folder / "video.mp4"
    w = VideoWriter(path, fps=FPS)
    for i in range(FRAMES):
        w.write(np.full((32, 32, 3), 40 * i, np.uint8))
    w.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def video_bytes(tmp_path_factory) -> bytes:
    return three_frame_video(tmp_path_factory.mktemp("video"))


def make_item(run: Path, video: bytes, item: WorkItem = ITEM, *, meta_fps=FPS, cam_frames=FRAMES,
              fingerprint="fp", controls: dict[str, bytes] | None = None, row: bool = True, **meta_extra) -> Path:
    """A finished item of ``run`` as the runner leaves it; returns its folder."""
    d = run / item.rel_dir
    (d / "controls").mkdir(parents=True, exist_ok=True)
    (d / "video.mp4").write_bytes(video)
    (d / "camera.npz").write_bytes(b"camera")
    for name, data in (controls or {}).items():
        (d / "controls" / name).write_bytes(data)
    meta = {"status": "done", "item": item.to_dict(), "case": {}, "model": {}, "seed": item.seed,
            "fingerprint": fingerprint,
            "video": {"sha256": sha256_file(d / "video.mp4"), "size": len(video), "num_frames": FRAMES,
                      "fps": meta_fps},
            "camera": {"num_frames": cam_frames, "sha256": sha256_file(d / "camera.npz")},
            "controls": {"sha256": {n: sha256_file(d / "controls" / n) for n in (controls or {})}}, **meta_extra}
    (d / "meta.json").write_text(json.dumps(meta))
    if row:
        RunDir(run).update_manifest([ItemRecord.from_dict(meta).manifest_row().to_dict()])
    return d


def check(run: Path, fingerprint="fp") -> verify.ItemCheck:
    return verify.check_item(run, ITEM, fingerprint, {r.key: r for r in RunDir(run).rows()})


# -- names, seeds, run folders --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["a", "A9", "x_y.z,w=v+u-t", "9"])
def test_a_plain_name_passes(value):
    assert check_name("f", value) == value


@pytest.mark.parametrize("value", ["", ".a", "-a", "_a", "a/b", "a..b", "a b", "a\\b", 3, None, "é"])
def test_a_name_that_is_not_plain_is_refused_naming_the_field_and_the_fix(value):
    with pytest.raises(PlanError) as e:
        check_name("model.name", value, fix="pick another")
    msg = str(e.value)
    assert msg.startswith(f"model.name={value!r}: not a plain name; use letters") and msg.endswith("; pick another")
    with pytest.raises(PlanError) as e:
        check_name("model.name", value)
    assert str(e.value).endswith("directory")


@pytest.mark.parametrize("value", [0, 1, 2**32 - 1])
def test_a_seed_is_an_integer_from_0_below_2_to_the_32(value):
    assert check_seed(value) == value


@pytest.mark.parametrize("value, text", [(-1, "seed=-1: must be in [0, 2^32 - 1 = 4294967295]"),
                                         (2**32, "seed=4294967296: must be in [0, 2^32 - 1 = 4294967295]"),
                                         (True, "seed=True: must be an integer"), (1.0, "seed=1.0: must be"),
                                         ("1", "seed='1': must be")])
def test_a_seed_outside_the_range_or_not_an_int_is_refused(value, text):
    with pytest.raises(PlanError, match=None) as e:
        check_seed(value)
    assert str(e.value).startswith(text)
    with pytest.raises(PlanError) as e:
        check_seed(value, "judge.seed")
    assert str(e.value).startswith("judge." + text)


@pytest.mark.parametrize("run, out", [("a", "a"), ("study/v2", "study/v2"), (7, "7")])
def test_a_run_name_is_plain_parts_joined_by_slashes(run, out):
    assert check_run_name(run) == out


@pytest.mark.parametrize("run", ["", "/abs", "a/../b", "a//b", "a/", "..", True, None, 1.5, ["a"]])
def test_a_run_name_that_could_leave_output_root_is_refused(run):
    with pytest.raises(PlanError) as e:
        check_run_name(run)
    assert str(e.value).startswith(f"run={run!r}: use a plain name such as run=study_v2")
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_the_run_folder_is_under_output_root_resolved(tmp_path):
    assert run_dir_for(tmp_path / "x" / ".." / "out", "a/b") == (tmp_path / "out" / "a" / "b").resolve()


def test_a_run_folder_behind_a_symlink_out_of_output_root_is_refused(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root" / "a").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PlanError, match="outside output_root"):
        run_dir_for(tmp_path / "root", "a")


def test_a_path_too_long_is_refused_before_anything_is_written(tmp_path):
    ok = WorkItem("m", "c", 0, "t", "x" * 200)
    check_writable(tmp_path / "run", [ok])
    with pytest.raises(PlanError, match=r"output path too long .* longest part 256\)"):
        check_writable(tmp_path / "run", [ok, WorkItem("m", "c", 0, "t", "x" * 256)])  # one name over 255 bytes
    check_writable(tmp_path / "run", [WorkItem("m", "c", 0, "t", "x" * 255)])  # 255 bytes is the limit
    deep = tmp_path / "/".join(["d" * 200] * 19)
    room = 4096 - len(str(deep / ok.rel_dir / "controls" / outputs._LONGEST_FILE).encode()) + 200
    at_limit = WorkItem("m", "c", 0, "t", "x" * (room - 1))
    check_writable(deep, [at_limit])  # 4095 bytes
    with pytest.raises(PlanError, match="output path too long"):
        check_writable(deep, [WorkItem("m", "c", 0, "t", "x" * room)])  # 4096 bytes: PATH_MAX
    check_writable(tmp_path / "run", [])  # no item: the run folder itself


def test_an_unwritable_output_root_is_refused_naming_the_folder(tmp_path, monkeypatch):
    """The nearest existing folder above the run must be a folder this process can write into and enter."""
    (tmp_path / "ro").mkdir()
    asked = []

    def access(path, mode):
        asked.append((Path(path), mode))
        return Path(path).name != "ro"

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(PlanError) as e:
        check_writable(tmp_path / "ro" / "a" / "run", [ITEM])
    assert str(e.value) == (f"output_root: cannot write under {tmp_path / 'ro'} (read-only or no permission); "
                            "set output_root=<a writable folder>")
    assert asked == [(tmp_path / "ro", os.W_OK | os.X_OK)]
    (tmp_path / "file").write_text("")
    with pytest.raises(PlanError, match="cannot write under"):
        check_writable(tmp_path / "file" / "run", [ITEM])  # a file where a folder should be
    check_writable(tmp_path / "rw" / "run", [ITEM])
    assert asked[-1] == (tmp_path, os.W_OK | os.X_OK)


# -- work items and manifest rows -----------------------------------------------------------------------------------
def test_an_item_folder_is_model_context_seed_trajectory_case():
    assert ITEM.rel_dir == Path("m/fullkv/seed-1/lrlr/c1") and ITEM.key == "m/fullkv/seed-1/lrlr/c1"
    assert ITEM.to_dict() == {"model": "m", "context": "fullkv", "seed": 1, "trajectory": "lrlr", "case_id": "c1"}
    with pytest.raises(PlanError, match="^trajectory='..': not a plain name"):
        WorkItem("m", "c", 0, "..", "x")
    with pytest.raises(PlanError, match="^case id='a/b'"):
        WorkItem("m", "c", 0, "t", "a/b")
    with pytest.raises(PlanError, match="^context.name"):
        WorkItem("m", "c/d", 0, "t", "x")
    with pytest.raises(PlanError, match="^model.name"):
        WorkItem("", "c", 0, "t", "x")
    with pytest.raises(PlanError, match="^seed=-1"):
        WorkItem("m", "c", -1, "t", "x")


def test_a_manifest_row_keeps_the_keys_it_does_not_know_and_reads_its_item_back():
    rec = ItemRecord(status="done", item=ITEM, case={}, model={}, seed=ITEM.seed, fingerprint="fp",
                     video={"sha256": "v", "frames_sha256": "f"}, timings={"a": 1},
                     camera={"spec_hash": "s", "num_frames": 3, "fps": 16.0, "phases": {"V": [0, 3]}})
    row = rec.manifest_row()
    d = row.to_dict()
    assert d["key"] == d["dir"] == ITEM.key and d["video"] == "video.mp4" and d["video_sha256"] == "v"
    assert (d["frames_sha256"], d["spec_hash"], d["num_frames"], d["fps"], d["phases"], d["timings"],
            d["fingerprint"]) == ("f", "s", 3, 16.0, {"V": [0, 3]}, {"a": 1}, "fp")
    assert "extra" not in d and d["schema_version"] == 2  # the manifest rows' format (outputs.SCHEMA_VERSION)
    back = ManifestRow.from_dict({**d, "external": {"source": "x"}})
    assert back.extra == {"external": {"source": "x"}} and back.to_dict() == {**d, "external": {"source": "x"}}
    assert back.item == ITEM and back.done
    assert back == ManifestRow.from_dict(d) and "extra" not in repr(back)  # unknown keys neither compared nor shown
    failed = ItemRecord(status="failed", item=ITEM, case={}, model={}, seed=ITEM.seed, error="boom").manifest_row()
    assert failed.video is None and not failed.done and failed.error == "boom" and failed.video_sha256 is None


# -- integrity of a finished item -----------------------------------------------------------------------------------
def test_a_finished_item_whose_files_match_has_no_problem(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes, controls={"a.json": b"1", "sub_b.txt": b"2"})
    meta = json.loads((d / "meta.json").read_text())
    assert item_problems(d, meta) == []
    assert item_problems(d, meta, video_read=(len(video_bytes), meta["video"]["sha256"])) == []


def test_each_damage_of_a_finished_item_is_named(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes, controls={"a.json": b"1", "b.json": b"2"})
    meta = json.loads((d / "meta.json").read_text())
    assert item_problems(d, "x") == ["meta.json: not a JSON object"]
    assert item_problems(d, {**meta, "camera": [1], "controls": "x"})[:2] == [
        "meta.json: 'camera' is a list, expected a mapping (edited by hand?)",
        "meta.json: 'controls' is a str, expected a mapping (edited by hand?)"]
    assert item_problems(d, {**meta, "video": 3})[0] == "meta.json: 'video' is a int, expected a mapping (edited by hand?)"
    assert item_problems(d, {**meta, "video": {**meta["video"], "sha256": None}}) == [
        "meta.json: video.sha256 is missing"]
    assert item_problems(d, {**meta, "video": {**meta["video"], "size": 5}}) == [
        f"video.mp4 is {len(video_bytes)} bytes, meta.json recorded 5 (truncated or replaced)"]
    assert item_problems(d, {**meta, "video": {**meta["video"], "size": "5"}}) == []  # a size of the wrong type
    assert item_problems(d, {**meta, "video": {**meta["video"], "sha256": "0" * 64}}) == [
        "video.mp4 sha256 differs from meta.json (replaced or edited after it was written)"]
    assert item_problems(d, meta, video_read=(len(video_bytes), "0" * 64)) == [
        "video.mp4 sha256 differs from meta.json (replaced or edited after it was written)"]
    assert item_problems(d, meta, video_read=(7, meta["video"]["sha256"])) == [
        f"video.mp4 is 7 bytes, meta.json recorded {len(video_bytes)} (truncated or replaced)"]
    assert item_problems(d, {**meta, "status": "failed", "video": {"sha256": None}}) == []  # only a done item's video
    (d / "controls" / "b.json").write_bytes(b"changed")
    (d / "controls" / "a.json").unlink()
    (d / "camera.npz").write_bytes(b"other")
    assert item_problems(d, meta) == ["camera.npz sha256 differs from meta.json (truncated, replaced or edited)",
                                      "controls/a.json is missing", "controls/b.json sha256 differs from meta.json"]
    (d / "video.mp4").unlink()
    (d / "camera.npz").unlink()
    assert item_problems(d, {**meta, "controls": {}}) == ["video.mp4 is missing", "camera.npz is missing"]
    # the caller has read the video's bytes already: the file is not looked at again
    assert item_problems(d, {**meta, "controls": {}}, video_read=(len(video_bytes), meta["video"]["sha256"])) == [
        "camera.npz is missing"]


def test_a_video_under_another_name_is_the_one_checked(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes)
    meta = json.loads((d / "meta.json").read_text())
    os.replace(d / "video.mp4", d / "clip.mp4")
    assert item_problems(d, {**meta, "video": {**meta["video"], "file": "clip.mp4"}}) == []
    assert item_problems(d, meta) == ["video.mp4 is missing"]


def test_a_camera_without_a_recorded_hash_must_at_least_read(tmp_path, video_bytes):
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov

    d = make_item(tmp_path, video_bytes)
    meta = json.loads((d / "meta.json").read_text())
    del meta["camera"]["sha256"]
    (problem,) = item_problems(d, meta)
    assert "camera.npz" in problem
    build_path(TrajectorySpec(name="lrlr"), 33, 16, intrinsics_from_fov(60, 48, 32), 32, 48).save(d / "camera.npz")
    assert item_problems(d, meta) == []


def test_controls_hashes_name_every_file_but_hidden_temporaries(tmp_path):
    c = tmp_path / "controls"
    (c / "sub").mkdir(parents=True)
    (c / "a.txt").write_bytes(b"a")
    (c / "sub" / "b.txt").write_bytes(b"b")
    (c / ".a.txt.tmp").write_bytes(b"t")
    h = outputs.controls_hashes(c)
    assert h == {"a.txt": sha256_file(c / "a.txt"), "sub/b.txt": sha256_file(c / "sub" / "b.txt")}
    assert outputs.controls_hashes(tmp_path / "none") == {}


def test_item_meta_and_status_read_only_a_json_object(tmp_path):
    assert outputs.item_meta(tmp_path) is None and outputs.item_status(tmp_path) is None
    (tmp_path / "meta.json").write_text("[1]")
    assert outputs.item_meta(tmp_path) is None
    (tmp_path / "meta.json").write_text('{"status": "fai')
    assert outputs.item_meta(tmp_path) is None
    (tmp_path / "meta.json").write_text('{"status": "failed"}')
    assert outputs.item_status(tmp_path) == "failed"


def test_stale_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    from harness.io import host_tag

    me = host_tag()
    monkeypatch.setattr("harness.io.pid_alive", lambda pid, start=None: pid == 111)
    (tmp_path / "controls").mkdir()
    (tmp_path / "other").mkdir()
    names = {f".meta.json.{me}-222.ab.json": False, f".meta.json.{me}-111.ab.json": True,
             ".meta.json.abcdef-222.ab.json": True,  # another host's writer: cannot tell, kept
             ".old-temp": False, ".lock": True, ".takeover": True, "visible.txt": True}
    for n in names:
        (tmp_path / n).write_text("x")
    (tmp_path / "controls" / f".p.{me}-222.x.json").write_text("x")
    (tmp_path / "other" / ".tmp").write_text("x")
    (tmp_path / ".adir").mkdir()
    gone = remove_stale_temps(tmp_path)
    assert sorted(p.name for p in gone) == sorted([f".meta.json.{me}-222.ab.json", ".old-temp",
                                                   f".p.{me}-222.x.json"])
    assert {n for n in names if (tmp_path / n).exists()} == {n for n, kept in names.items() if kept}
    assert (tmp_path / "other" / ".tmp").exists() and (tmp_path / ".adir").is_dir()
    assert remove_stale_temps(tmp_path, recursive_into=("other",))[0].name == ".tmp"
    assert remove_stale_temps(tmp_path / "missing") == []


# -- the run folder -------------------------------------------------------------------------------------------------
def test_an_existing_run_is_found_by_path_or_by_name_and_must_hold_a_manifest(tmp_path, monkeypatch):
    run = tmp_path / "out" / "r"
    run.mkdir(parents=True)
    with pytest.raises(PlanError) as e:
        RunDir.existing("r", tmp_path / "out")
    assert str(e.value).startswith(f"run=r: no run at r or {run} (no manifest.jsonl)")
    with pytest.raises(PlanError, match=r"^run=\.\./x: no run at \.\./x \(no manifest"):
        RunDir.existing("../x", tmp_path / "out")  # a name that leaves output_root is not looked up
    (run / "manifest.jsonl").write_text("")
    assert RunDir.existing("r", tmp_path / "out").path == run.resolve()
    assert RunDir.existing(run).path == run.resolve()
    monkeypatch.chdir(tmp_path)
    assert RunDir.existing("out/r", "elsewhere").path == run.resolve()
    assert RunDir.existing("r", "out").path == run.resolve()
    r = RunDir(run)
    assert (r.manifest, r.eval_dir, r.name) == (run / "manifest.jsonl", run / "eval", "r")


@pytest.mark.parametrize("rel", ["/etc", "../x", "a/../../x", "a/../b"])
def test_an_item_dir_that_leaves_the_run_is_refused(tmp_path, rel):
    with pytest.raises(PlanError, match="escapes the run directory"):
        RunDir(tmp_path).item_dir(rel)


def test_an_item_dir_through_a_symlink_out_of_the_run_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "m").symlink_to(tmp_path)
    r = RunDir(tmp_path / "run")
    with pytest.raises(PlanError, match="escapes"):
        r.item_dir("m/x")
    assert r.item_dir(WorkItem("n", "c", 0, "t", "x")) == tmp_path / "run" / "n/c/seed-0/t/x"
    assert r.item_dir("n/x") == tmp_path / "run" / "n/x"


def _rows(run: Path, *rows: dict) -> RunDir:
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return RunDir(run)


def _row(item: WorkItem = ITEM, **kw) -> dict:
    return {**item.to_dict(), "key": item.key, "dir": item.key, "status": "done", **kw}


def test_manifest_rows_must_describe_their_own_folder_once(tmp_path):
    other = WorkItem("m", "fullkv", 1, "lrlr", "c2")
    assert [r.key for r in _rows(tmp_path / "a", _row(), _row(other)).rows()] == [ITEM.key, other.key]
    bad = {
        "dir": _row(dir=other.key),  # points at another item's folder: that item would count twice
        "key": _row(key=other.key),
        "twice": None,
        "names": _row(model="../x"),
        "seed": _row(seed="one"),
    }
    for name, row in bad.items():
        run = _rows(tmp_path / name, *([_row(), _row()] if row is None else [row]))
        with pytest.raises(PlanError) as e:
            run.rows()
        msg = str(e.value)
        assert msg.startswith(f"{run.manifest}: ") and msg.endswith("it rebuilds the manifest from every item's "
                                                                    "meta.json"), msg
        if name == "twice":
            assert f"two rows for {ITEM.key}" in msg
        elif name in ("dir", "key"):
            assert "disagree with the item its names make (m/fullkv/seed-1/lrlr/c1)" in msg
    failed_no_dir = _rows(tmp_path / "f", _row(status="failed", dir=None))
    assert failed_no_dir.rows()[0].dir is None and failed_no_dir.done_rows() == []
    escaping = _rows(tmp_path / "e", _row(dir="../../x"))
    with pytest.raises(PlanError, match="escapes the run directory"):
        escaping.rows()
    broken = _rows(tmp_path / "b", _row())
    with broken.manifest.open("a") as f:
        f.write("not json\n")
    with pytest.raises(JsonLinesError, match=r"manifest.jsonl:2"):
        broken.rows()


def test_done_rows_are_the_finished_items(tmp_path):
    other = WorkItem("m", "fullkv", 1, "lrlr", "c2")
    run = _rows(tmp_path / "r", _row(), _row(other, status="failed"))
    assert [r.key for r in run.done_rows()] == [ITEM.key]


def test_the_manifest_is_updated_by_key_sorted_and_scrubbed(tmp_path):
    run = RunDir(tmp_path)
    other = WorkItem("a", "fullkv", 1, "lrlr", "c2")
    (tmp_path / f".manifest.jsonl.{'x' * 6}").write_text("left by a dead writer")
    run.update_manifest([_row(status="failed"), _row(other)])
    assert not list(tmp_path.glob(".manifest.jsonl.*"))
    with run.manifest.open("a") as f:
        f.write("garbage\n[1]\n")
    run.update_manifest([_row(error="https://u:hunter2secret@host/x")])
    lines = run.manifest.read_text().splitlines()
    assert [json.loads(x)["key"] for x in lines] == [other.key, ITEM.key]  # sorted; unreadable lines dropped
    assert json.loads(lines[1])["status"] == "done" and "hunter2secret" not in lines[1]
    assert run.manifest.read_text().endswith("\n")


def test_the_manifest_is_rebuilt_from_every_items_meta_json(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes, row=False)
    other = WorkItem("m", "fullkv", 1, "lrlr", "c2")
    d2 = make_item(tmp_path, video_bytes, other, row=False)
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps({**meta, "manifest": _row()}))
    (d2 / "meta.json").write_text(json.dumps({**meta, "manifest": {**_row(other), "key": None} | {"key": other.key}}))
    (tmp_path / "x" / "y").mkdir(parents=True)  # not an item folder
    run = RunDir(tmp_path)
    run.rebuild_manifest()
    assert [r.key for r in run.rows()] == [ITEM.key, other.key]
    assert run.item_keys() == [ITEM.key, other.key]
    (d2 / "meta.json").write_text(json.dumps(meta))  # no manifest section: no row
    run.rebuild_manifest()
    assert [r.key for r in run.rows()] == [ITEM.key]
    (d / "meta.json").unlink()
    (d2 / "meta.json").unlink()
    run.rebuild_manifest()
    assert run.manifest.read_text() == ""
    assert RunDir(tmp_path / "nothing").item_keys() == []


def test_run_problems_name_every_lock_and_leftover(tmp_path):
    run = RunDir(tmp_path)
    assert run.problems() == []
    (tmp_path / ".locks").mkdir()
    (tmp_path / ".locks" / "k.lock").write_text("")
    (tmp_path / ".locks" / ".takeover").write_text("")
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / ".x").write_text("")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".video.h-1.x.partial.mp4").write_text("")
    (tmp_path / "a" / ".meta.json.tmp").write_text("")
    (tmp_path / ".eval.lock").write_text("")
    (tmp_path / ".adir").mkdir()
    assert run.problems() == [
        (f"lock left: {tmp_path / '.locks' / 'k.lock'} (a process is working on that item, or died; a rerun takes a "
         "dead one over)"),
        f"temporary file left: {tmp_path / 'a' / '.meta.json.tmp'} (a writer was killed; a rerun removes it)",
        f"partial video left: {tmp_path / 'a' / '.video.h-1.x.partial.mp4'} (a writer was killed; a rerun removes it)"]


def test_a_run_lock_is_one_file_named_after_it(tmp_path):
    with RunDir(tmp_path).lock("eval"):
        assert (tmp_path / ".eval.lock").is_file()


# -- verify: one item ------------------------------------------------------------------------------------------------
def test_a_delivered_item_passes_every_check(tmp_path, video_bytes):
    make_item(tmp_path, video_bytes)
    c = check(tmp_path)
    assert c.results == dict.fromkeys(verify.CHECKS, True) and c.ok and c.notes == []


@pytest.mark.parametrize("meta_fps, ok", [(FPS, True), (FPS * (1 + 0.9e-3), True), (FPS * (1 - 0.9e-3), True),
                                          (FPS * 1.0011, False), (FPS * 0.9989, False), (15.9, False),
                                          (16.1, False), (0, False), (-16.0, False), (True, False), ("16", False),
                                          (None, False)])
def test_the_recorded_fps_must_match_the_video_within_a_thousandth_either_way(tmp_path, video_bytes, meta_fps, ok):
    """A slower or a faster recorded rate fails alike (the check is two-sided)."""
    make_item(tmp_path, video_bytes, meta_fps=meta_fps)
    c = check(tmp_path)
    assert c.results["fps"] is ok and c.results["frames"] and c.results["decodes"]
    assert (f"fps: stored 16.0000, meta {meta_fps!r}" in c.notes) is not ok


def test_the_frame_count_must_agree_between_video_camera_and_meta(tmp_path, video_bytes):
    make_item(tmp_path, video_bytes, cam_frames=4)
    c = check(tmp_path)
    assert c.results["frames"] is False and "frames: decoded 3, camera path 4, meta 3" in c.notes and not c.ok
    d = make_item(tmp_path, video_bytes)
    meta = json.loads((d / "meta.json").read_text())
    del meta["camera"]["num_frames"]
    (d / "meta.json").write_text(json.dumps(meta))
    assert check(tmp_path).results["frames"] is True  # no camera count: the video section's is the one
    meta["video"]["num_frames"] = 4
    (d / "meta.json").write_text(json.dumps(meta))
    c = check(tmp_path)
    assert c.results["frames"] is False and "frames: decoded 3, camera path 4, meta 4" in c.notes


def test_a_video_that_does_not_decode_fails_decodes_and_its_hash(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes)
    (d / "video.mp4").write_bytes(b"not a video" * 10)
    c = check(tmp_path)
    assert c.results["decodes"] is False and "frames" not in c.results and "fps" not in c.results
    assert c.results["sha256"] is False and c.results["files"] is True and not c.ok
    assert any(n.startswith("video.mp4 does not decode: ") for n in c.notes)
    assert any(n.startswith("video.mp4 is 110 bytes") for n in c.notes)


def test_other_files_fingerprint_and_manifest_are_checked_apart(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes, controls={"a.json": b"1"})
    (d / "controls" / "a.json").write_bytes(b"2")
    c = check(tmp_path, fingerprint="other")
    assert (c.results["files"], c.results["sha256"], c.results["fingerprint"]) == (False, True, False)
    assert c.notes == ["controls/a.json sha256 differs from meta.json",
                       "made with a different config (fingerprint differs from the current overrides)"]
    assert list(c.results) == ["clean", "done", "decodes", "frames", "fps", "sha256", "files", "fingerprint",
                               "manifest"]


@pytest.mark.parametrize("row", [None, "failed", "stale"])
def test_the_manifest_row_must_be_there_done_and_hold_the_videos_hash(tmp_path, video_bytes, row):
    d = make_item(tmp_path, video_bytes, row=False)
    meta = json.loads((d / "meta.json").read_text())
    rows = {}
    if row:
        r = ItemRecord.from_dict({**meta, "status": "failed"} if row == "failed" else meta).manifest_row()
        if row == "stale":
            r.video_sha256 = "0" * 64
        rows = {ITEM.key: r}
    c = verify.check_item(tmp_path, ITEM, "fp", rows)
    assert c.results["manifest"] is False and c.notes == ["manifest.jsonl row missing or stale"]


def test_leftovers_of_a_killed_writer_make_an_item_unclean(tmp_path, video_bytes):
    from harness.locks import lock_name

    d = make_item(tmp_path, video_bytes)
    for name in (".lock", ".eval.lock"):
        (d / name).write_text("")  # the run's own control files are not leftovers
    (d / ".hidden_dir").mkdir()
    assert check(tmp_path).results["clean"] is True
    (d / ".video.h-1.x.partial.mp4").write_text("")
    (d / "controls" / ".a.json.tmp").write_text("")
    (tmp_path / ".locks").mkdir()
    (tmp_path / ".locks" / lock_name(ITEM.key)).write_text("")
    c = check(tmp_path)
    assert c.results["clean"] is False and not c.ok and c.results["done"]
    assert c.notes == [(f"temporary files left: .a.json.tmp, .video.h-1.x.partial.mp4 (a partial video), "
                        f"{tmp_path / '.locks' / lock_name(ITEM.key)} (a lock: a process is on it, or died; a rerun "
                        "takes a dead one over)")]


@pytest.mark.parametrize("meta, note", [
    (None, "status: missing"),
    ({"status": "failed", "error": "CUDA out of memory"}, "status: failed (CUDA out of memory)"),
    ({"status": "failed", "error": ""}, "status: failed"),
    ({"status": "compiled"}, "status: compiled"),
    ("truncated", "status: unreadable: "),
])
def test_an_item_that_is_not_done_says_why(tmp_path, video_bytes, meta, note):
    d = tmp_path / ITEM.rel_dir
    d.mkdir(parents=True)
    (tmp_path / "leftover").mkdir()
    if meta == "truncated":
        (d / "meta.json").write_text('{"status": "do')
    elif meta is not None:
        (d / "meta.json").write_text(json.dumps(meta))
    (d / ".meta.json.tmp").write_text("")
    c = verify.check_item(tmp_path, ITEM, "fp", {})
    assert c.results == {"clean": False, "done": False} and not c.ok
    assert c.notes[0].startswith(note) and c.notes[1] == "temporary files left: .meta.json.tmp"
    if meta == "truncated":
        assert "meta.json" in c.notes[0] and "rerun the item" in c.notes[0]
    else:
        assert c.notes[0] == note


# -- verify: the report -----------------------------------------------------------------------------------------------
def test_the_report_table_has_one_row_per_item_and_a_summary(tmp_path):
    good = verify.ItemCheck("a/b", dict.fromkeys(verify.CHECKS, True))
    bad = verify.ItemCheck("longer/key/x", {"clean": True, "done": False}, ["status: missing"])
    rep = verify.VerifyReport(tmp_path, [good, bad], extra=["x/y"], problems=["boom"])
    assert not rep.ok and good.ok and not bad.ok
    lines = rep.table().splitlines()
    w = len("longer/key/x")
    assert lines[0] == f"run directory: {tmp_path}"
    assert lines[1] == f"{'item':<{w}}  " + " ".join(f"{c:>11}" for c in verify.CHECKS) and set(lines[2]) == {"-"}
    assert len(lines[2]) == len(lines[1])
    assert lines[3] == f"{'a/b':<{w}}  " + " ".join(f"{'ok':>11}" for _ in verify.CHECKS)
    assert lines[4] == f"{'longer/key/x':<{w}}  " + " ".join(
        f"{'FAIL' if c == 'done' else 'ok' if c == 'clean' else '-':>11}" for c in verify.CHECKS)
    assert lines[5] == " " * w + "    status: missing"
    assert lines[6] == "1/2 item(s) deliverable; 1 FAILED; 1 item folder(s) outside this plan"
    assert lines[7] == "PROBLEM: boom"
    assert verify.VerifyReport(tmp_path, [good]).ok and verify.VerifyReport(tmp_path, [good]).table().splitlines()[
        -1] == "1/1 item(s) deliverable"
    assert not verify.VerifyReport(tmp_path).ok  # nothing planned: nothing delivered
    assert not verify.VerifyReport(tmp_path, [good], problems=["x"]).ok
    short = verify.VerifyReport(tmp_path, [verify.ItemCheck("k", {"done": True})]).table().splitlines()
    assert short[1].startswith("item  ") and short[3].startswith("k     ")
    assert not verify.ItemCheck("k", {c: True for c in verify.CHECKS[:-1]}).ok  # a check not made is not passed


def test_the_manifest_rows_verify_reads(tmp_path):
    problems: list[str] = []
    assert verify._manifest_rows(RunDir(tmp_path), problems) == {}
    assert problems == [f"{tmp_path / 'manifest.jsonl'} is missing"]
    problems.clear()
    run = _rows(tmp_path, _row(), _row())
    assert verify._manifest_rows(run, problems) == {} and "two rows for" in problems[0]
    problems.clear()
    run = _rows(tmp_path, _row())
    assert list(verify._manifest_rows(run, problems)) == [ITEM.key] and problems == []



# -- verify: a whole run -------------------------------------------------------------------------------------------------
SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false"]


@pytest.fixture(scope="module")
def small_cfg(tmp_path_factory):
    """The config of a one-item run under a module-wide output root, and that item with its fingerprint."""
    from harness.app.plan import plan_from_config
    from harness.app.runner import fingerprints
    from tests.support import compose

    root = tmp_path_factory.mktemp("verify-runs")
    cfg = compose(["run=r", f"output_root={root}", *SMALL])
    plan = plan_from_config({**cfg, "shard": "0/1"}, for_writing=False)
    (item,) = plan.all_items
    return cfg, plan.run_dir, item, fingerprints(plan)[item.key][0]


def test_verify_of_a_run_that_does_not_exist_names_it_and_creates_nothing(small_cfg):
    cfg, run_dir, _, _ = small_cfg
    with pytest.raises(PlanError) as e:
        verify.verify_run({**cfg, "run": "missing"})
    assert str(e.value).startswith(f"run='missing': no run at {run_dir.parent / 'missing'}; give verify the overrides")
    assert not (run_dir.parent / "missing").exists()


def test_verify_checks_every_planned_item_and_names_what_lies_outside_the_plan(small_cfg, video_bytes):
    from harness.locks import lock_name

    cfg, run_dir, item, fp = small_cfg
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    make_item(run_dir, video_bytes, item, fingerprint=fp)
    rep = verify.verify_run(cfg)
    assert [i.key for i in rep.items] == [item.key] and rep.items[0].results == dict.fromkeys(verify.CHECKS, True)
    assert rep.ok and rep.extra == [] and rep.problems == [] and rep.run_dir == run_dir
    other = WorkItem("reference", "fov", 2, "lrlr", "environment_rocket")
    make_item(run_dir, video_bytes, other, fingerprint=fp)  # another seed: a folder of another config
    (run_dir / item.rel_dir / ".meta.json.x.tmp").write_text("")  # the planned item's own leftover: in its row
    (run_dir / ".locks").mkdir()
    (run_dir / ".locks" / lock_name(item.key)).write_text("")
    (run_dir / ".locks" / lock_name(other.key)).write_text("")
    (run_dir / other.rel_dir / ".video.x.partial.mp4").write_text("")
    rep = verify.verify_run(cfg)
    assert rep.extra == [other.key] and not rep.ok and rep.items[0].results["clean"] is False
    assert rep.problems == [
        (f"lock left: {run_dir / '.locks' / lock_name(other.key)} (a process is working on that item, or died; a "
         "rerun takes a dead one over)"),
        (f"partial video left: {run_dir / other.rel_dir / '.video.x.partial.mp4'} (a writer was killed; a rerun "
         "removes it)")]
    (run_dir / "manifest.jsonl").unlink()
    rep = verify.verify_run(cfg)
    assert rep.problems[0] == f"{run_dir / 'manifest.jsonl'} is missing" and rep.items[0].results["manifest"] is False


# -- more rules of single checks -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_fps_video(tmp_path_factory) -> bytes:
    from harness.video import VideoWriter

    path = tmp_path_factory.mktemp("video1") / "video.mp4"
    w = VideoWriter(path, fps=1)
    for i in range(FRAMES):
        w.write(np.full((32, 32, 3), 40 * i, np.uint8))
    w.close()
    return path.read_bytes()


@pytest.mark.parametrize("meta_fps, ok", [(1, True), (1.0, True), (True, False), ("1", False), (None, False)])
def test_a_one_fps_video_passes_only_with_a_numeric_rate_of_one(tmp_path, one_fps_video, meta_fps, ok):
    make_item(tmp_path, one_fps_video, meta_fps=meta_fps)
    assert check(tmp_path).results["fps"] is ok


def test_a_missing_video_hash_fails_the_hash_check_not_the_files_check(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes)
    meta = json.loads((d / "meta.json").read_text())
    del meta["video"]["sha256"]
    (d / "meta.json").write_text(json.dumps(meta))
    c = check(tmp_path)
    assert (c.results["sha256"], c.results["files"]) == (False, True) and "meta.json: video.sha256 is missing" in c.notes


def test_the_report_is_ok_only_when_every_item_is(tmp_path):
    good = verify.ItemCheck("a", dict.fromkeys(verify.CHECKS, True))
    bad = verify.ItemCheck("b", {"done": False})
    assert not verify.VerifyReport(tmp_path, [good, bad]).ok and not verify.VerifyReport(tmp_path, [bad, good]).ok
    lines = verify.VerifyReport(tmp_path, [verify.ItemCheck("k", {"done": True})]).table().splitlines()
    assert lines[1] == "item  " + " ".join(f"{c:>11}" for c in verify.CHECKS)  # the column is 4 wide at least
    assert lines[3] == "k     " + " ".join(f"{'ok' if c == 'done' else '-':>11}" for c in verify.CHECKS)


def test_a_meta_json_without_some_sections_has_no_section_problem(tmp_path, video_bytes):
    d = make_item(tmp_path, video_bytes)
    meta = json.loads((d / "meta.json").read_text())
    assert item_problems(d, {k: v for k, v in meta.items() if k != "controls"}) == []
    assert item_problems(d, {"status": "failed", "camera": meta["camera"]}) == []  # no video section either


def test_an_absolute_item_dir_is_refused_even_inside_the_run(tmp_path):
    with pytest.raises(PlanError, match="escapes the run directory"):
        RunDir(tmp_path).item_dir(str(tmp_path / "m" / "x"))


def test_done_rows_without_a_dir_are_told_apart_by_their_key(tmp_path):
    other = WorkItem("m", "fullkv", 1, "lrlr", "c2")
    run = _rows(tmp_path / "r", _row(dir=None), _row(other, dir=None))
    assert [r.key for r in run.done_rows()] == [ITEM.key, other.key]


def test_manifest_lines_are_written_with_sorted_keys_and_other_lines_kept_as_they_are(tmp_path, video_bytes):
    from harness import secrets

    run = RunDir(tmp_path)
    other = WorkItem("a", "fullkv", 1, "lrlr", "c2")
    run.update_manifest([{"status": "failed", **_row(other, status="failed", error="kept-words-abc")}])
    first = run.manifest.read_text()
    assert first == json.dumps(json.loads(first), sort_keys=True) + "\n"
    secrets.register({"kept-words-abc": "LATER_SECRET"})  # registered after that line was written
    try:
        run.update_manifest([_row()])
        assert run.manifest.read_text().splitlines()[0] == first.strip()  # not rewritten
    finally:
        secrets.clear_registry()
    d = make_item(tmp_path / "b", video_bytes, row=False)
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps({**meta, "manifest": {"z": 1, **_row(), "a": 2}}))
    RunDir(tmp_path / "b").rebuild_manifest()
    line = (tmp_path / "b" / "manifest.jsonl").read_text().strip()
    assert line == json.dumps(json.loads(line), sort_keys=True)


def test_hidden_files_of_the_lock_folder_are_not_leftovers(tmp_path):
    (tmp_path / ".locks").mkdir()
    (tmp_path / ".locks" / ".k.lock.tmp").write_text("")
    assert RunDir(tmp_path).problems() == []


def test_versions_name_torch_only_once_it_is_imported(monkeypatch):
    import sys
    import types

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    v = outputs.versions()
    assert "torch" not in v and v["numpy"] == np.__version__ and v["python"]
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="9.9"))
    assert outputs.versions()["torch"] == "9.9"


def test_git_state_asks_git_for_the_commit_and_dirtiness_within_five_seconds(monkeypatch):
    import subprocess

    calls = []

    def run(args, **kw):
        calls.append((args, kw))
        out = {"rev-parse": "f" * 40 + "\n", "status": " M x\n"}[args[1]]
        return subprocess.CompletedProcess(args, 0 if code[0] is None else code[0], out, "")

    code = [None]
    monkeypatch.setattr(outputs.subprocess, "run", run)
    assert outputs.git_state() == {"sha": "f" * 40, "dirty": True}
    kw = {"cwd": outputs.PROJECT_ROOT, "capture_output": True, "text": True, "timeout": 5}
    assert calls == [(["git", "rev-parse", "HEAD"], kw), (["git", "status", "--porcelain"], kw)]
    code[0] = 128  # not a git checkout
    assert outputs.git_state() == {"sha": None, "dirty": None}
    code[0] = 1
    assert outputs.git_state() == {"sha": None, "dirty": None}


def test_verify_reads_a_run_it_could_not_write(small_cfg, video_bytes, monkeypatch):
    """A delivered run on a read-only disk is verified: verify plans for reading, without the writability check."""
    cfg, run_dir, item, fp = small_cfg
    if not (run_dir / item.rel_dir / "meta.json").exists():
        make_item(run_dir, video_bytes, item, fingerprint=fp)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert [i.key for i in verify.verify_run(cfg).items] == [item.key]
