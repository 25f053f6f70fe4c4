"""The GPU day-one check of an upstream model: ``python -m harness setup model=<m> 'setup.steps=[check]'``.

A person with a GPU node and the weights runs it once, after ``setup`` (docs/real-models.md "Day one on a GPU
node"), and learns in minutes what would otherwise fail hours into a run. The steps, in order, stop at the first
that fails and say where they stopped:

1. ``files``: the checkout, and every path the contract lists under the configured keys (the planning-time checks,
   :meth:`adapters.upstream.UpstreamAdapter.readiness` without its subprocess probe);
2. ``weights``: every file setup's weights step recorded (``.harness-weights.json``): present, and its size and its
   sha256 (LFS files) or git blob id as the hub gave them; weights served from the Hugging Face cache: present there;
3. ``imports``: the model's Python imports upstream's packages the way the launch runs (modules that touch CUDA at
   import are probed only where a GPU is visible);
4. ``cuda`` (the first GPU step): the model's torch sees CUDA, runs a kernel, and sees the GPUs one job needs, with
   their memory against what upstream states;
5. ``tiny``: one tiny generation through the adapter (the contract's ``day_one.tiny_frames``, the shortest run
   upstream's code allows, on a slow forward dolly of the first demo case) with the wall time, where upstream allows
   a short run.

On a machine without a GPU it runs steps 1-3 and stops at ``cuda``, naming what passed and what did not run. The
result is also written to ``<check_dir>/check.json`` (``setup.check_dir``, default ``<root>/day_one/<model>``).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from harness.app.setup import RECORD, SetupError, git_blob_sha1, sha256

if TYPE_CHECKING:
    from adapters.upstream import UpstreamAdapter
    from harness.app.setup import SetupPlan

CHECK_STEPS = ("files", "weights", "imports", "cuda", "tiny")
GPU_STEPS = ("cuda", "tiny")
TINY_STEP_M = 0.02  # scene units per frame of the tiny run's forward dolly (a static path max-normalises 0 / 0)


class CheckStopped(SetupError):
    """The day-one check stopped at a step; the message names it, why, what passed and what did not run."""


@dataclass
class StepResult:
    """One step: ``ok`` True (passed), False (failed: the check stops) or None (not checkable here, noted)."""

    step: str
    ok: Optional[bool]
    detail: str
    seconds: float = 0.0


# -- the steps -----------------------------------------------------------------------------------------------------


def _errors(findings: list[Any], keys: Optional[set[str]] = None, skip: frozenset[str] = frozenset()) -> list[str]:
    return [str(f) for f in findings if f.level == "error" and (keys is None or f.key in keys) and f.key not in skip]


def step_files(plan: SetupPlan, adapter: UpstreamAdapter) -> StepResult:
    errors = _errors(adapter.readiness(probe=False))
    if errors:
        return StepResult("files", False, "; ".join(errors))
    return StepResult("files", True, f"checkout {plan.checkout} and every path the contract lists under "
                                     f"{', '.join(sorted(plan.paths))}")


def _recorded(check: str) -> tuple[str, Callable[[Path], str]]:
    """(kind, function) that computes what a ``.harness-weights.json`` entry recorded."""
    if re.fullmatch(r"[0-9a-f]{64}", check):
        return "sha256", sha256
    if re.fullmatch(r"[0-9a-f]{40}", check):
        return "git blob", git_blob_sha1
    return "size", lambda p: str(p.stat().st_size)


def verify_record(folder: Path) -> tuple[int, int, list[str], bool]:
    """(files checked, bytes, problems, whether a record exists) of the ``.harness-weights.json`` in ``folder``:
    every file it records, hashed again."""
    try:
        record = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError):
        return 0, 0, [], False
    n = size = 0
    problems = []
    for key, check in sorted((record.get("files") or {}).items()):
        rel = key.split("/", 2)[2] if key.count("/") >= 2 else key  # "<owner>/<repo>@<commit>/<path>"
        path = folder / rel
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        kind, compute = _recorded(str(check))
        got = compute(path)
        if got != check:
            problems.append(f"{path}: {kind} {got[:12]}, recorded {str(check)[:12]} (a changed or truncated file: "
                            "delete it and rerun setup 'setup.steps=[weights]')")
        n, size = n + 1, size + path.stat().st_size
    return n, size, problems, True


def step_weights(plan: SetupPlan, adapter: UpstreamAdapter) -> StepResult:
    from adapters.upstream import hf_cache_has

    checked = total = 0
    problems: list[str] = []
    unrecorded: list[str] = []
    for job in plan.jobs:
        w = job.weight
        if w.hf_cache:
            if not hf_cache_has(w.repo, adapter.launch_env()):
                problems.append(f"{w.repo} is not in the Hugging Face cache {plan.hf_cache}")
            continue
        if w.hub == "checkout" or job.local_dir is None:
            continue  # a file of the checkout: the files step found it
        n, size, bad, recorded = verify_record(job.local_dir)
        checked, total, problems = checked + n, total + size, problems + bad
        if not recorded:
            unrecorded.append(str(job.local_dir))
    if problems:
        return StepResult("weights", False, "; ".join(problems))
    note = (f"; no {RECORD} in {', '.join(unrecorded)}: sizes and hashes not checked there (setup's weights step "
            "records them against the hub)" if unrecorded else "")
    return StepResult("weights", None if unrecorded and not checked else True,
                      f"{checked} files, {total / 1e9:.2f} GB, sizes and hashes as the hub gave them{note}")


def step_imports(plan: SetupPlan, adapter: UpstreamAdapter) -> StepResult:
    contract = adapter.contract()
    findings = adapter.probe_environment(list(contract.imports) if contract else [])
    errors = _errors(findings, skip=frozenset({"model.devices"}))
    if errors:
        return StepResult("imports", False, "; ".join(errors))
    skipped = [str(f) for f in findings if f.level == "warning"]
    mods = ", ".join(m.module for m in contract.imports) if contract else "none"
    return StepResult("imports", True, f"{mods} import in {plan.python}" + (f" ({'; '.join(skipped)})" if skipped
                                                                              else ""))


_CUDA_PROBE = """import json, torch
out = {"torch": torch.__version__, "built_for": torch.version.cuda, "available": torch.cuda.is_available(), "gpus": []}
if out["available"]:
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out["gpus"].append({"name": p.name, "gb": round(p.total_memory / 2**30, 1), "sm": f"{p.major}.{p.minor}"})
    out["kernel"] = float(torch.ones(4, device="cuda").sum().item())
