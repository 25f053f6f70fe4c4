"""``python -m harness.bench context``: the cost of FullKV / Sliding / FoV at tensor level on the tiny causal DiT.

A configuration where attention dominates (many tokens per latent frame, one thin layer) is rolled out for growing
lengths up to 493 frames (124 latents, 31 chunks of 4). Per policy it prints the attention time per chunk against
the chunk index, the total time, the speedup vs FullKV, and the attention-FLOP ratio that bounds it (attention cost
of a chunk is proportional to queries x attended keys, so the bound is the ratio of attended-key sums). The
achieved fraction of that bound is the number to watch: budgeted policies should reach >= 80 % of it at 493 frames,
with a flat per-chunk cost while FullKV's grows linearly.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _rollout(policy, frames: int, args, timer_cls):
    import torch

    from adapters.tiny_causal_dit.model import TinyCausalDiT, TinyDiTConfig, generate
    from trajectories import TrajectorySpec, build_path
    from trajectories.conventions import intrinsics_from_fov

    H = W = args.size
    cfg = TinyDiTConfig(dim=args.dim, heads=args.heads, layers=args.layers, mlp_ratio=1.0, steps=(1.0, 0.5))
    K = intrinsics_from_fov(60, W, H)
    path = build_path(TrajectorySpec(name="lrlr", cycles=("left", "left")), frames, 16, K, H, W)
    lat = path.c2w[::4]
    img = (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8)
    dtype = getattr(torch, args.dtype)
    model = TinyCausalDiT(cfg).to(args.device, dtype)
    timer = timer_cls()
    t0 = time.perf_counter()
    ro = generate(model, img, lat, K, policy, seed=0, device=args.device, dtype=dtype, timer=timer)
    total = time.perf_counter() - t0
    attended = [len(e["context"]) + len(e["current"]) for e in ro.trace]
    return total, ro.attention_per_chunk, attended, ro.cache_bytes


def run(args: argparse.Namespace) -> int:
    import torch

    from harness.context import ContextPolicy
    from harness.context.kv_cache import AttentionTimer

    args.size = getattr(args, "size", 256)
    args.dim = getattr(args, "dim", 128)
    args.heads = getattr(args, "heads", 2)
    args.layers = getattr(args, "layers", 1)
    args.dtype = getattr(args, "dtype", "float32")
    policies = {"fullkv": ContextPolicy(name="fullkv"), "sliding": ContextPolicy(name="sliding", sink=4, recent=12),
                "fov": ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2)}
    S = (args.size // 16) ** 2
    print(f"tiny causal DiT, {args.size}x{args.size} px -> {S} tokens per latent frame, dim {args.dim}, "
          f"{args.heads} heads, {args.layers} layer(s), device {args.device}, {args.dtype}, torch threads "
          f"{torch.get_num_threads()}")
    lengths = sorted({97, 193, 289, 385, args.frames})
    results: dict[int, dict[str, tuple]] = {}
    for n in lengths:
        results[n] = {}
        for name, pol in policies.items():
            best = None
            for _ in range(max(1, args.repeats)):
                r = _rollout(pol, n, args, AttentionTimer)
                if best is None or r[0] < best[0]:
                    best = r
            results[n][name] = best
    print("\n== totals per rollout length (best of repeats) ==")
    print(f"{'frames':>6} {'policy':<8} {'total s':>8} {'attn s':>8} {'speedup':>8} {'attn speedup':>12} "
          f"{'FLOP bound':>10} {'of bound':>8} {'cache MB':>8}")
    summary = {}
    for n in lengths:
        full_total, full_attn, full_keys, _ = results[n]["fullkv"]
        for name in policies:
            total, attn, keys, nbytes = results[n][name]
            bound = sum(full_keys) / sum(keys)
            sp, asp = full_total / total, sum(full_attn) / sum(attn)
            print(f"{n:>6} {name:<8} {total:8.2f} {sum(attn):8.2f} {sp:7.2f}x {asp:11.2f}x {bound:9.2f}x "
                  f"{asp / bound:7.0%} {nbytes / 2**20:8.1f}")
            if n == args.frames:
                summary[name] = (sp, asp, bound)
    n = args.frames
    print(f"\n== attention time per chunk at {n} frames (ms) ==")
    per = {name: np.array(results[n][name][1]) * 1e3 for name in policies}
    chunks = len(per["fullkv"])
    print(f"{'chunk':>5} " + " ".join(f"{p:>9}" for p in policies))
    for k in list(range(0, chunks, max(1, chunks // 10))) + [chunks - 1]:
        print(f"{k:>5} " + " ".join(f"{per[p][k]:9.1f}" for p in policies))
    steady = slice(6, chunks)
    print("\n== per-chunk growth over steady-state chunks (linear fit slope, ms per chunk; last/first ratio) ==")
    xs = np.arange(chunks)[steady]
    for p in policies:
        y = per[p][steady]
        slope = np.polyfit(xs, y, 1)[0]
        print(f"{p:<8} slope {slope:7.3f}  last/first {y[-3:].mean() / y[:3].mean():5.2f}")
    print("\n== at", n, "frames ==")
    for p in ("sliding", "fov"):
        sp, asp, bound = summary[p]
        print(f"{p:<8} end-to-end {sp:.2f}x, attention {asp:.2f}x of a FLOP bound {bound:.2f}x "
              f"= {asp / bound:.0%} of the bound (target >= 80%)")
    return 0
