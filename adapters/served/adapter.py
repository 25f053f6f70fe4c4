"""The served backend as an adapter: a model's camera path compiled into a serving engine's native camera input,
generated over a WebSocket session, frames streamed into the item's video.

:class:`ServedAdapter` wraps the model's own adapter (canvas, intrinsics and camera path are the model's, so a
served item and an upstream item of the same model get the same path) and replaces ``compile`` / ``generate``:

* ``compile`` writes ``controls/``: ``image.png`` and ``prompt.txt`` (what the session sends), the engine's camera
  input (``camera_actions.json``, a held-key script, for LingBot on SGLang; ``poses.npy`` + ``intrinsics.npy`` for
  SANA-WM on SGLang and LingBot v2 on vLLM-Omni) and the request itself (``init.json`` / ``request.json``: every
  field sent, the image and arrays named by file). A key script is decoded back with the engine's kinematics: the
  achieved-vs-requested residual in ``meta.json``. The chunk geometry the engine will stream
  (:mod:`adapters.served.geometry`) is recorded there too; a clip length it cannot honour is refused at planning.
* ``generate`` opens the session, streams each frame into the video as it arrives, and returns the per-chunk
  latency (our wall clock beside the server's ``chunk_stats``) and the context trace (what the server was told and
  reported).

Context policies run only where the engine's own code applies them (``backend.models.<model>.contexts``, with the
file and line that reads the setting); any other is refused at planning with the reason. On LingBot v2 / SGLang
FullKV and Sliding become ``realtime_causal_sink_size`` / ``realtime_causal_kv_cache_num_frames`` (the window counts
every visible latent: sink, recent and current chunk). Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from adapters.base import (
    Adapter,
    FrameSink,
    GeneratedVideo,
    ItemRequest,
    ModelConfig,
    ModelConfigError,
    NativeControls,
    ServedContextInfo,
    UnsupportedContextError,
)
from harness.context.trace import ChunkTrace
from harness.io import json_text, save_npy, write_text

from .config import BackendConfig, ServedModel
from .geometry import ChunkPlan, GeometryError

if TYPE_CHECKING:
    from harness.cases import Case
    from harness.context import ContextPolicy
    from trajectories import CameraPath, TrajectorySpec

    from .engines import Session
    from .transport import Connection


class ServedModelConfig:
    """The wrapped model's config (every field read through), with no GPU per job (the server owns them) and the
    backend in ``to_dict`` (``backend``: what decides the video; ``backend_connection``: where it ran)."""

    gpus_per_job = 0

    def __init__(self, inner: ModelConfig, backend: BackendConfig, endpoint: str):
        self._inner, self._backend, self._endpoint = inner, backend, endpoint

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def to_dict(self) -> dict[str, Any]:
        return {**self._inner.to_dict(), "gpus_per_job": 0, "backend": self._backend.semantic_dict(),
                "backend_connection": self._backend.connection_dict(self._endpoint)}


class ServedAdapter(Adapter):
    """A model served by an engine (:class:`BackendConfig`), driven through its realtime WebSocket endpoint."""

    requires = ("websockets", "msgpack")  # the WebSocket client and its messages (the `served` extra)

    def __init__(self, inner: Adapter, backend: BackendConfig, endpoint: str):
        """``backend``: the engine's settings; ``endpoint``: the server's WebSocket address (``ws://host:port``)."""
        name = inner.config.name
        if name not in backend.models:
            raise ModelConfigError(f"backend={backend.name} has no mapping for model={name}: add "
                                   f"backend.models.{name} to conf/backend/{backend.name}.yaml (known: "
                                   f"{', '.join(sorted(backend.models)) or 'none'})")
        self.inner, self.backend = inner, backend
        self.url = backend.url(endpoint)
        self.served: ServedModel = backend.models[name]
        size, fixed = (int(inner.config.width), int(inner.config.height)), self.served.frame_size
        if fixed is not None and size != fixed:
            raise ModelConfigError(f"model.width x model.height = {size[0]}x{size[1]}: backend={backend.name} serves "
                                   f"model={name} only at {fixed[0]}x{fixed[1]}, the size the server fixes when it "
                                   f"loads the model (backend.models.{name}.frame_size; change it there if your "
                                   f"server is launched with another); set model.width={fixed[0]} "
                                   f"model.height={fixed[1]}")
        self.config = ServedModelConfig(inner.config, backend, endpoint)  # type: ignore[assignment]
        self._canvas = {}

    # -- what the engine can do ---------------------------------------------------------------------------------
    def supported_contexts(self) -> tuple[str, ...]:
        return tuple(self.served.contexts)

    def check_context(self, policy: ContextPolicy) -> None:
        name = self.inner.config.name
        if policy.name not in self.served.contexts:
            why = self.served.refused_contexts.get(policy.name, "the engine's code does not apply it")
            raise UnsupportedContextError(f"model={name} backend={self.backend.name} cannot run "
                                          f"context={policy.name}: {why}. Supported: "
                                          f"{', '.join(self.supported_contexts())}")
        c = self.served.geometry.chunk_latents
        if policy.name == "sliding" and policy.chunk != c:
            raise UnsupportedContextError(
                f"context=sliding with context.chunk={policy.chunk}: the engine generates {c} latents per chunk "
                f"(backend.models.{name}.geometry.chunk_latents, from the engine's config); set context.chunk={c}")

    def canvas_image_and_K(self, case: Case) -> tuple[np.ndarray, np.ndarray]:
        return self.inner.canvas_image_and_K(case)

    def canvas_K(self, case: Case) -> np.ndarray:
        return self.inner.canvas_K(case)

    def path_for(self, spec: TrajectorySpec, K: np.ndarray, trajectory: str | None = None) -> CameraPath:
        return self.inner.path_for(spec, K, trajectory)

    # -- geometry -------------------------------------------------------------------------------------------------
    def plan(self, N: int) -> ChunkPlan:
        """The chunks the engine streams for an N-frame clip; refuses N it cannot honour exactly (naming the
        nearest counts it can)."""
        try:
            return self.served.geometry.plan(N)
        except GeometryError as exc:
            raise ModelConfigError(f"{exc} (backend={self.backend.name} model={self.inner.config.name})") from None

    def num_latents(self, N: int) -> int:
        return self.plan(N).latents

    def max_chunks(self, N: int) -> int:
        return self.plan(N).max_chunks

    def cache_settings(self, policy: ContextPolicy, N: int) -> dict[str, Any]:
        """SGLang's cache fields for ``policy`` where the engine applies them (``contexts``): sglang 0.5.23
        ``protocol.py::RealtimeVideoGenerationsRequest``; the window counts every visible latent frame, sink and
        current chunk included (``causal_denoising.py::_apply_causal_cache_overrides``)."""
        if self.backend.engine != "sglang" or policy.name in ("native",) or policy.name not in self.served.contexts:
            return {}
        if policy.name == "sliding":
            return {"realtime_causal_sink_size": policy.sink,
                    "realtime_causal_kv_cache_num_frames": policy.sink + policy.recent + policy.chunk}
        return {"realtime_causal_sink_size": 0, "realtime_causal_kv_cache_num_frames": self.num_latents(N)}

    def message_limit(self, N: int) -> int:
        """The largest WebSocket message the session may receive (bytes): the biggest frame batch the geometry
        allows (SGLang sends at most 16 raw frames a message, ``realtime_output_adapter.py``
        ``RAW_RGB_FRAMES_PER_WS_MESSAGE``; vLLM-Omni one chunk's fragmented MP4, under its raw size) plus 1 MiB for
        the header or JSON around it."""
        c = self.config
        per_message = max(self.plan(N).chunk_frames)
        if self.backend.engine == "sglang":
            per_message = min(per_message, 16)
        return per_message * int(c.height) * int(c.width) * 3 + (1 << 20)

    # -- compile --------------------------------------------------------------------------------------------------
    def compile(self, req: ItemRequest) -> NativeControls:
        from adapters.memo import write_canvas_file

        c, sm, d = self.config, self.served, req.controls_dir  # d is made by the first write (harness.io.atomic_path)
        ident = self.inner._image_identity(req.case)
        write_canvas_file(d / "image.png", None if ident[0] == "unreadable" else (ident, c.height, c.width),
                          lambda: self.canvas_image_and_K(req.case)[0])
        write_text(d / "prompt.txt", req.case.prompt + "\n")
        files = {"image.png": str(d / "image.png"), "prompt.txt": str(d / "prompt.txt")}
        plan = self.plan(req.path.num_frames)
        meta: dict[str, Any] = {"served": {"engine": self.backend.engine, "route": self.backend.route,
                                           "engine_version": self.backend.engine_version, "controls": sm.controls,
                                           "serves": sm.serves, "geometry": sm.geometry.to_dict(),
                                           "chunks": plan.to_dict(), "facts": sm.facts},
                                "translation_scale": self._translation_scale(req)}
        steps = self.backend.num_inference_steps or getattr(self.inner.config, "sampling_steps", None)
        if sm.controls == "keys":
            decoded = self._compile_keys(req, files, meta, steps)
        else:
            decoded = self._compile_poses(req, files, steps)
        if sm.model_K is not None:
            meta.update(self._intrinsics_meta(req))
        return NativeControls(files=files, command=None, decoded_c2w=decoded, meta=meta)

    def _translation_scale(self, req: ItemRequest) -> dict[str, Any]:
        """How translations reach the engine: its units (``units_per_scene_unit``), or, where it divides the
        framewise steps by their largest (``translation_normalisation: max_step``), that the scale does not reach
        it, with the step the engine divides by (scene units, at the latent anchors it samples)."""
        sm = self.served
        if sm.translation_normalisation == "max_step":
            anchors = self._latent_anchors(req.path.num_frames)
            steps = np.diff(req.path.c2w[anchors][:, :3, 3], axis=0)
            step = float(np.linalg.norm(steps, axis=1).max()) if len(steps) else 0.0
            return {"units": "normalised", "per_scene_unit": 1.0, "recoverable": False,
                    "expects": f"{self.backend.engine}: framewise latent steps divided by the largest one",
                    "max_step_scene_units": step}
        return {"units": "scene", "per_scene_unit": sm.units_per_scene_unit, "recoverable": True,
                "expects": f"{self.backend.engine} engine units"}

    def _latent_anchors(self, N: int) -> np.ndarray:
        return np.arange(self.num_latents(N)) * self.served.geometry.latent_stride

    def _compile_keys(self, req: ItemRequest, files: dict[str, str], meta: dict[str, Any],
                      steps: Optional[int]) -> np.ndarray:
        """``controls: keys``: the key script (``camera_actions.json``) and the session's ``init.json``, added to
        ``files``; the key facts go to ``meta["served"]``. Returns the decoded path (N, 4, 4), scene units."""
        from .keys import decode, encode

        sm, path, d = self.served, req.path, req.controls_dir
        N, scale = path.num_frames, sm.units_per_scene_unit
        kin = sm.kinematics
        assert kin is not None
        anchors = self._latent_anchors(N) if kin.per == "latent" else np.arange(N)
        targets = np.concatenate([np.eye(4)[None], path.c2w[anchors]]) if kin.per == "latent" else path.c2w.copy()
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
        self._write_init(req, files, {"camera_actions": "<controls/camera_actions.json>"}, steps)
        meta["served"].update(key_steps=len(script), keys_per=kin.per, kinematics=kin.to_dict())
        return decoded

    def _write_init(self, req: ItemRequest, files: dict[str, str], conditions: dict[str, Any],
                    steps: Optional[int]) -> None:
        """SGLang's ``init`` (``init.json``): every field sent, the image and camera inputs named by file."""
        c, sm, N = self.config, self.served, req.path.num_frames
        geo = sm.geometry
        cond_frames = ((2 * geo.chunk_latents - 1) * geo.latent_stride + 1 if sm.init_num_frames == "condition"
                       else N)
        init = {"type": "init", "prompt": req.case.prompt, "first_frame": "<controls/image.png>",
                "size": f"{c.width}x{c.height}", "num_frames": cond_frames, "fps": round(c.fps),
                "seed": int(req.seed), "max_chunks": self.max_chunks(N),
                "realtime_output_format": self.backend.output_format, "realtime_output_pacing": False,
                "condition_inputs": conditions, **self.cache_settings(req.context, N), **sm.init_extra}
        if steps:
            init["num_inference_steps"] = int(steps)
        write_text(req.controls_dir / "init.json", json_text(init))
        files["init.json"] = str(req.controls_dir / "init.json")

    def _compile_poses(self, req: ItemRequest, files: dict[str, str], steps: Optional[int]) -> np.ndarray:
        """``controls: poses``: ``poses.npy`` (N, 4, 4 float32, engine units), ``intrinsics.npy`` (N, 4 float32:
        fx, fy, cx, cy pixels, at ``intrinsics_reference`` where the engine rescales them) and the request
        (``init.json`` for SGLang, ``request.json`` for vLLM-Omni), added to ``files``. Returns the path the engine
        conditions on (N, 4, 4), scene units: the poses as float32 (SGLang reads every frame), or sampled at the
        latent anchors and interpolated back (vLLM-Omni resamples the clip to one pose per latent)."""
        c, sm, path, d = self.config, self.served, req.path, req.controls_dir
        N, scale = path.num_frames, sm.units_per_scene_unit
        K = np.asarray(path.K, dtype=np.float64)
        poses = path.c2w.astype(np.float32).copy()
        poses[:, :3, 3] *= np.float32(scale)
        fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
        if sm.intrinsics_reference is not None:  # the engine scales fx, cx by width / ref_w and fy, cy by height / ref_h
            rw, rh = sm.intrinsics_reference
            fx, cx, fy, cy = fx * rw / c.width, cx * rw / c.width, fy * rh / c.height, cy * rh / c.height
        intr = np.tile(np.array([fx, fy, cx, cy], np.float32), (N, 1))
        save_npy(d / "poses.npy", poses)
        save_npy(d / "intrinsics.npy", intr)
        files.update({"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy")})
        decoded: np.ndarray = poses.astype(np.float64)
        decoded[:, :3, 3] /= scale
        if self.backend.engine == "sglang":
            self._write_init(req, files, {"camera": "<controls/poses.npy>",
                                          "intrinsics": "<controls/intrinsics.npy>"}, steps)
            return decoded
        from adapters.controls.poses import interpolate_to_frames

        anchors = self._latent_anchors(N)
        request = {"type": "session.start", "format": "m4s", "prompt": req.case.prompt,
                   "image_reference": {"image_url": "<controls/image.png as a data URL>"},
                   "width": int(c.width), "height": int(c.height), "num_frames": N, "fps": round(c.fps),
                   "seed": int(req.seed), **({"num_inference_steps": int(steps)} if steps else {}),
                   "extra_params": {"action_path": "<attempt folder under backend.action_root: poses.npy, "
                                                   "intrinsics.npy>", **sm.init_extra}}
        write_text(d / "request.json", json_text(request))
        files["request.json"] = str(d / "request.json")
        return interpolate_to_frames(anchors, decoded[anchors], N)

    def _intrinsics_meta(self, req: ItemRequest) -> dict[str, Any]:
        """``intrinsics`` / ``intrinsics_residual`` meta for an engine with fixed intrinsics (``model_K``): the
        case's and the engine's field of view (degrees) and their difference."""
        from trajectories.conventions import fov_from_intrinsics

        c, sm, path = self.config, self.served, req.path
        assert sm.model_K is not None
        meta: dict[str, Any] = {}
        K = np.asarray(path.K, dtype=np.float64)
        mK = np.diag([*sm.model_K, 1.0])  # its principal point is the centre; a field of view reads fx, fy only
        case_fov, model_fov = fov_from_intrinsics(K, c.width, c.height), fov_from_intrinsics(mK, c.width, c.height)
        meta["intrinsics"] = {"case_fov_deg": list(case_fov), "model_fov_deg": list(model_fov),
                              "caveat": f"the engine uses fixed intrinsics {list(sm.model_K)} (fx, fy)"}
        meta["intrinsics_residual"] = {"hfov_error_deg": abs(model_fov[0] - case_fov[0]),
                                       "vfov_error_deg": abs(model_fov[1] - case_fov[1])}
        return meta

    # -- generate -------------------------------------------------------------------------------------------------
    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        import time

        from .transport import Connection, ServedError

        c, N = self.config, req.path.num_frames
        plan = self.plan(N)
        t0 = time.perf_counter()
        attempt = f"worldmem-{req.item_dir.name}-{uuid.uuid4().hex[:12]}"  # unique per item attempt
        conn = Connection(self.url, self.backend.token_env, self.backend.connect_timeout_s,
                          self.backend.chunk_timeout_s, max_size=self.message_limit(N),
                          item_timeout_s=self.backend.item_timeout_s)
        try:
            session = (self._run_sglang(req, conn, plan, sink) if self.backend.engine == "sglang"
                       else self._run_vllm(req, conn, plan, sink, attempt))
        finally:
            conn.close()
        if session.frames != N:
            raise ServedError(f"the session ended with {session.frames} of {N} frames", "wrong frame size",
                              {"session": session.to_dict()})
        latency = latency_summary(session)
        info: ServedContextInfo = {
            "backend": {"engine": self.backend.engine, "route": self.backend.route,
                        "engine_version": self.backend.engine_version, "serves": self.served.serves},
            "attempt": attempt, "geometry": plan.to_dict(), "told": session.sent,
            "server_hello": session.server_hello, "latency": latency,
            "note": "chunks[*].context is the harness policy's selection that the told sink/window realise on "
                    "the server's cache (the engine does not report its cache); chunks[*].served is what the "
                    "server streamed and reported for that chunk"}
        return GeneratedVideo(num_frames=N, fps=float(c.fps), context_trace=self.context_trace(req, session),
                              timings={"generate_s": time.perf_counter() - t0}, context_info=info,
                              meta={"served": {"engine": self.backend.engine, "url": self.url,
                                               "engine_version": self.backend.engine_version, "attempt": attempt,
                                               "latency": latency, "frames": session.frames,
                                               "other_messages": session.other_messages,
                                               "closed_by_server": session.closed_by_server}})

    def _run_sglang(self, req: ItemRequest, conn: Connection, plan: ChunkPlan, sink: FrameSink) -> Session:
        """SGLang: the init with the image bytes and the camera input put back in place of their file names."""
        import json

        from . import engines

        c, d = self.config, req.controls_dir
        init = json.loads((d / "init.json").read_text())
        sent_conditions = init["condition_inputs"]
        init["first_frame"] = (d / "image.png").read_bytes()
        if self.served.controls == "keys":
            init["condition_inputs"] = {"camera_actions": json.loads((d / "camera_actions.json").read_text())}
        else:  # SANA-WM: exact c2w (F, 4, 4) and intrinsics (F, 4) (sana_wm/realtime_stage.py:195-249)
            init["condition_inputs"] = {"camera": np.load(d / "poses.npy").tolist(),
                                        "intrinsics": np.load(d / "intrinsics.npy").tolist()}
        session = engines.run_sglang(conn, init, height=c.height, width=c.width, plan=plan, on_frame=sink,
                                     max_unknown=self.backend.max_unknown_messages)
        session.sent.update(first_frame="<controls/image.png>", condition_inputs=sent_conditions)
        return session

    def _run_vllm(self, req: ItemRequest, conn: Connection, plan: ChunkPlan, sink: FrameSink,
                  attempt: str) -> Session:
        """vLLM-Omni: the poses written under the trusted action root (a folder per attempt, removed after the
        session), the image as a data URL."""
        import base64
        import json
        import shutil

        from harness.errors import ConfigError
        from harness.io import confine

        from . import engines

        c, d = self.config, req.controls_dir
        if not self.backend.action_root:
            raise ConfigError("backend.action_root is not set: vLLM-Omni takes exact poses from a folder under the "
                              "server's trusted action root; set backend.action_root to the server's "
                              "VLLM_OMNI_LINGBOT_ACTION_ROOT as this host sees it (docs/served.md)")
        folder = Path(self.backend.action_root).expanduser().resolve() / attempt
        start = json.loads((d / "request.json").read_text())
        sent = json.loads(json.dumps(start))
        start["image_reference"] = {"image_url": "data:image/png;base64,"
                                                 + base64.b64encode((d / "image.png").read_bytes()).decode()}
        start["extra_params"] = {**start["extra_params"], "action_path": attempt}
        try:
            with confine(folder.parent):
                folder.mkdir(mode=0o755)
                save_npy(folder / "poses.npy", np.load(d / "poses.npy"))
                save_npy(folder / "intrinsics.npy", np.load(d / "intrinsics.npy"))
            session = engines.run_vllm_video(conn, start, height=c.height, width=c.width, plan=plan, on_frame=sink,
                                             max_unknown=self.backend.max_unknown_messages)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        sent["extra_params"]["action_path"] = attempt
        session.sent = {**sent, "image_reference": {"image_url": "<controls/image.png as a data URL>"}}
        return session

    def context_trace(self, req: ItemRequest, session: Session) -> list[ChunkTrace]:
        """One entry per chunk the server streamed: the policy's selection (latent indices) and what came back."""
        import dataclasses

        from harness.context import ContextSelector

        path, geo = req.path, self.served.geometry
        latent_c2w = path.c2w[self._latent_anchors(path.num_frames)]
        policy = req.context
        if policy.chunk != geo.chunk_latents:  # native/fullkv files may carry another chunk: the engine's counts
            policy = dataclasses.replace(policy, chunk=geo.chunk_latents)
        sel = ContextSelector(policy, latent_c2w, np.asarray(path.K), self.config.height, self.config.width)
        out = []
        for k in range(max(sel.num_chunks, len(session.chunks))):
            entry: ChunkTrace = sel.select(k).to_trace() if k < sel.num_chunks else {"chunk": k}
            rec = session.chunks.get(k)
            entry["served"] = rec.to_dict() if rec is not None else None
            out.append(entry)
        return out


def latency_summary(session: Session) -> dict[str, Any]:
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
