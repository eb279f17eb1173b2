"""Head dims that are not powers of two: the width the kernel's tiles take for them.

cuTile tiles are powers of two, so a head dim of 80 or 96 runs in a 128-wide tile: Q, K and V
come in through bounds-checked loads that fill the columns past the array's with zeros (no copy
of the caller's tensors), the scores and the accumulator see zeros there, and the output's
store drops those columns. The list of head dims users may ask for is the registry's
(:data:`kernels.knobs.HEAD_DIM`), defined once.
"""

from __future__ import annotations


def tile_head_dim(head_dim: int) -> int:
    """The power of two (at least 16, a tensor-core MMA's K) a tile of ``head_dim`` columns
    takes."""
    return max(16, 1 << max(head_dim - 1, 0).bit_length())


def pads_head_dim(head_dim: int) -> bool:
    """Does ``head_dim`` run in a wider tile (not a power of two)?"""
    return tile_head_dim(head_dim) != head_dim
