"""The order of interleaved timing rounds: each config must follow each other one equally often.

A GPU inherits the clock the previous kernel left, so whichever config always runs after the
most power-hungry one reads slow (bench/results/experiments/h200-explore-timing.md).
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from kernels.measure import balanced_order


@pytest.mark.parametrize("n", range(1, 9))
def test_every_config_follows_every_other_equally_often(n: int) -> None:
    rounds = n if n % 2 == 0 else 2 * n
    neighbours: Counter[tuple[int, int]] = Counter()
    first: Counter[int] = Counter()
    for r in range(rounds):
        row = balanced_order(n, r)
        assert sorted(row) == list(range(n)), f"round {r} is not a permutation: {row}"
        first[row[0]] += 1
        neighbours.update(itertools.pairwise(row))
    # Every ordered pair of different configs is adjacent, and equally often.
    assert set(neighbours) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert len(set(neighbours.values())) <= 1
    assert set(first) == set(range(n)) and len(set(first.values())) == 1


def test_the_tuned_kernel_no_longer_always_follows_naive() -> None:
    # The benchmark's four backends; a rotated list put "tuned" right after "naive" in three
    # rounds of four.
    backends = ["tuned", "flash", "cudnn", "naive"]
    after_naive = 0
    for r in range(4):
        row = [backends[i] for i in balanced_order(4, r)]
        after_naive += any(a == "naive" and b == "tuned" for a, b in itertools.pairwise(row))
    assert after_naive == 1


def test_nothing_to_order() -> None:
    assert balanced_order(0, 3) == []
