"""The served backend end to end through the command line, against loopback servers on 127.0.0.1.

``python -m harness model=lingbot_v2 backend=sglang endpoint=ws://127.0.0.1:PORT context=sliding`` (in process):
the item's video holds exactly the frames the server streamed (``video.frames_sha256`` is the hash of the raw
frames, independent of the codec), its context trace what the server was told and reported, its latency the
server's ``chunk_stats`` beside our clock. Each fault fails the item clearly (exit 1, nothing half-written) and the
next run completes it. The stand-ins speak the messages of sglang 0.5.23 and vllm-omni 0.30.0
(tests/support/served_server.py) with the engines' chunk geometry; tests/adapters/served/test_sglang_engine.py runs
SGLang's own route, adapters and pipeline configs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.video import frames_sha256, read_frames
from tests.support.cli import in_process_cli
from tests.support.served_server import SGLangStandIn, VllmVideoStandIn

# 45 frames = 12 latents = 4 chunks of 3 (SGLang's LingBotWorldV2CausalDMDConfig: 3 latents a chunk; the causal Wan
# decode gives 9 frames in chunk 0, 12 after); 64 x 112 keeps it fast
SMALL = ["model.num_frames=45", "model.height=64", "model.width=112", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false", "run=served"]
ITEM = Path("outputs/served/lingbot_v2/sliding/seed-1/lrlr/environment_rocket")


def SLOW(*values):  # noqa: N802 - a parameter that costs a run and a rerun (~3 s): the slow tier
    return pytest.param(*values, marks=pytest.mark.slow)


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def _sglang(endpoint: str, *extra: str) -> list[str]:
    return ["model=lingbot_v2", "backend=sglang", f"endpoint={endpoint}", "context=sliding", "context.chunk=3", *SMALL,
            *extra]


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
    assert len(srv.sent_frames) == 45
    assert meta["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)
    _, frames = read_frames(item / "video.mp4", indices=[0, 30, 44])
    for got, i in zip(frames, (0, 30, 44)):
        assert np.abs(got.astype(int) - srv.sent_frames[i].astype(int)).mean() < 4  # H.264 at crf 18
    # what the server was told: the init as the engine reads it, the sliding window on its cache
    init = srv.requests[0]
    assert init["size"] == "112x64" and init["max_chunks"] == 4 and init["seed"] == 1
    assert init["realtime_causal_sink_size"] == 4 and init["realtime_causal_kv_cache_num_frames"] == 19
    assert init["first_frame"] == (item / "controls" / "image.png").read_bytes()
    script = json.loads((item / "controls" / "camera_actions.json").read_text())
    assert init["condition_inputs"]["camera_actions"] == script and len(script) == 12 and script[0] == []
    # the engine's geometry, recorded: 4 chunks of 9, 12, 12, 12 frames (init.num_frames: the condition length)
    assert meta["controls"]["served"]["chunks"]["chunk_frames"] == [9, 12, 12, 12] and init["num_frames"] == 21
    trace = json.loads((item / "context_trace.json").read_text())
    told = {k: v for k, v in trace["told"].items() if k not in ("first_frame", "condition_inputs")}
    assert told == {k: v for k, v in init.items() if k not in ("first_frame", "condition_inputs")}
    # per chunk: the policy's selection (4 sink + 12 recent + 3 current) and what the server reported
    assert [c["served"]["frames"] for c in trace["chunks"]] == [9, 12, 12, 12]
    assert trace["chunks"][3]["sink"] == [0, 1, 2, 3] and trace["chunks"][3]["recent"] == list(range(4, 9))
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
        r = cli("model=lingbot_v2", "backend=sglang", f"endpoint={srv.endpoint}", "context=fullkv", "context.chunk=3",
                *SMALL)
    assert r.code == 0, r.text
    init = srv.requests[0]
    assert init["realtime_causal_sink_size"] == 0 and init["realtime_causal_kv_cache_num_frames"] == 12
    trace = json.loads((tmp_path / str(ITEM).replace("sliding", "fullkv") / "context_trace.json").read_text())
    assert trace["chunks"][3]["context"] == list(range(9))


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
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "model.num_frames=49"], "model.num_frames=45 or model.num_frames=57"),
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "context.chunk=4"], "context.chunk=3"),  # the engine's chunk
    (["backend=vllm_omni", "endpoint=ws://127.0.0.1:9", "backend.route=/v1/realtime/world/camera"],
     "LingBot-World-Fast"),  # the camera route serves another model
    (["backend=sglang", "endpoint=ws://127.0.0.1:9", "backend.item_timeout_s=0"], "backend.item_timeout_s"),
])
def test_bad_backend_settings_are_refused_before_writing(cli, tmp_path, args, needle):
    chunk = [] if "context.chunk=4" in args else ["context.chunk=3"]
    r = cli("model=lingbot_v2", "context=sliding", *chunk, *SMALL, *args)
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


# The fast tier runs two faults end to end (one after frames arrived, one deadline); each fault's kind is also
# stated in process, one rule at a time, by test_engine_rules.py (messages) and test_transport_rules.py (handshake,
# deadlines, closes, sizes); the full suite runs every fault end to end.
@pytest.mark.parametrize("fault,kind,extra", [
    ("close_mid", "closed mid-stream", []),
    SLOW("busy", "admission refused", []),
    SLOW("wrong_size", "wrong frame size", []),
    ("slow", "timeout", ["backend.chunk_timeout_s=0.5"]),
    SLOW("error", "engine error", []),
    SLOW("http503", "admission refused", []),  # a gateway's busy answer to the handshake
    SLOW("http429", "admission refused", []),  # too many requests: busy too
    SLOW("close_1011", "closed mid-stream", []),  # every frame, then an abnormal close: not a finished session
    SLOW("announce_huge", "wrong frame size", []),  # a header announcing 1 GB: refused before any payload is read
    SLOW("oversize", "protocol", []),  # a websocket frame announcing 1 GB: refused from its header by the library
    SLOW("trickle", "protocol", ["backend.max_unknown_messages=20"]),  # unknown messages: counted, bounded
    SLOW("trickle", "timeout", ["backend.max_unknown_messages=100000", "backend.item_timeout_s=1"]),  # deadline
    SLOW("bad_header", "protocol", []),  # a malformed header field: a protocol error, never a bare ValueError
])
def test_each_fault_fails_the_item_and_the_next_run_completes_it(cli, tmp_path, fault, kind, extra):
    with SGLangStandIn(fault=fault, slow_s=1.0) as bad:  # twice the chunk timeout of the slow case
        r = cli(*_sglang(bad.endpoint, *extra))
    assert r.code == 1, r.text
    assert kind in r.text  # the run summary names the cause
    meta = _failed_cleanly(tmp_path, kind)
    if fault in ("close_mid", "wrong_size"):  # what arrived before the fault is recorded
        assert meta["generation"]["session"]["frames"] == 9
    if fault == "close_1011":
        assert meta["generation"]["session"]["frames"] == 45 and "1011" in meta["root_cause"]
    if fault == "oversize":
        assert "larger than" in meta["root_cause"]
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


NATIVE = Path(str(ITEM).replace("sliding", "native"))


#: the stand-in plays a server launched with a 112x64 cache geometry (a deploy config of that size): the mapping's
#: frame_size says so, as a user would for such a server (vLLM-Omni's own 832x480 runs in test_vllm_omni_handler.py)
SMALL_SERVER = "backend.models.lingbot_v2.frame_size=[112,64]"


def _vllm(endpoint: str, root: Path, *extra: str) -> list[str]:
    return ["model=lingbot_v2", "backend=vllm_omni", f"endpoint={endpoint}", f"backend.action_root={root}",
            "context=native", SMALL_SERVER, *SMALL, *extra]


def _decoded(data: bytes) -> list[np.ndarray]:
    """The frames of a fragmented MP4, decoded here independently of the harness."""
    import io

    import av

    with av.open(io.BytesIO(data), format="mp4") as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def test_vllm_omni_video_route_gets_exact_poses_and_streams_the_item(cli, tmp_path):
    """The fast tier's one run of the vLLM-Omni client through the adapter (about half a second): the action
    folder, the data URL, the decoded stream, the recorded request id; its faults run in the slow tier and, one rule
    at a time, in test_engine_rules.py."""
    root = tmp_path / "actions"
    root.mkdir()
    with VllmVideoStandIn(root) as srv:
        r = cli(*_vllm(srv.endpoint, root))
    assert r.code == 0, r.text
    meta = _meta(tmp_path, NATIVE)
    # the video holds exactly the frames the engine's H.264 stream decodes to
    assert meta["video"]["frames_sha256"] == frames_sha256(_decoded(srv.sent_bytes))
    assert meta["controls"]["served"]["chunks"]["chunk_frames"] == [9, 12, 12, 12]
    start = srv.requests[0]
    assert start["num_frames"] == 45 and start["image_reference"]["image_url"].startswith("data:image/png;base64,")
    cam = np.load(tmp_path / NATIVE / "camera.npz")
    got = srv.cameras[0]
    np.testing.assert_allclose(got["poses"], cam["c2w"].astype(np.float32))
    K = cam["K"]  # the engine states intrinsics at 832x480 and rescales them to the 112x64 canvas
    np.testing.assert_allclose(got["intrinsics"][0], [K[0, 0] * 832 / 112, K[1, 1] * 480 / 64, K[0, 2] * 832 / 112,
                                                      K[1, 2] * 480 / 64], rtol=1e-6)
    assert not list(root.iterdir())  # the attempt's folder is removed after the session
    ts = meta["controls"]["translation_scale"]
    assert ts["units"] == "normalised" and ts["recoverable"] is False and ts["max_step_scene_units"] == 0  # turns only
    trace = json.loads((tmp_path / NATIVE / "context_trace.json").read_text())
    assert trace["server_hello"]["request_id"] == srv.request_ids[0]
    assert meta["generation"]["served"]["latency"]["server_reports"].startswith("none")


@pytest.mark.slow
def test_two_trajectories_of_one_case_both_complete_on_vllm_omni(cli, tmp_path):
    """Each item attempt is its own session (its own action folder and the server's fresh request id)."""
    root = tmp_path / "actions"
    root.mkdir()
    with VllmVideoStandIn(root) as srv:
        r = cli(*_vllm(srv.endpoint, root, "trajectories=[lrlr,square]"))
    assert r.code == 0, r.text
    paths = {q["extra_params"]["action_path"] for q in srv.requests}
    assert len(srv.requests) == 2 and len(paths) == 2 and len(set(srv.request_ids)) == 2
    for traj in ("lrlr", "square"):
        assert _meta(tmp_path, Path(str(NATIVE).replace("lrlr", traj)))["status"] == "done"
    # the engine divides the latent-rate steps by the largest: the divisor is recorded (the scale never reaches it)
    square = Path(str(NATIVE).replace("lrlr", "square"))
    t = np.load(tmp_path / square / "camera.npz")["c2w"][::4, :3, 3]
    step = np.linalg.norm(np.diff(t, axis=0), axis=1).max()
    assert step > 0 and _meta(tmp_path, square)["controls"]["translation_scale"]["max_step_scene_units"] == \
        pytest.approx(step)


def test_vllm_omni_refuses_a_window_it_cannot_set(cli, tmp_path):
    r = cli("model=lingbot_v2", "backend=vllm_omni", "endpoint=ws://127.0.0.1:9", "context=fullkv", SMALL_SERVER,
            *SMALL)
    assert r.code == 2 and "takes no cache setting per request" in r.err


def test_vllm_omni_refuses_a_frame_size_the_server_was_not_loaded_with(cli, tmp_path):
    # vLLM-Omni fixes LingBot v2's cache geometry at load (its deploy config: 832x480) and refuses any other size
    r = cli("model=lingbot_v2", "backend=vllm_omni", "endpoint=ws://127.0.0.1:9", "context=native", *SMALL)
    assert r.code == 2 and "only at 832x480" in r.err and "model.width=832 model.height=480" in r.err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
@pytest.mark.parametrize("fault,kind", [("wrong_size", "wrong frame size"), ("close_mid", "closed mid-stream"),
                                        ("busy", "admission refused")])
def test_vllm_omni_faults_fail_the_item_and_a_rerun_completes(cli, tmp_path, fault, kind):
    root = tmp_path / "actions"
    root.mkdir()
    with VllmVideoStandIn(root, fault=fault) as srv:
        r = cli(*_vllm(srv.endpoint, root))
    assert r.code == 1 and kind in _meta(tmp_path, NATIVE)["root_cause"]
    assert not (tmp_path / NATIVE / "video.mp4").exists() and not list(root.iterdir())
    with VllmVideoStandIn(root) as good:
        r2 = cli(*_vllm(good.endpoint, root))
    assert r2.code == 0 and _meta(tmp_path, NATIVE)["video"]["frames_sha256"] == frames_sha256(
        _decoded(good.sent_bytes))


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
    assert [c["served"]["server"]["num_batches"] for c in trace["chunks"]] == [5, 6, 6, 6]


def test_sana_wm_on_sglang_gets_exact_poses_and_the_engines_chunk_grid(cli, tmp_path):
    # SANA-WM: 8 frames per latent, 49 frames = 7 latents: floor(7 / 3) = 2 chunks, the remainder in chunk 0
    # (25 frames, then 24); the exact c2w and intrinsics go in the init's condition_inputs
    item = Path("outputs/served/sana_wm/native/seed-42/lrlr/environment_rocket")
    with SGLangStandIn(chunk_sizes=[25, 24]) as srv:
        r = cli("model=sana_wm", "backend=sglang", f"endpoint={srv.endpoint}", "context=native",
                "model.num_frames=49", "model.height=64", "model.width=128", "cases.include=[environment_rocket]",
                "evaluate=off", "progress=false", "run=served")
    assert r.code == 0, r.text
    init = srv.requests[0]
    cam = np.load(tmp_path / item / "camera.npz")
    np.testing.assert_allclose(np.asarray(init["condition_inputs"]["camera"]), cam["c2w"].astype(np.float32))
    K = cam["K"]
    np.testing.assert_allclose(np.asarray(init["condition_inputs"]["intrinsics"])[0],
                               [K[0, 0], K[1, 1], K[0, 2], K[1, 2]], rtol=1e-6)
    assert init["num_frames"] == 49 and init["max_chunks"] == 2 and "realtime_causal_sink_size" not in init
    meta = _meta(tmp_path, item)
    assert meta["video"]["frames_sha256"] == frames_sha256(srv.sent_frames)
    assert meta["controls"]["achieved_vs_requested"]["max_rotation_error_deg"] < 1e-3  # float32 poses, no keys


@pytest.mark.parametrize("policy", ["fullkv", "sliding"])
def test_sana_wm_refuses_a_cache_label_its_realtime_stage_ignores(cli, tmp_path, policy):
    r = cli("model=sana_wm", "backend=sglang", "endpoint=ws://127.0.0.1:9", f"context={policy}", "context.chunk=3",
            "model.num_frames=49", "model.height=64", "model.width=128", "cases.include=[environment_rocket]",
            "evaluate=off", "progress=false", "run=served")
    assert r.code == 2 and "never reads realtime_causal_sink_size" in r.err and "context=native" in r.err
    assert not (tmp_path / "outputs").exists()


def test_sana_wm_at_a_length_the_grid_cannot_honour_names_the_nearest(cli, tmp_path):
    # 473 frames = 60 latents: with the refiner's 1 + 3k grid the engine streams 457 or 481 frames, never 473
    r = cli("model=sana_wm", "backend=sglang", "endpoint=ws://127.0.0.1:9", "context=native", "model.num_frames=473",
            "model.height=64", "model.width=128", "cases.include=[environment_rocket]", "evaluate=off",
            "progress=false", "run=served")
    assert r.code == 2 and "model.num_frames=457 or model.num_frames=481" in r.err, r.err


@pytest.mark.slow
def test_the_context_study_runs_on_the_servers_cache(cli, tmp_path):
    """``-m context=fullkv,sliding``: one session per policy, each told its own sink and window."""
    with SGLangStandIn() as srv:
        r = cli("-m", "model=lingbot_v2", "backend=sglang", f"endpoint={srv.endpoint}", "context=fullkv,sliding",
                "context.chunk=3", *SMALL)
    assert r.code == 0, r.text
    told = sorted((q["realtime_causal_sink_size"], q["realtime_causal_kv_cache_num_frames"]) for q in srv.requests)
    assert told == [(0, 12), (4, 19)]
    for policy in ("fullkv", "sliding"):
        meta = _meta(tmp_path, Path(str(ITEM).replace("sliding", policy)))
        assert meta["status"] == "done" and meta["context"]["name"] == policy
