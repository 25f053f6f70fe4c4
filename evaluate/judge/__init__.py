"""The dynamic-memory checklist judge over any OpenAI-compatible vision-language server (appendix D).

Entry points:

* :func:`score_item` (typed inputs: a :class:`JudgeInput`, the settings, the item folder) -> the item's metric
  entries ``dynamic.*[<model>]`` in ``metrics.json`` form, computed or "not computed" with the reason;
* :func:`judge_item` reads an item folder (``meta.json``, ``camera.npz``, ``video.mp4``) and calls it, turning any
  bad input into "not computed" so one item never stops the evaluation of the others;
* :class:`RunJudge` is an evaluation run's judge: one fresh session, requests built from the frames the run decoded
  (once, for every metric family) and sent ``concurrency`` at a time while the run goes on;
* :func:`check_server` is ``python -m harness judge check``.

See ``docs/judge.md``.
"""

from .check import check_server
from .client import JudgeError, JudgeSession, Verdict, session_for
from .parse import ParseFailure, parse_reply
from .prompt import JudgeInput, JudgeInputError, build_request, event_dict, images_digest
from .run import RunJudge
from .scoring import METRICS, judge_item, load_item_input, not_computed, recorded_settings, score_item
from .settings import DEFAULT_MODEL, JudgeSettings, JudgeSettingsError

__all__ = [
           "DEFAULT_MODEL",
           "METRICS",
           "JudgeError",
           "JudgeInput",
           "JudgeInputError",
           "JudgeSession",
           "JudgeSettings",
           "JudgeSettingsError",
           "ParseFailure",
           "RunJudge",
           "Verdict",
           "build_request",
           "check_server",
           "event_dict",
           "images_digest",
           "judge_item",
           "load_item_input",
           "not_computed",
           "parse_reply",
           "recorded_settings",
           "score_item",
           "session_for",
]
