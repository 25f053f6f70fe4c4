"""The rules of ``python -m harness setup`` (harness/app/setup.py) one at a time, in this process: which hub files a
pattern takes, how a downloaded file is checked against the hub's checksums (and what the message says), the resume
record, the flash-attn preflight and its torch boundaries, fork sources, the torch line, Hydra quoting."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.app import setup
from harness.app.setup import RemoteFile, SetupError, WeightJob


# -- patterns and checksums -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, patterns, hit", [
    ("a/b.bin", ["a/"], True), ("ab/c", ["a/"], False), ("a", ["a/"], False), ("x.json", ["*.json"], True),
    ("d/x.json", ["*.json"], True), ("x.jsonl", ["*.json"], False), ("a[1].bin", ["a[1].bin"], True),
    ("x", [], False), ("x", ["y", "x"], True), ("x", ("x",), True),
])
def test_a_pattern_takes_what_huggingface_hubs_allow_patterns_takes(path, patterns, hit):
    assert setup.matches(path, patterns) is hit


def test_the_git_blob_id_is_gits_own(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"hello\x00world" * 1000)
    git = subprocess.run(["git", "hash-object", str(p)], capture_output=True, text=True, check=True).stdout.strip()
    assert setup.git_blob_sha1(p) == git
    assert setup.sha256(p) == hashlib.sha256(p.read_bytes()).hexdigest()
    big = tmp_path / "big"
    big.write_bytes(bytes(range(256)) * (1 << 15) + b"tail")  # more than one 4 MiB read
    assert setup.sha256(big) == hashlib.sha256(big.read_bytes()).hexdigest()
    assert setup.git_blob_sha1(big) == subprocess.run(["git", "hash-object", str(big)], capture_output=True,
                                                      text=True, check=True).stdout.strip()


def test_a_file_is_checked_by_size_then_by_the_hubs_checksum(tmp_path):
    p = tmp_path / "w.bin"
    assert setup._verify(p, RemoteFile("w.bin", 3)) == "missing"
    p.write_bytes(b"abc")
    sha, blob = hashlib.sha256(b"abc").hexdigest(), setup.git_blob_sha1(p)
    assert setup._verify(p, RemoteFile("w.bin", 3, sha)) is None
    assert setup._verify(p, RemoteFile("w.bin", None, sha)) is None
    assert setup._verify(p, RemoteFile("w.bin", 4, sha)) == "size 3, the hub says 4"
    assert setup._verify(p, RemoteFile("w.bin", 3, "f" * 64)) == f"sha256 {sha[:12]}, the hub says ffffffffffff"
    assert setup._verify(p, RemoteFile("w.bin", 3, None, blob)) is None
    assert setup._verify(p, RemoteFile("w.bin", 3, None, "e" * 40)) == f"git blob {blob[:12]}, the hub says eeeeeeeeeeee"
    assert setup._verify(p, RemoteFile("w.bin", 3)) is None  # no checksum: the size is all there is
    assert setup._verify(p, RemoteFile("w.bin")) is None
    (tmp_path / "d").mkdir()
    assert setup._verify(tmp_path / "d", RemoteFile("d")) == "missing"  # a folder is not the file


# -- downloads ------------------------------------------------------------------------------------------------------
class Hub:
    """The hub's files at one commit; a download writes ``served`` (the real bytes unless told otherwise)."""

    def __init__(self, files: dict[str, bytes], commit: str = "c0ffee" * 6 + "abcd"):
        self.files_, self.commit = files, commit
        self.served = dict(files)
        self.downloads: list[str] = []
        self.snapshots: list[tuple] = []

    def files(self, repo, revision):
        return self.commit, [RemoteFile(p, len(b), hashlib.sha256(b).hexdigest()) for p, b in self.files_.items()]

    def download(self, repo, commit, path, local_dir):
        self.downloads.append(path)
        (Path(local_dir) / path).parent.mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / path).write_bytes(self.served[path])
        return Path(local_dir) / path

    def snapshot(self, repo, commit, patterns, cache_dir):
        self.snapshots.append((repo, commit, list(patterns), cache_dir))
        snap = Path(cache_dir) / "snap"
        for p, b in self.served.items():
            (snap / p).parent.mkdir(parents=True, exist_ok=True)
            (snap / p).write_bytes(b)
        return snap


