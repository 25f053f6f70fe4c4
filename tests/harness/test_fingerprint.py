"""Config fingerprints (harness/fingerprint.py): every input that can change a frame changes the hash, nothing else
does, and the batched form equals the per-item one."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import fingerprint as fp


@pytest.fixture(scope="module")
def world():
    from adapters.base import build_adapter
    from harness.cases import load_case_set
    from harness.config_groups import group_yaml
    from harness.context import ContextPolicy
    from trajectories import TrajectorySpec

    adapter = build_adapter(group_yaml("model", "reference"))
    cases = {c.id: c for c in load_case_set("builtin:demo")}
    return SimpleNamespace(adapter=adapter, cases=cases, context=ContextPolicy.from_dict(group_yaml("context", "fov")),
                           spec=TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")))


def _item(case_id="environment_rocket", trajectory="lrlr", seed=1):
    return SimpleNamespace(key=f"reference/fov/seed-{seed}/{trajectory}/{case_id}", seed=seed, case_id=case_id,
                           trajectory=trajectory)


def _with_model(adapter, **changes):
    """A copy of ``adapter`` whose config dict has ``changes`` (the adapter class, so its code hash, is kept)."""
    d = {**adapter.config.to_dict(), **changes}
    other = copy.copy(adapter)
    other.config = SimpleNamespace(to_dict=lambda: d)
    return other


def _fp(w, adapter=None, case="environment_rocket", item=None, encoder=None, context=None, spec=None):
    return fp.item_fingerprint(adapter or w.adapter, context or w.context, spec or w.spec, w.cases[case],
                               item or _item(case), encoder or {"crf": 18})[0]


@pytest.mark.parametrize("field", ["height", "width", "num_frames", "fps"])
def test_fields_that_change_a_frame_change_the_fingerprint(world, field):
    value = world.adapter.config.to_dict()[field]
    assert field not in fp.NON_SEMANTIC_MODEL_FIELDS
    assert _fp(world, _with_model(world.adapter, **{field: value * 2})) != _fp(world)


@pytest.mark.parametrize("field", sorted(fp.NON_SEMANTIC_MODEL_FIELDS))
def test_fields_that_cannot_change_a_frame_do_not(world, field):
    assert _fp(world, _with_model(world.adapter, **{field: "/somewhere/else"})) == _fp(world)


def test_the_non_semantic_list_is_what_the_docstring_names():
    """Where things live, how long to wait, how to describe them, and the seed (hashed on its own): never the
    canvas, the frame count or anything a sampler reads."""
    assert {"upstream_dir", "checkpoint", "python", "env", "timeout_s", "description", "seed"} <= \
        fp.NON_SEMANTIC_MODEL_FIELDS
    assert not {"height", "width", "num_frames", "fps", "sampling_steps", "guidance", "adapter", "name"} & \
        fp.NON_SEMANTIC_MODEL_FIELDS


def test_every_other_input_changes_the_fingerprint(world):
    from trajectories import TrajectorySpec

    base = _fp(world)
    assert _fp(world, item=_item(seed=2)) != base
    assert _fp(world, item=SimpleNamespace(**{**vars(_item()), "key": "other/key"})) != base
    assert _fp(world, encoder={"crf": 19}) != base
    assert _fp(world, spec=TrajectorySpec.from_dict({**world.spec.to_dict(), "yaw_deg": 100.0})) != base
    assert _fp(world, context=dataclasses.replace(world.context, recent=8)) != base
    assert _fp(world, case="environment_motorcycle", item=_item()) != base
    h, parts = fp.item_fingerprint(world.adapter, world.context, world.spec, world.cases["environment_rocket"],
                                   _item(), {"crf": 18})
    assert len(h) == 32 and set(parts) == {"item", "seed", "model", "context", "trajectory", "case", "adapter_code",
                                           "encoder"}
    assert "description" not in parts["model"]


def test_batched_fingerprints_equal_the_per_item_ones(world):
    items = [_item(c, t, s) for c in ("environment_rocket", "object_coffee") for t in ("lrlr", "lrud")
             for s in (1, 3)]
    from trajectories import TrajectorySpec

    specs = {"lrlr": world.spec, "lrud": TrajectorySpec.from_dict({"name": "lrud", "cycles": ["left", "up"]})}
    got = fp.item_fingerprints(world.adapter, world.context, specs, world.cases, items, {"crf": 18})
    for it in items:
        one, parts = fp.item_fingerprint(world.adapter, world.context, specs[it.trajectory], world.cases[it.case_id],
                                         it, {"crf": 18})
        assert got[it.key][0] == one
        assert got[it.key][1] == {k: fp.sha256_text(fp.canonical(v))[:12] for k, v in parts.items()}
    assert len({v[0] for v in got.values()}) == len(items)


def _code_hash_with(monkeypatch, cls, changed: Path | None) -> str:
    """The adapter's code hash when the bytes of ``changed`` differ from the file on disk."""
    real = Path.read_bytes

    def read_bytes(self):
        data = real(self)
        return data + b"# changed\n" if changed is not None and self.resolve() == changed.resolve() else data

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    try:
        return fp.adapter_code_version.__wrapped__(cls)
    finally:
        monkeypatch.setattr(Path, "read_bytes", real)


