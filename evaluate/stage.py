"""The evaluation stage: every finished item of a run -> ``metrics.json`` beside its video -> run tables.

Orchestration only. What is measured and decided lives elsewhere:

* :mod:`evaluate.config`: the settings (:class:`EvalConfig`), validated once;
* :mod:`evaluate.cache`: the family hashes that decide what a re-run recomputes, and the stored results it reuses;
* :mod:`evaluate.item`: one item as evaluation sees it (video decoded once, phases, windows, case, ground truth);
* :mod:`evaluate.backbones`: the backbone registry (lazy ``module:Class``, kinds paper/estimator/diagnostic/oracle);
* :mod:`evaluate.perceive`: backbone outputs per item, batched and cached per (video sha256, backbone, settings);
* :mod:`evaluate.families`: one module per metric family, each metric's spec owning its compute function
  (:mod:`evaluate.catalog`: the registry of those specs);
* :mod:`evaluate.validity`: estimators against ground truth (oracles never score a video).

Per item, each metric is computed with every configured backbone that is available; the others are recorded as
``not_computed`` with the reason (a missing weights folder: the exact fetch command). A backbone that fails, a
corrupt video or a non-finite pose marks the affected metrics ``failed`` with the reason; the rest of the run is
evaluated and tabled, and the run reports the failures (the CLI exits 1). A family's results are reused on re-runs
while the video's sha256 (re-hashed every time), that family's settings and its backbones' weights are unchanged.

Poses: OpenCV camera-to-world 4x4, world = camera frame of frame 0 (see :mod:`trajectories.conventions`).
"""

from __future__ import annotations

import functools
import itertools
import time
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Iterator, Optional

from .backbones import BackboneSet
from .cache import SCHEMA_VERSION, WeightsMemo, all_reused, current_hashes, family_hashes, read_result
from .config import EvalConfig
from .families import ROLE_SETTINGS, Family, all_families, missing
from .perception.base import BackboneUnavailable
from .results import ITEM_DONE, ITEM_FAILED, Entries, ItemResult, Status

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from .item import EvalItem, FrameBuffers
    from .judge import RunJudge
    from .perceive import ItemPerception
    from .weights_pack import WeightsPack

__all__ = ["EvalConfig", "SCHEMA_VERSION", "compute_family", "evaluate_item", "evaluate_run", "family_hashes"]


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def compute_family(fam: Family, item: EvalItem, perception: ItemPerception, settings: EvalConfig) -> Entries:
    """Every computation of ``fam``'s metric specs for every combination of its configured backbones, isolating
    failures (a failing backbone or formula fails that computation's metrics only)."""
    out: Entries = {}
    for step in fam.metrics:
        if not step.applies(item, settings):
            continue
        lists = [getattr(settings, ROLE_SETTINGS[r]) for r in step.roles]
        for combo in itertools.product(*lists):
            backbones = dict(zip(step.roles, combo))
            tag = "+".join(combo)
            try:
                # once loaded, keys carry the backbone's own label (e.g. template-ncc), as computed values do
                tag = "+".join(perception.label(name, role) for role, name in backbones.items())
                out.update(step.compute(item, perception, settings, backbones))
            except BackboneUnavailable as exc:
                for mid in step.ids:
                    out.update(missing(mid, tag, str(exc)))
            except Exception as exc:  # one failing backbone or formula fails this metric only
                for mid in step.ids:
                    out.update(missing(mid, tag, _failure(exc), status=Status.FAILED))
    return out


def _failed_result(item_dir: Path, meta: Optional[dict[str, Any]], reason: str,
                   item: Optional[dict[str, Any]] = None) -> ItemResult:
    """A whole item that could not be evaluated: every metric its case family reports, failed with the reason.
    ``item``: the work item as the run's manifest names it, for an item whose ``meta.json`` cannot be read."""
    meta = meta or {}
    fam = (meta.get("case") or {}).get("family", "?")
    from .catalog import METRICS

    ids = sorted(i for i, m in METRICS.items() if m.paper and m.family in ("camera", "quality", fam))
    metrics: Entries = {}
    for i in ids:
        metrics.update(missing(i, "", reason, status=Status.FAILED))
    item = meta.get("item") or item or {"model": "?", "context": "?", "seed": "?", "trajectory": "?",
                                        "case_id": item_dir.name}
    return ItemResult(item=item, status=ITEM_FAILED, reason=reason, case_family=fam, metrics=metrics,
                      schema_version=SCHEMA_VERSION,
                      extra={"family_hashes": {}, "validity": {}, "timings": {},
                             "timings_generation": meta.get("timings", {}),
                   # what the model was told for the item's context label (adapters: controls.context)
                   "context_ran": (meta.get("controls") or {}).get("context")})


