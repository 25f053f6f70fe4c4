"""``list`` (what each config group offers), ``validate`` (check a case set) and ``preview`` (draw the chosen
trajectory): commands that read the config and write nothing but a preview."""

from __future__ import annotations

from harness.app.run_config import RunConfig


def cmd_list(cfg: RunConfig) -> None:
    """``list``: the options of each config group with their one-line descriptions."""
    from harness.config_groups import group_description, list_group

    for group in ("model", "backend", "context", "trajectory", "cases", "launcher", "experiment"):
        print(f"{group}:")
        for name in list_group(group):
            print(f"  {name:<18}{group_description(group, name)}".rstrip())


def cmd_validate(cfg: RunConfig) -> None:
    """``validate``: load every case of the case set with its image, depth and object masks."""
    from harness.cases import load_cases_from_config

    cases = load_cases_from_config(cfg.cases)
    for c in cases:
        img = c.load_image()
        c.load_depth()
        for obj in c.targets.objects:
            c.object_mask(obj, img.shape[0], img.shape[1])
        print(f"ok  {c.id:<28} {c.family:<12} {img.shape[1]}x{img.shape[0]}  trajectories={','.join(c.trajectories)}")
    print(f"{len(cases)} case(s) valid in {cfg.cases.source}")


def cmd_preview(cfg: RunConfig) -> None:
    """``preview``: the chosen trajectory at the model's frame count, drawn to ``<output_root>/previews/``."""
    from pathlib import Path

    from adapters.base import build_adapter
    from harness.io import check_contained, confine
    from harness.outputs import check_name
    from trajectories.conventions import intrinsics_from_fov
    from trajectories.preview import preview_path

    model, _, spec = cfg.chosen()
    # the names become a file name: the one name rule, before anything is built or written
    check_name("trajectory.name", spec.name)
    adapter = build_adapter(model)
    mc = adapter.config
    K = intrinsics_from_fov(mc.default_hfov_deg, mc.width, mc.height)
    path = adapter.path_for(spec, K)
    folder = Path(cfg.output_root) / "previews"
    out = folder / f"{check_name('trajectory.name', spec.name)}_{check_name('model.name', mc.name)}.png"
    folder.mkdir(parents=True, exist_ok=True)
    with confine(folder):  # the trajectories layer writes these: checked here, above it
        for p in (out, out.with_suffix(".npz")):
            check_contained(p)
        preview_path(path, out)
        path.save(out.with_suffix(".npz"))
    print(f"wrote {out} and {out.with_suffix('.npz')}")
    print("phases:", ", ".join(f"{k}=[{a},{b})" for k, (a, b) in path.phases.items()))
