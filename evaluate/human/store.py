"""The vote store of a study: one SQLite database (``votes.sqlite``) in WAL mode.

Why it cannot lose or double-count a judgement:

* every vote is one ``INSERT`` in its own transaction, committed (``synchronous=FULL``: the WAL is fsynced at each
  commit) before the server answers, so a vote the page saw acknowledged survives a ``kill -9`` of the server
  (and a power cut); the WAL is replayed when the database is next opened;
* ``UNIQUE(annotator, item)`` with ``ON CONFLICT DO NOTHING``: a double submit, a retry after a lost reply, or a
  second tab answering the same item leaves the first vote as it was and reports ``duplicate`` (idempotent);
* the database records the sha256 of the ``study.json`` it belongs to and refuses another one, so votes never
  attach to items of a re-planned study.

Sessions (one random id per login, stored as its sha256) live in the same database. Keep the study folder on a
local disk: SQLite's WAL needs shared memory, which network filesystems do not provide reliably.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Optional

from .common import CHOICES_STATIC, DYNAMIC, STATIC, Record, StudyError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS votes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  annotator TEXT NOT NULL,
  item TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('static', 'dynamic')),
  choice TEXT CHECK (choice IS NULL OR choice IN ('A', 'T', 'B')),
  started INTEGER CHECK (started IS NULL OR started IN (0, 1)),
  answers TEXT,
  client_id TEXT,
  elapsed_ms INTEGER,
  created_utc TEXT NOT NULL,
  UNIQUE (annotator, item)
);
CREATE TABLE IF NOT EXISTS corrections (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  vote_id INTEGER NOT NULL REFERENCES votes(id),
  annotator TEXT NOT NULL,
  item TEXT NOT NULL,
  old_choice TEXT, old_started INTEGER, old_answers TEXT,
  new_choice TEXT, new_started INTEGER, new_answers TEXT,
  created_utc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
  sid_sha256 TEXT PRIMARY KEY,
  annotator TEXT NOT NULL,
  created_utc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS revoked (
  annotator TEXT PRIMARY KEY,
  revoked_utc TEXT NOT NULL
);
"""
YES_NO = ("yes", "no")


class VoteError(ValueError):
    """A submitted vote that is malformed (the message names the field); the server answers 400."""


class StudyClosed(VoteError):
    """A vote or a correction after the organiser closed the study (``human close``); the server answers 409."""


