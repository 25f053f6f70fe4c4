"""The rules of the run's executor (``harness/app/runner.py``), one at a time and in this process: the summary table,
the fingerprints and which finished items are current, superseded or broken, what each item records (a dry run's
compile-only record, a generated item's video facts, a failed item's cause), the manifest rows, previews, the GPU
pool and the ranks, and the wait for items another process holds. The plans are the real ones of the weight-free
reference model (96 x 160, two cases, ``lrlr``), made under ``tmp_path``; only generation itself is a stand-in that
hands three black frames to the real video writer, and ``git`` is not asked."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from adapters.base import GeneratedVideo
from harness.app import plan as plan_module
from harness.app import runner
from harness.app.run_config import RunConfig
from harness.app.runner import FingerprintMismatch, RunSummary
from harness.dist import Rank
from harness.fingerprint import fingerprint_with_recorded_frames
from harness.gpu_pool import DeviceConfigError, GPUPool, assigned
from harness.io import host_tag, sha256_file
from harness.locks import ItemLocks, lock_name
from harness.outputs import PlanError, WorkItem, item_problems
from tests.support.run_configs import SMALL_REFERENCE, run_config
from trajectories.migration import SUPERSEDED

ROCKET, ASTRONAUT = "reference/fov/seed-1/lrlr/environment_rocket", "reference/fov/seed-1/lrlr/human_astronaut"
DEAD_PID = 2**22 + 1  # above Linux's largest pid: never a live process


def _compose(*extra: str) -> RunConfig:
    return run_config(*SMALL_REFERENCE, *extra)


@pytest.fixture(scope="module")
def base_cfg(tmp_path_factory) -> RunConfig:
    """The composed config; a dry run of it made once here, so that the tests find the adapter, the case set and
    the reference model's renderings warm."""
    cfg = _compose()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "git_state", lambda: {"sha": "abc", "dirty": False})
        warm = plan_module.plan_from_config(cfg.replace(output_root=str(tmp_path_factory.mktemp("warm"))))
        runner.run_items(warm, dry_run=True, progress=False)
    return cfg


@pytest.fixture(scope="module")
def gpu_cfg() -> RunConfig:
    """The same with ``model.gpus_per_job=1`` (a job that draws one GPU from the pool)."""
    return _compose("model.gpus_per_job=1")


@pytest.fixture(autouse=True)
def no_git(monkeypatch):
    monkeypatch.setattr(runner, "git_state", lambda: {"sha": "abc", "dirty": False})


@pytest.fixture
def make_plan(base_cfg, tmp_path):
    def make(cfg: RunConfig | None = None, **changes):
        return plan_module.plan_from_config((cfg or base_cfg).replace(output_root=str(tmp_path), **changes))

    return make


@dataclasses.dataclass
class Gen:
    """What the stand-in generation does: ``frames`` black frames written, ``reported`` told, ``error`` raised
    after writing; ``threads`` and ``seen`` record the thread and the item's ``meta.json`` status it ran with."""
    frames: int = 3
    reported: int | None = None
    error: BaseException | None = None
    meta: dict = dataclasses.field(default_factory=lambda: {"device": "cpu"})
    info: dict = dataclasses.field(default_factory=dict)
    barrier: threading.Barrier | None = None
    during: object = None  # called with the request while generating
    threads: list = dataclasses.field(default_factory=list)
    seen: list = dataclasses.field(default_factory=list)

    def __call__(self, req, controls, sink):
        self.threads.append(threading.current_thread().name)
        meta = req.item_dir / "meta.json"
        self.seen.append(json.loads(meta.read_text())["status"] if meta.exists() else None)
        if self.barrier is not None:
            self.barrier.wait()
        if self.during is not None:
            self.during(req)
        for _ in range(self.frames):
            sink.write(np.zeros((96, 160, 3), np.uint8))
        if self.error is not None:
            raise self.error
        return GeneratedVideo(num_frames=self.reported or self.frames, fps=16.0, context_trace=[],
                              timings={"generate_s": 0.25}, meta=dict(self.meta), context_info=dict(self.info))


@pytest.fixture
def gen(monkeypatch):
    """``gen(plan, **how)``: the plan's adapter class (so every plan of the test) generates with a :class:`Gen` (put
    back after the test)."""
    def install(plan, **how) -> Gen:
        g = Gen(**how)
        monkeypatch.setattr(type(plan.adapter), "generate", g)
        return g

    return install


def _meta(plan, item) -> dict:
    return json.loads((plan.run_dir / item.rel_dir / "meta.json").read_text())


def _write_meta(plan, item, **fields) -> Path:
    d = plan.run_dir / item.rel_dir
    d.mkdir(parents=True, exist_ok=True)
    (d / "meta.json").write_text(json.dumps(fields))
    return d


def _executor(plan, dry_run=False, overwrite=False, rank=None, write_manifest=True, previews=False):
    rank = rank or Rank()
    more = {"previews": True} if previews else {}  # none by default
    return runner._Executor(plan, dry_run, overwrite, rank, write_manifest=write_manifest, **more)


def _fp(plan, item) -> str:
    return runner.fingerprints(plan)[item.key][0]


def _by_inputs_meta(plan, item, **fields) -> dict:
    """A meta of ``item`` made when the model overrode another trajectory's frame count: current by its inputs."""
    model = {**plan.adapter.config.to_dict(), "frames_per_trajectory": {"lrlrlr_sym_1dpf": 541}}
    want = fingerprint_with_recorded_frames(plan.adapter, plan.policy, plan.specs[item.trajectory],
                                            plan.case_by_id[item.case_id], item, runner.encoder_settings(), model)
    assert want is not None and want != _fp(plan, item)
    return {"fingerprint": want, "model": model, **fields}


