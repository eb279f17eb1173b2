"""The tile schedule of the FlashAttention forward kernel, computed on the host.

For a problem shape and tile sizes this module says exactly which (q-block, k-block) pairs the
kernel visits, which of those need a mask and which are skipped, which split reads each block,
how the causal persistent grid assigns its tiles, and the useful FLOP count.
The NumPy reference walks this schedule and the cuTile kernel computes the same bounds on the
device, so the block map drawn by the workbench is the kernel's real work.

The loop bounds and masks of one tile are :mod:`kernels.block_ranges`, the decode form's packed
rows and split key range :mod:`kernels.decode_layout` (both re-exported here for their callers);
the last section says which schedule a config runs on a problem.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from kernels.block_ranges import (  # noqa: F401  (re-exported: the schedule's public names)
    MASK_MODES,
    BlockKind,
    KRange,
    k_block_range,
    packed_row_span,
    rows_k_block_range,
    visible,
    visible_block,
    visible_pairs,
)
from kernels.decode_layout import (  # noqa: F401  (re-exported)
    CTA_COST_BLOCKS,
    DECODE_MIN_ROWS,
    FEW_KEY_BLOCKS,
    FULL_GRID,
    KV_SPLITS_MAX,
    DecodeLayout,
    auto_kv_splits,
    blocks_per_split,
    cdiv,
    decode_layout,
    decode_tile_m,
    effective_splits,
    split_ranges,
)


def split_map_of(block_map: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """``int16`` like ``block_map``: the split whose key-block range ``[lo, hi)`` holds each
    visited block, -1 where the block is skipped (a stored point's map and its splits)."""
    grid = np.full(block_map.shape, -1, dtype=np.int16)
    visited = block_map != BlockKind.SKIPPED
    for s, (lo, hi) in enumerate(ranges):
        grid[:, lo:hi] = np.where(visited[:, lo:hi], s, -1)
    return grid


def kind_counts(grid: np.ndarray) -> dict[str, int]:
    """Blocks of each kind in a block map (or a part of one), by name."""
    return {
        "computed": int((grid == BlockKind.COMPUTED).sum()),
        "masked": int((grid == BlockKind.MASKED).sum()),
        "skipped": int((grid == BlockKind.SKIPPED).sum()),
    }


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
        return kind_counts(self.block_map)

    def flops_useful(self, head_dim: int, head_dim_v: int | None = None) -> int:
        """FLOPs on visible (row, key) pairs only, for one (batch, head) slice (times B·H for
        the problem): 2·D for Q·Kᵀ and 2·Dv for P·V per pair (Dv = ``head_dim_v``, or D)."""
        pairs = visible_pairs(self.q_len, self.k_len, self.mask, self.input_pos, self.window)
        return 2 * (head_dim + (head_dim if head_dim_v is None else head_dim_v)) * pairs


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


def layout_of(
    values: Mapping[str, Any], problem: ProblemShape, sm_slots: int = NOMINAL_SM_SLOTS
) -> DecodeLayout:
    """The decode layout of ``problem`` under the knob ``values``
    (:func:`kernels.decode_layout.decode_layout`, auto splits filling ``sm_slots``)."""
    return decode_layout(
        values, batch=problem.batch, heads=problem.heads,
        kv_heads=problem.kv_heads or problem.heads, q_len=problem.q_len, k_len=problem.k_len,
        sm_slots=lambda: sm_slots,
    )  # fmt: skip


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
    layout = layout_of(values, problem, sm_slots)
    return Schedule(
        problem.q_len, problem.k_len, layout.tile_m, values["tile_n"], mask, problem.input_pos,
        window, group=problem.group_size, pack_gqa=bool(values.get("pack_gqa")),
        kv_splits=layout.splits,
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
    """The tile shapes a point's records may have run, most specific first: the blocks a
    plugin reported its map in, the decode form's tile rows (its row knob is only their upper
    bound), the tiles a point says it launched (an autotuned point keeps them under
    ``launch``), then the config's own ``values``."""
    extras = list(extras)
    tile_m, tile_n = tile_shape(values)
    found: list[tuple[Any, Any]] = [
        (extra["block_map_tiles"][0], extra["block_map_tiles"][1])
        for extra in extras
        if isinstance(extra.get("block_map_tiles"), list) and len(extra["block_map_tiles"]) == 2
    ]
    found += [
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
