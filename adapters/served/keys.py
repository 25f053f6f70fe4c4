"""Held-key camera scripts of the served world models: the engine's key kinematics, a greedy encoder and a decoder.

SGLang's realtime endpoints take a camera as a script of held keys, one key set per step
(``condition_inputs.camera_actions: list[list[str]]``). The engine integrates the keys into camera-to-world poses:

* **LingBot-World** (one key set per *latent* frame): ``i``/``k`` pitch by +-4 deg, ``j``/``l`` yaw by -+6 deg,
  ``w``/``s``/``d``/``a`` move 0.05 along the horizontal forward / right axis; pitch clamped to +-85 deg;
  ``R' = R_y(yaw) R R_x(pitch)`` (sgl-project/sglang v0.5.23 (PyPI) ``python/sglang/multimodal_gen/configs/
  pipeline_configs/lingbot_world.py::_actions_to_c2ws``; the first returned pose is dropped, so key set ``t``
  yields the pose of latent ``t``).
* **SANA-WM** (one key set per *pixel* frame): the same update with 1.2 deg per step for yaw and pitch, 0.04 per
  step of translation and ``yaw += 0.4 * (d - a)`` strafe coupling (sglang v0.5.23 ``.../sana_wm/base.py::
  sana_wm_action_to_camera_to_world_array`` and ``_SANA_WM_DEFAULT_*``); key set ``t`` yields frame ``t + 1``.

Both use OpenCV axes (+x right, +y down, +z forward) with ``R_y(+a)`` turning the view right and ``R_x(+a)``
turning it up, as :mod:`trajectories.conventions` does, so no axis conversion is needed at this boundary.

The encoder picks, step by step, the key set (out of the 81 combinations of pitch, yaw, forward and strafe keys)
whose integrated pose lands closest to the requested pose; the decoder integrates a script back. The
achieved-vs-requested residual of every item comes from the decoder.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError, UserError
from harness.sections import Fix, Number, Section

from trajectories.conventions import geodesic_angle, rot_x, rot_y

#: key groups; one key (or none) of each group per step
_GROUPS = (("", "i", "k"), ("", "j", "l"), ("", "w", "s"), ("", "a", "d"))
COMBOS: tuple[tuple[str, ...], ...] = tuple(
    tuple(k for k in combo if k) for combo in itertools.product(*_GROUPS))


#: a step's size: > 0
_Step = Annotated[Number, Field(gt=0), Fix("must be > 0")]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class KeyKinematics(Section):
    """How an engine integrates one held-key step (angles in degrees, translation in the engine's units).

    yaw_deg / pitch_deg: rotation per step; move: translation per step along the horizontal forward / right axes;
    strafe_yaw_coupling: extra yaw of ``a``/``d`` as a fraction of ``yaw_deg`` (SANA-WM 0.4, LingBot 0);
    pitch_limit_deg: pitch beyond which the step's pitch is dropped; per: ``latent`` (one key set per latent frame,
    LingBot) or ``frame`` (one per pixel frame, SANA-WM).
    """

    section: ClassVar[str] = "backend.models.<model>.kinematics"
    error: ClassVar[type[UserError]] = ConfigError

    yaw_deg: _Step
    pitch_deg: _Step
    move: _Step
    strafe_yaw_coupling: Number = 0.0
    pitch_limit_deg: Number = 85.0
    per: Annotated[Literal["latent", "frame"], Fix("use 'latent' or 'frame'")] = "latent"

    def to_dict(self) -> dict[str, Any]:
        return {"yaw_deg": self.yaw_deg, "pitch_deg": self.pitch_deg, "move": self.move,
                "strafe_yaw_coupling": self.strafe_yaw_coupling, "pitch_limit_deg": self.pitch_limit_deg,
                "per": self.per}


def _step(kin: KeyKinematics, c2w: np.ndarray, pitch: float, keys: tuple[str, ...]) -> tuple[np.ndarray, float]:
    """One engine step from ``c2w`` (4x4) with accumulated ``pitch`` (radians): the new pose and pitch."""
    r_pitch, r_yaw = np.deg2rad(kin.pitch_deg), np.deg2rad(kin.yaw_deg)
    dp = (r_pitch if "i" in keys else 0.0) - (r_pitch if "k" in keys else 0.0)
    if abs(pitch + dp) <= np.deg2rad(kin.pitch_limit_deg):
        pitch += dp
    else:
        dp = 0.0
    dy = (r_yaw if "l" in keys else 0.0) - (r_yaw if "j" in keys else 0.0)
    dy += kin.strafe_yaw_coupling * ((r_yaw if "d" in keys else 0.0) - (r_yaw if "a" in keys else 0.0))
    R = rot_y(dy) @ c2w[:3, :3] @ rot_x(dp)
    fwd, right = R[:, 2].copy(), R[:, 0].copy()
    fwd[1] = right[1] = 0.0
    nf, nr = np.linalg.norm(fwd), np.linalg.norm(right)
    fwd = fwd / (nf + 1e-6) if nf > 0 else fwd  # the engines divide by norm + 1e-6 (a 1e-6 shortfall per step)
    right = right / (nr + 1e-6) if nr > 0 else right
    move = np.zeros(3)
    move += fwd * kin.move * (("w" in keys) - ("s" in keys))
    move += right * kin.move * (("d" in keys) - ("a" in keys))
    out = np.eye(4)
    out[:3, :3] = R
    out[:3, 3] = c2w[:3, 3] + move
    return out, pitch


def decode(kin: KeyKinematics, script: list[list[str]]) -> np.ndarray:
    """(len(script) + 1, 4, 4) poses: identity, then the pose after each key set (engine units)."""
    c2w, pitch = np.eye(4), 0.0
    out = [c2w]
    for keys in script:
        c2w, pitch = _step(kin, c2w, pitch, tuple(keys))
        out.append(c2w)
    return np.stack(out)


def _combo_table(kin: KeyKinematics) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per combination of :data:`COMBOS`: pitch delta, yaw delta (radians), forward and right move signs."""
    r_pitch, r_yaw = np.deg2rad(kin.pitch_deg), np.deg2rad(kin.yaw_deg)
    dp = np.array([(("i" in k) - ("k" in k)) * r_pitch for k in COMBOS])
    dy = np.array([(("l" in k) - ("j" in k)) * r_yaw + kin.strafe_yaw_coupling * (("d" in k) - ("a" in k)) * r_yaw
                   for k in COMBOS])
    fwd = np.array([("w" in k) - ("s" in k) for k in COMBOS], dtype=np.float64)
    right = np.array([("d" in k) - ("a" in k) for k in COMBOS], dtype=np.float64)
    return dp, dy, fwd, right


