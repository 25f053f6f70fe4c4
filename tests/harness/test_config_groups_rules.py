"""The rules of harness/config_groups.py (the config groups' search path, listing, option files, descriptions and
choices, adapter references and this machine's model settings), one at a time and in this process. Inside a running
app the search path comes from Hydra's runtime config; here a stand-in of ``HydraConfig`` gives those sources."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.core.hydra_config import HydraConfig

from harness.config_groups import (
    UnknownChoiceError,
    _composed,
    check_choice,
    conf_dir,
    did_you_mean,
    group_description,
    group_yaml,
    list_group,
    load_object,
    model_config_with_local,
    option_file,
    search_dirs,
)
from harness.errors import ConfigError, MissingDependencyError
from harness.installed_models import model_packages
from tests.support.sites import temporary_site

ROOT = Path(__file__).resolve().parents[2]
_MODULES = ("rules_cg_own", "rules_cg_dep", "rules_cg_bare")


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def sources(monkeypatch):
    """Makes Hydra look initialised with the given config sources (``(schema, path)`` pairs)."""

    def use(*pairs: tuple[str, str]) -> None:
        runtime = SimpleNamespace(config_sources=[SimpleNamespace(schema=s, path=p) for s, p in pairs])
        monkeypatch.setattr(HydraConfig, "initialized", staticmethod(lambda: True))
        monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: SimpleNamespace(runtime=runtime)))

    return use


@pytest.fixture
def site(tmp_path, monkeypatch):
    yield from temporary_site(tmp_path, monkeypatch, _MODULES)


def _model_dirs() -> list[Path]:
    return [m.conf_dir for m in model_packages().values()]


# -- the search path ------------------------------------------------------------------------------------------------
def test_outside_an_app_the_search_path_is_the_conf_package_then_the_model_packages():
    assert search_dirs() == [ROOT / "conf", *_model_dirs()] and conf_dir() == ROOT / "conf"


def test_inside_an_app_the_search_path_is_hydras_file_and_package_sources_in_order(sources, tmp_path):
    first_model = _model_dirs()[0]
    sources(("file", str(tmp_path)), ("structured", "x"), ("pkg", "conf"), ("pkg", "rules_cg_missing"),
            ("pkg", "json.decoder"), ("file", str(first_model)))
    assert search_dirs() == [tmp_path, ROOT / "conf", first_model, *_model_dirs()[1:]]


def test_inside_an_app_without_a_file_or_package_source_the_conf_package_is_searched(sources):
    sources(("structured", "x"))
    assert search_dirs() == [ROOT / "conf", *_model_dirs()]


# -- option files and listing ---------------------------------------------------------------------------------------
def test_an_option_file_is_the_first_on_the_search_path_holding_it(sources, tmp_path):
    assert option_file("model", "dreamx") == ROOT / "adapters" / "dreamx" / "conf" / "model" / "dreamx.yaml"
    assert option_file("context", "nope") == ROOT / "conf" / "context" / "nope.yaml"
    _write(tmp_path, {"context/fullkv.yaml": "name: fullkv\n"})
    sources(("file", str(tmp_path)), ("pkg", "conf"))
    assert option_file("context", "fullkv") == tmp_path / "context" / "fullkv.yaml"
    assert option_file("context", "sliding") == ROOT / "conf" / "context" / "sliding.yaml"


def test_a_group_lists_the_yaml_stems_of_every_folder_sorted_without_shared_bases(tmp_path):
    _write(tmp_path, {"context/zz.yaml": "", "context/fullkv.yaml": "", "context/_base.yaml": "",
                      "context/notes.yml": "", "model/_upstream_base.yaml": ""})
    assert list_group("context") == ["fov", "fullkv", "native", "paper", "sliding"]
    assert list_group("context", [tmp_path]) == ["fov", "fullkv", "native", "paper", "sliding", "zz"]
    assert "_upstream_base" not in list_group("model", [tmp_path]) and "dreamx" in list_group("model")


# -- choices --------------------------------------------------------------------------------------------------------
def test_did_you_mean_suggests_the_closest_option_at_half_similarity():
    assert did_you_mean("slidin", ["fov", "sliding", "slid"]) == " Did you mean 'sliding'?"
    assert did_you_mean("abcd", ["abxy"]) == " Did you mean 'abxy'?"
    assert did_you_mean("abcd", ["axyz"]) == ""


def test_an_unknown_choice_names_the_group_a_suggestion_and_the_options(tmp_path):
    with pytest.raises(UnknownChoiceError) as err:
        check_choice("context", "slidng")
    assert str(err.value) == "Unknown context 'slidng'. Did you mean 'sliding'? Available: fov, fullkv, native, " \
                             "paper, sliding"
    with pytest.raises(UnknownChoiceError, match=r"^Unknown nogroup 'x'\. Available: \(none\)$"):
        check_choice("nogroup", "x")
    check_choice("context", "zz", [_write(tmp_path, {"context/zz.yaml": ""})])


# -- group_yaml and descriptions ------------------------------------------------------------------------------------
def test_an_option_of_another_groups_package_is_read_as_written(sources, tmp_path):
    _write(tmp_path, {"launcher/empty.yaml": "# nothing\n", "launcher/one.yaml": "a: 1\n"})
    sources(("file", str(tmp_path)), ("pkg", "conf"))
    assert group_yaml("launcher", "empty") == {} and group_yaml("launcher", "one") == {"a": 1}
    with pytest.raises(UnknownChoiceError, match="Unknown launcher 'nope'"):
        group_yaml("launcher", "nope")


def test_a_value_groups_option_is_composed_and_a_fresh_copy_each_time():
    first = group_yaml("context", "fullkv")
    assert first["name"] == "fullkv" and "upstream_dir" in group_yaml("model", "dreamx")
    first["name"] = "changed"
    assert group_yaml("context", "fullkv")["name"] == "fullkv"


def test_a_composed_option_outside_its_package_is_empty():
    assert _composed("launcher", "basic") == {}


def test_a_description_is_read_from_the_options_file(sources, tmp_path):
    _write(tmp_path, {"context/d.yaml": "description: a line\n", "context/none.yaml": "name: x\n",
                      "context/empty.yaml": "", "context/list.yaml": "- a\n", "context/num.yaml": "description: 3\n"})
    sources(("file", str(tmp_path)))
    assert [group_description("context", n) for n in ("d", "none", "empty", "list", "num")] == \
        ["a line", "", "", "", "3"]


# -- adapter references ---------------------------------------------------------------------------------------------
def test_an_adapter_reference_is_a_module_and_an_attribute():
    assert load_object("json:loads") is __import__("json").loads
    with pytest.raises(ConfigError, match=r"^adapter reference 'json\.loads' must look like"):
        load_object("json.loads")
    with pytest.raises(ConfigError, match=r"^module 'json' has no 'loads:x' \(from adapter reference 'json:loads:x'\)$"):
        load_object("json:loads:x")


def test_a_reference_to_a_missing_module_names_it():
    with pytest.raises(ConfigError, match=r"^adapter reference 'harness\.rules_none:X': no module 'harness\.rules_none'$"):
        load_object("harness.rules_none:X")
    with pytest.raises(ConfigError, match=r"no module 'rules_cg_none\.sub'"):
        load_object("rules_cg_none.sub:X")


def test_a_missing_module_of_our_own_imported_by_an_adapter_is_raised_as_a_bug(site):
    _write(site, {"rules_cg_own.py": "import harness.rules_missing_module\n"})
    with pytest.raises(ModuleNotFoundError) as err:
        load_object("rules_cg_own:X")
    assert err.type is ModuleNotFoundError and err.value.name == "harness.rules_missing_module"


def test_a_missing_dependency_of_an_adapter_names_the_extra(site):
    _write(site, {"rules_cg_dep.py": "import rules_cg_missing_dependency\n",
                  "rules_cg_bare.py": "raise ModuleNotFoundError('no name given')\n"})
    for ref in ("rules_cg_dep:X", "rules_cg_bare:X"):
        with pytest.raises(MissingDependencyError) as err:
            load_object(ref)
        assert f"adapter module {ref.split(':')[0]!r}" in str(err.value) and "models" in str(err.value)


# -- this machine's model settings ----------------------------------------------------------------------------------
def test_only_the_selected_models_local_block_is_merged():
    model = {"name": "dreamx", "a": 1}
    local = {"models": {"dreamx": {"a": 2, "b": 3}, "lingbot": {"c": 4}}}
    assert model_config_with_local(model, local) == {"name": "dreamx", "a": 2, "b": 3}
    assert model == {"name": "dreamx", "a": 1}
    assert model_config_with_local({"name": "sana_wm"}, local) == {"name": "sana_wm"}


@pytest.mark.parametrize("local", [None, {}, {"models": None}, {"models": {}}])
def test_no_local_settings_leave_the_model_as_it_is(local):
    assert model_config_with_local({"name": "dreamx", "a": 1}, local) == {"name": "dreamx", "a": 1}


def test_local_settings_that_are_not_mappings_or_name_no_model_are_refused():
    with pytest.raises(ConfigError, match=r"^local\.models: must map model names to settings"):
        model_config_with_local({"name": "dreamx"}, {"models": ["dreamx"]})
    with pytest.raises(ConfigError, match=r"^local\.models\.dreamx: must be a mapping of model fields$"):
        model_config_with_local({"name": "dreamx"}, {"models": {"dreamx": "path"}})
    with pytest.raises(UnknownChoiceError, match=r"^local\.models\.dreamxx: no such model\. Did you mean 'dreamx'\? "
                                                 r"Available: .*dreamx"):
        model_config_with_local({"name": "dreamx"}, {"models": {"dreamxx": {}}})


def test_a_composed_option_keeps_its_interpolations_as_written(site):
    _write(site, {"rules_cg_bare/__init__.py": "", "rules_cg_bare/contract.yaml": "model: rules_interp\n",
                  "rules_cg_bare/conf/model/rules_interp.yaml": "name: rules_interp\nlabel: ${.name}-x\n",
                  "rules_cg_bare-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: rules-cg-bare\nVersion: 0.1\n",
                  "rules_cg_bare-0.1.dist-info/entry_points.txt":
                      "[worldmem_harness.models]\nrules_interp = rules_cg_bare\n"})
    assert group_yaml("model", "rules_interp") == {"name": "rules_interp", "label": "${.name}-x"}
