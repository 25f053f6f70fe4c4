"""Perception backbones behind small interfaces, and the weight-free implementations.

Interfaces (duck-typed, see :mod:`evaluate.perception.base`): feature encoder, face embedder, tracker, depth
estimator, pose estimator, quality scorer, judge. Learned backbones (DINOv2, ArcFace, MUSIQ-SPAQ, LAION, SAM2, DA3,
ViPE, the VLM judge) plug in here; until one is available, metrics that need it are reported as "not computed"
with the reason, never silently computed with another backbone.
"""
