"""Execution: compile, generate and write each item; resume, share run directories, keep going on failures.

Per item (``outputs/<run>/<model>/<context>/seed-<s>/<trajectory>/<case>/``): ``video.mp4`` (H.264),
``camera.npz`` (c2w, K, fps, phases), ``controls/`` (exactly what the model received), ``context_trace.json``,
``meta.json`` (config, seeds, fingerprint, versions, timings, status). Per run: ``manifest.jsonl``.

Guarantees:
- Every file is written atomically; ``meta.json`` is written last with ``status: done``, so a killed run leaves no
  item that looks finished, and a rerun redoes exactly the unfinished ones.
- An item is worked on by one process at a time (``.locks/``, see :mod:`harness.locks`): several shards, ranks or
  identical commands can share a run directory; each item is done once; a dead owner's lock is taken over.
- A finished item is skipped only when its config fingerprint (:mod:`harness.fingerprint`) equals the current
  one (otherwise the run refuses before writing anything, :func:`check_fingerprints`) and its files still match
  the hashes ``meta.json`` recorded (video, ``camera.npz``, ``controls/``; :func:`harness.outputs.item_problems`);
  an item whose files changed is redone, and the run says why.
- Upstream jobs (``gpus_per_job > 0``) run concurrently on disjoint GPU sets from a :class:`GPUPool`.
- Secrets in ``model.env`` never reach ``meta.json`` (:mod:`harness.secrets`).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from harness.cases import Case
from harness.dist import Rank, current_rank, split
from harness.fingerprint import item_fingerprint, sha256_text  # noqa: F401  (re-exported)
from harness.gpu_pool import GPUPool, current_devices
from harness.io import sha256_file, write_bytes, write_json
from harness.locks import ItemLocks
from harness.outputs import (FINISHED, SCHEMA_VERSION, ManifestRow, PlanError, RunDir, git_state,  # noqa: F401
                             item_meta, item_problems, item_status, remove_stale_temps, versions)
from harness.app.plan import (Plan, WorkItem, check_trajectories, load_cases_from_config, plan_from_config,
                              resolve_context)
from harness.app.run_config import RunConfig
from harness.record import ItemRecord, SharedText, camera_facts, write_record
from harness.errors import ConfigError

if TYPE_CHECKING:
    from adapters.base import Adapter
    from harness.context import ContextPolicy
    from trajectories import CameraPath, TrajectorySpec

#: the planning API, also importable from here
__all__ = ["FingerprintMismatch", "ManifestRow", "PlanError", "RunDir", "RunSummary", "check_fingerprints",
           "check_trajectories", "fingerprints", "gpu_pool_for", "item_fingerprint", "item_is_current", "job_gpus",
           "load_cases_from_config", "plan_from_config", "pool_from_config", "resolve_context", "run_complete",
           "run_items", "sha256_text"]

log = logging.getLogger(__name__)


class FingerprintMismatch(ConfigError):
    """A finished item was made with a different config; rerunning would silently mix two configs."""


@dataclass
class RunSummary:
    run_dir: Path
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)  # finished meanwhile by another process sharing the run
    taken_over: list[str] = field(default_factory=list)
    redone: dict[str, str] = field(default_factory=dict)  # done item whose files no longer matched -> why
    causes: dict[str, str] = field(default_factory=dict)  # failed item -> root-cause line (upstream.log) or error
    seconds: float = 0.0
    max_concurrent: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed

    def table(self) -> str:
        rows = [("done", len(self.done)), ("compiled (dry run)", len(self.compiled)), ("skipped (already done)",
                len(self.skipped)), ("done elsewhere", len(self.elsewhere)), ("failed", len(self.failed)),
                ("wall time [s]", f"{self.seconds:.1f}")]
        w = max(len(r[0]) for r in rows)
        lines = [f"run directory: {self.run_dir}"] + [f"  {k:<{w}}  {v}" for k, v in rows]
        lines += [f"  took over stale lock: {k}" for k in self.taken_over]
        lines += [f"  redone (its files no longer matched meta.json): {k}: {why}" for k, why in self.redone.items()]
        lines += [f"  FAILED: {k}: {self.causes.get(k, 'see its meta.json')}" for k in self.failed]
        if self.failed and not (self.done or self.compiled or self.skipped or self.elsewhere):
            lines.append("  no video was produced: the failures above are the cause (not the metrics)")
        return "\n".join(lines)


def encoder_settings() -> dict[str, Any]:
    from harness.video import x264_options

    return {"codec": "libx264", "pix_fmt": "yuv420p", **x264_options()}


def fingerprints(plan: Plan) -> dict[str, tuple[str, dict[str, str]]]:
    """key -> (fingerprint, per-part short hashes) for every item of ``plan`` (all shards)
    (:func:`harness.fingerprint.item_fingerprints`: the same values as :func:`item_fingerprint` item by item),
    computed once per plan."""
    from harness.fingerprint import item_fingerprints

    cached = getattr(plan, "_fingerprints", None)
    if cached is None:
        cached = item_fingerprints(plan.adapter, plan.policy, plan.specs, plan.case_by_id,
                                   plan.all_items or plan.items, encoder_settings())
        plan._fingerprints = cached  # type: ignore[attr-defined]
    return cached


def check_fingerprints(plan: Plan, overwrite: bool, dry_run: bool = False) -> None:
    """Refuse (before anything is written) when a finished item was made with a different config, or when a dry
    run with ``overwrite=true`` would replace finished items by compile-only records (orphaning their videos)."""
    from trajectories.migration import superseded_item

    if overwrite and not dry_run:
        return  # every item is made again
    metas = ((item, item_meta(plan.run_dir / item.rel_dir)) for item in plan.items)
    done = [(item, m) for item, m in metas if m and m.get("status") == "done"]
    if overwrite:
        if done:
            raise PlanError(f"dry_run=true overwrite=true: {len(done)} item(s) of {plan.run_dir} are done (first: "
                            f"{done[0][0].key}); a dry run would replace their meta.json by a compile-only record "
                            "and orphan their videos. Drop overwrite=true (a dry run leaves done items alone) or "
                            "use run=<new>")
        return
    bad = []
    for item, m in done:
        fingerprint, parts = fingerprints(plan)[item.key]  # computed once, only when a finished item exists
        if m.get("fingerprint") != fingerprint and not item_is_current(plan, item, m) and not superseded_item(m):
            # (an item of a superseded trajectory layout is redone by this run: trajectories.migration)
            old = m.get("fingerprint_parts") or {}
            changed = sorted(k for k in parts if old.get(k) != parts[k]) if old else ["(recorded before fingerprints)"]
            bad.append((item.key, changed))
    if bad:
        key, changed = bad[0]
        raise FingerprintMismatch(
            f"{len(bad)} finished item(s) in {plan.run_dir} were made with a different config (first: {key}; "
            f"changed: {', '.join(changed)}). Use a new run name (run=<new>) or regenerate them (overwrite=true)."
        )


def _current_by_inputs(adapter: Adapter, context: ContextPolicy, spec: TrajectorySpec, case: Case, item: WorkItem,
                       meta: dict[str, Any]) -> bool:
    """A finished item whose recorded fingerprint differs from today's only through another trajectory's frame
    override (:func:`harness.fingerprint.fingerprint_with_recorded_frames`): it was made with today's inputs."""
    from harness.fingerprint import fingerprint_with_recorded_frames

    want = fingerprint_with_recorded_frames(adapter, context, spec, case, item, encoder_settings(), meta.get("model"))
    return want is not None and want == meta.get("fingerprint")


