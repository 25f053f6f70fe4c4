"""Data-parallel execution of in-process models: ``torchrun --nproc_per_node N -m harness ...`` or
``accelerate launch --multi_gpu --num_processes N -m harness ...`` (both set ``RANK`` / ``WORLD_SIZE`` /
``LOCAL_RANK``).

Each rank takes every N-th item of the (shard's) plan, in plan order, so the split depends only on the plan and N,
never on timing; an item's video depends only on the item (its seed and identity), never on the rank, so N
processes write the same bytes as one. Rank 0 alone writes the manifest and runs the evaluation, after every
item of the run is done; the other ranks only generate. Coordination goes through the run directory (item locks,
``meta.json`` status), so no process group is needed and a long item never trips a collective's timeout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Rank:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def describe(self) -> str:
        return f"rank {self.rank}/{self.world}" if self.world > 1 else "single process"


def current_rank() -> Rank:
    """This process's place among data-parallel ranks (torchrun / accelerate / Slurm-style env variables)."""
    def get(*names: str, default: int) -> int:
        for n in names:
            v = os.environ.get(n)
            if v not in (None, ""):
                try:
                    return int(v)
                except ValueError:
                    pass
        return default

    world = get("WORLD_SIZE", default=1)
    rank = get("RANK", default=0)
    local = get("LOCAL_RANK", default=rank)
    if not 0 <= rank < world:  # a world of 0 or less holds no rank
        return Rank()
    return Rank(rank, world, local)


def split(items: list[T], r: Rank) -> list[T]:
    """This rank's items: every ``world``-th item starting at ``rank`` (the plan order is stable)."""
    return items[r.rank :: r.world]


def bind_local_device(r: Rank) -> None:
    """Under several ranks with CUDA, give each rank its own GPU (``LOCAL_RANK``); a no-op on CPU."""
    if r.world <= 1:
        return
    try:
        import torch  # already loaded in a model process: sys.modules' entry
    except ImportError:
        return
    if torch.cuda.is_available() and torch.cuda.device_count() > r.local_rank:
        torch.cuda.set_device(r.local_rank)
