"""Optional packages, checked before anything is written: a command whose settings need an extra of
``pyproject.toml`` that is not installed stops with one line naming it (exit code 2), never with a traceback, a
failed item or a half-made run folder.

:data:`EXTRA_OF` says which extra installs each optional module the harness imports
(``tests/harness/app/test_extras.py`` checks every entry against ``pyproject.toml``). Who needs what is declared
where the need is: a launcher here (:data:`LAUNCHERS`), a model adapter in its ``requires`` (``adapters.base.Adapter``),
a command at its start (``weights fetch``, ``release``, ``human serve``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence

from harness.errors import MissingDependencyError

#: optional module -> the extra of pyproject.toml that installs it
EXTRA_OF: dict[str, str] = {
    "hydra_plugins.hydra_submitit_launcher": "dist", "submitit": "dist",
    "websockets": "served", "msgpack": "served",
    "torch": "models", "diffusers": "models", "transformers": "models",
    "huggingface_hub": "eval",
    "pyarrow": "release",
    "starlette": "human", "uvicorn": "human",
}

#: launcher option (``launcher=<name>``) -> the modules its Hydra plugin imports
LAUNCHERS: dict[str, tuple[str, ...]] = {
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
}


def importable(module: str) -> bool:
    """``module`` can be imported here (found on the path; nothing is imported but its parent packages)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing, or a broken __spec__
        return False


def missing(modules: Iterable[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported, in order."""
    return [m for m in modules if not importable(m)]


def require(what: str, modules: Sequence[str]) -> None:
    """Raise :class:`MissingDependencyError` (one line: what needs it, the missing modules, the ``pip install`` of
    their extra) when a module of ``modules`` cannot be imported."""
    absent = missing(modules)
    if not absent:
        return
    extras = sorted({EXTRA_OF.get(m, "") for m in absent} - {""})
    raise MissingDependencyError(what, ",".join(extras) or None, ", ".join(absent))


def check_launchers(args: Sequence[str]) -> None:
    """``launcher=<name>`` overrides whose plugin is not installed (``launcher=slurm`` without the ``dist``
    extra): one line naming the extra, before Hydra looks the launcher up."""
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") == "launcher":
            for name in value.split(","):
                if name in LAUNCHERS:
                    require(f"launcher={name}", LAUNCHERS[name])
