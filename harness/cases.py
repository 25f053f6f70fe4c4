"""Case schema, loaders and the built-in demo case set.

A case is one conditioning image with a prompt, optional intrinsics, the targets whose memory is scored, the
trajectories it runs on and, for dynamic cases, the event with its eight-question checklist. Case files are YAML
or JSON (one case per file, or a list), or one JSONL file (one case per line). Relative paths in a case resolve
against the case file's folder. ``skimage://<name>`` images come from scikit-image's bundled samples.

Boxes are ``[x0, y0, x1, y1]`` in pixels of the conditioning image (x right, y down, half-open).
"""

from __future__ import annotations

import functools

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from .errors import ConfigError, UserError
from .sections import Fix, Section

if TYPE_CHECKING:
    from trajectories import TrajectorySpec

DEMO_DIR = Path(__file__).resolve().parent / "data" / "demo_cases"
KNOWN_TRAJECTORIES = ("lrlr", "lrlrlr", "lrud", "square")
MAX_IMAGE_PIXELS = 64 * 1024 * 1024  # 64 MP (e.g. 8192 x 8192): a bigger header is refused before decoding
ASPECTS = ("return_progress", "persistence_reset", "final_state", "causal_physical")


class CaseError(ConfigError):
    """A case file is malformed: the message names the file, the field and the fix."""


#: a case's family (paper sec. 3: what is remembered), the one list of them
Family = Literal["human", "object", "environment", "dynamic"]
FAMILIES: tuple[str, ...] = Family.__args__  # type: ignore[attr-defined]  # a Literal's values


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Intrinsics(_Strict):
    """Pinhole intrinsics in pixels of the conditioning image (+0.5 pixel centres)."""

    fx: float = Field(gt=0)
    fy: float = Field(gt=0)
    cx: float
    cy: float

    def matrix(self) -> np.ndarray:
        return np.array([[self.fx, 0, self.cx], [0, self.fy, self.cy], [0, 0, 1]], dtype=np.float64)


def _check_box(v: list[float]) -> list[float]:
    if len(v) != 4:
        raise ValueError("box must be [x0, y0, x1, y1] (4 numbers, pixels)")
    if not all(np.isfinite(x) for x in v):
        raise ValueError(f"box {v} has a non-finite coordinate; give pixels inside the image")
    if not (v[2] > v[0] and v[3] > v[1]):
        raise ValueError(f"box {v} is empty: need x1 > x0 and y1 > y0")
    return v


class Person(_Strict):
    id: str
    box: list[float]
    _v = field_validator("box")(classmethod(lambda cls, v: _check_box(v)))


class ObjectTarget(_Strict):
    """An object target: a box and a mask (a PNG path, or a polygon in pixels)."""

    id: str
    name: str
    box: list[float]
    mask: Optional[str] = None
    polygon: Optional[list[list[float]]] = None
    _v = field_validator("box")(classmethod(lambda cls, v: _check_box(v)))

    @model_validator(mode="after")
    def _one_mask(self) -> "ObjectTarget":
        if self.mask is None and self.polygon is None:
            raise ValueError("an object needs a mask: give 'mask' (PNG path) or 'polygon' ([[x, y], ...])")
        if self.polygon is not None and len(self.polygon) < 3:
            raise ValueError("polygon needs at least 3 points [[x, y], ...]")
        return self


class Targets(_Strict):
    persons: list[Person] = Field(default_factory=list)
    objects: list[ObjectTarget] = Field(default_factory=list)


class Question(_Strict):
    aspect: Literal["return_progress", "persistence_reset", "final_state", "causal_physical"]
    question: str
    answer: Literal["yes", "no"]


class Event(_Strict):
    """A dynamic event: initial state, action, expected next state and eight binary questions (two per aspect)."""

    initial_state: str
    action: str
    expected_next_state: str
    questions: list[Question]

    @model_validator(mode="after")
    def _two_per_aspect(self) -> "Event":
        counts = {a: 0 for a in ASPECTS}
        for q in self.questions:
            counts[q.aspect] += 1
        if len(self.questions) != 8 or any(c != 2 for c in counts.values()):
            raise ValueError(
                f"questions: need exactly 8, two per aspect {list(ASPECTS)}; got {counts}"
            )
        return self


