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