@dataclass
class _Prepared:
    """One item before scoring: read once (``meta.json``, the video's bytes, hashed once), the reuse decided, and,
    when something is recomputed, decoded once. Built by :func:`_prepare` (the run does it on a background thread
    for the next item while the current one is scored)."""

    dir: Path
    meta: Optional[dict[str, Any]] = None
    video_sha: Optional[str] = None
    hashes: dict[str, str] = field(default_factory=dict)
    prev: Optional[ItemResult] = None
    reused: bool = False
    ctx: Optional[EvalItem] = None  # the decoded item (None when reused or failed)
    error: Optional[BaseException] = None  # unreadable metadata or video, undecodable video
    broken: Optional[str] = None  # why its files are not the ones meta.json recorded (then nothing is decoded)


def _prepare(item_dir: Path, ecfg: EvalConfig, root: Path, force: bool, weights_memo: Optional[WeightsMemo] = None,
             publish: Optional[Callable[[_Prepared], object]] = None, check: bool = False,
             pack: Optional[WeightsPack] = None,
             buffers: Optional[FrameBuffers] = None) -> _Prepared:
    """Read the item once: ``meta.json`` and the bytes of ``video.mp4``, hashed once (a replaced or truncated video
    is never reused: it is re-hashed on every evaluation); decide whether its ``metrics.json`` is reused whole; if
    not, decode the frames from the bytes that were hashed. Never raises: a broken item carries its ``error``.

    ``publish(prepared)``: called once, as soon as the item can be scored: for a decoded item when its first frame
    is in (the decode goes on here; readers of the frames wait for what they need, see
    :class:`evaluate.item.Decoding`), otherwise at the end.

    ``check``: first compare the item's files with the hashes its ``meta.json`` recorded
    (:func:`harness.outputs.item_problems`, given the video's bytes as read here: hashed once, and the bytes checked
    are the bytes decoded); a mismatch sets ``broken`` and nothing is decoded. ``buffers``: the run's
    :class:`evaluate.item.FrameBuffers` (the frame array reused from an item already scored)."""
    p = _Prepared(Path(item_dir))
    published: list[bool] = []

    def ready(ctx: Optional[EvalItem] = None) -> None:
        if publish is not None and not published:
            published.append(True)
            p.ctx = ctx if ctx is not None else p.ctx
            publish(p)

    try:
        _read_and_decode(p, ecfg, root, force, weights_memo, ready if publish is not None else None, check, pack,
                         buffers)
    except Exception as exc:  # noqa: BLE001 - an unexpected error fails this item, never a scorer left without frames
        if p.error is None and p.broken is None and p.ctx is None:
            p.error = exc
    finally:
        ready()
    return p


def _read_and_decode(p: _Prepared, ecfg: EvalConfig, root: Path, force: bool, weights_memo: Optional[WeightsMemo],
                     publish: Optional[Callable[[EvalItem], None]], check: bool,
                     pack: Optional[WeightsPack] = None,
                     buffers: Optional[FrameBuffers] = None) -> None:
    from .item import load_item, read_source

    if check and not p.dir.is_dir():  # deleted or moved since the run: nothing to read, and nothing to write there
        import logging

        p.broken = (f"its folder {p.dir} is missing (deleted or moved after it was generated): not evaluated; rerun "
                    "the run's command to regenerate it, or re-import the video")
        logging.getLogger(__name__).warning("%s", p.broken)
        return
    try:
        src = read_source(p.dir)
    except Exception as exc:
        p.meta = _meta_or_none(p.dir)  # the failed result still names the item and its case when it is readable
        p.broken = _integrity(p.dir, p.meta) if check else None
        p.error = exc
        return
    p.meta, p.video_sha = src.meta, src.sha256
    p.broken = _integrity(p.dir, src.meta, (len(src.data), src.sha256)) if check else None
    if p.broken is not None:
        return
    p.hashes = family_hashes(ecfg, src.sha256, root, weights_memo, pack)
    p.prev = None if force else read_result(p.dir / "metrics.json")
    p.reused = all_reused(p.prev, p.hashes, src.sha256)
    if not p.reused:
        try:
            ctx = load_item(p.dir, ecfg, source=src, publish=publish, buffers=buffers)
            if publish is None:  # else the scorer got it already (and may have let go of it)
                p.ctx = ctx
        except Exception as exc:
            p.error = exc


