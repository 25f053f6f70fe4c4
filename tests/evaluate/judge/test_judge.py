"""The checklist judge client: strict parsing, request identity, persistence and reuse, and every scripted fault
of a loopback fake server (timeouts, 5xx, 429, dropped connections, garbage / truncated / seven-answer replies,
401, a wrong model name, an unreachable server, the failure budget), plus the key never reaching a file."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from evaluate.judge import (
    JudgeInput,
    JudgeSession,
    JudgeSettings,
    JudgeSettingsError,
    ParseFailure,
    build_request,
    parse_reply,
    score_item,
)
from tests.support import ROOT, stored
from tests.support.fake_judge import FakeJudgeServer

QUESTIONS = [
    {"aspect": a, "question": f"question {i} about {a}?", "answer": ans}
    for i, (a, ans) in enumerate([("return_progress", "yes"), ("return_progress", "no"),
                                  ("persistence_reset", "no"), ("persistence_reset", "yes"),
                                  ("final_state", "yes"), ("final_state", "no"),
                                  ("causal_physical", "yes"), ("causal_physical", "no")])
]
EVENT = {"initial_state": "A bar is empty.", "action": "The bar fills.", "expected_next_state": "The bar is full.",
         "questions": QUESTIONS}
REFS = [q["answer"] for q in QUESTIONS]


def make_input(seed: int = 0, event: dict | None = None) -> JudgeInput:
    rng = np.random.default_rng(seed)
    idx = [0, 8, 16, 24, 31]
    frames = rng.integers(0, 255, size=(len(idx), 24, 32, 3), dtype=np.uint8)
    phases = {"V": (0, 8), "D1": (8, 16), "R1": (16, 24), "H": (24, 32)}
    return JudgeInput(frames=frames, frame_indices=idx, phases=phases, fps=16.0, event=event or EVENT)


def fast(base_url: str, **kw) -> JudgeSettings:
    return JudgeSettings.from_dict({"base_url": base_url, "timeout": 0.5, "max_retries": 2, "backoff_s": 0.01,
                                    "max_backoff_s": 0.05, "failure_budget": 3, "image_size": 32, **kw})


def truth(started=True, answers=None):
    return lambda body: (started, list(answers or REFS))


def values(out: dict) -> dict:
    return {k.split("[")[0]: v.get("value") for k, v in out.items() if v["status"] == "computed"}


# -- parsing --------------------------------------------------------------------------------------------------------


def test_parse_accepts_yes_spellings_and_rejects_the_rest():
    ans = {f"q{i}": v for i, v in enumerate(["Yes.", "YES", "yes", "No.", "NO", "no", " yes ", "No!"], start=1)}
    started, got = parse_reply("<think>hmm</think>\n```json\n" + json.dumps({"event_started": "Yes.", "answers": ans})
                               + "\n```")
    assert started is True and got == ["yes", "yes", "yes", "no", "no", "no", "yes", "no"]
    seven = json.dumps({"event_started": "yes", "answers": {f"q{i}": "yes" for i in range(1, 8)}})
    with pytest.raises(ParseFailure, match=r"7 given; missing \['q8'\]"):
        parse_reply(seven)
    with pytest.raises(ParseFailure, match="truncated"):
        parse_reply('{"event_started": "yes", "answers": {"q1": "ye')
    with pytest.raises(ParseFailure, match="q3"):
        parse_reply(json.dumps({"event_started": "no", "answers": {**ans, "q3": "maybe"}}))
    with pytest.raises(ParseFailure, match="outside"):
        parse_reply("Sure! " + json.dumps({"event_started": "no", "answers": ans}))
    with pytest.raises(ParseFailure, match="no JSON"):
        parse_reply("The cat walks away.")


# -- settings and request identity ----------------------------------------------------------------------------------


def test_settings_reject_a_pasted_key_and_unknown_fields():
    with pytest.raises(JudgeSettingsError, match="api_key_env must NAME"):
        JudgeSettings.from_dict({"api_key_env": "sk-abc123-not-a-variable"})
    with pytest.raises(JudgeSettingsError, match="evaluate.judge.temprature"):
        JudgeSettings.from_dict({"temprature": 0.0})
    with pytest.raises(JudgeSettingsError, match="base_url"):
        JudgeSettings.from_dict({"base_url": "localhost:8000"})
    from evaluate.stage import EvalConfig

    e = EvalConfig.from_dict({"judge": {"base_url": "http://127.0.0.1:1/v1"}})
    assert e.judge.model == "Qwen/Qwen3.8-27B" and e.judge.api_key_env == "OPENAI_API_KEY"


def test_request_follows_appendix_d_and_its_key_tracks_answer_settings():
    s = JudgeSettings(base_url="http://x/v1", image_size=32)
    body, ident = build_request(make_input(), s)
    parts = body["messages"][1]["content"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 5 and all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in images)
    assert "Initial state: A bar is empty." in texts[0] and "Expected next state: The bar is full." in texts[0]
    assert "V (initial hold): frames 0-7" in texts[0] and "R1 (revisit 1): frames 16-23" in texts[0]
    assert texts[1] == "Frame 0 | phase V | t = 0.00 s" and texts[5] == "Frame 31 | phase H | t = 1.94 s"
    assert "event visibly starts during the initial hold" in texts[-1] and "q8 [causal_physical]" in texts[-1]
    assert body["max_tokens"] == 4096 and body["response_format"]["type"] == "json_schema"
    assert '"answer"' not in json.dumps(body)  # the frozen reference answers are never sent
    same = build_request(make_input(), JudgeSettings(base_url="http://y/v1", image_size=32, timeout=5))[1]["key"]
    warmer = build_request(make_input(), JudgeSettings(base_url="http://x/v1", image_size=32, temperature=0.7))[1]
    other = build_request(make_input(seed=1), s)[1]["key"]
    assert same == ident["key"] and warmer["key"] != ident["key"] and other != ident["key"]


def test_an_event_without_eight_questions_is_not_computed_without_contacting_anything(tmp_path):
    out = stored(score_item(make_input(event={**EVENT, "questions": []}), JudgeSettings(base_url="http://127.0.0.1:9/v1"),
                     tmp_path))
    e = out["dynamic.overall[Qwen/Qwen3.8-27B]"]
    assert e["status"] == "not_computed" and "0 question(s)" in e["reason"] and e["retryable"] is False
    assert not (tmp_path / "judge").exists()


def test_no_server_configured_is_not_computed(tmp_path):
    out = stored(score_item(make_input(), JudgeSettings(), tmp_path, JudgeSession(JudgeSettings())))
    assert "no judge server configured" in out["dynamic.overall[Qwen/Qwen3.8-27B]"]["reason"]


# -- a healthy server: scoring, persistence, reuse ------------------------------------------------------------------


def test_answers_are_scored_persisted_and_reused(tmp_path):
    wrong = ["no"] + REFS[1:]  # q1 wrong
    with FakeJudgeServer(truth(True, wrong), reported_model="qwen3.8-27b-build-7") as srv:
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
        v = values(out)
        assert v["dynamic.overall"] == pytest.approx(7 / 8) and v["dynamic.return_progress"] == 0.5
        assert v["dynamic.started"] == 1.0 and v["dynamic.conditional"] == pytest.approx(7 / 8)
        e = out["dynamic.overall[Qwen/Qwen3.8-27B]"]
        assert e["judge"]["server_model"] == "qwen3.8-27b-build-7" and e["judge"]["settings"]["temperature"] == 0.0
        key = e["judge"]["request_key"]
        jd = tmp_path / "judge"
        req = json.loads((jd / f"{key}.request.json").read_text())
        assert len(list((jd / "frames").glob("*.jpg"))) == 5
        assert all(p["image_url"]["url"].startswith("frames/") for p in req["body"]["messages"][1]["content"]
                   if p["type"] == "image_url")
        assert json.loads((jd / f"{key}.attempts.jsonl").read_text().splitlines()[-1])["raw_response"]
        n = len(srv.chat_requests())
        again = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))  # a re-run: stored answer, no request
        assert len(srv.chat_requests()) == n and again[f"dynamic.overall[{s.model}]"]["judge"]["cached"] is True
        slower = fast(srv.base_url, timeout=0.9)  # not an answer setting: still reused
        stored(score_item(make_input(), slower, tmp_path, JudgeSession(slower)))
        assert len(srv.chat_requests()) == n
        warmer = fast(srv.base_url, temperature=0.5)  # an answer setting: asked again
        stored(score_item(make_input(), warmer, tmp_path, JudgeSession(warmer)))
        assert len(srv.chat_requests()) == n + 1


def test_a_negative_gate_zeroes_the_checklist(tmp_path):
    with FakeJudgeServer(truth(False)) as srv:
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
    v = values(out)
    assert v["dynamic.overall"] == 0.0 and v["dynamic.started"] == 0.0 and "dynamic.conditional" not in v
    gated = out[f"dynamic.conditional[{s.model}]"]
    assert "gated out" in gated["reason"] and gated["retryable"] is False  # a re-run does not ask again


# -- faults ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("faults", [["500"], ["503", "429"], ["drop"], ["timeout"], ["slow"], ["invalid_body"],
                                    ["variants"]])
def test_transient_faults_are_retried_and_spellings_accepted(tmp_path, faults):
    with FakeJudgeServer(truth(), script=list(faults), hang_s=1.0, slow_s=0.2) as srv:
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
        assert values(out)["dynamic.overall"] == 1.0, out
        assert [r["fault"] for r in srv.chat_requests()] == faults + ["ok"] * (faults[-1] not in ("slow", "variants"))


@pytest.mark.parametrize("fault,why", [("garbage", "no JSON"), ("truncated", "truncated"), ("seven", "missing")])
def test_a_malformed_reply_is_repaired_once_then_recorded(tmp_path, fault, why):
    with FakeJudgeServer(truth(), script=[fault]) as srv:  # repaired by the re-ask
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path / "a", JudgeSession(s)))
        assert values(out)["dynamic.overall"] == 1.0 and out[f"dynamic.overall[{s.model}]"]["judge"]["repaired"]
        assert len(srv.chat_requests()) == 2
    with FakeJudgeServer(truth(), script=[fault, fault]) as srv:  # still malformed: recorded, never guessed
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path / "b", JudgeSession(s)))
        e = out[f"dynamic.overall[{s.model}]"]
        assert e["status"] == "not_computed" and "after one repair" in e["reason"] and why in e["reason"]
        assert e["retryable"] and len(srv.chat_requests()) == 2
        assert not list((tmp_path / "b" / "judge").glob("*.answer.json"))


def test_401_stops_the_run_with_a_clear_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_TEST_KEY", "wrong-key-1234")
    with FakeJudgeServer(truth(), require_key="right-key-5678") as srv:
        s = fast(srv.base_url, api_key_env="JUDGE_TEST_KEY")
        sess = JudgeSession(s)
        a = stored(score_item(make_input(0), s, tmp_path / "a", sess))
        b = stored(score_item(make_input(1), s, tmp_path / "b", sess))
        assert "401 unauthorized" in a[f"dynamic.overall[{s.model}]"]["reason"]
        assert "$JUDGE_TEST_KEY" in b[f"dynamic.overall[{s.model}]"]["reason"]
        assert srv.chat_requests() == []  # the pre-flight already failed: nothing else sent


def test_wrong_model_name_lists_what_is_served(tmp_path):
    with FakeJudgeServer(truth(), served=["Qwen/Qwen3-VL-8B-Instruct"]) as srv:
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
        r = out[f"dynamic.overall[{s.model}]"]["reason"]
        assert "'Qwen/Qwen3.8-27B' is not served" in r and "Qwen3-VL-8B-Instruct" in r
        assert srv.chat_requests() == []


def test_unreachable_server_is_not_computed_quickly(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    s = fast(f"http://127.0.0.1:{port}/v1")
    out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
    r = out[f"dynamic.overall[{s.model}]"]["reason"]
    assert "unusable" in r and "connection failed" in r


def test_failure_budget_stops_sending_and_says_why(tmp_path):
    with FakeJudgeServer(truth(), script=["500"] * 100) as srv:
        s = fast(srv.base_url, failure_budget=1, max_retries=1)
        sess = JudgeSession(s)
        a = stored(score_item(make_input(0), s, tmp_path / "a", sess))
        b = stored(score_item(make_input(1), s, tmp_path / "b", sess))
        assert "gave up after 2 attempts" in a[f"dynamic.overall[{s.model}]"]["reason"]
        rb = b[f"dynamic.overall[{s.model}]"]["reason"]
        assert "failure budget spent" in rb and b[f"dynamic.overall[{s.model}]"]["retryable"]
        assert len(srv.chat_requests()) == 2  # item b was never sent


def test_the_key_never_reaches_a_file(tmp_path, monkeypatch):
    key = "sk-test-7f3a9c1e5b2d4680aaaa"
    monkeypatch.setenv("JUDGE_SECRET", key)
    with FakeJudgeServer(truth(), require_key=key, script=["500", "garbage"]) as srv:
        s = fast(srv.base_url, api_key_env="JUDGE_SECRET")
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
        assert values(out)["dynamic.overall"] == 1.0 and all(r["auth_ok"] for r in srv.requests)
    (tmp_path / "metrics.json").write_text(json.dumps(out))
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert key.encode() not in p.read_bytes(), p


# -- `python -m harness judge check` ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_judge_check_command(tmp_path):
    from evaluate.judge import check_server
    from tests.support import run_cli

    lines: list[str] = []
    assert check_server({}, out=lines.append) == 2 and "no server configured" in lines[0]
    with FakeJudgeServer(truth(), served=["Qwen/Qwen3.8-27B", "other/model"]) as srv:
        ok = run_cli(["judge", "check", f"evaluate.judge.base_url={srv.base_url}"], tmp_path, timeout=120)
        assert ok.returncode == 0, ok.stderr
        assert "serves: Qwen/Qwen3.8-27B, other/model" in ok.stdout and "ready" in ok.stdout
        bad = run_cli(["judge", "check", f"evaluate.judge.base_url={srv.base_url}", "evaluate.judge.model=nope"],
                      tmp_path, timeout=120)
        assert bad.returncode == 1 and "NOT READY: model 'nope' is not served" in bad.stdout


def test_a_case_file_whose_event_has_no_questions_is_rejected_naming_the_field(tmp_path):
    import yaml

    from harness.cases import CaseError, load_case_file

    case = {"id": "d", "family": "dynamic", "image": "skimage://chelsea", "prompt": "p",
            "event": {"initial_state": "a", "action": "b", "expected_next_state": "c", "questions": []}}
    p = tmp_path / "d.yaml"
    p.write_text(yaml.safe_dump(case))
    with pytest.raises(CaseError, match=r"event.*questions: need exactly 8"):
        load_case_file(p)


# -- an item folder (judge_item) ------------------------------------------------------------------------------------


def item_folder(root, frames: int = 20, video_frames: int | None = None, case: dict | None = None):
    """A harness item folder: ``video.mp4`` (``video_frames``, default ``frames``), ``camera.npz`` of ``frames``
    frames and ``meta.json`` holding ``case`` (default: a case whose event is :data:`EVENT`)."""
    from harness.io import write_json
    from harness.video import VideoWriter
    from trajectories import CameraPath

    root.mkdir(parents=True)
    q = frames // 4
    phases = {"V": (0, q), "D1": (q, 2 * q), "R1": (2 * q, 3 * q), "H": (3 * q, frames)}
    CameraPath("t", np.tile(np.eye(4), (frames, 1, 1)), np.eye(3), 16.0, 48, 64, phases).save(root / "camera.npz")
    w = VideoWriter(root / "video.mp4", fps=16.0)
    base = np.random.default_rng(0).integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
    for i in range(frames if video_frames is None else video_frames):
        w.write(np.roll(base, 3 * i, axis=1))
    w.close()
    write_json(root / "meta.json", {"case": {"id": "d", "event": EVENT} if case is None else case})
    return root


def test_an_item_folder_is_judged_on_every_eighth_frame_plus_the_last_as_configured(tmp_path):
    """The default stride is conf/evaluate's judge_stride (paper D.1: 8, first and last frames always sent); the
    event is the one meta.json's case holds."""
    import yaml

    from evaluate.judge import judge_item
    from evaluate.judge import load_item_input

    stride = yaml.safe_load((ROOT / "conf/evaluate/default.yaml").read_text())["judge_stride"]
    n = 20
    expected = sorted(set(range(0, n, stride)) | {n - 1})
    item = item_folder(tmp_path / "item", frames=n)
    inp = load_item_input(item)
    assert inp.frame_indices == expected and inp.event == EVENT and inp.frames.shape[0] == len(expected)
    with FakeJudgeServer(truth()) as srv:
        out = stored(judge_item(item, fast(srv.base_url).to_dict()))
        assert len(srv.chat_requests()) == 1
    e = out["dynamic.overall[Qwen/Qwen3.8-27B]"]
    assert e["status"] == "computed" and e["value"] == 1.0 and e["judge"]["frames"] == expected


