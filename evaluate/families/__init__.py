"""Metric families: one module each (camera, environment, entity = human + object, diagnostic, departure, quality,
dynamic). Each module declares the :class:`~evaluate.registry.MetricSpec` of its metrics beside the functions that
compute them, and a :class:`Family` of those specs (:mod:`evaluate.families.base`); :mod:`evaluate.catalog` gathers
every spec into the one registry. Formulas stay in :mod:`evaluate.camera`, :mod:`evaluate.memory`,
:mod:`evaluate.dynamic` and :mod:`evaluate.aggregate`.
"""

from ..results import Entries
from .base import ROLE_SETTINGS, Computation, Family, all_families, entry, missing

__all__ = ["ROLE_SETTINGS", "Computation", "Entries", "Family", "all_families", "entry", "missing"]
