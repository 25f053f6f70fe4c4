"""Upstream launch contracts as data: what each model's own code accepts, read at the pinned commit.

``adapters/contracts/<model>.yaml`` records, each fact with the upstream file and line it was read from:

- ``entry``: the script ``command.sh`` runs and its command-line flags (name, required, type, choices, action,
  nargs) as upstream's ``argparse`` defines them (``python -m adapters.contracts.extract <script>`` lists them);
  ``kind: env`` entries (a shell launcher) instead list the environment variables the launcher chain reads;
- ``env``: environment variables the launcher or script reads (and the values they accept);
- ``call_sites``: for every upstream function a shim replaces, how upstream calls it (arguments) and what it
  unpacks from the result (arity, types);
- ``output``: where upstream writes the video (a file flag, or a directory plus a file name rule);
- ``canvas``: how upstream derives the generated frame size from the image;
- ``checkpoint`` / ``imports`` / ``literals``: paths the loader opens (by config key), the packages the
  environment must import, and source literals a shim patches;
- the audited sections, typed and validated here (:func:`validate`): ``environment`` (the recipe as ordered
  :class:`Step` s), ``weights`` (:class:`Weight`), ``env_vars``, ``hub_fetches`` (:class:`HubFetch`, with how the
  launch avoids each), ``writer`` (:class:`Writer`: fps, frame rule, anchor and ``first_pose``, overlays,
  post-processing, log failures, checkout writes), ``seeds``, ``intrinsics``, ``defaults_differ``, ``gpus``,
  ``gpu_memory``, ``license``. A malformed section raises :class:`ContractSchemaError` naming the model and the
  dotted key (``writer.overlays[0].switch``); free text may sit beside any fact under a ``*_source`` / ``*_note``
  key.

The facts are written in the project's own words and format; no upstream code is copied. Tests parse every
compiled ``command.sh`` against its contract (:func:`check_command`) and call each shim's replacement the way
the recorded call site does. Nothing here imports torch or touches upstream code.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

CONTRACT_DIR = Path(__file__).resolve().parent

#: Variables the harness itself sets for every launch (device assignment); not upstream's to define.
HARNESS_ENV = {"CUDA_VISIBLE_DEVICES"}


class ContractViolation(ValueError):
    """A compiled command or shim does not satisfy upstream's contract (the message names the fact and source)."""


class ContractSchemaError(ValueError):
    """A contract YAML does not follow the schema. ``model`` and ``key`` (a dotted path such as
    ``writer.overlays[0].switch``) name the fact; the message says what is wrong and what is allowed."""

    def __init__(self, model: str, key: str, problem: str):
        super().__init__(f"adapters/contracts/{model}.yaml: {key}: {problem}")
        self.model, self.key, self.problem = model, key, problem


# -- the schema of the recorded facts ------------------------------------------------------------------------------
#
# Every section below is a frozen dataclass built by :func:`_build`, which checks types, required keys, enumerated
# values and unknown keys (a typo fails, naming the model and the dotted key). Free-text provenance may sit beside
# any fact under a key ending in ``_source`` or ``_note`` (e.g. ``python_source``, ``anchor_note``).

_PROVENANCE_SUFFIXES = ("_source", "_note")


