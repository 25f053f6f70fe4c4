"""Study design from evaluated runs: blinded, balanced, seeded pairs and instances; a study folder that holds the
hidden key apart from what annotators see; clear errors with nothing written."""

from __future__ import annotations

import json
import os
import stat
from itertools import combinations
from pathlib import Path

import pytest

from evaluate.human.common import StudyError
from evaluate.human.design import PlanRequest, add_annotators, plan_study, static_candidates
from tests.support.human_data import QUALITY, make_runs

ARMS3 = ("alpha/fullkv", "beta/fullkv", "gamma/fullkv")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"), arms=ARMS3, seeds={"gamma/fullkv": 42})


def plan(runs, out, **kw):
    kw.setdefault("metrics", ["static"])
    kw.setdefault("seed", 0)
    return plan_study(PlanRequest(runs=list(runs), **kw), out)


def read(d: Path, f: str):
    return json.loads((d / f).read_text())


def test_candidates_cover_every_two_arms_per_task_and_pair_different_seeds(runs):
    from evaluate.human.sources import load_items

    items = load_items(runs)
    cands = static_candidates(items, "environment.visible[pixel-thumb16]")
    assert len(cands) == 2 * 2 * 3  # 2 env cases x 2 trajectories x C(3, 2) arm pairs
    assert {(a.arm, b.arm) for a, b in cands} == set(combinations(sorted(QUALITY), 2))
    assert all(a.case_id == b.case_id and a.trajectory == b.trajectory for a, b in cands)
    assert {(a.seed, b.seed) for a, b in cands if b.arm == "gamma/fullkv"} == {(1, 42)}  # by seed rank


def test_plan_is_deterministic_blind_and_balanced(runs, tmp_path):
    r1 = plan(runs, tmp_path / "s1", pairs=8, secret="0123456789abcdef")  # the same recorded secret: the same study
    r2 = plan(runs, tmp_path / "s2", pairs=8, secret="0123456789abcdef")
    d1, d2 = Path(r1["dir"]), Path(r2["dir"])
    assert r1["counts"] == {"environment.visible[pixel-thumb16]": {"candidates": 12, "pairs": 8, "short": False},
                            "object.geometry[template-ncc]": {"candidates": 6, "pairs": 6, "short": True}}
    assert (d1 / "study.json").read_bytes() == (d2 / "study.json").read_bytes()
    assert (d1 / "key.json").read_bytes() == (d2 / "key.json").read_bytes()
    assert sorted(os.listdir(d1 / "media")) == sorted(os.listdir(d2 / "media"))
    for f in os.listdir(d1 / "media"):
        assert (d1 / "media" / f).read_bytes() == (d2 / "media" / f).read_bytes(), f
    a1, a2 = read(d1, "annotators.json")["annotators"], read(d2, "annotators.json")["annotators"]
    assert [a["order"] for a in a1] == [a["order"] for a in a2]
    assert [a["token_sha256"] for a in a1] != [a["token_sha256"] for a in a2]  # tokens are secrets, not seeded
    assert len({tuple(a["order"]) for a in a1}) == 3  # each annotator has an own order of the same items
    assert all(sorted(a["order"]) == sorted(i["id"] for i in read(d1, "study.json")["items"]) for a in a1)
    r3 = plan(runs, tmp_path / "s3", pairs=8, seed=1, secret="0123456789abcdef")
    assert (Path(r3["dir"]) / "key.json").read_bytes() != (d1 / "key.json").read_bytes()

    key = read(d1, "key.json")
    assert key["design"]["seed"] == 0 and len(key["items"]) == 6 + 8  # object.geometry has 6 candidates: all
    # A/B balance: within each metric and arm pair, each arm is shown as A as often as B (within one)
    groups: dict = {}
    for it in key["items"]:
        g = groups.setdefault((it["metric"], tuple(sorted([it["A"]["arm"], it["B"]["arm"]]))), {})
        g[it["A"]["arm"]] = g.get(it["A"]["arm"], 0) + 1
        g.setdefault(it["B"]["arm"], 0)
    for g, c in groups.items():
        assert abs(list(c.values())[0] - list(c.values())[1]) <= 1, (g, c)
    assert {it["swapped"] for it in key["items"]} == {True, False}

    # blind: nothing annotators can get names a model, a policy, a run or a case
    public = (d1 / "study.json").read_text() + (d1 / "annotators.json").read_text() + " ".join(os.listdir(d1 / "media"))
    for it in key["items"]:
        for side in ("A", "B"):
            for k in ("model", "context", "run", "item_dir", "case_id", "arm"):
                assert str(it[side][k]) not in public, (k, it[side][k])
    assert "alpha" in (d1 / "key.json").read_text()
    assert all(n.split(".")[0].split("-")[0] in {i["id"] for i in key["items"]} for n in os.listdir(d1 / "media"))
    # the study's items say what the metric asks about and which clip is which
    st = {i["id"]: i for i in read(d1, "study.json")["items"]}
    for it in key["items"]:
        pub = st[it["id"]]
        assert pub["clips"] == {"A": f"{it['id']}-a.mp4", "B": f"{it['id']}-b.mp4"}
        if it["metric"].startswith("object.geometry"):
            assert "red cup" in pub["question"] and "shape" in pub["question"]
            assert [s["label"] for s in pub["segments"]] == ["R1", "R2"] and pub["frames"] == 4  # revisit frames
        else:
            assert pub["frames"] == 4  # the two revisit phases, 2 frames each
    mode = stat.S_IMODE((d1 / "tokens.txt").stat().st_mode)
    assert mode == 0o600


