"""The item record (harness/record.py): one typed record of what ``meta.json`` holds, one writer for generated,
supplied and imported items, the manifest row derived from it, and a static check that no fourth place builds one."""

from __future__ import annotations

import ast
import json

import pytest

from harness.io import json_text
from harness.outputs import ManifestRow, WorkItem
from harness.record import META_FILE, ItemRecord, RecordError, SharedText, read_record, write_record
from tests.support import ROOT, compose

ITEM = WorkItem("m", "fullkv", 1, "lrlr", "c1")
SOURCES = ("harness", "adapters", "evaluate", "trajectories", "hydra_plugins")
#: the keys that make a mapping an item record (identity and files); a literal holding three of them, one of them
#: ``status`` or ``item``, is a record built by hand
RECORD_KEYS = frozenset({"status", "item", "case", "fingerprint", "fingerprint_parts", "camera", "video", "controls",
                         "generation", "scored_as", "source", "release", "manifest", "seed_source", "owner_token"})
#: functions and methods that write a file (harness.io's writers, and the stdlib's)
WRITERS = frozenset({"write_json", "write_text", "write_bytes", "write_sealed_json", "atomic_path", "open_stream",
                     "copy_file", "link_file", "replace", "dump", "save", "symlink_to", "rename"})


def _names_meta_file(node: ast.AST) -> bool:
    """The expression mentions the record's file: the string ``meta.json`` or the constant ``META_FILE``."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith("meta.json"):
            return True
        if isinstance(n, ast.Name) and n.id == "META_FILE" or isinstance(n, ast.Attribute) and n.attr == "META_FILE":
            return True
    return False


def _writes_meta(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name == "open":
        mode = [a.value for a in [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "mode")]
                if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        return bool(mode) and any(c in mode[0] for c in "wax+") and _names_meta_file(call.args[0])
    if name not in WRITERS:
        return False
    target = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(func, ast.Attribute):  # (d / "meta.json").write_text(...)
        target.append(func.value)
    return any(_names_meta_file(a) for a in target)


def _record_literal(node: ast.AST) -> bool:
    keys: set[str] = set()
    if isinstance(node, ast.Dict):
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        keys = {k.arg for k in node.keywords if k.arg}
    hits = keys & RECORD_KEYS
    return len(hits) >= 3 and bool(hits & {"status", "item"})


def record_builders(source: str, filename: str = "<src>") -> list[str]:
    """``line: why`` of every place in ``source`` that writes ``meta.json`` or builds a record as a literal."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and _writes_meta(node):
            out.append(f"{filename}:{node.lineno}: writes meta.json")
        if _record_literal(node):
            out.append(f"{filename}:{node.lineno}: builds an item record as a literal")
    return out


def test_the_scan_sees_a_hand_built_record_and_a_direct_write():
    """The check can fail: main's three writers before the record (a literal written with write_json, one spliced
    into write_text, a Path.write_text) are each caught; reading meta.json and the record's own code are not."""
    old = ('def f(d, item, case, p):\n'
           '    meta = {"status": "done", "item": item.to_dict(), "case": case.model_dump(), "video": {}}\n'
           '    write_json(d / "meta.json", meta)\n'
           '    write_text(item_dir / "meta.json", text, scrubbed=True)\n'
           '    (d / "meta.json").write_text(json.dumps(m))\n'
           '    with open(d / "meta.json", "w") as fh:\n        fh.write("{}")\n'
           '    m = dict(status="failed", item=i, case=c, error="x")\n')
    found = record_builders(old)
    assert [f.split(": ", 1)[1] for f in found].count("writes meta.json") == 4
    assert sum("literal" in f for f in found) == 2
    reads = ('def g(d):\n    m = read_json(d / "meta.json")\n    with open(d / "meta.json") as fh:\n'
             '        return json.load(fh), {"status": 1, "item": 2}, {"video": 1, "camera": 2, "scored_as": 3}\n')
    assert record_builders(reads) == []


