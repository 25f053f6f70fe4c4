"""The evaluation stage: every finished item of a run -> ``metrics.json`` beside its video -> run tables.

Orchestration only. What is measured lives elsewhere:

* :mod:`evaluate.item`: one item as evaluation sees it (video decoded once, phases, windows, case, ground truth);
* :mod:`evaluate.backbones`: the backbone registry (lazy ``module:Class``, kinds paper/estimator/diagnostic/oracle);
* :mod:`evaluate.perceive`: backbone outputs per item, batched and cached per (video sha256, backbone, settings);
* :mod:`evaluate.families`: one module per metric family, each metric owning its compute function;
* :mod:`evaluate.validity`: estimators against ground truth (oracles never score a video).

Per item, each metric is computed with every configured backbone that is available; the others are recorded as
``not_computed`` with the reason (a missing weights folder: the exact fetch command). A backbone that fails, a
corrupt video or a non-finite pose marks the affected metrics ``failed`` with the reason; the rest of the run is
evaluated and tabled, and the run reports the failures (the CLI exits 1). A family's results are reused on re-runs
while the video's sha256 (re-hashed every time), that family's settings and its backbones' weights are unchanged.

Poses: OpenCV camera-to-world 4x4, world = camera frame of frame 0 (see :mod:`trajectories.conventions`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.errors import ConfigError

from . import memory as mem
from .backbones import BACKBONES, BackboneSet, check_names, spec
from .families import ROLE_SETTINGS, Family, all_families, missing
from .perception._loading import resolve_device
from .perception.base import BackboneUnavailable
from .results import ITEM_DONE, ITEM_FAILED, Entries, ItemResult, Status

# Bump when a metric rule changes: every family is recomputed on re-runs (3: departure.sweep_visible, parallax returns).
SCHEMA_VERSION = 3
FAMILIES = ("camera", "environment", "human", "object", "diagnostic", "departure", "quality", "dynamic")


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation settings (``conf/evaluate/<name>.yaml``); every value is recorded in each ``metrics.json``."""

    enabled: bool = True
    encoders: tuple[str, ...] = ("dinov2", "pixel")
    face: tuple[str, ...] = ("arcface",)
    trackers: tuple[str, ...] = ("sam2", "template")
    depth: tuple[str, ...] = ("da3",)
    pose_estimators: tuple[str, ...] = ("da3", "vipe", "classical")
    rpe_trans_estimators: tuple[str, ...] = ("da3", "vipe")
    rpe_rot_estimator: str = "da3"
    rpe_stride: int = 1
    return_frame_poses: tuple[str, ...] = ("da3", "classical")
    imaging: tuple[str, ...] = ("musiq-spaq",)
    aesthetic: tuple[str, ...] = ("laion",)
    judge: dict[str, Any] = field(default_factory=dict)  # the checklist judge server: JudgeSettings (docs/judge.md)
    memory_stride: int = 4
    quality_stride: int = 4
    judge_stride: int = 8
    canvas: int = mem.CANVAS
    sphere_bin_deg: float = mem.SPHERE_BIN_DEG
    depth_stride: int = 1
    tracker_threshold: float = 0.6
    revisit_tolerance_deg: float = 5.0
    revisit_tolerance_translation: float = 0.05
    departure_deg: float = 30.0
    return_tolerances_deg: tuple[float, ...] = (30.0, 15.0, 5.0)
    bootstrap: dict[str, int] = field(default_factory=lambda: {"n": 2000, "seed": 0})
    validity: bool = True
    device: str = "auto"
    #: per learned backbone, keyword options of its ``load`` (its recipe knobs), e.g. ``{da3: {process_res: 504}}``;
    #: recorded in the backbone's settings and part of every family hash that uses it
    backbone_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    ors: dict[str, Any] = field(default_factory=dict)  # MemoBench ORS detector (evaluate/ors.py)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "EvalConfig":
        d = {k: v for k, v in (d or {}).items() if k != "description"}
        allowed = set(EvalConfig.__dataclass_fields__)
        bad = set(d) - allowed
        if bad:
            from trajectories.fields import unknown_field_message

            msg = unknown_field_message("evaluate", bad, allowed)
            raise ConfigError(msg.replace("unknown field", "unknown setting"))
        _check_types(d)
        for k, v in list(d.items()):
            if isinstance(v, list):
                d[k] = tuple(v)
        if "ors" in d:
            from trajectories.fields import check_fields

            from .ors import ORS_DEFAULTS

            check_fields("evaluate.ors", d["ors"] or {}, ORS_DEFAULTS, ConfigError)
        # validated (and defaults filled) here, so a bad judge setting is a config error before anything runs
        from .judge import JudgeSettings

        d["judge"] = JudgeSettings.from_dict(d.get("judge") or {}).to_dict()
        cfg = EvalConfig(**d)
        cfg.check()
        return cfg

    def check(self) -> None:
        """Names are registered backbones of the right role; oracles only where ground truth may be used."""
        for role, setting in ROLE_SETTINGS.items():
            names = getattr(self, setting)
            check_names(setting, names, role)
            for n in names:
                if spec(n).kind == "oracle":
                    raise ConfigError(f"evaluate.{setting}: {n!r} is ground truth, not an estimator: it never scores "
                                     "a video (it judges the estimators in eval/validity.md automatically)")
        check_names("return_frame_poses", self.return_frame_poses, "pose")
        check_names("rpe_trans_estimators", self.rpe_trans_estimators, "pose")
        check_names("rpe_rot_estimator", (self.rpe_rot_estimator,), "pose")
        for s in ("rpe_trans_estimators", "rpe_rot_estimator"):
            v = getattr(self, s)
            for n in (v if isinstance(v, tuple) else (v,)):
                if spec(n).kind == "oracle":
                    raise ConfigError(f"evaluate.{s}: {n!r} is ground truth, not an estimator")
        if int(self.rpe_stride) < 1:
            raise ConfigError(f"evaluate.rpe_stride={self.rpe_stride}: must be >= 1 (1 = adjacent frames, the paper)")
        if int(self.depth_stride) < 1:
            raise ConfigError(f"evaluate.depth_stride={self.depth_stride}: must be >= 1 (1 = every pixel)")
        if self.device != "auto":
            resolve_device(self.device)  # raises for anything but cpu / cuda / cuda:N
        for n, opts in (self.backbone_options or {}).items():
            if n not in BACKBONES or not (BACKBONES[n].learned or BACKBONES[n].packaged):
                raise ConfigError(f"evaluate.backbone_options.{n}: not a learned backbone; one of "
                                 f"{sorted(k for k, v in BACKBONES.items() if v.learned or v.packaged)}")
            if not isinstance(opts, dict):
                raise ConfigError(f"evaluate.backbone_options.{n}: a mapping of {n}'s load options, e.g. "
                                 "{da3: {process_res: 504}}")

    def family_settings(self, family: str) -> dict[str, Any]:
        s = asdict(self)
        return {k: s[k] for k in _family(family).settings}


