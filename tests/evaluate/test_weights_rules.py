"""The weights store's rules one at a time (evaluate/weights.py): the root's precedence, a folder's status against
a contract, the integrity check of each file kind (safetensors, JSON, torch checkpoints, ONNX protobuf) with its
exact reason, the checksum comparison, and the pinned download with the Hugging Face client stood in for."""

from __future__ import annotations

import hashlib
import json
import pickle
import struct
import sys
import types
import zipfile
from pathlib import Path

import pytest

from evaluate import weights as w

# -- the root ---------------------------------------------------------------------------------------------------


def test_the_root_is_the_setting_then_the_environment_then_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WORLDMEM_WEIGHTS", "~/env-weights")
    assert w.weights_root("~/configured") == tmp_path / "home" / "configured"
    assert w.weights_root() == tmp_path / "home" / "env-weights"
    monkeypatch.setenv("WORLDMEM_WEIGHTS", "")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert w.weights_root() == tmp_path / "home" / ".cache" / "worldmem" / "weights"


def test_the_fetch_command_names_the_root_only_when_given(tmp_path):
    assert w.fetch_command("da3") == "python -m harness weights fetch da3"
    assert w.fetch_command("da3", tmp_path) == f"python -m harness weights fetch da3 --root {tmp_path}"


def test_a_contract_is_read_from_the_class_attributes():
    cls = types.SimpleNamespace(files=["a.bin"], hf_repo="r/x", revision="v", sha256=None, library="lib")
    assert w.WeightsContract.of(cls) == w.WeightsContract(("a.bin",), "r/x", "v", {}, "lib")
    assert w.WeightsContract.of(object) == w.WeightsContract()
    pinned = types.SimpleNamespace(files=("a.bin",), sha256={"a.bin": "ab"})
    assert w.WeightsContract.of(pinned).sha256 == {"a.bin": "ab"}
    assert w.WeightsContract.of(types.SimpleNamespace(files=None)).files == ()


def test_states_and_checksums_print_as_their_words():
    assert [str(s) for s in w.FolderState] == ["present", "missing", "unknown"]
    assert str(w.Checksum.UNCHECKED) == "-"
    st = w.BackboneStatus("x", Path("."), w.FolderState.PRESENT, w.WeightsContract())
    assert st.checksum_text == "-"
    st.checksum, st.mismatch_file = w.Checksum.CORRUPT, "a.bin"
    assert st.checksum_text == "corrupt:a.bin"
    st.checksum = w.Checksum.MISMATCH
    assert st.checksum_text == "mismatch:a.bin"


# -- a folder's status ------------------------------------------------------------------------------------------


def test_a_class_without_files_needs_none_and_an_unimportable_one_is_unknown(tmp_path):
    none = w.folder_status("j", tmp_path, w.WeightsContract())
    assert (none.state, none.missing, none.size, none.note) == (w.FolderState.PRESENT, [], 0, "")
    gone = w.folder_status("j", tmp_path, None, import_error="no module x")
    assert (gone.state, gone.missing, gone.note) == (w.FolderState.MISSING, ["(folder)"], "no module x")
    (tmp_path / "j").mkdir()
    assert w.folder_status("j", tmp_path, None, import_error="x").state is w.FolderState.MISSING  # empty folder
    (tmp_path / "j" / "f").write_bytes(b"12345")
    st = w.folder_status("j", tmp_path, None, import_error="x")
    assert (st.state, st.missing, st.size) == (w.FolderState.UNKNOWN, [], 5)


def test_a_listing_hashes_nothing(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "one.json").write_text("{}")
    st = w.folder_status("b", tmp_path, w.WeightsContract(("one.json",)))
    assert (st.state, st.sha256, st.checksum, st.size) == (w.FolderState.PRESENT, {}, w.Checksum.UNCHECKED, 2)


def test_missing_files_are_listed_and_nothing_is_hashed(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "one.json").write_text("{}")
    st = w.folder_status("b", tmp_path, w.WeightsContract(("one.json", "two.json")), hash_files=True)
    assert (st.state, st.missing, st.sha256, st.checksum) == (w.FolderState.MISSING, ["two.json"], {},
                                                             w.Checksum.UNCHECKED)


