"""Where the run's configuration goes (docs/architecture.md, "The run configuration"): the files that receive it
from the run command are pinned, and only the secrets code that writes it to disk sees it as a plain mapping. The
generation path is typed down to ``adapter.generate``."""

from __future__ import annotations

import typing
from pathlib import Path

from tests.support.config_walk import Walker

ROOT = Path(__file__).resolve().parents[3]
START = "harness/app/commands/run.py:cmd_run"
#: ``stage=evaluate``: its own command since issue 45 (harness.app.cli.STAGE_HANDLERS)
EVALUATE_ONLY = "harness/app/commands/run.py:cmd_evaluate_only"

#: the files the run command's config reaches (tests.support.config_walk): the command, planning and running, the
#: served backend, and the evaluation stage that reads the typed ``evaluate`` section (``EvalConfig``; until issue 45
#: a conversion, ``EvalConfig.from_dict(cfg.evaluate)``, hid these from the walk: the section reached them then too)
RECEIVERS = {
    "harness/app/commands/run.py", "harness/app/commands/evaluation.py", "harness/app/run_config.py",
    "harness/app/plan.py", "harness/app/runner.py", "harness/cases.py", "harness/secrets.py",
    "adapters/served/adapter.py", "adapters/served/backend.py",
    "evaluate/stage.py", "evaluate/item.py", "evaluate/backbones.py", "evaluate/cache.py",
    "evaluate/validity.py", "evaluate/reporting/run.py",
    "evaluate/reporting/run_tables.py",
}
#: the files the evaluation command's config reaches: the command, the import of videos made elsewhere, the evaluation
#: stage; never planning, running or an adapter (it generates nothing)
EVALUATE_RECEIVERS = {
    "harness/app/commands/run.py", "harness/app/commands/evaluation.py", "harness/app/run_config.py",
    "harness/io.py", "evaluate/external.py", "evaluate/stage.py", "evaluate/item.py", "evaluate/backbones.py",
    "evaluate/cache.py", "evaluate/validity.py", "evaluate/reporting/run.py", "evaluate/reporting/run_tables.py",
}
#: where the whole config is a plain mapping: only what is written to disk (redacted), since issue 45
UNTYPED = {"harness/secrets.py"}


def test_the_run_config_reaches_the_pinned_files_only():
    walk = Walker(ROOT).walk(START, "cfg", "typed")
    assert walk.files == RECEIVERS, (sorted(walk.files - RECEIVERS), sorted(RECEIVERS - walk.files))
    # issue 32: at most half of the 36 files of the untyped walk outside the evaluation stage (which reads only
    # its own typed section)
    assert len({f for f in walk.files if not f.startswith("evaluate/")}) <= 18
    assert walk.untyped == UNTYPED
    assert not walk.upward  # no call climbs to a higher layer


def test_the_evaluation_command_reaches_no_planning_running_or_adapter():
    walk = Walker(ROOT).walk(EVALUATE_ONLY, "cfg", "typed")
    assert walk.files == EVALUATE_RECEIVERS, (sorted(walk.files - EVALUATE_RECEIVERS),
                                              sorted(EVALUATE_RECEIVERS - walk.files))
    assert not walk.untyped and not walk.upward


def test_the_walk_follows_a_plain_mapping_and_stops_at_scalars(tmp_path):
    """The walker on a small tree: the config goes down through a section and a merge, a scalar does not."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(
        "## Import table\n| layer | modules | may import |\n| --- | --- | --- |\n"
        "| low | `harness.low` | (nothing) |\n| high | `harness.app` | low |\n")
    (tmp_path / "harness" / "app").mkdir(parents=True)
    (tmp_path / "harness" / "low.py").write_text(
        "def takes_section(model):\n    return model\n\ndef takes_name(name):\n    return name\n")
    (tmp_path / "harness" / "app" / "top.py").write_text(
        "from harness.low import takes_name, takes_section\n\n"
        "def start(cfg):\n    merged = {**cfg, 'shard': '0/1'}\n    helper(merged)\n    takes_name(cfg['run'])\n\n"
        "def helper(c):\n    takes_section(c['model'])\n")
    walk = Walker(tmp_path).walk("harness/app/top.py:start", "cfg")
    assert walk.files == {"harness/app/top.py", "harness/low.py"}
    assert ("harness/app/top.py", "harness/low.py", "takes_section") in walk.calls
    assert not any(c[2] == "takes_name" for c in walk.calls)  # cfg['run'] is a value, not the config
    assert walk.untyped == {"harness/app/top.py"}


def test_the_generation_path_is_typed_down_to_generate():
    """``_Executor`` holds its plan, and the plan the adapter, the context policy and the configuration by their
    types; the request it hands to ``adapter.generate`` carries the case and the camera path by theirs (read by a
    type checker, not ``Any``)."""
    from adapters.base import Adapter, ItemRequest
    from harness.app.plan import Plan
    from harness.app.run_config import RunConfig
    from harness.gpu_pool import GPUPool
    from harness.app.runner import _Executor
    from harness.cases import Case
    from harness.context import ContextPolicy
    from trajectories import CameraPath, TrajectorySpec

    names = {"Case": Case, "CameraPath": CameraPath, "Adapter": Adapter, "ContextPolicy": ContextPolicy,
             "TrajectorySpec": TrajectorySpec, "GPUPool": GPUPool}  # imported for type checking only there
    req = typing.get_type_hints(ItemRequest, localns=names)
    assert req["case"] is Case and req["path"] is CameraPath and req["context"] is ContextPolicy
    assert typing.get_type_hints(_Executor.__init__, localns=names)["plan"] is Plan
    plan = typing.get_type_hints(Plan, localns=names)
    assert plan["adapter"] is Adapter and plan["policy"] is ContextPolicy and plan["config"] is RunConfig
    gen = typing.get_type_hints(Adapter.generate, localns=names)
    assert gen["req"] is ItemRequest
