"""Compile caches (adapters/memo.py): a cached compile writes the bytes an uncached one writes, and a change of
anything a cached result depends on is a miss. Not timed (the timing is `python -m harness.bench plan`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from adapters import memo
from tests.support import compose

MODELS = ("hy_worldplay", "matrix_game3", "yume", "dreamx", "lingbot_v2", "evoke")


@pytest.fixture(autouse=True)
def _fresh_caches():
    memo.clear()
    old = memo.set_enabled(True)
    yield
    memo.set_enabled(old)
    memo.clear()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from harness.app.benchmarks.plan import write_case_set
    from harness.cases import load_case_set

    folder = write_case_set(tmp_path_factory.mktemp("cases"), 9)
    by_id = {c.id: c for c in load_case_set(folder)}
    # cases 0 and 8 share image size and field of view (one K: the cached path and controls are reused);
    # case 4 has the same size and another field of view, so another K
    return [by_id["environment_0000"], by_id["environment_0008"], by_id["environment_0004"]]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _compile_all(model_cfg: dict, cases, trajectory: str, root: Path, context: str | None = None):
    from adapters.base import ItemRequest, build_adapter
    from harness.context import ContextPolicy
    from harness.config_groups import group_yaml
    from trajectories import TrajectorySpec

    adapter = build_adapter(model_cfg)
    policy = ContextPolicy.from_dict(group_yaml("context", context or adapter.config.paper_context))
    spec = TrajectorySpec.from_dict(group_yaml("trajectory", trajectory))
    out = []
    for case in cases:
        path = adapter.path_for(spec, adapter.canvas_K(case), trajectory)
        req = ItemRequest(case=case, path=path, context=policy, seed=adapter.config.seed, item_dir=root / case.id)
        controls = adapter.compile(req)
        out.append((path, controls))
    return out


def _cached_vs_uncached(model_cfg: dict, cases, trajectory: str, root: Path, context: str | None = None,
                        warm: dict | None = None):
    """Compile with the caches on (warmed by ``warm``, another config, when given), then with them off, into the
    same folder; return both snapshots and results."""
    if warm is not None:
        _compile_all(warm, cases, trajectory, root / "warm", context)
    cached = _compile_all(model_cfg, cases, trajectory, root / "run", context)
    snap_cached = _snapshot(root / "run")
    shutil.rmtree(root / "run")
    memo.set_enabled(False)
    plain = _compile_all(model_cfg, cases, trajectory, root / "run", context)
    memo.set_enabled(True)
    return snap_cached, _snapshot(root / "run"), cached, plain


def _assert_same(cached, plain):
    for (pc, cc), (pp, cp) in zip(cached, plain):
        assert np.array_equal(pc.c2w, pp.c2w) and np.array_equal(pc.K, pp.K)
        assert (pc.fps, pc.height, pc.width, pc.phases) == (pp.fps, pp.height, pp.width, pp.phases)
        assert cc.command == cp.command
        assert json.dumps(cc.meta, sort_keys=True, default=str) == json.dumps(cp.meta, sort_keys=True, default=str)
        assert np.array_equal(cc.decoded_c2w, cp.decoded_c2w)


@pytest.mark.parametrize("model", MODELS)
def test_cached_compile_writes_the_uncached_bytes(model, cases, tmp_path):
    from harness.config_groups import group_yaml

    snap_c, snap_p, cached, plain = _cached_vs_uncached(group_yaml("model", model), cases, "lrlr", tmp_path)
    assert snap_c.keys() == snap_p.keys() and len(snap_c) > 3 * 3
    assert [k for k in snap_c if snap_c[k] != snap_p[k]] == []
    _assert_same(cached, plain)
    # the two cases with one K shared the camera path (built once); the third has its own
    assert cached[0][0] is cached[1][0] and cached[2][0] is not cached[0][0]
    assert not cached[0][0].c2w.flags.writeable


@pytest.mark.parametrize("change", [{"fps": 12.0}, {"height": 352, "width": 640}, {"default_hfov_deg": 75.0}])
def test_a_changed_cache_key_input_is_a_miss(change, cases, tmp_path):
    """Warm the caches with the stock config, then compile a changed one: identical to compiling it uncached."""
    from harness.config_groups import group_yaml

    base = group_yaml("model", "sana_wm")
    changed = {**base, **change}
    snap_c, snap_p, cached, plain = _cached_vs_uncached(changed, cases, "lrud", tmp_path, warm=base)
    assert [k for k in snap_c if snap_c[k] != snap_p[k]] == [] and snap_c.keys() == snap_p.keys()
    _assert_same(cached, plain)
    warm = _snapshot(tmp_path / "warm")
    assert any(warm[k] != snap_c[k] for k in snap_c if k in warm)  # the change reached the files
    if "fps" in change:
        assert cached[0][0].fps == 12.0


def test_a_changed_context_policy_is_a_miss(cases, tmp_path):
    from harness.config_groups import group_yaml

    cfg = group_yaml("model", "lingbot_v2")
    _compile_all(cfg, cases[:1], "lrlr", tmp_path / "warm", context="fov")
    snap_c, snap_p, _, _ = _cached_vs_uncached(cfg, cases[:1], "lrlr", tmp_path, context="sliding")
    assert snap_c == snap_p and not any("context_selection" in k for k in snap_c)


def test_a_changed_image_is_a_miss(cases, tmp_path):
    """The canvas file is copied only while the source image is unchanged (identity: inode, mtime, size)."""
    import cv2

    from harness.cases import load_case_set
    from harness.config_groups import group_yaml

    folder = tmp_path / "set"
    shutil.copytree(Path(cases[0].source).parent, folder)
    case = {c.id: c for c in load_case_set(folder)}["environment_0000"]
    cfg = group_yaml("model", "evoke")
    _compile_all(cfg, [case], "lrlr", tmp_path / "a")
    img = cv2.imread(str(folder / case.image))
    cv2.imwrite(str(folder / case.image), 255 - img)  # same size, new pixels
    _compile_all(cfg, [case], "lrlr", tmp_path / "b")
    memo.set_enabled(False)
    _compile_all(cfg, [case], "lrlr", tmp_path / "c")
    png = "controls/image.png"
    b, c = (tmp_path / x / case.id / png for x in "bc")
    assert b.read_bytes() == c.read_bytes() != (tmp_path / "a" / case.id / png).read_bytes()


def test_memo_keys_on_values_and_hands_out_copies():
    calls = []

    @memo.memo
    def f(a, p=1):
        calls.append(1)
        return {"x": a * p}

    a = np.arange(6.0)
    r1 = f(a)
    r1["x"][0] = 99.0  # a caller mutating its result does not change the cache
    assert f(a.copy())["x"][0] == 0.0 and len(calls) == 1
    b = a.copy()
    b[5] = 5.0000001
    f(b)
    f(a, p=2)
    f(a.astype(np.float32))
    assert len(calls) == 4


def test_dry_run_writes_no_preview_unless_asked(tmp_path):
    from harness.app.runner import plan_from_config, run_items

    small = ["model.height=96", "model.width=160", "model.num_frames=65", "progress=false", "dry_run=true",
             "cases.include=[environment_rocket,object_coffee]", f"output_root={tmp_path}"]
    for previews, run in ((False, "off"), (True, "on")):
        cfg = compose([*small, f"run={run}"])
        plan = plan_from_config(cfg)
        s = run_items(plan, dry_run=True, progress=False, previews=previews)
        assert len(s.compiled) == 2 and not s.failed
        metas = sorted((tmp_path / run).glob("*/*/seed-*/*/*/meta.json"))
        assert len(metas) == 2
        assert all((m.parent / "preview.png").is_file() == previews for m in metas)
        rows = (tmp_path / run / "manifest.jsonl").read_text().splitlines()
        assert sorted(json.loads(r)["key"] for r in rows) == sorted(i.key for i in plan.items)
        assert all(json.loads(r)["status"] == "compiled" for r in rows)