def test_a_corrupt_file_stops_the_hashing_and_is_named(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "a.json").write_text("{}")
    (tmp_path / "b" / "b.json").write_text("{not json")
    st = w.folder_status("b", tmp_path, w.WeightsContract(("a.json", "b.json")), hash_files=True)
    assert (st.checksum, st.mismatch_file, st.sha256) == (w.Checksum.CORRUPT, "b.json", {})
    assert st.note.startswith("b.json: not JSON (")


def test_a_folder_elsewhere_is_checked_in_place_of_ours(tmp_path):
    pack = tmp_path / "pack" / "m"
    pack.mkdir(parents=True)
    (pack / "a.json").write_text("[]")
    st = w.folder_status("b", tmp_path / "own", w.WeightsContract(("a.json",)), hash_files=True, folder=pack)
    assert st.dir == pack and st.sha256 == {"a.json": hashlib.sha256(b"[]").hexdigest()}


# -- checksums --------------------------------------------------------------------------------------------------


def test_pinned_checksums_win_over_the_download_record(tmp_path):
    (tmp_path / w.RECORD).write_text(json.dumps({"sha256": {"a": "1"}}))
    assert w._compare(tmp_path, w.WeightsContract(sha256={"a": "2"}), {"a": "2"}) == (w.Checksum.OK, None)
    assert w._compare(tmp_path, w.WeightsContract(), {"a": "2"}) == (w.Checksum.MISMATCH, "a")
    assert w._compare(tmp_path, w.WeightsContract(), {"a": "1", "b": "9"}) == (w.Checksum.OK, None)


def test_the_first_differing_file_in_name_order_is_named(tmp_path):
    got = {"z": "0", "b": "0", "m": "0"}
    assert w._compare(tmp_path, w.WeightsContract(sha256={"z": "1", "m": "1"}), got) == (w.Checksum.MISMATCH, "m")


def test_no_pin_and_no_record_is_unpinned_and_an_unreadable_record_a_mismatch(tmp_path):
    assert w._compare(tmp_path, w.WeightsContract(), {"a": "1"}) == (w.Checksum.UNPINNED, None)
    (tmp_path / w.RECORD).write_text("{broken")
    assert w._compare(tmp_path, w.WeightsContract(), {"a": "1"}) == (w.Checksum.MISMATCH,
                                                                    f"{w.RECORD} (unreadable)")


# -- file kinds -------------------------------------------------------------------------------------------------


def _st(tmp_path: Path, header: dict, data: bytes = b"", claim: int | None = None) -> Path:
    head = json.dumps(header).encode()
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", len(head) if claim is None else claim) + head + data)
    return p