def test_clips_hold_the_revisit_frames_of_both_sides(runs, tmp_path):
    from harness.video import read_frames

    d = Path(plan(runs, tmp_path / "s", metrics=["object.geometry"])["dir"])
    key = read(d, "key.json")
    it = key["items"][0]
    for side in ("A", "B"):
        _, clip = read_frames(d / "media" / f"{it['id']}-{side.lower()}.mp4")
        _, src = read_frames(Path(it[side]["item_dir"]) / "video.mp4")
        assert len(clip) == 4
        # each clip frame is (re-encoded) the source frame it should be: the nearest of all 12
        nearest = [int(abs(src.astype(int) - f.astype(int)).mean(axis=(1, 2, 3)).argmin()) for f in clip]
        assert nearest == [4, 5, 8, 9], side
    assert it["clip_frames"] == [["R1", 4, 6], ["R2", 8, 10]]


def test_dynamic_plan_records_the_judge_and_hides_the_answers(runs, tmp_path):
    d = Path(plan(runs, tmp_path / "d", metrics=["dynamic"], instances=5)["dir"])
    key, st = read(d, "key.json"), read(d, "study.json")
    assert st["kind"] == "dynamic" and len(st["items"]) == 5 and len(key["items"]) == 5
    for pub, hid in zip(st["items"], key["items"]):
        assert pub["id"] == hid["id"] and pub["clip"] == f"{pub['id']}.mp4"
        assert [p["name"] for p in pub["phases"]] == ["V", "D1", "R1", "D2", "R2", "H"]
        assert len(pub["questions"]) == 8 and "answer" not in json.dumps(pub["questions"])
        assert hid["vlm"]["items"] and len(hid["references"]) == 8 and hid["judge"] == "Qwen/Qwen3.8-27B"
    assert len(os.listdir(d / "media")) == 5