class Case(_Strict):
    """One benchmark case. ``source`` (the file it came from) is filled by the loader, never by the user."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    family: Family
    image: str
    prompt: str
    intrinsics: Optional[Intrinsics] = None
    hfov_deg: Optional[float] = Field(default=None, gt=1, lt=179)
    depth: Optional[str] = None
    depth_kind: Literal["depth", "disparity"] = "depth"
    targets: Targets = Field(default_factory=Targets)
    trajectories: list[str] = Field(default_factory=lambda: list(KNOWN_TRAJECTORIES))
    event: Optional[Event] = None
    # A case imported without the annotations its family needs (the official release ships no person boxes,
    # object masks or dynamic events): the family's rules are waived and the metrics that need them are not
    # computed, with the reason (docs/release.md). Set by `release import`, never needed in a case written by hand.
    unannotated: bool = False
    source: Optional[str] = None

    def runs_on(self, trajectory: str, spec: TrajectorySpec) -> bool:
        """Whether this case runs on ``trajectory`` (whose spec, as the run uses it, is ``spec``): listed by name, or
        a variant of a listed one (``spec.variant_of``) for this case's family (``spec.families``; none: every
        family). A static case that lists ``lrlr`` runs the release's ``lrlr_sym_0p75dpf``, a dynamic one its
        LR-Hold ``lr_hold_sym_0p5dpf`` (docs/trajectories.md, "Release presets")."""
        if trajectory in self.trajectories:
            return True
        return spec.variant_of in self.trajectories and (not spec.families or self.family in spec.families)

    @field_validator("trajectories")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        known = known_trajectories()
        if not v:
            raise ValueError(f"list at least one trajectory of {known}")
        unknown = [t for t in v if t not in known]
        if unknown:
            from .config_groups import did_you_mean

            raise ValueError(f"unknown trajectory {unknown[0]!r}.{did_you_mean(unknown[0], known)} Known: {known}")
        return v

    @model_validator(mode="after")
    def _family_rules(self) -> "Case":
        if self.unannotated:
            return self
        if self.family == "dynamic" and self.event is None:
            raise ValueError("a dynamic case needs 'event' (initial_state, action, expected_next_state, questions)")
        if self.family == "human" and not self.targets.persons:
            raise ValueError("a human case needs at least one person in targets.persons")
        if self.family == "object" and not self.targets.objects:
            raise ValueError("an object case needs at least one object in targets.objects")
        return self

    # -- resources -------------------------------------------------------------------------------------------
    def _resolve(self, ref: str) -> str:
        if ref.startswith("skimage://") or self.source is None:
            return ref
        p = Path(ref)
        return str(p if p.is_absolute() else Path(self.source).parent / p)

    def load_image(self) -> np.ndarray:
        """Conditioning image as (H, W, 3) uint8 RGB; :class:`CaseError` naming the case file and field."""
        try:
            return load_rgb(self._resolve(self.image))
        except CaseError as exc:
            raise CaseError(f"{self.source}: image: {exc}") from None

    def load_depth(self) -> Optional[np.ndarray]:
        """Depth of the conditioning image (H, W) float32 in scene units, or None. Disparity is inverted."""
        if self.depth is None:
            return None
        ref = self._resolve(self.depth)
        if ref.startswith("skimage://"):
            arr = _skimage_array(ref)
        else:
            check_npy(ref, f"{self.source}: depth")
            try:
                arr = np.load(ref, allow_pickle=False).astype(np.float32)
            except (ValueError, OSError, EOFError) as exc:
                raise CaseError(f"{self.source}: depth: {self.depth!r} cannot be read ({exc}); give a float (H, W) "
                                ".npy saved with numpy.save") from None
        if self.depth_kind == "disparity":
            valid = np.isfinite(arr) & (arr > 0)
            out = np.zeros_like(arr, dtype=np.float32)
            out[valid] = 1.0 / arr[valid]
            return out
        return arr.astype(np.float32)

    def object_mask(self, obj: ObjectTarget, height: int, width: int) -> np.ndarray:
        """Boolean (H, W) mask of ``obj`` in conditioning-image pixels."""
        import cv2

        if obj.mask is not None:
            m = cv2.imread(self._resolve(obj.mask), cv2.IMREAD_GRAYSCALE)
            if m is None:
                raise CaseError(f"{self.source}: targets.objects[{obj.id}].mask: cannot read {obj.mask!r}; give a "
                                "PNG of the image's size (white = object)")
            if m.shape != (height, width):  # never stretched: a mask of another image would be scored as this one
                raise CaseError(f"{self.source}: targets.objects[{obj.id}].mask: {obj.mask!r} is {m.shape[1]}x"
                                f"{m.shape[0]}, the image is {width}x{height}; give a mask of the image's size")
            return m > 127
        m = np.zeros((height, width), np.uint8)
        cv2.fillPoly(m, [np.round(np.asarray(obj.polygon)).astype(np.int32)], 1)
        return m.astype(bool)

    def intrinsics_matrix(self, height: int, width: int, default_hfov_deg: float) -> np.ndarray:
        """K in conditioning-image pixels: the case's intrinsics, else its ``hfov_deg``, else the default FoV."""
        from trajectories.conventions import intrinsics_from_fov

        if self.intrinsics is not None:
            return self.intrinsics.matrix()
        return intrinsics_from_fov(self.hfov_deg or default_hfov_deg, width, height)


