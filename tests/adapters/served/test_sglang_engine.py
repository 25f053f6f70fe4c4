"""The harness against SGLang's own server-side code: sglang 0.5.23's realtime route, its LingBot-World realtime
adapter and its raw-RGB output adapter, on loopback (uvicorn), with an injected fake model in place of the GPU
pipeline.

What runs for real (``python/sglang/multimodal_gen/runtime/entrypoints/openai/realtime/``): ``realtime_video_api``
(the WebSocket route, init validation by ``RealtimeVideoGenerationsRequest``, the one-session admission rule, the
chunk loop, ``chunk_stats``, close 1000 after ``max_chunks``), ``adapters/lingbot_world_realtime_adapter`` (the
``camera_actions`` script in the init, sampled chunk by chunk by the engine's camera-control state, the condition
length), ``realtime_output_adapter`` (``frame_batch`` / ``frame_batch_header`` + payload, 16 frames a message).
What is injected (the GPU side): the server args, the scheduler (``process_generation_batch``: the fake model
renders the frames of a chunk and records the key sets the engine handed it), ``prepare_request`` /
``build_realtime_sampling_params`` (a plain record of the sampling fields).

Needs ``pip install --no-deps sglang==0.5.23`` plus the modules its route imports (docs/served.md, extra
``served-engines``); skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.video import frames_sha256
from tests.support.cli import in_process_cli
from tests.support.served_server import frame_for

RT = "sglang.multimodal_gen.runtime.entrypoints.openai.realtime"
pytestmark = pytest.mark.slow  # importing sglang's route takes ~20 s on two cores


@pytest.fixture(scope="module")
def sg():
    """sglang's realtime modules (imported once; the whole module is skipped with the reason when they fail)."""
    import importlib

    try:
        mods = SimpleNamespace(api=importlib.import_module(f"{RT}.realtime_video_api"),
                               rt_adapter=importlib.import_module(f"{RT}.realtime_adapter"),
                               lingbot=importlib.import_module(f"{RT}.adapters.lingbot_world_realtime_adapter"),
                               out=importlib.import_module(f"{RT}.realtime_output_adapter"))
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure of the engine means: not runnable here
        pytest.skip(f"sglang's realtime route is not importable here ({type(exc).__name__}: {exc}); see "
                    "docs/served.md 'Testing against the engines'")
    return mods


