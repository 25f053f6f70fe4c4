"""Per-item locks for run directories shared by several processes (shards, ranks, two people, a crashed run).

A lock is a small JSON file ``<run>/.locks/<item>.lock`` created with ``O_CREAT | O_EXCL`` (atomic on local
filesystems and NFS) holding its owner: ``{host, pid, pid_start, token, started}``. A lock whose owner ran on
this host and is gone (the pid is dead, or was reused by a process that started later) is *stale*: it is taken
over. Take-overs on one host are serialised by an ``flock`` on ``<run>/.locks/.takeover`` so two processes never
both take the same stale lock. A lock held from another host is always honoured (its pid cannot be checked from
here), unless it names a Slurm job (``slurm_job``, set inside a Slurm job): then it is stale once the controller no
longer runs that job (a job killed on one node does not block the rerun that lands on another); where ``squeue``
cannot tell, the lock is honoured. Otherwise the message says which file to delete if that host is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional

from .io import _pid_start, file_mode, open_stream, pid_alive


def current_slurm_job() -> Optional[str]:
    """This process's Slurm job (``<array>_<task>`` for an array task, else the job id), None outside Slurm."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or None


#: squeue states of a job whose processes may still run
_SLURM_ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING",
                 "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "STAGE_OUT"}
_SLURM_CACHE: dict[str, tuple[float, bool]] = {}  # job -> (asked at, alive): waiting runners poll every 0.5 s


def slurm_job_alive(job: str, max_age_s: float = 10.0) -> bool:
    """Whether Slurm still runs ``job`` (``squeue``); True when squeue cannot tell (missing, controller down)."""
    hit = _SLURM_CACHE.get(job)
    if hit is not None and time.monotonic() - hit[0] < max_age_s:
        return hit[1]
    try:
        p = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=20)
        if p.returncode == 0:
            alive = bool(set(p.stdout.split()) & _SLURM_ACTIVE)
        else:  # a job the controller has forgotten ("Invalid job id") is over; any other failure: cannot tell
            alive = "invalid job id" not in p.stderr.lower()
    except (OSError, subprocess.TimeoutExpired):
        alive = True
    _SLURM_CACHE[job] = (time.monotonic(), alive)
    return alive


@dataclass(frozen=True)
class LockOwner:
    host: str
    pid: int
    pid_start: Optional[int]
    token: str
    started: float
    slurm_job: Optional[str] = None  # the Slurm job the owner ran in (None outside Slurm)

    @staticmethod
    def me() -> "LockOwner":
        pid = os.getpid()
        return LockOwner(socket.gethostname(), pid, _pid_start(pid), uuid.uuid4().hex, time.time(),
                         current_slurm_job())

    def alive(self) -> bool:
        if self.host != socket.gethostname():
            # cannot check another host's processes: honour the lock, unless Slurm says its job is over
            return slurm_job_alive(self.slurm_job) if self.slurm_job else True
        return pid_alive(self.pid, self.pid_start)

    def describe(self) -> str:
        job = f" (Slurm job {self.slurm_job})" if self.slurm_job else ""
        return f"pid {self.pid} on {self.host}{job} since {time.strftime('%H:%M:%S', time.localtime(self.started))}"


def lock_name(key: str) -> str:
    """A flat file name for an item key (readable prefix + hash, so distinct keys never collide)."""
    flat = key.replace("/", "__")
    return f"{flat[:120]}-{hashlib.sha1(key.encode()).hexdigest()[:10]}.lock"


class ItemLocks:
    """The lock folder of one run directory. ``try_acquire(key)`` returns True when this process now holds the
    item (fresh or taken over from a dead owner), False when a live process holds it."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir) / ".locks"
        self.owner = LockOwner.me()
        self.held: set[str] = set()
        self.taken_over: list[str] = []

    def path(self, key: str) -> Path:
        return self.dir / lock_name(key)

    def read_owner(self, key: str) -> Optional[LockOwner]:
        try:
            return LockOwner(**json.loads(self.path(key).read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            # created but not yet written (the owner is between open and write), or garbage: judge by age
            try:
                age = time.time() - self.path(key).stat().st_mtime
            except FileNotFoundError:
                return None
            if age < 10:
                return LockOwner("?", -1, None, "", time.time())
            return LockOwner(socket.gethostname(), 2**22 + 1, None, "garbage", 0.0)  # treated as dead

    def _create(self, key: str) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path(key), os.O_CREAT | os.O_EXCL | os.O_WRONLY, file_mode())
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(asdict(self.owner)))
        self.held.add(key)
        return True

    @contextlib.contextmanager
    def _takeover_guard(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open_stream(self.dir / ".takeover", append=True) as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def try_acquire(self, key: str) -> bool:
        if key in self.held:
            return True
        if self._create(key):
            return True
        owner = self.read_owner(key)
        if owner is None:
            return self._create(key)  # released between our two looks
        if owner.host == "?" or owner.alive():
            return False
        with self._takeover_guard():
            again = self.read_owner(key)
            if again is not None and again.token == owner.token:
                with contextlib.suppress(FileNotFoundError):
                    self.path(key).unlink()
            ok = self._create(key)
        if ok:
            self.taken_over.append(key)
        return ok

    def holder(self, key: str) -> Optional[LockOwner]:
        """The live owner of ``key``'s lock, or None when it is free or stale."""
        owner = self.read_owner(key)
        if owner is None or owner.token == self.owner.token:
            return None
        return owner if (owner.host == "?" or owner.alive()) else None

    def clear_stale(self, key: str) -> bool:
        """Remove ``key``'s lock when its owner is dead: a process killed after it finished the item and before it
        released the lock leaves one that nobody would take over, since the item is done. True when one was
        removed; a live owner's lock, one from another host and this process's own are left alone."""
        owner = self.read_owner(key)
        if owner is None or owner.alive():  # our own lock, an unwritten young one, another host's: all alive
            return False
        with self._takeover_guard():
            again = self.read_owner(key)
            if again is None or again.token != owner.token:
                return False  # taken over (or released) meanwhile
            with contextlib.suppress(FileNotFoundError):
                self.path(key).unlink()
        return True

    def release(self, key: str) -> None:
        if key not in self.held:
            return
        self.held.discard(key)
        owner = self.read_owner(key)
        if owner is not None and owner.token == self.owner.token:
            with contextlib.suppress(FileNotFoundError):
                self.path(key).unlink()

    def release_all(self) -> None:
        for key in list(self.held):
            self.release(key)


@contextlib.contextmanager
def file_lock(path: Path, waiting: Optional[str] = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` for the block (released by the kernel if the process dies). With
    ``waiting``, a process that has to wait logs that line with the lock file's path first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, file_mode())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                import logging

                logging.getLogger(__name__).info("waiting: %s (lock file %s)", waiting, path)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
