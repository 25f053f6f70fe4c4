"""A scripted OpenAI-compatible judge server for tests (loopback only, bounded, stops by itself).

It serves ``GET /v1/models`` and ``POST /v1/chat/completions``. Answers come from ``answer_fn(body) -> (started,
answers)`` (the tests answer from the reference model's ground truth). Faults are scripted per chat request: a
list consumed in order for every request (``script``), or per item (``script_by_digest``, keyed by
:func:`evaluate.judge.images_digest`); once a list is used up the server answers normally.

Faults: ``timeout`` (hangs ``hang_s``, longer than the client's timeout), ``slow`` (answers after ``slow_s``),
``500``, ``503``, ``429``, ``401``, ``drop`` (closes the connection without a reply), ``garbage`` (prose instead of
JSON), ``truncated`` (JSON cut mid-way), ``seven`` (seven answers), ``variants`` ("Yes.", "YES", "no" spellings),
``invalid_body`` (a 200 whose body is not a chat completion).

``refuse_fields``: request fields the server does not implement; a request carrying one is answered ``refuse_status``
(422) with ``{"detail": "Unused fields in the request: {...}"}``, as ``transformers serve`` words it when it
validates requests (a 400 with vLLM's error object when ``refuse_status`` is 400).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

QIDS = [f"q{i}" for i in range(1, 9)]


class FakeJudgeServer:
    def __init__(self, answer_fn: Callable[[dict], tuple[bool, list[str]]], served=("Qwen/Qwen3.8-27B",),
                 script: Optional[list[str]] = None, script_by_digest: Optional[dict[str, list[str]]] = None,
                 reported_model: Optional[str] = None, require_key: Optional[str] = None, max_requests: int = 400,
                 lifetime_s: float = 600.0, hang_s: float = 2.0, slow_s: float = 0.3,
                 refuse_fields: tuple[str, ...] = (), refuse_status: int = 422):
        self.answer_fn, self.served = answer_fn, list(served)
        self.script = list(script or [])
        self.script_by_digest = {k: list(v) for k, v in (script_by_digest or {}).items()}
        self.reported_model = reported_model
        self.require_key = require_key
        self.max_requests, self.lifetime_s = max_requests, lifetime_s
        self.hang_s, self.slow_s = hang_s, slow_s
        self.refuse_fields, self.refuse_status = tuple(refuse_fields), refuse_status
        self.requests: list[dict] = []  # {"path", "fault", "digest", "auth_ok", "fields"} (no headers, no key)
        self._lock = threading.Lock()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._timer: Optional[threading.Timer] = None

    # -- lifecycle -----------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "FakeJudgeServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                server._handle(self, "GET")

            def do_POST(self):
                server._handle(self, "POST")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)  # stops by itself
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._httpd is not None:
            httpd, self._httpd = self._httpd, None
            threading.Thread(target=lambda: (httpd.shutdown(), httpd.server_close()), daemon=True).start()

    def __enter__(self) -> "FakeJudgeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    # -- handling ------------------------------------------------------------------------------------------------
    def _send(self, h: BaseHTTPRequestHandler, status: int, obj: dict | str) -> None:
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        from evaluate.judge import images_digest

        n = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(n) or b"{}") if n else {}
        auth_ok = self.require_key is None or h.headers.get("Authorization") == f"Bearer {self.require_key}"
        digest = images_digest(body) if body else ""
        with self._lock:
            if len(self.requests) >= self.max_requests:
                self._send(h, 503, {"error": {"message": "fake server: request bound reached"}})
                return
            fault = "ok"
            if h.path.endswith("/chat/completions"):
                queue = self.script_by_digest.get(digest) if digest in self.script_by_digest else self.script
                if queue:
                    fault = queue.pop(0)
            self.requests.append({"path": h.path, "fault": fault, "digest": digest, "auth_ok": auth_ok,
                                  "fields": sorted(body)})
        if not auth_ok or fault == "401":
            self._send(h, 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                          "code": "invalid_api_key"}})
            return
        if method == "GET" and h.path.endswith("/models"):
            self._send(h, 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.served]})
            return
        if not h.path.endswith("/chat/completions"):
            self._send(h, 404, {"error": {"message": f"no route {h.path}"}})
            return
        refused = sorted(f for f in self.refuse_fields if f in body)
        if refused and h.path.endswith("/chat/completions"):
            if self.refuse_status == 400:
                self._send(h, 400, {"object": "error", "type": "BadRequestError", "code": 400,
                                    "message": f"{refused[0]} is not supported by this server"})
            else:
                self._send(h, self.refuse_status, {"detail": f"Unused fields in the request: {set(refused)}"})
            return
        if body.get("model") not in self.served:
            self._send(h, 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
            return
        if fault == "timeout":
            time.sleep(self.hang_s)
            return
        if fault == "drop":
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault in ("500", "503", "429"):
            self._send(h, int(fault), {"error": {"message": f"scripted {fault}"}})
            return
        if fault == "invalid_body":
            self._send(h, 200, "<html>not a completion</html>")
            return
        if fault == "slow":
            time.sleep(self.slow_s)
        started, answers = self.answer_fn(body)
        if fault == "garbage":
            content = "The cat seems to move, I would say probably yes overall."
        elif fault == "truncated":
            content = json.dumps({"event_started": "yes" if started else "no",
                                  "answers": dict(zip(QIDS, answers))})[:45]
        elif fault == "seven":
            content = json.dumps({"event_started": "yes" if started else "no",
                                  "answers": dict(zip(QIDS[:7], answers[:7]))})
        elif fault == "variants":
            spell = {"yes": ["Yes.", "YES", "yes"], "no": ["No.", "NO", "no"]}
            content = json.dumps({"event_started": "Yes." if started else "NO",
                                  "answers": {q: spell[a][i % 3] for i, (q, a) in enumerate(zip(QIDS, answers))}})
        else:
            content = json.dumps({"event_started": "yes" if started else "no", "answers": dict(zip(QIDS, answers))})
        self._send(h, 200, {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                            "model": self.reported_model or body.get("model"),
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                         "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
