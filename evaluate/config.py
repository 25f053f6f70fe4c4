"""The evaluation settings (``conf/evaluate/<name>.yaml``, the ``evaluate`` block of a run): :class:`EvalConfig`,
validated once at the boundary (:meth:`EvalConfig.from_dict`), before anything is evaluated. A bad value is a
:class:`harness.errors.ConfigError` naming the setting and the fix.

The types and ranges are declared on the fields and checked by pydantic (a pydantic dataclass: the project's one
config-validation mechanism, as :class:`harness.app.run_config.RunConfig` and :mod:`harness.cases`);
:meth:`EvalConfig.from_dict` turns pydantic's first error into the project's message for that setting.
:meth:`EvalConfig.check` then checks what needs the registries (backbone names and roles, the device).
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Annotated, Any, Iterable

from annotated_types import Ge, Gt, Le
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    SkipValidation,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from typing_extensions import TypedDict

from harness.errors import ConfigError, UserError

from . import memory as mem
from .backbones import BACKBONES, check_names, spec
from .perception._loading import resolve_device

#: a finite number (an integer stays an integer: the settings are recorded as given in each ``metrics.json``)
_Number = StrictInt | Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: backbone names, e.g. ``[dinov2, pixel]`` (a list in YAML, a tuple here)
_Names = tuple[StrictStr, ...]


#: backbone role -> the setting that names its backbones (``evaluate.<setting>``)
ROLE_SETTINGS = {"encoder": "encoders", "face": "face", "tracker": "trackers", "depth": "depth",
                 "pose": "pose_estimators", "imaging": "imaging", "aesthetic": "aesthetic"}


class _Bootstrap(TypedDict, total=False):
    """``evaluate.bootstrap``: ``n`` resamples (the paper uses 2000) and the ``seed`` of the resampling."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]  # pydantic's TypedDict config hook
    n: Annotated[int, Field(strict=True, ge=1)]
    seed: Annotated[int, Field(strict=True, ge=0)]


_BOOTSTRAP = TypeAdapter(_Bootstrap)


