"""The harness against vLLM-Omni 0.30.0's own ``/v1/realtime/video`` handler for LingBot-World v2, with the server's
own configuration (``deploy/lingbot_world_v2_stepwise.yaml``) and only the GPU replaced.

The server (tests/support/vllm_omni_engine.py, a subprocess on 127.0.0.1) runs vLLM-Omni's route and handler, its
deploy-config resolution and stage defaults, LingBot's registered pre-process (``extra_params.action_path`` under the
trusted root: the poses the harness wrote), the pipeline's step execution (``prepare_encode``: request validation,
the fixed 480x832 cache geometry, whole 3-latent blocks, the chunk count, the camera resampled per latent;
``prepare_next_chunk``, ``post_decode``: each chunk's frame count) and the engine's output path, then the handler's
fragmented-MP4 encoder. The text encoder, the VAE and the DiT are replaced: the decode renders as many frames as
the pipeline's own ``_chunk_media_frame_count`` says. No test passes the engine a geometry the harness chose: the
frame size, the chunking and the frame counts are the engine's, and the harness's plan is checked against them.

Needs vllm-omni==0.30.0 and vllm==0.30.0 (``--no-deps``, requirements/eval-nodeps.txt) plus the modules their import
chain needs (the ``served-engines`` extra); skipped with the reason otherwise. Importing them takes ~40 s: slow tier.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.video import frames_sha256
from tests.support.cli import in_process_cli
from tests.support.vllm_omni_engine import frame_pixels

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
ARGS = ["model=lingbot_v2", "backend=vllm_omni", "context=native", "model.num_frames=45",
        "cases.include=[environment_rocket]", "evaluate=off", "progress=false", "run=omni"]
ITEM = Path("outputs/omni/lingbot_v2/native/seed-1/lrlr/environment_rocket")
#: a guard against a hung start, not a timing assumption: importing vLLM-Omni and vLLM takes ~40 s on two cores
START_LIMIT_S = 900


def _omni_root() -> Path:
    """The installed vllm_omni package (located without importing it), or skip with the reason."""
    why = []
    for name in ("vllm_omni", "vllm"):
        if importlib.util.find_spec(name) is None:
            why.append(name)
    if why:
        pytest.skip(f"{' and '.join(why)} not installed: vLLM-Omni's handler runs only with both "
                    "(pip install --no-deps -r requirements/eval-nodeps.txt after pip install -e '.[test]'; "
                    "docs/served.md 'Testing against the engines')")
    spec = importlib.util.find_spec("vllm_omni")
    root = Path(next(iter(spec.submodule_search_locations)))
    if "'0.30.0'" not in (root / "_version.py").read_text():
        pytest.skip(f"vllm-omni at {root} is not 0.30.0, the version conf/backend/vllm_omni.yaml was checked against")
    return root


class OmniServer:
    """The subprocess: its endpoint, the action root it trusts, and what it recorded (sessions, streamed bytes)."""

    def __init__(self, root: Path, base: Path):
        self.omni_root, self.action_root, self.record = root, base / "actions", base / "record"
        self.action_root.mkdir()
        self.record.mkdir()
        self.log = base / "server.log"
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        with self.log.open("w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.vllm_omni_engine", "--action-root",
                                          str(self.action_root), "--record", str(self.record)], cwd=REPO, env=env,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        self.endpoint = f"ws://127.0.0.1:{self._port()}"

    def _port(self) -> int:
        deadline = time.monotonic() + START_LIMIT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 5)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("LISTENING "):
                    return int(line.split()[1])
                if not line and self.proc.poll() is not None:
                    break
        self.close()
        raise AssertionError(f"vLLM-Omni's server did not start:\n{self.log.read_text()[-4000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def sessions(self) -> list[dict]:
        """Every session the engine ran so far, in order."""
        files = sorted(self.record.glob("session-*.json"), key=lambda p: int(p.stem.split("-")[1]))
        return [json.loads(p.read_text()) for p in files]

    def camera(self, k: int) -> dict[str, np.ndarray]:
        """The camera trajectory session ``k``'s pre-process loaded from the action folder."""
        return dict(np.load(self.record / f"session-{k}.npz"))

    def streamed(self, request_id: str) -> bytes:
        return (self.record / f"stream-{request_id}.bin").read_bytes()

    def deploy_model_config(self) -> dict:
        """``model_config`` of the deploy config the server was launched with, read from vLLM-Omni's own file."""
        deploy = yaml.safe_load((self.omni_root / "deploy" / "lingbot_world_v2_stepwise.yaml").read_text())
        return deploy["stages"][0]["model_config"]