def _plant_lock(run_dir: Path, key: str, **owner) -> Path:
    import socket

    o = {"host": socket.gethostname(), "pid": DEAD_PID, "pid_start": None, "token": "t", "started": 0.0, **owner}
    p = run_dir / ".locks" / lock_name(key)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(o))
    return p


# -- RunSummary -------------------------------------------------------------------------------------------------------


def test_the_table_gives_each_count_under_labels_padded_to_the_longest():
    s = RunSummary(run_dir=Path("/r"), done=["a", "b"], compiled=["c"], skipped=["d", "e", "f"], elsewhere=["g"],
                   seconds=12.345)
    assert s.table() == ("run directory: /r\n"
                         "  done                    2\n"
                         "  compiled (dry run)      1\n"
                         "  skipped (already done)  3\n"
                         "  done elsewhere          1\n"
                         "  failed                  0\n"
                         "  wall time [s]           12.3")


def test_the_table_names_taken_over_locks_redone_items_and_each_failure_with_its_cause():
    s = RunSummary(run_dir=Path("/r"), done=["x"], failed=["f1", "f2"], taken_over=["t"], redone={"x": "gone"},
                   causes={"f1": "OOM"})
    assert s.table().splitlines()[7:] == ["  took over stale lock: t",
                                          "  redone (its files no longer matched meta.json): x: gone",
                                          "  FAILED: f1: OOM", "  FAILED: f2: see its meta.json"]


@pytest.mark.parametrize("bucket", ["done", "compiled", "skipped", "elsewhere"])
def test_failures_beside_any_finished_item_do_not_say_no_video_was_produced(bucket):
    s = RunSummary(run_dir=Path("/r"), failed=["f"], **{bucket: ["k"]})
    assert "no video was produced" not in s.table()


def test_failures_alone_say_no_video_was_produced_and_an_empty_run_says_nothing_of_it():
    assert RunSummary(run_dir=Path("/r"), failed=["f"]).table().splitlines()[-1] == (
        "  no video was produced: the failures above are the cause (not the metrics)")
    assert "no video" not in RunSummary(run_dir=Path("/r")).table()


def test_a_summary_is_ok_without_failures_and_starts_at_zero_seconds_and_no_concurrency():
    s = RunSummary(run_dir=Path("/r"))
    assert s.ok and s.seconds == 0.0 and s.max_concurrent == 0 and s.table().endswith("wall time [s]           0.0")
    assert not RunSummary(run_dir=Path("/r"), failed=["f"]).ok


# -- fingerprints -----------------------------------------------------------------------------------------------------


def test_fingerprints_are_computed_once_per_plan_for_every_shards_items(make_plan):
    plan = make_plan()
    shard = dataclasses.replace(plan, items=plan.items[1:])
    fps = runner.fingerprints(shard)
    assert runner.fingerprints(shard) is fps and shard._fingerprints is fps
    assert sorted(fps) == sorted([ROCKET, ASTRONAUT])
    alone = dataclasses.replace(plan, items=plan.items[1:], all_items=[])
    assert list(runner.fingerprints(alone)) == [ASTRONAUT]


# -- check_fingerprints -----------------------------------------------------------------------------------------------


def test_a_real_run_with_overwrite_reads_no_finished_item(make_plan):
    plan = make_plan()
    for item in plan.items:
        _write_meta(plan, item, status="done", fingerprint="old")
    runner.check_fingerprints(plan, overwrite=True)


def test_a_dry_run_with_overwrite_refuses_done_items_naming_the_first(make_plan):
    plan = make_plan()
    _write_meta(plan, plan.items[0], status="compiled", fingerprint="old")
    runner.check_fingerprints(plan, overwrite=True, dry_run=True)  # a compile-only record: nothing orphaned
    for item in plan.items:
        _write_meta(plan, item, status="done", fingerprint=_fp(plan, item))
    with pytest.raises(PlanError) as e:
        runner.check_fingerprints(plan, overwrite=True, dry_run=True)
    assert str(e.value) == (
        f"dry_run=true overwrite=true: 2 item(s) of {plan.run_dir} are done (first: {ROCKET}); a dry run would "
        "replace their meta.json by a compile-only record and orphan their videos. Drop overwrite=true (a dry run "
        "leaves done items alone) or use run=<new>")


def test_done_items_of_another_config_are_refused_naming_the_first_and_the_changed_parts(make_plan):
    plan = make_plan()
    parts = runner.fingerprints(plan)[ROCKET][1]
    old = {**parts, "model": "m0", "case": "c0"}
    for item in plan.items:
        _write_meta(plan, item, status="done", fingerprint="old", fingerprint_parts=old)
    with pytest.raises(FingerprintMismatch) as e:
        runner.check_fingerprints(plan, overwrite=False, dry_run=True)
    assert str(e.value) == (
        f"2 finished item(s) in {plan.run_dir} were made with a different config (first: {ROCKET}; changed: case, "
        "model). Use a new run name (run=<new>) or regenerate them (overwrite=true).")


def test_a_done_item_recorded_before_fingerprints_had_parts_says_so(make_plan):
    plan = make_plan()
    _write_meta(plan, plan.items[1], status="done", fingerprint="old")
    with pytest.raises(FingerprintMismatch, match=rf"\(first: {ASTRONAUT}; changed: \(recorded before fingerprints\)\)"):
        runner.check_fingerprints(plan, overwrite=False)


def test_only_done_items_of_another_config_are_refused(make_plan):
    plan = make_plan()
    _write_meta(plan, plan.items[0], status="done", fingerprint=_fp(plan, plan.items[0]))
    _write_meta(plan, plan.items[1], status="failed", fingerprint="old")
    runner.check_fingerprints(plan, overwrite=False)


