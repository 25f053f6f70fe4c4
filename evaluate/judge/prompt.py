"""The checklist prompt (WorldMemBench appendix D) and the request a judge server receives.

The judge sees the case's event (initial state, action, expected next state), the planned camera-phase ranges
(initial hold ``V``, departures ``D_k``, revisits ``R_k``, final stationary hold ``H``) and the rollout sampled every
8th frame plus the first and last, in chronological order, each labelled with its frame index, phase and time.
It first decides whether the event visibly starts during the initial hold (the gate), then answers the eight
questions. The frozen reference answers are never sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import numpy as np

from trajectories.phases import Phase, PhaseKind, phase_at

from .settings import PROMPT_VERSION, JudgeSettings

if TYPE_CHECKING:
    from harness.cases import Event

#: an OpenAI chat-completions request body (JSON: ``model``, ``messages``, sampling and response-format fields)
Body = dict[str, Any]
QUESTION_IDS = tuple(f"q{i}" for i in range(1, 9))
_PHASE_NAMES = {PhaseKind.VIEW: "initial hold", PhaseKind.DEPART: "departure", PhaseKind.RETURN: "revisit",
                PhaseKind.HOLD: "final stationary hold"}

SYSTEM = ("You are a careful, impartial evaluator of generated videos. You judge only what the frames show, and you "
          "reply with a single JSON object and nothing else.")


class JudgeInputError(ValueError):
    """The item cannot be judged as given (e.g. the case's event has no eight questions); the message says why."""


@dataclass(frozen=True)
class JudgeInput:
    """What one judge request needs.

    frames: (N, H, W, 3) uint8 RGB at ``frame_indices`` (stride 8 + first + last, chronological).
    frame_indices: the N frame numbers. phases: phase label -> (start, end) half-open frame range.
    fps: frames per second (for the time labels). event: mapping with ``initial_state``, ``action``,
    ``expected_next_state`` and ``questions`` (8 x ``{aspect, question, answer}``; the answers are never sent).
    """

    frames: np.ndarray
    frame_indices: Sequence[int]
    phases: Mapping[str, Sequence[int]]
    fps: float
    event: Mapping[str, Any]

    def validate(self) -> None:
        ev = self.event or {}
        qs = ev.get("questions") or []
        if len(qs) != 8:
            raise JudgeInputError(f"the case's event has {len(qs)} question(s); the checklist needs exactly 8 (two "
                                  "per aspect: return_progress, persistence_reset, final_state, causal_physical); "
                                  "fix event.questions in the case file (docs/cases.md)")
        for k in ("initial_state", "action", "expected_next_state"):
            if not str(ev.get(k) or "").strip():
                raise JudgeInputError(f"the case's event has no {k}; add event.{k} to the case file")
        if len(self.frames) != len(self.frame_indices) or len(self.frames) == 0:
            raise JudgeInputError(f"{len(self.frames)} frames for {len(self.frame_indices)} indices")


def _phase_label(name: str) -> str:
    try:
        phase = Phase.parse(name)
    except ValueError:  # a label of another writer's path: shown as it is
        return name
    base = _PHASE_NAMES[phase.kind]
    return f"{base} {phase.index}" if phase.index else base


def encode_frame(frame: np.ndarray, size: int) -> str:
    """JPEG (quality 90) data URL of ``frame`` resized so its longer side is ``size`` pixels (area filter)."""
    import cv2

    h, w = frame.shape[:2]
    s = size / float(max(h, w))
    if s != 1.0:
        frame = cv2.resize(frame, (max(1, round(w * s)), max(1, round(h * s))),
                           interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(frame[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise JudgeInputError("could not JPEG-encode a frame")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def prompt_text(inp: JudgeInput) -> tuple[str, list[str], str]:
    """(preamble, per-frame labels, instructions) of the checklist prompt."""
    ev = inp.event
    ranges = "\n".join(
        f"- {name} ({_phase_label(name)}): frames {a}-{b - 1} ({a / inp.fps:.2f}-{(b - 1) / inp.fps:.2f} s)"
        for name, (a, b) in inp.phases.items())
    preamble = (
        "Evaluate the dynamic memory of a generated video. The camera follows a planned path: it holds still on "
        "the scene, turns away (departure), comes back (revisit), possibly several times, and ends with a "
        "stationary hold. An event is meant to happen in the scene and to keep evolving while the camera looks "
        "away.\n\n"
        f"Event\n- Initial state: {ev['initial_state']}\n- Action: {ev['action']}\n"
        f"- Expected next state: {ev['expected_next_state']}\n\n"
        f"Planned camera phases\n{ranges}\n\n"
        f"The {len(inp.frame_indices)} frames below are sampled every 8th frame, always including the first and "
        "the last, in chronological order. Each is labelled with its frame index, phase and time.")
    labels = [f"Frame {int(t)} | phase {phase_at(inp.phases, int(t)) or '?'} | t = {int(t) / inp.fps:.2f} s"
              for t in inp.frame_indices]
    qs = "\n".join(f"{qid} [{q['aspect']}]: {q['question']}" for qid, q in zip(QUESTION_IDS, ev["questions"]))
    instructions = (
        "Step 1 (event start): decide whether the event visibly starts during the initial hold (phase V), i.e. "
        "whether the V frames show concrete progress of the action. Step 2: answer each question below with yes or "
        "no from the ordered frames, using the phase ranges to locate the evidence.\n\n"
        f"Questions\n{qs}\n\n"
        'Reply with only this JSON object: {"event_started": "yes" or "no", "answers": {"q1": "yes" or "no", ..., '
        '"q8": "yes" or "no"}}')
    return preamble, labels, instructions


def response_schema() -> dict[str, Any]:
    yn = {"type": "string", "enum": ["yes", "no"]}
    return {
        "type": "object",
        "properties": {
            "event_started": yn,
            "answers": {"type": "object", "properties": {q: yn for q in QUESTION_IDS},
                        "required": list(QUESTION_IDS), "additionalProperties": False},
        },
        "required": ["event_started", "answers"],
        "additionalProperties": False,
    }


def build_request(inp: JudgeInput, settings: JudgeSettings) -> tuple[Body, dict[str, Any]]:
    """The chat-completions request body and its identity.

    Returns:
        ``(body, identity)``: ``body`` is sent as is (images as base64 data URLs); ``identity`` holds the request
        key (a hash of model, prompt, frames and the answer-affecting settings) and the image digests.
    """
    inp.validate()
    preamble, labels, instructions = prompt_text(inp)
    urls = [encode_frame(f, settings.image_size) for f in inp.frames]
    content: list[dict[str, Any]] = [{"type": "text", "text": preamble}]
    for label, url in zip(labels, urls):
        content.append({"type": "text", "text": label})
        content.append({"type": "image_url", "image_url": {"url": url}})
    content.append({"type": "text", "text": instructions})
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": content}],
        "temperature": settings.temperature,
        "seed": settings.seed,
        "max_tokens": settings.max_tokens,
    }
    if settings.json_schema:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "checklist", "schema": response_schema(), "strict": True}}
    digests = [hashlib.sha256(u.encode()).hexdigest() for u in urls]
    ident = {
        "prompt_version": PROMPT_VERSION,
        "prompt": [preamble, labels, instructions, SYSTEM],
        "frames": [int(t) for t in inp.frame_indices],
        "image_sha256": digests,
        "settings": settings.answer_settings(),
    }
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
    return body, {"key": key, **ident}


def images_digest(body: Mapping[str, Any]) -> str:
    """Digest of every image URL of a request body, in order (lets a test server recognise an item)."""
    h = hashlib.sha256()
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    h.update(part["image_url"]["url"].encode())
    return h.hexdigest()


def repair_message(reason: str) -> dict[str, str]:
    return {"role": "user", "content": (
        f"Your reply could not be used: {reason}. Reply again with only the JSON object "
        '{"event_started": "yes" or "no", "answers": {"q1": ..., "q8": ...}}, with all eight ids q1..q8, each "yes" '
        "or \"no\", and no other text.")}


def event_dict(event: Event | Mapping[str, Any] | None) -> Optional[dict[str, Any]]:
    """A case's event (:class:`harness.cases.Event`, or a mapping: as ``meta.json`` holds it) as a plain mapping."""
    if event is None:
        return None
    if isinstance(event, Mapping):
        return dict(event)
    return event.model_dump()