@pytest.fixture(scope="module")
def omni(tmp_path_factory):
    server = OmniServer(_omni_root(), tmp_path_factory.mktemp("vllm-omni"))
    yield server
    server.close()


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    return in_process_cli(monkeypatch, tmp_path, capsys)


def _run(cli, omni: OmniServer, *extra: str):
    return cli(*ARGS, f"endpoint={omni.endpoint}", f"backend.action_root={omni.action_root}", *extra)


def _meta(tmp_path: Path, item: Path = ITEM) -> dict:
    return json.loads((tmp_path / item / "meta.json").read_text())


def _decoded(data: bytes) -> list[np.ndarray]:
    """The frames of a fragmented MP4, decoded here independently of the harness."""
    import av

    with av.open(io.BytesIO(data), format="mp4") as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def _check_item(tmp_path: Path, omni: OmniServer, item: Path, session: dict) -> dict:
    """The item is done and holds exactly what the handler streamed for ``session``; the harness's plan is the
    engine's chunking. Returns the item's meta."""
    meta = _meta(tmp_path, item)
    assert meta["status"] == "done", meta.get("root_cause")
    assert "error" not in session
    frames = _decoded(omni.streamed(session["request_id"]))
    assert meta["video"]["frames_sha256"] == frames_sha256(frames)  # the video holds exactly the streamed frames
    assert meta["controls"]["served"]["chunks"]["chunk_frames"] == session["chunk_frames"]
    assert len(frames) == sum(session["chunk_frames"]) == meta["video"]["num_frames"]
    trace = json.loads((tmp_path / item / "context_trace.json").read_text())
    assert trace["server_hello"]["request_id"] == session["request_id"]
    return meta


def test_an_item_holds_what_vllm_omnis_handler_streamed(cli, tmp_path, omni):
    before = len(omni.sessions())
    r = _run(cli, omni)
    assert r.code == 0, r.text
    sessions = omni.sessions()[before:]
    assert len(sessions) == 1
    s = sessions[0]
    _check_item(tmp_path, omni, ITEM, s)
    # the geometry is the engine's: the deploy config's cache size (which the pipeline enforced) is what was asked;
    # 45 frames = 12 latents = 4 blocks of the checkpoint's 3, decoded 9 then 12 frames (the pipeline's own count)
    mc = omni.deploy_model_config()
    assert (s["height"], s["width"]) == (s["asked"]["height"], s["asked"]["width"]) == \
        (mc["ar_diffusion_height"], mc["ar_diffusion_width"])
    assert (s["num_latent_frames"], s["block_frames"], s["total_chunks"]) == (12, 3, 4)
    assert s["chunk_frames"] == [9, 12, 12, 12]
    # the pipeline's 4-step DMD schedule (the harness sends model.sampling_steps); flow_shift: the deploy default
    assert s["asked"]["num_inference_steps"] == 4 and s["asked"]["extra_args"]["flow_shift"] == 5.0
    # what the engine rendered survives its own H.264 encoder (crf 18) into the item's video
    frames = _decoded(omni.streamed(s["request_id"]))
    h, w = s["height"], s["width"]
    assert min(_psnr(f, frame_pixels(1, i, h, w)) for i, f in enumerate(frames)) > 30
    # exact poses: what vLLM-Omni's pre-process loaded from the attempt's folder under its trusted root
    cam, got = np.load(tmp_path / ITEM / "camera.npz"), omni.camera(before)
    np.testing.assert_array_equal(got["poses"], cam["c2w"].astype(np.float32))
    K = cam["K"]  # the canvas is the engine's 832x480 reference: the intrinsics reach it unscaled
    np.testing.assert_allclose(got["intrinsics"][0], [K[0, 0], K[1, 1], K[0, 2], K[1, 2]], rtol=1e-6)
    assert got["latent_poses"].shape == (12, 4, 4)  # the engine samples one pose per latent
    assert s["asked"]["extra_args"]["action_path"].startswith("worldmem-environment_rocket-")
    assert not list(omni.action_root.iterdir())  # the attempt's folder is removed after the session


