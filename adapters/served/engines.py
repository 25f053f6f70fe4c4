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

**vLLM-Omni** camera endpoint (vllm-project/vllm-omni@bfa9b596 ``vllm_omni/entrypoints/openai/realtime/world/
camera_connection.py`` and @f41c8e54 ``camera_serving.py``; not in the 0.30.0 wheel): OpenPI ``msgpack_numpy``
messages. On connect the server sends its model config (a map); the client sends one request map (``prompt``,
``image``, ``camera`` ``{poses: (N,4,4), intrinsics: (N,4) fx fy cx cy}`` (the shapes
``vllm_omni/diffusion/models/lingbot_world/camera.py`` validates, 0.30.0), ``session_id``, ``extra_body``
``{height, width, num_frames, fps, seed, frames_per_chunk}``); the server answers with ``{"type": "frame", "index",
"total", "video": [frames]}`` messages, ``frames_per_chunk`` frames each (default 4), frames uint8 or float in
[0, 1] (``video_api_utils._normalize_frames``), or ``{"type": "error", "message"}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .transport import Connection, ServedError

FrameCallback = Callable[[np.ndarray], None]
#: what a malformed msgpack (or msgpack_numpy) message raises: msgpack's own errors, a bad dtype / buffer size
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
    the chunks, and the unknown message types it sent."""

    sent: dict[str, Any] = field(default_factory=dict)
    server_hello: dict[str, Any] | None = None
    chunks: dict[int, ChunkRecord] = field(default_factory=dict)
    frames: int = 0
    other_messages: dict[str, int] = field(default_factory=dict)
    closed_by_server: str | None = None
    t_sent: float = 0.0

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


def _frames_from_payload(header: dict[str, Any], payload: bytes, height: int, width: int) -> list[np.ndarray]:
    """RGB uint8 frames of one SGLang frame batch, checked against the header and the size the session asked for."""
    n = int(header.get("num_frames", 0))
    fmt = str(header.get("format", header.get("encoding", "")))
    w, h = int(header.get("width", -1)), int(header.get("height", -1))
    where = f"chunk {header.get('chunk_index')} batch {header.get('frame_batch_index')}"
    if (h, w) != (height, width):
        raise ServedError(f"frame batch of the wrong size: {where} is {w}x{h}, the session asked for {width}x{height}",
                          "wrong frame size")
    if "total_size" in header and int(header["total_size"]) != len(payload):
        raise ServedError(f"frame batch of the wrong size: {where} announced {header['total_size']} bytes, "
                          f"{len(payload)} arrived", "wrong frame size")
    if fmt == "rgb24" or header.get("encoding") == "raw":
        channels = int(header.get("channels", 3))
        per = int(header.get("bytes_per_frame", height * width * channels))
        if channels != 3 or per != height * width * 3 or len(payload) != n * per:
            raise ServedError(f"frame batch of the wrong size: {where} holds {len(payload)} bytes for {n} frame(s) "
                              f"of {height}x{width}x3 ({n * height * width * 3} expected)", "wrong frame size")
        return list(np.frombuffer(payload, np.uint8).reshape(n, height, width, 3))
    lengths = [int(x) for x in header.get("payload_lengths") or []]
    if len(lengths) != n or sum(lengths) != len(payload):
        raise ServedError(f"frame batch of the wrong size: {where} has payload_lengths {lengths} for {n} frame(s) "
                          f"and {len(payload)} bytes", "wrong frame size")
    import cv2

    out, pos = [], 0
    for ln in lengths:
        img = cv2.imdecode(np.frombuffer(payload[pos:pos + ln], np.uint8), cv2.IMREAD_COLOR)
        pos += ln
        if img is None or img.shape[:2] != (height, width):
            raise ServedError(f"frame batch of the wrong size: {where} holds an undecodable or {width}x{height}-"
                              "mismatched image", "wrong frame size")
        out.append(np.ascontiguousarray(img[:, :, ::-1]))
    return out


def run_sglang(conn: Connection, init: dict[str, Any], *, height: int, width: int, total_frames: int,
               max_chunks: int, chunk_frames: tuple[int, int] | None, on_frame: FrameCallback) -> Session:
    """One SGLang realtime session: send ``init`` (already complete), stream every frame to ``on_frame``.

    Complete when ``total_frames`` frames and the ``chunk_stats`` of all ``max_chunks`` chunks have arrived (or
    the server closed normally once every frame was in). ``chunk_frames``: (first chunk, later chunks) frame counts
    the model produces, checked per chunk when known.
    """
    import msgpack
    from websockets.exceptions import ConnectionClosedOK  # noqa: F401  (the transport maps closes to ServedError)

    s = Session(sent={k: (f"<{len(v)} bytes>" if isinstance(v, (bytes, bytearray)) else v) for k, v in init.items()})
    s.t_sent = time.perf_counter()
    conn.send(msgpack.packb(init, use_bin_type=True))
    stats_seen: set[int] = set()
    pending: dict[str, Any] | None = None
    while not (s.frames == total_frames and len(stats_seen) >= max_chunks):
        try:
            data, t = conn.recv()
        except ServedError as exc:
            if exc.kind == "closed mid-stream" and s.frames == total_frames and exc.close_code == 1000:
                s.closed_by_server = "1000 after every frame (some chunk_stats missing)"
                break
            exc.meta = {"session": s.to_dict()}
            raise
        if pending is not None:  # the binary payload that follows a frame_batch_header
            header, pending = pending, None
            if isinstance(data, str):
                raise ServedError("the server sent text where a frame payload was expected", "protocol",
                                  {"session": s.to_dict()})
            _deliver(s, header, bytes(data), t, height, width, total_frames, chunk_frames, on_frame)
            continue
        msg = _decode_map(data, "message")
        kind = msg.get("type")
        if kind == "frame_batch":
            _deliver(s, msg, bytes(msg.get("payload") or b""), t, height, width, total_frames, chunk_frames, on_frame)
        elif kind == "frame_batch_header":
            pending = msg
        elif kind == "chunk_stats":
            idx = int(msg.get("chunk_index", len(stats_seen)))
            stats_seen.add(idx)
            s.chunk(idx).server = {k: v for k, v in msg.items() if k != "type"}
            _check_chunk(s, idx, chunk_frames, max_chunks)
        elif kind == "error":
            text = str(msg.get("content", msg.get("message", "")))
            k = "admission refused" if "already active" in text or "busy" in text.lower() else "engine error"
            raise ServedError(f"the server reported an error: {text!r}", k, {"session": s.to_dict()})
        else:
            s.other_messages[str(kind)] = s.other_messages.get(str(kind), 0) + 1
    return s


def _deliver(s: Session, header: dict[str, Any], payload: bytes, t: float, height: int, width: int,
             total_frames: int, chunk_frames: tuple[int, int] | None, on_frame: FrameCallback) -> None:
    try:
        frames = _frames_from_payload(header, payload, height, width)
    except ServedError as exc:
        exc.meta = {"session": s.to_dict()}
        raise
    if s.frames + len(frames) > total_frames:
        raise ServedError(f"the server sent more frames than the session asked for ({s.frames + len(frames)} > "
                          f"{total_frames})", "wrong frame size", {"session": s.to_dict()})
    for f in frames:
        on_frame(f)
    s.arrive(int(header.get("chunk_index", 0)), len(frames), t)


def _check_chunk(s: Session, idx: int, chunk_frames: tuple[int, int] | None, max_chunks: int) -> None:
    """A chunk's statistics came: its frame count must be the model's (first chunk / later chunks)."""
    if idx >= max_chunks:
        raise ServedError(f"the server sent chunk {idx} of a session of {max_chunks} chunks", "protocol",
                          {"session": s.to_dict()})
    if chunk_frames is None:
        return
    want = chunk_frames[0] if idx == 0 else chunk_frames[1]
    got = s.chunk(idx).frames
    if got != want:
        raise ServedError(f"frame batch of the wrong size: chunk {idx} brought {got} frame(s), the model makes "
                          f"{want}", "wrong frame size", {"session": s.to_dict()})


# -- vLLM-Omni ----------------------------------------------------------------------------------------------------
def pack_numpy(obj: Any) -> bytes:
    """msgpack with numpy arrays as OpenPI's ``msgpack_numpy`` writes them (Physical-Intelligence/openpi
    ``packages/openpi-client/src/openpi_client/msgpack_numpy.py``: ``{b"__ndarray__": True, b"data", b"dtype",
    b"shape"}``), which vLLM-Omni's camera endpoint reads."""
    import msgpack

    def default(o: Any) -> Any:
        if isinstance(o, np.ndarray):
            if o.dtype.kind in "VOc":
                raise TypeError(f"unsupported dtype {o.dtype}")
            return {b"__ndarray__": True, b"data": np.ascontiguousarray(o).tobytes(), b"dtype": o.dtype.str,
                    b"shape": list(o.shape)}
        if isinstance(o, np.generic):
            return {b"__npgeneric__": True, b"data": o.item(), b"dtype": o.dtype.str}
        raise TypeError(f"cannot pack {type(o).__name__}")

    packed: bytes = msgpack.packb(obj, default=default, use_bin_type=True)
    return packed


