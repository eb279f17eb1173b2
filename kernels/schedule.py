"""The tile schedule of the FlashAttention forward kernel, computed on the host.

For a problem shape and tile sizes this module says exactly which (q-block, k-block) pairs the
kernel visits, which of those need a mask and which are skipped, which split reads each block,
how the causal persistent grid assigns its tiles, and the useful FLOP count.
The NumPy reference walks this schedule and the cuTile kernel computes the same bounds on the
device, so the block map drawn by the workbench is the kernel's real work.

Masking semantics (0-based query row ``i``, key ``j``):

* ``none``   -- every key is visible.
* ``causal`` -- ``j <= i + input_pos``. ``input_pos = k_len - q_len`` is chunked prefill: the
  queries are the last ``q_len`` tokens of a ``k_len``-token sequence.
* ``window`` -- causal, and also ``j > i + input_pos - window`` (the last ``window`` keys).

Only query rows ``< q_len`` count: rows of a ragged last q-block are padding whose output is never
stored. Keys ``>= k_len`` are padding, so the ragged last k-block always needs a mask.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any, Protocol

import numpy as np

MASK_MODES = ("none", "causal", "window")


class BlockKind(IntEnum):
    """What the kernel does with one (q-block, k-block) pair."""

    SKIPPED = 0  # never loaded: no visible key for any query row of the block
    COMPUTED = 1  # computed without a mask: every (row, key) pair is visible
    MASKED = 2  # computed with a mask: causal diagonal, window edge or ragged key edge


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


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


def block_map(
    q_len: int,
    k_len: int,
    tile_m: int,
    tile_n: int,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
) -> np.ndarray:
    """``int8`` array (q-blocks, k-blocks) of :class:`BlockKind` codes."""
    return Schedule(q_len, k_len, tile_m, tile_n, mask, input_pos, window).block_map


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


# --------------------------------------------------------------------------------------------
# Decode: the query heads of a KV head packed as rows, the key range split across CTAs
# --------------------------------------------------------------------------------------------

KV_SPLITS_MAX = 128
# No split when the grid already fills 80 % of the SMs or the key range is only a few blocks (a
# split then costs its combine and saves nothing).
FULL_GRID = 0.8
FEW_KEY_BLOCKS = 4
# What a CTA of the split kernel costs besides its key blocks (Q, filling the load pipeline,
# writing its part), in key blocks: the split kernel alone read 16 blocks a CTA in 34.3 µs at
# k_len 32k and 64 in 121.5 µs at 128k on the H200, so ~2.5 blocks' time does not scale.
CTA_COST_BLOCKS = 2
# The decode form's tile is at least this many rows (the MMA's smallest M on the tensor cores).
DECODE_MIN_ROWS = 16


def decode_tile_m(tile_m: int, rows: int) -> int:
    """Rows per tile of the decode form: the ``tile_m`` knob, or the power of two (at least
    16) that holds the ``rows`` of one tile's heads where there are fewer (q_len 1 with a group
    of 4 runs 16-row tiles, not 64)."""
    need = max(DECODE_MIN_ROWS, 1 << max(rows - 1, 0).bit_length())
    return min(tile_m, need)


def blocks_per_split(n_k_blocks: int, kv_splits: int) -> int:
    """Key blocks each split reads: the key range in ``kv_splits`` equal runs, the last shorter."""
    return max(cdiv(n_k_blocks, max(kv_splits, 1)), 1)


def effective_splits(n_k_blocks: int, kv_splits: int) -> int:
    """The splits that run: ``kv_splits``, fewer where the runs of :func:`blocks_per_split`
    cover the key blocks in fewer (128 splits of 4 blocks run as 4)."""
    return max(cdiv(n_k_blocks, blocks_per_split(n_k_blocks, kv_splits)), 1)


def split_ranges(n_k_blocks: int, kv_splits: int) -> list[tuple[int, int]]:
    """Half-open key-block range ``[lo, hi)`` of each split that runs, in order."""
    per = blocks_per_split(n_k_blocks, kv_splits)
    return [
        (s * per, min((s + 1) * per, n_k_blocks))
        for s in range(effective_splits(n_k_blocks, kv_splits))
    ]


def auto_kv_splits(
    tiles: int, n_k_blocks: int, sm_slots: int, max_splits: int = KV_SPLITS_MAX
) -> int:
    """How many splits "auto" takes for ``tiles`` CTAs of one split (batch × heads of a tile ×
    row blocks) over ``n_k_blocks`` key blocks on ``sm_slots`` CTA slots (SMs × CTAs per SM).

    No split when the grid already fills the GPU or the key range is only a few blocks; else
    the count whose busiest CTA slot takes the least time: whole waves × (blocks per split +
    :data:`CTA_COST_BLOCKS`), the fewest splits among equals. FlashAttention's wave-efficiency
    rule took 15 splits of 18 blocks for 8 tiles of 256 blocks on 132 slots, where 16 splits of
    16 fit the same wave (docs/experiments.md).
    """
    if tiles >= FULL_GRID * sm_slots or n_k_blocks <= FEW_KEY_BLOCKS:
        return 1
    top = max(min(max_splits, sm_slots, n_k_blocks), 1)

    def busiest_slot(n: int) -> int:
        waves = cdiv(tiles * effective_splits(n_k_blocks, n), sm_slots)
        return waves * (blocks_per_split(n_k_blocks, n) + CTA_COST_BLOCKS)

    return min(range(1, top + 1), key=lambda n: (busiest_slot(n), n))


def split_map_of(block_map: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """``int16`` like ``block_map``: the split whose key-block range ``[lo, hi)`` holds each
    visited block, -1 where the block is skipped (a stored point's map and its splits)."""
    grid = np.full(block_map.shape, -1, dtype=np.int16)
    visited = block_map != BlockKind.SKIPPED
    for s, (lo, hi) in enumerate(ranges):
        grid[:, lo:hi] = np.where(visited[:, lo:hi], s, -1)
    return grid


@dataclass(frozen=True)
class Schedule:
    """The whole tile schedule of one (batch, head) slice, with derived counts.

    With ``pack_gqa`` a slice is one (batch, KV head): its ``group`` query heads are the rows
    of its tiles (row ``r`` is query position ``r % q_len`` of head ``r // q_len``), so
    ``rows`` is ``group · q_len``. With ``kv_splits`` the key blocks are read by that many
    splits (CTAs) of each tile, :func:`split_ranges` apart (fewer where they run as fewer).
    """

    q_len: int
    k_len: int
    tile_m: int
    tile_n: int
    mask: str = "none"
    input_pos: int = 0
    window: int | None = None
    group: int = 1
    pack_gqa: bool = False
    kv_splits: int = 1

    def __post_init__(self) -> None:
        if self.mask not in MASK_MODES:
            raise ValueError(f"mask must be one of {MASK_MODES}, got {self.mask!r}")
        if self.mask == "window" and (self.window is None or self.window < 1):
            raise ValueError(f"mask='window' needs window >= 1, got {self.window!r}")
        for name in ("q_len", "k_len", "tile_m", "tile_n", "group", "kv_splits"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def rows(self) -> int:
        """Query rows of one slice: ``group · q_len`` packed, else ``q_len``."""
        return self.q_len * self.group if self.pack_gqa else self.q_len

    @property
    def n_q_blocks(self) -> int:
        return cdiv(self.rows, self.tile_m)

    @property
    def n_splits(self) -> int:
        """The splits that run (:func:`effective_splits` of ``kv_splits``)."""
        return effective_splits(self.n_k_blocks, self.kv_splits)

    @property
    def split_ranges(self) -> list[tuple[int, int]]:
        """Each running split's key blocks ``[lo, hi)``."""
        return split_ranges(self.n_k_blocks, self.kv_splits)

    @property
    def n_k_blocks(self) -> int:
        return cdiv(self.k_len, self.tile_n)

    def row_span(self, q_block: int) -> tuple[int, int]:
        """The first and last query position whose keys the rows of ``q_block`` see."""
        first = q_block * self.tile_m
        last = min(first + self.tile_m, self.rows) - 1
        return packed_row_span(first, last, self.q_len) if self.pack_gqa else (first, last)

    def k_range(self, q_block: int) -> KRange:
        if self.pack_gqa:
            first, last = self.row_span(q_block)
            return rows_k_block_range(
                first, last, k_len=self.k_len, tile_n=self.tile_n, mask=self.mask,
                input_pos=self.input_pos, window=self.window,
            )  # fmt: skip
        return k_block_range(
            q_block,
            q_len=self.q_len,
            k_len=self.k_len,
            tile_m=self.tile_m,
            tile_n=self.tile_n,
            mask=self.mask,
            input_pos=self.input_pos,
            window=self.window,
        )

    @cached_property
    def k_ranges(self) -> tuple[KRange, ...]:
        return tuple(self.k_range(qb) for qb in range(self.n_q_blocks))

    @cached_property
    def block_map(self) -> np.ndarray:
        grid = np.full((self.n_q_blocks, self.n_k_blocks), BlockKind.SKIPPED, dtype=np.int8)
        for qb, r in enumerate(self.k_ranges):
            grid[qb, r.lo : r.hi] = BlockKind.MASKED
            grid[qb, r.full_lo : r.full_hi] = BlockKind.COMPUTED
        grid.setflags(write=False)
        return grid

    def split_blocks(self, q_block: int, split: int) -> tuple[range, list[int]]:
        """The key blocks split ``split`` of ``q_block`` reads: its unmasked blocks and its
        masked ones (each a range; the masked ones of the window edge come first). Empty
        where the split's blocks are all skipped: it contributes nothing to the combine."""
        r = self.k_range(q_block)
        lo, hi = self.split_ranges[split]

        def cut(a: int, b: int) -> range:
            return range(max(a, lo), max(min(b, hi), max(a, lo)))

        masked = [*cut(r.lo, r.full_lo), *cut(r.full_hi, r.hi)]
        return cut(r.full_lo, r.full_hi), masked

    @cached_property
    def split_map(self) -> np.ndarray:
        """``int16`` (q-blocks, k-blocks): the split that reads each visited block, -1 where
        the block is skipped."""
        grid = split_map_of(self.block_map, self.split_ranges)
        grid.setflags(write=False)
        return grid

    def counts(self) -> dict[str, int]:
        """Blocks per kind for one (batch, head) slice."""
        grid = self.block_map
        return {
            "computed": int((grid == BlockKind.COMPUTED).sum()),
            "masked": int((grid == BlockKind.MASKED).sum()),
            "skipped": int((grid == BlockKind.SKIPPED).sum()),
        }

    def flops_useful(self, head_dim: int, head_dim_v: int | None = None) -> int:
        """FLOPs on visible (row, key) pairs only, for one (batch, head) slice (times B·H for
        the problem): 2·D for Q·Kᵀ and 2·Dv for P·V per pair (Dv = ``head_dim_v``, or D)."""
        pairs = visible_pairs(self.q_len, self.k_len, self.mask, self.input_pos, self.window)
        return 2 * (head_dim + (head_dim if head_dim_v is None else head_dim_v)) * pairs


def causal_grid_aligned(q_len: int, k_len: int, tile_m: int, tile_n: int, input_pos: int) -> bool:
    """Whether every causal q-block is whole key blocks and then one diagonal block.

    That holds with square tiles, ``q_len`` and ``input_pos`` whole multiples of the tile
    and every diagonal key inside the array (``k_len >= q_len + input_pos``): q-block ``qb``
    then sees key blocks ``0 … qb + input_pos / tile`` and only the last needs the mask,
    the same lower triangle in every tile. The causal persistent grid runs those problems.
    """
    return (
        tile_m == tile_n
        and q_len > 0
        and q_len % tile_m == 0
        and input_pos >= 0
        and input_pos % tile_n == 0
        and k_len >= q_len + input_pos
    )


def causal_tile_assignment(
    batch_heads: int, n_q_blocks: int, n_programs: int, group: int, diag_offset: int = 0
) -> list[list[tuple[int, int]]]:
    """The causal persistent grid's tiles per program, as (q_block, batch_head) in run order.

    Q-block ``qb`` visits ``qb + 1 + diag_offset`` key blocks, so causal tiles differ up to
    ``n_q_blocks``-fold and a fixed stride over them gives the busiest program 8-67 % more
    work than the mean. Here each tile goes to the program with the least work so far (longest
    processing time first), taken in this order: batch·heads in groups of ``group`` (their
    K/V fit in L2 together), each group's tiles heaviest first, and the lightest quarter of
    all q-blocks held back to the end, where they fill the gaps. The most-loaded program ends
    within 0.3 % of the mean at B·H = 128, N = 1024-16384 on 132 programs (a pairing of
    q-block qb with n_q - 1 - qb came to 3 %, and ran slower on the H200:
    bench/results/experiments/h200-explore-causal-persistent.md).
    """
    held_back = n_q_blocks // 4

    def work(qb: int) -> int:
        return qb + 1 + diag_offset

    def turn(tile: tuple[int, int]) -> tuple[int, int, int]:
        qb, bh = tile
        if qb < held_back:
            return (batch_heads, -qb, bh)  # after every group, heaviest of them first
        return (bh // group, -qb, bh)

    tiles = sorted(((qb, bh) for bh in range(batch_heads) for qb in range(n_q_blocks)), key=turn)
    programs: list[list[tuple[int, int]]] = [[] for _ in range(n_programs)]
    load = [(0, p) for p in range(n_programs)]  # a heap of (work so far, program)
    for tile in tiles:
        done, p = heapq.heappop(load)
        programs[p].append(tile)
        heapq.heappush(load, (done + work(tile[0]), p))
    return programs


# --------------------------------------------------------------------------------------------
# A config's schedule: what the front ends ask instead of reading the tile and decode knobs
# --------------------------------------------------------------------------------------------

# Where no GPU says how many CTA slots there are (the CPU reference, `blockmap`), "auto" splits
# the key range as it would on the H200 the kernel is measured on: 132 SMs, one decode CTA each.
NOMINAL_SM_SLOTS = 132


class ProblemShape(Protocol):
    """The problem's sizes a schedule reads (the workbench's ``Problem`` has them)."""

    @property
    def batch(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def kv_heads(self) -> int | None: ...
    @property
    def q_len(self) -> int: ...
    @property
    def k_len(self) -> int: ...
    @property
    def input_pos(self) -> int: ...
    @property
    def group_size(self) -> int: ...


# The knobs a schedule reads: those that set a tile's shape (rows, then keys), and those of
# the decode form (the key range's splits, the heads packed as rows).
TILE_KNOBS = ("tile_m", "tile_n")
DECODE_KNOBS = ("kv_splits", "pack_gqa")


def tile_shape(values: Mapping[str, Any]) -> tuple[int, int]:
    """(query rows, keys) of a config's tile as the knobs set it (the decode form may run
    fewer rows: :func:`decode_tile_m`)."""
    rows, keys = (values[name] for name in TILE_KNOBS)
    return rows, keys


def kernel_form_of(
    values: Mapping[str, Any],
    mask: str,
    q_len: int,
    k_len: int,
    input_pos: int = 0,
    splits: int = 1,
) -> str:
    """Which kernel form runs a config's knob ``values`` on a problem (the mask already
    checked): ``decode`` with packed heads or where the key range runs in ``splits`` > 1;
    else ``tile`` unless the persistent grid is asked for, which runs ``persistent`` without a
    mask and ``causal-persistent`` where the causal problem is aligned
    (:func:`causal_grid_aligned`), one CTA per tile (``tile``) elsewhere."""
    if values.get("pack_gqa") or splits > 1:
        return "decode"
    if not values.get("persistent"):
        return "tile"
    if mask == "none":
        return "persistent"
    if causal_grid_aligned(q_len, k_len, *tile_shape(values), input_pos):
        return "causal-persistent"
    return "tile"


def decode_form(values: Mapping[str, Any]) -> bool:
    """Does a config run the decode form (packed GQA heads or a split key range)?"""
    return bool(values.get("pack_gqa")) or values.get("kv_splits", 1) != 1


def _decode_rows(values: Mapping[str, Any], problem: ProblemShape) -> tuple[int, int]:
    """(heads, rows) of one decode slice: the KV heads with their group's rows packed, else the
    query heads."""
    if values.get("pack_gqa"):
        return problem.kv_heads or problem.heads, problem.group_size * problem.q_len
    return problem.heads, problem.q_len


def requested_kv_splits(
    values: Mapping[str, Any], problem: ProblemShape, sm_slots: int = NOMINAL_SM_SLOTS
) -> int:
    """The splits of the key range a config asks for on ``problem`` (auto: the busiest-slot
    heuristic over the grid, ``sm_slots`` and the key blocks, as the cuTile launcher picks)."""
    if values.get("kv_splits", 1) is not None:
        return values.get("kv_splits", 1)
    heads, rows = _decode_rows(values, problem)
    tile_m = decode_tile_m(values["tile_m"], rows)
    tiles = problem.batch * heads * cdiv(rows, tile_m)
    return auto_kv_splits(tiles, cdiv(problem.k_len, values["tile_n"]), sm_slots)


def tile_schedule(
    values: Mapping[str, Any], problem: ProblemShape, mask: str, window: int | None
) -> Schedule:
    """The schedule of one (batch, head) slice in the tile form (decode knobs not read)."""
    return Schedule(
        problem.q_len, problem.k_len, values["tile_m"], values["tile_n"], mask,
        problem.input_pos, window,
    )  # fmt: skip


def schedule_of(
    values: Mapping[str, Any],
    problem: ProblemShape,
    mask: str,
    window: int | None,
    sm_slots: int = NOMINAL_SM_SLOTS,
) -> Schedule:
    """The tile schedule of one (batch, head) slice of ``problem`` under the knob ``values``;
    in the decode form one (batch, KV head) slice with its packed rows and its splits."""
    if not decode_form(values):
        return tile_schedule(values, problem, mask, window)
    _, rows = _decode_rows(values, problem)
    return Schedule(
        problem.q_len, problem.k_len, decode_tile_m(values["tile_m"], rows), values["tile_n"],
        mask, problem.input_pos, window, group=problem.group_size,
        pack_gqa=bool(values.get("pack_gqa")),
        kv_splits=requested_kv_splits(values, problem, sm_slots),
    )  # fmt: skip


def tile_facts(schedule: Schedule) -> dict[str, int]:
    """The tile shape a schedule runs, by knob name (in the decode form its tile rows)."""
    return dict(zip(TILE_KNOBS, (schedule.tile_m, schedule.tile_n)))


def split_layout(schedule: Schedule) -> dict[str, Any]:
    """The decode layout of a schedule: the splits that run, whether heads were packed and
    each split's key blocks ``[lo, hi)``."""
    return {
        "kv_splits": schedule.n_splits,
        "pack_gqa": schedule.pack_gqa,
        "split_ranges": [list(r) for r in schedule.split_ranges],
    }


def resolved_splits(schedule: Schedule) -> dict[str, int]:
    """The split knob a launch of one slice must take to run ``schedule``'s splits (auto
    resolved: a launch of fewer tiles would pick another count)."""
    return {"kv_splits": schedule.kv_splits}


def split_facts(schedule: Schedule) -> dict[str, Any]:
    """A point's record of its decode layout (:func:`split_layout`) with its tile rows: what a
    block map draws."""
    return {**split_layout(schedule), "decode_tile_m": schedule.tile_m}


def recorded_splits(extra: Mapping[str, Any]) -> Any:
    """The splits of the key range a point's record (:func:`split_facts`) says ran (None: the
    point ran no decode form, or its record is older)."""
    return extra.get("kv_splits")


def recorded_packed(extra: Mapping[str, Any]) -> bool:
    """Whether a point's record (:func:`split_facts`) says its heads were packed as rows."""
    return bool(extra.get("pack_gqa"))


def recorded_tile_shapes(
    extras: Iterable[Mapping[str, Any]], values: Mapping[str, Any]
) -> list[tuple[Any, Any]]:
    """The tile shapes a point's records may have run, most specific first: the decode form's
    tile rows (its row knob is only their upper bound), the tiles a point says it launched (an
    autotuned point keeps them under ``launch``), then the config's own ``values``."""
    extras = list(extras)
    tile_m, tile_n = tile_shape(values)
    found: list[tuple[Any, Any]] = [
        (extra["decode_tile_m"], (extra.get("launch") or {}).get("tile_n", tile_n))
        for extra in extras
        if isinstance(extra.get("decode_tile_m"), int)
    ]
    found += [
        (where.get("tile_m"), where.get("tile_n"))
        for extra in extras
        for where in (extra.get("launch") or {}, extra)
        if isinstance(where, dict)
    ]
    found.append((tile_m, tile_n))
    return found
