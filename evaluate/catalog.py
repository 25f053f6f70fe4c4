"""The metric registry: every metric's :class:`~evaluate.registry.MetricSpec` (id, family, direction, what it needs,
its compute, its aggregation, whether and with which backbone it is a Table 2 column of the paper, whether it
measures static content, its resolution and chance level), gathered from the module of each metric family
(:mod:`evaluate.families`), where the specs are declared beside their compute functions. Every reader of a metric's
properties (the stage, the reports and tables, the verdict, the judge, the human study, the paper comparison) asks
this module.

Keys of ``metrics.json`` are ``metric[backbone]`` (``metric`` alone for values that combine several estimators);
the helpers here split them (:func:`metric_id`, :func:`backbone_of`) so no reader parses a key by hand.

Adding a metric: docs/metrics.md "Adding a metric".
"""

from __future__ import annotations

from .families import all_families
from .families.dynamic import PAPER_JUDGE
from .item import CAMERA_ITEMS
from .registry import Chance, MetricSpec, Registry

__all__ = [
    "CHANCE",
    "METRICS",
    "PAPER_JUDGE",
    "REGISTRY",
    "TABLE2_ORDER",
    "Chance",
    "MetricSpec",
    "backbone_of",
    "chance_level",
    "direction",
    "family_ids",
    "higher_is_better",
    "is_table2_key",
    "make_key",
    "metric_id",
    "resolution",
    "scores_case",
    "spec_of",
    "table2_key",
]


def _registry() -> Registry[MetricSpec]:
    reg: Registry[MetricSpec] = Registry()
    for fam in all_families():
        reg.register(*fam.specs)
    reg.check()
    return reg


#: every metric, in evaluation order (family by family)
REGISTRY = _registry()
#: id -> spec
METRICS: dict[str, MetricSpec] = REGISTRY.as_dict()


def family_ids(family: str) -> tuple[str, ...]:
    """The ids of ``family``'s metrics, in order."""
    return tuple(s.id for s in REGISTRY if s.family == family)


#: the paper's Table 2 columns in its order (quality, human, object, environment, dynamic, camera following)
TABLE2_ORDER = ("quality.imaging", "quality.aesthetic", "human.identity", "human.appearance", "object.appearance",
                "object.geometry", "environment.visible", "environment.depth", "environment.reconstruction",
                "dynamic.return_progress", "dynamic.persistence_reset", "dynamic.final_state",
                "dynamic.causal_physical", "dynamic.overall", "camera.rpe_trans", "camera.rpe_rot")
if set(TABLE2_ORDER) != {s.id for s in REGISTRY if s.table2 is not None}:  # a spec's table2 and the column order
    raise ValueError("TABLE2_ORDER must list exactly the metrics whose spec has a table2 backbone")


def metric_id(key: str) -> str:
    """``environment.visible[dinov2]`` -> ``environment.visible``."""
    return key.split("[", 1)[0]


def backbone_of(key: str) -> str:
    """``environment.visible[dinov2]`` -> ``dinov2``; a bare key (``camera.rpe_trans``) -> ``""``."""
    return key.split("[", 1)[1][:-1] if "[" in key else ""


def make_key(metric: str, backbone: str) -> str:
    """``(environment.visible, dinov2)`` -> ``environment.visible[dinov2]``; an empty backbone -> the bare id."""
    return f"{metric}[{backbone}]" if backbone else metric


def spec_of(key: str) -> MetricSpec | None:
    """The spec of a key's metric, None for a metric this catalog does not know (a newer file)."""
    mid = metric_id(key)
    return REGISTRY.get(mid) if mid in REGISTRY else None


def higher_is_better(metric_id_or_key: str) -> bool:
    """The direction of a known metric (:class:`~evaluate.registry.UnknownMetricError`, a KeyError naming the
    registered metrics, for an unknown one)."""
    return REGISTRY.get(metric_id(metric_id_or_key)).higher_is_better


def resolution(key: str) -> float:
    """The smallest difference worth reporting of ``key``'s metric (its unit); 0.01 for an unknown metric."""
    s = spec_of(key)
    return s.resolution if s is not None else 0.01


def direction(key: str) -> bool | None:
    """True: higher is better; False: lower is better; None: unknown metric (not ranked)."""
    s = spec_of(key)
    return None if s is None else s.higher_is_better


def table2_key(metric: str) -> str:
    """The key of a Table 2 metric computed with the paper's backbone (``environment.visible[dinov2]``)."""
    s = REGISTRY.get(metric)
    if s.table2 is None:
        raise KeyError(f"{metric} is not a column of the paper's Table 2")
    return make_key(metric, s.table2)


def is_table2_key(key: str) -> bool:
    """A Table 2 metric computed with the paper's own backbone (the main table's columns); every other key, the
    same metric with an estimator or diagnostic backbone included, is a variant."""
    s = spec_of(key)
    return s is not None and s.table2 is not None and backbone_of(key) == s.table2


def scores_case(key: str, case_family: str) -> bool:
    """Whether ``key``'s value of a video of ``case_family`` enters aggregates: a static-content metric leaves
    dynamic cases out (their content moves on purpose: revisit PSNR of the moving cat would favour the policy that
    forgot it), and no memory metric counts a camera-following item (:data:`evaluate.item.CAMERA_ITEMS`)."""
    s = spec_of(key)
    if s is not None and case_family == CAMERA_ITEMS and s.memory:
        return False
    return not (s is not None and s.static and case_family == "dynamic")


#: chance levels, per metric and backbone ("*": any backbone), from the specs. Metrics without one (PSNR, RPE, ...)
#: are absent.
CHANCE: dict[tuple[str, str], Chance] = {(s.id, bb): c for s in REGISTRY for bb, c in s.chance.items()}


def chance_level(key: str) -> Chance | None:
    """The chance level of ``key`` (its backbone's, else the metric's for any backbone), None when it has none."""
    s = spec_of(key)
    if s is None:
        return None
    return s.chance.get(backbone_of(key)) or s.chance.get("*")
