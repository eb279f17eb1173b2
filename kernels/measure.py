"""Orders for interleaved timing rounds (no GPU, no cuda.tile: shared by the tuner and bench/).

A GPU inherits the clock that the previous kernel's load left it at, for a good part of a
tenth of a second, so a config timed right after a power-hungry one reads slow. Rotating a fixed
list does not fix that: every config still follows the same neighbour in nearly every round.
"""

from __future__ import annotations


def balanced_order(n: int, round_index: int) -> list[int]:
    """The order of ``n`` items in timing round ``round_index``: a Williams design, in which
    over ``n`` rounds (``2n`` when ``n`` is odd) every item runs right after every other item
    equally often, and first equally often."""
    if n <= 0:
        return []
    # Base row 0, 1, n-1, 2, n-2, ...; round r adds r to every entry (mod n).
    base = [0]
    step = 1
    while len(base) < n:
        base.append(step)
        if len(base) < n:
            base.append(n - step)
        step += 1
    row = [(x + round_index) % n for x in base]
    # For odd n a row and its reverse together balance the neighbours.
    if n % 2 == 1 and (round_index // n) % 2 == 1:
        row.reverse()
    return row
