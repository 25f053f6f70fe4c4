"""The annotation web app of a human study (Starlette on uvicorn; ``python -m harness human serve study=...``).

Pages: ``/`` (log in with an annotator token), ``/annotate`` (one item at a time: a static A/B pair or a dynamic
checklist, rendered by ``static/app.js``). JSON API: ``POST /api/login``, ``POST /api/logout``, ``GET /api/next``
(progress and the annotator's next unanswered item, in their seeded order), ``POST /api/vote``. Files:
``/media/<name>`` (only the names study.json lists, from the study's ``media/``), ``/static/app.{js,css}``.
The organiser's page ``/organiser`` (:func:`evaluate.human.analysis.progress` as an HTML table: per annotator
progress, last vote, corrections, attention checks, agreement with the metric so far) opens only with the token in
the study's ``organiser.txt``: POSTed from its form, or ``Authorization: Bearer <token>`` on a GET; anything else
is a 403.

What keeps the study blind and the host safe:

* nothing but ``study.json``'s public records, the listed media files and the two static files is ever served:
  there is no route that takes a path, names are checked against a fixed set, and the hidden key, tokens, votes
  and runs are never read by an annotator's request; only the organiser's page (behind its own token, which no
  annotator has) reads the key, and it shows per annotator counts and one agreement share, never an arm, a run, a
  case or an item;
* the token is sent once in a POST body and exchanged for a random session id (HttpOnly, SameSite=Strict cookie;
  only its sha256 is stored); no token or session id is logged, and uvicorn's access log is off;
* bound to 127.0.0.1 by default, and then only ``Host: 127.0.0.1 / localhost`` is accepted (no DNS rebinding);
  every response carries a strict Content-Security-Policy (no inline script, nothing from other origins).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

# The web framework: this module is imported only by ``human serve`` (after it checked that the ``human`` extra is
# installed) and the app's tests, so nothing else pays for starlette.
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evaluate.human.common import (
    ANNOTATORS_FILE,
    DB_FILE,
    MEDIA_DIR,
    MEDIA_NAME,
    ORGANISER_FILE,
    STUDY_FILE,
    StudyError,
    token_hash,
)
from evaluate.human.store import StudyClosed, TokenRevoked, VoteError, VoteStore, study_hash

STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
COOKIE = "hs_session"
MAX_BODY = 64 * 1024  # bytes of a request body; a longer one is refused before it is read (413)


class BodyTooLarge(VoteError):
    """A request body over :data:`MAX_BODY` (declared or sent): refused with 413 before the rest is read."""
LOOPBACK = ("127.0.0.1", "localhost", "::1")
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "media-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}

_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/static/app.css">
</head><body data-page="{page}"><header><h1>{title}</h1><div id="status"></div></header><main id="main">{body}</main>
<script src="/static/app.js"></script></body></html>"""
_LOGIN = """<form id="login" autocomplete="off"><p>Enter the token you were given.</p>
<label for="token">Token</label> <input id="token" name="token" type="password" autofocus required>
<button id="login-button" type="submit">Start</button><p id="login-error" class="error" role="alert"></p></form>"""
#: the organiser's page: no script (a plain form POST; CSP ``form-action 'self'`` allows it)
_ORGANISER_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/static/app.css">
</head><body data-page="organiser"><header><h1>{title}</h1></header><main id="main">{body}</main></body></html>"""
_ORGANISER_LOGIN = """<form id="organiser-login" method="post" action="/organiser" autocomplete="off">
<p>Enter the organiser token (the line in the study folder's organiser.txt).</p>
<label for="token">Organiser token</label> <input id="token" name="token" type="password" autofocus required>
<button type="submit">Show progress</button><p class="error" role="alert">{error}</p></form>"""


class Study:
    """The public side of a study folder: items, media names, annotators (token hashes and orders)."""

    def __init__(self, study_dir: Path):
        from harness.io import read_json

        self.dir = Path(study_dir).resolve()
        for f in (STUDY_FILE, ANNOTATORS_FILE):
            if not (self.dir / f).is_file():
                raise StudyError(f"{self.dir}: {f} is missing; plan the study first (python -m harness human plan)")
        self.public = read_json(self.dir / STUDY_FILE)
        self.items = {i["id"]: i for i in self.public["items"]}
        self.kind = self.public["kind"]
        ann = read_json(self.dir / ANNOTATORS_FILE)["annotators"]
        self.hashes = {a["id"]: a["token_sha256"] for a in ann}
        self.orders = {a["id"]: list(a["order"]) for a in ann}
        self.media: set[str] = set()
        for it in self.public["items"]:
            names = [it["clip"]] if it["kind"] == "dynamic" else [*it["clips"].values(), *it["first_view"]]
            for n in names:
                if not MEDIA_NAME.match(n) or not (self.dir / MEDIA_DIR / n).is_file():
                    raise StudyError(f"{self.dir}: media file {n!r} of item {it['id']} is missing or misnamed; plan "
                                     "the study again")
                self.media.add(n)
        self.store = VoteStore(self.dir / DB_FILE, study_hash(self.dir / STUDY_FILE))
        org = self.dir / ORGANISER_FILE  # only its hash is kept, like the annotators' tokens
        self.organiser_sha256 = token_hash(org.read_text().strip()) if org.is_file() else None

    def annotator_for(self, token: str) -> str | None:
        """The annotator whose token this is (every hash compared in constant time), else None."""
        h = hashlib.sha256(token.encode()).hexdigest()
        found = None
        for aid, want in self.hashes.items():
            if hmac.compare_digest(h, want):
                found = aid
        return found

    def is_organiser(self, token: str) -> bool:
        """Whether ``token`` is the organiser's (sha256 compared in constant time); False without organiser.txt."""
        return self.organiser_sha256 is not None and hmac.compare_digest(token_hash(token), self.organiser_sha256)

    def payload(self, item_id: str) -> dict[str, Any]:
        """What the page gets for an item: its public record with media names as URLs."""
        it: dict[str, Any] = json.loads(json.dumps(self.items[item_id]))
        if it["kind"] == "dynamic":
            it["clip"] = f"/media/{it['clip']}"
        else:
            it["clips"] = {k: f"/media/{v}" for k, v in it["clips"].items()}
            it["first_view"] = [f"/media/{v}" for v in it["first_view"]]
        return it

    def next_for(self, annotator: str) -> tuple[int, int, str | None]:
        """(done, total, next unanswered item in this annotator's order or None)."""
        done = self.store.done(annotator)
        order = self.orders[annotator]
        nxt = next((i for i in order if i not in done), None)
        return sum(i in done for i in order), len(order), nxt


def _err(status: int, msg: str) -> JSONResponse:
    return JSONResponse({"error": msg}, status_code=status, headers={"Cache-Control": "no-store"})


def _status_of(exc: VoteError) -> int:
    """The HTTP status of a refused vote: 413 too large, 409 the study is closed, 401 a revoked token, 400 else."""
    if isinstance(exc, BodyTooLarge):
        return 413
    if isinstance(exc, StudyClosed):
        return 409
    return 401 if isinstance(exc, TokenRevoked) else 400


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def _body_json(request: Request) -> Any:
    """The JSON body, read only up to :data:`MAX_BODY` bytes (:func:`body_bytes`)."""
    if _content_type(request) != "application/json":
        raise VoteError("send application/json")
    raw = await _body_bytes(request)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # also a body that is not UTF-8, or nested deeper than the parser goes
        raise VoteError("not valid JSON") from None


async def _body_bytes(request: Request) -> bytes:
    """The body, read only up to :data:`MAX_BODY` bytes: a larger declared ``Content-Length`` is refused
    before a byte is read, a larger streamed body as soon as it passes the bound (a 400 MB POST costs nothing)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise BodyTooLarge(f"request body over {MAX_BODY} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise BodyTooLarge(f"request body over {MAX_BODY} bytes")
    return bytes(raw)


async def _item_body(request: Request) -> tuple[dict[str, Any], str]:
    """The JSON object of a vote or a correction, and its item id (:class:`VoteError`, a 4xx, for anything
    else: a body over the limit, not an object, an item that is not a string, which a list or a mapping is)."""
    data = await _body_json(request)
    if not isinstance(data, dict):
        raise VoteError("send a JSON object")
    item = data.get("item")
    if not isinstance(item, str):
        raise VoteError("item: the id of an item, a string")
    return data, item


async def _organiser_token(request: Request) -> str | None:
    """The token of an organiser request: ``Authorization: Bearer`` (any method), else on a POST the form's
    (or a JSON object's) ``token`` field; None when there is none. Raises :class:`VoteError` (400 / 413) for
    a malformed or oversized body."""
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    if request.method != "POST":
        return None
    ctype = _content_type(request)
    if ctype == "application/json":
        data = await _body_json(request)
        token = data.get("token") if isinstance(data, dict) else None
    elif ctype == "application/x-www-form-urlencoded":
        raw = await _body_bytes(request)
        try:
            fields = parse_qs(raw.decode("ascii"), strict_parsing=bool(raw), max_num_fields=8)
        except (UnicodeDecodeError, ValueError):
            raise VoteError("token: a form with one token field") from None
        token = fields.get("token", [None])[0]
    else:
        raise VoteError("send the organiser form (application/x-www-form-urlencoded) or application/json")
    return token if isinstance(token, str) else None


class _Site:
    """The annotation app's endpoints for one study (``study``, and the pages' ``title``): each public method is
    one route's handler. Endpoints that only read the session database are plain methods: Starlette runs them in
    its worker pool, so no SQLite call blocks the event loop."""

    def __init__(self, study: Study) -> None:
        self.study = study
        self.title = "Memory study" if study.kind == "static" else "Event study"

    def who(self, request: Request) -> str | None:
        aid = self.study.store.session(request.cookies.get(COOKIE))
        return aid if aid in self.study.orders else None

    def page(self, name: str, body: str) -> HTMLResponse:
        return HTMLResponse(_PAGE.format(title=self.title, page=name, body=body), headers={"Cache-Control": "no-store"})

    def index(self, request: Request) -> Response:
        if self.who(request):
            return RedirectResponse("/annotate", status_code=303)
        return self.page("login", _LOGIN)

    def annotate(self, request: Request) -> Response:
        if not self.who(request):
            return RedirectResponse("/", status_code=303)
        return self.page("annotate", "<p class='loading'>Loading...</p>")

    def login_sync(self, token: str) -> str | None:
        aid = self.study.annotator_for(token)
        if aid is None:
            time.sleep(0.25)  # slows guessing; runs in the worker pool, the event loop stays free
        return aid

    async def login(self, request: Request) -> Response:
        try:
            data = await _body_json(request)
        except VoteError as exc:
            return _err(413 if isinstance(exc, BodyTooLarge) else 400, str(exc))
        token = data.get("token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not 0 < len(token) <= 256:
            return _err(400, "token: give your token")
        aid = await run_in_threadpool(self.login_sync, token)
        if aid is None:
            return _err(401, "unknown token")
        try:
            sid = await run_in_threadpool(self.study.store.new_session, aid)
        except TokenRevoked as exc:
            return _err(401, str(exc))
        r = JSONResponse({"annotator": aid})
        r.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/", max_age=30 * 86400)
        return r

    def logout(self, request: Request) -> Response:
        self.study.store.end_session(request.cookies.get(COOKIE))
        r = JSONResponse({"ok": True})
        r.delete_cookie(COOKIE, path="/")
        return r

    def state(self, aid: str) -> dict[str, Any]:
        done, total, nxt = self.study.next_for(aid)
        closed = self.study.store.closed()
        if closed:  # a closed study asks nothing more, and no answer can be changed
            return {"annotator": aid, "done": done, "total": total, "kind": self.study.kind, "closed": closed,
                    "instructions": "", "item": None, "last": None}
        last = self.study.store.last_vote(aid)  # the answer that may still be changed (before the next one)
        return {"annotator": aid, "done": done, "total": total, "kind": self.study.kind, "closed": None,
                "instructions": self.study.public.get("instructions", ""),
                "item": self.study.payload(nxt) if nxt else None,
                "last": None if last is None else {"item": self.study.payload(last["item"]), "choice": last["choice"],
                                                   "started": last["started"], "answers": last["answers"]}}

    async def next_item(self, request: Request) -> Response:
        aid = self.who(request)
        if not aid:
            return _err(401, "log in first")
        return JSONResponse(await run_in_threadpool(self.state, aid), headers={"Cache-Control": "no-store"})

    async def vote(self, request: Request) -> Response:
        aid = self.who(request)
        if not aid:
            return _err(401, "log in first")
        try:
            data, item = await _item_body(request)
            if item not in self.study.items or item not in self.study.orders[aid]:
                return _err(403, "item: not one of your items")
            status, _ = await run_in_threadpool(self.study.store.record, aid, item, self.study.items[item]["kind"],
                                                data, data.get("client_id"), data.get("elapsed_ms"))
        except VoteError as exc:
            return _err(_status_of(exc), str(exc))
        done, total, _ = await run_in_threadpool(self.study.next_for, aid)
        return JSONResponse({"status": status, "item": item, "done": done, "total": total},
                            headers={"Cache-Control": "no-store"})

    async def correct(self, request: Request) -> Response:
        """Change the answer of the annotator's last item (the store keeps the audit trail)."""

        aid = self.who(request)
        if not aid:
            return _err(401, "log in first")
        try:
            data, item = await _item_body(request)
            if item not in self.study.items or item not in self.study.orders[aid]:
                return _err(403, "item: not one of your items")
            await run_in_threadpool(self.study.store.correct, aid, item, self.study.items[item]["kind"], data)
        except VoteError as exc:
            return _err(409 if "only your last answer" in str(exc) else _status_of(exc), str(exc))
        done, total, _ = await run_in_threadpool(self.study.next_for, aid)
        return JSONResponse({"status": "corrected", "item": item, "done": done, "total": total},
                            headers={"Cache-Control": "no-store"})

    def media(self, request: Request) -> Response:
        name = request.path_params["name"]
        if not self.who(request):
            return _err(401, "log in first")
        if name not in self.study.media:  # a fixed set of plain names: no path ever reaches the filesystem
            return _err(404, "no such file")
        return FileResponse(self.study.dir / MEDIA_DIR / name, headers={"Cache-Control": "private, max-age=3600"})

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return _err(404, "no such file")
        return FileResponse(STATIC_DIR / name, media_type=STATIC_FILES[name], headers={"Cache-Control": "no-cache"})

    def organiser_page(self, status: int, body: str) -> HTMLResponse:
        return HTMLResponse(_ORGANISER_PAGE.format(title=f"{self.title}: organiser", body=body), status_code=status,
                            headers={"Cache-Control": "no-store"})

    def organiser_denied(self, error: str = "") -> HTMLResponse:
        return self.organiser_page(403, _ORGANISER_LOGIN.format(error=html.escape(error)))

    def organiser_check(self, token: str) -> bool:
        ok = self.study.is_organiser(token)
        if not ok:
            time.sleep(0.25)  # slows guessing, as at the annotators' login (in the worker pool)
        return ok

    def organiser_table(self) -> str:
        """The organiser's table from :func:`evaluate.human.analysis.progress` (annotator ids, counts and item ids
        only: never an arm), with its warnings (:func:`~evaluate.human.analysis.flags`) above it: implausibly fast
        annotators, failed attention checks by item, revoked tokens."""
        from evaluate.human.analysis import flags, progress

        rows = progress(self.study.dir)
        head = ("<tr><th>Annotator</th><th>Answered</th><th>Assigned</th><th>Last vote (UTC)</th>"
                "<th>Answers changed</th><th>Median time per answer</th><th>Too fast</th><th>Checks passed</th>"
                "<th>Checks failed</th><th>Agreement with the metric</th><th>Decisive votes</th></tr>")
        cells = []
        for r in rows:
            agree = "-" if r["agree_with_metric"] is None else f"{100 * r['agree_with_metric']:.0f} %"
            fast = f"{r['fast_votes']} of {r['timed_votes']}" + (" (flagged)" if r["too_fast"] else "")
            failed = ", ".join(r["failed_items"]) or "0"
            vals = [r["annotator"] + (" (revoked)" if r["revoked_utc"] else ""), r["done"], r["total"],
                    (r["last_vote_utc"] or "-")[:19], r["corrected"],
                    "-" if r["median_s"] is None else f"{r['median_s']:.1f} s", fast, r["checks_passed"], failed,
                    agree, r["decisive_votes"]]
            cls = " class='flag'" if r["too_fast"] or r["failed_items"] else ""
            cells.append(f"<tr data-annotator='{html.escape(r['annotator'])}'{cls}>" +
                         "".join(f"<td>{html.escape(str(v))}</td>" for v in vals) + "</tr>")
        done, total = sum(r["done"] for r in rows), sum(r["total"] for r in rows)
        closed = self.study.store.closed()
        state = f"Closed at {closed} UTC: no vote is accepted." if closed else "Open."
        warn = "".join(f"<li>{html.escape(x)}</li>" for x in flags(rows))
        n = len(rows)
        return (f"<p id='organiser-total'>{state} {done} of {total} answers in ({n} annotator{'' if n == 1 else 's'}). "
                "Agreement: the share of an annotator's A or B votes on real pairs that side with the metric (static "
                "studies). Too fast: answers given before half of their clip could play. Reload to refresh.</p>"
                + (f"<ul id='organiser-flags' class='error'>{warn}</ul>" if warn else "")
                + "<table id='organiser-table'>" + head + "".join(cells) + "</table>")

    async def organiser(self, request: Request) -> Response:
        try:
            token = await _organiser_token(request)
        except VoteError as exc:
            return self.organiser_page(413 if isinstance(exc, BodyTooLarge) else 400, html.escape(str(exc)))
        if self.study.organiser_sha256 is None:
            return self.organiser_denied("this study has no organiser token: create one with python -m harness human "
                                    "tokens study=<study> organiser=new, then restart human serve")
        if token is None:
            return self.organiser_denied()
        if not 0 < len(token) <= 256 or not await run_in_threadpool(self.organiser_check, token):
            return self.organiser_denied("not the organiser token")
        return self.organiser_page(200, await run_in_threadpool(self.organiser_table))

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def favicon(self, request: Request) -> Response:
        """Browsers ask for one; an empty answer keeps their consoles clean."""
        return Response(status_code=204)

    def routes(self) -> list[Route]:
        """Every route of the app, each to its method."""
        return [Route("/", self.index), Route("/annotate", self.annotate),
                Route("/api/login", self.login, methods=["POST"]), Route("/api/logout", self.logout, methods=["POST"]),
                Route("/api/next", self.next_item), Route("/api/vote", self.vote, methods=["POST"]),
                Route("/api/correct", self.correct, methods=["POST"]), Route("/media/{name}", self.media),
                Route("/organiser", self.organiser, methods=["GET", "POST"]), Route("/static/{name}", self.static),
                Route("/healthz", self.health), Route("/favicon.ico", self.favicon)]


def create_app(study_dir: Path, host: str = "127.0.0.1") -> Starlette:
    """The Starlette application serving ``study_dir``."""
    site = _Site(Study(study_dir))
    middleware = [Middleware(_SecurityHeaders)]  # outermost: its headers reach every response, a Host refusal too
    if host in LOOPBACK:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]"]))
    app = Starlette(routes=site.routes(), middleware=middleware)
    app.state.study = site.study
    return app


