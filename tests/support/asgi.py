"""One request to an ASGI app in this process, without an HTTP client library (the annotation app's tests)."""

from __future__ import annotations

import asyncio


def asgi_call(app, method: str, path: str, chunks=(), headers: dict | None = None) -> tuple[int, int, dict, bytes]:
    """Send ``method path`` (a query string after ``?`` is kept) with the body ``chunks``, handed over only as the
    app asks for them. Returns (status, chunks the app pulled, response headers (lower-case names), body bytes)."""
    pulled, status, out_headers, body = [0], [0], {}, bytearray()
    chunks = list(chunks) or [b""]

    async def receive():
        if pulled[0] < len(chunks):
            pulled[0] += 1
            return {"type": "http.request", "body": chunks[pulled[0] - 1], "more_body": pulled[0] < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(msg):
        if msg["type"] == "http.response.start":
            status[0] = msg["status"]
            out_headers.update({k.decode().lower(): v.decode() for k, v in msg.get("headers", [])})
        elif msg["type"] == "http.response.body":
            body.extend(msg.get("body", b""))

    route, _, query = path.partition("?")
    hdrs = {"host": "127.0.0.1", **(headers or {})}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": route, "raw_path": route.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in hdrs.items()],
             "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    return status[0], pulled[0], out_headers, bytes(body)
