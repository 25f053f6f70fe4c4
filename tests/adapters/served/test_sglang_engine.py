"""The harness against SGLang's own server-side code with its own configuration for each model: sglang 0.5.23's
realtime route, its realtime-adapter registry, the model adapters it resolves and the models' pipeline config
classes (``LingBotWorldV2CausalDMDConfig``, ``SanaWMRealtimeConfig``), on loopback (uvicorn). Only the GPU side is
replaced.

What runs for real (``python/sglang/multimodal_gen/``): ``runtime/entrypoints/openai/realtime/realtime_video_api``
(the route, init validation by ``RealtimeVideoGenerationsRequest``, the one-session admission rule, the chunk loop,
``chunk_stats``, close 1000 after ``max_chunks``), ``realtime/registry.py`` (pipeline config class -> model
adapter), ``adapters/lingbot_world_realtime_adapter`` / ``sana_wm_realtime_adapter`` (the camera input in the init,
the chunk size from the config, the condition length, SANA's end-of-session rule), ``realtime_output_adapter``
(``frame_batch`` / header + payload, 16 frames a message), the pipeline config classes (chunk size, VAE stride,
SANA's refiner grid), and for SANA-WM the realtime chain's latent-prep (chunk plan), refiner (block grid) and
decode stages. Replaced: the scheduler's ``process_generation_batch`` (GPU work): LingBot's DiT + Wan VAE render
``1 + s (c - 1)`` frames for chunk 0 and ``s c`` after for the ``c`` latents the engine asked; SANA's DiT (records
the plan on the session's causal state as ``SanaWMStreamingDenoisingStage`` does), the refiner's runner (returns
the block) and the LTX-2 decode (``1 + 8 (n - 1)`` frames for the first ``n`` latents, ``8 n`` after: an inference,
docs/served.md); ``prepare_request`` / ``build_realtime_sampling_params`` build plain records of the sampling
fields. No test passes the engine a geometry the harness chose.

Needs ``pip install --no-deps sglang==0.5.23`` plus the modules its route imports (docs/served.md, extra
``served-engines``); skipped with the reason otherwise.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.video import frames_sha256
from tests.support.cli import in_process_cli
from tests.support.served_server import frame_for

MG = "sglang.multimodal_gen"
RT = f"{MG}.runtime.entrypoints.openai.realtime"
SANA = f"{MG}.runtime.pipelines_core.stages.model_specific_stages.sana_wm"
pytestmark = pytest.mark.slow  # importing sglang's route takes ~20 s on two cores


@pytest.fixture(scope="module")
def sg():
    """sglang's realtime modules (imported once; the whole module is skipped with the reason when they fail)."""
    import importlib

    try:
        mods = SimpleNamespace(api=importlib.import_module(f"{RT}.realtime_video_api"),
                               rt_adapter=importlib.import_module(f"{RT}.realtime_adapter"),
                               lingbot=importlib.import_module(f"{RT}.adapters.lingbot_world_realtime_adapter"),
                               out=importlib.import_module(f"{RT}.realtime_output_adapter"),
                               registry=importlib.import_module(f"{RT}.registry"),
                               lingbot_cfg=importlib.import_module(f"{MG}.configs.pipeline_configs.lingbot_world"),
                               sana_cfg=importlib.import_module(f"{MG}.configs.pipeline_configs.sana_wm"),
                               chain=importlib.import_module(f"{SANA}.realtime_chain"),
                               causal=importlib.import_module(f"{MG}.runtime.realtime.states.causal"),
                               session=importlib.import_module(f"{MG}.runtime.realtime.session"))
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure of the engine means: not runnable here
        pytest.skip(f"sglang's realtime route is not importable here ({type(exc).__name__}: {exc}); see "
                    "docs/served.md 'Testing against the engines'")
    return mods