@dataclass(frozen=True)
class TorchSpec:
    """torch as upstream installs it: version (None = unpinned), the wheel index (None = PyPI), companions."""

    source: str
    version: Optional[str] = None
    index_url: Optional[str] = None
    companions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One ordered step of the environment recipe; exactly one action key is set.

    ``torch``: install the torch spec (with its index); ``pip``: ``pip install <args>``; ``requirements``: a
    requirements file of the checkout, minus the lines of the packages in ``exclude`` (e.g. flash-attn, which must be
    built after torch with ``--no-build-isolation``); ``editable``: ``pip install -e <path>`` (see
    ``environment.editable``); ``fork``: a package that is not on PyPI (see ``environment.forks``); ``run``: a shell
    command in the checkout with the environment's ``bin`` first on ``PATH``. ``cwd`` is relative to the checkout.
    """

    source: str
    torch: bool = False
    pip: Optional[str] = None
    requirements: Optional[str] = None
    editable: Optional[str] = None
    fork: Optional[str] = None
    run: Optional[str] = None
    exclude: tuple[str, ...] = ()
    no_deps: bool = False
    cwd: str = "."
    optional: bool = False
    note: str = ""

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
    url: Optional[str] = None
    ref: Optional[str] = None
    note: str = ""


@dataclass(frozen=True)
class Environment:
    """How upstream builds the model's Python environment, as ordered steps (see :class:`Step`)."""

    python: Optional[str]
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
    key: Optional[str] = None
    hf_cache: bool = False  # downloaded into the Hugging Face cache (a run-time hub fetch served offline)
    hub: str = "huggingface"
    revision: Optional[str] = None
    files: tuple[str, ...] = ()
    file: Optional[str] = None
    into: str = ""
    prefix: str = ""
    gated: Optional[bool] = None
    size_gb: Optional[float] = None
    required: bool = True
    when: Optional[str] = None
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
    flag: Optional[str] = None
    env: Optional[str] = None

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
    switch: Optional[OverlaySwitch] = None
    writer_call: Optional[str] = None
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
    redirect_flag: Optional[str] = None


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
    fps_flag: Optional[str] = None
    fps_env: Optional[str] = None

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
    model_fov_deg: Optional[tuple[float, float]] = None
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
    stated_gb: Optional[float] = None
    estimate_gb: Optional[str] = None


@dataclass(frozen=True)
class License:
    code: str
    weights: str
    source: str


@dataclass(frozen=True)
class CheckpointEntry:
    """A path the loader opens, reached through config key ``key``: ``kind`` file | dir | path, the ``files``
    (relative paths or glob patterns) inside a folder, the ``suffix`` a file must have, and ``when`` (a config field
    that must be true for upstream to open it)."""

    key: str
    kind: str
    source: str
    files: tuple[str, ...] = ()
    suffix: Optional[str] = None
    when: Optional[str] = None
    flag: Optional[str] = None
    env: Optional[str] = None
    format: Optional[str] = None
    note: str = ""

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


#: section -> (type, required). ``env_vars``, ``seeds``, ``defaults_differ`` ... are lists of the given type.
_SECTIONS: dict[str, tuple[Any, bool]] = {
    "environment": (Environment, True), "weights": (tuple[Weight, ...], True), "env_vars": (tuple[EnvVar, ...], True),
    "hub_fetches": (tuple[HubFetch, ...], True), "writer": (Writer, True), "seeds": (tuple[SeedFact, ...], True),
    "intrinsics": (Intrinsics, True), "defaults_differ": (tuple[DefaultDiffers, ...], True), "gpus": (Gpus, True),
    "gpu_memory": (GpuMemory, True), "license": (License, True),
    "checkpoint": (tuple[CheckpointEntry, ...], True),
}
#: top-level keys that hold other facts (validated where they are used: flags by :func:`check_args`, ...)
_OTHER_KEYS = {"model", "repo", "commit", "subdir", "note", "provenance", "entry", "env", "devices", "call_sites",
               "output", "canvas", "imports", "literals", "rules", "captions", "launch_example", "hardcoded", "mode"}


def _is_provenance(key: str) -> bool:
    return isinstance(key, str) and key.endswith(_PROVENANCE_SUFFIXES)


