"""BRISQUE's own pieces (evaluate/perception/brisque.py), one rule at a time and without OpenCV's contrib build
(tests/evaluate/perception/test_real_weights.py checks the whole against it): the asymmetric generalised Gaussian
fit of Mittal et al. 2012 (its moment matching, signs, degenerate inputs and grid ends), the zero-filled shift, and
the frames a feature extraction accepts."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.special import gamma

from evaluate.perception import brisque as bq


def _paper_shape(x: np.ndarray) -> float:
    """The grid shape whose ratio Gamma(2/a)^2 / (Gamma(1/a) Gamma(3/a)) is closest to the moment estimate
    R = rhat (g^3 + 1)(g + 1) / (g^2 + 1)^2, g = sigma_l / sigma_r (Mittal et al. 2012, section III)."""
    neg, pos = x[x < 0], x[x > 0]
    g = np.sqrt(np.mean(neg ** 2)) / np.sqrt(np.mean(pos ** 2))
    rhat = np.mean(np.abs(x)) ** 2 / np.mean(x ** 2)
    target = rhat * (g ** 3 + 1) * (g + 1) / (g ** 2 + 1) ** 2
    a = bq._SHAPES
    return float(a[np.argmin(np.abs(gamma(2 / a) ** 2 / (gamma(1 / a) * gamma(3 / a)) - target))])


@pytest.mark.parametrize("draw, shape", [
    (lambda r, n: r.normal(size=n), 2.0),
    (lambda r, n: r.laplace(size=n), 1.0),
    # sigma_l / sigma_r = 1/4: each side holds mass in proportion to its sigma
    (lambda r, n: np.where(r.random(n) < 0.2, -0.5, 2.0) * np.abs(r.normal(size=n)), 2.0),
])
def test_the_shape_is_the_papers_moment_match(draw, shape):
    x = draw(np.random.default_rng(0), 200_000)
    a, left, right = bq.aggd_fit(x)
    assert a == pytest.approx(_paper_shape(x), abs=1e-9) and a == pytest.approx(shape, abs=0.05)
    assert left == pytest.approx(np.sqrt(np.mean(x[x < 0] ** 2)))
    assert right == pytest.approx(np.sqrt(np.mean(x[x > 0] ** 2)))


def test_zeros_count_on_neither_side():
    _, left, right = bq.aggd_fit(np.array([0.0, 0.0, -2.0, 1.0, 3.0]))
    assert left == 2.0 and right == pytest.approx(np.sqrt(5.0))


def test_each_sides_spread_is_its_root_mean_square():
    _, left, right = bq.aggd_fit(np.array([-1.0, -7.0, 3.0]))
    assert left == 5.0 and right == 3.0


@pytest.mark.parametrize("x, want", [
    (np.zeros(8), (0.2, 0.0, 0.0)),  # a flat patch
    (np.array([-3.0, -4.0, 0.0]), (0.2, np.sqrt(12.5), 0.0)),  # nothing on the right: no ratio to fit
])
def test_no_spread_on_the_right_gives_the_smallest_shape(x, want):
    assert bq.aggd_fit(x) == pytest.approx(want)


def test_a_flatter_than_any_grid_shape_gives_the_last_one():
    x = np.linspace(-1.0, 1.0, 20_001)  # uniform: the shape tends to infinity
    assert bq.aggd_fit(x)[0] == pytest.approx(float(bq._SHAPES[-1])) and bq._SHAPES[-1] == pytest.approx(9.999)


def test_a_peakier_than_any_grid_shape_gives_the_first_one():
    x = np.concatenate([np.zeros(100_000), [-1.0, 1.0]])  # nearly all mass at 0: rhat is tiny
    assert bq.aggd_fit(x)[0] == pytest.approx(0.2)


@pytest.mark.parametrize("dy, dx", [(0, 1), (1, 0), (1, 1), (-1, 1), (0, -1), (-1, -1), (2, -3)])
def test_a_shift_reads_the_neighbour_and_is_zero_beyond_the_border(dy, dx):
    x = np.arange(1, 31, dtype=np.float32).reshape(5, 6)
    got = bq._shifted(x, dy, dx)
    for i in range(5):
        for j in range(6):
            inside = 0 <= i + dy < 5 and 0 <= j + dx < 6
            assert got[i, j] == (x[i + dy, j + dx] if inside else 0.0), (i, j)


@pytest.mark.parametrize("frame", [
    np.zeros((32, 32), np.uint8),  # no channels
    np.zeros((16, 16, 16, 3), np.uint8),  # a batch, not a frame
    np.zeros((32, 32, 4), np.uint8),  # RGBA
    np.zeros((32, 32, 3), np.float32),  # not uint8
    np.zeros((15, 40, 3), np.uint8),  # too short
    np.zeros((40, 15, 3), np.uint8),  # too narrow
])
def test_a_frame_that_is_not_rgb_uint8_of_16_pixels_is_refused(frame):
    with pytest.raises(ValueError, match=r"brisque: a frame must be \(H, W, 3\) uint8 RGB with H, W >= 16, got"):
        bq.brisque_features(frame)


def _svm(path, n_features: int, value: float | None = None) -> None:
    """A tiny linear epsilon-SVR of ``n_features`` inputs (predicting about ``value`` when given), saved as OpenCV
    writes the LIVE model."""
    import cv2

    rng = np.random.default_rng(0)
    svm = cv2.ml.SVM_create()
    svm.setType(cv2.ml.SVM_EPS_SVR)
    svm.setKernel(cv2.ml.SVM_LINEAR)
    svm.setP(0.1)
    svm.train(rng.random((8, n_features)).astype(np.float32), cv2.ml.ROW_SAMPLE,
              (rng.random(8) + (0.0 if value is None else value)).astype(np.float32))
    svm.save(str(path))


def _range(path, rows: int, cols: int, node: str = "range") -> None:
    import cv2

    fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_WRITE)
    fs.write(node, np.vstack([np.zeros(cols), np.ones(cols)])[:rows].astype(np.float32))
    fs.release()


@pytest.fixture
def model_files(tmp_path, monkeypatch):
    """Stand-ins for Debian's two files, handed to Brisque in their place: a 36-input model and a 2 x 36 range."""
    paths = {bq.MODEL.label: tmp_path / "model.yml", bq.RANGE.label: tmp_path / "range.yml"}
    _svm(paths[bq.MODEL.label], 36)
    _range(paths[bq.RANGE.label], 2, 36)
    monkeypatch.setattr(bq, "resolve", lambda name, files: dict(paths))
    return paths


