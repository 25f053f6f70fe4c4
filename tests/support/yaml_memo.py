"""A memo of the YAML parses behind Hydra's compositions (and of ``yaml.safe_load``), for the test process only.

Why: the fast tier composes the configuration about 570 times (one per CLI call and per ``tests.support.compose``),
each composition re-reading the same ~15 files of ``conf/`` through ``OmegaConf.load``, and PyYAML's pure-Python
parse was a fifth of a composition's time. Parsing is a function of the text alone, so a parse is kept by the exact
text and handed out as a deep copy; OmegaConf still builds its nodes, Hydra still merges, so every composition is
Hydra's own. A text that fails to parse is not kept, and is parsed from its named stream (errors name the file).
"""

from __future__ import annotations

import copy
import io
from typing import Any

_LOADER_NAME = "get_yaml_loader.<locals>.OmegaConfLoader"  # omegaconf._utils.get_yaml_loader's class (new per call)
_parsed: dict[str, tuple[Any]] = {}


class _NamedText(io.StringIO):
    """The text of a stream under the stream's name, so that PyYAML's marks name the file as before."""

    def __init__(self, text: str, name: str):
        super().__init__(text)
        self.name = name


class _YamlWithMemo:
    """``yaml`` as ``omegaconf.omegaconf`` sees it: ``load`` with OmegaConf's loader is memoised by text."""

    def __init__(self, yaml_module: Any):
        self._yaml = yaml_module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._yaml, name)

    def load(self, stream: Any, Loader: Any) -> Any:  # noqa: N803 (PyYAML's own keyword)
        if getattr(Loader, "__qualname__", "") != _LOADER_NAME or not hasattr(stream, "read"):
            return self._yaml.load(stream, Loader=Loader)
        text = stream.read()
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        hit = _parsed.get(text)
        if hit is None:
            value = self._yaml.load(_NamedText(text, getattr(stream, "name", "<file>")), Loader=Loader)
            hit = _parsed[text] = (value,)
        return copy.deepcopy(hit[0])


_safe_parsed: dict[str, tuple[Any]] = {}


def _memo_safe_load(real: Any) -> Any:
    """``yaml.safe_load`` memoised by text the same way (the harness's own reads of option, contract and case files:
    the same files again at every command)."""

    def safe_load(stream: Any) -> Any:
        text = stream.read() if hasattr(stream, "read") else stream
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        hit = _safe_parsed.get(text)
        if hit is None:
            named = _NamedText(text, getattr(stream, "name", "<unicode string>")) if hasattr(stream, "read") else text
            hit = _safe_parsed[text] = (real(named),)
        return copy.deepcopy(hit[0])

    safe_load.real = real  # type: ignore[attr-defined]
    return safe_load


def install() -> None:
    """Memoise OmegaConf's YAML parses and ``yaml.safe_load`` in this process (idempotent)."""
    import yaml
    from omegaconf import omegaconf as om

    if not isinstance(om.yaml, _YamlWithMemo):
        om.yaml = _YamlWithMemo(yaml)  # type: ignore[assignment]
    if not hasattr(yaml.safe_load, "real"):
        yaml.safe_load = _memo_safe_load(yaml.safe_load)


def uninstall() -> None:
    import yaml
    from omegaconf import omegaconf as om

    if isinstance(om.yaml, _YamlWithMemo):
        om.yaml = om.yaml._yaml  # type: ignore[assignment]
    if hasattr(yaml.safe_load, "real"):
        yaml.safe_load = yaml.safe_load.real
