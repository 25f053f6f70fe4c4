"""The engine clients' rules one at a time, in this process (``adapters/served/engines.py``): a scripted connection
plays the server's messages, so each rule of the SGLang and vLLM-Omni sessions (what completes a session, what
fails it and with which kind, the bounds on unknown messages and announced sizes) is stated without a socket.

The vLLM-Omni media bytes are the stand-in's fragmented MP4 (``tests/support/served_server.py``: the handler's
muxer settings of vllm-omni 0.30.0), the frame batches SGLang's (``realtime_output_adapter.py``); the end-to-end
runs against loopback servers are in ``test_served_cli.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import numpy as np
import pytest

from adapters.served import engines
from adapters.served.engines import Session, field_int, run_sglang, run_vllm_video
from adapters.served.geometry import ChunkPlan
from adapters.served.transport import ServedError
from tests.support.served_server import VllmVideoStandIn, frame_for

H, W = 16, 32


class Scripted:
    """A connection that plays ``script``: each entry a message (bytes or text) or a :class:`ServedError` to raise;
    past the end it raises a close without a close frame. Arrival times go up by 10 ms a message."""

    def __init__(self, script: list) -> None:
        self.script, self.sent, self.t = list(script), [], 100.0

    def send(self, data) -> None:
        self.sent.append(data)

    def recv(self):
        if not self.script:
            raise ServedError("closed", "closed mid-stream")
        item = self.script.pop(0)
        if isinstance(item, ServedError):
            raise item
        self.t += 0.01
        return item, self.t


def _pack(msg: dict) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def _batch(chunk: int, frames: list[np.ndarray], **extra) -> bytes:
    payload = b"".join(f.tobytes() for f in frames)
    return _pack({"type": "frame_batch", "chunk_index": chunk, "num_frames": len(frames), "format": "rgb24",
                  "width": W, "height": H, "channels": 3, "total_size": len(payload), "payload": payload, **extra})


def _stats(chunk: int, **extra) -> bytes:
    return _pack({"type": "chunk_stats", "chunk_index": chunk, "chunk_total_ms": 10.0 + chunk, **extra})


PLAN = ChunkPlan(num_frames=5, latents=3, chunk_frames=(1, 4))  # 1 frame, then 4


def _frames(n: int, start: int = 0) -> list[np.ndarray]:
    return [frame_for(1, start + i, H, W) for i in range(n)]


def _sglang(script: list, plan: ChunkPlan = PLAN, max_unknown: int = 64):
    got: list[np.ndarray] = []
    conn = Scripted(script)
    s = run_sglang(conn, {"type": "init", "first_frame": b"png-bytes", "num_frames": plan.num_frames},
                   height=H, width=W, plan=plan, on_frame=got.append, max_unknown=max_unknown)
    return s, got, conn


def _fails(kind: str, text: str, fn, *args, **kwargs) -> ServedError:
    with pytest.raises(ServedError) as info:
        fn(*args, **kwargs)
    assert info.value.kind == kind and text in str(info.value), (info.value.kind, str(info.value))
    assert info.value.root_cause == f"served backend ({kind}): {info.value}"  # what the run summary prints
    return info.value


# -- SGLang --------------------------------------------------------------------------------------------------------
def test_a_sglang_session_completes_with_every_frame_and_every_chunks_statistics():
    f = _frames(5)
    s, got, conn = _sglang([_batch(0, f[:1]), _stats(0), _batch(1, f[1:3]), _batch(1, f[3:]), _stats(1)])
    assert [g.tobytes() for g in got] == [x.tobytes() for x in f]
    assert s.frames == 5 and [s.chunks[k].frames for k in (0, 1)] == [1, 4]
    assert s.chunks[1].server == {"chunk_index": 1, "chunk_total_ms": 11.0}  # the statistics, without their type
    assert s.sent["first_frame"] == "<9 bytes>" and s.sent["num_frames"] == 5  # no image bytes in the record
    assert msgpack.unpackb(conn.sent[0])["first_frame"] == b"png-bytes" and len(conn.sent) == 1
    assert s.closed_by_server is None and conn.script == []


def test_sglang_waits_for_the_last_statistics_and_a_normal_close_after_every_frame_completes():
    f = _frames(5)
    # every frame, then a normal close without the last chunk_stats: complete, and it says what was missing
    s, got, _ = _sglang([_batch(0, f[:1]), _stats(0), _batch(1, f[1:]),
                         ServedError("closed", "closed mid-stream", close_code=1000)])
    assert len(got) == 5 and s.closed_by_server == "1000 after every frame (some chunk_stats missing)"
    # any other close, or a normal close before every frame, fails with the session recorded
    for code, frames in ((1011, f[1:]), (1000, f[1:4])):
        err = _fails("closed mid-stream", "closed", _sglang, [_batch(0, f[:1]), _stats(0), _batch(1, frames),
                                                                ServedError("closed", "closed mid-stream",
                                                                            close_code=code)])
        assert err.meta["session"]["frames"] == 1 + len(frames)


def test_a_frame_batch_header_announces_its_payload_which_comes_next_and_is_bounded():
    f = _frames(5)
    payload = b"".join(x.tobytes() for x in f[1:])
    header = {"type": "frame_batch_header", "chunk_index": 1, "num_frames": 4, "format": "rgb24", "width": W,
              "height": H, "total_size": len(payload)}
    s, got, _ = _sglang([_batch(0, f[:1]), _stats(0), _pack(header), payload, _stats(1)])
    assert len(got) == 5 and s.chunks[1].frames == 4
    # exactly the raw size of its frames is allowed; one byte more is refused before the payload is read
    _fails("wrong frame size", "announced a 3073-byte frame batch, more than 3072 bytes", _sglang,
           [_pack({**header, "num_frames": 2, "total_size": 2 * H * W * 3 + 1})])
    _fails("protocol", "text where a frame payload was expected", _sglang, [_pack(header), "not bytes"])


def test_each_sglang_fault_has_its_kind():
    f = _frames(5)
    _fails("admission refused", "another realtime session is already active", _sglang,
           [_pack({"type": "error", "content": "another realtime session is already active"})])
    _fails("admission refused", "Server BUSY", _sglang, [_pack({"type": "error", "message": "Server BUSY"})])
    _fails("engine error", "out of memory", _sglang, [_pack({"type": "error", "content": "out of memory"})])
    _fails("protocol", "payload is not bytes", _sglang, [_pack({"type": "frame_batch", "payload": "text"})])
    _fails("protocol", "text where a msgpack message was expected", _sglang, ["{}"])
    _fails("protocol", "a list where a msgpack map", _sglang, [_pack([1, 2])])
    _fails("protocol", "undecodable message", _sglang, [b"\xc1"])
    # more frames than the session asked for, a chunk past the plan, a chunk of the wrong frame count
    _fails("wrong frame size", "more frames than the session asked for (6 > 5)", _sglang,
           [_batch(0, f[:1]), _batch(1, f[1:]), _batch(1, f[:1])])
    _fails("protocol", "chunk 2 of a session of 2 chunks", _sglang, [_batch(2, f[:1])])
    _fails("protocol", "chunk 2 of a session of 2 chunks", _sglang, [_stats(2)])
    err = _fails("wrong frame size", "chunk 0 brought 2 frame(s), the engine's geometry makes 1", _sglang,
                 [_batch(0, f[:2]), _stats(0)])
    assert err.meta["session"]["frames"] == 2


def test_a_malformed_batch_fails_with_the_session_recorded():
    err = _fails("wrong frame size", "is 32x8, the session asked for 32x16", _sglang,
                 [_batch(0, [np.zeros((8, W, 3), np.uint8)], height=8)])
    assert err.meta == {"session": {**err.meta["session"], "frames": 0}}


def test_unknown_messages_are_counted_and_bounded():
    f = _frames(5)
    script = [_pack({"type": "progress"}), _pack({"type": "progress"}), _pack({"type": "x" * 50}),
              _batch(0, f[:1]), _stats(0), _batch(1, f[1:]), _stats(1)]
    s, _, _ = _sglang(script, max_unknown=3)  # exactly the most tolerated
    assert s.other_messages == {"progress": 2, "x" * 40: 1}  # a type is kept to 40 characters
    err = _fails("protocol", "4 messages of unknown types (more than backend.max_unknown_messages=3)", _sglang,
                 [_pack({"type": "progress"})] * 4, max_unknown=3)
    assert err.meta["session"]["other_messages"] == {"progress": 4}


def test_at_most_32_unknown_types_are_named_the_rest_count_as_other():
    s = Session(max_unknown=1000)
    for i in range(40):
        s.unknown(f"t{i:02d}")
    s.unknown("t00")  # a type already named keeps its own count
    assert len(s.other_messages) == 33 and s.other_messages["<other>"] == 8 and s.other_messages["t00"] == 2
    assert sum(s.other_messages.values()) == 41


def test_a_chunks_wall_time_runs_from_the_previous_chunks_last_frame():
    s = Session(t_sent=10.0)
    s.arrive(0, 1, 10.5)
    s.arrive(0, 2, 10.75)
    s.arrive(1, 4, 11.0)
    c0, c1 = s.chunks[0], s.chunks[1]
    assert (c0.first_frame_ms, c0.last_frame_ms, c0.wall_ms, c0.frames) == (500.0, 750.0, 750.0, 3)
    assert (c1.first_frame_ms, c1.last_frame_ms, c1.wall_ms, s.frames) == (1000.0, 1000.0, 250.0, 7)


@pytest.mark.parametrize("value, ok", [(0, True), (5, True), (-1, False), (True, False), (1.0, False), ("3", False),
                                       (None, False)])
def test_a_header_field_is_an_integer_at_least_its_bound(value, ok):
    msg = {"n": value}
    if ok:
        assert field_int(msg, "n", "here") == value
    else:
        _fails("protocol", f"malformed here: field 'n' is {value!r}, expected an integer >= 0", field_int, msg, "n",
               "here")
    assert field_int({}, "n", "here", default=7, low=7) == 7
    _fails("protocol", "expected an integer >= 8", field_int, {}, "n", "here", default=7, low=8)


# -- vLLM-Omni -----------------------------------------------------------------------------------------------------
class _Capture:
    """What the stand-in's muxer sends, without a socket."""

    def __init__(self) -> None:
        self.messages: list = []

    def send(self, data) -> None:
        self.messages.append(data)


