"""Issue 45 item 3: each fact has one owner and the others derive from it. One test per fact where a twin could
come back (a second list that drifts from the first)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _family_names() -> list[str]:
    from evaluate.families.order import all_families

    return [f.name for f in all_families()]


def test_results_are_reused_only_when_every_family_hash_matches() -> None:
    """The cache's reuse check reads the families of :func:`family_hashes` (``all_families``), not a list of its
    own: a family it does not know (one added to ``all_families`` only) is never taken as reused."""
    from evaluate.cache import all_reused
    from evaluate.results import ItemResult

    hashes = {name: f"h-{name}" for name in [*_family_names(), "validity"]}
    prev = ItemResult(item={}, video_sha256="v", extra={"family_hashes": dict(hashes)})
    assert all_reused(prev, hashes, "v")
    for name in hashes:
        assert not all_reused(prev, {**hashes, name: "changed"}, "v"), name
    assert not all_reused(prev, {**hashes, "a_new_family": "h"}, "v")


def test_no_second_list_of_the_metric_families_in_the_source() -> None:
    """No tuple or list literal in ``evaluate/`` or ``harness/`` names (nearly) every metric family: the one list
    is ``evaluate/families/order.py``'s ``all_families``."""
    names = set(_family_names())
    found = []
    for path in [*(ROOT / "evaluate").rglob("*.py"), *(ROOT / "harness").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if len(words & names) >= len(names) - 1:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_report_options_are_the_report_fields() -> None:
    """The report's plain ``key=value`` options are :class:`ReportOptions`' fields (but ``report_runs``)."""
    from evaluate.reporting.cli import REPORT_KEYS, ReportOptions, merge_run_args

    assert set(REPORT_KEYS) == set(ReportOptions.model_fields) - {"report_runs"}
    out = merge_run_args(["prog", "report", *(f"{k}=x" for k in REPORT_KEYS)])
    assert {a.split("=")[0] for a in out[2:]} == {f"+{k}" for k in REPORT_KEYS}


def test_stages_are_the_stage_type() -> None:
    from typing import get_args

    from harness.app.run_config import STAGES, RunConfig, Stage

    assert STAGES == get_args(Stage) == ("generate", "evaluate", "all")
    for s in STAGES:
        assert RunConfig.from_mapping({"stage": s}).stage == s


@pytest.mark.parametrize("seed", [-1, 2**32, True, 1.5])
def test_one_seed_rule_for_the_run_and_the_model(seed: object) -> None:
    """``seed=`` and ``model.seed=`` are the one type :data:`harness.outputs.Seed`: the same value is refused by
    both with the same fix."""
    from adapters.base import model_config
    from harness.config_groups import group_yaml
    from harness.errors import UserError

    messages = []
    with pytest.raises(UserError) as run_err:
        from harness.app.run_config import RunConfig
        RunConfig.from_mapping({"seed": seed})
    messages.append(str(run_err.value).split(": ", 1)[-1])
    with pytest.raises(UserError) as model_err:
        model_config({**group_yaml("model", "reference"), "seed": seed})
    messages.append(str(model_err.value).split(": ", 1)[-1])
    assert messages[0] == messages[1], messages


def test_release_columns_are_one_list() -> None:
    """A release row's text fields, the columns every row must fill and the columns with a length limit are the
    release's columns (``evaluate/release/layout.py``'s ``COLUMNS``)."""
    import dataclasses

    from evaluate.release.layout import COLUMNS, MAX_CHARS, TEXT_COLUMNS, ReleaseRow

    assert set(TEXT_COLUMNS) == set(MAX_CHARS) == set(COLUMNS) - {"first_frame"}
    assert set(TEXT_COLUMNS) <= {f.name for f in dataclasses.fields(ReleaseRow)}
