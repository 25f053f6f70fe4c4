"""Reading the official release (docs/release.md): a miniature in the documented layout imports and evaluates.

The miniature follows the release's published layout (evaluate/release/layout.py cites it): parquet rows with the
seven viewer columns, ``first_frame`` as ``datasets`` stores an image, videos at
``[data/]<category>/<model>/<trajectory>/<case>/video.mp4``, camera rows pointing at environment videos, an
unknown model id and a missing video.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evaluate.release.importer import ImportSummary, ReleaseOptions, import_release, plan_release
from evaluate.release.layout import ReleaseError, harness_model, local_video, parse_video_ref, video_relpath
from evaluate.release.miniature import MiniRow, miniature, png_bytes, video_path, write_rows
from tests.support import run_cli

pytest.importorskip("pyarrow")


def _video(path: Path, frames: int, size=(64, 96), seed: int = 0) -> Path:
    """A small H.264 video: a seeded texture panning right one pixel a frame (decodes; content is not scored)."""
    from harness.video import VideoWriter

    rng = np.random.default_rng(seed)
    tex = rng.integers(0, 255, (size[0], size[1] + frames, 3), dtype=np.uint8)
    w = VideoWriter(path, fps=16)
    for i in range(frames):
        w(np.ascontiguousarray(tex[:, i:i + size[1]]))
    w.close()
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("videos")
    return {"lrlr_sym_0p75dpf": _video(d / "lrlr.mp4", 493, seed=1),
            "lrlrlr_sym_1dpf": _video(d / "lrlrlr.mp4", 541, seed=2),
            "lr_hold_sym_0p5dpf": _video(d / "hold.mp4", 493, seed=3),
            "translate_square": _video(d / "square.mp4", 493, seed=4)}


def test_url_and_paths_follow_the_published_layout(tmp_path):
    url = ("https://huggingface.co/datasets/rescuerz/WorldMemBench/resolve/main/environment/dreamx-world/"
           "lrlr_sym_0p75dpf/case_000/video.mp4")
    rel = video_relpath(url)
    assert rel == "environment/dreamx-world/lrlr_sym_0p75dpf/case_000/video.mp4"
    ref = parse_video_ref("data/" + rel)  # the examples' prefix
    assert (ref.category, ref.model_id, ref.trajectory, ref.case_id) == ("environment", "dreamx-world",
                                                                        "lrlr_sym_0p75dpf", "case_000")
    assert parse_video_ref("elsewhere/video.mp4") is None
    (tmp_path / "data" / Path(rel).parent).mkdir(parents=True)
    (tmp_path / "data" / rel).write_bytes(b"x")
    # the examples' tree found from its root (with data/) and from inside data/ (without)
    assert local_video(tmp_path, "data/" + rel) == tmp_path / "data" / rel
    assert local_video(tmp_path, rel) == tmp_path / "data" / rel
    assert local_video(tmp_path / "data", "data/" + rel) == tmp_path / "data" / rel
    assert local_video(tmp_path, "../outside/video.mp4") is None


def test_model_ids_seen_inferred_and_mapped():
    known = ["dreamx", "evoke", "lingbot_v2", "yume", "reference"]
    assert harness_model("lingbot-v2", {}, known) == "lingbot_v2"  # seen in the examples
    assert harness_model("dreamx-world", {}, known) == "dreamx"  # seen in the dataset
    assert harness_model("yume", {}, known) == "yume"  # inferred
    assert harness_model("mystery-model", {}, known) is None
    assert harness_model("mystery-model", {"mystery-model": "reference"}, known) == "reference"


@pytest.mark.parametrize("examples", [False, True], ids=["dataset-layout", "examples-layout"])
def test_miniature_imports_with_one_line_per_problem(tmp_path, videos, examples):
    src = tmp_path / "release"
    rows = miniature(src, videos, models=("dreamx-world", "lingbot-v2"), cases=2, examples=examples)
    run = tmp_path / "run"
    summary = import_release(ReleaseOptions(src), run, progress=False)
    cameras = sum(r.category in ("camera_rotation", "camera_translation") for r in rows)
    assert summary.rows == len(rows) and summary.camera_rows == cameras > 0
    # 2 models x 2 cases x 4 presets, the camera rows share their environment video: one item each
    assert summary.videos == summary.imported == 16
    assert set(summary.problems) == {"unknown model id", "missing video"}
    assert list(summary.problems["unknown model id"]) == [
        "'mystery-model' (map it: release.models='{mystery-model: <model>}')"]
    lines = summary.lines()
    assert any("unknown model id: 'mystery-model'" in x for x in lines)
    assert any("missing video: " in x and "case_099" in x for x in lines)
    metas = [json.loads(p.read_text()) for p in run.rglob("meta.json")]
    assert len(metas) == 16
    shared = [m for m in metas if "camera_rotation" in m["release"]["categories"]]
    assert len(shared) == 2 * 2 * 2  # environment videos of the two rotation presets
    assert sum(m["release"]["camera_following"] for m in metas) == len(shared) + 2 * 2  # + the square's
    for m in shared:
        cats = {r["category"] for r in m["release"]["rows"]}
        assert cats == {"environment", "camera_rotation"}
        assert m["case"]["id"].startswith("environment_case_")  # the video's own case, not the camera row's
    by_traj = {m["item"]["trajectory"]: m for m in metas}
    assert by_traj["lr_hold_sym_0p5dpf"]["case"]["family"] == "dynamic"
    assert by_traj["translate_square"]["case"]["family"] == "environment"
    assert {m["item"]["model"] for m in metas} == {"dreamx", "lingbot_v2"}
    assert {m["item"]["context"] for m in metas} == {"release"}
    # nothing copied: each item's video is the release's file, and its camera path has the video's frame count
    for p in run.rglob("video.mp4"):
        m = json.loads((p.parent / "meta.json").read_text())
        assert p.samefile(m["release"]["video"]["file"])
        with np.load(p.parent / "camera.npz") as z:
            assert len(z["c2w"]) == m["video"]["num_frames"]
    manifest = [json.loads(x) for x in (run / "manifest.jsonl").read_text().splitlines()]
    assert len(manifest) == 16 and all(r["status"] == "done" for r in manifest)
    # the first frames became a case set the harness can run its own models on
    from harness.cases import load_case_set

    cases = {c.id: c for c in load_case_set(run / "release" / "cases")}
    assert len(cases) == 2 + 2 + 2  # per case (shared by the models): environment, dynamic_memory, camera_translation
    img = cases["environment_case_000"].load_image()
    assert img.shape[:2] == (64, 96)


def test_rerun_is_resumable_and_redoes_a_replaced_video(tmp_path, videos):
    src = tmp_path / "release"
    miniature(src, {"lrlr_sym_0p75dpf": videos["lrlr_sym_0p75dpf"]}, cases=2, unknown_model=None, missing=False)
    run = tmp_path / "run"
    first = import_release(ReleaseOptions(src), run, progress=False)
    assert (first.imported, first.unchanged) == (2, 0)
    again = import_release(ReleaseOptions(src), run, progress=False)
    assert (again.imported, again.unchanged) == (0, 2)
    # a video replaced in the release is imported again
    target = src / video_path("environment", "dreamx-world", "lrlr_sym_0p75dpf", "case_001")
    target.unlink()
    _video(target, 493, seed=9)
    third = import_release(ReleaseOptions(src), run, progress=False)
    assert (third.imported, third.unchanged) == (1, 1)


def test_undecodable_and_too_short_videos_are_named_and_the_rest_goes_on(tmp_path, videos):
    src = tmp_path / "release"
    short = _video(tmp_path / "short.mp4", 200)
    img = png_bytes(np.zeros((64, 96, 3), np.uint8))
    rows = []
    for case, file in (("case_000", videos["lrlr_sym_0p75dpf"]), ("case_001", short), ("case_002", None)):
        rel = video_path("environment", "evoke", "lrlr_sym_0p75dpf", case)
        (src / rel).parent.mkdir(parents=True)
        if file is None:
            (src / rel).write_bytes(b"not a video at all")
        else:
            (src / rel).write_bytes(file.read_bytes())
        rows.append(MiniRow("evoke", "environment", "lrlr_sym_0p75dpf", case, rel, img))
    rows.append(MiniRow("evoke", "environment", "zigzag_2dpf", "case_003", rows[0].video, img))
    rows.append(MiniRow("evoke", "sky", "lrlr_sym_0p75dpf", "case_004", rows[0].video, img))
    write_rows(src, rows)
    summary = import_release(ReleaseOptions(src), tmp_path / "run", progress=False)
    assert summary.imported == 1
    assert set(summary.problems) == {"undecodable video", "trajectory does not fit", "unknown trajectory",
                                     "unknown category"}
    fit = next(iter(summary.problems["trajectory does not fit"]))
    assert "200 frames" in fit and "481" in fit


def test_not_a_release_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "src").mkdir()
    with pytest.raises(ReleaseError, match="holds no .parquet file"):
        plan_release(ReleaseOptions(tmp_path / "src"), ImportSummary())
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"model_id": ["x"]}), tmp_path / "src" / "x.parquet")
    with pytest.raises(ReleaseError, match=r"missing column\(s\) \['first_frame'"):
        import_release(ReleaseOptions(tmp_path / "src"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_overlay_adds_what_the_release_lacks(tmp_path, videos):
    src = tmp_path / "release"
    miniature(src, {"lrlr_sym_0p75dpf": videos["lrlr_sym_0p75dpf"]}, cases=1, unknown_model=None, missing=False)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "environment_case_000.yaml").write_text(
        "id: environment_case_000\nfamily: environment\nimage: skimage://rocket\nprompt: a rocket on its pad\n"
        "hfov_deg: 75\n")
    run = tmp_path / "run"
    import_release(ReleaseOptions(src, overlay=overlay), run, progress=False)
    meta = json.loads(next(run.rglob("meta.json")).read_text())
    assert meta["case"]["prompt"] == "a rocket on its pad" and meta["case"]["hfov_deg"] == 75
    assert meta["case"]["image"].startswith("environment_case_000.")  # the release's first frame stays


@pytest.mark.slow
def test_cli_imports_and_evaluates_the_miniature(tmp_path, videos):
    """End to end through the CLI: import, evaluate every metric the release's data allows, report; a rerun
    changes nothing."""
    src = tmp_path / "release"
    miniature(src, {k: videos[k] for k in ("lrlr_sym_0p75dpf", "lr_hold_sym_0p5dpf")}, cases=1)
    r = run_cli(["release", "import", f"source={src}", "run=rel", "progress=false"], tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "unknown model id: 'mystery-model'" in r.stdout and "missing video" in r.stdout
    run = tmp_path / "outputs" / "rel"
    metrics = list(run.rglob("metrics.json"))
    assert len(metrics) == 2
    m = json.loads(metrics[0].read_text())
    assert any(v.get("status") == "computed" for v in m["metrics"].values()), m["metrics"]
    assert (run / "eval" / "report" / "index.html").is_file()
    again = run_cli(["release", "import", f"source={src}", "run=rel", "progress=false"], tmp_path, timeout=900)
    assert again.returncode == 0 and "0 item(s) written, 2 unchanged" in again.stdout


def test_bad_release_settings_exit_2_with_the_field(tmp_path):
    r = run_cli(["release", "import", "run=rel"], tmp_path)
    assert r.returncode == 2 and "source=<dir>" in r.stderr
    r = run_cli(["release", "import", f"source={tmp_path}", "release.limit=0", "run=rel"], tmp_path)
    assert r.returncode == 2 and "release.limit=0" in r.stderr
    r = run_cli(["release", "import", f"source={tmp_path}", "release.limt=3", "run=rel"], tmp_path)
    assert r.returncode == 2 and "release.limt" in r.stderr
    assert not (tmp_path / "outputs").exists()


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    """Reference-model videos of the four rotation presets and of the harness's own (cosine) LRLR, small."""
    d = tmp_path_factory.mktemp("refrun")
    r = run_cli(["model=reference", "trajectories=[lrlr_sym_0p75dpf,lrud_sym_0p75dpf,lrlrlr_sym_1dpf,"
                 "lr_hold_sym_0p5dpf,lrlr]", "cases.include=[environment_rocket,dynamic_cat]", "model.height=192",
                 "model.width=320", "stage=generate", "run=ref", "progress=false"], d, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return d / "outputs" / "ref"


@pytest.mark.slow
def test_check_recovers_each_presets_speed_and_amplitude(reference_run):
    from evaluate.release.check import check_run

    result = check_run(reference_run, progress=False)
    by = {(v["trajectory"], v["key"].split("/")[-1]): v for v in result["videos"]}
    presets = {"lrlr_sym_0p75dpf": 0.75, "lrud_sym_0p75dpf": 0.75, "lrlrlr_sym_1dpf": 1.0, "lr_hold_sym_0p5dpf": 0.5}
    for (traj, case), v in by.items():
        if traj not in presets:
            continue
        assert v["matches"], v
        for phase, s in v["speeds"].items():
            assert abs(s - presets[traj]) <= 0.05 * presets[traj], (traj, phase, s)
        assert all(abs(a - 90.0) <= 3.0 for a in v["amplitudes"]), v
        assert v["final_hold"] == v["preset_final_hold"]
    assert {t for t, _ in by} >= set(presets)
    assert (reference_run / "release" / "check.md").is_file()
    # the field of view comes from the videos themselves (the release publishes none): the true one within 1 deg
    from trajectories import load_path

    for v in result["videos"]:
        path = load_path(reference_run / v["key"] / "camera.npz")
        true = np.degrees(2 * np.arctan(path.width / 2 / path.K[0, 0]))
        assert v["hfov_estimated"] and abs(v["hfov_deg"] - true) < 1.0, (v["key"], v["hfov_deg"], true)


@pytest.mark.slow
def test_check_flags_a_video_made_with_another_preset(reference_run, tmp_path):
    """The harness's cosine LRLR published under the release's name: the check says it differs."""
    from evaluate.release.check import check_run

    made = next(reference_run.rglob("lrlr/environment_rocket/video.mp4"))
    right = next(reference_run.rglob("lrlr_sym_0p75dpf/environment_rocket/video.mp4"))
    src = tmp_path / "release"
    img = png_bytes(np.zeros((192, 320, 3), np.uint8))
    rows = []
    for case, video in (("case_000", right), ("case_001", made)):
        rel = video_path("environment", "evoke", "lrlr_sym_0p75dpf", case)
        (src / rel).parent.mkdir(parents=True)
        (src / rel).write_bytes(video.read_bytes())
        rows.append(MiniRow("evoke", "environment", "lrlr_sym_0p75dpf", case, rel, img))
    write_rows(src, rows)
    import_release(ReleaseOptions(src), tmp_path / "run", progress=False)
    result = check_run(tmp_path / "run", progress=False)
    by = {v["key"].split("/")[-1]: v for v in result["videos"]}
    assert by["environment_case_000"]["matches"]
    bad = by["environment_case_001"]
    assert not bad["matches"] and any("speed" in p for p in bad["problems"])
    assert any("final hold" in p for p in bad["problems"])
    from evaluate.release.check import verdict_lines

    assert any("1 of 2 video(s) differ" in line for line in verdict_lines(result))
