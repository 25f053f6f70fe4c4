"""Matrix-Game 3.5 runner shim (runs inside the model's environment; targets Matrix-Game-3.5@fa6d2b6).

The rollout seed is a key of the upstream config (``seed: 3407``), not a flag. This shim writes a copy of the
config with ``seed`` (and ``validation_seed`` when present) set to the harness seed (and ``num_blocks`` when the
trajectory needs more than the released six blocks), then runs upstream with it.

Usage: ``python runner.py --seed S --config-in configs/x.yaml --config-out out.yaml -- infer_distilled.py <args>``.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with  # noqa: E402


def patch(opts: argparse.Namespace) -> None:
    import yaml

    cfg = yaml.safe_load(open(opts.config_in))
    cfg["seed"] = int(opts.seed)
    if "validation_seed" in cfg:
        cfg["validation_seed"] = int(opts.seed)
    if opts.num_blocks is not None:  # a preset longer than the released six blocks (84 poses each)
        cfg["num_blocks"] = int(opts.num_blocks)
    with open(opts.config_out, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="matrix_game35/runner.py", allow_abbrev=False)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--config-in", required=True)
    ap.add_argument("--config-out", required=True)
    ap.add_argument("--num-blocks", type=int, default=None)
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
