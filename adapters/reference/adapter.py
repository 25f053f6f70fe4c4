"""Adapter of the built-in reference world model (runs in-process on a CPU, no weights)."""

from __future__ import annotations

from adapters.base import Adapter, FrameSink, GeneratedVideo, ItemRequest, NativeControls
from harness.io import save_npy, write_json
from harness.scene import Room

from .config import ReferenceConfig
from .events import event_for
from .model import rollout


class ReferenceAdapter(Adapter):
    """Native controls are the canonical poses themselves (lossless): ``poses.npy`` (T,4,4) OpenCV c2w and
    ``intrinsics.npy`` (3,3) in canvas pixels; the context policy is applied inside the model."""

    config_class = ReferenceConfig
    config: ReferenceConfig

    def room_for(self) -> Room:
        return Room(**{k: float(v) for k, v in self.config.room.items()})

    def compile(self, req: ItemRequest) -> NativeControls:
        d = req.controls_dir
        save_npy(d / "poses.npy", req.path.c2w)
        save_npy(d / "intrinsics.npy", req.path.K)
        write_json(d / "context.json", req.context.to_dict())
        return NativeControls(
            files={"poses.npy": str(d / "poses.npy"), "intrinsics.npy": str(d / "intrinsics.npy"),
                   "context.json": str(d / "context.json")},
            command=None,
            decoded_c2w=None,
            meta={
                "translation_scale": {"units": "scene units", "mapping": "identity (the model renders the room in "
                                      "scene units)", "room": self.config.room},
                "latent_anchor_rule": "latent i -> frame 4i (latent 0 -> frame 0)",
            },
        )

    def generate(self, req: ItemRequest, controls: NativeControls, sink: FrameSink) -> GeneratedVideo:
        image, K = self.canvas_image_and_K(req.case)
        seed_parts = (req.seed, req.case.id, req.path.name)
        event = event_for(req.case, image, req.path.phases, seed_parts)  # dynamic cases: the walk-off event
        out = rollout(
            image,
            req.path.c2w,
            K,
            req.context,
            seed_parts=seed_parts,
            sink=sink,
            stride=self.config.latent_stride,
            room=self.room_for(),
            event=event,
        )
        extra = {"dynamic_event": event.trace()} if event is not None else {}
        return GeneratedVideo(
            num_frames=req.path.num_frames,
            fps=req.path.fps,
            context_trace=out["context_trace"],
            timings=out["timings"],
            meta={"num_latents": out["num_latents"], "latent_anchor_frames": out["latent_anchor_frames"],
                  "warps": out["warps"], "seed_identity": [req.seed, req.case.id, req.path.name],
                  "oracle_depth": {"kind": "room", "room": self.config.room}, **extra},
        )