#: the numeric settings and their ranges: (kind, lower bound, inclusive, upper bound or None)
_RANGES: dict[str, tuple[type, float, bool, Optional[float]]] = {
    "rpe_stride": (int, 1, True, None), "memory_stride": (int, 1, True, None), "quality_stride": (int, 1, True, None),
    "judge_stride": (int, 1, True, None), "canvas": (int, 8, True, None), "depth_stride": (int, 1, True, None),
    "sphere_bin_deg": (float, 0, False, 90), "tracker_threshold": (float, 0, True, 1),
    "revisit_tolerance_deg": (float, 0, True, 180), "revisit_tolerance_translation": (float, 0, True, None),
    "departure_deg": (float, 0, False, 180),
}


def _check_types(d: dict[str, Any]) -> None:
    """Every numeric setting a number of the right kind in its range, ``bootstrap`` ``{n >= 1, seed >= 0}``,
    ``return_tolerances_deg`` positive degrees, ``enabled`` / ``validity`` booleans: a bad value fails here, before
    anything is evaluated, naming the setting (never as a per-item Python error, or after every item)."""
    def num(v: Any, kind: type) -> bool:
        if isinstance(v, bool):
            return False
        return isinstance(v, int) if kind is int else isinstance(v, (int, float)) and v == v and abs(v) != float("inf")

    for k, (kind, lo, incl, hi) in _RANGES.items():
        if k not in d:
            continue
        v = d[k]
        rng = f"{'>=' if incl else '>'} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
        if not num(v, kind) or (v < lo if incl else v <= lo) or (hi is not None and v > hi):
            what = "an integer" if kind is int else "a number"
            raise ConfigError(f"evaluate.{k}={v!r}: must be {what} {rng} (see conf/evaluate/default.yaml)")
    for k in ("enabled", "validity"):
        if k in d and not isinstance(d[k], bool):
            raise ConfigError(f"evaluate.{k}={d[k]!r}: use true or false")
    if "return_tolerances_deg" in d:
        v = d["return_tolerances_deg"]
        if not isinstance(v, (list, tuple)) or not v or not all(num(x, float) and 0 < x <= 180 for x in v):
            raise ConfigError(f"evaluate.return_tolerances_deg={v!r}: a list of degrees in (0, 180], e.g. [30, 15, 5]")
    if "bootstrap" in d:
        b = d["bootstrap"]
        if not isinstance(b, dict) or set(b) - {"n", "seed"}:
            raise ConfigError(f"evaluate.bootstrap={b!r}: a mapping {{n: <resamples >= 1>, seed: <integer >= 0>}}")
        if "n" in b and (not num(b["n"], int) or b["n"] < 1):
            raise ConfigError(f"evaluate.bootstrap.n={b['n']!r}: must be an integer >= 1 (the paper uses 2000)")
        if "seed" in b and (not num(b["seed"], int) or b["seed"] < 0):
            raise ConfigError(f"evaluate.bootstrap.seed={b['seed']!r}: must be an integer >= 0")
    for k in ("encoders", "face", "trackers", "depth", "pose_estimators", "rpe_trans_estimators",
              "return_frame_poses", "imaging", "aesthetic"):
        if k in d and not (isinstance(d[k], (list, tuple)) and all(isinstance(x, str) for x in d[k])):
            raise ConfigError(f"evaluate.{k}={d[k]!r}: a list of backbone names, e.g. evaluate.{k}=[pixel]")
    for k in ("rpe_rot_estimator", "device"):
        if k in d and not isinstance(d[k], str):
            raise ConfigError(f"evaluate.{k}={d[k]!r}: give a name")


