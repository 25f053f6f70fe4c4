"""Containment: no configured name becomes a path outside the run, and no write leaves the run directory.

The rule lives in one place (``harness.outputs.check_name``, applied by ``WorkItem`` to every segment of an item
folder and by ``check_run_name`` to each part of ``run``); the writes are confined by ``harness.io.confine``."""

from __future__ import annotations

import json

import pytest

from tests.hostile.conftest import SMALL


@pytest.mark.parametrize("name", ["../../../x", "/abs/path", "a/b", "..", "a..b", "", " x", "é", "a\nb", "a\n"])
def test_the_name_rule_refuses_anything_that_is_not_a_plain_segment(name):
    from harness.errors import UserError
    from harness.outputs import WorkItem, check_name

    with pytest.raises(UserError, match="not a plain name"):
        check_name("model.name", name)
    with pytest.raises(UserError, match="model.name"):
        WorkItem(name, "fov", 1, "lrlr", "c")
    with pytest.raises(UserError, match="case id"):
        WorkItem("m", "fov", 1, "lrlr", name)


def test_the_name_rule_keeps_plain_names():
    from harness.outputs import WorkItem, check_name

    for ok in ("reference", "sana_wm-v2", "a.b", "x=1,y+2", "A0"):
        assert check_name("f", ok) == ok
    assert WorkItem("m", "fov", 0, "lrlr", "c").key == "m/fov/seed-0/lrlr/c"


@pytest.mark.parametrize("override", ["model.name=../../../x", "model.name=/abs/path", "model.name=a/b"])
def test_a_model_name_that_is_a_path_is_refused_and_nothing_is_written(harness, tmp_path, override):
    r = harness("run=c", *SMALL, override)
    assert r.code == 2 and "model.name" in r.err and "not a plain name" in r.err, r.err
    assert "Traceback" not in r.err
    assert not (tmp_path / "outputs").exists()
    assert not list(tmp_path.parent.glob("x")) and not (tmp_path / "abs").exists()


def test_context_names_are_checked(harness, tmp_path):
    r = harness("run=c", *SMALL, "context.name=../x")
    assert r.code == 2 and "context.name" in r.err
    assert not (tmp_path / "outputs").exists()


def test_a_renamed_trajectory_would_mislabel_its_motion(harness, tmp_path):
    """``trajectory=lrlr trajectory.name=lrud`` filed LRLR motion as lrud; now refused, naming the fix."""
    r = harness("run=c", *SMALL, "trajectory=lrlr", "trajectory.name=lrud")
    assert r.code == 2 and "trajectory.name='lrud'" in r.err and "trajectory=lrud" in r.err, r.err
    assert not (tmp_path / "outputs").exists()
    r = harness("run=c", *SMALL, "trajectory.name=../x")
    assert r.code == 2 and "trajectory" in r.err and not (tmp_path / "outputs").exists()


def test_the_run_name_rule_holds_for_imported_videos(harness, tmp_path):
    """``stage=evaluate videos=DIR run=../../x`` used to build the run folder without the rule."""
    videos = tmp_path / "v"
    videos.mkdir()
    (videos / "manifest.json").write_text("[]")
    for run in ("../../x", "/abs", "a/../b"):
        r = harness("stage=evaluate", f"videos={videos}", f"run={run}")
        assert r.code == 2 and "run=" in r.err, (run, r.err)
    assert not (tmp_path / "outputs").exists() and not list(tmp_path.parent.glob("x"))


def test_run_dir_item_dir_refuses_a_manifest_dir_outside_the_run(tmp_path):
    from harness.errors import UserError
    from harness.outputs import RunDir

    run = RunDir(tmp_path / "r")
    for bad in ("../x", "/etc", "a/../../x"):
        with pytest.raises(UserError, match="escapes the run directory"):
            run.item_dir(bad)


