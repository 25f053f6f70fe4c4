"""The rules of the annotation app (``harness/app/human/server.py``), one at a time, in this process: Starlette's
``TestClient`` (or :func:`tests.support.asgi.asgi_call` where the number of body chunks the app pulled matters)
against :func:`create_app` on a tiny study planned in a temporary folder. Routes and the status code of every
malformed request, the body bound and where it is checked, the session cookie, the blinding, media serving, the
vote answer's fields, progress and order per annotator, the headers of every response, and ``serve``'s socket."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar
from urllib.parse import urlencode

import pytest

pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")

from starlette.testclient import TestClient

from tests.support.asgi import asgi_call
from tests.support.human_data import make_runs

JSON = {"content-type": "application/json"}
FORM = "application/x-www-form-urlencoded"
KIB64 = 64 * 1024  # the body bound, written out: MAX_BODY must stay 65 536 bytes


# -- studies -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("srv-runs"), dynamic_cases=("dyn_0",))


@pytest.fixture(scope="module")
def static_study(runs, tmp_path_factory):
    from evaluate.human.design import PlanRequest, plan_study

    out = tmp_path_factory.mktemp("srv") / "static"
    return Path(plan_study(PlanRequest(runs, ["static"], seed=0, pairs=2, checks=1, annotators=["a1", "a2"]),
                           out)["dir"])


@pytest.fixture(scope="module")
def dynamic_study(runs, tmp_path_factory):
    from evaluate.human.design import PlanRequest, plan_study

    out = tmp_path_factory.mktemp("srv") / "dynamic"
    return Path(plan_study(PlanRequest(runs, ["dynamic"], seed=0, instances=1, annotators=["x1"]), out)["dir"])


@pytest.fixture
def study(static_study, tmp_path) -> Path:
    """A fresh copy of the static study (no votes, no sessions)."""
    d = tmp_path / "study"
    shutil.copytree(static_study, d, ignore=shutil.ignore_patterns("votes.sqlite*"))
    return d


def _tokens(d: Path) -> dict[str, str]:
    return dict(line.split("\t") for line in (d / "tokens.txt").read_text().splitlines())


def _orders(d: Path) -> dict[str, list[str]]:
    return {a["id"]: a["order"] for a in json.loads((d / "annotators.json").read_text())["annotators"]}


def _key(d: Path) -> dict[str, dict]:
    return {i["id"]: i for i in json.loads((d / "key.json").read_text())["items"]}


def _client(d: Path, **kw) -> TestClient:
    from harness.app.human.server import create_app

    return TestClient(create_app(d, **kw), base_url="http://127.0.0.1", follow_redirects=False)


def _login(c: TestClient, d: Path, who: str = "a1") -> TestClient:
    r = c.post("/api/login", json={"token": _tokens(d)[who]})
    assert r.status_code == 200 and r.json() == {"annotator": who}
    return c


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """The app's guessing delays, recorded instead of slept."""
    from harness.app.human import server

    slept: list[float] = []
    monkeypatch.setattr(server, "time", SimpleNamespace(sleep=slept.append))
    return slept


def _choice(d: Path, item: str) -> str:
    """A valid answer of a static item (the check's expected one for an attention check)."""
    k = _key(d)[item]
    return k["check"]["expected"] if k.get("check") else "A"


# -- the study folder ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", ["study.json", "annotators.json"])
def test_a_study_without_its_public_files_is_refused(study, missing):
    from evaluate.human.common import StudyError
    from harness.app.human.server import create_app

    (study / missing).unlink()
    with pytest.raises(StudyError, match=f"{missing} is missing"):
        create_app(study)


def test_a_missing_or_misnamed_media_file_is_refused(study):
    from evaluate.human.common import StudyError
    from harness.app.human.server import create_app

    name = min(p.name for p in (study / "media").iterdir())
    (study / "media" / name).rename(study / "media" / ("x" + name))
    with pytest.raises(StudyError, match=f"media file '{name}'.*missing or misnamed"):
        create_app(study)
    # a file that exists under a name outside the media rule: refused all the same
    (study / "media" / ("x" + name)).rename(study / "media" / name)
    text = (study / "study.json").read_text().replace(f'"{name}"', '"Bad.mp4"')
    (study / "study.json").write_text(text)
    shutil.copyfile(study / "media" / name, study / "media" / "Bad.mp4")
    with pytest.raises(StudyError, match="media file 'Bad.mp4'.*missing or misnamed"):
        create_app(study)