class TokenRevoked(VoteError):
    """A vote or a login of an annotator whose token was revoked (``human tokens revoke=``); the server answers
    401."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def study_hash(study_file: Path) -> str:
    return hashlib.sha256(Path(study_file).read_bytes()).hexdigest()


def normalise_vote(kind: str, payload: Record) -> dict[str, Any]:
    """The stored fields of a vote: static ``{"choice": "A"|"T"|"B"}``; dynamic ``{"started": 0|1, "answers":
    None (not started: the questions are not asked) or 8 x "yes"|"no"}``. Raises :class:`VoteError`."""
    if kind == STATIC:
        c = payload.get("choice")
        if c not in CHOICES_STATIC:
            raise VoteError(f"choice={c!r}: must be one of {', '.join(CHOICES_STATIC)} (A better, tie, B better)")
        return {"choice": c, "started": None, "answers": None}
    if kind == DYNAMIC:
        st = payload.get("started")
        if not isinstance(st, bool):
            raise VoteError(f"started={st!r}: must be true or false (did the event visibly start in the initial hold?)")
        ans = payload.get("answers")
        if not st:
            if ans not in (None, []):
                raise VoteError("answers: must be empty when the event did not start (every item scores 0)")
            return {"choice": None, "started": 0, "answers": None}
        if not isinstance(ans, list) or len(ans) != 8 or any(a not in YES_NO for a in ans):
            raise VoteError("answers: a started event needs all eight answers, each 'yes' or 'no'")
        return {"choice": None, "started": 1, "answers": list(ans)}
    raise VoteError(f"kind={kind!r}")


MAX_ELAPSED_MS = 7 * 86400 * 1000  # a week: longer is no time spent on one item (and beyond SQLite's INTEGER)


def _private(db: Path) -> None:
    """The vote database, created empty at mode 0600 if absent (SQLite gives its ``-wal`` / ``-shm`` files the
    database's mode), and an existing one and its journals narrowed to 0600: votes are the owner's only."""
    import os

    try:
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
    except FileExistsError:
        pass
    for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if p.is_file() and not p.is_symlink():
            os.chmod(p, 0o600)


class VoteStore:
    """Votes and sessions of one study (``<study>/votes.sqlite``). Every method opens its own connection, so one
    store may be used from the server's worker threads."""

    def __init__(self, path: Path, study_sha256: str):
        self.path = Path(path)
        self.study_sha256 = study_sha256
        _private(self.path)
        with closing(self._connect()) as c:
            c.execute("PRAGMA journal_mode=WAL")  # persistent: readers never block the writer
            c.executescript(SCHEMA)
            row = c.execute("SELECT value FROM meta WHERE key='study_sha256'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta(key, value) VALUES ('study_sha256', ?)", (study_sha256,))
            elif row[0] != study_sha256:
                raise StudyError(f"{self.path}: these votes belong to another version of study.json (sha256 "
                                 f"{row[0][:12]}..., now {study_sha256[:12]}...); the study was re-planned over its "
                                 "votes. Restore the old study.json or plan a new study under another name")

    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.path, timeout=30, isolation_level=None)  # autocommit; explicit transactions
        c.execute("PRAGMA synchronous=FULL")
        c.execute("PRAGMA busy_timeout=30000")
        c.execute("PRAGMA foreign_keys=ON")
        return c

    # -- votes ---------------------------------------------------------------------------------------------------
    def record(self, annotator: str, item: str, kind: str, payload: Record, client_id: Optional[str] = None,
               elapsed_ms: Optional[int] = None) -> tuple[str, Record]:
        """Store a vote unless this annotator already voted on this item. Returns ``("recorded" | "duplicate",
        the stored vote)``; the first vote always stays."""
        v = normalise_vote(kind, payload)
        if client_id is not None and (not isinstance(client_id, str) or len(client_id) > 64):
            raise VoteError("client_id: a string of at most 64 characters")
        if elapsed_ms is not None and (not isinstance(elapsed_ms, int) or isinstance(elapsed_ms, bool)
                                       or not 0 <= elapsed_ms <= MAX_ELAPSED_MS):
            raise VoteError(f"elapsed_ms: an integer from 0 to {MAX_ELAPSED_MS} (milliseconds)")
        with closing(self._connect()) as c:
            c.execute("BEGIN IMMEDIATE")
            try:
                _check_open(c, annotator)  # in the write transaction: a close or a revocation is never raced
                cur = c.execute(
                    "INSERT INTO votes(annotator, item, kind, choice, started, answers, client_id, elapsed_ms, "
                    "created_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(annotator, item) DO NOTHING",
                    (annotator, item, kind, v["choice"], v["started"],
                     None if v["answers"] is None else json.dumps(v["answers"]), client_id, elapsed_ms, _now()))
                status = "recorded" if cur.rowcount == 1 else "duplicate"
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            row = c.execute("SELECT * FROM votes WHERE annotator=? AND item=?", (annotator, item)).fetchone()
            cols = [d[0] for d in c.execute("SELECT * FROM votes LIMIT 0").description]
        return status, _row(dict(zip(cols, row)))

    def last_vote(self, annotator: str) -> Record | None:
        """This annotator's most recent vote (the one they may still change), or None."""
        with closing(self._connect()) as c:
            cur = c.execute("SELECT * FROM votes WHERE annotator=? ORDER BY id DESC LIMIT 1", (annotator,))
            cols = [d[0] for d in cur.description]
            r = cur.fetchone()
        return _row(dict(zip(cols, r))) if r else None

    def correct(self, annotator: str, item: str, kind: str, payload: Record) -> Record:
        """Change the answer of ``item``, which must be this annotator's most recent vote (a correction before
        moving on: once the next item is answered, earlier answers stay). The vote row takes the new answer and
        the ``corrections`` table keeps the old and new answers with the time (the audit trail; the export
        marks the vote as corrected and gives its first answer). Returns the stored vote."""
        v = normalise_vote(kind, payload)
        with closing(self._connect()) as c:
            c.execute("BEGIN IMMEDIATE")
            try:
                _check_open(c, annotator)
                cur = c.execute("SELECT * FROM votes WHERE annotator=? ORDER BY id DESC LIMIT 1", (annotator,))
                cols = [d[0] for d in cur.description]
                r = cur.fetchone()
                last = dict(zip(cols, r)) if r else None
                if last is None or last["item"] != item:
                    raise VoteError("item: only your last answer can be changed, before you answer the next item")
                new_answers = None if v["answers"] is None else json.dumps(v["answers"])
                c.execute("INSERT INTO corrections(vote_id, annotator, item, old_choice, old_started, old_answers, "
                          "new_choice, new_started, new_answers, created_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          (last["id"], annotator, item, last["choice"], last["started"], last["answers"],
                           v["choice"], v["started"], new_answers, _now()))
                c.execute("UPDATE votes SET choice=?, started=?, answers=? WHERE id=?",
                          (v["choice"], v["started"], new_answers, last["id"]))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        return next(x for x in self.votes() if x["id"] == last["id"])

    def corrections(self) -> list[Record]:
        """The audit trail: every correction, in order (old and new answers, time)."""
        with closing(self._connect()) as c:
            cur = c.execute("SELECT * FROM corrections ORDER BY id")
            cols = [d[0] for d in cur.description]
            out = []
            for r in cur.fetchall():
                x = dict(zip(cols, r))
                for k in ("old_answers", "new_answers"):
                    x[k] = None if x[k] is None else json.loads(x[k])
                for k in ("old_started", "new_started"):
                    x[k] = None if x[k] is None else bool(x[k])
                out.append(x)
            return out

    def votes(self) -> list[Record]:
        """Every vote, in the order stored, with ``corrections`` (how many times it was changed) and
        ``first_choice`` / ``first_started`` / ``first_answers`` (the answer before any correction)."""
        with closing(self._connect()) as c:
            cur = c.execute("SELECT * FROM votes ORDER BY id")
            cols = [d[0] for d in cur.description]
            rows = [_row(dict(zip(cols, r))) for r in cur.fetchall()]
        first: dict[int, Record] = {}
        count: dict[int, int] = {}
        for x in self.corrections():
            first.setdefault(x["vote_id"], x)
            count[x["vote_id"]] = count.get(x["vote_id"], 0) + 1
        for r in rows:
            f = first.get(r["id"])
            r["corrections"] = count.get(r["id"], 0)
            r["first_choice"] = f["old_choice"] if f else r["choice"]
            r["first_started"] = f["old_started"] if f else r["started"]
            r["first_answers"] = f["old_answers"] if f else r["answers"]
        return rows

    def done(self, annotator: str) -> set[str]:
        with closing(self._connect()) as c:
            return {r[0] for r in c.execute("SELECT item FROM votes WHERE annotator=?", (annotator,))}

    # -- closing the study, revoking tokens ------------------------------------------------------------------------
    def close(self) -> str:
        """Close the study: from now on every vote and correction is refused (:class:`StudyClosed`) and the
        report is final. Returns the time it was closed (UTC); closing twice keeps the first time."""
        with closing(self._connect()) as c:
            c.execute("INSERT INTO meta(key, value) VALUES ('closed_utc', ?) ON CONFLICT(key) DO NOTHING", (_now(),))
            return str(c.execute("SELECT value FROM meta WHERE key='closed_utc'").fetchone()[0])

    def closed(self) -> Optional[str]:
        """When the study was closed (UTC), None while it is open."""
        with closing(self._connect()) as c:
            r = c.execute("SELECT value FROM meta WHERE key='closed_utc'").fetchone()
        return None if r is None else str(r[0])

    def revoke(self, annotator: str) -> None:
        """Revoke an annotator's token: their sessions end now and every later login, vote or correction is
        refused (:class:`TokenRevoked`); the votes they gave before stay."""
        with closing(self._connect()) as c:
            c.execute("BEGIN IMMEDIATE")
            try:
                c.execute("INSERT INTO revoked(annotator, revoked_utc) VALUES (?, ?) ON CONFLICT(annotator) DO NOTHING",
                          (annotator, _now()))
                c.execute("DELETE FROM sessions WHERE annotator=?", (annotator,))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise

    def revoked(self) -> dict[str, str]:
        """Revoked annotator -> when (UTC)."""
        with closing(self._connect()) as c:
            return {str(a): str(t) for a, t in c.execute("SELECT annotator, revoked_utc FROM revoked")}

    # -- sessions ------------------------------------------------------------------------------------------------
    def new_session(self, annotator: str) -> str:
        sid = secrets.token_urlsafe(32)
        with closing(self._connect()) as c:
            if c.execute("SELECT 1 FROM revoked WHERE annotator=?", (annotator,)).fetchone():
                raise TokenRevoked("this token was revoked by the study's organiser")
            c.execute("INSERT INTO sessions(sid_sha256, annotator, created_utc) VALUES (?, ?, ?)",
                      (hashlib.sha256(sid.encode()).hexdigest(), annotator, _now()))
        return sid

    def session(self, sid: Optional[str]) -> Optional[str]:
        """The annotator of a session id, or None."""
        if not sid or len(sid) > 128:
            return None
        with closing(self._connect()) as c:
            r = c.execute("SELECT annotator FROM sessions WHERE sid_sha256=?",
                          (hashlib.sha256(sid.encode()).hexdigest(),)).fetchone()
        return r[0] if r else None

    def end_session(self, sid: Optional[str]) -> None:
        if sid:
            with closing(self._connect()) as c:
                c.execute("DELETE FROM sessions WHERE sid_sha256=?", (hashlib.sha256(sid.encode()).hexdigest(),))


