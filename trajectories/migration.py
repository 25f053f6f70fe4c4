"""Trajectory layouts the harness has replaced: an item made with one is stale, redone by a rerun, never scored.

An item's ``meta.json`` records the trajectory spec that made it (``TrajectorySpec.to_dict()``, key
``trajectory``). When a release preset's layout changes, the spec it recorded is listed here with the reason; then

- a rerun of the run's command redoes the item (:mod:`harness.app.runner`: it is neither skipped as done nor a
  reason to refuse the run, as another config change would be),
- the evaluation refuses to score it and says to rerun (:func:`harness.outputs.item_problems`), and a report
  leaves its old scores out (:mod:`evaluate.reporting.collect`),

so a study never mixes videos of two layouts under one trajectory name. The specs are the dicts the harness wrote,
kept verbatim (not rebuilt from today's code, whose dicts may differ).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

_OLD_TIMING = {"away_hold": 0.04, "final_hold": 0.1, "initial_hold": 0.08, "move": 0.13, "revisit_hold": 0.06}


def _rotation(name: str, cycles: list[str], dpf: float, profile: str) -> dict[str, Any]:
    """A rotation preset's dict as the harness before the paper-count presets wrote it (90-degree sweeps, no holds)."""
    return {"cycles": cycles, "deg_per_frame": dpf, "hold_frames": {"away": 0, "initial": 0, "revisit": 0},
            "kind": "rotation", "name": name, "pitch_deg": 90.0, "profile": profile, "release": name, "side": 1.0,
            "timing": dict(_OLD_TIMING), "yaw_deg": 90.0}


_LRLRLR = ("layout of 6 x 90 deg at 1 deg/frame (540 frames of motion, run at 541-589 frames per model), which fits "
           "none of the paper's frame counts; today: 6 x 80 deg, 480 frames of motion at every model's own count")
_LR_HOLD = ("layout without an initial hold (the sweep started at frame 0), so the judge's event-start gate had no "
            "initial hold to look at; today: a 60-frame initial hold, then the 360 frames of motion")
_SQUARE = ("layout of the harness's `square` on normalised time (eased legs, holds at the start and end), which "
           "fits no stated count; today: four 120-frame legs from frame 0 at a constant speed")

#: (the spec dict an item recorded, why it is stale). Both profiles of the rotation presets: `profile=cosine` was a
#: documented override of the same layout.
SUPERSEDED: tuple[tuple[dict[str, Any], str], ...] = (
    *((_rotation("lrlrlr_sym_1dpf", ["left", "left", "left"], 1.0, p), _LRLRLR) for p in ("constant", "cosine")),
    *((_rotation("lr_hold_sym_0p5dpf", ["left"], 0.5, p), _LR_HOLD) for p in ("constant", "cosine")),
    ({"cycles": ["left", "left"], "kind": "square", "name": "translate_square", "pitch_deg": 60.0, "side": 1.0,
      "timing": {**_OLD_TIMING, "move": 0.16}, "yaw_deg": 90.0}, _SQUARE),
)

_CANONICAL = {json.dumps(spec, sort_keys=True): why for spec, why in SUPERSEDED}


def superseded_layout(recorded: Any) -> Optional[str]:
    """Why the trajectory spec an item recorded (``meta.json``'s ``trajectory``) is a replaced layout of a release
    preset, naming the preset; None for any other value (a current spec, a spec of the user's, a missing one)."""
    if not isinstance(recorded, Mapping):
        return None
    try:
        why = _CANONICAL.get(json.dumps(dict(recorded), sort_keys=True))
    except (TypeError, ValueError):
        return None
    return None if why is None else f"made with the superseded {recorded.get('name')} {why}"


def superseded_item(meta: Any) -> Optional[str]:
    """:func:`superseded_layout` of an item's ``meta.json`` (None when it is not a mapping)."""
    return superseded_layout(meta.get("trajectory")) if isinstance(meta, Mapping) else None


#: The trajectory names whose old layouts are listed (a reader may skip the check for any other name).
SUPERSEDED_NAMES = frozenset(str(spec["name"]) for spec, _ in SUPERSEDED)
