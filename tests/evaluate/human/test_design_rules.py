"""A study design's rules at their edges, on small inputs built in memory (no study is planned): the target names a
question uses, the frame windows both clips of a pair show, drawing candidates, where a video's phases come from,
and which video an attention check's decoy may be."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from evaluate.human import design
from evaluate.human.common import StudyError
from evaluate.human.sources import RunItem
from evaluate.results import ItemResult

_PHASES = {"V": [0, 4], "D1": [4, 8], "R1": [8, 12], "D2": [12, 16], "R2": [16, 20], "D3": [20, 24], "H": [24, 26]}


def test_a_question_names_the_objects_else_a_person_else_the_target():
    def targets(t):
        return design._targets({"case": {"targets": t}})

    assert targets({"objects": [{"name": "cat", "id": "o1"}, {"id": "box"}, {"name": "", "id": "lid"}]}) == \
        "cat and box and lid"
    assert targets({"objects": [{"name": "cat"}], "persons": [{"id": "p"}]}) == "cat"
    assert targets({"objects": [], "persons": [{"id": "p"}]}) == "person"
    assert targets({"objects": [{}], "persons": [{"id": "p"}]}) == "target"  # an object without a name or id
    assert targets({"persons": []}) == "target"
    assert design._targets({}) == design._targets({"case": None}) == "target"


def test_clip_windows_are_the_union_of_both_sides_recorded_revisit_frames():
    a = {"revisit_frames": [[9, 10], [17, 18]]}
    b = {"revisit_frames": [[8, 11]]}
    assert design._windows("static.x", [a, b, {}], _PHASES, 2) == [("R1", 8, 12), ("R2", 17, 19)]
    assert design._windows("static.x", [{"revisit_frames": [[], [30]]}], _PHASES, 2) == [("?", 30, 31)]


def test_without_recorded_frames_the_windows_are_the_phases_the_metric_scores():
    assert design._windows("static.x", [{}, {}], _PHASES, 2) == [("R1", 8, 12), ("R2", 16, 20)]
    assert design._windows("static.x", [{}, {}], _PHASES, 3) == [("R1", 8, 12), ("R2", 16, 20)]  # no R3 phase
    assert design._windows("static.x", [{}, {}], _PHASES, 1) == [("R1", 8, 12)]
    assert design._windows("departure.visible", [{}, {}], _PHASES, 2) == [("D2", 12, 16), ("D3", 20, 24)]
    assert design._windows("departure.visible", [{}], {"D1": [4, 8]}, 1) == []


def test_drawing_takes_every_candidate_unless_fewer_are_wanted():
    rng = np.random.default_rng(0)
    assert design._draw(4, None, rng) == [0, 1, 2, 3]
    assert design._draw(4, 4, rng) == [0, 1, 2, 3]
    assert design._draw(4, 9, rng) == [0, 1, 2, 3]
    got = design._draw(4, 3, rng)
    assert len(got) == len(set(got)) == 3 and got == sorted(got) and set(got) <= {0, 1, 2, 3}
    assert design._draw(4, 0, rng) == []


def _item(tmp_path: Path, name: str, arm=("m", "c"), seed=0, trajectory="t", case="c1", phases=None, meta=None,
          entries=()):
    d = tmp_path / name
    d.mkdir(parents=True, exist_ok=True)
    if meta is not None:
        (d / "meta.json").write_text(json.dumps(meta))
    res = ItemResult(item={}, phases=phases or {}, metrics={e.key: e for e in entries})
    return RunItem("run", tmp_path, d, arm[0], arm[1], seed, trajectory, case, "static", res)


def test_phases_come_from_metrics_json_else_meta_json(tmp_path):
    it = _item(tmp_path, "a", phases={"V": [0.0, 4], "R1": [4, 9]}, meta={"camera": {"phases": {"V": [0, 1]}}})
    assert design._phases(it) == {"V": [0, 4], "R1": [4, 9]}
    assert all(type(x) is int for v in design._phases(it).values() for x in v)
    it = _item(tmp_path, "b", meta={"camera": {"phases": {"V": [0, 2], "R1": [2, 5]}}})
    assert design._phases(it) == {"V": [0, 2], "R1": [2, 5]}
    for name, meta in (("c", {"camera": {}}), ("d", {"camera": None}), ("e", {})):
        with pytest.raises(StudyError, match=r"no camera phases in metrics\.json or meta\.json; re-evaluate"):
            design._phases(_item(tmp_path, name, meta=meta))


def test_a_checks_decoy_is_the_same_arm_trajectory_and_seed_on_another_case(tmp_path):
    first = _item(tmp_path, "first")
    decoy = _item(tmp_path, "decoy", case="c2")
    others = [_item(tmp_path, "arm", arm=("m2", "c"), case="c2"), _item(tmp_path, "ctx", arm=("m", "c2"), case="c2"),
              _item(tmp_path, "traj", trajectory="t2", case="c2"), _item(tmp_path, "seed", seed=1, case="c2"),
              _item(tmp_path, "same", seed=0)]  # the same case is no decoy
    chosen = [{"metric": "k[b]", "metric_id": "k", "higher_is_better": True, "task": {"case_id": "c1"},
               "_items": (first, first, first)}]
    req = design.PlanRequest(runs=[], metrics=["k[b]"], seed=1, checks=2, secret="s" * 16)
    got = design.design_checks(req, [first, decoy, *others], chosen)
    assert [r["check"] for r in got] == [{"expected": "A", "decoy_case": "c2"}, {"expected": "B", "decoy_case": "c2"}]
    assert got[0]["_items"] == (first, decoy, first) and got[1]["_items"] == (decoy, first, first)
    assert [r["swapped"] for r in got] == [False, True]
    with pytest.raises(StudyError, match="an attention check needs a second case of the same arm, trajectory and seed"):
        design.design_checks(req, [first, *others], chosen)
    assert design.design_checks(req, [first, decoy], chosen, n=0) == []


def _video_item(tmp_path: Path, name: str, entries=(), phases=None, meta=None, family="static", seed=0, case="c1"):
    import hashlib

    d = tmp_path / name
    d.mkdir(parents=True)
    video = f"video of {name}".encode()
    (d / "video.mp4").write_bytes(video)
    (d / "meta.json").write_text(json.dumps(meta if meta is not None else {"camera": {"fps": 4}}))
    res = ItemResult(item={}, video_sha256=hashlib.sha256(video).hexdigest(), phases=phases or {},
                     metrics={e.key: e for e in entries})
    return RunItem("run", tmp_path, d, "m" + name, "c", seed, "t", case, family, res)


def test_a_departure_pair_shows_each_sides_own_reference_and_timed_segments(tmp_path, monkeypatch):
    from evaluate.results import MetricEntry

    clips, frames = [], []
    monkeypatch.setattr(design, "_write_clip", lambda src, fr, fps, dst: clips.append((src, fr, fps, dst.name)))
    monkeypatch.setattr(design, "_write_frame", lambda src, t, dst: frames.append((src, t, dst)))
    key = "departure.visible[b]"
    left = _video_item(tmp_path, "l", [MetricEntry.computed("departure.visible", "b", "paper", 0.1,
                                                            reference_frames=[2, 5])],
                       phases={"V": [0, 4], "D1": [4, 8], "D2": [8, 10], "D3": [10, 14]})
    right = _video_item(tmp_path, "r", [MetricEntry.computed("departure.visible", "b", "paper", 0.2)])
    rec = {"metric": key, "metric_id": "departure.visible", "_items": (left, right, left)}
    pub = design._static_media(rec, "p1", tmp_path / "media")
    assert frames == [(left.video(), 5, tmp_path / "media" / "p1-ra.png"),
                      (right.video(), 0, tmp_path / "media" / "p1-rb.png")]
    assert pub["first_view"] == ["p1-ra.png", "p1-rb.png"] and pub["first_view_per_side"] is True
    assert clips[0][1:] == ([8, 9, 10, 11, 12, 13], 4.0, "p1-a.mp4") and clips[1][3] == "p1-b.mp4"
    assert pub["segments"] == [{"label": "D2", "start": 0.0, "end": 0.5}, {"label": "D3", "start": 0.5, "end": 1.5}]
    assert rec["clip_frames"] == [["D2", 8, 10], ["D3", 10, 14]] and pub["frames"] == 6 and pub["fps"] == 4.0


def _dyn_meta(questions=8):
    qs = [{"aspect": "final_state", "answer": "yes", "question": f"q{i}?"} for i in range(questions)]
    return {"camera": {"fps": 4}, "case": {"event": {"questions": qs}}}


def _verdict(judge="j"):
    from evaluate.results import MetricEntry

    return MetricEntry.computed("dynamic.overall", judge, "judge", 0.5, started=True, answers=["yes"] * 8,
                                items=[1] * 8)


def test_an_event_needs_eight_questions(tmp_path):
    assert design._event(_video_item(tmp_path, "a", meta=_dyn_meta())) is not None
    assert design._event(_video_item(tmp_path, "b", meta=_dyn_meta(7))) is None
    assert design._event(_video_item(tmp_path, "c", meta={"case": None})) is None


def test_a_dynamic_study_without_a_judge_when_none_is_required(tmp_path):
    items = [_video_item(tmp_path, n, meta=_dyn_meta(), family="dynamic") for n in ("a", "b")]
    req = design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, instances=2, require_judge=False,
                             secret="s" * 16)
    recs, counts = design.design_dynamic(req, items)
    assert len(recs) == 2 and all(r["vlm"] is None and r["judge"] is None for r in recs)
    assert counts["dynamic"] == {"candidates": 2, "instances": 2, "judge": None, "short": False,
                                 "skipped": {"no_event": 0, "not_judged": 0}}


def test_a_dynamic_study_counts_what_it_skipped_and_whether_it_fell_short(tmp_path):
    items = [_video_item(tmp_path, "a", [_verdict()], meta=_dyn_meta(), family="dynamic"),
             _video_item(tmp_path, "b", meta=_dyn_meta(), family="dynamic"),
             _video_item(tmp_path, "c", [_verdict()], meta=_dyn_meta(7), family="dynamic")]
    req = design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, instances=2, secret="s" * 16)
    recs, counts = design.design_dynamic(req, items)
    assert counts["dynamic"] == {"candidates": 1, "instances": 1, "judge": "j", "short": True,
                                 "skipped": {"no_event": 1, "not_judged": 1}}
    assert [r["vlm"]["overall"] for r in recs] == [0.5]


def test_practice_instances_are_added_without_checks(tmp_path):
    items = [_video_item(tmp_path, n, meta=_dyn_meta(), family="dynamic") for n in ("a", "b", "c")]
    req = design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, instances=2, require_judge=False, practice=1,
                             secret="s" * 16)
    recs, _ = design.design_dynamic(req, items)
    assert len(recs) == 3 and [bool(r.get("practice")) for r in recs] == [False, False, True]
    assert not any(r.get("check") for r in recs)
    assert design.design_dynamic_checks(design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, checks=2), []) == []


def test_a_still_check_repeats_the_first_frame(tmp_path, monkeypatch):
    import harness.video as hv

    asked, written = [], []

    def iter_frames(src, indices=None):
        asked.append(indices)
        yield from ((i, np.full((2, 2, 3), i, np.uint8)) for i in indices)

    class Writer:
        def __init__(self, dst, fps):
            self.dst = dst

        def write(self, f):
            written.append(int(f[0, 0, 0]))

        def close(self):
            written.append("closed")

    monkeypatch.setattr(hv, "iter_frames", iter_frames)
    monkeypatch.setattr(hv, "VideoWriter", Writer)
    design._write_still(tmp_path / "v.mp4", 3, 4.0, tmp_path / "s.mp4")
    assert asked == [[0]] and written == [0, 0, 0, "closed"]


def test_only_a_dead_local_planners_partial_folder_is_removed(tmp_path):
    import os

    from harness.io import host_tag

    out = tmp_path / "study"
    alive = tmp_path / f".study.{host_tag()}-{os.getppid()}.partial"  # a live planner (not this process)
    dead = tmp_path / f".study.{host_tag()}-999999999.partial"
    other_host = tmp_path / ".study.000000-999999999.partial"
    for p in (alive, dead, other_host):
        p.mkdir()
    design._remove_dead_partials(out)
    assert alive.is_dir() and other_host.is_dir() and not dead.exists()


# --------------------------------------------------------------------------------------- metrics, sides, windows
def _valued(tmp_path: Path, model: str, key: str, seed=0, case="c1", value=0.5):
    """An item of arm ``<model>/c`` with one computed value of ``key`` (``metric[backbone]``)."""
    from evaluate.results import MetricEntry

    mid, backbone = key.rstrip("]").split("[")
    return _item(tmp_path, f"{model}-{seed}-{case}", arm=(model, "c"), seed=seed, case=case,
                 entries=[MetricEntry.computed(mid, backbone, "paper", value)])


def test_the_papers_six_take_the_backbone_most_items_have_then_the_first_by_name(tmp_path):
    most = [_valued(tmp_path, "m", "human.identity[b]", seed=s) for s in (0, 1)] + \
        [_valued(tmp_path, "m", "human.identity[a]", seed=2)]
    assert design._metric_keys(most, ["static"]) == ["human.identity[b]"]
    tie = [_valued(tmp_path, "m", "human.identity[b]"), _valued(tmp_path, "m", "human.identity[a]", seed=1)]
    assert design._metric_keys(tie, ["static"]) == ["human.identity[a]"]


def test_a_named_backbone_must_be_computed(tmp_path):
    items = [_valued(tmp_path, "m", "human.identity[a]"), _valued(tmp_path, "m", "human.identity[b]", seed=1)]
    assert design._metric_keys(items, ["human.identity[b]"]) == ["human.identity[b]"]
    with pytest.raises(StudyError, match=r"metric=human.identity\[c\]: no item of these runs has it computed "
                                         r"\(computed: human.identity\[a\], human.identity\[b\]\)"):
        design._metric_keys(items, ["human.identity[c]"])
    with pytest.raises(StudyError, match="computed with several backbones"):
        design._metric_keys(items, ["human.identity"])


def _sides(tmp_path, seed, n_seeds=1):
    key = "environment.visible[b]"
    items = [_valued(tmp_path, m, key, seed=s) for m in ("x", "y") for s in range(n_seeds)]
    req = design.PlanRequest(runs=[], metrics=[key], seed=seed, secret="s" * 16)
    return design.design_static(req, items)[0]


def test_the_arm_shown_as_a_alternates_from_a_seeded_fair_coin(tmp_path):
    recs = _sides(tmp_path, 0, n_seeds=5)
    first = recs[0]["swapped"]
    assert [r["swapped"] for r in recs] == [first, not first, first, not first, first]
    for r in recs:  # swapped: the second arm by name is shown as A
        assert (r["A"]["arm"], r["B"]["arm"]) == (("y/c", "x/c") if r["swapped"] else ("x/c", "y/c"))
        left, right, first = r["_items"]
        assert (left.arm, right.arm, first.arm) == (r["A"]["arm"], r["B"]["arm"], "x/c")
    # the coin: over 200 study seeds the first pair of an arm pair is swapped about half the time
    swapped = sum(_sides(tmp_path, s)[0]["swapped"] for s in range(200))
    assert 80 <= swapped <= 120, swapped


def test_a_checks_answer_side_alternates_a_b_a(tmp_path):
    first = _item(tmp_path, "first")
    decoy = _item(tmp_path, "decoy", case="c2")
    chosen = [{"metric": "k[b]", "metric_id": "k", "higher_is_better": True, "task": {"case_id": "c1"},
               "_items": (first, first, first)}]
    req = design.PlanRequest(runs=[], metrics=["k[b]"], seed=1, checks=3, secret="s" * 16)
    got = design.design_checks(req, [first, decoy], chosen)
    assert [r["check"]["expected"] for r in got] == ["A", "B", "A"]
    assert design.design_checks(req, [first, decoy], chosen, n=-1) == []


def test_a_windows_label_is_the_phase_of_its_first_frame():
    assert design._windows("static.x", [{"revisit_frames": [[7, 8, 9]]}], _PHASES, 1) == [("D1", 7, 10)]


def test_fps_comes_from_meta_json_or_the_error_says_re_run(tmp_path):
    assert design._fps(_item(tmp_path, "a", meta={"camera": {"fps": 4}})) == 4.0
    for name, meta in (("b", {"camera": None}), ("c", {"camera": {"fps": 0}}), ("d", {})):
        with pytest.raises(StudyError, match="meta.json records no camera fps; re-run the item"):
            design._fps(_item(tmp_path, name, meta=meta))


# ------------------------------------------------------------------------------------------------ media writing
class _Writer:
    """A stand-in for harness.video.VideoWriter that logs what it was asked."""

    log: ClassVar[list] = []

    def __init__(self, dst, fps):
        self.dst = dst

    def write(self, f):
        if int(f[0, 0, 0]) == 99:
            raise OSError("disk full")
        self.log.append(int(f[0, 0, 0]))

    def close(self):
        self.log.append("closed")

    def abort(self):
        self.log.append("aborted")


def _fake_video(monkeypatch, n_frames, fill=None):
    import harness.video as hv

    def iter_frames(src, indices=None):
        for i in indices:
            if i >= n_frames:
                return
            yield i, np.full((2, 2, 3), i if fill is None else fill, np.uint8)

    _Writer.log = []
    monkeypatch.setattr(hv, "iter_frames", iter_frames)
    monkeypatch.setattr(hv, "VideoWriter", _Writer)


def test_a_clip_is_aborted_when_frames_are_missing_or_reading_fails(tmp_path, monkeypatch):
    _fake_video(monkeypatch, 3)
    design._write_clip(tmp_path / "v.mp4", [0, 2], 4.0, tmp_path / "c.mp4")
    assert _Writer.log == [0, 2, "closed"]
    _fake_video(monkeypatch, 3)
    with pytest.raises(StudyError, match="has 2 of the 3 frames a study clip needs"):
        design._write_clip(tmp_path / "v.mp4", [1, 2, 3], 4.0, tmp_path / "c.mp4")
    assert _Writer.log == [1, 2, "aborted"]
    _fake_video(monkeypatch, 3, fill=99)
    with pytest.raises(OSError, match="disk full"):
        design._write_clip(tmp_path / "v.mp4", [0], 4.0, tmp_path / "c.mp4")
    assert _Writer.log == ["aborted"]
    _fake_video(monkeypatch, 3, fill=99)
    with pytest.raises(OSError, match="disk full"):
        design._write_still(tmp_path / "v.mp4", 2, 4.0, tmp_path / "s.mp4")
    assert _Writer.log == ["aborted"]
    _fake_video(monkeypatch, 0)
    with pytest.raises(StudyError, match="has no frame; re-run that item"):
        design._write_still(tmp_path / "v.mp4", 2, 4.0, tmp_path / "s.mp4")


def test_a_reference_frame_is_written_as_that_frames_png(tmp_path, monkeypatch):
    from PIL import Image

    import harness.video as hv

    frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(1, 2, 3, 3)
    monkeypatch.setattr(hv, "read_frames", lambda src, indices: (list(indices), frame))
    design._write_frame(tmp_path / "v.mp4", 5, tmp_path / "r.png")
    assert np.array_equal(np.asarray(Image.open(tmp_path / "r.png")), frame[0])
    monkeypatch.setattr(hv, "read_frames", lambda src, indices: ([], frame[:0]))
    with pytest.raises(StudyError, match="has no frame 5"):
        design._write_frame(tmp_path / "v.mp4", 5, tmp_path / "q.png")
    assert not (tmp_path / "q.png").exists()


def test_a_pair_shows_the_union_of_both_sides_frames_and_the_conditioning_frame(tmp_path, monkeypatch):
    from evaluate.results import MetricEntry

    clips, frames = [], []
    monkeypatch.setattr(design, "_write_clip", lambda src, fr, fps, dst: clips.append((fr, fps, dst.name)))
    monkeypatch.setattr(design, "_write_frame", lambda src, t, dst: frames.append((src, t, dst.name)))
    left = _video_item(tmp_path, "l", [MetricEntry.computed("environment.visible", "b", "paper", 0.1,
                                                            revisit_frames=[[9], [17]])],
                       phases=_PHASES, meta={"camera": {"fps": 3}})
    right = _video_item(tmp_path, "r", [MetricEntry.computed("environment.visible", "b", "paper", 0.2,
                                                             revisit_frames=[[10]])])
    rec = {"metric": "environment.visible[b]", "metric_id": "environment.visible", "_items": (left, right, left)}
    pub = design._static_media(rec, "p1", tmp_path / "media")
    assert clips[0] == ([9, 10, 17], 3.0, "p1-a.mp4")  # the right side's frame too
    assert frames == [(left.video(), 0, "p1-r.png")] and pub["first_view_per_side"] is False
    # 2 frames, then 1, at 3 fps: seconds to 4 decimals
    assert pub["segments"] == [{"label": "R1", "start": 0.0, "end": 0.6667},
                               {"label": "R2", "start": 0.6667, "end": 1.0}]


def test_a_departure_pairs_right_reference_is_its_own_entrys(tmp_path, monkeypatch):
    from evaluate.results import MetricEntry

    frames = []
    monkeypatch.setattr(design, "_write_clip", lambda src, fr, fps, dst: None)
    monkeypatch.setattr(design, "_write_frame", lambda src, t, dst: frames.append((t, dst.name)))
    ph = {"V": [0, 4], "D1": [4, 8], "D2": [8, 10]}
    left = _video_item(tmp_path, "l", [MetricEntry.computed("departure.visible", "b", "paper", 0.1)], phases=ph)
    right = _video_item(tmp_path, "r", [MetricEntry.computed("departure.visible", "b", "paper", 0.2,
                                                             reference_frames=[6])])
    design._static_media({"metric": "departure.visible[b]", "metric_id": "departure.visible",
                          "_items": (left, right, left)}, "p1", tmp_path / "media")
    assert frames == [(0, "p1-ra.png"), (6, "p1-rb.png")]


# -------------------------------------------------------------------------------------------------- dynamic
def test_an_event_without_questions_is_no_event(tmp_path):
    assert design._event(_video_item(tmp_path, "a", meta={"case": {"event": {"action": "x"}}})) is None


def test_a_dynamic_study_names_its_judge_or_asks_for_one(tmp_path):
    two = [_video_item(tmp_path, "a", [_verdict("j1")], meta=_dyn_meta(), family="dynamic"),
           _video_item(tmp_path, "b", [_verdict("j2")], meta=_dyn_meta(), family="dynamic")]
    req = design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, secret="s" * 16)
    with pytest.raises(StudyError, match=r"judge=: these runs were judged by several models \(j1, j2\); name one"):
        design.design_dynamic(req, two)
    recs, counts = design.design_dynamic(dataclasses.replace(req, judge="j2"), two)
    assert counts["dynamic"]["judge"] == "j2" and len(recs) == 1
    unjudged = [_video_item(tmp_path, "c", meta=_dyn_meta(), family="dynamic")]
    with pytest.raises(StudyError, match="metric=dynamic: no dynamic video of these runs has a judge verdict"):
        design.design_dynamic(req, unjudged)


def test_a_dynamic_study_adds_checks_without_practice_and_one_check_alone(tmp_path):
    items = [_video_item(tmp_path, n, meta=_dyn_meta(), family="dynamic") for n in ("a", "b")]
    req = design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, require_judge=False, checks=2, secret="s" * 16)
    recs, _ = design.design_dynamic(req, items)
    assert [bool(r.get("check")) for r in recs] == [False, False, True, True]
    assert len(design.design_dynamic_checks(req, recs[:2], n=1)) == 1


def test_practice_wraps_around_when_there_are_fewer_candidates_than_asked(tmp_path):
    items = [_video_item(tmp_path, n, meta=_dyn_meta(), family="dynamic") for n in ("a", "b")]
    req = design.PlanRequest(runs=[], metrics=["dynamic"], seed=1, require_judge=False, secret="s" * 16)
    recs, _ = design.design_dynamic(req, items)
    got = design.design_dynamic_practice(req, recs, recs, n=3)
    arms = [r["arm"]["arm"] for r in got]
    assert arms[0] != arms[1] and arms[2] == arms[0] and all(r["practice"] for r in got)
    assert design.design_dynamic_practice(req, [], [], n=2) == []


def test_a_dynamic_clip_is_the_whole_video_with_its_phases_in_time_order(tmp_path, monkeypatch):
    clips = []
    monkeypatch.setattr(design, "_write_clip", lambda src, fr, fps, dst: clips.append((fr, dst.name)))
    it = _video_item(tmp_path, "a", meta=_dyn_meta(), family="dynamic",
                     phases={"H": [6, 6], "R1": [4, 6], "V": [0, 4]})  # an empty final hold, listed first
    ev = {**design._event(it), "initial_state": "s", "action": "a", "expected_next_state": "n"}
    pub = design._dynamic_media({"_items": (it, ev)}, "d1", tmp_path / "media")
    assert clips == [([0, 1, 2, 3, 4, 5], "d1.mp4")] and pub["frames"] == 6
    assert [p["name"] for p in pub["phases"]] == ["V", "R1", "H"]
