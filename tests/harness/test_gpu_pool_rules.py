"""The rules of the GPU pool (harness/gpu_pool.py), one at a time and in this process: which GPUs ``devices=`` names
or detects (``CUDA_VISIBLE_DEVICES``, a stand-in ``nvidia-smi -L``), the per-GPU lock files and their folder, what
``acquire`` hands out while other holders keep GPUs, the deadline on a stand-in clock, ``release`` and ``job``. No
thread, no sleep and no process is started: another process's hold is an open file of this one with an ``flock``,
and waiting is a stand-in condition whose each wait is one poll."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import tempfile
import threading
import types
from pathlib import Path

import pytest

from harness import gpu_pool
from harness.gpu_pool import (
    DeviceConfigError,
    GPUPool,
    assigned,
    current_devices,
    default_lock_dir,
    detect_devices,
    parse_devices,
)


def hold(lock_dir: Path, dev: str) -> int:
    """Another holder of GPU ``dev`` (its own open file with an exclusive flock, as another process would have)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / f"gpu-{dev}.lock", os.O_CREAT | os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def lockable(lock_dir: Path, dev: str) -> bool:
    """Whether another holder could take GPU ``dev`` now."""
    fd = os.open(lock_dir / f"gpu-{dev}.lock", os.O_CREAT | os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


class Clock:
    """A stand-in for ``time.monotonic``: each reading is one second later; ``at[t]`` runs when time t is read."""

    def __init__(self, at=None):
        self.t = -1
        self.at = at or {}

    def __call__(self) -> float:
        self.t += 1
        if self.t in self.at:
            self.at[self.t]()
        return float(self.t)


class Polls(threading.Condition):
    """A real condition whose ``wait`` returns at once after running ``on_wait`` (one poll of a blocked acquire),
    recording the timeouts it was given and the notifications."""

    def __init__(self, on_wait=lambda: None):
        super().__init__()
        self.on_wait, self.waits, self.notified = on_wait, [], 0

    def wait(self, timeout=None):
        self.waits.append(timeout)
        self.on_wait()
        return False

    def notify_all(self):
        self.notified += 1
        super().notify_all()


@pytest.fixture
def held(tmp_path):
    """Open files holding GPUs for "other processes"; closed at the end."""
    fds: dict[str, int] = {}
    yield fds
    for fd in fds.values():
        if fd_open(fd):
            os.close(fd)


# -- current_devices / assigned ------------------------------------------------------------------------------------


def test_outside_the_pool_no_devices_are_assigned():
    assert current_devices() is None


def test_assigned_sets_the_devices_as_strings_and_restores_the_outer_ones():
    with assigned([0, "GPU-x"]):
        assert current_devices() == ("0", "GPU-x")
        with assigned(["3"]):
            assert current_devices() == ("3",)
        assert current_devices() == ("0", "GPU-x")
    assert current_devices() is None


# -- detect_devices -------------------------------------------------------------------------------------------------


def test_cuda_visible_devices_is_taken_as_given_without_blanks_or_minus_one(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", " 3, ,1,-1 ,GPU-ab")
    assert detect_devices() == ["3", "1", "GPU-ab"]


def test_an_empty_cuda_visible_devices_means_no_gpu_even_with_nvidia_smi(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(gpu_pool.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    assert detect_devices() == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert detect_devices() == []


def test_without_cuda_visible_devices_and_nvidia_smi_there_is_no_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpu_pool.shutil, "which", lambda name: None)
    assert detect_devices() == []


def smi(monkeypatch, result):
    """A stand-in ``nvidia-smi -L``: ``result`` is its stdout, or an exception it raises; returns the calls."""
    calls = []

    def fake_run(args, **kw):
        calls.append((args, kw))
        if isinstance(result, BaseException):
            raise result
        return types.SimpleNamespace(stdout=result, returncode=0)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpu_pool.shutil, "which", lambda name: "/opt/bin/" + name)
    monkeypatch.setattr(gpu_pool.subprocess, "run", fake_run)
    return calls


def test_nvidia_smi_lines_naming_a_gpu_are_counted_from_zero(monkeypatch):
    calls = smi(monkeypatch, "GPU 0: NVIDIA H100 (UUID: GPU-a)\n  MIG 1g.10gb Device 0: (UUID: MIG-b)\n"
                             "  GPU 1: NVIDIA H100 (UUID: GPU-c)\n\nNo GPU found\n")
    assert detect_devices() == ["0", "1"]
    assert calls == [(["/opt/bin/nvidia-smi", "-L"], {"capture_output": True, "text": True, "timeout": 20})]


def test_nvidia_smi_that_fails_or_hangs_means_no_gpu(monkeypatch):
    smi(monkeypatch, OSError("exec format error"))
    assert detect_devices() == []
    smi(monkeypatch, subprocess.TimeoutExpired(["nvidia-smi"], 20))
    assert detect_devices() == []
    smi(monkeypatch, "")
    assert detect_devices() == []


# -- parse_devices ----------------------------------------------------------------------------------------------------


def test_auto_and_null_detect_the_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert parse_devices(None) == ["4", "6"]
    assert parse_devices("auto") == ["4", "6"]


def test_a_list_a_tuple_an_int_or_a_comma_string_names_the_ids():
    assert parse_devices([" 1", 2]) == ["1", "2"]
    assert parse_devices((0,)) == ["0"]
    assert parse_devices(3) == ["3"]
    assert parse_devices(" 0, ,5,") == ["0", "5"]
    assert parse_devices([]) == []


def test_gpu_and_mig_uuids_are_ids_too():
    assert parse_devices(["GPU-1a2b", "MIG-3c"]) == ["GPU-1a2b", "MIG-3c"]
    assert parse_devices("GPU-1a2b,7") == ["GPU-1a2b", "7"]


def test_a_value_of_another_type_is_refused_naming_the_setting():
    for value, shown in ((1.5, "1.5"), (True, "True"), ({"a": 1}, "{'a': 1}")):
        with pytest.raises(DeviceConfigError) as exc:
            parse_devices(value)
        assert str(exc.value) == f"devices={shown}: use auto or a list of GPU ids, e.g. devices=[0,1,2,3]"


def test_a_gpu_listed_twice_is_refused():
    with pytest.raises(DeviceConfigError) as exc:
        parse_devices("1,2,1")
    assert str(exc.value) == "devices='1,2,1': a GPU is listed twice"
    with pytest.raises(DeviceConfigError, match="listed twice"):
        parse_devices([1, "1"])


def test_the_first_id_that_is_neither_an_index_nor_a_uuid_is_named():
    with pytest.raises(DeviceConfigError) as exc:
        parse_devices(["0", "cuda:1", "x"])
    assert str(exc.value) == "devices=['0', 'cuda:1', 'x']: 'cuda:1' is not a GPU index or UUID"
    for bad in ("-1", "1.0", "gpu-1", "auto,1"):
        with pytest.raises(DeviceConfigError, match="is not a GPU index or UUID"):
            parse_devices([bad])


# -- GPUPool: construction --------------------------------------------------------------------------------------------


def test_the_default_lock_folder_is_node_local_under_the_temp_dir():
    assert default_lock_dir() == Path(tempfile.gettempdir()) / "worldmem-harness-gpus"


def test_a_new_pool_takes_its_devices_as_strings_and_defaults(tmp_path):
    p = GPUPool([0, "1"])
    assert (p.devices, p.lock_dir, p.poll_s, p.peak_in_use) == (["0", "1"], default_lock_dir(), 0.2, 0)
    q = GPUPool(["2"], lock_dir=str(tmp_path), poll_s=0.05)
    assert (q.lock_dir, q.poll_s) == (tmp_path, 0.05)


# -- GPUPool: lock files -----------------------------------------------------------------------------------------------


def test_a_missing_lock_folder_is_made_with_its_parents_and_shared_like_tmp(tmp_path):
    lock_dir = tmp_path / "a" / "b"
    pool = GPUPool(["3"], lock_dir=lock_dir)
    assert pool.acquire(1, timeout=0) == ["3"]
    assert stat.S_IMODE(lock_dir.stat().st_mode) == 0o1777
    assert (lock_dir / "gpu-3.lock").is_file() and sorted(os.listdir(lock_dir)) == ["gpu-3.lock"]
    pool.release(["3"])


def test_an_existing_lock_folder_keeps_its_mode(tmp_path):
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir(mode=0o755)
    os.chmod(lock_dir, 0o755)
    pool = GPUPool(["0"], lock_dir=lock_dir)
    assert pool.acquire(1, timeout=0) == ["0"]
    assert stat.S_IMODE(lock_dir.stat().st_mode) == 0o755
    pool.release(["0"])


def test_a_lock_folder_made_by_another_harness_at_the_same_moment_is_used(tmp_path, monkeypatch):
    """Between the pool's "is it there?" and its mkdir, another process made the folder: not an error."""
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    real, asked = Path.is_dir, []

    def is_dir(self):  # the pool's first look at the folder sees it absent; the folder is there from then on
        if self == lock_dir and not asked:
            asked.append(self)
            return False
        return real(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    pool = GPUPool(["0"], lock_dir=lock_dir)
    assert pool.acquire(1, timeout=0) == ["0"]
    assert asked == [lock_dir]
    pool.release(["0"])


def test_the_pool_holds_each_handed_out_gpu_with_a_lock_another_holder_sees(tmp_path):
    pool = GPUPool(["0", "1"], lock_dir=tmp_path)
    assert pool.acquire(1, timeout=0) == ["0"]
    assert not lockable(tmp_path, "0") and lockable(tmp_path, "1")
    pool.release(["0"])
    assert lockable(tmp_path, "0")


def test_a_gpu_held_by_another_holder_is_skipped_and_a_failed_try_leaks_no_file(tmp_path, held):
    held["0"] = hold(tmp_path, "0")
    pool = GPUPool(["0", "1"], lock_dir=tmp_path)
    before = set(os.listdir("/proc/self/fd"))
    assert pool.acquire(1, timeout=0) == ["1"]
    assert len(set(os.listdir("/proc/self/fd")) - before) == 1  # the held GPU 1's file only
    pool.release(["1"])
    assert set(os.listdir("/proc/self/fd")) == before


# -- GPUPool: acquire ----------------------------------------------------------------------------------------------------


def test_acquire_takes_the_first_free_gpus_in_the_order_of_devices(tmp_path):
    pool = GPUPool(["5", "2", "7", "1"], lock_dir=tmp_path)
    assert pool.acquire(2) == ["5", "2"]
    assert pool.acquire(1) == ["7"]
    assert pool.acquire(1) == ["1"]
    assert pool.peak_in_use == 4
    pool.release(["5", "2", "7", "1"])


def test_a_job_may_take_every_gpu_of_the_pool_but_not_more(tmp_path):
    pool = GPUPool(["0", "1"], lock_dir=tmp_path)
    assert pool.acquire(2, timeout=0) == ["0", "1"]
    pool.release(["0", "1"])
    with pytest.raises(DeviceConfigError) as exc:
        pool.acquire(3)
    assert str(exc.value) == ("a job needs 3 GPU(s) but devices= gives 2 (0,1); lower model.gpus_per_job or "
                              "add GPUs")
    with pytest.raises(DeviceConfigError) as exc:
        GPUPool([], lock_dir=tmp_path).acquire(1)
    assert str(exc.value) == "a job needs 1 GPU(s) but devices= gives 0 (none); lower model.gpus_per_job or add GPUs"


def test_a_gpu_this_pool_handed_out_stays_out_even_when_its_lock_file_is_removed(tmp_path):
    pool = GPUPool(["0", "1"], lock_dir=tmp_path)
    assert pool.acquire(1, timeout=0) == ["0"]
    (tmp_path / "gpu-0.lock").unlink()
    assert pool.acquire(1, timeout=0) == ["1"]
    pool.release(["0", "1"])


def test_a_partial_grab_gives_its_gpus_back_before_waiting(tmp_path, held, monkeypatch):
    held["1"] = hold(tmp_path, "1")
    pool = GPUPool(["0", "1"], lock_dir=tmp_path, poll_s=0)
    monkeypatch.setattr(gpu_pool.time, "monotonic", Clock())
    with pytest.raises(TimeoutError):
        pool.acquire(2, timeout=0.5)
    assert lockable(tmp_path, "0") and pool.peak_in_use == 0


def test_the_peak_counts_the_most_gpus_held_at_once(tmp_path):
    pool = GPUPool(["0", "1", "2"], lock_dir=tmp_path)
    a = pool.acquire(2)
    pool.release(a)
    b = pool.acquire(1)
    assert pool.peak_in_use == 2
    pool.release(b)


def test_a_blocked_acquire_waits_one_poll_at_a_time_and_takes_a_gpu_freed_meanwhile(tmp_path, held):
    held["0"] = hold(tmp_path, "0")
    pool = GPUPool(["0"], lock_dir=tmp_path, poll_s=0.125)
    waits = []

    def freed_on_the_second_poll():
        waits.append(1)
        if len(waits) == 2:
            os.close(held.pop("0"))

    pool._cond = Polls(freed_on_the_second_poll)
    assert pool.acquire(1) == ["0"]  # no timeout: waits as long as it takes
    assert pool._cond.waits == [0.125, 0.125]
    pool.release(["0"])


def test_the_timeout_is_counted_from_the_call_and_a_gpu_freed_exactly_at_the_deadline_is_taken(tmp_path, held,
                                                                                             monkeypatch):
    held["0"] = hold(tmp_path, "0")
    clock = Clock(at={3: lambda: os.close(held.pop("0"))})  # t=0: the call; t=3: the deadline
    monkeypatch.setattr(gpu_pool.time, "monotonic", clock)
    pool = GPUPool(["0"], lock_dir=tmp_path)
    pool._cond = Polls()
    assert pool.acquire(1, timeout=3) == ["0"]
    assert len(pool._cond.waits) == 3
    pool.release(["0"])


def test_a_timeout_names_the_job_size_the_devices_and_the_time(tmp_path, held, monkeypatch):
    held["0"] = hold(tmp_path, "0")
    monkeypatch.setattr(gpu_pool.time, "monotonic", Clock())
    pool = GPUPool(["0"], lock_dir=tmp_path)
    pool._cond = Polls()
    with pytest.raises(TimeoutError) as exc:
        pool.acquire(1, timeout=2)
    assert str(exc.value) == "no 1 free GPU(s) among ['0'] within 2 s"
    assert len(pool._cond.waits) == 2  # polled at t=1 and t=2, gave up at t=3


# -- GPUPool: release, job, capacity -----------------------------------------------------------------------------------


def test_release_frees_the_lock_even_where_a_copy_of_its_file_is_open(tmp_path):
    """A process forked while a job held a GPU keeps a copy of its file: the release unlocks, not only closes."""
    pool = GPUPool(["0"], lock_dir=tmp_path)
    pool.acquire(1)
    fd = pool._fds["0"]
    copy = os.dup(fd)
    try:
        pool.release(["0"])
        assert lockable(tmp_path, "0")
        assert not fd_open(fd) and pool._fds == {}
    finally:
        os.close(copy)


def test_releasing_a_gpu_the_pool_does_not_hold_changes_nothing(tmp_path):
    pool = GPUPool(["0", "1"], lock_dir=tmp_path)
    pool.acquire(1)
    pool.release(["1", "9"])
    assert list(pool._fds) == ["0"] and not lockable(tmp_path, "0")
    pool.release(["0"])


def test_release_wakes_the_blocked_acquires(tmp_path):
    pool = GPUPool(["0"], lock_dir=tmp_path)
    pool._cond = Polls()
    pool.release(pool.acquire(1))
    assert pool._cond.notified == 1


def test_a_job_assigns_its_gpus_for_the_block_and_frees_them_after_even_on_error(tmp_path):
    pool = GPUPool(["0", "1", "2"], lock_dir=tmp_path)
    with pool.job(2) as devs:
        assert devs == ["0", "1"] and current_devices() == ("0", "1")
        assert not lockable(tmp_path, "0") and not lockable(tmp_path, "1")
    assert current_devices() is None and pool._fds == {}
    assert lockable(tmp_path, "0") and lockable(tmp_path, "1")
    with pytest.raises(RuntimeError), pool.job(1):
        raise RuntimeError("job crashed")
    assert current_devices() is None and pool._fds == {} and lockable(tmp_path, "0")


@pytest.mark.parametrize("n, k, fit", [(8, 1, 8), (8, 3, 2), (8, 8, 1), (8, 9, 0), (8, 0, 8), (0, 2, 0), (7, 2, 3)])
def test_capacity_is_how_many_k_gpu_jobs_fit_at_once(n, k, fit):
    assert GPUPool([str(i) for i in range(n)]).capacity(k) == fit
