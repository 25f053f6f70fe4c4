"""Planning: work items = cases x trajectories x seed x context, filtered by what each case lists.

An item's seed is the configured seed (the model's frozen default unless ``seed=`` overrides it): it never
depends on process rank, order or time. Item output paths are deterministic, so reruns find their work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from .cases import Case


@dataclass(frozen=True, order=True)
class WorkItem:
    """One rollout: ``model`` under ``context`` with ``seed`` on ``trajectory`` for ``case_id``."""

    model: str
    context: str
    seed: int
    trajectory: str
    case_id: str

    @property
    def rel_dir(self) -> Path:
        """``<model>/<context>/seed-<seed>/<trajectory>/<case>``, relative to the run directory."""
        return Path(self.model) / self.context / f"seed-{self.seed}" / self.trajectory / self.case_id

    @property
    def key(self) -> str:
        return str(self.rel_dir.as_posix())

    def to_dict(self) -> dict:
        return asdict(self)


def parse_shard(shard: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n) with 0 <= i < n."""
    try:
        i, n = (int(x) for x in str(shard).split("/"))
    except ValueError:
        raise ValueError(f"shard={shard!r}: use 'i/n', e.g. 0/4") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard={shard!r}: need n >= 1 and 0 <= i < n")
    return i, n


def make_plan(
    model: str,
    context: str,
    seed: int,
    trajectories: Sequence[str],
    cases: Sequence[Case],
    shard: str = "0/1",
) -> list[WorkItem]:
    """All items in a stable order (trajectory, case id), then every n-th for shard ``i/n``."""
    items = sorted(
        WorkItem(model, context, int(seed), t, c.id) for t in trajectories for c in cases if t in c.trajectories
    )
    i, n = parse_shard(shard)
    return items[i::n]