def item_is_current(plan: Plan, item: WorkItem, meta: dict[str, Any]) -> bool:
    """``meta`` (a finished item's ``meta.json``) was made with the plan's config: the same fingerprint, or one
    that differs only through another trajectory's frame override (:func:`_current_by_inputs`)."""
    if meta.get("fingerprint") == fingerprints(plan)[item.key][0]:
        return True
    case = plan.case_by_id.get(item.case_id)
    return case is not None and _current_by_inputs(plan.adapter, plan.policy, plan.specs[item.trajectory], case,
                                                   item, meta)


class _Executor:
    """Runs the items of one plan in this process (one thread per concurrent GPU job)."""

    def __init__(self, plan: Plan, dry_run: bool, overwrite: bool, rank: Rank, write_manifest: bool,
                 previews: bool = False):
        """``plan``: what to run (its adapter, policy, specs and cases) and the configuration it was made from,
        whose resolved mapping is recorded (redacted) in every ``meta.json``; its fingerprints
        (:func:`fingerprints`) decide which finished items are current."""
        config = plan.config
        self.plan = plan
        self.adapter, self.context, self.specs = plan.adapter, plan.policy, plan.specs
        self.run_dir, self.fingerprints = Path(plan.run_dir), fingerprints(plan)
        self.seed_source = "cli override" if config.seed is not None else "model default"
        self.run = RunDir(self.run_dir)
        self.dry_run, self.overwrite, self.rank = dry_run, overwrite, rank
        self.previews = previews
        self.write_manifest = write_manifest
        # a dry run's items take milliseconds: their manifest rows are written together at the end of the run
        # (rewriting the whole manifest after each item made a study's dry run quadratic in its size)
        self.pending_rows: list[dict[str, Any]] = []
        self.redact = plan.recorded  # the run's secrets, found once (harness.secrets.RedactedConfig)
        self.config = plan.recorded.config  # as written in meta.json
        self.argv = plan.recorded.args(sys.argv)
        self.versions, self.git = versions(), git_state()
        # parts of meta.json shared by every item: built once, serialised once (harness.record.SharedText)
        self.model_meta = self.redact(self.adapter.config.to_dict())
        self.context_meta = self.context.to_dict()
        self.spec_meta = {name: spec.to_dict() for name, spec in self.specs.items()}
        self.shared = SharedText(self.config, self.versions, self.git, self.argv, self.model_meta, self.context_meta,
                                 *self.spec_meta.values())
        self._camera_bytes: dict[int, tuple[Any, bytes, str]] = {}
        self.locks = ItemLocks(self.run_dir)
        self.broken: dict[str, str] = {}  # done items whose files no longer match their meta.json -> why
        self._checked: dict[tuple[str, Any, Any], list[str]] = {}
        self.started = time.time()
        self._mutex = threading.Lock()
        self.running = 0
        self.peak_running = 0

    # -- bookkeeping --------------------------------------------------------------------------------------------
    def finished_ok(self, item: WorkItem) -> Optional[str]:
        """Why ``item`` needs no work now: 'skipped' (done before, same config), 'elsewhere' (done meanwhile by
        another process), or None."""
        m = item_meta(self.run_dir / item.rel_dir)
        if not m:
            return None
        if not (m.get("fingerprint") == self.fingerprints[item.key][0]
                or (m.get("status") == "done" and item_is_current(self.plan, item, m))):
            self._note_superseded(item, m)
            return None
        if (m.get("status") in FINISHED and m.get("finished_unix", 0) >= self.started
                and m.get("owner_token") != self.locks.owner.token):
            return "failed" if m["status"] == "failed" else "elsewhere"  # finished meanwhile by another process
        if m.get("status") != "done" or self.overwrite:
            return None
        problems = self._integrity(item, m)
        if problems:  # trust nothing on disk: a truncated, missing or replaced file makes the item unfinished
            why = "; ".join(problems)
            if self.broken.get(item.key) != why:
                log.warning("%s: redoing it: %s", item.key, why)
            self.broken[item.key] = why
            return None
        return "skipped"

    def _note_superseded(self, item: WorkItem, m: dict[str, Any]) -> None:
        """A done item of a replaced trajectory layout (:mod:`trajectories.migration`) is redone; say why once."""
        from trajectories.migration import superseded_item

        why = superseded_item(m) if m.get("status") == "done" else None
        if why and self.broken.get(item.key) != why:
            log.warning("%s: redoing it: %s", item.key, why)
            self.broken[item.key] = why

    def _integrity(self, item: WorkItem, m: dict[str, Any]) -> list[str]:
        """:func:`harness.outputs.item_problems` of a done item, once per recorded state (the runner asks twice)."""
        video = m["video"] if isinstance(m.get("video"), dict) else {}
        k = (item.key, m.get("finished_unix"), video.get("sha256"))
        if k not in self._checked:
            self._checked[k] = item_problems(self.run_dir / item.rel_dir, m)
        return self._checked[k]

    def _start_record(self, item: WorkItem, case: Case) -> ItemRecord:
        """The record of ``item`` as it starts: identity, fingerprint, inputs, provenance, owner."""
        fingerprint, fingerprint_parts = self.fingerprints[item.key]
        devices = current_devices()
        owner = self.locks.owner
        return ItemRecord(
            schema_version=SCHEMA_VERSION, status="running", item=item, fingerprint=fingerprint,
            fingerprint_parts=fingerprint_parts, case=case.model_dump(), model=self.model_meta,
            context=self.context_meta, trajectory=self.spec_meta[item.trajectory], seed=item.seed,
            seed_source=self.seed_source, versions=self.versions, git=self.git, argv=self.argv, config=self.config,
            owner={"host": owner.host, "pid": owner.pid, "rank": self.rank.rank, "world": self.rank.world,
                   "devices": list(devices) if devices is not None else None, "slurm_job": owner.slurm_job},
            owner_token=owner.token, started=time.strftime("%Y-%m-%dT%H:%M:%S%z"))

    # -- one item -------------------------------------------------------------------------------------------------
    def execute(self, item: WorkItem) -> ItemRecord:
        from adapters.base import ItemRequest

        from harness.video import VideoWriter

        adapter, item_dir = self.adapter, self.run_dir / item.rel_dir
        case = self.plan.case_by_id[item.case_id]
        rec = self._start_record(item, case)
        if not self.dry_run:  # a long item says it is running; a dry-run item (milliseconds) writes meta.json once
            write_record(item_dir, rec, self.shared)
        t0 = time.perf_counter()
        writer = None
        try:
            K = adapter.canvas_K(case)
            mc = adapter.config
            path = adapter.path_for(self.specs[item.trajectory], K, item.trajectory)  # shared by cases (cached)
            camera_sha = self._save_camera(path, item_dir / "camera.npz")
            req = ItemRequest(case=case, path=path, context=self.context, seed=item.seed, item_dir=item_dir)
            controls = adapter.compile(req)
            rec.controls = told = self.redact({"files": sorted(Path(p).name for p in controls.files.values()),
                                               "command": controls.command, **controls.meta})
            rec.camera = camera_facts(path, camera_sha)
            if controls.decoded_c2w is not None:
                from harness.residuals import pose_residual

                told["achieved_vs_requested"] = {**pose_residual(path.c2w, controls.decoded_c2w),
                                                 **controls.meta.get("intrinsics_residual", {})}
            t_compile = time.perf_counter() - t0
            if self.dry_run:
                if self.previews:  # on request (previews=true): a matplotlib figure costs ~0.3 s an item
                    from trajectories.preview import preview_path

                    overlays = [("decoded native", controls.decoded_c2w)] if controls.decoded_c2w is not None else []
                    preview_path(path, item_dir / "preview.png", overlays=overlays,
                                 title=f"{item.key}: requested vs native")
                rec.status, rec.timings = "compiled", {"compile_s": t_compile}
            else:
                writer = VideoWriter(item_dir / "video.mp4", fps=path.fps)
                gen = adapter.generate(req, controls, writer)
                writer.close()
                if writer.num_frames != gen.num_frames:
                    raise RuntimeError(f"the model reported {gen.num_frames} frames but {writer.num_frames} were written")
                write_json(item_dir / "context_trace.json", {"policy": self.context.to_dict(),
                                                             **self.redact(gen.context_info),
                                                             "chunks": gen.context_trace})
                rec.status = "done"
                rec.video = {"file": "video.mp4", "num_frames": writer.num_frames, "fps": gen.fps,
                             "width": mc.width, "height": mc.height, "sha256": sha256_file(item_dir / "video.mp4"),
                             "size": (item_dir / "video.mp4").stat().st_size,
                             "frames_sha256": writer.frames_sha256, "encoder": encoder_settings()}
                rec.timings = {"compile_s": t_compile, **gen.timings, "total_s": time.perf_counter() - t0}
                rec.generation = self.redact(gen.meta)
        except Exception as exc:  # one failed item must not stop the run
            if writer is not None:
                writer.abort()
            self._failed(rec, exc)
        self._finish(item_dir, rec)
        return rec

    def _failed(self, rec: ItemRecord, exc: Exception) -> None:
        """Record why the item failed: the error and its traceback, the upstream exception line found in
        ``upstream.log`` and what generation measured before it failed (conformance residuals), secrets redacted."""
        rec.status = "failed"
        rec.error = self.redact(f"{type(exc).__name__}: {exc}")
        rec.traceback = self.redact(traceback.format_exc())
        root_cause = getattr(exc, "root_cause", None)
        if root_cause:
            rec.root_cause = self.redact(root_cause)
        measured = getattr(exc, "meta", None)
        if measured:
            rec.generation = self.redact(measured)

    def _finish(self, item_dir: Path, rec: ItemRecord) -> None:
        """Seal the record (controls' hashes, finish time, manifest row), write ``meta.json`` and the manifest row
        (a dry run's rows wait for :meth:`flush_manifest`)."""
        rec.seal(item_dir)
        write_record(item_dir, rec, self.shared)
        if self.write_manifest and rec.manifest is not None:
            row = rec.manifest.to_dict()
            if self.dry_run:
                with self._mutex:
                    self.pending_rows.append(row)
            else:
                self.run.update_manifest([row])

    def _save_camera(self, path: CameraPath, dst: Path) -> str:
        """``camera.npz`` (:meth:`CameraPath.save`); returns its sha256 (recorded in ``meta.json``). A camera path
        shared by several items (the compile cache hands out one object per spec, canvas and K) is serialised and
        hashed once; the later items get the same bytes."""
        import hashlib
        import io

        hit = self._camera_bytes.get(id(path))
        if hit is None or hit[0] is not path:
            buf = io.BytesIO()
            path.save_to(buf)
            if len(self._camera_bytes) > 64:  # paths are shared per spec, canvas and K: a few per run
                self._camera_bytes.clear()
            data = buf.getvalue()
            hit = self._camera_bytes[id(path)] = (path, data, hashlib.sha256(data).hexdigest())
        write_bytes(dst, hit[1])
        return hit[2]

    def flush_manifest(self) -> None:
        """Write the manifest rows a dry run collected (one rewrite for the whole run)."""
        with self._mutex:
            rows, self.pending_rows = self.pending_rows, []
        if rows:
            self.run.update_manifest(rows)

    def run_locked(self, item: WorkItem, summary: RunSummary, pool: Optional[GPUPool], gpus: int) -> bool:
        """Run ``item`` if this process can lock it; False when another live process holds it."""
        if not self.locks.try_acquire(item.key):
            return False
        try:
            why = self.finished_ok(item)  # re-check under the lock: another process may just have finished it
            if why is not None:
                self._record(summary, why, item.key)
                return True
            if item.key in self.broken:
                with self._mutex:
                    summary.redone[item.key] = self.broken[item.key]
            if item.key in self.locks.taken_over:
                with self._mutex:
                    summary.taken_over.append(item.key)
            remove_stale_temps(self.run_dir / item.rel_dir)  # we hold the lock: any temp file is a dead owner's
            if pool is not None and gpus > 0:
                with pool.job(gpus):
                    rec = self._counted(item)
            else:
                rec = self._counted(item)
            self._record(summary, rec.status, item.key)
            if rec.status == "failed":
                with self._mutex:
                    summary.causes[item.key] = rec.root_cause or (rec.error or "").splitlines()[0]
        finally:
            self.locks.release(item.key)
        return True

    def _counted(self, item: WorkItem) -> ItemRecord:
        with self._mutex:
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
        try:
            return self.execute(item)
        finally:
            with self._mutex:
                self.running -= 1

    def _record(self, summary: RunSummary, status: str, key: str) -> None:
        bucket = {"done": summary.done, "failed": summary.failed, "compiled": summary.compiled,
                  "skipped": summary.skipped, "elsewhere": summary.elsewhere}[status]
        with self._mutex:
            bucket.append(key)


