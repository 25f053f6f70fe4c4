"""What the official release looks like, as published, how its ids are spelled, and how its rows are read safely.

Facts (the dataset viewer pages, read 2026-12-03; docs/release.md cites them):

- ``rescuerz/WorldMemBench`` and ``rescuerz/WorldMemBench-examples`` are parquet datasets with the columns
  :data:`COLUMNS`: ``first_frame`` (an image, 1280 px wide; Hugging Face ``datasets`` stores an Image feature in
  parquet as a struct ``{bytes, path}``), ``model_id``, ``category``, ``trajectory``, ``case_id``, ``video_url`` and
  ``item_id`` (``<model>/<category>/<trajectory>/<case>``).
- ``video_url`` is ``https://huggingface.co/datasets/rescuerz/<repo>/resolve/main/<path>``; ``<path>`` is
  ``<category>/<model>/<trajectory>/<case>/video.mp4`` at the dataset's root, and the same under ``data/`` in the
  examples dataset.
- ``camera_rotation`` rows point at ``environment/`` videos, under another case id (the examples' camera row
  ``case_008`` plays ``environment/.../case_010``): the paper's "Camera Following reuses 85 static-memory cases".
- Model ids seen: ``dreamx-world``, ``evoke`` (main), ``lingbot-v2`` (examples). Categories seen:
  ``camera_rotation``, ``camera_translation``, ``dynamic_memory``, ``environment``, ``human``.

Inferences (labelled where used): the sixth category is ``object``; the six model ids not seen
(:data:`INFERRED_MODEL_IDS`); that the video's own folder (not the row) names the case a video was made from.

Reading is bounded (docs/release.md, "What the import refuses"): only regular files inside the release folder are
read (a FIFO named like a parquet file is never opened), at most ``max_rows`` rows, a row group whose columns
decode to more than :data:`MAX_ROW_GROUP_BYTES` is skipped whole, and a string longer than its column's bound
(:data:`MAX_CHARS`) makes its row a problem; every string shown to the user goes through :func:`shown`.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, MissingDependencyError

#: The release's parquet columns (every file must have them).
COLUMNS = ("first_frame", "model_id", "category", "trajectory", "case_id", "video_url", "item_id")
#: Its text columns: every one a row must fill (the first frame is an image).
TEXT_COLUMNS = COLUMNS[1:]
#: The longest value each text column may hold (characters); a longer one makes its row a problem. The release's
#: own: ``video_url`` 113-138 characters, ``item_id`` 35-60 (the viewer's column statistics).
MAX_CHARS = {"model_id": 64, "category": 64, "trajectory": 64, "case_id": 64, "video_url": 1024, "item_id": 512}
#: A row group whose columns (as read) would decode to more than this is skipped whole, its rows named once.
MAX_ROW_GROUP_BYTES = 1 << 30
#: Rows read at most, by default (``release.max_rows``): the release has about 21.8k.
MAX_ROWS = 200_000

#: Release category -> the case family of a video *made for* that category. The camera categories have none: their
#: rows score camera following on a video (an environment video they reuse, or a translation video of their own),
#: never memory (:data:`CAMERA_FAMILY`).
CATEGORY_FAMILY = {"human": "human", "object": "object", "environment": "environment", "dynamic_memory": "dynamic"}
#: Categories whose rows score camera following (the paper's 85 camera-following cases).
CAMERA_CATEGORIES = ("camera_rotation", "camera_translation")
#: Every category the import knows.
CATEGORIES = (*CATEGORY_FAMILY, *CAMERA_CATEGORIES)
#: Categories seen in the viewer (the rest is inferred: ``object``).
SEEN_CATEGORIES = ("camera_rotation", "camera_translation", "dynamic_memory", "environment", "human")
#: How a camera-following item is scored: camera following and video quality only (``meta.json`` ``scored_as``).
CAMERA_FAMILY = "camera"

#: Model ids seen in the release's viewer -> harness model names (facts).
SEEN_MODEL_IDS = {"dreamx-world": "dreamx", "evoke": "evoke", "lingbot-v2": "lingbot_v2"}
#: INFERRED: the other six of the nine, in the same style (lowercase, hyphens); not seen in any row yet.
#: Extend or correct with ``release.models={<id>: <harness model>}``. Ids are compared by :func:`id_key`, so every
#: spelling of case, hyphens, underscores and dots maps (``Matrix-Game-3.5``, ``matrix_game_35``).
INFERRED_MODEL_IDS = {"hy-worldplay": "hy_worldplay", "matrix-game-3": "matrix_game3",
                      "matrix-game-3.5": "matrix_game35", "sana-wm": "sana_wm", "yume": "yume",
                      "lingbot-world": "lingbot", "lingbot": "lingbot"}

_RESOLVE = re.compile(r"/resolve/[^/]+/(?P<path>.+)$")
#: A case key (``<category>_<case>``), after :func:`name_key`: lowercase letters, digits and underscores.
_CASE = re.compile(r"^[a-z0-9][a-z0-9_]*$")
MAX_CASE_KEY = 96


class ReleaseError(ConfigError):
    """The release folder cannot be read as the documented layout (the message names the file and the fix)."""


def shown(value: object, limit: int = 160) -> str:
    """``value`` as text safe to print on one line: control, format and other non-printing characters (newlines,
    ANSI escapes, bidirectional overrides) escaped as ``\\xNN`` / ``\\uNNNN``, cut to ``limit`` characters with the
    count of the rest. Every string of the release that reaches the console, a summary or a report goes through
    here."""
    s = value if isinstance(value, str) else str(value)
    out = []
    for ch in s[:limit]:
        if unicodedata.category(ch)[0] in ("C", "Z") and ch != " ":
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out) + (f"...(+{len(s) - limit} chars)" if len(s) > limit else "")


def name_key(value: str) -> str:
    """A release name as the import compares it: trimmed, lowercase, hyphens as underscores (``Camera-Rotation``
    -> ``camera_rotation``, ``Case-010`` -> ``case_010``)."""
    return value.strip().lower().replace("-", "_")


def id_key(value: str) -> str:
    """A model id as the import compares it: lowercase without hyphens, underscores, dots or spaces
    (``Matrix-Game-3.5`` and ``matrix_game35`` are both ``matrixgame35``)."""
    return re.sub(r"[-_.\s]", "", value.lower())


@dataclass(frozen=True)
class ReleaseRow:
    """One parquet row, as strings (``image`` kept only while the row's case image is being written).

    Attributes:
        where: ``<parquet file>:<row>`` for messages. image: the ``first_frame`` bytes or None.
        problem: why the row cannot be read (a value that is not a string, too long, a row group too large), or
            None. count: how many rows this record stands for (more than 1 only for a skipped row group).
    """

    where: str
    model_id: str
    category: str
    trajectory: str
    case_id: str
    video_url: str
    item_id: str
    image: bytes | None = None
    problem: str | None = None
    count: int = 1


@dataclass(frozen=True)
class VideoRef:
    """Where a row's video lives in the release tree: ``<category>/<model>/<trajectory>/<case>/video.mp4``."""

    relpath: str
    category: str
    model_id: str
    trajectory: str
    case_id: str


def video_relpath(url: str) -> str:
    """The path inside the dataset repository of a ``video_url`` (``.../resolve/<rev>/<path>``, a query such as
    ``?download=true`` dropped), or ``url`` itself when it is already relative."""
    url = url.split("#", 1)[0].split("?", 1)[0]
    m = _RESOLVE.search(url)
    return m["path"] if m else url.lstrip("/")


def parse_video_ref(relpath: str) -> VideoRef | None:
    """``[data/]<category>/<model>/<trajectory>/<case>/video.mp4`` -> :class:`VideoRef` (None for another shape)."""
    parts = Path(relpath).parts
    if parts and parts[0] == "data":
        parts = parts[1:]
    if len(parts) != 5 or not parts[4].endswith(".mp4"):
        return None
    return VideoRef(relpath, parts[0], parts[1], parts[2], parts[3])


def regular_file(path: Path, root: Path) -> bool:
    """Whether ``path`` is a regular file (after its links) inside ``root`` (resolved): never a FIFO, a device or
    a folder, never a link that leaves the release."""
    try:
        real = path.resolve()
        return stat.S_ISREG(os.stat(real).st_mode) and real.is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a broken link, a link loop
        return False


def local_video(source: Path, relpath: str) -> Path | None:
    """The local file of a release video: ``<source>/<path>``, with or without the examples' ``data/`` prefix
    (``source`` may be the repository's root or its ``data/`` folder). Never outside ``source``, never a file that
    is not a regular one."""
    rel = Path(relpath)
    candidates = [rel]
    if rel.parts and rel.parts[0] == "data":
        candidates.append(Path(*rel.parts[1:]))
    else:
        candidates.append(Path("data") / rel)
    for c in candidates:
        if c.is_absolute() or ".." in c.parts or not c.parts:
            continue
        p = source / c
        if regular_file(p, source):
            return p
    return None


def harness_model(model_id: str, extra: dict[str, str], known: list[str]) -> str | None:
    """The harness model of a release model id, every spelling compared by :func:`id_key`: ``extra`` (the user's
    ``release.models``) first, then the ids seen in the release, then the inferred ones, then the harness's own
    model names."""
    key = id_key(model_id)
    for table in (extra, SEEN_MODEL_IDS, INFERRED_MODEL_IDS, {m: m for m in known}):
        for rid, model in table.items():
            if id_key(rid) == key:
                return model
    return None


def release_case_id(category: str, case_id: str) -> str:
    """A harness case id for a release case: the release numbers cases per category (``case_000`` is a different
    case in ``environment`` and ``human``), so the id is ``<category>_<case_id>`` (both by :func:`name_key`)."""
    return f"{name_key(category)}_{name_key(case_id)}"


def valid_case_id(case_id: str) -> bool:
    """A case key the import can write: lowercase letters, digits and underscores, at most :data:`MAX_CASE_KEY`
    characters (it names a folder of every item and the case's files)."""
    return len(case_id) <= MAX_CASE_KEY and bool(_CASE.match(case_id))


def parquet_files(source: Path) -> list[Path]:
    """The release's parquet files under ``source`` (any depth, hidden folders and links to folders skipped; only
    regular files inside ``source``), in path order."""
    if not source.is_dir():
        raise ReleaseError(f"source={shown(str(source))!r}: not a folder; give the local copy of the release (the "
                           "folder `hf download rescuerz/WorldMemBench --repo-type dataset --local-dir DIR` fills)")
    files = []
    for folder, dirs, names in os.walk(source):  # links to folders are not followed (no loop, nothing outside)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [Path(folder) / n for n in names if n.endswith(".parquet") and not n.startswith(".")
                  and regular_file(Path(folder) / n, source)]
    if not files:
        raise ReleaseError(f"source={shown(str(source))!r} holds no .parquet file; give the release's folder (its "
                           "parquet files and its video tree)")
    return sorted(files)


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError("reading the release", extra="release", detail="pyarrow") from None
    return pq