def test_a_superseded_layout_and_an_item_current_by_its_inputs_are_not_refused(make_plan):
    plan = make_plan()
    _write_meta(plan, plan.items[0], status="done", fingerprint="old", trajectory=SUPERSEDED[0][0])
    _write_meta(plan, plan.items[1], status="done", **_by_inputs_meta(plan, plan.items[1]))
    runner.check_fingerprints(plan, overwrite=False)


# -- item_is_current --------------------------------------------------------------------------------------------------


def test_an_item_is_current_by_its_fingerprint_or_by_its_inputs_only(make_plan):
    plan = make_plan()
    item = plan.items[0]
    assert runner.item_is_current(plan, item, {"fingerprint": _fp(plan, item)})
    assert runner.item_is_current(plan, item, _by_inputs_meta(plan, item))
    assert not runner.item_is_current(plan, item, {**_by_inputs_meta(plan, item), "fingerprint": "other"})
    assert not runner.item_is_current(plan, item, {})  # nothing recorded: no fingerprint to compare with


def test_an_item_whose_case_left_the_plan_is_not_current_by_its_inputs(make_plan):
    plan = make_plan()
    item = plan.items[0]
    meta = _by_inputs_meta(plan, item)
    fewer = dataclasses.replace(plan, cases=plan.cases[1:])
    fewer._fingerprints = runner.fingerprints(plan)
    assert not runner.item_is_current(fewer, item, meta)


# -- the executor: which finished items need no work ------------------------------------------------------------------


def test_an_item_without_meta_needs_work(make_plan):
    assert _executor(make_plan()).finished_ok(make_plan().items[0]) is None


@pytest.mark.parametrize("status, why", [("done", "elsewhere"), ("compiled", "elsewhere"), ("failed", "failed"),
                                         ("running", None)])
def test_an_item_another_process_finished_since_the_start_is_theirs(make_plan, status, why):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    _write_meta(plan, item, status=status, fingerprint=_fp(plan, item), finished_unix=ex.started, owner_token="other")
    assert ex.finished_ok(item) == why


def test_an_item_this_process_failed_or_one_finished_before_the_start_is_not_elsewhere(make_plan):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    _write_meta(plan, item, status="failed", fingerprint=_fp(plan, item), finished_unix=ex.started + 5,
                owner_token=ex.locks.owner.token)
    assert ex.finished_ok(item) is None
    _write_meta(plan, item, status="failed", fingerprint=_fp(plan, item), finished_unix=ex.started - 5,
                owner_token="other")
    assert ex.finished_ok(item) is None


def test_a_done_item_of_another_config_finished_elsewhere_is_redone(make_plan):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    _write_meta(plan, item, status="done", fingerprint="old", finished_unix=ex.started + 5, owner_token="other")
    assert ex.finished_ok(item) is None and item.key not in ex.broken


def test_a_failed_item_current_only_by_its_inputs_needs_work_and_a_done_one_is_elsewhere(make_plan):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    _write_meta(plan, item, **_by_inputs_meta(plan, item, status="failed", finished_unix=ex.started + 5,
                                              owner_token="other"))
    assert ex.finished_ok(item) is None
    _write_meta(plan, item, **_by_inputs_meta(plan, item, status="done", finished_unix=ex.started + 5,
                                              owner_token="other"))
    assert ex.finished_ok(item) == "elsewhere"


def test_a_done_item_whose_files_are_gone_is_redone_and_said_once(make_plan, caplog):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    d = _write_meta(plan, item, status="done", fingerprint=_fp(plan, item), finished_unix=1.0)
    why = "; ".join(item_problems(d, _meta(plan, item)))
    assert why.startswith("meta.json: video.sha256 is missing")
    with caplog.at_level(logging.WARNING, logger="harness.app.runner"):
        assert ex.finished_ok(item) is None and ex.finished_ok(item) is None and ex.finished_ok(item) is None
    assert ex.broken == {item.key: why}
    assert [r.getMessage() for r in caplog.records] == [f"{item.key}: redoing it: {why}"]


def test_an_item_another_process_is_running_needs_work_its_lock_decides_who(make_plan, gen):
    plan = make_plan()
    looks = []
    gen(plan, during=lambda req: looks.append(_executor(plan).finished_ok(plan.items[0])))
    _executor(plan).execute(plan.items[0])
    assert looks == [None]


def test_a_done_item_of_another_config_leaves_what_was_found_broken_before_alone(make_plan):
    plan = make_plan()
    ex = _executor(plan)
    ex.broken[ROCKET] = "video.mp4 is missing"
    _write_meta(plan, plan.items[0], status="done", fingerprint="old")
    assert ex.finished_ok(plan.items[0]) is None and ex.broken == {ROCKET: "video.mp4 is missing"}


def test_a_done_item_of_a_superseded_layout_is_redone_and_said_once(make_plan, caplog):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    _write_meta(plan, item, status="done", fingerprint="old", trajectory=SUPERSEDED[0][0])
    with caplog.at_level(logging.WARNING, logger="harness.app.runner"):
        assert ex.finished_ok(item) is None and ex.finished_ok(item) is None
    assert ex.broken[item.key].startswith("made with the superseded lrlrlr_sym_1dpf layout")
    assert len(caplog.records) == 1
    _write_meta(plan, plan.items[1], status="failed", fingerprint="old", trajectory=SUPERSEDED[0][0])
    assert ex.finished_ok(plan.items[1]) is None and plan.items[1].key not in ex.broken


