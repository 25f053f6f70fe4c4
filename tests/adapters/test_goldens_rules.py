"""The rules of adapters/goldens.py, one at a time and in this process: what a snapshot of a controls folder holds,
how text is normalised and compared (numbers within a tolerance, everything else exactly), what ``compare`` reports,
what ``regen`` writes and what the command line returns. The golden folder and the repository root are pointed at
``tmp_path``; the compiler is stood in for by a fixed controls folder, except in the one test of ``compile_item``."""

from __future__ import annotations

import runpy
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from adapters import goldens
from adapters.goldens import MODELS, TRAJECTORIES, _tokens_equal, compare, compile_item, normalise_text, snapshot


def make_controls(root: Path) -> Path:
    """A controls folder of every kind of file a compiler writes (and two it never snapshots)."""
    c = root / "item" / "controls"
    (c / "sub").mkdir(parents=True)
    np.save(c / "poses.npy", np.arange(6, dtype=np.float64).reshape(2, 3))
    np.savez(c / "sub" / "camera.npz", K=np.eye(3), ids=np.array([1, 2], np.int32))
    (c / "items.json").write_text(f'{{"image": "{c.parent}/controls/image.png", "fov": 60.0}}')
    (c / "cases.jsonl").write_text(f'{{"root": "{goldens.ROOT}/adapters"}}\n')
    (c / "prompt.txt").write_text("a rocket")
    (c / "sub" / "command.sh").write_text("python run.py --steps 50\n")
    (c / "image.png").write_bytes(b"\x89PNG")
    (c / "config.yaml").write_text("ignored: 1")
    return c


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """``ROOT`` = ``tmp_path / "repo"``, the goldens under it (not created yet), and a controls folder."""
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setattr(goldens, "ROOT", root)
    monkeypatch.setattr(goldens, "GOLDEN_DIR", root / "tests" / "goldens" / "controls")
    return make_controls(tmp_path / "out")


@pytest.fixture
def stub_compiler(tree, monkeypatch):
    """``compile_item`` replaced by a recorder that returns the fixed controls folder."""
    calls: list[tuple[str, str]] = []

    def fake(model, trajectory, out_dir, context="paper"):
        calls.append((model, trajectory))
        return tree

    monkeypatch.setattr(goldens, "compile_item", fake)
    return calls


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("compiled")
    return out, compile_item("lingbot_v2", "lrlr", out)


# -- compile_item ---------------------------------------------------------------------------------------------------
def test_compile_item_writes_the_controls_of_model_and_trajectory_under_the_folder(compiled):
    out, controls = compiled
    assert controls == out / "lingbot_v2" / "lrlr" / "controls"
    assert {"command.sh", "intrinsics.npy", "poses.npy", "prompt.txt"} <= {p.name for p in controls.iterdir()}


# -- normalise_text -------------------------------------------------------------------------------------------------
def test_run_specific_paths_become_placeholders():
    controls = goldens.ROOT / "runs" / "r1" / "item" / "controls"
    text = f"{controls.parent}/controls/a.png {goldens.ROOT}/adapters/x.py {controls.parent}"
    assert normalise_text(text, controls) == "<item>/controls/a.png <repo>/adapters/x.py <item>"


# -- snapshot -------------------------------------------------------------------------------------------------------
def test_a_snapshot_holds_every_array_and_every_text_file_by_relative_path(tree):
    arrays, texts = snapshot(tree)
    assert sorted(arrays) == ["poses.npy/array", "sub/camera.npz/K", "sub/camera.npz/ids"]
    np.testing.assert_array_equal(arrays["poses.npy/array"], np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(arrays["sub/camera.npz/ids"], [1, 2])
    assert arrays["sub/camera.npz/ids"].dtype == np.int32
    assert texts == {"cases.jsonl": '{"root": "<repo>/adapters"}\n',
                     "items.json": '{"image": "<item>/controls/image.png", "fov": 60.0}',
                     "prompt.txt": "a rocket", "sub/command.sh": "python run.py --steps 50\n"}


def test_a_snapshot_of_an_empty_folder_is_empty(tmp_path):
    assert snapshot(tmp_path) == ({}, {})


# -- _tokens_equal --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, tol, equal", [
    ("x = 1.0, y = 2", "x = 1.0, y = 2", 0.0, True),  # identical numbers pass even with no tolerance
    ("x = 1.0000000005", "x = 1.0", 1e-9, True),
    ("x = 1.000000002", "x = 1.0", 1e-9, False),
    ("x = 1000.0000005", "x = 1000", 1e-9, True),  # relative to the golden's magnitude above 1
    ("x = 0.0000000015", "x = 0", 1e-9, False),  # absolute below 1
    ("x = -1", "x = 1", 1e-9, False),
    ("x = 1 2", "x = 1 3", 1e-9, False),  # every number must match, not one
    ("a = 1", "b = 1", 1e-9, False),  # the text around the numbers must be identical
    ("# 1", "1 1", 1e-9, False),  # as many numbers (a literal '#' does not stand in for one)
    ("1e-3", "0.001", 1e-9, True),
])
def test_text_is_equal_when_its_words_match_exactly_and_its_numbers_within_the_tolerance(a, b, tol, equal):
    assert _tokens_equal(a, b, tol) is equal