def _vllm_messages(chunks: list[int], fault: str | None = None, height: int = H, width: int = W) -> list:
    """The stand-in's messages for a session of ``chunks`` frames a chunk (``height`` x ``width``), after
    ``video.start``."""
    cap, standin = _Capture(), VllmVideoStandIn(Path("."), fault=fault)
    frames, start = [], 0
    for n in chunks:
        frames.append([frame_for(2, start + i, height, width) for i in range(n)])
        start += n
    standin._stream(cap, "rid-1", frames, 16)
    return [json.dumps({"type": "video.start", "request_id": "rid-1", "config": {"fps": 16}}), *cap.messages]


VPLAN = ChunkPlan(num_frames=9, latents=3, chunk_frames=(1, 4, 4))


def _vllm(script: list, plan: ChunkPlan = VPLAN, height: int = H, width: int = W, max_unknown: int = 64):
    got: list[np.ndarray] = []
    conn = Scripted(script)
    s = run_vllm_video(conn, {"type": "session.start", "image_reference": {"image_url": "data:..."}, "seed": 2},
                       height=height, width=width, plan=plan, on_frame=got.append, max_unknown=max_unknown)
    return s, got, conn


def test_a_vllm_session_streams_the_decoded_frames_and_records_the_server():
    s, got, conn = _vllm(_vllm_messages([1, 4, 4]))
    assert len(got) == 9 and all(g.shape == (H, W, 3) and g.dtype == np.uint8 for g in got)
    want = [frame_for(2, i, H, W).astype(np.float64) for i in range(9)]
    # H.264 of a 32x16 frame is lossy: each decoded frame is nearest to its own source frame, so they come in order
    err = np.array([[float(np.abs(g - w).mean()) for w in want] for g in got])
    assert list(err.argmin(axis=1)) == list(range(9)), err.round(1)
    assert s.server_hello == {"request_id": "rid-1", "config": {"fps": 16}}
    assert [s.chunks[k].frames for k in range(3)] == [1, 4, 4] and s.frames == 9
    assert s.closed_by_server == "session.done after 4 message(s)"  # three media chunks and the trailer
    assert s.sent["image_reference"] == "<data URL>" and json.loads(conn.sent[0])["seed"] == 2