def test_safetensors_are_checked_by_their_header_and_tensor_sizes(tmp_path):
    t = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "__metadata__": {"a": "b"}}
    assert w.file_problem(_st(tmp_path, t, b"\0" * 8)) is None
    n = len(json.dumps(t))
    assert w.file_problem(_st(tmp_path, t, b"\0" * 7)) == f"truncated: its tensors need {8 + n + 8} bytes, the " \
                                                          f"file has {8 + n + 7}"
    p = _st(tmp_path, t, claim=10 ** 9)
    assert w.file_problem(p) == (f"truncated or not safetensors: the header claims {10 ** 9} bytes, the file has "
                                 f"{p.stat().st_size}")
    p.write_bytes(b"\1\0\0")
    assert w.file_problem(p) == "truncated: 3 bytes, shorter than a safetensors header"
    p.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{x")
    assert w.file_problem(p) == "not safetensors: its header is not JSON"
    odd = {"w": {"data_offsets": [0, 8, 9]}, "v": "text", "u": {"data_offsets": "0-8"}}  # no usable offsets
    assert w.file_problem(_st(tmp_path, odd)) is None


def test_a_header_exactly_as_long_as_the_file_allows_is_read(tmp_path):
    head = b"{}"
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", len(head)) + head)
    assert w.file_problem(p) is None
    p.write_bytes(struct.pack("<Q", len(head) + 1) + head)
    assert w.file_problem(p) == "truncated or not safetensors: the header claims 3 bytes, the file has 10"


def test_a_header_is_never_longer_than_100_mib_whatever_the_file(tmp_path):
    p = tmp_path / "big.safetensors"
    with open(p, "wb") as f:  # a sparse file of 200 MiB: nothing is written past the claim
        f.write(struct.pack("<Q", (100 << 20) + 1))
        f.truncate(200 << 20)
    assert w.file_problem(p) == (f"truncated or not safetensors: the header claims {(100 << 20) + 1} bytes, the file "
                                 f"has {200 << 20}")


def test_the_last_tensor_end_counts_and_metadata_holds_no_tensor(tmp_path):
    t = {"a": {"data_offsets": [0, 8]}, "b": {"data_offsets": [8, 16]}, "__metadata__": {"data_offsets": [0, 99]}}
    n = len(json.dumps(t))
    assert w.file_problem(_st(tmp_path, t, b"\0" * 16)) is None
    assert w.file_problem(_st(tmp_path, t, b"\0" * 12)) == f"truncated: its tensors need {8 + n + 16} bytes, the " \
                                                            f"file has {8 + n + 12}"


def test_an_empty_file_of_any_kind_is_an_interrupted_download(tmp_path):
    for name in ("a.safetensors", "a.json", "a.bin", "a.txt"):
        (tmp_path / name).write_bytes(b"")
        assert w.file_problem(tmp_path / name) == "empty file (an interrupted download?)"


def test_json_must_parse_and_other_suffixes_are_not_read(tmp_path):
    (tmp_path / "c.JSON").write_bytes(b"\xff\xfe")
    assert w.file_problem(tmp_path / "c.JSON").startswith("not JSON (")
    (tmp_path / "c.txt").write_text("anything")
    assert w.file_problem(tmp_path / "c.txt") is None


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".pth", ".ckpt"])
def test_a_legacy_pickle_must_reach_its_stop(tmp_path, suffix):
    p = tmp_path / f"m{suffix}"
    data = pickle.dumps({"w": list(range(50))}, protocol=2)
    p.write_bytes(data)
    assert w.file_problem(p) is None
    p.write_bytes(data[:20])
    assert w.file_problem(p).startswith("a pickle cut short or damaged (")
    p.write_bytes(b"PK-not-really")
    assert w.file_problem(p) == "neither a zip archive nor a pickle (truncated?)"


def test_a_zip_checkpoint_must_hold_data_pkl(tmp_path):
    p = tmp_path / "m.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", b"x")
    assert w.file_problem(p) is None
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("data.pkl", b"x")
    assert w.file_problem(p) is None
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/other.pkl", b"x")
    assert w.file_problem(p) == "a zip archive without data.pkl: not a torch.save checkpoint"


def test_a_pickle_without_its_stop_opcode_is_truncated(tmp_path):
    p = tmp_path / "m.bin"
    p.write_bytes(b"\x80\x02N")  # protocol 2, None, and no STOP
    assert w.file_problem(p) in ("a pickle without its end (truncated?)",
                                 "a pickle cut short or damaged (ValueError: truncated?)")


# -- ONNX -------------------------------------------------------------------------------------------------------


def _key(field: int, wire: int) -> bytes:
    return _vint(field << 3 | wire)


