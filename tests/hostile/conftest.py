"""Shared fixtures of the hostile-input suite: the CLI in this process (fast), one small finished run per session
(copied per test, so a test may damage its copy), and a case folder to break."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.cli import in_process_cli

#: the tiny run of the hostile probes (tests/harness/app/test_cli.py's SMALL, one case, no evaluation)
SMALL = ["model.height=96", "model.width=160", "model.num_frames=65", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false"]
ITEM = Path("reference/fov/seed-1/lrlr/environment_rocket")


@pytest.fixture
def harness(monkeypatch, tmp_path, capsys):
    """``harness(*args)`` runs ``python -m harness <args>`` in this process, in ``tmp_path``, and returns a
    :class:`tests.support.cli.Result` (exit code, stdout, stderr)."""
    from harness import secrets

    yield in_process_cli(monkeypatch, tmp_path, capsys)
    secrets.clear_registry()


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Path:
    """A finished one-item run (``outputs/h``), generated once per session (per xdist worker) in a separate process;
    read only: a test that changes a run changes its own copy (:func:`run_copy`)."""
    root = tmp_path_factory.mktemp("finished")
    r = run_cli(["run=h", *SMALL], root)
    assert r.returncode == 0, r.stderr[-3000:]
    return root


@pytest.fixture
def run_copy(finished_run, tmp_path) -> Path:
    """A private copy of :func:`finished_run` in ``tmp_path`` (``tmp_path/outputs/h``); returns its item folder."""
    shutil.copytree(finished_run / "outputs", tmp_path / "outputs")
    return tmp_path / "outputs" / "h" / ITEM


def write_case_folder(folder: Path, case: str, files: dict[str, bytes] | None = None) -> Path:
    """A case folder holding one case file (``case.yaml``) and extra files, all relative to it."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((64, 96, 3), 120, np.uint8)).save(folder / "img.png")
    (folder / "case.yaml").write_text(case)
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
    return folder


OBJECT_CASE = """id: obj1
family: object
image: img.png
prompt: a thing
targets:
  objects: [{id: a, name: thing, box: [10, 10, 40, 40], mask: mask.png}]
trajectories: [lrlr]
"""