# -- compare --------------------------------------------------------------------------------------------------------
def write_golden(dest: Path, arrays: dict[str, np.ndarray], texts: dict[str, str]) -> None:
    dest.mkdir(parents=True)
    np.savez_compressed(dest / "arrays.npz", **arrays)
    for rel, text in texts.items():
        p = dest / "text" / f"{rel}.golden"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_no_golden_is_reported_with_the_command_that_writes_it(tree):
    dest = goldens.GOLDEN_DIR / "m" / "lrlr"
    assert compare("m", "lrlr", tree) == [f"no golden at {dest}; run `python -m adapters.goldens regen`"]


def test_a_snapshot_equal_to_its_golden_has_no_problems(tree):
    write_golden(goldens.GOLDEN_DIR / "m" / "lrlr", *snapshot(tree))
    (goldens.GOLDEN_DIR / "m" / "lrlr" / "text" / "notes.md").write_text("not a golden")
    assert compare("m", "lrlr", tree) == []


def test_arrays_missing_on_either_side_are_named_and_the_shared_ones_still_compared(tree):
    arrays, texts = snapshot(tree)
    arrays.pop("sub/camera.npz/K")
    arrays["old.npy/array"] = np.zeros(2)
    arrays["poses.npy/array"] = arrays["poses.npy/array"] + 0.5
    write_golden(goldens.GOLDEN_DIR / "m" / "lrlr", arrays, texts)
    assert compare("m", "lrlr", tree) == ["array set differs: ['old.npy/array', 'sub/camera.npz/K']",
                                          "poses.npy/array: max |diff| 0.5"]


@pytest.mark.parametrize("golden, problem", [
    (np.zeros(6), "poses.npy/array: (2, 3) float64 != golden (6,) float64"),
    (np.zeros((2, 3), np.float32), "poses.npy/array: (2, 3) float64 != golden (2, 3) float32"),
    (np.zeros((3, 2), np.float32), "poses.npy/array: (2, 3) float64 != golden (3, 2) float32"),
])
def test_an_array_of_another_shape_or_dtype_is_reported_with_both(tree, golden, problem):
    arrays, texts = snapshot(tree)
    arrays["poses.npy/array"] = golden
    write_golden(goldens.GOLDEN_DIR / "m" / "lrlr", arrays, texts)
    assert compare("m", "lrlr", tree) == [problem]


def test_array_values_are_compared_with_an_absolute_tolerance_of_1e9(tree):
    arrays, texts = snapshot(tree)
    base = arrays["poses.npy/array"]
    write_golden(goldens.GOLDEN_DIR / "m" / "near", {**arrays, "poses.npy/array": base + 5e-10}, texts)
    write_golden(goldens.GOLDEN_DIR / "m" / "far", {**arrays, "poses.npy/array": base * 1.25}, texts)
    assert compare("m", "near", tree) == []
    assert compare("m", "far", tree) == ["poses.npy/array: max |diff| 1.25"]  # 5 * 0.25: not relative


def test_a_larger_tolerance_accepts_larger_differences(tree):
    arrays, texts = snapshot(tree)
    write_golden(goldens.GOLDEN_DIR / "m" / "lrlr", {**arrays, "poses.npy/array": arrays["poses.npy/array"] + 0.01},
                 {**texts, "sub/command.sh": "python run.py --steps 50.005\n"})
    assert compare("m", "lrlr", tree, tol=0.02) == []
    assert compare("m", "lrlr", tree) == ["poses.npy/array: max |diff| 0.01", "sub/command.sh: text differs from the golden"]


def test_text_files_missing_on_either_side_are_named_and_the_shared_ones_still_compared(tree):
    arrays, texts = snapshot(tree)
    texts.pop("cases.jsonl")
    texts["sub/old.txt"] = "x"
    texts["prompt.txt"] = "a boat"
    write_golden(goldens.GOLDEN_DIR / "m" / "lrlr", arrays, texts)
    assert compare("m", "lrlr", tree) == ["text file set differs: ['cases.jsonl', 'sub/old.txt']",
                                          "prompt.txt: text differs from the golden"]


def test_text_numbers_within_the_tolerance_match(tree):
    arrays, texts = snapshot(tree)
    texts["sub/command.sh"] = "python run.py --steps 50.0000000004\n"
    write_golden(goldens.GOLDEN_DIR / "m" / "lrlr", arrays, texts)
    assert compare("m", "lrlr", tree) == []


