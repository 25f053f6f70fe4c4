"""A tiny module for the mutation tool's own smoke test (tests/test_mutation.py): ``clamp`` is tested by
``check_clamp.py``, ``shift`` deliberately is not, so its mutants survive."""


def clamp(x: float, lo: float, hi: float) -> float:
    if x < lo:
        return lo
    return min(x, hi)


def shift(x: float) -> float:
    return x + 1
