"""The item record: what an item's ``meta.json`` holds, typed, and the one function that writes it.

Three kinds of item have one: a **generated** item (:mod:`harness.app.runner`: written when it starts, again when
it finishes), a **supplied** video (``stage=evaluate videos=...``, :mod:`evaluate.external`) and an **imported**
release video (:mod:`evaluate.release.importer`); the last two are made elsewhere and say where from
(:attr:`ItemRecord.source`). Every one is built as an :class:`ItemRecord` and written by :func:`write_record`; its
manifest row (:class:`harness.outputs.ManifestRow`) is derived from it (:meth:`ItemRecord.manifest_row`).

``meta.json`` is the record's :meth:`ItemRecord.to_dict` as :func:`harness.io.write_json` writes it: the fields in
their declaration order, an absent (``None``) field left out. Resume, fingerprints (:mod:`harness.fingerprint`) and
the evaluation read these bytes, so the order and the values are part of the format: a new field goes where its
writer fills it, and an old file keeps reading (:meth:`ItemRecord.from_dict`, unknown keys kept in ``extra``).

Readers that judge files which may have been edited by hand (resume's integrity check,
:func:`harness.outputs.item_problems`, ``verify``) read the raw mapping (:func:`harness.outputs.item_meta`): they
must name what is wrong with a file this record would refuse.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from .errors import UserError
from .outputs import ManifestRow, Status, WorkItem, controls_hashes, item_meta

if TYPE_CHECKING:
    from trajectories import CameraPath

#: the file of an item folder that holds its record (written last: an item without it is not finished)
META_FILE = "meta.json"
#: a supplied item's video file name in its folder
VIDEO_FILE = "video.mp4"


class RecordError(UserError):
    """A ``meta.json`` that is not an item record (a field of the wrong JSON type, no ``item``); names the field."""


@dataclass(kw_only=True)
class ItemRecord:
    """One item's ``meta.json``. Fields are in the file's key order; ``None`` means the key is absent.

    Identity and state (every record):
        status: ``running`` (a generated item at work), ``compiled`` (a dry run's item: controls only), ``done``
            (a video whose files the record describes), ``failed`` (``error`` says why).
        item: the work item (model, context, seed, trajectory, case id): the item folder's names.
        case: the case as loaded (:meth:`harness.cases.Case.model_dump`: image, prompt, targets, intrinsics, source).
        model: the model's config (:meth:`adapters.base.ModelConfig.to_dict`, secrets redacted); a supplied video
            has ``{"name"}`` only (an imported one adds the release's ``release_id``).
        seed: the item's seed (what every random choice of the item derives from).

    Generated items only:
        schema_version: :data:`harness.outputs.SCHEMA_VERSION` when it was written.
        fingerprint / fingerprint_parts: the config hash that made the item and its per-part short hashes
            (:func:`harness.fingerprint.item_fingerprint`); resume skips a done item only while it matches.
        context: the context policy (:meth:`harness.context.ContextPolicy.to_dict`).
        trajectory: the trajectory spec (:meth:`trajectories.TrajectorySpec.to_dict`).
        seed_source: ``cli override`` (``seed=`` given) or ``model default`` (the model's frozen paper seed).
        versions / git: the software that ran (:func:`harness.outputs.versions`, :func:`harness.outputs.git_state`).
        argv: the command line (secrets redacted). config: the run's resolved config (secrets redacted).
        owner: the process that worked on it (``host``, ``pid``, ``rank``, ``world``, ``devices``, ``slurm_job``);
            owner_token: its lock token (a record finished by another process is recognised by it).
        started / finished: local times (``%Y-%m-%dT%H:%M:%S%z``); finished_unix: the finish in Unix seconds.
        timings: seconds per step (``compile_s``; done: the model's own timings and ``total_s``).
        error / traceback / root_cause: why a failed item failed (root_cause: the upstream exception line).

    Made elsewhere (supplied and imported videos):
        scored_as: the metric family an imported camera-following video is scored as (docs/release.md).
        source: where the video came from: ``video`` (its file) and ``manifest`` (the videos manifest) or
            ``release`` (the release folder).
        release: an imported video's import facts (version, file stamp, rows, layout check, measurement).

    Files (a compiled, done or supplied item):
        controls: what the model received (``files``, ``command``, the adapter's facts,
            ``achieved_vs_requested``) and ``sha256`` (file name -> hex of every file of ``controls/``).
        camera: the camera path (:meth:`trajectories.CameraPath.meta`: name, fps, size, ``num_frames``, ``phases``,
            ...), its ``spec_hash`` and the ``sha256`` of ``camera.npz``.
        video: ``video.mp4``: ``file``, ``num_frames``, ``fps``, ``width``, ``height``, ``sha256``, ``size``
            (bytes); generated: ``frames_sha256`` and the ``encoder`` settings; supplied: the decoder's ``codec``.
        generation: what the model measured while generating (adapter facts, conformance residuals; ``{}`` for a
            video made elsewhere).
        manifest: the item's ``manifest.jsonl`` row, derived from the record (:meth:`manifest_row`).

    extra: keys of a stored record this version does not know, kept as read (written after the known ones).
    """

    schema_version: Optional[int] = None
    status: Status
    item: WorkItem
    fingerprint: Optional[str] = None
    fingerprint_parts: Optional[dict[str, str]] = None
    case: dict[str, Any]
    model: dict[str, Any]
    context: Optional[dict[str, Any]] = None
    trajectory: Optional[dict[str, Any]] = None
    seed: int
    seed_source: Optional[str] = None
    scored_as: Optional[str] = None
    source: Optional[dict[str, str]] = None
    release: Optional[dict[str, Any]] = None
    versions: Optional[dict[str, Any]] = None
    git: Optional[dict[str, Any]] = None
    argv: Optional[list[str]] = None
    config: Optional[dict[str, Any]] = None
    owner: Optional[dict[str, Any]] = None
    owner_token: Optional[str] = None
    started: Optional[str] = None
    controls: Optional[dict[str, Any]] = None
    camera: Optional[dict[str, Any]] = None
    video: Optional[dict[str, Any]] = None
    timings: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    traceback: Optional[str] = None
    root_cause: Optional[str] = None
    generation: Optional[dict[str, Any]] = None
    finished: Optional[str] = None
    finished_unix: Optional[float] = None
    manifest: Optional[ManifestRow] = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- the file's form -------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The mapping ``meta.json`` holds: the fields in order, absent ones left out, then ``extra``. Values are
        the record's own objects (not copies): :class:`SharedText` recognises the shared ones by identity."""
        out: dict[str, Any] = {}
        for name in _FIELD_NAMES:
            v = getattr(self, name)
            if v is None:
                continue
            out[name] = v.to_dict() if isinstance(v, (WorkItem, ManifestRow)) else v
        out.update(self.extra)
        return out

    @staticmethod
    def from_dict(d: Any) -> ItemRecord:
        """The record of a stored ``meta.json`` mapping; :class:`RecordError` names the first field of the wrong
        JSON type (or an ``item`` that is not a work item). Keys this version does not know go to ``extra``."""
        if not isinstance(d, dict):
            raise RecordError(f"meta.json: not a JSON object ({type(d).__name__})")
        kinds = _json_kinds()
        missing = [k for k in ("status", "item", "case", "model", "seed") if k not in d]
        if missing:
            raise RecordError(f"meta.json: '{missing[0]}' is missing (not an item record)")
        values = {k: v for k, v in d.items() if k in kinds}
        for name, v in values.items():
            if v is not None and (not isinstance(v, kinds[name]) or isinstance(v, bool) and bool not in kinds[name]):
                raise RecordError(f"meta.json: '{name}' is a {type(v).__name__}, expected "
                                  f"{' or '.join(k.__name__ for k in kinds[name])}")
        if values["status"] not in typing.get_args(Status):
            raise RecordError(f"meta.json: status={values['status']!r}, expected one of {typing.get_args(Status)}")
        try:
            values["item"] = WorkItem(**values["item"])
            if values.get("manifest") is not None:
                values["manifest"] = ManifestRow.from_dict(values["manifest"])
        except (UserError, TypeError, ValueError) as exc:
            raise RecordError(f"meta.json: 'item' or 'manifest' is not a work item's: {exc}") from None
        return ItemRecord(**values, extra={k: v for k, v in d.items() if k not in kinds})

    # -- what readers ask ------------------------------------------------------------------------------------------
    @property
    def supplied(self) -> bool:
        """A video made elsewhere (external or imported): it records its ``source``."""
        return self.source is not None

    def manifest_row(self) -> ManifestRow:
        """The item's ``manifest.jsonl`` row: where its files are and what they hold (a video made elsewhere is
        marked ``external``)."""
        cam, video = self.camera or {}, self.video or {}
        return ManifestRow(
            **self.item.to_dict(), key=self.item.key, status=self.status, dir=self.item.key,
            video=VIDEO_FILE if self.status == "done" else None, video_sha256=video.get("sha256"),
            frames_sha256=video.get("frames_sha256"), spec_hash=cam.get("spec_hash"),
            num_frames=cam.get("num_frames"), fps=cam.get("fps"), phases=cam.get("phases"), timings=self.timings,
            error=self.error, fingerprint=self.fingerprint, extra={"external": True} if self.supplied else {})

    # -- writing ---------------------------------------------------------------------------------------------------
    def seal(self, item_dir: Path) -> None:
        """Finish a generated item's record before its last write: the hashes of ``controls/`` (after generation:
        an adapter may add files there; not for a failed item), the finish time and the manifest row."""
        if self.status != "failed" and isinstance(self.controls, dict):
            self.controls["sha256"] = controls_hashes(item_dir / "controls")
        self.finished = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.finished_unix = time.time()
        self.manifest = self.manifest_row()

    @staticmethod
    def made_elsewhere(item: WorkItem, item_dir: Path, *, case: dict[str, Any], model: dict[str, Any],
                       source: dict[str, str], path: CameraPath, video: dict[str, Any],
                       scored_as: Optional[str] = None, release: Optional[dict[str, Any]] = None) -> ItemRecord:
        """The record of a video made elsewhere, whose folder holds its ``video.mp4`` and ``camera.npz`` already:
        done, its camera facts (:func:`camera_facts`), ``video`` (``file``, ``sha256``, ``size`` and the decoder's
        facts), no controls, nothing generated, and its manifest row."""
        from .io import sha256_file

        rec = ItemRecord(status="done", item=item, case=case, model=model, seed=item.seed, scored_as=scored_as,
                         source=source, release=release,
                         camera=camera_facts(path, sha256_file(item_dir / "camera.npz")),
                         video={"file": VIDEO_FILE, **video},
                         controls={"sha256": controls_hashes(item_dir / "controls")}, generation={})
        rec.manifest = rec.manifest_row()
        return rec


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ItemRecord) if f.name != "extra")


@functools.lru_cache(maxsize=1)
def _json_kinds() -> dict[str, tuple[type, ...]]:
    """field -> the JSON types its value may have, read from the annotations (one source of truth)."""
    hints = typing.get_type_hints(ItemRecord)
    out: dict[str, tuple[type, ...]] = {}
    for name in _FIELD_NAMES:
        hint = hints[name]
        args = [a for a in typing.get_args(hint) if a is not type(None)] if typing.get_origin(hint) is \
            typing.Union else [hint]
        origin = typing.get_origin(args[0]) or args[0]
        if origin in (WorkItem, ManifestRow):
            origin = dict
        elif origin is Literal:  # a closed set of strings (status): checked by value in from_dict
            origin = str
        out[name] = (int, float) if origin is float else (origin,)
    return out


def camera_facts(path: CameraPath, sha256: str) -> dict[str, Any]:
    """The ``camera`` section of a record: the path's content hash, its description and ``camera.npz``'s sha256."""
    return {"spec_hash": path.spec_hash(), **path.meta(), "sha256": sha256}


def read_record(item_dir: Path) -> Optional[ItemRecord]:
    """The record in ``item_dir`` (None when there is none, or it is unreadable or not a record)."""
    try:
        return ItemRecord.from_dict(item_meta(item_dir))
    except RecordError:
        return None


class SharedText:
    """The texts of values every record of a run shares (config, versions, model, ...), serialised and scrubbed
    once per run instead of twice per item: a dry run's items take milliseconds, and its records are mostly these.

    A value is shared when the record holds that very object (identity, not equality) as a top-level field. A
    secret registered after a value's text was made makes it again (:func:`harness.secrets.generation`)."""

    def __init__(self, *values: Any) -> None:
        self.values = values
        self._text: dict[int, tuple[Any, int, str]] = {}  # id -> (the value, the registry's generation, its text)
        self._token = f"\x00shared-{os.urandom(8).hex()}"

    def text(self, record: ItemRecord) -> str:
        """``json_text(record.to_dict())``, scrubbed: each shared value is replaced by a placeholder string (with
        this object's random token), the rest is serialised in one call, then each placeholder is replaced by the
        shared value's cached text (indented as a value at depth 1)."""
        from .io import json_text
        from .secrets import generation, scrub

        doc: dict[str, Any] = {}
        texts: dict[str, str] = {}
        now = generation()
        for k, v in record.to_dict().items():
            if isinstance(v, (dict, list)) and any(v is x for x in self.values):
                hit = self._text.get(id(v))
                if hit is None or hit[0] is not v or hit[1] != now:
                    hit = self._text[id(v)] = (v, now, scrub(json_text(v)[:-1].replace("\n", "\n  ")))
                mark = f"{self._token}:{len(texts)}"
                texts[json.dumps(mark)] = hit[2]
                doc[k] = mark
            else:
                doc[k] = v
        text = scrub(json_text(doc))  # the record's own parts; the shared ones were scrubbed when first serialised
        for mark, sub in texts.items():
            text = text.replace(mark, sub, 1)
        return text


def write_record(item_dir: Path, record: ItemRecord, shared: Optional[SharedText] = None) -> None:
    """Write ``<item_dir>/meta.json``: the one writer of item records (atomic, secrets scrubbed, as
    :func:`harness.io.write_json` writes ``record.to_dict()``). ``shared``: the run's :class:`SharedText`."""
    from .io import json_text, write_text
    from .secrets import scrub

    text = shared.text(record) if shared is not None else scrub(json_text(record.to_dict()))
    write_text(Path(item_dir) / META_FILE, text, scrubbed=True)
