"""Where the run's configuration goes: a static walk of calls from the run command, following the config object.

Starting at a function and one of its parameters (the config), the walk reads the function's source (``ast``), keeps
the set of local names that hold the config or one of its mapping sections, and follows every call that passes one
of them (positionally, by keyword, or as ``*args`` / ``**kwargs``) to a function, method or class of the project
(resolved through the module's imports, module-level and lazy); in the callee, the matching parameter holds the
config, and so on. A name holds the config when it is assigned the config, one of its sections (``cfg["model"]``,
``cfg.get("evaluate")``, ``cfg.model``, ``cfg.raw``; scalars such as ``cfg.run`` or ``cfg["output_root"]`` are
values, not the config), a merge (``{**cfg, ...}``, ``dict(cfg)``, ``x or {}``) or a typed copy
(``RunConfig.coerce(cfg)``, ``cfg.replace(...)``).

Figures: the files the walk visits (those holding a function that receives the config); the climbs: walking depth
first in source order (as a reader follows the config), the times the walk enters a file of a higher layer than the
file it entered just before (depth in the import table of docs/architecture.md: a layer's depth is one more than the
deepest layer it may import), i.e. comes back up after descending; and the calls to a higher layer (none under
enforced layering, except through a callback). ``python -m tests.support.config_walk [--root DIR]
[--start FILE:FUNC] [--param NAME]`` prints them (run it on an older checkout with ``--root`` to compare).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

PROJECT = ("adapters", "harness", "trajectories", "evaluate")
#: the sections of the config that are themselves configuration (mappings); every other key is a scalar value
SECTIONS = frozenset({"model", "context", "trajectory", "cases", "evaluate", "local", "backend", "paths", "release",
                      "setup", "slurm", "raw"})
#: methods / functions whose result is the same config in another form
SAME_CONFIG = frozenset({"coerce", "replace", "from_mapping", "load_run_config", "model_copy", "copy", "dict",
                         "model_config_with_local"})
TYPED_FROM = frozenset({"coerce", "from_mapping", "load_run_config"})  # ... and these make it typed


@dataclass
class Walk:
    """The outcome: ``files`` visited (paths relative to the root), ``calls`` (caller file, callee file, callee
    qualified name), ``upward`` (calls to a module of a higher layer)."""

    files: set[str] = field(default_factory=set)
    untyped: set[str] = field(default_factory=set)  # files where the whole config arrives as a plain mapping
    calls: set[tuple[str, str, str]] = field(default_factory=set)
    upward: set[tuple[str, str]] = field(default_factory=set)
    order: list[str] = field(default_factory=list)  # the files in the order the walk enters them
    climbs: int = 0  # entries into a file of a higher layer than the file entered before it


class _Module:
    """One parsed source file: its functions and classes by qualified name, and its imports."""

    def __init__(self, root: Path, rel: str):
        self.rel = rel
        self.name = rel[:-3].replace("/", ".").removesuffix(".__init__")
        self.tree = ast.parse((root / rel).read_text())
        self.defs: dict[str, ast.AST] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.defs[node.name] = node
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.defs[f"{node.name}.{sub.name}"] = sub
        self.imports = self._imports(self.tree)

    def _imports(self, tree: ast.AST) -> dict[str, str]:
        """local name -> ``module`` or ``module:attr`` for every import in ``tree`` (lazy ones included)."""
        out: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = self.name.split(".")
                    if not self.rel.endswith("__init__.py"):
                        pkg = pkg[:-1]
                    pkg = pkg[:len(pkg) - (node.level - 1)]
                    base = ".".join([*pkg, *([base] if base else [])])
                for a in node.names:
                    out[a.asname or a.name] = f"{base}:{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        return out


class Walker:
    def __init__(self, root: Path):
        self.root = root
        self.modules: dict[str, Optional[_Module]] = {}
        self.depth = _layer_depths(root)

    def module(self, name: str) -> Optional[_Module]:
        if name not in self.modules:
            self.modules[name] = None
            if name.split(".")[0] in PROJECT:
                for rel in (name.replace(".", "/") + ".py", name.replace(".", "/") + "/__init__.py"):
                    if (self.root / rel).is_file():
                        self.modules[name] = _Module(self.root, rel)
                        break
        return self.modules[name]

    def resolve(self, mod: _Module, ref: str, seen: int = 0) -> Optional[tuple[_Module, str]]:
        """``ref`` (``f``, ``m.f``, ``C.method``) as seen from ``mod`` -> (module, qualified name), or None."""
        head, _, rest = ref.partition(".")
        if head in mod.defs or (rest and f"{head}.{rest}" in mod.defs):
            return mod, ref
        target = mod.imports.get(head)
        if target is None or seen > 8:
            return None
        if ":" in target:
            m_name, attr = target.split(":")
            sub = self.module(f"{m_name}.{attr}")
            if sub is not None:  # `from pkg import module`
                return self.resolve(sub, rest, seen + 1) if rest else None
            m = self.module(m_name)
            return self.resolve(m, attr + (f".{rest}" if rest else ""), seen + 1) if m else None
        parts = rest.split(".")
        for i in range(len(parts), 0, -1):  # `import a.b` then a.b.f(...)
            m = self.module(".".join([target, *parts[:i - 1]]))
            if m is not None and i - 1 < len(parts):
                return self.resolve(m, ".".join(parts[i - 1:]), seen + 1)
        return None

    def walk(self, start: str, param: str, kind: str = "mapping") -> Walk:
        """Walk from ``start`` (``file.py:function``) whose parameter ``param`` holds the whole config, typed
        (``kind="typed"``) or as a plain ``mapping``."""
        rel, func = start.split(":")
        out = Walk()
        mod = self.module(rel[:-3].replace("/", ".").removesuffix(".__init__"))
        assert mod is not None and func in mod.defs, start
        done: set[tuple[str, str, frozenset[tuple[str, str]]]] = set()
        self._visit(mod, func, frozenset({(param, kind)}), out, done)
        return out

    def _visit(self, mod: _Module, qual: str, params: frozenset[tuple[str, str]], out: Walk,
               done: set[tuple[str, str, frozenset[tuple[str, str]]]]) -> None:
        """Depth first, in source order (the order a reader follows the config)."""
        if (mod.rel, qual, params) in done:
            return
        done.add((mod.rel, qual, params))
        if any(k == "mapping" for _, k in params):
            out.untyped.add(mod.rel)
        if out.order and self.depth(mod.name) > self.depth(_mod_name(out.order[-1])):
            out.climbs += 1  # the reader goes back up: from a lower layer's file to a higher one's
        out.order.append(mod.rel)
        out.files.add(mod.rel)
        node = mod.defs[qual]
        if isinstance(node, ast.ClassDef):  # a class called with the config: its __init__
            if f"{qual}.__init__" in mod.defs:
                self._visit(mod, f"{qual}.__init__", params, out, done)
            return
        for callee_ref, names in self._calls(node, dict(params)):
            hit = self.resolve(mod, callee_ref)
            if hit is None:
                continue
            cmod, cqual = hit
            cnode = cmod.defs.get(cqual)
            if cnode is None:
                continue
            targets = _params_for(cnode, names, cmod, cqual)
            if not targets:
                continue
            out.calls.add((mod.rel, cmod.rel, cqual))
            if self.depth(cmod.name) > self.depth(mod.name):
                out.upward.add((mod.rel, cmod.rel))
            self._visit(cmod, cqual, frozenset(targets), out, done)

    def _calls(self, func: ast.AST, tainted: dict[str, str]) -> Iterator[tuple[str, list[tuple[object, str]]]]:
        """(callee reference, [(position or keyword, kind)...]) for each call passing the config."""
        body = list(ast.walk(func))
        for _ in range(3):  # propagate through assignments (a few rounds reach a fixed point in practice)
            for node in body:
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    kind = _holds(node.value, tainted)
                    if kind is None:
                        continue
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                tainted[n.id] = kind
                elif isinstance(node, ast.NamedExpr):
                    kind = _holds(node.value, tainted)
                    if kind is not None:
                        tainted[node.target.id] = kind
        for node in body:
            if not isinstance(node, ast.Call):
                continue
            ref = _ref(node.func)
            if ref is None:
                continue
            args: list[tuple[object, str]] = []
            for i, a in enumerate(node.args):
                kind = _holds(a.value if isinstance(a, ast.Starred) else a, tainted)
                if kind is not None:
                    args.append(("*" if isinstance(a, ast.Starred) else i, kind))
            for kw in node.keywords:
                kind = _holds(kw.value, tainted)
                if kind is not None:
                    args.append((kw.arg or "**", kind))
            if args:
                yield ref, args


def _mod_name(rel: str) -> str:
    return rel[:-3].replace("/", ".").removesuffix(".__init__")


def _ref(f: ast.expr) -> Optional[str]:
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        base = _ref(f.value)
        return f"{base}.{f.attr}" if base else None
    return None


def _key(node: ast.expr) -> Optional[str]:
    """The section ``node`` reads from a config: ``x["k"]``, ``x.get("k")``, ``x.k``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and isinstance(node.args[0], ast.Constant):
        return str(node.args[0].value)
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _base(node: ast.expr) -> Optional[ast.expr]:
    if isinstance(node, ast.Subscript):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value
    if isinstance(node, ast.Attribute):
        return node.value
    return None


