"""Each conformance check against a synthetic video that breaks it (written with ``harness.video.VideoWriter``).

The good video is a pan over a textured canvas: frame i is the canvas shifted by 3 px per frame while the poses
turn the camera 1 degree per frame, so real content moves with the camera. Each broken video differs in one way
only, and only its check fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.conformance import ConformanceSpec, check_video
from harness.video import VideoWriter
from trajectories.conventions import rot_y, se3

H, W, T = 96, 160, 40


def _texture(seed: int) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (H // 4, (W + 3 * T) // 4 + 20, 3), dtype=np.uint8)
    return cv2.resize(small, ((W + 3 * T + 80), H), interpolation=cv2.INTER_CUBIC)


WORLD = _texture(0)
CANVAS = WORLD[:, :W].copy()


def _poses(n: int = T, deg: float = 1.0) -> np.ndarray:
    return np.stack([se3(rot_y(np.radians(deg * i)), np.zeros(3)) for i in range(n)])


def _pan(n: int = T, start: int = 0) -> list[np.ndarray]:
    return [WORLD[:, 3 * (start + i): 3 * (start + i) + W].copy() for i in range(n)]


def _write(path, frames, fps=16.0):
    w = VideoWriter(path, fps)
    for f in frames:
        w(f)
    w.close()
    return path


def _spec(**over) -> ConformanceSpec:
    return ConformanceSpec(**{"fps": 16.0, "frames": T, "height": H, "width": W, "poses": _poses(), "canvas": CANVAS,
                              **over})


def _failed(report) -> list[str]:
    return [c.name for c in report.failed]


def test_a_conforming_video_passes_every_check(tmp_path):
    seen = []
    report = check_video(_write(tmp_path / "v.mp4", _pan()), _spec(), lambda i, f: seen.append(i))
    assert _failed(report) == [] and seen == list(range(T))
    checks = report.by_name()
    assert checks["first_frame"].value > 0.9 and checks["overlay"].ok and checks["overlay"].value["moving_pairs"] == T - 1


def test_wrong_fps_fails_fps(tmp_path):
    """e.g. Matrix-Game 3 writes 17 fps where a config said 16."""
    report = check_video(_write(tmp_path / "v.mp4", _pan(), fps=17), _spec())
    assert _failed(report) == ["fps"] and "17.000 fps" in report.by_name()["fps"].message


@pytest.mark.parametrize("fps, ok", [(16.79, True), (15.21, True), (16.81, False), (15.19, False), (12.0, False)])
def test_the_fps_check_is_two_sided_within_five_percent(tmp_path, fps, ok):
    """A slower file fails like a faster one; within 5 % of the contract's rate either way passes (16: 15.2 .. 16.8)."""
    report = check_video(_write(tmp_path / "v.mp4", _pan(4), fps=fps), _spec(frames=4))
    check = report.by_name()["fps"]
    assert check.ok is ok and check.value == pytest.approx(fps, abs=1e-3) and check.expected == 16.0
    assert (check.message == "") is ok


def test_a_missing_frame_fails_frames(tmp_path):
    """e.g. SANA-WM's 480 frames taken for 481 poses, without the alignment rule."""
    report = check_video(_write(tmp_path / "v.mp4", _pan(T - 1)), _spec())
    assert _failed(report) == ["frames"] and report.by_name()["frames"].value == T - 1


def test_another_frame_size_fails_resolution(tmp_path):
    frames = [np.ascontiguousarray(f[:, :144]) for f in _pan()]
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec(canvas=CANVAS[:, :144]))
    assert _failed(report) == ["resolution"] and report.by_name()["resolution"].value == [H, 144]


def test_another_image_fails_first_frame(tmp_path):
    other = _texture(1)
    frames = [other[:, 3 * i: 3 * i + W].copy() for i in range(T)]
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec())
    assert _failed(report) == ["first_frame"] and report.by_name()["first_frame"].value < 0.3


