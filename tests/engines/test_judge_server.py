"""The checklist judge against a real OpenAI-compatible server: ``transformers serve`` with the tiny random-weight
Qwen2-VL of tests/engines/tiny_judge.py, started by tests/engines/judge_up.sh (skipped, with the reason, when it
is not up).

Its answers are random, so these tests check the plumbing, counting requests in the server's own access log: what
the server serves, one request per item, replies persisted and reused (a rerun sends nothing), a reply that is not
one answer recorded as a parse failure and never guessed, and what the server does with ``response_format``.
The fault cases a real server cannot be made to produce stay with the fake server (tests/evaluate/judge/)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluate.judge import parse_reply
from tests.support import run_cli
from tests.support.engines import judge_server

pytestmark = [pytest.mark.judge_server, pytest.mark.slow]

GEN = ["cases.include=[dynamic_cat]", "trajectories=[lrlr,lrlrlr,lrud]", "context=fov", "model.height=96",
       "model.width=160", "model.num_frames=129", "progress=false", "evaluate=off", "run=dyn"]
FAST_EVAL = ["evaluate.pose_estimators=[vipe]", "evaluate.return_frame_poses=[oracle]", "evaluate.encoders=[pixel]",
             "evaluate.validity=false", "evaluate.bootstrap.n=50", "progress=false"]
OVERALL = "dynamic.overall[{}]"


@pytest.fixture(scope="module")
def server() -> dict:
    state, why = judge_server()
    if state is None:
        pytest.skip(why)
    state["answers"] = json.loads((Path(state["model"]) / "answers.json").read_text())
    return state


@pytest.fixture(scope="module")
def generated(tmp_path_factory, server) -> Path:
    root = tmp_path_factory.mktemp("dyn")
    r = run_cli(GEN, root, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return root / "outputs" / "dyn"


def chat_posts(server: dict) -> list[str]:
    """The server's own access-log lines for chat requests (its record, not ours)."""
    text = Path(server["log"]).read_text(errors="replace")
    return re.findall(r'"POST /v1/chat/completions HTTP/1.1" (\d{3})', text)


def judge_args(server: dict, run_dir: Path, **settings) -> list[str]:
    s = {"base_url": server["base_url"], "model": server["model"], "image_size": 64, "max_tokens": 1,
         "json_schema": "false", "timeout": 120, "max_retries": 1, "backoff_s": 0.1, "concurrency": 2,
         "failure_budget": 20, **settings}
    return ["stage=evaluate", f"run={run_dir}", *FAST_EVAL, *[f"evaluate.judge.{k}={v}" for k, v in s.items()]]


def items(run_dir: Path) -> list[Path]:
    return sorted(p.parent for p in run_dir.glob("reference/*/seed-*/*/dynamic_cat/meta.json"))


def overall(item: Path, model: str) -> dict:
    return json.loads((item / "metrics.json").read_text())["metrics"][OVERALL.format(model)]


