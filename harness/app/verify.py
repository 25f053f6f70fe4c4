"""``python -m harness verify <same overrides as the run>``: the delivery validator.

For every item the config plans (all shards), it checks that the item is ``done``; that ``video.mp4`` decodes,
with the frame count of its camera path and the recorded fps; that the file's sha256 equals ``meta.json``'s; that
``camera.npz`` and every file of ``controls/`` still match the hashes ``meta.json`` recorded (and that its sections
have the right types: :func:`harness.outputs.item_problems`, the check a rerun makes); that the recorded config
fingerprint equals the current config's; that the manifest has the item's row with the same hash; and that no
temporary file, partial video or lock is left (also for items that are not done: what a killed run leaves). It
prints one table row per item and a summary line, and exits 1 when anything fails; a run that does not exist is a
user error (exit 2).

An imported release (``<run>/release/import.json``; docs/release.md) has no config to plan from: its items are
the ones its manifest and item folders name, every check is the same, and the ``fingerprint`` column checks the
provenance instead: the release's file the item links is still the one imported (same size, times and inode) and
the item's ``video.mp4`` is that file (a file rewritten in place fails ``sha256``).
``python -m harness verify run=<name>`` is all it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.app.run_config import RunConfig
from harness.errors import UserError
from harness.outputs import CONTROL_FILES, ManifestRow, PlanError, RunDir, _section, item_meta, item_problems

CHECKS = ("done", "decodes", "frames", "fps", "sha256", "files", "fingerprint", "manifest", "clean")


@dataclass
class ItemCheck:
    key: str
    results: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(self.results.get(c, False) for c in CHECKS)


@dataclass
class VerifyReport:
    run_dir: Path
    items: list[ItemCheck] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # item folders on disk that this plan does not name
    problems: list[str] = field(default_factory=list)  # run-level problems (e.g. an unreadable manifest line)

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(i.ok for i in self.items) and not self.problems

    def table(self) -> str:
        w = max([len(i.key) for i in self.items] + [4])
        head = f"{'item':<{w}}  " + " ".join(f"{c:>11}" for c in CHECKS)
        lines = [f"run directory: {self.run_dir}", head, "-" * len(head)]
        for i in self.items:
            cells = " ".join(f"{('ok' if i.results.get(c) else 'FAIL') if c in i.results else '-':>11}"
                             for c in CHECKS)
            lines.append(f"{i.key:<{w}}  {cells}")
            lines += [f"{'':<{w}}    {n}" for n in i.notes]
        bad = sum(not i.ok for i in self.items)
        lines.append(f"{len(self.items) - bad}/{len(self.items)} item(s) deliverable"
                     + (f"; {bad} FAILED" if bad else "") + (f"; {len(self.extra)} item folder(s) outside this plan"
                                                             if self.extra else ""))
        lines += [f"PROBLEM: {p}" for p in self.problems]
        return "\n".join(lines)


def _manifest_rows(run: RunDir, problems: list[str]) -> dict[str, ManifestRow]:
    if not run.manifest.is_file():
        problems.append(f"{run.manifest} is missing")
        return {}
    try:
        return {r.key: r for r in run.rows()}
    except UserError as exc:  # a line that is not JSON, a row that escapes the run
        problems.append(str(exc))
        return {}


def _leftovers(run_dir: Path, d: Path, key: str) -> list[str]:
    """Temporary files and partial videos in an item folder, and its lock (what a killed process leaves)."""
    from harness.locks import lock_name

    temps = [p.name for sub in (d, d / "controls") if sub.is_dir() for p in sub.iterdir()
             if p.name.startswith(".") and p.is_file() and p.name not in CONTROL_FILES]
    out = [f"{t} (a partial video)" if t.endswith(".partial.mp4") else t for t in sorted(temps)]
    lock = run_dir / ".locks" / lock_name(key)
    if lock.exists():
        out.append(f"{lock} (a lock: a process is on it, or died; a rerun takes a dead one over)")
    return out


def _status_note(d: Path, meta: Any) -> str:
    """Why an item is not done: its recorded status (and error), or why its ``meta.json`` cannot be read (a
    truncated one is a parse error, not a missing item)."""
    from harness.io import BadFileError, load_json

    if meta is None and (d / "meta.json").exists():
        try:
            load_json(d / "meta.json", fix="rerun the item (python -m harness <the run's overrides>)")
        except BadFileError as exc:
            return f"status: unreadable: {exc}"
    return (f"status: {meta.get('status') if meta else 'missing'}"
            + (f" ({meta.get('error')})" if meta and meta.get("error") else ""))


def check_item(run_dir: Path, item: Any, fingerprint: str, manifest: dict[str, ManifestRow]) -> ItemCheck:
    from harness.video import probe_video

    d = run_dir / item.rel_dir
    c = ItemCheck(item.key)
    meta = item_meta(d)
    left = _leftovers(run_dir, d, item.key)
    c.results["clean"] = not left
    if left:
        c.notes.append(f"temporary files left: {', '.join(left)}")
    c.results["done"] = meta is not None and meta.get("status") == "done"
    if meta is None or not c.results["done"]:
        c.notes.insert(0, _status_note(d, meta))
        return c
    problems = item_problems(d, meta)
    video, cam = _section(meta, "video"), _section(meta, "camera")
    try:
        info = probe_video(d / "video.mp4")
        c.results["decodes"] = True
    except Exception as exc:  # any decoder error means the delivery is broken
        c.results["decodes"] = False
        c.notes.append(f"video.mp4 does not decode: {type(exc).__name__}: {exc}")
        info = None
    if info is not None:
        want = cam.get("num_frames", video.get("num_frames"))
        c.results["frames"] = info["num_frames"] == want == video.get("num_frames")
        if not c.results["frames"]:
            c.notes.append(f"frames: decoded {info['num_frames']}, camera path {want}, meta {video.get('num_frames')}")
        fps = video.get("fps")
        fps = float(fps) if isinstance(fps, (int, float)) and not isinstance(fps, bool) else 0.0
        c.results["fps"] = fps > 0 and abs(info["fps"] - fps) <= 1e-3 * fps
        if not c.results["fps"]:
            c.notes.append(f"fps: stored {info['fps']:.4f}, meta {video.get('fps')!r}")
    vids = [p for p in problems if p.startswith("video.mp4") or "video.sha256" in p]
    c.results["sha256"] = not vids
    c.notes += vids
    others = [p for p in problems if p not in vids]
    c.results["files"] = not others
    c.notes += others
    c.results["fingerprint"] = meta.get("fingerprint") == fingerprint
    if not c.results["fingerprint"]:
        c.notes.append("made with a different config (fingerprint differs from the current overrides)")
    row = manifest.get(item.key)
    c.results["manifest"] = row is not None and row.done and row.video_sha256 == video.get("sha256")
    if not c.results["manifest"]:
        c.notes.append("manifest.jsonl row missing or stale")
    return c


def verify_run(cfg: RunConfig | Mapping[str, Any]) -> VerifyReport:
    """Check the run of ``cfg`` (the run's own overrides; every shard's items). A plain mapping (API use) is
    typed first."""
    from harness.app.plan import plan_from_config
    from harness.app.runner import fingerprints, item_is_current

    cfg = RunConfig.coerce(cfg)
    imported = RunDir.for_name(cfg.output_root, cfg.run)
    if (imported.path / "release" / "import.json").is_file():
        return verify_imported(imported)
    plan = plan_from_config(cfg.replace(shard="0/1"), for_writing=False)
    if not plan.run_dir.is_dir():
        raise PlanError(f"run={cfg.run!r}: no run at {plan.run_dir}; give verify the overrides of the run "
                        "to check (run=<name>, and the model / context / trajectory / cases it used)")
    report = VerifyReport(plan.run_dir)
    item_fingerprints = fingerprints(plan)
    run = RunDir(plan.run_dir)
    manifest = _manifest_rows(run, report.problems)
    for item in plan.all_items:
        fingerprint = item_fingerprints[item.key][0]
        meta = item_meta(plan.run_dir / item.rel_dir)
        if meta and meta.get("status") == "done" and item_is_current(plan, item, meta):
            fingerprint = meta["fingerprint"]  # made with today's inputs but another trajectory's frame override
        report.items.append(check_item(plan.run_dir, item, fingerprint, manifest))
    planned = {i.key for i in plan.all_items}
    report.extra += [key for key in run.item_keys() if key not in planned]
    # leftovers elsewhere in the run (a folder of another config, the manifest's own temporaries); the planned
    # items' own leftovers are in their rows
    from harness.locks import lock_name

    mine = {str(run.path / i.rel_dir) for i in plan.all_items} | {lock_name(i.key) for i in plan.all_items}
    report.problems += [p for p in run.problems()
                        if not any(m in p for m in mine)]
    return report


def _provenance(d: Path, meta: dict[str, Any]) -> str | None:
    """Why an imported item's video is no longer the release's file it was imported from (None: it is)."""
    rel = _section(meta, "release")
    stamp, src = _section(rel, "video"), _section(meta, "source").get("video")
    if not stamp or not isinstance(src, str):
        return "meta.json: release.video or source.video is missing (not written by release import)"
    try:
        st = Path(src).stat()
        mine = (d / "video.mp4").resolve().stat()
    except OSError as exc:
        return f"the release's file is gone ({type(exc).__name__}: {src}); rerun release import (it removes the item)"
    now = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "dev": st.st_dev, "ino": st.st_ino}
    changed = [k for k in now if stamp.get(k) != now[k]]
    if changed:
        return f"the release's file changed since the import ({', '.join(changed)}); rerun release import"
    if (mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino):
        return "video.mp4 is no longer the release's file (replaced in the item folder); rerun release import"
    return None


def verify_imported(run: RunDir) -> VerifyReport:
    """The delivery check of an imported release: every item its manifest or folders name (see the module)."""
    from harness.outputs import WorkItem

    report = VerifyReport(run.path)
    manifest = _manifest_rows(run, report.problems)
    keys = sorted(set(manifest) | set(run.item_keys()))
    for key in keys:
        row = manifest.get(key)
        try:
            item = row.item if row is not None else WorkItem(*_key_parts(key))
        except (UserError, TypeError, ValueError) as exc:
            report.problems.append(f"{key}: not an item of this run ({exc})")
            continue
        c = check_item(run.path, item, "", manifest)
        meta = item_meta(run.path / item.rel_dir)
        if c.results.get("done") and meta is not None:
            why = _provenance(run.path / item.rel_dir, meta)
            c.results["fingerprint"] = why is None
            c.notes = [n for n in c.notes if not n.startswith("made with a different config")]
            c.notes += [why] if why else []
        report.items.append(c)
    report.problems += run.problems()
    if not keys:
        report.problems.append(f"{run.path}: an imported release with no item (rerun release import)")
    return report


def _key_parts(key: str) -> tuple[str, str, int, str, str]:
    """``<model>/<context>/seed-<s>/<trajectory>/<case>`` -> the :class:`WorkItem` fields."""
    model, context, seed, trajectory, case = key.split("/")
    if not seed.startswith("seed-"):
        raise ValueError(f"{seed!r} is not seed-<n>")
    return model, context, int(seed[5:]), trajectory, case
