"""The rules of adapters/upstream.py, one at a time and in this process: the root cause of a failed launch, the shared
config's bounds, the Hugging Face cache rule, the launch command (argv, environment, ``command.sh``), what ``compile``
writes and records, the contract's launch checks, readiness (paths, checkout, hub fetches, the model's Python, GPUs),
and ``generate``'s handling of upstream's log and video.

A small adapter (:class:`Stub`) with a 32x48 canvas stands in for a model; where a rule reads the contract, the stub
is given a real contract (DreamX's) with the one section the rule reads changed. The slow collaborators are stubbed:
``git`` (``_git_head``), the model's Python (``subprocess.run`` of the import probe) and upstream's launch
(``harness.io.run_logged``, which here writes the log and a video encoded once per module).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path
from typing import ClassVar

import cv2
import numpy as np
import pydantic.dataclasses
import pytest

from adapters import contracts, upstream
from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.contracts.schema import (
    CheckoutWrite,
    CheckpointEntry,
    HubFetch,
    ImportProbe,
    Intrinsics,
    LogFailure,
    NativeLaunch,
    Policies,
    PostProcess,
    RegimeCaveat,
    SameLaunch,
)
from adapters.upstream import (
    LaunchSpec,
    UpstreamAdapter,
    UpstreamConfig,
    UpstreamRunError,
    hf_cache_dir,
    hf_cache_has,
    missing_files,
    root_cause,
)
from harness import gpu_pool
from harness.cases import Case
from harness.context import ContextPolicy
from harness.io import file_mode
from harness.video import VideoWriter
from tests.support.adapter_fixtures import two_tone_case
from trajectories.conventions import fov_from_intrinsics
from trajectories.path import CameraPath

COMMIT = "0123456789abcdef0123456789abcdef01234567"
H, W, FPS = 32, 48, 8.0
NATIVE = ContextPolicy.from_dict({"name": "native"})
FULLKV = ContextPolicy.from_dict({"name": "fullkv", "chunk": 4})


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class StubConfig(UpstreamConfig):
    extra_dir: str | None = None  # a model-specific checkpoint key
    refine: bool = False  # a config switch a checkpoint entry or an identity may depend on


class Stub(UpstreamAdapter):
    """A model without a contract (its name has none) unless a subclass sets ``CONTRACT``."""

    config_class = StubConfig
    CONTRACT: object = "own"

    def __init__(self, config):
        self.spec = LaunchSpec(script="run.py", args=["--n", "3"])
        self.images: list = []
        self.decoded: np.ndarray | None = None
        super().__init__(config)

    def contract(self):
        return super().contract() if self.CONTRACT == "own" else self.CONTRACT

    def write_native(self, req, image, K):
        self.images.append(image)
        (req.controls_dir / "poses.txt").write_text("poses")
        return NativeControls(files={"poses.txt": str(req.controls_dir / "poses.txt")}, decoded_c2w=self.decoded)

    def launch(self, req, controls):
        return self.spec

    def decode(self, controls_dir, req):
        return np.asarray(req.path.c2w) * 2


def stub(contract: object = "own", cls: type = Stub, **over) -> Stub:
    cfg = {"name": "stubmodel", "adapter": "tests.adapters.test_upstream_rules:Stub", "seed": 1, "height": H,
           "width": W, "fps": FPS, "num_frames": 3, "paper_context": "native", "gpus_per_job": 1, **over}
    kind = cls if contract == "own" else type("WithContract", (cls,), {"CONTRACT": contract})
    return kind(StubConfig.from_dict(cfg))


@pytest.fixture(scope="module")
def base_contract():
    return contracts.load("dreamx")


def variant(base, writer: dict | None = None, **changes):
    """DreamX's contract with ``changes`` (and ``writer`` fields) replaced."""
    if writer is not None:
        changes["writer"] = dataclasses.replace(base.writer, **writer)
    return dataclasses.replace(base, **changes)


#: a contract whose writer has no rate flag, no post-processing and no log patterns (each test adds its own)
PLAIN_WRITER = {"fps": FPS, "fps_flag": None, "fps_env": None, "postprocess": (), "log_failures": (),
                "checkout_writes": (), "overlays": ()}


def plain(base, writer: dict | None = None, **changes):
    return variant(base, {**PLAIN_WRITER, **(writer or {})}, **changes)


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> Case:
    return two_tone_case(tmp_path_factory.mktemp("case"), "a room")


def request(a: Stub, case: Case, item_dir: Path, frames: int = 3, context=NATIVE) -> ItemRequest:
    path = CameraPath(name="p", c2w=np.tile(np.eye(4), (frames, 1, 1)), K=a.canvas_K(case), fps=FPS, height=H,
                      width=W, phases={"V": (0, frames)})
    return ItemRequest(case=case, path=path, context=context, seed=1, item_dir=item_dir)


# ==================================================================================================================
# root_cause and UpstreamRunError
# ==================================================================================================================


def test_the_exception_line_of_the_first_traceback_wins_over_an_earlier_bare_error_line():
    log = "UserWarning: early\nTraceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'seed'\n"
    assert root_cause(log) == "KeyError: 'seed'"


def test_a_plain_line_inside_a_traceback_is_passed_over():
    log = ("UserWarning: early\nTraceback (most recent call last):\n  File \"x.py\", line 1\nsome plain text\n"
           "KeyError: 'seed'\n")
    assert root_cause(log) == "KeyError: 'seed'"


def test_an_indented_source_line_that_looks_like_an_exception_is_not_the_cause():
    log = ("Traceback (most recent call last):\n  File \"x.py\", line 3\n    CustomError: in the source\n"
           "RuntimeError: the real one\n")
    assert root_cause(log) == "RuntimeError: the real one"


def test_an_indented_source_line_under_a_rank_prefix_is_not_the_cause_either():
    log = ("[rank0]: Traceback (most recent call last):\n[rank0]:   File \"x.py\", line 3\n"
           "[rank0]:     CustomError: in the source\n[rank0]: RuntimeError: the real one\n")
    assert root_cause(log) == "RuntimeError: the real one"


def test_a_wrapper_traceback_ends_the_traceback_and_a_later_one_is_read():
    log = ("Traceback (most recent call last):\n  File \"run\", line 8\nChildFailedError: rank 0 failed\n"
           "Traceback (most recent call last):\n  File \"x.py\", line 2\nValueError: bad shape\n")
    assert root_cause(log) == "ValueError: bad shape"


def test_a_bare_error_line_after_a_wrapper_traceback_is_not_read_as_its_cause():
    log = ("UserWarning: early\nTraceback (most recent call last):\n  File \"run\", line 8\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\nKeyError: later\n")
    assert root_cause(log) == "UserWarning: early"


@pytest.mark.parametrize("log", ["ChildFailedError: rank 0 failed\n",
                                 "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: x\nKilled\n",
                                 "Killed\n", ""])
def test_a_log_with_only_wrapper_errors_or_no_exception_has_no_root_cause(log):
    assert root_cause(log) is None


def test_a_bare_error_line_without_a_traceback_is_the_cause_and_loses_its_rank_prefix():
    assert root_cause("starting\n[rank3]: OSError: disk full\n") == "OSError: disk full"


def test_a_run_error_keeps_its_message_root_cause_and_meta():
    e = UpstreamRunError("m: it failed", root_cause="KeyError: x", meta={"a": 1})
    assert str(e) == "m: it failed" and e.root_cause == "KeyError: x" and e.meta == {"a": 1}
    bare = UpstreamRunError("plain")
    assert bare.root_cause is None and bare.meta is None
    positional = UpstreamRunError("m: it failed", "KeyError: x")
    assert str(positional) == "m: it failed" and positional.args == ("m: it failed",)


# ==================================================================================================================
# UpstreamConfig
# ==================================================================================================================


def test_the_shared_launch_defaults():
    c = stub().config
    assert (c.timeout_s, c.sampling_steps, c.vae_worker_gpus, c.fps_tolerance, c.first_frame_min_ncc) == (
        14400.0, 4, 0, 0.05, 0.6)
    assert (c.launch, c.env, c.env_plain, c.conformance_warn) == ("torchrun", {}, (), ())


def test_a_short_commit_is_refused_naming_the_repository_and_the_full_commit_passes():
    with pytest.raises(ModelConfigError) as e:
        stub(upstream_commit="0123456", upstream_repo="org/repo")
    assert str(e.value) == ("model.upstream_commit='0123456': give the full 40-hex commit of org/repo (folders go in "
                            "model.upstream_subdir)")
    with pytest.raises(ModelConfigError, match="of the upstream repository"):
        stub(upstream_commit="0123456")
    assert stub(upstream_commit=COMMIT).config.upstream_commit == COMMIT
    assert stub(upstream_commit="").config.upstream_commit == ""


