"""The type checker passes: mypy over the files and with the flags of ``pyproject.toml`` ``[tool.mypy]`` (strict on
``harness/``, ``adapters/``, ``trajectories/``, ``evaluate/`` and ``hydra_plugins/``, no module relaxed) reports no
error. ``.ci/run`` runs the same check as its own phase; here it is part of the README's test command (slow: a
minute or more without mypy's cache)."""

from __future__ import annotations

import ast
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


#: the adapter seam: what the runner hands an adapter and what it gets back (docs/adapters.md, "Adding a model")
_SEAM_METHODS = {"compile", "generate", "canvas_image_and_K", "canvas_K", "path_for", "check_context",
                 "write_canvas", "told_upstream", "context_told"}
#: the records that cross it, by file
_SEAM_RECORDS = {"adapters/base.py": {"ItemRequest", "GeneratedVideo", "ServedContextInfo"},
                 "harness/context/trace.py": {"ChunkTrace"}}


def _names_any(node: ast.expr | None) -> bool:
    return node is not None and re.search(r"\bAny\b", ast.unparse(node)) is not None


def test_the_adapter_seam_names_no_any():
    """No ``Any`` where the harness meets a model: the parameters of every adapter's seam methods (in every file
    of ``adapters/``) and the returns of ``compile``, ``generate``, the canvas and the path; the fields of the
    request, the generated video and its context trace. (A JSON record an adapter returns, like ``context_told``,
    may hold anything JSON does.)"""
    found = []
    for path in sorted((ROOT / "adapters").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if not (isinstance(fn, ast.FunctionDef) and fn.name in _SEAM_METHODS):
                    continue
                a = fn.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
                found += [f"{path.relative_to(ROOT)}:{fn.lineno} {cls.name}.{fn.name}({p.arg})" for p in params
                          if _names_any(p.annotation)]
                if fn.name not in {"told_upstream", "context_told"} and _names_any(fn.returns):
                    found.append(f"{path.relative_to(ROOT)}:{fn.lineno} {cls.name}.{fn.name} -> ...")
    for rel, classes in _SEAM_RECORDS.items():
        tree = ast.parse((ROOT / rel).read_text())
        seen = set()
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name in classes):
            seen.add(cls.name)
            found += [f"{rel}:{f.lineno} {cls.name}.{ast.unparse(f.target)}" for f in cls.body
                      if isinstance(f, ast.AnnAssign) and _names_any(f.annotation)]
        assert seen == classes, f"{rel}: the seam's records {sorted(classes - seen)} moved; update this test"
    assert not found, "Any at the adapter seam:\n" + "\n".join(found)