# -- regen ----------------------------------------------------------------------------------------------------------
def test_regen_writes_a_golden_that_compares_equal(tree, stub_compiler, capsys):
    goldens.regen(["m"], ["lrlr"])
    dest = goldens.GOLDEN_DIR / "m" / "lrlr"
    assert capsys.readouterr().out == "wrote tests/goldens/controls/m/lrlr (3 arrays, 4 text files)\n"
    assert stub_compiler == [("m", "lrlr")]
    with np.load(dest / "arrays.npz") as z:
        assert sorted(z.files) == ["poses.npy/array", "sub/camera.npz/K", "sub/camera.npz/ids"]
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.golden")) == [
        "text/cases.jsonl.golden", "text/items.json.golden", "text/prompt.txt.golden", "text/sub/command.sh.golden"]
    assert (dest / "text" / "items.json.golden").read_text() == \
        '{"image": "<item>/controls/image.png", "fov": 60.0}'
    assert compare("m", "lrlr", tree) == []


def test_regen_replaces_an_old_golden_whole(tree, stub_compiler):
    old = goldens.GOLDEN_DIR / "m" / "lrlr" / "text" / "gone.txt.golden"
    old.parent.mkdir(parents=True)
    old.write_text("stale")
    goldens.regen(["m"], ["lrlr"])
    assert not old.exists()
    assert compare("m", "lrlr", tree) == []


def test_regen_makes_the_folders_of_nested_text_files(tmp_path, tree, monkeypatch):
    controls = tmp_path / "nested" / "controls"
    (controls / "a" / "b").mkdir(parents=True)
    (controls / "a" / "b" / "args.txt").write_text("--x 1")
    (controls / "a" / "c.txt").write_text("--y 2")
    monkeypatch.setattr(goldens, "compile_item", lambda model, trajectory, out_dir: controls)
    goldens.regen(["m"], ["lrlr"])
    text = goldens.GOLDEN_DIR / "m" / "lrlr" / "text"
    assert (text / "a" / "b" / "args.txt.golden").read_text() == "--x 1"
    assert (text / "a" / "c.txt.golden").read_text() == "--y 2"


def test_regen_runs_every_model_on_every_trajectory(tree, stub_compiler):
    goldens.regen(["a", "b"], ["lrlr", "square"])
    assert stub_compiler == [("a", "lrlr"), ("a", "square"), ("b", "lrlr"), ("b", "square")]
    assert sorted(p.relative_to(goldens.GOLDEN_DIR).as_posix() for p in goldens.GOLDEN_DIR.glob("*/*")) == [
        "a/lrlr", "a/square", "b/lrlr", "b/square"]


def test_regen_stores_text_as_the_harness_wrote_it_without_scrubbing_it_again(tree, stub_compiler):
    (tree / "prompt.txt").write_text("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789")
    goldens.regen(["m"], ["lrlr"])
    golden = goldens.GOLDEN_DIR / "m" / "lrlr" / "text" / "prompt.txt.golden"
    assert golden.read_text() == "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789"


# -- the command line -----------------------------------------------------------------------------------------------
def test_regen_on_the_command_line_defaults_to_every_in_tree_model(monkeypatch):
    seen = []
    monkeypatch.setattr(goldens, "regen", lambda models: seen.append(models))
    assert goldens.main(["regen"]) == 0
    assert seen == [list(MODELS)]


def test_regen_on_the_command_line_writes_the_named_models_on_every_trajectory(tree, stub_compiler, capsys):
    assert goldens.main(["regen", "--models", "m"]) == 0
    assert stub_compiler == [("m", t) for t in TRAJECTORIES]
    assert compare("m", "square", tree) == []


def test_check_passes_when_every_trajectory_matches(tree, stub_compiler, capsys):
    goldens.regen(["m"])
    capsys.readouterr()
    assert goldens.main(["check", "--models", "m"]) == 0
    assert capsys.readouterr().out == "ok   m/lrlr\nok   m/lrud\nok   m/square\n"


def test_check_fails_naming_each_problem_under_its_item(tree, stub_compiler, capsys):
    goldens.regen(["m"], ["lrlr", "square"])
    capsys.readouterr()
    assert goldens.main(["check", "--models", "m"]) == 1
    dest = goldens.GOLDEN_DIR / "m" / "lrud"
    assert capsys.readouterr().out == (f"ok   m/lrlr\nFAIL m/lrud\n    no golden at {dest}; run `python -m "
                                       "adapters.goldens regen`\nok   m/square\n")


def test_check_of_no_model_passes():
    assert goldens.main(["check", "--models"]) == 0


def test_an_unknown_action_is_refused():
    with pytest.raises(SystemExit):
        goldens.main(["update"])


def test_run_as_a_module_it_exits_with_the_status_of_main(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["python -m adapters.goldens", "check", "--models"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module is imported already
        with pytest.raises(SystemExit) as exc:
            runpy.run_module("adapters.goldens", run_name="__main__")
    assert exc.value.code == 0
