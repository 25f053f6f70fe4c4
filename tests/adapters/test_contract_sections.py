"""The contract sections of issue 43, one rule at a time (adapters/contracts/schema.py, validation.py): the native
launch's knobs, the declared identities, the trained-regime kinds, the day-one section, names only the hub confirms
and what an installer step builds. Each case edits a real contract in memory and checks the key and the problem."""

from __future__ import annotations

import copy

import pytest
import yaml

from adapters import contracts
from adapters.contracts import ContractSchemaError


@pytest.fixture(scope="module")
def raws() -> dict:
    return {m: yaml.safe_load(contracts.contract_path(m).read_text()) for m in ("lingbot_v2", "sana_wm", "dreamx")}


@pytest.mark.parametrize("model, edit, key, problem", [
    ("lingbot_v2", lambda r: r["policies"]["native"]["knobs"].pop("--sink_size"), "policies.native.args.--sink_size",
     "every documented memory flag is a knob too"),
    ("lingbot_v2", lambda r: r["policies"]["native"].pop("source"), "policies.native.source", "required"),
    ("lingbot_v2", lambda r: r["policies"]["same_launch"].append(
        {"policy": "fullkv", "same_as": "fullkv", "why": "w", "source": "s"}), "policies.same_launch[0].same_as",
     "not declared the same as itself"),
    ("lingbot_v2", lambda r: r["trained_regime"][0].update(kind="vibes"), "trained_regime[0].kind",
     "'vibes': use one of ['zero_shot', 'cache_not_reached', 'window', 'size', 'input']"),
    ("lingbot_v2", lambda r: r.pop("trained_regime"), "trained_regime", "required section"),
    ("lingbot_v2", lambda r: r["day_one"].update(tiny_frames="13"), "day_one.tiny_frames", "must be an integer"),
    ("dreamx", lambda r: r["checkpoint"][0].update(hub_confirmed=["weights.bin"]), "checkpoint[0].hub_confirmed",
     "'weights.bin' is no file name of this entry or of a weight under 'checkpoint'"),
    ("sana_wm", lambda r: r["environment"]["steps"].insert(0, {"pip": "x", "builds": ["flash-attn"], "source": "s"}),
     "environment.steps[0].builds", "only a run step (upstream's installer) declares what it builds"),
])
def test_a_malformed_fact_is_refused_naming_its_key(raws, model, edit, key, problem):
    raw = copy.deepcopy(raws[model])
    edit(raw)
    with pytest.raises(ContractSchemaError) as e:
        contracts.contract_from_raw(raw, model)
    assert e.value.key == key and problem in e.value.problem, str(e.value)


def test_the_typed_sections_read_back(raws):
    c = contracts.contract_from_raw(copy.deepcopy(raws["lingbot_v2"]), "lingbot_v2")
    assert c.policies.native.args == {"--local_attn_size": "18", "--sink_size": "6"}
    assert c.policies.native.knobs["--max_attention_size"] is None and c.policies.same_launch == ()
    assert c.day_one.tiny_frames == 13 and {r.kind for r in c.trained_regime} == {"window", "size"}
    assert c.trained_regime[0].line() == ("KV window: upstream 18 latents with 6 sink latents, the only documented "
                                          "setting; here every earlier latent (FullKV, the paper's main table) "
                                          "(run_fast.sh:20-21; README.md:108)")
    s = contracts.contract_from_raw(copy.deepcopy(raws["sana_wm"]), "sana_wm").environment.steps[0]
    assert s.action == "run" and s.builds == ("flash-attn",)
