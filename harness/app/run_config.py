"""The run configuration, typed: what ``python -m harness`` composed (Hydra), validated once at the boundary.

The command line composes the Hydra config, resolves it to a plain mapping and builds one :class:`RunConfig`
from it (:func:`harness.app.settings.load_run_config`: the hand-written checks of
:func:`harness.app.settings.check_settings`, whose messages name the key and the fix, then the types below).
Everything after that point takes the typed object: the top-level keys are attributes with their types, the
``cases`` and ``setup`` sections are typed models, and the sections that have their own typed config stay
mappings here and are validated by that config where they are used (``model``:
:class:`adapters.base.ModelConfig`, ``context``: :class:`harness.context.ContextPolicy`, ``trajectory``:
:class:`trajectories.TrajectorySpec`, ``evaluate``: :class:`evaluate.stage.EvalConfig`, ``backend``:
:class:`adapters.served.config.ServedModel`, ``release``: :class:`evaluate.release.ReleaseOptions`).

The resolved mapping itself is kept (:attr:`RunConfig.raw`, read-only by convention): it is what a run records
(``<run>/.hydra/<time>/.hydra/config.yaml``, each item's ``meta.json``, the sweep pre-pass's plan key), byte for
byte as before the typed config existed, and what the evaluation layer's own entry points read.

This is the pattern of Hydra's structured configs (a typed schema checked when the config is built; see
facebookresearch/hydra ``website/docs/tutorials/structured_config``) with pydantic, the one validation mechanism the
project already uses for cases (:mod:`harness.cases`) and settings.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, ValidationError, field_validator

from harness.cases import CaseSelection
from harness.errors import ConfigError, UserError
from harness.outputs import check_seed

Stage = Literal["generate", "evaluate", "all"]


class SetupSettings(BaseModel):
    """``setup.*`` (``python -m harness setup model=<m>``, :mod:`harness.app.setup`, docs/real-models.md).

    root: where unset paths go (None: ``$WORLDMEM_MODELS`` or ``~/worldmem-models``). steps: the steps to run (None:
    all). python_bin: the interpreter that creates the model's venv. clone_url: the checkout's origin. forks:
    package -> pip spec. revisions: weight name -> hub commit. optional_steps: also run the recipe's optional steps.
    endpoint: the Hugging Face endpoint. harness_python: the interpreter of the printed script's harness steps.
    check_dir: where the day-one check (``steps=[check]``) writes ``check.json`` and its tiny run.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    root: Optional[str] = None
    steps: Optional[list[str]] = None
    python_bin: Optional[str] = None
    clone_url: Optional[str] = None
    forks: dict[str, Any] = Field(default_factory=dict)
    revisions: dict[str, Any] = Field(default_factory=dict)
    optional_steps: bool = False
    endpoint: Optional[str] = None
    harness_python: Optional[str] = None
    check_dir: Optional[str] = None


class RunConfig(BaseModel):
    """One command's configuration (the keys of ``conf/config.yaml``, docs/configuration.md).

    Scalars: ``cmd`` (the command), ``stage``, ``dry_run``, ``previews``, ``overwrite``, ``progress``, ``run`` (the
    run's name under ``output_root``), ``output_root`` (a folder), ``seed`` (None: the model's frozen default),
    ``shard`` (``"i/n"``), ``verbosity``, ``trajectories`` (None: the chosen ``trajectory``), ``videos`` /
    ``videos_manifest`` (stage=evaluate on videos made elsewhere), ``devices`` (``auto`` or GPU indices),
    ``gpu_lock_dir``, ``print`` (setup prints its script), ``source`` (release import), ``endpoint`` (a served
    backend's WebSocket address). Sections: see the module docstring.
    """

    model_config = ConfigDict(extra="allow", frozen=True, arbitrary_types_allowed=True)

    cmd: str = "run"
    stage: Stage = "all"
    dry_run: StrictBool = False
    previews: StrictBool = False
    overwrite: StrictBool = False
    progress: StrictBool = True
    run: Any = "default"  # a name or path; refused by the run-name rule (harness.outputs.check_run_name) if bad
    output_root: str = "outputs"
    seed: Optional[int] = None
    shard: str = "0/1"
    verbosity: str = "info"
    trajectories: Optional[list[str]] = None
    videos: Optional[str] = None
    videos_manifest: Optional[str] = None
    devices: Any = None  # auto | null (detected) | ids; unset: no GPU pool. Checked by harness.gpu_pool.parse_devices
    gpu_lock_dir: Optional[str] = None
    print_script: bool = Field(default=False, alias="print")
    source: Optional[str] = None
    endpoint: Optional[str] = None
    report_runs: Optional[list[str]] = None
    report_out: Optional[str] = None

    model: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    trajectory: dict[str, Any] = Field(default_factory=dict)
    cases: CaseSelection = Field(default_factory=CaseSelection)
    evaluate: Optional[dict[str, Any]] = None
    backend: Optional[dict[str, Any]] = None
    local: Optional[dict[str, Any]] = None
    paths: Optional[dict[str, Any]] = None
    release: Optional[dict[str, Any]] = None
    setup: Optional[SetupSettings] = None
    slurm: Optional[dict[str, Any]] = None

    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: Any) -> Optional[int]:
        """The one seed rule (:func:`harness.outputs.check_seed`: an integer in [0, 2^32), never coerced)."""
        return None if value is None else check_seed(value)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> RunConfig:
        """The typed form of a resolved config (a plain mapping, e.g. ``OmegaConf.to_container(cfg,
        resolve=True)``); :class:`ConfigError` naming the key when a value has the wrong type."""
        data = dict(raw)
        try:
            cfg = cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, UserError):  # a rule of the project's own (its message names the key and the fix)
                raise cause from None
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{where}={err.get('input')!r}: {err['msg']}") from None
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
        return bool((self.evaluate or {}).get("enabled", True))

    @property
    def weights_dir(self) -> Optional[str]:
        """``paths.weights``: the evaluation backbones' folder (None: the default)."""
        value = (self.paths or {}).get("weights")
        return None if value is None else str(value)