def _vint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _onnx(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "m.onnx"
    p.write_bytes(data)
    return p


def test_an_onnx_model_holds_ir_version_and_graph_and_any_other_fields(tmp_path):
    ok = (_key(1, 0) + _vint(300) + _key(3, 1) + b"\0" * 8 + _key(4, 5) + b"\0" * 4 + _key(7, 2) + _vint(3)
          + b"abc")
    assert w.file_problem(_onnx(tmp_path, ok)) is None
    assert w.file_problem(_onnx(tmp_path, _key(1, 0) + _vint(7))) == "not an ONNX model: no graph"
    assert w.file_problem(_onnx(tmp_path, _key(2, 2) + _vint(1) + b"x")) == ("not an ONNX model: no ir_version "
                                                                              "and no graph")


@pytest.mark.parametrize("data, why", [
    (_key(1, 0) + _vint(8) + _key(7, 3), "not an ONNX model: the bytes at offset 2 are no protobuf field (wire type 3)"),
    (_key(0, 0) + b"\1", "not an ONNX model: the bytes at offset 0 are no protobuf field (wire type 0)"),
    (_key(1, 0) + b"\x80", "truncated: it ends inside field 1"),
    (b"\x80", "truncated: it ends inside a field's key (1 bytes)"),
    (_key(7, 2) + _vint(10) + b"abc", "truncated: field 7 needs 12 bytes, the file has 5"),
    (_key(7, 2) + b"\x80", "truncated: field 7 needs ? bytes, the file has 2"),
    (_key(1, 0) + _vint(1) + _key(3, 1) + b"\0" * 3, "truncated: field 3 runs past the end of the file (6 bytes)"),
    (_key(1, 0) + _vint(1) + _key(3, 5) + b"\0" * 2, "truncated: field 3 runs past the end of the file (5 bytes)"),
])
def test_a_damaged_onnx_file_is_refused_with_the_reason(tmp_path, data, why):
    assert w.file_problem(_onnx(tmp_path, data)) == why


def test_a_varint_of_more_than_ten_bytes_is_not_one():
    import io

    assert w._varint(io.BytesIO(b"\xff" * 10 + b"\x01")) is None
    assert w._varint(io.BytesIO(b"\xff" * 9 + b"\x01")) == (1 << 63) | ((1 << 63) - 1)
    assert w._varint(io.BytesIO(b"\xac\x02")) == 300


# -- the download -----------------------------------------------------------------------------------------------


@pytest.fixture
def hub(monkeypatch):
    """huggingface_hub stood in for: ``files`` is what a snapshot writes, ``error`` what it raises."""
    state = types.SimpleNamespace(files={}, error=None, calls=[])

    def snapshot_download(repo_id, revision, local_dir, allow_patterns):
        state.calls.append((repo_id, revision, local_dir, allow_patterns))
        if state.error:
            raise state.error
        for name, data in state.files.items():
            (Path(local_dir) / name).write_bytes(data)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=snapshot_download))
    return state


def test_a_backbone_without_a_pin_cannot_be_fetched(tmp_path):
    with pytest.raises(RuntimeError, match=r"backbone 'x' has no pinned hf_repo/revision; install its weights by hand "
                                           r"into .*/x \(see docs/evaluation.md\)"):
        w.download("x", w.WeightsContract(("a.json",), "r/x", None), tmp_path)
    with pytest.raises(RuntimeError, match=r"\(see the recipe\)"):
        w.download("x", w.WeightsContract(("a.json",), None, "v"), tmp_path, recipe="the recipe")


def test_a_download_records_each_files_checksum(tmp_path, hub):
    hub.files = {"a.json": b"{}"}
    root = tmp_path / "new" / "root"  # made with its parents
    d = w.download("x", w.WeightsContract(("a.json",), "r/x", "v1", {"a.json": hashlib.sha256(b"{}").hexdigest()}),
                   root)
    assert d == root / "x" and hub.calls == [("r/x", "v1", str(d), ["a.json"])]
    assert w.download("x", w.WeightsContract(("a.json",), "r/x", "v1"), root) == d  # again: the folder is there
    assert json.loads((d / w.RECORD).read_text()) == {"hf_repo": "r/x", "revision": "v1",
                                                      "sha256": {"a.json": hashlib.sha256(b"{}").hexdigest()}}
    w.download("y", w.WeightsContract((), "r/y", "v1"), tmp_path)
    assert hub.calls[-1][3] is None  # no file list: the whole snapshot


def test_a_failed_download_says_how_to_go_on(tmp_path, hub):
    hub.error = OSError("offline")
    with pytest.raises(RuntimeError) as exc:
        w.download("x", w.WeightsContract(("a.json",), "r/x", "v1"), tmp_path)
    assert str(exc.value) == (f"fetching 'x' (r/x@v1) failed: OSError: offline. Re-run on a machine with internet "
                              f"access (the download resumes), or copy the folder to {tmp_path / 'x'}")


def test_a_download_missing_a_file_or_with_a_wrong_checksum_is_refused(tmp_path, hub):
    hub.files = {"a.json": b"{}"}
    with pytest.raises(RuntimeError, match=r"^x: downloaded, but b.json is missing in "):
        w.download("x", w.WeightsContract(("a.json", "b.json"), "r/x", "v1"), tmp_path)
    with pytest.raises(RuntimeError, match=r"^x: checksum mismatch for .*a.json \(expected 00, got [0-9a-f]{64}\)$"):
        w.download("x", w.WeightsContract(("a.json",), "r/x", "v1", {"a.json": "00"}), tmp_path)
    assert not (tmp_path / "x" / w.RECORD).exists()


