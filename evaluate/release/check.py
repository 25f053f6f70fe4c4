"""``python -m harness release check run=<name>``: measure each video's camera path and hold it against its preset.

The release names its trajectories (``lrlr_sym_0p75dpf``, ...) but publishes no poses, so the harness's reading of
the names (degrees per frame, 90-degree sweeps, holds; docs/trajectories.md, "Release presets") is an inference.
This check settles it from the videos: for every rotation item of a run (an imported release, or a run the harness
made) it estimates the camera's rotation with the weight-free estimator (sparse optical flow + homography,
:class:`evaluate.perception.weightfree.ClassicalPoseEstimator`; pure rotation, so no scale is involved), then
measures per phase of the prescribed path:

- the angular speed while moving (median per-frame rotation over the frames the preset moves, degrees per frame),
- the amplitude of each departure (the largest angle from the first frame reached in it, degrees),
- the holds (frames still before the first move and after the last one),
- the return error (the angle between the last frame's view and the first frame's, degrees).

A video matches its preset when every phase's speed is within 5 % of the preset's, every amplitude within 3 degrees
and the final hold within :data:`HOLD_TOLERANCE` frames; otherwise it is flagged with what differs. The table
groups videos by preset and model, so whoever has the release settles the inferred parameters with one command.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

SPEED_TOLERANCE = 0.05  # relative
AMPLITUDE_TOLERANCE_DEG = 3.0
HOLD_TOLERANCE = 4  # frames
ANALYSIS_WIDTH = 416  # frames are measured at this width (K scaled): flow on a half-size 832 canvas


@dataclass
class VideoCheck:
    """The measurements of one video against its preset (angles in degrees, speeds in degrees per frame)."""

    key: str
    model: str
    trajectory: str
    frames: int
    preset_speed: float | None
    preset_amplitudes: list[float]
    preset_final_hold: int
    speeds: dict[str, float] = field(default_factory=dict)
    amplitudes: list[float] = field(default_factory=list)
    initial_hold: int = 0
    final_hold: int = 0
    return_error: float = float("nan")
    invalid_steps: int = 0
    hfov_deg: float = float("nan")
    hfov_estimated: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "matches": self.matches}


def _step_angles(c2w: np.ndarray) -> np.ndarray:
    from trajectories.conventions import geodesic_angle

    return np.degrees(geodesic_angle(c2w[:-1, :3, :3], c2w[1:, :3, :3]))


def _from_start(c2w: np.ndarray) -> np.ndarray:
    from trajectories.conventions import geodesic_angle

    return np.degrees(geodesic_angle(np.broadcast_to(c2w[0, :3, :3], c2w[:, :3, :3].shape), c2w[:, :3, :3]))


def estimate_hfov(frames: np.ndarray, K: np.ndarray, step: int = 4, pairs: int = 40) -> Optional[float]:
    """The horizontal field of view (degrees) that makes the video's frame-to-frame homographies rotations.

    For a camera that only rotates, ``H = K R K^-1``: with the right focal length ``K^-1 H K`` is a rotation (its
    singular values are 1), with a wrong one it is not. Homographies between frames ``step`` apart (sparse optical
    flow + RANSAC, up to ``pairs`` of them, where the image moved by more than 2 px) are scored for focal lengths of
    20..150 degrees of horizontal field of view (principal point from ``K``); the best is refined on a finer grid.
    None when too few frame pairs move (a still video)."""
    import cv2

    h, w = frames.shape[1:3]
    cx, cy = float(K[0, 2]) - 0.5, float(K[1, 2]) - 0.5
    Hs = []
    idx = list(range(0, len(frames) - step, max(1, (len(frames) - step) // (pairs * 2) or 1)))
    for i in idx:
        g0 = cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY)
        g1 = cv2.cvtColor(frames[i + step], cv2.COLOR_RGB2GRAY)
        p0 = cv2.goodFeaturesToTrack(g0, 400, 0.01, 7)
        if p0 is None or len(p0) < 20:
            continue
        p1, st, _ = cv2.calcOpticalFlowPyrLK(g0, g1, p0, None, winSize=(15, 15), maxLevel=3)  # type: ignore[call-overload]
        good = st.reshape(-1) == 1
        a, b = p0.reshape(-1, 2)[good].astype(np.float64), p1.reshape(-1, 2)[good].astype(np.float64)
        if len(a) < 20 or np.median(np.linalg.norm(b - a, axis=1)) < 2.0:
            continue
        H, mask = cv2.findHomography(a, b, cv2.RANSAC, 1.5)
        if H is not None and int(mask.sum()) >= 20:
            Hs.append(H)
        if len(Hs) >= pairs:
            break
    if len(Hs) < 3:
        return None

    def cost(hfov_deg: np.ndarray) -> np.ndarray:
        out = np.zeros(len(hfov_deg))
        for j, hf in enumerate(hfov_deg):
            f = (w / 2.0) / np.tan(np.radians(hf) / 2.0)
            Kc = np.array([[f, 0, cx], [0, f, cy], [0, 0, 1.0]])
            Ki = np.linalg.inv(Kc)
            for H in Hs:
                M = Ki @ H @ Kc
                sv = np.linalg.svd(M / np.cbrt(np.linalg.det(M)), compute_uv=False)
                out[j] += float(((sv - 1.0) ** 2).sum())
        return out

    grid = np.arange(20.0, 150.0, 1.0)
    best = float(grid[int(np.argmin(cost(grid)))])
    fine = np.arange(best - 1.0, best + 1.0, 0.05)
    return float(fine[int(np.argmin(cost(fine)))])


def _still_runs(steps: np.ndarray, threshold: float) -> tuple[int, int]:
    """(frames still at the start, frames still at the end): a run of k still steps is k + 1 frames."""
    moving = np.nonzero(steps > threshold)[0]
    if len(moving) == 0:
        return len(steps) + 1, len(steps) + 1
    return int(moving[0]) + 1, int(len(steps) - moving[-1])


def measure(key: str, meta: dict[str, Any], path: Any, frames: np.ndarray, K: np.ndarray,
            estimator: Any = None) -> VideoCheck:
    """Measure ``frames`` (T, H, W, 3) uint8 against the prescribed ``path`` (a :class:`trajectories.CameraPath`
    whose params name the preset) with intrinsics ``K`` (3, 3, pixels of ``frames``)."""
    from evaluate.perception.weightfree import ClassicalPoseEstimator
    from trajectories.phases import PhaseKind, numbered

    est = (estimator or ClassicalPoseEstimator()).estimate(frames, list(range(len(frames))), K, "rotation")
    c2w = est.c2w
    steps, away = _step_angles(c2w), _from_start(c2w)
    prescribed = _step_angles(path.c2w)
    params = path.params or {}
    speed = params.get("deg_per_frame")
    final_prescribed = _still_runs(prescribed, 1e-9)[1]
    amps = [float(params.get("yaw_deg" if c in ("left", "right") else "pitch_deg", 0.0))
            for c in params.get("cycles", [])]
    item = meta.get("item") or {}
    out = VideoCheck(key, str(item.get("model", "?")), str(item.get("trajectory", path.name)), len(frames),
                     float(speed) if speed else None, amps, int(final_prescribed))
    out.invalid_steps = int((~np.asarray(est.valid)).sum())
    threshold = 0.3 * float(speed) if speed else 0.1
    out.initial_hold, out.final_hold = _still_runs(steps, threshold)
    out.return_error = float(away[-1])
    moving = prescribed > 1e-9
    labels = {**{f"D{k}": w for k, w in enumerate(numbered(path.phases, PhaseKind.DEPART), 1)},
              **{f"R{k}": w for k, w in enumerate(numbered(path.phases, PhaseKind.RETURN), 1)}}
    for label, (a, b) in sorted(labels.items(), key=lambda kv: kv[1][0]):
        sel = np.arange(max(a - 1, 0), min(b - 1, len(steps)))  # step i moves frame i -> i + 1
        sel = sel[moving[sel]]
        if len(sel):
            out.speeds[label] = float(np.median(steps[sel]))
        if label.startswith("D"):
            out.amplitudes.append(float(away[a:b].max()) if b > a else float("nan"))
    _verdict(out)
    return out


def _verdict(c: VideoCheck) -> None:
    if c.preset_speed:
        for label, s in c.speeds.items():
            if abs(s - c.preset_speed) > SPEED_TOLERANCE * c.preset_speed:
                c.problems.append(f"{label} speed {s:.3f} deg/frame, preset {c.preset_speed:g}")
    for k, (got, want) in enumerate(zip(c.amplitudes, c.preset_amplitudes), start=1):
        if not abs(got - want) <= AMPLITUDE_TOLERANCE_DEG:
            c.problems.append(f"D{k} amplitude {got:.1f} deg, preset {want:g}")
    if abs(c.final_hold - c.preset_final_hold) > HOLD_TOLERANCE:
        c.problems.append(f"final hold {c.final_hold} frames, preset {c.preset_final_hold}")


def _frames_small(video: Path, n: int, width: int) -> np.ndarray:
    """The first ``n`` frames of ``video`` at ``width`` pixels wide (aspect kept, even height), RGB uint8."""
    import av

    out = None
    with av.open(str(video)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        w = min(width, s.width)
        h = int(round(s.height * w / s.width / 2)) * 2
        for i, f in enumerate(c.decode(s)):
            if i >= n:
                break
            a = f.to_ndarray(format="rgb24", width=w, height=h)
            if out is None:
                out = np.empty((n, h, w, 3), np.uint8)
            out[i] = a
    if out is None:
        raise ValueError(f"{video}: no frame decoded")
    return out


def check_run(run_path: Path, progress: bool = True, width: int = ANALYSIS_WIDTH,
              fov: str = "estimate") -> dict[str, Any]:
    """Measure every finished rotation item of the run; returns ``{"videos": [...], "groups": [...]}`` and writes
    ``<run>/release/check.{json,md}``. ``fov``: ``estimate`` (each video's field of view from its own
    homographies, :func:`estimate_hfov`; the release publishes none) or ``path`` (the intrinsics in camera.npz)."""
    from tqdm import tqdm

    from harness.io import read_json, write_json, write_text
    from harness.outputs import RunDir
    from trajectories import load_path

    run = RunDir(run_path)
    checks: list[VideoCheck] = []
    skipped: list[str] = []
    for row in tqdm(run.done_rows(), desc="release check", unit="video", disable=not progress):
        d = run.item_dir(row.item)
        path = load_path(d / "camera.npz")
        if (path.params or {}).get("kind", "rotation") != "rotation":
            skipped.append(f"{row.key}: not a rotation (the check measures rotations)")
            continue
        meta = read_json(d / "meta.json")
        try:
            frames = _frames_small(d / "video.mp4", path.num_frames, width)
        except Exception as exc:  # an undecodable video: named, the rest goes on
            skipped.append(f"{row.key}: {type(exc).__name__}: {exc}")
            continue
        scale = frames.shape[2] / path.width
        K = np.asarray(path.K, np.float64).copy()
        K[:2] *= scale
        hfov = estimate_hfov(frames, K) if fov == "estimate" else None
        if hfov is not None:
            K[0, 0] = K[1, 1] = (frames.shape[2] / 2.0) / np.tan(np.radians(hfov) / 2.0)
        c = measure(row.key, meta, path, frames, K)
        c.hfov_deg = hfov if hfov is not None else _hfov_of(K, frames.shape[2])
        c.hfov_estimated = hfov is not None
        checks.append(c)
    groups = _groups(checks)
    result = {"videos": [c.to_dict() for c in checks], "groups": groups, "skipped": skipped,
              "tolerances": {"speed_relative": SPEED_TOLERANCE, "amplitude_deg": AMPLITUDE_TOLERANCE_DEG,
                             "final_hold_frames": HOLD_TOLERANCE}}
    write_json(run.path / "release" / "check.json", result)
    write_text(run.path / "release" / "check.md", "\n".join(table_lines(result)) + "\n")
    return result


def _hfov_of(K: np.ndarray, width: int) -> float:
    return float(np.degrees(2 * np.arctan((width / 2.0) / float(K[0, 0]))))


def _groups(checks: list[VideoCheck]) -> list[dict[str, Any]]:
    by: dict[tuple[str, str], list[VideoCheck]] = {}
    for c in checks:
        by.setdefault((c.trajectory, c.model), []).append(c)
    out = []
    for (traj, model), cs in sorted(by.items()):
        speeds = [s for c in cs for s in c.speeds.values()]
        amps = [a for c in cs for a in c.amplitudes]
        out.append({"trajectory": traj, "model": model, "videos": len(cs),
                    "matching": sum(c.matches for c in cs),
                    "preset_speed": cs[0].preset_speed, "speed_median": float(np.median(speeds)) if speeds else None,
                    "preset_amplitude": cs[0].preset_amplitudes[0] if cs[0].preset_amplitudes else None,
                    "amplitude_median": float(np.median(amps)) if amps else None,
                    "initial_hold_median": float(np.median([c.initial_hold for c in cs])),
                    "final_hold_median": float(np.median([c.final_hold for c in cs])),
                    "preset_final_hold": cs[0].preset_final_hold,
                    "return_error_median": float(np.median([c.return_error for c in cs])),
                    "hfov_median": float(np.median([c.hfov_deg for c in cs])),
                    "flags": sorted({p.split(" ")[0] + " " + p.split(" ")[1] for c in cs for p in c.problems})})
    return out


def table_lines(result: dict[str, Any]) -> list[str]:
    """The check as Markdown: one row per (preset, model), then the verdict and the flagged videos."""
    def f(v: Any, fmt: str) -> str:
        return "n/a" if v is None else format(v, fmt)

    lines = ["| trajectory | model | videos | match | speed (preset) deg/frame | amplitude (preset) deg | "
             "initial hold | final hold (preset) | return error deg | hfov deg |", "|" + " --- |" * 10]
    for g in result["groups"]:
        lines.append(f"| {g['trajectory']} | {g['model']} | {g['videos']} | {g['matching']} | "
                     f"{f(g['speed_median'], '.3f')} ({f(g['preset_speed'], 'g')}) | "
                     f"{f(g['amplitude_median'], '.1f')} ({f(g['preset_amplitude'], 'g')}) | "
                     f"{g['initial_hold_median']:g} | {g['final_hold_median']:g} ({g['preset_final_hold']}) | "
                     f"{g['return_error_median']:.2f} | {g['hfov_median']:.1f} |")
    lines += ["", *verdict_lines(result)]
    return lines


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """One line per preset: whether its videos follow the harness's reading of the name."""
    out = []
    by: dict[str, list[dict[str, Any]]] = {}
    for v in result["videos"]:
        by.setdefault(v["trajectory"], []).append(v)
    for traj, vs in sorted(by.items()):
        bad = [v for v in vs if not v["matches"]]
        if not bad:
            out.append(f"{traj}: all {len(vs)} video(s) follow the preset (speed within "
                       f"{SPEED_TOLERANCE:.0%}, amplitude within {AMPLITUDE_TOLERANCE_DEG:g} deg, final hold within "
                       f"{HOLD_TOLERANCE} frames)")
        else:
            out.append(f"{traj}: {len(bad)} of {len(vs)} video(s) differ from the preset, e.g. {bad[0]['key']}: "
                       + "; ".join(bad[0]["problems"]))
    for s in result.get("skipped", []):
        out.append(f"skipped {s}")
    return out or ["no rotation video to check"]
