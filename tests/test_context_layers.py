"""The lower layers import nothing above them (static check over the source files, nothing is imported).

``trajectories`` is the bottom layer: it imports no project package. ``harness.context`` (the KV-context policies,
cache and the Wan driver) sits on ``trajectories`` only: no adapter, runner, CLI or evaluation code. Benchmarks that
need models live in ``harness.benchmarks``, one layer up. Every ``import`` statement counts, lazy ones inside
functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("adapters", "harness", "trajectories", "evaluate", "conf")

#: package folder -> (its dotted name, project modules it may import: itself and these prefixes)
LAYERS = {
    "trajectories": ("trajectories", ()),
    "harness/context": ("harness.context", ("trajectories",)),
}


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``; relative imports are resolved against ``package``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    mod_parts = [*package.split("."), path.stem]  # ``__init__`` too: level 1 is the package itself
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod_parts[: len(mod_parts) - node.level]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def _allowed(module: str, own: str, allowed: tuple[str, ...]) -> bool:
    top = module.split(".")[0]
    if top not in PROJECT:
        return True  # the standard library and third-party packages
    return any(module == p or module.startswith(p + ".") for p in (own, *allowed))


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_layer_imports_nothing_above_it(folder):
    own, allowed = LAYERS[folder]
    files = sorted((ROOT / folder).glob("*.py"))
    assert files, folder
    bad = [f"{f.relative_to(ROOT)}:{line} imports {mod}" for f in files
           for line, mod in imported_modules(f, own) if not _allowed(mod, own, allowed)]
    assert not bad, "layer violation:\n" + "\n".join(bad)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The check can fail: a lazy import of an adapter and a relative import out of the package are both caught."""
    pkg = tmp_path / "context"
    pkg.mkdir()
    f = pkg / "mod.py"
    f.write_text("import numpy\nfrom . import fov\ndef g():\n    from adapters.tiny_causal_dit.model import x\n"
                 "    from ..runner import run\n")
    mods = [m for _, m in imported_modules(f, "harness.context")]
    assert mods == ["numpy", "harness.context", "adapters.tiny_causal_dit.model", "harness.runner"]
    verdict = [_allowed(m, "harness.context", ("trajectories",)) for m in mods]
    assert verdict == [True, True, False, False]


#: adapter package -> the one sibling it may import: LingBot-World v2 extends the v1 adapter of its own family
SIBLING_FAMILY = {"lingbot_v2": "lingbot"}


def test_no_adapter_imports_a_sibling_adapter():
    """Shared code lives below the model packages (``adapters.base``, ``adapters.upstream``, ``adapters.controls``,
    ``harness.context``, ``trajectories``), never in another model's package."""
    models = sorted(p.parent.name for p in (ROOT / "adapters").glob("*/adapter.py"))
    assert len(models) >= 12, models
    bad = []
    for model in models:
        for f in sorted((ROOT / "adapters" / model).glob("*.py")):
            for line, mod in imported_modules(f, f"adapters.{model}"):
                parts = mod.split(".")
                if parts[0] == "adapters" and len(parts) > 1 and parts[1] in models and \
                        parts[1] not in (model, SIBLING_FAMILY.get(model)):
                    bad.append(f"{f.relative_to(ROOT)}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_evaluation_never_imports_the_runner_or_the_cli():
    """Evaluation reads what generation wrote through the lower layers (io, outputs, cases, video); it never calls
    into the execution layer. (Its remaining upward reach, the reference model's ground truth in the oracle, is
    recorded in docs/architecture.md as open.)"""
    files = sorted((ROOT / "evaluate").rglob("*.py"))
    assert files
    bad = []
    for f in files:
        package = ".".join(f.relative_to(ROOT).parent.parts)
        bad += [f"{f.relative_to(ROOT)}:{line} imports {mod}" for line, mod in imported_modules(f, package)
                if mod in ("harness.runner", "harness.__main__") or mod.startswith(("harness.runner.",))]
    assert not bad, "layer violation:\n" + "\n".join(bad)