def test_the_study_keeps_hashes_and_answers_the_organiser_question(study):
    from harness.app.human.server import Study

    s = Study(study)
    org = (study / "organiser.txt").read_text().strip()
    assert s.is_organiser(org) and not s.is_organiser(org + "x") and not s.is_organiser(_tokens(study)["a1"])
    assert {s.annotator_for(t) for t in _tokens(study).values()} == {"a1", "a2"}
    assert s.annotator_for(_tokens(study)["a2"]) == "a2" and s.annotator_for("nope") is None
    (study / "organiser.txt").unlink()
    assert Study(study).organiser_sha256 is None and Study(study).is_organiser(org) is False
    assert len(s.media) == len(list((study / "media").iterdir()))


# -- pages, redirects, routes --------------------------------------------------------------------------------------
def test_pages_redirect_by_session_and_carry_the_study_kind(study, dynamic_study):
    c = _client(study)
    r = c.get("/")
    assert r.status_code == 200 and 'data-page="login"' in r.text and "<title>Memory study</title>" in r.text
    assert r.headers["cache-control"] == "no-store"
    r = c.get("/annotate")
    assert r.status_code == 303 and r.headers["location"] == "/"
    _login(c, study)
    r = c.get("/")
    assert r.status_code == 303 and r.headers["location"] == "/annotate"
    r = c.get("/annotate")
    assert r.status_code == 200 and 'data-page="annotate"' in r.text and r.headers["cache-control"] == "no-store"
    assert "<title>Event study</title>" in _client(dynamic_study).get("/").text


def test_each_route_takes_its_methods_only(study):
    c = _client(study)
    assert c.get("/api/login").status_code == 405 and c.get("/api/vote").status_code == 405
    assert c.get("/api/correct").status_code == 405 and c.get("/api/logout").status_code == 405
    assert c.post("/api/next").status_code == 405 and c.put("/organiser").status_code == 405
    assert c.get("/nope").status_code == 404
    r = c.get("/healthz")
    assert r.status_code == 200 and r.text == "ok"
    r = c.get("/favicon.ico")
    assert r.status_code == 204 and r.content == b""


def test_every_response_carries_the_security_headers(study):
    from harness.app.human.server import HEADERS

    c = _client(study)
    for r in (c.get("/"), c.get("/healthz"), c.get("/nope"), c.get("/static/app.js"), c.get("/api/next"),
              c.post("/api/login", content=b"x", headers=JSON), c.get("/favicon.ico")):
        for k, v in HEADERS.items():
            assert r.headers[k] == v, (r.url, k)
    assert "default-src 'none'" in HEADERS["Content-Security-Policy"] and HEADERS["X-Frame-Options"] == "DENY"


def test_the_security_headers_do_not_replace_a_header_the_app_set():
    from harness.app.human.server import HEADERS, _SecurityHeaders

    async def bare(scope, receive, send):  # an app whose start message has no header list, then one that sets one
        start = {"type": "http.response.start", "status": 200}
        if scope["path"] == "/own":
            start["headers"] = [(b"X-Frame-Options", b"SAMEORIGIN")]
        await send(start)
        await send({"type": "http.response.body", "body": b"hi"})

    app = _SecurityHeaders(bare)
    st, _, h, body = asgi_call(app, "GET", "/")
    assert st == 200 and body == b"hi" and {k.lower(): v for k, v in HEADERS.items()}.items() <= h.items()
    st, _, h, _ = asgi_call(app, "GET", "/own")
    assert h["x-frame-options"] == "SAMEORIGIN" and h["referrer-policy"] == "no-referrer"


def test_a_non_http_scope_passes_through_untouched():
    import asyncio

    from harness.app.human.server import _SecurityHeaders

    sent: list[dict] = []

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message):
        sent.append(message)

    asyncio.run(_SecurityHeaders(inner)({"type": "websocket"}, None, send))
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []}]


def test_on_loopback_only_a_loopback_host_header_is_served(study):
    from harness.app.human.server import create_app

    for host in ("127.0.0.1", "localhost", "::1"):
        app = create_app(study, host=host)
        assert asgi_call(app, "GET", "/healthz", headers={"host": "evil.example"})[0] == 400
        for ok in ("127.0.0.1", "localhost:8765", "[::1]:8765"):
            assert asgi_call(app, "GET", "/healthz", headers={"host": ok})[0] == 200, (host, ok)
    # the refusal carries the security headers too, like every response
    st, _, h, _ = asgi_call(create_app(study), "GET", "/healthz", headers={"host": "evil.example"})
    assert st == 400 and h["content-security-policy"].startswith("default-src 'none'") and h["x-frame-options"] == "DENY"
    # bound to every interface on purpose: any Host header
    assert asgi_call(create_app(study, host="0.0.0.0"), "GET", "/healthz", headers={"host": "evil.example"})[0] == 200