def check_schema(files: list[Path]) -> int:
    """Every file has the release's columns (read from the footers only). Returns the number of rows they hold."""
    pq = _pyarrow()
    total = 0
    for f in files:
        try:
            meta = pq.read_metadata(f)
            names = set(meta.schema.to_arrow_schema().names)
        except Exception as exc:  # not a parquet file, truncated
            raise ReleaseError(f"{shown(str(f))}: not a readable parquet file ({type(exc).__name__}: "
                               f"{shown(str(exc))})") from None
        missing = [c for c in COLUMNS if c not in names]
        if missing:
            raise ReleaseError(f"{shown(str(f))}: missing column(s) {missing}; the release's rows have "
                               f"{list(COLUMNS)}")
        total += int(meta.num_rows)
    return total


def _group_bytes(meta: Any, group: int, columns: list[str]) -> int:
    rg = meta.row_group(group)
    want = set(columns)
    return sum(int(rg.column(j).total_uncompressed_size) for j in range(rg.num_columns)
               if rg.column(j).path_in_schema.split(".")[0] in want)


def _row(where: str, rec: dict[str, Any], images: bool) -> ReleaseRow:
    """One record as a :class:`ReleaseRow`; a value that is not a string, or too long, is the row's problem."""
    values: dict[str, str] = {}
    problem = None
    for k in COLUMNS[1:]:
        v = rec.get(k)
        if not isinstance(v, str):
            values[k], problem = "", problem or f"{k} is not a string ({type(v).__name__})"
        elif len(v) > MAX_CHARS[k]:
            values[k], problem = "", problem or f"{k} is {len(v)} characters (at most {MAX_CHARS[k]})"
        else:
            values[k] = v
    img = rec.get("first_frame") if images else None
    data = img.get("bytes") if isinstance(img, dict) else None
    return ReleaseRow(where, values["model_id"], values["category"], values["trajectory"], values["case_id"],
                      values["video_url"], values["item_id"],
                      image=bytes(data) if isinstance(data, (bytes, bytearray)) else None, problem=problem)


