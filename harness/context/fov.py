"""Field-of-view overlap between cameras, the score behind FoV retrieval.

Monte-Carlo estimator in the spirit of HY-WorldPlay's ``calculate_fov_overlap_similarity``
(Tencent-Hunyuan/HY-WorldPlay@da2d0c2 hyvideo/utils/retrieval_context.py), with two deliberate differences:
the visibility test is a true pinhole frustum test with the *actual* intrinsics (principal point included)
instead of yaw/pitch boxes, and the point sampler is seeded (upstream draws from the unseeded global RNG).

Definition, for a query camera ``q`` and a history camera ``h``:

* ``P``: ``num_points`` points uniform in a ball of radius ``radius`` (scene units) around ``q``'s centre, drawn
  once from ``numpy.random.default_rng(seed)`` in ``q``'s camera frame (so the set moves with ``q``);
* ``p`` is visible from a camera if, in that camera's frame, ``z > near``, ``‖p - c‖ < radius`` and its
  projection ``K p / z`` falls inside the ``width`` x ``height`` image;
* ``overlap(q, h) = |vis_q ∩ vis_h| / |vis_q|``.

The chunk score is the mean of ``overlap(q, h)`` over every (query latent, history latent) pair.

Poses follow :mod:`trajectories.conventions`: OpenCV camera-to-world 4x4, +x right / +y down / +z forward.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, StrictInt
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError, UserError
from harness.sections import Fix, Number, Section


class ContextConfigError(ConfigError):
    """A bad ``context`` setting (a user error: exit code 2). Defined here, the lowest module of the package, so the
    estimator's settings raise it too; :mod:`harness.context.policies` re-exports it."""


#: the estimator's bounds, in one message (any of them out of range)
_LIMITS = Fix("context.fov: need num_points >= 16, radius > 0 and near > 0", whole=True)


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class FovScoreConfig(Section):
    """Settings of the FoV overlap estimator (``context.fov``).

    num_points: Monte-Carlo points per query camera (>= 16). radius: ball radius in scene units, > 0 (match the
    scene scale; HY-WorldPlay uses 8 units with its 0.08-unit steps). near: near-plane distance, > 0. seed: the
    sampler's seed.
    """

    section: ClassVar[str] = "context.fov"
    error: ClassVar[type[UserError]] = ContextConfigError
    noun: ClassVar[str] = "field"

    num_points: Annotated[StrictInt, Field(ge=16), _LIMITS] = 4096
    radius: Annotated[Number, Field(gt=0), _LIMITS] = 8.0
    near: Annotated[Number, Field(gt=0), _LIMITS] = 0.05
    seed: Annotated[StrictInt, Fix("give an integer")] = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class FovOverlap:
    """Seeded Monte-Carlo FoV overlap for one intrinsics / image size (see the module docstring)."""

    def __init__(self, K: np.ndarray, height: int, width: int, cfg: FovScoreConfig = FovScoreConfig()):
        self.K = np.asarray(K, dtype=np.float64)
        self.height, self.width, self.cfg = int(height), int(width), cfg
        rng = np.random.default_rng(cfg.seed)
        d = rng.normal(size=(cfg.num_points, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        r = cfg.radius * rng.random(cfg.num_points) ** (1.0 / 3.0)  # uniform in the ball
        self._local = d * r[:, None]

    def visible(self, c2w: np.ndarray, points_world: np.ndarray) -> np.ndarray:
        """Boolean (N,) visibility of world points from camera ``c2w`` (OpenCV c2w 4x4)."""
        R, t = c2w[:3, :3], c2w[:3, 3]
        pc = (points_world - t) @ R  # R^T (p - t), row-vector form
        z = pc[:, 2]
        ok = (z > self.cfg.near) & (np.linalg.norm(pc, axis=1) < self.cfg.radius)
        zs = np.where(ok, z, 1.0)
        u = self.K[0, 0] * pc[:, 0] / zs + self.K[0, 2]
        v = self.K[1, 1] * pc[:, 1] / zs + self.K[1, 2]
        seen: np.ndarray = ok & (u >= 0) & (u < self.width) & (v >= 0) & (v < self.height)
        return seen

    def pair(self, q_c2w: np.ndarray, h_c2w: np.ndarray) -> float:
        """``|vis_q ∩ vis_h| / |vis_q|`` for one query and one history camera."""
        pts = self._local @ q_c2w[:3, :3].T + q_c2w[:3, 3]
        vq = self.visible(q_c2w, pts)
        n = int(vq.sum())
        if n == 0:
            return 0.0
        return float((vq & self.visible(h_c2w, pts)).sum()) / n

    def overlap_matrix(self, query_c2w: np.ndarray, hist_c2w: np.ndarray) -> np.ndarray:
        """(Q, M) matrix of ``overlap(q, h)`` for query cameras (Q,4,4) and history cameras (M,4,4), batched."""
        hist_c2w = np.asarray(hist_c2w, dtype=np.float64)
        Rh, th = hist_c2w[:, :3, :3], hist_c2w[:, :3, 3]
        out = np.zeros((len(query_c2w), len(hist_c2w)))
        for i, q in enumerate(np.asarray(query_c2w, dtype=np.float64)):
            pts = self._local @ q[:3, :3].T + q[:3, 3]
            vq = self.visible(q, pts)
            n = int(vq.sum())
            if n == 0 or len(hist_c2w) == 0:
                continue
            p = pts[vq]
            pc = np.einsum("mji,mnj->mni", Rh, p[None] - th[:, None])  # R_h^T (p - t_h) for every h
            z = pc[..., 2]
            ok = (z > self.cfg.near) & (np.linalg.norm(pc, axis=-1) < self.cfg.radius)
            zs = np.where(ok, z, 1.0)
            u = self.K[0, 0] * pc[..., 0] / zs + self.K[0, 2]
            v = self.K[1, 1] * pc[..., 1] / zs + self.K[1, 2]
            vis = ok & (u >= 0) & (u < self.width) & (v >= 0) & (v < self.height)
            out[i] = vis.sum(axis=1) / n
        return out