def _holds(node: ast.expr, tainted: dict[str, str]) -> Optional[str]:
    """What ``node`` evaluates to: the whole config, ``typed`` or a plain ``mapping``; one of its ``section`` s; or
    None (anything else, e.g. a scalar setting). See the module docstring."""
    if isinstance(node, ast.Name):
        return tainted.get(node.id)
    if isinstance(node, ast.BoolOp):
        return next((k for k in (_holds(v, tainted) for v in node.values) if k is not None), None)
    if isinstance(node, ast.Dict):
        kinds = [_holds(v, tainted) for k, v in zip(node.keys, node.values) if k is None]
        kinds = [k for k in kinds if k is not None]
        return ("mapping" if "mapping" in kinds else "section") if kinds else None
    if isinstance(node, ast.Call):
        name = (_ref(node.func) or "").split(".")[-1]
        if name in SAME_CONFIG:
            own = _holds(node.func.value, tainted) if isinstance(node.func, ast.Attribute) else None
            given = next((k for k in (_holds(a, tainted) for a in node.args) if k is not None), None)
            if own is not None or given is not None:
                if name in TYPED_FROM:
                    return "typed"
                if name == "model_config_with_local":
                    return "section"
                return own or given
    key, base = _key(node), _base(node)
    if base is None or key is None:
        return None
    base_kind = _holds(base, tainted)
    if base_kind is None:
        return None
    if key == "raw" and base_kind == "typed":
        return "mapping"
    return "section" if key in SECTIONS else None


