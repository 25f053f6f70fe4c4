"""An imported release as a run: what its items are scored on, the camera path of a video that does not follow its
preset, ``verify`` of it, and the report's release section (issue 41 items 4 and 6, issue 44's verify)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from evaluate.release.importer import ReleaseOptions, import_release
from evaluate.release.miniature import MiniRow, png_bytes, video_path, write_rows
from tests.evaluate.release.footage import RotationLayout, Sweep, rotation_video, write_video

pytest.importorskip("pyarrow")


def _plain(path: Path, frames: int = 120) -> Path:
    from harness.video import VideoWriter

    rng = np.random.default_rng(frames)
    w = VideoWriter(path, fps=16)
    for _ in range(frames):
        w(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    w.close()
    return path


def _place(src: Path, rel: str, video: Path) -> str:
    (src / rel).parent.mkdir(parents=True, exist_ok=True)
    (src / rel).write_bytes(video.read_bytes())
    return rel


def _camera_release(d: Path) -> Path:
    """A release with an environment video and its camera row, a camera row alone on another environment video,
    and a translation video, imported (without measuring: the semantics do not depend on it) to ``d/run``."""
    v = _plain(d / "v.mp4", 120)
    src = d / "release"
    img = png_bytes(np.full((48, 64, 3), 80, np.uint8))
    env0 = _place(src, video_path("environment", "evoke", "lrlr_sym_0p75dpf", "case_010"), v)
    env1 = _place(src, video_path("environment", "evoke", "lrlr_sym_0p75dpf", "case_011"), v)
    sq = _place(src, video_path("camera_translation", "evoke", "translate_square", "case_001"), v)
    write_rows(src, [MiniRow("evoke", "environment", "lrlr_sym_0p75dpf", "case_010", env0, img),
                     MiniRow("evoke", "camera_rotation", "lrlr_sym_0p75dpf", "case_008", env0, img),
                     MiniRow("evoke", "camera_rotation", "lrlr_sym_0p75dpf", "case_009", env1, img),
                     MiniRow("evoke", "camera_translation", "translate_square", "case_001", sq, img)])
    s = import_release(ReleaseOptions(src, measure=False), d / "run", progress=False)
    assert s.imported == 3 and s.camera_rows == 3 and s.camera_items == 2
    return d / "run"


@pytest.fixture(scope="module")
def camera_run(tmp_path_factory) -> Path:
    return _camera_release(tmp_path_factory.mktemp("camera"))


def test_camera_following_rows_never_reach_the_memory_metrics(camera_run):
    """The environment video a camera row reuses is scored once, as environment memory and camera following; a
    video only camera rows play (a translation square, an environment video without its own row) is scored for
    camera following and video quality only: no memory computation applies to it, and no memory value of it
    enters an aggregate."""
    from evaluate.catalog import REGISTRY, scores_case
    from evaluate.config import EvalConfig
    from evaluate.families import all_families
    from evaluate.item import load_item

    ecfg = EvalConfig()
    applies = {}
    for meta_path in sorted(camera_run.rglob("meta.json")):
        item = load_item(meta_path.parent, ecfg)
        applies[meta_path.parent.name] = (item.family, {s.id for f in all_families() for s in f.metrics
                                                         if s.applies(item, ecfg)})
    env_family, env_ids = applies["environment_case_010"]
    assert env_family == "environment" and "environment.visible" in env_ids and "camera.rpe_rot" in env_ids
    memory = {s.id for s in REGISTRY if s.memory}
    assert {"environment.visible", "departure.visible", "diagnostic.revisit_psnr"} <= memory
    for case in ("environment_case_011", "camera_translation_case_001"):
        family, ids = applies[case]
        assert family == "camera", case
        assert not ids & memory, (case, ids & memory)
        assert {"camera.rpe_rot", "camera.rpe_trans"} & ids, ids
    assert not scores_case("environment.visible[pixel-thumb16]", "camera")
    assert scores_case("camera.rpe_rot[classical-opencv]", "camera")
    assert scores_case("environment.visible[pixel-thumb16]", "environment")


@pytest.fixture(scope="module")
def off_preset(tmp_path_factory) -> tuple[Path, dict]:
    """An LR-Hold video whose layout is not the preset's (a 12-frame hold, a 70-degree eased sweep at 1 degree a
    frame), rendered outside the harness, imported with the measurement on."""
    d = tmp_path_factory.mktemp("off")
    truth = RotationLayout((Sweep("yaw", -70.0, 70, "eased"), Sweep("yaw", 70.0, 70, "eased")), 12, 200)
    frames, _ = rotation_video(truth, hfov_deg=70.0, size=(96, 160), seed=7)
    video = write_video(d / "v.mp4", frames)
    src = d / "release"
    rel = _place(src, video_path("dynamic_memory", "yume", "lr_hold_sym_0p5dpf", "case_004"), video)
    write_rows(src, [MiniRow("yume", "dynamic_memory", "lr_hold_sym_0p5dpf", "case_004", rel, png_bytes(frames[0]))])
    s = import_release(ReleaseOptions(src), d / "run", progress=False)
    assert s.imported == 1 and s.flagged == 1
    return d / "run", json.loads(next((d / "run").rglob("meta.json")).read_text())


def test_an_off_preset_video_is_imported_flagged_and_scored_on_its_measured_phases(off_preset):
    run, meta = off_preset
    rel = meta["release"]
    assert rel["camera"] == "measured layout" and meta["camera"]["params"]["source"] == "measured"
    problems = rel["check"]["problems"]
    assert any(p.startswith("initial hold 12 frames") for p in problems), problems
    assert any("profile eased" in p for p in problems), problems
    amp = [float(p.split()[2]) for p in problems if p.startswith("D1 amplitude")]
    assert len(amp) == 1 and abs(amp[0] - 70.0) < 1.5, problems
    # the phases the evaluation reads are the video's own: 12 held, 70 away, 70 back
    assert meta["camera"]["phases"]["V"] == [0, 13] and meta["camera"]["phases"]["D1"] == [13, 83]
    assert meta["camera"]["phases"]["R1"] == [83, 153]
    m = rel["measurement"]
    assert abs(m["hfov_deg"] - 70.0) < 1.0 and m["hfov_source"] == "estimated"
    check = json.loads((run / "release" / "check.json").read_text())
    g = check["groups"][0]
    assert g["matching"] == 0 and "yaw_deg: 70" in g["implied_yaml"]
    # release check reuses the import's measurement (same numbers, nothing measured again)
    from evaluate.release.check import check_run

    again = check_run(run, progress=False)
    assert again["videos"][0]["measured"] == check["videos"][0]["measured"]


def test_verify_checks_an_imported_release(tmp_path, monkeypatch, capsys):
    """``python -m harness verify run=<name>`` on an imported release: every item passes; a release file replaced
    behind the import fails its item's provenance, naming the fix."""
    from harness.app.verify import verify_run
    from tests.support import compose
    from tests.support.cli import in_process_cli

    out = _camera_release(tmp_path).parent
    report = verify_run({**compose([]), "run": "run", "output_root": str(out)})
    assert report.ok and len(report.items) == 3, report.table()
    assert "3/3 item(s) deliverable" in report.table()
    meta = json.loads(next((out / "run").rglob("camera_translation_case_001/meta.json")).read_text())
    src = Path(meta["source"]["video"])
    data = src.read_bytes()
    src.unlink()
    src.write_bytes(data)  # another file with the same bytes: not the file the item links
    os.utime(src, ns=(meta["release"]["video"]["mtime_ns"], meta["release"]["video"]["mtime_ns"]))
    res = in_process_cli(monkeypatch, tmp_path, capsys)("verify", "run=run", f"output_root={out}")
    assert res.code == 1 and "2/3 item(s) deliverable" in res.out
    assert "the release's file changed since the import (ino); rerun release import" in res.out, res.out


def test_the_report_counts_the_import_and_shows_layout_against_preset(off_preset, camera_run):
    from evaluate.reporting.release import release_html

    html = release_html([camera_run, off_preset[0]])
    assert "4 row(s) read" in html and "3 video(s) imported" in html and "3 camera-following row(s)" in html
    assert "2 video(s) scored for camera following only" in html and "0 row(s) skipped" in html
    assert "lr_hold_sym_0p5dpf" in html and "measured" in html and "preset" in html
    assert "Inference" in html or "inference" in html
