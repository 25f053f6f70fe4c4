"""A module's ``time`` that advances by fixed steps: timings a test can state exactly."""

from __future__ import annotations


class StepClock:
    """Each read of ``perf_counter`` adds ``wall_step`` seconds to the wall clock (from 100), of ``process_time``
    ``cpu_step`` seconds to the CPU clock (from 10)."""

    def __init__(self, wall_step: float = 5.0, cpu_step: float = 2.0) -> None:
        self.wall, self.cpu = 100.0, 10.0
        self.wall_step, self.cpu_step = wall_step, cpu_step

    def perf_counter(self) -> float:
        self.wall += self.wall_step
        return self.wall

    def process_time(self) -> float:
        self.cpu += self.cpu_step
        return self.cpu


def fake_cuda_attention(monkeypatch, time_module, kernel_s: float = 5.0):
    """A GPU's timing on a CPU: ``time_module.perf_counter`` reads a clock (from 100) that only
    ``torch.cuda.synchronize`` moves, by ``kernel_s`` (the kernels finish). Returns ``(synced, on_cuda)``: the clock's
    value at each synchronise, and a function that makes ``F.scaled_dot_product_attention``'s outputs claim to be
    on CUDA (``on_cuda(True)``) or not."""
    import torch
    import torch.nn.functional as F

    class OnCuda(torch.Tensor):
        @property
        def is_cuda(self):  # only these outputs claim to be on a GPU
            return True

    clock, synced = [100.0], []

    def synchronize():
        synced.append(clock[0])
        clock[0] += kernel_s

    stock = F.scaled_dot_product_attention
    monkeypatch.setattr(time_module, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)

    def on_cuda(claim: bool) -> None:
        def sdpa(*a, **kw):
            o = stock(*a, **kw)
            return o.as_subclass(OnCuda) if claim else o

        monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa)

    return synced, on_cuda
