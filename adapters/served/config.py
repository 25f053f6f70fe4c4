"""Typed settings of the served backend (``conf/backend/<engine>.yaml`` plus the top-level ``endpoint``).

Poses and units follow :mod:`trajectories.conventions`; translations reach a key-driven engine in its own units
(``units_per_scene_unit`` engine units per scene unit).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Literal, Optional, Union, get_args

from pydantic import BeforeValidator, ConfigDict, Discriminator, Field, StrictInt, StrictStr, Tag, model_validator
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError, UserError
from harness.sections import Fix, Invalid, Number, Section

from .geometry import Geometry
from .keys import KeyKinematics

Engine = Literal["sglang", "vllm_omni"]
ENGINES: tuple[str, ...] = Engine.__args__  # type: ignore[attr-defined]  # a Literal's values
Controls = Literal["keys", "poses"]
CONTROLS: tuple[str, ...] = Controls.__args__  # type: ignore[attr-defined]
#: the backend that runs the model's own adapter (an upstream checkout, or in process for built-in models)
DEFAULT_BACKEND = "upstream"
_CONFIG = ConfigDict(extra="forbid")


class BackendConfigError(ConfigError):
    """Bad ``backend.*`` / ``endpoint`` setting (exit code 2; the message names the key and the fix)."""


def _positive_pair(kind: type) -> Any:
    """``[a, b]`` of two positive numbers, as a tuple of ``kind`` (``model_K`` floats, sizes integers)."""
    def check(value: Any) -> Any:
        if value is None:
            return None
        try:
            pair = tuple(kind(x) for x in value)
        except (TypeError, ValueError):
            raise Invalid("give two positive numbers") from None
        if len(pair) != 2 or min(pair) <= 0:
            raise Invalid("give two positive numbers")
        return pair
    return BeforeValidator(check)


def _keys_only(data: Any) -> Any:
    """``kinematics`` belongs to a key-driven model: dropped for one driven by poses."""
    if isinstance(data, dict) and data.get("controls") != "keys":
        return {k: v for k, v in data.items() if k != "kinematics"}
    return data


@dataclass(frozen=True, config=_CONFIG)
class ServedModel(Section):
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

    section: ClassVar[str] = "backend.models.<model>"
    error: ClassVar[type[UserError]] = BackendConfigError

    controls: Annotated[Controls, Fix(f"use one of {list(CONTROLS)}")]
    geometry: Geometry
    serves: dict[str, str] = dataclasses.field(default_factory=dict)
    kinematics: Optional[KeyKinematics] = None
    units_per_scene_unit: Annotated[Number, Field(gt=0), Fix("must be > 0")] = 1.0
    init_num_frames: Annotated[Literal["total", "condition"], Fix("use total or condition")] = "total"
    model_K: Annotated[Optional[tuple[float, float]], _positive_pair(float)] = None
    intrinsics_reference: Annotated[Optional[tuple[int, int]], _positive_pair(int)] = None
    frame_size: Annotated[Optional[tuple[int, int]], _positive_pair(int)] = None
    translation_normalisation: Annotated[Literal["none", "max_step"], Fix("use none or max_step")] = "none"
    contexts: Annotated[dict[str, str], Field(min_length=1),
                        Fix("name at least one policy the engine applies (native)")] = dataclasses.field(
        default_factory=dict)
    refused_contexts: dict[str, str] = dataclasses.field(default_factory=dict)
    init_extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    facts: StrictStr = ""

    def __post_init__(self) -> None:
        if self.controls == "keys" and self.kinematics is None:
            raise Invalid("controls: keys needs the engine's key kinematics (kinematics: yaw_deg, pitch_deg, move)")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["kinematics"] = self.kinematics.to_dict() if self.kinematics else None
        out["geometry"] = self.geometry.to_dict()
        for k in ("model_K", "intrinsics_reference", "frame_size"):
            out[k] = list(getattr(self, k)) if getattr(self, k) else None
        return out


#: the WebSocket routes each engine's client speaks; a route that serves another model is refused with the reason
ROUTES = {"sglang": ("/v1/realtime_video/generate",), "vllm_omni": ("/v1/realtime/video",)}
ROUTE_REFUSALS = {
    "/v1/realtime/world/camera": "vLLM-Omni's camera route serves LingBot-World-Fast (v1, LingbotWorldFastPipeline, "
                                 "3-latent trimming), not a model this harness runs (lingbot_v2 is LingBot-World v2); "
                                 "use backend.route=/v1/realtime/video, vLLM-Omni 0.30's route for v2",
}
_SECONDS = Fix("must be a number of seconds > 0")


@dataclass(frozen=True, config=_CONFIG)
class UpstreamBackend(Section):
    """``backend=upstream`` (the default): each model runs through its own adapter; ``endpoint`` stays null."""

    section: ClassVar[str] = "backend"
    error: ClassVar[type[UserError]] = BackendConfigError

    name: Literal["upstream"] = "upstream"
    description: StrictStr = ""


@dataclass(frozen=True, config=_CONFIG)
class BackendConfig(Section):
    """``backend`` (one engine; ``conf/backend/<engine>.yaml``); the server's address is the top-level ``endpoint``.

    name / engine: the engine (``sglang`` or ``vllm_omni``). route: the engine's WebSocket route (:data:`ROUTES`).
    token_env: the NAME of the environment variable that holds the endpoint's token (never its value).
    connect_timeout_s: handshake limit. chunk_timeout_s: the longest wait for any message. item_timeout_s: the
    longest a whole item may take (a server trickling messages fails the item). max_unknown_messages: messages of a
    type the client does not know that an item tolerates (counted in the item's meta). action_root: vLLM-Omni's
    trusted action directory (``VLLM_OMNI_LINGBOT_ACTION_ROOT`` of the server) as this host sees it, where exact
    poses are written. output_format: SGLang's ``realtime_output_format``. num_inference_steps: null =
    ``model.sampling_steps``. engine_version: the engine release the mapping was checked against (recorded).
    models: model name -> :class:`ServedModel`.
    """

    section: ClassVar[str] = "backend"
    error: ClassVar[type[UserError]] = BackendConfigError
    fix: ClassVar[str] = "choose a backend: backend=upstream|sglang|vllm_omni"

    name: StrictStr
    engine: Annotated[Engine, Fix(f"use one of {list(ENGINES)}")]
    route: StrictStr
    token_env: Annotated[Optional[StrictStr], Field(pattern=r"^[A-Za-z0-9_]+$"), Fix(
        "give the NAME of an environment variable (e.g. WORLDMEM_ENDPOINT_TOKEN), never the token itself")] = None
    connect_timeout_s: Annotated[Number, Field(gt=0), _SECONDS] = 10.0
    chunk_timeout_s: Annotated[Number, Field(gt=0), _SECONDS] = 300.0
    item_timeout_s: Annotated[Number, Field(gt=0), _SECONDS] = 7200.0
    max_unknown_messages: Annotated[StrictInt, Field(ge=0), Fix("must be an integer >= 0")] = 64
    action_root: Optional[StrictStr] = None
    output_format: Annotated[Literal["raw", "webp", "jpeg"], Fix("use raw (lossless), webp or jpeg")] = "raw"
    num_inference_steps: Optional[StrictInt] = None
    engine_version: StrictStr = ""
    models: dict[str, Annotated[ServedModel, BeforeValidator(_keys_only)]] = dataclasses.field(default_factory=dict)
    description: StrictStr = ""

    #: keys that say where and how to connect, not what is generated (kept out of the item fingerprint)
    CONNECTION: ClassVar[tuple[str, ...]] = ("token_env", "connect_timeout_s", "chunk_timeout_s", "item_timeout_s",
                                             "max_unknown_messages", "action_root")

    @model_validator(mode="before")
    @classmethod
    def _engine_of_name(cls, data: Any) -> Any:
        """``engine`` defaults to the backend's name when that is an engine (``backend=sglang``), ``route`` to the
        route the engine's client speaks."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if "engine" not in out and out.get("name") in ENGINES:
            out["engine"] = out["name"]
        if "route" not in out and out.get("engine") in ROUTES:
            out["route"] = ROUTES[out["engine"]][0]
        return out

    def __post_init__(self) -> None:
        if self.route in ROUTE_REFUSALS or self.route not in ROUTES[self.engine]:
            why = ROUTE_REFUSALS.get(self.route, f"the {self.engine} client speaks {list(ROUTES[self.engine])}")
            raise BackendConfigError(f"backend.route={self.route!r}: {why}")

    def url(self, endpoint: str) -> str:
        """The session's address: ``endpoint`` (``ws://host:port``) and the engine's route."""
        return endpoint.rstrip("/") + self.route

    def semantic_dict(self) -> dict[str, Any]:
        """What decides the video (engine, route, format, steps, the model mapping); no connection settings."""
        return {"name": self.name, "engine": self.engine, "route": self.route, "output_format": self.output_format,
                "num_inference_steps": self.num_inference_steps, "engine_version": self.engine_version,
                "models": {k: v.to_dict() for k, v in sorted(self.models.items())}}

    def connection_dict(self, endpoint: str) -> dict[str, Any]:
        """Where and how the session connected (the item's ``backend_connection``)."""
        return {"endpoint": endpoint.rstrip("/"), **{k: getattr(self, k) for k in self.CONNECTION}}


def _backend_kind(value: Any) -> str:
    name = value.get("name", DEFAULT_BACKEND) if isinstance(value, dict) else getattr(value, "name", None)
    return "upstream" if name == DEFAULT_BACKEND else "served"


#: the ``backend`` section: the model's own adapter, or a serving engine
Backend = Annotated[Union[Annotated[UpstreamBackend, Tag("upstream")], Annotated[BackendConfig, Tag("served")]],
                    Discriminator(_backend_kind)]


#: the served backends a message offers (``backend=sglang or backend=vllm_omni``): the :data:`Engine` words
_ENGINE_CHOICES = " or ".join(f"backend={e}" for e in get_args(Engine))


def check_endpoint(backend: UpstreamBackend | BackendConfig | None, endpoint: Any) -> None:
    """The rule between ``backend`` and the top-level ``endpoint``: a WebSocket address exactly when a served
    backend is chosen."""
    if backend is None or isinstance(backend, UpstreamBackend):
        if endpoint is None:
            return
        if backend is None:
            raise BackendConfigError(f"endpoint: set, but no backend is chosen; add {_ENGINE_CHOICES}")
        raise BackendConfigError(f"endpoint={endpoint!r}: backend=upstream runs the model's own adapter; choose "
                                 f"{_ENGINE_CHOICES} to use a served model (or drop endpoint)")
    if not isinstance(endpoint, str) or not endpoint.startswith(("ws://", "wss://")):
        raise BackendConfigError(f"endpoint={endpoint!r}: backend={backend.name} needs the server's WebSocket "
                                 "address, e.g. endpoint=ws://127.0.0.1:30000 (wss:// for TLS)")
