"""Matrix-Game 3's controls: per-frame keyboard (T,6) and mouse (T,2), with the decoder that integrates them back into
a camera path as upstream does, so the harness can report the achieved-vs-requested residual.

Poses in and out: OpenCV camera-to-world 4x4 (+x right / +y down / +z forward), world = camera frame of
frame 0, positive yaw turns right, positive pitch turns up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adapters.memo import memo
from harness.errors import ConfigError
from trajectories.conventions import rot_y, rot_z, se3, w2c_from_c2w, yaw_pitch_from_rotmat

# --------------------------------------------------------------------------------------------------------------
# Matrix-Game 3: keyboard (T,6) [W,S,A,D,0,0] + mouse (T,2) [pitch, yaw] per frame
# (SkyworkAI/Matrix-Game Matrix-Game-3/utils/utils.py::compute_next_pose_from_action, utils/cam_utils.py)
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MG3Params:
    """Matrix-Game 3 action constants and the harness's policy choices.

    deg_per_unit: degrees per mouse unit (15). dead_zone: |mouse| below it is ignored (0.02). step_cm / diag_cm:
    translation per frame for one key / per axis on diagonals (12.35 / 8.73 cm). metres_per_unit: the
    translation-scale policy (scene units -> metres). mouse_pitch: ``code`` = mouse[0] > 0 tilts **down** (what
    the integration code does) or ``label`` = mouse[0] > 0 tilts **up** (what key ``i`` is called); upstream's
    sign is unverified (the key label and the integration code disagree), so it is an explicit, recorded choice.
    hold_frames: upstream's hold: its own condition generator gives frame 0 an action row of its own, then holds each
    action for 12 frames (``combine_data``: ``selections = [12]``, Matrix-Game-3/utils/conditions.py:12, :21-32
    @71c3cd7f7413), so a control changes only at rows ``0, 1, 13, 25, ...`` (:func:`mg3_blocks`).
    """

    deg_per_unit: float = 15.0
    dead_zone: float = 0.02
    step_cm: float = 12.35
    diag_cm: float = 8.73
    metres_per_unit: float = 1.0
    mouse_pitch: str = "code"
    hold_frames: int = 12

    def pitch_sign(self) -> float:
        """MG pitch (positive = down in the code) per unit of mouse[0]."""
        if self.mouse_pitch not in ("code", "label"):
            raise ConfigError(f"model.mouse_pitch={self.mouse_pitch!r}: use 'code' or 'label'")
        return 1.0 if self.mouse_pitch == "code" else -1.0


#: Keyboard one-hots [W, S, A, D, 0, 0] and the (forward, right) displacement in steps of each combination: the
#: vocabulary of upstream's condition generator (none, forward, left, right, forward_left, forward_right;
#: Matrix-Game-3/utils/conditions.py:41-52@71c3cd7f7413, with "back", "back_left" and "back_right" commented out
#: there) plus S alone. S is a key of upstream's action space ("back": 1, conditions.py:74; the integrator moves
#: 12.35 cm backwards for it, utils/utils.py compute_next_pose_from_action) that its generator never produces; the
#: square's backward leg needs it because the square keeps the orientation fixed (turning round and pressing W
#: would change the view the trajectory tests). A recorded deviation (``MG3_CAVEATS``); S+A and S+D are not used.
_MG3_KEYS: list[tuple[tuple[int, int, int, int], tuple[float | str, float | str]]] = [
    ((0, 0, 0, 0), (0.0, 0.0)), ((1, 0, 0, 0), (1.0, 0.0)), ((0, 1, 0, 0), (-1.0, 0.0)),
    ((0, 0, 1, 0), (0.0, -1.0)), ((0, 0, 0, 1), (0.0, 1.0)), ((1, 0, 1, 0), ("d", "-d")),
    ((1, 0, 0, 1), ("d", "d")),
]
#: what the item's meta.json says about the controls, beside upstream's generator (Matrix-Game-3/utils/conditions.py
#: @71c3cd7f7413); docs/controls.md measures each one's cost
MG3_CAVEATS = (("keys and mouse are held on upstream's own blocks (row 0 alone, then 12 rows each, conditions.py:21-32); "
                "the path is laid on them: each segment boundary moves to the nearest block edge (adapters/controls/"
                "clock.py)"),
               ("the backward leg presses S, which upstream's generator never produces (back is commented out, "
                "conditions.py:43); S+A and S+D are never used"),
               ("mouse values carry the path's speed (0.05 per frame = 0.75 deg/frame on the release presets); "
                "upstream's generator sends only 0 or +-0.1 (CAM_VALUE, conditions.py:77)"),
               ("pitch turns send mouse[0], which upstream's generator never sends (camera_up/down commented out, "
                "conditions.py:61-62)"))


def _key_moves(p: MG3Params) -> tuple[np.ndarray, np.ndarray]:
    keys, moves = [], []
    for k, (f, r) in _MG3_KEYS:
        def v(x: float | str) -> float:
            if isinstance(x, str):
                return (-1 if x.startswith("-") else 1) * p.diag_cm / 100.0
            return x * p.step_cm / 100.0

        keys.append(k)
        moves.append((v(f), v(r)))
    return np.array(keys, dtype=np.float32), np.array(moves)


def _dead(v: float, p: MG3Params) -> float:
    """Upstream's per-frame, per-axis dead zone, compared in float32 as upstream compares the float32 values it is
    given (under NumPy >= 2, ``np.float32(0.02) >= 0.02`` is true; utils/utils.py:49-50@71c3cd7f7413)."""
    return 0.0 if abs(np.float32(v)) < np.float32(p.dead_zone) else float(v)


#: what the encoder emits at least: the dead zone plus a margin, so no float32 rounding puts a value under it
_DEAD_MARGIN = 1.0005


def mg3_blocks(T: int, hold: int = 12) -> list[tuple[int, int]]:
    """Upstream's condition blocks over ``T`` action rows, ``[start, end)``: row 0 alone, then ``hold`` rows each from
    row 1, the last one cut at ``T`` (``combine_data``, Matrix-Game-3/utils/conditions.py:21-32@71c3cd7f7413)."""
    H = max(1, int(hold))
    return [(0, min(1, T))] + [(a, min(a + H, T)) for a in range(1, T, H)]


def mg3_clock(T: int, hold: int = 12) -> np.ndarray:
    """The poses where a held control may change: every block's first row (action ``i`` moves pose ``i`` to
    ``i + 1``, so a block starting at row ``a`` starts moving from pose ``a``) and the last pose ``T - 1``."""
    return np.unique(np.r_[[a for a, _ in mg3_blocks(T, hold)], T - 1]).astype(np.int64)


def _mg3_axis(target: np.ndarray, p: MG3Params) -> np.ndarray:
    """Mouse values (T,) in units of ``deg_per_unit``, one per upstream block (:func:`mg3_blocks`), that take one
    rotation axis from 0 to ``target`` (T,) degrees.

    Each block sends the value that lands on the target at its last pose inside the path when that clears the dead
    zone (with the encoder's margin), else nothing (upstream drops a sub-threshold value for good; the next block
    makes up the lag). A lag left at the end of a move (the target holds after it) is folded into the move's last
    block of the same sign, which stays above the dead zone, so returns come back to the start exactly. A path laid
    on upstream's blocks (:func:`mg3_clock`) turns at block edges, so its constant sweeps are carried exactly.
    """
    T = len(target)
    m = np.zeros(T)
    dz = p.dead_zone * _DEAD_MARGIN
    state = 0.0
    sent: list[tuple[int, int, int]] = []  # (start, end, poses moved) of the move's blocks that sent a value
    for a, b in mg3_blocks(T, p.hold_frames):
        e = min(b, T - 1)  # the last pose of the path these rows reach (row T-1 moves to a pose past the path)
        if e <= a:
            continue
        v = (target[e] - state) / (p.deg_per_unit * (e - a))
        if abs(v) >= dz:
            m[a:b] = v
            state = float(target[e])
            sent.append((a, b, e - a))
        if e == T - 1 or abs(target[e + 1] - target[e]) <= 1e-9:  # the move (if any) ends at this edge
            r = (target[e] - state) / p.deg_per_unit
            same = [blk for blk in sent[::-1] if np.sign(m[blk[0]]) == np.sign(r)]
            if abs(r) > 1e-12 and same:  # |r| is under one block's dead zone, so the value keeps its sign
                a0, b0, n0 = same[0]
                m[a0:b0] += r / n0
                state += p.deg_per_unit * r
            sent = []
    return m


@memo
def mg3_encode(c2w: np.ndarray, p: MG3Params = MG3Params()) -> tuple[np.ndarray, np.ndarray]:
    """Quantise a canonical path into per-frame keyboard (T,6) and mouse (T,2) ``[pitch, yaw]`` (float32), every row
    of one upstream block (:func:`mg3_blocks`: row 0, then 12 rows each) equal, as upstream's generator holds them.

    Rotation: per axis, one value per block (:func:`_mg3_axis`; every value clears upstream's 0.02 dead zone in
    float32, and the orientation meets the request at every block edge where a move ends). Translation: each block
    takes the key combination whose *integrated* positions are closest (sum of squares over the block's poses) to
    the requested ones, moving along the step's average yaw as upstream does; the error is bounded by one block of
    key steps. Vertical motion cannot be expressed (translation is horizontal only) and shows up in the residual.
    Upstream's integrator applies action ``i`` to go from frame ``i`` to frame ``i + 1``
    (``compute_all_poses_from_actions``), so row ``t - 1`` carries the motion into frame ``t``; the last row moves
    past the path and repeats its block (nothing reads the pose it leads to). Exact on a path laid on
    :func:`mg3_clock` (``MG3_CAVEATS``).
    """
    yaw_cv, pitch_cv = yaw_pitch_from_rotmat(c2w[:, :3, :3])
    yaw_t, pitch_t = np.degrees(yaw_cv), -np.degrees(pitch_cv)  # MG pitch is positive down
    pos_t = c2w[:, :3, 3] * p.metres_per_unit
    keys_tab, moves = _key_moves(p)
    T = len(c2w)
    mouse = np.stack([p.pitch_sign() * _mg3_axis(pitch_t, p), _mg3_axis(yaw_t, p)], axis=1).astype(np.float32)
    keyboard = np.zeros((T, 6), np.float32)
    states = mg3_states(keyboard, mouse, p)  # the yaw upstream integrates (keys do not change it)
    psi = np.radians(0.5 * (states[:-1, 4] + states[1:, 4]))  # action t-1 moves along the step's average yaw
    fwd = np.stack([np.sin(psi), np.zeros_like(psi), np.cos(psi)], axis=1)
    right = np.stack([np.cos(psi), np.zeros_like(psi), -np.sin(psi)], axis=1)
    pos = np.zeros(3)
    for a, b in mg3_blocks(T, p.hold_frames):  # rows a..b-1 move poses a..b (those inside the path: up to T-1)
        e = min(b, T - 1)
        if e <= a:
            continue
        steps = moves[:, 0, None, None] * fwd[None, a:e] + moves[:, 1, None, None] * right[None, a:e]  # (K, n, 3)
        reached = pos[None, None] + np.cumsum(steps, axis=1)
        cost = ((reached - pos_t[None, a + 1:e + 1]) ** 2).sum(axis=(1, 2))  # squared error over the block's poses
        best = int(np.argmin(cost))
        keyboard[a:b, :4] = keys_tab[best]
        pos = reached[best, -1]
    return keyboard, mouse


def mg3_states(keyboard: np.ndarray, mouse: np.ndarray, p: MG3Params = MG3Params()) -> np.ndarray:
    """Integrate actions as MG-3 does: (T, 5) states ``[x, y, z, pitch, yaw]`` (upstream units: 12.35 per key step;
    degrees), state 0 = zeros, action ``t-1`` moves frame ``t-1`` to frame ``t``.

    ``pitch += 15 m0``, ``yaw += 15 m1`` (each only when ``|m| >= 0.02``), the new yaw wrapped to [-180, 180]
    before the step's average yaw is taken (as upstream does); W/S/A/D move 12.35 (8.73 per axis on diagonals) in
    the horizontal plane along that average yaw (SkyworkAI/Matrix-Game@20e033e Matrix-Game-3/utils/utils.py
    ``compute_next_pose_from_action``). ``p.mouse_pitch`` = ``label`` flips the sign of ``m0``.
    """
    sgn = p.pitch_sign()
    T = len(keyboard)
    out = np.zeros((T, 5))
    for t in range(1, T):
        x, y, z, pitch, yaw = out[t - 1]
        m0, m1 = _dead(float(mouse[t - 1, 0]), p) * sgn, _dead(float(mouse[t - 1, 1]), p)
        new_pitch, new_yaw = pitch + p.deg_per_unit * m0, yaw + p.deg_per_unit * m1
        while new_yaw > 180:
            new_yaw -= 360
        while new_yaw < -180:
            new_yaw += 360
        w, s, a, d = (keyboard[t - 1, :4] > 0.5).astype(float)
        f, r = w - s, d - a
        scale = (p.diag_cm if (f and r) else p.step_cm)
        psi = np.radians(0.5 * (yaw + new_yaw))
        # world X forward at yaw 0, world Y = camera right at yaw 0 (see mg3_extrinsics)
        out[t] = (x + scale * (f * np.cos(psi) - r * np.sin(psi)), y + scale * (f * np.sin(psi) + r * np.cos(psi)), z,
                  new_pitch, new_yaw)
    return out


@memo
def mg3_extrinsics(keyboard: np.ndarray, mouse: np.ndarray, p: MG3Params = MG3Params()) -> np.ndarray:
    """Integrate actions exactly as MG-3 does (:func:`mg3_states`) and return c2w extrinsics (T,4,4) in metres.

    ``R = Rz(yaw) Ry(pitch) Rx(0) R_init`` with ``R_init = [[0,0,1],[1,0,0],[0,-1,0]]`` (Z-up world, camera +z ->
    world +X); positions are the states' (x, y, z) read as centimetres. These are the extrinsics the Plücker
    branch receives together with the actions.
    """
    R_init = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    states = mg3_states(keyboard, mouse, p)
    out = np.empty((len(states), 4, 4))
    for t, (x, y, z, pitch, yaw) in enumerate(states):
        R = rot_z(np.radians(yaw)) @ rot_y(np.radians(pitch)) @ R_init
        out[t] = se3(R, np.array([x, y, z]) * 0.01)
    return out


@memo
def mg3_decode(keyboard: np.ndarray, mouse: np.ndarray, p: MG3Params = MG3Params()) -> np.ndarray:
    """Native actions -> canonical path (OpenCV c2w, world = frame 0, scene units)."""
    ext = mg3_extrinsics(keyboard, mouse, p)
    rel: np.ndarray = w2c_from_c2w(ext[0])[None] @ ext
    rel[:, :3, 3] /= p.metres_per_unit
    return rel
