"""Setup at the pin, proven against upstream's tree (issue 43).

Every model has ``adapters/<model>/upstream_tree.json``, the listing of upstream's files at the pinned commit made by
``python -m adapters.contracts.tree`` from a fetched checkout. Everything the contract and its printed setup script
name inside the checkout (the entry script, requirements files, the scripts a recipe step runs, editable folders,
files checked in place) and every line the ``policies``, ``trained_regime`` and ``day_one`` sections cite must be
in it; a weight file name must be named by upstream's own text at the pin or be declared ``hub_confirmed``. A path
renamed upstream fails here with its name. The tool itself is tested on a git repository made here.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from adapters import contracts
from adapters.contracts import tree
from adapters.contracts.tree import TreeListing

MODELS = contracts.available(contracts.ADAPTERS_DIR)
#: models whose pin no reachable snapshot holds: the listing is of the nearest commit and says why (docs/real-models.md)
SUBSTITUTES = {"matrix_game3": "71c3cd7f7413", "sana_wm": "9f7141168fe4"}
LISTINGS = tree.all_listings()


def test_every_upstream_model_has_a_listing():
    assert MODELS and set(LISTINGS) == set(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_the_listing_is_of_the_pin_or_says_why_not(model):
    c, listing = contracts.load(model), LISTINGS[model]
    assert (listing.model, listing.repo, listing.commit) == (model, c.repo, c.commit)
    assert re.fullmatch(r"[0-9a-f]{40}", listing.listed_commit) and len(listing.files) > 10
    if model in SUBSTITUTES:  # the listing names the commit it lists, why, and how to regenerate it from the pin
        assert listing.listed_commit.startswith(SUBSTITUTES[model]) and not listing.exact
        assert c.commit[:12] in listing.note and "Regenerate" in listing.note
    else:
        assert listing.exact and not listing.note


@pytest.mark.parametrize("model", MODELS)
def test_everything_the_contract_and_its_setup_name_is_in_upstream_tree(model):
    assert tree.problems(contracts.load(model), LISTINGS[model], LISTINGS) == []


def _renamed(listing: TreeListing, path: str) -> TreeListing:
    """``listing`` with ``path`` (a file, or every file under a folder) moved to ``path + '.renamed'``."""
    files = {}
    for f, v in listing.files.items():
        moved = f == path or f.startswith(path + "/")
        files[(path + ".renamed" + f[len(path):]) if moved else f] = v
    return TreeListing(listing.model, listing.repo, listing.commit, listing.listed_commit, listing.source, files,
                       listing.names, listing.note)


@pytest.mark.parametrize("model", MODELS)
def test_a_path_renamed_upstream_fails_with_its_name(model):
    c, listing = contracts.load(model), LISTINGS[model]
    named = [p.path for p in tree.named_paths(c) if p.path and p.kind != "installable"]
    named += [f"{p.path}/pyproject.toml".lstrip("/") for p in tree.named_paths(c) if p.kind == "installable"
              if listing.has_file(f"{p.path}/pyproject.toml".lstrip("/"))]
    cited = {tree._resolve(listing, c, m["path"]) for _, m in tree.citations(c) if not m["repo"] or
             m["repo"].lower() == c.repo.lower()}
    targets = sorted(set(named) | {p for p in cited if p})
    assert targets, model
    for path in targets:
        found = tree.problems(c, _renamed(listing, path), LISTINGS)
        assert any(path.split("/")[-1] in x for x in found), (model, path, found)


def test_the_old_sana_recipe_fails_against_the_pin():
    """The recipe of 24dd596e (requirements/sana_wm.txt) names a file the pin's line of the repository never had."""
    raw = yaml.safe_load(contracts.contract_path("sana_wm").read_text())
    raw["environment"]["steps"].append({"requirements": "requirements/sana_wm.txt", "source": "24dd596e"})
    found = tree.problems(contracts.contract_from_raw(raw, "sana_wm"), LISTINGS["sana_wm"], LISTINGS)
    assert any("requirements/sana_wm.txt is not in NVlabs/Sana" in x for x in found), found


