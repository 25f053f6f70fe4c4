"""The run configuration, typed all the way down: what ``python -m harness`` composed (Hydra), validated once at the
boundary by one mechanism (:mod:`harness.sections`).

The command line composes the Hydra config, resolves it to a plain mapping and builds one :class:`RunConfig` from
it (:meth:`RunConfig.from_mapping`). Each of its sections is a pydantic model owned by its layer, with its keys,
literal types and bounds declared and unknown keys refused:

==============  ==========================================================================================
``model``       the adapter's own config class, chosen through the adapter ``model.adapter`` names
                (:func:`adapters.base.model_config`; ``local.models.<name>`` merged in first)
``context``     :data:`harness.context.ContextKind`, a tagged union of the policies (``paper`` becomes the
                model's main-table policy here)
``trajectory``  :class:`trajectories.TrajectorySpec`
``cases``       :class:`harness.cases.CaseSelection`
``evaluate``    :class:`evaluate.config.EvalConfig` (``evaluate.judge``: :class:`evaluate.judge.JudgeSettings`)
``backend``     :data:`adapters.served.config.Backend` (``upstream``, or a serving engine), with ``endpoint``
``release``     :class:`evaluate.release.plan.ReleaseSettings`
``slurm``       :class:`harness.app.slurm_settings.SlurmSettings`
``setup``       :class:`SetupSettings`; ``paths``: :class:`PathsSettings`; ``local``: :class:`LocalSettings`
report options  :class:`evaluate.reporting.cli.ReportOptions` (top-level keys: :class:`RunConfig` derives from it)
==============  ==========================================================================================

Everything after the boundary takes the typed object, down to the adapter. The resolved mapping is kept only to
be written (:attr:`RunConfig.raw`: ``<run>/.hydra/<time>/.hydra/config.yaml`` and the ``config`` of each item's
``meta.json``, byte for byte as composed).

This is the pattern of Hydra's structured configs (a typed schema checked when the config is built; see
facebookresearch/hydra ``website/docs/tutorials/structured_config``) with pydantic.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Mapping, Optional, Union, get_args

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, StrictBool, StrictInt, StrictStr,
                      model_validator)

from adapters.base import ModelConfig, model_config
from adapters.served.config import Backend, BackendConfig, check_endpoint
from evaluate.config import EvalConfig
from evaluate.release.plan import ReleaseSettings
from evaluate.reporting.cli import ReportOptions
from harness.app.slurm_settings import SlurmSettings
from harness.cases import CaseSelection
from harness.context import ContextKind, ContextPolicy
from harness.context.policies import Paper
from harness.errors import UserError
from harness.logs import check_verbosity
from harness.outputs import PlanError, Seed
from harness.sections import Fix, Section
from trajectories import TrajectorySpec

Stage = Literal["generate", "evaluate", "all"]
STAGES: tuple[str, ...] = get_args(Stage)

_FLAG = Fix("use true or false")
_PATH = Fix("give a path (or null)")
_Text = Annotated[StrictStr, Field(pattern=r"\S")]  # a path or name: not blank


def parse_shard(shard: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n) with 0 <= i < n."""
    try:
        i, n = (int(x) for x in str(shard).split("/"))
    except ValueError:
        raise PlanError(f"shard={shard!r}: use 'i/n', e.g. 0/4") from None
    if not 0 <= i < n:  # n >= 1 follows
        raise PlanError(f"shard={shard!r}: need n >= 1 and 0 <= i < n")
    return i, n


def paper_resolved(policy: ContextPolicy, paper_context: str) -> ContextPolicy:
    """``policy``, or for ``context=paper`` the model's main-table policy (``conf/context/<paper_context>.yaml``,
    paper appendix C)."""
    from harness.config_groups import group_yaml

    if not isinstance(policy, Paper):
        return policy
    return ContextPolicy.from_dict(group_yaml("context", paper_context))


def _number_as_text(value: Any) -> Any:
    """``run=2`` (YAML reads a number): the name ``"2"``."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _check_devices(value: Any) -> None:
    """``devices``: the GPU ids :func:`harness.gpu_pool.parse_devices` reads (``auto`` / null are detected when a
    pool is made, not here)."""
    from harness.gpu_pool import parse_devices

    if value is not None and value != "auto":
        parse_devices(value)


def _checked(rule: Any) -> Any:
    """A rule that raises its own message (naming the key and the fix), as a field's validator."""
    def check(value: Any) -> Any:
        rule(value)
        return value
    return BeforeValidator(check)


