"""One row must never hurt another (issue 44): a release-shaped folder seeded with hostile rows imports every good
row, names every bad one once, writes nothing for it, prints no raw control character, and a rerun converges. The rules
of the cases, the plan, the layout and the miniature follow (in process, on hand-made rows)."""

from __future__ import annotations

import io
import json
import os
import struct
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

from evaluate.release import cases as cases_mod
from evaluate.release import layout
from evaluate.release.cases import _images, _lacks_annotations, _merged, _remove_stale, image_suffix
from evaluate.release.importer import import_release
from evaluate.release.layout import COLUMNS, ReleaseRow, iter_rows, parquet_files, shown
from evaluate.release.miniature import MiniRow, miniature, png_bytes, video_path, write_rows
from evaluate.release.plan import (
    MAX_SUBJECTS,
    ImportSummary,
    Planner,
    Problem,
    ReleaseOptions,
    ReleaseSettings,
    VideoPlan,
    plan_release,
)

pytest.importorskip("pyarrow")

IMG = png_bytes(np.full((64, 96, 3), 90, np.uint8))


def _bomb() -> bytes:
    """A valid PNG whose header says 100000 x 100000 pixels (30 GB decoded) in a few hundred bytes."""
    return _png_header(100_000, 100_000, zlib.compress(b"\0" * 1000))


def _png_header(w: int, h: int, data: bytes = zlib.compress(b"")) -> bytes:
    """A PNG whose header says w x h, holding ``data`` as its image data (by default none: nothing decodes)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", data) + chunk(b"IEND", b""))


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


# -- rules of the cases, the plan, the layout and the miniature (fast, in process) ----------------------------------
# Rules of the release reader, in-process and fast: what an image must be to become a case image
# (:func:`evaluate.release.cases.image_suffix`), which row's image a case gets (``_images``), how an overlay's
# annotations are merged, which stale files go; how rows are read (:func:`evaluate.release.layout.iter_rows`: where,
# caps, skipped row groups), how a row is mapped or refused (``Planner._resolve``), the import summary's lines, and
# the miniature release writer (:mod:`evaluate.release.miniature`).


PRESET = "lrlr_sym_0p75dpf"
FILE0 = "train-00000-of-00001.parquet"


def _png(seed: int = 0, size: tuple[int, int] = (8, 12)) -> bytes:
    rng = np.random.default_rng(seed)
    return png_bytes(rng.integers(0, 255, (*size, 3), dtype=np.uint8))


def _jpg(seed: int = 0, size: tuple[int, int] = (8, 12)) -> bytes:
    import cv2

    rng = np.random.default_rng(seed)
    ok, buf = cv2.imencode(".jpg", rng.integers(0, 255, (*size, 3), dtype=np.uint8))
    assert ok
    return buf.tobytes()


# -- image_suffix -------------------------------------------------------------------------------------------------

def test_each_accepted_format_gets_its_own_suffix():
    assert image_suffix(_png()) == ".png"
    assert image_suffix(_jpg()) == ".jpg"


def test_an_image_of_exactly_the_byte_cap_is_taken_and_one_byte_more_is_refused():
    png = _png()
    cap = cases_mod.MAX_IMAGE_BYTES
    exact = png + b"\0" * (cap - len(png))  # trailing bytes after IEND: still the same PNG
    assert image_suffix(exact) == ".png"
    with pytest.raises(ValueError, match="at most 32 MB"):
        image_suffix(exact + b"\0")


def test_a_side_longer_than_max_side_is_refused_by_its_header():
    with pytest.raises(ValueError, match="8193x1 pixels by its header"):
        image_suffix(_png_header(cases_mod.MAX_SIDE + 1, 1))
    with pytest.raises(ValueError, match="1x8193 pixels by its header"):
        image_suffix(_png_header(1, cases_mod.MAX_SIDE + 1))


def test_a_header_of_exactly_max_side_and_max_pixels_passes_the_header_check():
    side = cases_mod.MAX_SIDE  # 8192 x 8192 is exactly MAX_IMAGE_PIXELS: neither bound is exceeded
    with pytest.raises(ValueError) as err:
        image_suffix(_png_header(side, side))
    assert "does not decode" in str(err.value)
    assert "by its header" not in str(err.value)


def test_a_header_whose_data_does_not_decode_is_refused():
    with pytest.raises(ValueError, match="a PNG header of 5x4 whose data does not decode"):
        image_suffix(_png_header(5, 4))


def test_an_image_that_decodes_to_another_size_than_its_header_is_refused():
    from PIL import Image

    im = Image.new("RGB", (32, 16), (10, 200, 30))
    exif = im.getexif()
    exif[0x0112] = 6  # orientation: rotated; the decoder turns it to 16 x 32
    buf = io.BytesIO()
    im.save(buf, "JPEG", exif=exif)
    with pytest.raises(ValueError, match="does not decode"):
        image_suffix(buf.getvalue())


def test_not_an_image_and_another_format_are_refused():
    with pytest.raises(ValueError, match="not an image"):
        image_suffix(b"case: yaml\n")
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, "GIF")
    with pytest.raises(ValueError, match="a GIF image"):
        image_suffix(buf.getvalue())


# -- _images ------------------------------------------------------------------------------------------------------

def _release_of_rows(src: Path, rows: list[tuple[str, str, bytes | None]], shards: int = 1) -> list[str]:
    """Write rows (category, case id, image bytes) and return each row's ``where`` (one shard)."""
    write_rows(src, [MiniRow("dreamx-world", cat, PRESET, case, "x/video.mp4", img)  # type: ignore[arg-type]
                     for cat, case, img in rows], shards=shards)
    return [f"{FILE0}:{i}" for i in range(len(rows))]


