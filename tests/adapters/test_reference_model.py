"""The reference world model: determinism, seeds, exact context honouring, memory on return."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.reference.model import (
    ReferenceRenderer,
    Room,
    Texture,
    frames_of_latent,
    rollout,
    stable_seed,
)
from harness.context import ContextPolicy
from harness.imaging import psnr, resize_cover_crop
from trajectories import TrajectorySpec, build_path
from trajectories.conventions import intrinsics_from_fov, rot_y, se3

H, W = 96, 160  # small canvas keeps the tests fast; the maths does not depend on size


@pytest.fixture(scope="module")
def setup():
    from harness.cases import load_case_set

    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    img = resize_cover_crop(case.load_image(), (H, W))
    K = intrinsics_from_fov(60, W, H)
    return img, K


def _run(img, K, traj="lrlr", n=161, policy=None, seed=1):
    spec = {"lrlr": TrajectorySpec(name="lrlr", cycles=("left", "left")),
            "square": TrajectorySpec(name="square", kind="square", side=1.0)}[traj]
    path = build_path(spec, n, 16, K, H, W)
    frames = []
    out = rollout(img, path.c2w, K, policy or ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2),
                  (seed, "case", traj), frames.append)
    return path, np.stack(frames), out


def test_same_seed_bit_identical_other_seed_differs(setup):
    img, K = setup
    _, a, _ = _run(img, K, seed=1)
    _, b, _ = _run(img, K, seed=1)
    _, c, _ = _run(img, K, seed=2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.array_equal(a[0], img) and np.array_equal(c[0], img)  # frame 0 is the conditioning frame


@pytest.mark.parametrize("traj", ["lrlr", "square"])
@pytest.mark.parametrize("name", ["fullkv", "sliding", "fov"])
def test_return_reproduces_the_conditioning_frame(setup, traj, name):
    img, K = setup
    pol = {"fullkv": ContextPolicy(name="fullkv"), "sliding": ContextPolicy(name="sliding", sink=4, recent=12),
           "fov": ContextPolicy(name="fov", sink=4, recent=4, retrieved_chunks=2)}[name]
    path, frames, _ = _run(img, K, traj=traj, policy=pol)
    for a, b in path.revisit_windows():
        assert psnr(frames[b - 1], img) >= 30.0  # every policy here keeps the conditioning frame (sink)


def test_trace_proves_the_policy_is_honoured(setup):
    img, K = setup
    for pol in (ContextPolicy(name="sliding", sink=4, recent=4), ContextPolicy(name="fov", sink=4, recent=4,
                                                                               retrieved_chunks=1)):
        path, _, out = _run(img, K, policy=pol, n=257)
        trace = out["context_trace"]
        assert len(trace) == -(-out["num_latents"] // 4)
        for entry in trace:
            attended = set(entry["context"]) | set(entry["current"])
            assert set(entry["sources_used"]) <= attended  # only admitted latents were ever re-projected
            assert all(i < entry["current"][0] for i in entry["context"])
        assert any(set(e["sources_used"]) - set(e["current"]) for e in trace)  # history really was used


def test_forgetting_reinvents_content_remembering_keeps_it(setup):
    """LRLR: at the far end of the second departure, FullKV shows what the first departure showed;
    a sliding window without those frames re-invents it (different pixels)."""
    img, K = setup
    n = 257
    path, full, _ = _run(img, K, policy=ContextPolicy(name="fullkv"), n=n)
    _, slide, _ = _run(img, K, policy=ContextPolicy(name="sliding", sink=4, recent=4), n=n)
    d1 = path.phases["D1"][1] - 1
    d2 = path.phases["D2"][1] - 1
    assert np.allclose(path.c2w[d1], path.c2w[d2])
    assert psnr(full[d2], full[d1]) > 30
    assert psnr(slide[d2], slide[d1]) < 20


def test_renderer_rotation_warp_is_exact_homography(setup):
    img, K = setup
    r = ReferenceRenderer(K, H, W, Room())
    rgba = np.dstack([img, np.full((H, W), 255, np.uint8)])
    tex = Texture(stable_seed(0), np.zeros(3))
    same = r.render(np.eye(4), [(0, np.eye(4), rgba)], tex)
    assert np.array_equal(same[..., :3], img)
    turned = r.render(se3(rot_y(np.deg2rad(10))), [(0, np.eye(4), rgba)], tex)
    # turning right by 10 deg moves content left: the centre column now shows content from the right
    fx = K[0, 0]
    shift = int(round(fx * np.tan(np.deg2rad(10))))
    col = W // 2
    assert np.abs(turned[H // 2, col - 2, :3].astype(int) - img[H // 2, col - 2 + shift].astype(int)).max() < 40


def test_latent_frame_grouping():
    assert list(frames_of_latent(0, 4, 493)) == [0]
    assert list(frames_of_latent(1, 4, 493)) == [1, 2, 3, 4]
    assert list(frames_of_latent(123, 4, 493)) == [489, 490, 491, 492]


def test_room_depth_is_positive_and_fronto_parallel(setup):
    _, K = setup
    d = Room().depth_map(np.eye(4), K, H, W)
    assert d.min() > 0 and d[H // 2, W // 2] == pytest.approx(4.0, rel=1e-3)


@pytest.mark.parametrize("traj,size", [("lrlr", (H, W)), ("square", (H, W)), ("square", (90, 150))])
def test_windowed_warps_equal_whole_frame_warps(setup, monkeypatch, traj, size):
    """The speed path (warps cropped to footprint boxes, bands of still-empty pixels, upsampling only the coarse
    block a window reads) must give exactly the frames of whole-frame warps. 90x150 is not a multiple of
    MAP_STEP: the whole coarse grid is upsampled there."""
    from harness.cases import load_case_set

    h, w = size
    case = {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]
    img = resize_cover_crop(case.load_image(), (h, w))
    K = intrinsics_from_fov(60, w, h)
    spec = {"lrlr": TrajectorySpec(name="lrlr", cycles=("left", "left")),
            "square": TrajectorySpec(name="square", kind="square", side=1.0)}[traj]
    path = build_path(spec, 65, 16, K, h, w)
    pol = ContextPolicy(name="fullkv")

    def frames():
        out: list[np.ndarray] = []
        trace = rollout(img, path.c2w, K, pol, (1, "case", traj), out.append)["context_trace"]
        return np.stack(out), trace

    fast, fast_trace = frames()
    monkeypatch.setattr(ReferenceRenderer, "BAND_ROWS", 10**6)
    monkeypatch.setattr(ReferenceRenderer, "_footprint_rotation", lambda self, M: None)
    monkeypatch.setattr(ReferenceRenderer, "_footprint_maps", lambda self, maps, block: (0, 0, self.w, self.h))
    whole, whole_trace = frames()
    assert sum(e["warps"] for e in fast_trace) > 0
    assert np.array_equal(fast, whole)
    assert fast_trace == whole_trace


def test_empty_pixel_box_of_a_one_pixel_window():
    """A 1x1 window of the fill mask (OpenCV reads it as a scalar in ``cv2.compare``) still gives its box: the
    reference model crashed on LRUD at 96x160 with 257 frames before."""
    import cv2

    from adapters.reference.model import _empty

    filled = np.zeros((6, 8), np.uint8)
    filled[:, :5] = 1
    assert cv2.boundingRect(_empty(filled[2:3, 6:7])) == (0, 0, 1, 1)
    assert cv2.boundingRect(_empty(filled[2:3, 1:2])) == (0, 0, 0, 0)
    assert cv2.boundingRect(_empty(filled)) == (5, 0, 3, 6)
