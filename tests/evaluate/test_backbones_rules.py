"""The backbone registry's rules one at a time, in process (evaluate/backbones.py): name and role checks, a class
reference, the status of our folder against the release's weights pack, the weights fingerprint, the timed
forwards, a loaded set's clock, options, pack environment, errors raised again and provenance. The backbones are
tiny classes registered for the test; the packs are folders in the layout evaluate/weights_pack.py reads."""

from __future__ import annotations

import hashlib
import sys
import time
import types
from pathlib import Path

import pytest

from evaluate import backbones as bbs
from evaluate.perception.base import BackboneUnavailable
from evaluate.weights import Checksum, FolderState, fetch_command
from evaluate.weights_pack import HOW_TO_GET, PACK_ENV, PackEntry, PackLinkError, WeightsPack
from harness.errors import ConfigError

MODULE = "tiny_backbone_rules"


class Learned:
    """A learned backbone: one weights file; ``load`` records what it was given."""

    name, kind, hf_repo, revision = "tiny", "paper", "example/tiny", "r" * 40
    files, library, recipe = ("w.txt",), "plain-text", "a test"
    seen: dict = {}

    @classmethod
    def load(cls, weights_dir: Path, device: str, scale: int = 1) -> "Learned":
        Learned.seen = {"dir": weights_dir, "device": device, "scale": scale}
        return cls()

    def encode(self, x):
        return 2 * x


class WantsPackEnv(Learned):
    @classmethod
    def load(cls, weights_dir: Path, device: str, pack_env=None) -> "WantsPackEnv":
        Learned.seen = {"pack_env": pack_env}
        return cls()


class NoFiles(Learned):
    files = ()


class FileMissingAtLoad(Learned):
    @classmethod
    def load(cls, weights_dir: Path, device: str) -> "FileMissingAtLoad":
        raise FileNotFoundError("extra.bin is missing")


class Corrupt(ValueError):
    def __init__(self, msg: str, file: str):
        super().__init__(msg)
        self.file = file


class CorruptAtLoad(Learned):
    @classmethod
    def load(cls, weights_dir: Path, device: str) -> "CorruptAtLoad":
        raise Corrupt("w.txt is corrupt", file="w.txt")


class BrokenLoad(Learned):
    @classmethod
    def load(cls, weights_dir: Path, device: str) -> "BrokenLoad":
        raise TypeError("a bug inside load")


class Shipped:
    """A packaged (non-learned) backbone: real weights inside an installed package."""

    name = "shipped-label"

    def provenance(self) -> dict:
        return {"library": "shiplib", "sha256": {"model.dat": "ab" * 32}}


class Plain:
    """A non-learned backbone without ``from_settings``."""

    def score(self, x):
        return x


@pytest.fixture
def reg(monkeypatch, tmp_path):
    """The classes above registered under their names; no pack from the machine's environment."""
    mod = types.ModuleType(MODULE)
    for c in (Learned, WantsPackEnv, NoFiles, FileMissingAtLoad, CorruptAtLoad, BrokenLoad, Shipped, Plain):
        setattr(mod, c.__name__, c)
    monkeypatch.setitem(sys.modules, MODULE, mod)
    for k in ("WORLDMEM_WEIGHTS", PACK_ENV, "WORLDMEM_PACK_MAP"):
        monkeypatch.delenv(k, raising=False)
    specs = {
        "tiny": ("Learned", True, False), "wants-env": ("WantsPackEnv", True, False),
        "no-files": ("NoFiles", True, False), "fnf": ("FileMissingAtLoad", True, False),
        "corrupt": ("CorruptAtLoad", True, False), "broken": ("BrokenLoad", True, False),
        "shipped": ("Shipped", False, True), "plain": ("Plain", False, False),
    }
    out = {}
    for name, (cls, learned, packaged) in specs.items():
        out[name] = bbs.BackboneSpec(name, f"{MODULE}:{cls}", "paper", ("encoder",), learned, f"{name} for tests",
                                     packaged=packaged)
        monkeypatch.setitem(bbs.BACKBONES, name, out[name])
    Learned.seen = {}
    return out


