"""Perceive once (docs/evaluation.md, "Performance"): the streaming decode and its frame views, the box-filter
SSIM, the threaded weight-free backbones (the same bytes as one thread), and one read and hash of each video per
evaluation."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from evaluate.item import Decoding, FrameBuffers, FrameView, decode_frames


def _video_bytes(tmp_path: Path, n: int = 12, h: int = 48, w: int = 80, seed: int = 0) -> tuple[bytes, np.ndarray]:
    """An H.264 video of ``n`` random-walk frames, its bytes, and the frames decoded the plain way."""
    from harness.video import VideoWriter, iter_frames

    rng = np.random.default_rng(seed)
    base = rng.integers(0, 255, (h, w, 3), np.uint8)
    path = tmp_path / "v.mp4"
    wr = VideoWriter(path, 16)
    for i in range(n):
        wr.write(np.roll(base, i, axis=1))
    wr.close()
    return path.read_bytes(), np.stack([f for _, f in iter_frames(path)])


def test_decode_frames_equals_the_plain_decode_and_streams(tmp_path):
    data, plain = _video_bytes(tmp_path)
    assert np.array_equal(decode_frames(data, len(plain)), plain)
    seen: list = []

    def started(frames, decoding):
        seen.append((frames, decoding))

    out = decode_frames(data, len(plain), "v.mp4", started)
    frames, decoding = seen[0]
    assert frames is out and np.array_equal(out, plain)
    decoding.wait()  # finished: returns at once
    assert decoding.error is None


@pytest.mark.parametrize("streaming", [False, True])
def test_a_truncated_video_raises_naming_the_file(tmp_path, streaming):
    data, plain = _video_bytes(tmp_path, n=30)
    seen: list = []

    def started(frames, decoding):
        seen.append(decoding)

    cb = started if streaming else None
    with pytest.raises(ValueError, match="clip.mp4"):
        decode_frames(data[: len(data) // 2], len(plain), "clip.mp4", cb)
    with pytest.raises(ValueError, match="clip.mp4: decoded 30 frames, camera.npz has 35"):
        decode_frames(data, len(plain) + 5, "clip.mp4", cb)  # shorter than its path
    if streaming:  # handed out at the first frame: readers of the frames that never came see the same error
        with pytest.raises(ValueError, match="clip.mp4: decoded 30 frames"):
            seen[-1].wait()
        with pytest.raises(ValueError, match="clip.mp4"):
            seen[-1].wait(31)
        seen[-1].wait(30)  # those did come
    with pytest.raises(ValueError, match="clip.mp4"):
        decode_frames(b"not a video", 3, "clip.mp4")


def test_frame_view_reads_as_the_array(tmp_path):
    frames = np.random.default_rng(1).integers(0, 255, (9, 6, 10, 3), np.uint8)
    idx = [4, 0, 8, 8, 2]
    v = FrameView(frames, idx)
    want = frames[idx]
    assert len(v) == 5 and v.shape == want.shape and v.dtype == want.dtype and v.ndim == 4
    assert all(np.array_equal(v[i], want[i]) for i in range(-5, 5))
    assert np.array_equal(np.asarray(v), want) and np.array_equal(np.stack(list(v)), want)
    assert np.array_equal(np.asarray(v[1:4]), want[1:4])
    assert np.asarray(v, dtype=np.float32).dtype == np.float32


def test_frame_view_waits_for_frames_still_decoding():
    frames = np.zeros((4, 2, 2, 3), np.uint8)
    d = Decoding()
    d.advance(1)
    v = FrameView(frames, [0, 3], d)
    assert v[0] is not None  # frame 0 is there: no wait
    got: list = []
    t = threading.Thread(target=lambda: got.append(v[1].copy()))
    t.start()
    t.join(0.2)
    assert t.is_alive()  # frame 3 is not decoded yet
    frames[3] = 7
    d.advance(4)
    t.join(5)
    assert not t.is_alive() and int(got[0].max()) == 7
    d.finish(ValueError("v.mp4: decoded 4 frames"))
    with pytest.raises(ValueError, match="v.mp4"):
        d.wait()


@pytest.mark.parametrize("shape", [(37, 53, 3), (64, 29, 3), (7, 7, 3)])
def test_box_filter_ssim_equals_skimage(shape):
    from skimage.metrics import structural_similarity

    from evaluate.families.diagnostic import ssim

    rng = np.random.default_rng(sum(shape))
    a = rng.integers(0, 256, shape, np.uint8)
    for b in (a, np.clip(a.astype(int) + rng.integers(-30, 30, shape), 0, 255).astype(np.uint8),
              rng.integers(0, 256, shape, np.uint8)):
        want = structural_similarity(a, b, channel_axis=2, data_range=255)
        assert abs(ssim(a, b) - want) < 1e-12, (ssim(a, b), want)


def test_ssim_in_place_is_the_textbook_expression_to_the_last_bit():
    """The buffered SSIM (:func:`evaluate.families.diagnostic._ssim_to`) evaluates the same operations in the same
    order as the plain expression: bit-identical values, so no stored metric moved."""
    import cv2

    from evaluate.families.diagnostic import _ssim_stats, _ssim_to

    def textbook(a, b, win=7, data_range=255.0):
        def box(z):
            return cv2.boxFilter(z, cv2.CV_64F, (win, win), normalize=True, borderType=cv2.BORDER_REFLECT)

        x, y = a.astype(np.float64), b.astype(np.float64)
        ux, uy = box(x), box(y)
        vx, vy, vxy = box(x * x) - ux * ux, box(y * y) - uy * uy, box(x * y) - ux * uy
        cov = win * win / (win * win - 1)
        c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
        s = ((2 * ux * uy + c1) * (2 * (cov * vxy) + c2)) / ((ux * ux + uy * uy + c1) * ((cov * vx) + (cov * vy) + c2))
        p = (win - 1) // 2
        return float(s[p:-p, p:-p].reshape(-1, 3).mean(axis=0).mean())

    rng = np.random.default_rng(4)
    for t in range(24):
        h, w = (int(v) for v in rng.integers(8, 90, 2))
        a = rng.integers(0, 256, (h, w, 3), np.uint8)
        noisy = np.clip(a.astype(int) + rng.integers(-30, 30, (h, w, 3)), 0, 255).astype(np.uint8)
        for b in (a, noisy, rng.integers(0, 256, (h, w, 3), np.uint8)):
            assert _ssim_to(_ssim_stats(a), b) == textbook(a, b), (h, w)
        # float images (fractional values) take the float64 box filter, alone or against an 8-bit one
        fa, fb = a + rng.random(a.shape), noisy + rng.random(a.shape)
        assert _ssim_to(_ssim_stats(fa), fb) == textbook(fa, fb)
        assert _ssim_to(_ssim_stats(a), fb) == textbook(a, fb)
        assert _ssim_to(_ssim_stats(fa), noisy) == textbook(fa, noisy)


def test_window_mean_sums_integers_exactly_and_floats_as_opencv():
    """8-bit values and their products (uint16) are summed in int32 and scaled once: OpenCV's float64 box filter,
    bit for bit; a window whose int32 sums could overflow (65535 x 183^2 > 2^31), and float images, take the float64
    filter itself."""
    import cv2

    from evaluate.families.diagnostic import _window_mean

    def reference(z, win):
        return cv2.boxFilter(z.astype(np.float64), cv2.CV_64F, (win, win), normalize=True,
                             borderType=cv2.BORDER_REFLECT)

    rng = np.random.default_rng(9)
    u8 = rng.integers(0, 256, (41, 67, 3)).astype(np.uint16)
    for z in (u8, u8 * u8, rng.random((41, 67, 3)) * 255):
        for win in (3, 7, 11):
            assert np.array_equal(_window_mean(z, win), reference(z, win))
    full = np.full((190, 190, 3), 65535, np.uint16)
    assert np.array_equal(_window_mean(full, 183), reference(full, 183))
    out = np.empty((41, 67, 3))
    assert _window_mean(u8, 7, out) is out and np.array_equal(out, reference(u8, 7))


def _rendered(kind: str, n: int = 14) -> tuple[np.ndarray, np.ndarray]:
    """(n, 96, 160, 3) frames of the reference renderer along a turn (``rotation``) or a sideways walk."""
    import cv2
    from skimage import data

    from adapters.reference.model import ReferenceRenderer, Texture, stable_seed
    from trajectories.conventions import intrinsics_from_fov, rot_y, se3

    img = cv2.resize(data.rocket(), (160, 96), interpolation=cv2.INTER_AREA)
    K = intrinsics_from_fov(60.0, 160, 96)
    r = ReferenceRenderer(K, 96, 160)
    src = [(0, np.eye(4), np.dstack([img, np.full((96, 160), 255, np.uint8)]))]
    tex = Texture(stable_seed(1, kind), img.reshape(-1, 3).mean(0))
    poses = [se3(rot_y(np.deg2rad(0.7 * i))) if kind == "rotation" else se3(np.eye(3), [0.01 * i, 0.0, 0.0])
             for i in range(n)]
    return np.stack([r.render(c2w, src, tex)[..., :3] for c2w in poses]), K


@pytest.mark.parametrize("mode", ["rotation", "general"])
def test_classical_estimator_threads_give_the_sequential_bytes(mode):
    """Pairs run on threads in blocks; the chained poses equal a plain loop over the pairs (every step detecting,
    ``redetect=1``, ``redetect_general=1``), and the default's (corners detected on every 4th rotation step, every
    2nd general one) are the same for any thread count; the reuse leaves the per-step rotation error about where it
    was."""
    import cv2

    from evaluate.perception.weightfree import ClassicalPoseEstimator

    fr, K = _rendered(mode, n=70)  # more than two blocks of 32 steps
    idx = list(range(len(fr)))
    one = ClassicalPoseEstimator(redetect=1, redetect_general=1, threads=1)
    Kc = np.asarray(K, np.float64).copy()
    Kc[:2, 2] -= 0.5
    gray = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in fr]
    want = [np.eye(4)]
    for i in range(1, len(fr)):
        want.append(want[-1] @ one._step(gray[i - 1], gray[i], Kc, np.linalg.inv(Kc), mode)[0])
    for threads in (1, 3):
        every_step = ClassicalPoseEstimator(redetect=1, redetect_general=1, threads=threads)
        pe = every_step.estimate(FrameView(fr, idx), idx, K, mode)
        assert np.array_equal(pe.c2w, np.stack(want)) and pe.valid.all()
    default = [ClassicalPoseEstimator(threads=t).estimate(fr, idx, K, mode) for t in (1, 3)]
    assert np.array_equal(default[0].c2w, default[1].c2w) and default[0].valid.all()
    if mode == "rotation":  # the true relative turn is 0.7 deg a step about y
        from trajectories.conventions import geodesic_angle

        def err(c2w):
            return np.mean([abs(np.degrees(geodesic_angle(c2w[i, :3, :3], c2w[i + 1, :3, :3])) - 0.7)
                            for i in range(len(c2w) - 1)])

        assert err(np.stack(want)) < 0.15 and err(default[0].c2w) < 0.15  # 0.132 / 0.128 deg at 96 x 160
    # each frame is fitted to frame 0 on its own, so every 5th frame (14, still several per thread) checks the
    # threads as all 70 did, at a fifth of the ORB work (the fast tier's time)
    every5 = idx[::5]
    a1 = ClassicalPoseEstimator(threads=1).angles_to(fr[0], fr[every5], K)
    p1 = ClassicalPoseEstimator(threads=1).parallax_to(fr[0], fr[every5], K)
    assert np.array_equal(a1, ClassicalPoseEstimator(threads=3).angles_to(fr[0], FrameView(fr, every5), K))
    assert np.array_equal(p1, ClassicalPoseEstimator(threads=3).parallax_to(fr[0], fr[every5], K))
    assert np.isfinite(a1).sum() >= 3 and np.isfinite(p1).sum() >= 3  # fits were made, not all skipped


def test_threads_are_not_part_of_the_cache_key():
    from evaluate.perceive import _settings_of
    from evaluate.perception.weightfree import ClassicalPoseEstimator, PixelEncoder, TemplateTracker

    for cls in (ClassicalPoseEstimator, PixelEncoder, TemplateTracker):
        assert _settings_of(cls(threads=1)) == _settings_of(cls(threads=4))


def _weight_free(trackers=("template",)):
    """The weight-free evaluation settings these tests run (pixel encoder, classical poses, a fast bootstrap)."""
    from evaluate.stage import EvalConfig

    return EvalConfig(encoders=("pixel",), trackers=trackers, pose_estimators=("classical",),
                      return_frame_poses=("classical",), depth=(), face=(), imaging=(), aesthetic=(),
                      rpe_trans_estimators=("classical",), rpe_rot_estimator="classical",
                      bootstrap={"n": 50, "seed": 0})


def test_an_evaluation_reads_and_hashes_each_video_once_and_holds_two_videos_at_most(tmp_path, monkeypatch, capsys):
    """The integrity check, the reuse decision and the decode share one read of video.mp4 (and one sha256); the
    frames of a scored item are let go of at once (nothing keeps them, not even a reference cycle waiting for the
    garbage collector), so three videos are decoded into two arrays: the one scored and the next one decoding."""
    import gc

    import harness.io
    from evaluate import item as item_mod
    from evaluate.stage import evaluate_run
    from tests.support.cli import in_process_cli

    # generated in this process (no interpreter to start and import again: the fast tier's time)
    r = in_process_cli(monkeypatch, tmp_path, capsys)(
        "run=once", "cases.include=[environment_rocket,object_coffee,human_astronaut]", "model.height=96",
        "model.width=160", "model.num_frames=65", "progress=false", "evaluate=off")
    assert r.code == 0, r.err
    run = tmp_path / "outputs" / "once"
    reads, hashed, pools = [], [], []
    real_read, real_hash = item_mod.read_source, harness.io.sha256_file
    monkeypatch.setattr(item_mod, "read_source", lambda d: reads.append(d) or real_read(d))

    def counted(p):
        hashed.append(Path(p).name)
        return real_hash(p)

    class Recorded(FrameBuffers):
        def __init__(self, keep: int = 3) -> None:
            super().__init__(keep)
            pools.append(self)

    monkeypatch.setattr(harness.io, "sha256_file", counted)
    monkeypatch.setattr(item_mod, "FrameBuffers", Recorded)
    ecfg = _weight_free()
    gc.disable()  # frames kept by a cycle would only go when the collector happens to run: none may be needed
    try:
        out = evaluate_run(run, ecfg, force=True)
    finally:
        gc.enable()
    assert out["evaluated"] == 3 and not out["failed"], out["failed"]
    assert len(reads) == 3 and "video.mp4" not in hashed, (reads, hashed)
    assert len(pools) == 1 and len(pools[0]._arrays) == 2, [a.shape for a in pools[0]._arrays]


def test_frame_buffers_hand_out_only_an_array_nothing_holds():
    import weakref

    pool, shape = FrameBuffers(keep=2), (4, 6, 10, 3)
    a = pool.empty(shape)
    first = weakref.ref(a)
    view = a[1:3]
    del a
    b = pool.empty(shape)  # a view still reads the first array: another one
    assert b is not first() and first() is not None
    second = weakref.ref(b)
    del b, view
    x = pool.empty(shape)  # nothing holds either any more: the first again
    assert x is first()
    y = pool.empty(shape)  # ``x`` holds the first now
    assert y is second()
    z = pool.empty((2, 6, 10, 3))  # another shape: a new array, and the oldest is forgotten (at most ``keep``)
    assert z.shape == (2, 6, 10, 3) and len(pool._arrays) == 2 and all(arr is not x for arr in pool._arrays)
    assert x is first() and x.shape == shape  # forgotten by the pool, still whole for its holder


def test_a_reused_frame_array_gives_the_plain_decode_and_spares_one_still_read(tmp_path):
    """Decoding into an array of the pool: the frames are the plain decode's, whatever the array held before, and
    an array still read elsewhere is never decoded into."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    data_a, plain_a = _video_bytes(tmp_path / "a")
    data_b, plain_b = _video_bytes(tmp_path / "b", seed=1)
    pool = FrameBuffers()
    held = decode_frames(data_a, len(plain_a), buffers=pool)
    other = decode_frames(data_b, len(plain_a), buffers=pool)
    assert other is not held and np.array_equal(held, plain_a) and np.array_equal(other, plain_b)
    other[...] = 7  # stale content must not survive a decode
    del other
    again = decode_frames(data_a, len(plain_a), buffers=pool)
    assert np.array_equal(again, plain_a) and len(pool._arrays) == 2


