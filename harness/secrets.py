"""Secrets in configs: environment values whose names look like credentials never reach a file or a log.

A name is secret when it contains TOKEN, KEY, SECRET, PASSWORD, PASSWD or CREDENTIAL (any case), e.g. ``HF_TOKEN``,
``WANDB_API_KEY``. Files that show a launch (``command.sh``) reference such a variable as ``${NAME}``, so the
script still runs where the variable is set; ``meta.json``, the saved config and logs show ``<redacted>``.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(str(name)))


ENV_KEYS = ("env",)  # mappings of environment variables inside configs (``model.env``, a launch's env)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float)) and not isinstance(v, bool)


def secret_values(cfg: Any) -> dict[str, str]:
    """``{value: NAME}`` of every secret-named variable in any ``env`` mapping of a nested config."""
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ENV_KEYS and isinstance(v, dict):
                    found.update({str(val): str(name) for name, val in v.items()
                                  if _is_scalar(val) and str(val) and is_secret_name(name)})
                else:
                    walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    walk(cfg)
    return found


def redact(obj: Any, values: dict[str, str] | None = None) -> Any:
    """A copy of ``obj`` with secret-named variables of ``env`` mappings replaced by ``<redacted>`` and any known
    secret value (``values``, e.g. from :func:`secret_values`) removed from every string (argv, messages)."""
    values = values or {}

    def scrub(s: str) -> str:
        for v, name in sorted(values.items(), key=lambda kv: -len(kv[0])):
            if len(v) >= 4:  # never rewrite tiny values that would hit ordinary text
                s = s.replace(v, f"<{name}: redacted>")
        return s

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: ({n: (REDACTED if is_secret_name(n) and _is_scalar(x) else walk(x)) for n, x in v.items()}
                        if k in ENV_KEYS and isinstance(v, dict) else walk(v)) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [walk(v) for v in node]
        if isinstance(node, str):
            return scrub(node)
        return node

    return walk(obj)


def shell_export(name: str, value: str) -> str:
    """An ``export`` line of a shell script: secrets as a reference to the caller's environment."""
    import shlex

    if is_secret_name(name):
        return f'export {name}="${{{name}:?set {name} in your environment}}"'
    return f"export {name}={shlex.quote(str(value))}"