def _own(root: Path, name: str = "tiny", text: str = "weights") -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "w.txt").write_text(text)
    return d


def _pack(root: Path, names: tuple[str, ...] = ("tiny", "wants-env"), cache: bool = True,
          held: bool = False) -> WeightsPack:
    """A pack whose table gives each of ``names`` the folder ``models/m-<name>`` and, with ``cache``, a Hugging Face
    cache ``models/hf-<name>`` handed over as ``HF_HOME``; with ``held`` the model folder holds ``w.txt``."""
    table = {}
    for n in names:
        table[n] = PackEntry(n, models=(f"m-{n}",), hf_cache=(f"models/hf-{n}",) if cache else (),
                             env={"HF_HOME": "{hf_cache}"} if cache else {})
        (root / "models" / f"m-{n}").mkdir(parents=True)
        if held:
            (root / "models" / f"m-{n}" / "w.txt").write_text(f"pack weights of {n}")
        if cache:
            snap = root / "models" / f"hf-{n}" / "hub" / "models--ex--m" / "snapshots" / ("c" * 40)
            snap.mkdir(parents=True)
            (snap / "model.bin").write_bytes(b"x")
    return WeightsPack(root, table=table)


def _ecfg(**kw):
    return types.SimpleNamespace(device="cpu", **kw)


# -- names and classes ------------------------------------------------------------------------------------------


def test_a_name_that_provides_the_role_passes_and_a_wrong_role_names_those_that_do():
    bbs.check_names("depth", ["da3", "oracle"], "depth")  # both provide depth: no error
    with pytest.raises(bbs.UnknownBackboneError) as exc:
        bbs.check_names("depth", ["pixel"], "depth")
    assert str(exc.value) == ("evaluate.depth: backbone 'pixel' does not provide 'depth' (it provides encoder); "
                              "use one of da3, oracle")


def test_an_unknown_name_is_named_with_its_setting():
    with pytest.raises(bbs.UnknownBackboneError, match=r"^evaluate.encoders: unknown backbone 'dinov'"):
        bbs.check_names("encoders", ["dinov2", "dinov"], "encoder")


def test_a_reference_is_split_at_its_first_colon_only(reg):
    s = bbs.BackboneSpec("odd", f"{MODULE}:Learned:extra", "paper", ("encoder",), True, "odd")
    with pytest.raises(BackboneUnavailable) as exc:
        bbs.import_class(s)
    assert str(exc.value) == f"backbone 'odd': module '{MODULE}' has no 'Learned:extra'"
    assert bbs.import_class(reg["tiny"]) is Learned


# -- status -----------------------------------------------------------------------------------------------------


def test_a_status_hashes_nothing_unless_asked(reg, tmp_path):
    _own(tmp_path)
    st = bbs.status(reg["tiny"], tmp_path)
    assert st.state is FolderState.PRESENT and st.sha256 == {} and st.checksum is Checksum.UNCHECKED
    hashed = bbs.status(reg["tiny"], tmp_path, hash_files=True)
    assert hashed.sha256 == {"w.txt": hashlib.sha256(b"weights").hexdigest()}


def test_a_backbone_without_files_is_ours_and_the_pack_says_nothing_of_it(reg, tmp_path):
    pack = _pack(tmp_path / "pack", names=("no-files",), cache=False)
    st = bbs.status(reg["no-files"], tmp_path / "own", pack=pack)
    assert (st.state, st.source, st.pack_note, st.pack_env) == (FolderState.PRESENT, "own", "", {})


def test_ours_wins_and_still_gets_the_packs_cache(reg, tmp_path):
    _own(tmp_path / "own")
    pack = _pack(tmp_path / "pack", held=True)
    st = bbs.status(reg["tiny"], tmp_path / "own", pack=pack)
    home = tmp_path / "pack" / "models" / "hf-tiny"
    assert st.source == "own" and st.dir == tmp_path / "own" / "tiny"
    assert st.pack_note == (f"ours wins over the pack's models/m-tiny/; the pack holds its Hugging Face cache "
                            f"models/hf-tiny/hub/models--ex--m/snapshots/{'c' * 40} (handed to it as HF_HOME={home})")
    assert st.pack_env == {"HF_HOME": str(home)}


