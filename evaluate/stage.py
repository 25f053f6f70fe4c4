"""The evaluation stage: every finished item of a run -> ``metrics.json`` beside its video -> run tables.

Reads ``manifest.jsonl`` and each item's ``camera.npz`` (phases, poses, intrinsics) and ``meta.json`` (case); never
guesses from file names. Per item, each metric family is computed with every configured backbone that is
available; the others are recorded as ``not_computed`` with the reason. A family's results are reused on re-runs
while the video hash and that family's settings are unchanged, so a changed setting invalidates exactly the metrics
it affects.

Poses: OpenCV camera-to-world 4x4, world = camera frame of frame 0 (see :mod:`trajectories.conventions`).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from . import camera as cam_metrics
from . import memory as mem
from .perception.base import BackboneUnavailable
from .protocol import matched_departure_pairs, revisit_windows, sample_every, window_frames

SCHEMA_VERSION = 1
#: Backbones of the paper that this release does not run yet: metrics needing them are "not computed".
PAPER_BACKBONES = {
    "dinov2": "DINOv2 features (paper: Human/Object Appearance, Environment Visible)",
    "arcface": "ArcFace face embeddings (paper: Human Identity)",
    "sam2": "SAM2 video segmentation (paper: object masks)",
    "da3": "Depth Anything 3 depth and poses (paper: Environment Depth/Reconstruction, RPE)",
    "vipe": "ViPE poses (paper: translation RPE)",
    "musiq-spaq": "MUSIQ-SPAQ (paper: Imaging quality)",
    "laion": "LAION aesthetic predictor (paper: Aesthetic quality)",
    "qwen-judge": "Qwen3.8-27B checklist judge (paper: Dynamic memory)",
}
FAMILIES = ("camera", "environment", "human", "object", "diagnostic", "quality", "dynamic")


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation settings (``conf/evaluate/<name>.yaml``); every value is recorded in each ``metrics.json``."""

    enabled: bool = True
    encoders: tuple[str, ...] = ("dinov2", "pixel")
    face: tuple[str, ...] = ("arcface",)
    trackers: tuple[str, ...] = ("sam2", "template")
    depth: tuple[str, ...] = ("da3", "oracle")
    pose_estimators: tuple[str, ...] = ("da3", "vipe", "classical", "oracle")
    return_frame_poses: tuple[str, ...] = ("da3", "oracle", "classical")
    quality: tuple[str, ...] = ("musiq-spaq", "laion")
    judge: dict[str, Any] = field(default_factory=dict)  # evaluate.judge: JudgeSettings (docs/judge.md)
    memory_stride: int = 4
    quality_stride: int = 4
    judge_stride: int = 8
    canvas: int = mem.CANVAS
    sphere_bin_deg: float = mem.SPHERE_BIN_DEG
    depth_stride: int = 4
    tracker_threshold: float = 0.6
    revisit_tolerance_deg: float = 5.0
    revisit_tolerance_translation: float = 0.05
    departure_deg: float = 30.0
    return_tolerances_deg: tuple[float, ...] = (30.0, 15.0, 5.0)
    bootstrap: dict[str, int] = field(default_factory=lambda: {"n": 2000, "seed": 0})
    ors: dict[str, Any] = field(default_factory=dict)  # MemoBench ORS detector (evaluate/dynamic_scores.py)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "EvalConfig":
        d = {k: v for k, v in (d or {}).items() if k != "description"}
        allowed = set(EvalConfig.__dataclass_fields__)
        bad = set(d) - allowed
        if bad:
            raise ValueError(f"evaluate.{sorted(bad)[0]}: unknown setting; allowed: {sorted(allowed)}")
        for k, v in list(d.items()):
            if isinstance(v, list):
                d[k] = tuple(v)
        if "ors" in d:
            from .dynamic_scores import ORS_DEFAULTS

            unknown = sorted(set(d["ors"] or {}) - set(ORS_DEFAULTS))
            if unknown:
                raise ValueError(f"evaluate.ors.{unknown[0]}: unknown setting; allowed: {sorted(ORS_DEFAULTS)}")
        if "judge" in d:  # validated here, so a bad judge setting is a config error, before anything runs
            from .judge import JudgeSettings

            d["judge"] = JudgeSettings.from_dict(d["judge"]).to_dict()
        return EvalConfig(**d)

    def family_settings(self, family: str) -> dict[str, Any]:
        s = asdict(self)
        keep = {
            "camera": ["pose_estimators", "memory_stride"],
            "environment": ["encoders", "depth", "return_frame_poses", "pose_estimators", "memory_stride",
                            "sphere_bin_deg", "depth_stride"],
            "human": ["encoders", "face", "trackers", "memory_stride", "tracker_threshold", "revisit_tolerance_deg",
                      "revisit_tolerance_translation"],
            "object": ["encoders", "trackers", "memory_stride", "tracker_threshold", "canvas", "revisit_tolerance_deg",
                       "revisit_tolerance_translation", "ors"],
            "diagnostic": ["encoders", "return_frame_poses", "pose_estimators", "memory_stride"],
            "quality": ["quality", "quality_stride"],
            "dynamic": ["judge", "judge_stride"],
        }[family]
        return {k: s[k] for k in keep}


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unavailable(name: str) -> str:
    if name in PAPER_BACKBONES:
        return (f"backbone {name!r} ({PAPER_BACKBONES[name]}) is not available in this installation: the learned "
                "backbones plug into evaluate/perception and are not wired yet; the metric is not replaced by "
                "another backbone")
    return f"unknown backbone {name!r}"


