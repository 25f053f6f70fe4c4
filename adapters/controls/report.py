"""What each model's controls cost on each trajectory, measured: ``python -m adapters.controls.report``.

For every in-tree upstream model and trajectory (default: the release presets), the item is compiled as a dry run
compiles it (into a temporary folder) and three paths are compared:

* the preset as built at the model's frame count (``nominal``),
* the item's path (``item``): the preset laid on upstream's control blocks where the model holds its controls
  (Matrix-Game 3, YUME; :mod:`adapters.controls.clock`), else the nominal path,
* what the native files decode to (``decoded``, :meth:`adapters.base.Adapter.decode`): what the model is told.

Columns: frames; the largest shift of a turn or stop, in frames, and the sweeps' degrees per frame once laid; the
decoded path against the item's, largest rotation error over all frames and at the returns (degrees) and largest
translation error (scene units); the item's path against the nominal preset (degrees: the timing cost in angle).
docs/controls.md holds the table this prints.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from trajectories.conventions import geodesic_angle

    out: np.ndarray = np.degrees(geodesic_angle(a[..., :3, :3], b[..., :3, :3]))
    return out


def measure(model: str, trajectory: str, work: Path, case_id: str = "environment_rocket") -> dict[str, Any]:
    """One row of the table (see the module docstring) for ``model`` on ``trajectory``."""
    from adapters.base import ItemRequest, ModelConfigError, build_adapter
    from adapters.upstream import UpstreamAdapter
    from harness.cases import load_case_set
    from harness.config_groups import group_yaml
    from harness.context import ContextPolicy
    from trajectories import TrajectorySpec

    a = build_adapter(group_yaml("model", model))
    if not isinstance(a, UpstreamAdapter):
        raise ModelConfigError(f"model={model!r} has no native controls to measure (not an upstream adapter)")
    case = {c.id: c for c in load_case_set("builtin:demo")}[case_id]
    K = a.canvas_K(case)
    spec = TrajectorySpec.from_dict(group_yaml("trajectory", trajectory))
    item, nominal = a.path_for(spec, K, trajectory), a._build_path(spec, K, trajectory)
    policy = ContextPolicy.from_dict(group_yaml("context", a.config.paper_context))
    req = ItemRequest(case=case, path=item, context=policy, seed=a.config.seed, item_dir=work / model / trajectory)
    a.compile(req)
    decoded = a.decode(req.controls_dir, req)
    returns = [s.end - 1 for s in item.segments if s.kind == "move" and s.phase.startswith("R")]
    clock = item.params.get("upstream_clock") or {}
    return {"model": model, "trajectory": trajectory, "frames": item.num_frames,
            "shift_frames": clock.get("max_shift_frames", 0),
            "laid_deg_per_frame": sorted({round(v, 4) for v in clock.get("laid_deg_per_frame", [])}),
            "decoded_max_deg": float(_deg(decoded, item.c2w).max()),
            "decoded_return_deg": float(_deg(decoded[returns], item.c2w[returns]).max()) if returns else 0.0,
            "decoded_max_translation": float(np.linalg.norm(decoded[:, :3, 3] - item.c2w[:, :3, 3], axis=1).max()),
            "item_vs_preset_deg": float(_deg(item.c2w, nominal.c2w).max())}


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as the markdown table of docs/controls.md."""
    head = ("| model | trajectory | frames | shift (frames) | laid speed (deg/frame) | decoded: max / at returns (deg) "
            "| decoded: translation | item vs preset (deg) |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    lines = [head]
    for r in rows:
        speed = ", ".join(f"{v:g}" for v in r["laid_deg_per_frame"]) or "-"
        lines.append(f"| {r['model']} | {r['trajectory']} | {r['frames']} | {r['shift_frames']} | {speed} | "
                     f"{r['decoded_max_deg']:.3g} / {r['decoded_return_deg']:.3g} | "
                     f"{r['decoded_max_translation']:.3g} | {r['item_vs_preset_deg']:.3g} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from adapters.goldens import MODELS
    from harness.config_groups import group_yaml, list_group

    ap = argparse.ArgumentParser(prog="python -m adapters.controls.report", description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: the nine upstream models)")
    ap.add_argument("--trajectories", default="release",
                    help="comma-separated names, 'release' (the presets with a speed, default) or 'all'")
    args = ap.parse_args(argv)
    names = list(list_group("trajectory"))
    if args.trajectories == "release":
        names = [t for t in names if group_yaml("trajectory", t).get("deg_per_frame") is not None]
    elif args.trajectories != "all":
        names = args.trajectories.split(",")
    models = args.models.split(",")
    unknown = sorted(set(models) - set(MODELS)) + sorted(set(names) - set(list_group("trajectory")))
    if unknown:
        print(f"unknown model or trajectory: {', '.join(unknown)}; models: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(m, t, Path(tmp)) for m in models for t in names]
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