def test_a_compiled_item_needs_generating_and_a_done_one_is_skipped_unless_overwritten(make_plan, gen):
    plan = make_plan()
    runner.run_items(plan, dry_run=True, progress=False)
    assert _executor(plan).finished_ok(plan.items[0]) is None  # its files are fine, but there is no video
    gen(plan)
    runner.run_items(plan, progress=False)
    assert _executor(plan).finished_ok(plan.items[0]) == "skipped"
    assert _executor(plan, overwrite=True).finished_ok(plan.items[0]) is None


def test_the_integrity_of_a_done_item_is_checked_once_per_recorded_state(make_plan):
    plan = make_plan()
    ex = _executor(plan)
    item = plan.items[0]
    d = _write_meta(plan, item)
    (d / "camera.npz").write_bytes(b"x")
    m = {"status": "done", "finished_unix": 1.0, "video": {"sha256": "a"}}
    first = ex._integrity(item, m)
    (d / "camera.npz").unlink()
    assert ex._integrity(item, dict(m)) == first and "camera.npz is missing" not in first
    assert "camera.npz is missing" in ex._integrity(item, {**m, "finished_unix": 2.0})
    assert "camera.npz is missing" in ex._integrity(item, {**m, "video": {"sha256": "b"}})
    assert "meta.json: 'video' is a str, expected a mapping (edited by hand?)" in ex._integrity(item, {**m, "video": "v"})


# -- the executor: one item -------------------------------------------------------------------------------------------


def test_the_seed_source_says_whether_the_seed_was_given(make_plan):
    assert _executor(make_plan()).seed_source == "model default"
    assert _executor(make_plan(seed=7)).seed_source == "cli override"


def test_the_owner_names_the_gpus_the_pool_assigned_or_none(make_plan):
    plan = make_plan()
    ex = _executor(plan)
    item, case = plan.items[0], plan.cases[0]
    assert ex._start_record(item, case).owner["devices"] is None
    with assigned(["3", "4"]):
        assert ex._start_record(item, case).owner["devices"] == ["3", "4"]


def test_a_dry_run_item_writes_its_record_once_compiled_with_the_camera_and_its_compile_time(make_plan, monkeypatch):
    plan = make_plan()
    ex = _executor(plan, dry_run=True)
    item = plan.items[0]
    compile_ = plan.adapter.compile
    seen = []

    def compile(req):
        seen.append((req.item_dir / "meta.json").exists())
        return compile_(req)

    monkeypatch.setattr(plan.adapter, "compile", compile)
    t0 = time.perf_counter()
    rec = ex.execute(item)
    took = time.perf_counter() - t0
    d = plan.run_dir / item.rel_dir
    assert seen == [False] and rec.status == "compiled" and _meta(plan, item)["status"] == "compiled"
    assert list(rec.timings) == ["compile_s"] and 0 <= rec.timings["compile_s"] <= took
    assert rec.camera["sha256"] == sha256_file(d / "camera.npz") and not (d / "video.mp4").exists()


@pytest.mark.parametrize("decoded", [False, True])
def test_a_preview_is_drawn_on_request_with_the_decoded_path_when_there_is_one(make_plan, monkeypatch, decoded):
    import trajectories.preview

    plan = make_plan()
    item = plan.items[0]
    drawn = []
    monkeypatch.setattr(trajectories.preview, "preview_path", lambda *a, **kw: drawn.append((a, kw)))
    compile_ = plan.adapter.compile

    def compile(req):
        c = compile_(req)
        return dataclasses.replace(c, decoded_c2w=req.path.c2w.copy() if decoded else None)

    monkeypatch.setattr(plan.adapter, "compile", compile)
    _executor(plan, dry_run=True).execute(item)
    assert drawn == []
    rec = _executor(plan, dry_run=True, previews=True).execute(item)
    [(args, kw)] = drawn
    assert args[1] == plan.run_dir / item.rel_dir / "preview.png" and kw["title"] == f"{item.key}: requested vs native"
    assert [name for name, _ in kw["overlays"]] == (["decoded native"] if decoded else [])
    assert ("achieved_vs_requested" in rec.controls) is decoded


def test_a_generated_item_records_its_video_timings_generation_and_context_trace(make_plan, gen):
    plan = make_plan()
    g = gen(plan, meta={"device": "cpu"}, info={"backend": {"engine": "e"}})
    item = plan.items[0]
    t0 = time.perf_counter()
    rec = _executor(plan).execute(item)
    took = time.perf_counter() - t0
    d = plan.run_dir / item.rel_dir
    assert g.seen == ["running"] and rec.status == "done" and _meta(plan, item)["status"] == "done"
    v = rec.video
    assert {k: v[k] for k in ("file", "num_frames", "fps", "width", "height")} == {
        "file": "video.mp4", "num_frames": 3, "fps": 16.0, "width": 160, "height": 96}
    assert v["sha256"] == sha256_file(d / "video.mp4") and v["size"] == (d / "video.mp4").stat().st_size
    assert len(v["frames_sha256"]) == 64 and v["encoder"] == runner.encoder_settings()
    assert list(rec.timings) == ["compile_s", "generate_s", "total_s"] and rec.timings["generate_s"] == 0.25
    assert 0 <= rec.timings["compile_s"] <= rec.timings["total_s"] <= took
    assert rec.generation == {"device": "cpu"}
    assert json.loads((d / "context_trace.json").read_text()) == {"policy": plan.policy.to_dict(),
                                                                  "backend": {"engine": "e"}, "chunks": []}


def test_a_model_that_reports_other_frames_than_it_wrote_fails(make_plan, gen):
    plan = make_plan()
    gen(plan, reported=5)
    rec = _executor(plan).execute(plan.items[0])
    assert rec.status == "failed" and rec.error == "RuntimeError: the model reported 5 frames but 3 were written"
    assert _meta(plan, plan.items[0])["status"] == "failed" and rec.video is None


