"""What every metric family module uses: the :class:`Family` (its settings and its metric specs), the
:class:`Computation` steps the stage runs, the backbone roles and the entry builders.

A metric names the backbone *roles* its computations need; the stage iterates the configured backbones of each role
(``evaluate.<setting>``, :data:`ROLE_SETTINGS`), records the unavailable ones as ``not_computed`` with the reason and
a failing one as ``failed`` with the error (:mod:`evaluate.results`), and calls the compute function with the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..item import CAMERA_ITEMS
from ..registry import AppliesFn, Compute, ComputeFn, MetricSpec, always
from ..results import Entries, MetricEntry, Status, entries

# ROLE_SETTINGS (backbone role -> the evaluation setting that lists its backbones in order) lives in
# evaluate.config, beside the settings it names. The dynamic-memory judge is not a role: it is a server configured
# by the ``evaluate.judge`` settings block
# (evaluate/judge, docs/judge.md), and the dynamic family calls it directly.


@dataclass(frozen=True)
class Computation:
    """One step of a family's evaluation: the metric ``id`` and one of its spec's :class:`~evaluate.registry.Compute`
    (``step``, which alone declares the function, roles, applicability and reported ids; a memory metric's step
    never applies to camera-following items).

    Attributes:
        id: the metric whose spec owns the computation (key prefix in ``metrics.json``).
        step: the computation as the spec declares it.
    """

    id: str
    step: Compute

    @property
    def roles(self) -> tuple[str, ...]:
        """Backbone roles, iterated over the configured backbones of each (their product)."""
        return self.step.roles

    @property
    def compute(self) -> ComputeFn:
        """``(item, perception, settings, backbones: {role: name}) -> {key: entry}``."""
        return self.step.function

    @property
    def applies(self) -> AppliesFn:
        """``(item, settings) -> bool`` (e.g. only object cases)."""
        return self.step.applies

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids recorded when a backbone is unavailable or the function raises (default: ``id``)."""
        return self.step.reports or (self.id,)


@dataclass(frozen=True)
class Family:
    """A metric family: its settings (whose change recomputes it) and its metric specs, in report order."""

    name: str
    settings: tuple[str, ...]
    specs: tuple[MetricSpec, ...] = field(default_factory=tuple)

    @property
    def metrics(self) -> tuple[Computation, ...]:
        """The computations of its specs, in spec order (the order of the keys in ``metrics.json``)."""
        return tuple(_step(s, c) for s in self.specs for c in s.computations)


def _step(spec: MetricSpec, c: Compute) -> Computation:
    return Computation(spec.id, replace(c, applies=_not_on_camera_items(c.applies)) if spec.memory else c)


def _not_on_camera_items(applies: AppliesFn) -> AppliesFn:
    """``applies``, and never for a camera-following item: a memory metric does not score camera following."""
    def check(item: Any, settings: Any) -> bool:
        return item.family != CAMERA_ITEMS and applies(item, settings)

    return check


def entry(metric: str, backbone: str, kind: str, value: float, **details: Any) -> Entries:
    """A computed value, keyed ``metric[backbone]`` (``metric`` alone when ``backbone`` is empty)."""
    return entries(MetricEntry.computed(metric, backbone, kind, value, **details))


def missing(metric: str, backbone: str, reason: str, status: Status = Status.NOT_COMPUTED) -> Entries:
    """A value that is not computed (backbone unavailable), not applicable, or failed, with the reason."""
    return entries(MetricEntry.unavailable(metric, backbone, reason, Status(status)))
