"""Evaluating videos made elsewhere: a folder of videos plus a small manifest, and the case set they were made from.

Manifest: a JSON list (``manifest.json``; ``{"videos": [...]}`` works too) or JSON Lines (``manifest.jsonl``, one
entry per line), one entry per video::

    {"video": "case1_lrlr.mp4", "case_id": "human_astronaut", "trajectory": "lrlr", "num_frames": 493, "fps": 16,
     "model": "my_model", "context": "native", "seed": 0, "hfov_deg": 60}

``case_id`` names a case of the configured case set (``cases=demo`` by default; your own with
``cases=folder cases.source=<folder>``): its image, targets and intrinsics are what the video is scored against.
The phases are reconstructed from the trajectory definition (``conf/trajectory/<name>.yaml``) sampled at the given
frame count, exactly as the harness would have generated them; intrinsics come from the case at the video's size.

Every entry is checked before anything is written (:func:`check_import`): the keys and their types, a known case
and trajectory, plain ``model`` / ``context`` names (:func:`harness.outputs.check_name`: they become folders), an
integer seed, a video file inside the folder that decodes with the manifest's frame count and fps, a positive
``hfov_deg``, and no two entries for one item. Each video then becomes a regular item of a run directory, so the
evaluation stage treats it like any other.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError, UserError

if TYPE_CHECKING:
    from harness.cases import Case, CaseSelection
    from harness.outputs import RunDir

FIELDS = "{video, case_id, trajectory, num_frames, fps[, model, context, seed, hfov_deg]}"
FPS_TOLERANCE = 1e-3  # relative: the manifest's fps must be the video's (a rate written as 16 vs 15.984 is not)


class ManifestError(ConfigError):
    """The manifest of videos made elsewhere (or one of its entries) is wrong; the message names the entry."""


def _entries(manifest: Path) -> list[tuple[str, Any]]:
    """(where, entry) of every entry: ``entry i`` of a JSON list, ``line N`` of a JSON Lines file."""
    from harness.io import BadFileError, load_json, read_jsonl

    fix = f"give a JSON list (manifest.json) or JSON Lines (manifest.jsonl) of {FIELDS}"
    if manifest.suffix == ".jsonl":
        try:
            text_lines = manifest.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            raise ManifestError(f"{manifest}: not UTF-8 text; {fix}") from None
        try:
            read_jsonl(manifest)  # one error path: names <file>:<line>
        except BadFileError as exc:
            raise ManifestError(str(exc)) from None
        return [(f"line {n}", json.loads(x)) for n, x in enumerate(text_lines, start=1) if x.strip()]
    try:
        data = load_json(manifest, fix=fix, expect=(list, dict), what="videos manifest")
    except BadFileError as exc:
        raise ManifestError(str(exc)) from None
    if isinstance(data, dict):
        if not isinstance(data.get("videos"), list):
            raise ManifestError(f"{manifest}: expected a list of entries (or {{\"videos\": [...]}}); {fix}")
        data = data["videos"]
    return [(f"entry {i}", e) for i, e in enumerate(data)]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class Planned:
    """One checked entry: its item, source video, decoded facts and the camera path it gets."""

    where: str
    item: Any
    case: Any
    src: Path
    info: dict[str, Any]
    path: Any


def _check_entry(folder: Path, manifest: Path, where: str, e: Any, cases: dict[str, Case]) -> dict[str, Any]:
    from harness.config_groups import check_choice
    from harness.outputs import PlanError, check_name

    at = f"{manifest}: {where}"
    if not isinstance(e, dict):
        raise ManifestError(f"{at}: expected an object {FIELDS}, got {type(e).__name__}")
    for key in ("video", "case_id", "trajectory", "num_frames", "fps"):
        if key not in e:
            raise ManifestError(f"{at}: missing {key!r}; each entry is {FIELDS}")
    unknown = sorted(set(e) - {"video", "case_id", "trajectory", "num_frames", "fps", "model", "context", "seed",
                               "hfov_deg"})
    if unknown:
        raise ManifestError(f"{at}: unknown key {unknown[0]!r}; each entry is {FIELDS}")
    if not isinstance(e["video"], str) or not e["video"]:
        raise ManifestError(f"{at}: video={e['video']!r}: give the file name of the video, relative to {folder}")
    if not isinstance(e["case_id"], str) or e["case_id"] not in cases:
        known = ", ".join(sorted(cases)[:8]) + (", ..." if len(cases) > 8 else "")
        raise ManifestError(f"{at}: case_id {e['case_id']!r} is not in the case set ({known}); the case (its image, "
                            "targets, intrinsics) is what the video is scored against: give the case set the videos "
                            "were made from with cases=folder cases.source=<folder of case files>, or fix case_id")
    if not isinstance(e["trajectory"], str):
        raise ManifestError(f"{at}: trajectory={e['trajectory']!r}: give a trajectory name (lrlr, lrlrlr, lrud, ...)")
    try:
        check_choice("trajectory", e["trajectory"])
        model = check_name(f"{at}: model", e.get("model", "external"))
        context = check_name(f"{at}: context", e.get("context", "native"))
    except UserError as exc:
        raise ManifestError(f"{at}: {exc}" if not str(exc).startswith(str(manifest)) else str(exc)) from None
    if not _int(e["num_frames"]) or e["num_frames"] < 2:
        raise ManifestError(f"{at}: num_frames={e['num_frames']!r}: give the video's frame count as an integer >= 2 "
                            "(a number, not a string)")
    if not _number(e["fps"]) or e["fps"] <= 0:
        raise ManifestError(f"{at}: fps={e['fps']!r}: give the video's frame rate as a number > 0 (e.g. 16)")
    if "hfov_deg" in e and (not _number(e["hfov_deg"]) or not 1 < e["hfov_deg"] < 179):
        raise ManifestError(f"{at}: hfov_deg={e['hfov_deg']!r}: give the horizontal field of view in degrees, "
                            "1 < hfov_deg < 179 (or leave it out: the case's intrinsics, else 60)")
    seed = e.get("seed", 0)
    try:
        from harness.outputs import check_seed

        check_seed(seed, "seed")
    except PlanError:
        raise ManifestError(f"{at}: seed={seed!r} must be an integer in [0, 2^32)") from None
    root = folder.resolve()
    src = (folder / e["video"]).resolve()
    if not src.is_relative_to(root):
        raise ManifestError(f"{at}: video={e['video']!r} is outside {root}; give a file inside the videos folder")
    if not src.is_file():
        raise ManifestError(f"{at}: video file {src} not found")
    return {**e, "model": model, "context": context, "seed": seed, "_src": src}


def check_import(folder: Path, manifest: Path, cases_cfg: CaseSelection) -> list[Planned]:
    """Every entry of the manifest checked, and what it will become (nothing is written): the keys and their
    types, a known case (of the case set ``cases_cfg`` selects) and trajectory, plain names, a video inside
    ``folder`` that decodes with the manifest's frame count and fps, the camera path that trajectory has at that
    count, and one entry per item."""
    from harness.cases import load_cases_from_config
    from harness.config_groups import group_yaml
    from harness.outputs import WorkItem
    from harness.video import probe_video
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_for_resize_crop

    folder, manifest = Path(folder), Path(manifest)
    if not folder.is_dir():
        raise ManifestError(f"videos={folder}: not a folder; give the folder that holds the videos and their "
                            "manifest.json")
    if not manifest.is_file():
        raise ManifestError(f"videos_manifest={manifest} not found: give a JSON list (or JSON Lines) of {FIELDS}")
    cases = {c.id: c for c in load_cases_from_config(cases_cfg)}
    out: list[Planned] = []
    seen: dict[str, str] = {}
    for where, raw in _entries(manifest):
        e = _check_entry(folder, manifest, where, raw, cases)
        at = f"{manifest}: {where}"
        item = WorkItem(e["model"], e["context"], int(e["seed"]), e["trajectory"], e["case_id"])
        if item.key in seen:
            raise ManifestError(f"{at}: {item.key} is also {seen[item.key]}: two videos for one item (model, context, "
                                "seed, trajectory, case) would overwrite each other; give them different model / "
                                "context / seed values")
        seen[item.key] = where
        try:
            info = probe_video(e["_src"])
        except Exception as exc:  # not a video, truncated, an unknown codec
            raise ManifestError(f"{at}: video {e['_src']} does not decode ({type(exc).__name__}: {exc}); give an "
                                "MP4 (or another container PyAV reads)") from None
        if info["num_frames"] != e["num_frames"]:
            raise ManifestError(f"{at}: {e['_src']}: {info['num_frames']} frames decoded, the manifest says "
                                f"num_frames={e['num_frames']}")
        if not (info["fps"] > 0 and abs(info["fps"] - float(e["fps"])) <= FPS_TOLERANCE * info["fps"]):
            raise ManifestError(f"{at}: {e['_src']} is {info['fps']:.4g} fps, the manifest says fps={e['fps']}: the "
                                "revisit windows are placed by time, so give the video's own rate")
        case = cases[e["case_id"]]
        img = case.load_image()
        K_src = case.intrinsics_matrix(img.shape[0], img.shape[1], float(e.get("hfov_deg", 60.0)))
        K = intrinsics_for_resize_crop(K_src, img.shape[:2], (info["height"], info["width"]))
        spec = TrajectorySpec.from_dict(group_yaml("trajectory", e["trajectory"]))
        try:
            path = build_path(spec, e["num_frames"], float(e["fps"]), K, info["height"], info["width"])
        except UserError as exc:
            raise ManifestError(f"{at}: {exc}") from None
        out.append(Planned(where, item, case, e["_src"], info, path))
    if not out:
        raise ManifestError(f"{manifest}: no entries; give one {FIELDS} per video")
    return out


def import_videos(folder: Path, manifest: Path, run: RunDir, planned: list[Planned]) -> Path:
    """Create (or update) the run ``run`` from external videos; returns its directory. Every entry was checked
    before anything is written (``planned``: :func:`check_import`'s result)."""
    from harness.io import atomic_path, copy_file, sha256_file
    from harness.record import ItemRecord, write_record

    for p in planned:
        d = run.item_dir(p.item)  # contained: the item's names passed harness.outputs.check_name
        with atomic_path(d / "camera.npz") as tmp:  # (makes the item's folder)
            p.path.save_to(tmp)
        copy_file(p.src, d / "video.mp4")
        video = {"sha256": sha256_file(d / "video.mp4"), "size": (d / "video.mp4").stat().st_size, **p.info}
        write_record(d, ItemRecord.made_elsewhere(
            p.item, d, case=p.case.model_dump(), model={"name": p.item.model}, path=p.path, video=video,
            source={"video": str(p.src), "manifest": str(manifest)}))
    run.rebuild_manifest()
    return run.path
