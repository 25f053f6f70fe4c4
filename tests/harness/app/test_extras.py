"""A command line that never shows a raw error: a misspelled key is one line with a did-you-mean against the real
keys, a missing extra is one line naming it (``launcher=slurm``, ``backend=sglang``, ``model=tiny_causal_dit``,
``weights fetch``, ``release import``, ``human serve``); each exits 2 and writes nothing. Absent modules are
simulated two ways: ``sys.modules[name] = None`` in this process (an ``import`` of it fails, ``find_spec`` finds
nothing), and a meta-path blocker in a fresh interpreter (``sitecustomize``), where every real import of it fails."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.app import extras
from tests.support import ROOT, run_cli
from tests.support.cli import in_process_cli


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


# -- misspelled keys -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, said", [
    (["modle=reference"], "modle=reference: the config has no setting 'modle'. Did you mean 'model'?"),
    (["evaluate.devcie=cpu"], "evaluate.devcie=cpu: 'evaluate' has no setting 'devcie'. Did you mean "
                              "'evaluate.device'?"),
    (["model.heigth=96"], "'model' has no setting 'heigth'. Did you mean 'model.height'?"),
    (["-m", "modle=a,b"], "modle=a,b: the config has no setting 'modle'. Did you mean 'model'?"),
    (["hydra.launcher.n_job=2"], "'hydra.launcher' has no setting 'n_job'. Did you mean 'hydra.launcher.n_jobs'?"),
    (["x=["], "x=[: cannot read this override"),
    (["lsit"], "lsit: neither a command nor key=value. Did you mean 'list'?"),
])
def test_a_misspelled_key_is_one_line_with_a_did_you_mean(cli, tmp_path, args, said):
    r = cli(*args)
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], r.err
    assert "+modle" not in r.err and "HYDRA_FULL_ERROR" not in r.err and "Traceback" not in r.err
    assert not _files(tmp_path)


# -- missing extras --------------------------------------------------------------------------------------------------

#: (what the user types, the modules that are absent, the extra named); ``{tmp}`` is the test's folder
CASES = [
    (["-m", "launcher=slurm", "context=fov,sliding", "run=x"],
     ("hydra_plugins.hydra_submitit_launcher", "submitit"), "dist"),
    (["launcher=submitit_local", "run=x"], ("hydra_plugins.hydra_submitit_launcher", "submitit"), "dist"),
    (["backend=sglang", "model=sana_wm", "context=native", "endpoint=ws://127.0.0.1:9", "run=x"],
     ("websockets", "msgpack"), "served"),
    (["model=tiny_causal_dit", "run=x"], ("torch",), "models"),
    (["weights", "fetch", "dinov2", "--root", "{tmp}/weights"], ("huggingface_hub",), "eval"),
    (["release", "import", "source={tmp}/release", "run=x"], ("pyarrow",), "release"),
    (["human", "serve", "study={tmp}/study"], ("starlette", "uvicorn"), "human"),
]
IDS = ["launcher_slurm", "launcher_submitit_local", "sglang", "tiny_causal_dit", "weights_fetch", "release_import", "human_serve"]


def _prepare(tmp_path: Path, args: list[str]) -> list[str]:
    """The case's arguments with ``{tmp}`` filled in; its input folders made (so only the extra is missing)."""
    (tmp_path / "release").mkdir()
    (tmp_path / "study").mkdir()
    return [a.replace("{tmp}", str(tmp_path)) for a in args]


@pytest.mark.parametrize("args, absent, extra", CASES, ids=IDS)
def test_a_missing_extra_is_one_line_naming_it_before_anything_is_written(cli, monkeypatch, tmp_path, args, absent,
                                                                          extra):
    args = _prepare(tmp_path, args)
    before = _files(tmp_path)
    for m in absent:
        monkeypatch.setitem(sys.modules, m, None)
    r = cli(*args)
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1, r.err
    assert lines[0].startswith("error: ") and f"pip install -e '.[{extra}]'" in lines[0] and absent[0] in lines[0]
    assert "Traceback" not in r.err and _files(tmp_path) == before


