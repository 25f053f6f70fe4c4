"""The served adapter's compile and generate rules one at a time, in this process (``adapters/served/adapter.py``).

Each test builds the model's real adapter (``conf/model``) on a small canvas, wraps it for an engine with the
configuration of ``conf/backend/sglang.yaml`` or ``conf/backend/vllm_omni.yaml`` (a field changed where a rule needs
a value those files do not set: each such change is one a user can make there or by override, and is said where it
is made), and states what a user sees: the files ``compile`` writes under ``controls/`` and the facts it records,
the cache fields and message bound the engine is told, and, with a scripted connection in place of the WebSocket
(no socket anywhere), what ``generate`` streams, times and closes. Expected values come from the configuration's
numbers and each rule's definition; the end-to-end runs against loopback servers are in ``test_served_cli.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from adapters.base import ItemRequest, build_adapter
from adapters.served.adapter import latency_summary
from adapters.served.backend import for_backend
from adapters.served.config import BackendConfig
from adapters.served.engines import Session
from adapters.served.keys import decode
from adapters.served.transport import ServedError
from harness.config_groups import group_yaml
from harness.context import ContextPolicy
from tests.adapters.served.test_engine_rules import Scripted
from tests.support.served_server import frame_for
from trajectories import TrajectorySpec
from trajectories.conventions import yaw_pitch_from_rotmat

ENDPOINT = "ws://127.0.0.1:9"  # never connected to: compile opens no socket, generate gets a scripted connection
#: 45 frames = 12 latents of 4 frames = 4 chunks of 3 latents (causal Wan: 1 + 4 * 2 = 9 frames, then 4 * 3 = 12)
LINGBOT = {"num_frames": 45, "height": 64, "width": 112}
#: 49 frames = 7 latents of 8 frames: SANA-WM's grid streams 25 frames, then 24
SANA = {"num_frames": 49, "height": 64, "width": 128}
#: vLLM-Omni serves LingBot v2 at the size its server was launched with: here a server launched at 112x64
SMALL_VLLM_SERVER = {"models.lingbot_v2.frame_size": [112, 64]}
MiB = 1 << 20


def _backend(engine: str, changes: dict[str, Any] | None = None, **top: Any) -> BackendConfig:
    """``conf/backend/<engine>.yaml`` as read for a run, with dotted keys changed as a command-line override would
    (``backend.models.lingbot_v2.model_K=[400,600]``)."""
    data = group_yaml("backend", engine)
    data.update(top)
    for dotted, value in (changes or {}).items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return BackendConfig.from_dict(data)


def _served(model: str = "lingbot_v2", backend: BackendConfig | None = None, **model_changes: Any):
    size = LINGBOT if model == "lingbot_v2" else SANA
    inner = build_adapter({**group_yaml("model", model), **size, **model_changes})
    return for_backend(inner, backend or _backend("sglang"), ENDPOINT)


@functools.lru_cache(maxsize=None)
def _case():
    from harness.cases import load_case_set

    return {c.id: c for c in load_case_set("builtin:demo")}["environment_rocket"]


def _policy(name: str, **changes: Any):
    return ContextPolicy.from_dict({**group_yaml("context", name), "chunk": 3, **changes})


def _request(a, item_dir: Path, trajectory: str = "lrlr", context: str = "native", path=None,
             **policy: Any) -> ItemRequest:
    case = _case()
    if path is None:
        path = a.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", trajectory)), a.canvas_K(case),
                          trajectory)
    return ItemRequest(case=case, path=path, context=_policy(context, **policy), seed=1, item_dir=item_dir)


def _forward(a, per_frame: float, num_frames: int | None = None):
    """A straight walk along +z (OpenCV forward), ``per_frame`` scene units a frame, no turn: the model's own
    canvas, K and rate, another pose sequence."""
    case = _case()
    base = a.path_for(TrajectorySpec.from_dict(group_yaml("trajectory", "lrlr")), a.canvas_K(case), "lrlr")
    n = base.num_frames if num_frames is None else num_frames
    c2w = np.repeat(np.eye(4)[None], n, axis=0)
    c2w[:, 2, 3] = per_frame * np.arange(n)
    return dataclasses.replace(base, name="forward", c2w=c2w, phases={"V": (0, n)}, segments=())


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


# -- the served model's config -----------------------------------------------------------------------------------
def test_the_served_config_owns_no_gpu_and_records_the_backend():
    a = _served()
    assert a.inner.config.gpus_per_job == 8  # the upstream run's 8 GPUs (conf/model lingbot_v2)
    d = a.config.to_dict()
    assert a.config.gpus_per_job == 0 and d["gpus_per_job"] == 0  # the server owns the GPUs
    assert (d["name"], d["height"], d["width"], d["sampling_steps"]) == ("lingbot_v2", 64, 112, 4)  # read through
    assert d["backend"]["engine"] == "sglang" and "connect_timeout_s" not in d["backend"]
    assert d["backend_connection"]["endpoint"] == ENDPOINT


# -- what the engine is told about its cache, and the largest message it may send -----------------------------------
def test_sglang_cache_fields_count_every_visible_latent():
    a = _served()
    # sliding: the window holds the sink, the recent latents and the current chunk
    assert a.cache_settings(_policy("sliding", sink=4, recent=12), 45) == {
        "realtime_causal_sink_size": 4, "realtime_causal_kv_cache_num_frames": 4 + 12 + 3}
    assert a.cache_settings(_policy("sliding", sink=2, recent=6), 45) == {
        "realtime_causal_sink_size": 2, "realtime_causal_kv_cache_num_frames": 2 + 6 + 3}
    # fullkv: no sink, a window of every latent of the clip ((N - 1) / 4 + 1)
    for n in (45, 57):
        assert a.cache_settings(_policy("fullkv"), n) == {
            "realtime_causal_sink_size": 0, "realtime_causal_kv_cache_num_frames": (n - 1) // 4 + 1}
    assert a.cache_settings(_policy("native"), 45) == {}  # the server's own sink and window


def test_no_cache_fields_where_the_engine_does_not_read_them():
    # SANA-WM on SGLang: its realtime stage reads no cache field (contexts: native only)
    sana = _served("sana_wm")
    for name in ("fullkv", "sliding"):
        assert sana.cache_settings(_policy(name), 49) == {}
    # vLLM-Omni takes no cache setting per request, even where the mapping were to list fullkv and sliding
    backend = _backend("vllm_omni", {**SMALL_VLLM_SERVER, "models.lingbot_v2.contexts.fullkv": "listed by a user",
                                     "models.lingbot_v2.contexts.sliding": "listed by a user"})
    vllm = _served(backend=backend)
    assert vllm.check_context(_policy("sliding")) is None  # the mapping lets it through
    for name in ("fullkv", "sliding"):
        assert vllm.cache_settings(_policy(name), 45) == {}


def test_the_message_bound_is_the_largest_frame_batch_plus_one_mib():
    # LingBot v2 on SGLang, 45 frames: chunks of 9, 12, 12, 12 frames: the largest (12) raw rgb24 frames
    assert _served().message_limit(45) == 12 * 64 * 112 * 3 + MiB
    # SANA-WM on SGLang, 49 frames: chunks of 25 and 24, but SGLang sends at most 16 raw frames a message
    assert _served("sana_wm").message_limit(49) == 16 * 64 * 128 * 3 + MiB
    # vLLM-Omni sends one chunk a message, uncapped: with 6-latent chunks (a mapping's chunk_latents: 6) 45 frames
    # are 12 latents = chunks of 1 + 4 * 5 = 21 and 4 * 6 = 24 frames
    vllm = _served(backend=_backend("vllm_omni", {**SMALL_VLLM_SERVER, "models.lingbot_v2.geometry.chunk_latents": 6}))
    assert vllm.plan(45).chunk_frames == (21, 24)
    assert vllm.message_limit(45) == 24 * 64 * 112 * 3 + MiB


# -- compile: the files the session sends --------------------------------------------------------------------------
def test_compile_writes_the_canvas_and_the_prompt_into_the_items_controls(tmp_path):
    import cv2

    a = _served()
    req = _request(a, tmp_path / "item")
    assert not req.controls_dir.exists()
    controls = a.compile(req)
    d = req.controls_dir
    png = cv2.imread(str(d / "image.png"), cv2.IMREAD_UNCHANGED)[..., ::-1]
    np.testing.assert_array_equal(png, a.canvas_image_and_K(req.case)[0])  # the model's canvas, losslessly
    assert png.shape == (64, 112, 3)
    assert (d / "prompt.txt").read_text() == req.case.prompt + "\n"
    names = ("image.png", "prompt.txt", "camera_actions.json", "init.json")
    assert controls.files == {n: str(d / n) for n in names} and all((d / n).is_file() for n in names)


def test_the_canvas_is_encoded_once_per_image_and_size(tmp_path, monkeypatch):
    a = _served()
    calls: list = []
    canvas = a.canvas_image_and_K
    monkeypatch.setattr(a, "canvas_image_and_K", lambda case: calls.append(case) or canvas(case))
    first, second = _request(a, tmp_path / "one"), _request(a, tmp_path / "two")
    a.compile(first)
    before = len(calls)
    a.compile(second)
    assert len(calls) == before  # the second item copies the first one's file
    assert (second.controls_dir / "image.png").read_bytes() == (first.controls_dir / "image.png").read_bytes()


def test_an_image_whose_identity_cannot_be_read_is_encoded_every_time(tmp_path, monkeypatch):
    # the file could not be stat-ed when its identity was taken (e.g. replaced meanwhile): nothing says two items
    # show the same picture, so neither reuses the other's canvas file
    import adapters.memo

    monkeypatch.setattr(adapters.memo, "image_identity", lambda ref: ("unreadable", str(tmp_path / "gone.png")))
    a = _served()
    calls: list = []
    canvas = a.canvas_image_and_K
    monkeypatch.setattr(a, "canvas_image_and_K", lambda case: calls.append(case) or canvas(case))
    a.compile(_request(a, tmp_path / "one"))
    a.compile(_request(a, tmp_path / "two"))
    assert len(calls) == 2


# -- compile: the session's first message ------------------------------------------------------------------------
def test_sglang_init_carries_the_condition_length_the_cache_and_no_pacing(tmp_path):
    a = _served()
    req = _request(a, tmp_path / "item", context="sliding", sink=4, recent=12)
    a.compile(req)
    init = _json(req.controls_dir / "init.json")
    # LingBot's engine floors num_frames to the condition length (2 c - 1) s + 1 = (2 * 3 - 1) * 4 + 1
    assert init["num_frames"] == 21 and init["max_chunks"] == 4
    assert init["realtime_output_pacing"] is False  # frames as soon as they are decoded
    assert (init["size"], init["fps"], init["seed"]) == ("112x64", 16, 1)
    assert (init["realtime_causal_sink_size"], init["realtime_causal_kv_cache_num_frames"]) == (4, 19)
    assert init["condition_inputs"] == {"camera_actions": "<controls/camera_actions.json>"}
    # a mapping with init_num_frames: total sends the clip's length
    total = _served(backend=_backend("sglang", {"models.lingbot_v2.init_num_frames": "total"}))
    req = _request(total, tmp_path / "total")
    total.compile(req)
    assert _json(req.controls_dir / "init.json")["num_frames"] == 45


@pytest.mark.parametrize("backend_steps, model_steps, sent", [
    (None, 4, 4),  # backend.num_inference_steps: null -> model.sampling_steps
    (7, 4, 7),  # the backend's setting wins over the model's
    (7, 0, 7),
    (None, 0, None),  # neither set: the field is left out (the engine's own default)
])
@pytest.mark.parametrize("engine", ["sglang", "vllm_omni"])
def test_the_step_count_is_the_backends_or_else_the_models(tmp_path, engine, backend_steps, model_steps, sent):
    backend = _backend(engine, SMALL_VLLM_SERVER if engine == "vllm_omni" else {}, num_inference_steps=backend_steps)
    a = _served(backend=backend, sampling_steps=model_steps)
    req = _request(a, tmp_path / "item")
    a.compile(req)
    first = _json(req.controls_dir / ("init.json" if engine == "sglang" else "request.json"))
    assert first.get("num_inference_steps", None) == sent
    assert ("num_inference_steps" in first) == (sent is not None)


# -- compile: held keys ----------------------------------------------------------------------------------------------
def test_a_latent_key_script_starts_empty_and_decodes_back_through_the_anchors(tmp_path):
    a = _served()
    req = _request(a, tmp_path / "item", trajectory="lrlr")
    controls = a.compile(req)
    script = _json(req.controls_dir / "camera_actions.json")
    assert len(script) == 12 and script[0] == []  # one key set per latent; latent 0 is the image
    kin = a.served.kinematics
    served = controls.meta["served"]
    assert (served["key_steps"], served["keys_per"]) == (12, "latent")
    assert served["kinematics"] == {"yaw_deg": 6.0, "pitch_deg": 4.0, "move": 0.05, "strafe_yaw_coupling": 0.0,
                                    "pitch_limit_deg": 85.0, "per": "latent"}  # conf/backend/sglang.yaml
    # the decoded path: the engine's pose of latent k (after key sets 0..k) at frame 4 k, interpolated between
    decoded = controls.decoded_c2w
    assert decoded.shape == (45, 4, 4)
    engine = decode(kin, script)  # identity, then after each key set
    np.testing.assert_allclose(decoded[::4], engine[1:], atol=1e-12)
    yaw = np.rad2deg(yaw_pitch_from_rotmat(decoded[:, :3, :3])[0])
    for i in range(1, 44):  # lrlr only turns: the yaw goes linearly from one anchor's to the next
        a0 = 4 * (i // 4)
        b0 = a0 + 4
        assert yaw[i] == pytest.approx(yaw[a0] + (i - a0) / 4 * (yaw[b0] - yaw[a0]), abs=1e-9)
    assert np.abs(yaw).max() > 5  # it does turn


def test_key_translations_reach_the_engine_in_its_units(tmp_path):
    # a mapping whose engine counts 2 units per scene unit (units_per_scene_unit: 2): a walk of 0.025 scene units a
    # latent (4 frames) is 0.05 engine units, exactly one "w" (LingBot's move) per latent
    a = _served(backend=_backend("sglang", {"models.lingbot_v2.units_per_scene_unit": 2.0}))
    path = _forward(a, 0.025 / 4)
    req = _request(a, tmp_path / "item", path=path)
    controls = a.compile(req)
    assert _json(req.controls_dir / "camera_actions.json") == [[]] + [["w"]] * 11
    # decoded back in scene units (the engines' 1e-6 normalisation shortfall a step): the walk itself
    np.testing.assert_allclose(controls.decoded_c2w, path.c2w, atol=1e-6)
    assert controls.meta["translation_scale"] == {"units": "scene", "per_scene_unit": 2.0, "recoverable": True,
                                                  "expects": "sglang engine units"}


def test_a_frame_key_script_has_one_key_set_per_frame_step(tmp_path):
    # a mapping driving LingBot one key set a pixel frame (kinematics.per: frame, as SANA-WM's keys are), 2 engine
    # units a scene unit: a walk of 0.025 scene units a frame is one "w" every frame, from the first
    a = _served(backend=_backend("sglang", {"models.lingbot_v2.units_per_scene_unit": 2.0,
                                            "models.lingbot_v2.kinematics.per": "frame"}))
    path = _forward(a, 0.025)
    req = _request(a, tmp_path / "item", path=path)
    controls = a.compile(req)
    assert _json(req.controls_dir / "camera_actions.json") == [["w"]] * 44  # key set t gives frame t + 1
    assert (controls.meta["served"]["key_steps"], controls.meta["served"]["keys_per"]) == (44, "frame")
    assert controls.decoded_c2w.shape == (45, 4, 4)
    np.testing.assert_allclose(controls.decoded_c2w, path.c2w, atol=1e-5)


# -- compile: exact poses --------------------------------------------------------------------------------------------
def test_sglang_poses_go_in_engine_units_and_decode_back(tmp_path):
    # a mapping whose engine counts 2.5 units per scene unit (units_per_scene_unit: 2.5)
    a = _served("sana_wm", backend=_backend("sglang", {"models.sana_wm.units_per_scene_unit": 2.5}))
    req = _request(a, tmp_path / "item", trajectory="square")
    controls = a.compile(req)
    d, path = req.controls_dir, req.path
    assert np.abs(path.c2w[:, :3, 3]).max() > 0.4  # the square walks
    poses = np.load(d / "poses.npy")
    want = path.c2w.copy()
    want[:, :3, 3] *= 2.5
    assert poses.dtype == np.float32 and poses.shape == (49, 4, 4)
    np.testing.assert_allclose(poses, want, atol=1e-6)
    np.testing.assert_allclose(controls.decoded_c2w, path.c2w, atol=1e-6)  # back in scene units
    K = path.K
    intr = np.load(d / "intrinsics.npy")  # SANA-WM takes the canvas intrinsics as they are
    assert intr.shape == (49, 4)
    np.testing.assert_allclose(intr, np.tile([K[0, 0], K[1, 1], K[0, 2], K[1, 2]], (49, 1)), rtol=1e-6)
    names = ("image.png", "prompt.txt", "poses.npy", "intrinsics.npy", "init.json")
    assert controls.files == {n: str(d / n) for n in names}
    init = _json(d / "init.json")
    assert init["num_frames"] == 49 and init["max_chunks"] == 2  # init_num_frames: total
    assert init["condition_inputs"] == {"camera": "<controls/poses.npy>", "intrinsics": "<controls/intrinsics.npy>"}
    assert controls.meta["translation_scale"]["per_scene_unit"] == 2.5
    assert "intrinsics" not in controls.meta  # SANA-WM takes our intrinsics (no model_K)


def test_vllm_omni_gets_its_translations_normalised_and_the_divisor_recorded(tmp_path):
    a = _served(backend=_backend("vllm_omni", SMALL_VLLM_SERVER))
    req = _request(a, tmp_path / "item", trajectory="square")
    controls = a.compile(req)
    d = req.controls_dir
    # the engine divides the steps between its latent anchors (every 4th frame) by the largest of them
    t = req.path.c2w[::4, :3, 3]
    steps = np.linalg.norm(np.diff(t, axis=0), axis=1)
    assert steps.min() == 0 and steps.max() > 0.4  # the square holds, then walks
    assert controls.meta["translation_scale"] == {
        "units": "normalised", "per_scene_unit": 1.0, "recoverable": False,
        "expects": "vllm_omni: framewise latent steps divided by the largest one",
        "max_step_scene_units": pytest.approx(float(steps.max()), abs=1e-12)}
    assert set(controls.files) == {"image.png", "prompt.txt", "poses.npy", "intrinsics.npy", "request.json"}
    np.testing.assert_allclose(np.load(d / "poses.npy"), req.path.c2w, atol=1e-6)
    request = _json(d / "request.json")
    assert (request["num_frames"], request["width"], request["height"], request["seed"]) == (45, 112, 64, 1)


def test_a_single_anchor_clip_has_no_step_to_divide_by(tmp_path):
    # one frame = one latent: a mapping with 1-latent chunks (chunk_latents: 1) streams it as one chunk of 1 frame
    a = _served(backend=_backend("vllm_omni", {**SMALL_VLLM_SERVER, "models.lingbot_v2.geometry.chunk_latents": 1}))
    path = _forward(a, 0.1, num_frames=1)
    req = _request(a, tmp_path / "item", path=path)
    controls = a.compile(req)
    assert controls.meta["served"]["chunks"]["chunk_frames"] == [1]
    assert controls.meta["translation_scale"]["max_step_scene_units"] == 0.0


# -- compile: the engine's fixed intrinsics -----------------------------------------------------------------------
def _fov(f: float, pixels: int) -> float:
    return math.degrees(2 * math.atan(pixels / 2 / f))


@pytest.mark.parametrize("model_K", [None, (400.0, 600.0)])
def test_fixed_intrinsics_record_both_fields_of_view_and_their_difference(tmp_path, model_K):
    # None: conf/backend/sglang.yaml's [500, 500]; (400, 600): a mapping for a server with other fixed intrinsics
    changes = {} if model_K is None else {"models.lingbot_v2.model_K": list(model_K)}
    fx, fy = model_K or (500.0, 500.0)
    a = _served(backend=_backend("sglang", changes))
    req = _request(a, tmp_path / "item")
    meta = a.compile(req).meta
    K = req.path.K
    case = [_fov(K[0, 0], 112), _fov(K[1, 1], 64)]
    engine = [_fov(fx, 112), _fov(fy, 64)]
    got = meta["intrinsics"]
    np.testing.assert_allclose(got["case_fov_deg"], case, rtol=1e-12)
    np.testing.assert_allclose(got["model_fov_deg"], engine, rtol=1e-12)
    assert got["caveat"] == f"the engine uses fixed intrinsics {[fx, fy]} (fx, fy)"
    res = meta["intrinsics_residual"]
    assert res["hfov_error_deg"] == pytest.approx(abs(engine[0] - case[0]), rel=1e-12)
    assert res["vfov_error_deg"] == pytest.approx(abs(engine[1] - case[1]), rel=1e-12)
    assert res["hfov_error_deg"] != pytest.approx(res["vfov_error_deg"])  # the two axes differ here


# -- generate -----------------------------------------------------------------------------------------------------
def _batch(chunk: int, frames: list[np.ndarray]) -> bytes:
    h, w = frames[0].shape[:2]
    payload = b"".join(f.tobytes() for f in frames)
    return msgpack.packb({"type": "frame_batch", "chunk_index": chunk, "num_frames": len(frames), "format": "rgb24",
                          "width": w, "height": h, "channels": 3, "total_size": len(payload), "payload": payload},
                         use_bin_type=True)


def _stats(chunk: int) -> bytes:
    return msgpack.packb({"type": "chunk_stats", "chunk_index": chunk, "chunk_total_ms": 50.0 + chunk},
                         use_bin_type=True)


@pytest.fixture
def connections(monkeypatch):
    """``adapters.served.transport.Connection`` replaced by a scripted one (the script: ``connections.script``);
    every connection made is in ``connections.made``, with what it was opened with and how often it was closed."""

    class Recorded(Scripted):
        made: list = []
        script: list = []

        def __init__(self, url, token_env, connect_timeout_s, message_timeout_s, max_size=None, item_timeout_s=None):
            super().__init__(Recorded.script)
            self.url, self.max_size, self.closed = url, max_size, 0
            Recorded.made.append(self)

        def close(self) -> None:
            self.closed += 1

    monkeypatch.setattr("adapters.served.transport.Connection", Recorded)
    return Recorded


def test_generate_streams_every_frame_and_closes_the_connection(tmp_path, connections):
    a = _served()
    req = _request(a, tmp_path / "item")
    controls = a.compile(req)
    frames = [frame_for(3, i, 64, 112) for i in range(45)]
    bounds = [0, 9, 21, 33, 45]  # chunks of 9, 12, 12, 12 frames
    connections.script = [m for k in range(4) for m in (_batch(k, frames[bounds[k]:bounds[k + 1]]), _stats(k))]
    got: list[np.ndarray] = []
    t0 = time.perf_counter()
    video = a.generate(req, controls, got.append)
    elapsed = time.perf_counter() - t0
    assert [f.tobytes() for f in got] == [f.tobytes() for f in frames]
    assert video.num_frames == 45 and video.fps == 16.0
    [conn] = connections.made
    assert conn.closed == 1 and conn.script == []
    assert conn.url == ENDPOINT + "/v1/realtime_video/generate" and conn.max_size == a.message_limit(45)
    sent = msgpack.unpackb(conn.sent[0])
    assert sent["first_frame"] == (req.controls_dir / "image.png").read_bytes()
    assert sent["condition_inputs"]["camera_actions"] == _json(req.controls_dir / "camera_actions.json")
    assert 0 <= video.timings["generate_s"] <= elapsed  # the call's own duration
    assert video.meta["served"]["latency"]["server_chunk_total_ms"] == [50.0, 51.0, 52.0, 53.0]
    # what the item records as told: the init as written in init.json, the image and the key script named by file
    # (never the image's bytes or the whole script)
    told = video.context_info["told"]
    assert told["first_frame"] == "<controls/image.png>"
    assert told["condition_inputs"] == {"camera_actions": "<controls/camera_actions.json>"}
    assert told == _json(req.controls_dir / "init.json")


def test_a_failed_session_still_closes_the_connection(tmp_path, connections):
    a = _served()
    req = _request(a, tmp_path / "item")
    controls = a.compile(req)
    connections.script = [msgpack.packb({"type": "error", "content": "out of memory"}, use_bin_type=True)]
    with pytest.raises(ServedError) as info:
        a.generate(req, controls, lambda frame: None)
    assert info.value.kind == "engine error"
    [conn] = connections.made
    assert conn.closed == 1


# -- the context trace: one entry per chunk the engine plans or the server streamed ---------------------------------
def _streamed(frames: list[int]) -> Session:
    """A session whose chunk k brought ``frames[k]`` frames at once, (k + 1) * 100 ms after the request."""
    s = Session(t_sent=0.0)
    for k, n in enumerate(frames):
        s.arrive(k, n, 0.1 * (k + 1))
    return s


def _planned(k: int, served: Any) -> dict[str, Any]:
    """Chunk k of LingBot v2's 12 latents under native / fullkv: its 3 latents, every earlier latent as history."""
    return {"chunk": k, "current": [3 * k, 3 * k + 1, 3 * k + 2], "context": list(range(3 * k)), "sink": [],
            "recent": [], "retrieved": [], "scores": {}, "served": served}


