"""dlib's ResNet face descriptor: a real pretrained face embedder that ships inside installable packages, so the
Human Identity metric can be checked for meaning offline. A ``diagnostic`` backbone (``name = "dlib-resnet"``):
real weights, but not the paper's ArcFace; its scores are not comparable with ArcFace's.

Weights (nothing is downloaded; :mod:`evaluate.perception.packaged`):

* HOG frontal face detector: compiled into dlib (PyPI ``dlib-bin``), trained by Davis King on LFW frontal faces;
  recorded by the sha256 of its serialised form (``fhog_object_detector.save``), which does not depend on the build.
  Licence: Boost Software License 1.0 (dlib).
* ``shape_predictor_5_face_landmarks.dat`` (5 landmarks: eye corners and nose base; dlib's own 5-point dataset) and
  ``dlib_face_recognition_resnet_model_v1.dat`` (ResNet-29, 128-d, trained on about 3 M faces of 7485 identities,
  none of them in LFW; 99.38 % on LFW): package data of PyPI ``face-recognition-models`` 0.3.0. Licence: Davis
  King released them into the public domain (dlib-models README); the wheel ships a CC0 1.0 licence file (its
  metadata says MIT, which is the licence of the packaging).
* Optional ``landmarks=68``: ``shape_predictor_68_face_landmarks.dat`` (same package, or Debian ``libdlib-data`` at
  ``/usr/share/dlib/``). It is trained on iBUG 300-W, whose licence excludes commercial use (dlib-models README;
  Debian lists the file as CC0-1.0), so it is not the default.
* Optional ``detector=cnn``: ``mmod_human_face_detector.dat`` (same package, public domain): about 2 s per
  192 x 320 frame on one CPU core (the HOG detector: about 20 ms), but it finds faces cut by the frame edge.

Recipe (dlib's own face-recognition steps, per target): detect on the whole frame (RGB uint8: dlib takes RGB, unlike
insightface's BGR) with the image upsampled ``upsample`` = 1 time (a face needs about 40 px then; dlib's window is
80 px) and a detection score of at least ``min_score`` = 0.3 (dlib's default is 0: on the demo's astronaut it
then also fires on the suit's mission patch at scores 0.00-0.17, and where the face is gone that patch is picked;
the face itself scores 0.5-1.7 on frames back at the start pose); keep the highest-scoring face whose box centre
lies in the target's mask (the same rule as ArcFace: :func:`evaluate.perception.base.select_target_face`);
5 landmarks; align with ``dlib.get_face_chip`` (150 x 150, padding 0.25: the crop the descriptor was trained on);
the 128-d descriptor (``num_jitters`` = 0); L2-normalised, since Eq. 4 scores cosines. A frame without such a face
is not an observation.

What the score means here: dlib's descriptors are trained for Euclidean distance (same person < 0.6) and are not
centred, so cosines of different people stay high (astronaut vs Grace Hopper: 0.88), while the same face under a
small shift or brightness change stays above 0.99. Eq. 4's value is therefore compressed towards 1; the validity
tests state thresholds for this backbone (``tests/evaluate/perception/test_real_weights.py``).
"""

from __future__ import annotations

import os
import tempfile
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .base import BackboneUnavailable, FaceEmbedding, select_target_face
from .packaged import (EXTRA_INSTALL, ExtraNeed, ShippedFile, dist_versions, file_records, module_available,
                       resolve)

if TYPE_CHECKING:
    from ..config import EvalConfig

_FRM = "PyPI face-recognition-models"
_PD = "public domain (dlib-models README: 'released into the public domain'); the wheel ships CC0 1.0"
DESCRIPTOR = ShippedFile("dlib_face_recognition_resnet_model_v1.dat",
                         ("module", "face_recognition_models", "models/dlib_face_recognition_resnet_model_v1.dat"),
                         _FRM, EXTRA_INSTALL, _PD,
                         "55533b28a95800a551ba546ba62fe69625c7e95a7061c338adffead08719da30")
LANDMARKS_5 = ShippedFile("shape_predictor_5_face_landmarks.dat",
                          ("module", "face_recognition_models", "models/shape_predictor_5_face_landmarks.dat"),
                          _FRM, EXTRA_INSTALL, _PD,
                          "c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888")
_L68 = "shape_predictor_68_face_landmarks.dat"
LANDMARKS_68 = (ShippedFile(_L68, ("module", "face_recognition_models", f"models/{_L68}"), _FRM, EXTRA_INSTALL,
                            "trained on iBUG 300-W, whose licence excludes commercial use (dlib-models README)",
                            "fbdc2cb80eb9aa7a758672cbfdda32ba6300efe9b6e6c7a299ff7e736b11b92f"),
                ShippedFile(_L68, ("path", "", f"/usr/share/dlib/{_L68}"), "Debian libdlib-data",
                            "apt-get install -y libdlib-data",
                            "trained on iBUG 300-W, whose licence excludes commercial use (dlib-models README); "
                            "Debian lists it as CC0-1.0"))