# -- login, cookie, logout -----------------------------------------------------------------------------------------
def test_login_sets_a_strict_session_cookie_and_logout_ends_the_session(study):
    c = _client(study)
    r = c.post("/api/login", json={"token": _tokens(study)["a2"]})
    assert r.status_code == 200 and r.json() == {"annotator": "a2"}
    cookie = r.headers["set-cookie"]
    sid = cookie.split(";")[0].split("=", 1)[1]
    assert cookie.startswith("hs_session=") and len(sid) >= 40 and _tokens(study)["a2"] not in cookie
    attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/", "max-age=2592000"} <= attrs, attrs
    assert c.get("/api/next").json()["annotator"] == "a2"
    r = c.post("/api/logout")
    assert r.status_code == 200 and r.json() == {"ok": True}
    assert r.headers["set-cookie"].startswith('hs_session="";') or "max-age=0" in r.headers["set-cookie"].lower()
    # the old session id is dead on the server side too, not only dropped by the browser
    c.cookies.set("hs_session", sid)
    assert c.get("/api/next").status_code == 401
    assert c.post("/api/logout").status_code == 200  # logging out twice (or without a session) is harmless


def test_a_session_of_an_annotator_no_longer_in_the_study_is_not_a_session(study):
    from harness.app.human.server import Study

    sid = Study(study).store.new_session("ghost")
    c = _client(study)
    c.cookies.set("hs_session", sid)
    assert c.get("/api/next").status_code == 401
    assert c.get("/annotate").status_code == 303


@pytest.mark.parametrize("token, status", [("", 400), ("x" * 257, 400), ("x" * 256, 401), ("x", 401), (7, 400),
                                           (None, 400)])
def test_the_token_length_is_bounded(study, sleeps, token, status):
    r = _client(study).post("/api/login", json={"token": token})
    assert r.status_code == status and r.headers["cache-control"] == "no-store"
    assert r.json()["error"] == ("unknown token" if status == 401 else "token: give your token")
    assert sleeps == ([0.25] if status == 401 else [])  # only a checked wrong token costs the guessing delay


def test_a_right_token_costs_no_delay(study, sleeps):
    _login(_client(study), study)
    assert sleeps == []


@pytest.mark.parametrize("ctype", ["application/json", "Application/JSON; charset=utf-8", " application/json ;x=1"])
def test_login_reads_json_whatever_the_content_type_parameters(study, ctype):
    r = _client(study).post("/api/login", content=json.dumps({"token": _tokens(study)["a1"]}), headers={
        "content-type": ctype})
    assert r.status_code == 200


@pytest.mark.parametrize("body, headers, error", [
    (b'{"token": "x"}', {"content-type": "text/plain"}, "send application/json"),
    (b'{"token": "x"}', {}, "send application/json"),
    (b"{", JSON, "not valid JSON"),
    (b'["x"]', JSON, "token: give your token"),
])
def test_a_malformed_login_is_a_400_naming_what_is_wrong(study, body, headers, error):
    st, _, h, out = asgi_call(_client(study).app, "POST", "/api/login", [body], headers)
    assert st == 400 and json.loads(out) == {"error": error} and h["cache-control"] == "no-store"


def test_a_deeply_nested_json_body_is_a_400_never_a_500(study):
    """A 60 kB body of ``[`` (under the bound) made ``json.loads`` raise RecursionError: a 500 on the login route."""
    deep = b"[" * 60000
    c = _login(_client(study), study)
    for path in ("/api/login", "/api/vote", "/api/correct"):
        r = c.post(path, content=deep, headers=JSON)
        assert r.status_code == 400 and r.json() == {"error": "not valid JSON"}, path
    r = c.post("/organiser", content=deep, headers=JSON)
    assert r.status_code == 400 and "not valid JSON" in r.text


# -- the body bound -------------------------------------------------------------------------------------------------
def _padded(n: int) -> bytes:
    """A JSON login body of exactly ``n`` bytes whose token is too long (a 400 once read)."""
    head, tail = b'{"token": "', b'"}'
    return head + b"t" * (n - len(head) - len(tail)) + tail


