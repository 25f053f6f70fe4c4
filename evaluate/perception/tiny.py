"""Tiny random-weight models of every learned backbone, built from the libraries' own classes and written in the
real on-disk formats into ``<weights_root>/<name>/``: for tests, demos and benchmarks of the plumbing on a CPU.

Their outputs are meaningless (seeded random weights); everything else is the real path: the same files, loaders,
pre-processing and conventions as the pinned checkpoints. ``write_tiny_weights(root)`` writes all of them.
The ``vipe`` entry writes a stand-in command that honours ViPE's file contract (a known smooth yaw path), since
ViPE itself runs only in its own CUDA environment.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

if TYPE_CHECKING:
    from transformers import Sam2VideoConfig


def tiny_sam2_config() -> Sam2VideoConfig:
    """A ~1 M-parameter ``Sam2VideoConfig`` (128-pixel input). Traps: the first block of a Hiera stage must not be
    a global-attention block; the memory attention's cross-attention takes 64-d memories
    (``memory_encoder_output_channels``), and the hidden size must exceed them (object pointers are split)."""
    from transformers import Sam2VideoConfig

    vision = dict(
        backbone_config=dict(model_type="sam2_hiera_det_model", hidden_size=16, num_attention_heads=1,
                             blocks_per_stage=[1, 1, 2, 1], embed_dim_per_stage=[16, 32, 64, 128],
                             num_attention_heads_per_stage=[1, 1, 1, 1], global_attention_blocks=[3],
                             window_size_per_stage=[4, 4, 4, 4], window_positional_embedding_background_size=[4, 4],
                             image_size=[128, 128]),
        backbone_channel_list=[128, 64, 32, 16], fpn_hidden_size=128,
        backbone_feature_sizes=[[32, 32], [16, 16], [8, 8]])
    return Sam2VideoConfig(
        vision_config=vision, image_size=128, prompt_encoder_config=dict(hidden_size=128, image_size=128),
        mask_decoder_config=dict(hidden_size=128, mlp_dim=64, iou_head_hidden_dim=32, num_attention_heads=2),
        memory_attention_hidden_size=128, memory_attention_num_layers=1, memory_attention_feed_forward_hidden_size=64,
        memory_encoder_hidden_size=128, memory_encoder_output_channels=64, mask_downsampler_embed_dim=128,
        memory_fuser_embed_dim=128, memory_fuser_intermediate_dim=64, memory_attention_rope_feat_sizes=[8, 8],
        num_maskmem=3)


def write_dinov2(d: Path) -> None:
    """A 2-layer ``Dinov2Model`` (hidden 32, patch 14) as a ``save_pretrained`` folder."""
    from transformers import Dinov2Config, Dinov2Model

    # intermediate_size is kept as an extra config attribute (Dinov2 sizes its MLP with mlp_ratio): the files stay as
    # they were written
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,  # type: ignore[call-arg]
                             intermediate_size=64, image_size=56, patch_size=14)).save_pretrained(d)


def write_sam2(d: Path) -> None:
    from transformers import Sam2VideoModel

    from .sam2_tracker import default_processor

    Sam2VideoModel(tiny_sam2_config()).save_pretrained(d)
    default_processor(128).save_pretrained(d)


def write_da3(d: Path) -> None:
    """The smallest real preset (``da3-small``, ViT-S; ~34 M parameters, 137 MB) in the Hub layout: the package
    wrapper's state saved by safetensors' ``save_model`` and ``config.json`` naming the preset."""
    import torch
    from safetensors.torch import save_model

    from .da3 import import_da3

    cfg, registry = import_da3()
    wrapper = torch.nn.Module()
    wrapper.model = cfg.create_object(cfg.load_config(registry["da3-small"]))
    d.mkdir(parents=True, exist_ok=True)
    save_model(wrapper, str(d / "model.safetensors"))
    from harness.io import write_text

    write_text(d / "config.json", json.dumps({"model_name": "da3-small"}))


def write_arcface(d: Path, detector_bias: float = 5.0) -> None:
    """``w600k_r50.onnx``: a (N, 3, 112, 112) -> (N, 16) recogniser; ``det_10g.onnx``: a detector with
    insightface's 9-output contract (scores, box distances, 5 landmarks at strides 8 / 16 / 32, 2 anchors), its
    score bias ``detector_bias`` (high: faces everywhere). Exported with the TorchScript ONNX exporter."""
    import torch

    class Recogniser(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 4, 4)
            self.fc = torch.nn.Linear(8 * 28 * 28, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.fc(torch.relu(self.conv(x)).flatten(1))
            return out

    class Detector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = torch.nn.ModuleList([torch.nn.Conv2d(3, 2 + 8 + 20, 1) for _ in range(3)])

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            sc, bb, kp = [], [], []
            for head, stride in zip(self.heads, (8, 16, 32)):
                y = head(torch.nn.functional.avg_pool2d(x, stride))[0].permute(1, 2, 0)
                sc.append(torch.sigmoid(y[..., :2]).reshape(-1, 1))
                bb.append(torch.relu(y[..., 2:10]).reshape(-1, 4) + 1.0)
                kp.append(y[..., 10:].reshape(-1, 10))
            return tuple(sc + bb + kp)

    d.mkdir(parents=True, exist_ok=True)
    example = (torch.zeros(1, 3, 112, 112),)  # export's args: a tuple of the inputs (one tensor)
    torch.onnx.export(Recogniser().eval(), example, str(d / "w600k_r50.onnx"),
                      input_names=["input.1"], output_names=["embedding"], dynamic_axes={"input.1": {0: "N"}},
                      dynamo=False)
    det = Detector().eval()
    with torch.no_grad():
        for h in det.heads:
            h.bias[:2] = detector_bias  # type: ignore[operator]  # a Conv2d's bias: torch types it loosely
    torch.onnx.export(det, (torch.zeros(1, 3, 64, 64),), str(d / "det_10g.onnx"), input_names=["input.1"],
                      dynamic_axes={"input.1": {2: "H", 3: "W"}}, dynamo=False)


def write_musiq(d: Path) -> None:
    """pyiqa's MUSIQ at its real size (the checkpoint must fit the architecture; ~108 MB)."""
    import torch
    from pyiqa.archs.musiq_arch import MUSIQ

    d.mkdir(parents=True, exist_ok=True)
    torch.save(MUSIQ(pretrained=False).state_dict(), d / "musiq_spaq_ckpt-358bb6af.pth")