def encode(kin: KeyKinematics, targets: np.ndarray) -> list[list[str]]:
    """Greedy key script whose integration follows ``targets`` ((S + 1, 4, 4) OpenCV c2w in engine units, world =
    target 0): key set ``t`` is the combination whose step from the achieved pose ``t`` lands closest to target
    ``t + 1``, by rotation error in degrees plus translation error in steps of ``move`` times ``yaw_deg`` (one
    missed move costs as much as one missed yaw step). Ties go to the fewest keys (the order of :data:`COMBOS`).
    All 81 combinations of a step are evaluated at once (:func:`_step` is the one-step rule they vectorise)."""
    targets = np.asarray(targets, dtype=np.float64)
    dp_all, dy_all, fwd_sign, right_sign = _combo_table(kin)
    limit = np.deg2rad(kin.pitch_limit_deg)
    Rx, Ry = rot_x(dp_all), rot_y(dy_all)  # (81, 3, 3); a clamped pitch uses the identity instead of Rx
    eye = np.broadcast_to(np.eye(3), Rx.shape)
    c2w, pitch = np.eye(4), 0.0
    script: list[list[str]] = []
    for t in range(1, len(targets)):
        ok = np.abs(pitch + dp_all) <= limit
        R = Ry @ c2w[:3, :3] @ np.where(ok[:, None, None], Rx, eye)
        fwd, right = R[:, :, 2].copy(), R[:, :, 0].copy()
        fwd[:, 1] = right[:, 1] = 0.0
        nf = np.linalg.norm(fwd, axis=1, keepdims=True)
        nr = np.linalg.norm(right, axis=1, keepdims=True)
        fwd = np.where(nf > 0, fwd / (nf + 1e-6), fwd)
        right = np.where(nr > 0, right / (nr + 1e-6), right)
        T = c2w[:3, 3] + fwd * (kin.move * fwd_sign)[:, None] + right * (kin.move * right_sign)[:, None]
        rot = np.rad2deg(geodesic_angle(R, targets[t][:3, :3]))
        tr = np.linalg.norm(T - targets[t][:3, 3], axis=1) / kin.move * kin.yaw_deg
        cost = rot + tr
        # the first (fewest keys) of the cheapest; <= so that a cost too large for 1e-12 to change (far targets)
        # still selects its minimum
        best = int(np.flatnonzero(cost <= cost.min() + 1e-12)[0])
        script.append(list(COMBOS[best]))
        c2w = np.eye(4)
        c2w[:3, :3], c2w[:3, 3] = R[best], T[best]
        pitch = pitch + dp_all[best] if ok[best] else pitch
    return script
