"""The printed setup script runs as printed (issue 31): ``setup model=X print=true`` for all nine models, run by
``bash`` in a fresh shell against local stand-ins, reaches its last line with exit status 0.

The stand-ins are executables on ``PATH`` in a temporary folder that record their calls: ``git`` (a clone copies a
template checkout: upstream's tree at the pin, built from the model's committed listing
``adapters/<model>/upstream_tree.json``, each file a placeholder, so a path the recipe names that upstream does not
have stops the script as it would on the real checkout), ``python3.X`` (``-m venv`` makes an environment whose
``python`` records and succeeds: pip, the torch check, ModelScope), ``nvcc``, ``ffmpeg``; the harness's own
interpreter is a recorder too (``setup.harness_python``), and so the hub downloads it runs. Every path lives under
a root whose name has a space, ``#``, ``,`` and ``$(``: the script, the YAML block it prints and the Hydra overrides
of its last line must keep it.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from adapters import contracts
from tests.support import compose
from tests.support.upstream_tree import fake_checkout

MODELS = contracts.available()  # the upstream models: the folders of adapters/ that hold a contract.yaml
WEIRD = "root dir #1, $(touch pwned)"  # a space, '#', ',' and '$(': each breaks a different layer when unquoted

RECORDER = """#!/bin/bash
{ printf '%q ' "$(basename "$0")" "$@"; echo; } >> "$SETUP_CALLS"
"""
GIT = RECORDER + """if [ "$1" = clone ]; then dest="${@: -1}"; mkdir -p "$dest/.git"; cp -R "$SETUP_TEMPLATE/." "$dest/"; fi
"""
PYTHON_BIN = RECORDER + """if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$SETUP_ENV_PYTHON" "$3/bin/python"; fi
"""
HARNESS = """#!/bin/bash
{ printf '%s\\n' "$PWD"; printf '%s\\0' "$@"; printf '\\n'; } >> "$SETUP_HARNESS_CALLS"
"""


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _template(model: str, root: Path) -> Path:
    """Upstream's tree at the pin (the committed listing), every file a placeholder; a monorepo only under the
    model's folder (its other projects are never read)."""
    sub = str(contracts.load(model).raw.get("subdir") or "")
    return fake_checkout(model, root / "template", only=(sub + "/",) if sub else ())


@pytest.fixture
def stand_ins(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python3.10", "python3.11", "python3.12"):
        _exe(bin_dir / name, PYTHON_BIN)
    _exe(bin_dir / "git", GIT)
    for name in ("nvcc", "ffmpeg"):
        _exe(bin_dir / name, RECORDER)
    env_py = _exe(tmp_path / "env-python", RECORDER)
    harness = _exe(tmp_path / "harness-python", HARNESS)
    return {"bin": bin_dir, "env_python": env_py, "harness": harness, "tmp": tmp_path}


def _plan_and_script(model: str, root: Path, harness: Path, *extra: str):
    from harness.app.setup import make_plan, script

    over = ["cmd=setup", f"model={model}", "print=true", f"setup.harness_python={harness}", *extra]
    cfg = compose(over)
    cfg["setup"]["root"] = str(root)  # set after composing: the path's characters are the subject, not Hydra's CLI
    plan = make_plan(cfg)
    return plan, script(plan)


def _run(text: str, s: dict, template: Path, path_extra: str = "") -> subprocess.CompletedProcess:
    calls, hcalls = s["tmp"] / "calls.log", s["tmp"] / "harness.log"
    env = {"PATH": f"{s['bin']}{path_extra}:/usr/bin:/bin", "HOME": str(s["tmp"]), "SETUP_CALLS": str(calls),
           "SETUP_HARNESS_CALLS": str(hcalls), "SETUP_TEMPLATE": str(template),
           "SETUP_ENV_PYTHON": str(s["env_python"])}
    return subprocess.run(["bash", "-c", text], capture_output=True, text=True, env=env, cwd=s["tmp"], timeout=60,
                          check=False)


def _harness_calls(s: dict) -> list[tuple[str, list[str]]]:
    f = s["tmp"] / "harness.log"
    if not f.exists():
        return []
    out = []
    for block in f.read_text().split("\0\n"):
        if block.strip():
            cwd, _, rest = block.partition("\n")
            if rest.split("\0") != ["-c", "import huggingface_hub"]:  # the script's first check, not a step
                out.append((cwd, rest.split("\0")))
    return out


@pytest.mark.parametrize("model", MODELS)
def test_printed_script_runs_to_its_last_line_against_stand_ins(model, stand_ins):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    root = stand_ins["tmp"] / WEIRD
    extra = ["+setup.forks.diffusers=git+https://github.com/fork/diffusers@abc"] if model == "evoke" else []
    plan, text = _plan_and_script(model, root, stand_ins["harness"], *extra)
    r = _run(text, stand_ins, _template(model, stand_ins["tmp"]))
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-1500:])
    assert not (stand_ins["tmp"] / "pwned").exists() and not Path("pwned").exists()  # nothing ran the $( )
    calls = [shlex.split(x) for x in (stand_ins["tmp"] / "calls.log").read_text().splitlines()]
    assert any(c[0] == "git" and c[1:2] == ["clone"] and c[-1] == str(plan.checkout) for c in calls)
    assert any(c[0] == "python" and c[1:3] == ["-m", "pip"] for c in calls)  # the model's pip ran, in its venv
    # the last line: the harness's Python, in the harness's checkout, with the paths as Hydra will read them
    hc = _harness_calls(stand_ins)
    last_cwd, last = hc[-1]
    assert last[:4] == ["-m", "harness", "setup", f"model={model}"] and last_cwd == str(plan.harness_root)
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(
        [a for a in last if a.startswith("++")])}
    want = {f"local.models.{model}.{k}": v for k, v in {**plan.paths, "python": plan.python}.items()}
    assert parsed == want and all(WEIRD in v for v in parsed.values())
    # the weights were fetched by the harness's huggingface_hub, into the planned folders
    downloads = [a for _, a in hc if a[:1] == ["-c"]]
    for job in plan.jobs:
        if job.weight.hub == "huggingface":
            where = str(plan.hf_cache) if job.weight.hf_cache else str(job.local_dir)
            assert any(json.dumps(job.weight.repo) in a[1] and json.dumps(where) in a[1] for a in downloads), job
    # the printed conf/local block reads back as the same paths
    block = text.split("(conf/local/default.yaml):\n")[1].split("\n( cd ")[0]
    local = yaml.safe_load("\n".join(x[4:] for x in block.splitlines()))
    assert local["models"][model] == {**plan.paths, "python": plan.python}