def test_without_the_hub_client_the_extra_is_named(tmp_path, monkeypatch):
    from harness.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(MissingDependencyError, match="eval"):
        w.download("x", w.WeightsContract(("a.json",), "r/x", "v1"), tmp_path)


# -- the release's weights pack (evaluate/weights_pack.py) ------------------------------------------------------


@pytest.mark.parametrize("value, why", [
    ("abc", "expected a list of folder names"), (["a", ""], "expected a list of folder names"),
    (["a", " "], "expected a list of folder names"), (["a", 3], "expected a list of folder names"),
    (["/abs"], "'/abs' must be a relative folder name inside the pack"),
    (["a/../../b"], "'a/../../b' must be a relative folder name inside the pack"),
])
def test_a_table_names_relative_folders_only(value, why):
    from evaluate.weights_pack import _names
    from harness.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        _names(value, "where")
    assert str(exc.value) == f"where: {why}"
    assert _names(None, "where") == () and _names(["a", "b/c"], "where") == ("a", "b/c")


def _table(tmp_path: Path, text: str) -> dict:
    from evaluate.weights_pack import load_table

    p = tmp_path / "map.yaml"
    p.write_text(text)
    return load_table(p)


def test_a_users_table_adds_backbones_and_environment(tmp_path):
    t = _table(tmp_path, "backbones:\n  newone: {models: [m1]}\n  vipe: {env: {EXTRA: 'x'}}\n")
    assert t["newone"].models == ("m1",) and t["newone"].metrics == ()
    assert t["vipe"].env["EXTRA"] == "x" and "dinov2" in t


@pytest.mark.parametrize("ident", ["[x]", "{file: c.json}", "{key: k}", "{file: 1, key: k}", "{file: c.json, key: 2}"])
def test_an_identify_rule_needs_a_file_and_a_key_and_names_the_users_file(tmp_path, ident):
    from harness.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        _table(tmp_path, f"backbones:\n  dinov2: {{identify: {ident}}}\n")
    assert str(exc.value).startswith(f"{tmp_path / 'map.yaml'}: backbones.dinov2.identify: expected {{file: ")


def test_a_pack_layout_is_recognised_by_the_table_it_is_given(tmp_path):
    from evaluate.weights_pack import PackEntry, looks_like_pack

    (tmp_path / "models" / "custom-name").mkdir(parents=True)
    table = {"t": PackEntry("t", models=("custom-name",))}
    assert looks_like_pack(tmp_path, table) and not looks_like_pack(tmp_path)  # the built-in table has no such name


def test_a_pack_reached_through_a_linked_root_keeps_its_inner_links(tmp_path):
    import os

    from evaluate.weights_pack import WeightsPack

    real = tmp_path / "real-pack"
    (real / "models" / "m").mkdir(parents=True)
    (real / "models" / "m" / "w.bin").write_bytes(b"x")
    (real / "metrics").mkdir()
    os.symlink("../models/m", real / "metrics" / "m")
    os.symlink(real, tmp_path / "pack")  # the root itself is a link
    p = WeightsPack(tmp_path / "pack")
    assert p.inside(tmp_path / "pack" / "metrics" / "m") and p.inside(tmp_path / "pack" / "metrics" / "m" / "w.bin")
    assert not p.inside(tmp_path)


def _pack(root: Path, entries: dict) -> "object":
    from evaluate.weights_pack import PackEntry, WeightsPack

    return WeightsPack(root, table={n: PackEntry(n, **kw) for n, kw in entries.items()})


def _file(p: Path, data: bytes = b"x") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_the_pack_root_is_inside_itself():
    from evaluate.weights_pack import WeightsPack

    p = WeightsPack(Path("/tmp"))
    assert p.inside(Path("/tmp")) and p.inside(Path("/tmp/a")) and not p.inside(Path("/tmpx"))


