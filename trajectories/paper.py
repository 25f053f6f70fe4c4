"""The paper's stated numbers (``trajectories/paper_numbers.yaml``) and the check of a compiled path against them.

The table quotes every number WorldMemBench (arXiv 2610.19063) states about its protocol. :func:`measure_layout`
reads a path's layout from its poses alone (frames, initial hold, frames of motion, the frame the motion ends on,
the static tail, each departure-and-return), and :func:`paper_violations` lists what in that layout contradicts a
stated number, naming the row and its quote. What the rules derive from the rows (no more):

- **Count.** A model whose frame count the paper states (Appendix C, Appendix H for LingBot World v2) runs every
  trajectory at that count ("no setting varies across cases or trajectories"), YUME LRLRLR at its own 551.
- **The end of the motion.** Evoke's 501-frame trajectory "keeps 21 static pose samples at the end", so its last
  move ends on frame 501 - 21 = 480, and so on every model: a preset lays out frames at a speed, the same on every
  model. SANA-WM's 481 frames leave nothing after frame 480, which agrees. Read exactly ("the last 21 and no more
  are static"), this holds for LRLR, LRLRLR, LRUD and the square. For LR-Hold, whose name ends in a hold, it is read
  as "the last 21 are static": its motion ends on frame 480 or before.
- **Speed.** The release's names state the sweeps' speed (``0p75dpf``: 0.75 degrees per frame); the mean speed
  over the moving frames must be it (a constant and a symmetric-ease profile both have that mean).
- **Revisits.** LRLR and LRLRLR repeat the left-right cycle twice and three times, LRUD a left-right then an
  up-down cycle, LR-Hold one departure and revisit, the square one loop F-R-B-L at a fixed orientation; every
  departure turns at least 30 degrees (G.1's qualification) and every return ends on the start pose.
- **LR-Hold's phases.** The judge decides whether the event starts "during the initial hold" from frames sampled
  every 8: the initial hold must hold frames 0, 8 and 16 (two strides after frame 0), and the "final stationary
  hold" the judge is given must exist (a frame held after the return).

The readings that fit these rules but are not stated (480 frames of motion with no holds, 80-degree LRLRLR
sweeps, LR-Hold's initial hold of 60, the square's 120-frame legs) are the presets' (conf/trajectory/*.yaml),
labelled as inferences there and in docs/trajectories.md.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .conventions import geodesic_angle

TABLE = Path(__file__).with_name("paper_numbers.yaml")

#: The paper's trajectory names (sec. 3.3, appendix G, Fig. 10).
TRAJECTORIES = ("LRLR", "LRLRLR", "LRUD", "LR-Hold", "Translation")

#: The row value stating each trajectory's number of revisits, and the cycles it is made of (sec. 3.3, Fig. 10).
_REVISITS = {"LRLR": "trajectory.lrlr_lrlrlr.lrlr_revisits", "LRLRLR": "trajectory.lrlr_lrlrlr.lrlrlr_revisits",
             "LRUD": "trajectory.lrud.revisits", "LR-Hold": "trajectory.lr_hold.revisits",
             "Translation": "trajectory.translation.revisits"}
_CYCLES = {"LRLR": ("left",), "LRLRLR": ("left",), "LRUD": ("left", "up"), "LR-Hold": ("left",),
           "Translation": ("FRBL",)}

_ROT_TOL_DEG = 1e-7  # a step below this is no rotation (float noise of the builder is ~1e-12 deg)
_TRANS_TOL = 1e-9  # nor a translation below this fraction of the path's extent


class PaperRow(BaseModel):
    """One row of the table: the quote, its section and the numbers (``values``, ``frames``) or names it states."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    section: str
    quote: str
    values: dict[str, float] = Field(default_factory=dict)
    frames: dict[str, int] = Field(default_factory=dict)
    names: list[str] = Field(default_factory=list)
    model: Optional[str] = None
    reading: Optional[str] = None


