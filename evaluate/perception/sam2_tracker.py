"""SAM2 video tracking through ``transformers`` (``Sam2VideoModel`` + ``Sam2VideoProcessor``): the paper's person /
object masks, prompted by the case's first-frame box or mask, with re-detection at revisits.

Why transformers and not the ``sam2`` package: importing ``sam2`` initialises Hydra's global state, which clashes
with this harness's own Hydra app ("GlobalHydra is already initialized" before ``@hydra.main``, a missing-config error
inside it). The transformers port has the same network and memory bank and no global state.

Weights: ``<weights_root>/sam2/`` is a ``save_pretrained`` folder (``config.json`` + ``model.safetensors``; the
processor's ``processor_config.json`` when present, else the SAM2 defaults at the config's ``image_size``).
Pinned upstream: ``facebook/sam2.1-hiera-large`` at ``665f8e2ad61cf5f53d65644ff27c8ee525124610`` (the revision
carrying the transformers-format files; the same pin appears in several public projects' manifests, with
``model.safetensors`` sha256 ``dc407dce21301fd94abb395c5099b4f2c455fdc8a8f261ac3d0ea6d4cd197230``).

Recipe: frames are tracked in order at the rate they are given (the caller's sampling); frame 0 is prompted with the
target's tight box when its mask is a box (persons) and with the mask otherwise (objects); mask = logits > 0 at the
frame size; a frame is a valid observation when SAM2's object-presence logit is > 0 and the mask is non-empty.
Re-detection: at a frame listed in ``redetect_at`` (the caller passes the revisit frames, where the prescribed camera
is back at the start pose) whose track is lost, the frame-0 prompt is given again at that frame and the result is
kept only if the presence logit is > 0. There is no semantic detector here: the re-prompt relies on the camera being
back where the target was first seen.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np

from ._loading import check_safetensors, corrupt, require_files, resolve_device

if TYPE_CHECKING:
    from transformers import Sam2VideoModel, Sam2VideoProcessor
    from transformers.models.sam2_video.modeling_sam2_video import Sam2VideoSegmentationOutput


class Sam2Tracker:
    """:class:`evaluate.perception.base.RedetectingTracker` with SAM2 (``name = "sam2"``, ``kind = "paper"``)."""

    name = "sam2"
    kind = "paper"
    hf_repo: Optional[str] = "facebook/sam2.1-hiera-large"
    revision: Optional[str] = "665f8e2ad61cf5f53d65644ff27c8ee525124610"
    files: tuple[str, ...] = ("config.json", "model.safetensors")
    known_sha256 = {"model.safetensors": "dc407dce21301fd94abb395c5099b4f2c455fdc8a8f261ac3d0ea6d4cd197230",
                    "config.json": "00446988cf4d617118d2d347eabe2c46aebed744628facdd540508be30b69ec3"}
    library = "transformers"
    recipe = ("Sam2VideoModel, frame-0 box (persons) or mask (objects) prompt, mask = logits > 0, valid = presence "
              "logit > 0; lost tracks re-prompted at revisit frames")

    def __init__(self, model: Sam2VideoModel, processor: Sam2VideoProcessor, device: str, box_fill: float = 0.95):
        self.model, self.processor, self.device = model, processor, device
        self.box_fill = box_fill

    def settings(self) -> dict[str, Any]:
        size = self.model.config.image_size  # an int for SAM2 (transformers also allows a (height, width) pair)
        if not isinstance(size, int):
            raise TypeError(f"sam2: config image_size {size!r}: one int (square inputs) expected")
        return {"backbone": self.name, "image_size": int(size), "threshold": "logits>0",
                "valid": "presence logit>0", "prompt": f"box if mask fills >= {self.box_fill} of its box, else mask",
                "redetect": "re-prompt lost tracks at revisit frames"}

    @classmethod
    def load(cls, weights_dir: Path, device: str = "cpu") -> "Sam2Tracker":
        weights_dir = Path(weights_dir)
        _, st_path = require_files(cls.name, weights_dir, cls.files)
        check_safetensors(cls.name, st_path)
        from transformers import Sam2VideoModel, Sam2VideoProcessor

        try:
            model = Sam2VideoModel.from_pretrained(str(weights_dir), local_files_only=True)
        except Exception as exc:
            raise corrupt(cls.name, st_path, exc) from exc
        if (weights_dir / "processor_config.json").is_file() or (weights_dir / "preprocessor_config.json").is_file():
            try:
                processor = Sam2VideoProcessor.from_pretrained(str(weights_dir), local_files_only=True)
            except Exception as exc:
                raise corrupt(cls.name, weights_dir / "processor_config.json", exc) from exc
        else:
            # transformers types image_size as int | list | tuple; SAM2's config holds an int
            processor = default_processor(int(model.config.image_size))  # type: ignore[arg-type]
        dev = resolve_device(device)
        # transformers' stubs type .to(device) as taking the model: a device string is what it takes at run time
        return cls(model.to(dev).eval(), processor, dev)  # type: ignore[arg-type]

    def prompt_for(self, init_mask: np.ndarray) -> dict[str, Any]:
        """The frame-0 prompt: ``{"input_boxes": ...}`` when the mask fills its tight box (a person box), else
        ``{"input_masks": ...}``."""
        ys, xs = np.nonzero(init_mask)
        x0, y0, x1, y1 = float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)
        if init_mask.sum() >= self.box_fill * (x1 - x0) * (y1 - y0):
            return {"input_boxes": [[[x0, y0, x1, y1]]]}
        return {"input_masks": init_mask.astype(np.float32)}

    def track(self, frames: np.ndarray, init_mask: np.ndarray,
              redetect_at: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(masks (N, H, W) bool, valid (N,) bool) of the target given its (H, W) bool mask in ``frames[0]``
        ((N, H, W, 3) uint8 RGB); ``redetect_at``: positions in ``frames`` where a lost track is re-prompted."""
        import torch

        frames = np.asarray(frames)
        N, H, W = frames.shape[:3]
        masks = np.zeros((N, H, W), bool)
        valid = np.zeros(N, bool)
        init_mask = np.asarray(init_mask, bool)
        if init_mask.shape != (H, W):
            raise ValueError(f"sam2: init_mask {init_mask.shape} does not match the frames ({H}, {W})")
        if not init_mask.any():
            return masks, valid
        prompt = self.prompt_for(init_mask)
        redetect = set(int(i) for i in redetect_at)
        proc = self.processor
        with torch.inference_mode():
            # the processed video stays in host memory (N x 3 x 1024^2 floats); frames move to the device one by one
            session = proc.init_video_session(video=list(frames), inference_device=self.device,
                                              video_storage_device="cpu")
            proc.add_inputs_to_inference_session(session, frame_idx=0, obj_ids=1, **prompt)
            for i in range(N):
                out = self.model(inference_session=session, frame_idx=i)
                present = float(out.object_score_logits.flatten()[0]) > 0
                m = self._mask(out, H, W)
                if i > 0 and i in redetect and not (present and m.any()):
                    proc.add_inputs_to_inference_session(session, frame_idx=i, obj_ids=1, **prompt)
                    out = self.model(inference_session=session, frame_idx=i)
                    present = float(out.object_score_logits.flatten()[0]) > 0
                    m = self._mask(out, H, W)
                masks[i] = m
                valid[i] = present and bool(m.any())
        return masks, valid

    def _mask(self, out: Sam2VideoSegmentationOutput, H: int, W: int) -> np.ndarray:
        # transformers leaves post_process_masks unannotated
        m = self.processor.post_process_masks(  # type: ignore[no-untyped-call]
            [out.pred_masks], original_sizes=[[H, W]], binarize=True)[0]
        return np.asarray(m.reshape(-1, H, W)[0].cpu().numpy(), bool)


def default_processor(image_size: int) -> Sam2VideoProcessor:
    """SAM2's processor with its defaults (ImageNet mean / std, square resize to ``image_size``)."""
    from transformers import Sam2ImageProcessor, Sam2VideoProcessor
    from transformers.models.sam2_video.video_processing_sam2_video import Sam2VideoVideoProcessor

    size = {"height": image_size, "width": image_size}
    return Sam2VideoProcessor(image_processor=Sam2ImageProcessor(size=size, mask_size={"height": image_size // 4,
                                                                                      "width": image_size // 4}),
                              video_processor=Sam2VideoVideoProcessor(size=size))
