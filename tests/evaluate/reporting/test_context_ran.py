"""The report labels each (model, context) by what its launch told the model (issue 31): the adapter's record
(``meta.json`` ``controls.context``), carried by evaluation into ``metrics.json`` as ``context_ran``."""

from __future__ import annotations

from pathlib import Path

from evaluate.reporting.collect import Item
from evaluate.reporting.run_tables import context_ran, markdown
from evaluate.results import ItemResult


def _item(model: str, ctx: str, ran: dict | None) -> Item:
    extra = {"context_ran": ran} if ran is not None else {}
    res = ItemResult(item={"model": model, "context": ctx, "seed": 1, "trajectory": "lrlr", "case_id": "c"},
                     extra=extra)
    return Item("run", Path("."), Path("."), res)


def test_summary_says_what_ran_under_each_label():
    yume_fullkv = {"policy": "fullkv", "told": {"window": "every earlier frame"},
                   "same_launch_as": {"policy": "native", "why": "upstream re-feeds all history"}}
    sana = {"policy": "fullkv", "told": {"--num_cached_blocks": -1}}
    items = [_item("yume", "fullkv", yume_fullkv), _item("sana_wm", "fullkv", sana), _item("reference", "fov", None)]
    ran = context_ran(items)
    assert set(ran) == {("yume", "fullkv"), ("sana_wm", "fullkv")}  # an item with no record gets no line
    rows = [{"model": m, "context": c, "trajectory": t, "metric": "camera.rpe_trans", "mean": 0.1, "lo": 0.0,
             "hi": 0.2, "n": 3} for m, c in (("yume", "fullkv"), ("sana_wm", "fullkv"), ("reference", "fov"))
            for t in ("lrlr", "all")]
    md = markdown(rows, {}, ran)
    yume = md.split("## model=yume context=fullkv")[1].split("##")[0]
    assert "What ran: window every earlier frame. The same launch as context=native: upstream re-feeds" in yume
    sana_part = md.split("## model=sana_wm context=fullkv")[1].split("##")[0]
    assert "What ran: --num_cached_blocks -1." in sana_part and "same launch" not in sana_part
    assert "What ran" not in md.split("## model=reference context=fov")[1].split("##")[0]
