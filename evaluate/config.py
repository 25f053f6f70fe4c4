"""The evaluation settings (``conf/evaluate/<name>.yaml``, the ``evaluate`` section of a run): :class:`EvalConfig`,
a section of the run configuration (:mod:`harness.sections`), validated once with the rest of it, before anything
is evaluated. A bad value is a :class:`harness.errors.ConfigError` naming the setting and the fix.

The types and ranges are declared on the fields (a pydantic dataclass) with the fix each message gives;
:meth:`EvalConfig.check` then checks what needs the registries (backbone names and roles, the device).
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Annotated, Any, ClassVar, Iterable

from annotated_types import Ge, Gt, Le
from pydantic import BeforeValidator, ConfigDict, Field, SkipValidation, StrictBool, StrictStr, field_validator
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError
from harness.sections import Fix, Invalid, Number, Section, unknown_key_message

from . import memory as mem
from .backbones import BACKBONES, check_names, spec
from .judge.settings import JudgeSettings
from .perception._loading import resolve_device

#: backbone names, e.g. ``[dinov2, pixel]`` (a list in YAML, a tuple here)
_Names = Annotated[tuple[StrictStr, ...], Fix("a list of backbone names, e.g. {path}=[pixel]")]
#: an integer setting, >= ``ge``
_AN_INTEGER = Fix("must be an integer {bounds} (see conf/evaluate/default.yaml)")
#: a number setting, within its bounds
_A_NUMBER = Fix("must be a number {bounds} (see conf/evaluate/default.yaml)")
_Stride = Annotated[int, Field(strict=True, ge=1), _AN_INTEGER]
_FLAG = Fix("use true or false")
_NAME = Fix("give a name")


#: backbone role -> the setting that names its backbones (``evaluate.<setting>``)
ROLE_SETTINGS = {"encoder": "encoders", "face": "face", "tracker": "trackers", "depth": "depth",
                 "pose": "pose_estimators", "imaging": "imaging", "aesthetic": "aesthetic"}


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Bootstrap(Section):
    """``evaluate.bootstrap``: ``n`` resamples (the paper uses 2000) and the ``seed`` of the resampling. Read only to
    check the mapping, which :class:`EvalConfig` keeps as given (its keys, in their order)."""

    section: ClassVar[str] = "evaluate.bootstrap"
    error: ClassVar[type[ConfigError]] = ConfigError

    n: Annotated[int, Field(strict=True, ge=1), Fix("must be an integer >= 1 (the paper uses 2000)")] = 2000
    seed: Annotated[int, Field(strict=True, ge=0), Fix("must be an integer >= 0")] = 0


_BOOTSTRAP_FIX = "a mapping {n: <resamples >= 1>, seed: <integer >= 0>}"


def _bootstrap(value: Any) -> Any:
    """``value`` as given once :class:`Bootstrap` reads it (a mapping of ``n`` and ``seed`` only)."""
    if not isinstance(value, dict) or set(value) - {"n", "seed"}:
        raise Invalid(_BOOTSTRAP_FIX)
    Bootstrap.from_dict(value)
    return value


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class EvalConfig(Section):
    """Evaluation settings (``conf/evaluate/<name>.yaml``); every value is recorded in each ``metrics.json``."""

    section: ClassVar[str] = "evaluate"
    fix: ClassVar[str] = "choose the settings: evaluate=default|off"
    ignored: ClassVar[tuple[str, ...]] = ("description",)
    #: the order in which the settings' problems are reported (the first one is the error)
    order: ClassVar[tuple[str, ...]] = (
        "rpe_stride", "memory_stride", "quality_stride", "judge_stride", "canvas", "depth_stride", "sphere_bin_deg",
        "tracker_threshold", "revisit_tolerance_deg", "revisit_tolerance_translation", "departure_deg", "enabled",
        "validity", "return_tolerances_deg", "bootstrap", "encoders", "face", "trackers", "depth",
        "pose_estimators", "rpe_trans_estimators", "return_frame_poses", "imaging", "aesthetic",
        "rpe_rot_estimator", "device", "ors", "judge")

    enabled: Annotated[StrictBool, _FLAG] = True
    encoders: _Names = ("dinov2", "pixel")
    face: _Names = ("arcface",)
    trackers: _Names = ("sam2", "template")
    depth: _Names = ("da3",)
    pose_estimators: _Names = ("da3", "vipe", "classical")
    rpe_trans_estimators: _Names = ("da3", "vipe")
    rpe_rot_estimator: Annotated[StrictStr, _NAME] = "da3"
    rpe_stride: _Stride = 1
    return_frame_poses: _Names = ("da3", "classical")
    imaging: _Names = ("musiq-spaq",)
    aesthetic: _Names = ("laion",)
    #: the checklist judge server (docs/judge.md)
    judge: Annotated[JudgeSettings, BeforeValidator(JudgeSettings.from_dict)] = field(default_factory=JudgeSettings)
    memory_stride: _Stride = 4
    quality_stride: _Stride = 4
    judge_stride: _Stride = 8
    canvas: Annotated[int, Field(strict=True, ge=8), _AN_INTEGER] = mem.CANVAS
    sphere_bin_deg: Annotated[Number, Gt(0), Le(90), _A_NUMBER] = mem.SPHERE_BIN_DEG
    depth_stride: _Stride = 1
    tracker_threshold: Annotated[Number, Ge(0), Le(1), _A_NUMBER] = 0.6
    revisit_tolerance_deg: Annotated[Number, Ge(0), Le(180), _A_NUMBER] = 5.0
    revisit_tolerance_translation: Annotated[Number, Ge(0), _A_NUMBER] = 0.05
    departure_deg: Annotated[Number, Gt(0), Le(180), _A_NUMBER] = 30.0
    return_tolerances_deg: Annotated[tuple[Annotated[Number, Gt(0), Le(180)], ...], Field(min_length=1),
                                     Fix("a list of degrees in (0, 180], e.g. [30, 15, 5]")] = (30.0, 15.0, 5.0)
    bootstrap: Annotated[dict[str, int], BeforeValidator(_bootstrap), Fix(_BOOTSTRAP_FIX)] = field(
        default_factory=lambda: {"n": 2000, "seed": 0})
    validity: Annotated[StrictBool, _FLAG] = True
    device: Annotated[StrictStr, _NAME] = "auto"
    #: per learned backbone, keyword options of its ``load`` (its recipe knobs), e.g. ``{da3: {process_res: 504}}``;
    #: recorded in the backbone's settings and part of every family hash that uses it (checked by :meth:`check`)
    backbone_options: Annotated[dict[str, dict[str, Any]], SkipValidation] = field(default_factory=dict)
    ors: Annotated[dict[str, Any], SkipValidation] = field(default_factory=dict)  # MemoBench ORS (evaluate/ors.py)

    @field_validator("ors")
    @classmethod
    def _ors(cls, value: Any) -> Any:
        """Only the ORS detector's known settings (:data:`evaluate.ors.ORS_DEFAULTS`); kept as given."""
        from .ors import ORS_DEFAULTS

        unknown = set(value or {}) - set(ORS_DEFAULTS)
        if unknown:
            raise ConfigError(unknown_key_message("evaluate.ors", unknown, ORS_DEFAULTS))
        return value

    def __post_init__(self) -> None:
        self.check()

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
        if self.device != "auto":
            resolve_device(self.device)  # raises for anything but cpu / cuda / cuda:N
        for n, opts in (self.backbone_options or {}).items():
            if n not in BACKBONES or BACKBONES[n].kind == "oracle":
                raise ConfigError(f"evaluate.backbone_options.{n}: not a backbone with options; one of "
                                 f"{sorted(k for k, v in BACKBONES.items() if v.kind != 'oracle')}")
            if not isinstance(opts, dict):
                raise ConfigError(f"evaluate.backbone_options.{n}: a mapping of {n}'s load options, e.g. "
                                 "{da3: {process_res: 504}}")

    def family_settings(self, names: Iterable[str]) -> dict[str, Any]:
        """The settings ``names`` (a family's ``settings``) and their values: what a family's results depend on."""
        s = asdict(self)
        return {k: s[k] for k in names}


