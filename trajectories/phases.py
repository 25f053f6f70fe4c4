"""Phase labels of a camera path, owned here: ``V`` (initial observation: the reference set), ``D1, R1, D2, R2, ...``
(departure k, return k) and ``H`` (final hold).

A path's ``phases`` maps each label to its half-open frame range ``[start, end)``. Labels are written as strings
(``camera.npz``, ``meta.json``); :class:`Phase` is the one place that parses them, and :func:`numbered` the one
place that lists ``D1..Dk`` / ``R1..Rk`` in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Optional, Sequence

from harness.errors import ConfigError


class PhaseKind(str, Enum):
    """What the camera does in a phase (the letter of its label)."""

    VIEW = "V"  # the initial observation hold: the reference frames of Eq. 1
    DEPART = "D"  # moving away from (and holding at) the k-th away view
    RETURN = "R"  # coming back to, and holding at, the start view: the k-th prescribed revisit
    HOLD = "H"  # the final stationary hold

    def __str__(self) -> str:
        return self.value


_LABEL = re.compile(r"^(?P<kind>[VDRH])(?P<index>[1-9][0-9]*)?$")
_NUMBERED = (PhaseKind.DEPART, PhaseKind.RETURN)


@dataclass(frozen=True, order=True)
class Phase:
    """One phase label: its kind and, for departures and returns, its 1-based number."""

    kind: PhaseKind
    index: int = 0

    @staticmethod
    def parse(label: str) -> "Phase":
        """``"R2"`` -> ``Phase(RETURN, 2)``; a label that is not ``V``, ``H``, ``D<k>`` or ``R<k>`` (k >= 1) is a
        :class:`ConfigError` naming it."""
        m = _LABEL.match(str(label))
        if m is None or (PhaseKind(m["kind"]) in _NUMBERED) != (m["index"] is not None):
            raise ConfigError(f"phase {label!r}: a phase is V, H, D<k> or R<k> with k >= 1")
        return Phase(PhaseKind(m["kind"]), int(m["index"] or 0))

    @property
    def label(self) -> str:
        return f"{self.kind.value}{self.index}" if self.kind in _NUMBERED else self.kind.value

    def __str__(self) -> str:
        return self.label


def departure(k: int) -> str:
    """The label of the k-th departure (1-based)."""
    return Phase(PhaseKind.DEPART, int(k)).label


def revisit(k: int) -> str:
    """The label of the k-th prescribed revisit (1-based)."""
    return Phase(PhaseKind.RETURN, int(k)).label


VIEW, HOLD = PhaseKind.VIEW.value, PhaseKind.HOLD.value


def numbered(phases: Mapping[str, Sequence[int]], kind: PhaseKind) -> list[tuple[int, int]]:
    """``[(start, end)]`` of ``<kind>1 .. <kind>k`` in order (stops at the first missing number)."""
    out, k = [], 1
    while (label := Phase(kind, k).label) in phases:
        a, b = phases[label]
        out.append((int(a), int(b)))
        k += 1
    return out


def count(phases: Mapping[str, Sequence[int]], kind: PhaseKind) -> int:
    """How many ``<kind>k`` phases the path has in sequence (the number of revisits K for RETURN)."""
    return len(numbered(phases, kind))


def phase_at(phases: Mapping[str, Sequence[int]], frame: int) -> Optional[str]:
    """The label of the phase whose half-open range ``[start, end)`` holds ``frame`` (None: outside every phase)."""
    for label, (a, b) in phases.items():
        if int(a) <= int(frame) < int(b):
            return label
    return None
