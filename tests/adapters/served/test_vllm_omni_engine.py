"""The vLLM-Omni mapping against vLLM-Omni 0.30.0's own source (the PyPI wheel, installed ``--no-deps`` from
requirements/eval-nodeps.txt): the numbers conf/backend/vllm_omni.yaml records are read here from the engine's files
(parsed, not imported: importing the package imports ``vllm``, which takes tens of seconds).

* the checkpoint contract LingBot v2 is refused without (``diffusion/models/lingbot_world/transformer.py``,
  ``from_config``): ``num_frames_per_block`` 3, ``sink_size`` 9, ``sliding_window_num_frames`` 18;
* the reference size its intrinsics are stated at (``camera.py`` ``_REFERENCE_WIDTH`` / ``_REFERENCE_HEIGHT``) and
  the controller unit of its realtime interaction path;
* the route the client speaks (``entrypoints/openai/api_server.py``: ``@router.websocket("/v1/realtime/video")``) and
  the message types of its handler (``serving_video_output_stream.py``).

These are the fast checks (no import of the package). The handler itself, with the deploy config, LingBot's
pre-process and the pipeline's step execution, runs in test_vllm_omni_handler.py (slow: it imports vLLM-Omni and
vLLM, installed ``--no-deps``).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from harness.config_groups import conf_dir


@pytest.fixture(scope="module")
def omni() -> Path:
    spec = importlib.util.find_spec("vllm_omni")  # locates the package without running its __init__ (needs vllm)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("vllm-omni is not installed: pip install --no-deps vllm-omni==0.30.0 "
                    "(requirements/eval-nodeps.txt)")
    root = Path(next(iter(spec.submodule_search_locations)))
    version = (root / "version.py").read_text() + "".join(p.read_text() for p in root.parent.glob(
        "vllm_omni-*.dist-info/METADATA"))
    if "0.30.0" not in version:
        pytest.skip(f"vllm-omni at {root} is not 0.30.0, the version conf/backend/vllm_omni.yaml was checked against")
    return root


def _mapping() -> dict:
    return yaml.safe_load((conf_dir() / "backend" / "vllm_omni.yaml").read_text())


def _dict_literal(tree: ast.AST, name: str) -> dict:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError(f"{name} not found")


def _constants(path: Path) -> dict:
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def test_the_chunk_geometry_is_the_checkpoint_contract(omni):
    tree = ast.parse((omni / "diffusion/models/lingbot_world/transformer.py").read_text())
    contract = _dict_literal(tree, "checkpoint_contract")
    geo = _mapping()["models"]["lingbot_v2"]["geometry"]
    assert contract["num_frames_per_block"] == geo["chunk_latents"] == 3
    assert (contract["sink_size"], contract["sliding_window_num_frames"]) == (9, 18)  # the native window (docs)


def test_intrinsics_are_stated_at_the_engines_reference_size(omni):
    consts = _constants(omni / "diffusion/models/lingbot_world/camera.py")
    assert [consts["_REFERENCE_WIDTH"], consts["_REFERENCE_HEIGHT"]] == \
        _mapping()["models"]["lingbot_v2"]["intrinsics_reference"]


def test_the_route_and_the_messages_are_the_handlers(omni):
    api = (omni / "entrypoints/openai/api_server.py").read_text()
    assert f'@router.websocket("{_mapping()["route"]}")' in api
    handler = (omni / "entrypoints/openai/serving_video_output_stream.py").read_text()
    for kind in ("session.start", "video.start", "video.chunk_metadata", "session.done", "byte_length"):
        assert f'"{kind}"' in handler, kind
    assert "/v1/realtime/world/camera" not in api  # the camera route (LingBot-World-Fast) is not in 0.30.0


def test_the_frame_size_is_the_deploy_configs_cache_geometry(omni):
    deploy = yaml.safe_load((omni / "deploy" / "lingbot_world_v2_stepwise.yaml").read_text())
    mc = deploy["stages"][0]["model_config"]
    assert _mapping()["models"]["lingbot_v2"]["frame_size"] == [mc["ar_diffusion_width"], mc["ar_diffusion_height"]]