@dataclass
class _Pending:
    """An item whose metrics are computed except the judge's (the run's judge pool answers later): finished by
    :meth:`finish`, which writes ``metrics.json`` once. Holds no frames."""

    futures: list[Future[Entries]]
    finish_fn: Callable[[], ItemResult]

    def ready(self) -> bool:
        return all(f.done() for f in self.futures)

    def finish(self) -> ItemResult:
        return self.finish_fn()


def _judge_entries(fam: Family, future: Future[Entries]) -> Entries:
    """The judge family's entries from its future, failures isolated as :func:`compute_family` does."""
    out: Entries = {}
    for metric in fam.metrics:
        try:
            out.update(future.result())
        except Exception as exc:
            for mid in metric.ids:
                out.update(missing(mid, "", _failure(exc), status=Status.FAILED))
    return out


def _start_item(item_dir: Path, ecfg: EvalConfig, force: bool, backbones: BackboneSet, use_cache: bool,
                prepared: Optional[_Prepared], judge: Optional[RunJudge] = None,
                keep_strip_frames: Optional[dict[Path, tuple[list[int], np.ndarray]]] = None,
                item: Optional[dict[str, Any]] = None) -> ItemResult | _Pending:
    """Everything of :func:`evaluate_item` up to the judge's answer: reused or failed items are final at once; with
    a run ``judge`` (:class:`evaluate.judge.RunJudge`), a dynamic item's request is sent first, from the frames
    already decoded, and the other families are computed while it is in flight. ``keep_strip_frames``: where an
    item finished here leaves copies of the few frames its revisit strip may show (``[item_dir] = (indices,
    frames)``); an item left waiting on the judge keeps none (the report draws its strip). ``item``: the work item
    as the run's manifest names it (what a failed result names when ``meta.json`` cannot be read)."""
    item_dir = Path(item_dir)
    p = prepared if prepared is not None else _prepare(item_dir, ecfg, backbones.root, force, pack=backbones.pack)
    final = _final_at_once(item_dir, p, item)
    if final is not None:
        return final
    return _score_item(item_dir, p, ecfg, backbones, use_cache, judge, keep_strip_frames)


def _final_at_once(item_dir: Path, p: _Prepared, item: Optional[dict[str, Any]]) -> Optional[ItemResult]:
    """The result of an item that is not scored: a broken or unreadable one fails whole (written), a reused one is
    its stored result; None for an item to score."""
    from harness.io import write_sealed_json

    reason = p.broken if p.broken is not None else _failure(p.error) if p.error is not None else None
    if reason is not None:  # trust nothing on disk: a swapped file is never scored
        res = _failed_result(item_dir, p.meta, reason, item)
        if item_dir.is_dir():  # a missing folder is not made again for a lone metrics.json
            write_sealed_json(item_dir / "metrics.json", res.to_dict())
        return res
    if p.reused and p.prev is not None:  # reused: a stored result matches every family hash
        p.prev.extra["reused"] = True
        return p.prev
    return None


