"""Rules of ``python -m harness verify`` (harness/app/verify.py), one per test, in process."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness import outputs
from harness.app import verify
from harness.outputs import RunDir, WorkItem, item_problems
from tests.harness.test_outputs_rules import ITEM, make_item, three_frame_video

SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false"]


@pytest.fixture(scope="module")
def video_bytes(tmp_path_factory) -> bytes:
    return three_frame_video(tmp_path_factory.mktemp("video"))


# -- outputs: states and stale layouts ---------------------------------------------------------------------------------
def test_the_states_an_item_ends_in_are_every_state_but_running():
    assert outputs.FINISHED == ("compiled", "done", "failed")


def test_an_item_of_a_superseded_trajectory_layout_is_a_problem_naming_the_fix(tmp_path, video_bytes):
    from trajectories.migration import SUPERSEDED

    spec, why = SUPERSEDED[-1]
    d = make_item(tmp_path, video_bytes, trajectory=spec)
    meta = json.loads((d / "meta.json").read_text())
    assert item_problems(d, meta) == [
        f"made with the superseded translate_square {why}: rerun the run's command to redo it "
        "(docs/trajectories.md, \"Migration\")"]


# -- verify_run: which fingerprint an item is held to ------------------------------------------------------------------
@pytest.fixture()
def small(tmp_path):
    """A one-item run's config under tmp_path, its plan and that item."""
    from harness.app.plan import plan_from_config
    from tests.support import compose

    cfg = compose(["run=r", f"output_root={tmp_path}", *SMALL])
    plan = plan_from_config({**cfg, "shard": "0/1"}, for_writing=False)
    (item,) = plan.all_items
    return cfg, plan, item


def test_a_planned_item_without_meta_json_is_missing_not_an_error(small):
    cfg, plan, item = small
    plan.run_dir.mkdir(parents=True)
    rep = verify.verify_run(cfg)
    assert [(i.key, i.results, i.notes) for i in rep.items] == [
        (item.key, {"clean": True, "done": False}, ["status: missing"])]


def test_a_done_item_of_another_config_fails_its_fingerprint(small, video_bytes):
    cfg, plan, item = small
    make_item(plan.run_dir, video_bytes, item, fingerprint="another")
    (c,) = verify.verify_run(cfg).items
    assert c.results == {**dict.fromkeys(verify.CHECKS, True), "fingerprint": False}
    assert c.notes == ["made with a different config (fingerprint differs from the current overrides)"]


def test_an_item_is_held_to_its_fingerprint_string_not_its_part_hashes(small, video_bytes):
    from harness.app.runner import fingerprints

    cfg, plan, item = small
    d = make_item(plan.run_dir, video_bytes, item)
    (d / "meta.json").write_text(json.dumps({**_meta(d), "fingerprint": fingerprints(plan)[item.key][1]}))
    (c,) = verify.verify_run(cfg).items
    assert c.results["fingerprint"] is False


def test_a_done_item_made_with_another_trajectorys_frame_override_is_current(small, video_bytes):
    from harness.app.runner import encoder_settings, fingerprints
    from harness.fingerprint import fingerprint_with_recorded_frames

    cfg, plan, item = small
    model = {**plan.adapter.config.to_dict(), "frames_per_trajectory": {"some_other_trajectory": 33}}
    fp = fingerprint_with_recorded_frames(plan.adapter, plan.policy, plan.specs[item.trajectory],
                                          plan.case_by_id[item.case_id], item, encoder_settings(), model)
    assert fp is not None and fp != fingerprints(plan)[item.key][0]
    make_item(plan.run_dir, video_bytes, item, fingerprint=fp, model=model)
    rep = verify.verify_run(cfg)
    assert rep.ok and rep.items[0].results == dict.fromkeys(verify.CHECKS, True), rep.table()


# -- _provenance: an imported item's video is still the release's file -------------------------------------------------
def _imported(run: Path, video: bytes, item: WorkItem = ITEM, **kw) -> tuple[Path, Path]:
    """An item of an imported release: its video.mp4 a hard link to the release's file (outside the run), whose
    size, times and inode meta.json stamps. Returns (item folder, release file)."""
    src = run.parent / "release" / f"{item.case_id}-{item.seed}.mp4"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(video)
    st = src.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "dev": st.st_dev, "ino": st.st_ino}
    d = make_item(run, video, item, fingerprint="fp", release={"video": stamp}, source={"video": str(src)}, **kw)
    (d / "video.mp4").unlink()
    os.link(src, d / "video.mp4")
    return d, src


def _meta(d: Path) -> dict:
    return json.loads((d / "meta.json").read_text())


def test_an_imported_video_that_is_the_release_file_as_stamped_has_no_provenance_problem(tmp_path, video_bytes):
    d, _ = _imported(tmp_path / "run", video_bytes)
    assert verify._provenance(d, _meta(d)) is None


@pytest.mark.parametrize("drop", ["release", "source"])
def test_an_imported_item_without_its_stamp_or_source_path_was_not_written_by_release_import(
        tmp_path, video_bytes, drop):
    d, _ = _imported(tmp_path / "run", video_bytes)
    meta = _meta(d)
    meta[drop]["video"] = {} if drop == "release" else None
    assert verify._provenance(d, meta) == (
        "meta.json: release.video or source.video is missing (not written by release import)")


