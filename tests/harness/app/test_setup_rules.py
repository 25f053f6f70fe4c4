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
            "gated": False, "size_gb": None, "key": "checkpoint"}
    return SimpleNamespace(**{**base, **kw})


#: a contract whose checkpoint entries declare no hub-only name (setup's name check has nothing to check)
NO_HUB_NAMES = SimpleNamespace(checkpoint=(), commit="a" * 40)


def _plan(tmp_path, **kw):
    return SimpleNamespace(**{"model": "m", "checkout": tmp_path / "checkout", "hf_cache": tmp_path / "hf",
                              "python": "py", "env_dir": None, "jobs": [], "notes": [], "contract": NO_HUB_NAMES, **kw})


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
                                        "'environment', 'weights', 'readiness', 'check']")),
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


# -- the recipe's commands -------------------------------------------------------------------------------------------
def _env_plan(tmp_path, steps, torch=None, forks=(), env_dir=True, optional_steps=False, user_forks=None):
    from adapters.contracts.schema import Environment, TorchSpec

    env = Environment(python="3.10", torch=torch or TorchSpec(source="README"), steps=tuple(steps),
                      forks=tuple(forks))
    return SimpleNamespace(contract=SimpleNamespace(environment=env, raw={"environment": {"python_source": "README"}}),
                           python=str(tmp_path / "env" / "bin" / "python"), python_bin="python3.10",
                           env_dir=tmp_path / "env" if env_dir else None, checkout=tmp_path / "co",
                           optional_steps=optional_steps, forks=user_forks or {}, model="m")


def test_each_recipe_step_becomes_its_command_in_a_subshell_of_its_folder(tmp_path):
    from adapters.contracts.schema import Fork, Step, TorchSpec

    py = setup._q(str(tmp_path / "env" / "bin" / "python"))
    steps = [Step(source="s1", torch=True), Step(source="s2", pip="numpy<2", cwd="sub"),
             Step(source="s3", editable=".", no_deps=True), Step(source="s4", run="make all", note="short note"),
             Step(source="s5", fork="kern", no_deps=True), Step(source="s6", run="x", optional=True),
             Step(source="s7", run="y", optional=True, note="needs a GPU")]
    torch = TorchSpec(source="README", version="2.6.0", index_url="https://download.pytorch.org/whl/cu124")
    plan = _env_plan(tmp_path, steps, torch=torch, forks=[Fork(package="kern", source="issue 3")])
    out = setup.environment_commands(plan)
    co = tmp_path / "co"
    assert out[0] == ("a virtual environment with Python 3.10 (README)",
                      f"test -x {py} || python3.10 -m venv {tmp_path / 'env'}")
    assert out[1] == ("step 1: s1", (f"( cd {co} && {py} -m pip install torch==2.6.0 --index-url "
                                     "https://download.pytorch.org/whl/cu124 )"))
    assert out[2] == ("step 2: s2", f"( cd {co / 'sub'} && {py} -m pip install numpy<2 )")
    assert out[3] == ("step 3: s3", f"( cd {co} && {py} -m pip install --no-deps -e {co} )")
    assert out[4] == ("step 4: s4; short note", f"( cd {co} && make all )")
    assert out[5][0] == "step 5: s5" and out[5][1].startswith(f"( cd {co} && {py} -m pip install --no-deps "
                                                              '"${HARNESS_FORK_KERN:?kern: upstream names no source')
    assert out[6] == ("step 6: s6 (optional, skipped: setup.optional_steps=true runs it)", ":")
    assert out[7] == ("step 7: s7 (optional, skipped: needs a GPU)", ":")
    assert out[8][0] == "torch is still the recipe's build (README)"
    assert 'torch.__version__.split("+")[0] == "2.6.0" and torch.version.cuda == "12.4"' in out[8][1]
    assert len(out) == 9
    plan = _env_plan(tmp_path, steps[3:5], forks=[Fork(package="kern", source="i", url="https://g/k.git", ref="dev")],
                     env_dir=False, optional_steps=True)
    out = setup.environment_commands(plan)
    assert out[0] == ("step 1: s4; short note", f"( cd {co} && make all )")  # no venv line for the user's Python
    assert out[1][1] == f"( cd {co} && {py} -m pip install --no-deps git+https://g/k.git@dev )" and len(out) == 2


def test_a_requirements_step_drops_the_excluded_packages_and_stops_when_the_file_is_missing(tmp_path):
    from adapters.contracts.schema import Step

    plan = _env_plan(tmp_path, [Step(source="s", requirements="req.txt", exclude=("flash_attn", "x.y"))])
    (why, cmd), = setup.environment_commands(plan)[1:]
    filtered = tmp_path / "env" / "requirements-step1.txt"
    assert why == "step 1: s"
    assert "{ grep -viE '^[[:space:]]*(flash_attn|x\\.y)([^A-Za-z0-9_.-]|$)' req.txt || test $? -eq 1; } > " in cmd
    assert cmd.endswith(f"{filtered} && {tmp_path / 'env' / 'bin' / 'python'} -m pip install -r {filtered} )")
    assert f"setup: missing requirements file {tmp_path / 'co' / 'req.txt'} (step 1: s)" in cmd
    plain = _env_plan(tmp_path, [Step(source="s", requirements="req.txt")], env_dir=False)
    (_, cmd), = setup.environment_commands(plain)
    assert cmd.endswith("-m pip install -r req.txt )") and "grep" not in cmd


