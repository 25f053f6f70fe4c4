"""A context label is a claim about what ran (issue 31).

Every (model, policy) pair the adapter declares is compiled in dry run; two policies of one model that give the same
launch (``command.sh`` and every byte under ``controls/``, item paths normalised) fail the test unless the adapter
declares the identity with its reason (``Adapter.same_launches``: an upstream model's contract,
``policies.same_launch``, with the upstream line that makes it so), and a declared identity that no longer holds
fails too. Each compile records what upstream was told (``controls.meta["context"]``, which ``meta.json`` keeps
under ``controls.context``).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import pytest

from adapters import contracts
from adapters.base import build_adapter
from adapters.upstream import UpstreamAdapter
from harness.config_groups import group_yaml, list_group

UPSTREAM = [m for m in list_group("model")
            if issubclass(type(build_adapter(group_yaml("model", m))), UpstreamAdapter)]
#: configurations whose support matrix differs from their YAML's (LingBot v1 as a causal build)
VARIANTS = {"lingbot_causal": ("lingbot", {"causal": True})}


@cache
def _case():
    from harness.cases import load_case_set

    return {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]


def _adapter(name: str):
    model, over = VARIANTS.get(name, (name, {}))
    return build_adapter({**group_yaml("model", model), **over})


def _launch(adapter, policy_name: str, root: Path) -> tuple[str, dict]:
    """(digest of command.sh + controls/ with the item folder normalised, the recorded context) for one policy; the
    native launch is checked against upstream's documented one (the contract's ``policies.native``, issue 43)."""
    from adapters.base import ItemRequest
    from harness.context import ContextPolicy
    from trajectories import TrajectorySpec

    case = _case()
    K = adapter.canvas_K(case)
    path = adapter.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")), K, "lrlr")
    item = root / policy_name / "item"
    controls = adapter.compile(ItemRequest(case=case, path=path, context=ContextPolicy.from_dict(
        group_yaml("context", policy_name)), seed=adapter.config.seed, item_dir=item))
    contract = adapter.contract()
    if policy_name == "native" and contract is not None:
        launch = contracts.split_launch((item / "controls" / "command.sh").read_text(), contract.entry["script"])
        assert contracts.native_violations(contract, launch) == [], (adapter.config.name, launch.args)
    h = hashlib.sha256()
    for f in sorted(p for p in (item / "controls").rglob("*") if p.is_file()):
        data = f.read_bytes().replace(str(item).encode(), b"<item>")
        h.update(f.relative_to(item).as_posix().encode() + b"\0" + data + b"\0")
    return h.hexdigest(), controls.meta["context"]


@pytest.mark.parametrize("name", UPSTREAM + list(VARIANTS))
def test_no_two_policies_share_a_launch_without_a_declared_reason(name, tmp_path):
    a = _adapter(name)
    supported = a.supported_contexts()
    launches = {p: _launch(a, p, tmp_path) for p in supported}
    for p, (_, record) in launches.items():  # what upstream was told, in its own units
        assert record["policy"] == p and record["told"], (name, p, record)
    for p, q in ((p, q) for i, p in enumerate(supported) for q in supported[i + 1:]):
        same = launches[p][0] == launches[q][0]
        same_launches = a.same_launches()
        declared = same_launches.get(p, ("",))[0] == q or same_launches.get(q, ("",))[0] == p
        assert same == declared, (
            f"{name}: context={p} and context={q} " + ("compile to one launch; refuse one (unsupported_reasons) or "
                                                      "declare it in same_launch with the reason" if same else
                                                      "are declared one launch (same_launch) but differ"))
        if declared:
            rec = launches[p][1] if p in same_launches else launches[q][1]
            assert rec["same_launch_as"]["why"], (name, rec)


def test_each_declaration_names_supported_policies_with_a_reason():
    for name in UPSTREAM + list(VARIANTS):
        a = _adapter(name)
        for p, (q, why) in a.same_launches().items():
            assert p != q and len(why) > 20, (name, p, q)


@pytest.mark.parametrize("model, policy, needle", [
    ("sana_wm", "sliding", "blocks of 3 latents"),         # upstream's --num_cached_blocks counts 3-latent blocks
    ("matrix_game35", "sliding", "chunks of 3 latents"),   # context_chunks of chunk_size 3, chosen by pose
    ("matrix_game3", "fov", "retrieves its own 5 memory latents"),
])
def test_policies_upstream_cannot_express_are_refused_at_planning(model, policy, needle):
    from adapters.base import UnsupportedContextError
    from harness.context import ContextPolicy

    a = _adapter(model)
    with pytest.raises(UnsupportedContextError, match=f"context={policy}: .*{needle}"):
        a.check_context(ContextPolicy.from_dict(group_yaml("context", policy)))


def test_what_upstream_is_told_is_in_its_own_units(tmp_path):
    """The record names upstream's knobs: SANA-WM's blocks, LingBot's latents (4 + 16 rolling = 20)."""
    _, fullkv = _launch(_adapter("sana_wm"), "fullkv", tmp_path)
    _, native = _launch(_adapter("sana_wm"), "native", tmp_path / "n")
    assert fullkv["told"]["--num_cached_blocks"] == -1 and native["told"]["--num_cached_blocks"] == 2
    _, sliding = _launch(_adapter("lingbot_v2"), "sliding", tmp_path / "s")
    assert (sliding["told"]["--local_attn_size"], sliding["told"]["--sink_size"]) == (20, 4)
    _, v2native = _launch(_adapter("lingbot_v2"), "native", tmp_path / "v")
    # native is upstream's documented launch (run_fast.sh:20-21), no longer FullKV under another name (issue 43)
    assert (v2native["told"]["--local_attn_size"], v2native["told"]["--sink_size"]) == (18, 6)
    assert "same_launch_as" not in v2native


def test_in_process_models_record_the_harness_budget():
    from harness.context import ContextPolicy

    a = build_adapter(group_yaml("model", "reference"))
    rec = a.context_told(ContextPolicy.from_dict(group_yaml("context", "sliding")))
    assert rec["told"]["sink"] == 4 and rec["told"]["recent"] == 12 and rec["told"]["current"] == 4
    assert "ContextSelector" in rec["told"]["applied_by"]
