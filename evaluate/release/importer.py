"""Import the official release as a run: every distinct video becomes one item of ``<output_root>/<run>/``.

``python -m harness release import source=<release folder> run=<name>`` (docs/release.md):

1. the parquet files are found (regular files only) and their columns checked (footers only), and the overlay case
   set loaded, before anything is written;
2. every row is mapped on its own (:mod:`evaluate.release.plan`): a row joins the item of its video or is one
   named problem; conflicts (two videos for one item, one ``item_id`` on two videos) are refused by name;
3. each case's ``first_frame`` becomes a case image and file (:mod:`evaluate.release.cases`);
4. each video is measured (:mod:`evaluate.release.measure`) and compared with its preset
   (:mod:`evaluate.release.check`); a video that follows its preset gets the preset's ``camera.npz`` at its own
   frame count, one that does not (another length, hold, amplitude, speed or profile) is imported all the same,
   flagged with what differs, and scored on its measured layout (``camera.npz`` labelled ``params.source:
   measured``). Nothing is refused for the harness's own frame-count rule;
5. each item links its video (a hard link, else a symbolic link: nothing is copied) and writes ``meta.json`` last;
   a video that fails leaves nothing behind (its folder is removed) and is one problem line.

A rerun skips an item whose source file has the same size, modification time and inode (a file replaced by another
with the same size and time is imported again), the same rows and the same preset; an item whose video left the
release is removed (unless only part of the release was read).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

from .layout import CAMERA_FAMILY, ReleaseError, shown
from .plan import ImportSummary, ReleaseOptions, VideoPlan, plan_release, release_presets

log = logging.getLogger(__name__)

#: Where the import keeps what it made besides the items (inside the run folder).
RELEASE_DIR = "release"
#: The context label of imported videos: what ran is whatever the release's authors ran (docs/release.md).
CONTEXT = "release"
#: Bumped when what an import writes for a video changes: items of another version are imported again.
IMPORT_VERSION = 2
#: A video larger than this a side, or with more frames, is refused (no release video comes near).
MAX_VIDEO_SIDE = 8192
MAX_VIDEO_FRAMES = 100_000


def _overlay(opts: ReleaseOptions) -> dict[str, Any]:
    from harness.cases import CaseError, load_case_set

    if opts.overlay is None:
        return {}
    try:
        return {c.id: c for c in load_case_set(opts.overlay)}
    except CaseError as exc:
        raise ReleaseError(f"release.overlay: {exc}") from None


def import_release(opts: ReleaseOptions, run_path: Path, progress: bool = True) -> ImportSummary:
    """Import the release into the run folder ``run_path`` (created); resumable, each video on its own. Returns
    the summary (also written to ``<run>/release/import.json``; the layout check to ``release/check.{json,md}``)."""
    from tqdm import tqdm

    from harness.io import write_json
    from harness.outputs import RunDir

    from .cases import write_cases
    from .check import summarise, write_check

    summary = ImportSummary()
    overlay = _overlay(opts)
    plans = plan_release(opts, summary)  # raises before anything is written when the folder is not a release
    run = RunDir(run_path)
    rel_dir = run.path / RELEASE_DIR
    cases = write_cases(opts, plans, rel_dir / "cases", summary, overlay)
    checks, done = [], set()
    ctx = _Context(opts, run, summary, {k for k, c in overlay.items() if c.intrinsics or c.hfov_deg})
    order = [plans[k] for k in sorted(plans)]
    with ctx.measuring(order, cases):
        for p in tqdm(order, desc="release import", unit="video", disable=not progress):
            t0 = time.perf_counter()
            check = ctx.import_video(p, cases[p.case_key])
            summary.seconds.append(time.perf_counter() - t0)
            if check is not None:
                checks.append(check)
                done.add(ctx.item(p).key)
    summary.videos = summary.imported + summary.unchanged
    _remove_stale(run, done, summary)
    run.rebuild_manifest()
    write_json(rel_dir / "import.json", {"source": str(opts.source.resolve()), "measured": opts.measure,
                                         **summary.to_dict()})
    measured = [c for c in checks if c.measured]
    if measured:
        write_check(run.path, summarise(measured, []))
    return summary


def _stamp(file: Path) -> dict[str, int]:
    """What says a source file is the one imported: size, modification time, device and inode (a file replaced by
    another of the same size and time has another inode). Not the change time: the import's own hard link to the
    file changes it. A file rewritten in place is the item's own video too (a hard link): its sha256 no longer
    matches ``meta.json``, which the evaluation and ``verify`` check."""
    st = file.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "dev": st.st_dev, "ino": st.st_ino}


def _rows_key(rows: list[dict[str, str]]) -> list[list[str]]:
    """The rows of an item as the resume compares them (their place in the parquet files may move)."""
    return sorted([r["item_id"], r["category"], r["case_id"]] for r in rows)


class _Context:
    """What every video of one import shares: the options, the run, the summary, the models' seeds and the
    measurements already made (a file linked under several names is measured once)."""

    def __init__(self, opts: ReleaseOptions, run: Any, summary: ImportSummary, optics: set[str]) -> None:
        self.opts, self.run, self.summary = opts, run, summary
        self.optics = optics  # case keys whose overlay gives the intrinsics or the field of view
        self.seeds: dict[str, int] = {}
        self.measured: dict[tuple[Any, ...], Any] = {}  # measurement (or a worker's future) per file and settings

    @contextlib.contextmanager
    def measuring(self, plans: list[VideoPlan], cases: dict[str, Any]) -> Iterator[None]:
        """With ``release.workers`` > 1, the videos to measure are measured on that many processes, in the order
        they are imported (the results are the same for any count); the pool ends with the block."""
        if self.opts.workers <= 1 or not self.opts.measure:
            yield
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from .measure import measure_video

        with ProcessPoolExecutor(self.opts.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            for p in plans:
                try:
                    key, kind, given = self._measure_key(p, cases[p.case_key])
                except Exception:  # probed again, and named, when the video is imported
                    continue
                if key not in self.measured and _unchanged(self.run.item_dir(self.item(p)), p, _stamp(p.file),
                                                           _preset(p.preset), True) is None:
                    self.measured[key] = pool.submit(measure_video, p.file, kind, given, self.opts.hfov_deg)
            try:
                yield
            finally:
                for f in self.measured.values():
                    if hasattr(f, "cancel"):
                        f.cancel()

    def _measure_key(self, p: VideoPlan, case: Any) -> tuple[tuple[Any, ...], str, float | None]:
        """(cache key, kind, given field of view) of a video's measurement."""
        from harness.video import probe_header

        from .check import preset_spec
        from .measure import hfov_of

        st = p.file.stat()
        kind = "rotation" if preset_spec(p.preset).kind == "rotation" else "translation"
        given = None
        if p.case_key in self.optics:
            info = probe_header(p.file)
            given = hfov_of(_case_intrinsics(case, info, self.opts.hfov_deg), info["width"])
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, kind, given), kind, given

    def item(self, p: VideoPlan) -> Any:
        from harness.config_groups import group_yaml
        from harness.outputs import WorkItem

        if p.model not in self.seeds:  # the model's frozen paper seed (appendix C)
            self.seeds[p.model] = int(group_yaml("model", p.model).get("seed") or 0)
        return WorkItem(p.model, CONTEXT, self.seeds[p.model], p.preset, p.case_key)

    def import_video(self, p: VideoPlan, case: Any) -> Any:
        """Import one video (or find it unchanged): its layout check, or None when it failed (nothing left)."""
        d = self.run.item_dir(self.item(p))
        stamp = _stamp(p.file)
        preset = _preset(p.preset)
        old = _unchanged(d, p, stamp, preset, self.opts.measure)
        if old is not None:
            self.summary.unchanged += 1
            self._count(p, old)
            return old
        try:
            _remove_item(d)
            check = self._write(p, case, d, stamp, preset)
        except Exception as exc:  # this video's failure is one line; nothing of it is left, the rest goes on
            with contextlib.suppress(Exception):
                _remove_item(d)
            p.refuse(self.summary, _failure_kind(exc), f"{p.relpath}: {type(exc).__name__}: {exc}")
            return None
        self.summary.imported += 1
        self._count(p, check)
        return check

    def _count(self, p: VideoPlan, check: Any) -> None:
        s = self.summary
        s.kept_rows += len(p.rows)
        s.duplicate_rows += p.duplicates
        s.camera_rows += p.camera_rows
        s.camera_items += p.scored_as == CAMERA_FAMILY
        s.flagged += bool(check.problems)
        s.presets.add(p.preset)

    def _measure(self, p: VideoPlan, case: Any) -> Any:
        """The video's measurement: made by a worker, made before (a file under several names), or made now."""
        from .measure import measure_video

        from concurrent.futures.process import BrokenProcessPool

        key, kind, given = self._measure_key(p, case)
        got: Any = self.measured.get(key)
        if got is not None and hasattr(got, "result"):
            try:
                got = got.result()
            except BrokenProcessPool:  # the pool is gone (a worker killed): measured here instead
                got = None
        if got is None:
            got = measure_video(p.file, kind, given, self.opts.hfov_deg)
        self.measured[key] = got
        return got

    def _write(self, p: VideoPlan, case: Any, d: Path, stamp: dict[str, int], preset: dict[str, Any]) -> Any:
        """Measure, compare, and write the item (video link, camera.npz, meta.json last); returns its check."""
        from harness.video import probe_header

        from .check import preset_path, preset_spec
        from .measure import intrinsics, measured_path

        info = probe_header(p.file)
        if max(info["width"], info["height"]) > MAX_VIDEO_SIDE or not 2 <= info["num_frames"] <= MAX_VIDEO_FRAMES:
            raise ValueError(f"{info['width']}x{info['height']}, {info['num_frames']} frames (at most "
                             f"{MAX_VIDEO_SIDE} a side, 2..{MAX_VIDEO_FRAMES} frames)")
        spec = preset_spec(p.preset)
        kind = "rotation" if spec.kind == "rotation" else "translation"
        K_case = _case_intrinsics(case, info, self.opts.hfov_deg)
        m = self._measure(p, case) if self.opts.measure else None
        given = p.case_key in self.optics
        K = K_case if (given or m is None) else intrinsics(m.hfov_deg, info["width"], info["height"])
        path = preset_path(spec, info["num_frames"], info["fps"], K, info["height"], info["width"])
        check = _check_or_unmeasured(p, path, m, spec, info)
        if m is not None and check.problems:
            path = measured_path(m.layout, p.preset, info["fps"], K, info["height"], info["width"],
                                 "rotation" if kind == "rotation" else str(spec.kind))
        self._files(p, case, d, stamp, preset, info, path, m, check)
        return check

    def _files(self, p: VideoPlan, case: Any, d: Path, stamp: dict[str, int], preset: dict[str, Any],
               info: dict[str, Any], path: Any, m: Any, check: Any) -> None:
        from harness.io import link_file, sha256_file
        from harness.record import ItemRecord, write_record

        item = self.item(p)
        d.mkdir(parents=True, exist_ok=True)
        link = link_file(p.file, d / "video.mp4")
        path.save(d / "camera.npz")
        sha = sha256_file(p.file)
        release = {"version": IMPORT_VERSION, "video": stamp, "relpath": p.relpath, "link": link,
                   "item_id": p.item_id, "rows": p.rows, "duplicate_rows": p.duplicates,
                   "categories": p.categories, "camera_following": p.camera_rows > 0, "scored_as": p.scored_as,
                   "preset_hash": _preset_hash(preset), "measured": m is not None,
                   "camera": "measured layout" if path.params.get("source") == "measured" else "preset",
                   "check": check.to_dict(),
                   "measurement": {**m.to_dict(), "video_sha256": sha} if m is not None else None}
        write_record(d, ItemRecord.made_elsewhere(
            item, d, case=case.model_dump(), model={"name": p.model, "release_id": p.model_id}, path=path,
            video={"sha256": sha, "size": stamp["size"], **info}, scored_as=p.scored_as, release=release,
            source={"video": str(p.file.resolve()), "release": str(self.opts.source.resolve())}))


