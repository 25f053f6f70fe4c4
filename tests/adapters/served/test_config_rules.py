"""The served backend's settings rules one at a time, in process (``adapters/served/config.py``), on the shipped
engine configurations (``conf/backend/sglang.yaml``, ``conf/backend/vllm_omni.yaml``) with one value changed at a
time: the engine and route each backend defaults to, the routes each client refuses, the positive pairs of a
model's mapping and the key kinematics a pose-driven model drops."""

from __future__ import annotations

import copy

import pytest

from adapters.served.config import ROUTE_REFUSALS, ROUTES, BackendConfig, BackendConfigError, ServedModel
from harness.config_groups import group_yaml

SGLANG = group_yaml("backend", "sglang")
VLLM = group_yaml("backend", "vllm_omni")


def _with(base: dict, **changes) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _model(base: dict, model: str, **changes) -> dict:
    out = copy.deepcopy(base)
    out["models"][model].update(changes)
    return out


def _refused(data: dict, *needles: str) -> str:
    with pytest.raises(BackendConfigError) as info:
        BackendConfig.from_dict(data)
    text = str(info.value)
    assert all(n in text for n in needles), text
    return text


def test_a_backend_named_after_its_engine_gets_that_engine_and_its_route():
    got = BackendConfig.from_dict(_with(SGLANG, engine=None, route=None))
    assert (got.engine, got.route) == ("sglang", "/v1/realtime_video/generate")
    got = BackendConfig.from_dict(_with(VLLM, engine=None, route=None))
    assert (got.engine, got.route) == ("vllm_omni", ROUTES["vllm_omni"][0])
    # a backend of another name names its engine; without one it is refused naming the key
    got = BackendConfig.from_dict(_with(SGLANG, name="my_gateway", route=None))
    assert (got.name, got.engine, got.route) == ("my_gateway", "sglang", "/v1/realtime_video/generate")
    _refused(_with(SGLANG, name="my_gateway", engine=None), "backend.engine: required")  # never the name taken
    # an engine the harness has no client for: refused naming it, whether or not a route is given
    _refused(_with(SGLANG, name="my_gateway", engine="tgi", route=None), "backend.engine='tgi': use one of")


def test_a_given_engine_and_route_are_kept():
    # a backend named like one engine that states the other: the stated engine (and that engine's default route)
    got = BackendConfig.from_dict(_with(VLLM, name="sglang", route=None))
    assert (got.name, got.engine, got.route) == ("sglang", "vllm_omni", ROUTES["vllm_omni"][0])
    # a route given is kept (and checked against the engine's routes, never replaced by the default)
    _refused(_with(SGLANG, route="/v1/other"), "backend.route='/v1/other'", "the sglang client speaks",
             "/v1/realtime_video/generate")


def test_each_refused_route_says_why():
    (camera,) = ROUTE_REFUSALS
    assert not set(ROUTE_REFUSALS) & {r for routes in ROUTES.values() for r in routes}  # never a client's route
    _refused(_with(VLLM, route=camera), f"backend.route={camera!r}", ROUTE_REFUSALS[camera])
    # a refused route gives its own reason even for an engine whose routes would not list it either
    text = _refused(_with(SGLANG, route=camera), ROUTE_REFUSALS[camera])
    assert "client speaks" not in text
    # the other engine's route: not this client's
    _refused(_with(VLLM, route=ROUTES["sglang"][0]), "the vllm_omni client speaks")


@pytest.mark.parametrize("pair, ok", [
    ([500.0, 400.0], True), ([0.5, 0.25], True), ([1, 2], True),
    ([0.0, 500.0], False), ([500.0, -1.0], False), ([-1.0, 5.0], False), ([500.0], False), ([1.0, 2.0, 3.0], False),
    (["a", 1.0], False), (7, False),
])
def test_a_models_positive_pairs_take_two_positive_numbers(pair, ok):
    data = _model(SGLANG, "lingbot_v2", model_K=pair)
    if ok:
        assert BackendConfig.from_dict(data).models["lingbot_v2"].model_K == tuple(float(x) for x in pair)
    else:
        _refused(data, "model_K", "give two positive numbers")


def test_integer_pairs_are_integers_and_null_means_unset():
    got = BackendConfig.from_dict(_model(SGLANG, "lingbot_v2", frame_size=[112, 64], intrinsics_reference=None))
    assert got.models["lingbot_v2"].frame_size == (112, 64) and got.models["lingbot_v2"].intrinsics_reference is None
    _refused(_model(SGLANG, "lingbot_v2", frame_size=[112, 0]), "frame_size", "give two positive numbers")


def test_kinematics_belong_to_a_key_driven_model_only():
    keys = SGLANG["models"]["lingbot_v2"]
    assert keys["controls"] == "keys" and keys["kinematics"]
    poses = next(m for m in SGLANG["models"].values() if m["controls"] == "poses")
    # a pose-driven model that also states kinematics: they are dropped, not refused
    got = BackendConfig.from_dict(_model(SGLANG, "sana_wm", kinematics=copy.deepcopy(keys["kinematics"])))
    assert poses is SGLANG["models"]["sana_wm"] and got.models["sana_wm"].kinematics is None
    # a key-driven model keeps them, and needs them
    assert BackendConfig.from_dict(SGLANG).models["lingbot_v2"].kinematics is not None
    _refused(_model(SGLANG, "lingbot_v2", kinematics=None), "controls: keys needs the engine's key kinematics")


def test_models_given_as_records_are_taken_as_they_are():
    """A backend built in code from ServedModel records (not mappings): the kinematics rule only reads mappings."""
    built = BackendConfig.from_dict(SGLANG)
    record = built.models["lingbot_v2"]
    assert isinstance(record, ServedModel)
    again = BackendConfig(name="sglang", engine="sglang", route=ROUTES["sglang"][0], models={"lingbot_v2": record})
    assert again.models["lingbot_v2"] == record


def test_a_backend_file_that_leaves_a_setting_out_gets_what_the_shipped_files_state():
    """A user's own backend file may state only the engine and its models: each connection and output setting it
    leaves out takes the value SGLang's shipped file writes out (vLLM-Omni's waits longer per chunk, on purpose)."""
    keys = ("connect_timeout_s", "chunk_timeout_s", "item_timeout_s", "max_unknown_messages", "output_format",
            "token_env", "action_root", "num_inference_steps")
    got = BackendConfig.from_dict({k: v for k, v in SGLANG.items() if k not in keys})
    assert {k: getattr(got, k) for k in keys} == {k: SGLANG[k] for k in keys}
    assert got.connection_dict("ws://h:1/") == {"endpoint": "ws://h:1",
                                               **{k: SGLANG[k] for k in BackendConfig.CONNECTION}}


def test_a_model_mapping_that_leaves_out_units_and_pitch_limit_gets_the_shipped_values():
    """LingBot v2's mapping states ``units_per_scene_unit: 1.0`` and ``pitch_limit_deg: 85.0`` (the engine's
    clamp); a mapping without them gets the same values."""
    stated = SGLANG["models"]["lingbot_v2"]
    assert (stated["units_per_scene_unit"], stated["kinematics"]["pitch_limit_deg"]) == (1.0, 85.0)
    bare = copy.deepcopy(SGLANG)
    del bare["models"]["lingbot_v2"]["units_per_scene_unit"]
    del bare["models"]["lingbot_v2"]["kinematics"]["pitch_limit_deg"]
    got = BackendConfig.from_dict(bare).models["lingbot_v2"]
    assert (got.units_per_scene_unit, got.kinematics.pitch_limit_deg) == (1.0, 85.0)