def test_a_missing_requirements_file_stops_the_script_with_its_name(stand_ins):
    """A requirements file renamed upstream: grep's error used to be swallowed (`|| true`), an empty list installed,
    and the script went on with rc 0 (SANA-WM's requirements/sana_wm.txt, a file the pin never had)."""
    plan, text = _plan_and_script("lingbot_v2", stand_ins["tmp"] / WEIRD, stand_ins["harness"])
    template = _template("lingbot_v2", stand_ins["tmp"])
    (template / "requirements.txt").unlink()
    r = _run(text, stand_ins, template)
    assert r.returncode != 0 and "missing requirements file" in r.stderr
    assert str(plan.checkout / "requirements.txt") in r.stderr
    assert not _harness_calls(stand_ins)  # stopped there: no download, no harness step


def test_sana_wm_runs_the_pins_own_installer_to_the_end(stand_ins):
    """SANA-WM's script against the pin's tree: it runs upstream's environment_setup.sh (the pin's docs/sana_wm.md
    says so) in the venv, the torch check, the downloads and the harness's last line, and exits 0; with the
    installer renamed upstream it stops there, before any download."""
    plan, text = _plan_and_script("sana_wm", stand_ins["tmp"] / WEIRD, stand_ins["harness"])
    template = _template("sana_wm", stand_ins["tmp"])
    installer = template / "environment_setup.sh"
    assert installer.is_file()  # in the listing, so in the stand-in tree
    installer.write_text(installer.read_text() + 'printf "installer %s SANA_SKIP_TE=%s\\n" "$VIRTUAL_ENV" '
                                                 '"$SANA_SKIP_TE" >> "$SETUP_CALLS"\n')
    r = _run(text, stand_ins, template)
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-1500:])
    calls = (stand_ins["tmp"] / "calls.log").read_text()
    assert f"installer {plan.env_dir} SANA_SKIP_TE=1" in calls  # in the venv, Transformer Engine's build skipped
    assert text.index("command -v nvcc") < text.index("bash ./environment_setup.sh")  # it compiles flash-attn
    assert _harness_calls(stand_ins)[-1][1][:4] == ["-m", "harness", "setup", "model=sana_wm"]
    for f in (stand_ins["tmp"] / "calls.log", stand_ins["tmp"] / "harness.log"):
        f.unlink()
    installer.rename(installer.with_name("environment_setup_sana.sh"))
    shutil.rmtree(plan.checkout)
    r = _run(text, stand_ins, template)
    assert r.returncode != 0 and "environment_setup.sh" in r.stderr and not _harness_calls(stand_ins)


@pytest.mark.parametrize("model, builds", [("matrix_game3", True), ("sana_wm", True), ("lingbot_v2", False),
                                           ("dreamx", False)])
def test_flash_attn_says_it_builds_and_needs_nvcc_before_it_starts(model, builds, stand_ins):
    """torch 2.10 (MG-3) and 2.9.1 (SANA-WM) have no flash-attn wheel: the script says so and stops without nvcc
    before pip starts compiling. torch 2.6 with an unpinned flash-attn gets the version with a wheel (2.8.3)."""
    _, text = _plan_and_script(model, stand_ins["tmp"] / WEIRD, stand_ins["harness"])
    bare = text.replace(str(stand_ins["tmp"]), "<tmp>")  # the test's own folder name says "flash_attn"
    fa = [x for x in bare.splitlines() if not x.startswith("#") and "pip install" in x and "flash" in x
          and "grep" not in x]
    assert fa or model == "sana_wm"  # SANA-WM: upstream's environment_setup.sh installs it (the step's `builds`)
    assert ("no prebuilt wheel" in bare and "nvcc" in bare) == builds
    if model == "lingbot_v2":
        assert all("flash-attn==2.8.3" in x for x in fa)  # upstream leaves it open; 2.8.3 has torch 2.6 wheels
    if builds:
        (stand_ins["bin"] / "nvcc").unlink()
        r = _run(text, stand_ins, _template(model, stand_ins["tmp"]))
        assert r.returncode != 0 and "nvcc not found" in r.stderr and "compiles it" in r.stderr
        calls = [shlex.split(x) for x in (stand_ins["tmp"] / "calls.log").read_text().splitlines()]
        assert not any(c[0] == "python" and "install" in c and any(a.startswith("flash") for a in c)
                       for c in calls)  # the build never started


def test_hydra_value_round_trips_quotes_and_backslashes():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from harness.app.setup import hydra_value

    for v in ["/a b/#1, $(x)", "it's", "back\\slash", "end\\", "q\\'", "a=b,c"]:
        o = OverridesParser.create().parse_overrides([f"++x={hydra_value(v)}"])[0]
        assert o.value() == v, v