@pytest.mark.parametrize("gpus, vae, ok", [(2, 1, True), (2, 2, False), (2, -1, False), (1, 1, False), (1, 0, True),
                                           (0, 0, True), (0, 1, False)])
def test_the_vae_worker_must_leave_a_torchrun_rank(gpus, vae, ok):
    if ok:
        assert stub(gpus_per_job=gpus, vae_worker_gpus=vae).config.vae_worker_gpus == vae
    else:
        with pytest.raises(ModelConfigError) as e:
            stub(gpus_per_job=gpus, vae_worker_gpus=vae)
        assert str(e.value) == (f"model.vae_worker_gpus={vae}: must leave at least one torchrun rank of "
                                f"model.gpus_per_job={gpus}")


def test_conformance_warn_takes_only_check_names():
    assert stub(conformance_warn=("fps", "overlay")).config.conformance_warn == ("fps", "overlay")
    with pytest.raises(ModelConfigError) as e:
        stub(conformance_warn=("fps", "speed"))
    assert str(e.value) == ("model.conformance_warn: 'speed' is not a check; use some of "
                            "['fps', 'frames', 'resolution', 'first_frame', 'overlay']")


@pytest.mark.parametrize("gpus, vae, ranks", [(4, 1, 3), (4, 0, 4), (1, 0, 1), (0, 0, 1)])
def test_ranks_are_the_gpus_less_the_vae_worker_and_at_least_one(gpus, vae, ranks):
    assert stub(gpus_per_job=gpus, vae_worker_gpus=vae).config.ranks == ranks


# ==================================================================================================================
# the Hugging Face cache and listed files
# ==================================================================================================================


def test_the_hub_cache_follows_hf_hub_cache_then_hf_home_then_xdg_then_home():
    home = os.path.expanduser("~")
    assert hf_cache_dir({"HF_HUB_CACHE": "~/hc", "HF_HOME": "/h"}) == Path(home) / "hc"
    assert hf_cache_dir({"HF_HUB_CACHE": "", "HF_HOME": "~/h", "XDG_CACHE_HOME": "/x"}) == Path(home) / "h" / "hub"
    assert hf_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hf_cache_dir({}) == Path(home) / ".cache" / "huggingface" / "hub"


def _snapshots(root: Path, repo: str = "org/name") -> Path:
    d = root / f"models--{repo.replace('/', '--')}" / "snapshots"
    d.mkdir(parents=True)
    return d


def test_the_cache_holds_a_repo_only_with_a_file_in_a_snapshot(tmp_path):
    env = {"HF_HUB_CACHE": str(tmp_path)}
    assert not hf_cache_has("org/name", env)  # no snapshots folder
    snaps = _snapshots(tmp_path)
    assert not hf_cache_has("org/name", env)  # no snapshot
    (snaps / "abc" / "sub").mkdir(parents=True)
    assert not hf_cache_has("org/name", env)  # folders only
    (snaps / "abc" / "sub" / "config.json").write_text("{}")
    assert hf_cache_has("org/name", env)
    assert not hf_cache_has("org/other", env)


def test_a_snapshot_of_symlinks_counts_even_when_the_blob_is_gone(tmp_path):
    snaps = _snapshots(tmp_path)
    (snaps / "abc").mkdir()
    (snaps / "abc" / "model.bin").symlink_to(tmp_path / "blobs" / "gone")
    assert hf_cache_has("org/name", {"HF_HUB_CACHE": str(tmp_path)})


def test_missing_files_names_the_paths_and_patterns_with_nothing_at_them(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"0")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x-1.json").write_text("{}")
    files = ("a.bin", "b.bin", "sub/x-*.json", "*.safetensors", "sub")
    assert missing_files(tmp_path, files) == ["b.bin", "*.safetensors"]
    assert missing_files(tmp_path, ()) == []


# ==================================================================================================================
# building the adapter, context records and the contract's policies
# ==================================================================================================================


def test_an_upstream_model_is_not_shimmed_and_reads_the_canvas_unless_it_says_so():
    assert UpstreamAdapter.always_shimmed is False and UpstreamAdapter.uses_canvas_image is True
    assert UpstreamAdapter.contexts == ("native",)


def test_a_model_without_a_contract_file_has_none_and_one_with_it_loads_its_own():
    assert UpstreamAdapter.contract(stub()) is None
    assert stub().contract() is None
    assert UpstreamAdapter.contract(stub(name="dreamx", fps=16)).model == "dreamx"


def test_a_fixed_upstream_rate_must_be_model_fps(base_contract):
    c = plain(base_contract, {"fps": 16.0}, raw={"writer": {"fps_source": "writer.py:12; the default"}})
    with pytest.raises(ModelConfigError) as e:
        stub(c)
    assert str(e.value) == ("model.fps=8: upstream writes 16 fps for stubmodel (adapters/stubmodel/contract.yaml "
                            "writer.fps; writer.py:12); set fps: 16 in conf/model/stubmodel.yaml")
    assert stub(plain(base_contract, {"fps": 8.0})).config.fps == 8
    with pytest.raises(ModelConfigError, match="upstream writes 8.5 fps"):
        stub(plain(base_contract, {"fps": 8.5}))


def test_the_rate_check_allows_a_difference_of_exactly_1e_9(base_contract):
    assert stub(plain(base_contract, {"fps": 1e-9}), fps=2e-9).config.fps == 2e-9


@pytest.mark.parametrize("writer", [{"fps_flag": "--fps"}, {"fps_env": "FPS"}])
def test_a_rate_upstream_takes_from_the_launch_is_not_checked_at_build(base_contract, writer):
    assert stub(plain(base_contract, {"fps": 16.0, **writer})).config.fps == 8


def test_native_tells_upstream_nothing_and_another_policy_must_be_overridden():
    a = stub()
    assert a.told_upstream(NATIVE) == {"passed": "nothing: upstream's own memory at its defaults"}
    with pytest.raises(ModelConfigError) as e:
        a.told_upstream(FULLKV)
    assert str(e.value) == ("Stub declares context=fullkv but does not say what upstream is told for it (override "
                            "told_upstream)")


def _caveat(what: str, policies: tuple[str, ...] = ()) -> RegimeCaveat:
    return RegimeCaveat(kind="window", what=what, upstream="u", ours="o", source="s.py:1", policies=policies)


class _TellsAll(Stub):
    def told_upstream(self, policy):
        return {"policy": policy.name}


def test_the_context_record_lists_the_caveats_of_its_policy(base_contract):
    c = plain(base_contract, trained_regime=(_caveat("all"), _caveat("full only", ("fullkv",)),
                                             _caveat("sliding only", ("sliding",))))
    a = stub(c, cls=_TellsAll)
    assert a.context_told(FULLKV) == {"policy": "fullkv", "told": {"policy": "fullkv"},
                                      "trained_regime": ["all: upstream u; here o (s.py:1)",
                                                         "full only: upstream u; here o (s.py:1)"]}
    assert a.context_told(NATIVE)["trained_regime"] == ["all: upstream u; here o (s.py:1)"]


def test_no_caveat_no_trained_regime_key(base_contract):
    assert stub().context_told(NATIVE) == {"policy": "native", "told": {
        "passed": "nothing: upstream's own memory at its defaults"}}
    only_sliding = plain(base_contract, trained_regime=(_caveat("x", ("sliding",)),))
    assert "trained_regime" not in stub(only_sliding).context_told(NATIVE)


class _Declares(Stub):
    same_launch: ClassVar = {"fullkv": ("native", "declared in code")}


def test_identities_come_from_the_contract_when_the_config_sets_their_switch(base_contract):
    sl = (SameLaunch(policy="fullkv", same_as="native", why="one window", source="r@1 a.py:3"),
          SameLaunch(policy="sliding", same_as="native", why="refined", source="r@1 b.py:4", when="refine"),
          SameLaunch(policy="fov", same_as="native", why="never", source="r@1 c.py:5", when="no_such_field"))
    c = plain(base_contract, policies=Policies(native=NativeLaunch(source="s"), same_launch=sl))
    assert stub(c).same_launches() == {"fullkv": ("native", "one window (r@1 a.py:3)")}
    assert stub(c, refine=True).same_launches() == {"fullkv": ("native", "one window (r@1 a.py:3)"),
                                                     "sliding": ("native", "refined (r@1 b.py:4)")}


def test_without_a_contract_or_its_policies_the_identities_are_the_classes(base_contract):
    assert stub(cls=_Declares).same_launches() == {"fullkv": ("native", "declared in code")}
    assert stub(plain(base_contract, policies=None), cls=_Declares).same_launches() == {
        "fullkv": ("native", "declared in code")}
    assert stub(plain(base_contract, policies=None)).native_args() == []
    assert stub().native_args() == []