def test_the_packs_folder_is_used_when_ours_is_missing(reg, tmp_path):
    pack = _pack(tmp_path / "pack", held=True, cache=False)
    st = bbs.status(reg["tiny"], tmp_path / "own", pack=pack)
    assert (st.source, st.dir, st.pack_files) == ("pack", tmp_path / "pack" / "models" / "m-tiny",
                                                  {"w.txt": "models/m-tiny/w.txt"})
    assert st.size == len("pack weights of tiny") and st.pack_note.startswith("found via ")


# -- fingerprint ------------------------------------------------------------------------------------------------


def test_our_folder_with_a_packs_cache_is_fingerprinted_with_the_cache(reg, tmp_path):
    d = _own(tmp_path / "own")
    pack = _pack(tmp_path / "pack")
    s = (d / "w.txt").stat()
    files = [("w.txt", s.st_size, s.st_mtime_ns)]
    assert bbs.weights_fingerprint("tiny", tmp_path / "own") == files  # no pack: the list alone
    env = [("HF_HOME", str(tmp_path / "pack" / "models" / "hf-tiny"))]
    assert bbs.weights_fingerprint("tiny", tmp_path / "own", pack) == ["own", files, env]


# -- timed forwards ---------------------------------------------------------------------------------------------


class _Inner:
    score = 0.5  # named like a forward, but not callable

    def encode(self, x):
        return 2 * x

    def helper(self):
        return "h"


def test_a_forward_is_timed_into_the_clock():
    clock: dict[str, float] = {}
    tb = bbs.TimedBackbone(_Inner(), bbs.spec("pixel"), {}, clock)
    before = time.perf_counter()
    assert tb.encode(3) == 6
    elapsed = time.perf_counter() - before
    assert set(clock) == {"backbone_s"} and 0.0 <= clock["backbone_s"] <= elapsed
    assert tb.encode(1) == 2 and 0.0 <= clock["backbone_s"] <= time.perf_counter() - before


def test_other_methods_and_plain_attributes_are_not_timed():
    clock: dict[str, float] = {}
    tb = bbs.TimedBackbone(_Inner(), bbs.spec("pixel"), {}, clock)
    assert tb.helper() == "h" and tb.score == 0.5 and clock == {}
    assert isinstance(tb.inner, _Inner)


# -- a loaded set -----------------------------------------------------------------------------------------------


def test_a_new_set_has_spent_no_time(tmp_path):
    assert bbs.BackboneSet(_ecfg(), tmp_path).clock == {"backbone_s": 0.0, "load_s": 0.0}


