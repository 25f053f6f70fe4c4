"""Execution: plan, compile, generate, write self-describing outputs; resume and keep going on failures.

Per item (``outputs/<run>/<model>/<context>/seed-<s>/<trajectory>/<case>/``):
``video.mp4`` (H.264), ``camera.npz`` (c2w, K, fps, phases), ``controls/`` (exactly what the model received),
``context_trace.json``, ``meta.json`` (config, seeds, versions, timings, status). Per run: ``manifest.jsonl``.
Every file is written atomically; ``meta.json`` is written last with ``status: done``, so a killed run leaves
no item that looks finished, and a rerun skips exactly the finished ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from .cases import Case, load_case_set
from .io import read_json, write_json
from .plan import WorkItem, make_plan

SCHEMA_VERSION = 1


@dataclass
class RunSummary:
    run_dir: Path
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def table(self) -> str:
        rows = [("done", len(self.done)), ("compiled (dry run)", len(self.compiled)), ("skipped (already done)",
                len(self.skipped)), ("failed", len(self.failed)), ("wall time [s]", f"{self.seconds:.1f}")]
        w = max(len(r[0]) for r in rows)
        lines = [f"run directory: {self.run_dir}"] + [f"  {k:<{w}}  {v}" for k, v in rows]
        lines += [f"  FAILED: {k} (see its meta.json)" for k in self.failed]
        return "\n".join(lines)


def _versions() -> dict[str, Any]:
    import numpy

    out: dict[str, Any] = {"python": platform.python_version(), "numpy": numpy.__version__,
                           "platform": platform.platform()}
    for mod in ("cv2", "av", "scipy", "hydra", "omegaconf"):
        with contextlib.suppress(Exception):
            out[mod] = __import__(mod).__version__
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].__version__
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        out["worldmem-harness"] = version("worldmem-harness")
    return out


def _git() -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=5)
        if sha.returncode == 0:
            return {"sha": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"sha": None, "dirty": None}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def rebuild_manifest(run_dir: Path) -> Path:
    """Rewrite ``manifest.jsonl`` from every item's ``meta.json`` (one line each, sorted by item key).

    Rebuilding (instead of appending) keeps the manifest right when jobs of a sweep or shards finish in any
    order; a file lock serialises concurrent writers.
    """
    from .io import write_text

    out = run_dir / "manifest.jsonl"
    with _locked(run_dir / ".manifest.lock"):
        lines = []
        for meta_path in sorted(run_dir.glob("*/*/seed-*/*/*/meta.json")):
            with contextlib.suppress(json.JSONDecodeError, OSError):
                m = read_json(meta_path)
                lines.append(json.dumps(m.get("manifest", {}), sort_keys=True))
        write_text(out, "\n".join(lines) + ("\n" if lines else ""))
    return out


def item_status(item_dir: Path) -> str | None:
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, KeyError):
        return read_json(item_dir / "meta.json")["status"]
    return None


def run_items(
    adapter: Any,
    context: Any,
    trajectory_specs: dict[str, Any],
    cases: Sequence[Case],
    items: Sequence[WorkItem],
    run_dir: Path,
    config: dict[str, Any],
    dry_run: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> RunSummary:
    """Execute ``items``; see the module docstring for what each writes."""
    from adapters.base import ItemRequest

    from .video import VideoWriter

    summary = RunSummary(run_dir=run_dir)
    by_id = {c.id: c for c in cases}
    versions, git = _versions(), _git()
    t_run = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=f"{adapter.config.name}/{context.name}", unit="item", file=sys.stderr)
    for item in items:
        item_dir = run_dir / item.rel_dir
        if not overwrite and item_status(item_dir) == "done":
            summary.skipped.append(item.key)
            if bar:
                bar.update(1)
            continue
        case = by_id[item.case_id]
        meta: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "status": "running",
            "item": item.to_dict(),
            "case": case.model_dump(),
            "model": adapter.config.to_dict(),
            "context": context.to_dict(),
            "trajectory": trajectory_specs[item.trajectory].to_dict(),
            "seed": item.seed,
            "seed_source": "cli override" if config.get("seed") is not None else "model default",
            "versions": versions,
            "git": git,
            "argv": sys.argv,
            "config": config,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        write_json(item_dir / "meta.json", meta)
        t0 = time.perf_counter()
        writer = None
        try:
            _, K = adapter.canvas_image_and_K(case)
            mc = adapter.config
            path = adapter.path_for(trajectory_specs[item.trajectory], K, item.trajectory)
            path.save(item_dir / "camera.npz")
            req = ItemRequest(case=case, path=path, context=context, seed=item.seed, item_dir=item_dir)
            controls = adapter.compile(req)
            meta["controls"] = {"files": sorted(Path(p).name for p in controls.files.values()),
                                "command": controls.command, **controls.meta}
            meta["camera"] = {"spec_hash": path.spec_hash(), **path.meta()}
            if controls.decoded_c2w is not None:
                from .residuals import pose_residual

                meta["controls"]["achieved_vs_requested"] = pose_residual(path.c2w, controls.decoded_c2w)
            t_compile = time.perf_counter() - t0
            if dry_run:
                from trajectories.preview import preview_path

                overlays = [("decoded native", controls.decoded_c2w)] if controls.decoded_c2w is not None else []
                preview_path(path, item_dir / "preview.png", overlays=overlays,
                             title=f"{item.key}: requested vs native")
                meta.update(status="compiled", timings={"compile_s": t_compile})
                summary.compiled.append(item.key)
            else:
                writer = VideoWriter(item_dir / "video.mp4", fps=path.fps)
                gen = adapter.generate(req, controls, writer)
                writer.close()
                if writer.num_frames != gen.num_frames:
                    raise RuntimeError(f"the model reported {gen.num_frames} frames but {writer.num_frames} were written")
                write_json(item_dir / "context_trace.json", {"policy": context.to_dict(), "chunks": gen.context_trace})
                meta.update(
                    status="done",
                    video={"file": "video.mp4", "num_frames": writer.num_frames, "fps": gen.fps,
                           "width": mc.width, "height": mc.height, "sha256": sha256_file(item_dir / "video.mp4"),
                           "frames_sha256": writer.frames_sha256},
                    timings={"compile_s": t_compile, **gen.timings, "total_s": time.perf_counter() - t0},
                    generation=gen.meta,
                )
                summary.done.append(item.key)
        except Exception as exc:  # one failed item must not stop the run
            if writer is not None:
                writer.abort()
            meta.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
            summary.failed.append(item.key)
        meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        meta["manifest"] = {
            **item.to_dict(),
            "key": item.key,
            "status": meta["status"],
            "dir": item.key,
            "video": "video.mp4" if meta["status"] == "done" else None,
            "video_sha256": meta.get("video", {}).get("sha256"),
            "camera": "camera.npz",
            "spec_hash": meta.get("camera", {}).get("spec_hash"),
            "num_frames": meta.get("camera", {}).get("num_frames"),
            "fps": meta.get("camera", {}).get("fps"),
            "phases": meta.get("camera", {}).get("phases"),
            "timings": meta.get("timings"),
            "error": meta.get("error"),
            "schema_version": SCHEMA_VERSION,
        }
        write_json(item_dir / "meta.json", meta)
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    rebuild_manifest(run_dir)
    summary.seconds = time.perf_counter() - t_run
    return summary


def load_cases_from_config(cases_cfg: dict[str, Any]) -> list[Case]:
    """The case set named by the ``cases`` config group, filtered by ``include`` / ``families``."""
    from .cases import CaseError

    cases = load_case_set(cases_cfg["source"])
    include = cases_cfg.get("include")
    if include:
        known = {c.id for c in cases}
        missing = [i for i in include if i not in known]
        if missing:
            raise CaseError(f"cases.include: unknown case id(s) {missing}; known: {sorted(known)}")
        cases = [c for c in cases if c.id in include]
    fams = cases_cfg.get("families")
    if fams:
        cases = [c for c in cases if c.family in fams]
    return cases


def check_trajectories(adapter: Any, specs: dict[str, Any], cases: Sequence[Case], items: Sequence[WorkItem]) -> None:
    """Build every item's camera path up front (cheap) so impossible parameters fail before anything is written."""
    from trajectories import TrajectoryError

    by_id = {c.id: c for c in cases}
    seen = set()
    for item in items:
        if (item.trajectory, item.case_id) in seen:
            continue
        seen.add((item.trajectory, item.case_id))
        _, K = adapter.canvas_image_and_K(by_id[item.case_id])
        try:
            adapter.path_for(specs[item.trajectory], K, item.trajectory)
        except TrajectoryError as exc:
            raise TrajectoryError(f"{exc} (trajectory {item.trajectory!r}, case {item.case_id!r})") from None