def test_meta_json_is_built_and_written_in_one_place():
    """Every ``meta.json`` is an :class:`ItemRecord` written by :func:`harness.record.write_record`: no other
    source file writes that file or builds a record as a literal (the runner, evaluate/external.py and the release
    importer each did before)."""
    found = []
    for top in SOURCES:
        for f in sorted((ROOT / top).rglob("*.py")):
            if f == ROOT / "harness" / "record.py":
                continue
            found += record_builders(f.read_text(), str(f.relative_to(ROOT)))
    assert not found, "\n".join(found)


def _record(**kw) -> ItemRecord:
    base = dict(status="done", item=ITEM, case={"id": "c1"}, model={"name": "m"}, seed=1)
    return ItemRecord(**{**base, **kw})


def test_the_file_is_the_record_in_field_order_without_absent_fields(tmp_path):
    rec = _record(fingerprint="fp", camera={"spec_hash": "s", "num_frames": 3, "fps": 16.0, "phases": {"V": [0, 3]}},
                  video={"sha256": "v"}, controls={"sha256": {}}, schema_version=2)
    rec.manifest = rec.manifest_row()
    write_record(tmp_path, rec)
    text = (tmp_path / META_FILE).read_text()
    data = json.loads(text)
    assert list(data) == ["schema_version", "status", "item", "fingerprint", "case", "model", "seed", "controls",
                          "camera", "video", "manifest"]
    assert data["item"] == {"model": "m", "context": "fullkv", "seed": 1, "trajectory": "lrlr", "case_id": "c1"}
    assert text == json_text(data)  # what harness.io.write_json writes
    back = read_record(tmp_path)
    assert back == rec and json_text(back.to_dict()) == text  # read back to the same bytes
    assert data["manifest"] == ManifestRow.from_dict(data["manifest"]).to_dict()
    assert data["manifest"]["num_frames"] == 3 and "external" not in data["manifest"]


def test_shared_values_are_spliced_to_the_same_bytes(tmp_path):
    """The runner's shared texts (serialised once a run) give exactly what serialising the record in one go does,
    also when a shared value holds a secret-looking string and when a value is not shared."""
    config = {"a": [1, {"b": "x"}], "token": "hf_" + "A" * 34}
    versions = {"python": "3"}
    shared = SharedText(config, versions)
    for rec in (_record(config=config, versions=versions, argv=["x"]), _record(config=dict(config))):
        write_record(tmp_path, rec, shared)
        twice = shared.text(rec)
        write_record(tmp_path / "plain", rec)
        assert (tmp_path / META_FILE).read_text() == twice == (tmp_path / "plain" / META_FILE).read_text()
        assert "A" * 34 not in twice  # scrubbed


def test_a_stored_record_reads_back_typed_or_is_refused_naming_the_field():
    data = _record(video={"sha256": "v"}).to_dict()
    rec = ItemRecord.from_dict({**data, "written_by_a_later_version": 1})
    assert rec.item == ITEM and rec.extra == {"written_by_a_later_version": 1}
    assert list(rec.to_dict())[-1] == "written_by_a_later_version"
    for key, bad in (("video", "x"), ("seed", True), ("status", 3), ("finished_unix", "t"), ("argv", {})):
        with pytest.raises(RecordError, match=f"'{key}' is a "):
            ItemRecord.from_dict({**data, key: bad})
    assert ItemRecord.from_dict({**data, "finished_unix": 5}).finished_unix == 5  # an int is a number
    with pytest.raises(RecordError, match="status='sleeping', expected one of"):
        ItemRecord.from_dict({**data, "status": "sleeping"})
    with pytest.raises(RecordError, match="'item' is missing"):
        ItemRecord.from_dict({k: v for k, v in data.items() if k != "item"})
    with pytest.raises(RecordError, match="not a work item"):
        ItemRecord.from_dict({**data, "item": {**data["item"], "case_id": "../x"}})
    with pytest.raises(RecordError, match="not a JSON object"):
        ItemRecord.from_dict([data])


