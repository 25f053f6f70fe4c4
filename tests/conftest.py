"""Shared fixtures. Tests run on a CPU with no network: nothing here downloads anything."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run only where CUDA is available, ``slurm`` only where a Slurm cluster answers,
    ``judge_server`` only where tests/engines/judge_up.sh started a judge server; elsewhere they are skipped with the
    reason."""
    from tests.support import engines

    required = os.environ.get("WORLDMEM_REQUIRE_ENGINES") == "1"  # CI: an engine that is not up is an error
    for marker, probe in (("slurm", engines.slurm_absent), ("judge_server", lambda: engines.judge_server()[1])):
        marked = [item for item in items if marker in item.keywords]
        why = probe() if marked else None
        if why and required:
            raise pytest.UsageError(f"WORLDMEM_REQUIRE_ENGINES=1, but the tests marked {marker} cannot run: {why}")
        for item in marked if why else ():
            item.add_marker(pytest.mark.skip(reason=why))
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def demo_cases():
    from harness.cases import load_case_set

    return {c.id: c for c in load_case_set("builtin:demo")}


@pytest.fixture
def K832():
    from trajectories.conventions import intrinsics_from_fov

    return intrinsics_from_fov(60.0, 832, 480)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