def test_frames_out_of_step_with_the_poses_fail_first_frame(tmp_path):
    """A video that starts later than pose 0 (frames dropped at the start, an alignment shifted by several frames)."""
    report = check_video(_write(tmp_path / "v.mp4", _pan(start=10)), _spec())
    assert _failed(report) == ["first_frame"]


def test_a_vae_like_reconstruction_and_a_colour_shift_still_match(tmp_path):
    """What real models return: a lossy, slightly recoloured first frame (DreamX's colour correction) is the image."""
    import cv2

    frames = _pan()
    frames[0] = np.clip(cv2.GaussianBlur(frames[0], (5, 5), 0) * 0.8 + 20, 0, 255).astype(np.uint8)
    assert _failed(check_video(_write(tmp_path / "v.mp4", frames), _spec())) == []


def _draw_boxes(frame: np.ndarray) -> np.ndarray:
    """A key-box band like Matrix-Game 3's: outlined boxes with letters, at the same place in every frame."""
    import cv2

    f = frame.copy()
    for k in range(3):
        x = 16 + 40 * k
        cv2.rectangle(f, (x, 56), (x + 32, 88), (255, 255, 255), 2)
        cv2.putText(f, "WAS"[k], (x + 8, 80), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (0, 255, 0), 2)
    return f


def test_a_drawn_overlay_fails_overlay(tmp_path):
    frames = [_draw_boxes(f) for f in _pan()]
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec())
    assert _failed(report) == ["overlay"]
    check = report.by_name()["overlay"]
    x0, y0, x1, y1 = check.value["box_xyxy"]
    assert x0 <= 16 and x1 >= 96 and y0 <= 64 and y1 >= 88 and "overlay" in check.message


def test_an_overlay_is_not_judged_while_the_camera_stands_still(tmp_path):
    """A still camera makes still pixels legitimate: with no moving frame pairs the check says 'not checked'."""
    frames = [_draw_boxes(_pan(1)[0]) for _ in range(T)]
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec(poses=_poses(deg=0.0)))
    assert _failed(report) == [] and report.by_name()["overlay"].ok is None


def test_a_frozen_video_fails_overlay(tmp_path):
    frames = [_pan(1)[0]] * T
    check = check_video(_write(tmp_path / "v.mp4", frames), _spec()).by_name()["overlay"]
    assert check.ok is False and "frozen" in check.message


@pytest.mark.parametrize("broken", ["fps", "frames", "overlay"])
def test_the_report_is_plain_json(broken, tmp_path):
    import json

    frames = _pan(T - 1 if broken == "frames" else T)
    if broken == "overlay":
        frames = [_draw_boxes(f) for f in frames]
    report = check_video(_write(tmp_path / "v.mp4", frames, fps=17 if broken == "fps" else 16), _spec())
    d = json.loads(json.dumps(report.to_dict()))
    assert d[broken]["ok"] is False and set(d) == {"fps", "frames", "resolution", "first_frame", "overlay"}


def test_a_blended_hud_with_letters_fails_overlay(tmp_path):
    """Matrix-Game 3's idle key boxes are grey at alpha 0.5 (visualize.py:64-99): the box moves with the scene
    behind it, the letters on it do not."""
    import cv2

    def hud(frame):
        f = frame.astype(np.float32)
        f[50:90, 10:150] = 0.5 * f[50:90, 10:150] + 0.5 * 128
        f = f.astype(np.uint8)
        for k, ch in enumerate("WASD"):
            cv2.putText(f, ch, (18 + 34 * k, 80), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (255, 255, 255), 2)
        return f

    report = check_video(_write(tmp_path / "v.mp4", [hud(f) for f in _pan()]), _spec())
    assert _failed(report) == ["overlay"]


def test_flat_sky_over_moving_ground_is_not_an_overlay(tmp_path):
    """Unmoving pixels without edges (a clear sky, a white wall) are not an overlay."""
    frames = []
    for f in _pan():
        f = f.copy()
        f[:40] = (120, 170, 230)
        frames.append(f)
    report = check_video(_write(tmp_path / "v.mp4", frames), _spec(canvas=frames[0]))
    assert _failed(report) == []