def test_the_manifest_row_is_derived_and_marks_a_video_made_elsewhere():
    row = _record(source={"video": "v.mp4"}, camera={"spec_hash": "s", "num_frames": 9, "fps": 8.0}).manifest_row()
    assert row.extra == {"external": True} and row.to_dict()["external"] is True
    assert (row.key, row.dir, row.video, row.num_frames, row.fps, row.spec_hash) == (ITEM.key, ITEM.key,
                                                                                    "video.mp4", 9, 8.0, "s")
    failed = _record(status="failed", error="boom").manifest_row()
    assert failed.video is None and failed.error == "boom" and failed.extra == {}


def test_a_generated_item_reads_back_to_its_own_bytes(tmp_path):
    """A dry run's records (the runner's spliced writer) are records: read back, they serialise to the very bytes
    of the file, and the manifest holds the row each derives."""
    from harness.app.runner import plan_from_config, run_items
    from harness.outputs import RunDir

    cfg = compose(["cases.include=[environment_rocket]", "trajectory=lrlr", f"output_root={tmp_path}", "run=r",
                   "model.height=96", "model.width=160", "model.num_frames=65", "progress=false"])
    run_items(plan_from_config(cfg), dry_run=True, progress=False)
    metas = sorted(tmp_path.rglob(META_FILE))
    assert len(metas) == 1
    text = metas[0].read_text()
    rec = ItemRecord.from_dict(json.loads(text))
    assert rec.status == "compiled" and rec.extra == {} and json_text(rec.to_dict()) == text
    assert rec.manifest is not None and rec.manifest == rec.manifest_row()
    assert RunDir(tmp_path / "r").rows() == [rec.manifest]


def test_a_path_that_is_no_record_reads_as_none(tmp_path):
    assert read_record(tmp_path) is None
    (tmp_path / META_FILE).write_text('{"status": "done"}')
    assert read_record(tmp_path) is None
    (tmp_path / META_FILE).write_text("{")
    assert read_record(tmp_path) is None


def test_a_video_made_elsewhere_gets_its_files_facts(tmp_path):
    """``made_elsewhere``: done, the camera facts of its path with ``camera.npz``'s own hash, the video facts
    given, no controls, nothing generated, and a row marked external."""
    from harness.io import sha256_file
    from trajectories import load_path

    cfg = compose(["cases.include=[environment_rocket]", "trajectory=lrlr", f"output_root={tmp_path}", "run=r",
                   "model.height=96", "model.width=160", "model.num_frames=65", "progress=false"])
    from harness.app.runner import plan_from_config, run_items

    run_items(plan_from_config(cfg), dry_run=True, progress=False)
    d = next(tmp_path.rglob("camera.npz")).parent
    path = load_path(d / "camera.npz")
    rec = ItemRecord.made_elsewhere(ITEM, d, case={"id": "c1"}, model={"name": "m"}, path=path,
                                    source={"video": "/x.mp4", "manifest": "/m.json"},
                                    video={"sha256": "v", "size": 3, "num_frames": 65})
    assert rec.status == "done" and rec.supplied and rec.generation == {} and rec.seed == ITEM.seed
    assert rec.camera is not None and rec.camera["sha256"] == sha256_file(d / "camera.npz")
    assert rec.camera["spec_hash"] == path.spec_hash() and rec.camera["num_frames"] == path.num_frames
    assert rec.video == {"file": "video.mp4", "sha256": "v", "size": 3, "num_frames": 65}
    assert rec.controls is not None and rec.controls["sha256"] == {
        p.name: sha256_file(p) for p in sorted((d / "controls").iterdir()) if not p.name.startswith(".")}
    assert rec.manifest == rec.manifest_row() and rec.manifest.extra == {"external": True}
    assert rec.manifest.phases == path.meta()["phases"]