def test_each_vllm_fault_has_its_kind():
    good = _vllm_messages([1, 4, 4])
    meta = json.loads(good[1])
    _fails("protocol", "bytes without a video.chunk_metadata", _vllm, [good[0], b"\x00"])
    _fails("protocol", "undecodable message from the server", _vllm, ["{not json"])
    _fails("protocol", "a JSON value that is not an object", _vllm, ["[1]"])
    _fails("wrong frame size", f"chunk 0 announced {meta['byte_length']} bytes, 3 arrived", _vllm,
           [good[1], b"abc"])
    _fails("wrong frame size", "arrived", _vllm, [good[1], "text"])
    _fails("wrong frame size", "chunk 0 brought 2 frame(s), the engine's geometry makes 1", _vllm,
           [json.dumps({**meta, "num_frames": 2})])
    _fails("protocol", "kind 'trailer' with 1 frame(s)", _vllm, [json.dumps({**meta, "kind": "trailer"})])
    _fails("protocol", "kind 'media' with 0 frame(s)", _vllm, [json.dumps({**meta, "num_frames": 0})])
    _fails("protocol", "kind 'other'", _vllm, [json.dumps({**meta, "kind": "other"})])
    _fails("protocol", "chunk 1 of a session of 1 chunks", _vllm, good[1:3] + [good[3]],
           plan=ChunkPlan(num_frames=1, latents=1, chunk_frames=(1,)))
    _fails("wrong frame size", "the session ended after 1 of 3 chunks", _vllm,
           good[:3] + [json.dumps({"type": "session.done", "chunks": 1})])
    _fails("protocol", "field 'chunks' is None", _vllm, good[:7] + [json.dumps({"type": "session.done"})])
    _fails("admission refused", "server busy", _vllm, [json.dumps({"type": "error", "message": "server busy"})])
    _fails("admission refused", "at Capacity", _vllm, [json.dumps({"type": "error", "content": "at Capacity"})])
    _fails("engine error", "CUDA error", _vllm, [json.dumps({"type": "error", "message": "CUDA error"})])


