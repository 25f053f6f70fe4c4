"""Imaging quality (MUSIQ-SPAQ) and aesthetic quality (LAION aesthetic predictor) through ``pyiqa``'s own
architectures, with VBench's preprocessing (``Vchitect/VBench`` ``vbench/imaging_quality.py`` and
``vbench/aesthetic_quality.py``). Scores are per frame, normalised to [0, 1] as the paper reports them.

MUSIQ-SPAQ (``name = "musiq-spaq"``): ``pyiqa.archs.musiq_arch.MUSIQ(pretrained_model_path=<ckpt>)`` in eval mode
(the call VBench makes; ``pyiqa.create_metric("musiq")`` would be the KonIQ-10k weights, not SPAQ). Weights:
``<weights_root>/musiq-spaq/musiq_spaq_ckpt-358bb6af.pth`` from ``chaofengc/IQA-PyTorch-Weights``. Recipe: RGB / 255;
if the longer side exceeds 512 it is resized to 512 (bilinear, ``antialias=False``, on the uint8 frames as VBench
does), no crop; then / 255; score / 100.

LAION aesthetic (``name = "laion"``): the **v2 "improved" MLP predictor** (``sac+logos+ava1-l14-linearMSE.pth``,
``pyiqa.archs.laion_aes_arch.LAIONAes``) on OpenAI CLIP ViT-L/14 image features. Why v2 and not VBench's v1 linear
head: it is the predictor pyiqa's ``laion_aes`` ships (the library this harness standardises on), the one most
downstream users mean by "LAION aesthetic score", and the paper names only "the LAION aesthetic predictor based on CLIP
features". v1 and v2 scores are not comparable; every ``metrics.json`` records which one was used. Weights:
``<weights_root>/laion/ViT-L-14.pt`` (OpenAI's CLIP checkpoint, the file ``clip.load("ViT-L/14")`` downloads) and
``<weights_root>/laion/sac+logos+ava1-l14-linearMSE.pth``. ``LAIONAes`` always calls ``clip.load("ViT-L/14")``,
which would download; :meth:`LaionAesthetic.load` points that call at the local file for the duration of the
construction. Recipe (VBench's ``clip_transform(224)``): bicubic resize of the uint8 frame's shorter side to 224
with ``antialias=False``, centre crop 224, / 255, CLIP mean / std; features L2-normalised in float32; MLP; score / 10.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol

import numpy as np

from ._loading import corrupt, load_state_strict, require_files, resolve_device, torch_load

if TYPE_CHECKING:
    import torch

IQA_WEIGHTS_REPO = "chaofengc/IQA-PyTorch-Weights"
IQA_WEIGHTS_REVISION = "0df2df423c65f6a64209309695f3845727431027"
CLIP_VIT_L14_URL = ("https://openaipublic.azureedge.net/clip/models/"
                    "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836/ViT-L-14.pt")
OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _check_frames(name: str, frames: np.ndarray) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"{name}: frames must be (N, H, W, 3) uint8 RGB, got {frames.shape} {frames.dtype}")
    return frames


class _Batching(Protocol):
    """What :func:`_batched` uses of a scorer."""

    name: str
    device: str
    batch_size: int

    def preprocess(self, frames: np.ndarray) -> torch.Tensor: ...


class _ClipVisual(Protocol):
    input_resolution: int


class _ClipModel(Protocol):
    """What the aesthetic scorer uses of OpenAI CLIP's model (``clip.model.CLIP``)."""

    visual: _ClipVisual

    def encode_image(self, image: torch.Tensor) -> torch.Tensor: ...


class _LaionNet(Protocol):
    """What the aesthetic scorer uses of ``pyiqa.archs.laion_aes_arch.LAIONAes``: its CLIP model (first of
    ``clip_model``) and its MLP head."""

    clip_model: list[_ClipModel]
    mlp: torch.nn.Module


def _batched(scorer: _Batching, frames: np.ndarray, head: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
    """(N,) float64 raw scores of (N, H, W, 3) uint8 RGB frames: ``scorer.preprocess`` then ``head`` per batch of
    ``scorer.batch_size`` on ``scorer.device``, without gradients."""
    import torch

    frames = _check_frames(scorer.name, frames)
    out = []
    with torch.inference_mode():
        for i in range(0, len(frames), scorer.batch_size):
            x = scorer.preprocess(frames[i : i + scorer.batch_size]).to(scorer.device)
            out.append(head(x).reshape(-1).double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


class MusiqSpaq:
    """:class:`evaluate.perception.base.QualityScorer` for Imaging quality."""

    name = "musiq-spaq"
    kind = "paper"
    hf_repo: Optional[str] = IQA_WEIGHTS_REPO
    revision: Optional[str] = IQA_WEIGHTS_REVISION
    files: tuple[str, ...] = ("musiq_spaq_ckpt-358bb6af.pth",)
    known_sha256_prefix = {"musiq_spaq_ckpt-358bb6af.pth": "358bb6af"}  # pyiqa names files by sha256 prefix
    library = "pyiqa"
    recipe = "pyiqa MUSIQ (SPAQ ckpt), longer side <= 512 (antialias=False), RGB/255, score / 100"

    def __init__(self, net: torch.nn.Module, device: str, max_side: int = 512, batch_size: int = 8):
        self.net, self.device, self.max_side, self.batch_size = net, device, max_side, batch_size

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "max_side": self.max_side, "antialias": False, "scale": "1/100"}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu") -> "MusiqSpaq":
        (ckpt,) = require_files(cls.name, Path(weights_dir), cls.files)
        from pyiqa.archs.arch_util import clean_state_dict
        from pyiqa.archs.musiq_arch import MUSIQ

        state = torch_load(cls.name, ckpt)
        if not isinstance(state, dict):
            raise corrupt(cls.name, ckpt, f"expected a state dict, got {type(state).__name__}")
        net = MUSIQ(pretrained=False)  # the SPAQ head (num_class=1); weights loaded strictly below
        load_state_strict(cls.name, net, clean_state_dict(state), ckpt)
        dev = resolve_device(device)
        return cls(net.to(dev).eval(), dev)

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        """(N, 3, h, w) float32 in [0, 1]: longer side resized to ``max_side`` when larger (antialias=False)."""
        import torch
        import torchvision.transforms.functional as TF
        from torchvision.transforms import InterpolationMode

        x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)  # uint8, as VBench resizes it
        h, w = x.shape[-2:]
        if max(h, w) > self.max_side:
            s = self.max_side / max(h, w)
            x = TF.resize(x, [int(s * h), int(s * w)], interpolation=InterpolationMode.BILINEAR, antialias=False)
        return x.float() / 255.0

    def score(self, frames: np.ndarray) -> np.ndarray:
        """(N,) float64 MUSIQ-SPAQ / 100 of (N, H, W, 3) uint8 RGB frames."""
        return _batched(self, frames, self.net) / 100.0


