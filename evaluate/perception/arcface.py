"""ArcFace face embeddings through ``insightface`` on ``onnxruntime``: the paper's Human Identity encoder.

Weights: ``<weights_root>/arcface/`` is insightface's ``buffalo_l`` model pack (the folder insightface unpacks under
``~/.insightface/models/buffalo_l``); two of its files are used: ``det_10g.onnx`` (the SCRFD / RetinaFace-family
detector with 5 landmarks, run through ``insightface.model_zoo.RetinaFace``) and ``w600k_r50.onnx`` (the ResNet-50
ArcFace recogniser trained on WebFace600K, run through ``insightface.model_zoo.ArcFaceONNX``). The pack is not on the
Hugging Face Hub: it is the ``buffalo_l.zip`` asset of the ``deepinsight/insightface`` GitHub release ``v0.7`` (the
URL insightface's own model store downloads), so ``hf_repo`` is None and ``revision`` names that release.

Recipe (insightface's ``FaceAnalysis`` steps, run per target): detect faces on the whole frame (BGR, detector input
``det_size`` x ``det_size`` = 640, score >= 0.5, NMS 0.4); keep the highest-scoring face whose box centre lies inside
the target's mask; align it with the 5 landmarks to the 112 x 112 ArcFace template (``face_align.norm_crop``);
embed; L2-normalise (insightface's ``normed_embedding``). A frame without such a face is not a valid observation.

Providers: ``CUDAExecutionProvider`` (then CPU) for a ``cuda`` device when onnxruntime has it, else CPU.

``detector="haar"`` replaces the detector by OpenCV's bundled frontal-face Haar cascade (real weights shipped with
OpenCV) and the landmark alignment by a square crop of the box resized to 112: a **diagnostic** path (labelled
``arcface-haar``, kind ``diagnostic``), not the paper's pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol

import numpy as np

from ._loading import corrupt, require_files
from .base import FaceEmbedding, select_target_face

if TYPE_CHECKING:
    import onnxruntime

BUFFALO_L_URL = "https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip"


def ort_providers(device: str) -> list[str]:
    """onnxruntime providers for ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``)."""
    import onnxruntime

    avail = onnxruntime.get_available_providers()
    if (device == "auto" or str(device).startswith("cuda")) and "CUDAExecutionProvider" in avail:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _session(name: str, path: Path, providers: list[str], device: str) -> onnxruntime.InferenceSession:
    import onnxruntime

    opts: dict[str, int] = {}
    if str(device).startswith("cuda:") and providers[0] == "CUDAExecutionProvider":
        opts = {"device_id": int(str(device).split(":")[1])}
    try:
        return onnxruntime.InferenceSession(str(path), providers=[(providers[0], opts)] + providers[1:])
    except Exception as exc:  # onnxruntime raises its own error types for an unreadable graph
        raise corrupt(name, path, exc) from exc


class _RetinaDetector(Protocol):
    """What the embedder uses of insightface's ``RetinaFace``: (N, 5) boxes with scores and (N, 5, 2) landmarks."""

    def detect(self, img: np.ndarray, max_num: int = 0) -> tuple[np.ndarray, Optional[np.ndarray]]: ...


class _Recogniser(Protocol):
    """What the embedder uses of insightface's ``ArcFaceONNX``: (N, D) features of 112x112 BGR crops."""

    output_shape: list[int | str]

    def get_feat(self, imgs: list[np.ndarray]) -> np.ndarray: ...


class HaarFaceDetector:
    """Diagnostic face boxes from OpenCV's bundled ``haarcascade_frontalface_default.xml`` (no landmarks)."""

    name = "haar-frontalface"

    def __init__(self, min_size: int = 12):
        import cv2

        cascades = cv2.data.haarcascades  # type: ignore[attr-defined]  # cv2.data: OpenCV's stubs leave it out
        self.cascade = cv2.CascadeClassifier(cascades + "haarcascade_frontalface_default.xml")
        if self.cascade.empty():
            raise RuntimeError("OpenCV's bundled haarcascade_frontalface_default.xml could not be loaded")
        self.min_size = min_size

    def detect(self, bgr: np.ndarray) -> tuple[np.ndarray, Optional[np.ndarray]]:
        import cv2

        gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        boxes, _, weights = self.cascade.detectMultiScale3(gray, scaleFactor=1.1, minNeighbors=3,
                                                           minSize=(self.min_size, self.min_size),
                                                           outputRejectLevels=True)
        if len(boxes) == 0:
            return np.zeros((0, 5), np.float32), None
        b = np.asarray(boxes, np.float32)
        det = np.concatenate([b[:, :2], b[:, :2] + b[:, 2:], np.asarray(weights, np.float32).reshape(-1, 1)], 1)
        return det, None


