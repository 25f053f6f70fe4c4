"""No function in ``adapters/`` is longer than 80 lines (issue 32): a longer one is split by meaning, as
``ReferenceRenderer.render`` (warp bands, fill holes) and ``ServedAdapter.compile`` (keys, poses, intrinsics) were."""

from __future__ import annotations

import ast

from adapters.contracts import ADAPTERS_DIR

MAX_LINES = 80


def long_functions(root=ADAPTERS_DIR, limit: int = MAX_LINES) -> list[str]:
    """``path:line name (n lines)`` of every function or method under ``root`` longer than ``limit`` lines."""
    out = []
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append(f"{f.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_in_adapters_is_longer_than_80_lines():
    assert long_functions() == []


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == [f"{tmp_path.name}/m.py:5 long ({MAX_LINES + 1} lines)"]
