"""vLLM-Omni 0.30.0's own ``/v1/realtime/video`` server for LingBot-World v2, on CPU, with only the GPU replaced.

Run as ``python -m tests.support.vllm_omni_engine --action-root DIR --record DIR`` (tests/adapters/served/
test_vllm_omni_engine.py starts it in a subprocess: importing vLLM-Omni and vLLM takes ~40 s and patches process-wide
state, so it never runs inside the test process). It prints ``LISTENING <port>`` once it serves on 127.0.0.1.

What runs is vLLM-Omni's (the PyPI wheel vllm-omni==0.30.0 on vllm==0.30.0, both ``--no-deps``; paths under
``vllm_omni/``):

* the route: ``entrypoints/openai/api_server.py``'s ``router`` (``WS /v1/realtime/video``) and the handler it calls,
  ``serving_video_output_stream.OmniStreamingVideoOutputHandler`` (``session.start`` parsed into
  ``VideoGenerationRequest``, the sampling parameters built from the stage defaults, ``extra_params`` into
  ``extra_args``, the fragmented-MP4 encoder, ``video.start`` / ``video.chunk_metadata`` / ``session.done`` /
  ``error``);
* the configuration: ``deploy/lingbot_world_v2_stepwise.yaml`` (the one docs/served.md launches) resolved by
  ``config.resolver.resolve_omni_config`` with the registered ``lingbot_world`` pipeline, the stage defaults by
  ``engine.stage_init_utils.extract_stage_metadata_from_omni_stage_config``;
* the LingBot v2 request path: the registered pre-process (``diffusion/models/lingbot_world/pipeline.py``:
  ``extra_args.action_path`` resolved under the trusted root ``VLLM_OMNI_LINGBOT_ACTION_ROOT``, ``poses.npy`` and
  ``intrinsics.npy`` loaded), the runner's seeded generator (``DiffusionModelRunner._initialize_generator``), the
  pipeline's step execution ``prepare_encode`` (request validation ``_parse_request``: 4 steps, whole 3-latent
  blocks, the fixed 480x832 cache geometry; the chunk count; the camera trajectory resampled to one pose per latent
  and embedded), ``prepare_next_chunk``, ``post_decode`` (the chunk's frame count ``_chunk_media_frame_count``), and
  the engine's output path (``DiffusionEngine.postprocess_output``: the registered post-process, the output
  formatter).

Replaced (the GPU and the weights): the umT5 text encode, the Wan VAE's condition encode, the DiT's denoising steps
and K/V commit, and the VAE decode, which renders the chunk's frames (as many as the pipeline's own
``_chunk_media_frame_count`` says, through the same ``StreamingDecodeState`` bookkeeping the streaming decoder
keeps) as a picture of the request's seed and the frame's index. The transformer's and the VAE's configuration are
the classes' own (``CausalLingBotWorldTransformer3DModel``'s defaults, which its ``from_config`` requires of the
checkpoint; diffusers ``AutoencoderKLWan``'s strides).

Recorded under ``--record``: per session ``session-<k>.json`` (the request id, what the engine was asked and what it
decided: size, frames, chunks, frames per chunk) and ``session-<k>.npz`` (the camera trajectory the pre-process
loaded); per session ``stream-<request_id>.bin`` (every binary message the server sent, in order). A file
``fail-next.json`` (``{"after_chunks": n}``) makes the next session's GPU side fail after ``n`` chunks, as a worker
error does (the file is consumed).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import socket
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

MODEL_ID = "robbyant/lingbot-world-v2-14b-causal-fast-diffusers"  # docs/served.md's launch command
DEPLOY = "deploy/lingbot_world_v2_stepwise.yaml"


def frame_pixels(seed: int, index: int, height: int, width: int) -> np.ndarray:
    """The stand-in decode's frame ``index`` of a session seeded ``seed``: (H, W, 3) uint8, smooth (it survives
    H.264 nearly unchanged) and different for every frame and seed."""
    y, x = np.mgrid[0:height, 0:width]
    r = (x * 255 // max(width - 1, 1) + 7 * index) % 256
    g = (y * 255 // max(height - 1, 1) + 3 * seed) % 256
    b = np.full_like(r, (40 + 11 * index + 17 * seed) % 256)
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def resolve_stages(omni_root: Path) -> list[Any]:
    """vLLM-Omni's own resolution of the stepwise deploy config (no weights, no GPU): the stage configs AsyncOmni
    would hold."""
    from vllm_omni.config.resolver import resolve_omni_config

    res = resolve_omni_config(MODEL_ID, trust_remote_code=None, cli_overrides={},
                              deploy_config_path=str(omni_root / DEPLOY), stage_overrides=None,
                              strategy_config_path=None)
    return list(res.stage_configs)


def weightless_pipeline(od_config: Any) -> Any:
    """``LingBotWorldCausalDMDPipeline`` with its configuration and without its weights: every method that needs no
    GPU is vLLM-Omni's; the text encoder, the VAE and the DiT are the overrides below."""
    import torch
    from diffusers import AutoencoderKLWan
    from torch import nn
    from vllm_omni.diffusion.models.lingbot_world.pipeline import LingBotWorldCausalDMDPipeline
    from vllm_omni.diffusion.models.lingbot_world.transformer import CausalLingBotWorldTransformer3DModel
    from vllm_omni.experimental.ar_diffusion.streaming_decode import StreamingDecodeState

    def defaults(cls: type) -> dict[str, Any]:
        return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}

    class Weightless(LingBotWorldCausalDMDPipeline):  # type: ignore[misc]
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.od_config = od_config
            model_config = od_config.model_config or {}
            self.device = torch.device("cpu")
            vae = defaults(AutoencoderKLWan)
            self.vae_scale_factor_temporal = int(vae["scale_factor_temporal"])
            self.vae_scale_factor_spatial = int(vae["scale_factor_spatial"])
            dtype = od_config.dtype if isinstance(od_config.dtype, torch.dtype) else torch.bfloat16
            self.transformer = SimpleNamespace(config=SimpleNamespace(**defaults(CausalLingBotWorldTransformer3DModel)),
                                               dtype=dtype)
            # the pipeline's own keys for the fixed cache geometry (pipeline.py __init__), from the deploy config
            self._ar_height = int(model_config.get("ar_diffusion_height", 480))
            self._ar_width = int(model_config.get("ar_diffusion_width", 832))
            self._ar_diffusion_kv_state = None
            self._ar_sessions = {}
            self._streaming_decode_states = {}
            self._interaction_coordinator = None
            self.rendered: dict[str, list[np.ndarray]] = {}

        # -- the GPU side, replaced ---------------------------------------------------------------------------
        def _require_bound_ar_state(self) -> None:
            return None

        def encode_prompt(self, prompt: str, *, max_sequence_length: int, dtype: Any) -> Any:
            return torch.zeros(1, max_sequence_length, int(self.transformer.config.text_dim), dtype=dtype)

        def _ar_text_caches(self, prompt_embeds: Any, *, invalidate: bool) -> Any:
            return None

        def _ar_block_context(self, cross_attention: Any) -> Any:
            return None

        @property
        def _dmd_blocks(self) -> Any:
            return SimpleNamespace(commit_block_kv=lambda **kw: None)

        def _next_condition_chunk(self, inputs: Any, *, start_frame: int, session_state: Any, dtype: Any) -> Any:
            cfg = self.transformer.config
            f = self.vae_scale_factor_spatial
            shape = (1, int(cfg.in_channels) - int(cfg.out_channels), int(cfg.num_frames_per_block),
                     inputs.height // f, inputs.width // f)
            return torch.zeros(shape, dtype=dtype), [None]

        def _decode_chunk_to_pixels(self, latents: Any, *, session_id: str | None = None) -> np.ndarray:
            sid = str(session_id)
            n = self._chunk_media_frame_count(SimpleNamespace(request_id=sid), block_frames=int(latents.shape[2]))
            state = self._streaming_decode_states.setdefault(sid, StreamingDecodeState(session_id=sid, feat_map=[]))
            seed, (h, w) = self.seeds[sid], (latents.shape[3] * self.vae_scale_factor_spatial,
                                             latents.shape[4] * self.vae_scale_factor_spatial)
            frames = np.stack([frame_pixels(seed, state.frames_decoded + i, h, w) for i in range(n)])
            state.frames_decoded += n
            state.chunks_decoded += 1
            self.rendered.setdefault(sid, []).extend(frames)
            return frames

    pipe = Weightless()
    pipe.seeds = {}
    return pipe


class GPUlessAsyncOmni:
    """The engine client the handler talks to (``AsyncOmni``'s surface it uses: ``stage_configs``,
    ``default_sampling_params_list``, ``generate``, ``abort``), running one session the way the diffusion engine
    and the AR-Diffusion runner drive the pipeline, minus the GPU."""

    def __init__(self, stage_configs: list[Any], record: Path):
        import torch
        from vllm_omni.diffusion.diffusion_engine import DiffusionEngine
        from vllm_omni.diffusion.registry import get_diffusion_post_process_func, get_diffusion_pre_process_func
        from vllm_omni.engine.stage_init_utils import extract_stage_metadata_from_omni_stage_config

        self.stage_configs = stage_configs
        self.default_sampling_params_list = [extract_stage_metadata_from_omni_stage_config(s).default_sampling_params
                                             for s in stage_configs]
        self.od_config = stage_configs[0].diffusion_config
        self.pre_process = get_diffusion_pre_process_func(self.od_config)
        post = get_diffusion_post_process_func(self.od_config)
        self.engine_view = SimpleNamespace(od_config=self.od_config, post_process_func=post,
                                           _post_process_accepts_sampling_params=True)
        self.postprocess_output = DiffusionEngine.postprocess_output
        self.runner_view = SimpleNamespace(device=torch.device("cpu"))
        self.pipe = weightless_pipeline(self.od_config)
        self.record = record
        self.sessions = 0
        self.aborted: list[str] = []

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    async def generate(self, prompt: Any, request_id: str, sampling_params_list: list[Any]) -> Any:
        from vllm_omni.diffusion.request import OmniDiffusionRequest
        from vllm_omni.diffusion.worker.diffusion_model_runner import DiffusionModelRunner
        from vllm_omni.diffusion.worker.utils import StepRequestState

        k, self.sessions = self.sessions, self.sessions + 1
        fault = self._take_fault()
        request = self.pre_process(OmniDiffusionRequest(prompt=prompt, sampling_params=sampling_params_list[0],
                                                        request_id=request_id))
        sp = request.sampling_params
        DiffusionModelRunner._initialize_generator(self.runner_view, sp)
        self.pipe.seeds[request_id] = int(sp.seed or 0)
        state = StepRequestState(request_id=request_id, sampling=sp, prompt=request.prompt)
        info: dict[str, Any] = {"request_id": request_id, "asked": _asked(sp), "chunk_frames": []}
        try:
            self.pipe.prepare_encode(state)
            info.update(_decided(state))
            self._save_camera(k, state)
            while not state.request_denoise_completed:
                if fault is not None and len(info["chunk_frames"]) >= fault:
                    raise RuntimeError("Internal inference error (stand-in worker fault)")
                self.pipe.prepare_next_chunk(state)
                out = self.pipe.post_decode(state)  # the DiT steps between the two are the GPU's
                info["chunk_frames"].append(int(out.output["payload"]["video"].shape[0]))
                for result in self.postprocess_output(self.engine_view, request, out):
                    yield result
                await asyncio.sleep(0)
        except Exception as exc:
            info["error"] = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            info["frames_sha256"] = _sha(self.pipe.rendered.pop(request_id, []))
            (self.record / f"session-{k}.json").write_text(json.dumps(info, indent=1))

    def _take_fault(self) -> int | None:
        path = self.record / "fail-next.json"
        if not path.exists():
            return None
        n = int(json.loads(path.read_text())["after_chunks"])
        path.unlink()
        return n

    def _save_camera(self, k: int, state: Any) -> None:
        traj = state.extra["inputs"].camera_trajectory
        if traj is not None:
            np.savez(self.record / f"session-{k}.npz", poses=traj.poses.float().numpy(),
                     intrinsics=traj.intrinsics.float().numpy(),
                     latent_poses=state.extra["camera_trajectory_cache"].poses.float().numpy())


def _asked(sp: Any) -> dict[str, Any]:
    keys = ("width", "height", "num_frames", "fps", "seed", "num_inference_steps", "output_type")
    extra = {k: v for k, v in (sp.extra_args or {}).items() if not k.startswith("_")}
    return {**{k: getattr(sp, k, None) for k in keys}, "extra_args": json.loads(json.dumps(extra, default=str))}


def _decided(state: Any) -> dict[str, Any]:
    inputs = state.extra["inputs"]
    return {"height": inputs.height, "width": inputs.width, "num_frames": inputs.num_frames,
            "num_latent_frames": inputs.num_latent_frames, "block_frames": int(state.extra["block_frames"]),
            "total_chunks": int(state.total_chunks)}


def _sha(frames: list[np.ndarray]) -> str:
    import hashlib

    h = hashlib.sha256()
    for f in frames:
        h.update(np.ascontiguousarray(f).tobytes())
    return h.hexdigest()


def recording(app: Any, record: Path) -> Any:
    """ASGI wrapper writing every binary WebSocket message the app sends to ``stream-<request_id>.bin`` (the id of
    the session's ``video.start``), in order."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await app(scope, receive, send)
        path: list[Path] = []

        async def send_recorded(message: dict[str, Any]) -> None:
            if message.get("type") == "websocket.send":
                text = message.get("text")
                if text and '"video.start"' in text:
                    path[:] = [record / f"stream-{json.loads(text)['request_id']}.bin"]
                    path[0].write_bytes(b"")
                elif message.get("bytes") and path:
                    with path[0].open("ab") as fh:
                        fh.write(message["bytes"])
            await send(message)

        await app(scope, receive, send_recorded)

    return wrapped


def build_app(action_root: Path, record: Path) -> Any:
    import vllm_omni
    from fastapi import FastAPI
    from vllm_omni.entrypoints.openai import api_server
    from vllm_omni.entrypoints.openai.serving_video_output_stream import OmniStreamingVideoOutputHandler

    os.environ["VLLM_OMNI_LINGBOT_ACTION_ROOT"] = str(action_root)  # as docs/served.md launches the server
    stages = resolve_stages(Path(vllm_omni.__file__).parent)
    engine = GPUlessAsyncOmni(stages, record)
    app = FastAPI()
    app.include_router(api_server.router)
    app.state.openai_streaming_video_output = OmniStreamingVideoOutputHandler(
        engine_client=engine, model_name=MODEL_ID, stage_configs=stages)
    return recording(app, record)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser()
    p.add_argument("--action-root", type=Path, required=True)
    p.add_argument("--record", type=Path, required=True)
    a = p.parse_args(argv)
    app = build_app(a.action_root.resolve(), a.record)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=16 << 20))
    print(f"LISTENING {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