SMALL = ["model.num_frames=45", "model.height=64", "model.width=112", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false", "run=served", "context.chunk=3"]
ITEM = Path("outputs/served/lingbot_v2/sliding/seed-1/lrlr/environment_rocket")
SANA_ARGS = ["model=sana_wm", "context=native", "model.height=64", "model.width=128",
             "cases.include=[environment_rocket]", "evaluate=off", "progress=false", "run=served"]


class LingBotGPU:
    """LingBot's GPU side: a chunk of ``batch.realtime_chunk_size`` latents (the engine's own chunk size, from the
    pipeline config) decodes to ``1 + s (c - 1)`` frames in chunk 0 and ``s c`` after (the causal Wan decode of
    ``stages/realtime/vae.py``), ``s`` the config's VAE stride; records every request."""

    def __init__(self, cfg, raw_content_type: str):
        self.stride = int(cfg.vae_config.arch_config.temporal_compression_ratio)
        self.raw_content_type = raw_content_type
        self.batches: list[SimpleNamespace] = []
        self.frame_index: dict[str, int] = {}

    async def process_generation_batch(self, client, batch):
        del client
        self.batches.append(batch)
        c, s = int(batch.realtime_chunk_size), self.stride
        return None, self.render(batch, 1 + s * (c - 1) if batch.block_idx == 0 else s * c)

    def render(self, batch, n: int):
        start = self.frame_index.get(batch.realtime_session_id, 0)
        self.frame_index[batch.realtime_session_id] = start + n
        frames = [frame_for(int(batch.seed), start + i, batch.height, batch.width).tobytes() for i in range(n)]
        return SimpleNamespace(raw_frame_batches=[frames] if n else None, raw_frame_content_type=self.raw_content_type,
                               raw_frame_metadata=None)


class SanaGPU(LingBotGPU):
    """SANA-WM's realtime chain with its GPU parts replaced: the engine's latent-prep, refiner and decode stages
    run on a tiny latent; the DiT records the plan on the session's causal state (as ``streaming.py`` does), the
    refiner returns each block, the decode gives ``1 + s (n - 1)`` frames for the first ``n`` latents, ``s n``
    after."""

    def __init__(self, sg, cfg, raw_content_type: str, monkeypatch):
        super().__init__(cfg, raw_content_type)
        self.stride, self.sg, self.cfg = int(cfg.vae_stride[0]), sg, cfg
        self.sessions: dict[str, object] = {}
        chain = sg.chain
        monkeypatch.setattr(importlib.import_module(f"{MG}.runtime.pipelines_core.stages.base"),
                            "get_global_server_args", lambda: _server_args(cfg))
        self.prep = chain.SanaWMRealtimeLatentPrepStage(use_refiner=True, transformer=None, vae=None, model_path="m")
        self.refine = chain.SanaWMChunkedRefinerChainStage(transformer=None, vae=None, model_path="m")
        monkeypatch.setattr(chain.SanaWMChunkedRefinerChainStage, "_build_chain_refiner_runner",
                            lambda *a, **k: SimpleNamespace(refine_block=lambda clean_block, **kw: clean_block))
        monkeypatch.setattr(chain, "get_local_torch_device", lambda: "cpu")

    async def process_generation_batch(self, client, batch):
        import torch

        del client
        self.batches.append(batch)
        sid = batch.realtime_session_id
        session = self.sessions.setdefault(sid, self.sg.session.RealtimeSession())
        if batch.block_idx == 0:
            session.dispose()
        extra = getattr(batch, "extra", None) or {}
        req = SimpleNamespace(**vars(batch), session=session, image_latent=torch.zeros(1, 4, 1, 1, 1), generator=None,
                              extra=extra, latents=None)
        req.seed = int(batch.seed)
        self.prep.forward(req, SimpleNamespace(pipeline_config=self.cfg))
        state = self.sg.causal.get_realtime_causal_dit_state(session)
        for n in req.extra["sana_wm_chunk_plan"]:  # the streaming DiT's bookkeeping (streaming.py:301-395)
            start = state.chunk_indices[-1] if state.chunk_idx > 0 else 0
            state.chunk_indices.append(start + n if state.chunk_idx > 0 else n)
            state.chunk_idx += 1
        state.latents = req.latents if state.latents is None else torch.cat([state.latents, req.latents], dim=2)
        req.latents = state.latents
        self.refine.forward(req, SimpleNamespace(pipeline_config=self.cfg))
        decoded = getattr(session, "_worldmem_decoded", 0)
        new = req.latents.shape[2] - decoded
        session._worldmem_decoded = req.latents.shape[2]
        n = 0 if new <= 0 else (1 + self.stride * (new - 1) if decoded == 0 else self.stride * new)
        return None, self.render(batch, n)


def _server_args(cfg):
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


def _serve(sg, monkeypatch, cfg, model):
    """SGLang's realtime router on uvicorn at an ephemeral loopback port: the real registry resolves the model
    adapter from ``cfg`` (the model's own pipeline config class); ``model`` is the GPU side."""
    import uvicorn
    from fastapi import FastAPI

    api, rt_adapter = sg.api, sg.rt_adapter
    args = _server_args(cfg)
    released = []

    async def forward(req):
        released.append(req)

    monkeypatch.setattr(api, "get_global_server_args", lambda: args)
    monkeypatch.setattr(rt_adapter, "get_global_server_args", lambda: args)
    monkeypatch.setattr(api, "process_generation_batch", model.process_generation_batch)
    monkeypatch.setattr(api, "async_scheduler_client", SimpleNamespace(forward=forward))
    monkeypatch.setattr(rt_adapter, "prepare_request", _prepare_request)
    for mod in (sg.lingbot, importlib.import_module(f"{RT}.adapters.sana_wm_realtime_adapter")):
        monkeypatch.setattr(mod, "build_realtime_sampling_params", _sampling_params)
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
    return server, thread, SimpleNamespace(endpoint=f"ws://127.0.0.1:{port}", model=model, released=released,
                                           server=server, api=api, cfg=cfg)


@pytest.fixture
def engine(sg, monkeypatch):
    """LingBot-World v2: ``LingBotWorldV2CausalDMDConfig`` as sglang registers it for the v2 checkpoint."""
    cfg = sg.lingbot_cfg.LingBotWorldV2CausalDMDConfig()
    server, thread, eng = _serve(sg, monkeypatch, cfg, LingBotGPU(cfg, sg.out.RAW_RGB_CONTENT_TYPE))
    yield eng
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def sana_engine(sg, monkeypatch):
    """SANA-WM: ``SanaWMRealtimeConfig`` (what ``SanaWMRealtimePipeline`` serves)."""
    cfg = sg.sana_cfg.SanaWMRealtimeConfig()
    server, thread, eng = _serve(sg, monkeypatch, cfg, SanaGPU(sg, cfg, sg.out.RAW_RGB_CONTENT_TYPE, monkeypatch))
    yield eng
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
    c = engine.cfg.dit_config.arch_config.num_frames_per_block  # the engine's chunk, from its config class
    assert c == 3 and {b.realtime_chunk_size for b in batches} == {c}
    assert [b.block_idx for b in batches] == [0, 1, 2, 3]  # 12 latents / 3 = 4 chunks, then the engine closed
    # the engine's own camera-control state handed our script to the model c key sets a chunk, in order
    script = json.loads((item / "controls" / "camera_actions.json").read_text())
    fed = [keys for b in batches for keys in b.condition_inputs["camera_actions"]]
    assert fed == script and all(len(b.condition_inputs["camera_actions"]) == c for b in batches)
    # the cache settings reached the request the pipeline reads them from (apply_realtime_request_fields)
    assert {(b.realtime_causal_sink_size, b.realtime_causal_kv_cache_num_frames) for b in batches} == {(4, 19)}
    # LingBot's condition length: (2 * 3 - 1) * 4 + 1 = 21 (lingbot_world_realtime_adapter._condition_num_frames)
    assert {b.num_frames for b in batches} == {21} and {b.size for b in batches} == {"112x64"}
    # the frames the engine streamed are the item's frames, in order
    sent = [frame_for(1, i, 64, 112) for i in range(45)]
    assert meta["video"]["frames_sha256"] == frames_sha256(sent)
    trace = json.loads((item / "context_trace.json").read_text())
    assert [c["served"]["frames"] for c in trace["chunks"]] == [9, 12, 12, 12]
    stats = [c["served"]["server"] for c in trace["chunks"]]
    assert [s["chunk_index"] for s in stats] == [0, 1, 2, 3] and all("chunk_total_ms" in s for s in stats)
    assert [s["num_frames"] for s in stats] == [9, 12, 12, 12]
    assert meta["generation"]["served"]["latency"]["server"]["n"] == 4
    assert engine.released  # the route released the session on the scheduler when it ended


def test_the_papers_493_frames_are_refused_naming_what_the_engine_streams(cli, tmp_path):
    """124 latents are not whole 3-latent chunks: refused before anything runs, naming 489 and 501."""
    r = cli("model=lingbot_v2", "backend=sglang", "endpoint=ws://127.0.0.1:9", "context=fullkv",
            "model.num_frames=493", "cases.include=[environment_rocket]", "evaluate=off", "progress=false")
    assert r.code == 2 and "model.num_frames=489 or model.num_frames=501" in r.err, r.err
    assert not (tmp_path / "outputs").exists()


def test_sana_wm_at_the_papers_481_frames_completes(sana_engine, cli, tmp_path):
    """SANA-WM on SANA's own realtime adapter and chain stages: 481 frames = 61 latents = 20 chunks (remainder in
    chunk 0), each tick streaming what the refiner completed; the engine closes after max_chunks and the video is
    exactly the streamed frames. The exact c2w + intrinsics reached the engine's condition inputs."""
    import numpy as np

    r = cli(*SANA_ARGS, "backend=sglang", f"endpoint={sana_engine.endpoint}", "model.num_frames=481")
    assert r.code == 0, r.text
    item = tmp_path / "outputs/served/sana_wm/native/seed-42/lrlr/environment_rocket"
    meta = json.loads((item / "meta.json").read_text())
    batches = sana_engine.model.batches
    assert len(batches) == 20 and [b.block_idx for b in batches] == list(range(20))
    frames = [c["served"]["frames"] for c in json.loads((item / "context_trace.json").read_text())["chunks"][:20]]
    assert frames == [25] + [24] * 19 and sum(frames) == 481
    assert meta["video"]["frames_sha256"] == frames_sha256([frame_for(42, i, 64, 128) for i in range(481)])
    cam = np.load(item / "camera.npz")
    first = batches[0].condition_inputs  # the init's condition inputs reach chunk 0 (sana_wm_realtime_adapter.py)
    np.testing.assert_allclose(np.asarray(first["camera"]), cam["c2w"].astype(np.float32))
    assert np.asarray(first["intrinsics"]).shape == (481, 4)


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
    lingbot = KeyKinematics.from_dict(models["lingbot_v2"]["kinematics"])
    # SANA-WM takes exact poses on SGLang (conf/backend/sglang.yaml); its key rule stays checked for scripts
    sana = KeyKinematics(yaw_deg=1.2, pitch_deg=1.2, move=0.04, strafe_yaw_coupling=0.4, per="frame")
    rng = np.random.default_rng(3)
    script = [list(COMBOS[i]) for i in rng.integers(0, len(COMBOS), 60)] + [["i"]] * 30  # also hits the pitch limit
    np.testing.assert_allclose(decode(lingbot, script), np.stack(_actions_to_c2ws(script)), atol=1e-12)
    dsl = ",".join(f"{''.join(k) or 'none'}-1" for k in script)
    theirs = sana_wm_action_to_camera_to_world_array(dsl, translation_speed=0.04)
    np.testing.assert_allclose(decode(sana, [sorted(k) for k in script]), theirs, atol=2e-5)  # float32 there
