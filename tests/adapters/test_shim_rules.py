"""The runner shims' helpers (adapters/shim.py), one rule at a time in this process: how a shim splits its own
options from upstream's command, seeds every global RNG, runs upstream's script as ``__main__`` (with literal edits
that must each apply, else the checkout is another commit), patches a module's source, and reads the harness's
context selection. The shims' calls at upstream's own sites: tests/adapters/test_contracts.py."""

from __future__ import annotations

import argparse
import json
import random
import sys

import numpy as np
import pytest

from adapters import shim


@pytest.fixture
def isolated(monkeypatch, tmp_path, restore_env):
    """The upstream checkout is the current directory; sys.argv, sys.path, sys.modules and PYTHONHASHSEED (the seed
    shim sets it) come back afterwards."""
    restore_env("PYTHONHASHSEED")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    return tmp_path


def test_split_argv_takes_everything_after_the_first_double_dash_as_upstreams():
    assert shim.split_argv(["--seed", "3", "--", "gen.py", "--x", "--", "y"]) == (["--seed", "3"],
                                                                                  ["gen.py", "--x", "--", "y"])
    assert shim.split_argv(["--", "gen.py"]) == ([], ["gen.py"])
    with pytest.raises(SystemExit, match="shim usage"):
        shim.split_argv(["--seed", "3", "gen.py"])


def test_seed_everything_makes_python_numpy_and_torch_draws_repeat(monkeypatch, restore_env):
    torch = pytest.importorskip("torch")
    restore_env("PYTHONHASHSEED")
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    draws = []
    for _ in range(2):
        shim.seed_everything(2**32 + 5)  # numpy takes it modulo 2**32
        draws.append((random.random(), np.random.rand(), float(torch.rand(1))))
    assert draws[0] == draws[1]
    shim.seed_everything(5)
    assert np.random.rand() == draws[0][1]  # 2**32 + 5 and 5 are one numpy seed
    import os

    assert os.environ["PYTHONHASHSEED"] == "5"
    shim.seed_everything(6)
    assert random.random() != draws[0][0]


def test_replace_literals_applies_each_edit_and_refuses_a_missing_one_naming_the_commit():
    src = "a = 1\nb = 'path/to/ckpt'\n"
    assert shim.replace_literals(src, [("a = 1", "a = 2"), ("path/to", "/w")], "gen.py", "abc") == "a = 2\nb = '/w/ckpt'\n"
    assert shim.replace_literals(src, [], "gen.py", "abc") == src
    with pytest.raises(SystemExit, match=r"'c = 3' not found in gen.py; this patch targets upstream abc"):
        shim.replace_literals(src, [("a = 1", "a = 2"), ("c = 3", "c = 4")], "gen.py", "abc")


def _script(d, body: str):
    (d / "sub").mkdir(exist_ok=True)
    (d / "sub" / "helper_mod_for_shim.py").write_text("VALUE = 'helper'\n")
    p = d / "sub" / "gen.py"
    p.write_text(body)
    return p


def test_run_upstream_runs_the_script_as_main_with_its_argv_and_folders_on_the_path(isolated):
    _script(isolated, "import sys, json, helper_mod_for_shim\n"
                      "if __name__ == '__main__':\n"
                      "    json.dump({'argv': sys.argv, 'v': helper_mod_for_shim.VALUE, 'file': __file__},"
                      " open('out.json', 'w'))\n")
    shim.run_upstream(["sub/gen.py", "--steps", "4"])
    out = json.loads((isolated / "out.json").read_text())
    assert out["argv"] == ["sub/gen.py", "--steps", "4"] and out["v"] == "helper"  # the script's folder on the path
    assert sys.path[:2] == [str(isolated / "sub"), str(isolated)]


