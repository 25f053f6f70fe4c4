"""ViPE camera poses (the paper's second translation-RPE estimator), run in ViPE's own environment like an upstream
model: a subprocess with a file contract and a readiness check; poses come back in the harness convention.

ViPE (``nv-tlabs/vipe``) needs CUDA extensions and its own conda environment, so it is never imported here.
``<weights_root>/vipe/vipe.json`` says how to run it (the release's weights pack holds ViPE's models as a Hugging
Face cache, not the command: with the pack, its cache becomes ``HF_HOME`` of the run unless ``env`` sets one)::

    {"command": ["/opt/envs/vipe/bin/vipe"],   # the `vipe` CLI of that environment (a list, or one string)
     "pipeline": "default",                     # optional, `vipe infer --pipeline`
     "env": {"HF_HOME": "/shared/hf"},          # optional extra environment
     "timeout_s": 3600}                         # optional

File contract (facts read in ``nv-tlabs/vipe@157494a2aca56c9f5adbd36977d892e88401b4e2``, ``vipe/cli/main.py`` and
``vipe/utils/io.py``): ``vipe infer <video> --output <dir> --pipeline <name>`` writes ``<dir>/pose/<video
stem>.npz`` holding ``data`` (M, 4, 4) OpenCV camera-to-world matrices and ``inds`` (M,) the frame indices they
belong to. Here the video is the sampled frames the caller passes (written losslessly enough: H.264 crf 12), so
``inds`` index those samples; a sample without a pose keeps the previous one and is reported invalid. The poses
are re-expressed relative to frame 0 with :mod:`trajectories.conventions` (OpenCV axes already). ``CUDA_VISIBLE_
DEVICES`` is set from the device (``cuda:N`` -> ``N``). ViPE estimates its own intrinsics (it offers no way to pass
them for a video), and its bundle adjustment is not bit-deterministic run to run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ._loading import corrupt, require_files
from .base import PoseEstimate


class VipeRunError(RuntimeError):
    """ViPE ran but failed or wrote no valid pose file."""


class VipePoses:
    """:class:`evaluate.perception.base.PoseEstimator` running ViPE as a subprocess (``name = "vipe"``)."""

    name = "vipe"
    kind = "paper"
    hf_repo: Optional[str] = None  # a code repository with its own model downloads, not a Hub checkpoint
    revision: Optional[str] = "157494a2aca56c9f5adbd36977d892e88401b4e2"  # nv-tlabs/vipe commit of the contract
    source_repo = "nv-tlabs/vipe"
    files: tuple[str, ...] = ("vipe.json",)
    library = "vipe (own environment, subprocess)"
    recipe = ("`vipe infer <sampled frames>.mp4 --pipeline default`; pose/<stem>.npz (OpenCV c2w, inds) -> c2w "
              "relative to frame 0")

    def __init__(self, command: list[str], device: str = "cpu", pipeline: str = "default",
                 env: Optional[dict[str, str]] = None, timeout_s: float = 3600.0, fps: float = 16.0):
        self.command, self.device, self.pipeline = command, device, pipeline
        self.env, self.timeout_s, self.fps = dict(env or {}), float(timeout_s), fps

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "command": self.command, "pipeline": self.pipeline, "fps": self.fps}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu", pack_env: Optional[dict[str, str]] = None) -> "VipePoses":
        """Read ``vipe.json`` and run the readiness check (the command exists and is executable).

        ``pack_env``: environment from the release's weights pack, which ships ViPE's models as a Hugging Face cache
        (``HF_HOME`` pointing at it, offline); ``vipe.json``'s own ``env`` wins over it."""
        (cfg_path,) = require_files(cls.name, Path(weights_dir), cls.files)
        try:
            cfg = json.loads(cfg_path.read_text())
        except ValueError as exc:
            raise corrupt(cls.name, cfg_path, exc) from exc
        cmd = cfg.get("command") if isinstance(cfg, dict) else None
        if isinstance(cmd, str):
            cmd = [cmd]
        if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
            raise corrupt(cls.name, cfg_path, 'expected {"command": ["/path/to/env/bin/vipe"], ...}')
        exe = cmd[0]
        if not (shutil.which(exe) or (Path(exe).is_file() and os.access(exe, os.X_OK))):
            raise FileNotFoundError(f"backbone 'vipe': {cfg_path} names command {exe!r}, which is not an executable "
                                    "here; install ViPE in its own environment (github.com/nv-tlabs/vipe) and point "
                                    "`command` at its `vipe` entry point")
        own_env = cfg.get("env") or {}
        if not isinstance(own_env, dict):
            raise corrupt(cls.name, cfg_path, '"env" must be a mapping, e.g. {"HF_HOME": "/shared/hf"}')
        env = {**(pack_env or {}), **own_env}
        return cls(cmd, device, pipeline=str(cfg.get("pipeline", "default")), env=env,
                   timeout_s=float(cfg.get("timeout_s", 3600.0)))

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **{k: str(v) for k, v in self.env.items()}}
        if str(self.device).startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = str(self.device).split(":", 1)[1]
        return env

    def run(self, frames: np.ndarray, work_dir: Path) -> tuple[np.ndarray, np.ndarray]:
        """Run ViPE on (N, H, W, 3) uint8 RGB frames in ``work_dir``; return (data (M, 4, 4), inds (M,))."""
        from harness.video import VideoWriter

        work_dir = Path(work_dir)
        video = work_dir / "frames.mp4"
        w = VideoWriter(video, self.fps, crf=12)
        for f in frames:
            w.write(np.ascontiguousarray(f))
        w.close()
        out = work_dir / "vipe_out"
        argv = [*self.command, "infer", str(video), "--output", str(out), "--pipeline", self.pipeline]
        log = work_dir / "vipe.log"
        from harness.io import run_logged

        try:  # its output, line by line and scrubbed of secrets (harness.secrets), like upstream.log
            returncode = run_logged(argv, log, env=self._env(), timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise VipeRunError(f"vipe timed out after {self.timeout_s:.0f} s (timeout_s in vipe.json)") from None
        if returncode != 0:
            raise VipeRunError(f"vipe exited with {returncode}: {' '.join(argv)}\n{log.read_text()[-2000:]}")
        pose = out / "pose" / f"{video.stem}.npz"
        if not pose.is_file():
            raise VipeRunError(f"vipe finished but wrote no {pose}")
        with np.load(pose) as z:
            if "data" not in z or "inds" not in z:
                raise VipeRunError(f"{pose}: expected arrays 'data' and 'inds', found {sorted(z.files)}")
            data, inds = np.asarray(z["data"], np.float64), np.asarray(z["inds"], np.int64)
        if data.ndim != 3 or data.shape[1:] != (4, 4) or len(inds) != len(data):
            raise VipeRunError(f"{pose}: data {data.shape} / inds {inds.shape} are not (M, 4, 4) / (M,)")
        return data, inds

    def estimate(self, frames: np.ndarray, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        """OpenCV camera-to-world poses (N, 4, 4), frame 0 = identity, of the sampled ``frames``; ``valid[i]`` is
        False where ViPE returned no pose (the previous pose is kept). ``K`` is unused (ViPE estimates its own)."""
        from trajectories.conventions import relative_to_first

        frames = np.asarray(frames)
        N = len(frames)
        with tempfile.TemporaryDirectory(prefix="vipe_") as tmp:
            data, inds = self.run(frames, Path(tmp))
        have = {int(i): T for i, T in zip(inds, data) if 0 <= int(i) < N}
        if 0 not in have:
            raise VipeRunError("vipe returned no pose for the first frame; poses cannot be anchored to frame 0")
        c2w = np.empty((N, 4, 4))
        valid = np.zeros(N, bool)
        for i in range(N):
            if i in have:
                c2w[i], valid[i] = have[i], True
            else:
                c2w[i] = c2w[i - 1]
        c2w = relative_to_first(c2w)
        c2w[0] = np.eye(4)
        return PoseEstimate(c2w, valid, {"source": "vipe", "pipeline": self.pipeline, "mode": mode,
                                         "frames_without_pose": [int(indices[i]) for i in range(N) if not valid[i]]})
