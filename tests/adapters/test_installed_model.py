"""A model from an installed package: a distribution declares it in the ``worldmem_harness.models`` entry-point group
(docs/adapters.md "Adding a model", :mod:`harness.installed_models`).

The test installs a tiny distribution the way pip leaves one on disk: a folder on ``sys.path`` holding the model's
package (``toy_world_model/``: adapter, ``contract.yaml``, ``conf/model/toy_ep.yaml``) and its
``toy_world_model-0.1.dist-info`` with ``entry_points.txt``. Without ``--config-dir`` and without a package named
after the model, ``list``, ``setup ... print=true`` and a dry run find ``toy_ep``; a broken entry point is an error
that names the distribution and the fix.
"""

from __future__ import annotations

import pytest

from adapters import contracts
from harness.config_groups import list_group
from harness.installed_models import GROUP, InstalledModelError, installed_models
from tests.support.cli import in_process_cli
from tests.support.sites import temporary_site
from tests.support.toy_model import write_toy_model

TOY_REPO = "example/toy-installed-model"


def _install(site, entry_points: str, name: str = "toy-world-model") -> None:
    """A distribution's metadata as an installer writes it: ``<name>-0.1.dist-info/{METADATA,entry_points.txt}``."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{entry_points}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """An empty site folder on ``sys.path``; the toy modules are forgotten afterwards."""
    yield from temporary_site(tmp_path, monkeypatch, ("toy_world_model", "broken_model"))


@pytest.fixture
def toy(site):
    """The installed toy model ``toy_ep`` (package ``toy_world_model``): LingBot-World v2's adapter, contract facts and
    config under its own name and repository."""
    pkg = site / "toy_world_model"
    write_toy_model(pkg, pkg / "conf" / "model" / "toy_ep.yaml", name="toy_ep", repo=TOY_REPO,
                    what="an installed toy model")
    _install(site, "toy_ep = toy_world_model")
    return {"pkg": pkg, "run": site.parent / "work"}


@pytest.fixture
def cli(toy, monkeypatch, capsys):
    toy["run"].mkdir()
    return in_process_cli(monkeypatch, toy["run"], capsys)


def test_the_entry_point_gives_the_model_its_contract_and_config(toy):
    (m,) = installed_models().values()
    assert (m.name, m.distribution, m.package_dir) == ("toy_ep", "toy-world-model 0.1", toy["pkg"].resolve())
    assert "toy_ep" in contracts.available() and "toy_ep" not in contracts.available(contracts.ADAPTERS_DIR)
    assert contracts.contract_path("toy_ep") == toy["pkg"].resolve() / "contract.yaml"
    assert contracts.load("toy_ep").repo == TOY_REPO
    assert "toy_ep" in list_group("model")


def test_list_setup_and_a_dry_run_find_the_installed_model(toy, cli):
    r = cli("list")
    assert r.code == 0, r.err
    assert any(line.split() == ["toy_ep", "an", "installed", "toy", "model"] for line in r.out.splitlines()), r.out

    r = cli("setup", "model=toy_ep", "print=true")
    assert r.code == 0, r.err
    head = r.out.splitlines()[1]
    assert head.startswith(f"# python -m harness setup model=toy_ep: {TOY_REPO}@") and str(toy["pkg"].resolve()) in head
    assert f"https://github.com/{TOY_REPO}.git" in r.out

    r = cli("model=toy_ep", "dry_run=true", "run=d", "model.height=96", "model.width=160", "model.num_frames=61",
            "cases.include=[environment_rocket]", "evaluate=off", "progress=false")
    assert r.code == 0, r.err
    assert "compiled (dry run)      1" in r.out
    (item,) = (toy["run"] / "outputs" / "d" / "toy_ep").glob("*/*/*/environment_rocket")
    assert (item / "controls" / "command.sh").is_file()


def test_an_entry_point_that_fails_to_import_names_its_distribution_and_the_fix(site):
    _install(site, "broken = broken_model_missing", name="broken-model")
    with pytest.raises(InstalledModelError) as err:
        installed_models()
    msg = str(err.value)
    assert "'broken = broken_model_missing'" in msg and "broken-model 0.1" in msg and "ModuleNotFoundError" in msg
    assert "pip uninstall broken-model" in msg


def test_an_installed_package_without_its_config_is_refused(site):
    (site / "broken_model").mkdir()
    (site / "broken_model" / "__init__.py").write_text("")
    (site / "broken_model" / "contract.yaml").write_text("model: broken\n")
    _install(site, "broken = broken_model", name="broken-model")
    with pytest.raises(InstalledModelError, match=r"has no conf/model/broken\.yaml in its package"):
        installed_models()


def test_an_installed_model_may_not_take_an_in_tree_name(toy, site):
    (toy["pkg"] / "conf" / "model" / "lingbot.yaml").write_text("name: lingbot\n")
    _install(site, "lingbot = toy_world_model", name="shadow-model")
    in_tree = r"has the name of the in-tree model \S*/adapters/lingbot/conf/model/lingbot\.yaml"
    with pytest.raises(InstalledModelError, match=in_tree):
        contracts.available()


def test_the_cli_reports_a_broken_installed_model_as_a_user_error(site, monkeypatch, capsys, tmp_path):
    _install(site, "broken = broken_model_missing", name="broken-model")
    (tmp_path / "work").mkdir()
    r = in_process_cli(monkeypatch, tmp_path / "work", capsys)("list")
    assert r.code == 2 and "broken-model 0.1" in r.err and "Traceback" not in r.err, r.err


# -- issue 44: names and options of installed models -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "a..b", "-dash"])
def test_an_entry_point_name_that_is_not_a_plain_name_is_refused(site, name):
    """Before: an entry point named like a path (``../escape``: ``conf/model/../escape.yaml``, and a run folder
    ``outputs/<run>/../escape``) was a model, as long as its package held the file the name pointed at. After: its
    name is checked by the rule of every name that becomes a path (harness.outputs.check_name)."""
    pkg = site / "odd_model"
    (pkg / "conf" / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "contract.yaml").write_text("model: odd\n")
    target = pkg / "conf" / "model" / f"{name}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("name: odd\n")
    _install(site, f"{name} = odd_model", name="odd-model")
    with pytest.raises(InstalledModelError, match=r"not a plain name .*rename the entry point") as err:
        installed_models()
    assert "odd-model 0.1" in str(err.value)


@pytest.mark.parametrize("extra, content, needle", [
    ("conf/model/also_me.yaml", "name: also_me\n", "conf/model/also_me.yaml"),  # a second model option
    ("conf/context/sneaky.yaml", "name: sneaky\n", "conf/context/sneaky.yaml"),  # an option of another group
    ("conf/model/toy_ep.yaml", "# @package _global_\nevaluate: {judge: {base_url: http://x}}\n", "@package _global_"),
    ("conf/model/toy_ep.yaml", "defaults:\n  - override /evaluate: 'off'\n  - _self_\nname: toy_ep\n",
     "chooses options of other groups"),
    ("conf/model/toy_ep.yaml", "defaults:\n  - /context: native\nname: toy_ep\n", "chooses options of other groups"),
    ("conf/model/toy_ep.yaml", "name: sana_wm\n", "names its model 'sana_wm'"),  # filed as an in-tree model
])
def test_an_installed_package_adds_only_the_model_it_declares(toy, cli, extra, content, needle):
    """Before: every YAML file of the package's conf/ folder became an option (``model=also_me``, a new context),
    and its model's config could write settings outside ``model``. After: the package is refused, naming the file
    and the fix; ``list`` exits 2."""
    assert cli("list").code == 0  # the toy as written passes (the check can pass)
    path = toy["pkg"] / extra
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    from harness.installed_models import _scan

    _scan.cache_clear()
    with pytest.raises(InstalledModelError, match=needle):
        installed_models()
    r = cli("list")
    assert r.code == 2 and needle.split(":")[0] in r.err and "toy-world-model 0.1" in r.err, r.err