def _plan(key: str, own: str, rows: list[tuple[str, str]], ident: str) -> VideoPlan:
    """A plan of case ``key`` whose video is of category ``own``, with rows (category, where)."""
    return VideoPlan(relpath=ident, file=Path(ident), identity=ident, model="dreamx", model_id="dreamx-world",
                     preset=PRESET, case_key=key, category=own,
                     rows=[{"item_id": f"{ident}/{i}", "category": c, "case_id": "c", "where": w}
                           for i, (c, w) in enumerate(rows)])


def _opts(src: Path, **kw) -> ReleaseOptions:
    return ReleaseOptions(src, measure=False, **kw)


@pytest.mark.parametrize("own_image, camera_spelling, own_spelling", [
    (_jpg(2), "Camera-Rotation", "Environment"),  # another format: the camera row's .png goes
    (_png(2), "camera_rotation", "environment"),  # the same format: overwritten in place
])
def test_a_row_of_the_videos_own_category_replaces_a_camera_rows_image(tmp_path, own_image, camera_spelling,
                                                                     own_spelling):
    src, out = tmp_path / "src", tmp_path / "cases"
    w = _release_of_rows(src, [("camera_rotation", "case_040", _png(1)), ("environment", "case_000", own_image)])
    plans = {1: _plan("environment_case_000", "environment", [(camera_spelling, w[0]), (own_spelling, w[1])],
                      "v1")}
    images, refused = _images(_opts(src), plans, out)
    name = "environment_case_000" + (".jpg" if own_image == _jpg(2) else ".png")
    assert images == {"environment_case_000": name} and refused == {}
    assert (out / name).read_bytes() == own_image
    assert sorted(p.name for p in out.iterdir()) == [name]  # the camera row's image is gone or overwritten


def test_once_a_case_has_its_own_rows_image_no_later_row_replaces_it(tmp_path):
    src, out = tmp_path / "src", tmp_path / "cases"
    w = _release_of_rows(src, [("environment", "case_000", _png(1)), ("camera_rotation", "case_040", _jpg(2)),
                       ("environment", "case_000", _jpg(3)), ("human", "case_001", _png(4))])
    plans = {1: _plan("environment_case_000", "environment", [("environment", w[0]), ("camera_rotation", w[1])],
                      "v1"),
             2: _plan("environment_case_000", "environment", [("environment", w[2])], "v2"),
             3: _plan("human_case_001", "human", [("human", w[3])], "v3")}
    images, _ = _images(_opts(src), plans, out)
    assert images == {"environment_case_000": "environment_case_000.png", "human_case_001": "human_case_001.png"}
    assert (out / "environment_case_000.png").read_bytes() == _png(1)
    assert not (out / "environment_case_000.jpg").exists()


def test_a_case_without_an_own_row_keeps_its_first_camera_rows_image(tmp_path):
    src, out = tmp_path / "src", tmp_path / "cases"
    w = _release_of_rows(src, [("camera_rotation", "case_040", _png(1)), ("camera_rotation", "case_041", _jpg(2)),
                       ("human", "case_001", _png(4))])
    plans = {1: _plan("environment_case_000", "environment",
                      [("camera_rotation", w[0]), ("camera_rotation", w[1])], "v1"),
             3: _plan("human_case_001", "human", [("human", w[2])], "v3")}
    images, _ = _images(_opts(src), plans, out)
    assert images["environment_case_000"] == "environment_case_000.png"
    assert (out / "environment_case_000.png").read_bytes() == _png(1)
    assert not (out / "environment_case_000.jpg").exists()


def test_once_every_case_has_its_image_the_rest_of_the_rows_is_not_read(tmp_path):
    src, out = tmp_path / "src", tmp_path / "cases"
    rows = [("camera_rotation", "case_040", _png(1)), ("human", "case_009", _png(2)),
            ("human", "case_009", _png(3)), ("human", "case_009", _png(4))]
    paths = write_rows(src, [MiniRow("dreamx-world", c, PRESET, k, "x/video.mp4", i) for c, k, i in rows],
                       shards=2)
    paths[1].write_bytes(b"not a parquet file")  # reading it would raise
    # a case with only a camera row: its first image is its best one
    plans = {1: _plan("environment_case_010", "environment", [("camera_rotation", f"{paths[0].name}:0")], "v1")}
    images, _ = _images(_opts(src), plans, out)
    assert images == {"environment_case_010": "environment_case_010.png"}