SMALL = ["model.num_frames=61", "model.height=64", "model.width=112", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false", "run=served"]
ITEM = Path("outputs/served/lingbot_v2/sliding/seed-1/lrlr/environment_rocket")


class FakeModel:
    """The GPU side: chunk k of a LingBot session renders 13 frames (k = 0) or 16 (the causal Wan rule at 4 latents
    a chunk); records the key sets and cache fields each request carried."""

    def __init__(self, raw_content_type: str):
        self.raw_content_type = raw_content_type
        self.batches: list[SimpleNamespace] = []
        self.frame_index: dict[str, int] = {}

    async def process_generation_batch(self, client, batch):
        del client
        self.batches.append(batch)
        n = 13 if batch.block_idx == 0 else 16
        start = self.frame_index.get(batch.realtime_session_id, 0)
        self.frame_index[batch.realtime_session_id] = start + n
        frames = [frame_for(int(batch.seed), start + i, batch.height, batch.width).tobytes() for i in range(n)]
        result = SimpleNamespace(raw_frame_batches=[frames], raw_frame_content_type=self.raw_content_type,
                                 raw_frame_metadata=None)
        return None, result


def _server_args():
    arch = SimpleNamespace(temporal_compression_ratio=4, num_frames_per_block=4)
    cfg = SimpleNamespace(vae_config=SimpleNamespace(arch_config=arch), dit_config=SimpleNamespace(arch_config=arch))
    return SimpleNamespace(input_save_path=None, pipeline_config=cfg, attention_backend_config=None)


def _sampling_params(request_id, *, request, chunk_inputs, num_frames, num_inference_steps, chunk_size):
    return SimpleNamespace(request_id=request_id, prompt=chunk_inputs.prompt, size=request.size,
                           num_frames=num_frames, fps=request.fps, seed=request.seed,
                           num_inference_steps=num_inference_steps, image_path=request.first_frame,
                           condition_inputs=chunk_inputs.condition_inputs, realtime_chunk_size=chunk_size)


def _prepare_request(server_args, sampling_params):
    del server_args
    w, h = (int(v) for v in sampling_params.size.split("x"))
    return SimpleNamespace(**vars(sampling_params), width=w, height=h, enable_upscaling=False,
                           enable_frame_interpolation=False, frame_interpolation_exp=1, output_compression=None)


@pytest.fixture
def engine(sg, monkeypatch):
    """SGLang's realtime router on uvicorn at an ephemeral loopback port, the fake model injected."""
    import uvicorn
    from fastapi import FastAPI

    api, rt_adapter, lingbot = sg.api, sg.rt_adapter, sg.lingbot
    model = FakeModel(sg.out.RAW_RGB_CONTENT_TYPE)
    args = _server_args()
    released = []

    async def forward(req):
        released.append(req)

    monkeypatch.setattr(api, "get_global_server_args", lambda: args)
    monkeypatch.setattr(rt_adapter, "get_global_server_args", lambda: args)
    monkeypatch.setattr(api, "get_realtime_model_adapter", lambda server_args: lingbot.LingBotWorldRealtimeAdapter())
    monkeypatch.setattr(api, "process_generation_batch", model.process_generation_batch)
    monkeypatch.setattr(api, "async_scheduler_client", SimpleNamespace(forward=forward))
    monkeypatch.setattr(rt_adapter, "prepare_request", _prepare_request)
    monkeypatch.setattr(lingbot, "build_realtime_sampling_params", _sampling_params)
    monkeypatch.setattr(api, "_ACTIVE_SESSION_IDS", set())
    app = FastAPI()
    app.include_router(api.router)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="websockets-sansio"
                                           if _has_sansio() else "websockets", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    yield SimpleNamespace(endpoint=f"ws://127.0.0.1:{port}", model=model, released=released, server=server, api=api)
    server.should_exit = True
    thread.join(10)


def _has_sansio() -> bool:
    try:
        import uvicorn.protocols.websockets.websockets_sansio_impl  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def test_sglang_route_streams_the_item_end_to_end(engine, cli, tmp_path):
    r = cli("model=lingbot_v2", "backend=sglang", f"endpoint={engine.endpoint}", "context=sliding", *SMALL)
    assert r.code == 0, r.text
    item = tmp_path / ITEM
    meta = json.loads((item / "meta.json").read_text())
    batches = engine.model.batches
    assert [b.block_idx for b in batches] == [0, 1, 2, 3]  # max_chunks = 4, then the engine closed the session
    # the engine's own camera-control state handed our script to the model 4 key sets a chunk, in order
    script = json.loads((item / "controls" / "camera_actions.json").read_text())
    fed = [keys for b in batches for keys in b.condition_inputs["camera_actions"]]
    assert fed == script
    # the cache settings reached the request the pipeline reads them from (apply_realtime_request_fields)
    assert {(b.realtime_causal_sink_size, b.realtime_causal_kv_cache_num_frames) for b in batches} == {(4, 20)}
    # LingBot's condition length: (2 * chunk - 1) * 4 + 1 = 29 (lingbot_world_realtime_adapter._condition_num_frames)
    assert {b.num_frames for b in batches} == {29} and {b.size for b in batches} == {"112x64"}
    # the frames the fake model rendered are the item's frames, in order (header + payload transport: > 64 KiB)
    sent = [frame_for(1, i, 64, 112) for i in range(61)]
    assert meta["video"]["frames_sha256"] == frames_sha256(sent)
    trace = json.loads((item / "context_trace.json").read_text())
    assert [c["served"]["frames"] for c in trace["chunks"]] == [13, 16, 16, 16]
    stats = [c["served"]["server"] for c in trace["chunks"]]
    assert [s["chunk_index"] for s in stats] == [0, 1, 2, 3] and all("chunk_total_ms" in s for s in stats)
    assert [s["num_frames"] for s in stats] == [13, 16, 16, 16]
    assert meta["generation"]["served"]["latency"]["server"]["n"] == 4
    assert engine.released  # the route released the session on the scheduler when it ended


def test_a_second_session_is_refused_busy_and_the_rerun_completes(engine, cli, tmp_path):
    """SGLang admits one realtime session at a time: while another client's session runs, ours gets the engine's
    error and close 1008; the next run, once the server is free, completes the item."""
    import msgpack
    from websockets.sync.client import connect

    api = engine.api
    with connect(engine.endpoint + "/v1/realtime_video/generate") as other:
        other.send(msgpack.packb({"type": "init", "prompt": "p", "size": "112x64", "max_chunks": 1000}))
        deadline = time.monotonic() + 10
        while not api._ACTIVE_SESSION_IDS and time.monotonic() < deadline:
            time.sleep(0.02)
        assert api._ACTIVE_SESSION_IDS
        r = cli("model=lingbot_v2", "backend=sglang", f"endpoint={engine.endpoint}", "context=sliding", *SMALL)
    assert r.code == 1 and "admission refused" in r.text, r.text
    assert not (tmp_path / ITEM / "video.mp4").exists()
    deadline = time.monotonic() + 10
    while api._ACTIVE_SESSION_IDS and time.monotonic() < deadline:
        time.sleep(0.02)
    r2 = cli("model=lingbot_v2", "backend=sglang", f"endpoint={engine.endpoint}", "context=sliding", *SMALL)
    assert r2.code == 0, r2.text


def test_an_init_the_engine_refuses_is_a_clear_failure(engine, cli, tmp_path):
    """The engine validates the init with its own schema: an init it refuses ('invalid generate request') fails the
    item with the engine's words (here a size the pydantic model cannot take is forced through init_extra)."""
    r = cli("model=lingbot_v2", "backend=sglang", f"endpoint={engine.endpoint}", "context=sliding", *SMALL,
            "+backend.models.lingbot_v2.init_extra={max_chunks: 0}")
    assert r.code == 1 and "invalid generate request" in r.text, r.text
    assert not (tmp_path / ITEM / "video.mp4").exists()


def test_our_key_kinematics_are_the_engines(sg):
    """Random key scripts integrate to the poses SGLang's own functions give: LingBot's ``_actions_to_c2ws`` and
    SANA-WM's ``sana_wm_action_to_camera_to_world_array`` at the realtime translation speed (0.04)."""
    import numpy as np
    import yaml
    from sglang.multimodal_gen.configs.pipeline_configs.lingbot_world import _actions_to_c2ws
    from sglang.multimodal_gen.runtime.pipelines_core.stages.model_specific_stages.sana_wm.base import (
        sana_wm_action_to_camera_to_world_array,
    )

    from adapters.served.keys import COMBOS, KeyKinematics, decode
    from harness.config_groups import conf_dir

    models = yaml.safe_load((conf_dir() / "backend" / "sglang.yaml").read_text())["models"]
    lingbot, sana = (KeyKinematics.from_dict(models[m]["kinematics"]) for m in ("lingbot_v2", "sana_wm"))
    rng = np.random.default_rng(3)
    script = [list(COMBOS[i]) for i in rng.integers(0, len(COMBOS), 60)] + [["i"]] * 30  # also hits the pitch limit
    np.testing.assert_allclose(decode(lingbot, script), np.stack(_actions_to_c2ws(script)), atol=1e-12)
    dsl = ",".join(f"{''.join(k) or 'none'}-1" for k in script)
    theirs = sana_wm_action_to_camera_to_world_array(dsl, translation_speed=0.04)
    np.testing.assert_allclose(decode(sana, [sorted(k) for k in script]), theirs, atol=2e-5)  # float32 there
