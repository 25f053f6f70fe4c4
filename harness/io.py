"""Atomic file writes: a temporary file in the same folder, then ``os.replace``. Readers never see half a file.

Every text written here is scrubbed of secrets (:func:`harness.secrets.scrub`), and while a command runs every
write is confined to its run directory (:func:`confine`): a path that resolves outside it is refused.
Files read back from disk go through :func:`load_json` / :func:`read_jsonl`, whose errors name the file and the fix.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from .errors import ConfigError


class ContainmentError(ConfigError):
    """A write would land outside the directories this command may write (its run directory)."""


class BadFileError(ConfigError):
    """A file read from disk is missing, truncated or of the wrong kind; the message names the file and the fix."""


_CONFINED: list[Path] = []  # the roots writes must stay under while a command runs (empty: not confined)


@contextmanager
def confine(*roots: str | Path) -> Iterator[None]:
    """While the block runs, every write through this module (and :class:`harness.video.VideoWriter`, the run
    directory's item folders) must resolve under one of ``roots``; :class:`ContainmentError` otherwise. Nested
    blocks add roots. A process-wide setting (not per thread): the runner's worker threads are confined too."""
    added = [Path(r).expanduser().resolve() for r in roots]
    _CONFINED.extend(added)
    try:
        yield
    finally:
        for r in added:
            _CONFINED.remove(r)


def check_contained(path: str | Path) -> Path:
    """``path`` with its folder resolved and its last part kept as named (a symlink there is never followed: the
    writers of this module replace it, :func:`open_stream` refuses it); :class:`ContainmentError` when writes are
    confined and it lies outside every root. A symlinked folder that leads out of the run is refused."""
    raw = Path(path).expanduser()
    p = raw.parent.resolve() / raw.name if raw.name not in ("", ".", "..") else raw.resolve()
    if _CONFINED and not any(p == r or p.is_relative_to(r) for r in _CONFINED):
        raise ContainmentError(f"refusing to write {p}: outside the run directory "
                               f"({', '.join(str(r) for r in _CONFINED)}); a name in the config or a manifest "
                               "became a path that leaves it (use plain names: letters, digits, _ . , = + -)")
    return p



def sha256_file(path: str | Path) -> str:
    """sha256 hex digest of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def _default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def process_umask() -> int:
    """The process umask, read without changing it (Linux ``/proc``; elsewhere set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode(executable: bool = False) -> int:
    """The mode a plain ``open()`` would give a new file under the process umask (0o666/0o777 & ~umask)."""
    return (0o777 if executable else 0o666) & ~process_umask()


def host_tag() -> str:
    """Six hex digits naming this host in temporary file names."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def temp_tag() -> str:
    """``<host>-<pid>``: every temporary file name carries its writer, so a dead writer's leftovers can be found."""
    return f"{host_tag()}-{os.getpid()}"


_TEMP_OWNER = re.compile(r"^\..*\.(?P<host>[0-9a-f]{6})-(?P<pid>\d+)\.")


def temp_owner(name: str) -> tuple[str, int] | None:
    """(host tag, pid) of a temporary file name written by :func:`atomic_path` or the video writer, else None."""
    m = _TEMP_OWNER.match(name)
    return (m["host"], int(m["pid"])) if m else None


def _pid_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), or None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int, start: int | None = None) -> bool:
    """Whether process ``pid`` exists on this host (and, when ``start`` is given, is the same process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if start is not None:
        now = _pid_start(pid)
        if now is not None and now != start:
            return False  # the pid was reused
    return True


def remove_dead_temps(root: str | Path) -> list[Path]:
    """Delete, under ``root``, temporary files whose writer ran on this host and is gone (killed mid-write).
    A live writer's temporary file is never touched, so this is safe while other processes work in ``root``."""
    gone, me = [], host_tag()
    for dirpath, _, files in os.walk(root):
        for name in files:
            owner = temp_owner(name)
            if owner and owner[0] == me and not pid_alive(owner[1]):
                p = Path(dirpath) / name
                try:
                    p.unlink()
                    gone.append(p)
                except FileNotFoundError:
                    pass
    return gone


_TEMP_COUNTER = itertools.count()


