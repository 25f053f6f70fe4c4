"""Closing a human study and revoking its tokens, rule by rule in process: the vote store's closed state and
revocations, the design's revocation list, the server's status codes and the organiser's table, and PLCC rows
with constant columns (evaluate/human/store.py, design.py, stats.py; harness/app/human/server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evaluate.human import stats
from evaluate.human.common import StudyError
from evaluate.human.design import revoke_annotators
from evaluate.human.store import StudyClosed, TokenRevoked, VoteError, study_store


# -- revoking tokens (evaluate/human/design.py) -----------------------------------------------------------------------
def _study(tmp_path: Path, tokens: str) -> Path:
    """The files :func:`revoke_annotators` reads: annotators a1, a2, a3, a ``study.json`` and ``tokens.txt``."""
    d = tmp_path / "st"
    d.mkdir()
    (d / "annotators.json").write_text(json.dumps({"annotators": [{"id": "a1"}, {"id": "a2"}, {"id": "a3"}]}))
    (d / "study.json").write_text("{}")
    (d / "tokens.txt").write_text(tokens)
    return d


def test_revoking_no_annotator_is_refused_and_writes_nothing(tmp_path):
    d = _study(tmp_path, "a1\tT1\n")
    with pytest.raises(StudyError) as e:
        revoke_annotators(d, [])
    assert str(e.value) == "revoke=: name the annotators to revoke, e.g. revoke=a1; st's are a1, a2, a3"
    assert sorted(p.name for p in d.iterdir()) == ["annotators.json", "study.json", "tokens.txt"]
    assert (d / "tokens.txt").read_text() == "a1\tT1\n"


def test_revoking_keeps_every_other_tokens_line_whole_even_with_a_second_tab(tmp_path):
    # tokens.txt is ``<id>\t<token>`` lines: the id ends at the first tab, the rest of the line is kept as it was
    d = _study(tmp_path, "a1\tT1\na2\tT2\tsent by mail\na3\tT3\n")
    assert revoke_annotators(d, ["a3", "a3"]) == ["a3"]
    assert (d / "tokens.txt").read_text() == "a1\tT1\na2\tT2\tsent by mail\n"
    assert sorted(study_store(d).revoked()) == ["a3"]


# -- closing and revoking in the vote store (evaluate/human/store.py) ------------------------------------------------
def test_closing_twice_keeps_the_first_time(tmp_path, monkeypatch):
    from evaluate.human import store as store_mod

    s = store_mod.VoteStore(tmp_path / "votes.sqlite", "h" * 64)
    assert s.closed() is None
    times = iter(["2026-01-02T03:04:05", "2026-02-03T04:05:06"])
    monkeypatch.setattr(store_mod, "_now", lambda: next(times))
    assert (s.close(), s.close(), s.closed()) == ("2026-01-02T03:04:05",) * 3


def test_a_revocation_that_fails_midway_revokes_nobody_and_leaves_the_store_writable(tmp_path, monkeypatch):
    from evaluate.human import store as store_mod

    s = store_mod.VoteStore(tmp_path / "votes.sqlite", "h" * 64)
    sid = s.new_session("a1")

    def broken_clock() -> str:
        raise RuntimeError("clock")

    monkeypatch.setattr(store_mod, "_now", broken_clock)
    with pytest.raises(RuntimeError, match="^clock$"):
        s.revoke("a1")
    assert (s.revoked(), s.session(sid)) == ({}, "a1")
    monkeypatch.setattr(store_mod, "_now", lambda: "2026-01-02T03:04:05")
    s.revoke("a1")  # the failed one left no transaction holding the write lock
    assert (s.revoked(), s.session(sid)) == ({"a1": "2026-01-02T03:04:05"}, None)


# -- the organiser's table and the status codes (harness/app/human/server.py) ----------------------------------------
def _row(annotator: str, too_fast: bool, failed: list[str]) -> dict:
    """One row as :func:`evaluate.human.analysis.progress` gives it."""
    return {"annotator": annotator, "done": 1, "total": 2, "last_vote_utc": None, "corrected": 0, "checks": 1,
            "checks_passed": 1 - len(failed), "failed_items": failed, "median_s": 1.5, "fast_votes": 2 if too_fast else 0,
            "timed_votes": 2, "too_fast": too_fast, "revoked_utc": None, "agree_with_metric": None,
            "decisive_votes": 0}


def _table(monkeypatch, rows: list[dict], closed: str | None) -> str:
    pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")
    from evaluate.human import analysis
    from harness.app.human.server import _Site

    monkeypatch.setattr(analysis, "progress", lambda study_dir: rows)
    study = SimpleNamespace(kind="static", dir=Path("st"), store=SimpleNamespace(closed=lambda: closed))
    return _Site(study).organiser_table()


def test_the_organiser_table_flags_a_row_too_fast_or_with_a_failed_check(monkeypatch):
    html = _table(monkeypatch, [_row("f", True, []), _row("c", False, ["i1"]), _row("ok", False, [])], None)
    opens = [part.split(">", 1)[0] for part in html.split("<tr data-annotator=")[1:]]
    assert opens == ["'f' class='flag'", "'c' class='flag'", "'ok'"]


def test_the_organiser_table_says_open_or_when_the_study_closed(monkeypatch):
    assert "<p id='organiser-total'>Open. 1 of 2 answers in (1 annotator)." in _table(
        monkeypatch, [_row("ok", False, [])], None)
    assert ("<p id='organiser-total'>Closed at 2026-01-02T03:04:05 UTC: no vote is accepted. 1 of 2 answers in "
            "(1 annotator).") in _table(monkeypatch, [_row("ok", False, [])], "2026-01-02T03:04:05")


@pytest.mark.parametrize("exc, status", [
    (TokenRevoked("revoked"), 401), (StudyClosed("closed"), 409), (VoteError("bad"), 400),
])
def test_a_refused_vote_is_401_when_revoked_409_when_closed_else_400(exc, status):
    pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")
    from harness.app.human.server import _status_of

    assert _status_of(exc) == status


# -- PLCC rows (evaluate/human/stats.py) -------------------------------------------------------------------------------
def test_a_row_constant_up_to_rounding_has_no_plcc_on_either_side():
    # 0.1 three times: its mean is not exactly 0.1, so the centred row is 3 x -1.4e-17, not 0, and only the
    # constant test (not a 0/0) makes its correlation NaN, as scipy's pearsonr is for a constant input
    a = np.array([[0.1, 0.1, 0.1], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 2.0, 3.0], [0.1, 0.1, 0.1], [3.0, 2.0, 2.0]])
    r = stats.plcc_rows(a, b)
    assert np.isnan(r[:2]).all() and r[2] == pytest.approx(-0.8660254037844387, abs=1e-15)


def test_plcc_rows_are_clipped_to_minus_one_and_one():
    # [0.1, 0.1, 0.2] against a tenth of itself: the unclipped quotient rounds to 1.0000000000000002 (and its
    # negation to -1.0000000000000002)
    a = np.array([[0.1, 0.1, 0.2], [0.1, 0.1, 0.2]])
    b = a * np.array([[0.1], [-0.1]])
    assert stats.plcc_rows(a, b).tolist() == [1.0, -1.0]