def test_stand_in_files_of_the_right_shape_are_loaded(model_files):
    b = bq.Brisque()
    assert b.lo.tolist() == [0.0] * 36 and b.hi.tolist() == [1.0] * 36
    assert b.brisque(np.zeros((0, 16, 16, 3), np.uint8)).shape == (0,)
    raw = b.brisque(np.full((2, 16, 16, 3), 90, np.uint8))
    assert raw.shape == (2,) and raw.dtype == np.float64 and ((raw >= 0) & (raw <= 100)).all()
    assert b.settings() == {"backbone": "brisque", "features": "opencv-quality", "clamp": [0, 100],
                            "mapping": "1 - BRISQUE/100"}


@pytest.mark.parametrize("value, raw", [(500.0, 100.0), (-50.0, 0.0)])
def test_raw_brisque_is_clamped_to_0_100_and_the_quality_to_0_1(model_files, value, raw):
    _svm(model_files[bq.MODEL.label], 36, value)
    b, frames = bq.Brisque(), np.full((2, 16, 16, 3), 90, np.uint8)
    assert b.brisque(frames).tolist() == [raw, raw] and b.score(frames).tolist() == [1 - raw / 100] * 2


@pytest.mark.parametrize("damage, shown", [
    (lambda p: _range(p[bq.RANGE.label], 2, 35), "(range (2, 35))"),
    (lambda p: _range(p[bq.RANGE.label], 1, 36), "(range (1, 36))"),
    (lambda p: _range(p[bq.RANGE.label], 2, 36, node="other"), "(range None)"),
    (lambda p: _svm(p[bq.MODEL.label], 35), "(range (2, 36))"),
])
def test_files_that_are_not_a_36_feature_model_are_refused(model_files, damage, shown):
    damage(model_files)
    with pytest.raises(ValueError, match=r"do not describe a 36-feature BRISQUE model " + re.escape(shown)
                       + r"; reinstall with: apt-get install -y opencv-data"):
        bq.Brisque()


def test_an_unreadable_model_file_is_refused_with_the_fix(model_files):
    model_files[bq.MODEL.label].write_text("not a model")
    with pytest.raises(ValueError) as exc:
        bq.Brisque()
    files = f"{model_files[bq.MODEL.label]}, {model_files[bq.RANGE.label]}"
    assert str(exc.value).startswith(f"backbone 'brisque': unreadable model files {files} (OpenCV")
    assert "\n" not in str(exc.value) and str(exc.value).endswith("); reinstall with: apt-get install -y opencv-data "
                                                                  "(as root)")


def test_a_flat_frame_of_exactly_16_pixels_has_the_flat_features():
    f = bq.brisque_features(np.full((16, 16, 3), 128, np.uint8))
    assert f.dtype == np.float32 and f.shape == (36,)
    # per scale: (shape, variance) of the MSCN map, then (shape, mean, left, right) of its four products: all flat
    assert f.tolist() == pytest.approx(([0.2, 0.0] + [0.2, 0.0, 0.0, 0.0] * 4) * 2)