def test_the_body_bound_is_64_kib_declared(study):
    app = _client(study).app
    st, _, _, out = asgi_call(app, "POST", "/api/login", [_padded(KIB64)], {**JSON, "content-length": str(KIB64)})
    assert st == 400 and json.loads(out)["error"] == "token: give your token"  # read: on the bound is allowed
    st, pulled, _, out = asgi_call(app, "POST", "/api/login", [_padded(KIB64 + 1)],
                                   {**JSON, "content-length": str(KIB64 + 1)})
    assert (st, pulled) == (413, 0) and json.loads(out)["error"] == f"request body over {KIB64} bytes"
    # a length that is not a number is refused unread as well
    for bad in ("12a", "-1", " 5", ""):
        st, pulled, _, _ = asgi_call(app, "POST", "/api/login", [b"{}"], {**JSON, "content-length": bad})
        assert (st, pulled) == (413, 0), bad


def test_the_body_bound_is_64_kib_streamed(study):
    app = _client(study).app
    body = _padded(KIB64)
    chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)]
    st, pulled, _, _ = asgi_call(app, "POST", "/api/login", chunks, JSON)
    assert st == 400 and pulled == len(chunks)
    body = _padded(KIB64 + 1)
    chunks = [body[:KIB64], body[KIB64:], b"more", b"more"]
    st, pulled, _, out = asgi_call(app, "POST", "/api/login", chunks, JSON)
    assert (st, pulled) == (413, 2) and json.loads(out)["error"] == f"request body over {KIB64} bytes"


@pytest.mark.parametrize("path", ["/api/vote", "/api/correct"])
def test_the_body_bound_holds_on_votes_and_corrections(study, path):
    c = _login(_client(study), study)
    cookie = f"hs_session={c.cookies['hs_session']}"
    st, pulled, _, out = asgi_call(c.app, "POST", path, [b"x" * 10], {**JSON, "cookie": cookie,
                                                                       "content-length": str(KIB64 + 1)})
    assert (st, pulled) == (413, 0) and "request body over" in json.loads(out)["error"]
    st, pulled, _, _ = asgi_call(c.app, "POST", path, [b"x" * KIB64, b"x"], {**JSON, "cookie": cookie})
    assert (st, pulled) == (413, 2)


def test_the_body_bound_holds_before_the_session_is_read_only_after_login(study):
    """Votes without a session are a 401 before the body is read at all."""
    st, pulled, _, _ = asgi_call(_client(study).app, "POST", "/api/vote", [b"x"] * 5,
                                 {**JSON, "content-length": "5"})
    assert (st, pulled) == (401, 0)


# -- next item, votes, corrections ------------------------------------------------------------------------------------
def test_next_gives_progress_and_the_next_item_in_the_annotators_own_order(study):
    c = _login(_client(study), study)
    order = _orders(study)["a1"]
    assert c.get("/api/next").headers["cache-control"] == "no-store"
    s = c.get("/api/next").json()
    public = json.loads((study / "study.json").read_text())
    assert s["annotator"] == "a1" and s["done"] == 0 and s["total"] == len(order) and s["kind"] == "static"
    assert s["instructions"] == public.get("instructions", "") and s["last"] is None
    assert s["item"]["id"] == order[0]
    # the second item in the order comes next after a vote on the first, and done counts it
    r = c.post("/api/vote", json={"item": order[0], "choice": _choice(study, order[0]), "client_id": "c-1",
                                  "elapsed_ms": 1200})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert r.json() == {"status": "recorded", "item": order[0], "done": 1, "total": len(order)}
    s = c.get("/api/next").json()
    assert (s["done"], s["item"]["id"]) == (1, order[1])
    assert s["last"] == {"item": s["last"]["item"], "choice": _choice(study, order[0]), "started": None,
                         "answers": None} and s["last"]["item"]["id"] == order[0]
    # voting out of order is allowed: the order skips what is done
    r = c.post("/api/vote", json={"item": order[-1], "choice": "T"})
    assert r.json() == {"status": "recorded", "item": order[-1], "done": 2, "total": len(order)}
    assert c.get("/api/next").json()["item"]["id"] == order[1]
    # a second vote on an item is a duplicate and counts once
    r = c.post("/api/vote", json={"item": order[0], "choice": "B"})
    assert r.json() == {"status": "duplicate", "item": order[0], "done": 2, "total": len(order)}
    # another annotator's progress is their own
    s2 = _login(_client(study), study, "a2").get("/api/next").json()
    assert (s2["annotator"], s2["done"], s2["item"]["id"]) == ("a2", 0, _orders(study)["a2"][0])
    from evaluate.human.store import read_votes

    votes = {v["item"]: v for v in read_votes(study)}
    assert votes[order[0]]["client_id"] == "c-1" and votes[order[0]]["elapsed_ms"] == 1200


