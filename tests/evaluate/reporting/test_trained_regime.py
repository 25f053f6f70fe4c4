"""The trained-regime caveats of a model's contract reach the report beside its numbers (issue 43): the adapter
records the caveats that apply to the item's context (``meta.json`` ``controls.context.trained_regime``), evaluation
carries them into ``metrics.json`` (``context_ran``), and the summary's "What ran" line and the notes of the main
and variants tables print them."""

from __future__ import annotations

from pathlib import Path

from evaluate.reporting.collect import Item
from evaluate.reporting.run_tables import describe_ran
from evaluate.reporting.tables import regime_notes
from evaluate.results import ItemResult


def _item(model: str, ctx: str, ran: dict | None) -> Item:
    res = ItemResult(item={"model": model, "context": ctx, "seed": 1, "trajectory": "lrlr", "case_id": "c"},
                     extra={"context_ran": ran} if ran is not None else {})
    return Item("run", Path("."), Path("."), res)


def _recorded(model: str, ctx: str) -> list[str]:
    """The caveats compile records for ``ctx`` (``controls.meta["context"]``, adapters/upstream.py ``compile``)."""
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml
    from harness.context import ContextPolicy

    a = build_adapter(group_yaml("model", model))
    return a.context_told(ContextPolicy.from_dict(group_yaml("context", ctx))).get("trained_regime", [])


def test_each_label_records_the_caveats_of_its_own_launch():
    """LingBot v2: FullKV leaves run_fast.sh's 18 / 6 window, native does not; the frame count's caveat applies to
    every label. Evoke runs i2v, which upstream calls zero-shot on the distilled model."""
    fullkv, native = _recorded("lingbot_v2", "fullkv"), _recorded("lingbot_v2", "native")
    assert any(c.startswith("KV window: upstream 18 latents with 6 sink latents") and "(run_fast.sh:20-21" in c
               for c in fullkv)
    assert not any(c.startswith("KV window") for c in native)
    assert any(c.startswith("frames: upstream 361") for c in native) and any(c.startswith("frames:") for c in fullkv)
    assert any("zero-shot" in c and "README.md:201-203" in c for c in _recorded("evoke", "native"))


def test_the_summary_and_the_model_tables_show_the_caveats_beside_the_numbers():
    rec = {"policy": "fullkv", "told": {"--local_attn_size": -1},
           "trained_regime": ["KV window: upstream 18 latents; here every earlier latent (run_fast.sh:20-21)"]}
    assert describe_ran(rec).endswith("Outside upstream's trained or documented regime: KV window: upstream 18 "
                                      "latents; here every earlier latent (run_fast.sh:20-21)")
    assert "regime" not in describe_ran({"policy": "native", "told": {"x": 1}})
    groups = {"lingbot_v2": ("fullkv", [_item("lingbot_v2", "fullkv", rec)]),
              "reference": ("fullkv", [_item("reference", "fullkv", {"policy": "fullkv", "told": {"a": 1}})])}
    assert regime_notes(groups) == ["lingbot_v2 (fullkv), outside upstream's trained or documented regime: KV "
                                    "window: upstream 18 latents; here every earlier latent (run_fast.sh:20-21)"]
