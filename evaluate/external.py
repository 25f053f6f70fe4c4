"""Evaluating videos made elsewhere: a folder of videos plus a small manifest is enough.

Manifest (``manifest.json`` list or ``.jsonl``), one entry per video::

    {"video": "case1_lrlr.mp4", "case_id": "human_astronaut", "trajectory": "lrlr", "num_frames": 493, "fps": 16,
     "model": "my_model", "context": "native", "seed": 0}

The phases are reconstructed from the trajectory definition (``conf/trajectory/<name>.yaml``) sampled at the given
frame count, exactly as the harness would have generated them; intrinsics come from the case at the video's size.
Each video becomes a regular item of a run directory, so the evaluation stage treats it like any other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


def _entries(manifest: Path) -> list[dict]:
    text = manifest.read_text()
    if manifest.suffix == ".jsonl":
        return [json.loads(x) for x in text.splitlines() if x.strip()]
    data = json.loads(text)
    return data if isinstance(data, list) else data["videos"]


def import_videos(folder: Path, manifest: Path, cfg: dict[str, Any]) -> Path:
    """Create (or update) ``<output_root>/<run>/`` from external videos; returns the run directory."""
    from harness.io import write_json
    from harness.plan import WorkItem
    from harness.registry import check_choice, group_yaml
    from harness.runner import load_cases_from_config, rebuild_manifest, sha256_file
    from harness.video import probe_video
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_for_resize_crop

    if not manifest.exists():
        raise FileNotFoundError(f"videos_manifest={manifest} not found: give a JSON/JSONL list of "
                                "{video, case_id, trajectory, num_frames, fps}")
    cases = {c.id: c for c in load_cases_from_config(cfg["cases"])}
    run_dir = (Path(cfg["output_root"]) / str(cfg["run"])).resolve()
    for i, e in enumerate(_entries(manifest)):
        for key in ("video", "case_id", "trajectory", "num_frames", "fps"):
            if key not in e:
                raise ValueError(f"{manifest}: entry {i}: missing {key!r}")
        if e["case_id"] not in cases:
            raise ValueError(f"{manifest}: entry {i}: case_id {e['case_id']!r} is not in {cfg['cases']['source']}")
        check_choice("trajectory", e["trajectory"])
        src = folder / e["video"]
        info = probe_video(src)
        if info["num_frames"] != int(e["num_frames"]):
            raise ValueError(f"{src}: {info['num_frames']} frames decoded, manifest says {e['num_frames']}")
        case = cases[e["case_id"]]
        item = WorkItem(str(e.get("model", "external")), str(e.get("context", "native")), int(e.get("seed", 0)),
                        e["trajectory"], case.id)
        d = run_dir / item.rel_dir
        d.mkdir(parents=True, exist_ok=True)
        img = case.load_image()
        K_src = case.intrinsics_matrix(img.shape[0], img.shape[1], float(e.get("hfov_deg", 60.0)))
        K = intrinsics_for_resize_crop(K_src, img.shape[:2], (info["height"], info["width"]))
        spec = TrajectorySpec.from_dict(group_yaml("trajectory", e["trajectory"]))
        path = build_path(spec, int(e["num_frames"]), float(e["fps"]), K, info["height"], info["width"])
        path.save(d / "camera.npz")
        shutil.copyfile(src, d / "video.mp4")
        meta = {"status": "done", "item": item.to_dict(), "case": case.model_dump(), "model": {"name": item.model},
                "seed": item.seed, "source": {"video": str(src), "manifest": str(manifest)},
                "camera": {"spec_hash": path.spec_hash(), **path.meta()},
                "video": {"file": "video.mp4", "sha256": sha256_file(d / "video.mp4"), **info}, "generation": {}}
        meta["manifest"] = {**item.to_dict(), "key": item.key, "status": "done", "dir": item.key,
                            "video": "video.mp4", "phases": path.meta()["phases"], "external": True}
        write_json(d / "meta.json", meta)
    rebuild_manifest(run_dir)
    return run_dir
