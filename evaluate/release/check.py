"""``python -m harness release check run=<name>``: measure each video's camera layout and hold it against its preset.

The release names its trajectories (``lrlr_sym_0p75dpf``, ...) but publishes no poses, so the harness's reading of
the names (docs/trajectories.md, "Release presets") is an inference. This check settles it from the videos, without
the preset's phase windows: each video's layout is measured from its frames alone (:mod:`evaluate.release.measure`:
the initial hold, every sweep's frames, amplitude, speed and profile, the holds between them, each return's error,
the final hold and the field of view; a translation's legs, turn points and return to the start) and compared with
the preset's own layout read the same way from the preset's exact path at the video's frame count
(:func:`evaluate.release.segment.path_layout`), so the comparison follows whatever ``conf/trajectory/*.yaml`` says.

Per preset and model it reports the measured layout with its spread over the cases, a verdict, and, where they
differ, the preset YAML the videos imply (:func:`implied_yaml`): whoever holds the release settles every inference
with one command. An imported release's videos were measured at import (``meta.json`` ``release.measurement``);
the check reuses those measurements and measures every other video (a run the harness made).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .layout import shown
from .measure import ANALYSIS_WIDTH, MEASURE_VERSION, Measurement, hfov_of, measure_video
from .segment import Layout, path_layout

SPEED_TOLERANCE = 0.05  # relative
AMPLITUDE_TOLERANCE_DEG = 3.0
HOLD_TOLERANCE = 3  # frames
LEG_TOLERANCE = 0.05  # relative, translation legs' frames
RETURN_NOTE_DEG = 3.0  # a return further than this from the start view is noted (a model's following, not a layout)


@dataclass
class VideoCheck:
    """One video's measured layout against its preset's.

    Attributes:
        key: the item key. model, trajectory: the item's. frames: the video's frame count.
        measured, expected: the layouts (:class:`evaluate.release.segment.Layout` dicts).
        hfov_deg / hfov_source: the field of view the measurement used (``estimated`` from the video or ``given``).
        problems: where the layout differs from the preset's (empty: it follows it). notes: how well the video
            follows its own layout (return errors, steps the estimator could not fit), not a layout difference.
    """

    key: str
    model: str
    trajectory: str
    frames: int
    measured: dict[str, Any]
    expected: dict[str, Any]
    hfov_deg: float
    hfov_source: str
    preset_min_frames: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "model": self.model, "trajectory": self.trajectory, "frames": self.frames,
                "measured": self.measured, "expected": self.expected, "hfov_deg": self.hfov_deg,
                "hfov_source": self.hfov_source, "preset_min_frames": self.preset_min_frames,
                "problems": list(self.problems), "notes": list(self.notes), "matches": self.matches}


def preset_spec(name: str) -> Any:
    """The :class:`trajectories.TrajectorySpec` of preset ``name`` (``conf/trajectory/<name>.yaml``)."""
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec

    return TrajectorySpec.from_dict(group_yaml("trajectory", name))


def preset_path(spec: Any, frames: int, fps: float, K: np.ndarray, height: int, width: int) -> Any:
    """The preset's path at ``frames`` frames, or, for a video shorter than the preset needs, the preset at its
    fewest frames cut to ``frames`` (phases clipped; ``params.cut_from`` says how many it needed)."""
    from dataclasses import replace

    from trajectories import build_path
    from trajectories.conventions import fov_from_intrinsics

    need = spec.min_frames()
    full = build_path(spec, max(frames, need), fps, K, height, width, check_fov=False)
    hfov, vfov = fov_from_intrinsics(K, width, height)  # what the path was laid out for (not checked: an import)
    full = replace(full, params={**full.params, "hfov_deg": hfov, "vfov_deg": vfov})
    if frames >= need:
        return full
    phases = {k: (a, min(b, frames)) for k, (a, b) in full.phases.items() if a < frames}
    segs = tuple(replace(s, end=min(s.end, frames)) for s in full.segments if s.start < frames)
    return replace(full, c2w=full.c2w[:frames], phases=phases, segments=segs,
                   params={**full.params, "num_frames": frames, "cut_from": need})


def _label(layout: Layout, index: int) -> str:
    """``D2``-style label of move ``index``: its kind and its number among the moves of that kind."""
    m = layout.moves[index]
    return f"{m.kind}{sum(x.kind == m.kind for x in layout.moves[:index + 1])}"


def compare(measured: Layout, expected: Layout, min_frames: int = 0) -> list[str]:
    """Where ``measured`` differs from ``expected`` (one line each; empty: it follows it). Rotations compare each
    departure's amplitude and each move's speed; translations each leg's frames; both the sweep sequence, the
    profile and every hold."""
    out: list[str] = []
    short = bool(min_frames) and measured.frames < min_frames
    if short:  # compared with the whole preset (check_video), whose final hold a short video cannot have
        out.append(f"{measured.frames} frames, the preset needs {min_frames}")
    if measured.sequence() != expected.sequence():
        return out + [f"moves {measured.sequence() or 'none'}, preset {expected.sequence() or 'none'}"]
    if not measured.moves:
        return out
    if measured.profile != expected.profile:
        out.append(f"profile {measured.profile}, preset {expected.profile}")
    for i, (got, want) in enumerate(zip(measured.moves, expected.moves)):
        lab = _label(measured, i)
        if measured.kind == "rotation":
            if got.kind == "D" and abs(got.reach - want.reach) > AMPLITUDE_TOLERANCE_DEG:
                out.append(f"{lab} amplitude {got.reach:.1f} deg, preset {want.reach:g}")
            if abs(got.speed - want.speed) > SPEED_TOLERANCE * want.speed:
                out.append(f"{lab} speed {got.speed:.3f} deg/frame, preset {want.speed:.4g}")
        elif abs(got.frames - want.frames) > max(LEG_TOLERANCE * want.frames, HOLD_TOLERANCE):
            out.append(f"{lab} leg {got.frames:.0f} frames, preset {want.frames:.0f}")
    holds = [("initial hold", measured.initial_hold, expected.initial_hold)]
    holds += [(f"hold after {_label(measured, i)}", a, b)
              for i, (a, b) in enumerate(zip(measured.holds(), expected.holds()))]
    if not short:
        holds.append(("final hold", measured.final_hold, expected.final_hold))
    out += [f"{what} {a} frames, preset {b}" for what, a, b in holds if abs(a - b) > HOLD_TOLERANCE]
    return out


def _notes(m: Measurement) -> list[str]:
    lay = m.layout
    unit = "deg" if lay.kind == "rotation" else "% of the width (parallax)"
    out = [f"R{i} returns {e:.1f} {unit} from the start" for i, e in enumerate(lay.return_errors, 1)
           if np.isfinite(e) and e > (RETURN_NOTE_DEG if lay.kind == "rotation" else 2.0)]
    if m.invalid_steps:
        out.append(f"{m.invalid_steps} frame pair(s) the estimator could not fit (held still)")
    return out + list(m.notes)


def check_video(key: str, meta: dict[str, Any], path: Any, measurement: Measurement) -> VideoCheck:
    """``measurement`` of the item ``key`` against its preset (the item's trajectory, at the video's frame count).
    ``path``: the item's camera path (its fps; the preset is rebuilt, never read from a measured camera.npz)."""
    item = meta.get("item") or {}
    traj = str(item.get("trajectory", path.name))
    spec = preset_spec(traj)
    lay = measurement.layout
    K = np.asarray(path.K, np.float64)
    # the whole preset, also for a video shorter than it needs: a cut preset would hide the moves the video has
    # and the preset lays later (an LR-Hold cut inside its first sweep), so every difference is named
    want = path_layout(preset_path(spec, max(lay.frames, spec.min_frames()), path.fps, K, path.height,
                                   path.width).c2w)
    c = VideoCheck(key, str(item.get("model", "?")), traj, lay.frames, lay.to_dict(), want.to_dict(),
                   measurement.hfov_deg, measurement.hfov_source, spec.min_frames())
    c.problems = compare(lay, want, spec.min_frames())
    c.notes = _notes(measurement)
    if (meta.get("case") or {}).get("family") == "dynamic" and c.problems:
        c.notes.append("a dynamic case: a moving object that fills the view biases the measured turn "
                       "(docs/release.md, \"What the check cannot see\"); look at the video")
    return c


