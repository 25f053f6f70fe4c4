"""The evaluation settings (``conf/evaluate/<name>.yaml``, the ``evaluate`` block of a run): :class:`EvalConfig`,
validated once at the boundary (:meth:`EvalConfig.from_dict`), before anything is evaluated. A bad value is a
:class:`harness.errors.ConfigError` naming the setting and the fix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import ConfigError

from . import memory as mem
from .backbones import BACKBONES, check_names, spec
from .families.base import ROLE_SETTINGS, Family, all_families
from .perception._loading import resolve_device


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation settings (``conf/evaluate/<name>.yaml``); every value is recorded in each ``metrics.json``."""

    enabled: bool = True
    encoders: tuple[str, ...] = ("dinov2", "pixel")
    face: tuple[str, ...] = ("arcface",)
    trackers: tuple[str, ...] = ("sam2", "template")
    depth: tuple[str, ...] = ("da3",)
    pose_estimators: tuple[str, ...] = ("da3", "vipe", "classical")
    rpe_trans_estimators: tuple[str, ...] = ("da3", "vipe")
    rpe_rot_estimator: str = "da3"
    rpe_stride: int = 1
    return_frame_poses: tuple[str, ...] = ("da3", "classical")
    imaging: tuple[str, ...] = ("musiq-spaq",)
    aesthetic: tuple[str, ...] = ("laion",)
    judge: dict[str, Any] = field(default_factory=dict)  # the checklist judge server: JudgeSettings (docs/judge.md)
    memory_stride: int = 4
    quality_stride: int = 4
    judge_stride: int = 8
    canvas: int = mem.CANVAS
    sphere_bin_deg: float = mem.SPHERE_BIN_DEG
    depth_stride: int = 1
    tracker_threshold: float = 0.6
    revisit_tolerance_deg: float = 5.0
    revisit_tolerance_translation: float = 0.05
    departure_deg: float = 30.0
    return_tolerances_deg: tuple[float, ...] = (30.0, 15.0, 5.0)
    bootstrap: dict[str, int] = field(default_factory=lambda: {"n": 2000, "seed": 0})
    validity: bool = True
    device: str = "auto"
    #: per learned backbone, keyword options of its ``load`` (its recipe knobs), e.g. ``{da3: {process_res: 504}}``;
    #: recorded in the backbone's settings and part of every family hash that uses it
    backbone_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    ors: dict[str, Any] = field(default_factory=dict)  # MemoBench ORS detector (evaluate/ors.py)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> EvalConfig:
        d = {k: v for k, v in (d or {}).items() if k != "description"}
        allowed = set(EvalConfig.__dataclass_fields__)
        bad = set(d) - allowed
        if bad:
            from trajectories.fields import unknown_field_message

            msg = unknown_field_message("evaluate", bad, allowed)
            raise ConfigError(msg.replace("unknown field", "unknown setting"))
        _check_types(d)
        for k, v in list(d.items()):
            if isinstance(v, list):
                d[k] = tuple(v)
        if "ors" in d:
            from trajectories.fields import check_fields

            from .ors import ORS_DEFAULTS

            check_fields("evaluate.ors", d["ors"] or {}, ORS_DEFAULTS, ConfigError)
        # validated (and defaults filled) here, so a bad judge setting is a config error before anything runs
        from .judge import JudgeSettings

        d["judge"] = JudgeSettings.from_dict(d.get("judge") or {}).to_dict()
        cfg = EvalConfig(**d)
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

    def family_settings(self, family: str) -> dict[str, Any]:
        s = asdict(self)
        return {k: s[k] for k in _family(family).settings}


#: the numeric settings and their ranges: (kind, lower bound, inclusive, upper bound or None)
_RANGES: dict[str, tuple[type, float, bool, float | None]] = {
    "rpe_stride": (int, 1, True, None), "memory_stride": (int, 1, True, None), "quality_stride": (int, 1, True, None),
    "judge_stride": (int, 1, True, None), "canvas": (int, 8, True, None), "depth_stride": (int, 1, True, None),
    "sphere_bin_deg": (float, 0, False, 90), "tracker_threshold": (float, 0, True, 1),
    "revisit_tolerance_deg": (float, 0, True, 180), "revisit_tolerance_translation": (float, 0, True, None),
    "departure_deg": (float, 0, False, 180),
}


def _check_types(d: dict[str, Any]) -> None:
    """Every numeric setting a number of the right kind in its range, ``bootstrap`` ``{n >= 1, seed >= 0}``,
    ``return_tolerances_deg`` positive degrees, ``enabled`` / ``validity`` booleans: a bad value fails here, before
    anything is evaluated, naming the setting (never as a per-item Python error, or after every item)."""
    def num(v: Any, kind: type) -> bool:
        if isinstance(v, bool):
            return False
        return isinstance(v, int) if kind is int else isinstance(v, (int, float)) and v == v and abs(v) != float("inf")  # noqa: PLR0124 - NaN

    for k, (kind, lo, incl, hi) in _RANGES.items():
        if k not in d:
            continue
        v = d[k]
        rng = f"{'>=' if incl else '>'} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
        if not num(v, kind) or (v < lo if incl else v <= lo) or (hi is not None and v > hi):
            what = "an integer" if kind is int else "a number"
            raise ConfigError(f"evaluate.{k}={v!r}: must be {what} {rng} (see conf/evaluate/default.yaml)")
    for k in ("enabled", "validity"):
        if k in d and not isinstance(d[k], bool):
            raise ConfigError(f"evaluate.{k}={d[k]!r}: use true or false")
    if "return_tolerances_deg" in d:
        v = d["return_tolerances_deg"]
        if not isinstance(v, (list, tuple)) or not v or not all(num(x, float) and 0 < x <= 180 for x in v):
            raise ConfigError(f"evaluate.return_tolerances_deg={v!r}: a list of degrees in (0, 180], e.g. [30, 15, 5]")
    if "bootstrap" in d:
        b = d["bootstrap"]
        if not isinstance(b, dict) or set(b) - {"n", "seed"}:
            raise ConfigError(f"evaluate.bootstrap={b!r}: a mapping {{n: <resamples >= 1>, seed: <integer >= 0>}}")
        if "n" in b and (not num(b["n"], int) or b["n"] < 1):
            raise ConfigError(f"evaluate.bootstrap.n={b['n']!r}: must be an integer >= 1 (the paper uses 2000)")
        if "seed" in b and (not num(b["seed"], int) or b["seed"] < 0):
            raise ConfigError(f"evaluate.bootstrap.seed={b['seed']!r}: must be an integer >= 0")
    for k in ("encoders", "face", "trackers", "depth", "pose_estimators", "rpe_trans_estimators",
              "return_frame_poses", "imaging", "aesthetic"):
        if k in d and not (isinstance(d[k], (list, tuple)) and all(isinstance(x, str) for x in d[k])):
            raise ConfigError(f"evaluate.{k}={d[k]!r}: a list of backbone names, e.g. evaluate.{k}=[pixel]")
    for k in ("rpe_rot_estimator", "device"):
        if k in d and not isinstance(d[k], str):
            raise ConfigError(f"evaluate.{k}={d[k]!r}: give a name")


def _family(name: str) -> Family:
    return {f.name: f for f in all_families()}[name]
