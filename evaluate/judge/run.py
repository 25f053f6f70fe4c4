"""An evaluation run's judge (:class:`RunJudge`): one fresh session, requests built from the frames the run decoded
and sent ``concurrency`` at a time while the run goes on."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any, Self

from ..results import Entries
from .client import no_server_reason, session_for
from .prompt import JudgeInput, JudgeInputError, build_request
from .scoring import _scored, not_computed
from .settings import JudgeSettings


class RunJudge:
    """An evaluation run's judge: a fresh session (budget, pre-flight) and ``concurrency`` worker threads.

    :meth:`submit` takes a dynamic item's input built from the frames the run already decoded for every other
    family (nothing is read or decoded again); the request body (the JPEG frames) is built in the caller's thread, so
    a queued request holds a few MB of JPEG, not the frames; the exchange with the server runs on the pool, so up to
    ``concurrency`` requests are in flight while the run scores other items. One request per item: the session
    reuses stored answers and never re-sends a request key within the run. Use as a context manager (the pool is
    shut down, waiting for what is in flight, on exit).
    """

    def __init__(self, settings: Any):
        from concurrent.futures import ThreadPoolExecutor

        self.settings = JudgeSettings.from_dict(settings)
        self.session = session_for(self.settings, fresh=True)
        self._pool = ThreadPoolExecutor(max_workers=int(self.settings.concurrency), thread_name_prefix="judge")

    def submit(self, inp: JudgeInput, item_dir: Path) -> Future[Entries]:
        """The item's ``dynamic.*`` entries (as :func:`score_item` returns them), as a future. With no server
        configured and no stored answer in the item's ``judge/`` folder, no request is built (its JPEGs would be
        read by no one): the entries say so, and are not retried until a judge setting changes."""
        if not self.settings.base_url and not (Path(item_dir) / "judge").is_dir():
            unjudged: Future[Entries] = Future()
            unjudged.set_result(not_computed(self.settings, no_server_reason(self.settings), retryable=False))
            return unjudged
        try:
            request = build_request(inp, self.settings)  # validates the input first (JudgeInputError)
        except JudgeInputError as exc:
            done: Future[Entries] = Future()
            done.set_result(not_computed(self.settings, f"cannot judge this item: {exc}", retryable=False))
            return done
        indices, event = list(inp.frame_indices), dict(inp.event)  # the worker keeps these, not the frames
        return self._pool.submit(lambda: _scored(self.session.judge(None, Path(item_dir), request), indices, event,
                                                 self.settings))

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
