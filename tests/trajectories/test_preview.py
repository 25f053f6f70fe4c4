"""The trajectory preview draws what camera.npz holds: the top view's heading arrows, read back from the drawn
figure in screen coordinates, point where each sampled frame's c2w looks (a left yaw turns them left)."""

from __future__ import annotations

import numpy as np
import pytest

from trajectories import TrajectorySpec, build_path
from trajectories.conventions import intrinsics_from_fov
from trajectories.path import load_path

SPECS = {
    "lrlr": TrajectorySpec(name="lrlr", cycles=("left", "left")),
    "lrlrlr": TrajectorySpec(name="lrlrlr", cycles=("left", "left", "left")),
    "square": TrajectorySpec(name="square", kind="square", side=1.0),
}


def _drawn_arrows(path):
    """(frame indices, arrow tails, unit arrow directions) as drawn on screen (pixels, y up), read from the
    figure's top-view quiver through the axes' data-to-display transform (so a wrong aspect, a flipped axis or a
    swapped component shows up, not only a wrong vector)."""
    import matplotlib.pyplot as plt
    from matplotlib.quiver import Quiver

    from trajectories.preview import draw_path

    fig = draw_path(path)
    try:
        fig.canvas.draw()
        top = fig.axes[0]
        q = next(c for c in top.collections if isinstance(c, Quiver))
        frames = np.asarray(q.get_array()).astype(int)
        tail = np.column_stack([q.X, q.Y])
        head = tail + np.column_stack([q.U, q.V])
        d = top.transData.transform(head) - top.transData.transform(tail)
        return frames, tail, d / np.linalg.norm(d, axis=1, keepdims=True)
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", ["lrlr", "lrlrlr", "square"])
def test_top_view_arrows_follow_the_saved_camera_path(name, tmp_path):
    K = intrinsics_from_fov(60.0, 832, 480)
    build_path(SPECS[name], 493, 16.0, K, 480, 832).save(tmp_path / "camera.npz")
    path = load_path(tmp_path / "camera.npz")  # what the run writes and evaluation reads
    frames, tail, drawn = _drawn_arrows(path)
    assert len(frames) >= 20
    c2w = path.c2w[frames]
    fwd = c2w[:, :3, 2][:, [0, 2]]  # world x (right on the page) and z (up the page) of the optical axis
    fwd /= np.linalg.norm(fwd, axis=1, keepdims=True)
    np.testing.assert_allclose(drawn, fwd, atol=2e-3)  # drawn angle == heading angle, every sampled frame
    np.testing.assert_allclose(tail, c2w[:, [0, 2], 3], atol=1e-9)  # each arrow starts at its camera position


@pytest.mark.parametrize("name", ["lrlr", "lrlrlr"])
def test_a_left_yaw_turns_the_arrows_left(name):
    """LRLR sweeps the heading from +z (up the page) to -x (left on the page) and back."""
    path = build_path(SPECS[name], 493, 16.0, intrinsics_from_fov(60.0, 832, 480), 480, 832)
    frames, _, drawn = _drawn_arrows(path)
    assert drawn[0] == pytest.approx([0.0, 1.0], abs=1e-3)  # frame 0 looks forward: up the page
    assert drawn[:, 0].min() < -0.95  # at the far point of the departure: left, not right
    assert (drawn[:, 0] <= 1e-3).all()  # and never to the right
    # the leftmost arrow belongs to a frame inside a departure / return phase, where the yaw is at its extreme
    yaw = np.rad2deg(np.arctan2(path.c2w[frames, 0, 2], path.c2w[frames, 2, 2]))
    assert yaw[np.argmin(drawn[:, 0])] == pytest.approx(yaw.min())