@contextlib.contextmanager
def _local_clip(path: Path) -> Iterator[None]:
    """Within the block, ``clip.load(<any name>)`` loads the local checkpoint ``path`` on the CPU (no download)."""
    from pyiqa.archs import laion_aes_arch

    clip_mod = laion_aes_arch.clip
    original = clip_mod.load

    def load_local(name: str, *args: object, **kwargs: object) -> object:
        return original(str(path), device="cpu", jit=False)

    clip_mod.load = load_local
    try:
        yield
    finally:
        clip_mod.load = original


class LaionAesthetic:
    """:class:`evaluate.perception.base.QualityScorer` for Aesthetic quality (LAION v2 MLP on CLIP ViT-L/14)."""

    name = "laion"
    kind = "paper"
    hf_repo: Optional[str] = IQA_WEIGHTS_REPO  # the MLP; the CLIP backbone comes from OpenAI's URL below
    revision: Optional[str] = IQA_WEIGHTS_REVISION
    source_urls = {"ViT-L-14.pt": CLIP_VIT_L14_URL}
    files: tuple[str, ...] = ("ViT-L-14.pt", "sac+logos+ava1-l14-linearMSE.pth")
    # OpenAI publishes the CLIP file's sha256 in its URL (and clip.load checks it)
    known_sha256 = {"ViT-L-14.pt": "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836"}
    library = "pyiqa+openai-clip"
    recipe = ("LAION v2 MLP (sac+logos+ava1-l14-linearMSE) on OpenAI CLIP ViT-L/14, VBench clip_transform(224) "
              "(bicubic, antialias=False, centre crop), L2-normalised features, score / 10")
    predictor = "laion-v2-mlp"

    def __init__(self, net: _LaionNet, device: str, batch_size: int = 32):
        self.net, self.device, self.batch_size = net, device, batch_size
        self.clip = net.clip_model[0]
        self.size = int(self.clip.visual.input_resolution)

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "predictor": self.predictor, "clip": "openai-clip ViT-L/14", "size": self.size,
                "resize": "bicubic shorter side, antialias=False, centre crop", "scale": "1/10"}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu") -> "LaionAesthetic":
        clip_path, mlp_path = require_files(cls.name, Path(weights_dir), cls.files)
        from pyiqa.archs.arch_util import clean_state_dict
        from pyiqa.archs.laion_aes_arch import LAIONAes

        try:
            with _local_clip(clip_path):
                net = LAIONAes(pretrained=False)
        except Exception as exc:  # an unreadable / truncated CLIP file
            raise corrupt(cls.name, clip_path, exc) from exc
        state = torch_load(cls.name, mlp_path)
        if not isinstance(state, dict):
            raise corrupt(cls.name, mlp_path, f"expected a state dict, got {type(state).__name__}")
        load_state_strict(cls.name, net.mlp, clean_state_dict(state), mlp_path)
        dev = resolve_device(device)
        net = net.to(dev).eval()
        net.clip_model[0] = net.clip_model[0].to(dev).float().eval()
        return cls(net, dev)

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        """VBench ``clip_transform``: (N, 3, S, S) CLIP-normalised, S = the CLIP input resolution (224)."""
        import torch
        import torchvision.transforms.functional as TF
        from torchvision.transforms import InterpolationMode

        x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)  # resized as uint8, like VBench
        x = TF.resize(x, self.size, interpolation=InterpolationMode.BICUBIC, antialias=False)
        x = TF.center_crop(x, self.size).float() / 255.0
        normalised: torch.Tensor = TF.normalize(x, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)
        return normalised

    def score(self, frames: np.ndarray) -> np.ndarray:
        """(N,) float64 LAION aesthetic / 10 of (N, H, W, 3) uint8 RGB frames."""
        import torch

        def head(x: torch.Tensor) -> torch.Tensor:  # LAIONAes.forward without its own (antialiased) resize
            emb = torch.nn.functional.normalize(self.clip.encode_image(x).float(), p=2, dim=-1)
            scores: torch.Tensor = self.net.mlp(emb)
            return scores

        return _batched(self, frames, head) / 10.0