class ItemContext:
    """Everything one item's evaluation needs, loaded once (frames decoded once at the sampled indices)."""

    def __init__(self, item_dir: Path, ecfg: EvalConfig):
        from harness.cases import Case
        from harness.io import read_json
        from trajectories import load_path

        self.dir = item_dir
        self.meta = read_json(item_dir / "meta.json")
        self.path = load_path(item_dir / "camera.npz")
        self.case = Case(**self.meta["case"])
        self.model = self.meta.get("model", {}).get("name", "?")
        self.ecfg = ecfg
        self.video = item_dir / "video.mp4"
        self.video_sha = self.meta.get("video", {}).get("sha256") or _file_sha(self.video)
        T = self.path.num_frames
        self.windows = revisit_windows(self.path.phases)
        V = self.path.phases["V"]
        idx = set(sample_every(ecfg.memory_stride, 0, T)) | {0, T - 1}
        for w in self.windows:
            idx |= set(window_frames(w, ecfg.memory_stride))
        idx |= set(window_frames(V, ecfg.memory_stride))
        self.indices = sorted(idx)
        from harness.video import read_frames

        got, frames = read_frames(self.video, indices=self.indices)
        if got != self.indices:
            raise ValueError(f"{self.video}: decoded {len(got)} of {len(self.indices)} needed frames "
                             f"(is the video shorter than camera.npz's {T} frames?)")
        self.frames = frames
        self.pos = {f: i for i, f in enumerate(self.indices)}
        self.ref_idx = window_frames(V, ecfg.memory_stride)
        self.rev_idx = [window_frames(w, ecfg.memory_stride) for w in self.windows]
        self.rev_idx_arrived = [self._arrived(w) for w in self.rev_idx]
        self.H, self.W = frames.shape[1:3]
        self.K = self.path.K
        self.is_reference = "oracle_depth" in self.meta.get("generation", {})
        self._pose_cache: dict[str, Any] = {}
        self._return_frames: Optional[tuple] = None

    def _arrived(self, frames: list[int]) -> list[int]:
        """The frames of a revisit window whose *prescribed* pose is back at the start (within the revisit
        tolerances): the observations entity metrics score (the window's move-back frames see the target from
        elsewhere). The translation tolerance is relative to the trajectory's extent."""
        from trajectories.conventions import geodesic_angle

        c2w = self.path.c2w
        extent = max(float(np.ptp(c2w[:, :3, 3], axis=0).max()), 1e-9)
        keep = []
        for f in frames:
            rot = float(np.degrees(geodesic_angle(c2w[0, :3, :3], c2w[f, :3, :3])))
            tr = float(np.linalg.norm(c2w[f, :3, 3] - c2w[0, :3, 3])) / extent
            if rot <= self.ecfg.revisit_tolerance_deg and tr <= self.ecfg.revisit_tolerance_translation:
                keep.append(f)
        return keep

    def frames_at(self, idx: list[int]) -> np.ndarray:
        return self.frames[[self.pos[i] for i in idx]]

    # -- backbones ------------------------------------------------------------------------------------------------
    def pose_estimate(self, name: str):
        if name in self._pose_cache:
            return self._pose_cache[name]
        from .perception.weightfree import ClassicalPoseEstimator, OraclePoses

        if name == "classical":
            est = ClassicalPoseEstimator()
        elif name == "oracle":
            if not self.is_reference:
                raise BackboneUnavailable("oracle poses exist only for the built-in reference model")
            est = OraclePoses(self.path.c2w)
        else:
            raise BackboneUnavailable(_unavailable(name))
        mode = "general" if self.path.params.get("kind") == "square" else "rotation"
        pe = est.estimate(self.frames, self.indices, self.K, mode)
        self._pose_cache[name] = (est.name, pe)
        return self._pose_cache[name]

    def encoder(self, name: str):
        from .perception.weightfree import PixelEncoder

        if name == "pixel":
            return PixelEncoder()
        raise BackboneUnavailable(_unavailable(name))

    def tracker(self, name: str):
        from .perception.weightfree import TemplateTracker

        if name == "template":
            return TemplateTracker(self.ecfg.tracker_threshold)
        raise BackboneUnavailable(_unavailable(name))

    def depth(self, name: str):
        from .perception.weightfree import OracleDepth

        if name == "oracle":
            if not self.is_reference:
                raise BackboneUnavailable("oracle depth exists only for the built-in reference model")
            return OracleDepth(self.meta["generation"]["oracle_depth"]["room"], self.path.c2w, self.K, self.H, self.W)
        raise BackboneUnavailable(_unavailable(name))

    def return_frames(self) -> tuple[Optional[str], Optional[str], list[Optional[int]], list[dict]]:
        """Memoised :meth:`_select_return_frames` (the environment and diagnostic families both need it)."""
        if self._return_frames is None:
            self._return_frames = self._select_return_frames()
        return self._return_frames

    def _select_return_frames(self) -> tuple[Optional[str], Optional[str], list[Optional[int]], list[dict]]:
        """Per prescribed revisit: the frame whose estimated orientation (for the square loop: camera centre) is
        closest to frame 0's, with the departure angle and the return error of the estimate (appendix G.1), using the first available estimator
        of ``return_frame_poses``. Returns (config name, estimator label, frames, qualification)."""
        from trajectories.conventions import geodesic_angle

        for name in self.ecfg.return_frame_poses:
            try:
                label, pe = self.pose_estimate(name)
            except BackboneUnavailable:
                continue
            est = {f: pe.c2w[self.pos[f]] for f in self.indices}
            est_full = np.tile(np.eye(4), (self.path.num_frames, 1, 1))
            for f, T in est.items():
                est_full[f] = T
            ref = est[0]
            frames, qual = [], []
            deps = [self.path.phases.get(f"D{k + 1}") for k in range(len(self.windows))]
            for w, d in zip(self.rev_idx, deps):
                dep_frames = [f for f in self.indices if d and d[0] <= f < d[1]]
                dep = max((float(np.degrees(geodesic_angle(ref[:3, :3], est[f][:3, :3]))) for f in dep_frames),
                          default=0.0)
                if self.path.params.get("kind") == "square":
                    # a translation loop returns in position: the closest estimated camera centre
                    j = int(min(w, key=lambda f: float(np.linalg.norm(est[f][:3, 3] - ref[:3, 3]))))
                    err = float(np.degrees(geodesic_angle(ref[:3, :3], est[j][:3, :3])))
                elif name == "classical":
                    # measure the angle to frame 0 directly (a chained estimate drifts by the time it returns)
                    from .perception.weightfree import ClassicalPoseEstimator

                    ang = ClassicalPoseEstimator().angles_to(self.frames_at([0])[0], self.frames_at(w), self.K)
                    j, err = int(w[int(np.argmin(ang))]), float(np.min(ang))
                else:
                    j = mem.select_return_frame(w, est_full, ref)
                    err = float(np.degrees(geodesic_angle(ref[:3, :3], est[j][:3, :3])))
                frames.append(j)
                qual.append({"departure_deg": dep, "return_error_deg": err, "return_frame": j})
            return name, label, frames, qual
        return None, None, [None] * len(self.windows), []


