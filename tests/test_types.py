"""The type checker passes: mypy over the files and with the flags of ``pyproject.toml`` ``[tool.mypy]`` (strict on
``harness/``, ``adapters/``, ``trajectories/``, ``evaluate/`` and ``hydra_plugins/``, no module relaxed) reports no
error. ``.ci/run`` runs the same check as its own phase; here it is part of the README's test command (slow: a
minute or more without mypy's cache)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT


def test_the_configuration_names_the_project():
    """The checked files are the ones docs/contributing.md ("Types") promises and every one is strict: no override
    turns a strict flag off for a module (loosening one is a visible change here, not a quiet edit of
    pyproject.toml)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert set(cfg["files"]) == {"harness", "adapters", "trajectories", "evaluate", "hydra_plugins"}
    assert cfg["strict"] is True
    assert "ignore-without-code" in cfg["enable_error_code"]
    strict_flags = {"disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
                    "disallow_any_generics", "disallow_untyped_decorators", "disallow_subclassing_any",
                    "warn_return_any", "no_implicit_reexport", "check_untyped_defs", "warn_unused_ignores",
                    "strict_equality", "extra_checks", "warn_redundant_casts"}
    relaxed = [(o["module"], flag) for o in cfg.get("overrides", []) for flag, value in o.items()
               if value is False and (flag in strict_flags or flag == "strict")]
    relaxed += [(["<all>"], flag) for flag, value in cfg.items() if value is False and flag in strict_flags]
    assert not relaxed, f"strict flags turned off in pyproject.toml [tool.mypy]: {relaxed}"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (it comes with the test extra: pip install -e '.[test]')")
def test_mypy_reports_no_error():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the checkout's packages, not an installed copy
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if re.match(r"^\S+\.py:\d+: error:", line)]
    assert proc.returncode == 0 and not errors, (
        f"mypy exit {proc.returncode}, {len(errors)} errors (run `mypy` from the checkout's root; "
        f"docs/contributing.md, Types):\n" + "\n".join(errors[:200] or out.splitlines()[-40:]))
    assert re.search(r"^Success: no issues found in \d+ source files", out, re.M), out[-2000:]