class SetupSettings(Section, BaseModel):
    """``setup.*`` (``python -m harness setup model=<m>``, :mod:`harness.app.setup`, docs/real-models.md).

    root: where unset paths go (None: ``$WORLDMEM_MODELS`` or ``~/worldmem-models``). steps: the steps to run (None:
    all). python_bin: the interpreter that creates the model's venv. clone_url: the checkout's origin. forks:
    package -> pip spec. revisions: weight name -> hub commit. optional_steps: also run the recipe's optional steps.
    endpoint: the Hugging Face endpoint. harness_python: the interpreter of the printed script's harness steps.
    check_dir: where the day-one check (``steps=[check]``) writes ``check.json`` and its tiny run.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "setup"

    root: Optional[StrictStr] = None
    steps: Optional[list[StrictStr]] = None
    python_bin: Optional[StrictStr] = None
    clone_url: Optional[StrictStr] = None
    forks: Annotated[dict[str, StrictStr], Fix("a mapping package -> pip spec")] = Field(default_factory=dict)
    revisions: Annotated[dict[str, StrictStr], Fix("a mapping weight name -> hub commit")] = Field(
        default_factory=dict)
    optional_steps: Annotated[StrictBool, _FLAG] = False
    endpoint: Optional[StrictStr] = None
    harness_python: Optional[StrictStr] = None
    check_dir: Optional[StrictStr] = None


class PathsSettings(Section, BaseModel):
    """``paths.*``: weights: the learned evaluation backbones' folder (None: ``$WORLDMEM_WEIGHTS`` or
    ``~/.cache/worldmem/weights``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "paths"
    fix: ClassVar[str] = "a mapping, e.g. paths.weights=/data/weights"

    weights: Annotated[Optional[_Text], Fix("give a folder path (or null)")] = None


