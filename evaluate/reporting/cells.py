"""Table cells that carry their statistics and their provenance.

A cell is the mean over *units* (usually one video each) with a 95 % percentile bootstrap interval and ``n``. Each
unit is a sum of *terms* ``coef * field`` read from one ``metrics.json`` entry, so every number in a table can be
recomputed from the files it came from (:func:`resolve`, :func:`unit_value`). A cell without units says why in
``reason`` (rendered as a footnote, never as 0).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from evaluate.aggregate import mean
from evaluate.results import ItemResult

if TYPE_CHECKING:
    from evaluate.registry import Aggregation

#: below this many units a cell prints its mean and n only: an interval over one or two units reads as certainty
MIN_UNITS_FOR_INTERVAL = 3
#: a bootstrap's settings as the evaluation records them (``evaluate.bootstrap``): ``{"n": resamples, "seed": seed}``
Boot = Mapping[str, int]

_IDX = re.compile(r"^per_revisit\[(\d+)\]$")
_QUAL = re.compile(r"^(departed|returned|tracked)\[(\d+)\](?:@([\d.]+)(?:,([\d.]+))?)?$")


@dataclass(frozen=True)
class Term:
    """``coef * field`` of entry ``key`` of the ``metrics.json`` at ``file`` (a path relative to the report)."""

    file: str
    key: Optional[str]
    field: str
    coef: float = 1.0


@dataclass
class Unit:
    """One unit's value = sum of its terms. ``role`` separates the two sides of a ratio cell (policy / reference)."""

    value: float
    terms: list[Term]
    role: Optional[str] = None


@dataclass
class Cell:
    """mean, lo, hi (95 % percentile bootstrap over units) and n; ``reason`` when nothing was computed."""

    mean: float = float("nan")
    lo: float = float("nan")
    hi: float = float("nan")
    n: int = 0
    units: list[Unit] = field(default_factory=list)
    reason: Optional[str] = None
    kind: str = "mean"  # mean | ratio (reference / policy means) | count | rate | spread (lo/hi = seed range)
    sd: float = float("nan")  # spread cells: SD of the per-seed means

    def ok(self) -> bool:
        """A value exists (a count of zero is a value; a mean over zero units is not)."""
        if self.kind == "count":
            return self.reason is None and bool(np.isfinite(self.mean))
        return self.n > 0 and bool(np.isfinite(self.mean))

    def provenance(self, intern: Optional[Callable[[str], int]] = None) -> dict[str, Any]:
        """The cell and its units as JSON. ``intern`` maps a file path to an index into a shared ``files`` list
        (sources.json stores each path once)."""
        def term(t: Term) -> dict[str, Any]:
            return {"file": intern(t.file) if intern else t.file, "key": t.key, "field": t.field, "coef": t.coef}

        return {"kind": self.kind, "mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n, "sd": self.sd,
                "reason": self.reason,
                "units": [{"value": u.value, "role": u.role, "terms": [term(t) for t in u.terms]}
                          for u in self.units]}


def mean_cell(units: Sequence[Unit | None], boot: Boot, reason: str = "no computed value",
              aggregation: Aggregation = mean) -> Cell:
    """Mean of the finite unit values with a percentile bootstrap interval (None: a video without a value): a
    metric's ``aggregation`` (:attr:`evaluate.registry.MetricSpec.aggregation`; every metric's is the mean)."""
    us = [u for u in units if u is not None and u.value is not None and np.isfinite(u.value)]
    if not us:
        return Cell(reason=reason)
    ci = aggregation([u.value for u in us], n_boot=int(boot.get("n", 2000)), seed=int(boot.get("seed", 0)))
    return Cell(ci["mean"], ci["lo"], ci["hi"], int(ci["n"]), list(us))


def ratio_cell(num: Sequence[Unit], den: Sequence[Unit], boot: Boot) -> Cell:
    """mean(den) / mean(num) over matched units (a speedup: reference latency / policy latency), with a paired
    bootstrap over the matched units. ``units`` holds both sides, told apart by ``role``."""
    a = np.array([u.value for u in num], float)
    b = np.array([u.value for u in den], float)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0)
    if not ok.any():
        return Cell(reason="no matched latency", kind="ratio")
    a, b = a[ok], b[ok]
    rng = np.random.default_rng(int(boot.get("seed", 0)))
    idx = rng.integers(0, len(a), size=(int(boot.get("n", 2000)), len(a)))
    r = b[idx].mean(axis=1) / a[idx].mean(axis=1)
    keep = [Unit(u.value, u.terms, "policy") for u, k in zip(num, ok) if k] + \
        [Unit(u.value, u.terms, "reference") for u, k in zip(den, ok) if k]
    return Cell(float(b.mean() / a.mean()), float(np.quantile(r, 0.025)), float(np.quantile(r, 0.975)), int(len(a)),
                keep, kind="ratio")


def count_cell(value: float, units: Sequence[Unit], kind: str = "count") -> Cell:
    """A count or a rate without an interval (``lo``/``hi`` NaN), with the units it counts."""
    return Cell(float(value), float("nan"), float("nan"), len(units), list(units), kind=kind)