def run_items(
    plan: Plan,
    dry_run: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    pool: Optional[GPUPool] = None,
    rank: Optional[Rank] = None,
    wait_poll_s: float = 0.5,
    previews: bool = False,
    on_start: Optional[Callable[[], None]] = None,
) -> RunSummary:
    """Execute ``plan.items`` (see the module docstring for what each writes and the guarantees).

    Items locked by another live process are revisited after this process's own items: the run returns only when
    every item is finished (by anyone), so a following evaluation sees the complete run. ``pool``: run upstream
    jobs concurrently on its GPUs (None = ``plan.pool``, else the ``devices`` setting of ``plan.config``; no GPUs =
    one at a time).
    ``rank``: this data-parallel rank (default: from the environment); rank r takes items r, r+N, ...
    ``previews``: in a dry run, also draw each item's ``preview.png`` (requested vs native path; slow).
    ``on_start``: called once the run is known to be consistent (fingerprints checked) and before anything is
    written (the command line saves its config there).
    """
    rank = rank or current_rank()
    adapter, context = plan.adapter, plan.policy
    items, run_dir = plan.items, plan.run_dir
    check_fingerprints(plan, overwrite, dry_run)  # refuse before anything is written
    fingerprints(plan)  # every item's (all shards), computed before anything is written
    if on_start is not None:
        on_start()
    my_items = split(list(items), rank)
    ex = _Executor(plan, dry_run, overwrite, rank, write_manifest=rank.is_main, previews=previews)
    gpus = job_gpus(adapter, dry_run)
    pool = pool if pool is not None else plan.pool
    if pool is None and gpus > 0:  # a plan made through the API (not prepared by the command line)
        pool = gpu_pool_for(adapter, plan.config, dry_run)
    workers = max(1, pool.capacity(gpus)) if (pool is not None and gpus > 0) else 1
    summary = RunSummary(run_dir=Path(run_dir))
    t_run = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(my_items), desc=f"{adapter.config.name}/{context.name}", unit="item", file=sys.stderr)

    try:
        _process_all(ex, summary, items, my_items, rank, pool, gpus, workers, bar, wait_poll_s)
    finally:
        ex.flush_manifest()  # a dry run's rows (also when interrupted); other items' rows are kept as they are
        ex.locks.release_all()
        if bar:
            bar.close()
    summary.max_concurrent = ex.peak_running
    if rank.is_main and not (dry_run and rank.world == 1):
        plan.run.rebuild_manifest()
    summary.seconds = time.perf_counter() - t_run
    return summary