def test_native_args_are_the_documented_flags_in_order_a_switch_without_value(base_contract):
    native = NativeLaunch(source="s", args={"--window": "18", "--causal": "", "--sink": "6"},
                          knobs={"--window": "-1", "--causal": None, "--sink": "0"})
    assert stub(plain(base_contract, policies=Policies(native=native))).native_args() == [
        "--window", "18", "--causal", "--sink", "6"]


# ==================================================================================================================
# compile
# ==================================================================================================================


def test_compile_writes_the_canvas_prompt_and_an_executable_command(case, tmp_path):
    a = stub()
    c = a.compile(request(a, case, tmp_path / "item"))
    d = tmp_path / "item" / "controls"
    assert c.files == {"poses.txt": str(d / "poses.txt"), "image.png": str(d / "image.png"),
                       "prompt.txt": str(d / "prompt.txt"), "command.sh": str(d / "command.sh")}
    assert (d / "prompt.txt").read_text() == "a room\n"
    png = cv2.imread(str(d / "image.png"))
    assert png.shape == (H, W, 3)
    np.testing.assert_array_equal(png[..., ::-1], a.canvas_image_and_K(case)[0])
    assert (d / "command.sh").read_text() == c.command and c.command.startswith("#!/usr/bin/env bash\n")
    assert (d / "command.sh").stat().st_mode & 0o777 == file_mode(executable=True)
    assert c.meta == {"context": {"policy": "native", "told": {"passed": "nothing: upstream's own memory at its "
                                                                        "defaults"}},
                      "translation_scale": a.config.translation_scale.to_dict(),
                      "upstream": {"repo": "", "commit": ""}}


def test_compile_again_into_the_same_item_rewrites_it(case, tmp_path):
    a = stub(upstream_repo="org/repo", upstream_commit=COMMIT)
    a.compile(request(a, case, tmp_path / "item"))
    c = a.compile(request(a, case, tmp_path / "item"))
    assert c.meta["upstream"] == {"repo": "org/repo", "commit": COMMIT}


def test_the_prompt_is_written_byte_for_byte(case, tmp_path):
    a = stub()
    wordy = case.model_copy(update={"prompt": "see https://user:pw1234567@example.com/x?token=abc&k=1"})
    a.compile(request(a, wordy, tmp_path / "item"))
    assert (tmp_path / "item" / "controls" / "prompt.txt").read_text() == wordy.prompt + "\n"


def test_the_canvas_is_handed_to_write_native_unless_the_model_reads_no_image(case, tmp_path):
    a = stub()
    a.compile(request(a, case, tmp_path / "a"))
    np.testing.assert_array_equal(a.images[0], a.canvas_image_and_K(case)[0])

    class NoImage(Stub):
        uses_canvas_image = False

    b = stub(cls=NoImage)
    b.compile(request(b, case, tmp_path / "b"))
    assert b.images == [None] and (tmp_path / "b" / "controls" / "image.png").is_file()


def test_the_decoded_path_is_decode_s_unless_write_native_gave_one(case, tmp_path):
    a = stub()
    req = request(a, case, tmp_path / "a")
    np.testing.assert_array_equal(a.compile(req).decoded_c2w, np.asarray(req.path.c2w) * 2)
    a.decoded = np.zeros((3, 4, 4))
    np.testing.assert_array_equal(a.compile(request(a, case, tmp_path / "b")).decoded_c2w, np.zeros((3, 4, 4)))


def test_a_second_canvas_of_the_same_image_is_copied_from_the_first(case, tmp_path):
    """The canvas is encoded once per process and image: a later item gets a copy of the first file (shown by
    changing the first file's bytes while keeping its size and mtime)."""
    img = tmp_path / "own.png"
    pixels = np.zeros((64, 96, 3), np.uint8)
    pixels[:, :40] = 255
    cv2.imwrite(str(img), pixels)
    own = case.model_copy(update={"image": str(img)})
    a = stub()
    a.write_canvas(tmp_path / "first.png", own)
    first = tmp_path / "first.png"
    st = first.stat()
    first.write_bytes(b"x" * st.st_size)
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns))
    a.write_canvas(tmp_path / "second.png", own)
    assert (tmp_path / "second.png").read_bytes() == b"x" * st.st_size


def test_a_launch_that_breaks_the_contract_is_never_written(base_contract, case, tmp_path):
    c = plain(base_contract, {"fps_flag": "--fps"})
    a = stub(c)
    with pytest.raises(ModelConfigError) as e:
        a.compile(request(a, case, tmp_path / "item"))
    assert str(e.value) == ("stubmodel: the launch breaks adapters/stubmodel/contract.yaml:\n"
                            "  - upstream writes at --fps: pass --fps 8 (model.fps)")
    assert not (tmp_path / "item" / "controls" / "command.sh").exists()
    a.spec = LaunchSpec(script="run.py", args=["--fps", "8"])
    assert a.compile(request(a, case, tmp_path / "item")).files["command.sh"]


def test_compile_records_the_alignment_of_a_kept_anchor_and_no_fov_when_k_reaches_the_model(base_contract, case,
                                                                                            tmp_path):
    c = plain(base_contract, {"first_pose": 0, "anchor_frame": "kept"},
              intrinsics=Intrinsics(reads_case_K=True, rule="r", source="s"))
    a = stub(c)
    meta = a.compile(request(a, case, tmp_path / "item")).meta
    assert meta["alignment"] == {"anchor_frame": "kept", "first_pose": 0,
                                 "rule": "item frame i = pose i; upstream's frames are brought in as written"}
    assert "intrinsics" not in meta and "intrinsics_residual" not in meta


def test_compile_records_a_dropped_anchor_and_the_fov_error_where_k_never_reaches_the_model(base_contract, case,
                                                                                           tmp_path):
    c = plain(base_contract, {"first_pose": 1, "anchor_frame": "dropped"},
              intrinsics=Intrinsics(reads_case_K=False, rule="r", source="gen.py:9", model_fov_deg=(90.0, 50.0)))
    a = stub(c)
    meta = a.compile(request(a, case, tmp_path / "item")).meta
    assert meta["alignment"] == {"anchor_frame": "dropped", "first_pose": 1,
                                 "rule": "upstream's frame i shows pose i + 1; the conditioning canvas is put in "
                                         "front as frame 0, so item frame i = pose i"}
    hfov, vfov = fov_from_intrinsics(a.canvas_K(case), W, H)
    assert hfov == pytest.approx(60.0) and vfov == pytest.approx(42.1034, abs=1e-3)  # 2 atan(16 tan(30 deg) / 24)
    assert meta["intrinsics"] == {"case_fov_deg": [hfov, vfov], "model_fov_deg": [90.0, 50.0],
                                  "caveat": "the case's K does not reach the model (gen.py:9)"}
    assert meta["intrinsics_residual"] == {"hfov_error_deg": pytest.approx(30.0),
                                           "vfov_error_deg": pytest.approx(50.0 - vfov)}


def test_a_model_without_a_contract_records_no_alignment(case, tmp_path):
    a = stub()
    assert "alignment" not in a.compile(request(a, case, tmp_path / "item")).meta


# ==================================================================================================================
# the contract's launch checks
# ==================================================================================================================


def test_no_contract_no_problems():
    assert stub().contract_problems(LaunchSpec(script="x", args=[]), {}) == []


@pytest.mark.parametrize("args, ok", [(["--fps", "8", "--n", "5"], True), (["--fps", "8.0"], True),
                                      (["--fps", "8.5", "--n", "8"], False), (["--n", "8"], False),
                                      (["--fps", "16", "--n", "8"], False)])
def test_a_rate_flag_must_carry_model_fps(base_contract, args, ok):
    a = stub(plain(base_contract, {"fps_flag": "--fps", "fps": 16.0}))
    want = [] if ok else ["upstream writes at --fps: pass --fps 8 (model.fps)"]
    assert a.contract_problems(LaunchSpec(script="x", args=args), {}) == want


def test_a_rate_flag_value_exactly_1e_9_off_passes(base_contract):
    a = stub(plain(base_contract, {"fps_flag": "--fps"}), fps=1e-9)
    assert a.contract_problems(LaunchSpec(script="x", args=["--fps", "2e-09"]), {}) == []


@pytest.mark.parametrize("env, ok", [({"FPS": "8"}, True), ({"FPS": "8.5"}, False), ({"FPS": "16"}, False),
                                     ({}, False)])  # not exported: upstream's own default rate