def test_torch_without_a_pinned_version_or_cuda_index_is_not_checked_afterwards(tmp_path):
    from adapters.contracts.schema import Step, TorchSpec

    out = setup.environment_commands(_env_plan(tmp_path, [Step(source="s", torch=True)],
                                               torch=TorchSpec(source="r", index_url="https://x/whl/cpu")))
    assert [w for w, _ in out] == ["a virtual environment with Python 3.10 (README)", "step 1: s"]
    out = setup.environment_commands(_env_plan(tmp_path, [Step(source="s", torch=True)],
                                               torch=TorchSpec(source="r", index_url="https://x/whl/cu118")))
    assert 'torch.version.cuda == "11.8"' in out[-1][1] and ".split(" not in out[-1][1]


def test_weight_commands_say_where_each_weight_comes_from(tmp_path):
    plan = SimpleNamespace(model="m", python="/env/python", hf_cache=tmp_path / "hf", contract=NO_HUB_NAMES, jobs=[
        WeightJob(_weight(hub="checkout", name="cfg"), tmp_path / "co", ["a.yaml", "b.yaml"], "main"),
        WeightJob(_weight(hub="modelscope", name="ms", size_gb=1.5), tmp_path / "ms", ["x/*"], "main"),
        WeightJob(_weight(hf_cache=True, name="enc", gated=True), None, ["*"], "v2"),
        WeightJob(_weight(name="dit"), tmp_path / "w", ["*.bin"], "main")])
    out = setup.weight_commands(plan)
    assert out[0] == ("cfg: org/model (upstream README)",
                      f"test -e {tmp_path / 'co' / 'a.yaml'} && test -e {tmp_path / 'co' / 'b.yaml'}")
    assert out[1][0] == "ms: org/model (upstream README); about 1.5 GB (ModelScope, from the model's environment)"
    assert out[1][1].startswith("/env/python -c ") and "from modelscope import snapshot_download" in out[1][1]
    assert out[2][0].startswith("enc: org/model (upstream README); gated: org/model is gated on Hugging Face")
    assert out[2][0].endswith("(into the Hugging Face cache: upstream reads it there with HF_HUB_OFFLINE=1)")
    assert 'revision="v2"' in out[2][1] and f'cache_dir="{tmp_path / "hf"}"' in out[2][1]
    assert out[3][0] == "dit: org/model (upstream README)" and "revision" not in out[3][1]
    assert out[3][1].startswith('"$HARNESS_PY" -c ') and f'local_dir="{tmp_path / "w"}"' in out[3][1]


def test_checkout_commands_clone_once_fetch_the_pin_and_its_refs_then_detach(tmp_path):
    c = SimpleNamespace(commit="a" * 40, raw={"provenance": {"fetch_refs": ["refs/pull/7/head"]}})
    plan = SimpleNamespace(contract=c, checkout=tmp_path / "co", clone_url="https://g/x.git")
    d = tmp_path / "co"
    assert setup.checkout_commands(plan) == [
        f"test -d {d}/.git || git clone --no-checkout https://g/x.git {d}",
        f"git -C {d} cat-file -e {'a' * 40}^{{commit}} 2>/dev/null || git -C {d} fetch origin {'a' * 40} || true",
        f"git -C {d} cat-file -e {'a' * 40}^{{commit}} 2>/dev/null || git -C {d} fetch origin refs/pull/7/head || true",
        f"git -C {d} checkout --detach {'a' * 40}"]
    c.raw = {}
    assert len(setup.checkout_commands(plan)) == 3


# -- running -----------------------------------------------------------------------------------------------------------
def test_a_failing_command_stops_setup_with_the_command_and_its_last_output(tmp_path):
    plan = SimpleNamespace(model="m", env_dir=tmp_path / "env")
    logs: list[str] = []
    setup._run_shell('test "$VIRTUAL_ENV" = ' + str(tmp_path / "env") + ' && case "$PATH" in ' +
                     str(tmp_path / "env" / "bin") + ":*) true;; *) false;; esac", plan, logs.append)
    assert logs[0].startswith("$ test ")
    with pytest.raises(SetupError) as e:
        setup._run_shell("echo out; echo " + "x" * 2000 + " >&2; exit 3", plan, logs.append)
    msg = str(e.value)
    assert msg.startswith("setup of m stopped at: echo out;") and msg.endswith("x" * 1500)
    assert len(msg.split("\n", 1)[1]) == 1500
    with pytest.raises(SetupError) as e:
        setup._run_shell("echo only-stdout; false", plan, logs.append)
    assert str(e.value).endswith("\nonly-stdout")


