"""The backbone registry: every perception backbone by name, imported lazily, with its kind.

Like the model registry (``harness/config_groups.py``), a backbone is a ``"module:Class"`` reference, so listing, config
checks and ``python -m harness weights list`` never import torch or a backbone library. Adding a backbone is one
line here plus its module under ``evaluate/perception/``; the evaluation stage never names a backbone.

Kinds (:data:`KINDS`) decide where a backbone's numbers may appear:

* ``paper``: a backbone of the WorldMemBench paper (DINOv2, ArcFace, SAM2, DA3, ViPE, MUSIQ-SPAQ, LAION);
* ``estimator``: a non-paper estimator computed from the frames (the classical OpenCV pose estimator);
* ``diagnostic``: a non-paper stand-in computed from the frames, labelled as such in every table: weight-free, or
  built on real pretrained weights that ship inside an installed package (``packaged``: dlib's face descriptor,
  BRISQUE; :mod:`evaluate.perception.packaged`), never the paper's numbers;
* ``oracle``: ground truth that does not look at the video (the reference model's own geometry). Oracles only judge
  estimators (the validity section); they never score a video, so no oracle value reaches a metric table,
  a paired comparison, a plot or the console summary.

Learned backbones follow one contract (class attributes ``name``, ``kind``, ``hf_repo``, ``revision``, ``files``,
``library``, ``recipe`` and ``load(weights_dir, device)``); their weights live at ``<weights_root>/<name>/`` in the
library's own save format (:mod:`evaluate.weights`, which knows nothing of this registry), or where the release's
weights pack holds them (:mod:`evaluate.weights_pack`; ours wins when both do).
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from harness.errors import ConfigError

from .perception._loading import resolve_device
from .perception.base import BackboneUnavailable
from .weights import BackboneStatus, FolderState, WeightsContract, fetch_command, folder_status
from .weights import weights_root as default_weights_root
from .weights_pack import HOW_TO_GET, PackLinkError, WeightsPack

if TYPE_CHECKING:
    from .config import EvalConfig

KINDS = ("paper", "estimator", "diagnostic", "oracle")


@dataclass(frozen=True)
class BackboneSpec:
    """One registered backbone.

    Attributes:
        name: the name used in ``conf/evaluate/*.yaml`` lists and in ``<weights_root>/<name>/``.
        ref: ``"package.module:Class"``, imported only when the backbone is used.
        kind: one of :data:`KINDS`.
        roles: what it provides: encoder | face | tracker | depth | pose | imaging | aesthetic.
        learned: True when it needs a weights folder (``load(weights_dir, device)``), False for classes built from
            the evaluation settings (``from_settings(ecfg)``).
        description: one line for listings and "not computed" reasons.
        packaged: its real weights ship inside installed packages (no weights folder, no download); the class
            declares ``shipped_files()`` and its instances ``provenance()`` (library, versions, file sha256,
            licence), recorded in ``metrics.json``.
    """

    name: str
    ref: str
    kind: str
    roles: tuple[str, ...]
    learned: bool
    description: str
    packaged: bool = False


BACKBONES: dict[str, BackboneSpec] = {s.name: s for s in [
    BackboneSpec("dinov2", "evaluate.perception.dinov2:Dinov2Encoder", "paper", ("encoder",), True,
                 "DINOv2 features (Human/Object Appearance, Environment Visible)"),
    BackboneSpec("arcface", "evaluate.perception.arcface:ArcFaceEmbedder", "paper", ("face",), True,
                 "ArcFace face embeddings (Human Identity)"),
    BackboneSpec("sam2", "evaluate.perception.sam2_tracker:Sam2Tracker", "paper", ("tracker",), True,
                 "SAM2 video segmentation (person / object masks)"),
    BackboneSpec("da3", "evaluate.perception.da3:DepthAnything3", "paper", ("depth", "pose"), True,
                 "Depth Anything 3 depth and poses (Environment Depth/Reconstruction, RPE, return frames)"),
    BackboneSpec("vipe", "evaluate.perception.vipe:VipePoses", "paper", ("pose",), True,
                 "ViPE poses (translation RPE)"),
    BackboneSpec("musiq-spaq", "evaluate.perception.iqa:MusiqSpaq", "paper", ("imaging",), True,
                 "MUSIQ-SPAQ (Imaging quality)"),
    BackboneSpec("laion", "evaluate.perception.iqa:LaionAesthetic", "paper", ("aesthetic",), True,
                 "LAION aesthetic predictor (Aesthetic quality)"),
    BackboneSpec("pixel", "evaluate.perception.weightfree:PixelEncoder", "diagnostic", ("encoder",), False,
                 "16x16 centred thumbnails (a weight-free diagnostic, not DINOv2)"),
    BackboneSpec("template", "evaluate.perception.weightfree:TemplateTracker", "diagnostic", ("tracker",), False,
                 "normalised cross-correlation of the frame-0 crop (a weight-free diagnostic, not SAM2)"),
    BackboneSpec("classical", "evaluate.perception.weightfree:ClassicalPoseEstimator", "estimator", ("pose",), False,
                 "optical flow (KLT) + RANSAC homography / essential matrix between adjacent frames (OpenCV)"),
    BackboneSpec("dlib-resnet", "evaluate.perception.dlib_face:DlibResnetEmbedder", "diagnostic", ("face",), False,
                 "dlib's ResNet face descriptor on real shipped weights (a diagnostic, not ArcFace)", packaged=True),
    BackboneSpec("brisque", "evaluate.perception.brisque:Brisque", "diagnostic", ("imaging",), False,
                 "BRISQUE with OpenCV's LIVE-trained model from Debian opencv-data (a diagnostic, not MUSIQ-SPAQ)",
                 packaged=True),
    BackboneSpec("oracle", "evaluate.perception.oracle:ReferenceOracle", "oracle", ("pose", "depth"), False,
                 "the reference model's own path and room depth (ground truth; never scores a video)"),
]}


class UnknownBackboneError(ConfigError):
    """An unknown backbone name, with a did-you-mean suggestion (a user error: exit code 2)."""


def spec(name: str) -> BackboneSpec:
    """The registered backbone ``name``; :class:`UnknownBackboneError` with a did-you-mean otherwise."""
    if name not in BACKBONES:
        from harness.config_groups import did_you_mean

        raise UnknownBackboneError(f"unknown backbone {name!r}.{did_you_mean(name, sorted(BACKBONES))} "
                                   f"Registered: {', '.join(sorted(BACKBONES))} (evaluate/backbones.py)")
    return BACKBONES[name]


def check_names(setting: str, names: Any, role: str) -> None:
    """Every name of ``evaluate.<setting>`` is registered and provides ``role`` (checked before any work)."""
    for n in names:
        try:
            s = spec(n)
        except UnknownBackboneError as exc:
            raise UnknownBackboneError(f"evaluate.{setting}: {exc}") from None
        if role not in s.roles:
            ok = sorted(b.name for b in BACKBONES.values() if role in b.roles)
            raise UnknownBackboneError(f"evaluate.{setting}: backbone {n!r} does not provide {role!r} "
                                       f"(it provides {', '.join(s.roles)}); use one of {', '.join(ok)}")


def import_class(s: BackboneSpec) -> type[Any]:
    """Import the backbone class; a missing module or library becomes :class:`BackboneUnavailable`."""
    mod_name, attr = s.ref.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise BackboneUnavailable(f"backbone {s.name!r} ({s.description}) cannot be imported from {mod_name!r} "
                                  f"({exc}); install the evaluation extra: pip install -e '.[eval]' "
                                  "(see docs/evaluation.md)") from exc
    cls: Optional[type[Any]] = getattr(mod, attr, None)  # a class of any backbone kind (evaluate/perception)
    if cls is None:
        raise BackboneUnavailable(f"backbone {s.name!r}: module {mod_name!r} has no {attr!r}")
    return cls


def status(s: BackboneSpec, root: Path, hash_files: bool = False, pack: Optional[WeightsPack] = None
           ) -> BackboneStatus:
    """The offline status of backbone ``s``'s weights under ``root`` (its class imported for its file list; a class
    that cannot be imported is reported with the reason, its files unknown).

    With ``pack`` (the release's weights pack, :mod:`evaluate.weights_pack`): our own ``<root>/<name>/`` wins when it
    holds every file; otherwise the pack's folder holding them is used (``source == "pack"``, ``pack_files`` their
    paths inside the pack), and when neither does, ``pack_note`` says what the pack holds. A link out of the pack
    where the backbone would read raises :class:`evaluate.weights_pack.PackLinkError`."""
    try:
        cls = import_class(s)
    except BackboneUnavailable as exc:
        return folder_status(s.name, root, None, hash_files, import_error=f"module {s.ref.split(':')[0]} not "
                             f"installed ({exc})")
    contract = WeightsContract.of(cls)
    own = folder_status(s.name, root, contract, hash_files)
    if pack is None:
        return own
    cache = pack.cache(s.name)
    cache_note = (f"the pack holds its Hugging Face cache {cache.snapshots[0]} (handed to it as "
                  f"{', '.join(f'{k}={v}' for k, v in cache.env.items())})" if cache else "")
    if own.state is FolderState.PRESENT:  # (a class that declares no files is PRESENT: it needs none)
        try:  # ours wins: the pack is only looked at for the note, and a bad link there does not matter
            m = pack.locate(s.name, contract.files, contract.revision)
            won = [f"ours wins over the pack's {m.dir.relative_to(pack.root)}/"] if m else []
        except PackLinkError:
            won = ["ours wins over the pack (whose folder for it has a link out of the pack)"]
        own.pack_note = "; ".join(x for x in won + [cache_note] if x)
        own.pack_env = cache.env if cache else {}
        return own
    m = pack.locate(s.name, contract.files, contract.revision) if contract.files else None
    if m is None:
        part = pack.partial(s.name, contract.files)
        own.pack_note = "; ".join(x for x in [
            cache_note, "the pack does not hold " + ", ".join(contract.files)
            + (f" (partly: {'; '.join(part)})" if part else "")] if x)
        own.pack_env = cache.env if cache else {}
        return own
    st = folder_status(s.name, root, contract, hash_files, folder=m.dir)
    st.source, st.pack_files, st.pack_note = "pack", m.files, f"found via {m.via}"
    st.size = sum((m.dir / f).stat().st_size for f in contract.files if (m.dir / f).is_file())
    st.pack_env = cache.env if cache else {}
    return st


def weights_fingerprint(name: str, root: Path, pack: Optional[WeightsPack] = None) -> Any:
    """Cheap fingerprint of the files backbone ``name`` would load (relative name, size, mtime), wherever they are
    (our folder or the pack), so replacing or fetching them recomputes the families that use them."""
    s = spec(name)
    try:
        st = status(s, root, pack=pack)
    except PackLinkError as exc:
        return f"refused: {exc}"
    d = st.dir
    if not d.is_dir():
        return "missing" if not st.pack_env else ["missing", sorted(st.pack_env.items())]
    paths = [d / f for f in st.contract.files] if st.source == "pack" else [p for p in d.rglob("*") if p.is_file()]
    files = sorted((str(p.relative_to(d)), p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
    if st.source == "own" and not st.pack_env:
        return files  # the same value as before the pack existed: no recomputation for runs without one
    return [st.source, files, sorted(st.pack_env.items())]


class TimedBackbone:
    """A loaded backbone whose forward calls (encode / embed / track / depth / estimate / score / judge) are timed,
    so the benchmark can compare backbone time with the whole evaluation."""

    FORWARDS = ("encode", "embed", "track", "depth", "estimate", "score", "judge", "angles_to", "parallax_to")

    def __init__(self, inner: Any, spec_: BackboneSpec, provenance: dict[str, Any], clock: dict[str, float]):
        self._inner, self.spec, self.provenance, self._clock = inner, spec_, provenance, clock

    @property
    def inner(self) -> Any:
        return self._inner

    def __getattr__(self, item: str) -> Any:
        attr = getattr(self._inner, item)
        if item in self.FORWARDS and callable(attr):
            def timed(*a: Any, **k: Any) -> Any:  # the backbone's own forward, whatever its signature
                t0 = time.perf_counter()
                try:
                    return attr(*a, **k)
                finally:
                    self._clock["backbone_s"] = self._clock.get("backbone_s", 0.0) + time.perf_counter() - t0
            return timed
        return attr


def _fresh(exc: BaseException) -> BaseException:
    """A new exception like ``exc``: its type, arguments (message) and attributes, with no traceback, cause or
    context. A traceback's frames hold their callers' frames (``f_back``): a stored exception that kept one, or that
    was raised again (each raise adds the raiser's frames), would keep the item being scored then, its 590 MB of
    frames on the default run, alive for as long as the run lasts."""
    new = type(exc).__new__(type(exc), *exc.args)  # no __init__: any constructor signature
    new.__dict__.update(vars(exc))
    return new


class BackboneSet:
    """The backbones of one evaluation run, each loaded at most once (weights read once, not per video).

    ``get(name, role)`` returns a :class:`TimedBackbone` or raises :class:`BackboneUnavailable` with the reason
    (missing weights: the exact fetch command). A corrupt weights folder raises ``ValueError`` naming the file
    (an error, not "not computed").
    """

    def __init__(self, ecfg: EvalConfig, weights_root: Optional[Path] = None, pack: Optional[WeightsPack] = None):
        self.ecfg = ecfg
        self.root = Path(weights_root) if weights_root else default_weights_root()
        #: the release's weights pack (``paths.weights`` laid out like it, or $WORLDMEMBENCH_DATASETS_DIR), or None
        self.pack = pack if pack is not None else WeightsPack.discover(self.root)
        self.clock: dict[str, float] = {"backbone_s": 0.0, "load_s": 0.0}
        self._loaded: dict[str, TimedBackbone] = {}
        self._errors: dict[str, BaseException] = {}

    def check_pack(self, names: Iterable[str]) -> None:
        """Before any work: look up every learned backbone of ``names`` in the weights pack, so that a link out of
        the pack is refused (:class:`evaluate.weights_pack.PackLinkError`, exit code 2) before anything is
        written, rather than failing each metric that would use it."""
        if self.pack is None:
            return
        for n in dict.fromkeys(names):
            s = BACKBONES.get(n)
            if s is not None and s.learned:
                status(s, self.root, pack=self.pack)

    def get(self, name: str, role: str) -> TimedBackbone:
        s = spec(name)
        if role not in s.roles:
            raise BackboneUnavailable(f"backbone {name!r} does not provide {role!r}")
        if name in self._errors:
            raise _fresh(self._errors[name])  # see _fresh: never the stored one
        if name not in self._loaded:
            try:
                self._loaded[name] = self._load(s)
            except (BackboneUnavailable, ValueError, FileNotFoundError) as exc:
                if isinstance(exc, FileNotFoundError):
                    exc = BackboneUnavailable(f"backbone {name!r}: {exc}; fetch it with: "
                                              f"{fetch_command(name, self.root)}"
                                              + ("" if self.pack else f" ({HOW_TO_GET})"))
                self._errors[name] = _fresh(exc)  # kept without the frames of this call (see _fresh)
                raise _fresh(exc) from exc
        return self._loaded[name]

    def _load(self, s: BackboneSpec) -> TimedBackbone:
        cls = None
        if s.learned:
            st = status(s, self.root, pack=self.pack)
            if st.state is FolderState.MISSING:
                where = (f"; weights pack {self.pack.root}: {st.pack_note}" if self.pack
                         else f"; {HOW_TO_GET}")
                raise BackboneUnavailable(
                    f"backbone {s.name!r} ({s.description}): weights not found at {st.dir} "
                    f"(missing {', '.join(st.missing[:3])}); fetch them with: {fetch_command(s.name, self.root)} "
                    f"(nothing is downloaded during a run){where}")
            cls = import_class(s)
            t0 = time.perf_counter()
            opts = dict((getattr(self.ecfg, "backbone_options", None) or {}).get(s.name, {}))
            if st.pack_env and "pack_env" in inspect.signature(cls.load).parameters:
                opts["pack_env"] = dict(st.pack_env)  # e.g. the pack's Hugging Face cache for ViPE's own runs
            device = resolve_device(getattr(self.ecfg, "device", "auto"))
            inst = _built(s, opts, lambda **o: cls.load(st.dir, device, **o), "load options")
            self.clock["load_s"] += time.perf_counter() - t0
            prov = provenance(s, cls, self.root, st)
        else:
            cls = import_class(s)
            if hasattr(cls, "from_settings"):
                inst = cls.from_settings(self.ecfg)
            else:  # a weight-free backbone's recipe knobs (e.g. the classical estimator's flow_window)
                opts = dict((getattr(self.ecfg, "backbone_options", None) or {}).get(s.name, {}))
                inst = _built(s, opts, cls, "settings")
            prov = {"name": s.name, "kind": s.kind, "class": s.ref, "label": getattr(inst, "name", s.name)}
            if s.packaged:  # real shipped weights: library, versions, file sha256 and licence
                prov.update(inst.provenance())
        return TimedBackbone(inst, s, prov, self.clock)

    def provenance(self) -> dict[str, dict[str, Any]]:
        """What was loaded: name -> kind, class, library, repository, revision, file sha256 (for metrics.json)."""
        return {n: b.provenance for n, b in sorted(self._loaded.items())}


def _built(s: BackboneSpec, opts: dict[str, Any], make: Any, what: str) -> Any:
    """``make(**opts)``. A ``TypeError`` or ``ValueError`` with options given (an unknown option, a value out of
    range) is the user's setting, named with its fix; without options it is a bug of the backbone, raised as it is."""
    try:
        return make(**opts)
    except (TypeError, ValueError) as exc:
        if not opts:
            raise
        raise ConfigError(f"evaluate.backbone_options.{s.name}: {exc} (see the {what} of {s.ref})") from None


def provenance(s: BackboneSpec, cls: type[Any], root: Path,
               located: Optional[BackboneStatus] = None) -> dict[str, Any]:
    """What ``metrics.json`` records of a loaded learned backbone: class, library, pinned source, recipe, the folder
    its files came from with their sha256, and, from the release's weights pack, the pack root and each file's path
    inside it."""
    folder = located.dir if located is not None else None
    st = folder_status(s.name, root, WeightsContract.of(cls), hash_files=True, folder=folder)
    out = {"name": s.name, "kind": s.kind, "class": s.ref, "label": getattr(cls, "name", s.name),
           "library": getattr(cls, "library", None), "hf_repo": getattr(cls, "hf_repo", None),
           "revision": getattr(cls, "revision", None), "recipe": getattr(cls, "recipe", None),
           "weights_dir": str(st.dir), "files": st.sha256}
    if located is not None and located.source == "pack":
        out.update(source="pack", pack_files=dict(located.pack_files))
    if located is not None and located.pack_env:
        out["pack_env"] = dict(located.pack_env)
    return out
