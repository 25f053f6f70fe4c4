"""Validate the whole sweep and every setting before anything is written: settings against their types and
ranges, unknown ``+keys`` with a did-you-mean, every job of a sweep before job 0, what the model's native format
refuses (compiled once at planning), masks and depth against their image, external manifests against their
videos. Each failure: exit 2, one line naming the field and the fix, nothing on disk."""

from __future__ import annotations

import functools
import json
import shutil

import numpy as np
import pytest

from tests.hostile.conftest import ITEM, OBJECT_CASE, SMALL, write_case_folder


def _nothing_written(tmp_path) -> bool:
    return not (tmp_path / "outputs").exists()


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["+overwite=true"], "overwite: unknown setting"),
    (["+overwite=true"], "did you mean 'overwrite'?"),
    (["+foo=1"], "foo: unknown setting"),
    (["+cases.inclde=[x]"], "did you mean 'include'?"),
    (["+paths.weigths=/x"], "did you mean 'weights'?"),
    (["+evaluate.memory_strid=2", "evaluate=default"], "did you mean 'memory_stride'?"),
    (["dry_run=yes"], "dry_run='yes': use true or false"),
    (["overwrite=1"], "overwrite=1: use true or false"),
    (["stage=gen"], "stage='gen'"),
    (["trajectories=lrlr"], "trajectories='lrlr'"),
    (["cases.families=[objects]"], "cases.families: unknown family 'objects'"),
])
def test_settings_are_checked_before_anything_is_written(harness, tmp_path, args, needle):
    r = harness("run=v", *SMALL, *args)
    assert r.code == 2 and needle in r.err and "Traceback" not in r.err, r.err
    assert _nothing_written(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("arg, needle", [
    ("evaluate.bootstrap.n=-5", "evaluate.bootstrap.n=-5: must be an integer >= 1"),
    ("evaluate.memory_stride=0", "evaluate.memory_stride=0: must be an integer >= 1"),
    ("evaluate.revisit_tolerance_deg=abc", "evaluate.revisit_tolerance_deg='abc': must be a number"),
    ("evaluate.tracker_threshold=2", "evaluate.tracker_threshold=2"),
    ("evaluate.return_tolerances_deg=[30,-1]", "evaluate.return_tolerances_deg"),
    ("evaluate.validity=maybe", "evaluate.validity='maybe': use true or false"),
])
def test_evaluation_settings_fail_before_generation(harness, tmp_path, arg, needle):
    """``bootstrap.n=-5`` crashed only after evaluating everything; ``memory_stride=0`` and
    ``revisit_tolerance_deg=abc`` became per-item Python errors."""
    args = [a for a in SMALL if a != "evaluate=off"]
    r = harness("run=v", *args, arg)
    assert r.code == 2 and needle in r.err and "Traceback" not in r.err, r.err
    assert _nothing_written(tmp_path)


@pytest.mark.slow
def test_stage_evaluate_checks_its_settings_before_touching_the_run(harness, run_copy):
    before = sorted(p.name for p in run_copy.iterdir())
    r = harness("stage=evaluate", "run=h", "evaluate.bootstrap.n=-5")
    assert r.code == 2 and "evaluate.bootstrap.n=-5" in r.err
    assert sorted(p.name for p in run_copy.iterdir()) == before and not (run_copy.parents[4] / "eval").exists()


@pytest.mark.slow
def test_a_sweep_is_validated_whole_before_job_0_writes(harness, tmp_path):
    """``-m context=fov,native`` wrote job 0, then exited 2."""
    r = harness("-m", "context=fov,native", "run=sw", *SMALL)
    assert r.code == 2 and "sweep job #1" in r.err and "context=native" in r.err and "no job was started" in r.err
    assert _nothing_written(tmp_path)


@pytest.mark.slow
def test_a_sweep_from_an_experiment_file_is_validated_too(harness, tmp_path):
    """Sweep parameters from the config (``hydra.sweeper.params``) are expanded like Hydra does."""
    from harness.app.settings import sweep_jobs

    jobs = sweep_jobs(["experiment=context_study", "seed=1,2"])
    assert len(jobs) == 6 and all(any(o.startswith("context=") for o in j) for j in jobs)
    r = harness("-m", "experiment=context_study", "model.name=../x", *SMALL)
    assert r.code == 2 and "sweep job #0" in r.err and "model.name" in r.err
    assert _nothing_written(tmp_path)


def test_what_the_native_format_refuses_fails_at_planning(harness, tmp_path):
    """``model=lingbot_v2 debug=default dry_run=true`` failed every item and left camera.npz and controls/."""
    r = harness("model=lingbot_v2", "debug=default", "dry_run=true")
    assert r.code == 2 and "time-warps the trajectory" in r.err and "at planning" in r.err, r.err
    assert _nothing_written(tmp_path)


@pytest.mark.slow
def test_a_dry_run_never_downgrades_finished_items(harness, run_copy):
    """``dry_run=true overwrite=true`` turned done items into "compiled" and orphaned their videos."""
    before = (run_copy / "meta.json").read_bytes()
    r = harness("run=h", *SMALL, "dry_run=true", "overwrite=true")
    assert r.code == 2 and "dry_run=true overwrite=true" in r.err and "Drop overwrite=true" in r.err
    assert (run_copy / "meta.json").read_bytes() == before
    r = harness("run=h", *SMALL, "dry_run=true")  # without overwrite: the done item is left alone
    assert r.code == 0 and "skipped (already done)  1" in r.out
    assert json.loads((run_copy / "meta.json").read_text())["status"] == "done"


# -- case files ------------------------------------------------------------------------------------------------------
def _mask(path, w, h):
    from PIL import Image

    Image.fromarray(np.full((h, w), 255, np.uint8)).save(path)


def _validate(harness, folder):
    return harness("validate", "cases=folder", f"cases.source={folder}")


def _run(harness, folder):
    return harness("run=c", "cases=folder", f"cases.source={folder}", *[a for a in SMALL if "include" not in a])


@pytest.mark.slow
def test_a_mask_of_another_size_is_refused_not_stretched(harness, tmp_path):
    folder = write_case_folder(tmp_path / "cases", OBJECT_CASE)
    _mask(folder / "mask.png", 10, 10)
    for r in (_validate(harness, folder), _run(harness, folder)):
        assert r.code == 2 and "targets.objects[a].mask" in r.err and "10x10, the image is 96x64" in r.err, r.err
        assert "case.yaml" in r.err
    assert _nothing_written(tmp_path)
    _mask(folder / "mask.png", 96, 64)  # the check can pass
    assert _validate(harness, folder).code == 0


@pytest.mark.slow
@pytest.mark.parametrize("depth, needle", [
    (lambda p: np.save(p, np.ones((10, 10), np.float32)), "is 10x10, the image is 96x64"),
    (lambda p: np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True), "pickled objects are never loaded"),
    (lambda p: p.write_text("not an array"), "is not a .npy file"),
    (lambda p: np.save(p, np.ones((64, 96, 3), np.float32)), "a depth map is (H, W)"),
])
def test_a_depth_map_is_checked_against_its_image(harness, tmp_path, depth, needle):
    folder = write_case_folder(tmp_path / "cases", "id: env1\nfamily: environment\nimage: img.png\nprompt: p\n"
                                                   "depth: d.npy\ntrajectories: [lrlr]\n")
    depth(folder / "d.npy")
    for r in (_validate(harness, folder), _run(harness, folder)):
        assert r.code == 2 and "depth" in r.err and needle in r.err and "case.yaml" in r.err, r.err
        assert "Traceback" not in r.err
    assert _nothing_written(tmp_path)