def test_a_rate_variable_must_carry_model_fps(base_contract, env, ok):
    a = stub(plain(base_contract, {"fps_env": "FPS", "fps": 16.0}))
    want = [] if ok else ["upstream writes at $FPS: export FPS=8 (model.fps)"]
    assert a.contract_problems(LaunchSpec(script="x", args=[]), env) == want


def test_a_rate_variable_exactly_1e_9_off_passes(base_contract):
    a = stub(plain(base_contract, {"fps_env": "FPS"}), fps=1e-9)
    assert a.contract_problems(LaunchSpec(script="x", args=[]), {"FPS": "2e-09"}) == []


def test_a_checkout_write_with_a_redirect_flag_needs_the_flag(base_contract):
    writes = (CheckoutWrite(path="output", source="gen.py:7", redirect_flag="--save_dir"),
              CheckoutWrite(path=".cache", source="gen.py:8"))
    a = stub(plain(base_contract, {"checkout_writes": writes}))
    assert a.contract_problems(LaunchSpec(script="x", args=[]), {}) == [
        "upstream writes 'output' into the checkout (gen.py:7): pass --save_dir"]
    assert a.contract_problems(LaunchSpec(script="x", args=["--save_dir", "/o"]), {}) == []


@pytest.mark.parametrize("args, ok", [(["--cc", "1", "--n", "5"], True), (["--n", "5", "--cc", "1.0"], True),
                                      (["--cc", "0.5", "--n", "1"], False), (["--n", "1"], False),
                                      (["--n", "1", "--cc"], False)])
def test_a_post_processing_flag_must_carry_our_value(base_contract, args, ok):
    pp = PostProcess(name="colour correction", what="w", source="inf.py:4", flag="--cc", ours="1.0",
                     upstream_default="0.0")
    a = stub(plain(base_contract, {"postprocess": (pp,)}))
    want = [] if ok else ["colour correction: pass --cc 1.0 explicitly (upstream's parser default is 0.0; inf.py:4)"]
    assert a.contract_problems(LaunchSpec(script="x", args=args), {}) == want


def test_the_overlay_and_hub_checks_are_added(base_contract):
    hub = HubFetch(repo="org/enc", what="encoder", call="c", source="s.py:1", avoided_by={"flag": "--enc"})
    a = stub(plain(base_contract, hub_fetches=(hub,)))
    probs = a.contract_problems(LaunchSpec(script="x", args=[]), {})
    assert probs == contracts.hub_fetch_violations(a.contract(), []) and probs
    assert a.contract_problems(LaunchSpec(script="x", args=["--enc", "/e"]), {}) == []


# ==================================================================================================================
# the command: python, devices, environment, argv, command.sh
# ==================================================================================================================


def test_the_python_is_the_configured_one_or_python():
    assert stub()._python() == "python" and stub(python="/envs/m/bin/python")._python() == "/envs/m/bin/python"


def test_devices_are_the_pools_then_the_configs_then_the_first_gpus():
    assert stub(gpus_per_job=2)._devices() == "0,1"
    assert stub(gpus_per_job=1)._devices() == "0"
    assert stub(gpus_per_job=0)._devices() == "0"
    assert stub(gpus_per_job=2, devices="4,5")._devices() == "4,5"
    with gpu_pool.assigned(["3", "5"]):
        assert stub(gpus_per_job=2, devices="4,5")._devices() == "3,5"


def test_the_hub_goes_offline_when_a_fetch_is_served_from_the_cache(base_contract):
    offline = HubFetch(repo="org/a", what="a", call="c", source="s", avoided_by={"offline_cache": True})
    flag = HubFetch(repo="org/b", what="b", call="c", source="s", avoided_by={"flag": "--b"})
    assert stub(plain(base_contract, hub_fetches=(flag, offline))).contract_env() == {"HF_HUB_OFFLINE": "1"}
    assert stub(plain(base_contract, hub_fetches=(flag,))).contract_env() == {}
    assert stub().contract_env() == {}