def _weight(**kw):
    base = {"name": "dit", "repo": "org/model", "hub": "huggingface", "hf_cache": False, "source": "upstream README",
            "gated": False, "size_gb": None}
    return SimpleNamespace(**{**base, **kw})


def _plan(tmp_path, **kw):
    return SimpleNamespace(model="m", checkout=tmp_path / "checkout", hf_cache=tmp_path / "hf", python="py",
                           env_dir=None, jobs=[], notes=[], **kw)


def test_a_weight_is_downloaded_checked_and_recorded_then_not_fetched_again(tmp_path):
    hub = Hub({"a/x.bin": b"x" * 10, "y.json": b"{}", "other.txt": b"no"})
    job = WeightJob(_weight(), tmp_path / "w", ["a/", "*.json"], "main")
    logs: list[str] = []
    assert setup.fetch_weight(_plan(tmp_path), job, hub, logs.append) == {"repo": "org/model", "commit": hub.commit}
    assert sorted(hub.downloads) == ["a/x.bin", "y.json"] and not (tmp_path / "w" / "other.txt").exists()
    assert logs == [f"dit: org/model@{hub.commit[:12]} -> {tmp_path / 'w'} (2 files, checksums ok)"]
    record = json.loads((tmp_path / "w" / setup.RECORD).read_text())
    assert record == {"files": {f"org/model@{hub.commit}/a/x.bin": hashlib.sha256(b"x" * 10).hexdigest(),
                                f"org/model@{hub.commit}/y.json": hashlib.sha256(b"{}").hexdigest()}}
    hub.downloads.clear()
    setup.fetch_weight(_plan(tmp_path), job, hub, logs.append)
    assert hub.downloads == []  # recorded and the same size: not read again
    (tmp_path / "w" / "y.json").write_bytes(b"{ }")  # edited since: the size differs, fetched again
    setup.fetch_weight(_plan(tmp_path), job, hub, logs.append)
    assert hub.downloads == ["y.json"]
    hub.downloads.clear()
    (tmp_path / "w" / "a" / "x.bin").unlink()  # recorded but gone
    setup.fetch_weight(_plan(tmp_path), job, hub, logs.append)
    assert hub.downloads == ["a/x.bin"]


def test_a_file_already_there_and_correct_is_recorded_without_a_download(tmp_path):
    hub = Hub({"x.bin": b"abc"})
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "x.bin").write_bytes(b"abc")
    (tmp_path / "w" / setup.RECORD).write_text("not json")  # an unreadable record counts as empty
    setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["x.bin"], "main"), hub, print)
    assert hub.downloads == [] and json.loads((tmp_path / "w" / setup.RECORD).read_text())["files"]


def test_a_record_of_another_checksum_is_not_trusted(tmp_path):
    hub = Hub({"x.bin": b"abc"})
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "x.bin").write_bytes(b"abd")  # same size, other bytes
    (tmp_path / "w" / setup.RECORD).write_text(json.dumps({"files": {f"org/model@{hub.commit}/x.bin": "old"}}))
    setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["x.bin"], "main"), hub, print)
    assert hub.downloads == ["x.bin"] and (tmp_path / "w" / "x.bin").read_bytes() == b"abc"


def test_a_download_that_arrives_damaged_is_removed_and_named(tmp_path):
    hub = Hub({"x.bin": b"abc"})
    hub.served["x.bin"] = b"abX"
    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["x.bin"], "main"), hub, print)
    got = hashlib.sha256(b"abX").hexdigest()[:12]
    assert str(e.value) == (f"org/model/x.bin: sha256 {got}, the hub says {hashlib.sha256(b'abc').hexdigest()[:12]} "
                            "after download; removed, rerun setup")
    assert not (tmp_path / "w" / "x.bin").exists()


def test_a_pattern_that_matches_nothing_is_an_error_naming_it(tmp_path):
    hub = Hub({"x.bin": b"abc"})
    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["*.pt"], "v1"), hub, print)
    assert str(e.value) == f"dit: nothing in org/model@{hub.commit[:12]} matches ['*.pt'] (upstream README)"


