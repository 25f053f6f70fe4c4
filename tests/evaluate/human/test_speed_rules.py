"""The human study's speed flags, exports and seals, rule by rule in process: each clip's seconds, an annotator
flagged as implausibly fast, the export's practice and check marks, the attention table, the sealed sources and
tied ranks (evaluate/human/analysis.py, report.py, sources.py, ranking.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluate.human import analysis, report
from evaluate.human.ranking import TIE_TOL, _ranks, tied
from evaluate.human.sources import load_items
from evaluate.results import MetricEntry
from harness.errors import ConfigError
from harness.io import SEAL, seal_digest
from tests.evaluate.human.test_analysis_rules import pair, static_key, sv

# a public item whose clip plays 2 s (30 frames at 15 fps)
TWO_S = {"frames": 30, "fps": 15}


def _votes(*ms: int | None, item: str = "i") -> list[dict]:
    return [{"annotator": "a1", "item": item, "elapsed_ms": m} for m in ms]


# ------------------------------------------------------------------------------------------------ clip seconds
def test_a_clip_plays_its_frames_over_its_fps_in_seconds():
    assert analysis.clip_seconds(TWO_S) == 2.0
    assert analysis.clip_seconds({"frames": 4, "fps": 8}) == 0.5


def test_a_clip_without_frames_or_without_fps_has_no_length():
    assert analysis.clip_seconds({"frames": 0, "fps": 15}) is None
    assert analysis.clip_seconds({"frames": 30, "fps": 0}) is None
    assert analysis.clip_seconds({"fps": 15}) is None
    assert analysis.clip_seconds({"frames": 30}) is None
    assert analysis.clip_seconds({}) is None


# ------------------------------------------------------------------------------------------------------- speed
def test_an_answer_is_fast_only_below_half_of_its_clip_and_half_exactly_is_not():
    # 1000 ms of a 2 s clip is half of it exactly: not before half could play; 999 ms is
    assert analysis.FAST_SHARE == 0.5
    assert analysis.speed(_votes(1000), {"i": TWO_S}) == {"median_s": 1.0, "timed": 1, "fast": 0, "flagged": False}
    assert analysis.speed(_votes(999), {"i": TWO_S}) == {"median_s": 0.999, "timed": 1, "fast": 1, "flagged": False}


def test_an_answer_at_three_quarters_of_its_clip_is_not_fast():
    assert analysis.speed(_votes(1500), {"i": TWO_S}) == {"median_s": 1.5, "timed": 1, "fast": 0, "flagged": False}


def test_the_share_is_the_answer_time_divided_by_the_clip_length():
    # 500 ms of a 2 s clip is a quarter of it (fast); 500 ms times 2 s would be 1.0 (not fast)
    assert analysis.speed(_votes(500), {"i": TWO_S})["fast"] == 1
    # 300 ms of a 4 s clip is 0.075 of it (fast); 0.3 s times 4 s would be 1.2 (not fast)
    assert analysis.speed(_votes(300), {"i": {"frames": 60, "fps": 15}})["fast"] == 1


def test_an_annotator_whose_median_answer_is_exactly_half_a_clip_is_not_flagged():
    got = analysis.speed(_votes(1000, 1000, 1000), {"i": TWO_S})
    assert got == {"median_s": 1.0, "timed": 3, "fast": 0, "flagged": False}


def test_three_timed_answers_below_half_a_clip_flag_an_annotator_and_two_do_not():
    assert analysis.FAST_MIN_VOTES == 3
    three = analysis.speed(_votes(100, 200, 300), {"i": TWO_S})
    assert three == {"median_s": 0.2, "timed": 3, "fast": 3, "flagged": True}
    two = analysis.speed(_votes(100, 200), {"i": TWO_S})
    assert two == {"median_s": 0.15000000000000002, "timed": 2, "fast": 2, "flagged": False}


def test_the_flag_and_the_seconds_are_medians_not_means():
    # shares 0.1, 0.2, 3.0: median 0.2 (flagged), mean 1.1 (it would not be); seconds 0.2, 0.4, 6.0: median 0.4
    got = analysis.speed(_votes(200, 400, 6000), {"i": TWO_S})
    assert got == {"median_s": 0.4, "timed": 3, "fast": 2, "flagged": True}


def test_practice_answers_are_left_out_of_every_speed_figure():
    public = {"p": {**TWO_S, "practice": True}, "i": TWO_S}
    assert analysis.speed(_votes(100, 100, 100, item="p"), public) == {"median_s": None, "timed": 0, "fast": 0,
                                                                        "flagged": False}
    mixed = _votes(100, 100, 100, item="p") + _votes(4000, 6000)
    assert analysis.speed(mixed, public) == {"median_s": 5.0, "timed": 2, "fast": 0, "flagged": False}


def test_an_answer_to_an_item_the_study_does_not_show_counts_its_seconds_but_no_share():
    assert analysis.speed(_votes(1500, item="gone"), {"i": TWO_S}) == {"median_s": 1.5, "timed": 0, "fast": 0,
                                                                      "flagged": False}


def test_an_untimed_answer_counts_nowhere():
    assert analysis.speed(_votes(None, 100), {"i": TWO_S}) == {"median_s": 0.1, "timed": 1, "fast": 1,
                                                               "flagged": False}


# ------------------------------------------------------------------------------------------------------ export
def test_the_export_is_blind_unless_asked():
    key = static_key([pair("r1")])
    votes = [{**sv("a1", "r1", "A"), "id": 1, "started": None, "answers": None, "client_id": None,
              "elapsed_ms": 5, "created_utc": "t"}]
    (row,) = analysis.export_rows(key, votes)
    assert list(row) == analysis.EXPORT_COLUMNS[:analysis.BLIND_COLUMNS]
    assert "metric" not in row and "arm_A" not in row


# ---------------------------------------------------------------------------------------------- attention table
def test_the_attention_table_explains_the_check_of_its_study_kind():
    dyn = report.attention_table({"kind": "dynamic"})
    assert dyn.caption.startswith("Attention checks look like any instance, but the clip is its first frame held "
                                  "still, so one answer is right: the event does not start. They never enter")
    st = report.attention_table({"kind": "static"})
    assert st.caption.startswith("Attention checks look like any pair, but one clip is of another case than the "
                                 "first view, so one answer is right: the side of the matching case. They never")
    assert report.attention_table({}).caption.startswith("Attention checks look like any pair,")


# ----------------------------------------------------------------------------------------------------- ranking
def test_values_exactly_the_tolerance_apart_are_one_tie():
    assert TIE_TOL == 1e-8
    assert tied({"p": 0.0, "q": TIE_TOL}) == {"p": 0.0, "q": 0.0}
    assert tied({"p": 1.0, "q": 1.5}, tol=0.5) == {"p": 1.0, "q": 1.0}
    assert tied({"p": 1.0, "q": 1.5}, tol=0.25) == {"p": 1.0, "q": 1.5}
    assert _ranks({"p": 0.0, "q": TIE_TOL, "r": -1.0}) == {"p": 1, "q": 1, "r": 3}


# ----------------------------------------------------------------------------------------------------- sources
ENV = "environment.visible[pixel-thumb16]"


def _run_with_one_item(run: Path, sha: str, recorded: str) -> Path:
    """A run whose one done item has a sealed metrics.json computed on video ``sha``; its manifest row records
    ``recorded``."""
    item = {"model": "m", "context": "fullkv", "seed": 1, "trajectory": "lrlr", "case_id": "c1"}
    rel = "m/fullkv/seed-1/lrlr/c1"
    d = run / rel
    d.mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"item": item, "status": "done"}))
    entry = MetricEntry.computed("environment.visible", "pixel-thumb16", "diagnostic", 0.5)
    res = {"schema_version": 1, "item": item, "case_family": "environment", "video_sha256": sha,
           "num_revisits": 1, "phases": {}, "metrics": {ENV: entry.to_dict()}}
    (d / "metrics.json").write_text(json.dumps({**res, SEAL: seal_digest(res)}))
    row = {**item, "key": rel, "dir": rel, "status": "done", "video_sha256": recorded}
    (run / "manifest.jsonl").write_text(json.dumps(row) + "\n")
    return d


def test_a_sealed_result_of_another_video_than_the_manifest_records_is_refused(tmp_path):
    d = _run_with_one_item(tmp_path / "r", sha="a" * 64, recorded="b" * 64)
    with pytest.raises(ConfigError) as exc:
        load_items([tmp_path / "r"])
    assert str(exc.value) == (
        f"{d / 'metrics.json'}: its metrics.json was computed on video sha256 aaaaaaaaaaaa..., but the item's video "
        "is now bbbbbbbbbbbb... (regenerated or replaced after it was evaluated); re-evaluate the run "
        "(stage=evaluate run=<name>: it recomputes such a file)")


def test_a_sealed_result_of_the_recorded_video_is_read(tmp_path):
    _run_with_one_item(tmp_path / "r", sha="c" * 64, recorded="c" * 64)
    (it,) = load_items([tmp_path / "r"])
    assert (it.run, it.arm, it.case_id, it.result.value(ENV)) == ("r", "m/fullkv", "c1", 0.5)
