"""Every metric family, in evaluation order. Apart from :mod:`evaluate.families.base` (the types and entry helpers
every family module imports) so that no family module imports the module that lists them."""

from __future__ import annotations

from .base import Family


def all_families() -> tuple[Family, ...]:
    """Every family in evaluation order (imported lazily)."""
    from . import camera, departure, diagnostic, dynamic, entity, environment, quality

    return (camera.FAMILY, environment.FAMILY, entity.HUMAN, entity.OBJECT, diagnostic.FAMILY, departure.FAMILY,
            quality.FAMILY, dynamic.FAMILY)
