"""Driving an OpenAI-compatible judge server robustly, reproducibly and without leaking the key.

One :class:`JudgeSession` per evaluation run holds the client, the pre-flight result (what the server serves) and
the run's failure budget. Per item, :meth:`JudgeSession.judge` looks for a stored answer first (``<item>/judge/``,
keyed by the request key), else sends the request with retries (exponential backoff with jitter on timeouts,
dropped connections, 429 and 5xx), parses the reply strictly, re-asks once to repair a malformed reply, and stores
the exchange. Errors that no retry can fix (401, an unknown model name, an unreachable server) stop the run's
judge calls at once with that reason; the evaluation of everything else goes on.

Files beside each item (``judge/``): ``<key>.request.json`` (the body, images replaced by their digest and
written once as ``frames/<digest>.jpg``), ``<key>.attempts.jsonl`` (every attempt: status, error, the raw reply)
and ``<key>.answer.json`` (only when the answer parsed: the reusable result).

Fallbacks: a server may refuse an optional field of the request (HTTP 400 / 422 naming it; e.g. a server that does
not implement ``response_format``). The session then drops that field for the rest of the run and asks again, and
says so: a warning in the log, a ``fallback`` line in the attempts, ``fallbacks`` in the stored request and answer
and in each metric's recorded judge settings (``metrics.json``). It never changes what it asks silently.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from .parse import ParseFailure, parse_reply
from .prompt import Body, JudgeInput, build_request, repair_message
from .settings import JudgeSettings


def _openai() -> Any:
    """The ``openai`` client library; :class:`MissingDependencyError` naming the ``eval`` extra without it."""
    try:
        import openai
    except ImportError as exc:
        from harness.errors import MissingDependencyError

        raise MissingDependencyError("the checklist judge (evaluate.judge)", "eval", str(exc)) from exc
    return openai

#: Sent when ``api_key_env`` is unset: the client needs some value; servers without auth ignore it.
NO_KEY = "EMPTY"
T = TypeVar("T")
#: where a request's attempts are logged (``<key>.attempts.jsonl``): one JSON record per call
AttemptLog = Callable[[dict[str, Any]], None]


#: Optional request fields a server may refuse, and what the request falls back to without them.
FALLBACKS = {
    "response_format": "the prompt-only JSON contract (the prompt states the reply's format either way; the reply "
                       "is parsed as strictly)",
}


class JudgeError(RuntimeError):
    """A judge request failed. ``transient``: worth retrying now (timeout, dropped connection, 429, 5xx);
    ``retryable``: a later run may succeed; ``fatal``: stops every further request of this run; ``status``: the
    HTTP status when there was one."""

    def __init__(self, reason: str, retryable: bool = True, fatal: bool = False, transient: bool = False,
                 status: Optional[int] = None, detail: str = ""):
        super().__init__(reason)
        self.retryable, self.fatal, self.transient, self.status = retryable, fatal, transient, status
        self.detail = detail  # the server's own words (response body, key scrubbed), for the fallback check


@dataclass
class Verdict:
    """Outcome of one item's judge request."""

    ok: bool
    started: bool = False
    answers: list[str] = field(default_factory=list)  # "yes" | "no" per question, q1..q8
    reason: str = ""
    retryable: bool = False
    key: str = ""
    server_model: Optional[str] = None
    cached: bool = False
    repaired: bool = False
    fallbacks: dict[str, str] = field(default_factory=dict)  # request field dropped -> why (the server refused it)


def no_server_reason(settings: JudgeSettings) -> str:
    """Why nothing is judged when ``evaluate.judge.base_url`` is not set."""
    return ("no judge server configured: set evaluate.judge.base_url to an OpenAI-compatible server "
            f"(vLLM / SGLang) serving {settings.model!r}; see docs/judge.md")


