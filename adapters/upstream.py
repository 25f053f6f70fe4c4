"""Shared machinery of adapters whose model runs in its own environment (an upstream checkout).

``compile`` writes upstream's own input files plus ``command.sh``, the exact launch command, and refuses a launch
that contradicts the model's contract (an overlay left on, a run-time download not avoided). ``readiness`` checks
that the checkout, every listed weight and the Python environment exist (naming the config key to set when not).
``generate`` clears what an earlier launch left, runs the command as a subprocess with captured logs, a timeout and
the assigned GPUs, finds upstream's output video, checks it against the contract (:mod:`adapters.conformance`:
fps, frame count under the alignment rule, resolution, first frame, overlays) and brings its frames into the
harness layout (the conditioning canvas in front when upstream drops the anchor), keeping the original as
``upstream_video.mp4``.

Poses follow :mod:`trajectories.conventions` (OpenCV camera-to-world, world = frame 0, +yaw right, +pitch up).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Mapping, Optional, Sequence, Union

import numpy as np
import pydantic.dataclasses
from pydantic import StrictBool, StrictFloat, StrictInt, StrictStr

from harness.sections import Fix

from .base import (CONFIG, Adapter, Finding, FrameSink, GeneratedVideo, ItemRequest, ModelConfig, ModelConfigError,
                   NativeControls)

if TYPE_CHECKING:
    from harness.cases import Case
    from harness.context import ContextPolicy

    from .contracts import Contract, ImportProbe


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


_HEX40 = re.compile(r"[0-9a-f]{40}")


class UpstreamRunError(RuntimeError):
    """The upstream command failed, timed out, or produced no valid video. ``root_cause``: the exception line
    found in ``upstream.log`` (None when there is none), recorded in ``meta.json``. ``meta``: the generation facts
    measured before the failure (the conformance residuals), recorded under ``generation`` in ``meta.json``."""

    def __init__(self, message: str, root_cause: Optional[str] = None, meta: Optional[dict[str, Any]] = None):
        super().__init__(message)
        self.root_cause = root_cause
        self.meta = meta


#: An exception line as Python prints it (``pkg.mod.NameError: text``), optionally behind torchrun's rank prefix.
_EXC_LINE = re.compile(r"^(?:\[(?:rank|default)\d*\]:\s*)?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*"
                       r"(?:Error|Exception|Exit|Interrupt|Failure|Warning)\b(?::.*)?)$")
#: Launcher wrappers that report a child's failure rather than cause one.
_WRAPPER_EXC = ("ChildFailedError", "torch.distributed.elastic")


def root_cause(log_text: str) -> Optional[str]:
    """The first exception line of the first traceback in an upstream log, skipping torchrun's own wrapper errors.

    torchrun prints every rank's traceback and then its own ``ChildFailedError`` summary; the cause is the first
    rank's exception. Returns None when the log holds no Python exception (a crash, a kill, a shell error).
    """
    lines = [x.rstrip() for x in log_text.splitlines()]
    in_tb = False
    for line in lines:
        bare = re.sub(r"^\[(?:rank|default)\d*\]: ?", "", line)  # the prefix and its one space: indentation stays
        if bare.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb and not bare.startswith(" "):
            m = _EXC_LINE.match(line)
            if m and not any(w in m.group(1) for w in _WRAPPER_EXC):
                return m.group(1).strip()
            if m:
                in_tb = False
    for line in lines:  # no traceback: a bare error line (e.g. SystemExit text printed by a launcher)
        m = _EXC_LINE.match(line)
        if m and not any(w in m.group(1) for w in _WRAPPER_EXC):
            return m.group(1).strip()
    return None


#: a ``model.env`` value as Hydra reads it (``NUM: 98765`` is a number), kept as given in the recorded config and
#: passed to the launch as its text
EnvValue = Union[StrictStr, StrictInt, StrictFloat, StrictBool]

@dataclass(frozen=True, kw_only=True)
class UpstreamConfig(ModelConfig):
    """Paths and launch settings shared by upstream models (all user-set; see ``conf/local``).

    upstream_dir: the model's repository checkout. checkpoint: its weights (file or folder). python: the Python
    executable of the model's environment. launch: ``torchrun`` (``python -m torch.distributed.run
    --nproc_per_node <gpus_per_job>``) or ``python``. devices: GPU ids for ``CUDA_VISIBLE_DEVICES`` (default
    ``0..gpus_per_job-1``). env: extra environment variables. timeout_s: wall-clock limit of one rollout.
    weights_hint: how to get the weights (printed when they are missing). sampling_steps, prompt_suffix,
    upstream_repo / upstream_commit: recorded facts of the upstream release the adapter targets.
    upstream_commit: the full 40-hex commit the adapter and its contract were checked against (``upstream_subdir``
    when the model lives in a folder of the repository). vae_worker_gpus: GPUs of ``gpus_per_job`` that upstream
    gives to a separate VAE worker instead of a torchrun rank. conformance_warn: conformance checks
    (:data:`adapters.conformance.CHECKS`) that are only recorded for this model instead of failing the item.
    first_frame_min_ncc: the correlation upstream's first frame must have with the conditioning canvas.

    ``fps`` must equal what upstream writes (the contract's ``writer.fps``): checked when the adapter is built.
    The frames upstream writes and which pose its frame 0 shows come from the contract too (``writer.first_pose``).
    """

    upstream_dir: Optional[str] = None
    checkpoint: Optional[str] = None
    python: Optional[str] = None
    launch: Annotated[Literal["torchrun", "python"], Fix("use 'torchrun' or 'python'")] = "torchrun"
    devices: Optional[str] = None
    env: Annotated[dict[str, EnvValue], Fix("a mapping NAME -> value (a string or a number)")] = field(
        default_factory=dict)
    env_plain: tuple[str, ...] = ()  # names of ``env`` that are plain settings; every other value is a secret
    timeout_s: float = 4 * 3600.0
    weights_hint: str = ""
    sampling_steps: int = 4
    upstream_repo: str = ""
    upstream_commit: str = ""
    upstream_subdir: str = ""
    vae_worker_gpus: int = 0
    fps_tolerance: float = 0.05
    conformance_warn: tuple[str, ...] = ()
    first_frame_min_ncc: float = 0.6

    def validate(self) -> None:
        super().validate()
        if self.upstream_commit and not _HEX40.fullmatch(self.upstream_commit):
            raise ModelConfigError(f"model.upstream_commit={self.upstream_commit!r}: give the full 40-hex commit of "
                                   f"{self.upstream_repo or 'the upstream repository'} (folders go in model.upstream_subdir)")
        if not 0 <= self.vae_worker_gpus < max(1, self.gpus_per_job):
            raise ModelConfigError(f"model.vae_worker_gpus={self.vae_worker_gpus}: must leave at least one torchrun rank "
                                   f"of model.gpus_per_job={self.gpus_per_job}")
        from adapters.conformance import CHECKS

        for name in self.conformance_warn:
            if name not in CHECKS:
                raise ModelConfigError(f"model.conformance_warn: {name!r} is not a check; use some of {list(CHECKS)}")

    @property
    def ranks(self) -> int:
        """torchrun processes of one job: ``gpus_per_job`` minus the GPUs upstream reserves for a VAE worker."""
        return max(1, self.gpus_per_job - self.vae_worker_gpus)


@dataclass
class LaunchSpec:
    """One upstream invocation: script (relative to the checkout) or module, its arguments, extra environment,
    the working directory and where the video will appear (a path, or a glob relative to ``out_dir``).
    ``replaces``: the upstream functions (``module.function``) the shim replaces (its module's ``REPLACES``)."""

    script: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    output: Optional[str] = None
    output_glob: str = "**/*.mp4"
    out_dir: Optional[str] = None
    wrapper: Optional[str] = None  # a shim script (absolute path) that runs the upstream script after patching
    wrapper_args: list[str] = field(default_factory=list)  # the shim's own options (before "--")
    interpreter: Optional[list[str]] = None  # e.g. ["bash"] for a shell launcher (no torchrun/python prefix)
    replaces: tuple[str, ...] = ()


def _git_head(path: str) -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def hf_cache_dir(env: Mapping[str, str]) -> Path:
    """The Hugging Face hub cache a process with environment ``env`` uses (``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``), the rule of
    ``huggingface_hub.constants``."""
    if env.get("HF_HUB_CACHE"):
        return Path(os.path.expanduser(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        return Path(os.path.expanduser(env["HF_HOME"])) / "hub"
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def hf_cache_has(repo: str, env: Mapping[str, str]) -> bool:
    """Whether the hub cache holds a snapshot of model ``repo`` with at least one file (what ``from_pretrained``
    reads with ``HF_HUB_OFFLINE=1``)."""
    snaps = hf_cache_dir(env) / f"models--{repo.replace('/', '--')}" / "snapshots"
    return snaps.is_dir() and any(p.is_file() or p.is_symlink() for d in snaps.iterdir() for p in d.rglob("*"))


_GLOB = re.compile(r"[*?\[]")


def missing_files(root: Path, files: tuple[str, ...]) -> list[str]:
    """Entries of ``files`` (relative paths or glob patterns) with nothing at them under ``root``."""
    return [f for f in files if not (any(root.glob(f)) if _GLOB.search(f) else (root / f).exists())]


class UpstreamAdapter(Adapter):
    """Base of the nine upstream-model adapters. Subclasses implement :meth:`write_native` and :meth:`launch` and
    declare the context policies their launch realises (``contexts``; only ``native`` unless they say more).

    ``always_shimmed``: every launch runs through the adapter's ``runner.py`` shim (which puts the checkout on
    ``sys.path``); the readiness probe imports as that launch does."""

    config: UpstreamConfig
    contexts: ClassVar[tuple[str, ...]] = ("native",)
    unsupported_reasons = {"fullkv": "no harness policy is wired to this upstream", "sliding": "no harness policy is "
                           "wired to this upstream", "fov": "no harness policy is wired to this upstream"}
    always_shimmed: ClassVar[bool] = False

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        contract = self.contract()
        fixed = contract is not None and not (contract.writer.fps_flag or contract.writer.fps_env)
        if contract is not None and fixed and abs(float(self.config.fps) - contract.writer.fps) > 1e-9:
            src = contract.raw.get("writer", {}).get("fps_source", "")
            raise ModelConfigError(
                f"model.fps={self.config.fps:g}: upstream writes {contract.writer.fps:g} fps for {self.config.name} "
                f"(adapters/{self.config.name}/contract.yaml writer.fps; {src.split(';')[0].strip()}); set "
                f"fps: {contract.writer.fps:g} in conf/model/{self.config.name}.yaml")

    # -- context ----------------------------------------------------------------------------------------------
    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        """The knobs the launch gives upstream for ``policy``, in upstream's own units (flags, config keys, the shim's
        selection), with the budget they amount to. Adapters that run more than ``native`` override this."""
        if policy.name != "native":
            raise ModelConfigError(f"{type(self).__name__} declares context={policy.name} but does not say what "
                                   "upstream is told for it (override told_upstream)")
        return {"passed": "nothing: upstream's own memory at its defaults"}

    def context_told(self, policy: ContextPolicy) -> dict[str, Any]:
        """The record of :meth:`told_upstream`, the declared identity, and the ``trained_regime`` caveats of the
        contract that apply to ``policy`` (one line each, with upstream's file and line; the report shows them)."""
        rec = self._context_record(policy, self.told_upstream(policy))
        c = self.contract()
        caveats = [r.line() for r in (c.trained_regime if c else ()) if not r.policies or policy.name in r.policies]
        if caveats:
            rec["trained_regime"] = caveats
        return rec

    def same_launches(self) -> Mapping[str, tuple[str, str]]:
        """The contract's ``policies.same_launch`` whose ``when`` field this config sets, each ``why`` with the upstream
        line that makes the two launches one (a model without a contract: :attr:`same_launch`)."""
        c = self.contract()
        if c is None or c.policies is None:
            return self.same_launch
        return {s.policy: (s.same_as, f"{s.why} ({s.source})") for s in c.policies.same_launch
                if not s.when or getattr(self.config, s.when, False)}

    def native_args(self) -> list[str]:
        """The memory flags of upstream's documented launch (the contract's ``policies.native.args``, in order; a
        switch without a value); empty when it passes none."""
        c = self.contract()
        if c is None or c.policies is None:
            return []
        out: list[str] = []
        for flag, value in c.policies.native.args.items():
            out += [flag, value] if value != "" else [flag]
        return out

    # -- compile ----------------------------------------------------------------------------------------------
    @abstractmethod
    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        """Write upstream's input files into ``req.controls_dir``; return them with the decoded path and meta."""

    @abstractmethod
    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        """The upstream command for this item."""

    @abstractmethod
    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        """Re-read the native files and return the (T,4,4) path they convey (OpenCV c2w, world = frame 0,
        scene units), with the model's own conventions: the achieved side of the residual."""

    #: whether :meth:`write_native` reads its ``image`` argument; False lets a compile skip decoding and resizing the
    #: conditioning image when its canvas file was already written in this process (it gets None then)
    uses_canvas_image: ClassVar[bool] = True

    def write_canvas(self, dst: Path, case: Case, params: tuple[int, ...] = ()) -> None:
        """Write the case's canvas to ``dst`` (PNG / JPEG by suffix, ``cv2.imwrite`` params), encoded once per
        process and image and copied for later items (:func:`adapters.memo.write_canvas_file`)."""
        from adapters.memo import write_canvas_file

        image = self._image_identity(case)
        ident = None if image[0] == "unreadable" else (image, self.config.height, self.config.width)
        write_canvas_file(dst, ident, lambda: self.canvas_image_and_K(case)[0], params)

    def compile(self, req: ItemRequest) -> NativeControls:
        if self.uses_canvas_image:
            image, K = self.canvas_image_and_K(req.case)
        else:
            image, K = None, self.canvas_K(req.case)
        d = req.controls_dir
        d.mkdir(parents=True, exist_ok=True)
        self.write_canvas(d / "image.png", req.case)
        from harness.io import write_text

        # the model's input, byte for byte (a case's prompt is not a credential): contained, a symlink replaced
        write_text(d / "prompt.txt", req.case.prompt + "\n", scrubbed=True)
        controls = self.write_native(req, image, K)
        controls.files.setdefault("image.png", str(d / "image.png"))
        controls.files.setdefault("prompt.txt", str(d / "prompt.txt"))
        if controls.decoded_c2w is None:
            controls.decoded_c2w = self.decode(d, req)
        spec = self.launch(req, controls)
        argv, env = self.command_argv(spec)
        problems = self.contract_problems(spec, env)
        if problems:  # a launch that would break upstream's recorded behaviour is never written
            raise ModelConfigError(f"{self.config.name}: the launch breaks adapters/{self.config.name}/contract.yaml:\n"
                                   + "\n".join(f"  - {p}" for p in problems))
        controls.command = self.command_text(argv, env, spec)
        from harness.io import write_text

        write_text(d / "command.sh", controls.command)
        from harness.io import file_mode

        os.chmod(d / "command.sh", file_mode(executable=True))
        controls.files["command.sh"] = str(d / "command.sh")
        controls.meta["context"] = self.context_told(req.context)
        controls.meta.setdefault("translation_scale", self.config.translation_scale.to_dict())
        controls.meta.setdefault("upstream", {"repo": self.config.upstream_repo, "commit": self.config.upstream_commit})
        self._record_contract_facts(controls, K)
        return controls

    def contract_problems(self, spec: LaunchSpec, env: Mapping[str, str]) -> list[str]:
        """What in this launch contradicts the contract's writer and hub facts: an overlay left on, a run-time
        download not avoided, a checkout write not redirected, a post-processing value that is not ours."""
        from adapters import contracts

        c = self.contract()
        if c is None:
            return []
        args = list(spec.args)
        out = contracts.overlay_violations(c, args, dict(env), set(spec.replaces))
        out += contracts.hub_fetch_violations(c, args)
        wr = c.writer
        if wr.fps_flag:  # the written rate follows the flag: it must carry model.fps
            got = args[args.index(wr.fps_flag) + 1] if wr.fps_flag in args else None
            if got is None or abs(float(got) - float(self.config.fps)) > 1e-9:
                out.append(f"upstream writes at {wr.fps_flag}: pass {wr.fps_flag} {self.config.fps:g} (model.fps)")
        if wr.fps_env and (wr.fps_env not in env or abs(float(env[wr.fps_env]) - float(self.config.fps)) > 1e-9):
            out.append(f"upstream writes at ${wr.fps_env}: export {wr.fps_env}={self.config.fps:g} (model.fps)")
        for w in c.writer.checkout_writes:
            if w.redirect_flag and w.redirect_flag not in args:
                out.append(f"upstream writes {w.path!r} into the checkout ({w.source}): pass {w.redirect_flag}")
        for pp in c.writer.postprocess:
            got = args[args.index(pp.flag) + 1] if pp.flag in args and args.index(pp.flag) + 1 < len(args) else None
            if got is None or float(got) != float(pp.ours):
                out.append(f"{pp.name}: pass {pp.flag} {pp.ours} explicitly (upstream's parser default is "
                           f"{pp.upstream_default}; {pp.source})")
        return out

    def _record_contract_facts(self, controls: NativeControls, K: np.ndarray) -> None:
        """Record the frame alignment and, where the case's K never reaches the model, the field-of-view error."""
        c = self.contract()
        if c is None:
            return
        w = c.writer
        controls.meta.setdefault("alignment", {
            "anchor_frame": w.anchor_frame, "first_pose": w.first_pose,
            "rule": ("item frame i = pose i; upstream's frames are brought in as written" if w.first_pose == 0 else
                     f"upstream's frame i shows pose i + {w.first_pose}; the conditioning canvas is put in front as "
                     "frame 0, so item frame i = pose i")})
        if c.intrinsics.model_fov_deg is not None:
            from trajectories.conventions import fov_from_intrinsics

            case = fov_from_intrinsics(K, self.config.width, self.config.height)
            model = tuple(float(x) for x in c.intrinsics.model_fov_deg)
            controls.meta["intrinsics"] = {"case_fov_deg": list(case), "model_fov_deg": list(model),
                                           "caveat": f"the case's K does not reach the model ({c.intrinsics.source})"}
            controls.meta["intrinsics_residual"] = {"hfov_error_deg": float(abs(model[0] - case[0])),
                                                    "vfov_error_deg": float(abs(model[1] - case[1]))}

    # -- the command ------------------------------------------------------------------------------------------
    def _python(self) -> str:
        return self.config.python or "python"

    def _devices(self) -> str:
        from harness.gpu_pool import current_devices

        pooled = current_devices()  # the GPUs the harness's pool assigned to this job (None outside the pool)
        if pooled is not None:
            return ",".join(pooled)
        if self.config.devices:
            return str(self.config.devices)
        return ",".join(str(i) for i in range(max(1, self.config.gpus_per_job)))

    def contract_env(self) -> dict[str, str]:
        """Variables the contract says every launch needs: ``HF_HUB_OFFLINE=1`` when a run-time hub fetch is served
        from the pre-filled cache (``hub_fetches[].avoided_by.offline_cache``)."""
        c = self.contract()
        if c is not None and any("offline_cache" in h.avoided_by for h in c.hub_fetches):
            return {"HF_HUB_OFFLINE": "1"}
        return {}

    def command_argv(self, spec: LaunchSpec) -> tuple[list[str], dict[str, str]]:
        """(argv, environment additions) of the launch, with the upstream checkout as working directory."""
        c = self.config
        script = spec.script
        if spec.wrapper:
            head = [spec.wrapper, *spec.wrapper_args, "--", script]
        else:
            head = [script]
        if spec.interpreter:
            argv = [*spec.interpreter, *head, *spec.args]
        elif c.launch == "torchrun":
            argv = [self._python(), "-m", "torch.distributed.run", "--standalone",
                    f"--nproc_per_node={c.ranks}", *head, *spec.args]
        else:
            argv = [self._python(), *head, *spec.args]
        env = {"CUDA_VISIBLE_DEVICES": self._devices(), **self.contract_env(), **{k: str(v) for k, v in c.env.items()},
               **spec.env}
        return argv, env

    def command_text(self, argv: list[str], env: dict[str, str], spec: LaunchSpec) -> str:
        cwd = self.workdir() or "<model.upstream_dir>"
        lines = [
            "#!/usr/bin/env bash",
            f"# {self.config.name}: the exact upstream launch for this item ({self.config.upstream_repo}"
            f"@{self.config.upstream_commit[:12]}{'/' + self.config.upstream_subdir if self.config.upstream_subdir else ''}"
            "). Generated by the harness; rerunnable by hand.",
            "set -euo pipefail",
            f"cd {shlex.quote(str(cwd))}",
        ]
        from harness.secrets import env_is_secret, shell_export

        # secrets stay ${NAME} references: model.env's values unless plain (model.env_plain), any secret-named one
        secret = {k for k in self.config.env if env_is_secret(k, self.config.env_plain)}
        lines += [shell_export(k, v, k in secret) for k, v in sorted(env.items())]
        # one line per flag with its values, so a reader can diff two items' commands
        groups: list[list[str]] = []
        for a in argv:
            if not groups or (a.startswith("-") and not _is_number(a)) or a.endswith(".py") or a.endswith(".sh"):
                groups.append([a])
            else:
                groups[-1].append(a)
        lines.append(" \\\n  ".join(" ".join(shlex.quote(x) for x in g) for g in groups))
        return "\n".join(lines) + "\n"

    # -- readiness ---------------------------------------------------------------------------------------------
    def workdir(self) -> Optional[str]:
        """The directory upstream runs in: the checkout, or its ``upstream_subdir`` folder."""
        c = self.config
        if not c.upstream_dir:
            return None
        return str(Path(c.upstream_dir) / c.upstream_subdir) if c.upstream_subdir else str(c.upstream_dir)

    def contract(self) -> Optional[Contract]:
        """This model's upstream contract (``adapters/<name>/contract.yaml``), or None for a model without one."""
        from adapters import contracts

        try:
            return contracts.load(self.config.name)
        except FileNotFoundError:
            return None

    def checkpoint_paths(self) -> dict[str, Optional[str]]:
        """Config key -> path, for every checkpoint entry of the contract (``checkpoint`` and model-specific keys)."""
        c = self.config
        return {k: getattr(c, k, None) for k in ("checkpoint", "upstream_dir")}

    def launch_env(self) -> dict[str, str]:
        """The environment a launch runs with (this process's, plus the launch additions)."""
        return {**os.environ, **self.command_argv(LaunchSpec(script="-", args=[]))[1]}

    def readiness(self, probe: bool = True) -> list[Finding]:
        """Everything that would stop a real launch, found at planning time, before any item runs.

        Checks the checkout (and warns when it is not at ``model.upstream_commit``), the model's Python, that it
        imports upstream's packages the way the launch runs, that every path the contract lists exists (files,
        suffixes, patterns; entries with ``when`` only when that config field is true), that upstream can write
        where it writes inside the checkout, that every run-time hub fetch is avoided (a local copy, or the cache
        with ``HF_HUB_OFFLINE=1``), and that the model's environment sees enough GPUs. ``probe=False`` skips the
        subprocess checks (tests, dry runs).
        """
        c = self.config
        out: list[Finding] = []
        hint = f" {c.weights_hint}" if c.weights_hint else ""
        if not c.upstream_dir:
            return [Finding("error", "model.upstream_dir",
                            f"not set for {c.name}: python -m harness setup model={c.name} (clones "
                            f"https://github.com/{c.upstream_repo.split(' ')[0]} at {c.upstream_commit}), or clone it "
                            f"yourself and set local.models.{c.name}.upstream_dir in conf/local/default.yaml "
                            f"(docs/real-models.md)")]
        if not Path(c.upstream_dir).is_dir():
            return [Finding("error", "model.upstream_dir", f"{c.upstream_dir!r} does not exist; point it at the checkout")]
        wd = self.workdir()
        assert wd is not None  # upstream_dir is set (checked above)
        if not Path(wd).is_dir():
            out.append(Finding("error", "model.upstream_subdir", f"{wd!r} does not exist in the checkout"))
        head = _git_head(c.upstream_dir)
        if c.upstream_commit and head and head != c.upstream_commit:
            out.append(Finding("warning", "model.upstream_commit",
                               f"the checkout is at {head[:12]}, the adapter and its contract were checked against "
                               f"{c.upstream_commit[:12]}: git -C {c.upstream_dir} checkout {c.upstream_commit}"))
        contract = self.contract()
        out += self._path_findings(contract, hint)
        if contract is not None:
            out += self._checkout_and_hub_findings(contract, out)
        if c.python and not (Path(c.python).exists() or shutil.which(c.python)):
            out.append(Finding("error", "model.python", f"{c.python!r} is not an executable; point it at the model's env"))
            return out
        if probe and not any(f.level == "error" for f in out):
            out += self.probe_environment(list(contract.imports) if contract else [])
        return out

    def _path_findings(self, contract: Optional[Contract], hint: str) -> list[Finding]:
        from adapters.contracts import CheckpointEntry

        c = self.config
        out: list[Finding] = []
        paths = self.checkpoint_paths()
        entries = contract.checkpoint if contract else (CheckpointEntry(key="checkpoint", kind="path", source=""),)
        for entry in entries:
            key = entry.key
            if entry.when and not getattr(c, entry.when, False):
                continue  # upstream opens it only with model.<when> on
            root = paths.get(key) if key in paths else getattr(c, key, None)
            if not root:
                out.append(Finding("error", f"model.{key}", f"not set for {c.name}.{hint} Set local.models.{c.name}.{key}"
                                   f" (or run python -m harness setup model={c.name})"))
                continue
            if not Path(root).exists():
                out.append(Finding("error", f"model.{key}", f"{root!r} does not exist.{hint}"))
                continue
            if entry.kind == "file" and not Path(root).is_file():
                out.append(Finding("error", f"model.{key}", f"{root!r} must be a file, not a folder ({entry.source})"))
            if entry.kind == "dir" and not Path(root).is_dir():
                out.append(Finding("error", f"model.{key}", f"{root!r} must be a folder ({entry.source})"))
            if entry.suffix and Path(root).is_file() and not str(root).endswith(entry.suffix):
                out.append(Finding("error", f"model.{key}", f"{root!r} must be a {entry.suffix} file ({entry.source})"))
            missing = missing_files(Path(root), entry.files)
            if missing:
                out.append(Finding("error", f"model.{key}", f"{root} lacks {', '.join(missing)}, which upstream loads "
                                   f"({entry.source}).{hint}"))
        return out

    def _checkout_and_hub_findings(self, contract: Contract, found: list[Finding]) -> list[Finding]:
        out: list[Finding] = []
        c = self.config
        wd = self.workdir()
        for w in contract.writer.checkout_writes:
            if not w.redirect_flag and wd and Path(wd).is_dir() and not os.access(wd, os.W_OK):
                out.append(Finding("error", "model.upstream_dir", f"upstream writes {w.path!r} inside the checkout "
                                   f"({w.source}) but {wd} is not writable"))
        paths = self.checkpoint_paths()
        flagged = {f.key for f in found}
        env = self.launch_env()
        for h in contract.hub_fetches:
            if "offline_cache" in h.avoided_by and not hf_cache_has(h.repo, env):
                out.append(Finding("error", "model.env", f"{h.repo} ({h.what}) is downloaded from the Hugging Face hub "
                                   f"at run time ({h.source}) and is not in the cache {hf_cache_dir(env)}: {h.fix}"))
            elif "file" in h.avoided_by:
                key, rel = h.avoided_by["file"]
                root = paths.get(key) if key in paths else getattr(c, key, None)
                if root and f"model.{key}" not in flagged and not (Path(root) / rel).exists():
                    out.append(Finding("error", f"model.{key}", f"{Path(root) / rel} is missing, so upstream would "
                                       f"download {h.repo} at run time ({h.source}): {h.fix}"))
        return out

    def probe_sys_path(self, script: str, shimmed: bool) -> list[str]:
        """The folders in front of ``sys.path`` when upstream's modules import, as the launch runs: the script's
        own folder (Python puts it first for ``python <script>``), the working directory when the harness shim
        runs the script (:func:`adapters.shim.run_upstream`), and what upstream's own code inserts (the
        contract's ``entry.sys_path``, relative to the checkout). Nothing else: the probe adds no ``PYTHONPATH``
        the launch does not have."""
        wd = self.workdir() or "."
        script_dir = os.path.dirname(os.path.abspath(os.path.join(wd, script)))
        front = [script_dir]
        if shimmed:
            front = [script_dir, os.path.abspath(wd)]
        c = self.contract()
        for rel in (c.sys_path if c else []):
            front.insert(0, os.path.abspath(os.path.join(self.config.upstream_dir or wd, rel)))
        return front

    def probe_environment(self, imports: Sequence[ImportProbe | str]) -> list[Finding]:
        """Run the model's Python once in the checkout, the way the launch runs it: import upstream's packages
        (:meth:`probe_sys_path`; modules marked ``needs_gpu`` only when a GPU is visible) and count visible GPUs."""
        import json as _json

        from adapters.contracts import ImportProbe

        c = self.config
        probes = [m if isinstance(m, ImportProbe) else ImportProbe(module=str(m)) for m in imports]
        contract = self.contract()
        script = (contract.entry.get("python_script") or contract.entry.get("script")) if contract else "-"
        front = self.probe_sys_path(script or "-", self.always_shimmed)
        code = ("import importlib, json, sys\n"
                f"sys.path[0:1] = {front!r}\n"  # -c puts '' (the cwd) first; `python <script>` puts the script's folder
                "out = {'imports': {}, 'gpus': None, 'skipped': []}\n"
                "try:\n    import torch; out['gpus'] = torch.cuda.device_count()\n"
                "except BaseException as e:\n    out['gpus_error'] = f'{type(e).__name__}: {e}'\n"
                f"for m, gpu in {[(p.module, p.needs_gpu) for p in probes]!r}:\n"
                "    if gpu and not out['gpus']:\n        out['skipped'].append(m); continue\n"
                "    try:\n        importlib.import_module(m); out['imports'][m] = None\n"
                "    except BaseException as e:\n        out['imports'][m] = f'{type(e).__name__}: {e}'\n"
                "print('HARNESS-PROBE ' + json.dumps(out))\n")
        env = self.launch_env()
        try:
            proc = subprocess.run([self._python(), "-c", code], cwd=self.workdir(), env=env, capture_output=True,
                                  text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [Finding("error", "model.python", f"cannot run {self._python()!r}: {exc}")]
        line = next((x for x in proc.stdout.splitlines() if x.startswith("HARNESS-PROBE ")), None)
        if line is None:
            cause = root_cause(proc.stderr) or proc.stderr.strip()[-300:]
            return [Finding("error", "model.python", f"{self._python()} failed in {self.workdir()}: {cause}")]
        res = _json.loads(line[len("HARNESS-PROBE "):])
        out = []
        for mod, err in res["imports"].items():
            if err:
                out.append(Finding("error", "model.python", f"`import {mod}` fails in the model's environment the way "
                                   f"{script} runs (sys.path {front}): {err} (build the env as docs/real-models.md says, "
                                   f"or python -m harness setup model={c.name})"))
        for mod in res.get("skipped", []):
            out.append(Finding("warning", "model.python", f"`import {mod}` not probed: it needs a visible GPU"))
        if c.gpus_per_job > 0:
            out += self.check_gpu_count(res.get("gpus"), res.get("gpus_error"))
        return out

    def check_gpu_count(self, visible: Optional[int], error: Optional[str] = None) -> list[Finding]:
        """Findings for ``visible`` GPUs in the model's environment against what one job needs."""
        c = self.config
        need = max(1, c.gpus_per_job)
        if visible is None:
            return [Finding("error", "model.python", f"torch is not importable in the model's environment ({error})")]
        if visible < need:
            why = (f"{c.ranks} torchrun ranks + {c.vae_worker_gpus} VAE-worker GPU" if c.vae_worker_gpus
                   else f"{need} GPU(s) per job")
            return [Finding("error", "model.devices", f"{c.name} needs {why} but its environment sees {visible} "
                            f"(CUDA_VISIBLE_DEVICES={self._devices()}); set local.models.{c.name}.devices")]
        return []

    # -- generate ---------------------------------------------------------------------------------------------
    def upstream_frames(self, num_poses: int) -> int:
        """Frames upstream writes for ``num_poses`` poses: one per pose, minus the anchor when it is dropped
        (the contract's ``writer.first_pose``)."""
        return num_poses - self.first_pose()

    def expected_fps(self) -> float:
        """The rate of the file upstream writes: the contract's ``writer.fps``, or ``model.fps`` where the launch
        passes the rate upstream writes at (``writer.fps_flag`` / ``fps_env``)."""
        c = self.contract()
        if c is None or c.writer.fps_flag or c.writer.fps_env:
            return float(self.config.fps)
        return c.writer.fps

    def first_pose(self) -> int:
        c = self.contract()
        return c.writer.first_pose if c is not None else 0

    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        from adapters.conformance import ConformanceSpec, check_video

        spec = self.launch(req, controls)
        argv, env_add = self.command_argv(spec)
        env = {**os.environ, **env_add}
        log = req.item_dir / "upstream.log"
        out_dir = Path(spec.out_dir) if spec.out_dir else req.item_dir / "upstream_out"
        self.clear_outputs(spec, out_dir, req.item_dir)
        t0 = time.time()
        from harness.io import run_logged

        try:  # upstream's output goes to upstream.log line by line, scrubbed of secrets (a token it prints)
            returncode = run_logged(argv, log, cwd=self.workdir(), env=env, timeout=self.config.timeout_s)
        except subprocess.TimeoutExpired:
            raise UpstreamRunError(f"{self.config.name}: upstream timed out after {self.config.timeout_s:.0f} s "
                                   f"(model.timeout_s); log: {log}") from None
        elapsed = time.time() - t0
        log_text = log.read_text(errors="replace")
        if returncode != 0:
            cause = root_cause(log_text)
            raise UpstreamRunError(f"{self.config.name}: upstream exited with {returncode}: "
                                   f"{cause or 'no Python exception in the log'}; no video was produced "
                                   f"(full log: {log})", root_cause=cause)
        self.check_log(log_text, log)
        video = self.find_output(spec, out_dir, t0)
        kept = req.item_dir / "upstream_video.mp4"
        from harness.io import copy_file

        copy_file(video, kept)
        N, first_pose = req.path.num_frames, self.first_pose()
        canvas = self.canvas_image_and_K(req.case)[0]
        c = self.contract()
        oh, ow = self.output_hw()
        cspec = ConformanceSpec(fps=self.expected_fps(), frames=N - first_pose, height=oh, width=ow,
                                poses=np.asarray(req.path.c2w)[first_pose:], canvas=canvas,
                                fps_tolerance=self.config.fps_tolerance,
                                first_frame_min_ncc=self.config.first_frame_min_ncc)
        n = 0
        # the anchor is not in the file: the conditioning canvas shows pose 0 (the contract's writer.first_pose)
        if first_pose:
            for _ in range(first_pose):
                sink(np.array(canvas))
                n += 1

        def on_frame(_: int, frame: np.ndarray) -> None:
            nonlocal n
            if frame.shape[:2] != (self.config.height, self.config.width):
                import cv2

                frame = cv2.resize(frame, (self.config.width, self.config.height), interpolation=cv2.INTER_AREA)
            sink(frame)
            n += 1

        report = check_video(kept, cspec, on_frame)
        checks = report.by_name()
        meta = {"upstream_video": {"num_frames": checks["frames"].value, "fps": checks["fps"].value,
                                   "height": checks["resolution"].value[0], "width": checks["resolution"].value[1]},
                "achieved_frames": checks["frames"].value, "achieved_fps": checks["fps"].value,
                "requested_frames": N, "log": str(log.name),
                "alignment": {"first_pose": first_pose, "prepended_canvas_frames": first_pose,
                              "anchor_frame": c.writer.anchor_frame if c else "kept"},
                "conformance": report.to_dict()}
        failed = [x for x in report.failed if x.name not in self.config.conformance_warn]
        if failed:
            raise UpstreamRunError(f"{self.config.name}: upstream video {video} fails conformance: "
                                   + "; ".join(f"{x.name}: {x.message}" for x in failed), meta=meta)
        return GeneratedVideo(num_frames=n, fps=float(self.config.fps), timings={"generate_s": elapsed}, meta=meta)

    def clear_outputs(self, spec: LaunchSpec, out_dir: Path, item_dir: Path) -> None:
        """Remove what an earlier launch of this item left where upstream writes: several upstreams skip an item
        whose output exists (DreamX, Evoke) or exit 0 without writing one (LingBot's save_video), and a stale video
        must never be taken for this launch's."""
        try:
            inside = out_dir.resolve().is_relative_to(item_dir.resolve())
        except OSError:
            inside = False
        if inside and out_dir.exists():
            shutil.rmtree(out_dir)
        if spec.output:
            Path(spec.output).unlink(missing_ok=True)
        out_dir.mkdir(parents=True, exist_ok=True)

    def check_log(self, text: str, log: Path) -> None:
        """Lines of upstream's log that mean a wrong run despite exit 0 (the contract's ``writer.log_failures``)."""
        c = self.contract()
        for lf in (c.writer.log_failures if c else ()):
            m = re.search(lf.pattern, text, re.M)
            if m:
                start = text.rfind("\n", 0, m.start()) + 1  # the whole line (a key name before the match too)
                end = text.find("\n", m.start())
                line = text[start:end if end >= 0 else len(text)]
                raise UpstreamRunError(f"{self.config.name}: upstream exited 0 but its log says {line[:200]!r}: "
                                       f"{lf.means} ({lf.source}; full log: {log})", root_cause=line[:200])

    def find_output(self, spec: LaunchSpec, out_dir: Path, started: float) -> Path:
        if spec.output:
            p = Path(spec.output)
            if p.is_file() and p.stat().st_mtime >= started - 1:
                return p
            raise UpstreamRunError(f"{self.config.name}: upstream finished but {p} was not written by this launch")
        cands = [p for p in out_dir.glob(spec.output_glob) if p.is_file() and p.stat().st_mtime >= started - 1]
        if not cands:
            raise UpstreamRunError(f"{self.config.name}: no video matching {spec.output_glob!r} under {out_dir}")
        return max(cands, key=lambda p: p.stat().st_mtime)

    # -- helpers ----------------------------------------------------------------------------------------------
    def output_hw(self) -> tuple[int, int]:
        """(height, width) of the frames upstream writes; the harness resizes them to the canvas. Models whose
        own canvas rule differs from ``height x width`` override this (LingBot: 464x832)."""
        return self.config.height, self.config.width

    def ckpt(self) -> str:
        return self.config.checkpoint or "<model.checkpoint>"

    def shim_path(self, module_file: str, name: str = "runner.py") -> str:
        """Absolute path of a shim script shipped next to an adapter (it runs inside the model's environment)."""
        return str(Path(module_file).resolve().parent / name)
