"""The multi-revisit protocol: windows from the run's recorded phases, and frame sampling.

Revisit windows come from ``camera.npz`` (``phases``: ``V``, ``D1``, ``R1``, ..., ``H``), never from file names.
The reference set is the initial observation phase ``V``; K is the number of **prescribed** revisits.
"""

from __future__ import annotations

import numpy as np

from trajectories.phases import PhaseKind, numbered


def revisit_windows(phases: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    """The prescribed revisits ``R1..Rk`` (half-open frame ranges, in order)."""
    return numbered(phases, PhaseKind.RETURN)


def departure_windows(phases: dict[str, tuple[int, int]]) -> list[tuple[int, int]]:
    """The departures ``D1..Dk`` (half-open frame ranges, in order)."""
    return numbered(phases, PhaseKind.DEPART)


def frames_near(c2w: np.ndarray, frames: list[int], poses: np.ndarray, tolerance_deg: float,
                tolerance_translation: float) -> list[int]:
    """The ``frames`` whose prescribed pose is within the tolerances of at least one of ``poses``.

    Args:
        c2w: (T,4,4) prescribed poses (OpenCV c2w). frames: indices into ``c2w``, kept in their order.
        poses: (4,4) or (P,4,4) poses to be near. tolerance_deg: rotation (geodesic, degrees).
        tolerance_translation: camera-centre distance as a fraction of the trajectory's extent (the largest
            per-axis range of ``c2w``'s centres).
    """
    from trajectories.conventions import geodesic_angle

    c2w = np.asarray(c2w, dtype=np.float64)
    if not len(frames):
        return []
    poses = np.asarray(poses, dtype=np.float64).reshape(-1, 4, 4)
    extent = max(float(np.ptp(c2w[:, :3, 3], axis=0).max()), 1e-9)
    at = c2w[list(frames)]
    rot = np.degrees(geodesic_angle(at[:, None, :3, :3], poses[None, :, :3, :3]))  # (F, P)
    tr = np.linalg.norm(at[:, None, :3, 3] - poses[None, :, :3, 3], axis=-1) / extent
    near = ((rot <= tolerance_deg) & (tr <= tolerance_translation)).any(axis=1)
    return [int(f) for f, k in zip(frames, near) if k]


def sample_every(n: int, start: int, end: int) -> list[int]:
    """Frames ``start, start + n, ...`` below ``end``."""
    return list(range(int(start), int(end), int(n)))


def quality_frames(num_frames: int, stride: int = 4) -> list[int]:
    """Video quality: every 4th frame (paper section 4.2)."""
    return sample_every(stride, 0, num_frames)


def arrived_frames(c2w: np.ndarray, frames: list[int], tol_deg: float, tol_translation: float) -> list[int]:
    """The frames whose *prescribed* pose is back at frame 0 within ``tol_deg`` and ``tol_translation`` (relative to
    the trajectory's extent): the revisit observations entity metrics score (:func:`frames_near` to frame 0)."""
    return frames_near(c2w, list(frames), np.asarray(c2w)[0], tol_deg, tol_translation)


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


def matched_departure_pairs(c2w: np.ndarray, phases: dict[str, tuple[int, int]], stride: int = 4) -> list[tuple[int, int]]:
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


def departure_revisit_windows(c2w: np.ndarray, phases: dict[str, tuple[int, int]], tolerance_deg: float = 5.0,
                              tolerance_translation: float = 0.05, min_departure_deg: float = 30.0
                              ) -> tuple[list[int], list[list[int]]]:
    """Protocol extension ``departure_revisit`` (not in the paper): a reference first observed during a departure.

    The paper's revisits all return to the conditioning frame, which a sink-keeping context policy never evicts, so
    they cannot tell a policy that remembers the departures from one that forgets them. Here the reference is the
    first departure's *away view*: the frames of ``D1`` whose prescribed pose is within the tolerances of D1's
    farthest pose (largest rotation from frame 0). Every later departure ``D_k`` (k >= 2) that goes back to that view
    (some of its frames are within the tolerances of the same pose) is a prescribed revisit of it; its revisit set
    is those frames. LRLR has one such revisit, LRLRLR two (its third departure returns to the side first seen in the
    first); LRUD's pitch departure and the square loop have none.

    Args:
        c2w: (T,4,4) prescribed poses (OpenCV c2w, world = frame 0). phases: the path's phases (``D1``, ``D2``, ...).
        tolerance_deg, tolerance_translation: how close (rotation; translation as a fraction of the trajectory's
            extent) a frame must be to the reference pose to belong to the reference or a revisit set.
        min_departure_deg: D1 must rotate at least this far from frame 0, else there is no away view (no revisits).
    Returns:
        (reference frames, [revisit frames of each later departure that returns to the view]); ([], []) when the
        trajectory has no such revisit.
    """
    from trajectories.conventions import geodesic_angle

    c2w = np.asarray(c2w, dtype=np.float64)
    deps = departure_windows(phases)
    if len(deps) < 2:
        return [], []
    d1 = list(range(*deps[0]))
    ang0 = np.degrees(geodesic_angle(c2w[0, :3, :3][None], c2w[d1, :3, :3]))
    if ang0.max() < min_departure_deg:
        return [], []
    far = c2w[d1[int(np.argmax(ang0))]]

    def near(frames: list[int]) -> list[int]:
        return frames_near(c2w, frames, far, tolerance_deg, tolerance_translation)

    reference = near(d1)
    revisits = [w for w in (near(list(range(*d))) for d in deps[1:]) if w]
    return reference, revisits


def departure_sweep_windows(c2w: np.ndarray, phases: dict[str, tuple[int, int]], tolerance_deg: float = 5.0,
                            tolerance_translation: float = 0.05, min_departure_deg: float = 30.0
                            ) -> tuple[list[int], list[list[int]]]:
    """Protocol extension ``departure_sweep`` (not in the paper): every view of the first departure's sweep.

    :func:`departure_revisit_windows` tests the settled away view only, which one retrieved chunk covers exactly. A
    later phase that sweeps back through the first departure's views needs, chunk by chunk, whatever earlier chunks
    looked that way, which is where a bounded retrieval budget can fall short (e.g. FoV retrieving two chunks of the
    same view and none of its neighbour). The reference set is every frame of ``D1``; each later phase in time order
    (``R1``, ``D2``, ``R2``, ...) is a revisit window holding its frames that are at least ``min_departure_deg`` from
    frame 0 (beyond most of what a sink holds) and within the tolerances of some ``D1`` frame.

    Args:
        c2w: (T,4,4) prescribed poses (OpenCV c2w, world = frame 0). phases: the path's phases.
        tolerance_deg, tolerance_translation: how close (rotation; translation as a fraction of the trajectory's
            extent) a frame must be to some ``D1`` frame's prescribed pose.
        min_departure_deg: only frames at least this far (rotation) from frame 0 count, and D1 must reach it.
    Returns:
        (every ``D1`` frame, [revisit frames of each later phase that has some]); ([], []) when there is none
        (the square loop keeps its orientation; LRUD's pitch cycle sees nothing of its yaw departure).
    """
    from trajectories.conventions import geodesic_angle

    c2w = np.asarray(c2w, dtype=np.float64)
    deps = departure_windows(phases)
    if not deps:
        return [], []
    d1 = list(range(*deps[0]))
    from0 = np.degrees(geodesic_angle(c2w[0, :3, :3][None], c2w[:, :3, :3]))
    if from0[d1].max() < min_departure_deg:
        return [], []
    later = sorted(w for w in phases.values() if w[0] >= deps[0][1])  # in time order, whatever the dict's order
    revisits = []
    for a, b in later:
        frames = [f for f in range(a, b) if from0[f] >= min_departure_deg]
        keep = frames_near(c2w, frames, c2w[d1], tolerance_deg, tolerance_translation)
        if keep:
            revisits.append(keep)
    return d1, revisits
