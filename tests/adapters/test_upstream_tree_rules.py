"""Rules of the upstream tree listing (adapters/contracts/tree.py), one per test, in process.

git is never started: a stand-in for ``subprocess`` (:class:`FakeGit`) answers ``cat-file -e``, ``ls-tree -r -l -z``,
``rev-parse`` and ``cat-file --batch`` from a table, in git's own output formats, and behaves as ``subprocess`` does
for ``capture_output`` (unset: the output goes to this process's stdout and stderr) and ``check``. Every file the
command writes goes under pytest's ``tmp_path``.
"""

from __future__ import annotations

import io
import json
import runpy
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from adapters import contracts
from adapters.contracts import tree
from adapters.contracts.schema import CheckpointEntry, Step, Weight
from adapters.contracts.tree import NamedPath, TreeListing

MG3 = "matrix_game3"  # the one contract with a subdir (Matrix-Game-3/ of SkyworkAI/Matrix-Game)
MG3_PIN = "20e033e3dde358fde055ede61b571793ef2dd789"


# -- a git that answers from a table ------------------------------------------------------------------------------


class _Batch:
    """``git cat-file --batch``: one reply per sha written and flushed (``<sha> blob <size>``, the content and a
    newline; ``<sha> missing``; or a raw reply from ``replies``)."""

    def __init__(self, blobs: dict[str, bytes], replies: dict[str, bytes]):
        self.blobs, self.replies, self.pending, self.out = blobs, replies, b"", io.BytesIO()
        self.closed = self.waited = False
        self.stdin = SimpleNamespace(write=self._write, flush=self._flush, close=self._close)
        self.stdout = self.out

    def _write(self, data: bytes) -> None:
        self.pending += data

    def _flush(self) -> None:
        pos = self.out.tell()
        self.out.seek(0, io.SEEK_END)
        for sha in self.pending.decode().split():
            if sha in self.replies:
                self.out.write(self.replies[sha])
            elif sha in self.blobs:
                self.out.write(f"{sha} blob {len(self.blobs[sha])}\n".encode() + self.blobs[sha] + b"\n")
            else:
                self.out.write(f"{sha} missing\n".encode())
        self.pending = b""
        self.out.seek(pos)

    def _close(self) -> None:
        self.closed = True

    def wait(self) -> int:
        self.waited = True
        return 0


class FakeGit:
    """``files``: path -> content (None: a blob the snapshot lacks, listed with ls-tree's size ``BAD``)."""

    def __init__(self, commit: str, files: dict[str, Optional[bytes]], full: str = "", ls_tree_fails: bool = False,
                 rev_parse_fails: bool = False, replies: Optional[dict[str, bytes]] = None):
        self.commit, self.full = commit, full or commit
        self.ls_tree_fails, self.rev_parse_fails = ls_tree_fails, rev_parse_fails
        self.shas = {p: f"{i:040x}" for i, p in enumerate(files, start=1)}
        self.files = files
        self.blobs = {self.shas[p]: d for p, d in files.items() if d is not None}
        self.replies = replies or {}
        self.batches: list[_Batch] = []
        self.module = SimpleNamespace(run=self.run, Popen=self.popen, PIPE=subprocess.PIPE,
                                      CalledProcessError=subprocess.CalledProcessError)

    def _answer(self, args: list[str]) -> tuple[int, bytes, bytes]:
        if "cat-file" in args:  # cat-file -e <commit>^{commit}
            ok = args[-1] == f"{self.commit}^{{commit}}"
            return (0, b"", b"") if ok else (128, b"", f"fatal: Not a valid object name {args[-1]}\n".encode())
        if "ls-tree" in args:
            if self.ls_tree_fails:
                return 128, b"", b"fatal: bad tree object\n"
            rows = [f"100644 blob {self.shas[p]} {'BAD' if d is None else len(d):>7}\t{p}".encode()
                    for p, d in self.files.items()]
            rows.append(f"160000 commit {'f' * 40}       -\tthird_party/sub".encode())  # a submodule
            return 0, b"\0".join(rows) + b"\0", b""
        if "rev-parse" in args:
            return (128, b"", b"fatal: ambiguous\n") if self.rev_parse_fails else (0, f"{self.full}\n".encode(), b"")
        raise AssertionError(args)

    def run(self, args: list[str], capture_output: bool = False, text: bool = False, check: bool = False
            ) -> subprocess.CompletedProcess[Any]:
        rc, out, err = self._answer(args)
        if not capture_output:  # the child writes to the inherited stdout and stderr
            sys.stdout.write(out.decode())
            sys.stderr.write(err.decode())
            out_v: Any = None
            err_v: Any = None
        else:
            out_v, err_v = (out.decode(), err.decode()) if text else (out, err)
        if check and rc:
            raise subprocess.CalledProcessError(rc, args, out_v, err_v)
        return subprocess.CompletedProcess(args, rc, out_v, err_v)

    def popen(self, args: list[str], stdin: int, stdout: int) -> _Batch:
        assert args[-2:] == ["cat-file", "--batch"] and stdin == stdout == subprocess.PIPE
        self.batches.append(_Batch(self.blobs, self.replies))
        return self.batches[-1]


