"""Compile caches: work that does not depend on the case, done once per process and reused across cases.

A study compiles every model x trajectory for hundreds of cases; the camera path and the native controls depend on
the model config, the trajectory, the canvas intrinsics and the context policy, not on the case's image or prompt.
Three caches, all keyed on everything their result depends on (so a changed input is a miss, never a stale hit):

- :func:`memo`: content-keyed memoisation of pure functions of arrays (the control encoders and decoders, the
  FoV selection). The key is built from the arguments' values (arrays by dtype, shape and a hash of their bytes;
  dataclasses field by field), results are deep-copied out, so a caller may mutate what it gets.
- :func:`cached_path`: the camera path of ``(trajectory spec, frames, hold, fps, canvas, K)``; its arrays are
  read-only (it is shared by every case with the same intrinsics).
- :func:`write_canvas_file`: the case's canvas encoded as PNG / JPEG. The first item encodes it; later items with
  the same image and canvas copy that file (after checking it is unchanged), so the bytes are the encoder's.

``set_enabled(False)`` turns all three off (tests compare cached and uncached compiles); :func:`clear` empties
them. Caches are per process and bounded.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import numpy as np

if TYPE_CHECKING:
    from trajectories.path import CameraPath

_ENABLED = True
_CACHES: list[OrderedDict[Hashable, Any]] = []
_LOCK = threading.RLock()  # items compile in threads when upstream jobs run concurrently (runner's GPU pool)


def set_enabled(on: bool) -> bool:
    """Turn the compile caches on or off; returns the previous setting."""
    global _ENABLED
    old, _ENABLED = _ENABLED, bool(on)
    return old


def enabled() -> bool:
    return _ENABLED


def clear() -> None:
    with _LOCK:
        for c in _CACHES:
            c.clear()


class Unhashable(TypeError):
    """An argument whose value cannot be keyed: the call goes through uncached."""


def key_of(obj: Any) -> Hashable:
    """A hashable key that is equal exactly when the values are (arrays by dtype, shape and bytes)."""
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return (type(obj).__name__, obj)
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return ("nd", a.dtype.str, a.shape, hashlib.blake2b(a.view(np.uint8).reshape(-1).data, digest_size=20).digest())
    if isinstance(obj, np.generic):
        return ("np", obj.dtype.str, obj.item())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(key_of(x) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((key_of(k), key_of(v)) for k, v in obj.items()))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__module__, type(obj).__qualname__,
                tuple((f.name, key_of(getattr(obj, f.name))) for f in dataclasses.fields(obj)))
    raise Unhashable(type(obj).__name__)


def _new_cache() -> OrderedDict[Hashable, Any]:
    c: OrderedDict[Hashable, Any] = OrderedDict()
    _CACHES.append(c)
    return c


def _lookup(cache: OrderedDict[Hashable, Any], key: Hashable, compute: Callable[[], Any], maxsize: int) -> Any:
    with _LOCK:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = compute()  # outside the lock: two threads may compute one value; both results are equal
    with _LOCK:
        cache[key] = value
        while len(cache) > maxsize:
            cache.popitem(last=False)
    return value


_P = ParamSpec("_P")
_R = TypeVar("_R")


@overload
def memo(fn: Callable[_P, _R], *, maxsize: int = 128) -> Callable[_P, _R]: ...


@overload
def memo(fn: None = None, *, maxsize: int = 128) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...


def memo(
    fn: Callable[_P, _R] | None = None, *, maxsize: int = 128
) -> Callable[_P, _R] | Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Memoise a pure function by the values of its arguments; each call gets its own deep copy of the result.
    ``@memo`` or ``@memo(maxsize=n)``; the memoised function keeps ``fn``'s signature."""
    if fn is None:
        return functools.partial(memo, maxsize=maxsize)
    return _memoised(fn, maxsize)


def _memoised(fn: Callable[_P, _R], maxsize: int) -> Callable[_P, _R]:
    cache = _new_cache()

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not _ENABLED:
            return fn(*args, **kwargs)
        try:
            key = (key_of(args), key_of(sorted(kwargs.items())))
        except Unhashable:
            return fn(*args, **kwargs)
        result: _R = copy.deepcopy(_lookup(cache, key, lambda: fn(*args, **kwargs), maxsize))
        return result

    return wrapper


# -- camera paths ---------------------------------------------------------------------------------------------------
_PATHS = _new_cache()


def cached_path(key_parts: tuple[Any, ...], build: Callable[[], CameraPath], maxsize: int = 256) -> CameraPath:
    """The camera path for ``key_parts`` (everything it depends on), built once; arrays made read-only."""
    if not _ENABLED:
        return build()
    try:
        key = key_of(key_parts)
    except Unhashable:
        return build()

    def make() -> CameraPath:
        path = build()
        for a in (path.c2w, path.K):
            a.setflags(write=False)
        return path

    path: CameraPath = _lookup(_PATHS, key, make, maxsize)
    return path


# -- encoded canvas files ----------------------------------------------------------------------------------------
_FILES = _new_cache()


#: what an image's pixels depend on, its kind first: ``("skimage", ref)``, ``("file", device, inode, mtime_ns,
#: size)`` or ``("unreadable", ref)``
ImageIdentity = tuple[str | int, ...]


def image_identity(ref: str) -> ImageIdentity:
    """What an image reference's pixels depend on: ``skimage://`` name, or the file (device, inode), mtime and size."""
    if ref.startswith("skimage://"):
        return ("skimage", ref)
    try:
        st = os.stat(ref)  # follows links: the file's own identity and state
    except OSError:
        return ("unreadable", ref)  # loading it raises the case's own error
    return ("file", st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def write_canvas_file(dst: str | Path, identity: Hashable, canvas: Callable[[], np.ndarray],
                      params: tuple[int, ...] = (), maxsize: int = 4096) -> None:
    """Write the canvas (RGB, from ``canvas()``) to ``dst`` as ``cv2.imwrite`` would (format from the suffix).

    ``identity``: everything the canvas depends on (source image identity and canvas size; None: no reuse). The
    first call encodes;
    later calls with the same identity, format and ``params`` copy the file the first one wrote, if it still has
    the size and mtime it had then (else they encode again).
    """
    import cv2

    from harness.io import atomic_path, copy_file

    dst = Path(dst)
    key = (identity, dst.suffix.lower(), tuple(params)) if _ENABLED and identity is not None else None
    if key is not None:
        with _LOCK:
            src = _FILES.get(key)
        if src is not None:
            path, size, mtime = src
            try:
                st = os.stat(path)
                if (st.st_size, st.st_mtime_ns) == (size, mtime) and os.path.abspath(path) != os.path.abspath(dst):
                    copy_file(path, dst)
                    return
            except OSError:
                pass
    with atomic_path(dst) as tmp:  # the suffix is kept: imwrite picks the format from it
        if not cv2.imwrite(str(tmp), canvas()[..., ::-1], list(params)):
            raise OSError(f"cannot write {dst}")
    if key is not None:
        st = os.stat(dst)
        with _LOCK:
            _FILES[key] = (str(dst), st.st_size, st.st_mtime_ns)
            while len(_FILES) > maxsize:
                _FILES.popitem(last=False)