@dataclass
class _Scoring:
    """One item's families being scored: the entries computed so far (``metrics``, in the families' order), the
    seconds each family took, and the judge's requests in flight (``deferred``: family -> future of its entries).
    ``kept``: the family hashes of the stored result, whose entries (``prev_metrics``) are kept where they match."""

    families: tuple[Family, ...]
    hashes: dict[str, str]
    kept: dict[str, str]
    prev_metrics: Entries
    metrics: Entries = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    deferred: dict[str, Future[Entries]] = field(default_factory=dict)
    to_defer: list[Family] = field(default_factory=list)

    def run(self, ctx: EvalItem, perc: ItemPerception, ecfg: EvalConfig, judge: Optional[RunJudge]) -> None:
        """Every family in order, a stored family kept, the judge's family sent to ``judge`` (when given) early."""
        self.to_defer = [f for f in self.families if judge is not None and f.name == "dynamic"
                         and self.kept.get(f.name) != self.hashes[f.name] and all(m.applies(ctx, ecfg)
                                                                                  for m in f.metrics)]
        for n, fam in enumerate(self.families):
            if n == 1:  # the judge's request needs the last frame: sent once the first family (which may start on a
                self.submit_deferred(ctx, ecfg, judge)  # video still decoding) is done, then in flight meanwhile
            if fam.name in self.deferred or any(f.name == fam.name for f in self.to_defer):
                continue
            if self.kept.get(fam.name) == self.hashes[fam.name]:
                self.metrics.update({k: v for k, v in self.prev_metrics.items() if v.family == fam.name})
                continue
            t0 = time.perf_counter()
            self.record(fam, compute_family(fam, ctx, perc, ecfg))
            self.timings[fam.name] = time.perf_counter() - t0
        self.submit_deferred(ctx, ecfg, judge)

    def record(self, fam: Family, entries: Entries) -> None:
        for k, v in entries.items():
            v.family = fam.name
            v.settings_hash = self.hashes[fam.name]
            self.metrics[k] = v

    def submit_deferred(self, ctx: EvalItem, ecfg: EvalConfig, judge: Optional[RunJudge]) -> None:
        from concurrent.futures import Future

        from .families.dynamic import judge_input

        for fam in self.to_defer:
            assert judge is not None  # only deferred with a judge
            t0 = time.perf_counter()
            try:
                self.deferred[fam.name] = judge.submit(judge_input(ctx, ecfg), ctx.dir)
            except Exception as exc:  # a malformed input (or video) fails this family only, as in compute_family
                failed: Future[Entries] = Future()
                failed.set_exception(exc)
                self.deferred[fam.name] = failed
            self.timings[fam.name] = time.perf_counter() - t0
        self.to_defer.clear()

    def collect_deferred(self, t1: float) -> None:
        """The judge's answers, in the families' order (the deferred family is the last one, so ``metrics.json``
        keeps the family order); its time counts from ``t1``, when the item was finished."""
        for fam in self.families:
            if fam.name in self.deferred:
                self.record(fam, _judge_entries(fam, self.deferred[fam.name]))
                self.timings[fam.name] += time.perf_counter() - t1


def _score_item(item_dir: Path, p: _Prepared, ecfg: EvalConfig, backbones: BackboneSet, use_cache: bool,
                judge: Optional[RunJudge],
                keep_strip_frames: Optional[dict[Path, tuple[list[int], np.ndarray]]]) -> ItemResult | _Pending:
    """Score a prepared item (:func:`_start_item`): its result, or, while the judge answers, a :class:`_Pending`."""
    from harness.io import write_sealed_json

    from .perceive import ItemPerception
    from .validity import item_validity

    meta: dict[str, Any] = p.meta or {}  # read (else p.error is set)
    prev = p.prev
    kept = current_hashes(prev) if prev is not None and prev.video_sha256 == p.video_sha else {}
    t_item = time.perf_counter()
    ctx = p.ctx
    assert ctx is not None  # decoded: neither broken, failed nor reused
    p.ctx = None  # the caller's handle no longer keeps the frames alive
    perc = ItemPerception(ctx, backbones, use_cache=use_cache)
    scoring = _Scoring(all_families(), p.hashes, kept, prev.metrics if prev is not None else {})
    scoring.run(ctx, perc, ecfg, judge)
    if kept.get("validity") == p.hashes["validity"]:
        validity = prev.validity if prev is not None else {}
    else:
        validity = item_validity(ctx, perc, ecfg) if ecfg.validity else {}
    bad = ctx.decode_error()  # a video that turned out corrupt or short while it was scored fails as a whole
    if bad is not None:
        for f in scoring.deferred.values():
            f.cancel()
        res = _failed_result(item_dir, meta, _failure(bad))
        write_sealed_json(item_dir / "metrics.json", res.to_dict())
        return res
    head = _Head(ctx.family, ctx.num_revisits, {k: list(v) for k, v in ctx.phases.items()})
    busy = time.perf_counter() - t_item
    if keep_strip_frames is not None and not scoring.deferred:
        from .reporting.strips import strip_frame_candidates

        shown = strip_frame_candidates(scoring.metrics.values())
        if shown:
            keep_strip_frames[item_dir] = (shown, ctx.frames_at(shown))
    del ctx, perc  # a pending item keeps its metrics, not its frames
    finish = functools.partial(_finish_item, item_dir, scoring, meta, p.video_sha, head, validity, busy, ecfg,
                               backbones)
    return _Pending(list(scoring.deferred.values()), finish) if scoring.deferred else finish()


