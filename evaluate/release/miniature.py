"""Write a release in the documented layout from local videos: parquet rows plus the video tree.

Used by the tests and by ``python -m harness.bench release``; also a way to lay out one's own videos as the release
is laid out. The layout follows :mod:`evaluate.release.layout` (the dataset's root paths, or the examples' ``data/``
prefix); the parquet files store ``first_frame`` as Hugging Face ``datasets`` stores an Image feature (a struct of
``bytes`` and ``path``) and carry the ``huggingface`` schema metadata ``datasets`` writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .layout import COLUMNS

if TYPE_CHECKING:
    import numpy as np

HUB = "https://huggingface.co/datasets/rescuerz"


@dataclass(frozen=True)
class MiniRow:
    """One row to write. video: the path inside the repository the row's ``video_url`` names (its file may be
    absent: a missing video). image: the ``first_frame`` bytes."""

    model_id: str
    category: str
    trajectory: str
    case_id: str
    video: str
    image: bytes
    image_path: str | None = None  # the name ``datasets`` records beside the bytes (default ``<case_id>.png``)
    item: str | None = None  # the row's ``item_id`` (default ``<model>/<category>/<trajectory>/<case>``)

    @property
    def item_id(self) -> str:
        return self.item or f"{self.model_id}/{self.category}/{self.trajectory}/{self.case_id}"


def video_path(category: str, model_id: str, trajectory: str, case_id: str, examples: bool = False) -> str:
    """The repository path of a video: ``[data/]<category>/<model>/<trajectory>/<case>/video.mp4``."""
    rel = f"{category}/{model_id}/{trajectory}/{case_id}/video.mp4"
    return f"data/{rel}" if examples else rel


def write_rows(root: Path, rows: Sequence[MiniRow], repo: str = "WorldMemBench", shards: int = 1,
               row_group: int = 256) -> list[Path]:
    """Write ``rows`` as ``shards`` parquet files under ``root/data/`` (train-0000i-of-0000n.parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.io import atomic_path

    features = {"first_frame": {"_type": "Image"},
                **{c: {"dtype": "string", "_type": "Value"} for c in COLUMNS if c != "first_frame"}}
    schema = pa.schema([("first_frame", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                        *[(c, pa.string()) for c in COLUMNS if c != "first_frame"]],
                       metadata={"huggingface": json.dumps({"info": {"features": features}})})
    out = []
    per = -(-len(rows) // shards) if rows else 0
    for s in range(shards):
        part = rows[s * per:(s + 1) * per]
        table = pa.table({
            "first_frame": [{"bytes": r.image, "path": r.image_path or f"{r.case_id}.png"} for r in part],
            "model_id": [r.model_id for r in part], "category": [r.category for r in part],
            "trajectory": [r.trajectory for r in part], "case_id": [r.case_id for r in part],
            "video_url": [f"{HUB}/{repo}/resolve/main/{r.video}" for r in part],
            "item_id": [r.item_id for r in part]}, schema=schema)
        path = root / "data" / f"train-{s:05d}-of-{shards:05d}.parquet"
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, row_group_size=row_group)
        out.append(path)
    return out


def place_video(root: Path, rel: str, src: Path) -> Path:
    """Put the video ``src`` at ``root/rel`` without copying it (:func:`harness.io.link_file`)."""
    from harness.io import link_file

    link_file(src, root / rel)
    return root / rel


def png_bytes(image: np.ndarray) -> bytes:
    """PNG bytes of an (H, W, 3) uint8 RGB array."""
    import cv2

    ok, buf = cv2.imencode(".png", image[:, :, ::-1])
    assert ok
    return buf.tobytes()


def first_frame(video: Path) -> bytes:
    """The first frame of ``video`` as PNG bytes (what the release's ``first_frame`` shows)."""
    from harness.video import iter_frames

    _, frame = next(iter_frames(video, indices=[0]))
    return png_bytes(frame)


def miniature(root: Path, videos: dict[str, Path], models: Sequence[str] = ("dreamx-world",),
              cases: int = 2, examples: bool = False, unknown_model: str | None = "mystery-model",
              missing: bool = True, shards: int = 1, repo: str = "WorldMemBench") -> list[MiniRow]:
    """A small release under ``root``: for each model and case, an ``environment`` row per rotation preset in
    ``videos`` (preset -> a video file made with it), a ``camera_rotation`` row per preset pointing at that
    environment video under another case id, a ``dynamic_memory`` row when ``lr_hold_sym_0p5dpf`` is in ``videos``,
    and a ``camera_translation`` row when ``translate_square`` is; plus, when asked, a row of an unknown model id
    and a row whose video file is absent. Returns the rows written."""
    rows: list[MiniRow] = []
    images = {p: first_frame(v) for p, v in videos.items()}
    for model in models:
        for c in range(cases):
            for preset, src in sorted(videos.items()):
                if preset == "lr_hold_sym_0p5dpf":
                    cat = "dynamic_memory"
                elif preset == "translate_square":
                    cat = "camera_translation"
                else:
                    cat = "environment"
                case = f"case_{c:03d}"
                rel = video_path(cat, model, preset, case, examples)
                place_video(root, rel, src)
                rows.append(MiniRow(model, cat, preset, case, rel, images[preset]))
                if cat == "environment":  # the camera case: another id, the same video
                    rows.append(MiniRow(model, "camera_rotation", preset, f"case_{c + 40:03d}", rel, images[preset]))
    some = sorted(videos)[0]
    if unknown_model:
        rel = video_path("environment", unknown_model, some, "case_000", examples)
        place_video(root, rel, videos[some])
        rows.append(MiniRow(unknown_model, "environment", some, "case_000", rel, images[some]))
    if missing:
        rows.append(MiniRow(models[0], "environment", some, "case_099",
                            video_path("environment", models[0], some, "case_099", examples), images[some]))
    write_rows(root, rows, repo=repo, shards=shards)
    return rows