def _file_sha(p: Path) -> str:
    from harness.runner import sha256_file

    return sha256_file(p)


def _entry(metric: str, backbone: str, kind: str, value: float, **extra) -> tuple[str, dict]:
    return f"{metric}[{backbone}]", {"metric": metric, "backbone": backbone, "backbone_kind": kind,
                                     "status": "computed", "value": float(value), **extra}


def _missing(metric: str, backbone: str, reason: str) -> tuple[str, dict]:
    return f"{metric}[{backbone}]", {"metric": metric, "backbone": backbone, "status": "not_computed",
                                     "reason": reason}


def _each(out: dict, getter, names, metrics):
    """Yield ``(name, backbone)`` for every available backbone of ``names``; record the unavailable ones as
    ``not_computed`` (with the reason) for each of ``metrics``."""
    for name in names:
        try:
            backbone = getter(name)
        except BackboneUnavailable as exc:
            for m in metrics:
                k, v = _missing(m, name, str(exc))
                out[k] = v
            continue
        yield name, backbone


# -- families ---------------------------------------------------------------------------------------------------


def family_camera(ctx: ItemContext) -> dict:
    out = {}
    target = ctx.path.c2w[ctx.indices]
    for name, (label, pe) in _each(out, ctx.pose_estimate, ctx.ecfg.pose_estimators,
                                   ("camera.rpe_trans", "camera.rpe_rot")):
        det: dict = {}
        rt = cam_metrics.rpe_translation(target, {label: pe.c2w}, det)
        rr = cam_metrics.rpe_rotation(target, pe.c2w)
        failed = [int(ctx.indices[i]) for i in range(1, len(ctx.indices)) if not pe.valid[i]]
        info = {"frames": ctx.indices, "valid_steps": len(ctx.indices) - 1 - len(failed),
                "steps": len(ctx.indices) - 1, "failed_steps_at_frames": failed,
                "alignment": det.get(label, {}).get("alignment")}
        k, v = _entry("camera.rpe_trans", label, "oracle" if name == "oracle" else "estimator", rt, **info)
        out[k] = v
        if np.isfinite(rr):
            k, v = _entry("camera.rpe_rot", label, "oracle" if name == "oracle" else "estimator", rr, **info)
        else:
            k, v = _missing("camera.rpe_rot", label, "the target does not rotate (Eq. 3 is undefined)")
        out[k] = v
    return out


