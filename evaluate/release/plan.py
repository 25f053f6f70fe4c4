"""From the release's rows to the items of an import, one row at a time: every row either joins an item or is one
problem, and no row can change what another row imports.

An item is one video of the release (:class:`VideoPlan`): the model of its rows, the preset of their trajectory,
the case its video was made for (``<category>_<case>`` of the video's own folder, every spelling mapped by
:func:`evaluate.release.layout.name_key`). Its key is the release's ``item_id`` of the row made for that video
(the ``environment`` row of an environment video), else of the first camera row that plays it. Rows that point at
one video share its item, scored once (a ``camera_rotation`` row on its environment video); two rows with one
``item_id`` but different videos, or two videos that would become one item, are refused by name, never merged or
overwritten (docs/release.md, "Import semantics").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Optional

import pydantic.dataclasses
from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, StrictInt

from harness.errors import ConfigError
from harness.sections import Fix, Invalid, Section

from .layout import (
    CAMERA_CATEGORIES,
    CAMERA_FAMILY,
    CATEGORIES,
    CATEGORY_FAMILY,
    MAX_ROWS,
    TEXT_COLUMNS,
    ReleaseRow,
    check_schema,
    harness_model,
    iter_rows,
    local_video,
    name_key,
    parquet_files,
    parse_video_ref,
    release_case_id,
    shown,
    valid_case_id,
    video_relpath,
)

#: Distinct rows one video keeps (a camera row and its static row are two; more are named, not stored).
MAX_ROWS_PER_VIDEO = 32
#: Distinct row values whose mapping is remembered (identical rows are mapped once).
MEMO_ROWS = 100_000
#: Distinct subjects kept per problem kind (the rest is counted in one line).
MAX_SUBJECTS = 500
#: Distinct problems listed per kind on the console (all kept ones go to release/import.json).
SHOWN_PER_KIND = 12


def _models(value: Any) -> dict[str, str]:
    """``release.models``: a mapping, or the same written as text (a quoted override, ``'{my-model: reference}'``)."""
    import yaml

    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            value = None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise Invalid("give a mapping of release model ids to harness models, e.g. "
                      "release.models='{my-model: reference}'")
    return dict(value)


_ROWS = Fix("give a number of rows >= 1")
_FLAG = Fix("use true or false")


def release_presets() -> dict[str, str]:
    """Release trajectory name -> harness trajectory option (the ``release:`` key of ``conf/trajectory/*.yaml``)."""
    from harness.config_groups import group_yaml, list_group

    out: dict[str, str] = {}
    for name in list_group("trajectory"):
        rel = group_yaml("trajectory", name).get("release")
        if rel:
            out[str(rel)] = name
    return out


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid"))
class ReleaseSettings(Section):
    """The ``release`` section (``python -m harness release import|check``, docs/release.md).

    models: extra release ``model_id`` -> harness model entries (compared in every spelling; they win over the ids
    the harness knows). overlay: a case-set folder whose cases (ids ``<category>_<case_id>``) add what the release
    lacks. hfov_deg: horizontal field of view assumed where neither a case nor the video tells (degrees). limit:
    import at most this many rows (a quick look). max_rows: read at most this many rows. measure: measure each
    video's camera layout (release check reuses it). workers: processes that measure videos at once (the results
    do not depend on it). evaluate: evaluate the imported run right after the import.
    """

    section: ClassVar[str] = "release"
    fix: ClassVar[str] = "a mapping, e.g. release.limit=100"

    models: Annotated[dict[str, str], BeforeValidator(_models)] = field(default_factory=dict)
    overlay: Optional[Path] = None
    hfov_deg: Annotated[float, Field(strict=True, gt=1, lt=179),
                        Fix("give the horizontal field of view in degrees (1..179)")] = 60.0
    limit: Annotated[Optional[StrictInt], Field(ge=1), Fix("give a number of rows >= 1 (or null for all)")] = None
    max_rows: Annotated[StrictInt, Field(ge=1), _ROWS] = MAX_ROWS
    measure: Annotated[StrictBool, _FLAG] = True
    workers: Annotated[StrictInt, Field(ge=1), Fix("give a number of processes >= 1")] = 1
    evaluate: Annotated[StrictBool, _FLAG] = True

    def __post_init__(self) -> None:
        if self.overlay is not None:
            object.__setattr__(self, "overlay", self.overlay.expanduser())


@pydantic.dataclasses.dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class ReleaseOptions(ReleaseSettings):
    """What ``release import`` reads: the ``release`` settings and ``source``, the release's local folder."""

    source: Path

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "source", self.source.expanduser())

    @staticmethod
    def of(source: Any, settings: ReleaseSettings) -> ReleaseOptions:
        """The options of an import of ``source`` (the top-level ``source=``) with ``settings``."""
        if not source:
            raise ConfigError("release import: give the release's folder: source=<dir> (the folder `hf download "
                              "rescuerz/WorldMemBench --repo-type dataset --local-dir DIR` fills)")
        kept = {k: getattr(settings, k) for k in ReleaseSettings.__pydantic_fields__}  # type: ignore[attr-defined]
        return ReleaseOptions(Path(str(source)), **kept)


@dataclass
class Problem:
    """Rows refused for one reason: how many, and the first one (``<file>:<row>``)."""

    rows: int
    first: str


@dataclass
class ImportSummary:
    """What an import did. Every row read is kept (on an item imported or unchanged), a duplicate of a kept row, or
    skipped for one named problem: ``rows == kept_rows + duplicate_rows + skipped_rows``."""

    rows: int = 0
    rows_in_release: int = 0
    videos: int = 0
    imported: int = 0
    unchanged: int = 0
    removed: int = 0
    flagged: int = 0
    kept_rows: int = 0
    camera_rows: int = 0
    camera_items: int = 0
    duplicate_rows: int = 0
    not_read: int = 0
    presets: set[str] = field(default_factory=set)  # the presets of the items imported
    problems: dict[str, dict[str, Problem]] = field(default_factory=lambda: defaultdict(dict))
    more: dict[str, Problem] = field(default_factory=dict)  # kind -> the rows of subjects past MAX_SUBJECTS
    seconds: list[float] = field(default_factory=list)  # wall time of each video's import, in import order

    def add(self, kind: str, subject: str, where: str, rows: int = 1) -> None:
        """Count ``rows`` refused for ``kind``/``subject`` (both shown safely on one line)."""
        subject = shown(subject, 240)
        known = self.problems[kind]
        if subject in known:
            known[subject].rows += rows
        elif len(known) < MAX_SUBJECTS:
            known[subject] = Problem(rows, shown(where))
        else:
            more = self.more.setdefault(kind, Problem(0, shown(where)))
            more.rows += rows

    def skipped_rows(self) -> int:
        return sum(p.rows for subj in self.problems.values() for p in subj.values()) + \
            sum(p.rows for p in self.more.values())

    def lines(self, shown_per_kind: int = SHOWN_PER_KIND) -> list[str]:
        """The console summary: exact counts, then one line per distinct problem (at most ``shown`` per kind)."""
        out = [f"release import: {self.rows} row(s) read -> {self.videos} video(s) imported as items "
               f"({self.imported} written, {self.unchanged} unchanged), {self.removed} removed; {self.kept_rows} "
               f"row(s) on them "
               f"({self.camera_rows} camera-following row(s), {self.camera_items} camera-following item(s)), "
               f"{self.duplicate_rows} duplicate row(s), {self.skipped_rows()} row(s) skipped"]
        if self.flagged:
            out.append(f"  {self.flagged} video(s) do not follow their preset: scored on their measured layout "
                       "(release/check.md lists what differs)")
        if self.not_read:
            out.append(f"  {self.not_read} row(s) of {self.rows_in_release} not read (release.limit / "
                       "release.max_rows)")
        for kind, subjects in sorted(self.problems.items()):
            for subject, p in sorted(subjects.items())[:shown_per_kind]:
                out.append(f"  {kind}: {subject} ({p.rows} row(s), first {p.first})")
            # Subjects past the cap were never kept: they are "more" however many the caller asked to see.
            if len(subjects) > shown_per_kind or kind in self.more:
                out.append(f"  {kind}: ... and more (release/import.json lists {min(len(subjects), MAX_SUBJECTS)})")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "rows_in_release": self.rows_in_release, "not_read": self.not_read,
                "videos": self.videos, "imported": self.imported, "unchanged": self.unchanged,
                "removed": self.removed, "flagged": self.flagged, "kept_rows": self.kept_rows,
                "camera_rows": self.camera_rows, "camera_items": self.camera_items,
                "duplicate_rows": self.duplicate_rows, "skipped_rows": self.skipped_rows(),
                "trajectories": sorted(self.presets),
                "problems": {k: {s: {"rows": p.rows, "first": p.first} for s, p in sorted(v.items())}
                             for k, v in sorted(self.problems.items())},
                "more_problems": {k: {"rows": p.rows, "first": p.first} for k, p in sorted(self.more.items())}}


@dataclass
class VideoPlan:
    """One video of the release and the rows that point at it: the item it becomes.

    Attributes:
        relpath: the video's path in the release. file: its local file. identity: the file's resolved path (one
        file named by two paths, with and without ``data/``, is one video).
        model / model_id: the harness model and the release's id. preset: the harness trajectory. case_key: the
        case the video was made for. category: the video's own category (its folder's). rows: its distinct rows
        (item_id, category, case_id, where). duplicates: rows identical to one of them.
    """

    relpath: str
    file: Path
    identity: str
    model: str
    model_id: str
    preset: str
    case_key: str
    category: str
    rows: list[dict[str, str]] = field(default_factory=list)
    duplicates: int = 0
    seen: set[tuple[str, str, str]] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, str, str]:
        """(model, preset, case): the harness item this video becomes."""
        return self.model, self.preset, self.case_key

    @property
    def item_id(self) -> str:
        """The release's key of the item: the row made for this video, else the first camera row."""
        own = [r for r in self.rows if name_key(r["category"]) == self.category]
        return (own or sorted(self.rows, key=lambda r: r["item_id"]))[0]["item_id"]

    @property
    def categories(self) -> list[str]:
        return sorted({name_key(r["category"]) for r in self.rows})

    @property
    def scored_as(self) -> str:
        """``camera`` when no row scores the video's memory (a translation video; an environment video only a
        camera row plays), else the family of the video's own category."""
        if self.category in CATEGORY_FAMILY and self.category in self.categories:
            return CATEGORY_FAMILY[self.category]
        return CAMERA_FAMILY

    @property
    def camera_rows(self) -> int:
        return sum(name_key(r["category"]) in CAMERA_CATEGORIES for r in self.rows)

    def refuse(self, summary: ImportSummary, kind: str, subject: str) -> None:
        """Record every row of this video as refused for ``kind``."""
        summary.add(kind, subject, self.rows[0]["where"], len(self.rows) + self.duplicates)


class Planner:
    """Maps rows to :class:`VideoPlan` s (:meth:`add`), then refuses what conflicts (:meth:`finish`)."""

    def __init__(self, opts: ReleaseOptions, summary: ImportSummary) -> None:
        from harness.config_groups import list_group

        self.opts, self.summary = opts, summary
        self.presets = {name_key(k): v for k, v in release_presets().items()}
        self.known = list_group("model")
        self.videos: dict[str, VideoPlan] = {}
        self.claims: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
        self.files_of_item_id: dict[str, set[str]] = defaultdict(set)
        self._memo: dict[tuple[str, ...], dict[str, Any] | tuple[str, str]] = {}

    def add(self, row: ReleaseRow) -> None:
        """Map ``row``: join its video's plan, or record its one problem."""
        self.summary.rows += row.count
        if row.problem:
            self.summary.add("unreadable row", row.problem, row.where, row.count)
            return
        got = self._map(row)
        if isinstance(got, tuple):
            self.summary.add(got[0], got[1], row.where)
            return
        plan = self.videos.setdefault(got.identity, got)
        self.claims[got.identity].add(got.key)
        r = got.rows[0]
        dedupe = (name_key(r["item_id"]), name_key(r["category"]), name_key(r["case_id"]))
        self.files_of_item_id[dedupe[0]].add(got.identity)
        if dedupe in plan.seen:
            plan.duplicates += 1
        elif len(plan.rows) >= MAX_ROWS_PER_VIDEO:
            self.summary.add("too many rows for one video", f"{plan.relpath} (at most {MAX_ROWS_PER_VIDEO} "
                             "distinct rows)", row.where)
        else:
            plan.seen.add(dedupe)
            if plan is not got:
                plan.rows.append(r)

    def _map(self, row: ReleaseRow) -> VideoPlan | tuple[str, str]:
        """The plan of ``row``'s video with the row in it, or ``(problem kind, subject)``. Rows with the same
        values are mapped once (a release of many identical rows costs one mapping)."""
        values = tuple(getattr(row, k) for k in TEXT_COLUMNS)
        got = self._memo.get(values)
        if got is None:
            got = self._resolve(row)
            if len(self._memo) < MEMO_ROWS:
                self._memo[values] = got
        if isinstance(got, tuple):
            return got
        return VideoPlan(**got, rows=[{"item_id": row.item_id, "category": row.category, "case_id": row.case_id,
                                       "where": row.where}])

    def _resolve(self, row: ReleaseRow) -> dict[str, Any] | tuple[str, str]:
        empty = [k for k in TEXT_COLUMNS if not getattr(row, k).strip()]
        if empty:
            return "incomplete row", f"empty {', '.join(empty)}"
        category, traj = name_key(row.category), name_key(row.trajectory)
        model = harness_model(row.model_id, self.opts.models, self.known)
        if category not in CATEGORIES:
            return "unknown category", f"{row.category!r} (known: {', '.join(CATEGORIES)})"
        if traj not in self.presets:
            return "unknown trajectory", f"{row.trajectory!r} (presets: {', '.join(sorted(self.presets))})"
        if model is None or model not in self.known:
            return "unknown model id", f"{row.model_id!r} (map it: release.models='{{{row.model_id}: <model>}}')"
        relpath = video_relpath(row.video_url)
        ref = parse_video_ref(relpath)
        own = name_key(ref.category) if ref else category
        if ref and (name_key(ref.trajectory) != traj or own not in CATEGORIES or
                    (own != category and category not in CAMERA_CATEGORIES)):
            return "inconsistent row", (f"{row.item_id!r}: a {category} row on {traj} points at {relpath!r}; a row "
                                        "plays a video of its own category and trajectory (a camera row: any)")
        case_key = release_case_id(own, ref.case_id if ref else row.case_id)
        if not valid_case_id(case_key):
            return "bad case id", f"{case_key!r} (a case key is lowercase letters, digits and _, at most 96)"
        file = local_video(self.opts.source, relpath)
        if file is None:
            return "missing video", f"{relpath} (no regular file inside the release folder)"
        return {"relpath": relpath, "file": file, "identity": str(file.resolve()), "model": model,
                "model_id": row.model_id, "preset": self.presets[traj], "case_key": case_key, "category": own}

    def finish(self) -> dict[tuple[str, str, str], VideoPlan]:
        """The plans by item, after refusing by name: a file claimed by two items, two files for one item, an
        ``item_id`` whose rows point at different videos. Deterministic whatever the rows' order."""
        by_key: dict[tuple[str, str, str], list[VideoPlan]] = defaultdict(list)
        for identity, p in self.videos.items():
            claims = self.claims[identity]
            if len(claims) > 1:
                p.refuse(self.summary, "one video, two items",
                         f"{p.relpath} is the video of {' and '.join('/'.join(k) for k in sorted(claims))}")
                continue
            by_key[p.key].append(p)
        out: dict[tuple[str, str, str], VideoPlan] = {}
        for key, plans in sorted(by_key.items()):
            if len(plans) > 1:
                names = sorted(f"{p.item_id} ({p.relpath})" for p in plans)
                for p in plans:
                    p.refuse(self.summary, "two videos, one item", f"{'/'.join(key)}: {' vs '.join(names[:2])}")
                continue
            out[key] = plans[0]
        for item_id, files in sorted(self.files_of_item_id.items()):
            if len(files) > 1:
                self._split_item_id(item_id, out)
        return out

    def _split_item_id(self, item_id: str, plans: dict[tuple[str, str, str], VideoPlan]) -> None:
        """Refuse the rows of ``item_id`` (its rows point at different videos) from every plan holding them; a plan
        left without a row goes with them."""
        for key, p in sorted(plans.items()):
            mine = [r for r in p.rows if name_key(r["item_id"]) == item_id]
            if not mine:
                continue
            p.rows = [r for r in p.rows if name_key(r["item_id"]) != item_id]
            extra = 0 if p.rows else p.duplicates
            self.summary.add("one item_id, two videos", mine[0]["item_id"], mine[0]["where"], len(mine) + extra)
            if not p.rows:
                plans.pop(key)


def plan_release(opts: ReleaseOptions, summary: ImportSummary) -> dict[tuple[str, str, str], VideoPlan]:
    """Every row mapped and grouped by item (nothing written). Raises :class:`ReleaseError` when the folder is not
    the release's layout at all (before anything is written)."""
    files = parquet_files(opts.source)
    summary.rows_in_release = check_schema(files)
    cap = min(opts.max_rows, opts.limit) if opts.limit else opts.max_rows
    planner = Planner(opts, summary)
    for row in iter_rows(files, images=False, max_rows=cap):
        planner.add(row)
    summary.not_read = max(summary.rows_in_release - summary.rows, 0)
    return planner.finish()
