"""Shared control encoders (pure, CPU-only): anchors, relative-pose rules, ray maps, PRoPE inputs, keys, captions.

Input everywhere: the canonical path, OpenCV camera-to-world 4x4 float64 (+x right / +y down / +z forward),
world = camera frame of frame 0, positive yaw turns right, positive pitch turns up; pixel intrinsics.
"""
