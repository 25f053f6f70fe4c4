"""Fixtures the adapters' test files share: import them into a test module to use them there."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from harness.cases import Case


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """torch and diffusers, or the module's tests are skipped (imported when they run, not at collection); one
    intra-op thread: tiny tensors gain nothing from more, and on a loaded machine extra threads make every op wait
    for a core."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def two_tone_case(folder, prompt: str) -> Case:
    """An environment case whose 64 x 96 image is three flat regions (left, right, bottom), written to ``folder``."""
    img = np.zeros((64, 96, 3), np.uint8)
    img[:, 48:] = 200
    img[40:, :] = 90
    cv2.imwrite(str(folder / "img.png"), img)
    return Case(id="c1", family="environment", image=str(folder / "img.png"), prompt=prompt)
