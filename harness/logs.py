"""Logging of ``python -m harness``: one logger per module (``logging.getLogger(__name__)``), configured once by the
CLI entry point.

Status, diagnostic and progress messages go through :mod:`logging` to stderr in a short format
(``LEVEL name: message``), scrubbed of secrets (:class:`harness.secrets.RedactFilter`; library records too, through
the root handlers of ``conf/hydra/job_logging/harness.yaml``); the result a command was asked for (``list`` tables,
``weights list``, summary tables, JSON for scripts) stays on stdout through ``print``. ``verbosity`` (``debug`` |
``info`` | ``warning`` | ``error``, default ``info``) sets the level of the project's loggers; other libraries'
records (httpx, huggingface_hub, Hydra's own) reach the console from ERROR up, and all of them with
``verbosity=debug``; ``progress=false`` turns off every progress bar, the project's own and those of the libraries
it drives (tqdm, huggingface_hub, transformers, diffusers).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, TextIO

from harness.errors import ConfigError

VERBOSITY = ("debug", "info", "warning", "error")
#: the project's top-level packages: each gets the stderr handler; other libraries keep their own logging
PACKAGES = ("harness", "evaluate", "adapters", "trajectories")
FORMAT = "%(levelname)s %(name)s: %(message)s"


if TYPE_CHECKING:  # StreamHandler is subscriptable at run time only from Python 3.11
    _TextStreamHandler = logging.StreamHandler[TextIO]
else:
    _TextStreamHandler = logging.StreamHandler


class _StderrHandler(_TextStreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (a redacting wrapper, pytest's capture)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def check_verbosity(value: object) -> int:
    """The :mod:`logging` level of a ``verbosity`` value; :class:`ConfigError` naming the field and the choices."""
    name = str(value).lower() if value is not None else ""
    if name not in VERBOSITY:
        raise ConfigError(f"verbosity={value!r}: use one of {', '.join(VERBOSITY)}")
    level: int = getattr(logging, name.upper())
    return level


def setup_logging(verbosity: object = "info") -> None:
    """Send the project's log records to stderr at ``verbosity`` (idempotent: a second call only changes the level).

    Only the project's package loggers are touched (they stop propagating to the root logger, which Hydra
    configures for its own job logging), so a library's own logging is left as it is."""
    from harness.secrets import RedactFilter

    level = check_verbosity(verbosity)
    fmt = logging.Formatter(FORMAT)
    for pkg in PACKAGES:
        log = logging.getLogger(pkg)
        for h in [h for h in log.handlers if isinstance(h, _StderrHandler)]:
            log.removeHandler(h)
        handler = _StderrHandler()
        handler.setFormatter(fmt)
        handler.addFilter(RedactFilter())  # no secret in a status line, whatever the message interpolates
        log.addHandler(handler)
        log.setLevel(level)
        log.propagate = False
    # libraries log through the root logger (Hydra's job logging: stderr, scrubbed): their records are not the
    # harness's status lines, so the console shows them from ERROR up, and every one only when asked (debug)
    libraries = level if level <= logging.DEBUG else max(level, logging.ERROR)
    logging.getLogger().setLevel(libraries)
    _quiet_own_handlers(libraries)
    # matplotlib's one-off font-cache notice ("generated new fontManager", INFO) lands in the middle of the first
    # progress bar and tells a user nothing: its loggers speak from WARNING up unless verbosity=debug
    logging.getLogger("matplotlib").setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))


#: libraries that give their loggers a stderr handler of their own (so the root logger's level does not reach
#: them) -> the variable each reads for its level when it sets that logger up
OWN_HANDLERS = {"transformers": "TRANSFORMERS_VERBOSITY", "diffusers": "DIFFUSERS_VERBOSITY",
                "huggingface_hub": "HF_HUB_VERBOSITY"}
_SET_BY_US: dict[str, str] = {}


def _quiet_own_handlers(level: int) -> None:
    """The libraries of :data:`OWN_HANDLERS` at ``level`` too: their loggers now (if set up already) and their
    variables for later (a value the user set is left alone)."""
    name = logging.getLevelName(level).lower()
    for lib, var in OWN_HANDLERS.items():
        if os.environ.get(var) in (None, _SET_BY_US.get(var)):
            os.environ[var] = _SET_BY_US[var] = name
            logging.getLogger(lib).setLevel(level)


def apply_progress(enabled: bool) -> None:
    """``progress=false``: no progress bar anywhere in this process or the processes it starts. The harness's own
    bars check the flag; the environment switches cover the bars of tqdm-based libraries (diffusers pipelines,
    transformers and huggingface_hub loading), read when they are imported or a bar is created."""
    if enabled:
        return
    os.environ["TQDM_DISABLE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    hub = sys.modules.get("huggingface_hub.utils")
    if hub is not None and hasattr(hub, "disable_progress_bars"):
        hub.disable_progress_bars()
    tlog = sys.modules.get("transformers.utils.logging")
    if tlog is not None and hasattr(tlog, "disable_progress_bar"):
        tlog.disable_progress_bar()
    dlog = sys.modules.get("diffusers.utils.logging")
    if dlog is not None and hasattr(dlog, "disable_progress_bar"):
        dlog.disable_progress_bar()