def stored_measurement(meta: dict[str, Any]) -> Measurement | None:
    """The measurement an import recorded for this item's video (``release.measurement``), when it is of the
    current :data:`MEASURE_VERSION` and of the video the item now records."""
    rec = (meta.get("release") or {}).get("measurement")
    if not isinstance(rec, dict) or rec.get("version") != MEASURE_VERSION:
        return None
    if rec.get("video_sha256") != (meta.get("video") or {}).get("sha256"):
        return None
    try:
        return Measurement.from_dict(rec)
    except (KeyError, TypeError, ValueError):
        return None


def _measure_item(d: Path, meta: dict[str, Any], path: Any, width: int) -> Measurement:
    kind = "rotation" if str(preset_spec(str((meta.get("item") or {}).get("trajectory", path.name))).kind) == \
        "rotation" else "translation"
    given = None if kind == "rotation" else hfov_of(np.asarray(path.K), int(path.width))
    return measure_video(d / "video.mp4", kind, given, hfov_of(np.asarray(path.K), int(path.width)), width)


def check_run(run_path: Path, progress: bool = True, width: int = ANALYSIS_WIDTH) -> dict[str, Any]:
    """Measure (or reuse the import's measurement of) every finished item of the run and compare it with its
    preset; returns ``{"videos", "groups", "skipped", "tolerances"}`` and writes ``<run>/release/check.{json,md}``."""
    from tqdm import tqdm

    from harness.io import read_json
    from harness.outputs import RunDir
    from trajectories import load_path

    run = RunDir(run_path)
    checks: list[VideoCheck] = []
    skipped: list[str] = []
    for row in tqdm(run.done_rows(), desc="release check", unit="video", disable=not progress):
        d = run.item_dir(row.item)
        try:
            meta = read_json(d / "meta.json")
            path = load_path(d / "camera.npz")
            m = stored_measurement(meta) or _measure_item(d, meta, path, width)
            checks.append(check_video(row.key, meta, path, m))
        except Exception as exc:  # an undecodable video, a preset no longer known: named, the rest goes on
            skipped.append(f"{shown(row.key)}: {type(exc).__name__}: {shown(str(exc))}")
    result = summarise(checks, skipped)
    write_check(run.path, result)
    return result


