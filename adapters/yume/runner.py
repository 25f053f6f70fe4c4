"""YUME runner shim (runs inside the model's environment; targets stdstu12/YUME@111c3fa
fastvideo/sample/sample_5b.py, contract ``adapters/yume/contract.yaml``).

1. Seeds: upstream never seeds (``set_seed`` is commented out, sample_5b.py:1138-1140; ``Yume.generate`` draws a
   random seed when ``seed=-1``, wan23/textimage2video.py:348). The global RNGs are seeded and every
   ``Yume.generate`` call receives ``seed=`` (the stage index is added, so stages do not reuse one noise draw).
2. Stage captions: upstream prepares stage 0 with caption line 0 (sample_5b.py:902) and, after stage s, the next
   stage with line s (sample_5b.py:1089): stage s >= 1 would get line s-1 and the last line would never be used.
   Call k of ``Yume.generate`` is the preparation of stage k, so the replacement swaps the caption text it gets
   for line k of ``--captions`` (keeping the captioner's response that upstream appended), and stage s receives
   the controls of stage s.
3. Hard-coded paths: ``./Yume-5B-720P`` (sample_5b.py:1146) and the InternVL3-2B captioner folder (:1288) are
   replaced in the script's source by ``--checkpoint`` / ``--captioner`` (the shim stops if the literals are not
   there: another commit).
4. ``--verbatim-prompt FILE`` (the paper's setting, no prompt refinement): the captioner literal points at a
   stand-in instead, whose ``chat(tokenizer, pixel_values, question, generation_config)`` (sample_5b.py:804)
   answers with the file's text, so upstream appends the content prompt verbatim to every caption line (:817) and
   InternVL is never loaded.

Usage: ``python runner.py --seed S --captions caption.txt --checkpoint DIR (--captioner DIR | --verbatim-prompt
prompt.txt) -- fastvideo/sample/sample_5b.py <args>``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, marked  # noqa: E402

COMMIT = "111c3fab7fb020d1e261a68be6ec78a3fecc8d5b"
CHECKPOINT_LITERAL = '"./Yume-5B-720P"'
CAPTIONER_LITERAL = "'/mnt/petrelfs/maoxiaofeng/Yume_v2_release/InternVL3-2B-Instruct'"
VERBATIM = "harness://verbatim-prompt"  # the captioner path the stand-in answers for


class VerbatimCaptioner:
    """Stands in for InternVL3-2B where upstream loads it (sample_5b.py:1289-1295): ``chat`` returns the prompt."""

    def __init__(self, prompt: str):
        self.prompt = prompt

    def eval(self) -> VerbatimCaptioner:
        return self

    def to(self, *args: Any, **kwargs: Any) -> VerbatimCaptioner:
        return self

    def chat(self, tokenizer: Any, pixel_values: Any, question: Any, generation_config: Any = None, *args: Any,
             **kwargs: Any) -> str:
        return self.prompt


def patch_captioner(prompt: str, transformers: Any = None) -> None:
    """``AutoModel`` / ``AutoTokenizer.from_pretrained(VERBATIM, ...)`` return the stand-in (and no tokenizer);
    every other path loads as before."""
    if transformers is None:
        import transformers
    for name in ("AutoModel", "AutoTokenizer"):
        cls = getattr(transformers, name)
        original = cls.from_pretrained

        def from_pretrained(path: Any, *args: Any, _original: Any = original, _name: str = name,
                            **kwargs: Any) -> Any:
            if str(path) == VERBATIM:
                return VerbatimCaptioner(prompt) if _name == "AutoModel" else None
            return _original(path, *args, **kwargs)

        cls.from_pretrained = from_pretrained


def read_captions(path: str) -> list[str]:
    """Caption lines as upstream reads them (sample_5b.py:812-817: one per line, trailing newline stripped)."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def make_generate(original: Callable[..., Any], captions: list[str], seed: int) -> Callable[..., Any]:
    """Wrap ``Yume.generate(self, input_prompt, ...)``: call k gets caption line k and ``seed + k``."""
    calls = {"n": 0}

    @functools.wraps(original)
    def generate(self: Any, input_prompt: Any, *args: Any, **kwargs: Any) -> Any:
        k = calls["n"]
        calls["n"] += 1
        if k > 0:  # upstream passes line k-1 (+ the captioner's response) when preparing stage k
            if k >= len(captions):
                raise SystemExit(f"shim: Yume.generate called {k + 1} times but the caption file has {len(captions)} lines")
            given = captions[k - 1]
            if not str(input_prompt).startswith(given):
                raise SystemExit(f"shim: stage {k} caption does not start with line {k - 1} of the caption file; "
                                 f"the call site differs from {COMMIT[:12]}")
            input_prompt = captions[k] + str(input_prompt)[len(given):]
        kwargs.setdefault("seed", int(seed) + k)
        return original(self, input_prompt, *args, **kwargs)

    return marked(generate)


def resolve(target: str) -> tuple[Any, str]:
    """(owner, attribute name) of ``module.Class.method`` or ``module.function``."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1]
    raise SystemExit(f"shim: cannot import {target!r} from the YUME checkout")


def patch(opts: argparse.Namespace) -> list[tuple[str, str]]:
    owner, attr = resolve(opts.generate)
    setattr(owner, attr, make_generate(getattr(owner, attr), read_captions(opts.captions), opts.seed))
    repl: list[tuple[str, str]] = []
    if opts.checkpoint:
        repl.append((CHECKPOINT_LITERAL, repr(os.path.abspath(opts.checkpoint))))
    if opts.verbatim_prompt:
        with open(opts.verbatim_prompt, encoding="utf-8") as f:
            patch_captioner(f.read().strip())
        repl.append((CAPTIONER_LITERAL, repr(VERBATIM)))
    elif opts.captioner:
        repl.append((CAPTIONER_LITERAL, repr(os.path.abspath(opts.captioner))))
    return repl


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="yume/runner.py", allow_abbrev=False)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--captions", required=True)
    ap.add_argument("--generate", default="wan23.Yume.generate")
    ap.add_argument("--checkpoint")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--captioner")
    group.add_argument("--verbatim-prompt")
    ap.add_argument("--commit", default=COMMIT)
    return ap


if __name__ == "__main__":
    main_with(build_parser(), patch)
