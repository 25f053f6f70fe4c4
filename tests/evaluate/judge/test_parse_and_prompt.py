"""The judge's reply parser and prompt builder in detail: JSON booleans, text around the object, phase boundaries,
frame encoding and the request identity (evaluate/judge/parse.py, prompt.py)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from evaluate.judge import JudgeInput, JudgeSettings, ParseFailure, build_request, parse_reply
from evaluate.judge.parse import yes_no
from evaluate.judge.prompt import (
    QUESTION_IDS,
    JudgeInputError,
    encode_frame,
    event_dict,
    images_digest,
    prompt_text,
    repair_message,
    response_schema,
)
from tests.evaluate.judge.test_judge import EVENT, make_input
from trajectories.phases import phase_at


def _reply(started="yes", **answers):
    ans = {q: "yes" for q in QUESTION_IDS}
    ans.update(answers)
    return json.dumps({"event_started": started, "answers": ans})


def test_json_booleans_mean_yes_and_no():
    """``true`` is yes and ``false`` is no, for the gate and for every answer (some servers emit booleans)."""
    started, got = parse_reply(_reply(True, q1=False, q2=True, q8=False))
    assert started is True and got == ["no", "yes", "yes", "yes", "yes", "yes", "yes", "no"]
    started, _ = parse_reply(_reply(False))
    assert started is False
    assert yes_no(True, "x") == "yes" and yes_no(False, "x") == "no"


@pytest.mark.parametrize("text", [
    _reply() + " I hope this helps.",
    _reply() + "\n{}",
    "```json\n" + _reply() + "\n```\nDone.",
    "Answer: " + _reply(),
])
def test_text_outside_the_object_is_refused(text):
    with pytest.raises(ParseFailure, match="outside"):
        parse_reply(text)


@pytest.mark.parametrize("text", [
    "  " + _reply() + "\n\n",
    "<think>q1 is tricky {not json}</think>" + _reply(),
    "```\n" + _reply() + "\n```",
    "<think>a</think>\n```json\n" + _reply() + "\n```",
])
def test_space_a_reasoning_block_and_a_fence_are_accepted(text):
    assert parse_reply(text) == (True, ["yes"] * 8)


@pytest.mark.parametrize("text, why", [
    ("", "empty reply"), ("   \n", "empty reply"), (None, "empty reply"), (b"{}", "empty reply"),
    ("[1, 2]", "no JSON object"),
    ('["a", {"event_started": "yes"}]', "outside"),
    (json.dumps({"event_started": "yes"}), "answers must be an object"),
    (json.dumps({"event_started": "yes", "answers": ["yes"] * 8}), "answers must be an object"),
    (json.dumps({"answers": {q: "yes" for q in QUESTION_IDS}}), "missing event_started"),
    (json.dumps({"event_started": "yes", "answers": {q: "yes" for q in QUESTION_IDS}, "why": "x"}),
     r"unexpected key\(s\) \['why'\]"),
    (json.dumps({"event_started": "yes", "answers": {**{q: "yes" for q in QUESTION_IDS}, "q9": "no"}}),
     r"9 given; missing \[\], unknown \['q9'\]"),
    (_reply(q4=1), "answers.q4"), (_reply(q5=None), "answers.q5"), (_reply("maybe"), "event_started"),
    (_reply(q2="yes.."), "answers.q2"), (_reply(q3="yes!?"), "answers.q3"), (_reply(q6="no way"), "answers.q6"),
])
def test_every_deviation_from_the_schema_is_a_parse_failure_with_the_reason(text, why):
    with pytest.raises(ParseFailure, match=why):
        parse_reply(text)


def test_case_space_and_one_final_stop_are_the_only_tolerance_in_a_value():
    assert parse_reply(_reply(q7=" NO! ", q1="Yes.")) == (True, ["yes"] * 6 + ["no", "yes"])


# -- prompt ---------------------------------------------------------------------------------------------------------

PHASES = {"V": (0, 8), "D1": (8, 16), "R1": (16, 24), "H": (24, 32)}


@pytest.mark.parametrize("t, phase", [(0, "V"), (7, "V"), (8, "D1"), (15, "D1"), (16, "R1"), (23, "R1"), (24, "H"),
                                      (31, "H"), (32, "?"), (-1, "?")])
def test_a_frame_belongs_to_the_phase_whose_half_open_range_holds_it(t, phase):
    """Ranges are ``[start, end)``: a frame on a phase's end boundary is the next phase's first frame."""
    assert (phase_at(PHASES, t) or "?") == phase


def test_frame_labels_name_their_phase_and_time():
    inp = JudgeInput(frames=np.zeros((5, 8, 8, 3), np.uint8), frame_indices=[0, 8, 16, 24, 31], phases=PHASES,
                     fps=8.0, event=EVENT)
    preamble, labels, instructions = prompt_text(inp)
    assert labels == ["Frame 0 | phase V | t = 0.00 s", "Frame 8 | phase D1 | t = 1.00 s",
                      "Frame 16 | phase R1 | t = 2.00 s", "Frame 24 | phase H | t = 3.00 s",
                      "Frame 31 | phase H | t = 3.88 s"]
    assert "- V (initial hold): frames 0-7 (0.00-0.88 s)" in preamble
    assert "- D1 (departure 1): frames 8-15 (1.00-1.88 s)" in preamble
    assert "- H (final stationary hold): frames 24-31 (3.00-3.88 s)" in preamble
    assert "The 5 frames below" in preamble
    for qid, q in zip(QUESTION_IDS, EVENT["questions"]):
        assert f"{qid} [{q['aspect']}]: {q['question']}" in instructions
    other = JudgeInput(frames=np.zeros((1, 8, 8, 3), np.uint8), frame_indices=[0], phases={"warmup": (0, 4)},
                       fps=8.0, event=EVENT)
    assert "- warmup (warmup): frames 0-3" in prompt_text(other)[0]  # another writer's label, shown as it is


def _decode(url: str) -> np.ndarray:
    import cv2

    assert url.startswith("data:image/jpeg;base64,")
    buf = np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8)
    return cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]


@pytest.mark.parametrize("hw, size, out", [((24, 32), 16, (12, 16)), ((32, 24), 16, (16, 12)),
                                           ((24, 32), 32, (24, 32)), ((10, 20), 40, (20, 40)), ((1, 50), 10, (1, 10)),
                                           ((50, 1), 10, (10, 1))])
def test_frames_are_resized_so_the_longer_side_is_the_image_size(hw, size, out):
    frame = np.zeros((*hw, 3), np.uint8)
    frame[..., 0] = 200  # red, so a channel swap would show
    img = _decode(encode_frame(frame, size))
    assert img.shape[:2] == out
    assert abs(int(img[..., 0].mean()) - 200) < 8 and img[..., 2].mean() < 8


def test_input_validation_names_what_is_missing():
    ok = make_input()
    ok.validate()
    for event, why in ((dict(EVENT, questions=EVENT["questions"][:7]), "7 question"),
                       (dict(EVENT, questions=[]), "0 question"),
                       ({k: v for k, v in EVENT.items() if k != "action"}, "no action"),
                       (dict(EVENT, initial_state="  "), "no initial_state"),
                       (dict(EVENT, expected_next_state=None), "no expected_next_state")):
        with pytest.raises(JudgeInputError, match=why):
            JudgeInput(ok.frames, ok.frame_indices, ok.phases, ok.fps, event).validate()
    with pytest.raises(JudgeInputError, match="4 frames for 5 indices"):
        JudgeInput(ok.frames[:4], ok.frame_indices, ok.phases, ok.fps, EVENT).validate()
    with pytest.raises(JudgeInputError, match="0 frames for 0 indices"):
        JudgeInput(ok.frames[:0], [], ok.phases, ok.fps, EVENT).validate()
    with pytest.raises(JudgeInputError):
        JudgeInput(ok.frames, ok.frame_indices, ok.phases, ok.fps, None).validate()


def test_the_response_schema_requires_every_answer():
    s = response_schema()
    assert s["required"] == ["event_started", "answers"] and s["additionalProperties"] is False
    a = s["properties"]["answers"]
    assert a["required"] == list(QUESTION_IDS) and a["additionalProperties"] is False
    assert all(v == {"type": "string", "enum": ["yes", "no"]} for v in a["properties"].values())


def test_the_request_body_and_identity():
    inp = make_input()
    s = JudgeSettings(base_url="http://x/v1", image_size=32, json_schema=False, seed=5, temperature=0.0)
    body, ident = build_request(inp, s)
    assert "response_format" not in body and body["seed"] == 5 and body["temperature"] == 0.0
    assert body["messages"][0]["role"] == "system" and body["messages"][1]["role"] == "user"
    content = body["messages"][1]["content"]
    kinds = [p["type"] for p in content]
    assert kinds == ["text"] + ["text", "image_url"] * 5 + ["text"]  # preamble, (label, image) per frame, questions
    assert ident["frames"] == [0, 8, 16, 24, 31] and len(ident["image_sha256"]) == 5 and len(ident["key"]) == 20
    reordered = JudgeInput(inp.frames[::-1].copy(), inp.frame_indices, inp.phases, inp.fps, inp.event)
    assert build_request(reordered, s)[1]["key"] != ident["key"]
    assert images_digest(body) != images_digest(build_request(reordered, s)[0])
    assert images_digest(body) == images_digest(build_request(inp, s)[0])
    assert images_digest({"messages": [{"role": "system", "content": "text only"}]}) == images_digest({})


def test_repair_message_and_event_dict():
    m = repair_message("answers: 7 given")
    assert m["role"] == "user" and m["content"].startswith("Your reply could not be used: answers: 7 given.")
    assert event_dict(None) is None and event_dict({"a": 1}) == {"a": 1}

    class Model:
        def model_dump(self):
            return {"b": 2}

    assert event_dict(Model()) == {"b": 2}


def test_frames_shrink_with_the_area_filter_grow_linearly_and_encode_at_quality_90(monkeypatch):
    import cv2

    calls = []
    resize, imencode = cv2.resize, cv2.imencode
    monkeypatch.setattr(cv2, "resize", lambda img, size, interpolation: calls.append(("resize", interpolation))
                        or resize(img, size, interpolation=interpolation))
    monkeypatch.setattr(cv2, "imencode", lambda ext, img, params: calls.append(("jpeg", ext, list(params)))
                        or imencode(ext, img, params))
    frame = np.zeros((20, 30, 3), np.uint8)
    encode_frame(frame, 15)  # shrink
    encode_frame(frame, 45)  # grow by 1.5
    encode_frame(frame, 30)  # already the size: no resize
    assert calls == [("resize", cv2.INTER_AREA), ("jpeg", ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90]),
                     ("resize", cv2.INTER_LINEAR), ("jpeg", ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90]),
                     ("jpeg", ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90])]


def test_the_request_is_validated_and_its_key_is_the_hash_of_its_identity():
    import hashlib

    bad = make_input(event=dict(EVENT, questions=EVENT["questions"][:3]))
    with pytest.raises(JudgeInputError, match="3 question"):
        build_request(bad, JudgeSettings(base_url="http://x/v1", image_size=32))
    body, ident = build_request(make_input(), JudgeSettings(base_url="http://x/v1", image_size=32))
    assert body["response_format"]["json_schema"] == {"name": "checklist", "schema": response_schema(), "strict": True}
    rest = {k: v for k, v in ident.items() if k != "key"}
    assert ident["key"] == hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()[:20]


# -- the prompt module's lazy import of the case schema ---------------------------------------------------------------

def test_importing_the_prompt_module_does_not_import_the_case_schema(monkeypatch):
    """``harness.cases`` (the case schema) is named by the prompt module in annotations only: with it made
    unimportable (``None`` in ``sys.modules``), a fresh import of ``evaluate.judge.prompt`` still succeeds and
    defines its eight question ids."""
    import importlib
    import sys

    import evaluate.judge

    before = sys.modules["evaluate.judge.prompt"]
    monkeypatch.setitem(sys.modules, "harness.cases", None)
    monkeypatch.delitem(sys.modules, "evaluate.judge.prompt")
    monkeypatch.setattr(evaluate.judge, "prompt", before)  # the package attribute the import rebinds
    fresh = importlib.import_module("evaluate.judge.prompt")
    assert fresh is not before and fresh.QUESTION_IDS == tuple(f"q{i}" for i in range(1, 9))
    assert callable(fresh.build_request)
