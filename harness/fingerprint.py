"""Config fingerprints: one hash of everything that decides an item's video.

Inputs (canonical JSON, sorted keys): the model config minus fields that cannot change a frame (paths to the
checkout/environment, timeouts, descriptions, environment variables), the context policy, the trajectory spec,
the case (minus the file it was read from) with the sha256 of its image, the seed, the item key, the source of
the adapter's code (its package, also when installed from another distribution, and every ``adapters.*``
base class it inherits), and the encoder settings.
A rerun whose fingerprint differs from a finished item's refuses instead of silently skipping it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from . import PROJECT_ROOT
from .io import sha256_file

# Model fields that never change a generated frame (where things live, how long to wait, how to describe them).
NON_SEMANTIC_MODEL_FIELDS = frozenset({
    "description", "weights_hint", "timeout_s", "devices", "python", "upstream_dir", "checkpoint", "env",
    "gpu_layout", "unsupported_reasons", "supported_contexts", "paper_context", "fps_tolerance", "launch",
    "backend_connection",  # a served model's endpoint and timeouts: where it ran, not what it generated
    "seed",  # the item seed is hashed on its own (a `seed=` override and the default give one fingerprint)
})


class HasToDict(Protocol):
    """A configuration that serialises itself (model config, context policy, trajectory spec)."""

    def to_dict(self) -> dict[str, Any]: ...


class Configured(Protocol):
    """An adapter as a fingerprint reads it: its class (whose code is hashed) and its model configuration."""

    @property
    def config(self) -> HasToDict: ...


class PlannedItem(Protocol):
    """A work item as a fingerprint reads it (:class:`harness.outputs.WorkItem`)."""

    @property
    def key(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def case_id(self) -> str: ...

    @property
    def trajectory(self) -> str: ...


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=256)
def _file_sha(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(path)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, cached by (path, mtime, size) so repeated items hash a case image once."""
    st = Path(path).stat()
    return _file_sha(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


def adapter_code_files(cls: type) -> list[Path]:
    """The source files whose bytes make :func:`adapter_code_version`, sorted, resolved.

    The adapter's own package counts whole, whatever it is called (a model from an installed distribution included);
    a base class counts by its module alone, and only an ``adapters.*`` one (``adapters/base.py``,
    ``adapters/upstream.py``, another model's ``adapter.py``): the standard library, typing and third-party bases do
    not. A class whose module is not imported or has no file (made at run time) adds nothing.
    """
    files: set[Path] = set()
    for klass in cls.__mro__:
        mod = inspect.getmodule(klass)
        if mod is None or not (klass is cls or mod.__name__.startswith("adapters")):
            continue
        file = getattr(mod, "__file__", None)
        if not file:
            continue
        f = Path(file).resolve()
        files.add(f)
        if klass is cls and f.parent.name != "adapters":  # the adapter's own package: every module in it
            files.update(p.resolve() for p in f.parent.glob("*.py"))
    return sorted(files)


@functools.lru_cache(maxsize=64)
def adapter_code_version(cls: type) -> str:
    """sha256 over ``relative path NUL bytes NUL`` of each of :func:`adapter_code_files` (the path relative to the
    project root, or the file's name for a file outside it)."""
    h = hashlib.sha256()
    root = PROJECT_ROOT
    for f in adapter_code_files(cls):
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else f.name
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def semantic_model_config(model: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in model.items() if k not in NON_SEMANTIC_MODEL_FIELDS}


def case_identity(case: Any) -> dict[str, Any]:
    """The case as it decides a video: its fields (not the file it came from) and its image's bytes."""
    d: dict[str, Any] = case.model_dump()
    d.pop("source", None)
    ref = case._resolve(case.image)
    if not ref.startswith("skimage://") and Path(ref).is_file():
        d["image_sha256"] = file_sha256(ref)
    return d


def item_fingerprint(adapter: Configured, context: HasToDict, trajectory: HasToDict, case: Any,
                     item: PlannedItem, encoder: dict[str, Any],
                     model: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(hex fingerprint, the inputs it hashes) of one work item. ``model``: the model config dict to hash instead
    of ``adapter.config.to_dict()`` (:func:`fingerprint_with_recorded_frames`)."""
    parts = {
        "item": item.key,
        "seed": int(item.seed),
        "model": semantic_model_config(dict(model) if model is not None else adapter.config.to_dict()),
        "context": context.to_dict(),
        "trajectory": trajectory.to_dict(),
        "case": case_identity(case),
        "adapter_code": adapter_code_version(type(adapter)),
        "encoder": encoder,
    }
    return sha256_text(canonical(parts))[:32], parts


def fingerprint_with_recorded_frames(adapter: Configured, context: HasToDict, trajectory: HasToDict, case: Any,
                                     item: PlannedItem, encoder: dict[str, Any], recorded_model: Any) -> str | None:
    """The item's fingerprint had the model's ``frames_per_trajectory`` been the one its ``meta.json`` recorded
    (``recorded_model``: that file's ``model``), when that gives the item's own trajectory the frame count it has
    today; None otherwise (nothing recorded, or this item's count changed).

    The model part of a fingerprint hashes the whole ``frames_per_trajectory``, so removing or changing one
    trajectory's override (the release presets' overrides, removed when every model came to run them at its own
    count: docs/trajectories.md "Migration") changes every item's fingerprint although it decides none of the
    other items' frames. An item whose recorded fingerprint equals this one was made with exactly today's inputs
    but that override: it is still current (the runner skips it, verify passes it)."""
    if not isinstance(recorded_model, Mapping) or not isinstance(recorded_model.get("frames_per_trajectory"), Mapping):
        return None
    now = adapter.config.to_dict()
    old = dict(recorded_model["frames_per_trajectory"])
    own = item.trajectory
    if old.get(own, recorded_model.get("num_frames")) != (now.get("frames_per_trajectory") or {}).get(
            own, now.get("num_frames")):
        return None
    return item_fingerprint(adapter, context, trajectory, case, item, encoder,
                            model={**now, "frames_per_trajectory": old})[0]


def item_fingerprints(adapter: Configured, context: HasToDict, specs: Mapping[str, HasToDict],
                      cases: Mapping[str, Any], items: Iterable[PlannedItem],
                      encoder: dict[str, Any]) -> dict[str, tuple[str, dict[str, str]]]:
    """``item.key -> (fingerprint, {part: short hash})`` for many items of one plan, equal to
    :func:`item_fingerprint` item by item. The parts shared by the plan (model, context, trajectory, adapter
    code, encoder) are serialised and hashed once; a case's part once per case."""
    def part(v: Any) -> tuple[str, str]:
        text = canonical(v)
        return text, sha256_text(text)[:12]

    shared = {"model": part(semantic_model_config(adapter.config.to_dict())), "context": part(context.to_dict()),
              "adapter_code": part(adapter_code_version(type(adapter))), "encoder": part(encoder)}
    trajectories = {name: part(spec.to_dict()) for name, spec in specs.items()}
    by_case: dict[str, tuple[str, str]] = {}
    out: dict[str, tuple[str, dict[str, str]]] = {}
    for item in items:
        key = item.key
        if item.case_id not in by_case:
            by_case[item.case_id] = part(case_identity(cases[item.case_id]))
        parts = {**shared, "trajectory": trajectories[item.trajectory], "case": by_case[item.case_id],
                 "item": part(key), "seed": part(int(item.seed))}
        # canonical(dict) is "{" + sorted '"key":value' pairs + "}": the parts' texts spliced in sorted key order
        text = "{" + ",".join(f"{json.dumps(k)}:{parts[k][0]}" for k in sorted(parts)) + "}"
        out[key] = (sha256_text(text)[:32], {k: parts[k][1] for k in parts})
    return out
