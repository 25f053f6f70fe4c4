"""With no judge server configured, a dynamic item's checklist is "not computed" once, not on every evaluation: no
request is built (its JPEG frames would be read by no one) unless the item holds stored answers to reuse, and the
entries are not retryable (only a judge setting, which changes the family's hash, can change them), so a later
evaluation reuses the item whole instead of decoding its video again."""

from __future__ import annotations

import pytest

import evaluate.judge.run as judge_run
from evaluate.judge import JudgeSession, JudgeSettings, score_item
from evaluate.judge.run import RunJudge
from tests.evaluate.judge.test_judge import make_input
from tests.support import stored


def test_no_server_and_no_stored_answer_builds_no_request_and_is_final(tmp_path, monkeypatch):
    def built(*a, **k):
        raise AssertionError("a request was built for a judge nobody configured")

    monkeypatch.setattr(judge_run, "build_request", built)
    with RunJudge({}) as judge:
        out = stored(judge.submit(make_input(), tmp_path).result())
    assert len(out) == 7 and all(e["status"] == "not_computed" and e["retryable"] is False for e in out.values())
    assert all("no judge server configured" in e["reason"] for e in out.values())
    assert not (tmp_path / "judge").exists()


def test_stored_answers_are_still_looked_up_without_a_server(tmp_path, monkeypatch):
    (tmp_path / "judge").mkdir()
    calls = []
    real = judge_run.build_request
    monkeypatch.setattr(judge_run, "build_request", lambda *a: calls.append(1) or real(*a))
    with RunJudge({}) as judge:
        out = stored(judge.submit(make_input(), tmp_path).result())
    assert calls == [1]  # the request key finds a stored answer, when there is one
    assert all(e["status"] == "not_computed" and e["retryable"] is False for e in out.values())


@pytest.mark.parametrize("base_url, retryable", [(None, False), ("http://127.0.0.1:9/v1", True)])
def test_only_an_unreachable_server_is_retried(tmp_path, base_url, retryable):
    s = JudgeSettings.from_dict({"base_url": base_url, "timeout": 0.2, "max_retries": 0, "backoff_s": 0.01})
    out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
    assert {e["retryable"] for e in out.values()} == {retryable}