@pytest.mark.slow  # a whole generation and evaluation (the full suite and CI run it)
def test_strips_are_drawn_during_the_evaluation_from_its_frames(tmp_path, monkeypatch):
    """Each strip is drawn while the run is evaluated, from the frames the evaluation decoded (no second decode),
    and it is byte for byte the strip the report draws from the video; the report reuses it."""
    import harness.video
    from evaluate.reporting import build_report
    from evaluate.reporting.strips import strip_frames
    from evaluate.stage import evaluate_run
    from tests.support import run_cli

    r = run_cli(["run=ahead", "cases.include=[environment_rocket,object_coffee]", "model.height=96",
                 "model.width=160", "model.num_frames=97", "progress=false", "evaluate=off"], tmp_path)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "outputs" / "ahead"
    reads = []
    real = harness.video.read_frames
    monkeypatch.setattr(harness.video, "read_frames", lambda *a, **kw: reads.append(a[0]) or real(*a, **kw))
    ecfg = _weight_free()
    out = evaluate_run(run, ecfg, force=True)
    assert out["evaluated"] == 2 and not out["failed"], out["failed"]
    strips = sorted((run / "eval" / "report" / "strips").glob("*.png"))
    assert len(strips) == 2 and reads == []  # drawn ahead, and the report found them fresh
    assert out["timings"]["strips_cpu_s"] > 0  # the drawing thread's CPU seconds, reported apart
    ahead = {p.name: p.read_bytes() for p in strips}
    for p in strips:
        p.unlink()
    rep = build_report([run], run / "eval" / "report", figures=False)
    assert len(reads) == 2  # drawn again by the report, from the videos
    assert {p.name: p.read_bytes() for p in (run / "eval" / "report" / "strips").glob("*.png")} == ahead
    (it,) = [i for i in rep["analyses"].study.items if i.case_id == "environment_rocket"]
    idx, frames = strip_frames(it)
    part = (idx[:-1], frames[:-1])  # kept frames that miss one the strip shows: read from the video instead
    again = strip_frames(it, kept=part)
    assert again[0] == idx and np.array_equal(again[1], frames) and len(reads) == 4
    assert np.array_equal(strip_frames(it, kept=(idx, frames))[1], frames) and len(reads) == 4  # all kept
    for p in (run / "eval" / "report" / "strips").glob("*.png"):
        p.unlink()
    off = evaluate_run(run, ecfg, force=True, strips_ahead=False)  # off (the benchmark): the report draws them
    assert off["timings"]["strips_cpu_s"] == 0.0
    redrawn = {p.name: p.read_bytes() for p in (run / "eval" / "report" / "strips").glob("*.png")}
    assert len(reads) == 6 and redrawn == ahead


