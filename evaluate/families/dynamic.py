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

from typing import TYPE_CHECKING

from ..protocol import judge_frames
from ..registry import Backbones, Chance, Compute, ComputedBy, MetricSpec
from ..results import Entries
from .base import Family

if TYPE_CHECKING:
    from ..config import EvalConfig
    from ..item import EvalItem
    from ..judge import JudgeInput
    from ..perceive import ItemPerception

#: the judge of the paper's Dynamic Memory columns (appendix D; ``evaluate.judge.model`` by default)
PAPER_JUDGE = "Qwen/Qwen3.8-27B"
#: the metrics one checklist judgement writes, per item (run tables average them: mean of ``started`` = p_start, of
#: ``overall`` = S_gated, of ``conditional`` (started items only) = S_cond)
JUDGED = ("dynamic.overall", "dynamic.started", "dynamic.conditional", "dynamic.return_progress",
          "dynamic.persistence_reset", "dynamic.final_state", "dynamic.causal_physical")


def judge_input(item: EvalItem, settings: EvalConfig) -> JudgeInput:
    """The judge's input from the item context (frames already decoded once for the whole item)."""
    from ..judge import JudgeInput, event_dict

    idx = judge_frames(item.num_frames, int(settings.judge_stride))
    return JudgeInput(frames=item.frames_at(idx), frame_indices=idx, phases=dict(item.phases), fps=float(item.fps),
                      event=event_dict((item.meta.get("case") or {}).get("event")) or {})


def checklist(item: EvalItem, perception: ItemPerception, settings: EvalConfig, backbones: Backbones) -> Entries:
    """Every metric of :data:`JUDGED` for one item: the judge's answers scored (:func:`evaluate.judge.score_item`)."""
    from ..judge import JudgeSettings, score_item

    return score_item(judge_input(item, settings), JudgeSettings.from_dict(settings.judge), item.dir)


def _is_dynamic(item: EvalItem, settings: EvalConfig) -> bool:
    return item.family == "dynamic"


_JUDGED_BY = ComputedBy("dynamic.overall", "the checklist judgement of dynamic.overall writes every dynamic.* "
                        "metric of the item in one call (evaluate.judge.score_item)")

SPECS = (
    MetricSpec("dynamic.overall", "dynamic", True, "judge", True, "gated 8-question checklist (appendix D)",
               (Compute(checklist, (), _is_dynamic, reports=JUDGED),), table2=PAPER_JUDGE),
    MetricSpec("dynamic.started", "dynamic", True, "judge", True, "event-start gate (mean over videos = p_start)",
               _JUDGED_BY),
    MetricSpec("dynamic.conditional", "dynamic", True, "judge", True, "checklist of started videos (mean = S_cond)",
               _JUDGED_BY, chance={"*": Chance(0.5, 0.0, "derived: coin-flip answers to the eight yes/no questions")}),
    MetricSpec("dynamic.return_progress", "dynamic", True, "judge", True, "gated aspect: return progress",
               _JUDGED_BY, table2=PAPER_JUDGE),
    MetricSpec("dynamic.persistence_reset", "dynamic", True, "judge", True, "gated aspect: persistence / reset",
               _JUDGED_BY, table2=PAPER_JUDGE),
    MetricSpec("dynamic.final_state", "dynamic", True, "judge", True, "gated aspect: final state", _JUDGED_BY,
               table2=PAPER_JUDGE),
    MetricSpec("dynamic.causal_physical", "dynamic", True, "judge", True, "gated aspect: causal / physical",
               _JUDGED_BY, table2=PAPER_JUDGE),
)

FAMILY = Family("dynamic", ("judge", "judge_stride"), SPECS)
