"""Shared fixtures. Tests run on a CPU with no network: nothing here downloads anything."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Bytecode caches on (in the git-ignored __pycache__ folders), also where the environment turns them off
# (PYTHONDONTWRITEBYTECODE, set on the project's VMs): otherwise every run, each xdist worker and each CLI subprocess
# compiles the project and pytest rewrites the ~330 test modules again (docs/contributing.md, "The fast tier").
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# OmegaConf's YAML parses memoised by text in this process: the same conf/ files are parsed at every one of the
# ~570 compositions of the fast tier (tests/support/yaml_memo.py says why this leaves every composition Hydra's own)
try:
    from tests.support import yaml_memo

    yaml_memo.install()
except ImportError:  # not the project's environment (no omegaconf): its tests fail to import on their own
    pass

try:  # property-based tests (tests/**/test_*properties.py): the same examples on every run and machine
    from hypothesis import HealthCheck, settings

    # "ci" (the default): derandomized (examples derived from each test, no database), so a failure reproduces
    # everywhere and the fast tier stays fast; each test bounds its own max_examples. "explore": a random search
    # with many more examples, to run by hand (HYPOTHESIS_PROFILE=explore pytest -k properties -n 0).
    settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("explore", max_examples=500, deadline=None, derandomize=False)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # the test extra brings hypothesis; without it only the property tests fail to import
    pass


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


@pytest.fixture(autouse=True)
def _project_logging_left_as_found():
    """A test that runs the CLI in this process calls ``setup_logging``, which gives the project's loggers a stderr
    handler; without this, a later test on the same worker would see INFO lines in its captured stderr (whether it
    does would depend on the order the tests ran in)."""
    import logging

    from harness.logs import PACKAGES

    before = {p: (list(logging.getLogger(p).handlers), logging.getLogger(p).level, logging.getLogger(p).propagate)
              for p in PACKAGES}
    root_level = logging.getLogger().level
    yield
    for p, (handlers, level, propagate) in before.items():
        log = logging.getLogger(p)
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate
    logging.getLogger().setLevel(root_level)


@pytest.fixture(autouse=True)
def _hydra_config_left_as_found():
    """A command run in this process leaves Hydra's ``HydraConfig`` set to its job's config (Hydra never clears it):
    a later test on the same worker would then read a run's search path or a sweep's mode (``in_sweep``). Put back
    as found (only where Hydra is imported: most tests never do)."""
    mod = sys.modules.get("hydra.core.hydra_config")
    before = mod.HydraConfig.instance().cfg if mod is not None else None
    yield
    mod = sys.modules.get("hydra.core.hydra_config")
    if mod is not None:
        mod.HydraConfig.instance().cfg = before


#: variables a library sets in ``os.environ`` when it is imported or first used (once per process): left as they are
_SET_BY_LIBRARIES = frozenset({
    "LD_LIBRARY_PATH", "PATH", "QT_QPA_PLATFORM_PLUGIN_PATH", "QT_QPA_FONTDIR",  # OpenCV's loader, at import
    "ORT_DISABLE_TELEMETRY", "NO_ALBUMENTATIONS_UPDATE",  # insightface, at import
    "TORCHINDUCTOR_CACHE_DIR",  # torch._inductor, at its first cache lookup
    "DISABLE_CUPTI_LAZY_REINIT", "TEARDOWN_CUPTI",  # torch's profiler
    "MPLCONFIGDIR",  # matplotlib, at import where its config folder is not writable
    "PYTEST_CURRENT_TEST",  # pytest's own, per phase
})


@pytest.fixture(autouse=True)
def _environment_left_as_found():
    """A test that changes ``os.environ`` without ``monkeypatch`` (or with ``monkeypatch.delenv`` of a variable that
    was absent, which records nothing to undo: use :func:`restore_env`) changes every later test of its worker and every
    process they start: a leaked ``TQDM_DISABLE=1`` once hid a progress bar from a test two hundred files later. The
    environment is put back and the test fails, naming the variables."""
    before = dict(os.environ)
    yield
    changed = sorted(k for k in before.keys() | os.environ.keys()
                     if before.get(k) != os.environ.get(k) and k not in _SET_BY_LIBRARIES)
    if not changed:
        return
    for k in changed:
        if k in before:
            os.environ[k] = before[k]
        else:
            del os.environ[k]
    pytest.fail(f"the test left os.environ changed: {', '.join(changed)} (use monkeypatch.setenv, or the restore_env "
                f"fixture where the code under test sets variables)")


@pytest.fixture
def restore_env(monkeypatch):
    """``restore_env(*names)``: the variables come back as they were (set or absent) after the test, whatever the code
    under test sets; their values are not changed now (``monkeypatch.delenv`` of an absent variable records nothing,
    so a value the code sets later would stay)."""
    def keep(*names: str) -> None:
        for name in names:
            if name in os.environ:
                monkeypatch.setenv(name, os.environ[name])  # recorded with its value: put back at teardown
            else:
                monkeypatch.setenv(name, "")  # recorded as absent: removed at teardown
                monkeypatch.delenv(name)

    return keep
