"""The judge client's rules, one at a time in this process (evaluate/judge/client.py, check.py): how each HTTP
failure is classified (fatal, transient, retryable, its status and the server's words with the key masked), the
retry loop's attempts and its seeded, capped backoff, and ``judge check``'s lines and exit codes against a live
stand-in server in this process. The CLI end to end: test_judge.py (slow)."""

from __future__ import annotations

import random

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from evaluate.judge.client import JudgeError, JudgeSession  # noqa: E402
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
