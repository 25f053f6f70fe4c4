"""``python -m harness``: the Hydra entry point.

Commands (``cmd=<name>`` or the first word): ``run`` (default: plan, compile, generate, evaluate),
``list`` (models, contexts, trajectories, case sets), ``validate`` (check a case set), ``preview`` (draw the chosen
trajectory to PNG). ``dry_run=true`` plans and compiles native controls without generating.
"""

from __future__ import annotations

import sys
from typing import Any

COMMANDS = ("run", "list", "validate", "preview")
_CHECKED_GROUPS = ("model", "context", "trajectory", "cases", "launcher", "experiment", "debug", "evaluate")


class HarnessError(Exception):
    """An error a user can fix; printed without a traceback, exit code 2."""


def _user_errors() -> tuple[type[BaseException], ...]:
    from adapters.base import ModelConfigError, UnsupportedContextError
    from harness.cases import CaseError
    from harness.context import ContextConfigError
    from harness.registry import UnknownChoiceError
    from trajectories import TrajectoryError

    return (HarnessError, CaseError, ModelConfigError, UnsupportedContextError, ContextConfigError,
            UnknownChoiceError, TrajectoryError, ValueError, ImportError)


def _fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def _precheck_argv(argv: list[str]) -> list[str]:
    """Rewrite a leading command word into ``cmd=...`` and check group choices with a did-you-mean."""
    from harness.registry import UnknownChoiceError, check_choice

    out = [a if (i == 0 or a not in COMMANDS) else f"cmd={a}" for i, a in enumerate(argv)]
    for arg in out[1:]:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, val = arg.split("=", 1)
        key = key.lstrip("+~")
        if key in _CHECKED_GROUPS and val and val != "null":
            for choice in val.split(","):
                if choice.startswith(("glob(", "range(", "choice(")):
                    continue
                try:
                    check_choice(key, choice)
                except UnknownChoiceError as exc:
                    _fail(str(exc))
    return out


def _cmd_list(cfg: dict[str, Any]) -> None:
    from harness.registry import group_yaml, list_group

    for group in ("model", "context", "trajectory", "cases", "launcher", "experiment"):
        print(f"{group}:")
        for name in list_group(group):
            data = group_yaml(group, name) or {}
            desc = data.get("description") if isinstance(data, dict) else None
            print(f"  {name:<18}{desc or ''}".rstrip())


def _cmd_validate(cfg: dict[str, Any]) -> None:
    from harness.runner import load_cases_from_config

    cases = load_cases_from_config(cfg["cases"])
    for c in cases:
        img = c.load_image()
        c.load_depth()
        for obj in c.targets.objects:
            c.object_mask(obj, img.shape[0], img.shape[1])
        print(f"ok  {c.id:<28} {c.family:<12} {img.shape[1]}x{img.shape[0]}  trajectories={','.join(c.trajectories)}")
    print(f"{len(cases)} case(s) valid in {cfg['cases']['source']}")


def _cmd_preview(cfg: dict[str, Any]) -> None:
    from pathlib import Path

    from harness.registry import build_adapter
    from trajectories import TrajectorySpec
    from trajectories.conventions import intrinsics_from_fov
    from trajectories.preview import preview_path

    adapter = build_adapter(cfg["model"])
    mc = adapter.config
    spec = TrajectorySpec.from_dict(cfg["trajectory"])
    K = intrinsics_from_fov(mc.default_hfov_deg, mc.width, mc.height)
    path = adapter.path_for(spec, K)
    out = Path(cfg["output_root"]) / "previews" / f"{spec.name}_{mc.name}.png"
    preview_path(path, out)
    path.save(out.with_suffix(".npz"))
    print(f"wrote {out} and {out.with_suffix('.npz')}")
    print("phases:", ", ".join(f"{k}=[{a},{b})" for k, (a, b) in path.phases.items()))