def _failure_kind(exc: Exception) -> str:
    """``undecodable video`` for a decoder's error (PyAV's, or a value it could not read), else ``import failed``."""
    decoder = type(exc).__module__.split(".")[0] == "av" or isinstance(exc, (ValueError, EOFError))
    return "undecodable video" if decoder else "import failed"


def _case_intrinsics(case: Any, info: dict[str, Any], default_hfov: float) -> Any:
    """K of the video from its case: the case's own intrinsics or field of view (an overlay's), else
    ``release.hfov_deg``; given for the case image, resized and cropped like the video."""
    from trajectories.conventions import intrinsics_for_resize_crop

    img = case.load_image()
    K_img = case.intrinsics_matrix(img.shape[0], img.shape[1], default_hfov)
    return intrinsics_for_resize_crop(K_img, img.shape[:2], (info["height"], info["width"]))


def _check_or_unmeasured(p: VideoPlan, path: Any, m: Any, spec: Any, info: dict[str, Any]) -> Any:
    """The video's layout check; without a measurement, a check that says only whether its length fits."""
    from .check import VideoCheck, check_video

    meta = {"item": {"model": p.model, "trajectory": p.preset}}
    if m is not None:
        return check_video(f"{p.model}/{p.preset}/{p.case_key}", meta, path, m)
    c = VideoCheck(f"{p.model}/{p.preset}/{p.case_key}", p.model, p.preset, int(info["num_frames"]), {}, {},
                   float("nan"), "not measured", spec.min_frames())
    if info["num_frames"] < spec.min_frames():
        c.problems.append(f"{info['num_frames']} frames, the preset needs {spec.min_frames()} (not measured: "
                          "the preset cut to the video's length)")
    return c


