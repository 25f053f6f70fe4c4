"""Shared pieces of the human-study package: its error class, the study folder's layout, names and seeds.

A study folder (``<output_root>/studies/<name>/`` by default):

=====================  ======================================================================================
``study.json``         what annotators may see: per item an opaque id, the question, the clip and image names
                       (no model, policy, run or case name anywhere)
``key.json``           the hidden key: the design (runs, metrics, seed, counts) and per item the arms on each
                       side, the metric values or the judge's answers, the reference answers; never served
``annotators.json``    annotator ids, the sha256 of each token and each annotator's seeded item order
``tokens.txt``         the tokens themselves (mode 0600), for whoever hands them out; never served or logged
``organiser.txt``      the organiser's token (mode 0600): it opens the app's ``/organiser`` page; never handed out
``media/``             the clips and reference frames, copied / transcoded at plan time under opaque names
``votes.sqlite``       the votes (created by ``human serve``; WAL journal)
``exports/``           ``votes.csv`` / ``votes.jsonl`` (``human export``)
``report/``            ``agreement.{md,json}`` and the tables (``human report``)
=====================  ======================================================================================
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

STUDY_SCHEMA = 1
#: one JSON object of a study's files or its votes (a vote, an item of ``key.json`` or ``study.json``, an analysis
#: row): read from and written to JSON as is
Record = dict[str, Any]

STUDY_FILE, KEY_FILE, ANNOTATORS_FILE, TOKENS_FILE = "study.json", "key.json", "annotators.json", "tokens.txt"
ORGANISER_FILE = "organiser.txt"
MEDIA_DIR, DB_FILE, EXPORT_DIR, REPORT_DIR = "media", "votes.sqlite", "exports", "report"
STATIC, DYNAMIC = "static", "dynamic"
CHOICES_STATIC = ("A", "T", "B")  # side A better, tie, side B better (the sides as shown)
ANNOTATOR_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,99}$")
MEDIA_NAME = re.compile(r"^[a-z][0-9]{3,6}(-[a-z0-9]{1,3})?\.(mp4|png)$")  # p007-a.mp4, d003.mp4, p007-r.png


class StudyError(ConfigError):
    """A human-study input a user can fix (bad option, missing runs or values, an existing study); the message
    names the setting and the fix. Printed without a traceback, exit code 2."""


def sub_seed(seed: int, *parts: object) -> int:
    """A 64-bit seed derived from the study seed and a purpose (e.g. ``"order", "a1"``): the same inputs give the
    same stream in every process, and streams for different purposes are independent."""
    h = hashlib.sha256(":".join([str(int(seed)), *map(str, parts)]).encode()).hexdigest()
    return int(h[:16], 16)


def token_hash(token: str) -> str:
    """sha256 hex of an annotator token (what ``annotators.json`` stores)."""
    return hashlib.sha256(token.encode()).hexdigest()


def resolve_study(study: str, output_root: str | Path = "outputs") -> Path:
    """A study by path, or by name under ``<output_root>/studies/``; it must hold ``study.json``."""
    if not study:
        raise StudyError("study=: give the study's name (under output_root/studies/) or its folder")
    cand = Path(study)
    for p in (cand, Path(output_root) / "studies" / study):
        if (p / STUDY_FILE).is_file():
            return p.resolve()
    raise StudyError(f"study={study}: no {STUDY_FILE} in {cand} or {Path(output_root) / 'studies' / study}; plan it "
                     "first (python -m harness human plan run=A run=B ...)")