class ArcFaceEmbedder:
    """:class:`evaluate.perception.base.FaceEmbedder` with insightface's buffalo_l (``name = "arcface"``)."""

    name = "arcface"
    kind = "paper"
    hf_repo: Optional[str] = None
    revision: Optional[str] = "v0.7"  # deepinsight/insightface GitHub release holding buffalo_l.zip
    source_url = BUFFALO_L_URL
    files: tuple[str, ...] = ("det_10g.onnx", "w600k_r50.onnx")
    library = "insightface+onnxruntime"
    recipe = ("buffalo_l: det_10g detector (640, score>=0.5), face whose box centre is in the target mask, "
              "5-landmark norm_crop 112x112, w600k_r50 embedding, L2-normalised")

    def __init__(self, detector: _RetinaDetector | HaarFaceDetector, recognizer: _Recogniser, detector_label: str,
                 diagnostic: bool = False):
        self.detector, self.recognizer = detector, recognizer
        self.detector_label = detector_label
        if diagnostic:  # instance labels: never reported as the paper's backbone
            self.name, self.kind = "arcface-haar", "diagnostic"

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "detector": self.detector_label, "crop": 112,
                "selection": "highest score with box centre in the target mask", "normalised": True}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu", detector: str = "retinaface", det_size: int = 640,
             det_thresh: float = 0.5) -> "ArcFaceEmbedder":
        """Load the pack from ``weights_dir``. ``detector="haar"`` needs only ``w600k_r50.onnx`` (diagnostic)."""
        weights_dir = Path(weights_dir)
        if detector not in ("retinaface", "haar"):
            from harness.errors import ConfigError

            raise ConfigError(f"evaluate.backbone_options.arcface.detector={detector!r}: use 'retinaface' or 'haar'")
        need = cls.files if detector == "retinaface" else ("w600k_r50.onnx",)
        paths = dict(zip(need, require_files(cls.name, weights_dir, need)))
        from insightface.model_zoo.arcface_onnx import ArcFaceONNX
        from insightface.model_zoo.retinaface import RetinaFace

        providers = ort_providers(device)
        rec_path = paths["w600k_r50.onnx"]
        try:
            rec = ArcFaceONNX(model_file=str(rec_path), session=_session(cls.name, rec_path, providers, device))
        except ValueError:
            raise
        except Exception as exc:
            raise corrupt(cls.name, rec_path, exc) from exc
        shape = rec.input_shape
        if len(shape) != 4 or shape[1] != 3 or tuple(rec.input_size) != (112, 112) or len(rec.output_shape) != 2:
            raise corrupt(cls.name, rec_path, f"expected a (N, 3, 112, 112) -> (N, D) recogniser, got input "
                                              f"{shape} output {rec.output_shape}")
        if detector == "haar":
            return cls(HaarFaceDetector(), rec, HaarFaceDetector.name, diagnostic=True)
        det_path = paths["det_10g.onnx"]
        try:
            det = RetinaFace(model_file=str(det_path), session=_session(cls.name, det_path, providers, device))
        except ValueError:
            raise
        except Exception as exc:
            raise corrupt(cls.name, det_path, exc) from exc
        if not det.use_kps:
            raise corrupt(cls.name, det_path, f"the detector has {len(det.output_names)} outputs; the alignment "
                                              "needs the 5-landmark variant (9 or 15 outputs)")
        # insightface's prepare(ctx_id < 0) switches the session to the CPU provider: only ask for that on a CPU
        det.prepare(0 if providers[0] == "CUDAExecutionProvider" else -1, input_size=(det_size, det_size),
                    det_thresh=det_thresh)
        return cls(det, rec, f"retinaface:{det_path.name}@{det_size}")

    def _faces(self, bgr: np.ndarray) -> tuple[np.ndarray, Optional[np.ndarray]]:
        if isinstance(self.detector, HaarFaceDetector):
            return self.detector.detect(bgr)
        det, kps = self.detector.detect(bgr, max_num=0)
        return det, kps

    def _align(self, bgr: np.ndarray, box: np.ndarray, kps: Optional[np.ndarray]) -> np.ndarray:
        import cv2
        from insightface.utils import face_align

        if kps is not None:
            crop: np.ndarray = face_align.norm_crop(bgr, landmark=kps, image_size=112)
            return crop
        # diagnostic: square crop around the box centre, edge-padded
        x0, y0, x1, y1 = box[:4]
        c, s = np.array([(x0 + x1) / 2, (y0 + y1) / 2]), max(x1 - x0, y1 - y0)
        M = np.array([[112 / s, 0, 56 - c[0] * 112 / s], [0, 112 / s, 56 - c[1] * 112 / s]], np.float32)
        return cv2.warpAffine(bgr, M, (112, 112), borderMode=cv2.BORDER_REPLICATE)

    def embed(self, frames: np.ndarray, masks: np.ndarray) -> FaceEmbedding:
        """Embeddings (N, D) float32 of the target's face in (N, H, W, 3) uint8 RGB ``frames``, where ``masks``
        (N, H, W) bool locate the target (its tracked person mask or box)."""
        frames, masks = np.asarray(frames), np.asarray(masks, bool)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or masks.shape != frames.shape[:3]:
            raise ValueError(f"arcface: frames (N, H, W, 3) uint8 and masks (N, H, W) bool expected, got "
                             f"{frames.shape} {frames.dtype} and {masks.shape}")
        N, H, W = frames.shape[:3]
        boxes = np.full((N, 4), np.nan, np.float32)
        scores = np.zeros(N, np.float32)
        crops, where = [], []
        for i in range(N):
            bgr = np.ascontiguousarray(frames[i][..., ::-1])
            det, kpss = self._faces(bgr)
            best = select_target_face(det, masks[i])
            if best < 0:
                continue
            boxes[i], scores[i] = det[best, :4], det[best, 4]
            crops.append(self._align(bgr, det[best], None if kpss is None else kpss[best]))
            where.append(i)
        valid = np.zeros(N, bool)
        emb = None
        if crops:
            feats = np.asarray(self.recognizer.get_feat(crops), np.float32).reshape(len(crops), -1)
            feats /= np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
            emb = np.zeros((N, feats.shape[1]), np.float32)
            emb[where] = feats
            valid[where] = True
        else:
            emb = np.zeros((N, int(self.recognizer.output_shape[1]) if isinstance(
                self.recognizer.output_shape[1], int) else 0), np.float32)
        return FaceEmbedding(emb, valid, boxes, {"detector": self.detector_label, "scores": scores.tolist(),
                                                 "alignment": "norm_crop-112" if not isinstance(
                                                     self.detector, HaarFaceDetector) else "box-crop-112"})
