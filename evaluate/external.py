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

from harness.errors import ConfigError


class ManifestError(ConfigError):
    """The manifest of videos made elsewhere (or one of its entries) is wrong; the message names the entry."""


def _entries(manifest: Path) -> list[dict]:
    text = manifest.read_text()
    try:
        if manifest.suffix == ".jsonl":
            return [json.loads(x) for x in text.splitlines() if x.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{manifest}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("videos"), list):
        return data["videos"]
    if not isinstance(data, list):
        raise ManifestError(f"{manifest}: expected a list of entries (or {{\"videos\": [...]}})")
    return data


_SAFE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def _safe_name(manifest: Path, i: int, key: str, value: Any) -> str:
    """A manifest ``model`` / ``context`` value as a folder name: letters, digits, ``.``, ``_``, ``-`` only (no
    ``/``, ``..`` or absolute paths), so an imported video can never be written outside the run directory."""
    import re

    v = str(value)
    if not re.fullmatch(_SAFE_NAME, v) or v in (".", "..") or ".." in v:
        raise ManifestError(f"{manifest}: entry {i}: {key}={v!r} is not a plain name (use letters, digits, '.', '_' or "
                         "'-', at most 64 characters; it becomes a folder of the run directory)")
    return v


def _checked_entries(folder: Path, manifest: Path, cases: dict) -> list[dict]:
    """Every entry validated before anything is written: required keys, known case and trajectory, plain model /
    context names, an integer seed and a video file inside ``folder``."""
    from harness.config_groups import check_choice

    out = []
    root = folder.resolve()
    for i, e in enumerate(_entries(manifest)):
        if not isinstance(e, dict):
            raise ManifestError(f"{manifest}: entry {i}: expected an object, got {type(e).__name__}")
        for key in ("video", "case_id", "trajectory", "num_frames", "fps"):
            if key not in e:
                raise ManifestError(f"{manifest}: entry {i}: missing {key!r}")
        if e["case_id"] not in cases:
            raise ManifestError(f"{manifest}: entry {i}: case_id {e['case_id']!r} is not in the case set")
        check_choice("trajectory", e["trajectory"])
        model = _safe_name(manifest, i, "model", e.get("model", "external"))
        context = _safe_name(manifest, i, "context", e.get("context", "native"))
        seed = e.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ManifestError(f"{manifest}: entry {i}: seed={seed!r} must be an integer in [0, 2^32)")
        src = (folder / str(e["video"])).resolve()
        if not src.is_relative_to(root):
            raise ManifestError(f"{manifest}: entry {i}: video={e['video']!r} is outside {root}")
        if not src.is_file():
            raise ManifestError(f"{manifest}: entry {i}: video file {src} not found")
        out.append({**e, "model": model, "context": context, "seed": seed, "_src": src})
    return out


def import_videos(folder: Path, manifest: Path, cfg: dict[str, Any]) -> Path:
    """Create (or update) ``<output_root>/<run>/`` from external videos; returns the run directory. Every entry is
    checked before anything is written."""
    from harness.io import write_json
    from harness.outputs import WorkItem
    from harness.config_groups import group_yaml
    from harness.io import sha256_file
    from harness.outputs import RunDir
    from harness.cases import load_cases_from_config
    from harness.video import probe_video
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_for_resize_crop

    if not manifest.exists():
        raise ManifestError(f"videos_manifest={manifest} not found: give a JSON/JSONL list of "
                            "{video, case_id, trajectory, num_frames, fps}")
    cases = {c.id: c for c in load_cases_from_config(cfg["cases"])}
    run = RunDir.for_name(cfg["output_root"], cfg["run"])  # the run-name rule: nothing lands outside output_root
    run_dir = run.path
    entries = _checked_entries(folder, manifest, cases)
    infos = []
    for i, e in enumerate(entries):
        info = probe_video(e["_src"])
        if info["num_frames"] != int(e["num_frames"]):
            raise ManifestError(f"{e['_src']}: {info['num_frames']} frames decoded, manifest says {e['num_frames']}")
        infos.append(info)
    for e, info in zip(entries, infos):
        src = e["_src"]
        case = cases[e["case_id"]]
        item = WorkItem(e["model"], e["context"], int(e["seed"]), e["trajectory"], case.id)
        d = run_dir / item.rel_dir
        if not d.resolve().is_relative_to(run_dir):
            raise ManifestError(f"{manifest}: {item.key} would be written outside {run_dir}")
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
    run.rebuild_manifest()
    return run_dir
