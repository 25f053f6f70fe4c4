"""One model, one folder: an in-tree model keeps its Hydra config in its own folder
(``adapters/<model>/conf/model/<model>.yaml``) and is found the way an installed model is (:mod:`harness.installed_models`:
the same :class:`ModelPackage` record, the same checks, the same search-path plugin). ``conf/model/`` keeps only the
shared base ``_upstream_base.yaml``. The installed kind: tests/adapters/test_installed_model.py."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from harness.config_groups import group_yaml, list_group, option_file
from harness.installed_models import IN_TREE, InstalledModelError, _in_tree, in_tree_models, model_packages
from tests.support import ROOT, compose


def test_every_in_tree_model_is_a_folder_holding_its_config():
    models = in_tree_models()
    folders = sorted(p.parent.parent.parent.name for p in (ROOT / "adapters").glob("*/conf/model/*.yaml"))
    assert sorted(models) == folders and len(folders) >= 13
    for name, m in models.items():
        assert m.config_file == ROOT / "adapters" / name / "conf" / "model" / f"{name}.yaml"
        assert m.in_tree and m.distribution == IN_TREE and m.package_dir == ROOT / "adapters" / name
        assert option_file("model", name) == m.config_file  # what `list`'s descriptions and group_yaml read
    # the model group is the model packages; conf/model/ holds shared bases only, which are no options
    assert list_group("model") == sorted(model_packages()) == sorted(models)
    assert sorted(p.name for p in (ROOT / "conf" / "model").glob("*.yaml")) == ["_upstream_base.yaml"]


def test_hydra_composes_an_in_tree_model_from_its_folder_through_the_plugin():
    """The search-path plugin appends every model package's ``conf`` folder (in-tree and installed alike), and
    Hydra composes ``model=<name>`` from there, the shared base merged in."""
    from hydra.core.config_search_path import ConfigSearchPath
    from hydra_plugins.worldmem_models.search_path import WorldMemInstalledModels

    class Recorder(ConfigSearchPath):  # what the plugin appends, in order (Hydra's own interface)
        def __init__(self) -> None:
            self.paths: list[str] = []

        def append(self, provider: str, path: str, anchor: object = None) -> None:
            self.paths.append(path)

        def get_path(self):  # pragma: no cover - the plugin only appends
            return []

        def prepend(self, provider, path, anchor=None):  # pragma: no cover
            raise AssertionError("the plugin appends")

    rec = Recorder()
    WorldMemInstalledModels().manipulate_search_path(rec)
    assert rec.paths == [f"file://{m.conf_dir}" for m in model_packages().values()]
    dreamx = compose(["model=dreamx"])["model"]
    assert dreamx["name"] == "dreamx" and dreamx == group_yaml("model", "dreamx")
    assert {"upstream_dir", "checkpoint", "python"} <= set(dreamx)  # conf/model/_upstream_base.yaml merged


def _folder(root, name, files):
    d = root / name
    for rel, text in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return d


@pytest.mark.parametrize("files, needle", [
    ({"conf/model/other.yaml": "name: other\n"}, "conf folder without conf/model/toy.yaml"),
    ({"conf/model/toy.yaml": "name: toy\n", "conf/model/also.yaml": "name: also\n"}, "conf/model/also.yaml"),
    ({"conf/model/toy.yaml": "name: toy\n", "conf/context/x.yaml": "name: x\n"}, "conf/context/x.yaml"),
    ({"conf/model/toy.yaml": "# @package _global_\nname: toy\n"}, "@package _global_"),
    ({"conf/model/toy.yaml": "name: lingbot\n"}, "names its model 'lingbot'"),
    ({"conf/model/toy.yaml": "defaults:\n  - /context: native\nname: toy\n"}, "chooses options of other groups"),
])
def test_an_in_tree_folder_is_checked_like_an_installed_package(tmp_path, files, needle):
    """The rules of an installed package's ``conf`` folder hold for an in-tree folder: it adds exactly its own
    option, named after the folder, and configures that model only."""
    _folder(tmp_path, "plain", {"adapter.py": ""})  # a folder without conf/ is no model (adapters/served/)
    _folder(tmp_path, "good", {"conf/model/good.yaml": "defaults:\n  - _upstream_base\n  - _self_\nname: good\n"})
    assert sorted(_in_tree(tmp_path)) == ["good"]
    _in_tree.cache_clear()
    _folder(tmp_path, "toy", files)
    with pytest.raises(InstalledModelError, match=needle) as err:
        _in_tree(tmp_path)
    assert "the in-tree model 'toy'" in str(err.value) and str(tmp_path / "toy") in str(err.value)
    _in_tree.cache_clear()


@pytest.mark.slow
def test_the_wheel_ships_every_models_config(tmp_path):
    """A non-editable build carries each model's config and the shared base (pyproject.toml's package data)."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((ROOT / rel).read_bytes())
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {m.config_file.relative_to(ROOT).as_posix() for m in in_tree_models().values()}
    assert len(want) >= 13 and want <= names, sorted(want - names)
    assert "conf/model/_upstream_base.yaml" in names