def write_check(run_path: Path, result: dict[str, Any]) -> None:
    """``<run>/release/check.json`` and ``check.md``."""
    from harness.io import write_json, write_text

    write_json(Path(run_path) / "release" / "check.json", result)
    write_text(Path(run_path) / "release" / "check.md", "\n".join(table_lines(result)) + "\n")


def summarise(checks: list[VideoCheck], skipped: list[str]) -> dict[str, Any]:
    """The check's record: every video, the groups per (preset, model) and the tolerances."""
    return {"videos": [c.to_dict() for c in checks], "groups": groups(checks), "skipped": skipped,
            "tolerances": {"speed_relative": SPEED_TOLERANCE, "amplitude_deg": AMPLITUDE_TOLERANCE_DEG,
                           "hold_frames": HOLD_TOLERANCE, "leg_relative": LEG_TOLERANCE}}


def _spread(values: list[float]) -> dict[str, float] | None:
    """Median, min and max of the finite ``values`` (None when there is none)."""
    v = [float(x) for x in values if np.isfinite(x)]
    return {"median": float(np.median(v)), "min": min(v), "max": max(v)} if v else None


def _stats(lays: list[Layout]) -> dict[str, Any]:
    """A group's measured layout: each quantity's median and range over its videos."""
    deps = [m for lay in lays for m in lay.departures()]
    moves = [m for lay in lays for m in lay.moves]
    return {"initial_hold": _spread([lay.initial_hold for lay in lays]),
            "final_hold": _spread([lay.final_hold for lay in lays]),
            "amplitude": _spread([m.reach for m in deps]), "speed": _spread([m.speed for m in moves]),
            "move_frames": _spread([m.frames for m in moves]),
            "holds": _spread([h for lay in lays for h in lay.holds()]),
            "return_error": _spread([e for lay in lays for e in lay.return_errors]),
            "sequence": Counter(lay.sequence() for lay in lays).most_common(1)[0][0] if lays else "",
            "profile": Counter(lay.profile for lay in lays).most_common(1)[0][0] if lays else "none",
            "frames": _spread([lay.frames for lay in lays])}