def test_the_code_hash_covers_the_adapters_package_and_its_base_classes(monkeypatch):
    """A change to any module of the adapter's package (not just the one defining the class), or to a base class it
    inherits, changes the hash; another model's package does not."""
    import adapters
    from adapters.hy_worldplay.adapter import HYWorldPlayAdapter

    root = Path(adapters.__file__).parent
    base = _code_hash_with(monkeypatch, HYWorldPlayAdapter, None)
    helpers = sorted(p for p in (root / "hy_worldplay").glob("*.py") if p.name != "adapter.py")
    assert helpers, "the fixture needs a package with more than one module"
    for f in helpers + [root / "hy_worldplay" / "adapter.py", root / "upstream.py", root / "base.py"]:
        assert _code_hash_with(monkeypatch, HYWorldPlayAdapter, f) != base, f
    assert _code_hash_with(monkeypatch, HYWorldPlayAdapter, root / "dreamx" / "adapter.py") == base
    assert fp.adapter_code_version(HYWorldPlayAdapter) == base  # cached value = uncached value


def test_a_base_class_module_counts_alone_not_its_folder(monkeypatch):
    """``adapters/base.py`` counts for every adapter, the other modules of ``adapters/`` only when inherited; the
    built-in reference model's package counts whole."""
    import adapters
    from adapters.reference.adapter import ReferenceAdapter

    root = Path(adapters.__file__).parent
    base = _code_hash_with(monkeypatch, ReferenceAdapter, None)
    assert _code_hash_with(monkeypatch, ReferenceAdapter, root / "base.py") != base
    assert _code_hash_with(monkeypatch, ReferenceAdapter, root / "shim.py") == base
    assert _code_hash_with(monkeypatch, ReferenceAdapter, root / "reference" / "model.py") != base


def test_case_identity_hashes_a_file_image_and_drops_the_source(tmp_path):
    from PIL import Image

    from harness.cases import Case

    img = tmp_path / "a.png"
    Image.new("RGB", (8, 8), (10, 20, 30)).save(img)
    case = Case(id="c", family="environment", image="a.png", prompt="p", source=str(tmp_path / "cases.yaml"))
    d = fp.case_identity(case)
    assert "source" not in d and d["image_sha256"] == fp.sha256_file(img) == fp.file_sha256(img)
    Image.new("RGB", (8, 9), (10, 20, 30)).save(img)  # another image under the same name
    assert fp.case_identity(case)["image_sha256"] == fp.sha256_file(img) != d["image_sha256"]
    sk = Case(id="c", family="environment", image="skimage://rocket", prompt="p")
    assert "image_sha256" not in fp.case_identity(sk)