def family_environment(ctx: ItemContext) -> dict:
    out: dict = {}
    if ctx.case.family != "environment":
        return out
    K = len(ctx.windows)
    est_name, label, ret, qual = ctx.return_frames()
    if label is None:
        for m in ("environment.visible", "environment.depth", "environment.reconstruction"):
            k, v = _missing(m, "-", "no pose estimator available to select return frames")
            out[k] = v
        return out
    common = {"return_frames": ret, "return_pose_estimator": label, "qualification": qual, "reference_frames": [0]}
    for _, enc in _each(out, ctx.encoder, ctx.ecfg.encoders, ("environment.visible",)):
        f = enc.encode(ctx.frames_at([0] + ret))
        per = [float(np.clip(mem.cosine_matrix(f[i + 1 : i + 2], f[:1])[0, 0], 0, 1)) for i in range(K)]
        k, v = _entry("environment.visible", enc.name, enc.kind, float(np.mean(per)), per_revisit=per, **common)
        out[k] = v
    for name, dep in _each(out, ctx.depth, ctx.ecfg.depth, ("environment.depth", "environment.reconstruction")):
        d = dep.depth(ctx.frames_at([0] + ret), [0] + ret)
        sp = [mem.depth_spearman(d[0], d[i + 1], stride=ctx.ecfg.depth_stride) for i in range(K)]
        k, v = _entry("environment.depth", dep.name, "oracle" if name == "oracle" else "estimator", float(np.mean(sp)),
                      per_revisit=sp, **common)
        out[k] = v
        _, pe = ctx.pose_estimate(est_name)
        poses = {f: pe.c2w[ctx.pos[f]] for f in ctx.indices}
        Hgrid = mem.spherical_grid(d[0], ctx.K, poses[0], ctx.ecfg.sphere_bin_deg)
        rec = [mem.spherical_reconstruction_score(Hgrid, mem.spherical_grid(d[i + 1], ctx.K, poses[ret[i]],
                                                                             ctx.ecfg.sphere_bin_deg)) for i in range(K)]
        k, v = _entry("environment.reconstruction", dep.name, "oracle" if name == "oracle" else "estimator",
                      float(np.mean(rec)), per_revisit=rec, **common)
        out[k] = v
    return out


