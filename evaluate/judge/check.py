"""``python -m harness judge check``: is the configured judge server reachable and serving the configured model."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .client import JudgeSession
from .settings import JudgeSettings


def check_server(settings: Any, out: Callable[[str], Any] = print) -> int:
    """Ping the configured server, print what it serves and whether the configured model is among them.

    Returns the exit code: 0 ready, 1 unreachable / unusable, 2 not configured.
    """
    settings = JudgeSettings.from_dict(settings)
    if not settings.base_url:
        out("judge: no server configured; set evaluate.judge.base_url=http://HOST:PORT/v1 (docs/judge.md)")
        return 2
    s = JudgeSession(settings)
    reason = s.preflight()
    out(f"judge server: {settings.base_url}")
    if s.served is not None:
        out("serves: " + (", ".join(s.served) if s.served else "(no models listed)"))
    out(f"configured model: {settings.model}  (key from ${settings.api_key_env}: "
        f"{'set' if os.environ.get(settings.api_key_env) else 'not set'})")
    if reason:
        out(f"NOT READY: {reason}")
        return 1
    out("ready")
    return 0