CNN_DETECTOR = ShippedFile("mmod_human_face_detector.dat",
                           ("module", "face_recognition_models", "models/mmod_human_face_detector.dat"),
                           _FRM, EXTRA_INSTALL, _PD,
                           "4cb19393e2fbaf2b1609a9319ad5386618c886a6234ec1b971f3e87c85d87fe6")
#: sha256 of dlib's serialised HOG frontal face detector (dlib 20.0.1)
HOG_SHA256 = "f3f7aa833fb4a14a46fc48689f45b98d85ef72d6dfaf8bdc012b7d3c522a5426"
HOG_LICENCE = "Boost Software License 1.0 (compiled into dlib; trained on LFW frontal faces)"


def _files(landmarks: int, detector: str) -> list[ShippedFile]:
    out = [DESCRIPTOR]
    if landmarks == 5:
        out.append(LANDMARKS_5)
    else:  # the first installed of the two providers
        out.append(next((f for f in LANDMARKS_68 if f.locate() is not None), LANDMARKS_68[0]))
    if detector == "cnn":
        out.append(CNN_DETECTOR)
    return out


def import_dlib() -> ModuleType:
    """``dlib``, or :class:`BackboneUnavailable` with the install command."""
    try:
        import dlib
    except ImportError as exc:
        raise BackboneUnavailable(f"backbone 'dlib-resnet': dlib is not installed ({exc}); install it with: "
                                  f"{EXTRA_INSTALL}") from None
    module: ModuleType = dlib
    return module