def _create_temp(folder: Path, prefix: str, suffix: str) -> str:
    """Create (``O_EXCL``) an empty temporary file ``<prefix><unique><suffix>`` in ``folder`` and return its path.
    Mode 0o666 filtered by the umask, as a plain ``open()`` gives (mkstemp's 0600 would hide it from colleagues on
    a shared cluster); the name is unique by this process's counter plus random letters."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = os.path.join(folder, f"{prefix}{next(_TEMP_COUNTER)}{os.urandom(3).hex()}{suffix}")
        try:
            os.close(os.open(name, flags, 0o666))
            return name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder} for {prefix}*{suffix}")


def temp_path(path: str | Path, suffix: str = "") -> Path:
    """A new, empty, uniquely named temporary file next to ``path`` (``.<name>.<host>-<pid>.<unique><suffix>``:
    found and removed by :func:`remove_dead_temps` once its writer is gone). Checked by :func:`check_contained`."""
    path = Path(path)
    check_contained(path)
    prefix, end = f".{path.name}.{temp_tag()}.", suffix or path.suffix
    try:
        return Path(_create_temp(path.parent, prefix, end))
    except FileNotFoundError:  # the folder does not exist yet
        path.parent.mkdir(parents=True, exist_ok=True)
        return Path(_create_temp(path.parent, prefix, end))


@contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``, on error removed.

    An ``OSError`` without a file name (a full disk, ``ENOSPC`` from ``write``) is re-raised naming ``path``."""
    path = Path(path)
    check_contained(path)
    prefix, end = f".{path.name}.{temp_tag()}.", suffix or path.suffix
    try:
        tmp = _create_temp(path.parent, prefix, end)
    except FileNotFoundError:  # the folder does not exist yet
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _create_temp(path.parent, prefix, end)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)  # renames onto the name: a symlink there is replaced, never written through
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def strict_json(x: Any) -> Any:
    """``x`` with every non-finite float (NaN, an infinity: an undefined value) as None, so that it is written as
    JSON's ``null`` (RFC 8259 has no NaN; Python's encoder writes a bare ``NaN`` that strict readers refuse). A
    reader maps ``null`` back to NaN where it expects a number. Arrays, tuples and sets become lists."""
    if isinstance(x, float):  # numpy's float64 too
        return x if math.isfinite(x) else None
    if isinstance(x, np.floating):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [strict_json(v) for v in x]
    if isinstance(x, np.ndarray):
        return strict_json(x.tolist())
    return x


def _dumps(data: Any, compact: bool) -> str:
    if compact:
        return json.dumps(data, separators=(",", ":"), default=_default, allow_nan=False) + "\n"
    return json.dumps(data, indent=2, sort_keys=False, default=_default, allow_nan=False) + "\n"


def json_text(data: Any, compact: bool = False) -> str:
    """The text :func:`write_json` writes for ``data`` (indented by 2, a final newline; ``compact``: no spaces, for
    files of millions of values, which the indenting encoder takes seconds to write). Strict JSON: a NaN or an
    infinity is written as ``null`` (:func:`strict_json`), never as a bare ``NaN``."""
    try:  # the encoder's fast path; only data holding a non-finite float is walked
        return _dumps(data, compact)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
    return _dumps(strict_json(data), compact)


def write_json(path: str | Path, data: Any, compact: bool = False) -> None:
    """``data`` as indented JSON, atomically, secrets scrubbed."""
    write_text(path, json_text(data, compact))


SEAL = "content_sha256"  # the key of a sealed JSON file that holds the sha256 of the rest of it


def seal_digest(data: dict[str, Any]) -> str:
    """sha256 hex of ``data`` without its :data:`SEAL` key, as canonical JSON (sorted keys, compact)."""
    body = {k: v for k, v in data.items() if k != SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), default=_default,
                                     allow_nan=True).encode()).hexdigest()


