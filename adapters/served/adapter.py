"""The served backend as an adapter: a model's camera path compiled into a serving engine's native camera input,
generated over a WebSocket session, frames streamed into the item's video.

:class:`ServedAdapter` wraps the model's own adapter (canvas, intrinsics and camera path are the model's, so a
served item and an upstream item of the same model get the same path) and replaces ``compile`` / ``generate``:

* ``compile`` writes ``controls/``: ``image.png`` and ``prompt.txt`` (what the session sends), the engine's camera
  input (``camera_actions.json``, a held-key script, for SGLang; ``poses.npy`` + ``intrinsics.npy`` for vLLM-Omni)
  and the request itself (``init.json`` / ``request.json``: every field sent, the image bytes named by file). The
  script is decoded back with the engine's kinematics: the achieved-vs-requested residual in ``meta.json``.
* ``generate`` opens the session, streams each frame into the video as it arrives, and returns the per-chunk
  latency (our wall clock beside the server's ``chunk_stats``) and the context trace (what the server was told and
  reported).

Context policies act on the server's cache: FullKV and Sliding become SGLang's ``realtime_causal_sink_size`` /
``realtime_causal_kv_cache_num_frames`` (the window counts every visible latent: sink, recent and current chunk);
FoV needs a retrieval set that no endpoint takes, so it is refused at planning. Poses follow
:mod:`trajectories.conventions`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adapters.base import (
    Adapter,
    FrameSink,
    GeneratedVideo,
    ItemRequest,
    ModelConfigError,
    NativeControls,
    UnsupportedContextError,
)
from harness.io import json_text, save_npy, write_text

from .config import BackendConfig, ServedModel

#: what each engine's session can set on the server's cache (a policy outside it is refused at planning)
ENGINE_CONTEXTS = {"sglang": ("fullkv", "sliding", "native"), "vllm_omni": ("native",)}
ENGINE_REFUSALS = {
    "sglang": {"fov": "SGLang's realtime init takes a sink and a window (realtime_causal_sink_size, "
                      "realtime_causal_kv_cache_num_frames), not a retrieval set; run FoV on the upstream backend "
                      "where the model has it (backend=upstream model=lingbot_v2)"},
    "vllm_omni": {p: "vLLM-Omni's camera endpoint takes no cache setting per session (the server's own cache is "
                     "used: context=native)" for p in ("fullkv", "sliding", "fov")},
}


class ServedModelConfig:
    """The wrapped model's config (every field read through), with no GPU per job (the server owns them) and the
    backend in ``to_dict`` (``backend``: what decides the video; ``backend_connection``: where it ran)."""

    gpus_per_job = 0

    def __init__(self, inner: Any, backend: BackendConfig):
        self._inner, self._backend = inner, backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def to_dict(self) -> dict[str, Any]:
        return {**self._inner.to_dict(), "gpus_per_job": 0, "backend": self._backend.semantic_dict(),
                "backend_connection": self._backend.connection_dict()}


class ServedAdapter(Adapter):
    """A model served by an engine (:class:`BackendConfig`), driven through its realtime WebSocket endpoint."""

    requires = ("websockets", "msgpack")  # the WebSocket client and its messages (the `served` extra)

    def __init__(self, inner: Adapter, backend: BackendConfig):
        name = inner.config.name
        if name not in backend.models:
            raise ModelConfigError(f"backend={backend.name} has no mapping for model={name}: add "
                                   f"backend.models.{name} to conf/backend/{backend.name}.yaml (known: "
                                   f"{', '.join(sorted(backend.models)) or 'none'})")
        self.inner, self.backend = inner, backend
        self.served: ServedModel = backend.models[name]
        self.config = ServedModelConfig(inner.config, backend)  # type: ignore[assignment]
        self._canvas = {}

    # -- what the engine can do ---------------------------------------------------------------------------------
    def supported_contexts(self) -> tuple[str, ...]:
        return ENGINE_CONTEXTS[self.backend.engine]

    def check_context(self, policy: Any) -> None:
        if policy.name not in self.supported_contexts():
            why = ENGINE_REFUSALS[self.backend.engine].get(policy.name, "not supported by this engine")
            raise UnsupportedContextError(f"model={self.inner.config.name} backend={self.backend.name} cannot run "
                                          f"context={policy.name}: {why}. Supported: "
                                          f"{', '.join(self.supported_contexts())}")
        if policy.name == "sliding" and policy.chunk != self.served.chunk_latents:
            raise UnsupportedContextError(
                f"context=sliding with context.chunk={policy.chunk}: the engine generates "
                f"{self.served.chunk_latents} latents per chunk (backend.models.{self.inner.config.name}."
                f"chunk_latents); set context.chunk={self.served.chunk_latents}")

    def canvas_image_and_K(self, case: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.inner.canvas_image_and_K(case)

    def canvas_K(self, case: Any) -> np.ndarray:
        return self.inner.canvas_K(case)

    def path_for(self, spec: Any, K: np.ndarray, trajectory: str | None = None) -> Any:
        return self.inner.path_for(spec, K, trajectory)

    # -- geometry -------------------------------------------------------------------------------------------------
    def num_latents(self, N: int) -> int:
        """Latents of an N-frame rollout at the engine's stride; refuses N the engine would cut or pad."""
        s, c = self.served.latent_stride, self.served.chunk_latents
        if (N - 1) % s:
            raise ModelConfigError(f"model.num_frames={N}: the served engine needs {s}k+1 frames "
                                   f"(backend.models.{self.inner.config.name}.latent_stride={s})")
        lat = (N - 1) // s + 1
        if self.served.check_chunk_frames and lat % c:
            raise ModelConfigError(f"model.num_frames={N} gives {lat} latents, not a multiple of the engine's chunk "
                                   f"of {c}: the last chunk would be cut; use N = {s}k+1 with (k+1) % {c} == 0")
        return lat

    def max_chunks(self, N: int) -> int:
        return -(-self.num_latents(N) // self.served.chunk_latents)

    def chunk_frames(self) -> tuple[int, int] | None:
        if not self.served.check_chunk_frames:
            return None
        s, c = self.served.latent_stride, self.served.chunk_latents
        return 1 + s * (c - 1), s * c

    def cache_settings(self, policy: Any, N: int) -> dict[str, Any]:
        """SGLang's cache fields for ``policy`` (sglang 0.5.23 ``protocol.py::RealtimeVideoGenerationsRequest``;
        the window counts every visible latent frame, sink and current chunk included, as
        ``realtime_adapter.py::apply_realtime_request_fields`` passes them to the pipeline)."""
        if self.backend.engine != "sglang" or policy.name == "native":
            return {}
        if policy.name == "sliding":
            return {"realtime_causal_sink_size": policy.sink,
                    "realtime_causal_kv_cache_num_frames": policy.sink + policy.recent + policy.chunk}
        return {"realtime_causal_sink_size": 0, "realtime_causal_kv_cache_num_frames": self.num_latents(N)}

    # -- compile --------------------------------------------------------------------------------------------------
    def compile(self, req: ItemRequest) -> NativeControls:
        from adapters.memo import write_canvas_file

        c, sm, d = self.config, self.served, req.controls_dir
        d.mkdir(parents=True, exist_ok=True)
        ident = self.inner._image_identity(req.case)
        write_canvas_file(d / "image.png", None if ident[0] == "unreadable" else (ident, c.height, c.width),
                          lambda: self.canvas_image_and_K(req.case)[0])
        write_text(d / "prompt.txt", req.case.prompt + "\n")
        files = {"image.png": str(d / "image.png"), "prompt.txt": str(d / "prompt.txt")}
        scale = sm.units_per_scene_unit
        meta: dict[str, Any] = {"served": {"engine": self.backend.engine, "route": self.backend.route,
                                           "engine_version": self.backend.engine_version, "controls": sm.controls,
                                           "facts": sm.facts},
                                "translation_scale": {"units": "scene", "per_scene_unit": scale,
                                                      "expects": f"{self.backend.engine} engine units",
                                                      "recoverable": True}}
        steps = self.backend.num_inference_steps or getattr(self.inner.config, "sampling_steps", None)
        if sm.controls == "keys":
            decoded = self._compile_keys(req, files, meta, steps)
        else:
            decoded = self._compile_poses(req, files)
        if sm.model_K is not None:
            meta.update(self._intrinsics_meta(req))
        return NativeControls(files=files, command=None, decoded_c2w=decoded, meta=meta)

    def _compile_keys(self, req: ItemRequest, files: dict[str, str], meta: dict[str, Any], steps: Any) -> np.ndarray:
        """``controls: keys``: the key script (``camera_actions.json``) and the session's ``init.json``, added to
        ``files``; the key facts go to ``meta["served"]``. Returns the decoded path (N, 4, 4), scene units."""
        from .keys import decode, encode

        c, sm, path, d = self.config, self.served, req.path, req.controls_dir
        N, scale = path.num_frames, sm.units_per_scene_unit
        kin = sm.kinematics
        assert kin is not None
        lat = self.num_latents(N)
        if kin.per == "latent":
            anchors = np.arange(lat) * sm.latent_stride
            targets = np.concatenate([np.eye(4)[None], path.c2w[anchors]])
        else:
            anchors = np.arange(N)
            targets = path.c2w.copy()
        targets = targets.copy()
        targets[:, :3, 3] *= scale
        script = encode(kin, targets)
        if kin.per == "latent":  # key set t gives latent t; latent 0 is the image: the first key set is empty
            script = [[]] + script[1:]
        achieved = decode(kin, script)
        achieved = achieved[1:] if kin.per == "latent" else achieved[: N]
        achieved[:, :3, 3] /= scale
        if kin.per == "latent":
            from adapters.controls.poses import interpolate_to_frames

            decoded = interpolate_to_frames(anchors, achieved, N)
        else:
            decoded = achieved
        write_text(d / "camera_actions.json", json_text(script))
        files["camera_actions.json"] = str(d / "camera_actions.json")
        cond_frames = ((2 * sm.chunk_latents - 1) * sm.latent_stride + 1 if sm.init_num_frames == "condition"
                       else N)
        init = {"type": "init", "prompt": req.case.prompt, "first_frame": "<controls/image.png>",
                "size": f"{c.width}x{c.height}", "num_frames": cond_frames, "fps": round(c.fps),
                "seed": int(req.seed), "max_chunks": self.max_chunks(N),
                "realtime_output_format": self.backend.output_format, "realtime_output_pacing": False,
                "condition_inputs": {"camera_actions": "<controls/camera_actions.json>"},
                **self.cache_settings(req.context, N), **sm.init_extra}
        if steps:
            init["num_inference_steps"] = int(steps)
        write_text(d / "init.json", json_text(init))
        files["init.json"] = str(d / "init.json")
        meta["served"].update(key_steps=len(script), keys_per=kin.per, kinematics=kin.to_dict())
        return decoded

    def _compile_poses(self, req: ItemRequest, files: dict[str, str]) -> np.ndarray:
        """``controls: poses``: ``poses.npy`` (N, 4, 4 float32, engine units), ``intrinsics.npy`` (N, 4 float32: fx,
        fy, cx, cy pixels) and ``request.json``, added to ``files``. Returns the decoded path (N, 4, 4), scene units."""
        c, sm, path, d = self.config, self.served, req.path, req.controls_dir
        N, scale = path.num_frames, sm.units_per_scene_unit
        K = np.asarray(path.K, dtype=np.float64)
        poses = path.c2w.astype(np.float32).copy()
        poses[:, :3, 3] *= np.float32(scale)
        intr = np.tile(np.array([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], np.float32), (N, 1))
        save_npy(d / "poses.npy", poses)
        save_npy(d / "intrinsics.npy", intr)
        files.update({"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy")})
        decoded: np.ndarray = poses.astype(np.float64)
        decoded[:, :3, 3] /= scale
        request = {"prompt": req.case.prompt, "image": "<controls/image.png>",
                   "camera": {"poses": "<controls/poses.npy>", "intrinsics": "<controls/intrinsics.npy>"},
                   "session_id": f"worldmem-{req.item_dir.name}-{int(req.seed)}",
                   "extra_body": {"height": int(c.height), "width": int(c.width), "num_frames": N,
                                  "fps": round(c.fps), "seed": int(req.seed), **sm.init_extra}}
        write_text(d / "request.json", json_text(request))
        files["request.json"] = str(d / "request.json")
        return decoded

    def _intrinsics_meta(self, req: ItemRequest) -> dict[str, Any]:
        """``intrinsics`` / ``intrinsics_residual`` meta for an engine with fixed intrinsics (``model_K``): the
        case's and the engine's field of view (degrees) and their difference."""
        from trajectories.conventions import fov_from_intrinsics

        c, sm, path = self.config, self.served, req.path
        assert sm.model_K is not None
        meta: dict[str, Any] = {}
        K = np.asarray(path.K, dtype=np.float64)
        mK = np.array([[sm.model_K[0], 0, c.width / 2], [0, sm.model_K[1], c.height / 2], [0, 0, 1]])
        case_fov, model_fov = fov_from_intrinsics(K, c.width, c.height), fov_from_intrinsics(mK, c.width, c.height)
        meta["intrinsics"] = {"case_fov_deg": list(case_fov), "model_fov_deg": list(model_fov),
                              "caveat": f"the engine uses fixed intrinsics {list(sm.model_K)} (fx, fy)"}
        meta["intrinsics_residual"] = {"hfov_error_deg": abs(model_fov[0] - case_fov[0]),
                                       "vfov_error_deg": abs(model_fov[1] - case_fov[1])}
        return meta

    # -- generate -------------------------------------------------------------------------------------------------
    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        import json
        import time

        from . import engines
        from .transport import Connection

        c, d, N = self.config, req.controls_dir, req.path.num_frames
        t0 = time.perf_counter()
        conn = Connection(self.backend.url, self.backend.token_env, self.backend.connect_timeout_s,
                          self.backend.chunk_timeout_s)
        try:
            image = (d / "image.png").read_bytes()
            if self.served.controls == "keys":
                init = json.loads((d / "init.json").read_text())
                init["first_frame"] = image
                init["condition_inputs"] = {"camera_actions": json.loads((d / "camera_actions.json").read_text())}
                session = engines.run_sglang(conn, init, height=c.height, width=c.width, total_frames=N,
                                             max_chunks=self.max_chunks(N), chunk_frames=self.chunk_frames(),
                                             on_frame=sink)
                session.sent["first_frame"] = "<controls/image.png>"
                session.sent["condition_inputs"] = {"camera_actions": "<controls/camera_actions.json>"}
            else:
                request = json.loads((d / "request.json").read_text())
                request["image"] = np.ascontiguousarray(self.canvas_image_and_K(req.case)[0])
                request["camera"] = {"poses": np.load(d / "poses.npy"), "intrinsics": np.load(d / "intrinsics.npy")}
                session = engines.run_vllm_camera(conn, request, height=c.height, width=c.width, total_frames=N,
                                                  on_frame=sink)
                session.sent["image"] = "<controls/image.png>"
                session.sent["camera"] = {"poses": "<controls/poses.npy>", "intrinsics": "<controls/intrinsics.npy>"}
        finally:
            conn.close()
        if session.frames != N:
            from .transport import ServedError

            raise ServedError(f"the session ended with {session.frames} of {N} frames", "wrong frame size",
                              {"session": session.to_dict()})
        elapsed = time.perf_counter() - t0
        latency = latency_summary(session)
        trace = self.context_trace(req, session)
        info = {"backend": {"engine": self.backend.engine, "route": self.backend.route,
                            "engine_version": self.backend.engine_version},
                "told": session.sent, "server_hello": session.server_hello, "latency": latency,
                "note": "chunks[*].context is the harness policy's selection that the told sink/window realise on "
                        "the server's cache (the engine does not report its cache); chunks[*].served is what the "
                        "server streamed and reported for that chunk"}
        return GeneratedVideo(num_frames=N, fps=float(c.fps), context_trace=trace,
                              timings={"generate_s": elapsed}, context_info=info,
                              meta={"served": {"engine": self.backend.engine, "url": self.backend.url,
                                               "engine_version": self.backend.engine_version, "latency": latency,
                                               "frames": session.frames, "other_messages": session.other_messages,
                                               "closed_by_server": session.closed_by_server}})

    def context_trace(self, req: ItemRequest, session: Any) -> list[dict[str, Any]]:
        """One entry per chunk the server streamed: the policy's selection (latent indices) and what came back."""
        from harness.context import ContextSelector

        path, sm = req.path, self.served
        lat = (path.num_frames - 1) // sm.latent_stride + 1
        latent_c2w = path.c2w[np.arange(lat) * sm.latent_stride]
        policy = req.context
        if policy.chunk != sm.chunk_latents:  # native/fullkv files may carry another chunk: the engine's counts
            import dataclasses

            policy = dataclasses.replace(policy, chunk=sm.chunk_latents)
        sel = ContextSelector(policy, latent_c2w, np.asarray(path.K), self.config.height, self.config.width)
        out = []
        for k in range(max(sel.num_chunks, len(session.chunks))):
            entry: dict[str, Any] = sel.select(k).to_trace() if k < sel.num_chunks else {"chunk": k}
            rec = session.chunks.get(k)
            entry["served"] = rec.to_dict() if rec is not None else None
            out.append(entry)
        return out


