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
import shlex
import shutil
import subprocess
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from .base import Adapter, FrameSink, GeneratedVideo, ItemRequest, ModelConfig, ModelConfigError, NativeControls


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


class UpstreamRunError(RuntimeError):
    """The upstream command failed, timed out, or produced no valid video."""


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
    expected_output_frames: Optional[int] = None
    fps_tolerance: float = 0.05
    extra_devices: int = 0  # GPUs a job needs beyond its gpus_per_job ranks (e.g. an async VAE decoder's GPU)

    def validate(self) -> None:
        super().validate()
        if self.launch not in ("torchrun", "python"):
            raise ModelConfigError(f"model.launch={self.launch!r}: use 'torchrun' or 'python'")


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


class UpstreamAdapter(Adapter):
    """Base of the nine upstream-model adapters. Subclasses implement :meth:`write_native` and :meth:`launch`."""

    config: UpstreamConfig

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

    def compile(self, req: ItemRequest) -> NativeControls:
        import cv2

        image, K = self.canvas_image_and_K(req.case)
        d = req.controls_dir
        d.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(d / "image.png"), image[..., ::-1])
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
        controls.meta.setdefault("translation_scale", self.config.translation_scale)
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
        return ",".join(str(i) for i in range(max(1, self.config.gpus_per_job) + self.config.extra_devices))

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
                    f"--nproc_per_node={max(1, c.gpus_per_job)}", *head, *spec.args]
        else:
            argv = [self._python(), *head, *spec.args]
        env = {"CUDA_VISIBLE_DEVICES": self._devices(), **c.env, **spec.env}
        return argv, env

    def command_text(self, argv: list[str], env: dict[str, str], spec: LaunchSpec) -> str:
        cwd = self.config.upstream_dir or "<model.upstream_dir>"
        lines = [
            "#!/usr/bin/env bash",
            f"# {self.config.name}: the exact upstream launch for this item ({self.config.upstream_repo}"
            f"@{self.config.upstream_commit[:12]}). Generated by the harness; rerunnable by hand.",
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

    # -- generate ---------------------------------------------------------------------------------------------
    def check_ready(self) -> None:
        """Fail before anything heavy starts when the checkout, checkpoint or environment is missing."""
        c = self.config
        hint = f" {c.weights_hint}" if c.weights_hint else ""
        if not c.upstream_dir:
            raise ModelConfigError(
                f"model.upstream_dir is not set for {c.name}: clone {c.upstream_repo} (commit {c.upstream_commit}) "
                f"and set model.upstream_dir=/path/to/checkout (e.g. in conf/local/default.yaml)"
            )
        if not Path(c.upstream_dir).is_dir():
            raise ModelConfigError(f"model.upstream_dir={c.upstream_dir!r} does not exist; point it at the checkout")
        if not c.checkpoint:
            raise ModelConfigError(f"model.checkpoint is not set for {c.name}.{hint} Then set model.checkpoint=<path>")
        if not Path(c.checkpoint).exists():
            raise ModelConfigError(f"model.checkpoint={c.checkpoint!r} does not exist.{hint}")
        if c.python and not (Path(c.python).exists() or shutil.which(c.python)):
            raise ModelConfigError(f"model.python={c.python!r} is not an executable; point it at the model's env")

    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        from harness.video import iter_frames, probe_video

        self.check_ready()
        spec = self.launch(req, controls)
        argv, env_add = self.command_argv(spec)
        env = {**os.environ, **env_add}
        log = req.item_dir / "upstream.log"
        out_dir = Path(spec.out_dir) if spec.out_dir else req.item_dir / "upstream_out"
        out_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        with open(log, "w") as lf:
            try:
                proc = subprocess.run(argv, cwd=self.config.upstream_dir, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                      timeout=self.config.timeout_s)
            except subprocess.TimeoutExpired:
                raise UpstreamRunError(f"{self.config.name}: upstream timed out after {self.config.timeout_s:.0f} s "
                                       f"(model.timeout_s); log: {log}") from None
        elapsed = time.time() - t0
        if proc.returncode != 0:
            tail = log.read_text()[-2000:]
            raise UpstreamRunError(f"{self.config.name}: upstream exited with {proc.returncode}; log {log}:\n{tail}")
        video = self.find_output(spec, out_dir, t0)
        info = probe_video(video)
        expected = self.config.expected_output_frames or req.path.num_frames
        if info["num_frames"] != expected:
            raise UpstreamRunError(f"{self.config.name}: upstream video {video} has {info['num_frames']} frames, "
                                   f"expected {expected}")
        if abs(info["fps"] - self.config.fps) > self.config.fps_tolerance * self.config.fps:
            raise UpstreamRunError(f"{self.config.name}: upstream video is {info['fps']:.3f} fps, the model config "
                                   f"says {self.config.fps} (model.fps)")
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
    def scene_scale(self) -> float:
        """Model translation units per scene unit, from the translation-scale policy
        (``units_per_scene_unit`` or ``metres_per_scene_unit``; 1 when the model takes scene units as they are)."""
        ts = self.config.translation_scale
        return float(ts.get("units_per_scene_unit", ts.get("metres_per_scene_unit", 1.0)))

    def ckpt(self) -> str:
        return self.config.checkpoint or "<model.checkpoint>"

    def shim_path(self, module_file: str, name: str = "runner.py") -> str:
        """Absolute path of a shim script shipped next to an adapter (it runs inside the model's environment)."""
        return str(Path(module_file).resolve().parent / name)