def write_sealed_json(path: str | Path, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as :func:`write_json` writes it (secrets scrubbed), plus :data:`SEAL`: the sha256 of what was
    written, so a reader finds a hand edit (:func:`seal_problem`). Returns the sealed mapping as written."""
    from .secrets import scrub

    clean = strict_json(json.loads(scrub(json.dumps(data, default=_default))))  # sealed as written: NaN as null
    clean.pop(SEAL, None)
    sealed = {**clean, SEAL: seal_digest(clean)}
    write_text(path, json_text(sealed), scrubbed=True)
    return sealed


def seal_problem(data: Any) -> str | None:
    """Why a mapping read from a sealed file cannot be trusted (no seal, or its content no longer matches it),
    None when it matches."""
    if not isinstance(data, dict) or not isinstance(data.get(SEAL), str):
        return f"no {SEAL} (written by an older version, or edited)"
    if data[SEAL] != seal_digest(data):
        return f"its content no longer matches its {SEAL} (edited after it was written)"
    return None


def write_text(path: str | Path, text: str, scrubbed: bool = False, mode: int | None = None) -> None:
    """``text`` atomically, secrets scrubbed (:func:`harness.secrets.scrub`: every file the harness writes).
    ``scrubbed=True``: the caller has scrubbed every part of ``text`` already (a big file assembled from parts
    that were each scrubbed once: the manifest, a dry run's ``meta.json``). ``mode`` (``0o600`` for a study's
    secrets) is set before a byte is written."""
    from .secrets import scrub

    clean = text if scrubbed else scrub(text)
    with atomic_path(path) as tmp:
        if mode is not None:
            os.chmod(tmp, mode)
        tmp.write_text(clean)


def write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> None:
    """``data`` atomically (binary: not scrubbed); ``mode`` (e.g. ``0o600``) set before a byte is written."""
    with atomic_path(path) as tmp:
        if mode is not None:
            os.chmod(tmp, mode)
        with open(tmp, "r+b") as fh:
            fh.write(data)


def copy_file(src: str | Path, dst: str | Path) -> Path:
    """A copy of ``src``'s bytes at ``dst``, atomically and confined like every write of this module (a symlink at
    ``dst`` is replaced, never written through); returns ``dst``."""
    import shutil

    dst = Path(dst)
    with atomic_path(dst) as tmp, open(src, "rb") as fi, open(tmp, "r+b") as fo:
        shutil.copyfileobj(fi, fo)
    return dst


def replace(tmp: str | Path, path: str | Path) -> Path:
    """Rename a finished temporary file (one this process wrote next to ``path``, e.g. a video encoder's) onto
    ``path``, confined like every write of this module."""
    check_contained(path)
    os.replace(tmp, path)
    return Path(path)


def open_stream(path: str | Path, append: bool = False, binary: bool = False, **kw: Any) -> IO[Any]:
    """A file opened for streaming writes (a log written line by line; the file a lock is taken on): confined like
    every write of this module, and never through a symlink (``O_NOFOLLOW``: :class:`ContainmentError`). Not
    atomic; callers scrub what they write. ``kw`` goes to :func:`open` (``encoding``, ``errors``)."""
    p = check_contained(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    # (the descriptor is not inherited by children: Python's default, PEP 446)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(p, flags, 0o666)
    except OSError:
        if p.is_symlink():
            raise ContainmentError(f"refusing to write {p}: it is a symlink (to {os.readlink(p)}); a file the "
                                   "harness writes is never followed out of its folder (remove the link)") from None
        raise
    return os.fdopen(fd, "wb" if binary else "w", **kw)  # O_APPEND (not the mode letter) makes writes append


def link_file(src: str | Path, path: str | Path) -> str:
    """Place the existing file ``src`` at ``path`` without copying its bytes, atomically: a hard link when both are
    on one file system, else a symbolic link to ``src``'s absolute path (``path`` must be contained; ``src`` may be
    anywhere, it is only read through the link). Returns ``"hardlink"`` or ``"symlink"``."""
    src = Path(src).resolve(strict=True)
    with atomic_path(path) as tmp:
        tmp.unlink()
        try:
            os.link(src, tmp)
            kind = "hardlink"
        except OSError:  # another file system (or links not allowed there)
            os.symlink(src, tmp)
            kind = "symlink"
    return kind


def append_text(path: str | Path, text: str) -> None:
    """Append ``text`` (a whole record, e.g. one JSON line) to a log file, scrubbed of secrets and confined like
    every write of this module; appends are not atomic, so readers of such logs skip a torn last line."""
    from .secrets import scrub

    with open_stream(path, append=True) as fh:
        fh.write(scrub(text))


def save_npy(path: str | Path, arr: np.ndarray) -> None:
    with atomic_path(path, suffix=".npy") as tmp:
        np.save(tmp, arr)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def load_json(path: str | Path, fix: str, expect: type | tuple[type, ...] = dict, what: str = "") -> Any:
    """A JSON file read back from disk, checked: missing, unreadable, not UTF-8, not JSON (truncated) or not of
    type ``expect`` is a :class:`BadFileError` naming the file (and ``what`` it should hold) and ``fix``."""
    path = Path(path)
    label = f"{path}" + (f" ({what})" if what else "")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadFileError(f"{label}: missing; {fix}") from None
    except UnicodeDecodeError:
        raise BadFileError(f"{label}: not UTF-8 text (a binary or damaged file); {fix}") from None
    except OSError as exc:
        raise BadFileError(f"{label}: cannot be read ({exc.strerror}); {fix}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadFileError(f"{label}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}: truncated or "
                           f"edited?); {fix}") from None
    if not isinstance(data, expect):
        want = " or ".join(t.__name__ for t in (expect if isinstance(expect, tuple) else (expect,)))
        raise BadFileError(f"{label}: expected a JSON {want}, got {type(data).__name__}; {fix}")
    return data


class JsonLinesError(BadFileError):
    """A line of a JSON Lines file is not a JSON object; the message names the file and the 1-based line."""


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every non-blank line of a JSON Lines file as a dict; a bad line raises :class:`JsonLinesError` naming
    ``<file>:<line>``."""
    path = Path(path)
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise JsonLinesError(f"{path}: not UTF-8 text (a binary or damaged file); fix or replace it") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JsonLinesError(f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or delete that line") from None
        if not isinstance(rec, dict):
            raise JsonLinesError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
        out.append(rec)
    return out


#: Seconds ``run_logged`` waits, after its process ended, for the rest of that process's output: a process it
#: started (a server, a worker) can hold the pipe open for as long as it lives.
LOG_DRAIN_S = 5.0


def run_logged(argv: list[str], log_path: str | Path, *, cwd: str | None = None,
               env: Mapping[str, str] | None = None,
               timeout: float | None = None, values: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` with stdout and stderr written, line by line and scrubbed, to ``log_path``; returns the exit
    code. Raises :class:`subprocess.TimeoutExpired` (after killing the process) past ``timeout`` seconds.

    The values of ``env``'s secret-named variables are scrubbed too, so a token upstream prints never lands in
    the log. Once the process has ended, its output is copied for at most :data:`LOG_DRAIN_S` more seconds; where
    a process it started still holds the pipe then, the log says so on its last line and nothing is written after
    it (the call returns instead of waiting for that process)."""
    import subprocess
    import threading
    import time

    from .secrets import is_secret_name, scrub

    extra = dict(values or {})
    if env:  # (a value too short to remove, under MIN_VALUE_LEN, is skipped by scrub itself: secrets.scrubbable)
        extra.update({v: k for k, v in env.items() if is_secret_name(k)})
    with open_stream(log_path, encoding="utf-8", errors="replace") as lf:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        stdout = proc.stdout
        ended, writing = threading.Event(), threading.Lock()

        def pump() -> None:
            for raw in iter(stdout.readline, b""):
                with writing:
                    if ended.is_set():  # the log was closed for this run: a left-over process's late lines
                        return
                    lf.write(scrub(raw.decode("utf-8", errors="replace"), extra))
                    lf.flush()

        def drain() -> None:
            t.join(timeout=LOG_DRAIN_S)
            with writing:
                ended.set()
                if t.is_alive():
                    lf.write(f"[harness] the process ended, but a process it started still held its output "
                             f"{LOG_DRAIN_S:g} s later; the log stops here\n")
                    lf.flush()
                else:  # (closing a pipe a thread still reads would wait for that read)
                    stdout.close()

        t = threading.Thread(target=pump, name="upstream-log", daemon=True)
        t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            drain()
            raise
        except BaseException:  # interrupted: the child must not outlive us
            proc.kill()
            proc.wait()
            with writing:
                ended.set()  # nothing more reaches the log, which closes as the interruption goes on
            raise
        drain()
    return proc.returncode
