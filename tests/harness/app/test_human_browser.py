"""End to end in a real headless Chromium: two small runs of the built-in reference model (``context=fullkv`` and
``context=sliding``; the dynamic case judged by the fake judge answering from the model's ground truth), a static
and a dynamic study planned from them with the CLI, three simulated annotators completing each through the real
pages with clicks and key presses, then:

* the exported votes equal what was clicked;
* ``human report`` prints the agreement tables, and their numbers equal a hand computation from the clicks;
* no page, URL, response or served file name names a model, a policy, a run or a case;
* a server killed with SIGKILL and restarted has lost no acknowledged vote, and the annotator resumes where they
  were;
* a second tab submitting the same item does not count twice (the first answer stays).

Screenshots of both interfaces are kept in outputs/test-artifacts/human_static.png and human_dynamic.png. Skips
without playwright, Chromium or the human extra."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from evaluate.reporting.browser import find_chromium
from tests.support import ROOT, run_cli

pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")
pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")
pytest.importorskip("uvicorn", reason="the annotation app needs the human extra (pip install -e '.[human]')")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_chromium() is None,
                                                   reason="no Chromium executable (apt-get install chromium)")]

from tests.support.human_sim import (  # noqa: E402
    Opinion,
    Session,
    StudyServer,
    answer_item,
    current_item,
    decide,
    evaluate_with_truth_judge,
    forbidden_names,
    leaks,
    login,
    record,
    run_annotator,
    tokens,
    wait_next,
    watch,
)

GEN = ["model.num_frames=289", "model.height=96", "model.width=160", "model.frames_per_trajectory={}",
       "cases.include=[human_astronaut,environment_rocket,dynamic_cat]", "trajectories=[lrlr,lrud]", "progress=false",
       "evaluate=off"]
FAST_EVAL = ("evaluate.pose_estimators=[vipe]", "evaluate.return_frame_poses=[oracle]", "evaluate.encoders=[pixel]",
             "evaluate.validity=false", "evaluate.bootstrap.n=50")
ARTIFACTS = ROOT / "outputs" / "test-artifacts"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("human")
    runs = []
    for policy in ("fullkv", "sliding"):
        r = run_cli([f"context={policy}", f"run=ref-{policy}", *GEN], root, timeout=900)
        assert r.returncode == 0, r.stderr
        runs.append(root / "outputs" / f"ref-{policy}")
    evaluate_with_truth_judge(runs, root, FAST_EVAL, judge={"image_size": 64})
    for run in runs:  # every dynamic video has the judge's verdict (the fake judge answered each request)
        for m in run.glob("reference/*/seed-*/*/dynamic_cat/metrics.json"):
            assert json.loads(m.read_text())["metrics"]["dynamic.overall[Qwen/Qwen3.8-27B]"]["status"] == "computed"
    return root


def plan(root: Path, name: str, metric: str) -> Path:
    r = run_cli(["human", "plan", "run=ref-fullkv", "run=ref-sliding", f"metric={metric}", "seed=7",
                 f"name={name}"], root, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "tokens are in" in r.stdout and not any(t in r.stdout for t in tokens(root / "outputs" / "studies" / name)
                                                   .values())  # tokens are never printed
    return root / "outputs" / "studies" / name


def browser():
    from playwright.sync_api import sync_playwright

    p = sync_playwright().start()
    b = p.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox", "--disable-gpu",
                                                                 "--autoplay-policy=no-user-gesture-required"])
    return p, b


def new_page(b, sess: Session):
    ctx = b.new_context(viewport={"width": 1360, "height": 1000})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    watch(page, sess)
    return ctx, page, errors


def db_votes(study: Path) -> list[dict]:
    from evaluate.human.store import read_votes

    return read_votes(study)


def effective(sessions: list[Session]) -> list[dict]:
    return [c for s in sessions for c in s.clicked]


def check_export(root: Path, study: Path, clicked: list[dict]) -> list[dict]:
    r = run_cli(["human", "export", f"study={study}"], root)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(study / "exports" / "votes.csv")))
    got = {(x["annotator"], x["item"]): x for x in rows}
    assert len(rows) == len(clicked) == len(got)
    for c in clicked:
        x = got[(c["annotator"], c["item"])]
        if "choice" in c:
            assert x["choice"] == c["choice"], c
        else:
            assert x["started"] == ("yes" if c["started"] else "no"), c
            assert x["answers"] == (";".join(c["answers"]) if c["started"] else ""), c
    jl = [json.loads(line) for line in open(study / "exports" / "votes.jsonl")]
    assert [(j["annotator"], j["item"]) for j in jl] == [(x["annotator"], x["item"]) for x in rows]
    return rows


def check_no_leaks(study: Path, sessions: list[Session]) -> None:
    key = json.loads((study / "key.json").read_text())
    names = forbidden_names(key)
    assert {"reference", "fullkv", "sliding", "ref-fullkv"} <= set(names)
    texts = [u for s in sessions for u in s.urls] + [b for s in sessions for b in s.bodies]
    texts += [p.name for p in (study / "media").iterdir()]
    assert texts and leaks(texts, names) == []
    # the served clips and images carry no name in their bytes either
    blob = b"".join(p.read_bytes() for p in (study / "media").iterdir()).lower()
    assert not [n for n in ("fullkv", "sliding", "ref-", "human_astronaut", "dynamic_cat") if n.encode() in blob]


def hand_static(key: dict, clicked: list[dict]) -> dict:
    """Agreement and win rates per metric, computed here from the clicks and the key (not with the package)."""
    by: dict = {}
    for c in clicked:
        by.setdefault(c["item"], []).append(c["choice"])
    out = {}
    metrics = sorted({it["metric"] for it in key["items"]})
    for m in [*metrics, "all metrics"]:
        d = a = t = s = 0
        for it in key["items"]:
            if m != "all metrics" and it["metric"] != m:
                continue
            v = by[it["id"]]
            pref = "A" if it["A"]["value"] > it["B"]["value"] else "B" if it["A"]["value"] < it["B"]["value"] else "T"
            counts = {x: v.count(x) for x in "ATB"}
            top = max(counts, key=counts.get)
            if counts[top] * 2 > len(v):
                if top == "T":
                    t += 1
                else:
                    d += 1
                    a += int(top == pref)
            else:
                s += 1
        out[m] = {"decisive": d, "agree": a, "majority_ties": t, "splits": s}
    return out


def test_static_study_through_the_browser(root):
    study = plan(root, "static-demo", "static,departure.visible")
    key = json.loads((study / "key.json").read_text())
    order = {a["id"]: a["order"] for a in json.loads((study / "annotators.json").read_text())["annotators"]}
    toks = tokens(study)
    assert len(key["items"]) >= 6 and set(toks) == {"a1", "a2", "a3"}
    opinion = Opinion()
    server = StudyServer(study).start()
    p, b = browser()
    try:
        s1, s2, s3 = Session("a1"), Session("a2"), Session("a3")
        # a1: the whole study, keys and clicks alternating; keeps the screenshot of the interface
        ctx, page, errors = new_page(b, s1)
        login(page, server.url, toks["a1"])
        shot = ARTIFACTS / "human_static.png"
        run_annotator(page, server.url, toks["a1"], s1, key, opinion, screenshot=shot)
        assert page.query_selector("#finished") and errors == []
        ctx.close()

        # a2: three items, then the server is killed with SIGKILL; nothing acknowledged is lost; a2 resumes
        ctx, page, errors = new_page(b, s2)
        login(page, server.url, toks["a2"])
        run_annotator(page, server.url, toks["a2"], s2, key, opinion, limit=3)
        server.kill9()
        after = db_votes(study)
        assert [(v["annotator"], v["item"], v["choice"]) for v in after] == \
            [(c["annotator"], c["item"], c["choice"]) for c in s1.clicked + s2.clicked]
        server.start()
        page.reload()
        assert current_item(page) == order["a2"][3]  # the fourth of a2's seeded order: resumed, none repeated
        assert page.text_content("#progress-text") == f"3 / {len(key['items'])} done"
        run_annotator(page, server.url, toks["a2"], s2, key, opinion)
        ctx.close()

        # a3: two tabs show the same item; both submit; only the first answer counts
        ctx, page, errors = new_page(b, s3)
        login(page, server.url, toks["a3"])
        tab2 = ctx.new_page()
        watch(tab2, s3)
        tab2.goto(server.url + "/annotate")
        first = current_item(page)
        assert current_item(tab2) == first == order["a3"][0]
        mine = decide(opinion, {i["id"]: i for i in key["items"]}, "a3", first)
        other = {"A": "B", "B": "T", "T": "A"}[mine]
        answer_item(page, "static", mine, use_keys=True)
        record(s3, first, mine, "keys")
        wait_next(page, first)
        answer_item(tab2, "static", other, use_keys=False)  # the second tab's submit of the same item
        wait_next(tab2, first)
        assert "Already answered" in tab2.text_content("#status")
        assert current_item(tab2) == current_item(page)
        tab2.close()
        run_annotator(page, server.url, toks["a3"], s3, key, opinion)
        assert errors == []
        ctx.close()
    finally:
        b.close()
        p.stop()
        server.stop()

    clicked = effective([s1, s2, s3])
    votes = db_votes(study)
    assert len(votes) == 3 * len(key["items"]) == len(clicked)
    assert [v for v in votes if v["annotator"] == "a3" and v["item"] == first][0]["choice"] == mine
    assert {c["method"] for c in clicked} == {"keys", "clicks"}
    check_export(root, study, clicked)
    check_no_leaks(study, [s1, s2, s3])

    r = run_cli(["human", "report", f"study={study}"], root)
    assert r.returncode == 0, r.stderr
    assert "Human evaluation: static memory" in r.stdout and "| all metrics |" in r.stdout
    res = json.loads((study / "report" / "agreement.json").read_text())
    hand = hand_static(key, clicked)
    for m, h in hand.items():
        got = res["metrics"][m]
        assert {k: got[k] for k in h} == h, m
        if h["decisive"]:
            pct = f"{100 * h['agree'] / h['decisive']:.1f}% ["  # a share printed as a percentage
            assert any(line.startswith(f"| {m} |") and pct in line for line in r.stdout.splitlines()), (m, pct)
    # departure revisits separate the policies: FullKV remembers the away view, Sliding does not; every simulated
    # annotator perceives that, so the metric and the human majority agree there
    dep = [m for m in res["metrics"] if m.startswith("departure.visible")][0]
    assert res["metrics"][dep]["agreement"] >= 0.5
    wr = res["metrics"][dep]["win_rates"]
    assert wr["reference/fullkv"]["human"] > wr["reference/sliding"]["human"]
    assert shot.stat().st_size > 20_000


def test_dynamic_study_through_the_browser(root):
    study = plan(root, "dynamic-demo", "dynamic")
    key = json.loads((study / "key.json").read_text())
    toks = tokens(study)
    assert len(key["items"]) == 4  # dynamic_cat x {lrlr, lrud} x {fullkv, sliding}
    server = StudyServer(study).start()
    p, b = browser()
    sessions = []
    try:
        for i, aid in enumerate(toks):
            sess = Session(aid)
            ctx, page, errors = new_page(b, sess)
            login(page, server.url, toks[aid])
            shot = ARTIFACTS / "human_dynamic.png" if i == 0 else None
            run_annotator(page, server.url, toks[aid], sess, key, Opinion(), screenshot=shot)
            assert page.query_selector("#finished") and errors == []
            sessions.append(sess)
            ctx.close()
    finally:
        b.close()
        p.stop()
        server.stop()
    clicked = effective(sessions)
    assert {c["method"] for c in clicked} == {"keys", "clicks"}
    check_export(root, study, clicked)
    check_no_leaks(study, sessions)

    r = run_cli(["human", "report", f"study={study}"], root)
    assert r.returncode == 0, r.stderr
    assert "Human evaluation: dynamic memory checklist" in r.stdout and "| Overall |" in r.stdout
    res = json.loads((study / "report" / "agreement.json").read_text())
    human, vlm = [], []
    for it in key["items"]:
        votes = [c for c in clicked if c["item"] == it["id"]]
        scores = [[int(a == ref) for a, ref in zip(v["answers"], it["references"])] if v["started"] else [0] * 8
                  for v in votes]
        labels = [int(sum(s[q] for s in scores) >= 2) for q in range(8)]
        human.append(sum(labels) / 8)
        vlm.append(sum(it["vlm"]["items"]) / 8)
    o = res["dimensions"]["overall"]
    assert o["human_mean"] == pytest.approx(np.mean(human)) and o["vlm_mean"] == pytest.approx(np.mean(vlm))
    from scipy.stats import pearsonr, spearmanr

    if np.ptp(human) and np.ptp(vlm):
        assert o["spearman"] == pytest.approx(spearmanr(human, vlm).statistic)
        assert o["plcc"] == pytest.approx(pearsonr(human, vlm).statistic)
    else:
        assert np.isnan(o["spearman"]) and o["spearman_reason"]
    assert (ARTIFACTS / "human_dynamic.png").stat().st_size > 20_000

