"""Depth Anything 3 through the ``depth_anything_3`` package: the paper's depth (Environment Depth /
Reconstruction) and camera poses (RPE, return-frame selection, appendix G.1 qualification).

Weights: ``<weights_root>/da3/`` holds the Hugging Face repository's two files, ``config.json`` (``{"model_name":
"da3-large", ...}``, written by the package's ``PyTorchModelHubMixin``) and ``model.safetensors`` (keys
``model.<network parameter>``). Pinned upstream: ``depth-anything/DA3-LARGE-1.1`` at
``0e109ae307c5982f319a67cf6f9f99ccdc0ec97c`` (the snapshot a public project reports testing; DA3-LARGE-1.1 is
also the checkpoint WorldMark uses). Its licence is CC BY-NC 4.0.

Loading does not import ``depth_anything_3.api`` (which pulls moviepy<2, evo, plyfile and exporters): the network
(``DepthAnything3Net``) is built from the package's own preset YAML through its ``cfg.create_object`` and the
checkpoint is loaded strictly; pre-processing is the package's ``InputProcessor`` and the outputs go through its
``OutputProcessor``, i.e. the same steps as ``DepthAnything3.inference`` without the exporters.

Recipe: all requested frames in one multi-view forward; ``process_res=504``, ``upper_bound_resize``;
``ref_view_strategy="first"`` (upstream defaults to ``saddle_balanced``, whose reference is not frame 0);
bf16 autocast on CUDA as upstream, fp32 on CPU. DA3's extrinsics are world-to-camera (OpenCV axes): they are
inverted to camera-to-world and re-expressed relative to frame 0 with :mod:`trajectories.conventions`. Depth is
z-depth at the processing resolution, resized bilinearly to the frame size (Spearman and the spherical score are
scale-free).

The package registers a global OmegaConf ``eval`` resolver at import; :func:`import_da3` removes it again when no
``eval`` resolver existed before (DA3's preset YAMLs do not use it), so the harness's own Hydra configs never see
an ``eval`` interpolation that runs arbitrary Python.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional, TypedDict

import numpy as np

from ._loading import check_safetensors, corrupt, require_files, resolve_device
from .base import PoseEstimate

if TYPE_CHECKING:
    import torch


class Da3Prediction(TypedDict):
    """One multi-view forward of DA3 (:meth:`DepthAnything3.predict`), at the processing size (h, w)."""

    depth: np.ndarray  # (N, h, w) float32 z-depth (DA3's relative scale)
    w2c: np.ndarray  # (N, 4, 4) float64 DA3 extrinsics (world to camera)
    intrinsics: np.ndarray  # (N, 3, 3) float64, pixels at the processing size
    processed_hw: tuple[int, ...]  # (h, w)


def import_da3() -> tuple[ModuleType, Mapping[str, str]]:
    """Import the package's config helpers without leaving its global ``eval`` resolver behind."""
    from omegaconf import OmegaConf

    had_eval = OmegaConf.has_resolver("eval")
    import depth_anything_3.cfg as da3_cfg  # registers "eval" (or prints an error if one exists)
    from depth_anything_3.registry import MODEL_REGISTRY

    if not had_eval and OmegaConf.has_resolver("eval"):
        OmegaConf.clear_resolver("eval")
    registry: Mapping[str, str] = MODEL_REGISTRY  # model name -> its config file
    return da3_cfg, registry


