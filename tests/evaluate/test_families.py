"""The metric families' compute functions on items and perception we control (no video, no backbone).

Each family is given a real :class:`~evaluate.item.EvalItem` built from a trajectory of the library (as
``load_item`` builds it) and a fake perception whose features, depths, poses and tracks are chosen so that the
rule under test is the only thing that decides the number: revisits that differ from one another, a reference
window whose first and last frames differ, return frames whose estimated pose is not frame 0's, invalid faces,
targets lost on some departure frames only, negative cosines. Expected values are computed here from the paper's
equations, not with the families' own helpers.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evaluate.families import Computation, all_families, departure, diagnostic, entity, entry, environment, missing, quality
from evaluate.families import camera as camera_family
from evaluate.families import dynamic as dynamic_family
from evaluate.item import EvalItem, arrived_frames
from evaluate.perception.base import BackboneUnavailable, PoseEstimate
from evaluate.protocol import revisit_windows, sample_every, window_frames
from evaluate.results import Status
from evaluate.stage import EvalConfig
from trajectories import TrajectorySpec, build_path
from trajectories.conventions import intrinsics_from_fov, rot_y, se3

H, W = 24, 40
K = intrinsics_from_fov(60.0, W, H)
ECFG = EvalConfig()


def make_item(name: str = "lrlr", frames: int = 97, family: str = "environment", cycles=("left", "left"),
              kind: str = "rotation", meta: dict | None = None) -> EvalItem:
    """An item as ``evaluate.item.load_item`` builds it, from a library trajectory, with grey frames."""
    spec = TrajectorySpec(name=name, kind=kind, cycles=cycles)
    path = build_path(spec, frames, 16.0, K, H, W)
    c2w = path.c2w
    windows = revisit_windows(path.phases)
    rev_idx = [window_frames(w, ECFG.memory_stride) for w in windows]
    idx = set(sample_every(ECFG.memory_stride, 0, frames)) | {0, frames - 1}
    for w in windows + [path.phases["V"]]:
        idx |= set(window_frames(w, ECFG.memory_stride))
    return EvalItem(
        dir=Path("."), meta=meta or {}, item={}, case=SimpleNamespace(family=family), video=Path("video.mp4"),
        video_sha="0", buffer=np.full((frames, H, W, 3), 128, np.uint8), intrinsics=K, c2w=c2w,
        phases=dict(path.phases), windows=windows, ref_idx=window_frames(path.phases["V"], ECFG.memory_stride),
        rev_idx=rev_idx, rev_idx_arrived=[arrived_frames(c2w, w, 5.0, 0.05) for w in rev_idx],
        sample_idx=sorted(idx), translates=kind == "square", trajectory_kind=kind, fps=16.0)


class FakePerception:
    """What :class:`evaluate.perceive.ItemPerception` offers the families, from tables the test fills in.

    feats: frame -> feature vector (default: one-hot of the frame, so distinct frames are orthogonal).
    depths: frame -> (H, W) depth. poses: name -> (T, 4, 4) estimated c2w (missing name -> unavailable).
    returns: the return frames ``return_frames`` reports. tracks: target -> {frame: (mask, valid)}.
    faces: frame -> (embedding, valid).
    """

    def __init__(self, ctx, feats=None, depths=None, poses=None, returns=None, tracks=None, faces=None,
                 valid=None, scores=None):
        self.ctx, self.feats, self.depths = ctx, feats or {}, depths or {}
        self.pose_tables, self.returns, self.tracks = poses or {}, returns, tracks or {}
        self.faces, self.valid, self.scores = faces or {}, valid, scores
        self.calls: list[tuple] = []

    def label(self, name, role):
        return f"{name}-label"

    def kind(self, name):
        return "diagnostic"

    def _feat(self, f):
        if f in self.feats:
            return np.asarray(self.feats[f], float)
        v = np.zeros(self.ctx.num_frames)
        v[f] = 1.0
        return v

    def encode(self, name, frames, masks=None, role="encoder"):
        self.calls.append(("encode", name, list(frames), role, masks))
        if role == "face":
            emb = np.stack([np.asarray(self.faces[f][0], float) for f in frames])
            return emb, np.array([bool(self.faces[f][1]) for f in frames])
        return np.stack([self._feat(f) for f in frames])

    def depth(self, name, frames):
        self.calls.append(("depth", name, list(frames)))
        return f"{name}-label", np.stack([self.depths[f] for f in frames])

    def poses(self, name):
        if name not in self.pose_tables:
            raise BackboneUnavailable(f"{name} is not installed")
        c2w = self.pose_tables[name]
        valid = self.valid if self.valid is not None else np.ones(len(c2w), bool)
        return f"{name}-label", PoseEstimate(np.asarray(c2w, float), valid, {})

    def return_frames(self, sources):
        return {"source": sources[0], "label": f"{sources[0]}-label", "frames": list(self.returns),
                "qualification": [], "reasons": {}}

    def frames_closest_to(self, sources, ref, windows):
        """Environment Visible's rule on the estimated poses of the first source (no direct angle)."""
        from trajectories.conventions import geodesic_angle

        self.calls.append(("closest_to", ref, [list(w) for w in windows]))
        est = self.pose_tables[sources[0]]
        frames = [int(w[int(np.argmin(geodesic_angle(est[ref][None, :3, :3], est[w][:, :3, :3])))]) for w in windows]
        return {"source": sources[0], "label": f"{sources[0]}-label", "frames": frames, "angles_deg": [0.0] * len(windows),
                "reasons": {}}

    def track(self, name, target, init_mask, frames):
        self.calls.append(("track", name, target, list(frames)))
        t = self.tracks[target]
        return f"{name}-label", {f: t[f] for f in frames}

    def score(self, name, role, frames):
        self.calls.append(("score", name, role, list(frames)))
        return np.asarray([self.scores[f] for f in frames], float)


def _unit(deg: float) -> list[float]:
    """A 2-D feature whose cosine with [1, 0] is cos(deg)."""
    return [np.cos(np.radians(deg)), np.sin(np.radians(deg))]


# -- environment ------------------------------------------------------------------------------------------------------

def test_environment_visible_is_the_mean_over_revisits_of_the_clipped_cosine():
    """Eq. 1: the K revisits' clipped cosines are averaged (not their max), each against frame 0's features; a
    negative cosine clips to 0 and still counts in K."""
    ctx = make_item("lrlrlr", 145, cycles=("left",) * 3)
    returns = [w[-1] for w in ctx.rev_idx]
    feats = {0: [1.0, 0.0], returns[0]: _unit(0), returns[1]: _unit(60), returns[2]: _unit(120)}
    perc = FakePerception(ctx, feats=feats, returns=returns)
    (e,) = environment.visible(ctx, perc, ECFG, {"encoder": "enc"}).values()
    per = [1.0, 0.5, 0.0]  # cos 0, 60, 120 deg clipped to [0, 1]
    assert e.details["per_revisit"] == pytest.approx(per)
    assert e.value == pytest.approx(sum(per) / 3)
    assert perc.calls[0][2] == [0] + returns  # frame 0 is the reference, then the return frames in order
    assert e.details["reference_frames"] == [0] and e.details["return_frames"] == returns


