"""The human study's shared rules: derived seeds (sha256 of the study seed and a purpose, first 64 bits) and how a
study is found (a folder holding study.json, else a name under ``<output_root>/studies/``)."""

from __future__ import annotations

import hashlib

import pytest

from evaluate.human.common import StudyError, resolve_study, sub_seed


def test_sub_seeds_are_the_first_64_bits_of_a_sha256():
    for seed, parts in ((0, ("order", "a1")), (7, ("pairs",)), (2**40, ("x", 3))):
        text = ":".join([str(seed), *map(str, parts)])
        assert sub_seed(seed, *parts) == int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)
    assert sub_seed(0, "order", "a1") != sub_seed(0, "order", "a2") and sub_seed(1, "a") != sub_seed(0, "a")
    assert 0 <= sub_seed(3, "z") < 2**64


def test_a_study_is_a_folder_or_a_name_under_output_root(tmp_path):
    folder = tmp_path / "here"
    folder.mkdir()
    (folder / "study.json").write_text("{}")
    named = tmp_path / "root" / "studies" / "s1"
    named.mkdir(parents=True)
    (named / "study.json").write_text("{}")
    assert resolve_study(str(folder), tmp_path / "root") == folder.resolve()
    assert resolve_study("s1", tmp_path / "root") == named.resolve()
    with pytest.raises(StudyError, match=r"^study=: give the study's name"):
        resolve_study("", tmp_path / "root")
    with pytest.raises(StudyError) as exc:
        resolve_study("s2", tmp_path / "root")
    assert str(exc.value).startswith(f"study=s2: no study.json in s2 or {tmp_path / 'root' / 'studies' / 's2'}; plan it")
    (tmp_path / "root" / "studies" / "s3").mkdir()  # a folder without study.json is not a study
    with pytest.raises(StudyError, match="study=s3: no study.json"):
        resolve_study("s3", tmp_path / "root")


def test_study_files_carry_format_version_1(tmp_path):
    import json

    from harness.app.human.cli import main
    from tests.support.human_data import make_runs

    runs = make_runs(tmp_path / "runs")
    assert main(["plan", *[f"run={r}" for r in runs], f"output_root={tmp_path}", "metric=environment.visible",
                 "name=v"]) == 0
    for name in ("study.json", "key.json"):
        assert json.loads((tmp_path / "studies" / "v" / name).read_text())["schema"] == 1, name
