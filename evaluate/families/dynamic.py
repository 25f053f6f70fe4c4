"""Dynamic memory (paper section 4.5, appendix D): the event-gated eight-question checklist.

The judge backbone (role ``judge``, e.g. ``qwen-judge`` from :mod:`evaluate.judge`) sees the sampled frames (stride
``judge_stride``, first and last frames included) and returns the event-start decision and eight answers; the
scoring is :func:`evaluate.dynamic.score_checklist` against the case's frozen reference answers.
"""

from __future__ import annotations

from .. import dynamic as formulas
from ..protocol import judge_frames
from . import Entries, Family, Metric, entry


def overall(ctx, perc, ecfg, bb) -> Entries:
    name = bb["judge"]
    judge = perc.backbone(name, "judge")
    frames = judge_frames(ctx.num_frames, int(ecfg.judge_stride))
    verdict = judge.judge(ctx.frames_at(frames), frames, ctx.case)
    refs = [{"aspect": q.aspect, "answer": q.answer} for q in ctx.case.event.questions]
    s = formulas.score_checklist(bool(verdict["started"]), list(verdict["answers"]), refs)
    return entry("dynamic.overall", perc.label(name, "judge"), perc.kind(name), s["overall"], checklist=s,
                 frames=frames, judge_record={k: v for k, v in verdict.items() if k not in ("started", "answers")})


FAMILY = Family(
    "dynamic",
    ("judge", "judge_stride"),
    (Metric("dynamic.overall", ("judge",), overall, lambda ctx, ecfg: ctx.family == "dynamic"),),
)
