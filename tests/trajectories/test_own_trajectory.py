"""A trajectory of the user's own: ``trajectory/<name>.yaml`` in a folder given with ``--config-dir``
(docs/trajectories.md, "A trajectory of your own"). The plan reads the option where Hydra found it, not only in
the ``conf`` package (it used to look for ``conf/trajectory/<name>.yaml`` and fail with a raw FileNotFoundError)."""

from __future__ import annotations

import yaml

from harness.config_groups import conf_dir
from tests.support.cli import in_process_cli

SMALL = ("model.height=96", "model.width=160", "model.num_frames=61", "cases.include=[environment_rocket]",
         "evaluate=off", "progress=false", "dry_run=true")


def _own_trajectory(folder, name: str, **changes) -> None:
    """``<folder>/trajectory/<name>.yaml``: the built-in LRLR under another name, standing in for ``lrlr``."""
    spec = yaml.safe_load((conf_dir() / "trajectory" / "lrlr.yaml").read_text())
    spec.update(name=name, variant_of="lrlr", **changes)
    (folder / "trajectory").mkdir(parents=True)
    (folder / "trajectory" / f"{name}.yaml").write_text(yaml.safe_dump(spec))


def test_a_trajectory_from_a_config_dir_runs_on_the_cases_of_its_variant(tmp_path, monkeypatch, capsys):
    _own_trajectory(tmp_path / "conf", "my_lrlr")
    (tmp_path / "work").mkdir()
    cli = in_process_cli(monkeypatch, tmp_path / "work", capsys)
    r = cli("--config-dir", str(tmp_path / "conf"), "trajectory=my_lrlr", "run=d", *SMALL)
    assert r.code == 0, r.err
    assert "compiled (dry run)      1" in r.out
    (item,) = (tmp_path / "work" / "outputs" / "d").glob("*/*/*/my_lrlr/environment_rocket")
    assert (item / "camera.npz").is_file()


def test_its_name_still_labels_its_own_file(tmp_path, monkeypatch, capsys):
    """The label check reads the user's file too: a renamed path whose cycles differ from it is refused."""
    _own_trajectory(tmp_path / "conf", "my_lrlr")
    (tmp_path / "work").mkdir()
    cli = in_process_cli(monkeypatch, tmp_path / "work", capsys)
    r = cli("--config-dir", str(tmp_path / "conf"), "trajectory=lrud", "trajectory.name=my_lrlr", "run=d", *SMALL)
    assert r.code == 2, r.text
    assert "trajectory.name='my_lrlr' labels a path whose" in r.err and "choose trajectory=my_lrlr" in r.err
