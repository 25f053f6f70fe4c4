"""Judge settings (``evaluate.judge`` in ``conf/evaluate/default.yaml``).

The API key is never a setting: ``api_key_env`` names the environment variable that holds it, and nothing in the
harness writes its value anywhere (files, logs, config dumps, ``metrics.json``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Optional

from harness.errors import ConfigError

#: The paper's judge (WorldMemBench appendix D: Qwen3.8-27B); the name vLLM / SGLang serve it under by default.
DEFAULT_MODEL = "Qwen/Qwen3.8-27B"
#: Bumped whenever the prompt text or the reply schema changes (part of every request key).
PROMPT_VERSION = "worldmem-dynamic-checklist-v1"
#: Settings that change what the judge answers: a change re-asks exactly the requests they belong to.
ANSWER_SETTINGS = ("model", "temperature", "seed", "max_tokens", "image_size", "json_schema")


class JudgeSettingsError(ConfigError):
    """A bad ``evaluate.judge`` setting; the message names the field and the fix."""


@dataclass(frozen=True)
class JudgeSettings:
    """Client settings of the checklist judge (any OpenAI-compatible chat server: vLLM, SGLang, ...).

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

    base_url: Optional[str] = None
    model: str = DEFAULT_MODEL
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 4096
    timeout: float = 120.0
    concurrency: int = 4
    image_size: int = 448
    json_schema: bool = True
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    failure_budget: int = 3

    @staticmethod
    def from_dict(d: Any) -> "JudgeSettings":
        if d is None:
            return JudgeSettings()
        if isinstance(d, JudgeSettings):
            return d
        if not isinstance(d, dict):
            raise JudgeSettingsError(
                f"evaluate.judge={d!r}: expected a mapping of judge settings (base_url, model, api_key_env, ...); "
                "see docs/judge.md")
        allowed = {f.name for f in fields(JudgeSettings)}
        bad = sorted(set(d) - allowed)
        if bad:
            raise JudgeSettingsError(f"evaluate.judge.{bad[0]}: unknown setting; allowed: {sorted(allowed)}")
        s = JudgeSettings(**d)
        s.validate()
        return s

    def validate(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(self.api_key_env)):
            # Guards against pasting the key itself here (it would then land in every config dump).
            raise JudgeSettingsError(
                "evaluate.judge.api_key_env must NAME an environment variable (e.g. OPENAI_API_KEY), not hold the "
                "key; export the key in that variable instead")
        if self.base_url is not None and not re.match(r"^https?://", str(self.base_url)):
            raise JudgeSettingsError(f"evaluate.judge.base_url={self.base_url!r}: give an http(s) URL such as "
                                     "http://127.0.0.1:8000/v1, or null for no judge")
        for name, lo in (("max_tokens", 1), ("concurrency", 1), ("image_size", 32), ("failure_budget", 1),
                         ("max_retries", 0)):
            if int(getattr(self, name)) < lo:
                raise JudgeSettingsError(f"evaluate.judge.{name}={getattr(self, name)!r}: must be >= {lo}")
        if float(self.timeout) <= 0 or float(self.backoff_s) < 0 or float(self.max_backoff_s) < 0:
            raise JudgeSettingsError("evaluate.judge.timeout must be > 0 and backoff_s, max_backoff_s >= 0 (seconds)")
        if not str(self.model).strip():
            raise JudgeSettingsError("evaluate.judge.model is empty: give the served model name")

    def to_dict(self) -> dict[str, Any]:
        """Every setting (the key's *variable name* only, never its value)."""
        return asdict(self)

    def answer_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ANSWER_SETTINGS}
