"""YUME's controls: one caption per stage, with the decoder that reads the captions back into a camera path, so the
harness can report the achieved-vs-requested residual.

Poses in and out: OpenCV camera-to-world 4x4 (+x right / +y down / +z forward), world = camera frame of
frame 0, positive yaw turns right, positive pitch turns up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adapters.memo import memo
from trajectories.conventions import rot_x, rot_y, se3, w2c_from_c2w

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
    Values are written exactly (:func:`yume_number`) and clipped to [0.1, 10] (YUME's README.md:72 range).
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
    image, pose 0), so its 29 frames show poses ``29 s + 1 .. 29 s + 29`` (adapters/yume/contract.yaml
    ``writer.first_pose``). ``num_poses`` must be ``29 k + 1`` (494 = 17 stages)."""
    if (num_poses - 1) % p.frames_per_stage or num_poses < 1 + p.frames_per_stage:
        raise ValueError(f"YUME needs 29 k + 1 poses (the image + 29 frames per stage); got {num_poses}")
    n = p.frames_per_stage
    return [(s * n, (s + 1) * n) for s in range((num_poses - 1) // n)]


def yume_number(v: float) -> str:
    """A speed as a caption writes it: a whole number without a decimal (upstream's own captions, caption_re.txt),
    else its decimal digits up to 9 significant ones, as upstream's training captions print their speeds with all
    their digits (``str`` of the float, fastvideo/dataset/t2v_datasets.py:430-432@111c3fa); the text goes to T5
    verbatim and nothing upstream parses it. Nine digits keep a 29-stage video within 1e-6 degrees of the speed
    (the float arithmetic's last digits are noise: 2.96 deg/frame measures as 2.9599999999999813)."""
    short = float(f"{float(v):.9g}")
    return str(int(short)) if short.is_integer() else repr(short)


def yume_clock(num_poses: int, p: YumeParams = YumeParams()) -> np.ndarray:
    """The poses where a caption may change: the stage edges ``29 s`` (:func:`yume_stage_bounds`)."""
    return np.arange(0, num_poses, p.frames_per_stage, dtype=np.int64)


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
    the same poses (:func:`yume_rotation_speed`), written exactly (:func:`yume_number`). On a path laid on the stages
    (:func:`yume_clock`) every stage turns one way at one speed, so the captions carry it exactly. Line s is meant for stage s: the runner shim makes upstream use it
    so (upstream alone would condition stage s on line s-1)."""
    lines = []
    n = p.frames_per_stage
    for a, end in yume_stage_bounds(len(c2w), p):
        rel = w2c_from_c2w(c2w[a]) @ c2w[end]
        move, rot = yume_keys(rel, p)
        dist = 0.0 if move == "None" else float(np.clip(np.linalg.norm(rel[:3, 3]) / n / p.units_per_speed_unit, 0.1, 10))
        ang = 0.0 if rot == "·" else float(np.clip(yume_rotation_speed(c2w[a:end + 1]) / p.deg_per_speed_unit, 0.1, 10))
        speed = (f"Actual distance moved:{yume_number(dist)} at 100 meters per second. Angular change rate (turn "
                 f"speed):{yume_number(ang)}. View rotation speed:{yume_number(ang)}.")
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

    def number_after(label: str) -> float:
        m = re.search(label + r":(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", line)
        if m is None:
            raise ValueError(f"no '{label}:<number>' in the caption line {line!r}")
        return float(m.group(1))

    return number_after("Actual distance moved"), number_after("View rotation speed")


@memo
def yume_decode(lines: list[str], p: YumeParams = YumeParams()) -> np.ndarray:
    """Captions -> canonical path (``29 k + 1`` poses: the image's, then 29 per stage): each stage turns / moves at
    its speed values in its keys' directions."""
    T = len(lines) * p.frames_per_stage + 1
    out = np.empty((T, 4, 4))
    cur = np.eye(4)
    out[0] = cur
    yaw = pitch = 0.0  # kept as angles: read back from the matrix, the yaw is lost at a 90-degree tilt
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
            yaw, pitch = yaw + dyaw, pitch + dpitch
            cur = se3(rot_y(yaw) @ rot_x(pitch), cur[:3, 3] + cur[:3, :3] @ step)
            i += 1
            out[i] = cur
    return out
