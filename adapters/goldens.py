"""Golden files of the compiled native controls: one folder per model and trajectory.

``python -m adapters.goldens regen`` rewrites ``tests/goldens/controls/<model>/<trajectory>/`` from the current
compilers (review the diff before committing it); ``python -m adapters.goldens check`` compares. Arrays are stored
in ``arrays.npz`` (key ``<file>/<array>``), text files verbatim (as ``<name>.golden``: data, not source) with
run-specific paths replaced by placeholders.
Numbers are compared with a 1e-9 tolerance (float rounding of BLAS kernels may differ between CPUs); everything
else must match exactly.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from adapters.contracts import ADAPTERS_DIR, available
from harness.io import write_text

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "goldens" / "controls"
MODELS = tuple(available(ADAPTERS_DIR))  # the in-tree upstream models: the folders of adapters/ with a contract.yaml
TRAJECTORIES = ("lrlr", "lrud", "square")
CASE = "environment_rocket"
TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".sh")
_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def compile_item(model: str, trajectory: str, out_dir: Path, context: str = "paper") -> Path:
    """Compile ``model`` on ``trajectory`` for the golden case into ``out_dir``; returns the controls folder."""
    from adapters.base import ItemRequest, build_adapter
    from harness.cases import load_case_set
    from harness.config_groups import group_yaml
    from harness.context import ContextPolicy
    from trajectories import TrajectorySpec

    adapter = build_adapter(group_yaml("model", model))
    ctx = group_yaml("context", adapter.config.paper_context if context == "paper" else context)
    policy = ContextPolicy.from_dict(ctx)
    case = {c.id: c for c in load_case_set("builtin:demo")}[CASE]
    _, K = adapter.canvas_image_and_K(case)
    path = adapter.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", trajectory)), K, trajectory)
    item = out_dir / model / trajectory
    adapter.compile(ItemRequest(case=case, path=path, context=policy, seed=adapter.config.seed, item_dir=item))
    return item / "controls"


def normalise_text(text: str, controls: Path) -> str:
    text = text.replace(str(controls.parent), "<item>")
    return text.replace(str(ROOT), "<repo>")


def snapshot(controls: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    arrays: dict[str, np.ndarray] = {}
    texts: dict[str, str] = {}
    for f in sorted(controls.rglob("*")):
        rel = f.relative_to(controls).as_posix()
        if f.suffix == ".npy":
            arrays[f"{rel}/array"] = np.load(f)
        elif f.suffix == ".npz":
            with np.load(f) as z:
                for k in z.files:
                    arrays[f"{rel}/{k}"] = z[k]
        elif f.suffix in TEXT_SUFFIXES:
            texts[rel] = normalise_text(f.read_text(), controls)
    return arrays, texts


def regen(models: Sequence[str] = MODELS, trajectories: Sequence[str] = TRAJECTORIES) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            for t in trajectories:
                arrays, texts = snapshot(compile_item(m, t, Path(tmp)))
                dest = GOLDEN_DIR / m / t
                if dest.exists():
                    shutil.rmtree(dest)
                dest.mkdir(parents=True)
                # numpy's stub types **kwds like its allow_pickle flag (bool); every key here is an array's name
                np.savez_compressed(dest / "arrays.npz", **arrays)  # type: ignore[arg-type]
                for rel, text in texts.items():
                    # the golden is what the harness wrote (write_text makes the folders a nested file needs)
                    write_text(dest / "text" / f"{rel}.golden", text, scrubbed=True)
                print(f"wrote {dest.relative_to(ROOT)} ({len(arrays)} arrays, {len(texts)} text files)")


def _tokens_equal(a: str, b: str, tol: float) -> bool:
    na, nb = _NUM.findall(a), _NUM.findall(b)
    if _NUM.sub("#", a) != _NUM.sub("#", b) or len(na) != len(nb):
        return False
    return all(abs(float(x) - float(y)) <= tol * max(1.0, abs(float(y))) for x, y in zip(na, nb))


def compare(model: str, trajectory: str, controls: Path, tol: float = 1e-9) -> list[str]:
    """Differences between freshly compiled ``controls`` and the golden (empty list = match)."""
    dest = GOLDEN_DIR / model / trajectory
    if not dest.exists():
        return [f"no golden at {dest}; run `python -m adapters.goldens regen`"]
    arrays, texts = snapshot(controls)
    problems = []
    with np.load(dest / "arrays.npz") as z:
        gold = {k: z[k] for k in z.files}
    if set(gold) != set(arrays):
        problems.append(f"array set differs: {sorted(set(gold) ^ set(arrays))}")
    for k in set(gold) & set(arrays):
        a, g = arrays[k], gold[k]
        if a.shape != g.shape or a.dtype != g.dtype:
            problems.append(f"{k}: {a.shape} {a.dtype} != golden {g.shape} {g.dtype}")
        elif not np.allclose(a, g, rtol=0, atol=tol):
            problems.append(f"{k}: max |diff| {np.abs(a.astype(float) - g.astype(float)).max():.3g}")
    gold_texts = {p.relative_to(dest / "text").as_posix().removesuffix(".golden"): p.read_text()
                  for p in (dest / "text").rglob("*.golden") if p.is_file()}
    if set(gold_texts) != set(texts):
        problems.append(f"text file set differs: {sorted(set(gold_texts) ^ set(texts))}")
    for k in set(gold_texts) & set(texts):
        if not _tokens_equal(texts[k], gold_texts[k], tol):
            problems.append(f"{k}: text differs from the golden")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m adapters.goldens", description=__doc__)
    ap.add_argument("action", choices=["regen", "check"])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    args = ap.parse_args(argv)
    if args.action == "regen":
        regen(args.models)
        return 0
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for m in args.models:
            for t in TRAJECTORIES:
                probs = compare(m, t, compile_item(m, t, Path(tmp)))
                bad += bool(probs)
                print(f"{'FAIL' if probs else 'ok  '} {m}/{t}" + "".join(f"\n    {p}" for p in probs))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
