"""Loopback stand-ins for served world models, speaking the engines' published messages on 127.0.0.1.

* :class:`SGLangStandIn`: SGLang's ``/v1/realtime_video/generate`` as sglang 0.5.23 (PyPI) sends it
  (``python/sglang/multimodal_gen/runtime/entrypoints/openai/realtime/realtime_video_api.py``,
  ``realtime_output_adapter.py``): an ``init`` map in, per chunk either ``frame_batch`` maps (payload inline, under
  64 KiB) or ``frame_batch_header`` + binary payload, then ``chunk_stats``; close 1000 after ``max_chunks``; busy:
  an ``error`` map and close 1008.
* :class:`VllmVideoStandIn`: vLLM-Omni 0.30.0's ``/v1/realtime/video`` (``serving_video_output_stream.py``): one JSON
  ``session.start`` in; ``video.start``, per chunk ``video.chunk_metadata`` + fragmented-MP4 bytes (H.264, encoded
  here with PyAV as the handler's ``create_streaming_video_encoder`` does), ``session.done``. LingBot v2's chunk
  rule (9 frames, then 12). It reads the poses the client put under ``action_root``.

The chunk geometry is the engine's (``chunk`` latents a chunk, causal Wan: ``1 + 4 (c - 1)`` frames in chunk 0,
``4 c`` after), or ``chunk_sizes`` frames per chunk.
Frames are a deterministic function of (seed, frame index), so a test knows exactly what was streamed. ``fault``
plants one failure: ``close_mid`` (the connection drops after chunk 0, no close frame), ``busy`` (admission
refused), ``wrong_size`` (a batch whose payload is short by one row), ``slow`` (stalls before chunk 1),
``error`` (an engine error message), ``no_last_stats`` (every frame, then a normal close without the last
``chunk_stats``: not a fault), ``close_1011`` (every frame, then close 1011 without the last ``chunk_stats``),
``http503`` / ``http429`` / ``http401`` (the handshake answered with that status), ``announce_huge`` (a header
announcing a 1 GB batch), ``oversize`` (a websocket frame header announcing 1 GB, then a trickle), ``trickle``
(unknown messages, forever), ``bad_header`` (a malformed ``num_frames``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import msgpack
import numpy as np


def frame_for(seed: int, index: int, height: int, width: int) -> np.ndarray:
    """The stand-in's frame ``index``: smooth gradients whose colours move with the index (an H.264-friendly,
    index-unique picture)."""
    y = np.linspace(0, 1, height)[:, None]
    x = np.linspace(0, 1, width)[None, :]
    ph = (index * 0.37 + seed * 0.11) % 1.0
    r = 40 + 160 * ((x + ph) % 1.0)
    g = 40 + 160 * ((y + 2 * ph) % 1.0) + 0 * x
    b = 60 + 120 * (0.5 + 0.5 * np.sin(6.28 * (x + y + ph)))
    return np.clip(np.stack(np.broadcast_arrays(r, g, b), -1), 0, 255).astype(np.uint8)


class _Base:
    def __init__(self, fault: str | None = None, slow_s: float = 3.0):
        self.fault, self.slow_s = fault, slow_s
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.sent_frames: list[np.ndarray] = []
        self.sent_stats: list[dict[str, Any]] = []
        self._server = None
        self._thread = None

    def __enter__(self):
        from websockets.sync.server import serve

        self._server = serve(self._handle, "127.0.0.1", 0, max_size=None, ping_interval=None,
                             process_request=self._gate)
        self.port = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._thread.join(5)

    def _gate(self, connection, request):
        """HTTP answers before the upgrade: 503 (a gateway's busy), 401 (a token the gateway does not take)."""
        from http import HTTPStatus

        self.headers.append({k.lower(): v for k, v in request.headers.raw_items()})
        if self.fault == "http503":
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "busy\n")
        if self.fault == "http429":
            return connection.respond(HTTPStatus.TOO_MANY_REQUESTS, "slow down\n")
        if self.fault == "http401":
            return connection.respond(HTTPStatus.UNAUTHORIZED, "bad token\n")
        return None

    @property
    def endpoint(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _handle(self, ws) -> None:  # pragma: no cover - overridden
        raise RuntimeError


class SGLangStandIn(_Base):
    """SGLang's realtime video route (messages of sglang 0.5.23); LingBot's chunk rule: 1 + 4 (c - 1) frames in
    chunk 0, 4 c after (``chunk`` latents per chunk), or ``chunk_sizes`` frames per chunk."""

    def __init__(self, fault: str | None = None, chunk: int = 3, slow_s: float = 3.0,
                 frames_per_message: int = 16, chunk_sizes: list[int] | None = None):
        super().__init__(fault, slow_s)
        self.chunk, self.frames_per_message, self.chunk_sizes = chunk, frames_per_message, chunk_sizes

    def _handle(self, ws) -> None:
        init = msgpack.unpackb(ws.recv(), raw=False)
        assert init["type"] == "init"
        self.requests.append(init)
        if self.fault == "busy":
            ws.send(msgpack.packb({"type": "error", "content": "another realtime session is already active"}))
            ws.close(code=1008)
            return
        W, H = (int(v) for v in init["size"].split("x"))
        seed, chunks = int(init.get("seed", 42)), int(init["max_chunks"])
        if self.fault in ("announce_huge", "oversize", "trickle", "bad_header"):
            self._hostile(ws, W, H)
            return
        idx = 0
        for k in range(chunks):
            if self.fault == "slow" and k == 1:
                time.sleep(self.slow_s)
            if self.fault == "error" and k == 1:
                ws.send(msgpack.packb({"type": "error", "content": "error during generate loop: CUDA out of memory"}))
                continue
            if self.chunk_sizes is not None:  # another model's chunking (SANA-WM: 8 frames per latent)
                n = self.chunk_sizes[k]
            else:
                n = 1 + 4 * (self.chunk - 1) if k == 0 else 4 * self.chunk
            frames = [frame_for(seed, idx + i, H, W) for i in range(n)]
            idx += n
            t0 = time.perf_counter()
            batches = [frames[i:i + self.frames_per_message] for i in range(0, n, self.frames_per_message)]
            for bi, batch in enumerate(batches):
                payload = b"".join(f.tobytes() for f in batch)
                if self.fault == "wrong_size" and k == 1:
                    payload = payload[: -W * 3]
                header = {"type": "frame_batch_header", "request_id": "r", "chunk_index": k,
                          "content_type": "application/x-raw-rgb", "num_frames": len(batch),
                          "total_size": len(payload), "frame_batch_index": bi, "num_frame_batches": len(batches),
                          "is_final_frame_batch": bi == len(batches) - 1, "format": "rgb24", "width": W,
                          "height": H, "channels": 3, "bytes_per_frame": W * H * 3, "raw_size": len(payload),
                          "encoding": "raw"}
                if len(payload) >= 64 * 1024:  # realtime_output_adapter.py FRAME_BATCH_PACK_OFFLOAD_BYTES
                    ws.send(msgpack.packb(header))
                    ws.send(payload)
                else:
                    ws.send(msgpack.packb({**header, "type": "frame_batch", "payload": payload}))
                self.sent_frames.extend(batch)
            if self.fault == "close_mid" and k == 0:
                ws.socket.close()  # the server process dies: no close frame
                return
            stats = {"type": "chunk_stats", "session_id": "s", "request_id": "r", "chunk_index": k,
                     "event_id": None, "request_prepare_ms": 1, "scheduler_forward_ms": 100 + 10 * k,
                     "pace_wait_ms": 0, "header_write_ms": 0, "raw_payload_build_ms": 0, "raw_write_ms": 0,
                     "ws_write_ms": 0, "chunk_total_ms": 120 + 10 * k + int((time.perf_counter() - t0) * 1000),
                     "num_batches": len(batches), "num_frames": n, "raw_bytes": n * W * H * 3,
                     "ws_payload_bytes": n * W * H * 3, "content_type": "application/x-raw-rgb"}
            if self.fault in ("no_last_stats", "close_1011") and k == chunks - 1:
                continue  # every frame sent, the last chunk_stats lost, then a close
            self.sent_stats.append(stats)
            ws.send(msgpack.packb(stats))
        if self.fault == "close_1011":
            ws.close(code=1011, reason="internal error")
            return
        ws.close(code=1000, reason="generation complete")

    def _hostile(self, ws, W: int, H: int) -> None:
        """The hostile servers: a header announcing 1 GB, a websocket frame announcing 1 GB (then a trickle of its
        payload), unknown messages forever, a malformed header field."""
        header = {"type": "frame_batch_header", "chunk_index": 0, "num_frames": 1, "format": "rgb24", "width": W,
                  "height": H, "channels": 3, "bytes_per_frame": W * H * 3, "total_size": W * H * 3}
        if self.fault == "announce_huge":
            ws.send(msgpack.packb({**header, "total_size": 1 << 30}))
        elif self.fault == "bad_header":
            ws.send(msgpack.packb({**header, "type": "frame_batch", "num_frames": "x", "payload": b"\0" * 9}))
        elif self.fault == "oversize":  # a binary frame whose header says 2**30 bytes; only 1 MB ever follows
            ws.socket.sendall(b"\x82\x7f" + (1 << 30).to_bytes(8, "big"))
            for _ in range(16):
                ws.socket.sendall(b"\0" * 65536)
        elif self.fault == "trickle":
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    ws.send(msgpack.packb({"type": "keepalive"}))
                except Exception:  # noqa: BLE001 - the client went away
                    return
                time.sleep(0.005)
        time.sleep(0.5)


class VllmVideoStandIn(_Base):
    """vLLM-Omni 0.30.0's ``/v1/realtime/video`` for LingBot v2: reads the poses the client wrote under
    ``action_root`` (as the engine's ``load_camera_trajectory`` would), streams ``chunk`` latents a chunk as
    fragmented MP4. ``sent_bytes``: the media bytes as sent (the test decodes them itself)."""

    def __init__(self, action_root, fault: str | None = None, chunk: int = 3):
        super().__init__(fault)
        self.action_root, self.chunk = action_root, chunk
        self.sent_bytes = b""
        self.cameras: list[dict[str, np.ndarray]] = []
        self.request_ids: list[str] = []

    def _handle(self, ws) -> None:
        import json
        import uuid

        msg = json.loads(ws.recv())
        assert msg["type"] == "session.start"
        self.requests.append(msg)
        folder = self.action_root / msg["extra_params"]["action_path"]
        self.cameras.append({k: np.load(folder / f"{k}.npy") for k in ("poses", "intrinsics")})
        if self.fault == "busy":
            ws.send(json.dumps({"type": "error", "message": "server busy: another session is active"}))
            return
        rid = f"video_stream-{uuid.uuid4().hex}"
        self.request_ids.append(rid)
        ws.send(json.dumps({"type": "video.start", "request_id": rid, "format": "m4s",
                            "config": {k: v for k, v in msg.items() if k not in ("type", "format", "image_reference")}}))
        H, W, N, seed = int(msg["height"]), int(msg["width"]), int(msg["num_frames"]), int(msg["seed"])
        c = self.chunk
        sizes = [1 + 4 * (c - 1)] + [4 * c] * (((N - 1) // 4 + 1) // c - 1)
        self._stream(ws, rid, [[frame_for(seed, sum(sizes[:k]) + i, H, W) for i in range(n)]
                               for k, n in enumerate(sizes)], msg["fps"])

    def _stream(self, ws, rid: str, chunks: list[list[np.ndarray]], fps) -> None:
        """The handler's fMP4 muxing (vllm-omni 0.30.0 ``diffusion/utils/media_utils.py::FragmentedMP4Muxer``:
        h264, crf 18, no B-frames, ``+frag_every_frame+empty_moov+default_base_moof``; the handler's codec options
        ultrafast / zerolatency), the bytes of each chunk sent after its metadata."""
        import io
        import json
        from fractions import Fraction

        import av

        buf = io.BytesIO()
        out = av.open(buf, mode="w", format="mp4", options={"movflags": "+frag_every_frame+empty_moov+default_base_moof"})
        st = out.add_stream("h264", rate=Fraction(fps).limit_denominator(10000))
        st.width, st.height, st.pix_fmt = chunks[0][0].shape[1], chunks[0][0].shape[0], "yuv420p"
        st.options = {"crf": "18", "preset": "ultrafast", "threads": "0", "tune": "zerolatency"}
        st.codec_context.max_b_frames = 0

        def take() -> bytes:
            data = buf.getvalue()
            buf.seek(0)
            buf.truncate()
            return data

        for k, frames in enumerate(chunks):
            for f in frames:
                for pkt in st.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                    out.mux(pkt)
            data = take()
            if self.fault == "close_mid" and k == 1:
                ws.socket.close()
                return
            n = len(frames) - (1 if self.fault == "wrong_size" and k == 1 else 0)
            ws.send(json.dumps({"type": "video.chunk_metadata", "request_id": rid, "kind": "media", "num_frames": n,
                                "byte_length": len(data), "generation_chunk_index": k, "transport_chunk_index": k}))
            ws.send(data)
            self.sent_bytes += data
            self.sent_frames.extend(frames)
        for pkt in st.encode():
            out.mux(pkt)
        out.close()
        tail = take()
        if tail:
            ws.send(json.dumps({"type": "video.chunk_metadata", "request_id": rid, "kind": "trailer",
                                "num_frames": 0, "byte_length": len(tail)}))
            ws.send(tail)
            self.sent_bytes += tail
        ws.send(json.dumps({"type": "session.done", "request_id": rid, "chunks": len(chunks) + 1, "stopped": False}))
