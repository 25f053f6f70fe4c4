"""The audited contract sections as a validated schema, and the rules the code derives from them.

A malformed contract fails naming the model and the dotted key; the facts the harness acts on (the written fps,
the frame alignment, the fixed field of view, the environment recipe's flash-attn order) are tested against the
code that uses them, so a contract and its adapter cannot drift apart.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import yaml

from adapters import contracts
from adapters.contracts import ContractSchemaError

MODELS = contracts.available()  # the upstream models: the folders of adapters/ that hold a contract.yaml


@pytest.mark.parametrize("model", MODELS)
def test_every_contract_follows_the_schema(model):
    c = contracts.load(model)
    assert c.writer.fps > 0 and c.writer.anchor_frame in ("kept", "dropped")
    assert c.environment.steps and c.weights and c.gpus.recommended >= 1 and c.license.code
    assert all(d.choice in ("upstream", "paper", "harness") and d.why for d in c.defaults_differ)
    assert all(w.source and (w.key or w.hf_cache) for w in c.weights)
    assert all(s.source for s in c.environment.steps) and all(e.source for e in c.checkpoint)
    assert c.gpu_memory.note


def _mutated(model: str, tmp_path, edit) -> None:
    raw = yaml.safe_load(contracts.contract_path(model).read_text())
    edit(raw)
    (tmp_path / model).mkdir()
    (tmp_path / model / "contract.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    contracts.load(model, directory=tmp_path)


BREAKS = [
    ("sana_wm", lambda r: r["writer"].pop("fps"), "writer.fps", "required"),
    ("sana_wm", lambda r: r["writer"].update(fps="sixteen"), "writer.fps", "number"),
    ("sana_wm", lambda r: r["writer"].update(first_pose=0), "writer.first_pose", "dropped anchor"),
    ("yume", lambda r: r["writer"].update(anchor_frame="gone"), "writer.anchor_frame", "kept or dropped"),
    ("matrix_game3", lambda r: r["writer"]["overlays"][0].update(writer_call=None), "writer.overlays[0]",
     "switch or a writer_call"),
    ("evoke", lambda r: r["writer"]["overlays"][0].update(swich=r["writer"]["overlays"][0]["switch"]),
     "writer.overlays[0].swich", "unknown key"),
    ("dreamx", lambda r: r["environment"]["steps"][0].update(pip="x"), "environment.steps[0]", "exactly one"),
    ("evoke", lambda r: r["environment"]["forks"].clear(), "environment.steps", "does not list"),
    ("hy_worldplay", lambda r: r["weights"][0].update(key="no_such_key"), "weights[0].key", "not a checkpoint key"),
    ("sana_wm", lambda r: r["hub_fetches"][0].update(avoided_by={"hope": True}), "hub_fetches[0].avoided_by",
     "one of"),
    ("lingbot", lambda r: r["defaults_differ"][0].update(choice="either"), "defaults_differ[0].choice", "one of"),
    ("dreamx", lambda r: r["intrinsics"].pop("model_fov_deg"), "intrinsics.model_fov_deg", "required"),
    ("lingbot_v2", lambda r: r.update(gpu_memory_gb=40), "gpu_memory_gb", "unknown section"),
    ("matrix_game35", lambda r: r["checkpoint"][0].update(kind="folder"), "checkpoint[0].kind", "file, dir or path"),
    ("dreamx", lambda r: r["writer"]["log_failures"][0].update(pattern="missing: ["), "writer.log_failures[0].pattern",
     "regular expression"),
]


@pytest.mark.parametrize("model,edit,key,problem", BREAKS, ids=[f"{b[0]}:{b[2]}" for b in BREAKS])
def test_a_malformed_contract_fails_naming_the_model_and_key(model, edit, key, problem, tmp_path):
    with pytest.raises(ContractSchemaError) as e:
        _mutated(model, tmp_path, edit)
    assert e.value.model == model and e.value.key == key, str(e.value)
    assert problem in e.value.problem and f"adapters/{model}/contract.yaml: {key}" in str(e.value)


# -- facts the code acts on --------------------------------------------------------------------------------------


def _adapter(model, **over):
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml

    return build_adapter({**group_yaml("model", model), **over})


@pytest.mark.parametrize("model", MODELS)
def test_the_model_fps_is_what_upstream_writes(model):
    """The expected fps of a video comes from the contract's writer fact (MG-3 writes 17, HY 24)."""
    from adapters.base import ModelConfigError

    c = contracts.load(model)
    assert _adapter(model).config.fps == c.writer.fps == _adapter(model).expected_fps()
    if c.writer.fps_flag or c.writer.fps_env:  # the launch passes the rate upstream writes at
        a = _adapter(model, fps=c.writer.fps + 1)
        assert a.expected_fps() == c.writer.fps + 1
        return
    with pytest.raises(ModelConfigError, match=rf"model.fps=.*upstream writes {c.writer.fps:g} fps.*writer.fps"):
        _adapter(model, fps=c.writer.fps + 1)


