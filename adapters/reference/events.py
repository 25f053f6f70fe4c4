"""A procedural dynamic event for the reference world model, with its exact ground truth.

Dynamic cases (``family: dynamic``) whose event has an object target get a *walk-off* event: the target (the
demo's cat) starts walking to the left during the initial hold and keeps walking while the camera looks away,
until it has left its spot. The event is drawn as a layer on the world-fixed surface the conditioning image shows
(frame-0 canvas pixels warped into every frame exactly like the renderer's own sources), so it is visible only
where the camera looks.

Memory rule (what makes the context policy matter): the event's state lives only in the latents that *observed*
the target's spot (at least half of its band in view at the latent's anchor frame). Each chunk reads the walk's
start time from the most recent admitted observer latent; when the admitted context holds no observation of the
running walk (e.g. Sliding after a long departure: its sink saw the cat lying, its recent window saw only the away
views) the model has forgotten the event and resets it to the initial state. The prompt's action is enacted only
during the initial hold (``V``), so a forgotten walk never restarts.

The walk's start frame is seeded from the item identity ``(seed, case, trajectory)`` (never from the policy), in
``[0.7, 1.3) x`` the end of ``V``: on some items the walk starts after the initial hold and the event-start gate is
negative, as for real models.

Everything the judge can be asked is therefore known exactly: :func:`ground_truth` turns the recorded per-frame
state into the start-gate decision and the true answers to the demo case's eight questions, as seen in the frames
the judge receives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

#: The demo case's eight questions (``harness/data/demo_cases/dynamic_cat.yaml``, in order) -> the predicate of
#: :func:`ground_truth` that answers each one for the walk-off event.
WALK_OFF_PREDICATES = {
    "When the camera returns, has the cat moved from where it was lying?": "moved_at_return",
    "When the camera returns, is the cat still lying in its initial pose?": "lying_at_return",
    "After the return, does the cat reappear lying in its starting spot?": "reappears_lying",
    "Does the rug stay the same rug throughout the video?": "same_rug",
    "In the final hold, is the rug empty where the cat was lying?": "final_spot_empty",
    "In the final hold, is the cat lying on the rug facing the camera?": "final_lying",
    "Does the cat move by walking rather than teleporting?": "walks_continuously",
    "Does a second cat appear in the cat's place?": "second_cat",
}
VISIBLE = 0.5  # fraction of the target's band in view for a frame to show the event


@dataclass
class WalkOffEvent:
    """The walk-off event of one rollout (see the module docstring).

    Args:
        canvas: (H, W, 3) uint8 conditioning frame at the canvas size (frame 0).
        mask: (H, W) bool target mask in canvas pixels at frame 0.
        phases: the item's phases (``V``, ``D1``, ``R1``, ..., ``H``), half-open frame ranges.
        start_frame: frame at which the walk starts (may lie after ``V``: then it never starts).
        duration: frames the walk takes from its spot until it is out of the frame-0 view (progress 1).
    """

    canvas: np.ndarray
    mask: np.ndarray
    phases: dict[str, Sequence[int]]
    start_frame: int
    duration: int
    target: str = "target"
    progress: dict[int, float] = field(default_factory=dict)  # frame -> drawn progress in [0, 1]
    visible: dict[int, float] = field(default_factory=dict)  # frame -> fraction of the band in view
    observed: dict[int, bool] = field(default_factory=dict)  # latent -> observed the spot at its anchor frame
    belief: dict[int, Optional[int]] = field(default_factory=dict)  # latent -> walk start it rendered (None: lying)
    chunk_beliefs: list[dict[str, Any]] = field(default_factory=list)
    _walk_start: Optional[int] = None

    def __post_init__(self) -> None:
        import cv2

        ys, xs = np.nonzero(self.mask)
        if len(ys) == 0:
            raise ValueError("walk-off event: the target mask is empty at the canvas size")
        self.y0, self.y1 = int(ys.min()), int(ys.max()) + 1
        self.x0, self.x1 = int(xs.min()), int(xs.max()) + 1
        # The spot without the target: inpainted from its surroundings (deterministic).
        hole = cv2.dilate(self.mask.astype(np.uint8) * 255, np.ones((5, 5), np.uint8))
        self.plate = cv2.inpaint(np.ascontiguousarray(self.canvas), hole, 5, cv2.INPAINT_TELEA)
        self.plate[~self.mask] = self.canvas[~self.mask]  # only the target's own pixels change: at rest = frame 0
        self.leave_progress = (self.x1 - self.x0) / float(self.x1)  # shift >= box width: the spot is empty
        self.band_area = float((self.y1 - self.y0) * self.x1)
        self._layers: dict[int, np.ndarray] = {}
        self.v_end = int(self.phases["V"][1])

    # -- state ---------------------------------------------------------------------------------------------------
    def progress_at(self, t: int) -> float:
        if self._walk_start is None:
            return 0.0
        return float(np.clip((t - self._walk_start) / float(self.duration), 0.0, 1.0))

    def begin_chunk(self, context: Sequence[int]) -> None:
        """Read the walk's state from the most recent admitted latent that observed the spot."""
        obs = [int(i) for i in context if self.observed.get(int(i))]
        self._walk_start = self.belief[max(obs)] if obs else None
        self.chunk_beliefs.append({"context_observers": obs, "walk_start": self._walk_start})

    def end_latent(self, latent: int, anchor_frame: int) -> None:
        self.observed[int(latent)] = self.visible.get(int(anchor_frame), 0.0) >= VISIBLE
        self.belief[int(latent)] = self._walk_start

    # -- drawing -------------------------------------------------------------------------------------------------
    def _layer(self, p: float) -> tuple[int, np.ndarray]:
        """RGBA (H, W, 4) layer in frame-0 canvas pixels: the band ``[y0, y1) x [0, x1)`` with the target shifted
        left by ``p * x1`` pixels over the empty plate; alpha 255 on the band, 0 elsewhere."""
        dx = int(round(p * self.x1))
        if dx not in self._layers:
            h, w = self.mask.shape
            layer = np.zeros((h, w, 4), np.uint8)
            band = (slice(self.y0, self.y1), slice(0, self.x1))
            layer[band + (slice(0, 3),)] = self.plate[band]
            ys, xs = np.nonzero(self.mask)
            keep = xs - dx >= 0
            layer[ys[keep], xs[keep] - dx, :3] = self.canvas[ys[keep], xs[keep]]
            layer[band + (3,)] = 255
            self._layers[dx] = layer
        return dx, self._layers[dx]

    def draw(self, t: int, c2w_t: np.ndarray, frame: np.ndarray, renderer: Any) -> np.ndarray:
        """Frame ``t`` (H, W, 4) uint8 with the event layer at the current state where the band is in view."""
        import cv2

        if t == 0 and self._walk_start is None:
            self.progress[0], self.visible[0] = 0.0, 1.0  # the conditioning frame is the initial state
            return frame
        if self._walk_start is None and self.start_frame <= t < self.v_end:
            self._walk_start = int(self.start_frame)  # the action happens during the initial hold only
        p = self.progress_at(t)
        _, layer = self._layer(p)
        if np.linalg.norm(c2w_t[:3, 3]) < 1e-9:
            M = renderer.K_cv @ c2w_t[:3, :3] @ renderer.K_cv_inv  # target -> frame-0 homography (same centre)
            warped, valid = renderer._warp_rotation(M, layer)
        else:  # the layer is drawn on frame 0's canvas: frame 0's camera is the source of the ray maps
            whole = (slice(0, renderer.h), slice(0, renderer.w))
            block = renderer._coarse_block(0, 0, renderer.w, renderer.h)
            maps = renderer._coarse_maps(renderer.coarse_hit_points(c2w_t)[block], np.eye(4))
            warped, valid = renderer._warp_rays(maps, block, layer, whole)
        n = cv2.countNonZero(valid)
        self.progress[int(t)] = p
        self.visible[int(t)] = round(min(1.0, n / self.band_area), 6)
        if n:
            frame = frame.copy()
            cv2.copyTo(warped, valid, frame)
        return frame

    def trace(self) -> dict[str, Any]:
        """JSON-ready record of the event (stored in ``meta.json`` under ``generation.dynamic_event``)."""
        T = max(self.progress) + 1 if self.progress else 0
        return {
            "kind": "walk_off",
            "target": self.target,
            "start_frame": int(self.start_frame),
            "starts_in_initial_hold": bool(self.start_frame < self.v_end),
            "duration_frames": int(self.duration),
            "leave_progress": round(self.leave_progress, 6),
            "band_canvas": [0, self.y0, self.x1, self.y1],
            "progress": [round(self.progress.get(t, 0.0), 6) for t in range(T)],
            "visible": [self.visible.get(t, 0.0) for t in range(T)],
            "chunk_beliefs": self.chunk_beliefs,
            "memory_rule": "each chunk reads the walk from the most recent admitted latent that observed the spot; "
                           "none -> reset to the initial state; the walk starts only during V",
        }