@pytest.mark.slow  # a whole generation and evaluation (the full suite and CI run it)
def test_a_strip_that_fails_ahead_is_drawn_by_the_report(tmp_path, monkeypatch, caplog):
    from evaluate.reporting import strips as strips_mod
    from evaluate.stage import evaluate_run
    from tests.support import run_cli

    r = run_cli(["run=fails", "cases.include=[environment_rocket]", "model.height=96", "model.width=160",
                 "model.num_frames=97", "progress=false", "evaluate=off"], tmp_path)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "outputs" / "fails"
    real = strips_mod.frame_strip
    calls = []

    def flaky(it, png, **kw):
        calls.append(kw.get("frames"))
        if len(calls) == 1:
            raise RuntimeError("no font")
        return real(it, png, **kw)

    monkeypatch.setattr(strips_mod, "frame_strip", flaky)
    ecfg = _weight_free(trackers=())
    with caplog.at_level("WARNING"):
        out = evaluate_run(run, ecfg, force=True)
    assert not out["failed"] and "not drawn ahead (no font)" in caplog.text
    assert len(calls) == 2 and len(list((run / "eval" / "report" / "strips").glob("*.png"))) == 1


def test_opencv_runs_single_threaded_during_an_evaluation_and_is_restored():
    """The backbones parallelise frames themselves; OpenCV's own pool is off while a run is evaluated (and the
    results are the same bytes for any OpenCV thread count)."""
    import cv2

    from evaluate.perception.weightfree import ClassicalPoseEstimator
    from evaluate.stage import _opencv_single_threaded

    before = cv2.getNumThreads()
    with _opencv_single_threaded():
        assert cv2.getNumThreads() == 1
        fr, K = _rendered("rotation")
        idx = list(range(len(fr)))
        one = ClassicalPoseEstimator(threads=2).estimate(fr, idx, K, "rotation")
    assert cv2.getNumThreads() == before
    cv2.setNumThreads(2)
    try:
        two = ClassicalPoseEstimator(threads=2).estimate(fr, idx, K, "rotation")
    finally:
        cv2.setNumThreads(before)
    assert np.array_equal(one.c2w, two.c2w) and np.array_equal(one.valid, two.valid)


def test_frame_arrays_are_small_page_mappings_a_view_keeps_held():
    """The decode's frame array (:func:`evaluate.item.frame_array`): writable uint8 of the shape asked for, over an
    anonymous mapping; a view of it references the array itself, so the pool never hands out an array still read."""
    import mmap

    from evaluate.item import frame_array

    a = frame_array((3, 4, 5, 3))
    assert a.shape == (3, 4, 5, 3) and a.dtype == np.uint8 and a.flags.writeable and a.flags.c_contiguous
    if hasattr(mmap, "MAP_ANONYMOUS"):
        assert isinstance(a.base, mmap.mmap)
    a[...] = 9
    assert int(a.sum()) == 9 * a.size
    assert a[1].base is a  # not a flat array under a reshape: what FrameBuffers counts references of
    assert frame_array((0, 4, 5, 3)).shape == (0, 4, 5, 3)


@pytest.mark.slow  # generates a small run through the CLI, then evaluates it twice
def test_metrics_are_the_same_whichever_memory_holds_the_frames(tmp_path, monkeypatch):
    """Before / after the small-page frame arrays: the run evaluated with frames in ``np.empty`` arrays (the old
    allocation) and in :func:`evaluate.item.frame_array` mappings writes the same metric entries, value for value."""
    import json
    import shutil

    from evaluate import item as item_mod
    from evaluate.stage import evaluate_run
    from tests.support import run_cli

    r = run_cli(["run=mem", "cases.include=[environment_rocket,object_coffee]", "model.height=96",
                 "model.width=160", "model.num_frames=65", "progress=false", "evaluate=off"], tmp_path)
    assert r.returncode == 0, r.stderr
    run = tmp_path / "outputs" / "mem"
    old = tmp_path / "old"
    shutil.copytree(run, old)
    ecfg = _weight_free()

    def entries(root: Path) -> dict:
        return {str(p.relative_to(root).parent): json.loads(p.read_text())["metrics"]
                for p in sorted(root.rglob("metrics.json"))}

    with monkeypatch.context() as m:
        m.setattr(item_mod, "frame_array", lambda shape: np.empty(shape, np.uint8))
        assert not evaluate_run(old, ecfg, force=True, tables=False)["failed"]
    assert not evaluate_run(run, ecfg, force=True, tables=False)["failed"]
    before, after = entries(old), entries(run)
    assert len(before) == 2 and before == after
    assert any(m["status"] == "computed" for ms in after.values() for m in ms.values())


# -- evaluate.item, rule by rule ------------------------------------------------------------------------------------


_ROOM = {"kind": "room", "room": {"width": 4, "depth": 5.5}}


@pytest.mark.parametrize("meta, room", [
    ({"generation": {"oracle_depth": _ROOM}}, {"width": 4.0, "depth": 5.5}),  # the reference model's record
    ({"manifest": None, "generation": {"oracle_depth": _ROOM}}, {"width": 4.0, "depth": 5.5}),
    ({"manifest": {"external": False}, "generation": {"oracle_depth": _ROOM}}, {"width": 4.0, "depth": 5.5}),
    ({"manifest": {"external": True}, "generation": {"oracle_depth": _ROOM}}, None),  # imported: never ground truth
    ({}, None),
    ({"generation": None}, None),
    ({"generation": {}}, None),
    ({"generation": {"oracle_depth": "room"}}, None),  # not a dict
    ({"generation": {"oracle_depth": {"kind": "mesh", "room": {"width": 4}}}}, None),  # another kind
    ({"generation": {"oracle_depth": {"kind": "room"}}}, None),  # no room
    ({"generation": {"oracle_depth": {"kind": "room", "room": [4, 5]}}}, None),  # a room that is not a dict
])
def test_oracle_geometry_only_from_a_room_the_reference_model_recorded(meta, room):
    from evaluate.item import OracleGeometry

    c2w = np.tile(np.eye(4, dtype=np.float32), (3, 1, 1))
    g = OracleGeometry.from_meta(meta, c2w)
    if room is None:
        assert g is None
    else:
        assert g is not None and g.room == room and all(type(v) is float for v in g.room.values())
        assert g.c2w.dtype == np.float64 and np.array_equal(g.c2w, c2w)


