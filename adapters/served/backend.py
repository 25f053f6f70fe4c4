"""Which adapter a run drives: the model's own (``backend=upstream``) or the served wrapper around it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from adapters.base import Adapter

    from .config import BackendConfig, UpstreamBackend


def for_backend(adapter: Adapter, backend: Optional[UpstreamBackend | BackendConfig],
                endpoint: Optional[str] = None) -> Adapter:
    """``adapter`` itself for the default backend (``upstream``, or none chosen), else the served wrapper for the
    engine ``backend`` at ``endpoint`` (the pair checked by :func:`adapters.served.config.check_endpoint` when the
    run configuration was read)."""
    from .config import BackendConfig

    if not isinstance(backend, BackendConfig):
        return adapter
    from .adapter import ServedAdapter

    assert endpoint is not None  # check_endpoint: a served backend has its WebSocket address
    return ServedAdapter(adapter, backend, endpoint)
