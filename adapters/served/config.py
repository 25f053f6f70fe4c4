"""Typed settings of the served backend (``conf/backend/<engine>.yaml`` plus the top-level ``endpoint``).

Poses and units follow :mod:`trajectories.conventions`; translations reach a key-driven engine in its own units
(``units_per_scene_unit`` engine units per scene unit).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ConfigError

from .geometry import Geometry
from .keys import KeyKinematics

ENGINES = ("sglang", "vllm_omni")
CONTROLS = ("keys", "poses")


class BackendConfigError(ConfigError):
    """Bad ``backend.*`` / ``endpoint`` setting (exit code 2; the message names the key and the fix)."""


@dataclass(frozen=True)
class ServedModel:
    """How one model is driven on one engine (``backend.models.<model>``).

    serves: what the engine runs for this model, as its own registry names it (``model_id``, ``pipeline``,
    ``pipeline_config``; recorded with every item). controls: ``keys`` (a held-key script,
    :mod:`adapters.served.keys`) or ``poses`` (exact c2w poses + intrinsics). kinematics: the engine's key
    kinematics (``keys`` only). units_per_scene_unit: engine translation units per scene unit. geometry: the engine's
    chunk geometry (:class:`adapters.served.geometry.Geometry`, from its config class). init_num_frames: what the
    init's ``num_frames`` carries: ``condition`` (LingBot on SGLang: the condition length ``(2 c - 1) s + 1``, which
    the engine's adapter floors to) or ``total``. model_K: the intrinsics the engine uses whatever we send
    (``[fx, fy]``, centred), for the field-of-view residual; null when it takes ours. intrinsics_reference:
    ``[width, height]`` the engine's intrinsics are stated at (it rescales them to the canvas), null = the canvas.
    frame_size: ``[width, height]``, the one frame size the engine serves the model at (fixed when the server loads
    it, e.g. by its deploy config); any other ``model.width`` x ``model.height`` is refused at planning. null = any.
    translation_normalisation: ``none`` or ``max_step`` (the engine divides the framewise translations by their
    largest step: scale is not conveyed). contexts: policy -> the engine code that applies it (file:line); any other
    policy is refused with ``refused_contexts[policy]``. init_extra: extra init fields, sent as they are. facts:
    where these values come from (recorded).
    """

    controls: str
    geometry: Geometry
    serves: dict[str, str] = field(default_factory=dict)
    kinematics: KeyKinematics | None = None
    units_per_scene_unit: float = 1.0
    init_num_frames: str = "total"
    model_K: tuple[float, float] | None = None
    intrinsics_reference: tuple[int, int] | None = None
    frame_size: tuple[int, int] | None = None
    translation_normalisation: str = "none"
    contexts: dict[str, str] = field(default_factory=dict)
    refused_contexts: dict[str, str] = field(default_factory=dict)
    init_extra: dict[str, Any] = field(default_factory=dict)
    facts: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> ServedModel:
        d = _known(cls, dict(d or {}), where)
        if d.get("controls") not in CONTROLS:
            raise BackendConfigError(f"{where}.controls={d.get('controls')!r}: use one of {list(CONTROLS)}")
        d["kinematics"] = (_typed(KeyKinematics.from_dict, d.get("kinematics"), f"{where}.kinematics")
                           if d["controls"] == "keys" else None)
        d["geometry"] = _typed(lambda g: Geometry(**_known(Geometry, g, f"{where}.geometry")), d.get("geometry"),
                               f"{where}.geometry")
        for k, n in (("model_K", float), ("intrinsics_reference", int), ("frame_size", int)):
            if d.get(k) is not None:
                d[k] = tuple(n(x) for x in d[k])
                if len(d[k]) != 2 or min(d[k]) <= 0:
                    raise BackendConfigError(f"{where}.{k}={list(d[k])}: give two positive numbers")
        if d.get("init_num_frames", "total") not in ("total", "condition"):
            raise BackendConfigError(f"{where}.init_num_frames={d['init_num_frames']!r}: use total or condition")
        if d.get("translation_normalisation", "none") not in ("none", "max_step"):
            raise BackendConfigError(f"{where}.translation_normalisation: use none or max_step")
        if not float(d.get("units_per_scene_unit", 1.0)) > 0:
            raise BackendConfigError(f"{where}.units_per_scene_unit must be > 0")
        for k in ("serves", "contexts", "refused_contexts", "init_extra"):
            d[k] = {str(a): (b if k == "init_extra" else str(b)) for a, b in dict(d.get(k) or {}).items()}
        if not d["contexts"]:
            raise BackendConfigError(f"{where}.contexts: name at least one policy the engine applies (native)")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["kinematics"] = self.kinematics.to_dict() if self.kinematics else None
        out["geometry"] = self.geometry.to_dict()
        for k in ("model_K", "intrinsics_reference", "frame_size"):
            out[k] = list(getattr(self, k)) if getattr(self, k) else None
        return out


def _known(cls: Any, d: Any, where: str) -> dict[str, Any]:
    """``d`` as a dict whose keys are all fields of the dataclass ``cls`` (else a :class:`BackendConfigError`)."""
    if not isinstance(d, dict):
        raise BackendConfigError(f"{where}: expected a mapping, got {type(d).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    for k in d:
        if k not in names:
            raise BackendConfigError(f"{where}.{k}: unknown setting; known: {', '.join(sorted(names))}")
    return dict(d)


def _typed(build: Any, value: Any, where: str) -> Any:
    """``build(value)`` with its TypeError / ValueError turned into a :class:`BackendConfigError` naming ``where``."""
    try:
        return build(dict(value or {}))
    except BackendConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise BackendConfigError(f"{where}: {exc}") from None


#: the WebSocket routes each engine's client speaks; a route that serves another model is refused with the reason
ROUTES = {"sglang": ("/v1/realtime_video/generate",), "vllm_omni": ("/v1/realtime/video",)}
ROUTE_REFUSALS = {
    "/v1/realtime/world/camera": "vLLM-Omni's camera route serves LingBot-World-Fast (v1, LingbotWorldFastPipeline, "
                                 "3-latent trimming), not a model this harness runs (lingbot_v2 is LingBot-World v2); "
                                 "use backend.route=/v1/realtime/video, vLLM-Omni 0.30's route for v2",
}


@dataclass(frozen=True)
class BackendConfig:
    """``backend`` (one engine) and ``endpoint``.

    name / engine: the engine (``sglang`` or ``vllm_omni``). endpoint: ``ws://host:port`` or ``wss://...`` (the
    route is appended). route: the engine's WebSocket route (:data:`ROUTES`). token_env: the NAME of the environment
    variable that holds the endpoint's token (never its value). connect_timeout_s: handshake limit.
    chunk_timeout_s: the longest wait for any message. item_timeout_s: the longest a whole item may take (a server
    trickling messages fails the item). max_unknown_messages: messages of a type the client does not know that an
    item tolerates (counted in the item's meta). action_root: vLLM-Omni's trusted action directory
    (``VLLM_OMNI_LINGBOT_ACTION_ROOT`` of the server) as this host sees it, where exact poses are written.
    output_format: SGLang's ``realtime_output_format``. num_inference_steps: null = ``model.sampling_steps``.
    engine_version: the engine release the mapping was checked against (recorded). models: model name ->
    :class:`ServedModel`.
    """

    name: str
    engine: str
    endpoint: str
    route: str
    token_env: str | None = None
    connect_timeout_s: float = 10.0
    chunk_timeout_s: float = 300.0
    item_timeout_s: float = 7200.0
    max_unknown_messages: int = 64
    action_root: str | None = None
    output_format: str = "raw"
    num_inference_steps: int | None = None
    engine_version: str = ""
    models: dict[str, ServedModel] = field(default_factory=dict)
    description: str = ""

    #: keys that say where and how to connect, not what is generated (kept out of the item fingerprint)
    CONNECTION = ("endpoint", "token_env", "connect_timeout_s", "chunk_timeout_s", "item_timeout_s",
                  "max_unknown_messages", "action_root")

    @classmethod
    def from_dict(cls, d: dict[str, Any], endpoint: Any) -> BackendConfig:
        d = dict(d)
        names = {f.name for f in dataclasses.fields(cls)} - {"endpoint"}
        for k in d:
            if k not in names:
                raise BackendConfigError(f"backend.{k}: unknown setting; known: {', '.join(sorted(names))}")
        if d.get("engine") not in ENGINES:
            raise BackendConfigError(f"backend.engine={d.get('engine')!r}: use one of {list(ENGINES)}")
        if not isinstance(endpoint, str) or not endpoint.startswith(("ws://", "wss://")):
            raise BackendConfigError(f"endpoint={endpoint!r}: backend={d.get('name')} needs the server's WebSocket "
                                     "address, e.g. endpoint=ws://127.0.0.1:30000 (wss:// for TLS)")
        route = d.get("route")
        if route in ROUTE_REFUSALS or route not in ROUTES[d["engine"]]:
            why = ROUTE_REFUSALS.get(str(route), f"the {d['engine']} client speaks {list(ROUTES[d['engine']])}")
            raise BackendConfigError(f"backend.route={route!r}: {why}")
        tok = d.get("token_env")
        if tok is not None and (not isinstance(tok, str) or not tok.replace("_", "").isalnum()):
            raise BackendConfigError("backend.token_env: give the NAME of an environment variable (e.g. "
                                     "WORLDMEM_ENDPOINT_TOKEN), never the token itself")
        for k in ("connect_timeout_s", "chunk_timeout_s", "item_timeout_s"):
            if k in d and not (isinstance(d[k], (int, float)) and not isinstance(d[k], bool) and d[k] > 0):
                raise BackendConfigError(f"backend.{k}={d[k]!r}: must be a number of seconds > 0")
        mu = d.get("max_unknown_messages", 64)
        if isinstance(mu, bool) or not isinstance(mu, int) or mu < 0:
            raise BackendConfigError(f"backend.max_unknown_messages={mu!r}: must be an integer >= 0")
        if d.get("output_format", "raw") not in ("raw", "webp", "jpeg"):
            raise BackendConfigError(f"backend.output_format={d['output_format']!r}: use raw (lossless), webp or jpeg")
        models = {str(m): ServedModel.from_dict(v, f"backend.models.{m}") for m, v in (d.pop("models", None)
                                                                                      or {}).items()}
        return cls(endpoint=endpoint.rstrip("/"), models=models, **d)

    @property
    def url(self) -> str:
        return self.endpoint + self.route

    def semantic_dict(self) -> dict[str, Any]:
        """What decides the video (engine, route, format, steps, the model mapping); no connection settings."""
        return {"name": self.name, "engine": self.engine, "route": self.route, "output_format": self.output_format,
                "num_inference_steps": self.num_inference_steps, "engine_version": self.engine_version,
                "models": {k: v.to_dict() for k, v in sorted(self.models.items())}}

    def connection_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.CONNECTION}