def test_once_every_case_has_its_own_rows_image_the_rest_of_the_rows_is_not_read(tmp_path):
    src, out = tmp_path / "src", tmp_path / "cases"
    paths = write_rows(src, [MiniRow("dreamx-world", "human", PRESET, "case_009", "x/video.mp4", _png(i))
                             for i in (1, 2, 3, 4)], shards=2)
    paths[1].write_bytes(b"not a parquet file")  # reading it would raise
    # a case with a row of its video's own category: that row's image is its best one
    plans = {1: _plan("human_case_009", "human", [("human", f"{paths[0].name}:0")], "v1")}
    images, _ = _images(_opts(src), plans, out)
    assert images == {"human_case_009": "human_case_009.png"}
    assert (out / "human_case_009.png").read_bytes() == _png(1)


def test_refused_images_name_the_first_reason_per_case(tmp_path):
    src, out = tmp_path / "src", tmp_path / "cases"
    w = _release_of_rows(src, [("human", "case_000", None), ("human", "case_000", b"junk"),
                       ("object", "case_001", b"junk"), ("object", "case_001", None),
                       ("environment", "case_077", _png(5))])  # a row no plan wants: passed over
    plans = {1: _plan("human_case_000", "human", [("human", w[0]), ("human", w[1])], "v1"),
             2: _plan("object_case_001", "object", [("object", w[2]), ("object", w[3])], "v2")}
    images, refused = _images(_opts(src), plans, out)
    assert images == {}
    assert refused["human_case_000"] == "no first_frame bytes"
    assert refused["object_case_001"].startswith("first_frame: not an image")


def test_release_limit_caps_the_rows_read_for_images(tmp_path):
    src, out = tmp_path / "src", tmp_path / "cases"
    w = _release_of_rows(src, [("human", "case_000", _png(1)), ("human", "case_001", _png(2))])
    plans = {1: _plan("human_case_000", "human", [("human", w[0])], "v1"),
             2: _plan("human_case_001", "human", [("human", w[1])], "v2")}
    images, _ = _images(_opts(src, limit=1), plans, out)
    assert images == {"human_case_000": "human_case_000.png"}


# -- _merged, _lacks_annotations, _remove_stale --------------------------------------------------------------------

def _overlay(tmp_path: Path, family: str = "environment", **kw):
    from harness.cases import Case

    return Case(id="object_case_000", family=family, image="own.png", prompt="a prompt",
                source=str(tmp_path / "over" / "cases.yaml"), **kw)


def _rec() -> dict:
    return {"id": "object_case_000", "family": "object", "image": "object_case_000.png", "prompt": "",
            "hfov_deg": 60.0, "trajectories": [PRESET]}


def test_an_overlays_relative_paths_become_absolute_from_its_own_folder(tmp_path):
    from harness.cases import ObjectTarget, Targets

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    linked = str(tmp_path / "link" / "m.png")  # absolute through a link: kept as written
    objs = [ObjectTarget(id="a", name="cup", box=[0, 0, 4, 4], mask="masks/a.png"),
            ObjectTarget(id="b", name="pot", box=[0, 0, 4, 4], mask="skimage://astronaut"),
            ObjectTarget(id="c", name="pan", box=[0, 0, 4, 4], mask=linked),
            ObjectTarget(id="d", name="lid", box=[0, 0, 4, 4], polygon=[[0, 0], [4, 0], [4, 4]])]
    merged = _merged(_rec(), _overlay(tmp_path, "object", depth="d/depth.npy", targets=Targets(objects=objs)))
    base = (tmp_path / "over").resolve()
    assert merged["depth"] == str(base / "d" / "depth.npy")
    masks = [o.get("mask") for o in merged["targets"]["objects"]]
    assert masks == [str(base / "masks" / "a.png"), "skimage://astronaut", linked, None]
    assert merged["image"] == "object_case_000.png" and merged["id"] == "object_case_000"
    assert merged["prompt"] == "a prompt"


def test_an_overlays_unset_fields_leave_the_releases_values(tmp_path):
    merged = _merged(_rec(), _overlay(tmp_path))
    assert merged["hfov_deg"] == 60.0  # the overlay's hfov_deg is None: not copied over
    assert "intrinsics" not in merged and "event" not in merged and "depth" not in merged
    assert merged["trajectories"] == [PRESET]


def test_an_overlay_without_a_source_resolves_against_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    over = _overlay(tmp_path, depth="depth.npy").model_copy(update={"source": None})
    assert _merged(_rec(), over)["depth"] == str((tmp_path / "depth.npy").resolve())


def test_a_case_lacks_annotations_only_when_its_family_needs_what_it_misses():
    persons = {"persons": [{"id": "p", "box": [0, 0, 1, 1]}]}
    assert _lacks_annotations({"family": "human", "targets": persons}) is False
    assert _lacks_annotations({"family": "human", "targets": {}}) is True
    assert _lacks_annotations({"family": "object", "targets": persons}) is True
    assert _lacks_annotations({"family": "dynamic", "event": {"action": "x"}}) is False
    assert _lacks_annotations({"family": "environment"}) is False


def test_stale_case_files_go_and_everything_else_stays(tmp_path):
    d = tmp_path / "cases"
    d.mkdir()
    for name in ("old_case.yaml", "old_case.png", "kept.yaml", "notes.txt", "Bad-Name.png"):
        (d / name).write_text("x")
    (d / "folder_case.yaml").mkdir()
    _remove_stale(d, {"kept.yaml"})
    assert sorted(p.name for p in d.iterdir()) == ["Bad-Name.png", "folder_case.yaml", "kept.yaml", "notes.txt"]
    _remove_stale(tmp_path / "absent", set())  # no folder: nothing to do
    assert not (tmp_path / "absent").exists()