def test_the_stand_in_answers_in_the_formats_real_git_gives_for_the_same_tree(tmp_path):
    """The stand-in is checked against git itself: a repository holding the same files and submodule gives the same
    ``ls-tree -r -l -z`` rows (object ids aside), the same ``cat-file --batch`` replies for a blob and an unknown
    id, the same ``rev-parse`` line and the same exit status of ``cat-file -e``."""
    import re
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    files = {"a.py": b"x = 1\n", "deep/b.txt": b"two\nlines\n"}
    env_git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*env_git, "init", "-q"], check=True)
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    subprocess.run([*env_git, "add", *files], check=True)
    subprocess.run([*env_git, "update-index", "--add", "--cacheinfo", f"160000,{'f' * 40},third_party/sub"],
                   check=True)
    subprocess.run([*env_git, "commit", "-q", "-m", "t"], check=True)
    head = subprocess.run([*env_git, "rev-parse", "HEAD^{commit}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    fake = FakeGit(head, dict(files))

    def same_ids(rows: bytes) -> list[str]:
        return sorted(re.sub(r"\b[0-9a-f]{40}\b", "<id>", r) for r in rows.decode().split("\0") if r)

    real_rows = subprocess.run([*env_git, "ls-tree", "-r", "-l", "-z", head], capture_output=True, check=True).stdout
    fake_rows = fake.run(["git", "ls-tree", "-r", "-l", "-z", head], capture_output=True).stdout
    assert same_ids(fake_rows) == same_ids(real_rows)
    blob = subprocess.run([*env_git, "rev-parse", "HEAD:deep/b.txt"], capture_output=True, text=True,
                          check=True).stdout.strip()
    query = f"{blob}\n{'e' * 40}\n".encode()
    real_batch = subprocess.run([*env_git, "cat-file", "--batch"], input=query, capture_output=True,
                                check=True).stdout
    batch = fake.popen(["git", "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    batch.stdin.write(query.replace(blob.encode(), fake.shas["deep/b.txt"].encode()))
    batch.stdin.flush()
    assert batch.stdout.read().replace(fake.shas["deep/b.txt"].encode(), blob.encode()) == real_batch
    for commit in (head, "0" * 40):
        real = subprocess.run([*env_git, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
        assert (fake.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode == 0) \
            == (real.returncode == 0)
    assert fake.run(["git", "rev-parse", "HEAD^{commit}"], capture_output=True, text=True).stdout == f"{head}\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "up" / ".git").mkdir(parents=True)
    return tmp_path / "up"


def fake_git(monkeypatch, *args, **kw) -> FakeGit:
    git = FakeGit(*args, **kw)
    monkeypatch.setattr(tree, "subprocess", git.module)
    return git


def duck(**kw: Any) -> SimpleNamespace:
    """A contract with only what the tree rules read (each test sets what it is about)."""
    base: dict[str, Any] = dict(model="m", repo="o/r", commit="c" * 40, entry={"script": "gen.py"}, sys_path=[],
                                environment=SimpleNamespace(steps=(), editable=()), checkpoint=(), weights=(), raw={})
    return SimpleNamespace(**(base | kw))


def listing(files: dict[str, tuple[Optional[int], Optional[int]]], names: Optional[dict] = None,
            model: str = "m", repo: str = "o/r") -> TreeListing:
    return TreeListing(model=model, repo=repo, commit="c" * 40, listed_commit="d" * 40, source="s", files=files,
                       names=names or {})


def hf(name: str, **kw: Any) -> Weight:
    return Weight(name=name, repo="o/w", source="README.md:1", **kw)


# -- the listing file ---------------------------------------------------------------------------------------------


def test_from_json_reads_each_file_as_size_then_lines_and_defaults_note_and_names():
    back = TreeListing.from_json({"model": "m", "repo": "o/r", "commit": "c", "listed_commit": "c", "source": "s",
                                  "files": {"a.py": [120, 7], "b.bin": [None, None]}})
    assert back.files == {"a.py": (120, 7), "b.bin": (None, None)} and back.note == "" and back.names == {}


def test_listing_text_is_one_file_a_line_with_a_one_space_indent_and_unescaped_text():
    lst = TreeListing(model="m", repo="o/r", commit="c1", listed_commit="c2", source="s", note="é",
                      files={"é.bin": (None, None), "a.py": (3, 1)}, names={"x.pth": ("a.py:1",)})
    assert tree.listing_text(lst) == (
        '{\n "model": "m",\n "repo": "o/r",\n "commit": "c1",\n "listed_commit": "c2",\n "source": "s",\n'
        ' "note": "é",\n "names": {\n  "x.pth": [\n   "a.py:1"\n  ]\n },\n'
        ' "files": {\n  "a.py": [3, 1],\n  "é.bin": [null, null]\n }\n}\n')
    assert TreeListing.from_json(json.loads(tree.listing_text(lst))) == lst


def test_listing_path_is_under_the_directory_given():
    assert tree.listing_path("m", Path("/elsewhere")) == Path("/elsewhere/m/upstream_tree.json")


# -- reading a tree -----------------------------------------------------------------------------------------------


def test_a_git_directory_needs_both_objects_and_head(tmp_path):
    only_objects, only_head, both = tmp_path / "o", tmp_path / "h", tmp_path / "b"
    (only_objects / "objects").mkdir(parents=True)
    (both / "objects").mkdir(parents=True)
    only_head.mkdir()
    for d in (only_head, both):
        (d / "HEAD").write_text("ref: refs/heads/main\n")
    assert tree._git(both) == ["git", f"--git-dir={both}"]
    for d in (only_objects, only_head):
        with pytest.raises(tree.TreeError, match=f"^{d} is neither a git checkout nor a git directory$"):
            tree._git(d)


def test_a_missing_commit_is_refused_without_printing_gits_complaint(monkeypatch, checkout, capsys):
    fake_git(monkeypatch, "a" * 40, {"x.py": b"x\n"})
    with pytest.raises(tree.TreeError) as e:
        tree.read_tree(checkout, "b" * 40)
    assert str(e.value) == (f"commit {'b' * 40} is not in -C {checkout}: fetch it (git fetch origin {'b' * 40}), or "
                            "list another commit with --commit <sha> --note '<why the pin is not reachable>'")
    assert capsys.readouterr() == ("", "")


def test_a_tree_git_cannot_list_raises_instead_of_listing_nothing(monkeypatch, checkout):
    fake_git(monkeypatch, "a" * 40, {"x.py": b"x\n"}, ls_tree_fails=True)
    with pytest.raises(subprocess.CalledProcessError):
        tree.read_tree(checkout, "a" * 40)


def test_read_tree_lists_sizes_and_lines_and_a_blob_the_snapshot_lacks_as_unknown(monkeypatch, checkout):
    git = fake_git(monkeypatch, "a" * 40, {"run.sh": b"bash x\nexit\n", "big.bin": None, "w.pt": b"\x00\x01"})
    files, names = tree.read_tree(checkout, "a" * 40)
    # ls-tree prints BAD as the size of a blob it cannot read; a submodule (a commit) is no file of the tree
    assert files == {"run.sh": (12, 2), "big.bin": (None, None), "w.pt": (2, None)} and names == {}
    assert [(b.closed, b.waited) for b in git.batches] == [(True, True)]  # the batch process is closed and reaped


def test_a_nul_past_gits_first_8000_bytes_leaves_a_file_text():
    # git's binary heuristic (xdiff-interface.c buffer_is_binary): a NUL among the first 8000 bytes only
    assert tree._lines(b"a" * 8000 + b"\0") == 1
    assert tree._lines(b"a" * 7999 + b"\0") is None


@pytest.mark.parametrize("reply", [b"", b"SHA tree 3\nabc\n"])
def test_a_batch_reply_that_is_not_a_blob_is_read_as_a_missing_blob(monkeypatch, checkout, reply):
    git = FakeGit("a" * 40, {"first.py": b"x\n", "gone.py": b"abc"})
    sha = git.shas["gone.py"]
    git.replies[sha] = reply.replace(b"SHA", sha.encode())
    monkeypatch.setattr(tree, "subprocess", git.module)
    files, _ = tree.read_tree(checkout, "a" * 40)
    assert files == {"first.py": (2, 1), "gone.py": (3, None)}


def test_names_are_searched_only_in_text_files_under_the_folder_given(monkeypatch, checkout):
    fake_git(monkeypatch, "a" * 40, {"sub/load.py": b"ckpt = 'model.pt'\n", "other.py": b"path = 'model.pt'\n",
                                     "sub/blob.bin": b"\0 'vae.pth'"})
    _, names = tree.read_tree(checkout, "a" * 40, ("model.pt", "vae.pth"), "sub/")
    assert names == {"model.pt": ("sub/load.py:1",), "vae.pth": ()}


def test_a_name_is_recorded_at_its_first_three_lines_only(monkeypatch, checkout):
    fake_git(monkeypatch, "a" * 40, {"a.py": b"".join(b"p%d = 'model.pt'\n" % i for i in range(5))})
    _, names = tree.read_tree(checkout, "a" * 40, ("model.pt",))
    assert names == {"model.pt": ("a.py:1", "a.py:2", "a.py:3")}


# -- building a model's listing -----------------------------------------------------------------------------------


MG3_FILES = {"Matrix-Game-3/generate.py": b"vae = 'Wan2.2_VAE.pth'\n", "README.md": b"get 'MG-LightVAE.pth'\n"}
MG3_NAMES = {"MG-LightVAE.pth": (), "Wan2.2_VAE.pth": ("Matrix-Game-3/generate.py:1",), "base_distilled_model": (),
             "models_t5_umt5-xxl-enc-bf16.pth": (), "umt5-xxl": ()}


@pytest.mark.parametrize("commit", [None, MG3_PIN])
def test_build_listing_lists_the_pin_and_searches_names_in_the_contracts_subdir(monkeypatch, checkout, commit):
    fake_git(monkeypatch, MG3_PIN, MG3_FILES)
    lst = tree.build_listing(MG3, checkout, commit)
    assert lst == TreeListing(model=MG3, repo="SkyworkAI/Matrix-Game", commit=MG3_PIN, listed_commit=MG3_PIN,
                              source="git ls-tree -r -l of SkyworkAI/Matrix-Game",
                              files={"Matrix-Game-3/generate.py": (23, 1), "README.md": (22, 1)}, names=MG3_NAMES)


def test_build_listing_records_the_source_name_and_the_full_commit_of_another_commit(monkeypatch, checkout):
    fake_git(monkeypatch, "71c3cd7f7413", MG3_FILES, full="71c3cd7f7413" + "0" * 28)
    lst = tree.build_listing(MG3, checkout, "71c3cd7f7413", note="pin unreachable", source_name="a mirror")
    assert (lst.source, lst.listed_commit, lst.commit, lst.note) == ("a mirror", "71c3cd7f7413" + "0" * 28,
                                                                       MG3_PIN, "pin unreachable")


def test_build_listing_raises_when_git_cannot_resolve_the_commit(monkeypatch, checkout):
    fake_git(monkeypatch, MG3_PIN, MG3_FILES, rev_parse_fails=True)
    with pytest.raises(subprocess.CalledProcessError):
        tree.build_listing(MG3, checkout)


def test_the_command_writes_the_models_listing_where_listing_path_says(monkeypatch, checkout, tmp_path, capsys):
    fake_git(monkeypatch, MG3_PIN, MG3_FILES)
    monkeypatch.setattr(tree, "listing_path", lambda model, directory=None: tmp_path / "out" / model / tree.TREE_FILE)
    assert tree.main([str(checkout), "--model", MG3]) == 0
    out = tmp_path / "out" / MG3 / tree.TREE_FILE
    assert TreeListing.from_json(json.loads(out.read_text())).names == MG3_NAMES
    assert capsys.readouterr().out.startswith(
        f"{out}: 2 files of SkyworkAI/Matrix-Game@{MG3_PIN[:12]}, 5 weight names searched; ")


def test_the_command_requires_a_model(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        tree.main([str(tmp_path)])
    assert e.value.code == 2 and "the following arguments are required: --model" in capsys.readouterr().err


def test_run_as_a_module_the_command_exits_with_mains_status(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sys, "argv", ["tree", str(tmp_path), "--model", MG3, "--out", str(tmp_path / "x.json")])
    with warnings.catch_warnings(), pytest.raises(SystemExit) as e:
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module is imported already
        runpy.run_module("adapters.contracts.tree", run_name="__main__")
    assert e.value.code == 2
    assert capsys.readouterr().err == f"error: {tmp_path} is neither a git checkout nor a git directory\n"
    assert not (tmp_path / "x.json").exists()


# -- what the contract names --------------------------------------------------------------------------------------


def test_weight_names_are_the_last_literal_parts_of_checkpoint_files_and_hub_weights():
    c = duck(checkpoint=(CheckpointEntry(key="checkpoint", kind="dir", source="s",
                                         files=("model.safetensors", "google/umt5-xxl/*", "shard*.safetensors")),),
             weights=(hf("vae", file="vae/Wan2.1_VAE.pth"), hf("shipped", hub="checkout", files=("in_repo.pt",))))
    assert tree.weight_names(c) == ("Wan2.1_VAE.pth", "model.safetensors", "umt5-xxl")


def test_a_step_names_its_cwd_only_when_it_has_one():
    c = duck(environment=SimpleNamespace(editable=(), steps=(
        Step(source="s", requirements="req.txt"), Step(source="s", cwd="sub", requirements="req.txt"))))
    assert list(tree._step_paths(c)) == [
        NamedPath("req.txt", "file", "environment.steps[0].requirements"),
        NamedPath("sub", "dir", "environment.steps[1].cwd"),
        NamedPath("sub/req.txt", "file", "environment.steps[1].requirements")]


def test_a_run_step_names_only_relative_files_of_the_checkout_before_a_comment():
    run = "CFG=conf.yaml bash ./setup.sh --cfg=b.yaml /opt/abs.py $HOME/x.sh -r req.txt # then notes.txt"
    c = duck(environment=SimpleNamespace(editable=(), steps=(Step(source="s", cwd="tools", run=run),)))
    assert [p.path for p in tree._step_paths(c)] == ["tools", "tools/setup.sh", "tools/req.txt"]


def test_only_upstream_dir_weights_from_a_hub_fill_a_folder_of_the_checkout():
    c = duck(weights=(hf("a", key="upstream_dir", into="ckpts"), hf("b", key="upstream_dir", prefix="models/x"),
                      hf("c", key="checkpoint", into="other"), hf("d", key="upstream_dir", hub="checkout", into="in"),
                      hf("e", key="upstream_dir")))
    assert tree._downloaded_into_checkout(c) == ("ckpts", "models/x")


def test_checkpoint_files_a_hub_download_fills_are_not_named_in_the_checkout():
    c = duck(weights=(hf("a", key="upstream_dir", into="ckpts"), hf("b", key="upstream_dir", into="models")),
             checkpoint=(CheckpointEntry(key="upstream_dir", kind="dir", source="s",
                                         files=("ckpts/a.pt", "ckpts", "models", "configs/x.yaml", "ckptsX/b.pt")),
                         CheckpointEntry(key="checkpoint", kind="dir", source="s", files=("elsewhere.pt",))))
    assert tree.named_paths(c)[1:] == [NamedPath("configs/x.yaml", "any", "checkpoint[upstream_dir].files"),
                                       NamedPath("ckptsX/b.pt", "any", "checkpoint[upstream_dir].files")]


def test_any_key_ending_in_source_is_a_citation():
    c = duck(raw={"policies": {"native": {"flag_source": "run.sh:3", "note": "x.py:1"}}})
    assert [(k, m.group(0)) for k, m in tree.citations(c)] == [("policies.native.flag_source", "run.sh:3")]


def test_a_cited_range_must_end_within_the_file():
    c = contracts.load("lingbot_v2")
    lst = listing({"run.sh": (100, 10), "w.bin": (5, None)}, model="lingbot_v2", repo=c.repo)
    cite = tree.CITATION.search
    assert tree._citation_problem({"x": lst}, c, "k", cite("run.sh:3-11")) == "k: run.sh:3-11 is past its 10 lines"
    assert tree._citation_problem({"x": lst}, c, "k", cite("run.sh:3-10")) is None
    assert tree._citation_problem({"x": lst}, c, "k", cite("w.bin:40")) is None  # a binary file has no line count


def test_a_path_named_as_either_holds_as_a_folder():
    assert tree._holds(listing({"configs/a.yaml": (1, 1)}), NamedPath("configs", "any", "k"))


def test_problems_needs_no_other_listings_and_asks_to_regenerate_for_a_name_never_searched():
    c = duck(checkpoint=(CheckpointEntry(key="checkpoint", kind="dir", source="s", files=("model.pt",)),))
    assert tree.problems(c, listing({"gen.py": (1, 1)}, names={"model.pt": ("gen.py:1",)})) == []
    assert tree.problems(c, listing({"gen.py": (1, 1)})) == [
        "weight name 'model.pt' was not searched when the listing was made: regenerate it "
        "(python -m adapters.contracts.tree <checkout> --model m)"]