def _coerce(tp: Any, value: Any, model: str, where: str) -> Any:
    """``value`` checked against the type hint ``tp`` (dataclasses, tuples, dicts, Optional, Any, scalars)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union:
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, model, where)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, model, where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ContractSchemaError(model, where, f"must be a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v, model, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ContractSchemaError(model, where, f"must have {len(args)} items")
        return tuple(_coerce(a, v, model, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ContractSchemaError(model, where, f"must be a mapping, got {type(value).__name__}")
        return {str(k): _coerce(args[1], v, model, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ContractSchemaError(model, where, f"must be a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ContractSchemaError(model, where, f"must be an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ContractSchemaError(model, where, f"must be true or false, got {value!r}")
        return value
    if tp is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a number written as a plain scalar in a text fact (``ours: 3``)
        if not isinstance(value, str):
            raise ContractSchemaError(model, where, f"must be text, got {type(value).__name__} {value!r}")
        return value
    raise TypeError(f"schema type {tp!r} is not modelled")  # a bug in this module, not in a contract


def _build(cls: type, data: Any, model: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise ContractSchemaError(model, where, f"must be a mapping with keys {[f.name for f in dataclasses.fields(cls)]}"
                                  f", got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields and not _is_provenance(key):
            raise ContractSchemaError(model, f"{where}.{key}", f"unknown key; allowed: {sorted(fields)} (free text goes "
                                      "under a key ending in _source or _note)")
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
                raise ContractSchemaError(model, f"{where}.{name}", "required")
            continue
        kwargs[name] = _coerce(hints[name], data[name], model, f"{where}.{name}")
    obj = cls(**kwargs)
    if hasattr(obj, "check"):
        obj.check(model, where)
    for key, value in data.items():
        if _is_provenance(key) and not isinstance(value, str):
            raise ContractSchemaError(model, f"{where}.{key}", "provenance is text")
    return obj


def validate(raw: dict[str, Any], model: str) -> dict[str, Any]:
    """The typed sections of a contract mapping; raises :class:`ContractSchemaError` naming the model and key."""
    if not isinstance(raw, dict):
        raise ContractSchemaError(model, "<top>", "must be a mapping")
    for key in ("model", "repo", "commit"):
        if not isinstance(raw.get(key), str) or not raw.get(key):
            raise ContractSchemaError(model, key, "required text")
    if raw["model"] != model:
        raise ContractSchemaError(model, "model", f"{raw['model']!r} is not the file's model {model!r}")
    if not re.fullmatch(r"[0-9a-f]{40}", raw["commit"]):
        raise ContractSchemaError(model, "commit", "the full 40-hex commit")
    for key in raw:
        if key not in _SECTIONS and key not in _OTHER_KEYS and not _is_provenance(key):
            raise ContractSchemaError(model, key, f"unknown section; known: {sorted({*_SECTIONS, *_OTHER_KEYS})}")
    typed = {}
    for key, (tp, required) in _SECTIONS.items():
        if key not in raw:
            if required:
                raise ContractSchemaError(model, key, "required section")
            continue
        typed[key] = _coerce(tp, raw[key], model, key)
    entry = raw.get("entry")
    if not isinstance(entry, dict) or not isinstance(entry.get("script"), str):
        raise ContractSchemaError(model, "entry.script", "required: the script command.sh runs")
    for name, spec in (entry.get("flags") or {}).items():
        if not isinstance(spec, dict) or not spec.get("source"):
            raise ContractSchemaError(model, f"entry.flags.{name}.source", "every flag cites upstream")
    for sp in entry.get("sys_path", []) or []:
        if not isinstance(sp, dict) or not {"path", "source"} <= set(sp):
            raise ContractSchemaError(model, "entry.sys_path", "items are {path, source}: folders upstream itself "
                                      "puts on sys.path (relative to the checkout)")
    for name, spec in (raw.get("env") or {}).items():
        if not isinstance(spec, dict) or not spec.get("source"):
            raise ContractSchemaError(model, f"env.{name}.source", "every variable cites upstream")
    for section in ("output", "canvas"):
        if not isinstance(raw.get(section), dict) or not raw[section].get("source"):
            raise ContractSchemaError(model, f"{section}.source", "required")
    imports = []
    for i, item in enumerate(raw.get("imports") or []):
        imports.append(ImportProbe(module=item) if isinstance(item, str) else
                       _build(ImportProbe, item, model, f"imports[{i}]"))
    typed["imports"] = tuple(imports)
    for i, w in enumerate(typed["weights"]):
        keys = {c.key for c in typed["checkpoint"]} | {"upstream_dir"}
        if w.key is not None and w.key not in keys:
            raise ContractSchemaError(model, f"weights[{i}].key", f"{w.key!r} is not a checkpoint key ({sorted(keys)})")
    for i, h in enumerate(typed["hub_fetches"]):
        keys = {c.key for c in typed["checkpoint"]} | {"upstream_dir"}
        if "file" in h.avoided_by and h.avoided_by["file"][0] not in keys:
            raise ContractSchemaError(model, f"hub_fetches[{i}].avoided_by.file", f"the key must be one of {sorted(keys)}")
        if "import" in h.avoided_by and h.avoided_by["import"] not in {m.module for m in imports}:
            raise ContractSchemaError(model, f"hub_fetches[{i}].avoided_by.import", "the module must be in imports "
                                      "(the readiness probe imports it)")
    return typed


@dataclass(frozen=True)
class Contract:
    """One model's upstream facts (see the module docstring). ``raw`` keeps the whole YAML mapping; the audited
    sections are typed (:class:`Environment`, :class:`Weight`, :class:`Writer`, ...) and validated at load."""

    model: str
    repo: str
    commit: str
    raw: dict[str, Any] = field(default_factory=dict)
    typed: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def entry(self) -> dict[str, Any]:
        return self.raw.get("entry", {})

    @property
    def flags(self) -> dict[str, dict[str, Any]]:
        return self.entry.get("flags", {}) or {}

    @property
    def env(self) -> dict[str, dict[str, Any]]:
        return self.raw.get("env", {}) or {}

    @property
    def call_sites(self) -> dict[str, dict[str, Any]]:
        return self.raw.get("call_sites", {}) or {}

    @property
    def output(self) -> dict[str, Any]:
        return self.raw.get("output", {}) or {}

    @property
    def canvas(self) -> dict[str, Any]:
        return self.raw.get("canvas", {}) or {}

    @property
    def checkpoint(self) -> tuple[CheckpointEntry, ...]:
        return self.typed["checkpoint"]

    @property
    def imports(self) -> tuple[ImportProbe, ...]:
        return self.typed["imports"]

    @property
    def literals(self) -> dict[str, dict[str, Any]]:
        return self.raw.get("literals", {}) or {}

    @property
    def environment(self) -> Environment:
        return self.typed["environment"]

    @property
    def weights(self) -> tuple[Weight, ...]:
        return self.typed["weights"]

    @property
    def env_vars(self) -> tuple[EnvVar, ...]:
        return self.typed["env_vars"]

    @property
    def hub_fetches(self) -> tuple[HubFetch, ...]:
        return self.typed["hub_fetches"]

    @property
    def writer(self) -> Writer:
        return self.typed["writer"]

    @property
    def seeds(self) -> tuple[SeedFact, ...]:
        return self.typed["seeds"]

    @property
    def intrinsics(self) -> Intrinsics:
        return self.typed["intrinsics"]

    @property
    def defaults_differ(self) -> tuple[DefaultDiffers, ...]:
        return self.typed["defaults_differ"]

    @property
    def gpus(self) -> Gpus:
        return self.typed["gpus"]

    @property
    def gpu_memory(self) -> GpuMemory:
        return self.typed["gpu_memory"]

    @property
    def license(self) -> License:
        return self.typed["license"]

    @property
    def sys_path(self) -> list[str]:
        """Folders (relative to the checkout) upstream's own code puts on ``sys.path`` before importing itself."""
        return [str(sp["path"]) for sp in self.entry.get("sys_path", []) or []]