# -- layout: iter_rows, _row, shown, ids, paths ---------------------------------------------------------------------

def _text_release(src: Path, n: int, row_group: int = 2, image_size=(8, 12)) -> list[Path]:
    rows = [MiniRow("dreamx-world", "environment", PRESET, f"case_{i:03d}", "x/video.mp4",
                    _png(i, image_size)) for i in range(n)]
    return write_rows(src, rows, row_group=row_group)


def test_rows_are_numbered_from_zero_within_their_file_and_read_images_by_default(tmp_path):
    files = _text_release(tmp_path, 3)
    got = list(iter_rows(files))
    assert [r.where for r in got] == [f"{FILE0}:0", f"{FILE0}:1", f"{FILE0}:2"]
    assert [r.case_id for r in got] == ["case_000", "case_001", "case_002"]
    assert got[0].image == _png(0)
    assert all(r.image is None for r in iter_rows(files, images=False))


def test_max_rows_counts_across_row_groups(tmp_path):
    files = _text_release(tmp_path, 4)  # two row groups of two
    assert [r.case_id for r in iter_rows(files, max_rows=3)] == ["case_000", "case_001", "case_002"]
    assert len(list(iter_rows(files, max_rows=2))) == 2
    assert list(iter_rows(files, max_rows=0)) == []


def _group_sizes(files, columns):
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(files[0]).metadata
    return [layout._group_bytes(meta, g, columns) for g in range(meta.num_row_groups)]


def _two_row_groups(src: Path, big_first: bool) -> tuple[list[Path], int, int]:
    """Four rows in two row groups of two, one of them with large first frames: (files, first's bytes, second's)."""
    rows = [MiniRow("dreamx-world", "environment", PRESET, f"case_{i:03d}", "x/video.mp4",
                    _png(i, (40, 40) if (i < 2) == big_first else (4, 4))) for i in range(4)]
    files = write_rows(src, rows, row_group=2)
    first, second = _group_sizes(files, list(COLUMNS))
    return files, first, second


def test_a_row_group_larger_than_the_bound_is_one_record_and_the_numbering_goes_on(tmp_path, monkeypatch):
    files, big, small = _two_row_groups(tmp_path / "src", big_first=True)
    assert big > small
    monkeypatch.setattr(layout, "MAX_ROW_GROUP_BYTES", small)  # exactly the second group's: that one is read
    got = list(iter_rows(files))
    assert [(r.where, r.count, r.problem is not None) for r in got] == [
        (f"{FILE0}:0", 2, True), (f"{FILE0}:2", 1, False), (f"{FILE0}:3", 1, False)]
    capped = list(iter_rows(files, max_rows=3))
    assert [(r.count, r.case_id) for r in capped] == [(2, ""), (1, "case_002")]
    assert [r.count for r in iter_rows(files, max_rows=1)] == [1]


def test_a_large_row_group_after_the_cap_is_not_reported(tmp_path, monkeypatch):
    files, small, big = _two_row_groups(tmp_path / "src", big_first=False)
    assert big > small
    monkeypatch.setattr(layout, "MAX_ROW_GROUP_BYTES", small)
    assert [r.case_id for r in iter_rows(files, max_rows=2)] == ["case_000", "case_001"]


def test_group_bytes_count_only_the_columns_read(tmp_path):
    files = _text_release(tmp_path, 2, image_size=(40, 40))
    assert _group_sizes(files, []) == [0]
    with_image = _group_sizes(files, ["first_frame"])[0]
    assert with_image > 40 * 40  # the image bytes (struct columns first_frame.bytes / .path)
    assert _group_sizes(files, list(COLUMNS))[0] > _group_sizes(files, list(COLUMNS[1:]))[0]


def test_a_rows_first_problem_is_the_one_named():
    rec = {"model_id": None, "category": 5, "trajectory": "t" * 65, "case_id": "c", "video_url": "v",
           "item_id": "i"}
    assert layout._row("f:0", rec, False).problem == "model_id is not a string (NoneType)"
    rec = {"model_id": "m", "category": "c", "trajectory": "t" * 65, "case_id": "c" * 65, "video_url": "v",
           "item_id": "i"}
    assert layout._row("f:0", rec, False).problem == "trajectory is 65 characters (at most 64)"
    rec["trajectory"], rec["case_id"] = "t" * 64, "c" * 64  # exactly the bound: fine
    row = layout._row("f:0", rec, False)
    assert row.problem is None and row.trajectory == "t" * 64


def test_shown_cuts_at_the_limit_and_takes_any_value():
    assert layout.shown("a" * 160) == "a" * 160
    assert layout.shown("a" * 161) == "a" * 160 + "...(+1 chars)"
    assert layout.shown(12345) == "12345"
    assert layout.shown("a\nb\u2028") == "a\\x0ab\\u2028"


def test_case_keys_are_at_most_96_characters():
    assert layout.valid_case_id("a" * 96)
    assert not layout.valid_case_id("a" * 97)


