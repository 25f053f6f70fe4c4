"""The organiser's page of the annotation app (``/organiser``), in process against the ASGI app: it opens only with
the study's organiser token (never an annotator's), its counts are the vote store's after votes and a correction,
it names no arm, run or case, and a malformed or oversized request is a 4xx."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")

from tests.support.asgi import asgi_call
from tests.support.human_data import make_runs

#: the study folder's name carries the run names, as ``human plan``'s default name does: it must not reach the page
NAME = "static-run_alpha_fullkv+run_beta_fullkv-seed0"
FORM = "application/x-www-form-urlencoded"


def _asgi(app, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, dict, str]:
    """One request to ``app`` in this process (no HTTP client): (status, response headers, body text)."""
    status, _, out_headers, out = asgi_call(app, method, path, [body], headers)
    return status, out_headers, out.decode()


class _Annotator:
    def __init__(self, app, token: str):
        self.app = app
        st, h, _ = _asgi(app, "POST", "/api/login", json.dumps({"token": token}).encode(),
                         {"content-type": "application/json"})
        assert st == 200
        self.cookie = h["set-cookie"].split(";")[0]

    def post(self, path: str, body: dict) -> int:
        return _asgi(self.app, "POST", path, json.dumps(body).encode(),
                     {"content-type": "application/json", "cookie": self.cookie})[0]


def _rows(page: str) -> dict[str, list[str]]:
    """The organiser table's rows by annotator id (cells as text)."""
    table = re.search(r"<table id='organiser-table'>(.*?)</table>", page, re.DOTALL).group(1)
    rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.DOTALL)]
    return {r[0]: r[1:] for r in rows if r}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from evaluate.human.design import PlanRequest, plan_study

    root = tmp_path_factory.mktemp("org")
    runs = make_runs(root)
    return Path(plan_study(PlanRequest(runs, ["static"], seed=0, pairs=3, checks=2), root / "studies" / NAME)["dir"])


def _tokens(study: Path) -> dict[str, str]:
    return dict(line.split("\t") for line in (study / "tokens.txt").read_text().splitlines())


def test_the_organiser_page_counts_what_the_store_holds_and_stays_blind(study):
    from evaluate.human.analysis import progress
    from harness.app.human.server import create_app

    org = (study / "organiser.txt").read_text().strip()
    assert stat.S_IMODE((study / "organiser.txt").stat().st_mode) == 0o600 and len(org) >= 40
    assert org not in _tokens(study).values()
    key = {i["id"]: i for i in json.loads((study / "key.json").read_text())["items"]}
    order = {a["id"]: a["order"] for a in json.loads((study / "annotators.json").read_text())["annotators"]}
    app = create_app(study)

    a1 = _Annotator(app, _tokens(study)["a1"])
    real = [i for i in order["a1"] if not key[i].get("check")][:2]
    checks = [i for i in order["a1"] if key[i].get("check")][:2]
    with_metric = {i: "A" if key[i]["A"]["value"] > key[i]["B"]["value"] else "B" for i in real}
    flip = {"A": "B", "B": "A"}
    assert a1.post("/api/vote", {"item": real[0], "choice": with_metric[real[0]]}) == 200
    assert a1.post("/api/vote", {"item": real[1], "choice": flip[with_metric[real[1]]]}) == 200
    expected = [key[c]["check"]["expected"] for c in checks]
    assert a1.post("/api/vote", {"item": checks[0], "choice": flip[expected[0]]}) == 200
    assert a1.post("/api/correct", {"item": checks[0], "choice": expected[0]}) == 200  # now passed
    assert a1.post("/api/vote", {"item": checks[1], "choice": flip[expected[1]]}) == 200  # failed
    a2 = _Annotator(app, _tokens(study)["a2"])
    first_real = next(i for i in order["a2"] if not key[i].get("check"))
    assert a2.post("/api/vote", {"item": first_real, "choice": "T"}) == 200

    st, h, page = _asgi(app, "POST", "/organiser", urlencode({"token": org}).encode(), {"content-type": FORM})
    assert st == 200 and h["cache-control"] == "no-store" and "default-src 'none'" in h["content-security-policy"]
    rows = _rows(page)
    assert set(rows) == {"a1", "a2", "a3"}
    # answered, assigned, last vote, changed, median time, too fast, checks passed, checks failed (named by their
    # opaque item ids), agreement, decisive votes
    assert rows["a1"][:2] == ["4", str(len(order["a1"]))]
    assert rows["a1"][3:] == ["1", "-", "0 of 0", "1", checks[1], "50 %", "2"]
    assert rows["a2"][0] == "1" and rows["a2"][7:] == ["0", "-", "0"]  # a tie: no decisive vote yet
    assert rows["a3"] == ["0", str(len(order["a3"])), "-", "0", "-", "0 of 0", "0", "0", "-", "0"]
    assert f"a1 failed 1 attention check: {checks[1]}" in page  # the warning above the table
    want = {r["annotator"]: r for r in progress(study)}  # the `human status` numbers, from the store
    for a, r in rows.items():
        assert (int(r[0]), int(r[1]), int(r[3]), int(r[6])) == (want[a]["done"], want[a]["total"],
                                                                want[a]["corrected"], want[a]["checks_passed"])
        assert r[2] == (want[a]["last_vote_utc"] or "-")[:19]
    assert f"5 of {sum(len(o) for o in order.values())} answers in" in page
    # blind: no arm, model, policy, run, case, trajectory, metric, item (but a failed check's opaque id) or
    # study-folder name; no token
    for word in ("alpha", "beta", "fullkv", "run_", "env_", "obj_", "lrlr", "lrud", "environment", "object.",
                 NAME, *[i for i in key if i != checks[1]], org, *_tokens(study).values()):
        assert word not in page, word
    # the same table for a script: Authorization: Bearer on a GET
    st, _, page2 = _asgi(app, "GET", "/organiser", headers={"authorization": f"Bearer {org}"})
    assert st == 200 and _rows(page2) == rows