def _came(k: int, n: int) -> dict[str, Any]:
    ms = 100.0 * (k + 1)
    return {"index": k, "frames": n, "first_frame_ms": ms, "last_frame_ms": ms, "wall_ms": 100.0, "server": None}


@pytest.mark.parametrize("context", ["native", "fullkv"])
def test_the_trace_counts_the_engines_chunks_whatever_chunk_the_policy_file_names(tmp_path, context):
    # conf/context/{native,fullkv}.yaml carry chunk: 4; the engine makes 3-latent chunks: 12 latents = 4 chunks
    a = _served()
    req = _request(a, tmp_path / "item", context=context, chunk=4)
    assert req.context.chunk == 4
    trace = a.context_trace(req, _streamed([9, 12, 12, 12]))
    assert trace == [_planned(k, _came(k, n)) for k, n in enumerate([9, 12, 12, 12])]


def test_the_trace_has_an_entry_for_every_planned_and_every_streamed_chunk(tmp_path):
    a = _served()
    req = _request(a, tmp_path / "item")
    # a server that streamed a fifth chunk: an entry for it, with no selection (the policy plans 4)
    more = a.context_trace(req, _streamed([9, 12, 12, 12, 3]))
    assert more == [*(_planned(k, _came(k, n)) for k, n in enumerate([9, 12, 12, 12])),
                    {"chunk": 4, "served": _came(4, 3)}]
    # a session that brought 2 chunks: every planned chunk still has its entry, the missing ones served nothing
    fewer = a.context_trace(req, _streamed([9, 12]))
    assert fewer == [_planned(0, _came(0, 9)), _planned(1, _came(1, 12)), _planned(2, None), _planned(3, None)]


