"""Adding an upstream model is one folder plus one config file (docs/adapters.md "Adding a model").

A toy model lives in a temporary folder outside the repository: a package ``toy_wm/`` (its adapter and its
``contract.yaml``) on ``sys.path`` and ``model/toy_wm.yaml`` in a config folder given with ``--config-dir``. No
file of the repository lists it, yet ``list``, ``setup ... print=true`` and a dry run all find it. The toy adapter
reuses LingBot-World v2's controls (as a model of an existing family would); its contract is LingBot-World v2's
facts under its own model name and repository, so the printed setup script shows which contract was read.
"""

from __future__ import annotations

import importlib
import sys

import pytest
from hydra.core.hydra_config import HydraConfig

from adapters import contracts
from harness.config_groups import list_group
from tests.support.cli import in_process_cli
from tests.support.toy_model import write_toy_model

TOY_REPO = "example/toy-world-model"


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The two pieces of a new model, written outside the repository: ``<tmp>/pkgs/toy_wm/`` and
    ``<tmp>/conf/model/toy_wm.yaml``."""
    pkg = tmp_path / "pkgs" / "toy_wm"
    write_toy_model(pkg, tmp_path / "conf" / "model" / "toy_wm.yaml", name="toy_wm", repo=TOY_REPO,
                    what="a toy upstream model")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    importlib.invalidate_caches()
    yield {"pkg": pkg, "conf": tmp_path / "conf", "run": tmp_path / "work"}
    for name in [m for m in sys.modules if m == "toy_wm" or m.startswith("toy_wm.")]:
        del sys.modules[name]


@pytest.fixture
def cli(toy, monkeypatch, capsys):
    toy["run"].mkdir()
    return in_process_cli(monkeypatch, toy["run"], capsys)


def test_the_toy_model_is_found_by_its_folder_alone(toy):
    assert contracts.contract_path("toy_wm") == toy["pkg"] / "contract.yaml"
    c = contracts.load("toy_wm")
    assert c.model == "toy_wm" and c.repo == TOY_REPO
    assert "toy_wm" not in contracts.available()  # the repository's own list is its folders, untouched
    assert "toy_wm" not in list_group("model")  # the config file is outside conf/: only --config-dir adds it


def test_list_setup_and_a_dry_run_find_the_toy_model(toy, cli):
    conf = ["--config-dir", str(toy["conf"])]
    r = cli(*conf, "list")
    assert r.code == 0, r.err
    assert any(line.split() == ["toy_wm", "a", "toy", "upstream", "model"] for line in r.out.splitlines()), r.out

    r = cli(*conf, "setup", "model=toy_wm", "print=true")
    assert r.code == 0, r.err
    head = r.out.splitlines()[1]
    assert head.startswith(f"# python -m harness setup model=toy_wm: {TOY_REPO}@") and str(toy["pkg"]) in head
    assert f"https://github.com/{TOY_REPO}.git" in r.out

    r = cli(*conf, "model=toy_wm", "dry_run=true", "run=d", "model.height=96", "model.width=160",
            "model.num_frames=61", "cases.include=[environment_rocket]", "evaluate=off", "progress=false")
    assert r.code == 0, r.err
    assert "compiled (dry run)      1" in r.out
    (item,) = (toy["run"] / "outputs" / "d" / "toy_wm").glob("*/*/*/environment_rocket")
    assert (item / "controls" / "command.sh").is_file()


def test_without_its_config_folder_the_toy_model_is_unknown(toy, cli):
    r = cli("model=toy_wm", "dry_run=true", "run=d")
    assert r.code == 2 and "Unknown model 'toy_wm'" in r.err


def test_the_search_path_of_a_run_ends_with_the_run(toy, cli):
    HydraConfig.instance().cfg = None  # whatever an earlier test of this worker left: this test starts outside a run
    assert cli("--config-dir", str(toy["conf"]), "list").code == 0
    assert not HydraConfig.initialized()
    assert "toy_wm" not in list_group("model")  # outside a run, the options are the conf package's
