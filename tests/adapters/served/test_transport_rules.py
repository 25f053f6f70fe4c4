"""The served transport's rules one at a time, in this process (``adapters/served/transport.py``), against a
loopback WebSocket server (``websockets.sync.server``) whose handler each test writes: the token header, every
handshake answer, the per-message and per-item deadlines, the message size bound and each way a server closes.

No rule depends on timing: a deadline is tested with a server that never answers.
"""

from __future__ import annotations

import socket
import threading
from http import HTTPStatus

import pytest

from adapters.served.transport import Connection, _refused, token_from_env
from tests.adapters.served.test_engine_rules import _fails


class Server:
    """A loopback server running ``handler(ws)`` per connection; ``status``: answer the handshake with it."""

    def __init__(self, handler=None, status: HTTPStatus | None = None) -> None:
        self.handler, self.status, self.headers = handler, status, []
        self.done = threading.Event()

    def _gate(self, connection, request):
        self.headers.append({k.lower(): v for k, v in request.headers.raw_items()})
        return connection.respond(self.status, "no\n") if self.status else None

    def _handle(self, ws) -> None:
        try:
            if self.handler:
                self.handler(ws)
            else:
                self.done.wait(10)
        finally:
            self.done.set()

    def __enter__(self) -> str:
        from websockets.sync.server import serve

        self._server = serve(self._handle, "127.0.0.1", 0, max_size=None, ping_interval=None,
                             process_request=self._gate)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self.done.set()
        self._server.shutdown()
        self._thread.join(5)


def _connect(url: str, token_env: str | None = None, message_s: float = 30.0, item_s: float | None = None,
             max_size: int | None = None) -> Connection:
    return Connection(url, token_env, connect_timeout_s=5, message_timeout_s=message_s, max_size=max_size,
                      item_timeout_s=item_s)


def test_messages_go_both_ways_and_are_counted():
    def echo(ws):
        ws.send(ws.recv().upper())
        ws.send(b"\x00\x01")

    with Server(echo) as url:
        conn = _connect(url)
        conn.send("hello")
        first, t1 = conn.recv()
        second, t2 = conn.recv()
        conn.close()
        conn.close()  # closing twice is harmless
    assert (first, second, conn.received) == ("HELLO", b"\x00\x01", 2) and t2 >= t1


def test_the_token_goes_only_into_the_authorisation_header(monkeypatch):
    # a variable whose name does not look secret: only its registration keeps the value out of every line
    monkeypatch.setenv("WM_ENDPOINT_VALUE", "zz-plain-771")
    from harness.secrets import scrub

    assert "zz-plain-771" in scrub("sent zz-plain-771")  # not a secret by its shape or its variable's name
    server = Server()
    with server as url:
        _connect(url, "WM_ENDPOINT_VALUE").close()
        _connect(url).close()
    assert server.headers[0]["authorization"] == "Bearer zz-plain-771"
    assert "authorization" not in server.headers[1]
    assert "zz-plain-771" not in scrub("sent zz-plain-771")  # registered as a secret once read
    assert token_from_env(None) is None and token_from_env("") is None
    monkeypatch.delenv("WM_ENDPOINT_VALUE")
    _fails("config", "backend.token_env='WM_ENDPOINT_VALUE' names an environment variable that is not set",
           token_from_env, "WM_ENDPOINT_VALUE")


@pytest.mark.parametrize("status, kind, what", [
    (429, "admission refused", "busy"), (503, "admission refused", "busy"),
    (401, "handshake refused", "unauthorised: check backend.token_env"),
    (403, "handshake refused", "unauthorised: check backend.token_env"),
    (500, "handshake refused", "refused"), (404, "handshake refused", "refused"),
])
def test_each_handshake_answer_has_its_kind(status, kind, what):
    err = _refused("ws://h/x", status)
    assert err.kind == kind and str(err) == f"ws://h/x answered the WebSocket handshake with HTTP {status} ({what})"


def test_a_real_handshake_refusal_is_read_from_the_servers_status():
    with Server(status=HTTPStatus.TOO_MANY_REQUESTS) as url:
        _fails("admission refused", "with HTTP 429 (busy)", _connect, url)
    with Server(status=HTTPStatus.FORBIDDEN) as url:
        _fails("handshake refused", "HTTP 403 (unauthorised", _connect, url)