def test_a_folder_in_the_way_of_the_checkout_is_refused_and_a_users_checkout_is_not_moved(tmp_path):
    c = SimpleNamespace(commit="b" * 40, repo="org/x")
    (tmp_path / "co").mkdir()
    (tmp_path / "co" / "file").write_text("")
    plan = SimpleNamespace(contract=c, checkout=tmp_path / "co", config={}, model="m", env_dir=None)
    with pytest.raises(SetupError, match="exists and is not a git checkout of org/x; point it at one or at an empty"):
        setup.run_checkout(plan, print)
    co = tmp_path / "co"
    subprocess.run(["git", "init", "-q", str(co)], check=True)
    subprocess.run(["git", "-C", str(co), "-c", "user.email=a@b", "-c", "user.name=a", "add", "."], check=True)
    subprocess.run(["git", "-C", str(co), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"], check=True)
    head = subprocess.run(["git", "-C", str(co), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    plan.config = {"upstream_dir": str(co)}
    with pytest.raises(SetupError) as e:
        setup.run_checkout(plan, print)
    assert str(e.value) == (f"model.upstream_dir={co} is at {head[:12]}, the contract was read at bbbbbbbbbbbb: "
                            f"git -C {co} checkout {'b' * 40} (setup does not move your checkout)")
    c.commit = head
    logs: list[str] = []
    setup.run_checkout(plan, logs.append)
    assert logs == [f"checkout {co} is at {head[:12]}"]


def test_an_environment_step_from_a_fork_without_a_source_stops_before_anything_runs(tmp_path):
    from adapters.contracts.schema import Fork, Step

    plan = _env_plan(tmp_path, [Step(source="s", run="touch ran"), Step(source="s", fork="kern")],
                     forks=[Fork(package="kern", source="issue 3", ref="v1")])
    with pytest.raises(SetupError) as e:
        setup.run_environment(plan, print)
    assert str(e.value) == ("m needs kern v1 from a fork that upstream names no source for (issue 3): give "
                            "setup.forks.kern=<pip spec or path>")
    plan = _env_plan(tmp_path, [Step(source="s", fork="kern", optional=True)], forks=[Fork(package="kern", source="i")])
    plan.env_dir, plan.python = None, str(tmp_path / "no-python")
    with pytest.raises(SetupError, match="model.python=.*no-python does not exist; unset it"):
        setup.run_environment(plan, print)  # an optional fork step that is skipped needs no source


# -- what the sampled mutation run pointed at ---------------------------------------------------------------------------
def test_the_hub_is_asked_for_file_metadata_and_each_file_keeps_its_checksum(monkeypatch):
    import huggingface_hub

    asked = []

    class Api:
        def __init__(self, endpoint=None, token=None):
            asked.append(("api", endpoint, token))

        def model_info(self, repo, revision=None, files_metadata=False):
            asked.append((repo, revision, files_metadata))
            return SimpleNamespace(sha="d" * 40, siblings=[
                SimpleNamespace(rfilename="a.safetensors", size=9, lfs={"sha256": "e" * 64}, blob_id="b1"),
                SimpleNamespace(rfilename="b.bin", size=5, lfs=SimpleNamespace(sha256="f" * 64), blob_id="b2"),
                SimpleNamespace(rfilename="c.json", size=2, lfs=None, blob_id="b3")])

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    commit, files = setup.HfHub(endpoint="http://hub", token="t", model="m").files("org/x", "main")
    assert commit == "d" * 40 and asked == [("api", "http://hub", "t"), ("org/x", "main", True)]
    assert files == [RemoteFile("a.safetensors", 9, "e" * 64, None), RemoteFile("b.bin", 5, "f" * 64, None),
                     RemoteFile("c.json", 2, None, "b3")]


def test_a_weight_kept_in_the_checkout_is_checked_there(tmp_path):
    p = _plan_for("sana_wm", f"setup.root={tmp_path}")
    (job,) = [j for j in p.jobs if j.weight.hub == "checkout"]
    assert job.local_dir == p.checkout and job.patterns == list(job.weight.files)


@pytest.mark.parametrize("length, shown", [(159, True), (160, False)])
def test_a_steps_note_is_shown_beside_it_only_when_short(tmp_path, length, shown):
    from adapters.contracts.schema import Step

    note = "n" * length
    (why, _), = setup.environment_commands(_env_plan(tmp_path, [Step(source="s", run="x", note=note)], env_dir=False))
    assert why == ("step 1: s; " + note if shown else "step 1: s")


def _git_repo(path: Path) -> list[str]:
    """A repository with two commits; their shas, oldest first."""
    git = ["git", "-C", str(path), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    shas = []
    for i in range(2):
        (path / "f").write_text(str(i))
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", str(i)], check=True)
        shas.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    return shas


def test_setups_own_checkout_is_moved_to_the_pinned_commit(tmp_path):
    """Only a checkout the user configured (model.upstream_dir) is verified and left alone; the one setup cloned
    earlier is fetched and checked out at the contract's commit."""
    old, new = _git_repo(tmp_path / "upstream")
    co = tmp_path / "co"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "upstream"), str(co)], check=True)
    subprocess.run(["git", "-C", str(co), "checkout", "-q", "--detach", old], check=True)
    plan = SimpleNamespace(contract=SimpleNamespace(commit=new, repo="org/x", raw={}), checkout=co, config={},
                           model="m", env_dir=None, clone_url=str(tmp_path / "upstream"))
    setup.run_checkout(plan, lambda _: None)
    head = subprocess.run(["git", "-C", str(co), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert head == new


def test_run_environment_runs_each_step_and_checks_an_optional_fork_that_will_run(tmp_path):
    import sys

    from adapters.contracts.schema import Fork, Step

    (tmp_path / "co").mkdir()
    plan = _env_plan(tmp_path, [Step(source="s", run="touch ran")], env_dir=False)
    plan.python = sys.executable
    setup.run_environment(plan, lambda _: None)
    assert (tmp_path / "co" / "ran").is_file()
    plan = _env_plan(tmp_path, [Step(source="s", fork="kern", optional=True)], forks=[Fork(package="kern", source="i")],
                     optional_steps=True)
    with pytest.raises(SetupError, match="m needs kern  from a fork that upstream names no source for"):
        setup.run_environment(plan, lambda _: None)


def test_run_setup_runs_the_readiness_step_and_says_the_model_is_ready(tmp_path, monkeypatch):
    from tests.support import compose

    seen = []
    monkeypatch.setattr(setup, "run_readiness", lambda plan, log: seen.append(plan.model))
    logs: list[str] = []
    plan = setup.run_setup(compose(["cmd=setup", "model=lingbot_v2", f"setup.root={tmp_path}",
                                    "setup.steps=[readiness]"]), log=logs.append)
    assert seen == ["lingbot_v2"] and logs[0] == "lingbot_v2 is ready" and logs[1] == plan.local_block()


def test_only_an_unpinned_hugging_face_weight_gets_a_note(tmp_path):
    p = _plan_for("hy_worldplay", f"setup.root={tmp_path}")
    (ms,) = [j.weight for j in p.jobs if j.weight.hub == "modelscope"]
    assert ms.revision is None and not any(n.startswith(f"{ms.repo}:") for n in p.notes)


def test_the_script_of_the_readiness_step_alone_ends_with_the_harness_check(tmp_path):
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[readiness]")
    text = setup.script(p)
    assert "-m harness setup model=lingbot_v2 'setup.steps=[weights,readiness]'" in text
    assert "# -- checkout" not in text and "# -- weights" not in text


def test_an_empty_folder_is_a_fine_place_for_the_checkout(tmp_path):
    _, new = _git_repo(tmp_path / "upstream")
    (tmp_path / "co").mkdir()
    plan = SimpleNamespace(contract=SimpleNamespace(commit=new, repo="org/x", raw={}), checkout=tmp_path / "co",
                           config={}, model="m", env_dir=None, clone_url=str(tmp_path / "upstream"))
    setup.run_checkout(plan, lambda _: None)
    assert (tmp_path / "co" / "f").read_text() == "1"


def test_run_setup_prints_the_script_or_runs_the_weights_with_the_hub_given(tmp_path, monkeypatch, capsys):
    from tests.support import compose

    base = ["cmd=setup", "model=lingbot_v2", f"setup.root={tmp_path}"]
    setup.run_setup(compose([*base, "print=true"]))
    assert capsys.readouterr().out.startswith("#!/usr/bin/env bash\n")
    used = []
    monkeypatch.setattr(setup, "run_weights", lambda plan, hub, log: used.append(hub))
    hub = Hub({})
    setup.run_setup(compose([*base, "setup.steps=[weights]"]), hub=hub, log=lambda _: None)
    assert used == [hub]


def test_hub_errors_become_what_the_user_does_about_them():
    import httpx
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    resp = httpx.Response(401, request=httpx.Request("GET", "https://huggingface.co/api/models/org/x"))
    hub = setup.HfHub(model="m")
    gated = hub._errors("org/x", GatedRepoError("gated", response=resp))
    assert type(gated) is setup.GatedError and str(gated) == setup.gated_message("org/x", "m")
    missing = hub._errors("org/x", RepositoryNotFoundError("nope", response=resp))
    assert type(missing) is setup.GatedError
    assert str(missing) == "org/x is not reachable (not found, private or gated). " + setup.gated_message("org/x", "m")
    rev = hub._errors("org/x", RevisionNotFoundError("no rev", response=resp))
    assert type(rev) is SetupError and str(rev).startswith("org/x: the revision is not on the hub (")
    other = OSError("disk")
    assert hub._errors("org/x", other) is other


# -- the full pass's survivors: each rule at its boundary ---------------------------------------------------------------
def test_a_hub_repository_without_a_file_list_has_no_files(monkeypatch):
    import huggingface_hub

    class Api:
        def __init__(self, endpoint=None, token=None):
            pass

        def model_info(self, repo, revision=None, files_metadata=False):
            return SimpleNamespace(sha="d" * 40, siblings=None)  # the hub leaves siblings out

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    assert setup.HfHub().files("org/x", "main") == ("d" * 40, [])


def _contract(monkeypatch, weights=None, checkpoint=None):
    """lingbot_v2's real contract with these weights / checkpoint entries, served by ``contracts.load``."""
    import dataclasses

    from adapters import contracts

    real = contracts.load("lingbot_v2")
    fake = dataclasses.replace(real, weights=tuple(real.weights if weights is None else weights),
                               checkpoint=tuple(real.checkpoint if checkpoint is None else checkpoint))
    monkeypatch.setattr(contracts, "load", lambda name: fake)
    return fake


def test_a_config_without_a_setup_section_uses_every_default(tmp_path, monkeypatch):
    from tests.support import compose

    raw = compose(["cmd=setup", "model=lingbot_v2"])
    del raw["setup"]  # an API caller's mapping: no setup.* at all
    monkeypatch.setenv("WORLDMEM_MODELS", str(tmp_path))
    p = setup.make_plan(raw)
    assert p.root == tmp_path and p.steps == setup.STEPS and p.optional_steps is False


@pytest.mark.parametrize("steps", ["null", "[]"])
def test_no_steps_given_means_every_step(tmp_path, steps):
    assert _plan_for("lingbot_v2", f"setup.root={tmp_path}", f"setup.steps={steps}").steps == setup.STEPS


def test_the_hugging_face_cache_follows_the_models_own_environment_first(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "process"))
    assert _plan_for("lingbot_v2", f"setup.root={tmp_path}").hf_cache == tmp_path / "process"
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", f"++model.env.HF_HUB_CACHE={tmp_path / 'model'}")
    assert p.hf_cache == tmp_path / "model"


def test_a_checkpoint_key_without_a_weight_keeps_its_configured_path_and_a_weights_key_its_derived_one(
        tmp_path, monkeypatch):
    from adapters.contracts.schema import CheckpointEntry

    # lingbot_v2's contract with three checkpoint keys, on a model whose config has those fields (a key a model's
    # config does not have is refused when the config is read)
    _contract(monkeypatch, checkpoint=[CheckpointEntry(key="checkpoint", kind="dir", source="s"),
                                       CheckpointEntry(key="wan_dir", kind="dir", source="s"),
                                       CheckpointEntry(key="da3_dir", kind="dir", source="s")])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    p = _plan_for("matrix_game35", f"setup.root={tmp_path}", "model.checkpoint='~/ck'", "++model.wan_dir=/data/vae")
    # the weight's key: its path with ~ expanded (never the configured text); a user's folder: as configured; a key
    # neither configured nor downloaded: absent
    assert p.paths == {"upstream_dir": str(tmp_path / "repos" / "lingbot-world-v2"),
                       "checkpoint": str(tmp_path / "home" / "ck"), "wan_dir": "/data/vae"}


def _w(name, repo="org/b", **kw):
    from adapters.contracts.schema import Weight

    return Weight(name=name, repo=repo, source="s", key=kw.pop("key", name), files=("*",), **kw)


def test_a_weights_revision_is_the_given_one_else_the_contracts_pin_else_main_and_only_main_gets_one_note(
        tmp_path, monkeypatch):
    _contract(monkeypatch, weights=[_w("pinned", repo="org/a", revision="abc"),
                                    _w("pinned_given", repo="org/a", revision="abc"),
                                    _w("open1"), _w("open2"), _w("open_given", repo="org/c")])
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", "+setup.revisions.pinned_given=r1",
                  "+setup.revisions.open_given=r2")
    assert {j.weight.name: j.revision for j in p.jobs} == {"pinned": "abc", "pinned_given": "r1", "open1": "main",
                                                           "open2": "main", "open_given": "r2"}
    assert p.notes == [("org/b: the contract pins no revision; setup resolves main and records the commit in "
                        ".harness-weights.json (pin it with setup.revisions.<weight>=<commit>)")]


def test_a_second_weight_under_a_key_goes_where_the_first_one_put_it(tmp_path, monkeypatch):
    _contract(monkeypatch, weights=[_w("dit", key="checkpoint", prefix="ckpt/dit"),
                                    _w("dit_extra", key="checkpoint", prefix="ckpt/dit")])
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}")
    first = tmp_path / "weights" / "lingbot_v2" / "dit"
    assert p.paths["checkpoint"] == str(first / "ckpt" / "dit")
    # a prefix weight downloads into the folder above its prefix (the hub's paths start with the prefix)
    assert [(j.weight.name, j.local_dir) for j in p.jobs] == [("dit", first), ("dit_extra", first)]


def test_an_optional_step_runs_when_optional_steps_is_set(tmp_path):
    from adapters.contracts.schema import Step

    plan = _env_plan(tmp_path, [Step(source="s", run="x", optional=True)], env_dir=False, optional_steps=True)
    assert setup.environment_commands(plan) == [("step 1: s", f"( cd {tmp_path / 'co'} && x )")]


def test_the_contract_label_is_the_repositorys_path_else_the_packages_file_on_one_line(monkeypatch):
    from adapters import contracts

    assert setup._contract_label("lingbot_v2") == "adapters/lingbot_v2/contract.yaml"
    monkeypatch.setattr(contracts, "contract_path", lambda model: Path("/site/pkg\nx/contract.yaml"))
    assert setup._contract_label("lingbot_v2") == "/site/pkg x/contract.yaml"


def test_the_script_enters_the_models_environment_and_checks_only_after_weights_or_readiness(tmp_path):
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[environment]")
    lines = setup.script(p).splitlines()
    env = tmp_path / "envs" / "lingbot_v2"
    assert f'export VIRTUAL_ENV={env} PATH={env / "bin"}:"$PATH"' in lines
    assert not any(x.startswith("# -- checksums") or "setup.steps=[weights,readiness]" in x for x in lines)  # nothing downloaded, nothing to check
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[environment]", f"model.python={tmp_path}/py")
    assert not any(x.startswith("export VIRTUAL_ENV") for x in setup.script(p).splitlines())  # the user's Python
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[weights]")
    lines = setup.script(p).splitlines()
    assert p.notes and [f"# note: {n}" for n in p.notes] == [x for x in lines if x.startswith("# note: ")]
    assert "# -- checksums and the planning-time checks, with these paths (conf/local/default.yaml):" in lines
    ran = [x for x in lines if x and not x.startswith("#")]
    assert ran[-1].startswith(f'( cd {setup._q(p.harness_root)} && "$HARNESS_PY" -m harness setup model=lingbot_v2 '
                              "'setup.steps=[weights,readiness]' '++local.models.lingbot_v2.checkpoint=")
    # the day-one check is printed for the GPU node, with the same paths, and run only when named
    assert lines[-1] == "# " + ran[-1].replace("'setup.steps=[weights,readiness]'", "'setup.steps=[check]'")
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[check]")
    assert setup.script(p).splitlines()[-1] == ran[-1].replace("[weights,readiness]", "[check]")


def _checkout_plan(tmp_path, checkout, config):
    return SimpleNamespace(contract=SimpleNamespace(commit="a" * 40, repo="org/x", raw={}), checkout=checkout,
                           config=config, model="m", env_dir=None, clone_url="https://g/x.git")


def test_a_checkout_not_there_yet_or_a_configured_empty_folder_is_cloned(tmp_path, monkeypatch):
    ran: list[str] = []
    monkeypatch.setattr(setup, "_run_shell", lambda cmd, plan, log: ran.append(cmd))
    plan = _checkout_plan(tmp_path, tmp_path / "new", {})
    setup.run_checkout(plan, print)
    assert ran == setup.checkout_commands(plan) and not (tmp_path / "new").exists()
    ran.clear()
    (tmp_path / "empty").mkdir()
    plan = _checkout_plan(tmp_path, tmp_path / "empty", {"upstream_dir": str(tmp_path / "empty")})
    setup.run_checkout(plan, print)  # the user's folder is no checkout yet: cloned into, not verified
    assert ran == setup.checkout_commands(plan)


def test_the_environment_setup_creates_needs_no_python_yet(tmp_path, monkeypatch):
    from adapters.contracts.schema import Step

    ran: list[str] = []
    monkeypatch.setattr(setup, "_run_shell", lambda cmd, plan, log: ran.append(cmd))
    plan = _env_plan(tmp_path, [Step(source="s", run="x")])
    assert not Path(plan.python).exists()
    setup.run_environment(plan, print)
    assert ran == [cmd for _, cmd in setup.environment_commands(plan)] and len(ran) == 2


def test_a_modelscope_weight_runs_its_own_command_only(tmp_path, monkeypatch):
    ran: list[str] = []
    monkeypatch.setattr(setup, "_run_shell", lambda cmd, plan, log: ran.append(cmd))
    ms = WeightJob(_weight(hub="modelscope", name="ms", repo="org/ms"), tmp_path / "ms", ["*"], "main")
    plan = SimpleNamespace(model="m", python="/env/python", hf_cache=tmp_path / "hf", contract=NO_HUB_NAMES, jobs=[
        WeightJob(_weight(name="dit"), tmp_path / "w", ["*.bin"], "main"), ms])
    assert setup.fetch_weight(plan, ms, Hub({}), print) == {}
    assert ran == [setup.weight_commands(plan)[1][1]] and '"org/ms"' in ran[0]


class StrictHub(Hub):
    """A hub that writes into the folder it is given and makes none (only the file's own subfolders)."""

    def download(self, repo, commit, path, local_dir):
        assert Path(local_dir).is_dir(), f"{local_dir} does not exist"
        return super().download(repo, commit, path, local_dir)


def test_the_weights_folder_exists_before_the_hub_writes_into_it(tmp_path):
    hub = StrictHub({"x.bin": b"abc"})
    setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "a" / "w", ["x.bin"], "main"), hub, print)
    assert (tmp_path / "a" / "w" / "x.bin").read_bytes() == b"abc"


