"""One item as the evaluation stage sees it (:class:`EvalItem`): its video (decoded once), phases, revisit windows,
case and, for the built-in reference model only, its ground-truth geometry.

Frames are (T, H, W, 3) uint8 RGB, every frame of the video in order (decoded once, with PyAV). Poses are OpenCV
camera-to-world 4x4 float64 with world = camera frame of frame 0 (:mod:`trajectories.conventions`).

An evaluation reads each video's bytes once (:func:`read_source`): they are hashed (the sha256 that decides every
reuse) and, when something must be recomputed, decoded from the same bytes, so the frames scored are always those
of the hash recorded.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, overload

import numpy as np
from numpy.typing import DTypeLike

from trajectories.phases import VIEW

from .protocol import arrived_frames, revisit_windows, sample_every, window_frames

if TYPE_CHECKING:
    from harness.cases import Case


#: The family of an item scored for camera following (and video quality) only: an imported release's
#: camera-following video (``meta.json`` ``scored_as``, docs/release.md), never a memory item.
CAMERA_ITEMS = "camera"


@dataclass(frozen=True)
class OracleGeometry:
    """Ground truth recorded by the reference model: the room it renders and the exact camera path it follows.

    Only the reference adapter records a room under ``meta.json`` ``generation.oracle_depth``; imported videos and
    upstream models never do, so :meth:`from_meta` returns None for them.
    """

    room: dict[str, float]
    c2w: np.ndarray  # (T, 4, 4) the prescribed path, which the reference model follows exactly

    @staticmethod
    def from_meta(meta: dict[str, Any], c2w: np.ndarray) -> Optional["OracleGeometry"]:
        if (meta.get("manifest") or {}).get("external"):
            return None
        od = (meta.get("generation") or {}).get("oracle_depth")
        if not isinstance(od, dict) or od.get("kind") != "room" or not isinstance(od.get("room"), dict):
            return None
        return OracleGeometry({k: float(v) for k, v in od["room"].items()}, np.asarray(c2w, np.float64))


class Decoding:
    """How far a video is decoded into its frame array: the thread that prepares an item fills the frames in order
    and advances this; readers wait for the frames they need (so scoring can start while the tail decodes).
    ``waited_s``: total seconds readers spent waiting (summed over threads)."""

    def __init__(self) -> None:
        self._n, self._done = 0, False
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self.waited_s = 0.0

    def advance(self, n: int) -> None:
        with self._cond:
            self._n = n
            self._cond.notify_all()

    def finish(self, error: Optional[BaseException] = None) -> None:
        with self._cond:
            self._error, self._done = error, True
            self._cond.notify_all()

    def wait(self, count: Optional[int] = None) -> None:
        """Return once the first ``count`` frames (None: the whole decode) are there; raise the decode's error
        (``ValueError`` naming the video) when they never will be."""
        with self._cond:
            if not (self._done if count is None else self._n >= count):
                t0 = time.perf_counter()
                while not self._done and (count is None or self._n < count):
                    self._cond.wait()
                self.waited_s += time.perf_counter() - t0
            there = self._error is None if count is None else self._n >= count
        if not there:
            raise self._error if self._error is not None else ValueError(
                f"the video's decode ended before frame {count}")

    @property
    def error(self) -> Optional[BaseException]:
        """The decode's error once it finished (None while it runs or when it succeeded)."""
        return self._error


class FrameView:
    """Frames ``idx`` of a decoded video, not copied: ``len``, iteration, integer indexing, ``shape`` and ``dtype``
    as an (N, H, W, 3) uint8 array would have them; ``np.asarray(view)`` stacks the copy. Handed to backbones that
    declare ``frame_views = True`` (they only read one frame at a time), so a request for 180 frames of a 480 x 832
    video does not first copy 215 MB. While the video is still being decoded, reading a frame waits for it."""

    def __init__(self, frames: np.ndarray, idx: list[int], decoding: Optional[Decoding] = None):
        self._frames, self._idx, self._decoding = frames, [int(i) for i in idx], decoding
        self.shape = (len(self._idx), *frames.shape[1:])
        self.dtype, self.ndim = frames.dtype, frames.ndim

    def _frame(self, i: int) -> np.ndarray:
        if self._decoding is not None:
            self._decoding.wait(i + 1)
        frame: np.ndarray = self._frames[i]
        return frame

    def __len__(self) -> int:
        return len(self._idx)

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, i: slice) -> FrameView: ...

    def __getitem__(self, i: int | slice) -> np.ndarray | FrameView:
        if isinstance(i, slice):
            return FrameView(self._frames, self._idx[i], self._decoding)
        return self._frame(self._idx[i])

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self._frame(i) for i in self._idx)

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        if self._decoding is not None and self._idx:
            self._decoding.wait(max(self._idx) + 1)
        out = self._frames[self._idx]
        return out if dtype is None else out.astype(dtype)


