"""Engine clients of the served backend: one realtime session per item, frames handed on as they arrive.

**SGLang** (checked against sgl-project/sglang@v0.5.23: the PyPI wheel sglang==0.5.23, whose files were read; the
wheel records no commit id; ``python/sglang/multimodal_gen/runtime/entrypoints/openai/``): route ``/v1/realtime_video/generate``
(``realtime/realtime_video_api.py``: ``router`` prefix ``/v1/realtime_video``, ``@router.websocket("/generate")``).
Every message is a msgpack map. The client sends ``init`` first (``protocol.py::RealtimeVideoGenerationsRequest``:
``type``, ``prompt``, ``first_frame`` (bytes), ``size`` ``"WxH"``, ``num_frames``, ``fps``, ``seed``,
``num_inference_steps``, ``max_chunks``, ``condition_inputs`` (``camera_actions``: ``list[list[str]]``, consumed by
the model adapter's ``on_init``: ``realtime/adapters/lingbot_world_realtime_adapter.py``,
``sana_wm_realtime_adapter.py``), ``realtime_output_format`` ``raw|webp|jpeg``, ``realtime_output_pacing``,
``realtime_causal_sink_size``, ``realtime_causal_kv_cache_num_frames``). The server answers per chunk with frames
(``realtime/realtime_output_adapter.py::_send_frame_batches``: a ``frame_batch`` map carrying ``payload`` when the
payload is under 64 KiB, else a ``frame_batch_header`` map followed by one binary message holding the payload; the
header has ``chunk_index``, ``num_frames``, ``total_size``, ``format`` ``rgb24``, ``width``, ``height``,
``channels``, ``bytes_per_frame`` for raw frames, ``payload_lengths`` for encoded ones, ``frame_batch_index``,
``num_frame_batches``), then ``chunk_stats`` (``realtime_video_api.py::_send_realtime_chunk_stats``:
``chunk_index``, ``request_prepare_ms``, ``scheduler_forward_ms``, ``chunk_total_ms``, ``num_frames``, ...).
Faults: ``{"type": "error", "content": ...}``; a second session while one is active gets
``"another realtime session is already active"`` and close code 1008 (``generate`` in ``realtime_video_api.py``);
after ``max_chunks`` the server closes with 1000 ``"generation complete"``.

**vLLM-Omni** streaming video route (the PyPI wheel vllm-omni==0.30.0: ``entrypoints/openai/api_server.py:1735``
``WS /v1/realtime/video``, ``entrypoints/openai/serving_video_output_stream.py``): JSON text messages. The client
sends one ``session.start`` (the ``VideoGenerationRequest`` fields: ``prompt``, ``image_reference.image_url`` (a
data URL), ``width``, ``height``, ``num_frames``, ``fps``, ``seed``, ``num_inference_steps``, ``extra_params``
(into the sampling ``extra_args``: LingBot v2's ``action_path``), ``format: m4s``); the server answers
``video.start`` (``request_id``: fresh per session, ``config``), then per generated chunk a ``video.chunk_metadata``
(``kind`` ``media``/``trailer``, ``num_frames``, ``byte_length``) followed by one binary message of fragmented-MP4
bytes (H.264), then ``session.done`` (``chunks``, ``stopped``); faults are ``{"type": "error", "message"}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .geometry import ChunkPlan
from .transport import Connection, ServedError

FrameCallback = Callable[[np.ndarray], None]
#: what a malformed msgpack message raises: msgpack's own errors, a bad buffer size
_UNPACK_ERRORS = (ValueError, TypeError, KeyError, OverflowError)


@dataclass
class ChunkRecord:
    """What one chunk brought: frames (count), our wall clock (ms since the request was sent, ms since the previous
    chunk's last frame) and the server's own statistics (``chunk_stats``, None when the engine reports none)."""

    index: int
    frames: int = 0
    first_frame_ms: float | None = None
    last_frame_ms: float | None = None
    wall_ms: float | None = None
    server: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "frames": self.frames, "first_frame_ms": _r(self.first_frame_ms),
                "last_frame_ms": _r(self.last_frame_ms), "wall_ms": _r(self.wall_ms), "server": self.server}


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 3)


@dataclass
class Session:
    """Everything one session recorded: what was sent (without the image bytes), what the server said about itself,
    the chunks, and the unknown message types it sent (at most ``max_unknown`` in all)."""

    sent: dict[str, Any] = field(default_factory=dict)
    server_hello: dict[str, Any] | None = None
    chunks: dict[int, ChunkRecord] = field(default_factory=dict)
    frames: int = 0
    other_messages: dict[str, int] = field(default_factory=dict)
    closed_by_server: str | None = None
    t_sent: float = 0.0
    max_unknown: int = 64

    def chunk(self, index: int) -> ChunkRecord:
        if index not in self.chunks:
            self.chunks[index] = ChunkRecord(index)
        return self.chunks[index]

    def arrive(self, index: int, n: int, t: float) -> None:
        c = self.chunk(index)
        ms = (t - self.t_sent) * 1000.0
        if c.first_frame_ms is None:
            c.first_frame_ms = ms
        c.last_frame_ms = ms
        c.frames += n
        self.frames += n
        prev = [x.last_frame_ms for i, x in self.chunks.items() if i < index and x.last_frame_ms is not None]
        c.wall_ms = ms - (max(prev) if prev else 0.0)

    def unknown(self, kind: str) -> None:
        """Count a message of a type the client does not know; past ``max_unknown`` of them the item fails (a
        server that only trickles such messages would otherwise hold it until the item deadline)."""
        key = kind[:40]
        if key not in self.other_messages and len(self.other_messages) >= 32:
            key = "<other>"
        self.other_messages[key] = self.other_messages.get(key, 0) + 1
        total = sum(self.other_messages.values())
        if total > self.max_unknown:
            raise self.fail(f"the server sent {total} messages of unknown types (more than "
                            f"backend.max_unknown_messages={self.max_unknown}): {sorted(self.other_messages)[:5]}",
                            "protocol")

    def fail(self, message: str, kind: str) -> ServedError:
        return ServedError(message, kind, {"session": self.to_dict()})

    def to_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "server_hello": self.server_hello, "frames": self.frames,
                "chunks": [self.chunks[k].to_dict() for k in sorted(self.chunks)],
                "other_messages": self.other_messages, "closed_by_server": self.closed_by_server}


def _decode_map(data: bytes | str, what: str) -> dict[str, Any]:
    import msgpack

    if isinstance(data, str):
        raise ServedError(f"the server sent text where a msgpack {what} was expected: {data[:80]!r}", "protocol")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except _UNPACK_ERRORS as exc:
        raise ServedError(f"undecodable {what} from the server ({type(exc).__name__})", "protocol") from None
    if not isinstance(obj, dict):
        raise ServedError(f"the server sent a {type(obj).__name__} where a msgpack map ({what}) was expected",
                          "protocol")
    return obj


def field_int(msg: dict[str, Any], key: str, where: str, default: int | None = None, low: int = 0) -> int:
    """``msg[key]`` as an integer >= ``low``; a missing (without ``default``), non-integer or out-of-range field is
    a protocol error naming the field (never a bare ValueError)."""
    value = msg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ServedError(f"malformed {where}: field {key!r} is {value!r}, expected an integer >= {low}",
                          "protocol")
    return value


def _frames_from_payload(header: dict[str, Any], payload: bytes, height: int, width: int) -> list[np.ndarray]:
    """RGB uint8 frames of one SGLang frame batch, checked against the header and the size the session asked for."""
    where = f"frame batch header (chunk {header.get('chunk_index')!r} batch {header.get('frame_batch_index')!r})"
    n = field_int(header, "num_frames", where, low=1)
    fmt = str(header.get("format", header.get("encoding", "")))
    w, h = field_int(header, "width", where, low=1), field_int(header, "height", where, low=1)
    if (h, w) != (height, width):
        raise ServedError(f"frame batch of the wrong size: {where} is {w}x{h}, the session asked for {width}x{height}",
                          "wrong frame size")
    if "total_size" in header and field_int(header, "total_size", where) != len(payload):
        raise ServedError(f"frame batch of the wrong size: {where} announced {header['total_size']} bytes, "
                          f"{len(payload)} arrived", "wrong frame size")
    if fmt == "rgb24" or header.get("encoding") == "raw":
        channels = field_int(header, "channels", where, default=3, low=1)
        per = field_int(header, "bytes_per_frame", where, default=height * width * channels, low=1)
        if channels != 3 or per != height * width * 3 or len(payload) != n * per:
            raise ServedError(f"frame batch of the wrong size: {where} holds {len(payload)} bytes for {n} frame(s) "
                              f"of {height}x{width}x3 ({n * height * width * 3} expected)", "wrong frame size")
        return list(np.frombuffer(payload, np.uint8).reshape(n, height, width, 3))
    lengths = header.get("payload_lengths")
    if not isinstance(lengths, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in lengths):
        raise ServedError(f"malformed {where}: payload_lengths is {str(lengths)[:80]}", "protocol")
    if len(lengths) != n or sum(lengths) != len(payload):
        raise ServedError(f"frame batch of the wrong size: {where} has payload_lengths {lengths} for {n} frame(s) "
                          f"and {len(payload)} bytes", "wrong frame size")
    import cv2

    out, pos = [], 0
    for ln in lengths:
        # an empty part is undecodable too (OpenCV asserts on an empty buffer instead of returning None)
        img = cv2.imdecode(np.frombuffer(payload[pos:pos + ln], np.uint8), cv2.IMREAD_COLOR) if ln else None
        pos += ln
        if img is None or img.shape[:2] != (height, width):
            raise ServedError(f"frame batch of the wrong size: {where} holds an undecodable or {width}x{height}-"
                              "mismatched image", "wrong frame size")
        out.append(np.ascontiguousarray(img[:, :, ::-1]))
    return out


def run_sglang(conn: Connection, init: dict[str, Any], *, height: int, width: int, plan: ChunkPlan,
               on_frame: FrameCallback, max_unknown: int = 64) -> Session:
    """One SGLang realtime session: send ``init`` (already complete), stream every frame to ``on_frame``.

    ``plan``: the chunks the engine streams (:mod:`adapters.served.geometry`): each chunk's frame count is checked
    when its ``chunk_stats`` comes. Complete when every frame and the statistics of every chunk have arrived, or
    when the server closed normally (1000) once every frame was in; any other close fails the item.
    """
    import msgpack

    s = Session(sent={k: (f"<{len(v)} bytes>" if isinstance(v, (bytes, bytearray)) else v) for k, v in init.items()},
                max_unknown=max_unknown)
    s.t_sent = time.perf_counter()
    conn.send(msgpack.packb(init, use_bin_type=True))
    stats_seen: set[int] = set()
    pending: dict[str, Any] | None = None
    while not (s.frames == plan.num_frames and len(stats_seen) >= plan.max_chunks):
        try:
            data, t = conn.recv()
        except ServedError as exc:
            if exc.kind == "closed mid-stream" and s.frames == plan.num_frames and exc.close_code == 1000:
                s.closed_by_server = "1000 after every frame (some chunk_stats missing)"
                break
            exc.meta = {"session": s.to_dict()}
            raise
        if pending is not None:  # the binary payload that follows a frame_batch_header
            header, pending = pending, None
            if isinstance(data, str):
                raise s.fail("the server sent text where a frame payload was expected", "protocol")
            _deliver(s, header, bytes(data), t, height, width, plan, on_frame)
            continue
        pending = _sglang_message(s, _decode_map(data, "message"), t, height, width, plan, on_frame, stats_seen)
    return s


def _sglang_message(s: Session, msg: dict[str, Any], t: float, height: int, width: int, plan: ChunkPlan,
                    on_frame: FrameCallback, stats_seen: set[int]) -> dict[str, Any] | None:
    """Handle one SGLang map; returns a ``frame_batch_header`` whose payload comes next (else None)."""
    kind = msg.get("type")
    if kind == "frame_batch":
        payload = msg.get("payload") or b""
        if not isinstance(payload, (bytes, bytearray)):
            raise s.fail("malformed frame_batch: payload is not bytes", "protocol")
        _deliver(s, msg, bytes(payload), t, height, width, plan, on_frame)
    elif kind == "frame_batch_header":
        where = "frame_batch_header"
        size = field_int(msg, "total_size", where, default=0)
        limit = field_int(msg, "num_frames", where, low=1) * height * width * 3
        if size > limit:  # refused before the payload is read: a server announcing 1 GB gets nothing buffered
            raise s.fail(f"the server announced a {size}-byte frame batch, more than {limit} bytes for its frames",
                         "wrong frame size")
        return msg
    elif kind == "chunk_stats":
        idx = field_int(msg, "chunk_index", "chunk_stats")
        stats_seen.add(idx)
        s.chunk(idx).server = {k: v for k, v in msg.items() if k != "type"}
        _check_chunk(s, idx, plan)
    elif kind == "error":
        text = str(msg.get("content", msg.get("message", "")))[:300]
        k = "admission refused" if "already active" in text or "busy" in text.lower() else "engine error"
        raise s.fail(f"the server reported an error: {text!r}", k)
    else:
        s.unknown(str(kind))
    return None


def _deliver(s: Session, header: dict[str, Any], payload: bytes, t: float, height: int, width: int,
             plan: ChunkPlan, on_frame: FrameCallback) -> None:
    try:
        frames = _frames_from_payload(header, payload, height, width)
        idx = field_int(header, "chunk_index", "frame batch header", default=0)
    except ServedError as exc:
        exc.meta = {"session": s.to_dict()}
        raise
    if s.frames + len(frames) > plan.num_frames:
        raise s.fail(f"the server sent more frames than the session asked for ({s.frames + len(frames)} > "
                     f"{plan.num_frames})", "wrong frame size")
    if idx >= plan.max_chunks:
        raise s.fail(f"the server sent chunk {idx} of a session of {plan.max_chunks} chunks", "protocol")
    for f in frames:
        on_frame(f)
    s.arrive(idx, len(frames), t)


def _check_chunk(s: Session, idx: int, plan: ChunkPlan) -> None:
    """A chunk's statistics came: its frame count must be the engine's (:class:`ChunkPlan`)."""
    if idx >= plan.max_chunks:
        raise s.fail(f"the server sent chunk {idx} of a session of {plan.max_chunks} chunks", "protocol")
    want, got = plan.chunk_frames[idx], s.chunk(idx).frames
    if got != want:
        raise s.fail(f"frame batch of the wrong size: chunk {idx} brought {got} frame(s), the engine's geometry "
                     f"makes {want}", "wrong frame size")


# -- vLLM-Omni ----------------------------------------------------------------------------------------------------
def run_vllm_video(conn: Connection, start: dict[str, Any], *, height: int, width: int, plan: ChunkPlan,
                   on_frame: FrameCallback, max_unknown: int = 64) -> Session:
    """One vLLM-Omni ``/v1/realtime/video`` session: send ``session.start``, spool the fragmented MP4 the server
    streams (bounded: each chunk under its raw size, checked against its ``byte_length``), check each chunk's frame
    count against ``plan``, then decode the stream and hand every frame to ``on_frame``."""
    import json
    import tempfile

    s = Session(sent={k: ("<data URL>" if k == "image_reference" else v) for k, v in start.items()},
                max_unknown=max_unknown)
    s.t_sent = time.perf_counter()
    conn.send(json.dumps(start))
    with tempfile.TemporaryFile() as spool:
        _vllm_receive(conn, s, spool, plan, height * width * 3)
        spool.seek(0)
        frames = _decode_stream(s, spool, height, width, plan.num_frames, on_frame)
    if frames != plan.num_frames:
        raise s.fail(f"frame batch of the wrong size: the stream decodes to {frames} frame(s), the session asked "
                     f"for {plan.num_frames}", "wrong frame size")
    return s


def _vllm_receive(conn: Connection, s: Session, spool: Any, plan: ChunkPlan, frame_bytes: int) -> None:
    """Read messages until ``session.done``; media bytes go to ``spool``."""
    import json

    pending: tuple[int, int] | None = None  # (bytes announced, frames) of the binary message that comes next
    media = 0
    while True:
        try:
            data, t = conn.recv()
        except ServedError as exc:
            exc.meta = {"session": s.to_dict()}
            raise
        if pending is not None:
            if isinstance(data, str) or len(data) != pending[0]:
                raise s.fail(f"frame batch of the wrong size: chunk {media} announced {pending[0]} bytes, "
                             f"{'text' if isinstance(data, str) else len(data)} arrived", "wrong frame size")
            spool.write(data)
            if pending[1]:
                s.arrive(media, pending[1], t)
                media += 1
            pending = None
            continue
        if isinstance(data, (bytes, bytearray)):
            raise s.fail("the server sent bytes without a video.chunk_metadata before them", "protocol")
        try:
            msg = json.loads(data)
        except ValueError:
            raise s.fail(f"undecodable message from the server: {data[:80]!r}", "protocol") from None
        if not isinstance(msg, dict):
            raise s.fail("the server sent a JSON value that is not an object", "protocol")
        kind = msg.get("type")
        if kind == "session.done":
            if media != plan.max_chunks:
                raise s.fail(f"frame batch of the wrong size: the session ended after {media} of {plan.max_chunks} "
                             "chunks", "wrong frame size")
            s.closed_by_server = f"session.done after {field_int(msg, 'chunks', 'session.done')} message(s)"
            return
        pending = _vllm_message(s, msg, media, plan, frame_bytes)


def _vllm_message(s: Session, msg: dict[str, Any], media: int, plan: ChunkPlan,
                  frame_bytes: int) -> tuple[int, int] | None:
    """Handle one vLLM-Omni JSON message; returns (bytes, frames) of the binary message it announces (else None)."""
    kind = msg.get("type")
    if kind == "video.start":
        s.server_hello = {"request_id": str(msg.get("request_id"))[:200], "config": msg.get("config")}
    elif kind == "video.chunk_metadata":
        where = "video.chunk_metadata"
        size = field_int(msg, "byte_length", where)
        n = field_int(msg, "num_frames", where)
        media_kind = msg.get("kind")
        if media_kind not in ("media", "trailer") or (media_kind == "trailer") != (n == 0):
            raise s.fail(f"malformed {where}: kind {media_kind!r} with {n} frame(s)", "protocol")
        if n and media >= plan.max_chunks:
            raise s.fail(f"the server sent chunk {media} of a session of {plan.max_chunks} chunks", "protocol")
        if n and n != plan.chunk_frames[media]:
            raise s.fail(f"frame batch of the wrong size: chunk {media} brought {n} frame(s), the engine's geometry "
                         f"makes {plan.chunk_frames[media]}", "wrong frame size")
        if size > max(n, 1) * frame_bytes + (1 << 20):  # refused before the bytes are read
            raise s.fail(f"the server announced {size} bytes for {n} frame(s), more than their raw size",
                         "wrong frame size")
        return size, n
    elif kind == "error":
        text = str(msg.get("message", msg.get("content", "")))[:300]
        k = "admission refused" if "busy" in text.lower() or "capacity" in text.lower() else "engine error"
        raise s.fail(f"the server reported an error: {text!r}", k)
    else:
        s.unknown(str(kind))
    return None


def _decode_stream(s: Session, spool: Any, height: int, width: int, limit: int, on_frame: FrameCallback) -> int:
    """Decode the spooled fragmented MP4 (PyAV) frame by frame into ``on_frame``; returns the frame count."""
    import av

    n = 0
    try:
        with av.open(spool, mode="r", format="mp4") as container:
            for frame in container.decode(video=0):
                img = frame.to_ndarray(format="rgb24")
                if img.shape != (height, width, 3):
                    raise s.fail(f"frame batch of the wrong size: the stream holds {img.shape[1]}x{img.shape[0]} "
                                 f"frames, the session asked for {width}x{height}", "wrong frame size")
                n += 1
                if n > limit:
                    raise s.fail(f"the server sent more frames than the session asked for (> {limit})",
                                 "wrong frame size")
                on_frame(np.ascontiguousarray(img))
    except av.FFmpegError as exc:
        raise s.fail(f"the server's video stream does not decode ({type(exc).__name__}: {exc})", "protocol") from None
    return n
