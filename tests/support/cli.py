"""The CLI in this process (``python -m harness <args>`` without a subprocess): fast, and monkeypatch restores
whatever the CLI reconfigures (loggers, progress variables, argv, the secret registry)."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Callable


@dataclass
class Result:
    """Exit code (0 for a normal return, an int ``SystemExit`` code, else 1) and the captured streams."""

    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def in_process_cli(monkeypatch, tmp_path, capsys) -> Callable[..., Result]:
    """``run(*args)`` runs ``python -m harness <args>`` in ``tmp_path`` and returns a :class:`Result`; call from a
    fixture (it takes the fixture's ``monkeypatch``, ``tmp_path`` and ``capsys``)."""
    import harness.app.cli as cli
    from harness import secrets

    monkeypatch.chdir(tmp_path)
    # progress=false and the verbosity of libraries with their own log handlers set these: restored afterwards
    for name in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "DIFFUSERS_VERBOSITY",
                 "HF_HUB_VERBOSITY"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    # the CLI (and Hydra's job logging) reconfigure these loggers: restored afterwards
    for pkg in ("harness", "evaluate", "adapters", "trajectories", "hydra", "transformers", "diffusers",
                "huggingface_hub", None):
        log = logging.getLogger(pkg)
        monkeypatch.setattr(log, "handlers", list(log.handlers))
        monkeypatch.setattr(log, "level", log.level)
        monkeypatch.setattr(log, "propagate", log.propagate)

    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["harness", *args])
        secrets.clear_registry()
        capsys.readouterr()
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        secrets.clear_registry()
        return Result(code, out.out, out.err)

    return run