def test_two_trajectories_of_one_case_both_complete(cli, tmp_path, omni):
    before = len(omni.sessions())
    r = _run(cli, omni, "trajectories=[lrlr,square]")
    assert r.code == 0, r.text
    sessions = omni.sessions()[before:]
    assert len(sessions) == 2 and len({s["request_id"] for s in sessions}) == 2
    assert len({s["asked"]["extra_args"]["action_path"] for s in sessions}) == 2
    for traj in ("lrlr", "square"):
        item = Path(str(ITEM).replace("lrlr", traj))
        c2w = np.load(tmp_path / item / "camera.npz")["c2w"].astype(np.float32)
        # each session's engine loaded this item's own poses
        [k] = [before + i for i in range(2) if np.array_equal(omni.camera(before + i)["poses"], c2w)]
        meta = _check_item(tmp_path, omni, item, sessions[k - before])
        # the engine resamples to one pose per latent (camera.py interpolate_camera_trajectory): the harness's
        # latent anchors; it then divides the latent steps by the largest, whose size the harness records
        latent = omni.camera(k)["latent_poses"]
        np.testing.assert_allclose(latent, c2w[::4], atol=1e-5)
        step = float(np.linalg.norm(np.diff(latent[:, :3, 3], axis=0), axis=1).max())
        assert meta["controls"]["translation_scale"]["max_step_scene_units"] == pytest.approx(step, rel=1e-5)
        assert (step > 0) == (traj == "square")  # lrlr only turns


def test_a_rerun_after_an_engine_failure_completes(cli, tmp_path, omni):
    before = len(omni.sessions())
    (omni.record / "fail-next.json").write_text(json.dumps({"after_chunks": 1}))  # a worker error after chunk 0
    r = _run(cli, omni)
    assert r.code == 1
    meta = _meta(tmp_path)
    assert meta["status"] == "failed" and "engine error" in meta["root_cause"]
    assert "Internal inference error" in meta["root_cause"]  # the handler's error message, passed on
    assert not (tmp_path / ITEM / "video.mp4").exists() and not (tmp_path / ITEM / "context_trace.json").exists()
    assert not list(omni.action_root.iterdir())
    failed = omni.sessions()[before]
    assert "RuntimeError" in failed["error"] and failed["chunk_frames"] == [9]
    r2 = _run(cli, omni)
    assert r2.code == 0, r2.text
    rerun = omni.sessions()[before + 1]
    assert rerun["request_id"] != failed["request_id"]
    assert rerun["asked"]["extra_args"]["action_path"] != failed["asked"]["extra_args"]["action_path"]
    _check_item(tmp_path, omni, ITEM, rerun)


def test_the_engine_refuses_another_frame_size_and_so_does_the_harness_first(cli, tmp_path, omni):
    """The engine itself refuses a size other than its deploy config's (a session.start sent directly, past the
    harness's planning check, which refuses it first: ``frame_size``, checked against the deploy file in
    test_vllm_omni_engine.py)."""
    from PIL import Image
    from websockets.sync.client import connect

    buf = io.BytesIO()

    Image.fromarray(frame_pixels(0, 0, 64, 112)).save(buf, format="PNG")
    start = {"type": "session.start", "format": "m4s", "prompt": "a rocket", "width": 112, "height": 64,
             "num_frames": 45, "fps": 16, "seed": 1,
             "image_reference": {"image_url": "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()}}
    with connect(omni.endpoint + "/v1/realtime/video", open_timeout=60) as ws:
        ws.send(json.dumps(start))
        replies = [json.loads(ws.recv(timeout=120)) for _ in range(2)]
    assert replies[0]["type"] == "video.start"
    assert replies[1]["type"] == "error" and "fixed cache geometry 480x832" in replies[1]["message"]
    r = _run(cli, omni, "model.height=64", "model.width=112")
    assert r.code == 2 and "only at 832x480" in r.err
    assert not (tmp_path / ITEM).exists()
