"""A Hugging Face hub stand-in on a local folder, for ``harness.app.setup`` tests (nothing is downloaded).

``<root>/<owner>/<name>/`` holds one repository's files at one commit (a sha1 over its paths and bytes). It keeps the
rules the real hub applies to the calls setup makes: an unknown repository or revision is an error, a gated
repository (a ``.gated`` file) refuses a client without a token, files above 1 KiB are "LFS" files reported with
their sha256 and the others with their git blob id, and a download resumes from ``<file>.incomplete``.
``corrupt`` lists paths whose next download arrives damaged (to test the checksums).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Optional

from harness.app.setup import GatedError, RemoteFile, SetupError, gated_message, git_blob_sha1, matches, sha256


class LocalHub:
    def __init__(self, root: Path, token: Optional[str] = None):
        self.root, self.token = Path(root), token
        self.downloads: list[str] = []
        self.resumed: list[str] = []
        self.corrupt: set[str] = set()

    def _repo(self, repo: str) -> Path:
        d = self.root / repo
        if not d.is_dir():
            raise GatedError(f"{repo} is not reachable (not found, private or gated). " + gated_message(repo, "?"))
        if (d / ".gated").exists() and not self.token:
            raise GatedError(gated_message(repo, "?"))
        return d

    def _commit(self, d: Path) -> str:
        h = hashlib.sha1()
        for p in sorted(x for x in d.rglob("*") if x.is_file() and x.name != ".gated"):
            h.update(str(p.relative_to(d)).encode() + b"\0" + p.read_bytes())
        return h.hexdigest()

    def files(self, repo: str, revision: str) -> tuple[str, list[RemoteFile]]:
        d = self._repo(repo)
        commit = self._commit(d)
        if revision not in ("main", commit):
            raise SetupError(f"{repo}: the revision is not on the hub ({revision})")
        out = []
        for p in sorted(x for x in d.rglob("*") if x.is_file() and x.name != ".gated"):
            rel = str(p.relative_to(d))
            big = p.stat().st_size > 1024
            out.append(RemoteFile(rel, p.stat().st_size, sha256(p) if big else None, None if big else git_blob_sha1(p)))
        return commit, out

    def download(self, repo: str, commit: str, path: str, local_dir: Path) -> Path:
        d = self._repo(repo)
        if commit != self._commit(d):
            raise SetupError(f"{repo}: no commit {commit}")
        src, dst = d / path, Path(local_dir) / path
        dst.parent.mkdir(parents=True, exist_ok=True)
        part = dst.with_name(dst.name + ".incomplete")
        data = src.read_bytes()
        have = part.read_bytes() if part.exists() else b""
        if have and data.startswith(have):
            self.resumed.append(path)
        else:
            have = b""
        with open(part, "ab" if have else "wb") as f:
            f.write(data[len(have):])
        if path in self.corrupt:
            self.corrupt.discard(path)
            with open(part, "r+b") as f:
                f.write(b"X")
        part.replace(dst)
        self.downloads.append(f"{repo}/{path}")
        return dst

    def snapshot(self, repo: str, commit: str, patterns: list[str], cache_dir: Path) -> Path:
        d = self._repo(repo)
        base = Path(cache_dir) / f"models--{repo.replace('/', '--')}"
        snap = base / "snapshots" / commit
        for rf in self.files(repo, commit)[1]:
            if matches(rf.path, patterns):
                (snap / rf.path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(d / rf.path, snap / rf.path)
                self.downloads.append(f"{repo}/{rf.path}")
        (base / "refs").mkdir(parents=True, exist_ok=True)
        (base / "refs" / "main").write_text(commit)
        return snap