def unpack_numpy(data: bytes) -> Any:
    """The inverse of :func:`pack_numpy` (maps with bytes or str keys)."""
    import msgpack

    def hook(o: dict[Any, Any]) -> Any:
        def get(k: str) -> Any:
            return o.get(k.encode(), o.get(k))

        if get("__ndarray__"):
            return np.ndarray(buffer=get("data"), dtype=np.dtype(get("dtype")), shape=tuple(get("shape")))
        if get("__npgeneric__"):
            return np.dtype(get("dtype")).type(get("data"))
        return o

    return msgpack.unpackb(data, object_hook=hook, raw=False, strict_map_key=False)


def _to_uint8(frames: Any, height: int, width: int, where: str) -> list[np.ndarray]:
    arr = [np.asarray(f) for f in (frames if isinstance(frames, (list, tuple)) else list(np.asarray(frames)))]
    out = []
    for f in arr:
        if f.shape != (height, width, 3):
            raise ServedError(f"frame batch of the wrong size: {where} holds a {tuple(f.shape)} frame, the session "
                              f"asked for ({height}, {width}, 3)", "wrong frame size")
        if f.dtype == np.uint8:
            out.append(np.ascontiguousarray(f))
        else:  # floats in [0, 1] (video_api_utils._normalize_frames)
            out.append(np.clip(np.rint(f.astype(np.float64) * 255.0), 0, 255).astype(np.uint8))
    return out