def test_sana_follows_the_pins_own_instruction():
    steps = contracts.load("sana_wm").environment.steps
    assert [s.run for s in steps if s.run] == ["SANA_SKIP_TE=1 bash ./environment_setup.sh"]
    assert not any(s.requirements for s in steps) and LISTINGS["sana_wm"].has_file("environment_setup.sh")


def test_a_weight_name_upstream_does_not_name_must_be_hub_confirmed():
    """DreamX's generator file name is named by no upstream text: the contract says only the hub confirms it, and
    without that declaration the check fails; a name upstream does name may not be declared hub-only."""
    raw = yaml.safe_load(contracts.contract_path("dreamx").read_text())
    entry = next(e for e in raw["checkpoint"] if e["key"] == "checkpoint")
    assert entry["hub_confirmed"] == ["model.safetensors"] and LISTINGS["dreamx"].names["model.safetensors"] == ()
    del entry["hub_confirmed"]
    found = tree.problems(contracts.contract_from_raw(raw, "dreamx"), LISTINGS["dreamx"], LISTINGS)
    assert any("'model.safetensors'" in x and "hub_confirmed" in x for x in found), found
    raw = yaml.safe_load(contracts.contract_path("lingbot_v2").read_text())
    raw["checkpoint"][0]["hub_confirmed"] = ["Wan2.1_VAE.pth"]
    found = tree.problems(contracts.contract_from_raw(raw, "lingbot_v2"), LISTINGS["lingbot_v2"], LISTINGS)
    assert any("'Wan2.1_VAE.pth' is hub_confirmed, but upstream names it" in x for x in found), found


def test_a_citation_past_the_end_of_its_file_or_of_another_commit_fails():
    raw = yaml.safe_load(contracts.contract_path("lingbot_v2").read_text())
    lines = LISTINGS["lingbot_v2"].files["run_fast.sh"][1]
    raw["policies"]["native"]["source"] = f"robbyant/lingbot-world-v2@2648877f763a run_fast.sh:{lines + 1}"
    raw["trained_regime"][0]["source"] = "robbyant/lingbot-world-v2@0123456789ab run_fast.sh:20"
    raw["trained_regime"][1]["source"] = "the launcher"
    found = tree.problems(contracts.contract_from_raw(raw, "lingbot_v2"), LISTINGS["lingbot_v2"], LISTINGS)
    assert any(f"is past its {lines} lines" in x for x in found)
    assert any("cites commit 0123456789ab" in x for x in found)
    assert any("cites no upstream path:line" in x for x in found), found


@pytest.mark.parametrize("model", MODELS)
def test_the_printed_script_names_only_paths_of_the_tree(model, tmp_path):
    """Every path under the checkout that ``setup print=true`` writes (a folder it cds into, a file it tests or
    installs) is in the listing: the script and the contract's named paths cannot drift apart."""
    from harness.app.setup import make_plan, script
    from tests.support import compose

    co = "/upstream-checkout"
    over = ["cmd=setup", f"model={model}", "print=true", f"+local.models.{model}.upstream_dir={co}",
            f"setup.root={tmp_path}"] + (["+setup.forks.diffusers=x"] if model == "evoke" else [])
    text = script(make_plan(compose(over)))
    listing = LISTINGS[model]
    weights_into = {w.into for w in contracts.load(model).weights if w.key == "upstream_dir" and w.hub != "checkout"}
    seen = re.findall(re.escape(co) + r"/([^\s'\")]+)", text)  # folders it cds into, files it tests, -e paths
    for cwd, rest in re.findall(r"cd " + re.escape(co) + r"/?([^\s']*) && (.*)", text):  # and relative to the cd
        seen += [f"{cwd}/{f}".strip("/") for f in re.findall(r"test -f (\S+) \|\||bash \./(\S+)", rest) for f in f if f]
    assert seen
    for p in seen:
        if p and p != ".git" and not any(p == w or p.startswith(w + "/") for w in weights_into if w):
            assert listing.has_file(p) or listing.has_dir(p), (model, p)