def event_for(case: Any, canvas: np.ndarray, phases: Mapping[str, Sequence[int]], seed_parts: tuple[Any, ...]
              ) -> Optional[WalkOffEvent]:
    """The walk-off event of a dynamic case with an object target (its first object), else None."""
    from harness.imaging import resize_cover_crop

    from .model import stable_seed

    if getattr(case, "family", None) != "dynamic" or case.event is None or not case.targets.objects:
        return None
    obj = case.targets.objects[0]
    img = case.load_image()
    m = case.object_mask(obj, img.shape[0], img.shape[1])
    mask = resize_cover_crop(m.astype(np.uint8) * 255, canvas.shape[:2]) > 127
    v_end = int(phases["V"][1])
    u = np.random.default_rng(stable_seed(*seed_parts, "event")).uniform(0.7, 1.3)
    start = int(round(u * v_end))
    r1 = phases.get("R1", phases["V"])
    duration = max(8, int(r1[0]) - v_end)  # out of its spot by the first return when remembered
    return WalkOffEvent(np.asarray(canvas), mask, dict(phases), start, duration, target=obj.id)


def ground_truth(trace: dict[str, Any], phases: Mapping[str, Sequence[int]], frames: Sequence[int],
                 questions: Sequence[Any]) -> Optional[dict[str, Any]]:
    """Correct start-gate decision and answers for ``questions`` as seen in the judged ``frames``.

    Args:
        trace: :meth:`WalkOffEvent.trace` (``meta.json`` ``generation.dynamic_event``).
        phases: the item's phases. frames: the frame indices the judge sees (stride 8 + first + last).
        questions: the case's eight questions (objects with ``.question`` or mappings with ``"question"``).
    Returns:
        ``{"started": bool, "answers": ["yes"|"no"] * 8, "predicates": [...]}``, or None when a question is not
        one of :data:`WALK_OFF_PREDICATES` (no ground truth for it).
    """
    texts = [q["question"] if isinstance(q, dict) else q.question for q in questions]
    if any(t not in WALK_OFF_PREDICATES for t in texts):
        return None
    p, vis = trace["progress"], trace["visible"]
    dur, leave = float(trace["duration_frames"]), float(trace["leave_progress"])
    seen = [int(t) for t in frames if vis[int(t)] >= VISIBLE]
    v0, v1 = phases["V"]
    r0, r1 = phases["R1"]
    in_v = [t for t in seen if v0 <= t < v1]
    at_r1 = [t for t in seen if r0 <= t < r1]
    after = [t for t in seen if t >= r0]
    ret = at_r1[-1] if at_r1 else None
    last = int(frames[-1])
    steps = list(zip(seen[:-1], seen[1:]))
    continuous = all(0.0 <= p[b] - p[a] <= (b - a) / dur + 1e-6 for a, b in steps)
    truth = {
        "moved_at_return": ret is not None and p[ret] > 0,
        "lying_at_return": ret is not None and p[ret] == 0,
        "reappears_lying": any(p[t] == 0 for t in after),
        "same_rug": True,  # the plate under the target is the conditioning image's, whatever the policy
        "final_spot_empty": p[last] >= leave,
        "final_lying": p[last] == 0,
        "walks_continuously": max(p[t] for t in seen) > 0 and continuous,
        "second_cat": False,  # the layer draws exactly one target over the whole band
    }
    preds = [WALK_OFF_PREDICATES[t] for t in texts]
    return {"started": any(p[t] > 0 for t in in_v), "answers": ["yes" if truth[k] else "no" for k in preds],
            "predicates": preds}