def _process_all(ex: _Executor, summary: RunSummary, items: Sequence[WorkItem], my_items: list[WorkItem], rank: Rank,
                 pool: Optional[GPUPool], gpus: int, workers: int, bar: Any, wait_poll_s: float) -> None:
    """Run this rank's items (``workers`` at once), then, on the main rank of several, every item nobody started;
    then wait, polling, for the items another process holds until every one is finished (by anyone)."""

    def attempt(item: WorkItem) -> bool:
        why = ex.finished_ok(item)
        if why is not None:
            ex.locks.clear_stale(item.key)  # a dead owner's lock on a finished item: nobody else removes it
            ex._record(summary, why, item.key)
            return True
        return ex.run_locked(item, summary, pool, gpus)

    def process(batch: list[WorkItem]) -> list[WorkItem]:
        deferred: list[WorkItem] = []
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="harness-job") as tp:
                for item, ok in zip(batch, tp.map(attempt, batch)):
                    if not ok:
                        deferred.append(item)
                    elif bar:
                        bar.update(1)
        else:
            for item in batch:
                if not attempt(item):
                    deferred.append(item)
                elif bar:
                    bar.update(1)
        return deferred

    pending = process(my_items)
    if rank.world > 1 and rank.is_main:
        # rank 0 writes the manifest and evaluates, so it sees every rank's items through: it waits for the
        # ones another rank holds and does the ones nobody has started (the split decides who, never what)
        mine = set(my_items)
        pending += process([i for i in items if i not in mine])
    announced = 0.0
    while pending:
        time.sleep(wait_poll_s)
        if time.monotonic() - announced > WAIT_REMINDER_S:  # at first, then every few minutes: never silent
            _announce_wait(ex.locks, pending)
            announced = time.monotonic()
        pending = process(pending)