def _family(name: str) -> Family:
    return {f.name: f for f in all_families()}[name]


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _weights_state(fam: Family, ecfg: EvalConfig, root: Path) -> dict:
    """Cheap fingerprint of the weights of the learned backbones a family may use (presence, sizes, mtimes), so
    fetching or replacing weights recomputes the family; file sha256s are recorded when a backbone is loaded."""
    out = {}
    for setting in fam.settings:
        v = getattr(ecfg, setting)
        for n in (v if isinstance(v, tuple) else (v,)):
            if isinstance(n, str) and n in BACKBONES and BACKBONES[n].learned:
                d = root / n
                files = sorted((str(p.relative_to(d)), p.stat().st_size, p.stat().st_mtime_ns)
                               for p in d.rglob("*") if p.is_file()) if d.is_dir() else "missing"
                out[n] = [files, (ecfg.backbone_options or {}).get(n, {})]
            elif isinstance(n, str) and n in BACKBONES and BACKBONES[n].packaged:
                out[n] = [_packaged_state(n), (ecfg.backbone_options or {}).get(n, {})]
    return out


def _packaged_state(name: str) -> Any:
    """Installing, removing or upgrading the package that ships a backbone's weights recomputes its families."""
    from .backbones import import_class
    from .perception.packaged import fingerprint

    try:
        return fingerprint(import_class(spec(name)).shipped_files())
    except BackboneUnavailable as exc:
        return f"unavailable: {exc}"