class ListedHub(Hub):
    """A hub whose files carry the checksums given (``listed``: path -> RemoteFile)."""

    def __init__(self, files, listed):
        super().__init__(files)
        self.listed = listed

    def files(self, repo, revision):
        return self.commit, list(self.listed)


def test_the_record_keeps_the_sha256_else_the_blob_id_else_the_size_sorted_one_space_indented(tmp_path):
    blob = tmp_path / "blob"
    blob.write_bytes(b"{}")
    listed = [RemoteFile("c.bin", 3), RemoteFile("b.json", 2, None, setup.git_blob_sha1(blob)),
              RemoteFile("a.st", 1, hashlib.sha256(b"z").hexdigest(), "ignored")]
    hub = ListedHub({"c.bin": b"abc", "b.json": b"{}", "a.st": b"z"}, listed)
    setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["*"], "main"), hub, print)
    k = f"org/model@{hub.commit}"
    assert (tmp_path / "w" / setup.RECORD).read_text() == (
        '{\n "files": {\n'
        f'  "{k}/a.st": "{hashlib.sha256(b"z").hexdigest()}",\n'
        f'  "{k}/b.json": "{setup.git_blob_sha1(blob)}",\n'
        f'  "{k}/c.bin": "3"\n'
        ' }\n}')


