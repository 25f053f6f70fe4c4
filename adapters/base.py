"""The adapter contract: a typed model config, a pure ``compile`` and a ``generate``.

An adapter turns a canonical :class:`trajectories.CameraPath` into its model's *native* controls
(``compile``: pure, CPU-only, writes upstream's own input files) and produces a video from them (``generate``).
Core code only talks to this interface; model differences live in the model's config and adapter.

Poses follow :mod:`trajectories.conventions`: OpenCV camera-to-world 4x4 float64, +x right / +y down /
+z forward, world = camera frame of frame 0, positive yaw turns right, positive pitch turns up, K in pixels.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, ClassVar, Literal, Mapping, Optional, TypedDict, get_args

import numpy as np
import pydantic.dataclasses
from pydantic import BeforeValidator, ConfigDict, Field, StrictInt, StrictStr

from harness.context import ContextPolicy
from harness.context.policies import PolicyName
from harness.context.trace import ChunkTrace
from harness.errors import ConfigError, UserError
from harness.outputs import PlainName, Seed
from harness.sections import Fix, Number, Section

if TYPE_CHECKING:
    from adapters.controls.clock import ControlClock
    from adapters.memo import ImageIdentity
    from harness.cases import Case
    from trajectories import CameraPath, TrajectorySpec

log = logging.getLogger(__name__)


class ModelConfigError(ConfigError):
    """Bad model configuration (the message names the ``model.<field>`` and the fix)."""


class UnsupportedContextError(ConfigError):
    """The (model, context policy) pair is not supported; raised at planning time, before anything heavy."""


#: a model config's pydantic settings: unknown keys are refused (:class:`harness.sections.Section`). A model config
#: class is a frozen, keyword-only pydantic dataclass, so its fields are typed and checked when it is read:
#: ``@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)``
CONFIG = ConfigDict(extra="forbid")

Units = Literal["scene", "metres", "normalised", "none"]
#: a positive whole number (pixels, frames, latents)
Positive = Annotated[StrictInt, Field(ge=1), Fix("must be a positive integer")]


def _default_if_none(value: Any) -> Any:
    return {} if value is None else value


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class TranslationScale(Section):
    """How scene-unit translations reach a model (``model.translation_scale``; recorded in every item's meta.json).

    Attributes:
        units: what a translation means to the model: ``scene`` (raw units, taken as they are after the factor),
            ``metres``, ``normalised`` (the model divides the scale away: LingBot's per-clip max-norm) or ``none``
            (no magnitude reaches it: YUME's direction keys).
        per_scene_unit: model translation units per scene unit (> 0), applied at the adapter boundary (``scene``,
            ``metres``); 1 = scene units as they are. Matrix-Game 3 uses 7 (metres per scene unit).
        expects: what upstream expects, in words (its defaults, step sizes), for the record.
    """

    section: ClassVar[str] = "model.translation_scale"
    error: ClassVar[type[UserError]] = ModelConfigError
    noun: ClassVar[str] = "field"
    moved: ClassVar[dict[str, str]] = {
        "units_per_scene_unit": "renamed: write per_scene_unit (units: scene)",
        "metres_per_scene_unit": "renamed: write per_scene_unit (units: metres)"}

    units: Annotated[Units, Fix(f"use one of {list(get_args(Units))}")] = "scene"
    per_scene_unit: Annotated[float, Field(strict=True, gt=0), Fix("must be > 0")] = 1.0
    expects: StrictStr = ""

    UNITS: ClassVar[tuple[str, ...]] = get_args(Units)

    @property
    def recoverable(self) -> bool:
        """Whether the absolute scale reaches the model (not when it is normalised away or never sent)."""
        return self.units in ("scene", "metres")

    def to_dict(self) -> dict[str, Any]:
        return {"units": self.units, "per_scene_unit": self.per_scene_unit, "expects": self.expects,
                "recoverable": self.recoverable}



#: Keys the adapter's code declares, not its YAML (an override could claim what the code cannot run).
_DECLARED_IN_CODE = {
    "supported_contexts": "the context policies a model supports are declared by its adapter class "
                          "(Adapter.contexts / supported_contexts()); remove it from the model's config",
    "unsupported_reasons": "the reasons are declared by the adapter class (Adapter.unsupported_reasons); remove it "
                           "from the model's config",
}


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class ModelConfig(Section):
    """Settings every model has (``conf/model/<name>.yaml``, the ``model`` section); adapters subclass it for their
    own fields (decorated as it is, :data:`CONFIG`) and add rules across fields in :meth:`validate`. Which
    class reads a ``model`` section is the adapter's (:func:`model_config`: ``Adapter.config_class`` of the
    adapter ``model.adapter`` names).

    Attributes:
        name: registry name (``model=<name>``; a plain name: it is a folder of the run).
        adapter: ``"module:Class"`` of the adapter, imported lazily.
        seed: the model's frozen default seed (overridden by a top-level ``seed=``).
        height, width: native output resolution in pixels. fps: native frame rate.
        num_frames: native frame count of one rollout; ``frames_per_trajectory`` overrides it per trajectory.
        latent_stride: temporal VAE stride (pixel frames per latent after the first).
        chunk_latents: latents generated per autoregressive chunk.
        default_hfov_deg: field of view used when a case gives no intrinsics.
        gpus_per_job: GPUs one job needs (0 = CPU); gpu_layout: free-form description of their roles.
        paper_context: the policy of the paper's main table for this model (``context=paper`` selects it); it must
            be one the adapter's code supports (:meth:`Adapter.supported_contexts`, checked when it is built).
        translation_scale: the translation-scale policy (:class:`TranslationScale`: units the model expects, how
            scene units map to them).
        trailing_hold_frames: static poses appended after the trajectory (Evoke: 21, paper appendix C); the
            trajectory itself is sampled on ``num_frames - trailing_hold_frames`` and ``H`` grows by this much.
    """

    section: ClassVar[str] = "model"
    error: ClassVar[type[UserError]] = ModelConfigError
    noun: ClassVar[str] = "field"
    fix: ClassVar[str] = "choose a model: model=<name> (`python -m harness list`)"
    moved: ClassVar[dict[str, str]] = _DECLARED_IN_CODE
    required: ClassVar[str] = "set it in the model's config (conf/model/<name>.yaml)"

    name: PlainName
    adapter: StrictStr
    seed: Seed
    height: Positive
    width: Positive
    fps: Annotated[Number, Field(gt=0), Fix("must be > 0")]
    num_frames: Positive
    frames_per_trajectory: dict[str, StrictInt] = field(default_factory=dict)
    latent_stride: Positive = 4
    chunk_latents: Positive = 4
    default_hfov_deg: Number = 60.0
    gpus_per_job: Annotated[StrictInt, Field(ge=0)] = 0
    gpu_layout: StrictStr = ""
    paper_context: PolicyName = "fullkv"
    translation_scale: Annotated[TranslationScale, BeforeValidator(_default_if_none)] = field(
        default_factory=TranslationScale)
    trailing_hold_frames: Annotated[StrictInt, Field(ge=0)] = 0
    description: StrictStr = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Rules across fields (a subclass's own; :class:`ModelConfigError` naming ``model.<field>``), checked when
        the config is made; the types and bounds of each field are checked before."""

    def frames_for(self, trajectory: str) -> int:
        """Native frame count for ``trajectory`` (e.g. YUME: 551 for LRLRLR, 493 otherwise)."""
        return int(self.frames_per_trajectory.get(trajectory, self.num_frames))

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["translation_scale"] = self.translation_scale.to_dict()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}



def model_config(model: Mapping[str, Any] | ModelConfig) -> ModelConfig:
    """The typed ``model`` section: read by the config class of the adapter that ``model.adapter`` names
    (``Adapter.config_class``); a :class:`ModelConfig` is returned as it is."""
    if isinstance(model, ModelConfig):
        return model
    if not isinstance(model, Mapping):
        raise ModelConfigError(f"model={model!r}: {ModelConfig.fix}")
    return adapter_class(model.get("adapter"), model.get("name")).config_class.from_dict(model)


def policy_budget(policy: ContextPolicy) -> dict[str, Any]:
    """The harness policy's budget in latents (``docs/context.md``): what a launch must realise for its label."""
    if policy.name == "fullkv":
        return {"unit": "latent", "history": "all"}
    if policy.name == "sliding":
        return {"unit": "latent", "sink": policy.sink, "recent": policy.recent, "current": policy.chunk}
    if policy.name == "fov":
        return {"unit": "latent", "sink": policy.sink, "recent": policy.recent,
                "retrieved": f"{policy.retrieved_chunks} x {policy.chunk}", "current": policy.chunk}
    return {"memory": "the model's own"}


@dataclass(frozen=True)
class ItemRequest:
    """Everything an adapter needs for one work item.

    case: the validated case. path: the camera path at the model's native frame count and canvas (K in canvas
    pixels). context: the KV-context policy. seed: the item's seed. item_dir: the item's output folder;
    native files go to ``item_dir / "controls"``.
    """

    case: Case
    path: CameraPath
    context: ContextPolicy
    seed: int
    item_dir: Path

    @property
    def controls_dir(self) -> Path:
        return self.item_dir / "controls"


@dataclass
class NativeControls:
    """What ``compile`` produced.

    files: native file name -> path (inside ``controls/``). command: the exact upstream launch command, or None
    for in-process models. decoded_c2w: (T, 4, 4) poses the native controls decode back to (OpenCV c2w), used
    for the achieved-vs-requested residual; None when the format is lossless. meta: JSON-serialisable facts
    (translation-scale policy, anchors, caveats) that go into the item's ``meta.json``.
    """

    files: dict[str, str] = field(default_factory=dict)
    command: Optional[str] = None
    decoded_c2w: Optional[np.ndarray] = None
    meta: dict[str, Any] = field(default_factory=dict)


class ServedContextInfo(TypedDict, total=False):
    """What a served model adds to ``context_trace.json`` beside ``policy`` and ``chunks``
    (:class:`adapters.served.adapter.ServedAdapter`): the ``backend`` that served it (``engine``, ``route``,
    ``engine_version``, ``serves``), the session's unique ``attempt`` id, the chunk ``geometry`` the engine runs,
    what it was ``told`` (the session's first message, images replaced by their file names), the
    ``server_hello`` it answered, per-chunk ``latency`` (milliseconds: our wall clock and the server's own
    figures) and a ``note`` on how to read ``chunks``."""

    backend: dict[str, object]
    attempt: str
    geometry: dict[str, object]
    told: dict[str, object]
    server_hello: dict[str, object] | None
    latency: dict[str, object]
    note: str


@dataclass
class GeneratedVideo:
    """What ``generate`` produced, beside the video itself (handed to the sink frame by frame while generating:
    ``num_frames`` frames, each (H, W, 3) uint8 RGB at the model's canvas, ``model.height`` x ``model.width``).

    Attributes:
        num_frames: T, the frames handed to the sink (the runner checks the written video has as many).
        fps: frames per second of the video (the model's native rate).
        context_trace: one record per generated chunk (:class:`harness.context.trace.ChunkTrace`: latent indices
            of the chunk and of the context it attended to), ``chunks`` of ``context_trace.json``; empty for a
            model that reports none (an upstream run).
        timings: seconds by phase (``load_s``, ``generate_s``, ...), merged into ``meta.json`` ``timings``.
        meta: the model's own facts of the run, JSON-serialisable (device, dtype, latent count, an upstream run's
            conformance report, ...): ``meta.json`` ``generation``, secrets redacted. Its keys are the model's: the
            harness reads none of them.
        context_info: the top-level entries a served model adds to ``context_trace.json``
            (:class:`ServedContextInfo`); empty for every other model.
    """

    num_frames: int
    fps: float
    context_trace: list[ChunkTrace] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)
    context_info: ServedContextInfo = field(default_factory=ServedContextInfo)