print("HARNESS-CUDA " + json.dumps(out))
"""


def step_cuda(plan: SetupPlan, adapter: UpstreamAdapter) -> StepResult:
    try:
        r = subprocess.run([plan.python, "-c", _CUDA_PROBE], env=adapter.launch_env(), capture_output=True, text=True,
                           timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return StepResult("cuda", False, f"cannot run {plan.python}: {exc}")
    line = next((x for x in r.stdout.splitlines() if x.startswith("HARNESS-CUDA ")), None)
    if line is None:
        return StepResult("cuda", False, f"{plan.python} could not probe CUDA: {(r.stderr or r.stdout).strip()[-300:]}")
    res = json.loads(line[len("HARNESS-CUDA "):])
    if not res["available"]:
        return StepResult("cuda", False, f"{plan.python} sees no CUDA device (torch {res['torch']}, built for CUDA "
                                         f"{res['built_for'] or 'none: a CPU build'}); run this check on a GPU node")
    need = max(1, adapter.config.gpus_per_job)
    gpus = res["gpus"]
    if len(gpus) < need or res.get("kernel") != 4.0:
        return StepResult("cuda", False, f"{len(gpus)} GPU(s) visible (CUDA_VISIBLE_DEVICES "
                                         f"{adapter.launch_env().get('CUDA_VISIBLE_DEVICES')}), {need} needed per job; "
                                         f"a kernel gave {res.get('kernel')}")
    contract = adapter.contract()
    stated = contract.gpu_memory.stated_gb if contract else None
    low = [g for g in gpus if stated and g["gb"] < stated]
    note = f"; below the {stated} GB upstream states: {low}" if low else ""
    return StepResult("cuda", True, f"torch {res['torch']} (CUDA {res['built_for']}), {len(gpus)} GPU(s): "
                                    f"{', '.join(g['name'] + ' ' + str(g['gb']) + ' GB' for g in gpus)}{note}")


def step_tiny(plan: SetupPlan, adapter: UpstreamAdapter, out_dir: Path) -> StepResult:
    contract = adapter.contract()
    day_one = contract.day_one if contract else None
    if day_one is None or day_one.tiny_frames is None:
        why = day_one.source if day_one else "the contract has no day_one section"
        return StepResult("tiny", None, f"not run: upstream allows no short run ({why})")
    from adapters.base import build_adapter
    from harness.video import VideoWriter

    n = int(day_one.tiny_frames)
    cfg = {**plan.config, **plan.paths, "python": plan.python, "num_frames": n, "frames_per_trajectory": {}}
    tiny = build_adapter(cfg)
    req = tiny_request(tiny, n, out_dir / "tiny")
    t0 = time.perf_counter()
    writer = VideoWriter(req.item_dir / "video.mp4", fps=req.path.fps)
    try:
        gen = tiny.generate(req, tiny.compile(req), writer)
        writer.close()
    except Exception as exc:  # the run's own message (its root cause and log) is what the person needs
        return StepResult("tiny", False, f"{n} frames: {exc} (log: {req.item_dir / 'upstream.log'})",
                          time.perf_counter() - t0)
    return StepResult("tiny", True, f"{gen.num_frames} frames of {n} in {req.item_dir / 'video.mp4'} "
                                    f"({day_one.source})", time.perf_counter() - t0)


def tiny_request(adapter: Any, n: int, item_dir: Path) -> Any:
    """The tiny run's item: the first demo case, a slow forward dolly of ``n`` frames at the model's canvas and
    fps, the model's paper context and seed."""
    import numpy as np

    from adapters.base import ItemRequest
    from harness.cases import load_case_set
    from harness.config_groups import group_yaml
    from harness.context import ContextPolicy
    from trajectories.path import CameraPath

    c = adapter.config
    case = load_case_set("builtin:demo")[0]
    c2w = np.tile(np.eye(4), (n, 1, 1))
    c2w[:, 2, 3] = TINY_STEP_M * np.arange(n)  # OpenCV +z is forward
    path = CameraPath(name="day_one_dolly", c2w=c2w, K=adapter.canvas_K(case), fps=float(c.fps), height=c.height,
                      width=c.width, phases={"V": (0, n)})
    policy = ContextPolicy.from_dict(group_yaml("context", c.paper_context))
    return ItemRequest(case=case, path=path, context=policy, seed=int(c.seed), item_dir=item_dir)


