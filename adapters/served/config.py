"""Typed settings of the served backend (``conf/backend/<engine>.yaml`` plus the top-level ``endpoint``).

Poses and units follow :mod:`trajectories.conventions`; translations reach a key-driven engine in its own units
(``units_per_scene_unit`` engine units per scene unit).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ConfigError

from .keys import KeyKinematics

ENGINES = ("sglang", "vllm_omni")
CONTROLS = ("keys", "poses")


class BackendConfigError(ConfigError):
    """Bad ``backend.*`` / ``endpoint`` setting (exit code 2; the message names the key and the fix)."""


@dataclass(frozen=True)
class ServedModel:
    """How one model is driven on one engine (``backend.models.<model>``).

    controls: ``keys`` (a held-key script, :mod:`adapters.served.keys`) or ``poses`` (c2w poses + intrinsics).
    kinematics: the engine's key kinematics (``keys`` only). units_per_scene_unit: engine translation units per
    scene unit. chunk_latents / latent_stride: the engine's chunk in latents and pixel frames per latent (they decide
    ``max_chunks`` and the frames each chunk brings). init_num_frames: what the init's ``num_frames`` carries:
    ``condition`` (LingBot on SGLang: the condition length ``(2 * chunk - 1) * stride + 1``) or ``total``.
    check_chunk_frames: check each chunk's frame count (first chunk ``1 + stride * (chunk - 1)``, later ones
    ``stride * chunk``, the causal Wan rule). model_K: the intrinsics the engine uses whatever we send
    (``[fx, fy]``, centred), for the field-of-view residual; null when the engine takes ours. init_extra: extra
    init fields, sent as they are. facts: where these values come from (recorded).
    """

    controls: str
    kinematics: KeyKinematics | None = None
    units_per_scene_unit: float = 1.0
    chunk_latents: int = 4
    latent_stride: int = 4
    init_num_frames: str = "total"
    check_chunk_frames: bool = False
    model_K: tuple[float, float] | None = None
    init_extra: dict[str, Any] = field(default_factory=dict)
    facts: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> ServedModel:
        d = dict(d or {})
        names = {f.name for f in dataclasses.fields(cls)}
        for k in d:
            if k not in names:
                raise BackendConfigError(f"{where}.{k}: unknown setting; known: {', '.join(sorted(names))}")
        if d.get("controls") not in CONTROLS:
            raise BackendConfigError(f"{where}.controls={d.get('controls')!r}: use one of {list(CONTROLS)}")
        if d["controls"] == "keys":
            try:
                d["kinematics"] = KeyKinematics.from_dict(dict(d.get("kinematics") or {}))
            except (TypeError, ValueError) as exc:
                raise BackendConfigError(f"{where}.kinematics: {exc}") from None
        else:
            d["kinematics"] = None
        if d.get("model_K") is not None:
            d["model_K"] = tuple(float(x) for x in d["model_K"])
        for k in ("chunk_latents", "latent_stride"):
            if k in d and (not isinstance(d[k], int) or d[k] < 1):
                raise BackendConfigError(f"{where}.{k}={d[k]!r}: must be a positive integer")
        if d.get("init_num_frames", "total") not in ("total", "condition"):
            raise BackendConfigError(f"{where}.init_num_frames={d['init_num_frames']!r}: use total or condition")
        if not float(d.get("units_per_scene_unit", 1.0)) > 0:
            raise BackendConfigError(f"{where}.units_per_scene_unit must be > 0")
        d["init_extra"] = dict(d.get("init_extra") or {})
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["kinematics"] = self.kinematics.to_dict() if self.kinematics else None
        out["model_K"] = list(self.model_K) if self.model_K else None
        return out


@dataclass(frozen=True)
class BackendConfig:
    """``backend`` (one engine) and ``endpoint``.

    name / engine: the engine (``sglang`` or ``vllm_omni``). endpoint: ``ws://host:port`` or ``wss://...`` (the
    route is appended). route: the engine's WebSocket route. token_env: the NAME of the environment variable that
    holds the endpoint's token (never its value). connect_timeout_s: handshake limit. chunk_timeout_s: the longest
    wait for any message (a slow server fails the item). output_format: SGLang's ``realtime_output_format``.
    num_inference_steps: null = ``model.sampling_steps``. engine_version: the engine release the mapping was
    checked against (recorded). models: model name -> :class:`ServedModel`.
    """

    name: str
    engine: str
    endpoint: str
    route: str
    token_env: str | None = None
    connect_timeout_s: float = 10.0
    chunk_timeout_s: float = 300.0
    output_format: str = "raw"
    num_inference_steps: int | None = None
    engine_version: str = ""
    models: dict[str, ServedModel] = field(default_factory=dict)
    description: str = ""

    #: keys that say where and how to connect, not what is generated (kept out of the item fingerprint)
    CONNECTION = ("endpoint", "token_env", "connect_timeout_s", "chunk_timeout_s")

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
        tok = d.get("token_env")
        if tok is not None and (not isinstance(tok, str) or not tok.replace("_", "").isalnum()):
            raise BackendConfigError("backend.token_env: give the NAME of an environment variable (e.g. "
                                     "WORLDMEM_ENDPOINT_TOKEN), never the token itself")
        for k in ("connect_timeout_s", "chunk_timeout_s"):
            if k in d and not (isinstance(d[k], (int, float)) and d[k] > 0):
                raise BackendConfigError(f"backend.{k}={d[k]!r}: must be a number of seconds > 0")
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
