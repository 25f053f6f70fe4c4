"""KV-context policies: pose-level selection (FullKV / Sliding / FoV) and the FoV overlap estimator.

This package imports only :mod:`trajectories` and numpy (torch lazily): no adapter, runner or evaluation code
(``tests/test_layers.py`` checks it). Benchmarks that need models live in :mod:`harness.app.benchmarks`.
"""

from .fov import ContextConfigError, FovOverlap, FovScoreConfig
from .policies import POLICY_NAMES, ContextKind, ContextPolicy, ContextSelector, Selection, fov_selection

__all__ = [
    "POLICY_NAMES",
    "ContextConfigError",
    "ContextKind",
    "ContextPolicy",
    "ContextSelector",
    "FovOverlap",
    "FovScoreConfig",
    "Selection",
    "fov_selection",
]
