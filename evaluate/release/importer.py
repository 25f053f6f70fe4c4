"""Import the official release as a run: every distinct video becomes one item of ``<output_root>/<run>/``.

``python -m harness release import source=<release folder> run=<name>`` (docs/release.md):

1. the parquet files are found and their columns checked (footers only) before anything is written;
2. every row is mapped (:mod:`evaluate.release.layout`): harness model from ``model_id``, family from the video's
   category, trajectory preset from the release name (``conf/trajectory/*.yaml`` ``release:``), case from the
   video's folder; rows that cannot be mapped are counted, one line per distinct problem, and the rest goes on;
3. rows pointing at one video (a ``camera_rotation`` row and its ``environment`` row) are one item scored once,
   its ``meta.json`` listing every row (``release.rows``);
4. each case's ``first_frame`` becomes ``<run>/release/cases/<case>.{png,jpg}`` with a case file beside it (a case
   set the harness can run its own models on), merged with an overlay case set of annotations the release lacks;
5. each item links its video (a hard link, else a symbolic link: nothing is copied), writes ``camera.npz`` (the
   preset at the video's own frame count) and ``meta.json`` last. A rerun skips items whose ``meta.json`` already
   names the same video with the same size and modification time.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

from .layout import (
    CAMERA_CATEGORIES,
    CATEGORY_FAMILY,
    ReleaseError,
    ReleaseRow,
    check_schema,
    harness_model,
    iter_rows,
    local_video,
    parquet_files,
    parse_video_ref,
    release_case_id,
    valid_case_id,
    video_relpath,
)

log = logging.getLogger(__name__)

#: Where the import keeps what it made besides the items (inside the run folder).
RELEASE_DIR = "release"
#: The context label of imported videos: what ran is whatever the release's authors ran (docs/release.md).
CONTEXT = "release"
#: Distinct problems listed per kind on the console (all of them go to release/import.json).
SHOWN_PER_KIND = 12


@dataclass(frozen=True)
class ReleaseOptions:
    """What ``release import`` reads. source: the release's local folder. models: extra ``model_id`` -> harness
    model entries. overlay: a case-set folder whose cases (ids ``<category>_<case_id>``) add what the release lacks
    (targets, events, prompts, intrinsics). hfov_deg: horizontal field of view assumed when no case says (degrees).
    limit: import at most this many rows (a quick look at a large release)."""

    source: Path
    models: dict[str, str] = field(default_factory=dict)
    overlay: Path | None = None
    hfov_deg: float = 60.0
    limit: int | None = None

    @staticmethod
    def from_config(cfg: dict[str, Any]) -> ReleaseOptions:
        rel = cfg.get("release") or {}
        source = cfg.get("source") or rel.get("source")
        if not source:
            raise ConfigError("release import: give the release's folder: source=<dir> (the folder `hf download "
                              "rescuerz/WorldMemBench --repo-type dataset --local-dir DIR` fills)")
        models = rel.get("models") or {}
        if not isinstance(models, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in models.items()):
            raise ConfigError(f"release.models={models!r}: give a mapping of release model ids to harness models, "
                              "e.g. release.models='{my-model: reference}'")
        hfov = rel.get("hfov_deg", 60.0)
        if isinstance(hfov, bool) or not isinstance(hfov, (int, float)) or not 1 < hfov < 179:
            raise ConfigError(f"release.hfov_deg={hfov!r}: give the horizontal field of view in degrees (1..179)")
        limit = rel.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ConfigError(f"release.limit={limit!r}: give a number of rows >= 1 (or null for all)")
        overlay = rel.get("overlay")
        return ReleaseOptions(Path(str(source)).expanduser(), dict(models), Path(str(overlay)).expanduser()
                              if overlay else None, float(hfov), limit)


@dataclass
class VideoPlan:
    """One video of the release and the rows that point at it (the item it becomes)."""

    relpath: str
    file: Path
    model: str
    model_id: str
    preset: str
    case_key: str
    family: str
    rows: list[dict[str, str]] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        return sorted({r["category"] for r in self.rows})


@dataclass
class ImportSummary:
    """What an import did: counts and the problems (kind -> distinct subject -> the rows it concerns)."""

    rows: int = 0
    videos: int = 0
    imported: int = 0
    unchanged: int = 0
    camera_rows: int = 0
    problems: dict[str, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(dict))
    seconds: list[float] = field(default_factory=list)  # wall time of each video's import, in import order

    def add(self, kind: str, subject: str, where: str) -> None:
        self.problems[kind].setdefault(subject, []).append(where)

    def skipped_rows(self) -> int:
        return sum(len(w) for subj in self.problems.values() for w in subj.values())

    def lines(self, shown: int = SHOWN_PER_KIND) -> list[str]:
        """The console summary: counts, then one line per distinct problem (at most ``shown`` per kind)."""
        out = [f"release import: {self.rows} row(s), {self.videos} video(s) -> {self.imported} item(s) written, "
               f"{self.unchanged} unchanged; {self.camera_rows} camera-following row(s) scored on their "
               f"static-memory video; {self.skipped_rows()} row(s) skipped"]
        for kind, subjects in sorted(self.problems.items()):
            for subject, wheres in sorted(subjects.items())[:shown]:
                out.append(f"  {kind}: {subject} ({len(wheres)} row(s), first {wheres[0]})")
            if len(subjects) > shown:
                out.append(f"  {kind}: ... and {len(subjects) - shown} more (release/import.json lists all)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "videos": self.videos, "imported": self.imported, "unchanged": self.unchanged,
                "camera_rows": self.camera_rows, "skipped_rows": self.skipped_rows(),
                "problems": {k: dict(sorted(v.items())) for k, v in sorted(self.problems.items())}}


def release_presets() -> dict[str, str]:
    """Release trajectory name -> harness trajectory option (the ``release:`` key of ``conf/trajectory/*.yaml``)."""
    from harness.config_groups import group_yaml, list_group

    out: dict[str, str] = {}
    for name in list_group("trajectory"):
        rel = group_yaml("trajectory", name).get("release")
        if rel:
            out[str(rel)] = name
    return out


def plan_release(opts: ReleaseOptions, summary: ImportSummary) -> dict[str, VideoPlan]:
    """Every row mapped and grouped by video (nothing written). Rows that cannot be imported are recorded in
    ``summary``. Raises :class:`ReleaseError` when the folder is not the release's layout at all."""
    from harness.config_groups import list_group

    files = parquet_files(opts.source)
    check_schema(files)
    presets, known = release_presets(), list_group("model")
    videos: dict[str, VideoPlan] = {}
    for row in _limited(iter_rows(files, images=False), opts.limit):
        summary.rows += 1
        plan = _plan_row(row, opts, presets, known, summary)
        if plan is None:
            continue
        have = videos.get(plan.relpath)
        if have is None:
            videos[plan.relpath] = plan
        elif (have.model, have.preset) != (plan.model, plan.preset):
            summary.add("inconsistent rows", f"{plan.relpath}: {row.item_id} says {plan.model}/{plan.preset}, "
                        f"an earlier row {have.model}/{have.preset}", row.where)
            continue
        else:
            have.rows.extend(plan.rows)
        if row.category in CAMERA_CATEGORIES:
            summary.camera_rows += 1
    summary.videos = len(videos)
    return videos


def _limited(rows: Iterable[ReleaseRow], limit: int | None) -> Iterable[ReleaseRow]:
    for i, r in enumerate(rows):
        if limit is not None and i >= limit:
            return
        yield r


def _plan_row(row: ReleaseRow, opts: ReleaseOptions, presets: dict[str, str], known: list[str],
              summary: ImportSummary) -> VideoPlan | None:
    empty = [k for k in ("model_id", "category", "trajectory", "case_id", "video_url") if not getattr(row, k)]
    if empty:
        summary.add("incomplete row", f"empty {', '.join(empty)}", row.where)
        return None
    model = harness_model(row.model_id, opts.models, known)
    if model is None or model not in known:
        summary.add("unknown model id", f"{row.model_id!r} (map it: release.models='{{{row.model_id}: <model>}}')",
                    row.where)
        return None
    if row.category not in CATEGORY_FAMILY:
        summary.add("unknown category", f"{row.category!r} (known: {', '.join(sorted(CATEGORY_FAMILY))})", row.where)
        return None
    if row.trajectory not in presets:
        summary.add("unknown trajectory", f"{row.trajectory!r} (presets: {', '.join(sorted(presets))})", row.where)
        return None
    relpath = video_relpath(row.video_url)
    ref = parse_video_ref(relpath)
    category, case = (ref.category, ref.case_id) if ref else (row.category, row.case_id)
    if category in CAMERA_CATEGORIES:  # a camera case's own video (the paper reuses static ones)
        family = "environment"
    else:
        family = CATEGORY_FAMILY.get(category, CATEGORY_FAMILY[row.category])
    case_key = release_case_id(category, case)
    if not valid_case_id(case_key):
        summary.add("bad case id", f"{case_key!r}", row.where)
        return None
    file = local_video(opts.source, relpath)
    if file is None:
        summary.add("missing video", relpath, row.where)
        return None
    return VideoPlan(relpath, file, model, row.model_id, presets[row.trajectory], case_key, family,
                     [{"item_id": row.item_id, "category": row.category, "case_id": row.case_id, "where": row.where}])


# -- cases ------------------------------------------------------------------------------------------------------------

def write_cases(opts: ReleaseOptions, videos: dict[str, VideoPlan], cases_dir: Path,
                summary: ImportSummary) -> dict[str, Any]:
    """One case file per case key with its ``first_frame`` image (second pass over the rows, images included, one
    batch in memory at a time). Returns case key -> :class:`harness.cases.Case`. A case whose image is missing from
    every row is a problem of its videos."""
    import yaml

    from harness.cases import load_case_set
    from harness.io import write_bytes, write_text

    need: dict[str, tuple[str, set[str]]] = {}  # case key -> (family, the presets its videos use)
    for v in videos.values():
        _, presets = need.setdefault(v.case_key, (v.family, set()))
        presets.add(v.preset)
    overlay = {c.id: c for c in load_case_set(opts.overlay)} if opts.overlay else {}
    image_of: dict[str, tuple[str, bool]] = {}  # case key -> (image file name, from a row of the video's category)
    files = parquet_files(opts.source)
    by_key: dict[str, list[VideoPlan]] = defaultdict(list)
    for v in videos.values():
        by_key[v.case_key].append(v)
    wanted_rows = {r["where"]: v.case_key for v in videos.values() for r in v.rows}
    for row in _limited(iter_rows(files, images=True), opts.limit):
        key = wanted_rows.get(row.where)
        if key is None or row.image is None:
            continue
        preferred = not key.startswith(tuple(f"{c}_" for c in CAMERA_CATEGORIES)) and row.category not in \
            CAMERA_CATEGORIES
        if key in image_of and (image_of[key][1] or not preferred):
            continue
        name = f"{key}{_image_suffix(row.image, row.image_name)}"
        write_bytes(cases_dir / name, row.image)
        image_of[key] = (name, preferred)
    cases: dict[str, Any] = {}
    for key, (family, presets) in sorted(need.items()):
        if key not in image_of:
            for v in by_key[key]:
                summary.add("missing first_frame", key, v.rows[0]["where"])
                videos.pop(v.relpath, None)
            continue
        rec: dict[str, Any] = {"id": key, "family": family, "image": image_of[key][0], "prompt": "",
                               "hfov_deg": opts.hfov_deg, "trajectories": sorted(presets)}
        if key in overlay:
            rec = _merged(rec, overlay[key])
        rec["unannotated"] = _lacks_annotations(rec)
        path = cases_dir / f"{key}.yaml"
        write_text(path, yaml.safe_dump(rec, sort_keys=False))
        cases[key] = path
    loaded = {c.id: c for c in load_case_set(cases_dir)} if cases else {}
    return {k: loaded[k] for k in cases}


def _lacks_annotations(rec: dict[str, Any]) -> bool:
    """Whether a case misses what its family's metrics need (the release ships none of it): a dynamic case without
    an event, a human case without persons, an object case without objects."""
    targets = rec.get("targets") or {}
    need = {"dynamic": rec.get("event"), "human": targets.get("persons"), "object": targets.get("objects")}
    return rec["family"] in need and not need[rec["family"]]


def _merged(rec: dict[str, Any], over: Any) -> dict[str, Any]:
    """The release's case with an overlay case's annotations (targets, event, prompt, intrinsics, depth): the image
    stays the release's first frame; relative resource paths of the overlay become absolute."""
    o = over.model_dump(exclude_none=True, exclude={"source", "id", "family", "image", "trajectories"})
    base = Path(over.source).parent if over.source else Path(".")

    def absolute(ref: Any) -> Any:
        if isinstance(ref, str) and not ref.startswith("skimage://") and not Path(ref).is_absolute():
            return str((base / ref).resolve())
        return ref

    if "depth" in o:
        o["depth"] = absolute(o["depth"])
    for obj in (o.get("targets") or {}).get("objects") or []:
        if "mask" in obj:
            obj["mask"] = absolute(obj["mask"])
    return {**rec, **o}


def _image_suffix(data: bytes, name: str | None) -> str:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return ".png"
    if data[:3] == b"\xff\xd8\xff":
        return ".jpg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return Path(name).suffix.lower() if name and Path(name).suffix else ".png"


# -- items ------------------------------------------------------------------------------------------------------------

def import_release(opts: ReleaseOptions, run_path: Path, progress: bool = True) -> ImportSummary:
    """Import the release into the run folder ``run_path`` (created); resumable. Returns the summary (also written
    to ``<run>/release/import.json``)."""
    from harness.io import write_json
    from harness.outputs import RunDir

    summary = ImportSummary()
    videos = plan_release(opts, summary)  # raises before anything is written when the folder is not a release
    run = RunDir(run_path)
    rel_dir = run.path / RELEASE_DIR
    cases = write_cases(opts, videos, rel_dir / "cases", summary)
    import time

    from tqdm import tqdm

    for v in tqdm(sorted(videos.values(), key=lambda v: v.relpath), desc="release import", unit="video",
                  disable=not progress):
        t0 = time.perf_counter()
        _import_video(v, cases[v.case_key], run, opts, summary)
        summary.seconds.append(time.perf_counter() - t0)
    run.rebuild_manifest()
    write_json(rel_dir / "import.json", {"source": str(opts.source.resolve()), **summary.to_dict()})
    return summary


def _import_video(v: VideoPlan, case: Any, run: Any, opts: ReleaseOptions, summary: ImportSummary) -> None:
    from harness.config_groups import group_yaml
    from harness.io import link_file, read_json, sha256_file, write_json
    from harness.outputs import WorkItem, controls_hashes
    from harness.video import probe_header
    from trajectories import TrajectoryError, TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_for_resize_crop

    seed = int(group_yaml("model", v.model).get("seed") or 0)  # the model's frozen paper seed (appendix C)
    item = WorkItem(v.model, CONTEXT, seed, v.preset, v.case_key)
    d = run.item_dir(item)
    stat = v.file.stat()
    stamp = {"file": str(v.file.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    meta_path = d / "meta.json"
    if meta_path.is_file():
        try:
            old = read_json(meta_path)
        except Exception:  # a broken meta.json: imported again
            old = {}
        if old.get("status") == "done" and (old.get("release") or {}).get("video") == stamp \
                and (old.get("release") or {}).get("rows") == v.rows:
            summary.unchanged += 1
            return
    try:
        info = probe_header(v.file)
    except Exception as exc:  # not a video, truncated, an unknown codec
        summary.add("undecodable video", f"{v.relpath} ({type(exc).__name__}: {exc})", v.rows[0]["where"])
        return
    spec = TrajectorySpec.from_dict(group_yaml("trajectory", v.preset))
    img = case.load_image()
    K_img = case.intrinsics_matrix(img.shape[0], img.shape[1], opts.hfov_deg)
    K = intrinsics_for_resize_crop(K_img, img.shape[:2], (info["height"], info["width"]))
    try:
        path = build_path(spec, info["num_frames"], info["fps"], K, info["height"], info["width"])
    except TrajectoryError as exc:
        summary.add("trajectory does not fit", f"{v.relpath}: {info['num_frames']} frames ({exc})",
                    v.rows[0]["where"])
        return
    d.mkdir(parents=True, exist_ok=True)
    link = link_file(v.file, d / "video.mp4")
    path.save(d / "camera.npz")
    meta = {"status": "done", "item": item.to_dict(), "case": case.model_dump(),
            "model": {"name": v.model, "release_id": v.model_id}, "seed": seed,
            "source": {"video": str(v.file.resolve()), "release": str(opts.source.resolve())},
            "release": {"video": stamp, "relpath": v.relpath, "link": link, "rows": v.rows,
                        "categories": v.categories,
                        "camera_following": any(r["category"] in CAMERA_CATEGORIES for r in v.rows)},
            "camera": {"spec_hash": path.spec_hash(), **path.meta(), "sha256": sha256_file(d / "camera.npz")},
            "video": {"file": "video.mp4", "sha256": sha256_file(v.file), "size": stat.st_size, **info},
            "controls": {"sha256": controls_hashes(d / "controls")}, "generation": {}}
    meta["manifest"] = {**item.to_dict(), "key": item.key, "status": "done", "dir": item.key, "video": "video.mp4",
                        "video_sha256": meta["video"]["sha256"], "phases": path.meta()["phases"], "external": True}
    write_json(meta_path, meta)
    summary.imported += 1


def load_summary(run_path: Path) -> dict[str, Any] | None:
    """``<run>/release/import.json`` of an imported run (None for a run that is not one)."""
    p = Path(run_path) / RELEASE_DIR / "import.json"
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


__all__ = [
    "ImportSummary",
    "ReleaseError",
    "ReleaseOptions",
    "import_release",
    "load_summary",
    "plan_release",
    "release_presets",
]