def _canvas_mask(ctx: ItemContext, mask_src: np.ndarray) -> np.ndarray:
    from harness.imaging import resize_cover_crop

    m = resize_cover_crop(mask_src.astype(np.uint8) * 255, (ctx.H, ctx.W))
    return m > 127


def _targets(ctx: ItemContext) -> list[tuple[str, np.ndarray]]:
    """(target id, frame-0 mask at the canvas) for persons (box masks) or objects (their masks)."""
    img = ctx.case.load_image()
    h, w = img.shape[:2]
    out = []
    if ctx.case.family == "human":
        for p in ctx.case.targets.persons:
            m = np.zeros((h, w), bool)
            x0, y0, x1, y1 = (int(round(v)) for v in p.box)
            m[max(0, y0) : y1, max(0, x0) : x1] = True
            out.append((p.id, _canvas_mask(ctx, m)))
    elif ctx.case.family == "object":
        for o in ctx.case.targets.objects:
            out.append((o.id, _canvas_mask(ctx, ctx.case.object_mask(o, h, w))))
    return out


def _entity(ctx: ItemContext, family: str) -> dict:
    from .aggregate import rollout_score

    out: dict = {}
    targets = _targets(ctx)
    if not targets:
        return out
    K = len(ctx.windows)
    T = ctx.path.num_frames
    track_idx = sample_every(ctx.ecfg.memory_stride, 0, T)
    tracked_metrics = [f"{family}.appearance"] + ([f"{family}.geometry"] if family == "object" else [])
    for _, tracker in _each(out, ctx.tracker, ctx.ecfg.trackers, tracked_metrics):
        tracks = {}
        for tid, m0 in targets:
            allf = sorted(set(track_idx) | set(ctx.ref_idx) | {f for w in ctx.rev_idx for f in w})
            masks, valid = tracker.track(ctx.frames_at(allf), m0)
            tracks[tid] = {f: (masks[i], bool(valid[i])) for i, f in enumerate(allf)}
        evidence = {}
        for tid in tracks:
            ev = []
            for k_ in range(K):
                d = ctx.path.phases.get(f"D{k_ + 1}")
                dep = any(not tracks[tid][f][1] for f in tracks[tid] if d and d[0] <= f < d[1])
                ret = any(tracks[tid][f][1] for f in ctx.rev_idx_arrived[k_])
                ev.append({"departed": dep, "returned": ret})
            evidence[tid] = ev
        if family == "object":
            per_t = {}
            for tid in tracks:
                ref = [tracks[tid][f][0] for f in ctx.ref_idx if tracks[tid][f][1]]
                per_t[tid] = [mem.silhouette_revisit_score(ref, [tracks[tid][f][0] for f in w if tracks[tid][f][1]],
                                                           ctx.ecfg.canvas) for w in ctx.rev_idx_arrived]
            k, v = _entry("object.geometry", tracker.name, "tracker", rollout_score(per_t, K), per_target=per_t,
                          tracking_evidence=evidence, revisit_frames=ctx.rev_idx_arrived, reference_frames=ctx.ref_idx)
            out[k] = v
        metric = f"{family}.appearance"
        for _, enc in _each(out, ctx.encoder, ctx.ecfg.encoders, (metric,)):
            per_t = {}
            for tid in tracks:
                rf = [f for f in ctx.ref_idx if tracks[tid][f][1]]
                ref_feat = enc.encode(ctx.frames_at(rf), np.stack([tracks[tid][f][0] for f in rf])) if rf else np.zeros((0, 1))
                scores = []
                for w in ctx.rev_idx_arrived:
                    vf = [f for f in w if tracks[tid][f][1]]
                    if not vf or not rf:
                        scores.append(0.0)
                        continue
                    feat = enc.encode(ctx.frames_at(vf), np.stack([tracks[tid][f][0] for f in vf]))
                    scores.append(mem.revisit_similarity(ref_feat, feat))
                per_t[tid] = scores
            k, v = _entry(metric, f"{enc.name}+{tracker.name}", enc.kind, rollout_score(per_t, K), per_target=per_t,
                          tracking_evidence=evidence, revisit_frames=ctx.rev_idx_arrived, reference_frames=ctx.ref_idx)
            out[k] = v
    if family == "human":
        for f in ctx.ecfg.face:
            k, v = _missing("human.identity", f, _unavailable(f))
            out[k] = v
    return out