def test_a_recorded_file_the_hub_gives_no_size_for_is_trusted_without_reading_it(tmp_path):
    sha = hashlib.sha256(b"abc").hexdigest()
    hub = ListedHub({"x.bin": b"abc"}, [RemoteFile("x.bin", None, sha)])
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "x.bin").write_bytes(b"abd")  # not what was checked; the record says it was
    (tmp_path / "w" / setup.RECORD).write_text(json.dumps({"files": {f"org/model@{hub.commit}/x.bin": sha}}))
    setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["x.bin"], "main"), hub, print)
    assert hub.downloads == [] and (tmp_path / "w" / "x.bin").read_bytes() == b"abd"


def test_a_download_that_leaves_no_file_says_it_is_missing(tmp_path):
    class Lost(Hub):
        def download(self, repo, commit, path, local_dir):
            self.downloads.append(path)
            return Path(local_dir) / path

    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_plan(tmp_path), WeightJob(_weight(), tmp_path / "w", ["x.bin"], "main"),
                           Lost({"x.bin": b"abc"}), print)
    assert str(e.value) == "org/model/x.bin: missing after download; removed, rerun setup"


def test_readiness_probes_says_every_finding_and_stops_on_errors_only(monkeypatch):
    import adapters.base
    from adapters.base import Finding

    seen = []

    class Adapter:
        def __init__(self, cfg, findings):
            self.cfg, self.findings = cfg, findings

        def readiness(self, probe=False):
            seen.append((self.cfg, probe))
            return self.findings

    warn, err = Finding("warning", "checkpoint", "old"), Finding("error", "python", "no torch")
    findings = [warn]
    monkeypatch.setattr(adapters.base, "build_adapter", lambda cfg: Adapter(cfg, findings))
    plan = SimpleNamespace(model="m", config={"name": "m", "checkpoint": "/old"}, paths={"checkpoint": "/new"},
                           python="/py")
    logs: list[str] = []
    assert setup.run_readiness(plan, logs.append) == [warn]
    assert seen == [({"name": "m", "checkpoint": "/new", "python": "/py"}, True)]
    assert logs == ["readiness warning: checkpoint: old"]
    findings[:] = [warn, err]
    logs.clear()
    with pytest.raises(SetupError) as e:
        setup.run_readiness(plan, logs.append)
    assert str(e.value) == "m is set up but not ready:\n  - python: no torch"
    assert logs == ["readiness warning: checkpoint: old", "readiness error: python: no torch"]