def _preset(name: str) -> dict[str, Any]:
    """The preset's YAML as composed (what the resume compares)."""
    from harness.config_groups import group_yaml

    return group_yaml("trajectory", name)


def _preset_hash(preset: dict[str, Any]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(preset, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unchanged(d: Path, p: VideoPlan, stamp: dict[str, int], preset: dict[str, Any], measure: bool) -> Any:
    """The stored check of an item imported from the same file with the same rows, preset and settings, whose
    files are still in place; None otherwise."""
    from harness.record import read_record

    from .check import VideoCheck

    rec = read_record(d)
    rel = (rec.release if rec is not None else None) or {}
    if rec is None or rec.status != "done" or rel.get("version") != IMPORT_VERSION:
        return None
    if rel.get("video") != stamp or _rows_key(rel.get("rows") or []) != _rows_key(p.rows) or \
            rel.get("preset_hash") != _preset_hash(preset) or rel.get("measured") != measure:
        return None
    video = d / "video.mp4"
    try:
        same = video.resolve().stat().st_ino == stamp["ino"] and (d / "camera.npz").is_file()
    except OSError:
        same = False
    chk = rel.get("check") or {}
    if not same or not chk:
        return None
    return VideoCheck(**{k: v for k, v in chk.items() if k != "matches"})


def _remove_item(d: Path) -> None:
    """Remove an item folder the import made (``meta.json`` first, so it is never read half-removed)."""
    if not d.is_dir() and not d.is_symlink():
        return
    if d.is_symlink():
        raise ConfigError(f"{d}: an item folder that is a symbolic link; remove it by hand")
    (d / "meta.json").unlink(missing_ok=True)
    shutil.rmtree(d)


def _remove_stale(run: Any, done: set[str], summary: ImportSummary) -> None:
    """Remove the items an earlier import made whose video is no longer imported (gone from the release, or now
    refused), unless only part of the release was read (``release.limit`` / ``release.max_rows``)."""
    from harness.record import read_record

    if summary.not_read:
        return
    for key in run.item_keys():
        rec = read_record(run.path / key) if key not in done else None
        if rec is None or rec.release is None or not rec.supplied:
            continue
        _remove_item(run.item_dir(key))
        summary.removed += 1
        log.info("removed %s: its video is no longer imported", shown(key))


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
