"""``context=native`` is upstream's own documented launch, and every declared identity cites its upstream line
(issue 43).

Each contract records the documented command (``policies.native.source``, a line of upstream's tree at the pin, which
``test_upstream_tree.py`` resolves), the memory knobs with upstream's defaults and the values that command gives them.
The compiled native launch of every model must give each knob that value (LingBot-World v2: ``--local_attn_size 18
--sink_size 6`` as ``run_fast.sh`` passes, not the parser's FullKV default) and must not pass a shim switch that
replaces upstream's memory. The identities the adapters declare are the contract's, each with ``owner/repo@commit
path:line``.
"""

from __future__ import annotations

import re

import pytest

from adapters import contracts
from adapters.contracts import tree
from adapters.base import build_adapter
from adapters.goldens import compile_item
from harness.config_groups import group_yaml

MODELS = contracts.available(contracts.ADAPTERS_DIR)
CITED = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{7,40}) \S+:\d+")


def _native_launch(model: str, tmp_path) -> contracts.ParsedLaunch:
    c = contracts.load(model)
    text = (compile_item(model, "lrlr", tmp_path, context="native") / "command.sh").read_text()
    return contracts.split_launch(text, c.entry["script"])


@pytest.mark.parametrize("model", MODELS)
def test_native_cites_upstreams_documented_launch(model):
    """The compiled native launch of every model is checked against it where every policy is compiled
    (test_policy_launches.py, :func:`adapters.contracts.native_violations`)."""
    c = contracts.load(model)
    assert c.policies is not None, f"{model}: no policies.native in the contract"
    m = CITED.match(c.policies.native.source)
    read_at = (c.commit, tree.load_listing(model).listed_commit)  # the pin, or the commit listed in its place
    assert m and m["repo"] == c.repo and any(x.startswith(m["commit"]) for x in read_at), c.policies.native.source


def test_lingbot_v2_native_is_run_fast_sh_window(tmp_path):
    launch = _native_launch("lingbot_v2", tmp_path)
    i, j = launch.args.index("--local_attn_size"), launch.args.index("--sink_size")
    assert (launch.args[i + 1], launch.args[j + 1]) == ("18", "6")
    # the launch the harness used to compile for native (the parser defaults: FullKV) is named as the violation
    old = contracts.ParsedLaunch(launch.env, launch.launcher, launch.shim, launch.shim_args, launch.script,
                                 [a for k, a in enumerate(launch.args) if k not in (i, i + 1, j, j + 1)])
    found = contracts.native_violations(contracts.load("lingbot_v2"), old)
    assert any(x.startswith("--local_attn_size: the native launch gives '-1'") and "run_fast.sh:20-21" in x
               for x in found), found


def test_a_shim_switch_in_the_native_launch_is_a_violation(tmp_path):
    """DreamX's --full-kv replaces upstream's window: the FullKV launch is not the native one."""
    c = contracts.load("dreamx")
    full = contracts.split_launch((compile_item("dreamx", "lrlr", tmp_path, context="fullkv") / "command.sh")
                                  .read_text(), c.entry["script"])
    assert any(x.startswith("--full-kv: the native launch passes it") for x in contracts.native_violations(c, full))


@pytest.mark.parametrize("model", MODELS)
def test_every_declared_identity_is_the_contracts_with_its_upstream_line(model):
    c = contracts.load(model)
    a = build_adapter(group_yaml("model", model))
    declared = a.same_launches()
    expected = {s.policy: s for s in c.policies.same_launch if not s.when or getattr(a.config, s.when)}
    assert set(declared) == set(expected)
    for policy, (other, why) in declared.items():
        s = expected[policy]
        assert other == s.same_as and s.source in why
        m = CITED.match(s.source)
        assert m, s.source  # owner/repo@commit path:line (a line of a listed tree: test_upstream_tree.py)
    assert not type(a).same_launch  # no adapter declares an identity of its own beside its contract


def test_lingbot_v1_causal_identity_holds_only_for_a_causal_build():
    v1 = group_yaml("model", "lingbot")
    assert build_adapter(v1).same_launches() == {}
    (other, why), = build_adapter({**v1, "causal": True}).same_launches().values()
    assert other == "fullkv" and "robbyant/lingbot-world-v2@2648877f763a generate.py:163-167" in why