@dataclass
class EvalItem:
    """Everything one item's metrics read. Built by :func:`load_item`; the metric families never open files.

    Attributes:
        dir: the item directory. item: the work item (model, context, seed, trajectory, case_id).
        video_sha: sha256 of ``video.mp4`` as it is now (re-hashed on every evaluation, never read from meta).
        frames: (T, H, W, 3) uint8, all frames (reading it waits for the whole decode; :meth:`frames_view` waits only
            for the frames it returns). buffer: the same array, possibly still being filled (``decoding``).
        intrinsics: (3, 3) pixels.
        c2w: (T, 4, 4) the prescribed (target) path. phases: name -> [start, end) frames.
        windows: the prescribed revisit windows R1..RK; num_revisits = K of Eq. 1.
        ref_idx: sampled frames of V (the reference set). rev_idx: sampled frames of each R_k.
        rev_idx_arrived: the frames of each R_k whose prescribed pose is back at the start (entity observations).
        translates: the target path moves the camera centre (square loop); False for rotation-only paths.
        oracle: ground truth (reference model only), used to judge estimators, never to score a video.
        fps: frames per second of the path.
    """

    dir: Path
    meta: dict[str, Any]
    item: dict[str, Any]
    case: Case
    video: Path
    video_sha: str
    buffer: np.ndarray
    intrinsics: np.ndarray
    c2w: np.ndarray
    phases: dict[str, tuple[int, int]]
    windows: list[tuple[int, int]]
    ref_idx: list[int]
    rev_idx: list[list[int]]
    rev_idx_arrived: list[list[int]]
    sample_idx: list[int]
    translates: bool
    trajectory_kind: str
    fps: float  # frames per second of the path (camera.npz); the judge labels frames with their time
    oracle: Optional[OracleGeometry] = None
    memo: dict[str, Any] = field(default_factory=dict)
    decoding: Optional[Decoding] = None  # set while the frames are decoded in the background

    @property
    def frames(self) -> np.ndarray:
        if self.decoding is not None:
            self.decoding.wait()
        return self.buffer

    def decode_error(self) -> Optional[BaseException]:
        """Wait for the decode to end; its error (the video is corrupt or shorter than its path) or None."""
        if self.decoding is None:
            return None
        try:
            self.decoding.wait()
        except Exception as exc:
            return exc
        return None

    @property
    def num_frames(self) -> int:
        return int(self.buffer.shape[0])

    @property
    def num_revisits(self) -> int:
        return len(self.windows)

    @property
    def height(self) -> int:
        return int(self.buffer.shape[1])

    @property
    def width(self) -> int:
        return int(self.buffer.shape[2])

    @property
    def family(self) -> str:
        """The case's family, or :data:`CAMERA_ITEMS` for an item scored for camera following only (``meta.json``
        ``scored_as``: an imported release's camera-following video; docs/release.md)."""
        return CAMERA_ITEMS if self.meta.get("scored_as") == CAMERA_ITEMS else str(self.case.family)

    @property
    def pose_mode(self) -> str:
        """``general`` for paths that translate, ``rotation`` otherwise (tells pose estimators what to fit)."""
        return "general" if self.translates else "rotation"

    def frames_at(self, idx: list[int]) -> np.ndarray:
        """(N, H, W, 3) uint8 copy of frames ``idx``."""
        return self.frames[list(idx)]

    def frames_view(self, idx: list[int]) -> FrameView:
        """Frames ``idx`` without a copy (:class:`FrameView`)."""
        return FrameView(self.buffer, list(idx), self.decoding)


@dataclass(frozen=True)
class ItemSource:
    """An item's inputs as read once at the start of its evaluation.

    Attributes:
        dir: the item directory. meta: ``meta.json``. video: path of ``video.mp4``.
        data: the video file's bytes (what is decoded). sha256: their sha256 (hex), what reuse is decided on.
    """

    dir: Path
    meta: dict[str, Any]
    video: Path
    data: bytes
    sha256: str


