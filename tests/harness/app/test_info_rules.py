"""``list``, ``validate`` and ``preview`` (``harness/app/commands/info.py``), one rule at a time in this process: the
config is composed for real; the case loader and the drawing of a preview are stand-ins where a test reads only what
the command does with them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.app.commands import info
from harness.errors import UserError
from tests.support.run_configs import run_config


@pytest.fixture(scope="module")
def preview_cfg(tmp_path_factory):
    root = tmp_path_factory.mktemp("out")
    # an output root not made yet: the previews folder is made with its parents
    return run_config("cmd=preview", "model=reference", f"output_root={root / 'not' / 'yet'}")


# -- validate --------------------------------------------------------------------------------------------------------


class _Case:
    def __init__(self, case_id: str, family: str, objects: tuple[str, ...], shape=(30, 50, 3)) -> None:
        self.id, self.family, self.trajectories = case_id, family, ["lrlr", "square"]
        self.targets = SimpleNamespace(objects=list(objects))
        self.shape, self.calls = shape, []

    def load_image(self) -> np.ndarray:
        self.calls.append("image")
        return np.zeros(self.shape, np.uint8)

    def load_depth(self) -> None:
        self.calls.append("depth")

    def object_mask(self, obj: str, h: int, w: int) -> None:
        self.calls.append(("mask", obj, h, w))


def test_validate_loads_each_cases_image_depth_and_masks_at_the_images_size(monkeypatch, capsys):
    cases = [_Case("object_cup", "object", ("cup", "saucer")), _Case("env", "environment", ())]
    monkeypatch.setattr("harness.cases.load_cases_from_config", lambda c: cases)
    info.cmd_validate(SimpleNamespace(cases=SimpleNamespace(source="folder:/cases")))
    assert cases[0].calls == ["image", "depth", ("mask", "cup", 30, 50), ("mask", "saucer", 30, 50)]
    assert cases[1].calls == ["image", "depth"]
    assert capsys.readouterr().out.splitlines() == [
        f"ok  {'object_cup':<28} {'object':<12} 50x30  trajectories=lrlr,square",
        f"ok  {'env':<28} {'environment':<12} 50x30  trajectories=lrlr,square",
        "2 case(s) valid in folder:/cases"]


# -- preview ---------------------------------------------------------------------------------------------------------


def test_preview_draws_the_models_path_and_saves_it_beside_the_png(preview_cfg, monkeypatch, capsys):
    drawn = []
    monkeypatch.setattr("trajectories.preview.preview_path",  # the drawing finds its folder made
                        lambda path, out: drawn.append((path.num_frames, out)) if out.parent.is_dir() else None)
    info.cmd_preview(preview_cfg)
    folder = Path(preview_cfg.output_root) / "previews"
    png = folder / f"{preview_cfg.trajectory.name}_reference.png"
    T = preview_cfg.model.num_frames
    assert drawn == [(T, png)] and png.with_suffix(".npz").is_file()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {png} and {png.with_suffix('.npz')}"
    assert out[1].startswith("phases: V=[0,") and out[1].endswith(f",{T})")
    info.cmd_preview(preview_cfg)  # again: the folder exists, the files are replaced
    assert len(drawn) == 2


def test_preview_refuses_a_trajectory_name_that_is_no_plain_name_before_writing(preview_cfg, monkeypatch, tmp_path):
    model, context, _ = preview_cfg.chosen()
    bad = SimpleNamespace(output_root=str(tmp_path), chosen=lambda: (model, context, SimpleNamespace(name="../up")))
    monkeypatch.setattr("adapters.base.build_adapter", lambda model: pytest.fail("built before the name check"))
    with pytest.raises(UserError, match=r"trajectory\.name='\.\./up'"):
        info.cmd_preview(bad)
    assert not (tmp_path / "previews").exists()


# -- list ------------------------------------------------------------------------------------------------------------


def test_list_prints_each_group_with_its_options_and_descriptions(monkeypatch, capsys):
    monkeypatch.setattr("harness.config_groups.list_group", lambda g: ["a", "long_option_name_x"] if g == "model" else [])
    monkeypatch.setattr("harness.config_groups.group_description", lambda g, n: "" if n == "a" else "does x")
    info.cmd_list(None)
    assert capsys.readouterr().out.splitlines() == [
        "model:", "  a", f"  {'long_option_name_x':<18}does x", "backend:", "context:", "trajectory:", "cases:",
        "launcher:", "experiment:"]
