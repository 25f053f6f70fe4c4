"""The judge client's rules, one at a time in this process (evaluate/judge/client.py, check.py): how each HTTP
failure is classified (fatal, transient, retryable, its status and the server's words with the key masked), the
retry loop's attempts and its seeded, capped backoff, ``judge check``'s lines and exit codes against a live stand-in
server in this process, and one item's judging through the real ``openai`` client over an in-process transport: which
choice is the answer, an empty reply, which refusals fall back and how that is recorded, the pre-flight, the stored
request's image digests, reused answers and the run's first fatal error. The CLI end to end: test_judge.py (slow)."""

from __future__ import annotations

import json
import random

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from evaluate.judge.client import JudgeError, JudgeSession, Verdict  # noqa: E402
from evaluate.judge.settings import JudgeSettings  # noqa: E402

URL = "http://127.0.0.1:9/v1"


def _session(**kw) -> JudgeSession:
    return JudgeSession(JudgeSettings.from_dict({"base_url": URL, "api_key_env": "JUDGE_RULES_KEY", **kw}))


def _status(cls, code: int, text: str = "") -> BaseException:
    response = httpx.Response(code, request=httpx.Request("POST", URL + "/chat/completions"), text=text)
    return cls(f"status {code}", response=response, body=None)


@pytest.mark.parametrize("cls, code, words", [
    ("AuthenticationError", 401, "401 unauthorized"), ("PermissionDeniedError", 403, "403 forbidden"),
    ("NotFoundError", 404, "is not served there"),
])
def test_auth_permission_and_not_found_are_fatal_with_their_status(cls, code, words):
    err = _session()._classify(_status(getattr(openai, cls), code))
    assert err.fatal and not err.transient and err.status == code and words in str(err)
    assert err.retryable  # a later run (with the key fixed) may succeed


def test_the_401_message_names_the_variable_the_key_is_read_from():
    assert "$JUDGE_RULES_KEY" in str(_session()._classify(_status(openai.AuthenticationError, 401)))


def test_rate_limits_and_server_errors_are_transient_with_their_status():
    s = _session()
    rate = s._classify(_status(openai.RateLimitError, 429))
    assert rate.transient and not rate.fatal and rate.status == 429 and str(rate) == "429 rate limited"
    five = s._classify(_status(openai.InternalServerError, 503))
    assert five.transient and five.status == 503 and str(five) == "server error 503"


def test_another_status_keeps_the_servers_words_with_the_key_masked_and_is_not_retryable(monkeypatch):
    monkeypatch.setenv("JUDGE_RULES_KEY", "sk-rules-secret")
    body = "bad field response_format for key sk-rules-secret " + "x" * 700
    err = _session()._classify(_status(openai.BadRequestError, 400, body))
    assert not err.retryable and not err.transient and not err.fatal and err.status == 400
    assert "sk-rules-secret" not in err.detail and err.detail.startswith("bad field response_format for key ***")
    assert len(err.detail) == 500 and str(err) == f"HTTP 400: {err.detail[:200]}"
    empty = _session()._classify(_status(openai.BadRequestError, 422, ""))
    assert empty.detail == "status 422" and empty.status == 422  # no body: the exception's own message


def test_the_key_is_masked_only_when_it_is_set_and_long_enough(monkeypatch):
    s = _session()
    monkeypatch.delenv("JUDGE_RULES_KEY", raising=False)
    assert s.scrub("abc") == "abc"
    monkeypatch.setenv("JUDGE_RULES_KEY", "abc")
    assert s.scrub("abc abc") == "abc abc"  # a 3-character key would mask ordinary words
    monkeypatch.setenv("JUDGE_RULES_KEY", "abcd")
    assert s.scrub("x abcd y") == "x *** y"


def test_any_other_error_is_named_by_its_type():
    err = _session()._classify(ValueError("odd"))
    assert str(err) == "ValueError: odd" and err.retryable and not err.fatal and not err.transient


