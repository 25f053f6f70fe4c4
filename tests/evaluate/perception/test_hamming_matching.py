"""The classical estimator's descriptor matching (:func:`evaluate.perception.weightfree.hamming_cross_check`) gives
exactly OpenCV's cross-checked brute-force matches: the same pairs in the same order, ties included."""

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from evaluate.perception.weightfree import hamming_cross_check


def opencv_pairs(d0: np.ndarray, d1: np.ndarray) -> list[tuple[int, int]]:
    return [(m.queryIdx, m.trainIdx) for m in cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True).match(d0, d1)]


def ours(d0: np.ndarray, d1: np.ndarray) -> list[tuple[int, int]]:
    q, t = hamming_cross_check(d0, d1)
    assert q.dtype == np.intp and t.dtype == np.intp
    return list(zip(q.tolist(), t.tolist()))


@pytest.mark.parametrize("width", [1, 2, 5, 8, 32, 61])
def test_random_descriptors_match_opencv_ties_included(width):
    """Narrow descriptors make ties the rule (1 byte: 9 possible distances), so the tie rule (lower index wins, in
    both directions) is exercised as much as the nearest-neighbour rule; widths that are not a multiple of 8 too."""
    rng = np.random.default_rng(width)
    for _ in range(40):
        n0, n1 = (int(v) for v in rng.integers(1, 160, 2))
        d0 = rng.integers(0, 256, (n0, width), dtype=np.uint8)
        d1 = rng.integers(0, 256, (n1, width), dtype=np.uint8)
        assert ours(d0, d1) == opencv_pairs(d0, d1), (n0, n1)


def test_many_rows_span_several_blocks():
    """With many rows on both sides the distance table is built in several blocks of ``d0``'s rows; the column
    minima carried across blocks keep the lowest row on a tie (duplicated descriptors force exact ties)."""
    rng = np.random.default_rng(7)
    d1 = rng.integers(0, 256, (700, 32), dtype=np.uint8)
    d0 = np.concatenate([rng.integers(0, 256, (900, 32), dtype=np.uint8), d1[::3], d1[::3]])  # exact copies, twice
    got = ours(d0, d1)
    assert got == opencv_pairs(d0, d1)
    copies = {t for q, t in got if q >= 900}
    assert len(copies) > 200  # the copied rows match the rows they copy
    assert all(q < 900 + len(d1[::3]) for q, t in got if t in copies)  # the first copy wins each tie


def test_all_bits_differ_and_identical_sets():
    """Distance 256 (every bit of ORB's 32 bytes differs) does not wrap around; identical sets match one to one."""
    a = np.zeros((3, 32), np.uint8)
    b = np.full((2, 32), 255, np.uint8)
    assert ours(a, b) == opencv_pairs(a, b) == [(0, 0)]
    rng = np.random.default_rng(3)
    d = rng.integers(0, 256, (50, 32), dtype=np.uint8)
    assert ours(d, d) == [(i, i) for i in range(50)]


def test_empty_sides_give_no_pairs():
    one = np.zeros((4, 32), np.uint8)
    none = np.zeros((0, 32), np.uint8)
    for d0, d1 in ((none, one), (one, none), (none, none)):
        q, t = hamming_cross_check(d0, d1)
        assert len(q) == len(t) == 0


def test_orb_descriptors_of_a_turned_view_match_opencv():
    """Real ORB descriptors of a textured image and of the same image shifted and rotated by a few degrees, as the
    return-frame search compares them (thousands of features on each side)."""
    rng = np.random.default_rng(11)
    img = cv2.GaussianBlur(rng.integers(0, 256, (480, 832), dtype=np.uint8), (0, 0), 1.5)
    turned = cv2.warpAffine(img, cv2.getRotationMatrix2D((400.0, 250.0), 4.0, 1.0), (832, 480))
    orb = cv2.ORB_create(3000)
    _, d0 = orb.detectAndCompute(img, None)
    _, d1 = orb.detectAndCompute(turned, None)
    assert len(d0) > 2000 and len(d1) > 2000
    got = ours(d0, d1)
    assert got == opencv_pairs(d0, d1)
    assert len(got) > 500


def test_without_numpys_bit_count_the_byte_table_gives_the_same_pairs(monkeypatch):
    """numpy < 2 has no ``bitwise_count``: the byte-table fallback counts the same bits."""
    rng = np.random.default_rng(2)
    d0 = rng.integers(0, 256, (300, 32), dtype=np.uint8)
    d1 = rng.integers(0, 256, (250, 32), dtype=np.uint8)
    d1[:40] = d0[:40]
    expected = opencv_pairs(d0, d1)
    monkeypatch.delattr(np, "bitwise_count")
    assert ours(d0, d1) == expected
