"""Controls stay inside what upstream's own generators produce (issue 31): no key change shorter than upstream's
hold, no single-frame taps, no per-frame flipping.

Matrix-Game 3's condition generator holds every action for 12 frames (``combine_data``: ``selections = [12]``,
Matrix-Game-3/utils/conditions.py:12, :27-32@71c3cd7f7413) and its vocabulary has no S+A / S+D (back_left and
back_right are commented out, :50-51). YUME's unit is the 29-frame caption stage; a caption that turns to the
opposite direction for one stage and back is a flip. The checks run on every benchmark trajectory at each model's
native frame count, and on the old per-frame greedy encoding, which they must reject (so they can fail).
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.matrix_game3 import controls as mg3_controls
from adapters.yume import controls as yume_controls
from harness.config_groups import group_yaml, list_group

TRAJECTORIES = list(list_group("trajectory"))
HOLD = 12  # upstream's hold (utils/conditions.py:12@71c3cd7f7413), read independently of the encoder's parameter


def _runs(labels: list) -> list[tuple[object, int, int]]:
    """(label, start, length) of each maximal run."""
    out: list[tuple[object, int, int]] = []
    for i, x in enumerate(labels):
        if out and out[-1][0] == x:
            out[-1] = (x, out[-1][1], out[-1][2] + 1)
        else:
            out.append((x, i, 1))
    return out


def hold_problems(labels: list, hold: int) -> list[str]:
    """Runs shorter than ``hold`` that touch neither end (upstream truncates its own last block,
    conditions.py:27), and per-frame flips (a, b, a)."""
    runs = _runs(labels)
    bad = [f"{lab!r} held {n} frames at {s}" for lab, s, n in runs[1:-1] if n < hold]
    bad += [f"flip at {i}" for i in range(1, len(labels) - 1)
            if labels[i] != labels[i - 1] and labels[i + 1] == labels[i - 1]]
    return bad


def _path(model: str, trajectory: str):
    from adapters.base import build_adapter
    from harness.cases import load_case_set
    from trajectories import TrajectorySpec

    a = build_adapter(group_yaml("model", model))
    K = a.canvas_K(load_case_set("builtin:demo")[0])
    return a, a.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", trajectory)), K, trajectory)


def _mg3_problems(kb: np.ndarray, ms: np.ndarray) -> list[str]:
    rows = kb[:-1, :4].astype(int)  # the last row moves nothing
    combos = [tuple(r) for r in rows]
    bad = [f"keys {k}" for k in set(combos) if k[1] and (k[2] or k[3])]  # S+A / S+D: not in upstream's vocabulary
    bad += ["keyboard: " + p for p in hold_problems(combos, HOLD)]
    for axis, name in ((0, "pitch"), (1, "yaw")):
        bad += [f"mouse {name}: " + p for p in hold_problems(np.sign(ms[:-1, axis]).astype(int).tolist(), HOLD)]
    return bad


@pytest.mark.parametrize("trajectory", TRAJECTORIES)
def test_mg3_keys_and_mouse_are_held_as_upstream_holds_them(trajectory):
    a, path = _path("matrix_game3", trajectory)
    assert a.config.params().hold_frames == HOLD
    kb, ms = mg3_controls.mg3_encode(path.c2w, a.config.params())
    assert not _mg3_problems(kb, ms), _mg3_problems(kb, ms)[:5]


def test_the_check_rejects_the_per_frame_encoding_the_square_had():
    """The square's golden before issue 31 (a greedy choice per frame) flipped S+D / W+D every frame on the D leg and
    tapped W / S / A for single frames; with a hold of one frame the encoder makes that again, and the check sees it."""
    import dataclasses

    a, path = _path("matrix_game3", "square")
    p = dataclasses.replace(a.config.params(), hold_frames=1)
    kb, ms = mg3_controls.mg3_encode(path.c2w, p)
    probs = _mg3_problems(kb, ms)
    assert any(x.startswith("keyboard: flip") for x in probs) and any("held 1 frames" in x for x in probs)


def test_mg3_square_backward_leg_is_s_and_returns_to_the_start():
    """The backward leg presses S alone (the recorded choice, mg3_controls.MG3_CAVEATS), and the square closes."""
    a, path = _path("matrix_game3", "square")
    kb, ms = mg3_controls.mg3_encode(path.c2w, a.config.params())
    combos = {tuple(r) for r in kb[:-1, :4].astype(int)}
    assert (0, 1, 0, 0) in combos and combos <= {(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0),
                                                 (0, 0, 0, 1), (1, 0, 1, 0), (1, 0, 0, 1)}
    back = mg3_controls.mg3_decode(kb, ms, a.config.params())
    assert np.linalg.norm(back[-1, :3, 3] - path.c2w[-1, :3, 3]) < 1e-9


_OPPOSITE = {"W": "S", "S": "W", "A": "D", "D": "A", "←": "→", "→": "←", "↑": "↓", "↓": "↑"}


def _flips(seq: list[str]) -> list[int]:
    """Stages whose key is the opposite of both neighbours' equal keys (a one-stage reversal)."""
    return [i for i in range(1, len(seq) - 1)
            if seq[i - 1] == seq[i + 1] and _OPPOSITE.get(seq[i - 1]) == seq[i]]


@pytest.mark.parametrize("trajectory", TRAJECTORIES)
def test_yume_captions_hold_a_stage_and_never_flip(trajectory):
    a, path = _path("yume", trajectory)
    lines = yume_controls.yume_captions(path.c2w, "", a.config.params())
    stages = [yume_controls.yume_parse_caption(x) for x in lines]
    assert len(lines) == (path.num_frames - 1) // a.config.frames_per_stage  # one caption per 29-frame stage
    for k in (0, 1):
        assert not _flips([s[k] for s in stages]), stages
    assert _flips(["·", "←", "→", "←"]) == [2] and _flips(["W", "W+D", "W"]) == []  # the rule itself