def test_a_case_file_that_is_not_utf8(harness, tmp_path):
    folder = write_case_folder(tmp_path / "cases", "")
    (folder / "case.yaml").write_bytes(b"id: caf\xe9\nfamily: environment\n")
    r = _validate(harness, folder)
    assert r.code == 2 and "case.yaml: not UTF-8" in r.err and "Traceback" not in r.err


@pytest.mark.slow
def test_image_errors_name_the_case_file_and_the_field(harness, tmp_path):
    folder = write_case_folder(tmp_path / "cases", "id: env1\nfamily: environment\nimage: img.png\nprompt: p\n"
                                                   "trajectories: [lrlr]\n")
    (folder / "img.png").write_bytes(b"not a png at all")
    for r in (_validate(harness, folder), _run(harness, folder)):
        assert r.code == 2 and "case.yaml: image:" in r.err and "cannot be read" in r.err, r.err


def test_jsonl_case_errors_name_the_line(harness, tmp_path):
    folder = tmp_path / "cases"
    write_case_folder(folder, "")
    (folder / "case.yaml").unlink()
    good = json.dumps({"id": "a", "family": "environment", "image": "img.png", "prompt": "p"})
    (folder / "cases.jsonl").write_text(f"{good}\n{good.replace('a', 'b', 1)}\n{{broken\n")
    r = _validate(harness, folder)
    assert r.code == 2 and "cases.jsonl: line 3" in r.err