WAIT_REMINDER_S = 300.0


def _announce_wait(locks: ItemLocks, pending: Sequence[WorkItem]) -> None:
    """Say which processes hold the items this run waits for, and their lock files (a lock of another host is
    honoured until that file is deleted)."""
    import socket

    holders, files = set(), []
    for i in pending:
        h = locks.holder(i.key)
        if h is not None:
            holders.add(h.describe())
            files.append((h, locks.path(i.key)))
    if not files:  # every lock went (or went stale) between the try and this look: nothing to name
        log.info("waiting for %d item(s) whose lock was released or went stale a moment ago; trying them again",
                 len(pending))
        return
    log.info("waiting for %d item(s) held by another process (%s); lock file(s): %s%s", len(pending),
             "; ".join(sorted(holders)) or "?", ", ".join(str(p) for _, p in files[:3]),
             f" (+{len(files) - 3} more)" if len(files) > 3 else "")
    other = sorted({h.host for h, _ in files if h.host not in (socket.gethostname(), "?")})
    if other:
        log.warning("%d lock(s) are held from another host (%s), whose processes cannot be checked from here: if "
                    "that host is gone, delete the lock file(s) above and this run goes on", len(files),
                    ", ".join(other))


def job_gpus(adapter: Adapter, dry_run: bool = False) -> int:
    """GPUs one job of ``adapter`` holds: ``gpus_per_job``, which counts every device of the layout (torchrun ranks
    plus e.g. Matrix-Game 3's async-VAE GPU, ``vae_worker_gpus``); 0 on a dry run."""
    return 0 if dry_run else int(getattr(adapter.config, "gpus_per_job", 0) or 0)