def test_canonical_json_is_key_order_free_and_compact():
    assert fp.canonical({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}' == fp.canonical({"a": [1, 2], "b": 1})
    assert fp.canonical({"p": Path("x")}) == '{"p":"x"}'
    import hashlib

    assert fp.sha256_text("é") == hashlib.sha256("é".encode()).hexdigest()


def _adapters_root() -> Path:
    import adapters

    return Path(adapters.__file__).parent.resolve()


def test_the_code_files_are_the_package_and_each_adapters_base_module_and_nothing_else():
    """Exact sets: the adapter's package whole; each base class in ``adapters`` by its module alone (another model's
    ``adapter.py`` too, not that model's folder); a class defined in ``adapters/`` itself counts alone."""
    from adapters.hy_worldplay.adapter import HYWorldPlayAdapter
    from adapters.lingbot_v2.adapter import LingBotV2Adapter
    from adapters.upstream import UpstreamAdapter

    root = _adapters_root()
    shared = {root / "upstream.py", root / "base.py"}
    assert set(fp.adapter_code_files(HYWorldPlayAdapter)) == set((root / "hy_worldplay").glob("*.py")) | shared
    assert set(fp.adapter_code_files(LingBotV2Adapter)) == (
        set((root / "lingbot_v2").glob("*.py")) | {root / "lingbot" / "adapter.py"} | shared)
    assert fp.adapter_code_files(UpstreamAdapter) == sorted(shared)
    assert fp.adapter_code_files(HYWorldPlayAdapter) == sorted(fp.adapter_code_files(HYWorldPlayAdapter))


class _TestMixin:
    """A base class from outside ``adapters`` (this test module)."""


def test_bases_outside_adapters_and_modules_without_a_file_add_nothing(monkeypatch):
    import sys
    import types

    from adapters.reference.adapter import ReferenceAdapter

    root = _adapters_root()
    made = types.ModuleType("adapters._made_at_run_time")  # no __file__
    monkeypatch.setitem(sys.modules, made.__name__, made)
    runtime_base = type("RuntimeBase", (), {"__module__": made.__name__})
    unimported = type("Unimported", (), {"__module__": "adapters._not_imported_anywhere"})
    cls = type("Mixed", (ReferenceAdapter, _TestMixin, runtime_base, unimported), {"__module__": made.__name__})
    assert fp.adapter_code_files(cls) == [root / "base.py", root / "reference" / "adapter.py"]


def test_an_installed_models_package_counts_whole_and_outside_the_project_by_file_name(tmp_path, monkeypatch):
    """A model from another distribution (any package name, outside the project): every module of its package is
    hashed under its file name, so editing any of them invalidates its finished items."""
    import importlib
    import sys

    pkg = tmp_path / "toy_installed_model"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("SPEED = 1\n")
    (pkg / "adapter.py").write_text("from adapters.reference.adapter import ReferenceAdapter\n\n\n"
                                    "class ToyAdapter(ReferenceAdapter):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = importlib.import_module("toy_installed_model.adapter").ToyAdapter
    try:
        root = _adapters_root()
        files = fp.adapter_code_files(toy)
        assert files == sorted({root / "base.py", root / "reference" / "adapter.py",
                                *(p.resolve() for p in pkg.glob("*.py"))})
        before = fp.adapter_code_version.__wrapped__(toy)
        (pkg / "helpers.py").write_text("SPEED = 2\n")
        assert fp.adapter_code_version.__wrapped__(toy) != before
        import hashlib

        expected = hashlib.sha256()
        for f in files:
            rel = f.relative_to(fp.PROJECT_ROOT).as_posix() if f.parent != pkg.resolve() else f.name
            expected.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
        assert fp.adapter_code_version.__wrapped__(toy) == expected.hexdigest()
    finally:
        for name in [m for m in sys.modules if m.startswith("toy_installed_model")]:
            del sys.modules[name]


def test_the_code_hash_names_each_file_by_its_path_in_the_project():
    """Two packages with a same-named module (``controls.py``) hash under their paths: moving a file changes the
    hash."""
    import hashlib

    from adapters.hy_worldplay.adapter import HYWorldPlayAdapter

    expected = hashlib.sha256()
    for f in fp.adapter_code_files(HYWorldPlayAdapter):
        expected.update(f.relative_to(fp.PROJECT_ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    assert fp.adapter_code_version.__wrapped__(HYWorldPlayAdapter) == expected.hexdigest()


def test_a_skimage_image_is_named_not_read_and_a_missing_file_is_not_hashed(tmp_path, monkeypatch):
    """``skimage://rocket`` is never read from disk, even where a file by that spelling exists in the working
    folder; a case whose image file is missing has no image hash (loading it fails later, naming the field)."""
    from harness.cases import Case

    monkeypatch.chdir(tmp_path)
    (tmp_path / "skimage:").mkdir()
    (tmp_path / "skimage:" / "rocket").write_bytes(b"not an image")
    assert Path("skimage://rocket").is_file()  # the spelling a path would read
    sk = Case(id="c", family="environment", image="skimage://rocket", prompt="p")
    assert "image_sha256" not in fp.case_identity(sk)
    gone = Case(id="c", family="environment", image="gone.png", prompt="p", source=str(tmp_path / "cases.yaml"))
    assert "image_sha256" not in fp.case_identity(gone)


# -- fingerprint_with_recorded_frames ---------------------------------------------------------------------------------
def _recorded(w, model, adapter=None):
    return fp.fingerprint_with_recorded_frames(adapter or w.adapter, w.context, w.spec, w.cases["environment_rocket"],
                                               _item(), {"crf": 18}, model)


@pytest.mark.parametrize("model", [None, [], "model", {"num_frames": 493}, {"frames_per_trajectory": None},
                                   {"frames_per_trajectory": [["lrlr", 493]]}])
def test_nothing_is_derived_without_a_recorded_mapping_of_frame_counts(world, model):
    assert _recorded(world, model) is None


def test_a_recorded_override_of_another_trajectory_gives_the_fingerprint_made_with_it(world):
    """Today's model overrides nothing (every trajectory at its num_frames, 493); the recorded one overrode another
    trajectory: the item's own count is the same, so the derived fingerprint hashes the recorded overrides."""
    old = {"lrlrlr_sym_1dpf": 541}
    got = _recorded(world, {"num_frames": 493, "frames_per_trajectory": old})
    want = _fp(world, adapter=_with_model(world.adapter, frames_per_trajectory=old))
    assert isinstance(got, str) and got == want and got != _fp(world)


def test_the_items_own_count_is_compared_override_first_then_num_frames_on_each_side(world):
    # recorded: no override of lrlr, num_frames 481 -> 481 against today's 493: changed
    assert _recorded(world, {"num_frames": 481, "frames_per_trajectory": {}}) is None
    # recorded: lrlr overridden to 493 (num_frames 481) -> 493, today's 493: the same
    assert _recorded(world, {"num_frames": 481, "frames_per_trajectory": {"lrlr": 493}}) is not None
    # today: lrlr overridden to 401; recorded the same override -> the same; recorded none (493) -> changed
    today = _with_model(world.adapter, frames_per_trajectory={"lrlr": 401})
    same = _recorded(world, {"num_frames": 493, "frames_per_trajectory": {"lrlr": 401, "lrud": 97}}, today)
    assert same == _fp(world, adapter=_with_model(world.adapter, frames_per_trajectory={"lrlr": 401, "lrud": 97}))
    assert _recorded(world, {"num_frames": 493, "frames_per_trajectory": {}}, today) is None


def test_a_model_that_sets_no_overrides_today_reads_its_num_frames(world):
    today = _with_model(world.adapter, frames_per_trajectory=None)
    assert _recorded(world, {"num_frames": 481, "frames_per_trajectory": {"lrlr": 493}}, today) is not None
    assert _recorded(world, {"num_frames": 493, "frames_per_trajectory": {"lrlr": 481}}, today) is None