def test_an_announced_size_is_bounded_by_the_raw_size_of_its_frames():
    raw = H * W * 3
    bound = 1 * raw + (1 << 20)  # one frame's raw size plus 1 MiB for the container
    meta = {"type": "video.chunk_metadata", "kind": "media", "num_frames": 1}
    # at the bound the bytes are awaited (then their count is checked), one byte more is refused at once
    _fails("wrong frame size", f"announced {bound} bytes, 1 arrived", _vllm, [json.dumps({**meta, "byte_length":
                                                                                          bound}), b"x"])
    _fails("wrong frame size", f"announced {bound + 1} bytes for 1 frame(s), more than their raw size", _vllm,
           [json.dumps({**meta, "byte_length": bound + 1})])
    trailer = {"type": "video.chunk_metadata", "kind": "trailer", "num_frames": 0}  # a trailer counts as one frame
    _fails("wrong frame size", "more than their raw size", _vllm, [json.dumps({**trailer, "byte_length": bound + 1})])


def test_the_decoded_stream_is_checked_against_the_session():
    good = _vllm_messages([1, 4, 4])
    _fails("wrong frame size", "the stream holds 32x16 frames, the session asked for 64x16", _vllm, good,
           width=64)
    two = ChunkPlan(num_frames=2, latents=2, chunk_frames=(1, 1))
    short = _vllm_messages([1, 1])
    s, got, _ = _vllm(short, plan=two)
    assert len(got) == 2 and s.frames == 2
    # the metadata promises 1 + 1 frames, the stream holds 1 + 4: more frames than asked for
    lying = _vllm_messages([1, 4])
    lying[3] = json.dumps({**json.loads(lying[3]), "num_frames": 1})
    _fails("wrong frame size", "more frames than the session asked for (> 2)", _vllm, lying, plan=two)
    # the metadata promises 1 + 4, the stream holds 1 + 1: fewer frames than asked for
    fewer = _vllm_messages([1, 1])
    fewer[3] = json.dumps({**json.loads(fewer[3]), "num_frames": 4})
    _fails("wrong frame size", "the stream decodes to 2 frame(s), the session asked for 5", _vllm, fewer,
           plan=ChunkPlan(num_frames=5, latents=2, chunk_frames=(1, 4)))


