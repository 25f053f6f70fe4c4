"""A site folder of the test's own on ``sys.path`` (installed model packages, toy modules): the body of a
``site`` fixture, shared by the tests of model packages and config groups."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path


def temporary_site(tmp_path: Path, monkeypatch, top_level: Iterable[str]) -> Iterator[Path]:
    """``yield from`` this in a fixture: an empty ``tmp_path/site`` first on ``sys.path`` while the test runs; the
    modules under the names ``top_level`` that the test imported from it are forgotten afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield site
    names = set(top_level)
    for name in [m for m in sys.modules if m.split(".")[0] in names]:
        del sys.modules[name]
