"""WebSocket transport of the served backend: connect (with the endpoint token from the environment), receive with
a per-message timeout, and turn every transport fault into a :class:`ServedError` with a clear one-line cause.

The token's value is read from the environment variable the config names (``backend.token_env``), registered with
:mod:`harness.secrets` (so no file, log line or console line can carry it) and sent only as the
``Authorization: Bearer`` header of the handshake.
"""

from __future__ import annotations

import os
import time
from typing import Any


class ServedError(RuntimeError):
    """A served item failed (connection refused, server closed mid-stream, admission refused, malformed frames,
    timeout, an engine ``error`` message). ``root_cause``: the one-line cause the run summary prints; ``meta``: what
    was measured before the failure (frames received, chunk latencies), recorded in the item's ``meta.json``."""

    def __init__(self, message: str, kind: str, meta: dict[str, Any] | None = None, close_code: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.close_code = close_code  # the server's WebSocket close code, when it closed the connection
        self.root_cause = f"served backend ({kind}): {message}"
        self.meta = meta


def token_from_env(token_env: str | None) -> str | None:
    """The endpoint token named by ``backend.token_env`` (None when unset), registered as a secret."""
    if not token_env:
        return None
    value = os.environ.get(token_env)
    if not value:
        raise ServedError(f"backend.token_env={token_env!r} names an environment variable that is not set; export "
                          f"{token_env}=<token> before the run (its value is never written anywhere)", "config")
    from harness.secrets import register

    register({value: token_env})
    return value


class Connection:
    """One WebSocket session (``websockets.sync.client``). ``recv`` returns bytes or text and raises
    :class:`ServedError` on timeout (no message for ``message_timeout_s``, or the item's ``item_timeout_s`` spent),
    on a message larger than ``max_size`` bytes (refused by the library from the frame header, before its payload is
    buffered) and on a closed connection."""

    def __init__(self, url: str, token_env: str | None, connect_timeout_s: float, message_timeout_s: float,
                 max_size: int | None = None, item_timeout_s: float | None = None):
        from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI
        from websockets.sync.client import connect

        headers = {}
        token = token_from_env(token_env)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url
        self.message_timeout_s = float(message_timeout_s)
        self.max_size = max_size
        self.item_timeout_s = item_timeout_s
        self.deadline = None if item_timeout_s is None else time.perf_counter() + float(item_timeout_s)
        self.received = 0
        try:
            # entered as a context manager (websockets >= 16 warns about a bare connection); closed in close()
            self.ws = connect(url, additional_headers=headers, open_timeout=connect_timeout_s, max_size=max_size,
                              close_timeout=2, ping_interval=None).__enter__()
        except ConnectionRefusedError:
            raise ServedError(f"cannot connect to {url}: connection refused (is the server running there? check "
                              "endpoint=)", "connection refused") from None
        except InvalidStatus as exc:
            raise _refused(url, exc.response.status_code) from None
        except InvalidURI:
            raise ServedError(f"endpoint={url!r} is not a WebSocket URL", "config") from None
        except (InvalidHandshake, TimeoutError, OSError) as exc:
            raise ServedError(f"cannot connect to {url}: {type(exc).__name__}: {exc}", "connection failed") from None

    def send(self, data: bytes | str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            self.ws.send(data)
        except ConnectionClosed as exc:
            raise self._closed(exc) from None

    def recv(self) -> tuple[bytes | str, float]:
        """(message, arrival time from ``time.perf_counter``)."""
        from websockets.exceptions import ConnectionClosed

        timeout, why = self.message_timeout_s, "message"
        if self.deadline is not None and self.deadline - time.perf_counter() < timeout:
            timeout, why = max(0.0, self.deadline - time.perf_counter()), "item"
        try:
            msg = self.ws.recv(timeout=timeout)
        except TimeoutError:
            if why == "item":
                raise ServedError(f"the item took longer than backend.item_timeout_s={self.item_timeout_s:g} s "
                                  f"({self.received} message(s) received; a server that trickles messages or a "
                                  "slow one: raise it if the server is only slow)", "timeout") from None
            raise ServedError(f"no message from the server for {self.message_timeout_s:g} s after {self.received} "
                              "message(s) (a slow or stalled server; raise backend.chunk_timeout_s if it is only "
                              "slow)", "timeout") from None
        except ConnectionClosed as exc:
            raise self._closed(exc) from None
        self.received += 1
        return msg, time.perf_counter()

    def _closed(self, exc: Any) -> ServedError:
        sent = getattr(exc, "sent", None)
        if getattr(sent, "code", None) == 1009:  # we closed it: the library refused an oversized message
            return ServedError(f"the server sent a message larger than {self.max_size} bytes, the most the frame "
                               f"geometry allows (after {self.received} message(s))", "protocol", close_code=1009)
        rcvd = getattr(exc, "rcvd", None)
        code = getattr(rcvd, "code", None)
        reason = getattr(rcvd, "reason", "") or ""
        if code == 1008:
            return ServedError(f"the server refused the session (close 1008 {reason!r})", "admission refused",
                               close_code=code)
        how = f"close code {code} {reason!r}" if code is not None else "no close frame"
        return ServedError(f"the server closed the connection mid-stream after {self.received} message(s) ({how})",
                           "closed mid-stream", close_code=code)

    def close(self) -> None:
        import contextlib

        with contextlib.suppress(OSError, RuntimeError):  # a broken connection: nothing left to tell the server
            self.ws.close()


def _refused(url: str, status: int) -> ServedError:
    """The handshake answered with an HTTP status: 429 / 503 are a busy server (admission refused)."""
    busy = status in (429, 503)
    what = "busy" if busy else ("unauthorised: check backend.token_env" if status in (401, 403) else "refused")
    return ServedError(f"{url} answered the WebSocket handshake with HTTP {status} ({what})",
                       "admission refused" if busy else "handshake refused")
