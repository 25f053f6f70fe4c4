"""Shared machinery of adapters whose model runs in its own environment (an upstream checkout).

``compile`` writes upstream's own input files plus ``command.sh``, the exact launch command. ``generate`` checks
that the checkout, checkpoint and Python environment exist (naming the config key to set when not), runs the
command as a subprocess with captured logs, a timeout and the assigned GPUs, finds upstream's output video,
validates it (decodable, frame count, fps) and brings its frames into the harness layout, keeping the original
as ``upstream_video.mp4``.

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
from typing import Any, ClassVar, Optional

import numpy as np

from .base import (Adapter, Finding, FrameSink, GeneratedVideo, ItemRequest, ModelConfig, ModelConfigError,
                   NativeControls)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


_HEX40 = re.compile(r"[0-9a-f]{40}")


class UpstreamRunError(RuntimeError):
    """The upstream command failed, timed out, or produced no valid video. ``root_cause``: the exception line
    found in ``upstream.log`` (None when there is none), recorded in ``meta.json``."""

    def __init__(self, message: str, root_cause: Optional[str] = None):
        super().__init__(message)
        self.root_cause = root_cause


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
        bare = re.sub(r"^\[(?:rank|default)\d*\]:\s*", "", line)
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


@dataclass(frozen=True, kw_only=True)
class UpstreamConfig(ModelConfig):
    """Paths and launch settings shared by upstream models (all user-set; see ``conf/local``).

    upstream_dir: the model's repository checkout. checkpoint: its weights (file or folder). python: the Python
    executable of the model's environment. launch: ``torchrun`` (``python -m torch.distributed.run
    --nproc_per_node <gpus_per_job>``) or ``python``. devices: GPU ids for ``CUDA_VISIBLE_DEVICES`` (default
    ``0..gpus_per_job-1``). env: extra environment variables. timeout_s: wall-clock limit of one rollout.
    weights_hint: how to get the weights (printed when they are missing). sampling_steps, prompt_suffix,
    upstream_repo / upstream_commit: recorded facts of the upstream release the adapter targets.
    expected_output_frames: frames upstream writes when it differs from the trajectory (e.g. a dropped anchor).
    upstream_commit: the full 40-hex commit the adapter and its contract were checked against (``upstream_subdir``
    when the model lives in a folder of the repository). vae_worker_gpus: GPUs of ``gpus_per_job`` that upstream
    gives to a separate VAE worker instead of a torchrun rank (Matrix-Game 3's async VAE: 7 ranks + 1).
    """

    upstream_dir: Optional[str] = None
    checkpoint: Optional[str] = None
    python: Optional[str] = None
    launch: str = "torchrun"
    devices: Optional[str] = None
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 4 * 3600.0
    weights_hint: str = ""
    sampling_steps: int = 4
    upstream_repo: str = ""
    upstream_commit: str = ""
    upstream_subdir: str = ""
    vae_worker_gpus: int = 0
    expected_output_frames: Optional[int] = None
    fps_tolerance: float = 0.05

    def validate(self) -> None:
        super().validate()
        if self.launch not in ("torchrun", "python"):
            raise ModelConfigError(f"model.launch={self.launch!r}: use 'torchrun' or 'python'")
        if self.upstream_commit and not _HEX40.fullmatch(self.upstream_commit):
            raise ModelConfigError(f"model.upstream_commit={self.upstream_commit!r}: give the full 40-hex commit of "
                                   f"{self.upstream_repo or 'the upstream repository'} (folders go in model.upstream_subdir)")
        if not 0 <= self.vae_worker_gpus < max(1, self.gpus_per_job):
            raise ModelConfigError(f"model.vae_worker_gpus={self.vae_worker_gpus}: must leave at least one torchrun rank "
                                   f"of model.gpus_per_job={self.gpus_per_job}")

    @property
    def ranks(self) -> int:
        """torchrun processes of one job: ``gpus_per_job`` minus the GPUs upstream reserves for a VAE worker."""
        return max(1, self.gpus_per_job - self.vae_worker_gpus)


@dataclass
class LaunchSpec:
    """One upstream invocation: script (relative to the checkout) or module, its arguments, extra environment,
    the working directory and where the video will appear (a path, or a glob relative to ``out_dir``)."""

    script: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    output: Optional[str] = None
    output_glob: str = "**/*.mp4"
    out_dir: Optional[str] = None
    wrapper: Optional[str] = None  # a shim script (absolute path) that runs the upstream script after patching
    wrapper_args: list[str] = field(default_factory=list)  # the shim's own options (before "--")
    interpreter: Optional[list[str]] = None  # e.g. ["bash"] for a shell launcher (no torchrun/python prefix)


def _git_head(path: str) -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


class UpstreamAdapter(Adapter):
    """Base of the nine upstream-model adapters. Subclasses implement :meth:`write_native` and :meth:`launch` and
    declare the context policies their launch realises (``contexts``; only ``native`` unless they say more)."""

    config: UpstreamConfig
    contexts = ("native",)
    unsupported_reasons = {"fullkv": "no harness policy is wired to this upstream", "sliding": "no harness policy is "
                           "wired to this upstream", "fov": "no harness policy is wired to this upstream"}

    # -- compile ----------------------------------------------------------------------------------------------
    @abstractmethod
    def write_native(self, req: ItemRequest, image: np.ndarray, K: np.ndarray) -> NativeControls:
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

    def write_canvas(self, dst: Path, case: Any, params: tuple[int, ...] = ()) -> None:
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
        (d / "prompt.txt").write_text(req.case.prompt + "\n")
        controls = self.write_native(req, image, K)
        controls.files.setdefault("image.png", str(d / "image.png"))
        controls.files.setdefault("prompt.txt", str(d / "prompt.txt"))
        if controls.decoded_c2w is None:
            controls.decoded_c2w = self.decode(d, req)
        spec = self.launch(req, controls)
        argv, env = self.command_argv(spec)
        controls.command = self.command_text(argv, env, spec)
        from harness.io import write_text

        write_text(d / "command.sh", controls.command)
        from harness.io import file_mode

        os.chmod(d / "command.sh", file_mode(executable=True))
        controls.files["command.sh"] = str(d / "command.sh")
        controls.meta.setdefault("translation_scale", self.config.translation_scale.to_dict())
        controls.meta.setdefault("upstream", {"repo": self.config.upstream_repo, "commit": self.config.upstream_commit})
        return controls

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
        env = {"CUDA_VISIBLE_DEVICES": self._devices(), **c.env, **spec.env}
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
        from harness.secrets import shell_export

        lines += [shell_export(k, v) for k, v in sorted(env.items())]  # secrets stay ${NAME} references
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

    def contract(self):
        """This model's upstream contract (``adapters/contracts/<name>.yaml``), or None for a model without one."""
        from adapters import contracts

        try:
            return contracts.load(self.config.name)
        except FileNotFoundError:
            return None

    def checkpoint_paths(self) -> dict[str, Optional[str]]:
        """Config key -> path, for every checkpoint entry of the contract (``checkpoint`` and model-specific keys)."""
        c = self.config
        return {k: getattr(c, k, None) for k in ("checkpoint", "upstream_dir")}

    def readiness(self, probe: bool = True) -> list[Finding]:
        """Everything that would stop a real launch, found at planning time, before any item runs.

        Checks the checkout (and warns when it is not at ``model.upstream_commit``), the model's Python, that it
        imports upstream's package from the checkout, that the checkpoint has the files upstream loads (from the
        contract), and that the model's environment sees enough GPUs: ``gpus_per_job`` (which includes the VAE
        worker's GPU where ``vae_worker_gpus`` > 0). ``probe=False`` skips the subprocess checks (tests).
        """
        c = self.config
        out: list[Finding] = []
        hint = f" {c.weights_hint}" if c.weights_hint else ""
        if not c.upstream_dir:
            return [Finding("error", "model.upstream_dir",
                            f"not set for {c.name}: git clone https://github.com/{c.upstream_repo.split(' ')[0]} && "
                            f"git -C <checkout> checkout {c.upstream_commit}, then set local.models.{c.name}.upstream_dir "
                            f"in conf/local/default.yaml (docs/real-models.md)")]
        if not Path(c.upstream_dir).is_dir():
            return [Finding("error", "model.upstream_dir", f"{c.upstream_dir!r} does not exist; point it at the checkout")]
        wd = self.workdir()
        if not Path(wd).is_dir():
            out.append(Finding("error", "model.upstream_subdir", f"{wd!r} does not exist in the checkout"))
        head = _git_head(c.upstream_dir)
        if c.upstream_commit and head and head != c.upstream_commit:
            out.append(Finding("warning", "model.upstream_commit",
                               f"the checkout is at {head[:12]}, the adapter and its contract were checked against "
                               f"{c.upstream_commit[:12]}: git -C {c.upstream_dir} checkout {c.upstream_commit}"))
        contract = self.contract()
        paths = self.checkpoint_paths()
        for entry in (contract.checkpoint if contract else [{"key": "checkpoint", "kind": "path"}]):
            key = entry.get("key", "checkpoint")
            root = paths.get(key) if key in paths else getattr(c, key, None)
            if not root:
                out.append(Finding("error", f"model.{key}", f"not set for {c.name}.{hint} Set local.models.{c.name}.{key}"))
                continue
            if not Path(root).exists():
                out.append(Finding("error", f"model.{key}", f"{root!r} does not exist.{hint}"))
                continue
            kind = entry.get("kind", "path")
            if kind == "file" and not Path(root).is_file():
                out.append(Finding("error", f"model.{key}", f"{root!r} must be a file ({entry.get('source', '')})"))
            if kind == "dir" and not Path(root).is_dir():
                out.append(Finding("error", f"model.{key}", f"{root!r} must be a folder ({entry.get('source', '')})"))
            missing = [f for f in entry.get("files", []) if not (Path(root) / f).exists()]
            if missing:
                out.append(Finding("error", f"model.{key}", f"{root} lacks {', '.join(missing)}, which upstream loads "
                                   f"({entry.get('source', '')}).{hint}"))
        if c.python and not (Path(c.python).exists() or shutil.which(c.python)):
            out.append(Finding("error", "model.python", f"{c.python!r} is not an executable; point it at the model's env"))
            return out
        if probe and not any(f.level == "error" for f in out):
            out += self.probe_environment(contract.imports if contract else [])
        return out

    def probe_environment(self, imports: list[str]) -> list[Finding]:
        """Run the model's Python once in the checkout: import upstream's packages and count visible GPUs."""
        import json as _json

        c = self.config
        code = ("import importlib, json, sys\n"
                "out = {'imports': {}, 'gpus': None}\n"
                f"for m in {list(imports)!r}:\n"
                "    try:\n        importlib.import_module(m); out['imports'][m] = None\n"
                "    except BaseException as e:\n        out['imports'][m] = f'{type(e).__name__}: {e}'\n"
                + ("try:\n    import torch; out['gpus'] = torch.cuda.device_count()\n"
                   "except BaseException as e:\n    out['gpus_error'] = f'{type(e).__name__}: {e}'\n"
                   if c.gpus_per_job > 0 else "")
                + "print('HARNESS-PROBE ' + json.dumps(out))\n")
        env = {**os.environ, **self.command_argv(LaunchSpec(script="-", args=[]))[1]}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.workdir(), env.get("PYTHONPATH")) if p)
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
                out.append(Finding("error", "model.python", f"`import {mod}` fails in the model's environment from "
                                   f"{self.workdir()}: {err} (build the env as docs/real-models.md says)"))
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
    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        from harness.video import iter_frames, probe_video

        spec = self.launch(req, controls)
        argv, env_add = self.command_argv(spec)
        env = {**os.environ, **env_add}
        log = req.item_dir / "upstream.log"
        out_dir = Path(spec.out_dir) if spec.out_dir else req.item_dir / "upstream_out"
        out_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        from harness.secrets import run_logged

        try:  # upstream's output goes to upstream.log line by line, scrubbed of secrets (a token it prints)
            returncode = run_logged(argv, log, cwd=self.workdir(), env=env, timeout=self.config.timeout_s)
        except subprocess.TimeoutExpired:
            raise UpstreamRunError(f"{self.config.name}: upstream timed out after {self.config.timeout_s:.0f} s "
                                   f"(model.timeout_s); log: {log}") from None
        elapsed = time.time() - t0
        if returncode != 0:
            cause = root_cause(log.read_text(errors="replace"))
            raise UpstreamRunError(f"{self.config.name}: upstream exited with {returncode}: "
                                   f"{cause or 'no Python exception in the log'}; no video was produced "
                                   f"(full log: {log})", root_cause=cause)
        video = self.find_output(spec, out_dir, t0)
        info = probe_video(video)
        expected = self.config.expected_output_frames or req.path.num_frames
        if info["num_frames"] != expected:
            raise UpstreamRunError(f"{self.config.name}: upstream video {video} has {info['num_frames']} frames, "
                                   f"expected {expected}")
        if abs(info["fps"] - self.config.fps) > self.config.fps_tolerance * self.config.fps:
            raise UpstreamRunError(f"{self.config.name}: upstream video is {info['fps']:.3f} fps, the model config "
                                   f"says {self.config.fps} (model.fps)")
        oh, ow = self.output_hw()
        if (info.get("height"), info.get("width")) != (oh, ow) and info.get("height") is not None:
            raise UpstreamRunError(f"{self.config.name}: upstream video {video} is {info['height']}x{info['width']}, "
                                   f"the canvas rule says {oh}x{ow}")
        kept = req.item_dir / "upstream_video.mp4"
        shutil.copyfile(video, kept)
        n = 0
        for _, frame in iter_frames(kept):
            if frame.shape[:2] != (self.config.height, self.config.width):
                import cv2

                frame = cv2.resize(frame, (self.config.width, self.config.height), interpolation=cv2.INTER_AREA)
            sink(frame)
            n += 1
        return GeneratedVideo(num_frames=n, fps=info["fps"], timings={"generate_s": elapsed},
                              meta={"upstream_video": info, "achieved_frames": info["num_frames"],
                                    "achieved_fps": info["fps"], "requested_frames": req.path.num_frames,
                                    "log": str(log.name)})

    def find_output(self, spec: LaunchSpec, out_dir: Path, started: float) -> Path:
        if spec.output:
            p = Path(spec.output)
            if p.is_file():
                return p
            raise UpstreamRunError(f"{self.config.name}: upstream finished but {p} was not written")
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