def _bootstrap(value: Any) -> Any:
    """``value`` as given (its keys in their order) once it is a valid :class:`_Bootstrap`."""
    _BOOTSTRAP.validate_python(value)
    return value


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class EvalConfig:
    """Evaluation settings (``conf/evaluate/<name>.yaml``); every value is recorded in each ``metrics.json``."""

    enabled: StrictBool = True
    encoders: _Names = ("dinov2", "pixel")
    face: _Names = ("arcface",)
    trackers: _Names = ("sam2", "template")
    depth: _Names = ("da3",)
    pose_estimators: _Names = ("da3", "vipe", "classical")
    rpe_trans_estimators: _Names = ("da3", "vipe")
    rpe_rot_estimator: StrictStr = "da3"
    rpe_stride: Annotated[int, Field(strict=True, ge=1)] = 1
    return_frame_poses: _Names = ("da3", "classical")
    imaging: _Names = ("musiq-spaq",)
    aesthetic: _Names = ("laion",)
    judge: dict[str, Any] = field(default_factory=dict)  # the checklist judge server: JudgeSettings (docs/judge.md)
    memory_stride: Annotated[int, Field(strict=True, ge=1)] = 4
    quality_stride: Annotated[int, Field(strict=True, ge=1)] = 4
    judge_stride: Annotated[int, Field(strict=True, ge=1)] = 8
    canvas: Annotated[int, Field(strict=True, ge=8)] = mem.CANVAS
    sphere_bin_deg: Annotated[_Number, Gt(0), Le(90)] = mem.SPHERE_BIN_DEG
    depth_stride: Annotated[int, Field(strict=True, ge=1)] = 1
    tracker_threshold: Annotated[_Number, Ge(0), Le(1)] = 0.6
    revisit_tolerance_deg: Annotated[_Number, Ge(0), Le(180)] = 5.0
    revisit_tolerance_translation: Annotated[_Number, Ge(0)] = 0.05
    departure_deg: Annotated[_Number, Gt(0), Le(180)] = 30.0
    return_tolerances_deg: Annotated[tuple[Annotated[_Number, Gt(0), Le(180)], ...], Field(min_length=1)] = (
        30.0, 15.0, 5.0)
    bootstrap: Annotated[dict[str, int], BeforeValidator(_bootstrap)] = field(
        default_factory=lambda: {"n": 2000, "seed": 0})
    validity: StrictBool = True
    device: StrictStr = "auto"
    #: per learned backbone, keyword options of its ``load`` (its recipe knobs), e.g. ``{da3: {process_res: 504}}``;
    #: recorded in the backbone's settings and part of every family hash that uses it (checked by :meth:`check`)
    backbone_options: Annotated[dict[str, dict[str, Any]], SkipValidation] = field(default_factory=dict)
    ors: Annotated[dict[str, Any], SkipValidation] = field(default_factory=dict)  # MemoBench ORS (evaluate/ors.py)

    @field_validator("judge", mode="before")
    @classmethod
    def _judge(cls, value: Any) -> dict[str, Any]:
        """The judge server's settings, checked and with their defaults (:class:`evaluate.judge.JudgeSettings`)."""
        from .judge import JudgeSettings

        return JudgeSettings.from_dict(value or {}).to_dict()

    @field_validator("ors")
    @classmethod
    def _ors(cls, value: Any) -> Any:
        """Only the ORS detector's known settings (:data:`evaluate.ors.ORS_DEFAULTS`); kept as given."""
        from trajectories.fields import check_fields

        from .ors import ORS_DEFAULTS

        check_fields("evaluate.ors", value or {}, ORS_DEFAULTS, ConfigError)
        return value

    @staticmethod
    def from_dict(d: dict[str, Any]) -> EvalConfig:
        """The settings of ``d`` (a resolved ``evaluate`` block; ``description`` ignored) over the defaults, the
        judge's settings filled in; :class:`ConfigError` naming the first bad setting and its fix."""
        d = {k: v for k, v in (d or {}).items() if k != "description"}
        d["judge"] = d.get("judge")  # validated (and defaults filled) even when not given
        try:
            cfg = _ADAPTER.validate_python(d)
        except ValidationError as exc:
            raise _config_error(exc.errors(), d) from None
        cfg.check()
        return cfg

    def check(self) -> None:
        """Names are registered backbones of the right role; oracles only where ground truth may be used."""
        for role, setting in ROLE_SETTINGS.items():
            names = getattr(self, setting)
            check_names(setting, names, role)
            for n in names:
                if spec(n).kind == "oracle":
                    raise ConfigError(f"evaluate.{setting}: {n!r} is ground truth, not an estimator: it never scores "
                                     "a video (it judges the estimators in eval/validity.md automatically)")
        check_names("return_frame_poses", self.return_frame_poses, "pose")
        check_names("rpe_trans_estimators", self.rpe_trans_estimators, "pose")
        check_names("rpe_rot_estimator", (self.rpe_rot_estimator,), "pose")
        for s in ("rpe_trans_estimators", "rpe_rot_estimator"):
            v = getattr(self, s)
            for n in (v if isinstance(v, tuple) else (v,)):
                if spec(n).kind == "oracle":
                    raise ConfigError(f"evaluate.{s}: {n!r} is ground truth, not an estimator")
        if int(self.rpe_stride) < 1:
            raise ConfigError(f"evaluate.rpe_stride={self.rpe_stride}: must be >= 1 (1 = adjacent frames, the paper)")
        if int(self.depth_stride) < 1:
            raise ConfigError(f"evaluate.depth_stride={self.depth_stride}: must be >= 1 (1 = every pixel)")
        if self.device != "auto":
            resolve_device(self.device)  # raises for anything but cpu / cuda / cuda:N
        for n, opts in (self.backbone_options or {}).items():
            if n not in BACKBONES or not (BACKBONES[n].learned or BACKBONES[n].packaged):
                raise ConfigError(f"evaluate.backbone_options.{n}: not a learned backbone; one of "
                                 f"{sorted(k for k, v in BACKBONES.items() if v.learned or v.packaged)}")
            if not isinstance(opts, dict):
                raise ConfigError(f"evaluate.backbone_options.{n}: a mapping of {n}'s load options, e.g. "
                                 "{da3: {process_res: 504}}")

    def family_settings(self, names: Iterable[str]) -> dict[str, Any]:
        """The settings ``names`` (a family's ``settings``) and their values: what a family's results depend on."""
        s = asdict(self)
        return {k: s[k] for k in names}


_ADAPTER = TypeAdapter(EvalConfig)
#: the declared fields (their types and bounds), as pydantic collected them
_FIELDS: dict[str, FieldInfo] = EvalConfig.__pydantic_fields__  # type: ignore[attr-defined]  # set by pydantic.dataclasses