def _check_open(c: sqlite3.Connection, annotator: str) -> None:
    """Refuse a write once the study is closed or the annotator's token revoked (inside the caller's
    transaction)."""
    if c.execute("SELECT 1 FROM meta WHERE key='closed_utc'").fetchone():
        raise StudyClosed("the study is closed: the organiser no longer accepts answers")
    if c.execute("SELECT 1 FROM revoked WHERE annotator=?", (annotator,)).fetchone():
        raise TokenRevoked("this token was revoked by the study's organiser")


def _row(r: Record) -> Record:
    r["answers"] = None if r.get("answers") is None else json.loads(r["answers"])
    r["started"] = None if r.get("started") is None else bool(r["started"])
    return r


def read_votes(study_dir: Path) -> list[Record]:
    """The votes of a study (an empty list before anyone voted). Readable while the server runs (WAL)."""
    from .common import DB_FILE, STUDY_FILE

    db = Path(study_dir) / DB_FILE
    if not db.exists():
        return []
    return VoteStore(db, study_hash(Path(study_dir) / STUDY_FILE)).votes()



def study_store(study_dir: Path) -> VoteStore:
    """The vote store of a study folder (created empty if no vote was cast yet)."""
    from .common import DB_FILE, STUDY_FILE

    return VoteStore(Path(study_dir) / DB_FILE, study_hash(Path(study_dir) / STUDY_FILE))


def close_study(study_dir: Path) -> str:
    """Close a study (:meth:`VoteStore.close`): a running server refuses every later vote and correction, and the
    report becomes final. Returns when it was closed (UTC)."""
    return study_store(study_dir).close()


def closed_utc(study_dir: Path) -> Optional[str]:
    """When the study was closed (UTC), None while it is open (or before any vote)."""
    from .common import DB_FILE

    return study_store(study_dir).closed() if (Path(study_dir) / DB_FILE).exists() else None