class DlibResnetEmbedder:
    """:class:`evaluate.perception.base.FaceEmbedder` with dlib's HOG detector, 5-point chip and ResNet descriptor.

    Options (``evaluate.backbone_options.dlib-resnet``): ``upsample`` (int >= 0, default 1), ``min_score`` (the HOG
    detector's adjust_threshold, default 0.3), ``landmarks`` (5 or 68), ``detector`` (``hog`` or ``cnn``),
    ``num_jitters`` (0: the descriptor of the chip itself)."""

    name = "dlib-resnet"
    kind = "diagnostic"
    library = "dlib"
    recipe = ("dlib HOG frontal face detector (upsample 1, score >= 0.3), highest-scoring face whose box centre is in "
              "the target mask, 5-point shape predictor, get_face_chip 150x150 padding 0.25 (RGB), "
              "dlib_face_recognition_resnet_model_v1 128-d descriptor, L2-normalised")
    licence = f"detector: {HOG_LICENCE}; landmarks and descriptor: {_PD}"
    hf_repo: Optional[str] = None
    revision: Optional[str] = None
    files: tuple[str, ...] = ()

    def __init__(self, upsample: int = 1, min_score: float = 0.3, landmarks: int = 5, detector: str = "hog",
                 num_jitters: int = 0):
        from harness.errors import ConfigError

        opt = "evaluate.backbone_options.dlib-resnet"
        if not (isinstance(upsample, int) and upsample >= 0):
            raise ConfigError(f"{opt}.upsample={upsample!r}: an integer >= 0 (times the frame is upsampled)")
        if landmarks not in (5, 68):
            raise ConfigError(f"{opt}.landmarks={landmarks!r}: use 5 (default, public domain) or 68")
        if detector not in ("hog", "cnn"):
            raise ConfigError(f"{opt}.detector={detector!r}: use 'hog' (default) or 'cnn'")
        if not (isinstance(num_jitters, int) and num_jitters >= 0):
            raise ConfigError(f"{opt}.num_jitters={num_jitters!r}: an integer >= 0")
        dlib = import_dlib()
        self.upsample, self.min_score, self.landmarks = upsample, float(min_score), landmarks
        self.detector_kind, self.num_jitters = detector, num_jitters
        self._files = _files(landmarks, detector)
        self._paths = resolve(self.name, self._files)
        try:
            self.shape = dlib.shape_predictor(str(self._paths[self._files[1].label]))
            self.descriptor = dlib.face_recognition_model_v1(str(self._paths[DESCRIPTOR.label]))
            if detector == "cnn":
                self.cnn = dlib.cnn_face_detection_model_v1(str(self._paths[CNN_DETECTOR.label]))
        except RuntimeError as exc:  # dlib's deserialisation error for a truncated / foreign file
            raise ValueError(f"backbone {self.name!r}: a weights file could not be read ({exc}): "
                             f"{', '.join(str(p) for p in self._paths.values())}; reinstall with: "
                             f"{EXTRA_INSTALL}") from exc
        self.hog = dlib.get_frontal_face_detector()
        self._dlib = dlib

    @classmethod
    def from_settings(cls, ecfg: EvalConfig) -> "DlibResnetEmbedder":
        opts = dict((getattr(ecfg, "backbone_options", None) or {}).get(cls.name, {}))
        known = ("upsample", "min_score", "landmarks", "detector", "num_jitters")
        bad = sorted(set(opts) - set(known))
        if bad:
            from harness.errors import ConfigError

            raise ConfigError(f"evaluate.backbone_options.dlib-resnet.{bad[0]}: unknown option; use one of "
                              f"{', '.join(known)}")
        return cls(**opts)

    @classmethod
    def shipped_files(cls) -> list[ShippedFile]:
        return _files(5, "hog")

    @classmethod
    def shipped_extra(cls) -> list[ExtraNeed]:
        return [("dlib (HOG detector, runtime)", module_available("dlib"), EXTRA_INSTALL)]

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "detector": self.detector_kind, "upsample": self.upsample,
                "min_score": self.min_score, "landmarks": self.landmarks, "chip": 150, "padding": 0.25,
                "num_jitters": self.num_jitters, "selection": "highest score with box centre in the target mask",
                "normalised": True}

    def provenance(self) -> dict[str, Any]:
        """Library versions, every weights file with its sha256 and licence (for ``metrics.json``)."""
        files = file_records(self._files, self._paths)
        with tempfile.TemporaryDirectory() as tmp:  # the compiled-in detector, hashed in its serialised form
            p = os.path.join(tmp, "frontal_face_detector.svm")
            self.hog.save(p)
            from harness.io import sha256_file

            h = sha256_file(p)
        files["frontal_face_detector (compiled into dlib)"] = {
            "sha256": h, "pinned_sha256": HOG_SHA256, "checksum": "ok" if h == HOG_SHA256 else "differs",
            "provider": "PyPI dlib-bin", "licence": HOG_LICENCE}
        return {"library": "dlib", "versions": dist_versions(["dlib-bin", "dlib", "face-recognition-models"]),
                "recipe": self.recipe, "licence": self.licence, "files": files, "settings": self.settings(),
                "weights": "shipped inside installed packages (no download)"}

    def _detect(self, rgb: np.ndarray) -> np.ndarray:
        """(M, 5) float32 ``x0, y0, x1, y1, score`` of the faces in one (H, W, 3) uint8 RGB frame."""
        if self.detector_kind == "cnn":
            dets = self.cnn(rgb, self.upsample)
            rows = [(d.rect.left(), d.rect.top(), d.rect.right() + 1, d.rect.bottom() + 1, d.confidence)
                    for d in dets]
        else:
            rects, scores, _ = self.hog.run(rgb, self.upsample, self.min_score)
            rows = [(r.left(), r.top(), r.right() + 1, r.bottom() + 1, s) for r, s in zip(rects, scores)]
        return np.asarray(rows, np.float32).reshape(-1, 5)

    def embed(self, frames: np.ndarray, masks: np.ndarray) -> FaceEmbedding:
        """Embeddings (N, 128) float32 (L2-normalised where valid, zeros elsewhere) of the target's face in
        (N, H, W, 3) uint8 **RGB** ``frames``, where ``masks`` (N, H, W) bool locate the target (its tracked person
        mask or box). ``boxes``: (N, 4) float32 ``x0, y0, x1, y1`` pixels (NaN where invalid)."""
        frames, masks = np.asarray(frames), np.asarray(masks, bool)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or masks.shape != frames.shape[:3]:
            raise ValueError(f"{self.name}: frames (N, H, W, 3) uint8 RGB and masks (N, H, W) bool expected, got "
                             f"{frames.shape} {frames.dtype} and {masks.shape}")
        dlib = self._dlib
        N = len(frames)
        emb = np.zeros((N, 128), np.float32)
        valid = np.zeros(N, bool)
        boxes = np.full((N, 4), np.nan, np.float32)
        scores = np.zeros(N, np.float32)
        for i in range(N):
            rgb = np.ascontiguousarray(frames[i])
            det = self._detect(rgb)
            best = select_target_face(det, masks[i])
            if best < 0:
                continue
            x0, y0, x1, y1, s = (float(v) for v in det[best])
            rect = dlib.rectangle(int(round(x0)), int(round(y0)), int(round(x1)) - 1, int(round(y1)) - 1)
            chip = dlib.get_face_chip(rgb, self.shape(rgb, rect), size=150, padding=0.25)
            d = np.asarray(self.descriptor.compute_face_descriptor(chip, self.num_jitters), np.float32)
            emb[i] = d / max(float(np.linalg.norm(d)), 1e-12)
            valid[i], boxes[i], scores[i] = True, (x0, y0, x1, y1), s
        return FaceEmbedding(emb, valid, boxes, {"detector": f"dlib-{self.detector_kind}", "scores": scores.tolist(),
                                                 "alignment": f"get_face_chip-150 ({self.landmarks} landmarks)"})
