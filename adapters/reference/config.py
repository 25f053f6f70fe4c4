"""Typed config of the reference world model (``conf/model/reference.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapters.base import ModelConfig, ModelConfigError


@dataclass(frozen=True, kw_only=True)
class ReferenceConfig(ModelConfig):
    """Reference-model settings on top of :class:`adapters.base.ModelConfig`.

    room: half-extents of the world-fixed box the model renders (scene units): ``x``, ``up``, ``down``,
    ``front``, ``back``. The square trajectory's side must stay inside it.
    """

    room: dict[str, float] = field(default_factory=lambda: {"x": 4.0, "up": 2.0, "down": 1.0, "front": 4.0, "back": 4.0})

    def validate(self) -> None:
        super().validate()
        bad = set(self.room) - {"x", "up", "down", "front", "back"}
        if bad or any(float(v) <= 0 for v in self.room.values()):
            raise ModelConfigError(
                f"model.room={self.room}: give positive half-extents for keys x, up, down, front, back"
            )

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict()
