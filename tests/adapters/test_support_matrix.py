"""The (model x context) support matrix is declared in code and holds: every pair compiles or is refused.

For every model config and every context option (``fullkv``, ``sliding``, ``fov``, ``native``, ``paper``), planning
either refuses the pair with :class:`UnsupportedContextError` (and the adapter does not declare it) or the adapter
compiles an item under it without error. A YAML override cannot change the matrix.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import pytest

from adapters.base import (
    Adapter,
    ModelConfigError,
    UnsupportedContextError,
    build_adapter,
)
from harness.context import POLICY_NAMES
from harness.config_groups import group_yaml, list_group

MODELS = list_group("model")
CONTEXTS = list_group("context")


@lru_cache(maxsize=None)
def _adapter(model: str) -> Adapter:
    return build_adapter(group_yaml("model", model))


@lru_cache(maxsize=None)
def _case():
    from harness.cases import load_case_set

    return {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]


def test_every_group_option_is_covered():
    assert {"fullkv", "sliding", "fov", "native", "paper"} <= set(CONTEXTS)
    assert {"sana_wm_diffusers", "sana_wm_tiny", "reference", "tiny_causal_dit", "lingbot", "lingbot_v2"} <= set(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_declaration_is_complete_and_names_real_policies(model):
    a = _adapter(model)
    supported = a.supported_contexts()
    assert supported and set(supported) <= set(POLICY_NAMES), supported
    assert a.config.paper_context in supported
    for name in set(POLICY_NAMES) - set(supported):  # every refusal says why
        assert a.unsupported_reasons.get(name), f"{model}: no reason for unsupported context {name!r}"


@pytest.mark.parametrize("model,context", list(itertools.product(MODELS, CONTEXTS)))
def test_pair_compiles_or_is_refused(model, context, tmp_path):
    from adapters.base import ItemRequest
    from harness.app.runner import resolve_context
    from trajectories import TrajectorySpec

    a = _adapter(model)
    policy = resolve_context(group_yaml("context", context), a)
    if policy.name not in a.supported_contexts():
        with pytest.raises(UnsupportedContextError, match=f"context={policy.name}"):
            a.check_context(policy)
        return
    a.check_context(policy)
    case = _case()
    _, K = a.canvas_image_and_K(case)
    path = a.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")), K, "lrlr")
    controls = a.compile(ItemRequest(case=case, path=path, context=policy, seed=a.config.seed,
                                     item_dir=tmp_path / "item"))
    assert controls.files and all((tmp_path / "item" / "controls" / n).exists() for n in controls.files)


def test_yaml_cannot_claim_support():
    """The old YAML keys are refused with the reason, and paper_context must be a policy the code runs."""
    cfg = group_yaml("model", "sana_wm")
    with pytest.raises(ModelConfigError, match="model.supported_contexts: .*declared by its adapter class"):
        build_adapter({**cfg, "supported_contexts": ["native", "fov"]})
    with pytest.raises(ModelConfigError, match="model.unsupported_reasons"):
        build_adapter({**cfg, "unsupported_reasons": {}})
    with pytest.raises(ModelConfigError, match="model.paper_context='fov'"):
        build_adapter({**cfg, "paper_context": "fov"})


def test_support_can_depend_on_the_config():
    """LingBot v1 at the pinned commit is bidirectional (native only); a causal build gets upstream's KV knobs."""
    assert _adapter("lingbot").supported_contexts() == ("native",)
    causal = build_adapter({**group_yaml("model", "lingbot"), "causal": True})
    assert set(causal.supported_contexts()) == {"native", "fullkv", "sliding"}
    assert "fov" in _adapter("lingbot_v2").supported_contexts()


def test_check_ready_is_part_of_the_contract():
    """Every adapter answers readiness; built-in models have nothing to check."""
    for model in ("reference", "tiny_causal_dit", "sana_wm_tiny"):
        a = _adapter(model)
        assert a.readiness(probe=False) == [] and a.check_ready(probe=False) == []
    with pytest.raises(ModelConfigError, match="model.upstream_dir"):
        _adapter("sana_wm").check_ready(probe=False)