def latency_summary(session: Any) -> dict[str, Any]:
    """Per-chunk latency: our wall clock (ms between a chunk's last frame and the previous one's, the first from the
    request) beside the server's ``chunk_total_ms`` / ``scheduler_forward_ms`` where it reports them."""
    chunks = [session.chunks[k] for k in sorted(session.chunks)]
    wall = [ch.wall_ms for ch in chunks if ch.wall_ms is not None]
    server = [float(ch.server["chunk_total_ms"]) for ch in chunks
              if ch.server and ch.server.get("chunk_total_ms") is not None]
    forward = [float(ch.server["scheduler_forward_ms"]) for ch in chunks
               if ch.server and ch.server.get("scheduler_forward_ms") is not None]

    def stats(v: list[float]) -> dict[str, float] | None:
        if not v:
            return None
        a = np.asarray(v, dtype=np.float64)
        return {"n": int(a.size), "mean_ms": round(float(a.mean()), 3), "median_ms": round(float(np.median(a)), 3),
                "max_ms": round(float(a.max()), 3), "total_ms": round(float(a.sum()), 3)}

    first = chunks[0].first_frame_ms if chunks else None
    return {"wall_chunk_ms": [round(float(x), 3) for x in wall], "server_chunk_total_ms": server,
            "server_scheduler_forward_ms": forward, "wall": stats(wall), "server": stats(server),
            "first_frame_ms": None if first is None else round(float(first), 3),
            "server_reports": "chunk_stats" if server else "none (this endpoint reports no chunk statistics)"}