def resolve(result: ItemResult, key: Optional[str], fld: str) -> float:
    """The number ``fld`` of entry ``key`` of a video's result (its ``metrics.json``).

    Fields: ``value``; ``per_revisit[i]`` (entity metrics: the mean over targets at revisit i); ``started`` (dynamic
    gate); ``timings_generation.generate_s`` (``key`` None); 0/1 flags of revisit i: ``departed[i]@<dep>``
    (departure >= dep deg), ``returned[i]@<dep>,<tol>`` (and return error <= tol deg), ``tracked[i]`` (every
    target tracked away and back)."""
    from .qualification import departed, returned, tracked

    if key is None:
        node: Any = result.to_dict()
        for part in fld.split("."):
            node = node[part]
        return float(node)
    m = result.metrics[key]
    if fld == "value":
        if m.value is None:
            raise TypeError(f"{key} has no value")
        return float(m.value)
    if fld == "started":
        return float(bool(m.get("started")))
    q = _QUAL.match(fld)
    if q:
        k = int(q.group(2))
        if q.group(1) == "tracked":
            return float(tracked(m, k))
        if q.group(1) == "departed":
            return float(departed(m, k, float(q.group(3))))
        return float(returned(m, k, float(q.group(3)), float(q.group(4))))
    g = _IDX.match(fld)
    if g:
        pr = m.per_revisit
        if pr is None:
            raise KeyError(f"{key}: no per-revisit values")
        return float(pr[int(g.group(1))])
    raise KeyError(f"unknown field {fld!r}")


def unit_value(base: Path, unit: dict[str, Any], files: Optional[Sequence[str]] = None) -> float:
    """Recompute a unit of a ``sources.json`` cell from the files (paths relative to ``base``; an integer ``file``
    indexes ``files``, the ``files`` list of sources.json)."""
    total = 0.0
    cache: dict[str, ItemResult] = {}
    for t in unit["terms"]:
        f = files[t["file"]] if isinstance(t["file"], int) and files is not None else t["file"]
        if f not in cache:
            cache[f] = ItemResult.from_dict(json.loads((base / f).read_text()))
        total += t["coef"] * resolve(cache[f], t["key"], t["field"])
    return total


def has_interval(c: Cell) -> bool:
    """The cell prints an interval: finite bounds over at least :data:`MIN_UNITS_FOR_INTERVAL` units."""
    return c.n >= MIN_UNITS_FOR_INTERVAL and bool(np.isfinite(c.lo) and np.isfinite(c.hi))


def fixed(x: float, digits: int = 3, *, signed: bool = False, percent: bool = False) -> str:
    """``x`` with ``digits`` decimals (``percent``: as a percentage); ``signed``: a leading ``+`` on positive values.
    A value that rounds to zero prints without a sign: ``-0.000`` (a difference of -0.0001) reads as a negative
    result, and ``+0.000`` as a positive one."""
    s = f"{x:{'+' if signed else ''}.{digits}{'%' if percent else 'f'}}"
    if s[:1] in "+-" and not s.strip("+-0.%"):
        return s[1:]
    return s


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 video``, ``2 videos``, ``0 videos`` (``nouns``: an irregular plural)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def fmt_parts(c: Cell, digits: int = 3, signed: bool = False) -> tuple[str, str]:
    """(the value, the rest): ``("0.512", "[0.490, 0.530] n=12")``; :func:`fmt` joins them, the page prints the
    rest in small type on a second line. ``signed``: ``+`` on a positive value (a difference)."""
    if not c.ok():
        return "n/c", ""
    if c.kind == "count":
        return f"{int(round(c.mean))}", f"(n={c.n})"
    if c.kind == "rate":
        head = fixed(c.mean, 1, percent=True, signed=signed)
        return (head, f"[{fixed(c.lo, 1, percent=True)}, {fixed(c.hi, 1, percent=True)}] n={c.n}") \
            if has_interval(c) else (head, f"(n={c.n})")
    if c.kind == "ratio":
        head = f"{fixed(c.mean, 2)}x"
        return (head, f"[{fixed(c.lo, 2)}, {fixed(c.hi, 2)}] n={c.n}") if has_interval(c) else (head, f"(n={c.n})")
    head = fixed(c.mean, digits, signed=signed)
    if c.kind == "spread":  # the mean of the per-seed means ± their SD; lo / hi the lowest and highest seed mean
        if c.n <= 1:
            return head, f"(n={c.n})"
        return f"{head} ± {fixed(c.sd, digits)}", f"[{fixed(c.lo, digits)}, {fixed(c.hi, digits)}] n={c.n}"
    if c.kind == "models_mean":
        return head, f"({plural(len({u.role for u in c.units}), 'model')}, n={c.n})"
    if not has_interval(c):
        return head, f"(n={c.n})"
    return head, f"[{fixed(c.lo, digits)}, {fixed(c.hi, digits)}] n={c.n}"


def fmt(c: Cell, digits: int = 3, signed: bool = False) -> str:
    """``0.512 [0.490, 0.530] n=12``; counts as integers; rates as percentages; below
    :data:`MIN_UNITS_FOR_INTERVAL` units the mean and n only (``0.008 (n=2)``); never a signed zero
    (:func:`fixed`)."""
    return " ".join(x for x in fmt_parts(c, digits, signed) if x)