# -- external videos ---------------------------------------------------------------------------------------------
@pytest.fixture
def videos(tmp_path, finished_run):
    d = tmp_path / "videos"
    d.mkdir()
    shutil.copyfile(finished_run / "outputs" / "h" / ITEM / "video.mp4", d / "a.mp4")
    shutil.copyfile(finished_run / "outputs" / "h" / ITEM / "video.mp4", d / "b.mp4")
    (d / "notavideo.mp4").write_bytes(b"\0" * 1000)
    return d


ENTRY = {"video": "a.mp4", "case_id": "environment_rocket", "trajectory": "lrlr", "num_frames": 65, "fps": 16}


@pytest.mark.slow
@pytest.mark.parametrize("entries, needle", [
    ([{**ENTRY, "fps": 25}], "is 16 fps, the manifest says fps=25"),
    ([{**ENTRY, "fps": 0}], "fps=0: give the video's frame rate as a number > 0"),
    ([{**ENTRY, "fps": "16"}], "fps='16'"),
    ([{**ENTRY, "num_frames": "65"}], "num_frames='65'"),
    ([{**ENTRY, "num_frames": 64}], "65 frames decoded, the manifest says num_frames=64"),
    ([{**ENTRY, "hfov_deg": 0}], "hfov_deg=0"),
    ([{**ENTRY, "video": "notavideo.mp4"}], "does not decode"),
    ([ENTRY, {**ENTRY, "video": "b.mp4"}], "entry 1: external/native/seed-0/lrlr/environment_rocket is also entry 0"),
    ([{**ENTRY, "case_id": "x"}], "case_id 'x' is not in the case set"),
    ([{**ENTRY, "case_id": "x"}], "cases=folder cases.source="),
    ([{**ENTRY, "extra": 1}], "unknown key 'extra'"),
    ([{**ENTRY, "seed": 1.5}], "seed=1.5"),
    ({"videos": 3}, "expected a list of entries"),
])
def test_an_external_manifest_is_checked_against_its_videos(harness, tmp_path, videos, entries, needle):
    (videos / "manifest.json").write_text(json.dumps(entries))
    r = harness("stage=evaluate", f"videos={videos}", "run=ext")
    assert r.code == 2 and needle in r.err and "Traceback" not in r.err, r.err
    assert _nothing_written(tmp_path)


@pytest.mark.slow
def test_a_jsonl_manifest_error_names_its_line(harness, tmp_path, videos):
    """A JSONL error on line 3 was reported as line 1."""
    m = videos / "manifest.jsonl"
    m.write_text(json.dumps(ENTRY) + "\n" + json.dumps({**ENTRY, "video": "b.mp4", "seed": 1}) + "\n{oops\n")
    r = harness("stage=evaluate", f"videos={videos}", f"videos_manifest={m}", "run=ext")
    assert r.code == 2 and "manifest.jsonl:3" in r.err, r.err
    m.write_text(json.dumps(ENTRY) + "\n\n" + json.dumps({**ENTRY, "fps": 0}) + "\n")
    r = harness("stage=evaluate", f"videos={videos}", f"videos_manifest={m}", "run=ext")
    assert r.code == 2 and "line 3: fps=0" in r.err, r.err
    assert _nothing_written(tmp_path)


def test_a_valid_manifest_plans_one_item_per_entry(tmp_path, videos):
    from evaluate.external import check_import
    from harness.cases import CaseSelection
    from tests.support import compose

    (videos / "manifest.json").write_text(json.dumps([ENTRY, {**ENTRY, "video": "b.mp4", "context": "fullkv"}]))
    cfg = compose(["run=ext"])
    planned = check_import(videos, videos / "manifest.json", CaseSelection.from_dict(cfg["cases"]))
    assert [p.item.key for p in planned] == ["external/native/seed-0/lrlr/environment_rocket",
                                             "external/fullkv/seed-0/lrlr/environment_rocket"]
    assert not (tmp_path / "outputs").exists()


