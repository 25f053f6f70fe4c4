"""The metric registry's types: one :class:`MetricSpec` per metric, owning its compute, its aggregation across
videos, its direction and its table membership, and a generic ordered :class:`Registry` of them.

The shape follows lm-evaluation-harness, where a metric is registered once with its compute function, whether higher
is better and its aggregation *function* (``register_metric`` in EleutherAI/lm-evaluation-harness@4e7e0d47
``lm_eval/api/registry.py`` looks the aggregation up by name once and keeps the function), and an unknown name is an
error that lists the registered ones (that file's ``Registry.get``), never a silent None. Here the specs are declared in the module of their family (:mod:`evaluate.families`,
beside the functions that compute them) and gathered by :mod:`evaluate.catalog`, which every reader asks.

A metric's values are written either by computations of its own (:class:`Compute`: a function of the item, its
perception, the settings and one backbone per role) or by another metric's computation (:class:`ComputedBy`: the
judge's checklist writes the seven ``dynamic.*`` metrics in one call; the camera computations write the ``_strided``
variants when ``evaluate.rpe_stride`` > 1). Nothing is computed anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from harness.config_groups import did_you_mean
from harness.errors import UserError

from .aggregate import mean
from .results import Entries

if TYPE_CHECKING:  # annotations only: the registry imports neither the item nor the perception layer
    from .config import EvalConfig
    from .item import EvalItem
    from .perceive import ItemPerception

#: role -> backbone name, one combination of the configured backbones of a computation's roles
Backbones = Mapping[str, str]
#: ``(item, perception, settings, backbones) -> {metrics.json key: entry}``
ComputeFn = Callable[["EvalItem", "ItemPerception", "EvalConfig", Backbones], Entries]
#: ``(item, settings) -> whether the computation applies to the item`` (e.g. object cases only)
AppliesFn = Callable[["EvalItem", "EvalConfig"], bool]


def always(item: EvalItem, settings: EvalConfig) -> bool:
    """The default :attr:`Compute.applies`: every item."""
    return True


@dataclass(frozen=True)
class Compute:
    """One computation of a metric, run by the evaluation stage for every combination of the configured backbones
    of its ``roles`` (their product; no role: run once).

    Attributes:
        function: the compute function (:data:`ComputeFn`).
        roles: backbone roles (:data:`evaluate.families.ROLE_SETTINGS` keys), e.g. ``("encoder", "tracker")``.
        applies: whether the computation applies to an item (:data:`AppliesFn`; default every item).
        reports: the metric ids recorded "not computed" / "failed" when a backbone is unavailable or the function
            raises (default: the owning metric's id alone; a computation that writes several metrics names them).
    """

    function: ComputeFn
    roles: tuple[str, ...] = ()
    applies: AppliesFn = always
    reports: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComputedBy:
    """A metric whose values another metric's computation writes (``metric``), with how (``how``)."""

    metric: str
    how: str


@dataclass(frozen=True)
class Chance:
    """What a video with no memory of the content scores: ``value`` (mean), ``spread`` (one SD across the
    measured pairs) and how it was measured or derived."""

    value: float
    spread: float
    how: str


class Aggregation(Protocol):
    """How a metric's per-video values combine across videos into a table cell's estimate: ``(values, n_boot,
    seed) -> {"mean", "lo", "hi", "n"}`` (the interval from ``n_boot`` bootstrap resamples drawn with ``seed``).
    Its ``__name__`` is its name in :data:`AGGREGATIONS`."""

    __name__: str

    def __call__(self, values: Sequence[float], n_boot: int = ..., seed: int = ...) -> dict[str, float]: ...


#: aggregation name -> the function (the report's cells call it: :func:`evaluate.reporting.cells.mean_cell`); every
#: metric of the benchmark today is a mean (:func:`evaluate.aggregate.mean`)
AGGREGATIONS: dict[str, Aggregation] = {"mean": mean}


class UnknownMetricError(UserError, KeyError):
    """A metric id no spec is registered under; the message names the registered ids. A ``KeyError`` too, so that
    callers that look a metric up like a mapping key keep working."""

    def __str__(self) -> str:
        return str(self.args[0])  # KeyError would quote the message


#: Metric families that score memory (static or dynamic); with every ``static`` metric, what a camera-following item
#: is never scored on.
MEMORY_FAMILIES = ("human", "object", "environment", "dynamic", "departure")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: what it measures, how it is computed, aggregated, ranked and tabled.

    Attributes:
        id: ``<family>.<name>``, the key prefix in ``metrics.json`` (``id[backbone]``).
        family: the metric family (:class:`evaluate.families.Family` name) whose settings recompute it.
        higher_is_better: the direction (False: lower is better, e.g. RPE).
        needs: the backbone kind: encoder | face | tracker | depth | pose | quality | judge | pixels | detector.
        paper: one of WorldMemBench's reported metrics (False: a diagnostic or protocol extension of this harness).
        description: the rule in one line (report legends, docs).
        compute: its own computations in order (:class:`Compute`), or the metric whose computation writes it
            (:class:`ComputedBy`).
        table2: the backbone part of the key under which the paper's Table 2 reports it (``""``: a bare key that
            combines the paper's estimators, e.g. Eq. 2's mean over DA3 and ViPE); None: not a Table 2 column.
        static: scores the retention of *static* content from the frames (pixel / feature similarity at revisits).
            A dynamic case's content legitimately changes while out of view, so dynamic cases are left out of every
            aggregate of such a metric (:func:`evaluate.catalog.scores_case`).
        resolution: the smallest difference between two policies or models worth reporting, in the metric's unit
            (0.01 on a [0, 1] score). A smaller paired difference reads as a tie (≈) in the verdict even when its
            interval excludes 0: the reference model's FoV and FullKV differ by 0.0003 on departure.visible with an
            interval of +-0.0001, which is real and says nothing.
        chance: backbone (``"*"``: any) -> the chance level (:class:`Chance`); empty when it has none (PSNR, RPE).
        aggregation: how per-video values combine across videos: the function (one of :data:`AGGREGATIONS`;
            :attr:`aggregation_name` is its name).
    """

    id: str
    family: str
    higher_is_better: bool
    needs: str
    paper: bool
    description: str
    compute: tuple[Compute, ...] | ComputedBy
    table2: str | None = None
    static: bool = False
    resolution: float = 0.01
    chance: Mapping[str, Chance] = field(default_factory=dict)
    aggregation: Aggregation = mean

    @property
    def computations(self) -> tuple[Compute, ...]:
        """Its own computations (none when :class:`ComputedBy` another metric)."""
        return () if isinstance(self.compute, ComputedBy) else self.compute

    @property
    def memory(self) -> bool:
        """Whether it scores memory (a :data:`MEMORY_FAMILIES` family, or static content): never computed for, and
        never aggregated over, a camera-following item (:data:`evaluate.item.CAMERA_ITEMS`)."""
        return self.static or self.family in MEMORY_FAMILIES

    @property
    def aggregation_name(self) -> str:
        """The name of its aggregation (the :data:`AGGREGATIONS` key), what a reader or a file names it by."""
        return self.aggregation.__name__


S = TypeVar("S", bound=MetricSpec)


class Registry(Generic[S]):
    """Specs by id, in registration order; an id is registered once, a :class:`ComputedBy` names a registered
    metric whose computation reports it, and an aggregation is a known one (:meth:`check`)."""

    def __init__(self) -> None:
        self._specs: dict[str, S] = {}

    def register(self, *specs: S) -> None:
        for s in specs:
            if s.id in self._specs:
                raise ValueError(f"metric {s.id!r} is registered twice")
            if AGGREGATIONS.get(s.aggregation_name) is not s.aggregation:
                raise ValueError(f"metric {s.id!r}: unknown aggregation {s.aggregation_name!r}; one of "
                                 f"{sorted(AGGREGATIONS)} (evaluate.registry.AGGREGATIONS)")
            self._specs[s.id] = s

    def check(self) -> None:
        """Every :class:`ComputedBy` names a registered metric that has computations of its own."""
        for s in self._specs.values():
            if isinstance(s.compute, ComputedBy):
                owner = self._specs.get(s.compute.metric)
                if owner is None or not owner.computations:
                    raise ValueError(f"metric {s.id!r} is computed by {s.compute.metric!r}, which computes nothing")
            elif not s.compute:
                raise ValueError(f"metric {s.id!r} has no computation: give a Compute or a ComputedBy")

    def get(self, metric_id: str) -> S:
        """The spec of ``metric_id``; :class:`UnknownMetricError` naming the registered ids when there is none (ask
        ``metric_id in registry`` first where an unknown id is expected, e.g. a newer file's metric)."""
        spec = self._specs.get(metric_id)
        if spec is None:
            raise UnknownMetricError(f"unknown metric {metric_id!r}.{did_you_mean(metric_id, list(self._specs))} "
                                     f"Registered: {', '.join(self._specs) or '(none)'}")
        return spec

    def __contains__(self, metric_id: object) -> bool:
        return metric_id in self._specs

    def as_dict(self) -> dict[str, S]:
        """A copy, id -> spec, in registration order."""
        return dict(self._specs)

    def __iter__(self) -> Iterator[S]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)