def iter_rows(files: list[Path], batch_rows: int | None = None, images: bool = True,
              max_rows: int | None = None) -> Iterator[ReleaseRow]:
    """Every row of ``files`` in order (at most ``max_rows``), ``batch_rows`` at a time (memory stays flat with the
    release's size). A row group larger than :data:`MAX_ROW_GROUP_BYTES` is one record with ``count`` rows and a
    problem; a value that is not a string or is too long is its row's problem. ``first_frame`` is read only with
    ``images`` (its ``path`` never: the import names its files itself)."""
    pq = _pyarrow()
    columns = list(COLUMNS) if images else list(COLUMNS[1:])
    batch_rows = batch_rows or (64 if images else 4096)  # images: a few MB a batch; text: cheap rows
    left = max_rows
    for f in files:
        pf = pq.ParquetFile(f)
        n = 0
        for g in range(pf.metadata.num_row_groups):
            if left is not None and left <= 0:
                return
            rows = pf.metadata.row_group(g).num_rows
            if _group_bytes(pf.metadata, g, columns) > MAX_ROW_GROUP_BYTES:
                take = rows if left is None else min(rows, left)
                yield ReleaseRow(f"{f.name}:{n}", "", "", "", "", "", "", count=take,
                                 problem=f"row group {g} decodes to more than {MAX_ROW_GROUP_BYTES >> 20} MB")
                n += rows
                left = None if left is None else left - take
                continue
            for batch in pf.iter_batches(batch_size=batch_rows, columns=columns, row_groups=[g]):
                for rec in batch.to_pylist():
                    if left is not None:
                        if left <= 0:
                            return
                        left -= 1
                    yield _row(f"{f.name}:{n}", rec, images)
                    n += 1