def _params_for(node: ast.AST, args: list[tuple[object, str]], mod: _Module, qual: str) -> list[tuple[str, str]]:
    """(parameter name, kind) of ``node`` for the config arguments ``args``."""
    if isinstance(node, ast.ClassDef):
        init = mod.defs.get(f"{qual}.__init__")
        if init is None:  # a dataclass or pydantic model: its fields hold the config
            return [(str(a), k) for a, k in args]
        assert isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef))
        node = init
        names = [a.arg for a in node.args.posonlyargs + node.args.args][1:]
    else:
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        names = [a.arg for a in node.args.posonlyargs + node.args.args]
        decorators = {_ref(d) for d in node.decorator_list}
        if "." in qual and "staticmethod" not in decorators:
            names = names[1:]  # self / cls
    kw = {a.arg for a in node.args.kwonlyargs} | set(names)
    out: list[str] = []
    kinds: list[str] = []
    for a, kind in args:
        got: list[str] = []
        if isinstance(a, int):
            if a < len(names):
                got = [names[a]]
            elif node.args.vararg:
                got = [node.args.vararg.arg]
        elif a == "*":
            got = names or ([node.args.vararg.arg] if node.args.vararg else [])
        elif a == "**":
            got = sorted(kw)
        elif a in kw:
            got = [str(a)]
        elif node.args.kwarg:
            got = [node.args.kwarg.arg]
        out += got
        kinds += [kind] * len(got)
    return list(zip(out, kinds))


def _layer_depths(root: Path) -> Callable[[str], int]:
    """module -> depth of its layer in the import table of ``docs/architecture.md`` (0 when unknown)."""
    table: dict[str, tuple[list[str], set[str]]] = {}
    text = (root / "docs" / "architecture.md").read_text().split("## Import table", 1)[1]
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "---") or not line.startswith("|"):
            continue
        layer, modules, may = cells
        prefixes = [p for p in (s.strip("`") for s in modules.split("`")[1::2])]
        below = {x.strip() for x in may.split(",") if x.strip() and not x.strip().startswith("(")}
        table[layer] = (prefixes, below)

    depths: dict[str, int] = {}

    def depth(layer: str) -> int:
        if layer not in depths:
            depths[layer] = 1 + max((depth(b) for b in table[layer][1] if b in table), default=-1)
        return depths[layer]

    def of(module: str) -> int:
        best, best_len = None, -1
        for layer, (prefixes, _) in table.items():
            for p in prefixes:
                hit = module == p or (p != "harness" and module.startswith(p + "."))
                if hit and len(p) > best_len:
                    best, best_len = layer, len(p)
        return depth(best) if best else 0

    return of


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    p.add_argument("--start", default="harness/app/commands/run.py:cmd_run")
    p.add_argument("--param", default="cfg")
    p.add_argument("--kind", default="typed", choices=("typed", "mapping"), help="what the parameter holds")
    a = p.parse_args(argv)
    w = Walker(Path(a.root)).walk(a.start, a.param, a.kind)
    print(f"{len(w.files)} files receive the config from {a.start} ({len(w.untyped)} of them the whole config as a "
          f"plain mapping); {w.climbs} climb(s) back up the layers in reading order; {len(w.upward)} call(s) to a "
          "higher layer")
    for f in sorted(w.files):
        print(f"  {f}")
    for s in sorted(w.upward):
        print(f"  upward: {s[0]} -> {s[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
