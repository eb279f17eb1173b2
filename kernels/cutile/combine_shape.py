"""The decode combine's tile shape (splits, rows, head-dim columns per CTA), apart from the forms
so that :mod:`kernels.cutile.forms` stays within its size."""

from __future__ import annotations

from kernels.head_dims import tile_head_dim

# The combine's tile: at most this many rows and head-dim columns, and [splits, rows, columns]
# of float32 within this many elements (the head dim goes in column blocks over grid axis 2).
# On the H200 (tileiras 13.4) every combine of 64 or 128 columns that ran met a misaligned
# address and every one of 8-32 columns ran right (bench/results/experiments/h200-decode-*).
COMBINE_ROWS = 16
COMBINE_COLUMNS = 32
COMBINE_ELEMENTS = 4096


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def combine_tile(splits: int, rows: int, head_dim: int) -> tuple[int, int, int]:
    """The combine kernel's (splits padded, rows, head-dim columns) per CTA: every split in one
    load, at most :data:`COMBINE_ROWS` rows, at most :data:`COMBINE_COLUMNS` columns, and
    fewer to keep the tile near :data:`COMBINE_ELEMENTS` (at least 8: a 16-byte row of the
    16-bit output)."""
    tile_s = _pow2(splits)
    tile_r = min(_pow2(rows), COMBINE_ROWS)
    tile_dc = min(
        tile_head_dim(head_dim), COMBINE_COLUMNS, max(8, COMBINE_ELEMENTS // (tile_s * tile_r))
    )
    return tile_s, tile_r, tile_dc