@pytest.mark.parametrize("model", ["sana_wm", "dreamx", "evoke"])
def test_a_rate_upstream_takes_from_the_launch_must_be_passed(model, tmp_path, monkeypatch):
    """SANA and DreamX write at --fps, Evoke at $FPS: a launch that does not pass model.fps cannot be compiled."""
    from adapters.base import ModelConfigError
    from adapters.goldens import compile_item

    a = _adapter(model)
    cls = type(a)
    original = cls.launch
    w = contracts.load(model).writer

    def wrong_rate(self, req, controls):
        spec = original(self, req, controls)
        if w.fps_flag:
            spec.args[spec.args.index(w.fps_flag) + 1] = "30"
        else:
            spec.env[w.fps_env] = "30"
        return spec

    monkeypatch.setattr(cls, "launch", wrong_rate)
    with pytest.raises(ModelConfigError, match="upstream writes at"):
        compile_item(model, "lrlr", tmp_path)


def test_known_writer_facts():
    assert contracts.load("matrix_game3").writer.fps == 17 and contracts.load("hy_worldplay").writer.fps == 24
    assert [m for m in MODELS if contracts.load(m).writer.first_pose == 1] == ["sana_wm", "yume"]


@pytest.mark.parametrize("model", MODELS)
def test_frames_upstream_writes_follow_the_alignment_rule(model):
    """The frames the adapter expects are the poses minus the dropped anchor (SANA: 480 for 481)."""
    a = _adapter(model)
    N = a.config.num_frames
    assert a.upstream_frames(N) == N - contracts.load(model).writer.first_pose
    if model == "sana_wm":
        assert (N, a.upstream_frames(N)) == (481, 480)
    if model == "yume":  # 17 stages of 29 frames after the image
        assert (N, a.upstream_frames(N), a.config.frames_for("lrlrlr")) == (494, 493, 552)


def test_fixed_fields_of_view_match_the_literals_the_adapters_write():
    from adapters.controls.prope import fov_of_normalised
    from adapters.dreamx.controls import DREAMX_FIXED_K_NORM
    from adapters.hy_worldplay.controls import HY_DEFAULT_K

    dx = fov_of_normalised(*DREAMX_FIXED_K_NORM[:2])
    hy = fov_of_normalised(HY_DEFAULT_K[0, 0] / (2 * HY_DEFAULT_K[0, 2]), HY_DEFAULT_K[1, 1] / (2 * HY_DEFAULT_K[1, 2]))
    assert np.allclose(contracts.load("dreamx").intrinsics.model_fov_deg, dx, atol=0.01)
    assert np.allclose(contracts.load("hy_worldplay").intrinsics.model_fov_deg, hy, atol=0.01)
    assert contracts.load("matrix_game3").intrinsics.model_fov_deg == (90.0, 90.0)


@pytest.mark.parametrize("model", MODELS)
def test_flash_attn_is_built_after_torch_and_never_from_a_requirements_file(model):
    """flash-attn in a requirements file builds in pip's isolated environment without torch and aborts: every
    requirements step leaves it out, and the step that installs it comes after torch, with --no-build-isolation."""
    steps = contracts.load(model).environment.steps
    # upstream's own installer (YUME's env_setup.sh, SANA-WM's environment_setup.sh) installs torch itself
    torch_at = next((i for i, s in enumerate(steps) if s.torch or (s.run and re.search(r"env(ironment)?_setup\.sh",
                                                                                        s.run))), None)
    assert torch_at is not None, "torch is installed by a step"
    for i, s in enumerate(steps):
        if s.requirements:
            assert {"flash_attn", "flash-attn"} <= set(s.exclude), (model, s.requirements)
        if s.pip and re.search(r"flash[-_]attn", s.pip):
            assert "--no-build-isolation" in s.pip and i > torch_at, (model, s.pip)


@pytest.mark.parametrize("model", MODELS)
def test_every_run_time_hub_fetch_is_avoided_by_the_launch(model, tmp_path):
    """Hub fetches are found at planning time: a flag-avoided fetch's flag is in every compiled command, and a
    cache-served one gets HF_HUB_OFFLINE=1 exported."""
    from adapters.goldens import compile_item

    c = contracts.load(model)
    text = (compile_item(model, "lrlr", tmp_path) / "command.sh").read_text()
    launch = contracts.split_launch(text, c.entry["script"])
    for h in c.hub_fetches:
        if "flag" in h.avoided_by:
            assert h.avoided_by["flag"] in launch.args, h.repo
        if "offline_cache" in h.avoided_by:
            assert launch.env.get("HF_HUB_OFFLINE") == "1", h.repo


def test_contract_directory_copy_loads(tmp_path):
    (tmp_path / "dreamx").mkdir()
    shutil.copy(contracts.contract_path("dreamx"), tmp_path / "dreamx" / "contract.yaml")
    assert contracts.load("dreamx", directory=tmp_path).writer.fps == 16
    assert contracts.available(tmp_path) == ["dreamx"]


@pytest.mark.parametrize("model", MODELS)
def test_the_guide_names_every_weight_and_the_setup_command(model):
    """docs/real-models.md per model: the setup command, every weight's repository, the recipe's Python."""
    from tests.support import ROOT

    text = (ROOT / "docs" / "real-models.md").read_text()
    c = contracts.load(model)
    section = text.split(f"(`{model}`,")[1].split("\n### ")[0]
    assert f"python -m harness setup model={model}" in section
    assert f"Python {c.environment.python}" in section
    for w in c.weights:
        if w.hub != "checkout":
            assert w.repo.split("/")[-1] in section, (model, w.repo)
    assert "we follow" in section.lower() or "the same in both" in section.lower()