def test_no_organiser_token_no_page(study):
    from harness.app.human.server import create_app

    app = create_app(study)
    org = (study / "organiser.txt").read_text().strip()
    ann = _tokens(study)["a1"]
    denied = [("GET", b"", {}), ("POST", b"", {"content-type": FORM}),
              ("POST", urlencode({"token": "wrong"}).encode(), {"content-type": FORM}),
              ("POST", urlencode({"token": ann}).encode(), {"content-type": FORM}),  # an annotator's token
              ("POST", json.dumps({"token": ann}).encode(), {"content-type": "application/json"}),
              ("GET", b"", {"authorization": f"Bearer {ann}"}), ("GET", b"", {"authorization": "Bearer "}),
              ("GET", b"", {"authorization": f"Basic {org}"}),
              ("POST", urlencode({"token": org[:-1]}).encode(), {"content-type": FORM})]
    for method, body, headers in denied:
        st, _, page = _asgi(app, method, "/organiser", body, headers)
        assert st == 403 and "organiser-table" not in page and 'name="token"' in page, (method, body, headers)
    # an annotator's session does not open it either
    a1 = _Annotator(app, ann)
    st, _, page = _asgi(app, "GET", "/organiser", headers={"cookie": a1.cookie})
    assert st == 403 and "organiser-table" not in page
    # the token in the URL is not accepted (it would land in histories and logs)
    st, _, _ = _asgi(app, "GET", f"/organiser?token={org}")
    assert st == 403


@pytest.mark.parametrize("body, headers, status", [
    (b"x" * 10, {"content-type": FORM, "content-length": str(1 << 30)}, 413),
    (b"t" * (70 * 1024), {"content-type": FORM}, 413),
    (b"token=%ff\xff", {"content-type": FORM}, 400),
    (b"a&b&c", {"content-type": FORM}, 400),
    (b"&".join(b"k%d=v" % i for i in range(20)), {"content-type": FORM}, 400),
    (b"[1, 2", {"content-type": "application/json"}, 400),
    (b"token=x", {"content-type": "text/plain"}, 400),
    (b"token=x", {}, 400),
])
def test_a_malformed_organiser_request_is_a_4xx(study, body, headers, status):
    from harness.app.human.server import create_app

    st, _, page = _asgi(create_app(study), "POST", "/organiser", body, headers)
    assert st == status and "organiser-table" not in page