def resolve_context(ctx: dict[str, Any], adapter: Any):
    """The :class:`ContextPolicy` of a ``context`` config; ``paper`` becomes the model's main-table policy."""
    from .context import ContextPolicy
    from .registry import group_yaml

    if ctx.get("name") == "paper":  # the model's own main-table setting (paper appendix C)
        ctx = group_yaml("context", adapter.config.paper_context)
    return ContextPolicy.from_dict(ctx)


def plan_from_config(cfg: dict[str, Any]):
    """Everything a run needs, validated before anything heavy: (adapter, policy, specs, cases, items, run_dir)."""
    from trajectories import TrajectorySpec

    from .registry import build_adapter, check_choice, group_yaml

    adapter = build_adapter(cfg["model"])
    policy = resolve_context(cfg["context"], adapter)
    adapter.check_context(policy)  # unsupported pairs fail here, before any weights load
    names = cfg.get("trajectories") or [cfg["trajectory"]["name"]]
    specs = {}
    for name in names:
        if name == cfg["trajectory"]["name"]:
            specs[name] = TrajectorySpec.from_dict(cfg["trajectory"])
        else:
            check_choice("trajectory", name)
            specs[name] = TrajectorySpec.from_dict(group_yaml("trajectory", name))
    cases = load_cases_from_config(cfg["cases"])
    seed = cfg.get("seed")
    seed = adapter.config.seed if seed is None else int(seed)
    items = make_plan(adapter.config.name, policy.name, seed, list(specs), cases, cfg.get("shard", "0/1"))
    check_trajectories(adapter, specs, cases, items)
    run_dir = (Path(cfg.get("output_root", "outputs")) / str(cfg.get("run", "default"))).resolve()
    return adapter, policy, specs, cases, items, run_dir