def _encoder_threads() -> int:
    return sum(t.name == "harness-video-encoder" and t.is_alive() for t in threading.enumerate())


def test_a_failed_item_records_the_error_its_traceback_root_cause_and_what_was_measured(make_plan, gen):
    plan = make_plan()
    err = ValueError("boom\nmore")
    err.root_cause, err.meta = "CUDA out of memory", {"residual": 0.5}
    gen(plan, error=err)
    summary = RunSummary(run_dir=plan.run_dir)
    ex = _executor(plan)
    encoders = _encoder_threads()
    assert ex.run_locked(plan.items[0], summary, None, 0)
    assert _encoder_threads() == encoders  # the writer was aborted: its encoder thread ended
    rec = _meta(plan, plan.items[0])
    assert rec["status"] == "failed" and rec["error"] == "ValueError: boom\nmore" and "ValueError: boom" in rec[
        "traceback"]
    assert rec["root_cause"] == "CUDA out of memory" and rec["generation"] == {"residual": 0.5}
    assert summary.failed == [ROCKET] and summary.causes == {ROCKET: "CUDA out of memory"}
    d = plan.run_dir / plan.items[0].rel_dir
    assert [p.name for p in d.iterdir() if "video" in p.name] == []  # the writer's partial file went with it


def test_a_failure_without_a_root_cause_is_summed_up_by_its_first_error_line(make_plan, gen):
    plan = make_plan()
    err = ValueError("boom\nmore")
    err.root_cause = ""
    gen(plan, error=err)
    summary = RunSummary(run_dir=plan.run_dir)
    _executor(plan).run_locked(plan.items[0], summary, None, 0)
    rec = _meta(plan, plan.items[0])
    assert rec.get("root_cause") is None and rec.get("generation") is None
    assert summary.causes == {ROCKET: "ValueError: boom"}


# -- the executor: manifest rows and camera files ---------------------------------------------------------------------


def test_a_generated_items_row_is_written_at_once_and_a_dry_runs_rows_wait_for_the_flush(make_plan, gen):
    plan = make_plan()
    gen(plan)
    _executor(plan).execute(plan.items[0])
    assert [r.key for r in plan.run.rows()] == [ROCKET]
    ex = _executor(plan, dry_run=True)
    ex.execute(plan.items[1])
    assert [r["key"] for r in ex.pending_rows] == [ASTRONAUT] and [r.key for r in plan.run.rows()] == [ROCKET]
    ex.flush_manifest()
    assert ex.pending_rows == [] and sorted(r.key for r in plan.run.rows()) == [ROCKET, ASTRONAUT]


def test_a_process_that_writes_no_manifest_leaves_it_alone(make_plan, gen):
    plan = make_plan()
    gen(plan)
    _executor(plan, write_manifest=False).execute(plan.items[0])
    ex = _executor(plan, dry_run=True, write_manifest=False)
    ex.execute(plan.items[1])
    ex.flush_manifest()
    assert ex.pending_rows == [] and not plan.run.manifest.exists()


def test_a_camera_path_is_serialised_once_and_its_bytes_written_for_each_item(make_plan, monkeypatch):
    from trajectories.path import CameraPath

    plan = make_plan()
    calls = []
    save = CameraPath.save_to
    monkeypatch.setattr(CameraPath, "save_to", lambda self, f: (calls.append(self), save(self, f))[1])
    ex = _executor(plan, dry_run=True)
    camera = plan.run_dir / plan.items[0].rel_dir / "camera.npz"
    first = ex.execute(plan.items[0]).camera["sha256"]
    camera.unlink()
    assert ex.execute(plan.items[0]).camera["sha256"] == first == sha256_file(camera) and len(calls) == 1


def test_a_camera_cache_entry_of_another_object_under_the_same_id_is_not_used(make_plan, tmp_path):
    plan = make_plan()
    ex = _executor(plan, dry_run=True)
    path = plan.adapter.path_for(plan.specs["lrlr"], plan.adapter.canvas_K(plan.cases[0]), "lrlr")
    ex._camera_bytes[id(path)] = (object(), b"stale", "0" * 64)
    sha = ex._save_camera(path, tmp_path / "a.npz")
    assert sha == sha256_file(tmp_path / "a.npz") and (tmp_path / "a.npz").read_bytes() != b"stale"


@pytest.mark.parametrize("held, after", [(64, 65), (65, 1)])
def test_the_camera_cache_is_emptied_once_it_holds_more_than_64_paths(make_plan, tmp_path, held, after):
    plan = make_plan()
    ex = _executor(plan, dry_run=True)
    path = plan.adapter.path_for(plan.specs["lrlr"], plan.adapter.canvas_K(plan.cases[0]), "lrlr")
    ex._camera_bytes.update({-i: (None, b"", "") for i in range(1, held + 1)})
    ex._save_camera(path, tmp_path / "a.npz")
    assert len(ex._camera_bytes) == after and id(path) in ex._camera_bytes


# -- the executor: locks, pool, counting ------------------------------------------------------------------------------


def test_an_item_another_live_process_holds_is_left_for_later(make_plan, gen):
    plan = make_plan()
    g = gen(plan)
    other = ItemLocks(plan.run_dir)
    assert other.try_acquire(ROCKET)
    summary = RunSummary(run_dir=plan.run_dir)
    assert not _executor(plan).run_locked(plan.items[0], summary, None, 0)
    assert g.threads == [] and summary == RunSummary(run_dir=plan.run_dir)