def run_vllm_camera(conn: Connection, request: dict[str, Any], *, height: int, width: int, total_frames: int,
                    on_frame: FrameCallback) -> Session:
    """One vLLM-Omni camera session: read the server's config, send the request, stream the frame messages."""
    hello, _ = conn.recv()
    s = Session()
    if isinstance(hello, (bytes, bytearray)):
        try:
            obj = unpack_numpy(bytes(hello))
        except _UNPACK_ERRORS:
            obj = None
        s.server_hello = obj if isinstance(obj, dict) else {"unparsed": True}
    s.sent = {k: ("<image>" if k == "image" else ({kk: list(np.shape(vv)) for kk, vv in v.items()} if k == "camera"
                                                   else v)) for k, v in request.items()}
    s.t_sent = time.perf_counter()
    conn.send(pack_numpy(request))
    total = None
    while True:
        try:
            data, t = conn.recv()
        except ServedError as exc:
            exc.meta = {"session": s.to_dict()}
            raise
        if isinstance(data, str):
            s.other_messages[data[:40]] = s.other_messages.get(data[:40], 0) + 1
            continue
        try:
            msg = unpack_numpy(bytes(data))
        except _UNPACK_ERRORS as exc:
            raise ServedError(f"undecodable message from the server ({type(exc).__name__})", "protocol",
                              {"session": s.to_dict()}) from None
        if not isinstance(msg, dict):
            raise ServedError("the server sent a non-map message", "protocol", {"session": s.to_dict()})
        kind = msg.get("type")
        if kind == "error":
            text = str(msg.get("message", msg.get("content", "")))
            k = "admission refused" if "busy" in text.lower() or "already" in text.lower() else "engine error"
            raise ServedError(f"the server reported an error: {text!r}", k, {"session": s.to_dict()})
        if kind != "frame":
            s.other_messages[str(kind)] = s.other_messages.get(str(kind), 0) + 1
            continue
        idx, total = int(msg.get("index", 0)), int(msg.get("total", 0))
        try:
            frames = _to_uint8(msg.get("video"), height, width, f"message {idx}")
        except ServedError as exc:
            exc.meta = {"session": s.to_dict()}
            raise
        if s.frames + len(frames) > total_frames:
            raise ServedError(f"the server sent more frames than the session asked for "
                              f"({s.frames + len(frames)} > {total_frames})", "wrong frame size",
                              {"session": s.to_dict()})
        for f in frames:
            on_frame(f)
        s.arrive(idx, len(frames), t)
        if idx == total - 1:
            break
    if s.frames != total_frames:
        raise ServedError(f"frame batch of the wrong size: the server finished after {s.frames} frame(s), the session "
                          f"asked for {total_frames}", "wrong frame size", {"session": s.to_dict()})
    return s
