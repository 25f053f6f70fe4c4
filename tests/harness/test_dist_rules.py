"""The rules of harness/dist.py one at a time, in this process: a rank's defaults and how it describes itself, how the
launcher's variables (``WORLD_SIZE`` / ``RANK`` / ``LOCAL_RANK``) become a rank and when they are set aside for a
single process, and which GPU a rank binds (a stand-in ``torch`` records ``set_device``)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from harness.dist import Rank, bind_local_device, current_rank, split

VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")


@pytest.fixture
def launcher(monkeypatch):
    """``launcher(WORLD_SIZE=..., ...)``: exactly these launcher variables are set, the others absent."""
    def set_(**values: str) -> None:
        for name in VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in values.items():
            monkeypatch.setenv(name, value)
    return set_


def stand_in_torch(monkeypatch, available: bool, count: int) -> list[int]:
    """A ``torch`` whose CUDA has ``count`` devices (``available`` or not); returns the devices ``set_device`` got."""
    bound: list[int] = []
    cuda = SimpleNamespace(is_available=lambda: available, device_count=lambda: count, set_device=bound.append)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    return bound


# -- Rank ----------------------------------------------------------------------------------------------------------
def test_a_rank_made_without_arguments_is_the_single_process():
    assert (Rank().rank, Rank().world, Rank().local_rank) == (0, 1, 0)
    assert Rank().is_main and Rank().describe() == "single process"


def test_rank_0_alone_is_the_main_one():
    assert Rank(0, 3).is_main is True
    assert Rank(1, 3).is_main is False and Rank(2, 3).is_main is False


def test_a_rank_of_several_says_its_place_and_one_of_one_says_single_process():
    assert Rank(1, 2).describe() == "rank 1/2"
    assert Rank(0, 2).describe() == "rank 0/2"
    assert Rank(0, 1).describe() == "single process"


# -- current_rank ----------------------------------------------------------------------------------------------------
def test_without_launcher_variables_it_is_the_single_process(launcher):
    launcher()
    assert current_rank() == Rank(0, 1, 0)


def test_an_empty_or_unreadable_variable_counts_as_unset(launcher):
    launcher(WORLD_SIZE="", RANK="1", LOCAL_RANK="")
    assert current_rank() == Rank()  # world 1: rank 1 lies outside it
    launcher(WORLD_SIZE="two", RANK="0")
    assert current_rank() == Rank(0, 1, 0)
    launcher(WORLD_SIZE="3", RANK="2", LOCAL_RANK="x")
    assert current_rank() == Rank(2, 3, 2)  # the local rank falls back to the rank


def test_a_missing_rank_is_rank_0_and_a_missing_local_rank_is_the_rank(launcher):
    launcher(WORLD_SIZE="2")
    assert current_rank() == Rank(0, 2, 0)
    launcher(WORLD_SIZE="4", RANK="3")
    assert current_rank() == Rank(3, 4, 3)
    launcher(WORLD_SIZE="4", RANK="3", LOCAL_RANK="1")
    assert current_rank() == Rank(3, 4, 1)


def test_the_first_and_the_last_rank_of_the_world_are_kept(launcher):
    launcher(WORLD_SIZE="2", RANK="0", LOCAL_RANK="1")
    assert current_rank() == Rank(0, 2, 1)
    launcher(WORLD_SIZE="2", RANK="1", LOCAL_RANK="0")
    assert current_rank() == Rank(1, 2, 0)


def test_a_world_of_one_keeps_its_local_rank(launcher):
    launcher(WORLD_SIZE="1", RANK="0", LOCAL_RANK="5")
    assert current_rank() == Rank(0, 1, 5)


@pytest.mark.parametrize("world, rank", [("0", "0"), ("-2", "0"), ("2", "2"), ("2", "-1")])
def test_an_inconsistent_world_or_rank_falls_back_to_the_single_process(launcher, world, rank):
    launcher(WORLD_SIZE=world, RANK=rank, LOCAL_RANK="1")
    assert current_rank() == Rank(0, 1, 0)


# -- split -----------------------------------------------------------------------------------------------------------
def test_a_single_process_takes_every_item_and_a_rank_past_the_items_takes_none():
    assert split(["a", "b", "c"], Rank()) == ["a", "b", "c"]
    assert split(["a"], Rank(1, 2)) == []
    assert split([], Rank(0, 2)) == []


# -- bind_local_device -------------------------------------------------------------------------------------------------
def test_several_ranks_with_cuda_each_bind_their_local_gpu(monkeypatch):
    bound = stand_in_torch(monkeypatch, available=True, count=2)
    bind_local_device(Rank(1, 2, 1))
    bind_local_device(Rank(0, 2, 0))
    assert bound == [1, 0]


def test_a_single_process_binds_no_gpu(monkeypatch):
    bound = stand_in_torch(monkeypatch, available=True, count=2)
    bind_local_device(Rank(0, 1, 0))
    bind_local_device(Rank(0, 1, 1))
    assert bound == []


def test_no_gpu_is_bound_without_cuda_or_without_the_local_ranks_device(monkeypatch):
    bound = stand_in_torch(monkeypatch, available=False, count=4)
    bind_local_device(Rank(1, 2, 1))
    assert bound == []
    bound = stand_in_torch(monkeypatch, available=True, count=1)
    bind_local_device(Rank(1, 2, 1))  # device 1 of one
    assert bound == []


def test_without_torch_binding_is_a_no_op(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # ``import torch`` raises ImportError
    assert bind_local_device(Rank(1, 2, 1)) is None
