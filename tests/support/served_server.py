"""Loopback stand-ins for served world models, speaking the engines' published messages on 127.0.0.1.

* :class:`SGLangStandIn`: SGLang's ``/v1/realtime_video/generate`` as sglang 0.5.23 (PyPI) sends it
  (``python/sglang/multimodal_gen/runtime/entrypoints/openai/realtime/realtime_video_api.py``,
  ``realtime_output_adapter.py``): an ``init`` map in, per chunk either ``frame_batch`` maps (payload inline, under
  64 KiB) or ``frame_batch_header`` + binary payload, then ``chunk_stats``; close 1000 after ``max_chunks``; busy:
  an ``error`` map and close 1008.
* :class:`VllmCameraStandIn`: vLLM-Omni's ``/v1/realtime/world/camera`` (vllm-project/vllm-omni@bfa9b596
  ``camera_connection.py``): the server's config first, one msgpack_numpy request in, ``frame`` messages of 4 frames.

Frames are a deterministic function of (seed, frame index), so a test knows exactly what was streamed. ``fault``
plants one failure: ``close_mid`` (the connection drops after chunk 0, no close frame), ``busy`` (admission
refused), ``wrong_size`` (a batch whose payload is short by one row), ``slow`` (stalls before chunk 1),
``error`` (an engine error message), ``no_last_stats`` (every frame, then a normal close without the last
``chunk_stats``: not a fault), ``http503`` / ``http401`` (the handshake answered with that status).
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

    def __init__(self, fault: str | None = None, chunk: int = 4, slow_s: float = 3.0,
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
            if self.fault == "no_last_stats" and k == chunks - 1:
                continue  # every frame sent, the last chunk_stats lost, then a normal close
            self.sent_stats.append(stats)
            ws.send(msgpack.packb(stats))
        ws.close(code=1000, reason="generation complete")


class VllmCameraStandIn(_Base):
    """vLLM-Omni's world-camera route: frames in [0, 1] (float32), ``frames_per_chunk`` per message."""

    def _handle(self, ws) -> None:
        from adapters.served.engines import pack_numpy, unpack_numpy

        ws.send(pack_numpy({"model": "lingbot-world-fast", "num_frames_per_block": 4}))
        req = unpack_numpy(ws.recv())
        self.requests.append(req)
        eb = req["extra_body"]
        H, W, N, seed = int(eb["height"]), int(eb["width"]), int(eb["num_frames"]), int(eb["seed"])
        per = int(eb.get("frames_per_chunk", 4))
        assert req["camera"]["poses"].shape == (N, 4, 4) and req["camera"]["intrinsics"].shape == (N, 4)
        frames = [frame_for(seed, i, H, W) for i in range(N)]
        total = -(-N // per)
        for i in range(total):
            chunk = frames[i * per:(i + 1) * per]
            if self.fault == "wrong_size" and i == 1:
                chunk = [f[:-1] for f in chunk]
            ws.send(pack_numpy({"type": "frame", "index": i, "total": total,
                                "video": [f.astype(np.float32) / 255.0 for f in chunk]}))
            self.sent_frames.extend(chunk)
            if self.fault == "close_mid" and i == 1:
                ws.socket.close()
                return