def test_run_setup_needs_huggingface_hub_only_for_the_weights_step(tmp_path, monkeypatch):
    import sys

    from tests.support import compose

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    monkeypatch.setattr(setup, "run_readiness", lambda plan, log: [])
    logs: list[str] = []
    setup.run_setup(compose(["cmd=setup", "model=lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[readiness]"]),
                    log=logs.append)
    assert logs[0] == "lingbot_v2 is ready"


@pytest.mark.parametrize("given, env, used", [
    ("http://cfg", "http://env", "http://cfg"), (None, "http://env", "http://env"), ("http://cfg", None, "http://cfg"),
    (None, None, None)])
def test_the_hub_endpoint_is_setup_endpoint_else_hf_endpoint(tmp_path, monkeypatch, given, env, used):
    from tests.support import compose

    for k, v in (("HF_ENDPOINT", env), ("HF_TOKEN", "tok")):
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    hubs = []
    monkeypatch.setattr(setup, "run_weights", lambda plan, hub, log: hubs.append(hub))
    extra = [f"setup.endpoint={given}"] if given else []
    setup.run_setup(compose(["cmd=setup", "model=lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[weights]",
                             *extra]), log=lambda _: None)
    (hub,) = hubs
    assert isinstance(hub, setup.HfHub) and (hub.endpoint, hub.token, hub.model) == (used, "tok", "lingbot_v2")