@pytest.mark.parametrize("case", [{"id": "d"}, None])
def test_an_item_whose_case_has_no_event_is_not_computed_with_the_reason(tmp_path, case):
    from evaluate.judge import judge_item
    from evaluate.judge import load_item_input
    from harness.io import write_json

    item = item_folder(tmp_path / "item", frames=8)
    write_json(item / "meta.json", {} if case is None else {"case": case})
    assert load_item_input(item).event == {}
    out = stored(judge_item(item, {"base_url": "http://127.0.0.1:9/v1"}))
    e = out["dynamic.overall[Qwen/Qwen3.8-27B]"]
    assert e["status"] == "not_computed" and "cannot judge this item" in e["reason"] and "0 question(s)" in e["reason"]
    assert e["retryable"] is False and not (item / "judge").exists()


def test_a_video_shorter_than_its_camera_path_is_not_computed_and_final(tmp_path):
    from evaluate.judge import judge_item

    item = item_folder(tmp_path / "item", frames=20, video_frames=12)
    out = stored(judge_item(item, {"base_url": "http://127.0.0.1:9/v1"}))
    assert len(out) == 7
    e = out["dynamic.overall[Qwen/Qwen3.8-27B]"]
    assert e["status"] == "not_computed" and e["retryable"] is False
    assert "cannot judge this item: video.mp4 has" in e["reason"] and "camera.npz's 20 frames" in e["reason"]


