"""The rules of harness/installed_models.py (model packages: the in-tree folders of ``adapters/`` and the packages
installed distributions declare as entry points), one at a time and in this process: each test writes the few
folders it needs under ``tmp_path`` (a package, a ``*.dist-info`` on a site folder put on ``sys.path``)."""

from __future__ import annotations

import importlib
import importlib.metadata
from pathlib import Path

import pytest

from harness import installed_models
from harness.installed_models import (
    GROUP,
    IN_TREE,
    InstalledModelError,
    ModelPackage,
    _check_conf,
    _fail,
    _in_tree,
    _load,
    _refuse,
    in_tree_dir,
    in_tree_models,
    model_packages,
)
from harness.installed_models import (
    installed_models as installed,
)
from tests.support.sites import temporary_site

_PACKAGES = ("rules_pkg_one", "rules_pkg_two", "rules_pkg_bare", "rules_pkg_nocontract")


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _package(site: Path, pkg: str, model: str, **extra: str) -> Path:
    """An importable model package ``pkg`` holding ``contract.yaml`` and ``conf/model/<model>.yaml``."""
    return _write(site / pkg, {"__init__.py": "", "contract.yaml": f"model: {model}\n",
                               f"conf/model/{model}.yaml": f"name: {model}\n", **extra})


def _install(site: Path, dist: str, *lines: str) -> None:
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    _write(info, {"METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n",
                  "entry_points.txt": f"[{GROUP}]\n" + "\n".join(lines) + "\n"})


@pytest.fixture
def site(tmp_path, monkeypatch):
    yield from temporary_site(tmp_path, monkeypatch, _PACKAGES)


def _ep(name: str, value: str) -> importlib.metadata.EntryPoint:
    """An entry point of no distribution (``ep.dist`` is None)."""
    return importlib.metadata.EntryPoint(name, value, GROUP)


def _model(root: Path, name: str = "toy", conf: str | None = None, **files: str) -> ModelPackage:
    """An in-tree style package folder ``root/name`` with its config (``conf``) and any other files."""
    d = _write(root / name, {f"conf/model/{name}.yaml": f"name: {name}\n" if conf is None else conf, **files})
    return ModelPackage(name, IN_TREE, "", d)


# -- the record -----------------------------------------------------------------------------------------------------
def test_a_model_package_keeps_its_config_under_conf_model_named_after_it(tmp_path):
    m = ModelPackage("toy", "dist 1.0", "toy = toy_pkg", tmp_path)
    assert m.conf_dir == tmp_path / "conf" and m.config_file == tmp_path / "conf" / "model" / "toy.yaml"
    assert not m.in_tree and ModelPackage("toy", IN_TREE, "", tmp_path).in_tree


# -- the errors -----------------------------------------------------------------------------------------------------
def test_an_entry_point_of_no_distribution_is_named_as_such():
    msg = str(_fail(_ep("toy", "toy_pkg"), "is broken"))
    assert msg == ("the installed model 'toy' (entry point 'toy = toy_pkg' in group 'worldmem_harness.models' of an "
                   "unknown distribution) is broken. Fix the distribution and reinstall it (pip install "
                   "--force-reinstall <distribution>), or uninstall it (pip uninstall <distribution>); "
                   "docs/adapters.md \"Adding a model\".")


def test_an_in_tree_model_is_blamed_on_its_folder_and_an_installed_one_on_its_entry_point(tmp_path):
    m = ModelPackage("toy", IN_TREE, "", tmp_path)
    assert str(_refuse(m, "is odd")) == (f"the in-tree model 'toy' ({tmp_path}) is odd; fix that folder "
                                         "(docs/adapters.md \"Adding a model\")")
    assert str(_refuse(m, "is odd", _ep("toy", "p"))).startswith("the installed model 'toy' (entry point 'toy = p'")


# -- loading an entry point -----------------------------------------------------------------------------------------
def test_an_entry_point_that_names_a_module_or_an_object_is_not_a_package():
    with pytest.raises(InstalledModelError, match=r"names <module 'json.decoder' .*, not a package"):
        _load(_ep("toy", "json.decoder"))
    with pytest.raises(InstalledModelError, match=r"names <function loads .*, not a package \(the value is"):
        _load(_ep("toy", "json:loads"))


def test_an_object_with_a_path_that_is_no_module_is_not_a_package(site):
    _write(site, {"rules_pkg_bare.py": "class Pathy:\n    __path__ = ['.']\n"})
    with pytest.raises(InstalledModelError, match=r"names <class 'rules_pkg_bare.Pathy'>, not a package"):
        _load(_ep("toy", "rules_pkg_bare:Pathy"))


def test_an_entry_point_that_fails_to_import_names_the_exception():
    with pytest.raises(InstalledModelError, match=r"failed to load: ModuleNotFoundError: No module named"):
        _load(_ep("toy", "rules_no_such_package"))