def groups(checks: list[VideoCheck]) -> list[dict[str, Any]]:
    """One record per (preset, model): counts, the measured layout with its spread, the preset's, the problems
    seen (each with its number of videos) and, where any video differs, the preset YAML the videos imply."""
    by: dict[tuple[str, str], list[VideoCheck]] = {}
    for c in checks:
        by.setdefault((c.trajectory, c.model), []).append(c)
    out = []
    for (traj, model), cs in sorted(by.items()):
        lays = [Layout.from_dict(c.measured) for c in cs]
        seen = Counter(" ".join(p.split(" ")[:2]) for c in cs for p in c.problems)
        measured, matching = _stats(lays), sum(c.matches for c in cs)
        out.append({"trajectory": traj, "model": model, "videos": len(cs), "matching": matching,
                    "measured": measured, "preset": _stats([Layout.from_dict(cs[0].expected)]),
                    "hfov": _spread([c.hfov_deg for c in cs]), "problems": dict(sorted(seen.items())),
                    "preset_min_frames": cs[0].preset_min_frames,
                    "implied_yaml": implied_yaml(traj, measured, lays) if matching < len(cs) else None})
    return out


def _median(s: dict[str, float] | None, default: float) -> float:
    return float(s["median"]) if s else default


def implied_yaml(trajectory: str, measured: dict[str, Any], lays: list[Layout]) -> str:
    """``conf/trajectory/<trajectory>.yaml`` with the values the videos measure (medians over them), as text: a
    rotation's cycles, amplitudes, speed, profile and holds in frames; a translation's timing weights (frames over
    the video's length). Keys the measurement cannot tell keep the preset's values."""
    import yaml

    from harness.config_groups import group_yaml

    doc = group_yaml("trajectory", trajectory)
    moves = [m for lay in lays for m in lay.moves]
    if not moves:
        return "# no video moves: nothing to imply\n"
    profile = "cosine" if measured["profile"] == "eased" else "constant"
    holds: list[list[int]] = [[], []]  # after departures, after returns (not the last move: its hold is the final hold)
    for lay in lays:
        for m, h in zip(lay.moves, lay.holds()):
            holds[m.kind == "R"].append(h)
    if str(doc.get("kind", "rotation")) == "rotation":
        deps = [m for m in moves if m.kind == "D"]
        common = next(lay for lay in lays if lay.sequence() == measured["sequence"])
        doc["cycles"] = [m.direction for m in common.departures()]
        for axis, key in (("yaw", "yaw_deg"), ("pitch", "pitch_deg")):
            reach = [m.reach for m in deps if m.axis == axis]
            if reach:
                doc[key] = float(round(float(np.median(reach)) * 2) / 2)
        doc["deg_per_frame"] = float(round(_median(measured["speed"], 0.0) * 200) / 200)
        doc["profile"] = profile
        doc["hold_frames"] = {"initial": int(round(_median(measured["initial_hold"], 0))),
                              "away": int(round(float(np.median(holds[0])))) if holds[0] else 0,
                              "revisit": int(round(float(np.median(holds[1])))) if holds[1] else 0}
    else:
        n = max(_median(measured["frames"], 2.0) - 1.0, 1.0)
        timing = dict(doc.get("timing") or {})
        timing.update({"initial_hold": round(_median(measured["initial_hold"], 0) / n, 4),
                       "move": round(_median(measured["move_frames"], 0) / n, 4),
                       "final_hold": round(_median(measured["final_hold"], 0) / n, 4)})
        doc["timing"] = timing
    doc["description"] = f"{trajectory} as {len(lays)} video(s) of the release measure it (release check)"
    head = (f"# conf/trajectory/{trajectory}.yaml as {len(lays)} video(s) measure it (python -m harness release "
            f"check; medians; speed profile {measured['profile']})\n")
    return head + str(yaml.safe_dump(doc, sort_keys=False))