@dataclass(frozen=True)
class _Head:
    """The item facts ``metrics.json`` states before its metrics: case family, revisits, phases (frame ranges)."""

    case_family: str
    num_revisits: int
    phases: dict[str, list[int]]


def _finish_item(item_dir: Path, scoring: _Scoring, meta: dict[str, Any], video_sha: Optional[str], head: _Head,
                 validity: dict[str, Any], busy: float, ecfg: EvalConfig, backbones: BackboneSet) -> ItemResult:
    """The judge's answers in, the item's result written (``metrics.json``, sealed) and returned. ``busy``: the
    seconds the item was scored before."""
    from harness.io import write_sealed_json

    t1 = time.perf_counter()
    scoring.collect_deferred(t1)
    metrics = scoring.metrics
    failed = sorted(k for k, v in metrics.items() if v.status is Status.FAILED)
    work_item: Any = meta.get("item")  # meta.json's work item, as JSON (null in a meta.json without one, as before)
    result = ItemResult(
        item=work_item,
        status=ITEM_FAILED if failed else ITEM_DONE,
        reason=(f"{len(failed)} metric(s) failed: " + "; ".join(f"{k}: {metrics[k].reason}" for k in failed[:3])
                if failed else None),
        video_sha256=video_sha, metrics=metrics, schema_version=SCHEMA_VERSION, case_family=head.case_family,
        num_revisits=head.num_revisits, phases=head.phases,
        extra={"settings": asdict(ecfg), "backbones": backbones.provenance(), "family_hashes": scoring.hashes,
               "validity": validity, "timings": {**scoring.timings, "item_s": busy + time.perf_counter() - t1},
               "timings_generation": meta.get("timings", {})})
    write_sealed_json(item_dir / "metrics.json", result.to_dict())
    return result


def evaluate_item(item_dir: Path, ecfg: EvalConfig, force: bool = False, backbones: Optional[BackboneSet] = None,
                  use_cache: bool = True, prepared: Optional[_Prepared] = None,
                  judge: Optional[RunJudge] = None) -> ItemResult:
    """Compute (or reuse) every metric family of one item and write ``metrics.json`` atomically.

    The item is read once (:func:`_prepare`: meta, the video's bytes hashed once, decoded once when something is
    recomputed); ``prepared`` passes that in (the run prepares the next item while the current one is scored).
    ``judge``: a run's :class:`evaluate.judge.RunJudge` (default: the checklist judge is asked here, in turn).
    Never raises for a broken item: a corrupt video or unreadable metadata gives a ``status: failed`` result (also
    written), with the reason.
    """
    backbones = backbones or BackboneSet(ecfg)
    out = _start_item(item_dir, ecfg, force, backbones, use_cache, prepared, judge)
    return out.finish() if isinstance(out, _Pending) else out


def _warm_up() -> None:
    """Import what the per-item loop and the run tables will need (the metric families, the formulas, matplotlib
    with the Agg backend the reports use), on the decode thread while the first item is scored: these one-off
    seconds (about 1 s of matplotlib) then overlap the backbones instead of adding to the run tables."""
    from . import perceive, validity  # noqa: F401
    from .families import all_families
    from .reporting.plots import _plt

    all_families()
    _plt()


@contextmanager
def _opencv_single_threaded() -> Iterator[None]:
    """OpenCV's own thread pool off while the block runs (restored after): the weight-free backbones already run
    their frames on threads of their own (:func:`evaluate.perception.weightfree.default_threads`), and OpenCV's
    pool on top of them only adds workers that wait and spin for the same cores. Results do not depend on it (the
    same bytes either way: tests/evaluate/test_perceive_once.py)."""
    try:
        import cv2
    except ImportError:  # no OpenCV: nothing to set
        yield
        return
    old = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(old)


def _meta_or_none(item_dir: Path) -> Optional[dict[str, Any]]:
    from harness.outputs import item_meta

    return item_meta(item_dir)


