"""The served backend end to end through the command line, against loopback servers on 127.0.0.1.

``python -m harness model=lingbot_v2 backend=sglang endpoint=ws://127.0.0.1:PORT context=sliding`` (in process):
the item's video holds exactly the frames the server streamed (``video.frames_sha256`` is the hash of the raw
frames, independent of the codec), its context trace what the server was told and reported, its latency the
server's ``chunk_stats`` beside our clock. Each fault fails the item clearly (exit 1, nothing half-written) and the
next run completes it. The stand-ins speak the messages of sglang 0.5.23 and vllm-omni@bfa9b596
(tests/support/served_server.py); tests/adapters/served/test_sglang_engine.py runs SGLang's own route.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.video import frames_sha256, read_frames
from tests.support.cli import in_process_cli
from tests.support.served_server import SGLangStandIn, VllmCameraStandIn, frame_for

# 61 frames = 16 latents = 4 chunks of 4 (LingBot's rule: 13 frames in chunk 0, 16 after); 64 x 112 keeps it fast
SMALL = ["model.num_frames=61", "model.height=64", "model.width=112", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false", "run=served"]
ITEM = Path("outputs/served/lingbot_v2/sliding/seed-1/lrlr/environment_rocket")


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def _sglang(endpoint: str, *extra: str) -> list[str]:
    return ["model=lingbot_v2", "backend=sglang", f"endpoint={endpoint}", "context=sliding", *SMALL, *extra]


def _meta(tmp_path: Path, item: Path = ITEM) -> dict:
    return json.loads((tmp_path / item / "meta.json").read_text())


@pytest.mark.slow
def test_sglang_item_matches_what_the_server_streamed(cli, tmp_path):
    with SGLangStandIn() as srv:
        r = cli(*_sglang(srv.endpoint))
    assert r.code == 0, r.text
    item = tmp_path / ITEM
    meta = _meta(tmp_path)
    assert meta["status"] == "done"
    # the video: exactly the streamed frames, in order (raw-frame hash), and decodable to them
    assert len(srv.sent_frames) == 61
    assert meta["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)
    _, frames = read_frames(item / "video.mp4", indices=[0, 30, 60])
    for got, i in zip(frames, (0, 30, 60)):
        assert np.abs(got.astype(int) - srv.sent_frames[i].astype(int)).mean() < 4  # H.264 at crf 18
    # what the server was told: the init as the engine reads it, the sliding window on its cache
    init = srv.requests[0]
    assert init["size"] == "112x64" and init["max_chunks"] == 4 and init["seed"] == 1
    assert init["realtime_causal_sink_size"] == 4 and init["realtime_causal_kv_cache_num_frames"] == 20
    assert init["first_frame"] == (item / "controls" / "image.png").read_bytes()
    script = json.loads((item / "controls" / "camera_actions.json").read_text())
    assert init["condition_inputs"]["camera_actions"] == script and len(script) == 16 and script[0] == []
    trace = json.loads((item / "context_trace.json").read_text())
    told = {k: v for k, v in trace["told"].items() if k not in ("first_frame", "condition_inputs")}
    assert told == {k: v for k, v in init.items() if k not in ("first_frame", "condition_inputs")}
    # per chunk: the policy's selection (4 sink + 12 recent + 4 current) and what the server reported
    assert [c["served"]["frames"] for c in trace["chunks"]] == [13, 16, 16, 16]
    assert trace["chunks"][3]["sink"] == [0, 1, 2, 3] and trace["chunks"][3]["recent"] == list(range(4, 12))
    assert [c["served"]["server"]["chunk_total_ms"] for c in trace["chunks"]] == \
        [s["chunk_total_ms"] for s in srv.sent_stats]
    lat = meta["generation"]["served"]["latency"]
    assert lat["server_chunk_total_ms"] == [float(s["chunk_total_ms"]) for s in srv.sent_stats]
    assert lat["server_scheduler_forward_ms"] == [100.0, 110.0, 120.0, 130.0]
    assert len(lat["wall_chunk_ms"]) == 4 and all(x > 0 for x in lat["wall_chunk_ms"])
    # our clock adds up: the chunks' wall times sum to the last frame's arrival
    assert abs(sum(lat["wall_chunk_ms"]) - trace["chunks"][-1]["served"]["last_frame_ms"]) < 0.01
    # the residual of the key script, as for every lossy adapter; the engine's fixed K is recorded
    res = meta["controls"]["achieved_vs_requested"]
    assert res["max_rotation_error_deg"] >= 0 and "hfov_error_deg" in res
    assert meta["model"]["backend"]["engine"] == "sglang"
    # a rerun skips the finished item, also against a server on another port (the endpoint is not its identity)
    with SGLangStandIn() as srv2:
        r2 = cli(*_sglang(srv2.endpoint))
    assert r2.code == 0 and not srv2.requests, r2.text


def test_fullkv_tells_the_server_an_unbounded_window(cli, tmp_path):
    with SGLangStandIn() as srv:
        r = cli("model=lingbot_v2", "backend=sglang", f"endpoint={srv.endpoint}", "context=fullkv", *SMALL)
    assert r.code == 0, r.text
    init = srv.requests[0]
    assert init["realtime_causal_sink_size"] == 0 and init["realtime_causal_kv_cache_num_frames"] == 16
    trace = json.loads((tmp_path / str(ITEM).replace("sliding", "fullkv") / "context_trace.json").read_text())
    assert trace["chunks"][3]["context"] == list(range(12))


def test_fov_is_refused_at_planning_with_the_reason(cli, tmp_path):
    r = cli("model=lingbot_v2", "backend=sglang", "endpoint=ws://127.0.0.1:9", "context=fov", *SMALL)
    assert r.code == 2
    assert "context=fov" in r.err and "retrieval set" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("args,needle", [
    (["backend=sglang"], "endpoint"),  # a served backend without an endpoint
    (["backend=sglang", "endpoint=http://127.0.0.1:9"], "endpoint"),
    (["endpoint=ws://127.0.0.1:9"], "backend=upstream"),  # an endpoint for the local backend
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "+backend.tokn_env=X"], "backend.tokn_env"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "backend.chunk_timeout_s=0"], "backend.chunk_timeout_s"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "backend.token_env=not-a-name!"], "backend.token_env"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "+backend.models.lingbot_v2.bogus=1"],
     "backend.models.lingbot_v2.bogus"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "backend.models.lingbot_v2.controls=rays"],
     "backend.models.lingbot_v2.controls"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "backend.models.lingbot_v2.kinematics.per=chunk"],
     "backend.models.lingbot_v2.kinematics"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "model.num_frames=65"], "model.num_frames"),  # 17 latents
])
def test_bad_backend_settings_are_refused_before_writing(cli, tmp_path, args, needle):
    r = cli("model=lingbot_v2", "context=sliding", *SMALL, *args)
    assert r.code == 2, r.text
    assert needle in r.err and "Traceback" not in r.err
    assert not (tmp_path / "outputs").exists()


def test_a_model_the_engine_has_no_mapping_for_is_refused(cli, tmp_path):
    r = cli("model=yume", "backend=sglang", "endpoint=ws://127.0.0.1:9", "context=native", *SMALL[3:])
    assert r.code == 2 and "backend.models.yume" in r.err, r.text


def _failed_cleanly(tmp_path: Path, kind: str) -> dict:
    meta = _meta(tmp_path)
    assert meta["status"] == "failed"
    assert kind in meta["root_cause"]
    item = tmp_path / ITEM
    # nothing half-written: no video, no context trace, no temporary file
    assert not (item / "video.mp4").exists() and not (item / "context_trace.json").exists()
    assert not [p for p in item.rglob("*") if ".tmp" in p.name or p.name.startswith(".")]
    return meta


@pytest.mark.parametrize("fault,kind,extra", [
    ("close_mid", "closed mid-stream", []),
    ("busy", "admission refused", []),
    ("wrong_size", "wrong frame size", []),
    ("slow", "timeout", ["backend.chunk_timeout_s=0.5"]),
    ("error", "engine error", []),
    ("http503", "admission refused", []),  # a gateway's busy answer to the handshake
])
def test_each_fault_fails_the_item_and_the_next_run_completes_it(cli, tmp_path, fault, kind, extra):
    with SGLangStandIn(fault=fault, slow_s=2.0) as bad:
        r = cli(*_sglang(bad.endpoint, *extra))
    assert r.code == 1, r.text
    assert kind in r.text  # the run summary names the cause
    meta = _failed_cleanly(tmp_path, kind)
    if fault in ("close_mid", "wrong_size"):  # what arrived before the fault is recorded
        assert meta["generation"]["session"]["frames"] == 13
    with SGLangStandIn() as good:
        r2 = cli(*_sglang(good.endpoint, *extra))
    assert r2.code == 0, r2.text
    assert _meta(tmp_path)["video"]["frames_sha256"] == frames_sha256(good.sent_frames)


@pytest.mark.slow
def test_connection_refused_fails_the_item_and_a_rerun_completes_it(cli, tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = cli(*_sglang(f"ws://127.0.0.1:{port}"))
    assert r.code == 1 and "connection refused" in r.text
    _failed_cleanly(tmp_path, "connection refused")
    with SGLangStandIn() as good:
        assert cli(*_sglang(good.endpoint)).code == 0


@pytest.mark.slow
def test_the_token_goes_in_the_header_and_never_into_a_file_or_log(cli, tmp_path, monkeypatch):
    token = "s3cr3t-Endpoint-Value-4711"
    monkeypatch.setenv("WM_SERVED_TOKEN", token)
    with SGLangStandIn(fault="busy") as bad:  # a failed item writes its error and traceback too
        r1 = cli(*_sglang(bad.endpoint, "backend.token_env=WM_SERVED_TOKEN", "verbosity=debug"))
    with SGLangStandIn() as srv:
        r2 = cli(*_sglang(srv.endpoint, "backend.token_env=WM_SERVED_TOKEN", "verbosity=debug"))
    assert r1.code == 1 and r2.code == 0, r2.text
    assert srv.headers[0].get("authorization") == f"Bearer {token}"
    assert token not in r1.text + r2.text
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not [p for p in files if token.encode() in p.read_bytes()]
    assert _meta(tmp_path)["model"]["backend_connection"]["token_env"] == "WM_SERVED_TOKEN"


def test_a_token_the_gateway_refuses_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("WM_SERVED_TOKEN", "wrong-token-value-123")
    with SGLangStandIn(fault="http401") as srv:
        r = cli(*_sglang(srv.endpoint, "backend.token_env=WM_SERVED_TOKEN"))
    assert r.code == 1 and "HTTP 401" in r.text and "backend.token_env" in r.text
    assert "wrong-token-value-123" not in r.text


def test_an_unset_token_variable_fails_the_item_naming_it(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("WM_SERVED_TOKEN", raising=False)
    with SGLangStandIn() as srv:
        r = cli(*_sglang(srv.endpoint, "backend.token_env=WM_SERVED_TOKEN"))
    assert r.code == 1 and "WM_SERVED_TOKEN" in r.text and not srv.requests


def test_vllm_omni_camera_endpoint_gets_poses_and_intrinsics(cli, tmp_path):
    item = Path(str(ITEM).replace("sliding", "native"))
    with VllmCameraStandIn() as srv:
        r = cli("model=lingbot_v2", "backend=vllm_omni", f"endpoint={srv.endpoint}", "context=native", *SMALL)
    assert r.code == 0, r.text
    meta = _meta(tmp_path, item)
    assert meta["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)
    req = srv.requests[0]
    cam = np.load(tmp_path / "outputs/served/lingbot_v2/native/seed-1/lrlr/environment_rocket/camera.npz")
    np.testing.assert_allclose(req["camera"]["poses"], cam["c2w"].astype(np.float32))
    K = cam["K"]
    np.testing.assert_allclose(req["camera"]["intrinsics"][0], [K[0, 0], K[1, 1], K[0, 2], K[1, 2]], rtol=1e-6)
    assert req["extra_body"]["num_frames"] == 61 and req["image"].shape == (64, 112, 3)
    trace = json.loads((tmp_path / item / "context_trace.json").read_text())
    assert trace["server_hello"]["num_frames_per_block"] == 4
    assert meta["generation"]["served"]["latency"]["server_reports"].startswith("none")
    assert meta["controls"]["achieved_vs_requested"]["max_rotation_error_deg"] < 1e-3  # float32 poses
    # the frames came as floats in [0, 1]: back to the exact bytes
    assert frame_for(1, 0, 64, 112).tobytes() == srv.sent_frames[0].tobytes()


def test_vllm_omni_refuses_a_window_it_cannot_set(cli, tmp_path):
    r = cli("model=lingbot_v2", "backend=vllm_omni", "endpoint=ws://127.0.0.1:9", "context=sliding", *SMALL)
    assert r.code == 2 and "no cache setting per session" in r.err


@pytest.mark.slow
@pytest.mark.parametrize("fault,kind", [("wrong_size", "wrong frame size"), ("close_mid", "closed mid-stream")])
def test_vllm_omni_faults_fail_the_item(cli, tmp_path, fault, kind):
    item = Path(str(ITEM).replace("sliding", "native"))
    with VllmCameraStandIn(fault=fault) as srv:
        r = cli("model=lingbot_v2", "backend=vllm_omni", f"endpoint={srv.endpoint}", "context=native", *SMALL)
    assert r.code == 1 and kind in _meta(tmp_path, item)["root_cause"]
    assert not (tmp_path / item / "video.mp4").exists()
    with VllmCameraStandIn() as good:
        r2 = cli("model=lingbot_v2", "backend=vllm_omni", f"endpoint={good.endpoint}", "context=native", *SMALL)
    assert r2.code == 0 and _meta(tmp_path, item)["video"]["frames_sha256"] == frames_sha256(good.sent_frames)


def test_a_normal_close_after_every_frame_completes_the_item(cli, tmp_path):
    # the last chunk_stats never came, but every frame did and the server closed with 1000: the item is complete,
    # the missing statistics are said
    with SGLangStandIn(fault="no_last_stats") as srv:
        r = cli(*_sglang(srv.endpoint))
    assert r.code == 0, r.text
    meta = _meta(tmp_path)
    assert meta["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)
    assert "some chunk_stats missing" in meta["generation"]["served"]["closed_by_server"]
    assert len(meta["generation"]["served"]["latency"]["server_chunk_total_ms"]) == 3


def test_small_batches_come_inline_and_are_read_the_same(cli, tmp_path):
    # two 64x112 frames (43 KiB) fit under SGLang's 64 KiB limit: each batch is one frame_batch map with its payload
    with SGLangStandIn(frames_per_message=2) as srv:
        r = cli(*_sglang(srv.endpoint))
    assert r.code == 0, r.text
    assert _meta(tmp_path)["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)
    trace = json.loads((tmp_path / ITEM / "context_trace.json").read_text())
    assert [c["served"]["server"]["num_batches"] for c in trace["chunks"]] == [7, 8, 8, 8]


def test_sana_wm_on_sglang_sends_a_per_frame_key_script(cli, tmp_path):
    # SANA-WM: 8 frames per latent, 3 latents per chunk, one key set per pixel frame: 49 frames = 7 latents, 3 chunks
    item = Path("outputs/served/sana_wm/fullkv/seed-42/lrlr/environment_rocket")
    with SGLangStandIn(chunk_sizes=[17, 16, 16]) as srv:
        r = cli("model=sana_wm", "backend=sglang", f"endpoint={srv.endpoint}", "context=fullkv",
                "model.num_frames=49", "model.height=64", "model.width=112", "cases.include=[environment_rocket]",
                "evaluate=off", "progress=false", "run=served")
    assert r.code == 0, r.text
    init = srv.requests[0]
    script = init["condition_inputs"]["camera_actions"]
    assert len(script) == 48 and init["num_frames"] == 49 and init["max_chunks"] == 3
    assert init["realtime_causal_sink_size"] == 0 and init["realtime_causal_kv_cache_num_frames"] == 7
    assert json.loads((tmp_path / item / "controls" / "camera_actions.json").read_text()) == script
    assert _meta(tmp_path, item)["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)


@pytest.mark.slow
def test_the_context_study_runs_on_the_servers_cache(cli, tmp_path):
    """``-m context=fullkv,sliding``: one session per policy, each told its own sink and window."""
    with SGLangStandIn() as srv:
        r = cli("-m", "model=lingbot_v2", "backend=sglang", f"endpoint={srv.endpoint}", "context=fullkv,sliding",
                *SMALL)
    assert r.code == 0, r.text
    told = sorted((q["realtime_causal_sink_size"], q["realtime_causal_kv_cache_num_frames"]) for q in srv.requests)
    assert told == [(0, 16), (4, 20)]
    for policy in ("fullkv", "sliding"):
        meta = _meta(tmp_path, Path(str(ITEM).replace("sliding", policy)))
        assert meta["status"] == "done" and meta["context"]["name"] == policy
