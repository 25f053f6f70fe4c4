"""Control encoders shared by two or more models (pure, CPU-only): anchors and relative-pose rules, ray maps, PRoPE
field of view, laying a path on a model's control blocks (``clock``), and the measured cost of each model's
controls (``report``, ``python -m adapters.controls.report``). A model's own encoders and constants (Matrix-Game 3's keys, YUME's captions, HY-WorldPlay's action
labels and default K, DreamX-World's fixed K) live in its folder, ``adapters/<model>/controls.py``.

Input everywhere: the canonical path, OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward),
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up; pixel intrinsics.
"""