class JudgeSession:
    """A run's connection to the judge server (thread-safe: items may be judged concurrently)."""

    def __init__(self, settings: JudgeSettings):
        self.settings = settings
        self._lock = threading.Lock()
        self._client: Any = None
        self._preflight_done = False
        self.served: Optional[list[str]] = None
        self.fatal: Optional[str] = None
        self.failures: list[str] = []
        self.server_models: set[str] = set()
        self._verdicts: dict[str, Verdict] = {}  # this run's outcome per request key (a failure is not re-sent)
        self.refused: dict[str, str] = {}  # optional field -> the server's refusal, learned this run (FALLBACKS)

    # -- secrets -------------------------------------------------------------------------------------------------
    def _key(self) -> str:
        return os.environ.get(self.settings.api_key_env) or NO_KEY

    def scrub(self, text: Any) -> str:
        """``text`` with the key's value masked (defence in depth: nothing we store should contain it)."""
        s = str(text)
        k = os.environ.get(self.settings.api_key_env)
        return s.replace(k, "***") if k and len(k) >= 4 else s

    def client(self) -> Any:
        if self._client is None:
            openai = _openai()
            self._client = openai.OpenAI(base_url=self.settings.base_url, api_key=self._key(),
                                         timeout=float(self.settings.timeout), max_retries=0)
        return self._client

    # -- errors --------------------------------------------------------------------------------------------------
    def _classify(self, exc: BaseException) -> JudgeError:
        openai = _openai()
        s = self.settings
        if isinstance(exc, openai.AuthenticationError):
            return JudgeError(f"401 unauthorized at {s.base_url}: the server rejected the key read from "
                              f"${s.api_key_env}; export the right key in that variable", fatal=True, status=401)
        if isinstance(exc, openai.PermissionDeniedError):
            return JudgeError(f"403 forbidden at {s.base_url} for model {s.model!r}", fatal=True, status=403)
        if isinstance(exc, openai.NotFoundError):
            return JudgeError(f"404 from {s.base_url}: model {s.model!r} is not served there (or the URL lacks "
                              "/v1); `python -m harness judge check` lists what it serves", fatal=True, status=404)
        if isinstance(exc, openai.APITimeoutError):
            return JudgeError(f"timed out after {s.timeout:g} s", transient=True)
        if isinstance(exc, openai.APIConnectionError):
            return JudgeError(f"connection failed ({type(exc.__cause__ or exc).__name__})", transient=True)
        if isinstance(exc, openai.RateLimitError):
            return JudgeError("429 rate limited", transient=True, status=429)
        if isinstance(exc, openai.InternalServerError):
            code = getattr(exc, "status_code", None)
            return JudgeError(f"server error {code or '5xx'}", transient=True, status=code)
        if isinstance(exc, openai.APIStatusError):
            body = self.scrub(getattr(getattr(exc, "response", None), "text", "") or exc.message)[:500]
            return JudgeError(f"HTTP {exc.status_code}: {body[:200]}", retryable=False, status=exc.status_code,
                              detail=body)
        return JudgeError(f"{type(exc).__name__}: {self.scrub(exc)[:200]}")

    def _with_retries(self, what: str, fn: Callable[[], T], key: str, log: AttemptLog) -> T:
        s = self.settings
        rng = random.Random(f"{key}:{what}")  # jitter seeded by the request: reruns wait alike
        for attempt in range(s.max_retries + 1):
            t0 = time.perf_counter()
            try:
                out = fn()
                return out
            except Exception as exc:  # noqa: BLE001 - classified below, never swallowed silently
                err = exc if isinstance(exc, JudgeError) else self._classify(exc)
                log({"call": what, "attempt": attempt, "status": "error", "error": str(err),
                     "seconds": round(time.perf_counter() - t0, 3)})
                if not err.transient or attempt == s.max_retries:
                    if err.transient:
                        raise JudgeError(f"{err} (gave up after {attempt + 1} attempts)") from None
                    raise err from None
                time.sleep(min(s.max_backoff_s, s.backoff_s * 2**attempt) * (0.5 + rng.random()))
        raise AssertionError("unreachable")

    # -- server ----------------------------------------------------------------------------------------------------
    def preflight(self) -> Optional[str]:
        """Once per run: reach the server and check it serves the model. Returns the run-level failure or None."""
        with self._lock:
            if self._preflight_done:
                return self.fatal
            self._preflight_done = True
            s = self.settings
            if not s.base_url:
                self.fatal = no_server_reason(s)
                return self.fatal
            openai = _openai()  # a missing client library is said here, once, naming the extra
            try:
                served = self._with_retries("models", lambda: [m.id for m in self.client().models.list()],
                                            "preflight", lambda rec: None)
            except JudgeError as exc:
                if exc.status == 404:
                    return None  # some servers have no /models: the first request will tell
                self.fatal = f"judge server {s.base_url} unusable: {exc}"
                return self.fatal
            except openai.OpenAIError as exc:  # pragma: no cover - defensive
                self.fatal = f"judge server {s.base_url} unusable: {self.scrub(exc)}"
                return self.fatal
            self.served = served
            if served and s.model not in served:
                self.fatal = (f"model {s.model!r} is not served by {s.base_url}; it serves {served}; set "
                              "evaluate.judge.model")
            return self.fatal

    def _spent(self) -> Optional[str]:
        b = self.settings.failure_budget
        if len(self.failures) >= b:
            return (f"judge failure budget spent: {len(self.failures)} item(s) failed (budget "
                    f"{b}); first: {self.failures[0]}; the remaining items were not sent (re-run to retry)")
        return None

    def without_refused(self, body: Body) -> tuple[Body, dict[str, str]]:
        """``body`` without the fields this run's server refused, and {field: why} for those dropped."""
        with self._lock:
            dropped = {f: self.refused[f] for f in body if f in self.refused}
        return {k: v for k, v in body.items() if k not in dropped}, dropped

    def _refused_field(self, err: JudgeError, body: Body) -> Optional[str]:
        """The optional field of ``body`` that a 400 / 422 names, if any (then the request can fall back)."""
        if err.status not in (400, 422):
            return None
        return next((f for f in FALLBACKS if f in body and f in err.detail), None)

    def _chat(self, body: Body, key: str, log: AttemptLog, fallbacks: dict[str, str]) -> tuple[str, Optional[str]]:
        """Send ``body`` (with retries, less any field the server refused: recorded in ``fallbacks``); returns
        (reply text, server-reported model id)."""
        body, dropped = self.without_refused(body)
        fallbacks.update(dropped)
        try:
            return self._send(body, key, log)
        except JudgeError as exc:
            err, f = exc, self._refused_field(exc, body)
            if f is None:
                raise
        why = f"refused by the server ({err}); sent without it: {FALLBACKS[f]}"
        with self._lock:
            first = f not in self.refused
            self.refused[f] = why
        if first:
            logging.getLogger(__name__).warning("judge server %s refused %s (%s): this run's judge requests fall "
                                                "back to %s; recorded as judge.settings.fallbacks in metrics.json",
                                                self.settings.base_url, f, err, FALLBACKS[f])
        fallbacks[f] = why
        log({"call": "chat", "status": "fallback", "dropped": f, "error": str(err)})
        return self._send({k: v for k, v in body.items() if k != f}, key, log)

    def _send(self, body: Body, key: str, log: AttemptLog) -> tuple[str, Optional[str]]:
        def call() -> tuple[str, Optional[str]]:
            raw = self.client().chat.completions.with_raw_response.create(**body)
            text = raw.http_response.text
            try:
                completion = raw.parse()
                content = completion.choices[0].message.content
                model = completion.model
            except Exception:  # noqa: BLE001 - a 200 whose body is not a chat completion
                log({"call": "chat", "status": "invalid", "raw_response": self.scrub(text)[:20000]})
                raise JudgeError("invalid server response (not a chat completion)", transient=True) from None
            log({"call": "chat", "status": "ok", "server_model": model, "raw_response": self.scrub(text)[:200000]})
            return content or "", model

        return self._with_retries("chat", call, key, log)

    # -- one item --------------------------------------------------------------------------------------------------
    def judge(self, inp: Optional[JudgeInput], item_dir: Path,
              request: Optional[tuple[Body, dict[str, Any]]] = None) -> Verdict:
        """Judge one item, reusing a stored answer when the request key matches (see the module docstring).
        ``request``: ``build_request(inp, settings)`` when the caller built it already (then ``inp`` is not read)."""
        if request is None:
            if inp is None:
                raise ValueError("JudgeSession.judge: give the item's input or the request built from it")
            request = build_request(inp, self.settings)
        body, ident = request
        key = ident["key"]
        with self._lock:
            if key in self._verdicts:
                return self._verdicts[key]
        v = self._judge(body, ident, key, Path(item_dir))
        with self._lock:
            self._verdicts[key] = v
        return v

    def _judge(self, body: Body, ident: dict[str, Any], key: str, item_dir: Path) -> Verdict:
        from harness.io import read_json, write_json

        jdir = Path(item_dir) / "judge"
        answer_path = jdir / f"{key}.answer.json"
        if answer_path.exists():
            a = read_json(answer_path)
            return Verdict(True, a["event_started"], a["answers"], key=key, server_model=a.get("server_model"),
                           cached=True, repaired=a.get("repaired", False), fallbacks=a.get("fallbacks") or {})
        reason = self.preflight()
        with self._lock:
            reason = reason or self._spent()
        if reason:
            # no server configured: only a settings change (which recomputes the family anyway) can change that
            return Verdict(False, reason=reason, retryable=bool(self.settings.base_url), key=key)
        fallbacks: dict[str, str] = {}
        self._store_request(jdir, key, *self.without_refused(body), ident)
        log_path = jdir / f"{key}.attempts.jsonl"
        log_lock = threading.Lock()

        def log(rec: dict[str, Any]) -> None:
            from harness.io import append_text

            rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **rec}
            with log_lock:  # scrubbed of secrets (a base_url's password in an error) like every file written
                append_text(log_path, json.dumps(rec) + "\n")

        try:
            try:
                text, model = self._chat(body, key, log, fallbacks)
            finally:
                if fallbacks:  # the stored request is what was sent
                    self._store_request(jdir, key, *self.without_refused(body), ident)
            repaired = False
            try:
                started, answers = parse_reply(text)
            except ParseFailure as first:
                log({"call": "parse", "status": "failed", "error": str(first)})
                body2 = {**body, "messages": body["messages"] + [{"role": "assistant", "content": text},
                                                                  repair_message(str(first))]}
                text, model = self._chat(body2, key, log, fallbacks)
                try:
                    started, answers = parse_reply(text)
                    repaired = True
                except ParseFailure as second:
                    log({"call": "parse", "status": "failed", "error": str(second)})
                    return Verdict(False, reason=f"unparseable judge reply after one repair re-ask: {second}",
                                   retryable=True, key=key, server_model=model, fallbacks=fallbacks)
        except JudgeError as exc:
            with self._lock:
                if exc.fatal:
                    self.fatal = self.fatal or str(exc)
                else:
                    self.failures.append(str(exc))
            return Verdict(False, reason=f"judge request failed: {exc}", retryable=exc.retryable, key=key,
                           fallbacks=fallbacks)
        with self._lock:
            if model:
                self.server_models.add(model)
        write_json(answer_path, {"key": key, "event_started": started, "answers": answers, "server_model": model,
                                 "repaired": repaired, "raw_reply": self.scrub(text),
                                 "settings": self.settings.to_dict(), "fallbacks": fallbacks})
        return Verdict(True, started, answers, key=key, server_model=model, repaired=repaired, fallbacks=fallbacks)

    def _store_request(self, jdir: Path, key: str, body: Body, fallbacks: dict[str, str],
                       ident: dict[str, Any]) -> None:
        """``<key>.request.json`` with each image as ``frames/<digest>.jpg`` (written once per digest)."""
        from harness.io import write_bytes, write_json

        frames_dir = jdir / "frames"
        stored = json.loads(json.dumps(body))
        n = 0
        for m in stored["messages"]:
            if isinstance(m.get("content"), list):
                for part in m["content"]:
                    if part.get("type") == "image_url":
                        digest = ident["image_sha256"][n]
                        n += 1
                        p = frames_dir / f"{digest[:20]}.jpg"
                        if not p.exists():
                            write_bytes(p, base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
                        part["image_url"]["url"] = f"frames/{p.name}"
        write_json(jdir / f"{key}.request.json", {"key": key, "identity": ident, "body": stored,
                                                   "base_url": self.settings.base_url,
                                                   "api_key_env": self.settings.api_key_env,
                                                   "fallbacks": fallbacks})


_SESSIONS: dict[str, JudgeSession] = {}
_SESSIONS_LOCK = threading.Lock()


def session_for(settings: JudgeSettings, fresh: bool = False) -> JudgeSession:
    """The session of the current run for ``settings`` (``fresh=True`` starts a new run: new budget, new
    pre-flight)."""
    k = json.dumps(settings.to_dict(), sort_keys=True)
    with _SESSIONS_LOCK:
        if fresh or k not in _SESSIONS:
            _SESSIONS[k] = JudgeSession(settings)
        return _SESSIONS[k]
