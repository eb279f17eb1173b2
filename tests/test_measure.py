"""The order of interleaved timing rounds: each config must follow each other one equally often,
counting the last turn of a round and the first of the next (rounds run back to back).

A GPU inherits the clock the previous kernel left, so whichever config always runs after the
most power-hungry one reads slow (bench/results/experiments/h200-explore-timing.md).
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from kernels.measure import balanced_order


def _turns(n: int, rounds: int) -> list[int]:
    """The turns of a timed run as they reach the GPU: the untimed warm round (-1), then
    ``rounds`` rounds back to back."""
    return [i for r in range(-1, rounds) for i in balanced_order(n, r)]


def _predecessors(turns: list[int]) -> Counter[tuple[int, int]]:
    return Counter(itertools.pairwise(turns))


def _cycle_length(n: int) -> int:
    return 1 if n <= 2 else n * (n - 1)


@pytest.mark.parametrize("n", range(1, 11))
def test_every_round_is_a_permutation_and_the_cycle_repeats(n: int) -> None:
    length = _cycle_length(n)
    for r in range(2 * length):
        row = balanced_order(n, r)
        assert sorted(row) == list(range(n)), f"round {r} is not a permutation: {row}"
        assert row == balanced_order(n, r + length)
    assert balanced_order(n, -1) == balanced_order(n, length - 1)


@pytest.mark.parametrize("n", range(2, 11))
def test_over_a_cycle_every_item_follows_every_other_equally_often_across_rounds(n: int) -> None:
    # Rounds run back to back: the pair that ends one round and starts the next counts too.
    # With a shifted Williams row per round, four backends each followed one neighbour twice
    # as the others (16, 8, 8 of 32 turns on the H200).
    length = _cycle_length(n)
    turns = [i for r in range(length) for i in balanced_order(n, r)]
    pairs = _predecessors(turns + turns[:1])  # the wrap: the next cycle starts the same way
    assert all(a != b for a, b in pairs), "an item ran twice in a row"
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert len(set(pairs.values())) == 1, pairs
    if n >= 3:  # two items simply alternate: 0, 1, 0, 1, ...
        first = Counter(balanced_order(n, r)[0] for r in range(length))
        assert set(first) == set(range(n)) and len(set(first.values())) == 1


@pytest.mark.parametrize("n", range(2, 10))
@pytest.mark.parametrize("rounds", [2, 4, 8, 16, 32, 64])
def test_short_runs_are_nearly_balanced_too(n: int, rounds: int) -> None:
    # A run is rarely a whole cycle (12 rounds for four backends; the window's default is 4).
    pairs = _predecessors(_turns(n, rounds))
    for b in range(n):
        counts = [pairs[(a, b)] for a in range(n) if a != b]
        assert max(counts) - min(counts) <= 3, (b, counts)


def test_four_backends_over_32_rounds_follow_each_neighbour_about_as_often() -> None:
    # The benchmark's group: 32 rounds of cuTile, cuDNN, FA4 and FA2.
    pairs = _predecessors(_turns(4, 32))
    for b in range(4):
        counts = [pairs[(a, b)] for a in range(4) if a != b]
        assert max(counts) <= min(counts) + 2, (b, counts)
        assert sum(counts) in (32, 33)  # its 32 timed turns, and its warm turn unless first


def test_the_tuned_kernel_no_longer_always_follows_naive() -> None:
    # The benchmark's four backends; a rotated list put "tuned" right after "naive" in three
    # rounds of four.
    backends = ["tuned", "flash", "cudnn", "naive"]
    turns = [backends[i] for i in _turns(4, 12)]
    after = Counter(a for a, b in itertools.pairwise(turns) if b == "tuned")
    assert set(after) == {"flash", "cudnn", "naive"}
    assert max(after.values()) - min(after.values()) <= 2, after


def test_nothing_to_order() -> None:
    assert balanced_order(0, 3) == []
