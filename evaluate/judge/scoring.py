"""Scoring one item with the checklist judge: :func:`score_item` (typed inputs) and :func:`judge_item` (an item
folder), their "not computed" entries, and the settings recorded with each metric.

The metric ids written (:data:`METRICS`) are the dynamic family's in the metric registry (:mod:`evaluate.catalog`);
their specs are declared in :mod:`evaluate.families.dynamic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.cases import ASPECTS  # the case schema owns the four aspects

from ..results import BackboneKind, Entries, MetricEntry, entries
from .client import JudgeSession, Verdict, session_for
from .prompt import JudgeInput, JudgeInputError, event_dict
from .settings import JudgeSettings

#: Metric ids this module writes (per item; run tables average them: mean of ``started`` = p_start, of
#: ``overall`` = S_gated, of ``conditional`` (started items only) = S_cond), one per aspect of the checklist. The
#: registry's dynamic family declares the same ids (tests/evaluate/test_registry.py holds them equal); they are
#: spelled here rather than read from :mod:`evaluate.catalog` so the judge does not import the registry that imports it.
METRICS = ("dynamic.overall", "dynamic.started", "dynamic.conditional") + tuple(f"dynamic.{a}" for a in ASPECTS)


def _entry(metric: str, label: str, value: float, **extra: Any) -> tuple[str, MetricEntry]:
    e = MetricEntry.computed(metric, label, BackboneKind.JUDGE, value, **extra)
    return e.key, e


def recorded_settings(settings: JudgeSettings, fallbacks: dict[str, str] | None = None) -> dict[str, Any]:
    """The judge settings recorded with each metric: the configured ones plus ``fallbacks`` (request field the
    server refused -> what was sent instead; empty when the request went as configured)."""
    return {**settings.to_dict(), "fallbacks": dict(fallbacks or {})}


def not_computed(settings: JudgeSettings, reason: str, retryable: bool,
                 fallbacks: dict[str, str] | None = None) -> Entries:
    """Every dynamic metric of an item as "not computed" with ``reason``; ``retryable`` items are re-judged by the
    next run even when nothing else changed."""
    label = settings.model
    return entries(*(MetricEntry.unavailable(m, label, reason, retryable=bool(retryable),
                                             judge={"settings": recorded_settings(settings, fallbacks)})
                     for m in METRICS))


def score_item(inp: JudgeInput, settings: JudgeSettings, item_dir: Path,
               session: JudgeSession | None = None) -> Entries:
    """Judge one video and score its checklist.

    Args:
        inp: frames at the judged indices, phases, fps and the case's event (with its frozen reference answers).
        settings: the judge settings. item_dir: the item folder; requests and replies go to ``item_dir/judge/``.
        session: the run's session (default: the current one for ``settings``).
    Returns:
        ``{"dynamic.<metric>[<model>]": entry}`` for :data:`METRICS`; not started -> every gated score 0 and
        ``conditional`` not computed (S_cond averages started videos only).
    """
    session = session or session_for(settings)
    try:
        inp.validate()
    except JudgeInputError as exc:
        return not_computed(settings, f"cannot judge this item: {exc}", retryable=False)
    return _scored(session.judge(inp, Path(item_dir)), inp.frame_indices, inp.event, settings)


def _scored(v: Verdict, frame_indices: Sequence[int], event: Mapping[str, Any], settings: JudgeSettings) -> Entries:
    """The entries of :func:`score_item` from the server's verdict on one item."""
    from evaluate.dynamic import score_checklist

    if not v.ok:
        return not_computed(settings, v.reason, v.retryable, v.fallbacks)
    refs = list(event["questions"])
    sc = score_checklist(v.started, v.answers, refs)
    record = {"settings": recorded_settings(settings, v.fallbacks), "server_model": v.server_model,
              "request_key": v.key,
              "cached": v.cached, "repaired": v.repaired, "frames": [int(t) for t in frame_indices]}
    common = {"started": v.started, "answers": v.answers, "references": [q["answer"] for q in refs],
              "items": sc["items"], "judge": record}
    label = settings.model
    out = dict([_entry("dynamic.overall", label, sc["overall"], **common),
                _entry("dynamic.started", label, 1.0 if v.started else 0.0, judge=record)])
    for aspect in ASPECTS:
        k, e = _entry(f"dynamic.{aspect}", label, sc[aspect], judge=record)
        out[k] = e
    if v.started:
        k, e = _entry("dynamic.conditional", label, sc["overall"], judge=record)
    else:
        e = MetricEntry.unavailable("dynamic.conditional", label, "gated out: the judge saw no event start in the "
                                    "initial hold (S_cond averages started videos only)", retryable=False,
                                    judge=record)
        k = e.key
    out[k] = e
    return out


def load_item_input(item_dir: Path, stride: int = 8) -> JudgeInput:
    """The judge input of a harness item folder: frames every ``stride``-th plus first and last, from
    ``video.mp4``; phases and fps from ``camera.npz``; the event from ``meta.json``'s case."""
    from evaluate.protocol import judge_frames
    from harness.io import read_json
    from harness.video import read_frames
    from trajectories import load_path

    item_dir = Path(item_dir)
    meta = read_json(item_dir / "meta.json")
    path = load_path(item_dir / "camera.npz")
    idx = judge_frames(path.num_frames, stride)
    got, frames = read_frames(item_dir / "video.mp4", indices=idx)
    if list(got) != idx:
        raise JudgeInputError(f"video.mp4 has {len(got)} of the {len(idx)} judged frames (shorter than "
                              f"camera.npz's {path.num_frames} frames?)")
    return JudgeInput(frames=frames, frame_indices=idx, phases={k: tuple(v) for k, v in path.phases.items()},
                      fps=float(path.fps), event=event_dict((meta.get("case") or {}).get("event")) or {})


def judge_item(item_dir: Path, settings: Any, stride: int = 8, session: JudgeSession | None = None) -> Entries:
    """:func:`score_item` on an item folder; unreadable inputs become "not computed" with the reason."""
    settings = JudgeSettings.from_dict(settings)
    try:
        inp = load_item_input(item_dir, stride)
    except JudgeInputError as exc:
        return not_computed(settings, f"cannot judge this item: {exc}", retryable=False)
    except (OSError, ValueError, KeyError) as exc:
        return not_computed(settings, f"cannot read the item for the judge: {type(exc).__name__}: {exc}", False)
    return score_item(inp, settings, item_dir, session)