def write_laion(d: Path) -> None:
    """A tiny CLIP of the ``clip`` package's own class saved as a TorchScript archive (the format of OpenAI's
    ``ViT-L-14.pt``), and pyiqa's LAION MLP at its width."""
    import clip.model
    import torch
    from pyiqa.archs.laion_aes_arch import MLP

    c = clip.model.CLIP(embed_dim=16, image_resolution=224, vision_layers=1, vision_width=64, vision_patch_size=32,
                        context_length=8, vocab_size=32, transformer_width=64, transformer_heads=1,
                        transformer_layers=1).eval()
    d.mkdir(parents=True, exist_ok=True)
    traced = torch.jit.trace(  # type: ignore[no-untyped-call]  # torch leaves jit.trace unannotated
        c, (torch.zeros(1, 3, 224, 224), torch.zeros(1, 8, dtype=torch.long)), check_trace=False)
    torch.jit.save(traced, str(d / "ViT-L-14.pt"))
    torch.save(MLP(16).state_dict(), d / "sac+logos+ava1-l14-linearMSE.pth")


VIPE_STANDIN = textwrap.dedent('''
    """Stand-in for `vipe infer VIDEO --output DIR --pipeline NAME` (tests / demos only): honours ViPE's file
    contract, DIR/pose/<stem>.npz with data (M, 4, 4) OpenCV camera-to-world and inds (M,), for a path yawing
    10 degrees per frame around a fixed centre, in a world that is not frame 0's camera. VIPE_STANDIN_SKIP lists
    frame indices to leave out."""
    import os, sys, pathlib
    import av, numpy as np
    args = sys.argv[1:]
    assert args[0] == "infer", args
    video = pathlib.Path(args[1]); out = pathlib.Path(args[args.index("--output") + 1])
    with av.open(str(video)) as c:
        n = sum(1 for _ in c.decode(video=0))
    a = np.radians(10.0) * np.arange(n)
    c2w = np.tile(np.eye(4), (n, 1, 1))
    c2w[:, 0, 0] = np.cos(a); c2w[:, 0, 2] = np.sin(a); c2w[:, 2, 0] = -np.sin(a); c2w[:, 2, 2] = np.cos(a)
    c2w[:, :3, 3] = [5.0, 1.0, -2.0]
    skip = {int(x) for x in os.environ.get("VIPE_STANDIN_SKIP", "").split(",") if x}
    keep = [i for i in range(n) if i not in skip]
    (out / "pose").mkdir(parents=True)
    np.savez(out / "pose" / (video.stem + ".npz"), data=c2w[keep], inds=np.array(keep))
''')


def write_vipe_standin(d: Path, script: str = VIPE_STANDIN, env: Optional[dict[str, str]] = None) -> None:
    """``vipe.json`` pointing at a stand-in script run by this interpreter (labelled a stand-in in its docstring)."""
    d.mkdir(parents=True, exist_ok=True)
    from harness.io import write_text

    write_text(d / "standin_vipe.py", script, scrubbed=True)  # a program, verbatim
    write_text(d / "vipe.json", json.dumps({"command": [sys.executable, str(d / "standin_vipe.py")],
                                             "pipeline": "default", "timeout_s": 120, "env": env or {}}))


WRITERS: dict[str, Callable[[Path], None]] = {
    "dinov2": write_dinov2, "arcface": write_arcface, "sam2": write_sam2, "da3": write_da3,
    "vipe": write_vipe_standin, "musiq-spaq": write_musiq, "laion": write_laion,
}


def write_tiny_weights(root: Path, names: Iterable[str] = tuple(WRITERS), seed: int = 0) -> dict[str, Path]:
    """Write the tiny model of each of ``names`` to ``root/<name>/`` (each seeded with ``seed``); return the folders."""
    import torch

    out = {}
    for name in names:
        if name not in WRITERS:
            raise ValueError(f"no tiny model for backbone {name!r}; known: {sorted(WRITERS)}")
        torch.manual_seed(seed)
        d = Path(root) / name
        WRITERS[name](d)
        out[name] = d
    return out
