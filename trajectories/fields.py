"""One check for the unknown keys of a typed config section, shared by every layer (this is the bottom one).

Each typed record (``ContextPolicy``, ``FovScoreConfig``, ``TrajectorySpec``, ``ModelConfig``, ...) names its section
and error class; the message is the same everywhere: the first unknown dotted key, a did-you-mean when one is
close, and the allowed keys.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping


def unknown_field_message(section: str, unknown: Iterable[str], allowed: Iterable[str], what: str = "") -> str:
    """``"<section>.<key>: unknown field[ of <what>]; did you mean '<x>'? allowed: [...]"`` for the first key."""
    allowed = sorted(allowed)
    key = sorted(str(k) for k in unknown)[0]
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" did you mean {close[0]!r}?" if close else ""
    of = f" of {what}" if what else ""
    return f"{section}.{key}: unknown field{of};{hint} allowed: {allowed}"


def check_fields(section: str, data: Mapping[str, Any], allowed: Iterable[str], error: type[Exception],
                 what: str = "") -> None:
    """Raise ``error`` naming the first key of ``data`` that is not in ``allowed`` (keys compared as given)."""
    allowed = set(allowed)
    unknown = set(data) - allowed
    if unknown:
        raise error(unknown_field_message(section, unknown, allowed, what))
