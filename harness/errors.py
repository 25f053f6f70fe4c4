"""The one base of problems a user fixes, and its common kinds.

:class:`UserError` is printed by ``python -m harness`` without a traceback, with exit code 2, and nothing is left
half-written; its message names the setting or file and the fix. Every domain error of the project subclasses it
(``CaseError``, ``TrajectoryError``, ``PlanError``, ...), so the command line catches this one class. Anything
else that escapes a command (a bare ``ValueError``, a ``KeyError``...) is a bug: its traceback is printed, exit 1.

This module is the bottom layer: it imports nothing of the project, so ``trajectories`` and everything above can
raise these.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user fixes (a setting, an input file, the environment); the message names it and the fix."""


class ConfigError(UserError, ValueError):
    """A config value or an input file the user gave is wrong; the message names the setting (or file) and the fix.

    A ``ValueError`` too, so that callers that catch ``ValueError`` keep working."""


class MissingDependencyError(UserError, ImportError):
    """An optional package is not installed; the message says which extra of the project installs it."""

    def __init__(self, what: str, extra: str | None = None, detail: str | None = None):
        how = f"pip install -e '.[{extra}]'" if extra else "install it"
        super().__init__(f"{what} needs a package that is not installed"
                         + (f" ({detail})" if detail else "") + f"; {how}")
        self.extra = extra


class CommandExit(SystemExit):
    """Exit with the command's own code from code that runs after the config was composed but outside a job (a
    launcher: the Slurm sweep's). The CLI never takes its code 1 for one of Hydra's usage errors (exit 2), which a
    plain ``SystemExit(1)`` raised before dispatch is."""