class PaperNumbers(BaseModel):
    """``trajectories/paper_numbers.yaml``: the rows, the paper's trajectory names -> release presets, and how a
    model's item path counts against the paper's frames (harness facts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paper: dict[str, str]
    presets: dict[str, str]
    harness_poses_beyond_frames: dict[str, int] = Field(default_factory=dict)
    rows: list[PaperRow]

    def row(self, row_id: str) -> PaperRow:
        for r in self.rows:
            if r.id == row_id:
                return r
        raise KeyError(f"no row {row_id!r} in {TABLE.name}")

    def value(self, ref: str) -> float:
        """``"<row id>.<value name>"`` -> the number (the row id may itself contain dots)."""
        row_id, _, name = ref.rpartition(".")
        return self.row(row_id).values[name]

    def cite(self, ref: str) -> str:
        """``<section>: "<quote>"`` of a row (or of the row of a ``<row id>.<value>`` reference)."""
        r = self.row(ref) if any(x.id == ref for x in self.rows) else self.row(ref.rpartition(".")[0])
        return f'{r.section}: "{r.quote}"'

    def trajectory_of(self, preset: str) -> Optional[str]:
        """The paper's name of a release preset (``lrlrlr_sym_1dpf`` -> ``LRLRLR``), None for another name."""
        return next((t for t, p in self.presets.items() if p == preset), None)

    def stated_frames(self, model: str, trajectory: str) -> Optional[tuple[int, PaperRow]]:
        """The frame count the paper states for ``model`` on ``trajectory`` and the row stating it (a count for the
        trajectory itself wins over one for ``all``); None where the text states none (HY-WorldPlay: its count is
        only in Table 4, an image; YUME's LR-Hold and square)."""
        rows = [r for r in self.rows if r.model == model and r.frames]
        for key in (trajectory, "all"):
            for r in rows:
                if key in r.frames:
                    return r.frames[key], r
        return None

    def poses(self, model: str, trajectory: str) -> Optional[int]:
        """The poses of ``model``'s item path for ``trajectory``: the stated frames plus the harness's offset."""
        stated = self.stated_frames(model, trajectory)
        return None if stated is None else stated[0] + self.harness_poses_beyond_frames.get(model, 0)

    def motion_end(self) -> int:
        """The frame the last move ends on: Evoke's frames minus its static samples at the end (501 - 21)."""
        evoke = self.stated_frames("evoke", "LRLR")
        assert evoke is not None
        return evoke[0] - int(self.value("c.evoke.static_end.static_end"))


@functools.cache
def load_paper_numbers(path: Optional[Path] = None) -> PaperNumbers:
    """The table (validated: unknown keys fail, naming them)."""
    import yaml

    return PaperNumbers.model_validate(yaml.safe_load((path or TABLE).read_text(encoding="utf-8")))


def preset_speed(release_name: str) -> Optional[float]:
    """The speed a release name states, degrees per frame: ``lrlr_sym_0p75dpf`` -> 0.75 (``p`` is the decimal
    point), ``lrlrlr_sym_1dpf`` -> 1.0; None for a name without ``<n>dpf`` (``translate_square``)."""
    m = re.search(r"_(\d+(?:p\d+)?)dpf$", release_name)
    return float(m.group(1).replace("p", ".")) if m else None


@dataclass(frozen=True)
class Excursion:
    """One departure and return, read from the poses: frames ``[start, end)`` are away from the start pose.

    axis: ``yaw``, ``pitch`` (the rotation axis at the farthest pose) or ``translation``. direction: ``left``,
    ``right``, ``up``, ``down`` (the side of the farthest pose), or for a translation the legs in order
    (``F``/``R``/``B``/``L``: +z, +x, -z, -x). peak: degrees (rotation) or scene units (translation) from the start
    pose. return_error: how far the pose after ``end - 1`` is from the start pose (same units).
    """

    start: int
    end: int
    axis: str
    direction: str
    peak: float
    return_error: float


@dataclass(frozen=True)
class Layout:
    """A path's layout measured from its poses (``c2w`` (T, 4, 4), frame 0 the initial view).

    frames: T. initial_hold: frames after frame 0 before the first move. motion: frames whose pose differs from
    the previous frame's. settle: the frame the last move ends on (0 when nothing moves). final_static: frames
    from ``settle`` to the end, all at one pose (the arrival counts: Evoke's "static pose samples at the end").
    interior_hold: frames between the first and the last move that do not move. mean_speed: the mean rotation
    (degrees) or translation (scene units) per moving frame. starts_at_identity: ``c2w[0]`` is the identity.
    """

    frames: int
    initial_hold: int
    motion: int
    settle: int
    final_static: int
    interior_hold: int
    mean_speed: float
    rotates: bool
    translates: bool
    starts_at_identity: bool
    excursions: tuple[Excursion, ...]