def test_bytes_that_do_not_decode_are_a_protocol_error():
    plan = ChunkPlan(num_frames=1, latents=1, chunk_frames=(1,))
    garbage = b"\x00" * 64
    script = [json.dumps({"type": "video.chunk_metadata", "kind": "media", "num_frames": 1, "byte_length": 64}),
              garbage, json.dumps({"type": "session.done", "chunks": 1})]
    _fails("protocol", "does not decode", _vllm, script, plan=plan)


def test_vllm_unknown_messages_are_bounded_and_a_transport_fault_keeps_the_session():
    good = _vllm_messages([1, 4, 4])
    s, _, _ = _vllm([json.dumps({"type": "progress"})] * 2 + good, max_unknown=2)
    assert s.other_messages == {"progress": 2}
    _fails("protocol", "3 messages of unknown types", _vllm, [json.dumps({"type": "progress"})] * 3, max_unknown=2)
    err = _fails("timeout", "stalled", _vllm, good[:3] + [ServedError("stalled", "timeout")])
    assert err.meta["session"]["frames"] == 1 and err.meta["session"]["server_hello"]["request_id"] == "rid-1"


def test_the_engines_module_decodes_nothing_before_session_done():
    """The spool is decoded only once ``session.done`` came: a session that dies mid-stream hands on no frame."""
    good = _vllm_messages([1, 4, 4])
    got: list[np.ndarray] = []
    with pytest.raises(ServedError):
        run_vllm_video(Scripted(good[:5]), {"type": "session.start"}, height=H, width=W, plan=VPLAN,
                       on_frame=got.append)
    assert got == [] and engines.Session is Session


# -- SGLang frame batches, field by field -----------------------------------------------------------------------------
def _header(n: int, height: int = H, width: int = W, **extra) -> dict:
    return {"chunk_index": 0, "num_frames": n, "format": "rgb24", "width": width, "height": height, **extra}


def test_a_raw_batch_is_read_with_or_without_its_optional_fields():
    from adapters.served.engines import _frames_from_payload

    f = _frames(2)
    raw = b"".join(x.tobytes() for x in f)
    for header in (_header(2), _header(2, total_size=len(raw)), _header(2, channels=3, bytes_per_frame=H * W * 3),
                   {**{k: v for k, v in _header(2).items() if k != "format"}, "encoding": "raw"}):
        got = _frames_from_payload(header, raw, H, W)
        assert [g.tobytes() for g in got] == [x.tobytes() for x in f], header
    one = np.full((1, 1, 3), 7, np.uint8)  # the smallest frame a session can ask for
    assert _frames_from_payload(_header(1, 1, 1), one.tobytes(), 1, 1)[0].tolist() == one.tolist()


@pytest.mark.parametrize("changes, kind, text", [
    ({"channels": 4}, "wrong frame size", "holds 3072 bytes for 2 frame(s)"),  # 4 channels, the same bytes
    ({"channels": 4, "bytes_per_frame": 1536}, "wrong frame size", "holds 3072 bytes"),  # only the channels wrong
    ({"channels": 1}, "wrong frame size", "holds 3072 bytes"),  # a count, only wrong: not malformed
    ({"bytes_per_frame": 1536 + 3, "total_size": None}, "wrong frame size", "(3072 expected)"),
    ({"bytes_per_frame": 1}, "wrong frame size", "holds 3072 bytes"),  # a size, only wrong: not malformed
    ({"total_size": 3071}, "wrong frame size", "announced 3071 bytes, 3072 arrived"),
    ({"num_frames": 3}, "wrong frame size", "for 3 frame(s)"),
])
def test_each_raw_size_fact_is_checked(changes, kind, text):
    from adapters.served.engines import _frames_from_payload

    raw = b"".join(x.tobytes() for x in _frames(2))
    header = {**_header(2, total_size=len(raw)), **changes}
    header = {k: v for k, v in header.items() if v is not None}
    _fails(kind, text, _frames_from_payload, header, raw, H, W)


def test_a_frame_size_other_than_the_sessions_is_refused_even_when_the_bytes_add_up():
    from adapters.served.engines import _frames_from_payload

    per = H * W * 3 + 3  # 3 bytes more a frame, announced and delivered consistently
    _fails("wrong frame size", "holds 3078 bytes for 2 frame(s)", _frames_from_payload,
           _header(2, bytes_per_frame=per), b"\0" * (2 * per), H, W)


