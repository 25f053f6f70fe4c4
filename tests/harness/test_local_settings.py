"""Per-model local settings (``conf/local/default.yaml``, one block per model), using the snippet documented in
docs/real-models.md verbatim. The local file is placed on a temporary Hydra search path, never in the repo."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.support import ROOT, compose, run_cli


def documented_snippet() -> str:
    text = (ROOT / "docs" / "real-models.md").read_text()
    m = re.search(r"<!-- local-snippet -->\s*```yaml\n(.*?)```", text, re.S)
    assert m, "docs/real-models.md lost its local-settings snippet"
    return m.group(1)


@pytest.fixture
def local_dir(tmp_path):
    d = tmp_path / "localconf"
    (d / "local").mkdir(parents=True)
    (d / "local" / "default.yaml").write_text(documented_snippet())
    return d


def _compose(local_dir, *overrides):
    return compose([f"hydra.searchpath=[file://{local_dir}]", *overrides])


def test_snippet_merges_only_into_its_own_model(local_dir):
    from adapters.base import build_adapter
    from harness.config_groups import model_config_with_local

    blocks = yaml.safe_load(documented_snippet())["models"]
    for model in ("lingbot_v2", "matrix_game3", "evoke"):
        cfg = _compose(local_dir, f"model={model}")
        merged = model_config_with_local(*_model_and_local(cfg))
        for key, value in blocks[model].items():
            assert merged[key] == value
        adapter = build_adapter(merged)  # every documented field is a real field of that model
        assert adapter.config.upstream_dir == blocks[model]["upstream_dir"]
    cfg = _compose(local_dir, "model=matrix_game3")
    assert "captioner" not in model_config_with_local(*_model_and_local(cfg))  # YUME's block does not leak into MG-3


def test_snippet_leaves_the_reference_model_untouched(local_dir):
    from adapters.base import build_adapter
    from harness.config_groups import model_config_with_local

    cfg = _compose(local_dir, "model=reference")
    assert model_config_with_local(*_model_and_local(cfg)) == cfg["model"]
    build_adapter(model_config_with_local(*_model_and_local(cfg)))  # no "unknown field for model 'reference'"


def test_bad_local_blocks_name_the_key(tmp_path):
    from adapters.base import ModelConfigError, build_adapter
    from harness.config_groups import UnknownChoiceError, model_config_with_local

    d = tmp_path / "c"
    (d / "local").mkdir(parents=True)
    (d / "local" / "default.yaml").write_text("models:\n  lingbot_v3:\n    checkpoint: /x\n")
    with pytest.raises(UnknownChoiceError, match=r"local.models.lingbot_v3.*lingbot_v2"):
        model_config_with_local(*_model_and_local(compose([f"hydra.searchpath=[file://{d}]", "model=lingbot_v2"])))
    (d / "local" / "default.yaml").write_text("models:\n  lingbot_v2:\n    checkpont: /x\n")
    with pytest.raises(ModelConfigError, match="model.checkpont"):
        cfg = compose([f"hydra.searchpath=[file://{d}]", "model=lingbot_v2"])
        build_adapter(model_config_with_local(*_model_and_local(cfg)))


@pytest.mark.slow
def test_documented_local_recipe_runs_the_study_dry_run_and_the_default_run(local_dir, tmp_path):
    """The nine-model dry run and the default (reference) run both work with the documented local file."""
    out = tmp_path / "out"
    sp = f"hydra.searchpath=[file://{local_dir}]"
    r = run_cli(["-m", "experiment=nine_model_study", "dry_run=true", sp, "cases.include=[environment_rocket]",
                 f"output_root={out}", "progress=false"], cwd=tmp_path, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    metas = [json.loads(p.read_text()) for p in (out / "nine_model_study").rglob("meta.json")]
    assert len(metas) == 9 * 4 and all(m["status"] == "compiled" for m in metas)
    by_model = {m["model"]["name"]: m["model"] for m in metas}
    assert by_model["lingbot_v2"]["upstream_dir"] == "/ckpt/repos/lingbot-world-v2"
    assert by_model["dreamx"]["upstream_dir"] == "/ckpt/repos/DreamX-World"
    # the paths do not exist here: a log line of each job, shown in the sweep's line about it
    assert "readiness (error, not enforced in a dry run)" in r.stdout + r.stderr
    r = run_cli([sp, "debug=default", f"output_root={out}"], cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]


def test_global_package_variant_also_works(tmp_path):
    """With ``# @package _global_`` the blocks live under ``local.models`` (and other global keys may follow)."""
    from harness.config_groups import model_config_with_local

    d = tmp_path / "g"
    (d / "local").mkdir(parents=True)
    (d / "local" / "default.yaml").write_text("# @package _global_\nlocal:\n  models:\n    lingbot_v2:\n"
                                              "      checkpoint: /x\nrun: mine\n")
    cfg = compose([f"hydra.searchpath=[file://{d}]", "model=lingbot_v2"])
    assert model_config_with_local(*_model_and_local(cfg))["checkpoint"] == "/x" and cfg["run"] == "mine"


def _model_and_local(cfg):
    """The two sections ``model_config_with_local`` merges."""
    return cfg["model"], cfg.get("local")