@pytest.mark.parametrize("kw, match", [
    ({"metrics": ["human.identity"]}, "not computed in these runs .*weights not found"),
    ({"metrics": ["camera.rpe_rot"]}, "not a static metric"),
    ({"metrics": ["dynamic", "environment.visible"]}, "study of its own"),
    ({"metrics": ["dynamic"], "pairs": 3}, "instances=N"),
    ({"annotators": ["ok", "b a d"]}, "annotators="),
    ({"annotators": ["x", "x"]}, "twice"),
    ({"metrics": ["dynamic"], "judge": "other/judge"}, "no dynamic video of these runs has its verdict"),
])
def test_bad_requests_fail_clearly_and_write_nothing(runs, tmp_path, kw, match):
    with pytest.raises(StudyError, match=match):
        plan(runs, tmp_path / "studies" / "x", **kw)
    assert not (tmp_path / "studies").exists() or os.listdir(tmp_path / "studies") == []


def test_one_arm_and_an_existing_study_are_refused(runs, tmp_path):
    with pytest.raises(StudyError, match="one arm only"):
        plan(runs[:1], tmp_path / "one")
    plan(runs, tmp_path / "s")
    before = sorted(os.listdir(tmp_path / "s"))
    with pytest.raises(StudyError, match="exists"):
        plan(runs, tmp_path / "s")
    assert sorted(os.listdir(tmp_path / "s")) == before


def test_annotators_can_be_added_with_seeded_orders(runs, tmp_path):
    from evaluate.human.common import token_hash
    from evaluate.human.design import annotator_order

    d = Path(plan(runs, tmp_path / "s", annotators=["ann1", "ann2"])["dir"])
    new = add_annotators(d, ["ann3"])
    ann = {a["id"]: a for a in read(d, "annotators.json")["annotators"]}
    toks = dict(line.split("\t") for line in (d / "tokens.txt").read_text().splitlines())
    assert set(toks) == {"ann1", "ann2", "ann3"} and toks["ann3"] == new["ann3"]
    assert all(token_hash(toks[a]) == ann[a]["token_sha256"] for a in toks)
    ids = [i["id"] for i in read(d, "study.json")["items"]]
    secret = read(d, "key.json")["design"]["secret"]
    assert ann["ann3"]["order"] == annotator_order(0, "ann3", ids, secret)
    assert ann["ann3"]["order"] != annotator_order(0, "ann3", ids) or len(ids) < 3  # the secret takes part
    with pytest.raises(StudyError, match="already"):
        add_annotators(d, ["ann1"])


def test_a_killed_planners_half_written_folder_is_cleared(runs, tmp_path):
    import subprocess
    import sys

    from harness.io import host_tag

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    left = tmp_path / f".s.{host_tag()}-{dead}.partial"
    (left / "media").mkdir(parents=True)
    plan(runs, tmp_path / "s", metrics=["object.geometry"])
    assert not left.exists() and (tmp_path / "s" / "study.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["s"]


def test_metric_static_says_which_paper_metrics_it_leaves_out(runs, tmp_path, capsys):
    """The runs compute environment.visible and object.geometry only: the other four of the paper's six are named,
    with their reasons, in the plan's result, the key and the command's warning."""
    from harness.app.human import main as human_main

    out = plan(runs, tmp_path / "s", metrics=["static"])
    dropped = [d["metric"] for d in out["dropped"]]
    assert dropped == ["human.identity", "human.appearance", "object.appearance", "environment.depth"]
    assert set(out["counts"]) == {"object.geometry[template-ncc]", "environment.visible[pixel-thumb16]"}
    assert read(Path(out["dir"]), "key.json")["design"]["dropped"] == out["dropped"]
    assert all(d["reason"] for d in out["dropped"])
    assert plan(runs, tmp_path / "t", metrics=["environment.visible"])["dropped"] == []  # named metrics: no warning
    code = human_main(["plan", *[f"run={r}" for r in runs], "metric=static", "seed=0", f"output_root={tmp_path}",
                       "name=cli"])
    text = capsys.readouterr().out
    assert code == 0 and "warning: metric=static plans 2 of the paper's six static metrics" in text
    assert "human.identity (" in text and "weights list" in text
