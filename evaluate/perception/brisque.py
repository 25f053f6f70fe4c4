"""BRISQUE no-reference image quality (Mittal, Moorthy and Bovik 2012) with the real LIVE-trained model that Debian's
``opencv-data`` ships: a ``diagnostic`` imaging-quality backbone (``name = "brisque"``) beside the paper's
MUSIQ-SPAQ, whose scores it does not reproduce.

Model: ``/usr/share/opencv4/quality/brisque_model_live.yml`` (an OpenCV ``ml::SVM`` epsilon-SVR, RBF, 36 inputs,
774 support vectors) and ``brisque_range_live.yml`` (per-feature min / max for the [-1, 1] scaling), from
opencv_contrib's quality module, trained with that module's own features on the LIVE IQA database. Licence: the
files are part of OpenCV (Apache-2.0; Debian's opencv-data copyright: Apache-2.0 AND BSD-3-Clause); the BRISQUE
method's code carries the University of Texas at Austin's permissive notice (use for any purpose, acknowledge LIVE
and cite Mittal et al.).

Why not ``cv2.quality``: it lives in ``opencv-contrib-python-headless``, and that distribution and the core's
``opencv-python-headless`` both install the same ``cv2`` package, so two of them in one environment overwrite each
other's files (and uninstalling one breaks the other); any later install of a package that requires the plain build
brings it back on top. So the core keeps one ``cv2`` and this module computes the 36 BRISQUE features itself (numpy
+ the core's ``cv2.GaussianBlur`` / ``cv2.resize``, float32, as OpenCV's quality module does) and predicts with the
core's ``cv2.ml.SVM``: ``tests/evaluate/perception/test_real_weights.py`` checks features and scores against
``cv2.quality.QualityBRISQUE`` run from an isolated ``pip install --target`` copy of the contrib build (scores within
0.01 BRISQUE points on uncompressed frames, 0.1 on heavily compressed JPEG, whose flat blocks make float32 rounding
decide which local variances come out negative).

Features (per scale: the frame, then half size by bicubic resize): grayscale of the uint8 frame (BT.601, rounded)
/ 255; MSCN coefficients (x - mu) / (sigma + 1/255) with a 7 x 7 Gaussian (sigma 7/6, replicated border); an
asymmetric generalised Gaussian fit (shape by moment matching on a 0.001 grid from 0.2, first minimum) of the MSCN
map (shape, mean of the two variances) and of its products with its right / lower / lower-right / upper-right
neighbours (zero beyond the border: shape, mean, left and right variance): 2 x (2 + 4 x 4) = 36.

Direction: BRISQUE is lower-is-better, about 0 (pristine) to 100 (worst), clamped to [0, 100] as OpenCV does. The
imaging family's convention is [0, 1] higher-is-better, so ``score`` returns ``1 - BRISQUE / 100`` (linear, so the
mean BRISQUE of a video is exactly ``100 * (1 - quality.imaging[brisque])``); ``brisque`` returns the raw values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .packaged import ShippedFile, dist_versions, file_records, resolve

if TYPE_CHECKING:
    from ..config import EvalConfig

_DIRS = "/usr/share/opencv4/quality|/usr/share/opencv/quality|/usr/local/share/opencv4/quality"
_LIC = ("OpenCV (Apache-2.0; Debian opencv-data: Apache-2.0 AND BSD-3-Clause); BRISQUE method: University of Texas "
        "at Austin notice (any purpose, acknowledge LIVE, cite Mittal et al. 2012)")
_APT = "apt-get install -y opencv-data (as root)"


def _shipped(name: str, sha: str) -> ShippedFile:
    return ShippedFile(name, ("path", "", "|".join(f"{d}/{name}" for d in _DIRS.split("|"))), "Debian opencv-data",
                       _APT, _LIC, sha)


MODEL = _shipped("brisque_model_live.yml", "4c44c7eec9e5139830c0bb0e4a044c9cd351ba5bbc9e3798beca3243e2782ff4")
RANGE = _shipped("brisque_range_live.yml", "a18427f4f7ad087524bd0d63389649a3899b51ca6d44a4d5f8d8171f1f914a9c")

#: the shape grid of the generalised Gaussian fit: 0.2, 0.201, ... < 10
_SHAPES = 0.2 + 0.001 * np.arange(9800)


def _ratio_table() -> np.ndarray:
    from scipy.special import gamma

    table: np.ndarray = gamma(2 / _SHAPES) ** 2 / (gamma(1 / _SHAPES) * gamma(3 / _SHAPES))
    return table


_RATIO: Optional[np.ndarray] = None


def aggd_fit(x: np.ndarray) -> tuple[float, float, float]:
    """(shape, left sigma, right sigma) of an asymmetric generalised Gaussian fitted to the values ``x`` by moment
    matching; the shape is the first local minimum of the moment mismatch on :data:`_SHAPES`."""
    global _RATIO
    if _RATIO is None:
        _RATIO = _ratio_table()
    x = np.asarray(x, np.float64).ravel()
    neg, pos = x[x < 0], x[x > 0]
    nsq, psq = float(np.dot(neg, neg)), float(np.dot(pos, pos))
    left, right = np.sqrt(nsq / max(len(neg), 1)), np.sqrt(psq / max(len(pos), 1))
    if right == 0:  # a constant patch, or nothing on the right: no ratio to fit
        return float(_SHAPES[0]), float(left), float(right)
    g = left / right
    n = x.size
    rhat = (np.nansum(np.abs(x)) / n) ** 2 / ((nsq + psq) / n)
    target = rhat * (g ** 3 + 1) * (g + 1) / (g ** 2 + 1) ** 2
    diff = np.abs(_RATIO - target)
    rises = np.flatnonzero(np.diff(diff) > 0)
    return float(_SHAPES[rises[0] if len(rises) else len(_SHAPES) - 1]), float(left), float(right)


def _shifted(x: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``out[i, j] = x[i + dy, j + dx]``, 0 outside the image."""
    H, W = x.shape
    out = np.zeros_like(x)
    out[max(0, -dy) : H - max(0, dy), max(0, -dx) : W - max(0, dx)] = \
        x[max(0, dy) : H - max(0, -dy), max(0, dx) : W - max(0, -dx)]
    return out