def gpu_pool_for(adapter: Adapter, config: RunConfig, dry_run: bool = False) -> Optional[GPUPool]:
    """The pool upstream jobs of ``adapter`` draw from (None: no GPU job, or no GPU set/visible); refuses a job
    bigger than the pool before anything is written."""
    gpus = job_gpus(adapter, dry_run)
    pool = pool_from_config(config) if gpus > 0 else None
    if pool is not None and gpus > len(pool.devices):
        from harness.gpu_pool import DeviceConfigError

        raise DeviceConfigError(f"model={adapter.config.name} needs {gpus} GPU(s) per job but devices= gives "
                                f"{len(pool.devices)} ({','.join(pool.devices)}); add GPUs or lower model.gpus_per_job")
    return pool


def pool_from_config(cfg: RunConfig) -> Optional[GPUPool]:
    """The GPU pool of ``devices`` (``auto`` or a list; None or unset: no pool) and ``gpu_lock_dir``; None when no
    GPU is visible or set."""
    from harness.gpu_pool import parse_devices

    if "devices" not in cfg.model_fields_set:  # no setting at all (API use); devices=null means auto
        return None
    devs = parse_devices(cfg.devices)
    if not devs:
        return None
    return GPUPool(devs, Path(cfg.gpu_lock_dir) if cfg.gpu_lock_dir else None)


def run_complete(run_dir: Path, items: Sequence[WorkItem]) -> list[WorkItem]:
    """The items of ``items`` that are not finished yet (empty when the whole run can be evaluated)."""
    return [i for i in items if item_status(Path(run_dir) / i.rel_dir) not in FINISHED]