def test_the_pack_check_skips_unknown_names_and_backbones_without_weights(reg, tmp_path):
    import os

    pack = _pack(tmp_path / "pack", names=("tiny", "plain"))
    (tmp_path / "out").mkdir()
    hub = tmp_path / "pack" / "models" / "hf-plain" / "hub"
    for p in sorted(hub.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    hub.rmdir()
    os.symlink(tmp_path / "out", hub)  # the cache of 'plain' leads out of the pack
    with pytest.raises(PackLinkError):  # what status says of it ...
        bbs.status(reg["plain"], tmp_path / "own", pack=pack)
    bs = bbs.BackboneSet(_ecfg(), tmp_path / "own", pack=pack)
    bs.check_pack(["not-registered", "plain", "tiny"])  # ... is never asked: no weights are read for it


def test_a_file_missing_at_load_gives_the_fetch_command_and_how_to_get_the_pack(reg, tmp_path):
    _own(tmp_path, "fnf")
    fetch = fetch_command("fnf", tmp_path)
    with pytest.raises(BackboneUnavailable) as exc:
        bbs.BackboneSet(_ecfg(), tmp_path).get("fnf", "encoder")
    assert str(exc.value) == f"backbone 'fnf': extra.bin is missing; fetch it with: {fetch} ({HOW_TO_GET})"
    with_pack = bbs.BackboneSet(_ecfg(), tmp_path, pack=_pack(tmp_path / "pack", cache=False))
    with pytest.raises(BackboneUnavailable) as exc:
        with_pack.get("fnf", "encoder")
    assert str(exc.value) == f"backbone 'fnf': extra.bin is missing; fetch it with: {fetch}"


def test_a_corrupt_file_stays_a_value_error_with_its_attributes_each_time(reg, tmp_path):
    _own(tmp_path, "corrupt")
    bs = bbs.BackboneSet(_ecfg(), tmp_path)
    for _ in range(2):
        with pytest.raises(Corrupt) as exc:
            bs.get("corrupt", "encoder")
        assert str(exc.value) == "w.txt is corrupt" and exc.value.file == "w.txt"


def test_options_reach_load_and_a_set_without_options_loads_with_none(reg, tmp_path):
    _own(tmp_path)
    bbs.BackboneSet(_ecfg(backbone_options={"tiny": {"scale": 3}}), tmp_path).get("tiny", "encoder")
    assert Learned.seen == {"dir": tmp_path / "tiny", "device": "cpu", "scale": 3}
    bbs.BackboneSet(_ecfg(), tmp_path).get("tiny", "encoder")  # no backbone_options at all
    assert Learned.seen["scale"] == 1
    bbs.BackboneSet(_ecfg(backbone_options=None), tmp_path).get("tiny", "encoder")
    assert Learned.seen["scale"] == 1


def test_an_unknown_option_is_a_setting_error_and_a_bug_in_load_is_not(reg, tmp_path):
    _own(tmp_path)
    _own(tmp_path, "broken")
    with pytest.raises(ConfigError, match=r"^evaluate.backbone_options.tiny: .*bogus.* \(see the load options of "
                                          rf"{MODULE}:Learned\)$"):
        bbs.BackboneSet(_ecfg(backbone_options={"tiny": {"bogus": 1}}), tmp_path).get("tiny", "encoder")
    with pytest.raises(TypeError, match="a bug inside load"):
        bbs.BackboneSet(_ecfg(), tmp_path).get("broken", "encoder")


def test_the_packs_environment_goes_only_to_a_load_that_takes_it(reg, tmp_path):
    _own(tmp_path / "own")
    _own(tmp_path / "own", "wants-env")
    pack = _pack(tmp_path / "pack")
    bs = bbs.BackboneSet(_ecfg(), tmp_path / "own", pack=pack)
    bs.get("wants-env", "encoder")
    assert Learned.seen == {"pack_env": {"HF_HOME": str(tmp_path / "pack" / "models" / "hf-wants-env")}}
    bs.get("tiny", "encoder")  # its load takes no pack_env: loaded without it
    assert Learned.seen["scale"] == 1
    bbs.BackboneSet(_ecfg(), tmp_path / "own").get("wants-env", "encoder")  # no pack: nothing handed over
    assert Learned.seen == {"pack_env": None}


def test_loading_time_is_counted_and_a_backbone_is_loaded_once(reg, tmp_path):
    _own(tmp_path)
    bs = bbs.BackboneSet(_ecfg(), tmp_path)
    before = time.perf_counter()
    first = bs.get("tiny", "encoder")
    elapsed = time.perf_counter() - before
    assert 0.0 <= bs.clock["load_s"] <= elapsed and bs.clock["backbone_s"] == 0.0
    Learned.seen = {}
    assert bs.get("tiny", "encoder") is first and Learned.seen == {}


def test_a_packaged_backbone_records_its_shipped_provenance(reg, tmp_path):
    got = bbs.BackboneSet(_ecfg(), tmp_path).get("shipped", "encoder")
    assert got.provenance == {"name": "shipped", "kind": "paper", "class": f"{MODULE}:Shipped",
                              "label": "shipped-label", "library": "shiplib", "sha256": {"model.dat": "ab" * 32}}
    plain = bbs.BackboneSet(_ecfg(), tmp_path).get("plain", "encoder")
    assert plain.provenance == {"name": "plain", "kind": "paper", "class": f"{MODULE}:Plain", "label": "plain"}


# -- provenance -------------------------------------------------------------------------------------------------


def _expected(folder: Path, text: str) -> dict:
    return {"name": "tiny", "kind": "paper", "class": f"{MODULE}:Learned", "label": "tiny", "library": "plain-text",
            "hf_repo": "example/tiny", "revision": "r" * 40, "recipe": "a test", "weights_dir": str(folder),
            "files": {"w.txt": hashlib.sha256(text.encode()).hexdigest()}}


def test_provenance_of_our_folder_hashes_its_files(reg, tmp_path):
    _own(tmp_path)
    assert bbs.provenance(reg["tiny"], Learned, tmp_path) == _expected(tmp_path / "tiny", "weights")
    located = bbs.status(reg["tiny"], tmp_path)
    assert bbs.provenance(reg["tiny"], Learned, tmp_path, located) == _expected(tmp_path / "tiny", "weights")


def test_provenance_from_the_pack_names_its_files_and_environment(reg, tmp_path):
    pack = _pack(tmp_path / "pack", held=True)
    located = bbs.status(reg["tiny"], tmp_path / "own", pack=pack)
    folder = tmp_path / "pack" / "models" / "m-tiny"
    want = _expected(folder, "pack weights of tiny")
    want.update(source="pack", pack_files={"w.txt": "models/m-tiny/w.txt"},
                pack_env={"HF_HOME": str(tmp_path / "pack" / "models" / "hf-tiny")})
    assert bbs.provenance(reg["tiny"], Learned, tmp_path / "own", located) == want
    bs = bbs.BackboneSet(_ecfg(), tmp_path / "own", pack=pack)
    bs.get("tiny", "encoder")
    assert bs.provenance() == {"tiny": want}


@pytest.mark.parametrize("name, role", [("oracle", "pose"), ("oracle", "depth"), ("pixel", "encoder"),
                                        ("template", "tracker"), ("classical", "pose")])
def test_weight_free_backbones_load_with_no_weights_folder(tmp_path, monkeypatch, name, role):
    from evaluate.config import EvalConfig

    monkeypatch.delenv(PACK_ENV, raising=False)
    got = bbs.BackboneSet(EvalConfig(), tmp_path / "no-weights").get(name, role)
    assert got.provenance["class"] == bbs.spec(name).ref and not (tmp_path / "no-weights").exists()


def test_a_weight_free_backbone_is_built_with_its_options_and_an_unknown_one_is_a_setting_error(tmp_path):
    """``evaluate.backbone_options.classical`` is the one place to change the classical estimator's recipe."""
    got = bbs.BackboneSet(_ecfg(backbone_options={"classical": {"flow_window": 15, "corners": 400}}), tmp_path)
    inner = got.get("classical", "pose").inner
    assert (inner.flow_window, inner.corners, inner.flow_window_general) == (15, 400, 15)
    assert bbs.BackboneSet(_ecfg(backbone_options=None), tmp_path).get("classical", "pose").inner.flow_window == 9
    with pytest.raises(ConfigError, match=r"^evaluate.backbone_options.classical: .*window.* \(see the settings of "
                                          r"evaluate.perception.weightfree:ClassicalPoseEstimator\)$"):
        bbs.BackboneSet(_ecfg(backbone_options={"classical": {"window": 15}}), tmp_path).get("classical", "pose")


@pytest.mark.parametrize("bad", [0, -5.0, "wide", True, float("inf"), float("nan")])
def test_a_direct_fit_margin_out_of_range_is_a_setting_error(tmp_path, bad):
    """A value the estimator refuses (``ValueError``) names the setting like an unknown option; None measures the
    whole window."""
    with pytest.raises(ConfigError, match=r"^evaluate.backbone_options.classical: .*direct_margin_deg"):
        bbs.BackboneSet(_ecfg(backbone_options={"classical": {"direct_margin_deg": bad}}), tmp_path).get(
            "classical", "pose")
    inner = bbs.BackboneSet(_ecfg(backbone_options={"classical": {"direct_margin_deg": None}}), tmp_path).get(
        "classical", "pose").inner
    assert inner.direct_margin_deg is None
    assert bbs.BackboneSet(_ecfg(), tmp_path).get("classical", "pose").inner.direct_margin_deg == 10.0
    small = bbs.BackboneSet(_ecfg(backbone_options={"classical": {"direct_margin_deg": 0.5}}), tmp_path)
    assert small.get("classical", "pose").inner.direct_margin_deg == 0.5
