"""The test process's memo of OmegaConf's YAML parses (tests/support/yaml_memo.py) changes no result."""

from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf
from omegaconf import omegaconf as om

from tests.support import yaml_memo


def test_the_memo_is_installed_and_gives_what_a_fresh_parse_gives(tmp_path):
    assert isinstance(om.yaml, yaml_memo._YamlWithMemo)
    f = tmp_path / "a.yaml"
    f.write_text("a: 1\nb: [x, {c: 2.5e-3}]\nd: null\nt: 2001-01-01\n")
    first = OmegaConf.to_container(OmegaConf.load(f))
    yaml_memo.uninstall()
    try:
        fresh = OmegaConf.to_container(OmegaConf.load(f))
    finally:
        yaml_memo.install()
    assert first == fresh == {"a": 1, "b": ["x", {"c": 0.0025}], "d": None, "t": "2001-01-01"}


def test_a_changed_result_never_reaches_the_next_load(tmp_path):
    f = tmp_path / "a.yaml"
    f.write_text("a: {b: [1, 2]}\n")
    cfg = OmegaConf.load(f)
    cfg.a.b.append(3)
    cfg.a.c = "new"
    assert OmegaConf.to_container(OmegaConf.load(f)) == {"a": {"b": [1, 2]}}


def test_a_changed_file_is_parsed_again(tmp_path):
    f = tmp_path / "a.yaml"
    f.write_text("a: 1\n")
    assert OmegaConf.load(f).a == 1
    f.write_text("a: 2\n")
    assert OmegaConf.load(f).a == 2


def test_a_parse_error_still_names_the_file_and_duplicates_are_still_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(yaml.YAMLError, match="bad.yaml"):
        OmegaConf.load(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text("a: 1\na: 2\n")
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key a"):
        OmegaConf.load(dup)


def test_safe_load_is_memoised_alike_and_still_names_a_bad_file(tmp_path):
    assert hasattr(yaml.safe_load, "real")
    text = "a: [1, {b: 2.5}]\nwhen: 2001-01-01\n"
    first = yaml.safe_load(text)
    first["a"].append(3)
    assert yaml.safe_load(text) == yaml.safe_load.real(text) == {"a": [1, {"b": 2.5}],
                                                                "when": yaml.safe_load.real("2001-01-01")}
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with bad.open() as f, pytest.raises(yaml.YAMLError, match="bad.yaml"):
        yaml.safe_load(f)
    good = tmp_path / "g.yaml"
    good.write_text("k: v\n")
    with good.open("rb") as f:  # bytes too
        assert yaml.safe_load(f) == {"k": "v"}
