"""Error classes of problems a user fixes (printed by ``python -m harness`` without a traceback, exit code 2).

They live here, below every other module of the harness, so that ``adapters/``, ``evaluate/`` and the harness's own
modules can raise them without importing the CLI. Anything else that escapes a command (a bare ``ValueError``, a
``KeyError``...) is a bug: the CLI prints its traceback and exits with 1.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value or an input file the user gave is wrong; the message names the setting (or file) and the fix.

    A ``ValueError`` so that callers that catch ``ValueError`` keep working."""


class MissingDependencyError(ImportError):
    """An optional package is not installed; the message says which extra of the project installs it."""

    def __init__(self, what: str, extra: str | None = None, detail: str | None = None):
        how = f"pip install -e '.[{extra}]'" if extra else "install it"
        super().__init__(f"{what} needs a package that is not installed"
                         + (f" ({detail})" if detail else "") + f"; {how}")
        self.extra = extra
