"""Judge settings (``evaluate.judge`` in ``conf/evaluate/default.yaml``).

The API key is never a setting: ``api_key_env`` names the environment variable that holds it, and nothing in the
harness writes its value anywhere (files, logs, config dumps, ``metrics.json``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic.dataclasses import dataclass

from harness.errors import ConfigError, UserError
from harness.sections import Fix, Number, Section

#: The paper's judge (WorldMemBench appendix D: Qwen3.8-27B); the name vLLM / SGLang serve it under by default.
DEFAULT_MODEL = "Qwen/Qwen3.8-27B"
#: Bumped whenever the prompt text or the reply schema changes (part of every request key).
PROMPT_VERSION = "worldmem-dynamic-checklist-v1"
#: Settings that change what the judge answers: a change re-asks exactly the requests they belong to.
ANSWER_SETTINGS = ("model", "temperature", "seed", "max_tokens", "image_size", "json_schema")

#: the seconds settings' one message
_SECONDS = Fix("evaluate.judge.timeout must be > 0 and backoff_s, max_backoff_s >= 0 (seconds)", whole=True)
#: seconds, >= 0
_Seconds = Annotated[Number, Field(ge=0), _SECONDS]
#: an integer setting with its lower bound
_AT_LEAST = Fix(lambda v: "must be {bounds}" + ("" if isinstance(v, int) and not isinstance(v, bool)
                                                else " (an integer)"))


class JudgeSettingsError(ConfigError):
    """A bad ``evaluate.judge`` setting; the message names the field and the fix."""


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class JudgeSettings(Section):
    """Client settings of the checklist judge (any OpenAI-compatible chat server: vLLM, SGLang, ...), a pydantic
    dataclass: the types and bounds below are checked by pydantic (the project's one config-validation mechanism).

    base_url: the server's OpenAI API root (e.g. ``http://127.0.0.1:8000/v1``); None = no judge configured (the
        dynamic column is "not computed" and nothing is contacted).
    model: the served model name. api_key_env: environment variable holding the key (unset: a placeholder is sent,
        which servers without auth accept).
    temperature, seed, max_tokens: sampling (paper D.1: max_tokens 4096). timeout: seconds per request.
    concurrency: requests in flight across a run's items. image_size: longer side (pixels) of each frame sent.
    json_schema: ask the server to constrain the reply to the answer schema (``response_format``).
    max_retries, backoff_s, max_backoff_s: retries on timeouts, dropped connections, 429 and 5xx, waiting
        ``min(max_backoff_s, backoff_s * 2**attempt)`` times a jitter in [0.5, 1.5).
    failure_budget: how many items may fail after their retries; once that many have failed, the remaining items
        of the run are "not computed" with the reason (a re-run retries them).
    """

    section: ClassVar[str] = "evaluate.judge"
    error: ClassVar[type[UserError]] = JudgeSettingsError
    fix: ClassVar[str] = ("expected a mapping of judge settings (base_url, model, api_key_env, ...); see "
                          "docs/judge.md")
    #: the order in which the settings' problems are reported (the first one is the error)
    order: ClassVar[tuple[str, ...]] = (
        "api_key_env", "base_url", "max_tokens", "concurrency", "image_size", "failure_budget", "max_retries",
        "timeout", "backoff_s", "max_backoff_s", "model", "temperature", "seed", "json_schema")

    base_url: Annotated[Annotated[StrictStr, Field(pattern=r"^https?://")] | None, Fix(
        "give an http(s) URL such as http://127.0.0.1:8000/v1, or null for no judge")] = None
    model: Annotated[StrictStr, Field(pattern=r"\S"), Fix("{path} is empty: give the served model name",
                                                          whole=True)] = DEFAULT_MODEL
    #: a variable's NAME: guards against pasting the key itself here (it would then land in every config dump)
    api_key_env: Annotated[StrictStr, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"), Fix(
        "{path} must NAME an environment variable (e.g. OPENAI_API_KEY), not hold the key; export the key in that "
        "variable instead", whole=True)] = "OPENAI_API_KEY"
    temperature: Annotated[Number | None, Fix("use a number")] = 0.0  # None: sent as null (the server's default)
    seed: Annotated[StrictInt | None, Fix("use an integer")] = 0  # None: sent as null (the server's choice)
    max_tokens: Annotated[StrictInt, Field(ge=1), _AT_LEAST] = 4096
    timeout: Annotated[Number, Field(gt=0), _SECONDS] = 120.0
    concurrency: Annotated[StrictInt, Field(ge=1), _AT_LEAST] = 4
    image_size: Annotated[StrictInt, Field(ge=32), _AT_LEAST] = 448
    json_schema: Annotated[StrictBool, Fix("use true or false")] = True
    max_retries: Annotated[StrictInt, Field(ge=0), _AT_LEAST] = 4
    backoff_s: _Seconds = 1.0
    max_backoff_s: _Seconds = 30.0
    failure_budget: Annotated[StrictInt, Field(ge=1), _AT_LEAST] = 3

    def to_dict(self) -> dict[str, Any]:
        """Every setting (the key's *variable name* only, never its value)."""
        return asdict(self)

    def answer_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ANSWER_SETTINGS}