@pytest.mark.parametrize("missing", ["meta.json", "camera.npz", "video.mp4"])
def test_an_unreadable_item_is_not_computed_naming_the_error(tmp_path, missing):
    from evaluate.judge import judge_item

    item = item_folder(tmp_path / "item", frames=8)
    (item / missing).unlink()
    out = stored(judge_item(item, {"base_url": "http://127.0.0.1:9/v1"}))
    assert {e["status"] for e in out.values()} == {"not_computed"} and {e["retryable"] for e in out.values()} == {False}
    assert all(e["reason"].startswith("cannot read the item for the judge: ") for e in out.values())


# -- a run's judge (RunJudge) ---------------------------------------------------------------------------------------


def test_a_run_starts_with_a_fresh_failure_budget(tmp_path):
    """The current session's budget is spent by one failed item; a new run (RunJudge) still sends its items."""
    from evaluate.judge.run import RunJudge

    with FakeJudgeServer(truth(), script=["500"]) as srv:
        s = fast(srv.base_url, failure_budget=1, max_retries=0)
        failed = stored(score_item(make_input(0), s, tmp_path / "a"))  # the current session (none given)
        assert "gave up after 1 attempt" in failed[f"dynamic.overall[{s.model}]"]["reason"]
        spent = stored(score_item(make_input(1), s, tmp_path / "b"))
        assert "failure budget spent" in spent[f"dynamic.overall[{s.model}]"]["reason"]
        with RunJudge(s.to_dict()) as judge:
            out = stored(judge.submit(make_input(1), tmp_path / "b").result())
        assert values(out)["dynamic.overall"] == 1.0 and len(srv.chat_requests()) == 2


