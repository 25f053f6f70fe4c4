"""Reading the official release (docs/release.md): a miniature in the documented layout imports and evaluates.

The miniature follows the release's published layout (evaluate/release/layout.py cites it): parquet rows with the
seven viewer columns, ``first_frame`` as ``datasets`` stores an image, videos at
``[data/]<category>/<model>/<trajectory>/<case>/video.mp4``, camera rows pointing at environment videos, an
unknown model id and a missing video. Hostile rows: tests/evaluate/release/test_import_hostile.py; the layout
measurement: tests/evaluate/release/test_measure.py and test_check.py.
"""

from __future__ import annotations

import json
import os
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
            "lrlrlr_sym_1dpf": _video(d / "lrlrlr.mp4", 493, seed=2),
            "lr_hold_sym_0p5dpf": _video(d / "hold.mp4", 493, seed=3),
            "translate_square": _video(d / "square.mp4", 493, seed=4)}


def _opts(src: Path, **kw) -> ReleaseOptions:
    return ReleaseOptions(src, measure=kw.pop("measure", False), **kw)


def test_url_and_paths_follow_the_published_layout(tmp_path):
    url = ("https://huggingface.co/datasets/rescuerz/WorldMemBench/resolve/main/environment/dreamx-world/"
           "lrlr_sym_0p75dpf/case_000/video.mp4")
    rel = video_relpath(url)
    assert rel == "environment/dreamx-world/lrlr_sym_0p75dpf/case_000/video.mp4"
    assert video_relpath(url + "?download=true#x") == rel
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
    # only a regular file inside the release: never a FIFO, never a link that leaves it
    fifo = tmp_path / "data" / "environment" / "fifo.mp4"
    os.mkfifo(fifo)
    assert local_video(tmp_path, "data/environment/fifo.mp4") is None
    outside = tmp_path.parent / f"{tmp_path.name}-outside.mp4"
    outside.write_bytes(b"x")
    (tmp_path / "data" / "environment" / "out.mp4").symlink_to(outside)
    assert local_video(tmp_path, "data/environment/out.mp4") is None


def test_model_ids_in_every_spelling_and_release_models_first():
    known = ["dreamx", "evoke", "lingbot_v2", "yume", "reference", "matrix_game35", "matrix_game3"]
    assert harness_model("lingbot-v2", {}, known) == "lingbot_v2"  # seen in the examples
    assert harness_model("LingBot_V2", {}, known) == "lingbot_v2"
    assert harness_model("dreamx-world", {}, known) == "dreamx"  # seen in the dataset
    assert harness_model("Matrix-Game-3.5", {}, known) == "matrix_game35"  # inferred, any spelling
    assert harness_model("matrix_game_3", {}, known) == "matrix_game3"
    assert harness_model("yume", {}, known) == "yume"
    assert harness_model("mystery-model", {}, known) is None
    assert harness_model("Mystery_Model", {"mystery-model": "reference"}, known) == "reference"
    assert harness_model("evoke", {"Evoke": "reference"}, known) == "reference"  # the user's entry wins


def test_release_models_works_as_the_docs_write_it(tmp_path):
    """``release.models='{my-model: reference}'`` on the command line (the shell drops the quotes) and the same
    value as a quoted string both give the mapping."""
    from tests.support import compose

    from evaluate.release.plan import ReleaseSettings

    cfg = compose(["release.models={my-model: reference, Matrix-Game-3.5: matrix_game35}", f"source={tmp_path}"])
    opts = ReleaseOptions.of(cfg["source"], ReleaseSettings.from_dict(cfg["release"]))
    assert opts.models == {"my-model": "reference", "Matrix-Game-3.5": "matrix_game35"}
    quoted = compose(["release.models='{my-model: reference}'", f"source={tmp_path}"])
    assert ReleaseSettings.from_dict(quoted["release"]).models == {"my-model": "reference"}
    with pytest.raises(Exception, match="release.models"):
        ReleaseSettings.from_dict({"models": "[a, b]"})
    for key, bad in (("workers", 0), ("max_rows", True), ("measure", "yes"), ("limit", -1)):
        with pytest.raises(Exception, match=f"release.{key}="):
            ReleaseSettings.from_dict({key: bad})