def test_when_every_item_is_answered_there_is_no_next_item(study):
    c = _login(_client(study), study, "a2")
    order = _orders(study)["a2"]
    for i in order:
        assert c.post("/api/vote", json={"item": i, "choice": _choice(study, i)}).status_code == 200
    s = c.get("/api/next").json()
    assert s["item"] is None and s["done"] == s["total"] == len(order) and s["last"]["item"]["id"] == order[-1]


def test_items_carry_media_urls_and_nothing_that_names_an_arm_run_or_case(study):
    c = _login(_client(study), study)
    s = c.get("/api/next").json()
    item = s["item"]
    urls = [*item["clips"].values(), *item["first_view"]]
    assert urls and all(u.startswith("/media/") and u[7:] in {p.name for p in (study / "media").iterdir()}
                        for u in urls)
    assert set(item["clips"]) == {"A", "B"}
    text = json.dumps(s)
    for word in ("alpha", "beta", "fullkv", "run_", "env_", "obj_", "lrlr", "lrud", "seed-", "video.mp4"):
        assert word not in text, word
    for u in urls:
        assert c.get(u).status_code == 200


def test_a_dynamic_item_carries_one_clip_url(dynamic_study, tmp_path):
    d = tmp_path / "dyn"
    shutil.copytree(dynamic_study, d, ignore=shutil.ignore_patterns("votes.sqlite*"))
    c = _login(_client(d), d, "x1")
    s = c.get("/api/next").json()
    assert s["kind"] == "dynamic" and s["item"]["clip"].startswith("/media/") and "clips" not in s["item"]
    assert c.get(s["item"]["clip"]).status_code == 200
    item = s["item"]["id"]
    r = c.post("/api/vote", json={"item": item, "started": True, "answers": ["yes"] * 8})
    assert r.json()["status"] == "recorded"
    last = c.get("/api/next").json()["last"]
    assert last["started"] is True and last["answers"] == ["yes"] * 8 and last["choice"] is None
    assert last["item"]["clip"].startswith("/media/")
    r = c.post("/api/correct", json={"item": item, "started": False, "answers": []})
    assert r.status_code == 200 and r.json()["status"] == "corrected"
    assert c.get("/api/next").json()["last"]["started"] is False


def test_votes_and_corrections_need_a_session(study):
    c = _client(study)
    for path in ("/api/vote", "/api/correct"):
        r = c.post(path, json={"item": "x", "choice": "A"})
        assert r.status_code == 401 and r.json() == {"error": "log in first"}
    assert c.get("/api/next").status_code == 401


@pytest.mark.parametrize("path", ["/api/vote", "/api/correct"])
def test_an_item_outside_the_annotators_order_is_a_403(study, path):
    """An item of the study that is not this annotator's, an unknown id, or an id an edited order lists but the
    study does not hold: each a 403, never a 500 and never a stored vote."""
    orders = _orders(study)
    data = json.loads((study / "annotators.json").read_text())
    mine = orders["a1"][1:] + ["zz-not-an-item"]
    for a in data["annotators"]:
        if a["id"] == "a1":
            a["order"] = mine
    (study / "annotators.json").write_text(json.dumps(data))
    c = _login(_client(study), study)
    other = orders["a1"][0]  # a study item no longer in a1's order
    for item in (other, "zz-not-an-item", "p999"):
        r = c.post(path, json={"item": item, "choice": "A"})
        assert r.status_code == 403 and r.json() == {"error": "item: not one of your items"}, item
    from evaluate.human.store import read_votes

    assert read_votes(study) == []


@pytest.mark.parametrize("body, error", [
    (b"[]", "send a JSON object"), (b'"x"', "send a JSON object"), (b'{"choice": "A"}', "item:"),
    (b'{"item": 3}', "item:"), (b"nope", "not valid JSON"),
])
@pytest.mark.parametrize("path", ["/api/vote", "/api/correct"])
def test_a_malformed_vote_body_is_a_400(study, path, body, error):
    c = _login(_client(study), study)
    r = c.post(path, content=body, headers=JSON)
    assert r.status_code == 400 and r.json()["error"].startswith(error) and r.headers["cache-control"] == "no-store"