def test_odd_video_paths_are_not_refs():
    assert layout.parse_video_ref("") is None
    assert layout.parse_video_ref("environment/m/t/case_000/video.txt") is None
    assert layout.parse_video_ref("data/environment/m/t/case_000/video.mp4").case_id == "case_000"


def test_a_local_video_is_never_reached_by_an_absolute_or_dotted_path(tmp_path):
    src = tmp_path / "rel"
    f = src / "environment" / "m" / "t" / "c" / "video.mp4"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    rel = "environment/m/t/c/video.mp4"
    assert layout.local_video(src, rel) == src / rel
    assert layout.local_video(src, "data/" + rel) == src / rel
    assert layout.local_video(src, str(f)) is None
    assert layout.local_video(src, "../rel/" + rel) is None
    assert layout.local_video(src, "") is None


def test_hidden_parquet_files_are_skipped(tmp_path):
    files = _text_release(tmp_path, 1)
    (tmp_path / "data" / ".hidden.parquet").write_bytes(files[0].read_bytes())
    assert parquet_files(tmp_path) == files


# -- plan: summary, settings, resolve -------------------------------------------------------------------------------

def test_a_new_summary_counts_nothing():
    assert ImportSummary().to_dict() == {
        "rows": 0, "rows_in_release": 0, "not_read": 0, "videos": 0, "imported": 0, "unchanged": 0, "removed": 0,
        "flagged": 0, "kept_rows": 0, "camera_rows": 0, "camera_items": 0, "duplicate_rows": 0, "skipped_rows": 0,
        "trajectories": [], "problems": {}, "more_problems": {}}
    assert ImportSummary().seconds == []


def test_summary_lines_say_when_more_problems_exist_than_shown():
    s = ImportSummary()
    for i in range(3):
        s.add("unknown model id", f"m{i}", f"f:{i}")
    s.add("missing video", "v0", "f:9")
    s.add("missing video", "v1", "f:10")
    lines = s.lines(shown_per_kind=2)
    more = [ln for ln in lines if "... and more" in ln]
    assert more == ["  unknown model id: ... and more (release/import.json lists 3)"]
    assert sum("unknown model id: m" in ln for ln in lines) == 2
    assert not any("missing video: ..." in ln for ln in lines)  # exactly as many as shown: nothing more


def test_summary_subjects_past_the_cap_are_counted_and_announced():
    s = ImportSummary()
    for i in range(MAX_SUBJECTS + 1):
        s.add("bad", f"s{i:04d}", f"f:{i}")
    s.add("bad", f"s{MAX_SUBJECTS + 5:04d}", "f:x", rows=3)
    assert len(s.problems["bad"]) == MAX_SUBJECTS
    assert s.more["bad"].rows == 4 and s.more["bad"].first == f"f:{MAX_SUBJECTS}"
    assert s.skipped_rows() == MAX_SUBJECTS + 4
    s2 = ImportSummary()
    s2.problems["bad"] = dict(list(s.problems["bad"].items())[:2])
    s2.more["bad"] = s.more["bad"]
    assert any(ln == "  bad: ... and more (release/import.json lists 2)" for ln in s2.lines(shown_per_kind=2))


def test_summary_announces_subjects_past_the_cap_even_when_every_kept_one_is_shown():
    s = ImportSummary()
    s.problems["bad"] = {"s0": Problem(1, "f:0")}
    s.more["bad"] = Problem(7, "f:9")
    for shown_per_kind in (1, 2, MAX_SUBJECTS):
        more = [ln for ln in s.lines(shown_per_kind=shown_per_kind) if "... and more" in ln]
        assert more == ["  bad: ... and more (release/import.json lists 1)"], shown_per_kind


def test_summary_names_flagged_videos_only_when_there_are_some():
    s = ImportSummary()
    assert not any("do not follow their preset" in ln for ln in s.lines())
    s.flagged = 2
    assert any(ln.startswith("  2 video(s) do not follow their preset") for ln in s.lines())


def test_rows_of_one_subject_add_up_and_rows_not_read_are_named():
    s = ImportSummary()
    s.add("k", "same", "f:0")
    s.add("k", "same", "f:1", rows=2)
    assert (s.problems["k"]["same"].rows, s.problems["k"]["same"].first) == (3, "f:0")
    assert not any("not read" in ln for ln in s.lines())
    s.not_read, s.rows_in_release = 3, 10
    assert "  3 row(s) of 10 not read (release.limit / release.max_rows)" in s.lines()


def test_a_long_subject_is_cut_at_240_characters():
    s = ImportSummary()
    s.add("k", "x" * 241, "f:0")
    (subject,) = s.problems["k"]
    assert subject == "x" * 240 + "...(+1 chars)"


def test_the_release_settings_defaults_and_bounds():
    import pydantic

    d = ReleaseSettings()
    # docs/release.md: a field of view of 60 degrees unless one is measured, one measuring process, every row read
    assert (d.hfov_deg, d.workers, d.limit, d.max_rows, d.measure, d.evaluate) == (60.0, 1, None, 200_000, True, True)
    for ok in ({"hfov_deg": 1.5}, {"hfov_deg": 178.5}, {"limit": 1}, {"max_rows": 1}, {"workers": 1}):
        ReleaseSettings(**ok)
    for bad in ({"hfov_deg": 1.0}, {"hfov_deg": 179.0}, {"limit": 0}, {"max_rows": 0}, {"workers": 0}):
        with pytest.raises(pydantic.ValidationError):
            ReleaseSettings(**bad)