def test_an_item_finished_meanwhile_is_recorded_under_the_lock_without_work(make_plan, gen):
    plan = make_plan()
    g = gen(plan)
    ex = _executor(plan)
    item = plan.items[0]
    _write_meta(plan, item, status="failed", fingerprint=_fp(plan, item), finished_unix=ex.started + 1,
                owner_token="other")
    summary = RunSummary(run_dir=plan.run_dir)
    assert ex.run_locked(item, summary, None, 0)
    assert summary.failed == [ROCKET] and summary.causes == {} and g.threads == []
    assert not ex.locks.path(ROCKET).exists()


def test_a_redone_item_a_taken_over_lock_and_a_dead_writers_temp_file_are_dealt_with(make_plan, gen):
    plan = make_plan()
    gen(plan)
    item = plan.items[0]
    d = _write_meta(plan, item, status="done", fingerprint=_fp(plan, item), finished_unix=1.0)
    temp = d / f".video.{host_tag()}-{DEAD_PID}.abcd1234.partial.mp4"
    temp.write_bytes(b"x")
    _plant_lock(plan.run_dir, ROCKET)
    ex = _executor(plan)
    ex.finished_ok(item)
    summary = RunSummary(run_dir=plan.run_dir)
    assert ex.run_locked(item, summary, None, 0)
    assert summary.done == [ROCKET] and summary.taken_over == [ROCKET]
    assert summary.redone == {ROCKET: ex.broken[ROCKET]} and not temp.exists()
    assert not ex.locks.path(ROCKET).exists() and ex.running == 0 and ex.peak_running == 1


@pytest.mark.parametrize("pool_devices, gpus, devices", [(["5"], 1, ["5"]), (["5"], 0, None), (None, 1, None)])
def test_an_item_draws_gpus_from_the_pool_only_when_its_job_needs_some(make_plan, gen, tmp_path, pool_devices, gpus,
                                                                       devices):
    plan = make_plan()
    gen(plan)
    pool = GPUPool(pool_devices, tmp_path / "gpus") if pool_devices else None
    _executor(plan).run_locked(plan.items[0], RunSummary(run_dir=plan.run_dir), pool, gpus)
    assert _meta(plan, plan.items[0])["owner"]["devices"] == devices


# -- run_items --------------------------------------------------------------------------------------------------------


def test_a_run_generates_by_default_and_skips_what_it_made_on_a_rerun(make_plan, gen):
    plan = make_plan()
    g = gen(plan)
    t0 = time.perf_counter()
    s = runner.run_items(plan, progress=False)
    took = time.perf_counter() - t0
    assert s.done == [ROCKET, ASTRONAUT] and s.max_concurrent == 1 and 0 <= s.seconds <= took
    assert g.threads == ["MainThread", "MainThread"]
    again = runner.run_items(make_plan(), progress=False)
    assert again.skipped == [ROCKET, ASTRONAUT] and again.done == [] and again.max_concurrent == 0


def test_a_refused_run_writes_nothing_and_on_start_runs_after_the_fingerprints_before_any_write(make_plan, gen):
    plan = make_plan()
    gen(plan)
    seen = []
    runner.run_items(plan, progress=False, dry_run=True,
                     on_start=lambda: seen.append((hasattr(plan, "_fingerprints"), list(plan.run_dir.rglob("*.json")))))
    assert seen == [(True, [])]
    other = make_plan(run="b")
    _write_meta(other, other.items[0], status="done", fingerprint="old")
    with pytest.raises(FingerprintMismatch):
        runner.run_items(other, progress=False, on_start=lambda: seen.append("started"))
    assert len(seen) == 1 and not (other.run_dir / other.items[1].rel_dir / "meta.json").exists()


def test_a_dry_run_draws_no_preview_unless_asked(make_plan, monkeypatch):
    import trajectories.preview

    drawn = []
    monkeypatch.setattr(trajectories.preview, "preview_path", lambda *a, **kw: drawn.append(a))
    s = runner.run_items(make_plan(), dry_run=True, progress=False)
    assert s.compiled == [ROCKET, ASTRONAUT] and drawn == []
    runner.run_items(make_plan(), dry_run=True, progress=False, previews=True, overwrite=True)
    assert len(drawn) == 2


def _ghost_row(plan) -> str:
    key = "reference/fov/seed-1/lrlr/ghost"
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    plan.run.manifest.write_text(json.dumps({"key": key, "dir": key}) + "\n")
    return key


def test_a_real_run_rebuilds_the_manifest_from_the_items_and_a_single_dry_run_only_adds_its_rows(make_plan, gen):
    plan = make_plan()
    ghost = _ghost_row(plan)
    runner.run_items(plan, dry_run=True, progress=False, rank=Rank())
    assert ghost in plan.run.manifest.read_text() and plan.run.manifest.read_text().count("\n") == 3
    gen(plan)
    runner.run_items(make_plan(), progress=False)
    assert ghost not in plan.run.manifest.read_text() and plan.run.manifest.read_text().count("\n") == 2


def test_the_main_rank_of_several_rebuilds_the_manifest_also_on_a_dry_run(make_plan):
    plan = make_plan()
    ghost = _ghost_row(plan)
    s = runner.run_items(plan, dry_run=True, progress=False, rank=Rank(0, 2))
    assert s.compiled == [ROCKET, ASTRONAUT]  # its own item, then the one nobody started
    assert ghost not in plan.run.manifest.read_text()


def test_another_rank_does_only_its_own_items_and_writes_no_manifest(make_plan, gen, monkeypatch):
    plan = make_plan()
    gen(plan)
    s = runner.run_items(plan, progress=False, rank=Rank(1, 2))
    assert s.done == [ASTRONAUT] and not plan.run.manifest.exists()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    s = runner.run_items(make_plan(), progress=False, dry_run=True)
    assert s.skipped == [ASTRONAUT] and s.compiled == [] and not plan.run.manifest.exists()