def test_environment_depth_is_the_mean_spearman_over_revisits():
    from scipy.stats import spearmanr

    ctx = make_item()
    returns = [w[-1] for w in ctx.rev_idx]
    rng = np.random.default_rng(0)
    d0 = rng.uniform(1, 5, (H, W))
    # neither revisit is a monotone transform of frame 0's depth, and they differ from each other
    depths = {0: d0, returns[0]: d0 + rng.normal(0, 0.5, d0.shape).clip(-0.9, None),
              returns[1]: d0 + rng.normal(0, 1.5, d0.shape).clip(-0.9, None)}
    perc = FakePerception(ctx, depths=depths, returns=returns)
    (e,) = environment.depth_rank(ctx, perc, ECFG, {"depth": "dep"}).values()
    per = [spearmanr(d0.ravel(), depths[r].ravel()).statistic for r in returns]
    assert per[1] < per[0] - 0.1 < 0.9  # the two revisits differ, so a max or a single revisit would not give the mean
    assert e.details["per_revisit"] == pytest.approx(per)
    assert e.value == pytest.approx(np.mean(per))
    assert e.details["depth_source"] == "dep-label"


def test_environment_reconstruction_places_each_return_view_with_its_own_estimated_pose():
    """Eq. 6 back-projects the return frame's depth with the return frame's (estimated) pose. Here the return
    frames are 20 and 12 deg away from frame 0: placed with frame 0's pose, their surfaces would land in frame 0's
    own bins and score as if the view had come back (0.92 / 0.95 instead of 0.47 / 0.64)."""
    from evaluate.memory import spherical_grid, spherical_reconstruction_score
    from harness.scene import Room

    ctx = make_item()
    returns = [w[0] for w in ctx.rev_idx]  # the first frame of each return window: not yet back at the start
    est = ctx.c2w.copy()
    for r, deg in zip(returns, (20.0, -12.0)):
        est[r] = se3(rot_y(np.radians(deg)))
    est[1], est[-1] = se3(rot_y(np.radians(7.0))), se3(rot_y(np.radians(-9.0)))  # estimator noise elsewhere
    room = Room()
    depths = {f: room.depth_map(est[f], K, H, W).astype(np.float64) for f in [0] + returns}
    perc = FakePerception(ctx, depths=depths, poses={"classical": est}, returns=returns)
    ecfg = EvalConfig(return_frame_poses=("classical",))
    (e,) = environment.reconstruction(ctx, perc, ecfg, {"depth": "dep"}).values()
    G0 = spherical_grid(depths[0], K, np.eye(4))
    per = [spherical_reconstruction_score(G0, spherical_grid(depths[r], K, est[r])) for r in returns]
    wrong = [spherical_reconstruction_score(G0, spherical_grid(depths[r], K, np.eye(4))) for r in returns]
    assert e.details["per_revisit"] == pytest.approx(per)
    assert e.value == pytest.approx(np.mean(per))
    assert all(b > a + 0.2 for a, b in zip(per, wrong))  # the fixture separates the two rules


def test_environment_without_a_pose_source_says_which_sources_were_tried():
    ctx = make_item()
    perc = FakePerception(ctx)
    perc.return_frames = lambda sources: {"source": None, "label": None, "frames": [None, None],
                                          "qualification": [], "reasons": {"da3": "no weights"}}
    with pytest.raises(environment.NoPoseSource, match="da3: no weights"):
        environment.visible(ctx, perc, ECFG, {"encoder": "enc"})
    assert environment._is_env(ctx, ECFG) and not environment._is_env(make_item(family="object"), ECFG)


# -- departure ------------------------------------------------------------------------------------------------------

def test_departure_return_visible_uses_the_last_frame_of_the_away_view_as_reference():
    """The reference frame is the end of D1's away hold (docs/evaluation.md), i.e. the last frame of the reference
    window; features of the other frames of that window differ, so the first one would give another score."""
    ctx = make_item("lrlrlr", 193, cycles=("left",) * 3)
    d1_end = ctx.phases["D1"][1] - 1
    ref, _revisits = departure._windows(ctx, ECFG)
    assert ref[-1] == d1_end and ref[0] != d1_end
    est = ctx.c2w.copy()
    perc = FakePerception(ctx, poses={"da3": est})
    picks = []
    for d in ("D2", "D3"):  # each revisiting departure's frame closest to the reference orientation
        w = window_frames(ctx.phases[d], ECFG.memory_stride)
        from trajectories.conventions import geodesic_angle

        picks.append(w[int(np.argmin(geodesic_angle(est[d1_end][None, :3, :3], est[w][:, :3, :3])))])
    perc.feats = {f: [1.0, 0.0] for f in range(ctx.num_frames)}
    perc.feats[ref[0]] = [0.0, 1.0]  # the first frame of the window looks elsewhere
    perc.feats[picks[1]] = _unit(60)
    ecfg = EvalConfig(return_frame_poses=("da3",))
    (e,) = departure.return_visible(ctx, perc, ecfg, {"encoder": "enc"}).values()
    assert e.details["reference_frames"] == [d1_end]
    assert e.details["return_frames"] == picks
    assert e.details["per_revisit"] == pytest.approx([1.0, 0.5])
    assert e.value == pytest.approx(0.75)
    closest = next(c for c in perc.calls if c[0] == "closest_to")
    assert closest[1] == d1_end  # the reference handed to the return-frame rule
    assert closest[2] == [window_frames(ctx.phases[d], ECFG.memory_stride) for d in ("D2", "D3")]


def test_departure_visible_scores_each_revisit_with_eq4_and_averages_them():
    ctx = make_item("lrlrlr", 193, cycles=("left",) * 3)
    ref, revisits = departure._windows(ctx, ECFG)
    assert len(revisits) == 2
    ref_idx = departure.subsample(ref, ECFG.memory_stride)
    rev_idx = [departure.subsample(w, ECFG.memory_stride) for w in revisits]
    feats = {f: [1.0, 0.0, 0.0] for f in ref_idx}
    for f in rev_idx[0]:
        feats[f] = [1.0, 0.0, 0.0]
    for i, f in enumerate(rev_idx[1]):
        feats[f] = [0.0, 1.0, 0.0] if i % 2 else [1.0, 0.0, 0.0]  # half of the second revisit is forgotten
    perc = FakePerception(ctx, feats=feats)
    (e,) = departure.visible(ctx, perc, ECFG, {"encoder": "enc"}).values()
    half = sum(1 for i in range(len(rev_idx[1])) if not i % 2) / len(rev_idx[1])
    assert e.details["per_revisit"] == pytest.approx([1.0, half])
    assert e.value == pytest.approx((1.0 + half) / 2)
    assert e.details["reference_frames"] == ref_idx and e.details["revisit_frames"] == rev_idx
    assert e.details["protocol"] == departure.PROTOCOL
    assert perc.calls[0][2] == ref_idx + [f for w in rev_idx for f in w]  # one batched call