def family_hashes(ecfg: EvalConfig, video_sha: str, root: Path) -> dict[str, str]:
    """Per family (and for the validity section): the hash whose change recomputes it."""
    from .validity import VALIDITY_VERSION

    out = {f.name: _hash([video_sha, ecfg.family_settings(f.name), SCHEMA_VERSION, _weights_state(f, ecfg, root)])
           for f in all_families()}
    vf = Family("validity", ("pose_estimators", "depth", "return_frame_poses", "memory_stride", "validity"))
    out["validity"] = _hash([video_sha, {k: getattr(ecfg, k) for k in vf.settings}, VALIDITY_VERSION,
                             _weights_state(vf, ecfg, root)])
    return out


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def compute_family(fam: Family, ctx: Any, perc: Any, ecfg: EvalConfig) -> dict:
    """Every metric of ``fam`` for every combination of its configured backbones, isolating failures."""
    out: dict = {}
    for metric in fam.metrics:
        if not metric.applies(ctx, ecfg):
            continue
        lists = [getattr(ecfg, ROLE_SETTINGS[r]) for r in metric.roles]
        for combo in itertools.product(*lists):
            bb = dict(zip(metric.roles, combo))
            tag = "+".join(combo)
            try:
                # once loaded, keys carry the backbone's own label (e.g. template-ncc), as computed values do
                tag = "+".join(perc.label(name, role) for role, name in bb.items())
                out.update(metric.compute(ctx, perc, ecfg, bb))
            except BackboneUnavailable as exc:
                for mid in metric.ids:
                    out.update(missing(mid, tag, str(exc)))
            except Exception as exc:  # one failing backbone or formula fails this metric only
                for mid in metric.ids:
                    out.update(missing(mid, tag, _failure(exc), status=Status.FAILED))
    return out


def _failed_result(item_dir: Path, meta: Optional[dict], reason: str) -> ItemResult:
    """A whole item that could not be evaluated: every metric its case family reports, failed with the reason."""
    meta = meta or {}
    fam = (meta.get("case") or {}).get("family", "?")
    from .catalog import METRICS

    ids = sorted(i for i, m in METRICS.items() if m.paper and m.family in ("camera", "quality", fam)
                 and not i.endswith("_strided"))
    metrics: Entries = {}
    for i in ids:
        metrics.update(missing(i, "", reason, status=Status.FAILED))
    item = meta.get("item") or {"model": "?", "context": "?", "seed": "?", "trajectory": "?", "case_id": item_dir.name}
    return ItemResult(item=item, status=ITEM_FAILED, reason=reason, case_family=fam, metrics=metrics,
                      schema_version=SCHEMA_VERSION,
                      extra={"family_hashes": {}, "validity": {}, "timings": {},
                             "timings_generation": meta.get("timings", {})})


def _read_result(path: Path) -> Optional[ItemResult]:
    """The stored result at ``path``, None when absent, unreadable or failed (a failed item is always redone)."""
    from harness.io import read_json

    try:
        prev = ItemResult.from_dict(read_json(path))
    except Exception:  # missing, truncated or from an incompatible writer: recomputed
        return None
    return None if prev.failed else prev


def _current_hashes(prev: ItemResult) -> dict[str, str]:
    """The family hashes of ``prev`` minus those of families with a retryable "not computed" entry (e.g. the judge
    server timed out), so the next evaluation recomputes exactly those families even when no setting changed."""
    retry = {m.family for m in prev.metrics.values() if m.retryable}
    return {f: h for f, h in prev.family_hashes.items() if f not in retry}


def _all_reused(prev: Optional[ItemResult], hashes: dict[str, str], video_sha: str) -> bool:
    if prev is None or prev.video_sha256 != video_sha:
        return False
    have = _current_hashes(prev)
    return all(have.get(f) == hashes[f] for f in (*FAMILIES, "validity"))