@pytest.mark.parametrize("examples", [False, True], ids=["dataset-layout", "examples-layout"])
def test_miniature_imports_with_one_line_per_problem(tmp_path, videos, examples):
    src = tmp_path / "release"
    rows = miniature(src, videos, models=("dreamx-world", "lingbot-v2"), cases=2, examples=examples)
    run = tmp_path / "run"
    summary = import_release(_opts(src), run, progress=False)
    cameras = sum(r.category in ("camera_rotation", "camera_translation") for r in rows)
    # every row is counted once: kept on an item, a duplicate, or skipped with its problem
    assert summary.rows == len(rows) == summary.kept_rows + summary.duplicate_rows + summary.skipped_rows()
    assert summary.camera_rows == cameras > 0
    # 2 models x 2 cases x 4 presets, the camera rows share their environment video: one item each
    assert summary.videos == summary.imported == 16
    assert set(summary.problems) == {"unknown model id", "missing video"}
    assert list(summary.problems["unknown model id"]) == [
        "'mystery-model' (map it: release.models='{mystery-model: <model>}')"]
    lines = summary.lines()
    assert sum("unknown model id: 'mystery-model'" in x for x in lines) == 1
    assert sum("missing video: " in x and "case_099" in x for x in lines) == 1
    metas = [json.loads(p.read_text()) for p in run.rglob("meta.json")]
    assert len(metas) == 16
    shared = [m for m in metas if "camera_rotation" in m["release"]["categories"]]
    assert len(shared) == 2 * 2 * 2  # environment videos of the two rotation presets
    for m in shared:  # scored once, as the environment video it is, the camera row riding along
        assert {r["category"] for r in m["release"]["rows"]} == {"environment", "camera_rotation"}
        assert m["case"]["id"].startswith("environment_case_")  # the video's own case, not the camera row's
        assert m["scored_as"] == "environment" and m["release"]["camera_following"]
        assert m["release"]["item_id"].split("/")[1] == "environment"  # keyed by the row made for the video
    by_traj = {m["item"]["trajectory"]: m for m in metas}
    assert by_traj["lr_hold_sym_0p5dpf"]["case"]["family"] == "dynamic"
    square = by_traj["translate_square"]
    assert square["scored_as"] == "camera" and square["release"]["categories"] == ["camera_translation"]
    assert summary.camera_items == 2 * 2  # the translation videos: camera following only
    assert {m["item"]["model"] for m in metas} == {"dreamx", "lingbot_v2"}
    assert {m["item"]["context"] for m in metas} == {"release"}
    # nothing copied: each item's video is the release's file, and its camera path has the video's frame count
    for p in run.rglob("video.mp4"):
        m = json.loads((p.parent / "meta.json").read_text())
        assert p.samefile(m["source"]["video"])
        with np.load(p.parent / "camera.npz") as z:
            assert len(z["c2w"]) == m["video"]["num_frames"]
    manifest = [json.loads(x) for x in (run / "manifest.jsonl").read_text().splitlines()]
    assert len(manifest) == 16 and all(r["status"] == "done" for r in manifest)
    from harness.cases import load_case_set

    cases = {c.id: c for c in load_case_set(run / "release" / "cases")}
    assert len(cases) == 2 + 2 + 2  # per case (shared by the models): environment, dynamic_memory, camera_translation
    assert cases["environment_case_000"].load_image().shape[:2] == (64, 96)


def test_a_video_off_the_presets_length_is_imported_and_flagged(tmp_path, videos):
    """493-frame LRLRLR videos (the paper's LingBot v2 count) are imported whatever the preset needs: a video
    too short for the preset is flagged with its length, never refused."""
    from evaluate.release.check import preset_spec

    src = tmp_path / "release"
    short = _video(tmp_path / "short.mp4", 200)
    img = png_bytes(np.zeros((64, 96, 3), np.uint8))
    rows = []
    for case, file in (("case_000", videos["lrlrlr_sym_1dpf"]), ("case_001", short)):
        rel = video_path("environment", "evoke", "lrlrlr_sym_1dpf", case)
        (src / rel).parent.mkdir(parents=True)
        (src / rel).write_bytes(file.read_bytes())
        rows.append(MiniRow("evoke", "environment", "lrlrlr_sym_1dpf", case, rel, img))
    write_rows(src, rows)
    summary = import_release(_opts(src), tmp_path / "run", progress=False)
    assert summary.imported == 2 and not summary.problems
    need = preset_spec("lrlrlr_sym_1dpf").min_frames()
    for p in (tmp_path / "run").rglob("meta.json"):
        m = json.loads(p.read_text())
        frames = m["video"]["num_frames"]
        with np.load(p.parent / "camera.npz") as z:
            assert len(z["c2w"]) == frames
        problems = m["release"]["check"]["problems"]
        assert any(f"{frames} frames, the preset needs {need}" in p for p in problems) == (frames < need), problems
    assert summary.flagged == sum(n < need for n in (493, 200))


