"""What a study reads from evaluated runs, at its edges: a video is shown only when its bytes are the ones its
metrics were computed on and ``meta.json`` recorded (a missing video, a replaced one, a check remembered until the
file changes), which entries count (computed, with a finite value), how computed keys are counted, which recorded
reason explains a missing metric, judge labels, and a judge's answers as a study reads them."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from evaluate.human.sources import (
    RunItem,
    computed_keys,
    entry,
    judge_answers,
    judge_labels,
    not_computed_reason,
    value,
)
from evaluate.results import ItemResult, MetricEntry, Status
from harness.errors import ConfigError

_VIDEO = b"not really an mp4"
_SHA = hashlib.sha256(_VIDEO).hexdigest()


def _item(tmp_path: Path, *entries: MetricEntry, video_sha256: str | None = _SHA, name: str = "i") -> RunItem:
    res = ItemResult(item={}, video_sha256=video_sha256, metrics={e.key: e for e in entries})
    return RunItem("run", tmp_path, tmp_path / name, "m", "c", 0, "t", "case", "dynamic", res)


def _files(it: RunItem, video: bytes | None = _VIDEO, meta: dict | None = None) -> None:
    it.item_dir.mkdir(parents=True, exist_ok=True)
    if video is not None:
        (it.item_dir / "video.mp4").write_bytes(video)
    (it.item_dir / "meta.json").write_text(json.dumps({"status": "done"} if meta is None else meta))


def test_a_missing_video_is_refused_even_without_a_recorded_hash(tmp_path):
    it = _item(tmp_path, video_sha256=None)
    _files(it, video=None)
    with pytest.raises(ConfigError, match=r"video\.mp4: missing; re-run the item"):
        it.video()


def test_the_video_must_match_meta_json_when_it_records_a_hash(tmp_path):
    ok = _item(tmp_path, name="ok")
    _files(ok, meta={"video": {"sha256": _SHA}})
    assert ok.video() == ok.item_dir / "video.mp4"
    for name, meta in (("none", {"video": None}), ("nohash", {"video": {}}), ("absent", {})):
        it = _item(tmp_path, name=name)
        _files(it, meta=meta)
        assert it.video() == it.item_dir / "video.mp4"  # nothing recorded: only metrics.json's hash is checked
    bad = _item(tmp_path, name="bad")
    _files(bad, meta={"video": {"sha256": "0" * 64}})
    with pytest.raises(ConfigError) as exc:
        bad.video()
    assert str(exc.value) == (f"{bad.item_dir}: video.mp4 sha256 differs from meta.json (replaced after its run); "
                              "re-run the item, re-evaluate the run (stage=evaluate), then plan the study again")


def test_the_video_must_be_the_one_its_metrics_were_computed_on(tmp_path):
    it = _item(tmp_path, video_sha256="1" * 64)
    _files(it, meta={"video": {"sha256": "0" * 64}})
    with pytest.raises(ConfigError, match=r"differs from meta\.json \(replaced after its run\); video\.mp4 sha256 "
                                          r"differs from metrics\.json's video_sha256"):
        it.video()


def test_a_checked_video_is_not_hashed_again_until_it_changes(tmp_path):
    it = _item(tmp_path)
    _files(it)
    assert it.video().is_file()
    _files(it, video=None, meta={"video": {"sha256": "0" * 64}})  # only meta.json changes: the check is remembered
    assert it.video().is_file()
    p = it.item_dir / "video.mp4"
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # same bytes, new mtime: checked again
    with pytest.raises(ConfigError, match="differs from meta.json"):
        it.video()


def test_an_entry_counts_only_when_computed_with_a_finite_value(tmp_path):
    good = MetricEntry.computed("static.a", "b1", "paper", 0.5)
    failed = MetricEntry("static.a", "b2", Status.FAILED, 0.5)  # a value beside a failed status never counts
    no_value = MetricEntry("static.a", "b3", Status.COMPUTED, None)
    nan = MetricEntry.computed("static.a", "b4", "paper", float("nan"))
    inf = MetricEntry.computed("static.a", "b5", "paper", float("inf"))
    it = _item(tmp_path, good, failed, no_value, nan, inf)
    assert entry(it, "static.a[b1]") is good and value(it, "static.a[b1]") == 0.5
    for key in ("static.a[b2]", "static.a[b3]", "static.a[b4]", "static.a[b5]", "static.a[zz]"):
        assert entry(it, key) is None and value(it, key) is None


def test_computed_keys_count_the_items_that_have_each(tmp_path):
    a = MetricEntry.computed("static.a", "b1", "paper", 0.1)
    a2 = MetricEntry.computed("static.a", "b2", "paper", 0.1)
    other = MetricEntry.computed("static.ab", "b1", "paper", 0.1)  # a longer id is another metric
    failed = MetricEntry.unavailable("static.a", "b3", "no weights")
    items = [_item(tmp_path, a, a2, other, failed), _item(tmp_path, a), _item(tmp_path, a)]
    assert computed_keys(items, "static.a") == {"static.a[b1]": 3, "static.a[b2]": 1}
    assert list(computed_keys([_item(tmp_path, a2, a)], "static.a")) == ["static.a[b1]", "static.a[b2]"]
    assert computed_keys(items, "static.c") == {}


def test_the_first_recorded_reason_of_that_metric_explains_it(tmp_path):
    other = MetricEntry.unavailable("static.b", "x", "other metric's reason")
    silent = MetricEntry("static.a", "y", Status.FAILED, None)  # no reason recorded: skipped
    told = MetricEntry.unavailable("static.a", "z", "weights missing")
    assert not_computed_reason([_item(tmp_path, other, silent), _item(tmp_path, told)],
                               "static.a") == "static.a[z]: weights missing"
    assert not_computed_reason([_item(tmp_path, other, silent)], "static.a") == \
        "no item of these runs has an entry for static.a"


def test_judge_labels_are_the_bracketed_part_of_computed_overall_keys(tmp_path):
    j1 = MetricEntry.computed("dynamic.overall", "qwen", "judge", 0.5, items=[1] * 8)
    j2 = MetricEntry.computed("dynamic.overall", "v[2", "judge", 0.5, items=[1] * 8)
    item_score = MetricEntry.computed("dynamic.item1", "qwen", "judge", 1.0)
    assert judge_labels([_item(tmp_path, j1, j2, item_score), _item(tmp_path, j1)]) == {"qwen": 2, "v[2": 1}


def test_judge_answers_as_a_study_reads_them(tmp_path):
    ans = ["yes", "no"] * 4
    started = MetricEntry.computed("dynamic.overall", "j", "judge", 0.25, started=1, answers=ans,
                                   items=[True, False] * 4)
    assert judge_answers(_item(tmp_path, started), "j") == {"started": True, "answers": ans,
                                                            "items": [1, 0] * 4, "overall": 0.25}
    for answers in ({}, {"answers": None}):
        not_started = MetricEntry.computed("dynamic.overall", "j", "judge", 0.0, started=False, items=[0] * 8,
                                           **answers)
        assert judge_answers(_item(tmp_path, not_started), "j") == {"started": False, "answers": [],
                                                                    "items": [0] * 8, "overall": 0.0}
    no_items = MetricEntry.computed("dynamic.overall", "j", "judge", 0.5, answers=ans)
    assert judge_answers(_item(tmp_path, no_items), "j") is None
    assert judge_answers(_item(tmp_path, started), "other") is None
