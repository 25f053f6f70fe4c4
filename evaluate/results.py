"""Typed evaluation results: one :class:`MetricEntry` per ``metric[backbone]`` of a video, one :class:`ItemResult`
per video (its ``metrics.json``).

Every family, the judge, the stage, the reports and the command line build and read results through these types;
``to_dict`` / ``from_dict`` are the only places that know the ``metrics.json`` layout. Statuses are a
:class:`Status` enum whose values are the strings stored on disk, so files written before this module read back
unchanged.

Keys: ``metric[backbone]`` (``metric`` alone for values that combine several backbones, e.g. Eq. 2's mean over
estimators). ``backbone`` is the label the backbone reports once loaded (``pixel-thumb16``, ``template-ncc``).
Values are floats in the metric's own unit (see :mod:`evaluate.catalog` for the direction and range).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping, Optional

import numpy as np


class Status(str, Enum):
    """What became of one metric of one video (the value stored under ``status`` in ``metrics.json``)."""

    COMPUTED = "computed"
    #: a backbone, its weights or the judge server is unavailable; the reason says how to get it
    NOT_COMPUTED = "not_computed"
    #: the metric is undefined for this item (e.g. translation RPE on a rotation-only path)
    NOT_APPLICABLE = "not_applicable"
    #: a backbone or formula raised, or the video could not be read; the reason names the error
    FAILED = "failed"

    def __str__(self) -> str:  # "computed", not "Status.COMPUTED", in messages and tables
        return self.value


class BackboneKind(str, Enum):
    """Where a backbone's numbers may appear (see :mod:`evaluate.backbones`)."""

    PAPER = "paper"
    ESTIMATOR = "estimator"
    DIAGNOSTIC = "diagnostic"
    #: the reference model's own geometry: judges estimators, never scores a video
    ORACLE = "oracle"
    JUDGE = "judge"
    #: an open-vocabulary detector of a related benchmark (MemoBench's ORS), not a paper backbone
    DETECTOR = "detector"

    def __str__(self) -> str:
        return self.value


#: keys of a stored entry that are fields of :class:`MetricEntry`; every other key is a detail
_FIELDS = ("metric", "backbone", "backbone_kind", "status", "value", "reason", "family", "settings_hash")


