"""Discrete and textual controls: HY-WorldPlay action labels, Matrix-Game 3 keyboard + mouse, YUME captions.

Each lossy encoder has a decoder that integrates the native controls back into a camera path with the model's own
conventions, so the harness can report the achieved-vs-requested residual. Poses in and out: OpenCV
camera-to-world 4x4 (+x right / +y down / +z forward), world = camera frame of frame 0, positive yaw turns right,
positive pitch turns up.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from adapters.memo import memo
from harness.errors import ConfigError
from trajectories.conventions import rot_x, rot_y, rot_z, se3, w2c_from_c2w, yaw_pitch_from_rotmat

# --------------------------------------------------------------------------------------------------------------
# HY-WorldPlay: one discrete label 0..80 per latent (Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/generate.py)
# --------------------------------------------------------------------------------------------------------------

_HY_INDEX = {"0000": 0, "1000": 1, "0100": 2, "0010": 3, "0001": 4, "1010": 5, "1001": 6, "0110": 7, "0101": 8}


def hy_action_label(T_rel: np.ndarray, trans_threshold: float = 1e-4, rot_threshold_deg: float = 0.05) -> int:
    """Label of one latent step ``T_rel = c2w[i-1]^-1 c2w[i]`` (OpenCV): ``trans_index * 9 + rot_index``.

    Translation one-hot [fwd, back, right, left] from the angle of t to +z / +x (< 60 deg / > 120 deg), only when
    ``‖t‖ > trans_threshold`` (1e-4 at inference, 0.01 in the training loader). Rotation one-hot [right, left, up,
    down] from SciPy ``as_euler('xyz', degrees=True)``: y > 0.05 right, y < -0.05 left, x > 0.05 up, x < -0.05 down.
    """
    from scipy.spatial.transform import Rotation

    t = T_rel[:3, 3]
    tb = [0, 0, 0, 0]
    n = float(np.linalg.norm(t))
    if n > trans_threshold:
        u = t / n
        az = np.degrees(np.arccos(np.clip(u[2], -1, 1)))
        ax = np.degrees(np.arccos(np.clip(u[0], -1, 1)))
        tb = [int(az < 60), int(az > 120), int(ax < 60), int(ax > 120)]
    x, y, _ = Rotation.from_matrix(T_rel[:3, :3]).as_euler("xyz", degrees=True)
    rb = [int(y > rot_threshold_deg), int(y < -rot_threshold_deg), int(x > rot_threshold_deg),
          int(x < -rot_threshold_deg)]
    # fwd/back and right/left (up/down) exclude each other, so every one-hot pair is in upstream's table
    return _HY_INDEX["".join(map(str, tb))] * 9 + _HY_INDEX["".join(map(str, rb))]


@memo
def hy_action_labels(latent_c2w: np.ndarray, trans_threshold: float = 1e-4) -> np.ndarray:
    """Labels for every latent (latent 0 -> 0), from consecutive latent poses. (L,) int64."""
    out = np.zeros(len(latent_c2w), dtype=np.int64)
    for i in range(1, len(latent_c2w)):
        out[i] = hy_action_label(w2c_from_c2w(latent_c2w[i - 1]) @ latent_c2w[i], trans_threshold)
    return out


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
    hold_frames: the fewest frames a key combination is held (12: upstream's own condition generator holds each
    action for 12 frames, ``combine_data``'s ``selections = [12]``, Matrix-Game-3/utils/conditions.py:12, :27-32
    @71c3cd7f7413).
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
_MG3_KEYS = [
    ((0, 0, 0, 0), (0.0, 0.0)), ((1, 0, 0, 0), (1.0, 0.0)), ((0, 1, 0, 0), (-1.0, 0.0)),
    ((0, 0, 1, 0), (0.0, -1.0)), ((0, 0, 0, 1), (0.0, 1.0)), ((1, 0, 1, 0), ("d", "-d")),
    ((1, 0, 0, 1), ("d", "d")),
]
#: what the item's meta.json says about the keyboard encoding
MG3_CAVEATS = (("keys held in runs of at least 12 frames, changed only at 12-frame boundaries as upstream's condition "
                "generator does (utils/conditions.py:12, :27-32@71c3cd7f7413)"),
               ("the backward leg presses S, which upstream's generator never produces (back is commented out, "
                "utils/conditions.py:43@71c3cd7f7413); S+A and S+D are never used"))


def _key_moves(p: MG3Params) -> tuple[np.ndarray, np.ndarray]:
    keys, moves = [], []
    for k, (f, r) in _MG3_KEYS:
        def v(x):
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


def _mg3_axis(target: np.ndarray, p: MG3Params) -> np.ndarray:
    """Mouse values (T,) in units of ``deg_per_unit`` that take one rotation axis from 0 to ``target`` (T,) degrees.

    Error diffusion: transition ``t - 1`` emits the lag ``(target[t] - state) / 15`` when it clears the dead zone,
    else nothing (upstream drops a sub-threshold value for good, nothing accumulates). At the end of every move (a
    run of frames whose target changes) the lag left over, under 0.3 deg, is folded into the move's last emitted
    value of the same sign, which stays above the dead zone, so the state lands on the target when the move ends:
    returns come back to the start orientation exactly, not 0.3 deg short. (A move that emitted nothing of the
    remainder's sign keeps it: under the dead zone, it cannot be sent.)
    """
    T = len(target)
    m = np.zeros(T)
    dz = p.dead_zone * _DEAD_MARGIN
    state = 0.0
    moving = np.r_[False, np.abs(np.diff(target)) > 1e-9]
    run_start = None
    for t in range(1, T):
        if moving[t] and run_start is None:
            run_start = t - 1
        v = (target[t] - state) / p.deg_per_unit
        if abs(v) >= dz:
            m[t - 1] = v
            state += p.deg_per_unit * v
        if moving[t] and (t == T - 1 or not moving[t + 1]):  # the end of a move (run_start was set at its start)
            r = (target[t] - state) / p.deg_per_unit
            if abs(r) > 1e-12:
                run = np.arange(run_start, t)
                # |r| < dz here (a lag that clears the dead zone was emitted above), so it only ever joins a value
                same = [j for j in run[::-1] if m[j] != 0 and np.sign(m[j]) == np.sign(r)]
                if same:  # never below the dead zone: the remainder has the value's sign
                    m[same[0]] += r
                    state += p.deg_per_unit * r
            run_start = None
    return m


def _mg3_no_taps(m: np.ndarray, p: MG3Params) -> np.ndarray:
    """``m`` (one mouse axis, from :func:`_mg3_axis`) without the single-frame taps error diffusion leaves where a
    move speeds up or slows down through the dead zone (value, nothing, value...): upstream's generator sends a
    camera value held for 12 frames, never an isolated one (utils/conditions.py:27-32@71c3cd7f7413).

    A gap shorter than ``p.hold_frames`` between two values of one sign, each at most 3 dead zones (the small values
    of a slow ease), is closed: the values from the one before
    the gap to the one after it are spread evenly over those frames when each share clears the dead zone (with the
    encoder's margin), else the shorter side's values join the nearest value across the gap. The sum is kept, so
    the orientation reached at the end of the move is unchanged; in between it moves by at most 3 dead zones.
    """
    m = m.copy()
    dz = p.dead_zone * _DEAD_MARGIN
    H = max(1, int(p.hold_frames))
    changed = True
    while changed:
        changed = False
        nz = np.flatnonzero(m)
        for i, j in pairwise(nz):
            if (j - i < 2 or j - i - 1 >= H or np.sign(m[i]) != np.sign(m[j])
                    or max(abs(m[i]), abs(m[j])) > 3 * dz):  # only the small values of a slow ease
                continue
            share = (m[i] + m[j]) / (j - i + 1)
            if abs(share) >= dz:
                m[i:j + 1] = share
            else:  # fold the shorter run (counted outwards from the gap) into the value across the gap
                left = i - (np.flatnonzero(m[:i + 1][::-1] == 0)[:1].tolist() or [i + 1])[0] + 1
                right_zero = np.flatnonzero(m[j:] == 0)
                right = int(right_zero[0]) if len(right_zero) else len(m) - j
                if left <= right:
                    m[j] += m[i]
                    m[i] = 0.0
                else:
                    m[i] += m[j]
                    m[j] = 0.0
            changed = True
            break
    return m


@memo
def mg3_encode(c2w: np.ndarray, p: MG3Params = MG3Params()) -> tuple[np.ndarray, np.ndarray]:
    """Quantise a canonical path into per-frame keyboard (T,6) and mouse (T,2) ``[pitch, yaw]`` (float32).

    Rotation: per axis, error diffusion with the end-of-move fold of :func:`_mg3_axis` (every emitted value clears
    upstream's 0.02 dead zone in float32, and the integrated orientation meets the request at the end of every
    move). Translation: keys change only at block boundaries every ``p.hold_frames`` (12) actions, as upstream's
    own condition generator holds each action (``MG3_CAVEATS``); each block takes the key combination whose
    *integrated* positions are closest (sum of squares over the block's frames) to the requested ones, moving along
    the step's average yaw as upstream does. The error this costs is bounded by one block of key steps. Vertical motion cannot be expressed
    (translation is horizontal only) and shows up in the residual. Upstream's integrator applies action ``i`` to go
    from frame ``i`` to frame ``i + 1`` (``compute_all_poses_from_actions``), so row ``t - 1`` carries the motion
    into frame ``t`` and the last row moves nothing (it is zero).
    """
    yaw_cv, pitch_cv = yaw_pitch_from_rotmat(c2w[:, :3, :3])
    yaw_t, pitch_t = np.degrees(yaw_cv), -np.degrees(pitch_cv)  # MG pitch is positive down
    pos_t = c2w[:, :3, 3] * p.metres_per_unit
    keys_tab, moves = _key_moves(p)
    T = len(c2w)
    m_yaw, m_pitch = _mg3_no_taps(_mg3_axis(yaw_t, p), p), _mg3_no_taps(_mg3_axis(pitch_t, p), p)
    mouse = np.stack([p.pitch_sign() * m_pitch, m_yaw], axis=1).astype(np.float32)
    keyboard = np.zeros((T, 6), np.float32)
    states = mg3_states(keyboard, mouse, p)  # the yaw upstream integrates (keys do not change it)
    psi = np.radians(0.5 * (states[:-1, 4] + states[1:, 4]))  # action t-1 moves along the step's average yaw
    fwd = np.stack([np.sin(psi), np.zeros_like(psi), np.cos(psi)], axis=1)
    right = np.stack([np.cos(psi), np.zeros_like(psi), -np.sin(psi)], axis=1)
    H = max(1, int(p.hold_frames))
    pos = np.zeros(3)
    for a in range(0, T - 1, H):  # one key combination per block of H actions (rows a..b-1 move frames a..b)
        b = min(a + H, T - 1)
        steps = moves[:, 0, None, None] * fwd[None, a:b] + moves[:, 1, None, None] * right[None, a:b]  # (K, n, 3)
        reached = pos[None, None] + np.cumsum(steps, axis=1)
        cost = ((reached - pos_t[None, a + 1:b + 1]) ** 2).sum(axis=(1, 2))  # squared error over the block's frames
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
    rel = w2c_from_c2w(ext[0])[None] @ ext
    rel[:, :3, 3] /= p.metres_per_unit
    return rel


# --------------------------------------------------------------------------------------------------------------
# YUME: one caption per stage (stdstu12/YUME@111c3fa decode_camera_controls_from_c2w_sequence.py, caption_re.txt)
# --------------------------------------------------------------------------------------------------------------

YUME_PREFIX = "First-person perspective."
YUME_MOVE = {
    "W": "The camera pushes forward (W).",
    "S": "The camera pulls back (S).",
    "A": "The camera moves to the left (A).",
    "D": "The camera moves to the right (D).",
    "W+A": "The camera pushes forward and moves to the left (W+A).",
    "W+D": "The camera pushes forward and moves to the right (W+D).",
    "S+A": "The camera pulls back and moves to the left (S+A).",
    "S+D": "The camera pulls back and moves to the right (S+D).",
    "None": "The camera's movement direction remains stationary (·).",
}
YUME_ROT = {
    "→": "The camera pans to the right (→).",
    "←": "The camera pans to the left (←).",
    "↑": "The camera tilts up (↑).",
    "↓": "The camera tilts down (↓).",
    "↑→": "The camera tilts up and pans to the right (↑→).",
    "↑←": "The camera tilts up and pans to the left (↑←).",
    "↓→": "The camera tilts down and pans to the right (↓→).",
    "↓←": "The camera tilts down and pans to the left (↓←).",
    "·": "The rotation direction of the camera remains stationary (·).",
}


@dataclass(frozen=True)
class YumeParams:
    """YUME caption policy.

    frames_per_stage: 29 decoded frames per caption line. rotation_snap_deg / translation_snap: a stage's net
    motion below them counts as none (upstream's 1e-4 / 1e-3 rad thresholds would turn float noise into keys).
    deg_per_speed_unit / units_per_speed_unit: calibration of the speed sentence. The rotation value is upstream's
    own measure (stdstu12/YUME@111c3fa fastvideo/sample/sample_5b.py:173 ``get_traj_rotation_change`` averaged by
    ``calculate_metrics_in_range``, :226): the mean angle between consecutive optical axes over the stage, in
    degrees per frame (``deg_per_speed_unit`` = 1). The distance value is the stage's mean translation per frame in
    units of ``units_per_speed_unit`` (a harness choice, recorded: the scale is not recoverable from YUME's text).
    Values are rounded to 0.1 and clipped to [0.1, 10] (YUME's README.md:72 range).
    """

    frames_per_stage: int = 29
    rotation_snap_deg: float = 0.5
    translation_snap: float = 1e-3
    deg_per_speed_unit: float = 1.0
    units_per_speed_unit: float = 0.0032


def yume_keys(T_rel: np.ndarray, p: YumeParams = YumeParams()) -> tuple[str, str]:
    """(movement key, rotation key) of a relative pose, with the snap thresholds (see :class:`YumeParams`)."""
    from scipy.spatial.transform import Rotation

    t = T_rel[:3, 3]
    th = p.translation_snap
    fb = "W" if t[2] > th else ("S" if t[2] < -th else "")
    lr = "D" if t[0] > th else ("A" if t[0] < -th else "")
    move = "+".join(k for k in (fb, lr) if k) or "None"
    ex = Rotation.from_matrix(T_rel[:3, :3]).as_euler("xyz")
    rth = np.radians(p.rotation_snap_deg)
    ud = "↑" if ex[0] > rth else ("↓" if ex[0] < -rth else "")
    hz = "→" if ex[1] > rth else ("←" if ex[1] < -rth else "")
    return move, (ud + hz) or "·"


def yume_stage_bounds(num_poses: int, p: YumeParams = YumeParams()) -> list[tuple[int, int]]:
    """Stage s moves the camera from pose ``29 s`` to pose ``29 (s+1)``: upstream drops the anchor (the conditioning
    image, pose 0), so its 29 frames show poses ``29 s + 1 .. 29 s + 29`` (adapters/contracts/yume.yaml
    ``writer.first_pose``). ``num_poses`` must be ``29 k + 1`` (494 = 17 stages)."""
    if (num_poses - 1) % p.frames_per_stage or num_poses < 1 + p.frames_per_stage:
        raise ValueError(f"YUME needs 29 k + 1 poses (the image + 29 frames per stage); got {num_poses}")
    n = p.frames_per_stage
    return [(s * n, (s + 1) * n) for s in range((num_poses - 1) // n)]


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def yume_rotation_speed(c2w: np.ndarray) -> float:
    """YUME's rotation-speed measure over a pose run (stdstu12/YUME@111c3fa sample_5b.py:173, :226): the mean
    angle in degrees between consecutive optical axes (third column of the rotation), stride 1."""
    z = c2w[:, :3, 2]
    if len(z) < 2:
        return 0.0
    cos = np.einsum("ij,ij->i", z[:-1], z[1:]) / (np.linalg.norm(z[:-1], axis=1) * np.linalg.norm(z[1:], axis=1))
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).mean())


@memo
def yume_captions(c2w: np.ndarray, scene_prompt: str, p: YumeParams = YumeParams()) -> list[str]:
    """One caption line per stage: prefix, movement sentence, rotation sentence, speed sentence, then the scene
    prompt appended with no separator. Keys come from the stage's net motion, from the pose it starts at to the
    pose its last frame shows (:func:`yume_stage_bounds`); the rotation speed is YUME's own per-frame measure over
    the same poses (:func:`yume_rotation_speed`). Line s is meant for stage s: the runner shim makes upstream use it
    so (upstream alone would condition stage s on line s-1)."""
    lines = []
    n = p.frames_per_stage
    for a, end in yume_stage_bounds(len(c2w), p):
        rel = w2c_from_c2w(c2w[a]) @ c2w[end]
        move, rot = yume_keys(rel, p)
        dist = 0.0 if move == "None" else float(np.clip(round(np.linalg.norm(rel[:3, 3]) / n / p.units_per_speed_unit, 1), 0.1, 10))
        ang = 0.0 if rot == "·" else float(np.clip(round(yume_rotation_speed(c2w[a:end + 1]) / p.deg_per_speed_unit, 1), 0.1, 10))
        speed = (f"Actual distance moved:{_num(dist)} at 100 meters per second. Angular change rate (turn speed):"
                 f"{_num(ang)}. View rotation speed:{_num(ang)}.")
        lines.append(f"{YUME_PREFIX} {YUME_MOVE[move]} {YUME_ROT[rot]} {speed}{scene_prompt}")
    return lines


def yume_parse_caption(line: str) -> tuple[str, str]:
    """Movement and rotation keys of a caption line (inverse of the sentence tables)."""
    move = next(k for k, s in YUME_MOVE.items() if s in line)
    rot = next(k for k, s in YUME_ROT.items() if s in line)
    return move, rot


def yume_parse_speeds(line: str) -> tuple[float, float]:
    """(distance value, rotation value) of a caption line's speed sentence."""
    import re

    dist = float(re.search(r"Actual distance moved:(\d+(?:\.\d)?)", line).group(1))
    rot = float(re.search(r"View rotation speed:(\d+(?:\.\d)?)", line).group(1))
    return dist, rot


@memo
def yume_decode(lines: list[str], p: YumeParams = YumeParams()) -> np.ndarray:
    """Captions -> canonical path (``29 k + 1`` poses: the image's, then 29 per stage): each stage turns / moves at
    its speed values in its keys' directions."""
    T = len(lines) * p.frames_per_stage + 1
    out = np.empty((T, 4, 4))
    cur = np.eye(4)
    out[0] = cur
    i = 0
    for line in lines:
        move, rot = yume_parse_caption(line)
        dist, ang = yume_parse_speeds(line)
        axis = np.array([1 if "→" in rot else -1 if "←" in rot else 0, 1 if "↑" in rot else -1 if "↓" in rot else 0],
                        dtype=float)
        if axis.any():
            axis /= np.linalg.norm(axis)
        dyaw, dpitch = np.radians(ang * p.deg_per_speed_unit) * axis
        f = (1 if "W" in move else -1 if "S" in move else 0)
        r = (1 if "D" in move else -1 if "A" in move else 0)
        step = np.array([r, 0.0, f], dtype=float)
        if step.any():
            step *= dist * p.units_per_speed_unit / np.linalg.norm(step)
        for _ in range(p.frames_per_stage):
            yaw, pitch = yaw_pitch_from_rotmat(cur[:3, :3])
            R = rot_y(yaw + dyaw) @ rot_x(pitch + dpitch)
            cur = se3(R, cur[:3, 3] + cur[:3, :3] @ step)
            i += 1
            out[i] = cur
    return out