def test_torchrun_runs_the_ranks_and_the_environment_layers_in_order(base_contract):
    offline = HubFetch(repo="org/a", what="a", call="c", source="s", avoided_by={"offline_cache": True})
    a = stub(plain(base_contract, hub_fetches=(offline,)), gpus_per_job=3, vae_worker_gpus=1, python="py",
             env={"NUM": 98765, "ON": True, "HF_HUB_OFFLINE": "0", "X": "cfg"})
    argv, env = a.command_argv(LaunchSpec(script="gen.py", args=["--n", "1"], env={"X": "spec"}))
    assert argv == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "gen.py", "--n", "1"]
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1,2", "HF_HUB_OFFLINE": "0", "NUM": "98765", "ON": "True", "X": "spec"}
    assert list(env) == ["CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "NUM", "ON", "X"]


def test_a_wrapper_runs_the_script_after_its_own_options():
    a = stub(launch="python")
    spec = LaunchSpec(script="gen.py", args=["--n", "1"], wrapper="/abs/runner.py", wrapper_args=["--seed", "3"])
    assert a.command_argv(spec)[0] == ["python", "/abs/runner.py", "--seed", "3", "--", "gen.py", "--n", "1"]
    assert a.command_argv(LaunchSpec(script="gen.py", args=["--n"]))[0] == ["python", "gen.py", "--n"]


def test_an_interpreter_replaces_the_python_prefix():
    a = stub(launch="torchrun")
    assert a.command_argv(LaunchSpec(script="run.sh", args=["a"], interpreter=["bash", "-e"]))[0] == [
        "bash", "-e", "run.sh", "a"]


def test_command_sh_is_the_launch_one_flag_a_line_secrets_as_references(tmp_path):
    a = stub(launch="python", upstream_dir=str(tmp_path / "co"), upstream_subdir="pkg", upstream_repo="org/repo",
             upstream_commit=COMMIT, env={"MODE": "fast", "MY_MODE": "v", "HF_TOKEN": "hf_abcdefghijk"},
             env_plain=("MODE",))
    argv, env = a.command_argv(LaunchSpec(script="run.py", args=["--shift", "-0.5", "--flag", "--n", "3", "x.sh",
                                                                  "a b"]))
    assert a.command_text(argv, env, LaunchSpec(script="run.py", args=[])) == (
        "#!/usr/bin/env bash\n"
        "# stubmodel: the exact upstream launch for this item (org/repo@0123456789ab/pkg). Generated by the harness; "
        "rerunnable by hand.\n"
        "set -euo pipefail\n"
        f"cd {tmp_path / 'co' / 'pkg'}\n"
        "export CUDA_VISIBLE_DEVICES=0\n"
        'export HF_TOKEN="${HF_TOKEN:?set HF_TOKEN in your environment}"\n'
        "export MODE=fast\n"
        'export MY_MODE="${MY_MODE:?set MY_MODE in your environment}"\n'
        "python \\\n  run.py \\\n  --shift -0.5 \\\n  --flag \\\n  --n 3 \\\n  x.sh 'a b'\n")


def test_command_sh_without_a_checkout_or_subdir_says_where_to_set_it():
    a = stub(upstream_repo="org/repo", upstream_commit=COMMIT)
    text = a.command_text(["python", "a.py"], {}, LaunchSpec(script="a.py", args=[]))
    assert text.splitlines()[1:4] == [
        ("# stubmodel: the exact upstream launch for this item (org/repo@0123456789ab). Generated by the harness; "
         "rerunnable by hand."), "set -euo pipefail", "cd '<model.upstream_dir>'"]
    assert text.endswith("\npython \\\n  a.py\n")


def test_a_negative_number_stays_with_its_flag_and_a_dash_word_starts_a_line():
    text = stub().command_text(["python", "-1", "--a", "-2.5e3", "-b", "c"], {}, LaunchSpec(script="x", args=[]))
    assert text.endswith("\npython -1 \\\n  --a -2.5e3 \\\n  -b c\n")


def test_workdir_is_the_checkout_or_its_subfolder(tmp_path):
    assert stub().workdir() is None
    assert stub(upstream_dir=str(tmp_path)).workdir() == str(tmp_path)
    assert stub(upstream_dir=str(tmp_path), upstream_subdir="a/b").workdir() == str(tmp_path / "a" / "b")


def test_checkpoint_paths_and_the_launch_environment():
    a = stub(checkpoint="/w", env={"ZZ_STUB_RULE": "1"})
    assert a.checkpoint_paths() == {"checkpoint": "/w", "upstream_dir": None}
    env = a.launch_env()
    assert env["ZZ_STUB_RULE"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "0" and env.get("PATH") == os.environ.get(
        "PATH")


def test_small_helpers():
    assert stub().ckpt() == "<model.checkpoint>" and stub(checkpoint="/w").ckpt() == "/w"
    assert stub().output_hw() == (H, W)
    assert stub().shim_path("adapters/x/adapter.py") == str(Path("adapters/x").resolve() / "runner.py")
    assert stub().shim_path("adapters/x/adapter.py", "other.py") == str(Path("adapters/x").resolve() / "other.py")


# ==================================================================================================================
# readiness
# ==================================================================================================================


@pytest.fixture
def head(monkeypatch):
    """``git rev-parse HEAD`` of the checkout, stubbed: set ``head.value``."""

    class Head:
        value: str | None = None

    h = Head()
    monkeypatch.setattr(upstream, "_git_head", lambda path: h.value)
    return h


def test_the_checkout_head_is_git_s_answer_or_none(monkeypatch):
    calls = []

    def git(argv, **kw):
        calls.append((argv, kw))
        if argv[2] == "/broken":
            raise subprocess.TimeoutExpired(argv, 10)
        if argv[2] == "/nogit":
            raise OSError("no git")
        return subprocess.CompletedProcess(argv, 0 if argv[2] == "/repo" else 128, stdout=f"{COMMIT}\n", stderr="")

    monkeypatch.setattr(upstream.subprocess, "run", git)
    assert upstream._git_head("/repo") == COMMIT
    assert calls[0] == (["git", "-C", "/repo", "rev-parse", "HEAD"], {"capture_output": True, "text": True,
                                                                       "timeout": 10})
    assert upstream._git_head("/plain") is None  # not a repository: git exits 128
    assert upstream._git_head("/broken") is None and upstream._git_head("/nogit") is None


class _NoProbe(Stub):
    """Records the probe instead of running the model's Python."""

    probed: list

    def probe_environment(self, imports):
        self.probed = [*getattr(self, "probed", []), list(imports)]
        return []


def test_an_unset_checkout_says_how_to_get_it():
    a = stub(upstream_repo="org/repo extra", upstream_commit=COMMIT)
    assert a.readiness(probe=False) == [upstream.Finding(
        "error", "model.upstream_dir", "not set for stubmodel: python -m harness setup model=stubmodel (clones "
        f"https://github.com/org/repo at {COMMIT}), or clone it yourself and set local.models.stubmodel.upstream_dir "
        "in conf/local/default.yaml (docs/real-models.md)")]


def test_a_checkout_that_does_not_exist_is_the_only_finding(tmp_path):
    gone = str(tmp_path / "gone")
    assert stub(upstream_dir=gone).readiness(probe=False) == [upstream.Finding(
        "error", "model.upstream_dir", f"{gone!r} does not exist; point it at the checkout")]


def test_a_missing_subdir_and_an_unset_checkpoint_are_named(tmp_path, head):
    a = stub(upstream_dir=str(tmp_path), upstream_subdir="pkg", weights_hint="get them from X.")
    assert a.readiness(probe=False) == [
        upstream.Finding("error", "model.upstream_subdir", f"{str(tmp_path / 'pkg')!r} does not exist in the checkout"),
        upstream.Finding("error", "model.checkpoint", "not set for stubmodel. get them from X. Set "
                         "local.models.stubmodel.checkpoint (or run python -m harness setup model=stubmodel)")]


def test_without_a_hint_the_messages_have_none(tmp_path, head):
    (f,) = stub(upstream_dir=str(tmp_path)).readiness(probe=False)
    assert f.message == ("not set for stubmodel. Set local.models.stubmodel.checkpoint (or run python -m harness "
                         "setup model=stubmodel)")
    (f,) = stub(upstream_dir=str(tmp_path), checkpoint=str(tmp_path / "w")).readiness(probe=False)
    assert f == upstream.Finding("error", "model.checkpoint", f"{str(tmp_path / 'w')!r} does not exist.")


def test_a_checkout_at_another_commit_warns_and_the_same_or_an_unknown_one_does_not(tmp_path, head):
    a = stub(upstream_dir=str(tmp_path), checkpoint=str(tmp_path), upstream_commit=COMMIT)
    head.value = "fedcba9876543210fedcba9876543210fedcba98"
    assert a.readiness(probe=False) == [upstream.Finding(
        "warning", "model.upstream_commit", "the checkout is at fedcba987654, the adapter and its contract were "
        f"checked against 0123456789ab: git -C {tmp_path} checkout {COMMIT}")]
    head.value = COMMIT
    assert a.readiness(probe=False) == []
    head.value = None
    assert a.readiness(probe=False) == []
    head.value = "fedcba9876543210fedcba9876543210fedcba98"
    assert stub(upstream_dir=str(tmp_path), checkpoint=str(tmp_path)).readiness(probe=False) == []


def test_the_probe_runs_only_when_asked_and_nothing_else_failed(tmp_path, head, base_contract):
    a = stub(cls=_NoProbe, upstream_dir=str(tmp_path), checkpoint=str(tmp_path), upstream_commit=COMMIT)
    head.value = "fedcba9876543210fedcba9876543210fedcba98"
    assert [f.level for f in a.readiness()] == ["warning"] and a.probed == [[]]  # probe=True by default
    a.readiness(probe=False)
    assert a.probed == [[]]
    b = stub(cls=_NoProbe, upstream_dir=str(tmp_path), checkpoint=str(tmp_path / "gone"), upstream_commit=COMMIT)
    assert [f.level for f in b.readiness()] == ["warning", "error"] and not hasattr(b, "probed")
    probe = ImportProbe(module="pkg")
    c = plain(base_contract, imports=(probe,), checkpoint=(), hub_fetches=())
    d = stub(c, cls=_NoProbe, upstream_dir=str(tmp_path))
    assert d.readiness() == [] and d.probed == [[probe]]


def test_a_python_that_is_not_an_executable_stops_readiness_before_the_probe(tmp_path, head):
    not_exec = tmp_path / "python"
    not_exec.write_text("")
    not_exec.chmod(0o644)
    ok = {"cls": _NoProbe, "upstream_dir": str(tmp_path), "checkpoint": str(tmp_path)}
    a = stub(**ok, python=str(tmp_path / "nope"))
    assert a.readiness() == [upstream.Finding("error", "model.python", f"{str(tmp_path / 'nope')!r} is not an "
                                              "executable; point it at the model's env")]
    assert not hasattr(a, "probed")
    for python in (str(not_exec), "sh"):  # a file that exists, or a name on PATH
        b = stub(**ok, python=python)
        assert b.readiness() == [] and b.probed == [[]]


def _entries(*entries: CheckpointEntry):
    return tuple(entries)


def test_each_checkpoint_entry_is_checked_by_kind_suffix_and_files(tmp_path, head, base_contract):
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"0")
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"0")
    entries = _entries(
        CheckpointEntry(key="checkpoint", kind="file", source="load.py:1", suffix=".safetensors"),
        CheckpointEntry(key="upstream_dir", kind="dir", source="load.py:2", files=("a.bin", "b.bin", "sub/*.json")),
        CheckpointEntry(key="extra_dir", kind="file", source="load.py:3"))
    a = stub(plain(base_contract, checkpoint=entries, hub_fetches=()), upstream_dir=str(folder),
             checkpoint=str(weights), extra_dir=str(folder), weights_hint="hint.")
    assert a.readiness(probe=False) == [
        upstream.Finding("error", "model.checkpoint", f"{str(weights)!r} must be a .safetensors file (load.py:1)"),
        upstream.Finding("error", "model.upstream_dir", f"{folder} lacks b.bin, sub/*.json, which upstream loads "
                         "(load.py:2). hint."),
        upstream.Finding("error", "model.extra_dir", f"{str(folder)!r} must be a file, not a folder (load.py:3)")]


def test_a_dir_entry_must_be_a_folder_and_a_path_entry_may_be_either(tmp_path, head, base_contract):
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"0")
    entries = _entries(CheckpointEntry(key="checkpoint", kind="dir", source="l.py:1", suffix=".safetensors"),
                       CheckpointEntry(key="extra_dir", kind="path", source="l.py:2", suffix=".safetensors"))
    a = stub(plain(base_contract, checkpoint=entries, hub_fetches=()), upstream_dir=str(tmp_path),
             checkpoint=str(f), extra_dir=str(tmp_path))
    assert a.readiness(probe=False) == [upstream.Finding("error", "model.checkpoint",
                                                         f"{str(f)!r} must be a folder (l.py:1)")]
    any_name = _entries(CheckpointEntry(key="checkpoint", kind="file", source="l.py:3"))  # a file of any name
    assert stub(plain(base_contract, checkpoint=any_name, hub_fetches=()), upstream_dir=str(tmp_path),
                checkpoint=str(f)).readiness(probe=False) == []