def test_a_cache_weight_is_snapshotted_and_checked_in_the_cache(tmp_path):
    hub = Hub({"config.json": b"{}", "skip.md": b"x"})
    job = WeightJob(_weight(hf_cache=True), None, ["*.json"], "main")
    logs: list[str] = []
    assert setup.fetch_weight(_plan(tmp_path), job, hub, logs.append) == {"repo": "org/model", "commit": hub.commit}
    assert hub.snapshots == [("org/model", hub.commit, ["*.json"], tmp_path / "hf")]
    assert logs == [f"org/model@{hub.commit[:12]} in the Hugging Face cache {tmp_path / 'hf'} (1 files, checked)"]
    hub.served["config.json"] = b"{x"
    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_plan(tmp_path), job, hub, logs.append)
    assert str(e.value).startswith("org/model: checksum mismatch in the cache: config.json: sha256 ")


def test_a_checkout_weight_must_be_in_the_checkout(tmp_path):
    (tmp_path / "checkout" / "ckpt").mkdir(parents=True)
    (tmp_path / "checkout" / "ckpt" / "a.pt").write_bytes(b"")
    job = WeightJob(_weight(hub="checkout"), tmp_path / "checkout" / "ckpt", ["a.pt"], "main")
    assert setup.fetch_weight(_plan(tmp_path), job, Hub({}), print) == {}
    job = WeightJob(_weight(hub="checkout"), tmp_path / "checkout" / "ckpt", ["a.pt", "b.pt", "c.pt"], "main")
    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_plan(tmp_path), job, Hub({}), print)
    assert str(e.value) == f"dit: the checkout {tmp_path / 'checkout'} lacks b.pt, c.pt (upstream README)"


def test_run_weights_says_each_note_then_fetches_every_job(tmp_path):
    hub = Hub({"x.bin": b"abc"})
    jobs = [WeightJob(_weight(), tmp_path / d, ["x.bin"], "main") for d in ("a", "b")]
    plan = _plan(tmp_path)
    plan.jobs, plan.notes = jobs, ["pin it"]
    logs: list[str] = []
    setup.run_weights(plan, hub, logs.append)
    assert logs[0] == "note: pin it" and len(logs) == 3 and hub.downloads == ["x.bin", "x.bin"]


# -- the environment recipe ------------------------------------------------------------------------------------------
def _flash_plan(torch_version):
    torch = SimpleNamespace(version=torch_version)
    return SimpleNamespace(python="/env/bin/python", contract=SimpleNamespace(
        environment=SimpleNamespace(torch=torch)))


