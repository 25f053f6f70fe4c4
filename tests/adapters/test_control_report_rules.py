"""Rules of the controls report (adapters/controls/report.py) and Matrix-Game 3's controls, one per test, in process."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from adapters.controls import report
from adapters.matrix_game3 import controls as mg3_controls
from adapters.upstream import UpstreamAdapter
from trajectories.conventions import rot_y, se3

P1 = mg3_controls.MG3Params(hold_frames=1)  # one-row blocks: the encoder's per-frame rules, one at a time
P12 = mg3_controls.MG3Params()  # upstream's own hold of 12 rows


# ==================================================================================================================
# the report's rows, measured on a stand-in adapter whose paths and decoded poses are chosen here
# ==================================================================================================================

def _path(deg_per_frame, segments=(), clock=None, dx=0.0):
    """A path of rotations about y by ``deg_per_frame[t]`` degrees (and ``dx`` scene units along x at every frame)."""
    c2w = se3(np.stack([rot_y(np.radians(d)) for d in deg_per_frame]),
              np.tile([dx, 0.0, 0.0], (len(deg_per_frame), 1)))
    segs = [SimpleNamespace(kind=k, phase=ph, end=end) for k, ph, end in segments]
    return SimpleNamespace(c2w=c2w, num_frames=len(c2w), segments=segs,
                           params={} if clock is None else {"upstream_clock": clock})


class _Adapter(UpstreamAdapter):
    """An upstream adapter reduced to what ``measure`` calls: its item and nominal paths and what it decodes to."""

    def __init__(self, item, nominal, decoded):  # no config file, no contract: nothing but the three paths
        self.config = SimpleNamespace(paper_context="native", seed=7)
        self.item, self.nominal, self.decoded, self.compiled = item, nominal, decoded, []

    def canvas_K(self, case):
        return np.eye(3)

    def path_for(self, spec, K, name):
        return self.item

    def _build_path(self, spec, K, name):
        return self.nominal

    def compile(self, req):
        self.compiled.append(req.item_dir)

    def decode(self, controls_dir, req):
        return self.decoded.c2w

    def write_native(self, req, image, K):  # pragma: no cover - measure never writes
        raise AssertionError

    def launch(self, req, controls):  # pragma: no cover - measure never launches
        raise AssertionError


def _measure(monkeypatch, tmp_path, item, nominal, decoded):
    import adapters.base
    import harness.cases

    a = _Adapter(item, nominal, decoded)
    monkeypatch.setattr(adapters.base, "build_adapter", lambda cfg: a)
    monkeypatch.setattr(harness.cases, "load_case_set", lambda name: [SimpleNamespace(id="environment_rocket")])
    row = report.measure("matrix_game3", "lrlr", tmp_path)
    assert a.compiled == [tmp_path / "matrix_game3" / "lrlr"]
    return row


#: frames 0..8: a move L (ends at 3), a hold whose phase starts with R (ends at 5), a return move R (ends at 8)
SEGMENTS = (("move", "L1", 3), ("hold", "R_hold", 5), ("move", "R1", 8))
#: the decoded path's rotation error per frame (degrees): frame 7 is the only return frame (the R move's last)
ERR = [0.0, 1.0, 5.0, 2.0, 6.0, 3.0, 4.0, 0.5, 7.0]


def test_the_return_error_is_read_at_the_last_frame_of_each_return_move_only(monkeypatch, tmp_path):
    item = _path([0.0] * 9, SEGMENTS, dx=0.25)
    decoded = _path(ERR, dx=0.5)
    row = _measure(monkeypatch, tmp_path, item, item, decoded)
    assert row["decoded_return_deg"] == pytest.approx(0.5, abs=1e-9)  # frame 7, not 2 (L move) nor 4 (hold R_...)
    assert row["decoded_max_deg"] == pytest.approx(7.0, abs=1e-9)
    assert row["decoded_max_translation"] == pytest.approx(0.25, abs=1e-12)  # |0.5 - 0.25|, not the sum
    assert row["item_vs_preset_deg"] == 0.0
    assert (row["frames"], row["shift_frames"], row["laid_deg_per_frame"]) == (9, 0, [])


def test_the_return_error_is_the_largest_over_every_return(monkeypatch, tmp_path):
    item = _path([0.0] * 6, (("move", "R1", 3), ("move", "R2", 6)), dx=1.0)
    decoded = _path([0.0, 0.0, 2.0, 0.0, 0.0, 3.0], dx=1.0)  # frames 2 and 5: the two returns
    translated = _path([0.0] * 6, dx=1.0)
    translated.c2w[4, 0, 3] = 1.75  # one frame off by 0.75 along x
    row = _measure(monkeypatch, tmp_path, item, item, decoded)
    assert row["decoded_return_deg"] == pytest.approx(3.0, abs=1e-9)
    assert _measure(monkeypatch, tmp_path, item, item, translated)["decoded_max_translation"] == 0.75


def test_a_path_without_a_return_move_reports_zero_at_the_returns(monkeypatch, tmp_path):
    item = _path([0.0] * 4, (("move", "L1", 4),))
    row = _measure(monkeypatch, tmp_path, item, item, _path([0.0, 2.0, 2.0, 2.0]))
    assert row["decoded_return_deg"] == 0.0 and row["decoded_max_deg"] == pytest.approx(2.0, abs=1e-9)


def test_the_laid_speeds_are_rounded_to_4_decimals_deduplicated_and_sorted(monkeypatch, tmp_path):
    clock = {"max_shift_frames": 3, "laid_deg_per_frame": [0.75, 0.123456, 0.12345, 0.75]}
    item = _path([0.0, 1.0, 2.0], clock=clock)
    nominal = _path([0.0, 1.5, 2.0])
    row = _measure(monkeypatch, tmp_path, item, nominal, item)
    assert row["laid_deg_per_frame"] == [0.1235, 0.75] and row["shift_frames"] == 3
    assert row["item_vs_preset_deg"] == pytest.approx(0.5, abs=1e-9)


def test_the_row_table_shows_the_laid_speeds_or_a_dash_when_none_were_laid():
    row = {"model": "m", "trajectory": "t", "frames": 9, "shift_frames": 2, "decoded_max_deg": 1.23456,
           "decoded_return_deg": 0.0, "decoded_max_translation": 0.5, "item_vs_preset_deg": 2.0}
    lines = report.table([dict(row, laid_deg_per_frame=[0.75, 1.0]), dict(row, laid_deg_per_frame=[])]).split("\n")
    assert lines[2:] == ["| m | t | 9 | 2 | 0.75, 1 | 1.23 / 0 | 0.5 | 2 |", "| m | t | 9 | 2 | - | 1.23 / 0 | 0.5 | 2 |"]


# ==================================================================================================================
# the command line: which trajectories it measures (the trajectory group and measure stand in)
# ==================================================================================================================

TRAJ = {"a": {"deg_per_frame": 0.75}, "b": {}, "c": {"deg_per_frame": 0}}


@pytest.fixture
def cli(monkeypatch, capsys):
    """``run(argv)`` -> (exit status, the (model, trajectory) pairs measured, stdout)."""
    import harness.config_groups as cg

    real = cg.group_yaml
    monkeypatch.setattr(cg, "list_group", lambda g: list(TRAJ) if g == "trajectory" else [])
    monkeypatch.setattr(cg, "group_yaml", lambda g, n: TRAJ[n] if g == "trajectory" else real(g, n))
    seen: list[tuple[str, str]] = []

    def fake(m, t, work):
        seen.append((m, t))
        return {"model": m, "trajectory": t, "frames": 1, "shift_frames": 0, "laid_deg_per_frame": [],
                "decoded_max_deg": 0.0, "decoded_return_deg": 0.0, "decoded_max_translation": 0.0,
                "item_vs_preset_deg": 0.0}

    monkeypatch.setattr(report, "measure", fake)

    def run(argv):
        seen.clear()
        rc = report.main(argv)
        return rc, list(seen), capsys.readouterr().out

    return run


def test_release_measures_the_presets_with_a_speed_all_measures_every_one_and_names_are_kept_in_order(cli):
    assert cli(["--models", "yume"])[:2] == (0, [("yume", "a"), ("yume", "c")])  # deg_per_frame 0 is a speed
    assert cli(["--models", "yume", "--trajectories", "all"])[:2] == (0, [("yume", "a"), ("yume", "b"),
                                                                          ("yume", "c")])
    rc, seen, out = cli(["--models", "yume,lingbot", "--trajectories", "b,a"])
    assert (rc, seen) == (0, [("yume", "b"), ("yume", "a"), ("lingbot", "b"), ("lingbot", "a")])
    assert out.splitlines()[2] == "| yume | b | 1 | 0 | - | 0 / 0 | 0 | 0 |"


def test_the_help_describes_the_report_by_the_docstrings_first_line(capsys):
    with pytest.raises(SystemExit) as exc:
        report.main(["--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "What each model's controls cost on each trajectory, measured: ``python -m adapters.controls.report``." in out


# ==================================================================================================================
# Matrix-Game 3's blocks and clock: upstream's hold of 12 rows by default
# (SkyworkAI/Matrix-Game@71c3cd7f7413 Matrix-Game-3/utils/conditions.py:12, :21-32, ``selections = [12]``)
# ==================================================================================================================

def test_mg3_blocks_default_to_row_0_alone_then_12_rows_each():
    assert mg3_controls.mg3_blocks(27) == [(0, 1), (1, 13), (13, 25), (25, 27)]


def test_mg3_clock_defaults_to_every_block_start_and_the_last_pose():
    assert mg3_controls.mg3_clock(27).tolist() == [0, 1, 13, 25, 26]
    assert mg3_controls.mg3_clock(25).tolist() == [0, 1, 13, 24]


# ==================================================================================================================
# Matrix-Game 3's per-axis encoder: where a move ends and where its lag goes
# ==================================================================================================================

def test_mg3_a_lag_folded_at_a_move_end_brings_the_state_to_the_target_for_the_next_move():
    # pose 2's 0.2 deg step is under the dead zone (0.3 deg); the hold after it ends the move, the lag is folded into
    # row 0, and the next move (pose 4) starts from 1.2 deg, so it sends exactly its own 1 deg
    m = mg3_controls._mg3_axis(np.array([0.0, 1.0, 1.2, 1.2, 2.2, 2.2]), P1)
    assert m == pytest.approx([1.2 / 15, 0.0, 0.0, 1.0 / 15, 0.0, 0.0], abs=1e-12)


def test_mg3_a_move_ending_inside_a_12_row_block_folds_its_lag_there_not_into_the_next_block():
    # T=16: blocks (0,1), (1,13), (13,16). Row 0 sends 1 deg; poses 1..13 ramp 1.0 -> 2.2 deg (1.2/180 units per
    # row: under the dead zone); the hold from pose 13 ends the move, so the lag goes into row 0, not the last block
    target = np.r_[0.0, np.linspace(1.0, 2.2, 13), 2.2, 2.2]
    m = mg3_controls._mg3_axis(target, P12)
    assert m == pytest.approx(np.r_[2.2 / 15, np.zeros(15)], abs=1e-12)


def test_mg3_a_step_of_exactly_1e_9_degrees_counts_as_a_hold():
    # the move -1 -> -0.2 -> 0 ends at pose 3 (its 0.2 deg lag folded into row 1); pose 4 drifts by exactly 1e-9
    m = mg3_controls._mg3_axis(np.array([0.0, -1.0, -0.2, 0.0, 1e-9, 1e-9]), P1)
    assert m[1] == 0.8 / 15 + 0.2 / 15 and m[0] == -1.0 / 15 and not m[2:].any()


def test_mg3_the_lag_goes_to_the_latest_value_of_its_sign_past_a_later_value_of_the_other():
    m = mg3_controls._mg3_axis(np.array([0.0, 1.0, 2.0, 1.0, 1.2, 1.2]), P1)
    assert m == pytest.approx([1.0 / 15, 1.2 / 15, -1.0 / 15, 0.0, 0.0, 0.0], abs=1e-12)


def test_mg3_a_lag_of_at_most_1e_12_units_is_not_folded():
    # row 0 sends 1 deg; the move swings to 1.5 deg and ends at 1 + 1e-13 deg: a lag of ~7e-15 units is float noise
    target = np.r_[0.0, 1.0, np.full(11, 1.5), 1.0 + 1e-13, 1.0 + 1e-13]
    m = mg3_controls._mg3_axis(target, P12)
    assert m[0] == 1.0 / 15 and not m[1:].any()
