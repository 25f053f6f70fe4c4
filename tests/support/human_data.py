"""Synthetic evaluated runs for the human-study tests: the real run layout (manifest.jsonl, meta.json with the
camera and the case, metrics.json, tiny H.264 videos), with metric values and judge verdicts chosen per arm."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.io import SEAL, seal_digest, sha256_file

PHASES = {"V": [0, 2], "D1": [2, 4], "R1": [4, 6], "D2": [6, 8], "R2": [8, 10], "H": [10, 12]}
EVENT = {"initial_state": "A ball rests on a table.", "action": "The ball rolls to the left.",
         "expected_next_state": "The ball has left the table when the camera returns.",
         # as long as the demo cases' questions (about 70 characters), so the page's layout is tested at their length
         "questions": [{"aspect": a, "question": f"Question {i + 1}: when the camera returns, has the ball moved away "
                        "from the table?", "answer": "yes" if i % 2 == 0 else "no"}
                       for i, a in enumerate(["return_progress"] * 2 + ["persistence_reset"] * 2 +
                                             ["final_state"] * 2 + ["causal_physical"] * 2)]}
#: arm -> quality: higher quality = higher metric values and more correct judge answers
QUALITY = {"alpha/fullkv": 0.9, "beta/fullkv": 0.6, "gamma/fullkv": 0.3}


def _video(path: Path, seed: int, frames: int = 12) -> None:
    from harness.video import VideoWriter

    rng = np.random.default_rng(seed)
    w = VideoWriter(path, fps=8.0)
    base = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
    for i in range(frames):
        w.write(np.roll(base, 3 * i, axis=1))
    w.close()


def value(arm: str, case: str, traj: str, metric: str) -> float:
    """A deterministic metric value of an arm's video, ordered by the arm's quality."""
    h = (sum(map(ord, case + traj + metric)) % 7) / 100
    return round(QUALITY[arm] + h, 6)


def judge(arm: str, case: str, traj: str) -> dict:
    q = QUALITY[arm]
    started = q > 0.5 or traj == "lrud"
    refs = [x["answer"] for x in EVENT["questions"]]
    n_wrong = int(round((1 - q) * 8))
    answers = [("no" if r == "yes" else "yes") if i < n_wrong else r for i, r in enumerate(refs)]
    items = [int(a == r) for a, r in zip(answers, refs)] if started else [0] * 8
    return {"started": started, "answers": answers, "items": items, "value": float(np.mean(items))}


def make_runs(root: Path, arms=("alpha/fullkv", "beta/fullkv"), seeds: dict | None = None,
              static_cases=("env_0", "env_1", "obj_0"), dynamic_cases=("dyn_0", "dyn_1"),
              trajectories=("lrlr", "lrud"), departure: bool = False) -> list[Path]:
    """One run per arm (``run_<model>``); ``seeds`` maps an arm to its seed (default 1). ``departure``: the
    environment cases also score ``departure.visible`` (its reference: the last frame of D1, per video), so a
    study can hold departure pairs, whose page shows each side's own first view."""
    runs = []
    for arm in arms:
        model, ctx = arm.split("/")
        seed = (seeds or {}).get(arm, 1)
        run = root / f"run_{model}_{ctx}"
        rows = []
        for traj in trajectories:
            for case in (*static_cases, *dynamic_cases):
                family = "dynamic" if case.startswith("dyn") else "object" if case.startswith("obj") else "environment"
                rel = f"{model}/{ctx}/seed-{seed}/{traj}/{case}"
                d = run / rel
                d.mkdir(parents=True, exist_ok=True)
                item = {"model": model, "context": ctx, "seed": seed, "trajectory": traj, "case_id": case}
                targets = {"persons": [], "objects": [{"id": "cup", "name": "red cup", "box": [1, 1, 20, 20],
                                                       "polygon": [[1, 1], [20, 1], [20, 20]]}]}
                meta = {"item": item, "status": "done", "camera": {"fps": 8.0, "num_frames": 12, "phases": PHASES},
                        "case": {"id": case, "family": family, "targets": targets,
                                 "event": EVENT if family == "dynamic" else None}}
                (d / "meta.json").write_text(json.dumps(meta))
                _video(d / "video.mp4", sum(map(ord, rel)))
                metrics = {}
                if family == "environment":
                    metrics["environment.visible[pixel-thumb16]"] = {
                        "metric": "environment.visible", "backbone": "pixel-thumb16", "backbone_kind": "diagnostic",
                        "status": "computed", "value": value(arm, case, traj, "ev"), "return_frames": [5, 9],
                        "reference_frames": [0]}
                    if departure:
                        metrics["departure.visible[pixel-thumb16]"] = {
                            "metric": "departure.visible", "backbone": "pixel-thumb16", "backbone_kind": "diagnostic",
                            "status": "computed", "value": value(arm, case, traj, "dv"),
                            "reference_frames": [PHASES["D1"][1] - 1]}
                    metrics["environment.depth[oracle]"] = {"metric": "environment.depth", "backbone": "oracle",
                                                            "backbone_kind": "oracle", "status": "computed",
                                                            "value": 1.0}
                elif family == "object":
                    metrics["object.geometry[template-ncc]"] = {
                        "metric": "object.geometry", "backbone": "template-ncc", "backbone_kind": "diagnostic",
                        "status": "computed", "value": value(arm, case, traj, "og"),
                        "revisit_frames": [[4, 5], [8, 9]], "reference_frames": [0, 1]}
                if family != "dynamic":
                    metrics["human.identity[arcface]"] = {"metric": "human.identity", "backbone": "arcface",
                                                          "status": "not_computed",
                                                          "reason": "weights not found (synthetic)"}
                else:
                    j = judge(arm, case, traj)
                    metrics["dynamic.overall[Qwen/Qwen3.8-27B]"] = {
                        "metric": "dynamic.overall", "backbone": "Qwen/Qwen3.8-27B", "backbone_kind": "judge",
                        "status": "computed", "value": j["value"], "started": j["started"], "answers": j["answers"],
                        "references": [q["answer"] for q in EVENT["questions"]], "items": j["items"]}
                res = {"schema_version": 1, "item": item, "case_family": family, "num_revisits": 2, "phases": PHASES,
                       "metrics": metrics, "video_sha256": sha256_file(d / "video.mp4")}
                (d / "metrics.json").write_text(json.dumps({**res, SEAL: seal_digest(res)}))  # as evaluation seals it
                rows.append({"dir": rel, "key": rel, "status": "done", **item})
        (run / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(run)
    return runs