def _integrity(item_dir: Path, meta: Optional[dict[str, Any]], video_read: Optional[tuple[int, str]] = None) -> Optional[str]:
    """Why the item's files no longer match its ``meta.json`` (:func:`harness.outputs.item_problems`: video,
    ``camera.npz``, ``controls/``, section types), logged once; None when they match. ``video_read``: (size, sha256)
    of the ``video.mp4`` bytes already read (the video is then not read or hashed again)."""
    import logging

    from harness.outputs import _section, item_problems

    if meta is None:
        problems = ["meta.json is missing or not JSON"]
    else:
        named = str(_section(meta, "video").get("file") or "video.mp4")
        problems = item_problems(item_dir, meta, video_read if named == "video.mp4" else None)
    if not problems:
        return None
    why = ("; ".join(problems) + ": not evaluated (its files are not the ones generated); rerun the run's command to "
           "regenerate it, or re-import the video")
    logging.getLogger(__name__).warning("%s: %s", item_dir, why)
    return why


def evaluate_run(run_dir: Path, ecfg: EvalConfig, force: bool = False, progress: bool = False,
                 weights_root: Optional[Path] = None, use_cache: bool = True, strips_ahead: bool = True,
                 only: Optional[Collection[Path]] = None, tables: bool = True) -> dict[str, Any]:
    """Evaluate every ``done`` item of ``run_dir``'s manifest and write ``run_dir/eval/`` (the run's report page,
    tables, analyses: :func:`evaluate.reporting.run.write_run_outputs`). ``strips_ahead``: draw each item's revisit
    strip as soon as it is scored (:class:`evaluate.reporting.strips.StripsAhead`); off, the report draws them all
    at the end (``python -m harness.bench eval`` times the evaluation without the report's work).

    ``only``: evaluate just these item folders (those of the manifest's done rows among them); ``tables=False``:
    write each item's ``metrics.json`` (and its strip) but not the run's ``eval/`` folder. A parallel sweep's job
    scores its own items so, and the sweep writes the run's tables and report once at the end (harness/app/sweep.py).

    Returns ``{evaluated, failed: [(item, reason)], skipped_not_done, results, tables, analyses, validity, html,
    report, verdict, timings}`` (with ``tables=False``: no ``tables`` ... ``verdict``); ``timings["strips_cpu_s"]``:
    the CPU seconds of the strips drawn ahead (report work done during the scoring).
    """
    from harness.outputs import RunDir

    t0 = time.perf_counter()
    run = RunDir(Path(run_dir))
    run_dir = run.path
    if not run.manifest.exists():
        raise FileNotFoundError(f"{run.manifest} not found: evaluate a run directory made by the harness "
                                "(or use the videos= mode for videos made elsewhere)")
    rows = run.rows()  # a row that escapes the run is a user error: nothing is evaluated or written
    done = [r for r in rows if r.done]
    if only is not None:
        wanted = {Path(d).resolve() for d in only}
        done = [r for r in done if run.item_dir(r.dir).resolve() in wanted]
    backbones = BackboneSet(ecfg, weights_root)
    # a link out of the release's weights pack is refused here, before anything is written (exit code 2)
    backbones.check_pack(n for setting in ROLE_SETTINGS.values() for n in getattr(ecfg, setting))
    dirs = [run.item_dir(r.dir) for r in done]
    named: list[dict[str, Any]] = [{"model": r.model, "context": r.context, "seed": r.seed,
                                    "trajectory": r.trajectory, "case_id": r.case_id}
                                   for r in done]  # an item whose folder or meta.json is gone is still named
    slots, strips_cpu = _score_items(run_dir, dirs, named, ecfg, backbones, force, use_cache, strips_ahead,
                                     progress)
    results = [r for r in slots if r is not None]
    failed = [(r.item, r.reason or "") for r in results if r.failed]
    if not tables:
        return {"evaluated": len(results), "failed": failed, "skipped_not_done": len(rows) - len(done),
                "results": results, "timings": {"total_s": time.perf_counter() - t0, "strips_cpu_s": strips_cpu,
                                                **backbones.clock}}
    t_tables = time.perf_counter()
    from .reporting.run import write_run_outputs

    # the run's eval/ folder: its report page, run tables, analyses and validity, from these results (one analysis)
    outputs = write_run_outputs(run_dir, list(zip(dirs, results)), ecfg)
    total = time.perf_counter() - t0 - outputs["report_s"]  # as before: the study report is not timed
    return {"evaluated": len(results), "failed": failed, "skipped_not_done": len(rows) - len(done),
            "results": results, **outputs,
            "timings": {"total_s": total, "tables_s": time.perf_counter() - t_tables, "strips_cpu_s": strips_cpu,
                        **backbones.clock}}