def test_an_invalid_answer_is_a_400_and_a_late_correction_a_409(study):
    c = _login(_client(study), study)
    order = _orders(study)["a1"]
    r = c.post("/api/vote", json={"item": order[0], "choice": "Z"})
    assert r.status_code == 400 and "choice=" in r.json()["error"]
    r = c.post("/api/correct", json={"item": order[0], "choice": "A"})  # nothing answered yet
    assert r.status_code == 409 and "only your last answer" in r.json()["error"]
    for i in order[:2]:
        assert c.post("/api/vote", json={"item": i, "choice": _choice(study, i)}).status_code == 200
    r = c.post("/api/correct", json={"item": order[0], "choice": "B"})
    assert r.status_code == 409 and r.headers["cache-control"] == "no-store"
    r = c.post("/api/correct", json={"item": order[1], "choice": "Z"})
    assert r.status_code == 400 and "choice=" in r.json()["error"]
    r = c.post("/api/correct", json={"item": order[1], "choice": "T"})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert r.json() == {"status": "corrected", "item": order[1], "done": 2, "total": len(order)}
    assert c.get("/api/next").json()["last"]["choice"] == "T"


# -- media and static files -------------------------------------------------------------------------------------------
def test_media_are_served_to_a_session_by_listed_name_only(study):
    c = _client(study)
    name = min(p.name for p in (study / "media").iterdir())
    r = c.get(f"/media/{name}")
    assert r.status_code == 401 and r.json() == {"error": "log in first"}
    assert c.get("/media/key.json").status_code == 401  # the session is checked first: no name is probed
    _login(c, study)
    r = c.get(f"/media/{name}")
    assert r.status_code == 200 and r.content == (study / "media" / name).read_bytes()
    assert r.headers["cache-control"] == "private, max-age=3600"
    (study / "media" / "z999.mp4").write_bytes(b"unlisted")  # in media/ and well named, but not in study.json
    cookie = {"cookie": f"hs_session={c.cookies['hs_session']}"}
    for bad in ("z999.mp4", "key.json", "study.json", "tokens.txt", "..", ".", "..%2Fkey.json", "votes.sqlite"):
        st, _, _, out = asgi_call(c.app, "GET", f"/media/{bad}", headers=cookie)  # the path as the server decodes it
        assert st == 404 and json.loads(out) == {"error": "no such file"}, bad
    for bad in ("../key.json", "../../key.json", "a/b.mp4", "/etc/passwd"):
        assert asgi_call(c.app, "GET", f"/media/{bad}", headers=cookie)[0] == 404, bad


def test_the_two_static_files_are_served_with_their_types(study):
    c = _client(study)
    r = c.get("/static/app.js")
    assert r.status_code == 200 and r.headers["content-type"] == "text/javascript; charset=utf-8"
    assert r.headers["cache-control"] == "no-cache" and len(r.content) > 100
    r = c.get("/static/app.css")
    assert r.status_code == 200 and r.headers["content-type"] == "text/css; charset=utf-8"
    for bad in ("server.py", "__init__.py", "..", "app.JS", "..%2Fserver.py"):
        st, _, _, out = asgi_call(c.app, "GET", f"/static/{bad}")
        assert st == 404 and json.loads(out) == {"error": "no such file"}, bad
    assert asgi_call(c.app, "GET", "/static/../server.py")[0] == 404


# -- the organiser's page ---------------------------------------------------------------------------------------------
def test_the_organiser_page_has_its_title_and_a_full_agreement_reads_100(study):
    c = _client(study)
    org = (study / "organiser.txt").read_text().strip()
    key = _key(study)
    a1 = _login(_client(study), study)
    real = next(i for i in _orders(study)["a1"] if not key[i].get("check"))
    side = "A" if key[real]["A"]["value"] > key[real]["B"]["value"] else "B"
    assert a1.post("/api/vote", json={"item": real, "choice": side}).status_code == 200
    r = c.get("/organiser", headers={"authorization": f"bearer {org}"})
    assert r.status_code == 200 and "<title>Memory study: organiser</title>" in r.text
    assert "<td>100 %</td>" in r.text and r.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("fields, status", [
    (8, 200), (9, 400),
])
def test_the_organiser_form_takes_at_most_eight_fields(study, sleeps, fields, status):
    org = (study / "organiser.txt").read_text().strip()
    body = urlencode([("token", org)] + [(f"k{i}", "v") for i in range(fields - 1)])
    r = _client(study).post("/organiser", content=body, headers={"content-type": FORM})
    assert r.status_code == status


