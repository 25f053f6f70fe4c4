"""End to end on the reference model: the dynamic demo case under FullKV, Sliding and FoV, judged by the fake
server answering from the model's ground truth; p_start, S_cond and S_gated as computed by hand; scripted faults
leave the run complete with the affected items saying why, and a re-run retries only those; the API key appears
nowhere in the run directory or the logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.fake_judge import FakeJudgeServer

pytestmark = pytest.mark.slow

GEN = ["cases.include=[dynamic_cat]", "trajectories=[lrlr,lrlrlr,lrud]", "model.height=128", "model.width=224",
       "progress=false", "evaluate=off", "run=dyn"]
JUDGE = {"image_size": 64, "timeout": 1.0, "max_retries": 1, "backoff_s": 0.01, "max_backoff_s": 0.02,
         "failure_budget": 20, "concurrency": 3}
FAST_EVAL = ["evaluate.pose_estimators=[vipe]", "evaluate.return_frame_poses=[oracle]", "evaluate.encoders=[pixel]",
             "evaluate.validity=false", "evaluate.bootstrap.n=50"]
KEY = "sk-judge-test-3c9e71d0b5a24f68"
POLICIES = ("fullkv", "sliding", "fov")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("dyn")
    for policy in POLICIES:
        r = run_cli([f"context={policy}", *GEN], root, timeout=600)
        assert r.returncode == 0, r.stderr
    return root / "outputs" / "dyn"


def items(run_dir: Path) -> list[Path]:
    return sorted(p.parent for p in run_dir.glob("reference/*/seed-*/*/dynamic_cat/meta.json"))


def ground_truth_table(run_dir: Path) -> dict[str, dict]:
    """images digest -> the truth for that item (what the fake judge answers), plus the item's identity."""
    from adapters.reference.events import ground_truth
    from evaluate.judge import (
        JudgeSettings,
        build_request,
        images_digest,
        load_item_input,
    )

    out = {}
    for d in items(run_dir):
        meta = json.loads((d / "meta.json").read_text())
        inp = load_item_input(d, 8)
        body, _ = build_request(inp, JudgeSettings.from_dict({"base_url": "http://x/v1", **JUDGE}))
        gt = ground_truth(meta["generation"]["dynamic_event"], meta["camera"]["phases"], inp.frame_indices,
                          meta["case"]["event"]["questions"])
        out[images_digest(body)] = {**gt, "context": meta["item"]["context"], "trajectory": meta["item"]["trajectory"],
                                    "dir": d, "refs": [q["answer"] for q in meta["case"]["event"]["questions"]]}
    return out


def answer_from(table):
    from evaluate.judge import images_digest

    return lambda body: (table[images_digest(body)]["started"], table[images_digest(body)]["answers"])


def evaluate(root: Path, run_dir: Path, base_url: str, extra=()):
    args = ["stage=evaluate", f"run={run_dir}", f"evaluate.judge.base_url={base_url}", "evaluate.judge.api_key_env=JK",
            *[f"evaluate.judge.{k}={v}" for k, v in JUDGE.items()], *FAST_EVAL, "progress=false", *extra]
    return run_cli(args, root, timeout=600, env={"JK": KEY})


def by_hand(table: dict) -> dict[str, dict]:
    """p_start, S_cond, S_gated per policy from the truths, without the scoring code."""
    out = {}
    for policy in POLICIES:
        rows = [t for t in table.values() if t["context"] == policy]
        started = [t for t in rows if t["started"]]
        cond = [sum(a == r for a, r in zip(t["answers"], t["refs"])) / 8 for t in started]
        p = len(started) / len(rows)
        s_cond = sum(cond) / len(cond)
        out[policy] = {"p_start": p, "S_cond": s_cond, "S_gated": p * s_cond}
    return out


