"""One row must never hurt another (issue 44): a release-shaped folder seeded with hostile rows imports every good
row, names every bad one once, writes nothing for it, prints no raw control character, and a rerun converges."""

from __future__ import annotations

import json
import os
import struct
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

from evaluate.release.importer import ReleaseOptions, import_release
from evaluate.release.layout import parquet_files, shown
from evaluate.release.miniature import MiniRow, png_bytes, video_path, write_rows

pytest.importorskip("pyarrow")

IMG = png_bytes(np.full((64, 96, 3), 90, np.uint8))


def _bomb() -> bytes:
    """A valid PNG whose header says 100000 x 100000 pixels (30 GB decoded) in a few hundred bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + \
        chunk(b"IEND", b"")


INJECTED = b"id: injected\nfamily: environment\nimage: /etc/hostname\nprompt: pwned\n"


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    from harness.video import VideoWriter

    path = tmp_path_factory.mktemp("v") / "v.mp4"
    rng = np.random.default_rng(0)
    w = VideoWriter(path, fps=16)
    for _ in range(493):
        w(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    w.close()
    return path


def _release(src: Path, video: Path) -> tuple[list[MiniRow], dict[str, str]]:
    """Good rows and one hostile row per kind; returns (rows, {hostile case: the problem kind it must get})."""
    rows: list[MiniRow] = []

    def row(case: str, folder: str | None = None, model: str = "evoke", image: bytes = IMG, **kw) -> MiniRow:
        rel = video_path("environment", model, "lrlr_sym_0p75dpf", folder or case)
        p = src / rel
        if len(p.name) < 200 and len(str(p.parent.name)) < 200 and not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(video.read_bytes())  # its own file: one video per item
        r = MiniRow(model, "environment", "lrlr_sym_0p75dpf", case, rel, image, **kw)
        rows.append(r)
        return r

    for i in range(4):
        row(f"case_{i:03d}")
    bad = {"a..b": "bad case id", "c" * 240: "unreadable row", "case_101": "bad case", "case_102": "bad case",
           "case_103": "bad case", "case_104": "unknown model id"}
    row("a..b")
    row("c" * 240)
    row("case_101", image=b"hello, not an image")
    row("case_102", image=_bomb())
    row("case_103", image=INJECTED, image_path="../evil.yml")
    row("case_104", model="evil\x1b[31m\u202e-model\n")
    # two spellings of one model and one case: two videos that would become one item, refused by name
    row("case_200", model="matrix-game-3")
    row("Case-200", model="Matrix_Game3", folder="Case-200")
    # one item_id on two videos
    row("case_300", item="evoke/environment/lrlr_sym_0p75dpf/case_300")
    row("case_301", item="evoke/environment/lrlr_sym_0p75dpf/case_300")
    # the same row many times: one item, the rest counted as duplicates
    rows += [rows[0]] * 50
    write_rows(src, rows)
    os.mkfifo(src / "data" / "zz-fifo.parquet")  # a FIFO named like a parquet file is never opened
    return rows, bad


def _unblock_fifo_later(fifo: Path) -> threading.Timer:
    """If the import ever opened the FIFO, end its wait after 30 s (the test then fails instead of hanging)."""
    def writer() -> None:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    t = threading.Timer(30.0, writer)
    t.daemon = True
    t.start()
    return t


def test_hostile_rows_are_one_line_each_and_the_rest_imports(tmp_path, video, capsys):
    src = tmp_path / "release"
    rows, bad = _release(src, video)
    timer = _unblock_fifo_later(src / "data" / "zz-fifo.parquet")
    assert parquet_files(src) == [src / "data" / "train-00000-of-00001.parquet"]
    run = tmp_path / "run"
    s = import_release(ReleaseOptions(src, measure=False), run, progress=False)
    timer.cancel()
    # the four good videos, each once; every row counted once
    assert s.imported == 4 and s.videos == 4
    assert s.rows == len(rows) == s.kept_rows + s.duplicate_rows + s.skipped_rows()
    assert s.duplicate_rows == 50
    kinds = {k: sum(p.rows for p in v.values()) for k, v in s.problems.items()}
    assert kinds == {"bad case id": 1, "unreadable row": 1, "bad case": 3, "unknown model id": 1,
                     "two videos, one item": 2, "one item_id, two videos": 2}
    # each bad row named once, on one line, no raw control character anywhere
    lines = s.lines()
    assert all(ch.isprintable() for line in lines for ch in line)
    text = "\n".join(lines)
    assert text.count("evil\\x1b[31m\\u202e-model\\x0a") == 1
    assert sum("first_frame: " in line for line in lines) == 3
    assert any("100000x100000" in line or "DecompressionBomb" in line for line in lines)
    assert any("matrix_game3/lrlr_sym_0p75dpf/environment_case_200" in line for line in lines)
    # nothing written for a bad row: no item, no case file, no injected file
    keys = sorted(p.parent.name for p in run.rglob("meta.json"))
    assert keys == [f"environment_case_{i:03d}" for i in range(4)]
    cases = run / "release" / "cases"
    assert sorted(p.name for p in cases.iterdir()) == sorted(
        [f"environment_case_{i:03d}.yaml" for i in range(4)] + [f"environment_case_{i:03d}.png" for i in range(4)])
    assert not list(tmp_path.rglob("evil.yml")) and not list(tmp_path.rglob("*.yml"))
    meta = json.loads((next(run.rglob("environment_case_000/meta.json"))).read_text())
    assert len(meta["release"]["rows"]) == 1 and meta["release"]["duplicate_rows"] == 50
    # a rerun converges: nothing written, nothing removed, the same problems
    again = import_release(ReleaseOptions(src, measure=False), run, progress=False)
    assert (again.imported, again.unchanged, again.removed) == (0, 4, 0)
    assert again.to_dict()["problems"] == s.to_dict()["problems"]


def test_shown_escapes_every_control_character():
    for raw in ("a\nb", "\x1b[2J", "\u202eevil", "tab\tx", "\x00", "\u2028"):
        out = shown(raw)
        assert all(ch.isprintable() for ch in out), (raw, out)
    assert shown("ok: plain-text_1.0") == "ok: plain-text_1.0"
    assert shown("x" * 500, limit=10) == "xxxxxxxxxx...(+490 chars)"


def test_row_bounds_cap_what_is_read_and_written(tmp_path, video):
    """Many identical rows: read up to release.max_rows, one item whose meta.json lists the row once; the rest
    counted, never stored; an item beyond the rows read is not removed (part of the release was read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "release"
    rel = video_path("environment", "evoke", "lrlr_sym_0p75dpf", "case_000")
    (src / rel).parent.mkdir(parents=True)
    (src / rel).write_bytes(video.read_bytes())
    write_rows(src, [MiniRow("evoke", "environment", "lrlr_sym_0p75dpf", "case_000", rel, IMG)])
    one = pq.read_table(src / "data" / "train-00000-of-00001.parquet")
    many = pa.concat_tables([one] * 30_000)
    pq.write_table(many, src / "data" / "train-00000-of-00001.parquet", row_group_size=10_000)
    run = tmp_path / "run"
    s = import_release(ReleaseOptions(src, measure=False, max_rows=12_000), run, progress=False)
    assert (s.rows, s.not_read, s.imported, s.duplicate_rows) == (12_000, 18_000, 1, 11_999)
    meta = next(run.rglob("meta.json"))
    assert meta.stat().st_size < 20_000 and (run / "release" / "import.json").stat().st_size < 5_000
    assert any("18000 row(s) of 30000 not read" in line for line in s.lines())