def test_an_entry_with_when_is_checked_only_with_its_switch_on(tmp_path, head, base_contract):
    entries = _entries(CheckpointEntry(key="extra_dir", kind="dir", source="l.py:1", when="refine"),
                       CheckpointEntry(key="checkpoint", kind="dir", source="l.py:2", when="no_such_field"))
    c = plain(base_contract, checkpoint=entries, hub_fetches=())
    assert stub(c, upstream_dir=str(tmp_path)).readiness(probe=False) == []
    (f,) = stub(c, upstream_dir=str(tmp_path), refine=True).readiness(probe=False)
    assert f.key == "model.extra_dir" and f.message.startswith("not set for stubmodel.")


def test_a_checkout_upstream_writes_into_must_be_writable_unless_redirected(tmp_path, head, base_contract,
                                                                            monkeypatch):
    writes = (CheckoutWrite(path="out", source="g.py:1"), CheckoutWrite(path="cache", source="g.py:2",
                                                                        redirect_flag="--cache"))
    c = plain(base_contract, {"checkout_writes": writes}, checkpoint=(), hub_fetches=())
    a = stub(c, upstream_dir=str(tmp_path))
    assert a.readiness(probe=False) == []
    monkeypatch.setattr(upstream.os, "access", lambda path, mode: False)
    assert a.readiness(probe=False) == [upstream.Finding(
        "error", "model.upstream_dir", f"upstream writes 'out' inside the checkout (g.py:1) but {tmp_path} is not "
        "writable")]
    # no checkout, or one that is not a folder: nothing to say here (readiness names it before)
    assert stub(c)._checkout_and_hub_findings(c, []) == []
    assert stub(c, upstream_dir=str(tmp_path / "gone"))._checkout_and_hub_findings(c, []) == []


def _hub(kind: str, value, repo: str = "org/enc") -> HubFetch:
    return HubFetch(repo=repo, what="the encoder", call="c", source="enc.py:5", avoided_by={kind: value},
                    fix="run setup")


def test_a_fetch_served_from_the_cache_needs_the_repo_in_the_cache(tmp_path, head, base_contract):
    c = plain(base_contract, checkpoint=(), hub_fetches=(_hub("import", "enc"), _hub("offline_cache", True)))
    cache = tmp_path / "hf"
    a = stub(c, upstream_dir=str(tmp_path), env={"HF_HUB_CACHE": str(cache)})
    assert a.readiness(probe=False) == [upstream.Finding(
        "error", "model.env", "org/enc (the encoder) is downloaded from the Hugging Face hub at run time (enc.py:5) "
        f"and is not in the cache {cache}: run setup")]
    snaps = _snapshots(cache, "org/enc")
    (snaps / "abc").mkdir()
    (snaps / "abc" / "config.json").write_text("{}")
    assert a.readiness(probe=False) == []


def test_a_fetch_avoided_by_a_local_file_needs_the_file(tmp_path, head, base_contract):
    ckpt, extra = tmp_path / "ckpt", tmp_path / "extra"
    ckpt.mkdir()
    extra.mkdir()
    c = plain(base_contract, checkpoint=(), hub_fetches=(
        _hub("import", "enc"), _hub("file", ["checkpoint", "enc/model.bin"]),
        _hub("file", ["extra_dir", "x.bin"], "org/x"), _hub("file", ["upstream_dir", "y.bin"], "org/y")))
    a = stub(c, upstream_dir=None, checkpoint=str(ckpt), extra_dir=str(extra))
    assert a._checkout_and_hub_findings(c, []) == [
        upstream.Finding("error", "model.checkpoint", f"{ckpt / 'enc' / 'model.bin'} is missing, so upstream would "
                         "download org/enc at run time (enc.py:5): run setup"),
        upstream.Finding("error", "model.extra_dir", f"{extra / 'x.bin'} is missing, so upstream would download "
                         "org/x at run time (enc.py:5): run setup")]
    flagged = [upstream.Finding("error", "model.checkpoint", "not set")]
    assert [f.key for f in a._checkout_and_hub_findings(c, flagged)] == ["model.extra_dir"]
    (ckpt / "enc").mkdir()
    (ckpt / "enc" / "model.bin").write_bytes(b"0")
    (extra / "x.bin").write_bytes(b"0")
    assert a._checkout_and_hub_findings(c, []) == []


# -- the import probe (the model's Python stubbed) -------------------------------------------------------------------


def test_the_probe_puts_the_scripts_folder_then_the_shims_cwd_then_upstreams_own_folders_first(tmp_path,
                                                                                               base_contract):
    co = tmp_path / "co"
    a = stub(plain(base_contract, sys_path=["lib", "."]), upstream_dir=str(co), upstream_subdir="pkg")
    assert a.probe_sys_path("scripts/run.py", False) == [str(co), str(co / "lib"), str(co / "pkg" / "scripts")]
    assert a.probe_sys_path("run.py", True) == [str(co), str(co / "lib"), str(co / "pkg"), str(co / "pkg")]
    b = stub()
    assert b.probe_sys_path("s/run.py", True) == [os.path.abspath("s"), os.path.abspath(".")]
    no_checkout = stub(plain(base_contract, sys_path=["lib"]))  # upstream's folders relative to the working folder
    assert no_checkout.probe_sys_path("run.py", False) == [os.path.abspath("lib"), os.path.abspath(".")]


class _Proc:
    def __init__(self, stdout: str = "", stderr: str = ""):
        self.stdout, self.stderr, self.returncode = stdout, stderr, 0


@pytest.fixture
def python_run(monkeypatch):
    """The model's Python, stubbed: it answers ``python_run.out`` (a dict printed as the probe line, or raw text)
    and records each call."""

    @dataclasses.dataclass
    class Run:
        out: object = dataclasses.field(default_factory=lambda: {"imports": {}, "gpus": 1, "skipped": []})
        stderr: str = ""
        calls: list = dataclasses.field(default_factory=list)
        raises: BaseException | None = None

    r = Run()

    def fake(argv, **kw):
        r.calls.append((argv, kw))
        if r.raises is not None:
            raise r.raises
        out = r.out if isinstance(r.out, str) else "HARNESS-PROBE " + json.dumps(r.out)
        return _Proc("noise\n" + out + "\n", r.stderr)

    monkeypatch.setattr(upstream.subprocess, "run", fake)
    return r


def test_the_probe_runs_the_models_python_in_the_checkout_with_the_launch_environment(tmp_path, base_contract,
                                                                                      python_run):
    c = plain(base_contract, entry={"script": "run.sh", "python_script": "gen.py"}, sys_path=[])
    a = stub(c, upstream_dir=str(tmp_path), python="/envs/py", env={"ZZ_STUB_RULE": "2"})
    assert a.probe_environment(["pkg", ImportProbe(module="cuda_pkg", needs_gpu=True)]) == []
    ((argv, kw),) = python_run.calls
    assert argv[:2] == ["/envs/py", "-c"] and kw["cwd"] == str(tmp_path) and kw["env"]["ZZ_STUB_RULE"] == "2"
    assert kw["capture_output"] is True and kw["text"] is True and kw["timeout"] == 600
    assert f"sys.path[0:1] = {[str(tmp_path)]!r}\n" in argv[2]
    assert "for m, gpu in [('pkg', False), ('cuda_pkg', True)]:\n" in argv[2]


def test_the_probe_names_the_script_it_imports_as(tmp_path, base_contract, python_run):
    python_run.out = {"imports": {"pkg": "ModuleNotFoundError: No module named 'pkg'", "ok": None}, "gpus": 1,
                      "skipped": ["cuda_pkg"]}
    for entry, script in (({"script": "run.sh", "python_script": "py/gen.py"}, "py/gen.py"),
                          ({"script": "run.py"}, "run.py"), ({}, None)):
        a = stub(plain(base_contract, entry=entry, sys_path=[]), upstream_dir=str(tmp_path))
        front = a.probe_sys_path(script or "-", False)
        assert a.probe_environment(["pkg"]) == [
            upstream.Finding("error", "model.python", f"`import pkg` fails in the model's environment the way "
                             f"{script} runs (sys.path {front}): ModuleNotFoundError: No module named 'pkg' (build "
                             "the env as docs/real-models.md says, or python -m harness setup model=stubmodel)"),
            upstream.Finding("warning", "model.python", "`import cuda_pkg` not probed: it needs a visible GPU")]
    assert stub(upstream_dir=str(tmp_path)).probe_environment([])[0].message.startswith(
        "`import pkg` fails in the model's environment the way - runs")