def test_confined_writes_refuse_a_path_outside_the_run(tmp_path):
    """The check can fail: inside ``confine(run)`` a write elsewhere raises and leaves nothing; outside it the same
    write works (library use)."""
    from harness.io import ContainmentError, confine, write_json, write_text

    run = tmp_path / "run"
    with confine(run):
        write_json(run / "a" / "ok.json", {"ok": 1})
        with pytest.raises(ContainmentError, match="outside the run directory"):
            write_text(tmp_path / "escaped.txt", "x")
        with pytest.raises(ContainmentError):
            write_text(run / ".." / "escaped.txt", "x")
    assert (run / "a" / "ok.json").is_file() and not (tmp_path / "escaped.txt").exists()
    write_text(tmp_path / "free.txt", "x")  # not confined any more
    assert (tmp_path / "free.txt").read_text() == "x"


def test_a_symlinked_item_folder_cannot_lead_a_confined_write_out(tmp_path):
    """Resolved paths are compared: a link inside the run that points elsewhere is refused."""
    from harness.io import ContainmentError, confine, write_text

    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (run / "link").symlink_to(elsewhere)
    with confine(run), pytest.raises(ContainmentError):
        write_text(run / "link" / "meta.json", "{}")
    assert not list(elsewhere.iterdir())


def test_external_model_and_context_names_pass_the_same_rule(harness, tmp_path, finished_run):
    import shutil

    videos = tmp_path / "v"
    videos.mkdir()
    shutil.copyfile(finished_run / "outputs" / "h" / "reference" / "fov" / "seed-1" / "lrlr" / "environment_rocket"
                    / "video.mp4", videos / "a.mp4")
    entry = {"video": "a.mp4", "case_id": "environment_rocket", "trajectory": "lrlr", "num_frames": 65, "fps": 16}
    for key, value in (("model", "../../x"), ("context", "/abs"), ("model", "a/b")):
        (videos / "manifest.json").write_text(json.dumps([{**entry, key: value}]))
        r = harness("stage=evaluate", f"videos={videos}", "run=ext")
        assert r.code == 2 and key in r.err and "not a plain name" in r.err, r.err
        assert not (tmp_path / "outputs" / "ext").exists()


# -- issue 33: every name that becomes a path passes the one rule, in every command ---------------------------------
@pytest.mark.parametrize("override, field", [("model.name=../../../../x", "model.name"),
                                             ("trajectory.name=../../../../x", "trajectory.name"),
                                             ("model.name=a/b", "model.name")])
def test_preview_refuses_a_name_that_is_a_path_and_writes_nothing(harness, tmp_path, override, field):
    """``preview model.name=../../../../x`` wrote a PNG and an NPZ outside ``output_root``, exit 0."""
    out = tmp_path / "deep" / "er" / "out"
    r = harness("preview", f"output_root={out}", override)
    assert r.code == 2 and field in r.err and "not a plain name" in r.err and "Traceback" not in r.err, r.err
    assert not list(tmp_path.rglob("*.png")) and not list(tmp_path.rglob("*.npz"))


def test_preview_still_writes_its_figure_under_output_root(harness, tmp_path):
    r = harness("preview", "output_root=o", "trajectory=lrlr")
    assert r.code == 0, r.err
    assert sorted(p.name for p in (tmp_path / "o" / "previews").iterdir()) == ["lrlr_reference.npz",
                                                                               "lrlr_reference.png"]


@pytest.mark.parametrize("name", ["../../x", "a/b", ".."])
def test_setup_refuses_a_traversing_model_name(harness, tmp_path, name):
    """``setup model.name=../../x`` raised a traceback (a contract lookup with a path)."""
    r = harness("setup", "model=dreamx", f"model.name={name}", f"setup.root={tmp_path / 'root'}", "print=true")
    assert r.code == 2 and "model.name" in r.err and "not a plain name" in r.err and "Traceback" not in r.err, r.err
    assert not (tmp_path / "root").exists() and not list(tmp_path.parent.glob("x"))