#: where ``generate`` hands each frame, in order: (H, W, 3) uint8 RGB at the model's canvas
FrameSink = Callable[[np.ndarray], None]
#: what a case's canvas depends on: (id, case-set source, image reference, hfov_deg, intrinsics as text)
CaseKey = tuple[str, Optional[str], str, Optional[float], str]

#: decoded (height, width) of each conditioning image seen by this process, by :func:`adapters.memo.image_identity`
_image_shapes: dict[ImageIdentity, tuple[int, int]] = {}
_CANVASES_KEPT = 8  # canvases an adapter keeps (compile and generate of one item share one)
_CANVAS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Finding:
    """One readiness result: ``level`` error | warning, the config ``key`` to change, and what to do."""

    level: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class Adapter(ABC):
    """Base class of every model adapter.

    Subclasses set ``config_class``, declare the context policies their code runs (``contexts``, with
    ``unsupported_reasons`` for the others) and implement :meth:`compile` and :meth:`generate`. The constructor must
    stay cheap (no weights, no torch import): weights load inside :meth:`generate`.
    """

    config_class: ClassVar[type[ModelConfig]] = ModelConfig
    #: Context policies this adapter's code runs. The support matrix lives here, in code, so a config override
    #: cannot claim a policy the code cannot run. Default: the harness policies, which an in-process model applies
    #: itself through :class:`harness.context.ContextSelector` (the reference model, the tiny DiT).
    contexts: ClassVar[tuple[str, ...]] = ("fullkv", "sliding", "fov")
    #: Why each policy outside :attr:`contexts` is not supported (shown in the planning error).
    unsupported_reasons: ClassVar[Mapping[str, str]] = {
        "native": "no built-in memory mode; pick fullkv, sliding or fov"}
    #: Policies whose launch is, by design, the launch of another policy: ``{policy: (other policy, why)}``. A label
    #: is a claim about what ran, so two policies may compile to one launch (command.sh and controls/ bytes) only
    #: when declared (:meth:`same_launches`: here, or in an upstream model's contract, ``policies.same_launch``, with
    #: the upstream line that makes it so; ``tests/adapters/test_policy_launches.py`` fails on an undeclared or a
    #: stale one).
    same_launch: ClassVar[Mapping[str, tuple[str, str]]] = {}
    #: Optional modules this adapter imports in the harness's own process to generate (``torch`` for an in-process
    #: model; none for an upstream model, which runs in its own environment). The command line refuses a run whose
    #: modules are missing before anything is written, naming the extra that installs them (harness/app/extras.py).
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: ModelConfig):
        self.config = config
        self._canvas: dict[CaseKey, tuple[np.ndarray, np.ndarray]] = {}
        supported = self.supported_contexts()
        if config.paper_context not in supported:
            raise ModelConfigError(f"model.paper_context={config.paper_context!r}: {type(self).__name__} runs only "
                                   f"{', '.join(supported)} for model {config.name!r}")

    # -- context policies --------------------------------------------------------------------------------------
    def supported_contexts(self) -> tuple[str, ...]:
        """The policies (names from :data:`harness.context.POLICY_NAMES`) this adapter runs with its config.
        Adapters whose support depends on a config field override this (LingBot v1 vs a causal build)."""
        return tuple(self.contexts)

    def check_context(self, policy: ContextPolicy) -> None:
        """Raise :class:`UnsupportedContextError` when this model cannot run ``policy``."""
        supported = self.supported_contexts()
        if policy.name not in supported:
            why = self.unsupported_reasons.get(policy.name, "not implemented for this model")
            raise UnsupportedContextError(
                f"model={self.config.name} does not support context={policy.name}: {why}. "
                f"Supported: {', '.join(supported)}"
            )

    def context_told(self, policy: ContextPolicy) -> dict[str, Any]:
        """What the model is told for ``policy``, in the model's own units: recorded as ``controls.context`` in the
        item's ``meta.json`` (``policy`` the label, ``told`` the knobs, ``same_launch_as`` a declared identity).
        In-process models apply the harness's own selection (:class:`harness.context.ContextSelector`)."""
        told = {"applied_by": "harness.context.ContextSelector (in process)", **policy_budget(policy)}
        return self._context_record(policy, told)

    def same_launches(self) -> Mapping[str, tuple[str, str]]:
        """The declared identities ``{policy: (other policy, why)}`` this configuration runs (:attr:`same_launch`)."""
        return self.same_launch

    def _context_record(self, policy: ContextPolicy, told: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": policy.name, "told": told}
        same = self.same_launches()
        if policy.name in same:
            other, why = same[policy.name]
            out["same_launch_as"] = {"policy": other, "why": why}
        return out

    def scene_scale(self) -> float:
        """Model translation units per scene unit (``model.translation_scale.per_scene_unit``)."""
        return self.config.translation_scale.per_scene_unit

    # -- readiness ---------------------------------------------------------------------------------------------
    def readiness(self, probe: bool = True) -> list[Finding]:
        """Everything that would stop a real run (weights, checkout, environment), found at planning time.
        ``probe=False`` skips subprocess checks. Default: nothing to check (built-in models need no weights)."""
        return []

    def check_ready(self, probe: bool = True) -> list[Finding]:
        """Raise :class:`ModelConfigError` listing every readiness error; return (and print) the warnings."""
        findings = self.readiness(probe=probe)
        errors = [f for f in findings if f.level == "error"]
        warnings = [f for f in findings if f.level != "error"]
        for w in warnings:
            log.warning("%s: %s", self.config.name, w)
        if errors:
            raise ModelConfigError(f"{self.config.name} is not ready to run:\n" + "\n".join(f"  - {e}" for e in errors))
        return warnings

    # -- the canvas ---------------------------------------------------------------------------------------------
    def canvas_image_and_K(self, case: Case) -> tuple[np.ndarray, np.ndarray]:
        """Conditioning image resized to cover the native canvas and centre-cropped; K transformed alike: the
        canvas (height, width, 3) uint8 RGB at ``model.height`` x ``model.width``, K (3, 3) float64 in its pixels.

        Computed once per case (planning, compiling and generating all need it); the arrays are read-only.
        Only the last few canvases are kept (a study holds hundreds of cases); :meth:`canvas_K` is the cheap way
        to the intrinsics alone.
        """
        from harness.imaging import resize_cover_crop

        key = self._case_key(case)
        hit = self._canvas.get(key)
        if hit is None:
            img = case.load_image()
            _image_shapes[self._image_identity(case)] = img.shape[:2]
            canvas = resize_cover_crop(img, (self.config.height, self.config.width))
            canvas.setflags(write=False)
            hit = (canvas, self.canvas_K(case))
            with _CANVAS_LOCK:  # items may compile in threads (concurrent upstream jobs)
                self._canvas[key] = hit
                while len(self._canvas) > _CANVASES_KEPT:
                    del self._canvas[next(iter(self._canvas))]
        return hit

    def _case_key(self, case: Case) -> CaseKey:
        return (case.id, case.source, case.image, case.hfov_deg, str(case.intrinsics))

    @staticmethod
    def _image_identity(case: Case) -> ImageIdentity:
        from adapters.memo import image_identity

        return image_identity(case._resolve(case.image))

    def canvas_K(self, case: Case) -> np.ndarray:
        """K of the case on this model's canvas (as :meth:`canvas_image_and_K` returns it), read-only. Needs only
        the image's size, decoded once per process and image."""
        from trajectories.conventions import intrinsics_for_resize_crop

        ident = self._image_identity(case)
        shape = _image_shapes.get(ident)
        if shape is None:
            shape = _image_shapes[ident] = case.load_image().shape[:2]
        dst = (self.config.height, self.config.width)
        K_src = case.intrinsics_matrix(shape[0], shape[1], self.config.default_hfov_deg)
        K = intrinsics_for_resize_crop(K_src, shape, dst)
        K.setflags(write=False)
        return K

    def path_for(self, spec: TrajectorySpec, K: np.ndarray, trajectory: str | None = None) -> CameraPath:
        """The item's camera path at this model's native frame count, fps and canvas (K in canvas pixels).

        Built once per (spec, frame count, hold, fps, canvas, K) in a process and shared (read-only arrays):
        it does not depend on the case beyond its intrinsics (:func:`adapters.memo.cached_path`)."""
        from adapters.memo import cached_path

        c = self.config
        name = trajectory or spec.name
        clock = self.control_clock(c.frames_for(name))
        key = ("path", spec.to_dict(), name, c.frames_for(name), int(c.trailing_hold_frames), float(c.fps),
               c.height, c.width, np.asarray(K, dtype=np.float64), clock)
        return cached_path(key, lambda: self._on_clock(self._build_path(spec, K, name), clock))

    def control_clock(self, num_frames: int) -> Optional["ControlClock"]:
        """Where upstream lets this model's held controls change (:class:`adapters.controls.clock.ControlClock`);
        ``None`` (the default) when they can change at any frame. A model whose upstream holds its controls for
        whole blocks returns its block edges, and its paths are laid on them."""
        return None

    @staticmethod
    def _on_clock(path: CameraPath, clock: Optional["ControlClock"]) -> CameraPath:
        return path if clock is None else clock.lay(path)

    def _build_path(self, spec: TrajectorySpec, K: np.ndarray, name: str) -> CameraPath:
        from trajectories import TrajectoryError, build_path
        from trajectories.path import CameraPath, Segment

        c = self.config
        total = c.frames_for(name)
        hold = int(c.trailing_hold_frames)
        if spec.frame_layout:
            # A fixed-speed preset's final hold already takes the frames its sweeps leave: the model's trailing
            # static poses (Evoke's 21) must fall inside it, counting the last sweep's end frame.
            path = build_path(spec, total, c.fps, K, c.height, c.width)
            still = total - spec.min_frames() + 1
            if still < hold:
                raise TrajectoryError(f"trajectory {name!r} at {total} frames ends with {still} static poses; "
                                      f"model.trailing_hold_frames needs {hold}: raise "
                                      f"model.frames_per_trajectory.{name}")
            return path
        path = build_path(spec, total - hold, c.fps, K, c.height, c.width)
        if hold == 0:
            return path
        c2w = np.concatenate([path.c2w, np.repeat(path.c2w[-1:], hold, axis=0)])
        phases = dict(path.phases)
        a, b = phases["H"]
        phases["H"] = (a, b + hold)
        segs = list(path.segments) + [Segment("H", "trailing_hold", "hold", b, b + hold)]
        params = {**path.params, "trailing_hold_frames": hold, "num_frames": total}
        return CameraPath(path.name, c2w, path.K, path.fps, path.height, path.width, phases, tuple(segs), params)

    # -- the contract -------------------------------------------------------------------------------------------
    @abstractmethod
    def compile(self, req: ItemRequest) -> NativeControls:
        """Write the model's native input files into ``req.controls_dir``. Pure and CPU-only."""

    @abstractmethod
    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        """Produce the video, handing each (H, W, 3) uint8 RGB frame to ``sink`` in order."""


def adapter_class(ref: Any, model: Any = "?") -> type[Adapter]:
    """The adapter class ``model.adapter`` names (``"module:Class"``, imported now)."""
    from harness.config_groups import load_object

    if not ref:
        raise ModelConfigError(f"model.adapter: missing for model {model!r}; set 'module:Class'")
    cls = load_object(str(ref))
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise ModelConfigError(f"model.adapter={ref!r} is not an adapters.base.Adapter subclass")
    return cls


def build_adapter(model_cfg: Mapping[str, Any] | ModelConfig) -> Adapter:
    """The adapter of a ``model`` section (typed, or a mapping read by :func:`model_config`); no weights loaded."""
    config = model_config(model_cfg)
    return adapter_class(config.adapter, config.name)(config)
