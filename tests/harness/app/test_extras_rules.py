"""Which launcher overrides need an extra (``harness/app/extras.py``, ``check_launchers``), one rule at a time: the
launcher's modules are made missing by a stand-in table."""

from __future__ import annotations

import pytest

from harness.app import extras
from harness.errors import MissingDependencyError


@pytest.fixture
def missing_dist(monkeypatch):
    """``slurm`` needs a module that is not installed; ``local`` needs nothing."""
    monkeypatch.setattr(extras, "LAUNCHERS", {"slurm": ("worldmem_no_such_module",), "local": ()})
    monkeypatch.setitem(extras.EXTRA_OF, "worldmem_no_such_module", "dist")


@pytest.mark.parametrize("arg", ["launcher=slurm", "+launcher=slurm", "~launcher=slurm", "launcher=local,slurm"])
def test_a_launcher_override_whose_modules_are_missing_names_the_extra(missing_dist, arg):
    with pytest.raises(MissingDependencyError, match=r"launcher=slurm.*pip install -e '\.\[dist\]'"):
        extras.check_launchers(["model=reference", arg])


@pytest.mark.parametrize("arg", ["model=slurm", "run=slurm", "hydra/launcher=slurm", "launcher=local", "launcher=x"])
def test_only_the_launcher_key_with_a_known_launcher_is_checked(missing_dist, arg):
    extras.check_launchers([arg])  # another key's value named like a launcher, or a launcher with nothing missing


def test_a_word_without_a_value_is_no_launcher_override(missing_dist):
    extras.check_launchers(["slurm", "launcher"])


def test_the_missing_dependency_message_names_what_needs_it_the_modules_and_the_extra():
    assert str(MissingDependencyError("launcher=slurm", "dist", "submitit")) == (
        "launcher=slurm needs a package that is not installed (submitit); pip install -e '.[dist]'")
    bare = MissingDependencyError("model=x")
    assert str(bare) == "model=x needs a package that is not installed; install it" and bare.extra is None