def test_settings_paths_expand_the_home_folder():
    home = Path.home()
    assert ReleaseSettings(overlay=Path("~/over")).overlay == home / "over"
    opts = ReleaseOptions(Path("~/rel"), overlay=Path("~/over"))
    assert (opts.source, opts.overlay) == (home / "rel", home / "over")


def test_release_models_must_map_strings_to_strings():
    from harness.sections import Invalid

    from evaluate.release.plan import _models

    assert _models({"a": "reference"}) == {"a": "reference"}
    assert _models("{a: reference}") == {"a": "reference"}
    for bad in ({"a": 1}, {1: "reference"}, {"a": "reference", "b": 2}, "[a, b]", "{a: [", 5):
        with pytest.raises(Invalid):
            _models(bad)


def _row(**kw) -> ReleaseRow:
    url = kw.pop("url", "https://huggingface.co/datasets/rescuerz/WorldMemBench/resolve/main/"
                        f"environment/dreamx-world/{PRESET}/case_010/video.mp4")
    vals = {"where": "f:0", "model_id": "dreamx-world", "category": "environment", "trajectory": PRESET,
            "case_id": "case_010", "video_url": url, "item_id": "i"}
    vals.update(kw)
    return ReleaseRow(**vals)


@pytest.fixture()
def planner(tmp_path):
    f = tmp_path / "environment" / "dreamx-world" / PRESET / "case_010" / "video.mp4"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    return Planner(_opts(tmp_path, models={"my-model": "no_such_model"}), ImportSummary())


def test_a_camera_row_resolves_to_its_environment_videos_case(planner):
    got = planner._resolve(_row(category="camera_rotation", case_id="case_040"))
    assert isinstance(got, dict)
    assert (got["case_key"], got["category"], got["model"]) == ("environment_case_010", "environment", "dreamx")


def test_a_model_id_mapped_to_no_known_model_is_unknown(planner):
    assert planner._resolve(_row(model_id="my-model"))[0] == "unknown model id"
    assert planner._resolve(_row(model_id="mystery-model"))[0] == "unknown model id"


@pytest.mark.parametrize("kw", [
    {"trajectory": "lrlrlr_sym_1dpf"},  # another trajectory than its video's
    {"category": "camera_rotation", "url": f"weird/dreamx-world/{PRESET}/case_010/video.mp4"},  # unknown folder
    {"category": "environment", "url": f"human/dreamx-world/{PRESET}/case_010/video.mp4"},  # another category
])
def test_a_row_pointing_at_a_video_it_cannot_play_is_inconsistent(planner, kw):
    assert planner._resolve(_row(**kw))[0] == "inconsistent row"


def test_a_url_of_another_shape_uses_the_rows_own_case(planner):
    got = planner._resolve(_row(url="elsewhere/clip.mp4"))
    assert got[0] == "missing video" and "elsewhere/clip.mp4" in got[1]


def test_rows_with_the_same_values_are_mapped_once_and_the_memo_holds_at_most_memo_rows(planner, monkeypatch):
    monkeypatch.setattr("evaluate.release.plan.MEMO_ROWS", 2)
    calls = []
    resolve = planner._resolve
    monkeypatch.setattr(planner, "_resolve", lambda row: calls.append(row.item_id) or resolve(row))
    for item_id in ("a", "a", "b", "c", "c"):
        planner._map(_row(item_id=item_id))
    assert calls == ["a", "b", "c", "c"]  # "c" came after the memo was full: mapped each time
    assert len(planner._memo) == 2


def test_plan_release_reads_at_most_the_limit(tmp_path):
    _text_release(tmp_path, 3)
    s = ImportSummary()
    plan_release(_opts(tmp_path, limit=2), s)
    assert (s.rows, s.rows_in_release, s.not_read) == (2, 3, 1)


# -- miniature ------------------------------------------------------------------------------------------------------

def test_video_paths_take_the_examples_prefix_only_when_asked():
    assert video_path("environment", "m", "t", "c") == "environment/m/t/c/video.mp4"
    assert video_path("environment", "m", "t", "c", examples=True) == "data/environment/m/t/c/video.mp4"


def test_write_rows_splits_rows_over_shards_and_records_the_image_feature(tmp_path):
    import pyarrow.parquet as pq

    rows = [MiniRow("m", "environment", PRESET, f"case_{i:03d}", "v.mp4", _png(i),
                    image_path="given.jpg" if i == 0 else None) for i in range(5)]
    paths = write_rows(tmp_path, rows, shards=2)
    assert paths == [tmp_path / "data" / "train-00000-of-00002.parquet",
                     tmp_path / "data" / "train-00001-of-00002.parquet"]
    tables = [pq.read_table(p) for p in paths]
    assert [t.num_rows for t in tables] == [3, 2]
    assert [d["path"] for d in tables[0].column("first_frame").to_pylist()] == ["given.jpg", "case_001.png",
                                                                                "case_002.png"]
    feats = json.loads(tables[0].schema.metadata[b"huggingface"])["info"]["features"]
    assert feats["first_frame"] == {"_type": "Image"}
    assert all(feats[c] == {"dtype": "string", "_type": "Value"} for c in COLUMNS[1:])


