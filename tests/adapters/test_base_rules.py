"""The rules of the adapter seam, one at a time and in this process: the model settings (adapters/base.py:
:class:`TranslationScale`, :class:`ModelConfig` and their defaults, bounds and records), reading a ``model`` section
(:func:`model_config`, :func:`adapter_class`, :func:`build_adapter`), the context budget and record, readiness, the
case's canvas and its intrinsics, the item's camera path (trailing hold, frame-layout presets), the compile caches
(adapters/memo.py: value keys, LRU bounds, switching off, image identities, encoded canvas files) and the reference
model's config and adapter (adapters/reference/).

A small adapter (:class:`Plain`) with a 32x48 canvas stands in for a model where the base class's own rules are
stated; the reference adapter runs itself on a 32x48 canvas and a handful of frames.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
import pydantic.dataclasses
import pytest

from adapters import memo
from adapters.base import (
    CONFIG,
    Adapter,
    Finding,
    GeneratedVideo,
    ItemRequest,
    ModelConfig,
    ModelConfigError,
    NativeControls,
    ServedContextInfo,
    TranslationScale,
    UnsupportedContextError,
    adapter_class,
    build_adapter,
    model_config,
    policy_budget,
)
from adapters.reference.adapter import ReferenceAdapter
from adapters.reference.config import ReferenceConfig
from harness.cases import Case
from harness.context import ContextPolicy
from trajectories import TrajectoryError, TrajectorySpec, build_path
from trajectories.conventions import intrinsics_from_fov
from trajectories.path import CameraPath, Segment

H, W = 32, 48
REF = "adapters.reference.adapter:ReferenceAdapter"
BASE = {"name": "m", "adapter": REF, "seed": 1, "height": H, "width": W, "fps": 16, "num_frames": 9}
ROOM = {"x": 4.0, "up": 2.0, "down": 1.0, "front": 4.0, "back": 4.0}
LRLR = TrajectorySpec(name="lrlr", cycles=("left", "left"))
K_CANVAS = intrinsics_from_fov(60.0, W, H)


def policy(name: str, **knobs) -> ContextPolicy:
    return ContextPolicy.from_dict({"name": name, **knobs})


class Plain(Adapter):
    """The base class's behaviour, nothing added."""

    def compile(self, req: ItemRequest) -> NativeControls:
        return NativeControls()

    def generate(self, req, controls, sink) -> GeneratedVideo:
        return GeneratedVideo(num_frames=0, fps=1.0)


def plain(cls: type[Adapter] = Plain, **over) -> Adapter:
    return cls(ModelConfig.from_dict({**BASE, **over}))


def reference(**over) -> ReferenceAdapter:
    adapter = build_adapter({**BASE, **over})
    assert isinstance(adapter, ReferenceAdapter)
    return adapter


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class TaggedConfig(ModelConfig):
    tags: tuple[str, ...] = ("a", "b")


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class EvenFramesConfig(ModelConfig):
    def validate(self) -> None:
        super().validate()
        if self.num_frames % 2:
            raise ModelConfigError(f"model.num_frames={self.num_frames}: must be even")


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class EvenReferenceConfig(ReferenceConfig, EvenFramesConfig):
    """A config whose rules come after the reference config's in the method order."""


@pytest.fixture(autouse=True)
def _caches_as_found():
    """Every test starts with empty caches and leaves the on/off setting as it found it."""
    memo.clear()
    old = memo.enabled()
    yield
    memo.set_enabled(old)
    memo.clear()