# -- the latency summary ----------------------------------------------------------------------------------------
def test_the_latency_summary_reads_each_chunks_wall_clock_and_the_servers_totals():
    s = Session(t_sent=0.0)
    # chunk 3's statistics came before any frame (no frame of it arrived: no wall clock), so the dict's order is
    # not the chunks' order
    s.chunk(3).server = {"chunk_index": 3, "chunk_total_ms": 60.55555}
    s.arrive(0, 1, 0.00123456)  # chunk 0's first frame 1.23456 ms after the request
    s.arrive(0, 8, 0.01012345)  # its last: wall 10.12345 ms
    s.chunks[0].server = {"chunk_index": 0, "chunk_total_ms": 50.12345, "scheduler_forward_ms": 40.0001}
    s.arrive(1, 12, 0.0411111)  # wall 41.1111 - 10.12345 = 30.98765 ms
    s.chunks[1].server = {"chunk_index": 1, "scheduler_forward_ms": 41.5}  # no chunk_total_ms: not a total
    s.arrive(2, 12, 0.05345677)  # wall 53.45677 - 41.1111 = 12.34567 ms
    s.chunks[2].server = {"chunk_index": 2, "chunk_total_ms": 90.98765}
    got = latency_summary(s)
    assert got["wall_chunk_ms"] == [10.123, 30.988, 12.346]  # chunks 0, 1, 2 (3 has no wall clock), 3 decimals
    # walls 10.12345, 30.98765, 12.34567: mean 53.45677 / 3 = 17.818923..., median 12.34567, max 30.98765
    assert got["wall"] == {"n": 3, "mean_ms": 17.819, "median_ms": 12.346, "max_ms": 30.988, "total_ms": 53.457}
    assert got["server_chunk_total_ms"] == [50.12345, 90.98765, 60.55555]  # by chunk index, as the server sent
    # totals 50.12345, 90.98765, 60.55555: mean 201.66665 / 3 = 67.222216..., median 60.55555, max 90.98765
    assert got["server"] == {"n": 3, "mean_ms": 67.222, "median_ms": 60.556, "max_ms": 90.988, "total_ms": 201.667}
    assert got["server_scheduler_forward_ms"] == [40.0001, 41.5]
    assert got["first_frame_ms"] == 1.235  # chunk 0's first frame
    assert got["server_reports"] == "chunk_stats"