def _encoded(frames: list[np.ndarray], ext: str = ".png") -> tuple[list[int], bytes]:
    import cv2

    parts = [cv2.imencode(ext, np.ascontiguousarray(f[:, :, ::-1]))[1].tobytes() for f in frames]
    return [len(p) for p in parts], b"".join(parts)


def test_encoded_frames_come_back_as_rgb_in_order():
    from adapters.served.engines import _frames_from_payload

    f = _frames(3)
    lengths, payload = _encoded(f)
    got = _frames_from_payload(_header(3, format="png", payload_lengths=lengths), payload, H, W)
    assert [g.tobytes() for g in got] == [x.tobytes() for x in f]  # PNG is lossless: the RGB bytes, not BGR


@pytest.mark.parametrize("lengths, kind, text", [
    ("not a list", "protocol", "payload_lengths is not a list"),
    ([True, 10], "protocol", "payload_lengths is [True, 10]"),
    ([1.5, 10], "protocol", "payload_lengths is [1.5, 10]"),
    ([-1, 10], "protocol", "payload_lengths is [-1, 10]"),
    ([0, None], "protocol", "payload_lengths is [0, None]"),  # one bad entry among good ones
    (None, "protocol", "payload_lengths is None"),  # missing: not a list (never iterated)
])
def test_malformed_payload_lengths_are_a_protocol_error(lengths, kind, text):
    from adapters.served.engines import _frames_from_payload

    _fails(kind, text, _frames_from_payload, _header(2, format="png", payload_lengths=lengths), b"x" * 10, H, W)


def test_payload_lengths_must_match_the_frames_and_the_bytes():
    from adapters.served.engines import _frames_from_payload

    f = _frames(2)
    lengths, payload = _encoded(f)
    fmt = {"format": "png"}
    _fails("wrong frame size", "for 3 frame(s)", _frames_from_payload,
           _header(3, payload_lengths=lengths, **fmt), payload, H, W)  # the bytes add up, the count does not
    _fails("wrong frame size", f"and {len(payload) - 1} bytes", _frames_from_payload,
           _header(2, payload_lengths=lengths, **fmt), payload[:-1], H, W)  # the count adds up, the bytes do not
    # a zero length is well-formed, and an empty image does not decode
    _fails("wrong frame size", "undecodable", _frames_from_payload,
           _header(2, payload_lengths=[0, len(payload)], **fmt), payload, H, W)
    _fails("wrong frame size", "undecodable", _frames_from_payload,
           _header(1, payload_lengths=[5], **fmt), b"hello", H, W)
    small_lengths, small = _encoded([np.zeros((8, W, 3), np.uint8)])
    _fails("wrong frame size", "mismatched image", _frames_from_payload,
           _header(1, payload_lengths=small_lengths, **fmt), small, H, W)  # decodes, at another size


def test_a_frame_batch_without_a_payload_is_a_size_fault_and_long_errors_are_cut():
    _fails("wrong frame size", "holds 0 bytes", _sglang,
           [_pack({"type": "frame_batch", "chunk_index": 0, "num_frames": 1, "format": "rgb24", "width": W,
                   "height": H})])
    err = _fails("engine error", "the server reported an error: 'xxx", _sglang,
                 [_pack({"type": "error", "content": "x" * 400})])
    assert str(err) == f"the server reported an error: {'x' * 300!r}"


def test_a_chunk_record_rounds_to_the_microsecond_and_skips_chunks_without_frames():
    s = Session(t_sent=0.0)
    s.chunk(0)  # its statistics came, no frame yet
    s.arrive(1, 1, 0.00123456)
    assert s.chunks[1].to_dict()["first_frame_ms"] == 1.235 and s.chunks[1].wall_ms == pytest.approx(1.23456)
    assert s.chunks[0].to_dict() == {"index": 0, "frames": 0, "first_frame_ms": None, "last_frame_ms": None,
                                     "wall_ms": None, "server": None}


def test_three_chunks_time_from_the_latest_previous_frame():
    s = Session(t_sent=0.0)
    s.arrive(0, 1, 0.5)
    s.arrive(1, 4, 1.0)
    s.arrive(2, 4, 1.25)
    assert s.chunks[2].wall_ms == 250.0  # from chunk 1's last frame (1000 ms), the latest before it