def test_ground_truth_judge_scores_the_policies_as_by_hand(generated, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(generated, run_dir)
    table = ground_truth_table(run_dir)
    assert len(table) == 9
    with FakeJudgeServer(answer_from(table), require_key=KEY, max_requests=100, lifetime_s=300) as srv:
        url = srv.base_url
        r = evaluate(tmp_path, run_dir, url)
        assert r.returncode == 0, r.stderr
        assert all(q["auth_ok"] for q in srv.requests) and len(srv.chat_requests()) == 9
    rows = {(x["context"], x["trajectory"]): x for x in json.loads((run_dir / "eval" / "dynamic.json").read_text())["rows"]}
    hand = by_hand(table)
    for policy in POLICIES:
        row = rows[(policy, "all")]
        for k in ("p_start", "S_cond", "S_gated"):
            assert row[k] == pytest.approx(hand[policy][k], abs=1e-12), (policy, k)
    # What the event design implies: one of the three seeded starts falls after the initial hold; FullKV keeps
    # the walk; Sliding's context (sink = the cat lying, recent = away views) forgets it at every return.
    assert hand["fullkv"] == pytest.approx({"p_start": 2 / 3, "S_cond": 1.0, "S_gated": 2 / 3})
    assert hand["sliding"] == pytest.approx({"p_start": 2 / 3, "S_cond": 0.25, "S_gated": 1 / 6})
    assert rows[("sliding", "all")]["M_score"] == pytest.approx(2 * (2 / 3) * 0.25 / (2 / 3 + 0.25))
    assert (run_dir / "eval" / "dynamic.md").read_text().count("| Qwen/Qwen3.8-27B |") == 12
    m = json.loads((items(run_dir)[0] / "metrics.json").read_text())
    assert m["settings"]["judge"]["api_key_env"] == "JK" and m["settings"]["judge"]["base_url"] == url


def test_faults_complete_the_run_and_a_rerun_retries_only_them(generated, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(generated, run_dir)
    table = ground_truth_table(run_dir)
    digests = sorted(table, key=lambda g: str(table[g]["dir"]))
    faults = {digests[0]: ["500", "500"], digests[1]: ["garbage", "truncated"], digests[2]: ["timeout", "timeout"],
              digests[3]: ["drop"], digests[4]: ["slow"]}  # the last two recover (a retry; a slow answer)
    with FakeJudgeServer(answer_from(table), require_key=KEY, script_by_digest=faults, hang_s=1.5) as srv:
        r1 = evaluate(tmp_path, run_dir, srv.base_url)
        assert r1.returncode == 0, r1.stderr
        n1 = len(srv.chat_requests())
    reasons = {}
    for g in digests:
        m = json.loads((table[g]["dir"] / "metrics.json").read_text())["metrics"]["dynamic.overall[Qwen/Qwen3.8-27B]"]
        reasons[g] = m.get("reason") if m["status"] != "computed" else None
    assert "server error 500" in reasons[digests[0]] and "gave up after 2 attempts" in reasons[digests[0]]
    assert "unparseable judge reply after one repair" in reasons[digests[1]]
    assert "timed out" in reasons[digests[2]]
    assert reasons[digests[3]] is None and all(reasons[g] is None for g in digests[4:])
    assert n1 == 2 + 2 + 2 + 2 + 1 + 4  # every attempt, and one request for each healthy item
    with FakeJudgeServer(answer_from(table), require_key=KEY) as srv:
        r2 = evaluate(tmp_path, run_dir, srv.base_url)
        assert r2.returncode == 0, r2.stderr
        assert sorted(q["digest"] for q in srv.chat_requests()) == sorted(digests[:3])  # only the failed items
    for g in digests:
        m = json.loads((table[g]["dir"] / "metrics.json").read_text())["metrics"]["dynamic.overall[Qwen/Qwen3.8-27B]"]
        assert m["status"] == "computed"
    # the key is nowhere: run directory (metrics, judge requests/replies/attempts, hydra config dumps) and logs
    logs = (r1.stdout + r1.stderr + r2.stdout + r2.stderr).encode()
    assert KEY.encode() not in logs
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".attempts.jsonl") for p in files) and any(p.name == "config.yaml" for p in files)
    assert [p for p in files if KEY.encode() in p.read_bytes()] == []


def test_a_refused_response_format_falls_back_visibly_to_the_prompt_only_contract(generated, tmp_path):
    """A server without ``response_format`` (422, in the words of transformers serve's request validation): the
    client drops the field for the rest of the run, asks again, and records the fallback in every item's judge
    settings; the configured setting (json_schema=true) is left as it was. (A 400 naming the field falls back
    alike: test_only_a_refusal_naming_an_optional_field_falls_back.)"""
    status = 422
    run_dir = tmp_path / "run"
    shutil.copytree(generated, run_dir)
    table = ground_truth_table(run_dir)
    with FakeJudgeServer(answer_from(table), require_key=KEY, refuse_fields=("response_format",),
                         refuse_status=status) as srv:
        r = evaluate(tmp_path, run_dir, srv.base_url)
        assert r.returncode == 0, r.stderr
        chats = srv.chat_requests()
    with_rf = [q for q in chats if "response_format" in q["fields"]]
    without = [q for q in chats if "response_format" not in q["fields"]]
    # learned once per run: at most the requests already in flight (concurrency 3) carried the field
    assert 1 <= len(with_rf) <= JUDGE["concurrency"]
    assert sorted(q["digest"] for q in without) == sorted(table)  # then one request per item, without it
    assert r.stderr.count("refused response_format") == 1  # said once, in the log
    for t in table.values():
        m = json.loads((t["dir"] / "metrics.json").read_text())["metrics"]["dynamic.overall[Qwen/Qwen3.8-27B]"]
        assert m["status"] == "computed" and m["answers"] == t["answers"]
        s = m["judge"]["settings"]
        assert s["json_schema"] is True and list(s["fallbacks"]) == ["response_format"]
        why = s["fallbacks"]["response_format"]
        assert f"HTTP {status}" in why and "Unused fields" in why and "prompt-only" in why
        request = json.loads(next((t["dir"] / "judge").glob("*.request.json")).read_text())
        assert "response_format" not in request["body"] and list(request["fallbacks"]) == ["response_format"]
    # a rerun reuses the answers (nothing sent) and still says how they were obtained
    with FakeJudgeServer(answer_from(table), require_key=KEY) as srv:
        r2 = evaluate(tmp_path, run_dir, srv.base_url)
        assert r2.returncode == 0 and srv.chat_requests() == []
    m = json.loads((next(iter(table.values()))["dir"] / "metrics.json").read_text())["metrics"]
    assert list(m["dynamic.overall[Qwen/Qwen3.8-27B]"]["judge"]["settings"]["fallbacks"]) == ["response_format"]


def test_only_a_refusal_naming_an_optional_field_falls_back():
    from evaluate.judge import JudgeError, JudgeSession, JudgeSettings

    s = JudgeSession(JudgeSettings.from_dict({"base_url": "http://x/v1"}))
    body = {"model": "m", "messages": [], "response_format": {"type": "json_schema"}}
    assert s._refused_field(JudgeError("HTTP 422", status=422, detail="Unused fields: {'response_format'}"), body) \
        == "response_format"
    assert s._refused_field(JudgeError("HTTP 422", status=422, detail="Field required: stream"), body) is None
    assert s._refused_field(JudgeError("HTTP 500", status=500, detail="response_format broke"), body) is None
    no_rf = {k: v for k, v in body.items() if k != "response_format"}
    assert s._refused_field(JudgeError("HTTP 400", status=400, detail="response_format unknown"), no_rf) is None