def test_the_probe_counts_gpus_only_for_a_gpu_model(tmp_path, python_run):
    python_run.out = {"imports": {}, "gpus": 0, "skipped": []}
    (f,) = stub(upstream_dir=str(tmp_path)).probe_environment([])
    assert f.key == "model.devices" and "sees 0" in f.message
    assert stub(upstream_dir=str(tmp_path), gpus_per_job=0).probe_environment([]) == []
    python_run.out = {"imports": {}, "gpus": None, "gpus_error": "ImportError: no torch", "skipped": []}
    (f,) = stub(upstream_dir=str(tmp_path), gpus_per_job=1).probe_environment([])
    assert f.message == "torch is not importable in the model's environment (ImportError: no torch)"


def test_a_python_that_prints_no_probe_line_is_named_with_its_error(tmp_path, python_run):
    python_run.out = "nothing"
    python_run.stderr = "boot\nTraceback (most recent call last):\n  File \"<string>\"\nSyntaxError: bad\n"
    a = stub(upstream_dir=str(tmp_path))
    assert a.probe_environment([]) == [upstream.Finding("error", "model.python",
                                                        f"python failed in {tmp_path}: SyntaxError: bad")]
    python_run.stderr = "x" * 10 + "y" * 300 + "\n"
    assert a.probe_environment([])[0].message == f"python failed in {tmp_path}: " + "y" * 300
    python_run.raises = OSError("no such file")
    assert a.probe_environment([]) == [upstream.Finding("error", "model.python", "cannot run 'python': no such file")]


# -- GPUs -----------------------------------------------------------------------------------------------------------


def test_a_gpu_count_below_one_job_is_named_with_the_devices_to_set():
    a = stub(gpus_per_job=2)
    assert a.check_gpu_count(2) == [] and a.check_gpu_count(3) == []
    assert a.check_gpu_count(1) == [upstream.Finding(
        "error", "model.devices", "stubmodel needs 2 GPU(s) per job but its environment sees 1 "
        "(CUDA_VISIBLE_DEVICES=0,1); set local.models.stubmodel.devices")]
    assert stub(gpus_per_job=1).check_gpu_count(1) == [] and stub(gpus_per_job=0).check_gpu_count(1) == []
    assert stub(gpus_per_job=0).check_gpu_count(0)[0].message.startswith("stubmodel needs 1 GPU(s) per job")
    assert stub(gpus_per_job=4).check_gpu_count(2)[0].key == "model.devices"
    assert "3 torchrun ranks + 1 VAE-worker GPU" in stub(gpus_per_job=4, vae_worker_gpus=1).check_gpu_count(3)[
        0].message


# ==================================================================================================================
# frames, rate and generate
# ==================================================================================================================


def test_frames_rate_and_first_pose_follow_the_writer(base_contract):
    dropped = plain(base_contract, {"fps": 16.0, "first_pose": 1, "anchor_frame": "dropped"})
    assert stub().upstream_frames(10) == 10 and stub().first_pose() == 0 and stub().expected_fps() == 8.0
    with pytest.raises(ModelConfigError):
        stub(dropped)  # a fixed rate other than model.fps
    a = stub(dropped, fps=16)
    assert a.upstream_frames(10) == 9 and a.first_pose() == 1 and a.expected_fps() == 16.0
    assert stub(plain(base_contract, {"fps": 16.0, "fps_flag": "--fps"})).expected_fps() == 8.0
    assert stub(plain(base_contract, {"fps": 16.0, "fps_env": "FPS"})).expected_fps() == 8.0


def _video(path: Path, frames: list[np.ndarray], fps: float) -> bytes:
    w = VideoWriter(path, fps=fps)
    for f in frames:
        w.write(f)
    w.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def videos(tmp_path_factory, case) -> dict[str, bytes]:
    """Upstream's files: the canvas repeated 3 or 2 times at 8 fps, at 4 fps, and at twice the canvas size."""
    d = tmp_path_factory.mktemp("videos")
    canvas = np.array(stub().canvas_image_and_K(case)[0])
    big = cv2.resize(canvas, (2 * W, 2 * H), interpolation=cv2.INTER_NEAREST)
    return {"3": _video(d / "a.mp4", [canvas] * 3, FPS), "2": _video(d / "b.mp4", [canvas] * 2, FPS),
            "slow": _video(d / "c.mp4", [canvas] * 3, 4.0), "big": _video(d / "d.mp4", [big] * 3, FPS)}


@pytest.fixture
def launch(monkeypatch):
    """Upstream's launch, stubbed: ``launch.video`` (bytes) goes to ``launch.where`` (a folder, default the item's
    ``upstream_out``), ``launch.log`` to the log, and it returns ``launch.rc``."""

    @dataclasses.dataclass
    class Launch:
        video: bytes | None = None
        where: Path | None = None
        log: str = "step 1/1\n"
        rc: int = 0
        timeout: bool = False
        calls: list = dataclasses.field(default_factory=list)

    fake_launch = Launch()

    def run_logged(argv, log, *, cwd=None, env=None, timeout=None, values=None):
        fake_launch.calls.append({"argv": argv, "cwd": cwd, "env": env, "timeout": timeout, "log": log})
        if fake_launch.timeout:
            raise subprocess.TimeoutExpired(argv, timeout)
        Path(log).write_text(fake_launch.log)
        if fake_launch.video is not None:
            where = fake_launch.where or Path(log).parent / "upstream_out"
            where.mkdir(parents=True, exist_ok=True)
            (where / "out.mp4").write_bytes(fake_launch.video)
        return fake_launch.rc

    monkeypatch.setattr("harness.io.run_logged", run_logged)
    return fake_launch


def test_generate_brings_upstreams_frames_in_and_records_the_run(case, tmp_path, launch, videos):
    a = stub(upstream_dir=str(tmp_path), timeout_s=30.0)
    req = request(a, case, tmp_path / "item")
    stale = tmp_path / "item" / "upstream_out" / "old.mp4"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    launch.video = videos["3"]
    frames: list = []
    t0 = time.time()
    g = a.generate(req, NativeControls(), frames.append)
    assert time.time() - t0 >= g.timings["generate_s"] >= 0
    (call,) = launch.calls
    assert call["cwd"] == str(tmp_path) and call["timeout"] == 30.0 and call["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert call["log"] == tmp_path / "item" / "upstream.log" and call["argv"][-3:] == ["run.py", "--n", "3"]
    assert not stale.exists()  # an earlier launch's output never stands for this one's
    assert (tmp_path / "item" / "upstream_video.mp4").read_bytes() == videos["3"]
    assert (g.num_frames, g.fps, len(frames)) == (3, 8.0, 3) and all(f.shape == (H, W, 3) for f in frames)
    assert g.meta["upstream_video"] == {"num_frames": 3, "fps": 8.0, "height": H, "width": W}
    assert (g.meta["achieved_frames"], g.meta["achieved_fps"], g.meta["requested_frames"]) == (3, 8.0, 3)
    assert g.meta["log"] == "upstream.log"
    assert g.meta["alignment"] == {"first_pose": 0, "prepended_canvas_frames": 0, "anchor_frame": "kept"}
    assert g.meta["conformance"]["frames"]["ok"] is True and g.meta["conformance"]["first_frame"]["ok"] is True


def test_a_dropped_anchor_puts_the_canvas_in_front(base_contract, case, tmp_path, launch, videos):
    c = plain(base_contract, {"first_pose": 1, "anchor_frame": "dropped"})
    a = stub(c)
    launch.video = videos["2"]
    frames: list = []
    g = a.generate(request(a, case, tmp_path / "item"), NativeControls(), frames.append)
    assert g.num_frames == 3 and len(frames) == 3
    np.testing.assert_array_equal(frames[0], a.canvas_image_and_K(case)[0])
    assert g.meta["alignment"] == {"first_pose": 1, "prepended_canvas_frames": 1, "anchor_frame": "dropped"}
    assert g.meta["upstream_video"]["num_frames"] == 2 and g.meta["requested_frames"] == 3


def test_frames_of_another_size_are_resized_to_the_canvas(case, tmp_path, launch, videos):
    class Big(Stub):
        def output_hw(self):
            return 2 * H, 2 * W

    a = stub(cls=Big)
    launch.video = videos["big"]
    frames: list = []
    g = a.generate(request(a, case, tmp_path / "item"), NativeControls(), frames.append)
    assert len(frames) == 3 and all(f.shape == (H, W, 3) for f in frames)
    assert (g.meta["upstream_video"]["height"], g.meta["upstream_video"]["width"]) == (2 * H, 2 * W)


def test_a_video_written_where_the_spec_says_is_found(case, tmp_path, launch, videos):
    a = stub()
    a.spec = LaunchSpec(script="run.py", args=[], out_dir=str(tmp_path / "item" / "elsewhere"))
    launch.video, launch.where = videos["3"], tmp_path / "item" / "elsewhere"
    assert a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None).num_frames == 3