def _blocker(tmp_path: Path) -> Path:
    """A folder whose ``sitecustomize`` makes the modules named in ``$WORLDMEM_TEST_BLOCK`` unimportable."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import os, sys\n"
        "BLOCKED = [m for m in os.environ.get('WORLDMEM_TEST_BLOCK', '').split(',') if m]\n"
        "class Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if any(name == m or name.startswith(m + '.') for m in BLOCKED):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Blocker())\n")
    return block


@pytest.mark.slow
def test_a_missing_extra_in_a_fresh_interpreter_is_one_line_and_writes_nothing(tmp_path):
    """The same cases where the modules really cannot be imported (a meta-path blocker installed by
    sitecustomize): whatever imports them first, the command stops at its check."""
    block = _blocker(tmp_path)
    for i, (args, absent, extra) in enumerate(CASES):
        case = tmp_path / f"case{i}"
        case.mkdir()
        args = _prepare(case, args)
        before = _files(case)
        env = {"WORLDMEM_TEST_BLOCK": ",".join(absent),
               "PYTHONPATH": os.pathsep.join([str(block), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        r = run_cli(args, case, env=env)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, (IDS[i], r.stderr[-2000:])
        assert f"pip install -e '.[{extra}]'" in lines[0] and "Traceback" not in r.stderr, IDS[i]
        assert _files(case) == before, IDS[i]


def test_the_printed_setup_script_stops_at_its_top_without_huggingface_hub(tmp_path):
    """The script checks the harness's Python for huggingface_hub first: without it, one line and exit 2 before the
    checkout, the environment or any download is started."""
    from harness.app.setup import make_plan, script
    from tests.support import compose

    block = _blocker(tmp_path)
    python = tmp_path / "harness-python"  # the harness's Python, where huggingface_hub cannot be imported
    python.write_text(f"#!/bin/sh\nWORLDMEM_TEST_BLOCK=huggingface_hub PYTHONPATH={block} exec {sys.executable} "
                      '"$@"\n')
    python.chmod(0o755)
    cfg = compose(["cmd=setup", "model=sana_wm", "print=true", f"setup.harness_python={python}"])
    cfg["setup"]["root"] = str(tmp_path / "models")
    text = script(make_plan(cfg))
    r = subprocess.run(["bash", "-c", text], capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "huggingface_hub is missing" in r.stderr and '.[eval]' in r.stderr and str(python) in r.stderr
    assert not (tmp_path / "models").exists()  # no checkout, environment or weights folder was started


# -- the table of extras is pyproject.toml's -------------------------------------------------------------------------

def _name(req: str) -> str:
    import re

    return re.split(r"[\[<>=!~; (]", req, maxsplit=1)[0].lower().replace("_", "-")


def _extra_requirements(extra: str, extras_table: dict[str, list[str]]) -> set[str]:
    """The distribution names an extra installs: its own requirements, those of the extras it includes, and what
    those distributions require in turn (as installed here; submitit comes with hydra-submitit-launcher)."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    out: set[str] = set()
    for req in extras_table[extra]:
        if _name(req) == "worldmem-harness":
            for inner in re.search(r"\[(.*)\]", req).group(1).split(","):  # type: ignore[union-attr]
                out |= _extra_requirements(inner.strip(), extras_table)
        else:
            out.add(_name(req))
    todo = list(out)
    while todo:
        try:
            deps = [r for r in requires(todo.pop()) or [] if "extra ==" not in r]
        except PackageNotFoundError:
            continue
        for d in map(_name, deps):
            if d not in out:
                out.add(d)
                todo.append(d)
    return out


def test_every_optional_module_is_installed_by_the_extra_named_for_it():
    from importlib.metadata import packages_distributions

    from adapters.base import Adapter

    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    owners = packages_distributions()
    for module, extra in extras.EXTRA_OF.items():
        dists = {d.lower().replace("_", "-") for d in owners.get(module.split(".")[0], [])}
        assert dists & _extra_requirements(extra, table), (module, extra, dists)
    # every module an adapter or a launcher declares can be named with its extra
    declared = {m for cls in _subclasses(Adapter) for m in cls.requires}
    declared |= {m for mods in extras.LAUNCHERS.values() for m in mods}
    assert declared and declared <= set(extras.EXTRA_OF)


def _subclasses(cls: type) -> set[type]:
    import importlib

    for mod in ("adapters.tiny_causal_dit.adapter", "adapters.served.adapter", "adapters.sana_wm_diffusers.adapter",
                "adapters.reference.adapter"):
        importlib.import_module(mod)
    out: set[type] = set()
    todo = [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def test_require_names_every_missing_module_and_its_extra(monkeypatch):
    from harness.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "msgpack", None)
    extras.require("x", ("json", "os"))  # present: nothing
    with pytest.raises(MissingDependencyError) as e:
        extras.require("backend=sglang", ("json", "msgpack"))
    assert str(e.value) == ("backend=sglang needs a package that is not installed (msgpack); "
                            "pip install -e '.[served]'")
    assert not extras.importable("no_such_module_anywhere.sub") and extras.importable("json")