def test_judge_check_reports_what_the_server_serves(server, tmp_path):
    r = run_cli(["judge", "check", f"evaluate.judge.base_url={server['base_url']}",
                 f"evaluate.judge.model={server['model']}"], tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"serves: {server['model']}" in r.stdout and r.stdout.rstrip().endswith("ready")
    r = run_cli(["judge", "check", f"evaluate.judge.base_url={server['base_url']}"], tmp_path, timeout=120)
    assert r.returncode == 1  # the default model (the paper's judge) is not what this server serves
    assert "NOT READY" in r.stdout and "Qwen/Qwen3.8-27B" in r.stdout and server["model"] in r.stdout


def test_one_request_per_item_replies_persisted_and_a_rerun_sends_nothing(server, generated, tmp_path):
    import shutil
    import time

    run_dir = tmp_path / "run"
    shutil.copytree(generated, run_dir)
    dirs = items(run_dir)
    assert len(dirs) == 3
    before = len(chat_posts(server))
    t0 = time.time()
    r = run_cli(judge_args(server, run_dir), tmp_path, timeout=600)
    print(f"judge run against transformers serve, 3 items: {time.time() - t0:.1f} s")
    assert r.returncode == 0, r.stderr[-3000:]
    posts = chat_posts(server)[before:]
    assert posts == ["200"] * 3  # one request per item, as the server saw it
    model = server["model"]
    for d in dirs:
        (answer_file,) = (d / "judge").glob("*.answer.json")
        a = json.loads(answer_file.read_text())
        assert a["raw_reply"] in server["answers"]  # one of the vocabulary's answers: the model's own reply
        started, answers = parse_reply(a["raw_reply"])
        assert (a["event_started"], a["answers"]) == (started, answers) and not a["repaired"]
        e = overall(d, model)
        assert e["status"] == "computed" and e["answers"] == answers and e["started"] == started
        assert e["judge"]["server_model"] == a["server_model"] and model in a["server_model"]
        assert e["judge"]["settings"]["fallbacks"] == {} and e["judge"]["settings"]["json_schema"] is False
        attempts = [json.loads(x) for x in next((d / "judge").glob("*.attempts.jsonl")).read_text().splitlines()]
        assert [(x["call"], x["status"]) for x in attempts] == [("chat", "ok")]
        request = json.loads(next((d / "judge").glob("*.request.json")).read_text())
        assert "response_format" not in request["body"] and request["body"]["max_tokens"] == 1
        frames = [p for p in request["body"]["messages"][1]["content"] if p["type"] == "image_url"]
        assert len(frames) == len(e["judge"]["frames"]) and all((d / "judge" / f["image_url"]["url"]).is_file()
                                                                for f in frames)
    stamps = {d: (d / "metrics.json").read_bytes() for d in dirs}
    r2 = run_cli(judge_args(server, run_dir), tmp_path, timeout=600)
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert len(chat_posts(server)) == before + 3  # the rerun asked nothing
    assert all((d / "metrics.json").read_bytes() == stamps[d] for d in dirs)


def test_a_reply_that_is_not_one_answer_is_a_parse_failure_never_a_guess(server, generated, tmp_path):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(generated, run_dir)
    dirs = items(run_dir)
    before = len(chat_posts(server))
    # two tokens: two complete answers in a row; the first alone would parse, and must not be taken
    r = run_cli(judge_args(server, run_dir, max_tokens=2), tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]  # the evaluation completes; the judge column is "not computed"
    assert chat_posts(server)[before:] == ["200"] * 6  # each item: the request and its one repair re-ask
    for d in dirs:
        e = overall(d, server["model"])
        assert e["status"] == "not_computed" and e["retryable"] is True
        assert e["reason"] == ("unparseable judge reply after one repair re-ask: text outside the JSON object")
        assert not list((d / "judge").glob("*.answer.json"))  # nothing stored as an answer
        attempts = [json.loads(x) for x in next((d / "judge").glob("*.attempts.jsonl")).read_text().splitlines()]
        assert [(x["call"], x["status"]) for x in attempts] == [("chat", "ok"), ("parse", "failed")] * 2
        for x in attempts[::2]:  # the raw replies are kept: each is two vocabulary answers
            content = json.loads(x["raw_response"])["choices"][0]["message"]["content"]
            assert any(content.startswith(a) and content[len(a):].strip() in server["answers"]
                       for a in server["answers"]), content
    # a rerun retries exactly the failed items (they are retryable), here with the same outcome
    r2 = run_cli(judge_args(server, run_dir, max_tokens=2), tmp_path, timeout=600)
    assert r2.returncode == 0 and chat_posts(server)[before + 6:] == ["200"] * 6


def test_response_format_is_sent_as_configured_and_this_server_ignores_it(server, generated, tmp_path):
    """transformers serve (5.x since 5.10) takes ``response_format`` and ignores it, saying so only in its own log:
    the client sends what it is configured to send and records no fallback (docs/judge.md recommends
    ``json_schema=false`` with this server, so the record says what constrained the reply)."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(generated, run_dir)
    before = len(chat_posts(server))
    r = run_cli(judge_args(server, run_dir, json_schema="true"), tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert chat_posts(server)[before:] == ["200"] * 3
    for d in items(run_dir):
        request = json.loads(next((d / "judge").glob("*.request.json")).read_text())
        assert request["body"]["response_format"]["type"] == "json_schema" and request["fallbacks"] == {}
        e = overall(d, server["model"])
        assert e["status"] == "computed" and e["judge"]["settings"]["fallbacks"] == {}
        assert e["judge"]["settings"]["json_schema"] is True
    assert "Ignoring unsupported fields in the request: {'response_format'}" in Path(server["log"]).read_text()
