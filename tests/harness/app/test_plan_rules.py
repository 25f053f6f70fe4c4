"""The rules of planning a run from its configuration (harness/app/plan.py) and of the typed configuration itself
(harness/app/run_config.py, harness/app/settings.py), one at a time and in this process: trajectory names and the
label a trajectory's ``name`` gives its path, the up-front build of every camera path and the compile probe, the
even canvas, shards and seeds; RunConfig's defaults, its cross-section rules (``local``, ``context=paper``) and the
missing-section errors. The plans are the real ones of the weight-free reference model (96 x 160, two demo cases,
``lrlr``); the path-build and compile probes are also driven by a recording stand-in adapter, to see each call."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from types import SimpleNamespace

import pydantic
import pytest
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from adapters.base import ModelConfigError, UnsupportedContextError
from adapters.reference.adapter import ReferenceAdapter
from harness import config_groups, gpu_pool
from harness.app import plan as plan_module
from harness.app.plan import (
    check_compile,
    check_trajectories,
    check_trajectory_names,
    make_plan,
    plan_from_config,
    resolve_context,
)
from harness.app.run_config import LocalSettings, PathsSettings, RunConfig, SetupSettings, paper_resolved, parse_shard
from harness.app.settings import compose_config, load_run_config, sweep_jobs
from harness.cases import load_cases_from_config
from harness.config_groups import UnknownChoiceError, group_yaml
from harness.context import ContextPolicy
from harness.context.policies import FullKV, Paper
from harness.errors import ConfigError, UserError
from harness.outputs import PlanError, WorkItem
from tests.support.run_configs import SMALL_REFERENCE, composed
from trajectories import TrajectoryError, TrajectorySpec

ROCKET, ASTRONAUT = "environment_rocket", "human_astronaut"


@pytest.fixture(scope="module")
def raw() -> dict:
    """The composed small config as a plain mapping (read-only: every test copies what it changes)."""
    return composed(*SMALL_REFERENCE)


@pytest.fixture(scope="module")
def cfg(raw) -> RunConfig:
    return load_run_config(raw)


@pytest.fixture(scope="module")
def cases(cfg):
    return load_cases_from_config(cfg.cases)


@pytest.fixture
def plan_of(cfg, tmp_path):
    """The plan of the small config under ``tmp_path`` with top-level ``changes``."""
    def make(for_writing: bool = True, **changes):
        return plan_from_config(cfg.replace(output_root=str(tmp_path), **changes), for_writing=for_writing)

    return make


def _with(raw: dict, section: str, **changes) -> dict:
    """``raw[section]`` with ``changes``: a new mapping, for ``cfg.replace(section=...)``."""
    return {**raw[section], **changes}


class Recorder:
    """A stand-in adapter that records each path build and compile; ``fail`` maps a trajectory name to the
    exception its path build (``"path"``) or compile (``"compile"``) raises."""

    def __init__(self, fail: dict | None = None):
        self.config = SimpleNamespace(name="m")
        self.calls: list[tuple] = []
        self.fail = fail or {}

    def canvas_K(self, case):
        return f"K-{case.id}"

    def path_for(self, spec, K, name):
        self.calls.append(("path", spec, K, name))
        if ("path", name) in self.fail:
            raise self.fail["path", name]
        return f"path-{name}-{K}"

    def compile(self, req):
        self.calls.append(("compile", req))
        name = req.path.split("-")[1]
        if ("compile", name) in self.fail:
            raise self.fail["compile", name]


def _item(trajectory: str, case_id: str, seed: int = 1) -> WorkItem:
    return WorkItem("m", "fov", seed, trajectory, case_id)


# -- make_plan ---------------------------------------------------------------------------------------------------
def test_items_are_ordered_by_trajectory_then_case_and_a_shard_takes_every_nth(cases):
    specs = {"lrud": TrajectorySpec.from_dict(group_yaml("trajectory", "lrud")),
             "lrlr": TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr"))}
    every = make_plan("m", "fov", 3, specs, list(reversed(cases)))
    assert [(i.trajectory, i.case_id) for i in every] == [
        ("lrlr", ROCKET), ("lrlr", ASTRONAUT), ("lrud", ROCKET), ("lrud", ASTRONAUT)]
    assert {(i.model, i.context, i.seed) for i in every} == {("m", "fov", 3)}
    assert make_plan("m", "fov", 3, specs, cases, "1/2") == [every[1], every[3]]
    assert make_plan("m", "fov", 3, specs, cases, "0/3") == [every[0], every[3]]


def test_a_case_that_does_not_list_a_trajectory_gets_no_item_of_it(cases):
    only_lrlr = cases[0].model_copy(update={"trajectories": ["lrlr"]})
    specs = {"lrud": TrajectorySpec.from_dict(group_yaml("trajectory", "lrud"))}
    assert make_plan("m", "fov", 1, specs, [only_lrlr, cases[1]]) == [_item("lrud", ASTRONAUT)]


# -- plan_from_config ----------------------------------------------------------------------------------------------
def test_the_plan_of_a_small_config_holds_its_items_cases_and_run_folder(plan_of, cfg, tmp_path):
    plan = plan_of()
    keys = ["reference/fov/seed-1/lrlr/environment_rocket", "reference/fov/seed-1/lrlr/human_astronaut"]
    assert [i.key for i in plan.items] == keys
    assert plan.all_items == plan.items
    assert plan.run_dir == (tmp_path / "default").resolve()
    assert plan.run.path == plan.run_dir
    assert list(plan.case_by_id) == [ROCKET, ASTRONAUT]
    assert plan.specs == {"lrlr": cfg.trajectory}
    assert plan.policy == cfg.context and plan.policy.name == "fov"
    assert plan.config.output_root == str(tmp_path)
    assert plan.recorded.config["output_root"] == str(tmp_path)
    assert plan.pool is None
    assert isinstance(plan.adapter, ReferenceAdapter) and plan.adapter.config.name == "reference"


def test_a_plain_mapping_is_typed_before_planning(raw, tmp_path):
    plan = plan_from_config({**raw, "output_root": str(tmp_path)})
    assert plan.config.raw["output_root"] == str(tmp_path)
    assert len(plan.items) == 2


def test_the_seed_is_the_models_default_unless_one_is_given(plan_of):
    assert {i.seed for i in plan_of().items} == {1}
    assert {i.seed for i in plan_of(seed=7).items} == {7}
    assert {i.seed for i in plan_of(seed=0).items} == {0}


def test_a_shard_plans_its_share_of_the_items_and_knows_all_of_them(plan_of):
    plan = plan_of(shard="1/2")
    assert [i.case_id for i in plan.items] == [ASTRONAUT]
    assert [i.case_id for i in plan.all_items] == [ROCKET, ASTRONAUT]


def test_trajectories_take_the_chosen_spec_by_its_name_and_the_others_from_their_files(plan_of, raw):
    plan = plan_of(trajectories=["lrud", "lrlr"], trajectory=_with(raw, "trajectory", yaw_deg=45.0))
    assert list(plan.specs) == ["lrud", "lrlr"]
    assert plan.specs["lrlr"].yaw_deg == 45.0
    assert plan.specs["lrud"] == TrajectorySpec.from_dict(group_yaml("trajectory", "lrud"))
    assert [(i.trajectory, i.case_id) for i in plan.items] == [
        ("lrlr", ROCKET), ("lrlr", ASTRONAUT), ("lrud", ROCKET), ("lrud", ASTRONAUT)]


def test_a_bad_name_in_trajectories_is_refused_before_any_file_is_read(plan_of):
    with pytest.raises(PlanError, match=r"^trajectories='\.\./x': not a plain name"):
        plan_of(trajectories=["../x"])


def test_a_context_the_model_cannot_run_is_refused_at_planning(plan_of):
    with pytest.raises(UnsupportedContextError,
                       match=r"^model=reference does not support context=native: no built-in memory mode"):
        plan_of(context={"name": "native"})


def test_context_paper_plans_the_models_main_table_policy(plan_of):
    plan = plan_of(context={"name": "paper"})
    assert type(plan.policy) is FullKV
    assert {i.context for i in plan.items} == {"fullkv"}


@pytest.mark.parametrize("height, width", [(97, 160), (96, 161), (97, 161)])
def test_an_odd_canvas_side_is_refused_naming_both_and_the_even_height(plan_of, raw, height, width):
    with pytest.raises(ModelConfigError) as err:
        plan_of(model=_with(raw, "model", height=height, width=width))
    assert str(err.value) == (f"model.height/model.width = {height}x{width}: both must be even (H.264 4:2:0 video); "
                              f"e.g. model.height={height + height % 2}")


def test_an_even_canvas_that_is_not_a_multiple_of_three_or_four_is_planned(plan_of, raw):
    plan = plan_of(model=_with(raw, "model", height=98, width=166))
    assert (plan.adapter.config.height, plan.adapter.config.width) == (98, 166)


def test_an_impossible_camera_path_fails_at_planning_naming_the_trajectory_and_the_first_case(plan_of, raw):
    with pytest.raises(TrajectoryError) as err:
        plan_of(trajectory=_with(raw, "trajectory", yaw_deg=400.0))
    assert str(err.value).startswith("trajectory.yaw_deg=400.0: a departure must be >= 30.0 deg")
    assert str(err.value).endswith(" (trajectory 'lrlr', case 'environment_rocket')")


def test_an_unwritable_output_root_is_refused_only_when_planning_for_writing(plan_of, cfg, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(PlanError, match=r"^output_root: cannot write under .*file \(read-only or no permission\)"):
        plan_from_config(cfg.replace(output_root=str(tmp_path), run="file/r"))  # planning for writing by default
    assert plan_of(for_writing=False, run="file/r").run_dir == (tmp_path / "file" / "r").resolve()


def test_a_setting_the_model_refuses_at_compile_fails_the_plan_naming_the_first_item(plan_of, monkeypatch):
    compiled = []

    def refuse(self, req):
        compiled.append(req.item_dir.name)
        raise UserError("num_frames=65 would be time-warped")

    monkeypatch.setattr(ReferenceAdapter, "compile", refuse)
    with pytest.raises(PlanError) as err:
        plan_of()
    assert str(err.value) == ("model=reference: num_frames=65 would be time-warped (found compiling "
                              "reference/fov/seed-1/lrlr/environment_rocket at planning; nothing was written)")
    assert len(compiled) == 1 and compiled[0].endswith("-lrlr")
    assert plan_of(for_writing=False).items  # reading a finished run compiles nothing
    assert len(compiled) == 1


# -- check_trajectories ------------------------------------------------------------------------------------------
def test_each_trajectory_and_case_path_is_built_once_with_that_cases_canvas(cases):
    ad = Recorder()
    specs = {"lrlr": "spec-lrlr", "lrud": "spec-lrud"}
    items = [_item("lrlr", ROCKET), _item("lrlr", ROCKET, seed=2), _item("lrud", ASTRONAUT), _item("lrlr", ASTRONAUT),
             _item("lrud", ASTRONAUT, seed=5)]
    check_trajectories(ad, specs, cases, items)
    assert ad.calls == [("path", "spec-lrlr", "K-environment_rocket", "lrlr"),
                        ("path", "spec-lrud", "K-human_astronaut", "lrud"),
                        ("path", "spec-lrlr", "K-human_astronaut", "lrlr")]


def test_a_path_that_cannot_be_built_names_its_trajectory_and_case(cases):
    ad = Recorder(fail={("path", "lrud"): TrajectoryError("too short")})
    with pytest.raises(TrajectoryError) as err:
        check_trajectories(ad, {"lrlr": "a", "lrud": "b"}, cases, [_item("lrlr", ROCKET), _item("lrud", ASTRONAUT)])
    assert str(err.value) == "too short (trajectory 'lrud', case 'human_astronaut')"


# -- check_compile and its scratch folder ------------------------------------------------------------------------
def test_the_first_item_of_each_trajectory_is_compiled_into_a_scratch_folder(cases):
    ad = Recorder()
    policy = FullKV()
    items = [_item("lrud", ASTRONAUT, seed=4), _item("lrlr", ROCKET, seed=3), _item("lrud", ROCKET),
             _item("lrlr", ASTRONAUT)]
    check_compile(ad, policy, {"lrlr": "sa", "lrud": "sb"}, cases, items)
    reqs = [c[1] for c in ad.calls if c[0] == "compile"]
    assert [(r.case.id, r.path, r.seed, r.context) for r in reqs] == [
        (ASTRONAUT, "path-lrud-K-human_astronaut", 4, policy), (ROCKET, "path-lrlr-K-environment_rocket", 3, policy)]
    assert [c[1:] for c in ad.calls if c[0] == "path"] == [("sb", "K-human_astronaut", "lrud"),
                                                          ("sa", "K-environment_rocket", "lrlr")]
    scratch = plan_module._scratch()
    for r, t in zip(reqs, ("lrud", "lrlr")):
        assert r.item_dir.parent == scratch
        n, _, name = r.item_dir.name.partition("-")
        assert n.isdigit() and name == t
    assert int(reqs[1].item_dir.name.split("-")[0]) == int(reqs[0].item_dir.name.split("-")[0]) + 1


def test_a_compile_that_fails_for_another_reason_is_left_to_the_run(cases):
    ad = Recorder(fail={("compile", "lrlr"): RuntimeError("no GPU")})
    check_compile(ad, FullKV(), {"lrlr": "sa", "lrud": "sb"}, cases, [_item("lrlr", ROCKET), _item("lrud", ROCKET)])
    assert [c[1].path for c in ad.calls if c[0] == "compile"] == ["path-lrlr-K-environment_rocket",
                                                                 "path-lrud-K-environment_rocket"]


def test_a_compile_that_refuses_a_setting_stops_the_plan(cases):
    ad = Recorder(fail={("compile", "lrud"): UserError("size 97 is odd")})
    with pytest.raises(PlanError) as err:
        check_compile(ad, FullKV(), {"lrlr": "sa", "lrud": "sb"}, cases,
                      [_item("lrlr", ROCKET), _item("lrud", ASTRONAUT)])
    assert str(err.value) == ("model=m: size 97 is odd (found compiling m/fov/seed-1/lrud/human_astronaut at "
                              "planning; nothing was written)")


def test_the_scratch_folder_is_made_once_under_the_temp_dir_and_removed_at_exit(tmp_path, monkeypatch):
    registered = []
    monkeypatch.setattr(plan_module, "_SCRATCH", [])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(atexit, "register", lambda *a: registered.append(a))
    first = plan_module._scratch()
    assert first.is_dir() and first.parent == tmp_path and first.name.startswith("harness-plan-")
    assert plan_module._scratch() == first
    assert plan_module._SCRATCH == [first]
    assert registered == [(shutil.rmtree, first, True)]


# -- check_trajectory_names --------------------------------------------------------------------------------------
@pytest.mark.parametrize("changes, message", [
    ({"trajectories": ["lrlr", "a b"]}, "trajectories='a b': not a plain name"),
    ({"trajectory": "a b"}, "trajectory.name='a b': not a plain name"),
    ({"trajectories": ["lrlr"], "trajectory": "a/b"}, "trajectory.name='a/b': not a plain name"),
])
def test_each_trajectory_name_must_be_a_plain_name_named_by_its_setting(cfg, raw, changes, message):
    if "trajectory" in changes:
        changes = {**changes, "trajectory": _with(raw, "trajectory", name=changes["trajectory"])}
    c = cfg.replace(**changes)
    with pytest.raises(PlanError) as err:
        check_trajectory_names(c, c.trajectories or [c.trajectory.name])
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("names, label", [(["lrlr", "lrx"], "lrlr"), (["lrlr"], "lrx")])
def test_each_trajectory_name_must_be_an_option_of_the_group(cfg, raw, names, label):
    c = cfg.replace(trajectory=_with(raw, "trajectory", name=label))
    with pytest.raises(UnknownChoiceError, match=r"^Unknown trajectory 'lrx'\."):
        check_trajectory_names(c, names)


@pytest.mark.parametrize("label, k, have, want", [
    ("lrud", "cycles", ["left", "left"], ["left", "up"]),
    ("lrlrlr", "cycles", ["left", "left"], ["left", "left", "left"]),
    ("square", "kind", "rotation", "square"),
])
def test_a_name_that_labels_another_trajectorys_path_is_refused(cfg, raw, label, k, have, want):
    c = cfg.replace(trajectory=_with(raw, "trajectory", name=label))
    with pytest.raises(PlanError) as err:
        check_trajectory_names(c, [label])
    assert str(err.value) == (f"trajectory.name={label!r} labels a path whose {k} is {have!r}, but trajectory "
                              f"{label!r} has {want!r}: the name is the item folder and the label the analyses "
                              f"read; choose trajectory={label} instead of renaming (or drop trajectory.name)")


def test_the_chosen_trajectory_under_its_own_name_passes(cfg, raw):
    check_trajectory_names(cfg, ["lrlr"])
    check_trajectory_names(cfg, ["lrlr", "lrud", "square"])
    square = cfg.replace(trajectory=group_yaml("trajectory", "square"))
    check_trajectory_names(square, ["square"])


@pytest.mark.parametrize("text, spec", [
    ("", {"kind": "rotation", "cycles": ["up"]}),                      # an empty file: nothing to compare
    ("kind: rotation\n", {"kind": "rotation", "cycles": ["up"]}),      # no cycles: any cycles
    ("cycles: null\n", {"kind": "square", "cycles": []}),              # null cycles: none
    ("cycles: [up]\n", {"kind": "square", "cycles": ["up"]}),          # no kind: any kind
])
def test_only_the_kind_and_cycles_the_labels_file_states_are_compared(cfg, tmp_path, monkeypatch, text, spec):
    (tmp_path / "trajectory").mkdir()
    (tmp_path / "trajectory" / "mine.yaml").write_text(text)
    dirs = config_groups.search_dirs()
    monkeypatch.setattr(config_groups, "search_dirs", lambda: [tmp_path, *dirs])
    c = cfg.replace(trajectory={"name": "mine", **spec})
    check_trajectory_names(c, ["mine"])
    if "cycles" in text and "null" in text:
        with pytest.raises(PlanError, match=r"cycles is \['up'\], but trajectory 'mine' has \[\]"):
            check_trajectory_names(cfg.replace(trajectory={"name": "mine", **spec, "cycles": ["up"]}), ["mine"])


def test_resolve_context_turns_paper_into_the_models_policy(cfg):
    adapter = SimpleNamespace(config=SimpleNamespace(paper_context="sliding"))
    assert resolve_context({"name": "paper"}, adapter) == ContextPolicy.from_dict(group_yaml("context", "sliding"))
    fov = ContextPolicy.from_dict(group_yaml("context", "fov"))
    assert resolve_context(group_yaml("context", "fov"), adapter) == fov
    assert resolve_context(fov, adapter) is fov


# -- run_config: parse_shard, paper_resolved ---------------------------------------------------------------------
@pytest.mark.parametrize("shard, parsed", [("0/1", (0, 1)), ("1/2", (1, 2)), ("3/4", (3, 4))])
def test_a_shard_is_i_of_n(shard, parsed):
    assert parse_shard(shard) == parsed


@pytest.mark.parametrize("shard", ["2/2", "5/4", "-1/2", "0/0", "1/0", "0/-1"])
def test_a_shard_outside_zero_to_n_is_refused(shard):
    with pytest.raises(PlanError) as err:
        parse_shard(shard)
    assert str(err.value) == f"shard={shard!r}: need n >= 1 and 0 <= i < n"


@pytest.mark.parametrize("shard", ["1", "1/2/3", "a/2", "", "1/2.0"])
def test_a_shard_not_written_i_slash_n_is_refused(shard):
    with pytest.raises(PlanError) as err:
        parse_shard(shard)
    assert str(err.value) == f"shard={shard!r}: use 'i/n', e.g. 0/4"


def test_paper_becomes_the_named_policy_and_any_other_policy_is_kept():
    assert paper_resolved(Paper(), "sliding") == ContextPolicy.from_dict(group_yaml("context", "sliding"))
    fov = ContextPolicy.from_dict(group_yaml("context", "fov"))
    assert paper_resolved(fov, "sliding") is fov


# -- RunConfig: scalars and defaults -----------------------------------------------------------------------------
def test_a_numeric_run_name_is_read_as_text():
    assert RunConfig.from_mapping({"run": 2}).run == "2"
    assert RunConfig.from_mapping({"run": 0}).run == "0"


@pytest.mark.parametrize("run", [True, 2.5, ["a"], None])
def test_a_run_name_that_is_no_text_or_integer_is_refused(run):
    with pytest.raises(ConfigError, match=r"^run="):
        RunConfig.from_mapping({"run": run})


def test_the_defaults_of_an_empty_config():
    c = RunConfig.from_mapping({})
    assert (c.cmd, c.stage, c.run, c.output_root, c.shard, c.verbosity) == (
        "run", "all", "default", "outputs", "0/1", "info")
    assert (c.dry_run, c.previews, c.overwrite, c.progress, c.print_script) == (False, False, False, True, False)
    assert (c.seed, c.trajectories, c.devices, c.model, c.context, c.trajectory, c.backend) == (None,) * 7
    assert c.setup.optional_steps is False and c.setup.forks == {} and c.paths.weights is None
    assert c.evaluate_enabled is True and c.weights_dir is None and c.served is None and c.raw == {}
    assert RunConfig.from_mapping({"print": True}).print_script is True
    assert RunConfig.from_mapping({"paths": {"weights": "/w"}}).weights_dir == "/w"


@pytest.mark.parametrize("section, key, value", [
    (None, "run", "x"), ("setup", "root", "/r"), ("paths", "weights", "/w"), ("local", "models", {}),
])
def test_the_config_and_each_section_are_frozen(section, key, value):
    c = RunConfig.from_mapping({"local": {}})
    target = c if section is None else getattr(c, section)
    assert isinstance(target, (RunConfig, SetupSettings, PathsSettings, LocalSettings))
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        setattr(target, key, value)


@pytest.mark.parametrize("devices", [None, "auto", "0,1", [0, 1], 3, ["GPU-abc"]])
def test_devices_are_checked_without_detecting_any_gpu(devices, monkeypatch):
    monkeypatch.setattr(gpu_pool, "detect_devices", lambda: pytest.fail("GPUs detected while reading the config"))
    assert RunConfig.from_mapping({"devices": devices}).devices == devices


@pytest.mark.parametrize("devices, needle", [("x", "devices='x': 'x' is not a GPU index or UUID"),
                                             ("0,0", "devices='0,0': a GPU is listed twice"),
                                             ([1, "y"], "devices=[1, 'y']: 'y' is not a GPU index or UUID")])
def test_a_bad_device_list_is_refused(devices, needle):
    with pytest.raises(UserError) as err:
        RunConfig.from_mapping({"devices": devices})
    assert needle in str(err.value)


# -- RunConfig: across sections ----------------------------------------------------------------------------------
def test_this_machines_settings_for_the_chosen_model_are_merged_into_it(raw):
    local = {"models": {"reference": {"seed": 5}}}
    assert RunConfig.from_mapping({"model": raw["model"], "local": local}).model.seed == 5
    assert RunConfig.from_mapping({"model": raw["model"]}).model.seed == 1
    assert RunConfig.from_mapping({"model": None, "local": local}).model is None
    assert RunConfig.from_mapping({"local": local}).local.models == {"reference": {"seed": 5}}


def test_a_typed_config_validates_as_itself_and_anything_but_a_mapping_is_refused(cfg):
    assert RunConfig.model_validate(cfg) == cfg
    for data in ("x", [1], 3):
        with pytest.raises(PlanError) as exc:
            RunConfig.from_dict(data)
        assert str(exc.value) == f"config={data!r}: give a mapping of its settings"


def test_context_paper_is_resolved_only_when_a_model_is_chosen(raw):
    with_model = RunConfig.from_mapping({"model": raw["model"], "context": {"name": "paper"}})
    assert type(with_model.context) is FullKV
    sliding = RunConfig.from_mapping({"model": {**raw["model"], "paper_context": "sliding"}, "context": {"name": "paper"}})
    assert sliding.context == ContextPolicy.from_dict(group_yaml("context", "sliding"))
    assert type(RunConfig.from_mapping({"context": {"name": "paper"}}).context) is Paper
    assert RunConfig.from_mapping({"model": raw["model"]}).context is None


@pytest.mark.parametrize("mapping, missing", [
    ({}, "model"), ({"model": "M"}, "context"), ({"model": "M", "context": {"name": "fullkv"}}, "trajectory"),
    ({"context": {"name": "fullkv"}, "trajectory": "T"}, "model"),
])
def test_a_command_that_runs_one_model_names_the_first_missing_section(raw, mapping, missing):
    mapping = {k: raw[k] if v == "M" else (raw["trajectory"] if v == "T" else v) for k, v in mapping.items()}
    with pytest.raises(PlanError) as err:
        RunConfig.from_mapping(mapping).chosen()
    assert str(err.value) == f"{missing}: required; choose one: {missing}=<name> (`python -m harness list`)"


def test_chosen_gives_the_model_the_context_and_the_trajectory(cfg):
    assert cfg.chosen() == (cfg.model, cfg.context, cfg.trajectory)


def test_coerce_keeps_a_typed_config_and_types_a_mapping(cfg):
    assert RunConfig.coerce(cfg) is cfg
    typed = RunConfig.coerce({"seed": 4})
    assert isinstance(typed, RunConfig) and typed.seed == 4 and typed.raw == {"seed": 4}


def test_replace_changes_the_typed_form_and_the_recorded_mapping(cfg):
    c = cfg.replace(seed=9, run="r2")
    assert (c.seed, c.run, c.raw["seed"], c.raw["run"]) == (9, "r2", 9, "r2")
    assert cfg.seed is None and cfg.raw["seed"] is None


def test_served_is_the_serving_engines_settings_only_for_a_served_backend():
    sg = RunConfig.from_mapping({"backend": {"name": "sglang"}, "endpoint": "ws://127.0.0.1:1"})
    assert sg.served is sg.backend and sg.served.name == "sglang"
    assert RunConfig.from_mapping({"backend": {"name": "upstream"}}).served is None


# -- settings ----------------------------------------------------------------------------------------------------
def test_load_run_config_keeps_the_mapping_it_typed(raw, cfg):
    assert isinstance(cfg, RunConfig) and cfg.raw == raw and cfg.model.name == "reference"
    assert "hydra" not in raw  # compose_config leaves Hydra's own settings out unless asked


def test_compose_config_composes_even_when_hydra_is_already_initialised_and_leaves_it_cleared():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        assert GlobalHydra.instance().is_initialized()
        listing = compose_config(["cmd=list"])
        assert listing.cmd == "list"
        assert not GlobalHydra.instance().is_initialized()


def test_a_sweep_expands_the_experiments_parameters_then_the_command_lines():
    jobs = sweep_jobs(["experiment=demo_sweep", "seed=1,2"])
    assert jobs == [[f"trajectory={t}", "experiment=demo_sweep", f"seed={s}"]
                    for t in ("lrlr", "lrlrlr", "lrud", "square") for s in (1, 2)]
