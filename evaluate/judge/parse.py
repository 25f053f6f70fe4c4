"""Strict parsing of a judge reply: one JSON object with the gate and the eight ids, each yes or no.

Accepted around the object: a reasoning block (``<think>...</think>``) and a Markdown code fence. Accepted in a
value: case and a trailing full stop or exclamation mark (``"Yes."``, ``"YES"``, ``"yes"`` are all yes). Anything
else (a missing id, a ninth answer, "maybe", a truncated object) is a :class:`ParseFailure` with the reason; a
value is never guessed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .prompt import QUESTION_IDS


class ParseFailure(ValueError):
    """The reply does not follow the answer schema; ``str(exc)`` says how."""


def yes_no(value: Any, field: str) -> str:
    """``"yes"``/``"no"`` from a reply value; tolerant only of case, surrounding space and one final . or !"""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, str):
        raise ParseFailure(f"{field}: expected \"yes\" or \"no\", got {json.dumps(value)[:40]}")
    s = value.strip().lower()
    s = re.sub(r"[.!]$", "", s).strip()
    if s not in ("yes", "no"):
        raise ParseFailure(f"{field}: expected \"yes\" or \"no\", got {json.dumps(value)[:40]}")
    return s


def _json_object(text: str) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ParseFailure("empty reply")
    s = re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", s, flags=re.S)
    if fence:
        s = fence.group(1)
    start = s.find("{")
    if start < 0:
        raise ParseFailure("no JSON object in the reply")
    try:
        obj, end = json.JSONDecoder().raw_decode(s[start:])
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"invalid or truncated JSON ({exc.msg} at char {exc.pos})") from None
    rest = s[start + end:].strip()
    if s[:start].strip() or rest:
        raise ParseFailure("text outside the JSON object")
    if not isinstance(obj, dict):
        raise ParseFailure("the reply is not a JSON object")
    return obj


def parse_reply(text: str) -> tuple[bool, list[str]]:
    """``(event_started, [8 x "yes"|"no"] in q1..q8 order)`` from a reply, or :class:`ParseFailure`."""
    obj = _json_object(text)
    extra = sorted(set(obj) - {"event_started", "answers"})
    if extra:
        raise ParseFailure(f"unexpected key(s) {extra}")
    if "event_started" not in obj:
        raise ParseFailure("missing event_started")
    started = yes_no(obj["event_started"], "event_started") == "yes"
    answers = obj.get("answers")
    if not isinstance(answers, dict):
        raise ParseFailure("answers must be an object {q1..q8: yes/no}")
    missing = [q for q in QUESTION_IDS if q not in answers]
    unknown = sorted(set(answers) - set(QUESTION_IDS))
    if missing or unknown:
        raise ParseFailure(f"answers: {len(answers)} given; missing {missing}" + (f", unknown {unknown}" if unknown else ""))
    return started, [yes_no(answers[q], f"answers.{q}") for q in QUESTION_IDS]