def test_run_upstream_with_edits_runs_the_edited_source_under_the_scripts_name(isolated):
    _script(isolated, "import json\nCKPT = '/hard/coded'\n"
                      "if __name__ == '__main__':\n    json.dump({'ckpt': CKPT, 'file': __file__}, open('out.json', 'w'))\n")
    shim.run_upstream(["sub/gen.py"], [("/hard/coded", "/weights/x")], "abc")
    out = json.loads((isolated / "out.json").read_text())
    assert out == {"ckpt": "/weights/x", "file": str(isolated / "sub" / "gen.py")}
    assert "/hard/coded" in (isolated / "sub" / "gen.py").read_text()  # the checkout itself is never edited
    with pytest.raises(SystemExit, match="targets upstream abc"):
        shim.run_upstream(["sub/gen.py"], [("/not/there", "/x")], "abc")


def test_main_with_seeds_patches_and_runs_with_the_shims_options(isolated):
    _script(isolated, "import json, sys, random\nN = 1\n"
                      "json.dump({'n': N, 'argv': sys.argv, 'r': random.random()}, open('out.json', 'w'))\n")
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed")
    parser.add_argument("--commit", default="abc")
    seen = []

    def patch(opts):
        seen.append(opts)
        return [("N = 1", "N = 7")]

    shim.main_with(parser, patch, ["--seed", "11", "--", "sub/gen.py", "--flag"])
    first = json.loads((isolated / "out.json").read_text())
    assert first["n"] == 7 and first["argv"] == ["sub/gen.py", "--flag"] and seen[0].seed == "11"
    shim.main_with(parser, lambda o: None, ["--seed", "11", "--", "sub/gen.py"])
    again = json.loads((isolated / "out.json").read_text())
    assert again["n"] == 1 and again["r"] == first["r"]  # no edits; the same seed gives the same draw


def test_marked_flags_a_replacement_and_patch_attr_rebinds_every_importer(isolated):
    (isolated / "up_mod_for_shim.py").write_text("def f():\n    return 1\n")
    (isolated / "user_mod_for_shim.py").write_text("from up_mod_for_shim import f\n")
    sys.path.insert(0, str(isolated))
    import up_mod_for_shim
    import user_mod_for_shim

    shim.patch_attr("up_mod_for_shim", "f", lambda orig: shim.marked(lambda: orig() + 10))
    assert up_mod_for_shim.f() == 11 and user_mod_for_shim.f() == 11
    assert getattr(up_mod_for_shim.f, "harness_shim") is True

    def g():
        return 0

    assert shim.marked(g, "other") is g and getattr(g, "other") is True and not hasattr(g, "harness_shim")


def test_patch_source_imports_the_edited_module_or_stops(isolated):
    (isolated / "cfg_mod_for_shim.py").write_text("SINK = 0\nWINDOW = -1\n")
    sys.path.insert(0, str(isolated))
    shim.patch_source("cfg_mod_for_shim", [("SINK = 0", "SINK = 6"), ("WINDOW = -1", "WINDOW = 18")], "abc")
    mod = sys.modules["cfg_mod_for_shim"]
    assert (mod.SINK, mod.WINDOW) == (6, 18)
    with pytest.raises(SystemExit, match="cannot find module 'no_such_mod_for_shim'"):
        shim.patch_source("no_such_mod_for_shim", [], "abc")
    with pytest.raises(SystemExit, match="targets upstream abc"):
        shim.patch_source("cfg_mod_for_shim", [("SINK = 9", "SINK = 1")], "abc")


def test_load_selection_maps_each_chunks_first_latent_to_its_context(tmp_path):
    p = tmp_path / "context_selection.json"
    p.write_text(json.dumps({"policy": {}, "chunks": [{"chunk": 0, "current": [0, 1], "context": []},
                                                      {"chunk": 1, "current": [2, 3], "context": [0, 1]},
                                                      {"chunk": 2, "current": ["4", 5], "context": ["0", 3]}]}))
    assert shim.load_selection(str(p)) == {0: [], 2: [0, 1], 4: [0, 3]}