def _reusable(item_dir: Path, ecfg: EvalConfig, root: Path, force: bool) -> bool:
    """Whether :func:`evaluate_item` would reuse the item's ``metrics.json`` (then nothing needs decoding)."""
    from harness.io import sha256_file

    if force:
        return False
    prev = _read_result(item_dir / "metrics.json")
    try:
        sha = sha256_file(item_dir / "video.mp4")
    except OSError:
        return False
    return _all_reused(prev, family_hashes(ecfg, sha, root), sha)


def evaluate_item(item_dir: Path, ecfg: EvalConfig, force: bool = False, backbones: Optional[BackboneSet] = None,
                  use_cache: bool = True, preloaded: Any = None) -> ItemResult:
    """Compute (or reuse) every metric family of one item and write ``metrics.json`` atomically.

    ``preloaded``: an optional future of :func:`evaluate.item.load_item` for this item (the run decodes the next
    video while the current one is scored). Never raises for a broken item: a corrupt video or unreadable metadata
    gives a ``status: failed`` result (also written), with the reason.
    """
    from harness.io import read_json, sha256_file, write_json

    from .item import load_item
    from .perceive import ItemPerception
    from .validity import item_validity

    item_dir = Path(item_dir)
    backbones = backbones or BackboneSet(ecfg)
    out_path = item_dir / "metrics.json"
    meta = None
    try:
        meta = read_json(item_dir / "meta.json")
        video_sha = sha256_file(item_dir / "video.mp4")  # re-hashed: a replaced or truncated video is never reused
    except Exception as exc:
        res = _failed_result(item_dir, meta, _failure(exc))
        write_json(out_path, res.to_dict())
        return res
    hashes = family_hashes(ecfg, video_sha, backbones.root)
    prev = None if force else _read_result(out_path)
    if _all_reused(prev, hashes, video_sha):
        prev.extra["reused"] = True
        return prev
    kept = _current_hashes(prev) if prev is not None and prev.video_sha256 == video_sha else {}
    t_item = time.perf_counter()
    try:
        ctx = preloaded.result() if preloaded is not None else None
        if ctx is None or ctx.video_sha != video_sha:  # changed while it was being decoded: read it again
            ctx = load_item(item_dir, ecfg, video_sha=video_sha)
    except Exception as exc:
        res = _failed_result(item_dir, meta, _failure(exc))
        write_json(out_path, res.to_dict())
        return res
    perc = ItemPerception(ctx, backbones, use_cache=use_cache)
    metrics: Entries = {}
    timings: dict = {}
    for fam in all_families():
        if kept.get(fam.name) == hashes[fam.name]:
            metrics.update({k: v for k, v in prev.metrics.items() if v.family == fam.name})
            continue
        t0 = time.perf_counter()
        for k, v in compute_family(fam, ctx, perc, ecfg).items():
            v.family = fam.name
            v.settings_hash = hashes[fam.name]
            metrics[k] = v
        timings[fam.name] = time.perf_counter() - t0
    if kept.get("validity") == hashes["validity"]:
        validity = prev.validity
    else:
        validity = item_validity(ctx, perc, ecfg) if ecfg.validity else {}
    failed = sorted(k for k, v in metrics.items() if v.status is Status.FAILED)
    result = ItemResult(
        item=meta.get("item"), status=ITEM_FAILED if failed else ITEM_DONE,
        reason=(f"{len(failed)} metric(s) failed: " + "; ".join(f"{k}: {metrics[k].reason}" for k in failed[:3])
                if failed else None),
        case_family=ctx.family, video_sha256=video_sha, num_revisits=ctx.num_revisits,
        phases={k: list(v) for k, v in ctx.phases.items()}, metrics=metrics, schema_version=SCHEMA_VERSION,
        extra={"settings": asdict(ecfg), "backbones": backbones.provenance(), "family_hashes": hashes,
               "validity": validity, "timings": {**timings, "item_s": time.perf_counter() - t_item},
               "timings_generation": meta.get("timings", {})})
    write_json(out_path, result.to_dict())
    return result


def _meta_or_none(item_dir: Path) -> Optional[dict]:
    from harness.outputs import item_meta

    return item_meta(item_dir)