@functools.lru_cache(maxsize=None)
def known_trajectories() -> list[str]:
    """Trajectory names a case may list: the ``conf/trajectory`` group (built-ins plus any added there)."""
    try:
        from .config_groups import list_group

        return list_group("trajectory") or list(KNOWN_TRAJECTORIES)
    except Exception:  # conf not importable (a stripped install): the built-ins
        return list(KNOWN_TRAJECTORIES)


def check_npy(ref: str, where: str) -> tuple[int, ...]:
    """The shape of a ``.npy`` file from its header (nothing else read); :class:`CaseError` naming ``where`` for a
    file that is not a ``.npy``, holds pickled objects or is not a 2-D numeric array."""
    try:
        with open(ref, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(f)
    except FileNotFoundError:
        raise CaseError(f"{where}: {ref} not found; fix the path (relative to the case file)") from None
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise CaseError(f"{where}: {ref} is not a .npy file ({exc}); save the depth map with numpy.save") from None
    if dtype.hasobject or dtype.kind not in "fiu":
        raise CaseError(f"{where}: {ref} holds {dtype} values (pickled objects are never loaded); save a float "
                        "(H, W) array with numpy.save")
    if len(shape) != 2:
        raise CaseError(f"{where}: {ref} has shape {shape}; a depth map is (H, W), the image's height and width")
    return tuple(shape)


def image_size(ref: str) -> tuple[int, int]:
    """(width, height) of an image file from its header only (nothing decoded)."""
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = None  # we apply our own limit, with a clearer message
    try:
        with Image.open(ref) as im:
            return int(im.size[0]), int(im.size[1])
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise CaseError(f"image {ref!r} cannot be read ({exc}); give a PNG/JPEG file") from None


def check_image_size(ref: str, width: int, height: int) -> None:
    if width * height > MAX_IMAGE_PIXELS:
        raise CaseError(f"image {ref!r} is {width}x{height} ({width * height / 1e6:.0f} MP), over the "
                        f"{MAX_IMAGE_PIXELS / 2**20:.0f} MP limit; downscale it (conditioning images are resized to "
                        "the model canvas anyway)")


def _skimage_array(ref: str) -> np.ndarray:
    """A scikit-image sample as an array, a fresh copy each call (callers may write to it)."""
    return _skimage_sample(ref[len("skimage://"):]).copy()


@functools.lru_cache(maxsize=32)
def _skimage_sample(name: str) -> np.ndarray:
    """Decoded once per process: samples are files of the installed package, and every case set load checks its
    images (a PNG decode each, about 10 ms; a sweep or a test session loads the demo set hundreds of times)."""
    import skimage.data as data

    if name in ("motorcycle_left", "motorcycle_disparity"):
        left, _, disparity = data.stereo_motorcycle()  # type: ignore[no-untyped-call]  # scikit-image is untyped
        return np.asarray(left) if name == "motorcycle_left" else np.asarray(disparity).astype(np.float32)
    fn = getattr(data, name, None)
    if fn is None:
        raise CaseError(f"image {'skimage://' + name!r}: scikit-image has no sample {name!r}")
    return np.asarray(fn())


def load_rgb(ref: str) -> np.ndarray:
    """Read an image as (H, W, 3) uint8 RGB from a path or ``skimage://<name>``."""
    if ref.startswith("skimage://"):
        arr = _skimage_array(ref)
    else:
        import cv2

        if not Path(ref).is_file():
            raise CaseError(f"image {ref!r} is missing or unreadable; check the path (relative to the case file)")
        check_image_size(ref, *image_size(ref))  # from the header, before a huge decode
        bgr = cv2.imread(ref, cv2.IMREAD_COLOR)
        if bgr is None:
            raise CaseError(f"image {ref!r} is missing or unreadable; check the path (relative to the case file)")
        arr = bgr[..., ::-1]
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    return np.ascontiguousarray(arr[..., :3]).astype(np.uint8)


def _where(index: int | str | None) -> str:
    """``[i] `` for list entries, ``line N: `` for JSONL lines (``index`` given as ``"line N"``)."""
    if index is None:
        return ""
    return f"{index}: " if isinstance(index, str) else f"[{index}] "


def _format_error(source: str, err: ValidationError, index: int | str | None) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<case>"
        where = _where(index)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field; remove it or fix its spelling (see docs/cases.md for the schema)"
        elif e["type"] == "missing":
            msg = "required field is missing; add it (see docs/cases.md)"
        lines.append(f"{source}: {where}{loc}: {msg}")
    return "\n".join(lines)


def _parse_records(path: Path) -> list[tuple[int | str | None, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError(f"{path}: not UTF-8 text (byte {exc.start}); save the case file as UTF-8") from None
    except OSError as exc:
        raise CaseError(f"{path}: cannot be read ({exc.strerror}); check the file and its permissions") from None
    if path.suffix == ".jsonl":  # positions are 1-based line numbers, as an editor shows them
        out: list[tuple[int | str | None, Any]] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append((f"line {lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise CaseError(f"{path}: line {lineno}: cannot parse ({exc.msg}, column {exc.colno}); "
                                "fix the JSON on that line") from None
        return out
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # parse errors: name the file and the position
        raise CaseError(f"{path}: cannot parse ({exc}); fix the syntax") from exc
    if isinstance(data, list):
        return list(enumerate(data))
    return [(None, data)]


#: validated cases per file, by (path, mtime, size): a sweep plans every job in one process and reads the same set
_PARSED: dict[tuple[str, int, int], list[Case]] = {}


def load_case_file(path: str | Path) -> list[Case]:
    """Validate every case in one YAML / JSON / JSONL file. Raises :class:`CaseError` naming file and field.

    A file already validated by this process, unchanged since (same mtime and size), is not parsed again."""
    path = Path(path).resolve()
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and key in _PARSED:
        return list(_PARSED[key])
    cases = _load_case_file(path)
    if key is not None:
        _PARSED[key] = list(cases)
    return cases


def _load_case_file(path: Path) -> list[Case]:
    cases = []
    for index, rec in _parse_records(path):
        if not isinstance(rec, dict):
            raise CaseError(f"{path}: {_where(index)}a case must be a mapping")
        try:
            cases.append(Case(**{**rec, "source": str(path)}))
        except ValidationError as err:
            raise CaseError(_format_error(str(path), err, index)) from None
    return cases


def load_case_set(source: str | Path) -> list[Case]:
    """Load a case set: ``builtin:demo``, a folder of ``*.yaml``/``*.yml``/``*.json`` files, or one file.

    Checks that ids are unique and that every image exists. Returns cases sorted by id (a stable plan order).
    """
    if str(source).startswith("builtin:"):
        name = str(source).split(":", 1)[1]
        if name != "demo":
            raise CaseError(f"cases.source={source!r}: the only built-in case set is 'builtin:demo'")
        source = DEMO_DIR
    src = Path(source).expanduser()
    if not src.exists():
        raise CaseError(f"cases.source={str(source)!r} does not exist; give a folder of case files or one file")
    files = (
        sorted(p for p in src.iterdir() if p.suffix in (".yaml", ".yml", ".json", ".jsonl"))
        if src.is_dir()
        else [src]
    )
    if not files:
        raise CaseError(f"cases.source={str(source)!r} holds no .yaml/.yml/.json/.jsonl case files")
    cases: list[Case] = []
    for f in files:
        cases.extend(load_case_file(f))
    seen: dict[str, str] = {}
    for c in cases:
        if c.id in seen:
            raise CaseError(f"{c.source}: id: {c.id!r} is also used in {seen[c.id]}; case ids must be unique")
        seen[c.id] = str(c.source)
        check_resources(c)
    return sorted(cases, key=lambda c: c.id)


def check_resources(c: Case) -> None:
    """Files a case names exist (image, depth, masks); the image is within the size limit (read from its header);
    every box and polygon lies inside the image. Raises :class:`CaseError` naming the file and the field."""
    ref = c._resolve(c.image)
    if ref.startswith("skimage://"):
        h, w = c.load_image().shape[:2]
    else:
        if not Path(ref).is_file():
            raise CaseError(f"{c.source}: image: {c.image!r} not found (resolved to {ref}); fix the path")
        try:
            w, h = image_size(ref)
            check_image_size(ref, w, h)
        except CaseError as exc:
            raise CaseError(f"{c.source}: image: {exc}") from None
    if c.depth is not None and not c._resolve(c.depth).startswith("skimage://"):
        dref = c._resolve(c.depth)
        if not Path(dref).is_file():
            raise CaseError(f"{c.source}: depth: {c.depth!r} not found (resolved to {dref}); fix the path")
        shape = check_npy(dref, f"{c.source}: depth")
        if shape != (h, w):
            raise CaseError(f"{c.source}: depth: {c.depth!r} is {shape[1]}x{shape[0]}, the image is {w}x{h}; give "
                            "the depth map of this image at its size (H, W)")
    boxes = [(f"targets.persons[{p.id}].box", p.box) for p in c.targets.persons]
    boxes += [(f"targets.objects[{o.id}].box", o.box) for o in c.targets.objects]
    for where, (x0, y0, x1, y1) in boxes:
        if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
            raise CaseError(f"{c.source}: {where}: {[x0, y0, x1, y1]} is not inside the {w}x{h} image; boxes are "
                            "[x0, y0, x1, y1] pixels with 0 <= x0 < x1 <= width, 0 <= y0 < y1 <= height")
    for o in c.targets.objects:
        if o.mask is not None and not Path(c._resolve(o.mask)).is_file():
            raise CaseError(f"{c.source}: targets.objects[{o.id}].mask: {o.mask!r} not found "
                            f"(resolved to {c._resolve(o.mask)}); fix the path or give a polygon")
        if o.mask is not None:
            try:
                mw, mh = image_size(c._resolve(o.mask))
            except CaseError as exc:
                raise CaseError(f"{c.source}: targets.objects[{o.id}].mask: {exc}") from None
            if (mw, mh) != (w, h):  # a mask of another size would be stretched onto the image and scored
                raise CaseError(f"{c.source}: targets.objects[{o.id}].mask: {o.mask!r} is {mw}x{mh}, the image is "
                                f"{w}x{h}; give a mask of the image's size (white = object)")
        if o.polygon is not None:
            # two numbers a point (a ragged list is no array), finite, inside the image
            pts = np.asarray(o.polygon, dtype=float) if all(len(p) == 2 for p in o.polygon) else None
            if pts is None or not np.isfinite(pts).all() or (pts < 0).any() \
                    or (pts[:, 0] > w).any() or (pts[:, 1] > h).any():
                raise CaseError(f"{c.source}: targets.objects[{o.id}].polygon: points must be finite [x, y] pixels "
                                f"inside the {w}x{h} image")


def _families_fix(value: Any) -> str:
    """``cases.families``'s message: the unknown family named, or the list it should be."""
    bad = [f for f in value if f not in FAMILIES] if isinstance(value, list) else []
    if bad:
        return f"{{path}}: unknown family {bad[0]!r}; use {', '.join(FAMILIES)}"
    return f"{{path}}={value!r}: give a list of families (or null): {', '.join(FAMILIES)}"


class CaseSelection(Section, BaseModel):
    """The ``cases`` config group (``conf/cases/*.yaml``): which case set, and which of its cases.

    name: the group option (``demo``, ``folder``). source: ``builtin:demo``, a folder of case files or one file.
    include: case ids to keep (None: all). families: families to keep (None: all). description: free text.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "cases"
    error: ClassVar[type[UserError]] = CaseError
    fix: ClassVar[str] = "choose a case set: cases=demo or cases=folder"

    name: Optional[str] = None
    source: Any = "builtin:demo"  # a path or builtin name; load_case_set names a bad one (cases.source=...)
    include: Annotated[Optional[list[str]], Fix("give a list, e.g. cases.include=[environment_rocket] (or null)")] = None
    families: Annotated[Optional[list[Family]], Fix(_families_fix, whole=True)] = None
    description: Optional[str] = None


def load_cases_from_config(cases_cfg: CaseSelection | dict[str, Any]) -> list[Case]:
    """The case set named by the ``cases`` config group, filtered by ``include`` / ``families`` (a plain mapping
    is read as the section first)."""
    sel = CaseSelection.from_dict(cases_cfg)
    cases = load_case_set(sel.source)
    include = sel.include
    if include:
        known = {c.id for c in cases}
        missing = [i for i in include if i not in known]
        if missing:
            raise CaseError(f"cases.include: unknown case id(s) {missing}; known: {sorted(known)}")
        cases = [c for c in cases if c.id in include]
    fams = sel.families
    if fams:
        cases = [c for c in cases if c.family in fams]
    return cases