def test_a_top_folder_that_leads_out_is_refused_and_a_missing_one_is_not_indexed(tmp_path):
    import os

    out = tmp_path / "elsewhere"
    _file(out / "w.bin")
    (tmp_path / "pack").mkdir()
    os.symlink(out, tmp_path / "pack" / "models")
    p = _pack(tmp_path / "pack", {})
    assert p.index() == {} and p.refused == {"models": str(out)}


def test_folders_are_indexed_eight_levels_deep_and_a_link_cycle_once(tmp_path):
    import os

    root = tmp_path / "pack"
    deep = root / "models" / "d2" / "d3" / "d4" / "d5" / "d6" / "d7" / "d8"
    _file(deep / "w.bin")
    _file(deep / "d9" / "w.bin")
    os.symlink("..", root / "models" / "d2" / "loop")  # back to models/
    idx = _pack(root, {}).index()
    assert "models/d2/d3/d4/d5/d6/d7/d8" in idx and idx["models/d2/d3/d4/d5/d6/d7/d8"]["w.bin"] == "file"
    assert not any(k.endswith("/d9") for k in idx) and not any("loop/" in k for k in idx)


def test_a_link_that_cannot_be_followed_is_broken_and_named(tmp_path):
    import os

    root = tmp_path / "pack"
    _file(root / "models" / "m" / "w.bin")
    os.symlink("w.bin/inner", root / "models" / "m" / "bad")  # through a file: not a directory
    os.symlink("nothing-here", root / "models" / "m" / "dangling")
    p = _pack(root, {})
    entries = p.index()["models/m"]
    assert entries == {"w.bin": "file", "bad": "broken"}  # a dangling link is as if absent
    assert p.broken == {"models/m/bad": "unreadable (Not a directory)"}


def test_a_table_folder_holding_a_link_out_is_refused_not_skipped(tmp_path):
    import os

    from evaluate.weights_pack import PackLinkError

    root = tmp_path / "pack"
    _file(tmp_path / "out" / "w.bin")
    (root / "models" / "m-x").mkdir(parents=True)
    os.symlink(tmp_path / "out" / "w.bin", root / "models" / "m-x" / "w.bin")
    p = _pack(root, {"x": {"models": ("m-x",)}})
    with pytest.raises(PackLinkError, match="models/m-x/w.bin is a link to"):
        p.locate("x", ("w.bin",))
    assert _pack(root, {}).locate("x", ("w.bin",)) is None  # the open search passes over it


@pytest.mark.parametrize("link", ["metrics/mx", "metrics"])
def test_a_table_folder_that_is_or_lies_under_a_link_out_is_refused(tmp_path, link):
    import os

    from evaluate.weights_pack import PackLinkError

    root = tmp_path / "pack"
    _file(root / "models" / "m" / "w.bin")
    _file(tmp_path / "out" / "mx" / "w.bin")
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(tmp_path / "out" / ("mx" if link == "metrics/mx" else ""), root / link)
    with pytest.raises(PackLinkError, match=f"{link} is a link to"):
        _pack(root, {"x": {"metrics": ("mx",)}}).locate("x", ("w.bin",))


def test_the_table_folder_itself_is_found_via_the_table(tmp_path):
    root = tmp_path / "pack"
    _file(root / "models" / "m-x" / "w.bin")
    m = _pack(root, {"x": {"models": ("m-x",)}}).locate("x", ("w.bin",))
    assert (m.dir, m.via, m.files) == (root / "models" / "m-x", "models/m-x (table)", {"w.bin": "models/m-x/w.bin"})


def test_the_snapshot_of_the_pinned_revision_comes_first(tmp_path):
    root = tmp_path / "pack"
    for rev in ("aaa", "zzz"):
        _file(root / "models" / "m-x" / "snapshots" / rev / "w.bin")
    p = _pack(root, {"x": {"models": ("m-x",)}})
    assert p.locate("x", ("w.bin",), revision="zzz").dir.name == "zzz"
    assert p.locate("x", ("w.bin",)).dir.name == "aaa"


def test_a_folder_where_a_weights_name_is_a_folder_is_not_a_match(tmp_path):
    root = tmp_path / "pack"
    _file(root / "models" / "m-x" / "a.bin")
    (root / "models" / "m-x" / "b.bin").mkdir()
    assert _pack(root, {"x": {"models": ("m-x",)}}).locate("x", ("a.bin", "b.bin")) is None