def _score_items(run_dir: Path, dirs: list[Path], named: list[dict[str, Any]], ecfg: EvalConfig,
                 backbones: BackboneSet, force: bool, use_cache: bool, strips_ahead: bool,
                 progress: bool) -> tuple[list[Optional[ItemResult]], float]:
    """Every item of ``dirs`` scored, in order (:func:`evaluate_run`): the result of each, in that order, and the
    CPU seconds spent drawing strips ahead (report work, :class:`evaluate.reporting.strips.StripsAhead`).

    Per item: read meta.json and the video's bytes once, hash them once, check them against meta.json's hashes
    (trust nothing on disk), decide reuse, decode once (only when something is recomputed), on a background thread
    for the next item while the current one is scored (PyAV releases the GIL). A dynamic item's judge request is
    built from those frames and sent at once, up to evaluate.judge.concurrency in flight across the run (one request
    per item; stored answers are reused); the item is finished (metrics.json written) when its answer is in, and the
    run goes on meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    from .item import FrameBuffers
    from .judge import RunJudge
    from .reporting import default_out_dir
    from .reporting.strips import StripsAhead, strips_dir

    it: Iterable[Path] = dirs
    if progress:
        from tqdm import tqdm

        it = tqdm(dirs, desc="evaluate", unit="video")
    weights_memo: WeightsMemo = {}
    buffers = FrameBuffers()  # each video's frames decoded into an array an earlier item let go of
    pending: dict[int, _Pending] = {}
    slots: list[Optional[ItemResult]] = [None] * len(dirs)
    shown: dict[Path, tuple[list[int], np.ndarray]] = {}  # item -> the frames its strip may show, until it is drawn

    def final(j: int, res: ItemResult) -> None:
        slots[j] = res
        kept = shown.pop(dirs[j], None)
        if strips_ahead:
            strips.submit(dirs[j], res, kept)

    def finish_ready(block: bool) -> None:
        for j in sorted(pending):
            if block or pending[j].ready():
                final(j, pending.pop(j).finish())

    # the strips are drawn while the next videos are scored (the report then finds them fresh)
    with RunJudge(ecfg.judge) as judge, StripsAhead(run_dir, strips_dir(default_out_dir([run_dir]))) as strips, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval-decode") as pool, _opencv_single_threaded():
        def prepare(i: int) -> Optional[Future[_Prepared]]:
            return _prepare_ahead(pool, dirs, i, ecfg, backbones, force, weights_memo, buffers)

        nxt = prepare(0)
        warm = pool.submit(_warm_up)  # after the first decode, before the second: off the main thread's clock
        for i, _ in enumerate(it):
            cur, nxt = nxt, prepare(i + 1)
            assert cur is not None  # item i exists
            out = _start_item(dirs[i], ecfg, force, backbones, use_cache, cur.result(), judge,
                              shown if strips_ahead else None, named[i])
            cur = None  # drop this video's frames now: at most two videos are in memory at once
            if isinstance(out, _Pending):
                pending[i] = out
            else:
                final(i, out)
            finish_ready(block=False)
        finish_ready(block=True)
        warm.result()
    return slots, strips.cpu_s


def _prepare_ahead(pool: ThreadPoolExecutor, dirs: list[Path], i: int, ecfg: EvalConfig, backbones: BackboneSet,
                   force: bool, weights_memo: WeightsMemo,
                   buffers: Optional[FrameBuffers] = None) -> Optional[Future[_Prepared]]:
    """A future that holds item ``i`` as soon as it can be scored (its first frame decoded), prepared on ``pool``;
    None past the last item."""
    if i >= len(dirs):
        return None
    ready: Future[_Prepared] = Future()

    def task() -> None:
        try:
            _prepare(dirs[i], ecfg, backbones.root, force, weights_memo, publish=ready.set_result,
                     check=True, pack=backbones.pack, buffers=buffers)
        except BaseException as exc:  # never leave the scorer waiting
            if not ready.done():
                ready.set_exception(exc)
            raise

    pool.submit(task)
    return ready