def test_run_setup_runs_the_checkout_then_the_environment(tmp_path, monkeypatch):
    from tests.support import compose

    done = []
    monkeypatch.setattr(setup, "run_checkout", lambda plan, log: done.append("checkout"))
    monkeypatch.setattr(setup, "run_environment", lambda plan, log: done.append("environment"))
    setup.run_setup(compose(["cmd=setup", "model=lingbot_v2", f"setup.root={tmp_path}",
                             "setup.steps=[checkout,environment]"]), log=lambda _: None)
    assert done == ["checkout", "environment"]


# -- names only the hub confirms (issue 43) --------------------------------------------------------------------------


def _hub_only_plan(tmp_path, name: str = "model.safetensors"):
    entry = SimpleNamespace(key="checkpoint", hub_confirmed=(name,), source="inference_ar_forcing.py:146")
    return _plan(tmp_path, contract=SimpleNamespace(checkpoint=(entry,), commit="b" * 40))


def test_a_name_only_the_hub_confirms_is_checked_before_any_download_and_named(tmp_path):
    """DreamX's generator: upstream's code names no file, so the contract's model.safetensors is a guess only the hub
    can confirm; a repository without it stops setup before a byte is fetched, saying what it holds."""
    hub = Hub({"dreamx_world_5b.safetensors": b"w" * 8, "README.md": b"r"})
    job = WeightJob(_weight(file="model.safetensors"), tmp_path / "w", ["*.safetensors"], "main")
    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_hub_only_plan(tmp_path), job, hub, print)
    msg = str(e.value)
    assert msg.startswith(f"dit: no 'model.safetensors' on the hub (org/model@{hub.commit[:12]})")
    assert "upstream's code does not name it at bbbbbbbbbbbb, so only the hub could confirm the name" in msg
    assert "holds: README.md, dreamx_world_5b.safetensors" in msg and "model.checkpoint" in msg
    assert hub.downloads == []


def test_a_name_the_hub_confirms_passes_and_is_checked_again_on_disk(tmp_path):
    hub = Hub({"model.safetensors": b"w" * 8})
    job = WeightJob(_weight(file="model.safetensors"), tmp_path / "w", ["model.safetensors"], "main")
    assert setup.fetch_weight(_hub_only_plan(tmp_path), job, hub, print)["commit"] == hub.commit
    assert (tmp_path / "w" / "model.safetensors").read_bytes() == b"w" * 8
    with pytest.raises(SetupError, match=r"no 'model.safetensors' in .*/w \("):  # downloaded but gone from disk
        setup.check_hub_names(_hub_only_plan(tmp_path), job, hub.commit, ["other.bin"], f"in {tmp_path / 'w'}")