#: the order in which the settings' problems are reported (the first one is the error)
_ORDER = ("rpe_stride", "memory_stride", "quality_stride", "judge_stride", "canvas", "depth_stride", "sphere_bin_deg",
          "tracker_threshold", "revisit_tolerance_deg", "revisit_tolerance_translation", "departure_deg", "enabled",
          "validity", "return_tolerances_deg", "bootstrap", "encoders", "face", "trackers", "depth",
          "pose_estimators", "rpe_trans_estimators", "return_frame_poses", "imaging", "aesthetic",
          "rpe_rot_estimator", "device", "ors", "judge")
#: the settings that are lists of backbone names
_NAMES = _ORDER[15:24]


def _rank(err: ErrorDetails) -> tuple[int, int]:
    """Where ``err`` comes in :data:`_ORDER` (an unknown setting first); within ``bootstrap``: the mapping, n, seed."""
    loc = err["loc"]
    if err["type"] == "unexpected_keyword_argument" or not loc or loc[0] not in _ORDER:
        return (-1, 0)
    sub = loc[1] if len(loc) > 1 and err["type"] != "extra_forbidden" else None
    return (_ORDER.index(str(loc[0])), {None: 0, "n": 1, "seed": 2}.get(sub, 0) if isinstance(sub, str) else 0)


def _range(key: str) -> str:
    """``">= 1"``, ``"> 0 and <= 90"``: the bounds declared on the numeric setting ``key``."""
    lo, hi = "", ""
    for m in _FIELDS[key].metadata:
        if isinstance(m, Ge):
            lo = f">= {m.ge:g}"
        elif isinstance(m, Gt):
            lo = f"> {m.gt:g}"
        elif isinstance(m, Le):
            hi = f" and <= {m.le:g}"
    return lo + hi


def _config_error(errors: list[ErrorDetails], given: dict[str, Any]) -> UserError:
    """The project's message for the first of pydantic's ``errors`` (:data:`_ORDER`) about the settings ``given``:
    it names the setting (``evaluate.<key>``), the value and the fix."""
    unknown = [e["loc"][0] for e in errors if e["type"] == "unexpected_keyword_argument" and e["loc"]]
    if unknown:
        from trajectories.fields import unknown_field_message

        msg = unknown_field_message("evaluate", [str(k) for k in unknown], EvalConfig.__dataclass_fields__)
        return ConfigError(msg.replace("unknown field", "unknown setting"))
    err = min(errors, key=_rank)
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, UserError):  # a rule of the project's own (judge, ors): its message names the key and the fix
        return cause
    key = str(err["loc"][0]) if err["loc"] else ""
    v = given.get(key)
    if key in _ORDER[:11]:
        what = "an integer" if _FIELDS[key].annotation is int else "a number"
        return ConfigError(f"evaluate.{key}={v!r}: must be {what} {_range(key)} (see conf/evaluate/default.yaml)")
    if key in ("enabled", "validity"):
        return ConfigError(f"evaluate.{key}={v!r}: use true or false")
    if key == "return_tolerances_deg":
        return ConfigError(f"evaluate.return_tolerances_deg={v!r}: a list of degrees in (0, 180], e.g. [30, 15, 5]")
    if key == "bootstrap":
        return _bootstrap_error(err, v)
    if key in ("rpe_rot_estimator", "device"):
        return ConfigError(f"evaluate.{key}={v!r}: give a name")
    if key in _NAMES:
        return ConfigError(f"evaluate.{key}={v!r}: a list of backbone names, e.g. evaluate.{key}=[pixel]")
    where = ".".join(str(p) for p in err["loc"])
    return ConfigError(f"evaluate.{where}={err.get('input')!r}: {err['msg']}")


def _bootstrap_error(err: ErrorDetails, b: Any) -> ConfigError:
    """``evaluate.bootstrap``'s message: the mapping itself, or its ``n`` or ``seed``."""
    sub = err["loc"][1] if len(err["loc"]) > 1 and err["type"] != "extra_forbidden" else None
    if sub == "n":
        return ConfigError(f"evaluate.bootstrap.n={b['n']!r}: must be an integer >= 1 (the paper uses 2000)")
    if sub == "seed":
        return ConfigError(f"evaluate.bootstrap.seed={b['seed']!r}: must be an integer >= 0")
    return ConfigError(f"evaluate.bootstrap={b!r}: a mapping {{n: <resamples >= 1>, seed: <integer >= 0>}}")


