"""The tests of ``clamp.py`` (named ``check_*``: only the mutation smoke test runs them, never the suite)."""

from tests.mutation.demo.clamp import clamp


def test_clamp_keeps_values_inside_and_moves_the_others_to_the_nearest_bound():
    assert [clamp(x, 0, 5) for x in (-1, 0, 3, 5, 9)] == [0, 0, 3, 5, 5]
