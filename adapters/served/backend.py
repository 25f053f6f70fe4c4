"""Which adapter a run drives: the model's own (``backend=upstream``) or the served wrapper around it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.base import Adapter

#: the backend that runs the model's own adapter (an upstream checkout, or in process for built-in models)
DEFAULT_BACKEND = "upstream"


def for_backend(adapter: Adapter, backend: dict[str, Any] | None, endpoint: Any = None) -> Adapter:
    """``adapter`` itself for the default backend, else the served wrapper for ``backend`` (a ``conf/backend``
    mapping) at ``endpoint``. Raises :class:`adapters.served.config.BackendConfigError` (exit code 2) on a bad
    setting."""
    name = (backend or {}).get("name", DEFAULT_BACKEND)
    if name == DEFAULT_BACKEND:
        if endpoint is not None:
            from .config import BackendConfigError

            raise BackendConfigError(f"endpoint={endpoint!r} is set but backend=upstream runs the model's own "
                                     "adapter; choose backend=sglang or backend=vllm_omni (or drop endpoint)")
        return adapter
    from .adapter import ServedAdapter
    from .config import BackendConfig

    return ServedAdapter(adapter, BackendConfig.from_dict(dict(backend or {}), endpoint))
