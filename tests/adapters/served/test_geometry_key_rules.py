"""The edge rules of a served model's chunk geometry and held-key kinematics, each derived by hand from the rule the
module docstrings restate (sglang 0.5.23: LingBot-World's causal Wan decode and ``_actions_to_c2ws``, SANA-WM's
stage-1 grid and refiner blocks):

* which clip lengths stream and in which chunks: one frame is a clip where a chunk is one latent, a clip of exactly
  one chunk streams, every tick of one new latent streams, and with the refiner the sink and block decide which
  counts the engine can stream (a tick with no new latent ends the session);
* which honourable counts a refusal names: the closest strictly below and strictly above, within a bounded search;
* what each key does (``k`` down, ``s`` back, opposite keys cancel, a pitch landing exactly on the limit is kept);
* what the greedy encoder chooses: it models the engine's pitch clamp and its ``norm + 1e-6`` step, weighs one
  missed move like one missed yaw step, and breaks ties by the fewest keys.
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.served.geometry import ChunkPlan, Geometry, GeometryError
from adapters.served.keys import KeyKinematics, decode, encode
from trajectories.conventions import rot_x, rot_y

LINGBOT = KeyKinematics(yaw_deg=6.0, pitch_deg=4.0, move=0.05)  # conf/backend/sglang.yaml lingbot_v2 kinematics
SANA_WM = Geometry("sana_wm", 8, 3, refiner_sink=1, refiner_block=3)  # conf/backend/sglang.yaml sana_wm geometry
STEP = 0.05 / (1 + 1e-6)  # one LingBot move: the engines divide the horizontal axis by its norm + 1e-6


def _targets(*poses: tuple[np.ndarray, list[float]]) -> np.ndarray:
    """Identity, then one (rotation, translation) pose per step."""
    out = np.repeat(np.eye(4)[None], len(poses) + 1, 0)
    for k, (R, t) in enumerate(poses, 1):
        out[k, :3, :3], out[k, :3, 3] = R, t
    return out


# -- geometry: which counts stream -------------------------------------------------------------------------------
def test_one_frame_is_a_clip_where_a_chunk_is_one_latent():
    # N = 1: L = (1 - 1) / s + 1 = 1 latent. causal_wan with c = 1: chunk 0 decodes 1 + s (c - 1) = 1 frame;
    # sana_wm with c = 1 (no refiner): one stage-1 chunk [0, 1], its one new latent decodes to 1 frame
    assert Geometry("causal_wan", 4, 1).streamed(1) == ChunkPlan(1, 1, (1,))
    assert Geometry("sana_wm", 8, 1).streamed(1) == ChunkPlan(1, 1, (1,))
    # no clip has fewer than one frame
    assert Geometry("causal_wan", 4, 1).streamed(0) is None and Geometry("causal_wan", 4, 1).streamed(-3) is None


def test_latents_count_one_per_stride_after_the_first_frame():
    # stride 2, one latent a chunk: N = 5 -> L = (5 - 1) / 2 + 1 = 3 latents, chunks 1 + 2 (1 - 1) = 1, then 2 and 2
    assert Geometry("causal_wan", 2, 1).plan(5) == ChunkPlan(5, 3, (1, 2, 2))


def test_a_sana_clip_of_exactly_one_chunk_streams_whole():
    # without the refiner: N = 17 -> L = 3 = c latents, one stage-1 chunk [0, 3], one tick of 1 + 8 (3 - 1) = 17
    assert Geometry("sana_wm", 8, 3).plan(17) == ChunkPlan(17, 3, (17,))
    # the served SANA-WM: N = 25 -> L = 4, floor(4 / 3) = 1 chunk holding the remainder: [0, 4]; its one tick plans
    # chunk 0 (4 latents) and the refiner completes the first latent and one block of 3: 4 latents, 1 + 8 * 3 = 25
    assert SANA_WM.plan(25) == ChunkPlan(25, 4, (25,))


def test_a_tick_of_one_new_latent_streams():
    # one latent a chunk, no refiner: N = 17 -> L = 3, ticks [0,1], [1,2], [2,3]: 1 frame, then 8 and 8
    assert Geometry("sana_wm", 8, 1).plan(17).chunk_frames == (1, 8, 8)
    # a refiner of one-latent blocks (sink 1) keeps up latent by latent: N = 25 -> L = 4, four ticks. Tick 1 plans
    # chunk 0 (stage-1 at 1; refined 1). Tick k > 1: target = 1 + (k - 2) // 1 * 1 + 1 = k, so stage-1 reaches k and
    # the refiner completes latent k: 1 new latent a tick -> 1, 8, 8, 8
    g = Geometry("sana_wm", 8, 1, refiner_sink=1, refiner_block=1)
    assert g.plan(25).chunk_frames == (1, 8, 8, 8)


# Refiner block 4 on 3-latent stage-1 chunks, by sink (target = sink + floor(max(0, stage1 - sink) / 4) * 4 + 4; the
# refined frontier is 1 + 4k; past the grid the server plans uniform 3-latent chunks). Tick 1 always plans chunk 0
# and refines only the first latent.
#   N = 65: L = 9, grid [0, 3, 6, 9], 3 ticks (stage-1 after tick 1: 3)
#     sink 0: tick 2 target 0 + 0 + 4 = 4  -> stage-1 6, refined 5; tick 3 target 0 + 4 + 4 = 8  -> 9, refined 9
#     sink 1: tick 2 target 1 + 0 + 4 = 5  -> 6, refined 5;          tick 3 target 1 + 4 + 4 = 9  -> 9, refined 9
#     sink 2: tick 2 target 2 + 0 + 4 = 6  -> 6, refined 5;          tick 3 target 2 + 4 + 4 = 10 -> 12 (past the
#             grid), refined 9
#     sink 3: tick 2 target 3 + 0 + 4 = 7  -> 9, refined 9;          tick 3 target 3 + 4 + 4 = 11 -> 12, refined 9:
#             an empty tick ends the session
#     frontiers 1, 5, 9 -> 1 frame, then 8 * 4 = 32 and 32
#   N = 97: L = 13, grid [0, 4, 7, 10, 13], 4 ticks (stage-1 after tick 1: 4)
#     sink 0: tick 2 target 4 + 4 = 8   -> 10, refined 9;  tick 3 target 8 + 4 = 12 -> 13, refined 13;
#             tick 4 target 12 + 4 = 16 -> 16 (past the grid), refined 13: empty tick
#     sink 1: targets 1 + 0 + 4 = 5, 1 + 4 + 4 = 9, 1 + 8 + 4 = 13 -> stage-1 7, 10, 13; refined 5, 9, 13
#     sink 2: targets 2 + 0 + 4 = 6, 2 + 4 + 4 = 10, 2 + 8 + 4 = 14 -> stage-1 7, 10, 16 (past the grid);
#             refined 5, 9, 13
#     sink 3: tick 2 target 3 + 0 + 4 = 7 -> 7, refined 5; tick 3 target 3 + 4 + 4 = 11 -> 13, refined 13;
#             tick 4 target 3 + 8 + 4 = 15 -> 16, refined 13: empty tick
#     frontiers 1, 5, 9, 13 -> 1, 32, 32, 32
@pytest.mark.parametrize("sink,num_frames,chunk_frames", [
    (0, 65, (1, 32, 32)), (1, 65, (1, 32, 32)), (2, 65, (1, 32, 32)), (3, 65, None),
    (0, 97, None), (1, 97, (1, 32, 32, 32)), (2, 97, (1, 32, 32, 32)), (3, 97, None),
])
def test_the_refiner_sink_decides_which_counts_stream(sink, num_frames, chunk_frames):
    got = Geometry("sana_wm", 8, 3, refiner_sink=sink, refiner_block=4).streamed(num_frames)
    assert (got and got.chunk_frames) == chunk_frames


# -- geometry: the counts a refusal names ------------------------------------------------------------------------
def test_the_nearest_counts_are_the_closest_strictly_below_and_above():
    g = Geometry("causal_wan", 4, 3)  # LingBot v2: N = 4 k + 1 with k + 1 a multiple of 3: ..., 477, 489, 501, ...
    assert g.nearest(488) == (477, 489)
    assert g.nearest(489) == (477, 501)  # strictly: a count that streams is not its own neighbour
    assert g.nearest(490) == (489, 501)
    with pytest.raises(GeometryError, match="model.num_frames=477 or model.num_frames=489"):
        g.plan(488)
    one = Geometry("causal_wan", 4, 1)  # every 4 k + 1 streams, 1 included
    assert one.nearest(5) == (1, 9)
    assert one.nearest(0) == (None, 1) and one.nearest(-7) == (None, 1)  # nothing below 1; above: 1
    assert one.nearest(30001) == (29997, 30005)


def test_the_search_above_stops_20000_frames_past_the_request():
    # counts above n are searched below max(n, 1) + 20000: a 20000-frame stride streams 1, 20001, 40001, ...
    g = Geometry("causal_wan", 20000, 1)
    assert g.nearest(1) == (None, None)  # 20001 is not below 1 + 20000
    assert g.nearest(2) == (1, 20001)  # 20001 < 2 + 20000
    assert g.nearest(0) == (None, 1)


# -- keys: what each key does ------------------------------------------------------------------------------------
def test_k_pitches_down_s_moves_back_and_opposite_keys_cancel():
    # dp = 4 deg (i) - 4 deg (k): "k" alone pitches down (R_x(-4 deg)), "i" with "k" does nothing
    np.testing.assert_allclose(decode(LINGBOT, [["k"]])[-1][:3, :3], rot_x(np.deg2rad(-4)), atol=1e-12)
    # move = forward * 0.05 * (w - s): "s" alone goes back along -z, "w" with "s" stays
    np.testing.assert_allclose(decode(LINGBOT, [["s"]])[-1][:3, 3], [0, 0, -STEP], atol=1e-12)
    np.testing.assert_allclose(decode(LINGBOT, [["i", "k", "w", "s"]])[-1], np.eye(4), atol=1e-12)


def test_a_pitch_landing_exactly_on_the_limit_is_kept():
    # limit 8 deg, 4 deg a step: the second "i" lands on 8 (|8| <= 8, kept), the third would reach 12 (dropped)
    kin = KeyKinematics(yaw_deg=6.0, pitch_deg=4.0, move=0.05, pitch_limit_deg=8.0)
    np.testing.assert_allclose(decode(kin, [["i"]] * 3)[-1][:3, :3], rot_x(np.deg2rad(8)), atol=1e-12)
    # the encoder knows it: a climb to exactly the limit is keyed as the climb
    assert encode(kin, _targets((rot_x(np.deg2rad(4)), [0, 0, 0]), (rot_x(np.deg2rad(8)), [0, 0, 0]))) == [["i"]] * 2


# -- keys: what the encoder chooses ------------------------------------------------------------------------------
def test_the_encoder_does_not_key_a_pitch_the_engine_would_drop():
    # requested pitch 4 k deg for k = 1..22; the engine keeps 21 "i" (84 deg) and drops the 22nd (88 > 85): that "i"
    # lands where no key does, 4 deg short either way, and the tie goes to the fewest keys (none)
    targets = _targets(*[(rot_x(np.deg2rad(4 * k)), [0, 0, 0]) for k in range(1, 23)])
    assert encode(LINGBOT, targets) == [["i"]] * 21 + [[]]


@pytest.mark.parametrize("t,keys", [([0, 0, 0.025], ["w"]), ([0.025, 0, 0], ["d"])])
def test_the_encoder_models_the_engines_step_length(t, keys):
    # a target half a move ahead (right): the engine's step is 0.05 / (1 + 1e-6), 5e-8 short of 0.05, so the key
    # lands 0.025 - 5e-8 from the target, nearer than staying put (0.025 away)
    assert encode(LINGBOT, _targets((np.eye(3), t))) == [keys]


def test_a_missed_move_weighs_as_much_as_a_missed_yaw_step():
    # target: yaw 2.9 deg, position one "lw" step (0.05 along the view turned 6 deg right). Costs (deg + 6 deg a move):
    #   "lw": |6 - 2.9| = 3.1 deg, position off by 5e-8                               -> 3.1
    #   "w" : 2.9 deg, position off by 0.05 * 2 sin(3 deg) = 0.00523, 0.105 move (0.63)  -> 3.53
    #   none: 2.9 deg, position off by one move (6)                                     -> 8.9
    target = (rot_y(np.deg2rad(2.9)), 0.05 * np.array([np.sin(np.deg2rad(6)), 0, np.cos(np.deg2rad(6))]))
    assert encode(LINGBOT, _targets(target)) == [["l", "w"]]


def test_a_tie_goes_to_the_fewest_keys():
    # yaw 3 deg requested: none and "l" are both 3 deg off (no move either way): the first in COMBOS, no key
    assert encode(LINGBOT, _targets((rot_y(np.deg2rad(3)), [0, 0, 0]))) == [[]]


def test_a_far_target_still_gets_its_cheapest_key_set():
    """A target 200 units to the right: every cost is near 24,000 (200 / 0.05 * 6), where adding 1e-12 changes no
    float; the encoder still picks the cheapest set ("d", strafe right) instead of failing with an IndexError."""
    from adapters.served.keys import encode

    target = np.eye(4)
    target[0, 3] = 200.0
    assert encode(LINGBOT, np.stack([np.eye(4), target])) == [["d"]]
