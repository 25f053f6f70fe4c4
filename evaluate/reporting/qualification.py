"""Revisit qualification (paper appendix G.1), read from one :class:`~evaluate.results.MetricEntry`.

An environment revisit k qualifies when the return-frame pose estimate departed at least ``departure_deg`` from
frame 0 and came back within ``tolerance_deg`` (the entry's ``qualification`` detail, degrees); an entity revisit
when every target was tracked away and back (``tracking_evidence``). The one place these details are interpreted.
"""

from __future__ import annotations

from ..results import MetricEntry


def departed(m: MetricEntry, k: int, departure_deg: float) -> bool:
    q = m.get("qualification") or []
    return k < len(q) and float(q[k]["departure_deg"]) >= departure_deg


def returned(m: MetricEntry, k: int, departure_deg: float, tolerance_deg: float) -> bool:
    """Departed and came back within ``tolerance_deg`` at revisit ``k`` (0-based)."""
    q = m.get("qualification") or []
    return departed(m, k, departure_deg) and float(q[k]["return_error_deg"]) <= tolerance_deg


def tracked(m: MetricEntry, k: int) -> bool:
    """Every target of the entry was tracked away and back at revisit ``k``."""
    ev = m.get("tracking_evidence") or {}
    return bool(ev) and all(e[k]["departed"] and e[k]["returned"] for e in ev.values() if k < len(e))


def qualified(m: MetricEntry, k: int, departure_deg: float, tolerance_deg: float) -> bool:
    """Revisit ``k`` qualifies: pose-qualified (environment) or tracking-supported (entities)."""
    return returned(m, k, departure_deg, tolerance_deg) or tracked(m, k)