# -- the run -------------------------------------------------------------------------------------------------------


def run_check(plan: SetupPlan, log: Callable[[str], None], out_dir: Optional[Path] = None) -> list[StepResult]:
    """Run the day-one check of ``plan``'s model; returns every step's result or raises :class:`CheckStopped` at the
    first step that fails (after writing ``check.json``)."""
    from adapters.base import build_adapter
    from adapters.upstream import UpstreamAdapter

    out = Path(out_dir or plan.root / "day_one" / plan.model)
    adapter = build_adapter({**plan.config, **plan.paths, "python": plan.python})
    if not isinstance(adapter, UpstreamAdapter):  # setup plans only models with a contract
        raise SetupError(f"{plan.model} runs in the harness's own environment: there is no day-one check")
    steps: dict[str, Callable[[], StepResult]] = {
        "files": lambda: step_files(plan, adapter), "weights": lambda: step_weights(plan, adapter),
        "imports": lambda: step_imports(plan, adapter), "cuda": lambda: step_cuda(plan, adapter),
        "tiny": lambda: step_tiny(plan, adapter, out)}
    results: list[StepResult] = []
    for i, name in enumerate(CHECK_STEPS, start=1):
        t0 = time.perf_counter()
        r = steps[name]()
        r.seconds = r.seconds or time.perf_counter() - t0
        results.append(r)
        mark = {True: "ok", False: "FAILED", None: "not checked"}[r.ok]
        log(f"check {i}/{len(CHECK_STEPS)} {name}{' (GPU)' if name in GPU_STEPS else ''}: {mark}: {r.detail}")
        if r.ok is False:
            _write(out, plan, results)
            passed = [x.step for x in results if x.ok]
            rest = list(CHECK_STEPS[i:])
            raise CheckStopped(f"{plan.model}: the day-one check stopped at step {i}/{len(CHECK_STEPS)} ({name}"
                               f"{', the first GPU step' if name == GPU_STEPS[0] else ''}): {r.detail}. Passed: "
                               f"{', '.join(passed) or 'none'}; not run: {', '.join(rest) or 'none'}. "
                               f"Details: {out / 'check.json'}")
    _write(out, plan, results)
    log(f"{plan.model}: day-one check passed ({out / 'check.json'})")
    return results


def _write(out: Path, plan: SetupPlan, results: list[StepResult]) -> None:
    from harness.io import write_json

    write_json(out / "check.json", {"model": plan.model, "repo": plan.contract.repo, "commit": plan.contract.commit,
                                    "python": plan.python, "steps": [asdict(r) for r in results],
                                    "stopped_at": next((r.step for r in results if r.ok is False), None)})