@pytest.mark.parametrize("config, ident, found", [
    (b'{"model_type": "dinov2"}', {"file": "config.json", "key": "model_type"}, True),  # no values: any
    (b'{"model_type": "sam2"}', {"file": "config.json", "key": "model_type", "values": ["dinov2"]}, False),
    (b'["model_type"]', {"file": "config.json", "key": "model_type"}, False),  # not a mapping
    (b'{not json', {"file": "config.json", "key": "model_type"}, False),
    (b'{"other": 1}', {"file": "config.json", "key": "model_type"}, False),
])
def test_an_identify_rule_reads_the_folders_json(tmp_path, config, ident, found):
    root = tmp_path / "pack"
    _file(root / "models" / "m-x" / "w.bin")
    _file(root / "models" / "m-x" / "config.json", config)
    m = _pack(root, {"x": {"models": ("m-x",), "identify": ident}}).locate("x", ("w.bin",))
    assert (m is not None) == found


def test_what_a_pack_partly_holds_is_said_folder_by_folder(tmp_path):
    root = tmp_path / "pack"
    _file(root / "models" / "m-x" / "a.bin")
    _file(root / "models" / "m-x" / "sub" / "b.bin")
    _file(root / "models" / "other" / "a.bin")
    p = _pack(root, {"x": {"models": ("m-x",)}})
    assert p.partial("x", ("a.bin", "b.bin")) == ["models/m-x/ has a.bin", "models/m-x/sub/ has b.bin"]
    assert p.partial("unknown", ("a.bin",)) == []
    ident = {"file": "config.json", "key": "model_type", "values": ["dinov2"]}
    q = _pack(root, {"x": {"models": ("m-x",), "identify": ident}})
    assert q.partial("x", ("a.bin", "b.bin")) == ["models/m-x/ has a.bin", "models/m-x/sub/ has b.bin"]
    assert q.partial("x", ("a.bin",)) == ["models/m-x/ has them, but its config.json is not model_type=dinov2: "
                                          "another model"]


def _cache(root: Path, home: str, rev: str = "c" * 40) -> Path:
    return _file(root / home / "hub" / "models--ex--m" / "snapshots" / rev / "model.bin")


def test_a_cache_is_a_snapshot_holding_a_file(tmp_path):
    root = tmp_path / "pack"
    snap = _cache(root, "models/hf-x").parent
    (snap / "sub").mkdir()  # a folder beside the file: still a snapshot with files
    p = _pack(root, {"x": {"hf_cache": ("models/hf-x",), "env": {"HF_HOME": "{hf_cache}"}}})
    c = p.cache("x")
    assert c.home == "models/hf-x" and c.snapshots == [f"models/hf-x/hub/models--ex--m/snapshots/{'c' * 40}"]
    assert c.env == {"HF_HOME": str(root / "models/hf-x")}
    assert _pack(root, {"x": {"models": ("m",)}}).cache("x") is None and p.cache("unknown") is None


@pytest.mark.parametrize("link", ["models/hf-x", "models/hf-x/hub"])
def test_a_cache_that_is_or_holds_a_link_out_is_refused(tmp_path, link):
    import os

    from evaluate.weights_pack import PackLinkError

    root = tmp_path / "pack"
    _cache(tmp_path / "out", "c")
    _file(root / "models" / "keep" / "w.bin")
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(tmp_path / "out" / "c" / ("hub" if link.endswith("hub") else ""), root / link)
    with pytest.raises(PackLinkError, match=f"{link} is a link to"):
        _pack(root, {"x": {"hf_cache": ("models/hf-x",)}}).cache("x")


def test_a_cache_under_a_top_folder_that_leads_out_is_refused(tmp_path):
    import os

    from evaluate.weights_pack import PackLinkError

    root = tmp_path / "pack"
    _cache(tmp_path / "out", "hf-x")
    root.mkdir()
    os.symlink(tmp_path / "out", root / "models")
    with pytest.raises(PackLinkError, match="models is a link to"):
        _pack(root, {"x": {"hf_cache": ("models/hf-x",)}}).cache("x")
