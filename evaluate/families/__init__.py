"""Metric families: one module each (camera, environment, entity = human + object, diagnostic, departure, quality,
dynamic). Each module declares the :class:`~evaluate.registry.MetricSpec` of its metrics beside the functions that
compute them, and a :class:`Family` of those specs (:mod:`evaluate.families.base`); :mod:`evaluate.catalog` gathers
every spec into the one registry. Formulas stay in :mod:`evaluate.camera`, :mod:`evaluate.memory`,
:mod:`evaluate.dynamic` and :mod:`evaluate.aggregate`.
"""

from ..config import ROLE_SETTINGS
from ..results import Entries
from .base import Computation, Family, entry, missing
from .order import all_families

__all__ = ["ROLE_SETTINGS", "Computation", "Entries", "Family", "all_families", "entry", "missing"]
