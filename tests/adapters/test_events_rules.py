"""The rules of adapters/reference/events.py, one at a time and in this process: the walk-off event's geometry, its
memory (which latent observed the spot, which start a chunk reads), its drawing (the start gate, the first frame,
the visible fraction), its trace, the event of a case (:func:`event_for`) and the ground truth it implies
(:func:`ground_truth`) on small hand-made traces whose answers can be read off by hand."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from adapters.reference.events import WALK_OFF_PREDICATES, WalkOffEvent, event_for, ground_truth
from adapters.reference.model import ReferenceRenderer
from harness.cases import ASPECTS, Case, Event, ObjectTarget, Question, Targets

H, W = 24, 40
K = np.array([[30.0, 0.0, W / 2], [0.0, 30.0, H / 2], [0.0, 0.0, 1.0]])
#: Small phases: the walk starts at frame 10 of V = [0, 16) and takes 8 frames.
PHASES = {"V": (0, 16), "D1": (16, 32), "R1": (32, 48), "H": (48, 56)}


def canvas() -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, size=(H, W, 3), dtype=np.uint8)


def target_mask() -> np.ndarray:
    """Rows [6, 12) x columns [20, 28): band [6, 12) x [0, 28), 6 * 28 = 168 pixels."""
    m = np.zeros((H, W), bool)
    m[6:12, 20:28] = True
    return m


def walk(start_frame: int = 10, duration: int = 8, mask: np.ndarray | None = None) -> WalkOffEvent:
    return WalkOffEvent(canvas(), target_mask() if mask is None else mask, dict(PHASES), start_frame, duration,
                        target="cat")


def blank() -> np.ndarray:
    return np.zeros((H, W, 4), np.uint8)


def moved(dx: float) -> np.ndarray:
    c2w = np.eye(4)
    c2w[0, 3] = dx
    return c2w


@pytest.fixture(scope="module")
def renderer() -> ReferenceRenderer:
    return ReferenceRenderer(K, H, W)


class RayWarpRecorder(ReferenceRenderer):
    """The real renderer whose ray warp is replaced by a recorder returning a chosen (RGBA, valid) pair; a
    homography warp is an error."""

    def __init__(self, valid_pixels: int):
        super().__init__(K, H, W)
        self.calls = 0
        self.warped = np.full((H, W, 4), 200, np.uint8)
        self.valid = np.zeros((H, W), np.uint8)
        self.valid.reshape(-1)[:valid_pixels] = 255

    def _warp_rays(self, *args, **kwargs):
        self.calls += 1
        return self.warped, self.valid

    def _warp_rotation(self, *args, **kwargs):
        raise AssertionError("a moved camera must not be warped by a homography")


# -- the event's geometry -------------------------------------------------------------------------------------------
def test_an_empty_target_mask_is_refused():
    with pytest.raises(ValueError, match="the target mask is empty at the canvas size"):
        walk(mask=np.zeros((H, W), bool))


def test_a_one_pixel_target_has_a_one_pixel_box():
    m = np.zeros((H, W), bool)
    m[5, 9] = True
    ev = walk(mask=m)
    assert (ev.y0, ev.y1, ev.x0, ev.x1) == (5, 6, 9, 10)
    assert ev.leave_progress == pytest.approx(1 / 10)
    assert ev.band_area == 10.0


def test_the_box_spans_the_extreme_rows_and_columns_of_an_irregular_mask():
    m = np.zeros((H, W), bool)
    m[8, 12] = True
    m[15, 30] = True
    m[10:12, 20:22] = True
    ev = walk(mask=m)
    assert (ev.y0, ev.y1, ev.x0, ev.x1) == (8, 16, 12, 31)


def test_the_band_runs_from_the_left_edge_to_the_right_of_the_target():
    ev = walk()
    assert ev.band_area == 6 * 28
    assert ev.leave_progress == pytest.approx(8 / 28)
    assert ev.v_end == 16


def test_the_plate_is_the_canvas_with_only_the_target_inpainted_from_a_ring_around_it():
    ev = walk()
    img, m = canvas(), target_mask()
    hole = cv2.dilate(m.astype(np.uint8) * 255, np.ones((5, 5), np.uint8))
    expected = cv2.inpaint(img, hole, 5, cv2.INPAINT_TELEA)
    np.testing.assert_array_equal(ev.plate[m], expected[m])
    np.testing.assert_array_equal(ev.plate[~m], img[~m])


def test_the_plate_of_a_target_on_a_flat_background_is_the_background():
    img = np.full((H, W, 3), 90, np.uint8)
    img[6:12, 20:28] = (250, 10, 10)
    ev = WalkOffEvent(img, target_mask(), dict(PHASES), 10, 8)
    assert np.abs(ev.plate.astype(int) - 90).max() <= 3  # no trace of the red target


# -- progress and memory --------------------------------------------------------------------------------------------
def test_progress_is_zero_until_a_walk_is_known():
    assert walk().progress_at(30) == 0.0


@pytest.mark.parametrize("t, expected", [(5, 0.0), (10, 0.0), (12, 0.25), (17, 0.875), (18, 1.0), (30, 1.0)])
def test_progress_runs_linearly_from_the_walk_start_over_its_duration_then_stays_at_one(t, expected):
    ev = walk()
    ev.observed, ev.belief = {3: True}, {3: 10}
    ev.begin_chunk([3])
    assert ev.progress_at(t) == expected


def test_a_chunk_reads_the_walk_from_the_most_recent_admitted_observer():
    ev = walk()
    ev.observed = {1: True, 2: False, 3: True, 4: True}
    ev.belief = {1: 5, 2: 6, 3: 7, 4: 9}
    ev.begin_chunk([np.int64(3), 1, 2])
    assert ev.chunk_beliefs == [{"context_observers": [3, 1], "walk_start": 7}]
    assert all(type(i) is int for i in ev.chunk_beliefs[0]["context_observers"])


def test_a_chunk_whose_context_observed_nothing_resets_the_walk():
    ev = walk()
    ev.observed, ev.belief = {1: True, 2: False}, {1: 5, 2: 6}
    ev.begin_chunk([1])
    ev.begin_chunk([2, 7])
    assert ev.progress_at(40) == 0.0
    assert ev.chunk_beliefs == [{"context_observers": [1], "walk_start": 5},
                                {"context_observers": [], "walk_start": None}]


def test_a_latent_observed_the_spot_when_exactly_half_the_band_was_in_view_at_its_anchor():
    ev = walk()
    ev.visible = {4: 0.5, 8: 0.499999}
    ev.end_latent(1, 4)
    ev.end_latent(2, 8)
    ev.end_latent(3, 12)  # its anchor frame was never drawn: not observed
    assert ev.observed == {1: True, 2: False, 3: False}
    assert ev.belief == {1: None, 2: None, 3: None}


def test_a_latent_remembers_the_walk_start_it_rendered():
    ev = walk()
    ev.observed, ev.belief = {0: True}, {0: 4}
    ev.begin_chunk([0])
    ev.visible = {12: 1.0}
    ev.end_latent(np.int64(3), np.int64(12))
    assert ev.belief[3] == 4 and ev.observed[3] is True


# -- the layer ------------------------------------------------------------------------------------------------------
def test_the_layer_shifts_the_target_left_by_the_progress_times_the_band_width():
    ev = walk()
    dx, layer = ev._layer(0.5)
    assert dx == 14
    assert layer.shape == (H, W, 4)
    img, m = canvas(), target_mask()
    np.testing.assert_array_equal(layer[6:12, 6:14, :3], img[6:12, 20:28])  # the target, 14 pixels left
    np.testing.assert_array_equal(layer[6:12, 0:6, :3], ev.plate[6:12, 0:6])
    np.testing.assert_array_equal(layer[6:12, 14:28, :3], ev.plate[6:12, 14:28])  # its spot: the empty plate
    assert not (ev.plate[m] == img[m]).all()
    assert (layer[6:12, 0:28, 3] == 255).all()
    assert not layer[:6].any() and not layer[12:].any() and not layer[:, 28:].any()


def test_target_pixels_shifted_exactly_onto_the_left_edge_are_kept_and_those_beyond_it_dropped():
    ev = walk()
    dx, layer = ev._layer(20 / 28)  # column 20 lands exactly on column 0
    assert dx == 20
    np.testing.assert_array_equal(layer[6:12, 0:8, :3], canvas()[6:12, 20:28])
    dx, layer = ev._layer(0.75)  # 21 pixels: column 20 would land on -1: dropped, never wrapped round to the right
    assert dx == 21
    np.testing.assert_array_equal(layer[6:12, 0:7, :3], canvas()[6:12, 21:28])
    np.testing.assert_array_equal(layer[6:12, 7:28, :3], ev.plate[6:12, 7:28])
    assert not layer[:, 28:].any()


def test_a_layer_is_built_once_per_shift():
    ev = walk()
    _, a = ev._layer(0.5)
    _, b = ev._layer(0.5 + 0.01 / 28)  # rounds to the same shift
    assert a is b and list(ev._layers) == [14]


# -- drawing --------------------------------------------------------------------------------------------------------
def test_the_first_frame_without_a_walk_is_the_conditioning_frame_itself(renderer):
    ev = walk()
    frame = blank()
    assert ev.draw(0, np.eye(4), frame, renderer) is frame
    assert ev.progress == {0: 0.0} and ev.visible == {0: 1.0}


def test_the_first_frame_of_a_remembered_walk_is_drawn(renderer):
    ev = walk()
    ev.observed, ev.belief = {0: True}, {0: -8}
    ev.begin_chunk([0])
    out = ev.draw(0, np.eye(4), blank(), renderer)
    assert ev.progress == {0: 1.0} and ev.visible == {0: 1.0}
    np.testing.assert_array_equal(out[6:12, 0:28, :3], ev._layer(1.0)[1][6:12, 0:28, :3])


def test_before_the_start_the_band_is_drawn_at_rest_where_it_is_in_view(renderer):
    ev = walk()
    frame = blank()
    out = ev.draw(5, np.eye(4), frame, renderer)
    assert out is not frame and not frame.any()  # drawn on a copy
    np.testing.assert_array_equal(out[6:12, 0:28, :3], canvas()[6:12, 0:28])
    assert (out[6:12, 0:28, 3] == 255).all()
    assert not out[:6].any() and not out[12:].any() and not out[:, 28:].any()
    assert ev.progress == {5: 0.0} and ev.visible == {5: 1.0}


def test_the_walk_starts_at_its_start_frame_during_the_initial_hold(renderer):
    ev = walk()
    ev.draw(9, np.eye(4), blank(), renderer)
    ev.end_latent(1, 9)
    ev.draw(10, np.eye(4), blank(), renderer)
    ev.end_latent(2, 10)
    ev.draw(12, np.eye(4), blank(), renderer)
    assert ev.belief == {1: None, 2: 10}
    assert ev.progress == {9: 0.0, 10: 0.0, 12: 0.25}


def test_a_walk_is_never_started_at_or_after_the_end_of_the_initial_hold(renderer):
    ev = walk(start_frame=10)
    ev.draw(16, np.eye(4), blank(), renderer)  # forgotten walk: the action is not enacted again
    ev.end_latent(4, 16)
    assert ev.belief == {4: None} and ev.progress == {16: 0.0}


def test_a_remembered_walk_keeps_its_start_during_the_initial_hold(renderer):
    ev = walk(start_frame=10, duration=16)
    ev.observed, ev.belief = {0: True}, {0: 3}
    ev.begin_chunk([0])
    ev.draw(12, np.eye(4), blank(), renderer)
    assert ev.progress == {12: 0.5625}
    ev2 = walk(start_frame=10, duration=16)
    ev2.observed, ev2.belief = {0: True}, {0: 3}
    ev2.begin_chunk([0])
    ev2.draw(30, np.eye(4), blank(), renderer)  # after V, a remembered walk still advances
    assert ev2.progress == {30: 1.0}


def test_a_camera_moved_off_the_centre_is_warped_through_rays_and_its_visible_fraction_rounded():
    r = RayWarpRecorder(valid_pixels=56)  # 56 / 168 of the band
    ev = walk()
    frame = blank()
    out = ev.draw(5, moved(0.5), frame, r)
    assert r.calls == 1
    assert ev.visible == {5: 0.333333}
    assert (out.reshape(-1, 4)[:56] == 200).all() and not out.reshape(-1, 4)[56:].any()
    assert not frame.any()


def test_a_camera_moved_by_one_nanometre_is_already_off_the_centre():
    r = RayWarpRecorder(valid_pixels=168)
    ev = walk()
    ev.draw(5, moved(1e-9), blank(), r)
    assert r.calls == 1 and ev.visible == {5: 1.0}


def test_the_visible_fraction_is_capped_at_one():
    r = RayWarpRecorder(valid_pixels=H * W)  # 960 pixels for a 168-pixel band
    ev = walk()
    ev.draw(5, moved(0.5), blank(), r)
    assert ev.visible == {5: 1.0}


def test_a_band_out_of_view_leaves_the_frame_untouched():
    r = RayWarpRecorder(valid_pixels=0)
    ev = walk()
    frame = blank()
    assert ev.draw(5, moved(0.5), frame, r) is frame
    assert ev.visible == {5: 0.0} and ev.progress == {5: 0.0}


def test_a_moved_camera_draws_the_layer_through_the_room_as_the_unmoved_one_does(renderer):
    """A camera moved by a hair takes the ray-map path, the unmoved one the homography: the same frame within the
    bilinear upsampling of the coarse maps. (The ray path once called the renderer's warp with hit points for maps
    and no window, and any moved camera crashed.)"""
    still, hair = walk(), walk()
    a = still.draw(12, np.eye(4), blank(), renderer)
    b = hair.draw(12, moved(1e-6), blank(), renderer)
    assert b.shape == (H, W, 4) and b.dtype == np.uint8
    assert still.visible == hair.visible == {12: 1.0}
    assert (a[..., 3] == 255).sum() > 0 and np.array_equal(a[..., 3], b[..., 3])  # the same pixels drawn
    diff = np.abs(a.astype(int) - b.astype(int)).max(axis=-1)
    assert diff[:, 2:].max() <= 2  # the outermost columns read the coarse maps' edge cells (extrapolated)


def test_a_camera_moved_far_back_sees_less_of_the_band(renderer):
    near, far = walk(), walk()
    back = np.eye(4)
    back[2, 3] = -0.5  # half a unit behind frame 0's centre: the room's far wall fills less of the view
    near.draw(12, moved(1e-6), blank(), renderer)
    out = far.draw(12, back, blank(), renderer)
    assert out.shape == (H, W, 4) and 0.0 < far.visible[12] <= near.visible[12]


# -- trace ----------------------------------------------------------------------------------------------------------
def test_the_trace_lists_every_frame_up_to_the_last_drawn_with_zero_for_frames_not_drawn():
    ev = walk(duration=3)
    ev.progress = {3: 1 / 3, 0: 0.0}
    ev.visible = {0: 1.0, 2: 0.5}
    tr = ev.trace()
    assert tr["progress"] == [0.0, 0.0, 0.0, 0.333333]
    assert tr["visible"] == [1.0, 0.0, 0.5, 0.0]


def test_the_trace_of_an_event_never_drawn_has_empty_lists():
    tr = walk().trace()
    assert tr["progress"] == [] and tr["visible"] == [] and tr["chunk_beliefs"] == []


def test_the_trace_records_the_geometry_and_the_start():
    ev = walk(start_frame=15)
    ev.observed, ev.belief = {2: True}, {2: 15}
    ev.begin_chunk([2])
    tr = ev.trace()
    assert {k: tr[k] for k in ("kind", "target", "start_frame", "starts_in_initial_hold", "duration_frames",
                               "leave_progress", "band_canvas", "chunk_beliefs")} == {
        "kind": "walk_off", "target": "cat", "start_frame": 15, "starts_in_initial_hold": True,
        "duration_frames": 8, "leave_progress": 0.285714, "band_canvas": [0, 6, 28, 12],
        "chunk_beliefs": [{"context_observers": [2], "walk_start": 15}]}


def test_a_walk_starting_exactly_at_the_end_of_the_initial_hold_does_not_start_in_it():
    assert walk(start_frame=16).trace()["starts_in_initial_hold"] is False


# -- the event of a case --------------------------------------------------------------------------------------------
def questions() -> list[Question]:
    return [Question(aspect=ASPECTS[i // 2], question=q, answer="yes") for i, q in enumerate(WALK_OFF_PREDICATES)]


def make_case(tmp_path, image: np.ndarray, polygons: list[list[list[float]]], family: str = "dynamic",
              event: bool = True) -> Case:
    png = tmp_path / "image.png"
    cv2.imwrite(str(png), image)
    objects = [ObjectTarget(id=f"obj{i}", name=f"object {i}", box=[0, 0, 1, 1], polygon=p)
               for i, p in enumerate(polygons)]
    ev = Event(initial_state="lying", action="walks off", expected_next_state="gone", questions=questions())
    return Case(id="walk", family=family, image=str(png), prompt="a cat", targets=Targets(objects=objects),
                event=ev if event else None, unannotated=not event)


EVENT_PHASES = {"V": (0, 100), "D1": (100, 140), "R1": (140, 180), "H": (180, 200)}
RECT = [[1, 1], [3, 1], [3, 2], [1, 2]]  # rows 1..2, columns 1..3


def test_a_case_of_another_family_has_no_event(tmp_path):
    case = make_case(tmp_path, np.zeros((4, 6, 3), np.uint8), [RECT], family="object")
    assert event_for(case, np.zeros((4, 6, 3), np.uint8), EVENT_PHASES, (1, "walk", "lrlr")) is None


def test_a_dynamic_case_without_an_event_has_no_event(tmp_path):
    case = make_case(tmp_path, np.zeros((4, 6, 3), np.uint8), [RECT], event=False)
    assert event_for(case, np.zeros((4, 6, 3), np.uint8), EVENT_PHASES, (1, "walk", "lrlr")) is None


def test_a_dynamic_case_without_an_object_has_no_event(tmp_path):
    case = make_case(tmp_path, np.zeros((4, 6, 3), np.uint8), [])
    assert event_for(case, np.zeros((4, 6, 3), np.uint8), EVENT_PHASES, (1, "walk", "lrlr")) is None


def test_the_event_walks_the_first_object_with_its_mask_at_the_canvas_size(tmp_path):
    other = [[4, 0], [5, 0], [5, 3], [4, 3]]
    case = make_case(tmp_path, np.zeros((4, 6, 3), np.uint8), [RECT, other])
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    ev = event_for(case, img, EVENT_PHASES, (1, "walk", "lrlr"))
    assert isinstance(ev, WalkOffEvent) and ev.target == "obj0"
    expected = np.zeros((4, 6), bool)
    expected[1:3, 1:4] = True
    np.testing.assert_array_equal(ev.mask, expected)
    np.testing.assert_array_equal(ev.canvas, img)
    assert ev.phases == EVENT_PHASES and ev.phases is not EVENT_PHASES


def test_the_mask_keeps_canvas_pixels_more_than_half_covered(tmp_path):
    case = make_case(tmp_path, np.zeros((4, 4, 3), np.uint8), [[[0, 0], [1, 0], [1, 3], [0, 3]]])  # left half
    ev = event_for(case, np.zeros((5, 5, 3), np.uint8), EVENT_PHASES, (1, "walk", "lrlr"))
    # resized to 5 x 5, the middle column reads 127 (rows 0, 1, 3, 4) and 128 (row 2)
    expected = np.zeros((5, 5), bool)
    expected[:, :2] = True
    expected[2, 2] = True
    np.testing.assert_array_equal(ev.mask, expected)


def test_the_walk_takes_until_the_first_return_and_at_least_eight_frames(tmp_path):
    case = make_case(tmp_path, np.zeros((4, 6, 3), np.uint8), [RECT])
    img = np.zeros((4, 6, 3), np.uint8)
    assert event_for(case, img, EVENT_PHASES, (1,)).duration == 40
    assert event_for(case, img, {**EVENT_PHASES, "R1": (104, 120)}, (1,)).duration == 8
    assert event_for(case, img, {"V": (0, 100), "H": (100, 120)}, (1,)).duration == 8  # no return: the minimum


def test_the_walk_starts_within_thirty_percent_of_the_end_of_the_initial_hold_seeded_by_the_item(tmp_path):
    case = make_case(tmp_path, np.zeros((4, 6, 3), np.uint8), [RECT])
    img = np.zeros((4, 6, 3), np.uint8)
    starts = [event_for(case, img, EVENT_PHASES, (s, "walk", "lrlr")).start_frame for s in range(12)]
    assert all(70 <= s <= 130 for s in starts)
    assert len(set(starts)) > 6
    again = [event_for(case, img, EVENT_PHASES, (s, "walk", "lrlr")).start_frame for s in range(12)]
    assert again == starts


# -- ground truth ---------------------------------------------------------------------------------------------------
#: V = [0, 8), R1 = [16, 24), 32 frames, a walk of 8 frames.
GT_PHASES = {"V": (0, 8), "D1": (8, 16), "R1": (16, 24), "H": (24, 32)}
ALL = [{"question": q} for q in WALK_OFF_PREDICATES]


def judge(points: dict[int, float], frames: list[int], visible: dict[int, float] | None = None,
          leave: float = 0.4, questions: list | None = None) -> dict:
    """Ground truth of a 32-frame trace: progress ``points`` (others 0), visible 1 unless ``visible`` says."""
    p = [points.get(t, 0.0) for t in range(32)]
    v = [(visible or {}).get(t, 1.0) for t in range(32)]
    tr = {"progress": p, "visible": v, "duration_frames": 8, "leave_progress": leave}
    return ground_truth(tr, GT_PHASES, frames, ALL if questions is None else questions)


def answers(*args, **kwargs) -> dict[str, str]:
    gt = judge(*args, **kwargs)
    return dict(zip(gt["predicates"], gt["answers"]))


def test_answers_and_predicates_follow_the_order_of_the_questions():
    gt = judge({}, [0, 16, 31], questions=ALL[::-1])
    assert gt["predicates"] == ["second_cat", "walks_continuously", "final_lying", "final_spot_empty", "same_rug",
                                "reappears_lying", "lying_at_return", "moved_at_return"]
    assert gt["answers"] == ["no", "no", "yes", "no", "yes", "yes", "yes", "no"]


def test_one_unknown_question_among_known_ones_gives_no_ground_truth():
    assert judge({}, [0, 31], questions=ALL[:7] + [{"question": "Is it raining?"}]) is None


def test_the_rug_is_always_the_same_and_there_is_never_a_second_cat():
    a = answers({4: 0.5, 8: 1.0, 16: 1.0, 31: 1.0}, [0, 4, 8, 16, 31])
    assert a["same_rug"] == "yes" and a["second_cat"] == "no"


def test_a_frame_shows_the_event_when_exactly_half_its_band_is_in_view():
    a = answers({16: 0.5}, [0, 16, 31], visible={16: 0.5})
    assert a["moved_at_return"] == "yes" and a["lying_at_return"] == "no"


def test_without_a_seen_frame_in_the_first_return_neither_return_answer_is_yes():
    a = answers({16: 0.5}, [0, 16, 31], visible={16: 0.49})
    assert a["moved_at_return"] == "no" and a["lying_at_return"] == "no"
    b = answers({}, [0, 8, 31])  # no judged frame in R1 at all
    assert b["moved_at_return"] == "no" and b["lying_at_return"] == "no"


def test_the_return_is_the_last_seen_frame_of_the_first_return():
    a = answers({20: 0.5}, [0, 16, 20, 24, 31])  # 16: lying, 20: moved, 24 is already past R1
    assert a["moved_at_return"] == "yes" and a["lying_at_return"] == "no"
    b = answers({16: 0.5}, [0, 16, 24, 31])  # 24 (lying) is not in R1 = [16, 24)
    assert b["moved_at_return"] == "yes" and b["lying_at_return"] == "no"


def test_a_return_at_rest_is_lying_and_not_moved():
    a = answers({}, [0, 16, 31])
    assert a["moved_at_return"] == "no" and a["lying_at_return"] == "yes"


def test_a_return_just_started_is_moved():
    a = answers({8: 0.25, 16: 0.25}, [0, 8, 16, 31])
    assert a["moved_at_return"] == "yes"


def test_reappearing_lying_counts_from_the_first_frame_of_the_return():
    a = answers({20: 0.5, 24: 0.5, 31: 0.5}, [0, 16, 20, 24, 31])
    assert a["reappears_lying"] == "yes"
    b = answers({16: 0.5, 20: 0.5, 24: 0.5, 31: 0.5}, [0, 8, 16, 20, 24, 31])
    assert b["reappears_lying"] == "no"


def test_the_final_answers_read_the_last_judged_frame_even_out_of_view():
    a = answers({16: 1.0, 31: 0.4}, [0, 16, 31], visible={31: 0.0})
    assert a["final_spot_empty"] == "yes" and a["final_lying"] == "no"
    b = answers({16: 1.0, 31: 0.399999}, [0, 16, 31])
    assert b["final_spot_empty"] == "no" and b["final_lying"] == "no"
    c = answers({16: 1.0, 24: 1.0}, [0, 16, 24, 31])
    assert c["final_spot_empty"] == "no" and c["final_lying"] == "yes"


def test_the_event_started_when_a_seen_frame_of_the_initial_hold_shows_progress():
    assert judge({4: 0.25}, [0, 4, 31])["started"] is True
    assert judge({}, [0, 4, 31])["started"] is False
    assert judge({8: 0.25}, [0, 8, 31])["started"] is False  # 8 is past V = [0, 8)
    assert judge({4: 0.25}, [0, 4, 31], visible={4: 0.0})["started"] is False


def test_progress_on_the_first_frame_of_the_initial_hold_counts_as_started():
    assert judge({0: 0.5}, [0, 16, 31])["started"] is True


def test_a_walk_at_exactly_its_speed_between_seen_frames_is_continuous():
    a = answers({4: 0.500001, 8: 1.0, 16: 1.0, 31: 1.0}, [0, 4, 8, 16, 31])
    assert a["walks_continuously"] == "yes"


def test_a_walk_that_pauses_between_seen_frames_is_continuous():
    a = answers({4: 0.5, 8: 0.5, 16: 0.5, 31: 0.5}, [0, 4, 8, 16, 31])
    assert a["walks_continuously"] == "yes"


def test_a_jump_faster_than_the_walk_is_a_teleport():
    a = answers({8: 1.0, 16: 1.0, 31: 1.0}, [0, 4, 8, 16, 31])  # 0 -> 1 in 4 frames of an 8-frame walk
    assert a["walks_continuously"] == "no"


def test_a_jump_on_the_last_step_is_a_teleport():
    a = answers({2: 0.25, 4: 0.5, 6: 1.0}, [0, 2, 4, 6])
    assert a["walks_continuously"] == "no"


def test_a_jump_on_the_first_step_is_a_teleport_even_when_two_steps_together_are_slow_enough():
    a = answers({2: 0.5, 4: 0.5}, [0, 2, 4])
    assert a["walks_continuously"] == "no"


def test_a_walk_that_goes_back_is_not_continuous():
    a = answers({4: 0.5, 8: 0.25}, [0, 4, 8])
    assert a["walks_continuously"] == "no"


def test_a_walk_never_seen_moving_does_not_walk():
    assert answers({}, [0, 16, 31])["walks_continuously"] == "no"
    assert answers({12: 0.5}, [0, 12, 31], visible={12: 0.0})["walks_continuously"] == "no"
