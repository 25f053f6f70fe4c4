"""Judge settings (``evaluate.judge`` in ``conf/evaluate/default.yaml``).

The API key is never a setting: ``api_key_env`` names the environment variable that holds it, and nothing in the
harness writes its value anywhere (files, logs, config dumps, ``metrics.json``).
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Annotated, Any

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass
from pydantic_core import ErrorDetails

from harness.errors import ConfigError

#: The paper's judge (WorldMemBench appendix D: Qwen3.8-27B); the name vLLM / SGLang serve it under by default.
DEFAULT_MODEL = "Qwen/Qwen3.8-27B"
#: Bumped whenever the prompt text or the reply schema changes (part of every request key).
PROMPT_VERSION = "worldmem-dynamic-checklist-v1"
#: Settings that change what the judge answers: a change re-asks exactly the requests they belong to.
ANSWER_SETTINGS = ("model", "temperature", "seed", "max_tokens", "image_size", "json_schema")

#: a finite number; an integer stays an integer (the answer settings are part of every request key)
_Number = StrictInt | Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: seconds, >= 0
_Seconds = Annotated[_Number, Field(ge=0)]


class JudgeSettingsError(ConfigError):
    """A bad ``evaluate.judge`` setting; the message names the field and the fix."""


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class JudgeSettings:
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

    base_url: Annotated[StrictStr, Field(pattern=r"^https?://")] | None = None
    model: Annotated[StrictStr, Field(pattern=r"\S")] = DEFAULT_MODEL
    #: a variable's NAME: guards against pasting the key itself here (it would then land in every config dump)
    api_key_env: Annotated[StrictStr, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "OPENAI_API_KEY"
    temperature: _Number | None = 0.0  # None: sent as null (the server's default)
    seed: StrictInt | None = 0  # None: sent as null (the server's choice)
    max_tokens: Annotated[StrictInt, Field(ge=1)] = 4096
    timeout: Annotated[_Number, Field(gt=0)] = 120.0
    concurrency: Annotated[StrictInt, Field(ge=1)] = 4
    image_size: Annotated[StrictInt, Field(ge=32)] = 448
    json_schema: StrictBool = True
    max_retries: Annotated[StrictInt, Field(ge=0)] = 4
    backoff_s: _Seconds = 1.0
    max_backoff_s: _Seconds = 30.0
    failure_budget: Annotated[StrictInt, Field(ge=1)] = 3

    @staticmethod
    def from_dict(d: Any) -> JudgeSettings:
        """The settings of ``d`` (a mapping; None: the defaults; a :class:`JudgeSettings`: itself), checked by
        pydantic; :class:`JudgeSettingsError` naming the first bad setting (``evaluate.judge.<key>``) and the fix."""
        if d is None:
            return JudgeSettings()
        if isinstance(d, JudgeSettings):
            return d
        if not isinstance(d, dict):
            raise JudgeSettingsError(
                f"evaluate.judge={d!r}: expected a mapping of judge settings (base_url, model, api_key_env, ...); "
                "see docs/judge.md")
        try:
            return _ADAPTER.validate_python(d)
        except ValidationError as exc:
            raise _settings_error(exc.errors(), d) from None

    def to_dict(self) -> dict[str, Any]:
        """Every setting (the key's *variable name* only, never its value)."""
        return asdict(self)

    def answer_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ANSWER_SETTINGS}


_ADAPTER = TypeAdapter(JudgeSettings)

#: the order in which the settings' problems are reported (the first one is the error)
_ORDER = ("api_key_env", "base_url", "max_tokens", "concurrency", "image_size", "failure_budget", "max_retries",
          "timeout", "backoff_s", "max_backoff_s", "model", "temperature", "seed", "json_schema")
#: the integer settings and their lower bound
_AT_LEAST = {"max_tokens": 1, "concurrency": 1, "image_size": 32, "failure_budget": 1, "max_retries": 0}


def _settings_error(errors: list[ErrorDetails], given: dict[str, Any]) -> JudgeSettingsError:
    """The project's message for the first of pydantic's ``errors`` (:data:`_ORDER`, an unknown setting first)."""
    allowed = sorted(f.name for f in fields(JudgeSettings))
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "unexpected_keyword_argument" and e["loc"])
    if unknown:
        return JudgeSettingsError(f"evaluate.judge.{unknown[0]}: unknown setting; allowed: {allowed}")
    err = min(errors, key=lambda e: _ORDER.index(str(e["loc"][0])) if e["loc"] and e["loc"][0] in _ORDER else -1)
    key = str(err["loc"][0]) if err["loc"] else ""
    v = given.get(key)
    if key == "api_key_env":
        return JudgeSettingsError(
            "evaluate.judge.api_key_env must NAME an environment variable (e.g. OPENAI_API_KEY), not hold the "
            "key; export the key in that variable instead")
    if key == "base_url":
        return JudgeSettingsError(f"evaluate.judge.base_url={v!r}: give an http(s) URL such as "
                                  "http://127.0.0.1:8000/v1, or null for no judge")
    if key in _AT_LEAST:
        return JudgeSettingsError(f"evaluate.judge.{key}={v!r}: must be >= {_AT_LEAST[key]}"
                                  + ("" if isinstance(v, int) and not isinstance(v, bool) else " (an integer)"))
    if key in ("timeout", "backoff_s", "max_backoff_s"):
        return JudgeSettingsError("evaluate.judge.timeout must be > 0 and backoff_s, max_backoff_s >= 0 (seconds)")
    if key == "model":
        return JudgeSettingsError("evaluate.judge.model is empty: give the served model name")
    fix = {"temperature": "a number", "seed": "an integer", "json_schema": "true or false"}.get(key, err["msg"])
    return JudgeSettingsError(f"evaluate.judge.{key}={v!r}: use {fix}")
