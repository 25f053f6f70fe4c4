"""The human study and its annotation app against hostile input: request bodies bounded before they are read, a 4xx
for every malformed request, a blinding key nobody can regenerate from the runs, study secrets readable by their
owner only, and no study built from a video replaced after its evaluation."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.support.asgi import asgi_call
from tests.support.human_data import make_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("hruns"))


def _plan(runs, out, **kw):
    from evaluate.human.design import PlanRequest, plan_study

    return Path(plan_study(PlanRequest(runs=list(runs), metrics=["static"], seed=0, pairs=4, **kw), out)["dir"])


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


# -- the blinding key --------------------------------------------------------------------------------------------
def test_the_blinding_key_cannot_be_regenerated_from_the_runs_and_the_seed(runs, tmp_path):
    """``human plan`` with the default seed gave a byte-identical ``key.json`` and orders to anyone with the runs."""
    d1, d2 = _plan(runs, tmp_path / "s1"), _plan(runs, tmp_path / "s2")
    k1, k2 = json.loads((d1 / "key.json").read_text()), json.loads((d2 / "key.json").read_text())
    assert k1["design"]["seed"] == k2["design"]["seed"] == 0
    assert k1["design"]["secret"] != k2["design"]["secret"] and len(k1["design"]["secret"]) >= 32
    sides = [[(i["A"]["arm"], i["B"]["arm"]) for i in k["items"]] for k in (k1, k2)]
    orders = [[a["order"] for a in json.loads((d / "annotators.json").read_text())["annotators"]] for d in (d1, d2)]
    assert sides[0] != sides[1] or orders[0] != orders[1]
    # the recorded secret rebuilds the same study (reproducible by its owner)
    d3 = _plan(runs, tmp_path / "s3", secret=k1["design"]["secret"])
    assert (d3 / "key.json").read_bytes() == (d1 / "key.json").read_bytes()
    assert (d3 / "study.json").read_bytes() == (d1 / "study.json").read_bytes()


def test_study_secrets_are_the_owners_only(runs, tmp_path):
    """``key.json`` and ``votes.sqlite`` were world-readable."""
    pytest.importorskip("starlette")
    from harness.app.human.server import create_app

    old = os.umask(0o022)
    try:
        d = _plan(runs, tmp_path / "s")
        create_app(d)  # opens (creates) the vote store
    finally:
        os.umask(old)
    assert _mode(d / "key.json") == 0o600 and _mode(d / "tokens.txt") == 0o600
    assert _mode(d / "votes.sqlite") == 0o600
    assert _mode(d / "study.json") == 0o644  # the public side keeps the ordinary mode


def test_a_bad_secret_is_refused_before_anything_is_written(runs, tmp_path):
    from evaluate.human.common import StudyError

    with pytest.raises(StudyError, match="secret="):
        _plan(runs, tmp_path / "s", secret="../x")
    assert not (tmp_path / "s").exists()


# -- study inputs carry hashes checked before reuse -----------------------------------------------------------------
def _copies(runs, tmp_path) -> list:
    """Copies of the evaluated runs under ``tmp_path`` (to edit without touching the module's runs)."""
    for r in runs:
        shutil.copytree(r, tmp_path / r.name)
    return [tmp_path / r.name for r in runs]


def test_a_video_replaced_after_its_evaluation_never_reaches_a_study(runs, tmp_path):
    """``human plan`` transcoded a video replaced after its run finished; key.json kept the old hash and value."""
    from harness.errors import UserError

    copies = _copies(runs, tmp_path)
    videos = sorted(copies[0].rglob("video.mp4"))
    other = min(copies[1].rglob("video.mp4"))
    for v in videos:
        shutil.copyfile(other, v)  # a valid video, not the one that was evaluated
    with pytest.raises(UserError, match="video.mp4 sha256 differs") as exc:
        _plan(copies, tmp_path / "s")
    assert "metrics.json" in str(exc.value) and not (tmp_path / "s").exists()


def test_an_edited_metrics_json_never_picks_a_study_item(runs, tmp_path):
    from harness.errors import UserError

    copies = _copies(runs, tmp_path)
    m = min(copies[0].rglob("metrics.json"))
    data = json.loads(m.read_text())
    key = next(iter(data["metrics"]))
    data["metrics"][key]["value"] = 0.999
    m.write_text(json.dumps(data))
    with pytest.raises(UserError, match="no longer matches"):
        _plan(copies, tmp_path / "s")
    assert not (tmp_path / "s").exists()


# -- the annotation app: bounded bodies, 4xx for malformed requests -------------------------------------------------
@pytest.fixture(scope="module")
def app_study(runs, tmp_path_factory):
    pytest.importorskip("starlette")
    return _plan(runs, tmp_path_factory.mktemp("app") / "s")


def _asgi(app, method: str, path: str, chunks, headers: dict) -> tuple[int, int, dict, bytes]:
    """One request in this process (:func:`tests.support.asgi.asgi_call`)."""
    return asgi_call(app, method, path, chunks, headers)


def _asgi_post(app, path: str, chunks, headers: dict) -> tuple[int, int]:
    """POST ``chunks`` to ``app``; returns (status, number of chunks the app pulled)."""
    st, pulled, _, _ = _asgi(app, "POST", path, chunks, headers)
    return st, pulled


def test_a_huge_body_is_refused_before_it_is_read(app_study):
    """A 400 MB unauthenticated POST was read whole (53 -> 442 MB of memory) before its size was checked."""
    from harness.app.human.server import MAX_BODY, create_app

    app = create_app(app_study)
    block = b"x" * (1 << 20)
    # declared: refused before a byte is read
    st, pulled = _asgi_post(app, "/api/login", [block] * 400,
                            {"content-type": "application/json", "content-length": str(400 << 20)})
    assert st == 413 and pulled == 0
    # streamed without a length: refused once past the bound
    st, pulled = _asgi_post(app, "/api/login", [b"x" * 16384] * 1000, {"content-type": "application/json"})
    assert st == 413 and pulled <= MAX_BODY // 16384 + 1
    # the check can pass: a small body is read and answered
    st, _ = _asgi_post(app, "/api/login", [b'{"token": "nope"}'], {"content-type": "application/json"})
    assert st == 401


class _Client:
    """A logged-in annotator talking JSON to the app in this process (cookie kept)."""

    def __init__(self, app, token: str):
        self.app, self.cookie = app, ""
        st, _, h, _ = _asgi(app, "POST", "/api/login", [json.dumps({"token": token}).encode()],
                            {"content-type": "application/json"})
        assert st == 200
        self.cookie = h["set-cookie"].split(";")[0]

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        raw = [] if body is None else [json.dumps(body).encode()]
        st, _, _, out = _asgi(self.app, method, path, raw, {"content-type": "application/json",
                                                            "cookie": self.cookie})
        return st, json.loads(out)


@pytest.fixture
def client(app_study):
    from harness.app.human.server import create_app

    tok = dict(line.split("\t") for line in (app_study / "tokens.txt").read_text().splitlines())["a1"]
    return _Client(create_app(app_study), tok)


@pytest.mark.parametrize("body, needle", [
    ({"item": ["p001"], "choice": "A"}, "item"),
    ({"item": {"id": "p001"}, "choice": "A"}, "item"),
    ({"item": 7, "choice": "A"}, "item"),
    ({"item": None, "choice": "A"}, "item"),
    ("FIRST", "elapsed_ms"),
])
def test_malformed_votes_get_a_4xx_never_a_500(client, app_study, body, needle):
    """``/api/vote`` with a list or dict as ``item``, or a huge ``elapsed_ms``, answered 500."""
    first = client.call("GET", "/api/next")[1]["item"]["id"]
    if body == "FIRST":
        for huge in (10 ** 30, 2 ** 63, -1):
            st, out = client.call("POST", "/api/vote", {"item": first, "choice": "A", "elapsed_ms": huge})
            assert st == 400 and needle in out["error"], out
        st, out = client.call("POST", "/api/vote", {"item": first, "choice": "A", "elapsed_ms": 1500})
        assert st == 200 and out["status"] == "recorded"  # the check can pass
        return
    st, out = client.call("POST", "/api/vote", body)
    assert 400 <= st < 500 and needle in out["error"], out


@pytest.mark.parametrize("item", [["p001"], {"id": "p001"}, 7, None])
def test_a_malformed_correction_gets_a_4xx_never_a_500(client, item):
    """``/api/correct`` (the correction route) takes its body the way ``/api/vote`` does: a list or a mapping as
    ``item`` (not hashable) is a 400, not a 500."""
    st, out = client.call("POST", "/api/correct", {"item": item, "choice": "B"})
    assert st == 400 and "item" in out["error"], out


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"[1, 2", b'"just a string"', b"1e999999"])
def test_login_with_a_malformed_body_is_a_400(app_study, raw):
    from harness.app.human.server import create_app

    st, _ = _asgi_post(create_app(app_study), "/api/login", [raw], {"content-type": "application/json"})
    assert st == 400


@pytest.mark.parametrize("name", ["..", "a..b", "../x", "a/b", ".hidden"])
def test_a_study_name_passes_the_one_name_rule(runs, tmp_path, monkeypatch, capsys, name):
    """``human plan name=`` becomes a folder: the rule of every configured name (``harness.outputs.check_name``)."""
    from harness.app.human import main as human_main

    monkeypatch.chdir(tmp_path)
    code = human_main(["plan", *[f"run={r}" for r in runs], f"name={name}", "pairs=2"])
    err = capsys.readouterr().err
    assert code == 2 and "name=" in err and "Traceback" not in err, err
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("study.json"))