def test_departure_sweep_uses_every_reference_frame_and_its_own_protocol():
    ctx = make_item("lrlr", 193)
    ref, revisits = departure._windows(ctx, ECFG, departure.departure_sweep_windows)
    perc = FakePerception(ctx, feats={f: [1.0, 0.0] for f in range(ctx.num_frames)})
    (e,) = departure.sweep_visible(ctx, perc, ECFG, {"encoder": "enc"}).values()
    assert e.details["reference_frames"] == ref == list(range(*ctx.phases["D1"]))  # not subsampled
    assert e.details["protocol"] == departure.SWEEP_PROTOCOL
    assert e.value == pytest.approx(1.0) and len(e.details["per_revisit"]) == len(revisits) == 3
    assert departure._sweep_applies(ctx, ECFG)


def test_departure_metrics_apply_only_where_a_departure_is_revisited():
    assert departure._applies(make_item("lrlr", 193), ECFG)
    assert not departure._applies(make_item("lrud", 193, cycles=("left", "up")), ECFG)
    square = make_item("square", 193, kind="square")
    assert not departure._applies(square, ECFG) and not departure._sweep_applies(square, ECFG)


def test_departure_subsample_keeps_the_settled_last_frame():
    assert departure.subsample([3, 4, 5, 6, 7, 8], 4) == [3, 7, 8]
    assert departure.subsample([3, 4, 5, 6, 7], 4) == [3, 7]
    assert departure.subsample([3, 4, 5], 1) == [3, 4, 5] and departure.subsample([], 4) == []


def test_departure_windows_are_memoised_per_rule():
    ctx = make_item("lrlr", 193)
    a = departure._windows(ctx, ECFG)
    b = departure._windows(ctx, ECFG, departure.departure_sweep_windows)
    assert a != b and set(ctx.memo) == {"departure:departure_revisit_windows", "departure:departure_sweep_windows"}
    assert departure._windows(ctx, ECFG) is a


def test_departure_return_visible_without_a_pose_source_is_not_computed():
    ctx = make_item("lrlr", 193)
    perc = FakePerception(ctx)
    perc.frames_closest_to = lambda s, r, w: {"source": None, "reasons": {"da3": "missing weights"}}
    with pytest.raises(environment.NoPoseSource, match="da3: missing weights"):
        departure.return_visible(ctx, perc, ECFG, {"encoder": "enc"})


# -- entity ---------------------------------------------------------------------------------------------------------

def _box(y0, y1, x0, x1):
    m = np.zeros((H, W), bool)
    m[y0:y1, x0:x1] = True
    return m


def _entity_item(family="human"):
    """LRLR at 81 frames: V = [0, 8), so V's last frame (7) is off the every-4th-frame grid, and D1 = [8, 23)
    starts on it (both are tracked frames)."""
    ctx = make_item(frames=81, family=family)
    assert ctx.phases["V"] == (0, 8) and ctx.phases["D1"][0] == 8 and all(ctx.rev_idx_arrived)
    ctx.memo["targets"] = [("t", _box(5, 15, 10, 20))]
    return ctx


def test_identity_ignores_reference_frames_without_a_valid_face():
    """A reference frame where no face was found (valid = False, its embedding meaningless) is left out of V, even
    when its embedding would match the revisit better."""
    ctx = _entity_item()
    frames = entity._track_frames(ctx, ECFG)
    mask = _box(5, 15, 10, 20)
    tracks = {"t": {f: (mask, True) for f in frames}}
    good, revisit = np.array([1.0, 0.0]), np.array(_unit(60))
    faces = {f: (good, True) for f in frames}
    faces[ctx.ref_idx[1]] = (revisit, False)  # invalid reference face that happens to equal the revisit's
    for w in ctx.rev_idx_arrived:
        for f in w:
            faces[f] = (revisit, True)
    perc = FakePerception(ctx, tracks=tracks, faces=faces)
    (e,) = entity.identity(ctx, perc, ECFG, {"face": "face", "tracker": "trk"}).values()
    assert e.details["per_target"]["t"] == pytest.approx([0.5, 0.5])  # cos 60 deg against the valid faces only
    assert e.value == pytest.approx(0.5)


def _identity_of_a_tracked_target(ctx, face_valid):
    """Human Identity of one target tracked on every frame, whose face embedding is the same unit vector on every
    frame and valid where ``face_valid(frame)``."""
    frames = entity._track_frames(ctx, ECFG)
    tracks = {"t": {f: (_box(5, 15, 10, 20), True) for f in frames}}
    faces = {f: (np.array([1.0, 0.0]), face_valid(f)) for f in frames}
    perc = FakePerception(ctx, tracks=tracks, faces=faces)
    (e,) = entity.identity(ctx, perc, ECFG, {"face": "face", "tracker": "trk"}).values()
    return e


def test_identity_scores_zero_for_a_revisit_without_a_valid_face_and_keeps_it_in_k():
    ctx = _entity_item()
    e = _identity_of_a_tracked_target(ctx, lambda f: f not in ctx.rev_idx_arrived[1])  # no face in the 2nd revisit
    assert e.details["per_target"]["t"] == pytest.approx([1.0, 0.0])
    assert e.value == pytest.approx(0.5)


def test_identity_without_any_valid_reference_face_scores_zero_and_a_partial_revisit_uses_its_valid_faces():
    ctx = _entity_item()
    e = _identity_of_a_tracked_target(ctx, lambda f: f not in ctx.ref_idx)  # no face in V
    assert e.details["per_target"]["t"] == [0.0, 0.0] and e.value == 0.0
    frames = entity._track_frames(ctx, ECFG)
    tracks = {"t": {f: (_box(5, 15, 10, 20), True) for f in frames}}
    faces = {f: (np.array([1.0, 0.0]), True) for f in frames}
    w = ctx.rev_idx_arrived[0]
    faces[w[0]] = (np.array([0.0, 1.0]), False)  # one revisit frame without a face: left out, not scored 0
    for f in w[1:]:
        faces[f] = (np.array(_unit(60)), True)
    (e,) = entity.identity(ctx, FakePerception(ctx, tracks=tracks, faces=faces), ECFG,
                           {"face": "face", "tracker": "trk"}).values()
    assert e.details["per_target"]["t"] == pytest.approx([0.5, 1.0])