def test_a_new_organiser_token_replaces_the_old_one(study, tmp_path):
    import shutil

    from harness.app.human import main as human_main
    from harness.app.human.server import create_app

    d = tmp_path / "copy"
    shutil.copytree(study, d)
    old = (d / "organiser.txt").read_text().strip()
    (d / "organiser.txt").unlink()  # a study planned before organiser tokens existed
    st, _, page = _asgi(create_app(d), "GET", "/organiser", headers={"authorization": f"Bearer {old}"})
    assert st == 403 and "organiser=new" in page
    assert human_main(["tokens", f"study={d}", "organiser=yes"]) == 2
    assert human_main(["tokens", f"study={d}", "organiser=new"]) == 0
    new = (d / "organiser.txt").read_text().strip()
    assert new != old and stat.S_IMODE((d / "organiser.txt").stat().st_mode) == 0o600
    app = create_app(d)
    assert _asgi(app, "GET", "/organiser", headers={"authorization": f"Bearer {old}"})[0] == 403
    assert _asgi(app, "GET", "/organiser", headers={"authorization": f"Bearer {new}"})[0] == 200


def test_the_organiser_page_of_a_dynamic_study(tmp_path):
    from evaluate.human.design import PlanRequest, plan_study
    from harness.app.human.server import create_app

    runs = make_runs(tmp_path, static_cases=())
    d = Path(plan_study(PlanRequest(runs, ["dynamic"], seed=0, instances=2, annotators=["x1"]), tmp_path / "dyn")
             ["dir"])
    org = (d / "organiser.txt").read_text().strip()
    app = create_app(d)
    item = json.loads((d / "annotators.json").read_text())["annotators"][0]["order"][0]
    x1 = _Annotator(app, _tokens(d)["x1"])
    assert x1.post("/api/vote", {"item": item, "started": True, "answers": ["yes"] * 8}) == 200
    st, _, page = _asgi(app, "POST", "/organiser", json.dumps({"token": org}).encode(),
                        {"content-type": "application/json"})
    assert st == 200 and _rows(page) == {"x1": ["1", "2", _rows(page)["x1"][2], "0", "-", "0 of 0", "0", "0", "-",
                                                "0"]}
    assert "dyn_" not in page and "alpha" not in page and "ball" not in page


def test_the_organiser_page_flags_an_implausibly_fast_annotator(study, tmp_path):
    """a1 answers every pair in 0.1 s, a2 in 2 s; each clip plays 0.5 s (4 frames at 8 fps), so a1 answered before
    half of any clip could play: flagged, with the numbers; a2 is not."""
    import shutil

    from evaluate.human.analysis import FAST_SHARE, clip_seconds, progress
    from harness.app.human.server import create_app

    d = tmp_path / "fast"
    shutil.copytree(study, d, ignore=shutil.ignore_patterns("votes.sqlite*"))
    public = {i["id"]: i for i in json.loads((d / "study.json").read_text())["items"]}
    order = {a["id"]: a["order"] for a in json.loads((d / "annotators.json").read_text())["annotators"]}
    app = create_app(d)
    for who, ms in (("a1", 100), ("a2", 2000)):
        ann = _Annotator(app, _tokens(d)[who])
        for item in order[who][:3]:
            assert ann.post("/api/vote", {"item": item, "choice": "T", "elapsed_ms": ms}) == 200
    clip = {clip_seconds(public[i]) for i in order["a1"][:3]}
    assert clip == {0.5} and 0.1 < FAST_SHARE * 0.5 < 2.0  # the fixture separates the two annotators
    rows = {r["annotator"]: r for r in progress(d)}
    assert (rows["a1"]["too_fast"], rows["a1"]["fast_votes"], rows["a1"]["timed_votes"]) == (True, 3, 3)
    assert (rows["a2"]["too_fast"], rows["a2"]["fast_votes"], rows["a2"]["median_s"]) == (False, 0, 2.0)
    org = (d / "organiser.txt").read_text().strip()
    st, _, page = _asgi(app, "GET", "/organiser", headers={"authorization": f"Bearer {org}"})
    assert st == 200
    flags = re.search(r"<ul id='organiser-flags'[^>]*>(.*?)</ul>", page, re.DOTALL).group(1)
    assert "a1 answers implausibly fast: median 0.1 s per answer; 3 of 3 answers" in flags
    assert "a2 answers implausibly fast" not in flags
    assert "<tr data-annotator='a1' class='flag'>" in page and "<tr data-annotator='a3'>" in page
    assert _rows(page)["a1"][4:6] == ["0.1 s", "3 of 3 (flagged)"]
