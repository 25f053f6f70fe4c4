"""Every config combination composes, and its config objects instantiate (no model is built)."""

from __future__ import annotations

import itertools

import pytest

from adapters.base import build_adapter
from harness.config_groups import list_group
from tests.support import compose

MODELS = list_group("model")
CONTEXTS = list_group("context")
TRAJECTORIES = list_group("trajectory")


def _combinations() -> list:
    """Every (model, context, trajectory); the fast tier runs a cover of the pairs that interact: every model with
    every context (the policy is resolved against the adapter) and every context with every trajectory (trajectory
    index = model index + context index, modulo the number of trajectories). A model and a trajectory do not meet in
    a composition (``test_a_trajectory_option_sets_its_own_package_only``); the full product is marked slow (the
    suite runs it)."""
    cover = {(m, c, TRAJECTORIES[(i + j) % len(TRAJECTORIES)])
             for i, m in enumerate(MODELS) for j, c in enumerate(CONTEXTS)}
    return [c if c in cover else pytest.param(*c, marks=pytest.mark.slow)
            for c in itertools.product(MODELS, CONTEXTS, TRAJECTORIES)]


def test_the_fast_combinations_cover_every_interacting_pair():
    fast = {c for c in _combinations() if type(c) is tuple}  # a slow one is a pytest.param (a NamedTuple)
    assert {(m, c) for m, c, _ in fast} == set(itertools.product(MODELS, CONTEXTS))
    assert {(c, t) for _, c, t in fast} == set(itertools.product(CONTEXTS, TRAJECTORIES))
    assert len(fast) == len(MODELS) * len(CONTEXTS)


def test_a_trajectory_option_sets_its_own_package_only():
    """Why no (model, trajectory) pair is needed in the fast tier: a trajectory option could change another package
    only through a ``# @package`` header or a ``defaults:`` entry outside its group, and a model option could read
    the trajectory only through an interpolation. Neither happens, in any option or the files they draw in."""
    import re

    import yaml

    from harness.config_groups import option_file

    files = {option_file("trajectory", t) for t in TRAJECTORIES}
    for path in list(files):
        for entry in yaml.safe_load(path.read_text()).get("defaults", []):
            assert isinstance(entry, str) and "/" not in entry and not entry.startswith("override"), (path, entry)
            if entry != "_self_":
                files.add(option_file("trajectory", entry))
    for path in files:
        text = path.read_text()
        assert "@package" not in text and "${" not in text, path
    models = {option_file("model", m) for m in MODELS}
    models |= {option_file("model", d) for p in models for d in yaml.safe_load(p.read_text()).get("defaults", [])
               if isinstance(d, str) and d != "_self_"}
    assert any(p.stem == "_upstream_base" for p in models)  # the models' shared base is read too
    for path in models:
        assert not re.search(r"\$\{[^}]*trajectory", path.read_text()), path


@pytest.mark.parametrize("model,context,trajectory", _combinations())
def test_every_combination_composes_and_instantiates(model, context, trajectory):
    from trajectories import TrajectorySpec

    cfg = compose([f"model={model}", f"context={context}", f"trajectory={trajectory}"])
    from harness.app.runner import resolve_context

    adapter = build_adapter(cfg["model"])
    assert adapter.config.name == model
    policy = resolve_context(cfg["context"], adapter)
    assert policy.name == (adapter.config.paper_context if context == "paper" else context)
    spec = TrajectorySpec.from_dict(cfg["trajectory"])
    assert spec.name == trajectory


@pytest.mark.parametrize("group", ["launcher", "experiment", "debug", "cases", "evaluate"])
def test_every_option_of_other_groups_composes(group):
    for name in list_group(group):
        overrides = [f"{group}={name}"]
        if group == "cases" and name == "folder":
            overrides.append("cases.source=/tmp")
        cfg = compose(overrides)
        assert cfg["model"]["name"]


@pytest.mark.slow
def test_yaml_files_and_registry_agree():
    """Each model YAML names an importable adapter whose typed config accepts exactly its keys."""
    for model in MODELS:
        cfg = compose([f"model={model}"])
        adapter = build_adapter(cfg["model"])
        assert set(cfg["model"]) <= set(adapter.config.to_dict())


def test_unknown_model_key_fails_with_field_name():
    from adapters.base import ModelConfigError

    cfg = compose(["model=reference", "+model.heigth=3"])
    with pytest.raises(ModelConfigError, match="heigth"):
        build_adapter(cfg["model"])