def test_a_release_file_of_another_size_changed_since_the_import(tmp_path, video_bytes):
    d, _ = _imported(tmp_path / "run", video_bytes)
    meta = _meta(d)
    meta["release"]["video"]["size"] += 1
    assert verify._provenance(d, meta) == "the release's file changed since the import (size); rerun release import"


def test_a_video_replaced_in_the_item_folder_is_no_longer_the_release_file(tmp_path, video_bytes):
    d, _ = _imported(tmp_path / "run", video_bytes)
    (d / "video.mp4").unlink()
    (d / "video.mp4").write_bytes(video_bytes)
    assert verify._provenance(d, _meta(d)) == (
        "video.mp4 is no longer the release's file (replaced in the item folder); rerun release import")


# -- verify_imported: the items of an imported release ------------------------------------------------------------------
def test_an_imported_item_that_is_the_release_file_passes_every_check(tmp_path, video_bytes):
    run = tmp_path / "run"
    _imported(run, video_bytes)
    rep = verify.verify_imported(RunDir(run))
    assert [(i.key, i.results, i.notes) for i in rep.items] == [(ITEM.key, dict.fromkeys(verify.CHECKS, True), [])]
    assert rep.problems == [] and rep.ok


def test_an_imported_item_whose_release_file_changed_fails_only_its_provenance(tmp_path, video_bytes):
    run = tmp_path / "run"
    d, _ = _imported(run, video_bytes)
    meta = _meta(d)
    meta["release"]["video"]["mtime_ns"] += 1
    (d / "meta.json").write_text(json.dumps(meta))
    (c,) = verify.verify_imported(RunDir(run)).items
    assert c.results == {**dict.fromkeys(verify.CHECKS, True), "fingerprint": False}
    assert c.notes == ["the release's file changed since the import (mtime_ns); rerun release import"]


def test_an_imported_release_checks_every_item_its_manifest_or_its_folders_name(tmp_path, video_bytes):
    run = tmp_path / "run"
    both, folder_only, row_only = (WorkItem("m", "fullkv", s, "lrlr", "c1") for s in (1, 23, 4))
    _imported(run, video_bytes, both)
    _imported(run, video_bytes, folder_only, row=False)
    d, _ = _imported(run, video_bytes, row_only)
    shutil.rmtree(d)
    rep = verify.verify_imported(RunDir(run))
    assert [(i.key, i.results.get("done"), i.results.get("manifest")) for i in rep.items] == [
        (both.key, True, True), (folder_only.key, True, False), (row_only.key, False, None)]
    assert rep.items[2].notes == ["status: missing"] and rep.problems == []


def test_an_imported_item_that_is_not_done_gets_no_provenance_check(tmp_path, video_bytes):
    run = tmp_path / "run"
    d, _ = _imported(run, video_bytes)
    (d / "meta.json").write_text(json.dumps({**_meta(d), "status": "failed", "error": "x"}))
    (c,) = verify.verify_imported(RunDir(run)).items
    assert (c.results, c.notes) == ({"clean": True, "done": False}, ["status: failed (x)"])


def test_a_folder_of_an_imported_release_that_is_no_item_is_a_problem(tmp_path, video_bytes):
    run = tmp_path / "run"
    _imported(run, video_bytes)
    bad = run / "m" / "fullkv" / "seed-x" / "lrlr" / "c1"
    bad.mkdir(parents=True)
    (bad / "meta.json").write_text("{}")
    rep = verify.verify_imported(RunDir(run))
    assert [i.key for i in rep.items] == [ITEM.key]
    assert rep.problems == [
        "m/fullkv/seed-x/lrlr/c1: not an item of this run (invalid literal for int() with base 10: 'x')"]


def test_an_imported_release_reports_its_run_level_leftovers(tmp_path, video_bytes):
    run = tmp_path / "run"
    _imported(run, video_bytes)
    (run / ".manifest.jsonl.tmp").write_text("")
    rep = verify.verify_imported(RunDir(run))
    assert rep.problems == [
        f"temporary file left: {run / '.manifest.jsonl.tmp'} (a writer was killed; a rerun removes it)"]


def test_an_imported_release_with_no_item_is_a_problem(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.jsonl").write_text("")
    rep = verify.verify_imported(RunDir(run))
    assert rep.items == [] and not rep.ok
    assert rep.problems == [f"{run}: an imported release with no item (rerun release import)"]


@pytest.mark.parametrize("key, parts", [
    ("m/fullkv/seed-12/lrlr/c1", ("m", "fullkv", 12, "lrlr", "c1")),
    ("m/fullkv/seed-0/lrlr/c1", ("m", "fullkv", 0, "lrlr", "c1")),
])
def test_an_item_key_splits_into_its_five_fields_with_the_seed_after_seed_dash(key, parts):
    assert verify._key_parts(key) == parts


def test_an_item_key_whose_third_part_is_not_seed_dash_n_is_refused():
    with pytest.raises(ValueError) as e:
        verify._key_parts("m/fullkv/12/lrlr/c1")
    assert str(e.value) == "'12' is not seed-<n>"
