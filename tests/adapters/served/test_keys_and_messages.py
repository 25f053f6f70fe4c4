"""Units of the served backend: the held-key kinematics and encoder, the frame-batch parser, the chunk geometry.

The kinematics are checked against values derived by hand from the engines' published rules (sglang 0.5.23
``configs/pipeline_configs/lingbot_world.py::_actions_to_c2ws``: 6 deg yaw, 4 deg pitch, 0.05 per step;
``sana_wm/base.py``: 1.2 deg, 0.04, strafe coupling 0.4); tests/adapters/served/test_sglang_engine.py compares
them with the engine's own functions where sglang is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.served.engines import _frames_from_payload
from adapters.served.geometry import Geometry, sana_segments
from adapters.served.keys import COMBOS, KeyKinematics, decode, encode
from adapters.served.transport import ServedError
from trajectories.conventions import rot_x, rot_y

LINGBOT = KeyKinematics(yaw_deg=6.0, pitch_deg=4.0, move=0.05)
SANA = KeyKinematics(yaw_deg=1.2, pitch_deg=1.2, move=0.04, strafe_yaw_coupling=0.4, per="frame")


def test_each_key_does_what_the_engine_rule_says():
    # 15 steps of "l": +90 deg yaw (view turns right: R_y(+)); "j" the opposite
    np.testing.assert_allclose(decode(LINGBOT, [["l"]] * 15)[-1][:3, :3], rot_y(np.deg2rad(90)), atol=1e-12)
    np.testing.assert_allclose(decode(LINGBOT, [["j"]] * 5)[-1][:3, :3], rot_y(np.deg2rad(-30)), atol=1e-12)
    # "i" pitches up by 4 deg per step (R_x(+)), clamped at 85 deg: 30 steps stop at 84 (21 steps), not 120
    np.testing.assert_allclose(decode(LINGBOT, [["i"]] * 30)[-1][:3, :3], rot_x(np.deg2rad(84)), atol=1e-12)
    # "w" moves along the horizontal forward axis, 0.05 / (1 + 1e-6) per step (the engines' normalisation)
    t = decode(LINGBOT, [["w"]] * 10)[-1][:3, 3]
    np.testing.assert_allclose(t, [0, 0, 10 * 0.05 / (1 + 1e-6)], atol=1e-12)
    # after a 90 deg right turn, "w" goes along +x, "d" along -z (right of a camera looking at +x)
    p = decode(LINGBOT, [["l"]] * 15 + [["w"], ["d"]])
    np.testing.assert_allclose(p[16][:3, 3] - p[15][:3, 3], [0.05 / (1 + 1e-6), 0, 0], atol=1e-9)
    np.testing.assert_allclose(p[17][:3, 3] - p[16][:3, 3], [0, 0, -0.05 / (1 + 1e-6)], atol=1e-9)
    # SANA-WM: "d" also yaws by 0.4 x 1.2 deg (strafe coupling), LingBot's does not
    np.testing.assert_allclose(decode(SANA, [["d"]])[-1][:3, :3], rot_y(np.deg2rad(0.48)), atol=1e-12)
    np.testing.assert_allclose(decode(LINGBOT, [["d"]])[-1][:3, :3], np.eye(3), atol=1e-12)


def test_pitch_is_applied_in_the_camera_frame_and_yaw_in_the_world():
    # R' = R_y(yaw) R R_x(pitch): pitch up then yaw right differs from yaw then pitch; the engine order is one of them
    p = decode(LINGBOT, [["i"], ["l"]])[-1][:3, :3]
    np.testing.assert_allclose(p, rot_y(np.deg2rad(6)) @ rot_x(np.deg2rad(4)), atol=1e-12)
    assert not np.allclose(p, rot_x(np.deg2rad(4)) @ rot_y(np.deg2rad(6)))


@pytest.mark.parametrize("kin", [LINGBOT, SANA])
def test_the_encoder_recovers_any_path_the_keys_can_make(kin):
    """A path made by a key script is followed exactly (zero residual), whatever script made it: the greedy choice
    is exact when a combination hits the target. (A tie between two scripts giving the same pose is allowed.)"""
    rng = np.random.default_rng(7)
    script = [list(COMBOS[i]) for i in rng.integers(0, len(COMBOS), 40)]
    targets = decode(kin, script)
    got = encode(kin, targets)
    np.testing.assert_allclose(decode(kin, got), targets, atol=1e-9)


def test_the_encoder_follows_a_slow_turn_within_half_a_step():
    # 2.5 deg of yaw per step: the engine can only do 0 or 6, so the achieved yaw stays within 3 deg of the request
    yaw = np.deg2rad(2.5) * np.arange(25)
    targets = np.repeat(np.eye(4)[None], 25, 0)
    targets[:, :3, :3] = rot_y(yaw)
    achieved = decode(LINGBOT, encode(LINGBOT, targets))
    err = np.rad2deg(np.abs(np.arctan2(achieved[:, 0, 2], achieved[:, 2, 2]) - yaw))
    assert err.max() <= 3.0 + 1e-9 and err.max() > 0.5  # quantised, not exact


def _header(n, h=4, w=6, **kw):
    return {"type": "frame_batch", "chunk_index": 0, "frame_batch_index": 0, "num_frames": n, "format": "rgb24",
            "width": w, "height": h, "channels": 3, "bytes_per_frame": h * w * 3, "total_size": n * h * w * 3,
            "encoding": "raw", **kw}


def test_raw_frame_batches_are_split_into_frames_in_order():
    frames = np.arange(2 * 4 * 6 * 3, dtype=np.uint8).reshape(2, 4, 6, 3)
    got = _frames_from_payload(_header(2), frames.tobytes(), 4, 6)
    assert len(got) == 2 and np.array_equal(got[1], frames[1])


@pytest.mark.parametrize("header,payload_len,needle", [
    (_header(2), 2 * 4 * 6 * 3 - 6, "announced"),          # short payload against total_size
    (_header(2, total_size=2 * 4 * 6 * 3 - 6), 2 * 4 * 6 * 3 - 6, "holds"),  # consistent header, wrong frame bytes
    (_header(2, w=8, bytes_per_frame=4 * 8 * 3, total_size=2 * 4 * 8 * 3), 2 * 4 * 8 * 3, "8x4"),  # other size
])
def test_a_frame_batch_of_the_wrong_size_is_refused(header, payload_len, needle):
    with pytest.raises(ServedError, match=needle) as e:
        _frames_from_payload(header, b"\0" * payload_len, 4, 6)
    assert e.value.kind == "wrong frame size"


def test_encoded_frames_are_decoded_by_their_lengths():
    import cv2

    frames = [np.full((4, 6, 3), c, np.uint8) for c in (10, 200)]
    blobs = [cv2.imencode(".png", f[:, :, ::-1])[1].tobytes() for f in frames]
    h = _header(2, format="jpeg", encoding="jpeg", payload_lengths=[len(b) for b in blobs],
                total_size=sum(len(b) for b in blobs))
    got = _frames_from_payload(h, b"".join(blobs), 4, 6)
    assert [int(g[0, 0, 0]) for g in got] == [10, 200]
    with pytest.raises(ServedError, match="payload_lengths"):
        _frames_from_payload({**h, "payload_lengths": [len(blobs[0])], "total_size": len(blobs[0]) + len(blobs[1])},
                             b"".join(blobs), 4, 6)


def test_a_malformed_header_field_is_a_protocol_error_naming_it():
    for bad in ({"num_frames": "2"}, {"width": None}, {"num_frames": -1}, {"total_size": 1.5}):
        with pytest.raises(ServedError, match="malformed") as e:
            _frames_from_payload(_header(2, **bad), b"\0" * (2 * 4 * 6 * 3), 4, 6)
        assert e.value.kind == "protocol" and next(iter(bad)) in str(e.value)


# -- geometry: the engines' rules restated, checked against numbers computed here by hand ----------------------
def test_causal_wan_chunks_are_the_engines():
    g = Geometry("causal_wan", 4, 3)
    plan = g.plan(489)  # 123 latents = 41 chunks of 3: 9 frames, then 12
    assert plan.max_chunks == 41 and plan.chunk_frames[:2] == (9, 12) and sum(plan.chunk_frames) == 489
    assert g.streamed(493) is None  # 124 latents: not whole 3-latent chunks (the paper's 493)
    with pytest.raises(Exception, match="model.num_frames=489 or model.num_frames=501"):
        g.plan(493)
    assert Geometry("causal_wan", 4, 4).plan(493).chunk_frames[:2] == (13, 16)  # another engine's chunk


def test_sana_grid_floors_and_front_loads_the_remainder():
    assert sana_segments(61, 3) == [0, 4] + list(range(7, 62, 3))  # 20 chunks, 61 % 3 = 1 latent into chunk 0
    assert sana_segments(8, 3) == [0, 5, 8]
    refined = Geometry("sana_wm", 8, 3, refiner_sink=1, refiner_block=3)
    plan = refined.plan(481)  # the paper's 481: 25 frames, then 19 x 24
    assert plan.chunk_frames == (25,) + (24,) * 19 and plan.max_chunks == 20
    assert refined.streamed(473) is None and refined.nearest(473) == (457, 481)  # the refiner's 1 + 3k grid
    plain = Geometry("sana_wm", 8, 3)  # without the refiner every 8k+1 with >= 3 latents streams exactly
    assert plain.plan(473).chunk_frames[:2] == (17, 24) and plain.plan(489).chunk_frames[0] == 33


