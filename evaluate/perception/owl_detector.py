"""Open-vocabulary object detection with OWLv2 through ``transformers`` (for MemoBench's object reappearance score).

Weights are read only from a local ``save_pretrained`` folder, ``<weights_root>/<name>/`` (default name
``owlv2-base-patch16-ensemble``); nothing is downloaded here. Frames are (N, H, W, 3) uint8 RGB; boxes come back as
``[x0, y0, x1, y1]`` in pixels of the input frame. OWLv2's processor pads every image to a square at the bottom
and right, so boxes are scaled by the padded side (transformers' documented OWLv2 convention).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .base import BackboneUnavailable

DEFAULT_NAME = "owlv2-base-patch16-ensemble"
HUB_ID = {"owlv2-base-patch16-ensemble": "google/owlv2-base-patch16-ensemble",
          "owlv2-large-patch14-ensemble": "google/owlv2-large-patch14-ensemble"}


class OwlDetector:
    """``detect(frames, queries)`` -> per frame, per query: ``(scores (M,), boxes (M, 4))`` above ``threshold``.

    Args:
        weights_dir: a folder written by ``save_pretrained`` holding the model and its processor.
        threshold: minimum detection score kept. batch: frames per forward pass. device: torch device string.
    """

    kind = "detector"

    def __init__(self, weights_dir: str | Path, threshold: float = 0.1, batch: int = 8, device: str = "cpu"):
        d = Path(weights_dir).expanduser()
        if not (d / "config.json").is_file():
            name = d.name
            hub = HUB_ID.get(name, "google/" + name)
            raise BackboneUnavailable(
                f"OWLv2 weights not found at {d} (no config.json): fetch them once with "
                f"`huggingface-cli download {hub} --local-dir {d}` (or from Python: "
                f"Owlv2ForObjectDetection.from_pretrained('{hub}').save_pretrained('{d}') and the same for "
                "Owlv2Processor), then point evaluate.ors.weights_root at its parent folder")
        try:
            import torch  # noqa: F401
            from transformers import Owlv2ForObjectDetection, Owlv2Processor
        except ImportError as exc:  # pragma: no cover - the eval extra installs both
            raise BackboneUnavailable(f"OWLv2 needs torch and transformers (pip install '.[eval]'): {exc}") from exc
        try:
            self.processor = Owlv2Processor.from_pretrained(str(d), local_files_only=True)
            model = Owlv2ForObjectDetection.from_pretrained(str(d), local_files_only=True)
            # transformers' stubs type .to(device) as taking the model: a device string is what it takes at run time
            self.model = model.to(device).eval()  # type: ignore[arg-type]
        except (OSError, ValueError) as exc:
            raise BackboneUnavailable(f"cannot load OWLv2 from {d}: {exc}") from exc
        self.name = d.name
        self.threshold, self.batch, self.device = float(threshold), int(batch), device

    @classmethod
    def from_settings(cls, weights_root: Optional[str], name: str = DEFAULT_NAME, threshold: float = 0.1,
                      batch: int = 8, device: str = "cpu") -> "OwlDetector":
        if not weights_root:
            raise BackboneUnavailable(
                f"OWLv2 is not configured: set evaluate.ors.weights_root to the folder holding {name}/ "
                f"(`huggingface-cli download {HUB_ID.get(name, 'google/' + name)} --local-dir <weights_root>/{name}`)")
        return cls(Path(weights_root) / name, threshold, batch, device)

    def detect(self, frames: np.ndarray, queries: Sequence[str]) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        import torch

        out: list[list[tuple[np.ndarray, np.ndarray]]] = []
        side = int(max(frames.shape[1:3]))
        for s in range(0, len(frames), self.batch):
            chunk = [np.ascontiguousarray(f) for f in frames[s:s + self.batch]]
            inputs = self.processor(text=[list(queries)] * len(chunk), images=chunk, return_tensors="pt")
            inputs = {k: v.to(self.device) for k, v in inputs.items()}
            with torch.no_grad():
                res = self.model(**inputs)
            post = self.processor.post_process_grounded_object_detection(
                res, threshold=self.threshold, target_sizes=[(side, side)] * len(chunk))
            for r in post:
                scores = r["scores"].detach().cpu().numpy().astype(np.float64)
                boxes = r["boxes"].detach().cpu().numpy().astype(np.float64)
                labels = r["labels"].detach().cpu().numpy()
                out.append([(scores[labels == q], boxes[labels == q]) for q in range(len(queries))])
        return out