class _Clock:
    """A stand-in for ``time`` in :mod:`evaluate.item`: ``perf_counter`` returns the given readings in turn and
    sets ``entered`` at each call (a reader took its start time and holds the decode's lock)."""

    def __init__(self, *readings: float) -> None:
        self.readings, self.calls, self.entered = list(readings), 0, threading.Event()

    def perf_counter(self) -> float:
        self.calls += 1
        self.entered.set()
        return self.readings.pop(0)


def test_a_fresh_decoding_holds_no_frame_and_has_waited_nothing():
    d = Decoding()
    assert d.waited_s == 0.0 and d.error is None
    d.wait(0)  # zero frames are always there
    d.finish()
    with pytest.raises(ValueError, match="before frame 1"):  # finished without a single frame
        d.wait(1)
    d.wait()  # the decode ended without an error


def test_a_wait_for_exactly_the_frames_there_does_not_wait(monkeypatch):
    from evaluate import item as item_mod

    clock = _Clock(10.0, 11.0)
    monkeypatch.setattr(item_mod, "time", clock)
    d = Decoding()
    d.advance(3)
    d.wait(3)
    d.wait(2)
    assert clock.calls == 0 and d.waited_s == 0.0
    d.finish()
    d.wait()
    assert clock.calls == 0 and d.waited_s == 0.0


def test_waited_s_sums_the_time_readers_blocked(monkeypatch):
    from evaluate import item as item_mod

    clock = _Clock(100.0, 102.5, 200.0, 203.0)
    monkeypatch.setattr(item_mod, "time", clock)
    d = Decoding()
    d.advance(1)
    t = threading.Thread(target=d.wait, args=(4,))
    t.start()
    assert clock.entered.wait(10)  # the reader is in; advancing takes the lock only once it sleeps
    d.advance(4)
    t.join(10)
    assert not t.is_alive() and d.waited_s == 2.5
    clock.entered.clear()
    t = threading.Thread(target=d.wait)  # the whole decode
    t.start()
    assert clock.entered.wait(10)
    d.finish()
    t.join(10)
    assert not t.is_alive() and d.waited_s == 2.5 + 3.0 and clock.calls == 4


def test_reading_frame_i_of_a_view_needs_the_first_i_plus_1_frames():
    frames = np.arange(5 * 2 * 2 * 3, dtype=np.uint8).reshape(5, 2, 2, 3)
    d = Decoding()
    d.advance(3)
    d.finish()  # ended after frames 0..2: frame 3 never comes
    v = FrameView(frames, [2, 3], d)
    assert np.array_equal(v[0], frames[2])
    with pytest.raises(ValueError, match="before frame 4"):
        v[1]
    assert np.array_equal(np.stack(list(FrameView(frames, [1, 0, 2], d))), frames[[1, 0, 2]])
    # the stacked copy waits for the highest frame it holds (frame 2: the first 3)
    assert np.array_equal(np.asarray(FrameView(frames, [0, 2, 1], d)), frames[[0, 2, 1]])
    with pytest.raises(ValueError, match="before frame 4"):
        np.asarray(FrameView(frames, [2, 0, 3], d))
    empty = np.asarray(FrameView(frames, [], d))  # no frame: nothing to wait for
    assert empty.shape == (0, 2, 2, 3) and empty.dtype == np.uint8


def test_a_view_stacks_to_uint8_unless_a_dtype_is_asked():
    frames = np.arange(4 * 2 * 2 * 3, dtype=np.uint8).reshape(4, 2, 2, 3)
    v = FrameView(frames, [3, 1])
    assert v.__array__().dtype == np.uint8 and np.asarray(v).dtype == np.uint8
    f = v.__array__(np.float32)
    assert f.dtype == np.float32 and np.array_equal(f, frames[[3, 1]].astype(np.float32))


def test_frame_array_without_anonymous_mmap_is_a_plain_array(monkeypatch):
    import mmap

    from evaluate.item import frame_array

    monkeypatch.delattr(mmap, "MAP_ANONYMOUS", raising=False)
    a = frame_array((2, 3, 4, 3))
    assert a.shape == (2, 3, 4, 3) and a.dtype == np.uint8 and not isinstance(a.base, mmap.mmap)


def test_frame_array_pages_are_advised_no_huge_pages():
    """Linux lists the advice in /proc/self/smaps: ``nh`` in the VmFlags of the mapping under the array."""
    import mmap

    from evaluate.item import frame_array

    smaps = Path("/proc/self/smaps")
    if not hasattr(mmap, "MADV_NOHUGEPAGE") or not smaps.exists():
        pytest.skip("no MADV_NOHUGEPAGE / smaps here")
    if not Path("/sys/kernel/mm/transparent_hugepage").exists():
        pytest.skip("this kernel has no transparent huge pages (the advice is refused, and nothing to avoid)")
    a = frame_array((8, 64, 64, 3))
    addr, inside, flags = a.ctypes.data, False, None
    for line in smaps.read_text().splitlines():
        head = line.split()[0] if line.split() else ""
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and line.startswith("VmFlags:"):
            flags = line.split()[1:]
    if flags is None:
        pytest.skip("smaps lists no VmFlags here")
    assert "nh" in flags, flags


def test_a_kernel_that_refuses_the_huge_page_advice_still_gets_its_frame_array(monkeypatch):
    import mmap

    from evaluate.item import frame_array

    if not hasattr(mmap, "MADV_NOHUGEPAGE"):
        pytest.skip("no MADV_NOHUGEPAGE here")

    class Refusing(mmap.mmap):  # a kernel without transparent huge pages: madvise gives EINVAL
        def madvise(self, *a):
            raise OSError(22, "Invalid argument")

    monkeypatch.setattr(mmap, "mmap", Refusing)
    a = frame_array((2, 4, 4, 3))
    a[:] = 7
    assert a.shape == (2, 4, 4, 3) and a.dtype == np.uint8 and int(a.sum()) == 7 * a.size


def test_frame_buffers_keep_the_three_newest_arrays_by_default():
    import weakref

    pool = FrameBuffers()
    held = [pool.empty((k, 2, 2, 3)) for k in (1, 2, 3, 4)]
    refs = [weakref.ref(a) for a in held]
    del held
    assert refs[0]() is None  # the oldest was forgotten, and nothing else held it
    assert all(r() is not None for r in refs[1:])
    assert pool.empty((2, 2, 2, 3)) is refs[1]()


@pytest.mark.parametrize("keep", [0, 1])
def test_frame_buffers_keep_at_least_one_array(keep):
    import weakref

    pool = FrameBuffers(keep=keep)
    assert pool.keep == 1
    a, b = pool.empty((1, 2, 2, 3)), pool.empty((2, 2, 2, 3))
    ra, rb = weakref.ref(a), weakref.ref(b)
    del a, b
    assert ra() is None and rb() is not None
    assert pool.empty((2, 2, 2, 3)) is rb()


def test_frame_buffers_reuse_a_free_array_of_the_same_shape_only():
    import weakref

    pool = FrameBuffers()
    a = pool.empty((3, 2, 2, 3))
    ra = weakref.ref(a)
    del a  # free now, but of another shape than the next one asked for
    b = pool.empty((5, 2, 2, 3))
    assert b.shape == (5, 2, 2, 3) and b is not ra()
    assert pool.empty((3, 2, 2, 3)) is ra()


def test_decode_frames_stops_at_num_frames(tmp_path):
    data, plain = _video_bytes(tmp_path, n=12)
    out = decode_frames(data, 5)  # a video longer than its path: its first 5 frames
    assert out.shape == (5, *plain.shape[1:]) and np.array_equal(out, plain[:5])
    seen: list = []
    out = decode_frames(data, 5, "v.mp4", lambda frames, decoding: seen.append(decoding))
    assert np.array_equal(out, plain[:5]) and len(seen) == 1
    seen[0].wait(5)
    with pytest.raises(ValueError, match="before frame 6"):
        seen[0].wait(6)


