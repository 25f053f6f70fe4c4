"""YUME runner shim (runs inside the model's environment; targets YUME@111c3fa fastvideo/sample/sample_5b.py).

Upstream is unseeded: ``set_seed(args.seed + rank)`` is commented out, ``generate`` is called without a seed and
later stages draw from the global RNG. This shim seeds the global RNGs and makes ``--generate`` (``module.Class.method``
or ``module.function``) receive ``seed=`` when the caller does not pass one.

Usage: ``python runner.py --seed S --generate wan23.Yume.generate -- fastvideo/sample/sample_5b.py <args>``.
"""

import argparse
import functools
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with  # noqa: E402


def patch(opts):
    parts = opts.generate.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name)
        original = getattr(owner, parts[-1])

        @functools.wraps(original)
        def generate(*args, **kwargs):
            kwargs.setdefault("seed", opts.seed)
            return original(*args, **kwargs)

        setattr(owner, parts[-1], generate)
        return
    raise SystemExit(f"shim: cannot import {opts.generate!r} from the YUME checkout")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--generate", default="wan23.Yume.generate")
    main_with(ap, patch)
