"""An independent implementation of Matrix-Game 3's action integration, written from the rule recorded in
``adapters/matrix_game3/contract.yaml`` (``compute_all_poses_from_actions`` / ``compute_next_pose_from_action``):
state (x, y, z, pitch, yaw) from zero; action i moves frame i to frame i+1. Used by the stand-in checkout and by
the step-for-step test of the harness's encoder; it shares no code with ``adapters.matrix_game3.controls``."""

import math

import numpy as np

WSAD, DIAG, SENS, DEAD = 12.35, 8.73, 15.0, 0.02


def next_pose(pose, key, mouse):
    x, y, z, pitch, yaw = (float(v) for v in pose)
    w, s, a, d = (float(v) for v in key[:4])
    mx, my = float(mouse[0]), float(mouse[1])
    new_pitch = pitch + (SENS * mx if abs(mx) >= DEAD else 0.0)
    new_yaw = yaw + (SENS * my if abs(my) >= DEAD else 0.0)
    while new_yaw > 180:
        new_yaw -= 360
    while new_yaw < -180:
        new_yaw += 360
    f = WSAD if (w > 0.5 and s < 0.5) else (-WSAD if (s > 0.5 and w < 0.5) else 0.0)
    r = WSAD if (d > 0.5 and a < 0.5) else (-WSAD if (a > 0.5 and d < 0.5) else 0.0)
    if abs(f) > 0.1 and abs(r) > 0.1:
        f, r = math.copysign(DIAG, f), math.copysign(DIAG, r)
    ang = math.radians((yaw + new_yaw) / 2.0)
    return np.array([x + math.cos(ang) * f - math.sin(ang) * r, y + math.sin(ang) * f + math.cos(ang) * r, z,
                     new_pitch, new_yaw])


def all_poses(keyboard, mouse, first_pose=None):
    T = len(keyboard)
    poses = np.zeros((T, 5))
    if first_pose is not None:
        poses[0] = first_pose
    for i in range(T - 1):
        poses[i + 1] = next_pose(poses[i], keyboard[i], mouse[i])
    return poses