def measure_layout(c2w: np.ndarray) -> Layout:
    """The :class:`Layout` of ``c2w`` (T, 4, 4) OpenCV camera-to-world, world = frame 0; nothing but the poses."""
    c2w = np.asarray(c2w, dtype=np.float64)
    T = len(c2w)
    rot = np.degrees(geodesic_angle(c2w[:-1, :3, :3], c2w[1:, :3, :3]))
    centres = c2w[:, :3, 3]
    extent = max(float(np.ptp(centres, axis=0).max()), 1e-12)
    trans = np.linalg.norm(np.diff(centres, axis=0), axis=1)
    moving = (rot > _ROT_TOL_DEG) | (trans > _TRANS_TOL * extent)  # moving[i]: frame i + 1 differs from frame i
    idx = np.nonzero(moving)[0] + 1  # the frames that moved
    first, settle = (int(idx[0]), int(idx[-1])) if len(idx) else (0, 0)
    rotates = bool((rot > _ROT_TOL_DEG).any())
    total = float(rot.sum()) if rotates else float(trans.sum())
    return Layout(
        frames=T, initial_hold=max(first - 1, 0) if len(idx) else T - 1, motion=len(idx), settle=settle,
        final_static=T - settle, interior_hold=(settle - first + 1 - len(idx)) if len(idx) else 0,
        mean_speed=total / len(idx) if len(idx) else 0.0, rotates=rotates,
        translates=bool((trans > _TRANS_TOL * extent).any()),
        starts_at_identity=bool(np.allclose(c2w[0], np.eye(4), atol=1e-12)),
        excursions=tuple(_excursions(c2w, rotates, extent)))


def _excursions(c2w: np.ndarray, rotates: bool, extent: float) -> list[Excursion]:
    """The runs of frames away from the start pose, each read as one departure and return."""
    start = c2w[0]
    ang = np.degrees(geodesic_angle(start[None, :3, :3], c2w[:, :3, :3]))
    dist = np.linalg.norm(c2w[:, :3, 3] - start[None, :3, 3], axis=1)
    away = (ang > _ROT_TOL_DEG) | (dist > _TRANS_TOL * extent)
    out: list[Excursion] = []
    t = 0
    while t < len(c2w):
        if not away[t]:
            t += 1
            continue
        a = t
        while t < len(c2w) and away[t]:
            t += 1
        after = min(t, len(c2w) - 1)  # the frame after the run (the run's last frame when the path ends away)
        if rotates:
            k = a + int(np.argmax(ang[a:t]))
            axis, direction = _rotation_side(c2w[k, :3, :3])
            out.append(Excursion(a, t, axis, direction, float(ang[k]), float(ang[after])))
        else:
            out.append(Excursion(a, t, "translation", _legs(c2w[a - 1:after + 1, :3, 3]), float(dist[a:t].max()),
                                 float(dist[after])))
    return out


def _rotation_side(R: np.ndarray) -> tuple[str, str]:
    """(axis, side) of a roll-free rotation from the start view: its axis-angle vector ``w`` (y: yaw, positive
    turns right; x: pitch, positive turns up: :mod:`trajectories.conventions`)."""
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if abs(w[1]) >= abs(w[0]):
        return "yaw", "right" if w[1] > 0 else "left"
    return "pitch", "up" if w[0] > 0 else "down"


def _legs(centres: np.ndarray) -> str:
    """The straight legs of a translation, in order, named by direction (F +z, B -z, R +x, L -x, U -y, D +y)."""
    steps = np.diff(centres, axis=0)
    names: list[str] = []
    for s in steps:
        n = float(np.linalg.norm(s))
        if n <= 0:
            continue
        axis = int(np.argmax(np.abs(s)))
        name = {(2, 1): "F", (2, -1): "B", (0, 1): "R", (0, -1): "L", (1, -1): "U", (1, 1): "D"}[
            (axis, 1 if s[axis] > 0 else -1)]
        if not names or names[-1] != name:
            names.append(name)
    return "".join(names)


def paper_violations(trajectory: str, layout: Layout, model: str, speed: Optional[float] = None,
                     numbers: Optional[PaperNumbers] = None) -> list[str]:
    """What in ``layout`` (``model``'s path for the paper's ``trajectory``) contradicts a stated number; empty when
    nothing does. Each message names the measured value, the stated one and the row's section and quote.

    Args:
        trajectory: one of :data:`TRAJECTORIES`. layout: :func:`measure_layout` of the compiled path.
        model: the harness's model name (``adapters/<model>/conf/model/<model>.yaml``); a model the paper does not
            evaluate is held to every rule but the count (its count must only fit the layout: past the end of the
            motion).
        speed: the preset's stated speed in degrees per frame (:func:`preset_speed`); None for the square.
    """
    if trajectory not in TRAJECTORIES:
        raise ValueError(f"trajectory {trajectory!r}: one of {TRAJECTORIES}")
    p = numbers or load_paper_numbers()
    out = _count_violations(trajectory, layout, model, p)
    out += _motion_end_violations(trajectory, layout, p)
    if speed is not None and abs(layout.mean_speed - speed) > 1e-6 * max(speed, 1.0):
        out.append(f"speed: the moving frames turn {layout.mean_speed:.6g} deg per frame on average; the release's "
                   f"name states {speed:g}")
    out += _cycle_violations(trajectory, layout, p)
    if trajectory == "LR-Hold":
        out += _dynamic_violations(layout, p)
    if not layout.starts_at_identity:
        out.append("frame 0: its pose is not the identity (world = camera frame of frame 0)")
    return out


