"""The schema of a model's upstream contract (``adapters/<model>/contract.yaml``): frozen dataclasses, one per audited
section, and :class:`Contract`, the validated whole.

Every section is built and type-checked by :mod:`adapters.contracts.validation` (types, required keys, enumerated
values, unknown keys: a typo fails, naming the model and the dotted key); a section's own invariants that span
several fields sit in its ``check`` method, which the validation calls once the section is built. Free-text
provenance may sit beside any fact under a key ending in ``_source`` or ``_note`` (e.g. ``python_source``,
``anchor_note``). Nothing here reads files, imports torch or touches upstream code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


def file_name(path: str) -> str:
    """The last part of a weight path as upstream would name the file or folder (``google/umt5-xxl/*`` ->
    ``umt5-xxl``); "" when that part is a glob pattern (``diffusion_pytorch_model*.safetensors``)."""
    last = path.removesuffix("/*").rstrip("/").split("/")[-1]
    return "" if any(c in last for c in "*?[") else last


class ContractSchemaError(ValueError):
    """A contract YAML does not follow the schema. ``model`` and ``key`` (a dotted path such as
    ``writer.overlays[0].switch``) name the fact; the message says what is wrong and what is allowed."""

    def __init__(self, model: str, key: str, problem: str):
        super().__init__(f"adapters/{model}/contract.yaml: {key}: {problem}")
        self.model, self.key, self.problem = model, key, problem


@dataclass(frozen=True)
class TorchSpec:
    """torch as upstream installs it: version (None = unpinned), the wheel index (None = PyPI), companions."""

    source: str
    version: str | None = None
    index_url: str | None = None
    companions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One ordered step of the environment recipe; exactly one action key is set.

    ``torch``: install the torch spec (with its index); ``pip``: ``pip install <args>``; ``requirements``: a
    requirements file of the checkout, minus the lines of the packages in ``exclude`` (e.g. flash-attn, which must be
    built after torch with ``--no-build-isolation``); ``editable``: ``pip install -e <path>`` (see
    ``environment.editable``); ``fork``: a package that is not on PyPI (see ``environment.forks``); ``run``: a shell
    command in the checkout with the environment's ``bin`` first on ``PATH``. ``cwd`` is relative to the checkout.
    ``builds``: packages a ``run`` step (upstream's own installer) installs itself, for setup's checks before it
    (``flash-attn``: whether it compiles, and nvcc then).
    """

    source: str
    torch: bool = False
    pip: str | None = None
    requirements: str | None = None
    editable: str | None = None
    fork: str | None = None
    run: str | None = None
    exclude: tuple[str, ...] = ()
    no_deps: bool = False
    cwd: str = "."
    optional: bool = False
    note: str = ""
    builds: tuple[str, ...] = ()

    ACTIONS = ("torch", "pip", "requirements", "editable", "fork", "run")

    @property
    def action(self) -> str:
        return next(a for a in self.ACTIONS if getattr(self, a))

    def check(self, model: str, where: str) -> None:
        set_ = [a for a in self.ACTIONS if getattr(self, a)]
        if len(set_) != 1:
            raise ContractSchemaError(model, where, f"give exactly one of {list(self.ACTIONS)} (found {set_ or 'none'})")
        if self.exclude and not self.requirements:
            raise ContractSchemaError(model, f"{where}.exclude", "only a requirements step excludes packages")
        if self.builds and not self.run:
            raise ContractSchemaError(model, f"{where}.builds", "only a run step (upstream's installer) declares what "
                                      "it builds; a pip step names its packages itself")


@dataclass(frozen=True)
class Editable:
    """An editable install of a checkout folder. ``installed_by``: set when one of upstream's own scripts (a ``run``
    step) does it, so no editable step of the recipe is needed."""

    path: str
    source: str
    why: str = ""
    no_deps: bool = False
    installed_by: str = ""


@dataclass(frozen=True)
class Fork:
    """A package installed from outside PyPI. ``url`` None: upstream names no source (setup stops and says so)."""

    package: str
    source: str
    url: str | None = None
    ref: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Environment:
    """How upstream builds the model's Python environment, as ordered steps (see :class:`Step`)."""

    python: str | None
    torch: TorchSpec
    steps: tuple[Step, ...]
    editable: tuple[Editable, ...] = ()
    forks: tuple[Fork, ...] = ()
    notes: str = ""

    def check(self, model: str, where: str) -> None:
        for kind, names in (("editable", {e.path for e in self.editable if not e.installed_by}),
                            ("fork", {f.package for f in self.forks})):
            used = {getattr(s, kind) for s in self.steps if getattr(s, kind)}
            for name in sorted(names - used):
                raise ContractSchemaError(model, f"{where}.{kind}", f"{name!r} is listed but no step installs it")
            for name in sorted(used - names):
                raise ContractSchemaError(model, f"{where}.steps", f"a {kind} step names {name!r}, which "
                                          f"{where}.{'forks' if kind == 'fork' else kind} does not list")
        if sum(s.torch for s in self.steps) > 1:
            raise ContractSchemaError(model, f"{where}.steps", "torch is installed by at most one step")


@dataclass(frozen=True)
class Weight:
    """One artefact upstream loads. ``key``: the model-config key whose path it is reached through (``checkpoint``,
    ``model_path``, ``upstream_dir``, ...). ``hub``: where it comes from (``checkout``: shipped in the repository).
    ``files``: repository paths or glob patterns; ``file``: the one file a file-valued key points at. ``into``: the
    folder under the key's path the repository is placed in; ``prefix``: the repository folder the key's path is.
    ``when``: a config field that must be true for upstream to load it (e.g. ``prompt_refinement``)."""

    name: str
    repo: str
    source: str
    key: str | None = None
    hf_cache: bool = False  # downloaded into the Hugging Face cache (a run-time hub fetch served offline)
    hub: str = "huggingface"
    revision: str | None = None
    files: tuple[str, ...] = ()
    file: str | None = None
    into: str = ""
    prefix: str = ""
    gated: bool | None = None
    size_gb: float | None = None
    required: bool = True
    when: str | None = None
    passed_as: str = ""
    target: str = ""
    note: str = ""

    HUBS = ("huggingface", "modelscope", "checkout")

    def check(self, model: str, where: str) -> None:
        if self.hub not in self.HUBS:
            raise ContractSchemaError(model, f"{where}.hub", f"{self.hub!r}: use one of {list(self.HUBS)}")
        if bool(self.key) == self.hf_cache:
            raise ContractSchemaError(model, where, "give either key (the config path it lands under) or hf_cache: true")
        if bool(self.files) == bool(self.file):
            raise ContractSchemaError(model, where, "give either files (patterns) or file (the one file the key is)")
        if self.into and self.prefix:
            raise ContractSchemaError(model, where, "into and prefix are exclusive")
        if self.file and (self.into or self.prefix):
            raise ContractSchemaError(model, where, "a file weight has neither into nor prefix")


@dataclass(frozen=True)
class EnvVar:
    name: str
    required: Any
    default: Any
    meaning: str
    source: str


@dataclass(frozen=True)
class HubFetch:
    """A download upstream makes at run time. ``avoided_by`` is how the launch avoids it, checked before any item
    runs: ``flag`` (the compiled launch passes that flag), ``file`` ([config key, relative path] that must exist:
    a local copy upstream prefers) or ``offline_cache`` (the Hugging Face cache holds ``repo`` and the launch
    exports ``HF_HUB_OFFLINE=1``) or ``import`` (a module of the contract's ``imports``, which the readiness probe
    imports in the model's environment)."""

    repo: str
    what: str
    call: str
    source: str
    avoided_by: dict[str, Any]
    when: str = "always"
    fix: str = ""

    KINDS = ("flag", "file", "offline_cache", "import")

    def check(self, model: str, where: str) -> None:
        if len(self.avoided_by) != 1 or next(iter(self.avoided_by)) not in self.KINDS:
            raise ContractSchemaError(model, f"{where}.avoided_by", f"give one of {list(self.KINDS)}")
        kind, value = next(iter(self.avoided_by.items()))
        ok = {"flag": isinstance(value, str) and value.startswith("-"),
              "file": isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value),
              "offline_cache": value is True, "import": isinstance(value, str)}[kind]
        if not ok:
            raise ContractSchemaError(model, f"{where}.avoided_by.{kind}",
                                      {"flag": "a flag name", "file": "[config key, relative path]",
                                       "offline_cache": "true", "import": "a module name"}[kind])


@dataclass(frozen=True)
class OverlaySwitch:
    """Upstream's own switch of an overlay: a flag or an environment variable and the value that turns it off."""

    off: str
    flag: str | None = None
    env: str | None = None

    def check(self, model: str, where: str) -> None:
        if bool(self.flag) == bool(self.env):
            raise ContractSchemaError(model, where, "give either flag or env")


@dataclass(frozen=True)
class Overlay:
    """Something upstream draws into the written frames. ``default``: on or off without our intervention.
    ``switch``: upstream's own way to turn it off; else ``writer_call`` is the function that draws and writes
    (``module.function``), which a shim must replace in the process that writes the video."""

    name: str
    what: str
    source: str
    default: str
    switch: OverlaySwitch | None = None
    writer_call: str | None = None
    where: str = ""

    def check(self, model: str, where: str) -> None:
        if self.default not in ("on", "off"):
            raise ContractSchemaError(model, f"{where}.default", f"{self.default!r}: use on or off")
        if self.default == "on" and not (self.switch or self.writer_call):
            raise ContractSchemaError(model, where, "an overlay on by default needs a switch or a writer_call "
                                      "(the function a shim replaces)")


@dataclass(frozen=True)
class PostProcess:
    """A transformation of every written frame that is part of upstream's release (not an overlay), with the
    value the harness passes."""

    name: str
    what: str
    source: str
    flag: str
    ours: str
    upstream_default: str = ""


@dataclass(frozen=True)
class LogFailure:
    """A line in upstream's log that means the run is wrong although upstream exits 0 (a regex, ``re.M``)."""

    pattern: str
    means: str
    source: str

    def check(self, model: str, where: str) -> None:
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ContractSchemaError(model, f"{where}.pattern", f"not a regular expression: {exc}") from None


@dataclass(frozen=True)
class CheckoutWrite:
    """A path upstream writes inside the checkout. ``redirect_flag``: the flag that moves it (the launch must pass
    it); without one the checkout must be writable (readiness checks it)."""

    path: str
    source: str
    redirect_flag: str | None = None


@dataclass(frozen=True)
class Writer:
    """How upstream writes the video. ``fps``: the rate of the written file (what the harness expects).
    ``anchor_frame``: whether the conditioning image's frame is in the file; ``first_pose``: the pose index that
    upstream's frame 0 shows (1 when the anchor is dropped: the harness then puts the conditioning canvas in front,
    so the item's frame i shows pose i). ``fps_flag`` / ``fps_env``: the flag or variable the written rate follows
    (``fps`` is then upstream's default; the launch passes ``model.fps``). ``process``: ``main`` or ``spawned_worker`` (a fresh interpreter a shim
    cannot reach); ``spawned_with``: flags that move the writer into a spawned worker."""

    file: str
    fps: float
    frames: str
    anchor_frame: str
    first_pose: int
    process: str
    overlays: tuple[Overlay, ...] = ()
    postprocess: tuple[PostProcess, ...] = ()
    spawned_with: tuple[str, ...] = ()
    skip_if_exists: bool = False
    codec: str = ""
    log_failures: tuple[LogFailure, ...] = ()
    checkout_writes: tuple[CheckoutWrite, ...] = ()
    fps_flag: str | None = None
    fps_env: str | None = None

    def check(self, model: str, where: str) -> None:
        if self.anchor_frame not in ("kept", "dropped"):
            raise ContractSchemaError(model, f"{where}.anchor_frame", f"{self.anchor_frame!r}: use kept or dropped")
        if self.first_pose != (0 if self.anchor_frame == "kept" else 1):
            raise ContractSchemaError(model, f"{where}.first_pose", f"{self.first_pose}: a {self.anchor_frame} anchor "
                                      f"means frame 0 shows pose {0 if self.anchor_frame == 'kept' else 1}")
        if self.process not in ("main", "spawned_worker"):
            raise ContractSchemaError(model, f"{where}.process", f"{self.process!r}: use main or spawned_worker")
        if not self.fps > 0:
            raise ContractSchemaError(model, f"{where}.fps", "must be > 0")


@dataclass(frozen=True)
class SeedFact:
    what: str
    source: str
    note: str = ""
    by: str = ""  # what sets it (a flag, a config key, nothing)


@dataclass(frozen=True)
class Intrinsics:
    """Whether the case's K reaches the model under the harness launch; when it does not, ``model_fov_deg`` is the
    (horizontal, vertical) field of view the model sees instead (recorded as a residual of every item)."""

    reads_case_K: bool
    rule: str
    source: str
    model_fov_deg: tuple[float, float] | None = None
    camera_input: bool = True  # False: no camera parameters reach the model at all (YUME's captions)

    def check(self, model: str, where: str) -> None:
        if self.camera_input and not self.reads_case_K and self.model_fov_deg is None:
            raise ContractSchemaError(model, f"{where}.model_fov_deg", "required when the case's K does not reach "
                                      "the model (reads_case_K: false)")


@dataclass(frozen=True)
class DefaultDiffers:
    """A setting where upstream's script, the paper and the harness may differ, and which one the harness follows."""

    setting: str
    upstream_script: str
    ours: str
    choice: str
    why: str
    paper: str = ""

    CHOICES = ("upstream", "paper", "harness")

    def check(self, model: str, where: str) -> None:
        if self.choice not in self.CHOICES:
            raise ContractSchemaError(model, f"{where}.choice", f"{self.choice!r}: use one of {list(self.CHOICES)}")


@dataclass(frozen=True)
class Gpus:
    recommended: int
    sequence_parallel: str
    source: str


@dataclass(frozen=True)
class GpuMemory:
    """Per-GPU memory: what upstream states (None: nothing) and the estimate for the harness setting."""

    note: str
    stated_gb: float | None = None
    estimate_gb: str | None = None


@dataclass(frozen=True)
class License:
    code: str
    weights: str
    source: str


@dataclass(frozen=True)
class CheckpointEntry:
    """A path the loader opens, reached through config key ``key``: ``kind`` file | dir | path, the ``files``
    (relative paths or glob patterns) inside a folder, the ``suffix`` a file must have, and ``when`` (a config field
    that must be true for upstream to open it). ``hub_confirmed``: the file names under this key that upstream's own
    text does not name at the pin (the tree listing proves the others, :mod:`adapters.contracts.tree`), so only the
    hub can confirm them: setup checks each one after the download and stops naming it when it is not there."""

    key: str
    kind: str
    source: str
    files: tuple[str, ...] = ()
    suffix: str | None = None
    when: str | None = None
    flag: str | None = None
    env: str | None = None
    format: str | None = None
    note: str = ""
    hub_confirmed: tuple[str, ...] = ()

    def check(self, model: str, where: str) -> None:
        if self.kind not in ("file", "dir", "path"):
            raise ContractSchemaError(model, f"{where}.kind", f"{self.kind!r}: use file, dir or path")
        if self.files and self.kind == "file":
            raise ContractSchemaError(model, f"{where}.files", "a file has no files inside it")


@dataclass(frozen=True)
class ImportProbe:
    """A module the model's environment must import. ``needs_gpu``: its import touches CUDA (probed only when the
    environment sees a GPU)."""

    module: str
    source: str = ""
    needs_gpu: bool = False


@dataclass(frozen=True)
class NativeLaunch:
    """``context=native`` as upstream documents its own launch. ``source``: the documented command
    (``owner/repo@<commit> path:line``, checked against the tree listing). ``args``: the memory flags and values that
    command passes (flag -> value, ``""`` for a switch); ``knobs``: every flag (``-...``) or environment variable that
    sets the model's memory, with upstream's default (None: unset, nothing passed); ``absent``: flags of the harness's
    shim that the native launch must not pass (they replace upstream's memory). The compiled native launch gives each
    knob the documented value: ``args`` where the command passes it, else the default."""

    source: str
    args: dict[str, str] = field(default_factory=dict)
    knobs: dict[str, str | None] = field(default_factory=dict)
    absent: tuple[str, ...] = ()
    note: str = ""

    def check(self, model: str, where: str) -> None:
        for flag in self.args:
            if flag not in self.knobs:
                raise ContractSchemaError(model, f"{where}.args.{flag}", "every documented memory flag is a knob too "
                                          "(knobs: flag -> upstream's default)")


@dataclass(frozen=True)
class SameLaunch:
    """A declared identity: ``policy`` compiles to the launch of ``same_as`` (command.sh and controls/ byte for
    byte), because of the upstream line ``source`` (``owner/repo@<commit> path:line``). ``when``: a model config
    field that must be true for the identity to hold (LingBot v1 as a causal build)."""

    policy: str
    same_as: str
    why: str
    source: str
    when: str | None = None

    def check(self, model: str, where: str) -> None:
        if self.policy == self.same_as:
            raise ContractSchemaError(model, f"{where}.same_as", "a policy is not declared the same as itself")


@dataclass(frozen=True)
class Policies:
    """What the context labels mean upstream: the native launch and the declared identities."""

    native: NativeLaunch
    same_launch: tuple[SameLaunch, ...] = ()


@dataclass(frozen=True)
class RegimeCaveat:
    """Where the harness's launch leaves the regime the checkpoint was trained or documented in. ``kind``: zero_shot
    (a mode upstream calls zero-shot or out of distribution), cache_not_reached (a component whose memory the context
    policy does not reach), window (a memory window other than upstream's documented one), size (a length or
    resolution other than upstream's default), input (an input upstream's regime derives differently). ``policies``:
    the context labels it applies to (empty: every launch). ``source``: upstream's file and line."""

    kind: str
    what: str
    upstream: str
    ours: str
    source: str
    policies: tuple[str, ...] = ()

    KINDS = ("zero_shot", "cache_not_reached", "window", "size", "input")

    def check(self, model: str, where: str) -> None:
        if self.kind not in self.KINDS:
            raise ContractSchemaError(model, f"{where}.kind", f"{self.kind!r}: use one of {list(self.KINDS)}")

    def line(self) -> str:
        """One line for the report: what differs, upstream's regime, the harness's, and the source."""
        return f"{self.what}: upstream {self.upstream}; here {self.ours} ({self.source})"


@dataclass(frozen=True)
class DayOne:
    """The GPU day-one check's tiny generation (:mod:`harness.app.setup_check`): ``tiny_frames`` the shortest
    frame count upstream's code allows (None: upstream allows no short run, ``source`` says why)."""

    source: str
    tiny_frames: int | None = None


@dataclass(frozen=True)
class Contract:
    """One model's upstream facts (see :mod:`adapters.contracts`), validated at load.

    The audited sections are typed (:class:`Environment`, :class:`Weight`, :class:`Writer`, ...); the launch facts
    checked where they are used (``entry``, ``env``, ``call_sites``, ``output``, ``canvas``, ``literals``) are the
    YAML mappings as written. ``flags`` is ``entry.flags`` (name -> spec as upstream's argparse defines it);
    ``sys_path``: the folders (relative to the checkout) upstream's own code puts on ``sys.path`` before importing
    itself (``entry.sys_path``). ``raw`` keeps the whole YAML mapping (sections no schema covers, e.g. ``captions``).
    """

    model: str
    repo: str
    commit: str
    entry: dict[str, Any]
    flags: dict[str, dict[str, Any]]
    sys_path: list[str]
    env: dict[str, dict[str, Any]]
    call_sites: dict[str, dict[str, Any]]
    output: dict[str, Any]
    canvas: dict[str, Any]
    literals: dict[str, dict[str, Any]]
    checkpoint: tuple[CheckpointEntry, ...]
    imports: tuple[ImportProbe, ...]
    environment: Environment
    weights: tuple[Weight, ...]
    env_vars: tuple[EnvVar, ...]
    hub_fetches: tuple[HubFetch, ...]
    writer: Writer
    seeds: tuple[SeedFact, ...]
    intrinsics: Intrinsics
    defaults_differ: tuple[DefaultDiffers, ...]
    gpus: Gpus
    gpu_memory: GpuMemory
    license: License
    policies: Policies | None = None
    trained_regime: tuple[RegimeCaveat, ...] = ()
    day_one: DayOne | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
