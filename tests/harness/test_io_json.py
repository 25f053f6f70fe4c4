"""Strict JSON from every writer of ``harness.io``: a NaN or an infinity (an undefined statistic) is written as
``null``, never as a bare ``NaN`` that a strict parser (RFC 8259, JavaScript's ``JSON.parse``, jq) refuses; a
sealed file keeps its seal through that encoding; a reader maps ``null`` back to NaN where it expects a number."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.io import json_text, read_json, seal_problem, strict_json, write_json, write_sealed_json


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_strict_json_turns_every_non_finite_float_into_null():
    got = strict_json({"a": np.float32(0.5), "b": np.float32("nan"), "c": [np.float16("inf"), np.int64(3)],
                       "d": (float("-inf"), 1.5), "e": np.array([1.0, np.nan]), "f": {"g": [float("nan")]}})
    assert got == {"a": 0.5, "b": None, "c": [None, 3], "d": [None, 1.5], "e": [1.0, None], "f": {"g": [None]}}
    assert type(got["a"]) is float and type(got["c"][1]) is int


@pytest.mark.parametrize("compact", [False, True])
def test_json_text_is_strict_and_keeps_every_finite_value(compact):
    data = {"mean": float("nan"), "lo": -math.inf, "values": np.array([0.25, np.nan, 1e308]), "n": np.int64(3),
            "nested": [{"x": np.float64("nan"), "y": "NaN"}], "ok": 1.5}
    back = _strict(json_text(data, compact))
    assert back == {"mean": None, "lo": None, "values": [0.25, None, 1e308], "n": 3,
                    "nested": [{"x": None, "y": "NaN"}], "ok": 1.5}  # a string "NaN" stays a string
    assert json_text({"a": 1.0}, compact) == json.dumps({"a": 1.0}, **({"separators": (",", ":")} if compact
                                                                      else {"indent": 2})) + "\n"


def test_other_encoder_errors_still_raise():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        json_text(loop)


def test_written_files_parse_strictly_and_a_sealed_one_keeps_its_seal(tmp_path):
    write_json(tmp_path / "a.json", {"rho": float("nan"), "rho_reason": "fewer than 3 arms"})
    assert _strict((tmp_path / "a.json").read_text()) == {"rho": None, "rho_reason": "fewer than 3 arms"}
    sealed = write_sealed_json(tmp_path / "m.json", {"value": 0.5, "details": {"per_revisit": [0.9, float("nan")]}})
    back = _strict((tmp_path / "m.json").read_text())
    assert back["details"]["per_revisit"] == [0.9, None] and sealed["details"]["per_revisit"] == [0.9, None]
    assert seal_problem(read_json(tmp_path / "m.json")) is None  # sealed as written: null, not NaN


def test_a_null_revisit_reads_back_as_nan():
    from evaluate.results import MetricEntry

    m = MetricEntry.from_dict({"metric": "m", "backbone": "b", "status": "computed", "value": 0.5,
                               "per_revisit": [0.9, None]})
    pr = m.per_revisit
    assert pr is not None and pr[0] == 0.9 and math.isnan(pr[1])


def test_a_computed_nan_value_round_trips_and_an_absent_one_stays_absent(tmp_path):
    """A computed metric whose value is NaN is written as ``"value": null`` (strict JSON) and read back as NaN, so a
    rerun that reuses the stored metrics averages it like the first run did; an entry without a value (not
    computed) reads back as None."""
    from evaluate.results import MetricEntry, Status

    nan = MetricEntry("m", "b", Status.COMPUTED, value=float("nan"))
    write_json(tmp_path / "m.json", nan.to_dict())
    back = MetricEntry.from_dict(read_json(tmp_path / "m.json"))
    assert back.value is not None and math.isnan(back.value)
    skipped = MetricEntry.from_dict({"metric": "m", "backbone": "b", "status": "not_computed", "reason": "no weights"})
    assert skipped.value is None