def test_a_loaded_package_gives_the_record_of_its_model(site):
    pkg = _package(site, "rules_pkg_one", "toy")
    m = _load(_ep("toy", "rules_pkg_one"))
    assert m == ModelPackage("toy", "an unknown distribution", "toy = rules_pkg_one", pkg.resolve())


def test_a_package_without_its_contract_is_refused(site):
    pkg = _package(site, "rules_pkg_nocontract", "toy")
    (pkg / "contract.yaml").unlink()
    with pytest.raises(InstalledModelError, match=rf"has no contract.yaml in its package {pkg.resolve()}"):
        _load(_ep("toy", "rules_pkg_nocontract"))


def test_a_loaded_package_has_its_conf_folder_checked(site):
    _package(site, "rules_pkg_two", "toy", **{"conf/model/extra.yml": "name: extra\n"})
    with pytest.raises(InstalledModelError, match=r"does not declare .*: conf/model/extra.yml "):
        _load(_ep("toy", "rules_pkg_two"))


# -- the conf folder ------------------------------------------------------------------------------------------------
def test_files_other_than_yaml_in_the_conf_folder_are_allowed(tmp_path):
    _check_conf(_model(tmp_path, **{"conf/README.md": "x", "conf/model/notes.txt": "x"}))


def test_every_undeclared_yaml_file_is_listed_sorted(tmp_path):
    m = _model(tmp_path, **{"conf/z.yaml": "", "conf/context/a.yml": ""})
    with pytest.raises(InstalledModelError) as err:
        _check_conf(m)
    assert (f"has config files it does not declare in {m.conf_dir}: conf/context/a.yml, conf/z.yaml (each would be "
            "another option that no model package names); a model package adds one option, model=toy "
            "(conf/model/toy.yaml): move the others out of conf/") in str(err.value)


@pytest.mark.parametrize("package", ["model", "_group_"])
def test_a_package_directive_of_the_model_group_is_allowed(tmp_path, package):
    _check_conf(_model(tmp_path, conf=f"# @package {package}\nname: toy\n"))


def test_a_package_directive_elsewhere_is_refused_naming_it(tmp_path):
    with pytest.raises(InstalledModelError) as err:
        _check_conf(_model(tmp_path, conf="# a comment\n#  @package   evaluate\nname: toy\n"))
    assert "sets '# @package evaluate' in conf/model/toy.yaml: its settings would land outside model" in str(err.value)


def test_only_the_comments_of_the_first_twenty_lines_are_the_header(tmp_path):
    late = "".join(f"k{i}: {i}\n" for i in range(20)) + "# @package _global_\n"
    _check_conf(_model(tmp_path, "late", conf=late))
    last = "".join(f"# line {i}\n" for i in range(19)) + "# @package _global_\n"
    with pytest.raises(InstalledModelError, match="@package _global_"):
        _check_conf(_model(tmp_path, "last", conf=last))
    with pytest.raises(InstalledModelError, match="@package _global_"):
        _check_conf(_model(tmp_path, "inline", conf="k: 1  # @package _global_\n# @package _global_\n"))


def test_a_config_that_is_not_yaml_is_refused(tmp_path):
    with pytest.raises(InstalledModelError, match=r"has a conf/model/toy.yaml that is not YAML \("):
        _check_conf(_model(tmp_path, conf="name: [toy\n"))


@pytest.mark.parametrize("conf", ["", "- a\n- b\n", "other: 1\n", "name: null\n", "name: toy\ndefaults: null\n"])
def test_a_config_without_a_name_or_that_is_no_mapping_is_allowed(tmp_path, conf):
    _check_conf(_model(tmp_path, conf=conf))


def test_a_config_naming_another_model_is_refused(tmp_path):
    with pytest.raises(InstalledModelError) as err:
        _check_conf(_model(tmp_path, conf="name: other\n"))
    assert ("names its model 'other' in conf/model/toy.yaml (name: other), not the 'toy' it declares: its runs would "
            "be filed, and checked, as another model's; set name: toy") in str(err.value)


@pytest.mark.parametrize("defaults", [["_upstream_base", "_self_"], ["sub/option"], [{"_upstream_base": None}],
                                      [{"sub": "x", "other": "y"}], [3]])
def test_defaults_of_the_model_group_are_allowed(tmp_path, defaults):
    import yaml

    _check_conf(_model(tmp_path, conf=yaml.safe_dump({"defaults": defaults, "name": "toy"})))


@pytest.mark.parametrize("entry", ["/context: native", "override /evaluate: 'off'", "' /x': y", "x: 1\n    /y: 2"])
def test_a_defaults_entry_choosing_an_option_of_another_group_is_refused(tmp_path, entry):
    conf = f"defaults:\n  - _self_\n  - {entry}\nname: toy\n"
    with pytest.raises(InstalledModelError, match=r"chooses options of other groups in the defaults of "
                                                  r"conf/model/toy.yaml: \[\{"):
        _check_conf(_model(tmp_path, conf=conf))