def test_write_rows_puts_256_rows_in_a_row_group_by_default(tmp_path):
    import pyarrow.parquet as pq

    img = _png(0, (2, 2))
    rows = [MiniRow("m", "environment", PRESET, f"case_{i:03d}", "v.mp4", img) for i in range(257)]
    (path,) = write_rows(tmp_path, rows)
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [256, 1]


@pytest.fixture(scope="module")
def two_videos(tmp_path_factory):
    from harness.video import VideoWriter

    d = tmp_path_factory.mktemp("vids")
    out = {}
    for name, first in (("lrlr_sym_0p75dpf", 0), ("lrlrlr_sym_1dpf", 255)):
        w = VideoWriter(d / f"{name}.mp4", fps=16)
        for v in (first, 255 - first, 255 - first):  # the first frame differs from the rest
            w(np.full((16, 16, 3), v, np.uint8))
        w.close()
        out[name] = d / f"{name}.mp4"
    return out


def test_miniature_defaults_write_two_cases_in_one_shard(tmp_path, two_videos):
    vids = {"lrlr_sym_0p75dpf": two_videos["lrlr_sym_0p75dpf"]}
    rows = miniature(tmp_path, vids)
    # per case: an environment row and its camera row; plus the unknown model's row and the missing video's
    assert len(rows) == 2 * 2 + 2
    assert [p.name for p in (tmp_path / "data").glob("*.parquet")] == ["train-00000-of-00001.parquet"]
    import cv2

    first = cv2.imdecode(np.frombuffer(rows[0].image, np.uint8), cv2.IMREAD_COLOR)
    assert first.mean() < 40  # the video's first frame (black), not a later one (white)


def test_miniature_extra_rows_use_the_first_preset_and_the_first_model(tmp_path, two_videos):
    rows = miniature(tmp_path, two_videos, models=("dreamx-world", "evoke"), cases=1)
    unknown = [r for r in rows if r.model_id == "mystery-model"]
    assert [r.trajectory for r in unknown] == ["lrlr_sym_0p75dpf"]
    assert (tmp_path / unknown[0].video).is_file()
    missing = [r for r in rows if r.case_id == "case_099"]
    assert [(r.model_id, r.trajectory) for r in missing] == [("dreamx-world", "lrlr_sym_0p75dpf")]
    assert missing[0].video == "environment/dreamx-world/lrlr_sym_0p75dpf/case_099/video.mp4"
    assert not (tmp_path / missing[0].video).exists()


# -- plan: the planner's grouping and refusals ----------------------------------------------------------------------

def _tree(root: Path, *cases: str) -> None:
    for c in cases:
        f = root / "environment" / "dreamx-world" / PRESET / c / "video.mp4"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")


def _url(case: str) -> str:
    return f"environment/dreamx-world/{PRESET}/{case}/video.mp4"


def test_an_items_key_is_its_own_row_else_the_first_camera_row_by_item_id():
    p = _plan("environment_case_000", "environment", [("camera_rotation", "f:0"), ("camera_rotation", "f:1")], "v")
    p.rows[0]["item_id"], p.rows[1]["item_id"] = "b/item", "a/item"
    assert p.item_id == "a/item"
    p.rows.append({"item_id": "z/item", "category": "Environment", "case_id": "c", "where": "f:2"})
    assert p.item_id == "z/item"


def test_one_video_claimed_by_two_items_is_refused_with_all_its_rows(tmp_path):
    _tree(tmp_path, "case_010")
    s = ImportSummary()
    pl = Planner(_opts(tmp_path), s)
    pl.add(_row(where="f:0", item_id="a", url=_url("case_010")))
    pl.add(_row(where="f:1", item_id="a", url=_url("case_010")))  # a duplicate
    pl.add(_row(where="f:2", item_id="b", model_id="evoke", url=_url("case_010")))  # another model: another item
    assert pl.finish() == {}
    (problem,) = s.problems["one video, two items"].values()
    assert (problem.rows, problem.first) == (3, "f:0")


def test_a_video_keeps_at_most_32_distinct_rows_and_names_the_rest(tmp_path):
    from evaluate.release.plan import MAX_ROWS_PER_VIDEO

    _tree(tmp_path, "case_010")
    s = ImportSummary()
    pl = Planner(_opts(tmp_path), s)
    for i in range(MAX_ROWS_PER_VIDEO + 1):
        pl.add(_row(where=f"f:{i}", category="camera_rotation", case_id=f"case_{100 + i}", item_id=f"i{i}",
                    url=_url("case_010")))
    (plan,) = pl.finish().values()
    assert len(plan.rows) == MAX_ROWS_PER_VIDEO
    (problem,) = s.problems["too many rows for one video"].values()
    assert (problem.rows, problem.first) == (1, f"f:{MAX_ROWS_PER_VIDEO}")