def family_human(ctx: ItemContext) -> dict:
    return _entity(ctx, "human") if ctx.case.family == "human" else {}


def family_object(ctx: ItemContext) -> dict:
    if ctx.case.family != "object":
        return {}
    out = _entity(ctx, "object")
    from .dynamic_scores import ors_entries  # issue 12: MemoBench ORS over the revisit-phase frames (OWLv2)

    rev = sorted({f for w in ctx.rev_idx for f in w})
    out.update(ors_entries(ctx.frames_at(rev), rev, ctx.path.phases,
                           {o.id: o.name for o in ctx.case.targets.objects}, ctx.ecfg.ors))
    return out


def family_diagnostic(ctx: ItemContext) -> dict:
    from skimage.metrics import structural_similarity

    from harness.imaging import psnr

    out: dict = {}
    _, label, ret, _ = ctx.return_frames()
    if label is not None and ret:
        f0 = ctx.frames_at([0])[0]
        rf = ctx.frames_at(ret)
        ps = [min(psnr(f0, r), 100.0) for r in rf]
        ss = [float(structural_similarity(f0, r, channel_axis=2, data_range=255)) for r in rf]
        k, v = _entry("diagnostic.revisit_psnr", "pixels", "diagnostic", float(np.mean(ps)), per_revisit=ps,
                      return_frames=ret, return_pose_estimator=label)
        out[k] = v
        k, v = _entry("diagnostic.revisit_ssim", "pixels", "diagnostic", float(np.mean(ss)), per_revisit=ss,
                      return_frames=ret, return_pose_estimator=label)
        out[k] = v
    pairs = matched_departure_pairs(ctx.path.c2w, ctx.path.phases, ctx.ecfg.memory_stride)
    if pairs:
        need = sorted({a for a, _ in pairs} | {b for _, b in pairs})
        missing = [f for f in need if f not in ctx.pos]
        if missing:
            from harness.video import read_frames

            got, extra = read_frames(ctx.video, indices=missing)
            for f, fr in zip(got, extra):
                ctx.pos[f] = len(ctx.frames)
                ctx.frames = np.concatenate([ctx.frames, fr[None]])
        for _, enc in _each(out, ctx.encoder, ctx.ecfg.encoders, ("diagnostic.cross_departure",)):
            fa = enc.encode(ctx.frames_at([a for a, _ in pairs]))
            fb = enc.encode(ctx.frames_at([b for _, b in pairs]))
            sims = np.clip(np.sum(fa * fb, axis=1) / np.maximum(
                np.linalg.norm(fa, axis=1) * np.linalg.norm(fb, axis=1), 1e-12), 0, 1)
            k, v = _entry("diagnostic.cross_departure", enc.name, enc.kind, float(sims.mean()), pairs=pairs)
            out[k] = v
    return out


def family_quality(ctx: ItemContext) -> dict:
    out = {}
    for name in ctx.ecfg.quality:
        metric = "quality.imaging" if name.startswith("musiq") else "quality.aesthetic"
        k, v = _missing(metric, name, _unavailable(name))
        out[k] = v
    return out


def family_dynamic(ctx: ItemContext) -> dict:
    if ctx.case.family != "dynamic":
        return {}
    # --- judge hook (issue 12): evaluate/judge owns the prompt, the server, the cache and the scoring -----------
    from .judge import judge_item

    return judge_item(ctx.dir, ctx.ecfg.judge, ctx.ecfg.judge_stride)


