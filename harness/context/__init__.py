"""KV-context policies: pose-level selection (FullKV / Sliding / FoV) and the FoV overlap estimator."""

from .fov import FovOverlap, FovScoreConfig
from .policies import POLICY_NAMES, ContextConfigError, ContextPolicy, ContextSelector, Selection

__all__ = [
    "POLICY_NAMES",
    "ContextConfigError",
    "ContextPolicy",
    "ContextSelector",
    "FovOverlap",
    "FovScoreConfig",
    "Selection",
]