def test_retries_wait_a_seeded_capped_exponential_backoff_then_give_up(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("evaluate.judge.client.time.sleep", waits.append)
    s = _session(max_retries=3, backoff_s=1.0, max_backoff_s=3.0)
    calls, log = [], []

    def flaky():
        calls.append(1)
        raise JudgeError("429 rate limited", transient=True, status=429)

    with pytest.raises(JudgeError, match=r"429 rate limited \(gave up after 4 attempts\)"):
        s._with_retries("chat", flaky, "k1", log.append)
    rng = random.Random("k1:chat")
    assert waits == [min(3.0, 1.0 * 2**a) * (0.5 + rng.random()) for a in range(3)]
    assert len(calls) == 4 and [r["attempt"] for r in log] == [0, 1, 2, 3]


def test_a_transient_error_then_success_returns_and_a_lasting_error_is_not_retried(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("evaluate.judge.client.time.sleep", waits.append)
    s = _session(max_retries=2, backoff_s=0.5)
    answers = iter([JudgeError("server error 502", transient=True, status=502), "ok"])

    def once_then_ok():
        a = next(answers)
        if isinstance(a, BaseException):
            raise a
        return a

    assert s._with_retries("chat", once_then_ok, "k2", lambda r: None) == "ok" and len(waits) == 1
    calls = []

    def bad_request():
        calls.append(1)
        raise JudgeError("HTTP 400: no", retryable=False, status=400)

    with pytest.raises(JudgeError, match="^HTTP 400: no$"):
        s._with_retries("chat", bad_request, "k3", lambda r: None)
    assert calls == [1] and len(waits) == 1


def test_judge_check_lines_and_exit_codes_against_a_server_in_this_process(monkeypatch):
    from evaluate.judge import check_server
    from tests.evaluate.judge.test_judge import truth
    from tests.support.fake_judge import FakeJudgeServer

    monkeypatch.delenv("JUDGE_RULES_KEY", raising=False)
    lines: list[str] = []
    assert check_server({}, out=lines.append) == 2
    assert lines == ["judge: no server configured; set evaluate.judge.base_url=http://HOST:PORT/v1 (docs/judge.md)"]
    with FakeJudgeServer(truth(), served=["judge/a", "judge/b"]) as srv:
        lines = []
        code = check_server({"base_url": srv.base_url, "model": "judge/b", "api_key_env": "JUDGE_RULES_KEY"},
                            out=lines.append)
        assert code == 0 and lines == [f"judge server: {srv.base_url}", "serves: judge/a, judge/b",
                                       "configured model: judge/b  (key from $JUDGE_RULES_KEY: not set)", "ready"]
        lines = []
        monkeypatch.setenv("JUDGE_RULES_KEY", "sk-set-1234")
        code = check_server({"base_url": srv.base_url, "model": "nope", "api_key_env": "JUDGE_RULES_KEY"},
                            out=lines.append)
        assert code == 1 and lines[2] == "configured model: nope  (key from $JUDGE_RULES_KEY: set)"
        assert lines[-1].startswith("NOT READY: model 'nope' is not served by") and "ready" not in lines[-2]
    with FakeJudgeServer(truth(), served=[]) as srv:
        lines = []
        assert check_server({"base_url": srv.base_url}, out=lines.append) == 0
        assert lines[1] == "serves: (no models listed)" and lines[-1] == "ready"


# -- a session against an in-process transport (real openai client, real parsing; replies scripted per test) ------

def _completion(*contents, model: str = "judge-build-7") -> dict:
    return {"id": "c", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": i, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}
                        for i, c in enumerate(contents)]}


def _reply(started: bool = True, answers=None) -> str:
    from tests.evaluate.judge.test_judge import REFS
    from tests.support.fake_judge import QIDS

    return json.dumps({"event_started": "yes" if started else "no", "answers": dict(zip(QIDS, answers or REFS))})


def _mocked(chat, models=("Qwen/Qwen3.8-27B",), **kw) -> tuple[JudgeSession, list[dict]]:
    """A session whose client talks to ``chat(body) -> (status, json)`` and a ``/models`` listing ``models`` (None:
    the server has no such route, 404); returns it and the chat bodies it received."""
    sent: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            if models is None:
                return httpx.Response(404, json={"error": {"message": "no route"}})
            return httpx.Response(200, json={"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
        body = json.loads(request.content)
        sent.append(body)
        status, obj = chat(body)
        return httpx.Response(status, json=obj)

    s = _session(max_retries=0, image_size=32, **kw)
    s._client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0,
                              http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    return s, sent


def _input(seed: int = 0):
    from tests.evaluate.judge.test_judge import make_input

    return make_input(seed)


def test_the_first_choice_of_a_reply_is_the_answer_and_a_fresh_answer_is_neither_cached_nor_repaired(tmp_path):
    from tests.evaluate.judge.test_judge import REFS

    s, sent = _mocked(lambda body: (200, _completion(_reply(), "not json at all")))
    v = s.judge(_input(), tmp_path)
    assert v.ok and v.started and v.answers == REFS and len(sent) == 1
    assert (v.cached, v.repaired, v.retryable, v.server_model) == (False, False, False, "judge-build-7")
    assert s.server_models == {"judge-build-7"}  # what answered this run
    stored = json.loads((tmp_path / "judge" / f"{v.key}.answer.json").read_text())
    assert stored["repaired"] is False and stored["server_model"] == "judge-build-7" and stored["fallbacks"] == {}
    again = _session(image_size=32).judge(_input(), tmp_path)  # a later run reuses it without contacting anything
    assert again.ok and again.cached and not again.repaired and not again.retryable and again.answers == REFS


def test_a_reply_without_content_is_re_asked_once_showing_an_empty_reply(tmp_path):
    from tests.evaluate.judge.test_judge import REFS

    replies = iter([_completion(None), _completion(_reply())])
    s, sent = _mocked(lambda body: (200, next(replies)))
    v = s.judge(_input(), tmp_path)
    assert v.ok and v.repaired and v.answers == REFS and len(sent) == 2
    assert sent[1]["messages"][-2] == {"role": "assistant", "content": ""}  # what the judge said: nothing


def test_a_failed_request_is_not_started_cached_or_repaired_and_a_fatal_one_stops_the_run(tmp_path):
    def unauthorized(body):
        return 401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}

    s, sent = _mocked(unauthorized)
    v = s.judge(_input(0), tmp_path)
    assert not v.ok and "401 unauthorized" in v.reason and v.retryable
    assert (v.started, v.cached, v.repaired, v.answers) == (False, False, False, [])
    assert not (tmp_path / "judge" / f"{v.key}.answer.json").exists()
    other = s.judge(_input(1), tmp_path / "b")  # the run's remaining items are not sent
    assert len(sent) == 1 and not other.ok and "401 unauthorized" in other.reason and s.failures == []


def test_preflight_asks_the_server_once_per_session_and_a_server_without_models_route_is_usable():
    from tests.evaluate.judge.test_judge import truth
    from tests.support.fake_judge import FakeJudgeServer

    listed: list[int] = []
    with FakeJudgeServer(truth(), served=["judge/a"]) as srv:
        s = JudgeSession(JudgeSettings.from_dict({"base_url": srv.base_url, "model": "judge/b", "max_retries": 0}))
        first, second = s.preflight(), s.preflight()
        listed.append(sum(r["path"].endswith("/models") for r in srv.requests))
    assert first == second and "'judge/b' is not served" in first and listed == [1]
    s, _ = _mocked(lambda body: (200, _completion(_reply())), models=None)
    assert s.preflight() is None and s.fatal is None and s.served is None  # the first request will tell


@pytest.mark.parametrize("status, detail, fields, expected", [
    (400, "response_format is not supported by this server", ["messages", "response_format"], "response_format"),
    (422, "Unused fields in the request: {'response_format'}", ["response_format"], "response_format"),
    (401, "response_format", ["response_format"], None),  # not a refusal of a field
    (423, "response_format", ["response_format"], None),
    (500, "response_format", ["response_format"], None),
    (400, "bad image", ["messages", "response_format"], None),  # the server named no optional field
    (422, "response_format", ["messages"], None),  # named, but not in this request: dropping it changes nothing
])
def test_only_a_400_or_422_naming_an_optional_field_of_the_request_is_a_refusal(status, detail, fields, expected):
    err = JudgeError(f"HTTP {status}", retryable=False, status=status, detail=detail)
    assert _session()._refused_field(err, {f: {} for f in fields}) == expected


def test_a_refused_field_is_dropped_for_the_rest_of_the_run_warned_once_and_recorded(tmp_path, caplog):
    from tests.evaluate.judge.test_judge import REFS, fast, truth
    from tests.support.fake_judge import FakeJudgeServer

    caplog.set_level("WARNING", logger="evaluate.judge.client")
    with FakeJudgeServer(truth(), refuse_fields=("response_format",)) as srv:
        s = JudgeSession(fast(srv.base_url))
        v1, v2 = s.judge(_input(0), tmp_path / "a"), s.judge(_input(1), tmp_path / "b")
        fields, base_url = [r["fields"] for r in srv.chat_requests()], srv.base_url
    assert v1.ok and v2.ok and v1.answers == v2.answers == REFS
    # asked with the field once, refused, then without it: the second item is sent without it at once
    assert ["response_format" in f for f in fields] == [True, False, False] and all("messages" in f for f in fields)
    assert list(v1.fallbacks) == list(v2.fallbacks) == ["response_format"]
    assert "refused by the server (HTTP 422" in v1.fallbacks["response_format"]
    warnings = [r.getMessage() for r in caplog.records if "refused response_format" in r.getMessage()]
    assert len(warnings) == 1 and base_url in warnings[0] and "prompt-only JSON contract" in warnings[0]
    for item, v in ((tmp_path / "a", v1), (tmp_path / "b", v2)):
        request = json.loads((item / "judge" / f"{v.key}.request.json").read_text())
        assert "response_format" not in request["body"] and list(request["fallbacks"]) == ["response_format"]
        answer = json.loads((item / "judge" / f"{v.key}.answer.json").read_text())
        assert list(answer["fallbacks"]) == ["response_format"]
    log = [json.loads(x) for x in (tmp_path / "a" / "judge" / f"{v1.key}.attempts.jsonl").read_text().splitlines()]
    assert [r["status"] for r in log if r.get("call") == "chat"] == ["error", "fallback", "ok"]
    cached = JudgeSession(fast(URL)).judge(_input(0), tmp_path / "a")  # a later run's reuse still says what was dropped
    assert cached.cached and cached.fallbacks == v1.fallbacks


def test_an_answer_stored_without_repair_or_fallback_records_reads_as_neither(tmp_path):
    from evaluate.judge import build_request
    from harness.io import write_json
    from tests.evaluate.judge.test_judge import REFS

    s = _session(image_size=32)
    key = build_request(_input(), s.settings)[1]["key"]
    write_json(tmp_path / "judge" / f"{key}.answer.json", {"key": key, "event_started": False, "answers": REFS})
    v = s.judge(_input(), tmp_path)
    assert v.ok and v.cached and not v.started and v.answers == REFS
    assert v.repaired is False and v.fallbacks == {} and v.server_model is None


def test_the_stored_request_names_each_image_by_its_own_digest(tmp_path):
    import base64
    import hashlib

    s, sent = _mocked(lambda body: (200, _completion(_reply())))
    v = s.judge(_input(), tmp_path)
    images = [part["image_url"]["url"] for m in sent[0]["messages"] if isinstance(m["content"], list)
              for part in m["content"] if part.get("type") == "image_url"]
    request = json.loads((tmp_path / "judge" / f"{v.key}.request.json").read_text())
    stored = [part["image_url"]["url"] for m in request["body"]["messages"] if isinstance(m["content"], list)
              for part in m["content"] if part.get("type") == "image_url"]
    assert len(images) == len(stored) >= 3
    for url, name in zip(images, stored):
        data = base64.b64decode(url.split(",", 1)[1])
        assert name == f"frames/{hashlib.sha256(url.encode()).hexdigest()[:20]}.jpg"  # the request's digest
        assert (tmp_path / "judge" / name).read_bytes() == data


def test_session_for_returns_the_runs_session_until_a_fresh_run_starts(monkeypatch):
    from evaluate.judge import client

    monkeypatch.setattr(client, "_SESSIONS", {})
    settings = JudgeSettings.from_dict({"base_url": URL})
    run = client.session_for(settings)
    assert client.session_for(settings) is run and client.session_for(JudgeSettings.from_dict({"base_url": URL})) is run
    fresh = client.session_for(settings, fresh=True)
    assert fresh is not run and client.session_for(settings) is fresh
    assert client.session_for(JudgeSettings.from_dict({"base_url": URL, "seed": 1})) is not fresh


def test_the_first_fatal_error_of_the_run_is_the_one_it_reports(tmp_path):
    """Two items in flight at once both fail fatally (401, then 403): the run keeps reporting the first."""
    import threading

    from evaluate.judge import build_request, images_digest

    first = images_digest(build_request(_input(0), _session(image_size=32).settings)[0])
    both_in_flight, first_done = threading.Barrier(2, timeout=10), threading.Event()

    def chat(body):
        both_in_flight.wait()  # neither answer comes before both requests were sent
        if images_digest(body) == first:
            return 401, {"error": {"message": "Incorrect API key provided"}}
        assert first_done.wait(10)  # the second answer comes after the first item's verdict
        return 403, {"error": {"message": "forbidden"}}

    s, sent = _mocked(chat)
    verdicts: dict[int, Verdict] = {}
    threads = [threading.Thread(target=lambda i=i: verdicts.__setitem__(i, s.judge(_input(i), tmp_path / str(i))))
               for i in (0, 1)]
    for t in threads:
        t.start()
    threads[0].join(10)
    first_done.set()
    threads[1].join(10)
    assert "401 unauthorized" in verdicts[0].reason and "403 forbidden" in verdicts[1].reason
    later = s.judge(_input(2), tmp_path / "2")
    assert len(sent) == 2 and not later.ok and "401 unauthorized" in later.reason and "403" not in later.reason
