"""Phase labels are parsed in one place: every label a builder writes round-trips, and anything else is refused."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from trajectories import TrajectorySpec, build_path
from trajectories.conventions import intrinsics_from_fov
from trajectories.phases import Phase, PhaseKind, count, departure, numbered, revisit


@pytest.mark.parametrize("name,frames", [("lrlr", 193), ("lrlrlr", 289), ("lrud", 193), ("square", 193)])
def test_every_built_label_round_trips_and_windows_are_in_order(name, frames):
    from harness.config_groups import group_yaml

    path = build_path(TrajectorySpec.from_dict(group_yaml("trajectory", name)), frames, 16.0,
                      intrinsics_from_fov(60.0, 160, 96), 96, 160)
    labels = list(path.phases)
    assert [Phase.parse(x).label for x in labels] == labels
    assert labels[0] == "V" and labels[-1] == "H"
    wins = numbered(path.phases, PhaseKind.RETURN)
    assert wins == path.revisit_windows() and len(wins) == path.num_revisits == count(path.phases, PhaseKind.RETURN)
    assert all(a < b <= c for (a, b), (c, _) in zip(wins, wins[1:]))
    # every return follows its own departure
    for k, (r0, _) in enumerate(wins, start=1):
        assert path.phases[departure(k)][1] <= r0 == path.phases[revisit(k)][0]


@pytest.mark.parametrize("bad", ["R0", "R", "D", "V1", "H2", "X1", "r1", "R01", "", "R1a"])
def test_labels_that_are_not_phases_are_refused(bad):
    with pytest.raises(ConfigError, match="phase"):
        Phase.parse(bad)


def test_numbering_stops_at_the_first_gap():
    phases = {"V": (0, 4), "D1": (4, 8), "R1": (8, 12), "R3": (12, 16), "H": (16, 20)}
    assert numbered(phases, PhaseKind.RETURN) == [(8, 12)] and count(phases, PhaseKind.DEPART) == 1
    assert Phase.parse("R3") > Phase.parse("R1") and str(Phase(PhaseKind.DEPART, 2)) == "D2"


def test_phase_at_uses_half_open_ranges():
    from trajectories.phases import phase_at

    phases = {"V": (0, 4), "D1": (4, 8), "R1": (8, 12), "H": (12, 16)}
    assert [phase_at(phases, t) for t in (0, 3, 4, 7, 8, 11, 12, 15)] == ["V", "V", "D1", "D1", "R1", "R1", "H", "H"]
    assert phase_at(phases, 16) is None and phase_at(phases, -1) is None