def test_a_run_judges_items_without_stored_answers_and_waits_for_them_on_exit(tmp_path):
    from evaluate.judge.run import RunJudge

    with FakeJudgeServer(truth()) as srv:
        with RunJudge(fast(srv.base_url).to_dict()) as judge:
            futures = [judge.submit(make_input(i), tmp_path / str(i)) for i in range(3)]
        assert all(f.done() for f in futures)  # leaving the run waited for what was in flight
        assert [values(stored(f.result()))["dynamic.overall"] for f in futures] == [1.0] * 3
        assert len(srv.chat_requests()) == 3
        with pytest.raises(RuntimeError):  # the run is over: nothing more is sent
            judge.submit(make_input(4), tmp_path / "4")


def test_a_run_does_not_send_an_item_whose_event_is_unusable(tmp_path):
    from evaluate.judge.run import RunJudge

    with FakeJudgeServer(truth()) as srv:
        with RunJudge(fast(srv.base_url).to_dict()) as judge:
            fut = judge.submit(make_input(event={**EVENT, "questions": QUESTIONS[:7]}), tmp_path)
            assert fut.done()  # answered at once, nothing queued
        out = stored(fut.result())
        assert srv.chat_requests() == [] and not (tmp_path / "judge").exists()
    assert {e["status"] for e in out.values()} == {"not_computed"} and {e["retryable"] for e in out.values()} == {False}
    assert all("cannot judge this item: the case's event has 7 question(s)" in e["reason"] for e in out.values())


def test_a_refused_response_format_is_recorded_with_the_scores(tmp_path):
    with FakeJudgeServer(truth(), refuse_fields=("response_format",)) as srv:
        s = fast(srv.base_url)
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
    for e in out.values():
        rec = e["judge"]["settings"]
        assert rec["json_schema"] is True and list(rec["fallbacks"]) == ["response_format"]
