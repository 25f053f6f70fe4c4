"""``python -m harness setup``: end to end offline against a local git repository and a local stand-in hub, and the
printed script of all nine models.

The end-to-end model is ``lingbot_v2`` with a test contract (same adapter, same launch facts) whose repository is a
git repository made here, whose environment recipe installs a local package (no index: ``PIP_NO_INDEX``), and
whose weights live in :class:`tests.support.standin.local_hub.LocalHub`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adapters import contracts
from tests.support import compose, run_cli
from tests.support.standin.local_hub import LocalHub

ROOT = Path(__file__).resolve().parents[3]  # the harness checkout the printed script's last line cds into
MODELS = contracts.available()  # the upstream models: the folders of adapters/ that hold a contract.yaml
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a", *args], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def world(tmp_path, monkeypatch):
    """An upstream git repository, a hub with the contract's weights, and a contract pointing at both."""
    up = tmp_path / "upstream"
    (up / "upstreampkg").mkdir(parents=True)
    (up / "upstreampkg" / "__init__.py").write_text("VALUE = 1\n")
    (up / "setup.py").write_text("from setuptools import setup\nsetup(name='upstreampkg', version='0', "
                                 "packages=['upstreampkg'])\n")
    (up / "localdep").mkdir()
    (up / "localdep" / "setup.py").write_text("from setuptools import setup\nsetup(name='localdep', version='0', "
                                              "py_modules=['localdep'])\n")
    (up / "localdep" / "localdep.py").write_text("OK = True\n")
    # flash_attn in a requirements file would be built in isolation (and here: looked up on an index that is off)
    (up / "requirements.txt").write_text("flash_attn==2.8.3\n-e ./localdep\n")
    (up / "generate.py").write_text("print('upstream')\n")
    subprocess.run(["git", "init", "-q", str(up)], check=True)
    _git(up, "add", ".")
    _git(up, "commit", "-qm", "pinned")
    pinned = _git(up, "rev-parse", "HEAD")
    (up / "generate.py").write_text("print('later')\n")
    _git(up, "commit", "-qam", "later")  # the branch moved on: setup must check out the pin, not HEAD

    hub = tmp_path / "hub"
    ck = hub / "robbyant" / "lingbot-world-v2-14b-causal-fast"
    (ck / "google" / "umt5-xxl").mkdir(parents=True)
    (ck / "google" / "umt5-xxl" / "tokenizer.json").write_text("{}")
    (ck / "transformers").mkdir()
    (ck / "transformers" / "diffusion_pytorch_model.safetensors").write_bytes(os.urandom(5000))  # an "LFS" file
    (ck / "models_t5_umt5-xxl-enc-bf16.pth").write_bytes(os.urandom(3000))
    (ck / "Wan2.1_VAE.pth").write_bytes(os.urandom(2000))
    (ck / "README.md").write_text("not needed")
    enc = hub / "org" / "text-encoder"
    enc.mkdir(parents=True)
    (enc / "config.json").write_text("{}")
    (enc / ".gated").write_text("")

    raw = yaml.safe_load(contracts.contract_path("lingbot_v2").read_text())
    raw["commit"] = pinned
    raw["imports"] = ["upstreampkg", "localdep"]
    raw["environment"] = {
        "python": PY, "torch": {"source": "test: no torch"},
        "steps": [{"requirements": "requirements.txt", "exclude": ["flash_attn", "flash-attn"], "source": "test"},
                  {"editable": ".", "no_deps": True, "source": "test"},
                  {"run": "python -c 'import localdep, upstreampkg'", "source": "test"}],
        "editable": [{"path": ".", "source": "test"}], "forks": []}
    raw["weights"] = [w for w in raw["weights"]] + [
        {"name": "text_encoder", "repo": "org/text-encoder", "hf_cache": True, "files": ["*"], "gated": True,
         "source": "test: fetched at run time"}]
    raw["hub_fetches"] = [{"repo": "org/text-encoder", "what": "a text encoder", "call": "from_pretrained",
                           "avoided_by": {"offline_cache": True}, "source": "test", "fix": "setup"}]
    raw["env"]["HF_HUB_OFFLINE"] = {"source": "test", "choices": ["1"]}
    cdir = tmp_path / "contracts"  # a folder of model folders, in place of adapters/
    (cdir / "lingbot_v2").mkdir(parents=True)
    (cdir / "lingbot_v2" / "contract.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    monkeypatch.setattr(contracts.loader, "ADAPTERS_DIR", cdir)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: nothing may come from an index
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")  # pip's spelling of "no build isolation" (setuptools is in the venv)
    monkeypatch.setenv("PIP_USE_PEP517", "0")  # setup.py develop: the venv has setuptools but no wheel
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the model's environment is its own
    return {"root": tmp_path / "models", "upstream": up, "pinned": pinned, "hub": hub, "tmp": tmp_path}


def _cfg(world, *extra: str) -> dict:
    return compose(["cmd=setup", "model=lingbot_v2", f"setup.root={world['root']}", f"setup.clone_url={world['upstream']}",
                    f"setup.python_bin={sys.executable}", f"model.upstream_commit={world['pinned']}",
                    "model.gpus_per_job=0", *extra])


@pytest.mark.slow  # builds a real virtual environment (about 8 s); test_setup_through_the_cli stays fast
def test_setup_end_to_end_offline(world, capsys):
    from harness.app.setup import run_setup

    hub = LocalHub(world["hub"], token="hf_test")
    logs: list[str] = []
    plan = run_setup(_cfg(world), hub=hub, log=logs.append)
    assert _git(plan.checkout, "rev-parse", "HEAD") == world["pinned"]  # the pin, not the branch head
    py = plan.python
    assert Path(py).is_file() and str(world["root"] / "envs" / "lingbot_v2") in py
    r = subprocess.run([py, "-c", "import localdep, upstreampkg, importlib.util as u; "
                        "print(u.find_spec('flash_attn') is None)"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "True"  # the local requirement in, flash_attn left out
    ck = Path(plan.paths["checkpoint"])
    assert ck == world["root"] / "weights" / "lingbot_v2" / "checkpoint"
    for f in ("models_t5_umt5-xxl-enc-bf16.pth", "Wan2.1_VAE.pth", "google/umt5-xxl/tokenizer.json",
              "transformers/diffusion_pytorch_model.safetensors"):
        assert (ck / f).read_bytes() == (world["hub"] / "robbyant/lingbot-world-v2-14b-causal-fast" / f).read_bytes()
    assert not (ck / "README.md").exists()  # only what the contract lists
    snaps = world["tmp"] / "hf" / "hub" / "models--org--text-encoder" / "snapshots"
    assert any(snaps.iterdir())  # the run-time fetch is served from the cache
    assert logs[-2] == "lingbot_v2 is ready" and "checkpoint: " in logs[-1] and f"python: \"{py}\"" in logs[-1]  # quoted YAML
    assert any("pins no revision" in x for x in logs)

    # rerun: everything present and checked, nothing downloaded again
    mine = [d for d in hub.downloads if d.startswith("robbyant/")]
    run_setup(_cfg(world, "setup.steps=[weights]"), hub=hub, log=logs.append)
    assert [d for d in hub.downloads if d.startswith("robbyant/")] == mine  # nothing fetched twice


def test_setup_resumes_and_checks_downloads(world):
    from harness.app.setup import SetupError, make_plan, run_weights

    hub = LocalHub(world["hub"], token="hf_test")
    plan = make_plan(_cfg(world, "setup.steps=[weights]"))
    ck = Path(plan.paths["checkpoint"])
    big = "transformers/diffusion_pytorch_model.safetensors"
    src = (world["hub"] / "robbyant/lingbot-world-v2-14b-causal-fast" / big).read_bytes()
    (ck / "transformers").mkdir(parents=True)
    (ck / (big + ".incomplete")).write_bytes(src[:1000])  # a killed download
    hub.corrupt.add("Wan2.1_VAE.pth")
    with pytest.raises(SetupError, match=r"Wan2.1_VAE.pth: sha256 .* the hub says .*removed, rerun setup"):
        run_weights(plan, hub, log=lambda m: None)
    assert not (ck / "Wan2.1_VAE.pth").exists()
    run_weights(plan, hub, log=lambda m: None)
    assert big in hub.resumed and (ck / big).read_bytes() == src
    tampered = ck / "models_t5_umt5-xxl-enc-bf16.pth"
    tampered.write_bytes(b"0" * tampered.stat().st_size)  # same size, wrong bytes
    before = [d for d in hub.downloads if d.startswith("robbyant/")]
    run_weights(plan, hub, log=lambda m: None)
    after = [d for d in hub.downloads if d.startswith("robbyant/")]
    assert after[len(before):] == []  # the record still vouches for a same-size file (no re-hash of 50 GB files)
    (ck / ".harness-weights.json").unlink()  # without the record every file is checked against the hub again
    run_weights(plan, hub, log=lambda m: None)
    after = [d for d in hub.downloads if d.startswith("robbyant/")]
    assert after[len(before):] == ["robbyant/lingbot-world-v2-14b-causal-fast/models_t5_umt5-xxl-enc-bf16.pth"]


def test_a_gated_repository_says_how_to_log_in(world):
    from harness.app.setup import SetupError, make_plan, run_weights

    plan = make_plan(_cfg(world, "setup.steps=[weights]"))
    with pytest.raises(SetupError) as e:
        run_weights(plan, LocalHub(world["hub"], token=None), log=lambda m: None)
    msg = str(e.value)
    assert "org/text-encoder is gated" in msg and "https://huggingface.co/org/text-encoder" in msg
    assert "hf auth login" in msg and "huggingface-cli login" in msg and "HF_TOKEN" in msg


def test_an_existing_checkout_is_verified_not_moved(world):
    from harness.app.setup import SetupError, make_plan, run_checkout

    mine = world["tmp"] / "mine"
    subprocess.run(["git", "clone", "-q", str(world["upstream"]), str(mine)], check=True)
    plan = make_plan(_cfg(world, f"+local.models.lingbot_v2.upstream_dir={mine}", "setup.steps=[checkout]"))
    with pytest.raises(SetupError, match=rf"is at .*, the contract was read at {world['pinned'][:12]}: git -C {mine} "
                                         rf"checkout {world['pinned']}"):
        run_checkout(plan, log=lambda m: None)
    _git(mine, "checkout", "-q", world["pinned"])
    run_checkout(plan, log=lambda m: None)  # verified
    assert _git(mine, "rev-parse", "HEAD") == world["pinned"]


@pytest.mark.slow  # builds a real virtual environment (about 8 s); test_setup_through_the_cli stays fast
def test_the_printed_script_does_what_setup_does(world):
    """The checkout and environment sections of print=true, run with bash, give the same result as running."""
    from harness.app.setup import make_plan, script

    plan = make_plan(_cfg(world, "setup.steps=[checkout,environment]", "print=true"))
    text = script(plan)
    r = subprocess.run(["bash", "-c", text], capture_output=True, text=True, env={**os.environ})
    assert r.returncode == 0, r.stderr[-2000:]
    assert _git(plan.checkout, "rev-parse", "HEAD") == world["pinned"]
    r = subprocess.run([plan.python, "-c", "import localdep, upstreampkg"], capture_output=True)
    assert r.returncode == 0


# -- print=true for the nine models ------------------------------------------------------------------------------


def _print(model: str, root: Path, *extra: str) -> str:
    from harness.app.setup import make_plan, script

    return script(make_plan(compose(["cmd=setup", f"model={model}", f"setup.root={root}", "print=true", *extra])))


@pytest.mark.parametrize("model", MODELS)
def test_print_gives_a_correct_script_for_every_model(model, tmp_path):
    c = contracts.load(model)
    text = _print(model, tmp_path)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0  # valid bash
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]
    env_lines = [x for x in text.split("# -- environment")[1].split("# -- weights")[0].splitlines()
                 if x and not x.startswith("#")]
    # checkout: the repository at the pinned commit
    assert any(f"git clone --no-checkout https://github.com/{c.repo}.git" in x for x in lines)
    assert any(x.endswith(f"checkout --detach {c.commit}") for x in lines)
    # environment: the contract's Python, then every non-optional step, in order, each once
    env = c.environment
    if env.python:
        assert any(f"python{env.python} -m venv" in x for x in lines)
    pos = []
    for st in env.steps:
        key = st.pip or (f"-r {st.requirements}" if st.requirements and not st.exclude else st.requirements) \
            or (st.run or "").split("&&")[0].strip()
        if st.pip and re.fullmatch(r"flash-attn --no-build-isolation", st.pip):  # unpinned: the version with wheels
            wheel = tuple(int(x) for x in env.torch.version.split(".")[:2]) <= (2, 8)
            key = "flash-attn==2.8.3 --no-build-isolation" if wheel else "flash-attn --no-build-isolation"
        if st.requirements and st.exclude:
            key = f"grep -viE '^[[:space:]]*(flash_attn|flash\\-attn)([^A-Za-z0-9_.-]|$)' {st.requirements}"
        if st.fork:
            fork = next(f for f in env.forks if f.package == st.fork)
            key = f"git+{fork.url}" if fork.url else f"HARNESS_FORK_{st.fork.upper()}"
        if st.editable:
            key = f"-e {tmp_path / 'repos' / c.repo.split('/')[1]}"
        if st.torch:
            key = f"torch=={env.torch.version}" if env.torch.version else "install torch"
        if st.optional:
            assert not any(str(key) in x and "pip install" in x for x in env_lines), key
            continue
        hits = [i for i, x in enumerate(env_lines) if str(key) in x]
        assert hits, (model, key)
        pos.append(hits[0])
    assert pos == sorted(pos) and len(set(pos)) == len(pos), "steps keep the recipe's order"
    if env.torch.index_url and any(st.torch for st in env.steps):
        assert any(env.torch.index_url in x and "torch" in x for x in env_lines)
    fa = [i for i, x in enumerate(lines) if re.search(r"pip install .*flash[-_]attn", x)]
    torch_line = next((i for i, x in enumerate(lines) if "torch" in x and "pip install" in x or "env_setup.sh" in x), None)
    assert all("--no-build-isolation" in lines[i] and i > torch_line for i in fa)
    assert all("flash" in x and "grep -viE" in x for x in lines if " -r " in x)  # requirements without flash-attn
    # weights: every needed weight with its repository and place; gated ones say how to get access
    for w in c.weights:
        if w.when or not w.required:
            continue
        hit = [x for x in text.splitlines() if w.repo in x and not x.startswith("#")]
        assert hit, (model, w.repo)
        if w.hub == "huggingface" and not w.hf_cache:  # the harness's huggingface_hub, into the planned folder
            assert any(x.startswith('"$HARNESS_PY" -c ') and "local_dir=" in x for x in hit)
        if w.gated:
            assert "hf auth login" in text and f"https://huggingface.co/{w.repo}" in text
    assert lines[-1].startswith(f'( cd {ROOT} && "$HARNESS_PY" -m harness setup model={model} '
                                "'setup.steps=[weights,readiness]'")


def test_print_names_what_upstream_leaves_open(tmp_path):
    evoke = _print("evoke", tmp_path)
    assert "HARNESS_FORK_DIFFUSERS:?diffusers: upstream names no source" in evoke
    assert "pip install git+https://github.com/fork/diffusers@abc" in _print(
        "evoke", tmp_path, "+setup.forks.diffusers=git+https://github.com/fork/diffusers@abc")
    mg3 = _print("matrix_game3", tmp_path)
    assert "--use_async_vae" not in mg3 and "Matrix-Game-3 &&" in mg3  # requirements from the subfolder
    sana = _print("sana_wm", tmp_path)
    assert 'snapshot_download(repo_id="Efficient-Large-Model/gemma-2-2b-it"' in sana and "cache_dir=" in sana
    env = sana.split("# -- environment")[1].split("# -- weights")[0]
    # the pin's own instruction (docs/sana_wm.md:40), in the venv, after the nvcc check its flash-attn build needs
    assert env.index("command -v nvcc") < env.index("SANA_SKIP_TE=1 bash ./environment_setup.sh") < \
        env.index('torch.__version__.split("+")[0] == "2.9.1"')
    assert "requirements" not in env and "sana_wm.txt" not in sana
    yume = _print("yume", tmp_path)
    assert yume.index("env_setup.sh") < yume.index("requirements.txt") and "InternVL" not in yume.split("# -- weights")[1]
    assert "InternVL3-2B-Instruct" in _print("yume", tmp_path, "model.prompt_refinement=true")
    dreamx = _print("dreamx", tmp_path)
    assert "'av<14'" in dreamx and dreamx.index("flash_attn==2.8.3") < dreamx.index("'av<14'")
    assert "Wan2.2-TI2V-5B" in dreamx and f'local_dir="{tmp_path / "repos" / "DreamX-World" / "Wan2.2-TI2V-5B"}"' in dreamx


def test_setup_through_the_cli(tmp_path, monkeypatch, capsys):
    from tests.support.cli import in_process_cli

    cli = in_process_cli(monkeypatch, tmp_path, capsys)
    r = cli("setup", "model=dreamx", f"setup.root={tmp_path}", "print=true")
    assert r.code == 0 and r.out.startswith("#!/usr/bin/env bash"), r.err[-2000:]
    r = cli("setup", "model=reference", "print=true")
    assert r.code == 2 and "contract" in r.err and "Traceback" not in r.err
    r = cli("setup", "model=evoke", f"setup.root={tmp_path}", "setup.steps=[environment]")
    assert r.code == 2 and "setup.forks.diffusers" in r.err  # refused before anything is installed
    assert not (tmp_path / "envs").exists()


def test_without_huggingface_hub_setup_says_which_extra_brings_it(world, monkeypatch):
    """One sentence: the package, the extra that installs it, the alternative (print=true); not a complete message
    with the generic "needs a package ...; install it" appended."""
    from harness.app.setup import run_setup
    from harness.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    with pytest.raises(MissingDependencyError) as e:
        run_setup(_cfg(world, "setup.steps=[weights]"))
    msg = str(e.value)
    assert msg.count("needs a package") == 1 and "install it" not in msg
    assert "huggingface_hub" in msg and "pip install -e '.[eval]'" in msg and "print=true" in msg
    assert msg.startswith("setup model=lingbot_v2") and e.value.extra == "eval"
