"""Helpers for runner shims: small scripts that run *inside a model's own environment* (stdlib only here).

A shim is launched as ``python <shim.py> [--harness-options] -- <upstream script> <upstream args>``. It seeds the
global RNGs (several upstream scripts draw from them unseeded), applies the minimum patch it exists for, then runs
the upstream script with ``runpy`` exactly as ``python <script> <args>`` would (``sys.argv`` and ``__main__`` set,
the checkout on ``sys.path``).
"""

from __future__ import annotations

import argparse
import os
import random
import runpy
import sys
from typing import Any, Callable, Sequence, TypeVar


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``[shim options] -- script args`` -> (shim options, [script, *args])."""
    argv = list(argv)
    if "--" not in argv:
        raise SystemExit("shim usage: <shim.py> [options] -- <upstream script> [args...]")
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global RNGs (whichever are importable in the model's environment)."""
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    except ImportError:
        pass


def replace_literals(src: str, replacements: Sequence[tuple[str, str]], where: str, commit: str) -> str:
    """Apply literal ``(old, new)`` replacements; each ``old`` must occur, else the checkout is another commit."""
    for old, new in replacements:
        if old not in src:
            raise SystemExit(f"shim: {old!r} not found in {where}; this patch targets upstream {commit}")
        src = src.replace(old, new)
    return src


def run_upstream(script_and_args: list[str], replacements: Sequence[tuple[str, str]] = (), commit: str = "") -> None:
    """Run ``script`` with ``args`` as ``__main__`` from the current directory (the upstream checkout).

    ``replacements``: literal edits of the script's own source (hard-coded paths), applied before it runs.
    """
    script = script_and_args[0]
    sys.argv = list(script_and_args)
    sys.path.insert(0, os.getcwd())
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    if not replacements:
        runpy.run_path(script, run_name="__main__")
        return
    import builtins

    src = replace_literals(open(script).read(), replacements, script, commit)
    namespace = {"__name__": "__main__", "__file__": os.path.abspath(script), "__builtins__": builtins}
    exec(compile(src, os.path.abspath(script), "exec"), namespace)


def main_with(parser: argparse.ArgumentParser,
              patch: Callable[[argparse.Namespace], Sequence[tuple[str, str]] | None],
              argv: Sequence[str] | None = None) -> None:
    """Parse the shim's own options, seed, ``patch(options)``, run upstream. ``patch`` may return literal
    replacements for the upstream script's own source (see :func:`run_upstream`)."""
    own, upstream = split_argv(sys.argv[1:] if argv is None else argv)
    opts = parser.parse_args(own)
    if getattr(opts, "seed", None) is not None:
        seed_everything(int(opts.seed))
    sys.path.insert(0, os.getcwd())
    replacements = patch(opts) or ()
    run_upstream(upstream, replacements, getattr(opts, "commit", "") or "")


_F = TypeVar("_F", bound=Callable[..., Any])


def marked(fn: _F, flag: str = "harness_shim") -> _F:
    """``fn`` with the attribute ``flag`` set to True: how a test (or a reader of a traceback) tells the shim's
    replacement of an upstream function from the original."""
    setattr(fn, flag, True)
    return fn


def patch_attr(module_name: str, attr: str, make: Callable[[Any], object]) -> None:
    """Replace ``module.attr`` by ``make(original)``; also rebind it in modules that imported it by name."""
    import importlib

    mod = importlib.import_module(module_name)
    original = getattr(mod, attr)
    new = make(original)
    setattr(mod, attr, new)
    for m in list(sys.modules.values()):
        if m is not None and getattr(m, attr, None) is original:
            setattr(m, attr, new)


def patch_source(module_name: str, replacements: Sequence[tuple[str, str]], commit: str) -> None:
    """Import ``module_name`` from a copy of its source with literal ``replacements`` applied.

    Each ``old`` string must occur in the file, else the shim stops: the checkout is not the upstream ``commit``
    the patch was written for. Used where the value to change is a hard-coded literal (no hook exists).
    """
    import importlib.util

    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"shim: cannot find module {module_name!r} in the upstream checkout")
    src = replace_literals(open(spec.origin).read(), replacements, spec.origin, commit)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    exec(compile(src, spec.origin, "exec"), mod.__dict__)


def load_selection(path: str) -> dict[int, list[int]]:
    """Harness context selection (``context_selection.json``): first latent of a chunk -> attended history."""
    import json

    data = json.load(open(path))
    return {int(c["current"][0]): [int(i) for i in c["context"]] for c in data["chunks"]}
