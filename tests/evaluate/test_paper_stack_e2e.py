"""The paper's perception stack end to end without downloaded weights: a weights root holding tiny models of every
learned backbone (the libraries' own classes, random seeded weights, their real on-disk formats) makes the demo run's
evaluation compute every paper metric of the static families and camera following through the real loading code; the
same run with an empty weights root reports each as not computed with the fetch command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _libraries():
    """The libraries of the backbones, or this file's tests are skipped; imported when its tests run, not when the
    suite is collected (seconds in every xdist worker, the fast tier's included, which deselects this file)."""
    for module in ("torch", "transformers", "onnxruntime", "insightface", "pyiqa", "depth_anything_3", "clip"):
        pytest.importorskip(module)

SMALL = ["model.height=96", "model.width=160", "model.num_frames=97", "progress=false"]
#: CPU-sized recipe knobs for the tiny models (DA3 sees every frame in one multi-view forward; MUSIQ every 48th)
FAST = ["+evaluate.backbone_options.da3.process_res=56", "evaluate.quality_stride=48"]
#: paper metric -> the learned backbones (registry names) its key must name
PAPER = {
    "environment.visible": "dinov2", "environment.depth": "da3", "environment.reconstruction": "da3",
    "object.appearance": "dinov2", "object.geometry": "sam2", "human.appearance": "dinov2",
    "human.identity": "arcface", "camera.rpe_rot": "da3", "quality.imaging": "musiq",
    "quality.aesthetic": "laion",
}


def _paper_entries(run: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for m in run.rglob("metrics.json"):
        for k, e in json.loads(m.read_text())["metrics"].items():
            base = k.split("[")[0]
            if base in PAPER and PAPER[base] in k.lower():
                out.setdefault(base, e) if e.get("status") != "computed" else out.__setitem__(base, e)
    return out


def test_every_paper_metric_is_computed_with_tiny_real_class_weights(tmp_path):
    from evaluate.perception.tiny import write_tiny_weights

    root = tmp_path / "w"
    write_tiny_weights(root)
    cases = "cases.include=[environment_rocket,object_coffee,human_astronaut]"
    r = run_cli(["run=p", "context=fullkv", cases, "evaluate=off", *SMALL], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "outputs" / "p"
    shutil.copytree(run, tmp_path / "empty" / "outputs" / "p")

    r = run_cli(["stage=evaluate", "run=p", "evaluate.device=cpu", *FAST, *SMALL], tmp_path,
                env={"WORLDMEM_WEIGHTS": str(root)}, timeout=1800)
    got = _paper_entries(run)
    assert set(got) == set(PAPER), (sorted(got), r.stderr[-3000:])
    not_computed = {k: e.get("reason") for k, e in got.items() if e["status"] != "computed"}
    assert not not_computed, not_computed
    env_metrics = json.loads(next(run.rglob("environment_rocket/metrics.json")).read_text())
    assert env_metrics["backbones"]["da3"]["revision"]  # the loaded backbones' provenance is recorded  # the loaded backbones' provenance (revision, file hashes) is recorded

    # the same run with no weights: each paper metric is "not computed" and says how to fetch the weights
    r = run_cli(["stage=evaluate", "run=p", "evaluate.device=cpu", *SMALL], tmp_path / "empty",
                env={"WORLDMEM_WEIGHTS": str(tmp_path / "nothing")}, timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    reasons = {}
    for m in (tmp_path / "empty" / "outputs" / "p").rglob("metrics.json"):
        for k, e in json.loads(m.read_text())["metrics"].items():
            if k.split("[")[0] in PAPER and e["status"] != "computed":
                reasons[k] = e.get("reason", "")
    assert reasons and all("weights fetch" in why for why in reasons.values()), reasons