def test_a_session_without_statistics_or_chunks_says_so():
    s = Session(t_sent=0.0)
    s.arrive(0, 9, 0.25)
    s.arrive(1, 12, 0.75)
    got = latency_summary(s)
    assert got["wall_chunk_ms"] == [250.0, 500.0] and got["first_frame_ms"] == 250.0
    assert got["server_chunk_total_ms"] == [] and got["server"] is None
    assert got["server_reports"] == "none (this endpoint reports no chunk statistics)"
    assert latency_summary(Session()) == {
        "wall_chunk_ms": [], "server_chunk_total_ms": [], "server_scheduler_forward_ms": [], "wall": None,
        "server": None, "first_frame_ms": None, "server_reports": "none (this endpoint reports no chunk statistics)"}


# -- vLLM-Omni: the attempt folder under the action root ------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _vllm_script() -> tuple:
    """The stand-in's messages for 45 frames of 112x64 (chunks of 9, 12, 12, 12 frames)."""
    from tests.adapters.served.test_engine_rules import _vllm_messages

    return tuple(_vllm_messages([9, 12, 12, 12], height=64, width=112))


def _vllm_generate(tmp_path, connections, monkeypatch, on_start):
    """A vLLM-Omni item generated against the scripted stand-in; ``on_start(folder)`` runs when ``session.start``
    is sent, with the attempt folder it names under the action root."""
    root = tmp_path / "actions"
    root.mkdir()
    a = _served(backend=_backend("vllm_omni", SMALL_VLLM_SERVER, action_root=str(root)))
    req = _request(a, tmp_path / "item")
    controls = a.compile(req)
    connections.script = list(_vllm_script())

    def send(self, data) -> None:
        self.sent.append(data)
        on_start(root.resolve() / json.loads(data)["extra_params"]["action_path"])

    monkeypatch.setattr(connections, "send", send)
    got: list[np.ndarray] = []
    video = a.generate(req, controls, got.append)
    assert video.num_frames == len(got) == 45
    return req, video, root


