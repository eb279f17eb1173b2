"""The decode form's layout: the query heads of a KV head packed as rows, the key range split
across CTAs, and the one place where an "auto" split count is resolved (:func:`decode_layout`).

The kernel's launch plan (:func:`kernels.cutile.plan.plan_launch`), the host schedule the CPU
reference walks (:func:`kernels.config_schedule.schedule_of`) and the tuner's decode search
(:func:`kernels.decode_choice.decode_candidates`) all ask :func:`decode_layout`, so a split
count means the same everywhere. Pure Python: no cuda.tile, no NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


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


@dataclass(frozen=True)
class DecodeLayout:
    """How the decode form lays a problem out: ``heads`` slices per batch of ``rows`` rows
    each (the KV heads and group·q_len rows when packed, else the query heads and q_len),
    tiles of ``tile_m`` rows, and the key range's ``n_k_blocks`` in ``splits`` splits of
    ``split_blocks`` blocks each (``sm_slots``: the CTA slots an auto count filled, None where
    the count was given)."""

    heads: int
    rows: int
    tile_m: int
    n_k_blocks: int
    splits: int
    split_blocks: int
    sm_slots: int | None = None

    @property
    def row_blocks(self) -> int:
        return cdiv(self.rows, self.tile_m)


def decode_layout(
    values: Mapping[str, Any],
    *,
    batch: int,
    heads: int,
    kv_heads: int,
    q_len: int,
    k_len: int,
    sm_slots: Callable[[], int],
) -> DecodeLayout:
    """The decode form's layout of a problem under the knob ``values`` (``tile_m``,
    ``tile_n``, ``kv_splits``, ``pack_gqa``): rows per slice, tile rows and the splits that
    run. An "auto" split count (``kv_splits`` None) is resolved here and nowhere else, by
    :func:`auto_kv_splits` on the CTA slots ``sm_slots()`` says (asked only for auto)."""
    packed = bool(values.get("pack_gqa"))
    slices, rows = (kv_heads, (heads // kv_heads) * q_len) if packed else (heads, q_len)
    tile_m = decode_tile_m(values["tile_m"], rows)
    n_k_blocks = max(cdiv(k_len, values["tile_n"]), 1)
    requested = values.get("kv_splits", 1)
    slots = None
    if requested is None:
        slots = sm_slots()
        requested = auto_kv_splits(batch * slices * cdiv(rows, tile_m), n_k_blocks, slots)
    splits = effective_splits(n_k_blocks, requested)
    return DecodeLayout(
        slices, rows, tile_m, n_k_blocks, splits, blocks_per_split(n_k_blocks, splits), slots
    )