def _replace_keeping_size_and_times(path: Path) -> None:
    """Replace ``path`` by another file of the same size and modification time (what a resume by size and time
    alone would take for the file it imported)."""
    st = path.stat()
    tmp = path.with_name(".swap")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_rerun_resumes_and_follows_the_release(tmp_path, videos):
    src = tmp_path / "release"
    miniature(src, {"lrlr_sym_0p75dpf": videos["lrlr_sym_0p75dpf"]}, cases=3, unknown_model=None, missing=False)
    run = tmp_path / "run"
    first = import_release(_opts(src), run, progress=False)
    assert (first.imported, first.unchanged) == (3, 0)
    again = import_release(_opts(src), run, progress=False)
    assert (again.imported, again.unchanged, again.removed) == (0, 3, 0)
    assert again.to_dict()["problems"] == first.to_dict()["problems"]
    # a video replaced by another file of the same size and modification time is imported again
    target = src / video_path("environment", "dreamx-world", "lrlr_sym_0p75dpf", "case_001")
    target.unlink()  # the miniature links one file under every name: give this one its own
    _video(target, 493, seed=9)
    assert import_release(_opts(src), run, progress=False).imported == 1
    _replace_keeping_size_and_times(target)
    third = import_release(_opts(src), run, progress=False)
    assert (third.imported, third.unchanged) == (1, 2)
    # a video gone from the release removes its item; the next run changes nothing
    gone = src / video_path("environment", "dreamx-world", "lrlr_sym_0p75dpf", "case_002")
    gone.unlink()
    fourth = import_release(_opts(src), run, progress=False)
    assert fourth.removed == 1 and fourth.unchanged == 2 and "missing video" in fourth.problems
    assert len(list(run.rglob("meta.json"))) == 2
    assert len((run / "manifest.jsonl").read_text().splitlines()) == 2
    fifth = import_release(_opts(src), run, progress=False)
    assert (fifth.imported, fifth.unchanged, fifth.removed) == (0, 2, 0)


def test_not_a_release_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "src").mkdir()
    with pytest.raises(ReleaseError, match="holds no .parquet file"):
        plan_release(_opts(tmp_path / "src"), ImportSummary())
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"model_id": ["x"]}), tmp_path / "src" / "x.parquet")
    with pytest.raises(ReleaseError, match=r"missing column\(s\) \['first_frame'"):
        import_release(_opts(tmp_path / "src"), tmp_path / "run", progress=False)
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
    import_release(_opts(src, overlay=overlay), run, progress=False)
    meta = json.loads(next(run.rglob("meta.json")).read_text())
    assert meta["case"]["prompt"] == "a rocket on its pad" and meta["case"]["hfov_deg"] == 75
    assert meta["case"]["image"].startswith("environment_case_000.")  # the release's first frame stays
    assert abs(meta["camera"]["params"]["hfov_deg"] - 75) < 1e-6  # the overlay's field of view, not 60
    (overlay / "broken.yaml").write_text("id: x\n")
    with pytest.raises(ReleaseError, match="release.overlay"):
        import_release(_opts(src, overlay=overlay), tmp_path / "run2", progress=False)
    assert not (tmp_path / "run2").exists()


@pytest.mark.slow
def test_cli_imports_and_evaluates_the_miniature(tmp_path, videos):
    """End to end through the CLI: import (measuring the videos), evaluate every metric the release's data allows,
    report; a rerun changes nothing; verify passes."""
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
    assert (run / "release" / "check.md").is_file()
    again = run_cli(["release", "import", f"source={src}", "run=rel", "progress=false"], tmp_path, timeout=900)
    assert again.returncode == 0 and "(0 written, 2 unchanged)" in again.stdout
    ver = run_cli(["verify", "run=rel"], tmp_path, timeout=300)
    assert ver.returncode == 0 and "2/2 item(s) deliverable" in ver.stdout, ver.stdout + ver.stderr


def test_bad_release_settings_exit_2_with_the_field(tmp_path, monkeypatch, capsys):
    from tests.support.cli import in_process_cli

    cli = in_process_cli(monkeypatch, tmp_path, capsys)
    r = cli("release", "import", "run=rel")
    assert r.code == 2 and "source=<dir>" in r.err
    r = cli("release", "import", f"source={tmp_path}", "release.limit=0", "run=rel")
    assert r.code == 2 and "release.limit=0" in r.err
    r = cli("release", "import", f"source={tmp_path}", "release.limt=3", "run=rel")
    assert r.code == 2 and "release.limt" in r.err
    assert not (tmp_path / "outputs").exists()
