"""The evaluated videos a report reads: one :class:`Item` per video, its :class:`~evaluate.results.ItemResult` and
where its ``metrics.json`` is.

Every reader of results (the report, the run tables, the console summary) takes them through :func:`scored`: ground
truth (oracle entries: the reference model's own geometry) is dropped there, with
:meth:`~evaluate.results.ItemResult.without_oracle`, the one oracle predicate, and so are the values that a video's
case cannot score (a static-content metric of a dynamic case, :func:`evaluate.catalog.scores_case`). Nothing after
this module sees either.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from harness.errors import ConfigError
from harness.outputs import ManifestRow, RunDir

from ..catalog import scores_case
from ..results import Entries, ItemResult, MetricEntry

log = logging.getLogger(__name__)

#: (model, context, seed, trajectory, case_id): one video of a study (:attr:`Item.key`)
ItemKey = tuple[str, str, int, str, str]
#: (run, model, context, seed, trajectory, case_id): one video of a report over several runs (``(it.run,) + it.key``)
PageKey = tuple[str, str, str, int, str, str]


class ReportError(ConfigError):
    """A report input a user can fix (missing run, run without evaluated items)."""


def scored(result: ItemResult) -> ItemResult:
    """``result`` as every table, comparison, plot and console line reads it: no oracle entry, and no value of a
    metric that this video's case family does not score."""
    r = result.without_oracle()
    return replace(r, metrics={k: m for k, m in r.metrics.items() if scores_case(k, r.case_family)})


@dataclass
class Item:
    """One evaluated video: its run, its folder and its :func:`scored` result."""

    run: str
    run_dir: Path
    item_dir: Path
    result: ItemResult

    @functools.cached_property  # read for every provenance term of every cell (millions in a release-size report)
    def metrics_path(self) -> Path:
        return self.item_dir / "metrics.json"

    @property
    def key(self) -> ItemKey:
        """(model, context, seed, trajectory, case_id)."""
        return self.model, self.context, self.seed, self.trajectory, self.case_id

    @property
    def model(self) -> str:
        return str(self.result.item["model"])

    @property
    def context(self) -> str:
        return str(self.result.item["context"])

    @property
    def seed(self) -> int:
        return int(self.result.item["seed"])

    @property
    def trajectory(self) -> str:
        return str(self.result.item["trajectory"])

    @property
    def case_id(self) -> str:
        return str(self.result.item["case_id"])

    @property
    def case_family(self) -> str:
        return self.result.case_family

    @property
    def metrics(self) -> Entries:
        return self.result.metrics

    def entry(self, key: str) -> Optional[MetricEntry]:
        return self.result.metrics.get(key)

    def computed(self) -> Entries:
        return self.result.computed()

    @property
    def num_revisits(self) -> int:
        return self.result.num_revisits

    @property
    def phases(self) -> dict[str, list[int]]:
        return self.result.phases

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.result.extra.get("settings") or {})

    def latency_s(self) -> float:
        """Generation time of the video [s] (``generate_s`` of its timings), NaN when not recorded."""
        return float(self.result.timings_generation.get("generate_s", np.nan))


def resolve_run_dir(name_or_path: str | Path, output_root: str | Path = "outputs") -> Path:
    """A run given by name (``<output_root>/<name>``) or by path; must hold a ``manifest.jsonl``."""
    return RunDir.existing(name_or_path, output_root).path


def items_of(run_dir: Path, results: Iterable[tuple[Path, ItemResult]]) -> list[Item]:
    """Items of one run from results already in memory (the evaluation stage), sorted like :func:`load_items`."""
    run_dir = Path(run_dir).resolve()
    out = [Item(run_dir.name, run_dir, Path(d).resolve(), scored(r)) for d, r in results if r.item]
    return sorted(out, key=lambda i: (i.run,) + i.key)


def load_items(run_dirs: list[Path]) -> tuple[list[Item], dict[str, int]]:
    """Every ``done`` item with a ``metrics.json`` in the runs' manifests (the later line of an item wins).

    An item (model, context, seed, trajectory, case) found in several runs is taken from the first run that has
    it, so no video counts twice. An item made with a trajectory layout the harness replaced
    (:mod:`trajectories.migration`) is left out, with a warning: its scores are of another layout under the same
    name. Returns the items and counts of what was skipped (``not_done``, ``not_evaluated``, ``duplicate``,
    ``superseded``). A ``metrics.json`` computed on another video than the one the manifest now records
    (:meth:`~evaluate.results.ItemResult.video_problem`) is refused, like an edited one: a :class:`ReportError`
    naming each such file and the command that recomputes them."""
    from harness.outputs import item_meta
    from trajectories.migration import SUPERSEDED_NAMES, superseded_item

    items: dict[ItemKey, Item] = {}
    skipped = {"not_done": 0, "not_evaluated": 0, "duplicate": 0, "superseded": 0}
    other_video: dict[str, list[str]] = {}  # run -> its results of another video than the item holds: all refused
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
            stale = superseded_item(item_meta(d)) if r.trajectory in SUPERSEDED_NAMES else None
            if stale:
                log.warning("%s: left out of the report: %s (rerun its run, then evaluate it)", d, stale)
                skipped["superseded"] += 1
                continue
            result = ItemResult.from_dict(_load_result(mp, run_dir))
            problem = result.video_problem(r.video_sha256)
            if problem is not None:
                other_video.setdefault(str(run_dir), []).append(f"{mp}: {problem}")
                continue
            it = Item(run_dir.name, run_dir, d, scored(result))
            if it.key in items and items[it.key].run_dir != run_dir:
                skipped["duplicate"] += 1
                continue
            items[it.key] = it
    if other_video:
        found = [x for lines in other_video.values() for x in lines]
        fix = "; ".join(f"python -m harness stage=evaluate run={d}" for d in other_video)
        raise ReportError(f"{len(found)} evaluated item(s) no longer match their video: " + "; ".join(found[:5])
                          + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
                          + f". Evaluate again ({fix}: it recomputes them), then make the report")
    return sorted(items.values(), key=lambda i: (i.run,) + i.key), skipped


ITEM_KEYS = ("model", "context", "seed", "trajectory", "case_id")


def _load_result(path: Path, run_dir: Path) -> dict[str, Any]:
    """A ``metrics.json`` read back for the report: unreadable, truncated or of the wrong shape is a user error
    naming the file and the fix (an evaluation rewrites it), never a traceback."""
    from harness.io import load_json, seal_problem

    fix = f"rerun python -m harness stage=evaluate run={run_dir} (it rewrites a metrics.json it cannot read)"
    data: dict[str, Any] = load_json(path, fix=fix, what="evaluation result")
    item, metrics = data.get("item"), data.get("metrics")
    if not (isinstance(item, dict) and all(k in item for k in ITEM_KEYS) and isinstance(metrics, dict)
            and all(isinstance(m, dict) for m in metrics.values())):
        raise ReportError(f"{path}: not an evaluation result (it needs 'item' with {', '.join(ITEM_KEYS)} and "
                          f"'metrics' as a mapping of entries); {fix}")
    problem = seal_problem(data)  # trust nothing on disk: an edited result never reaches a table
    if problem is not None:
        raise ReportError(f"{path}: {problem}; {fix}")
    return data