def read_source(item_dir: Path) -> ItemSource:
    """Read ``meta.json`` and the bytes of ``video.mp4`` once and hash them (a replaced or truncated video gets a
    new sha256 on every evaluation). Raises ``OSError`` / ``ValueError`` for a missing or unreadable file."""
    import hashlib

    from harness.io import read_json

    item_dir = Path(item_dir)
    meta = read_json(item_dir / "meta.json")
    video = item_dir / "video.mp4"
    data = video.read_bytes()
    return ItemSource(item_dir, meta, video, data, hashlib.sha256(data).hexdigest())


def frame_array(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialised (``shape``) uint8 array in small (4 KiB) pages: anonymous memory marked ``MADV_NOHUGEPAGE``.

    Why not ``np.empty``: numpy asks the kernel for transparent huge pages on large arrays (``MADV_HUGEPAGE``), and
    where the kernel's THP ``defrag`` setting is ``madvise`` (a common default) each 2 MiB page first compacts memory
    in the faulting thread. Measured on the 2-core machine of docs/evaluation.md ("Performance"): filling a fresh
    493 x 480 x 832 x 3 array took 1.7-2.0 CPU s with huge pages and 0.27 s without, about 1.3 s of one item's 8-10
    s evaluation. The frames are written once and read frame by frame, so huge pages buy them nothing. The bytes
    are the same either way (the array is written before it is read); where ``mmap`` cannot give anonymous memory,
    ``np.empty``."""
    import mmap

    size = int(np.prod(shape, dtype=np.int64))
    if size == 0 or not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.empty(shape, np.uint8)
    mem = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        try:
            mem.madvise(mmap.MADV_NOHUGEPAGE)
        except OSError:  # a kernel without transparent huge pages refuses the advice (EINVAL): nothing to avoid
            pass
    # one array over the mapping (its base is the mmap): a view of it holds the array itself, which FrameBuffers'
    # reference count relies on (a reshape of a flat array would hold the flat one instead)
    return np.ndarray(shape, np.uint8, buffer=mem)


class FrameBuffers:
    """The frame arrays of one evaluation, reused from one item's decode to a later one's.

    A 493-frame 480 x 832 video is a 590 MB array; allocated afresh per item, its pages are faulted in (zeroed by the
    kernel, or compacted into huge pages, numpy asking for them) on every decode: about a quarter of the evaluation's
    CPU time on the default run. :meth:`empty` hands out an array of the shape asked for that nothing else holds
    any more (no item, view or slice of it: CPython's reference count is the pool's own), else allocates one; at
    most ``keep`` arrays are kept (an evaluation holds two videos at once: the one scored and the next one decoding).
    Every frame is written before it is read (:class:`Decoding`), so a reused array gives the same frames."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = max(1, keep)
        self._arrays: list[np.ndarray] = []
        self._lock = threading.Lock()
        # the count of an array only a list holds, taken the way :meth:`empty` takes it (what the interpreter adds
        # for the loop and the call is the same for both, whatever the Python version)
        self._free = self._refcounts([np.empty(0, np.uint8)])[0]

    @staticmethod
    def _refcounts(arrays: list[np.ndarray]) -> list[int]:
        return [sys.getrefcount(a) for a in arrays]

    def empty(self, shape: tuple[int, ...]) -> np.ndarray:
        """An uninitialised (``shape``) uint8 array no one else holds (one of the pool's, or a new one kept)."""
        with self._lock:
            for a, refs in zip(self._arrays, self._refcounts(self._arrays)):
                if refs == self._free and a.shape == shape:
                    return a
            out = frame_array(shape)
            self._arrays.append(out)
            del self._arrays[: -self.keep]  # the oldest go first (one still in use is only forgotten here)
            return out


def decode_frames(data: bytes, num_frames: int, name: Any = "video.mp4", started: Any = None,
                  buffers: Optional[FrameBuffers] = None) -> np.ndarray:
    """The first ``num_frames`` frames of an encoded video (its file's bytes) as (T, H, W, 3) uint8 RGB.

    Decoded straight into one preallocated array (peak memory: the frames once; ``buffers``: one reused from an
    earlier decode, :class:`FrameBuffers`), with the decoder's own threads (FFmpeg's frame threading: bit-exact,
    H.264 decoding is deterministic). Raises ``ValueError`` naming ``name`` for a video that cannot be decoded or
    has fewer frames.

    ``started(frames, decoding)``: called once the array exists (after the first frame), with a :class:`Decoding`
    that then follows the rest; the decode goes on in this thread, and an error after that point is recorded in
    ``decoding`` (and raised here too).
    """
    import io

    import av

    frames, n, decoding = None, 0, None
    try:
        try:
            with av.open(io.BytesIO(data), mode="r") as c:
                stream = c.streams.video[0]
                stream.thread_type = "AUTO"
                for f in c.decode(stream):
                    if n >= num_frames:
                        break
                    a = f.to_ndarray(format="rgb24")  # what harness.video.iter_frames gives, byte for byte
                    if frames is None:
                        shape = (num_frames, *a.shape)
                        frames = buffers.empty(shape) if buffers is not None else frame_array(shape)
                    frames[n] = a
                    n += 1
                    if decoding is not None:
                        decoding.advance(n)
                    elif started is not None:
                        decoding = Decoding()
                        decoding.advance(n)
                        started(frames, decoding)
        except Exception as exc:  # PyAV raises its own error types for corrupt containers
            raise ValueError(f"{name}: cannot decode ({type(exc).__name__}: {exc})") from exc
        if frames is None or n < num_frames:
            raise ValueError(f"{name}: decoded {n} frames, camera.npz has {num_frames} (truncated or corrupt video)")
    except ValueError as exc:
        if decoding is not None:
            decoding.finish(exc)
        raise
    if decoding is not None:
        decoding.finish()
    return frames


def load_item(item_dir: Path, ecfg: Any, source: Optional[ItemSource] = None, publish: Any = None,
              buffers: Optional[FrameBuffers] = None) -> EvalItem:
    """The item of ``item_dir``: ``meta.json`` + ``camera.npz``, and every frame of ``video.mp4`` decoded once.

    ``source``: what :func:`read_source` read (the video's bytes and their sha256); read here when not given.
    Raises ``ValueError`` naming the file for a video that cannot be decoded or is shorter than its path.

    ``publish(item)``: hand the item out as soon as its first frame is decoded (its ``decoding`` follows the rest,
    which this call goes on decoding); a decode error after that point is then in ``item.decode_error()``, not
    raised. Without it, the item is returned fully decoded. ``buffers``: where the frame array comes from
    (:class:`FrameBuffers`; default: a new array).
    """
    from harness.cases import Case
    from trajectories import load_path

    item_dir = Path(item_dir)
    src = source or read_source(item_dir)
    meta = src.meta
    path = load_path(item_dir / "camera.npz")
    T = path.num_frames
    windows = revisit_windows(path.phases)
    V = path.phases[VIEW]
    idx = set(sample_every(ecfg.memory_stride, 0, T)) | {0, T - 1}
    for w in windows:
        idx |= set(window_frames(w, ecfg.memory_stride))
    idx |= set(window_frames(V, ecfg.memory_stride))
    rev_idx = [window_frames(w, ecfg.memory_stride) for w in windows]
    c2w = np.asarray(path.c2w, np.float64)
    kind = str(path.params.get("kind", "rotation"))
    case = Case(**meta["case"])

    def item(frames: np.ndarray, decoding: Optional[Decoding] = None) -> EvalItem:
        return EvalItem(
            dir=item_dir, meta=meta, item=meta.get("item") or {}, case=case, video=src.video,
            video_sha=src.sha256, buffer=frames, intrinsics=np.asarray(path.K, np.float64), c2w=c2w,
            phases={k: (int(a), int(b)) for k, (a, b) in path.phases.items()}, windows=windows,
            ref_idx=window_frames(V, ecfg.memory_stride), rev_idx=rev_idx,
            rev_idx_arrived=[arrived_frames(c2w, w, ecfg.revisit_tolerance_deg, ecfg.revisit_tolerance_translation)
                             for w in rev_idx],
            sample_idx=sorted(idx), translates=bool(np.ptp(c2w[:, :3, 3], axis=0).max() > 1e-12), trajectory_kind=kind,
            oracle=OracleGeometry.from_meta(meta, c2w), fps=float(path.fps), decoding=decoding)

    if publish is None:
        return item(decode_frames(src.data, T, src.video, buffers=buffers))
    out: list[EvalItem] = []

    def started(frames: np.ndarray, decoding: Decoding) -> None:
        out.append(item(frames, decoding))
        publish(out[0])

    try:
        decode_frames(src.data, T, src.video, started, buffers)
    except ValueError:
        if not out:  # nothing was handed out: the caller sees the error
            raise
    return out[0]