def _broken_items(dirs: list[Path]) -> dict[Path, str]:
    """The items whose files no longer match their ``meta.json`` (:func:`harness.outputs.item_problems`: video,
    ``camera.npz``, ``controls/``, section types), with why; each is logged once."""
    import logging

    from harness.outputs import item_problems

    out = {}
    for d in dirs:
        meta = _meta_or_none(d)
        problems = item_problems(d, meta) if meta is not None else ["meta.json is missing or not JSON"]
        if problems:
            out[d] = ("; ".join(problems) + ": not evaluated (its files are not the ones generated); rerun the run's "
                      "command to regenerate it, or re-import the video")
            logging.getLogger(__name__).warning("%s: %s", d, out[d])
    return out


def evaluate_run(run_dir: Path, ecfg: EvalConfig, force: bool = False, progress: bool = False,
                 weights_root: Optional[Path] = None, use_cache: bool = True) -> dict:
    """Evaluate every ``done`` item of ``run_dir``'s manifest and write ``run_dir/eval/`` (the run's report page,
    tables, analyses: :func:`evaluate.reporting.run.write_run_outputs`).

    Returns ``{evaluated, failed: [(item, reason)], skipped_not_done, results, tables, analyses, validity, html,
    report, verdict, timings}``.
    """
    from harness.outputs import RunDir

    t0 = time.perf_counter()
    run = RunDir(Path(run_dir))
    run_dir = run.path
    if not run.manifest.exists():
        raise FileNotFoundError(f"{run.manifest} not found: evaluate a run directory made by the harness "
                                "(or use the videos= mode for videos made elsewhere)")
    from harness.io import write_json

    rows = run.rows()  # a row that escapes the run is a user error: nothing is evaluated or written
    done = [r for r in rows if r.done]
    backbones = BackboneSet(ecfg, weights_root)
    results = []
    from concurrent.futures import ThreadPoolExecutor

    from .item import load_item

    # Decode the next video on a background thread while the current one is scored (PyAV releases the GIL);
    # items whose metrics will be reused are not decoded at all.
    dirs = [run.item_dir(r.dir) for r in done]
    broken = _broken_items(dirs)  # trust nothing on disk: a swapped or truncated file is never scored
    for d, why in broken.items():
        res = _failed_result(d, _meta_or_none(d), why)
        write_json(d / "metrics.json", res.to_dict())
        results.append(res)
    dirs = [d for d in dirs if d not in broken]
    from .judge import prefetch as judge_prefetch

    # the run's judge requests, evaluate.judge.concurrency at a time (items whose answers are stored send nothing);
    # the per-item loop then reads the stored answers or the recorded failures
    judge_prefetch([d for d in dirs if force or not _reusable(d, ecfg, backbones.root, False)], ecfg.judge,
                   ecfg.judge_stride)
    it = dirs
    if progress:
        from tqdm import tqdm

        it = tqdm(dirs, desc="evaluate", unit="video")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval-decode") as pool:
        def prefetch(i: int):
            if i < len(dirs) and not _reusable(dirs[i], ecfg, backbones.root, force):
                return pool.submit(load_item, dirs[i], ecfg)
            return None

        nxt = prefetch(0)
        for i, _ in enumerate(it):
            cur, nxt = nxt, prefetch(i + 1)
            results.append(evaluate_item(dirs[i], ecfg, force=force, backbones=backbones, use_cache=use_cache,
                                         preloaded=cur))
            cur = None  # drop this video's frames now: at most two videos are in memory at once
    failed = [(r.item, r.reason or "") for r in results if r.failed]
    t_tables = time.perf_counter()
    from .reporting.run import write_run_outputs

    # the run's eval/ folder: its report page, run tables, analyses and validity, from these results (one analysis)
    outputs = write_run_outputs(run_dir, list(zip(dirs, results)), ecfg)
    total = time.perf_counter() - t0 - outputs["report_s"]  # as before: the study report is not timed
    return {"evaluated": len(results), "failed": failed, "skipped_not_done": len(rows) - len(done),
            "results": results, **outputs,
            "timings": {"total_s": total, "tables_s": time.perf_counter() - t_tables, **backbones.clock}}
