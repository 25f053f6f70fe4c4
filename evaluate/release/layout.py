"""What the official release looks like, as published, and how a row maps to a harness item.

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
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, MissingDependencyError

#: The release's parquet columns (every file must have them).
COLUMNS = ("first_frame", "model_id", "category", "trajectory", "case_id", "video_url", "item_id")

#: Release category -> the case family its video is scored as. Camera rows reuse static-memory videos, so their
#: family is the family of the video they point at (read from its path; ``environment`` when the path says nothing).
CATEGORY_FAMILY = {"human": "human", "object": "object", "environment": "environment", "dynamic_memory": "dynamic",
                   "camera_rotation": "environment", "camera_translation": "environment"}
#: Categories whose rows score camera following on a video of another category.
CAMERA_CATEGORIES = ("camera_rotation", "camera_translation")
#: Categories seen in the viewer (the rest of CATEGORY_FAMILY is inferred: ``object``).
SEEN_CATEGORIES = ("camera_rotation", "camera_translation", "dynamic_memory", "environment", "human")

#: Model ids seen in the release's viewer -> harness model names (facts).
SEEN_MODEL_IDS = {"dreamx-world": "dreamx", "evoke": "evoke", "lingbot-v2": "lingbot_v2"}
#: INFERRED: the other six of the nine, in the same style (lowercase, hyphens); not seen in any row yet.
#: Extend or correct with ``release.models={<id>: <harness model>}``.
INFERRED_MODEL_IDS = {"hy-worldplay": "hy_worldplay", "matrix-game-3": "matrix_game3", "matrix-game3": "matrix_game3",
                      "matrix-game-3.5": "matrix_game35", "matrix-game35": "matrix_game35", "sana-wm": "sana_wm",
                      "yume": "yume", "lingbot-world": "lingbot", "lingbot": "lingbot"}

_RESOLVE = re.compile(r"/resolve/[^/]+/(?P<path>.+)$")
_CASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ReleaseError(ConfigError):
    """The release folder cannot be read as the documented layout (the message names the file and the fix)."""


@dataclass(frozen=True)
class ReleaseRow:
    """One parquet row, as strings (``image`` kept only while the row is being imported).

    Attributes:
        where: ``<parquet file>:<row>`` for messages. image: the ``first_frame`` bytes (PNG/JPEG) or None.
        image_name: the file name ``datasets`` recorded for it (its extension tells the format), or None.
    """

    where: str
    model_id: str
    category: str
    trajectory: str
    case_id: str
    video_url: str
    item_id: str
    image: bytes | None = None
    image_name: str | None = None


@dataclass(frozen=True)
class VideoRef:
    """Where a row's video lives in the release tree: ``<category>/<model>/<trajectory>/<case>/video.mp4``."""

    relpath: str
    category: str
    model_id: str
    trajectory: str
    case_id: str


def video_relpath(url: str) -> str:
    """The path inside the dataset repository of a ``video_url`` (``.../resolve/<rev>/<path>``), or ``url`` itself
    when it is already relative."""
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


def local_video(source: Path, relpath: str) -> Path | None:
    """The local file of a release video: ``<source>/<path>``, with or without the examples' ``data/`` prefix
    (``source`` may be the repository's root or its ``data/`` folder). Never outside ``source``."""
    rel = Path(relpath)
    candidates = [rel]
    if rel.parts and rel.parts[0] == "data":
        candidates.append(Path(*rel.parts[1:]))
    else:
        candidates.append(Path("data") / rel)
    root = source.resolve()
    for c in candidates:
        if c.is_absolute() or ".." in c.parts:
            continue
        p = (root / c)
        if p.is_file() and p.resolve().is_relative_to(root):
            return p
    return None


def harness_model(model_id: str, extra: dict[str, str], known: list[str]) -> str | None:
    """The harness model of a release model id: ``extra`` (the user's ``release.models``) first, then the ids seen in
    the release, then the inferred ones, then the id with hyphens as underscores when that is a harness model."""
    for table in (extra, SEEN_MODEL_IDS, INFERRED_MODEL_IDS):
        if model_id in table:
            return table[model_id]
    plain = model_id.lower().replace("-", "_").replace(".", "")
    return plain if plain in known else None


def release_case_id(category: str, case_id: str) -> str:
    """A harness case id for a release case: the release numbers cases per category (``case_000`` is a different
    case in ``environment`` and ``human``), so the id is ``<category>_<case_id>``."""
    return f"{category}_{case_id}"


def valid_case_id(case_id: str) -> bool:
    return bool(_CASE.match(case_id))


def parquet_files(source: Path) -> list[Path]:
    """The release's parquet files under ``source`` (any depth, hidden folders skipped), in path order."""
    if not source.is_dir():
        raise ReleaseError(f"source={str(source)!r}: not a folder; give the local copy of the release (the folder "
                           "`hf download rescuerz/WorldMemBench --repo-type dataset --local-dir DIR` fills)")
    files = sorted(p for p in source.rglob("*.parquet")
                   if not any(part.startswith(".") for part in p.relative_to(source).parts))
    if not files:
        raise ReleaseError(f"source={str(source)!r} holds no .parquet file; give the release's folder (its parquet "
                           "files and its video tree)")
    return files


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError("reading the release", extra="release", detail="pyarrow") from None
    return pq


def check_schema(files: list[Path]) -> None:
    """Every file has the release's columns (read from the footers only)."""
    pq = _pyarrow()
    for f in files:
        try:
            names = set(pq.read_schema(f).names)
        except Exception as exc:  # not a parquet file, truncated
            raise ReleaseError(f"{f}: not a readable parquet file ({type(exc).__name__}: {exc})") from None
        missing = [c for c in COLUMNS if c not in names]
        if missing:
            raise ReleaseError(f"{f}: missing column(s) {missing}; the release's rows have {list(COLUMNS)}")


def iter_rows(files: list[Path], batch_rows: int = 256, images: bool = True) -> Iterator[ReleaseRow]:
    """Every row of ``files`` in order, ``batch_rows`` at a time (memory stays flat with the release's size).
    A value that is not a string (or an image that is not ``{bytes, path}``) is passed on as ``""`` / None and
    reported by the importer."""
    pq = _pyarrow()
    columns = list(COLUMNS) if images else [c for c in COLUMNS if c != "first_frame"]
    for f in files:
        n = 0
        for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns):
            for rec in batch.to_pylist():
                img = rec.get("first_frame")
                data = img.get("bytes") if isinstance(img, dict) else None
                name = img.get("path") if isinstance(img, dict) else None
                yield ReleaseRow(
                    where=f"{f.name}:{n}",
                    **{k: rec[k] if isinstance(rec.get(k), str) else "" for k in COLUMNS if k != "first_frame"},
                    image=bytes(data) if isinstance(data, (bytes, bytearray)) else None,
                    image_name=name if isinstance(name, str) else None)
                n += 1