def test_a_decoding_handed_out_holds_the_first_frame(tmp_path):
    data, plain = _video_bytes(tmp_path, n=4)
    seen: list = []
    out = decode_frames(data, 1, "v.mp4", lambda frames, decoding: seen.append((frames, decoding)))
    frames, d = seen[0]
    assert frames is out and out.shape == (1, *plain.shape[1:])
    d.wait(1)  # the one frame is there (no later frame advances it)
    assert np.array_equal(FrameView(frames, [0], d)[0], plain[0])


def test_decoding_zero_frames_is_an_error(tmp_path):
    data, _ = _video_bytes(tmp_path, n=3)
    with pytest.raises(ValueError, match="z.mp4: decoded 0 frames, camera.npz has 0"):
        decode_frames(data, 0, "z.mp4")


def test_decode_frames_reads_the_first_video_stream(tmp_path):
    """A container with two video streams: the frames are those of stream 0 (bright), not stream 1 (dark)."""
    import av

    p = tmp_path / "two.mp4"
    with av.open(str(p), "w") as c:
        streams = [c.add_stream("mpeg4", rate=16) for _ in range(2)]
        for s in streams:
            s.width, s.height, s.pix_fmt = 32, 16, "yuv420p"
        for _ in range(3):
            for s, value in zip(streams, (200, 30)):
                f = av.VideoFrame.from_ndarray(np.full((16, 32, 3), value, np.uint8), format="rgb24")
                for pkt in s.encode(f):
                    c.mux(pkt)
        for s in streams:
            for pkt in s.encode():
                c.mux(pkt)
    out = decode_frames(p.read_bytes(), 3, "two.mp4")
    assert out.shape == (3, 16, 32, 3) and abs(float(out.mean()) - 200) < 10


def test_arrived_frames_are_those_back_at_frame_0():
    from trajectories.conventions import rot_y, se3

    deg = [0.0, 30.0, 3.0, 60.0, 30.0, 20.0]  # frames 0, 1 and the last all differ by more than 5 deg
    c2w = np.stack([se3(rot_y(np.deg2rad(a))) for a in deg])
    assert arrived_frames_of(c2w, list(range(6))) == [0, 2]  # within 5 deg of frame 0 (no translation)
    assert arrived_frames_of(c2w, [5, 2, 1, 0]) == [2, 0]  # in the order given


def arrived_frames_of(c2w, frames):
    from evaluate.item import arrived_frames

    return arrived_frames(c2w, frames, 5.0, 0.05)


# -- load_item on item folders written here ---------------------------------------------------------------------------


_CASE = {"id": "c", "family": "environment", "image": "c.png", "prompt": "a room"}


@pytest.fixture(scope="module")
def video24(tmp_path_factory) -> bytes:
    """A 24-frame 16 x 32 video: an item of T <= 24 frames decodes its first T."""
    data, _ = _video_bytes(tmp_path_factory.mktemp("v24"), n=24, h=16, w=32)
    return data


def _item_dir(root: Path, c2w: np.ndarray, phases: dict, video_bytes: bytes, /, **meta) -> Path:
    from harness.io import write_json
    from trajectories import CameraPath

    root.mkdir(parents=True)
    CameraPath("t", np.asarray(c2w, np.float64), np.eye(3), 16.0, 16, 32, phases).save(root / "camera.npz")
    (root / "video.mp4").write_bytes(video_bytes)
    write_json(root / "meta.json", {"case": _CASE, **meta})
    return root


def _still(T: int) -> np.ndarray:
    return np.tile(np.eye(4), (T, 1, 1))


def test_load_item_samples_every_stride_the_ends_and_each_window(tmp_path, video24):
    from evaluate.config import EvalConfig
    from evaluate.item import load_item

    T, phases = 23, {"V": (0, 3), "D1": (3, 8), "R1": (8, 12), "H": (12, 23)}
    it = load_item(_item_dir(tmp_path / "i", _still(T), phases, video24), EvalConfig(memory_stride=5))
    # every 5th frame {0, 5, 10, 15, 20}, the first and last {0, 22}, R1's {8, 11} and V's {0, 2} (each window's
    # stride-5 frames plus its last one)
    assert it.sample_idx == [0, 2, 5, 8, 10, 11, 15, 20, 22]
    assert it.ref_idx == [0, 2] and it.rev_idx == [[8, 11]] and it.rev_idx_arrived == [[8, 11]]
    assert it.windows == [(8, 12)] and it.num_frames == T and it.buffer.shape[0] == T


def _moved(T: int, step) -> np.ndarray:
    c2w = _still(T)
    c2w[:, :3, 3] = np.arange(T)[:, None] * np.asarray(step, np.float64)
    return c2w


def _turned(T: int) -> np.ndarray:
    from trajectories.conventions import rot_y, se3

    return np.stack([se3(rot_y(np.deg2rad(10.0 * i))) for i in range(T)])


def _nudged(T: int, dx: float) -> np.ndarray:
    c2w = _still(T)
    c2w[3, 0, 3] = dx
    return c2w


@pytest.mark.parametrize("c2w, translates", [
    (_still(6), False),
    (_turned(6), False),  # rotation only: the centre stays at frame 0's
    (_moved(6, [0.1, 0.0, 0.0]), True),  # sideways along x alone
    (_moved(6, [0.2, 0.2, 0.2]), True),  # along the diagonal: each frame's x, y, z equal, the centres move
    (_nudged(6, 1e-12), False),  # a centre range of exactly 1e-12 is not a move
    (_nudged(6, 3e-12), True),
])
def test_load_item_pose_mode_follows_whether_the_path_translates(tmp_path, video24, c2w, translates):
    from evaluate.config import EvalConfig
    from evaluate.item import load_item

    it = load_item(_item_dir(tmp_path / "i", c2w, {"V": (0, 2), "H": (2, 6)}, video24), EvalConfig())
    assert it.translates is translates
    assert it.pose_mode == ("general" if translates else "rotation")


@pytest.mark.parametrize("meta, want", [
    ({}, {}),
    ({"item": None}, {}),
    ({"item": {"model": "m", "seed": 3}}, {"model": "m", "seed": 3}),
])
def test_load_item_work_item_defaults_to_empty(tmp_path, video24, meta, want):
    from evaluate.config import EvalConfig
    from evaluate.item import load_item

    it = load_item(_item_dir(tmp_path / "i", _still(4), {"V": (0, 2), "H": (2, 4)}, video24, **meta), EvalConfig())
    assert it.item == want and it.trajectory_kind == "rotation" and it.oracle is None


def test_load_item_publishing_an_unreadable_video_raises_and_publishes_nothing(tmp_path):
    from evaluate.config import EvalConfig
    from evaluate.item import load_item

    published: list = []
    d = _item_dir(tmp_path / "i", _still(4), {"V": (0, 2), "H": (2, 4)}, b"not a video")
    with pytest.raises(ValueError, match="video.mp4"):
        load_item(d, EvalConfig(), publish=published.append)
    assert published == []


def test_load_item_publishing_a_short_video_keeps_the_error_in_the_item(tmp_path, video24):
    """Handed out at its first frame, the item's decode then fails (24 frames for a 30-frame path): load_item
    returns the item published; its frames and decode_error give the error."""
    from evaluate.config import EvalConfig
    from evaluate.item import load_item

    published: list = []
    d = _item_dir(tmp_path / "i", _still(30), {"V": (0, 2), "H": (2, 30)}, video24)
    it = load_item(d, EvalConfig(), publish=published.append)
    assert published == [it]
    err = it.decode_error()
    assert isinstance(err, ValueError) and "decoded 24 frames, camera.npz has 30" in str(err)
    with pytest.raises(ValueError, match="decoded 24 frames"):
        it.frames
    with pytest.raises(ValueError, match="decoded 24 frames"):
        load_item(d, EvalConfig())  # not published: raised


def test_load_item_publishing_a_whole_video_has_no_error(tmp_path, video24):
    from evaluate.config import EvalConfig
    from evaluate.item import load_item

    published: list = []
    it = load_item(_item_dir(tmp_path / "i", _still(6), {"V": (0, 2), "H": (2, 6)}, video24), EvalConfig(),
                   publish=published.append)
    assert published == [it] and it.decode_error() is None and it.frames.shape[0] == 6


