"""Synthetic evaluated runs for the report tests: real run layout (manifest.jsonl, meta.json, metrics.json, tiny
H.264 videos, context traces), metric values chosen so that the expected tables are known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.io import SEAL, seal_digest

PHASES = {"lrlr": {"V": [0, 2], "D1": [2, 4], "R1": [4, 6], "D2": [6, 8], "R2": [8, 10], "H": [10, 12]},
          "lrud": {"V": [0, 2], "D1": [2, 4], "R1": [4, 6], "D2": [6, 8], "R2": [8, 10], "H": [10, 12]},
          "lrlrlr": {"V": [0, 2], "D1": [2, 3], "R1": [3, 5], "D2": [5, 6], "R2": [6, 8], "D3": [8, 9],
                     "R3": [9, 11], "H": [11, 12]}}
#: model -> base score; model "evoke" is better than "lingbot_v2" on every memory metric
BASE = {"lingbot_v2": 0.6, "evoke": 0.8}
LATENCY = {"fullkv": 10.0, "fov": 8.0, "sliding": 7.9}
#: departure-revisit scores per policy (``extras``): FullKV and FoV keep the away view, Sliding forgets it
DEPARTURE = {"fullkv": 0.98, "fov": 0.975, "sliding": 0.40}
#: the revisit PSNR a dynamic case records (``extras``): its content moves, so no table may average it in
DYNAMIC_PSNR = 99.0


def frame_colour(i: int) -> tuple[int, int, int]:
    """The solid colour of frame ``i`` of a synthetic video: every frame is told apart by its colour (in a strip,
    too), far enough apart to survive H.264."""
    levels = (20, 120, 220)
    return levels[i % 3], levels[(i // 3) % 3], levels[(i // 9 + i) % 3]


def _video(path: Path, frames: int = 12) -> None:
    from harness.video import VideoWriter

    w = VideoWriter(path, fps=8.0)
    for i in range(frames):
        w.write(np.broadcast_to(np.array(frame_colour(i), np.uint8), (48, 64, 3)).copy())
    w.close()


def per_revisit(model: str, ctx: str, traj: str, case: int, seed: int) -> list[float]:
    K = 3 if traj == "lrlrlr" else 2
    drop = 0.1 if traj == "lrud" else 0.05
    b = BASE[model] + (0.02 if ctx == "fov" else 0.0) + 0.01 * case + 0.005 * seed
    return [round(b - drop * k, 6) for k in range(K)]


def departure_windows(traj: str) -> tuple[int, list[int], list[list[int]]]:
    """(the away view's last frame, the later departures' return frames, the sweep windows) of a trajectory's
    phases: what ``departure.return_visible`` / ``departure.sweep_visible`` record."""
    ph = PHASES[traj]
    deps = sorted((k for k in ph if k.startswith("D") and k != "D1"), key=lambda k: int(k[1:]))
    later = sorted((k for k in ph if k[0] in "RD" and k != "D1"), key=lambda k: ph[k][0])
    return ph["D1"][1] - 1, [ph[d][0] for d in deps], [list(range(*ph[k])) for k in later]


def _extras(metrics: dict, ctx: str, traj: str, case: int, seed: int, dynamic: bool) -> None:
    """Departure metrics with their frames (and a revisit PSNR on the dynamic case), for the verdict, strip and
    window-label tests."""
    if dynamic:
        metrics["diagnostic.revisit_psnr[pixels]"] = {
            "metric": "diagnostic.revisit_psnr", "backbone": "pixels", "backbone_kind": "diagnostic",
            "status": "computed", "value": DYNAMIC_PSNR, "per_revisit": [DYNAMIC_PSNR] * (3 if traj == "lrlrlr" else 2),
            "return_frames": [PHASES[traj][f"R{k + 1}"][0] for k in range(3 if traj == "lrlrlr" else 2)]}
        return
    away, returns, sweep = departure_windows(traj)
    v = DEPARTURE[ctx] + 0.004 * case + 0.002 * seed
    metrics["departure.return_visible[pixel-thumb16]"] = {
        "metric": "departure.return_visible", "backbone": "pixel-thumb16", "backbone_kind": "diagnostic",
        "status": "computed", "value": v, "per_revisit": [v] * len(returns), "reference_frames": [away],
        "return_frames": returns}
    sw = [round(v - 0.01 * k, 6) for k in range(len(sweep))]
    metrics["departure.sweep_visible[pixel-thumb16]"] = {
        "metric": "departure.sweep_visible", "backbone": "pixel-thumb16", "backbone_kind": "diagnostic",
        "status": "computed", "value": float(np.mean(sw)), "per_revisit": sw,
        "reference_frames": list(range(*PHASES[traj]["D1"])), "revisit_frames": sweep}


def make_run(root: Path, name: str = "synth", models=("lingbot_v2", "evoke"), contexts=("fullkv", "fov"),
             trajectories=("lrlr", "lrud", "lrlrlr"), cases=2, seeds=(1, 2), videos: bool = True,
             extras: bool = False) -> Path:
    """Write an evaluated run under ``root/name``; returns its directory. ``extras``: also the departure metrics
    (with the frames they record) and a revisit PSNR on the dynamic case (:func:`_extras`)."""
    run = root / name
    rows = []
    vid_cache: dict[int, bytes] = {}
    for model in models:
        for ctx in contexts:
            for seed in seeds:
                for traj in trajectories:
                    for c in range(cases + 1):  # the last case is a dynamic one
                        case_id = f"env_{c}" if c < cases else "dynamic_0"
                        rel = f"{model}/{ctx}/seed-{seed}/{traj}/{case_id}"
                        d = run / rel
                        d.mkdir(parents=True, exist_ok=True)
                        item = {"model": model, "context": ctx, "seed": seed, "trajectory": traj, "case_id": case_id}
                        lat = LATENCY[ctx] + 0.1 * c + 0.05 * seed
                        (d / "meta.json").write_text(json.dumps({"item": item, "status": "done",
                                                                 "timings": {"generate_s": lat}}))
                        (d / "context_trace.json").write_text("[]")
                        (d / "controls").mkdir(exist_ok=True)
                        (d / "controls" / "command.sh").write_text("true\n")
                        if videos:
                            k = seed
                            if k not in vid_cache:
                                _video(d / "video.mp4")
                                vid_cache[k] = (d / "video.mp4").read_bytes()
                            else:
                                (d / "video.mp4").write_bytes(vid_cache[k])
                        pr = per_revisit(model, ctx, traj, c, seed)
                        K = len(pr)
                        ret = [PHASES[traj][f"R{k + 1}"][0] + 1 for k in range(K)]
                        qual = [{"departure_deg": 90.0, "return_error_deg": 2.0 if k == 0 or c == 0 else 40.0,
                                 "return_frame": f} for k, f in enumerate(ret)]
                        metrics = {}
                        if c < cases:
                            metrics["environment.visible[pixel-thumb16]"] = {
                                "metric": "environment.visible", "backbone": "pixel-thumb16",
                                "backbone_kind": "diagnostic", "status": "computed", "value": float(np.mean(pr)),
                                "per_revisit": pr, "return_frames": ret, "qualification": qual}
                            metrics["environment.depth[oracle]"] = {
                                "metric": "environment.depth", "backbone": "oracle", "backbone_kind": "oracle",
                                "status": "computed", "value": 1.0, "per_revisit": [1.0] * K, "return_frames": ret}
                            metrics["environment.visible[dinov2]"] = {
                                "metric": "environment.visible", "backbone": "dinov2", "status": "not_computed",
                                "reason": "backbone 'dinov2' is not available in this installation"}
                            rpe = round(0.3 - BASE[model] / 4 + 0.01 * c, 6)
                            metrics["camera.rpe_rot[classical-opencv]"] = {
                                "metric": "camera.rpe_rot", "backbone": "classical-opencv",
                                "backbone_kind": "estimator", "status": "computed", "value": rpe}
                        else:
                            started = (seed == 1) or model == "evoke"
                            metrics["dynamic.overall[Qwen/Qwen3.8-27B]"] = {
                                "metric": "dynamic.overall", "backbone": "Qwen/Qwen3.8-27B", "backbone_kind": "judge",
                                "status": "computed", "started": started,
                                "value": (0.75 if model == "evoke" else 0.5) if started else 0.0}
                        if extras and traj != "lrud":
                            _extras(metrics, ctx, traj, c, seed, c >= cases)
                        res = {"schema_version": 1, "item": item,
                               "case_family": "environment" if c < cases else "dynamic",
                               "num_revisits": K, "phases": PHASES[traj], "metrics": metrics,
                               "settings": {"bootstrap": {"n": 200, "seed": 0}, "departure_deg": 30.0,
                                            "return_tolerances_deg": [30.0, 15.0, 5.0]},
                               "timings_generation": {"generate_s": lat}}
                        (d / "metrics.json").write_text(json.dumps({**res, SEAL: seal_digest(res)}))  # sealed
                        rows.append({"dir": rel, "key": rel, "status": "done", **item})
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run