def test_identity_reports_the_face_detectors_hit_rate_on_the_tracked_frames():
    """Per target, valid faces / tracked frames for V and each revisit (frames the tracker lost are not counted);
    the rate pools every target. Target "a": V has 1 face missing, revisit 1 one frame untracked and one face
    missing, revisit 2 no face at all; target "b": every tracked frame has a face, one V frame untracked. A target
    never tracked in V has no counts; with no counts at all the rate is None."""
    ctx = _entity_item()
    frames = entity._track_frames(ctx, ECFG)
    mask = _box(5, 15, 10, 20)
    r1, r2 = ctx.rev_idx_arrived
    ref = ctx.ref_idx
    ta = {f: (mask, True) for f in frames}
    ta[r1[0]] = (mask, False)  # lost by the tracker: not a frame the face detector is judged on
    tb = {f: (mask, f != ref[0]) for f in frames}
    faces = {f: (np.array([1.0, 0.0]), True) for f in frames}
    fa = dict(faces)
    fa[ref[1]] = (np.array([1.0, 0.0]), False)
    fa[r1[1]] = (np.array([1.0, 0.0]), False)
    for f in r2:
        fa[f] = (np.array([1.0, 0.0]), False)

    mb = _box(6, 16, 10, 20)  # b's mask: the stand-in face detector tells the targets apart by it
    tb = {f: (mb, v) for f, (_, v) in tb.items()}

    class TwoFaces(FakePerception):
        def encode(self, name, frames, masks=None, role="encoder"):
            table = faces if np.array_equal(masks[0], mb) else fa
            return np.stack([table[f][0] for f in frames]), np.array([bool(table[f][1]) for f in frames])

    ctx.memo["targets"] = [("a", mask), ("b", mb)]
    (e,) = entity.identity(ctx, TwoFaces(ctx, tracks={"a": ta, "b": tb}), ECFG,
                           {"face": "face", "tracker": "trk"}).values()
    det = e.details["face_detection"]
    n_ref, n1, n2 = len(ref), len(r1), len(r2)
    assert det["a"] == {"reference": [n_ref - 1, n_ref], "revisits": [[n1 - 2, n1 - 1], [0, n2]]}
    assert det["b"] == {"reference": [n_ref - 1, n_ref - 1], "revisits": [[n1, n1], [n2, n2]]}
    found = (n_ref - 1 + n1 - 2) + (n_ref - 1 + n1 + n2)
    seen = (n_ref + n1 - 1 + n2) + (n_ref - 1 + n1 + n2)
    assert e.details["face_detection_rate"] == pytest.approx(found / seen)
    ctx.memo["targets"] = [("a", mask)]
    lost = FakePerception(ctx, tracks={"a": {f: (mask, f not in ref) for f in frames}}, faces=faces)
    (e,) = entity.identity(ctx, lost, ECFG, {"face": "face", "tracker": "trk"}).values()
    assert e.details["face_detection"] == {} and e.details["face_detection_rate"] is None


def test_appearance_uses_tracked_frames_only_and_eq1_over_revisits():
    ctx = _entity_item("object")
    frames = entity._track_frames(ctx, ECFG)
    mask = _box(5, 15, 10, 20)
    tracks = {"t": {f: (mask, True) for f in frames}}
    lost = ctx.rev_idx_arrived[0][0]
    tracks["t"][lost] = (mask, False)  # not found on one revisit frame: not an observation
    feats = {f: [1.0, 0.0] for f in frames}
    feats[lost] = [0.0, 1.0]
    for f in ctx.rev_idx_arrived[1]:
        feats[f] = _unit(60)
    perc = FakePerception(ctx, tracks=tracks, feats=feats)
    (e,) = entity.appearance(ctx, perc, ECFG, {"encoder": "enc", "tracker": "trk"}).values()
    assert e.metric == "object.appearance" and e.backbone == "enc-label+trk-label"
    assert e.details["per_target"]["t"] == pytest.approx([1.0, 0.5])
    assert e.value == pytest.approx(0.75)
    enc = next(c for c in perc.calls if c[0] == "encode")
    assert lost not in enc[2]
    assert enc[4].shape == (len(enc[2]), H, W) and (enc[4] == mask).all()  # features inside the tracked masks
    assert e.details["mask_source"] == "trk-label" and e.details["revisit_frames"] == ctx.rev_idx_arrived


def test_appearance_of_a_target_never_seen_in_v_scores_zero():
    ctx = _entity_item()
    frames = entity._track_frames(ctx, ECFG)
    mask = _box(5, 15, 10, 20)
    tracks = {"t": {f: (mask, f not in ctx.ref_idx) for f in frames}}
    perc = FakePerception(ctx, tracks=tracks)
    (e,) = entity.appearance(ctx, perc, ECFG, {"encoder": "enc", "tracker": "trk"}).values()
    assert e.details["per_target"]["t"] == [0.0, 0.0] and e.value == 0.0
    assert not [c for c in perc.calls if c[0] == "encode"]


def test_geometry_is_eq5_over_the_tracked_masks():
    from evaluate.memory import silhouette_iou

    ctx = _entity_item("object")
    frames = entity._track_frames(ctx, ECFG)
    ref_mask, other = _box(5, 15, 10, 20), _box(5, 15, 10, 30)  # a square vs a 1:2 box
    tracks = {"t": {f: (ref_mask, True) for f in frames}}
    for f in ctx.rev_idx_arrived[1]:
        tracks["t"][f] = (other, True)
    perc = FakePerception(ctx, tracks=tracks)
    (e,) = entity.geometry(ctx, perc, ECFG, {"tracker": "trk"}).values()
    iou = silhouette_iou(ref_mask, other)
    assert 0.3 < iou < 0.7
    assert e.details["per_target"]["t"] == pytest.approx([1.0, iou])
    assert e.value == pytest.approx((1.0 + iou) / 2)


