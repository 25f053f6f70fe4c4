"""``python -m harness.bench reference`` prints a table and one verdict line per target (tiny sizes: fast)."""

from __future__ import annotations

import os
import re

import pytest

from harness.app.bench import main


@pytest.fixture
def keep_affinity(restore_env):
    """The benchmark pins the process to one core and sets up the project's logging and thread count (variables of
    this process): give the rest of the session its cores and environment back."""
    from harness.logs import OWN_HANDLERS

    restore_env("OMP_NUM_THREADS", *OWN_HANDLERS.values())
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    yield
    if cores is not None:
        os.sched_setaffinity(0, cores)


def test_reference_bench_prints_min_median_and_a_verdict_per_point(capsys, keep_affinity):
    rc = main(["reference", "--frames", "49", "--height", "96", "--width", "160", "--repeats", "2",
               "--trajectories", "square", "lrud", "--contexts", "fullkv", "fov", "--no-encode", "--target", "1e9"])
    out = capsys.readouterr().out
    assert rc == 0
    verdicts = re.findall(r"^(\w+/\w+): ([\d.]+) fps \(min ([\d.]+), median ([\d.]+)\) = ([\d.]+)x of 1e\+09 "
                          r"target: (met|MISSED)$", out, re.M)
    assert sorted(v[0] for v in verdicts) == ["lrud/fov", "lrud/fullkv", "square/fov", "square/fullkv"]
    for _, rate, mn, med, _ratio, verdict in verdicts:
        assert float(mn) <= float(med) == float(rate) and float(rate) > 0
        assert verdict == "MISSED"  # nothing renders 1e9 frames/s
    assert "with H.264" not in out  # --no-encode
    assert re.search(r"4 target\(s\) missed", out)


@pytest.mark.parametrize("encoder_core", ["auto", "same"])
def test_reference_bench_reports_the_encode_ratio_three_ways_and_a_verdict(capsys, keep_affinity, encoder_core):
    overlapped = encoder_core == "auto" and len(os.sched_getaffinity(0)) > 1  # before the bench pins itself
    rc = main(["reference", "--frames", "17", "--height", "96", "--width", "160", "--repeats", "2",
               "--trajectories", "square", "--contexts", "fullkv", "fov", "--clock", "cpu",
               "--encoder-core", encoder_core])
    out = capsys.readouterr().out
    assert rc == 0
    assert ("its own core" if overlapped else "the generation core") in out
    rows = re.findall(r"^(square/\w+) +[\d.]+ +-?[\d.]+ +[\d.]+ +((?:[\d.]+ / [\d.]+ +){2}[\d.]+ / [\d.]+)$", out, re.M)
    assert sorted(r[0] for r in rows) == ["square/fov", "square/fullkv"]
    for _, ks in rows:
        pairs = re.findall(r"([\d.]+) / ([\d.]+)", ks)
        assert len(pairs) == 3 and all(0 < float(mn) <= float(med) for mn, med in pairs)
    verdicts = re.findall(r"^(square/\w+) with H\.264: keeps ([\d.]+) of the generation rate \(min ([\d.]+), "
                          r"median ([\d.]+)\) = [\d.]+x of the 0\.5 floor: (met|MISSED)$", out, re.M)
    assert sorted(v[0] for v in verdicts) == ["square/fov", "square/fullkv"]
    for _, keep, mn, med, verdict in verdicts:
        assert float(mn) <= float(med) == float(keep)
        if abs(float(keep) - 0.5) > 0.006:  # the printed ratio is rounded: at the floor either verdict is right
            assert verdict == ("met" if float(keep) >= 0.5 else "MISSED")
    assert ("dedicated cores (overlapped)" if overlapped else "sharing one core") in out
    assert ("for information" in out) == overlapped
