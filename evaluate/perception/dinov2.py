"""DINOv2 features through ``transformers`` (``Dinov2Model``): the paper's encoder for Environment Visible (global)
and Human / Object Appearance (inside person / object masks).

Weights: ``<weights_root>/dinov2/`` is a ``save_pretrained`` folder (``config.json`` + ``model.safetensors``; an
optional ``preprocessor_config.json`` supplies the mean / std / input size). Pinned upstream: ``facebook/dinov2-base``
at ``f9e44c814b77203eaa57a6bdbbd535f21ede1415`` (the repository's latest commit, "Update README.md", 2024-01-17; the
same pin is used by e.g. embeddings-benchmark/mteb's model registry).

Recipe (one forward per frame serves both uses):

* the whole frame, no crop, is resized (bicubic, antialiased) so that its shorter side is ``short_side`` (224, the
  model's crop size) and both sides are multiples of the 14-pixel patch; RGB / 255, ImageNet mean / std;
* global feature = the CLS token after the final layer norm (``pooler_output``);
* masked feature = the mean of the final (layer-normed) patch tokens weighted by the fraction of each 14 x 14 patch
  that the mask covers (area resize of the mask to the patch grid); a mask that covers no patch gives a zero vector.

The centre crop of the Hugging Face processor is not applied: it would cut off the image borders (and the parts of
a target mask that lie there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ._loading import require_files, resolve_device, check_safetensors, corrupt

if TYPE_CHECKING:
    import torch
    from transformers import Dinov2Model

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Dinov2Encoder:
    """:class:`evaluate.perception.base.FeatureEncoder` with DINOv2 (``name = "dinov2"``, ``kind = "paper"``)."""

    name = "dinov2"
    kind = "paper"
    hf_repo: Optional[str] = "facebook/dinov2-base"
    revision: Optional[str] = "f9e44c814b77203eaa57a6bdbbd535f21ede1415"
    files: tuple[str, ...] = ("config.json", "model.safetensors")
    library = "transformers"
    recipe = ("whole frame, short side 224 (multiple of 14), ImageNet norm; global = CLS (pooler_output); "
              "masked = patch tokens averaged with mask-coverage weights")

    def __init__(self, model: Dinov2Model, device: str, short_side: int = 224,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD, batch_size: int = 16):
        self.model = model
        self.device = device
        patch = model.config.patch_size  # an int for DINOv2 (transformers also allows a (height, width) pair)
        if not isinstance(patch, int):
            raise TypeError(f"dinov2: config patch_size {patch!r}: one int (square patches) expected")
        self.patch = int(patch)
        self.short_side = int(short_side)
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)
        self.batch_size = batch_size

    def settings(self) -> dict[str, Any]:
        """The recipe values that change the features (for the caller's settings hash and ``metrics.json``)."""
        return {"backbone": self.name, "short_side": self.short_side, "patch": self.patch,
                "mean": [float(x) for x in self.mean], "std": [float(x) for x in self.std],
                "global": "cls(pooler_output)", "masked": "coverage-weighted patch-token mean"}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu") -> "Dinov2Encoder":
        """Load a ``save_pretrained`` folder; FileNotFoundError / ValueError name the backbone and the file."""
        weights_dir = Path(weights_dir)
        cfg_path, st_path = require_files(cls.name, weights_dir, cls.files)
        check_safetensors(cls.name, st_path)
        from transformers import Dinov2Model

        try:
            model = Dinov2Model.from_pretrained(str(weights_dir), local_files_only=True)
        except Exception as exc:  # shape mismatch, bad config
            raise corrupt(cls.name, st_path, exc) from exc
        dev = resolve_device(device)
        # transformers' stubs type .to(device) as taking the model: a device string is what it takes at run time
        model = model.to(dev).eval()  # type: ignore[arg-type]
        kw: dict[str, Any] = {}  # from the folder's preprocessor_config.json (JSON)
        proc = weights_dir / "preprocessor_config.json"
        if proc.is_file():
            p = json.loads(proc.read_text())
            kw["mean"] = p.get("image_mean", IMAGENET_MEAN)
            kw["std"] = p.get("image_std", IMAGENET_STD)
            crop = p.get("crop_size")
            if isinstance(crop, dict) and "height" in crop:
                kw["short_side"] = min(crop["height"], crop["width"])
        return cls(model, dev, **kw)

    # -- preprocessing ------------------------------------------------------------------------------------------
    def input_size(self, h: int, w: int) -> tuple[int, int]:
        """(height, width) of the network input for an ``h`` x ``w`` frame: shorter side ``short_side``, both
        rounded to a multiple of the patch size."""
        s = self.short_side / min(h, w)
        return (max(self.patch, int(round(h * s / self.patch)) * self.patch),
                max(self.patch, int(round(w * s / self.patch)) * self.patch))

    def _tensor(self, frames: np.ndarray) -> torch.Tensor:
        import torch
        import torch.nn.functional as F

        x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float() / 255.0
        x = F.interpolate(x, size=self.input_size(*frames.shape[1:3]), mode="bicubic", align_corners=False,
                          antialias=True).clamp_(0, 1)
        mean = torch.tensor(self.mean).view(1, 3, 1, 1)
        std = torch.tensor(self.std).view(1, 3, 1, 1)
        return ((x - mean) / std).to(self.device)

    # -- forward ------------------------------------------------------------------------------------------------
    def forward(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(CLS (N, D) float32, patch tokens (N, h, w, D) float32) of (N, H, W, 3) uint8 RGB frames."""
        import torch

        frames = _check_frames(frames)
        cls_out, tok_out = [], []
        gh, gw = (s // self.patch for s in self.input_size(*frames.shape[1:3]))
        with torch.inference_mode():
            for i in range(0, len(frames), self.batch_size):
                out = self.model(pixel_values=self._tensor(frames[i : i + self.batch_size]))
                hs = out.last_hidden_state.float()
                cls_out.append(out.pooler_output.float().cpu().numpy())
                # tokens after the CLS (and register tokens, when a checkpoint has them)
                tok = hs[:, hs.shape[1] - gh * gw :]
                tok_out.append(tok.reshape(len(tok), gh, gw, -1).cpu().numpy())
        return np.concatenate(cls_out), np.concatenate(tok_out)

    def mask_weights(self, masks: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
        """(N, h, w) float32 fraction of each patch covered by the (N, H, W) bool masks (area resize)."""
        import cv2

        gh, gw = grid
        return np.stack([cv2.resize(m.astype(np.float32), (gw, gh), interpolation=cv2.INTER_AREA) for m in masks])

    def encode(self, frames: np.ndarray, masks: Optional[np.ndarray] = None) -> np.ndarray:
        """(N, D) float32: the CLS feature of each frame, or with ``masks`` (N, H, W) bool the coverage-weighted
        mean of the patch tokens inside each mask (zeros for an empty mask)."""
        cls_feat, tokens = self.forward(frames)
        if masks is None:
            return cls_feat
        masks = np.asarray(masks, bool)
        if masks.shape != frames.shape[:3]:
            raise ValueError(f"dinov2: masks {masks.shape} do not match frames {frames.shape[:3]}")
        w = self.mask_weights(masks, tokens.shape[1:3])
        tot = w.sum(axis=(1, 2))
        pooled = np.einsum("nhw,nhwd->nd", w, tokens)
        return np.where(tot[:, None] > 0, pooled / np.maximum(tot, 1e-12)[:, None], 0.0).astype(np.float32)


def _check_frames(frames: np.ndarray) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (N, H, W, 3) uint8 RGB, got {frames.shape} {frames.dtype}")
    return frames
