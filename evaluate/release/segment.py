"""A camera path's layout read from the path alone: holds and moves, without any preset's phase windows.

The input is a signal per axis and frame: yaw and pitch in degrees (a rotation video, from its estimated camera
path; or a preset's own exact path), or the camera's displacement along x, y, z (a translation video, in the units
of its estimate). :func:`layout_of` finds the moves and fits each one's start, length and change with a sum of
ramps: ``signal_a(t) = c_a + sum_j delta_j * shape((t - start_j) / frames_j)`` over the moves ``j`` on axis ``a``,
``shape`` clipped to [0, 1] and either ``constant`` (linear: every frame of the move turns by the same angle) or
``eased`` (cosine: ``(1 - cos(pi s)) / 2``, the builder's ``profile: cosine``); both are fitted and the one with the
lower residual is the video's speed profile. The time convention is the builder's (trajectories/builders.py): a
move of ``n`` frames that starts after frame ``s`` reaches ``k / n`` of its change at frame ``s + k``, so ``start``
is the last frame still at the level before the move and ``start`` of the first move is the number of frames held
after frame 0 (the initial hold, ``hold_frames.initial``).

Nothing here knows a preset: a preset's expected layout is :func:`layout_of` applied to the preset's own path at the
video's frame count (:mod:`evaluate.release.check`), so the comparison follows whatever ``conf/trajectory/*.yaml``
says.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

#: Profiles a move is fitted with (the builder's names are ``constant`` and ``cosine``).
PROFILES = ("constant", "eased")
#: A step moves when its speed on its axis exceeds this share of the video's peak speed.
MOVE_SHARE = 0.3
#: Directions of a move by axis and sign (rotations: yaw left is negative; translations: OpenCV camera axes).
DIRECTION = {("yaw", -1): "left", ("yaw", 1): "right", ("pitch", 1): "up", ("pitch", -1): "down",
             ("z", 1): "F", ("z", -1): "B", ("x", 1): "R", ("x", -1): "L", ("y", -1): "U", ("y", 1): "D"}


def shape_fn(profile: str) -> Callable[[np.ndarray], np.ndarray]:
    """The move shape of ``profile`` on clipped normalised time ``s``: position reached, 0 at s <= 0, 1 at s >= 1."""
    if profile == "constant":
        return lambda s: np.clip(s, 0.0, 1.0)
    return lambda s: 0.5 - 0.5 * np.cos(np.pi * np.clip(s, 0.0, 1.0))


@dataclass(frozen=True)
class Move:
    """One move of a layout.

    Attributes:
        axis: ``yaw`` / ``pitch`` (degrees) or ``x`` / ``y`` / ``z`` (translation units).
        start: the last frame at the level before the move (sub-frame; the builder's convention).
        frames: frames of motion (sub-frame). delta: signed change along ``axis``.
        kind: ``D`` (moves away from the start view or position) or ``R`` (moves back towards it).
        direction: ``left`` / ``right`` / ``up`` / ``down``, or a leg ``F`` / ``B`` / ``R`` / ``L`` / ``U`` / ``D``.
        reach: the distance from the start on ``axis`` after the move (degrees for rotations).
    """

    axis: str
    start: float
    frames: float
    delta: float
    kind: str
    direction: str
    reach: float

    @property
    def end(self) -> float:
        return self.start + self.frames

    @property
    def speed(self) -> float:
        """Mean speed over the move (units per frame): the builder's ``deg_per_frame`` for either profile."""
        return abs(self.delta) / self.frames if self.frames > 0 else float("nan")


@dataclass(frozen=True)
class Layout:
    """The measured layout of one path: its moves in time order and the profile they follow.

    Attributes:
        kind: ``rotation`` or ``translation``. frames: the path's frame count.
        moves: in time order. profile: ``constant`` / ``eased`` (``none`` without a move).
        residuals: RMS residual of each profile's fit (the signal's units).
        return_errors: per return (rotation: degrees from the start view after it; translation: the distance from
            the start after the last leg, in the estimate's units), filled by the caller when it measured them.
    """

    kind: str
    frames: int
    moves: tuple[Move, ...] = ()
    profile: str = "none"
    residuals: dict[str, float] = field(default_factory=dict)
    return_errors: tuple[float, ...] = ()

    @property
    def initial_hold(self) -> int:
        """Frames held after frame 0 before the first move (``hold_frames.initial``); all but frame 0 when still."""
        return int(round(self.moves[0].start)) if self.moves else self.frames - 1

    @property
    def final_hold(self) -> int:
        """Frames held after the last move ends, up to the last frame."""
        return self.frames - 1 - int(round(self.moves[-1].end)) if self.moves else 0

    def holds(self) -> list[int]:
        """Frames held between consecutive moves (the hold after move ``j`` at index ``j``)."""
        return [int(round(b.start)) - int(round(a.end)) for a, b in zip(self.moves, self.moves[1:])]

    def departures(self) -> list[Move]:
        return [m for m in self.moves if m.kind == "D"]

    def returns(self) -> list[Move]:
        return [m for m in self.moves if m.kind == "R"]

    def sequence(self) -> str:
        """The moves' directions, e.g. ``left right left right`` or ``F R B L``."""
        return " ".join(m.direction for m in self.moves)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "frames": self.frames, "profile": self.profile,
                "residuals": dict(self.residuals), "return_errors": list(self.return_errors),
                "moves": [asdict(m) for m in self.moves]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Layout:
        return Layout(str(d["kind"]), int(d["frames"]), tuple(Move(**m) for m in d.get("moves", [])),
                      str(d.get("profile", "none")), {str(k): float(v) for k, v in (d.get("residuals") or {}).items()},
                      tuple(float(x) for x in d.get("return_errors", [])))


def _runs(labels: np.ndarray) -> list[tuple[int, int, int]]:
    """(label, first step, last step + 1) of each run of equal non-zero labels."""
    out = []
    i, n = 0, len(labels)
    while i < n:
        j = i
        while j < n and labels[j] == labels[i]:
            j += 1
        if labels[i] != 0:
            out.append((int(labels[i]), i, j))
        i = j
    return out


def find_cores(signal: np.ndarray, floor: float, bridge: int = 3,
               shortest: int = 3) -> list[tuple[int, int, int, int]]:
    """The moving stretches of ``signal`` (T, A): ``(axis, sign, first step, last step + 1)`` per move, where a
    step ``i`` (frame i -> i + 1) moves on the axis whose median-filtered velocity is largest, if that exceeds
    :data:`MOVE_SHARE` of the peak speed (and ``floor``). Runs of one axis and sign split by at most ``bridge``
    steps are one move; runs shorter than ``shortest`` steps are noise."""
    from scipy.ndimage import median_filter

    if len(signal) < 3:
        return []
    v = median_filter(np.diff(signal, axis=0), size=(5, 1), mode="nearest")
    speed = np.abs(v)
    ax = np.argmax(speed, axis=1)
    top = speed[np.arange(len(v)), ax]
    threshold = max(MOVE_SHARE * float(top.max()), floor)
    sign = np.sign(v[np.arange(len(v)), ax]).astype(int)
    labels = np.where(top > threshold, (ax + 1) * sign, 0)
    runs = _runs(labels)
    merged: list[list[int]] = []
    for lab, a, b in runs:
        if merged and merged[-1][0] == lab and a - merged[-1][2] <= bridge:
            merged[-1][2] = b
        else:
            merged.append([lab, a, b])
    return [(abs(lab) - 1, int(np.sign(lab)), a, b) for lab, a, b in merged if b - a >= shortest]


def _shape_and_slope(profile: str, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The move shape at normalised time ``u`` and its derivative (0 outside the move)."""
    inside = (u > 0.0) & (u < 1.0)
    if profile == "constant":
        return np.clip(u, 0.0, 1.0), inside.astype(np.float64)
    c = np.clip(u, 0.0, 1.0)
    return 0.5 - 0.5 * np.cos(np.pi * c), np.where(inside, 0.5 * np.pi * np.sin(np.pi * c), 0.0)


def _fit_axis(y: np.ndarray, cores: list[tuple[int, int]], profile: str) -> tuple[np.ndarray, float]:
    """Least-squares fit of one axis, its level at frame 0 held at ``y[0]`` (frame 0 is the reference of every
    signal): ``(params (3 m,): start, frames, delta per move, rms)``. Robust (soft L1) against a few frames the
    estimator got wrong; the Jacobian is analytic (each move moves only its own frames)."""
    from scipy.optimize import least_squares

    t = np.arange(len(y), dtype=np.float64)
    x0 = []
    for a, b in cores:
        n = max(b - a, 1) / (0.8 if profile == "eased" else 1.0)
        s = a - (0.1 * n if profile == "eased" else 0.0)
        x0 += [s, n, float(y[min(b + 2, len(y) - 1)] - y[max(a - 2, 0)])]

    def parts(p: np.ndarray) -> list[tuple[float, float, float, np.ndarray, np.ndarray]]:
        out = []
        for j in range(len(cores)):
            s, n, d = (float(v) for v in p[3 * j: 3 * j + 3])
            u = (t - s) / n
            out.append((s, n, d, *_shape_and_slope(profile, u)))
        return out

    def residual(p: np.ndarray) -> np.ndarray:
        model: np.ndarray = np.full_like(y, y[0])
        for _, _, d, f, _ in parts(p):
            model += d * f
        return np.asarray(model - y, np.float64)

    def jacobian(p: np.ndarray) -> np.ndarray:
        J = np.zeros((len(y), len(p)))
        for j, (s, n, d, f, df) in enumerate(parts(p)):
            J[:, 3 * j] = -d * df / n
            J[:, 3 * j + 1] = -d * df * (t - s) / n ** 2
            J[:, 3 * j + 2] = f
        return J

    lo = np.array([v for _ in cores for v in (-len(y), 0.5, -np.inf)])
    hi = np.array([v for _ in cores for v in (2.0 * len(y), 2.0 * len(y), np.inf)])
    start = np.clip(x0, lo + 1e-9, hi - 1e-9)
    # lsmr, not a dense SVD per step: an SVD wakes BLAS's thread pool, 30x slower on a busy machine
    fit = least_squares(residual, start, jac=jacobian, bounds=(lo, hi), loss="soft_l1",
                        f_scale=max(float(np.ptp(y)) * 0.01, 1e-6), tr_solver="lsmr")
    return fit.x, float(np.sqrt(np.mean(residual(fit.x) ** 2)))


def _fit(signal: np.ndarray, cores: list[tuple[int, int, int, int]], profile: str) -> tuple[list[tuple[int, float,
                                                                                                       float, float]],
                                                                                             float]:
    """Every axis fitted with ``profile``: ([(axis, start, frames, delta)] in time order, the RMS over all axes)."""
    found: list[tuple[int, float, float, float]] = []
    sq = 0.0
    for ax in range(signal.shape[1]):
        mine = [(a, b) for axis, _, a, b in cores if axis == ax]
        if not mine:
            sq += float(np.sum((signal[:, ax] - signal[0, ax]) ** 2))
            continue
        p, rms = _fit_axis(signal[:, ax], mine, profile)
        sq += rms ** 2 * len(signal)
        found += [(ax, float(p[3 * j]), float(p[3 * j + 1]), float(p[3 * j + 2])) for j in range(len(mine))]
    return sorted(found, key=lambda m: m[1]), float(np.sqrt(sq / (len(signal) * signal.shape[1])))


def layout_of(signal: np.ndarray, axes: tuple[str, ...], kind: str, floor: float) -> Layout:
    """The layout of ``signal`` (T, A): one column per name in ``axes`` (``("yaw", "pitch")`` in degrees, or
    ``("x", "y", "z")``), ``kind`` ``rotation`` or ``translation``; ``floor``: the smallest speed that counts as
    moving (units per frame). Moves that change less than 2 % of the largest change are dropped as noise."""
    signal = np.asarray(signal, np.float64)
    cores = find_cores(signal, floor)
    if not cores:
        return Layout(kind, len(signal))
    fits = {p: _fit(signal, cores, p) for p in PROFILES}
    profile = min(PROFILES, key=lambda p: fits[p][1])
    found = fits[profile][0]
    biggest = max(abs(d) for _, _, _, d in found)
    found = [m for m in found if abs(m[3]) >= 0.02 * biggest]
    level = np.zeros(len(axes))
    moves = []
    for ax, start, frames, delta in found:
        before = level[ax]
        level[ax] += delta
        away = abs(level[ax]) > abs(before)
        moves.append(Move(axes[ax], start, frames, delta, "D" if away else "R",
                          DIRECTION.get((axes[ax], int(np.sign(delta))), axes[ax]), float(abs(level[ax]))))
    return Layout(kind, len(signal), tuple(moves), profile, {p: fits[p][1] for p in PROFILES})


def yaw_pitch_signal(c2w: np.ndarray) -> np.ndarray:
    """(T, 2) yaw and pitch in degrees of each pose relative to pose 0, read as the y and x components of the
    relative rotation's rotation vector: exactly the yaw of a turn about the vertical axis and the pitch of a turn
    about the horizontal one (``rot_y(yaw) @ rot_x(pitch)``, trajectories/conventions.py), with no singularity
    where the view points straight up (an LRUD's 90-degree pitch), unlike Euler angles."""
    from scipy.spatial.transform import Rotation

    rel = np.swapaxes(c2w[0, :3, :3], 0, 1)[None] @ c2w[:, :3, :3]
    vec = np.asarray(Rotation.from_matrix(rel).as_rotvec(), np.float64)
    return np.asarray(np.degrees(np.stack([vec[:, 1], vec[:, 0]], -1)), np.float64)


def path_layout(c2w: np.ndarray) -> Layout:
    """The layout of an exact camera path (T, 4, 4) OpenCV c2w: a rotation when its positions stay at the start
    (its yaw and pitch), a translation otherwise (its positions relative to pose 0). A preset's expected layout."""
    pos = c2w[:, :3, 3] - c2w[0, :3, 3]
    if float(np.abs(pos).max()) < 1e-9:
        return layout_of(yaw_pitch_signal(c2w), ("yaw", "pitch"), "rotation", floor=1e-6)
    lay = layout_of(pos, ("x", "y", "z"), "translation", floor=1e-9)
    if not lay.moves:
        return lay
    end = pos[int(round(lay.moves[-1].end))] if int(round(lay.moves[-1].end)) < len(pos) else pos[-1]
    return Layout(lay.kind, lay.frames, lay.moves, lay.profile, lay.residuals, (float(np.linalg.norm(end)),))


def phase_windows(layout: Layout) -> tuple[dict[str, tuple[int, int]], list[tuple[str, str, str, int, int]]]:
    """Phases and segments of a layout in whole frames (the builder's reading of them): ``V`` is frame 0 and the
    initial hold; a run of departures (and the holds after them) is ``D<k>``, the run of returns after it (and its
    holds) ``R<k>``, a translation's legs up to its last are ``D1`` and its last leg ``R1``; ``H`` is what follows
    the last move. The phases tile ``[0, frames)`` in time order, as a built path's do: where measured moves
    overlap (two axes' fits, a diagonal sweep), a phase starts where the one before it ends. Returns
    ``({label: (start, end)}, [(phase, label, kind, start, end)])``."""
    T = layout.frames
    moves = list(layout.moves)
    if layout.kind == "translation" and moves:
        moves = [Move(m.axis, m.start, m.frames, m.delta, "R" if i == len(moves) - 1 else "D", m.direction, m.reach)
                 for i, m in enumerate(moves)]
    bounds = [(min(max(int(round(m.start)) + 1, 1), T), min(max(int(round(m.end)) + 1, 1), T)) for m in moves]
    first = bounds[0][0] if moves else T
    phases: dict[str, tuple[int, int]] = {"V": (0, first)}
    segs = [("V", "hold", "hold", 0, first)]
    k, prev, edge = 0, "", first  # edge: where the phases so far end
    for i, (m, (a, b)) in enumerate(zip(moves, bounds)):
        if (m.kind == "D" and prev != "D") or k == 0:  # a return before any departure opens the first cycle
            k += 1
        label = f"{m.kind}{k}"
        nxt = bounds[i + 1][0] if i + 1 < len(bounds) else b
        lo, _ = phases.get(label, (max(a, edge), nxt))
        phases[label] = (lo, edge := max(nxt, b, edge))
        short = m.direction[0].upper() if m.axis in ("yaw", "pitch") else m.direction
        segs.append((label, short, "move", a, b))
        if nxt > b:
            segs.append((label, "hold", "hold", b, nxt))
        prev = m.kind
    end = edge  # (T without a move)
    if end < T:
        phases["H"] = (end, T)
        segs.append(("H", "hold", "hold", end, T))
    return phases, [s for s in segs if s[4] > s[3]]
