"""Perception backbones behind small interfaces, and the weight-free implementations.

Interfaces (duck-typed, see :mod:`evaluate.perception.base`): feature encoder, face embedder, tracker, depth
estimator, pose estimator, quality scorer, judge. Learned backbones (DINOv2, ArcFace, MUSIQ-SPAQ, LAION, SAM2, DA3,
ViPE, the VLM judge) plug in here; until one is available, metrics that need it are reported as "not computed"
with the reason, never silently computed with another backbone.

Learned backbones of the paper, one module each (see ``docs/backbones.md``): :mod:`.dinov2` (DINOv2, transformers),
:mod:`.arcface` (ArcFace, insightface + onnxruntime), :mod:`.sam2_tracker` (SAM2 video, transformers), :mod:`.da3`
(Depth Anything 3), :mod:`.vipe` (ViPE, its own environment), :mod:`.iqa` (MUSIQ-SPAQ and LAION aesthetic, pyiqa).
Importing them imports no deep-learning library; each ``load(weights_dir, device)`` does.
"""
