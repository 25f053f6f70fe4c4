"""A GPU pool for upstream jobs: the visible GPUs are shared among concurrent jobs, each with its own
``CUDA_VISIBLE_DEVICES``.

``devices=auto`` takes the GPUs this process may use (``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``);
``devices=[0,1,2,3]`` names them. A job needs ``gpus_per_job`` GPUs, which counts every device of its layout
(Matrix-Game 3: 7 torchrun ranks + 1 async-VAE GPU on index = world size, ``vae_worker_gpus: 1``). Each GPU has an
``flock`` in a node-local folder, so two harness processes on one node never hand out the same GPU, and a job
that crashes (or a process killed with -9) frees its GPUs at once: the kernel drops the locks.

Physical ids are what the pool hands out; ``CUDA_VISIBLE_DEVICES`` of the job lists them, so inside the job the
devices are renumbered 0..k-1, which is what torchrun and the upstream scripts expect.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

from .io import file_mode
from .errors import ConfigError

_assigned: contextvars.ContextVar[Optional[tuple[str, ...]]] = contextvars.ContextVar("harness_gpus", default=None)


class DeviceConfigError(ConfigError):
    """Bad ``devices=`` value, or a job that needs more GPUs than the pool has."""


def current_devices() -> Optional[tuple[str, ...]]:
    """The GPUs the pool assigned to the job running in this thread/context, or None outside the pool."""
    return _assigned.get()


@contextlib.contextmanager
def assigned(devices: Sequence[str]) -> Iterator[None]:
    token = _assigned.set(tuple(str(d) for d in devices))
    try:
        yield
    finally:
        _assigned.reset(token)


def detect_devices() -> list[str]:
    """GPU ids visible to this process: ``CUDA_VISIBLE_DEVICES`` when set, else one per ``nvidia-smi -L`` line."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = [line for line in out.splitlines() if line.strip().startswith("GPU ")]  # "GPU 0: NVIDIA H100 (UUID: ...)"
    return [str(i) for i in range(len(gpus))]


def parse_devices(value: object) -> list[str]:
    """``auto`` | ``null`` -> detected; a list / ``"0,1,2"`` -> those ids (unique)."""
    if value is None or value == "auto":
        return detect_devices()
    if isinstance(value, (list, tuple)):
        ids = [str(v).strip() for v in value]
    elif isinstance(value, (int, str)) and not isinstance(value, bool):
        ids = [v.strip() for v in str(value).split(",") if v.strip()]
    else:
        raise DeviceConfigError(f"devices={value!r}: use auto or a list of GPU ids, e.g. devices=[0,1,2,3]")
    if len(set(ids)) != len(ids):
        raise DeviceConfigError(f"devices={value!r}: a GPU is listed twice")
    bad = [i for i in ids if not (i.isdigit() or i.startswith(("GPU-", "MIG-")))]
    if bad:
        raise DeviceConfigError(f"devices={value!r}: {bad[0]!r} is not a GPU index or UUID")
    return ids


def default_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "worldmem-harness-gpus"


class GPUPool:
    """Hands out disjoint GPU sets. ``acquire(k)`` blocks until k GPUs are free (in this process *and* on this
    node), ``release`` gives them back; :meth:`job` does both around a block and sets :func:`current_devices`.

    Args:
        devices: the GPU ids this pool may use. lock_dir: node-local folder of the per-GPU lock files (shared by
        every harness process of one user group on the node). poll_s: how often a blocked acquire re-checks GPUs
        held by other processes.
    """

    def __init__(self, devices: Sequence[str], lock_dir: Optional[Path] = None, poll_s: float = 0.2):
        self.devices = [str(d) for d in devices]
        self.lock_dir = Path(lock_dir) if lock_dir else default_lock_dir()
        self.poll_s = poll_s
        self._cond = threading.Condition()
        self._fds: dict[str, int] = {}  # device -> fd holding its flock (held by a job of this process)
        self.peak_in_use = 0

    def _try_lock(self, dev: str) -> bool:
        if not self.lock_dir.is_dir():
            self.lock_dir.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(self.lock_dir, 0o1777)  # node-wide, like /tmp: every user's harness coordinates here
        # read-only is enough for flock, so other users can lock a file this user created
        fd = os.open(self.lock_dir / f"gpu-{dev}.lock", os.O_CREAT | os.O_RDONLY, file_mode())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fds[dev] = fd
        return True

    def _grab(self, k: int) -> Optional[list[str]]:
        got: list[str] = []
        for dev in self.devices:
            if len(got) == k:
                break
            if dev not in self._fds and self._try_lock(dev):
                got.append(dev)
        if len(got) == k:
            return got
        self._unlock(got)
        return None

    def _unlock(self, devs: Sequence[str]) -> None:
        for dev in devs:
            fd = self._fds.pop(dev, None)
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def acquire(self, k: int, timeout: Optional[float] = None) -> list[str]:
        if k > len(self.devices):
            raise DeviceConfigError(f"a job needs {k} GPU(s) but devices= gives {len(self.devices)} "
                                    f"({','.join(self.devices) or 'none'}); lower model.gpus_per_job or add GPUs")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                got = self._grab(k)
                if got is not None:
                    self.peak_in_use = max(self.peak_in_use, len(self._fds))
                    return got
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"no {k} free GPU(s) among {self.devices} within {timeout} s")
                # woken by a release in this process; the poll covers GPUs freed by other processes
                self._cond.wait(self.poll_s)

    def release(self, devs: Sequence[str]) -> None:
        with self._cond:
            self._unlock(devs)
            self._cond.notify_all()

    @contextlib.contextmanager
    def job(self, k: int) -> Iterator[list[str]]:
        devs = self.acquire(k)
        try:
            with assigned(devs):
                yield devs
        finally:
            self.release(devs)

    def capacity(self, k: int) -> int:
        """How many k-GPU jobs fit at once."""
        return len(self.devices) // max(1, k)
