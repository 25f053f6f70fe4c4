"""The ``release`` commands in this process (harness/app/release.py): ``release import`` prints the import's summary
and where the run and its check are, evaluates only when asked and when an item is done; ``release check`` measures
the imported run and writes its table. The end-to-end run through a subprocess is tests/evaluate/test_release.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import in_process_cli

pytest.importorskip("pyarrow")


@pytest.fixture
def harness(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def _release(root: Path, frames: int = 493) -> Path:
    """A miniature release with one LRLR video of the preset's length (493 frames, 48 x 64; ``frames``: another
    length) and one unknown model."""
    from evaluate.release.miniature import miniature
    from harness.video import VideoWriter

    import numpy as np

    rng = np.random.default_rng(7)
    tex = rng.integers(0, 255, (48, 64 + frames, 3), dtype=np.uint8)
    video = root / "lrlr.mp4"
    video.parent.mkdir(parents=True, exist_ok=True)
    w = VideoWriter(video, fps=16)
    for i in range(frames):
        w(np.ascontiguousarray(tex[:, i:i + 64]))
    w.close()
    src = root / "release"
    miniature(src, {"lrlr_sym_0p75dpf": video}, models=("lingbot-v2",), cases=1, missing=False)
    return src


def test_import_without_evaluation_prints_the_summary_and_how_to_check(harness, tmp_path):
    src = _release(tmp_path)
    r = harness("release", "import", f"source={src}", "run=rel", "release.measure=false", "release.evaluate=false",
                "progress=false")
    assert r.code == 0, r.err
    run = tmp_path / "outputs" / "rel"
    assert "unknown model id: 'mystery-model'" in r.out
    assert f"run: {run}" in r.out and "release check run=rel" in r.out  # not measured: the command that measures
    assert len(list(run.rglob("meta.json"))) == 1 and not list(run.rglob("metrics.json"))  # not evaluated
    again = harness("release", "import", f"source={src}", "run=rel", "release.measure=false",
                    "release.evaluate=false", "progress=false")
    assert again.code == 0 and "(0 written, 1 unchanged)" in again.out


def test_check_measures_the_imported_run_and_writes_its_table(harness, tmp_path):
    src = _release(tmp_path, frames=97)  # a short video is measured against the whole preset: the command's path
    assert harness("release", "import", f"source={src}", "run=rel", "release.measure=false",
                   "release.evaluate=false", "progress=false").code == 0
    r = harness("release", "check", "run=rel", "progress=false")
    assert r.code == 0, r.err
    check = tmp_path / "outputs" / "rel" / "release"
    assert f"written: {check / 'check.md'} and check.json" in r.out
    data = json.loads((check / "check.json").read_text())
    assert data and (check / "check.md").read_text().strip()


def test_check_of_a_run_that_does_not_exist_names_it(harness, tmp_path):
    r = harness("release", "check", "run=nowhere", "progress=false")
    assert r.code == 2 and "nowhere" in r.err
    assert not (tmp_path / "outputs" / "nowhere").exists()