def _cmd_run(cfg: dict[str, Any]) -> None:
    from harness.runner import plan_from_config, run_items

    if cfg.get("stage") == "evaluate":
        return _cmd_evaluate_only(cfg)

    adapter, policy, specs, cases, items, run_dir = plan_from_config(cfg)
    if not cfg.get("dry_run") and cfg.get("stage", "all") != "evaluate" and hasattr(adapter, "check_ready"):
        adapter.check_ready()  # a missing checkout / checkpoint / environment fails here, before anything is written
    if not items:
        raise HarnessError(
            f"nothing to run: no case in {cfg['cases']['source']} lists trajectory "
            f"{', '.join(specs)} (check cases.include / cases.families)"
        )
    stage = cfg.get("stage", "all")
    if stage not in ("generate", "evaluate", "all"):
        raise HarnessError(f"stage={stage!r}: use generate, evaluate or all")
    ok = True
    if stage in ("generate", "all"):
        summary = run_items(adapter, policy, specs, cases, items, run_dir, cfg, dry_run=bool(cfg.get("dry_run")),
                            overwrite=bool(cfg.get("overwrite")), progress=bool(cfg.get("progress", True)))
        print(summary.table())
        ok = summary.ok
    if stage in ("evaluate", "all") and not cfg.get("dry_run") and cfg["evaluate"].get("enabled", True):
        _evaluate(run_dir, cfg)
    if not ok:
        sys.exit(1)


def _evaluate(run_dir, cfg: dict[str, Any]) -> None:
    from evaluate.stage import EvalConfig, evaluate_run

    ecfg = EvalConfig.from_dict({k: v for k, v in cfg["evaluate"].items()})
    out = evaluate_run(run_dir, ecfg, force=bool(cfg.get("overwrite")), progress=bool(cfg.get("progress", True)))
    print(f"evaluated {out['evaluated']} video(s): {out['tables']['summary']}  {out['analyses']['analyses']}")
    print(_short_table(out["results"]))


def _short_table(results: list) -> str:
    """The computed metrics of this run, one line each: mean over videos."""
    import numpy as np

    vals: dict[str, list] = {}
    for r in results:
        for k, m in r["metrics"].items():
            if m["status"] == "computed":
                vals.setdefault(k, []).append(m["value"])
    if not vals:
        return "(no metric could be computed with the available backbones; see summary.md)"
    w = max(len(k) for k in vals)
    return "\n".join(f"  {k:<{w}}  {np.mean(v):8.4f}  (n={len(v)})" for k, v in sorted(vals.items()))


def _cmd_evaluate_only(cfg: dict[str, Any]) -> None:
    """``stage=evaluate``: evaluate an existing run (``run=<name>`` or a path) or videos made elsewhere."""
    from pathlib import Path

    if cfg.get("videos"):
        from evaluate.external import import_videos

        run_dir = import_videos(Path(cfg["videos"]), Path(cfg.get("videos_manifest") or Path(cfg["videos"]) /
                                                           "manifest.json"), cfg)
    else:
        cand = Path(str(cfg["run"]))
        run_dir = cand if (cand / "manifest.jsonl").exists() else Path(cfg["output_root"]) / str(cfg["run"])
    _evaluate(run_dir.resolve(), cfg)


def _cmd_judge_check(cfg: dict[str, Any]) -> None:
    """``python -m harness judge check``: ping the configured judge server and print what it serves."""
    from evaluate.judge import check_server

    code = check_server((cfg.get("evaluate") or {}).get("judge"))
    if code:
        sys.exit(code)


def _dispatch(cfg_omega: Any) -> None:
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(cfg_omega, resolve=True)
    assert isinstance(cfg, dict)
    handlers = {"run": _cmd_run, "list": _cmd_list, "validate": _cmd_validate, "preview": _cmd_preview,
                "judge_check": _cmd_judge_check}
    cmd = cfg.get("cmd", "run")
    if cmd not in handlers:
        _fail(f"cmd={cmd!r}: use one of {', '.join(handlers)}")
    try:
        handlers[cmd](cfg)
    except _user_errors() as exc:
        _fail(str(exc))


def main() -> None:
    import hydra

    if sys.argv[1:3] == ["judge", "check"]:  # `python -m harness judge check [overrides]`
        sys.argv[1:3] = ["cmd=judge_check"]
    sys.argv = _precheck_argv(sys.argv)
    hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")(_dispatch)()


if __name__ == "__main__":
    main()
