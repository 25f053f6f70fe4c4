"""Mutant generation: small AST edits of one source file, each named by a stable, readable id.

A mutant is one edit of one node. Its id is ``<qualname>: <before> -> <after>`` (``ast.unparse`` of the smallest
expression or statement that shows the edit, whitespace collapsed), with `` #n`` appended when the same text occurs
n times in the same function. Ids survive edits elsewhere in the file (no line numbers in them), so the file of
known equivalents (``equivalent.yaml``) can key on them.

Operators (deliberately few and classic, so the score means the same thing from one run to the next):

==========  ==========================================================================================
compare     ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``is`` <-> ``is not``, ``in`` <-> ``not in``
arith       ``+`` <-> ``-``, ``*`` <-> ``/``, ``//`` -> ``/``, ``**`` -> ``*``, ``%`` -> ``//`` (also in ``x op= y``)
mask        ``&`` <-> ``|`` (also ``&=`` / ``|=``) and each operand dropped (``a & b`` -> ``a``, -> ``b``)
bool        ``and`` <-> ``or``, each operand of an ``and`` / ``or`` dropped, ``not x`` -> ``x``
negate      ``if x:`` / ``while x:`` / ``x if c else y`` -> ``not c`` (when ``c`` is not already a comparison)
number      an int or float constant ``n`` -> ``n + 1``; ``True`` <-> ``False``
index       ``a[0]`` <-> ``a[-1]``
sign        ``-x`` -> ``x``
call        ``min`` <-> ``max``, ``any`` <-> ``all``, ``argmin`` <-> ``argmax``, ``minimum`` <-> ``maximum``,
            ``mean`` -> ``max``, ``median`` -> ``mean`` (functions and methods, e.g. ``np.mean``, ``x.any()``)
statement   a call used as a statement (``f(x)``, ``os.unlink(p)``, ``out.append(v)``) -> ``pass``
==========  ==========================================================================================

Not mutated: docstrings and every other string, f-strings, annotations, decorators, ``raise`` and ``assert``
statements (their message text and the exception type are not behaviour a formula can get wrong: their
conditions are), logging calls.
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
from dataclasses import dataclass

COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
           ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
         ast.Pow: ast.Mult, ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
CALLS = {"min": "max", "max": "min", "any": "all", "all": "any", "argmin": "argmax", "argmax": "argmin",
         "minimum": "maximum", "maximum": "minimum", "amin": "amax", "amax": "amin", "nanmin": "nanmax",
         "nanmax": "nanmin", "mean": "max", "nanmean": "nanmax", "median": "mean"}
LOGGERS = {"log", "logger", "logging", "warnings", "LOG"}


@dataclass(frozen=True)
class Mutant:
    """One edit: ``path`` (node path from the module root), the replacement node (None = delete the statement),
    the readable id and the line it is on."""

    file: str
    id: str
    line: int
    end_line: int
    operator: str
    path: tuple
    replacement: object
    function: tuple | None = None  # (class..., function) holding the edit; None at module or class-body level
    #: when the edit is in a function's body (not its signature or decorators): the lines of its span that hold
    #: code of a function (what a line trace records when it runs); a span no test runs cannot show the edit
    code_lines: frozenset[int] | None = None

    def module_ast(self, tree: ast.Module) -> ast.Module:
        """A copy of ``tree`` with this edit applied."""
        new = copy.deepcopy(tree)
        parent, (field, index) = _resolve(new, self.path[:-1]), self.path[-1]
        repl = copy.deepcopy(self.replacement) if self.replacement is not None else ast.Pass()
        if index is None:
            setattr(parent, field, repl)
        else:
            getattr(parent, field)[index] = repl
        return ast.fix_missing_locations(new)


def _function_of(tree, path) -> tuple | None:
    """The names (enclosing classes, then the outermost function) of the function whose body or signature holds
    the node at ``path``; None when no function does."""
    found = _function_node(tree, path)
    return found[0] if found else None


def _in_body(tree, path) -> bool:
    """Whether the node at ``path`` lies in the body of a function (not its signature, not outside functions)."""
    found = _function_node(tree, path)
    return bool(found) and found[2] == "body"


def runtime_lines(source: str, filename: str = "<mutant>") -> frozenset[int]:
    """The lines holding code of a function of ``source`` (any depth: methods, closures, lambdas, comprehensions):
    the lines a line trace records when that code runs. The module's and class bodies' own code (run at import) is
    left out."""
    out: set[int] = set()
    todo = [c for c in compile(source, filename, "exec").co_consts if hasattr(c, "co_lines")]
    while todo:
        code = todo.pop()
        if code.co_flags & inspect.CO_OPTIMIZED:  # a function's code (a class body's is not optimised)
            out.update(line for _, _, line in code.co_lines() if line is not None)
        todo += [c for c in code.co_consts if hasattr(c, "co_lines")]
    return frozenset(out)


def _function_node(tree, path) -> tuple[tuple, ast.AST, str] | None:
    """(names, function node, field of it holding the node at ``path``) of the outermost function on ``path``."""
    names, node = [], tree
    for field, index in path:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return (tuple(names + [node.name]), node, field) if field in ("body", "args") else None
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        node = getattr(node, field)
        if index is not None:
            node = node[index]
    return None


def _resolve(node, path):
    for field, index in path:
        node = getattr(node, field)
        if index is not None:
            node = node[index]
    return node


def _text(node) -> str:
    return re.sub(r"\s+", " ", ast.unparse(node)).strip()


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_logging(call: ast.Call) -> bool:
    f = call.func
    while isinstance(f, ast.Attribute):
        f = f.value
    return (isinstance(f, ast.Name) and f.id in LOGGERS) or _callee(call) == "print"


class _Collector:
    """Walks a module and yields ``(path, node_before, replacement, operator, shown_before, shown_after)``."""

    def __init__(self):
        self.out: list[tuple] = []

    def add(self, op, path, before, after, shown=None):
        shown_before = shown if shown is not None else before
        if after is None:
            shown_after = "pass"
        else:
            # show the edit in its context node: splice the replacement into a copy of the shown node
            shown_after = self._spliced(shown_before, before, after)
        a, b = _text(shown_before), shown_after
        if a != b:
            line = getattr(before, "lineno", None) or getattr(shown_before, "lineno", 0)
            end = getattr(before, "end_lineno", None) or line
            self.out.append((op, tuple(path), after, a, b, line, end))

    @staticmethod
    def _spliced(context, before, after) -> str:
        if context is before:
            return _text(after)
        ctx = copy.deepcopy(context)
        # find ``before`` inside the (uncopied) context by walking both trees in step
        for orig, cp in zip(ast.walk(context), ast.walk(ctx)):
            for field, value in ast.iter_fields(orig):
                if value is before:
                    setattr(cp, field, copy.deepcopy(after))
                    return _text(ctx)
                if isinstance(value, list):
                    for i, v in enumerate(value):
                        if v is before:
                            getattr(cp, field)[i] = copy.deepcopy(after)
                            return _text(ctx)
        return _text(after)

    def visit(self, node, path, parent_expr=None):
        if isinstance(node, (ast.Raise, ast.Assert, ast.JoinedStr)):
            return
        if isinstance(node, ast.Call) and _is_logging(node):
            return
        self._mutate(node, path, parent_expr)
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "decorator_list", "type_comment"):
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if not isinstance(child, ast.AST):
                        continue
                    if i == 0 and field == "body" and _is_docstring(child):
                        continue
                    self.visit(child, path + [(field, i)], self._context(node, child, parent_expr))
            elif isinstance(value, ast.AST):
                self.visit(value, path + [(field, None)], self._context(node, value, parent_expr))

    @staticmethod
    def _context(node, child, parent_expr):
        """What a leaf edit (a constant) is shown in: the nearest enclosing non-leaf expression, else the simple
        statement that holds it (``x = 3``), else nothing (the constant alone, e.g. a default argument)."""
        if isinstance(node, ast.expr):
            return node if not isinstance(node, (ast.Constant, ast.Name)) else parent_expr
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)):
            return node
        return None

    def _mutate(self, node, path, ctx):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in COMPARE:
                    new = copy.deepcopy(node)
                    new.ops[i] = COMPARE[type(op)]()
                    self.add("compare", path, node, new)
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITH:
            if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
                return  # "%" string formatting
            new = copy.deepcopy(node)
            new.op = ARITH[type(node.op)]()
            self.add("mask" if isinstance(node.op, (ast.BitAnd, ast.BitOr)) else "arith", path, node, new)
            if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
                self.add("mask", path, node, node.left)
                self.add("mask", path, node, node.right)
        elif isinstance(node, ast.AugAssign) and type(node.op) in ARITH:
            new = copy.deepcopy(node)
            new.op = ARITH[type(node.op)]()
            self.add("mask" if isinstance(node.op, (ast.BitAnd, ast.BitOr)) else "arith", path, node, new)
        elif isinstance(node, ast.BoolOp):
            new = copy.deepcopy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self.add("bool", path, node, new)
            for i in range(len(node.values)):
                rest = node.values[:i] + node.values[i + 1:]
                self.add("bool", path, node, rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest))
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                self.add("bool", path, node, node.operand)
            elif isinstance(node.op, ast.USub) and not isinstance(node.operand, ast.Constant):
                self.add("sign", path, node, node.operand)
        elif isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                self.add("number", path, node, ast.Constant(not v), ctx)
            elif isinstance(v, (int, float)) and not isinstance(v, complex):
                self.add("number", path, node, ast.Constant(v + 1), ctx)
        elif isinstance(node, ast.Subscript):
            s = node.slice
            val = s.value if isinstance(s, ast.Constant) else None
            neg = isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.USub) and isinstance(s.operand, ast.Constant)
            if val == 0 and not isinstance(val, bool):
                new = copy.deepcopy(node)
                new.slice = ast.UnaryOp(op=ast.USub(), operand=ast.Constant(1))
                self.add("index", path, node, new)
            elif neg and s.operand.value == 1:
                new = copy.deepcopy(node)
                new.slice = ast.Constant(0)
                self.add("index", path, node, new)
        elif isinstance(node, ast.Call):
            name = _callee(node)
            if name in CALLS:
                new = copy.deepcopy(node)
                if isinstance(new.func, ast.Attribute):
                    new.func.attr = CALLS[name]
                else:
                    new.func.id = CALLS[name]
                self.add("call", path, node, new)
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            self._negate(node, path + [("test", None)], node.test)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and not _is_logging(node.value):
            self.add("statement", path, node, None)

    def _negate(self, node, path, test):
        if isinstance(test, (ast.Compare, ast.BoolOp)) or (isinstance(test, ast.UnaryOp)
                                                          and isinstance(test.op, ast.Not)):
            return  # already mutated by compare / bool
        if isinstance(test, ast.Constant):
            return
        self.add("negate", path, test, ast.UnaryOp(op=ast.Not(), operand=test))


def _qualnames(tree: ast.Module) -> dict[int, str]:
    """Line -> qualified name of the innermost def/class covering it ('<module>' outside any)."""
    out: dict[int, str] = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                for ln in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    out[ln] = name
                walk(child, name)
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def generate(file: str, source: str) -> list[Mutant]:
    """Every mutant of ``source`` (the text of ``file``, a path relative to the repository root)."""
    tree = ast.parse(source)
    col = _Collector()
    for i, stmt in enumerate(tree.body):
        if i == 0 and _is_docstring(stmt):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        col.visit(stmt, [("body", i)])
    names = _qualnames(tree)
    runnable = runtime_lines(source, file)
    seen: dict[str, int] = {}
    out = []
    for op, path, repl, before, after, line, end in col.out:
        base = f"{names.get(line, '<module>')}: {before} -> {after}"
        seen[base] = seen.get(base, 0) + 1
        ident = base if seen[base] == 1 else f"{base} #{seen[base]}"
        code = runnable & frozenset(range(line, end + 1)) if _in_body(tree, path) else None
        out.append(Mutant(file, ident, line, end, op, path, repl, _function_of(tree, path), code))
    return out


def mutated_code(mutant: Mutant, source: str, filename: str):
    """The compiled module code of ``mutant`` (raises SyntaxError / ValueError for an edit that does not compile)."""
    return compile(mutant.module_ast(ast.parse(source)), filename, "exec")

