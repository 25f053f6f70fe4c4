"""A study's analysis rules at their edges, on small keys and votes built in memory: what passes an attention
check, who answered which checks (practice never counts), a correlation interval needs three instances, CSV cells,
and the blind export columns."""

from __future__ import annotations

import math

import numpy as np

from evaluate.human import analysis, stats


def test_a_check_is_passed_by_its_expected_side_or_a_does_not_start_gate():
    assert analysis._passed({"expected": "A"}, {"choice": "A"})
    assert not analysis._passed({"expected": "A"}, {"choice": "T"})
    assert analysis._passed({"started": False}, {"started": 0})
    assert not analysis._passed({"started": False}, {"started": 1})
    assert not analysis._passed({"started": False}, {"started": None})  # no gate answered is no pass
    assert analysis._passed({"started": True, "still": True}, {"started": True})


def test_attention_counts_each_annotators_checks_and_names_the_failed():
    key = {"items": [{"id": "p1", "check": {"expected": "A"}}, {"id": "p2", "check": {"expected": "B"}},
                     {"id": "p3", "check": {"expected": "A"}, "practice": True}, {"id": "p4"}]}
    votes = [{"annotator": "a1", "item": "p1", "choice": "A"}, {"annotator": "a1", "item": "p2", "choice": "A"},
             {"annotator": "a1", "item": "p3", "choice": "B"}, {"annotator": "a1", "item": "p4", "choice": "B"},
             {"annotator": "a2", "item": "p4", "choice": "A"}, {"annotator": "a3", "item": "p2", "choice": "B"}]
    assert analysis.attention(key, votes) == {"a1": {"checks": 2, "passed": 1, "failed": ["p2"]},
                                              "a3": {"checks": 1, "passed": 1, "failed": []}}


def test_a_correlation_interval_needs_three_instances():
    x = np.array([1.0, 2.0])
    lo, hi, dropped = analysis._corr_ci(x, x, stats.spearman, 50, 0)
    assert math.isnan(lo) and math.isnan(hi) and dropped == 0
    x3 = np.array([1.0, 2.0, 3.0])
    lo, hi, dropped = analysis._corr_ci(x3, x3, stats.spearman, 50, 0)
    assert lo == hi == 1.0 and 0 < dropped < 50  # constant resamples (one value drawn thrice) are dropped
    lo, hi, dropped = analysis._corr_ci(np.ones(3), x3, stats.spearman, 20, 0)
    assert math.isnan(lo) and math.isnan(hi) and dropped == 20


def test_csv_cells_are_empty_yes_no_or_joined():
    assert [analysis._csv_cell(v) for v in (None, True, False, [1, "a"], [], 0, 0.5, "x")] == \
        ["", "yes", "no", "1;a", "", "0", "0.5", "x"]
