"""A module's ``time`` that advances by fixed steps: timings a test can state exactly."""

from __future__ import annotations


class StepClock:
    """Each read of ``perf_counter`` adds 5 s to the wall clock (from 100), of ``process_time`` 2 s to the CPU clock
    (from 10)."""

    def __init__(self) -> None:
        self.wall, self.cpu = 100.0, 10.0

    def perf_counter(self) -> float:
        self.wall += 5.0
        return self.wall

    def process_time(self) -> float:
        self.cpu += 2.0
        return self.cpu
