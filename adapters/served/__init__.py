"""The served backend: drive a model that a serving engine (SGLang, vLLM-Omni) runs behind a WebSocket endpoint.

``backend=upstream`` (the default) leaves the model's own adapter in charge; ``backend=sglang`` /
``backend=vllm_omni`` with ``endpoint=ws://host:port`` wraps it in :class:`adapters.served.adapter.ServedAdapter`
(see docs/served.md).
"""

from .backend import for_backend
from .config import DEFAULT_BACKEND

__all__ = ["DEFAULT_BACKEND", "for_backend"]