def test_a_failed_launch_names_its_exit_status_and_root_cause(case, tmp_path, launch):
    a = stub()
    launch.rc, launch.log = 1, "Traceback (most recent call last):\n  File \"g.py\"\nKeyError: 'seed'\n"
    with pytest.raises(UpstreamRunError) as e:
        a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None)
    log = tmp_path / "item" / "upstream.log"
    assert str(e.value) == (f"stubmodel: upstream exited with 1: KeyError: 'seed'; no video was produced (full log: "
                            f"{log})")
    assert e.value.root_cause == "KeyError: 'seed'"
    launch.rc, launch.log = 2, "Killed\n"
    with pytest.raises(UpstreamRunError, match="exited with 2: no Python exception in the log;") as e:
        a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None)
    assert e.value.root_cause is None


def test_a_launch_past_its_timeout_says_so(case, tmp_path, launch):
    a = stub(timeout_s=5.4)
    launch.timeout = True
    with pytest.raises(UpstreamRunError) as e:
        a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None)
    assert str(e.value) == (f"stubmodel: upstream timed out after 5 s (model.timeout_s); log: "
                            f"{tmp_path / 'item' / 'upstream.log'}")


def test_a_log_failure_fails_a_launch_that_exited_0(base_contract, case, tmp_path, launch, videos):
    lf = LogFailure(pattern=r"missing: \[.+\]", means="random weights", source="load.py:3")
    a = stub(plain(base_contract, {"log_failures": (lf,)}))
    launch.video, launch.log = videos["3"], "ok\nkeys missing: ['w']\nstep\n"
    with pytest.raises(UpstreamRunError, match="its log says \"keys missing: \\['w'\\]\""):
        a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None)


def test_a_video_that_fails_conformance_fails_the_item_with_its_measures(case, tmp_path, launch, videos):
    a = stub()
    launch.video = videos["slow"]
    with pytest.raises(UpstreamRunError) as e:
        a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None)
    assert str(e.value).startswith("stubmodel: upstream video ") and "fails conformance: fps: the file is 4.000 fps" \
        in str(e.value) and "frames:" not in str(e.value)
    assert e.value.meta["achieved_fps"] == 4.0 and e.value.meta["conformance"]["fps"]["ok"] is False


def test_a_check_listed_in_conformance_warn_is_only_recorded(case, tmp_path, launch, videos):
    a = stub(conformance_warn=("fps",))
    launch.video = videos["slow"]
    g = a.generate(request(a, case, tmp_path / "item"), NativeControls(), lambda f: None)
    assert g.meta["conformance"]["fps"]["ok"] is False and g.num_frames == 3


# -- what an earlier launch left, the log, the output -------------------------------------------------------------


def test_an_output_folder_inside_the_item_is_emptied_and_one_outside_is_kept(tmp_path):
    a = stub()
    item = tmp_path / "item"
    inside, outside = item / "out", tmp_path / "shared"
    for d in (inside, outside):
        d.mkdir(parents=True)
        (d / "old.mp4").write_bytes(b"old")
    a.clear_outputs(LaunchSpec(script="x", args=[]), inside, item)
    assert inside.is_dir() and list(inside.iterdir()) == []
    a.clear_outputs(LaunchSpec(script="x", args=[]), outside, item)
    assert (outside / "old.mp4").read_bytes() == b"old"
    a.clear_outputs(LaunchSpec(script="x", args=[]), item / "new" / "deep", item)
    assert (item / "new" / "deep").is_dir()


def test_a_named_output_file_is_removed_and_its_absence_is_fine(tmp_path):
    a = stub()
    out = tmp_path / "video.mp4"
    out.write_bytes(b"old")
    a.clear_outputs(LaunchSpec(script="x", args=[], output=str(out)), tmp_path / "o", tmp_path)
    assert not out.exists() and (tmp_path / "o").is_dir()
    a.clear_outputs(LaunchSpec(script="x", args=[], output=str(out)), tmp_path / "o", tmp_path)


class _Unresolvable(type(Path())):
    def resolve(self, strict=False):
        raise OSError("cannot resolve")


def test_an_output_folder_that_cannot_be_resolved_is_kept(tmp_path):
    d = _Unresolvable(tmp_path / "item" / "out")
    d.mkdir(parents=True)
    (d / "old.mp4").write_bytes(b"old")
    stub().clear_outputs(LaunchSpec(script="x", args=[]), d, tmp_path / "item")
    assert (d / "old.mp4").exists()


def _with_log_failure(base, pattern: str):
    return plain(base, {"log_failures": (LogFailure(pattern=pattern, means="wrong", source="s.py:2"),)})


@pytest.mark.parametrize("text, line", [("a\nkey missing: 3\nb\n", "key missing: 3"),
                                        ("a\nkey missing: 3", "key missing: 3"), ("missing: 1\nb", "missing: 1"),
                                        ("\nmissing: 1", "missing: 1")])
def test_the_whole_line_of_a_log_failure_is_quoted(base_contract, text, line):
    a = stub(_with_log_failure(base_contract, "missing: [0-9]"))
    with pytest.raises(UpstreamRunError) as e:
        a.check_log(text, Path("/l/upstream.log"))
    assert str(e.value) == (f"stubmodel: upstream exited 0 but its log says {line!r}: wrong (s.py:2; full log: "
                            "/l/upstream.log)")
    assert e.value.root_cause == line
    a.check_log("a\nmissing: none\n", Path("/l/upstream.log"))
    stub().check_log(text, Path("/l/upstream.log"))


def test_a_log_failure_on_an_empty_first_line_quotes_nothing(base_contract):
    a = stub(_with_log_failure(base_contract, "^$"))
    with pytest.raises(UpstreamRunError) as e:
        a.check_log("\nfoo", Path("/l/upstream.log"))
    assert e.value.root_cause == ""


def test_a_long_log_line_is_cut_at_200_characters(base_contract):
    a = stub(_with_log_failure(base_contract, "missing"))
    with pytest.raises(UpstreamRunError) as e:
        a.check_log("missing " + "x" * 300, Path("l"))
    assert e.value.root_cause == ("missing " + "x" * 300)[:200]


def _touch(path: Path, mtime: float, directory: bool = False) -> Path:
    if directory:
        path.mkdir(parents=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"v")
    os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize("mtime, found", [(999_999.0, True), (1_000_000.0, True), (999_998.5, False)])
def test_a_named_output_must_be_a_file_written_since_one_second_before_the_launch(tmp_path, mtime, found):
    a = stub()
    p = _touch(tmp_path / "v.mp4", mtime)
    spec = LaunchSpec(script="x", args=[], output=str(p))
    if found:
        assert a.find_output(spec, tmp_path, 1_000_000.0) == p
    else:
        with pytest.raises(UpstreamRunError) as e:
            a.find_output(spec, tmp_path, 1_000_000.0)
        assert str(e.value) == f"stubmodel: upstream finished but {p} was not written by this launch"


def test_a_named_output_that_is_missing_or_a_folder_is_not_found(tmp_path):
    a = stub()
    for p in (tmp_path / "missing.mp4", _touch(tmp_path / "dir.mp4", 1_000_000.0, directory=True)):
        with pytest.raises(UpstreamRunError, match="was not written by this launch"):
            a.find_output(LaunchSpec(script="x", args=[], output=str(p)), tmp_path, 1_000_000.0)


@pytest.mark.parametrize("mtime, found", [(999_999.0, True), (1_000_000.0, True), (999_998.5, False)])
def test_a_globbed_output_must_be_written_since_one_second_before_the_launch(tmp_path, mtime, found):
    a = stub()
    p = _touch(tmp_path / "a" / "v.mp4", mtime)
    _touch(tmp_path / "b.mp4", 1_000_000.0, directory=True)  # a folder never counts
    spec = LaunchSpec(script="x", args=[])
    if found:
        assert a.find_output(spec, tmp_path, 1_000_000.0) == p
    else:
        with pytest.raises(UpstreamRunError) as e:
            a.find_output(spec, tmp_path, 1_000_000.0)
        assert str(e.value) == f"stubmodel: no video matching '**/*.mp4' under {tmp_path}"


def test_the_newest_of_several_outputs_is_taken(tmp_path):
    _touch(tmp_path / "a.mp4", 1_000_005.0)
    newest = _touch(tmp_path / "b.mp4", 1_000_009.0)
    _touch(tmp_path / "c.mp4", 1_000_001.0)
    assert stub().find_output(LaunchSpec(script="x", args=[]), tmp_path, 1_000_000.0) == newest
