"""A tiny ``SanaWMPipeline`` built in-process from diffusers' and transformers' REAL classes with seeded random
weights: ``SanaWMTransformer3DModel``, ``AutoencoderKLLTX2Video`` (spatial stride 32, temporal stride 8, like the
released VAE), a one-layer ``Gemma2ForCausalLM`` text encoder, a byte-level ``GemmaTokenizer`` and the flow-matching
Euler scheduler. Nothing is downloaded; the point is the code path (camera packing, per-token timesteps, VAE
decode), not the pictures.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ConfigDict, StrictInt
from pydantic.dataclasses import dataclass

from adapters.base import ModelConfigError
from harness.errors import UserError
from harness.sections import Section

if TYPE_CHECKING:
    from diffusers.pipelines.sana_wm.pipeline_sana_wm import SanaWMPipeline


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TinySanaArch(Section):
    """Sizes of the tiny build (``model.tiny``). ``hidden`` / ``heads`` / ``layers``: DiT width, heads, depth (every
    ``softmax_every_n``-th block uses softmax attention, the others the GDN linear attention);
    ``latent_channels``: VAE latent channels; ``vae_channels``: VAE encoder width; ``text_dim``: Gemma-2 hidden
    size (= the DiT caption channels); ``init_seed``: seeds every random initialisation."""

    section: ClassVar[str] = "model.tiny"
    error: ClassVar[type[UserError]] = ModelConfigError
    noun: ClassVar[str] = "field"

    hidden: StrictInt = 64
    heads: StrictInt = 2
    layers: StrictInt = 2
    softmax_every_n: StrictInt = 2
    linear_head_dim: StrictInt = 32
    latent_channels: StrictInt = 8
    vae_channels: StrictInt = 8
    text_dim: StrictInt = 32
    init_seed: StrictInt = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def byte_vocab() -> dict[str, int]:
    """Gemma's special tokens plus the 256 byte-fallback tokens: every string tokenizes, no vocab file needed."""
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    return vocab


def build_tiny_pipeline(arch: TinySanaArch) -> SanaWMPipeline:
    """The tiny ``SanaWMPipeline`` on the CPU in float32, every module in eval mode."""
    import torch

    # from the defining modules, not ``diffusers``' lazy top level (whose dummy stand-ins are what a type checker
    # sees there); the same classes (diffusers >=0.42.1,<0.43, pyproject.toml)
    from diffusers.models.autoencoders.autoencoder_kl_ltx2 import AutoencoderKLLTX2Video
    from diffusers.models.transformers.transformer_sana_wm import SanaWMTransformer3DModel
    from diffusers.pipelines.sana_wm.pipeline_sana_wm import SanaWMPipeline
    from diffusers.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler
    from transformers import Gemma2Config, Gemma2ForCausalLM, GemmaTokenizer

    with torch.random.fork_rng(devices=[]):  # seeded init; the global RNG state is untouched outside
        torch.manual_seed(arch.init_seed)
        vocab = byte_vocab()
        tokenizer = GemmaTokenizer(vocab=vocab)
        text_encoder = Gemma2ForCausalLM(Gemma2Config(
            vocab_size=len(vocab), hidden_size=arch.text_dim, intermediate_size=2 * arch.text_dim,
            num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=arch.text_dim // 2,
            pad_token_id=0, eos_token_id=1, bos_token_id=2))
        c = arch.vae_channels
        vae = AutoencoderKLLTX2Video(  # 3 spatiotemporal stages x patch 4 = stride 32 (space) and 8 (time)
            latent_channels=arch.latent_channels, block_out_channels=(c, c, c),
            down_block_types=("LTX2VideoDownBlock3D",) * 3, downsample_type=("spatiotemporal",) * 3,
            layers_per_block=(1, 1, 1, 1), spatio_temporal_scaling=(True, True, True),
            decoder_block_out_channels=(c, 2 * c, 4 * c), decoder_layers_per_block=(1, 1, 1, 1),
            decoder_spatio_temporal_scaling=(True, True, True), decoder_inject_noise=(False,) * 4,
            upsample_type=("spatiotemporal",) * 3, upsample_residual=(True,) * 3, upsample_factor=(2, 2, 2))
        transformer = SanaWMTransformer3DModel(
            in_channels=arch.latent_channels, num_layers=arch.layers, hidden_size=arch.hidden,
            num_attention_heads=arch.heads, softmax_every_n=arch.softmax_every_n,
            linear_head_dim=arch.linear_head_dim, caption_channels=arch.text_dim,
            chunk_plucker_post_attn_blocks=arch.layers, mlp_ratio=2.0)
        # The released model zero-initialises its Plücker embedder (trained from there); give the tiny one weights
        # so the camera path changes the output and tests can see it.
        torch.nn.init.normal_(transformer.plucker_embedder.proj.weight, std=0.02)
    # train(False) is what transformers' (unannotated) PreTrainedModel.eval() calls
    pipe = SanaWMPipeline(tokenizer=tokenizer, text_encoder=text_encoder.train(False), vae=vae.eval(),
                          transformer=transformer.eval(), scheduler=FlowMatchEulerDiscreteScheduler())
    return pipe