@pytest.mark.parametrize("tv", ["2.4.0", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.8"])
def test_flash_attn_left_open_is_pinned_to_the_wheel_release_for_a_torch_with_wheels(tv):
    assert setup.flash_attn_preflight(_flash_plan(tv), "flash-attn --no-build-isolation") == [
        ("flash-attn==2.8.3 --no-build-isolation", "")]
    assert setup.flash_attn_preflight(_flash_plan(tv), "x 'flash_attn' y") == [("x flash-attn==2.8.3 y", "")]
    assert setup.flash_attn_preflight(_flash_plan(tv), "flash-attn==2.7.4") == []  # upstream's pin is kept


@pytest.mark.parametrize("tv", ["2.3.1", "2.9.0", "2.10.0", None, "3.0"])
def test_flash_attn_without_a_wheel_for_the_torch_says_it_compiles_and_needs_nvcc(tv):
    lines = setup.flash_attn_preflight(_flash_plan(tv), "packaging flash-attn>=2.6")
    assert [c for c, _ in lines] == [lines[0][0], "nvcc must be on PATH before the build starts",
                                     "ninja makes the build parallel (without it, hours)"]
    assert lines[0][0].startswith(f"flash-attn has no prebuilt wheel for torch {tv or '(unpinned)'} (flash-attn 2.8.3 "
                                  "ships them for torch 2.4-2.8;")
    assert lines[0][1] == "echo " + setup._q("setup: " + lines[0][0]) + " >&2"
    assert lines[1][1].startswith("command -v nvcc >/dev/null || { echo ") and lines[1][1].endswith(" >&2; exit 1; }")
    assert lines[2][1] == "/env/bin/python -m pip install ninja"


@pytest.mark.parametrize("args", ["torch numpy", "my-flash-attn", "flash-attn-x", "flash_attn.ext", "xflash_attn"])
def test_a_pip_step_without_flash_attn_needs_no_preflight(args):
    assert setup.flash_attn_preflight(_flash_plan("2.9.0"), args) == []


def test_a_fork_comes_from_the_users_spec_else_upstreams_url_at_its_ref():
    plan = SimpleNamespace(forks={"pkg": "/src/pkg"})
    fork = SimpleNamespace(package="pkg", url="https://g/x.git", ref="abc")
    assert setup.fork_spec(plan, fork) == "/src/pkg"
    plan.forks = {}
    assert setup.fork_spec(plan, fork) == "git+https://g/x.git@abc"
    assert setup.fork_spec(plan, SimpleNamespace(package="pkg", url="https://g/x.git", ref="1.2.3")) == \
        "git+https://g/x.git"  # a version, not a git ref
    assert setup.fork_spec(plan, SimpleNamespace(package="pkg", url="https://g/x.git", ref="v1.2")) == \
        "git+https://g/x.git@v1.2"
    assert setup.fork_spec(plan, SimpleNamespace(package="pkg", url="https://g/x.git", ref=None)) == "git+https://g/x.git"
    assert setup.fork_spec(plan, SimpleNamespace(package="pkg", url=None, ref="abc")) is None


def test_the_torch_line_pins_torch_and_its_companions_on_the_recipes_index():
    spec = SimpleNamespace(version="2.6.0", companions={"torchvision": "0.21.0", "torchaudio": None},
                           index_url="https://download.pytorch.org/whl/cu124")
    assert setup._torch_line(spec) == ("install torch==2.6.0 torchvision==0.21.0 torchaudio "
                                       "--index-url https://download.pytorch.org/whl/cu124")
    assert setup._torch_line(SimpleNamespace(version=None, companions={}, index_url=None)) == "install torch"


@pytest.mark.parametrize("value, quoted", [
    ("plain", "'plain'"), ("a,b c", "'a,b c'"), ("it's", "'it\\'s'"), ("a\\'b", "'a\\\\\\'b'"),
    ("end\\", "'end\\\\'"), ("mid\\dle", "'mid\\dle'"), (3, "'3'")])
def test_a_hydra_value_is_single_quoted_with_quotes_and_trailing_backslashes_escaped(value, quoted):
    assert setup.hydra_value(value) == quoted


def test_a_path_hydra_would_interpolate_is_refused():
    with pytest.raises(setup.ConfigError, match=r"'/a/\$\{x\}': a path with '\$\{' would be read by Hydra"):
        setup.hydra_value("/a/${x}")
    assert setup.hydra_value("/a/$x") == "'/a/$x'"


# -- the plan: where everything goes -----------------------------------------------------------------------------------
def _plan_for(model: str, *extra: str):
    from tests.support import compose

    return setup.make_plan(compose(["cmd=setup", f"model={model}", *extra]))


def test_every_path_is_derived_under_the_setup_root(tmp_path):
    p = _plan_for("hy_worldplay", f"setup.root={tmp_path}")
    w = tmp_path / "weights" / "hy_worldplay"
    assert (p.root, p.checkout, p.env_dir, p.python) == (tmp_path, tmp_path / "repos" / "HY-WorldPlay",
                                                         tmp_path / "envs" / "hy_worldplay",
                                                         str(tmp_path / "envs" / "hy_worldplay" / "bin" / "python"))
    assert p.python_bin == f"python{p.contract.environment.python}"
    assert p.paths == {"upstream_dir": str(p.checkout), "model_path": str(w / "model_path"),
                       "checkpoint": str(w / "action_ckpt" / "ar_distilled_action_model" / "model.safetensors")}
    jobs = {j.weight.name: j for j in p.jobs}
    # a file weight downloads into the folder its repository path starts from
    assert jobs["action_ckpt"].local_dir == w / "action_ckpt"
    assert jobs["action_ckpt"].patterns == ["ar_distilled_action_model/model.safetensors"]
    assert jobs["byt5_small"].local_dir == w / "model_path" / "text_encoder" / "byt5-small"  # `into` the key's folder
    assert all(j.revision == "main" for j in p.jobs) and p.clone_url == f"https://github.com/{p.contract.repo}.git"
    assert p.notes[0] == ("tencent/HY-WorldPlay: the contract pins no revision; setup resolves main and records the "
                          "commit in .harness-weights.json (pin it with setup.revisions.<weight>=<commit>)")
    assert len(p.notes) == len(set(p.notes)) and p.steps == setup.STEPS and p.optional_steps is False


def test_a_revision_given_for_a_weight_is_used_and_silences_its_note(tmp_path):
    p = _plan_for("hy_worldplay", f"setup.root={tmp_path}", "+setup.revisions.action_ckpt=abc123")
    assert {j.weight.name: j.revision for j in p.jobs}["action_ckpt"] == "abc123"
    assert not any(n.startswith("tencent/HY-WorldPlay:") for n in p.notes)


def test_configured_paths_python_and_clone_url_are_taken_as_given(tmp_path):
    p = _plan_for("hy_worldplay", f"setup.root={tmp_path}", f"model.upstream_dir={tmp_path / 'mine'}",
                  f"model.model_path={tmp_path / 'mp'}", f"model.python={tmp_path / 'py'}",
                  "setup.clone_url=/srv/git/x", "setup.python_bin=python3.99", "setup.optional_steps=true")
    assert p.checkout == tmp_path / "mine" and p.paths["upstream_dir"] == str(tmp_path / "mine")
    assert p.paths["model_path"] == str(tmp_path / "mp") and p.env_dir is None and p.python == str(tmp_path / "py")
    assert (p.clone_url, p.python_bin, p.optional_steps) == ("/srv/git/x", "python3.99", True)
    assert {j.weight.name: j.local_dir for j in p.jobs}["byt5_small"] == tmp_path / "mp" / "text_encoder" / "byt5-small"


def test_a_configured_file_path_must_end_in_the_files_name(tmp_path):
    with pytest.raises(setup.ConfigError) as e:
        _plan_for("hy_worldplay", f"setup.root={tmp_path}", f"model.checkpoint={tmp_path / 'ckpt.bin'}")
    assert str(e.value).startswith(f"model.checkpoint={tmp_path / 'ckpt.bin'}: setup downloads tencent/HY-WorldPlay's "
                                   "ar_distilled_action_model/model.safetensors as model.safetensors;")
    (tmp_path / "ckpt.bin").write_bytes(b"")  # an existing file of the user's: taken as it is
    p = _plan_for("hy_worldplay", f"setup.root={tmp_path}", f"model.checkpoint={tmp_path / 'ckpt.bin'}")
    assert p.paths["checkpoint"] == str(tmp_path / "ckpt.bin")


@pytest.mark.parametrize("extra, text", [
    (["setup.steps=[checkout,build]"], ("setup.steps: 'build' is not a step; use some of ['checkout', "
                                        "'environment', 'weights', 'readiness']")),
    (["setup.harness_python=python3"], "setup.harness_python='python3': give an absolute path"),
])
def test_a_setting_that_cannot_work_is_refused_naming_it(tmp_path, extra, text):
    with pytest.raises(setup.ConfigError) as e:
        _plan_for("lingbot_v2", f"setup.root={tmp_path}", *extra)
    assert str(e.value).startswith(text)


def test_a_model_without_a_contract_has_nothing_to_set_up(tmp_path):
    with pytest.raises(setup.ConfigError) as e:
        _plan_for("reference", f"setup.root={tmp_path}")
    assert str(e.value).startswith("model=reference: setup is for upstream models with a contract")


def test_the_root_is_setup_root_else_worldmem_models_else_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLDMEM_MODELS", str(tmp_path / "env-root"))
    assert _plan_for("lingbot_v2").root == tmp_path / "env-root"
    assert _plan_for("lingbot_v2", f"setup.root={tmp_path / 'r'}").root == tmp_path / "r"
    monkeypatch.delenv("WORLDMEM_MODELS")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _plan_for("lingbot_v2").root == tmp_path / "home" / "worldmem-models"


def test_the_local_block_quotes_every_value():
    plan = SimpleNamespace(model="m", paths={"b": "/x #y", "a": "*z: w"}, python="/p y/python")
    assert setup.SetupPlan.local_block(plan).splitlines() == [
        "# conf/local/default.yaml (git-ignored): the paths setup used", "models:", "  m:",
        '    a: "*z: w"', '    b: "/x #y"', '    python: "/p y/python"']