# -- the tool, on a repository made here ----------------------------------------------------------------------------


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"}).stdout


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "up"
    (r / "wan" / "configs").mkdir(parents=True)
    files = {"run.sh": b"torchrun generate.py --local_attn_size 18\n",
             "wan/configs/cfg.py": b"vae = 'Wan2.1_VAE.pth'\nimport transformers\nckpt = 'transformers'",
             "img.png": b"\x89PNG\0\0\x01binary", "README.md": b"", "docs/a b.md": b"x\ny\n"}
    (r / "docs").mkdir()
    for k, v in files.items():
        (r / k).write_bytes(v)
    _git("init", "-q", cwd=r)
    _git("add", ".", cwd=r)
    _git("commit", "-q", "-m", "one", cwd=r)
    return r, _git("rev-parse", "HEAD", cwd=r).strip(), files


def test_read_tree_lists_sizes_lines_and_names_from_a_checkout_and_a_git_dir(repo, tmp_path):
    r, commit, files = repo
    bare = tmp_path / "bare.git"
    _git("clone", "-q", "--bare", str(r), str(bare), cwd=tmp_path)
    for source in (r, bare):
        listed, names = tree.read_tree(source, commit, ("Wan2.1_VAE.pth", "transformers", "model.pt"))
        assert set(listed) == set(files)
        for path, data in files.items():
            lines = None if b"\0" in data else len(data.splitlines())
            assert listed[path] == (len(data), lines), path
        assert names == {"Wan2.1_VAE.pth": ("wan/configs/cfg.py:1",), "transformers": ("wan/configs/cfg.py:3",),
                         "model.pt": ()}  # `import transformers` names no folder


def test_a_commit_the_source_lacks_and_a_non_repository_are_refused(repo, tmp_path):
    r, _, _ = repo
    with pytest.raises(tree.TreeError, match="is not in .*git fetch origin 0123"):
        tree.read_tree(r, "0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(tree.TreeError, match="neither a git checkout nor a git directory"):
        tree.read_tree(tmp_path, "HEAD")


def test_the_command_writes_a_listing_that_reads_back(repo, tmp_path, capsys):
    r, commit, files = repo
    out = tmp_path / "listing.json"
    assert tree.main([str(r), "--model", "lingbot_v2", "--commit", commit, "--out", str(out)]) == 2  # no --note
    assert "--note" in capsys.readouterr().err and not out.exists()
    assert tree.main([str(r), "--model", "lingbot_v2", "--commit", commit, "--note", "a test tree", "--out",
                      str(out)]) == 0
    back = TreeListing.from_json(json.loads(out.read_text()))
    assert back.listed_commit == commit and back.commit == contracts.load("lingbot_v2").commit and not back.exact
    assert set(back.files) == set(files) and back.names["Wan2.1_VAE.pth"] == ("wan/configs/cfg.py:1",)
    # what the contract names that this tree lacks is reported (generate.py is not in it)
    assert "entry.script: generate.py is not in" in capsys.readouterr().out


@pytest.mark.parametrize("model", MODELS)
def test_every_contract_discloses_its_trained_regime_and_its_day_one_run(model):
    """Each caveat cites upstream (test_everything_the_contract... resolves the line) and names only labels the
    adapter runs; the day-one section says how short a run upstream allows."""
    from adapters.base import build_adapter
    from harness.config_groups import group_yaml

    c = contracts.load(model)
    assert c.trained_regime and c.day_one is not None
    runs = set(build_adapter(group_yaml("model", model)).supported_contexts())
    for r in c.trained_regime:
        assert r.what and r.upstream and r.ours and set(r.policies) <= runs, r