class _SecurityHeaders:
    """ASGI middleware: the headers of :data:`HEADERS` on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {k.lower() for k, _ in headers}
                message["headers"] = headers + [
                    (k.lower().encode(), v.encode()) for k, v in HEADERS.items() if k.lower().encode() not in have]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def serve(study_dir: Path, host: str = "127.0.0.1", port: int = 8765,
          announce: Callable[[str], object] = print) -> None:
    """Run the app until interrupted. ``port=0`` picks a free port; the URL is announced once it listens."""
    import socket

    import uvicorn

    app = create_app(study_dir, host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart after kill -9 gets the same port
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StudyError(f"port={port}: cannot listen on {host}:{port} ({exc.strerror}); choose another port= "
                         "(port=0 picks a free one)") from None
    sock.listen(128)
    real = sock.getsockname()[1]
    study = app.state.study
    shown = f"[{host}]" if ":" in host else host
    items, people = len(study.items), len(study.orders)
    announce(f"serving study {study.dir.name} ({items} {study.kind} item{'' if items == 1 else 's'}, {people} "
             f"annotator{'' if people == 1 else 's'}) at http://{shown}:{real}/  (tokens: {study.dir / 'tokens.txt'}; "
             f"organiser page: /organiser with the token in {study.dir / ORGANISER_FILE}; Ctrl-C stops)")
    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
