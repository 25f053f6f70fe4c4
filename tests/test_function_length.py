"""No function over 80 lines anywhere in the source (``harness/``, ``adapters/``, ``trajectories/``, ``evaluate/``
and the project's Hydra plugins): a long function is split into named steps. A function's length is its ``def``
line to its last line, docstring and nested functions included, decorators not (a static read of the source;
nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

LIMIT = 80
AREAS = ("harness", "adapters", "trajectories", "evaluate", "hydra_plugins")

#: ``<file>::<qualified name>`` -> why it is still over the limit. An entry whose function has shrunk (or gone)
#: fails :func:`test_the_exceptions_are_still_needed`, so the list only gets shorter.
EXCEPTIONS: dict[str, str] = {
}


def function_lengths(path: Path, root: Path = ROOT) -> dict[str, int]:
    """``<file>::<qualified name>`` -> lines, for every function and method in ``path`` (nested ones too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(root).as_posix()
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out[f"{rel}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def area_files(root: Path = ROOT) -> list[Path]:
    files: list[Path] = []
    for area in AREAS:
        p = root / area
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return files


def too_long(files: list[Path], exceptions: dict[str, str], root: Path = ROOT) -> list[str]:
    return [f"{name}: {n} lines (split it into named steps; the limit is {LIMIT})"
            for f in files for name, n in function_lengths(f, root).items() if n > LIMIT and name not in exceptions]


def test_no_function_is_over_the_limit():
    files = area_files()
    assert len(files) > 100, len(files)
    bad = too_long(files, EXCEPTIONS)
    assert not bad, "\n".join(bad)


def test_the_exceptions_are_still_needed():
    """Each exception names a function that is still over the limit: a split function leaves the list."""
    lengths = {name: n for f in area_files() for name, n in function_lengths(f).items()}
    stale = [f"{name}: {lengths[name]} lines" if name in lengths else f"{name}: no such function"
             for name in EXCEPTIONS if lengths.get(name, 0) <= LIMIT]
    assert not stale, "remove these from EXCEPTIONS (tests/test_function_length.py):\n" + "\n".join(stale)


def test_the_check_can_fail(tmp_path):
    """An 81-line method is named with its class; an 80-line function, and a listed exception, pass."""
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    (tmp_path / "m.py").write_text(f"class A:\n    def long(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
                                   f"        return 0\n\ndef ok():\n{body}\n")
    lengths = function_lengths(tmp_path / "m.py", tmp_path)
    assert lengths == {"m.py::A.long": 81, "m.py::ok": 80}
    assert too_long([tmp_path / "m.py"], {}, tmp_path) == [
        f"m.py::A.long: 81 lines (split it into named steps; the limit is {LIMIT})"]
    assert too_long([tmp_path / "m.py"], {"m.py::A.long": "a reason"}, tmp_path) == []
