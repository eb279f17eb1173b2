"""Head dims that are not powers of two: the columns the kernel's tiles take for them.

cuTile tiles are powers of two. The prefill forms (one CTA per tile, and the grids that loop
over tiles) split a head dim into power-of-two column chunks, largest first (96 = 64 + 32, 80 =
64 + 16, 192 = 128 + 64): Q·Kᵀ sums one MMA per chunk of D and P·V keeps one accumulator per
chunk of Dv, so no MMA does work on columns past the array's. A chunk narrower than a tensor-
core MMA's K (:data:`MMA_K_MIN`) is padded to it (40 = 32 + 8 runs as 32 + 16, 248 as one 256).
Every other form runs the head dim in the next power-of-two tile. Either way the columns past
the array's come in through bounds-checked loads that fill them with zeros (no copy of the
caller's tensors) and the output's store drops them. The list of head dims users may ask for is
the registry's (:data:`kernels.knobs.HEAD_DIM`), defined once.
"""

from __future__ import annotations

# The K of one fp16/bf16 tensor-core MMA: the narrowest column chunk a tile takes.
MMA_K_MIN = 16
# What a plan says of a head dim's columns (LaunchPlan.head_columns).
EXACT, CHUNKED, PADDED = "exact", "chunked", "padded"


def tile_head_dim(head_dim: int) -> int:
    """The power of two (at least 16, a tensor-core MMA's K) a tile of ``head_dim`` columns
    takes."""
    return max(MMA_K_MIN, 1 << max(head_dim - 1, 0).bit_length())


def pads_head_dim(head_dim: int) -> bool:
    """Does ``head_dim`` run in a wider tile (not a power of two)?"""
    return tile_head_dim(head_dim) != head_dim


def column_chunks(head_dim: int) -> tuple[int, ...]:
    """The power-of-two column chunks of ``head_dim``, largest first: the set bits of the head
    dim rounded up to :data:`MMA_K_MIN`. Largest first, each chunk's offset is a whole number
    of its own widths, so chunk ``c`` at offset ``o`` is tile ``o // c`` of the columns."""
    span = -(-max(head_dim, 1) // MMA_K_MIN) * MMA_K_MIN
    return tuple(1 << bit for bit in range(span.bit_length() - 1, -1, -1) if span >> bit & 1)


def head_columns(head_dim: int, chunks: tuple[int, ...]) -> str:
    """How ``chunks`` cover ``head_dim``: :data:`EXACT` (one chunk, the head dim itself),
    :data:`CHUNKED` (several) or :data:`PADDED` (one chunk, wider than the head dim)."""
    if len(chunks) > 1:
        return CHUNKED
    return EXACT if chunks[0] == head_dim else PADDED