def test_the_progress_bar_counts_the_items_on_stderr(make_plan, capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    runner.run_items(make_plan(), dry_run=True, progress=False)
    assert capsys.readouterr().err == ""
    runner.run_items(make_plan(), dry_run=True)
    last = capsys.readouterr().err.strip().split("\r")[-1]
    assert last.startswith("reference/fov: 100%") and " 2/2 " in last


def _gpu_plan(make_plan, gpu_cfg, **changes):
    return make_plan(gpu_cfg, **changes)


def test_gpu_jobs_run_side_by_side_as_many_as_the_pool_holds(make_plan, gpu_cfg, gen, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    plan = _gpu_plan(make_plan, gpu_cfg)
    g = gen(plan, barrier=threading.Barrier(2, timeout=5))
    s = runner.run_items(plan, pool=GPUPool(["5", "6"], tmp_path / "gpus"))
    assert sorted(s.done) == sorted([ROCKET, ASTRONAUT]) and s.max_concurrent == 2
    assert " 2/2 " in capsys.readouterr().err.strip().split("\r")[-1]
    assert all(t.startswith("harness-job") for t in g.threads)
    assert sorted(_meta(plan, i)["owner"]["devices"][0] for i in plan.items) == ["5", "6"]


def test_gpu_jobs_of_a_one_gpu_pool_run_one_at_a_time_in_this_thread(make_plan, gpu_cfg, gen, tmp_path):
    plan = _gpu_plan(make_plan, gpu_cfg)
    g = gen(plan)
    s = runner.run_items(plan, progress=False, pool=GPUPool(["5"], tmp_path / "gpus"))
    assert s.done == [ROCKET, ASTRONAUT] and g.threads == ["MainThread", "MainThread"]


def test_the_pool_is_the_one_given_else_the_plans_else_the_configs(make_plan, gpu_cfg, gen, tmp_path):
    lock = str(tmp_path / "gpus")
    plan = _gpu_plan(make_plan, gpu_cfg, devices=["7"], gpu_lock_dir=lock)
    gen(plan)
    runner.run_items(plan, progress=False, pool=GPUPool(["5"], tmp_path / "gpus"))
    assert _meta(plan, plan.items[0])["owner"]["devices"] == ["5"]
    planned = dataclasses.replace(_gpu_plan(make_plan, gpu_cfg, devices=["7"], gpu_lock_dir=lock),
                                  pool=GPUPool(["6"], tmp_path / "gpus"))
    runner.run_items(planned, progress=False, overwrite=True)
    assert _meta(plan, plan.items[0])["owner"]["devices"] == ["6"]
    runner.run_items(_gpu_plan(make_plan, gpu_cfg, devices=["7"], gpu_lock_dir=lock), progress=False,
                     overwrite=True)
    assert _meta(plan, plan.items[0])["owner"]["devices"] == ["7"]


def test_a_job_without_gpus_never_draws_from_the_configs_devices_or_a_pool_given(make_plan, gen, tmp_path):
    plan = make_plan(devices=["7"], gpu_lock_dir=str(tmp_path / "gpus"))
    g = gen(plan)
    runner.run_items(plan, progress=False)
    assert _meta(plan, plan.items[0])["owner"]["devices"] is None and g.threads == ["MainThread", "MainThread"]
    runner.run_items(plan, progress=False, overwrite=True, pool=GPUPool(["5", "6"], tmp_path / "gpus"))
    assert g.threads == ["MainThread"] * 4


def test_a_gpu_job_without_any_devices_setting_runs_here_without_a_pool(make_plan, gpu_cfg, gen):
    plan = _gpu_plan(make_plan, gpu_cfg)
    g = gen(plan)
    s = runner.run_items(plan, progress=False)
    assert s.done == [ROCKET, ASTRONAUT] and g.threads == ["MainThread", "MainThread"]
    assert _meta(plan, plan.items[0])["owner"]["devices"] is None


def test_a_finished_items_dead_owner_lock_is_cleared(make_plan, gen):
    plan = make_plan()
    gen(plan)
    runner.run_items(plan, progress=False)
    lock = _plant_lock(plan.run_dir, ROCKET)
    s = runner.run_items(make_plan(), progress=False)
    assert s.skipped == [ROCKET, ASTRONAUT] and not lock.exists()


def test_a_run_waits_for_an_item_another_process_holds_and_reminds_every_five_minutes(make_plan, gen, monkeypatch):
    """Four polls, at 300.5, 600.5, 900 and 1200 s of the clock: said at the first (over 300 s since 0), not at the
    second (exactly 300 s after), again at the third, not at the fourth; the lock goes after the fourth sleep."""
    plan = make_plan()
    gen(plan)
    other = ItemLocks(plan.run_dir)
    assert other.try_acquire(ASTRONAUT)
    sleeps, said, looks = [], [], []
    at = {1: 300.5, 2: 600.5, 3: 900.0, 4: 1200.0}

    def sleep(s):
        sleeps.append(s)
        if len(sleeps) == 4:
            other.release(ASTRONAUT)

    def monotonic():
        looks.append(1)
        if len(looks) > 20:
            raise RuntimeError("polled too often")
        return at.get(len(sleeps), 0.0)

    class Said(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("waiting for"):
                said.append((len(sleeps), record.getMessage()))

    fake = types.SimpleNamespace(**{k: getattr(time, k) for k in ("time", "perf_counter", "strftime")},
                                 sleep=sleep, monotonic=monotonic)
    monkeypatch.setattr(runner, "time", fake)
    logger, handler = logging.getLogger("harness.app.runner"), Said(logging.INFO)
    monkeypatch.setattr(logger, "level", logging.INFO)
    logger.addHandler(handler)
    try:
        s = runner.run_items(plan, progress=False)
    finally:
        logger.removeHandler(handler)
    assert s.done == [ROCKET, ASTRONAUT] and sleeps == [0.5] * 4
    assert [poll for poll, _ in said] == [1, 3]
    assert said[0][1].startswith("waiting for 1 item(s) held by another process (pid ")


def test_gpu_jobs_wait_side_by_side_for_an_item_another_process_holds(make_plan, gpu_cfg, gen, tmp_path, monkeypatch):
    plan = _gpu_plan(make_plan, gpu_cfg)
    gen(plan)
    other = ItemLocks(plan.run_dir)
    assert other.try_acquire(ROCKET)
    fake = types.SimpleNamespace(**{k: getattr(time, k) for k in ("time", "perf_counter", "strftime", "monotonic")},
                                 sleep=lambda s: other.release(ROCKET))
    monkeypatch.setattr(runner, "time", fake)
    s = runner.run_items(plan, progress=False, pool=GPUPool(["5", "6"], tmp_path / "gpus"))
    assert s.done == [ASTRONAUT, ROCKET]


# -- _announce_wait ---------------------------------------------------------------------------------------------------


def _items(n: int) -> list[WorkItem]:
    return [WorkItem("m", "fullkv", 1, "lrlr", f"c{i}") for i in range(n)]


def test_a_wait_for_released_locks_says_it_tries_again(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="harness.app.runner"):
        runner._announce_wait(ItemLocks(tmp_path), _items(2))
    assert [r.getMessage() for r in caplog.records] == [
        "waiting for 2 item(s) whose lock was released or went stale a moment ago; trying them again"]


def test_a_wait_names_the_holders_three_lock_files_and_the_other_hosts(tmp_path, caplog):
    items = _items(5)
    paths = [_plant_lock(tmp_path, i.key, host="far-node", pid=1, started=0.0) for i in items[:4]]
    young = tmp_path / ".locks" / lock_name(items[4].key)
    young.write_text("")  # created, not yet written: a holder of unknown host
    with caplog.at_level(logging.INFO, logger="harness.app.runner"):
        runner._announce_wait(ItemLocks(tmp_path), items)
    info, warning = [r.getMessage() for r in caplog.records]
    started = time.strftime("%H:%M:%S", time.localtime(0.0))
    assert info.startswith("waiting for 5 item(s) held by another process (pid -1 on ? since ")
    assert f"; pid 1 on far-node since {started}); lock file(s): {paths[0]}, {paths[1]}, {paths[2]} (+2 more)" in info
    assert warning.startswith("5 lock(s) are held from another host (far-node), whose processes cannot be checked")


def test_a_wait_for_this_hosts_processes_gives_no_other_host_warning(tmp_path, caplog):
    import os

    items = _items(1)
    path = _plant_lock(tmp_path, items[0].key, pid=os.getpid(), pid_start=None)
    with caplog.at_level(logging.INFO, logger="harness.app.runner"):
        runner._announce_wait(ItemLocks(tmp_path), items)
    [info] = [r.getMessage() for r in caplog.records]
    assert info.endswith(f"; lock file(s): {path}")


# -- job_gpus, gpu_pool_for, pool_from_config, run_complete ----------------------------------------------------------


def _adapter(**config) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(name="big", **config))


def test_a_jobs_gpus_are_its_gpus_per_job_and_none_when_unset_or_null():
    assert runner.job_gpus(_adapter(gpus_per_job=2)) == 2
    assert runner.job_gpus(_adapter(gpus_per_job=None)) == 0 and runner.job_gpus(_adapter()) == 0


def test_a_job_of_one_gpu_gets_the_pool_and_one_as_big_as_the_pool_fits(tmp_path):
    cfg = RunConfig.from_mapping({"devices": ["0", "1"], "gpu_lock_dir": str(tmp_path)})
    assert runner.gpu_pool_for(_adapter(gpus_per_job=1), cfg).devices == ["0", "1"]
    assert runner.gpu_pool_for(_adapter(gpus_per_job=2), cfg).devices == ["0", "1"]
    assert runner.gpu_pool_for(_adapter(gpus_per_job=0), cfg) is None


def test_a_job_bigger_than_the_pool_is_refused_naming_the_model_and_devices(tmp_path):
    cfg = RunConfig.from_mapping({"devices": ["0", "1"], "gpu_lock_dir": str(tmp_path)})
    with pytest.raises(DeviceConfigError) as e:
        runner.gpu_pool_for(_adapter(gpus_per_job=3), cfg)
    assert str(e.value) == ("model=big needs 3 GPU(s) per job but devices= gives 2 (0,1); add GPUs or lower "
                            "model.gpus_per_job")


def test_a_pool_needs_a_devices_setting_with_gpus_and_takes_the_lock_dir(tmp_path):
    assert runner.pool_from_config(RunConfig.from_mapping({})) is None
    assert runner.pool_from_config(RunConfig.from_mapping({"devices": []})) is None
    pool = runner.pool_from_config(RunConfig.from_mapping({"devices": "2,3", "gpu_lock_dir": str(tmp_path)}))
    assert pool.devices == ["2", "3"] and pool.lock_dir == tmp_path
    from harness.gpu_pool import default_lock_dir

    assert runner.pool_from_config(RunConfig.from_mapping({"devices": [4]})).lock_dir == default_lock_dir()


def test_a_run_is_complete_when_every_item_is_done_compiled_or_failed(tmp_path):
    items = _items(5)
    for item, status in zip(items, ["done", "compiled", "failed", "running"]):
        d = tmp_path / item.rel_dir
        d.mkdir(parents=True)
        (d / "meta.json").write_text(json.dumps({"status": status}))
    assert runner.run_complete(tmp_path, items) == items[3:]
    assert runner.run_complete(str(tmp_path), items[:3]) == []