def test_an_item_id_on_two_videos_is_refused_from_both_with_the_duplicates_of_a_plan_it_empties(tmp_path):
    _tree(tmp_path, "case_010", "case_011")
    s = ImportSummary()
    pl = Planner(_opts(tmp_path), s)
    pl.add(_row(where="f:0", item_id="a", url=_url("case_010")))
    pl.add(_row(where="f:1", category="camera_rotation", case_id="case_040", item_id="X-1", url=_url("case_010")))
    pl.add(_row(where="f:2", category="camera_rotation", case_id="case_041", item_id="x_1", url=_url("case_010")))
    for w in ("f:3", "f:4", "f:5"):  # one row and two duplicates of it
        pl.add(_row(where=w, item_id="x_1", case_id="case_011", url=_url("case_011")))
    pl.add(_row(where="f:6", item_id="a", url=_url("case_010")))  # a duplicate on the plan that stays
    out = pl.finish()
    (plan,) = out.values()
    assert plan.case_key == "environment_case_010" and [r["item_id"] for r in plan.rows] == ["a"]
    problems = s.problems["one item_id, two videos"]
    # each plan names the item_id as its first row of it spells it, with that plan's rows (and the duplicates of
    # the plan it empties)
    assert {k: (p.rows, p.first) for k, p in problems.items()} == {"X-1": (2, "f:1"), "x_1": (1 + 2, "f:3")}


# -- write_cases ----------------------------------------------------------------------------------------------------

class _BadOverlay:
    """An overlay case whose annotations do not validate (a prompt that is not text)."""

    source = None

    def model_dump(self, **kw):
        return {"prompt": 5}


def test_a_case_file_is_written_in_its_fields_order_and_one_that_does_not_validate_is_refused(tmp_path):
    from evaluate.release.cases import write_cases

    src, out = tmp_path / "src", tmp_path / "cases"
    w = _release_of_rows(src, [("environment", "case_000", _png(1)), ("human", "case_001", _png(2))])
    plans = {1: _plan("environment_case_000", "environment", [("environment", w[0])], "v1"),
             2: _plan("human_case_001", "human", [("human", w[1])], "v2")}
    s = ImportSummary()
    got = write_cases(_opts(src), plans, out, s, {"human_case_001": _BadOverlay()})
    assert list(got) == ["environment_case_000"] and list(plans) == [1]
    text = (out / "environment_case_000.yaml").read_text()
    assert text.startswith("id: environment_case_000\nfamily: environment\nimage: environment_case_000.png\n")
    assert not (out / "human_case_001.yaml").exists() and not (out / "human_case_001.png").exists()
    (problem,) = s.problems["bad case"]
    assert problem.startswith("human_case_001: case file does not validate")


def test_planning_reads_no_image_so_image_bytes_never_make_a_row_group_too_large(tmp_path, monkeypatch):
    files = _text_release(tmp_path, 2, image_size=(40, 40))
    (text_only,) = _group_sizes(files, list(COLUMNS[1:]))
    assert _group_sizes(files, list(COLUMNS))[0] > text_only
    monkeypatch.setattr(layout, "MAX_ROW_GROUP_BYTES", text_only)  # the images would exceed it
    s = ImportSummary()
    plan_release(_opts(tmp_path), s)
    assert s.rows == 2 and "unreadable row" not in s.problems
    assert s.not_read == 0  # every row was read


def test_a_video_url_loses_its_query_and_fragment_and_a_ref_names_its_parts():
    url = "https://huggingface.co/datasets/rescuerz/W/resolve/main/environment/m/t/c/video.mp4?download=true#t=1"
    assert layout.video_relpath(url) == "environment/m/t/c/video.mp4"
    assert layout.video_relpath("environment/m/t/c/video.mp4?x=1") == "environment/m/t/c/video.mp4"
    ref = layout.parse_video_ref("environment/m/t/c/video.mp4")
    assert (ref.category, ref.model_id, ref.trajectory, ref.case_id) == ("environment", "m", "t", "c")


def test_a_root_path_finds_the_video_under_the_examples_data_folder(tmp_path):
    f = tmp_path / "data" / "environment" / "m" / "t" / "c" / "video.mp4"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"x")
    assert layout.local_video(tmp_path, "environment/m/t/c/video.mp4") == f


def test_only_regular_parquet_files_are_listed(tmp_path):
    import os

    files = _text_release(tmp_path, 1)
    (tmp_path / "data" / "notes.txt").write_text("x")
    os.mkfifo(tmp_path / "data" / "pipe.parquet")
    assert parquet_files(tmp_path) == files


def test_the_limits_are_the_ones_the_release_docs_state():
    """docs/release.md promises these numbers to users (a row's problem kinds, release.max_rows): they are stated
    here as numbers, not read from the code, so that a changed limit changes the docs too."""
    from evaluate.release.plan import MAX_ROWS_PER_VIDEO

    text = (Path(__file__).resolve().parents[3] / "docs" / "release.md").read_text()
    assert ("(`model_id`, `category`, `trajectory`, `case_id`: 64 characters; `item_id` 512; `video_url` 1024); a "
            "row group that decodes to more than 1 GB") in text
    assert layout.MAX_CHARS == {"model_id": 64, "category": 64, "trajectory": 64, "case_id": 64,
                                "video_url": 1024, "item_id": 512}
    assert layout.MAX_ROW_GROUP_BYTES == 2 ** 30
    assert "(200,000 by default" in text and layout.MAX_ROWS == 200_000
    assert "more than 32 distinct rows on one video" in text and MAX_ROWS_PER_VIDEO == 32
