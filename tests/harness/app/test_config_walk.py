"""Where the run's configuration goes (docs/architecture.md, "The run configuration"): the files that receive it
from the run command are pinned, at most 18, and only the evaluation layer's entry point and the secrets / IO code
that writes it to disk see it as a plain mapping. The generation path is typed down to ``adapter.generate``."""

from __future__ import annotations

import typing
from pathlib import Path

from tests.support.config_walk import Walker

ROOT = Path(__file__).resolve().parents[3]
START = "harness/app/commands/run.py:cmd_run"

#: the files the run command's config reaches (tests.support.config_walk): the command, planning and running, the
#: typed config itself, and the typed configs of its sections (model, backend, context, trajectory, cases)
RECEIVERS = {
    "harness/app/commands/run.py", "harness/app/commands/evaluation.py", "harness/app/run_config.py",
    "harness/app/plan.py", "harness/app/runner.py",
    "harness/config_groups.py", "harness/cases.py", "harness/secrets.py", "harness/io.py",
    "adapters/base.py", "adapters/served/backend.py", "adapters/served/config.py",
    "harness/context/policies.py", "trajectories/builders.py", "trajectories/fields.py",
    "evaluate/external.py",
}
#: where the whole config is a plain mapping: what is written to disk (redacted) and evaluation's own entry point
UNTYPED = {"evaluate/external.py", "harness/io.py", "harness/secrets.py"}


def test_the_run_config_reaches_the_pinned_files_only():
    walk = Walker(ROOT).walk(START, "cfg", "typed")
    assert walk.files == RECEIVERS, (sorted(walk.files - RECEIVERS), sorted(RECEIVERS - walk.files))
    assert len(walk.files) <= 18  # issue 32: at most half of the 36 files of the untyped walk
    assert walk.untyped == UNTYPED
    assert not walk.upward  # no call climbs to a higher layer


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
    """``_Executor`` holds the adapter and the context policy by their types, and the request it hands to
    ``adapter.generate`` carries the case and the camera path by theirs (read by a type checker, not ``Any``)."""
    from adapters.base import Adapter, ItemRequest
    from harness.app.run_config import RunConfig
    from harness.app.runner import _Executor
    from harness.cases import Case
    from harness.context import ContextPolicy
    from trajectories import CameraPath, TrajectorySpec

    names = {"Case": Case, "CameraPath": CameraPath, "Adapter": Adapter, "ContextPolicy": ContextPolicy,
             "TrajectorySpec": TrajectorySpec}  # imported for type checking only in those modules
    req = typing.get_type_hints(ItemRequest, localns=names)
    assert req["case"] is Case and req["path"] is CameraPath and req["context"] is ContextPolicy
    ex = typing.get_type_hints(_Executor.__init__, localns=names)
    assert ex["adapter"] is Adapter and ex["context"] is ContextPolicy and ex["config"] is RunConfig
    gen = typing.get_type_hints(Adapter.generate, localns=names)
    assert gen["req"] is ItemRequest