def test_defaults_are_the_documented_ones():
    cfg = compose([])
    assert (cfg["model"]["name"], cfg["context"]["name"], cfg["trajectory"]["name"], cfg["cases"]["name"]) == (
        "reference", "fov", "lrlr", "demo")


def test_budgets_of_the_paper():
    from harness.context import ContextPolicy

    sl = ContextPolicy.from_dict(compose(["context=sliding"])["context"])
    fov = ContextPolicy.from_dict(compose(["context=fov"])["context"])
    assert (sl.sink, sl.recent, sl.chunk, sl.budget) == (4, 12, 4, 20)
    assert (fov.sink, fov.recent, fov.retrieved_chunks * fov.chunk, fov.chunk, fov.budget) == (4, 4, 8, 4, 20)


@pytest.mark.slow
def test_upstream_models_share_a_base_that_is_not_a_model():
    """``conf/model/_upstream_base.yaml`` (in the ``conf`` package: a base, not a model) reaches the nine upstream
    models, whose configs live in their own folders, through Hydra ``defaults:``; the raw reader (``group_yaml``)
    merges it as Hydra does, and neither ``list`` nor ``model=`` offers it."""
    from adapters.goldens import MODELS as UPSTREAM
    from harness.config_groups import UnknownChoiceError, check_choice, group_yaml

    assert "_upstream_base" not in MODELS
    with pytest.raises(UnknownChoiceError):
        check_choice("model", "_upstream_base")
    for model in MODELS:
        composed = compose([f"model={model}"])["model"]
        assert composed == group_yaml("model", model), model
        assert ("upstream_dir" in composed) == (model in UPSTREAM), model
    over = compose(["model=evoke", "model.checkpoint=/w"])["model"]
    assert over["checkpoint"] == "/w" and over["python"] is None
    from harness.config_groups import GROUPS
    from harness.config_groups import list_group as options

    for group in GROUPS:  # other groups' defaults (overrides of other packages) are returned as written
        for name in options(group):
            assert isinstance(group_yaml(group, name), dict), (group, name)
    assert group_yaml("launcher", "basic")["defaults"]


def test_translation_scale_is_a_typed_record():
    """One spelling: ``units`` + ``per_scene_unit`` (+ ``expects``); the old spellings fail naming the new key."""
    from adapters.base import ModelConfigError, TranslationScale

    mg3 = build_adapter(compose(["model=matrix_game3"])["model"])
    ts = mg3.config.translation_scale
    assert isinstance(ts, TranslationScale) and (ts.units, ts.per_scene_unit, ts.recoverable) == ("metres", 7.0, True)
    assert mg3.scene_scale() == 7.0 and mg3.config.params().metres_per_unit == 7.0
    lb = build_adapter(compose(["model=lingbot_v2"])["model"]).config.translation_scale
    assert lb.units == "normalised" and not lb.recoverable
    assert mg3.config.to_dict()["translation_scale"]["recoverable"] is True
    for bad, match in (({"metres_per_scene_unit": 7.0}, "write per_scene_unit \\(units: metres\\)"),
                       ({"units": "feet"}, "translation_scale.units='feet'"),
                       ({"per_scene_unit": 0}, "per_scene_unit=0")):
        with pytest.raises(ModelConfigError, match=match):
            build_adapter({**compose(["model=sana_wm"])["model"], "translation_scale": bad})


@pytest.mark.parametrize("section, override, error", [
    ("context", {"recnt": 4}, "ContextConfigError"),
    ("trajectory", {"cycle": 2}, "TrajectoryError"),
    ("model", {"heigth": 96}, "ModelConfigError"),
])
def test_unknown_fields_are_named_with_a_suggestion(section, override, error):
    """Every typed section refuses an unknown key the same way: dotted key, did-you-mean, allowed list."""
    from adapters.base import build_adapter
    from harness.context import ContextPolicy
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec

    build = {"context": lambda d: ContextPolicy.from_dict({**group_yaml("context", "sliding"), **d}),
             "trajectory": lambda d: TrajectorySpec.from_dict({**group_yaml("trajectory", "lrlr"), **d}),
             "model": lambda d: build_adapter({**group_yaml("model", "reference"), **d})}[section]
    with pytest.raises(Exception) as exc:
        build(override)
    key = next(iter(override))
    assert type(exc.value).__name__ == error
    msg = str(exc.value)
    assert msg.startswith(f"{section}.{key}: unknown field"), msg
    assert "did you mean" in msg and "allowed:" in msg
