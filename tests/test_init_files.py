"""No logic in ``__init__.py`` (issue 32): a package's ``__init__`` holds its docstring, imports (re-exports),
``__all__`` and constants; functions and classes live in named modules, where a reader looks for them."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

PACKAGES = ("harness", "adapters", "trajectories", "evaluate", "hydra_plugins/worldmem_models",
            "hydra_plugins/worldmem_slurm")
#: ``__init__.py`` files allowed to define things, each with its reason
EXEMPT = {
    # Hydra registers the launcher's config under the module path its ``_target_`` names, and the real-cluster CI
    # test (tests/engines/test_slurm.py) pins that path: the hook stays where Hydra's config points
    "hydra_plugins/worldmem_slurm/__init__.py",
}


def logic_in(path: Path) -> list[str]:
    """The functions, classes and statements other than imports / assignments / the docstring in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    plain = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Expr)
    out = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            out.append(f"line {node.lineno}: a call")
        elif not isinstance(node, plain):
            name = getattr(node, "name", type(node).__name__)
            out.append(f"line {node.lineno}: {name}")
    return out


def test_no_init_file_carries_logic():
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("__init__.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in EXEMPT and (hits := logic_in(path)):
                found[rel] = hits
    assert not found, f"move these into a named module and re-export them: {found}"


def test_the_check_sees_a_function_and_a_call(tmp_path):
    f = tmp_path / "__init__.py"
    f.write_text('"""Doc."""\nfrom x import y\nA = 1\n__all__ = ["y"]\n\ndef helper():\n    pass\n\nprint(A)\n')
    assert logic_in(f) == ["line 6: helper", "line 9: a call"]
