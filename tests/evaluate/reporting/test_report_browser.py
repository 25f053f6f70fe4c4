"""The HTML report in a real headless Chromium: videos load with durations, tables render and sort, no console
error; a screenshot is saved (pytest tmp dir, copied to outputs/test-artifacts/report_screenshot.png).

Skips cleanly without playwright or a Chromium executable (.ci/run installs both)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluate.reporting.browser import find_chromium
from tests.support import ROOT

pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_chromium() is None,
                                                   reason="no Chromium executable (apt-get install chromium)")]


def test_report_page_in_headless_chromium(tmp_path):
    from evaluate.reporting import build_report
    from evaluate.reporting.browser import check_page, problems
    from tests.support.report_data import make_run

    run = make_run(tmp_path, models=("evoke", "lingbot_v2"), contexts=("fullkv", "fov"),
                   trajectories=("lrlr", "lrlrlr"), cases=1, seeds=(1,))
    out = build_report([run])
    shot = tmp_path / "report_screenshot.png"
    info = check_page(Path(out["html"]), shot)
    assert problems(info) == []
    assert len(info["videos"]) == out["items"] == 16
    assert all(v["duration"] > 1.0 for v in info["videos"])  # 12 frames at 8 fps = 1.5 s
    tables = {t["id"]: t for t in info["tables"]}
    assert tables["main"]["rows"] == 2 and tables["context"]["rows"] == 4
    srt = info["sort"]
    assert srt is not None and srt["asc"] == sorted(srt["asc"]) and srt["desc"] == sorted(srt["desc"], reverse=True)
    assert any(i["src"].startswith("strips/") for i in info["images"])
    assert shot.stat().st_size > 10_000
    keep = ROOT / "outputs" / "test-artifacts" / "report_screenshot.png"
    keep.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, keep)
