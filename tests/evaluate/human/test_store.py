"""The SQLite vote store: one vote per annotator and item however often (or from however many threads) it is
submitted, the first one kept; WAL journal; a process killed with SIGKILL right after its commits loses none of
them; votes never attach to a re-planned study."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from contextlib import closing

import pytest

from evaluate.human.common import StudyError
from evaluate.human.store import VoteError, VoteStore, normalise_vote


def test_a_second_submit_is_a_duplicate_and_the_first_vote_stays(tmp_path):
    s = VoteStore(tmp_path / "v.sqlite", "h" * 64)
    assert s.record("a1", "p001", "static", {"choice": "A"}, "c1", 1200)[0] == "recorded"
    status, kept = s.record("a1", "p001", "static", {"choice": "B"}, "c2", 50)
    assert status == "duplicate" and kept["choice"] == "A" and kept["client_id"] == "c1"
    assert s.record("a2", "p001", "static", {"choice": "B"})[0] == "recorded"
    assert [(v["annotator"], v["choice"]) for v in s.votes()] == [("a1", "A"), ("a2", "B")]
    with closing(sqlite3.connect(tmp_path / "v.sqlite")) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_concurrent_submits_of_one_item_count_once(tmp_path):
    s = VoteStore(tmp_path / "v.sqlite", "h" * 64)
    out, barrier = [], threading.Barrier(8)

    def go(i):
        barrier.wait()
        out.append(s.record("a1", "p001", "static", {"choice": "ATB"[i % 3]}, f"c{i}")[0])

    ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sorted(out) == ["duplicate"] * 7 + ["recorded"]
    assert len(s.votes()) == 1


def test_dynamic_votes_follow_the_gate():
    assert normalise_vote("dynamic", {"started": False}) == {"choice": None, "started": 0, "answers": None}
    assert normalise_vote("dynamic", {"started": True, "answers": ["yes"] * 8})["answers"] == ["yes"] * 8
    for bad, match in [({"started": "yes"}, "started"), ({"started": True, "answers": ["yes"] * 7}, "eight"),
                       ({"started": False, "answers": ["yes"] * 8}, "empty"),
                       ({"started": True, "answers": ["yes"] * 7 + ["maybe"]}, "eight")]:
        with pytest.raises(VoteError, match=match):
            normalise_vote("dynamic", bad)
    with pytest.raises(VoteError, match="choice"):
        normalise_vote("static", {"choice": "a"})


def test_votes_of_another_study_version_are_refused(tmp_path):
    VoteStore(tmp_path / "v.sqlite", "a" * 64).record("a1", "p001", "static", {"choice": "T"})
    with pytest.raises(StudyError, match="another version of study.json"):
        VoteStore(tmp_path / "v.sqlite", "b" * 64)


KILLER = """
import os, signal, sys
from evaluate.human.store import VoteStore
s = VoteStore(sys.argv[1], "h" * 64)
for i in range(25):
    assert s.record("a1", f"p{i:03d}", "static", {"choice": "ATB"[i % 3]})[0] == "recorded"
    print(i, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no exit handler, no close: only what was committed may survive
"""


def test_a_killed_writer_loses_no_committed_vote(tmp_path):
    db = tmp_path / "v.sqlite"
    r = subprocess.run([sys.executable, "-c", KILLER, str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    acknowledged = len(r.stdout.split())
    assert acknowledged == 25
    votes = VoteStore(db, "h" * 64).votes()
    assert [v["item"] for v in votes] == [f"p{i:03d}" for i in range(25)]
    assert [v["choice"] for v in votes] == ["ATB"[i % 3] for i in range(25)]


def test_a_correction_changes_the_last_vote_only_and_keeps_the_audit_trail(tmp_path):
    from evaluate.human.store import VoteError, VoteStore

    s = VoteStore(tmp_path / "votes.sqlite", "h" * 64)
    s.record("a1", "p1", "static", {"choice": "A"})
    s.record("a1", "p2", "static", {"choice": "T"})
    s.record("a2", "p1", "static", {"choice": "B"})  # another annotator's later vote does not move a1's last
    with pytest.raises(VoteError, match="only your last answer"):
        s.correct("a1", "p1", "static", {"choice": "B"})  # a1 has moved on from p1
    got = s.correct("a1", "p2", "static", {"choice": "B"})
    assert got["choice"] == "B" and got["corrections"] == 1 and got["first_choice"] == "T"
    s.correct("a1", "p2", "static", {"choice": "A"})  # changed twice: the first answer is still T
    v = {(x["annotator"], x["item"]): x for x in s.votes()}
    assert v[("a1", "p2")]["choice"] == "A" and v[("a1", "p2")]["first_choice"] == "T"
    assert v[("a1", "p2")]["corrections"] == 2 and v[("a1", "p1")]["corrections"] == 0
    assert [(c["old_choice"], c["new_choice"]) for c in s.corrections()] == [("T", "B"), ("B", "A")]
    assert len(s.votes()) == 3  # a correction never adds a vote
    s.record("a1", "p3", "dynamic", {"started": True, "answers": ["yes"] * 8})
    d = s.correct("a1", "p3", "dynamic", {"started": False, "answers": None})
    assert d["started"] is False and d["first_started"] is True and d["first_answers"] == ["yes"] * 8