# -- the evaluation stage on item folders written here (evaluate/stage.py), rule by rule ----------------------------
# Stand-in families (camera, environment, dynamic: what each computes is recorded, and each "works" a set number of
# seconds on the stage's own clock, which moves only then), a stand-in judge and a stand-in validity section: what is
# left is the stage's orchestration, run on real item folders (meta.json, an 8-frame camera.npz, video24).

_PHASES8 = {"V": (0, 2), "D1": (2, 4), "R1": (4, 6), "H": (6, 8)}
_WORK = {"camera": 1.0, "environment": 2.0, "dynamic": 4.0, "validity": 8.0, "judge": 100.0, "answer": 1000.0}


class _StageClock:
    """``time`` as evaluate.stage reads it: ``perf_counter`` moves only when a stand-in works."""

    def __init__(self) -> None:
        self.now = 5000.0

    def perf_counter(self) -> float:
        return self.now


class _Answer:
    """The judge's answer for one item (a future): ``lazy``, it is in only once it is asked for (``result``), so the
    run never finds it ready on its own."""

    def __init__(self, stage: "_Stand", entries: dict, lazy: bool) -> None:
        from concurrent.futures import Future

        self.stage, self.entries, self.future = stage, entries, Future()
        if not lazy:
            self.future.set_result(entries)

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout: object = None) -> dict:
        if not self.future.done():
            self.stage.clock.now += _WORK["answer"]
            self.future.set_result(self.entries)
        return self.future.result()


class _Stand:
    """The stand-ins of one test, and what the stage asked of them (``events``: families computed, judge asked)."""

    def __init__(self, video: bytes) -> None:
        self.video, self.clock, self.events = video, _StageClock(), []
        self.validity_calls = 0
        self.judge_error: Exception | None = None
        self.lazy = False
        self.perceptions: list = []
        self.failing: dict[str, Exception] = {}
        self.families = (self.family("camera", ("rpe_stride",)), self.family("environment", ("canvas",)),
                         self.family("dynamic", ("judge", "judge_stride"), only="dynamic"))

    def family(self, name: str, settings: tuple, only: str | None = None, reports: tuple = (), metric: str = "m"):
        from evaluate.families.base import Family, entry
        from evaluate.registry import Compute, MetricSpec

        def compute(item, perception, ecfg, backbones):
            self.events.append(name)
            self.perceptions.append(perception)
            self.clock.now += _WORK[name]
            if name in self.failing:
                raise self.failing[name]
            # per revisit, with its frames: what a strip shows (frames 0 and 5 of the video)
            return entry(f"{name}.{metric}", "", "estimator", 0.5, per_target={"t": [0.5]}, revisit_frames=[[4, 5]])

        def applies(item, ecfg) -> bool:
            return only is None or item.family == only

        spec = MetricSpec(f"{name}.{metric}", name, True, "x", True, "a stand-in",
                          (Compute(compute, (), applies, reports),))
        return Family(name, settings, (spec,))

    def validity(self, ctx, perc, ecfg) -> dict:
        self.validity_calls += 1
        self.clock.now += _WORK["validity"]
        return {"calls": self.validity_calls}

    # the run's judge (evaluate.judge.RunJudge)
    def __call__(self, settings: object) -> "_Stand":
        return self

    def __enter__(self) -> "_Stand":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def submit(self, inp, item_dir: Path) -> _Answer:
        from evaluate.families.base import entry

        self.events.append("judge")
        self.clock.now += _WORK["judge"]
        if self.judge_error is not None:
            raise self.judge_error
        assert inp.frames.shape[1:] == (16, 32, 3)  # built from the item's decoded frames
        return _Answer(self, entry("dynamic.m", "", "estimator", 0.25), self.lazy)

    def item(self, d: Path, family: str = "environment", T: int = 8, **meta) -> Path:
        video = {"file": "video.mp4", "sha256": _sha256(self.video), "size": len(self.video)}
        meta = {"status": "done", "video": video, "item": {"model": "m", "case_id": d.name},
                "timings": {"total_s": 3.0}, **meta}
        return _item_dir(d, _still(T), dict(_PHASES8, H=(6, T)), self.video, case={**_CASE, "family": family,
                         "unannotated": family == "dynamic"}, **meta)


@pytest.fixture
def stand(monkeypatch, video24) -> _Stand:
    from evaluate import stage

    s = _Stand(video24)
    monkeypatch.setattr(stage, "all_families", lambda: s.families)
    monkeypatch.setattr("evaluate.cache.all_families", lambda: s.families)  # the family hashes of the stand-ins
    monkeypatch.setattr(stage, "time", s.clock)
    monkeypatch.setattr("evaluate.validity.item_validity", s.validity)
    return s


def _stage_cfg(**kw):
    import dataclasses

    return dataclasses.replace(_weight_free(), **kw)


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _metrics_json(d: Path) -> dict:
    import json

    return json.loads((d / "metrics.json").read_text())


def test_stage_computes_each_family_in_order_timed_by_its_own_work_and_reuses_the_result(stand, tmp_path):
    from evaluate.stage import evaluate_item

    d = stand.item(tmp_path / "env")
    res = evaluate_item(d, _stage_cfg())
    assert stand.events == ["camera", "environment"]  # the dynamic family does not apply to this item
    assert list(res.metrics) == ["camera.m", "environment.m"] and res.status == "done" and res.reason is None
    hashes = res.family_hashes
    assert {k: (m.family, m.settings_hash) for k, m in res.metrics.items()} == {
        "camera.m": ("camera", hashes["camera"]), "environment.m": ("environment", hashes["environment"])}
    assert res.extra["timings"] == {"camera": 1.0, "environment": 2.0, "dynamic": 0.0, "item_s": 1.0 + 2.0 + 8.0}
    assert res.validity == {"calls": 1} and res.video_sha256 == _sha256(stand.video)
    assert res.item == {"model": "m", "case_id": "env"} and res.extra["timings_generation"] == {"total_s": 3.0}
    assert all(p.use_cache for p in stand.perceptions)  # the perception cache is on unless turned off
    assert _metrics_json(d)["metrics"]["environment.m"]["value"] == 0.5
    again = evaluate_item(d, _stage_cfg())  # nothing changed: the stored result, nothing computed
    assert again.extra["reused"] is True and again.metrics == res.metrics
    assert stand.events == ["camera", "environment"] and stand.validity_calls == 1
    evaluate_item(d, _stage_cfg(), force=True)
    assert stand.events == ["camera", "environment"] * 2 and stand.validity_calls == 2


def test_stage_a_changed_setting_recomputes_only_its_family_and_keeps_the_rest(stand, tmp_path):
    from evaluate.stage import evaluate_item

    d = stand.item(tmp_path / "env")
    first = evaluate_item(d, _stage_cfg())
    changed = evaluate_item(d, _stage_cfg(canvas=32))  # the environment family's setting
    assert stand.events == ["camera", "environment", "environment"]
    assert set(changed.extra["timings"]) == {"environment", "item_s"} and "reused" not in changed.extra
    assert changed.metrics["camera.m"].settings_hash == first.metrics["camera.m"].settings_hash
    assert changed.metrics["environment.m"].settings_hash != first.metrics["environment.m"].settings_hash
    assert changed.validity == {"calls": 1} and stand.validity_calls == 1  # validity's settings unchanged: kept
    off = evaluate_item(d, _stage_cfg(validity=False))  # validity's hash changed: recomputed, and it is off
    assert off.validity == {} and stand.validity_calls == 1


def test_stage_without_a_run_judge_the_judged_family_is_computed_in_turn(stand, tmp_path):
    from evaluate.stage import evaluate_item

    res = evaluate_item(stand.item(tmp_path / "dyn", family="dynamic"), _stage_cfg())
    assert stand.events == ["camera", "environment", "dynamic"]
    assert list(res.metrics) == ["camera.m", "environment.m", "dynamic.m"]