def test_the_first_token_field_of_the_organiser_form_counts(study, sleeps):
    org = (study / "organiser.txt").read_text().strip()
    c = _client(study)
    r = c.post("/organiser", content=urlencode([("token", "wrong"), ("token", org)]), headers={"content-type": FORM})
    assert r.status_code == 403 and "not the organiser token" in r.text
    r = c.post("/organiser", content=urlencode([("token", org), ("token", "wrong")]), headers={"content-type": FORM})
    assert r.status_code == 200


@pytest.mark.parametrize("body", [b"[1]", b'"tok"', b'{"token": 5}', b'{"token": ["x"]}', b"{}"])
def test_an_organiser_json_body_without_a_string_token_is_a_plain_403(study, sleeps, body):
    r = _client(study).post("/organiser", content=body, headers=JSON)
    assert r.status_code == 403 and "organiser-login" in r.text and "not the organiser token" not in r.text
    assert sleeps == []


@pytest.mark.parametrize("token, status, slept", [
    ("", 403, []), ("x" * 257, 403, []), ("x" * 256, 403, [0.25]), ("ORG", 200, []),
])
def test_the_organiser_token_is_bounded_and_only_a_checked_wrong_one_is_delayed(study, sleeps, token, status, slept):
    org = (study / "organiser.txt").read_text().strip()
    r = _client(study).post("/organiser", content=urlencode({"token": org if token == "ORG" else token}),
                            headers={"content-type": FORM})
    assert r.status_code == status and sleeps == slept
    if status == 403:
        assert "not the organiser token" in r.text or token == ""


@pytest.mark.parametrize("token, slept", [("", []), ("x", [0.25]), ("x" * 256, [0.25]), ("x" * 257, [])])
def test_an_organiser_token_from_json_or_bearer_is_bounded_the_same_way(study, sleeps, token, slept):
    """An empty token (a JSON ``""`` or a bare ``Bearer``) is refused without the check; one character is checked."""
    c = _client(study)
    r = c.post("/organiser", json={"token": token})
    assert r.status_code == 403 and "not the organiser token" in r.text and sleeps == slept
    sleeps.clear()
    st, _, _, out = asgi_call(c.app, "GET", "/organiser", headers={"authorization": f"Bearer {token}  "})
    assert st == 403 and b"not the organiser token" in out and sleeps == slept


def test_a_malformed_organiser_request_names_the_problem_on_the_page(study):
    c = _client(study)
    r = c.post("/organiser", content=b"token=x", headers={"content-type": "text/plain"})
    assert r.status_code == 400 and "send the organiser form" in r.text and "organiser-table" not in r.text
    assert "<title>Memory study: organiser</title>" in r.text
    st, _, _, out = asgi_call(c.app, "POST", "/organiser", [b"t"], {"content-type": FORM,
                                                                     "content-length": str(KIB64 + 1)})
    assert st == 413 and b"request body over 65536 bytes" in out
    st, _, _, out = asgi_call(c.app, "POST", "/organiser", [b"{"], JSON)
    assert st == 400 and b"not valid JSON" in out


def test_an_empty_organiser_form_is_a_plain_403(study, sleeps):
    r = _client(study).post("/organiser", content=b"", headers={"content-type": FORM})
    assert r.status_code == 403 and "not the organiser token" not in r.text and sleeps == []


# -- serve ----------------------------------------------------------------------------------------------------------
class _Server:
    """uvicorn.Server, recorded: the config and the sockets it would serve on, without serving."""

    made: ClassVar[list[_Server]] = []

    def __init__(self, config):
        self.config = config
        _Server.made.append(self)

    def run(self, sockets):
        self.sockets = sockets


class _Socket(socket.socket):
    """A socket that records the options set on it and its listen backlog."""

    made: ClassVar[list[_Socket]] = []

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list[tuple] = []
        _Socket.made.append(self)

    def setsockopt(self, *a):
        self.calls.append(("setsockopt", *a))
        return super().setsockopt(*a)

    def listen(self, *a):
        self.calls.append(("listen", *a))
        return super().listen(*a)


@pytest.fixture
def fake_uvicorn(monkeypatch):
    uvicorn = pytest.importorskip("uvicorn")
    _Server.made, _Socket.made = [], []
    monkeypatch.setattr(uvicorn, "Server", _Server)
    monkeypatch.setattr(socket, "socket", _Socket)
    yield _Server.made
    for s in _Socket.made:
        s.close()


