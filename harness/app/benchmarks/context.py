"""``python -m harness.bench context``: the cost of FullKV / Sliding / FoV at tensor level, on the tiny causal DiT
and on diffusers' real ``WanTransformer3DModel`` driven through the harness KV cache
(:mod:`harness.context.wan_kv`).

A configuration where attention dominates (many tokens per latent frame, one thin layer) is rolled out for growing
lengths up to 493 frames (124 latents, 31 chunks of 4). Per policy it prints the attention time per chunk against
the chunk index, the total time, the speedup vs FullKV, and the attention-FLOP ratio that bounds it (attention cost
of a chunk is proportional to queries x attended keys, so the bound is the ratio of attended-key sums). The
achieved fraction of that bound is the number to watch: budgeted policies should reach >= 80 % of it at 493 frames,
with a flat per-chunk cost while FullKV's grows linearly. Every point is repeated (``--repeats``) and reported as
min and median, so a loaded machine shows up as spread instead of a wrong ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    from harness.context import ContextPolicy

TARGET_OF_BOUND = 0.80


def _path(frames: int, H: int, W: int) -> tuple[np.ndarray, np.ndarray]:
    from trajectories import TrajectorySpec, build_path, latent_poses
    from trajectories.conventions import intrinsics_from_fov

    K = intrinsics_from_fov(60, W, H)
    path = build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), frames, 16, K, H, W)
    return latent_poses(path.c2w), K


def _rollout_tiny(policy: ContextPolicy, frames: int, args: argparse.Namespace,
                  timer_cls: Callable[[], Any]) -> tuple[float, Any, list[int], Any]:
    import torch

    from adapters.tiny_causal_dit.model import TinyCausalDiT, TinyDiTConfig, generate

    H = W = args.size
    cfg = TinyDiTConfig(dim=args.dim, heads=args.heads, layers=args.layers, mlp_ratio=1.0, steps=(1.0, 0.5))
    lat, K = _path(frames, H, W)
    img = (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8)
    dtype = getattr(torch, args.dtype)
    model = TinyCausalDiT(cfg).to(args.device, dtype)
    timer = timer_cls()
    t0 = time.perf_counter()
    ro = generate(model, img, lat, K, policy, seed=0, device=args.device, dtype=dtype, timer=timer)
    total = time.perf_counter() - t0
    attended = [len(e["context"]) + len(e["current"]) for e in ro.trace]
    return total, ro.attention_per_chunk, attended, ro.cache_bytes


def _rollout_wan(policy: ContextPolicy, frames: int, args: argparse.Namespace,
                 timer_cls: Callable[[], Any]) -> tuple[float, Any, list[int], Any]:
    """The same rollout on diffusers' WanTransformer3DModel (patch (1, 2, 2): ``size / 16`` squared tokens per
    latent frame, like the tiny DiT), latent grid ``size / 8``."""
    import torch

    from harness.context.wan_kv import WanKV, tiny_wan, wan_generate

    H = W = args.size
    lat, K = _path(frames, H, W)
    hw = (H // 8, W // 8)
    dtype = getattr(torch, args.dtype)
    # RoPE tables as long as the rollout (Wan's default 1024 positions end at --frames 4093)
    model = tiny_wan(layers=args.layers, heads=args.heads, head_dim=args.dim // args.heads, channels=4,
                     ffn_dim=args.dim, dtype=dtype, rope_positions=max(len(lat), *hw)).to(args.device)
    wan = WanKV(model, hw)
    g = torch.Generator().manual_seed(0)
    first = torch.randn(4, *hw, generator=g).to(args.device, dtype)
    text = torch.randn(1, 5, 16, generator=g).to(args.device, dtype)
    timer = timer_cls()
    t0 = time.perf_counter()
    ro = wan_generate(wan, first, lat, K, (H, W), policy, seed=0, text=text, timer=timer)
    total = time.perf_counter() - t0
    attended = [len(e["context"]) + len(e["current"]) for e in ro.trace]
    return total, ro.attention_per_chunk, attended, ro.cache_bytes


MODELS = {"tiny": ("tiny causal DiT (adapters/tiny_causal_dit)", _rollout_tiny),
          "wan": ("diffusers WanTransformer3DModel + harness KV cache (harness/context/wan_kv.py)", _rollout_wan)}


def _stats(xs: Sequence[float]) -> tuple[float, float]:
    return float(min(xs)), float(statistics.median(xs))


def run(args: argparse.Namespace) -> int:
    import torch

    args.size = getattr(args, "size", 256)
    args.dim = getattr(args, "dim", 128)
    args.heads = getattr(args, "heads", 2)
    args.layers = getattr(args, "layers", 1)
    args.dtype = getattr(args, "dtype", "float32")
    threads = getattr(args, "threads", None)
    if threads:
        torch.set_num_threads(int(threads))
    which = getattr(args, "model", "both")
    lengths = getattr(args, "lengths", None)
    lengths = [97, 193, 289, 385] if lengths is None else lengths  # `--lengths` alone: only --frames
    lengths = sorted({int(n) for n in lengths} | {args.frames})
    verdicts = []
    for name in (["tiny", "wan"] if which == "both" else [which]):
        verdicts += _run_model(name, lengths, args)
    print(f"\n== targets at {args.frames} frames: attention speedup / FLOP bound from the min and from the median "
          "times over repeats ==")
    for line in verdicts:
        print(line)
    return 0


def _run_model(model: str, lengths: list[int], args: argparse.Namespace) -> list[str]:
    import torch

    from harness.context import ContextPolicy
    from harness.context.kv_cache import AttentionTimer

    title, rollout = MODELS[model]
    policies = {"fullkv": ContextPolicy(name="fullkv"), "sliding": ContextPolicy(name="sliding", sink=4, recent=12),
                "fov": ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2)}
    S = (args.size // 16) ** 2
    reps = max(1, args.repeats)
    print(f"\n#### {title}\n{args.size}x{args.size} px -> {S} tokens per latent frame, dim {args.dim}, {args.heads} "
          f"heads, {args.layers} layer(s), device {args.device}, {args.dtype}, torch threads "
          f"{torch.get_num_threads()}, {reps} repeat(s)")
    # runs[n][policy] = list over repeats of (total s, attention s per chunk, attended per chunk, cache bytes)
    runs: dict[int, dict[str, list[tuple[Any, ...]]]] = {}
    for n in lengths:
        runs[n] = {p: [] for p in policies}
        for _ in range(reps):  # interleave policies so a load spike hits all of them alike
            for p, pol in policies.items():
                runs[n][p].append(rollout(pol, n, args, AttentionTimer))
    print("\n== totals per rollout length: min / median over repeats ==")
    print(f"{'frames':>6} {'policy':<8} {'total s':>13} {'attn s':>13} {'speedup':>13} {'attn speedup':>13} "
          f"{'FLOP bound':>10} {'of bound':>13} {'cache MB':>8}")
    summary = {}
    for n in lengths:
        full_tot = _stats([r[0] for r in runs[n]["fullkv"]])
        full_att = _stats([sum(r[1]) for r in runs[n]["fullkv"]])
        full_keys = runs[n]["fullkv"][0][2]
        for p in policies:
            tot = _stats([r[0] for r in runs[n][p]])
            att = _stats([sum(r[1]) for r in runs[n][p]])
            keys, nbytes = runs[n][p][0][2], runs[n][p][0][3]
            bound = sum(full_keys) / sum(keys)
            sp = (full_tot[0] / tot[0], full_tot[1] / tot[1])
            asp = (full_att[0] / att[0], full_att[1] / att[1])
            print(f"{n:>6} {p:<8} {tot[0]:6.2f}/{tot[1]:6.2f} {att[0]:6.2f}/{att[1]:6.2f} "
                  f"{sp[0]:5.2f}x/{sp[1]:5.2f}x {asp[0]:5.2f}x/{asp[1]:5.2f}x {bound:9.2f}x "
                  f"{asp[0] / bound:5.0%}/{asp[1] / bound:5.0%} {nbytes / 2**20:8.1f}")
            if n == args.frames:
                summary[p] = (sp, asp, bound)
    n = args.frames
    # per chunk: the median over repeats of each chunk's attention time (robust to a spike in one repeat)
    per = {p: np.median(np.array([r[1] for r in runs[n][p]]), axis=0) * 1e3 for p in policies}
    chunks = len(per["fullkv"])
    print(f"\n== attention time per chunk at {n} frames (ms, median over repeats) ==")
    print(f"{'chunk':>5} " + " ".join(f"{p:>9}" for p in policies))
    for k in list(range(0, chunks, max(1, chunks // 10))) + [chunks - 1]:
        print(f"{k:>5} " + " ".join(f"{per[p][k]:9.1f}" for p in policies))
    steady = slice(min(6, chunks // 2), chunks)  # skip the warm-up chunks (the budget is not full yet)
    xs = np.arange(chunks)[steady]
    print("\n== per-chunk growth over steady-state chunks (linear fit slope, ms per chunk; last/first ratio) ==")
    slopes = {}
    for p in policies:
        y = per[p][steady]
        slopes[p] = float(np.polyfit(xs, y, 1)[0])
        print(f"{p:<8} slope {slopes[p]:7.3f}  last/first {y[-3:].mean() / y[:3].mean():5.2f}")
    verdicts = []
    for p in ("sliding", "fov"):
        sp, asp, bound = summary[p]
        lo, med = asp[0] / bound, asp[1] / bound
        flat = abs(slopes[p]) <= 0.1 * abs(slopes["fullkv"])  # flat = under a tenth of FullKV's growth
        ok = "met" if min(lo, med) >= TARGET_OF_BOUND and flat else "MISSED"
        print(f"{p:<8} end-to-end {sp[0]:.2f}x/{sp[1]:.2f}x, attention {asp[0]:.2f}x/{asp[1]:.2f}x of a FLOP bound "
              f"{bound:.2f}x = {lo:.0%}/{med:.0%} of the bound (target >= {TARGET_OF_BOUND:.0%})")
        verdicts.append(f"{model:<5} {p:<8} {lo:5.0%} (min) / {med:5.0%} (median) of bound; per-chunk slope {slopes[p]:+.3f} ms/chunk "
                        f"vs fullkv {slopes['fullkv']:+.3f} ({'flat' if flat else 'GROWS'}) -> {ok}")
    return verdicts