def test_no_server_and_no_websocket_url_are_named():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _fails("connection refused", f"cannot connect to ws://127.0.0.1:{port}: connection refused", _connect,
           f"ws://127.0.0.1:{port}")
    _fails("config", "endpoint='http://127.0.0.1:9/x' is not a WebSocket URL", _connect, "http://127.0.0.1:9/x")


def test_a_silent_server_fails_on_the_message_deadline():
    with Server() as url:
        conn = _connect(url, message_s=0.2)
        _fails("timeout", "no message from the server for 0.2 s after 0 message(s)", conn.recv)
        conn.close()


def test_the_item_deadline_wins_when_it_comes_first():
    def one(ws):
        ws.send("first")
        ws.recv()  # then silence until the client goes

    with Server(one) as url:
        conn = _connect(url, message_s=60, item_s=0.3)
        assert conn.recv()[0] == "first"
        _fails("timeout", "the item took longer than backend.item_timeout_s=0.3 s (1 message(s) received",
               conn.recv)
        conn.close()
    with Server() as url:  # a deadline later than the message timeout leaves the message timeout in charge
        conn = _connect(url, message_s=0.2, item_s=60)
        _fails("timeout", "no message from the server for 0.2 s", conn.recv)
        conn.close()


@pytest.mark.parametrize("delay_s, item_s, arrives", [
    (0.3, 60, True),  # the item deadline shortens the wait only to what is left of it
    (0.6, 0.2, False),  # and is not rounded up: 0.2 s left, a message 0.6 s away is past it
])
def test_the_item_deadline_waits_exactly_what_is_left_of_the_item(delay_s, item_s, arrives):
    def late(ws):
        ws.recv()
        threading.Event().wait(delay_s)
        ws.send("late")
        ws.recv()

    with Server(late) as url:
        conn = _connect(url, message_s=600, item_s=item_s)
        conn.send("go")
        if arrives:
            assert conn.recv()[0] == "late"
        else:
            _fails("timeout", f"the item took longer than backend.item_timeout_s={item_s:g} s", conn.recv)
        conn.close()


def test_closing_tells_the_server_with_a_normal_close():
    seen = {}

    def wait_for_close(ws):
        from websockets.exceptions import ConnectionClosed

        try:
            ws.recv()
        except ConnectionClosed as exc:
            seen["code"] = exc.rcvd.code if exc.rcvd else None

    server = Server(wait_for_close)
    with server as url:
        conn = _connect(url)
        conn.close()
        assert server.done.wait(10)
    assert seen == {"code": 1000}


def test_a_message_over_the_size_bound_is_refused():
    def big(ws):
        ws.send(b"x" * 100)
        ws.send(b"y" * 101)

    with Server(big) as url:
        conn = _connect(url, max_size=100)
        assert conn.recv()[0] == b"x" * 100  # exactly the bound is allowed
        err = _fails("protocol", "the server sent a message larger than 100 bytes, the most the frame geometry "
                                 "allows (after 1 message(s))", conn.recv)
        assert err.close_code == 1009
        conn.close()


@pytest.mark.parametrize("code, reason, kind, text", [
    (1008, "another realtime session is already active", "admission refused",
     "the server refused the session (close 1008 'another realtime session is already active')"),
    (1011, "boom", "closed mid-stream", "after 1 message(s) (close code 1011 'boom')"),
    (1000, "", "closed mid-stream", "after 1 message(s) (close code 1000 '')"),
])
def test_each_close_has_its_kind_and_code(code, reason, kind, text):
    def close(ws):
        ws.send("one")
        ws.close(code, reason)

    with Server(close) as url:
        conn = _connect(url)
        conn.recv()
        err = _fails(kind, text, conn.recv)
        assert err.close_code == code
        _fails(kind, text, conn.send, "more")  # sending on the closed session says the same
        conn.close()


def test_a_connection_dropped_without_a_close_frame_says_so():
    def drop(ws):
        ws.send("one")
        ws.socket.shutdown(socket.SHUT_RDWR)

    with Server(drop) as url:
        conn = _connect(url)
        conn.recv()
        err = _fails("closed mid-stream", "after 1 message(s) (no close frame)", conn.recv)
        assert err.close_code is None
        conn.close()