@dataclass
class MetricEntry:
    """One metric of one video.

    Attributes:
        metric: the metric id (``environment.visible``); ``backbone``: the backbone label ("" when the value
            combines several). ``kind``: the backbone's :class:`BackboneKind` (None when not computed).
        status: :class:`Status`. ``value``: the score (computed entries only). ``reason``: why it is not computed,
            not applicable or failed. ``family``: the family that computed it; ``settings_hash``: that family's
            hash (a change recomputes it).
        details: what the family recorded beside the value, in the family's own terms: ``per_revisit`` (K values,
            Eq. 1's terms), ``per_target`` (target -> K values), ``qualification`` (per revisit: departure and
            return error in degrees), ``tracking_evidence``, ``pose_source`` / ``depth_source`` / ``mask_source``,
            ``retryable`` (the judge may succeed on a rerun), ``judge`` (the request record), ...
    """

    metric: str
    backbone: str = ""
    status: Status = Status.COMPUTED
    value: Optional[float] = None
    kind: Optional[BackboneKind] = None
    reason: Optional[str] = None
    family: Optional[str] = None
    settings_hash: Optional[str] = None
    details: dict[str, Any] = field(default_factory=dict)

    # -- construction ----------------------------------------------------------------------------------------------
    @classmethod
    def computed(cls, metric: str, backbone: str, kind: str | BackboneKind, value: float,
                 **details: Any) -> "MetricEntry":
        return cls(metric, backbone, Status.COMPUTED, float(value), BackboneKind(kind), details=details)

    @classmethod
    def unavailable(cls, metric: str, backbone: str, reason: str, status: Status = Status.NOT_COMPUTED,
                    **details: Any) -> "MetricEntry":
        """An entry that is not computed, not applicable or failed, with the reason."""
        if status is Status.COMPUTED:
            raise ValueError("an unavailable entry cannot have status 'computed'")
        return cls(metric, backbone, Status(status), None, None, reason, details=details)

    # -- reading ---------------------------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """``metric[backbone]``, or ``metric`` when the backbone is empty."""
        return f"{self.metric}[{self.backbone}]" if self.backbone else self.metric

    @property
    def is_computed(self) -> bool:
        return self.status is Status.COMPUTED

    @property
    def is_oracle(self) -> bool:
        """Computed from the reference model's exact geometry rather than measured from the frames."""
        return is_oracle_key(self.key) or self.kind is BackboneKind.ORACLE  # (backbone "oracle": its key says so)

    @property
    def retryable(self) -> bool:
        return bool(self.details.get("retryable"))

    @property
    def per_revisit(self) -> Optional[list[float]]:
        """The K per-revisit values of a computed entry (entity metrics: the mean over targets per revisit),
        None when the metric has none or is not computed."""
        if not self.is_computed:
            return None
        if "per_revisit" in self.details:
            # null: an undefined revisit (strict JSON has no NaN: harness.io.strict_json)
            return [float("nan") if x is None else float(x) for x in self.details["per_revisit"]]
        per_target = self.details.get("per_target")
        if per_target:
            return [float(x) for x in np.array(list(per_target.values()), dtype=float).mean(axis=0)]
        return None

    def source(self, what: str) -> Optional[str]:
        """The ``pose``, ``depth`` or ``mask`` source the value used (None: frames only)."""
        v = self.details.get(f"{what}_source")
        return str(v) if v else None

    def get(self, name: str, default: Any = None) -> Any:
        """A detail by name (``qualification``, ``per_target``, ...)."""
        return self.details.get(name, default)

    # -- storage ---------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``metrics.json`` form: ``metric, backbone, [backbone_kind], status, [value], [reason], details...,
        [family, settings_hash]``."""
        out: dict[str, Any] = {"metric": self.metric, "backbone": self.backbone}
        if self.kind is not None:
            out["backbone_kind"] = self.kind.value
        out["status"] = self.status.value
        if self.value is not None:
            out["value"] = float(self.value)
        if self.reason is not None:
            out["reason"] = self.reason
        out.update(self.details)
        if self.family is not None:
            out["family"] = self.family
        if self.settings_hash is not None:
            out["settings_hash"] = self.settings_hash
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MetricEntry":
        kind = d.get("backbone_kind")
        value = d.get("value")
        # a stored ``"value": null`` is a NaN the strict JSON writer (harness.io) wrote as null; no "value": none
        number = None if "value" not in d else float("nan") if value is None else float(value)
        return cls(metric=str(d["metric"]), backbone=str(d.get("backbone") or ""), status=Status(d["status"]),
                   value=number, kind=BackboneKind(kind) if kind else None,
                   reason=d.get("reason"), family=d.get("family"), settings_hash=d.get("settings_hash"),
                   details={k: v for k, v in d.items() if k not in _FIELDS})


def is_oracle_key(key: str) -> bool:
    """A ``metric[oracle]`` key: the one rule for telling ground truth from a measurement by its key."""
    return key.endswith("[oracle]")


Entries = dict[str, MetricEntry]


def entries(*items: MetricEntry) -> Entries:
    """``{entry.key: entry}`` of the given entries (what a family's compute function returns)."""
    return {e.key: e for e in items}


ITEM_DONE, ITEM_FAILED = "done", "failed"


@dataclass
class ItemResult:
    """One video's evaluation (its ``metrics.json``).

    Attributes:
        item: the work item (model, context, seed, trajectory, case_id). status: ``done`` or ``failed`` (a metric
            or the whole item failed; ``reason`` says which). case_family: the case's family (environment, human,
            object, dynamic). video_sha256: the video the metrics were computed on. num_revisits: K of Eq. 1.
        phases: phase name -> [start, end) frames. metrics: key -> :class:`MetricEntry`.
        extra: everything else stored (settings, backbones, family_hashes, validity, timings, ...), kept as read.
    """

    item: dict[str, Any]
    status: str = ITEM_DONE
    reason: Optional[str] = None
    case_family: str = "?"
    video_sha256: Optional[str] = None
    num_revisits: int = 0
    phases: dict[str, list[int]] = field(default_factory=dict)
    metrics: Entries = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    schema_version: int = 0

    @property
    def failed(self) -> bool:
        return self.status == ITEM_FAILED

    def computed(self, include_oracle: bool = False) -> Entries:
        """The computed entries (never ground truth unless ``include_oracle``)."""
        return {k: m for k, m in self.metrics.items() if m.is_computed and (include_oracle or not m.is_oracle)}

    def without_oracle(self) -> "ItemResult":
        """A copy without ground-truth entries: what every table, comparison, plot and console line reads."""
        return replace(self, metrics={k: m for k, m in self.metrics.items() if not m.is_oracle})

    def value(self, key: str) -> float:
        """The computed value of ``key``, NaN when it is absent or not computed."""
        m = self.metrics.get(key)
        return float(m.value) if m is not None and m.is_computed and m.value is not None else float("nan")

    @property
    def family_hashes(self) -> dict[str, str]:
        return dict(self.extra.get("family_hashes") or {})

    @property
    def timings_generation(self) -> dict[str, Any]:
        return dict(self.extra.get("timings_generation") or {})

    @property
    def validity(self) -> dict[str, Any]:
        return dict(self.extra.get("validity") or {})

    def video_problem(self, recorded_sha256: Optional[str]) -> Optional[str]:
        """Why this result is not the evaluation of the video its item records now (``recorded_sha256``: the
        video's sha256 in the run's manifest), None when it is, or when nothing was recorded to compare with. A
        ``done`` result of another video (the item was regenerated or its video replaced after it was evaluated)
        or of no recorded video is stale; a failed one without a video (it could not be read) is not."""
        if not recorded_sha256:
            return None
        if not self.video_sha256:
            return None if self.failed else "its metrics.json records no video sha256 (written by hand?)"
        if self.video_sha256 != recorded_sha256:
            return (f"its metrics.json was computed on video sha256 {self.video_sha256[:12]}..., but the item's "
                    f"video is now {recorded_sha256[:12]}... (regenerated or replaced after it was evaluated)")
        return None

    # -- storage ---------------------------------------------------------------------------------------------------
    _HEAD = ("schema_version", "status", "reason", "item", "case_family", "video_sha256", "num_revisits", "phases")

    def to_dict(self) -> dict[str, Any]:
        """The ``metrics.json`` form (keys in the stored order: head, settings/backbones/hashes, metrics, rest)."""
        out: dict[str, Any] = {"schema_version": self.schema_version, "status": self.status}
        if self.reason is not None:
            out["reason"] = self.reason
        out.update(item=self.item, case_family=self.case_family, video_sha256=self.video_sha256,
                   num_revisits=self.num_revisits, phases=self.phases)
        before = ("settings", "backbones", "family_hashes")
        out.update({k: self.extra[k] for k in before if k in self.extra})
        out["metrics"] = {k: m.to_dict() for k, m in self.metrics.items()}
        out.update({k: v for k, v in self.extra.items() if k not in before})
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ItemResult":
        return cls(item=dict(d.get("item") or {}), status=str(d.get("status", ITEM_DONE)), reason=d.get("reason"),
                   case_family=str(d.get("case_family", "?")), video_sha256=d.get("video_sha256"),
                   num_revisits=int(d.get("num_revisits") or 0),
                   phases={k: list(v) for k, v in (d.get("phases") or {}).items()},
                   metrics={k: MetricEntry.from_dict(m) for k, m in (d.get("metrics") or {}).items()},
                   extra={k: v for k, v in d.items() if k not in (*cls._HEAD, "metrics", "content_sha256")},
                   schema_version=int(d.get("schema_version") or 0))