def test_the_printed_download_says_which_name_only_the_hub_confirms(tmp_path):
    plan = _plan_for("dreamx", f"setup.root={tmp_path}")
    (why, _), = [c for c in setup.weight_commands(plan) if "GD-ML/DreamX-World-5B" in c[0]]
    assert why.endswith("; model.safetensors: a name only the hub confirms, checked after the download")


# -- the second pass's survivors (setup, pass0.json) ------------------------------------------------------------------
def test_a_model_whose_config_has_no_env_field_takes_the_hugging_face_cache_from_the_process(tmp_path, monkeypatch):
    # an out-of-tree model with a contract but a config class without ``env`` (reference's has none)
    _contract(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "process"))
    assert _plan_for("reference", f"setup.root={tmp_path}").hf_cache == tmp_path / "process"


@pytest.mark.parametrize("steps, checked", [("[weights]", True), ("[readiness]", True), ("[checkout]", False),
                                            ("[environment,check]", False)])
def test_the_script_checks_the_harness_huggingface_hub_first_only_before_weights_or_readiness(tmp_path, steps,
                                                                                               checked):
    p = _plan_for("lingbot_v2", f"setup.root={tmp_path}", f"setup.steps={steps}",
                  "setup.harness_python=/opt/h/bin/python")
    lines = setup.script(p).splitlines()
    check = ("\"$HARNESS_PY\" -c 'import huggingface_hub' 2>/dev/null || { echo 'setup: huggingface_hub is missing "
             "from the harness Python (/opt/h/bin/python), and the weights step needs it: pip install -e \".[eval]\" "
             "there first (nothing was done)' >&2; exit 2; }")
    assert lines[4] == "HARNESS_PY=/opt/h/bin/python"
    assert (lines[5] == check) is checked and (check in lines) is checked


def test_a_hub_only_name_the_patterns_leave_out_is_refused_after_the_download_naming_the_folder(tmp_path):
    hub = Hub({"model.safetensors": b"w" * 8, "x.bin": b"x"})  # on the hub, but the patterns take x.bin only
    job = WeightJob(_weight(), tmp_path / "w", ["x.bin"], "main")
    with pytest.raises(SetupError) as e:
        setup.fetch_weight(_hub_only_plan(tmp_path), job, hub, print)
    assert str(e.value).startswith(f"dit: no 'model.safetensors' in {tmp_path / 'w'} (org/model@{hub.commit[:12]}). ")
    assert f"The repository holds: {setup.RECORD}, x.bin. Point model.checkpoint" in str(e.value)
    assert hub.downloads == ["x.bin"]


def test_a_hub_only_name_of_another_config_key_is_not_checked_for_this_weight(tmp_path):
    entry = SimpleNamespace(key="vae_dir", hub_confirmed=("vae.pth",), source="s")
    plan = _plan(tmp_path, contract=SimpleNamespace(checkpoint=(entry,), commit="b" * 40))
    job = WeightJob(_weight(), tmp_path / "w", ["*"], "main")
    assert setup.check_hub_names(plan, job, "c" * 40, [], "on the hub") is None
    with pytest.raises(SetupError, match=r"^vae: no 'vae.pth' on the hub"):  # the weight under vae_dir is checked
        setup.check_hub_names(plan, WeightJob(_weight(name="vae", key="vae_dir"), None, ["*"], "main"), "c" * 40,
                              [], "on the hub")


def _hub_names_error(tmp_path, paths):
    job = WeightJob(_weight(), tmp_path / "w", ["*"], "main")
    with pytest.raises(SetupError) as e:
        setup.check_hub_names(_hub_only_plan(tmp_path), job, "c" * 40, paths, "on the hub")
    return str(e.value)


def test_an_empty_repository_is_said_to_hold_nothing(tmp_path):
    assert " The repository holds: nothing. Point model.checkpoint at the right file" in _hub_names_error(tmp_path, [])


def test_the_error_lists_the_first_twenty_paths_of_the_repository_sorted(tmp_path):
    paths = [f"f{i:02d}.bin" for i in range(21, -1, -1)]  # 22 files, given in reverse
    held = ", ".join(f"f{i:02d}.bin" for i in range(20))
    assert f" The repository holds: {held}. Point model.checkpoint" in _hub_names_error(tmp_path, paths)


@pytest.mark.parametrize("given, expected", [(None, None), ("~/day", "home/day"), ("/abs/d", "/abs/d")])
def test_the_day_one_check_writes_under_setup_check_dir_with_tilde_expanded_else_its_default(
        tmp_path, monkeypatch, given, expected):
    from harness.app import setup_check
    from tests.support import compose

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    seen = []
    monkeypatch.setattr(setup_check, "run_check", lambda plan, log, out_dir=None: seen.append(out_dir))
    extra = [f"setup.check_dir='{given}'"] if given else []
    setup.run_setup(compose(["cmd=setup", "model=lingbot_v2", f"setup.root={tmp_path}", "setup.steps=[check]",
                             *extra]), log=lambda _: None)
    assert seen == [None if expected is None else tmp_path / expected]