def available(directory: Optional[Path] = None) -> list[str]:
    """Model names that have a contract file."""
    return sorted(p.stem for p in Path(directory or CONTRACT_DIR).glob("*.yaml"))


def load(model: str, directory: Optional[Path] = None) -> Contract:
    """The validated contract of ``model`` (``adapters/contracts/<model>.yaml``, or ``<directory>/<model>.yaml``).
    Raises :class:`ContractSchemaError` (naming the model and key) when a section breaks the schema."""
    path = Path(directory or CONTRACT_DIR) / f"{model}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no upstream contract for model {model!r} ({path}); available: {available(directory)}")
    key = (str(path), path.stat().st_mtime_ns)
    hit = _LOADED.get(key)
    if hit is None:
        raw = yaml.safe_load(path.read_text()) or {}
        typed = validate(raw, model)
        hit = _LOADED[key] = Contract(model=model, repo=raw.get("repo", ""), commit=raw.get("commit", ""), raw=raw,
                                      typed=typed)
    return hit


_LOADED: dict[tuple[str, int], Contract] = {}


def overlay_violations(contract: Contract, args: list[str], env: dict[str, str], writer_shims: set[str]) -> list[str]:
    """Why a launch would leave an overlay in the written frames (empty: none would be).

    An overlay that is on by default must be switched off with upstream's own switch (the flag or variable with
    its ``off`` value), or its ``writer_call`` must be replaced by a shim (``writer_shims``: the functions the
    launch's shim replaces) in a process the shim reaches: not when a flag in ``writer.spawned_with`` moves the
    writer into a spawned worker. An overlay that is off by default must not be switched on."""
    out = []
    spawned = [f for f in contract.writer.spawned_with if f in args]
    for ov in contract.writer.overlays:
        value = None
        if ov.switch and ov.switch.flag and ov.switch.flag in args:
            i = args.index(ov.switch.flag)
            value = args[i + 1] if i + 1 < len(args) else ""
        elif ov.switch and ov.switch.env and ov.switch.env in env:
            value = env[ov.switch.env]
        if ov.default == "off":
            if value is not None and value != ov.switch.off:  # type: ignore[union-attr]
                out.append(f"{ov.name}: {ov.switch.flag or ov.switch.env}={value} turns it on ({ov.source})")  # type: ignore[union-attr]
            continue
        if ov.switch and value == ov.switch.off:
            continue
        if ov.writer_call and ov.writer_call in writer_shims and not spawned:
            continue
        how = (f"set {ov.switch.flag or ov.switch.env} {ov.switch.off}" if ov.switch else
               f"replace {ov.writer_call} with a shim in the process that writes")
        why = f" ({', '.join(spawned)} moves the writer into a spawned worker)" if spawned and ov.writer_call else ""
        out.append(f"{ov.name} ({ov.what}) stays in every frame{why}: {how} ({ov.source})")
    return out