def _image(path: Path, h: int, w: int) -> Path:
    img = np.zeros((h, w, 3), np.uint8)
    img[:, w // 2:] = 200
    img[h // 2:, :] = 90
    cv2.imwrite(str(path), img)
    return path


@pytest.fixture
def case(tmp_path) -> Case:
    """A case whose image (40 x 100 pixels) is new to this process."""
    return Case(id="c1", family="environment", image=str(_image(tmp_path / "img.png", 40, 100)), prompt="a room")


# -- TranslationScale -------------------------------------------------------------------------------------------------
def test_the_translation_scale_defaults_to_scene_units_as_they_are():
    ts = TranslationScale()
    assert (ts.units, ts.per_scene_unit, ts.expects) == ("scene", 1.0, "")
    assert ts.to_dict() == {"units": "scene", "per_scene_unit": 1.0, "expects": "", "recoverable": True}


@pytest.mark.parametrize("units, recoverable", [("scene", True), ("metres", True), ("normalised", False),
                                                ("none", False)])
def test_only_scene_and_metre_units_keep_the_absolute_scale(units, recoverable):
    assert TranslationScale(units=units).recoverable is recoverable


def test_a_missing_translation_scale_is_the_default_one():
    cfg = ModelConfig.from_dict({**BASE, "translation_scale": None})
    assert cfg.translation_scale == TranslationScale()
    given = ModelConfig.from_dict({**BASE, "translation_scale": {"units": "metres", "per_scene_unit": 7.0}})
    assert (given.translation_scale.units, given.translation_scale.per_scene_unit) == ("metres", 7.0)
    assert plain(translation_scale={"per_scene_unit": 7.0}).scene_scale() == 7.0


# -- ModelConfig --------------------------------------------------------------------------------------------------------
def test_the_model_defaults_are_the_documented_ones():
    cfg = ModelConfig.from_dict(BASE)
    assert (cfg.latent_stride, cfg.chunk_latents, cfg.default_hfov_deg, cfg.gpus_per_job, cfg.gpu_layout,
            cfg.paper_context, cfg.trailing_hold_frames, cfg.description,
            cfg.frames_per_trajectory) == (4, 4, 60.0, 0, "", "fullkv", 0, "", {})


def test_a_positive_field_takes_one_and_refuses_zero():
    assert ModelConfig.from_dict({**BASE, "height": 1}).height == 1
    with pytest.raises(ModelConfigError, match=r"^model\.height=0: must be a positive integer$"):
        ModelConfig.from_dict({**BASE, "height": 0})


def test_a_trajectory_without_its_own_frame_count_gets_the_model_s():
    cfg = ModelConfig.from_dict({**BASE, "frames_per_trajectory": {"lrlrlr": 11}})
    assert (cfg.frames_for("lrlrlr"), cfg.frames_for("lrlr")) == (11, 9)


def test_the_record_lists_tuples_and_keeps_strings():
    out = TaggedConfig.from_dict(BASE).to_dict()
    assert out["tags"] == ["a", "b"] and out["name"] == "m" and out["adapter"] == REF
    assert out["translation_scale"] == TranslationScale().to_dict()
    assert out["frames_per_trajectory"] == {} and out["height"] == H


def test_a_subclass_rule_runs_when_the_config_is_made():
    with pytest.raises(ModelConfigError, match="must be even"):
        EvenFramesConfig.from_dict(BASE)
    assert EvenFramesConfig.from_dict({**BASE, "num_frames": 10}).num_frames == 10


# -- reading a model section ------------------------------------------------------------------------------------------
def test_a_typed_model_config_is_returned_as_it_is():
    cfg = ReferenceConfig.from_dict(BASE)
    assert model_config(cfg) is cfg


def test_a_mapping_is_read_by_the_config_class_of_its_adapter():
    cfg = model_config(BASE)
    assert type(cfg) is ReferenceConfig and cfg.room == ROOM and cfg.name == "m"


def test_a_model_section_that_is_not_a_mapping_is_refused():
    with pytest.raises(ModelConfigError) as err:
        model_config(["reference"])
    assert str(err.value) == "model=['reference']: choose a model: model=<name> (`python -m harness list`)"


def test_the_adapter_reference_names_an_adapter_class():
    assert adapter_class(REF) is ReferenceAdapter
    with pytest.raises(ModelConfigError) as err:
        adapter_class(None, "m")
    assert str(err.value) == "model.adapter: missing for model 'm'; set 'module:Class'"
    with pytest.raises(ModelConfigError) as err:
        adapter_class("", "m")
    assert "missing for model 'm'" in str(err.value)


@pytest.mark.parametrize("ref", ["harness.cases:Case", "adapters.base:policy_budget"])
def test_a_reference_to_anything_but_an_adapter_class_is_refused(ref):
    with pytest.raises(ModelConfigError) as err:
        adapter_class(ref)
    assert str(err.value) == f"model.adapter={ref!r} is not an adapters.base.Adapter subclass"


def test_build_adapter_builds_the_named_adapter_with_its_typed_config():
    adapter = build_adapter(BASE)
    assert type(adapter) is ReferenceAdapter and type(adapter.config) is ReferenceConfig


# -- context policies -------------------------------------------------------------------------------------------------
def test_each_harness_policy_has_its_budget_in_latents():
    assert policy_budget(policy("fullkv")) == {"unit": "latent", "history": "all"}
    assert policy_budget(policy("sliding", sink=1, recent=2, chunk=3)) == {
        "unit": "latent", "sink": 1, "recent": 2, "current": 3}
    assert policy_budget(policy("fov", sink=1, recent=2, retrieved_chunks=5, chunk=3)) == {
        "unit": "latent", "sink": 1, "recent": 2, "retrieved": "5 x 3", "current": 3}
    assert policy_budget(policy("native")) == {"memory": "the model's own"}


def test_an_in_process_model_is_told_the_harness_selection():
    told = plain().context_told(policy("sliding", sink=1, recent=2, chunk=3))
    assert told == {"policy": "sliding", "told": {"applied_by": "harness.context.ContextSelector (in process)",
                                                  "unit": "latent", "sink": 1, "recent": 2, "current": 3}}


class SameLaunch(Plain):
    same_launch: ClassVar = {"sliding": ("fullkv", "the window covers every latent")}


def test_a_declared_same_launch_is_recorded_for_its_policy_only():
    a = plain(SameLaunch)
    assert a.context_told(policy("sliding"))["same_launch_as"] == {"policy": "fullkv",
                                                                   "why": "the window covers every latent"}
    assert "same_launch_as" not in a.context_told(policy("fullkv"))


def test_a_policy_outside_the_supported_ones_is_refused_with_its_reason():
    a = plain()
    a.check_context(policy("fov", retrieved_chunks=1))
    with pytest.raises(UnsupportedContextError) as err:
        a.check_context(policy("native"))
    assert str(err.value) == ("model=m does not support context=native: no built-in memory mode; pick fullkv, "
                              "sliding or fov. Supported: fullkv, sliding, fov")


class FullOnly(Plain):
    contexts: ClassVar = ("fullkv",)


def test_a_refused_policy_without_a_reason_is_not_implemented():
    with pytest.raises(UnsupportedContextError) as err:
        plain(FullOnly).check_context(policy("sliding"))
    assert str(err.value) == ("model=m does not support context=sliding: not implemented for this model. "
                              "Supported: fullkv")


def test_the_paper_context_must_be_one_the_adapter_runs():
    assert plain(paper_context="sliding").config.paper_context == "sliding"
    with pytest.raises(ModelConfigError) as err:
        plain(paper_context="native")
    assert str(err.value) == "model.paper_context='native': Plain runs only fullkv, sliding, fov for model 'm'"


# -- readiness ----------------------------------------------------------------------------------------------------------
class Findings(Plain):
    found: ClassVar[list[Finding]] = []

    def readiness(self, probe: bool = True) -> list[Finding]:
        self.probed = probe
        return list(self.found)


class Warned(Findings):
    found: ClassVar = [Finding("warning", "model.python", "old numpy")]


class Broken(Findings):
    found: ClassVar = [Finding("error", "model.checkpoint", "missing"), Finding("warning", "model.python", "old"),
                       Finding("error", "model.upstream_dir", "not a checkout")]


def test_a_built_in_model_has_nothing_to_check():
    assert plain().readiness() == [] and plain().check_ready() == []


def test_check_ready_probes_unless_told_not_to():
    a = plain(Findings)
    a.check_ready()
    assert a.probed is True
    a.check_ready(probe=False)
    assert a.probed is False


def test_warnings_are_returned_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="adapters.base"):
        out = plain(Warned).check_ready()
    assert out == Warned.found
    assert [r.getMessage() for r in caplog.records] == ["m: model.python: old numpy"]


def test_every_readiness_error_is_listed_in_one_error():
    with pytest.raises(ModelConfigError) as err:
        plain(Broken).check_ready()
    assert str(err.value) == ("m is not ready to run:\n  - model.checkpoint: missing\n"
                              "  - model.upstream_dir: not a checkout")


# -- the canvas ---------------------------------------------------------------------------------------------------------
def test_the_canvas_k_covers_and_centre_crops_the_image(case):
    # 40 x 100 covering 32 x 48: scale max(32/40, 48/100) = 0.8, 32 x 80, 16 pixels cropped each side;
    # 60 deg default: fx = 0.8 * 50 / tan(30 deg) = 40 sqrt(3), principal point at the canvas centre
    K = plain().canvas_K(case)
    assert np.allclose(K, [[40 * np.sqrt(3), 0, 24], [0, 40 * np.sqrt(3), 16], [0, 0, 1]])
    assert not K.flags.writeable


def test_the_canvas_is_read_only_at_the_model_size_and_computed_once(case):
    a = plain()
    canvas, K = a.canvas_image_and_K(case)
    assert canvas.shape == (H, W, 3) and canvas.dtype == np.uint8
    assert not canvas.flags.writeable and not K.flags.writeable
    assert np.allclose(K, a.canvas_K(case))
    again = a.canvas_image_and_K(case)
    assert again[0] is canvas and again[1] is K


def test_an_adapter_keeps_the_last_eight_canvases(tmp_path):
    image = str(_image(tmp_path / "img.png", 40, 100))
    cases = [Case(id=f"c{i}", family="environment", image=image, prompt="a room") for i in range(9)]
    a = plain()
    first = [a.canvas_image_and_K(c)[0] for c in cases]
    assert a.canvas_image_and_K(cases[1])[0] is first[1]  # the second is still kept
    assert a.canvas_image_and_K(cases[0])[0] is not first[0]  # the first was let go for the ninth


# -- the camera path -------------------------------------------------------------------------------------------------
def test_the_path_has_the_frame_count_of_its_trajectory_name():
    a = reference(num_frames=20, frames_per_trajectory={"lrlr": 24, "alias": 30})
    assert a.path_for(LRLR, K_CANVAS).num_frames == 24
    assert a.path_for(LRLR, K_CANVAS, "alias").num_frames == 30


def test_the_path_is_built_once_and_shared():
    a = reference(num_frames=24)
    p = a.path_for(LRLR, K_CANVAS)
    assert a.path_for(LRLR, K_CANVAS) is p and not p.c2w.flags.writeable


def test_without_a_trailing_hold_the_path_is_the_trajectory_s():
    p = reference(num_frames=24).path_for(LRLR, K_CANVAS)
    q = build_path(LRLR, 24, 16, K_CANVAS, H, W)
    assert np.array_equal(p.c2w, q.c2w) and p.segments == q.segments and p.phases == q.phases
    assert p.params == q.params and "trailing_hold_frames" not in p.params


def test_a_trailing_hold_repeats_the_last_pose_after_the_trajectory():
    p = reference(num_frames=24, trailing_hold_frames=3).path_for(LRLR, K_CANVAS)
    q = build_path(LRLR, 21, 16, K_CANVAS, H, W)
    assert p.num_frames == 24 and np.array_equal(p.c2w[:21], q.c2w)
    assert all(np.array_equal(p.c2w[t], q.c2w[20]) for t in (21, 22, 23))
    a, b = q.phases["H"]
    assert b == 21 and p.phases["H"] == (a, 24)
    assert {k: v for k, v in p.phases.items() if k != "H"} == {k: v for k, v in q.phases.items() if k != "H"}
    assert p.segments == (*q.segments, Segment("H", "trailing_hold", "hold", 21, 24))
    assert p.params == {**q.params, "trailing_hold_frames": 3, "num_frames": 24}
    assert (p.name, p.fps, p.height, p.width) == ("lrlr", 16.0, H, W) and np.array_equal(p.K, q.K)


FRAMED = TrajectorySpec(name="fl", cycles=("left",), yaw_deg=90.0, deg_per_frame=10.0, hold_frames={"initial": 2})


def test_a_frame_layout_preset_must_end_with_the_model_s_static_poses():
    # the preset's fewest frames: 1 + 2 (initial hold) + 9 + 9 (the sweep away and back at 10 deg/frame) = 21;
    # at 23 frames the final hold has 2 frames, and with the last sweep's end frame 3 static poses
    assert FRAMED.min_frames() == 21
    p = reference(num_frames=23, trailing_hold_frames=3).path_for(FRAMED, K_CANVAS)
    q = build_path(FRAMED, 23, 16, K_CANVAS, H, W)
    assert np.array_equal(p.c2w, q.c2w) and p.segments == q.segments and p.params == q.params
    with pytest.raises(TrajectoryError) as err:
        reference(num_frames=22, trailing_hold_frames=3).path_for(FRAMED, K_CANVAS)
    assert str(err.value) == ("trajectory 'fl' at 22 frames ends with 2 static poses; model.trailing_hold_frames "
                              "needs 3: raise model.frames_per_trajectory.fl")


# -- the work item ------------------------------------------------------------------------------------------------------
def test_native_files_go_to_the_controls_folder(tmp_path):
    req = ItemRequest(case=None, path=None, context=policy("fullkv"), seed=1, item_dir=tmp_path / "item")
    assert req.controls_dir == tmp_path / "item" / "controls"


def test_a_served_model_s_context_entries_are_all_optional():
    assert ServedContextInfo.__required_keys__ == frozenset()
    assert GeneratedVideo(num_frames=1, fps=1.0).context_info == {}


# -- memo: keys -------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_plain_values_are_keyed_by_type_and_value():
    assert memo.key_of(None) == ("NoneType", None)
    assert memo.key_of(3) == ("int", 3) and memo.key_of(True) == ("bool", True)
    assert memo.key_of("a") == ("str", "a") and memo.key_of(b"a") == ("bytes", b"a")
    assert memo.key_of(1.5) == ("float", 1.5)


def test_an_array_is_keyed_by_dtype_shape_and_a_digest_of_its_bytes():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    digest = hashlib.blake2b(a.tobytes(), digest_size=20).digest()
    assert memo.key_of(a) == ("nd", "<i2", (2, 3), digest)
    assert memo.key_of(np.asfortranarray(a)) == memo.key_of(a)  # the values, not the memory layout


def test_numpy_scalars_containers_and_dataclasses_are_keyed_by_value():
    assert memo.key_of(np.float32(1.5)) == ("np", "<f4", 1.5)
    assert memo.key_of([1, (2,)]) == ("list", (("int", 1), ("tuple", (("int", 2),))))
    assert memo.key_of({"a": 1}) == ("dict", ((("str", "a"), ("int", 1)),))
    assert memo.key_of(Point(1, 2.0)) == (__name__, "Point", (("x", ("int", 1)), ("y", ("float", 2.0))))


@pytest.mark.parametrize("value", [object(), {1, 2}, Point])
def test_a_value_without_a_key_is_unhashable(value):
    with pytest.raises(memo.Unhashable):
        memo.key_of(value)


# -- memo: the memoised function --------------------------------------------------------------------------------------
def _counted(**options):
    calls: list[object] = []

    def f(x, scale=1):
        calls.append(x)
        return [x, scale]

    return (memo.memo(**options)(f) if options else memo.memo(f)), calls


def test_the_caches_are_on_by_default():
    assert memo.enabled() is True


def test_a_repeated_call_is_served_from_the_cache():
    f, calls = _counted()
    assert f(2) == [2, 1] and f(2) == [2, 1] and f(2, scale=3) == [2, 3]
    assert calls == [2, 2]
    assert f.__name__ == "f"


def test_the_least_recently_used_value_is_evicted_first():
    f, calls = _counted(maxsize=2)
    f(1), f(2), f(1), f(3)  # 1 was used after 2: 2 goes
    assert calls == [1, 2, 3]
    f(1)
    assert calls == [1, 2, 3]
    f(2)
    assert calls == [1, 2, 3, 2]


def test_a_memoised_function_keeps_128_values_by_default():
    f, calls = _counted()
    for i in range(129):
        f(i)
    f(1)
    assert len(calls) == 129
    f(0)
    assert len(calls) == 130


def test_switched_off_or_unkeyable_calls_are_computed_every_time():
    f, calls = _counted()
    thing = object()
    f(thing), f(thing)
    assert calls == [thing, thing]
    assert memo.set_enabled(False) is True and memo.enabled() is False
    f(5), f(5)
    assert calls == [thing, thing, 5, 5]
    assert memo.set_enabled(True) is False


def test_clear_empties_every_cache():
    f, calls = _counted()
    f(1)
    memo.clear()
    f(1)
    assert calls == [1, 1]


# -- memo: camera paths -----------------------------------------------------------------------------------------------
def _path_builder():
    built: list[int] = []

    def build() -> CameraPath:
        built.append(1)
        return CameraPath(name="p", c2w=np.tile(np.eye(4), (2, 1, 1)), K=K_CANVAS.copy(), fps=16.0, height=H,
                          width=W, phases={"V": (0, 2)})

    return build, built


def test_a_cached_path_is_built_once_with_read_only_arrays():
    build, built = _path_builder()
    p = memo.cached_path(("k", 1), build)
    assert memo.cached_path(("k", 1), build) is p and len(built) == 1
    assert not p.c2w.flags.writeable and not p.K.flags.writeable
    memo.clear()
    memo.cached_path(("k", 1), build)
    assert len(built) == 2


def test_a_path_is_built_every_time_when_switched_off_or_unkeyable():
    build, built = _path_builder()
    memo.cached_path(("k", object()), build), memo.cached_path(("k", object()), build)
    memo.set_enabled(False)
    p = memo.cached_path(("k", 1), build)
    memo.cached_path(("k", 1), build)
    assert len(built) == 4 and p.c2w.flags.writeable


def test_256_paths_are_kept():
    build, built = _path_builder()
    for i in range(257):
        memo.cached_path(("k", i), build)
    memo.cached_path(("k", 1), build)
    assert len(built) == 257
    memo.cached_path(("k", 0), build)
    assert len(built) == 258


# -- memo: image identities -------------------------------------------------------------------------------------------
def test_an_image_identity_is_its_skimage_name_or_its_file_state(tmp_path):
    assert memo.image_identity("skimage://astronaut") == ("skimage", "skimage://astronaut")
    f = tmp_path / "a.png"
    f.write_bytes(b"12345")
    st = os.stat(f)
    assert memo.image_identity(str(f)) == ("file", st.st_dev, st.st_ino, st.st_mtime_ns, 5)
    missing = str(tmp_path / "none.png")
    assert memo.image_identity(missing) == ("unreadable", missing)


# -- memo: encoded canvas files ---------------------------------------------------------------------------------------
def _canvas_source(value: int = 0):
    """A 2 x 3 RGB canvas (red, green, blue, ... ) whose calls are counted."""
    calls: list[int] = []

    def canvas() -> np.ndarray:
        calls.append(1)
        img = np.zeros((2, 3, 3), np.uint8)
        img[0, 0] = (255, 0, 0)
        img[0, 1] = (0, 255, 0)
        img[0, 2] = (0, 0, 255)
        img[1] = value
        return img

    return canvas, calls


def test_a_canvas_file_holds_the_rgb_canvas(tmp_path):
    canvas, calls = _canvas_source(7)
    memo.write_canvas_file(tmp_path / "a.png", ("img", 2, 3), canvas)
    assert np.array_equal(cv2.imread(str(tmp_path / "a.png"))[..., ::-1], canvas()) and len(calls) == 2


def test_a_second_canvas_file_of_one_identity_is_a_copy_of_the_first(tmp_path):
    canvas, calls = _canvas_source()
    memo.write_canvas_file(tmp_path / "a.png", ("img", 2, 3), canvas)
    memo.write_canvas_file(tmp_path / "b.png", ("img", 2, 3), canvas)
    assert len(calls) == 1 and (tmp_path / "b.png").read_bytes() == (tmp_path / "a.png").read_bytes()


def test_a_canvas_file_is_encoded_again_for_another_format_or_params(tmp_path):
    canvas, calls = _canvas_source()
    memo.write_canvas_file(tmp_path / "a.png", ("img",), canvas)
    memo.write_canvas_file(tmp_path / "b.jpg", ("img",), canvas)
    memo.write_canvas_file(tmp_path / "c.png", ("img",), canvas, params=(cv2.IMWRITE_PNG_COMPRESSION, 0))
    assert len(calls) == 3


def test_a_canvas_file_is_encoded_again_onto_itself(tmp_path):
    canvas, calls = _canvas_source()
    memo.write_canvas_file(tmp_path / "a.png", ("img",), canvas)
    memo.write_canvas_file(tmp_path / "a.png", ("img",), canvas)
    assert len(calls) == 2 and np.array_equal(cv2.imread(str(tmp_path / "a.png"))[..., ::-1], canvas())


def test_a_changed_first_file_is_not_copied(tmp_path):
    canvas, calls = _canvas_source()
    memo.write_canvas_file(tmp_path / "a.png", ("img",), canvas)
    (tmp_path / "a.png").write_bytes(b"changed")
    memo.write_canvas_file(tmp_path / "b.png", ("img",), canvas)
    assert len(calls) == 2 and np.array_equal(cv2.imread(str(tmp_path / "b.png"))[..., ::-1], canvas())


def test_a_canvas_file_without_identity_or_with_caches_off_is_encoded_every_time(tmp_path):
    first, _ = _canvas_source(10)
    second, _ = _canvas_source(20)
    memo.write_canvas_file(tmp_path / "a.png", None, first)
    memo.write_canvas_file(tmp_path / "b.png", None, second)
    assert cv2.imread(str(tmp_path / "b.png"))[1, 0, 0] == 20
    memo.set_enabled(False)
    memo.write_canvas_file(tmp_path / "c.png", ("img",), first)
    memo.write_canvas_file(tmp_path / "d.png", ("img",), second)
    assert cv2.imread(str(tmp_path / "d.png"))[1, 0, 0] == 20
    memo.set_enabled(True)
    memo.write_canvas_file(tmp_path / "e.png", ("img",), second)
    assert cv2.imread(str(tmp_path / "e.png"))[1, 0, 0] == 20  # nothing was recorded while off


def test_4096_canvas_files_are_remembered(tmp_path):
    canvas, calls = _canvas_source()
    memo.write_canvas_file(tmp_path / "first.png", ("first",), canvas)
    memo.write_canvas_file(tmp_path / "second.png", ("second",), canvas)
    for i in range(4094):  # stand-ins for files written before
        memo._FILES[(("old", i), ".png", ())] = (str(tmp_path / "none.png"), 0, 0)
    memo.write_canvas_file(tmp_path / "newest.png", ("newest",), canvas)  # the 4097th: the oldest goes
    assert len(calls) == 3
    memo.write_canvas_file(tmp_path / "second2.png", ("second",), canvas)
    assert len(calls) == 3
    memo.write_canvas_file(tmp_path / "first2.png", ("first",), canvas)
    assert len(calls) == 4


# -- the reference model ------------------------------------------------------------------------------------------------
def test_the_reference_room_defaults_to_the_documented_box():
    assert ReferenceConfig.from_dict(BASE).room == ROOM
    assert ReferenceConfig.from_dict(BASE).to_dict()["room"] == ROOM
    assert reference().room_for().x == 4.0


@pytest.mark.parametrize("room", [{"x": 1.0, "side": 1.0}, {"x": 0.0}, {"up": -1.0}, {"x": 1.0, "down": 0}])
def test_a_room_with_an_unknown_key_or_a_side_not_above_zero_is_refused(room):
    with pytest.raises(ModelConfigError, match=r"model\.room=.*: give positive half-extents for keys x, up, down, "
                                               r"front, back"):
        ReferenceConfig.from_dict({**BASE, "room": room})


def test_a_room_of_small_positive_half_extents_is_taken():
    room = {"x": 0.5, "up": 0.25, "down": 0.5, "front": 0.5, "back": 0.5}
    assert ReferenceConfig.from_dict({**BASE, "room": room}).room == room


def test_the_reference_rules_chain_to_the_rules_after_them():
    with pytest.raises(ModelConfigError, match="must be even"):
        EvenReferenceConfig.from_dict(BASE)
    assert EvenReferenceConfig.from_dict({**BASE, "num_frames": 10}).num_frames == 10


def _reference_request(a: ReferenceAdapter, case: Case, item_dir: Path, frames: int = 5) -> ItemRequest:
    c2w = np.tile(np.eye(4), (frames, 1, 1))
    c2w[:, 0, 3] = np.linspace(0.0, 0.1, frames)
    path = CameraPath(name="p", c2w=c2w, K=a.canvas_K(case), fps=16.0, height=H, width=W, phases={"V": (0, frames)})
    return ItemRequest(case=case, path=path, context=policy("fullkv"), seed=3, item_dir=item_dir)


def test_the_reference_controls_are_the_poses_intrinsics_and_policy(case, tmp_path):
    a = reference()
    req = _reference_request(a, case, tmp_path / "item")
    out = a.compile(req)
    d = tmp_path / "item" / "controls"
    assert out.files == {"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy"),
                         "context.json": str(d / "context.json")}
    assert np.array_equal(np.load(d / "poses.npy"), req.path.c2w) and np.array_equal(np.load(d / "intrinsics.npy"),
                                                                                        req.path.K)
    assert json.loads((d / "context.json").read_text()) == json.loads(json.dumps(req.context.to_dict()))
    assert out.command is None and out.decoded_c2w is None
    assert out.meta == {"translation_scale": {"units": "scene units", "mapping": "identity (the model renders the "
                                              "room in scene units)", "room": ROOM},
                        "latent_anchor_rule": "latent i -> frame 4i (latent 0 -> frame 0)"}


def test_the_reference_model_hands_every_frame_and_records_its_seed(case, tmp_path):
    a = reference()
    req = _reference_request(a, case, tmp_path / "item")
    frames: list[np.ndarray] = []
    out = a.generate(req, a.compile(req), frames.append)
    assert out.num_frames == 5 == len(frames) and out.fps == 16.0
    assert all(f.shape == (H, W, 3) and f.dtype == np.uint8 for f in frames)
    assert np.array_equal(frames[0], a.canvas_image_and_K(case)[0])
    assert out.meta["seed_identity"] == [3, "c1", "p"]
    assert out.meta["oracle_depth"] == {"kind": "room", "room": ROOM}
    assert out.meta["num_latents"] == 2 and "dynamic_event" not in out.meta