def test_tracking_evidence_departed_means_lost_on_some_departure_frame():
    """``departed``: the tracker lost the target on at least one frame of D_k (``[start, end)``); ``returned``:
    found again on at least one frame of R_k that is back at the start."""
    ctx = _entity_item()
    frames = entity._track_frames(ctx, ECFG)
    mask = _box(5, 15, 10, 20)
    t = {f: (mask, True) for f in frames}
    d1 = [f for f in frames if ctx.phases["D1"][0] <= f < ctx.phases["D1"][1]]
    t[d1[len(d1) // 2]] = (mask, False)  # lost once during the first departure, visible on its other frames
    for f in ctx.rev_idx_arrived[1]:
        t[f] = (mask, False)  # never found again on the second return
    t[ctx.rev_idx_arrived[0][0]] = (mask, False)  # the first return: found on some of its frames only
    ev = entity.evidence(ctx, {"t": t})
    assert ev == {"t": [{"departed": True, "returned": True}, {"departed": False, "returned": False}]}


def test_tracking_evidence_uses_half_open_departure_ranges():
    ctx = _entity_item()
    a, b = ctx.phases["D1"]
    assert a in entity._track_frames(ctx, ECFG)
    frames = sorted(set(entity._track_frames(ctx, ECFG)) | {b})  # R1's first frame too, as if it were tracked
    mask = _box(5, 15, 10, 20)
    first = {f: (mask, f != a) for f in frames}  # lost on D1's first frame only
    after = {f: (mask, f != b) for f in frames}  # lost on the frame after D1 (R1's first) only
    assert entity.evidence(ctx, {"t": first})["t"][0]["departed"] is True
    assert entity.evidence(ctx, {"t": after})["t"][0]["departed"] is False
    ctx.phases = {k: v for k, v in ctx.phases.items() if k != "D2"}  # a revisit whose departure is not recorded
    assert entity.evidence(ctx, {"t": first})["t"][1] == {"departed": False, "returned": True}


def test_entity_targets_and_frames():
    """The tracked frames are those the metrics read: from frame 0 (the template), V, each departure on the stride
    grid, each revisit once arrived; not the hold, not a revisit's frames before it arrives."""
    ctx = _entity_item()
    frames = entity._track_frames(ctx, ECFG)
    grid = sample_every(ECFG.memory_stride, 0, ctx.num_frames)
    assert frames[0] == 0 and frames == sorted(set(frames))
    assert set(ctx.ref_idx) <= set(frames) and all(set(w) <= set(frames) for w in ctx.rev_idx_arrived)
    for k in (1, 2):
        a, b = ctx.phases[f"D{k}"]
        assert {f for f in grid if a <= f < b} <= set(frames)
    h = ctx.phases["H"]
    assert not any(h[0] <= f < h[1] for f in frames)
    early = {f for w, arr in zip(ctx.rev_idx, ctx.rev_idx_arrived) for f in w if f not in arr}
    assert early and not early & set(frames)
    longer = make_item(frames=101, family="human")  # both departures end on the grid: R_k's first frame is on it
    frames = entity._track_frames(longer, ECFG)
    for k in (1, 2):
        b = longer.phases[f"D{k}"][1]
        assert b in sample_every(ECFG.memory_stride, 0, longer.num_frames) and b not in longer.rev_idx_arrived[k - 1]
        assert b not in frames  # the departure is half-open
    assert entity._has("human")(ctx, ECFG) and not entity._has("object")(ctx, ECFG)
    ctx.memo["targets"] = []
    assert not entity._has("human")(ctx, ECFG)


@pytest.mark.parametrize("family", ["human", "object"])
def test_tracking_only_the_frames_read_changes_no_entity_value(monkeypatch, family):
    """Every entity metric gives the same entry on the tracked frames as on all the frames tracked before (the
    every-``memory_stride``-th grid, V and whole revisit windows), for random masks and validity: the tracker runs
    each frame on its own, so only which frames exist in the track can matter, and none read is left out."""
    ctx = _entity_item(family)
    old = sorted(set(sample_every(ECFG.memory_stride, 0, ctx.num_frames)) | set(ctx.ref_idx)
                 | {f for w in ctx.rev_idx for f in w})
    assert set(entity._track_frames(ctx, ECFG)) < set(old)
    bb = {"tracker": "trk", "encoder": "enc", "face": "face"}
    metrics = [entity.appearance] + ([entity.identity] if family == "human" else [entity.geometry])

    def entries(perc):
        return [{k: (v.value, v.details) for k, v in m(ctx, perc, ECFG, bb).items()} for m in metrics]

    rng = np.random.default_rng(5)
    for seed in range(6):
        tracks = {"t": {f: (rng.random((H, W)) < 0.3, bool(rng.random() < 0.7) or f == 0)
                        for f in range(ctx.num_frames)}}
        faces = {f: (rng.normal(size=4), bool(rng.random() < 0.8)) for f in range(ctx.num_frames)}
        feats = {f: rng.normal(size=8) for f in range(ctx.num_frames)}
        now = entries(FakePerception(ctx, tracks=tracks, faces=faces, feats=feats))
        with monkeypatch.context() as mp:
            mp.setattr(entity, "_track_frames", lambda c, e: old)
            before = entries(FakePerception(ctx, tracks=tracks, faces=faces, feats=feats))
        assert repr(now) == repr(before), seed


def test_entity_targets_map_person_boxes_and_object_masks_to_the_canvas():
    img = np.zeros((48, 80, 3), np.uint8)
    persons = [SimpleNamespace(id="p", box=(21.0, 8.0, 40.0, 32.0)), SimpleNamespace(id="q", box=(-3.0, -2.0, 4.0, 6.0))]
    case = SimpleNamespace(family="human", load_image=lambda: img, targets=SimpleNamespace(persons=persons))
    ctx = make_item(family="human")
    ctx.case = case
    ((tid, m), (tq, _)) = entity.targets(ctx)
    assert tid == "p" and tq == "q" and m.shape == (H, W)
    ys, xs = np.nonzero(m)
    # half size: the box halves too; canvas column 10 is half covered (image columns 20-21, box from 21): kept
    assert (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) == (4, 16, 10, 20)
    full = SimpleNamespace(family="human", load_image=lambda: np.zeros((H, W, 3), np.uint8),
                           targets=SimpleNamespace(persons=persons[1:]))
    ctx3 = make_item(family="human")
    ctx3.case = full
    ((_, mq),) = entity.targets(ctx3)  # image = canvas: no resize, every pixel of the box counts
    ys, xs = np.nonzero(mq)  # a box reaching past the image corner is clipped to it (rows and columns from 0)
    assert (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) == (0, 6, 0, 4)
    assert entity.targets(ctx) is ctx.memo["targets"]
    om = np.zeros((48, 80), bool)
    om[10:20, 0:8] = True
    objs = [SimpleNamespace(id="o", name="cup")]
    ctx2 = make_item(family="object")
    ctx2.case = SimpleNamespace(family="object", load_image=lambda: img, targets=SimpleNamespace(objects=objs),
                                object_mask=lambda o, h, w: om)
    ((oid, m2),) = entity.targets(ctx2)
    ys, xs = np.nonzero(m2)
    assert oid == "o" and (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) == (5, 10, 0, 4)


# -- diagnostic -----------------------------------------------------------------------------------------------------

def test_cross_departure_is_the_mean_clipped_cosine_of_the_matched_pairs():
    """Features of any length (the cosine normalises them, tiny norms included), cosines spread over [-1, 1]:
    negative ones clip to 0 (forgotten, not "anti-remembered")."""
    ctx = make_item("lrlr", 193)
    pairs = diagnostic._pairs(ctx, ECFG)
    assert len(pairs) >= 4
    rng = np.random.default_rng(2)
    feats = {f: 0.01 * np.array(_unit(0.0)) for f in range(ctx.num_frames)}
    angles = {}
    for i, (_, b) in enumerate(pairs):
        angles[b] = [150.0, 60.0, 30.0, 0.0][i % 4]
        feats[b] = rng.uniform(0.002, 5.0) * np.array(_unit(angles[b]))
    perc = FakePerception(ctx, feats=feats)
    (e,) = diagnostic.cross_departure(ctx, perc, ECFG, {"encoder": "enc"}).values()
    assert e.details["pairs"] == pairs
    cos = [np.cos(np.radians(angles[b])) for _, b in pairs]
    assert min(cos) < -0.8 and any(0.4 < c < 0.9 for c in cos)
    assert e.value == pytest.approx(np.mean(np.clip(cos, 0.0, 1.0)))


def test_revisit_psnr_is_capped_and_ssim_is_one_for_an_exact_return():
    ctx = make_item()
    rng = np.random.default_rng(0)
    ctx.frames[:] = rng.integers(0, 256, ctx.frames.shape[1:], dtype=np.uint8)[None]
    ctx.frames[1] = 255 - ctx.frames[0]  # the reference is frame 0, not the next one
    ctx.frames[-1] = 255 - ctx.frames[0]  # nor the last (the final hold)
    returns = [w[-1] for w in ctx.rev_idx]
    assert ctx.num_frames - 1 not in returns
    noisy = np.clip(ctx.frames[0].astype(int) + rng.normal(0, 20, ctx.frames[0].shape).round(), 0, 255)
    ctx.frames[returns[1]] = noisy.astype(np.uint8)
    perc = FakePerception(ctx, returns=returns)
    (p,) = diagnostic.revisit_psnr(ctx, perc, ECFG, {}).values()
    (s,) = diagnostic.revisit_ssim(ctx, perc, ECFG, {}).values()
    mse = np.mean((ctx.frames[0].astype(float) - noisy) ** 2)
    expected = 10 * np.log10(255.0 ** 2 / mse)
    assert p.details["per_revisit"] == pytest.approx([100.0, expected], rel=1e-6)  # identical -> the 100 dB cap
    assert p.value == pytest.approx((100.0 + expected) / 2, rel=1e-6)
    from skimage.metrics import structural_similarity

    ss = structural_similarity(ctx.frames[0], ctx.frames[returns[1]], channel_axis=2, data_range=255)
    assert s.details["per_revisit"] == pytest.approx([1.0, ss]) and ss < 0.99  # uint8: the range is 0..255
    assert s.value == pytest.approx((1.0 + ss) / 2)
    assert p.details["return_frames"] == returns == s.details["return_frames"]
    assert p.details["pose_source"] == f"{ECFG.return_frame_poses[0]}-label"


# -- camera ---------------------------------------------------------------------------------------------------------

def test_camera_family_on_a_translating_path_reports_both_rpes_with_step_counts():
    from evaluate.camera import rpe_rotation, rpe_translation

    ctx = make_item("square", 97, kind="square")
    rng = np.random.default_rng(1)
    est = ctx.c2w.copy()
    est[1:, :3, 3] += rng.normal(0, 0.01, (len(est) - 1, 3))
    est[1:, :3, :3] = est[1:, :3, :3] @ rot_y(np.radians(rng.normal(0, 0.3, len(est) - 1)))
    valid = np.ones(len(est), bool)
    valid[[5, 9]] = False
    perc = FakePerception(ctx, poses={"da3": est, "vipe": ctx.c2w}, valid=valid)
    out = camera_family.per_estimator(ctx, perc, ECFG, {"pose": "da3"})
    tr, rot = out["camera.rpe_trans[da3-label]"], out["camera.rpe_rot[da3-label]"]
    assert tr.value == pytest.approx(rpe_translation(ctx.c2w, {"x": est})) and tr.details["alignment"] == "sim3"
    assert rot.status is Status.NOT_APPLICABLE  # the square keeps its orientation
    assert tr.details["steps"] == 96 and tr.details["valid_steps"] == 94
    assert tr.details["failed_steps_at_frames"] == [5, 9]
    paper = camera_family.paper_trans(ctx, perc, ECFG, {})["camera.rpe_trans"]
    assert paper.value == pytest.approx(rpe_translation(ctx.c2w, {"a": est, "b": ctx.c2w}))
    assert paper.details["per_estimator"] == {"da3-label": pytest.approx(tr.value), "vipe-label": pytest.approx(0.0)}
    assert camera_family.paper_rot(ctx, perc, ECFG, {})["camera.rpe_rot"].status is Status.NOT_APPLICABLE
    del rpe_rotation


def test_camera_family_on_a_rotation_path_and_the_strided_variant():
    from evaluate.camera import rpe_rotation

    ctx = make_item("lrlr", 97)
    est = ctx.c2w.copy()
    est[10:20, :3, :3] = est[10:20, :3, :3] @ rot_y(np.radians(2.0))
    perc = FakePerception(ctx, poses={"da3": est})
    out = camera_family.per_estimator(ctx, perc, ECFG, {"pose": "da3"})
    assert out["camera.rpe_trans[da3-label]"].status is Status.NOT_APPLICABLE
    rot = out["camera.rpe_rot[da3-label]"]
    assert rot.value == pytest.approx(rpe_rotation(ctx.c2w, est)) and rot.value > 0
    paper = camera_family.paper_rot(ctx, perc, ECFG, {})["camera.rpe_rot"]
    assert paper.value == pytest.approx(rot.value) and paper.details["estimator"] == "da3"
    assert camera_family.paper_trans(ctx, perc, ECFG, {})["camera.rpe_trans"].status is Status.NOT_APPLICABLE
    strided = EvalConfig(rpe_stride=2)
    valid = np.ones(len(est), bool)
    valid[3] = False  # an odd frame: the strided variant still counts it as failed
    perc.valid = valid
    s = camera_family.per_estimator(ctx, perc, strided, {"pose": "da3"})["camera.rpe_rot_strided[da3-label]"]
    assert s.value == pytest.approx(rpe_rotation(ctx.c2w[::2], est[::2]))
    assert s.details["stride"] == 2 and s.details["steps"] == 48 and s.details["failed_steps_at_frames"] == [3]
    assert s.details["valid_steps"] == 47


def test_failed_steps_count_every_frame_after_the_first_and_list_at_most_50():
    ctx = make_item("lrlr", 97)
    valid = np.ones(ctx.num_frames, bool)
    valid[1:62] = False  # 61 failed steps, the first one into frame 1
    perc = FakePerception(ctx, poses={"da3": ctx.c2w}, valid=valid)
    for ecfg, steps in ((ECFG, 96), (EvalConfig(rpe_stride=3), 32)):
        out = camera_family.per_estimator(ctx, perc, ecfg, {"pose": "da3"})
        (e,) = [v for v in out.values() if v.value is not None]
        assert e.details["failed_steps_at_frames"] == list(range(1, 51)) and e.details["steps"] == steps
    assert camera_family._info(ctx, ECFG, SimpleNamespace(valid=valid))["valid_steps"] == 96 - 61
    valid[:] = True
    valid[1] = False
    assert camera_family._info(ctx, EvalConfig(rpe_stride=2), SimpleNamespace(valid=valid))[
        "failed_steps_at_frames"] == [1]  # not on the strided grid, still a failed step


def test_paper_rpe_is_not_computed_when_an_estimator_is_missing():
    ctx = make_item("square", 97, kind="square")
    perc = FakePerception(ctx, poses={"da3": ctx.c2w})
    e = camera_family.paper_trans(ctx, perc, ECFG, {})["camera.rpe_trans"]
    assert e.status is Status.NOT_COMPUTED and "vipe is not installed" in e.reason and "da3+vipe" in e.reason
    rot_ctx = make_item("lrlr", 97)
    e = camera_family.paper_rot(rot_ctx, FakePerception(rot_ctx), ECFG, {})["camera.rpe_rot"]
    assert e.status is Status.NOT_COMPUTED and "Eq. 3 uses da3" in e.reason


# -- quality and dynamic ---------------------------------------------------------------------------------------------

def test_quality_is_the_mean_over_every_strided_frame():
    ctx = make_item()
    scores = {f: (f % 7) / 7 for f in range(ctx.num_frames)}
    perc = FakePerception(ctx, scores=scores)
    compute = quality.FAMILY.metrics[0].compute
    (e,) = compute(ctx, perc, EvalConfig(quality_stride=3), {"imaging": "musiq"}).values()
    frames = list(range(0, ctx.num_frames, 3))
    assert e.value == pytest.approx(np.mean([scores[f] for f in frames]))
    assert e.details["frames_scored"] == len(frames) and e.details["stride"] == 3


def test_judge_input_samples_every_stride_plus_the_last_frame_and_reads_the_event():
    ctx = make_item(family="dynamic", meta={"case": {"event": {"action": "a cat jumps"}}})
    inp = dynamic_family.judge_input(ctx, EvalConfig(judge_stride=8))
    assert inp.frame_indices == list(range(0, 97, 8)) and inp.frame_indices[-1] == 96
    assert len(inp.frames) == len(inp.frame_indices) and inp.fps == 16.0
    assert inp.event == {"action": "a cat jumps"} and inp.phases == ctx.phases
    assert dynamic_family.judge_input(make_item(meta={}), EvalConfig()).event == {}
    assert dynamic_family.judge_input(make_item(meta={"case": None}), EvalConfig()).event == {}


def test_family_helpers():
    from evaluate.catalog import METRICS  # noqa: F401  (the ids below are catalogued metrics)

    from evaluate.registry import Compute

    m = Computation("x.y", Compute(lambda *a: {}))
    assert m.ids == ("x.y",) and Computation("x.y", Compute(m.compute, reports=("a", "b"))).ids == ("a", "b")
    assert m.applies(None, None)
    (k, e), = entry("x.y", "", "diagnostic", 0.5).items()
    assert k == "x.y" and e.value == 0.5
    (k, e), = entry("x.y", "bb", "diagnostic", 0.5, extra=1).items()
    assert k == "x.y[bb]" and e.details == {"extra": 1}
    (k, e), = missing("x.y", "bb", "why").items()
    assert k == "x.y[bb]" and e.status is Status.NOT_COMPUTED and e.reason == "why"
    assert missing("x.y", "", "na", Status.NOT_APPLICABLE)["x.y"].status is Status.NOT_APPLICABLE
    names = [f.name for f in all_families()]
    assert names == ["camera", "environment", "human", "object", "diagnostic", "departure", "quality", "dynamic"]


def _rounds_above_one() -> np.ndarray:
    """A feature whose cosine with itself rounds to slightly above 1 in float64, as the families compute it from
    normalised rows (Eq. 4), against one normalised vector (the return frames) and as a dot product over the product
    of norms (cross-departure)."""
    from evaluate.memory import cosine_matrix, cosine_to

    for k in range(1, 2000):
        v = np.array([0.1 * k, 0.7, 0.3 + 0.01 * k])
        if (cosine_matrix(v[None], v[None])[0, 0] > 1.0 and cosine_to(v[None], v)[0] > 1.0
                and v @ v / (np.linalg.norm(v) * np.linalg.norm(v)) > 1.0):
            return v
    raise AssertionError("no such vector found")


def test_visible_scores_never_exceed_one_even_when_the_cosine_rounds_above_it():
    v = _rounds_above_one()
    ctx = make_item()
    returns = [w[-1] for w in ctx.rev_idx]
    perc = FakePerception(ctx, feats={0: v, returns[0]: v, returns[1]: v}, returns=returns)
    (e,) = environment.visible(ctx, perc, ECFG, {"encoder": "enc"}).values()
    assert e.value == 1.0 and e.details["per_revisit"] == [1.0, 1.0]
    lr = make_item("lrlr", 193)
    perc = FakePerception(lr, feats={f: v for f in range(lr.num_frames)}, poses={"da3": lr.c2w})
    (e,) = departure.return_visible(lr, perc, EvalConfig(return_frame_poses=("da3",)), {"encoder": "e"}).values()
    assert e.details["per_revisit"] == [1.0] and e.value == 1.0
    (e,) = diagnostic.cross_departure(lr, perc, ECFG, {"encoder": "e"}).values()
    assert e.value == 1.0


def _cut_item() -> EvalItem:
    """A rotation path whose second departure *cuts* to the away view: its first frame is already there, and it
    holds the view for that one frame only."""
    yaws = np.concatenate([np.zeros(8), np.linspace(0, -90, 12), np.full(6, -90.0), np.linspace(-90, 0, 12),
                           np.zeros(6), [-90.0], np.linspace(-60, 0, 11), np.zeros(6)])
    ctx = make_item("lrlr", 193)
    c2w = se3(rot_y(np.radians(yaws)))
    phases = {"V": (0, 8), "D1": (8, 26), "R1": (26, 44), "D2": (44, 45), "R2": (45, 62)}
    windows = revisit_windows(phases)
    ctx.c2w, ctx.phases, ctx.windows = c2w, phases, windows
    ctx.buffer = np.full((len(yaws), H, W, 3), 128, np.uint8)
    ctx.rev_idx = [window_frames(w, 4) for w in windows]
    return ctx


def test_departure_return_frames_come_from_the_departure_that_holds_the_revisit():
    ctx = _cut_item()
    ref, revisits = departure._windows(ctx, ECFG)
    assert revisits == [[44]] and ref[-1] == 25
    perc = FakePerception(ctx, feats={f: [1.0, 0.0] for f in range(ctx.num_frames)}, poses={"da3": ctx.c2w})
    (e,) = departure.return_visible(ctx, perc, EvalConfig(return_frame_poses=("da3",)), {"encoder": "e"}).values()
    assert e.details["return_frames"] == [44] and e.value == 1.0
    closest = next(c for c in perc.calls if c[0] == "closest_to")
    assert closest[2] == [[44]]  # the whole departure D2 = [44, 45)


def test_diagnostics_apply_to_items_with_revisits_and_departure_pairs():
    one = make_item("lr", 97, cycles=("left",))
    none = make_item("lr", 97, cycles=("left",))
    none.windows = []
    psnr_m, ssim_m, cross_m = diagnostic.FAMILY.metrics
    assert one.num_revisits == 1 and psnr_m.applies(one, ECFG) and ssim_m.applies(one, ECFG)
    assert not psnr_m.applies(none, ECFG) and not ssim_m.applies(none, ECFG)
    assert not cross_m.applies(one, ECFG) and cross_m.applies(make_item("lrlr", 193), ECFG)


def test_quality_metrics_average_not_pick_the_best_frame():
    ctx = make_item()
    perc = FakePerception(ctx, scores={f: 1.0 if f == 0 else 0.2 for f in range(ctx.num_frames)})
    for m, role in zip(quality.FAMILY.metrics, ("imaging", "aesthetic")):
        (e,) = m.compute(ctx, perc, ECFG, {role: "q"}).values()
        n = len(range(0, ctx.num_frames, ECFG.quality_stride))
        assert e.value == pytest.approx((1.0 + 0.2 * (n - 1)) / n) and e.metric == m.id


def test_the_dynamic_checklist_applies_to_dynamic_items_only():
    (m,) = dynamic_family.FAMILY.metrics
    assert m.applies(make_item(family="dynamic"), ECFG) and not m.applies(make_item(family="environment"), ECFG)


def test_a_target_mask_keeps_a_canvas_pixel_only_above_half_covered():
    """The frame-0 target mask on the canvas keeps a pixel when the resized 0/255 mask is above 127. An area
    resize of a half-covered pixel gives 128 at most columns and 127 at some (fixed-point rounding): 2x11 -> 1x7
    leaves 127 at column 3, which is outside the mask."""
    m = np.zeros((2, 11), bool)
    m[0] = True
    out = entity._canvas_mask(SimpleNamespace(height=1, width=7), m)
    assert out.tolist() == [[True, True, True, False, True, True, True]]


# -- references of the visible scores, memory metrics on camera items, the dynamic family's lazy imports -------------

def test_environment_visible_compares_every_return_frame_with_frame_0_not_with_the_first_return_frame():
    """Eq. 1 with each revisit's clipped cosine against frame 0: frame 0 is [1, 0], the return frames are 30 and 60
    deg from it, so per revisit cos 30 and cos 60 (against the first return frame they would be 1 and cos 30)."""
    ctx = make_item()
    returns = [w[-1] for w in ctx.rev_idx]
    perc = FakePerception(ctx, feats={0: [1.0, 0.0], returns[0]: _unit(30), returns[1]: _unit(60)}, returns=returns)
    (e,) = environment.visible(ctx, perc, ECFG, {"encoder": "enc"}).values()
    per = [np.cos(np.radians(30)), 0.5]
    assert e.details["per_revisit"] == pytest.approx(per)
    assert e.value == pytest.approx(sum(per) / 2)


def test_departure_return_visible_compares_every_return_frame_with_the_away_reference_not_the_first_return():
    """Each revisiting departure's return frame is scored by its clipped cosine against the reference (the end of
    D1's away hold, [1, 0]): return frames 30 and 60 deg from it give cos 30 and cos 60, averaged over K = 2 (Eq. 1);
    against the first return frame they would be 1 and cos 30."""
    ctx = make_item("lrlrlr", 193, cycles=("left",) * 3)
    perc = FakePerception(ctx, feats={f: [1.0, 0.0] for f in range(ctx.num_frames)}, poses={"da3": ctx.c2w.copy()})
    ecfg = EvalConfig(return_frame_poses=("da3",))
    (e,) = departure.return_visible(ctx, perc, ecfg, {"encoder": "enc"}).values()
    picks = e.details["return_frames"]
    assert len(picks) == 2 and e.details["reference_frames"][0] not in picks
    perc.feats[picks[0]], perc.feats[picks[1]] = _unit(30), _unit(60)
    (e,) = departure.return_visible(ctx, perc, ecfg, {"encoder": "enc"}).values()
    per = [np.cos(np.radians(30)), 0.5]
    assert e.details["per_revisit"] == pytest.approx(per)
    assert e.value == pytest.approx(sum(per) / 2)


def test_a_memory_metric_never_applies_to_a_camera_item_and_other_metrics_keep_their_own_rule():
    """A memory family's step (environment) is refused for an item scored for camera following only and keeps its
    own rule elsewhere; a non-memory step (quality) applies to the camera item as its own rule says."""
    from evaluate.families.base import Family
    from evaluate.registry import Compute, MetricSpec

    def spec(metric, family, applies):
        return MetricSpec(id=metric, family=family, higher_is_better=True, needs="encoder", paper=False,
                          description="", compute=(Compute(lambda *a: {}, applies=applies),))

    def yes(item, settings):
        return True

    def no(item, settings):
        return False

    fam = Family("x", (), (spec("environment.a", "environment", yes), spec("environment.b", "environment", no),
                           spec("quality.a", "quality", yes), spec("quality.b", "quality", no)))
    cam, env = make_item(meta={"scored_as": "camera"}), make_item()
    assert cam.family == "camera" and env.family == "environment"
    assert [m.applies(cam, ECFG) for m in fam.metrics] == [False, False, True, False]
    assert [m.applies(env, ECFG) for m in fam.metrics] == [True, False, True, False]


def test_importing_the_dynamic_family_does_not_import_the_perception_stack(monkeypatch):
    """``evaluate.perceive`` (the backbones) is needed by the dynamic family for annotations only: with it made
    unimportable (``None`` in ``sys.modules``), a fresh import of ``evaluate.families.dynamic`` still succeeds and
    defines its family."""
    import importlib
    import sys

    import evaluate.families

    before = sys.modules["evaluate.families.dynamic"]
    monkeypatch.setitem(sys.modules, "evaluate.perceive", None)
    monkeypatch.delitem(sys.modules, "evaluate.families.dynamic")
    monkeypatch.setattr(evaluate.families, "dynamic", before)  # the package attribute the import rebinds
    fresh = importlib.import_module("evaluate.families.dynamic")
    assert fresh is not before and fresh.FAMILY.name == "dynamic" and callable(fresh.judge_input)