class DepthAnything3:
    """:class:`~evaluate.perception.base.DepthEstimator` and :class:`~evaluate.perception.base.PoseEstimator`
    (``name = "da3"``, ``kind = "paper"``)."""

    name = "da3"
    kind = "paper"
    hf_repo: Optional[str] = "depth-anything/DA3-LARGE-1.1"
    revision: Optional[str] = "0e109ae307c5982f319a67cf6f9f99ccdc0ec97c"
    files: tuple[str, ...] = ("config.json", "model.safetensors")
    library = "depth_anything_3"
    recipe = ("all frames in one forward, process_res 504 upper_bound_resize, ref_view_strategy=first; "
              "w2c extrinsics -> OpenCV c2w relative to frame 0; depth resized to the frame")

    def __init__(self, net: torch.nn.Module, device: str, model_name: str, process_res: int = 504,
                 process_res_method: str = "upper_bound_resize"):
        self.net, self.device, self.model_name = net, device, model_name
        self.process_res, self.process_res_method = process_res, process_res_method

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "model_name": self.model_name, "process_res": self.process_res,
                "process_res_method": self.process_res_method, "ref_view_strategy": "first"}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu", process_res: int = 504) -> "DepthAnything3":
        import torch
        from safetensors.torch import load_model

        weights_dir = Path(weights_dir)
        cfg_path, st_path = require_files(cls.name, weights_dir, cls.files)
        try:
            meta = json.loads(cfg_path.read_text())
        except ValueError as exc:
            raise corrupt(cls.name, cfg_path, exc) from exc
        model_name = meta.get("model_name") if isinstance(meta, dict) else None
        da3_cfg, registry = import_da3()
        if not isinstance(model_name, str) or model_name not in registry:
            raise corrupt(cls.name, cfg_path, f"model_name {model_name!r} is not one of {sorted(registry)}")
        check_safetensors(cls.name, st_path)
        net = da3_cfg.create_object(da3_cfg.load_config(registry[model_name]))
        # the Hub checkpoint is the state of the package's DepthAnything3 wrapper (network under ``model.``), saved
        # by safetensors' save_model, which stores tied head weights once: load it the same way
        wrapper = torch.nn.Module()
        wrapper.model = net
        try:
            load_model(wrapper, str(st_path), strict=True, device="cpu")
        except RuntimeError as exc:
            raise corrupt(cls.name, st_path, str(exc).splitlines()[0] + " ...") from exc
        dev = resolve_device(device)
        return cls(net.to(dev).eval(), dev, model_name, process_res=process_res)

    # -- forward ------------------------------------------------------------------------------------------------
    def predict(self, frames: np.ndarray) -> Da3Prediction:
        """One multi-view forward of (N, H, W, 3) uint8 RGB frames (frame 0 = reference view). Returns
        ``{"depth": (N, h, w) float32 z-depth at the processing size, "w2c": (N, 4, 4) float64 DA3 extrinsics,
        "intrinsics": (N, 3, 3) at the processing size, "processed_hw": (h, w)}``."""
        import torch
        from depth_anything_3.utils.io.input_processor import InputProcessor
        from depth_anything_3.utils.io.output_processor import OutputProcessor

        frames = np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"da3: frames must be (N, H, W, 3) uint8 RGB, got {frames.shape} {frames.dtype}")
        imgs, _, _ = InputProcessor()(list(frames), None, None, self.process_res, self.process_res_method,
                                      num_workers=1, sequential=True)
        if imgs.ndim == 4:
            imgs = imgs[None]
        imgs = imgs.to(self.device).float()
        with torch.inference_mode():
            if str(self.device).startswith("cuda"):
                dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
                with torch.autocast(device_type="cuda", dtype=dtype):
                    raw = self.net(imgs, None, None, [], False, False, "first")
            else:
                raw = self.net(imgs, None, None, [], False, False, "first")
        pred = OutputProcessor()(raw)
        ext = np.asarray(pred.extrinsics, np.float64)
        if ext.shape[-2] == 3:  # (N, 3, 4) -> (N, 4, 4)
            ext = np.concatenate([ext, np.tile([[[0.0, 0.0, 0.0, 1.0]]], (len(ext), 1, 1))], axis=1)
        return {"depth": np.asarray(pred.depth, np.float32), "w2c": ext,
                "intrinsics": np.asarray(pred.intrinsics, np.float64), "processed_hw": tuple(imgs.shape[-2:])}

    def depth(self, frames: np.ndarray, indices: list[int]) -> np.ndarray:
        """(N, H, W) float32 z-depth (DA3's relative scale) of ``frames`` (N, H, W, 3) uint8, resized to the frame
        size; ``indices`` (the frames' numbers in the video) are only recorded by callers."""
        import cv2

        d = self.predict(frames)["depth"]
        H, W = frames.shape[1:3]
        return np.stack([cv2.resize(x, (W, H), interpolation=cv2.INTER_LINEAR) for x in d])

    def estimate(self, frames: np.ndarray, indices: list[int], K: np.ndarray, mode: str) -> PoseEstimate:
        """OpenCV camera-to-world poses (N, 4, 4) of the frames with frame 0 = identity; every step valid (DA3
        always returns a pose). ``K`` is not used (DA3 estimates intrinsics itself); ``mode`` is recorded."""
        pred = self.predict(frames)
        c2w = c2w_from_da3_extrinsics(pred["w2c"])
        return PoseEstimate(c2w, np.ones(len(c2w), bool),
                            {"source": f"{self.name}:{self.model_name}", "ref_view_strategy": "first",
                             "process_res": self.process_res, "mode": mode})


def c2w_from_da3_extrinsics(w2c: np.ndarray) -> np.ndarray:
    """DA3's world-to-camera extrinsics (N, 3|4, 4), OpenCV axes -> our camera-to-world (N, 4, 4) float64 with the
    camera of frame 0 as the world."""
    from trajectories.conventions import c2w_from_w2c, relative_to_first

    w2c = np.asarray(w2c, np.float64)
    if w2c.shape[-2] == 3:
        w2c = np.concatenate([w2c, np.tile([[[0.0, 0.0, 0.0, 1.0]]], (len(w2c), 1, 1))], axis=1)
    # DA3 decodes rotations in float32: project them back onto SO(3) before inverting
    U, _, Vt = np.linalg.svd(w2c[:, :3, :3])
    w2c = w2c.copy()
    fix = np.ones((len(w2c), 3))
    fix[:, 2] = np.sign(np.linalg.det(U @ Vt))
    w2c[:, :3, :3] = (U * fix[:, None, :]) @ Vt
    rel = relative_to_first(c2w_from_w2c(w2c))
    rel[0] = np.eye(4)  # exactly, not up to float error
    return rel
