"""Read an upstream script's ``argparse`` definitions into contract data (a maintenance tool, not used at runtime).

``python -m adapters.contracts.extract <script.py>`` prints the ``ArgumentParser`` call (its line, ``allow_abbrev``) and
the flags of every ``add_argument`` call in the file as YAML (name, aliases, required, type, choices, action, nargs,
the line), to paste into
``adapters/<model>/contract.yaml`` after checking the checkout is at the pinned commit. It reads the source with
:mod:`ast` only; nothing upstream is imported or executed.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return None


def _type_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ast.unparse(node)


def extract_flags(source: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(flags, parser options) of every ``*.add_argument("--x", ...)`` / ``ArgumentParser(...)`` call."""
    tree = ast.parse(source)
    flags: list[dict[str, Any]] = []
    parser: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _type_name(node.func) if isinstance(node.func, (ast.Attribute, ast.Name)) else ""
        if name == "ArgumentParser":
            parser["line"] = node.lineno
            for kw in node.keywords:
                if kw.arg == "allow_abbrev":
                    parser["allow_abbrev"] = _literal(kw.value)
        if name != "add_argument":
            continue
        opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not opts or not opts[0].startswith("-"):
            continue
        entry: dict[str, Any] = {"name": max(opts, key=len), "line": node.lineno}
        if len(opts) > 1:
            entry["aliases"] = [o for o in opts if o != entry["name"]]
        for kw in node.keywords:
            if kw.arg == "type":
                entry["type"] = _type_name(kw.value)
            elif kw.arg in ("required", "choices", "action", "nargs", "const"):
                entry[kw.arg] = _literal(kw.value) if kw.arg != "action" else _literal(kw.value) or ast.unparse(kw.value)
        flags.append(entry)
    flags.sort(key=lambda f: f["line"])
    return flags, parser


def main(argv: list[str]) -> None:
    import yaml

    if not argv:
        raise SystemExit("usage: python -m adapters.contracts.extract <upstream_script.py>")
    flags, parser = extract_flags(Path(argv[0]).read_text())
    out = {"parser": parser, "flags": {f.pop("name"): f for f in flags}}
    print(yaml.safe_dump(out, sort_keys=False, default_flow_style=None, width=120))


if __name__ == "__main__":
    main(sys.argv[1:])
