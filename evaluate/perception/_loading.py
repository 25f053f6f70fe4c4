"""Shared loading checks of the learned backbones: required files, readable safetensors, strict state dicts, device.

Every error names the backbone and the file, and says how to get the weights. Nothing here downloads anything.
Heavy imports (torch, safetensors) happen inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from harness.errors import ConfigError

if TYPE_CHECKING:
    import torch

from ..weights import fetch_command


def fetch_hint(name: str) -> str:
    return f"get the pinned weights with `{fetch_command(name)}`"


def require_files(name: str, weights_dir: Path, files: Iterable[str]) -> list[Path]:
    """The absolute paths of ``files`` under ``weights_dir``; FileNotFoundError naming the first missing one."""
    weights_dir = Path(weights_dir)
    out = []
    for f in files:
        p = weights_dir / f
        if not p.is_file():
            raise FileNotFoundError(f"backbone {name!r}: missing file {p} ({fetch_hint(name)})")
        out.append(p)
    return out


def corrupt(name: str, path: Path, why: Any) -> ValueError:
    return ValueError(f"backbone {name!r}: corrupt or mismatched weights file {path}: {why} "
                      f"(delete it and {fetch_hint(name)})")


def check_safetensors(name: str, path: Path) -> dict[str, tuple[int, ...]]:
    """Parse a safetensors file's header and return ``{tensor name: shape}``; ValueError naming the file if the
    header is unreadable (a truncated download, an HTML error page saved under the weights name)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as exc:  # safetensors raises its own error types
        raise corrupt(name, path, exc) from exc


def load_state_strict(name: str, module: torch.nn.Module, state: Mapping[str, torch.Tensor], path: Path) -> None:
    """``module.load_state_dict(state, strict=True)``; missing / unexpected keys or a wrong shape -> ValueError."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise corrupt(name, path, str(exc).splitlines()[0] + " ...") from exc


def torch_load(name: str, path: Path) -> Any:
    """``torch.load`` of a checkpoint on the CPU; an unreadable file -> ValueError naming it."""
    import torch

    try:
        return torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as exc:
        raise corrupt(name, path, exc) from exc


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda:0`` when torch sees a GPU, else ``cpu``; ``cpu``, ``cuda`` and ``cuda:N`` pass through;
    anything else is a :class:`ConfigError` naming ``evaluate.device``. torch is imported only for ``auto``."""
    import re

    if device == "auto":
        try:
            import torch

            return "cuda:0" if torch.cuda.is_available() else "cpu"
        except ImportError:
            return "cpu"
    if device == "cpu" or re.fullmatch(r"cuda(:\d+)?", str(device)):
        return device
    raise ConfigError(f"evaluate.device={device!r}: use auto, cpu, cuda or cuda:N")


