"""Metric families: one module each (camera, environment, entity = human + object, diagnostic, quality, dynamic).

Each module declares a :class:`Family` whose :class:`Metric` entries own their compute functions (the way
lm-evaluation-harness metrics do); the stage only orchestrates. A metric names the backbone *roles* it needs; the
stage iterates the configured backbones of each role (``evaluate.<setting>``), records the unavailable ones as
``not_computed`` with the reason and a failing one as ``failed`` with the error (:mod:`evaluate.results`), and calls ``compute`` with the
others. Formulas stay in :mod:`evaluate.camera`, :mod:`evaluate.memory`, :mod:`evaluate.dynamic` and
:mod:`evaluate.aggregate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..results import Entries, MetricEntry, Status, entries

#: backbone role -> the evaluation setting that lists its backbones in order
ROLE_SETTINGS = {"encoder": "encoders", "face": "face", "tracker": "trackers", "depth": "depth",
                 "pose": "pose_estimators", "imaging": "imaging", "aesthetic": "aesthetic"}
# The dynamic-memory judge is not a role: it is a server configured by the ``evaluate.judge`` settings block
# (evaluate/judge, docs/judge.md), and the dynamic family calls it directly.



@dataclass(frozen=True)
class Metric:
    """One metric of a family.

    Attributes:
        id: the metric id of :mod:`evaluate.catalog` (key prefix in ``metrics.json``).
        roles: backbone roles, iterated over the configured backbones of each (their product).
        compute: ``(ctx, perception, ecfg, backbones: {role: name}) -> {key: entry}``.
        applies: ``(ctx, ecfg) -> bool`` (e.g. only object cases).
    """

    id: str
    roles: tuple[str, ...]
    compute: Callable[..., Entries]
    applies: Callable[[Any, Any], bool] = lambda ctx, ecfg: True
    reports: tuple[str, ...] = ()  # ids recorded when a backbone is unavailable (default: ``id``)

    @property
    def ids(self) -> tuple[str, ...]:
        return self.reports or (self.id,)


@dataclass(frozen=True)
class Family:
    """A metric family: its settings (whose change recomputes it) and its metrics, in report order."""

    name: str
    settings: tuple[str, ...]
    metrics: tuple[Metric, ...] = field(default_factory=tuple)


def entry(metric: str, backbone: str, kind: str, value: float, **details: Any) -> Entries:
    """A computed value, keyed ``metric[backbone]`` (``metric`` alone when ``backbone`` is empty)."""
    return entries(MetricEntry.computed(metric, backbone, kind, value, **details))


def missing(metric: str, backbone: str, reason: str, status: Status = Status.NOT_COMPUTED) -> Entries:
    """A value that is not computed (backbone unavailable), not applicable, or failed, with the reason."""
    return entries(MetricEntry.unavailable(metric, backbone, reason, Status(status)))


def all_families() -> tuple[Family, ...]:
    """Every family in evaluation order (imported lazily)."""
    from . import camera, departure, diagnostic, dynamic, entity, environment, quality

    return (camera.FAMILY, environment.FAMILY, entity.HUMAN, entity.OBJECT, diagnostic.FAMILY, departure.FAMILY,
            quality.FAMILY, dynamic.FAMILY)
