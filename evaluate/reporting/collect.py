"""Load finished items of one or more runs for a report, with the path of each ``metrics.json``.

Oracle entries (``backbone_kind == "oracle"``: the reference model's own geometry) are dropped here, so they never
reach a table, a paired comparison or a plot, whatever the caller did before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from harness.errors import ConfigError
from harness.outputs import ManifestRow, RunDir


class ReportError(ConfigError):
    """A report input a user can fix (missing run, run without evaluated items)."""


def is_oracle(key: str, entry: dict) -> bool:
    """An entry computed with the reference model's exact geometry rather than a measurement."""
    return entry.get("backbone_kind") == "oracle" or entry.get("backbone") == "oracle" or key.endswith("[oracle]")


@dataclass
class Item:
    """One evaluated video. ``result`` is its ``metrics.json`` with oracle entries removed."""

    run: str
    run_dir: Path
    item_dir: Path
    result: dict[str, Any]

    @property
    def metrics_path(self) -> Path:
        return self.item_dir / "metrics.json"

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        it = self.result["item"]
        return it["model"], it["context"], int(it["seed"]), it["trajectory"], it["case_id"]

    @property
    def model(self) -> str:
        return self.result["item"]["model"]

    @property
    def context(self) -> str:
        return self.result["item"]["context"]

    @property
    def seed(self) -> int:
        return int(self.result["item"]["seed"])

    @property
    def trajectory(self) -> str:
        return self.result["item"]["trajectory"]

    @property
    def case_id(self) -> str:
        return self.result["item"]["case_id"]

    @property
    def metrics(self) -> dict[str, dict]:
        return self.result["metrics"]

    def computed(self) -> dict[str, dict]:
        return {k: m for k, m in self.metrics.items() if m.get("status") == "computed"}

    @property
    def num_revisits(self) -> int:
        return int(self.result.get("num_revisits", 0))

    def latency_s(self) -> float:
        return float((self.result.get("timings_generation") or {}).get("generate_s", np.nan))


def drop_oracle(result: dict) -> dict:
    out = dict(result)
    out["metrics"] = {k: m for k, m in result.get("metrics", {}).items() if not is_oracle(k, m)}
    return out


def resolve_run_dir(name_or_path: str | Path, output_root: str | Path = "outputs") -> Path:
    """A run given by name (``<output_root>/<name>``) or by path; must hold a ``manifest.jsonl``."""
    return RunDir.existing(name_or_path, output_root).path


def load_items(run_dirs: list[Path]) -> tuple[list[Item], dict[str, int]]:
    """Every ``done`` item with a ``metrics.json`` in the runs' manifests (the later line of an item wins).

    An item (model, context, seed, trajectory, case) found in several runs is taken from the first run that has
    it, so no video counts twice. Returns the items and counts of what was skipped (``not_done``,
    ``not_evaluated``, ``duplicate``)."""
    items: dict[tuple, Item] = {}
    skipped = {"not_done": 0, "not_evaluated": 0, "duplicate": 0}
    for run_dir in run_dirs:
        run = RunDir(Path(run_dir))
        run_dir = run.path
        rows: dict[str, ManifestRow] = {}
        for r in run.rows():
            rows[r.dir or r.key] = r
        for r in rows.values():
            if not r.done:
                skipped["not_done"] += 1
                continue
            d = run.item_dir(r.dir)
            mp = d / "metrics.json"
            if not mp.exists():
                skipped["not_evaluated"] += 1
                continue
            res = drop_oracle(_load_result(mp, run_dir))
            it = Item(run_dir.name, run_dir, d, res)
            if it.key in items and items[it.key].run_dir != run_dir:
                skipped["duplicate"] += 1
                continue
            items[it.key] = it
    return sorted(items.values(), key=lambda i: (i.run,) + i.key), skipped


ITEM_KEYS = ("model", "context", "seed", "trajectory", "case_id")


def _load_result(path: Path, run_dir: Path) -> dict:
    """A ``metrics.json`` read back for the report: unreadable, truncated or of the wrong shape is a user error
    naming the file and the fix (an evaluation rewrites it), never a traceback."""
    from harness.io import load_json

    fix = f"rerun python -m harness stage=evaluate run={run_dir} (it rewrites a metrics.json it cannot read)"
    data = load_json(path, fix=fix, what="evaluation result")
    item, metrics = data.get("item"), data.get("metrics")
    if not (isinstance(item, dict) and all(k in item for k in ITEM_KEYS) and isinstance(metrics, dict)
            and all(isinstance(m, dict) for m in metrics.values())):
        raise ReportError(f"{path}: not an evaluation result (it needs 'item' with {', '.join(ITEM_KEYS)} and "
                          f"'metrics' as a mapping of entries); {fix}")
    return data


def per_revisit(m: dict) -> Optional[list[float]]:
    """Per-revisit values of a computed entry (entity metrics: the mean over targets per revisit)."""
    from evaluate.analyses import _per_revisit

    return _per_revisit(m) if m.get("status") == "computed" else None
