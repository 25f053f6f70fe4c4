"""``EvalConfig.from_dict``: pydantic checks the declared types and bounds, the error is the project's message."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from evaluate.config import EvalConfig
from harness.errors import ConfigError


def test_values_are_kept_as_given() -> None:
    """An integer given for a number stays an integer (each ``metrics.json`` records the settings as given); lists
    become tuples; a partial ``bootstrap`` keeps its keys in their order; the judge's defaults are filled in."""
    cfg = EvalConfig.from_dict({"departure_deg": 30, "return_tolerances_deg": [30, 2.5], "encoders": ["pixel"],
                                "bootstrap": {"seed": 3, "n": 7}, "description": "ignored"})
    assert type(cfg.departure_deg) is int and type(cfg.sphere_bin_deg) is float
    assert cfg.return_tolerances_deg == (30, 2.5) and type(cfg.return_tolerances_deg[0]) is int
    assert cfg.encoders == ("pixel",) and list(cfg.bootstrap) == ["seed", "n"]
    assert asdict(cfg)["judge"] == cfg.judge.to_dict() and cfg.judge.max_tokens == 4096
    assert EvalConfig.from_dict({"bootstrap": {"n": 5}}).bootstrap == {"n": 5}


@pytest.mark.parametrize(("given", "message"), [
    ({"canvas": 7}, "evaluate.canvas=7: must be an integer >= 8 (see conf/evaluate/default.yaml)"),
    ({"rpe_stride": 2.0}, "evaluate.rpe_stride=2.0: must be an integer >= 1"),
    ({"memory_stride": True}, "evaluate.memory_stride=True: must be an integer >= 1"),
    ({"sphere_bin_deg": 0}, "evaluate.sphere_bin_deg=0: must be a number > 0 and <= 90"),
    ({"tracker_threshold": 1.5}, "evaluate.tracker_threshold=1.5: must be a number >= 0 and <= 1"),
    ({"revisit_tolerance_translation": math.inf}, "evaluate.revisit_tolerance_translation=inf: must be a number >= 0 "),
    ({"departure_deg": "30"}, "evaluate.departure_deg='30': must be a number > 0 and <= 180"),
    ({"validity": 1}, "evaluate.validity=1: use true or false"),
    ({"return_tolerances_deg": []}, "evaluate.return_tolerances_deg=[]: a list of degrees in (0, 180]"),
    ({"return_tolerances_deg": [30, 181]}, "evaluate.return_tolerances_deg=[30, 181]: a list of degrees"),
    ({"bootstrap": {"n": 1, "x": 2}}, "evaluate.bootstrap={'n': 1, 'x': 2}: a mapping {n: <resamples >= 1>"),
    ({"bootstrap": {"seed": -1, "n": 0}}, "evaluate.bootstrap.n=0: must be an integer >= 1 (the paper uses 2000)"),
    ({"bootstrap": {"seed": -1}}, "evaluate.bootstrap.seed=-1: must be an integer >= 0"),
    ({"face": "arcface"}, "evaluate.face='arcface': a list of backbone names, e.g. evaluate.face=[pixel]"),
    ({"device": 0}, "evaluate.device=0: give a name"),
    ({"ors": {"thresold": 0.1}}, "evaluate.ors.thresold: unknown field"),
])
def test_a_bad_value_names_the_setting_and_the_fix(given: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        EvalConfig.from_dict(given)
    assert str(exc.value).startswith(message)


def test_the_first_problem_is_reported_in_a_fixed_order() -> None:
    """An unknown setting before a bad value; then the numbers, the flags, the lists, the names, ors, judge."""
    def message(d: dict) -> str:
        with pytest.raises(ConfigError) as exc:
            EvalConfig.from_dict(d)
        return str(exc.value)

    assert message({"canvas": 2, "encoderz": [], "rpe_stride": 0}).startswith(
        "evaluate.encoderz: unknown setting; did you mean 'encoders'?")
    assert message({"canvas": 2, "rpe_stride": 0}).startswith("evaluate.rpe_stride=0")
    assert message({"device": 1, "enabled": "no", "face": 3}).startswith("evaluate.enabled='no'")
    assert message({"judge": {"bad": 1}, "ors": {"bad": 1}, "aesthetic": [1]}).startswith("evaluate.aesthetic=[1]")
    assert message({"judge": {"bad": 1}, "ors": {"bad": 1}}).startswith("evaluate.ors.bad")
    assert message({"judge": {"bad": 1}}).startswith("evaluate.judge.bad: unknown setting")