def hub_fetch_violations(contract: Contract, args: list[str]) -> list[str]:
    """Run-time downloads a compiled launch does not avoid by its flags (``avoided_by.flag``). The other kinds
    depend on the machine and are checked by readiness."""
    return [f"{h.repo} ({h.what}) is fetched at run time ({h.source}): the launch must pass {h.avoided_by['flag']}"
            for h in contract.hub_fetches if "flag" in h.avoided_by and h.avoided_by["flag"] not in args]


# -- flags -> a real argparse parser ---------------------------------------------------------------------------


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print and exit; the tests want the reason
        raise ContractViolation(message)


def _bool_text(values: list[str]):
    accepted = {v.lower() for v in values}

    def parse(text: str) -> bool:
        if text.lower() not in accepted:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {sorted(accepted)}")
        return text.lower() in {"true", "1", "yes", "on", "y", "t"}

    return parse


def _type(spec: dict[str, Any]):
    t = spec.get("type")
    if t in (None, "str", "Path"):
        return str
    if t == "int":
        return int
    if t == "float":
        return float
    if t == "bool_text":
        return _bool_text(spec.get("accepts", ["true", "false", "1", "0", "yes", "no"]))
    raise ValueError(f"contract type {t!r} is not modelled (use str, Path, int, float, bool_text)")


def build_parser(flags: dict[str, dict[str, Any]], prog: str, allow_abbrev: bool = True,
                 one_of_required: Optional[list[list[str]]] = None) -> argparse.ArgumentParser:
    """An ``argparse`` parser with exactly the recorded flags (required, type, choices, action, nargs)."""
    p = _RaisingParser(prog=prog, allow_abbrev=allow_abbrev, add_help=False)
    grouped = {f for group in (one_of_required or []) for f in group}
    groups = [p.add_mutually_exclusive_group(required=True) for _ in (one_of_required or [])]
    for name, spec in flags.items():
        target: Any = p
        for g, members in zip(groups, one_of_required or []):
            if name in members:
                target = g
        names = [name, *spec.get("aliases", [])]
        kw: dict[str, Any] = {}
        action = spec.get("action")
        if action in ("store_true", "store_false"):
            kw["action"] = action
        else:
            kw["type"] = _type(spec)
            if spec.get("choices") is not None:
                kw["choices"] = [kw["type"](c) if kw["type"] in (int, float) else c for c in spec["choices"]]
            if spec.get("nargs") is not None:
                kw["nargs"] = spec["nargs"]
                if spec["nargs"] == "?":
                    kw["const"] = spec.get("const")
        if spec.get("required") and name not in grouped:
            kw["required"] = True
        target.add_argument(*names, dest=name.lstrip("-").replace("-", "_"), **kw)
    return p