@pytest.mark.parametrize("lone", [False, True])
def test_stage_a_run_judge_is_asked_after_the_first_family_and_its_answer_recorded_last(stand, tmp_path, lone):
    """The judge's request goes out once the first family is done (it needs the last frame of a video that may
    still be decoding), the other families are computed meanwhile, and the answer comes last (``metrics.json`` in
    the families' order); its time: the request and the wait for the answer. A judged family alone is asked too."""
    from evaluate.stage import evaluate_item

    if lone:
        stand.families = stand.families[-1:]
    stand.lazy = True
    d = stand.item(tmp_path / "dyn", family="dynamic")
    res = evaluate_item(d, _stage_cfg(), judge=stand)
    assert stand.events == (["judge"] if lone else ["camera", "judge", "environment"])  # asked once
    assert list(res.metrics) == ([] if lone else ["camera.m", "environment.m"]) + ["dynamic.m"]
    judged = res.metrics["dynamic.m"]
    assert (judged.value, judged.family, judged.settings_hash) == (0.25, "dynamic", res.family_hashes["dynamic"])
    assert res.extra["timings"]["dynamic"] == 100.0 + 1000.0
    work = 100.0 + 8.0 + 1000.0 + (0.0 if lone else 3.0)
    assert res.extra["timings"]["item_s"] == work
    assert _metrics_json(d)["metrics"]["dynamic.m"]["value"] == 0.25


def test_stage_a_run_judge_is_asked_only_when_every_judged_computation_applies(stand, tmp_path):
    from evaluate.families.base import Family
    from evaluate.stage import evaluate_item

    judged = stand.family("dynamic", (), only="dynamic").specs + stand.family("dynamic", (), metric="n").specs
    stand.families = (*stand.families[:2], Family("dynamic", ("judge",), judged))
    res = evaluate_item(stand.item(tmp_path / "env"), _stage_cfg(), judge=stand)
    assert stand.events == ["camera", "environment", "dynamic"] and "dynamic.n" in res.metrics  # computed in turn


def test_stage_a_stored_judge_answer_is_kept_when_another_family_changed(stand, tmp_path):
    from evaluate.stage import evaluate_item

    d = stand.item(tmp_path / "dyn", family="dynamic")
    evaluate_item(d, _stage_cfg(), judge=stand)
    again = evaluate_item(d, _stage_cfg(canvas=32), judge=stand)
    assert stand.events == ["camera", "judge", "environment", "environment"]
    assert again.metrics["dynamic.m"].value == 0.25 and set(again.extra["timings"]) == {"environment", "item_s"}


@pytest.mark.parametrize("where", ["request", "answer"])
def test_stage_a_failing_judge_fails_the_judged_metrics_only(stand, tmp_path, where):
    from evaluate.results import Status
    from evaluate.stage import evaluate_item

    if where == "request":
        stand.judge_error = ConnectionError("judge down")
    else:
        stand.submit = lambda inp, item_dir: _failing_answer(ConnectionError("judge down"))
    res = evaluate_item(stand.item(tmp_path / "dyn", family="dynamic"), _stage_cfg(), judge=stand)
    judged = res.metrics["dynamic.m"]
    assert (judged.status, judged.reason) == (Status.FAILED, "ConnectionError: judge down")
    assert {k: m.status for k, m in res.metrics.items() if k != "dynamic.m"} == {
        "camera.m": Status.COMPUTED, "environment.m": Status.COMPUTED}
    assert res.status == "failed" and res.reason == "1 metric(s) failed: dynamic.m: ConnectionError: judge down"


def _failing_answer(exc: Exception):
    from concurrent.futures import Future

    f: Future = Future()
    f.set_exception(exc)
    return f


def test_stage_a_failing_computation_fails_its_metrics_and_the_reason_names_the_first_three(stand, tmp_path):
    from evaluate.perception.base import BackboneUnavailable
    from evaluate.results import Status
    from evaluate.stage import evaluate_item

    stand.families = (stand.family("camera", (), reports=("camera.a", "camera.b", "camera.c", "camera.d")),
                      stand.family("environment", ()))
    stand.failing = {"camera": ValueError("bad pose"), "environment": BackboneUnavailable("no weights here")}
    res = evaluate_item(stand.item(tmp_path / "env"), _stage_cfg())
    assert {k: (m.status, m.reason) for k, m in res.metrics.items()} == {
        **{f"camera.{x}": (Status.FAILED, "ValueError: bad pose") for x in "abcd"},
        "environment.m": (Status.NOT_COMPUTED, "no weights here")}
    assert res.status == "failed" and res.reason == ("4 metric(s) failed: camera.a: ValueError: bad pose; "
                                                     "camera.b: ValueError: bad pose; camera.c: ValueError: bad pose")


def test_stage_an_item_uses_the_backbones_and_the_cache_setting_it_is_given(stand, tmp_path):
    from evaluate.backbones import BackboneSet
    from evaluate.stage import evaluate_item

    given = BackboneSet(_stage_cfg(), tmp_path / "weights")
    evaluate_item(stand.item(tmp_path / "env"), _stage_cfg(), backbones=given, use_cache=False)
    assert stand.perceptions and all(p.backbones is given and not p.use_cache for p in stand.perceptions)


def test_stage_an_unexpected_error_while_reading_fails_the_item_with_it(stand, tmp_path, monkeypatch):
    from evaluate import stage

    d = stand.item(tmp_path / "env")

    def broken(*a, **k):
        raise OSError("weights folder unreadable")

    monkeypatch.setattr(stage, "family_hashes", broken)
    res = stage.evaluate_item(d, _stage_cfg())
    assert res.status == "failed" and res.reason == "OSError: weights folder unreadable" and stand.events == []
    assert _metrics_json(d)["reason"] == "OSError: weights folder unreadable"


def test_stage_a_lone_item_is_not_checked_against_its_meta_json_and_a_missing_one_fails(stand, tmp_path):
    """``evaluate_item`` scores the folder it is given (a run checks its items' files against meta.json first); a
    folder that is not there fails with the error, and is not made again."""
    from evaluate.stage import evaluate_item

    d = stand.item(tmp_path / "env", video={"sha256": "0" * 64})  # the recorded hash is not the video's
    assert evaluate_item(d, _stage_cfg()).status == "done"
    gone = tmp_path / "gone"
    res = evaluate_item(gone, _stage_cfg())
    assert res.status == "failed" and res.reason.startswith("FileNotFoundError") and "meta.json" in res.reason
    assert res.item["case_id"] == "gone" and not gone.exists()


def test_stage_prepare_publishes_an_item_once(stand, tmp_path):
    """Handed to the scorer once: a decoded item at its first frame, a reused one when its result is read."""
    from evaluate import stage

    d = stand.item(tmp_path / "env")
    published: list = []
    p = stage._prepare(d, _stage_cfg(), tmp_path, False, publish=published.append)
    assert published == [p] and p.ctx is not None and not p.reused
    stage.evaluate_item(d, _stage_cfg(), prepared=p)
    published.clear()
    p = stage._prepare(d, _stage_cfg(), tmp_path, False, publish=published.append)
    assert published == [p] and p.ctx is None and p.reused


# -- a run of such items (evaluate_run): judge answers in flight, strips ahead, item order, timings --------------


