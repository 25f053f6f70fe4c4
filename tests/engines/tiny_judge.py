"""A tiny vision-language judge for ``transformers serve``, built here from transformers' own classes with random
weights (nothing is downloaded): ``python -m tests.engines.tiny_judge <folder>``.

Qwen2-VL (its image processor keeps a frame at a few tokens, so 63 frames fit in a few hundred) with one text
layer and one vision block, a word-level tokenizer made from scratch and a chat template that places each image.

The vocabulary makes a random model's replies checkable: apart from the chat's special tokens and an unknown-word
token, every token is one *complete* checklist answer (``{"event_started": ..., "answers": {q1..q8}}``, yes/no drawn
from a seeded generator). With ``max_tokens=1`` a reply is one such answer (the judge parses it; which one is up
to the random weights); with ``max_tokens=2`` it is two answers in a row, which the judge must refuse rather than
take the first. So that a reply never ends before its first token, the output rows of the special tokens are zero
(their logit is 0 while some answer's is almost surely higher); everything else is the classes' random init.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

N_ANSWERS = 24
QIDS = [f"q{i}" for i in range(1, 9)]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>", "[UNK]"]
#: the turn headers, one token each so that the prompt decodes back exactly: transformers serve finds the start of
#: the reply by the text "<|im_start|>assistant\n" (its Qwen response template)
ROLES = ["system\n", "user\n", "assistant\n"]
#: the chat template: Qwen-style turns, an image as vision_start + image_pad + vision_end (the processor expands
#: image_pad to the image's token count)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def answers(n: int = N_ANSWERS, seed: int = 0) -> list[str]:
    """``n`` distinct checklist answers (compact JSON), yes/no drawn from a seeded generator."""
    import random

    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        yn = ["yes" if rng.random() < 0.5 else "no" for _ in range(9)]
        a = json.dumps({"event_started": yn[0], "answers": dict(zip(QIDS, yn[1:]))}, separators=(",", ":"))
        if a not in out:
            out.append(a)
    return out


def build(folder: Path, seed: int = 0) -> Path:
    """Write the model, tokenizer and processor to ``folder`` (``save_pretrained``); returns it."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import (PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration,
                              Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor)

    folder = Path(folder)
    words = answers(seed=seed)
    vocab = {t: i for i, t in enumerate(SPECIAL + words)}
    core = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # an answer has no space: one word, one token
    core.decoder = decoders.Fuse()  # tokens back to text as they were, no spaces put in between
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", bos_token=None)
    tok.add_special_tokens({"additional_special_tokens": SPECIAL[1:7]})
    tok.add_tokens([AddedToken(r, normalized=False, special=False) for r in ROLES])
    tok.chat_template = CHAT_TEMPLATE
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL}
    # a frame of the judge's size (64 px longer side) becomes 2x3 merged patches: 6 tokens
    image_processor = Qwen2VLImageProcessor(min_pixels=28 * 28, max_pixels=56 * 84, patch_size=14,
                                            temporal_patch_size=2, merge_size=2)
    processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tok, chat_template=CHAT_TEMPLATE,
                                 video_processor=Qwen2VLVideoProcessor())  # required by the class, unused

    cfg = Qwen2VLConfig(
        text_config={"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 8192,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                     "bos_token_id": ids["<|im_start|>"], "eos_token_id": ids["<|im_end|>"],
                     "pad_token_id": ids["<|endoftext|>"]},
        vision_config={"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 2,
                       "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # the reply's first token is an answer, never a special token (see the module doc)
        model.lm_head.weight[: len(SPECIAL)] = 0.0
        model.lm_head.weight[len(vocab):] = 0.0  # the turn headers
    model.generation_config.do_sample = False
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    (folder / "answers.json").write_text(json.dumps(words, indent=1))  # the vocabulary's answers, for the tests
    return folder


if __name__ == "__main__":
    out = build(Path(sys.argv[1]))
    print(f"tiny judge model written to {out}")