def test_keys_a_launcher_adds_are_known_and_a_typo_of_them_is_not():
    """``launcher=slurm`` adds a top-level ``slurm`` section (its file is in the global package): the settings check
    must know it, or every Slurm sweep is refused before job 0."""
    from harness.app.settings import load_run_config
    from harness.errors import ConfigError
    from tests.support import compose

    cfg = compose(["launcher=slurm", "slurm.cpus_per_task=1"])
    load_run_config(cfg)
    with pytest.raises(ConfigError, match="slurmm: unknown setting.*did you mean 'slurm'"):
        load_run_config({**cfg, "slurmm": {}})


# -- issue 33: validation before writing, for every launcher and command --------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("arg, field", [("slurm.mem_gb=abc", "slurm.mem_gb"), ("slurm.time=12h", "slurm.time"),
                                        ("slurm.cpus_per_task=2.5", "slurm.cpus_per_task"),
                                        ("slurm.array_parallelism=many", "slurm.array_parallelism"),
                                        ("slurm.mem_gb=0", "slurm.mem_gb")])
def test_slurm_settings_fail_with_one_line_before_anything_is_written(harness, tmp_path, monkeypatch, arg, field):
    """``launcher=slurm slurm.mem_gb=abc`` raised a traceback; ``slurm.time=12h`` left ``.hydra/multirun-*``."""
    import os

    bin_dir = tmp_path.parent / f"{tmp_path.name}-bin"  # stand-ins for a login node's sbatch / srun (never run)
    bin_dir.mkdir()
    for tool in ("sbatch", "srun", "squeue", "sacct"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = harness("-m", "launcher=slurm", arg, "run=sl", *SMALL)
    assert r.code == 2 and field in r.err and "Traceback" not in r.err, r.err
    assert len([line for line in r.err.splitlines() if line.startswith("error:")]) == 1, r.err
    assert not (tmp_path / "outputs").exists() and not list(tmp_path.rglob("multirun*"))


def test_slurm_setting_values_are_parsed_not_coerced():
    from harness.app.slurm import SlurmSettingError, executor_parameters

    base = {"time": "10", "array_parallelism": 2, "gres": None, "cpus_per_task": "4", "mem_gb": 8}
    assert executor_parameters(base, {})["cpus_per_task"] == "4"  # the check can pass; submitit gets it as given
    for k, v in (("mem_gb", "abc"), ("mem_gb", True), ("cpus_per_task", 1.5), ("array_parallelism", "x")):
        with pytest.raises(SlurmSettingError, match=f"slurm.{k}="):
            executor_parameters({**base, k: v}, {})


def test_the_documented_report_human_study_key_is_accepted(harness, run_copy):
    """``report run=A human_study=mystudy`` (docs/human-study.md) was refused by the unknown-key check."""
    r = harness("report", "run=h", "human_study=nosuch")
    assert r.code == 2 and "unknown setting" not in r.err and "nosuch" in r.err and "Traceback" not in r.err, r.err


def test_every_report_option_is_a_known_setting():
    """The report's plain options (evaluate.reporting.cli, rewritten to ``+key=value``) are its option fields, and
    those are top-level keys of the run configuration (one list: ``RunConfig`` derives from ``ReportOptions``)."""
    from evaluate.reporting.cli import REPORT_KEYS as OPTIONS
    from evaluate.reporting.cli import ReportOptions
    from harness.app.run_config import RunConfig

    assert set(OPTIONS) == set(ReportOptions.model_fields) - {"report_runs"}
    assert set(ReportOptions.model_fields) <= set(RunConfig.model_fields)


# the same rules one at a time, in process (the end-to-end refusals above run in the full suite only)
def _checked(tmp_path, entry, cases=None):
    from evaluate.external import _check_entry

    (tmp_path / "a.mp4").write_bytes(b"")  # only its presence is checked here; decoding is check_import's
    cases = cases if cases is not None else {"environment_rocket": object()}
    return _check_entry(tmp_path, tmp_path / "manifest.json", "entry 0", entry, cases)


@pytest.mark.parametrize("change, needle", [
    ({"video": 3}, "video=3: give the file name of the video"),
    ({"video": ""}, "video='': give the file name of the video"),
    ({"case_id": 5}, "case_id 5 is not in the case set (environment_rocket)"),
    ({"trajectory": "nope"}, "nope"),
    ({"num_frames": True}, "num_frames=True: give the video's frame count as an integer >= 2"),
    ({"num_frames": 2.0}, "num_frames=2.0"),
    ({"num_frames": 1}, "num_frames=1"),
    ({"fps": True}, "fps=True: give the video's frame rate as a number > 0"),
    ({"fps": float("nan")}, "fps=nan"),
    ({"fps": float("inf")}, "fps=inf"),
    ({"fps": 0}, "fps=0"),
    ({"fps": -2.5}, "fps=-2.5"),
    ({"hfov_deg": 1}, "hfov_deg=1: give the horizontal field of view in degrees, 1 < hfov_deg < 179"),
    ({"hfov_deg": 179}, "hfov_deg=179"),
    ({"hfov_deg": True}, "hfov_deg=True"),
    ({"hfov_deg": "60"}, "hfov_deg='60'"),
    ({"hfov_deg": float("nan")}, "hfov_deg=nan"),
    ({"seed": -1}, "seed=-1 must be an integer in [0, 2^32)"),
])
def test_each_field_of_a_videos_manifest_entry_is_checked(tmp_path, change, needle):
    from evaluate.external import ManifestError

    with pytest.raises(ManifestError) as exc:
        _checked(tmp_path, {**ENTRY, **change})
    assert f"manifest.json: entry 0: " in str(exc.value) and needle in str(exc.value), str(exc.value)


@pytest.mark.parametrize("change", [{"num_frames": 2}, {"fps": 1e-3}, {"hfov_deg": 1.5}, {"hfov_deg": 178.5},
                                    {"seed": 0}, {"hfov_deg": 90}])
def test_the_edges_of_each_field_are_accepted(tmp_path, change):
    e = _checked(tmp_path, {**ENTRY, **change})
    assert e["_src"] == (tmp_path / "a.mp4").resolve() and e["model"] == "external" and e["context"] == "native"
    assert all(e[k] == v for k, v in change.items())


def test_an_unknown_case_names_the_first_eight_known_and_says_when_there_are_more(tmp_path):
    from evaluate.external import ManifestError

    eight = {f"c{i}": object() for i in range(8)}
    with pytest.raises(ManifestError, match=r"is not in the case set \(c0, c1, c2, c3, c4, c5, c6, c7\);"):
        _checked(tmp_path, {**ENTRY, "case_id": "x"}, eight)
    with pytest.raises(ManifestError, match=r"is not in the case set \(c0, c1, c2, c3, c4, c5, c6, c7, \.\.\.\);"):
        _checked(tmp_path, {**ENTRY, "case_id": "x"}, {**eight, "c8": object()})


@functools.cache
def _ext_cases():
    """The case selection of ``run=ext`` (composed once: a frozen model)."""
    from harness.cases import CaseSelection
    from tests.support import compose

    return CaseSelection.from_dict(compose(["run=ext"])["cases"])


def _plan(videos, entries, name="manifest.json"):
    from evaluate.external import check_import

    (videos / name).write_text(entries if isinstance(entries, str) else json.dumps(entries))
    return check_import(videos, videos / name, _ext_cases())


def test_a_jsonl_manifest_is_read_line_by_line_and_its_errors_name_the_line(videos):
    """The fast twin of test_a_jsonl_manifest_error_names_its_line: an entry of a ``manifest.jsonl`` named by its
    line (blank lines count), a line that is not JSON named as ``<file>:<line>``, an entry's own error as ``line
    <n>``."""
    from evaluate.external import ManifestError

    lines = "\n" + json.dumps(ENTRY) + "\n"
    assert [(p.where, p.src.name) for p in _plan(videos, lines, "manifest.jsonl")] == [("line 2", "a.mp4")]
    with pytest.raises(ManifestError, match=r"manifest\.jsonl:2"):
        _plan(videos, json.dumps(ENTRY) + "\n{oops\n", "manifest.jsonl")
    with pytest.raises(ManifestError, match="line 1: fps=0"):
        _plan(videos, json.dumps({**ENTRY, "fps": 0}) + "\n", "manifest.jsonl")


def test_a_case_id_that_is_not_a_string_is_named_not_a_crash(videos):
    from evaluate.external import ManifestError

    with pytest.raises(ManifestError, match=r"case_id \['environment_rocket'\] is not in the case set"):
        _plan(videos, [{**ENTRY, "case_id": ["environment_rocket"]}])


def test_any_positive_rate_is_a_rate_and_the_tolerance_is_inclusive(videos):
    """A time-lapse at 1 fps is checked against the manifest like 16 fps; at 1000 fps a manifest saying 1001 is
    exactly FPS_TOLERANCE off (1e-3 x 1000 is 1.0 in floating point): still the video's rate."""
    from evaluate.external import ManifestError
    from harness.video import VideoWriter, read_frames

    _, frames = read_frames(videos / "a.mp4")
    for name, fps in (("slow.mp4", 1.0), ("fast.mp4", 1000.0)):
        w = VideoWriter(videos / name, fps=fps)
        for f in frames:
            w.write(f)
        w.close()
    (p,) = _plan(videos, [{**ENTRY, "video": "slow.mp4", "fps": 1}])
    assert p.info["fps"] == 1 and p.path.fps == 1
    (p,) = _plan(videos, [{**ENTRY, "video": "fast.mp4", "fps": 1001}])
    assert p.info["fps"] == 1000 and p.path.fps == 1001
    with pytest.raises(ManifestError, match="is 1000 fps, the manifest says fps=1001.01"):
        _plan(videos, [{**ENTRY, "video": "fast.mp4", "fps": 1001.01}])


def test_the_frame_rate_may_differ_by_the_tolerance_and_the_view_follows_hfov(videos):
    """The manifest's fps may differ from the video's by FPS_TOLERANCE of it, no more; the camera path's intrinsics
    are the case image's at ``hfov_deg`` (60 when left out), carried to the video's size."""
    from evaluate.external import FPS_TOLERANCE, ManifestError
    from harness.cases import Case, load_case_set
    from trajectories.conventions import intrinsics_for_resize_crop

    inside = 16 * (1 + 0.9 * FPS_TOLERANCE)
    (p,) = _plan(videos, [{**ENTRY, "fps": inside}])
    with pytest.raises(ManifestError, match="is 16 fps, the manifest says fps="):
        _plan(videos, [{**ENTRY, "fps": 16 * (1 + 1.1 * FPS_TOLERANCE)}])
    with pytest.raises(ManifestError, match="is 16 fps, the manifest says fps="):
        _plan(videos, [{**ENTRY, "fps": 16 * (1 - 1.1 * FPS_TOLERANCE)}])
    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    img = case.load_image()
    size = (p.info["height"], p.info["width"])
    asked = []
    real = Case.intrinsics_matrix

    def recording(self, height, width, default_hfov_deg):
        asked.append((height, width, default_hfov_deg))
        return real(self, height, width, default_hfov_deg)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Case, "intrinsics_matrix", recording)
        for hfov, given in ((60.0, {}), (90.0, {"hfov_deg": 90})):
            asked.clear()
            (q,) = _plan(videos, [{**ENTRY, **given}])
            assert asked == [(img.shape[0], img.shape[1], hfov)]  # the manifest's FoV, else 60, is the default
            want = intrinsics_for_resize_crop(real(case, img.shape[0], img.shape[1], hfov), img.shape[:2], size)
            np.testing.assert_allclose(q.path.K, want, rtol=1e-12)


def test_imported_videos_become_items_with_their_camera_video_record_and_manifest_row(videos, tmp_path):
    from evaluate.external import import_videos
    from harness.io import sha256_file
    from harness.outputs import RunDir

    planned = _plan(videos, [ENTRY, {**ENTRY, "video": "b.mp4", "seed": 3}])
    run = RunDir.for_name(tmp_path / "outputs", "ext")
    assert import_videos(videos, videos / "manifest.json", run, planned) == run.path
    rows = [json.loads(x) for x in (run.path / "manifest.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in rows) == sorted(p.item.key for p in planned)
    for p in planned:
        d = run.item_dir(p.item)
        assert sha256_file(d / "video.mp4") == sha256_file(p.src)
        meta = json.loads((d / "meta.json").read_text())
        assert meta["video"]["sha256"] == sha256_file(p.src) and meta["video"]["size"] == p.src.stat().st_size
        assert meta["source"] == {"video": str(p.src), "manifest": str(videos / "manifest.json")}
        from trajectories import load_path

        np.testing.assert_array_equal(load_path(d / "camera.npz").c2w, p.path.c2w)