class _Strips:
    """evaluate.reporting.strips.StripsAhead: records each finished item, in order, with the frames kept for it."""

    def __init__(self, run_dir: Path, folder: Path) -> None:
        self.submitted: list[tuple[str, str, object]] = []
        self.cpu_s = 0.25  # the drawing thread's CPU seconds, handed on as timings["strips_cpu_s"]
        _Strips.last = self

    def submit(self, item_dir: Path, res, kept) -> None:
        self.submitted.append((Path(item_dir).name, res.status, None if kept is None else (kept[0], kept[1].shape)))

    def __enter__(self) -> "_Strips":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def stand_run(stand, monkeypatch, tmp_path):
    """A run of two finished items (a dynamic one, then an environment one) and one that failed to generate."""
    import json

    from evaluate import stage

    monkeypatch.setattr("evaluate.judge.RunJudge", stand)
    monkeypatch.setattr("evaluate.reporting.strips.StripsAhead", _Strips)
    monkeypatch.setattr(stage, "_warm_up", lambda: None)  # imports only (what the report needs anyway)
    run = tmp_path / "run"
    rows = []
    for case, status in (("dyn", "done"), ("env", "done"), ("lost", "failed")):
        key = f"m/fullkv/seed-0/lrlr/{case}"
        if status == "done":
            stand.item(run / key, family="dynamic" if case == "dyn" else "environment")
        rows.append({"model": "m", "context": "fullkv", "seed": 0, "trajectory": "lrlr", "case_id": case,
                     "key": key, "status": status, "dir": key})
    (run / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


@pytest.mark.parametrize("lazy", [False, True])
def test_stage_run_finishes_a_judged_item_once_its_answer_is_in_and_scores_the_next_meanwhile(stand, stand_run, lazy):
    """An answer already in: the judged item is finished before the next one is scored; one still awaited: the next
    item is scored and finished first, the judged one at the end. Only an item finished at once keeps the frames its
    strip shows (a judged one's strip is drawn by the report)."""
    from evaluate.stage import evaluate_run

    stand.lazy = lazy
    out = evaluate_run(stand_run, _stage_cfg(), tables=False)
    assert (out["evaluated"], out["failed"], out["skipped_not_done"]) == (2, [], 1)
    assert [r.item["case_id"] for r in out["results"]] == ["dyn", "env"]  # the manifest's order
    assert out["results"][0].metrics["dynamic.m"].value == 0.25
    kept_env = ("env", "done", ([0, 5], (2, 16, 32, 3)))
    want = [kept_env, ("dyn", "done", None)] if lazy else [("dyn", "done", None), kept_env]
    assert _Strips.last.submitted == want
    assert stand.events == ["camera", "judge", "environment", "camera", "environment"]
    assert all(p.use_cache for p in stand.perceptions)
    work = 2 * 1.0 + 2 * 2.0 + 2 * 8.0 + 100.0 + 1000.0 * lazy
    assert out["timings"]["total_s"] == work


def test_stage_run_reuses_unless_forced_and_scores_only_the_items_asked(stand, stand_run, capsys, monkeypatch):
    from evaluate.stage import evaluate_run

    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # the progress bar below is tqdm's

    env = stand_run / "m/fullkv/seed-0/lrlr/env"
    out = evaluate_run(stand_run, _stage_cfg(), tables=False, strips_ahead=False, only=[env])
    assert [r.item["case_id"] for r in out["results"]] == ["env"] and stand.events == ["camera", "environment"]
    assert _Strips.last.submitted == [] and capsys.readouterr().err == ""  # no strips, no progress bar
    again = evaluate_run(stand_run, _stage_cfg(), tables=False)
    assert stand.events == ["camera", "environment", "camera", "judge", "environment"]  # env reused
    assert again["results"][1].extra["reused"] is True
    evaluate_run(stand_run, _stage_cfg(), tables=False, force=True, progress=True, only=[env])
    assert stand.events[5:] == ["camera", "environment"] and "evaluate" in capsys.readouterr().err


def test_stage_run_tables_are_written_and_timed_apart_from_the_study_report(stand, stand_run, monkeypatch):
    from evaluate.stage import evaluate_run

    written = []

    def tables(run_dir, pairs, ecfg):
        written.append([d.name for d, _ in pairs])
        stand.clock.now += 50.0
        return {"report_s": 20.0, "tables": "T"}

    monkeypatch.setattr("evaluate.reporting.run.write_run_outputs", tables)
    out = evaluate_run(stand_run, _stage_cfg())
    assert written == [["dyn", "env"]] and out["tables"] == "T" and out["skipped_not_done"] == 1
    scored = 2 * 1.0 + 2 * 2.0 + 2 * 8.0 + 100.0
    assert (out["timings"]["total_s"], out["timings"]["tables_s"]) == (scored + 50.0 - 20.0, 50.0)
    assert out["timings"]["strips_cpu_s"] == 0.25  # what the strips' drawing thread measured


def test_stage_run_fails_an_item_whose_video_ends_early_and_one_whose_named_video_is_gone(stand, stand_run, caplog):
    """Decoded while it is scored, a video shorter than its path fails the item (written); an item whose
    ``meta.json`` names a video file that is not there is not scored at all (and the log says why)."""
    import logging
    import shutil

    from evaluate.stage import evaluate_run

    base = stand_run / "m/fullkv/seed-0/lrlr"
    shutil.rmtree(base / "env")
    stand.item(base / "env", T=30)  # 24 frames for a 30-frame path
    meta = (base / "dyn" / "meta.json").read_text().replace('"file": "video.mp4"', '"file": "clip.mp4"')
    (base / "dyn" / "meta.json").write_text(meta)
    with caplog.at_level(logging.WARNING, logger="evaluate.stage"):
        out = evaluate_run(stand_run, _stage_cfg(), tables=False)
    dyn, env = out["results"]
    assert out["failed"] == [(dyn.item, dyn.reason), (env.item, env.reason)]
    assert [r.getMessage() for r in caplog.records if r.name == "evaluate.stage"] == [f"{base / 'dyn'}: {dyn.reason}"]
    assert env.status == "failed" and "decoded 24 frames, camera.npz has 30" in env.reason
    assert _metrics_json(base / "env")["reason"] == env.reason
    assert dyn.status == "failed" and dyn.reason.startswith("clip.mp4 is missing")
    assert stand.events == ["camera", "environment"]  # the env item was scored; nothing of dyn


def test_stage_run_hashes_each_video_once_when_meta_json_names_no_file(stand, stand_run, monkeypatch):
    import json

    import harness.io
    from evaluate.stage import evaluate_run

    for d in (stand_run / "m/fullkv/seed-0/lrlr").iterdir():
        meta = json.loads((d / "meta.json").read_text())
        del meta["video"]["file"]
        (d / "meta.json").write_text(json.dumps(meta))
    hashed, real = [], harness.io.sha256_file
    monkeypatch.setattr(harness.io, "sha256_file", lambda p: hashed.append(Path(p).name) or real(p))
    out = evaluate_run(stand_run, _stage_cfg(), tables=False)
    assert out["evaluated"] == 2 and not out["failed"] and "video.mp4" not in hashed


def test_stage_run_an_error_preparing_an_item_ends_the_run_with_it(stand, stand_run, monkeypatch):
    from evaluate import stage

    def broken(*a, **k):
        raise MemoryError("no room for the frames")

    monkeypatch.setattr(stage, "_prepare", broken)
    with pytest.raises(MemoryError, match="no room"):
        stage.evaluate_run(stand_run, _stage_cfg(), tables=False)


def test_stage_run_an_error_of_the_warm_up_is_not_swallowed(stand, stand_run, monkeypatch):
    """The imports done ahead on the decode thread (matplotlib for the report) fail the run as they would in it."""
    from evaluate import stage

    def broken() -> None:
        raise ImportError("matplotlib is not installed")

    monkeypatch.setattr(stage, "_warm_up", broken)
    with pytest.raises(ImportError, match="matplotlib"):
        stage.evaluate_run(stand_run, _stage_cfg(), tables=False)
    assert stand.events == ["camera", "judge", "environment", "camera", "environment"]  # after every item


def test_stage_run_has_the_weights_pack_checked_before_anything_is_written(stand, stand_run, monkeypatch):
    from evaluate.backbones import BackboneSet
    from evaluate.stage import evaluate_run
    from evaluate.weights_pack import PackLinkError

    asked: list = []

    def refuse(self, names) -> None:
        asked.extend(names)
        raise PackLinkError("weights pack: a link out of the pack root; refused")

    monkeypatch.setattr(BackboneSet, "check_pack", refuse)
    with pytest.raises(PackLinkError, match="refused"):
        evaluate_run(stand_run, _stage_cfg(), tables=False)
    assert {"pixel", "template", "classical"} <= set(asked)  # every configured backbone
    assert stand.events == [] and not list(stand_run.rglob("metrics.json"))


def test_stage_run_fails_an_item_whose_folder_is_gone_without_making_it_again(stand, stand_run, caplog):
    import logging
    import shutil

    from evaluate.stage import evaluate_run

    gone = stand_run / "m/fullkv/seed-0/lrlr/dyn"
    shutil.rmtree(gone)
    with caplog.at_level(logging.WARNING, logger="evaluate.stage"):
        out = evaluate_run(stand_run, _stage_cfg(), tables=False)
    dyn, env = out["results"]
    assert dyn.status == "failed" and dyn.reason.startswith(f"its folder {gone} is missing") and not gone.exists()
    assert dyn.item == {"model": "m", "context": "fullkv", "seed": 0, "trajectory": "lrlr", "case_id": "dyn"}
    assert env.status == "done" and [r.getMessage() for r in caplog.records] == [dyn.reason]


def test_stage_opencv_threads_are_one_in_the_block_and_restored_after():
    import cv2

    from evaluate.stage import _opencv_single_threaded

    before = cv2.getNumThreads()
    cv2.setNumThreads(3)
    try:
        with _opencv_single_threaded():
            assert cv2.getNumThreads() == 1
        assert cv2.getNumThreads() == 3
    finally:
        cv2.setNumThreads(before)
