"""The multi-revisit protocol: windows from the run's recorded phases, and frame sampling.

Revisit windows come from ``camera.npz`` (``phases``: ``V``, ``D1``, ``R1``, ..., ``H``), never from file names.
The reference set is the initial observation phase ``V``; K is the number of **prescribed** revisits.
"""

from __future__ import annotations

import numpy as np


def numbered_phases(phases: dict[str, tuple[int, int]], prefix: str) -> list[tuple[int, int]]:
    """[(start, end)] of ``<prefix>1 .. <prefix>k`` in order (half-open frame ranges)."""
    out, k = [], 1
    while f"{prefix}{k}" in phases:
        out.append(tuple(phases[f"{prefix}{k}"]))
        k += 1
    return out


def revisit_windows(phases: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    """The prescribed revisits ``R1..Rk``."""
    return numbered_phases(phases, "R")


def departure_windows(phases: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    """The departures ``D1..Dk``."""
    return numbered_phases(phases, "D")


def sample_every(n: int, start: int, end: int) -> list[int]:
    """Frames ``start, start + n, ...`` below ``end``."""
    return list(range(int(start), int(end), int(n)))


def quality_frames(num_frames: int, stride: int = 4) -> list[int]:
    """Video quality: every 4th frame (paper section 4.2)."""
    return sample_every(stride, 0, num_frames)


def judge_frames(num_frames: int, stride: int = 8) -> list[int]:
    """Dynamic judge: stride 8, always including the first and last frames (paper appendix D.1)."""
    idx = sample_every(stride, 0, num_frames)
    if idx[-1] != num_frames - 1:
        idx.append(num_frames - 1)
    return idx


def window_frames(window: tuple[int, int], stride: int) -> list[int]:
    """Frames of a phase window sampled with ``stride``, always including its last frame (the settled view)."""
    a, b = window
    idx = sample_every(stride, a, b)
    if b - 1 not in idx and b > a:
        idx.append(b - 1)
    return idx


def matched_departure_pairs(c2w: np.ndarray, phases: dict, stride: int = 4) -> list[tuple[int, int]]:
    """Cross-departure pairs: for each sampled frame of D1, the frame of D2 whose prescribed orientation is
    closest (only when both departures exist). Used for cross-departure consistency."""
    from trajectories.conventions import geodesic_angle

    deps = departure_windows(phases)
    if len(deps) < 2:
        return []
    a = window_frames(deps[0], stride)
    b = list(range(*deps[1]))
    pairs = []
    for i in a:
        ang = geodesic_angle(c2w[i, :3, :3][None], c2w[b, :3, :3])
        j = b[int(np.argmin(ang))]
        if np.degrees(ang.min()) < 1.0:
            pairs.append((i, j))
    return pairs
