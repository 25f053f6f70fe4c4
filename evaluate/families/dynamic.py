"""Dynamic memory (paper section 4.5, appendix D): the event-gated eight-question checklist.

The judge is a vision-language model behind any OpenAI-compatible server, configured by the ``evaluate.judge``
settings block (:class:`evaluate.judge.JudgeSettings`, docs/judge.md), not a local backbone. It sees the frames
every ``judge_stride``-th plus the first and last, labelled with their phase and time, and answers the start gate
and the eight questions; :func:`evaluate.judge.score_item` scores them with :func:`evaluate.dynamic.score_checklist`
against the case's frozen reference answers and writes ``dynamic.*[<judge model>]`` (overall = S_gated per video,
started, conditional, the four gated aspects). A server failure is "not computed" with the reason and
``retryable: true``, so the next run re-judges exactly those items.
"""

from __future__ import annotations

from ..protocol import judge_frames
from . import Entries, Family, Metric


def judge_input(ctx, ecfg):
    """The judge's input from the item context (frames already decoded once for the whole item)."""
    from ..judge import JudgeInput, event_dict

    idx = judge_frames(ctx.num_frames, int(ecfg.judge_stride))
    return JudgeInput(frames=ctx.frames_at(idx), frame_indices=idx, phases=dict(ctx.phases), fps=float(ctx.fps),
                      event=event_dict((ctx.meta.get("case") or {}).get("event")) or {})


def checklist(ctx, perc, ecfg, bb) -> Entries:
    from ..judge import JudgeSettings, score_item

    return score_item(judge_input(ctx, ecfg), JudgeSettings.from_dict(ecfg.judge), ctx.dir)


def _reports() -> tuple[str, ...]:
    from ..judge import METRICS

    return METRICS


FAMILY = Family(
    "dynamic",
    ("judge", "judge_stride"),
    (Metric("dynamic.overall", (), checklist, lambda ctx, ecfg: ctx.family == "dynamic", reports=_reports()),),
)
