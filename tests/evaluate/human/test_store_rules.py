"""The vote store's rules at their edges: what a vote may hold (exact refusals), the bounds of ``client_id`` and
``elapsed_ms``, the stored row's types, which vote is an annotator's last, corrections and their audit trail
(the first answer kept over several corrections, a refused correction writing nothing), sessions (length bound,
ending one), the database's mode 0600, and reading a study without votes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from evaluate.human.store import MAX_ELAPSED_MS, VoteError, VoteStore, normalise_vote, read_votes, study_hash


def _store(tmp_path: Path) -> VoteStore:
    return VoteStore(tmp_path / "votes.sqlite", "h" * 64)


def test_a_vote_holds_exactly_what_its_kind_asks():
    assert normalise_vote("static", {"choice": "T"}) == {"choice": "T", "started": None, "answers": None}
    assert normalise_vote("dynamic", {"started": False}) == {"choice": None, "started": 0, "answers": None}
    assert normalise_vote("dynamic", {"started": False, "answers": []})["answers"] is None
    ans = ["yes", "no"] * 4
    got = normalise_vote("dynamic", {"started": True, "answers": ans})
    assert got == {"choice": None, "started": 1, "answers": ans} and got["answers"] is not ans
    with pytest.raises(VoteError, match=r"^choice='a': must be one of A, T, B \(A better, tie, B better\)$"):
        normalise_vote("static", {"choice": "a"})
    with pytest.raises(VoteError, match=r"^started=1: must be true or false"):
        normalise_vote("dynamic", {"started": 1, "answers": ans})
    with pytest.raises(VoteError, match="must be empty when the event did not start"):
        normalise_vote("dynamic", {"started": False, "answers": ["no"] * 8})
    for bad in (ans[:7], ans + ["no"], ["yes"] * 7 + ["Yes"], "yes" * 8, None):
        with pytest.raises(VoteError, match="a started event needs all eight answers"):
            normalise_vote("dynamic", {"started": True, "answers": bad})
    with pytest.raises(VoteError, match=r"^kind='other'$"):
        normalise_vote("other", {"choice": "A"})


def test_client_id_and_elapsed_bounds(tmp_path):
    s = _store(tmp_path)
    assert s.record("a1", "p1", "static", {"choice": "A"}, "c" * 64, 0)[1]["client_id"] == "c" * 64
    assert s.record("a1", "p2", "static", {"choice": "A"}, None, MAX_ELAPSED_MS)[1]["elapsed_ms"] == MAX_ELAPSED_MS
    assert MAX_ELAPSED_MS == 7 * 24 * 3600 * 1000
    with pytest.raises(VoteError, match=r"^client_id: a string of at most 64 characters$"):
        s.record("a1", "p3", "static", {"choice": "A"}, "c" * 65)
    with pytest.raises(VoteError, match="client_id"):
        s.record("a1", "p3", "static", {"choice": "A"}, 7)  # type: ignore[arg-type]
    for bad in (-1, MAX_ELAPSED_MS + 1, True, 1.5, "10"):
        with pytest.raises(VoteError, match=rf"^elapsed_ms: an integer from 0 to {MAX_ELAPSED_MS} \(milliseconds\)$"):
            s.record("a1", "p3", "static", {"choice": "A"}, None, bad)  # type: ignore[arg-type]
    assert s.done("a1") == {"p1", "p2"} and s.done("a2") == set()  # nothing refused was stored


def test_the_stored_row_has_python_types(tmp_path):
    s = _store(tmp_path)
    status, row = s.record("a1", "d1", "dynamic", {"started": True, "answers": ["no"] * 8}, "c1", 5)
    assert status == "recorded"
    assert row["started"] is True and row["answers"] == ["no"] * 8 and row["kind"] == "dynamic"
    assert row["annotator"] == "a1" and row["item"] == "d1" and row["choice"] is None and row["elapsed_ms"] == 5
    _, row = s.record("a1", "d2", "dynamic", {"started": False})
    assert row["started"] is False and row["answers"] is None
    _, row = s.record("a1", "p1", "static", {"choice": "B"})
    assert row["started"] is None and row["answers"] is None and row["choice"] == "B"


def test_the_last_vote_is_the_annotators_most_recent(tmp_path):
    s = _store(tmp_path)
    assert s.last_vote("a1") is None
    s.record("a1", "p1", "static", {"choice": "A"})
    s.record("a1", "p2", "static", {"choice": "B"})
    s.record("a2", "p3", "static", {"choice": "T"})
    s.record("a1", "p1", "static", {"choice": "T"})  # a duplicate is not a new vote
    last = s.last_vote("a1")
    assert last is not None and last["item"] == "p2" and last["choice"] == "B"
    s.record("a1", "d1", "dynamic", {"started": True, "answers": ["yes"] * 8})
    last = s.last_vote("a1")
    assert last is not None and last["started"] is True and last["answers"] == ["yes"] * 8


def test_corrections_keep_the_first_answer_and_a_refused_one_writes_nothing(tmp_path):
    s = _store(tmp_path)
    with pytest.raises(VoteError, match="only your last answer"):
        s.correct("a1", "p1", "static", {"choice": "A"})  # nothing voted yet
    s.record("a1", "p1", "static", {"choice": "A"})
    s.record("a1", "d1", "dynamic", {"started": True, "answers": ["yes"] * 8})
    with pytest.raises(VoteError, match="choice="):
        s.correct("a1", "d1", "static", {"choice": "X"})
    with pytest.raises(VoteError, match="only your last answer"):
        s.correct("a1", "p1", "static", {"choice": "B"})
    assert s.corrections() == []
    s.correct("a1", "d1", "dynamic", {"started": False})
    s.correct("a1", "d1", "dynamic", {"started": True, "answers": ["no"] * 8})
    trail = s.corrections()
    assert [(c["old_started"], c["new_started"]) for c in trail] == [(True, False), (False, True)]
    assert [(c["old_answers"], c["new_answers"]) for c in trail] == [(["yes"] * 8, None), (None, ["no"] * 8)]
    assert trail[0]["vote_id"] == trail[1]["vote_id"] and trail[0]["annotator"] == "a1" and trail[0]["item"] == "d1"
    v = {x["item"]: x for x in s.votes()}
    assert v["d1"]["first_started"] is True and v["d1"]["first_answers"] == ["yes"] * 8
    assert v["d1"]["started"] is True and v["d1"]["answers"] == ["no"] * 8 and v["d1"]["corrections"] == 2
    assert v["p1"]["first_choice"] == "A" and v["p1"]["first_started"] is None and v["p1"]["corrections"] == 0
    assert [x["item"] for x in s.votes()] == ["p1", "d1"]  # the order stored


def test_sessions(tmp_path):
    s = _store(tmp_path)
    sid = s.new_session("a1")
    assert len(sid) >= 40 and s.session(sid) == "a1" and sid != s.new_session("a1")
    assert s.session(None) is None and s.session("") is None and s.session("x" * 128) is None
    assert s.session(sid + "x") is None
    s.end_session(None)
    s.end_session("")
    assert s.session(sid) == "a1"
    s.end_session(sid)
    assert s.session(sid) is None


def test_a_session_id_longer_than_128_is_never_looked_up(tmp_path, monkeypatch):
    s = _store(tmp_path)
    long_sid = "y" * 129
    import hashlib
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(s.path)) as c:  # a stored session whose id is 129 characters long
        c.execute("INSERT INTO sessions VALUES (?, 'a9', 'now')", (hashlib.sha256(long_sid.encode()).hexdigest(),))
        c.execute("INSERT INTO sessions VALUES (?, 'a8', 'now')", (hashlib.sha256(b"z" * 128).hexdigest(),))
        c.commit()
    assert s.session(long_sid) is None and s.session("z" * 128) == "a8"


def test_the_vote_database_is_the_owners_only(tmp_path):
    import sqlite3
    from contextlib import closing

    old = os.umask(0o022)
    try:
        s = _store(tmp_path)
        s.record("a1", "p1", "static", {"choice": "A"})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "votes.sqlite").stat().st_mode) == 0o600
    db = tmp_path / "v2.sqlite"
    VoteStore(db, "h" * 64)
    os.chmod(db, 0o644)
    with closing(sqlite3.connect(db, isolation_level=None)) as c:  # an open reader keeps the WAL file
        c.execute("INSERT INTO meta VALUES ('x', 'y')")
        wal = tmp_path / "v2.sqlite-wal"
        os.chmod(wal, 0o644)
        VoteStore(db, "h" * 64)
        assert stat.S_IMODE(db.stat().st_mode) == 0o600  # an existing database is narrowed
        assert stat.S_IMODE(wal.stat().st_mode) == 0o600  # and its journal


def test_a_study_without_votes_reads_as_empty(tmp_path):
    (tmp_path / "study.json").write_text("{}")
    assert read_votes(tmp_path) == [] and not (tmp_path / "votes.sqlite").exists()
    VoteStore(tmp_path / "votes.sqlite", study_hash(tmp_path / "study.json")).record("a1", "p1", "static",
                                                                                     {"choice": "T"})
    assert [(v["annotator"], v["choice"]) for v in read_votes(tmp_path)] == [("a1", "T")]
    assert study_hash(tmp_path / "study.json") == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def test_a_linked_vote_database_is_not_narrowed_through_the_link(tmp_path):
    """votes.sqlite as a symbolic link: it is neither created over nor chmod-ed through (the mode of whatever it
    points at is not the store's to change)."""
    target = tmp_path / "elsewhere.sqlite"
    VoteStore(target, "h" * 64)
    os.chmod(target, 0o644)
    link = tmp_path / "votes.sqlite"
    link.symlink_to(target)
    VoteStore(link, "h" * 64).record("a1", "p1", "static", {"choice": "A"})
    assert link.is_symlink() and stat.S_IMODE(target.stat().st_mode) == 0o644


def test_every_connection_is_durable_and_checks_references(tmp_path):
    from contextlib import closing

    s = _store(tmp_path)
    with closing(s._connect()) as c:
        assert c.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: the WAL is synced at every commit
        assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert c.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_session_id_carries_256_random_bits(tmp_path):
    sid = _store(tmp_path).new_session("a1")
    assert len(sid) == 43  # secrets.token_urlsafe(32): 32 bytes, base64url without padding