def test_the_attempt_folder_is_the_servers_to_read_and_is_removed_after(tmp_path, connections, monkeypatch):
    seen: dict[str, Any] = {}

    def on_start(folder: Path) -> None:
        seen["mode"] = stat.S_IMODE(folder.stat().st_mode)
        seen["files"] = sorted(p.name for p in folder.iterdir())
        seen["poses"] = np.load(folder / "poses.npy")

    old = os.umask(0o002)  # a group-writable umask: the folder is still made 0755 (owner-writable only)
    try:
        req, video, root = _vllm_generate(tmp_path, connections, monkeypatch, on_start)
    finally:
        os.umask(old)
    assert seen["mode"] == 0o755
    assert seen["files"] == ["intrinsics.npy", "poses.npy"]
    np.testing.assert_array_equal(seen["poses"], np.load(req.controls_dir / "poses.npy"))
    assert list(root.iterdir()) == []  # removed after the session
    assert video.context_info["told"]["extra_params"]["action_path"] == video.context_info["attempt"]


def test_a_server_that_removes_the_attempt_folder_itself_fails_nothing(tmp_path, connections, monkeypatch):
    _, video, root = _vllm_generate(tmp_path, connections, monkeypatch, lambda folder: shutil.rmtree(folder))
    assert list(root.iterdir()) == []