def test_serve_listens_on_a_free_port_and_announces_it_without_logs(study, fake_uvicorn):
    from harness.app.human.server import serve

    said: list[str] = []
    serve(study, port=0, announce=said.append)
    (srv,) = fake_uvicorn
    (sock,) = srv.sockets
    port = sock.getsockname()[1]
    assert sock.family == socket.AF_INET and sock.getsockname()[0] == "127.0.0.1" and port > 0
    # reusable at once after a kill -9, listening with a backlog of 128 before the URL is announced
    assert sock.calls == [("setsockopt", socket.SOL_SOCKET, socket.SO_REUSEADDR, 1), ("listen", 128)]
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    (line,) = said
    items = len(json.loads((study / "study.json").read_text())["items"])
    assert line.startswith(f"serving study study ({items} static items, 2 annotators) at http://127.0.0.1:{port}/ ")
    assert str(study / "organiser.txt") in line and str(study / "tokens.txt") in line
    assert (srv.config.log_level, srv.config.access_log, srv.config.server_header, srv.config.lifespan) == (
        "warning", False, False, "off")
    assert srv.config.app is not None and srv.config.app.state.study.dir == study.resolve()


def test_serve_listens_on_port_8765_by_default(study, fake_uvicorn):
    from evaluate.human.common import StudyError
    from harness.app.human.server import serve

    try:
        serve(study, announce=lambda s: None)
    except StudyError as exc:  # something else holds 8765 on this machine: the message names it
        assert "port=8765: cannot listen on 127.0.0.1:8765" in str(exc)
    else:
        assert fake_uvicorn[0].sockets[0].getsockname() == ("127.0.0.1", 8765)


def test_serve_on_ipv6_shows_the_host_in_brackets(study, fake_uvicorn):
    from harness.app.human.server import serve

    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    said: list[str] = []
    try:
        serve(study, host="::1", port=0, announce=said.append)
    except Exception as exc:  # noqa: BLE001 - a host without ::1 configured
        pytest.skip(f"::1 not available: {exc}")
    (sock,) = fake_uvicorn[0].sockets
    assert sock.family == socket.AF_INET6
    assert f"at http://[::1]:{sock.getsockname()[1]}/ " in said[0]


def test_serve_on_a_taken_port_is_a_clear_error_and_closes_its_socket(study, fake_uvicorn):
    from evaluate.human.common import StudyError
    from harness.app.human.server import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        _Socket.made.clear()
        with pytest.raises(StudyError, match=f"port={port}: cannot listen on 127.0.0.1:{port}"):
            serve(study, port=port, announce=lambda s: None)
    assert fake_uvicorn == [] and [s.fileno() for s in _Socket.made] == [-1]


def test_a_closed_study_refuses_votes_and_corrections_and_asks_nothing_more(study):
    """``human close`` while the server runs: the next vote and correction are a 409 naming the closed study, and
    ``/api/next`` gives no item and no answer to change, only when it closed; nothing is stored after the close."""
    from evaluate.human.store import close_study, read_votes

    c = _login(_client(study), study)
    order = _orders(study)["a1"]
    assert c.post("/api/vote", json={"item": order[0], "choice": _choice(study, order[0])}).status_code == 200
    when = close_study(study)
    r = c.post("/api/vote", json={"item": order[1], "choice": _choice(study, order[1])})
    assert r.status_code == 409 and "closed" in r.json()["error"]
    r = c.post("/api/correct", json={"item": order[0], "choice": "T"})
    assert r.status_code == 409 and "closed" in r.json()["error"]
    s = c.get("/api/next").json()
    assert (s["closed"], s["item"], s["last"], s["done"]) == (when, None, None, 1)
    assert [(v["item"], v["choice"]) for v in read_votes(study)] == [(order[0], _choice(study, order[0]))]
    assert close_study(study) == when  # closing again keeps the first time


def test_a_revoked_token_ends_its_session_and_opens_nothing(study):
    from evaluate.human.design import revoke_annotators

    c = _login(_client(study), study, "a2")
    order = _orders(study)["a2"]
    token = _tokens(study)["a2"]
    assert revoke_annotators(study, ["a2"]) == ["a2"]
    assert c.get("/api/next").status_code == 401  # the session ended at once: no restart needed
    assert c.post("/api/vote", json={"item": order[0], "choice": "T"}).status_code == 401
    r = _client(study).post("/api/login", json={"token": token})
    assert r.status_code == 401 and "revoked" in r.json()["error"]
    _login(_client(study), study, "a1")  # everyone else is untouched
    assert "a2\t" not in (study / "tokens.txt").read_text()