def _fmt(s: dict[str, float] | None, fmt: str) -> str:
    if not s:
        return "n/a"
    mid = format(s["median"], fmt)
    return mid if abs(s["max"] - s["min"]) < 1e-9 else f"{mid} [{format(s['min'], fmt)}-{format(s['max'], fmt)}]"


def table_lines(result: dict[str, Any]) -> list[str]:
    """The check as Markdown: one row per (preset, model), measured (preset), then the verdict and the implied
    YAML of every group that differs."""
    lines = ["| trajectory | model | videos | follow | moves | initial hold | amplitude deg | speed /frame | "
             "profile | final hold | return error | hfov deg |", "|" + " --- |" * 12]
    for g in result["groups"]:
        m, p = g["measured"], g["preset"]
        lines.append(f"| {g['trajectory']} | {g['model']} | {g['videos']} | {g['matching']} | "
                     f"{shown(m['sequence']) or 'none'} ({p['sequence'] or 'none'}) | "
                     f"{_fmt(m['initial_hold'], 'g')} ({_fmt(p['initial_hold'], 'g')}) | "
                     f"{_fmt(m['amplitude'], '.1f')} ({_fmt(p['amplitude'], '.4g')}) | "
                     f"{_fmt(m['speed'], '.3f')} ({_fmt(p['speed'], '.4g')}) | {m['profile']} ({p['profile']}) | "
                     f"{_fmt(m['final_hold'], 'g')} ({_fmt(p['final_hold'], 'g')}) | "
                     f"{_fmt(m['return_error'], '.1f')} | {_fmt(g['hfov'], '.1f')} |")
    lines += ["", "Measured (preset); a range is [min-max] over the videos; speeds are degrees per frame for "
              "rotations, flow pixels per frame for translations (a monocular video has no scale).", "",
              *verdict_lines(result)]
    for g in result["groups"]:
        if g.get("implied_yaml"):
            lines += ["", f"The preset {g['trajectory']} as the {g['model']} videos imply it:", "", "```yaml",
                      g["implied_yaml"].rstrip("\n"), "```"]
    return lines


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """One line per preset: whether its videos follow the harness's reading of the name, and what differs."""
    out = []
    by: dict[str, list[dict[str, Any]]] = {}
    for v in result["videos"]:
        by.setdefault(v["trajectory"], []).append(v)
    for traj, vs in sorted(by.items()):
        bad = [v for v in vs if not v["matches"]]
        if not bad:
            out.append(f"{traj}: all {len(vs)} video(s) follow the preset (speed within {SPEED_TOLERANCE:.0%}, "
                       f"amplitude within {AMPLITUDE_TOLERANCE_DEG:g} deg, holds within {HOLD_TOLERANCE} frames)")
        else:
            seen = Counter(p for v in bad for p in v["problems"])
            out.append(f"{traj}: {len(bad)} of {len(vs)} video(s) differ from the preset, e.g. {shown(bad[0]['key'])}"
                       f": " + "; ".join(shown(p) for p in bad[0]["problems"][:6])
                       + (f" (most common: {shown(seen.most_common(1)[0][0])})" if len(bad) > 1 else ""))
    out += [f"skipped {s}" for s in result.get("skipped", [])]
    return out or ["no video to check"]