def test_maps_with_integer_keys_are_read():
    """msgpack maps from a server may carry integer keys beside the named ones: read, not refused."""
    f = _frames(5)
    s, got, _ = _sglang([_batch(0, f[:1]), _pack({"type": "chunk_stats", "chunk_index": 0, 7: "x"}),
                         _batch(1, f[1:]), _stats(1)])
    assert len(got) == 5 and s.chunks[0].server == {"chunk_index": 0, 7: "x"}


def test_a_header_of_one_frame_and_a_batch_without_its_chunk_index():
    f = _frames(5)
    one = f[0].tobytes()
    header = {"type": "frame_batch_header", "chunk_index": 0, "num_frames": 1, "format": "rgb24", "width": W,
              "height": H, "total_size": len(one)}
    no_index = _pack({"type": "frame_batch", "num_frames": 4, "format": "rgb24", "width": W, "height": H,
                      "payload": b"".join(x.tobytes() for x in f[1:])})
    # chunk 0: one frame by header and payload; then 4 frames with no chunk_index, which read as chunk 0: its
    # statistics then find 5 frames where the engine makes 1
    _fails("wrong frame size", "chunk 0 brought 5 frame(s)", _sglang, [_pack(header), one, no_index, _stats(0)])
    s, got, _ = _sglang([_pack(header), one, _stats(0), _batch(1, f[1:]), _stats(1)])
    assert len(got) == 5 and s.chunks[0].frames == 1


def test_the_clients_tolerate_64_unknown_messages_by_default():
    f = _frames(5)
    got: list = []
    unknown = [_pack({"type": "progress"})] * 64
    s = run_sglang(Scripted([*unknown, _batch(0, f[:1]), _stats(0), _batch(1, f[1:]), _stats(1)]), {"type": "init"},
                   height=H, width=W, plan=PLAN, on_frame=got.append)
    assert s.other_messages == {"progress": 64}
    _fails("protocol", "65 messages of unknown types (more than backend.max_unknown_messages=64)", run_sglang,
           Scripted([*unknown, _pack({"type": "progress"})]), {"type": "init"}, height=H, width=W, plan=PLAN,
           on_frame=got.append)
    progress = [json.dumps({"type": "progress"})] * 64
    s = run_vllm_video(Scripted([*progress, *_vllm_messages([1, 4, 4])]), {"type": "session.start"}, height=H,
                       width=W, plan=VPLAN, on_frame=got.append)
    assert s.other_messages == {"progress": 64}
    _fails("protocol", "65 messages of unknown types", run_vllm_video, Scripted([*progress, progress[0]]),
           {"type": "session.start"}, height=H, width=W, plan=VPLAN, on_frame=got.append)


def test_vllm_text_in_place_of_announced_bytes_and_long_fields_are_cut():
    meta = {"type": "video.chunk_metadata", "kind": "media", "num_frames": 1, "byte_length": 4}
    _fails("wrong frame size", "announced 4 bytes, text arrived", _vllm, [json.dumps(meta), "abcd"])
    err = _fails("engine error", "the server reported an error", _vllm,
                 [json.dumps({"type": "error", "message": "y" * 400})])
    assert str(err) == f"the server reported an error: {'y' * 300!r}"
    s, _, _ = _vllm([json.dumps({"type": "video.start", "request_id": "r" * 250}), *_vllm_messages([1, 4, 4])[1:]])
    assert s.server_hello["request_id"] == "r" * 200


def test_the_announced_bound_grows_with_the_chunks_frames():
    raw = H * W * 3
    plan = ChunkPlan(num_frames=4, latents=1, chunk_frames=(4,))
    bound = 4 * raw + (1 << 20)  # four frames' raw size plus 1 MiB
    meta = {"type": "video.chunk_metadata", "kind": "media", "num_frames": 4}
    _fails("wrong frame size", f"announced {bound} bytes, 1 arrived", _vllm,
           [json.dumps({**meta, "byte_length": bound}), b"x"], plan=plan)
    _fails("wrong frame size", "more than their raw size", _vllm, [json.dumps({**meta, "byte_length": bound + 1})],
           plan=plan)


def test_a_fresh_session_counts_from_zero_and_tolerates_64_unknown_messages():
    s = Session()
    s.arrive(0, 1, 0.5)
    assert s.chunks[0].first_frame_ms == 500.0  # no send time yet: times count from 0
    for _ in range(64):
        s.unknown("progress")
    with pytest.raises(ServedError, match="65 messages of unknown types"):
        s.unknown("progress")
