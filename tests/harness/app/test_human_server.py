"""The annotation server over HTTP (``python -m harness human serve`` as a subprocess): tokens, sessions, the
served files (nothing outside the study's listed media, however the path is spelt), the Host check on loopback,
security headers, vote validation and idempotency, and the CLI's errors. No browser: see test_human_browser.py."""

from __future__ import annotations

import http.client
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the annotation app needs the human extra (pip install -e '.[human]')")
pytest.importorskip("uvicorn", reason="the annotation app needs the human extra (pip install -e '.[human]')")

from tests.support import ROOT, run_cli  # noqa: E402
from tests.support.human_data import make_runs  # noqa: E402
from tests.support.human_sim import StudyServer, tokens  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from evaluate.human.design import PlanRequest, plan_study

    root = tmp_path_factory.mktemp("srv")
    runs = make_runs(root)
    return Path(plan_study(PlanRequest(runs, ["static"], seed=0), root / "studies" / "s")["dir"])


@pytest.fixture(scope="module")
def server(study):
    with StudyServer(study) as srv:
        yield srv


class Client:
    def __init__(self, port: int):
        self.port, self.cookie = port, None

    def req(self, method: str, path: str, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = {"Content-Type": "application/json", **(headers or {})}
        if self.cookie:
            h["Cookie"] = self.cookie
        c.request(method, path, body=None if body is None else json.dumps(body), headers=h)
        r = c.getresponse()
        data = r.read()
        sc = r.getheader("set-cookie")
        if sc and "hs_session=" in sc:
            self.cookie = sc.split(";")[0]
        c.close()
        return r.status, data, {k.lower(): v for k, v in r.getheaders()}


def test_login_sessions_and_votes(server, study):
    c = Client(server.port)
    assert c.req("GET", "/api/next")[0] == 401
    assert c.req("POST", "/api/login", {"token": "nope"})[0] == 401
    tok = tokens(study)["a2"]
    st, body, h = c.req("POST", "/api/login", {"token": tok})
    assert st == 200 and json.loads(body) == {"annotator": "a2"}
    assert "httponly" in h["set-cookie"].lower() and "samesite=strict" in h["set-cookie"].lower()
    assert tok not in h["set-cookie"]  # the token is exchanged for a session id
    st, body, h = c.req("GET", "/api/next")
    nxt = json.loads(body)
    order = json.loads((study / "annotators.json").read_text())["annotators"][1]["order"]
    assert st == 200 and nxt["item"]["id"] == order[0] and (nxt["done"], nxt["total"]) == (0, len(order))
    assert "default-src 'none'" in h["content-security-policy"] and h["x-content-type-options"] == "nosniff"
    item = nxt["item"]["id"]
    assert json.loads(c.req("POST", "/api/vote", {"item": item, "choice": "B", "client_id": "x"})[1])["status"] == \
        "recorded"
    st, body, _ = c.req("POST", "/api/vote", {"item": item, "choice": "A", "client_id": "x"})
    assert st == 200 and json.loads(body)["status"] == "duplicate"
    assert json.loads(c.req("GET", "/api/next")[1])["item"]["id"] == order[1]  # resumes in the seeded order
    assert c.req("POST", "/api/vote", {"item": "p999", "choice": "A"})[0] == 403
    st, body, _ = c.req("POST", "/api/vote", {"item": order[1], "choice": "left"})
    assert st == 400 and b"choice" in body
    assert c.req("POST", "/api/vote", "not json", headers={"Content-Type": "text/plain"})[0] == 400
    c.req("POST", "/api/logout", {})
    assert c.req("GET", "/api/next")[0] == 401
    assert tok.encode() not in server.log  # nothing of the token in what the server printed


def test_nothing_outside_the_listed_media_is_served(server, study):
    c = Client(server.port)
    c.req("POST", "/api/login", {"token": tokens(study)["a1"]})
    listed = sorted(p.name for p in (study / "media").iterdir())
    assert c.req("GET", f"/media/{listed[0]}")[0] == 200
    st, _, h = c.req("GET", f"/media/{listed[0]}", headers={"Range": "bytes=0-99"})
    assert st == 206 and h["content-range"].startswith("bytes 0-99/")
    for path in ["/media/key.json", "/media/..%2fkey.json", "/media/%2e%2e/key.json", "/media/../key.json",
                 "/media/..%5ckey.json", "/static/..%2fserver.py", "/static/../../key.json", "/key.json",
                 "/tokens.txt", "/votes.sqlite", "/media/", "/media/%2Fetc%2Fpasswd", "/static/__init__.py"]:
        st, body, _ = c.req("GET", path)
        assert st == 404, path
        assert b"token" not in body and b"alpha" not in body, path
    anon = Client(server.port)
    assert anon.req("GET", f"/media/{listed[0]}")[0] == 401  # media need a session too
    assert anon.req("GET", "/static/app.js")[0] == 200


def test_loopback_server_refuses_foreign_host_headers(server):
    c = Client(server.port)
    assert c.req("GET", "/healthz")[0] == 200
    assert c.req("GET", "/healthz", headers={"Host": "attacker.example"})[0] == 400


def test_cli_errors_are_one_line_with_exit_2(study, tmp_path):
    r = run_cli(["human", "serve", "study=does-not-exist"], tmp_path)
    assert r.returncode == 2 and "no study.json" in r.stderr and "Traceback" not in r.stderr
    r = run_cli(["human", "plan", "run=a", "colour=red"], tmp_path)
    assert r.returncode == 2 and "unknown option colour=" in r.stderr
    r = run_cli(["human", "frobnicate"], tmp_path)
    assert r.returncode == 2 and "unknown command" in r.stderr
    r = run_cli(["human", "plan", f"run={study}", "seed=-1"], tmp_path)
    assert r.returncode == 2


def test_list_does_not_import_the_web_framework(tmp_path):
    import subprocess

    code = ("import sys, atexit\n"
            "atexit.register(lambda: print('WEB=' + str(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'starlette', 'uvicorn'})), file=sys.stderr))\n"
            "sys.argv = ['harness', 'list']\nfrom harness.app.cli import main\nmain()\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "WEB=[]" in r.stderr
    assert ROOT.exists()