def brisque_features(rgb: np.ndarray) -> np.ndarray:
    """The 36 BRISQUE features (float32) of one (H, W, 3) uint8 RGB frame (at least 16 x 16 pixels)."""
    import cv2
    from scipy.special import gamma

    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[-1] != 3 or rgb.dtype != np.uint8 or min(rgb.shape[:2]) < 16:
        raise ValueError(f"brisque: a frame must be (H, W, 3) uint8 RGB with H, W >= 16, got {rgb.shape} {rgb.dtype}")
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY).astype(np.float32) / np.float32(255)
    feats: list[float] = []
    img: np.ndarray = gray
    for scale in range(2):
        if scale:
            img = cv2.resize(gray, (gray.shape[1] // 2, gray.shape[0] // 2), interpolation=cv2.INTER_CUBIC)
        mu = cv2.GaussianBlur(img, (7, 7), 7 / 6, borderType=cv2.BORDER_REPLICATE)
        var = cv2.GaussianBlur(img * img, (7, 7), 7 / 6, borderType=cv2.BORDER_REPLICATE) - mu * mu
        # float32 rounding makes the local variance of flat areas slightly negative; as in OpenCV, its square root
        # is NaN there, and NaN values count in no fit's sums but in the pixel count
        with np.errstate(invalid="ignore"):
            mscn = (img - mu) / (np.sqrt(var) + np.float32(1 / 255))
        shape, left, right = aggd_fit(mscn)
        feats += [shape, (left * left + right * right) / 2]
        for dy, dx in ((0, 1), (1, 0), (1, 1), (-1, 1)):  # right, lower, lower-right, upper-right neighbours
            shape, left, right = aggd_fit(mscn * _shifted(mscn, dy, dx))
            mean = (right - left) * gamma(2 / shape) / gamma(1 / shape) * np.sqrt(gamma(1 / shape) / gamma(3 / shape))
            feats += [shape, mean, left * left, right * right]
    return np.asarray(feats, np.float32)


class Brisque:
    """:class:`evaluate.perception.base.QualityScorer` for Imaging quality: ``1 - BRISQUE / 100`` per frame."""

    name = "brisque"
    kind = "diagnostic"
    library = "numpy+opencv (cv2.ml.SVM; features as OpenCV's quality module)"
    recipe = ("BRISQUE, OpenCV quality-module features (gray/255, MSCN 7x7 sigma 7/6, AGGD, 2 scales, 36), LIVE SVR "
              "from Debian opencv-data, clamped to [0, 100]; quality = 1 - BRISQUE/100 (higher is better)")
    licence = _LIC
    hf_repo: Optional[str] = None
    revision: Optional[str] = None
    files: tuple[str, ...] = ()
    direction = "reported as 1 - BRISQUE/100: higher is better (raw BRISQUE: lower is better, 0..100)"

    def __init__(self) -> None:
        import cv2

        self._paths = resolve(self.name, self.shipped_files())
        try:
            self.svm = cv2.ml.SVM.load(str(self._paths[MODEL.label]))
            fs = cv2.FileStorage(str(self._paths[RANGE.label]), cv2.FILE_STORAGE_READ)
            rng = fs.getNode("range").mat()
            fs.release()
        except cv2.error as exc:
            files = ", ".join(str(p) for p in self._paths.values())
            raise ValueError(f"backbone 'brisque': unreadable model files {files} ({' '.join(str(exc).split())}); "
                             f"reinstall with: {_APT}") from exc
        if rng is None or rng.shape != (2, 36) or self.svm.getVarCount() != 36:
            raise ValueError(f"backbone 'brisque': {self._paths[RANGE.label]} / {self._paths[MODEL.label]} do not "
                             f"describe a 36-feature BRISQUE model (range {None if rng is None else rng.shape}); "
                             f"reinstall with: {_APT}")
        self.lo, self.hi = rng[0].astype(np.float32), rng[1].astype(np.float32)

    @classmethod
    def from_settings(cls, ecfg: EvalConfig) -> "Brisque":
        return cls()

    @classmethod
    def shipped_files(cls) -> list[ShippedFile]:
        return [MODEL, RANGE]

    def settings(self) -> dict[str, Any]:
        return {"backbone": self.name, "features": "opencv-quality", "clamp": [0, 100], "mapping": "1 - BRISQUE/100"}

    def provenance(self) -> dict[str, Any]:
        return {"library": self.library, "versions": dist_versions(["opencv-python-headless"]), "recipe": self.recipe,
                "licence": self.licence, "direction": self.direction,
                "files": file_records(self.shipped_files(), self._paths), "settings": self.settings(),
                "weights": "shipped inside an installed package (Debian opencv-data; no download)"}

    def brisque(self, frames: np.ndarray) -> np.ndarray:
        """(N,) float64 raw BRISQUE in [0, 100] (lower is better) of (N, H, W, 3) uint8 RGB frames."""
        frames = np.asarray(frames)
        if frames.ndim != 4:
            raise ValueError(f"brisque: frames must be (N, H, W, 3) uint8 RGB, got {frames.shape} {frames.dtype}")
        if not len(frames):
            return np.zeros(0)
        f = np.stack([brisque_features(fr) for fr in frames])
        z = (-1 + 2 * (f - self.lo) / (self.hi - self.lo)).astype(np.float32)  # libsvm scaling to [-1, 1]
        raw = self.svm.predict(z)[1].ravel().astype(np.float64)
        clamped: np.ndarray = np.clip(raw, 0.0, 100.0)
        return clamped

    def score(self, frames: np.ndarray) -> np.ndarray:
        """(N,) float64 ``1 - BRISQUE / 100`` in [0, 1] (higher is better) of (N, H, W, 3) uint8 RGB frames."""
        return 1.0 - self.brisque(frames) / 100.0