def _count_violations(trajectory: str, layout: Layout, model: str, p: PaperNumbers) -> list[str]:
    stated = p.stated_frames(model, trajectory)
    if stated is None:
        if layout.frames <= p.motion_end():
            return [f"frames: {layout.frames}; every stated count runs past the last move's frame "
                    f"{p.motion_end()} (SANA-WM's 481 the shortest)"]
        return []
    want = stated[0] + p.harness_poses_beyond_frames.get(model, 0)
    if layout.frames == want:
        return []
    extra = f" (+{want - stated[0]} pose of the harness's item path)" if want != stated[0] else ""
    return [f"frames: {layout.frames}, but the paper states {stated[0]}{extra} for {model} on {trajectory} "
            f"({stated[1].section}: \"{stated[1].quote}\"; {p.cite('c.all')})"]


def _motion_end_violations(trajectory: str, layout: Layout, p: PaperNumbers) -> list[str]:
    end = p.motion_end()
    why = (f"Evoke's {end + int(p.value('c.evoke.static_end.static_end'))}-frame trajectory "
           f"\"keeps {int(p.value('c.evoke.static_end.static_end'))} static pose samples at the end\" "
           f"({p.row('c.evoke.static_end').section}), so the last move ends on frame {end} on every model")
    if trajectory == "LR-Hold":
        if layout.settle > end:
            return [f"end of motion: frame {layout.settle}, after frame {end}: {why}"]
        return []
    if layout.settle != end:
        return [f"end of motion: frame {layout.settle}, not {end}: {why} (exactly {end} for {trajectory}: read as "
                "the only static samples, which SANA-WM's 481 frames, ending on frame 480, agree with)"]
    return []


def _cycle_violations(trajectory: str, layout: Layout, p: PaperNumbers) -> list[str]:
    out: list[str] = []
    n = int(p.value(_REVISITS[trajectory]))
    exc = layout.excursions
    if len(exc) != n:
        out.append(f"revisits: the path leaves and comes back to the start pose {len(exc)} time(s); the paper states "
                   f"{n} for {trajectory} ({p.cite(_REVISITS[trajectory])})")
    cycles = _CYCLES[trajectory]
    for k, e in enumerate(exc):
        want = cycles[min(k, len(cycles) - 1)]
        if e.direction != want:
            out.append(f"cycle {k + 1}: {e.direction} ({e.axis}); {trajectory} has {want} "
                       f"({p.cite('trajectory.translation' if trajectory == 'Translation' else 'trajectory.rotation')})")
        if e.return_error > 1e-6:
            out.append(f"cycle {k + 1}: ends {e.return_error:.3g} from the start pose; a revisit returns to it")
        min_dep = p.value("g1.pose.departure_deg")
        if e.axis != "translation" and e.peak < min_dep:
            out.append(f"cycle {k + 1}: departs {e.peak:.3g} deg; a departure qualifies from {min_dep:g} deg "
                       f"({p.cite('g1.pose')})")
    if trajectory == "Translation" and layout.rotates:
        out.append(f"orientation: the square loop rotates; {p.cite('trajectory.translation')}")
    if trajectory != "Translation" and layout.translates:
        out.append(f"position: the rotation moves the camera; {p.cite('trajectory.rotation')}")
    return out


def _dynamic_violations(layout: Layout, p: PaperNumbers) -> list[str]:
    """LR-Hold: the initial hold must show the judge's samples 0, stride and 2 x stride (the event-start gate), and
    the final stationary hold the judge is given must exist."""
    out: list[str] = []
    stride = int(p.value("dynamic.judge_frames.stride"))
    if layout.initial_hold < 2 * stride:
        out.append(f"initial hold: {layout.initial_hold} frame(s) after frame 0; the judge decides whether the event "
                   f"starts during it ({p.cite('dynamic.gate')}) from frames sampled every {stride} "
                   f"({p.cite('dynamic.judge_frames')}): it needs >= {2 * stride} frames, so that frames 0, {stride} "
                   f"and {2 * stride} show the start")
    if layout.final_static < 2:
        out.append(f"final hold: none after the return (frame {layout.settle} of {layout.frames}); the judge is given "
                   f"a final stationary hold ({p.cite('dynamic.judge_phases')})")
    return out


def check_path(preset: str, c2w: np.ndarray, model: str, numbers: Optional[PaperNumbers] = None) -> list[str]:
    """:func:`paper_violations` of ``model``'s compiled path ``c2w`` for the release preset named ``preset``; a
    name that is no release preset has nothing to check (empty)."""
    p = numbers or load_paper_numbers()
    trajectory = p.trajectory_of(preset)
    if trajectory is None:
        return []
    return paper_violations(trajectory, measure_layout(c2w), model, preset_speed(preset), p)

