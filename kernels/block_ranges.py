"""Which (q-block, k-block) pairs a tile's rows see: the loop bounds of the FlashAttention
forward kernel and the masks, in plain integers (the schedule, :mod:`kernels.schedule`, builds on
these; the kernel computes the same bounds on the device).

Masking semantics (0-based query row ``i``, key ``j``):

* ``none``   -- every key is visible.
* ``causal`` -- ``j <= i + input_pos``. ``input_pos = k_len - q_len`` is chunked prefill: the
  queries are the last ``q_len`` tokens of a ``k_len``-token sequence.
* ``window`` -- causal, and also ``j > i + input_pos - window`` (the last ``window`` keys).

Only query rows ``< q_len`` count: rows of a ragged last q-block are padding whose output is never
stored. Keys ``>= k_len`` are padding, so the ragged last k-block always needs a mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from kernels.decode_layout import cdiv

MASK_MODES = ("none", "causal", "window")


class BlockKind(IntEnum):
    """What the kernel does with one (q-block, k-block) pair."""

    SKIPPED = 0  # never loaded: no visible key for any query row of the block
    COMPUTED = 1  # computed without a mask: every (row, key) pair is visible
    MASKED = 2  # computed with a mask: causal diagonal, window edge or ragged key edge


@dataclass(frozen=True)
class KRange:
    """Half-open ranges of k-block indices that one q-block visits.

    ``[lo, hi)`` is every visited block; ``[full_lo, full_hi)`` is the unmasked middle. The masked
    blocks are ``[lo, full_lo)`` (window edge) and ``[full_hi, hi)`` (diagonal and ragged edge).
    When no block is unmasked, ``full_lo == full_hi`` and it is placed so that both masked ranges
    together still cover ``[lo, hi)`` exactly.
    """

    lo: int
    hi: int
    full_lo: int
    full_hi: int

    @property
    def visited(self) -> int:
        return max(self.hi - self.lo, 0)

    @property
    def unmasked(self) -> int:
        return self.full_hi - self.full_lo

    @property
    def masked(self) -> int:
        return self.visited - self.unmasked


def k_block_range(
    q_block: int,
    *,
    q_len: int,
    k_len: int,
    tile_m: int,
    tile_n: int,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
) -> KRange:
    """The k-blocks that query block ``q_block`` visits, split into masked and unmasked.

    This is the loop-bound arithmetic of the kernel, written once in plain integers so the
    kernel, the reference and the tests agree by construction.
    """
    first_row = q_block * tile_m
    last_row = min(first_row + tile_m, q_len) - 1  # padding rows of a ragged block do not count
    return rows_k_block_range(
        first_row, last_row, k_len=k_len, tile_n=tile_n, mask=mask, input_pos=input_pos,
        window=window,
    )  # fmt: skip


def packed_row_span(first: int, last: int, q_len: int) -> tuple[int, int]:
    """The query positions ``i`` of packed rows ``first … last`` (row ``r`` of a packed tile
    is query position ``r % q_len`` of head ``r // q_len`` of its KV head's group): one
    contiguous run when the rows stay inside one head, else every position (conservative, as
    the kernel computes it: the rows of several heads together see the union of their keys)."""
    if last - first + 1 >= q_len or first // q_len != last // q_len:
        return 0, q_len - 1
    return first % q_len, last % q_len


def rows_k_block_range(
    first_row: int,
    last_row: int,
    *,
    k_len: int,
    tile_n: int,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
) -> KRange:
    """:func:`k_block_range` for query positions ``first_row … last_row`` (the kernel's loop
    bounds for a tile whose rows see the keys of those positions)."""
    n_k_blocks = cdiv(k_len, tile_n)
    even_k_blocks = k_len // tile_n  # blocks with no padded key

    # The keys any row of the block can see form one contiguous interval [see_lo, see_hi].
    if mask == "none":
        see_hi_first = see_hi_last = k_len - 1
        see_lo_first = see_lo_last = 0
    else:
        see_hi_first = first_row + input_pos
        see_hi_last = last_row + input_pos
        if mask == "window":
            assert window is not None and window >= 1
            see_lo_first = first_row + input_pos - window + 1
            see_lo_last = last_row + input_pos - window + 1
        else:
            see_lo_first = see_lo_last = 0
    see_lo = max(see_lo_first, 0)
    see_hi = min(see_hi_last, k_len - 1)
    if see_hi < see_lo:
        return KRange(0, 0, 0, 0)
    lo = see_lo // tile_n
    hi = see_hi // tile_n + 1

    # A block needs no mask when every row sees all of its keys and it has no padded key.
    full_lo = max(cdiv(max(see_lo_last, 0), tile_n), lo)
    full_hi = min((see_hi_first + 1) // tile_n, even_k_blocks, hi) if see_hi_first >= 0 else lo
    if full_hi <= full_lo:
        full_lo = full_hi = max(min(full_lo, hi), lo)
    assert 0 <= lo <= full_lo <= full_hi <= hi <= n_k_blocks
    return KRange(lo, hi, full_lo, full_hi)


def visible_block(
    rows: Sequence[int] | np.ndarray,
    keys: Sequence[int] | np.ndarray,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
) -> np.ndarray:
    """Boolean (len(rows), len(keys)) matrix: may query row i see key j, for one tile or any
    chosen rows and keys (a ``range`` is fine)."""
    r = np.asarray(rows, dtype=np.int64)[:, None]
    c = np.asarray(keys, dtype=np.int64)[None, :]
    seen = np.ones((r.shape[0], c.shape[1]), dtype=bool)
    if mask in ("causal", "window"):
        seen &= c <= r + input_pos
    if mask == "window":
        assert window is not None
        seen &= c > r + input_pos - window
    return seen


def visible(
    q_len: int, k_len: int, mask: str = "none", input_pos: int = 0, window: int | None = None
) -> np.ndarray:
    """Boolean (q_len, k_len) matrix of the whole problem. For tests and small maps only."""
    return visible_block(range(q_len), range(k_len), mask, input_pos, window)


def visible_pairs(
    q_len: int, k_len: int, mask: str = "none", input_pos: int = 0, window: int | None = None
) -> int:
    """Number of visible (row, key) pairs, counted per row in O(q_len) without the matrix."""
    if mask == "none":
        return q_len * k_len
    rows = np.arange(q_len, dtype=np.int64)
    hi = np.minimum(rows + input_pos, k_len - 1)
    lo = np.zeros_like(rows)
    if mask == "window":
        assert window is not None
        lo = np.maximum(rows + input_pos - window + 1, 0)
    return int(np.clip(hi - lo + 1, 0, None).sum())