# -- command.sh -> (env, argv) -------------------------------------------------------------------------------


def parse_command_sh(text: str) -> tuple[dict[str, str], list[str]]:
    """The exported environment and the launch argv of a harness ``command.sh``."""
    env: dict[str, str] = {}
    body: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("set ") or s.startswith("cd "):
            continue
        if s.startswith("export "):
            k, _, v = s[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
            continue
        body.append(s)
    if len(body) != 1:
        raise ContractViolation(f"command.sh should hold one launch line; found {len(body)}")
    return env, shlex.split(body[0])


@dataclass
class ParsedLaunch:
    """A ``command.sh`` split into its parts: environment, launcher prefix, shim options, upstream arguments."""

    env: dict[str, str]
    launcher: list[str]
    shim: Optional[str]
    shim_args: list[str]
    script: str
    args: list[str]


def split_launch(text: str, script: str) -> ParsedLaunch:
    """Split ``command.sh`` around the upstream ``script`` (relative to the checkout)."""
    env, argv = parse_command_sh(text)
    if script not in argv:
        raise ContractViolation(f"command.sh does not run upstream's entry script {script!r}: {argv}")
    i = argv.index(script)
    head, args = argv[:i], argv[i + 1:]
    shim, shim_args, launcher = None, [], head
    if "--" in head:
        j = head.index("--")
        k = next((n for n, a in enumerate(head[:j]) if a.endswith(".py") and "/adapters/" in a), None)
        if k is None:
            raise ContractViolation(f"command.sh has '--' but no harness shim before it: {head}")
        shim, shim_args, launcher = head[k], head[k + 1:j], head[:k]
    return ParsedLaunch(env, launcher, shim, shim_args, script, args)


def check_args(contract: Contract, args: list[str]) -> argparse.Namespace:
    """Parse upstream arguments with the recorded flags: unknown, ambiguous, abbreviated or missing flags, bad
    choices and bad types all raise :class:`ContractViolation`."""
    entry = contract.entry
    flags = contract.flags
    known = {n for name, spec in flags.items() for n in (name, *spec.get("aliases", []))}
    for a in args:
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name not in known:
                raise ContractViolation(
                    f"{contract.model}: flag {name} is not defined by {entry.get('script')} at {contract.commit[:12]} "
                    f"(exact names only; upstream flags: {sorted(known)})")
    parser = build_parser(flags, entry.get("script", contract.model), entry.get("allow_abbrev", True),
                          entry.get("one_of_required"))
    return parser.parse_args(args)


def check_env(contract: Contract, env: dict[str, str]) -> None:
    """Every exported variable is read upstream (or is the harness's own device assignment), required ones are
    set, and values respect the recorded choices."""
    known = contract.env
    for k, v in env.items():
        if k in HARNESS_ENV:
            continue
        if k not in known:
            raise ContractViolation(f"{contract.model}: exports {k}, which upstream never reads "
                                    f"(read: {sorted(known)})")
        spec = known[k]
        if spec.get("choices") is not None and v not in [str(c) for c in spec["choices"]]:
            raise ContractViolation(f"{contract.model}: {k}={v!r} is not one of {spec['choices']} ({spec.get('source')})")
        if spec.get("type") in ("int", "float"):
            try:
                (int if spec["type"] == "int" else float)(v)
            except ValueError:
                raise ContractViolation(f"{contract.model}: {k}={v!r} is not a {spec['type']}") from None
    for k, spec in known.items():
        if spec.get("required") and k not in env:
            raise ContractViolation(f"{contract.model}: {k} must be exported ({spec.get('source')})")
