"""Helpers shared by the tests: the repository root, Hydra composition as the CLI does it, the CLI as a subprocess,
and an edited copy of a finished item. Nothing here downloads anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
STANDIN = Path(__file__).resolve().parent / "standin"


def compose(overrides: list[str] | None = None) -> dict:
    """Compose the harness config as `python -m harness` would, returned as a plain dict."""
    from hydra import compose as hcompose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="conf", version_base="1.3"):
            cfg = hcompose(config_name="config", overrides=overrides or [], return_hydra_config=False)
            return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]
    finally:
        GlobalHydra.instance().clear()


def run_cli(args: list[str], cwd: Path, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m harness <args>` in ``cwd`` and return the completed process (text output)."""
    e = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)



def edited_item_copy(src: Path, dst: Path, edit) -> Path:
    """A copy of a finished item whose video went through ``edit(frames (T, H, W, 3) uint8, path: CameraPath)``,
    re-encoded, with its ``meta.json`` video hash and size updated and no ``metrics.json``."""
    import shutil

    from harness.io import read_json, sha256_file, write_json
    from harness.video import VideoWriter, read_frames
    from trajectories import load_path

    shutil.copytree(src, dst)
    (dst / "metrics.json").unlink(missing_ok=True)
    path = load_path(dst / "camera.npz")
    _, frames = read_frames(src / "video.mp4")
    frames = edit(frames.copy(), path)
    w = VideoWriter(dst / "video.mp4", path.fps)
    for f in frames:
        w(f)
    w.close()
    meta = read_json(dst / "meta.json")
    meta["video"]["sha256"] = sha256_file(dst / "video.mp4")
    meta["video"]["size"] = (dst / "video.mp4").stat().st_size  # the integrity check compares both
    write_json(dst / "meta.json", meta)
    return dst


def stored(result):
    """The ``metrics.json`` form of an evaluation result: an :class:`~evaluate.results.ItemResult` -> its dict,
    ``{key: MetricEntry}`` -> ``{key: dict}`` (what a reader of the files sees)."""
    if hasattr(result, "to_dict"):
        return result.to_dict()
    return {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in result.items()}