FAMILY_FUNCS = {"camera": family_camera, "environment": family_environment, "human": family_human,
                "object": family_object, "diagnostic": family_diagnostic, "quality": family_quality,
                "dynamic": family_dynamic}


def evaluate_item(item_dir: Path, ecfg: EvalConfig, force: bool = False) -> dict:
    """Compute (or reuse) every metric family of one item and write ``metrics.json`` atomically."""
    from harness.io import read_json, write_json

    item_dir = Path(item_dir)
    out_path = item_dir / "metrics.json"
    prev = read_json(out_path) if out_path.exists() and not force else None
    meta = read_json(item_dir / "meta.json")
    video_sha = meta.get("video", {}).get("sha256") or _file_sha(item_dir / "video.mp4")
    hashes = {f: _hash([video_sha, ecfg.family_settings(f), SCHEMA_VERSION]) for f in FAMILIES}
    if prev:  # a family with a retryable "not computed" (e.g. the judge server failed) is recomputed
        retry = {m.get("family") for m in prev.get("metrics", {}).values() if m.get("retryable")}
        prev["family_hashes"] = {f: h for f, h in prev.get("family_hashes", {}).items() if f not in retry}
    if prev and all(prev.get("family_hashes", {}).get(f) == hashes[f] for f in FAMILIES):
        prev["reused"] = True
        return prev
    ctx = ItemContext(item_dir, ecfg)
    metrics: dict = {}
    timings: dict = {}
    for fam in FAMILIES:
        if prev and prev.get("family_hashes", {}).get(fam) == hashes[fam]:
            metrics.update({k: v for k, v in prev["metrics"].items() if v.get("family") == fam})
            continue
        t0 = time.perf_counter()
        for k, v in FAMILY_FUNCS[fam](ctx).items():
            v["family"] = fam
            v["settings_hash"] = hashes[fam]
            metrics[k] = v
        timings[fam] = time.perf_counter() - t0
    result = {
        "schema_version": SCHEMA_VERSION,
        "item": meta.get("item"),
        "case_family": ctx.case.family,
        "video_sha256": video_sha,
        "num_revisits": len(ctx.windows),
        "phases": {k: list(v) for k, v in ctx.path.phases.items()},
        "settings": asdict(ecfg),
        "family_hashes": hashes,
        "metrics": metrics,
        "timings": timings,
        "timings_generation": meta.get("timings", {}),
    }
    write_json(out_path, result)
    return result


def evaluate_run(run_dir: Path, ecfg: EvalConfig, force: bool = False, progress: bool = False) -> dict:
    """Evaluate every ``done`` item of ``run_dir``'s manifest and write ``run_dir/eval/`` tables + analyses."""
    from .analyses import run_analyses
    from .report import write_tables

    run_dir = Path(run_dir)
    manifest = run_dir / "manifest.jsonl"
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} not found: evaluate a run directory made by the harness "
                                "(or use the videos= mode for videos made elsewhere)")
    rows = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
    done = [r for r in rows if r.get("status") == "done"]
    results = []
    from .judge import prefetch  # judge hook (issue 12): a run's judge requests, evaluate.judge.concurrency at a time

    prefetch([run_dir / r["dir"] for r in done], ecfg.judge, ecfg.judge_stride)
    it = done
    if progress:
        from tqdm import tqdm

        it = tqdm(done, desc="evaluate", unit="video")
    for r in it:
        res = evaluate_item(run_dir / r["dir"], ecfg, force=force)
        results.append(res)
    tables = write_tables(run_dir / "eval", results, ecfg)
    from .dynamic_scores import write_dynamic_table  # issue 12: p_start, S_cond, S_gated, M-score per group

    tables["dynamic"] = write_dynamic_table(run_dir / "eval", results)
    analyses = run_analyses(run_dir / "eval", results, ecfg)
    from .html import decay_plot, write_index

    data = json.loads((run_dir / "eval" / "analyses.json").read_text())
    plot = decay_plot(run_dir / "eval" / "multi_revisit.png", data["multi_revisit"])
    page = write_index(run_dir / "eval", results, tables["summary"], plot)
    return {"evaluated": len(results), "skipped_not_done": len(rows) - len(done), "tables": tables,
            "analyses": analyses, "html": str(page), "results": results}