class LocalSettings(Section, BaseModel):
    """``local``: this machine's settings (the git-ignored ``conf/local/default.yaml``). models: model name -> the
    fields merged into that model's config when it is chosen (:func:`harness.config_groups.model_config_with_local`;
    checked there by the model's own config)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "local"
    fix: ClassVar[str] = "conf/local/default.yaml must hold a mapping"

    models: Annotated[Optional[dict[str, Optional[dict[str, Any]]]], Fix(
        "a mapping model name -> the model's settings")] = None


class RunConfig(ReportOptions):
    """One command's configuration (the keys of ``conf/config.yaml``, docs/configuration.md).

    Scalars: ``cmd`` (the command), ``stage``, ``dry_run``, ``previews``, ``overwrite``, ``progress``, ``run`` (the
    run's name under ``output_root``), ``output_root`` (a folder), ``seed`` (None: the model's frozen default),
    ``shard`` (``"i/n"``), ``verbosity``, ``trajectories`` (None: the chosen ``trajectory``), ``videos`` /
    ``videos_manifest`` (stage=evaluate on videos made elsewhere), ``devices`` (``auto`` or GPU indices, read by
    :func:`harness.gpu_pool.parse_devices`), ``gpu_lock_dir``, ``print`` (setup prints its script), ``source``
    (release import), ``endpoint`` (a served backend's WebSocket address). Sections: see the module docstring;
    ``model``, ``context`` and ``trajectory`` are None only in a partial mapping (an API caller's; planning names
    the missing one).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = ""
    error: ClassVar[type[UserError]] = PlanError  # a top-level setting; a section's own problems are its error's

    cmd: StrictStr = "run"
    stage: Annotated[Stage, Fix(f"use one of {', '.join(STAGES)}")] = "all"
    dry_run: Annotated[StrictBool, _FLAG] = False
    previews: Annotated[StrictBool, _FLAG] = False
    overwrite: Annotated[StrictBool, _FLAG] = False
    progress: Annotated[StrictBool, _FLAG] = True
    #: a run name under ``output_root`` (the run-name rule, :func:`harness.outputs.check_run_name`, where a run is
    #: made) or an existing run's folder (``stage=evaluate``, ``report``, ``verify``)
    run: Annotated[StrictStr, BeforeValidator(_number_as_text), Fix("give a run name")] = "default"
    output_root: Annotated[_Text, Fix("give a folder path")] = "outputs"
    seed: Optional[Seed] = None
    shard: Annotated[StrictStr, _checked(parse_shard)] = "0/1"
    verbosity: Annotated[StrictStr, _checked(check_verbosity)] = "info"
    trajectories: Annotated[Optional[list[StrictStr]], Field(min_length=1), Fix(
        "give a list of trajectory names, e.g. trajectories=[lrlr,lrud] (or null)")] = None
    videos: Annotated[Optional[_Text], _PATH] = None
    videos_manifest: Annotated[Optional[_Text], _PATH] = None
    #: auto | null (detected) | GPU ids (``[0,1]``, ``"0,1"``, UUIDs); unset: no GPU pool
    devices: Annotated[Optional[Union[StrictStr, StrictInt, list[Union[StrictStr, StrictInt]]]],
                       _checked(_check_devices)] = None
    gpu_lock_dir: Annotated[Optional[_Text], _PATH] = None
    print_script: Annotated[StrictBool, _FLAG] = Field(default=False, alias="print")
    source: Annotated[Optional[_Text], Fix("give a folder (or null)")] = None
    endpoint: Optional[StrictStr] = None

    model: Annotated[Optional[ModelConfig], BeforeValidator(lambda v: None if v is None else model_config(v))] = None
    context: Optional[ContextKind] = None
    trajectory: Optional[TrajectorySpec] = None
    cases: CaseSelection = Field(default_factory=CaseSelection)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    backend: Optional[Backend] = None
    local: Optional[LocalSettings] = None
    paths: PathsSettings = Field(default_factory=PathsSettings)
    release: ReleaseSettings = Field(default_factory=ReleaseSettings)
    setup: SetupSettings = Field(default_factory=SetupSettings)
    slurm: Optional[SlurmSettings] = None

    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _with_local(cls, data: Any) -> Any:
        """This machine's settings for the chosen model (``local.models.<name>``) merged into ``model``."""
        from harness.config_groups import model_config_with_local

        if isinstance(data, Mapping) and isinstance(data.get("model"), Mapping):
            local = data.get("local")
            return {**data, "model": model_config_with_local(data["model"], local if isinstance(local, Mapping)
                                                             else None)}
        return data

    @model_validator(mode="after")
    def _across_sections(self) -> RunConfig:
        """The rules between sections: ``backend`` and ``endpoint``; ``context=paper`` becomes the chosen model's
        main-table policy."""
        check_endpoint(self.backend, self.endpoint)
        if self.context is not None and self.model is not None:
            object.__setattr__(self, "context", paper_resolved(self.context, self.model.paper_context))
        return self

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> RunConfig:
        """The typed form of a resolved config (a plain mapping, e.g. ``OmegaConf.to_container(cfg,
        resolve=True)``); the first problem raised as a :class:`harness.errors.UserError` naming the key and the
        fix (:func:`harness.sections.problem`)."""
        data = dict(raw)
        cfg = cls.from_dict(data)
        cfg._raw = data
        return cfg

    @classmethod
    def coerce(cls, cfg: RunConfig | Mapping[str, Any]) -> RunConfig:
        """``cfg`` itself, or the typed form of a plain mapping (the API's callers: tests, notebooks)."""
        return cfg if isinstance(cfg, RunConfig) else cls.from_mapping(cfg)

    @property
    def raw(self) -> dict[str, Any]:
        """The resolved mapping this config was built from: what a run records on disk (never modify it)."""
        return self._raw

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with top-level ``changes`` (in the typed form and in :attr:`raw`)."""
        return RunConfig.from_mapping({**self._raw, **changes})

    @property
    def evaluate_enabled(self) -> bool:
        """``evaluate.enabled`` (default true): a run evaluates what it generated."""
        return self.evaluate.enabled

    @property
    def weights_dir(self) -> Optional[str]:
        """``paths.weights``: the evaluation backbones' folder (None: the default)."""
        return self.paths.weights

    @property
    def served(self) -> Optional[BackendConfig]:
        """The serving engine's settings when a served backend is chosen (None: the model's own adapter)."""
        return self.backend if isinstance(self.backend, BackendConfig) else None

    def chosen(self) -> tuple[ModelConfig, ContextPolicy, TrajectorySpec]:
        """The model, context policy and trajectory of a command that runs one (a :class:`PlanError` naming the
        missing section)."""
        for key in ("model", "context", "trajectory"):
            if getattr(self, key) is None:
                raise PlanError(f"{key}: required; choose one: {key}=<name> (`python -m harness list`)")
        assert self.model is not None and self.context is not None and self.trajectory is not None
        return self.model, self.context, self.trajectory


__all__ = ["LocalSettings", "PathsSettings", "RunConfig", "STAGES", "SetupSettings", "Stage", "parse_shard"]
