"""The release's first frames as a case set: one case file and one image per case the imported videos were made for.

An image is taken only when it is what it claims: at most :data:`MAX_IMAGE_BYTES`, a PNG, JPEG or WebP by its own
header (never by the name ``datasets`` recorded: a ``first_frame.path`` ending in ``.yaml`` cannot name a case
file), at most :data:`harness.cases.MAX_IMAGE_PIXELS` pixels and :data:`MAX_SIDE` per side by that header (a
decompression bomb is refused before anything is decoded), and it decodes to the size its header says. The file is
named ``<case key><suffix of its format>``. A case whose every row's image is refused makes its videos' rows one
problem each; the others go on.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

from .layout import CATEGORY_FAMILY, iter_rows, parquet_files, valid_case_id
from .plan import ImportSummary, ReleaseOptions, VideoPlan

MAX_IMAGE_BYTES = 32 << 20
MAX_SIDE = 8192
#: Image formats a first frame may be (PIL's name -> the suffix the case image gets).
IMAGE_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp"}


def image_suffix(data: bytes) -> str:
    """The suffix of the image ``data`` is (``.png``, ``.jpg``, ``.webp``), read from its own header and checked
    by decoding it; ValueError naming what is wrong otherwise."""
    import cv2
    import numpy as np
    from PIL import Image

    from harness.cases import MAX_IMAGE_PIXELS

    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"{len(data) >> 20} MB (at most {MAX_IMAGE_BYTES >> 20} MB)")
    Image.MAX_IMAGE_PIXELS = None  # our own limit below, as harness.cases applies it (one message, every time)
    try:
        with Image.open(io.BytesIO(data)) as im:  # the header only: nothing is decoded here
            fmt, (w, h) = str(im.format), im.size
    except Exception as exc:  # not an image at all, a truncated header, PIL's own bomb guard
        raise ValueError(f"not an image ({type(exc).__name__})") from None
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"a {fmt} image (give PNG, JPEG or WebP)")
    if w * h > MAX_IMAGE_PIXELS or max(w, h) > MAX_SIDE:
        raise ValueError(f"{w}x{h} pixels by its header (at most {MAX_SIDE} a side and {MAX_IMAGE_PIXELS >> 20} MP)")
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None or img.shape[:2] != (h, w):
        raise ValueError(f"a {fmt} header of {w}x{h} whose data does not decode")
    return IMAGE_FORMATS[fmt]


def _family(plan: VideoPlan) -> str:
    """The family of a case file: its video's category's (a camera video's case is an environment case: the case
    set runs it like one; the item itself is scored as camera following, ``meta.json`` ``scored_as``)."""
    return CATEGORY_FAMILY.get(plan.category, "environment")


def _images(opts: ReleaseOptions, plans: dict[Any, VideoPlan], cases_dir: Path) -> tuple[dict[str, str],
                                                                                        dict[str, str]]:
    """One image per case key from the rows of its videos (a row of the video's own category first): (case key ->
    image file name, case key -> why every image offered was refused)."""
    from harness.io import write_bytes

    wanted: dict[str, tuple[str, bool]] = {}  # where -> (case key, the row is of the video's own category)
    for p in plans.values():
        for r in p.rows:
            wanted[r["where"]] = (p.case_key, r["category"].strip().lower().replace("-", "_") == p.category)
    chosen: dict[str, tuple[str, bool]] = {}
    refused: dict[str, str] = {}
    open_keys = {key for key, _ in wanted.values()}  # keys still without their best image
    has_own = {key for key, own in wanted.values() if own}  # keys with a row of their video's own category
    cap = min(opts.max_rows, opts.limit) if opts.limit else opts.max_rows
    for row in iter_rows(parquet_files(opts.source), images=True, max_rows=cap):
        if not open_keys:
            break  # every case has its image: the rest of the rows is not read again
        want = wanted.get(row.where)
        if want is None or (want[0] in chosen and (chosen[want[0]][1] or not want[1])):
            continue
        key, preferred = want
        if row.image is None:
            refused.setdefault(key, "no first_frame bytes")
            continue
        try:
            suffix = image_suffix(row.image)
        except ValueError as exc:
            refused.setdefault(key, f"first_frame: {exc}")
            continue
        old = chosen.get(key)
        write_bytes(cases_dir / f"{key}{suffix}", row.image)
        if old and old[0] != f"{key}{suffix}":
            (cases_dir / old[0]).unlink(missing_ok=True)
        chosen[key] = (f"{key}{suffix}", preferred)
        if preferred or key not in has_own:
            open_keys.discard(key)
    return {k: v[0] for k, v in chosen.items()}, refused


def write_cases(opts: ReleaseOptions, plans: dict[Any, VideoPlan], cases_dir: Path, summary: ImportSummary,
                overlay: dict[str, Any]) -> dict[str, Any]:
    """One case file per case key with its ``first_frame`` image; returns case key -> :class:`harness.cases.Case`.
    The plans of a case without a usable image, or whose case file does not validate, are refused (removed from
    ``plans``) and their rows counted; files of cases no plan needs any more are removed."""
    import yaml

    from harness.cases import CaseError, load_case_file
    from harness.io import write_text

    images, refused = _images(opts, plans, cases_dir)
    by_key: dict[str, list[Any]] = defaultdict(list)
    for k, p in plans.items():
        by_key[p.case_key].append(k)
    cases: dict[str, Any] = {}
    for case_key, keys in sorted(by_key.items()):
        first = plans[keys[0]]
        presets = sorted({plans[k].preset for k in keys})
        why = None if case_key in images else refused.get(case_key, "no row carries a first_frame")
        if why is None:
            rec: dict[str, Any] = {"id": case_key, "family": _family(first), "image": images[case_key],
                                   "prompt": "", "hfov_deg": opts.hfov_deg, "trajectories": presets}
            if case_key in overlay:
                rec = _merged(rec, overlay[case_key])
            rec["unannotated"] = _lacks_annotations(rec)
            path = cases_dir / f"{case_key}.yaml"
            try:
                write_text(path, yaml.safe_dump(rec, sort_keys=False))
                cases[case_key] = load_case_file(path)[0]
            except CaseError as exc:  # its file goes with the stale ones below
                why = f"case file does not validate: {exc}"
        if why is not None:
            for k in keys:
                plans.pop(k).refuse(summary, "bad case", f"{case_key}: {why}")
    _remove_stale(cases_dir, {f"{k}.yaml" for k in cases} | {images[k] for k in cases})
    return cases


def _remove_stale(cases_dir: Path, keep: set[str]) -> None:
    """Remove the case files and images an earlier import wrote for cases no longer imported."""
    if not cases_dir.is_dir():
        return
    for p in cases_dir.iterdir():
        stem, suffix = p.stem, p.suffix
        if p.name not in keep and p.is_file() and suffix in (".yaml", *IMAGE_FORMATS.values()) \
                and valid_case_id(stem):
            p.unlink()


def _lacks_annotations(rec: dict[str, Any]) -> bool:
    """Whether a case misses what its family's metrics need (the release ships none of it): a dynamic case without
    an event, a human case without persons, an object case without objects."""
    targets = rec.get("targets") or {}
    need = {"dynamic": rec.get("event"), "human": targets.get("persons"), "object": targets.get("objects")}
    return rec["family"] in need and not need[rec["family"]]


def _merged(rec: dict[str, Any], over: Any) -> dict[str, Any]:
    """The release's case with an overlay case's annotations (targets, event, prompt, intrinsics, depth): the image
    stays the release's first frame; relative resource paths of the overlay become absolute."""
    o = over.model_dump(exclude_none=True, exclude={"source", "id", "family", "image", "trajectories"})
    base = Path(over.source).parent if over.source else Path(".")

    def absolute(ref: Any) -> Any:
        if isinstance(ref, str) and not ref.startswith("skimage://") and not Path(ref).is_absolute():
            return str((base / ref).resolve())
        return ref

    if "depth" in o:
        o["depth"] = absolute(o["depth"])
    for obj in (o.get("targets") or {}).get("objects") or []:
        if "mask" in obj:
            obj["mask"] = absolute(obj["mask"])
    return {**rec, **o}