def test_a_defaults_string_with_an_absolute_path_is_refused(tmp_path):
    with pytest.raises(InstalledModelError) as err:
        _check_conf(_model(tmp_path, conf="defaults:\n  - ' /context/native'\nname: toy\n"))
    assert "the defaults of conf/model/toy.yaml: [' /context/native'] (a model's config may use" in str(err.value)


# -- in-tree models -------------------------------------------------------------------------------------------------
def test_the_in_tree_folder_is_the_adapters_package():
    assert in_tree_dir() == (Path(__file__).resolve().parents[2] / "adapters")


@pytest.mark.parametrize("package", ["rules_no_such_package", "json.decoder"])
def test_an_in_tree_package_that_is_missing_or_no_package_is_an_error(monkeypatch, package):
    monkeypatch.setattr(installed_models, "IN_TREE_PACKAGE", package)
    with pytest.raises(InstalledModelError, match=rf"the harness's '{package}' package is not importable"):
        in_tree_dir()


def test_only_folders_with_a_conf_folder_and_a_plain_name_are_in_tree_models(tmp_path):
    _write(tmp_path, {"plain/adapter.py": "", "_private/conf/model/_private.yaml": "",
                      ".hidden/conf/model/.hidden.yaml": "", "b/conf/model/b.yaml": "name: b\n",
                      "a/conf/model/a.yaml": "name: a\n", "loose.txt": "", "conf_only/conf": "a file, not a folder"})
    found = _in_tree(tmp_path)
    assert list(found) == ["a", "b"] and found["a"] == ModelPackage("a", IN_TREE, "", tmp_path / "a")
    _in_tree.cache_clear()


def test_an_in_tree_folder_that_is_not_a_plain_name_is_refused(tmp_path):
    _write(tmp_path, {"a b/conf/model/a b.yaml": "name: a b\n"})
    with pytest.raises(InstalledModelError, match=r"the in-tree model 'a b' .* is not a plain name \(letters"):
        _in_tree(tmp_path)
    _in_tree.cache_clear()


def test_an_in_tree_folder_checks_its_conf_folder(tmp_path):
    _write(tmp_path, {"toy/conf/model/toy.yaml": "name: other\n"})
    with pytest.raises(InstalledModelError, match=r"the in-tree model 'toy' .* names its model 'other'"):
        _in_tree(tmp_path)
    _in_tree.cache_clear()


def test_in_tree_models_are_a_fresh_copy():
    first = in_tree_models()
    first.clear()
    assert in_tree_models() and "dreamx" in in_tree_models()


# -- installed models -----------------------------------------------------------------------------------------------
def test_installed_models_are_listed_sorted_with_their_distribution(site):
    _package(site, "rules_pkg_one", "zed")
    _package(site, "rules_pkg_two", "abc")
    _install(site, "rules-dist", "zed = rules_pkg_one", "abc = rules_pkg_two")
    found = installed()
    assert list(found) == ["abc", "zed"]
    assert found["zed"] == ModelPackage("zed", "rules-dist 0.1", "zed = rules_pkg_one",
                                        (site / "rules_pkg_one").resolve())
    assert list(model_packages())[:1] != ["zed"] and "abc" in model_packages() and "dreamx" in model_packages()
    assert list(model_packages()) == sorted(model_packages())


def test_a_model_name_declared_twice_for_the_same_package_is_one_model(site):
    _package(site, "rules_pkg_one", "toy")
    _install(site, "rules-one", "toy = rules_pkg_one")
    _install(site, "rules-two", "toy = rules_pkg_one")
    assert list(installed()) == ["toy"]


def test_a_model_name_two_packages_declare_is_refused_naming_the_first(site):
    _package(site, "rules_pkg_one", "toy")
    _package(site, "rules_pkg_two", "toy")
    _install(site, "rules-one", "toy = rules_pkg_one")
    _install(site, "rules-two", "toy = rules_pkg_two")
    with pytest.raises(InstalledModelError) as err:
        installed()
    assert "(entry point 'toy = rules_pkg_two' in group 'worldmem_harness.models' of rules-two 0.1) has the same " \
           "name as the model of rules-one 0.1 (toy = rules_pkg_one); rename one entry point" in str(err.value)
    assert "pip uninstall rules-two)" in str(err.value)


def test_an_installed_model_with_an_in_tree_name_is_refused_before_it_is_loaded(site):
    _install(site, "rules-shadow", "dreamx = rules_no_such_package")
    with pytest.raises(InstalledModelError, match=r"has the name of the in-tree model \S*/adapters/dreamx/conf/model/"
                                                  r"dreamx\.yaml; rename the entry point"):
        installed()


def test_an_installed_name_that_is_not_plain_is_refused_before_it_is_loaded(site):
    _install(site, "rules-odd", "a..b = rules_no_such_package")
    with pytest.raises(InstalledModelError, match=r"has a name that is not a plain name \(letters"):
        installed()
